use super::*;
use crate::facts::{PcieErrorFacts, RootPortTotals};
use crate::testing::{bus_id, Machine};

const FATAL_LOG: &str = include_str!("../../../parse/testdata/aer-gpu-burn-fatal.txt");
const CORRECTED_LOG: &str = include_str!("../../../parse/testdata/aer-popos-corrected.txt");
const LIMITED_LOG: &str = include_str!("../../../parse/testdata/aer-limited-by-dri-devel.txt");

fn counts(total: u64, names: &[(&str, u64)]) -> Reading<AerCounts> {
    Reading::Value(AerCounts {
        total,
        by_name: names.iter().map(|(n, k)| (n.to_string(), *k)).collect(),
    })
}

fn port(bus: &str, root: bool) -> AerPort {
    AerPort {
        bus_id: bus.into(),
        root_port: root,
        correctable: counts(0, &[]),
        nonfatal: counts(0, &[]),
        fatal: counts(0, &[]),
        rootport_totals: root.then(RootPortTotals::default),
    }
}

/// GPU i under a switch: GPU, switch downstream port, switch upstream port, root port.
fn path(i: u32) -> AerPath {
    AerPath {
        gpu: bus_id(i),
        ports: vec![
            port(&bus_id(i), false),
            port(&format!("0000:10:{:02x}.0", i), false),
            port("0000:0f:00.0", false),
            port("0000:00:01.0", true),
        ],
        upstream_unknown: None,
    }
}

fn log(text: &str) -> Reading<KernelLogPcie> {
    let (aer, notices) = crate::parse::kernlog::parse_pcie(text);
    Reading::Value(KernelLogPcie {
        source: "/dev/kmsg".into(),
        aer,
        notices,
    })
}

fn base(edit: impl Fn(&mut AerPath)) -> Facts {
    Machine::healthy("h200-sxm-141gb", 2)
        .with(|f| {
            let mut p0 = path(0);
            edit(&mut p0);
            f.pcie_errors = PcieErrorFacts {
                uptime_s: Reading::Value(10.0 * 86_400.0),
                paths: Reading::Value(vec![p0, path(1)]),
                log: log(""),
            };
        })
        .build()
}

fn run(f: &Facts) -> Vec<Finding> {
    (CHECK.run)(f, &Policy::default())
}

fn gpu0(f: &Facts) -> Finding {
    run(f).into_iter().find(|x| x.gpu == Some(0)).unwrap()
}

#[test]
fn a_clean_path_passes() {
    let out = run(&base(|_| {}));
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|f| f.status == Status::Pass), "{out:#?}");
    assert_eq!(
        out[0].message,
        "GPU 0 (00:06.0): no AER error on the GPU and the 3 ports above it since boot (over 10.0 days of uptime); none in the kernel log (/dev/kmsg)"
    );
}

#[test]
fn uncorrected_errors_fail_wherever_they_are() {
    for i in 0..4 {
        for fatal in [true, false] {
            let f = gpu0(&base(|p| {
                let c = counts(1, &[("SDES", 1)]);
                if fatal {
                    p.ports[i].fatal = c;
                } else {
                    p.ports[i].nonfatal = c;
                }
            }));
            assert_eq!(f.status, Status::Fail, "{i} {fatal}");
            let what = if fatal {
                "1 uncorrected fatal AER error (SDES 1)"
            } else {
                "1 uncorrected non-fatal AER error (SDES 1)"
            };
            assert!(f.message.contains(what), "{}", f.message);
            let own = f.fix.as_deref().unwrap().starts_with("The GPU's own link");
            assert_eq!(own, i < 2, "{i}: {:?}", f.fix);
        }
    }
    let f = gpu0(&base(|p| p.ports[3].fatal = counts(2, &[])));
    assert!(
        f.message
            .contains("2 uncorrected fatal AER errors since boot at root port 00:01.0, upstream"),
        "{}",
        f.message
    );
}

