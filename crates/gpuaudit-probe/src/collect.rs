//! `gpuaudit collect --out DIR`: write a snapshot of this machine (`gpuaudit-snapshot/1`).
//!
//! The snapshot mirrors the files gpuaudit reads, under the same paths, and holds the output
//! of the commands it would otherwise ask under `cmd/`, so that auditing the snapshot gives
//! the same findings as the live audit it came from.

use crate::command;
use crate::gather::SNAPSHOT_FORMAT;
use crate::root::RootFs;
use gpuaudit_core::parse::sysfs;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("{0} exists and is not empty: choose a new directory")]
    NotEmpty(PathBuf),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What was written, and what could not be collected (each a sentence).
#[derive(Debug, Default)]
pub struct CollectSummary {
    pub files: usize,
    pub notes: Vec<String>,
}

pub struct Collector<'a> {
    src: &'a RootFs,
    out: PathBuf,
    pub summary: CollectSummary,
}

impl<'a> Collector<'a> {
    pub fn new(src: &'a RootFs, out: &Path) -> Result<Self, CollectError> {
        if out.exists()
            && fs::read_dir(out)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            return Err(CollectError::NotEmpty(out.to_path_buf()));
        }
        fs::create_dir_all(out).map_err(|e| CollectError::Write {
            path: out.to_path_buf(),
            source: e,
        })?;
        Ok(Collector {
            src,
            out: out.to_path_buf(),
            summary: CollectSummary::default(),
        })
    }

    pub fn out(&self) -> &Path {
        &self.out
    }

    /// Write `content` at `rel` in the snapshot.
    pub fn write(&mut self, rel: &str, content: &str) -> Result<(), CollectError> {
        let p = self.out.join(rel.trim_start_matches('/'));
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).map_err(|e| CollectError::Write {
                path: parent.to_path_buf(),
                source: e,
            })?;
        }
        fs::write(&p, content).map_err(|e| CollectError::Write {
            path: p.clone(),
            source: e,
        })?;
        self.summary.files += 1;
        Ok(())
    }

    /// Copy a file from the source root to the same path in the snapshot; a missing file is
    /// left out silently (the audit says what is missing), an unreadable one is noted.
    pub fn copy(&mut self, rel: &str) -> Result<(), CollectError> {
        match self.src.read(rel) {
            Ok(text) => self.write(rel, &text),
            Err(e) if e.ends_with("no such file") => Ok(()),
            Err(e) => {
                self.summary.notes.push(e);
                Ok(())
            }
        }
    }

    /// Run a command and keep its output under `cmd/NAME`; its failure message is kept too,
    /// so the audit of the snapshot sees what the live audit saw.
    pub fn command(
        &mut self,
        name: &str,
        program: &str,
        args: &[&str],
        timeout: Duration,
    ) -> Result<(), CollectError> {
        match command::run(program, args, timeout) {
            Ok(out) => self.write(&format!("cmd/{name}"), &out),
            Err(e) if e.ends_with("not found") => {
                self.summary
                    .notes
                    .push(format!("{program} not found: cmd/{name} not written"));
                Ok(())
            }
            Err(e) => {
                self.summary.notes.push(e.clone());
                self.write(&format!("cmd/{name}"), &e)
            }
        }
    }
}

/// Collect everything the facts readers of this crate need. Other sources (the host module)
/// add theirs through the same [`Collector`].
pub fn collect_base(
    c: &mut Collector,
    description: &str,
    timeout: Duration,
) -> Result<(), CollectError> {
    let meta = serde_json::json!({
        "format": SNAPSHOT_FORMAT,
        "description": description,
        "gpuaudit_version": env!("CARGO_PKG_VERSION"),
    });
    c.write(
        "meta.json",
        &format!(
            "{}\n",
            serde_json::to_string_pretty(&meta).unwrap_or_default()
        ),
    )?;

    for f in [
        "proc/cpuinfo",
        "proc/meminfo",
        "proc/modules",
        "proc/mounts",
        "proc/version",
        "proc/sys/net/core/somaxconn",
        "proc/sys/kernel/hostname",
        "proc/driver/nvidia/version",
        "etc/os-release",
    ] {
        c.copy(f)?;
    }
    if !c.src.exists("etc/os-release") {
        c.copy("usr/lib/os-release")?;
    }
    if let Ok(gpus) = c.src.list("proc/driver/nvidia/gpus") {
        for g in gpus {
            c.copy(&format!("proc/driver/nvidia/gpus/{g}/information"))?;
        }
    }
    collect_pci(c)?;
    collect_toolkits(c)?;

    match command::run("nvidia-smi", &["-q", "-x"], timeout) {
        Ok(xml) => c.write("cmd/nvidia-smi-q.xml", &xml)?,
        Err(smi_err) => match crate::gather::nvml_failure(crate::nvml::read_facts(
            crate::nvml::TIMEOUT,
        )) {
            Some(nvml_err) => {
                let why = crate::gather::driver_failure(&nvml_err, &smi_err);
                c.summary.notes.push(why.clone());
                c.write("cmd/driver-error.txt", &format!("{why}\n"))?;
            }
            None => c.summary.notes.push(format!(
                "{smi_err}: NVML answers but nvidia-smi does not, so the snapshot has no GPU details"
            )),
        },
    }
    c.command(
        "nvidia-smi-topo-m.txt",
        "nvidia-smi",
        &["topo", "-m"],
        timeout,
    )?;
    c.command(
        "nvidia-smi-nvlink-s.txt",
        "nvidia-smi",
        &["nvlink", "-s"],
        timeout,
    )?;
    c.command("ldd-version.txt", "ldd", &["--version"], timeout)?;
    if c.src.exists("usr/local/cuda/bin/nvcc") {
        c.command(
            "nvcc-version.txt",
            "/usr/local/cuda/bin/nvcc",
            &["--version"],
            timeout,
        )?;
    }
    collect_xids(c)?;
    Ok(())
}

