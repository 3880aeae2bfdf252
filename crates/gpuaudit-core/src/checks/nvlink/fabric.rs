//! nvlink.fabric: on NVSwitch systems, the NVIDIA Fabric Manager (running, its version against
//! the driver's, its log) and each GPU's registration with the NVLink fabric (state, status,
//! clique).
//!
//! On an NVSwitch board (HGX/DGX A100, H100, H200, B200 8-GPU; DGX-2; GB200 NVL72) the GPUs
//! are wired to the switches only, and no GPU reaches another over NVLink until the fabric
//! manager has programmed the switches and every GPU has registered (`Fabric State:
//! Completed`, `Status: Success`). Until then CUDA reports the GPUs as not peer-capable or, on
//! Hopper and later, fails to initialise (cudaErrorSystemNotReady, 802). The fabric manager
//! refuses to start unless its version equals the driver's exactly.
//!
//! Where the switches are not visible to this OS (a VM given GPUs of a board whose switches
//! the host keeps, NVIDIA's shared NVSwitch virtualization model; an NVL72 compute tray whose
//! switches are managed from the switch trays), the fabric manager runs elsewhere: only the
//! GPUs' registration is judged, and the finding says what cannot be seen from here.

use crate::checks::causes::fabric_unregistered;
use crate::checks::common::{no_gpu_reason, selected, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Fabric, FabricManager, Facts, GpuFacts};
use crate::finding::{Cause, Evidence, Finding, Status};
use crate::parse::fabric_manager::generation;
use crate::policy::Policy;
use crate::reading::Reading;
use crate::render::escape::escape_line;
use crate::spec::NvlinkKind;

const ID: &str = "nvlink.fabric";

/// The NVLink version from which an NVSwitch board needs the NVLink Subnet Manager beside
/// the fabric manager (NVIDIA's Fabric Manager user guide: DGX/HGX B200 and B100 and later).
pub const NVLSM_FROM: u32 = 5;

/// At most this many of the log's last error lines go into a finding (each escaped and cut).
pub const MAX_LOG_LINES_SHOWN: usize = 3;

