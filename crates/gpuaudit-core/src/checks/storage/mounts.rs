//! storage.mounts: the file system under each data directory, and NFS mount options.

use crate::checks::common::storage_of;
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, Mount};
use crate::finding::Finding;
use crate::parse::host::mounts::FsClass;
use crate::policy::{Policy, Profile};

const ID: &str = "storage.mounts";

/// NFS rsize/wsize below this (bytes) cut every large read into small RPCs; 1 MiB is the
/// usual maximum (old defaults were 32-64 KiB).
pub const NFS_BLOCK_MIN: u64 = 1 << 20;

pub const CHECK: Check = Check {
    id: ID,
    title: "File systems under the data directories (network, FUSE, overlay, NFS options)",
    looks_at: "file systems under the data directories (nfs, ceph, fuse, overlay, local), NFS \
               rsize/wsize",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "The file system under each data directory (--data-dir, or by default the \
               current directory and the Hugging Face and torch caches), from /proc/mounts: \
               local disk, memory, network (NFS, CIFS, Ceph, Lustre, GPFS, BeeGFS, ...), \
               FUSE (object-storage gateways such as s3fs, gcsfuse, mountpoint-s3, \
               blobfuse), a container's overlay layer, or a VM's host share (9p, virtiofs); \
               and, for NFS, the options that decide its speed and safety: rsize/wsize, \
               hard/soft, sync, proto, attribute caching.",
        why: "Where the data lives decides how fast a GPU can be fed. Small NFS rsize/wsize \
              (the 32-64 KiB of old defaults instead of 1 MiB) cuts sequential throughput \
              several times; a soft NFS mount returns I/O errors on a server hiccup, which \
              shows up as corrupt checkpoints or crashed data loaders; FUSE object-storage \
              mounts read small random files 10-100x slower than a local disk; data in a \
              container's overlay layer is lost with the container and slow to write.",
        verify: "findmnt -T DIR            # the file system under DIR, with its options\n\
                 nfsstat -m                # NFS mounts with the options the client negotiated\n\
                 grep -E ' (nfs4?|cifs|ceph|lustre|fuse[.a-z0-9]*|overlay) ' /proc/mounts",
        fix: "Copy hot datasets and model weights to local NVMe (or a RAM disk); mount NFS \
              with `-o hard,rsize=1048576,wsize=1048576,nconnect=8` (and proto=tcp); put \
              checkpoints on a volume, not in the container layer; for object storage, use \
              a caching layer or the framework's streaming reader instead of a FUSE mount.",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "Data on a FUSE mount or in the container's overlay layer warns instead of being info; an NFS mount with 'soft', small rsize/wsize, UDP or 'sync', and a 9p host share, fail instead of warning: every epoch reads the data again.",
        },
    ],
    run: run_mounts,
};

