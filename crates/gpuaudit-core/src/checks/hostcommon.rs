//! Small helpers shared by the host-side checks.

use crate::facts::{Facts, Mount};
use crate::parse::host::mounts::{mount_of, FsClass};

/// How many GPUs the machine has: the driver's list, else the NVIDIA PCI functions.
pub(crate) fn gpu_count(facts: &Facts) -> Option<usize> {
    if let Some(g) = facts.gpus.value() {
        return Some(g.len());
    }
    facts.pci_gpus.value().map(Vec::len)
}

/// The mount a path lives on, and its class.
pub(crate) fn storage_of<'a>(facts: &'a Facts, path: &str) -> Option<(&'a Mount, FsClass)> {
    let mounts = facts.host.mounts.value()?;
    let m = mount_of(mounts, path)?;
    Some((m, FsClass::of(&m.fstype)))
}

/// Bytes as a person reads them: "64 MiB", "256.0 GiB".
pub(crate) fn human_bytes(b: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if b >= GIB {
        format!("{:.1} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{} MiB", b / MIB)
    } else {
        format!("{} KiB", b / 1024)
    }
}

/// "1 key" / "2 keys".
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Facts with `n` GPUs of compute capability `cc` and driver 580.159.04 (CUDA 13.0); the
/// rest unread.
#[cfg(test)]
pub(crate) fn facts_with_gpus(n: u32, cc: (u32, u32)) -> Facts {
    let mut f = crate::facts::Facts::empty(crate::facts::Origin::Live, "not read in this test");
    let gpus = (0..n)
        .map(|i| {
            let mut g = crate::facts::GpuFacts::unread(
                i,
                &format!("0000:00:{:02x}.0", 6 + i),
                "nvml",
                "test",
            );
            g.compute_capability =
                crate::reading::Reading::Value(crate::facts::ComputeCapability {
                    major: cc.0,
                    minor: cc.1,
                });
            g.name = crate::reading::Reading::Value("NVIDIA H200".into());
            g.uuid = crate::reading::Reading::Value(format!("GPU-{i}aaa"));
            g
        })
        .collect();
    f.gpus = crate::reading::Reading::Value(gpus);
    f.driver.version = crate::reading::Reading::Value("580.159.04".into());
    f.driver.cuda_version = crate::reading::Reading::Value(crate::facts::CudaVersion::new(13, 0));
    f
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_checks_are_registered_with_their_documentation() {
        for id in [
            "cuda.libraries",
            "cuda.framework",
            "cuda.env",
            "container.runtime",
            "storage.mounts",
            "storage.throughput",
            "host.shm",
            "net.somaxconn",
            "net.loopback",
            "net.fabric",
            "env.jupyter",
            "env.ssh",
        ] {
            let c = super::super::find(id).unwrap_or_else(|| panic!("{id} not registered"));
            assert!(super::super::CATALOG.contains(&id));
            for (what, text) in [
                ("what", c.doc.what),
                ("why", c.doc.why),
                ("verify", c.doc.verify),
                ("fix", c.doc.fix),
            ] {
                assert!(text.len() > 40, "{id}: {what} is too short");
                if what != "verify" {
                    assert!(
                        !text.contains("  "),
                        "{id}: {what} has a run of spaces (a broken line continuation?)"
                    );
                }
            }
        }
        let lo = super::super::find("net.loopback").unwrap();
        assert!(lo.doc.verify.contains("\n    c, _ = s.accept()"));
    }
}
