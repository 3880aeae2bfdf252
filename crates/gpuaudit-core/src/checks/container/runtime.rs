//! container.runtime: inside a container or not, the NVIDIA container toolkit, CDI, runtime
//! configuration, device nodes.

use crate::checks::common::{gpu_count, plural};
use crate::checks::cuda::loaded;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{DeviceNode, Facts};
use crate::finding::{Finding, Status};
use crate::parse::host::cudaenv::parse_driver_capabilities;
use crate::policy::Policy;
use crate::reading::Reading;

const ID: &str = "container.runtime";

/// The NVIDIA container toolkit's driver capabilities (what each mounts; the default when
/// unset).
pub const CAPABILITIES_DOC: &str = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html";

pub const CHECK: Check = Check {
    id: ID,
    title: "Container or not; NVIDIA container toolkit, CDI, runtime config, device nodes",
    looks_at: "inside a container or not; NVIDIA container toolkit, CDI specs, docker/containerd \
               runtime config",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Whether gpuaudit runs inside a container (/.dockerenv, /run/.containerenv, the \
               cgroup of PID 1, an overlay root, Kubernetes service-account mounts) and which; \
               the /dev/nvidia* device nodes and their permissions against the GPUs and the \
               user; on a host, the container engines installed, the NVIDIA container toolkit, \
               docker's /etc/docker/daemon.json (one that does not parse: dockerd refuses to \
               start) and containerd's config.toml runtimes, and the CDI specifications in \
               /etc/cdi and /var/run/cdi. Inside a container, NVIDIA_DRIVER_CAPABILITIES: \
               without 'compute' the toolkit mounts no libcuda (unset means utility,compute).",
        why: "A container sees only the GPUs whose device nodes were passed in: a missing \
              /dev/nvidiaN is a GPU you pay for and cannot use, a missing /dev/nvidia-uvm makes \
              every CUDA call fail ('CUDA unknown error' / error 999). On a host, an engine \
              without the NVIDIA runtime starts GPU containers without GPUs ('could not select \
              device driver \"\" with capabilities: [[gpu]]'), and a CDI specification generated \
              for an older driver mounts libraries that no longer exist, so containers fail to \
              start after a driver upgrade.",
        verify: "ls -l /dev/nvidia*\n\
                 cat /proc/1/cgroup; ls -l /.dockerenv /run/.containerenv 2>/dev/null\n\
                 cat /etc/docker/daemon.json; docker info | grep -i runtime\n\
                 grep -n nvidia /etc/containerd/config.toml\n\
                 nvidia-ctk cdi list; ls /etc/cdi /var/run/cdi\n\
                 docker run --rm --gpus all ubuntu nvidia-smi",
        fix: "Host: install the NVIDIA container toolkit and register it: `sudo nvidia-ctk runtime \
              configure --runtime=docker && sudo systemctl restart docker` (or --runtime=containerd); \
              regenerate CDI after every driver upgrade: `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`. \
              Container: start it with `--gpus all` (or `--device nvidia.com/gpu=all` with CDI, \
              or the Kubernetes device plugin's `nvidia.com/gpu` resource), not with hand-picked \
              --device flags.",
    },
    profiles: &[],
    run: run_container,
};

fn is_gpu_node(p: &str) -> Option<u32> {
    p.strip_prefix("/dev/nvidia")?.parse().ok()
}

/// Whether (uid, groups) may open the node read-write.
fn can_open(d: &DeviceNode, uid: u32, groups: &[u32]) -> bool {
    if uid == 0 {
        return true;
    }
    let bits = if d.uid == uid {
        (d.mode >> 6) & 0o7
    } else if groups.contains(&d.gid) {
        (d.mode >> 3) & 0o7
    } else {
        d.mode & 0o7
    };
    bits & 0o6 == 0o6
}

