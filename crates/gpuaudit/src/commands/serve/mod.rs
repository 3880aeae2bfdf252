//! `gpuaudit serve`: a Prometheus exporter of the facts-only audit (DESIGN "gpuaudit serve").
//!
//! One thread audits every `--interval` (the pipeline of `gpuaudit --facts-only`: gather, then
//! `Report::build`; `--root` re-reads the snapshot) and encodes the metrics of each result; the
//! HTTP server (`http`: hyper on tokio, with its limits) answers `/metrics` and `/healthz` from
//! the latest. Nothing is measured unless `--measure-every` says how often, and then never on
//! a GPU other processes use (the measurement plan leaves busy GPUs out; there is no
//! `--force`). SIGTERM, SIGINT and SIGHUP stop it with exit 0: the children are killed and the
//! temporary files removed by the cleanup module, the socket closed.

pub mod http;
pub mod metrics;

use crate::cli::ServeArgs;
use crate::commands::audit::{apply_measured, check_selection};
use anyhow::{Context, Result};
use gpuaudit_core::facts::MeasuredFacts;
use gpuaudit_core::render::escape::escape_line;
use gpuaudit_core::{Policy, Report};
use gpuaudit_probe::gather::{self, GatherOptions};
use gpuaudit_probe::host::HostOptions;
use gpuaudit_probe::{cleanup, measure};
use hyper::body::Bytes;
use hyper::{Method, StatusCode};
use metrics::ExporterState;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// /healthz answers 503 once the latest audit is this many intervals old: one late audit is
/// a slow machine, three in a row is an exporter that stopped working.
pub const STALE_INTERVALS: u32 = 3;

/// How often the waiting threads and tasks look at the stop flag: the exporter ends within
/// this of a signal.
const POLL: Duration = Duration::from_millis(100);

/// Worker threads of the HTTP runtime: every connection is a task on them, so one that waits
/// on its client holds no thread.
const HTTP_WORKERS: usize = 2;

/// What the auditing thread leaves for the handlers.
#[derive(Clone, Default)]
struct Latest {
    report: Option<Arc<Report>>,
    /// When the latest audit that produced a report finished.
    finished_at: Option<SystemTime>,
    duration: Option<Duration>,
    /// Why the latest attempt failed (cleared by the next one that succeeds), escaped for a
    /// terminal: it is said on stderr and in the /healthz body.
    last_error: Option<String>,
    errors_total: u64,
    measured_at: Option<SystemTime>,
    /// /metrics: the OpenMetrics text of all the above, encoded once per audit (a scrape
    /// costs a copy of a pointer, however many come).
    exposition: Bytes,
}

impl Latest {
    /// Encodes the metrics of all the above into `exposition` (outside any lock: a `Latest`
    /// is made whole, then swapped in).
    fn encode(&mut self) {
        self.exposition = Bytes::from(metrics::encode_metrics(
            self.report.as_deref(),
            &self.state(),
        ));
    }

    fn state(&self) -> ExporterState {
        ExporterState {
            last_audit_unix: self.finished_at.map(unix),
            audit_duration_seconds: self.duration.map(|d| d.as_secs_f64()),
            audit_errors_total: self.errors_total,
            last_measurement_unix: self.measured_at.map(unix),
        }
    }
}

fn lock(m: &Mutex<Latest>) -> MutexGuard<'_, Latest> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// What the audits are made of (fixed for the exporter's life).
struct Config {
    root: Option<PathBuf>,
    policy: Policy,
    gather: GatherOptions,
    interval: Duration,
    measure_every: Option<Duration>,
}

