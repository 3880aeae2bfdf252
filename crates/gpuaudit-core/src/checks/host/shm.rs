//! host.shm: the size of /dev/shm.

use crate::checks::common::gpu_count;
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::Facts;
use crate::finding::Finding;
use crate::parse::host::mounts::parse_size;
use crate::policy::{Policy, Profile};
use crate::units::{GIB, MIB};

const ID: &str = "host.shm";

/// At or below this, PyTorch data loaders and NCCL fail (Docker gives containers 64 MB).
pub const TINY_BYTES: u64 = 256 * MIB;
/// Below this, enough for small jobs only.
pub const SMALL_BYTES: u64 = GIB;
/// Below this on a training machine (16 GiB or more is usual).
pub const TRAIN_MIN_BYTES: u64 = 8 * GIB;

pub const CHECK: Check = Check {
    id: ID,
    title: "/dev/shm size (the 64 MB container default breaks data loaders and NCCL)",
    looks_at: "/dev/shm size (the 64 MB container default breaks data loaders and NCCL)",
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
              emptyDir with `medium: Memory` (and a sizeLimit) at /dev/shm; a host: `sudo mount -o \
              remount,size=32G /dev/shm` (and in /etc/fstab).",
    },
    profiles: &[ProfileEffect {
        profile: Profile::Train,
        effect: "/dev/shm of 256 MiB or less fails even with one GPU, and below 8 GiB warns.",
    }],
    run: run_shm,
};

fn run_shm(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let mounts = match facts.host.mounts.get() {
        Ok(m) => m,
        Err(r) => {
            return vec![Finding::skip(
                ID,
                format!("could not read the mount table: {r}"),
            )]
        }
    };
    let gpus = gpu_count(facts).unwrap_or(0);
    let train = policy.profile == Profile::Train;
    // The last mount on /dev/shm hides the earlier ones.
    let Some(m) = mounts.iter().rev().find(|m| m.target == "/dev/shm") else {
        return vec![Finding::warn(ID, "/dev/shm is not mounted: PyTorch data loader workers and NCCL cannot share memory between processes")
            .fix("mount a tmpfs on /dev/shm (`sudo mount -t tmpfs -o size=16G tmpfs /dev/shm`), or start the container with `--shm-size=16g` or `--ipc=host`")];
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
            ID,
            format!(
                "/dev/shm is a {} mount of unknown size (no size= option, RAM not read)",
                m.fstype
            ),
        ))];
    };
    let fix = "Docker: `docker run --shm-size=16g ...` (or `--ipc=host`); Kubernetes: an emptyDir with `medium: Memory` mounted at /dev/shm; on a host: `sudo mount -o remount,size=32G /dev/shm`";
    let h = human_bytes(size);
    let f = if size <= TINY_BYTES {
        let msg = format!("/dev/shm is only {h}: PyTorch DataLoader workers crash with 'bus error' / 'No space left on device' and NCCL fails to allocate shared memory (Docker's 64 MB default)");
        (if train || gpus > 1 {
            Finding::fail(ID, msg)
        } else {
            Finding::warn(ID, msg)
        })
        .fix(fix)
    } else if size < SMALL_BYTES {
        Finding::warn(ID, format!("/dev/shm is {h}: enough for small jobs; data loaders with several workers and large batches run out")).fix(fix)
    } else if train && size < TRAIN_MIN_BYTES {
        Finding::warn(ID, format!("/dev/shm is {h}: tight for multi-worker data loading and NCCL on a training machine (16 GiB or more is usual)")).fix(fix)
    } else {
        Finding::pass(ID, format!("/dev/shm is {h}"))
    };
    vec![ev(f)]
}

/// Bytes as a person reads them: "64 MiB", "256.0 GiB".
fn human_bytes(b: u64) -> String {
    if b >= GIB {
        format!("{:.1} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{} MiB", b / MIB)
    } else {
        format!("{} KiB", b / 1024)
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Status;
    use crate::testing::Machine;

    fn facts(mounts: &str) -> Facts {
        Machine::healthy("h200-sxm-141gb", 2).mounts(mounts).build()
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

    fn shm(size: &str) -> String {
        format!("tmpfs /dev/shm tmpfs rw,size={size} 0 0\n")
    }

    fn status(mounts: &str, gpus: u32, profile: Profile) -> Status {
        let f = Machine::healthy("h200-sxm-141gb", gpus)
            .mounts(mounts)
            .build();
        run_shm(
            &f,
            &Policy {
                profile,
                ..Policy::default()
            },
        )[0]
        .status
    }

    #[test]
    fn shm_thresholds_on_both_sides() {
        let k = |b: u64| format!("{}k", b / 1024);
        // At the tiny line: fail with several GPUs or under train, warn with one.
        let tiny = shm(&k(TINY_BYTES));
        assert_eq!(status(&tiny, 2, Profile::General), Status::Fail);
        assert_eq!(status(&tiny, 1, Profile::General), Status::Warn);
        assert_eq!(status(&tiny, 1, Profile::Train), Status::Fail);
        // Just above it: small.
        let above = shm(&k(TINY_BYTES + 1024));
        assert_eq!(status(&above, 2, Profile::General), Status::Warn);
        // Just below 1 GiB: small; at it: enough outside train.
        assert_eq!(
            status(&shm(&k(SMALL_BYTES - 1024)), 2, Profile::General),
            Status::Warn
        );
        assert_eq!(
            status(&shm(&k(SMALL_BYTES)), 2, Profile::General),
            Status::Pass
        );
        // Under train, 8 GiB is the line.
        assert_eq!(
            status(&shm(&k(TRAIN_MIN_BYTES - 1024)), 2, Profile::Train),
            Status::Warn
        );
        assert_eq!(
            status(&shm(&k(TRAIN_MIN_BYTES)), 2, Profile::Train),
            Status::Pass
        );
        assert_eq!(
            status(&shm(&k(TRAIN_MIN_BYTES - 1024)), 2, Profile::Inference),
            Status::Pass
        );
    }

    #[test]
    fn shm_sizes_in_percent_and_unknown() {
        // 256 GiB of RAM: 50% is 128 GiB.
        let f = facts("tmpfs /dev/shm tmpfs rw,size=50% 0 0\n");
        let r = run_shm(&f, &Policy::default());
        assert!(r[0].message.contains("128.0 GiB"), "{r:#?}");
        let mut g = facts("tmpfs /dev/shm tmpfs rw 0 0\n");
        g.machine.memory_total_kib = crate::reading::Reading::unavailable("x");
        let r = run_shm(&g, &Policy::default());
        assert_eq!(r[0].status, Status::Info);
        assert!(r[0].message.contains("unknown size"));
        let h = facts("none /dev/shm devtmpfs rw 0 0\n");
        assert_eq!(run_shm(&h, &Policy::default())[0].status, Status::Info);
        assert_eq!(human_bytes(512 * 1024), "512 KiB");
        assert_eq!(human_bytes(MIB), "1 MiB");
        assert_eq!(human_bytes(GIB), "1.0 GiB");
        let mut u = facts("/dev/vda / ext4 rw 0 0\n");
        u.host.mounts = crate::reading::Reading::unavailable("no mounts");
        assert_eq!(run_shm(&u, &Policy::default())[0].status, Status::Skip);
    }
}
