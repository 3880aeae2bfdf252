//! Python environments and the PyTorch in them: found by looking in the usual places (system,
//! user site, virtualenvs, conda), read from the installed files, and (live, when asked) from the
//! environment's interpreter with a hard time limit.

use super::HostOptions;
use crate::process::{self, Caps, Cmd, Ended};
use crate::root::RootFs;
use crate::root::{abs, join, rel};
use gpuaudit_core::facts::{EnvFacts, PythonEnv, TorchInstall};
use gpuaudit_core::parse::host::cudaenv::parse_arch_flags;
use gpuaudit_core::parse::host::python::{
    cudnn_version, dist_info_name, metadata_header, parse_metadata, parse_torch_query,
    parse_torch_version_py,
};
use gpuaudit_core::reading::Reading;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A site-packages directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Root-relative ("usr/lib/python3/dist-packages").
    pub rel: String,
    pub kind: &'static str,
    /// The interpreter that uses it (a machine path), where one exists under the root.
    pub interpreter: Option<String>,
}

impl Site {
    pub fn path(&self) -> String {
        abs(&self.rel)
    }
}

const MAX_SITES: usize = 64;

const CONDA_DIRS: &[&str] = &[
    "miniconda3",
    "miniconda",
    "anaconda3",
    "miniforge3",
    "mambaforge",
    "conda",
    ".conda",
];

fn kind_of(prefix: &str) -> &'static str {
    if prefix == "usr" || prefix == "usr/local" {
        "system"
    } else if prefix.ends_with("/.local") {
        "user"
    } else if prefix.contains("/envs/")
        || CONDA_DIRS
            .iter()
            .any(|c| prefix.ends_with(&format!("/{c}")) || prefix == *c)
    {
        "conda"
    } else {
        "venv"
    }
}

/// Prefixes (root-relative) where Python environments usually live.
fn prefixes(root: &RootFs, env: &EnvFacts) -> Vec<String> {
    let mut p: Vec<String> = vec!["usr".into(), "usr/local".into()];
    let mut homes = vec!["root".to_string()];
    homes.extend(root.glob("home/*", 256));
    let mut conda_bases: Vec<String> = Vec::new();
    for h in &homes {
        p.push(join(h, ".local"));
        for v in [".venv", "venv", "env", ".env"] {
            p.push(join(h, v));
        }
        p.extend(root.glob(&join(h, ".virtualenvs/*"), 32));
        p.extend(root.glob(&join(h, ".pyenv/versions/*"), 32));
        p.extend(root.glob(&join(h, "*/.venv"), 32));
        p.extend(root.glob(&join(h, "*/venv"), 32));
        for c in CONDA_DIRS {
            conda_bases.push(join(h, c));
        }
    }
    for c in [
        "opt/conda",
        "opt/miniconda3",
        "opt/anaconda3",
        "opt/miniforge3",
        "usr/local/conda",
    ] {
        conda_bases.push(c.into());
    }
    for b in &conda_bases {
        p.push(b.clone());
        p.extend(root.glob(&join(b, "envs/*"), 32));
    }
    for v in [
        "opt/venv",
        "opt/.venv",
        "workspace/.venv",
        "workspace/venv",
        "app/.venv",
        "app/venv",
    ] {
        p.push(v.into());
    }
    p.extend(root.glob("opt/*/venv", 32));
    p.extend(root.glob("opt/*/.venv", 32));
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = env.get(var).filter(|v| v.starts_with('/')) {
            p.push(rel(v.trim_end_matches('/')));
        }
    }
    let mut seen = std::collections::HashSet::new();
    p.retain(|x| seen.insert(x.clone()));
    p
}

/// "usr/lib/python3.12/site-packages" -> "python3.12".
fn python_version_dir(site: &str) -> Option<&str> {
    site.split('/').find(|c| c.starts_with("python3."))
}