#[test]
fn corrected_errors_warn_from_the_daily_rate() {
    assert_eq!(CORRECTED_PER_DAY, 100);
    // 10 days of uptime: 999 is 99 a day, 1000 is 100.
    let at = |n: u64| {
        gpu0(&base(|p| {
            p.ports[0].correctable = counts(n, &[("RxErr", n)])
        }))
    };
    let below = at(999);
    assert_eq!(below.status, Status::Info, "{}", below.message);
    assert!(below.message.contains("999 corrected AER errors (RxErr 999) since boot at the GPU (its own link), 99 a day: signal integrity"), "{}", below.message);
    let f = at(1000);
    assert_eq!(f.status, Status::Warn);
    assert!(
        f.message
            .contains("100 a day (a warning from 100): signal integrity"),
        "{}",
        f.message
    );
    assert!(f.fix.as_deref().unwrap().starts_with("The GPU's own link"));
    let one = gpu0(&base(|p| {
        p.ports[1].correctable = counts(1, &[("Advisory Non-Fatal", 1)])
    }));
    assert_eq!(one.status, Status::Info);
    assert!(one.message.contains("1 corrected AER error (Advisory Non-Fatal 1) since boot at port 10:00.0 just above the GPU (the GPU's own link), 0.1 a day"), "{}", one.message);
    assert!(!one.message.contains("signal integrity"));
    // A rate under 10 a day is said with a decimal (the judgment floors it), from 10 whole.
    assert_eq!(rate_text(99, 10.0), "9.9");
    assert_eq!(rate_text(100, 10.0), "10");
    assert_eq!(rate_text(1_005, 10.0), "100");
}

/// A port the message names more than once is said in full the first time only.
#[test]
fn each_port_is_placed_in_full_once_per_message() {
    let f = gpu0(&base(|p| {
        p.ports[3].fatal = counts(1, &[("SDES", 1)]);
        p.ports[3].correctable = counts(5, &[("Timeout", 5)]);
    }));
    let long = "at root port 00:01.0, upstream of the GPU (the link to the CPU, shared by every device below it)";
    assert_eq!(f.message.matches(long).count(), 1, "{}", f.message);
    assert!(
        f.message
            .contains("since boot at root port 00:01.0, 0.5 a day"),
        "{}",
        f.message
    );
}

#[test]
fn the_uptime_counts_as_at_least_a_day() {
    let f = |uptime: Reading<f64>, n: u64| {
        let mut facts = base(|p| p.ports[2].correctable = counts(n, &[("BadTLP", n)]));
        facts.pcie_errors.uptime_s = uptime;
        gpu0(&facts)
    };
    // An hour up: 99 errors are 99 "a day", not 2376.
    assert_eq!(f(Reading::Value(3600.0), 99).status, Status::Info);
    assert_eq!(f(Reading::Value(3600.0), 100).status, Status::Warn);
    assert_eq!(f(Reading::unavailable("x"), 99).status, Status::Info);
    let w = f(Reading::unavailable("x"), 100);
    assert_eq!(w.status, Status::Warn);
    assert!(
        w.message
            .contains("at switch port 0f:00.0, upstream of the GPU"),
        "{}",
        w.message
    );
    assert!(w.fix.as_deref().unwrap().starts_with("Upstream of the GPU"));
    // Two days: 199 is 99 a day.
    assert_eq!(f(Reading::Value(2.0 * 86_400.0), 199).status, Status::Info);
    assert_eq!(f(Reading::Value(2.0 * 86_400.0), 200).status, Status::Warn);
    assert_eq!(f(Reading::Value(f64::NAN), 100).status, Status::Warn);
    assert_eq!(f(Reading::Value(-5.0), 99).status, Status::Info);
    let pass = base(|_| {});
    let mut no_uptime = pass.clone();
    no_uptime.pcie_errors.uptime_s = Reading::unavailable("x");
    assert!(gpu0(&no_uptime)
        .message
        .contains("the uptime not read, so counted as one day"));
}

