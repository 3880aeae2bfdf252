//! pcie.bandwidth: measured host<->device copies against the PCIe link, the link under load
//! and the GPU's siblings.

use crate::checks::common::plural;
use crate::checks::judge::percent;
use crate::checks::judge::{
    below_siblings, failed_verifications, group, label, pcie_expected, per_gpu, rate_status,
    SIBLING_FLOOR,
};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Direction, Facts, HostMemory};
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::units::{bytes, figure};

const ID: &str = "pcie.bandwidth";

/// Pinned host copies against the link's theoretical one-direction rate: PCIe protocol
/// overhead (TLP headers, flow control) leaves about 80-90% usable; 55 GB/s on a Gen5 x16
/// link (63 GB/s) is normal.
pub const WARN: f64 = 0.70;
pub const FAIL: f64 = 0.50;
/// NVML samples (50 ms apart) that must all have seen a lower PCIe generation during the
/// copies before it fails (fewer only warn: the generation drops whenever the link idles).
pub const LINK_SAMPLES_FOR_FAIL: u32 = 20;
/// Both directions at once (--full): PCIe is full duplex (each direction has its own lanes),
/// so each direction should keep most of its one-way rate; the other direction's
/// acknowledgements and flow-control updates share the lanes, and root complexes differ in
/// how much DMA they carry both ways. The slower direction below 60% of the link's
/// one-direction rate warns (never fails). Provisional: set from engineering judgment, to be
/// checked against the next H200 run (BENCHMARKS.md).
pub const BIDIR_WARN: f64 = 0.60;
/// SM-driven copies (a kernel on mapped pinned host memory) below this share of the copy
/// engines' figure are named in the message (information: applications that copy with
/// kernels, such as NCCL's proxy-less paths and zero-copy loaders, see the lower figure).
pub const SM_COPY_NOTE: f64 = 0.80;

pub const CHECK: Check = Check {
    id: ID,
    title: "measured host<->device copy bandwidth against the PCIe link",
    looks_at: "measured pinned and pageable host↔device bandwidth against the link's theoretical \
               rate",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "Copies between host and GPU, pinned and pageable, both directions (one size in \
               the quick audit, 4 KiB to 1 GiB with --full), timed with CUDA events, data \
               verified; then pinned copies on every GPU at once. The pinned figure at the \
               largest size is compared with the link's theoretical one-direction rate \
               (generation x width): below 70% warns, below 50% fails; a GPU below 70% of \
               its siblings fails; a link that trained below its maximum while the copies \
               ran fails (a lower generation seen in fewer than 20 samples warns: links \
               drop their generation when idle); a GPU losing more than 30% when all copy \
               at once shares an upstream link (warn). With --full, both directions at once \
               (two streams): the slower direction below 60% of the link's one-direction \
               rate warns; SM-driven copies through mapped host memory below 80% of the \
               copy engines' are named; the host<->device latency is reported.",
        why: "Every batch a GPU trains on and every result it returns crosses this link. A \
              card in a x8 slot, a link stuck at Gen3, a PCIe switch shared by several GPUs \
              or a noisy riser halves data loading and checkpointing, and slows multi-GPU \
              jobs that fall back to host copies.",
        verify: "nvidia-smi -q | grep -A4 'Link Width'\n\
                 sudo lspci -vv -s BUS_ID | grep LnkSta   # BUS_ID as `lspci -D -d 10de:` lists it\n\
                 # PyTorch: a pinned 1 GiB host buffer copied to GPU 0, timed with CUDA events\n\
                 python3 -c 'import torch; x = torch.empty(1 << 30, dtype=torch.uint8).pin_memory(); x.cuda(); a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True); a.record(); x.cuda(non_blocking=True); b.record(); b.synchronize(); print(\"host to GPU %.1f GB/s\" % (x.numel() / a.elapsed_time(b) / 1e6))'",
        fix: "Reseat the card or move it to a x16 slot wired to the CPU; check BIOS PCIe \
              settings (generation, bifurcation); replace a riser that lowers the rate. On \
              a cloud instance, ask for a host where the GPU has its own x16 link. Use \
              pinned memory (pin_memory=True) for host->GPU copies.",
    },
    profiles: &[],
    run: check_pcie,
};