/// The host and software-stack files (see `host::collect_into`).
pub fn collect_host(c: &mut Collector, opts: &crate::host::HostOptions) {
    let notes = crate::host::collect_into(c.src, opts, &c.out);
    c.summary.notes.extend(notes);
}

fn collect_pci(c: &mut Collector) -> Result<(), CollectError> {
    let Ok(devs) = c.src.list("sys/bus/pci/devices") else {
        return Ok(());
    };
    // Present even when empty: "no NVIDIA function on the bus" is a fact too.
    let dir = c.out.join("sys/bus/pci/devices");
    fs::create_dir_all(&dir).map_err(|e| CollectError::Write {
        path: dir,
        source: e,
    })?;
    for d in devs {
        let dir = format!("sys/bus/pci/devices/{d}");
        let vendor = c
            .src
            .read(&format!("{dir}/vendor"))
            .ok()
            .and_then(|v| sysfs::parse_hex_u16(&v));
        if vendor != Some(0x10de) {
            continue;
        }
        for a in [
            "vendor",
            "device",
            "subsystem_vendor",
            "subsystem_device",
            "class",
            "current_link_speed",
            "current_link_width",
            "max_link_speed",
            "max_link_width",
            "numa_node",
            "local_cpulist",
        ] {
            c.copy(&format!("{dir}/{a}"))?;
        }
        // The driver link becomes a plain file holding the driver's name (DESIGN's format).
        if let Ok(Some(name)) = c.src.link_name(&format!("{dir}/driver")) {
            c.write(&format!("{dir}/driver"), &format!("{name}\n"))?;
        }
    }
    Ok(())
}

fn collect_toolkits(c: &mut Collector) -> Result<(), CollectError> {
    let Ok(names) = c.src.list("usr/local") else {
        return Ok(());
    };
    for n in names
        .into_iter()
        .filter(|n| n == "cuda" || n.starts_with("cuda-"))
    {
        let dir = format!("usr/local/{n}");
        c.copy(&format!("{dir}/version.json"))?;
        c.copy(&format!("{dir}/version.txt"))?;
        // cuda.h is large; its version define is all gpuaudit reads.
        if let Ok(h) = c.src.read(&format!("{dir}/include/cuda.h")) {
            let line: String = h
                .lines()
                .filter(|l| l.trim_start().starts_with("#define CUDA_VERSION"))
                .take(1)
                .collect();
            if !line.is_empty() {
                c.write(&format!("{dir}/include/cuda.h"), &format!("{line}\n"))?;
            }
        }
        // File names only: the runtime's version is in them.
        if let Ok(libs) = c.src.list(&format!("{dir}/lib64")) {
            for l in libs.iter().filter(|l| l.starts_with("libcudart.so")) {
                c.write(&format!("{dir}/lib64/{l}"), "")?;
            }
        }
        if let Ok(libs) = c.src.list(&format!("{dir}/compat")) {
            for l in libs.iter().filter(|l| l.starts_with("libcuda.so")) {
                c.write(&format!("{dir}/compat/{l}"), "")?;
            }
        }
        if c.src.exists(&format!("{dir}/bin/nvcc")) {
            c.write(&format!("{dir}/bin/nvcc"), "")?;
        }
    }
    Ok(())
}

/// Only the NVIDIA XID lines of the kernel log go into the snapshot.
fn collect_xids(c: &mut Collector) -> Result<(), CollectError> {
    match crate::gather::xid_lines_live() {
        Ok(text) => c.write("cmd/dmesg-xid.txt", &text),
        Err(e) => {
            c.summary
                .notes
                .push(format!("kernel log not collected: {e}"));
            Ok(())
        }
    }
}