pub const CHECK: Check = Check {
    id: ID,
    title: "NVSwitch fabric: the fabric manager and each GPU's fabric registration",
    looks_at: "NVSwitch PCI functions and /dev/nvidia-nvswitch*, the nvidia-fabricmanager \
               service (unit file, nv-fabricmanager process), its version against the \
               driver's, /var/log/fabricmanager.log, each GPU's fabric state, status and clique",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Whether this is an NVSwitch system: NVSwitch PCI functions on the bus (vendor \
               0x10de with the NVSwitch driver's device ids: 0x1AE8 and 0x1AF0-0x1AFF for the \
               A100 generation, 0x22A0-0x22A7 for the H100 generation), the NVSwitch driver's \
               /dev/nvidia-nvswitch* nodes, a GPU that reports a fabric registration, or a GPU \
               model that reaches its peers only through NVSwitch (B200, GB200, V100 SXM3). \
               None of these: not applicable (PCIe, NVLink-bridge and directly wired NVLink \
               boards need no fabric manager). Then the fabric manager: its systemd unit \
               (nvidia-fabricmanager.service under /etc, /usr/lib or /lib/systemd/system), \
               whether an nv-fabricmanager process runs (/proc/<pid>/comm, readable without \
               root; on NVLink 5 boards, B200 and B300, an nvlsm process beside it), its version (`nv-fabricmanager --version`, else the log) against the \
               driver's, and the last error lines of /var/log/fabricmanager.log (its first \
               64 KiB and last 256 KiB, each line escaped and cut). Then each GPU's fabric \
               registration from NVML (nvmlDeviceGetGpuFabricInfo) or `nvidia-smi -q`'s Fabric \
               section: State, Status, CliqueId, ClusterUUID. Where the switches are not \
               visible to this OS and no fabric manager is installed here (a VM under NVIDIA's \
               shared NVSwitch virtualization model, where the host runs the fabric manager; \
               an NVL72 compute tray), only the GPUs' registration is judged and the finding \
               says what cannot be seen from here.",
        why: "On an NVSwitch board no GPU reaches another over NVLink until the fabric manager \
              has programmed the switches and each GPU has registered with the fabric: \
              before that CUDA reports the GPUs as not peer-capable, or fails to initialise \
              with cudaErrorSystemNotReady (802, 'system not yet initialized') on Hopper and \
              later. Judged: a fabric manager not installed or not running on an NVSwitch \
              system fails; a version other than the driver's fails (the fabric manager \
              refuses to start: 'fabric manager NVIDIA GPU driver interface version X don't \
              match with driver version Y'); on an NVLink 5 board (B200, B300) a fabric \
              manager running without the NVLink Subnet Manager (nvlsm) fails; a GPU whose registration is 'Not Started', or \
              'Completed' with a status other than Success, fails; 'In Progress' warns (the \
              fabric is still being trained: re-run in a minute), and fails where the fabric \
              manager is down, which is then the cause; GPUs of one machine in different \
              cliques warn (two NVLink partitions: NVLink reaches only within each). Error \
              lines of the fabric manager's log are information where all else passes.",
        verify: "lspci -d 10de: -nn | grep -i bridge   # NVSwitches: Bridge [0680]\n\
                 ls /dev/nvidia-nvswitch*\n\
                 systemctl is-active nvidia-fabricmanager\n\
                 pgrep -a nvlsm   # B200, B300\n\
                 nv-fabricmanager --version\n\
                 cat /proc/driver/nvidia/version\n\
                 nvidia-smi -q | grep -A5 Fabric\n\
                 sudo tail -n 50 /var/log/fabricmanager.log",
        fix: "Install the fabric manager of exactly the driver's version, `V=$(nvidia-smi \
              --query-gpu=driver_version --format=csv,noheader | head -1)` (Ubuntu, NVIDIA's \
              CUDA repository: `sudo apt-get install nvidia-fabricmanager-${V%%.*}=${V}-1`, from \
              R580 on `sudo apt-get install nvidia-fabricmanager=${V}-1`; RHEL: `sudo dnf \
              install nvidia-fabric-manager-${V}`; hold it with the driver: `sudo apt-mark hold \
              nvidia-fabricmanager-${V%%.*}`), then `sudo systemctl enable --now \
              nvidia-fabricmanager`; on \
              Blackwell (B200, B300) its NVLink Subnet Manager (nvlsm) too. A GPU still 'In \
              Progress' a few minutes after the fabric manager started: restart it (`sudo \
              systemctl restart nvidia-fabricmanager`), then reset the GPUs or reboot. In a \
              VM: the host runs the fabric manager; ask the provider.",
    },
    profiles: &[],
    run: check,
};

/// A GPU's fabric registration state, as the driver words it in one of its spellings
/// ("In Progress", "InProgress").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Completed,
    InProgress,
    NotStarted,
    NotSupported,
    Other,
}

fn state_of(f: &Fabric) -> State {
    let s: String = f
        .state
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '_')
        .collect::<String>()
        .to_ascii_lowercase();
    match s.as_str() {
        "completed" => State::Completed,
        "inprogress" => State::InProgress,
        "notstarted" => State::NotStarted,
        "notsupported" => State::NotSupported,
        _ => State::Other,
    }
}

/// The GPU's registration, where it reports one (the driver says the GPU is on a fabric).
fn reported(g: &GpuFacts) -> Option<&Fabric> {
    g.fabric
        .value()
        .filter(|f| state_of(f) != State::NotSupported || fabric_unregistered(g).is_some())
}

