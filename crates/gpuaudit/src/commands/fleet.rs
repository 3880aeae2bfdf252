//! `gpuaudit fleet REPORT...|DIR`: many nodes' saved reports summarised (gpuaudit-core's
//! `fleet`). This file finds and reads the files; the core judges and renders.

use crate::cli::{FleetArgs, FleetFailOn, FleetFormat};
use crate::commands::report;
use crate::{output, sink};
use anyhow::{anyhow, bail, Result};
use gpuaudit_core::fleet::{self, Collector, Digest};
use gpuaudit_core::render::Format;
use gpuaudit_core::report::limits::{thousands, MAX_FLEET_FILES};
use gpuaudit_core::report::ReadError;
use gpuaudit_probe::root::io_reason;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// One file to read: its path, or where a directory's entry is not read, why.
struct Entry {
    path: PathBuf,
    skipped: Option<&'static str>,
}

/// Why a directory's entry is not read: a symbolic link is not followed (it could lead out
/// of the directory, and its target's text would be quoted as a report's); a directory is
/// no report.
const SYMLINK: &str = "a symbolic link, not followed (name the file itself to read it)";

/// The files the arguments name: a file as given, a directory as every `*.json` entry in it
/// (not recursive), sorted by name; an entry that is a symbolic link is listed as skipped,
/// never opened (its type is the entry's own, as `lstat` gives it). A directory that cannot
/// be listed, or has no report file, is a wrong argument (exit 2).
fn files(args: &[PathBuf]) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for a in args {
        if !a.is_dir() {
            out.push(Entry {
                path: a.clone(),
                skipped: None,
            });
            continue;
        }
        let entries = std::fs::read_dir(a)
            .map_err(|e| anyhow!("cannot list {}: {}", a.display(), io_reason(&e)))?;
        // At most one more than a fleet reads: enough to say the directory has too many.
        let mut found: Vec<Entry> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let path = e.path();
                let json = path
                    .extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| x.eq_ignore_ascii_case("json"));
                // The entry's own type (no link followed); where it cannot be had, the
                // reader says why.
                let kind = e.file_type().ok();
                if !json || kind.is_some_and(|t| t.is_dir()) {
                    return None;
                }
                let skipped = kind.is_some_and(|t| t.is_symlink()).then_some(SYMLINK);
                Some(Entry { path, skipped })
            })
            .take(MAX_FLEET_FILES + 1 - out.len().min(MAX_FLEET_FILES))
            .collect();
        if found.is_empty() {
            bail!("{}: no *.json file in this directory", a.display());
        }
        found.sort_by(|x, y| x.path.cmp(&y.path));
        out.extend(found);
        too_many(out.len())?;
    }
    too_many(out.len())?;
    Ok(out)
}

/// More files than a fleet reads is a wrong argument: one line, exit 2.
fn too_many(n: usize) -> Result<()> {
    if n > MAX_FLEET_FILES {
        bail!(
            "more report files than the {} a fleet may read",
            thousands(MAX_FLEET_FILES)
        );
    }
    Ok(())
}

/// One file read and digested: its path as given, its stem, and what the fleet keeps of its
/// report ([`Digest`]) or the one-line reason it is not one. The report itself is dropped
/// here: a fleet of 100,000 keeps a few KiB a node, not the 40 KiB of a report parsed.
fn digest(entry: &Entry) -> (String, String, Result<Digest, String>) {
    let path = entry.path.as_path();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let digest = match entry.skipped {
        Some(why) => Err(why.to_string()),
        // Only what the summary reads: no series, messages, fixes or methods, the evidence
        // of the drift's checks alone.
        None => {
            // A report of another schema (a bench's, a fleet's own JSON) is named as what it
            // is not, as a JSON of another shape is ("not a gpuaudit report (it has no
            // \"schema\")").
            let other_schema = std::cell::Cell::new(false);
            report::read_with(path, |t| {
                let r = gpuaudit_core::report::from_json_for_summary(t, fleet::EVIDENCE_READ);
                other_schema.set(matches!(r, Err(ReadError::OtherSchema(_))));
                r
            })
            .map(|r| Digest::of(&stem, &r))
            .map_err(|e| {
                if other_schema.get() {
                    format!("not a gpuaudit report: {}", e.reason())
                } else {
                    e.reason()
                }
            })
        }
    };
    (path.display().to_string(), stem, digest)
}

