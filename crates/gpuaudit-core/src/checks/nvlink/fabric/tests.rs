use super::*;
use crate::facts::{FabricManagerLog, NvSwitch};
use crate::report::Causes;
use crate::testing::{statuses, Machine, DRIVER_VERSION};

fn run(f: &Facts) -> Vec<Finding> {
    (CHECK.run)(f, &Policy::default())
}

fn machine_level(out: &[Finding]) -> &Finding {
    out.iter()
        .find(|f| f.gpu.is_none())
        .unwrap_or_else(|| panic!("no machine-level finding: {out:#?}"))
}

fn of(out: &[Finding], gpu: u32) -> Option<&Finding> {
    out.iter().find(|f| f.gpu == Some(gpu))
}

fn fabric(state: &str, status: Option<&str>, clique: Option<u32>) -> Reading<Fabric> {
    Reading::Value(Fabric {
        state: state.into(),
        status: status.map(str::to_string),
        clique_id: clique,
        cluster_uuid: None,
    })
}

fn switches(n: usize) -> Reading<Vec<NvSwitch>> {
    Reading::Value(
        (0..n)
            .map(|i| NvSwitch {
                bus_id: format!("0000:{:02x}:00.0", 5 + i),
                device: 0x22a3,
            })
            .collect(),
    )
}

/// An 8-GPU H100 NVSwitch board, bare metal, the fabric manager running with the driver's
/// version, every GPU registered (Completed, Success, clique 0).
fn board() -> Machine {
    Machine::healthy("h100-sxm5-80gb", 8)
        .gpus(|g| g.fabric = fabric("Completed", Some("Success"), Some(0)))
        .with(|f| {
            f.nvswitch.switches = switches(4);
            f.nvswitch.device_nodes =
                Reading::Value((0..4).map(|i| format!("nvidia-nvswitch{i}")).collect());
            let fm = &mut f.nvswitch.fabric_manager;
            fm.unit_file = Reading::Value(Some(
                "/usr/lib/systemd/system/nvidia-fabricmanager.service".into(),
            ));
            fm.enabled = Reading::Value(true);
            fm.running = Reading::Value(true);
            fm.version = Reading::Value(DRIVER_VERSION.into());
            fm.log = Reading::Value(FabricManagerLog {
                lines: 10,
                configured: true,
                ..Default::default()
            });
        })
}

#[test]
fn the_cause_names_this_check() {
    assert_eq!(crate::checks::causes::FABRIC, CHECK.id);
}

#[test]
fn no_gpu_skips() {
    let f = Machine::healthy("h100-sxm5-80gb", 0).build();
    assert_eq!(statuses(&run(&f)), vec![Status::Skip]);
}

#[test]
fn a_pcie_machine_is_not_applicable_and_an_unread_bus_skips() {
    let mut f = Machine::healthy("l4", 2)
        .with(|f| f.nvswitch.switches = Reading::Value(vec![]))
        .build();
    let out = run(&f);
    assert_eq!(statuses(&out), vec![Status::Pass]);
    assert!(
        out[0].message.starts_with("not applicable"),
        "{}",
        out[0].message
    );
    f.nvswitch.switches = Reading::unavailable("/sys/bus/pci/devices: permission denied");
    let out = run(&f);
    assert_eq!(statuses(&out), vec![Status::Skip]);
    assert!(
        out[0].message.contains("permission denied"),
        "{}",
        out[0].message
    );
    // A GPU with "Not Supported" and a good status is no fabric either.
    let f = Machine::healthy("l4", 1)
        .gpus(|g| g.fabric = fabric("Not Supported", Some("Success"), None))
        .with(|f| f.nvswitch.switches = Reading::Value(vec![]))
        .build();
    assert_eq!(statuses(&run(&f)), vec![Status::Pass]);
    // Device nodes alone make it an NVSwitch system.
    let f = Machine::healthy("l4", 1)
        .with(|f| {
            f.nvswitch.switches = Reading::Value(vec![]);
            f.nvswitch.device_nodes = Reading::Value(vec!["nvidia-nvswitch0".into()]);
        })
        .build();
    assert!(!run(&f)[0].message.starts_with("not applicable"));
}

