//! nccl.allreduce: measured all-reduce bus bandwidth and small-message latency against the
//! slowest GPU's link.

use crate::checks::common::plural;
use crate::checks::judge::{allreduce_expected, failed_verifications, group, percent, rate_status};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::Facts;
use crate::finding::{Finding, Status};
use crate::policy::{Policy, Profile};
use crate::units::{bytes, figure, MIB};

const ID: &str = "nccl.allreduce";

/// All-reduce bus bandwidth at the largest size against the slowest GPU's link.
pub const WARN: f64 = 0.50;
pub const FAIL: f64 = 0.30;
/// A 1 MiB all-reduce slower than this (microseconds) warns: small-message latency bounds
/// tensor parallelism (57.6 us on the 2xH200 here).
pub const LATENCY_WARN_US: f64 = 500.0;

pub const CHECK: Check = Check {
    id: ID,
    title: "measured all-reduce bus bandwidth and latency across the GPUs",
    looks_at: "measured all-reduce bus bandwidth (large messages) and latency (1 MiB) against \
               the topology's expectation",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "NCCL all-reduce (float32 sum, out of place) across all measured GPUs in one \
               process, 8 B to 1 GiB with --full (8 B, 1 MiB and 256 MiB in the quick \
               audit), timed with events, sum verified; nccl-tests' definitions: busbw = \
               algbw x 2(n-1)/n. NVLink multicast (NVLS) is disabled. The bus bandwidth at \
               the largest size is compared with the slowest GPU's link (NVLink one \
               direction, or PCIe): below 50% warns, below 30% fails; latency at 1 MiB above \
               500 us warns.",
        why: "Data-parallel training all-reduces the gradients every step; its bandwidth \
              bounds the scaling from one GPU to many, and small-message latency bounds \
              tensor parallelism.",
        verify: "# nccl-tests (github.com/NVIDIA/nccl-tests, built with make); N: the number of GPUs;\n\
                 # NVLink SHARP off (NCCL_NVLS_ENABLE=0) as gpuaudit runs it; INFO names the transport (P2P/NVLink, SHM, NET)\n\
                 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8 -e 1G -f 2 -g N",
        fix: "Check p2p.bandwidth and nvlink.status; make sure NCCL_P2P_DISABLE and \
              NCCL_SHM_DISABLE are not set (cuda.env), /dev/shm is large enough \
              (host.shm), and on NVSwitch systems that the fabric manager runs.",
    },
    profiles: &[ProfileEffect {
        profile: Profile::Train,
        effect: "A bus bandwidth below 50% of the link, or a 1 MiB all-reduce above 500 us, fails \
                 instead of warning, and the finding says so: data-parallel training all-reduces \
                 the gradients every step.",
    }],
    run: check_nccl,
};

