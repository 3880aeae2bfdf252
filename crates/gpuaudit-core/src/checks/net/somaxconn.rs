//! net.somaxconn: the kernel's accept-queue limit against the request concurrency expected.

use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::Facts;
use crate::finding::Finding;
use crate::policy::{Policy, Profile};

const ID: &str = "net.somaxconn";

/// The concurrency a serving machine is expected to queue with --profile inference when
/// --concurrency does not say.
pub const INFERENCE_CONCURRENCY: u32 = 1024;
/// The default before Linux 5.4 (4096 since): at or below it a serving machine fails.
pub const OLD_DEFAULT: u32 = 128;

pub const CHECK: Check = Check {
    id: ID,
    title: "TCP accept-queue limit against the expected request concurrency",
    looks_at: "TCP accept-queue limit against the expected request concurrency",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "net.core.somaxconn (/proc/sys/net/core/somaxconn): the kernel's cap on every \
               listening socket's accept queue, against the request concurrency expected \
               (1024 for --profile inference unless told otherwise).",
        why: "A server's listen backlog is silently cut to somaxconn. When a burst of \
              clients connects faster than the server accepts (a model server behind a load \
              balancer, many workers fetching from one host), the connections beyond the \
              queue are dropped or retried after a second or more: tail latency jumps and \
              clients see timeouts while the GPU is idle. 128 is the old default (kernels \
              before 5.4); 4096 is today's. The value is per network namespace, so a \
              container can have its own.",
        verify: "sysctl net.core.somaxconn\n\
                 ss -ltn   # Send-Q of a LISTEN socket is its effective backlog\n\
                 nstat -az TcpExtListenOverflows TcpExtListenDrops",
        fix: "`sudo sysctl -w net.core.somaxconn=4096`, and for the next boot `echo \
              net.core.somaxconn=4096 | sudo tee /etc/sysctl.d/90-somaxconn.conf`. In \
              Kubernetes: the pod's securityContext.sysctls; net.core.somaxconn is not one of \
              Kubernetes' safe sysctls, so the node's kubelet must allow it first \
              (`--allowed-unsafe-sysctls=net.core.somaxconn`, or allowedUnsafeSysctls in its \
              KubeletConfiguration). Then raise the server's own backlog (uvicorn --backlog, \
              gunicorn --backlog): listen() takes the smaller of the two.",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Inference,
            effect: "Expects 1024 concurrent connections unless --concurrency says otherwise, and a somaxconn of 128 or less fails.",
        },
    ],
    run: run_somaxconn,
};

fn run_somaxconn(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let v = match facts.net.somaxconn.get() {
        Ok(v) => *v,
        Err(r) => {
            return vec![Finding::skip(
                ID,
                format!("could not read net.core.somaxconn: {r}"),
            )]
        }
    };
    let inference = policy.profile == Profile::Inference;
    let expected = policy
        .expected_concurrency
        .or(inference.then_some(INFERENCE_CONCURRENCY));
    let fix = "`sudo sysctl -w net.core.somaxconn=4096 && echo net.core.somaxconn=4096 | sudo tee /etc/sysctl.d/90-somaxconn.conf` (Kubernetes: `gpuaudit explain net.somaxconn`)";
    let ev = |f: Finding| {
        f.with("somaxconn", v)
            .with("expected_concurrency", expected)
    };
    let f = match expected {
        Some(e) if v < e => {
            let msg = format!("net.core.somaxconn is {v}, below the {e} concurrent connections expected: a burst beyond {v} pending connections is dropped or retried after a second, which shows up as timeouts and tail latency");
            let f = if inference && v <= OLD_DEFAULT && e > OLD_DEFAULT {
                Finding::fail(ID, msg)
            } else {
                Finding::warn(ID, msg)
            };
            f.fix(fix)
        }
        Some(e) => Finding::pass(ID, format!("net.core.somaxconn is {v}, enough for the {e} concurrent connections expected")),
        None if v <= OLD_DEFAULT => Finding::info(ID, format!("net.core.somaxconn is {v} (the old default): fine for training, too low if this machine serves requests (--profile inference)")).fix(fix),
        None => Finding::pass(ID, format!("net.core.somaxconn is {v}")),
    };
    vec![ev(f)]
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::Machine;

    #[test]
    fn somaxconn_by_profile() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        let inf = Policy {
            profile: Profile::Inference,
            ..Policy::default()
        };
        f.net.somaxconn = Reading::Value(128);
        assert_eq!(run_somaxconn(&f, &inf)[0].status, Status::Fail);
        assert_eq!(
            run_somaxconn(&f, &Policy::default())[0].status,
            Status::Info
        );
        f.net.somaxconn = Reading::Value(4096);
        assert_eq!(run_somaxconn(&f, &inf)[0].status, Status::Pass);
        let high = Policy {
            expected_concurrency: Some(8192),
            ..Policy::default()
        };
        assert_eq!(run_somaxconn(&f, &high)[0].status, Status::Warn);
        f.net.somaxconn = Reading::unavailable("no file");
        assert_eq!(run_somaxconn(&f, &inf)[0].status, Status::Skip);
    }

    #[test]
    fn somaxconn_thresholds_on_both_sides() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        let inf = Policy {
            profile: Profile::Inference,
            ..Policy::default()
        };
        let st = |f: &Facts, p: &Policy| run_somaxconn(f, p)[0].status;
        // Inference expects 1024: at it pass, one below warn, at the old default fail.
        f.net.somaxconn = Reading::Value(INFERENCE_CONCURRENCY);
        assert_eq!(st(&f, &inf), Status::Pass);
        f.net.somaxconn = Reading::Value(INFERENCE_CONCURRENCY - 1);
        assert_eq!(st(&f, &inf), Status::Warn);
        f.net.somaxconn = Reading::Value(OLD_DEFAULT + 1);
        assert_eq!(st(&f, &inf), Status::Warn);
        f.net.somaxconn = Reading::Value(OLD_DEFAULT);
        assert_eq!(st(&f, &inf), Status::Fail);
        assert!(run_somaxconn(&f, &inf)[0]
            .message
            .contains("below the 1024 concurrent connections expected"));
        // --concurrency of 100 under inference: 128 is enough.
        let low = Policy {
            profile: Profile::Inference,
            expected_concurrency: Some(100),
            ..Policy::default()
        };
        assert_eq!(st(&f, &low), Status::Pass);
        // An expectation of 128 or less never fails, even under inference.
        f.net.somaxconn = Reading::Value(64);
        let at = Policy {
            profile: Profile::Inference,
            expected_concurrency: Some(OLD_DEFAULT),
            ..Policy::default()
        };
        assert_eq!(st(&f, &at), Status::Warn);
        // Without an expectation: the old default is said, above it passes.
        f.net.somaxconn = Reading::Value(OLD_DEFAULT);
        assert_eq!(st(&f, &Policy::default()), Status::Info);
        f.net.somaxconn = Reading::Value(OLD_DEFAULT + 1);
        assert_eq!(st(&f, &Policy::default()), Status::Pass);
        // --concurrency outside inference warns, never fails.
        let c = Policy {
            expected_concurrency: Some(4096),
            ..Policy::default()
        };
        f.net.somaxconn = Reading::Value(OLD_DEFAULT);
        assert_eq!(st(&f, &c), Status::Warn);
    }
}
