use super::*;
use crate::facts::ThrottleReason as T;

const H200: &str =
    include_str!("../../../../../fixtures/snapshots/h200-x2-vm/cmd/nvidia-smi-q.xml");
const R470_V100: &str = include_str!("../testdata/nvsmi-r470-v100.xml");
const R525_A100_MIG: &str = include_str!("../testdata/nvsmi-r525-a100-mig.xml");
const R550_VGPU: &str = include_str!("../testdata/nvsmi-r550-vgpu.xml");

fn v<T: Clone + std::fmt::Debug>(r: &Reading<T>) -> T {
    match r {
        Reading::Value(v) => v.clone(),
        Reading::Unavailable(why) => panic!("expected a value, got unavailable: {why}"),
    }
}

fn why<T: std::fmt::Debug>(r: &Reading<T>) -> &str {
    match r.reason() {
        Some(r) => r,
        None => panic!("expected unavailable, got {r:?}"),
    }
}

#[test]
fn h200_fixture_fills_every_field() {
    let log = parse(H200).unwrap();
    assert_eq!(log.driver_version.as_deref(), Some("580.159.04"));
    assert_eq!(log.cuda_version.as_deref(), Some("13.0"));
    assert_eq!(log.gpus.len(), 2);
    let g = &log.gpus[0];
    assert_eq!(g.index, 0);
    assert_eq!(g.pci_bus_id, "0000:00:06.0");
    assert_eq!(log.gpus[1].index, 1);
    assert_eq!(log.gpus[1].pci_bus_id, "0000:00:07.0");
    assert_eq!(g.source, "nvidia-smi");
    assert_eq!(v(&g.name), "NVIDIA H200");
    assert_eq!(v(&g.uuid), "GPU-00000000-0000-0000-0000-000000000060");
    assert_eq!(v(&g.serial), "0000000000000");
    assert_eq!(v(&g.pci_device_id), 0x2335);
    assert_eq!(v(&g.pci_subsystem_id), 0x18BF10DE);
    assert_eq!(v(&g.architecture), "Hopper");
    assert_eq!(v(&g.vbios), "96.00.A5.00.1A");
    assert_eq!(v(&g.board_part_number), "692-2G520-0282-001");
    assert_eq!(
        why(&g.compute_capability),
        "nvidia-smi -q does not report it"
    );
    assert_eq!(why(&g.sm_count), "nvidia-smi -q does not report it");

    assert_eq!(v(&g.memory.total_mib), 143771);
    assert_eq!(v(&g.memory.used_mib), 0);
    assert_eq!(v(&g.memory.free_mib), 143156);
    assert_eq!(v(&g.memory.reserved_mib), 616);

    assert_eq!(v(&g.pcie.gen_current), 5);
    assert_eq!(v(&g.pcie.gen_max), 5);
    assert_eq!(v(&g.pcie.gen_max_gpu), 5);
    assert_eq!(
        why(&g.pcie.gen_max_host),
        "nvidia-smi: <pci/pci_gpu_link_info/pcie_gen/max_host_link_gen> N/A"
    );
    assert_eq!(v(&g.pcie.width_current), 16);
    assert_eq!(v(&g.pcie.width_max), 16);
    assert_eq!(v(&g.pcie.replay_counter), 0);

    assert_eq!(v(&g.power.draw_w), 78.46);
    assert_eq!(v(&g.power.limit_w), 700.0);
    assert_eq!(v(&g.power.default_limit_w), 700.0);
    assert_eq!(v(&g.power.min_limit_w), 200.0);
    assert_eq!(v(&g.power.max_limit_w), 700.0);

    assert_eq!(v(&g.clocks.sm_mhz), 345);
    assert_eq!(v(&g.clocks.mem_mhz), 3201);
    assert_eq!(v(&g.clocks.sm_max_mhz), 1980);
    assert_eq!(v(&g.clocks.mem_max_mhz), 3201);
    assert_eq!(v(&g.clocks.app_sm_mhz), 1980);
    assert_eq!(v(&g.clocks.app_mem_mhz), 3201);
    assert_eq!(v(&g.clocks.default_app_sm_mhz), 1980);

    assert_eq!(v(&g.throttle_reasons), vec![T::GpuIdle]);
    assert_eq!(v(&g.performance_state), "P0");
    assert!(v(&g.persistence_mode));
    assert!(!v(&g.mig.current));
    assert!(!v(&g.mig.pending));
    assert_eq!(v(&g.virtualization), VirtualizationMode::PassThrough);
    assert_eq!(v(&g.compute_mode), "Default");

    assert!(v(&g.ecc.current));
    assert!(v(&g.ecc.pending));
    assert_eq!(v(&g.ecc.volatile_corrected), 0);
    assert_eq!(v(&g.ecc.volatile_uncorrected), 0);
    assert_eq!(v(&g.ecc.aggregate_corrected), 0);
    assert_eq!(v(&g.ecc.aggregate_uncorrected), 0);
    assert_eq!(why(&g.retired_pages), "nvidia-smi: <retired_pages> N/A");
    assert_eq!(
        v(&g.remapped_rows),
        RemappedRows {
            correctable: 0,
            uncorrectable: 0,
            pending: false,
            failure: false
        }
    );
    assert_eq!(v(&g.temperature_c), 34);
    assert_eq!(v(&g.utilization_pct), 0);
    assert_eq!(v(&g.processes), vec![]);
    assert_eq!(
        why(&g.nvlinks),
        "nvidia-smi -q does not list NVLink links; see nvidia-smi nvlink -s"
    );
    assert_eq!(
        v(&g.fabric),
        Fabric {
            state: "Completed".into(),
            status: Some("Success".into()),
            // A single-node board: clique 0, the all-zero cluster UUID is no cluster.
            clique_id: Some(0),
            cluster_uuid: None,
        }
    );
    assert_eq!(
        crate::facts::fabric_cluster_uuid("DC6E40C4-d722-4357-9ba6-5291dd461278").as_deref(),
        Some("dc6e40c4-d722-4357-9ba6-5291dd461278")
    );
    assert_eq!(
        crate::facts::fabric_cluster_uuid("00000000-0000-0000-0000-000000000000"),
        None
    );
    assert_eq!(crate::facts::fabric_cluster_uuid("N/A"), None);
    assert_eq!(crate::facts::fabric_cluster_uuid(""), None);
    assert_eq!(crate::facts::fabric_cluster_uuid(&"a".repeat(65)), None);
    assert!(crate::facts::fabric_cluster_uuid(&"a".repeat(64)).is_some());
}

