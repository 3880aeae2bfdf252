//! The network around the GPUs: net.somaxconn, net.loopback, net.fabric.

use super::hostcommon::gpu_count;
use super::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, NetInterface};
use crate::finding::{Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

pub const CHECKS: &[Check] = &[
    Check {
        id: "net.somaxconn",
        title: "TCP accept-queue limit against the expected request concurrency",
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
            fix: "sysctl -w net.core.somaxconn=4096 and persist it in /etc/sysctl.d/90-somaxconn.conf; \
                  in Kubernetes, the pod's securityContext.sysctls (net.core.somaxconn is a safe \
                  sysctl); and raise the server's own backlog (uvicorn --backlog, gunicorn \
                  --backlog).",
        },
        run: run_somaxconn,
    },
    Check {
        id: "net.loopback",
        title: "Measured loopback TCP round trip",
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
        run: run_loopback,
    },
    Check {
        id: "net.fabric",
        title: "InfiniBand / RoCE devices, port state and rate, GPUDirect RDMA; Ethernet speeds",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "The RDMA devices of /sys/class/infiniband (InfiniBand, and RoCE on Ethernet): \
                   each port's state, physical state, rate and link layer; whether the GPUDirect \
                   RDMA module (nvidia_peermem, or the older nv_peer_mem) is loaded; the speed of \
                   each physical network interface of /sys/class/net.",
            why: "Multi-node training exchanges gradients between nodes every step. Over \
                  InfiniBand or RoCE with GPUDirect RDMA, NCCL moves them from GPU memory to the \
                  NIC directly at 200-400 Gb/s per port; without RDMA it falls back to TCP \
                  sockets through the CPU, often 10x slower, and the GPUs wait. A port that is \
                  down or trained at a lower rate halves what the job gets without an error.",
            verify: "ibstat; ibv_devinfo | grep -E 'hca_id|state|active_width|active_speed|link_layer'\n\
                     cat /sys/class/infiniband/*/ports/*/{state,rate}\n\
                     lsmod | grep -E 'nvidia_peermem|nv_peer_mem'\n\
                     ethtool eth0 | grep Speed\n\
                     NCCL_DEBUG=INFO torchrun ... 2>&1 | grep -E 'NET/IB|NET/Socket|GDR'",
            fix: "Order instances with an RDMA fabric for multi-node training (EFA, InfiniBand or \
                  RoCE), load GPUDirect RDMA (`modprobe nvidia_peermem`, or use DMA-BUF with the \
                  open kernel module on kernel 5.12+), and get down ports fixed by the provider \
                  (cables, switch ports, subnet manager).",
        },
        run: run_fabric,
    },
];

const ID_SOMAX: &str = "net.somaxconn";
const ID_LOOP: &str = "net.loopback";
const ID_FABRIC: &str = "net.fabric";

fn run_somaxconn(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let v = match facts.net.somaxconn.get() {
        Ok(v) => *v,
        Err(r) => {
            return vec![Finding::skip(
                ID_SOMAX,
                format!("could not read net.core.somaxconn: {r}"),
            )]
        }
    };
    let inference = policy.profile == Profile::Inference;
    let expected = policy.expected_concurrency.or(inference.then_some(1024));
    let fix = "sysctl -w net.core.somaxconn=4096 && echo 'net.core.somaxconn = 4096' > /etc/sysctl.d/90-somaxconn.conf";
    let ev = |f: Finding| {
        f.with("somaxconn", v)
            .with("expected_concurrency", expected)
    };
    let f = match expected {
        Some(e) if v < e => {
            let msg = format!("net.core.somaxconn is {v}, below the {e} concurrent connections expected: a burst beyond {v} pending connections is dropped or retried after a second, which shows up as timeouts and tail latency");
            let f = if inference && v <= 128 && e > 128 {
                Finding::fail(ID_SOMAX, msg)
            } else {
                Finding::warn(ID_SOMAX, msg)
            };
            f.fix(fix)
        }
        Some(e) => Finding::pass(ID_SOMAX, format!("net.core.somaxconn is {v}, enough for the {e} concurrent connections expected")),
        None if v <= 128 => Finding::info(ID_SOMAX, format!("net.core.somaxconn is {v} (the old default): fine for training, too low if this machine serves requests (--profile inference)")).fix(fix),
        None => Finding::pass(ID_SOMAX, format!("net.core.somaxconn is {v}")),
    };
    vec![ev(f)]
}