fn run_mounts(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let dirs = match facts.host.data_dirs.get() {
        Ok(d) => d,
        Err(r) => {
            return vec![Finding::skip(
                ID,
                format!("no data directory to look at: {r}"),
            )]
        }
    };
    if let Err(r) = facts.host.mounts.get() {
        return vec![Finding::skip(
            ID,
            format!("could not read the mount table: {r}"),
        )];
    }
    if dirs.is_empty() {
        return vec![Finding::skip(ID, "no data directory to look at")];
    }
    let train = policy.profile == Profile::Train;
    let mut out = Vec::new();
    for d in dirs {
        let label = format!("{} ({})", d.path, d.role);
        if let Some(why) = &d.unreadable {
            out.push(
                Finding::skip(ID, format!("cannot look at {label}: {why}")).with("path", &d.path),
            );
            continue;
        }
        if !d.exists {
            out.push(
                Finding::info(ID, format!("{label} does not exist: nothing to judge"))
                    .with("path", &d.path),
            );
            continue;
        }
        let path = d.resolved.as_deref().unwrap_or(&d.path);
        let Some((m, class)) = storage_of(facts, path) else {
            out.push(Finding::skip(
                ID,
                format!("no mount in the table covers {path}"),
            ));
            continue;
        };
        let ev = |f: Finding| {
            f.with("path", &d.path)
                .with("resolved", &d.resolved)
                .with("mountpoint", &m.target)
                .with("fstype", &m.fstype)
                .with("source", &m.source)
                .with("options", m.options.join(","))
        };
        let on = format!(
            "{label} is on {} ({} from {})",
            m.target, m.fstype, m.source
        );
        match class {
            FsClass::Local | FsClass::Image => {
                out.push(ev(Finding::pass(ID, format!("{on}: local storage"))))
            }
            FsClass::Memory => out.push(ev(Finding::info(
                ID,
                format!("{on}: in memory; fast, but it counts against RAM and is gone at reboot"),
            ))),
            FsClass::Network => out.extend(judge_network(m, &on, train).into_iter().map(ev)),
            FsClass::Fuse => {
                let msg = format!("{on}: a FUSE file system (often object storage): every read crosses into a user-space daemon and usually the network; small and random reads are 10-100x slower than a local disk");
                let f = if train {
                    Finding::warn(ID, msg)
                } else {
                    Finding::info(ID, msg)
                };
                out.push(ev(f.fix("stage the dataset to local NVMe before training, or read it with a streaming loader (WebDataset, MosaicML streaming) instead of through the mount")));
            }
            FsClass::Overlay => {
                let msg = format!("{on}: the container's own writable layer; writes go through copy-up, and everything written there is lost with the container");
                let f = if train {
                    Finding::warn(ID, msg)
                } else {
                    Finding::info(ID, msg)
                };
                out.push(ev(f.fix("mount a volume (or a host directory) for data, caches and checkpoints: `docker run -v /data:/data ...`")));
            }
            FsClass::HostShare => {
                let slow = m.fstype == "9p";
                let msg = format!(
                    "{on}: a directory shared from the VM's host{}",
                    if slow {
                        "; 9p typically gives tens of MB/s"
                    } else {
                        ""
                    }
                );
                let f = if slow {
                    severe(train, msg)
                } else {
                    Finding::info(ID, msg)
                };
                out.push(ev(f.fix("copy data to a disk of the VM itself")));
            }
            FsClass::Other => out.push(ev(Finding::info(
                ID,
                format!("{on}: a file system gpuaudit does not classify"),
            ))),
        }
    }
    out
}

/// A fault of the storage under the data: a warning, and under `--profile train` (which reads
/// the data every epoch) a failure.
fn severe(train: bool, msg: String) -> Finding {
    if train {
        Finding::fail(ID, msg)
    } else {
        Finding::warn(ID, msg)
    }
}

