//! memory.bandwidth: measured device-memory bandwidth against the datasheet and the GPU's
//! siblings.

use crate::checks::judge::{
    attainable_status, below_siblings, failed_verifications, group, label, per_gpu, percent,
    spec_of, ATTAINABLE_FAIL, ATTAINABLE_WARN,
};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::Facts;
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::spec::Attainable;
use crate::units::{bytes, figure};

const ID: &str = "memory.bandwidth";

/// Where no attainable figure is known for the model: the share of the datasheet memory
/// bandwidth below which the device copy warns, and fails. HBM parts reach 0.85-0.92 of it
/// (H200: 0.89, data/attainable.toml), GDDR parts less; the floor sits below every healthy
/// part.
pub const GENERIC_WARN: f64 = 0.75;
pub const GENERIC_FAIL: f64 = 0.60;

pub const CHECK: Check = Check {
    id: ID,
    title: "measured device-memory bandwidth against the datasheet",
    looks_at: "measured device-memory bandwidth against what healthy GPUs of the model reach \
               (data/attainable.toml) or the datasheet",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "gpuaudit's own read, write, copy and triad kernels (16-byte accesses, several \
               loads in flight per thread, grid sized from the SM count, buffers several \
               times the L2) and the driver's device-to-device memcpy. Copies count bytes \
               read plus written. Every launch's output is checked, and only launches whose \
               output verified give a figure. The better of the copy kernels and memcpy, as a \
               share of the datasheet memory bandwidth, is held against the share healthy GPUs \
               of the model reach (data/attainable.toml; H200: 88%): below 90% of it warns, \
               below 75% fails. Without such a figure the generic floor applies and the \
               finding says so: below 75% of the datasheet warns, below 60% fails. A GPU \
               below 70% of its siblings fails; a copy whose data does not verify fails.",
        why: "Most of deep learning outside the big matrix multiplies (attention, \
              normalisation, optimiser steps, inference decoding) is limited by memory \
              bandwidth. A lower figure means memory clocks held down, a power cap, ECC \
              repair in progress, or a different (slower-memory) model than ordered.",
        verify: "# PyTorch: a 1 GiB copy on GPU 0, timed with CUDA events (it reads and writes: 2 x size)\n\
                 python3 -c 'import torch; a = torch.empty(1 << 30, dtype=torch.uint8, device=\"cuda\"); b = torch.empty_like(a); b.copy_(a); s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True); s.record(); b.copy_(a); e.record(); e.synchronize(); print(\"%.0f GB/s\" % (2 * a.numel() / s.elapsed_time(e) / 1e6))'\n\
                 nvidia-smi -q -d CLOCK   # the memory clock against its maximum",
        fix: "Check the memory clock and power limit (`nvidia-smi -q -d CLOCK,POWER`), pending \
              ECC page retirement or row remapping (reset the GPU when idle), and that the \
              model is the one ordered (gpu.identity). On a cloud instance, report the \
              figure to the provider.",
    },
    profiles: &[],
    run: check_memory,
};

