//! The parent side: runs the children with hard time limits, reads their lines, samples NVML
//! meanwhile (through the `__nvml` watcher child), and assembles [`MeasuredFacts`]. Nothing
//! here loads a CUDA library or NVML.

use super::plan::{Budget, Plan};
use super::protocol::{ChildMsg, ChildRequest, CtxProbeLine, CtxSample, GroupResult};
use crate::measure::GpuGroup;
use crate::nvml::WatchSample;
use crate::process::{self, Caps, Cmd, Ended, Event, Input, Running};
use gpuaudit_core::facts::{
    PcieLinkState, Stats, Telemetry, TelemetrySample, ThrottleReason, ThrottleSeen,
};
use gpuaudit_core::Reading;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use crate::process::describe_status;

/// How to start a child: the program and the arguments before the request.
#[derive(Clone, Debug)]
pub struct ChildCmd {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Environment changes: `Some(v)` sets, `None` removes.
    pub env: Vec<(String, Option<OsString>)>,
}

impl ChildCmd {
    pub fn command(&self) -> Cmd {
        let mut c = Cmd::new(&self.program).args(&self.args);
        for (k, v) in &self.env {
            c = c.env(k, v.as_ref());
        }
        c
    }
}

/// A protocol line of `__measure` (a group's result with every table) fits in this.
const MSG_LINE_CAP: usize = 16 << 20;
/// Library chatter on stderr is kept to this per line (only the last lines are shown).
const ERR_LINE_CAP: usize = 4 << 10;

/// The environment every measuring process gets: gpuaudit's library links first, NVLink
/// multicast off, and the settings that would distort a measurement removed.
pub fn child_env(ld_library_path: Option<OsString>) -> Vec<(String, Option<OsString>)> {
    let mut env = vec![
        ("NCCL_NVLS_ENABLE".to_string(), Some(OsString::from("0"))),
        (
            "CUDA_DEVICE_ORDER".into(),
            Some(OsString::from("PCI_BUS_ID")),
        ),
        // Serialising every launch, or forcing fp32 GEMMs onto TF32 (or off it), would
        // measure the setting instead of the GPU; cuda.env reports them.
        ("CUDA_LAUNCH_BLOCKING".into(), None),
        ("NVIDIA_TF32_OVERRIDE".into(), None),
    ];
    if let Some(p) = ld_library_path {
        env.push(("LD_LIBRARY_PATH".into(), Some(p)));
    }
    env
}

/// The last lines a child wrote that were not protocol messages (stderr, library chatter).
#[derive(Debug, Default)]
struct Tail {
    lines: VecDeque<String>,
}