fn interpreter_for(root: &RootFs, prefix: &str, site: &str) -> Option<String> {
    let ver = python_version_dir(site);
    let mut candidates: Vec<String> = Vec::new();
    let system_bins = |v: Option<&str>| {
        let mut c = Vec::new();
        for bin in ["usr/local/bin", "usr/bin"] {
            if let Some(v) = v {
                c.push(join(bin, v));
            }
            c.push(join(bin, "python3"));
        }
        c
    };
    if prefix == "usr" || prefix.ends_with("/.local") {
        // Debian's /usr/bin/python3 also uses /usr/local/lib/python3.X/dist-packages and the
        // user site; a self-built /usr/local/bin/python3 uses /usr/local/lib/.../site-packages.
        let mut c = system_bins(ver);
        if prefix == "usr" {
            c.reverse();
        }
        candidates.extend(c);
    } else if prefix == "usr/local" {
        if site.ends_with("dist-packages") {
            candidates.extend(system_bins(ver).into_iter().rev());
        } else {
            candidates.extend(system_bins(ver));
        }
    } else {
        if let Some(v) = ver {
            candidates.push(join(prefix, &format!("bin/{v}")));
        }
        candidates.push(join(prefix, "bin/python3"));
        candidates.push(join(prefix, "bin/python"));
    }
    candidates
        .into_iter()
        .find(|c| root.exists(c))
        .map(|c| abs(&c))
}

/// Every site-packages directory found, in a stable order.
pub fn discover(root: &RootFs, env: &EnvFacts) -> Vec<Site> {
    let mut sites = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for prefix in prefixes(root, env) {
        let mut dirs = root.glob(&join(&prefix, "lib/python3*/site-packages"), 8);
        if prefix == "usr" || prefix == "usr/local" {
            // Fedora/RHEL keep compiled packages (torch, the nvidia wheels) under lib64.
            dirs.extend(root.glob(&join(&prefix, "lib64/python3*/site-packages"), 8));
            dirs.extend(root.glob(&join(&prefix, "lib/python3*/dist-packages"), 8));
            dirs.extend(root.glob(&join(&prefix, "lib/python3/dist-packages"), 1));
        }
        for d in dirs {
            if sites.len() >= MAX_SITES || !seen.insert(d.clone()) {
                continue;
            }
            // A snapshot marks each environment found, so that it finds the same ones (and
            // keeps the directory where a copy drops empty ones, as git does).
            root.record_marker(&join(&d, ".gpuaudit-site"));
            sites.push(Site {
                interpreter: interpreter_for(root, &prefix, &d),
                kind: kind_of(&prefix),
                rel: d,
            });
        }
    }
    sites
}

pub fn has_torch(root: &RootFs, site: &Site) -> bool {
    root.exists(&join(&site.rel, "torch/version.py"))
}

/// NVIDIA wheels in a site-packages directory: (distribution name, version, dist-info dir).
pub fn nvidia_wheels(root: &RootFs, site: &Site) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for name in root.children(&site.rel) {
        if !(name.starts_with("nvidia_") || name.starts_with("nvidia-"))
            || !name.ends_with(".dist-info")
        {
            continue;
        }
        let dir = join(&site.rel, &name);
        // A snapshot keeps the metadata's header (name and version), not the description.
        let meta = join(&dir, "METADATA");
        let text = root.unrecorded().read_text(&meta).ok().flatten();
        if let Some(t) = &text {
            root.record(&meta, metadata_header(t));
        }
        let from_meta = text.and_then(|t| parse_metadata(&t).ok());
        if let Some((n, v)) = from_meta.or_else(|| dist_info_name(&name)) {
            out.push((n, v, dir));
        }
    }
    out
}

/// The query script: prints one JSON line. `torch._C._cuda_getArchFlags()` reads a string
/// compiled into torch; `torch.cuda.get_arch_list()` would initialise CUDA.
pub const QUERY_SCRIPT: &str = r#"
import json, sys
o = {"python": sys.version.split()[0], "prefix": sys.prefix}
def err(e):
    s = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, s[-1] if s else "")