#[test]
fn a_working_board_passes() {
    let out = run(&board().build());
    assert_eq!(statuses(&out), vec![Status::Pass], "{out:#?}");
    let m = &out[0].message;
    assert!(
        m.contains(&format!("version {DRIVER_VERSION}, the driver's")),
        "{m}"
    );
    assert!(m.contains("8 of 8 GPUs registered"), "{m}");
    assert_eq!(
        out[0].evidence.get("nvswitches").unwrap()[0],
        "0000:05:00.0 22a3 LS10 (H100 generation)"
    );
}

#[test]
fn no_fabric_manager_installed_fails_and_is_the_cause_of_the_gpus() {
    let f = board()
        .gpus(|g| g.fabric = fabric("In Progress", Some("N/A"), None))
        .with(|f| {
            let fm = &mut f.nvswitch.fabric_manager;
            fm.unit_file = Reading::Value(None);
            fm.running = Reading::Value(false);
            fm.version = Reading::unavailable("nv-fabricmanager: not found");
            fm.log = Reading::Value(FabricManagerLog::default());
        })
        .build();
    let out = run(&f);
    let m = machine_level(&out);
    assert_eq!(m.status, Status::Fail);
    assert!(
        m.message.contains("without the fabric manager"),
        "{}",
        m.message
    );
    let fix = m.fix.as_deref().unwrap();
    assert!(
        fix.contains("`sudo apt-get install nvidia-fabricmanager-580=580.159.04-1`"),
        "{fix}"
    );
    assert!(
        fix.contains("`sudo dnf install nvidia-fabric-manager-580.159.04`"),
        "{fix}"
    );
    // The driver's version not known, or not a plain version: the command asks for it.
    for v in [
        Reading::unavailable("x"),
        Reading::Value("5; rm -rf /".to_string()),
    ] {
        let mut g = f.clone();
        g.driver.version = v;
        let out = run(&g);
        let fix = out[0].fix.as_deref().unwrap();
        assert!(
            fix.contains("nvidia-fabricmanager-${V%%.*}=${V}-1"),
            "{fix}"
        );
        assert!(
            fix.contains("`V=$(nvidia-smi --query-gpu=driver_version"),
            "{fix}"
        );
        assert!(!fix.contains("rm -rf"), "{fix}");
    }
    for i in 0..8 {
        let g = of(&out, i).expect("a finding per GPU");
        assert_eq!(g.status, Status::Fail, "{g:#?}");
        assert_eq!(g.caused_by, Some(Cause::check(ID)));
        assert!(g
            .fix
            .as_deref()
            .unwrap()
            .contains("enable --now nvidia-fabricmanager"));
    }
    let causes = Causes::of(&out);
    assert_eq!(
        causes.root_of(1),
        0,
        "the GPUs' findings root in the fabric manager's"
    );
}

#[test]
fn installed_but_not_running_fails_with_the_logs_last_error() {
    let f = board()
        .with(|f| {
            let fm = &mut f.nvswitch.fabric_manager;
            fm.running = Reading::Value(false);
            fm.enabled = Reading::Value(false);
            fm.log = Reading::Value(FabricManagerLog {
                lines: 3,
                errors: vec!["request to query NVSwitch device information failed".into()],
                error_count: 1,
                ..Default::default()
            });
        })
        .build();
    let out = run(&f);
    assert_eq!(out[0].status, Status::Fail);
    assert!(
        out[0].message.contains("installed but not running"),
        "{}",
        out[0].message
    );
    assert!(out[0].message.contains("not enabled at boot"));
    assert!(out[0]
        .message
        .contains("its log's last error: \"request to query"));
    assert!(out[0]
        .fix
        .as_deref()
        .unwrap()
        .starts_with("`sudo systemctl enable --now"));
    // Enabled: no "not enabled" clause; not read: none either.
    for e in [Reading::Value(true), Reading::unavailable("x")] {
        let mut g = f.clone();
        g.nvswitch.fabric_manager.enabled = e;
        let out = run(&g);
        assert_eq!(out[0].status, Status::Fail);
        assert!(
            !out[0].message.contains("not enabled"),
            "{}",
            out[0].message
        );
    }
    // The GPUs registered fine: no finding of their own.
    assert_eq!(out.len(), 1);
}

