//! One cause, one line: identical findings about several GPUs (same check, status, fix and
//! message once the GPU's label is set aside) are shown as one finding that names the GPUs
//! ("GPUs 0–7: NVSwitch fabric registration is 'In Progress' …") with one fix. The report's
//! JSON keeps one finding per GPU; the grouping is the views' alone.

use crate::facts::short_bus_id;
use crate::finding::{Evidence, Finding, Status};
use crate::report::Report;
use serde_json::Value;

/// Findings that say the same thing about different GPUs (or PCI devices).
#[derive(Clone, Debug)]
pub struct Group<'a> {
    pub check: &'a str,
    pub status: Status,
    /// The GPUs it is about, ascending; empty for a finding about the machine.
    pub gpus: Vec<u32>,
    /// PCI devices named at the head of the finding ("00:07.0 is bound to vfio-pci"), in
    /// report order; the group is named by them.
    pub devices: Vec<String>,
    /// The sentence, naming every GPU (or device) of the group.
    pub message: String,
    pub fix: Option<&'a str>,
    /// The findings of the group, in report order.
    pub findings: Vec<&'a Finding>,
    /// Their places in the findings grouped (the report's, for [`groups`]).
    pub indices: Vec<usize>,
    /// The group whose cause explains this one (its place in the groups), where a cause
    /// does (`caused_by`, resolved by `report::Causes` to the root of its chain); set by
    /// [`groups`].
    pub caused_by: Option<usize>,
}

impl Group<'_> {
    pub fn is_problem(&self) -> bool {
        matches!(self.status, Status::Fail | Status::Warn)
    }
}

/// Where a finding names its subject: the label's place in the message.
struct Subject {
    /// "GPU 1 (00:07.0)", or "00:07.0" for a device.
    label: String,
    at: usize,
    gpu: Option<u32>,
    /// The label is a PCI address ("00:07.0 is bound to nvidia"), not "GPU i (…)".
    device: bool,
}

fn subject(report: &Report, f: &Finding) -> Option<Subject> {
    let head = f.message.split(' ').next().filter(|h| is_pci_address(h));
    if let Some(i) = f.gpu {
        if let Some(bus) = report.gpus.iter().find(|g| g.index == i) {
            let label = format!("GPU {i} ({})", short_bus_id(&bus.pci_bus_id));
            if let Some(at) = f.message.find(&label) {
                return Some(Subject {
                    label,
                    at,
                    gpu: Some(i),
                    device: false,
                });
            }
        }
    }
    head.map(|h| Subject {
        label: h.to_string(),
        at: 0,
        gpu: f.gpu,
        device: true,
    })
}

/// "00:07.0", "0000:00:07.0" (hexadecimal bus:device.function, with or without domain).
fn is_pci_address(s: &str) -> bool {
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    let Some((rest, func)) = s.rsplit_once('.') else {
        return false;
    };
    let parts: Vec<&str> = rest.split(':').collect();
    hex(func, 1)
        && match parts.as_slice() {
            [bus, dev] => hex(bus, 2) && hex(dev, 2),
            [dom, bus, dev] => hex(dom, 4) && hex(bus, 2) && hex(dev, 2),
            _ => false,
        }
}

/// What makes two findings the same cause: the message with its subject cut out.
fn key(f: &Finding, s: Option<&Subject>) -> String {
    match s {
        Some(s) => format!(
            "{}\u{0}{}",
            &f.message[..s.at],
            &f.message[s.at + s.label.len()..]
        ),
        None => f.message.clone(),
    }
}

/// The findings of the report as groups, in report order (a group stands where its first
/// finding stood), each with the group whose cause explains it.
pub fn groups(report: &Report) -> Vec<Group<'_>> {
    let mut gs = group_findings(report, &report.findings);
    let causes = crate::report::Causes::of(&report.findings);
    let mut group_of = vec![0usize; report.findings.len()];
    for (gi, g) in gs.iter().enumerate() {
        for &i in &g.indices {
            group_of[i] = gi;
        }
    }
    for (gi, g) in gs.iter_mut().enumerate() {
        // The group's first finding speaks for it: the findings of one group share a
        // cause's check (the grouping key has it).
        let root = g.indices.first().map(|&i| group_of[causes.root_of(i)]);
        g.caused_by = root.filter(|r| *r != gi);
    }
    gs
}