fn run_container(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let c = &facts.host.container;
    let mut out = Vec::new();
    let gpus = gpu_count(facts);
    let inside = c.inside.value().cloned().flatten();

    match &c.inside {
        Reading::Value(Some(kind)) => out.push(
            Finding::info(ID, format!("running inside a {kind} container")).with("signs", &c.signs),
        ),
        Reading::Value(None) => {}
        Reading::Unavailable(r) => out.push(Finding::skip(
            ID,
            format!("could not tell whether this is a container: {r}"),
        )),
    }

    // Device nodes.
    match &c.devices {
        Reading::Value(nodes) => {
            let gpu_nodes: Vec<&DeviceNode> = nodes
                .iter()
                .filter(|d| is_gpu_node(&d.path).is_some() && d.char_device)
                .collect();
            if let Some(n) = gpus.filter(|n| *n > 0) {
                if gpu_nodes.len() < n {
                    let msg = format!(
                        "{} of the {n} GPUs {} a /dev/nvidiaN device node: {}",
                        gpu_nodes.len(),
                        if gpu_nodes.len() == 1 { "has" } else { "have" },
                        if inside.is_some() {
                            "the container was not given the others, and CUDA cannot use them"
                        } else {
                            "CUDA cannot open the others until the nodes exist (nvidia-modprobe creates them; a driver that is not loaded does not)"
                        }
                    );
                    out.push(
                        Finding::fail(ID, msg)
                            .with("nodes", gpu_nodes.iter().map(|d| &d.path).collect::<Vec<_>>())
                            .fix(if inside.is_some() {
                                "restart the container with --gpus all (or the CDI device nvidia.com/gpu=all, or request nvidia.com/gpu in Kubernetes)"
                            } else {
                                "load the driver (modprobe nvidia) and run nvidia-smi once as root, or enable nvidia-persistenced"
                            }),
                    );
                }
                let has = |p: &str| nodes.iter().any(|d| d.path == p);
                for (node, cost) in [
                    ("/dev/nvidiactl", "no CUDA or NVML call can reach the driver"),
                    ("/dev/nvidia-uvm", "cuInit fails ('CUDA unknown error', error 999): the unified-memory module's node is missing"),
                ] {
                    if !has(node) {
                        let in_container = inside.is_some();
                        let f = if in_container || node == "/dev/nvidiactl" {
                            Finding::fail(ID, format!("{node} is missing: {cost}"))
                        } else {
                            // On a host, nvidia-modprobe creates the UVM node on first CUDA use.
                            Finding::info(ID, format!("{node} does not exist yet; nvidia-modprobe creates it at the first CUDA call (if nvidia_uvm can load)"))
                        };
                        out.push(f.fix(if in_container {
                            "start the container through the NVIDIA container toolkit (--gpus all / CDI) rather than with --device flags"
                        } else {
                            "modprobe nvidia_uvm && nvidia-modprobe -u -c=0"
                        }));
                    }
                }
                if let Reading::Value((uid, groups)) = &c.identity {
                    let denied: Vec<&DeviceNode> = nodes
                        .iter()
                        .filter(|d| d.char_device && !can_open(d, *uid, groups))
                        .collect();
                    if !denied.is_empty() {
                        out.push(
                            Finding::fail(
                                ID,
                                format!(
                                    "user {uid} cannot open {} read-write: CUDA reports no device (or 'insufficient permissions') for this user",
                                    denied.iter().map(|d| format!("{} ({:o} {}:{})", d.path, d.mode, d.uid, d.gid)).collect::<Vec<_>>().join(", ")
                                ),
                            )
                            .with("uid", uid)
                            .with("groups", groups)
                            .fix("add the user to the group that owns the nodes (often 'video'), or set NVreg_DeviceFileMode=0666 in /etc/modprobe.d/nvidia.conf and reload the driver"),
                        );
                    }
                }
            }
            if nodes.is_empty() && gpus.is_none_or(|n| n == 0) {
                out.push(Finding::info(ID, "no /dev/nvidia* device node".to_string()));
            }
        }
        Reading::Unavailable(r) => out.push(Finding::skip(
            ID,
            format!("could not list /dev/nvidia*: {r}"),
        )),
    }

    if inside.is_some() {
        out.extend(judge_capabilities(facts, gpus));
    }
    if inside.is_none() && c.inside.is_value() {
        judge_host(facts, &mut out);
    }

    let all_fine = out
        .iter()
        .all(|f| matches!(f.status, Status::Pass | Status::Info));
    // "Every GPU's node is there" says nothing on a machine without GPUs.
    let has_gpus = gpus.is_some_and(|n| n > 0);
    if all_fine && has_gpus && (out.is_empty() || inside.is_some()) {
        let msg = match &inside {
            Some(kind) => format!("inside a {kind} container with every GPU's device node present and usable"),
            None => "not in a container; the GPUs' device nodes are present and the container set-up is complete".to_string(),
        };
        out.push(Finding::pass(ID, msg));
    }
    out
}

