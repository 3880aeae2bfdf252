//! `gpuaudit serve` scraped by a real Prometheus: the target is up (the exposition parsed)
//! and the series are there, queried through Prometheus's HTTP API.
//!
//! Where no `prometheus` binary is installed the test says SKIPPED on stderr and passes,
//! unless `GPUAUDIT_REQUIRE_PROMETHEUS=1` (CI sets it after installing Debian's
//! `prometheus`). Another binary: `GPUAUDIT_PROMETHEUS=/path/to/prometheus`.

mod common;
mod exporter;
use exporter::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn prometheus() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPUAUDIT_PROMETHEUS") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
}

/// Killed on drop, however the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `NVIDIA H200 "x" \ },y="z` as the XML writes it.
const HOSTILE_XML: &str = "NVIDIA H200 &quot;x&quot; \\ },y=&quot;z";
const HOSTILE: &str = "NVIDIA H200 \"x\" \\ },y=\"z";

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

/// GET `path` of Prometheus's API as JSON (`None` while it does not answer yet).
fn api(addr: std::net::SocketAddr, path: &str) -> Option<Value> {
    let r = try_request(addr, "GET", path).ok()?;
    if r.status != 200 {
        return None;
    }
    serde_json::from_str(&r.body).ok()
}

#[test]
fn prometheus_scrapes_the_exporter() {
    let Some(bin) = prometheus() else {
        assert!(
            std::env::var("GPUAUDIT_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "GPUAUDIT_REQUIRE_PROMETHEUS=1 but no prometheus on PATH"
        );
        eprintln!("SKIPPED: no prometheus on PATH (apt-get install prometheus)");
        return;
    };
    // The x8-link snapshot with a GPU name that would break an unescaped exposition (the XML
    // keeps one line of text, so no line feed: the unit tests have that one).
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("snap");
    common::copy_dir(&snapshot("h200-x2-x8-link"), &root);
    let xml = root.join("cmd/nvidia-smi-q.xml");
    let text = std::fs::read_to_string(&xml).unwrap();
    let text = text.replacen(
        "<product_name>NVIDIA H200</product_name>",
        &format!("<product_name>{}</product_name>", HOSTILE_XML),
        1,
    );
    std::fs::write(&xml, text).unwrap();
    let exporter = Exporter::start(&["--root", root.to_str().unwrap(), "--interval", "1s"]);
    exporter.wait_for("/healthz", 200, Duration::from_secs(30));

    // dcgm-exporter beside it: its series of the snapshot's two GPUs, as dcgm-exporter names
    // them (`UUID`, `Hostname`; dcgm-exporter's README), for the join the README shows.
    let uuids: Vec<String> = {
        let r = request(exporter.addr, "GET", "/metrics");
        let mut u: Vec<String> = r
            .body
            .lines()
            .filter(|l| l.starts_with("gpuaudit_gpu_info{"))
            .filter_map(|l| {
                l.split("uuid=\"")
                    .nth(1)?
                    .split('"')
                    .next()
                    .map(str::to_string)
            })
            .collect();
        u.sort();
        u
    };
    assert_eq!(uuids.len(), 2, "{uuids:?}");
    let dcgm = dcgm_exporter(
        uuids
            .iter()
            .enumerate()
            .map(|(i, u)| {
                format!(
                    "DCGM_FI_DEV_POWER_USAGE{{gpu=\"{i}\",UUID=\"{u}\",device=\"nvidia{i}\",\
                     modelName=\"NVIDIA H200\",Hostname=\"node-1\"}} 350.0\n"
                )
            })
            .collect::<String>(),
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: gpuaudit\n    static_configs:\n      - targets: ['{}']\n\
             \x20 - job_name: dcgm\n    static_configs:\n      - targets: ['{dcgm}']\n",
            exporter.addr
        ),
    )
    .unwrap();
    let port = free_port();
    let web: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new(&bin)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let _prometheus = Killed(child);
    let log = || std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();

    // Up, scraped at least once, and the state set there: about a minute at most.
    let deadline = Instant::now() + Duration::from_secs(90);
    let (target, series) = loop {
        let target = api(web, "/api/v1/targets").and_then(|v| {
            v["data"]["activeTargets"]
                .as_array()
                .and_then(|t| t.iter().find(|x| x["labels"]["job"] == "gpuaudit").cloned())
        });
        let series = api(web, "/api/v1/query?query=gpuaudit_check_status")
            .and_then(|v| v["data"]["result"].as_array().cloned())
            .unwrap_or_default();
        let up = target
            .as_ref()
            .is_some_and(|t| t["health"].as_str() == Some("up"));
        if up && !series.is_empty() {
            break (target.unwrap_or_default(), series);
        }
        assert!(
            Instant::now() < deadline,
            "no healthy scrape within 90 s: target {target:?}\nprometheus log:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(target["lastError"].as_str(), Some(""), "{target}");
    assert_eq!(target["labels"]["job"].as_str(), Some("gpuaudit"));

    // pcie.link fails on GPU 1 (x8 of x16): exactly one current status per state set.
    let current: Vec<&Value> = series
        .iter()
        .filter(|s| s["metric"]["check"] == "pcie.link" && s["metric"]["gpu"] == "1")
        .filter(|s| s["value"][1] == "1")
        .collect();
    assert_eq!(current.len(), 1, "{series:?}");
    assert_eq!(current[0]["metric"]["status"], "fail");
    // Five statuses for each check and GPU.
    assert_eq!(
        series
            .iter()
            .filter(|s| s["metric"]["check"] == "pcie.link" && s["metric"]["gpu"] == "1")
            .count(),
        5
    );
    for (query, want) in [
        ("count(gpuaudit_gpu_info)", "2"),
        ("gpuaudit_gpu_pcie_link_width{gpu=\"1\"}", "8"),
        ("gpuaudit_findings{status=\"fail\"}", "1"),
        ("gpuaudit_problems{status=\"fail\"}", "1"),
        ("gpuaudit_audit_errors_total", "0"),
    ] {
        let q = encode(query);
        let v = api(web, &format!("/api/v1/query?query={q}")).expect(query);
        let got = v["data"]["result"][0]["value"][1].as_str().unwrap_or("");
        assert_eq!(got, want, "{query}: {v}");
    }
    // The hostile name arrived whole, as the name label of GPU 0, and made no label of its own.
    let info = api(web, "/api/v1/query?query=gpuaudit_gpu_info").expect("gpu_info");
    let names: Vec<&str> = info["data"]["result"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["metric"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert!(names.contains(&HOSTILE), "{info}");
    assert!(
        info["data"]["result"]
            .as_array()
            .is_some_and(|a| a.iter().all(|s| s["metric"].get("y").is_none())),
        "{info}"
    );
    // The README's join: dcgm-exporter's power draw over gpuaudit's enforced limit, per GPU,
    // matched on the UUID (dcgm-exporter's `UUID` label copied into gpuaudit's `uuid`).
    let query = "label_replace(DCGM_FI_DEV_POWER_USAGE, \"uuid\", \"$1\", \"UUID\", \"(.*)\") \
                 / on(uuid) gpuaudit_gpu_power_limit_watts";
    let deadline = Instant::now() + Duration::from_secs(60);
    let joined = loop {
        let v = api(web, &format!("/api/v1/query?query={}", encode(query)))
            .and_then(|v| v["data"]["result"].as_array().cloned())
            .unwrap_or_default();
        if v.len() == 2 || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(joined.len(), 2, "{joined:?}\n{}", log());
    for s in &joined {
        let uuid = s["metric"]["uuid"].as_str().unwrap_or("");
        assert!(uuids.iter().any(|u| u == uuid), "{s}");
        // 350 W of the snapshot's 700 W limit.
        assert_eq!(s["value"][1].as_str(), Some("0.5"), "{s}");
    }
    let ts = api(
        web,
        "/api/v1/query?query=gpuaudit_last_audit_timestamp_seconds",
    )
    .expect("timestamp");
    let t: f64 = ts["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("a number");
    assert!(t > 1.7e9, "{ts}");
}

/// A query as a URL's query component.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A stand-in for dcgm-exporter: answers every request with `body` as Prometheus text, on a
/// thread of its own for the rest of the test process.
fn dcgm_exporter(body: String) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for mut c in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}
