//! `nvidia-smi -q -x`: the driver's view of every GPU, as XML.
//!
//! Tag names differ between driver generations (`clocks_throttle_reasons` before R535,
//! `clocks_event_reasons` after; power under `power_readings` or `gpu_power_readings`); both
//! are accepted. "N/A" and missing elements become `Reading::Unavailable` with the reason.
//!
//! So does a zero where the driver writes 0 for "I do not know": a vGPU guest prints its
//! maximum clocks as `0 MHz`, power limits of a GPU the driver cannot manage read `0.00 W`, and
//! a PCI device id whose device half is `0000` (`000000DE`) names no device. Those fields are
//! read with [`Why0`]: the zero becomes `Unavailable` with the reason. Zeros that are readings
//! (error counters, utilisation, memory used, a replay count) stay values.

use super::text::{fact_line, first_line, shorten};
use super::ParseError;
use crate::facts::{
    normalize_bus_id, Clocks, Ecc, Fabric, GpuFacts, GpuMemory, GpuProcess, Mig, PcieLink, Power,
    RemappedRows, RetiredPages, ThrottleReason, VirtualizationMode,
};
use crate::reading::Reading;
use roxmltree::{Document, Node, ParsingOptions};

/// What one `nvidia-smi -q -x` run says.
#[derive(Clone, Debug)]
pub struct NvsmiLog {
    pub driver_version: Option<String>,
    /// `<cuda_version>`: the newest CUDA the driver supports ("13.0").
    pub cuda_version: Option<String>,
    /// `<attached_gpus>`: how many GPUs the driver says are attached. It can exceed `gpus.len()`
    /// (`nvidia-smi -q -x -i N`, or a log cut down before publishing), so it is read on its own
    /// rather than inferred from the `<gpu>` elements.
    pub attached_gpus: Reading<u32>,
    /// In document order; `index` is the position (nvidia-smi lists GPUs in NVML order). At
    /// most [`MAX_GPUS`].
    pub gpus: Vec<GpuFacts>,
    /// `<gpu>` elements beyond [`MAX_GPUS`], not read.
    pub gpus_left_out: usize,
}

/// The most GPUs read from one log: NVML's own limit per machine is far below it, so more is a
/// hostile or broken file, and every GPU costs memory and report lines.
pub const MAX_GPUS: usize = 256;

const SOURCE: &str = "nvidia-smi";

/// A real log of 8 GPUs has about 25,000 nodes; the cap keeps hostile input from eating memory.
const NODES_LIMIT: u32 = 2_000_000;