/// What the machine shows of NVSwitches.
struct Switches {
    /// NVSwitch PCI functions and device nodes this OS sees.
    visible: usize,
    /// GPUs that report a fabric registration.
    registered: Vec<u32>,
    /// GPUs whose model reaches its peers only through NVSwitch.
    switch_models: Vec<u32>,
    /// Of those, GPUs on a board with its switches (B200, B300, V100 SXM3; not a superchip of
    /// an NVL72 rack, whose switches are in switch trays of their own).
    board_switch_models: usize,
    /// Of those, GPUs with NVLink 5 (B200, B300): the fabric manager needs the NVLink Subnet
    /// Manager (nvlsm) beside it.
    nvlink5_boards: usize,
}

impl Switches {
    fn of(facts: &Facts, gpus: &[&GpuFacts]) -> Switches {
        let pci = facts.nvswitch.switches.value().map_or(0, Vec::len);
        let nodes = facts.nvswitch.device_nodes.value().map_or(0, Vec::len);
        Switches {
            visible: pci.max(nodes),
            registered: gpus
                .iter()
                .filter(|g| reported(g).is_some())
                .map(|g| g.index)
                .collect(),
            switch_models: gpus
                .iter()
                .filter(|g| spec_of(g).is_some_and(|s| s.nvlink_kind() == NvlinkKind::Switch))
                .map(|g| g.index)
                .collect(),
            board_switch_models: gpus
                .iter()
                .filter(|g| {
                    spec_of(g).is_some_and(|s| {
                        s.nvlink_kind() == NvlinkKind::Switch && s.form_factor != "superchip"
                    })
                })
                .count(),
            nvlink5_boards: gpus
                .iter()
                .filter(|g| {
                    spec_of(g).is_some_and(|s| {
                        s.nvlink_kind() == NvlinkKind::Switch
                            && s.form_factor != "superchip"
                            && s.nvlink.as_ref().is_some_and(|n| n.version >= NVLSM_FROM)
                    })
                })
                .count(),
        }
    }

    fn any(&self) -> bool {
        self.visible > 0 || !self.registered.is_empty() || !self.switch_models.is_empty()
    }
}

fn check(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let gpus: Vec<&GpuFacts> = selected(facts, policy).collect();
    if gpus.is_empty() {
        return vec![Finding::skip(ID, no_gpu_reason(facts))];
    }
    let sw = Switches::of(facts, &gpus);
    let mut ev = evidence(facts, &sw);
    if !sw.any() {
        return vec![match &facts.nvswitch.switches {
            Reading::Value(_) => Finding::pass(
                ID,
                "not applicable: no NVSwitch on the PCI bus and no GPU registered with an NVLink \
                 fabric (PCIe, NVLink-bridge and directly wired NVLink boards need no fabric \
                 manager)",
            )
            .evidence(ev),
            Reading::Unavailable(why) => Finding::skip(
                ID,
                format!(
                    "whether this is an NVSwitch system is not known: the PCI bus was not read \
                     ({}) and no GPU reports a fabric registration",
                    escape_line(why)
                ),
            )
            .evidence(ev),
        }];
    }
    let fm = &facts.nvswitch.fabric_manager;
    // The fabric manager is this OS's to run where it sees the switches, where one is
    // installed or runs here, or on bare metal with GPUs of a board whose switches the host
    // reaches over NVLink management NICs rather than PCI (HGX B200).
    // Inside a container the host's service, processes and log are not this OS's to see.
    let vm = facts.machine.hypervisor.value() == Some(&true);
    let here = match container(facts) {
        Some(_) => fm.running.value() == Some(&true),
        None => {
            sw.visible > 0
                || matches!(fm.unit_file, Reading::Value(Some(_)))
                || fm.running.value() == Some(&true)
                || (!vm && sw.board_switch_models > 0)
        }
    };
    let fm_finding = if here {
        manager(facts, fm, sw.nvlink5_boards > 0, &mut ev)
    } else {
        None
    };
    let fm_down = fm_finding
        .as_ref()
        .is_some_and(|f| f.status == Status::Fail);
    let mut out = Vec::new();
    let per_gpu: Vec<Finding> = gpus
        .iter()
        .filter_map(|g| registration(g, fm_down))
        .collect();
    let fine = gpus.iter().filter(|g| registered_fine(g)).count();
    out.push(match fm_finding {
        Some(f) => f.evidence(ev),
        None if !here => elsewhere(facts, &sw, per_gpu.is_empty(), fine, ev),
        None => fabric_summary(facts, fm, &sw, per_gpu.is_empty(), fine, ev),
    });
    out.extend(per_gpu);
    if let Some(w) = cliques(&gpus) {
        out.push(w);
    }
    out
}

