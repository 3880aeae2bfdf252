//! Fault injection: the real binary against a libnvidia-ml, a libcuda, an nvidia-smi and a
//! python3 that hang, crash, abort, fork a child that keeps the pipe open, flood their output
//! and answer garbage. The fakes are built here from `tests/fault/*.c` with the system C
//! compiler and found first through LD_LIBRARY_PATH, PATH and VIRTUAL_ENV, as the real ones
//! would be.
//!
//! Every run is bounded (a deadline, then the whole process group is killed and the test
//! fails) and limited in memory (RLIMIT_AS), and afterwards no process of the run may be
//! left (each run's processes carry a marker in their environment, looked for in /proc) and
//! its private TMPDIR must be empty. Without `cc` every test says so and passes without
//! running (CI has gcc).

mod common;

use serde_json::Value;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The memory every run (the audit and all its children, each) may map.
const MEMORY_LIMIT: u64 = 384 << 20;

/// The fakes, built once per test binary.
struct Fakes {
    _dir: tempfile::TempDir,
    nvml: PathBuf,
    cuda: PathBuf,
    smi: PathBuf,
    venv: PathBuf,
}

fn build() -> Result<Fakes, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fault");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    remove_at_exit(dir.path());
    let cc = |out: &Path, args: &[&str]| -> Result<(), String> {
        std::fs::create_dir_all(out.parent().unwrap()).map_err(|e| e.to_string())?;
        let o = Command::new("cc")
            .args(["-O1", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(out)
            .args(args)
            .current_dir(&src)
            .output()
            .map_err(|e| format!("no C compiler (cc): {e}"))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!(
                "cc failed for {}: {}",
                out.display(),
                String::from_utf8_lossy(&o.stderr)
            ))
        }
    };
    let d = dir.path();
    cc(
        &d.join("nvml/libnvidia-ml.so.1"),
        &["-shared", "-fPIC", "fake_nvml.c"],
    )?;
    cc(
        &d.join("cuda/libcuda.so.1"),
        &["-shared", "-fPIC", "fake_cuda.c"],
    )?;
    cc(&d.join("smi/nvidia-smi"), &["fake_tool.c"])?;
    // A virtualenv with torch installed: its interpreter is asked about it.
    let venv = d.join("venv");
    cc(&venv.join("bin/python3"), &["fake_tool.c"])?;
    let site = venv.join("lib/python3.12/site-packages/torch");
    std::fs::create_dir_all(&site).map_err(|e| e.to_string())?;
    std::fs::write(
        site.join("version.py"),
        "__version__ = '2.5.1+cu124'\ncuda = '12.4'\n",
    )
    .map_err(|e| e.to_string())?;
    Ok(Fakes {
        nvml: d.join("nvml"),
        cuda: d.join("cuda"),
        smi: d.join("smi"),
        venv,
        _dir: dir,
    })
}

/// The test harness ends the process with `exit` and never drops a static: the fakes'
/// directory would be left in $TMPDIR by every run. `exit` runs what `atexit` registered.
fn remove_at_exit(dir: &Path) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    extern "C" fn remove() {
        if let Some(d) = DIR.get() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    if DIR.set(dir.to_path_buf()).is_ok() {
        // SAFETY: `remove` is a plain function that only reads a set OnceLock.
        unsafe {
            libc::atexit(remove);
        }
    }
}

/// The fakes, or `None` (with the reason printed) where they cannot be built.
fn fakes() -> Option<&'static Fakes> {
    static FAKES: OnceLock<Result<Fakes, String>> = OnceLock::new();
    match FAKES.get_or_init(build) {
        Ok(f) => Some(f),
        Err(e) if e.starts_with("no C compiler") => None,
        Err(e) => panic!("{e}"),
    }
}

macro_rules! fakes_or_skip {
    () => {
        match fakes() {
            Some(f) => f,
            None => {
                eprintln!("SKIPPED: no C compiler (cc) to build the fake libraries and programs");
                return;
            }
        }
    };
}

