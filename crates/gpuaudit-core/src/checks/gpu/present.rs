//! gpu.present: the NVIDIA GPUs on the PCI bus against the GPUs the driver answers for.

use crate::checks::causes;
use crate::checks::common::{count_of, no_gpu_reason};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{short_bus_id, Facts, GpuFacts, PciFunction};
use crate::finding::{Evidence, Finding};
use crate::parse::nvsmi_xml::MAX_GPUS;
use crate::policy::Policy;
use crate::reading::Reading;
use std::collections::BTreeSet;

const ID: &str = "gpu.present";
/// `GpuFacts::source` of a GPU read from `/proc/driver/nvidia/gpus/*/information` because
/// neither NVML nor nvidia-smi answered (gather's last fallback).
pub const FILES_SOURCE: &str = "procfs";
/// The evidence key of the driver's report that was there but could not be read
/// (`DriverFacts::report_unreadable`); the views read it to say the GPUs are not known rather
/// than "no GPU found".
pub const REPORT_UNREADABLE: &str = "driver_report_unreadable";

pub const CHECK: Check = Check {
    id: ID,
    title: "NVIDIA GPUs exist on the PCI bus and the driver answers for each",
    looks_at: "NVIDIA PCI functions exist and the driver answers (NVML / nvidia-smi); \"couldn't \
               communicate with the driver\" diagnosed",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Lists the NVIDIA display/3D PCI functions in sysfs and the GPUs the driver \
               enumerates (NVML, or nvidia-smi in a snapshot), and compares the two; also the \
               driver's own count of attached GPUs (`<attached_gpus>`) against the GPUs it \
               describes: fewer described fails on the live machine and warns in a snapshot, \
               whose log may have been made for one GPU (`nvidia-smi -q -x -i N`) or cut down \
               before it was published. A log of more GPUs than gpuaudit reads (256) says so. \
               A driver report that is there but cannot be read (nvidia-smi's XML cut short, \
               declaring an entity, too large to read; NVML's answer garbled) fails as that, \
               with the reason: the GPUs are then not known, which is not \"no GPU found\".",
        why: "A GPU on the bus that the driver does not list cannot run anything: it fell off \
              the bus (XID 79), the driver failed to initialise it, or it is excluded. When \
              the driver does not answer at all, no CUDA program runs on the machine.",
        verify: "lspci -d 10de: -nn\nnvidia-smi -L\ncat /proc/driver/nvidia/gpus/*/information",
        fix: "\"couldn't communicate with the NVIDIA driver\": load the module (`sudo modprobe \
              nvidia`), or reinstall the driver for the running kernel (DKMS did not build it). \
              A GPU missing from `nvidia-smi -L`: look for XID errors in `sudo dmesg`, reset or \
              power-cycle the machine; on a cloud instance, ask for another host.",
    },
    profiles: &[],
    run: present,
};

