//! Container runtime configuration: docker's daemon.json, containerd's config.toml, CDI
//! specifications, and the cgroup file that tells a container from the inside.

use crate::facts::{CdiSpec, ContainerdConfig, DockerDaemon};
use crate::parse::ParseError;

/// /etc/docker/daemon.json.
pub fn parse_daemon_json(text: &str) -> Result<DockerDaemon, ParseError> {
    if text.trim().is_empty() {
        // dockerd accepts an empty file as "no settings".
        return Ok(DockerDaemon::default());
    }
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ParseError::Malformed(format!("not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| ParseError::Malformed("not a JSON object".into()))?;
    let mut d = DockerDaemon::default();
    if let Some(rt) = obj.get("runtimes") {
        let rt = rt
            .as_object()
            .ok_or_else(|| ParseError::Malformed("\"runtimes\" is not an object".into()))?;
        for (name, spec) in rt {
            let path = spec
                .get("path")
                .or_else(|| spec.get("runtimeType"))
                .and_then(|p| p.as_str())
                .unwrap_or("")
                .to_string();
            d.runtimes.push((name.clone(), path));
        }
    }
    d.default_runtime = obj
        .get("default-runtime")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    d.cdi_enabled = obj
        .get("features")
        .and_then(|f| f.get("cdi"))
        .and_then(|v| v.as_bool());
    Ok(d)
}

/// /etc/containerd/config.toml (version 2 and 3 layouts): the CRI runtimes, wherever the
/// plugin path puts them.
pub fn parse_containerd_toml(text: &str) -> Result<ContainerdConfig, ParseError> {
    if crate::parse::host::looks_binary(text) {
        return Err(ParseError::Malformed("binary content, not TOML".into()));
    }
    let t: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        ParseError::Malformed(format!("not TOML: {}", first_line(&e.to_string())))
    })?;
    let mut c = ContainerdConfig::default();
    walk(&toml::Value::Table(t), &mut c, 0);
    c.runtimes.sort();
    c.runtimes.dedup();
    Ok(c)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

fn walk(v: &toml::Value, c: &mut ContainerdConfig, depth: usize) {
    let Some(t) = v.as_table() else { return };
    if depth > 16 {
        return;
    }
    for (k, v) in t {
        match (k.as_str(), v) {
            ("runtimes", toml::Value::Table(rt)) => c.runtimes.extend(rt.keys().cloned()),
            ("default_runtime_name", toml::Value::String(s)) => c.default_runtime = Some(s.clone()),
            ("enable_cdi", toml::Value::Boolean(b)) => c.cdi_enabled = Some(*b),
            _ => walk(v, c, depth + 1),
        }
    }
}

/// A CDI specification (YAML as nvidia-ctk writes it, or JSON). The YAML is read line by line
/// for the few keys needed: `kind`, the device `name`s, and the libcuda.so versions it
/// mounts, which name the driver it was generated for.
pub fn parse_cdi(path: &str, text: &str) -> CdiSpec {
    let mut spec = CdiSpec {
        path: path.to_string(),
        kind: None,
        devices: Vec::new(),
        libcuda_versions: libcuda_versions(text),
        error: None,
    };
    if crate::parse::host::looks_binary(text) {
        spec.error = Some("binary content, not a CDI specification".into());
        return spec;
    }
    if text.trim_start().starts_with('{') {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) => {
                spec.kind = v.get("kind").and_then(|k| k.as_str()).map(str::to_string);
                if let Some(devs) = v.get("devices").and_then(|d| d.as_array()) {
                    spec.devices = devs
                        .iter()
                        .filter_map(|d| d.get("name").and_then(|n| n.as_str()))
                        .map(str::to_string)
                        .collect();
                }
            }
            Err(e) => spec.error = Some(format!("not JSON: {e}")),
        }
    } else {
        let mut in_devices = false;
        let mut item_indent: Option<usize> = None;
        for line in text.lines() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') || line.trim() == "---"
            {
                continue;
            }
            let indent = line.len() - line.trim_start().len();
            let l = line.trim_start();
            if indent == 0 && !l.starts_with('-') {
                in_devices = l.starts_with("devices:");
                item_indent = None;
                if let Some(k) = l.strip_prefix("kind:") {
                    spec.kind = Some(unquote(k));
                }
                continue;
            }
            if !in_devices {
                continue;
            }
            // The keys of a device item sit at the indentation of its "- ".
            let (key_indent, rest) = match l.strip_prefix("- ") {
                Some(r) => (indent + 2, r),
                None => (indent, l),
            };
            if l.starts_with("- ") && item_indent.is_none() {
                item_indent = Some(indent + 2);
            }
            if Some(key_indent) == item_indent {
                if let Some(n) = rest.strip_prefix("name:") {
                    spec.devices.push(unquote(n));
                }
            }
        }
        if spec.kind.is_none() && spec.devices.is_empty() {
            spec.error = Some("no 'kind:' or devices: not a CDI specification".into());
        }
    }
    spec
}

