//! What a rehearsal may allocate and write, checked before anything is allocated or created.
//!
//! Each flag is range-checked on its own ([`super::Options::validate`]); their products are
//! what a run holds: the staged batches (`--batch` × `--tensor-kb` × the batches staged), the
//! workers' tensors (`--workers` × `--tensor-kb`), the samples read (`--readers`, `--workers`
//! × `--sample-kb`), the generated dataset on disk (its files × `--sample-kb`). The CPU
//! stages run one after the other, so the memory a rehearsal needs is the largest of theirs;
//! it must fit half of MemAvailable and [`MEMORY_CAP`], the dataset half of the free space
//! where it is written and [`DISK_CAP`]. All arithmetic is checked: a product past `u64` is
//! refused as "more than 16 EiB", never wrapped.

use super::loader;
use super::Options;
use crate::host::iobench::free_bytes;
use std::path::{Path, PathBuf};

/// The most host memory a rehearsal's CPU stages may hold, whatever the machine has.
pub const MEMORY_CAP: u64 = 64 << 30;
/// The largest dataset a rehearsal writes, whatever the free space.
pub const DISK_CAP: u64 = 64 << 30;
/// Staged batches of the loader alone (the measurement child fits its own to MemAvailable).
pub const LOADER_BUFFERS: u64 = 2;

/// What the machine offers, read just before the check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// MemAvailable of /proc/meminfo, bytes; `None` where it cannot be read (the cap alone).
    pub mem_available: Option<u64>,
    /// Where the dataset would be written and the space free there for this user (statvfs
    /// `f_bavail` × `f_frsize`); `None`: nothing is written (a data directory with files).
    pub writes: Option<(PathBuf, Option<u64>)>,
}

impl Machine {
    /// The live machine; `writes_to`: the directory a generated dataset would go into.
    pub fn read(writes_to: Option<&Path>) -> Machine {
        Machine {
            mem_available: crate::root::RootFs::live()
                .read("proc/meminfo")
                .ok()
                .and_then(|t| mem_available(&t)),
            writes: writes_to.map(|d| (d.to_path_buf(), free_bytes(d))),
        }
    }
}

/// MemAvailable of a /proc/meminfo, bytes.
pub fn mem_available(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let kb: u64 = l
            .strip_prefix("MemAvailable:")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        kb.checked_mul(1024)
    })
}

/// A rehearsal refused: what it would have needed, and the bound it is past.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} = {}, more than the {} {bound_is} allows", size(*.bytes), size(Some(*.bound)))]
pub struct LimitError {
    /// The flags and figures of the product ("--workers 16 × --tensor-kb 262144").
    pub what: String,
    /// The product; `None` past `u64`.
    pub bytes: Option<u64>,
    pub bound: u64,
    /// Whose bound: "half of available memory", "cap on a rehearsal's memory", ...
    pub bound_is: String,
}

/// A size for the refusal: exact where a unit divides it, else to a tenth ("3.1 GiB").
pub fn size(b: Option<u64>) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 60, "EiB"),
        (1 << 50, "PiB"),
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
    ];
    let Some(b) = b else {
        return "more than 16 EiB".into();
    };
    for (u, name) in UNITS {
        if b >= u {
            return if b % u == 0 {
                format!("{} {name}", b / u)
            } else {
                format!("{:.1} {name}", b as f64 / u as f64)
            };
        }
    }
    gpuaudit_core::units::bytes(b)
}

fn mul(xs: &[u64]) -> Option<u64> {
    xs.iter().try_fold(1u64, |a, &x| a.checked_mul(x))
}

/// One allocation of a stage: its flags and figures, and its bytes (`None`: past `u64`).
struct Term(String, Option<u64>);

/// The memory each CPU stage holds at once (every term of a stage together).
fn stages(o: &Options) -> Vec<Vec<Term>> {
    let (s, t) = (o.sample_bytes, o.tensor_bytes);
    let (skb, tkb) = (s >> 10, t >> 10);
    let (r, w, b) = (o.readers as u64, o.workers as u64, o.batch as u64);
    let preload = loader::preload_count(o.workers) as u64;
    let flight = loader::samples_in_flight(o.workers, o.readers);
    vec![
        // The readers alone: a sample buffer each.
        vec![Term(
            format!("--readers {r} × --sample-kb {skb}"),
            mul(&[r, s]),
        )],
        // The transform alone: a tensor each, on samples read once into memory.
        vec![
            Term(format!("--workers {w} × --tensor-kb {tkb}"), mul(&[w, t])),
            Term(
                format!("{preload} samples held × --sample-kb {skb}"),
                mul(&[preload, s]),
            ),
        ],
        // Both together: the staged batches and the samples between readers and workers.
        vec![
            Term(
                format!("--batch {b} × --tensor-kb {tkb} × {LOADER_BUFFERS} staged batches"),
                mul(&[b, t, LOADER_BUFFERS]),
            ),
            Term(
                format!("(3 × --workers {w} + 2 × --readers {r}) × --sample-kb {skb}"),
                flight.and_then(|f| f.checked_mul(s)),
            ),
        ],
    ]
}