/// Files a worker may have read ahead of the collector: enough to keep every CPU busy, few
/// enough that what waits is a few hundred KiB.
const READ_AHEAD: usize = 64;

/// Every file read and digested on as many threads as there are CPUs (parsing is what a
/// fleet spends its time on), each taking the next file not taken yet, and gathered as they
/// come: the collector orders them by their place in `paths`.
fn collect(paths: &[Entry]) -> Collector {
    let threads = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .clamp(1, 16)
        .min(paths.len().max(1));
    let next = AtomicUsize::new(0);
    let mut c = Collector::new();
    let (tx, rx) = mpsc::sync_channel(READ_AHEAD);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (tx, next) = (tx.clone(), &next);
                s.spawn(move || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(entry) = paths.get(i) else { break };
                    if tx.send((i, digest(entry))).is_err() {
                        break;
                    }
                })
            })
            .collect();
        drop(tx);
        for (i, (file, stem, d)) in rx {
            c.add(i, file, stem, d);
        }
        // A thread that panicked (it cannot: reading returns errors) costs its file a
        // reason, not the run (below); joined here, its panic is not the scope's.
        for w in workers {
            let _ = w.join();
        }
    });
    for i in c.missing(paths.len()) {
        let name = paths[i].path.display().to_string();
        c.add(
            i,
            name.clone(),
            name,
            Err("could not be read (the reader failed)".into()),
        );
    }
    c
}

fn choose_format(format: Option<FleetFormat>, out: Option<&Path>) -> Result<FleetFormat> {
    if let Some(f) = format {
        return Ok(f);
    }
    // No HTML for a fleet (yet): a page's extension is refused, as any other it cannot write.
    let formats = [Format::Table, Format::Json, Format::Markdown];
    Ok(match crate::output::format_for(None, out, &formats)? {
        Format::Json => FleetFormat::Json,
        Format::Markdown => FleetFormat::Md,
        Format::Html | Format::Table => FleetFormat::Table,
    })
}

/// Exit 0: every node read, none failed a check; 1: a node failed a check or its file is not
/// a report (with `--fail-on slow` also a node flagged or below attainable, with `watch` also
/// one to watch); 2: no file was a report, or an argument is wrong.
pub fn run(args: &FleetArgs) -> Result<u8> {
    let paths = files(&args.reports)?;
    let rules = fleet::Rules {
        threshold: args.threshold,
    };
    let summary = collect(&paths).finish(&rules);
    if summary.nothing_read() {
        let first = summary.nodes.first();
        bail!(
            "no report could be read of {} file{} ({}: {})",
            paths.len(),
            if paths.len() == 1 { "" } else { "s" },
            first.map(|n| n.file.as_str()).unwrap_or(""),
            first.and_then(|n| n.not_read.clone()).unwrap_or_default()
        );
    }
    let out = args.output.as_deref();
    let text = match choose_format(args.format, out)? {
        FleetFormat::Json => summary.to_json(),
        FleetFormat::Md => fleet::markdown(&summary),
        FleetFormat::Table => fleet::table(
            &summary,
            output::table_width(out),
            output::use_color(args.color, out),
        ),
    };
    sink::deliver(text, out)?;
    let level = match args.fail_on {
        FleetFailOn::Fail => fleet::FailOn::Fail,
        FleetFailOn::Slow => fleet::FailOn::Slow,
        FleetFailOn::Watch => fleet::FailOn::Watch,
    };
    Ok(u8::from(summary.fails_on(level)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_follows_the_output_file_unless_asked() {
        assert_eq!(choose_format(None, None).unwrap(), FleetFormat::Table);
        assert_eq!(
            choose_format(None, Some(Path::new("f.JSON"))).unwrap(),
            FleetFormat::Json
        );
        assert_eq!(
            choose_format(None, Some(Path::new("f.md"))).unwrap(),
            FleetFormat::Md
        );
        assert_eq!(
            choose_format(None, Some(Path::new("f.txt"))).unwrap(),
            FleetFormat::Table
        );
        assert_eq!(
            choose_format(Some(FleetFormat::Md), Some(Path::new("f.json"))).unwrap(),
            FleetFormat::Md
        );
    }
}
