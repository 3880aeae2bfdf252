//! `gpuaudit serve`: a Prometheus exporter of the facts-only audit (DESIGN "gpuaudit serve").
//!
//! One thread audits every `--interval` (the pipeline of `gpuaudit --facts-only`: gather, then
//! `Report::build`; `--root` re-reads the snapshot), the main thread answers `/metrics` and
//! `/healthz` from the latest result. Nothing is measured unless `--measure-every` says how
//! often, and then never on a GPU other processes use (the measurement plan leaves busy GPUs
//! out; there is no `--force`). SIGTERM, SIGINT and SIGHUP stop it with exit 0: the children
//! are killed and the temporary files removed by the cleanup module, the socket closed.

pub mod metrics;

use crate::cli::ServeArgs;
use crate::commands::audit::{apply_measured, check_selection};
use crate::sink;
use anyhow::{Context, Result};
use gpuaudit_core::facts::MeasuredFacts;
use gpuaudit_core::{Policy, Report};
use gpuaudit_probe::gather::{self, GatherOptions};
use gpuaudit_probe::host::HostOptions;
use gpuaudit_probe::{cleanup, measure};
use metrics::ExporterState;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// /healthz answers 503 once the latest audit is this many intervals old: one late audit is
/// a slow machine, three in a row is an exporter that stopped working.
pub const STALE_INTERVALS: u32 = 3;

/// How often the waiting threads look at the stop flag: the exporter ends within this of a
/// signal.
const POLL: Duration = Duration::from_millis(100);

/// What the auditing thread leaves for the handlers.
#[derive(Default)]
struct Latest {
    report: Option<Arc<Report>>,
    /// When the latest audit that produced a report finished.
    finished_at: Option<SystemTime>,
    duration: Option<Duration>,
    /// Why the latest attempt failed (cleared by the next one that succeeds).
    last_error: Option<String>,
    errors_total: u64,
    measured_at: Option<SystemTime>,
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

    let server = tiny_http::Server::http(args.listen)
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    let bound = server
        .server_addr()
        .to_ip()
        .map(|a| a.to_string())
        .unwrap_or_else(|| args.listen.to_string());
    sink::note(&format!(
        "gpuaudit serve: listening on http://{bound} (/metrics, /healthz), auditing every {}",
        humantime::format_duration(config.interval)
    ));

    let latest = Arc::new(Mutex::new(Latest::default()));
    let interval = config.interval;
    {
        let latest = Arc::clone(&latest);
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("gpuaudit-audit".into())
            .spawn(move || audit_loop(&config, &latest, &stop))
            .context("cannot start the auditing thread")?;
    }

    while !stop.load(Ordering::SeqCst) {
        match server.recv_timeout(POLL) {
            Ok(Some(request)) => respond(request, &latest, interval),
            Ok(None) => {}
            Err(e) => {
                sink::note(&format!("gpuaudit serve: {e}"));
                std::thread::sleep(POLL);
            }
        }
    }
    drop(server);
    cleanup::clean_up();
    sink::note("gpuaudit serve: stopped");
    Ok(0)
}

fn policy_from(args: &ServeArgs) -> Result<Policy> {
    super::audit::policy_of(&args.judge, false)
}

/// Audit, publish, wait an interval (or until told to stop), again.
fn audit_loop(config: &Config, latest: &Mutex<Latest>, stop: &AtomicBool) {
    let mut measured: Option<(MeasuredFacts, Instant)> = None;
    while !stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        // A panic in a check costs this audit, not the exporter.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            audit_once(config, &mut measured)
        }))
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the audit panicked")));
        let took = started.elapsed();
        {
            let mut l = lock(latest);
            match outcome {
                Ok(report) => {
                    l.report = Some(Arc::new(report));
                    l.finished_at = Some(SystemTime::now());
                    l.duration = Some(took);
                    l.last_error = None;
                    l.measured_at = measured
                        .as_ref()
                        .map(|(_, at)| SystemTime::now() - at.elapsed());
                }
                Err(e) => {
                    let why = format!("{e:#}");
                    sink::note(&format!("gpuaudit serve: audit failed: {why}"));
                    l.last_error = Some(why);
                    l.errors_total += 1;
                }
            }
        }
        let next = started + config.interval;
        while Instant::now() < next && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(POLL.min(next.saturating_duration_since(Instant::now())));
        }
    }
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
    let limit = interval * STALE_INTERVALS;
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

fn respond(request: tiny_http::Request, latest: &Mutex<Latest>, interval: Duration) {
    use tiny_http::{Header, Method, Response};
    let header = |v: &str| Header::from_bytes(&b"Content-Type"[..], v.as_bytes()).ok();
    let text = "text/plain; charset=utf-8";
    let path = request.url().split('?').next().unwrap_or("").to_string();
    let method_ok = matches!(request.method(), Method::Get | Method::Head);
    let (code, body, content_type) = if !method_ok {
        (405, "only GET and HEAD\n".to_string(), text)
    } else {
        match path.as_str() {
            "/metrics" => {
                let (report, state) = {
                    let l = lock(latest);
                    let state = ExporterState {
                        last_audit_unix: l.finished_at.map(unix),
                        audit_duration_seconds: l.duration.map(|d| d.as_secs_f64()),
                        audit_errors_total: l.errors_total,
                        last_measurement_unix: l.measured_at.map(unix),
                    };
                    (l.report.clone(), state)
                };
                (
                    200,
                    metrics::encode_metrics(report.as_deref(), &state),
                    metrics::CONTENT_TYPE,
                )
            }
            "/healthz" => match health(&lock(latest), SystemTime::now(), interval) {
                Ok(t) => (200, t + "\n", text),
                Err(t) => (503, t + "\n", text),
            },
            "/" => (
                200,
                "gpuaudit serve: /metrics (OpenMetrics), /healthz\n".to_string(),
                text,
            ),
            _ => (404, "not found: /metrics, /healthz\n".to_string(), text),
        }
    };
    let mut response = Response::from_string(body).with_status_code(code);
    if let Some(h) = header(content_type) {
        response = response.with_header(h);
    }
    // A scraper that went away is not the exporter's problem.
    let _ = request.respond(response);
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
