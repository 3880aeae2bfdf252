//! compute.gemm: measured matrix-multiply TFLOPS per data type against what healthy GPUs of
//! the model reach (`data/attainable.toml`) or, where nothing was measured, the datasheet's
//! dense peak with a generic floor; against the GPU's siblings; results verified.

use crate::checks::judge::{
    attainable_status, below_siblings, gemm_expected, group, label, per_gpu, percent, spec_of,
    ATTAINABLE_FAIL, ATTAINABLE_WARN,
};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, GemmDtype, GemmPoint};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;
use crate::spec::{Attainable, GpuSpec};
use crate::units::figure;

const ID: &str = "compute.gemm";

/// Where no attainable figure is known for the model, dtype and size: the share of the
/// datasheet's dense peak below which a GEMM warns, and fails. Healthy GPUs reach 0.70-0.87 of
/// it at large sizes (data/attainable.toml: H100 SXM bf16 0.80, A100 PCIe 0.81, H200 fp32 0.76)
/// and PCIe parts at their power limit less, so a floor that every healthy part clears must sit
/// well below: these catch a GPU running at half speed, not one 25% slow (which only an
/// attainable figure can).
pub const GENERIC_WARN: f64 = 0.60;
pub const GENERIC_FAIL: f64 = 0.45;

/// A model whose fp64 runs below this fraction of its fp32 rate has a weak fp64 unit: every
/// part NVIDIA builds for HPC runs fp64 at 1/2 of fp32 (P100, V100, A100, H100/H200, B200),
/// the inference and graphics parts at 1/32 or 1/64 (T4, A10, L4, L40S, RTX).
pub const WEAK_FP64_RATE: f64 = 1.0 / 8.0;

/// fp32 operations per fp64 one, per clock and SM, by compute capability, for models whose
/// datasheet gives no fp64 figure: CUDA C++ Best Practices Guide, "Throughput of Native
/// Arithmetic Instructions" (results per clock cycle per multiprocessor: fp32 64 on 6.0, 7.0,
/// 8.0 and 128 elsewhere; fp64 32 on 6.0, 7.0, 8.0, 64 on 9.0 and 10.0, 4 on 6.1, 2 on 7.5, 8.6,
/// 8.9 and 12.0), as the Turing, GA102 and Ada whitepapers state it (FP64 at 1/32 and 1/64 of
/// FP32).
pub const FP32_PER_FP64: &[((u32, u32), u32)] = &[
    ((6, 0), 2),
    ((6, 1), 32),
    ((7, 0), 2),
    ((7, 5), 32),
    ((8, 0), 2),
    ((8, 6), 64),
    ((8, 9), 64),
    ((9, 0), 2),
    ((10, 0), 2),
    ((12, 0), 64),
];

pub const CHECK: Check = Check {
    id: ID,
    title: "measured matrix-multiply TFLOPS per data type against what the model reaches",
    looks_at: "measured matrix-multiply TFLOPS per dtype (fp64, fp32, tf32, fp16, bf16, fp8 \
               where supported) against what healthy GPUs of the model reach (data/attainable.toml) \
               or the datasheet's dense peak",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "Square GEMMs on random data (8192 with --full, 4096 and bf16 only in the \
               quick audit): bf16, fp16, tf32 and fp8 (compute capability 8.9 and later) \
               through cuBLASLt with a 32 MiB workspace, fp32 and fp64 through cuBLAS. \
               Sampled outputs are checked against a CPU f64 reference (fp32 strictly \
               enough to catch a TF32 path). TFLOPS are divided by the datasheet's dense \
               peak and held against the fraction healthy GPUs of the same model reach at \
               the same size and dtype (data/attainable.toml, each figure with the run or \
               publication it was measured in; H200 bf16 8192 and 4096: 81%): below 90% of it \
               warns, below 75% fails. Where no such figure was measured (another model, size \
               or dtype), the generic floor of the dense peak applies and the finding \
               says so: below 60% warns, below 45% fails. A GPU below 70% of its siblings \
               fails; wrong results fail.",
        why: "Matrix multiplies are most of the work of training and inference. A GPU that \
              reaches a fraction of its peak is power- or clock-limited, hot, a slower \
              variant (PCIe instead of SXM), or shared.",
        verify: "# PyTorch: 20 products of 8192 x 8192 bf16 matrices on GPU 0 after a warm-up, timed with CUDA events\n\
                 python3 -c 'import torch; a = torch.randn(8192, 8192, device=\"cuda\", dtype=torch.bfloat16); c = a @ a; s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True); s.record(); [torch.mm(a, a, out=c) for _ in range(20)]; e.record(); e.synchronize(); print(\"%.0f TFLOPS\" % (20 * 2 * 8192 ** 3 / (s.elapsed_time(e) / 1e3) / 1e12))'",
        fix: "Check power limit and clocks (power.limit, clocks.max, clocks.throttle), \
              cooling, and that no other process uses the GPU. On a cloud instance, report \
              the figure with the GPU's serial number to the provider.",
    },
    profiles: &[ProfileEffect {
        profile: Profile::Hpc,
        effect: "An fp64 GEMM below 90% of what the model reaches (below 60% of the dense peak \
                 where that is unknown) fails instead of warning; a model whose fp64 runs below \
                 1/8 of its fp32 rate (1/64 on A10, L4, L40S, RTX; 1/32 on T4) fails; the \
                 quick audit, which measures bf16 only, says that fp64 needs --full.",
    }],
    run: check_gemm,
};