fn judge_network(m: &Mount, on: &str, train: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let nfs = m.fstype.starts_with("nfs");
    if nfs {
        let mut small = Vec::new();
        for k in ["rsize", "wsize"] {
            if let Some(v) = m.option(k).and_then(|v| v.parse::<u64>().ok()) {
                if v < NFS_BLOCK_MIN {
                    small.push(format!("{k}={v}"));
                }
            }
        }
        if !small.is_empty() {
            out.push(
                severe(train, format!("{on}: NFS with {} (1 MiB is the usual maximum): every large read is cut into small RPCs, several times slower on a fast network", small.join(" ")))
                    .fix(format!("remount with larger blocks: `sudo mount -o remount,rsize=1048576,wsize=1048576 {}` (and in /etc/fstab; the server may cap them)", m.target)),
            );
        }
        if m.option("soft").is_some() {
            let msg = format!("{on}: NFS mounted 'soft': when the server is slow to answer, reads and writes fail with I/O errors instead of waiting, which corrupts checkpoints and kills data loaders");
            out.push(severe(train, msg).fix(format!(
                "mount with 'hard' (the default): `sudo mount -o remount,hard {}`",
                m.target
            )));
        }
        if m.option("proto").is_some_and(|p| p.starts_with("udp")) {
            out.push(
                severe(
                    train,
                    format!("{on}: NFS over UDP: lost datagrams stall large transfers"),
                )
                .fix("mount with proto=tcp"),
            );
        }
        if m.option("sync").is_some() {
            out.push(severe(train, format!("{on}: mounted 'sync': every write waits for the server; checkpoint writes crawl")).fix("remove 'sync' from the mount options"));
        }
        if m.option("noac").is_some() || m.option("actimeo") == Some("0") {
            out.push(Finding::info(ID, format!("{on}: attribute caching is off (noac/actimeo=0): every stat and open asks the server; slow for many small files")));
        }
    }
    if out.is_empty() {
        let msg = format!(
            "{on}: a network file system; fine for large sequential reads{}, slow for many small files; storage.throughput measures it",
            if nfs && m.option("nconnect").is_none() { " (nconnect=8 helps on fast networks)" } else { "" }
        );
        out.push(Finding::info(ID, msg));
    }
    out
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::DataDir;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::Machine;

    fn facts(mounts: &str) -> Facts {
        Machine::healthy("h200-sxm-141gb", 2).mounts(mounts).build()
    }

    fn dir(p: &str) -> DataDir {
        DataDir {
            path: p.into(),
            role: "--data-dir".into(),
            exists: true,
            unreadable: None,
            resolved: Some(p.into()),
            writable: Reading::Value(true),
        }
    }

    #[test]
    fn nfs_soft_small_rsize() {
        let mut f = facts("/dev/vda / ext4 rw 0 0\nnas:/export /mnt/data nfs4 rw,relatime,vers=4.1,rsize=65536,wsize=65536,soft,proto=tcp 0 0\n");
        f.host.data_dirs = Reading::Value(vec![dir("/mnt/data/imagenet"), dir("/home/u")]);
        let p = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        let r = run_mounts(&f, &p);
        let s: Vec<Status> = r.iter().map(|x| x.status).collect();
        // Under train both NFS faults fail (small blocks cut every epoch's reads).
        assert_eq!(s, vec![Status::Fail, Status::Fail, Status::Pass], "{r:#?}");
        assert!(r[0].message.contains("rsize=65536"));
        assert!(r[1].message.contains("soft"));
    }

    #[test]
    fn a_directory_this_user_may_not_look_into_is_a_skip_with_the_reason_not_missing() {
        let mut f = facts("/dev/vda / ext4 rw 0 0\n");
        let mut hidden = dir("/root/.cache/torch");
        hidden.exists = false;
        hidden.unreadable = Some("/root/.cache/torch: permission denied".into());
        f.host.data_dirs = Reading::Value(vec![hidden, dir("/data")]);
        let r = run_mounts(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Skip, "{r:#?}");
        assert_eq!(
            r[0].message,
            "cannot look at /root/.cache/torch (--data-dir): /root/.cache/torch: permission denied"
        );
        assert_eq!(r[1].status, Status::Pass, "{r:#?}");
    }

    #[test]
    fn fuse_overlay_and_missing() {
        let mut f = facts("overlay / overlay rw,lowerdir=/a 0 0\ns3fs /mnt/s3 fuse.s3fs rw 0 0\n");
        let mut missing = dir("/nope");
        missing.exists = false;
        f.host.data_dirs = Reading::Value(vec![dir("/mnt/s3/x"), dir("/workspace"), missing]);
        let r = run_mounts(&f, &Policy::default());
        let s: Vec<Status> = r.iter().map(|x| x.status).collect();
        assert_eq!(s, vec![Status::Info, Status::Info, Status::Info], "{r:#?}");
        let p = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        let s: Vec<Status> = run_mounts(&f, &p).iter().map(|x| x.status).collect();
        assert_eq!(s, vec![Status::Warn, Status::Warn, Status::Info]);
        f.host.data_dirs = Reading::unavailable("snapshot has no cmd/data-dirs.json");
        assert_eq!(run_mounts(&f, &p)[0].status, Status::Skip);
    }

    fn judged(mounts: &str, profile: Profile) -> Vec<Status> {
        let mut f = facts(mounts);
        f.host.data_dirs = Reading::Value(vec![dir("/data/set")]);
        run_mounts(
            &f,
            &Policy {
                profile,
                ..Policy::default()
            },
        )
        .iter()
        .map(|x| x.status)
        .collect()
    }

    #[test]
    fn nfs_faults_fail_under_train() {
        let root = "/dev/vda / ext4 rw 0 0\n";
        for (opts, what) in [
            ("rw,rsize=65536,wsize=1048576,hard", "small rsize"),
            ("rw,rsize=1048576,wsize=1048576,proto=udp", "udp"),
            ("rw,rsize=1048576,wsize=1048576,sync", "sync"),
            ("rw,rsize=1048576,wsize=1048576,soft", "soft"),
        ] {
            let t = format!("{root}nas:/x /data nfs4 {opts} 0 0\n");
            assert_eq!(judged(&t, Profile::General), vec![Status::Warn], "{what}");
            assert_eq!(judged(&t, Profile::Train), vec![Status::Fail], "{what}");
            assert_eq!(judged(&t, Profile::Inference), vec![Status::Warn], "{what}");
        }
        // 1 MiB is enough; one byte less is not.
        let at =
            format!("{root}nas:/x /data nfs4 rw,rsize={NFS_BLOCK_MIN},wsize={NFS_BLOCK_MIN} 0 0\n");
        assert_eq!(judged(&at, Profile::Train), vec![Status::Info]);
        let below = format!(
            "{root}nas:/x /data nfs4 rw,rsize={},wsize={NFS_BLOCK_MIN} 0 0\n",
            NFS_BLOCK_MIN - 1
        );
        assert_eq!(judged(&below, Profile::Train), vec![Status::Fail]);
        // Attribute caching off: said, not a fault.
        let noac = format!("{root}nas:/x /data nfs4 rw,noac 0 0\n");
        assert_eq!(judged(&noac, Profile::Train), vec![Status::Info]);
        let actimeo = format!("{root}nas:/x /data nfs actimeo=0 0 0\n");
        assert_eq!(judged(&actimeo, Profile::General), vec![Status::Info]);
        // Other network file systems: said.
        let lustre = format!("{root}10.0.0.1@tcp:/fs /data lustre rw 0 0\n");
        assert_eq!(judged(&lustre, Profile::Train), vec![Status::Info]);
        // A VM's 9p share is slow; virtiofs is not judged slow.
        let p9 = format!("{root}share /data 9p rw,trans=virtio 0 0\n");
        assert_eq!(judged(&p9, Profile::General), vec![Status::Warn]);
        assert_eq!(judged(&p9, Profile::Train), vec![Status::Fail]);
        let vfs = format!("{root}share /data virtiofs rw 0 0\n");
        assert_eq!(judged(&vfs, Profile::Train), vec![Status::Info]);
        let tmp = format!("{root}tmpfs /data tmpfs rw 0 0\n");
        assert_eq!(judged(&tmp, Profile::Train), vec![Status::Info]);
    }

    #[test]
    fn mounts_unread_and_uncovered() {
        let mut f = facts("/dev/vda /boot ext4 rw 0 0\n");
        f.host.data_dirs = Reading::Value(vec![dir("/data")]);
        let r = run_mounts(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Skip);
        assert!(r[0].message.contains("no mount in the table covers /data"));
        f.host.data_dirs = Reading::Value(vec![]);
        assert_eq!(run_mounts(&f, &Policy::default())[0].status, Status::Skip);
        f.host.data_dirs = Reading::Value(vec![dir("/data")]);
        f.host.mounts = Reading::unavailable("binary");
        let r = run_mounts(&f, &Policy::default());
        assert!(r[0]
            .message
            .contains("could not read the mount table: binary"));
    }
}
