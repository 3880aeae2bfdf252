//! memory.bandwidth: measured device-memory bandwidth against the datasheet and the GPU's
//! siblings.

use crate::checks::judge::{
    below_siblings, failed_verifications, group, label, per_gpu, rate_status, spec_of,
};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::Facts;
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::units::{bytes, figure};

const ID: &str = "memory.bandwidth";

/// Device copy (read + write) against the datasheet memory bandwidth: 85-92% is what HBM
/// parts reach (H200: 4.3 of 4.8 TB/s).
pub const WARN: f64 = 0.75;
pub const FAIL: f64 = 0.60;

pub const CHECK: Check = Check {
    id: ID,
    title: "measured device-memory bandwidth against the datasheet",
    looks_at: "measured device-memory bandwidth against the datasheet",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "gpuaudit's own read, write, copy and triad kernels (16-byte accesses, several \
               loads in flight per thread, grid sized from the SM count, buffers several \
               times the L2) and the driver's device-to-device memcpy. Copies count bytes \
               read plus written. The better of the copy kernel and memcpy is compared with \
               the datasheet memory bandwidth: below 75% warns, below 60% fails; a GPU \
               below 70% of its siblings fails; a copy whose data does not verify fails.",
        why: "Most of deep learning outside the big matrix multiplies (attention, \
              normalisation, optimiser steps, inference decoding) is limited by memory \
              bandwidth. A lower figure means memory clocks held down, a power cap, ECC \
              repair in progress, or a different (slower-memory) model than ordered.",
        verify:
            "PyTorch: a=torch.empty(4<<30,dtype=torch.uint8,device='cuda'); b=torch.empty_like(a); \
                 time b.copy_(a) with torch.cuda.Event; bandwidth = 2*size/time. \
                 nvidia-smi -q -d CLOCK (memory clock against its maximum).",
        fix: "Check the memory clock and power limit (nvidia-smi -q -d CLOCK,POWER), pending \
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
        .filter_map(|g| Some((g.gpu, g.result.value()?.best_copy_gbps())))
        .collect();
    per_gpu(ID, policy, m, |gpu, b| {
        let who = label(facts, gpu);
        let v = b.best_copy_gbps();
        let mut status = Status::Pass;
        let mut fix = None;
        let mut msg = format!(
            "{who}: device copy {} GB/s (read + write, {} buffers)",
            figure(v),
            bytes(b.buffer_bytes)
        );
        let spec = spec_of(facts, gpu);
        if let Some((s, peak)) = spec.and_then(|s| Some((s, s.memory_bandwidth_gbps?))) {
            let ratio = v / peak;
            msg.push_str(&format!(
                ", {:.0}% of the {} datasheet's {} GB/s",
                ratio * 100.0,
                s.name,
                figure(peak)
            ));
            status = rate_status(ratio, WARN, FAIL);
            if status != Status::Pass {
                fix = Some(
                    "Check the memory clock and power limit (nvidia-smi -q -d CLOCK,POWER), \
                     pending ECC retirement or row remapping, and that the model is the one \
                     ordered.",
                );
            }
        } else {
            msg.push_str(" (model not in the spec database: judged against the other GPUs only)");
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
        let bad = failed_verifications(&b.verify);
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
            .with("copy_gbps", v)
            .with("copy_kernel_gbps", b.copy_gbps)
            .with("memcpy_gbps", b.memcpy_gbps)
            .with("read_gbps", b.read_gbps)
            .with("write_gbps", b.write_gbps)
            .with("triad_gbps", b.triad_gbps)
            .with("buffer_bytes", b.buffer_bytes)
            .with("datasheet_gbps", spec.map(|s| s.memory_bandwidth_gbps));
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
        // 69% of 4800: warn; not 30% below its siblings.
        assert_eq!(gpu_status(&out, 1), Status::Warn);
        assert_eq!(gpu_status(&out, 2), Status::Fail);
        assert!(
            out[0].message.contains("90% of the NVIDIA H200"),
            "{}",
            out[0].message
        );
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