fn unquote(s: &str) -> String {
    s.trim().trim_matches(['"', '\'']).to_string()
}

fn libcuda_versions(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, _) in text.match_indices("libcuda.so.") {
        let rest = &text[i + "libcuda.so.".len()..];
        let v: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let v = v.trim_end_matches('.').to_string();
        // "libcuda.so.1" is the soname; a driver version has at least two dots.
        if v.matches('.').count() >= 1
            && v.split('.').next().is_some_and(|m| m.len() >= 3)
            && !out.contains(&v)
        {
            out.push(v);
        }
    }
    out
}

/// /proc/1/cgroup or /proc/self/cgroup: the container runtime its paths name, if any.
pub fn container_from_cgroup(text: &str) -> Option<&'static str> {
    let t = text.to_ascii_lowercase();
    [
        ("kubepods", "kubernetes"),
        ("docker", "docker"),
        ("libpod", "podman"),
        ("crio-", "cri-o"),
        ("containerd", "containerd"),
        ("/lxc", "lxc"),
        ("garden", "garden"),
    ]
    .into_iter()
    .find(|(k, _)| t.contains(k))
    .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_json() {
        let d = parse_daemon_json(
            r#"{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}},
                "default-runtime": "nvidia", "features": {"cdi": true}}"#,
        )
        .unwrap();
        assert_eq!(
            d.runtimes,
            vec![("nvidia".to_string(), "nvidia-container-runtime".to_string())]
        );
        assert_eq!(d.default_runtime.as_deref(), Some("nvidia"));
        assert_eq!(d.cdi_enabled, Some(true));
        assert_eq!(parse_daemon_json("").unwrap(), DockerDaemon::default());
        assert!(parse_daemon_json("{ \"runtimes\": ").is_err());
        assert!(parse_daemon_json("[1,2]").is_err());
        assert!(parse_daemon_json(r#"{"runtimes": 3}"#).is_err());
        assert!(parse_daemon_json("\u{0}\u{1}binary").is_err());
    }

    #[test]
    fn containerd_v2_and_v3() {
        let v2 = r#"
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "/usr/bin/nvidia-container-runtime"
"#;
        let c = parse_containerd_toml(v2).unwrap();
        assert_eq!(c.runtimes, vec!["nvidia", "runc"]);
        assert_eq!(c.default_runtime.as_deref(), Some("nvidia"));
        let v3 = r#"
version = 3
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
"#;
        let c = parse_containerd_toml(v3).unwrap();
        assert_eq!(c.runtimes, vec!["runc"]);
        assert_eq!(c.cdi_enabled, Some(true));
        assert!(parse_containerd_toml("[[[ not toml").is_err());
        assert!(parse_containerd_toml("\0\0\0").is_err());
    }

    #[test]
    fn cdi_yaml_and_json() {
        let y = r#"---
cdiVersion: 0.5.0
containerEdits:
  deviceNodes:
  - path: /dev/nvidiactl
  mounts:
  - containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
devices:
- containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
  name: "0"
- containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
  name: GPU-1234
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
kind: nvidia.com/gpu
"#;
        let s = parse_cdi("/etc/cdi/nvidia.yaml", y);
        assert_eq!(s.kind.as_deref(), Some("nvidia.com/gpu"));
        assert_eq!(s.devices, vec!["0", "GPU-1234", "all"]);
        assert_eq!(s.libcuda_versions, vec!["550.54.15"]);
        assert!(s.error.is_none());
        let j = parse_cdi(
            "/etc/cdi/x.json",
            r#"{"cdiVersion":"0.6.0","kind":"nvidia.com/gpu","devices":[{"name":"0"}]}"#,
        );
        assert_eq!(j.devices, vec!["0"]);
        assert!(parse_cdi("x", "{bad json").error.is_some());
        assert!(parse_cdi("x", "hello: world\n").error.is_some());
        assert!(parse_cdi("x", "\0\0").error.is_some());
    }

    #[test]
    fn cgroups() {
        assert_eq!(
            container_from_cgroup(
                "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-abc.scope"
            ),
            Some("kubernetes")
        );
        assert_eq!(
            container_from_cgroup("12:cpu:/docker/0123abc"),
            Some("docker")
        );
        assert_eq!(container_from_cgroup("0::/init.scope"), None);
        assert_eq!(container_from_cgroup("0::/"), None);
    }
}