#[test]
fn r470_v100_old_tag_names() {
    let log = parse(R470_V100).unwrap();
    assert_eq!(log.driver_version.as_deref(), Some("470.141.03"));
    assert_eq!(log.cuda_version.as_deref(), Some("11.4"));
    assert_eq!(log.gpus.len(), 2);
    let g = &log.gpus[0];
    assert_eq!(g.pci_bus_id, "0000:3b:00.0");
    assert_eq!(v(&g.pci_device_id), 0x1DB5);
    assert!(why(&g.architecture).contains("<product_architecture> missing"));
    assert!(why(&g.board_part_number).contains("missing"));
    // Two reasons at once, each decoded on its own.
    assert_eq!(v(&g.throttle_reasons), vec![T::SwPowerCap, T::HwSlowdown]);
    assert_eq!(v(&g.power.draw_w), 298.12);
    // The enforced limit wins over the requested <power_limit>.
    assert_eq!(v(&g.power.limit_w), 250.0);
    assert_eq!(v(&g.power.default_limit_w), 300.0);
    assert_eq!(v(&g.pcie.gen_max), 3);
    assert!(why(&g.pcie.gen_max_gpu).contains("max_device_link_gen> missing"));
    assert_eq!(v(&g.pcie.replay_counter), 12);
    assert!(!v(&g.persistence_mode));
    assert!(why(&g.mig.current).contains("N/A (no MIG on this GPU)"));
    assert_eq!(v(&g.virtualization), VirtualizationMode::None);
    assert_eq!(v(&g.ecc.volatile_corrected), 3);
    assert_eq!(v(&g.ecc.volatile_uncorrected), 0);
    assert_eq!(v(&g.ecc.aggregate_corrected), 41);
    assert_eq!(v(&g.ecc.aggregate_uncorrected), 2);
    assert_eq!(
        v(&g.retired_pages),
        RetiredPages {
            single_bit: 4,
            double_bit: 1,
            pending: true
        }
    );
    // N/A says nothing of the architecture (an A100 under MIG writes it too).
    assert_eq!(why(&g.remapped_rows), "nvidia-smi: <remapped_rows> N/A");
    assert!(why(&g.fabric).contains("<fabric/state> missing"));
    assert!(why(&g.memory.reserved_mib).contains("missing"));
    assert_eq!(
        v(&g.processes),
        vec![GpuProcess {
            pid: 48213,
            name: Some("/usr/bin/python3".into()),
            used_mib: Some(30207)
        }]
    );

    let g1 = &log.gpus[1];
    assert_eq!(g1.index, 1);
    assert_eq!(g1.pci_bus_id, "0000:86:00.0");
    // "N/A" reasons are ignored, the readable ones count.
    assert_eq!(v(&g1.throttle_reasons), vec![T::GpuIdle]);
    assert_eq!(v(&g1.pcie.gen_current), 1);
    assert_eq!(v(&g1.pcie.width_current), 8);
    assert!(!v(&g1.ecc.pending));
    assert_eq!(v(&g1.power.limit_w), 300.0);
}

#[test]
fn r525_a100_mig_enabled() {
    let log = parse(R525_A100_MIG).unwrap();
    let g = &log.gpus[0];
    assert_eq!(g.pci_bus_id, "0001:c7:00.0");
    assert_eq!(v(&g.pci_device_id), 0x20B2);
    assert!(v(&g.mig.current));
    assert!(!v(&g.mig.pending));
    // Under MIG the whole-GPU usage is N/A; the size is still known.
    assert_eq!(v(&g.memory.total_mib), 81920);
    assert!(why(&g.memory.used_mib).contains("N/A"));
    assert!(why(&g.utilization_pct).contains("N/A"));
    assert_eq!(v(&g.pcie.gen_max_host), 4);
    // R450..R530 Ampere layout: sram_uncorrectable in one element.
    assert_eq!(v(&g.ecc.volatile_corrected), 12);
    assert_eq!(v(&g.ecc.volatile_uncorrected), 1);
    assert_eq!(v(&g.ecc.aggregate_corrected), 30);
    assert_eq!(v(&g.ecc.aggregate_uncorrected), 5);
    assert_eq!(why(&g.retired_pages), "nvidia-smi: <retired_pages> N/A");
    assert_eq!(
        v(&g.remapped_rows),
        RemappedRows {
            correctable: 2,
            uncorrectable: 1,
            pending: true,
            failure: false
        }
    );
    assert!(why(&g.fabric).contains("N/A (no NVSwitch fabric)"));
    assert_eq!(
        v(&g.processes),
        vec![
            GpuProcess {
                pid: 7001,
                name: Some("python".into()),
                used_mib: Some(1180)
            },
            GpuProcess {
                pid: 7002,
                name: None,
                used_mib: None
            }
        ]
    );
}