/// [`groups`] over some of the report's findings, without their causes.
pub fn group_findings<'a>(report: &Report, findings: &'a [Finding]) -> Vec<Group<'a>> {
    struct Open<'a> {
        subjects: Vec<Subject>,
        findings: Vec<&'a Finding>,
        indices: Vec<usize>,
    }
    /// What a finding must share with a group to join it: check, status, fix, the message
    /// with its subject cut out, whether it names a subject, and its cause's check.
    #[derive(PartialEq, Eq, Hash)]
    struct Key<'a> {
        check: &'a str,
        status: Status,
        fix: Option<&'a str>,
        message: String,
        names_subject: bool,
        cause: Option<&'a str>,
    }
    // Only findings about a GPU or a device merge with others; two identical findings about
    // the machine are two findings. Groups are found by key (linear in the findings).
    let about_one = |f: &Finding, s: &Option<Subject>| f.gpu.is_some() || s.is_some();
    let mut open: Vec<Open<'a>> = Vec::new();
    let mut by_key: std::collections::HashMap<Key<'a>, usize> = std::collections::HashMap::new();
    for (i, f) in findings.iter().enumerate() {
        let s = subject(report, f);
        let mergeable = about_one(f, &s);
        let k = Key {
            check: &f.check,
            status: f.status,
            fix: f.fix.as_deref(),
            message: key(f, s.as_ref()),
            names_subject: s.is_some(),
            cause: f.caused_by.as_ref().map(|c| c.check.as_str()),
        };
        let same = if mergeable {
            by_key.get(&k).copied()
        } else {
            None
        };
        match same {
            Some(o) => {
                let o = &mut open[o];
                o.subjects.extend(s);
                o.findings.push(f);
                o.indices.push(i);
            }
            None => {
                if mergeable {
                    by_key.insert(k, open.len());
                }
                open.push(Open {
                    subjects: s.into_iter().collect(),
                    findings: vec![f],
                    indices: vec![i],
                });
            }
        }
    }
    open.into_iter()
        .map(|o| {
            let first = o.findings[0];
            let mut gpus: Vec<u32> = o.subjects.iter().filter_map(|s| s.gpu).collect();
            gpus.sort_unstable();
            gpus.dedup();
            if gpus.is_empty() {
                gpus = o.findings.iter().filter_map(|f| f.gpu).collect();
                gpus.sort_unstable();
                gpus.dedup();
            }
            let devices: Vec<String> = o
                .subjects
                .iter()
                .filter(|s| s.device)
                .map(|s| s.label.clone())
                .collect();
            let message = if o.findings.len() == 1 {
                first.message.clone()
            } else {
                let names = if devices.is_empty() {
                    gpus_label(&gpus)
                } else {
                    devices.join(", ")
                };
                merged_message(&first.message, o.subjects.first(), &names)
            };
            Group {
                check: &first.check,
                status: first.status,
                gpus,
                devices,
                message,
                fix: first.fix.as_deref(),
                findings: o.findings,
                indices: o.indices,
                caused_by: None,
            }
        })
        .collect()
}

/// The first finding's sentence with its subject replaced by the group's: at the head,
/// "GPUs 0–7: the rest", or, where a verb followed the one GPU, that verb made to agree with
/// several ("GPU 0 (00:06.0) is passed through" becomes "GPUs 0, 1 are passed through");
/// inside, the names in its place, the verb after them agreeing too.
fn merged_message(message: &str, s: Option<&Subject>, names: &str) -> String {
    let Some(s) = s else {
        return format!("{names}: {message}");
    };
    let before = &message[..s.at];
    let after = &message[s.at + s.label.len()..];
    match (before.is_empty(), plural_verb(after)) {
        (_, Some(agreed)) => format!("{before}{names}{agreed}"),
        (true, None) => {
            let rest = after.trim_start_matches(':').trim_start();
            format!("{names}: {rest}")
        }
        (false, None) => format!("{before}{names}{after}"),
    }
}