fn run_loopback(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let r = match facts.host.loopback.get() {
        Ok(r) => r,
        Err(why) => return vec![Finding::skip(ID_LOOP, format!("not measured: {why}"))],
    };
    let inference = policy.profile == Profile::Inference;
    let msg = format!(
        "loopback TCP round trip: median {:.1} µs, p99 {:.1} µs, max {:.0} µs over {} round trips",
        r.median_us, r.p99_us, r.max_us, r.round_trips
    );
    let f = if r.median_us > 200.0 {
        let m = format!("{msg}: 10x slower than native Linux (10-30 µs): a sandboxed runtime, CPU throttling or an overcommitted VM; every local request pays it");
        if inference {
            Finding::fail(ID_LOOP, m)
        } else {
            Finding::warn(ID_LOOP, m)
        }
    } else if r.median_us > 60.0 {
        let m = format!("{msg}: slower than native Linux (10-30 µs)");
        if inference {
            Finding::warn(ID_LOOP, m)
        } else {
            Finding::info(ID_LOOP, m)
        }
    } else {
        Finding::pass(ID_LOOP, msg)
    };
    let f = if f.status.severity() >= Status::Info.severity() {
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

fn nic_summary(nics: &[NetInterface]) -> Vec<String> {
    nics.iter()
        .map(|n| {
            format!(
                "{} {}{}",
                n.name,
                n.speed_mbps
                    .map(|s| format!("{} Gb/s", s as f64 / 1000.0))
                    .unwrap_or_else(|| "speed unknown".into()),
                n.driver
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            )
        })
        .collect()
}

fn run_fabric(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let train = policy.profile == Profile::Train;
    let gpus = gpu_count(facts).unwrap_or(0);
    let nics = facts.host.fabric.nics.value().cloned().unwrap_or_default();
    let nic_ev = nic_summary(&nics);
    let fastest = nics.iter().filter_map(|n| n.speed_mbps).max();
    let ports = match &facts.host.fabric.rdma {
        Reading::Value(p) => p,
        Reading::Unavailable(r) => {
            return vec![
                Finding::skip(ID_FABRIC, format!("could not read the RDMA devices: {r}"))
                    .with("nics", &nic_ev),
            ];
        }
    };
    let mut out = Vec::new();
    if ports.is_empty() {
        let eth = match fastest {
            Some(s) => format!(
                "the fastest Ethernet interface runs at {} Gb/s",
                s as f64 / 1000.0
            ),
            None if nics.is_empty() => "no physical network interface was listed".to_string(),
            None => "the Ethernet speed is not reported (usual for virtual NICs)".into(),
        };
        let msg = format!(
            "no InfiniBand or RoCE device; {eth}: multi-node training would run NCCL over TCP sockets through the CPU, typically 10x below an RDMA fabric");
        let f = if train && gpus > 1 {
            Finding::warn(ID_FABRIC, msg).fix("for multi-node training, use instances with an RDMA fabric (InfiniBand, RoCE, EFA); a single-node job is not affected")
        } else {
            Finding::info(
                ID_FABRIC,
                "no InfiniBand or RoCE device; fine for single-node work".to_string(),
            )
        };
        out.push(f.with("nics", &nic_ev));
        return out;
    }
    let mut good = Vec::new();
    for p in ports {
        let name = format!("{} port {}", p.device, p.port);
        let active = p.state.as_deref() == Some("ACTIVE");
        let up = p.phys_state.as_deref().is_none_or(|s| s == "LinkUp");
        let ev = |f: Finding| {
            f.with("device", &p.device)
                .with("port", p.port)
                .with("state", &p.state)
                .with("phys_state", &p.phys_state)
                .with("rate", &p.rate_text)
                .with("link_layer", &p.link_layer)
        };
        if p.state.is_none() {
            out.push(ev(Finding::skip(
                ID_FABRIC,
                format!("cannot tell the state of {name}: its state file is missing or unreadable"),
            )));
            continue;
        }
        if active && up {
            good.push(format!(
                "{name} {} {}",
                p.link_layer.as_deref().unwrap_or("?"),
                p.rate_text.as_deref().unwrap_or("rate unknown")
            ));
        } else {
            let msg = format!(
                "{name} is {} ({}): NCCL cannot use it",
                p.state.as_deref().unwrap_or("in an unknown state"),
                p.phys_state.as_deref().unwrap_or("physical state unknown")
            );
            let f = if train {
                Finding::fail(ID_FABRIC, msg)
            } else {
                Finding::warn(ID_FABRIC, msg)
            };
            out.push(ev(f).fix("check the cable and switch port (ibstat, ibv_devinfo); on InfiniBand, a subnet manager must run (opensm or the switch's); on a cloud instance, report it to the provider"));
        }
    }
    // GPUDirect RDMA.
    if gpus > 0 {
        if let Some(mods) = facts.modules.value() {
            let peermem = mods
                .iter()
                .any(|m| m.name == "nvidia_peermem" || m.name == "nv_peer_mem");
            if !peermem {
                let msg = "RDMA devices are present but nvidia_peermem is not loaded: unless NCCL can use DMA-BUF (open kernel module, kernel 5.12 or newer), GPU data crosses host memory on its way to the NIC (lower bandwidth, more CPU)";
                let f = if train {
                    Finding::warn(ID_FABRIC, msg)
                } else {
                    Finding::info(ID_FABRIC, msg)
                };
                out.push(f.fix("modprobe nvidia_peermem (and add it to /etc/modules-load.d); check with NCCL_DEBUG=INFO that 'GDRDMA' appears"));
            }
        }
    }
    if !good.is_empty() {
        out.push(
            Finding::pass(ID_FABRIC, format!("RDMA ports up: {}", good.join("; ")))
                .with("ports", &good)
                .with("nics", &nic_ev),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{KernelModule, LoopbackRtt, RdmaPort};

    fn statuses(f: &[Finding]) -> Vec<Status> {
        f.iter().map(|f| f.status).collect()
    }

    #[test]
    fn somaxconn_by_profile() {
        let mut f = super::super::hostcommon::facts_with_gpus(1, (9, 0));
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
    fn loopback_thresholds() {
        let mut f = super::super::hostcommon::facts_with_gpus(1, (9, 0));
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
    fn fabric_none_on_train_with_several_gpus() {
        let mut f = super::super::hostcommon::facts_with_gpus(8, (9, 0));
        f.host.fabric.rdma = Reading::Value(vec![]);
        f.host.fabric.nics = Reading::Value(vec![NetInterface {
            name: "eth0".into(),
            speed_mbps: Some(25000),
            operstate: Some("up".into()),
            driver: Some("ena".into()),
        }]);
        let train = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        let r = run_fabric(&f, &train);
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert!(r[0].message.contains("25 Gb/s"), "{r:#?}");
        assert_eq!(
            statuses(&run_fabric(&f, &Policy::default())),
            vec![Status::Info]
        );
    }

    #[test]
    fn fabric_ports_and_peermem() {
        let mut f = super::super::hostcommon::facts_with_gpus(8, (9, 0));
        let port = |dev: &str, state: &str| RdmaPort {
            device: dev.into(),
            port: 1,
            state: Some(state.into()),
            phys_state: Some(
                if state == "ACTIVE" {
                    "LinkUp"
                } else {
                    "Disabled"
                }
                .into(),
            ),
            rate_gbps: Some(400.0),
            rate_text: Some("400 Gb/sec (4X NDR)".into()),
            link_layer: Some("InfiniBand".into()),
        };
        f.host.fabric.rdma = Reading::Value(vec![port("mlx5_0", "ACTIVE"), port("mlx5_1", "DOWN")]);
        f.host.fabric.nics = Reading::Value(vec![]);
        f.modules = Reading::Value(vec![KernelModule {
            name: "nvidia".into(),
            size: 1,
            used_by: vec![],
            state: "Live".into(),
            taints: "O".into(),
        }]);
        let train = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        let r = run_fabric(&f, &train);
        assert_eq!(
            statuses(&r),
            vec![Status::Fail, Status::Warn, Status::Pass],
            "{r:#?}"
        );
        assert!(r[0].message.contains("mlx5_1"));
        assert!(r[1].message.contains("nvidia_peermem"));
        f.host.fabric.rdma = Reading::unavailable("permission denied");
        assert_eq!(statuses(&run_fabric(&f, &train)), vec![Status::Skip]);
    }
}