#[test]
fn r550_vgpu_guest_is_mostly_unavailable() {
    let log = parse(R550_VGPU).unwrap();
    let g = &log.gpus[0];
    assert_eq!(v(&g.virtualization), VirtualizationMode::Vgpu);
    assert!(why(&g.serial).ends_with("N/A"));
    assert!(why(&g.pcie.gen_current).ends_with("N/A"));
    assert!(why(&g.pcie.width_max).ends_with("N/A"));
    assert!(why(&g.power.draw_w).contains("<gpu_power_readings/power_draw> N/A"));
    assert!(why(&g.power.limit_w).contains("current_power_limit> N/A"));
    assert!(why(&g.throttle_reasons).contains("no readable reason"));
    assert!(why(&g.ecc.volatile_corrected).contains("N/A"));
    assert_eq!(why(&g.retired_pages), "nvidia-smi: <retired_pages> N/A");
    assert!(why(&g.remapped_rows).contains("N/A"));
    assert!(why(&g.temperature_c).contains("N/A"));
    assert_eq!(v(&g.clocks.sm_mhz), 1695);
    assert!(why(&g.clocks.sm_max_mhz).contains("N/A"));
}

#[test]
fn virtualization_modes() {
    use VirtualizationMode as V;
    assert_eq!(virtualization_mode("None"), V::None);
    assert_eq!(virtualization_mode("Pass-Through"), V::PassThrough);
    assert_eq!(virtualization_mode("VGPU"), V::Vgpu);
    assert_eq!(virtualization_mode("Host VGPU"), V::HostVgpu);
    assert_eq!(virtualization_mode("Host VSGA"), V::HostVsga);
    assert_eq!(
        virtualization_mode("Something New"),
        V::Other("Something New".into())
    );
}

/// A minimal log around one `<gpu>` body.
fn one_gpu(body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" ?>\n<nvidia_smi_log><driver_version>535.104.05</driver_version>\
         <gpu id=\"00000000:01:00.0\">{body}</gpu></nvidia_smi_log>"
    )
}

