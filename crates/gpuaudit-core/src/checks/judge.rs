//! What the measured checks share: the group a check reads, the datasheet or link figure a
//! measurement is held against, the ratio's status, and the comparison with the GPU's
//! siblings: a GPU 30% below the median of the same model on the machine fails even where the
//! datasheet is unknown.

use crate::facts::{median, pcie_link_gbps, Facts, GemmDtype, GpuFacts, OnGpu, TopoLink, Verify};
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::spec::{GpuSpec, SpecDb};

/// A figure below this fraction of the median of its siblings (same model, same machine)
/// fails.
pub const SIBLING_FLOOR: f64 = 0.70;

/// A measured figure below this fraction of what healthy GPUs of its model reach
/// (`data/attainable.toml`) warns. GPUs of one model differ by about 5% (Bekman, "Machine
/// Learning Engineering", compute/accelerator: 5% and more between the GPUs of one 8-GPU node,
/// from the silicon lottery and uneven cooling), and one H200 read 1.8% apart from run to run
/// (bf16 807.6-822 TFLOPS, BENCHMARKS.md): 10% below is beyond that spread, so something
/// (clocks, power, heat, another process) costs performance.
pub const ATTAINABLE_WARN: f64 = 0.90;
/// Below this fraction of what healthy GPUs of its model reach, a figure fails: a quarter of
/// the work the GPU was bought for is lost (a job takes a third longer), more than any spread
/// between healthy GPUs or a warm GPU explains.
pub const ATTAINABLE_FAIL: f64 = 0.75;

/// The group's value, or the findings that say why it is missing.
pub fn group<'a, T>(id: &str, facts: &'a Facts, r: &'a Reading<T>) -> Result<&'a T, Vec<Finding>> {
    if let Some(why) = &facts.measured.not_run {
        return Err(vec![Finding::skip(id, why.clone())]);
    }
    match r {
        Reading::Value(v) => Ok(v),
        Reading::Unavailable(why) => Err(vec![Finding::skip(id, why.clone())]),
    }
}

/// The driver's facts of GPU `gpu` (NVML index), where it listed it.
pub fn gpu_facts(facts: &Facts, gpu: u32) -> Option<&GpuFacts> {
    facts.gpu_list().iter().find(|g| g.index == gpu)
}

/// The spec entry of a GPU, from the driver's facts or (failing those) from what CUDA said.
pub fn spec_of(facts: &Facts, gpu: u32) -> Option<&'static GpuSpec> {
    let db = SpecDb::embedded();
    if let Some(g) = gpu_facts(facts, gpu) {
        let s = db.identify_gpu(g);
        if s.is_some() {
            return s;
        }
    }
    let d = facts.measured.device(gpu)?;
    db.identify(
        None,
        Some(&d.name),
        Some(d.total_memory_bytes / (1024 * 1024)),
    )
}

/// The model name siblings are grouped by.
pub fn model(facts: &Facts, gpu: u32) -> String {
    if let Some(s) = spec_of(facts, gpu) {
        return s.key.clone();
    }
    gpu_facts(facts, gpu)
        .and_then(|g| g.name.value().cloned())
        .or_else(|| facts.measured.device(gpu).map(|d| d.name.clone()))
        .unwrap_or_default()
}

/// `Some(median)` when `value` is below [`SIBLING_FLOOR`] of the median of the other GPUs of
/// the same model (with two GPUs, the other one).
pub fn below_siblings(facts: &Facts, gpu: u32, value: f64, all: &[(u32, f64)]) -> Option<f64> {
    let m = model(facts, gpu);
    let others: Vec<f64> = all
        .iter()
        .filter(|(g, _)| *g != gpu && model(facts, *g) == m)
        .map(|(_, v)| *v)
        .collect();
    let med = median(&others)?;
    (med > 0.0 && value < SIBLING_FLOOR * med).then_some(med)
}

/// A measured/expected ratio's status: below `fail` fails, below `warn` warns.
pub fn rate_status(ratio: f64, warn: f64, fail: f64) -> Status {
    if ratio < fail {
        Status::Fail
    } else if ratio < warn {
        Status::Warn
    } else {
        Status::Pass
    }
}

/// The status of a figure measured at `of_peak` of its datasheet figure. Where healthy GPUs of
/// the model were measured (`attainable`, the fraction of the datasheet they reach), against
/// that: below [`ATTAINABLE_WARN`] of it warns, below [`ATTAINABLE_FAIL`] fails. Otherwise
/// against the check's generic floor of the datasheet, `(warn, fail)`.
pub fn attainable_status(of_peak: f64, attainable: Option<f64>, generic: (f64, f64)) -> Status {
    match attainable {
        Some(a) if a > 0.0 => rate_status(of_peak / a, ATTAINABLE_WARN, ATTAINABLE_FAIL),
        _ => rate_status(of_peak, generic.0, generic.1),
    }
}

