//! A stand-alone runner of the measurements, for trying them on a GPU machine before (or
//! without) the command line: reads the GPUs from NVML (in a child), measures, prints JSON
//! `{"measured": MeasuredFacts, "measurements": [...]}` on stdout and the bench tables on
//! stderr.
//!
//! ```text
//! cargo build --release -p gpuaudit-probe --example measure
//! target/release/examples/measure [--quick] [--force] [--burn SECS] [GROUP...]
//! ```
//! GROUP: context pcie memory gemm p2p nccl burn (default: all but burn, full sweeps).

use gpuaudit_core::facts::{Facts, Origin};
use gpuaudit_core::render::bench::tables as bench_tables;
use gpuaudit_core::report::measurements;
use gpuaudit_probe::measure::{self, GpuGroup, Options};
use gpuaudit_probe::nvml;

/// The GPUs as the NVML child reads them (NVML is never loaded in this process).
fn facts_from_nvml() -> Facts {
    let mut f = Facts::empty(Origin::Live, "not read by the measure example");
    match nvml::read_facts(nvml::TIMEOUT) {
        Ok(nvml::NvmlAnswer::Loaded {
            cuda_version, gpus, ..
        }) => {
            f.driver.cuda_version = cuda_version;
            f.gpus = gpus;
        }
        Ok(nvml::NvmlAnswer::Failed { reason }) | Err(nvml::NvmlError { reason, .. }) => {
            eprintln!("NVML: {reason}");
        }
    }
    f
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(measure::CHILD_SUBCOMMAND) => std::process::exit(measure::child_main(&args[2..])),
        Some(measure::CTX_PROBE_SUBCOMMAND) => std::process::exit(measure::ctx_probe_main()),
        Some(nvml::SUBCOMMAND) => std::process::exit(nvml::child_main(&args[2..])),
        _ => {}
    }
    let mut groups = Vec::new();
    let mut quick = false;
    let mut force = false;
    let mut burn = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--force" => force = true,
            "--burn" => burn = it.next().and_then(|s| s.parse().ok()),
            g => match GpuGroup::parse(g) {
                Some(g) => groups.push(g),
                None => {
                    eprintln!("unknown argument {g:?}");
                    std::process::exit(2);
                }
            },
        }
    }
    let mut opts = if quick {
        Options::default()
    } else {
        Options::bench(&groups)
    };
    if quick && !groups.is_empty() {
        opts.groups = Some(groups);
    }
    if let Some(s) = burn {
        opts.burn_seconds = s;
        if let Some(g) = opts.groups.as_mut() {
            if !g.contains(&GpuGroup::Burn) {
                g.push(GpuGroup::Burn);
            }
        }
    }
    opts.force = force;
    let mut facts = facts_from_nvml();
    let t = std::time::Instant::now();
    let mut last = 0u64;
    facts.measured = measure::run(&facts, &opts, &mut |p| {
        if p.done_ms >= last + 500 || p.done_ms == p.total_ms {
            last = p.done_ms;
            eprintln!(
                "[{:5.1}s] {:3}% {}",
                t.elapsed().as_secs_f64(),
                p.done_ms * 100 / p.total_ms.max(1),
                p.message
            );
        }
    });
    eprintln!("measured in {:.1} s", t.elapsed().as_secs_f64());
    for (title, rows) in bench_tables(&facts.measured) {
        eprintln!("\n== {title}");
        for r in rows {
            eprintln!("  {}", r.join(" | "));
        }
    }
    let out = serde_json::json!({
        "measured": facts.measured,
        "measurements": measurements(&facts),
        "wall_s": t.elapsed().as_secs_f64(),
    });
    match serde_json::to_string_pretty(&out) {
        Ok(s) => println!("{s}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