/// The bytes a generated dataset writes: `files` of `--sample-kb`, as [`super::dataset`]
/// makes them.
pub fn dataset_files(o: &Options) -> u64 {
    o.dataset_bytes
        .div_ceil(o.sample_bytes.max(1))
        .clamp(1, super::dataset::MAX_FILES as u64)
}

/// The rehearsal of `o` fits `m`, or the first bound it is past (memory, then disk).
pub fn check(o: &Options, m: &Machine) -> Result<(), LimitError> {
    let (bound, bound_is) = match m.mem_available.map(|a| a / 2) {
        Some(half) if half < MEMORY_CAP => (half, "half of available memory".to_string()),
        _ => (MEMORY_CAP, "cap on a rehearsal's memory".to_string()),
    };
    // The stage that needs the most (past u64 is the most).
    let need = stages(o)
        .into_iter()
        .map(|terms| {
            let total = terms
                .iter()
                .try_fold(0u64, |a, t| t.1.and_then(|b| a.checked_add(b)));
            (terms, total)
        })
        .max_by_key(|(_, total)| total.map_or(u128::MAX, u128::from));
    if let Some((terms, total)) = need {
        if total.is_none_or(|t| t > bound) {
            return Err(LimitError {
                what: terms
                    .iter()
                    .map(|t| t.0.as_str())
                    .collect::<Vec<_>>()
                    .join(" + "),
                bytes: total,
                bound,
                bound_is,
            });
        }
    }
    if let Some((dir, free)) = &m.writes {
        let (bound, bound_is) = match free.map(|f| f / 2) {
            Some(half) if half < DISK_CAP => {
                (half, format!("half of the free space of {}", dir.display()))
            }
            _ => (DISK_CAP, "cap on a rehearsal's dataset".to_string()),
        };
        let files = dataset_files(o);
        let bytes = files.checked_mul(o.sample_bytes);
        if bytes.is_none_or(|b| b > bound) {
            return Err(LimitError {
                what: format!(
                    "--dataset-mb {} as {files} file{} × --sample-kb {} written to {}",
                    o.dataset_bytes >> 20,
                    if files == 1 { "" } else { "s" },
                    o.sample_bytes >> 10,
                    dir.display()
                ),
                bytes,
                bound,
                bound_is,
            });
        }
    }
    Ok(())
}