#[test]
fn root_port_totals_without_a_device_count_warn() {
    let f = gpu0(&base(|p| {
        p.ports[3].rootport_totals = Some(RootPortTotals {
            cor: 5,
            nonfatal: 1,
            fatal: 0,
        })
    }));
    assert_eq!(f.status, Status::Warn);
    assert!(
        f.message
            .contains("1 uncorrected error message reported to root port 00:01.0"),
        "{}",
        f.message
    );
    let f = gpu0(&base(|p| {
        p.ports[3].rootport_totals = Some(RootPortTotals {
            cor: 0,
            nonfatal: 0,
            fatal: 2,
        })
    }));
    assert!(
        f.message.contains("2 uncorrected error messages"),
        "{}",
        f.message
    );
    // Corrected totals alone, or uncorrected ones a device's counter explains, add nothing.
    let f = gpu0(&base(|p| {
        p.ports[3].rootport_totals = Some(RootPortTotals {
            cor: 5,
            nonfatal: 0,
            fatal: 0,
        })
    }));
    assert_eq!(f.status, Status::Pass);
    let f = gpu0(&base(|p| {
        p.ports[3].rootport_totals = Some(RootPortTotals {
            cor: 0,
            nonfatal: 1,
            fatal: 0,
        });
        p.ports[0].nonfatal = counts(1, &[]);
    }));
    assert_eq!(f.message.matches("uncorrected").count(), 1, "{}", f.message);
    let f = gpu0(&base(|p| {
        p.ports[3].rootport_totals = Some(RootPortTotals {
            cor: 0,
            nonfatal: 1,
            fatal: 0,
        });
        p.ports[1].fatal = counts(1, &[]);
    }));
    assert!(
        !f.message.contains("reported to root port"),
        "{}",
        f.message
    );
}

fn with_log(text: &str, edit: impl Fn(&mut AerPath)) -> Facts {
    let mut f = base(edit);
    f.pcie_errors.log = log(text);
    f
}