fn check_memory(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let m = match group(ID, facts, &facts.measured.memory) {
        Ok(m) => m,
        Err(f) => return f,
    };
    let all: Vec<(u32, f64)> = m
        .iter()
        .filter_map(|g| Some((g.gpu, g.result.value()?.best_copy_gbps()?)))
        .collect();
    per_gpu(ID, policy, m, |gpu, b| {
        let who = label(facts, gpu);
        let bad = failed_verifications(&b.verify);
        let mut status = Status::Pass;
        let mut fix = None;
        let spec = spec_of(facts, gpu);
        let attainable = spec.and_then(|s| Attainable::embedded().memory(s));
        let mut msg;
        match b.best_copy_gbps() {
            Some(v) => {
                msg = format!(
                    "{who}: device copy {} GB/s (read + write, {} buffers)",
                    figure(v),
                    bytes(b.buffer_bytes)
                );
                if let Some((s, peak)) = spec.and_then(|s| Some((s, s.memory_bandwidth_gbps?))) {
                    let ratio = v / peak;
                    msg.push_str(&format!(
                        ", {} of the {} datasheet's {} GB/s",
                        percent(ratio),
                        s.name,
                        figure(peak)
                    ));
                    status = attainable_status(
                        ratio,
                        attainable.map(|a| a.fraction),
                        (GENERIC_WARN, GENERIC_FAIL),
                    );
                    match attainable {
                        Some(a) if status != Status::Pass => msg.push_str(&format!(
                            "; {} of the {} healthy GPUs of this model reach (below {} warns, \
                             below {} fails)",
                            percent(ratio / a.fraction),
                            percent(a.fraction),
                            percent(ATTAINABLE_WARN),
                            percent(ATTAINABLE_FAIL)
                        )),
                        Some(_) => {}
                        None => msg.push_str(&format!(
                            "; no attainable figure known for the {} ({}): judged against the \
                             datasheet with the generic floor (below {} warns, below {} fails)",
                            s.name,
                            s.architecture,
                            percent(GENERIC_WARN),
                            percent(GENERIC_FAIL)
                        )),
                    }
                    if status != Status::Pass {
                        fix = Some(
                            "Check the memory clock and power limit (`nvidia-smi -q -d \
                             CLOCK,POWER`), pending ECC retirement or row remapping, and that the \
                             model is the one ordered.",
                        );
                    }
                } else if let Some(s) = spec {
                    msg.push_str(&format!(
                        " (the spec database has no memory bandwidth for the {}: judged against \
                         the other GPUs only)",
                        s.name
                    ));
                } else {
                    msg.push_str(
                        " (model not in the spec database: judged against the other GPUs only)",
                    );
                }
                if let Some(med) = below_siblings(facts, gpu, v, &all) {
                    status = Status::Fail;
                    msg.push_str(&format!(
                        "; {:.0}% below the median of the same GPUs here ({} GB/s)",
                        (1.0 - v / med) * 100.0,
                        figure(med)
                    ));
                    fix.get_or_insert(
                        "Compare this GPU's clocks, power limit and ECC state with the others.",
                    );
                }
            }
            None => {
                // Every copy failed its check (or none ran): no figure is reported.
                status = Status::Fail;
                msg = format!(
                    "{who}: no device copy figure: no copy's output verified ({} buffers)",
                    bytes(b.buffer_bytes)
                );
            }
        }
        if !bad.is_empty() {
            status = Status::Fail;
            msg.push_str(&format!("; data check failed: {}", bad.join("; ")));
            fix = Some("Device memory returned wrong data: drain the GPU, check memory.errors, and have it replaced.");
        }
        if let Some(n) = &b.note {
            msg.push_str(&format!("; {n}"));
        }
        let mut f = Finding::new(ID, status, msg)
            .gpu(gpu)
            .with("copy_gbps", b.best_copy_gbps())
            .with("copy_kernel_gbps", b.copy_gbps)
            .with("memcpy_gbps", b.memcpy_gbps)
            .with("read_gbps", b.read_gbps)
            .with("write_gbps", b.write_gbps)
            .with("triad_gbps", b.triad_gbps)
            .with("buffer_bytes", b.buffer_bytes)
            .with("datasheet_gbps", spec.map(|s| s.memory_bandwidth_gbps))
            .with("attainable", attainable.map(|a| a.fraction))
            .with("attainable_source", attainable.map(|a| a.source.as_str()));
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
    use crate::testing::{gpu_status, Machine};

    #[test]
    fn memory_against_datasheet_and_siblings() {
        let mut f = Machine::healthy("h200-sxm-141gb", 3)
            .measured(|_| {})
            .build();
        let mut bad_data = membw(4300.0);
        bad_data.verify.push(Verify {
            what: "copy kernel".into(),
            ok: false,
            detail: Some("12 words differ".into()),
        });
        f.measured.memory = Reading::Value(vec![
            OnGpu::new(0, Reading::Value(membw(4300.0))),
            OnGpu::new(1, Reading::Value(membw(3300.0))),
            OnGpu::new(2, Reading::Value(bad_data)),
        ]);
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(gpu_status(&out, 0), Status::Pass);
        // 69% of 4800, 78% of the 88% healthy H200s reach: warn; not 30% below its siblings.
        assert_eq!(gpu_status(&out, 1), Status::Warn);
        assert_eq!(gpu_status(&out, 2), Status::Fail);
        assert!(
            out[0].message.contains("90% of the NVIDIA H200"),
            "{}",
            out[0].message
        );
        assert!(
            out[1]
                .message
                .contains("78% of the 88% healthy GPUs of this model reach"),
            "{}",
            out[1].message
        );
    }

    fn one(key: &str, b: MemoryBandwidth) -> Finding {
        let f = Machine::healthy(key, 1)
            .measured(|m| m.memory = Reading::Value(vec![OnGpu::new(0, Reading::Value(b))]))
            .build();
        let mut out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out.len(), 1);
        out.remove(0)
    }

    /// The H200 is held against the 88% of its datasheet healthy H200s reach: 0.90 of that
    /// (79.2% of the datasheet) warns, 0.75 (66%) fails. A GPU 12% slow (77% of the
    /// datasheet) passed the generic 75% floor.
    #[test]
    fn an_h200_is_judged_against_what_h200s_reach() {
        let copy = |share: f64| membw(4800.0 * 0.88 * share / 0.99);
        // membw's memcpy is 1% below the kernel: the kernel's figure counts.
        for (share, want) in [
            (0.901, Status::Pass),
            (0.899, Status::Warn),
            (0.751, Status::Warn),
            (0.749, Status::Fail),
        ] {
            let mut b = copy(share);
            b.copy_gbps = Some(4800.0 * 0.88 * share);
            let g = one("h200-sxm-141gb", b);
            assert_eq!(g.status, want, "{share}: {}", g.message);
        }
        let g = one("h200-sxm-141gb", membw(4800.0 * 0.88 * 0.88));
        assert_eq!(g.status, Status::Warn, "12% slow: {}", g.message);
    }

    /// A model without a measured figure: the generic floor, said so.
    #[test]
    fn a_model_without_a_figure_uses_the_generic_floor() {
        // L4: 300 GB/s datasheet.
        for (share, want) in [
            (GENERIC_WARN + 0.005, Status::Pass),
            (GENERIC_WARN - 0.005, Status::Warn),
            (GENERIC_FAIL + 0.005, Status::Warn),
            (GENERIC_FAIL - 0.005, Status::Fail),
        ] {
            let mut b = membw(300.0 * share);
            b.memcpy_gbps = None;
            let g = one("l4", b);
            assert_eq!(g.status, want, "{share}: {}", g.message);
            assert!(
                g.message.contains(
                    "no attainable figure known for the NVIDIA L4 (Ada Lovelace): judged \
                     against the datasheet with the generic floor (below 75% warns, below 60% \
                     fails)"
                ),
                "{}",
                g.message
            );
        }
    }

    /// Defect 12: no verified copy, no figure; a failed check fails and names the kernel.
    #[test]
    fn only_verified_copies_give_a_figure() {
        let mut b = membw(4300.0);
        b.copy_gbps = None;
        b.memcpy_gbps = None;
        b.verify = vec![
            Verify {
                what: "copy_cs kernel: destination compared with the pattern".into(),
                ok: false,
                detail: Some("264x256: 12 words differ".into()),
            },
            Verify {
                what: "cuMemcpyDtoD: destination compared with the pattern".into(),
                ok: false,
                detail: Some("3 words differ".into()),
            },
        ];
        let g = one("h200-sxm-141gb", b);
        assert_eq!(g.status, Status::Fail);
        assert!(g.message.contains("no device copy figure"), "{}", g.message);
        assert!(g.message.contains("copy_cs kernel"), "{}", g.message);
        assert_eq!(g.evidence.get("copy_gbps"), Some(&serde_json::Value::Null));
        // The kernel failed but memcpy verified: memcpy's figure, and the failure.
        let mut b = membw(4300.0);
        b.copy_gbps = None;
        b.memcpy_gbps = Some(4290.0);
        b.verify = vec![Verify {
            what: "copy kernel: destination compared with the pattern".into(),
            ok: false,
            detail: None,
        }];
        let g = one("h200-sxm-141gb", b);
        assert_eq!(g.status, Status::Fail);
        assert!(g.message.contains("device copy 4290 GB/s"), "{}", g.message);
    }

    #[test]
    fn a_model_without_a_datasheet_bandwidth_is_judged_by_its_siblings() {
        let g = one("a10g", membw(500.0));
        assert_eq!(g.status, Status::Pass);
        assert!(
            g.message
                .contains("the spec database has no memory bandwidth for the NVIDIA A10G"),
            "{}",
            g.message
        );
    }

    #[test]
    fn explain_gives_the_thresholds_the_code_uses() {
        let what = CHECK.doc.what;
        assert!(
            what.contains(&format!(
                "below {} of it warns, below {} fails",
                percent(ATTAINABLE_WARN),
                percent(ATTAINABLE_FAIL)
            )),
            "{what}"
        );
        assert!(what.contains(&format!(
            "below {} of the datasheet warns",
            percent(GENERIC_WARN)
        )));
        assert!(what.contains(&format!("below {} fails. A GPU", percent(GENERIC_FAIL))));
        let h200 = crate::spec::SpecDb::embedded()
            .by_key("h200-sxm-141gb")
            .expect("known");
        let copy = Attainable::embedded().memory(h200).expect("measured");
        assert!(what.contains(&format!("H200: {}", percent(copy.fraction))));
    }

    #[test]
    fn unknown_model_is_judged_by_siblings_only() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        if let Reading::Value(g) = &mut f.gpus {
            for x in g.iter_mut() {
                x.pci_device_id = Reading::Value(0xFFFF);
                x.name = Reading::Value("NVIDIA Mystery".into());
            }
        }
        f.measured.memory = Reading::Value(vec![
            OnGpu::new(0, Reading::Value(membw(1000.0))),
            OnGpu::new(1, Reading::Value(membw(600.0))),
        ]);
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(gpu_status(&out, 0), Status::Pass);
        assert_eq!(gpu_status(&out, 1), Status::Fail, "{}", out[1].message);
        assert!(out[1].message.contains("40% below"), "{}", out[1].message);
    }

    #[test]
    fn busy_gpu_keeps_its_reason_per_gpu() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        f.measured.memory = Reading::Value(vec![
            OnGpu::new(0, Reading::Value(membw(4300.0))),
            OnGpu::new(
                1,
                Reading::unavailable(
                    "GPU 1 busy (2 processes running on it); --force to measure anyway",
                ),
            ),
        ]);
        let out = (CHECK.run)(&f, &Policy::default());
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Skip);
        assert!(g1.message.contains("--force"));
    }
}
