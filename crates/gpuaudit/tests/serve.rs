//! `gpuaudit serve` as a process: /metrics and /healthz over loopback from a snapshot, a
//! snapshot that goes away, SIGTERM, and the errors that stop it from starting.

mod common;
mod exporter;
use exporter::*;
use std::time::Duration;

#[test]
fn serves_a_snapshot_and_stops_on_sigterm() {
    let root = snapshot("h200-x2-x8-link");
    let mut e = Exporter::start(&["--root", root.to_str().unwrap(), "--interval", "1s"]);
    let health = e.wait_for("/healthz", 200, Duration::from_secs(30));
    assert!(
        health.body.starts_with("ok: the latest audit finished"),
        "{}",
        health.body
    );

    let m = get(e.addr, "/metrics");
    assert_eq!(m.status, 200);
    assert!(
        m.head
            .to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{}",
        m.head
    );
    let body = &m.body;
    assert!(body.ends_with("# EOF\n"), "{body}");
    // GPU 1 of this snapshot trained at x8 of x16: pcie.link fails on it, passes on GPU 0.
    let status_line = |gpu: &str, status: &str| {
        body.lines()
            .find(|l| {
                l.starts_with(&format!(
                    "gpuaudit_check_status{{check=\"pcie.link\",gpu=\"{gpu}\","
                )) && l.contains(&format!("status=\"{status}\"}}"))
            })
            .unwrap_or_else(|| panic!("no pcie.link {gpu} {status} line: {body}"))
            .to_string()
    };
    assert!(status_line("1", "fail").ends_with(" 1.0"));
    assert!(status_line("1", "pass").ends_with(" 0.0"));
    assert!(status_line("0", "pass").ends_with(" 1.0"));
    assert_eq!(
        body.lines()
            .filter(|l| l.starts_with("gpuaudit_gpu_info{"))
            .count(),
        2,
        "{body}"
    );
    let width1 = body
        .lines()
        .find(|l| l.starts_with("gpuaudit_gpu_pcie_link_width{gpu=\"1\""))
        .expect("GPU 1's width");
    assert!(width1.ends_with(" 8.0"), "{width1}");
    assert!(
        body.contains("gpuaudit_findings{status=\"fail\"} 1.0"),
        "{body}"
    );
    assert!(body.contains("gpuaudit_audit_errors_total 0"));
    assert!(body.contains("gpuaudit_last_audit_timestamp_seconds "));
    assert!(body.contains("gpuaudit_audit_duration_seconds "));
    // A snapshot is never measured.
    assert!(
        !body.contains("_bytes_per_second{"),
        "no figure without a measurement"
    );
    assert!(!body.contains("gpuaudit_last_measurement_timestamp_seconds"));

    assert_eq!(get(e.addr, "/nothing").status, 404);
    assert_eq!(request(e.addr, "POST", "/metrics").status, 405);
    assert_eq!(request(e.addr, "HEAD", "/healthz").status, 200);

    let status = e.terminate(Duration::from_secs(5));
    assert_eq!(
        status.code(),
        Some(0),
        "stderr: {}",
        e.stderr.lock().unwrap()
    );
    // The socket is closed with it.
    assert!(std::net::TcpStream::connect_timeout(&e.addr, Duration::from_secs(1)).is_err());
}

#[test]
fn a_snapshot_that_goes_away_is_a_503_with_the_reason_and_an_error_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("snap");
    common::copy_dir(&snapshot("h200-x2-x8-link"), &root);
    let mut e = Exporter::start(&["--root", root.to_str().unwrap(), "--interval", "1s"]);
    e.wait_for("/healthz", 200, Duration::from_secs(30));
    std::fs::remove_dir_all(&root).unwrap();
    let h = e.wait_for("/healthz", 503, Duration::from_secs(30));
    assert!(
        h.body.starts_with("the latest audit failed: "),
        "{}",
        h.body
    );
    assert!(h.body.contains("snap"), "{}", h.body);
    let m = get(e.addr, "/metrics");
    assert_eq!(m.status, 200);
    assert!(
        !m.body.contains("gpuaudit_audit_errors_total 0\n"),
        "{}",
        m.body
    );
    // The last report is still served beside the error count.
    assert!(m.body.contains("gpuaudit_check_status{check=\"pcie.link\""));
    assert_eq!(e.terminate(Duration::from_secs(5)).code(), Some(0));
}

#[test]
fn cannot_start_on_a_taken_port_or_an_unreadable_snapshot() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let root = snapshot("h200-x2-vm");
    common::gpuaudit()
        .args(["serve", "--listen", &addr, "--root", root.to_str().unwrap()])
        .timeout(Duration::from_secs(30))
        .assert()
        .code(2)
        .stderr(predicates::str::contains(format!(
            "cannot listen on {addr}"
        )));
    common::gpuaudit()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--root",
            "/nonexistent/snapshot",
        ])
        .timeout(Duration::from_secs(30))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("/nonexistent/snapshot"));
}
