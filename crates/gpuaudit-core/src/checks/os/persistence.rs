//! os.persistence: persistence mode per GPU.

use crate::checks::common::per_gpu;
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

const ID: &str = "os.persistence";

pub const CHECK: Check = Check {
    id: ID,
    title: "Persistence mode per GPU",
    looks_at: "persistence mode per GPU (off makes every new process pay driver initialisation)",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what:
            "Whether each GPU is in persistence mode (or kept initialised by nvidia-persistenced).",
        why: "With persistence off, the driver tears the GPU down when the last program exits, \
              and every new process pays the initialisation again: hundreds of milliseconds \
              to seconds per start, which hurts short jobs and serving restarts.",
        verify: "nvidia-smi --query-gpu=index,persistence_mode --format=csv",
        fix: "Run the persistence daemon: `sudo systemctl enable --now nvidia-persistenced` \
              (or `sudo nvidia-smi -pm 1`; gpuaudit never changes it).",
    },
    profiles: &[ProfileEffect {
        profile: Profile::Inference,
        effect: "Persistence mode off fails instead of warning: every server start, worker restart or autoscaled replica pays the driver's initialisation before its first request.",
    }],
    run: persistence,
};

fn persistence(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu(ID, facts, policy, |g| persistence_one(g, policy))
}

fn persistence_one(g: &GpuFacts, policy: &Policy) -> Finding {
    match g.persistence_mode {
        Reading::Value(true) => Finding::pass(ID, format!("{}: persistence mode on", g.label()))
            .with("persistence_mode", true),
        Reading::Value(false) => {
            let st = if policy.profile == Profile::Inference {
                Status::Fail
            } else {
                Status::Warn
            };
            Finding::new(
                ID,
                st,
                format!("{}: persistence mode off: every new CUDA process pays the driver's initialisation", g.label()),
            )
            .with("persistence_mode", false)
            .fix("`sudo systemctl enable --now nvidia-persistenced` (or `sudo nvidia-smi -pm 1`; gpuaudit never changes it)")
        }
        Reading::Unavailable(ref r) => {
            Finding::skip(ID, format!("{}: persistence mode not read: {r}", g.label()))
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{statuses, Machine};

    fn with_profile(p: Profile) -> Policy {
        Policy {
            profile: p,
            ..Policy::default()
        }
    }

    #[test]
    fn persistence_on_off_unread_by_profile() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| g.persistence_mode = Reading::Value(false))
            .build();
        let r = persistence(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass, Status::Warn]);
        assert_eq!(r[1].gpu, Some(1));
        assert!(r[1].fix.is_some());
        let r = persistence(&f, &with_profile(Profile::Inference));
        assert_eq!(statuses(&r), vec![Status::Pass, Status::Fail]);
        for p in [Profile::Train, Profile::Hpc, Profile::Render] {
            assert_eq!(
                statuses(&persistence(&f, &with_profile(p))),
                vec![Status::Pass, Status::Warn],
                "{p}"
            );
        }
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.persistence_mode = Reading::unavailable("N/A"))
            .build();
        let r = persistence(&f, &with_profile(Profile::Inference));
        assert_eq!(statuses(&r), vec![Status::Skip]);
        assert!(r[0].message.contains("N/A"));
    }
}