pub fn parse(xml: &str) -> Result<NvsmiLog, ParseError> {
    let text = xml.trim_start_matches('\u{feff}');
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    // nvidia-smi may print a warning (a corrupt infoROM, a deprecated option) before the XML
    // on the same stream; start at the first line that opens the document.
    let start = xml_start(text).ok_or_else(|| ParseError::NotXml(first_line(text)))?;
    let body = without_doctype(&text[start..])?;
    // The DTD is blanked out, so no entity but the five predefined ones: an entity bomb or an
    // external entity (a file of the auditing machine) is an error, not a 3 GB string or a
    // leak.
    let opts = ParsingOptions {
        allow_dtd: false,
        nodes_limit: NODES_LIMIT,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(&body, opts)
        .map_err(|e| ParseError::Malformed(format!("nvidia-smi XML: {e}")))?;
    let root = doc.root_element();
    if root.tag_name().name() != "nvidia_smi_log" {
        return Err(ParseError::Malformed(format!(
            "nvidia-smi XML: root element is <{}>, expected <nvidia_smi_log>",
            root.tag_name().name()
        )));
    }
    let mut gpus = Vec::new();
    let mut gpus_left_out = 0;
    for node in root.children().filter(|n| n.has_tag_name("gpu")) {
        if gpus.len() >= MAX_GPUS {
            gpus_left_out += 1;
            continue;
        }
        // Below MAX_GPUS, so it fits.
        let index = gpus.len() as u32;
        gpus.push(parse_gpu(node, index)?);
    }
    Ok(NvsmiLog {
        driver_version: plain_text(child(root, "driver_version")),
        cuda_version: plain_text(child(root, "cuda_version")),
        attached_gpus: attached_gpus(root),
        gpus,
        gpus_left_out,
    })
}

fn attached_gpus(root: Node) -> Reading<u32> {
    let Some(node) = child(root, "attached_gpus") else {
        return Reading::unavailable(format!("{SOURCE}: <attached_gpus> missing"));
    };
    let t = node.text().unwrap_or("").trim();
    match not_available(t) {
        Some(why) => Reading::unavailable(format!("{SOURCE}: <attached_gpus> {why}")),
        None => number(t, &[], "attached_gpus"),
    }
}

/// The largest internal DTD subset read: nvidia-smi's own (`nvidia-smi -q -x --dtd`, the
/// nvsmi_device_v13.dtd of R580) is 28 KB, so 1 MiB is 36 times it; a larger one is
/// no nvidia-smi output, and its declarations would only be thrown away.
pub const MAX_INTERNAL_SUBSET: usize = 1 << 20;

/// The document with its document type declaration blanked out, in either form nvidia-smi
/// writes: `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">` (the external DTD is never
/// fetched), or with `--dtd` the DTD itself as an internal subset (`<!DOCTYPE nvidia_smi_log [
/// <!ELEMENT ...> <!ATTLIST ...> ]>`). The subset is read declaration by declaration and may
/// hold only what the document does not need to be read: element, attribute-list and
/// notation declarations, comments and processing instructions (attribute defaults are not
/// applied). An entity declaration (general or parameter, internal or `SYSTEM`/`PUBLIC`), a
/// parameter-entity reference, anything else, and a subset larger than
/// [`MAX_INTERNAL_SUBSET`] are refused with the reason: entities are how a document grows to
/// gigabytes or reads a file of the auditing machine, and nvidia-smi declares none.
fn without_doctype(doc: &str) -> Result<std::borrow::Cow<'_, str>, ParseError> {
    let mut i = 0;
    loop {
        let rest = &doc[i..];
        let t = rest.trim_start();
        i += rest.len() - t.len();
        // The prolog: the XML declaration, processing instructions, comments.
        let skip = if t.starts_with("<?") {
            t.find("?>").map(|e| e + 2)
        } else if t.starts_with("<!--") {
            t.find("-->").map(|e| e + 3)
        } else {
            None
        };
        if let Some(n) = skip {
            i += n;
            continue;
        }
        if !t.starts_with("<!DOCTYPE") {
            // No declaration (the XML parser refuses one further on).
            return Ok(std::borrow::Cow::Borrowed(doc));
        }
        let len = doctype_len(t)?;
        // Blanks keep the positions (and line numbers) of what follows for error messages.
        let mut out = String::with_capacity(doc.len());
        out.push_str(&doc[..i]);
        out.extend(t[..len].chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
        out.push_str(&doc[i + len..]);
        return Ok(std::borrow::Cow::Owned(out));
    }
}

fn dtd_error(what: impl std::fmt::Display) -> ParseError {
    ParseError::Malformed(format!("nvidia-smi XML: {what}"))
}

/// The length in bytes of the `<!DOCTYPE ...>` declaration at the start of `t`, its internal
/// subset checked as [`without_doctype`] says.
fn doctype_len(t: &str) -> Result<usize, ParseError> {
    let unterminated = || dtd_error("unterminated <!DOCTYPE");
    let b = t.as_bytes();
    // The name and the external id: up to '[' or '>' outside a quoted literal.
    let mut i = "<!DOCTYPE".len();
    loop {
        match b.get(i) {
            None => return Err(unterminated()),
            Some(b'>') => return Ok(i + 1),
            Some(b'[') => break,
            Some(&q @ (b'"' | b'\'')) => i = quoted_end(b, i, q).ok_or_else(unterminated)?,
            Some(_) => i += 1,
        }
    }
    let subset = i + 1;
    i = subset;
    loop {
        if i - subset > MAX_INTERNAL_SUBSET {
            return Err(dtd_error(format_args!(
                "the internal DTD subset (<!DOCTYPE ... [ ]>) is larger than {} KiB, which no \
                 nvidia-smi writes: not read",
                MAX_INTERNAL_SUBSET >> 10
            )));
        }
        let rest = &t[i..];
        let r = rest.trim_start();
        i += rest.len() - r.len();
        if let Some(after) = r.strip_prefix(']') {
            // `]`, blanks, `>`.
            let a = after.trim_start();
            return match a.strip_prefix('>') {
                Some(_) => Ok(t.len() - a.len() + 1),
                None if a.is_empty() => Err(unterminated()),
                None => Err(dtd_error("unexpected text after the internal DTD subset")),
            };
        }
        let len = if r.starts_with("<!--") {
            r.find("-->").map(|e| e + 3)
        } else if r.starts_with("<?") {
            r.find("?>").map(|e| e + 2)
        } else if r.starts_with("<!ENTITY") {
            return Err(dtd_error(format_args!(
                "the document declares an entity ({}): an entity can expand to gigabytes or \
                 read a file of the auditing machine, and nvidia-smi declares none: not read",
                head(r)
            )));
        } else if r.starts_with('%') {
            return Err(parameter_entity(r));
        } else if ["<!ELEMENT", "<!ATTLIST", "<!NOTATION"]
            .iter()
            .any(|k| r.starts_with(k))
        {
            declaration_len(r)?
        } else if r.is_empty() {
            None
        } else {
            return Err(dtd_error(format_args!(
                "unexpected {} in the internal DTD subset, where nvidia-smi writes only \
                 <!ELEMENT>, <!ATTLIST> and comments: not read",
                head(r)
            )));
        };
        i += len.ok_or_else(unterminated)?;
    }
}

/// The index just past the closing quote of the literal opened at `b[open]`.
fn quoted_end(b: &[u8], open: usize, quote: u8) -> Option<usize> {
    let len = b.get(open + 1..)?.iter().position(|&c| c == quote)?;
    Some(open + len + 2)
}

/// The length of the markup declaration (`<!ELEMENT`, `<!ATTLIST`, `<!NOTATION`) at the start
/// of `r`, to its `>` outside quoted literals (an attribute's default value may hold one);
/// `None` where it does not end. A parameter-entity reference in it is refused.
fn declaration_len(r: &str) -> Result<Option<usize>, ParseError> {
    let b = r.as_bytes();
    let mut i = 2;
    while let Some(&c) = b.get(i) {
        match c {
            b'>' => return Ok(Some(i + 1)),
            b'"' | b'\'' => match quoted_end(b, i, c) {
                Some(e) => i = e,
                None => return Ok(None),
            },
            b'%' => return Err(parameter_entity(r)),
            _ => i += 1,
        }
    }
    Ok(None)
}

fn parameter_entity(r: &str) -> ParseError {
    dtd_error(format_args!(
        "the internal DTD subset refers to a parameter entity ({}), which only an entity \
         declaration defines and nvidia-smi never writes: not read",
        head(r)
    ))
}

/// The start of a declaration, for a message: its first line, cut short.
fn head(r: &str) -> String {
    shorten(r.lines().next().unwrap_or(r).trim_end(), 60)
}

/// Byte offset of the first line that opens with '<' (the XML declaration, normally). Whatever
/// follows is handed to the XML parser, which says what is wrong with it if anything is.
fn xml_start(text: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('<') {
            return Some(offset + (line.len() - t.len()));
        }
        offset += line.len();
    }
    None
}