#[test]
fn a_version_other_than_the_drivers_fails_naming_both() {
    let f = board()
        .with(|f| f.nvswitch.fabric_manager.version = Reading::Value("570.133.20".into()))
        .build();
    let out = run(&f);
    assert_eq!(out[0].status, Status::Fail);
    assert!(
        out[0].message.contains(&format!(
            "version 570.133.20 is not the driver's {DRIVER_VERSION}"
        )),
        "{}",
        out[0].message
    );
    assert!(!out[0].message.contains("not running"));
    assert!(out[0].fix.as_deref().unwrap().contains(DRIVER_VERSION));
    // Stopped by it: said.
    let mut g = f.clone();
    g.nvswitch.fabric_manager.running = Reading::Value(false);
    assert!(run(&g)[0].message.contains("(it is not running)"));
    // From the log's mismatch line only (the version not read).
    let mut g = board().build();
    g.nvswitch.fabric_manager.version = Reading::unavailable("not read");
    g.nvswitch.fabric_manager.running = Reading::Value(false);
    g.nvswitch.fabric_manager.log = Reading::Value(FabricManagerLog {
        mismatch: Some(("575.51.03".into(), DRIVER_VERSION.into())),
        ..Default::default()
    });
    let out = run(&g);
    assert_eq!(out[0].status, Status::Fail);
    assert!(
        out[0].message.contains("575.51.03 is not the driver's"),
        "{}",
        out[0].message
    );
    // A mismatch line about a driver since replaced is history: the version now matches.
    let mut g = board().build();
    g.nvswitch.fabric_manager.log = Reading::Value(FabricManagerLog {
        mismatch: Some(("575.51.03".into(), "575.51.02".into())),
        configured: true,
        ..Default::default()
    });
    assert_eq!(statuses(&run(&g)), vec![Status::Pass]);
    // The log's version line stands in for the command's.
    let mut g = board().build();
    g.nvswitch.fabric_manager.version = Reading::unavailable("not read");
    g.nvswitch.fabric_manager.log = Reading::Value(FabricManagerLog {
        version: Some("570.1.1".into()),
        ..Default::default()
    });
    assert!(run(&g)[0].message.contains("570.1.1 is not the driver's"));
    // The driver's version not known: nothing to compare, no mismatch.
    let mut g = f.clone();
    g.driver.version = Reading::unavailable("not read");
    let out = run(&g);
    assert_eq!(out[0].status, Status::Info, "{out:#?}");
    assert!(out[0].message.contains("(the driver's not read)"));
}

#[test]
fn running_not_known_skips_and_a_version_not_read_is_not_a_pass() {
    let mut f = board().build();
    f.nvswitch.fabric_manager.running = Reading::unavailable("snapshot has no process list");
    let out = run(&f);
    assert_eq!(out[0].status, Status::Skip);
    assert!(out[0].message.contains("snapshot has no process list"));
    let mut f = board().build();
    f.nvswitch.fabric_manager.version = Reading::unavailable("nv-fabricmanager: not found");
    let out = run(&f);
    assert_eq!(out[0].status, Status::Info);
    assert!(out[0]
        .message
        .contains("version not read: nv-fabricmanager: not found"));
    assert_eq!(
        out[0].evidence.get("version_not_compared"),
        Some(&true.into())
    );
}

#[test]
fn log_errors_inform_where_all_else_passes() {
    let mut f = board().build();
    f.nvswitch.fabric_manager.log = Reading::Value(FabricManagerLog {
        lines: 5,
        errors: vec!["a".into(), "b".into(), "c".into(), "d".into()],
        error_count: 4,
        configured: true,
        ..Default::default()
    });
    let out = run(&f);
    assert_eq!(out[0].status, Status::Info);
    assert!(out[0].message.contains("4 error line(s), the last: \"d\""));
    let shown = out[0].evidence.get("log_last_errors").unwrap();
    assert_eq!(shown.as_array().unwrap().len(), MAX_LOG_LINES_SHOWN);
    assert_eq!(shown[0], "b");
}

