//! Containers: whether we are in one, the engines and the NVIDIA container toolkit on a host,
//! their configuration, CDI specifications, /dev/nvidia* nodes, and who we are.

use crate::root::RootFs;
use crate::root::{abs, join, FileKind};
use gpuaudit_core::facts::{
    CdiSpec, ContainerFacts, ContainerToolkit, ContainerdConfig, DeviceNode, DockerDaemon,
    EnvFacts, Mount,
};
use gpuaudit_core::parse::host::container::{
    container_from_cgroup, parse_cdi, parse_containerd_toml, parse_daemon_json,
};
use gpuaudit_core::parse::host::listing::{
    format_devices, format_identity, parse_devices, parse_identity,
};
use gpuaudit_core::parse::ParseError;
use gpuaudit_core::reading::Reading;

pub const DEVICES_FILE: &str = "cmd/dev-nodes.txt";
pub const IDENTITY_FILE: &str = "cmd/id.txt";
pub const DOCKER: &str = "etc/docker/daemon.json";
pub const CONTAINERD: &str = "etc/containerd/config.toml";
pub const CDI_DIRS: &[&str] = &["etc/cdi", "var/run/cdi", "run/cdi"];

/// Programs of the NVIDIA container toolkit, and its configuration.
pub const TOOLKIT_PATHS: &[&str] = &[
    "usr/bin/nvidia-container-runtime",
    "usr/bin/nvidia-container-runtime-hook",
    "usr/bin/nvidia-container-cli",
    "usr/bin/nvidia-ctk",
    "usr/local/bin/nvidia-container-runtime",
    "usr/local/bin/nvidia-ctk",
    "etc/nvidia-container-runtime/config.toml",
];

/// Container engines' programs.
pub const ENGINE_PATHS: &[&str] = &[
    "usr/bin/dockerd",
    "usr/sbin/dockerd",
    "usr/local/bin/dockerd",
    "usr/bin/containerd",
    "usr/local/bin/containerd",
    "usr/bin/podman",
    "usr/bin/crio",
    "usr/local/bin/crio",
];

/// A config file: `Value(None)` when absent, `Unavailable` when unreadable or not parseable.
fn config<T>(
    root: &RootFs,
    rel: &str,
    parse: impl Fn(&str) -> Result<T, ParseError>,
) -> Reading<Option<T>> {
    match root.read_text(rel) {
        Ok(None) => Reading::Value(None),
        Ok(Some(t)) => match parse(&t) {
            Ok(v) => Reading::Value(Some(v)),
            Err(e) => Reading::unavailable(format!("{}: {e}", abs(rel))),
        },
        Err(e) => Reading::unavailable(e),
    }
}

/// /etc/docker/daemon.json. One that does not parse is kept as a [`DockerDaemon`] with the
/// parse error in `invalid` (dockerd refuses to start with it: that is the finding); only a
/// file that could not be read at all is `Unavailable`.
pub fn read_docker(root: &RootFs) -> Reading<Option<DockerDaemon>> {
    match root.read_text(DOCKER) {
        Ok(None) => Reading::Value(None),
        Ok(Some(t)) => Reading::Value(Some(parse_daemon_json(&t).unwrap_or_else(|e| {
            DockerDaemon {
                invalid: Some(format!("{}: {e}", abs(DOCKER))),
                ..DockerDaemon::default()
            }
        }))),
        Err(e) => Reading::unavailable(e),
    }
}

/// containerd's config. A snapshot keeps it reduced to what the check reads (the runtimes
/// and CDI settings): its registry credentials stay home.
pub fn read_containerd(root: &RootFs) -> Reading<Option<ContainerdConfig>> {
    let r = config(&root.unrecorded(), CONTAINERD, parse_containerd_toml);
    match &r {
        Reading::Value(Some(cd)) => root.record(CONTAINERD, containerd_toml(cd)),
        Reading::Value(None) => {}
        Reading::Unavailable(why) => root.record_mark(CONTAINERD, why),
    }
    r
}

/// containerd's config reduced to what the check reads (its registry credentials stay home).
fn containerd_toml(c: &ContainerdConfig) -> String {
    let mut s = String::from(
        "# reduced by gpuaudit collect: only the runtimes and CDI settings\nversion = 2\n",
    );
    s.push_str("[plugins.\"io.containerd.grpc.v1.cri\"]\n");
    if let Some(b) = c.cdi_enabled {
        s.push_str(&format!("enable_cdi = {b}\n"));
    }
    s.push_str("[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n");
    if let Some(d) = &c.default_runtime {
        s.push_str(&format!("default_runtime_name = {}\n", toml_str(d)));
    }
    for r in &c.runtimes {
        s.push_str(&format!(
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.{}]\n",
            toml_str(r)
        ));
    }
    s
}

fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

pub fn cdi_files(root: &RootFs) -> Vec<String> {
    let mut v = Vec::new();
    for d in CDI_DIRS {
        for n in root.children(d) {
            if n.ends_with(".yaml") || n.ends_with(".yml") || n.ends_with(".json") {
                v.push(join(d, &n));
            }
        }
    }
    v
}

fn read_cdi(root: &RootFs) -> Reading<Vec<CdiSpec>> {
    let mut specs = Vec::new();
    for f in cdi_files(root) {
        match root.read_text(&f) {
            Ok(Some(t)) => specs.push(parse_cdi(&abs(&f), &t)),
            Ok(None) => {}
            Err(e) => specs.push(CdiSpec {
                path: abs(&f),
                kind: None,
                devices: vec![],
                libcuda_versions: vec![],
                error: Some(e),
            }),
        }
    }
    Reading::Value(specs)
}

/// Signs of a container, and the kind they point to.
fn detect(
    root: &RootFs,
    env: &EnvFacts,
    mounts: Option<&[Mount]>,
) -> (Option<String>, Vec<String>) {
    let mut signs = Vec::new();
    let mut kinds: Vec<&str> = Vec::new();
    if root.exists(".dockerenv") {
        signs.push("/.dockerenv exists".into());
        kinds.push("docker");
    }
    if root.exists("run/.containerenv") {
        signs.push("/run/.containerenv exists".into());
        kinds.push("podman");
    }
    if let Ok(Some(cg)) = root.read_text("proc/1/cgroup") {
        if let Some(k) = container_from_cgroup(&cg) {
            signs.push(format!("/proc/1/cgroup names {k}"));
            kinds.push(k);
        }
    }
    if env.get("KUBERNETES_SERVICE_HOST").is_some() {
        signs.push("KUBERNETES_SERVICE_HOST is set".into());
        kinds.push("kubernetes");
    }
    if let Some(c) = env.get("container").filter(|c| !c.is_empty()) {
        signs.push(format!("container={c} is set"));
        kinds.push(match c {
            "podman" => "podman",
            "docker" => "docker",
            "lxc" => "lxc",
            "systemd-nspawn" => "systemd-nspawn",
            _ => "container",
        });
    }
    if let Some(m) = mounts {
        if m.iter()
            .any(|m| m.target.ends_with("/secrets/kubernetes.io/serviceaccount"))
        {
            signs.push("a Kubernetes service-account secret is mounted".into());
            kinds.push("kubernetes");
        }
        if let Some(r) = m.iter().rev().find(|m| m.target == "/") {
            if r.fstype == "overlay" {
                signs.push("the root file system is an overlay".into());
                kinds.push("container");
            }
        }
    }
    // The most specific wins: Kubernetes over the runtime under it, a named runtime over a
    // bare overlay.
    let order = [
        "kubernetes",
        "podman",
        "docker",
        "cri-o",
        "containerd",
        "lxc",
        "systemd-nspawn",
        "garden",
        "container",
    ];
    let kind = order
        .iter()
        .find(|k| kinds.contains(k))
        .map(|k| k.to_string());
    (kind, signs)
}

/// /dev/nvidia* on the live machine (their status only: a device is never opened).
pub fn live_devices(root: &RootFs) -> Result<Vec<DeviceNode>, String> {
    let mut out = Vec::new();
    for n in root
        .list("dev")?
        .into_iter()
        .filter(|n| n.starts_with("nvidia"))
    {
        let rel = join("dev", &n);
        let Ok(Some(m)) = root.stat(&rel) else {
            continue;
        };
        if m.kind == FileKind::Dir {
            continue;
        }
        out.push(DeviceNode {
            path: abs(&rel),
            mode: m.mode,
            uid: m.uid,
            gid: m.gid,
            char_device: m.kind == FileKind::CharDevice,
        });
    }
    Ok(out)
}

/// This process's user and groups.
pub fn live_identity() -> (u32, Vec<u32>) {
    // SAFETY: getuid/getgid cannot fail; getgroups writes at most `n` entries into `buf`.
    unsafe {
        let uid = libc::getuid();
        let gid = libc::getgid();
        let n = libc::getgroups(0, std::ptr::null_mut());
        let mut groups = vec![gid];
        if n > 0 {
            let mut buf = vec![0 as libc::gid_t; n as usize];
            let got = libc::getgroups(n, buf.as_mut_ptr());
            if got > 0 {
                buf.truncate(got as usize);
                for g in buf {
                    if !groups.contains(&g) {
                        groups.push(g);
                    }
                }
            }
        }
        (uid, groups)
    }
}