/// The rest of a sentence whose subject was one GPU (or device) and is now several, where
/// the word after the subject is a verb of one: " is passed through" -> " are passed
/// through". `None` where no such verb follows.
fn plural_verb(after: &str) -> Option<String> {
    let rest = after.strip_prefix(' ')?;
    let end = rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    let (word, tail) = rest.split_at(end);
    let many = match word {
        "is" => "are",
        "has" => "have",
        "was" => "were",
        "does" => "do",
        _ => return None,
    };
    // "is an NVIDIA H200" of one is "are NVIDIA H200" of several.
    let tail = match word {
        "is" | "was" => tail
            .strip_prefix(" an ")
            .or_else(|| tail.strip_prefix(" a "))
            .map_or(tail.to_string(), |t| format!(" {t}")),
        _ => tail.to_string(),
    };
    Some(format!(" {many}{tail}"))
}

/// "GPU 3", "GPUs 0, 1", "GPUs 0–3, 5".
pub fn gpus_label(gpus: &[u32]) -> String {
    match gpus {
        [] => String::new(),
        [one] => format!("GPU {one}"),
        _ => format!("GPUs {}", ranges(gpus)),
    }
}

/// Ascending indices with runs of three or more as ranges: "0–3, 5", "0, 1", "0–7".
pub fn ranges(v: &[u32]) -> String {
    let mut sorted = v.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            parts.push(format!("{}–{}", sorted[i], sorted[j]));
        } else {
            parts.extend(sorted[i..=j].iter().map(|x| x.to_string()));
        }
        i = j + 1;
    }
    parts.join(", ")
}

/// The evidence keys that say most about a check's finding, first (`a.b`: key `b` of the
/// object under `a`); the others follow in the order the check wrote them. A key a check no
/// longer writes is passed over.
fn preferred_keys(check: &str) -> &'static [&'static str] {
    match check {
        "pcie.link" => &["width_current", "width_max", "gen_current", "gen_max"],
        "power.limit" => &["limit_w", "default_limit_w", "spec_tdp_w"],
        "clocks.max" => &["sm_max_mhz", "app_sm_mhz", "spec_boost_mhz"],
        "nvlink.status" => &["links_active", "spec_links", "fabric_state", "links"],
        "memory.errors" => &["volatile_uncorrected", "aggregate_uncorrected", "xids"],
        "gpu.identity" => &["name", "memory_total_mib", "spec_memory_gb"],
        "host.shm" => &["size_bytes", "fstype"],
        "stability.burn" => &[
            "tflops.median",
            "telemetry.sm_clock_mhz.median",
            "telemetry.temperature_c.max",
            "tflops_cv",
        ],
        "memory.bandwidth" => &["copy_gbps", "datasheet_gbps"],
        "pcie.bandwidth" => &["h2d_pinned_gbps", "d2h_pinned_gbps", "link_gbps"],
        "nccl.allreduce" => &["busbw_gbps", "expected_gbps", "latency_1mib_us"],
        "cuda.context-latency" => &["total_ms.median", "expected_max_ms", "persistence_mode"],
        _ => &[],
    }
}

/// Longest value shown in brief; longer ones are in the JSON.
const BRIEF_VALUE_CHARS: usize = 40;
/// How many evidence values the brief shows.
pub const BRIEF_VALUES: usize = 4;