pub fn run(args: &ServeArgs) -> Result<u8> {
    let policy = policy_from(args)?;
    let config = Config {
        root: args.root.clone(),
        policy,
        gather: GatherOptions {
            host: HostOptions {
                data_dirs: args.judge.data_dirs.clone(),
                // The facts-only audit: no storage or loopback measurement, no interpreter.
                measure_storage: false,
                measure_loopback: false,
                ask_interpreter: false,
                ..HostOptions::default()
            },
            ..GatherOptions::default()
        },
        interval: args.interval,
        measure_every: args.measure_every,
    };
    // A snapshot that cannot be read is an error now, not a 503 later.
    if let Some(dir) = &config.root {
        gather::snapshot(dir, &config.gather)?;
    }

    // The signals end the exporter through the stop flag (exit 0); the cleanup module still
    // kills the children and removes the temporary files on each of them.
    cleanup::set_terminate_on_signal(false);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("cannot watch for signals")?;
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(HTTP_WORKERS)
        .thread_name("gpuaudit-http")
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the HTTP server's runtime")?;
    let listener = {
        let _inside = runtime.enter();
        listen(args.listen).with_context(|| format!("cannot listen on {}", args.listen))?
    };
    let bound = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| args.listen.to_string());
    let limit = http::connection_limit();
    crate::sink::note(&format!(
        "gpuaudit serve: listening on http://{bound} (/metrics, /healthz), auditing every {}",
        humantime::format_duration(config.interval)
    ));
    let log = http::Log::start().context("cannot start the log thread")?;

    let mut first = Latest::default();
    first.encode();
    let latest = Arc::new(Mutex::new(first));
    let interval = config.interval;
    catch_audit_panics();
    {
        let latest = Arc::clone(&latest);
        let stop = Arc::clone(&stop);
        let log = log.clone();
        std::thread::Builder::new()
            .name(AUDIT_THREAD.into())
            .spawn(move || audit_loop(&config, &latest, &stop, &log))
            .context("cannot start the auditing thread")?;
    }

    let router: Arc<http::Router> = {
        let latest = Arc::clone(&latest);
        Arc::new(move |method: &Method, path: &str| answer(method, path, &latest, interval))
    };
    runtime.block_on(http::serve(
        listener,
        router,
        Arc::clone(&stop),
        log.clone(),
        limit,
    ));
    // The listener is closed; connections still open are dropped with the runtime.
    runtime.shutdown_timeout(Duration::from_millis(500));
    cleanup::clean_up();
    log.say("gpuaudit serve: stopped".into());
    log.flush(Duration::from_secs(1));
    Ok(0)
}

/// Connections accepted by the kernel that wait for the server (past the connection limit):
/// the listen backlog, as nginx and Go have it (the kernel caps it at net.core.somaxconn).
const LISTEN_BACKLOG: u32 = 1024;

/// A listening socket on `addr` (SO_REUSEADDR, as tokio and std set it), in the runtime.
fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

fn policy_from(args: &ServeArgs) -> Result<Policy> {
    super::audit::policy_of(&args.judge, false)
}

const AUDIT_THREAD: &str = "gpuaudit-audit";

/// Where the panic hook leaves a panic of the auditing thread ("at FILE:LINE: MESSAGE"), for
/// the audit's error; it says nothing on stderr itself.
static AUDIT_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// A panic in a check costs one audit (`catch_unwind` in [`audit_loop`]): its message (text
/// from the machine, maybe) is kept for the audit's error, escaped there with the rest, instead
/// of the default hook writing it raw to stderr. Other threads' panics go to the hook as before.
fn catch_audit_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() != Some(AUDIT_THREAD) {
            return previous(info);
        }
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        *AUDIT_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{at}: {message}"));
    }));
}

/// Audit, encode, swap in, wait an interval (or until told to stop), again.
fn audit_loop(config: &Config, latest: &Mutex<Latest>, stop: &AtomicBool, log: &http::Log) {
    let mut measured: Option<(MeasuredFacts, Instant)> = None;
    while !stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let outcome = guarded(|| audit_once(config, &mut measured));
        let took = started.elapsed();
        // The next state is made whole, its metrics encoded, outside the lock, then swapped
        // in at once: /healthz and /metrics never disagree about an audit (a failure seen on
        // /healthz with /metrics still counting no error). Only this thread changes `latest`.
        let mut l = lock(latest).clone();
        let failed = match outcome {
            Ok(report) => {
                l.report = Some(Arc::new(report));
                l.finished_at = Some(SystemTime::now());
                l.duration = Some(took);
                l.last_error = None;
                l.measured_at = measured
                    .as_ref()
                    .map(|(_, at)| SystemTime::now() - at.elapsed());
                None
            }
            Err(e) => {
                let why = failure(&e);
                l.last_error = Some(why.clone());
                l.errors_total += 1;
                Some(why)
            }
        };
        l.encode();
        // The previous report is dropped after the lock is let go.
        let previous = std::mem::replace(&mut *lock(latest), l);
        drop(previous);
        // Said outside the lock: a stderr that blocks never holds up /healthz.
        if let Some(why) = failed {
            log.say(format!("gpuaudit serve: audit failed: {why}"));
        }
        let next = started.checked_add(config.interval);
        loop {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let left = match next {
                Some(n) => n.saturating_duration_since(Instant::now()),
                None => POLL,
            };
            if left.is_zero() {
                break;
            }
            std::thread::sleep(POLL.min(left));
        }
    }
}