/// Inside a container: NVIDIA_DRIVER_CAPABILITIES decides which driver libraries the NVIDIA
/// container toolkit mounted; without `compute` there is no libcuda, so CUDA cannot run.
fn judge_capabilities(facts: &Facts, gpus: Option<usize>) -> Option<Finding> {
    if gpus.is_none_or(|n| n == 0) {
        return None;
    }
    let value = facts
        .host
        .env
        .value()
        .and_then(|e| e.get("NVIDIA_DRIVER_CAPABILITIES"));
    let caps = parse_driver_capabilities(value);
    if caps.has("compute") {
        return None;
    }
    let shown = value.unwrap_or("");
    let libcuda = facts
        .host
        .libraries
        .value()
        .map(|l| loaded(l, "libcuda").is_some());
    let fix = "restart the container with the compute capability: `docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility ...` (or =all; Kubernetes: the same variable in the pod spec)";
    let f = match libcuda {
        Some(true) => Finding::info(ID, format!("the container was started with NVIDIA_DRIVER_CAPABILITIES={shown}, without 'compute', yet a libcuda is on the loader's path (mounted another way, e.g. through CDI)")),
        Some(false) => Finding::fail(ID, format!("the container was started with NVIDIA_DRIVER_CAPABILITIES={shown}, without 'compute': the NVIDIA container toolkit mounted no CUDA library (no libcuda on the loader's path), so CUDA cannot run in this container")).fix(fix),
        None => Finding::warn(ID, format!("the container was started with NVIDIA_DRIVER_CAPABILITIES={shown}, without 'compute': the NVIDIA container toolkit mounts no CUDA library then, so CUDA cannot run unless libcuda came another way")).fix(fix),
    };
    Some(
        f.with("NVIDIA_DRIVER_CAPABILITIES", shown)
            .with("granted", &caps.granted)
            .with("source", CAPABILITIES_DOC),
    )
}