/// A value short enough for one line: numbers, booleans, short strings, short lists of
/// those, small maps (`{"PHB": 1}` as "PHB 1").
fn brief_value(v: &Value) -> Option<String> {
    let s = match v {
        Value::Null => return None,
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() => short_number(x),
            _ => n.to_string(),
        },
        // Quoted where a space or comma would blur where the value ends.
        Value::String(s) if s.contains([' ', ',']) => format!("'{s}'"),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "none".into(),
        Value::Array(a) if a.len() <= 4 => a
            .iter()
            .map(|x| match x {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?
            .join(", "),
        Value::Object(m) if !m.is_empty() && m.len() <= 3 => m
            .iter()
            .map(|(k, x)| match x {
                Value::Number(n) => Some(format!("{k}:{n}")),
                Value::String(s) => Some(format!("{k}:{s}")),
                Value::Bool(b) => Some(format!("{k}:{b}")),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?
            .join(", "),
        _ => return None,
    };
    (s.chars().count() <= BRIEF_VALUE_CHARS).then_some(s)
}

/// `key=value, key=value`, as the views show the brief evidence.
pub fn evidence_text(ev: &[(String, String)]) -> String {
    ev.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The key evidence of a group in brief: up to [`BRIEF_VALUES`] `(key, value)` pairs, where
/// the GPUs of the group differ "min–max" (numbers) or "differs by GPU"; `source` (where
/// the values came from) is left for [`evidence_source`].
pub fn brief_evidence(g: &Group) -> Vec<(String, String)> {
    let Some(first) = g.findings.first() else {
        return Vec::new();
    };
    let ev: &Evidence = &first.evidence;
    let mut keys: Vec<&str> = preferred_keys(g.check)
        .iter()
        .copied()
        .filter(|k| at_path(ev, k).is_some())
        .collect();
    for k in ev.0.keys() {
        // An object shown by one of its values is not shown again whole.
        let shown_inside = keys.iter().any(|p| {
            p.strip_prefix(k.as_str())
                .is_some_and(|rest| rest.starts_with('.'))
        });
        if !keys.contains(&k.as_str()) && !shown_inside {
            keys.push(k);
        }
    }
    let mut out = Vec::new();
    for k in keys {
        if out.len() == BRIEF_VALUES {
            break;
        }
        if k == "source" {
            continue;
        }
        let values: Vec<Option<&Value>> =
            g.findings.iter().map(|f| at_path(&f.evidence, k)).collect();
        let Some(Some(v0)) = values.first() else {
            continue;
        };
        let Some(shown) = brief_value(v0) else {
            continue;
        };
        if values.iter().all(|v| *v == Some(*v0)) {
            out.push((k.to_string(), shown));
            continue;
        }
        let nums: Option<Vec<f64>> = values.iter().map(|v| v.and_then(Value::as_f64)).collect();
        let shown = match nums {
            Some(n) if !n.is_empty() => {
                let lo = n.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = n.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{}–{}", short_number(lo), short_number(hi))
            }
            _ => "differs by GPU".into(),
        };
        out.push((k.to_string(), shown));
    }
    out
}

/// A number to about three significant digits: "700", "57.6", "6.25", "0.0480".
/// The value at `a.b.c` of the evidence.
fn at_path<'v>(ev: &'v Evidence, path: &str) -> Option<&'v Value> {
    let mut parts = path.split('.');
    let mut v = ev.get(parts.next()?)?;
    for p in parts {
        v = v.get(p)?;
    }
    Some(v)
}

/// A whole number as it is, any other to about three significant digits.
fn short_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        super::fmt_value(x)
    }
}

