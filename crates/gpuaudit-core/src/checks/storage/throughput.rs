//! storage.throughput: measured direct-I/O throughput in the data directories.

use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::Facts;
use crate::finding::{Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

const ID: &str = "storage.throughput";

/// Sequential reads below this (MB/s) are slower than a single hard disk.
pub const SEQ_READ_FAIL_MB_S: f64 = 100.0;
/// Below this (MB/s), well below a local NVMe disk (2000-7000 MB/s).
pub const SEQ_READ_WARN_MB_S: f64 = 500.0;
/// 4 KiB random reads per second (queue depth 1) below this starve loaders of small files.
pub const RAND_READ_IOPS_WARN: f64 = 1000.0;

pub const CHECK: Check = Check {
    id: ID,
    title: "Measured direct-I/O sequential write/read and 4 KiB random read in the data directories",
    looks_at: "measured direct-I/O sequential write/read and 4 KiB random read in the data \
               directories",
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
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "Sequential reads below 100 MB/s fail instead of warning; below 500 MB/s, or under 1000 random reads per second, warn instead of being info.",
        },
    ],
    run: run_throughput,
};

fn run_throughput(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let results = match facts.host.throughput.get() {
        Ok(r) => r,
        Err(r) => return vec![Finding::skip(ID, format!("not measured: {r}"))],
    };
    if results.is_empty() {
        return vec![Finding::skip(ID, "not measured: no data directory")];
    }
    let train = policy.profile == Profile::Train;
    let mut out = Vec::new();
    for t in results {
        let r = match &t.result {
            Reading::Value(r) => r,
            Reading::Unavailable(why) => {
                out.push(
                    Finding::skip(ID, format!("{}: not measured: {why}", t.path))
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
        let (status, why) = if r.seq_read_mb_s < SEQ_READ_FAIL_MB_S {
            (
                if train { Status::Fail } else { Status::Warn },
                "slower than a single hard disk: a GPU waits for its data",
            )
        } else if r.seq_read_mb_s < SEQ_READ_WARN_MB_S {
            (if train { Status::Warn } else { Status::Info }, "below what a local NVMe disk gives (2000-7000 MB/s): large datasets and model loads are disk-bound")
        } else if r.rand_read_iops < RAND_READ_IOPS_WARN {
            (if train { Status::Warn } else { Status::Info }, "few random reads per second: data loaders over many small files will starve the GPU")
        } else {
            (Status::Pass, "")
        };
        if !why.is_empty() {
            msg.push_str(&format!(": {why}"));
        }
        let mut f = Finding::new(ID, status, msg)
            .with("path", &t.path)
            .with("seq_write_mb_s", round1(r.seq_write_mb_s))
            .with("seq_read_mb_s", round1(r.seq_read_mb_s))
            .with("rand_read_iops", round1(r.rand_read_iops))
            .with("file_bytes", r.file_bytes)
            .with("direct", r.direct)
            .with("method", &r.method);
        if status >= Status::Info {
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{DirThroughput, IoResult};
    use crate::testing::Machine;

    #[test]
    fn throughput_judged_by_profile() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
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

    #[test]
    fn throughput_thresholds_on_both_sides() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
        let train = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        let set = |f: &mut Facts, read: f64, iops: f64, direct: bool| {
            f.host.throughput = Reading::Value(vec![DirThroughput {
                path: "/data".into(),
                result: Reading::Value(IoResult {
                    seq_write_mb_s: 900.0,
                    seq_read_mb_s: read,
                    rand_read_iops: iops,
                    file_bytes: 1 << 30,
                    direct,
                    method: "test".into(),
                }),
            }])
        };
        for (read, iops, general, trained) in [
            (SEQ_READ_FAIL_MB_S - 0.1, 5000.0, Status::Warn, Status::Fail),
            (SEQ_READ_FAIL_MB_S, 5000.0, Status::Info, Status::Warn),
            (SEQ_READ_WARN_MB_S - 0.1, 5000.0, Status::Info, Status::Warn),
            (SEQ_READ_WARN_MB_S, 5000.0, Status::Pass, Status::Pass),
            (
                SEQ_READ_WARN_MB_S,
                RAND_READ_IOPS_WARN - 0.1,
                Status::Info,
                Status::Warn,
            ),
            (
                SEQ_READ_WARN_MB_S,
                RAND_READ_IOPS_WARN,
                Status::Pass,
                Status::Pass,
            ),
        ] {
            set(&mut f, read, iops, true);
            let g = run_throughput(&f, &Policy::default());
            assert_eq!(g[0].status, general, "{read} {iops}");
            assert_eq!(
                run_throughput(&f, &train)[0].status,
                trained,
                "{read} {iops}"
            );
            assert_eq!(g[0].fix.is_some(), general != Status::Pass);
        }
        // 100 GB at 500 MB/s: 3.3 minutes; buffered figures are said to be so.
        set(&mut f, 500.0, 5000.0, false);
        let r = run_throughput(&f, &Policy::default());
        assert!(
            r[0].message.contains("(3.3 min per 100 GB read)"),
            "{}",
            r[0].message
        );
        assert!(r[0].message.contains("O_DIRECT was refused"));
        set(&mut f, 0.0, 0.0, true);
        assert!(run_throughput(&f, &Policy::default())[0]
            .message
            .contains("inf min"));
        f.host.throughput = Reading::Value(vec![]);
        assert!(run_throughput(&f, &train)[0]
            .message
            .contains("no data directory"));
        assert_eq!(round1(12.34), 12.3);
    }
}