/// "81%": a fraction as a whole percentage.
pub fn percent(fraction: f64) -> String {
    format!("{:.0}%", fraction * 100.0)
}

/// The data checks that failed, each as "what: detail".
pub fn failed_verifications(v: &[Verify]) -> Vec<String> {
    v.iter()
        .filter(|v| !v.ok)
        .map(|v| match &v.detail {
            Some(d) => format!("{}: {d}", v.what),
            None => v.what.clone(),
        })
        .collect()
}

/// One finding per GPU of a per-GPU group: skipped GPUs keep their reason.
pub fn per_gpu<T>(
    id: &str,
    policy: &Policy,
    items: &[OnGpu<T>],
    mut judge: impl FnMut(u32, &T) -> Finding,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for item in items {
        if !policy.selects(item.gpu) {
            continue;
        }
        out.push(match &item.result {
            Reading::Value(v) => judge(item.gpu, v),
            Reading::Unavailable(why) => Finding::skip(id, why.clone()).gpu(item.gpu),
        });
    }
    if out.is_empty() {
        out.push(Finding::skip(id, "no GPU measured"));
    }
    out
}

/// "GPU 1 (00:07.0)", or "GPU 1" for a GPU the driver did not list.
pub fn label(facts: &Facts, gpu: u32) -> String {
    gpu_facts(facts, gpu)
        .map(GpuFacts::label)
        .unwrap_or_else(|| format!("GPU {gpu}"))
}

// ---------------------------------------------------------------- expectations

/// The PCIe link's theoretical one-direction rate, GB/s, from the driver's maximum (or the
/// datasheet).
pub fn pcie_expected(facts: &Facts, gpu: u32) -> Option<(f64, u32, u32)> {
    let g = gpu_facts(facts, gpu);
    let gen = g
        .and_then(|g| g.pcie.gen_max.value().copied())
        .or_else(|| spec_of(facts, gpu).and_then(|s| s.pcie_gen))?;
    let width = g
        .and_then(|g| g.pcie.width_max.value().copied())
        .or_else(|| spec_of(facts, gpu).and_then(|s| s.pcie_width))?;
    pcie_link_gbps(gen, width).map(|r| (r, gen, width))
}

/// The datasheet figure a dtype's GEMM is compared with ([`GpuSpec::gemm_peak`]).
pub fn gemm_expected(spec: &GpuSpec, d: GemmDtype) -> Option<f64> {
    spec.gemm_peak(d)
}

/// What one direction between two GPUs should reach, and over what.
pub fn p2p_expected(facts: &Facts, src: u32, dst: u32) -> Option<(f64, String)> {
    let link = facts.topology.value().and_then(|t| {
        let i = t.gpus.iter().position(|l| l == &format!("GPU{src}"))?;
        let j = t.gpus.iter().position(|l| l == &format!("GPU{dst}"))?;
        t.links.get(i)?.get(j).cloned()
    });
    let nvlink_spec = spec_of(facts, src).and_then(|s| s.nvlink.clone());
    let active_links = |g: u32| -> Option<u32> {
        gpu_facts(facts, g)?
            .nvlinks
            .value()
            .map(|v| v.iter().filter(|l| l.active).count() as u32)
    };
    let nv = match (&link, &nvlink_spec) {
        (Some(TopoLink::NvLink(k)), Some(s)) => Some((*k).min(s.links.unwrap_or(*k))),
        (None, Some(s)) => match (active_links(src), active_links(dst)) {
            (Some(a), Some(b)) if a > 0 && b > 0 => Some(a.min(b).min(s.links.unwrap_or(a))),
            _ => None,
        },
        _ => None,
    };
    if let (Some(k), Some(s)) = (nv, &nvlink_spec) {
        // Datasheets give the total over both directions and all links; without a link count
        // the bonded set is taken as all of them.
        let per_dir = s.bandwidth_gbps / 2.0 * k as f64 / s.links.unwrap_or(k).max(1) as f64;
        return Some((per_dir, format!("NVLink x{k}")));
    }
    let a = pcie_expected(facts, src)?;
    let b = pcie_expected(facts, dst)?;
    Some((
        a.0.min(b.0),
        format!("PCIe Gen{} x{}", a.1.min(b.1), a.2.min(b.2)),
    ))
}

