//! net.loopback: the measured loopback TCP round trip.

use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::Facts;
use crate::finding::{Finding, Status};
use crate::policy::{Policy, Profile};

const ID: &str = "net.loopback";

/// Median round trips above this (microseconds) are slower than native Linux (10-30 us).
pub const SLOW_US: f64 = 60.0;
/// Above this (microseconds), 10x native: a sandboxed runtime, CPU throttling or an
/// overcommitted VM.
pub const VERY_SLOW_US: f64 = 200.0;

pub const CHECK: Check = Check {
    id: ID,
    title: "Measured loopback TCP round trip",
    looks_at: "measured loopback TCP round trip",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "gpuaudit opens its own listener on 127.0.0.1 on an ephemeral port and times TCP \
               round trips of 64 bytes with TCP_NODELAY (up to 1000, at most 2 seconds), after \
               a warm-up; median, 99th percentile and maximum. No ICMP, no root.",
        why: "Every request to a model server behind a local proxy, every tokenizer or \
              feature service on the same host, and NCCL's bootstrap pay this round trip. \
              Native Linux takes 10-30 microseconds; sandboxed runtimes (gVisor), heavy \
              seccomp/eBPF filtering, CPU throttling by a container's quota or an \
              overcommitted VM make it 10x slower, which shows up as latency no GPU can fix.",
        verify: "python3 - <<'EOF'\n\
                 import socket, threading, time\n\
                 s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n\
                 def echo():\n\
                 \x20   c, _ = s.accept()\n\
                 \x20   while (d := c.recv(64)): c.sendall(d)\n\
                 threading.Thread(target=echo, daemon=True).start()\n\
                 c = socket.create_connection(s.getsockname()); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n\
                 t = []\n\
                 for _ in range(1000):\n\
                 \x20   a = time.perf_counter(); c.sendall(b'x' * 64); c.recv(64); t.append(time.perf_counter() - a)\n\
                 t.sort(); print('median %.1f us' % (t[500] * 1e6))\n\
                 EOF\n\
                 cat /sys/fs/cgroup/cpu.max   # a container CPU quota that throttles",
        fix: "Run latency-sensitive serving outside sandboxed runtimes (runc instead of \
              gVisor), give the container whole CPUs (no tight cpu.max quota), pin the \
              server's threads, and pick an instance type without CPU overcommit.",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Inference,
            effect: "A median above 200 us fails instead of warning, above 60 us warns instead of being info: every local request pays it.",
        },
    ],
    run: run_loopback,
};

fn run_loopback(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let r = match facts.host.loopback.get() {
        Ok(r) => r,
        Err(why) => return vec![Finding::skip(ID, format!("not measured: {why}"))],
    };
    let inference = policy.profile == Profile::Inference;
    let msg = format!(
        "loopback TCP round trip: median {:.1} µs, p99 {:.1} µs, max {:.0} µs over {} round trips",
        r.median_us, r.p99_us, r.max_us, r.round_trips
    );
    let f = if r.median_us > VERY_SLOW_US {
        let m = format!("{msg}: 10x slower than native Linux (10-30 µs): a sandboxed runtime, CPU throttling or an overcommitted VM; every local request pays it");
        if inference {
            Finding::fail(ID, m)
        } else {
            Finding::warn(ID, m)
        }
    } else if r.median_us > SLOW_US {
        let m = format!("{msg}: slower than native Linux (10-30 µs)");
        if inference {
            Finding::warn(ID, m)
        } else {
            Finding::info(ID, m)
        }
    } else {
        Finding::pass(ID, msg)
    };
    let f = if f.status >= Status::Info {
        f.fix("check the container runtime (gVisor/Kata add latency), the CPU quota (cat /sys/fs/cgroup/cpu.max) and CPU steal (top: %st)")
    } else {
        f
    };
    vec![f
        .with("median_us", r.median_us)
        .with("p99_us", r.p99_us)
        .with("max_us", r.max_us)
        .with("round_trips", r.round_trips)
        .with("method", &r.method)]
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::LoopbackRtt;
    use crate::reading::Reading;
    use crate::testing::Machine;

    #[test]
    fn loopback_thresholds() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        let rtt = |m: f64| LoopbackRtt {
            round_trips: 1000,
            median_us: m,
            p99_us: m * 2.0,
            max_us: m * 5.0,
            method: "t".into(),
        };
        let inf = Policy {
            profile: Profile::Inference,
            ..Policy::default()
        };
        f.host.loopback = Reading::Value(rtt(20.0));
        assert_eq!(run_loopback(&f, &inf)[0].status, Status::Pass);
        f.host.loopback = Reading::Value(rtt(300.0));
        assert_eq!(run_loopback(&f, &inf)[0].status, Status::Fail);
        assert_eq!(run_loopback(&f, &Policy::default())[0].status, Status::Warn);
        f.host.loopback = Reading::unavailable("snapshot audit: nothing is measured");
        assert_eq!(run_loopback(&f, &inf)[0].status, Status::Skip);
    }

    #[test]
    fn loopback_thresholds_on_both_sides() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        let inf = Policy {
            profile: Profile::Inference,
            ..Policy::default()
        };
        let at = |f: &mut Facts, m: f64| {
            f.host.loopback = Reading::Value(LoopbackRtt {
                round_trips: 1000,
                median_us: m,
                p99_us: m,
                max_us: m,
                method: "t".into(),
            })
        };
        for (median, general, inference) in [
            (SLOW_US, Status::Pass, Status::Pass),
            (SLOW_US + 0.1, Status::Info, Status::Warn),
            (VERY_SLOW_US, Status::Info, Status::Warn),
            (VERY_SLOW_US + 0.1, Status::Warn, Status::Fail),
        ] {
            at(&mut f, median);
            let g = run_loopback(&f, &Policy::default());
            assert_eq!(g[0].status, general, "{median}");
            assert_eq!(run_loopback(&f, &inf)[0].status, inference, "{median}");
            assert_eq!(g[0].fix.is_some(), general != Status::Pass, "{median}");
        }
        at(&mut f, 20.0);
        let r = run_loopback(&f, &Policy::default());
        assert_eq!(
            r[0].message,
            "loopback TCP round trip: median 20.0 µs, p99 20.0 µs, max 20 µs over 1000 round trips"
        );
    }
}