/// What misbehaves in a run (the fake's mode), and what is installed at all.
#[derive(Clone, Default)]
struct Faults {
    nvml: Option<&'static str>,
    cuda: Option<&'static str>,
    smi: Option<&'static str>,
    /// The file the fake nvidia-smi prints (its `-q -x` output).
    smi_out: Option<PathBuf>,
    python: Option<&'static str>,
    /// A directory of more libraries, found through LD_LIBRARY_PATH after the fakes.
    more_libs: Option<PathBuf>,
}

struct Ran {
    status: ExitStatus,
    elapsed: Duration,
    stdout: String,
    stderr: String,
    /// Where the fakes left their marker files.
    marks: tempfile::TempDir,
}

impl Ran {
    fn json(&self, what: &str) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "{what}: stdout is not JSON ({e}); {:?}; stderr: {}",
                self.status, self.stderr
            )
        })
    }

    fn marked(&self, prefix: &str) -> bool {
        std::fs::read_dir(self.marks.path())
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
            })
            .unwrap_or(false)
    }
}

/// One run of the real binary, started (not waited for).
struct Started {
    child: std::process::Child,
    t0: Instant,
    id: String,
    tmp: tempfile::TempDir,
    marks: tempfile::TempDir,
    _home: tempfile::TempDir,
    out: PathBuf,
    err: PathBuf,
}

fn start(f: &Fakes, faults: &Faults, args: &[&str]) -> Started {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let id = format!(
        "{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let tmp = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (out, err) = (marks.path().join("stdout"), marks.path().join("stderr"));

    let mut libs: Vec<&Path> = Vec::new();
    let mut path = String::new();
    // GPUAUDIT_FAULT_BIN runs the suite against another build (an older one, to see it fail).
    let bin = std::env::var_os("GPUAUDIT_FAULT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| assert_cmd::cargo::cargo_bin("gpuaudit"));
    let mut cmd = Command::new(bin);
    cmd.args(args).env_clear();
    if let Some(m) = faults.nvml {
        libs.push(&f.nvml);
        cmd.env("GPUAUDIT_FAULT_NVML", m);
    }
    if let Some(m) = faults.cuda {
        libs.push(&f.cuda);
        cmd.env("GPUAUDIT_FAULT_CUDA", m);
    }
    if let Some(m) = faults.smi {
        path.push_str(&format!("{}:", f.smi.display()));
        cmd.env("GPUAUDIT_FAULT_SMI", m);
    }
    if let Some(o) = &faults.smi_out {
        cmd.env("GPUAUDIT_FAULT_SMI_OUT", o);
    }
    if let Some(m) = faults.python {
        cmd.env("VIRTUAL_ENV", &f.venv)
            .env("GPUAUDIT_FAULT_PYTHON", m);
    }
    path.push_str("/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");
    if let Some(d) = &faults.more_libs {
        libs.push(d);
    }
    if !libs.is_empty() {
        cmd.env("LD_LIBRARY_PATH", std::env::join_paths(libs).unwrap());
    }
    cmd.env("PATH", path)
        .env("HOME", home.path())
        .env("TMPDIR", tmp.path())
        .env("NO_COLOR", "1")
        .env("GPUAUDIT_FAULT_DIR", marks.path())
        .env("GPUAUDIT_FAULT_RUN", &id)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0);
    // SAFETY: setrlimit is async-signal-safe; the struct lives on this stack frame.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: MEMORY_LIMIT,
                rlim_max: MEMORY_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Started {
        child: cmd.spawn().expect("gpuaudit starts"),
        t0: Instant::now(),
        id,
        tmp,
        marks,
        _home: home,
        out,
        err,
    }
}

/// The pids of the processes that carry this run's marker (the run and what it started).
fn processes_of(id: &str) -> Vec<(i32, String)> {
    let needle = format!("GPUAUDIT_FAULT_RUN={id}\0");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            let cmdline = std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            out.push((pid, cmdline));
        }
    }
    out
}