fn parse_gpu(gpu: Node, index: u32) -> Result<GpuFacts, ParseError> {
    let bus_id = gpu
        .attribute("id")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .or_else(|| plain_text_ref(path(gpu, &["pci", "pci_bus_id"])))
        .ok_or_else(|| {
            ParseError::Malformed(format!(
                "nvidia-smi XML: GPU {index} has no PCI bus id (neither <gpu id=...> nor <pci/pci_bus_id>)"
            ))
        })?;
    let g = Gpu(gpu);
    Ok(GpuFacts {
        index,
        pci_bus_id: normalize_bus_id(bus_id),
        source: SOURCE.to_string(),
        name: g.string(&["product_name"]),
        uuid: g.string(&["uuid"]),
        serial: g.string(&["serial"]),
        pci_device_id: pci_device_id(&g),
        pci_subsystem_id: pci_subsystem_id(&g),
        architecture: g.string(&["product_architecture"]),
        compute_capability: Reading::unavailable("nvidia-smi -q does not report it"),
        compute_capability_source: None,
        vbios: g.string(&["vbios_version"]),
        board_part_number: g.string(&["board_part_number"]),
        memory: GpuMemory {
            total_mib: g.num_known(&["fb_memory_usage", "total"], &["MiB"], Why0::Memory),
            used_mib: g.num(&["fb_memory_usage", "used"], &["MiB"]),
            free_mib: g.num(&["fb_memory_usage", "free"], &["MiB"]),
            reserved_mib: g.num(&["fb_memory_usage", "reserved"], &["MiB"]),
        },
        sm_count: Reading::unavailable("nvidia-smi -q does not report it"),
        pcie: pcie(&g),
        power: power(&g),
        clocks: Clocks {
            sm_mhz: g.num_known(&["clocks", "sm_clock"], &["MHz"], Why0::CurrentClock),
            mem_mhz: g.num_known(&["clocks", "mem_clock"], &["MHz"], Why0::CurrentClock),
            sm_max_mhz: g.num_known(&["max_clocks", "sm_clock"], &["MHz"], Why0::Clock),
            mem_max_mhz: g.num_known(&["max_clocks", "mem_clock"], &["MHz"], Why0::Clock),
            app_sm_mhz: g.num_known(
                &["applications_clocks", "graphics_clock"],
                &["MHz"],
                Why0::Clock,
            ),
            app_mem_mhz: g.num_known(&["applications_clocks", "mem_clock"], &["MHz"], Why0::Clock),
            default_app_sm_mhz: g.num_known(
                &["default_applications_clocks", "graphics_clock"],
                &["MHz"],
                Why0::Clock,
            ),
        },
        throttle_reasons: throttle_reasons(gpu),
        performance_state: g.string(&["performance_state"]),
        persistence_mode: g.enabled(&["persistence_mode"]),
        mig: Mig {
            current: g
                .enabled(&["mig_mode", "current_mig"])
                .or_reason_suffix("no MIG on this GPU"),
            pending: g
                .enabled(&["mig_mode", "pending_mig"])
                .or_reason_suffix("no MIG on this GPU"),
        },
        virtualization: g
            .text(&["gpu_virtualization_mode", "virtualization_mode"])
            .map(virtualization_mode),
        compute_mode: g.string(&["compute_mode"]),
        ecc: ecc(&g),
        retired_pages: retired_pages(&g),
        remapped_rows: remapped_rows(&g),
        temperature_c: g.num_known(&["temperature", "gpu_temp"], &["C"], Why0::Temperature),
        utilization_pct: g.num(&["utilization", "gpu_util"], &["%"]),
        processes: processes(&g),
        nvlinks: Reading::unavailable(
            "nvidia-smi -q does not list NVLink links; see nvidia-smi nvlink -s",
        ),
        fabric: fabric(&g),
    })
}