pub fn read(root: &RootFs, env: &EnvFacts, mounts: Option<&[Mount]>) -> ContainerFacts {
    let (kind, signs) = detect(root, env, mounts);
    // The device nodes' status and the user's identity are no files: a snapshot keeps them as
    // listings under cmd/, never the nodes.
    let quiet = root.unrecorded();
    let devices = read_devices(&quiet);
    root.record_reading(DEVICES_FILE, &devices, |d| format_devices(d));
    let identity = read_identity(&quiet);
    root.record_reading(IDENTITY_FILE, &identity, |(u, g)| format_identity(*u, g));
    let found = |paths: &[&str]| -> Vec<String> {
        paths
            .iter()
            .filter(|p| {
                // A configuration file among them is copied; a program is there or not (the
                // existence test leaves an empty file).
                if p.starts_with("etc/") {
                    root.keep(p);
                }
                root.exists(p)
            })
            .map(|p| abs(p))
            .collect()
    };
    let mut engines = found(ENGINE_PATHS);
    // /usr/sbin and /usr/bin are often the same directory; keep one name per program.
    let mut seen = std::collections::HashSet::new();
    engines.retain(|e| seen.insert(e.rsplit('/').next().unwrap_or(e).to_string()));
    ContainerFacts {
        inside: Reading::Value(kind),
        signs,
        docker: read_docker(root),
        containerd: read_containerd(root),
        toolkit: Reading::Value(ContainerToolkit {
            found: found(TOOLKIT_PATHS),
            engines,
        }),
        cdi: read_cdi(root),
        devices,
        identity,
    }
}

fn read_devices(root: &RootFs) -> Reading<Vec<DeviceNode>> {
    if root.is_live() {
        live_devices(root).into()
    } else {
        match root.read_text(DEVICES_FILE) {
            Ok(Some(t)) => parse_devices(&t)
                .map_err(|e| format!("{}: {e}", abs(DEVICES_FILE)))
                .into(),
            Ok(None) => Reading::unavailable(format!("the snapshot has no {DEVICES_FILE}")),
            Err(e) => Reading::unavailable(e),
        }
    }
}

fn read_identity(root: &RootFs) -> Reading<(u32, Vec<u32>)> {
    if root.is_live() {
        Reading::Value(live_identity())
    } else {
        match root.read_text(IDENTITY_FILE) {
            Ok(Some(t)) => parse_identity(&t)
                .map_err(|e| format!("{}: {e}", abs(IDENTITY_FILE)))
                .into(),
            Ok(None) => Reading::unavailable(format!("the snapshot has no {IDENTITY_FILE}")),
            Err(e) => Reading::unavailable(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn containerd_reduction_reads_back() {
        let c = ContainerdConfig {
            runtimes: vec!["nvidia".into(), "runc".into()],
            default_runtime: Some("nvidia".into()),
            cdi_enabled: Some(true),
        };
        let back = parse_containerd_toml(&containerd_toml(&c)).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn detects_docker_and_kubernetes() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join(".dockerenv"), "").unwrap();
        fs::create_dir_all(d.path().join("proc/1")).unwrap();
        fs::write(d.path().join("proc/1/cgroup"), "0::/kubepods.slice/x\n").unwrap();
        let root = RootFs::new(d.path());
        let (k, signs) = detect(&root, &EnvFacts::default(), None);
        assert_eq!(k.as_deref(), Some("kubernetes"));
        assert_eq!(signs.len(), 2);
        let d = tempfile::tempdir().unwrap();
        let (k, _) = detect(&RootFs::new(d.path()), &EnvFacts::default(), None);
        assert_eq!(k, None);
    }

    #[test]
    fn bad_daemon_json_is_a_reason() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("etc/docker")).unwrap();
        fs::write(d.path().join(DOCKER), "{ not json").unwrap();
        let root = RootFs::new(d.path());
        let r = read_docker(&root);
        let invalid = r.value().cloned().flatten().and_then(|d| d.invalid);
        assert!(
            invalid.as_deref().is_some_and(|e| e
                .starts_with("/etc/docker/daemon.json: malformed: not JSON")
                && e.contains("line 1 column")),
            "{r:?}"
        );
        fs::write(
            d.path().join(DOCKER),
            "# gpuaudit-unreadable: permission denied\n",
        )
        .unwrap();
        assert!(read_docker(&root).reason().is_some());
        assert_eq!(read_containerd(&root), Reading::Value(None));
    }

    #[test]
    fn live_identity_is_sane() {
        let (_, groups) = live_identity();
        assert!(!groups.is_empty());
    }
}