fn evidence(facts: &Facts, sw: &Switches) -> Evidence {
    let mut ev = Evidence::new();
    match &facts.nvswitch.switches {
        Reading::Value(s) => {
            let list: Vec<String> = s
                .iter()
                .map(|s| match generation(s.device) {
                    Some(g) => format!("{} {:04x} {g}", s.bus_id, s.device),
                    None => format!("{} {:04x}", s.bus_id, s.device),
                })
                .collect();
            ev.insert("nvswitches", list);
        }
        Reading::Unavailable(r) => ev.insert("nvswitches_unavailable", escape_line(r)),
    }
    match &facts.nvswitch.device_nodes {
        Reading::Value(n) => ev.insert("nvswitch_device_nodes", n.len()),
        Reading::Unavailable(r) => ev.insert("nvswitch_device_nodes_unavailable", escape_line(r)),
    }
    if !sw.registered.is_empty() {
        ev.insert("gpus_with_fabric_registration", &sw.registered);
    }
    if !sw.switch_models.is_empty() {
        ev.insert("gpus_of_nvswitch_models", &sw.switch_models);
    }
    if let Reading::Value(v) = &facts.driver.version {
        ev.insert("driver_version", escape_line(v));
    }
    ev
}

/// The fabric manager's own finding, where it fails (or cannot be judged at all); `None`
/// where it runs with the driver's version (the summary then says so).
fn manager(
    facts: &Facts,
    fm: &FabricManager,
    needs_nvlsm: bool,
    ev: &mut Evidence,
) -> Option<Finding> {
    let log = fm.log.value();
    match &fm.unit_file {
        Reading::Value(Some(u)) => ev.insert("unit_file", escape_line(u)),
        Reading::Value(None) => ev.insert("unit_file", "none installed"),
        Reading::Unavailable(r) => ev.insert("unit_file_unavailable", escape_line(r)),
    }
    match &fm.enabled {
        Reading::Value(e) => ev.insert("enabled", e),
        Reading::Unavailable(r) => ev.insert("enabled_unavailable", escape_line(r)),
    }
    match &fm.running {
        Reading::Value(r) => ev.insert("running", r),
        Reading::Unavailable(r) => ev.insert("running_unavailable", escape_line(r)),
    }
    match &fm.version {
        Reading::Value(v) => ev.insert("fabric_manager_version", escape_line(v)),
        Reading::Unavailable(r) => ev.insert("fabric_manager_version_unavailable", escape_line(r)),
    }
    match &fm.log {
        Reading::Value(l) => {
            ev.insert("log_lines_read", l.lines);
            ev.insert("log_error_lines", l.error_count);
            let skip = l.errors.len().saturating_sub(MAX_LOG_LINES_SHOWN);
            ev.insert("log_last_errors", &l.errors[skip..]);
            if let Some(v) = &l.version {
                ev.insert("log_version", escape_line(v));
            }
        }
        Reading::Unavailable(r) => ev.insert("log_unavailable", escape_line(r)),
    }
    let driver = facts
        .driver
        .version
        .value()
        .map(|v| escape_line(v).into_owned());
    // The fabric manager's version: what it prints, else what its log names (the mismatch
    // line names both).
    let fm_version = fm
        .version
        .value()
        .cloned()
        .or_else(|| log.and_then(|l| l.mismatch.as_ref().map(|m| m.0.clone())))
        .or_else(|| log.and_then(|l| l.version.clone()))
        .map(|v| escape_line(&v).into_owned());
    // A mismatch line about the driver now loaded (one about an older driver is history).
    let logged_mismatch = log
        .and_then(|l| l.mismatch.as_ref())
        .filter(|(_, d)| driver.as_deref().is_none_or(|now| now == d));
    let last_error = log
        .and_then(|l| l.errors.last())
        .map(|e| format!("; its log's last error: \"{e}\""))
        .unwrap_or_default();
    let fix = |driver: Option<&str>| {
        // A version of digits and dots only goes into a command; anything else is asked for.
        let plain =
            driver.filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'));
        let (v, branch, named) = match plain {
            Some(v) => (
                v.to_string(),
                v.split('.').next().unwrap_or(v).to_string(),
                format!(" {v}"),
            ),
            None => (
                "${V}".to_string(),
                "${V%%.*}".to_string(),
                " (`V=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)`)"
                    .to_string(),
            ),
        };
        format!(
            "Install the fabric manager of exactly the driver's version{named} (Ubuntu, NVIDIA's CUDA repository: `sudo apt-get install nvidia-fabricmanager-{branch}={v}-1`, from R580 on `sudo apt-get install nvidia-fabricmanager={v}-1`; RHEL: `sudo dnf install nvidia-fabric-manager-{v}`), then `sudo systemctl enable --now nvidia-fabricmanager`; check with `nv-fabricmanager --version` and `nvidia-smi -q | grep -A5 Fabric`."
        )
    };
    // A version other than the driver's: the fabric manager refuses to start.
    let mismatch = match (&fm_version, &driver) {
        (Some(f), Some(d)) if f != d => Some((f.clone(), d.clone())),
        _ => {
            logged_mismatch.map(|(f, d)| (escape_line(f).into_owned(), escape_line(d).into_owned()))
        }
    };
    if let Some((f, d)) = mismatch {
        ev.insert("version_mismatch", true);
        return Some(
            Finding::fail(
                ID,
                format!(
                    "the fabric manager's version {f} is not the driver's {d}: it must equal \
                     it exactly, or the fabric manager refuses to start and the NVSwitch fabric \
                     stays down{}",
                    if fm.running.value() == Some(&false) {
                        " (it is not running)"
                    } else {
                        ""
                    }
                ),
            )
            .fix(fix(Some(&d))),
        );
    }
    match (&fm.running, &fm.unit_file) {
        (Reading::Value(false), Reading::Value(None)) => Some(
            Finding::fail(
                ID,
                "NVSwitch system without the fabric manager: no nvidia-fabricmanager unit is \
                 installed and no nv-fabricmanager runs; NVLink between the GPUs stays down \
                 until it has programmed the switches",
            )
            .fix(fix(driver.as_deref())),
        ),
        (Reading::Value(false), _) => Some(
            Finding::fail(
                ID,
                format!(
                    "the fabric manager is installed but not running (nvidia-fabricmanager{}): \
                     NVLink between the GPUs stays down until it has programmed the \
                     switches{last_error}",
                    if fm.enabled.value() == Some(&false) {
                        ", not enabled at boot"
                    } else {
                        ""
                    }
                ),
            )
            .fix(format!(
                "`sudo systemctl enable --now nvidia-fabricmanager`; if it stops again, `sudo tail -n 50 /var/log/fabricmanager.log` says why (a version other than the driver's {}: {})",
                driver.as_deref().unwrap_or("version"),
                fix(driver.as_deref())
            )),
        ),
        (Reading::Unavailable(why), _) => Some(
            Finding::skip(
                ID,
                format!(
                    "NVSwitch system: whether the fabric manager runs is not known ({})",
                    escape_line(why)
                ),
            ),
        ),
        (Reading::Value(true), _) => {
            if fm_version.is_none() {
                ev.insert("version_not_compared", true);
            }
            if !needs_nvlsm {
                return None;
            }
            match &fm.nvlsm_running {
                Reading::Value(true) => {
                    ev.insert("nvlsm_running", true);
                    None
                }
                Reading::Value(false) => Some(
                    Finding::fail(
                        ID,
                        "the fabric manager runs without the NVLink Subnet Manager (no nvlsm \
                         process): on NVLink 5 boards (HGX/DGX B200, B300) the switches stay \
                         unprogrammed without it and the GPUs never finish registering",
                    )
                    .fix("Install the fabric manager's nvlsm package of the driver's version and start both through the fabric manager's unit (`sudo systemctl restart nvidia-fabricmanager`: its start script starts nvlsm on NVLink 5 systems); check with `pgrep -a nvlsm`."),
                ),
                Reading::Unavailable(r) => {
                    ev.insert("nvlsm_running_unavailable", escape_line(r));
                    None
                }
            }
        }
    }
}