/// `audit` (on the auditing thread), a panic in it an error: a panic in a check costs one
/// audit, not the exporter.
fn guarded(audit: impl FnOnce() -> Result<Report>) -> Result<Report> {
    AUDIT_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(audit)).unwrap_or_else(|_| {
        let what = AUDIT_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
        Err(anyhow::anyhow!(
            "the audit panicked{}",
            what.unwrap_or_default()
        ))
    })
}

/// Why an audit failed, in one line: paths and reasons come from the machine (a snapshot's
/// directory name, a file's text, a panic's message), so it is escaped for the terminal, for
/// stderr and the /healthz body alike.
fn failure(e: &anyhow::Error) -> String {
    escape_line(&format!("{e:#}")).into_owned()
}

/// One facts-only audit, with the latest measurements where `--measure-every` asks for them.
fn audit_once(config: &Config, measured: &mut Option<(MeasuredFacts, Instant)>) -> Result<Report> {
    let audited_at = gpuaudit_probe::time::now().map_err(anyhow::Error::msg)?;
    let mut facts = match &config.root {
        Some(dir) => gather::snapshot(dir, &config.gather)?,
        None => gather::live(&config.gather),
    };
    if let Some(sel) = &config.policy.gpus {
        check_selection(&facts, sel)?;
    }
    if let (Some(every), None) = (config.measure_every, &config.root) {
        if measured
            .as_ref()
            .is_none_or(|(_, at)| at.elapsed() >= every)
        {
            let opts = measure::Options {
                // Never --force: the plan leaves a GPU with compute processes or load out.
                force: false,
                gpus: config.policy.gpus.clone(),
                ..measure::Options::default()
            };
            let m = measure::run(&facts, &opts, &mut |_| {});
            *measured = Some((m, Instant::now()));
        }
    }
    if let Some((m, _)) = measured {
        apply_measured(&mut facts, m.clone());
    }
    let mut report = Report::build(&facts, &config.policy);
    report.audit.audited_at = Some(audited_at);
    Ok(report)
}

/// /healthz: Ok(text) for 200, Err(reason) for 503.
fn health(l: &Latest, now: SystemTime, interval: Duration) -> Result<String, String> {
    if let Some(e) = &l.last_error {
        return Err(format!("the latest audit failed: {e}"));
    }
    let Some(at) = l.finished_at else {
        return Err("no audit has finished yet".into());
    };
    let age = now.duration_since(at).unwrap_or(Duration::ZERO);
    // Saturating: the interval is bounded at parse time (a day), but never a panic here.
    let limit = interval.saturating_mul(STALE_INTERVALS);
    if age >= limit {
        return Err(format!(
            "the latest audit finished {} s ago, {STALE_INTERVALS} intervals ({} s) or more",
            age.as_secs(),
            limit.as_secs()
        ));
    }
    Ok(format!(
        "ok: the latest audit finished {} s ago",
        age.as_secs()
    ))
}

