//! Report files built to break the readers and the views (`gpuaudit report`, `compare`,
//! `fleet`): a figure of 1.7e308, 100,000 findings, a fleet of one hostname, texts of
//! megabytes, a FIFO where a report should be, nesting without end, `COLUMNS` of 2^64 - 1.
//! Each is made at test time in a temporary directory and given to the real binary under a
//! deadline and a memory limit: it must end, with the exit status and the one line the
//! limit it met says (docs/DESIGN.md, "Bounds on what is read"), and write output of a
//! bounded size. Sizes prove the bound and the linear time, not speed: nothing is timed
//! but the deadline, which only a hang or a quadratic step reaches.

mod common;

use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Long enough for a debug build on a busy machine; a blocked open() never ends.
const DEADLINE: Duration = Duration::from_secs(20);
/// Address space for one run (one malloc arena): a 100,000-finding report rendered takes
/// a few hundred MB; 1.2 GB for a hostname of 60 MiB, or 1.4 GB for a fleet of one
/// hostname, is past it.
const MEMORY_LIMIT: u64 = 1 << 30;

struct Run {
    code: Option<i32>,
    /// Bytes written to stdout.
    out_len: u64,
    /// The first MiB of stdout.
    stdout: String,
    stderr: String,
}

/// gpuaudit with `args` (and `env`), stdout and stderr to files: killed, and the test failed,
/// past [`DEADLINE`].
fn run(args: &[&std::ffi::OsStr], env: &[(&str, &str)]) -> Run {
    let out_dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (out_dir.path().join("out"), out_dir.path().join("err"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpuaudit"));
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env("MALLOC_ARENA_MAX", "1")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    common::limit_address_space(&mut cmd, MEMORY_LIMIT);
    let mut child = cmd.spawn().expect("gpuaudit starts");
    let Some(status) = common::wait_within(&mut child, DEADLINE) else {
        panic!("gpuaudit {args:?} did not end within {DEADLINE:?}");
    };
    let out_len = fs::metadata(&out_path).unwrap().len();
    let mut head = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(fs::File::open(&out_path).unwrap(), 1 << 20),
        &mut head,
    )
    .unwrap();
    Run {
        code: status.code(),
        out_len,
        stdout: String::from_utf8_lossy(&head).into_owned(),
        stderr: fs::read_to_string(&err_path).unwrap(),
    }
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

/// A full report of a real machine (an H200 VM), to change.
fn real_report() -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/reports/h200-x1-vm-full.json");
    serde_json::from_str(&fs::read_to_string(p).unwrap()).unwrap()
}

/// `v` written to `dir/name`, with `"@FINDINGS@"` (where `findings` is) replaced by `n`
/// findings written as text (faster than a tree of them).
fn write_with_findings(dir: &Path, name: &str, mut v: Value, n: usize) -> PathBuf {
    v["findings"] = Value::String("@FINDINGS@".into());
    let text = serde_json::to_string(&v).unwrap();
    let mut list = String::with_capacity(n * 110 + 2);
    list.push('[');
    for i in 0..n {
        if i > 0 {
            list.push(',');
        }
        let status = ["fail", "warn", "skip", "pass", "info"][i % 5];
        // A third of the checks distinct, the rest in seven groups per GPU.
        let check = if i % 3 == 0 {
            format!("gpu.c{i}")
        } else {
            format!("gpu.x{}", i % 7)
        };
        list.push_str(&format!(
            r#"{{"check":"{check}","status":"{status}","gpu":{},"message":"message {i}","evidence":{{}},"fix":null}}"#,
            i % 8
        ));
    }
    list.push(']');
    let p = dir.join(name);
    fs::write(&p, text.replacen("\"@FINDINGS@\"", &list, 1)).unwrap();
    p
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, serde_json::to_string(v).unwrap()).unwrap();
    p
}

/// The one line of a refusal: exit 2, one line on stderr holding `want`, nothing on stdout.
fn refused(r: &Run, want: &str) {
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.starts_with("gpuaudit: ") && r.stderr.contains(want),
        "{}",
        r.stderr
    );
    assert_eq!(r.out_len, 0);
}