/// The GPU's registration is what a working fabric shows.
fn registered_fine(g: &GpuFacts) -> bool {
    reported(g).is_some() && fabric_unregistered(g).is_none()
}

/// A GPU's own finding where its registration is not what a working fabric shows (exactly
/// where [`fabric_unregistered`] holds, which nvlink.status names as its cause).
fn registration(g: &GpuFacts, fm_down: bool) -> Option<Finding> {
    let f = fabric_unregistered(g)?;
    let state = escape_line(&f.state);
    let status = f
        .status
        .as_deref()
        .map(|s| format!(", status {}", escape_line(s)))
        .unwrap_or_default();
    let who = g.label();
    let ev = Evidence::new()
        .with("fabric_state", &*state)
        .with("fabric_status", f.status.as_deref().map(escape_line));
    let finding = match state_of(f) {
        State::InProgress if !fm_down => Finding::warn(
            ID,
            format!(
                "{who}: fabric registration In Progress{status}: the NVLink fabric is still \
                 being set up; re-run in a minute (NVLink and CUDA wait for it to complete)"
            ),
        )
        .fix("Wait a minute and re-run; still In Progress after a few minutes: `sudo systemctl restart nvidia-fabricmanager` (in a VM: the host's fabric manager, ask the provider), then reset the GPUs or reboot."),
        State::InProgress | State::NotStarted => Finding::fail(
            ID,
            format!(
                "{who}: fabric registration {state}{status}: no NVLink to the other GPUs, and \
                 CUDA may refuse to start (cudaErrorSystemNotReady)"
            ),
        )
        .fix("Start the fabric manager with the driver's version (`sudo systemctl enable --now nvidia-fabricmanager`; in a VM, the host's: ask the provider); the registration then completes within a minute."),
        State::Completed | State::NotSupported => Finding::fail(
            ID,
            format!(
                "{who}: fabric registration {state} but failed{status}: this GPU has no NVLink \
                 to its peers"
            ),
        )
        .fix("Reset the GPU (`sudo nvidia-smi -r -i N` with nothing running) or reboot; `sudo tail -n 50 /var/log/fabricmanager.log` says why it failed."),
        State::Other => Finding::warn(
            ID,
            format!("{who}: fabric registration state '{state}'{status} is not one gpuaudit knows"),
        )
        .fix("Check `nvidia-smi -q | grep -A5 Fabric` and `sudo tail -n 50 /var/log/fabricmanager.log`; a registration that is not Completed leaves this GPU without NVLink."),
    };
    let finding = if fm_down {
        // The fabric manager's finding is the cause: one problem, its fix once.
        finding.caused_by(Cause::check(ID))
    } else {
        finding
    };
    Some(finding.evidence(ev).gpu(g.index))
}

