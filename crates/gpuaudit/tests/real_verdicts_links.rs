//! The verdicts of pcie.link, power.limit, clocks.throttle, clocks.max, nvlink.status,
//! memory.ecc and memory.errors on real machines (fixtures/real, each with the judgment of an
//! experienced GPU engineer in its PROVENANCE.md), audited by the real binary: a wrong verdict
//! on a real machine fails here.

mod common;
use common::*;
use serde_json::Value;

const MINE: [&str; 7] = [
    "pcie.link",
    "power.limit",
    "clocks.throttle",
    "clocks.max",
    "nvlink.status",
    "memory.ecc",
    "memory.errors",
];

/// The one finding a check made about a GPU.
fn about<'a>(report: &'a Value, check: &str, gpu: u64) -> &'a Value {
    let f: Vec<&Value> = findings(report, check)
        .into_iter()
        .filter(|f| f["gpu"].as_u64() == Some(gpu))
        .collect();
    assert_eq!(f.len(), 1, "{check} GPU {gpu}: {f:#?}");
    f[0]
}

fn message(report: &Value, check: &str, gpu: u64) -> String {
    about(report, check, gpu)["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Each check's worst status per GPU, in the order of `MINE`.
fn verdicts(report: &Value, gpu: u64) -> Vec<String> {
    MINE.iter().map(|c| worst(report, c, Some(gpu))).collect()
}

fn expect(slug: &str, report: &Value, gpu: u64, want: [&str; 7]) {
    let got = verdicts(report, gpu);
    for ((check, got), want) in MINE.iter().zip(&got).zip(want) {
        assert_eq!(
            got,
            want,
            "{slug} GPU {gpu} {check}: {}",
            findings(report, check)
                .iter()
                .filter(|f| f["gpu"].as_u64() == Some(gpu))
                .map(|f| f["message"].as_str().unwrap_or("?"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
}

#[test]
fn a100_sxm4_under_mig_does_not_claim_nothing_pending() {
    let slug = "real/a100-sxm4-80gb-mig-r535";
    let (_, r) = audit(slug, &[]);
    //              pcie    power   throttle clocks  nvlink  ecc     errors
    expect(
        slug,
        &r,
        0,
        ["pass", "pass", "pass", "pass", "skip", "pass", "info"],
    );
    let m = message(&r, "memory.errors", 0);
    assert!(m.contains("no uncorrectable ECC errors"), "{m}");
    assert!(m.contains("not read: remapped rows"), "{m}");
    assert!(!m.contains("nothing pending"), "{m}");
    assert!(message(&r, "nvlink.status", 0).contains("the model has 12 links"));
}

#[test]
fn a10g_at_x8_warns_with_the_bandwidth_at_gen4() {
    let slug = "real/a10g-r515";
    let (_, r) = audit(slug, &[]);
    expect(
        slug,
        &r,
        0,
        ["warn", "pass", "pass", "pass", "info", "pass", "pass"],
    );
    let m = message(&r, "pcie.link", 0);
    assert!(
        m.contains("about 15.8 instead of 31.5 GB/s per direction at gen4"),
        "{m}"
    );
    assert!(!m.contains("2 instead of 4"), "{m}");
}

#[test]
fn vgpu_guest_reports_nothing_it_cannot_read() {
    let slug = "real/grid-p4-1q-vgpu-r513-windows";
    let (_, r) = audit(slug, &[]);
    expect(
        slug,
        &r,
        0,
        ["skip", "skip", "skip", "skip", "info", "info", "skip"],
    );
    let m = message(&r, "clocks.max", 0);
    assert!(!m.contains("maximum SM clock 0 MHz"), "{m}");
}

#[test]
fn p100_pcie_pair_is_healthy_and_its_retired_pages_are_read() {
    let slug = "real/p100-pcie-12gb-x2-r375";
    let (_, r) = audit(slug, &[]);
    for gpu in 0..2 {
        expect(
            slug,
            &r,
            gpu,
            ["pass", "pass", "pass", "pass", "info", "pass", "pass"],
        );
        // The spec database records that the P100 PCIe has no NVLink.
        let m = message(&r, "nvlink.status", gpu);
        assert!(m.contains("no NVLink"), "{m}");
        let m = message(&r, "memory.errors", gpu);
        assert!(m.contains("no retired page, none pending"), "{m}");
    }
}

#[test]
fn quadro_p400_without_power_sensor_or_ecc() {
    let slug = "real/quadro-p400-r418";
    let (_, r) = audit(slug, &[]);
    expect(
        slug,
        &r,
        0,
        ["pass", "skip", "pass", "pass", "info", "info", "skip"],
    );
    assert!(message(&r, "pcie.link", 0).contains("while idle"));
}

#[test]
fn rtx_pro_6000_in_a_gen4_slot_with_ecc_off() {
    let slug = "real/rtx-pro-6000-blackwell-maxq-r590";
    let (_, r) = audit(slug, &[]);
    expect(
        slug,
        &r,
        0,
        ["warn", "pass", "pass", "pass", "info", "info", "pass"],
    );
    let m = message(&r, "pcie.link", 0);
    assert!(
        m.contains("about 31.5 instead of 63.0 GB/s per direction"),
        "{m}"
    );
    let m = message(&r, "memory.errors", 0);
    assert!(m.contains("no row remapped, none pending or failed"), "{m}");
    assert!(m.contains("ECC is off, so no ECC error is counted"), "{m}");
    assert!(!m.contains("no uncorrectable"), "{m}");
    let (_, hpc) = audit(slug, &["--profile", "hpc"]);
    assert_eq!(worst(&hpc, "memory.ecc", Some(0)), "fail");
}

#[test]
fn rtx_2080_pair_on_an_x8_x8_board_takes_a_bridge_and_is_not_said_to_have_no_nvlink() {
    let slug = "real/rtx2080-x2-r590";
    for profile in ["general", "train"] {
        let (_, r) = audit(slug, &["--profile", profile]);
        for gpu in 0..2 {
            expect(
                slug,
                &r,
                gpu,
                ["warn", "pass", "pass", "pass", "skip", "info", "skip"],
            );
            let m = message(&r, "pcie.link", gpu);
            assert!(
                m.contains("about 7.9 instead of 15.8 GB/s per direction at gen3"),
                "{m}"
            );
        }
        for f in findings(&r, "nvlink.status") {
            let m = f["message"].as_str().unwrap_or_default();
            assert!(!m.contains("has no NVLink"), "{profile}: {m}");
        }
    }
    let (_, hpc) = audit(slug, &["--profile", "hpc"]);
    assert_eq!(worst(&hpc, "memory.ecc", Some(0)), "warn");
}

#[test]
fn rtx_3090_capped_at_200_of_350_w_fails_power_limit() {
    let slug = "real/rtx3090-power-capped-r525";
    let (code, r) = audit(slug, &[]);
    expect(
        slug,
        &r,
        0,
        ["pass", "fail", "pass", "pass", "info", "info", "skip"],
    );
    assert!(message(&r, "power.limit", 0).contains("200 W, 57% of its default 350 W"));
    assert_eq!(code, 1);
}

#[test]
fn rtx_4000_ada_with_ecc_off_fails_only_for_hpc() {
    let slug = "real/rtx4000-sff-ada-r595";
    let (_, r) = audit(slug, &[]);
    expect(
        slug,
        &r,
        0,
        ["pass", "pass", "pass", "pass", "info", "info", "pass"],
    );
    let (_, hpc) = audit(slug, &["--profile", "hpc"]);
    assert_eq!(worst(&hpc, "memory.ecc", Some(0)), "fail");
}

#[test]
fn t4_at_gen3_x8_warns() {
    let slug = "real/t4-r515";
    let (_, r) = audit(slug, &[]);
    expect(
        slug,
        &r,
        0,
        ["warn", "pass", "pass", "pass", "info", "pass", "pass"],
    );
    assert!(message(&r, "pcie.link", 0).contains("about 7.9 instead of 15.8 GB/s"));
    assert!(message(&r, "nvlink.status", 0).contains("no NVLink on this model"));
}

#[test]
fn v100s_power_cap_flags_at_a_low_draw_are_information() {
    let slug = "real/v100s-pcie-32gb-x8-r460";
    let (_, r) = audit(slug, &[]);
    for gpu in 0..8 {
        let throttle = if gpu == 3 || gpu == 6 { "info" } else { "pass" };
        expect(
            slug,
            &r,
            gpu,
            ["pass", "pass", throttle, "pass", "info", "pass", "pass"],
        );
    }
    let m = message(&r, "clocks.throttle", 6);
    assert!(m.contains("draws 68 W of its 250 W limit"), "{m}");
    assert!(!m.contains("draws at its power limit"), "{m}");
    assert!(message(&r, "clocks.throttle", 3).contains("198 W of its 250 W limit"));
}

#[test]
fn a_card_built_for_x4_at_x4_passes_and_a_laptops_x8_stays_a_warning() {
    // The GT 1030 supports x4 and trained at x4: its full width, not "x4 or narrower of x16".
    let (_, r) = audit("real/gt1030-x4-r470", &[]);
    assert_eq!(worst(&r, "pcie.link", Some(0)), "pass");
    let m = message(&r, "pcie.link", 0);
    assert!(!m.contains("narrower"), "{m}");
    // The laptop's GTX 1050 at x8 of x16: the slot is not known, a warning as before.
    let (_, r) = audit("real/gtx1050-mobile-x8-r515", &[]);
    assert_eq!(worst(&r, "pcie.link", Some(0)), "warn");
    let m = message(&r, "pcie.link", 0);
    assert!(
        m.contains("trained at x8 of the x16 it supports: half the host bandwidth"),
        "{m}"
    );
}