fn present(facts: &Facts, _: &Policy) -> Vec<Finding> {
    let pci = facts.pci_gpus.value();
    let drv = facts.gpus.value();
    let attached = facts.driver.attached_gpus.value().copied();
    let mut ev = Evidence::new();
    if let Some(p) = pci {
        ev.insert(
            "pci_functions",
            p.iter().map(|f| f.bus_id.as_str()).collect::<Vec<_>>(),
        );
    } else if let Some(r) = facts.pci_gpus.reason() {
        ev.insert("pci_functions_unavailable", r);
    }
    match &facts.driver.query {
        Reading::Value(src) => ev.insert("driver_query", src),
        Reading::Unavailable(r) => ev.insert("driver_query_error", r),
    }
    if let Some(a) = attached {
        ev.insert("attached_gpus", a);
    }
    let unreadable = facts.driver.report_unreadable.as_deref();
    if let Some(why) = unreadable {
        ev.insert(REPORT_UNREADABLE, why);
    }

    let mut out = match (pci, drv) {
        // The driver's report was there but could not be read: the GPUs are not known, which
        // is not "none" (only the kernel module's files may still name them).
        (pci, g)
            if unreadable.is_some()
                && g.is_none_or(|g| g.iter().all(|x| x.source == FILES_SOURCE)) =>
        {
            vec![not_read(
                pci,
                g.map(Vec::as_slice),
                unreadable.unwrap_or_default(),
                ev,
            )]
        }
        (Some(p), None) if p.is_empty() => {
            vec![Finding::fail(ID, "No NVIDIA GPU found: no NVIDIA GPU on the PCI bus and no driver answers")
                .evidence(ev)
                .fix("If this machine should have GPUs, the instance type or the VM's device assignment \
                      lacks them: check the order, then `lspci -d 10de:`.")]
        }
        (Some(p), None) => {
            let reason = facts.driver.query.reason().unwrap_or("no answer");
            let mut fix = String::from(
                "Check `lsmod | grep nvidia`; load the driver with `sudo modprobe nvidia`, or \
                 reinstall it for the running kernel (`uname -r`).",
            );
            if reason.contains("version mismatch") {
                fix = "The loaded kernel module and the user-space driver libraries differ \
                       (driver updated without reboot): reboot, or unload and reload the nvidia \
                       modules."
                    .into();
            }
            // Where the facts say why (the module is not loaded, nouveau holds the GPUs), the
            // finding says it and names that cause.
            let nouveau = causes::bound_to(facts, "nouveau");
            let (known, cause) = if let Some(c) = causes::nvidia_module_missing(facts) {
                (
                    Some("the nvidia kernel module is not loaded".to_string()),
                    Some(c),
                )
            } else if !nouveau.is_empty() && nouveau.len() == p.len() {
                (
                    Some("nouveau (the open-source driver) holds the GPUs".to_string()),
                    nouveau.first().map(|b| b.cause()),
                )
            } else {
                (None, None)
            };
            let message = match &known {
                Some(k) => format!(
                    "{} on the PCI bus, but the driver does not answer: {k} ({reason})",
                    count_of(p.len() as u64, "NVIDIA GPU")
                ),
                None => format!(
                    "{} on the PCI bus, but the driver does not answer: {reason}",
                    count_of(p.len() as u64, "NVIDIA GPU")
                ),
            };
            vec![Finding::fail(ID, message)
                .evidence(ev)
                .fix(fix)
                .caused_by_opt(cause)]
        }
        // GPUs on the PCI bus that the driver does not list are `listed`'s to name.
        (pci, Some(g))
            if g.is_empty()
                && attached.is_none_or(|a| a == 0)
                && pci.is_none_or(|p| p.is_empty()) =>
        {
            vec![Finding::fail(
                ID,
                "No NVIDIA GPU found: the driver answers but lists no GPU",
            )
            .evidence(ev)
            .fix("Look for XID errors (`sudo dmesg | grep -i xid`) and check `lspci -d 10de:`.")]
        }
        (None, None) => {
            vec![
                Finding::fail(ID, format!("No NVIDIA GPU found: {}", no_gpu_reason(facts)))
                    .evidence(ev),
            ]
        }
        // NVML and nvidia-smi failed and only the kernel module's files named the GPUs: the
        // module is loaded, but nothing that CUDA programs and monitoring rely on answers.
        (_, Some(g)) if !g.is_empty() && g.iter().all(|x| x.source == FILES_SOURCE) => {
            let why = facts
                .driver
                .query
                .value()
                .and_then(|q| q.split_once(" (").map(|(_, r)| r.trim_end_matches(')')))
                .unwrap_or("no answer");
            vec![Finding::fail(
                ID,
                format!(
                    "{} listed only by the kernel module's files (/proc/driver/nvidia/gpus): \
                     NVML and nvidia-smi do not answer: {why}",
                    count_of(g.len() as u64, "NVIDIA GPU")
                ),
            )
            .evidence(ev)
            .fix(
                "Run `nvidia-smi`: a library that does not match the loaded module (driver \
                 updated without reboot) is fixed by a reboot; a hung GPU (nvidia-smi never \
                 returns) by a GPU reset or a power cycle; on a cloud instance, ask for another \
                 host.",
            )]
        }
        (pci, Some(g)) => listed(facts, pci, g, attached, ev),
    };
    if let Some(left_out) = &facts.driver.gpus_left_out {
        out.push(
            Finding::warn(
                ID,
                format!("{left_out}: the GPUs beyond are not audited"),
            )
            .with("gpus_left_out", left_out)
            .with("gpus_read", MAX_GPUS)
            .fix("Audit the machine live, or collect the log in parts (`nvidia-smi -q -x -i N`)."),
        );
    }
    out
}

