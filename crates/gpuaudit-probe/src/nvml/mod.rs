//! NVML, out of the audit's process.
//!
//! A libnvidia-ml whose `nvmlInit` hangs, segfaults or aborts must cost a reason, not the
//! audit. So NVML is only ever loaded in a child: this binary re-executed with the hidden
//! subcommand `__nvml`, run through [`crate::process`] with a hard timeout:
//!
//! ```text
//! gpuaudit __nvml facts          the driver and every GPU as one JSON object (NvmlAnswer)
//! gpuaudit __nvml watch IDX...   for the measurements: one "state" line (busy readings and
//!                                persistence mode per GPU), then, while told on stdin
//!                                ("sample MS", "sample 0" pauses), one "sample" line per GPU
//!                                every MS milliseconds; ends when stdin closes
//! ```
//!
//! Each child holds one NVML handle. The parent ([`read_facts`], [`Watcher`]) never loads
//! the library; what the child reports is held against [`plausible`] before it becomes a
//! fact.

mod device;

pub use device::{in_guarded_call, NvmlDriver, NvmlSource};

use crate::process::{self, describe_status, Caps, Cmd, Ended, Event, Input, Running};
use gpuaudit_core::facts::{plausible, CudaVersion, GpuFacts};
use gpuaudit_core::Reading;
use serde::{Deserialize, Serialize};
use std::io::BufRead;
use std::path::Path;
use std::time::{Duration, Instant};

/// The hidden subcommand of the NVML child.
pub const SUBCOMMAND: &str = "__nvml";

/// How long the NVML child may take to read every GPU (nvmlInit takes about a second on 8
/// GPUs without persistence mode; a hung one is killed here).
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// 256 GPUs' facts are a few MiB of JSON.
const FACTS_STDOUT_CAP: usize = 32 << 20;

/// What `__nvml facts` prints.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "nvml", rename_all = "snake_case")]
pub enum NvmlAnswer {
    /// NVML loaded and initialised; the GPU list, or why it could not be read.
    Loaded {
        driver_version: Reading<String>,
        cuda_version: Reading<CudaVersion>,
        gpus: Reading<Vec<GpuFacts>>,
    },
    /// NVML could not be loaded or initialised.
    Failed { reason: String },
}

/// `gpuaudit __nvml ...`: returns the process exit status.
pub fn child_main(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        Some("facts") => facts_child(),
        Some("watch") => {
            let gpus: Option<Vec<u32>> = args[1..].iter().map(|a| a.parse().ok()).collect();
            match gpus {
                Some(g) => watch_child(&g),
                None => {
                    eprintln!("gpuaudit {SUBCOMMAND} watch: GPU indices expected");
                    2
                }
            }
        }
        _ => {
            eprintln!("gpuaudit {SUBCOMMAND}: expected `facts` or `watch IDX...`");
            2
        }
    }
}

fn print_json(v: &impl Serialize) {
    let line = serde_json::to_string(v).unwrap_or_else(|e| {
        format!(r#"{{"nvml":"failed","reason":"the NVML answer could not be written: {e}"}}"#)
    });
    process::write_line(&line);
}

fn facts_child() -> i32 {
    let answer = match NvmlSource::load() {
        Ok(nvml) => {
            let d = nvml.driver();
            let gpus = match nvml.gpus() {
                Ok(g) => Reading::Value(g),
                Err(e) => Reading::Unavailable(e),
            };
            let a = NvmlAnswer::Loaded {
                driver_version: d.version,
                cuda_version: d.cuda_version,
                gpus,
            };
            // nvmlShutdown is skipped: a library that hangs there would only delay the exit,
            // and the process ends now anyway.
            std::mem::forget(nvml);
            a
        }
        Err(reason) => NvmlAnswer::Failed { reason },
    };
    print_json(&answer);
    0
}

/// How the NVML child ended without an answer, as a reason.
fn child_failure(out: &process::Output, limit: Duration) -> String {
    let last = out
        .stderr_text()
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| {
            format!(
                "; its last output: {}",
                l.chars().take(300).collect::<String>()
            )
        })
        .unwrap_or_default();
    match out.ended {
        Ended::TimedOut(_) => format!(
            "NVML did not answer within {} s (nvmlInit or a query hung; the NVML process was killed)",
            limit.as_secs()
        ),
        Ended::Exited(st) if st.success() => format!("NVML gave no answer{last}"),
        Ended::Exited(st) => format!("NVML failed: the NVML process {}{last}", describe_status(&st)),
    }
}