#[test]
fn a_published_fatal_report_on_the_root_port_fails_upstream() {
    // gpu-burn #1: the Tesla at 02:00.0 under root port 00:02.0.
    let f = gpu0(&with_log(FATAL_LOG, |p| {
        p.gpu = "0000:00:06.0".into();
        p.ports[1].bus_id = "0000:00:02.0".into();
        p.ports[1].root_port = true;
        p.ports.truncate(2);
    }));
    assert_eq!(f.status, Status::Fail);
    assert!(
        f.message.contains("the kernel log has 1 uncorrected fatal AER report (Surprise Down Error) at root port 00:02.0 just above the GPU (the GPU's own link)"),
        "{}",
        f.message
    );
    assert!(
        f.message
            .contains("1 corrected AER report (Replay Timer Timeout)"),
        "{}",
        f.message
    );
    assert!(f.message.contains("signal integrity"));
    let lines = f.evidence.0["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2);
}

#[test]
fn corrected_reports_in_the_log_warn_from_ten() {
    assert_eq!(LOG_CORRECTED_WARN, 10);
    let line = "pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\npcieport 0000:00:01.0: AER: [ 0] RxErr\n";
    let nine = gpu0(&with_log(&line.repeat(9), |_| {}));
    assert_eq!(nine.status, Status::Info, "{}", nine.message);
    assert!(
        nine.message.contains(
            "the kernel log has 9 corrected AER reports (RxErr) at root port 00:01.0, upstream"
        ),
        "{}",
        nine.message
    );
    let ten = gpu0(&with_log(&line.repeat(10), |_| {}));
    assert_eq!(ten.status, Status::Warn);
    assert_eq!(
        ten.evidence.0["lines"].as_array().unwrap().len(),
        MAX_LINES_SHOWN
    );
    // The published corrected storm: the GPU's Timeout and its root port's four errors.
    let f = gpu0(&with_log(CORRECTED_LOG, |p| {
        p.gpu = "0000:00:06.0".into();
        p.ports[0].bus_id = "0000:00:06.0".into();
        p.ports[1].bus_id = "0000:00:03.1".into();
        p.ports[1].root_port = true;
        p.ports.truncate(2);
    }));
    assert_eq!(f.status, Status::Info);
    assert!(
        f.message
            .contains("(BadTLP, BadDLLP, Rollover, Timeout) at root port 00:03.1"),
        "{}",
        f.message
    );
    // Another function of the GPU (its audio function) counts as the GPU.
    let audio = gpu0(&with_log(
        "snd_hda_intel 0000:00:06.1: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)",
        |_| {},
    ));
    assert_eq!(audio.status, Status::Fail);
    assert!(
        audio.message.contains("at the GPU (its own link)"),
        "{}",
        audio.message
    );
    // A report about a function on no GPU's path is not this check's.
    let other = gpu0(&with_log(
        "nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)",
        |_| {},
    ));
    assert_eq!(other.status, Status::Pass);
}

#[test]
fn the_lookback_cuts_dated_reports() {
    let l = |day: u32| {
        format!("2026-11-{day:02}T10:00:00+00:00 pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)\n")
    };
    // Newest on the 30th: the 23rd at 10:00 is exactly 7 days before and counts, the 22nd not.
    let f = gpu0(&with_log(&(l(22) + &l(30)), |_| {}));
    assert!(
        f.message.contains("1 uncorrected fatal AER report"),
        "{}",
        f.message
    );
    let f = gpu0(&with_log(&(l(23) + &l(30)), |_| {}));
    assert!(
        f.message.contains("2 uncorrected fatal AER reports"),
        "{}",
        f.message
    );
    // A snapshot counts from its collection time.
    let mut s = with_log(&l(20), |_| {});
    s.origin = Origin::Snapshot {
        path: "x".into(),
        description: None,
        collected_at: Some("2026-11-28T10:00:00Z".into()),
    };
    assert_eq!(gpu0(&s).status, Status::Pass);
    s.origin = Origin::Snapshot {
        path: "x".into(),
        description: None,
        collected_at: Some("2026-11-27T10:00:00Z".into()),
    };
    assert_eq!(gpu0(&s).status, Status::Fail);
}

#[test]
fn unreadable_or_missing_counters_say_so() {
    let denied = |p: &mut AerPath| {
        for q in &mut p.ports {
            for r in [&mut q.correctable, &mut q.nonfatal, &mut q.fatal] {
                *r = Reading::unavailable(format!(
                    "/sys/bus/pci/devices/{}/aer_dev_fatal: permission denied",
                    q.bus_id
                ));
            }
        }
    };
    let f = gpu0(&base(denied));
    assert_eq!(f.status, Status::Skip);
    assert!(f.message.contains("the AER counters could not be read: /sys/bus/pci/devices/0000:00:06.0/aer_dev_fatal: permission denied"), "{}", f.message);
    let missing = |p: &mut AerPath| {
        for q in &mut p.ports {
            for r in [&mut q.correctable, &mut q.nonfatal, &mut q.fatal] {
                *r = Reading::unavailable("/sys/bus/pci/devices/x/aer_dev_fatal: no such file");
            }
        }
    };
    let f = gpu0(&base(missing));
    assert_eq!(f.status, Status::Info);
    assert!(f.message.contains("no AER counters (/sys/bus/pci/devices/x/aer_dev_fatal: no such file: a kernel without AER statistics (before 4.19)"), "{}", f.message);
    assert!(
        f.message
            .contains("no AER report about it in the kernel log (/dev/kmsg)"),
        "{}",
        f.message
    );
    let mut no_log = base(missing);
    no_log.pcie_errors.log =
        Reading::unavailable("/dev/kmsg: permission denied (kernel.dmesg_restrict=1)");
    let f = gpu0(&no_log);
    assert_eq!(f.status, Status::Skip);
    assert!(f.message.ends_with("the kernel log not read: /dev/kmsg: permission denied (kernel.dmesg_restrict=1): PCIe errors cannot be known"), "{}", f.message);
    // Missing counters with a report in the log: the report is judged.
    let mut fatal = base(missing);
    fatal.pcie_errors.log =
        log("x 0000:00:06.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=x");
    assert_eq!(gpu0(&fatal).status, Status::Fail);
    // One readable counter is enough to judge.
    let f = gpu0(&base(|p| {
        missing(p);
        p.ports[3].fatal = counts(0, &[]);
    }));
    assert_eq!(f.status, Status::Pass);
    // Counters read, log not: judged on the counters, the log's reason said.
    let mut counters_only = base(|_| {});
    counters_only.pcie_errors.log = Reading::unavailable("no log");
    let f = gpu0(&counters_only);
    assert_eq!(f.status, Status::Pass);
    assert!(
        f.message
            .ends_with("none in the kernel log not read: no log"),
        "{}",
        f.message
    );
}

#[test]
fn nothing_read_skips_and_the_log_alone_is_judged() {
    let mut f = base(|_| {});
    f.pcie_errors.paths = Reading::unavailable("/sys/bus/pci/devices: permission denied");
    f.pcie_errors.log = Reading::unavailable("/dev/kmsg: permission denied");
    let x = gpu0(&f);
    assert_eq!(x.status, Status::Skip);
    assert_eq!(x.message, "GPU 0 (00:06.0): the AER counters are not known (/sys/bus/pci/devices: permission denied) and the kernel log not either (/dev/kmsg: permission denied)");
    f.pcie_errors.log = log("x 0000:00:06.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=x");
    assert_eq!(gpu0(&f).status, Status::Fail);
    f.pcie_errors.log = log("");
    let x = gpu0(&f);
    assert_eq!(x.status, Status::Skip, "{}", x.message);
    f.pcie_errors.paths = Reading::unavailable("snapshot: not collected");
    let x = gpu0(&f);
    assert_eq!(x.status, Status::Info, "{}", x.message);
    assert!(
        x.message.contains(
            "no AER counters (snapshot: not collected), so errors since boot cannot be known"
        ),
        "{}",
        x.message
    );
    f.pcie_errors.log = Reading::unavailable("no log");
    let x = gpu0(&f);
    assert_eq!(x.status, Status::Skip, "{}", x.message);
    // A GPU with no path of its own in a list that was read.
    let mut g = base(|_| {});
    g.pcie_errors.paths = Reading::Value(vec![path(1)]);
    let x = gpu0(&g);
    assert_eq!(x.status, Status::Skip);
    assert!(x.message.contains("not found in sysfs"), "{}", x.message);
    let none = Machine::healthy("h200-sxm-141gb", 0).build();
    assert_eq!(run(&none)[0].status, Status::Skip);
}

#[test]
fn the_path_is_said() {
    let f = gpu0(&base(|p| p.ports.truncate(1)));
    assert!(
        f.message
            .contains("on the GPU (on the root bus: no port above it, as in most VMs)"),
        "{}",
        f.message
    );
    let f = gpu0(&base(|p| {
        p.ports.truncate(1);
        p.upstream_unknown = Some("not collected".into());
    }));
    assert!(
        f.message
            .contains("the ports above it are not known: not collected"),
        "{}",
        f.message
    );
    let f = gpu0(&base(|p| p.ports.truncate(2)));
    assert!(
        f.message.contains("the GPU and the 1 port above it"),
        "{}",
        f.message
    );
}

fn notices(text: &str, edit: impl Fn(&mut AerPath), link_bad: bool) -> Vec<Finding> {
    let mut m = Machine::healthy("h200-sxm-141gb", 2);
    if link_bad {
        m = m.gpu(0, |g| g.pcie.width_current = Reading::Value(8));
    }
    let mut f = m.build();
    let mut p0 = path(0);
    edit(&mut p0);
    f.pcie_errors = PcieErrorFacts {
        uptime_s: Reading::Value(86_400.0),
        paths: Reading::Value(vec![p0, path(1)]),
        log: log(text),
    };
    run(&f)
        .into_iter()
        .filter(|x| x.gpu == Some(0) && x.evidence.0.contains_key("notice"))
        .collect()
}

fn limited(at: &str, width: u32, gts: &str) -> String {
    format!("[    0.27] pci 0000:00:06.0: 63.008 Gb/s available PCIe bandwidth, limited by {gts} GT/s PCIe x{width} link at {at} (capable of 504.1 Gb/s with 32.0 GT/s PCIe x16 link)\n")
}

#[test]
fn a_notice_on_the_gpus_own_link_is_pcie_links_finding() {
    for at in ["0000:10:00.0", "0000:00:06.0"] {
        let n = notices(&limited(at, 8, "32.0"), |_| {}, true);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].status, Status::Warn);
        assert_eq!(n[0].caused_by, Some(Cause::gpu("pcie.link", 0)));
        assert!(
            n[0].message.contains(
                "the GPU's own link limited to 32 GT/s x8 where the GPU is capable of 32 GT/s x16"
            ),
            "{}",
            n[0].message
        );
        // pcie.link content with the link now: what the kernel saw at probe time informs.
        let n = notices(&limited(at, 8, "32.0"), |_| {}, false);
        assert_eq!(n[0].status, Status::Info);
        assert_eq!(n[0].caused_by, None);
    }
    // Written at every probe: one finding per distinct notice.
    let twice = limited("0000:10:00.0", 8, "32.0").repeat(2);
    assert_eq!(notices(&twice, |_| {}, true).len(), 1);
    let two = limited("0000:10:00.0", 8, "32.0") + &limited("0000:10:00.0", 4, "32.0");
    assert_eq!(notices(&two, |_| {}, true).len(), 2);
    // A path not known: taken as the GPU's own.
    let n = notices(
        &limited("0000:00:01.0", 8, "32.0"),
        |p| {
            p.ports.truncate(1);
            p.upstream_unknown = Some("x".into());
        },
        true,
    );
    assert_eq!(n[0].caused_by, Some(Cause::gpu("pcie.link", 0)));
    let n = notices(&limited("<unknown>", 8, "32.0"), |_| {}, true);
    assert!(
        n[0].message.contains("(at an unknown device)"),
        "{}",
        n[0].message
    );
}