/// GPUs on the PCI bus the driver does not list: why, where the facts say (a driver other
/// than nvidia holds it: gpu.driver-binding's problem, which this is; the kernel log's XID 79:
/// it fell off the bus), else the three ways it happens.
fn not_listed(facts: &Facts, missing: &[&str], ev: Evidence) -> Finding {
    let n = missing.len() as u64;
    let bindings: Vec<Option<causes::ForeignBinding>> = missing
        .iter()
        .map(|b| causes::foreign_binding(facts, b))
        .collect();
    let why: Vec<String> = missing
        .iter()
        .zip(&bindings)
        .map(|(b, held)| match held {
            Some(h) => h.sentence(),
            None => {
                let xids = causes::xids_at(facts, b);
                if xids.contains(&79) {
                    format!("{} fell off the bus (XID 79 in the kernel log)", short_bus_id(b))
                } else if let Some(x) = xids.first() {
                    format!(
                        "{}: XID {x} in the kernel log; fallen off the bus, failed to initialise, or excluded",
                        short_bus_id(b)
                    )
                } else {
                    format!(
                        "{}: fallen off the bus, failed to initialise, or excluded",
                        short_bus_id(b)
                    )
                }
            }
        })
        .collect();
    let head = format!(
        "{} on the PCI bus {} not listed by the driver",
        count_of(n, "GPU"),
        if n == 1 { "is" } else { "are" },
    );
    let every_held = bindings.iter().all(Option::is_some);
    let (message, fix) = if every_held {
        (
            format!("{head}: {}", why.join("; ")),
            match bindings.first().cloned().flatten().map(|b| b.driver).as_deref() {
                Some("nouveau") => "Blacklist nouveau and reboot, so that nvidia takes the GPU (gpu.driver-binding says how).",
                Some("vfio-pci") => "If the GPU is meant for this host, take it out of vfio-pci and load nvidia (gpu.driver-binding says how).",
                _ => "Unbind it from its driver and load nvidia (gpu.driver-binding says how).",
            },
        )
    } else if why.iter().all(|w| w.contains("fell off the bus (XID 79")) {
        (
            format!("{head}: {}", why.join("; ")),
            "A GPU that fell off the bus needs a GPU reset or a power cycle of the machine; on \
             a cloud instance, ask for another host (with this report: it names the GPU).",
        )
    } else if missing
        .iter()
        .zip(&bindings)
        .all(|(b, held)| held.is_none() && causes::xids_at(facts, b).is_empty())
    {
        // Nothing known of any: the three ways, said once.
        (
            format!(
                "{head} ({}): fallen off the bus, failed to initialise, or excluded",
                missing.iter().map(|m| short_bus_id(m)).collect::<Vec<_>>().join(", ")
            ),
            "Look for XID 79 / 119 errors in `sudo dmesg`; reset the GPU or power-cycle the machine; on a cloud instance, ask for another host.",
        )
    } else {
        (
            format!("{head}: {}", why.join("; ")),
            "Look for XID 79 / 119 errors in `sudo dmesg`; reset the GPU or power-cycle the machine; on a cloud instance, ask for another host.",
        )
    };
    let mut f = Finding::fail(ID, message)
        .evidence(ev.with("missing", missing))
        .fix(fix);
    // Every one held by another driver: the binding is the cause (the first one's finding).
    if every_held {
        f = f.caused_by_opt(bindings.first().cloned().flatten().map(|b| b.cause()));
    }
    f
}