/// Why NVML's facts are not there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvmlError {
    /// In words: "NVML did not answer within 15 s (...)", "NVML's answer could not be read: ...".
    pub reason: String,
    /// The NVML child answered, but its answer could not be read (not the form of one, or
    /// larger than can be read): the driver's report is unreadable, not missing.
    pub unreadable: bool,
}

impl std::fmt::Display for NvmlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl From<NvmlError> for String {
    fn from(e: NvmlError) -> String {
        e.reason
    }
}

/// Runs `program __nvml facts` and reads its answer; `Err` says why there is none (timed out,
/// crashed, no answer, an answer that could not be read). The GPU facts are held against the
/// plausibility limits.
pub fn read_facts_with(program: &Path, limit: Duration) -> Result<NvmlAnswer, NvmlError> {
    let no_answer = |reason: String| NvmlError {
        reason,
        unreadable: false,
    };
    let unreadable = |reason: String| NvmlError {
        reason,
        unreadable: true,
    };
    let cmd = Cmd::new(program).args([SUBCOMMAND, "facts"]);
    let out = process::run(
        &cmd,
        limit,
        // The answer is the last line, after whatever the library printed.
        Caps::last(FACTS_STDOUT_CAP, 16 << 10),
    )
    .map_err(|e| no_answer(format!("NVML could not be read: {e}")))?;
    let text = out.stdout_text();
    // The answer is the last JSON line (a library may print before it).
    let answer = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .map(serde_json::from_str::<NvmlAnswer>);
    match (answer, out.ended) {
        (Some(Ok(a)), Ended::Exited(_)) => Ok(match a {
            NvmlAnswer::Loaded {
                driver_version,
                cuda_version,
                gpus,
            } => NvmlAnswer::Loaded {
                driver_version,
                cuda_version,
                gpus: plausible::filter_gpus(gpus, "NVML"),
            },
            failed => failed,
        }),
        // It ended as it should, with a line that is not an answer's form.
        (Some(Err(e)), Ended::Exited(st)) if st.success() => {
            Err(unreadable(format!("NVML's answer could not be read: {e}")))
        }
        // The answer's start was cut at the cap.
        (None, Ended::Exited(st)) if st.success() && out.stdout_dropped > 0 => {
            Err(unreadable(format!(
                "NVML's answer is larger than {} MiB, not read",
                FACTS_STDOUT_CAP >> 20
            )))
        }
        _ => Err(no_answer(child_failure(&out, limit))),
    }
}

/// [`read_facts_with`] this binary.
pub fn read_facts(limit: Duration) -> Result<NvmlAnswer, NvmlError> {
    let exe = std::env::current_exe().map_err(|e| NvmlError {
        reason: format!("NVML not read: cannot find gpuaudit's own executable: {e}"),
        unreadable: false,
    })?;
    read_facts_with(&exe, limit)
}

// ---------------------------------------------------------------- the watcher

/// A GPU's state before the measurements, as the watcher read it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuState {
    pub gpu: u32,
    /// Compute processes running on it.
    pub processes: Option<usize>,
    /// Utilisation (%), read again after a fresh window where it alone made the GPU busy.
    pub utilization: Option<u32>,
    pub persistence: Option<bool>,
}

/// One NVML reading of one GPU during a measurement.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchSample {
    pub gpu: u32,
    pub sm_mhz: Option<u32>,
    pub power_w: Option<f64>,
    pub temp_c: Option<u32>,
    pub throttle: Option<u64>,
    pub pcie_gen: Option<u32>,
    pub pcie_width: Option<u32>,
    /// GPU utilisation, percent (NVML's, over its last sample period).
    #[serde(default)]
    pub util_pct: Option<u32>,
}