#[test]
fn each_registration_state_is_judged() {
    let with = |state: &str, status: Option<&str>| {
        run(&board()
            .gpu(3, |g| g.fabric = fabric(state, status, None))
            .build())
    };
    let out = with("In Progress", Some("N/A"));
    let g = of(&out, 3).unwrap();
    assert_eq!(g.status, Status::Warn);
    assert!(g.message.contains("re-run in a minute"), "{}", g.message);
    assert_eq!(g.caused_by, None, "the fabric manager runs");
    assert_eq!(out[0].status, Status::Info, "7 of 8 registered: no pass");
    assert!(out[0].message.contains("7 of 8 GPUs registered"));
    // The spelling of the synthetic XML.
    assert_eq!(
        of(&with("InProgress", None), 3).unwrap().status,
        Status::Warn
    );
    let g = with("Not Started", None);
    assert_eq!(of(&g, 3).unwrap().status, Status::Fail);
    let g = with("Completed", Some("error 999"));
    let g3 = of(&g, 3).unwrap();
    assert_eq!(g3.status, Status::Fail);
    assert!(g3
        .message
        .contains("Completed but failed, status error 999"));
    let g = with("Not Supported", Some("error 3"));
    assert_eq!(of(&g, 3).unwrap().status, Status::Fail);
    let g = with("Degraded", Some("Success"));
    assert_eq!(of(&g, 3).unwrap().status, Status::Warn);
    assert!(of(&g, 3)
        .unwrap()
        .message
        .contains("not one gpuaudit knows"));
    // Good ones have no finding of their own.
    assert!(of(&with("Completed", Some("Success")), 3).is_none());
    assert!(of(&with("Completed", None), 3).is_none());
}

#[test]
fn every_unregistered_gpu_has_a_finding_that_nvlink_status_names() {
    for state in ["In Progress", "Not Started", "Completed", "Odd"] {
        let f = board()
            .gpu(2, |g| g.fabric = fabric(state, Some("error 5"), None))
            .build();
        let out = run(&f);
        let g = f.gpu_list()[2].clone();
        assert!(fabric_unregistered(&g).is_some());
        let mine = of(&out, 2).expect("nvlink.fabric judges GPU 2");
        assert!(matches!(mine.status, Status::Warn | Status::Fail));
        let mut all = out.clone();
        all.extend((crate::checks::nvlink::status::CHECK.run)(
            &f,
            &Policy::default(),
        ));
        let status_gpu2 = all
            .iter()
            .position(|x| x.check == "nvlink.status" && x.gpu == Some(2))
            .unwrap();
        assert_eq!(all[status_gpu2].caused_by, Some(Cause::gpu(ID, 2)));
        let causes = Causes::of(&all);
        let root = causes.root_of(status_gpu2);
        assert_eq!(all[root].check, ID, "{state}");
    }
}

#[test]
fn cliques_that_differ_warn() {
    let f = board()
        .gpus(|g| {
            let c = if g.index < 4 { 1 } else { 2 };
            g.fabric = fabric("Completed", Some("Success"), Some(c));
        })
        .build();
    let out = run(&f);
    assert_eq!(statuses(&out), vec![Status::Pass, Status::Warn]);
    assert!(
        out[1].message.contains("2 NVLink partitions"),
        "{}",
        out[1].message
    );
    assert!(out[1]
        .message
        .contains("clique 1: GPU0, GPU1, GPU2, GPU3; clique 2: GPU4"));
    // A GPU without a clique id does not make a partition.
    let f = board()
        .gpu(0, |g| g.fabric = fabric("Completed", Some("Success"), None))
        .build();
    assert_eq!(statuses(&run(&f)), vec![Status::Pass]);
}