/// The answer to `method` `path` (the query ignored): /metrics, /healthz, / and errors.
fn answer(method: &Method, path: &str, latest: &Mutex<Latest>, interval: Duration) -> http::Answer {
    let text = "text/plain; charset=utf-8";
    let plain = |code: StatusCode, body: String| (code, Bytes::from(body), text);
    if !matches!(*method, Method::GET | Method::HEAD) {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
    }
    match path {
        "/metrics" => (
            StatusCode::OK,
            lock(latest).exposition.clone(),
            metrics::CONTENT_TYPE,
        ),
        "/healthz" => match health(&lock(latest), SystemTime::now(), interval) {
            Ok(t) => plain(StatusCode::OK, t + "\n"),
            Err(t) => plain(StatusCode::SERVICE_UNAVAILABLE, t + "\n"),
        },
        "/" => plain(
            StatusCode::OK,
            "gpuaudit serve: /metrics (OpenMetrics), /healthz\n".into(),
        ),
        _ => plain(
            StatusCode::NOT_FOUND,
            "not found: /metrics, /healthz\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    /// The exporter judges as the audit does: the same flags give the same policy, the
    /// server's expected concurrency included (it was not taken before), never `--full`.
    #[test]
    fn serve_takes_the_audits_judging_flags() {
        use clap::Parser;
        let flags = [
            "--expect",
            "h200:8",
            "--profile",
            "inference",
            "--concurrency",
            "4096",
            "--gpus",
            "0-1",
        ];
        let cli = crate::cli::Cli::try_parse_from(["gpuaudit", "serve"].iter().chain(flags.iter()))
            .unwrap();
        let Some(crate::cli::Command::Serve(args)) = cli.command else {
            panic!("not serve");
        };
        let served = policy_from(&args).unwrap();
        let audit = crate::cli::Cli::try_parse_from(
            ["gpuaudit", "audit", "--full"].iter().chain(flags.iter()),
        )
        .unwrap();
        let Some(crate::cli::Command::Audit(a)) = audit.command else {
            panic!("not audit");
        };
        let audited = super::super::audit::policy_from(&a).unwrap();
        assert_eq!(served.expected_concurrency, Some(4096));
        assert_eq!(served.expected_concurrency, audited.expected_concurrency);
        assert_eq!(served.profile, audited.profile);
        assert_eq!(served.gpus, audited.gpus);
        assert_eq!(served.gpus, Some(vec![0, 1]));
        assert_eq!(
            format!("{:?}", served.expect),
            format!("{:?}", audited.expect)
        );
        assert!(!served.full && audited.full);
    }

    fn finished(ago: Duration) -> (Latest, SystemTime) {
        let now = SystemTime::now();
        let l = Latest {
            finished_at: Some(now - ago),
            ..Latest::default()
        };
        (l, now)
    }

    #[test]
    fn healthy_until_three_intervals_old() {
        let (l, now) = finished(Duration::from_secs(5));
        assert!(health(&l, now, MINUTE).is_ok());
        let (l, now) = finished(MINUTE * STALE_INTERVALS - Duration::from_millis(1));
        assert!(health(&l, now, MINUTE).is_ok());
        let (l, now) = finished(MINUTE * STALE_INTERVALS);
        let why = health(&l, now, MINUTE).unwrap_err();
        assert!(why.contains("180 s ago"), "{why}");
        let (l, now) = finished(MINUTE * STALE_INTERVALS + Duration::from_secs(1));
        assert!(health(&l, now, MINUTE).is_err());
        // The limit follows the interval.
        let (l, now) = finished(Duration::from_secs(200));
        assert!(health(&l, now, MINUTE * 2).is_ok());
    }

    /// A panic on the auditing thread is the audit's error, with where and why, escaped with
    /// the rest of the reason; nothing of it reaches stderr raw.
    #[test]
    fn a_panic_in_the_audit_is_its_error_escaped() {
        catch_audit_panics();
        let why = std::thread::Builder::new()
            .name(AUDIT_THREAD.into())
            .spawn(|| {
                let e = guarded(|| panic!("GPU \x1b]0;owned\x07 \u{9b}2J\r\nforged"))
                    .err()
                    .map(|e| failure(&e));
                // The next audit starts clean.
                let next = guarded(|| Err(anyhow::anyhow!("gone")))
                    .err()
                    .map(|e| failure(&e));
                (e, next)
            })
            .unwrap()
            .join()
            .unwrap();
        let (e, next) = why;
        let e = e.unwrap_or_default();
        assert!(e.starts_with("the audit panicked at "), "{e}");
        assert!(e.contains("mod.rs:"), "{e}");
        assert!(
            e.ends_with(": GPU \\x1b]0;owned\\x07 \\u{9b}2J\\r\\nforged"),
            "{e}"
        );
        assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
        assert_eq!(next.as_deref(), Some("gone"));
        // The failure of an error from the machine, escaped the same way.
        let e = anyhow::anyhow!("cannot read /snap\x1b[2J: no such file").context("snapshot");
        assert_eq!(
            failure(&e),
            "snapshot: cannot read /snap\\x1b[2J: no such file"
        );
    }

    #[test]
    fn unhealthy_before_the_first_audit_and_after_a_failed_one() {
        let why = health(&Latest::default(), SystemTime::now(), MINUTE).unwrap_err();
        assert_eq!(why, "no audit has finished yet");
        let (mut l, now) = finished(Duration::from_secs(1));
        l.last_error = Some("cannot read snapshot directory /x: permission denied".into());
        let why = health(&l, now, MINUTE).unwrap_err();
        assert!(
            why.contains("the latest audit failed: cannot read"),
            "{why}"
        );
    }
}