/// One `<gpu>` element, with readers that turn its fields into readings.
struct Gpu<'a, 'input>(Node<'a, 'input>);

impl<'a, 'input> Gpu<'a, 'input> {
    /// The trimmed text at `p`, or why there is none.
    fn text(&self, p: &[&str]) -> Reading<&'a str> {
        let Some(node) = path(self.0, p) else {
            return Reading::unavailable(format!("{SOURCE}: <{}> missing", p.join("/")));
        };
        let t = node.text().unwrap_or("").trim();
        match not_available(t) {
            Some(why) => Reading::unavailable(format!("{SOURCE}: <{}> {why}", p.join("/"))),
            None => Reading::Value(t),
        }
    }

    /// Text as a fact: one line, capped (a product name of megabytes stays out of the report).
    fn string(&self, p: &[&str]) -> Reading<String> {
        self.text(p).map(fact_line)
    }

    /// A number with one of the expected units ("143771 MiB", "34 C", "16x", "5").
    fn num<T: std::str::FromStr>(&self, p: &[&str], units: &[&str]) -> Reading<T> {
        let what = p.join("/");
        self.text(p).and_then(|t| number(t, units, &what))
    }

    /// A number for which the driver writes 0 where it does not know the value: 0 is
    /// `Unavailable` with `why`'s reason.
    fn num_known<T: std::str::FromStr + PartialEq + Default>(
        &self,
        p: &[&str],
        units: &[&str],
        why: Why0,
    ) -> Reading<T> {
        let raw = self.text(p);
        let shown = raw.value().map(|t| t.to_string());
        let n: Reading<T> = raw.and_then(|t| number(t, units, &p.join("/")));
        match (n, shown) {
            (Reading::Value(v), Some(t)) if v == T::default() => zero_unknown(p, &t, why),
            (n, _) => n,
        }
    }

    fn float(&self, p: &[&str], unit: &str) -> Reading<f64> {
        let what = p.join("/");
        self.text(p).and_then(|t| float(t, unit, &what))
    }

    /// [`Gpu::float`] where 0 means "not known" (power limits, the draw).
    fn float_known(&self, p: &[&str], unit: &str, why: Why0) -> Reading<f64> {
        let raw = self.text(p);
        let shown = raw.value().map(|t| t.to_string());
        match (self.float(p, unit), shown) {
            (Reading::Value(0.0), Some(t)) => zero_unknown(p, &t, why),
            (n, _) => n,
        }
    }

    /// "Enabled" / "Disabled".
    fn enabled(&self, p: &[&str]) -> Reading<bool> {
        let what = p.join("/");
        self.text(p).and_then(|t| match t {
            "Enabled" => Reading::Value(true),
            "Disabled" => Reading::Value(false),
            _ => unexpected(&what, t),
        })
    }

    /// "Yes" / "No".
    fn yes(&self, p: &[&str]) -> Reading<bool> {
        let what = p.join("/");
        self.text(p).and_then(|t| yes_no(t, &what))
    }
}

trait ReasonSuffix {
    fn or_reason_suffix(self, why: &str) -> Self;
}

impl<T> ReasonSuffix for Reading<T> {
    /// Adds a word of explanation to an "N/A" reason.
    fn or_reason_suffix(self, why: &str) -> Self {
        match self {
            Reading::Unavailable(r) if r.ends_with(" N/A") => {
                Reading::Unavailable(format!("{r} ({why})"))
            }
            other => other,
        }
    }
}

/// What a zero means in a field where the driver writes 0 for "not known".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why0 {
    /// A maximum or application clock: a vGPU guest prints `0 MHz` for every one of them.
    Clock,
    /// A current clock: 0 MHz where the guest does not see it or the domain is gated at idle
    /// (an RTX 3090 at P8 prints `<sm_clock>0 MHz</sm_clock>`); no GPU that runs clocks at 0.
    CurrentClock,
    /// A power limit or draw: a board runs at no limit of 0 W and never draws 0 W.
    Power,
    /// The GPU temperature: 0 C in a guest that has no sensor (the P4 vGPU log).
    Temperature,
    /// The memory size: a GPU without memory is none.
    Memory,
    /// A PCIe generation or width: generation 0 and width x0 do not exist.
    Link,
}