#[test]
fn in_a_vm_without_switches_the_host_runs_the_fabric_manager() {
    let vm = |state: &str| {
        Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| g.fabric = fabric(state, Some("Success"), Some(0)))
            .with(|f| {
                f.machine.hypervisor = Reading::Value(true);
                f.nvswitch.switches = Reading::Value(vec![]);
                f.nvswitch.device_nodes = Reading::Value(vec![]);
                f.nvswitch.fabric_manager.unit_file = Reading::Value(None);
                f.nvswitch.fabric_manager.running = Reading::Value(false);
            })
            .build()
    };
    let out = run(&vm("Completed"));
    assert_eq!(statuses(&out), vec![Status::Pass]);
    assert!(
        out[0].message.contains("the host runs the fabric manager"),
        "{}",
        out[0].message
    );
    assert!(out[0].message.contains("cannot be read from here"));
    assert!(out[0].message.contains("2 of 2 GPUs registered"));
    let out = run(&vm("In Progress"));
    assert_eq!(
        statuses(&out),
        vec![Status::Info, Status::Warn, Status::Warn]
    );
    assert_eq!(out[1].caused_by, None);
    // An NVL72 compute tray (bare metal, superchips): the switch trays manage the fabric.
    let f = Machine::healthy("gb200", 4)
        .gpus(|g| g.fabric = fabric("Completed", Some("Success"), Some(7)))
        .with(|f| {
            f.nvswitch.switches = Reading::Value(vec![]);
            f.nvswitch.fabric_manager.unit_file = Reading::Value(None);
            f.nvswitch.fabric_manager.running = Reading::Value(false);
        })
        .build();
    let out = run(&f);
    assert_eq!(statuses(&out), vec![Status::Pass]);
    assert!(
        out[0].message.contains("switch trays"),
        "{}",
        out[0].message
    );
    // No GPU reports a registration there: information, not a pass.
    let mut g = f.clone();
    if let Reading::Value(gs) = &mut g.gpus {
        for x in gs {
            x.fabric = Reading::unavailable("NVML: not supported on this GPU");
        }
    }
    let out = run(&g);
    assert_eq!(statuses(&out), vec![Status::Info]);
    assert!(out[0]
        .message
        .contains("no GPU reports a fabric registration"));
}

#[test]
fn an_hgx_b200_without_a_fabric_manager_fails_though_its_switches_are_not_on_pci() {
    let f = Machine::healthy("b200", 8)
        .gpus(|g| g.fabric = fabric("In Progress", Some("N/A"), None))
        .with(|f| {
            f.nvswitch.switches = Reading::Value(vec![]);
            f.nvswitch.device_nodes = Reading::Value(vec![]);
            f.nvswitch.fabric_manager.unit_file = Reading::Value(None);
            f.nvswitch.fabric_manager.running = Reading::Value(false);
        })
        .build();
    let out = run(&f);
    assert_eq!(out[0].status, Status::Fail);
    assert!(out[0].message.contains("without the fabric manager"));
    assert_eq!(of(&out, 0).unwrap().caused_by, Some(Cause::check(ID)));
    // The same in a VM: the host's.
    let mut g = f.clone();
    g.machine.hypervisor = Reading::Value(true);
    let out = run(&g);
    assert_eq!(out[0].status, Status::Info);
    assert!(out[0].message.contains("this VM sees no NVSwitch"));
}

#[test]
fn text_from_the_machine_is_escaped() {
    let mut f = board().build();
    f.nvswitch.fabric_manager.version = Reading::Value("5\x1b[2J".into());
    let out = run(&f);
    assert!(!out[0].message.contains('\x1b'), "{}", out[0].message);
    let f = board()
        .gpu(1, |g| g.fabric = fabric("Odd\x1b]0;x\x07", None, None))
        .build();
    let out = run(&f);
    assert!(!of(&out, 1).unwrap().message.contains('\x1b'));
}

#[test]
fn in_a_container_the_hosts_fabric_manager_is_not_judged() {
    let mut f = board()
        .with(|f| {
            f.host.container.inside = Reading::Value(Some("kubernetes".into()));
            f.nvswitch.fabric_manager.unit_file = Reading::Value(None);
            f.nvswitch.fabric_manager.running = Reading::Value(false);
        })
        .build();
    let out = run(&f);
    assert_eq!(statuses(&out), vec![Status::Pass], "{out:#?}");
    assert!(
        out[0].message.contains("inside a container (kubernetes)"),
        "{}",
        out[0].message
    );
    // One it sees running (a privileged container with the host's pid namespace) is judged.
    f.nvswitch.fabric_manager.running = Reading::Value(true);
    f.nvswitch.fabric_manager.version = Reading::Value("1.2.3".into());
    assert_eq!(run(&f)[0].status, Status::Fail);
    // Not in a container: judged.
    f.host.container.inside = Reading::Value(None);
    f.nvswitch.fabric_manager.running = Reading::Value(false);
    assert_eq!(run(&f)[0].status, Status::Fail);
}

