//! How long `gpuaudit fleet` takes over a thousand reports (BENCHMARKS.md, "fleet").
//!
//! `cargo run --release -p gpuaudit --example fleet_timing [N] [DIR]` writes N measured
//! 2×H200 reports (default 1000; every tenth node's GPU 1 copies 15% slower, every fiftieth
//! on another driver) into DIR (default: a temporary directory), then times, in this process,
//! what the command does with them, on one thread (the command reads on every CPU): read and
//! parse every file, summarise, render the table and the JSON. Time the binary itself on DIR with `time gpuaudit fleet DIR > /dev/null`.

use gpuaudit_core::fleet::{self, Fleet, Input};
use gpuaudit_core::testing::{measured, Machine};
use gpuaudit_core::{Policy, Reading, Report};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let keep = args.next().map(std::path::PathBuf::from);
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = keep.unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).expect("the directory can be created");

    let policy = Policy {
        full: true,
        ..Policy::default()
    };
    let healthy = Report::build(
        &Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| measured::full_run(m, 2))
            .build(),
        &policy,
    );
    let slow = Report::build(
        &Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| {
                measured::full_run(m, 2);
                if let Reading::Value(mem) = &mut m.memory {
                    if let Reading::Value(b) = &mut mem[1].result {
                        b.copy_gbps = b.copy_gbps.map(|c| c * 0.85);
                    }
                }
            })
            .build(),
        &policy,
    );
    let mut bytes = 0;
    for i in 0..n {
        let mut r = if i % 10 == 3 {
            slow.clone()
        } else {
            healthy.clone()
        };
        r.machine.hostname = Some(format!("gpu-{i:04}"));
        if i % 50 == 7 {
            r.machine.driver_version = Some("580.95.05".into());
        }
        let text = serde_json::to_string(&r).expect("a report serialises");
        bytes += text.len();
        std::fs::write(dir.join(format!("gpu-{i:04}.json")), text).expect("written");
    }

    let start = Instant::now();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("listed")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    let inputs: Vec<Input> = paths
        .iter()
        .map(|p| Input {
            file: p.display().to_string(),
            stem: p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            report: std::fs::read_to_string(p)
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    gpuaudit_core::report::from_json_for_summary(&t, fleet::EVIDENCE_READ)
                        .map_err(|e| e.to_string())
                }),
        })
        .collect();
    let read = start.elapsed();
    let summary = Fleet::summarise(&inputs);
    let summarised = start.elapsed();
    let table = fleet::table(&summary, 80, false);
    let json = summary.to_json();
    let done = start.elapsed();
    println!(
        "{n} reports ({:.1} MiB): read and parsed {:.0} ms, summarised {:.0} ms, table and \
         JSON {:.0} ms, total {:.0} ms; {} nodes flagged, {} drift field(s), {} table lines, \
         {} KiB of JSON",
        bytes as f64 / (1 << 20) as f64,
        read.as_secs_f64() * 1e3,
        (summarised - read).as_secs_f64() * 1e3,
        (done - summarised).as_secs_f64() * 1e3,
        done.as_secs_f64() * 1e3,
        summary.counts.flagged,
        summary.drift.len(),
        table.lines().count(),
        json.len() >> 10
    );
}