impl Tail {
    const KEEP: usize = 12;
    fn push(&mut self, l: &str) {
        let l = l.trim();
        if l.is_empty() {
            return;
        }
        if self.lines.len() == Self::KEEP {
            self.lines.pop_front();
        }
        self.lines.push_back(l.chars().take(300).collect());
    }
    fn text(&self, n: usize) -> String {
        let skip = self.lines.len().saturating_sub(n);
        self.lines
            .iter()
            .skip(skip)
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// How a child run ended.
#[derive(Debug, PartialEq)]
pub enum ChildEnd {
    /// It reported `done`.
    Done,
    /// It exited or was killed by a signal before finishing.
    Died {
        during: Option<GpuGroup>,
        reason: String,
    },
    /// It ran past a time limit and was killed.
    TimedOut {
        during: Option<GpuGroup>,
        after_s: u64,
    },
}

/// Runs one child for `req`, calling `on_msg` for each message. The running group must
/// finish within its budget's limit; the child must start (and move between groups) within
/// `startup`.
pub fn run_child(
    cmd: &ChildCmd,
    req: &ChildRequest,
    startup: Duration,
    on_msg: &mut dyn FnMut(&ChildMsg),
) -> ChildEnd {
    let payload = serde_json::to_string(req).unwrap_or_default();
    let c = cmd.command().input(Input::Bytes(payload.into_bytes()));
    let mut child = match Running::spawn(&c, MSG_LINE_CAP, ERR_LINE_CAP) {
        Ok(ch) => ch,
        Err(e) => {
            return ChildEnd::Died {
                during: None,
                reason: format!("could not start the measurement process: {e}"),
            }
        }
    };
    let budget_of = |g: GpuGroup| -> Duration {
        Duration::from_secs(
            req.plan
                .budget(g)
                .map_or(120, |b: Budget| b.timeout_s.max(1)),
        )
    };
    let mut tail = Tail::default();
    let mut current: Option<GpuGroup> = None;
    let mut deadline = Instant::now() + startup;
    let mut limit = startup;
    let mut done = false;
    loop {
        match child.next(deadline) {
            Event::Stdout(l) => {
                let l = String::from_utf8_lossy(&l);
                match ChildMsg::parse(&l) {
                    Some(msg) => {
                        match &msg {
                            ChildMsg::Start { group } => {
                                current = Some(*group);
                                limit = budget_of(*group);
                                deadline = Instant::now() + limit;
                            }
                            ChildMsg::Result(r) if current == Some(r.group()) => {
                                current = None;
                                limit = startup;
                                deadline = Instant::now() + startup;
                            }
                            ChildMsg::Done => done = true,
                            _ => {}
                        }
                        on_msg(&msg);
                    }
                    None => tail.push(&l),
                }
            }
            Event::Stderr(l) => tail.push(&String::from_utf8_lossy(&l)),
            Event::Exited(st) => {
                if done && st.success() {
                    return ChildEnd::Done;
                }
                let t = tail.text(4);
                let what = current.map_or("while starting".to_string(), |g| {
                    format!("during the {} measurement", g.name())
                });
                let how = describe_status(&st);
                return ChildEnd::Died {
                    during: current,
                    reason: if t.is_empty() {
                        format!("the measurement process {how} {what}")
                    } else {
                        format!("the measurement process {how} {what}; its last output: {t}")
                    },
                };
            }
            Event::Deadline => {
                child.kill();
                return ChildEnd::TimedOut {
                    during: current,
                    after_s: limit.as_secs(),
                };
            }
        }
    }
}

/// Runs a job (groups in one child), restarting a child for the groups left after one died,
/// so a crash costs only the group it happened in. Returns each group's result.
pub fn run_job(
    cmd: &ChildCmd,
    plan: &Plan,
    groups: &[GpuGroup],
    on_msg: &mut dyn FnMut(&ChildMsg),
) -> Vec<GroupResult> {
    let startup = Duration::from_secs(plan.startup_timeout_s.max(1));
    let mut pending: Vec<GpuGroup> = groups.to_vec();
    let mut results: Vec<GroupResult> = Vec::new();
    while !pending.is_empty() {
        let req = ChildRequest {
            plan: plan.clone(),
            groups: pending.clone(),
        };
        let mut got: Vec<GroupResult> = Vec::new();
        let end = run_child(cmd, &req, startup, &mut |m| {
            if let ChildMsg::Result(r) = m {
                // Only what was asked, once.
                let g = r.group();
                if req.groups.contains(&g) && !got.iter().any(|x| x.group() == g) {
                    got.push(r.clone());
                }
            }
            on_msg(m);
        });
        let reported: Vec<GpuGroup> = got.iter().map(|r| r.group()).collect();
        results.extend(got);
        pending.retain(|g| !reported.contains(g));
        let (failed, reason, retry) = match end {
            ChildEnd::Done => (
                None,
                "the measurement process ended without reporting it".into(),
                false,
            ),
            ChildEnd::Died { during, reason } => (during, reason, during.is_some()),
            ChildEnd::TimedOut { during, after_s } => {
                let what = during.map_or("starting".to_string(), |g| g.name().to_string());
                (
                    during,
                    format!(
                        "the measurement process timed out after {after_s} s ({what}) and was killed: a GPU or library hung"
                    ),
                    during.is_some(),
                )
            }
        };
        match failed {
            Some(g) if retry => {
                if let Some(r) = GroupResult::unavailable(g, &reason) {
                    results.push(r);
                }
                pending.retain(|x| *x != g);
            }
            _ => {
                // Died while starting (or finished without a result): starting again would
                // fail the same way.
                for g in pending.drain(..) {
                    if let Some(r) = GroupResult::unavailable(g, &reason) {
                        results.push(r);
                    }
                }
            }
        }
    }
    results
}

/// Context creation, `runs` fresh processes in sequence.
pub fn run_ctx_probes(
    cmd: &ChildCmd,
    runs: u32,
    limit: Duration,
    mut on_run: impl FnMut(u32),
) -> (Vec<CtxSample>, Vec<String>) {
    let mut samples = Vec::new();
    let mut failures = Vec::new();
    // The probe's answer is its last line, after whatever libcuda printed.
    let caps = Caps::last(64 << 10, 16 << 10);
    for i in 0..runs {
        on_run(i);
        let o = match process::run(&cmd.command(), limit, caps) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("could not start the probe process: {e}"));
                break;
            }
        };
        let text = o.stdout_text();
        match (o.ended, CtxProbeLine::parse(&text)) {
            (Ended::Exited(_), Some(CtxProbeLine::CtxSample(s))) => samples.push(s),
            (Ended::Exited(_), Some(CtxProbeLine::CtxError { error, .. })) => failures.push(error),
            (Ended::Exited(st), None) => {
                let mut t = Tail::default();
                o.stderr_text().lines().for_each(|l| t.push(l));
                failures.push(format!(
                    "the probe process {}{}",
                    describe_status(&st),
                    if t.lines.is_empty() {
                        String::new()
                    } else {
                        format!("; its last output: {}", t.text(3))
                    }
                ));
            }
            (Ended::TimedOut(_), _) => failures.push(format!(
                "the probe process did not finish within {} s and was killed",
                limit.as_secs()
            )),
        }
        // A probe that cannot even load the driver will not succeed the next time.
        if samples.is_empty() && failures.len() >= 2 {
            break;
        }
    }
    (samples, failures)
}