fn check_pcie(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let p = match group(ID, facts, &facts.measured.pcie) {
        Ok(p) => p,
        Err(f) => return f,
    };
    let pinned = |dir: Direction| -> Vec<(u32, f64)> {
        p.per_gpu
            .iter()
            .filter_map(|g| {
                let v = g.result.value()?.largest(dir, HostMemory::Pinned)?;
                Some((g.gpu, v.gbps))
            })
            .collect()
    };
    let (all_h2d, all_d2h) = (pinned(Direction::H2d), pinned(Direction::D2h));
    let concurrent = |gpu: u32, dir: Direction| -> Option<f64> {
        p.all_at_once
            .value()?
            .iter()
            .find(|c| c.direction == dir)?
            .per_gpu
            .iter()
            .find(|v| v.gpu == gpu)
            .map(|v| v.value)
    };
    per_gpu(ID, policy, &p.per_gpu, |gpu, g| {
        let who = label(facts, gpu);
        let (Some(h2d), Some(d2h)) = (
            g.largest(Direction::H2d, HostMemory::Pinned),
            g.largest(Direction::D2h, HostMemory::Pinned),
        ) else {
            return Finding::skip(ID, format!("{who}: no pinned copy was measured")).gpu(gpu);
        };
        let worst = h2d.gbps.min(d2h.gbps);
        let mut status = Status::Pass;
        let mut notes: Vec<String> = Vec::new();
        let mut fix = None;
        let expected = pcie_expected(facts, gpu);
        let mut msg = format!(
            "{who}: pinned host->GPU {} GB/s, GPU->host {} GB/s ({})",
            figure(h2d.gbps),
            figure(d2h.gbps),
            bytes(h2d.size_bytes)
        );
        if let Some((rate, gen, width)) = expected {
            let ratio = worst / rate;
            msg.push_str(&format!(
                ", {} of the Gen{gen} x{width} link's {} GB/s",
                percent(ratio),
                figure(rate)
            ));
            let s = rate_status(ratio, WARN, FAIL);
            if s != Status::Pass {
                fix = Some(
                    "Check the slot and link (pcie.link), risers and BIOS PCIe settings; use \
                     pinned memory; on a cloud instance ask for a host where the GPU has its \
                     own x16 link.",
                );
            }
            status = status.max(s);
            if let Reading::Value(l) = &g.link_under_load {
                // Width holds at idle, so a narrower link fails outright; the generation drops
                // between copies, so a lower one fails only when enough samples saw it.
                let narrow = l.width < width;
                let slow = l.gen < gen;
                if narrow || slow {
                    let sure = narrow || l.samples >= LINK_SAMPLES_FOR_FAIL;
                    status = status.max(if sure { Status::Fail } else { Status::Warn });
                    notes.push(format!(
                        "the link ran at Gen{} x{} during the copies ({}); it supports \
                         Gen{gen} x{width}",
                        l.gen,
                        l.width,
                        plural(l.samples as usize, "NVML sample", "NVML samples")
                    ));
                    fix = Some(
                        "Reseat the card or move it to a slot that trains at full width and \
                         generation; replace a riser that lowers the rate; check BIOS PCIe \
                         settings.",
                    );
                }
            }
        } else {
            msg.push_str(" (link rate unknown: judged against the other GPUs only)");
        }
        for (dir, v, all) in [
            (Direction::H2d, h2d.gbps, &all_h2d),
            (Direction::D2h, d2h.gbps, &all_d2h),
        ] {
            if let Some(med) = below_siblings(facts, gpu, v, all) {
                status = Status::Fail;
                notes.push(format!(
                    "{} is {:.0}% below the median of the same GPUs here ({} GB/s)",
                    dir.label(),
                    (1.0 - v / med) * 100.0,
                    figure(med)
                ));
                fix.get_or_insert(
                    "Compare this GPU's slot and link with the others (pcie.link, nvidia-smi \
                     topo -m): a shared switch, a x8 slot or a riser.",
                );
            }
        }
        if let Some(c) = concurrent(gpu, Direction::H2d) {
            if c < SIBLING_FLOOR * h2d.gbps {
                status = status.max(Status::Warn);
                notes.push(format!(
                    "with every GPU copying at once it gets {} GB/s ({:.0}% less): an upstream \
                     link is shared",
                    figure(c),
                    (1.0 - c / h2d.gbps) * 100.0
                ));
            }
        }
        if let (Reading::Value(b), Some((rate, _, _))) = (&g.bidirectional, expected) {
            let slower = b.h2d_gbps.min(b.d2h_gbps);
            if slower < BIDIR_WARN * rate {
                status = status.max(Status::Warn);
                notes.push(format!(
                    "with both directions at once (h2d {} GB/s, d2h {} GB/s) the slower gets \
                     {} of the link's one-direction rate, below {}: the link or the root \
                     complex does not carry both ways at full rate",
                    figure(b.h2d_gbps),
                    figure(b.d2h_gbps),
                    percent(slower / rate),
                    percent(BIDIR_WARN)
                ));
                fix.get_or_insert(
                    "Check the root complex and IOMMU settings (BIOS, iommu=pt) and whether \
                     the GPU's link is behind a switch shared with other devices.",
                );
            }
        }
        if let Reading::Value(c) = &g.sm_copy {
            let sm = c.h2d_gbps.min(c.d2h_gbps);
            if sm < SM_COPY_NOTE * worst {
                notes.push(format!(
                    "copies made by the SMs through mapped host memory reach h2d {} GB/s, \
                     d2h {} GB/s ({:.0}% below the copy engines')",
                    figure(c.h2d_gbps),
                    figure(c.d2h_gbps),
                    (1.0 - sm / worst) * 100.0
                ));
            }
        }
        let bad = failed_verifications(&g.verify);
        if !bad.is_empty() {
            status = Status::Fail;
            notes.push(format!("copied data differs: {}", bad.join("; ")));
            fix =
                Some("Data corrupted in transfer: drain the machine and report the GPU and slot.");
        }
        if !notes.is_empty() {
            msg.push_str("; ");
            msg.push_str(&notes.join("; "));
        }
        let mut f = Finding::new(ID, status, msg)
            .gpu(gpu)
            .with("h2d_pinned_gbps", h2d.gbps)
            .with("d2h_pinned_gbps", d2h.gbps)
            .with("size_bytes", h2d.size_bytes)
            .with(
                "h2d_pageable_gbps",
                g.largest(Direction::H2d, HostMemory::Pageable)
                    .map(|p| p.gbps),
            )
            .with(
                "d2h_pageable_gbps",
                g.largest(Direction::D2h, HostMemory::Pageable)
                    .map(|p| p.gbps),
            )
            .with("link_gbps", expected.map(|e| e.0))
            .with("link_under_load", &g.link_under_load)
            .with("all_gpus_h2d_gbps", concurrent(gpu, Direction::H2d))
            .with("bidirectional", &g.bidirectional)
            .with("sm_copy", &g.sm_copy)
            .with("latency", &g.latency);
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
    use crate::units::GIB;

    #[test]
    fn pcie_judged_against_the_link_and_siblings() {
        let mut f = Machine::healthy("h200-sxm-141gb", 3)
            .measured(|_| {})
            .build();
        let mut low_link = pcie_gpu(55.0, 55.0);
        low_link.link_under_load = Reading::Value(PcieLinkState {
            gen: 4,
            width: 16,
            samples: 40,
        });
        f.measured.pcie = Reading::Value(PcieBandwidth {
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(pcie_gpu(55.4, 55.3))),
                OnGpu::new(1, Reading::Value(pcie_gpu(27.0, 27.0))),
                OnGpu::new(2, Reading::Value(low_link)),
            ],
            all_at_once: Reading::Value(vec![ConcurrentCopy {
                direction: Direction::H2d,
                size_bytes: GIB,
                per_gpu: vec![GpuValue {
                    gpu: 0,
                    value: 30.0,
                }],
                total_gbps: 30.0,
            }]),
        });
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out.len(), 3);
        // GPU 0: 88% of 63 GB/s, but it shares its upstream link with another GPU.
        let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
        assert_eq!(g0.status, Status::Warn, "{}", g0.message);
        assert!(g0.message.contains("88%"), "{}", g0.message);
        assert!(g0.message.contains("shared"), "{}", g0.message);
        // GPU 1: 43% of the link and half its siblings.
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Fail);
        assert!(g1.message.contains("below the median"), "{}", g1.message);
        // GPU 2: fast enough, but the link trained at Gen4 under load.
        let g2 = out.iter().find(|x| x.gpu == Some(2)).unwrap();
        assert_eq!(g2.status, Status::Fail);
        assert!(g2.message.contains("Gen4 x16"), "{}", g2.message);
        // A lower generation seen in a few samples only (the link idles between copies)
        // warns; a narrower link fails at once.
        let mut few = pcie_gpu(55.0, 55.0);
        few.link_under_load = Reading::Value(PcieLinkState {
            gen: 1,
            width: 16,
            samples: 3,
        });
        let mut narrow = pcie_gpu(55.0, 55.0);
        narrow.link_under_load = Reading::Value(PcieLinkState {
            gen: 5,
            width: 8,
            samples: 3,
        });
        f.measured.pcie = Reading::Value(PcieBandwidth {
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(few)),
                OnGpu::new(1, Reading::Value(narrow)),
            ],
            all_at_once: Reading::unavailable("x"),
        });
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(gpu_status(&out, 0), Status::Warn);
        assert_eq!(gpu_status(&out, 1), Status::Fail);
    }

    fn one(g: PcieGpu) -> Finding {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .measured(|m| {
                m.pcie = Reading::Value(PcieBandwidth {
                    per_gpu: vec![OnGpu::new(0, Reading::Value(g))],
                    all_at_once: Reading::unavailable("one GPU"),
                })
            })
            .build();
        (CHECK.run)(&f, &Policy::default()).remove(0)
    }

    fn bidir(h2d: f64, d2h: f64) -> Reading<BidirectionalCopy> {
        Reading::Value(BidirectionalCopy {
            size_bytes: 256 << 20,
            h2d_gbps: h2d,
            d2h_gbps: d2h,
            total_gbps: h2d + d2h,
        })
    }

    /// Gen5 x16 is 63.015 GB/s one way: the slower direction of the two at once below 60%
    /// (37.8) warns, never fails.
    #[test]
    fn both_directions_at_once_judged_against_the_link() {
        let link = 63.015;
        for (share, want) in [
            (BIDIR_WARN + 0.005, Status::Pass),
            (BIDIR_WARN - 0.005, Status::Warn),
            (0.1, Status::Warn),
        ] {
            for (h, d) in [(link * share, 50.0), (50.0, link * share)] {
                let mut g = pcie_gpu(55.0, 55.0);
                g.bidirectional = bidir(h, d);
                let out = one(g);
                assert_eq!(out.status, want, "{share}: {}", out.message);
                assert_eq!(
                    out.message.contains("both directions at once"),
                    want == Status::Warn,
                    "{}",
                    out.message
                );
            }
        }
        // Not measured (quick audit): no judgment.
        assert_eq!(one(pcie_gpu(55.0, 55.0)).status, Status::Pass);
    }

    #[test]
    fn sm_copies_are_named_where_they_differ_from_the_copy_engines() {
        let with_sm = |h2d: f64, d2h: f64| {
            let mut g = pcie_gpu(55.0, 50.0);
            g.sm_copy = Reading::Value(SmHostCopy {
                size_bytes: 256 << 20,
                h2d_gbps: h2d,
                d2h_gbps: d2h,
                kernel: "copy 528x512".into(),
            });
            one(g)
        };
        // Against the slower copy-engine direction (50): 80% is 40.
        let near = with_sm(40.5, 52.0);
        assert_eq!(near.status, Status::Pass);
        assert!(!near.message.contains("SMs"), "{}", near.message);
        let low = with_sm(52.0, 39.5);
        assert_eq!(low.status, Status::Pass, "information only");
        assert!(low.message.contains("SMs"), "{}", low.message);
        assert!(low.message.contains("21% below"), "{}", low.message);
    }

    /// Gen5 x16 is 63.0 GB/s one way: 70% (44.1) warns, 50% (31.5) fails; the slower
    /// direction counts.
    #[test]
    fn thresholds_on_both_sides() {
        let link = 63.015;
        for (share, want) in [
            (WARN + 0.005, Status::Pass),
            (WARN - 0.005, Status::Warn),
            (FAIL + 0.005, Status::Warn),
            (FAIL - 0.005, Status::Fail),
        ] {
            let g = one(pcie_gpu(55.0, link * share));
            assert_eq!(g.status, want, "{share}: {}", g.message);
            let g = one(pcie_gpu(link * share, 55.0));
            assert_eq!(g.status, want, "{share}: {}", g.message);
        }
        // A lower generation: 20 samples fail, 19 warn.
        for (samples, want) in [
            (LINK_SAMPLES_FOR_FAIL, Status::Fail),
            (LINK_SAMPLES_FOR_FAIL - 1, Status::Warn),
        ] {
            let mut g = pcie_gpu(55.0, 55.0);
            g.link_under_load = Reading::Value(PcieLinkState {
                gen: 4,
                width: 16,
                samples,
            });
            assert_eq!(one(g).status, want, "{samples}");
        }
        let mut g = pcie_gpu(55.0, 55.0);
        g.link_under_load = Reading::Value(PcieLinkState {
            gen: 4,
            width: 16,
            samples: 1,
        });
        let f = one(g);
        assert!(f.message.contains("(1 NVML sample)"), "{}", f.message);
        // Copied data that differs fails.
        let mut g = pcie_gpu(55.0, 55.0);
        g.verify[0].ok = false;
        assert_eq!(one(g).status, Status::Fail);
    }

    /// With every GPU copying at once, a GPU below 70% of its own figure shares a link.
    #[test]
    fn a_shared_upstream_link_warns() {
        let judged = |all: f64| {
            let f = Machine::healthy("h200-sxm-141gb", 2)
                .measured(|m| {
                    m.pcie = Reading::Value(PcieBandwidth {
                        per_gpu: vec![
                            OnGpu::new(0, Reading::Value(pcie_gpu(50.0, 50.0))),
                            OnGpu::new(1, Reading::Value(pcie_gpu(50.0, 50.0))),
                        ],
                        all_at_once: Reading::Value(vec![ConcurrentCopy {
                            direction: Direction::H2d,
                            size_bytes: GIB,
                            per_gpu: vec![GpuValue { gpu: 0, value: all }],
                            total_gbps: all,
                        }]),
                    })
                })
                .build();
            gpu_status(&(CHECK.run)(&f, &Policy::default()), 0)
        };
        assert_eq!(judged(35.5), Status::Pass);
        assert_eq!(judged(34.5), Status::Warn);
    }

    #[test]
    fn explain_gives_the_thresholds_the_code_uses() {
        let what = CHECK.doc.what;
        assert!(
            what.contains(&format!(
                "slower direction below {} of the link's one-direction rate warns",
                percent(BIDIR_WARN)
            )),
            "{what}"
        );
        assert!(
            what.contains(&format!(
                "below {} of the copy engines' are named",
                percent(SM_COPY_NOTE)
            )),
            "{what}"
        );
        assert!(
            what.contains(&format!("below {} warns", percent(WARN))),
            "{what}"
        );
        assert!(
            what.contains(&format!("below {} fails", percent(FAIL))),
            "{what}"
        );
        assert!(
            what.contains(&format!("below {} of its siblings", percent(SIBLING_FLOOR))),
            "{what}"
        );
        assert!(
            what.contains(&format!("fewer than {LINK_SAMPLES_FOR_FAIL} samples")),
            "{what}"
        );
        assert!(
            what.contains(&format!(
                "more than {} when all copy",
                percent(1.0 - SIBLING_FLOOR)
            )),
            "{what}"
        );
    }
}