#[test]
fn a_figure_of_1_7e308_is_drawn_without_its_bar() {
    let d = tempfile::tempdir().unwrap();
    let mut v = real_report();
    for m in v["measurements"].as_array_mut().unwrap() {
        m["value"] = 1.7e308.into();
        if !m["ratio"].is_null() {
            m["ratio"] = 1.7e308.into();
        }
    }
    let huge = write(d.path(), "huge.json", &v);
    let plain = write(d.path(), "plain.json", &real_report());
    let r = run(
        &[os("report"), huge.as_os_str(), os("--format"), os("html")],
        &[],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("(not drawn: out of range)"), "no note");
    assert!(r.out_len < 4 << 20, "{} bytes", r.out_len);
    for args in [
        [huge.as_os_str(), plain.as_os_str()],
        [plain.as_os_str(), huge.as_os_str()],
    ] {
        let mut a = vec![os("compare")];
        a.extend(args);
        a.extend([os("--format"), os("html")]);
        let r = run(&a, &[]);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert!(r.stdout.contains("<svg"));
    }
}

#[test]
fn a_hundred_thousand_findings_are_rendered_and_one_more_refused() {
    let d = tempfile::tempdir().unwrap();
    let n = 100_000;
    let a = write_with_findings(d.path(), "a.json", real_report(), n);
    let r = run(&[os("report"), a.as_os_str()], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.out_len > 0 && r.out_len < 100 << 20, "{}", r.out_len);
    let b = write_with_findings(d.path(), "b.json", real_report(), n);
    let r = run(&[os("compare"), a.as_os_str(), b.as_os_str()], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let over = write_with_findings(d.path(), "over.json", real_report(), n + 1);
    let r = run(&[os("report"), over.as_os_str()], &[]);
    refused(
        &r,
        "over.json: more findings (100,001) than the 100,000 a report may hold",
    );
    let r = run(&[os("compare"), a.as_os_str(), over.as_os_str()], &[]);
    refused(&r, "over.json: more findings (100,001)");
}

#[test]
fn more_gpus_than_a_report_may_list_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut v = real_report();
    let g = v["gpus"][0].clone();
    v["gpus"] = Value::Array(vec![g; 1025]);
    let p = write(d.path(), "gpus.json", &v);
    let r = run(&[os("report"), p.as_os_str()], &[]);
    refused(
        &r,
        "gpus.json: more GPUs (1,025) than the 1,024 a report may hold",
    );
}

/// A fleet of one file per node, each a report without findings or measurements.
fn fleet_of(dir: &Path, n: usize, host: &str) {
    let mut v = real_report();
    v["findings"] = Value::Array(vec![]);
    v["measurements"] = Value::Array(vec![]);
    v["series"] = serde_json::json!({"host_copy": [], "burn": []});
    v["machine"]["hostname"] = host.into();
    let text = serde_json::to_string(&v).unwrap();
    for i in 0..n {
        fs::write(dir.join(format!("node{i:05}.json")), &text).unwrap();
    }
}

#[test]
fn a_fleet_of_one_hostname_names_a_few_twins_per_node() {
    let d = tempfile::tempdir().unwrap();
    let n = 3_000;
    fleet_of(d.path(), n, "host-1");
    for format in ["table", "md", "json"] {
        let r = run(
            &[
                os("fleet"),
                d.path().as_os_str(),
                os("--format"),
                os(format),
            ],
            &[],
        );
        assert!(matches!(r.code, Some(0 | 1)), "{format}: {}", r.stderr);
        // A few hundred bytes a node, not a list of every other file at each.
        assert!(
            r.out_len < (n as u64) * 600,
            "{format}: {} bytes for {n} nodes",
            r.out_len
        );
        if format != "json" {
            assert!(
                r.stdout.contains("and 2,996 more"),
                "{format}: {}",
                &r.stdout[..r.stdout.len().min(2000)]
            );
        }
    }
}

#[test]
fn a_fleet_directory_holds_at_most_its_bound_of_files() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..=100_000 {
        fs::File::create(d.path().join(format!("{i}.json"))).unwrap();
    }
    let r = run(&[os("fleet"), d.path().as_os_str()], &[]);
    refused(&r, "more report files than the 100,000 a fleet may read");
}