fn judge_host(facts: &Facts, out: &mut Vec<Finding>) {
    let c = &facts.host.container;
    let engines = c
        .toolkit
        .value()
        .map(|t| t.engines.clone())
        .unwrap_or_default();
    let toolkit = c
        .toolkit
        .value()
        .map(|t| t.found.clone())
        .unwrap_or_default();
    let docker_present = engines.iter().any(|e| e.ends_with("dockerd"))
        || matches!(c.docker, Reading::Value(Some(_)));
    let containerd_present = engines.iter().any(|e| e.ends_with("containerd"))
        || matches!(c.containerd, Reading::Value(Some(_)));
    let cdi_specs: Vec<_> = c
        .cdi
        .value()
        .map(|v| v.iter().filter(|s| s.error.is_none()).collect())
        .unwrap_or_default();
    let has_gpus = gpu_count(facts).is_some_and(|n| n > 0);

    if let Reading::Unavailable(r) = &c.toolkit {
        out.push(Finding::skip(
            ID,
            format!("could not look for the container engines and toolkit: {r}"),
        ));
    }
    if engines.is_empty() && !docker_present && !containerd_present {
        out.push(
            Finding::info(
                ID,
                "not in a container; no container engine installed".to_string(),
            )
            .with("toolkit", &toolkit),
        );
    } else if toolkit.is_empty() && cdi_specs.is_empty() && has_gpus {
        out.push(
            Finding::warn(ID, format!("container engines are installed ({}) but not the NVIDIA container toolkit: GPU containers start without GPUs ('could not select device driver \"\" with capabilities: [[gpu]]')", engines.join(", ")))
                .with("engines", &engines)
                .fix("install nvidia-container-toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker` (or containerd)"),
        );
    }

    match &c.docker {
        Reading::Unavailable(r) => out.push(
            Finding::skip(ID, format!("cannot judge docker's configuration: {r} (dockerd itself refuses to start with an invalid daemon.json)"))
                .fix("fix the JSON: `python3 -m json.tool /etc/docker/daemon.json` points at the error"),
        ),
        Reading::Value(Some(d)) if d.invalid.is_some() => {
            let why = d.invalid.as_deref().unwrap_or_default();
            out.push(
                Finding::fail(ID, format!("{why}: dockerd refuses to start with a daemon.json it cannot parse ('unable to configure the Docker daemon with file /etc/docker/daemon.json'), so no container starts on this machine after the next docker restart or reboot"))
                    .with("file", "/etc/docker/daemon.json")
                    .fix("fix the file (`python3 -m json.tool /etc/docker/daemon.json` points at the error), then `sudo systemctl restart docker`; `sudo nvidia-ctk runtime configure --runtime=docker` rewrites it with the nvidia runtime registered"),
            );
        }
        Reading::Value(Some(d)) => {
            let nvidia = d.runtimes.iter().any(|(n, p)| n == "nvidia" || p.contains("nvidia-container-runtime"));
            if !nvidia && has_gpus {
                let cdi = d.cdi_enabled == Some(true) && !cdi_specs.is_empty();
                let msg = "/etc/docker/daemon.json registers no nvidia runtime: `--runtime=nvidia`, compose files with `runtime: nvidia` and Kubernetes nodes on docker fail; only `--gpus` (through the toolkit's hook) works";
                let f = if cdi {
                    Finding::info(ID, format!("{msg}; CDI is enabled, so `--device nvidia.com/gpu=all` works too"))
                } else {
                    Finding::warn(ID, msg)
                };
                out.push(
                    f.with("runtimes", &d.runtimes)
                        .with("default_runtime", &d.default_runtime)
                        .fix("`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`"),
                );
            } else if nvidia {
                out.push(
                    Finding::pass(ID, format!("docker has the nvidia runtime{}", match &d.default_runtime {
                        Some(r) => format!(" (default runtime: {r})"),
                        None => String::new(),
                    }))
                    .with("runtimes", &d.runtimes),
                );
            }
        }
        Reading::Value(None) => {
            if docker_present && has_gpus {
                out.push(
                    Finding::info(ID, "dockerd is installed without /etc/docker/daemon.json: no nvidia runtime registered; `--gpus all` still works through the toolkit's hook")
                        .fix("`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`"),
                );
            }
        }
    }

    match &c.containerd {
        Reading::Unavailable(r) => out.push(Finding::skip(
            ID,
            format!("cannot judge containerd's configuration: {r}"),
        )),
        Reading::Value(Some(cd)) => {
            let nvidia = cd.runtimes.iter().any(|r| r.contains("nvidia"));
            if !nvidia && cd.cdi_enabled != Some(true) && has_gpus {
                out.push(
                    Finding::warn(ID, "/etc/containerd/config.toml has no nvidia runtime and CDI is off: Kubernetes pods on this node get no GPU unless the GPU operator manages the runtime")
                        .with("runtimes", &cd.runtimes)
                        .fix("`sudo nvidia-ctk runtime configure --runtime=containerd && sudo systemctl restart containerd`"),
                );
            }
        }
        Reading::Value(None) => {}
    }

    if let Reading::Value(specs) = &c.cdi {
        let driver = facts.driver.version.value();
        for s in specs {
            if let Some(e) = &s.error {
                out.push(Finding::skip(
                    ID,
                    format!("cannot read the CDI specification {}: {e}", s.path),
                ));
                continue;
            }
            if let Some(d) = driver {
                if !s.libcuda_versions.is_empty() && !s.libcuda_versions.iter().any(|v| v == d) {
                    out.push(
                        Finding::warn(ID, format!("the CDI specification {} was generated for driver {} but the driver is {d}: containers that request its devices fail to start (the libraries it mounts are gone)", s.path, s.libcuda_versions.join(", ")))
                            .fix(format!("`sudo nvidia-ctk cdi generate --output={}`", s.path)),
                    );
                }
            }
            let indexed = s
                .devices
                .iter()
                .filter(|d| d.parse::<u32>().is_ok())
                .count();
            if let Some(n) = gpu_count(facts) {
                if s.kind.as_deref() == Some("nvidia.com/gpu") && indexed > 0 && indexed < n {
                    out.push(
                        Finding::warn(ID, format!("the CDI specification {} lists {} but the machine has {n}: the others cannot be requested", s.path, plural(indexed, "GPU", "GPUs")))
                            .fix(format!("`sudo nvidia-ctk cdi generate --output={}`", s.path)),
                    );
                }
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{CdiSpec, ContainerToolkit, DockerDaemon};
    use crate::testing::{statuses, Machine};

    fn node(p: &str, mode: u32) -> DeviceNode {
        DeviceNode {
            path: p.into(),
            mode,
            uid: 0,
            gid: 0,
            char_device: true,
        }
    }

    fn base(inside: Option<&str>) -> Facts {
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
        let c = &mut f.host.container;
        c.inside = Reading::Value(inside.map(str::to_string));
        c.devices = Reading::Value(vec![
            node("/dev/nvidia0", 0o666),
            node("/dev/nvidia1", 0o666),
            node("/dev/nvidiactl", 0o666),
            node("/dev/nvidia-uvm", 0o666),
        ]);
        c.identity = Reading::Value((1000, vec![1000]));
        c.toolkit = Reading::Value(ContainerToolkit::default());
        c.docker = Reading::Value(None);
        c.containerd = Reading::Value(None);
        c.cdi = Reading::Value(vec![]);
        f
    }

    #[test]
    fn a_container_without_gpus_claims_no_gpu_device_node() {
        // Seen on the CI machine: a docker container with no GPU was told its GPUs' device
        // nodes were all present.
        let mut f = base(Some("docker"));
        f.gpus = Reading::Value(Vec::new());
        f.pci_gpus = Reading::Value(Vec::new());
        f.host.container.devices = Reading::Value(Vec::new());
        let r = run_container(&f, &Policy::default());
        assert!(r.iter().all(|x| !x.message.contains("every GPU")), "{r:#?}");
        assert!(
            r.iter().any(|x| x.message.contains("no /dev/nvidia*")),
            "{r:#?}"
        );
        assert!(r.iter().all(|x| x.status < Status::Warn), "{r:#?}");
    }

    #[test]
    fn control_and_uvm_nodes_on_a_host() {
        // On a host nvidia-modprobe creates /dev/nvidia-uvm at the first CUDA call; the
        // control node must be there.
        let mut f = base(None);
        f.host.container.devices = Reading::Value(vec![
            node("/dev/nvidia0", 0o666),
            node("/dev/nvidia1", 0o666),
            node("/dev/nvidiactl", 0o666),
        ]);
        let r = run_container(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Info, Status::Info], "{r:#?}");
        assert!(r[0].message.contains("/dev/nvidia-uvm does not exist yet"));
        f.host.container.devices = Reading::Value(vec![
            node("/dev/nvidia0", 0o666),
            node("/dev/nvidia1", 0o666),
            node("/dev/nvidia-uvm", 0o666),
        ]);
        let r = run_container(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail, "{r:#?}");
        assert!(r[0].message.contains("/dev/nvidiactl is missing"));
    }

    #[test]
    fn bare_host_without_engines_is_info() {
        let f = base(None);
        let r = run_container(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Info], "{r:#?}");
    }

    #[test]
    fn container_missing_gpu_node_and_uvm() {
        let mut f = base(Some("docker"));
        f.host.container.devices = Reading::Value(vec![
            node("/dev/nvidia0", 0o666),
            node("/dev/nvidiactl", 0o666),
        ]);
        let r = run_container(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Info);
        assert_eq!(
            r.iter().filter(|x| x.status == Status::Fail).count(),
            2,
            "{r:#?}"
        );
        // The verb agrees with the count of GPUs that have one.
        let has = |r: &[Finding], text: &str| r.iter().any(|x| x.message.starts_with(text));
        assert!(
            has(&r, "1 of the 2 GPUs has a /dev/nvidiaN device node"),
            "{r:#?}"
        );
        f.host.container.devices = Reading::Value(vec![node("/dev/nvidiactl", 0o666)]);
        let r = run_container(&f, &Policy::default());
        assert!(
            has(&r, "0 of the 2 GPUs have a /dev/nvidiaN device node"),
            "{r:#?}"
        );
        let mut f = base(Some("docker"));
        f.gpus = Reading::Value(
            Machine::healthy("h200-sxm-141gb", 3)
                .build()
                .gpu_list()
                .to_vec(),
        );
        let r = run_container(&f, &Policy::default());
        assert!(
            has(&r, "2 of the 3 GPUs have a /dev/nvidiaN device node"),
            "{r:#?}"
        );
    }

    #[test]
    fn permissions() {
        let mut f = base(Some("docker"));
        f.host.container.devices = Reading::Value(vec![
            node("/dev/nvidia0", 0o660),
            node("/dev/nvidia1", 0o666),
            node("/dev/nvidiactl", 0o666),
            node("/dev/nvidia-uvm", 0o666),
        ]);
        let r = run_container(&f, &Policy::default());
        assert!(r.iter().any(|x| x.status == Status::Fail && x.message.contains("cannot open /dev/nvidia0")), "{r:#?}");
        f.host.container.identity = Reading::Value((0, vec![0]));
        assert!(run_container(&f, &Policy::default())
            .iter()
            .all(|x| x.status != Status::Fail));
    }

    #[test]
    fn docker_without_nvidia_runtime_warns() {
        let mut f = base(None);
        f.host.container.toolkit = Reading::Value(ContainerToolkit {
            found: vec!["/usr/bin/nvidia-container-runtime-hook".into()],
            engines: vec!["/usr/bin/dockerd".into()],
        });
        f.host.container.docker = Reading::Value(Some(DockerDaemon {
            runtimes: vec![],
            default_runtime: None,
            cdi_enabled: None,
            invalid: None,
        }));
        let r = run_container(&f, &Policy::default());
        assert!(
            r.iter()
                .any(|x| x.status == Status::Warn && x.message.contains("no nvidia runtime")),
            "{r:#?}"
        );
        f.host.container.docker = Reading::unavailable(
            "/etc/docker/daemon.json: not JSON: expected value at line 1 column 1",
        );
        let r = run_container(&f, &Policy::default());
        assert!(
            r.iter()
                .any(|x| x.status == Status::Skip && x.message.contains("not JSON")),
            "{r:#?}"
        );
        f.host.container.docker = Reading::Value(Some(DockerDaemon {
            runtimes: vec![("nvidia".into(), "nvidia-container-runtime".into())],
            default_runtime: Some("nvidia".into()),
            cdi_enabled: None,
            invalid: None,
        }));
        let r = run_container(&f, &Policy::default());
        assert!(r.iter().all(|x| x.status < Status::Warn), "{r:#?}");
    }

    #[test]
    fn engine_without_toolkit_and_stale_cdi() {
        let mut f = base(None);
        f.host.container.toolkit = Reading::Value(ContainerToolkit {
            found: vec![],
            engines: vec!["/usr/bin/containerd".into()],
        });
        let r = run_container(&f, &Policy::default());
        assert!(
            r.iter().any(|x| x.status == Status::Warn
                && x.message.contains("not the NVIDIA container toolkit")),
            "{r:#?}"
        );
        f.host.container.cdi = Reading::Value(vec![CdiSpec {
            path: "/etc/cdi/nvidia.yaml".into(),
            kind: Some("nvidia.com/gpu".into()),
            devices: vec!["0".into(), "all".into()],
            libcuda_versions: vec!["550.54.15".into()],
            error: None,
        }]);
        let r = run_container(&f, &Policy::default());
        assert!(
            r.iter()
                .any(|x| x.message.contains("generated for driver 550.54.15")),
            "{r:#?}"
        );
        assert!(
            r.iter().any(|x| x.message.contains("lists 1 GPU")),
            "{r:#?}"
        );
    }

    #[test]
    fn unread_is_skip() {
        let f = Facts::empty(crate::facts::Origin::Live, "nope");
        let r = run_container(&f, &Policy::default());
        assert!(!r.is_empty());
        assert!(r.iter().all(|x| x.status == Status::Skip));
    }

    #[test]
    fn a_daemon_json_that_does_not_parse_fails() {
        // Seen: skip "cannot judge docker's configuration", though dockerd refuses to start.
        let mut f = base(None);
        f.host.container.toolkit = Reading::Value(ContainerToolkit {
            found: vec!["/usr/bin/nvidia-ctk".into()],
            engines: vec!["/usr/bin/dockerd".into()],
        });
        f.host.container.docker = Reading::Value(Some(DockerDaemon {
            invalid: Some(
                "/etc/docker/daemon.json: malformed: not JSON: trailing comma at line 7 column 3"
                    .into(),
            ),
            ..DockerDaemon::default()
        }));
        let r = run_container(&f, &Policy::default());
        let bad: Vec<&Finding> = r.iter().filter(|x| x.status == Status::Fail).collect();
        assert_eq!(bad.len(), 1, "{r:#?}");
        assert!(bad[0].message.contains("line 7 column 3"));
        assert!(bad[0].message.contains("dockerd refuses to start"));
        assert!(bad[0]
            .fix
            .as_deref()
            .is_some_and(|x| x.contains("json.tool")));
        assert!(!r
            .iter()
            .any(|x| x.message.contains("registers no nvidia runtime")));
        // Unreadable is still a skip.
        f.host.container.docker =
            Reading::unavailable("/etc/docker/daemon.json: permission denied");
        let r = run_container(&f, &Policy::default());
        assert!(r
            .iter()
            .any(|x| x.status == Status::Skip && x.message.contains("permission denied")));
        assert!(!r.iter().any(|x| x.status == Status::Fail));
    }

    fn caps(value: Option<&str>, libcuda: Option<bool>) -> Vec<Finding> {
        let mut f = base(Some("docker"));
        f.host.env = Reading::Value(crate::facts::EnvFacts {
            vars: value
                .map(|v| vec![("NVIDIA_DRIVER_CAPABILITIES".to_string(), v.to_string())])
                .unwrap_or_default(),
        });
        f.host.libraries = match libcuda {
            Some(true) => Reading::Value(vec![crate::checks::cuda::copy(
                "libcuda",
                "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                "libcuda.so.580.159.04",
                Some("580.159.04"),
                crate::facts::LibrarySource::LdCache,
            )]),
            Some(false) => Reading::Value(vec![]),
            None => Reading::unavailable("not listed"),
        };
        run_container(&f, &Policy::default())
    }

    #[test]
    fn container_driver_capabilities() {
        let r = caps(Some("utility"), Some(false));
        assert_eq!(statuses(&r), vec![Status::Info, Status::Fail], "{r:#?}");
        assert!(r[1]
            .message
            .contains("NVIDIA_DRIVER_CAPABILITIES=utility, without 'compute'"));
        assert!(r[1].message.contains("CUDA cannot run in this container"));
        assert!(r[1].fix.as_deref().is_some_and(
            |x| x.contains("--gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility")
        ));
        let r = caps(Some("utility"), Some(true));
        assert_eq!(
            statuses(&r),
            vec![Status::Info, Status::Info, Status::Pass],
            "{r:#?}"
        );
        let r = caps(Some("video,utility"), None);
        assert_eq!(statuses(&r), vec![Status::Info, Status::Warn]);
        // The default (unset) and "all" grant compute.
        for v in [None, Some("all"), Some("compute,utility")] {
            let r = caps(v, Some(false));
            assert_eq!(statuses(&r), vec![Status::Info, Status::Pass], "{v:?}");
        }
        // On a host the variable means nothing.
        let mut f = base(None);
        f.host.env = Reading::Value(crate::facts::EnvFacts {
            vars: vec![("NVIDIA_DRIVER_CAPABILITIES".into(), "utility".into())],
        });
        assert_eq!(
            statuses(&run_container(&f, &Policy::default())),
            vec![Status::Info]
        );
    }

    #[test]
    fn who_may_open_a_device_node() {
        let n = |mode: u32, uid: u32, gid: u32| DeviceNode {
            path: "/dev/nvidia0".into(),
            mode,
            uid,
            gid,
            char_device: true,
        };
        // Owner bits for the owner, group bits for a member, the rest for others.
        assert!(can_open(&n(0o600, 1000, 0), 1000, &[]));
        assert!(!can_open(&n(0o400, 1000, 0), 1000, &[]));
        assert!(
            !can_open(&n(0o066, 1000, 0), 1000, &[44]),
            "the owner gets the owner's bits only"
        );
        assert!(can_open(&n(0o060, 0, 44), 1000, &[44]));
        assert!(!can_open(&n(0o040, 0, 44), 1000, &[44]));
        assert!(
            !can_open(&n(0o606, 0, 44), 1000, &[44]),
            "a member gets the group's bits only"
        );
        assert!(can_open(&n(0o006, 0, 44), 1000, &[1000]));
        assert!(!can_open(&n(0o660, 0, 44), 1000, &[1000]));
        assert!(!can_open(&n(0o004, 0, 44), 1000, &[1000]));
        assert!(can_open(&n(0o000, 5, 5), 0, &[]), "root opens anything");
    }

    #[test]
    fn host_engines_runtimes_and_cdi() {
        use crate::facts::ContainerdConfig;
        let mut f = base(None);
        f.host.container.toolkit = Reading::Value(ContainerToolkit {
            found: vec!["/usr/bin/nvidia-ctk".into()],
            engines: vec!["/usr/bin/dockerd".into(), "/usr/bin/containerd".into()],
        });
        // dockerd without daemon.json: --gpus still works.
        let r = run_container(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Info], "{r:#?}");
        assert!(r[0].message.contains("without /etc/docker/daemon.json"));
        // containerd: no nvidia runtime and CDI off warns; either one is enough.
        let cd = |runtimes: &[&str], cdi: Option<bool>| {
            Reading::Value(Some(ContainerdConfig {
                runtimes: runtimes.iter().map(|r| r.to_string()).collect(),
                default_runtime: None,
                cdi_enabled: cdi,
            }))
        };
        f.host.container.containerd = cd(&["runc"], Some(false));
        let r = run_container(&f, &Policy::default());
        assert!(
            r.iter()
                .any(|x| x.status == Status::Warn && x.message.contains("containerd")),
            "{r:#?}"
        );
        for (rt, cdi) in [(&["runc", "nvidia"][..], None), (&["runc"][..], Some(true))] {
            f.host.container.containerd = cd(rt, cdi);
            let r = run_container(&f, &Policy::default());
            assert!(
                !r.iter().any(|x| x.message.contains("containerd")),
                "{rt:?} {cdi:?}: {r:#?}"
            );
        }
        f.host.container.containerd = Reading::unavailable("not TOML");
        let r = run_container(&f, &Policy::default());
        assert!(r
            .iter()
            .any(|x| x.status == Status::Skip && x.message.contains("not TOML")));
        f.host.container.containerd = Reading::Value(None);
        // docker with CDI enabled and a spec: info instead of warn.
        f.host.container.docker = Reading::Value(Some(DockerDaemon {
            cdi_enabled: Some(true),
            ..DockerDaemon::default()
        }));
        let spec = |devices: &[&str], libcuda: &[&str]| CdiSpec {
            path: "/etc/cdi/nvidia.yaml".into(),
            kind: Some("nvidia.com/gpu".into()),
            devices: devices.iter().map(|d| d.to_string()).collect(),
            libcuda_versions: libcuda.iter().map(|d| d.to_string()).collect(),
            error: None,
        };
        f.host.container.cdi = Reading::Value(vec![spec(&["0", "1", "all"], &["580.159.04"])]);
        let r = run_container(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Info], "{r:#?}");
        assert!(r[0].message.contains("CDI is enabled"));
        // A spec of the right driver and every GPU: nothing to say; one of UUIDs only: no count.
        f.host.container.cdi = Reading::Value(vec![spec(&["GPU-0aaa"], &[])]);
        let r = run_container(&f, &Policy::default());
        assert!(!r.iter().any(|x| x.message.contains("lists")), "{r:#?}");
        // A spec that could not be read: skip with its reason.
        let mut broken = spec(&[], &[]);
        broken.error = Some("binary content".into());
        f.host.container.cdi = Reading::Value(vec![broken]);
        let r = run_container(&f, &Policy::default());
        assert!(r
            .iter()
            .any(|x| x.status == Status::Skip && x.message.contains("binary content")));
        // The toolkit's pieces unreadable: skip.
        f.host.container.toolkit = Reading::unavailable("permission denied");
        let r = run_container(&f, &Policy::default());
        assert!(r
            .iter()
            .any(|x| x.status == Status::Skip && x.message.contains("permission denied")));
        // Without GPUs, none of the runtime warnings.
        let mut g = base(None);
        g.gpus = Reading::Value(vec![]);
        g.pci_gpus = Reading::Value(vec![]);
        g.host.container.devices = Reading::Value(vec![]);
        g.host.container.toolkit = Reading::Value(ContainerToolkit {
            found: vec![],
            engines: vec!["/usr/bin/dockerd".into()],
        });
        g.host.container.docker = Reading::Value(Some(DockerDaemon::default()));
        let r = run_container(&g, &Policy::default());
        assert!(r.iter().all(|x| x.status < Status::Warn), "{r:#?}");
    }

    #[test]
    fn what_counts_as_docker_and_its_nvidia_runtime() {
        // A config file without the program still means the engine is there.
        let mut f = base(None);
        f.host.container.docker = Reading::Value(Some(DockerDaemon::default()));
        let r = run_container(&f, &Policy::default());
        assert!(
            !r.iter()
                .any(|x| x.message.contains("no container engine installed")),
            "{r:#?}"
        );
        assert!(
            r.iter().any(|x| x.status == Status::Warn
                && x.message.contains("not the NVIDIA container toolkit")),
            "{r:#?}"
        );
        let mut g = base(None);
        g.host.container.containerd =
            Reading::Value(Some(crate::facts::ContainerdConfig::default()));
        let r = run_container(&g, &Policy::default());
        assert!(
            !r.iter()
                .any(|x| x.message.contains("no container engine installed")),
            "{r:#?}"
        );
        // The nvidia runtime by name, or by the program it runs.
        for (name, path) in [("nvidia", ""), ("nv", "/usr/bin/nvidia-container-runtime")] {
            f.host.container.docker = Reading::Value(Some(DockerDaemon {
                runtimes: vec![(name.into(), path.into())],
                ..DockerDaemon::default()
            }));
            let r = run_container(&f, &Policy::default());
            assert!(
                r.iter().any(|x| x.status == Status::Pass
                    && x.message.starts_with("docker has the nvidia runtime")),
                "{name}: {r:#?}"
            );
        }
        f.host.container.docker = Reading::Value(Some(DockerDaemon {
            runtimes: vec![("runc".into(), "runc".into())],
            default_runtime: Some("runc".into()),
            ..DockerDaemon::default()
        }));
        assert!(
            run_container(&f, &Policy::default())
                .iter()
                .any(|x| x.status == Status::Warn
                    && x.message.contains("registers no nvidia runtime"))
        );
        // CDI makes it info only when enabled in docker and a spec is there.
        let spec = CdiSpec {
            path: "/etc/cdi/nvidia.yaml".into(),
            kind: Some("nvidia.com/gpu".into()),
            devices: vec!["all".into()],
            libcuda_versions: vec![],
            error: None,
        };
        for (cdi, specs, want) in [
            (Some(true), vec![], Status::Warn),
            (None, vec![spec.clone()], Status::Warn),
            (Some(true), vec![spec.clone()], Status::Info),
        ] {
            f.host.container.docker = Reading::Value(Some(DockerDaemon {
                cdi_enabled: cdi,
                ..DockerDaemon::default()
            }));
            f.host.container.cdi = Reading::Value(specs);
            let r = run_container(&f, &Policy::default());
            let st = r
                .iter()
                .find(|x| x.message.contains("registers no nvidia runtime"))
                .map(|x| x.status);
            assert_eq!(st, Some(want), "{cdi:?}: {r:#?}");
        }
    }

    #[test]
    fn no_device_node_is_said_only_without_gpus() {
        let mut f = base(Some("docker"));
        f.host.container.devices = Reading::Value(vec![]);
        let r = run_container(&f, &Policy::default());
        assert!(
            !r.iter().any(|x| x.message == "no /dev/nvidia* device node"),
            "{r:#?}"
        );
        assert!(
            r.iter().any(|x| x.message.contains("0 of the 2 GPUs")),
            "{r:#?}"
        );
    }
}
