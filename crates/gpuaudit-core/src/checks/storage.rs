//! Storage and shared memory: storage.mounts, storage.throughput, host.shm.

use super::hostcommon::{gpu_count, human_bytes, storage_of};
use super::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, Mount};
use crate::finding::{Finding, Status};
use crate::parse::host::mounts::{parse_size, FsClass};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

pub const CHECKS: &[Check] = &[
    Check {
        id: "storage.mounts",
        title: "File systems under the data directories (network, FUSE, overlay, NFS options)",
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
        run: run_mounts,
    },
    Check {
        id: "storage.throughput",
        title: "Measured direct-I/O sequential write/read and 4 KiB random read in the data directories",
        kind: CheckKind::Measured,
        doc: CheckDoc {
            what: "In each writable data directory, a temporary file (removed afterwards, also on \
                   Ctrl-C) is written sequentially with O_DIRECT in 1 MiB blocks and fsynced, read \
                   back sequentially, then read at random 4 KiB offsets one at a time (queue \
                   depth 1), a few seconds each. Where the file system refuses O_DIRECT (tmpfs, \
                   some overlays), buffered I/O is used and the report says so.",
            why: "A training job reads its dataset every epoch and an inference server reads its \
                  weights at every start: at 150 MB/s, 100 GB take 11 minutes; at 3 GB/s, 33 \
                  seconds. Random 4 KiB reads are what data loaders over many small files (images, \
                  shards' indexes) do; network block storage that looks fine sequentially often \
                  gives only a few thousand of them per second.",
            verify: "fio --name=seq --directory=DIR --rw=write --bs=1M --size=2G --direct=1 --end_fsync=1\n\
                     fio --name=seq --directory=DIR --rw=read --bs=1M --size=2G --direct=1\n\
                     fio --name=rand --directory=DIR --rw=randread --bs=4k --size=2G --direct=1 --iodepth=1 --runtime=5",
            fix: "Put data and weights on local NVMe (instance storage) or a faster volume tier \
                  (provisioned IOPS/throughput); stage datasets to local disk before training; \
                  for many small files, pack them into shards (WebDataset, TFRecord, Arrow).",
        },
        run: run_throughput,
    },
    Check {
        id: "host.shm",
        title: "/dev/shm size (the 64 MB container default breaks data loaders and NCCL)",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "The size of the /dev/shm mount (tmpfs), from /proc/mounts; a tmpfs without a \
                   size= option gets half of RAM.",
            why: "PyTorch DataLoader workers hand every batch to the training process through \
                  /dev/shm, and NCCL uses it between processes of one node. Docker gives a \
                  container 64 MB unless told otherwise: loaders die with 'bus error' or \
                  'unable to write to file </torch_...>: No space left on device', and NCCL \
                  fails with 'unable to allocate shared memory' or falls back to slower paths.",
            verify: "df -h /dev/shm\n\
                     grep /dev/shm /proc/mounts",
            fix: "Docker: `docker run --shm-size=16g ...` or `--ipc=host`; Kubernetes: mount an \
                  emptyDir with `medium: Memory` (and a sizeLimit) at /dev/shm; a host: `mount -o \
                  remount,size=32G /dev/shm` (and in /etc/fstab).",
        },
        run: run_shm,
    },
];

const ID_MOUNTS: &str = "storage.mounts";
const ID_TP: &str = "storage.throughput";
const ID_SHM: &str = "host.shm";