#[test]
fn texts_of_megabytes_are_cut_at_read() {
    let d = tempfile::tempdir().unwrap();
    // As the issue had them: a message of 60 MiB in the table (it aborted), a hostname of
    // 60 MiB in the page (1.2 GB resident, 440 MB of HTML).
    let mut v = real_report();
    v["findings"][0]["message"] = "m".repeat(60 << 20).into();
    let message = write(d.path(), "message.json", &v);
    let mut v = real_report();
    v["machine"]["hostname"] = "h".repeat(60 << 20).into();
    let host = write(d.path(), "host.json", &v);
    for (p, format) in [(&message, "table"), (&host, "html")] {
        let r = run(
            &[os("report"), p.as_os_str(), os("--format"), os(format)],
            &[],
        );
        assert_eq!(r.code, Some(0), "{format}: {}", r.stderr);
        assert!(r.out_len < 2 << 20, "{format}: {} bytes", r.out_len);
    }
    // Every view and compare, on a smaller one: the marker stands where the text was cut.
    let mut v = real_report();
    v["machine"]["hostname"] = "h".repeat(1 << 20).into();
    v["findings"][0]["message"] = "m".repeat(1 << 20).into();
    let p = write(d.path(), "long.json", &v);
    for format in ["md", "html", "json"] {
        let r = run(
            &[os("report"), p.as_os_str(), os("--format"), os(format)],
            &[],
        );
        assert_eq!(r.code, Some(0), "{format}: {}", r.stderr);
        assert!(r.out_len < 2 << 20, "{format}: {} bytes", r.out_len);
        assert!(
            r.stdout.contains("… (983040 bytes cut)"),
            "{format}: no marker"
        );
    }
    let r = run(&[os("compare"), p.as_os_str(), host.as_os_str()], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.out_len < 2 << 20, "compare: {} bytes", r.out_len);
}

#[test]
fn a_file_past_64_mib_is_refused_without_reading_it_all() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("big.json");
    // Sparse: no 64 MiB written.
    fs::File::create(&p)
        .unwrap()
        .set_len((64 << 20) + 1)
        .unwrap();
    let r = run(&[os("report"), p.as_os_str()], &[]);
    refused(&r, "big.json: larger than the 64 MiB a report may be");
    let r = run(&[os("compare"), p.as_os_str(), p.as_os_str()], &[]);
    refused(&r, "big.json: larger than the 64 MiB a report may be");
}

#[test]
fn nesting_without_end_is_refused_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let deep = format!(
        "{{\"schema\": \"gpuaudit.report/1\", \"tool\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let p = d.path().join("deep.json");
    fs::write(&p, deep).unwrap();
    let r = run(&[os("report"), p.as_os_str()], &[]);
    refused(
        &r,
        "deep.json: nested deeper than the 64 levels a report may be",
    );
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success());
}

#[test]
fn a_fifo_is_no_report_alone_or_in_a_fleet() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo.json");
    mkfifo(&fifo);
    let r = run(&[os("report"), fifo.as_os_str()], &[]);
    refused(
        &r,
        "fifo.json: not a report file (a FIFO: gpuaudit reads regular files only)",
    );
    let plain = write(d.path(), "plain.json", &real_report());
    let r = run(&[os("compare"), plain.as_os_str(), fifo.as_os_str()], &[]);
    refused(&r, "fifo.json: not a report file (a FIFO");
    // In a fleet's directory: a node not read, the others read.
    let r = run(
        &[
            os("fleet"),
            d.path().as_os_str(),
            os("--format"),
            os("json"),
        ],
        &[],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let f: Value = serde_json::from_str(&r.stdout).unwrap();
    let nodes = f["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    let not_read: Vec<&str> = nodes
        .iter()
        .filter_map(|n| n["not_read"].as_str())
        .collect();
    assert_eq!(
        not_read,
        ["not a report file (a FIFO: gpuaudit reads regular files only)"]
    );
    // A directory, and a device, named as a report.
    let r = run(&[os("report"), d.path().as_os_str()], &[]);
    refused(&r, "not a report file (a directory");
    let r = run(&[os("report"), os("/dev/zero")], &[]);
    refused(&r, "/dev/zero: not a report file (a device");
}

#[test]
fn columns_past_any_terminal_are_held_to_500() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.json", &real_report());
    let mut v = real_report();
    v["machine"]["hostname"] = "other".into();
    let b = write(d.path(), "b.json", &v);
    let mut widths = Vec::new();
    for columns in ["18446744073709551615", "10000000", "500"] {
        let r = run(
            &[os("compare"), a.as_os_str(), b.as_os_str()],
            &[("COLUMNS", columns)],
        );
        assert_eq!(r.code, Some(0), "{columns}: {}", r.stderr);
        assert!(r.out_len < 1 << 20, "{columns}: {} bytes", r.out_len);
        widths.push(r.stdout);
        let r = run(&[os("report"), a.as_os_str()], &[("COLUMNS", columns)]);
        assert_eq!(r.code, Some(0), "{columns}: {}", r.stderr);
        assert!(r.out_len < 1 << 20, "{columns}: {} bytes", r.out_len);
    }
    assert_eq!(widths[0], widths[2]);
    assert_eq!(widths[1], widths[2]);
}