/// How fast a model's fp64 is against its fp32: (fp32 operations per fp64 one, how that is
/// known): the datasheet's two figures where it gives both, else [`FP32_PER_FP64`].
pub fn fp64_rate(spec: &GpuSpec) -> Option<(u32, String)> {
    let t = &spec.tflops;
    if let (Some(d), Some(s)) = (t.fp64, t.fp32) {
        if d > 0.0 && s > 0.0 {
            let n = (s / d).round().max(1.0) as u32;
            return Some((
                n,
                format!(
                    "its datasheet gives fp64 {} TFLOPS against fp32 {}",
                    figure(d),
                    figure(s)
                ),
            ));
        }
    }
    let cc = spec.compute_capability()?;
    let n = FP32_PER_FP64
        .iter()
        .find(|(c, _)| *c == (cc.major, cc.minor))
        .map(|(_, n)| *n)?;
    Some((
        n,
        format!(
            "compute capability {}.{} does {n} fp32 operations per fp64 one (CUDA C++ Best \
             Practices Guide, Throughput of Native Arithmetic Instructions)",
            cc.major, cc.minor
        ),
    ))
}

/// Whether fp64 at 1/`fp32_per_fp64` of the fp32 rate is a weak unit ([`WEAK_FP64_RATE`]).
pub fn weak_fp64(fp32_per_fp64: u32) -> bool {
    1.0 / f64::from(fp32_per_fp64.max(1)) < WEAK_FP64_RATE
}

/// What one dtype's figure was held against, for the message and the evidence.
struct Judged {
    status: Status,
    /// Measured / the datasheet's dense peak.
    of_peak: Option<f64>,
    attainable: Option<&'static crate::spec::GemmAttainable>,
}

fn judge_point(spec: Option<&GpuSpec>, d: GemmDtype, p: &GemmPoint) -> Judged {
    let peak = spec.and_then(|s| gemm_expected(s, d));
    let attainable = spec.and_then(|s| Attainable::embedded().gemm(s, d, p.m));
    let of_peak = peak.filter(|e| *e > 0.0).map(|e| p.tflops / e);
    let status = of_peak.map_or(Status::Pass, |r| {
        attainable_status(
            r,
            attainable.map(|a| a.fraction),
            (GENERIC_WARN, GENERIC_FAIL),
        )
    });
    Judged {
        status,
        of_peak,
        attainable,
    }
}

