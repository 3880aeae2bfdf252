//! N reports of a fleet for `scripts/fleet-bench.sh` (BENCHMARKS.md, "fleet at scale"):
//! `cargo run --release -p gpuaudit --example fleet_reports -- N DIR [--pretty]`.
//!
//! Every node is the real 1×H200 `--full` report of `fixtures/reports/h200-x1-vm-full.json`
//! (a measured machine, not a built one: its findings, evidence, series and methods are what
//! a fleet reads past), with its own hostname (`gpu-00042`) and its figures drawn with
//! noise around the measured ones: 1% (log-normal) for bandwidths and FLOPS, 5% for the
//! long-tailed latencies and context creation, ±1.5 °C for the burn's temperature. A few
//! nodes are degraded, by the node's number, so that the fleet has something to say:
//! every 1,000th (from 17) copies device memory 15% slower, every 1,000th (from 503) burns
//! 15 °C hotter, every 2,000th (from 999) fails pcie.link (x8), every 50th (from 7) runs
//! another driver, and one file (the middle one) is cut short: not JSON. The noise comes from
//! a fixed generator seeded by the node's number: the same N gives the same files.
//!
//! Compact JSON by default (`serde_json::to_string`, as the tests write reports): 100,000
//! nodes are about 10 GB, against 18 GB as `gpuaudit --format json` writes them
//! (`--pretty`); the content is the same. The files are written on every CPU.

use serde_json::Value;
use std::path::{Path, PathBuf};

const TEMPLATE: &str = include_str!("../../../fixtures/reports/h200-x1-vm-full.json");

/// A small fixed generator (SplitMix64): reproducible noise without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        // In (0, 1]: ln() of it is finite.
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
    /// A standard normal draw (Box–Muller).
    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// Node `i` of the fleet, as JSON text.
fn node(template: &Value, i: usize, pretty: bool) -> String {
    let mut r = template.clone();
    let mut rng = Rng(i as u64 ^ 0x5EED);
    let host = format!("gpu-{i:05}");
    r["machine"]["hostname"] = host.into();
    if i % 50 == 7 {
        r["machine"]["driver_version"] = "580.95.05".into();
    }
    if let Some(ms) = r["measurements"].as_array_mut() {
        for m in ms {
            let name = m["name"].as_str().unwrap_or_default().to_string();
            let Some(v) = m["value"].as_f64() else {
                continue;
            };
            let mut v = if name == "burn_temperature_c" {
                v + 1.5 * rng.normal()
            } else if name.starts_with("context_create")
                || name.starts_with("cuinit")
                || name.ends_with("_us")
            {
                v * (0.05 * rng.normal()).exp()
            } else {
                v * (0.01 * rng.normal()).exp()
            };
            if i % 1000 == 17 && name == "memory_copy_bandwidth" {
                v *= 0.85;
            }
            if i % 1000 == 503 && name == "burn_temperature_c" {
                v += 15.0;
            }
            m["value"] = serde_json::json!(v);
            // The ratio to the expectation follows the value, as the audit writes it.
            if let Some(e) = m["expected"].as_f64().filter(|e| *e > 0.0) {
                m["ratio"] = serde_json::json!(v / e);
            }
        }
    }
    if i % 2000 == 999 {
        if let Some(f) = r["findings"]
            .as_array_mut()
            .and_then(|fs| fs.iter_mut().find(|f| f["check"] == "pcie.link"))
        {
            f["status"] = "fail".into();
            f["message"] =
                "GPU 0 (0000:00:06.0): the link trained at gen5 x8, below its gen5 x16".into();
            f["fix"] = "reseat the GPU or check its slot and riser".into();
        }
        r["summary"]["pass"] = serde_json::json!(r["summary"]["pass"].as_u64().unwrap_or(1) - 1);
        r["summary"]["fail"] = serde_json::json!(1);
    }
    let text = if pretty {
        serde_json::to_string_pretty(&r)
    } else {
        serde_json::to_string(&r)
    };
    text.unwrap_or_default()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: fleet_reports N DIR [--pretty]");
        std::process::exit(2);
    };
    let pretty = args.next().as_deref() == Some("--pretty");
    let template: Value = serde_json::from_str(TEMPLATE).expect("the fixture is a report");
    std::fs::create_dir_all(&dir).expect("the directory can be made");
    let threads = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1);
    let written = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (template, dir, written) = (&template, dir.as_path(), &written);
            s.spawn(move || {
                for i in (t..n).step_by(threads) {
                    let mut text = node(template, i, pretty);
                    if i == n / 2 {
                        // One file cut short: a node "not read" in the fleet.
                        text.truncate(text.len() / 2);
                    }
                    write(dir, i, &text);
                    written.fetch_add(text.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let bytes = written.into_inner();
    println!(
        "{n} reports, {:.2} GB, in {}",
        bytes as f64 / 1e9,
        dir.display()
    );
}

fn write(dir: &Path, i: usize, text: &str) {
    let path = dir.join(format!("gpu-{i:05}.json"));
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