/// What an all-reduce over `gpus` should reach (bus bandwidth, GB/s), and over what: the
/// slowest link between two of them bounds it.
pub fn allreduce_expected(facts: &Facts, gpus: &[u32]) -> Option<(f64, String)> {
    gpus.iter()
        .flat_map(|&x| gpus.iter().filter(move |&&y| y != x).map(move |&y| (x, y)))
        .filter_map(|(x, y)| p2p_expected(facts, x, y))
        .min_by(|p, q| p.0.total_cmp(&q.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{self, Check, CheckKind};
    use crate::facts::MeasuredFacts;
    use crate::testing::Machine;

    const MEASURED: [&Check; 7] = [
        &checks::cuda::context_latency::CHECK,
        &checks::pcie::bandwidth::CHECK,
        &checks::memory::bandwidth::CHECK,
        &checks::compute::gemm::CHECK,
        &checks::p2p::bandwidth::CHECK,
        &checks::nccl::allreduce::CHECK,
        &checks::stability::burn::CHECK,
    ];

    #[test]
    fn ratios_at_the_threshold_take_the_milder_status() {
        assert_eq!(rate_status(0.49, 0.7, 0.5), Status::Fail);
        assert_eq!(rate_status(0.50, 0.7, 0.5), Status::Warn);
        assert_eq!(rate_status(0.69, 0.7, 0.5), Status::Warn);
        assert_eq!(rate_status(0.70, 0.7, 0.5), Status::Pass);
    }

    #[test]
    fn attainable_figures_judge_where_known_and_the_generic_floor_elsewhere() {
        // Healthy GPUs reach 0.80 of the peak: 0.72 is 0.90 of that, 0.60 is 0.75.
        let a = Some(0.80);
        let g = (0.60, 0.45);
        assert_eq!(attainable_status(0.80, a, g), Status::Pass);
        assert_eq!(attainable_status(0.721, a, g), Status::Pass);
        assert_eq!(attainable_status(0.719, a, g), Status::Warn);
        assert_eq!(attainable_status(0.601, a, g), Status::Warn);
        assert_eq!(attainable_status(0.599, a, g), Status::Fail);
        // A GPU 25% slow is at the failure floor: it warns; slower fails.
        assert_eq!(
            attainable_status(0.80 * (1.0 - 0.25), a, g),
            Status::Warn,
            "0.75 of attainable is not below the floor"
        );
        assert_eq!(attainable_status(0.80 * 0.74, a, g), Status::Fail);
        // Without a measured figure: the generic floor of the datasheet.
        assert_eq!(attainable_status(0.61, None, g), Status::Pass);
        assert_eq!(attainable_status(0.59, None, g), Status::Warn);
        assert_eq!(attainable_status(0.44, None, g), Status::Fail);
        assert_eq!(attainable_status(0.59, Some(0.0), g), Status::Warn);
        assert_eq!(percent(0.804), "80%");
        assert_eq!(percent(0.816), "82%");
    }

    /// A GPU the driver did not list but CUDA measured is identified from CUDA's name and
    /// memory (bytes, turned into MiB).
    #[test]
    fn a_gpu_only_cuda_saw_is_identified_from_cudas_view() {
        use crate::facts::{ComputeCapability, CudaDevice};
        let device = |name: &str, total_memory_bytes: u64| CudaDevice {
            gpu: 0,
            ordinal: 0,
            name: name.into(),
            pci_bus_id: "0000:00:06.0".into(),
            compute_capability: ComputeCapability { major: 9, minor: 0 },
            sm_count: 132,
            l2_bytes: 50 << 20,
            total_memory_bytes,
            free_memory_bytes: total_memory_bytes,
            memory_clock_khz: None,
            memory_bus_width_bits: None,
            clock_khz: None,
            unified_addressing: true,
        };
        let with = |name: &str, bytes: u64| {
            let d = device(name, bytes);
            Machine::healthy("h200-sxm-141gb", 1)
                .with(|f| f.gpus = Reading::unavailable("the driver does not answer"))
                .measured(|m| m.devices = Reading::Value(vec![d]))
                .build()
        };
        let f = with("NVIDIA H200", 143_771 << 20);
        assert_eq!(
            spec_of(&f, 0).map(|s| s.key.as_str()),
            Some("h200-sxm-141gb")
        );
        assert_eq!(model(&f, 0), "h200-sxm-141gb");
        assert_eq!(label(&f, 0), "GPU 0");
        assert!(spec_of(&f, 1).is_none());
        // Where the name leaves several models, the memory (bytes as MiB) picks one.
        let key = |bytes: u64| spec_of(&with("NVIDIA A100", bytes), 0).map(|s| s.key.clone());
        let small = key(40_960 << 20).expect("an A100");
        let big = key(81_920 << 20).expect("an A100");
        assert!(small.ends_with("40gb"), "{small}");
        assert!(big.ends_with("80gb"), "{big}");
    }

    #[test]
    fn siblings_of_the_same_model_set_the_floor() {
        let f = Machine::healthy("h200-sxm-141gb", 3).build();
        let all = [(0, 100.0), (1, 100.0), (2, 69.0)];
        assert_eq!(below_siblings(&f, 2, 69.0, &all), Some(100.0));
        assert_eq!(below_siblings(&f, 2, 70.0, &all), None);
        // No sibling of the same model: nothing to compare with.
        assert_eq!(below_siblings(&f, 2, 1.0, &[(2, 1.0)]), None);
        // A median of zero (nothing measured right) sets no floor.
        assert_eq!(
            below_siblings(&f, 2, -1.0, &[(0, 0.0), (1, 0.0), (2, -1.0)]),
            None
        );
        // Another model on the same machine is no sibling.
        let spec = SpecDb::embedded().by_key("l4").expect("known");
        let mixed = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| {
                g.name = Reading::Value(spec.nvml_names[0].clone());
                g.pci_device_id = Reading::Value(spec.pci_device_ids[0]);
                g.memory.total_mib = Reading::Value(23_034);
            })
            .build();
        assert_eq!(model(&mixed, 1), "l4");
        assert_eq!(model(&mixed, 0), "h200-sxm-141gb");
        assert_eq!(
            below_siblings(&mixed, 1, 10.0, &[(0, 100.0), (1, 10.0)]),
            None
        );
    }

    #[test]
    fn the_slowest_link_bounds_an_allreduce() {
        let f = Machine::healthy("h200-sxm-141gb", 2).build();
        assert_eq!(
            allreduce_expected(&f, &[0, 1]),
            Some((450.0, "NVLink x18".to_string()))
        );
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                if let Reading::Value(t) = &mut f.topology {
                    t.links[0][1] = TopoLink::Phb;
                    t.links[1][0] = TopoLink::Phb;
                }
            })
            .build();
        let (gbps, over) = allreduce_expected(&f, &[0, 1]).expect("a PCIe figure");
        assert_eq!(over, "PCIe Gen5 x16");
        assert!((gbps - 63.015).abs() < 0.01, "{gbps}");
    }

    /// Without a topology matrix the NVLink links up on both GPUs say what the pair has.
    #[test]
    fn without_a_topology_the_links_up_decide() {
        let no_topo = |links0: usize, links1: usize| {
            Machine::healthy("h200-sxm-141gb", 2)
                .with(|f| f.topology = Reading::unavailable("nvidia-smi topo not read"))
                .gpu(0, |g| {
                    if let Reading::Value(l) = &mut g.nvlinks {
                        l.iter_mut()
                            .enumerate()
                            .for_each(|(i, x)| x.active = i < links0);
                    }
                })
                .gpu(1, |g| {
                    if let Reading::Value(l) = &mut g.nvlinks {
                        l.iter_mut()
                            .enumerate()
                            .for_each(|(i, x)| x.active = i < links1);
                    }
                })
                .build()
        };
        assert_eq!(
            p2p_expected(&no_topo(18, 18), 0, 1),
            Some((450.0, "NVLink x18".to_string()))
        );
        // The fewer links up of the two bound the pair: 10 of 18 links.
        assert_eq!(
            p2p_expected(&no_topo(10, 18), 0, 1),
            Some((250.0, "NVLink x10".to_string()))
        );
        assert_eq!(
            p2p_expected(&no_topo(18, 1), 0, 1),
            Some((25.0, "NVLink x1".to_string()))
        );
        // No link up on one of them: PCIe.
        for (a, b) in [(0, 18), (18, 0)] {
            let (_, over) = p2p_expected(&no_topo(a, b), 0, 1).expect("a PCIe figure");
            assert_eq!(over, "PCIe Gen5 x16", "{a} {b}");
        }
    }

    #[test]
    fn all_seven_are_registered_as_measured() {
        for c in MEASURED {
            let r = checks::find(c.id).unwrap_or_else(|| panic!("{}", c.id));
            assert_eq!(r.kind, CheckKind::Measured);
            assert!(!r.doc.what.is_empty() && !r.doc.fix.is_empty());
        }
    }

    #[test]
    fn not_measured_is_one_skip_with_the_reason() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
        f.measured = MeasuredFacts::not_run("snapshot audit: nothing is measured");
        for c in MEASURED {
            let out = (c.run)(&f, &Policy::default());
            assert_eq!(out.len(), 1, "{}", c.id);
            assert_eq!(out[0].status, Status::Skip);
            assert_eq!(out[0].message, "snapshot audit: nothing is measured");
        }
    }
}
