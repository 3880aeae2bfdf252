use super::*;
use crate::testing::Machine;

const PUBLISHED: &str = include_str!("../../../parse/testdata/xid-published.txt");

fn ev(bus: &str, code: u32) -> XidEvent {
    XidEvent {
        bus_id: Some(bus.into()),
        code,
        text: format!("NVRM: Xid (PCI:{bus}): {code}, pid=1, test"),
        ..Default::default()
    }
}

fn facts(events: Vec<XidEvent>) -> Facts {
    Machine::healthy("h200-sxm-141gb", 2)
        .with(|f| f.xid_events = Reading::Value(events))
        .build()
}

fn run(f: &Facts) -> Vec<Finding> {
    (CHECK.run)(f, &Policy::default())
}

fn gpu0(events: Vec<XidEvent>) -> Finding {
    run(&facts(events))
        .into_iter()
        .find(|f| f.gpu == Some(0))
        .unwrap()
}

fn status_of(code: u32) -> Status {
    gpu0(vec![ev("0000:00:06", code)]).status
}

#[test]
fn a_clean_log_passes_per_gpu() {
    let out = run(&facts(vec![]));
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|f| f.status == Status::Pass));
    assert!(
        out[0].message.contains("no Xid in the kernel log"),
        "{}",
        out[0].message
    );
}

#[test]
fn application_xids_inform_until_they_repeat() {
    for code in [13, 31, 43, 45, 137] {
        assert_eq!(status_of(code), Status::Info, "{code}");
        let below: Vec<XidEvent> = (0..REPEAT_LIMIT - 1)
            .map(|_| ev("0000:00:06", code))
            .collect();
        assert_eq!(
            gpu0(below).status,
            Status::Info,
            "{code} x{}",
            REPEAT_LIMIT - 1
        );
        let at: Vec<XidEvent> = (0..REPEAT_LIMIT).map(|_| ev("0000:00:06", code)).collect();
        let f = gpu0(at);
        assert_eq!(f.status, Status::Warn, "{code} x{REPEAT_LIMIT}");
        assert!(
            f.message.contains(&format!("{REPEAT_LIMIT} times")),
            "{}",
            f.message
        );
    }
    assert_eq!(REPEAT_LIMIT, 10);
}

#[test]
fn each_class_is_judged_by_what_it_means() {
    for code in [
        46, 48, 62, 64, 74, 79, 95, 109, 110, 136, 140, 143, 149, 158,
    ] {
        assert_eq!(status_of(code), Status::Fail, "{code}");
    }
    for code in [8, 32, 61, 92, 94, 119, 120, 144, 145, 146, 156, 157] {
        assert_eq!(status_of(code), Status::Warn, "{code}");
    }
    for code in [63, 121] {
        assert_eq!(status_of(code), Status::Info, "{code}");
    }
    let f = gpu0(vec![ev("0000:00:06", 79)]);
    assert!(
        f.message
            .starts_with("GPU 0 (00:06.0): Xid 79 once (GPU has fallen off the bus"),
        "{}",
        f.message
    );
    assert!(f.message.contains("RESTART_BM"), "{}", f.message);
    assert!(f
        .fix
        .as_deref()
        .unwrap_or("")
        .contains("Restart the machine"));
}

#[test]
fn xid_154_is_judged_by_the_action_it_names() {
    let line = |action: &str| {
        XidEvent {
        text: format!("NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed from 0x0 (None) to {action}"),
        ..ev("0000:00:06", 154)
    }
    };
    for (action, want) in [
        ("0x2 (Node Reboot Required)", Status::Fail),
        ("0x1 (GPU Reset Required)", Status::Fail),
        ("0x1 (PF FLR)", Status::Fail),
        ("0x4 (Drain and Reset)", Status::Fail),
        ("0x3 (Drain P2P)", Status::Warn),
        ("0x0 (None)", Status::Info),
        ("0x9 (Something New)", Status::Warn),
        ("garbage", Status::Warn),
    ] {
        assert_eq!(gpu0(vec![line(action)]).status, want, "{action}");
    }
}