impl WatchSample {
    /// Values outside what hardware reports are dropped ([`plausible`]).
    fn plausible(mut self) -> WatchSample {
        self.sm_mhz = self.sm_mhz.and_then(|v| plausible::CLOCK_MHZ.accept(v));
        self.power_w = self.power_w.and_then(|v| plausible::POWER_W.accept(v));
        self.temp_c = self.temp_c.filter(|t| {
            i32::try_from(*t).is_ok_and(|t| plausible::TEMPERATURE_C.accept(t).is_some())
        });
        self.pcie_gen = self.pcie_gen.and_then(|v| plausible::PCIE_GEN.accept(v));
        self.pcie_width = self
            .pcie_width
            .and_then(|v| plausible::PCIE_WIDTH.accept(v));
        self.util_pct = self
            .util_pct
            .and_then(|v| plausible::UTILIZATION_PCT.accept(v));
        self
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WatchLine {
    State { gpus: Vec<GpuState> },
    Sample(WatchSample),
    Error { reason: String },
}

fn watch_child(gpus: &[u32]) -> i32 {
    use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
    let nvml = match NvmlSource::load() {
        Ok(n) => n,
        Err(reason) => {
            print_json(&WatchLine::Error { reason });
            return 1;
        }
    };
    let n = nvml.inner();
    let devices: Vec<(u32, Option<nvml_wrapper::Device<'_>>)> = gpus
        .iter()
        .map(|i| (*i, n.device_by_index(*i).ok()))
        .collect();
    let read = |d: &Option<nvml_wrapper::Device<'_>>| -> (Option<usize>, Option<u32>) {
        let Some(d) = d else {
            return (None, None);
        };
        (
            d.running_compute_processes().ok().map(|p| p.len()),
            d.utilization_rates().ok().map(|u| u.gpu),
        )
    };
    let mut readings: Vec<(Option<usize>, Option<u32>)> =
        devices.iter().map(|(_, d)| read(d)).collect();
    // NVML's utilisation is an average over the last second or so: a process that just ended
    // (a previous gpuaudit run) still shows. Utilisation without processes is read again
    // after a fresh window before it counts.
    let stale = |r: &(Option<usize>, Option<u32>)| r.0 == Some(0) && r.1.is_some_and(|u| u >= 10);
    if readings.iter().any(stale) {
        std::thread::sleep(Duration::from_millis(1100));
        for ((_, d), r) in devices.iter().zip(readings.iter_mut()) {
            if stale(r) {
                *r = read(d);
            }
        }
    }
    let state: Vec<GpuState> = devices
        .iter()
        .zip(&readings)
        .map(|((i, d), (procs, util))| GpuState {
            gpu: *i,
            processes: *procs,
            utilization: *util,
            persistence: d.as_ref().and_then(|d| d.is_in_persistent_mode().ok()),
        })
        .collect();
    print_json(&WatchLine::State { gpus: state });

    // Commands arrive on stdin; its end (the parent closed it, or died) ends the child.
    let (tx, rx) = std::sync::mpsc::channel::<u64>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if let Some(ms) = line.trim().strip_prefix("sample ") {
                if let Ok(ms) = ms.trim().parse::<u64>() {
                    if tx.send(ms).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut every: Option<Duration> = None;
    let mut next = Instant::now();
    loop {
        let wait = match every {
            None => Duration::from_secs(3600),
            Some(_) => next.saturating_duration_since(Instant::now()),
        };
        match rx.recv_timeout(wait) {
            Ok(ms) => {
                every = (ms > 0).then(|| Duration::from_millis(ms.max(10)));
                next = Instant::now();
                continue;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        let Some(step) = every else { continue };
        for (i, d) in &devices {
            let Some(d) = d else { continue };
            print_json(&WatchLine::Sample(WatchSample {
                gpu: *i,
                sm_mhz: d.clock_info(Clock::SM).ok(),
                power_w: d.power_usage().ok().map(|mw| mw as f64 / 1000.0),
                temp_c: d.temperature(TemperatureSensor::Gpu).ok(),
                throttle: d.current_throttle_reasons().ok().map(|r| r.bits()),
                pcie_gen: d.current_pcie_link_gen().ok(),
                pcie_width: d.current_pcie_link_width().ok(),
                util_pct: d.utilization_rates().ok().map(|u| u.gpu),
            }));
        }
        next += step;
        if next < Instant::now() {
            next = Instant::now();
        }
    }
    std::mem::forget(nvml);
    0
}

/// The parent's handle on a `__nvml watch` child. Dropping it kills the child's group.
pub struct Watcher {
    child: Running,
    /// The interval last asked for (0: paused).
    interval_ms: u64,
}

impl Watcher {
    /// Starts the watcher for `gpus` and waits (at most `limit`) for its state line.
    pub fn start_with(
        program: &Path,
        gpus: &[u32],
        limit: Duration,
    ) -> Result<(Watcher, Vec<GpuState>), String> {
        let cmd = Cmd::new(program)
            .args([SUBCOMMAND, "watch"])
            .args(gpus.iter().map(|g| g.to_string()))
            .input(Input::Pipe);
        let mut child =
            Running::spawn(&cmd, 1 << 20, 4 << 10).map_err(|e| format!("NVML not watched: {e}"))?;
        let deadline = Instant::now() + limit;
        let mut last_err = String::new();
        loop {
            match child.next(deadline) {
                Event::Stdout(l) => match serde_json::from_slice::<WatchLine>(&l) {
                    Ok(WatchLine::State { gpus }) => {
                        return Ok((
                            Watcher {
                                child,
                                interval_ms: 0,
                            },
                            gpus,
                        ))
                    }
                    Ok(WatchLine::Error { reason }) => return Err(reason),
                    _ => {}
                },
                Event::Stderr(l) => last_err = String::from_utf8_lossy(&l).trim().to_string(),
                Event::Exited(st) => {
                    let tail = if last_err.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; its last output: {}",
                            last_err.chars().take(300).collect::<String>()
                        )
                    };
                    return Err(format!(
                        "NVML failed: the NVML process {}{tail}",
                        describe_status(&st)
                    ));
                }
                Event::Deadline => {
                    return Err(format!(
                        "NVML did not answer within {} s (the NVML process was killed)",
                        limit.as_secs()
                    ))
                }
            }
        }
    }

    /// [`Watcher::start_with`] this binary.
    pub fn start(gpus: &[u32], limit: Duration) -> Result<(Watcher, Vec<GpuState>), String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("NVML not watched: cannot find gpuaudit's own executable: {e}"))?;
        Watcher::start_with(&exe, gpus, limit)
    }

    /// Sample every `ms` milliseconds from now on (0 pauses).
    pub fn set_interval(&mut self, ms: u64) {
        if ms != self.interval_ms {
            self.interval_ms = ms;
            self.child.send(format!("sample {ms}\n").as_bytes());
        }
    }

    /// The samples that arrive until `until` (fewer if the child ended).
    pub fn samples_until(&mut self, until: Instant) -> Vec<WatchSample> {
        let mut out = Vec::new();
        loop {
            match self.child.next(until) {
                Event::Stdout(l) => {
                    if let Ok(WatchLine::Sample(s)) = serde_json::from_slice::<WatchLine>(&l) {
                        out.push(s.plausible());
                    }
                }
                Event::Stderr(_) => {}
                Event::Exited(_) => {
                    // Nothing more will come: do not spin until `until`.
                    std::thread::sleep(until.saturating_duration_since(Instant::now()));
                    return out;
                }
                Event::Deadline => return out,
            }
        }
    }

    /// Ends the child (its stdin closes; its group is killed if it does not go).
    pub fn stop(mut self) {
        self.child.close_stdin();
        let _ = self.child.next(Instant::now() + Duration::from_millis(500));
        // Drop kills whatever is left.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for `gpuaudit __nvml`: a shell script.
    fn fake(dir: &Path, body: &str) -> std::path::PathBuf {
        let p = dir.join("fake-gpuaudit");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn answer_with(gpu: GpuFacts) -> String {
        serde_json::to_string(&NvmlAnswer::Loaded {
            driver_version: Reading::Value("580.159.04".into()),
            cuda_version: Reading::Value(CudaVersion::new(13, 0)),
            gpus: Reading::Value(vec![gpu]),
        })
        .unwrap()
    }

    #[test]
    fn the_answer_round_trips_and_garbage_is_filtered() {
        let d = tempfile::tempdir().unwrap();
        let mut g = GpuFacts::unread(0, "0000:00:06.0", "nvml", "x");
        g.pcie.gen_current = Reading::Value(99);
        g.pcie.width_max = Reading::Value(16);
        let line = answer_with(g);
        let p = fake(d.path(), &format!("echo 'library chatter'\necho '{line}'"));
        match read_facts_with(&p, Duration::from_secs(10)).unwrap() {
            NvmlAnswer::Loaded {
                gpus,
                driver_version,
                ..
            } => {
                assert_eq!(driver_version, Reading::Value("580.159.04".into()));
                let g = &gpus.value().unwrap()[0];
                assert!(g
                    .pcie
                    .gen_current
                    .reason()
                    .unwrap()
                    .starts_with("implausible value from NVML"));
                assert_eq!(g.pcie.width_max, Reading::Value(16));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_hung_crashed_or_mute_child_is_a_reason() {
        let d = tempfile::tempdir().unwrap();
        let t0 = Instant::now();
        let hung = fake(d.path(), "sleep 60");
        let e = read_facts_with(&hung, Duration::from_millis(500)).unwrap_err();
        assert!(e.reason.contains("did not answer within 0 s"), "{e}");
        assert!(!e.unreadable);
        assert!(t0.elapsed() < Duration::from_secs(5));
        let crash = fake(d.path(), "echo 'nvmlInit: boom' >&2; kill -SEGV $$");
        let e = read_facts_with(&crash, Duration::from_secs(10)).unwrap_err();
        assert!(
            e.reason.contains("SIGSEGV") && e.reason.contains("nvmlInit: boom"),
            "{e}"
        );
        assert!(!e.unreadable);
        let mute = fake(d.path(), "echo not json");
        let e = read_facts_with(&mute, Duration::from_secs(10)).unwrap_err();
        assert_eq!(e.reason, "NVML gave no answer");
        assert!(!e.unreadable);
        // A crash in the middle of writing the answer is a crash, not an unreadable answer.
        let cut = fake(d.path(), "printf '{\"nvml\": \"loa'; exit 3");
        assert!(
            !read_facts_with(&cut, Duration::from_secs(10))
                .unwrap_err()
                .unreadable
        );
    }

    #[test]
    fn an_answer_that_cannot_be_read_is_said_so() {
        let d = tempfile::tempdir().unwrap();
        // A line of the answer's form that is not one: garbled, or of another version.
        for line in [r#"{"nvml": "loaded", "gpus": 7}"#, r#"{"nvml": "loa"#, "{}"] {
            let p = fake(d.path(), &format!("echo '{line}'"));
            let e = read_facts_with(&p, Duration::from_secs(10)).unwrap_err();
            assert!(e.unreadable, "{line}: {e}");
            assert!(
                e.reason.starts_with("NVML's answer could not be read: "),
                "{line}: {e}"
            );
        }
        // An answer larger than the cap: its start (and its '{') is gone.
        let p = fake(
            d.path(),
            &format!("printf '{{\"nvml\": \"loaded\", \"x\": \"'; head -c {} /dev/zero | tr '\\0' a; echo '\"}}'", FACTS_STDOUT_CAP + 10),
        );
        let e = read_facts_with(&p, Duration::from_secs(30)).unwrap_err();
        assert!(e.unreadable, "{e}");
        assert_eq!(e.reason, "NVML's answer is larger than 32 MiB, not read");
    }

    #[test]
    fn the_watcher_reports_state_then_samples_as_asked() {
        let d = tempfile::tempdir().unwrap();
        let state = r#"{"type":"state","gpus":[{"gpu":0,"processes":0,"utilization":3,"persistence":true}]}"#;
        let sample = r#"{"type":"sample","gpu":0,"sm_mhz":1980,"power_w":120.5,"temp_c":40,"throttle":4,"pcie_gen":99,"pcie_width":16}"#;
        let p = fake(
            d.path(),
            &format!("echo '{state}'\nwhile read cmd; do [ \"$cmd\" = 'sample 20' ] && echo '{sample}'; done"),
        );
        let (mut w, st) = Watcher::start_with(&p, &[0], Duration::from_secs(10)).unwrap();
        assert_eq!(st[0].persistence, Some(true));
        w.set_interval(20);
        let got = w.samples_until(Instant::now() + Duration::from_secs(2));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].sm_mhz, Some(1980));
        assert_eq!(got[0].pcie_gen, None, "gen 99 is dropped");
        assert_eq!(got[0].pcie_width, Some(16));
        w.stop();
        let hung = fake(d.path(), "sleep 60");
        let e = Watcher::start_with(&hung, &[0], Duration::from_millis(300))
            .map(|_| ())
            .unwrap_err();
        assert!(e.contains("did not answer"), "{e}");
    }
}