/// Where the evidence came from (`source`), where the check says.
pub fn evidence_source<'a>(g: &Group<'a>) -> Option<&'a str> {
    g.findings.first()?.evidence.get("source")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Facts, Origin};
    use crate::policy::Policy;
    use crate::testing::Machine;

    fn report(findings: Vec<Finding>) -> Report {
        let facts: Facts = Machine::healthy("h200-sxm-141gb", 8).build();
        Report::from_findings(&facts, &Policy::default(), findings)
    }

    fn fabric(i: u32) -> Finding {
        let bus = format!("00:{:02x}.0", 6 + i);
        Finding::fail(
            "nvlink.status",
            format!("GPU {i} ({bus}): fabric registration is 'In Progress'"),
        )
        .gpu(i)
        .with("links_active", 18)
        .with("fabric_state", "In Progress")
        .with("source", "nvidia-smi")
        .fix("Start the fabric manager.")
    }

    #[test]
    fn ranges_compress_runs_of_three_or_more() {
        assert_eq!(ranges(&[0, 1, 2, 3, 5]), "0–3, 5");
        assert_eq!(ranges(&[0, 1]), "0, 1");
        assert_eq!(ranges(&[7, 0, 1, 2, 6, 5]), "0–2, 5–7");
        assert_eq!(ranges(&[0, 2, 4]), "0, 2, 4");
        assert_eq!(ranges(&[3, 3]), "3");
        assert_eq!(gpus_label(&[4]), "GPU 4");
        assert_eq!(gpus_label(&[0, 1, 2, 3, 4, 5, 6, 7]), "GPUs 0–7");
        assert_eq!(gpus_label(&[]), "");
    }

    #[test]
    fn one_cause_on_eight_gpus_is_one_group_with_one_fix() {
        let r = report((0..8).map(fabric).collect());
        let g = groups(&r);
        assert_eq!(g.len(), 1, "{g:#?}");
        assert_eq!(g[0].gpus, (0..8).collect::<Vec<_>>());
        assert_eq!(
            g[0].message,
            "GPUs 0–7: fabric registration is 'In Progress'"
        );
        assert_eq!(g[0].fix, Some("Start the fabric manager."));
        assert_eq!(g[0].findings.len(), 8);
    }

    #[test]
    fn different_messages_status_or_fix_are_not_merged() {
        let mut other = fabric(3);
        other.message = "GPU 3 (00:09.0): fabric registration is 'Not Supported'".into();
        let mut warn = fabric(4);
        warn.status = Status::Warn;
        let mut fix = fabric(5);
        fix.fix = Some("Reboot.".into());
        let r = report(vec![fabric(0), fabric(1), other, warn, fix, fabric(2)]);
        let g = groups(&r);
        let shapes: Vec<(Vec<u32>, Status)> =
            g.iter().map(|g| (g.gpus.clone(), g.status)).collect();
        assert_eq!(
            shapes,
            vec![
                (vec![0, 1, 2], Status::Fail),
                (vec![3], Status::Fail),
                (vec![4], Status::Warn),
                (vec![5], Status::Fail),
            ]
        );
        // A group of one keeps its sentence as the check wrote it.
        assert!(g[1].message.starts_with("GPU 3 (00:09.0): "));
        assert_eq!(
            g[0].message,
            "GPUs 0–2: fabric registration is 'In Progress'"
        );
    }

    #[test]
    fn a_label_inside_the_sentence_is_replaced_in_place() {
        let f = |i: u32| {
            Finding::warn(
                "cuda.env",
                format!(
                    "TORCH_CUDA_ARCH_LIST leaves out GPU {i} (00:{:02x}.0) (compute capability 9.0)",
                    6 + i
                ),
            )
            .gpu(i)
        };
        let r = report(vec![f(0), f(1), f(3)]);
        let g = groups(&r);
        assert_eq!(g.len(), 1);
        assert_eq!(
            g[0].message,
            "TORCH_CUDA_ARCH_LIST leaves out GPUs 0, 1, 3 (compute capability 9.0)"
        );
    }

    /// A verb that followed the one GPU agrees with several once they are merged: "GPUs 0, 1
    /// are passed through", not "GPUs 0, 1: is passed through".
    #[test]
    fn the_verb_after_the_merged_gpus_agrees() {
        let merged = |text: &str| {
            let f = |i: u32| {
                Finding::info(
                    "gpu.virtualization",
                    text.replace("LABEL", &format!("GPU {i} (00:{:02x}.0)", 6 + i)),
                )
                .gpu(i)
            };
            groups(&report(vec![f(0), f(1)]))[0].message.clone()
        };
        for (one, many) in [
            (
                "LABEL is passed through to this VM",
                "GPUs 0, 1 are passed through to this VM",
            ),
            ("LABEL has 18 links", "GPUs 0, 1 have 18 links"),
            ("LABEL was reset", "GPUs 0, 1 were reset"),
            ("LABEL does not answer", "GPUs 0, 1 do not answer"),
            (
                "LABEL is, as it should be, fine",
                "GPUs 0, 1 are, as it should be, fine",
            ),
            // The article of one goes with it.
            ("LABEL is an NVIDIA H200", "GPUs 0, 1 are NVIDIA H200"),
            ("LABEL was a Tesla T4", "GPUs 0, 1 were Tesla T4"),
            ("LABEL has a power cap", "GPUs 0, 1 have a power cap"),
            ("LABEL is anomalous", "GPUs 0, 1 are anomalous"),
            // Inside the sentence too.
            (
                "since LABEL is busy, nothing ran",
                "since GPUs 0, 1 are busy, nothing ran",
            ),
            // No verb of one after the label: as before.
            ("LABEL: is passed through", "GPUs 0, 1: is passed through"),
            ("LABEL at gen5 x16", "GPUs 0, 1: at gen5 x16"),
            ("LABEL isolated", "GPUs 0, 1: isolated"),
            ("LABEL trained at x8", "GPUs 0, 1: trained at x8"),
            ("on LABEL is", "on GPUs 0, 1 are"),
            ("on LABEL", "on GPUs 0, 1"),
        ] {
            assert_eq!(merged(one), many, "{one}");
        }
        assert_eq!(plural_verb(" is"), Some(" are".to_string()));
        assert_eq!(plural_verb("is"), None);
        assert_eq!(plural_verb(" this"), None);
        assert_eq!(plural_verb(""), None);
    }

    #[test]
    fn devices_named_by_pci_address_group_too() {
        let f = |bus: &str| {
            Finding::fail("gpu.driver-binding", format!("{bus} has no driver bound")).fix("x")
        };
        let r = report(vec![f("00:06.0"), f("00:07.0")]);
        let g = groups(&r);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].message, "00:06.0, 00:07.0 have no driver bound");
        assert_eq!(g[0].devices, vec!["00:06.0", "00:07.0"]);
        assert!(g[0].gpus.is_empty());
        // With a GPU index too: named by the devices, counted as GPUs.
        let r = report(vec![
            Finding::pass("gpu.driver-binding", "00:06.0 is bound to nvidia").gpu(0),
            Finding::pass("gpu.driver-binding", "00:07.0 is bound to nvidia").gpu(1),
        ]);
        let g = groups(&r);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].message, "00:06.0, 00:07.0 are bound to nvidia");
        assert_eq!(g[0].gpus, vec![0, 1]);
        assert!(is_pci_address("0000:c1:00.0"));
        assert!(!is_pci_address("00:06"));
        assert!(!is_pci_address("/dev/nvidia0"));
        assert!(!is_pci_address("zz:06.0"));
        assert!(!is_pci_address("00:zz.0"));
        assert!(!is_pci_address("00:06.z"));
        // With a domain, each of its parts must be hexadecimal too.
        assert!(!is_pci_address("zzzz:c1:00.0"));
        assert!(!is_pci_address("0000:zz:00.0"));
        assert!(!is_pci_address("0000:c1:zz.0"));
        assert!(!is_pci_address("0:c1:00.0"));
        assert!(!is_pci_address("a:b:c:00.0"));
    }

    #[test]
    fn problems_are_fails_and_warnings() {
        let r = report(vec![
            Finding::fail("a.b", "x"),
            Finding::warn("a.c", "x"),
            Finding::info("a.d", "x"),
            Finding::pass("a.e", "x"),
            Finding::skip("a.f", "x"),
        ]);
        let p: Vec<bool> = groups(&r).iter().map(Group::is_problem).collect();
        assert_eq!(p, vec![true, true, false, false, false]);
    }

    #[test]
    fn identical_sentences_about_several_gpus_are_named_together() {
        let f = |i: u32| Finding::fail("cuda.framework", "torch lacks sm_90").gpu(i);
        let r = report(vec![f(0), f(1)]);
        let g = groups(&r);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].message, "GPUs 0, 1: torch lacks sm_90");
    }

    #[test]
    fn identical_machine_findings_stay_apart() {
        let f = || Finding::warn("cuda.env", "CUDA_LAUNCH_BLOCKING=1");
        let r = report(vec![f(), f()]);
        assert_eq!(groups(&r).len(), 2);
        // A finding whose GPU the report does not list keeps its own line.
        let mut facts = Facts::empty(Origin::Live, "x");
        facts.gpus = crate::Reading::unavailable("x");
        let r = Report::from_findings(&facts, &Policy::default(), vec![fabric(0), fabric(1)]);
        assert_eq!(groups(&r).len(), 2);
    }

    #[test]
    fn brief_evidence_prefers_the_key_values_and_shows_spread() {
        let f = |i: u32, w: u32| {
            Finding::fail(
                "pcie.link",
                format!("GPU {i} (00:{:02x}.0) trained low", 6 + i),
            )
            .gpu(i)
            .with("gen_current", 5)
            .with("gen_max", 5)
            .with("gen_max_gpu", 5)
            .with("width_current", w)
            .with("width_max", 16)
            .with("sysfs_current", "gen5 x8")
            .with("source", "nvidia-smi")
            .fix("Reseat.")
        };
        let r = report(vec![f(1, 8)]);
        let g = groups(&r);
        let ev = brief_evidence(&g[0]);
        let keys: Vec<&str> = ev.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            vec!["width_current", "width_max", "gen_current", "gen_max"]
        );
        assert_eq!(ev[0].1, "8");
        assert_eq!(evidence_source(&g[0]), Some("nvidia-smi"));
        // Merged GPUs that differ in a value show its spread (the messages are the same).
        let r = report(vec![f(1, 8), f(2, 4)]);
        let g = groups(&r);
        assert_eq!(g.len(), 1);
        assert_eq!(
            brief_evidence(&g[0])[0],
            ("width_current".into(), "4–8".into())
        );
        let f = Finding::warn("x.y", "m")
            .with("cv", 0.04797817042217599)
            .with("gbps", 57.64)
            .with("error", 0.001);
        let r = report(vec![f]);
        let shown: Vec<String> = brief_evidence(&groups(&r)[0])
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(shown, vec!["0.0480", "57.6", "0.00100"]);
        // A preferred key may name a value inside an object.
        let burn = Finding::fail("stability.burn", "m")
            .with(
                "tflops",
                serde_json::json!({"n": 60, "median": 704.0, "min": 700.0}),
            )
            .with("tflops_cv", 0.01)
            .with(
                "telemetry",
                serde_json::json!({"sm_clock_mhz": {"median": 1755}}),
            );
        let r = report(vec![burn]);
        let keys: Vec<String> = brief_evidence(&groups(&r)[0])
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            vec![
                "tflops.median",
                "telemetry.sm_clock_mhz.median",
                "tflops_cv"
            ]
        );
        let spaced = Finding::warn("x.y", "m").with("state", "In Progress");
        let r = report(vec![spaced]);
        assert_eq!(brief_evidence(&groups(&r)[0])[0].1, "'In Progress'");
        // Long values and nested objects are left to the JSON.
        let long = Finding::warn("x.y", "m")
            .with("path", "/a".repeat(40))
            .with("nested", serde_json::json!({"a": {"b": 1}}))
            .with("links", serde_json::json!({"PHB": 1}))
            .with("none", serde_json::Value::Null);
        let r = report(vec![long]);
        let g = groups(&r);
        assert_eq!(
            brief_evidence(&g[0]),
            vec![("links".to_string(), "PHB:1".to_string())]
        );
    }
}