#[test]
fn an_unknown_code_warns_not_in_the_catalog() {
    let f = gpu0(vec![ev("0000:00:06", 999)]);
    assert_eq!(f.status, Status::Warn);
    assert!(
        f.message
            .contains("Xid 999 once: Xid 999 is not in the catalog"),
        "{}",
        f.message
    );
}

#[test]
fn an_unreadable_log_skips_with_the_reason() {
    let f = Machine::healthy("h200-sxm-141gb", 1)
        .with(|f| f.xid_events = Reading::unavailable("kernel log not readable (needs root)"))
        .build();
    let out = run(&f);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, Status::Skip);
    assert!(out[0].message.contains("needs root"), "{}", out[0].message);
}

#[test]
fn several_codes_make_one_finding_with_the_worst_status_bounded() {
    let mut events = vec![
        ev("0000:00:06", 13),
        ev("0000:00:06", 94),
        ev("0000:00:06", 79),
    ];
    let f = gpu0(events.clone());
    assert_eq!(f.status, Status::Fail);
    let at = |s: &str| f.message.find(s).unwrap();
    assert!(
        at("Xid 79") < at("Xid 94") && at("Xid 94") < at("Xid 13"),
        "{}",
        f.message
    );
    assert!(f
        .fix
        .as_deref()
        .unwrap_or("")
        .contains("Restart the machine"));
    for code in [8, 32, 63, 121, 999] {
        events.push(ev("0000:00:06", code));
    }
    let f = gpu0(events);
    assert!(
        f.message.ends_with("and 4 codes more (see the evidence)")
            || f.message.contains("and 4 codes more"),
        "{}",
        f.message
    );
    assert_eq!(
        f.evidence
            .get("xids")
            .and_then(|x| x.as_array())
            .map(Vec::len),
        Some(8)
    );
    // The other GPU is clean.
    let out = run(&facts(vec![ev("0000:00:06", 79)]));
    assert_eq!(
        out.iter().find(|f| f.gpu == Some(1)).unwrap().status,
        Status::Pass
    );
}

#[test]
fn an_address_no_gpu_has_is_a_finding_of_its_own() {
    let out = run(&facts(vec![ev("0000:00:42", 79)]));
    assert_eq!(out.len(), 3);
    let f = &out[2];
    assert_eq!(f.gpu, None);
    assert_eq!(f.status, Status::Fail);
    assert!(
        f.message
            .starts_with("PCI 0000:00:42 (a GPU the driver does not list)"),
        "{}",
        f.message
    );
    // Not on the PCI bus either: nothing to name as the cause.
    assert!(f.caused_by.is_none());
    // On the PCI bus but not listed by the driver: gpu.present's problem.
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .with(|f| {
            if let Reading::Value(g) = &mut f.gpus {
                g.truncate(1);
            }
            f.xid_events = Reading::Value(vec![ev("0000:00:07", 79)]);
        })
        .build();
    let out = run(&f);
    let orphan = out.iter().find(|f| f.gpu.is_none()).unwrap();
    assert_eq!(
        orphan.caused_by.as_ref().map(|c| c.check.as_str()),
        Some("gpu.present")
    );
    let none = XidEvent {
        bus_id: None,
        ..ev("x", 13)
    };
    let out = run(&facts(vec![none]));
    assert!(
        out[2]
            .message
            .starts_with("Xid lines that name no PCI address"),
        "{}",
        out[2].message
    );
}