fn run_mounts(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let dirs = match facts.host.data_dirs.get() {
        Ok(d) => d,
        Err(r) => {
            return vec![Finding::skip(
                ID_MOUNTS,
                format!("no data directory to look at: {r}"),
            )]
        }
    };
    if let Err(r) = facts.host.mounts.get() {
        return vec![Finding::skip(
            ID_MOUNTS,
            format!("could not read the mount table: {r}"),
        )];
    }
    if dirs.is_empty() {
        return vec![Finding::skip(ID_MOUNTS, "no data directory to look at")];
    }
    let train = policy.profile == Profile::Train;
    let mut out = Vec::new();
    for d in dirs {
        let label = format!("{} ({})", d.path, d.role);
        if !d.exists {
            out.push(
                Finding::info(
                    ID_MOUNTS,
                    format!("{label} does not exist: nothing to judge"),
                )
                .with("path", &d.path),
            );
            continue;
        }
        let path = d.resolved.as_deref().unwrap_or(&d.path);
        let Some((m, class)) = storage_of(facts, path) else {
            out.push(Finding::skip(
                ID_MOUNTS,
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
                out.push(ev(Finding::pass(ID_MOUNTS, format!("{on}: local storage"))))
            }
            FsClass::Memory => out.push(ev(Finding::info(
                ID_MOUNTS,
                format!("{on}: in memory; fast, but it counts against RAM and is gone at reboot"),
            ))),
            FsClass::Network => out.extend(judge_network(m, &on, train).into_iter().map(ev)),
            FsClass::Fuse => {
                let msg = format!("{on}: a FUSE file system (often object storage): every read crosses into a user-space daemon and usually the network; small and random reads are 10-100x slower than a local disk");
                let f = if train {
                    Finding::warn(ID_MOUNTS, msg)
                } else {
                    Finding::info(ID_MOUNTS, msg)
                };
                out.push(ev(f.fix("stage the dataset to local NVMe before training, or read it with a streaming loader (WebDataset, MosaicML streaming) instead of through the mount")));
            }
            FsClass::Overlay => {
                let msg = format!("{on}: the container's own writable layer; writes go through copy-up, and everything written there is lost with the container");
                let f = if train {
                    Finding::warn(ID_MOUNTS, msg)
                } else {
                    Finding::info(ID_MOUNTS, msg)
                };
                out.push(ev(f.fix("mount a volume (or a host directory) for data, caches and checkpoints: docker run -v /data:/data ...")));
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
                    Finding::warn(ID_MOUNTS, msg)
                } else {
                    Finding::info(ID_MOUNTS, msg)
                };
                out.push(ev(f.fix("copy data to a disk of the VM itself")));
            }
            FsClass::Other => out.push(ev(Finding::info(
                ID_MOUNTS,
                format!("{on}: a file system gpuaudit does not classify"),
            ))),
        }
    }
    out
}

fn judge_network(m: &Mount, on: &str, train: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let nfs = m.fstype.starts_with("nfs");
    if nfs {
        let mut small = Vec::new();
        for k in ["rsize", "wsize"] {
            if let Some(v) = m.option(k).and_then(|v| v.parse::<u64>().ok()) {
                if v < 1 << 20 {
                    small.push(format!("{k}={v}"));
                }
            }
        }
        if !small.is_empty() {
            out.push(
                Finding::warn(ID_MOUNTS, format!("{on}: NFS with {} (1 MiB is the usual maximum): every large read is cut into small RPCs, several times slower on a fast network", small.join(" ")))
                    .fix(format!("remount with larger blocks: mount -o remount,rsize=1048576,wsize=1048576 {} (and in /etc/fstab; the server may cap them)", m.target)),
            );
        }
        if m.option("soft").is_some() {
            let msg = format!("{on}: NFS mounted 'soft': when the server is slow to answer, reads and writes fail with I/O errors instead of waiting, which corrupts checkpoints and kills data loaders");
            let f = if train {
                Finding::fail(ID_MOUNTS, msg)
            } else {
                Finding::warn(ID_MOUNTS, msg)
            };
            out.push(f.fix(format!(
                "mount with 'hard' (the default): mount -o remount,hard {}",
                m.target
            )));
        }
        if m.option("proto").is_some_and(|p| p.starts_with("udp")) {
            out.push(
                Finding::warn(
                    ID_MOUNTS,
                    format!("{on}: NFS over UDP: lost datagrams stall large transfers"),
                )
                .fix("mount with proto=tcp"),
            );
        }
        if m.option("sync").is_some() {
            out.push(Finding::warn(ID_MOUNTS, format!("{on}: mounted 'sync': every write waits for the server; checkpoint writes crawl")).fix("remove 'sync' from the mount options"));
        }
        if m.option("noac").is_some() || m.option("actimeo") == Some("0") {
            out.push(Finding::info(ID_MOUNTS, format!("{on}: attribute caching is off (noac/actimeo=0): every stat and open asks the server; slow for many small files")));
        }
    }
    if out.is_empty() {
        let msg = format!(
            "{on}: a network file system; fine for large sequential reads{}, slow for many small files; storage.throughput measures it",
            if nfs && m.option("nconnect").is_none() { " (nconnect=8 helps on fast networks)" } else { "" }
        );
        out.push(Finding::info(ID_MOUNTS, msg));
    }
    out
}

