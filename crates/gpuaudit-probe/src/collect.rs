//! `gpuaudit collect --out DIR`: write a snapshot of this machine (`gpuaudit-snapshot/1`).
//!
//! Collect is the facts gather run on a recording reader ([`RootFs::recording`]): every file
//! the gather reads is copied under the same path, every command it asks is kept under
//! `cmd/`, and the readings that are no copy (a reduced file, a listing) are recorded by the
//! reader that makes them. So the paths read and the paths copied are one list, and auditing
//! the snapshot gives the same findings as the live audit it came from.

use crate::gather::{self, GatherOptions, SNAPSHOT_FORMAT};
use crate::root::{Recorder, RootFs};
use std::path::Path;
use std::sync::Arc;

pub use crate::root::{CollectError, CollectSummary};

/// `gpuaudit collect`: a snapshot of `src` (the live machine, or a snapshot collected again)
/// written into `out`, a directory this call creates. The summary says what was written, what
/// the machine did not give and what could not be written.
pub fn collect(
    src: &RootFs,
    out: &Path,
    description: &str,
    opts: &GatherOptions,
) -> Result<CollectSummary, CollectError> {
    let rec = Arc::new(Recorder::create(out)?);
    let meta = serde_json::json!({
        "format": SNAPSHOT_FORMAT,
        "description": description,
        "gpuaudit_version": env!("CARGO_PKG_VERSION"),
        // A GPUAUDIT_NOW that is no time is the clock's: collect's errors are about files.
        "collected_at": crate::time::now().unwrap_or_else(|_| crate::time::now_rfc3339()),
    });
    rec.write(
        "meta.json",
        format!(
            "{}\n",
            serde_json::to_string_pretty(&meta).unwrap_or_default()
        ),
    );
    // The facts themselves are not kept: the snapshot is what their reading left behind.
    if let Err(e) = gather::gather(&src.recording(rec.clone()), opts) {
        rec.note(e.to_string());
    }
    Ok(rec.summary())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuaudit_core::Reading;
    use std::fs;

    #[test]
    fn an_existing_path_is_refused_and_a_file_says_so() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        fs::write(&file, "x").unwrap();
        let e = Recorder::create(&file).err().unwrap();
        assert!(matches!(e, CollectError::IsAFile(_)), "{e}");
        assert!(e.to_string().contains("is a file, not a directory"));
        // An empty directory is refused too: only a directory this run made is written to.
        let e = Recorder::create(d.path()).err().unwrap();
        assert!(matches!(e, CollectError::Exists(_)), "{e}");
        let e = collect(&RootFs::live(), d.path(), "x", &GatherOptions::default())
            .err()
            .unwrap();
        assert!(matches!(e, CollectError::Exists(_)), "{e}");
        let c = Recorder::create(&d.path().join("a/b/snap")).unwrap();
        assert!(c.out().is_dir());
    }

    #[test]
    fn every_failed_write_is_listed_and_the_rest_written() {
        let d = tempfile::tempdir().unwrap();
        let c = Recorder::create(&d.path().join("snap")).unwrap();
        // A file where a directory must go: every write under it fails, also for root.
        fs::write(c.out().join("proc"), "not a directory").unwrap();
        c.write("proc/cpuinfo", "x");
        c.write("proc/meminfo", "x");
        c.write("meta.json", "{}");
        c.write("../../escape", "x");
        let summary = c.summary();
        assert_eq!(summary.failed.len(), 2, "{:?}", summary.failed);
        assert!(summary.failed[0].contains("proc/cpuinfo"));
        assert!(summary.failed[1].contains("proc/meminfo"));
        assert_eq!(summary.files, 2);
        // ".." stays inside the snapshot.
        assert!(c.out().join("escape").exists());
        assert!(!d.path().join("escape").exists());
    }

    /// What pcie.aer and health.xid read (the GPUs' PCI paths with their AER counters, the
    /// uptime, the kernel log's extract) is collected and reads back the same.
    #[test]
    fn the_aer_paths_and_the_kernel_log_are_collected_and_read_back() {
        let fixtures =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/snapshots");
        for name in ["h200-x2-aer-fatal-upstream", "h200-x2-aer-corrected-gpu"] {
            let from = fixtures.join(name);
            let d = tempfile::tempdir().unwrap();
            let out = d.path().join("snap");
            let opts = GatherOptions::default();
            let summary = collect(&RootFs::new(&from), &out, "test", &opts).unwrap();
            assert_eq!(summary.failed, Vec::<String>::new());
            let a = gather::snapshot(&from, &opts).unwrap();
            let b = gather::snapshot(&out, &opts).unwrap();
            let json = |f: &gpuaudit_core::facts::Facts| {
                serde_json::to_string_pretty(&(&f.pcie_errors, &f.xid_events)).unwrap()
            };
            assert!(a
                .pcie_errors
                .paths
                .value()
                .is_some_and(|p| p.len() == 2 && p[0].ports.len() == 4));
            assert!(a.pcie_errors.log.is_value());
            assert_eq!(json(&a), json(&b), "{name}");
            // The GPU's directory is the link into /sys/devices, as sysfs has it.
            let link = out.join("sys/bus/pci/devices/0000:18:00.0");
            assert!(fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
        }
    }

    #[test]
    fn dmi_strings_are_copied_and_read_back() {
        let machine = tempfile::tempdir().unwrap();
        let dmi = machine.path().join("sys/devices/virtual/dmi/id");
        fs::create_dir_all(&dmi).unwrap();
        // As in sysfs: /sys/class/dmi/id is a link to the virtual device's directory.
        fs::create_dir_all(machine.path().join("sys/class/dmi")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/virtual/dmi/id",
            machine.path().join("sys/class/dmi/id"),
        )
        .unwrap();
        fs::write(dmi.join("sys_vendor"), "Dell Inc.\n").unwrap();
        fs::write(dmi.join("product_name"), "PowerEdge XE9680\n").unwrap();
        fs::write(dmi.join("product_serial"), "SECRET\n").unwrap();
        let d = tempfile::tempdir().unwrap();
        let rec = Arc::new(Recorder::create(&d.path().join("snap")).unwrap());
        let src = RootFs::new(machine.path()).recording(rec.clone());
        crate::gather::files::machine(&src, Reading::unavailable("x"));
        let snap = rec.out().join("sys/class/dmi/id");
        assert_eq!(
            fs::read_to_string(snap.join("sys_vendor")).unwrap(),
            "Dell Inc.\n"
        );
        assert_eq!(
            fs::read_to_string(snap.join("product_name")).unwrap(),
            "PowerEdge XE9680\n"
        );
        // Only the strings the report shows: no serial, nothing for what is missing.
        assert!(!snap.join("product_serial").exists());
        assert!(!snap.join("board_name").exists());
        let dmi =
            crate::gather::files::machine(&RootFs::new(rec.out()), Reading::unavailable("x")).dmi;
        assert_eq!(
            dmi.product_name.value().map(String::as_str),
            Some("PowerEdge XE9680")
        );
        assert_eq!(dmi.instance_type(), None);
    }

    #[test]
    fn two_collects_into_one_directory_one_wins() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("snap");
        let wins: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| s.spawn(|| Recorder::create(&out).is_ok()))
                .collect();
            hs.into_iter().map(|h| usize::from(h.join().unwrap())).sum()
        });
        assert_eq!(wins, 1);
    }
}