#[test]
fn the_lookback_cuts_dated_lines() {
    let dated = |at: i64| XidEvent {
        at: Some(at),
        time: Some(format!("t{at}")),
        ..ev("0000:00:06", 79)
    };
    let now = 1_800_000_000;
    let week = LOOKBACK_DAYS * 86_400;
    let f = |events: Vec<XidEvent>| {
        Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| {
                f.origin = Origin::Snapshot {
                    path: "x".into(),
                    description: None,
                    collected_at: Some("2027-01-15T08:00:00Z".into()),
                };
                f.xid_events = Reading::Value(events);
            })
            .build()
    };
    let collected = iso("2027-01-15T08:00:00Z").unwrap().1;
    let old = run(&f(vec![dated(collected - week - 1)]));
    assert_eq!(old[0].status, Status::Pass, "{}", old[0].message);
    assert!(
        old[0].message.contains("in the last 7 days"),
        "{}",
        old[0].message
    );
    let edge = run(&f(vec![dated(collected - week)]));
    assert_eq!(edge[0].status, Status::Fail);
    // Without a collection time, from the newest dated line.
    let live = run(&facts(vec![
        dated(now - week - 1),
        dated(now - 5),
        dated(now),
    ]));
    let g0 = live.iter().find(|f| f.gpu == Some(0)).unwrap();
    assert!(g0.message.contains("Xid 79 2 times"), "{}", g0.message);
    assert!(
        g0.message.contains("first t1799999995, last t1800000000"),
        "{}",
        g0.message
    );
    assert!(
        g0.message.contains("1 line older than 7 days not counted"),
        "{}",
        g0.message
    );
    // Undated lines always count.
    assert_eq!(run(&f(vec![ev("0000:00:06", 79)]))[0].status, Status::Fail);
}

#[test]
fn sxid_lines_are_per_switch() {
    let sx = |text: &str| XidEvent {
        switch: true,
        text: text.into(),
        ..ev("0000:c5:00.0", 24007)
    };
    let out = run(&facts(vec![sx("nvidia-nvswitch3: SXid (PCI:0000:c5:00.0): 24007, Fatal, Link 55 sourcetrack timeout error (First)")]));
    assert_eq!(out.len(), 3);
    assert_eq!(out[2].status, Status::Fail);
    assert!(
        out[2]
            .message
            .starts_with("NVSwitch 0000:c5:00.0: 1 SXid line (SXid 24007)"),
        "{}",
        out[2].message
    );
    let out = run(&facts(vec![sx(
        "nvidia-nvswitch3: SXid (PCI:0000:c5:00.0): 24007, Non-fatal, x",
    )]));
    assert_eq!(out[2].status, Status::Warn);
    // Not counted as a GPU's Xid, nor as an address without a GPU.
    assert!(out[..2].iter().all(|f| f.status == Status::Pass));
}

#[test]
fn log_text_is_escaped_and_bounded() {
    let mut events: Vec<XidEvent> = (0..20).map(|_| ev("0000:00:06", 13)).collect();
    events.push(XidEvent {
        text: "NVRM: Xid (PCI:0000:00:06): 13, \u{1b}[31mred\nforged".into(),
        ..ev("0000:00:06", 13)
    });
    let f = gpu0(events);
    let lines = f.evidence.get("lines").and_then(|x| x.as_array()).unwrap();
    assert_eq!(lines.len(), MAX_LINES_SHOWN);
    let last = lines.last().and_then(|l| l.as_str()).unwrap();
    assert!(!last.contains('\u{1b}') && !last.contains('\n'), "{last}");
}