fn check_gemm(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let m = match group(ID, facts, &facts.measured.gemm) {
        Ok(m) => m,
        Err(f) => return f,
    };
    let hpc = policy.profile == Profile::Hpc;
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
        let mut unjudged = Vec::new();
        let mut any_peak = false;
        let mut evidence = Evidence::new();
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
            let j = judge_point(spec, r.dtype, p);
            parts.push(match j.of_peak {
                Some(x) => format!("{name} {} ({})", figure(p.tflops), percent(x)),
                None => format!("{name} {}", figure(p.tflops)),
            });
            let mut s = j.status;
            any_peak |= j.of_peak.is_some();
            if let Some(x) = j.of_peak {
                if j.attainable.is_none() {
                    unjudged.push(name);
                }
                if s != Status::Pass {
                    problems.push(match j.attainable {
                        Some(a) => format!(
                            "{name} at {} of the dense peak, {} of the {} healthy GPUs of this \
                             model reach (below {} warns, below {} fails)",
                            percent(x),
                            percent(x / a.fraction),
                            percent(a.fraction),
                            percent(ATTAINABLE_WARN),
                            percent(ATTAINABLE_FAIL)
                        ),
                        None => format!(
                            "{name} at {} of the dense peak (below {} warns, below {} fails)",
                            percent(x),
                            percent(GENERIC_WARN),
                            percent(GENERIC_FAIL)
                        ),
                    });
                    if hpc && r.dtype == GemmDtype::Fp64 && s == Status::Warn {
                        s = Status::Fail;
                        problems.push("fp64 is what --profile hpc needs: that fails".into());
                    }
                    fix.get_or_insert(
                        "Check power limit, clocks and throttle reasons (power.limit, \
                         clocks.throttle), cooling, and other processes on the GPU.",
                    );
                }
            }
            status = status.max(s);
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
                    "tflops": p.tflops,
                    "expected": spec.and_then(|s| gemm_expected(s, r.dtype)),
                    "size": p.m,
                    "attainable": j.attainable.map(|a| a.fraction),
                    "attainable_source": j.attainable.map(|a| a.source.as_str()),
                    "judged_against": match (j.of_peak, j.attainable) {
                        (None, _) => "the GPU's siblings only",
                        (Some(_), Some(_)) => "attainable fraction at this size",
                        (Some(_), None) => "generic floor of the dense peak",
                    },
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
        if hpc {
            if let Some(s) = spec {
                if let Some((n, how)) = fp64_rate(s).filter(|(n, _)| weak_fp64(*n)) {
                    status = Status::Fail;
                    problems.push(format!(
                        "the {} runs fp64 at 1/{n} of its fp32 rate ({how}): not a GPU for \
                         double precision, which --profile hpc needs",
                        s.name
                    ));
                    fix = Some(
                        "For double precision use a GPU whose fp64 runs at half its fp32 rate \
                         (A100, H100, H200, B200); this model is built for inference, \
                         graphics and lower precisions.",
                    );
                }
            }
            if !results.iter().any(|r| r.dtype == GemmDtype::Fp64) {
                problems.push(
                    "fp64 not measured (the quick audit measures bf16 only): run with --full \
                     to judge it"
                        .into(),
                );
            }
        }
        let judged_against = match spec {
            Some(_) if any_peak => " of the datasheet's dense peak".to_string(),
            Some(s) => format!(
                " (the spec database has no dense peak for the {}: judged against the other \
                 GPUs only)",
                s.name
            ),
            None => " (model not in the spec database: judged against the other GPUs only)".into(),
        };
        let mut msg = format!(
            "{who}: {size}x{size} GEMM TFLOPS {}{judged_against}",
            parts.join(", "),
        );
        if let (Some(s), false) = (spec, unjudged.is_empty()) {
            msg.push_str(&format!(
                "; no attainable figure known for the {} ({}) for {} at {size}x{size}: judged \
                 against the dense peak with the generic floor",
                s.name,
                s.architecture,
                unjudged.join(", ")
            ));
        }
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

/// Facts on which `profile` changes this check's verdict (checks/profiles.rs).
#[cfg(test)]
pub(crate) fn profile_examples() -> Vec<(Profile, Facts)> {
    use crate::facts::{GemmResult, OnGpu};
    use crate::testing::measured::gemm_point;
    use crate::testing::Machine;
    // fp64 at 85% of what H200s reach: a warning, a failure under hpc.
    let f = Machine::healthy("h200-sxm-141gb", 1)
        .measured(|m| {
            m.gemm = Reading::Value(vec![OnGpu::new(
                0,
                Reading::Value(vec![GemmResult {
                    dtype: GemmDtype::Fp64,
                    result: Reading::Value(gemm_point(67.0 * 0.84 * 0.85, true)),
                }]),
            )])
        })
        .build();
    vec![(Profile::Hpc, f)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::measured::*;
    use crate::testing::{gpu_status, Machine};

    fn one(d: GemmDtype, tflops: f64) -> GemmResult {
        GemmResult {
            dtype: d,
            result: Reading::Value(gemm_point(tflops, true)),
        }
    }

    /// One GPU of `key` with these GEMM results, judged under `profile`.
    fn judge(key: &str, results: Vec<GemmResult>, profile: Profile) -> Finding {
        let f = Machine::healthy(key, 1)
            .measured(|m| {
                m.gemm = Reading::Value(vec![OnGpu::new(0, Reading::Value(results))]);
            })
            .build();
        let policy = Policy {
            profile,
            ..Policy::default()
        };
        let mut out = (CHECK.run)(&f, &policy);
        assert_eq!(out.len(), 1, "{out:?}");
        out.remove(0)
    }

    fn at(size: u64, d: GemmDtype, tflops: f64) -> GemmResult {
        let mut p = gemm_point(tflops, true);
        (p.m, p.n, p.k) = (size, size, size);
        GemmResult {
            dtype: d,
            result: Reading::Value(p),
        }
    }

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
        assert!(!g0.message.contains("no attainable"), "{}", g0.message);
        assert_eq!(
            g0.evidence.get("bf16").and_then(|e| e.get("attainable")),
            Some(&serde_json::json!(0.81))
        );
        assert_eq!(
            g0.evidence
                .get("bf16")
                .and_then(|e| e.get("judged_against")),
            Some(&serde_json::json!("attainable fraction at this size"))
        );
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Fail);
        assert!(g1.message.contains("TF32"), "{}", g1.message);
    }

    /// Defect 11: a GPU 25% slow passed (it was above 60% of the dense peak). Against the
    /// 81% healthy H200s reach at 8192: 0.90 of that (72.9% of the peak) and 0.75 (60.75%).
    #[test]
    fn an_h200_is_judged_against_what_h200s_reach() {
        let peak = 989.5;
        let attainable = 0.81;
        let cases = [
            (attainable * 0.901, Status::Pass),
            (attainable * 0.899, Status::Warn),
            // 25% slow: at the failure floor, still a warning; a little slower fails.
            (attainable * 0.751, Status::Warn),
            (attainable * 0.749, Status::Fail),
        ];
        for (of_peak, want) in cases {
            let g = judge(
                "h200-sxm-141gb",
                vec![one(GemmDtype::Bf16, of_peak * peak)],
                Profile::General,
            );
            assert_eq!(g.status, want, "{of_peak}: {}", g.message);
        }
        let g = judge(
            "h200-sxm-141gb",
            vec![one(GemmDtype::Bf16, 0.62 * peak)],
            Profile::General,
        );
        assert!(
            g.message
                .contains("bf16 at 62% of the dense peak, 77% of the 81% healthy GPUs"),
            "{}",
            g.message
        );
        assert!(
            g.message.contains("below 90% warns, below 75% fails"),
            "{}",
            g.message
        );
        // Before: 0.62 of the peak passed the 0.60 floor.
        assert_eq!(g.status, Status::Warn);
    }

    /// Each dtype has its own attainable figure: fp16 reaches less than bf16.
    #[test]
    fn each_dtype_has_its_own_attainable_figure() {
        let fp16 = 0.77 * 989.5;
        let g = judge(
            "h200-sxm-141gb",
            vec![one(GemmDtype::Fp16, fp16 * 0.91)],
            Profile::General,
        );
        assert_eq!(g.status, Status::Pass, "{}", g.message);
        let g = judge(
            "h200-sxm-141gb",
            vec![one(GemmDtype::Fp16, fp16 * 0.89)],
            Profile::General,
        );
        assert_eq!(g.status, Status::Warn, "{}", g.message);
    }

    /// A size no figure was measured at (2048 on the H200): the generic floor, said so.
    #[test]
    fn a_size_without_a_figure_falls_back_to_the_generic_floor() {
        let peak = 989.5;
        for (of_peak, want) in [
            (GENERIC_WARN + 0.005, Status::Pass),
            (GENERIC_WARN - 0.005, Status::Warn),
            (GENERIC_FAIL + 0.005, Status::Warn),
            (GENERIC_FAIL - 0.005, Status::Fail),
        ] {
            let g = judge(
                "h200-sxm-141gb",
                vec![at(2048, GemmDtype::Bf16, of_peak * peak)],
                Profile::General,
            );
            assert_eq!(g.status, want, "{of_peak}: {}", g.message);
            assert!(
                g.message.contains(
                    "no attainable figure known for the NVIDIA H200 SXM 141GB (Hopper) for bf16 \
                     at 2048x2048: judged against the dense peak with the generic floor"
                ),
                "{}",
                g.message
            );
            assert_eq!(
                g.evidence.get("bf16").and_then(|e| e.get("judged_against")),
                Some(&serde_json::json!("generic floor of the dense peak"))
            );
        }
        // Another model without a measured figure: the same.
        let g = judge(
            "l40s",
            vec![one(GemmDtype::Bf16, 0.55 * 362.05)],
            Profile::General,
        );
        assert_eq!(g.status, Status::Warn, "{}", g.message);
        assert!(g.message.contains("(Ada Lovelace)"), "{}", g.message);
        assert!(
            g.message.contains("below 60% warns, below 45% fails"),
            "{}",
            g.message
        );
    }

    /// A published measurement (MAMF) sets the A100's figure.
    #[test]
    fn an_a100_is_judged_against_the_published_figure() {
        let g = judge(
            "a100-sxm4-80gb",
            vec![one(GemmDtype::Bf16, 0.86 * 0.89 * 312.0)],
            Profile::General,
        );
        assert_eq!(g.status, Status::Warn, "{}", g.message);
        let g = judge(
            "a100-sxm4-80gb",
            vec![one(GemmDtype::Bf16, 0.86 * 0.91 * 312.0)],
            Profile::General,
        );
        assert_eq!(g.status, Status::Pass, "{}", g.message);
    }

    /// Under hpc a low fp64 fails where it would warn; a failing one stays a failure, a
    /// good one passes.
    #[test]
    fn hpc_fails_a_low_fp64() {
        let fp64 = 0.84 * 67.0;
        for (share, general, hpc) in [
            (0.91, Status::Pass, Status::Pass),
            (0.85, Status::Warn, Status::Fail),
            (0.70, Status::Fail, Status::Fail),
        ] {
            let r = || vec![one(GemmDtype::Fp64, fp64 * share)];
            let g = judge("h200-sxm-141gb", r(), Profile::General);
            assert_eq!(g.status, general, "{share}: {}", g.message);
            let h = judge("h200-sxm-141gb", r(), Profile::Hpc);
            assert_eq!(h.status, hpc, "{share}: {}", h.message);
            if general == Status::Warn {
                assert!(h.message.contains("--profile hpc needs"), "{}", h.message);
            }
        }
        // A low bf16 is no concern of hpc's: it warns as before.
        let b = judge(
            "h200-sxm-141gb",
            vec![one(GemmDtype::Bf16, 0.81 * 0.85 * 989.5)],
            Profile::Hpc,
        );
        assert_eq!(b.status, Status::Warn, "{}", b.message);
        // The quick audit (bf16 only) says fp64 needs --full under hpc, and only there.
        assert!(b.message.contains("fp64 not measured"), "{}", b.message);
        let g = judge(
            "h200-sxm-141gb",
            vec![one(GemmDtype::Bf16, 800.0)],
            Profile::General,
        );
        assert!(!g.message.contains("fp64 not measured"), "{}", g.message);
    }

    /// A model with a weak fp64 unit fails under hpc, and says its rate.
    #[test]
    fn hpc_names_a_weak_fp64_unit() {
        for (key, n) in [
            ("l4", 64),
            ("l40s", 64),
            ("a10", 64),
            ("rtx-4090", 64),
            ("t4", 32),
        ] {
            let spec = crate::spec::SpecDb::embedded().by_key(key).expect("known");
            assert_eq!(fp64_rate(spec).map(|r| r.0), Some(n), "{key}");
            let d = if key == "t4" {
                GemmDtype::Fp16
            } else {
                GemmDtype::Bf16
            };
            let peak = spec.gemm_peak(d).expect("datasheet");
            let g = judge(key, vec![one(d, 0.7 * peak)], Profile::General);
            assert_eq!(g.status, Status::Pass, "{key}: {}", g.message);
            let h = judge(key, vec![one(d, 0.7 * peak)], Profile::Hpc);
            assert_eq!(h.status, Status::Fail, "{key}: {}", h.message);
            assert!(
                h.message
                    .contains(&format!("runs fp64 at 1/{n} of its fp32 rate")),
                "{}",
                h.message
            );
            assert!(
                h.fix.as_deref().unwrap_or("").contains("half its fp32"),
                "{key}"
            );
        }
        // Full-rate fp64 from the datasheet's own figures (34 against 67): no remark.
        let h200 = crate::spec::SpecDb::embedded()
            .by_key("h200-sxm-141gb")
            .expect("known");
        let (n, how) = fp64_rate(h200).expect("datasheet figures");
        assert_eq!(n, 2);
        assert!(how.contains("fp64 34.0 TFLOPS against fp32 67.0"), "{how}");
        let h = judge(
            "h200-sxm-141gb",
            vec![one(GemmDtype::Fp64, 57.0)],
            Profile::Hpc,
        );
        assert_eq!(h.status, Status::Pass, "{}", h.message);
        // B300: the datasheet's 1.25 against 75 is 1/60.
        let b300 = crate::spec::SpecDb::embedded()
            .by_key("b300")
            .expect("known");
        assert_eq!(fp64_rate(b300).map(|r| r.0), Some(60));
    }

    #[test]
    fn a_model_without_datasheet_tflops_is_judged_by_its_siblings() {
        let g = judge("a10g", vec![one(GemmDtype::Bf16, 60.0)], Profile::General);
        assert_eq!(g.status, Status::Pass);
        assert_eq!(
            g.evidence.get("bf16").and_then(|e| e.get("judged_against")),
            Some(&serde_json::json!("the GPU's siblings only"))
        );
        assert!(
            g.message.contains(
                "bf16 60.0 (the spec database has no dense peak for the NVIDIA A10G: judged \
                 against the other GPUs only)"
            ),
            "{}",
            g.message
        );
    }

    #[test]
    fn the_weak_fp64_floor_is_one_eighth() {
        // 1/8 itself is not weak; 1/9 is; full rate is not.
        assert!(!weak_fp64(8));
        assert!(weak_fp64(9));
        assert!(!weak_fp64(2));
        assert!(!weak_fp64(0));
    }

    #[test]
    fn siblings_and_unknown_models() {
        let mut f = Machine::healthy("h200-sxm-141gb", 3)
            .measured(|_| {})
            .build();
        f.measured.gemm = Reading::Value(
            [800.0, 800.0, 550.0]
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    OnGpu::new(
                        i as u32,
                        Reading::Value(vec![at(4096, GemmDtype::Bf16, *t)]),
                    )
                })
                .collect(),
        );
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(gpu_status(&out, 0), Status::Pass);
        // 56% of the peak (a generic warning) and 31% below its siblings: a failure.
        assert_eq!(gpu_status(&out, 2), Status::Fail);
        assert!(
            out[2].message.contains("31% below the median"),
            "{}",
            out[2].message
        );
    }

    #[test]
    fn explain_gives_the_thresholds_the_code_uses() {
        let what = CHECK.doc.what;
        for t in [ATTAINABLE_WARN, ATTAINABLE_FAIL, GENERIC_WARN, GENERIC_FAIL] {
            assert!(
                what.contains(&format!("below {}", percent(t))),
                "{t}: {what}"
            );
        }
        let h200 = crate::spec::SpecDb::embedded()
            .by_key("h200-sxm-141gb")
            .expect("known");
        let bf16 = Attainable::embedded()
            .gemm(h200, GemmDtype::Bf16, 8192)
            .expect("measured");
        let quick = Attainable::embedded()
            .gemm(h200, GemmDtype::Bf16, 4096)
            .expect("measured");
        assert_eq!(
            bf16.fraction, quick.fraction,
            "the text gives one figure for both"
        );
        assert!(what.contains(&format!(
            "H200 bf16 8192 and 4096: {}",
            percent(bf16.fraction)
        )));
        let hpc = CHECK.profiles[0].effect;
        assert!(hpc.contains(&format!("below {} of what", percent(ATTAINABLE_WARN))));
        assert!(hpc.contains(&format!("below {} of the dense", percent(GENERIC_WARN))));
        assert!(hpc.contains("below 1/8 of its fp32"));
        assert_eq!(WEAK_FP64_RATE, 1.0 / 8.0);
    }

    #[test]
    fn a_result_that_could_not_be_measured_skips_with_the_reason() {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .measured(|m| {
                m.gemm = Reading::Value(vec![OnGpu::new(
                    0,
                    Reading::Value(vec![GemmResult {
                        dtype: GemmDtype::Bf16,
                        result: Reading::unavailable("cuBLAS not found"),
                    }]),
                )]);
            })
            .build();
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out[0].status, Status::Skip);
        assert!(out[0].message.contains("bf16: cuBLAS not found"));
    }
}