/// The driver's report could not be read (`why`): what is known of the GPUs without it.
fn not_read(
    pci: Option<&Vec<PciFunction>>,
    files: Option<&[GpuFacts]>,
    why: &str,
    ev: Evidence,
) -> Finding {
    let message = match (files, pci.map(Vec::len)) {
        (Some(g), _) if !g.is_empty() => format!(
            "{} listed only by the kernel module's files (/proc/driver/nvidia/gpus): the \
             driver's report could not be read: {why}",
            count_of(g.len() as u64, "NVIDIA GPU")
        ),
        (_, Some(n)) if n > 0 => format!(
            "{} on the PCI bus, but the driver's report could not be read: {why}",
            count_of(n as u64, "NVIDIA GPU")
        ),
        (_, Some(_)) => format!(
            "The driver's report could not be read, so its GPUs are not known (the PCI bus \
             lists no NVIDIA GPU): {why}"
        ),
        (_, None) => {
            format!("The driver's report could not be read, so its GPUs are not known: {why}")
        }
    };
    Finding::fail(ID, message).evidence(ev).fix(
        "Run `nvidia-smi -q -x` on the machine and read what it prints; for a snapshot, collect \
         it again (`gpuaudit collect --out DIR`): gpuaudit reads the log as nvidia-smi writes \
         it, not one that declares entities, was cut short or edited by hand.",
    )
}