#[test]
fn published_lines_are_decoded() {
    let mut f = Machine::healthy("h200-sxm-141gb", 4)
        .with(|f| f.xid_events = Reading::Value(crate::parse::xid::parse_xids(PUBLISHED)))
        .build();
    // Put the published addresses on the machine's GPUs.
    if let Reading::Value(g) = &mut f.gpus {
        for (g, bus) in g.iter_mut().zip([
            "0000:cb:00.0",
            "0000:2b:00.0",
            "0000:03:00.0",
            "0000:0f:00.0",
        ]) {
            g.pci_bus_id = bus.into();
        }
    }
    let out = run(&f);
    let by = |i: u32| out.iter().find(|f| f.gpu == Some(i)).unwrap();
    // Xid 13 x3 then 109 (a context-switch timeout: reset the GPU).
    assert_eq!(by(0).status, Status::Fail);
    assert!(
        by(0)
            .message
            .contains("Xid 109 once (Context Switch Timeout Error, at Fri Aug 30 11:43:14 2024)"),
        "{}",
        by(0).message
    );
    assert!(
        by(0)
            .message
            .contains("Xid 13 3 times (Graphics Engine Exception, first Fri Aug 30 11:43:09 2024"),
        "{}",
        by(0).message
    );
    // Xid 79 in the journal and in dmesg.
    assert_eq!(by(1).status, Status::Fail);
    assert!(
        by(1).message.contains("at May 18 19:02:39"),
        "{}",
        by(1).message
    );
    assert_eq!(by(2).status, Status::Fail);
    assert!(
        by(2).message.contains("5107.644336 s after boot"),
        "{}",
        by(2).message
    );
    // Xid 43 alone: the application's.
    assert_eq!(by(3).status, Status::Info);
}

#[test]
fn gpu_status_is_the_findings() {
    let f = facts(vec![ev("0000:00:06", 95)]);
    let g = &f.gpu_list()[0];
    assert_eq!(gpu_status(&f, g), Some(Status::Fail));
    assert_eq!(gpu_status(&f, &f.gpu_list()[1]), Some(Status::Pass));
}

#[test]
fn fault_xids_memory_errors_judges_are_caused_by_it() {
    use crate::checks::memory::errors::FAULT_XIDS;
    assert!(FAULT_XIDS.contains(&48) && !FAULT_XIDS.contains(&13));
    let memory = crate::checks::memory::errors::CHECK.id;
    // Xid 48 (a double-bit ECC error): memory.errors fails on GPU 0 with it, the cause.
    let f = gpu0(vec![ev("0000:00:06", 48)]);
    assert_eq!(f.status, Status::Fail);
    assert_eq!(f.caused_by, Some(Cause::gpu(memory, 0)));
    // With an application's Xid beside it, this finding says more than memory.errors: its own.
    let f = gpu0(vec![ev("0000:00:06", 48), ev("0000:00:06", 13)]);
    assert!(f.caused_by.is_none(), "{f:#?}");
    // An application's Xid alone: memory.errors has nothing to say, no cause.
    assert!(gpu0(vec![ev("0000:00:06", 13)]).caused_by.is_none());
}

#[test]
fn the_verdict_starts_a_sentence() {
    assert_eq!(sentence_case("nothing to do now"), "Nothing to do now");
    assert_eq!(sentence_case(""), "");
    let f = gpu0(vec![ev("0000:00:06", 13)]);
    assert!(
        f.message.contains(". An application error"),
        "{}",
        f.message
    );
}

#[test]
fn a_live_dated_line_older_than_the_lookback_is_left_out() {
    // The live reader dates /dev/kmsg records in ISO form (boot time + microseconds since
    // boot); on the live machine the lookback counts from the newest dated line.
    let log = "2026-11-20T09:59:59.000000+00:00 NVRM: Xid (PCI:0000:00:06): 79, pid=1, GPU has fallen off the bus.\n\
               2026-11-27T10:00:00.000000+00:00 NVRM: Xid (PCI:0000:00:06): 13, pid=2, Graphics Exception\n";
    let events = crate::parse::xid::parse_xids(log);
    assert!(events.iter().all(|e| e.at.is_some()));
    let f = facts(events);
    assert_eq!(f.origin, Origin::Live);
    let g = run(&f).into_iter().find(|x| x.gpu == Some(0)).unwrap();
    assert_eq!(g.status, Status::Info, "{}", g.message);
    assert!(g.message.contains("Xid 13 once"), "{}", g.message);
    assert!(!g.message.contains("Xid 79"), "{}", g.message);
    assert!(
        g.message.contains("(1 line older than 7 days not counted)"),
        "{}",
        g.message
    );
}