#[test]
fn a_notice_upstream_is_named_as_such() {
    for at in ["0000:0f:00.0", "0000:00:01.0", "0000:99:00.0"] {
        let n = notices(&limited(at, 8, "32.0"), |_| {}, false);
        assert_eq!(n[0].status, Status::Warn, "{at}");
        assert!(
            n[0].message
                .contains("upstream of the GPU: every device below that port shares it"),
            "{}",
            n[0].message
        );
        assert_eq!(n[0].caused_by, None);
        assert!(n[0].fix.is_some());
        // A slower generation only, at full width: an idle link at probe time.
        let n = notices(&limited(at, 16, "2.5"), |_| {}, false);
        assert_eq!(n[0].status, Status::Info, "{at}");
    }
    // A notice about another device is not this GPU's.
    let other = limited("0000:00:01.0", 8, "32.0").replace("pci 0000:00:06.0", "pci 0000:00:09.0");
    assert!(notices(&other, |_| {}, false).is_empty());
}

#[test]
fn the_published_limited_by_notice() {
    // The GTX 1650 Ti at 01:00.0, limited at root port 00:01.0 (x8 of x16).
    let mut f = Machine::healthy("h200-sxm-141gb", 1)
        .gpu(0, |g| g.pcie.width_current = Reading::Value(8))
        .build();
    f.pcie_errors = PcieErrorFacts {
        uptime_s: Reading::Value(86_400.0),
        paths: Reading::Value(vec![AerPath {
            gpu: bus_id(0),
            ports: vec![port(&bus_id(0), false), port("0000:00:01.0", true)],
            upstream_unknown: None,
        }]),
        log: log(&LIMITED_LOG.replace("0000:01:00.0", &bus_id(0))),
    };
    let n: Vec<Finding> = run(&f)
        .into_iter()
        .filter(|x| x.evidence.0.contains_key("notice"))
        .collect();
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].caused_by, Some(Cause::gpu("pcie.link", 0)));
    assert!(
        n[0].message
            .contains("limited to 8 GT/s x8 where the GPU is capable of 8 GT/s x16 (at 00:01.0)"),
        "{}",
        n[0].message
    );
}

