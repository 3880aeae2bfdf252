//! p2p.bandwidth: measured GPU<->GPU copies against the link between each pair and the other
//! pairs over the same kind of link.

use crate::checks::judge::{group, label, p2p_expected, percent, rate_status, SIBLING_FLOOR};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{median, Facts, PatternKind};
use crate::finding::{Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;
use crate::units::figure;

const ID: &str = "p2p.bandwidth";

/// One direction against the link (NVLink: half the datasheet's bidirectional figure, scaled
/// by the links between the pair; else the PCIe rate).
pub const WARN: f64 = 0.60;
pub const FAIL: f64 = 0.35;
/// Back-to-back 4-byte copies slower than this (microseconds each) warn; the H200s here take
/// about 6 us over NVLink.
pub const LATENCY_WARN_US: f64 = 100.0;
/// One GPU to all the others (or all to one) at once, against the fastest single pair of the
/// pattern: the copies share the one GPU's links, which one pair over NVSwitch already fills,
/// so spreading them over several peers must not lose more than a tenth (nvbandwidth's
/// one_to_all / all_to_one figures on NVSwitch systems sit at the single-pair rate). Below
/// warns: a fabric, switch or shared PCIe upstream that does not carry the copies at once.
pub const PATTERN_WARN: f64 = 0.90;

pub const CHECK: Check = Check {
    id: ID,
    title: "measured GPU<->GPU bandwidth and latency against the link",
    looks_at: "measured GPU↔GPU bandwidth and latency matrix against the link type",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "For every ordered pair of GPUs: whether peer access is possible, a 1 GiB copy \
               (256 MiB in the quick audit), both directions at once, and back-to-back \
               4-byte copies (latency); data verified. One direction is compared with the \
               link: NVLink (half the datasheet's bidirectional figure, scaled by the \
               links between the pair) or PCIe: below 60% warns, below 35% fails; a pair \
               below 70% of the median of the pairs over the same kind of link fails; no \
               peer access between NVLink-connected GPUs fails (warns over PCIe); 4-byte \
               copies slower than 100 us each warn. With --full, one GPU to all the others \
               and all to one at once (copy engines): the aggregate below 90% of the \
               pattern's fastest single pair warns, a pattern that could not be measured \
               warns, one whose data differs fails.",
        why: "Tensor and pipeline parallelism and NCCL move activations and gradients \
              between GPUs constantly. Without peer access copies go through host memory; \
              a missing NVLink halves or worse every collective.",
        verify: "nvidia-smi topo -m\nnvidia-smi nvlink -s\n\
                 # PyTorch: can GPU 0 reach GPU 1 directly, and a 1 GiB copy from GPU 0 to GPU 1, timed\n\
                 python3 -c 'import torch; print(\"peer access:\", torch.cuda.can_device_access_peer(0, 1)); a = torch.empty(1 << 30, dtype=torch.uint8, device=\"cuda:0\"); b = torch.empty_like(a, device=\"cuda:1\"); b.copy_(a); s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True); s.record(); b.copy_(a); e.record(); torch.cuda.synchronize(0); torch.cuda.synchronize(1); print(\"GPU 0 to 1 %.1f GB/s\" % (a.numel() / s.elapsed_time(e) / 1e6))'",
        fix: "Check NVLink state (nvlink.status) and the fabric manager on NVSwitch \
              systems; in a VM, ask for peer-to-peer to be enabled (PCIe ACS / IOMMU \
              settings, the hypervisor's P2P support).",
    },
    profiles: &[ProfileEffect {
        profile: Profile::Train,
        effect: "A pair below 60% of its link, small copies slower than 100 us, and no peer \
                 access over PCIe fail instead of warning, and the finding says so: tensor and \
                 pipeline parallelism move activations between the GPUs every step.",
    }],
    run: check_p2p,
};

/// A warning about the link's performance fails under `--profile train`; `escalated` records
/// that it did.
fn for_profile(s: Status, train: bool, escalated: &mut bool) -> Status {
    if train && s == Status::Warn {
        *escalated = true;
        Status::Fail
    } else {
        s
    }
}