/// The summary where the fabric manager runs here with the driver's version.
fn fabric_summary(
    facts: &Facts,
    fm: &FabricManager,
    sw: &Switches,
    gpus_fine: bool,
    fine: usize,
    ev: Evidence,
) -> Finding {
    let version = match (&fm.version, facts.driver.version.value()) {
        (Reading::Value(v), Some(_)) => format!("version {}, the driver's", escape_line(v)),
        (Reading::Value(v), None) => format!("version {} (the driver's not read)", escape_line(v)),
        (Reading::Unavailable(why), _) => format!("version not read: {}", escape_line(why)),
    };
    let regs = registrations(sw, fine);
    let log = fm.log.value().filter(|l| l.error_count > 0);
    let msg = format!("the fabric manager runs ({version}); {regs}");
    match log {
        Some(l) if gpus_fine => Finding::info(
            ID,
            format!(
                "{msg}; its log has {} error line(s), the last: \"{}\"",
                l.error_count,
                l.errors.last().map(String::as_str).unwrap_or("")
            ),
        ),
        // A pass needs the versions compared (equal: a mismatch failed before).
        _ if gpus_fine
            && fm.version.value().is_some()
            && facts.driver.version.value().is_some() =>
        {
            Finding::pass(ID, msg)
        }
        _ => Finding::info(ID, msg),
    }
    .evidence(ev)
}