#[test]
fn log_text_is_escaped_and_bounded() {
    let evil =
        "pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, type=\u{1b}[31mPhysical\n";
    let f = gpu0(&with_log(
        &format!("{evil}pcieport 0000:00:01.0:    [ 0] Rx\u{1b}[0mErr\n"),
        |_| {},
    ));
    assert!(!f.message.contains('\u{1b}'), "{}", f.message);
    let lines = f.evidence.0["lines"].as_array().unwrap();
    assert!(!lines[0].as_str().unwrap().contains('\u{1b}'));
    let many: String = (0..20).map(|i| format!("x 0000:00:06.0: PCIe Bus Error: severity=Corrected, type=T{i}\nx 0000:00:06.0:    [{:>2}] N{i}\n", i % 16)).collect();
    let f = gpu0(&with_log(&many, |p| {
        p.ports[0].fatal = counts(1, &[]);
        p.ports[1].fatal = counts(1, &[]);
        p.ports[2].fatal = counts(1, &[]);
        p.ports[3].fatal = counts(1, &[]);
        p.ports[0].correctable = counts(9, &[("A", 1), ("B", 1), ("C", 1), ("D", 1), ("E", 5)]);
    }));
    assert!(
        f.message.contains("and 2 more (see the evidence)"),
        "{}",
        f.message
    );
    assert!(!f.message.contains("E 5"), "{}", f.message);
    assert_eq!(
        f.evidence.0["lines"].as_array().unwrap().len(),
        MAX_LINES_SHOWN
    );
}