// ---------------------------------------------------------------- NVML samples

/// One NVML reading of one GPU while a group ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub group: Option<GpuGroup>,
    /// The group had reported progress (past its setup) when the sample was taken.
    pub loaded: bool,
    /// Milliseconds since the sampler started, when the sample arrived.
    pub at_ms: u64,
    pub nvml: WatchSample,
}

/// The highest link state seen on `gpu` while the host copies ran.
pub fn link_under_load(samples: &[Sample], gpu: u32) -> Reading<PcieLinkState> {
    let s: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.nvml.gpu == gpu && s.group == Some(GpuGroup::Pcie))
        .collect();
    let gen = s.iter().filter_map(|s| s.nvml.pcie_gen).max();
    let width = s.iter().filter_map(|s| s.nvml.pcie_width).max();
    match (gen, width) {
        (Some(gen), Some(width)) => Reading::Value(PcieLinkState {
            gen,
            width,
            samples: s.len() as u32,
        }),
        _ if s.is_empty() => Reading::unavailable("no NVML sample taken during the copies"),
        _ => Reading::unavailable("NVML did not report the link during the copies"),
    }
}

/// NVML's utilisation while `group` was loaded (for the rehearsal: the whole pipeline), the
/// mean percent over `gpus`.
pub fn utilization(samples: &[Sample], group: GpuGroup, gpus: &[u32]) -> Reading<f64> {
    let v: Vec<f64> = samples
        .iter()
        .filter(|s| s.group == Some(group) && s.loaded && gpus.contains(&s.nvml.gpu))
        .filter_map(|s| s.nvml.util_pct.map(f64::from))
        .collect();
    if v.is_empty() {
        Reading::unavailable("no NVML utilisation sample taken while the pipeline ran")
    } else {
        Reading::Value(v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// Clocks, power, temperature and throttle reasons of `gpu` during the burn.
pub fn telemetry(samples: &[Sample], gpu: u32, interval_ms: u32) -> Reading<Telemetry> {
    let s: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.nvml.gpu == gpu && s.group == Some(GpuGroup::Burn) && s.loaded)
        .collect();
    if s.is_empty() {
        return Reading::unavailable("no NVML sample taken during the burn");
    }
    let clocks: Vec<f64> = s
        .iter()
        .filter_map(|x| x.nvml.sm_mhz.map(f64::from))
        .collect();
    let q = (clocks.len() / 4).max(1);
    let first = gpuaudit_core::facts::median(&clocks[..q.min(clocks.len())]);
    let last = gpuaudit_core::facts::median(&clocks[clocks.len().saturating_sub(q)..]);
    let power: Vec<f64> = s.iter().filter_map(|x| x.nvml.power_w).collect();
    let temp: Vec<f64> = s
        .iter()
        .filter_map(|x| x.nvml.temp_c.map(f64::from))
        .collect();
    let mut throttle = Vec::new();
    for (bit, reason) in ThrottleReason::BITS {
        let n = s
            .iter()
            .filter(|x| x.nvml.throttle.is_some_and(|m| m & bit != 0))
            .count();
        if n > 0 {
            throttle.push(ThrottleSeen {
                reason,
                samples: n as u32,
            });
        }
    }
    let start = s.first().map_or(0, |x| x.at_ms);
    let series = s
        .iter()
        .map(|x| TelemetrySample {
            t_ms: x.at_ms.saturating_sub(start),
            sm_clock_mhz: x.nvml.sm_mhz,
            power_w: x.nvml.power_w,
            temperature_c: x.nvml.temp_c,
            throttle: x
                .nvml
                .throttle
                .map(ThrottleReason::decode)
                .unwrap_or_default(),
        })
        .collect();
    Reading::Value(Telemetry {
        samples: s.len() as u32,
        interval_ms,
        sm_clock_mhz: Stats::of(&clocks),
        sm_clock_first_mhz: first,
        sm_clock_last_mhz: last,
        power_w: Stats::of(&power),
        temperature_c: Stats::of(&temp),
        throttle,
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::plan::{plan, LibStatus, Options, Target};
    use gpuaudit_core::facts::ComputeCapability;

    fn two_gpu_plan(full: bool) -> Plan {
        let t = |i: u32| Target {
            index: i,
            pci_bus_id: format!("0000:00:0{}.0", 6 + i),
            name: None,
            compute_capability: Some(ComputeCapability { major: 9, minor: 0 }),
            busy: None,
            mig: false,
        };
        plan(
            &[t(0), t(1)],
            &Options {
                full,
                timeout_s: Some(2),
                ..Options::default()
            },
            &LibStatus::all_found(),
        )
    }

    /// A fake child: a shell script standing in for `gpuaudit __measure`.
    fn sh(script: &str) -> ChildCmd {
        ChildCmd {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), format!("cat >/dev/null; {script}")],
            env: vec![],
        }
    }

    #[test]
    fn a_child_that_reports_everything_is_done() {
        let p = two_gpu_plan(false);
        let cmd = sh(r#"
            echo '{"type":"hello","pid":1,"driver_version":13000}'
            echo 'NCCL INFO chatter'
            echo '{"type":"start","group":"p2p"}'
            echo '{"type":"progress","group":"p2p","fraction":0.5,"message":"x"}'
            echo '{"type":"result","group":"p2p","result":{"unavailable":"fake"}}'
            echo '{"type":"done"}'"#);
        let mut seen = Vec::new();
        let r = run_job(&cmd, &p, &[GpuGroup::P2p], &mut |m| seen.push(m.clone()));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0], GroupResult::P2p(Reading::unavailable("fake")));
        assert!(seen.iter().any(|m| matches!(m, ChildMsg::Progress { .. })));
    }

    #[test]
    fn a_crash_costs_only_its_group() {
        let p = two_gpu_plan(false);
        // First run: pcie ok, then dies in memory with an abort. The restarted child (the
        // same script; it only answers what it is asked) reports gemm as well.
        let cmd = sh(r#"
            echo '{"type":"start","group":"pcie"}'
            echo '{"type":"result","group":"pcie","result":{"unavailable":"ok-pcie"}}'
            if [ ! -e "$MARK" ]; then
              touch "$MARK"
              echo '{"type":"start","group":"memory"}'
              echo 'terminate called after throwing an instance' >&2
              kill -ABRT $$
            fi
            echo '{"type":"start","group":"gemm"}'
            echo '{"type":"result","group":"gemm","result":{"unavailable":"ok-gemm"}}'
            echo '{"type":"done"}'"#);
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = cmd;
        cmd.env.push((
            "MARK".into(),
            Some(dir.path().join("mark").into_os_string()),
        ));
        let r = run_job(
            &cmd,
            &p,
            &[GpuGroup::Pcie, GpuGroup::Memory, GpuGroup::Gemm],
            &mut |_| {},
        );
        let find = |g: GpuGroup| r.iter().find(|x| x.group() == g).cloned();
        match find(GpuGroup::Memory) {
            Some(GroupResult::Memory(Reading::Unavailable(why))) => {
                assert!(why.contains("SIGABRT"), "{why}");
                assert!(why.contains("during the memory measurement"), "{why}");
                assert!(why.contains("terminate called"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            find(GpuGroup::Gemm),
            Some(GroupResult::Gemm(Reading::unavailable("ok-gemm")))
        );
        assert!(find(GpuGroup::Pcie).is_some());
    }

    #[test]
    fn a_hung_group_is_killed_after_its_limit() {
        let p = two_gpu_plan(false);
        let cmd = sh(r#"
            echo '{"type":"start","group":"nccl"}'
            sleep 30"#);
        let t = Instant::now();
        let r = run_job(&cmd, &p, &[GpuGroup::Nccl], &mut |_| {});
        assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
        match &r[..] {
            [GroupResult::Nccl(Reading::Unavailable(why))] => {
                assert!(why.contains("timed out after 2 s"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_child_that_cannot_start_fails_every_group_once() {
        let p = two_gpu_plan(false);
        let cmd = ChildCmd {
            program: "/nonexistent/gpuaudit".into(),
            args: vec![],
            env: vec![],
        };
        let r = run_job(&cmd, &p, &[GpuGroup::Pcie, GpuGroup::Gemm], &mut |_| {});
        assert_eq!(r.len(), 2);
        for x in r {
            let why = match x {
                GroupResult::Pcie(Reading::Unavailable(w))
                | GroupResult::Gemm(Reading::Unavailable(w)) => w,
                other => panic!("{other:?}"),
            };
            assert!(why.contains("could not start"), "{why}");
        }
    }

    #[test]
    fn ctx_probe_samples_and_failures() {
        let ok = sh(
            r#"echo '{"type":"ctx_sample","init_ms":300.0,"context_ms":90.0,"alloc_ms":1.0,"total_ms":391.0,"devices":2}'"#,
        );
        let (s, f) = run_ctx_probes(&ok, 3, Duration::from_secs(5), |_| {});
        assert_eq!(s.len(), 3);
        assert!(f.is_empty());
        let bad = sh(
            r#"echo '{"type":"ctx_error","stage":"cuInit","error":"cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"}'"#,
        );
        let (s, f) = run_ctx_probes(&bad, 5, Duration::from_secs(5), |_| {});
        assert!(s.is_empty());
        assert_eq!(f.len(), 2, "stops early when nothing works");
        assert!(f[0].contains("CUDA_ERROR_NO_DEVICE"));
        let crash = sh("echo 'Segmentation fault' >&2; kill -SEGV $$");
        let (_, f) = run_ctx_probes(&crash, 1, Duration::from_secs(5), |_| {});
        assert!(f[0].contains("SIGSEGV"), "{}", f[0]);
    }

    fn sample(gpu: u32, group: GpuGroup, sm: u32, throttle: u64) -> Sample {
        Sample {
            group: Some(group),
            loaded: true,
            at_ms: 0,
            nvml: WatchSample {
                gpu,
                sm_mhz: Some(sm),
                power_w: Some(650.0),
                temp_c: Some(60),
                throttle: Some(throttle),
                pcie_gen: Some(5),
                pcie_width: Some(16),
                util_pct: Some(90),
            },
        }
    }

    #[test]
    fn utilisation_is_the_mean_while_the_pipeline_ran() {
        let mut a = sample(0, GpuGroup::Rehearse, 1980, 0);
        a.nvml.util_pct = Some(40);
        let b = sample(1, GpuGroup::Rehearse, 1980, 0);
        let mut idle = sample(0, GpuGroup::Rehearse, 1980, 0);
        idle.loaded = false;
        idle.nvml.util_pct = Some(0);
        let other = sample(0, GpuGroup::Burn, 1980, 0);
        let v = [a, b, idle, other];
        assert_eq!(
            utilization(&v, GpuGroup::Rehearse, &[0, 1]).into_value(),
            Some(65.0)
        );
        assert_eq!(
            utilization(&v, GpuGroup::Rehearse, &[1]).into_value(),
            Some(90.0)
        );
        assert!(utilization(&v, GpuGroup::Rehearse, &[2]).reason().is_some());
    }

    #[test]
    fn telemetry_summarises_each_reason_on_its_own() {
        let mut v: Vec<Sample> = (0..8)
            .map(|_| sample(0, GpuGroup::Burn, 1980, 0x4))
            .collect();
        v.extend((0..8).map(|_| sample(0, GpuGroup::Burn, 1700, 0x4 | 0x40)));
        v.push(sample(1, GpuGroup::Burn, 100, 0x8));
        for (i, x) in v.iter_mut().enumerate() {
            x.at_ms = 1000 + 200 * i as u64;
        }
        let t = telemetry(&v, 0, 200).into_value().unwrap();
        assert_eq!(t.samples, 16);
        // The timeline: every sample of the GPU in order, time from its first sample, each
        // reason on its own.
        assert_eq!(t.series.len(), 16);
        assert_eq!((t.series[0].t_ms, t.series[15].t_ms), (0, 3000));
        assert_eq!(t.series[0].sm_clock_mhz, Some(1980));
        assert_eq!(
            t.series[8].throttle,
            vec![
                ThrottleReason::SwPowerCap,
                ThrottleReason::HwThermalSlowdown
            ]
        );
        assert_eq!(t.sm_clock_first_mhz, Some(1980.0));
        assert_eq!(t.sm_clock_last_mhz, Some(1700.0));
        assert_eq!(
            t.throttle,
            vec![
                ThrottleSeen {
                    reason: ThrottleReason::SwPowerCap,
                    samples: 16
                },
                ThrottleSeen {
                    reason: ThrottleReason::HwThermalSlowdown,
                    samples: 8
                }
            ]
        );
        assert!(telemetry(&v, 2, 200).reason().is_some());
    }

    #[test]
    fn link_state_is_the_best_seen_under_load() {
        let mut a = sample(0, GpuGroup::Pcie, 0, 0);
        a.nvml.pcie_gen = Some(1);
        let b = sample(0, GpuGroup::Pcie, 0, 0);
        let l = link_under_load(&[a, b], 0).into_value().unwrap();
        assert_eq!((l.gen, l.width, l.samples), (5, 16, 2));
        assert!(link_under_load(&[], 0).reason().is_some());
    }
}