fn check_p2p(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let train = policy.profile == Profile::Train;
    let p = match group(ID, facts, &facts.measured.p2p) {
        Ok(p) => p,
        Err(f) => return f,
    };
    // Pairs over the same kind of link are siblings.
    let kind = |a: u32, b: u32| p2p_expected(facts, a, b).map(|e| e.1).unwrap_or_default();
    let values: Vec<(u32, u32, f64)> = p
        .pairs
        .iter()
        .filter_map(|x| Some((x.src, x.dst, *x.gbps.value()?)))
        .collect();
    let mut out = Vec::new();
    for &src in &p.gpus {
        if !policy.selects(src) {
            continue;
        }
        let who = label(facts, src);
        let mine: Vec<_> = p.pairs.iter().filter(|x| x.src == src).collect();
        if mine.is_empty() {
            continue;
        }
        let mut status = Status::Pass;
        let mut parts = Vec::new();
        let mut problems = Vec::new();
        let mut evidence = Vec::new();
        let mut fix = None;
        let mut escalated = false;
        for x in &mine {
            let exp = p2p_expected(facts, x.src, x.dst);
            let k = kind(x.src, x.dst);
            match &x.gbps {
                Reading::Value(v) => {
                    let mut part = format!("-> GPU {} {} GB/s", x.dst, figure(*v));
                    if let Some((e, over)) = &exp {
                        let ratio = v / e;
                        part.push_str(&format!(" ({} of {over}'s {})", percent(ratio), figure(*e)));
                        let s = for_profile(rate_status(ratio, WARN, FAIL), train, &mut escalated);
                        if s != Status::Pass {
                            problems.push(format!(
                                "GPU {} -> GPU {} at {} of its {over} link",
                                x.src,
                                x.dst,
                                percent(ratio)
                            ));
                            fix.get_or_insert(
                                "Check nvlink.status and nvidia-smi topo -m; on NVSwitch systems \
                                 the fabric manager; in a VM, the hypervisor's P2P support.",
                            );
                        }
                        status = status.max(s);
                    }
                    let same: Vec<f64> = values
                        .iter()
                        .filter(|(a, b, _)| kind(*a, *b) == k)
                        .map(|(_, _, v)| *v)
                        .collect();
                    if same.len() >= 2 {
                        if let Some(med) = median(&same) {
                            if *v < SIBLING_FLOOR * med {
                                status = Status::Fail;
                                problems.push(format!(
                                    "GPU {} -> GPU {} is {:.0}% below the median of the pairs \
                                     ({} GB/s)",
                                    x.src,
                                    x.dst,
                                    (1.0 - v / med) * 100.0,
                                    figure(med)
                                ));
                            }
                        }
                    }
                    parts.push(part);
                }
                Reading::Unavailable(why) => {
                    status = status.max(Status::Warn);
                    problems.push(format!(
                        "GPU {} -> GPU {} not measured: {why}",
                        x.src, x.dst
                    ));
                }
            }
            if !x.peer_access {
                let nvlink = exp.as_ref().is_some_and(|e| e.1.starts_with("NVLink"));
                status = status.max(if nvlink {
                    Status::Fail
                } else {
                    for_profile(Status::Warn, train, &mut escalated)
                });
                problems.push(format!(
                    "no peer access GPU {} -> GPU {}: copies go through host memory",
                    x.src, x.dst
                ));
                fix.get_or_insert(
                    "Enable peer-to-peer: on bare metal check ACS/IOMMU settings in the BIOS; \
                     in a VM ask the provider for P2P support between the GPUs.",
                );
            }
            if let Some(v) = &x.verify {
                if !v.ok {
                    status = Status::Fail;
                    problems.push(format!(
                        "data check failed: {}{}",
                        v.what,
                        v.detail
                            .as_ref()
                            .map(|d| format!(": {d}"))
                            .unwrap_or_default()
                    ));
                    fix =
                        Some("GPU-to-GPU copies corrupted data: drain the machine and report it.");
                }
            }
            if let Reading::Value(l) = &x.latency_us {
                if *l > LATENCY_WARN_US {
                    status = status.max(for_profile(Status::Warn, train, &mut escalated));
                    problems.push(format!(
                        "GPU {} -> GPU {} small copies take {} us each",
                        x.src,
                        x.dst,
                        figure(*l)
                    ));
                }
            }
            evidence.push(serde_json::json!({
                "dst": x.dst, "gbps": x.gbps, "latency_us": x.latency_us,
                "peer_access": x.peer_access, "expected_gbps": exp.as_ref().map(|e| e.0),
                "link": exp.as_ref().map(|e| e.1.clone()),
            }));
        }
        let mut patterns = Vec::new();
        for pt in p.patterns.iter().filter(|t| t.gpu == src) {
            let fastest_pair = values
                .iter()
                .filter(|(a, b, _)| match pt.kind {
                    PatternKind::OneToAll => *a == src && pt.peers.contains(b),
                    PatternKind::AllToOne => *b == src && pt.peers.contains(a),
                })
                .map(|v| v.2)
                .max_by(|a, b| a.total_cmp(b));
            match &pt.gbps {
                Reading::Value(v) => {
                    parts.push(format!("{} {} GB/s", pt.kind.label(), figure(*v)));
                    if let Some(best) = fastest_pair {
                        if *v < PATTERN_WARN * best {
                            status = status.max(for_profile(Status::Warn, train, &mut escalated));
                            problems.push(format!(
                                "{} from GPU {src}: {} GB/s at once, {} of its fastest single \
                                 pair's {} GB/s (below {})",
                                pt.kind.label(),
                                figure(*v),
                                percent(v / best),
                                figure(best),
                                percent(PATTERN_WARN)
                            ));
                            fix.get_or_insert(
                                "Check nvidia-smi topo -m and the NVSwitch fabric manager; GPUs \
                                 behind one PCIe switch share its upstream link.",
                            );
                        }
                    }
                }
                Reading::Unavailable(why) => {
                    status = status.max(Status::Warn);
                    problems.push(format!("{} GPU {src} not measured: {why}", pt.kind.label()));
                }
            }
            if let Some(v) = pt.verify.as_ref().filter(|v| !v.ok) {
                status = Status::Fail;
                problems.push(format!(
                    "data check failed: {}{}",
                    v.what,
                    v.detail
                        .as_ref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                ));
                fix = Some("GPU-to-GPU copies corrupted data: drain the machine and report it.");
            }
            patterns.push(serde_json::json!({
                "kind": pt.kind, "peers": pt.peers, "gbps": pt.gbps,
                "fastest_pair_gbps": fastest_pair,
            }));
        }
        let bidir: Vec<serde_json::Value> = p
            .bidirectional
            .iter()
            .filter(|b| b.a == src || b.b == src)
            .map(|b| serde_json::json!({"a": b.a, "b": b.b, "gbps": b.gbps}))
            .collect();
        let mut msg = format!("{who}: {}", parts.join(", "));
        if parts.is_empty() {
            msg = format!("{who}: no copy measured");
        }
        if escalated {
            problems.push(
                "--profile train fails what would warn: tensor and pipeline parallelism move \
                 activations between the GPUs every step"
                    .into(),
            );
        }
        if !problems.is_empty() {
            msg.push_str("; ");
            msg.push_str(&problems.join("; "));
        }
        let mut f = Finding::new(ID, status, msg)
            .gpu(src)
            .with("pairs", evidence)
            .with("bidirectional", bidir)
            .with("size_bytes", p.size_bytes);
        if !patterns.is_empty() {
            f = f.with("patterns", patterns);
        }
        if let Some(x) = fix {
            f = f.fix(x);
        }
        out.push(f);
    }
    if out.is_empty() {
        out.push(Finding::skip(ID, "no GPU pair measured"));
    }
    out
}
/// Facts on which `profile` changes this check's verdict (checks/profiles.rs).
#[cfg(test)]
pub(crate) fn profile_examples() -> Vec<(Profile, Facts)> {
    use crate::testing::measured::p2p;
    use crate::testing::Machine;
    // Both directions at 250 GB/s, 56% of NVLink x18: a warning, a failure for training.
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .measured(|m| {
            let mut x = p2p(250.0, true);
            x.pairs[1].gbps = Reading::Value(250.0);
            m.p2p = Reading::Value(x);
        })
        .build();
    vec![(Profile::Train, f)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{P2pPattern, Verify};
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::measured::*;
    use crate::testing::Machine;
    use crate::units::GIB;

    #[test]
    fn p2p_against_nvlink() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        assert_eq!(
            p2p_expected(&f, 0, 1),
            Some((450.0, "NVLink x18".to_string()))
        );
        f.measured.p2p = Reading::Value(p2p(393.7, true));
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|x| x.status == Status::Pass), "{out:?}");
        f.measured.p2p = Reading::Value(p2p(150.0, false));
        let out = (CHECK.run)(&f, &Policy::default());
        let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
        assert_eq!(g0.status, Status::Fail);
        assert!(g0.message.contains("no peer access"), "{}", g0.message);
        assert!(g0.message.contains("below the median"), "{}", g0.message);
    }

    fn with_pattern(
        kind: PatternKind,
        gpu: u32,
        gbps: Reading<f64>,
        ok: bool,
    ) -> (Facts, Vec<Finding>) {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        // GPU 0 -> GPU 1 at 400 GB/s, GPU 1 -> GPU 0 at 394.
        let mut x = p2p(400.0, true);
        x.patterns = vec![P2pPattern {
            kind,
            gpu,
            peers: vec![1 - gpu],
            size_bytes: GIB,
            gbps,
            verify: Some(Verify {
                what: "one_to_all GPU 0 1 GiB".into(),
                ok,
                detail: (!ok).then(|| "GPU 0 -> GPU 1: 3 words differ".into()),
            }),
        }];
        f.measured.p2p = Reading::Value(x);
        let out = (CHECK.run)(&f, &Policy::default());
        (f, out)
    }

    /// One-to-all from GPU 0 against its fastest pair (0 -> 1 at 400): 90% is 360; all-to-one
    /// into GPU 0 against 1 -> 0 at 394 (354.6).
    #[test]
    fn patterns_judged_against_the_fastest_single_pair() {
        for (kind, floor) in [
            (PatternKind::OneToAll, 400.0 * PATTERN_WARN),
            (PatternKind::AllToOne, 394.0 * PATTERN_WARN),
        ] {
            let (_, out) = with_pattern(kind, 0, Reading::Value(floor + 0.5), true);
            let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
            assert_eq!(g0.status, Status::Pass, "{}", g0.message);
            assert!(g0.message.contains(kind.label()), "{}", g0.message);
            let (_, out) = with_pattern(kind, 0, Reading::Value(floor - 0.5), true);
            let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
            assert_eq!(g0.status, Status::Warn, "{}", g0.message);
            assert!(g0.message.contains("fastest single pair"), "{}", g0.message);
            // GPU 1 has no pattern of its own here: not judged on GPU 0's.
            assert_eq!(pair_status(&out, 1), Status::Pass);
            // Under --profile train a warning about the links fails.
            let (f, _) = with_pattern(kind, 0, Reading::Value(floor - 0.5), true);
            assert_eq!(pair_status(&judged(&f, Profile::Train), 0), Status::Fail);
        }
        // Not measured: a warning with the reason; data that differs: a failure.
        let (_, out) = with_pattern(
            PatternKind::OneToAll,
            1,
            Reading::unavailable("GPU 1: not enough free memory"),
            true,
        );
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Warn);
        assert!(
            g1.message.contains("not enough free memory"),
            "{}",
            g1.message
        );
        let (_, out) = with_pattern(
            PatternKind::OneToAll,
            0,
            Reading::unavailable("copied data differs"),
            false,
        );
        let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
        assert_eq!(g0.status, Status::Fail);
        assert!(g0.message.contains("3 words differ"), "{}", g0.message);
    }

    fn judged(f: &Facts, profile: Profile) -> Vec<Finding> {
        let policy = Policy {
            profile,
            ..Policy::default()
        };
        (CHECK.run)(f, &policy)
    }

    fn pair_status(out: &[Finding], gpu: u32) -> Status {
        out.iter()
            .find(|x| x.gpu == Some(gpu))
            .map(|x| x.status)
            .unwrap()
    }

    /// Against NVLink x18's 450 GB/s one way: 60% (270) warns, 35% (157.5) fails. The other
    /// direction is at 394 GB/s, so the sibling floor (70% of the median) is not what decides
    /// above 280 GB/s; below it the pair fails anyway.
    #[test]
    fn thresholds_on_both_sides() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        for (gbps, want) in [(270.5, Status::Pass), (269.5, Status::Warn)] {
            // Keep the pairs' median low enough that the sibling floor stays out of it.
            let mut m = p2p(gbps, true);
            m.pairs[1].gbps = Reading::Value(gbps);
            f.measured.p2p = Reading::Value(m);
            let out = judged(&f, Profile::General);
            assert_eq!(pair_status(&out, 0), want, "{gbps}: {out:?}");
        }
        for (gbps, want) in [(158.0, Status::Warn), (157.0, Status::Fail)] {
            let mut m = p2p(gbps, true);
            m.pairs[1].gbps = Reading::Value(gbps);
            f.measured.p2p = Reading::Value(m);
            assert_eq!(
                pair_status(&judged(&f, Profile::General), 0),
                want,
                "{gbps}"
            );
        }
        let mut m = p2p(393.7, true);
        m.pairs[0].latency_us = Reading::Value(LATENCY_WARN_US + 1.0);
        f.measured.p2p = Reading::Value(m.clone());
        let out = judged(&f, Profile::General);
        assert_eq!(pair_status(&out, 0), Status::Warn);
        assert!(
            out[0].message.contains("small copies take 101 us"),
            "{}",
            out[0].message
        );
        m.pairs[0].latency_us = Reading::Value(LATENCY_WARN_US - 1.0);
        f.measured.p2p = Reading::Value(m);
        assert_eq!(pair_status(&judged(&f, Profile::General), 0), Status::Pass);
    }

    /// Training: slow links, slow small copies and missing peer access over PCIe fail.
    #[test]
    fn train_fails_what_warns() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        let mut m = p2p(250.0, true);
        m.pairs[1].gbps = Reading::Value(250.0);
        f.measured.p2p = Reading::Value(m);
        assert_eq!(pair_status(&judged(&f, Profile::General), 0), Status::Warn);
        let out = judged(&f, Profile::Train);
        assert_eq!(pair_status(&out, 0), Status::Fail);
        assert!(
            out[0].message.contains("--profile train fails"),
            "{}",
            out[0].message
        );
        // A healthy pair passes under train too, without the remark.
        f.measured.p2p = Reading::Value(p2p(393.7, true));
        let out = judged(&f, Profile::Train);
        assert_eq!(pair_status(&out, 0), Status::Pass);
        assert!(!out[0].message.contains("--profile train"));
        // Over PCIe without peer access: a warning, a failure for training.
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                if let Reading::Value(t) = &mut f.topology {
                    t.links[0][1] = crate::facts::TopoLink::Phb;
                    t.links[1][0] = crate::facts::TopoLink::Phb;
                }
            })
            .measured(|m| {
                let mut x = p2p(50.0, false);
                x.pairs[1].gbps = Reading::Value(50.0);
                m.p2p = Reading::Value(x);
            })
            .build();
        let g = judged(&f, Profile::General);
        assert_eq!(pair_status(&g, 0), Status::Warn, "{}", g[0].message);
        assert_eq!(pair_status(&judged(&f, Profile::Train), 0), Status::Fail);
        // Latency alone.
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        let mut m = p2p(393.7, true);
        m.pairs[0].latency_us = Reading::Value(150.0);
        f.measured.p2p = Reading::Value(m);
        assert_eq!(pair_status(&judged(&f, Profile::Train), 0), Status::Fail);
        // A pair that could not be measured stays a warning: no verdict on the link.
        let mut m = p2p(393.7, true);
        m.pairs[0].gbps = Reading::unavailable("copy timed out");
        f.measured.p2p = Reading::Value(m);
        assert_eq!(pair_status(&judged(&f, Profile::Train), 0), Status::Warn);
    }

    #[test]
    fn explain_gives_the_thresholds_the_code_uses() {
        let what = CHECK.doc.what;
        assert!(
            what.contains(&format!(
                "aggregate below {} of the pattern's fastest single pair warns",
                percent(PATTERN_WARN)
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
            what.contains(&format!("below {} of the median", percent(SIBLING_FLOOR))),
            "{what}"
        );
        assert!(
            what.contains(&format!("slower than {} us each warn", LATENCY_WARN_US)),
            "{what}"
        );
        let t = CHECK.profiles[0].effect;
        assert!(
            t.contains(&format!("below {} of its link", percent(WARN))),
            "{t}"
        );
        assert!(
            t.contains(&format!("slower than {} us", LATENCY_WARN_US)),
            "{t}"
        );
    }
}