/// An Xid 79 on a GPU whose memory counters are clean, with an uncorrected AER error on its
/// path: the link is the one problem, memory.errors (and through it health.xid) its effects;
/// with another fault Xid beside it, or without the AER error, memory.errors stands alone.
#[test]
fn a_failed_link_is_the_cause_of_an_xid_79_that_memory_errors_reads() {
    let memory = |fatal: u64, codes: &[u32]| {
        let mut f = base(|p| p.ports[3].fatal = counts(fatal, &[("SDES", fatal)]));
        let bus = bus_id(0);
        f.xid_events = Reading::Value(
            codes
                .iter()
                .map(|c| crate::facts::XidEvent {
                    bus_id: Some(bus.clone()),
                    code: *c,
                    text: format!("NVRM: Xid (PCI:{bus}): {c}, ..."),
                    ..Default::default()
                })
                .collect(),
        );
        let out = (crate::checks::memory::errors::CHECK.run)(&f, &Policy::default());
        (
            uncorrected_on(&f, &Policy::default(), &f.gpu_list()[0]),
            out.into_iter().find(|x| x.gpu == Some(0)).unwrap(),
        )
    };
    let (aer_fails, m) = memory(1, &[79]);
    assert!(aer_fails);
    assert_eq!(m.status, Status::Fail);
    assert_eq!(m.caused_by, Some(Cause::gpu(ID, 0)));
    assert!(
        m.fix.as_deref().unwrap_or("").contains("pcie.aer"),
        "{:?}",
        m.fix
    );
    let (aer_fails, m) = memory(0, &[79]);
    assert!(!aer_fails);
    assert_eq!(m.caused_by, None);
    let (_, m) = memory(1, &[79, 48]);
    assert_eq!(m.caused_by, None);
    assert!(
        m.fix.as_deref().unwrap_or("").contains("replace the GPU"),
        "{:?}",
        m.fix
    );
}