/// The driver lists GPUs: each GPU on the PCI bus must be among them, and the driver's own
/// count of attached GPUs must be what it describes.
fn listed(
    facts: &Facts,
    pci: Option<&Vec<PciFunction>>,
    g: &[GpuFacts],
    attached: Option<u32>,
    mut ev: Evidence,
) -> Vec<Finding> {
    ev.insert("driver_gpus", g.len());
    let listed: BTreeSet<String> = g
        .iter()
        .map(|x| x.pci_bus_id.to_ascii_lowercase())
        .collect();
    let missing: Vec<&str> = pci
        .map(|p| {
            p.iter()
                .filter(|f| !listed.contains(&f.bus_id.to_ascii_lowercase()))
                .map(|f| f.bus_id.as_str())
                .collect()
        })
        .unwrap_or_default();
    if !missing.is_empty() {
        return vec![not_listed(facts, &missing, ev)];
    }
    let described = g.len() as u32;
    match attached {
        Some(a) if a > described => {
            let not_described = a - described;
            let said = format!(
                "The driver says {} attached and describes {described}: {} not described",
                count_of(a, "GPU"),
                count_of(not_described, "GPU")
            );
            // A live audit asked for every GPU (`nvidia-smi -q -x` or NVML without a
            // selection): a GPU it could not describe is one the driver could not read. A
            // snapshot's log may have been made for one GPU (`-i N`) or cut down before it was
            // published, which the log does not say: a warning that names both.
            let f = if facts.origin.is_snapshot() {
                Finding::warn(
                    ID,
                    format!(
                        "{said} (a log made with `nvidia-smi -q -x -i N`, or cut down before it was published, lists fewer; otherwise the driver could not read them)"
                    ),
                )
            } else {
                Finding::fail(ID, format!("{said}: the driver could not read them"))
            };
            vec![f
                .evidence(ev.with("not_described", not_described))
                .fix("Run `nvidia-smi -q -x` without `-i` and `nvidia-smi -L`; look for XID 79 / 119 errors in `sudo dmesg`; reset the GPU or power-cycle the machine.")]
        }
        Some(a) if a < described => vec![Finding::warn(
            ID,
            format!(
                "The driver describes {} but says {a} attached: the log contradicts itself (edited?)",
                count_of(described, "GPU")
            ),
        )
        .evidence(ev)],
        _ if pci.is_none() => vec![Finding::pass(
            ID,
            format!(
                "{} listed by the driver (the PCI bus was not read, so GPUs the driver does not list could not be looked for)",
                count_of(described, "NVIDIA GPU")
            ),
        )
        .evidence(ev)],
        _ => vec![Finding::pass(
            ID,
            format!(
                "{} found; the driver answers for each",
                count_of(described, "NVIDIA GPU")
            ),
        )
        .evidence(ev)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::run_one;
    use crate::facts::Origin;
    use crate::finding::Status;
    use crate::testing::{statuses, Machine};

    fn run(facts: &Facts) -> Vec<Finding> {
        run_one(&CHECK, facts, &Policy::default())
    }

    fn snapshot(f: &mut Facts) {
        f.origin = Origin::Snapshot {
            path: "/snap".into(),
            description: None,
            collected_at: None,
        };
    }

    /// The GPUs came from the kernel module's files only: the driver's user side does not
    /// answer, which fails (it passed as "the driver answers for each" before).
    #[test]
    fn gpus_named_only_by_the_module_files_fail() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| g.source = FILES_SOURCE.into())
            .with(|f| {
                f.driver.query = Reading::Value(
                    "files: /proc/driver/nvidia/gpus (NVML: timed out; nvidia-smi: hung)".into(),
                )
            })
            .build();
        let out = present(&f, &Policy::default());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, crate::finding::Status::Fail);
        assert_eq!(
            out[0].message,
            "2 NVIDIA GPUs listed only by the kernel module's files (/proc/driver/nvidia/gpus): \
             NVML and nvidia-smi do not answer: NVML: timed out; nvidia-smi: hung"
        );
        // One GPU that NVML read among them: the driver answers; the list is judged as usual.
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| g.source = FILES_SOURCE.into())
            .build();
        assert_ne!(
            present(&f, &Policy::default())[0].status,
            crate::finding::Status::Fail
        );
    }

    #[test]
    fn every_gpu_on_the_bus_listed_passes() {
        let out = run(&Machine::healthy("h200-sxm-141gb", 2).build());
        assert_eq!(statuses(&out), vec![Status::Pass]);
        assert_eq!(
            out[0].message,
            "2 NVIDIA GPUs found; the driver answers for each"
        );
        let out = run(&Machine::healthy("h200-sxm-141gb", 1).build());
        assert_eq!(
            out[0].message,
            "1 NVIDIA GPU found; the driver answers for each"
        );
    }

    #[test]
    fn without_the_pci_bus_it_says_what_was_not_compared() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| f.pci_gpus = Reading::unavailable("no sysfs in this snapshot"))
            .build();
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Pass]);
        assert!(out[0]
            .message
            .starts_with("2 NVIDIA GPUs listed by the driver (the PCI bus was not read"));
    }

    #[test]
    fn a_gpu_on_the_bus_the_driver_does_not_list_fails() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                if let Reading::Value(g) = &mut f.gpus {
                    g.truncate(1);
                }
            })
            .build();
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Fail]);
        assert!(out[0]
            .message
            .starts_with("1 GPU on the PCI bus is not listed by the driver (00:07.0)"));
    }

    #[test]
    fn fewer_described_than_attached_fails_live_and_warns_in_a_snapshot() {
        // Issue 8, defect 4: the driver says 16 attached and lists 1.
        let mut f = Machine::healthy("a100-sxm4-80gb", 1)
            .with(|f| {
                f.driver.attached_gpus = Reading::Value(16);
                f.pci_gpus = Reading::unavailable("not read");
            })
            .build();
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Fail]);
        assert_eq!(
            out[0].message,
            "The driver says 16 GPUs attached and describes 1: 15 GPUs not described: the driver could not read them"
        );
        assert_eq!(out[0].evidence.get("not_described").unwrap(), 15);
        snapshot(&mut f);
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Warn]);
        assert!(out[0].message.contains("`nvidia-smi -q -x -i N`"));
        assert!(!out[0].message.contains("answers for each"));
        // One more attached than described is enough; as many is a pass.
        let f = Machine::healthy("a100-sxm4-80gb", 2)
            .with(|f| f.driver.attached_gpus = Reading::Value(3))
            .build();
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Fail]);
        assert!(out[0].message.contains("1 GPU not described"));
        let f = Machine::healthy("a100-sxm4-80gb", 2)
            .with(|f| f.driver.attached_gpus = Reading::Value(2))
            .build();
        assert_eq!(statuses(&run(&f)), vec![Status::Pass]);
    }

    #[test]
    fn more_described_than_attached_is_a_log_that_contradicts_itself() {
        let f = Machine::healthy("a100-sxm4-80gb", 2)
            .with(|f| f.driver.attached_gpus = Reading::Value(1))
            .build();
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Warn]);
        assert!(out[0].message.contains("contradicts itself"));
    }

    #[test]
    fn attached_gpus_and_none_described() {
        let f = Machine::healthy("a100-sxm4-80gb", 1)
            .with(|f| {
                f.gpus = Reading::Value(vec![]);
                f.pci_gpus = Reading::unavailable("not read");
                f.driver.attached_gpus = Reading::Value(4);
            })
            .build();
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Fail]);
        assert!(out[0]
            .message
            .contains("says 4 GPUs attached and describes 0"));
        // No GPU at all.
        for attached in [Reading::Value(0), Reading::unavailable("missing")] {
            let f = Machine::healthy("a100-sxm4-80gb", 1)
                .with(|f| {
                    f.gpus = Reading::Value(vec![]);
                    f.pci_gpus = Reading::unavailable("not read");
                    f.driver.attached_gpus = attached;
                })
                .build();
            let out = run(&f);
            assert_eq!(
                out[0].message,
                "No NVIDIA GPU found: the driver answers but lists no GPU"
            );
        }
    }

    #[test]
    fn gpus_left_out_of_a_huge_log_are_a_finding() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                f.driver.gpus_left_out =
                    Some("nvidia-smi lists 300 GPUs; the first 256 were read".into())
            })
            .build();
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Pass, Status::Warn]);
        assert_eq!(
            out[1].message,
            "nvidia-smi lists 300 GPUs; the first 256 were read: the GPUs beyond are not audited"
        );
    }

    fn one_missing(change: impl FnOnce(&mut Facts)) -> Finding {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                if let Reading::Value(g) = &mut f.gpus {
                    g.truncate(1);
                }
            })
            .build();
        change(&mut f);
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Fail], "{out:#?}");
        out[0].clone()
    }

    fn hold(f: &mut Facts, bus: &str, driver: &str) {
        if let Reading::Value(p) = &mut f.pci_gpus {
            for x in p.iter_mut().filter(|x| x.bus_id.ends_with(bus)) {
                x.driver = Reading::Value(Some(driver.into()));
            }
        }
    }

    /// A known cause is said, never guessed at: a GPU another driver holds is that driver's
    /// (gpu.driver-binding's problem), one whose XID 79 is in the kernel log fell off the bus.
    #[test]
    fn a_gpu_the_driver_does_not_list_says_why_where_the_facts_do() {
        use crate::facts::XidEvent;
        use crate::finding::Cause;
        let x = one_missing(|f| hold(f, "00:07.0", "nouveau"));
        assert_eq!(
            x.message,
            "1 GPU on the PCI bus is not listed by the driver: 00:07.0 is bound to nouveau (the open-source driver), not nvidia"
        );
        assert_eq!(
            x.caused_by,
            Some(Cause::device("gpu.driver-binding", "0000:00:07.0"))
        );
        assert!(x
            .fix
            .as_deref()
            .unwrap_or("")
            .starts_with("Blacklist nouveau"));
        let x = one_missing(|f| hold(f, "00:07.0", "vfio-pci"));
        assert!(x
            .message
            .ends_with("00:07.0 is bound to vfio-pci (reserved for a VM), not nvidia"));
        assert!(x.fix.as_deref().unwrap_or("").contains("out of vfio-pci"));
        let x = one_missing(|f| hold(f, "00:07.0", "pci-stub"));
        assert!(x.fix.as_deref().unwrap_or("").starts_with("Unbind it"));
        assert!(x.caused_by.is_some());
        let xid = |code| XidEvent {
            bus_id: Some("0000:00:07".into()),
            code,
            text: String::new(),
            ..Default::default()
        };
        let x = one_missing(|f| f.xid_events = Reading::Value(vec![xid(79)]));
        assert_eq!(
            x.message,
            "1 GPU on the PCI bus is not listed by the driver: 00:07.0 fell off the bus (XID 79 in the kernel log)"
        );
        assert_eq!(x.caused_by, None, "its own cause");
        assert!(x.fix.as_deref().unwrap_or("").contains("power cycle"));
        let x = one_missing(|f| f.xid_events = Reading::Value(vec![xid(119)]));
        assert_eq!(
            x.message,
            "1 GPU on the PCI bus is not listed by the driver: 00:07.0: XID 119 in the kernel log; fallen off the bus, failed to initialise, or excluded"
        );
        // Nothing known: the three ways.
        let x = one_missing(|_| {});
        assert_eq!(
            x.message,
            "1 GPU on the PCI bus is not listed by the driver (00:07.0): fallen off the bus, failed to initialise, or excluded"
        );
        assert_eq!(x.caused_by, None);
        // Two missing, one held by nouveau and one unknown: both said, no single cause.
        let mut f = Machine::healthy("h200-sxm-141gb", 3)
            .with(|f| {
                if let Reading::Value(g) = &mut f.gpus {
                    g.truncate(1);
                }
            })
            .build();
        hold(&mut f, "00:07.0", "nouveau");
        let out = run(&f);
        assert_eq!(
            out[0].message,
            "2 GPUs on the PCI bus are not listed by the driver: 00:07.0 is bound to nouveau (the open-source driver), not nvidia; 00:08.0: fallen off the bus, failed to initialise, or excluded"
        );
        assert_eq!(out[0].caused_by, None);
    }

    #[test]
    fn a_driver_that_does_not_answer_names_the_module_or_nouveau_where_they_are_why() {
        use crate::facts::KernelModule;
        use crate::finding::Cause;
        let module = |n: &str| KernelModule {
            name: n.into(),
            size: 1,
            used_by: vec![],
            state: "Live".into(),
            taints: String::new(),
        };
        let silent = |f: &mut Facts| {
            f.gpus = Reading::unavailable("nvidia-smi: couldn't communicate with the driver");
            f.driver.query = Reading::unavailable("couldn't communicate with the driver");
        };
        let mut f = Machine::healthy("h200-sxm-141gb", 2).with(silent).build();
        f.modules = Reading::Value(vec![module("ext4")]);
        let x = &run(&f)[0];
        assert_eq!(
            x.message,
            "2 NVIDIA GPUs on the PCI bus, but the driver does not answer: the nvidia kernel module is not loaded (couldn't communicate with the driver)"
        );
        assert_eq!(x.caused_by, Some(Cause::check("kernel.modules")));
        // nouveau holds every GPU.
        hold(&mut f, "00:06.0", "nouveau");
        hold(&mut f, "00:07.0", "nouveau");
        f.modules = Reading::Value(vec![module("nouveau")]);
        let x = &run(&f)[0];
        assert!(
            x.message
                .contains("nouveau (the open-source driver) holds the GPUs"),
            "{}",
            x.message
        );
        assert_eq!(
            x.caused_by,
            Some(Cause::device("gpu.driver-binding", "0000:00:06.0"))
        );
        // The module loaded: nothing known, nothing named.
        let f = Machine::healthy("h200-sxm-141gb", 2).with(silent).build();
        let x = &run(&f)[0];
        assert_eq!(x.caused_by, None);
        assert!(x
            .message
            .ends_with("does not answer: couldn't communicate with the driver"));
    }

    #[test]
    fn a_driver_that_does_not_answer() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                f.gpus = Reading::unavailable("NVML: driver/library version mismatch");
                f.driver.query = Reading::unavailable("NVML: driver/library version mismatch");
            })
            .build();
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Fail]);
        assert!(out[0]
            .message
            .starts_with("2 NVIDIA GPUs on the PCI bus, but the driver does not answer"));
        assert!(out[0].fix.as_deref().unwrap().contains("reboot"));
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| {
                f.gpus = Reading::unavailable("no driver");
                f.driver.query = Reading::unavailable("no driver");
            })
            .build();
        let out = run(&f);
        assert!(out[0].message.starts_with("1 NVIDIA GPU on the PCI bus"));
        assert!(out[0].fix.as_deref().unwrap().contains("modprobe"));
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| {
                f.gpus = Reading::unavailable("no driver");
                f.pci_gpus = Reading::Value(vec![]);
            })
            .build();
        assert!(run(&f)[0].message.contains("no NVIDIA GPU on the PCI bus"));
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| {
                f.gpus = Reading::unavailable("no driver");
                f.pci_gpus = Reading::unavailable("no sysfs");
            })
            .build();
        assert_eq!(statuses(&run(&f)), vec![Status::Fail]);
    }

    /// The driver's report was there but could not be read: the GPUs are not known, and the
    /// finding says why, never "No NVIDIA GPU found", whatever the PCI bus says.
    #[test]
    fn a_report_that_could_not_be_read_is_never_no_gpu_found() {
        let why = "nvidia-smi -q -x: malformed: nvidia-smi XML: the document declares an entity";
        let unread = |f: &mut Facts| {
            f.gpus = Reading::unavailable(why);
            f.driver.query = Reading::unavailable(why);
            f.driver.report_unreadable = Some(why.into());
        };
        let on_bus = run(&Machine::healthy("h200-sxm-141gb", 2).with(unread).build());
        let no_bus = run(&Machine::healthy("h200-sxm-141gb", 2)
            .with(unread)
            .with(|f| f.pci_gpus = Reading::Value(vec![]))
            .build());
        let unread_bus = run(&Machine::healthy("h200-sxm-141gb", 2)
            .with(unread)
            .with(|f| f.pci_gpus = Reading::unavailable("no sysfs"))
            .build());
        let files = run(&Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| g.source = FILES_SOURCE.into())
            .with(|f| {
                f.driver.query = Reading::Value(format!("files: /proc/driver/nvidia/gpus ({why})"));
                f.driver.report_unreadable = Some(why.into());
            })
            .build());
        let messages: Vec<&str> = [&on_bus, &no_bus, &unread_bus, &files]
            .iter()
            .map(|o| o[0].message.as_str())
            .collect();
        assert_eq!(
            messages,
            [
                format!("2 NVIDIA GPUs on the PCI bus, but the driver's report could not be read: {why}"),
                format!("The driver's report could not be read, so its GPUs are not known (the PCI bus lists no NVIDIA GPU): {why}"),
                format!("The driver's report could not be read, so its GPUs are not known: {why}"),
                format!("2 NVIDIA GPUs listed only by the kernel module's files (/proc/driver/nvidia/gpus): the driver's report could not be read: {why}"),
            ]
        );
        for out in [&on_bus, &no_bus, &unread_bus, &files] {
            assert_eq!(statuses(out), vec![Status::Fail]);
            assert_eq!(out[0].evidence.get(REPORT_UNREADABLE).unwrap(), why);
            assert!(out[0].fix.as_deref().unwrap().contains("nvidia-smi -q -x"));
            assert!(!out[0].message.contains("No NVIDIA GPU found"));
        }
        // An empty list beside the unread report names no GPU from the module's files.
        let empty = run(&Machine::healthy("h200-sxm-141gb", 2)
            .with(unread)
            .with(|f| f.gpus = Reading::Value(vec![]))
            .build());
        assert_eq!(empty[0].message, messages[0]);
        // GPUs the driver itself listed are judged as usual: the flag alone changes nothing.
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| f.driver.report_unreadable = Some(why.into()))
            .build();
        assert_eq!(statuses(&run(&f)), vec![Status::Pass]);
        // Without the flag, a driver that does not answer is still that.
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                f.gpus = Reading::unavailable("NVML: not loaded");
                f.driver.query = Reading::unavailable("NVML: not loaded");
            })
            .build();
        assert!(run(&f)[0].message.contains("the driver does not answer"));
    }

    #[test]
    fn gpus_on_the_bus_and_none_listed_are_not_no_gpu_found() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| f.gpus = Reading::Value(vec![]))
            .build();
        let out = run(&f);
        assert_eq!(statuses(&out), vec![Status::Fail]);
        assert!(
            out[0].message.starts_with(
                "2 GPUs on the PCI bus are not listed by the driver (00:06.0, 00:07.0)"
            ),
            "{}",
            out[0].message
        );
    }
}