impl Why0 {
    fn reason(self) -> &'static str {
        match self {
            Why0::Clock => "which the driver reports where it does not know (vGPU guest)",
            Why0::CurrentClock => {
                "which the driver reports where it does not know (vGPU guest) or the clock is \
                 gated at idle: not the GPU's speed"
            }
            Why0::Power => {
                "which the driver reports where it does not know (no board power reading)"
            }
            Why0::Temperature => {
                "which the driver reports where it has no sensor reading (vGPU guest)"
            }
            Why0::Memory => "which the driver reports where it does not know the memory size",
            Why0::Link => "which the driver reports where it does not know the link",
        }
    }
}

fn zero_unknown<T>(p: &[&str], shown: &str, why: Why0) -> Reading<T> {
    Reading::unavailable(format!(
        "{SOURCE}: <{}> {shown}, {}",
        p.join("/"),
        why.reason()
    ))
}

/// `<pci_device_id>`: nvidia-smi prints device << 16 | vendor ("233510DE"). A device half of
/// 0x0000 or 0xffff (`000000DE`, zeroed before publishing, or an unreadable register) names
/// no device: not available, never the evidence "device 0x0000".
fn pci_device_id(g: &Gpu) -> Reading<u16> {
    let what = ["pci", "pci_device_id"];
    let raw = g.text(&what);
    let shown = raw.value().map(|t| t.to_string());
    match (raw.and_then(|t| hex_u32(t, "pci/pci_device_id")), shown) {
        (Reading::Value(v), Some(t)) => {
            let device = (v >> 16) as u16;
            if device == 0 || device == 0xffff {
                Reading::unavailable(format!(
                    "{SOURCE}: <pci/pci_device_id> {t}: its device half is {}, which names no \
                     device (zeroed, or not readable)",
                    unset_half(device)
                ))
            } else {
                Reading::Value(device)
            }
        }
        (r, _) => r.map(|v| (v >> 16) as u16),
    }
}

/// How an unset half of a PCI id is said: in words, so that no reader takes it for an id.
fn unset_half(half: u16) -> &'static str {
    if half == 0 {
        "all zeros"
    } else {
        "all ones"
    }
}

/// `<pci_sub_system_id>`: subsystem device << 16 | subsystem vendor. A subsystem device of
/// 0x0000 or 0xffff is a zeroed or unreadable register, as with the device id.
fn pci_subsystem_id(g: &Gpu) -> Reading<u32> {
    let raw = g.text(&["pci", "pci_sub_system_id"]);
    let shown = raw.value().map(|t| t.to_string());
    match (raw.and_then(|t| hex_u32(t, "pci/pci_sub_system_id")), shown) {
        (Reading::Value(v), Some(t)) if matches!(v >> 16, 0 | 0xffff) => {
            Reading::unavailable(format!(
                "{SOURCE}: <pci/pci_sub_system_id> {t}: its subsystem device half is {}, which \
                 names no board (zeroed, or not readable)",
                unset_half((v >> 16) as u16)
            ))
        }
        (r, _) => r,
    }
}

fn pcie(g: &Gpu) -> PcieLink {
    let gen = |leaf: &str| {
        g.num_known(
            &["pci", "pci_gpu_link_info", "pcie_gen", leaf],
            &[],
            Why0::Link,
        )
    };
    let width = |leaf: &str| {
        g.num_known(
            &["pci", "pci_gpu_link_info", "link_widths", leaf],
            &["x"],
            Why0::Link,
        )
    };
    PcieLink {
        gen_current: gen("current_link_gen"),
        gen_max: gen("max_link_gen"),
        gen_max_gpu: gen("max_device_link_gen"),
        gen_max_host: gen("max_host_link_gen"),
        width_current: width("current_link_width"),
        width_max: width("max_link_width"),
        replay_counter: g.num(&["pci", "replay_counter"], &[]),
    }
}

