//! compute.gemm: measured matrix-multiply TFLOPS per data type against the datasheet's dense
//! peak and the GPU's siblings, results verified.

use crate::checks::judge::{
    below_siblings, gemm_expected, group, label, per_gpu, rate_status, spec_of,
};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GemmDtype};
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::units::figure;

const ID: &str = "compute.gemm";

/// GEMM against the datasheet's dense peak: 75-85% is typical on SXM parts (H200 bf16: ~790
/// of 989 TFLOPS), PCIe parts run lower at their power limit.
pub const WARN: f64 = 0.60;
pub const FAIL: f64 = 0.45;

pub const CHECK: Check = Check {
    id: ID,
    title: "measured matrix-multiply TFLOPS per data type against the datasheet",
    looks_at: "measured matrix-multiply TFLOPS per dtype (fp64, fp32, tf32, fp16, bf16, fp8 \
               where supported) against the datasheet's dense peak",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "Square GEMMs on random data (8192 with --full, 4096 and bf16 only in the \
               quick audit): bf16, fp16, tf32 and fp8 (compute capability 8.9 and later) \
               through cuBLASLt with a 32 MiB workspace, fp32 and fp64 through cuBLAS. \
               Sampled outputs are checked against a CPU f64 reference (fp32 strictly \
               enough to catch a TF32 path). TFLOPS are compared with the datasheet's dense \
               peak: below 60% warns, below 45% fails (75-85% is normal on SXM parts); a \
               GPU below 70% of its siblings fails; wrong results fail.",
        why: "Matrix multiplies are most of the work of training and inference. A GPU that \
              reaches a fraction of its peak is power- or clock-limited, hot, a slower \
              variant (PCIe instead of SXM), or shared.",
        verify: "PyTorch: a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); \
                 time a@a with torch.cuda.Event; TFLOPS = 2*8192**3/time/1e12.",
        fix: "Check power limit and clocks (power.limit, clocks.max, clocks.throttle), \
              cooling, and that no other process uses the GPU. On a cloud instance, report \
              the figure with the GPU's serial number to the provider.",
    },
    profiles: &[],
    run: check_gemm,
};

fn check_gemm(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let m = match group(ID, facts, &facts.measured.gemm) {
        Ok(m) => m,
        Err(f) => return f,
    };
    let of = |d: GemmDtype| -> Vec<(u32, f64)> {
        m.iter()
            .filter_map(|g| {
                let r = g.result.value()?.iter().find(|r| r.dtype == d)?;
                Some((g.gpu, r.result.value()?.tflops))
            })
            .collect()
    };
    per_gpu(ID, policy, m, |gpu, results| {
        let who = label(facts, gpu);
        let spec = spec_of(facts, gpu);
        let mut status = Status::Pass;
        let mut parts = Vec::new();
        let mut problems = Vec::new();
        let mut missing = Vec::new();
        let mut evidence = crate::finding::Evidence::new();
        let mut fix = None;
        for r in results {
            let name = r.dtype.as_str();
            let p = match &r.result {
                Reading::Value(p) => p,
                Reading::Unavailable(why) => {
                    missing.push(format!("{name}: {why}"));
                    continue;
                }
            };
            let exp = spec.and_then(|s| gemm_expected(s, r.dtype));
            parts.push(match exp {
                Some(e) => format!("{name} {} ({:.0}%)", figure(p.tflops), p.tflops / e * 100.0),
                None => format!("{name} {}", figure(p.tflops)),
            });
            if let Some(e) = exp {
                let ratio = p.tflops / e;
                let s = rate_status(ratio, WARN, FAIL);
                if s != Status::Pass {
                    problems.push(format!("{name} at {:.0}% of the datasheet", ratio * 100.0));
                    fix.get_or_insert(
                        "Check power limit, clocks and throttle reasons (power.limit, \
                         clocks.throttle), cooling, and other processes on the GPU.",
                    );
                }
                status = status.max(s);
            }
            if let Some(med) = below_siblings(facts, gpu, p.tflops, &of(r.dtype)) {
                status = Status::Fail;
                problems.push(format!(
                    "{name} {:.0}% below the median of the same GPUs here ({})",
                    (1.0 - p.tflops / med) * 100.0,
                    figure(med)
                ));
                fix.get_or_insert(
                    "Compare this GPU's clocks, power limit and temperature with the others.",
                );
            }
            if !p.verified {
                status = Status::Fail;
                problems.push(if r.dtype == GemmDtype::Fp32 {
                    format!(
                        "fp32 results off by {:.1e} (limit {:.0e}): not computed in full fp32 \
                         precision (TF32?) or wrong",
                        p.max_error, p.tolerance
                    )
                } else {
                    format!(
                        "{name} results wrong: error {:.1e} against the CPU (limit {:.0e})",
                        p.max_error, p.tolerance
                    )
                });
                fix = Some(
                    "Wrong GEMM results: rerun; if it repeats, drain the GPU and have it \
                     replaced (check memory.errors and the kernel log for XID errors).",
                );
            }
            evidence.insert(
                name,
                serde_json::json!({
                    "tflops": p.tflops, "expected": exp, "size": p.m,
                    "max_error": p.max_error, "verified": p.verified, "library": p.library,
                }),
            );
        }
        if parts.is_empty() {
            return Finding::skip(ID, format!("{who}: {}", missing.join("; "))).gpu(gpu);
        }
        let size = results
            .iter()
            .find_map(|r| r.result.value().map(|p| p.m))
            .unwrap_or(0);
        let mut msg = format!(
            "{who}: {size}x{size} GEMM TFLOPS {}{}",
            parts.join(", "),
            if spec.is_some() {
                " of the datasheet's dense peak"
            } else {
                " (model not in the spec database: judged against the other GPUs only)"
            }
        );
        if !problems.is_empty() {
            msg.push_str("; ");
            msg.push_str(&problems.join("; "));
        }
        if !missing.is_empty() {
            msg.push_str(&format!("; not measured: {}", missing.join("; ")));
        }
        let mut f = Finding::new(ID, status, msg).gpu(gpu).evidence(evidence);
        if let Some(x) = fix {
            f = f.fix(x);
        }
        f
    })
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::measured::*;
    use crate::testing::Machine;

    #[test]
    fn gemm_per_dtype() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        let r = |d, t, ok| GemmResult {
            dtype: d,
            result: Reading::Value(gemm_point(t, ok)),
        };
        f.measured.gemm = Reading::Value(vec![
            OnGpu::new(
                0,
                Reading::Value(vec![
                    r(GemmDtype::Bf16, 789.0, true),
                    r(GemmDtype::Fp32, 50.8, true),
                    GemmResult {
                        dtype: GemmDtype::Fp8,
                        result: Reading::unavailable("cuBLASLt has no algorithm"),
                    },
                ]),
            ),
            OnGpu::new(
                1,
                Reading::Value(vec![
                    r(GemmDtype::Bf16, 780.0, true),
                    r(GemmDtype::Fp32, 50.0, false),
                ]),
            ),
        ]);
        let out = (CHECK.run)(&f, &Policy::default());
        let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
        assert_eq!(g0.status, Status::Pass, "{}", g0.message);
        assert!(g0.message.contains("bf16 789 (80%)"), "{}", g0.message);
        assert!(g0.message.contains("not measured: fp8"), "{}", g0.message);
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Fail);
        assert!(g1.message.contains("TF32"), "{}", g1.message);
    }
}
