//! A PCI function's path to its root port, and the AER counters of each function on it.
//! [`upstream`] is the one walk of the path (pcie.aer reads it; other checks of the path,
//! such as ACS, can reuse it).

use crate::root::RootFs;
use gpuaudit_core::facts::{AerCounts, AerPath, AerPort, RootPortTotals};
use gpuaudit_core::parse::kernlog::parse_aer_counts;
use gpuaudit_core::Reading;

/// Where sysfs lists the PCI functions (links into /sys/devices).
pub const PCI_DEVICES: &str = "sys/bus/pci/devices";
/// The AER counter files of every AER-capable function.
pub const AER_FILES: [&str; 3] = ["aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"];
/// The root port's totals of what was reported to it.
pub const ROOTPORT_FILES: [&str; 3] = [
    "aer_rootport_total_err_cor",
    "aer_rootport_total_err_nonfatal",
    "aer_rootport_total_err_fatal",
];

/// At most this many functions on one path (PCIe allows 256 buses; real paths have 2 to 6).
const MAX_DEPTH: usize = 32;
/// Whether a path component names a PCI function ("0000:1b:00.0").
pub(crate) fn is_function(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// Where a device sits: its sysfs directory and the PCI functions from the root port down
/// to the device itself (the last).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciPath {
    /// "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0".
    pub sysfs: String,
    pub functions: Vec<String>,
}

impl PciPath {
    /// The sysfs directory (relative to the root) of `functions[i]`.
    pub fn dir_of(&self, i: usize) -> Option<String> {
        let name = self.functions.get(i)?;
        let at = self.sysfs.find(&format!("/{name}"))?;
        Some(
            self.sysfs[..at + 1 + name.len()]
                .trim_start_matches('/')
                .to_string(),
        )
    }
}

/// The one walk up a device's path (pcie.acs's, net.placement's and pcie.aer's): resolve the sysfs link `rel`
/// (`sys/bus/pci/devices/<bdf>`, `sys/class/infiniband/<hca>/device`) and take the PCI
/// functions after the host bridge (`pciDDDD:BB`).
pub fn upstream_of_link(root: &RootFs, rel: &str) -> Result<PciPath, String> {
    let real = root
        .real_path(rel)
        .ok_or_else(|| format!("{}: does not resolve", root.display(rel)))?;
    let comps: Vec<&str> = real.split('/').filter(|c| !c.is_empty()).collect();
    let bridge = comps.iter().rposition(|c| {
        c.strip_prefix("pci")
            .is_some_and(|r| r.len() == 7 && r.as_bytes()[4] == b':')
    });
    let Some(bridge) = bridge.filter(|_| comps.first() == Some(&"sys")) else {
        return Err(format!(
            "{} resolves to {}, not to a device under a PCI host bridge (/sys/devices/pci…){}",
            root.display(rel),
            gpuaudit_core::parse::host::truncate(&real, 200),
            if root.is_live() {
                ""
            } else {
                " (a snapshot collected before the PCIe paths were kept)"
            }
        ));
    };
    let functions: Vec<String> = comps[bridge + 1..]
        .iter()
        .take_while(|c| is_function(c))
        .take(MAX_DEPTH)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if functions.is_empty() {
        return Err(format!(
            "{} resolves to {}, which names no PCI function",
            root.display(rel),
            gpuaudit_core::parse::host::truncate(&real, 200)
        ));
    }
    Ok(PciPath {
        sysfs: format!("/{}", comps[..=bridge + functions.len()].join("/")),
        functions,
    })
}

/// The path of PCI function `bus` (`0000:18:00.0`): its directory under /sys/devices
/// (relative, "sys/devices/pci0000:00/0000:00:01.0/0000:18:00.0") and the PCI functions on
/// it from the root port down to `bus` itself (last). `/sys/bus/pci/devices/<bus>` is a link
/// into /sys/devices; a parent that is not a PCI function (the host bridge `pci0000:00`, a
/// VMD or platform device) ends the path. An error says why the path is not known (the link
/// does not resolve into /sys/devices, as in a snapshot written before it was collected).
pub fn upstream(root: &RootFs, bus: &str) -> Result<(String, Vec<String>), String> {
    let link = format!("{PCI_DEVICES}/{bus}");
    let p = upstream_of_link(root, &link)?;
    if p.functions.last().map(String::as_str) != Some(bus) {
        return Err(format!(
            "/{link} resolves to {}, not to the function itself",
            p.sysfs
        ));
    }
    Ok((p.sysfs.trim_start_matches('/').to_string(), p.functions))
}

fn counts(root: &RootFs, file: &str) -> Reading<AerCounts> {
    match root.read_text(file) {
        Ok(Some(t)) => match parse_aer_counts(&t) {
            Some(c) => Reading::Value(c),
            None => Reading::unavailable(format!("{}: not AER counts", root.display(file))),
        },
        Ok(None) => Reading::unavailable(format!("{}: no such file", root.display(file))),
        Err(e) => Reading::Unavailable(e),
    }
}

fn totals(root: &RootFs, dir: &str) -> Option<RootPortTotals> {
    let n = |f: &str| -> Option<u64> {
        root.read_text(&format!("{dir}/{f}"))
            .ok()
            .flatten()
            .and_then(|t| t.trim().parse().ok())
    };
    Some(RootPortTotals {
        cor: n(ROOTPORT_FILES[0])?,
        nonfatal: n(ROOTPORT_FILES[1])?,
        fatal: n(ROOTPORT_FILES[2])?,
    })
}