/// No process of the run is left (killed children take a moment to disappear); any that is
/// gets killed, and the test fails.
fn assert_nothing_running(id: &str, what: &str) {
    let t = Instant::now();
    let mut left = processes_of(id);
    while !left.is_empty() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_of(id);
    }
    for (pid, _) in &left {
        // SAFETY: processes this test started.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "{what}: processes left behind: {left:?}");
}

impl Started {
    /// Waits for the run (at most `bound`, else kills everything and fails), then checks
    /// that nothing of it is left.
    fn finish(mut self, what: &str, bound: Duration) -> Ran {
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if self.t0.elapsed() > bound {
                // SAFETY: the run's own process group.
                unsafe { libc::killpg(self.child.id() as i32, libc::SIGKILL) };
                for (pid, _) in processes_of(&self.id) {
                    // SAFETY: processes this test started.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                let _ = self.child.wait();
                panic!(
                    "{what}: still running after {bound:?}; stderr: {}",
                    std::fs::read_to_string(&self.err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let elapsed = self.t0.elapsed();
        let stdout = std::fs::read_to_string(&self.out).unwrap_or_default();
        let stderr = std::fs::read_to_string(&self.err).unwrap_or_default();
        assert_nothing_running(&self.id, what);
        let tmp_left: Vec<String> = std::fs::read_dir(self.tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(tmp_left.is_empty(), "{what}: left in TMPDIR: {tmp_left:?}");
        Ran {
            status,
            elapsed,
            stdout,
            stderr,
            marks: self.marks,
        }
    }
}

fn run(f: &Fakes, faults: &Faults, args: &[&str], bound: Duration) -> Ran {
    let what = format!("gpuaudit {}", args.join(" "));
    let r = start(f, faults, args).finish(&what, bound);
    assert!(
        matches!(r.status.code(), Some(0) | Some(1)),
        "{what}: {:?} after {:?}; stderr: {}",
        r.status,
        r.elapsed,
        r.stderr
    );
    r
}

/// The report of a run in which the fake `fake` was reached (its marker file is there),
/// checked for completeness.
fn report_after(r: &Ran, fake: &str, what: &str) -> Value {
    assert!(r.marked(fake), "{what}: the fake {fake} was never reached");
    let report = r.json(what);
    assert_complete(&report, what);
    report
}

/// Every check appears in the report (as skip where it could not run).
fn assert_complete(report: &Value, what: &str) {
    assert_eq!(report["schema"], "gpuaudit.report/1", "{what}");
    let seen: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["check"].as_str())
        .collect();
    for c in gpuaudit_core::checks::all() {
        assert!(seen.contains(&c.id), "{what}: no finding of {}", c.id);
    }
}

fn driver_query(report: &Value) -> String {
    let ev = &common::findings(report, "gpu.present")[0]["evidence"];
    ev["driver_query"]
        .as_str()
        .or(ev["driver_query_error"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Every number in a JSON tree.
fn numbers(v: &Value, out: &mut Vec<f64>) {
    match v {
        Value::Number(n) => out.push(n.as_f64().unwrap_or(f64::NAN)),
        Value::Array(a) => a.iter().for_each(|x| numbers(x, out)),
        Value::Object(o) => o.values().for_each(|x| numbers(x, out)),
        _ => {}
    }
}

/// The garbage the fakes answer never appears as a figure.
fn assert_no_garbage(v: &Value, what: &str) {
    let mut n = Vec::new();
    numbers(v, &mut n);
    for bad in [
        99.0,
        4294967295.0,
        4294967291.0,
        2147483647.0,
        4294967.295,
        18446744073709551615.0,
        17592186044415.0, // u64::MAX bytes in MiB
    ] {
        assert!(!n.contains(&bad), "{what}: {bad} reported as a fact");
    }
}

const FACTS_ONLY: &[&str] = &["--facts-only", "--format", "json"];
const AUDIT: &[&str] = &["--format", "json"];
const BENCH: &[&str] = &["bench", "--format", "json"];

/// A fake libnvidia-ml misbehaving in nvmlInit: --facts-only, the plain audit and collect
/// finish, complete, with the reason in the report, and bench says why it could not run (`None`: NVML still answers, as it
/// does after forking or flooding); nothing is left behind.
fn nvml_fault(mode: &'static str, reason: Option<&str>, bound: Duration) {
    let f = fakes_or_skip!();
    let faults = Faults {
        nvml: Some(mode),
        ..Faults::default()
    };
    let snap_dir = tempfile::tempdir().unwrap();
    let snap = snap_dir.path().join("snap");
    let snap_s = snap.display().to_string();
    std::thread::scope(|s| {
        let facts = s.spawn(|| run(f, &faults, FACTS_ONLY, bound));
        let audit = s.spawn(|| run(f, &faults, AUDIT, bound));
        let bench = s.spawn(|| start(f, &faults, BENCH).finish("gpuaudit bench", bound));
        let collect = s.spawn(|| run(f, &faults, &["collect", "--out", &snap_s], bound));
        for (name, h) in [("--facts-only", facts), ("audit", audit)] {
            let what = format!("{mode} {name}");
            let report = report_after(&h.join().unwrap(), "nvmlInit", &what);
            let q = driver_query(&report);
            match reason {
                None => assert_eq!(q, "nvml", "{mode} {name}: NVML answered"),
                Some(why) => assert!(
                    q.contains(why),
                    "{mode} {name}: driver query '{q}' lacks '{why}'"
                ),
            }
        }
        // The fake NVML is the only NVIDIA library here: bench cannot run, and says why in
        // one line (no GPU where NVML failed, no libcuda where it answered).
        let r = bench.join().unwrap();
        assert_eq!(r.status.code(), Some(2), "{mode} bench: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{mode} bench: {}", r.stderr);
        match reason {
            Some(why) => assert!(
                r.stderr
                    .contains("bench: could not run: no NVIDIA GPU found")
                    && r.stderr.contains(why),
                "{mode} bench: {}",
                r.stderr
            ),
            None => assert!(
                r.stderr
                    .contains("bench: could not run: the CUDA driver library is missing"),
                "{mode} bench: {}",
                r.stderr
            ),
        }
        let r = collect.join().unwrap();
        assert!(r.status.success(), "collect: {}", r.stderr);
    });
    // The snapshot says why the driver did not answer, and audits complete.
    let err = std::fs::read_to_string(snap.join("cmd/driver-error.txt")).unwrap_or_default();
    if let Some(why) = reason {
        assert!(err.contains(why), "{mode}: driver-error.txt: {err}");
    }
    let out = common::gpuaudit()
        .args(["--format", "json", "--root"])
        .arg(&snap)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_complete(&report, "audit of the collected snapshot");
}

#[test]
fn nvml_hanging_in_init_costs_a_reason() {
    nvml_fault(
        "hang",
        Some("did not answer within 15 s"),
        Duration::from_secs(60),
    );
}

#[test]
fn nvml_segfaulting_costs_a_reason() {
    nvml_fault("segv", Some("SIGSEGV"), Duration::from_secs(30));
}

#[test]
fn nvml_aborting_costs_a_reason() {
    nvml_fault("abort", Some("SIGABRT"), Duration::from_secs(30));
}

#[test]
fn nvml_forking_a_pipe_holder_does_not_hang() {
    // nvmlInit forks a child that keeps stdout and stderr open, then answers.
    nvml_fault("fork", None, Duration::from_secs(30));
}

#[test]
fn nvml_flooding_its_output_is_drained_not_buffered() {
    // 300 MB on stdout and on stderr before the answer: drained, and the answer kept.
    nvml_fault("flood", None, Duration::from_secs(60));
}

#[test]
fn nvml_garbage_is_not_reported_as_facts() {
    let f = fakes_or_skip!();
    let faults = Faults {
        nvml: Some("garbage"),
        ..Faults::default()
    };
    let r = run(f, &faults, FACTS_ONLY, Duration::from_secs(30));
    let report = r.json("garbage");
    assert_complete(&report, "garbage");
    assert_eq!(driver_query(&report), "nvml");
    let g = &report["gpus"][0];
    for (field, v) in [
        ("pcie.gen_current", &g["pcie"]["gen_current"]),
        ("pcie.gen_max", &g["pcie"]["gen_max"]),
        ("pcie.width_current", &g["pcie"]["width_current"]),
        ("power.limit_w", &g["power"]["limit_w"]),
        ("power.draw_w", &g["power"]["draw_w"]),
        ("memory_total_mib", &g["memory_total_mib"]),
        ("sm_clock_max_mhz", &g["sm_clock_max_mhz"]),
    ] {
        assert!(v.is_null(), "{field}: {v} reported");
    }
    // NVML's 4294967291.2147483647 is dropped; the datasheet's value for the model stands in.
    assert_eq!(g["compute_capability"], "9.0");
    assert_no_garbage(&report["gpus"], "garbage gpus");
    for f in report["findings"].as_array().unwrap() {
        assert_no_garbage(&f["evidence"], &format!("garbage in {}", f["check"]));
    }
    for check in ["pcie.link", "power.limit", "memory.errors"] {
        let m: Vec<&str> = common::findings(&report, check)
            .iter()
            .filter_map(|f| f["message"].as_str())
            .collect();
        assert!(
            m.iter().any(|m| m.contains("implausible value from NVML")),
            "{check} should say the value was implausible: {m:?}"
        );
    }
    let link = common::findings(&report, "pcie.link");
    assert!(
        link.iter().all(|x| x["status"] != "pass"),
        "a link of garbage must not pass: {link:?}"
    );
}

#[test]
fn nvml_claiming_four_billion_gpus_allocates_nothing() {
    let f = fakes_or_skip!();
    let faults = Faults {
        nvml: Some("huge-count"),
        ..Faults::default()
    };
    let r = run(f, &faults, FACTS_ONLY, Duration::from_secs(30));
    let report = r.json("huge-count");
    assert_complete(&report, "huge-count");
    let q = driver_query(&report);
    assert!(
        q.contains("implausible value from NVML: GPU count 4294967295"),
        "{q}"
    );
}

/// NVML answers for one GPU; libcuda misbehaves in cuInit: the context probes and the
/// measurement child cost a finding each, the audit and bench finish.
fn cuda_fault(mode: &'static str, reason: &str) {
    let f = fakes_or_skip!();
    let faults = Faults {
        nvml: Some("good"),
        cuda: Some(mode),
        ..Faults::default()
    };
    let bound = Duration::from_secs(90);
    std::thread::scope(|s| {
        let audit = s.spawn(|| run(f, &faults, AUDIT, bound));
        let bench = s.spawn(|| {
            run(
                f,
                &faults,
                &["bench", "context", "pcie", "--format", "json"],
                bound,
            )
        });
        let report = report_after(&audit.join().unwrap(), "cuInit", mode);
        let ctx = &common::findings(&report, "cuda.context-latency")[0];
        assert_ne!(ctx["status"], "pass");
        let msg = ctx["message"].as_str().unwrap_or_default();
        assert!(msg.contains(reason), "{mode}: context latency: {msg}");
        let r = bench.join().unwrap();
        let b = r.json("bench");
        assert_eq!(b["schema"], "gpuaudit.bench/1");
        let pcie = b["measured"]["pcie"]["unavailable"]
            .as_str()
            .unwrap_or_default();
        assert!(pcie.contains(reason), "{mode}: bench pcie: {pcie}");
    });
}

#[test]
fn libcuda_segfaulting_in_cuinit_costs_a_finding() {
    cuda_fault("segv", "SIGSEGV");
}

#[test]
fn libcuda_aborting_in_cuinit_costs_a_finding() {
    cuda_fault("abort", "SIGABRT");
}

#[test]
fn libcuda_forking_a_pipe_holder_does_not_hang() {
    cuda_fault("fork", "no CUDA-capable device");
}

#[test]
fn libcuda_flooding_stderr_is_drained_not_buffered() {
    cuda_fault("flood", "no CUDA-capable device");
}

/// NVML fails at once; nvidia-smi misbehaves: the facts still come, complete.
fn smi_fault(mode: &'static str, smi_out: Option<PathBuf>, bound: Duration) -> Value {
    let f = fakes().expect("checked by the caller");
    let faults = Faults {
        nvml: Some("abort"),
        smi: Some(mode),
        smi_out,
        ..Faults::default()
    };
    report_after(&run(f, &faults, FACTS_ONLY, bound), "nvidia-smi", mode)
}

#[test]
fn nvidia_smi_hanging_forking_or_flooding_costs_a_reason() {
    let _ = fakes_or_skip!();
    std::thread::scope(|s| {
        let hang = s.spawn(|| smi_fault("hang", None, Duration::from_secs(60)));
        let fork = s.spawn(|| smi_fault("fork", None, Duration::from_secs(30)));
        let flood = s.spawn(|| smi_fault("flood", None, Duration::from_secs(60)));
        let q = driver_query(&hang.join().unwrap());
        assert!(q.contains("nvidia-smi: timed out after 15 s"), "{q}");
        let q = driver_query(&fork.join().unwrap());
        assert!(
            q.contains("couldn't communicate with the NVIDIA driver"),
            "{q}"
        );
        let q = driver_query(&flood.join().unwrap());
        assert!(q.contains("nvidia-smi: printed more than 16 MiB"), "{q}");
    });
}

#[test]
fn nvidia_smi_garbage_is_not_reported_as_facts() {
    let _ = fakes_or_skip!();
    let xml = std::fs::read_to_string(common::fixture("h200-x2-vm").join("cmd/nvidia-smi-q.xml"))
        .unwrap()
        .replace(
            "<current_link_gen>5</current_link_gen>",
            "<current_link_gen>99</current_link_gen>",
        )
        .replace(
            "<current_link_width>16x</current_link_width>",
            "<current_link_width>4294967295x</current_link_width>",
        );
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("q.xml");
    std::fs::write(&p, xml).unwrap();
    let report = smi_fault("good", Some(p), Duration::from_secs(30));
    let q = driver_query(&report);
    assert!(q.starts_with("nvidia-smi (NVML failed"), "{q}");
    for g in report["gpus"].as_array().unwrap() {
        assert!(g["pcie"]["gen_current"].is_null(), "{g}");
        assert!(g["pcie"]["width_current"].is_null(), "{g}");
    }
    for f in common::findings(&report, "pcie.link") {
        assert_no_garbage(&f["evidence"], "pcie.link evidence");
    }
    assert_no_garbage(&report["gpus"], "nvidia-smi garbage");
}

/// The interpreter of a virtualenv with torch misbehaves when asked about it.
fn python_fault(mode: &'static str, bound: Duration) -> Value {
    let f = fakes().expect("checked by the caller");
    let faults = Faults {
        python: Some(mode),
        ..Faults::default()
    };
    report_after(&run(f, &faults, AUDIT, bound), "python3", mode)
}

#[test]
fn python_hanging_forking_or_flooding_costs_a_reason() {
    let _ = fakes_or_skip!();
    // The cuda.framework findings about the fake virtualenv's torch.
    let venv_findings = |report: &Value| -> Vec<Value> {
        let site = fakes()
            .unwrap()
            .venv
            .join("lib/python3.12/site-packages")
            .display()
            .to_string();
        let v: Vec<Value> = common::findings(report, "cuda.framework")
            .into_iter()
            .filter(|f| f["evidence"]["site_packages"] == site.as_str())
            .cloned()
            .collect();
        assert!(
            !v.is_empty(),
            "the fake venv was not judged: {}",
            report["findings"]
        );
        v
    };
    std::thread::scope(|s| {
        let hang = s.spawn(|| python_fault("hang", Duration::from_secs(75)));
        let fork = s.spawn(|| python_fault("fork", Duration::from_secs(30)));
        let flood = s.spawn(|| python_fault("flood", Duration::from_secs(60)));
        let f = venv_findings(&hang.join().unwrap());
        assert!(
            f.iter().any(|x| x["message"]
                .as_str()
                .unwrap_or_default()
                .contains("timed out after 30 s")),
            "{f:?}"
        );
        let f = venv_findings(&fork.join().unwrap());
        assert!(
            f.iter().all(|x| x["evidence"]["source"] == "interpreter"),
            "the forking interpreter still answered: {f:?}"
        );
        let f = venv_findings(&flood.join().unwrap());
        assert!(
            f.iter().any(|x| x["evidence"]["source"] == "files"),
            "a flood is no answer: {f:?}"
        );
    });
}

/// A signal while a child hangs: gpuaudit ends at once, as the signal would end it, and
/// takes its children and temporary files with it.
fn interrupted(faults: Faults, args: &[&str], inside: &str, sig: i32) {
    let f = fakes().expect("checked by the caller");
    let what = format!("gpuaudit {} with signal {sig}", args.join(" "));
    let s = start(f, &faults, args);
    let t0 = Instant::now();
    while !std::fs::read_dir(s.marks.path())
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(inside))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what}: never reached {inside}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: the run this test started.
    unsafe { libc::kill(s.child.id() as i32, sig) };
    let sent = Instant::now();
    let r = s.finish(&what, t0.elapsed() + Duration::from_secs(10));
    let took = sent.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "{what}: took {took:?} to end"
    );
    assert!(
        r.status.signal() == Some(sig) || r.status.code() == Some(128 + sig),
        "{what}: ended with {:?}",
        r.status
    );
}

#[test]
fn signals_during_a_hung_context_probe_leave_nothing_behind() {
    let _ = fakes_or_skip!();
    let faults = Faults {
        nvml: Some("good"),
        cuda: Some("hang"),
        ..Faults::default()
    };
    std::thread::scope(|s| {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            let faults = faults.clone();
            s.spawn(move || interrupted(faults, AUDIT, "cuInit", sig));
        }
    });
}

#[test]
fn a_signal_during_a_hung_nvml_leaves_nothing_behind() {
    let _ = fakes_or_skip!();
    let faults = Faults {
        nvml: Some("hang"),
        ..Faults::default()
    };
    interrupted(faults, FACTS_ONLY, "nvmlInit", libc::SIGINT);
}

#[test]
fn the_library_links_exist_while_the_probe_runs() {
    // The signal tests above prove the links are removed; this proves there were links.
    let f = fakes_or_skip!();
    let faults = Faults {
        nvml: Some("good"),
        cuda: Some("hang"),
        ..Faults::default()
    };
    let s = start(f, &faults, AUDIT);
    let t0 = Instant::now();
    let links = loop {
        let found: Vec<String> = std::fs::read_dir(s.tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("gpuaudit-libs-"))
            .collect();
        let probing = std::fs::read_dir(s.marks.path())
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("cuInit"));
        if probing || t0.elapsed() > Duration::from_secs(60) {
            break found;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: the run this test started.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGINT) };
    let _ = s.finish(
        "audit with a hung probe",
        t0.elapsed() + Duration::from_secs(10),
    );
    assert_eq!(links.len(), 1, "{links:?}");
}

#[test]
fn children_die_with_a_killed_audit() {
    // SIGKILL cannot be caught: the children end through PR_SET_PDEATHSIG, not the signal
    // handler. (Temporary files cannot be removed then; that is the one thing left.)
    let f = fakes_or_skip!();
    let faults = Faults {
        nvml: Some("good"),
        cuda: Some("hang"),
        ..Faults::default()
    };
    let mut s = start(f, &faults, AUDIT);
    let t0 = Instant::now();
    while !std::fs::read_dir(s.marks.path())
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("cuInit"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never reached cuInit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        processes_of(&s.id).len() >= 2,
        "the probe runs beside the audit"
    );
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    assert_nothing_running(&s.id, "audit killed with SIGKILL");
}

/// A small rehearsal that runs long enough to be interrupted in any stage.
const REHEARSE: &[&str] = &[
    "rehearse",
    "--seconds",
    "60",
    "--dataset-mb",
    "4",
    "--batch",
    "4",
    "--sample-kb",
    "16",
    "--tensor-kb",
    "16",
    "--readers",
    "1",
    "--workers",
    "1",
    "--format",
    "json",
];

/// Interrupts a rehearsal once `ready` says so, and checks that it ends as the signal would
/// end it, with no process left and its dataset removed (`finish` checks both).
fn interrupt_rehearsal(faults: Faults, sig: i32, ready: impl Fn(&Started) -> bool) {
    let f = fakes().expect("checked by the caller");
    let what = format!("gpuaudit rehearse with signal {sig}");
    let s = start(f, &faults, REHEARSE);
    let t0 = Instant::now();
    while !ready(&s) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what}: never got there; stderr: {}",
            std::fs::read_to_string(&s.err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: the run this test started.
    unsafe { libc::kill(s.child.id() as i32, sig) };
    let sent = Instant::now();
    let r = s.finish(&what, t0.elapsed() + Duration::from_secs(10));
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{what}: took {:?}",
        sent.elapsed()
    );
    assert!(
        r.status.signal() == Some(sig) || r.status.code() == Some(128 + sig),
        "{what}: ended with {:?}; stderr: {}",
        r.status,
        r.stderr
    );
}

fn dataset_written(s: &Started) -> bool {
    std::fs::read_dir(s.tmp.path())
        .map(|rd| {
            rd.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("gpuaudit-rehearse-")
                    && std::fs::read_dir(e.path()).is_ok_and(|d| d.count() >= 256)
            })
        })
        .unwrap_or(false)
}

#[test]
fn a_signal_during_the_cpu_stages_of_a_rehearsal_removes_its_dataset() {
    let _ = fakes_or_skip!();
    std::thread::scope(|s| {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            s.spawn(move || interrupt_rehearsal(Faults::default(), sig, dataset_written));
        }
    });
}

#[test]
fn a_signal_while_the_rehearsal_child_hangs_leaves_nothing_behind() {
    let _ = fakes_or_skip!();
    // A GPU (the fake NVML), a cuBLAS pair to plan the model with (empty files: the child
    // never gets past its hung cuInit to load them), and a libcuda whose cuInit hangs.
    let libs = tempfile::tempdir().unwrap();
    for name in ["libcublas.so.12", "libcublasLt.so.12"] {
        std::fs::write(libs.path().join(name), b"").unwrap();
    }
    let faults = Faults {
        nvml: Some("good"),
        cuda: Some("hang"),
        more_libs: Some(libs.path().to_path_buf()),
        ..Faults::default()
    };
    interrupt_rehearsal(faults, libc::SIGTERM, |s| {
        std::fs::read_dir(s.marks.path())
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("cuInit"))
            })
            .unwrap_or(false)
    });
}
