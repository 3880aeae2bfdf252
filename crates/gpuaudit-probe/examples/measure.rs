//! A stand-alone runner of the measurements, for trying them on a GPU machine before (or
//! without) the command line: reads the GPUs from NVML, measures, prints JSON
//! `{"measured": MeasuredFacts, "measurements": [...]}` on stdout and the bench tables on
//! stderr.
//!
//! ```text
//! cargo build --release -p gpuaudit-probe --example measure
//! target/release/examples/measure [--quick] [--force] [--burn SECS] [GROUP...]
//! ```
//! GROUP: context pcie memory gemm p2p nccl burn (default: all but burn, full sweeps).

use gpuaudit_core::facts::{
    normalize_bus_id, ComputeCapability, CudaVersion, Facts, GpuFacts, NvLink, Origin,
};
use gpuaudit_core::render::bench::tables as bench_tables;
use gpuaudit_core::report::measurements;
use gpuaudit_core::Reading;
use gpuaudit_probe::measure::{self, Group, Options};
use nvml_wrapper::Nvml;

fn facts_from_nvml() -> Facts {
    let mut f = Facts::empty(Origin::Live, "not read by the measure example");
    let Ok(nvml) = Nvml::init() else {
        return f;
    };
    if let Ok(v) = nvml.sys_cuda_driver_version() {
        f.driver.cuda_version =
            Reading::Value(CudaVersion::new(v as u32 / 1000, (v as u32 % 1000) / 10));
    }
    let n = nvml.device_count().unwrap_or(0);
    let mut gpus = Vec::new();
    for i in 0..n {
        let Ok(d) = nvml.device_by_index(i) else {
            continue;
        };
        let Ok(pci) = d.pci_info() else { continue };
        let mut g = GpuFacts::unread(i, &normalize_bus_id(&pci.bus_id), "nvml", "not read");
        g.pci_device_id = Reading::Value((pci.pci_device_id >> 16) as u16);
        if let Ok(name) = d.name() {
            g.name = Reading::Value(name);
        }
        if let Ok(m) = d.memory_info() {
            g.memory.total_mib = Reading::Value(m.total / (1024 * 1024));
        }
        if let Ok(cc) = d.cuda_compute_capability() {
            g.compute_capability = Reading::Value(ComputeCapability {
                major: cc.major.max(0) as u32,
                minor: cc.minor.max(0) as u32,
            });
        }
        if let Ok(v) = d.max_pcie_link_gen() {
            g.pcie.gen_max = Reading::Value(v);
        }
        if let Ok(v) = d.max_pcie_link_width() {
            g.pcie.width_max = Reading::Value(v);
        }
        g.mig.current = Reading::Value(false);
        let links: Vec<NvLink> = (0..18)
            .filter_map(|l| {
                let active = d.link_wrapper_for(l).is_active().ok()?;
                Some(NvLink {
                    link: l,
                    active,
                    version: None,
                    speed_gbps: None,
                    remote_bus_id: None,
                })
            })
            .collect();
        if !links.is_empty() {
            g.nvlinks = Reading::Value(links);
        }
        gpus.push(g);
    }
    f.gpus = Reading::Value(gpus);
    f
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(measure::CHILD_SUBCOMMAND) => std::process::exit(measure::child_main(&args[2..])),
        Some(measure::CTX_PROBE_SUBCOMMAND) => std::process::exit(measure::ctx_probe_main()),
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
            g => match Group::parse(g) {
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
            if !g.contains(&Group::Burn) {
                g.push(Group::Burn);
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