/// The action is the one after the last " to ", even where the one before is short.
#[test]
fn the_recovery_action_is_the_one_changed_to() {
    assert_eq!(
        recovery_action("GPU recovery action changed from 0x0 (N) to 0x2 (Node Reboot Required)"),
        Some("Node Reboot Required")
    );
    assert_eq!(
        recovery_action("changed from 0x0 (None) to 0x3 ( Drain P2P )"),
        Some("Drain P2P")
    );
    assert_eq!(recovery_action("changed to nothing"), None);
    assert_eq!(recovery_action("changed to (unclosed"), None);
    // A drain is named as the driver's request, not as an action not known.
    let f = gpu0(vec![XidEvent {
        text: "NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)".into(),
        ..ev("0000:00:06", 154)
    }]);
    assert_eq!(f.status, Status::Warn);
    assert!(
        f.message.contains("The driver asks for \"Drain P2P\""),
        "{}",
        f.message
    );
}

/// Exactly as many codes as are listed: no "more"; no line older than the lookback: no
/// "older than"; a note carries no fix.
#[test]
fn bounds_are_said_only_when_reached() {
    let f = gpu0(vec![
        ev("0000:00:06", 13),
        ev("0000:00:06", 94),
        ev("0000:00:06", 79),
        ev("0000:00:06", 63),
    ]);
    assert_eq!(
        f.evidence
            .get("xids")
            .and_then(|x| x.as_array())
            .map(Vec::len),
        Some(MAX_CODES_LISTED)
    );
    assert!(!f.message.contains("more"), "{}", f.message);
    assert!(!f.message.contains("older than"), "{}", f.message);
    let note = gpu0(vec![ev("0000:00:06", 13)]);
    assert_eq!(note.status, Status::Info);
    assert_eq!(note.fix, None);
}

/// Lines of listed GPUs make no finding of an address without a GPU; each such address
/// and each switch has one finding with its own lines only.
#[test]
fn each_address_and_switch_gets_its_own_lines() {
    let sx = |bus: &str, code: u32| XidEvent {
        switch: true,
        text: format!("nvidia-nvswitch0: SXid (PCI:{bus}): {code}, Non-fatal, x"),
        ..ev(bus, code)
    };
    let out = run(&facts(vec![ev("0000:00:06", 13), ev("0000:00:06", 79)]));
    assert_eq!(out.len(), 2, "{out:#?}");
    assert!(out.iter().all(|f| f.gpu.is_some()));
    let out = run(&facts(vec![
        ev("0000:00:06", 13),
        ev("0000:00:42", 79),
        ev("0000:00:42", 79),
        ev("0000:00:43", 94),
        sx("0000:c5:00.0", 24007),
        sx("0000:c6:00.0", 12028),
    ]));
    let codes = |f: &Finding, key: &str| -> Vec<u64> {
        f.evidence
            .get(key)
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|c| {
                        c.as_u64()
                            .or_else(|| c.get("code").and_then(|v| v.as_u64()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let of = |p: &str| out.iter().find(|f| f.message.starts_with(p)).unwrap();
    assert_eq!(out.len(), 6, "{out:#?}");
    assert_eq!(codes(of("PCI 0000:00:42"), "xids"), vec![79]);
    assert!(
        of("PCI 0000:00:42").message.contains("Xid 79 2 times"),
        "{}",
        of("PCI 0000:00:42").message
    );
    assert_eq!(codes(of("PCI 0000:00:43"), "xids"), vec![94]);
    assert_eq!(codes(of("NVSwitch 0000:c5:00.0"), "sxids"), vec![24007]);
    assert_eq!(codes(of("NVSwitch 0000:c6:00.0"), "sxids"), vec![12028]);
}