fn run_throughput(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let results = match facts.host.throughput.get() {
        Ok(r) => r,
        Err(r) => return vec![Finding::skip(ID_TP, format!("not measured: {r}"))],
    };
    if results.is_empty() {
        return vec![Finding::skip(ID_TP, "not measured: no data directory")];
    }
    let train = policy.profile == Profile::Train;
    let mut out = Vec::new();
    for t in results {
        let r = match &t.result {
            Reading::Value(r) => r,
            Reading::Unavailable(why) => {
                out.push(
                    Finding::skip(ID_TP, format!("{}: not measured: {why}", t.path))
                        .with("path", &t.path),
                );
                continue;
            }
        };
        let minutes_100gb = if r.seq_read_mb_s > 0.0 {
            100_000.0 / r.seq_read_mb_s / 60.0
        } else {
            f64::INFINITY
        };
        let mut msg = format!(
            "{}: sequential write {:.0} MB/s, sequential read {:.0} MB/s ({} per 100 GB read), 4 KiB random read {:.0} IOPS at queue depth 1",
            t.path,
            r.seq_write_mb_s,
            r.seq_read_mb_s,
            if minutes_100gb < 1.0 { format!("{:.0} s", minutes_100gb * 60.0) } else { format!("{minutes_100gb:.1} min") },
            r.rand_read_iops
        );
        if !r.direct {
            msg.push_str("; O_DIRECT was refused, so these are buffered figures (the page cache may flatter reads)");
        }
        let (status, why) = if r.seq_read_mb_s < 100.0 {
            (
                if train { Status::Fail } else { Status::Warn },
                "slower than a single hard disk: a GPU waits for its data",
            )
        } else if r.seq_read_mb_s < 500.0 {
            (if train { Status::Warn } else { Status::Info }, "below what a local NVMe disk gives (2000-7000 MB/s): large datasets and model loads are disk-bound")
        } else if r.rand_read_iops < 1000.0 {
            (if train { Status::Warn } else { Status::Info }, "few random reads per second: data loaders over many small files will starve the GPU")
        } else {
            (Status::Pass, "")
        };
        if !why.is_empty() {
            msg.push_str(&format!(": {why}"));
        }
        let mut f = Finding::new(ID_TP, status, msg)
            .with("path", &t.path)
            .with("seq_write_mb_s", round1(r.seq_write_mb_s))
            .with("seq_read_mb_s", round1(r.seq_read_mb_s))
            .with("rand_read_iops", round1(r.rand_read_iops))
            .with("file_bytes", r.file_bytes)
            .with("direct", r.direct)
            .with("method", &r.method);
        if status.severity() >= Status::Info.severity() {
            f = f.fix(
                "stage data on local NVMe (or a faster volume tier); pack small files into shards",
            );
        }
        out.push(f);
    }
    out
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn run_shm(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let mounts = match facts.host.mounts.get() {
        Ok(m) => m,
        Err(r) => {
            return vec![Finding::skip(
                ID_SHM,
                format!("could not read the mount table: {r}"),
            )]
        }
    };
    let gpus = gpu_count(facts).unwrap_or(0);
    let train = policy.profile == Profile::Train;
    // The last mount on /dev/shm hides the earlier ones.
    let Some(m) = mounts.iter().rev().find(|m| m.target == "/dev/shm") else {
        return vec![Finding::warn(ID_SHM, "/dev/shm is not mounted: PyTorch data loader workers and NCCL cannot share memory between processes")
            .fix("mount a tmpfs on /dev/shm (mount -t tmpfs -o size=16G tmpfs /dev/shm), or start the container with --shm-size=16g / --ipc=host")];
    };
    let ram = facts.machine.memory_total_kib.value().map(|k| k * 1024);
    let size = match m.option("size") {
        Some(s) if s.ends_with('%') => s
            .trim_end_matches('%')
            .parse::<u64>()
            .ok()
            .zip(ram)
            .map(|(p, r)| r / 100 * p),
        Some(s) => parse_size(s),
        // tmpfs without size= gets half of RAM.
        None if m.fstype == "tmpfs" => ram.map(|r| r / 2),
        None => None,
    };
    let ev = |f: Finding| {
        f.with("fstype", &m.fstype)
            .with("options", m.options.join(","))
            .with("size_bytes", size)
            .with("ram_bytes", ram)
    };
    let Some(size) = size else {
        return vec![ev(Finding::info(
            ID_SHM,
            format!(
                "/dev/shm is a {} mount of unknown size (no size= option, RAM not read)",
                m.fstype
            ),
        ))];
    };
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let fix = "docker run --shm-size=16g (or --ipc=host); Kubernetes: an emptyDir with medium: Memory mounted at /dev/shm; on a host: mount -o remount,size=32G /dev/shm";
    let h = human_bytes(size);
    let f = if size <= 256 * MIB {
        let msg = format!("/dev/shm is only {h}: PyTorch DataLoader workers crash with 'bus error' / 'No space left on device' and NCCL fails to allocate shared memory (Docker's 64 MB default)");
        (if train || gpus > 1 {
            Finding::fail(ID_SHM, msg)
        } else {
            Finding::warn(ID_SHM, msg)
        })
        .fix(fix)
    } else if size < GIB {
        Finding::warn(ID_SHM, format!("/dev/shm is {h}: enough for small jobs; data loaders with several workers and large batches run out")).fix(fix)
    } else if train && size < 8 * GIB {
        Finding::warn(ID_SHM, format!("/dev/shm is {h}: tight for multi-worker data loading and NCCL on a training machine (16 GiB or more is usual)")).fix(fix)
    } else {
        Finding::pass(ID_SHM, format!("/dev/shm is {h}"))
    };
    vec![ev(f)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{DataDir, DirThroughput, IoResult};
    use crate::parse::host::mounts::parse_mounts;

    fn facts(mounts: &str) -> Facts {
        let mut f = super::super::hostcommon::facts_with_gpus(2, (9, 0));
        f.host.mounts = Reading::Value(parse_mounts(mounts).unwrap());
        f.machine.memory_total_kib = Reading::Value(256 << 20);
        f
    }

    fn dir(p: &str) -> DataDir {
        DataDir {
            path: p.into(),
            role: "--data-dir".into(),
            exists: true,
            resolved: Some(p.into()),
            writable: Reading::Value(true),
        }
    }

    #[test]
    fn shm_sizes() {
        let f =
            facts("shm /dev/shm tmpfs rw,nosuid,nodev,size=65536k 0 0\n/dev/vda / ext4 rw 0 0\n");
        let r = run_shm(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail, "{r:#?}");
        assert!(r[0].message.contains("64 MiB"));
        let f = facts("tmpfs /dev/shm tmpfs rw,size=2g 0 0\n");
        assert_eq!(run_shm(&f, &Policy::default())[0].status, Status::Pass);
        let p = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        assert_eq!(run_shm(&f, &p)[0].status, Status::Warn);
        // Stacked mounts: the last wins; no size= means half of RAM.
        let f = facts("tmpfs /dev/shm tmpfs rw,size=64k 0 0\ntmpfs /dev/shm tmpfs rw 0 0\n");
        let r = run_shm(&f, &p);
        assert_eq!(r[0].status, Status::Pass);
        assert!(r[0].message.contains("128.0 GiB"), "{r:#?}");
        let f = facts("/dev/vda / ext4 rw 0 0\n");
        assert_eq!(run_shm(&f, &Policy::default())[0].status, Status::Warn);
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
        assert_eq!(s, vec![Status::Warn, Status::Fail, Status::Pass], "{r:#?}");
        assert!(r[0].message.contains("rsize=65536"));
        assert!(r[1].message.contains("soft"));
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

    #[test]
    fn throughput_judged_by_profile() {
        let mut f = facts("/dev/vda / ext4 rw 0 0\n");
        let res = |read: f64, iops: f64| DirThroughput {
            path: "/data".into(),
            result: Reading::Value(IoResult {
                seq_write_mb_s: 900.0,
                seq_read_mb_s: read,
                rand_read_iops: iops,
                file_bytes: 1 << 30,
                direct: true,
                method: "test".into(),
            }),
        };
        let train = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        f.host.throughput = Reading::Value(vec![res(80.0, 5000.0)]);
        assert_eq!(run_throughput(&f, &train)[0].status, Status::Fail);
        assert_eq!(
            run_throughput(&f, &Policy::default())[0].status,
            Status::Warn
        );
        f.host.throughput = Reading::Value(vec![res(3000.0, 15000.0)]);
        let r = run_throughput(&f, &train);
        assert_eq!(r[0].status, Status::Pass);
        assert!(r[0].message.contains("33 s per 100 GB"), "{r:#?}");
        f.host.throughput = Reading::Value(vec![DirThroughput {
            path: "/ro".into(),
            result: Reading::unavailable("not writable by this user"),
        }]);
        assert_eq!(run_throughput(&f, &train)[0].status, Status::Skip);
        f.host.throughput = Reading::unavailable("snapshot audit: nothing is measured");
        assert!(run_throughput(&f, &train)[0].message.contains("snapshot"));
    }
}