#[test]
fn log_errors_are_said_only_where_the_gpus_are_registered() {
    let f = board()
        .gpu(0, |g| g.fabric = fabric("In Progress", None, None))
        .with(|f| {
            f.nvswitch.fabric_manager.log = Reading::Value(FabricManagerLog {
                errors: vec!["x".into()],
                error_count: 1,
                ..Default::default()
            })
        })
        .build();
    let out = run(&f);
    assert_eq!(out[0].status, Status::Info);
    assert!(!out[0].message.contains("error line"), "{}", out[0].message);
}

#[test]
fn a_logged_mismatch_counts_where_the_drivers_version_is_not_known() {
    let mut f = board().build();
    f.driver.version = Reading::unavailable("not read");
    f.nvswitch.fabric_manager.version = Reading::unavailable("not read");
    f.nvswitch.fabric_manager.log = Reading::Value(FabricManagerLog {
        mismatch: Some(("575.51.03".into(), "575.51.02".into())),
        ..Default::default()
    });
    let out = run(&f);
    assert_eq!(out[0].status, Status::Fail);
    assert!(
        out[0]
            .message
            .contains("575.51.03 is not the driver's 575.51.02"),
        "{}",
        out[0].message
    );
    assert!(out[0].fix.as_deref().unwrap().contains("575.51.02"));
}

#[test]
fn an_nvlink5_board_needs_nvlsm_beside_the_fabric_manager() {
    let f = Machine::healthy("b200", 8)
        .gpus(|g| g.fabric = fabric("In Progress", Some("N/A"), None))
        .with(|f| {
            f.nvswitch.switches = Reading::Value(vec![]);
            let fm = &mut f.nvswitch.fabric_manager;
            fm.unit_file = Reading::Value(Some(
                "/usr/lib/systemd/system/nvidia-fabricmanager.service".into(),
            ));
            fm.running = Reading::Value(true);
            fm.nvlsm_running = Reading::Value(false);
            fm.version = Reading::Value(DRIVER_VERSION.into());
        })
        .build();
    let out = run(&f);
    assert_eq!(out[0].status, Status::Fail, "{out:#?}");
    assert!(out[0].message.contains("without the NVLink Subnet Manager"));
    assert_eq!(of(&out, 0).unwrap().caused_by, Some(Cause::check(ID)));
    let mut g = f.clone();
    g.nvswitch.fabric_manager.nvlsm_running = Reading::Value(true);
    let out = run(&g);
    assert_ne!(out[0].status, Status::Fail, "{out:#?}");
    assert_eq!(out[0].evidence.get("nvlsm_running"), Some(&true.into()));
    g.nvswitch.fabric_manager.nvlsm_running = Reading::unavailable("not known");
    assert_ne!(run(&g)[0].status, Status::Fail);
    // A Hopper board needs none.
    let mut h = board().build();
    h.nvswitch.fabric_manager.nvlsm_running = Reading::Value(false);
    assert_eq!(run(&h)[0].status, Status::Pass);
    // Nor the superchips of an NVL72 (its switch trays run it), where a fabric manager runs.
    let c = Machine::healthy("gb200", 4)
        .gpus(|g| g.fabric = fabric("Completed", Some("Success"), Some(7)))
        .with(|f| {
            f.nvswitch.switches = Reading::Value(vec![]);
            let fm = &mut f.nvswitch.fabric_manager;
            fm.running = Reading::Value(true);
            fm.nvlsm_running = Reading::Value(false);
            fm.version = Reading::Value(DRIVER_VERSION.into());
        })
        .build();
    assert_eq!(run(&c)[0].status, Status::Pass, "{:#?}", run(&c));
}