fn power(g: &Gpu) -> Power {
    // R535 moved the block from <power_readings> to <gpu_power_readings>, R550 split the draw
    // into average and instant; R555 still writes <power_draw> inside the new block.
    let block = if child(g.0, "gpu_power_readings").is_some() {
        "gpu_power_readings"
    } else if child(g.0, "power_readings").is_some() {
        "power_readings"
    } else {
        let why = format!("{SOURCE}: <gpu_power_readings> and <power_readings> missing");
        return Power {
            draw_w: Reading::unavailable(why.clone()),
            limit_w: Reading::unavailable(why.clone()),
            default_limit_w: Reading::unavailable(why.clone()),
            min_limit_w: Reading::unavailable(why.clone()),
            max_limit_w: Reading::unavailable(why),
        };
    };
    let w = |leaf: &str| g.float_known(&[block, leaf], "W", Why0::Power);
    // Of several tags for one value, the first readable one in this order; GA100 and older
    // GPUs on R550+ write <average_power_draw> as N/A next to a readable instant draw.
    let first = |leaves: &[&str]| -> Reading<f64> {
        leaves
            .iter()
            .filter(|l| path(g.0, &[block, l]).is_some())
            .map(|l| w(l))
            .reduce(Reading::or)
            .unwrap_or_else(|| {
                Reading::unavailable(format!(
                    "{SOURCE}: none of {} in <{block}>",
                    leaves
                        .iter()
                        .map(|l| format!("<{l}>"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    };
    Power {
        draw_w: first(&["power_draw", "average_power_draw", "instant_power_draw"]),
        limit_w: first(&["current_power_limit", "enforced_power_limit", "power_limit"]),
        default_limit_w: w("default_power_limit"),
        min_limit_w: w("min_power_limit"),
        max_limit_w: w("max_power_limit"),
    }
}

fn throttle_reasons(gpu: Node) -> Reading<Vec<ThrottleReason>> {
    let (block, prefix) = if let Some(b) = child(gpu, "clocks_event_reasons") {
        (b, "clocks_event_reason_")
    } else if let Some(b) = child(gpu, "clocks_throttle_reasons") {
        (b, "clocks_throttle_reason_")
    } else {
        return Reading::unavailable(format!(
            "{SOURCE}: <clocks_event_reasons> and <clocks_throttle_reasons> missing"
        ));
    };
    let mut active = Vec::new();
    let mut read_any = false;
    for el in block.children().filter(Node::is_element) {
        let Some(reason) = el
            .tag_name()
            .name()
            .strip_prefix(prefix)
            .and_then(throttle_reason)
        else {
            continue;
        };
        // "N/A" (a reason this GPU does not report) neither counts as read nor as active.
        match el.text().unwrap_or("").trim() {
            "Active" => {
                read_any = true;
                if !active.contains(&reason) {
                    active.push(reason);
                }
            }
            "Not Active" => read_any = true,
            _ => {}
        }
    }
    if read_any {
        active.sort();
        Reading::Value(active)
    } else {
        Reading::unavailable(format!(
            "{SOURCE}: no readable reason in <{}>",
            block.tag_name().name()
        ))
    }
}

fn throttle_reason(name: &str) -> Option<ThrottleReason> {
    Some(match name {
        "gpu_idle" => ThrottleReason::GpuIdle,
        // `user_defined_clocks` is the pre-R346 name of the same NVML bit.
        "applications_clocks_setting" | "user_defined_clocks" => {
            ThrottleReason::ApplicationsClocksSetting
        }
        "sw_power_cap" => ThrottleReason::SwPowerCap,
        "hw_slowdown" => ThrottleReason::HwSlowdown,
        "sync_boost" => ThrottleReason::SyncBoost,
        "sw_thermal_slowdown" => ThrottleReason::SwThermalSlowdown,
        "hw_thermal_slowdown" => ThrottleReason::HwThermalSlowdown,
        "hw_power_brake_slowdown" => ThrottleReason::HwPowerBrakeSlowdown,
        "display_clocks_setting" => ThrottleReason::DisplayClocksSetting,
        _ => return None,
    })
}

fn virtualization_mode(text: &str) -> VirtualizationMode {
    let key: String = text
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    match key.as_str() {
        "none" => VirtualizationMode::None,
        "passthrough" => VirtualizationMode::PassThrough,
        "vgpu" => VirtualizationMode::Vgpu,
        "hostvgpu" => VirtualizationMode::HostVgpu,
        "hostvsga" => VirtualizationMode::HostVsga,
        _ => VirtualizationMode::Other(fact_line(text)),
    }
}

fn ecc(g: &Gpu) -> Ecc {
    Ecc {
        current: g.enabled(&["ecc_mode", "current_ecc"]),
        pending: g.enabled(&["ecc_mode", "pending_ecc"]),
        volatile_corrected: ecc_count(g, "volatile", Kind::Corrected),
        volatile_uncorrected: ecc_count(g, "volatile", Kind::Uncorrected),
        aggregate_corrected: ecc_count(g, "aggregate", Kind::Corrected),
        aggregate_uncorrected: ecc_count(g, "aggregate", Kind::Uncorrected),
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Corrected,
    Uncorrected,
}

/// ECC error counts in any of the three layouts: `single_bit/total` and `double_bit/total`
/// (Volta and older), `sram_*` and `dram_*` (Ampere on R450..R530), with the uncorrectable
/// SRAM count split into parity and SEC-DED (R535 and later).
fn ecc_count(g: &Gpu, scope: &str, kind: Kind) -> Reading<u64> {
    let Some(block) = path(g.0, &["ecc_errors", scope]) else {
        return Reading::unavailable(format!("{SOURCE}: <ecc_errors/{scope}> missing"));
    };
    let has = |leaf: &str| child(block, leaf).is_some();
    let parts: Vec<Vec<&str>> = if has("single_bit") || has("double_bit") {
        match kind {
            Kind::Corrected => vec![vec!["single_bit", "total"]],
            Kind::Uncorrected => vec![vec!["double_bit", "total"]],
        }
    } else if has("sram_correctable") || has("dram_correctable") {
        match kind {
            Kind::Corrected => vec![vec!["sram_correctable"], vec!["dram_correctable"]],
            Kind::Uncorrected if has("sram_uncorrectable") => {
                vec![vec!["sram_uncorrectable"], vec!["dram_uncorrectable"]]
            }
            Kind::Uncorrected => vec![
                vec!["sram_uncorrectable_parity"],
                vec!["sram_uncorrectable_secded"],
                vec!["dram_uncorrectable"],
            ],
        }
    } else {
        return Reading::unavailable(format!(
            "{SOURCE}: no known ECC counters in <ecc_errors/{scope}>"
        ));
    };
    // A partial sum would understate the errors: every part must be readable.
    let mut total: u64 = 0;
    for part in parts {
        let mut p = vec!["ecc_errors", scope];
        p.extend(part);
        match g.num::<u64>(&p, &[]) {
            Reading::Value(n) => match total.checked_add(n) {
                Some(t) => total = t,
                None => {
                    return Reading::unavailable(format!(
                        "{SOURCE}: <ecc_errors/{scope}> counts overflow"
                    ))
                }
            },
            Reading::Unavailable(r) => return Reading::Unavailable(r),
        }
    }
    Reading::Value(total)
}

fn retired_pages(g: &Gpu) -> Reading<RetiredPages> {
    if child(g.0, "retired_pages").is_none() {
        return Reading::unavailable(format!("{SOURCE}: <retired_pages> missing"));
    }
    let single = g.num::<u64>(
        &[
            "retired_pages",
            "multiple_single_bit_retirement",
            "retired_count",
        ],
        &[],
    );
    let double = g.num::<u64>(
        &["retired_pages", "double_bit_retirement", "retired_count"],
        &[],
    );
    // R390 writes only <pending_retirement>; later drivers add <pending_blacklist>.
    let pending = g
        .yes(&["retired_pages", "pending_retirement"])
        .or(g.yes(&["retired_pages", "pending_blacklist"]));
    let is_na = |r: &Reading<_>| r.reason().is_some_and(|s: &str| s.contains(" N/A"));
    if is_na(&single) && is_na(&double) {
        // The driver's N/A, whatever the architecture: Ampere and later remap rows instead, and
        // older GPUs in a VM or under some drivers report no pages either (memory.errors,
        // which knows the architecture, says which).
        return Reading::unavailable(format!("{SOURCE}: <retired_pages> N/A"));
    }
    match (single, double, pending) {
        (Reading::Value(single_bit), Reading::Value(double_bit), Reading::Value(pending)) => {
            Reading::Value(RetiredPages {
                single_bit,
                double_bit,
                pending,
            })
        }
        (s, d, p) => Reading::Unavailable(first_reason(&[s.reason(), d.reason(), p.reason()])),
    }
}

fn remapped_rows(g: &Gpu) -> Reading<RemappedRows> {
    let Some(block) = child(g.0, "remapped_rows") else {
        return Reading::unavailable(format!("{SOURCE}: <remapped_rows> missing"));
    };
    if !block.children().any(|c| c.is_element()) {
        let t = block.text().unwrap_or("").trim();
        // Not "before Ampere": an A100 under MIG or in a VM writes N/A too (memory.errors,
        // which knows the architecture, says what it means).
        return Reading::unavailable(format!(
            "{SOURCE}: <remapped_rows> {}",
            not_available(t).unwrap_or("empty")
        ));
    }
    let corr = g.num::<u64>(&["remapped_rows", "remapped_row_corr"], &[]);
    let unc = g.num::<u64>(&["remapped_rows", "remapped_row_unc"], &[]);
    let pending = g.yes(&["remapped_rows", "remapped_row_pending"]);
    let failure = g.yes(&["remapped_rows", "remapped_row_failure"]);
    match (corr, unc, pending, failure) {
        (
            Reading::Value(correctable),
            Reading::Value(uncorrectable),
            Reading::Value(pending),
            Reading::Value(failure),
        ) => Reading::Value(RemappedRows {
            correctable,
            uncorrectable,
            pending,
            failure,
        }),
        (c, u, p, f) => Reading::Unavailable(first_reason(&[
            c.reason(),
            u.reason(),
            p.reason(),
            f.reason(),
        ])),
    }
}

fn processes(g: &Gpu) -> Reading<Vec<GpuProcess>> {
    let Some(block) = child(g.0, "processes") else {
        return Reading::unavailable(format!("{SOURCE}: <processes> missing"));
    };
    let entries: Vec<Node> = block
        .children()
        .filter(|n| n.has_tag_name("process_info"))
        .collect();
    if entries.is_empty() {
        // "<processes>N/A</processes>" is not the same as an empty list.
        if let Some(why) =
            not_available(block.text().unwrap_or("").trim()).filter(|w| *w != "empty")
        {
            return Reading::unavailable(format!("{SOURCE}: <processes> {why}"));
        }
    }
    let mut out = Vec::new();
    for p in entries {
        let pid_text = plain_text_ref(child(p, "pid"));
        // A process list with one unreadable entry would undercount what runs on the GPU.
        let Some(pid) = pid_text.and_then(|t| t.parse::<u32>().ok()) else {
            return Reading::unavailable(format!(
                "{SOURCE}: <processes/process_info/pid> unreadable: {:?}",
                pid_text.unwrap_or("missing")
            ));
        };
        let used_mib = plain_text_ref(child(p, "used_memory"))
            .and_then(|t| number::<u64>(t, &["MiB"], "used_memory").into_value());
        out.push(GpuProcess {
            pid,
            name: plain_text(child(p, "process_name")),
            used_mib,
        });
    }
    Reading::Value(out)
}

fn fabric(g: &Gpu) -> Reading<Fabric> {
    g.string(&["fabric", "state"])
        .or_reason_suffix("no NVSwitch fabric")
        .map(|state| Fabric {
            state,
            status: plain_text(path(g.0, &["fabric", "status"])),
            clique_id: plain_text_ref(path(g.0, &["fabric", "cliqueId"]))
                .and_then(|t| t.parse::<u32>().ok()),
            cluster_uuid: plain_text(path(g.0, &["fabric", "clusterUuid"]))
                .and_then(|u| crate::facts::fabric_cluster_uuid(&u)),
        })
}

// ----- small readers -------------------------------------------------------------------------

fn child<'a, 'input>(node: Node<'a, 'input>, name: &str) -> Option<Node<'a, 'input>> {
    node.children()
        .find(|c| c.is_element() && c.has_tag_name(name))
}

fn path<'a, 'input>(node: Node<'a, 'input>, p: &[&str]) -> Option<Node<'a, 'input>> {
    p.iter().try_fold(node, |n, name| child(n, name))
}

/// The trimmed text of an element, `None` when it is missing or says it is not available.
fn plain_text_ref<'a>(node: Option<Node<'a, '_>>) -> Option<&'a str> {
    let t = node?.text()?.trim();
    not_available(t).is_none().then_some(t)
}

fn plain_text(node: Option<Node>) -> Option<String> {
    plain_text_ref(node).map(fact_line)
}

/// nvidia-smi's ways of saying a value is not there; `Some(what it said)` for those.
fn not_available(t: &str) -> Option<&'static str> {
    let bare = t.trim_start_matches('[').trim_end_matches(']').trim();
    Some(match bare {
        "" => "empty",
        "N/A" => "N/A",
        "Not Supported" => "not supported",
        "Unknown" | "Unknown Error" => "unknown error",
        "Insufficient Permissions" => "insufficient permissions",
        "GPU is lost" => "GPU is lost",
        "Requested functionality has been deprecated" => "deprecated",
        // Owners who publish a log hide identifying fields this way (telegraf's RTX 3090).
        "REDACTED" | "Redacted" => "redacted",
        _ => return None,
    })
}

fn unexpected<T>(what: &str, text: &str) -> Reading<T> {
    Reading::unavailable(format!(
        "{SOURCE}: <{what}> unexpected value {:?}",
        shorten(text, 40)
    ))
}

fn yes_no(t: &str, what: &str) -> Reading<bool> {
    match t {
        "Yes" => Reading::Value(true),
        "No" => Reading::Value(false),
        _ => unexpected(what, t),
    }
}

/// "143771 MiB" -> 143771 when "MiB" is among `units`; a bare number when `units` is empty.
fn number<T: std::str::FromStr>(t: &str, units: &[&str], what: &str) -> Reading<T> {
    match strip_unit(t, units) {
        Some(n) => match n.parse::<T>() {
            Ok(v) => Reading::Value(v),
            Err(_) => unexpected(what, t),
        },
        None => unexpected(what, t),
    }
}

fn float(t: &str, unit: &str, what: &str) -> Reading<f64> {
    match strip_unit(t, &[unit]).and_then(|n| n.parse::<f64>().ok()) {
        // "inf" and "NaN" parse as floats but are not readings.
        Some(v) if v.is_finite() && v >= 0.0 => Reading::Value(v),
        _ => unexpected(what, t),
    }
}

fn strip_unit<'t>(t: &'t str, units: &[&str]) -> Option<&'t str> {
    if units.is_empty() {
        return Some(t.trim());
    }
    units
        .iter()
        .find_map(|u| t.strip_suffix(u))
        .map(str::trim)
        .filter(|n| !n.is_empty())
}

/// "233510DE" (also "0x233510DE") -> 0x233510DE; more than 32 bits is unreadable, not wrapped.
fn hex_u32(t: &str, what: &str) -> Reading<u32> {
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return unexpected(what, t);
    }
    match u32::from_str_radix(digits, 16) {
        Ok(v) => Reading::Value(v),
        Err(_) => unexpected(what, t),
    }
}

fn first_reason(reasons: &[Option<&str>]) -> String {
    reasons
        .iter()
        .flatten()
        .next()
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("{SOURCE}: unreadable"))
}

#[cfg(test)]
mod tests;