fn check_nccl(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let a = match group(ID, facts, &facts.measured.nccl) {
        Ok(a) => a,
        Err(f) => return f,
    };
    let Some(big) = a.largest() else {
        return vec![Finding::skip(ID, "no all-reduce size was measured")];
    };
    let n = a.gpus.len() as u32;
    let expected = allreduce_expected(facts, &a.gpus);
    let mib = a.at(MIB);
    let mut status = Status::Pass;
    let mut msg = format!(
        "all-reduce over {}: bus bandwidth {} GB/s at {}",
        plural(n as usize, "GPU", "GPUs"),
        figure(big.busbw_gbps),
        bytes(big.size_bytes)
    );
    let mut fix = None;
    if let Some((e, over)) = &expected {
        let ratio = big.busbw_gbps / e;
        msg.push_str(&format!(
            " ({} of {over}'s {} GB/s)",
            percent(ratio),
            figure(*e)
        ));
        status = rate_status(ratio, WARN, FAIL);
        if status != Status::Pass {
            fix = Some(
                "Check p2p.bandwidth and nvlink.status, that NCCL_P2P_DISABLE / NCCL_SHM_DISABLE \
                 are not set (cuda.env), and /dev/shm (host.shm).",
            );
        }
    }
    if let Some(m) = mib {
        msg.push_str(&format!("; 1 MiB takes {} us", figure(m.time_us)));
        if m.time_us > LATENCY_WARN_US {
            status = status.max(Status::Warn);
            msg.push_str(&format!(" (slow: above {} us)", figure(LATENCY_WARN_US)));
        }
    }
    if status == Status::Warn && policy.profile == Profile::Train {
        status = Status::Fail;
        msg.push_str(
            "; --profile train fails this: data-parallel training all-reduces the gradients \
             every step",
        );
    }
    let bad = failed_verifications(&a.verify);
    if !bad.is_empty() {
        status = Status::Fail;
        msg.push_str(&format!("; wrong sums: {}", bad.join("; ")));
        fix = Some("All-reduce produced wrong sums: drain the machine and report it.");
    }
    let mut f = Finding::new(ID, status, msg)
        .with("gpus", &a.gpus)
        .with("nccl_version", &a.nccl_version)
        .with("busbw_gbps", big.busbw_gbps)
        .with("algbw_gbps", big.algbw_gbps)
        .with("size_bytes", big.size_bytes)
        .with("latency_1mib_us", mib.map(|m| m.time_us))
        .with("expected_gbps", expected.as_ref().map(|e| e.0));
    if let Some(x) = fix {
        f = f.fix(x);
    }
    vec![f]
}
/// Facts on which `profile` changes this check's verdict (checks/profiles.rs).
#[cfg(test)]
pub(crate) fn profile_examples() -> Vec<(Profile, Facts)> {
    use crate::reading::Reading;
    use crate::testing::measured::allreduce;
    use crate::testing::Machine;
    // 40% of NVLink x18: a warning, a failure for training.
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .measured(|m| m.nccl = Reading::Value(allreduce(180.0, true)))
        .build();
    vec![(Profile::Train, f)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::measured::*;
    use crate::testing::Machine;

    #[test]
    fn allreduce_against_the_slowest_link() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        f.measured.nccl = Reading::Value(allreduce(328.3, true));
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out[0].status, Status::Pass, "{}", out[0].message);
        assert!(
            out[0].message.contains("73% of NVLink x18"),
            "{}",
            out[0].message
        );
        assert!(
            out[0].message.contains("1 MiB takes 57.6 us"),
            "{}",
            out[0].message
        );
        f.measured.nccl = Reading::Value(allreduce(100.0, false));
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out[0].status, Status::Fail);
    }

    fn judged(busbw: f64, latency_us: f64, ok: bool, profile: Profile) -> Finding {
        let mut a = allreduce(busbw, ok);
        a.points[0].time_us = latency_us;
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| m.nccl = Reading::Value(a))
            .build();
        let policy = Policy {
            profile,
            ..Policy::default()
        };
        (CHECK.run)(&f, &policy).remove(0)
    }

    /// Against NVLink x18's 450 GB/s: 50% (225) warns, 30% (135) fails; 500 us at 1 MiB warns.
    #[test]
    fn thresholds_on_both_sides() {
        let g = Profile::General;
        assert_eq!(judged(225.5, 57.6, true, g).status, Status::Pass);
        assert_eq!(judged(224.5, 57.6, true, g).status, Status::Warn);
        assert_eq!(judged(135.5, 57.6, true, g).status, Status::Warn);
        assert_eq!(judged(134.5, 57.6, true, g).status, Status::Fail);
        assert_eq!(judged(328.3, 499.0, true, g).status, Status::Pass);
        let w = judged(328.3, 501.0, true, g);
        assert_eq!(w.status, Status::Warn);
        assert!(w.message.contains("(slow: above 500 us)"), "{}", w.message);
        assert_eq!(judged(328.3, 57.6, false, g).status, Status::Fail);
    }

    /// Training: what warns fails, and says why; what passes still passes.
    #[test]
    fn train_fails_what_warns() {
        let t = Profile::Train;
        assert_eq!(judged(225.5, 57.6, true, t).status, Status::Pass);
        let f = judged(224.5, 57.6, true, t);
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.message.contains("--profile train fails this"),
            "{}",
            f.message
        );
        assert_eq!(judged(328.3, 501.0, true, t).status, Status::Fail);
        assert_eq!(judged(328.3, 499.0, true, t).status, Status::Pass);
        assert!(!judged(134.5, 57.6, true, t)
            .message
            .contains("--profile train"));
    }

    #[test]
    fn explain_gives_the_thresholds_the_code_uses() {
        let what = CHECK.doc.what;
        assert!(
            what.contains(&format!("below {} warns", percent(WARN))),
            "{what}"
        );
        assert!(
            what.contains(&format!("below {} fails", percent(FAIL))),
            "{what}"
        );
        assert!(
            what.contains(&format!("above {} us warns", LATENCY_WARN_US)),
            "{what}"
        );
        let t = CHECK.profiles[0].effect;
        assert!(
            t.contains(&format!("below {} of the link", percent(WARN))),
            "{t}"
        );
        assert!(t.contains(&format!("above {} us", LATENCY_WARN_US)), "{t}");
    }
}