try:
    import torch
except BaseException as e:
    o["error"] = err(e)
    print(json.dumps(o))
    sys.exit(0)
o["torch"] = str(torch.__version__)
o["file"] = getattr(torch, "__file__", None)
v = getattr(torch, "version", None)
o["cuda"] = getattr(v, "cuda", None)
o["hip"] = getattr(v, "hip", None)
try:
    f = torch._C._cuda_getArchFlags()
    o["arch_flags"] = f if f else None
except BaseException as e:
    o["arch_error"] = err(e)
try:
    c = torch.backends.cudnn.version()
    o["cudnn"] = int(c) if c else None
except BaseException:
    pass
try:
    n = torch.cuda.nccl.version()
    o["nccl"] = ".".join(str(x) for x in n) if isinstance(n, tuple) else str(n)
except BaseException:
    pass
print(json.dumps(o))
"#;

/// One interpreter's answer, as a snapshot keeps it (`cmd/torch-query.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryRecord {
    pub site_packages: String,
    pub interpreter: String,
    /// What it printed on stdout (the JSON line, perhaps after warnings).
    pub output: Option<String>,
    /// Why there is no output: "timed out after 30 s", "cannot start: ...", or the last line of
    /// stderr when it printed nothing useful.
    pub error: Option<String>,
}

pub const QUERY_FILE: &str = "cmd/torch-query.json";

/// Run the query script with a hard time limit; the child's group is killed when it runs
/// over.
pub fn ask(interpreter: &str, timeout: Duration) -> (Option<String>, Option<String>) {
    let cmd = Cmd::new(interpreter)
        .arg("-c")
        .arg(QUERY_SCRIPT)
        .current_dir("/")
        .env("PYTHONDONTWRITEBYTECODE", Some("1"));
    // The answer is the script's last line, after whatever torch printed.
    let caps = Caps::last(1 << 20, 64 << 10);
    let o = match process::run(&cmd, timeout, caps) {
        Ok(o) => o,
        Err(e) => return (None, Some(format!("cannot start {e}"))),
    };
    match o.ended {
        Ended::Exited(_) => {
            let stdout = o.stdout_text();
            if stdout.contains('{') {
                (Some(stdout), None)
            } else {
                let stderr = o.stderr_text();
                let last = stderr
                    .lines()
                    .rev()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or("no output");
                (None, Some(gpuaudit_core::parse::host::truncate(last, 300)))
            }
        }
        Ended::TimedOut(t) => (
            None,
            Some(format!("timed out after {} s", t.as_secs_f64().round())),
        ),
    }
}