/// The memory the rehearsal of `o` needs at most, bytes (`None`: past `u64`).
pub fn memory_needed(o: &Options) -> Option<u64> {
    stages(o)
        .iter()
        .map(|terms| {
            terms
                .iter()
                .try_fold(0u64, |a, t| t.1.and_then(|b| a.checked_add(b)))
        })
        .try_fold(0u64, |a, t| t.map(|t| a.max(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            batch: 8,
            sample_bytes: 64 << 10,
            tensor_bytes: 128 << 10,
            readers: 2,
            workers: 4,
            dataset_bytes: 4 << 20,
            ..Options::defaults(4)
        }
    }

    fn memory(avail: u64) -> Machine {
        Machine {
            mem_available: Some(avail),
            writes: None,
        }
    }

    #[test]
    fn the_largest_stage_is_what_is_needed() {
        let o = opts();
        // Readers: 2 × 64 KiB; transform: 4 × 128 KiB + 8 × 64 KiB; loader: 8 × 128 KiB × 2
        // + (12 + 4) × 64 KiB = 2 MiB + 1 MiB.
        assert_eq!(loader::preload_count(4), 8);
        assert_eq!(loader::samples_in_flight(4, 2), Some(16));
        assert_eq!(memory_needed(&o), Some(3 << 20));
    }

    #[test]
    fn exactly_at_half_of_available_memory_passes_one_byte_more_fails() {
        let o = opts();
        let need = memory_needed(&o).unwrap();
        assert!(check(&o, &memory(2 * need)).is_ok());
        assert!(check(&o, &memory(2 * need + 1)).is_ok());
        let e = check(&o, &memory(2 * need - 2)).unwrap_err();
        assert_eq!((e.bytes, e.bound), (Some(need), need - 1));
        assert_eq!(
            e.to_string(),
            "--batch 8 × --tensor-kb 128 × 2 staged batches + (3 × --workers 4 + 2 × \
             --readers 2) × --sample-kb 64 = 3 MiB, more than the 3.0 MiB half of available \
             memory allows"
        );
    }

    #[test]
    fn the_cap_holds_on_a_large_machine_and_where_meminfo_is_unreadable() {
        // 16 × 256 MiB tensors at batch 128: 64 GiB staged, exactly the cap.
        let at = Options {
            batch: 128,
            tensor_bytes: 256 << 20,
            sample_bytes: 4 << 10,
            workers: 16,
            readers: 4,
            ..opts()
        };
        let staged = 128 * (256u64 << 20) * 2;
        let flight = (3 * 16 + 2 * 4) * (4u64 << 10);
        assert_eq!(memory_needed(&at), Some(staged + flight));
        let over = Options {
            batch: 129,
            ..at.clone()
        };
        let exact = Options {
            sample_bytes: 0,
            ..at.clone()
        };
        assert_eq!(memory_needed(&exact), Some(MEMORY_CAP));
        for m in [
            memory(4 << 40),
            memory(u64::MAX),
            Machine {
                mem_available: None,
                writes: None,
            },
        ] {
            assert!(check(&exact, &m).is_ok());
            let e = check(&at, &m).unwrap_err();
            assert_eq!(e.bound, MEMORY_CAP);
            assert!(
                e.to_string().ends_with(
                    "= 64.0 GiB, more than the 64 GiB cap on a rehearsal's memory allows"
                ),
                "{e}"
            );
            assert!(check(&over, &m).is_err());
        }
    }

    #[test]
    fn the_workers_tensors_and_the_readers_samples_are_products() {
        // --workers 16 × --tensor-kb 262144: refused on its staged batches.
        let o = Options {
            workers: 16,
            tensor_bytes: 256 << 20,
            ..Options::defaults(4)
        };
        let e = check(&o, &memory(8 << 30)).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "--batch 256 × --tensor-kb 262144 × 2 staged batches + (3 × --workers 16"
            ),
            "{e}"
        );
        assert!(e
            .to_string()
            .ends_with("more than the 4 GiB half of available memory allows"));
        // --readers 64 × --sample-kb 262144 with a batch of one small tensor.
        let o = Options {
            readers: 64,
            workers: 1,
            batch: 1,
            sample_bytes: 256 << 20,
            ..Options::defaults(4)
        };
        let e = check(&o, &memory(8 << 30)).unwrap_err();
        assert_eq!(e.bytes, Some((3 + 128) * (256u64 << 20) + 2 * (588 << 10)));
        assert!(
            e.what.contains("2 × --readers 64) × --sample-kb 262144"),
            "{e}"
        );
    }

    #[test]
    fn products_past_u64_are_refused_not_wrapped() {
        let o = Options {
            readers: u32::MAX,
            workers: u32::MAX,
            batch: u32::MAX,
            sample_bytes: u64::MAX,
            tensor_bytes: u64::MAX,
            dataset_bytes: u64::MAX,
            ..opts()
        };
        assert_eq!(memory_needed(&o), None);
        let e = check(&o, &memory(u64::MAX)).unwrap_err();
        assert_eq!(e.bytes, None);
        assert!(
            e.to_string()
                .contains("= more than 16 EiB, more than the 64 GiB cap"),
            "{e}"
        );
        // One product alone past u64 (the tensors), the rest small.
        let o = Options {
            tensor_bytes: u64::MAX / 2,
            ..opts()
        };
        assert!(check(&o, &memory(u64::MAX)).unwrap_err().bytes.is_none());
        // The dataset: files × sample past u64.
        let o = Options {
            sample_bytes: u64::MAX,
            dataset_bytes: u64::MAX,
            readers: 1,
            workers: 1,
            batch: 1,
            tensor_bytes: 1,
            ..opts()
        };
        let m = Machine {
            mem_available: None,
            writes: Some(("/tmp".into(), Some(u64::MAX))),
        };
        // Memory first: one sample of u64::MAX bytes is past the cap already.
        assert!(check(&o, &m).is_err());
    }

    #[test]
    fn the_dataset_must_fit_half_of_the_free_space() {
        let o = opts();
        // 4 MiB of 64 KiB samples: 64 files.
        assert_eq!(dataset_files(&o), 64);
        let at = |free| Machine {
            mem_available: Some(1 << 40),
            writes: Some(("/scratch".into(), Some(free))),
        };
        assert!(check(&o, &at(8 << 20)).is_ok());
        let e = check(&o, &at((8 << 20) - 2)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--dataset-mb 4 as 64 files × --sample-kb 64 written to /scratch = 4 MiB, more \
             than the 4.0 MiB half of the free space of /scratch allows"
        );
        // Nothing written: no disk bound.
        assert!(check(&o, &memory(1 << 40)).is_ok());
        // Free space unknown: the cap.
        let big = Options {
            sample_bytes: 256 << 20,
            dataset_bytes: (64 << 30) + 1,
            readers: 1,
            workers: 1,
            batch: 1,
            ..opts()
        };
        let e = check(
            &big,
            &Machine {
                mem_available: Some(1 << 40),
                writes: Some(("/tmp".into(), None)),
            },
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("the 64 GiB cap on a rehearsal's dataset allows"),
            "{e}"
        );
        assert_eq!(e.bytes, Some(257 * (256u64 << 20)));
    }

    #[test]
    fn meminfo_is_read() {
        let t = "MemTotal:       263842372 kB\nMemAvailable:   250000000 kB\n";
        assert_eq!(mem_available(t), Some(250_000_000 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(
            mem_available("MemAvailable: 99999999999999999999 kB\n"),
            None
        );
        assert_eq!(size(Some(3_328_599_654)), "3.1 GiB");
    }
}