#[test]
fn new_power_block_and_event_reasons() {
    let xml = one_gpu(
        "<gpu_power_readings><average_power_draw>N/A</average_power_draw>\
         <instant_power_draw>77.89 W</instant_power_draw>\
         <current_power_limit>450.00 W</current_power_limit></gpu_power_readings>\
         <clocks_event_reasons>\
         <clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>\
         <clocks_event_reason_hw_power_brake_slowdown>Active</clocks_event_reason_hw_power_brake_slowdown>\
         <clocks_event_reason_sw_thermal_slowdown>Active</clocks_event_reason_sw_thermal_slowdown>\
         <clocks_event_reason_sync_boost>Active</clocks_event_reason_sync_boost>\
         <clocks_event_reason_display_clocks_setting>Active</clocks_event_reason_display_clocks_setting>\
         <clocks_event_reason_applications_clocks_setting>Active</clocks_event_reason_applications_clocks_setting>\
         <clocks_event_reason_something_future>Active</clocks_event_reason_something_future>\
         </clocks_event_reasons>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    // Average is N/A here (GA100 on R550+): the instant draw is the reading.
    assert_eq!(v(&g.power.draw_w), 77.89);
    assert_eq!(v(&g.power.limit_w), 450.0);
    assert!(why(&g.power.default_limit_w).contains("default_power_limit> missing"));
    assert_eq!(
        v(&g.throttle_reasons),
        vec![
            T::ApplicationsClocksSetting,
            T::SyncBoost,
            T::SwThermalSlowdown,
            T::HwThermalSlowdown,
            T::HwPowerBrakeSlowdown,
            T::DisplayClocksSetting
        ]
    );
}

#[test]
fn r555_power_draw_inside_new_block() {
    let xml = one_gpu(
        "<gpu_power_readings><power_draw>27.22 W</power_draw>\
         <current_power_limit>72.00 W</current_power_limit></gpu_power_readings>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    assert_eq!(v(&g.power.draw_w), 27.22);
    assert_eq!(v(&g.power.limit_w), 72.0);
}

#[test]
fn r535_ecc_with_parity_and_secded() {
    let xml = one_gpu(
        "<ecc_errors><volatile><sram_correctable>1</sram_correctable>\
         <sram_uncorrectable_parity>2</sram_uncorrectable_parity>\
         <sram_uncorrectable_secded>3</sram_uncorrectable_secded>\
         <dram_correctable>4</dram_correctable><dram_uncorrectable>5</dram_uncorrectable>\
         </volatile><aggregate><sram_correctable>1</sram_correctable>\
         <sram_uncorrectable_parity>N/A</sram_uncorrectable_parity>\
         <sram_uncorrectable_secded>3</sram_uncorrectable_secded>\
         <dram_correctable>18446744073709551615</dram_correctable>\
         <dram_uncorrectable>5</dram_uncorrectable></aggregate></ecc_errors>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    assert_eq!(v(&g.ecc.volatile_corrected), 5);
    assert_eq!(v(&g.ecc.volatile_uncorrected), 10);
    // A sum that overflows is unavailable, not wrapped.
    assert!(why(&g.ecc.aggregate_corrected).contains("overflow"));
    // A sum with one unreadable part is unavailable, not understated.
    assert!(why(&g.ecc.aggregate_uncorrected).contains("sram_uncorrectable_parity> N/A"));
}

#[test]
fn odd_numbers_are_unavailable() {
    let xml = one_gpu(
        "<pci><pci_device_id>1233510DE</pci_device_id><pci_sub_system_id>zz</pci_sub_system_id>\
         <replay_counter>-1</replay_counter>\
         <pci_gpu_link_info><link_widths><current_link_width>99999999999x</current_link_width>\
         <max_link_width>16 x</max_link_width></link_widths></pci_gpu_link_info></pci>\
         <fb_memory_usage><total>143771 GiB</total><used>  12 MiB </used><free>MiB</free></fb_memory_usage>\
         <temperature><gpu_temp>-5 C</gpu_temp></temperature>\
         <utilization><gpu_util>1e3 %</gpu_util></utilization>\
         <power_readings><power_draw>inf W</power_draw><enforced_power_limit>NaN W</enforced_power_limit>\
         <default_power_limit>-3 W</default_power_limit><min_power_limit>1e2 W</min_power_limit></power_readings>\
         <persistence_mode>Maybe</persistence_mode>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    assert!(why(&g.pci_device_id).contains("unexpected value"));
    assert!(why(&g.pci_subsystem_id).contains("unexpected value"));
    assert!(why(&g.pcie.replay_counter).contains("unexpected value"));
    assert!(why(&g.pcie.width_current).contains("unexpected value"));
    assert_eq!(v(&g.pcie.width_max), 16);
    assert!(why(&g.memory.total_mib).contains("unexpected value"));
    assert_eq!(v(&g.memory.used_mib), 12);
    assert!(why(&g.memory.free_mib).contains("unexpected value"));
    assert_eq!(v(&g.temperature_c), -5);
    assert!(why(&g.utilization_pct).contains("unexpected value"));
    assert!(why(&g.power.draw_w).contains("unexpected value"));
    assert!(why(&g.power.limit_w).contains("unexpected value"));
    assert!(why(&g.power.default_limit_w).contains("unexpected value"));
    assert_eq!(v(&g.power.min_limit_w), 100.0);
    assert!(why(&g.persistence_mode).contains("\"Maybe\""));
    assert!(why(&g.throttle_reasons).contains("missing"));
}

#[test]
fn bracketed_and_spelled_out_unavailable_values() {
    let xml = one_gpu(
        "<serial>[N/A]</serial><uuid>[Not Supported]</uuid><vbios_version>Unknown Error</vbios_version>\
         <product_name>[Insufficient Permissions]</product_name><compute_mode></compute_mode>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    assert_eq!(why(&g.serial), "nvidia-smi: <serial> N/A");
    assert_eq!(why(&g.uuid), "nvidia-smi: <uuid> not supported");
    assert_eq!(why(&g.vbios), "nvidia-smi: <vbios_version> unknown error");
    assert_eq!(
        why(&g.name),
        "nvidia-smi: <product_name> insufficient permissions"
    );
    assert_eq!(why(&g.compute_mode), "nvidia-smi: <compute_mode> empty");
}

#[test]
fn power_readings_all_unreadable_keep_every_reason() {
    let xml = one_gpu(
        "<gpu_power_readings><average_power_draw>N/A</average_power_draw>\
         <instant_power_draw>[Not Supported]</instant_power_draw></gpu_power_readings>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    assert_eq!(
        why(&g.power.draw_w),
        "nvidia-smi: <gpu_power_readings/average_power_draw> N/A; \
         nvidia-smi: <gpu_power_readings/instant_power_draw> not supported"
    );
    assert_eq!(
        why(&g.power.limit_w),
        "nvidia-smi: none of <current_power_limit>, <enforced_power_limit>, <power_limit> \
         in <gpu_power_readings>"
    );
    let g = &parse(&one_gpu("")).unwrap().gpus[0];
    assert!(why(&g.power.max_limit_w).contains("<gpu_power_readings> and <power_readings> missing"));
}

#[test]
fn processes_na_is_not_an_empty_list() {
    let g = &parse(&one_gpu("<processes>N/A</processes>")).unwrap().gpus[0];
    assert_eq!(why(&g.processes), "nvidia-smi: <processes> N/A");
    let g = &parse(&one_gpu("<processes>\n\t\t</processes>"))
        .unwrap()
        .gpus[0];
    assert_eq!(v(&g.processes), vec![]);
}

#[test]
fn process_with_unreadable_pid_makes_the_list_unavailable() {
    let xml = one_gpu(
        "<processes><process_info><pid>12</pid></process_info>\
         <process_info><pid>N/A</pid></process_info></processes>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    assert!(why(&g.processes).contains("pid> unreadable"));
}

#[test]
fn bus_id_from_pci_element_when_attribute_missing() {
    let xml = "<nvidia_smi_log><gpu><pci><pci_bus_id>00000000:0A:00.0</pci_bus_id></pci></gpu>\
               </nvidia_smi_log>";
    let log = parse(xml).unwrap();
    assert_eq!(log.gpus[0].pci_bus_id, "0000:0a:00.0");
    assert_eq!(log.driver_version, None);
    let no_id = "<nvidia_smi_log><gpu><product_name>x</product_name></gpu></nvidia_smi_log>";
    assert!(matches!(parse(no_id), Err(ParseError::Malformed(m)) if m.contains("no PCI bus id")));
}

#[test]
fn errors() {
    assert_eq!(parse("").unwrap_err(), ParseError::Empty);
    assert_eq!(parse(" \r\n\t\n").unwrap_err(), ParseError::Empty);
    let msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \
               Make sure that the latest NVIDIA driver is installed and running.";
    assert_eq!(
        parse(&format!("\n{msg}\n\n")).unwrap_err(),
        ParseError::NotXml(msg.to_string())
    );
    assert_eq!(
        parse("Failed to initialize NVML: Driver/library version mismatch\r\nNVML library version: 580.95\r\n")
            .unwrap_err(),
        ParseError::NotXml("Failed to initialize NVML: Driver/library version mismatch".into())
    );
    assert!(matches!(
        parse("<?xml version=\"1.0\" ?>\n<other><gpu/></other>"),
        Err(ParseError::Malformed(m)) if m.contains("<other>")
    ));
    // Truncated in the middle of a GPU.
    let cut = &H200[..H200.len() / 3];
    assert!(matches!(parse(cut), Err(ParseError::Malformed(_))));
}

#[test]
fn warning_lines_before_the_xml_are_skipped() {
    let text = format!("WARNING: infoROM is corrupted at gpu 0000:00:06.0\n{H200}");
    let log = parse(&text).unwrap();
    assert_eq!(log.gpus.len(), 2);
}

#[test]
fn crlf_and_bom() {
    let text = format!("\u{feff}{}", H200.replace('\n', "\r\n"));
    let log = parse(&text).unwrap();
    assert_eq!(v(&log.gpus[1].memory.total_mib), 143771);
}

#[test]
fn zero_gpus() {
    let log = parse("<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>").unwrap();
    assert!(log.gpus.is_empty());
}

// ----- real machines (fixtures/real, each with its PROVENANCE.md) ------------------------------

const REAL_A100_MIG: &str =
    include_str!("../../../../../fixtures/real/a100-sxm4-80gb-mig-r535/cmd/nvidia-smi-q.xml");
const REAL_P100_R375: &str =
    include_str!("../../../../../fixtures/real/p100-pcie-12gb-x2-r375/cmd/nvidia-smi-q.xml");
const REAL_V100S_X8: &str =
    include_str!("../../../../../fixtures/real/v100s-pcie-32gb-x8-r460/cmd/nvidia-smi-q.xml");
const REAL_P4_VGPU: &str =
    include_str!("../../../../../fixtures/real/grid-p4-1q-vgpu-r513-windows/cmd/nvidia-smi-q.xml");
const REAL_RTX2080_R590: &str =
    include_str!("../../../../../fixtures/real/rtx2080-x2-r590/cmd/nvidia-smi-q.xml");

#[test]
fn attached_gpus_is_read_even_where_fewer_gpus_are_listed() {
    // The owner published one <gpu> of the four the driver reports attached.
    let log = parse(REAL_A100_MIG).unwrap();
    assert_eq!(v(&log.attached_gpus), 4);
    assert_eq!(log.gpus.len(), 1);
    assert_eq!(v(&parse(REAL_V100S_X8).unwrap().attached_gpus), 8);
    assert_eq!(v(&parse(REAL_P100_R375).unwrap().attached_gpus), 2);
    assert_eq!(v(&parse(H200).unwrap().attached_gpus), 2);
}

#[test]
fn attached_gpus_missing_or_unreadable_is_unavailable_with_the_reason() {
    let no_tag = parse("<nvidia_smi_log><gpu id=\"0000:01:00.0\"/></nvidia_smi_log>").unwrap();
    assert_eq!(
        why(&no_tag.attached_gpus),
        "nvidia-smi: <attached_gpus> missing"
    );
    let na = parse("<nvidia_smi_log><attached_gpus>N/A</attached_gpus></nvidia_smi_log>").unwrap();
    assert_eq!(why(&na.attached_gpus), "nvidia-smi: <attached_gpus> N/A");
    let junk =
        parse("<nvidia_smi_log><attached_gpus>four</attached_gpus></nvidia_smi_log>").unwrap();
    assert!(
        why(&junk.attached_gpus).contains("unexpected value"),
        "{junk:?}"
    );
}

#[test]
fn r375_layout_of_2017_parses() {
    // DTD v8: no <cuda_version>, a 4-digit PCI domain, <retired_page_addresses>, only
    // <pending_retirement>, power under <power_readings>.
    let log = parse(REAL_P100_R375).unwrap();
    assert_eq!(log.driver_version.as_deref(), Some("375.66"));
    assert_eq!(log.cuda_version, None);
    assert_eq!(log.gpus.len(), 2);
    let g = &log.gpus[1];
    assert_eq!(g.pci_bus_id, "0000:82:00.0");
    assert_eq!(v(&g.pci_device_id), 0x15F7);
    assert_eq!(v(&g.memory.total_mib), 12290);
    assert_eq!(
        v(&g.retired_pages),
        RetiredPages {
            single_bit: 0,
            double_bit: 0,
            pending: false
        }
    );
    assert_eq!(v(&g.power.limit_w), 250.0);
    assert_eq!(v(&g.throttle_reasons), vec![T::GpuIdle]);
    assert!(why(&g.mig.current).contains("<mig_mode/current_mig> missing"));
}

#[test]
fn vgpu_guest_reports_most_things_unavailable() {
    let log = parse(REAL_P4_VGPU).unwrap();
    let g = &log.gpus[0];
    assert_eq!(v(&g.name), "GRID P4-1Q");
    assert_eq!(v(&g.virtualization), VirtualizationMode::Vgpu);
    assert_eq!(v(&g.pci_device_id), 0x1BB3);
    assert!(why(&g.throttle_reasons).contains("no readable reason"));
    assert!(why(&g.pcie.gen_current).contains("N/A"));
    assert!(why(&g.power.limit_w).contains("N/A"));
    assert!(why(&g.persistence_mode).contains("N/A"));
}

#[test]
fn r590_layout_reads_instant_power_and_both_gpus() {
    let log = parse(REAL_RTX2080_R590).unwrap();
    assert_eq!(log.driver_version.as_deref(), Some("590.44.01"));
    assert_eq!(log.cuda_version.as_deref(), Some("13.1"));
    assert_eq!(log.gpus.len(), 2);
    // <average_power_draw> is N/A on this Turing card; the instant draw is the reading.
    assert_eq!(v(&log.gpus[0].power.draw_w), 1.0);
    assert_eq!(v(&log.gpus[1].power.draw_w), 1.62);
    assert_eq!(v(&log.gpus[1].power.max_limit_w), 240.0);
    assert_eq!(v(&log.gpus[0].pcie.width_current), 8);
    assert_eq!(v(&log.gpus[0].pcie.gen_max_gpu), 3);
    // "Requested functionality has been deprecated" is a reason, not a clock.
    assert!(why(&log.gpus[0].clocks.app_sm_mhz).contains("deprecated"));
}

#[test]
fn an_external_doctype_is_ignored() {
    // nvidia-smi's own declaration names a DTD that is never fetched: read as before.
    assert!(H200.contains("<!DOCTYPE nvidia_smi_log SYSTEM"));
    assert_eq!(parse(H200).unwrap().gpus.len(), 2);
    // A '[' or '>' inside the quoted system id does not end or open anything.
    let quoted = "<!DOCTYPE nvidia_smi_log SYSTEM \"a[b>c\"><nvidia_smi_log>\
                  <driver_version>1</driver_version></nvidia_smi_log>";
    assert_eq!(parse(quoted).unwrap().driver_version.as_deref(), Some("1"));
    // Without a DTD no entity but the predefined ones exists.
    let undeclared = "<nvidia_smi_log><driver_version>&e;</driver_version></nvidia_smi_log>";
    assert!(matches!(parse(undeclared), Err(ParseError::Malformed(_))));
    let predefined = "<nvidia_smi_log><driver_version>1&amp;2</driver_version></nvidia_smi_log>";
    assert_eq!(
        parse(predefined).unwrap().driver_version.as_deref(),
        Some("1&2")
    );
    let inner = "<nvidia_smi_log><!DOCTYPE x></nvidia_smi_log>";
    assert!(matches!(parse(inner), Err(ParseError::Malformed(_))));
}

/// `nvidia-smi -q -x --dtd` of an H200 (R580), captured on one of the project's rented
/// machines: the DTD nvidia-smi embeds (nvsmi_device_v13.dtd, 28,400 bytes: 327 <!ELEMENT>,
/// one <!ATTLIST>, three comments) as an internal subset. See
/// nvsmi-r580-h200-dtd.PROVENANCE.md.
const R580_H200_DTD: &str = include_str!("../testdata/nvsmi-r580-h200-dtd.xml");

#[test]
fn the_dtd_nvidia_smi_embeds_is_read_past() {
    assert!(R580_H200_DTD.starts_with("<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log [\n"));
    assert!(R580_H200_DTD.contains("<!ATTLIST gpu id                CDATA #REQUIRED>"));
    let log = parse(R580_H200_DTD).unwrap();
    assert_eq!(log.driver_version.as_deref(), Some("580.159.04"));
    assert_eq!(v(&log.attached_gpus), 1);
    assert_eq!(log.gpus.len(), 1);
    let g = &log.gpus[0];
    assert_eq!(g.pci_bus_id, "0000:00:06.0");
    assert_eq!(v(&g.name), "NVIDIA H200");
    assert_eq!(v(&g.pci_device_id), 0x2335);
    assert_eq!(v(&g.pcie.width_current), 16);
    // The same log read with the DTD as a reference (plain `nvidia-smi -q -x`): the same facts.
    let end = R580_H200_DTD.find("]>\n").unwrap() + 3;
    let plain = format!(
        "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v13.dtd\">\n{}",
        &R580_H200_DTD[end..]
    );
    assert_eq!(
        format!("{:?}", parse(&plain).unwrap().gpus),
        format!("{:?}", log.gpus)
    );
}

fn refused(xml: &str) -> String {
    match parse(xml) {
        Err(ParseError::Malformed(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn with_subset(subset: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE nvidia_smi_log [\n{subset}\n]>\n\
         <nvidia_smi_log><driver_version>580.1</driver_version></nvidia_smi_log>"
    )
}

#[test]
fn an_internal_subset_of_declarations_that_change_nothing_is_accepted() {
    for subset in [
        "",
        "<!ELEMENT nvidia_smi_log (driver_version)>",
        // A '>' or '%' in a quoted default value is no end and no parameter entity.
        "<!ATTLIST gpu id CDATA \"a>b%c;\" kind CDATA '>'>",
        "<!NOTATION png SYSTEM \"image/png\"> <!NOTATION gif PUBLIC \"-//x//gif\" \"g\">",
        "<!-- a comment with <!ENTITY x \"y\"> in it --> <?pi ok?>",
        "\t<!ELEMENT a (#PCDATA)>\r\n\r\n<!ELEMENT b EMPTY>",
    ] {
        let log = parse(&with_subset(subset)).unwrap_or_else(|e| panic!("{subset}: {e}"));
        assert_eq!(log.driver_version.as_deref(), Some("580.1"), "{subset}");
    }
    // Blanks between `]` and `>`, and none after the subset at all.
    let tight = "<!DOCTYPE nvidia_smi_log [<!ELEMENT a ANY>] \n><nvidia_smi_log/>";
    assert!(parse(tight).is_ok());
    // Line numbers after the blanked declaration stay those of the file.
    let broken =
        with_subset("<!ELEMENT a ANY>\n<!ELEMENT b ANY>").replace("</driver_version>", "</b>");
    assert!(refused(&broken).contains(" at 6:"), "{}", refused(&broken));
}

#[test]
fn entities_in_an_internal_subset_are_refused_with_the_reason() {
    for (subset, shown) in [
        ("<!ENTITY e \"x\">", "<!ENTITY e \"x\">"),
        (
            "<!ENTITY e SYSTEM \"file:///etc/passwd\">",
            "SYSTEM \"file:///etc/passwd\"",
        ),
        ("<!ENTITY e PUBLIC \"-//x\" \"http://h/x\">", "PUBLIC"),
        ("<!ENTITY % p \"<!ELEMENT a ANY>\">", "<!ENTITY % p"),
        // Behind allowed declarations, and after a comment that mentions one.
        (
            "<!ELEMENT a ANY><!-- <!ENTITY --><!ATTLIST a b CDATA #IMPLIED>\n<!ENTITY e 'x'>",
            "<!ENTITY e 'x'>",
        ),
    ] {
        let m = refused(&with_subset(subset));
        assert!(m.contains("declares an entity"), "{subset}: {m}");
        assert!(m.contains(shown), "{subset}: {m}");
        assert!(m.contains("not read"), "{m}");
    }
    // The classic file-reading entity, referenced in the document.
    let xxe = "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>\
               <nvidia_smi_log><driver_version>&e;</driver_version></nvidia_smi_log>";
    assert!(refused(xxe).contains("declares an entity"));
    // Parameter-entity references, alone or inside a declaration.
    for subset in ["%p;", "<!ELEMENT %p; ANY>", "<!ATTLIST a %p;>"] {
        let m = refused(&with_subset(subset));
        assert!(m.contains("parameter entity"), "{subset}: {m}");
    }
    // Anything else nvidia-smi does not write there.
    for subset in ["<![INCLUDE[<!ELEMENT a ANY>]]>", "<!FOO>", "text", "<a/>"] {
        let m = refused(&with_subset(subset));
        assert!(m.contains("unexpected"), "{subset}: {m}");
        assert!(m.contains("in the internal DTD subset"), "{subset}: {m}");
    }
}

#[test]
fn an_entity_bomb_is_refused_before_any_expansion() {
    // A 1 MiB entity referenced 1000 times must not become a 1 GB string.
    let big = "a".repeat(1 << 20);
    let bomb = format!(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY a \"{big}\">]>\n\
         <nvidia_smi_log><driver_version>{}</driver_version></nvidia_smi_log>",
        "&a;".repeat(1000)
    );
    let t0 = std::time::Instant::now();
    let m = refused(&bomb);
    assert!(m.contains("declares an entity"), "{}", shorten(&m, 200));
    // The entity's value is cut short in the message.
    assert!(m.len() < 400, "{} bytes", m.len());
    assert!(t0.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn a_huge_or_unterminated_internal_subset_is_refused() {
    // Declarations that change nothing, but more of them than any nvidia-smi writes.
    let decl = "<!ELEMENT a_long_enough_name (#PCDATA)>\n";
    let n = MAX_INTERNAL_SUBSET / decl.len() + 2;
    let huge = with_subset(&decl.repeat(n));
    let m = refused(&huge);
    assert!(m.contains("larger than 1024 KiB"), "{m}");
    // Just under the cap is still read.
    let at_cap = with_subset(&decl.repeat(MAX_INTERNAL_SUBSET / decl.len() - 1));
    assert!(parse(&at_cap).is_ok());
    // The cap itself: a subset of exactly MAX_INTERNAL_SUBSET bytes is read, one byte more
    // is not.
    let exact = |extra: usize| {
        let filler = "x".repeat(MAX_INTERNAL_SUBSET - "<!---->".len() + extra);
        format!("<!DOCTYPE nvidia_smi_log [<!--{filler}-->]><nvidia_smi_log/>")
    };
    assert!(parse(&exact(0)).is_ok());
    assert!(refused(&exact(1)).contains("larger than 1024 KiB"));
    // One comment larger than the cap.
    let comment = with_subset(&format!("<!--{}-->", "x".repeat(MAX_INTERNAL_SUBSET)));
    assert!(refused(&comment).contains("larger than"));
    for cut in [
        "<!DOCTYPE nvidia_smi_log [",
        "<!DOCTYPE nvidia_smi_log [<!ELEMENT a ANY>",
        "<!DOCTYPE nvidia_smi_log [<!ELEMENT a ANY",
        "<!DOCTYPE nvidia_smi_log [<!ATTLIST a b CDATA \"x>",
        "<!DOCTYPE nvidia_smi_log [<!-- x",
        "<!DOCTYPE nvidia_smi_log [<?pi",
        "<!DOCTYPE nvidia_smi_log [ ]",
        "<!DOCTYPE nvidia_smi_log SYSTEM \"x",
        "<!DOCTYPE nvidia_smi_log",
    ] {
        assert_eq!(
            refused(cut),
            "nvidia-smi XML: unterminated <!DOCTYPE",
            "{cut}"
        );
    }
    let m = refused("<!DOCTYPE nvidia_smi_log [ ] x><nvidia_smi_log/>");
    assert!(m.contains("after the internal DTD subset"), "{m}");
    // A declaration after comments and the XML declaration is found too.
    let late = "<?xml version=\"1.0\"?><!-- c --><!DOCTYPE x [<!ENTITY e \"x\">]><nvidia_smi_log/>";
    assert!(refused(late).contains("declares an entity"));
}

#[test]
fn gpus_beyond_the_cap_are_counted_not_read() {
    let gpu = "<gpu id=\"00000000:01:00.0\"/>";
    let xml = format!(
        "<nvidia_smi_log>{}</nvidia_smi_log>",
        gpu.repeat(MAX_GPUS + 44)
    );
    let log = parse(&xml).unwrap();
    assert_eq!(log.gpus.len(), MAX_GPUS);
    assert_eq!(log.gpus_left_out, 44);
    assert_eq!(log.gpus[MAX_GPUS - 1].index as usize, MAX_GPUS - 1);
    let exact = format!("<nvidia_smi_log>{}</nvidia_smi_log>", gpu.repeat(MAX_GPUS));
    assert_eq!(parse(&exact).unwrap().gpus_left_out, 0);
}

#[test]
fn text_fields_are_capped() {
    let name = "N".repeat(100_000);
    let xml = format!(
        "<nvidia_smi_log><driver_version>{name}</driver_version><gpu id=\"00000000:01:00.0\">\
         <product_name>{name}</product_name></gpu></nvidia_smi_log>"
    );
    let log = parse(&xml).unwrap();
    let cap = crate::parse::FACT_LINE_CHARS + 1;
    assert_eq!(log.driver_version.unwrap().chars().count(), cap);
    assert_eq!(v(&log.gpus[0].name).chars().count(), cap);
}

// ----- zeros that mean "not known" (issue 8, defect 3) -----------------------------------------

#[test]
fn a_vgpu_guests_zero_clocks_and_temperature_are_not_readings() {
    let g = &parse(REAL_P4_VGPU).unwrap().gpus[0];
    assert_eq!(
        why(&g.clocks.sm_max_mhz),
        "nvidia-smi: <max_clocks/sm_clock> 0 MHz, which the driver reports where it does not know (vGPU guest)"
    );
    assert!(why(&g.clocks.mem_max_mhz).starts_with("nvidia-smi: <max_clocks/mem_clock> 0 MHz"));
    assert!(why(&g.clocks.sm_mhz).contains("0 MHz, which the driver reports"));
    assert!(why(&g.clocks.mem_mhz).contains("0 MHz"));
    assert!(why(&g.temperature_c).contains("<temperature/gpu_temp> 0 C"));
    // Its memory (1 GB profile) is a reading.
    assert_eq!(v(&g.memory.total_mib), 1024);
}

#[test]
fn zeros_where_the_driver_does_not_know_are_unavailable_with_the_reason() {
    let xml = one_gpu(
        "<pci><pci_device_id>000010DE</pci_device_id><pci_sub_system_id>000010DE</pci_sub_system_id>\
         <pci_gpu_link_info><pcie_gen><max_link_gen>0</max_link_gen><current_link_gen>0</current_link_gen>\
         </pcie_gen><link_widths><max_link_width>0x</max_link_width><current_link_width>0x</current_link_width>\
         </link_widths></pci_gpu_link_info><replay_counter>0</replay_counter></pci>\
         <fb_memory_usage><total>0 MiB</total><used>0 MiB</used><free>0 MiB</free></fb_memory_usage>\
         <utilization><gpu_util>0 %</gpu_util></utilization>\
         <power_readings><power_draw>0.00 W</power_draw><power_limit>0.00 W</power_limit>\
         <default_power_limit>0.00 W</default_power_limit><min_power_limit>0.00 W</min_power_limit>\
         <max_power_limit>0.00 W</max_power_limit></power_readings>\
         <applications_clocks><graphics_clock>0 MHz</graphics_clock><mem_clock>0 MHz</mem_clock></applications_clocks>\
         <default_applications_clocks><graphics_clock>0 MHz</graphics_clock></default_applications_clocks>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    assert_eq!(
        why(&g.pci_device_id),
        "nvidia-smi: <pci/pci_device_id> 000010DE: its device half is all zeros, which names no device (zeroed, or not readable)"
    );
    assert!(why(&g.pci_subsystem_id).contains("subsystem device half is all zeros"));
    for r in [
        &g.pcie.gen_max,
        &g.pcie.gen_current,
        &g.pcie.width_max,
        &g.pcie.width_current,
    ] {
        assert!(why(r).contains("does not know the link"), "{r:?}");
    }
    assert!(why(&g.memory.total_mib).contains("0 MiB"));
    for r in [
        &g.power.draw_w,
        &g.power.limit_w,
        &g.power.default_limit_w,
        &g.power.min_limit_w,
        &g.power.max_limit_w,
    ] {
        assert!(why(r).contains("0.00 W, which the driver reports"), "{r:?}");
    }
    for r in [
        &g.clocks.app_sm_mhz,
        &g.clocks.app_mem_mhz,
        &g.clocks.default_app_sm_mhz,
    ] {
        assert!(why(r).contains("0 MHz, which the driver reports"), "{r:?}");
    }
    // Zeros that are readings stay readings.
    assert_eq!(v(&g.pcie.replay_counter), 0);
    assert_eq!(v(&g.memory.used_mib), 0);
    assert_eq!(v(&g.memory.free_mib), 0);
    assert_eq!(v(&g.utilization_pct), 0);
}

#[test]
fn a_device_id_of_ffff_is_no_device_and_small_values_are_readings() {
    let xml = one_gpu(
        "<pci><pci_device_id>FFFF10DE</pci_device_id><pci_sub_system_id>FFFF10DE</pci_sub_system_id></pci>\
         <max_clocks><sm_clock>1 MHz</sm_clock></max_clocks><temperature><gpu_temp>1 C</gpu_temp></temperature>\
         <power_readings><power_draw>0.01 W</power_draw></power_readings>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    assert!(why(&g.pci_device_id).contains("device half is all ones"));
    assert!(why(&g.pci_subsystem_id).contains("subsystem device half is all ones"));
    assert_eq!(v(&g.clocks.sm_max_mhz), 1);
    assert_eq!(v(&g.temperature_c), 1);
    assert_eq!(v(&g.power.draw_w), 0.01);
    // One bit either side of the zero halves: readings.
    let xml = one_gpu(
        "<pci><pci_device_id>000110DE</pci_device_id><pci_sub_system_id>FFFE10DE</pci_sub_system_id></pci>",
    );
    let g = &parse(&xml).unwrap().gpus[0];
    assert_eq!(v(&g.pci_device_id), 0x0001);
    assert_eq!(v(&g.pci_subsystem_id), 0xFFFE10DE);
    let xml = one_gpu("<pci><pci_device_id>FFFE10DE</pci_device_id></pci>");
    assert_eq!(v(&parse(&xml).unwrap().gpus[0].pci_device_id), 0xFFFE);
}

#[test]
fn real_zeroed_and_redacted_ids_are_unavailable() {
    const REAL_A10G: &str =
        include_str!("../../../../../fixtures/real/a10g-r515/cmd/nvidia-smi-q.xml");
    const REAL_RTX3090: &str =
        include_str!("../../../../../fixtures/real/rtx3090-power-capped-r525/cmd/nvidia-smi-q.xml");
    let g = &parse(REAL_A10G).unwrap().gpus[0];
    assert!(why(&g.pci_device_id).starts_with("nvidia-smi: <pci/pci_device_id> 000000DE"));
    assert!(why(&g.pci_subsystem_id).starts_with("nvidia-smi: <pci/pci_sub_system_id> 000000DE"));
    let g = &parse(REAL_RTX3090).unwrap().gpus[0];
    assert_eq!(
        why(&g.pci_device_id),
        "nvidia-smi: <pci/pci_device_id> redacted"
    );
    // Its SM clock at idle reads 0 MHz: not the GPU's speed.
    assert!(why(&g.clocks.sm_mhz).contains("gated at idle"));
    assert_eq!(v(&g.clocks.mem_mhz), 405);
    assert_eq!(v(&g.power.limit_w), 200.0);
}