/// Ask every interpreter of an environment that has torch, in parallel.
pub fn query_all(root: &RootFs, sites: &[Site], timeout: Duration) -> Vec<QueryRecord> {
    let todo: Vec<(&Site, &String)> = sites
        .iter()
        .filter(|s| has_torch(root, s))
        .filter_map(|s| s.interpreter.as_ref().map(|i| (s, i)))
        .collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = todo
            .iter()
            .map(|(s, i)| {
                scope.spawn(move || {
                    let (output, error) = ask(i, timeout);
                    QueryRecord {
                        site_packages: s.path(),
                        interpreter: (*i).clone(),
                        output,
                        error,
                    }
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

fn load_queries(root: &RootFs) -> Result<Vec<QueryRecord>, String> {
    match root.read_text(QUERY_FILE)? {
        None => Ok(Vec::new()),
        Some(t) => serde_json::from_str(&t)
            .map_err(|e| format!("{}: not a query list: {e}", abs(QUERY_FILE))),
    }
}

const NOT_ASKED: &str = "the interpreter was not asked (installed files only)";

pub fn read_envs(root: &RootFs, sites: &[Site], opts: &HostOptions) -> Reading<Vec<PythonEnv>> {
    let queries: Result<Vec<QueryRecord>, String> = if root.is_live() {
        if opts.ask_interpreter {
            let q = query_all(root, sites, opts.interpreter_timeout);
            match serde_json::to_string_pretty(&q) {
                Ok(s) => root.record(QUERY_FILE, s),
                Err(e) => root.record_note(format!("{QUERY_FILE}: {e}")),
            }
            Ok(q)
        } else {
            Ok(Vec::new())
        }
    } else {
        load_queries(root)
    };
    let asked = if root.is_live() {
        opts.ask_interpreter
    } else {
        root.exists(QUERY_FILE)
    };
    // Every environment's files are read even where the answers cannot be (so that a
    // snapshot holds them); the answers that cannot be read make the reading unavailable.
    let no_queries = Vec::new();
    let (queries, unreadable) = match &queries {
        Ok(q) => (q, None),
        Err(e) => (&no_queries, Some(e.clone())),
    };
    let mut envs = Vec::new();
    // A snapshot keeps every environment's NVIDIA wheels (their metadata's headers), torch or
    // not: the libraries' listing names them as the wheels' copies.
    if root.is_recording() {
        for site in sites.iter().filter(|s| !has_torch(&root.unrecorded(), s)) {
            nvidia_wheels(root, site);
        }
    }
    for site in sites.iter().filter(|s| has_torch(root, s)) {
        let vp = join(&site.rel, "torch/version.py");
        let Ok(Some(text)) = root.read_text(&vp) else {
            continue;
        };
        let Ok(v) = parse_torch_version_py(&text) else {
            continue;
        };
        let wheels = nvidia_wheels(root, site);
        let wheel_version = |lib: &str| {
            wheels
                .iter()
                .find(|(n, _, _)| gpuaudit_core::parse::host::libs::wheel_library(n) == Some(lib))
                .map(|(n, ver, _)| (n.clone(), ver.clone()))
        };
        let from_wheel = |lib: &str, what: &str| match wheel_version(lib) {
            Some((_, ver)) => Reading::Value(ver),
            None => Reading::unavailable(format!(
                "no {what} wheel beside torch (it may be linked into torch; ask the interpreter)"
            )),
        };
        let mut torch = TorchInstall {
            version: v.version,
            cuda: v.cuda,
            hip: v.hip,
            arch_list: Reading::unavailable(match (&site.interpreter, asked) {
                (None, _) => "no interpreter found for this environment (installed files only)",
                (Some(_), false) => NOT_ASKED,
                (Some(_), true) => "the interpreter gave no answer",
            }),
            cudnn: from_wheel("libcudnn", "nvidia-cudnn"),
            nccl: from_wheel("libnccl", "nvidia-nccl"),
            source: "files".into(),
            interpreter_error: None,
        };
        if let Some(q) = queries.iter().find(|q| q.site_packages == site.path()) {
            apply_query(&mut torch, q, &site.path());
        }
        envs.push(PythonEnv {
            site_packages: site.path(),
            kind: site.kind.to_string(),
            interpreter: site.interpreter.clone(),
            torch,
            nvidia_wheels: wheels.into_iter().map(|(n, v, _)| (n, v)).collect(),
        });
    }
    match unreadable {
        Some(e) => Reading::unavailable(e),
        None => Reading::Value(envs),
    }
}

fn apply_query(t: &mut TorchInstall, q: &QueryRecord, site: &str) {
    let Some(out) = &q.output else {
        t.interpreter_error = Some(q.error.clone().unwrap_or_else(|| "no answer".into()));
        return;
    };
    let parsed = match parse_torch_query(out) {
        Ok(p) => p,
        Err(e) => {
            t.interpreter_error = Some(e.to_string());
            return;
        }
    };
    if let Some(e) = parsed.error {
        t.interpreter_error = Some(format!("import torch: {e}"));
        return;
    }
    if let Some(f) = &parsed.file {
        if !f.starts_with(site) {
            t.arch_list = Reading::unavailable(format!(
                "{} imports torch from {f}, not from this directory",
                q.interpreter
            ));
            return;
        }
    }
    t.source = "interpreter".into();
    if let Some(v) = parsed.torch {
        t.version = v;
    }
    t.cuda = parsed.cuda;
    t.hip = parsed.hip;
    t.arch_list = match parsed.arch_flags.as_deref().map(parse_arch_flags) {
        Some(l) if !l.is_empty() => Reading::Value(l),
        _ => Reading::unavailable(
            parsed
                .arch_error
                .map(|e| format!("torch._C._cuda_getArchFlags(): {e}"))
                .unwrap_or_else(|| "torch reports no compiled architectures".into()),
        ),
    };
    if let Some(c) = parsed.cudnn.and_then(cudnn_version) {
        t.cudnn = Reading::Value(c);
    }
    if let Some(n) = parsed.nccl {
        t.nccl = Reading::Value(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn touch(root: &std::path::Path, rel: &str, content: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    #[test]
    fn discovers_system_venv_conda_and_reads_files() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        touch(r, "usr/bin/python3", "");
        touch(
            r,
            "usr/lib/python3/dist-packages/torch/version.py",
            "__version__ = '2.5.1+cu124'\ncuda = '12.4'\nhip = None\n",
        );
        touch(
            r,
            "usr/lib/python3/dist-packages/nvidia_nccl_cu12-2.21.5.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.21.5\n",
        );
        touch(r, "home/ann/proj/.venv/bin/python", "");
        touch(
            r,
            "home/ann/proj/.venv/lib/python3.11/site-packages/torch/version.py",
            "__version__ = '2.0.0+cpu'\ncuda = None\n",
        );
        touch(
            r,
            "opt/conda/envs/ml/lib/python3.10/site-packages/numpy/__init__.py",
            "",
        );
        let root = RootFs::new(r);
        let sites = discover(&root, &EnvFacts::default());
        let paths: Vec<(&str, &str)> = sites.iter().map(|s| (s.rel.as_str(), s.kind)).collect();
        assert!(
            paths.contains(&("usr/lib/python3/dist-packages", "system")),
            "{paths:?}"
        );
        assert!(paths.contains(&("home/ann/proj/.venv/lib/python3.11/site-packages", "venv")));
        assert!(paths.contains(&("opt/conda/envs/ml/lib/python3.10/site-packages", "conda")));
        let sys = sites
            .iter()
            .find(|s| s.rel == "usr/lib/python3/dist-packages")
            .unwrap();
        assert_eq!(sys.interpreter.as_deref(), Some("/usr/bin/python3"));
        let opts = HostOptions {
            ask_interpreter: false,
            ..HostOptions::default()
        };
        let envs = read_envs(&root, &sites, &opts).into_value().unwrap();
        assert_eq!(envs.len(), 2);
        let e = envs.iter().find(|e| e.kind == "system").unwrap();
        assert_eq!(e.torch.version, "2.5.1+cu124");
        assert_eq!(e.torch.nccl, Reading::Value("2.21.5".into()));
        assert_eq!(e.torch.arch_list.reason(), Some(NOT_ASKED));
        let v = envs.iter().find(|e| e.kind == "venv").unwrap();
        assert_eq!(v.torch.cuda, None);
        assert_eq!(
            v.interpreter.as_deref(),
            Some("/home/ann/proj/.venv/bin/python")
        );
    }

    #[test]
    fn snapshot_queries_are_applied() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        touch(r, "usr/bin/python3", "");
        touch(
            r,
            "usr/local/lib/python3.12/dist-packages/torch/version.py",
            "__version__ = '2.1.0+cu118'\ncuda = '11.8'\n",
        );
        let q = vec![QueryRecord {
            site_packages: "/usr/local/lib/python3.12/dist-packages".into(),
            interpreter: "/usr/bin/python3".into(),
            output: Some("{\"torch\": \"2.1.0+cu118\", \"file\": \"/usr/local/lib/python3.12/dist-packages/torch/__init__.py\", \"cuda\": \"11.8\", \"arch_flags\": \"sm_50 sm_60 sm_70 sm_75 sm_80 sm_86\", \"cudnn\": 8700, \"nccl\": \"2.18.1\"}\n".into()),
            error: None,
        }];
        touch(r, QUERY_FILE, &serde_json::to_string(&q).unwrap());
        let root = RootFs::new(r);
        let sites = discover(&root, &EnvFacts::default());
        let envs = read_envs(&root, &sites, &HostOptions::default())
            .into_value()
            .unwrap();
        assert_eq!(envs.len(), 1);
        let t = &envs[0].torch;
        assert_eq!(t.source, "interpreter");
        assert_eq!(t.arch_list.value().unwrap().len(), 6);
        assert_eq!(t.cudnn, Reading::Value("8.7.0".into()));
        assert_eq!(t.nccl, Reading::Value("2.18.1".into()));
    }

    /// The query script against a stand-in torch package, with the real interpreter where this
    /// machine has one (the script's own mistakes would otherwise go unnoticed).
    #[test]
    fn query_script_runs_against_a_fake_torch() {
        let Some(python) = ["/usr/bin/python3", "/usr/local/bin/python3"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
        else {
            eprintln!("no python3: skipped");
            return;
        };
        let d = tempfile::tempdir().unwrap();
        let site = d.path().join("site");
        touch(
            &site,
            "torch/__init__.py",
            "__version__ = '2.5.1+cu124'\nfrom . import version, _C, backends, cuda\n",
        );
        touch(&site, "torch/version.py", "cuda = '12.4'\nhip = None\n");
        touch(
            &site,
            "torch/_C.py",
            "def _cuda_getArchFlags():\n    return 'sm_50 sm_80 sm_90'\n",
        );
        touch(&site, "torch/backends/__init__.py", "from . import cudnn\n");
        touch(
            &site,
            "torch/backends/cudnn.py",
            "def version():\n    return 90100\n",
        );
        touch(&site, "torch/cuda/__init__.py", "from . import nccl\n");
        touch(
            &site,
            "torch/cuda/nccl.py",
            "def version():\n    return (2, 21, 5)\n",
        );
        let wrapper = d.path().join("python");
        fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nPYTHONPATH={} exec {python} \"$@\"\n",
                site.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
        let (out, err) = ask(wrapper.to_str().unwrap(), Duration::from_secs(20));
        assert!(err.is_none(), "{err:?}");
        let q = parse_torch_query(&out.unwrap()).unwrap();
        assert_eq!(q.torch.as_deref(), Some("2.5.1+cu124"));
        assert_eq!(q.cuda.as_deref(), Some("12.4"));
        assert_eq!(q.arch_flags.as_deref(), Some("sm_50 sm_80 sm_90"));
        assert_eq!(q.cudnn, Some(90100));
        assert_eq!(q.nccl.as_deref(), Some("2.21.5"));
        assert!(q.file.unwrap().starts_with(site.to_str().unwrap()));
        // Without torch: the import error is reported, not a crash.
        fs::remove_dir_all(site.join("torch")).unwrap();
        let (out, _) = ask(wrapper.to_str().unwrap(), Duration::from_secs(20));
        let q = parse_torch_query(&out.unwrap()).unwrap();
        assert!(q.error.unwrap().contains("ModuleNotFoundError"));
    }

    #[test]
    fn ask_times_out_and_reports_missing_interpreters() {
        let (o, e) = ask("/nonexistent/python3", Duration::from_secs(1));
        assert!(o.is_none());
        assert!(e.unwrap().contains("cannot start"));
        // A stand-in interpreter that never answers.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("python");
        fs::write(&p, "#!/bin/sh\nsleep 10\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        let t0 = std::time::Instant::now();
        let (o, e) = ask(p.to_str().unwrap(), Duration::from_millis(300));
        assert!(o.is_none());
        assert!(e.unwrap().contains("timed out"));
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
