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

/// The datasheet figure a dtype's GEMM is compared with. fp64 GEMMs run on the fp64 tensor
/// cores where the GPU has them (A100, H100/H200: cuBLAS uses DMMA).
pub fn gemm_expected(spec: &GpuSpec, d: GemmDtype) -> Option<f64> {
    let t = &spec.tflops;
    match d {
        GemmDtype::Fp64 => t.fp64_tensor.or(t.fp64),
        GemmDtype::Fp32 => t.fp32,
        GemmDtype::Tf32 => t.tf32,
        GemmDtype::Fp16 => t.fp16,
        GemmDtype::Bf16 => t.bf16,
        GemmDtype::Fp8 => t.fp8,
    }
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
    fn siblings_of_the_same_model_set_the_floor() {
        let f = Machine::healthy("h200-sxm-141gb", 3).build();
        let all = [(0, 100.0), (1, 100.0), (2, 69.0)];
        assert_eq!(below_siblings(&f, 2, 69.0, &all), Some(100.0));
        assert_eq!(below_siblings(&f, 2, 70.0, &all), None);
        // No sibling of the same model: nothing to compare with.
        assert_eq!(below_siblings(&f, 2, 1.0, &[(2, 1.0)]), None);
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