/// The directories of each function of `bus`'s path, GPU first; `Err` where the path is
/// not known (then only the function's own directory, and why).
pub fn port_dirs(root: &RootFs, bus: &str) -> (Vec<(String, String)>, Option<String>) {
    match upstream(root, bus) {
        Ok((rel, chain)) => {
            let mut dirs = Vec::new();
            let mut dir = rel;
            for b in chain.iter().rev() {
                dirs.push((b.clone(), dir.clone()));
                dir = dir
                    .rsplit_once('/')
                    .map(|x| x.0.to_string())
                    .unwrap_or_default();
            }
            (dirs, None)
        }
        Err(e) => (
            vec![(bus.to_string(), format!("{PCI_DEVICES}/{bus}"))],
            Some(e),
        ),
    }
}

/// The AER path of GPU `bus`: each function's counters, the GPU first.
pub fn aer_path(root: &RootFs, bus: &str) -> AerPath {
    let (dirs, unknown) = port_dirs(root, bus);
    let top = dirs.len().saturating_sub(1);
    let ports = dirs
        .iter()
        .enumerate()
        .map(|(i, (b, dir))| {
            let c = |f: &str| counts(root, &format!("{dir}/{f}"));
            AerPort {
                bus_id: b.clone(),
                // The topmost function above the GPU, under the host bridge (a GPU on the
                // root bus, as in a VM, is no port).
                root_port: i == top && i > 0 && unknown.is_none(),
                correctable: c(AER_FILES[0]),
                nonfatal: c(AER_FILES[1]),
                fatal: c(AER_FILES[2]),
                rootport_totals: totals(root, dir),
            }
        })
        .collect();
    AerPath {
        gpu: bus.to_string(),
        ports,
        upstream_unknown: unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn the_path_to_the_root_port_and_its_counters() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path().join("sys/devices/pci0000:00/0000:00:01.0");
        let gpu = top.join("0000:01:00.0/0000:02:08.0/0000:18:00.0");
        fs::create_dir_all(&gpu).unwrap();
        fs::create_dir_all(d.path().join(PCI_DEVICES)).unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:18:00.0",
            d.path().join("sys/bus/pci/devices/0000:18:00.0"),
        )
        .unwrap();
        fs::write(
            gpu.join("aer_dev_correctable"),
            "RxErr 5\nBadTLP 0\nTOTAL_ERR_COR 5\n",
        )
        .unwrap();
        fs::write(top.join("aer_dev_fatal"), "SDES 1\nTOTAL_ERR_FATAL 1\n").unwrap();
        for (f, v) in ROOTPORT_FILES.iter().zip(["3", "0", "1"]) {
            fs::write(top.join(f), format!("{v}\n")).unwrap();
        }
        let root = RootFs::new(d.path());
        let (rel, chain) = upstream(&root, "0000:18:00.0").unwrap();
        assert_eq!(
            rel,
            "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:18:00.0"
        );
        assert_eq!(
            chain,
            vec![
                "0000:00:01.0",
                "0000:01:00.0",
                "0000:02:08.0",
                "0000:18:00.0"
            ]
        );
        let p = aer_path(&root, "0000:18:00.0");
        assert_eq!(p.upstream_unknown, None);
        let buses: Vec<&str> = p.ports.iter().map(|x| x.bus_id.as_str()).collect();
        assert_eq!(
            buses,
            vec![
                "0000:18:00.0",
                "0000:02:08.0",
                "0000:01:00.0",
                "0000:00:01.0"
            ]
        );
        assert!(p.ports[3].root_port && !p.ports[2].root_port && !p.ports[0].root_port);
        assert_eq!(p.ports[0].correctable.value().unwrap().total, 5);
        assert_eq!(p.ports[3].fatal.value().unwrap().total, 1);
        assert_eq!(
            p.ports[3].rootport_totals,
            Some(RootPortTotals {
                cor: 3,
                nonfatal: 0,
                fatal: 1
            })
        );
        assert_eq!(p.ports[2].rootport_totals, None);
        assert_eq!(
            p.ports[1].nonfatal.reason(),
            Some("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/aer_dev_nonfatal: no such file")
        );
        // A directory, not a link (a snapshot from before): the function alone.
        fs::create_dir_all(d.path().join("sys/bus/pci/devices/0000:00:06.0")).unwrap();
        let p = aer_path(&root, "0000:00:06.0");
        assert_eq!(p.ports.len(), 1);
        assert!(!p.ports[0].root_port);
        assert!(p
            .upstream_unknown
            .as_deref()
            .unwrap()
            .contains("not to a device under a PCI host bridge"));
        // A GPU on the root bus (a VM): no port above it.
        fs::create_dir_all(d.path().join("sys/devices/pci0000:00/0000:00:07.0")).unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:00:07.0",
            d.path().join("sys/bus/pci/devices/0000:00:07.0"),
        )
        .unwrap();
        let p = aer_path(&root, "0000:00:07.0");
        assert_eq!(p.ports.len(), 1);
        assert_eq!(p.upstream_unknown, None);
        assert!(!p.ports[0].root_port);
        assert!(upstream(&root, "0000:99:00.0")
            .unwrap_err()
            .contains("does not resolve"));
    }
}