fn registrations(sw: &Switches, fine: usize) -> String {
    if sw.registered.is_empty() {
        "no GPU reports a fabric registration".to_string()
    } else {
        format!(
            "{fine} of {} GPUs registered with the fabric (Completed, Success)",
            sw.registered.len()
        )
    }
}

/// The switches are not this OS's: the fabric manager runs elsewhere.
fn elsewhere(facts: &Facts, sw: &Switches, gpus_fine: bool, fine: usize, ev: Evidence) -> Finding {
    let vm = facts.machine.hypervisor.value() == Some(&true);
    let place = if let Some(kind) = container(facts) {
        format!(
            "inside a container ({}): the host runs the fabric manager, whose service, \
             processes and log this container does not see",
            escape_line(kind)
        )
    } else if vm {
        "this VM sees no NVSwitch: the host runs the fabric manager (NVIDIA's shared NVSwitch \
         virtualization model)"
            .to_string()
    } else {
        "this OS sees no NVSwitch and no fabric manager here: the switches are managed \
         elsewhere (an NVL72 compute tray's switches are managed from the switch trays)"
            .to_string()
    };
    let msg = format!(
        "{place}; its state, version and log cannot be read from here, only each GPU's \
         registration: {}",
        registrations(sw, fine)
    );
    if gpus_fine && !sw.registered.is_empty() {
        Finding::pass(ID, msg)
    } else {
        Finding::info(ID, msg)
    }
    .evidence(ev.with("fabric_manager", "not visible here"))
}

/// The container this runs in, where it runs in one.
fn container(facts: &Facts) -> Option<&str> {
    facts.host.container.inside.value()?.as_deref()
}

/// GPUs of this machine in more than one clique (NVLink partition).
fn cliques(gpus: &[&GpuFacts]) -> Option<Finding> {
    let mut by: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for g in gpus {
        if let Some(c) = reported(g)
            .filter(|_| registered_fine(g))
            .and_then(|f| f.clique_id)
        {
            by.entry(c).or_default().push(g.index);
        }
    }
    if by.len() < 2 {
        return None;
    }
    let parts: Vec<String> = by
        .iter()
        .map(|(c, g)| {
            let list: Vec<String> = g.iter().map(|i| format!("GPU{i}")).collect();
            format!("clique {c}: {}", list.join(", "))
        })
        .collect();
    Some(
        Finding::warn(
            ID,
            format!(
                "the GPUs are in {} NVLink partitions ({}): NVLink reaches only within each; \
                 a job across them goes over PCIe or the network",
                by.len(),
                parts.join("; ")
            ),
        )
        .with("cliques", &by)
        .fix("Where one partition is wanted, have the fabric manager's partition (or the provider's) cover all the GPUs; `nvidia-smi -q | grep -A5 Fabric` shows each GPU's CliqueId."),
    )
}

#[cfg(test)]
mod tests;
