//! Characterization of the measurement plan: what `measure::plan::plan` returns over a matrix
//! of machines (0 to 16 GPUs, mixed models, busy, MIG), modes (quick, full, bench of all and
//! of each group alone, burn, rehearsal), libraries missing and every option, pinned in
//! `tests/plans.jsonl` (one case a line: the plan as the child reads it, the child processes
//! it starts, and the time the progress bar expects).
//!
//! It was written before the plan was split into one module per group, and held unchanged
//! through it: a difference here is a change in what is measured, never a refactor. When a
//! change is meant, `GPUAUDIT_UPDATE_PLANS=1 cargo test -p gpuaudit-probe --test plan_matrix`
//! rewrites the file, and its diff shows every plan that changed.
//!
//! Options are built from their JSON (the default's, with fields replaced) so that the test
//! names no type of the plan but `Options`, `Target` and `LibStatus`.

use gpuaudit_core::facts::ComputeCapability;
use gpuaudit_probe::measure::plan::{plan, LibStatus, Options, Target};
use gpuaudit_probe::rehearse::loader::LoaderConfig;
use serde_json::{json, Value};
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/plans.jsonl")
}

fn gpu(index: u32, name: Option<&str>, cc: Option<(u32, u32)>) -> Target {
    Target {
        index,
        pci_bus_id: format!("0000:{:02x}:00.0", 0x18 + index),
        name: name.map(str::to_string),
        compute_capability: cc.map(|(major, minor)| ComputeCapability { major, minor }),
        busy: None,
        mig: false,
    }
}

fn h200(i: u32) -> Target {
    gpu(i, Some("NVIDIA H200"), Some((9, 0)))
}

fn a100(i: u32) -> Target {
    gpu(i, Some("NVIDIA A100-SXM4-80GB"), Some((8, 0)))
}

fn v100(i: u32) -> Target {
    gpu(i, Some("Tesla V100-SXM2-16GB"), Some((7, 0)))
}

/// A GPU whose compute capability nothing gave (nvidia-smi without it, no datasheet entry).
fn unknown(i: u32) -> Target {
    gpu(i, None, None)
}

fn busy(mut t: Target) -> Target {
    t.busy = Some("2 processes running on it".into());
    t
}

fn mig(mut t: Target) -> Target {
    t.mig = true;
    t
}

fn h200s(n: u32) -> Vec<Target> {
    (0..n).map(h200).collect()
}

/// The machines: (name, GPUs as the driver enumerates them).
fn machines() -> Vec<(&'static str, Vec<Target>)> {
    vec![
        ("no GPU", vec![]),
        ("1 H200", h200s(1)),
        ("2 H200", h200s(2)),
        ("4 H200", h200s(4)),
        ("8 H200", h200s(8)),
        ("16 H200", h200s(16)),
        ("2 V100", vec![v100(0), v100(1)]),
        ("1 unknown", vec![unknown(0)]),
        ("H200 + V100", vec![h200(0), v100(1)]),
        (
            "H200, A100, V100, unknown",
            vec![h200(0), a100(1), v100(2), unknown(3)],
        ),
        ("H200 + busy H200", vec![h200(0), busy(h200(1))]),
        ("busy H200", vec![busy(h200(0))]),
        ("MIG H200 + H200", vec![mig(h200(0)), h200(1)]),
        (
            "8 H200, 2 busy, 1 MIG",
            (0..8)
                .map(|i| match i {
                    2 | 5 => busy(h200(i)),
                    7 => mig(h200(i)),
                    _ => h200(i),
                })
                .collect(),
        ),
    ]
}

/// The machines crossed with every library set (the others with all libraries found).
const LIB_MACHINES: [&str; 5] = [
    "1 H200",
    "2 H200",
    "8 H200",
    "H200, A100, V100, unknown",
    "2 V100",
];

fn libraries() -> Vec<(&'static str, LibStatus)> {
    let missing = |l: &str| {
        Some(format!(
            "lib{l} not found (looked in /usr/lib/x86_64-linux-gnu)"
        ))
    };
    vec![
        ("all libraries", LibStatus::all_found()),
        (
            "no libcuda",
            LibStatus {
                cuda: Some("libcuda.so.1 not found".into()),
                ..LibStatus::default()
            },
        ),
        (
            "no cuBLAS",
            LibStatus {
                cublas: missing("cublas"),
                ..LibStatus::default()
            },
        ),
        (
            "no cuBLASLt",
            LibStatus {
                cublaslt: missing("cublasLt"),
                ..LibStatus::default()
            },
        ),
        (
            "no GEMM library",
            LibStatus {
                cublas: missing("cublas"),
                cublaslt: missing("cublasLt"),
                ..LibStatus::default()
            },
        ),
        (
            "no NCCL",
            LibStatus {
                nccl: missing("nccl"),
                ..LibStatus::default()
            },
        ),
        (
            "libcuda alone",
            LibStatus {
                cublas: missing("cublas"),
                cublaslt: missing("cublasLt"),
                nccl: missing("nccl"),
                ..LibStatus::default()
            },
        ),
    ]
}

/// `base` with the fields of `with` replaced, through their JSON.
fn tweak(base: &Options, with: Value) -> Options {
    let mut v = serde_json::to_value(base).expect("Options serialise");
    let (Some(o), Some(w)) = (v.as_object_mut(), with.as_object()) else {
        panic!("Options and the tweak are JSON objects");
    };
    for (k, x) in w {
        assert!(o.contains_key(k), "Options has no field {k}");
        o.insert(k.clone(), x.clone());
    }
    serde_json::from_value(v).expect("tweaked Options parse")
}

fn rehearsal(batch: u32) -> Options {
    let o = gpuaudit_probe::rehearse::Options {
        batch,
        ..gpuaudit_probe::rehearse::Options::defaults(16)
    };
    let loader = LoaderConfig {
        sample_bytes: o.sample_bytes,
        tensor_bytes: o.tensor_bytes,
        batch,
        readers: 4,
        workers: 14,
        transform_cost: 4,
        read_throttle_bytes_per_s: None,
        drop_cache: false,
    };
    Options::rehearse(o.request(loader, vec!["/tmp/d/sample-00000.bin".into()]))
}

/// The modes every machine is planned in.
fn modes() -> Vec<(&'static str, Options)> {
    let quick = Options::default();
    let full = tweak(&quick, json!({"full": true}));
    vec![
        ("quick", quick.clone()),
        ("full", full),
        ("bench", Options::bench(&[])),
        ("burn 30 s", Options::burn(30)),
        ("rehearse batch 2", rehearsal(2)),
        ("rehearse batch 256", rehearsal(256)),
        ("quick --force", tweak(&quick, json!({"force": true}))),
    ]
}

/// Every option, one at a time, in quick and full mode.
fn variants() -> Vec<(&'static str, Value)> {
    vec![
        ("ctx_runs 0", json!({"ctx_runs": 0})),
        ("ctx_runs 1", json!({"ctx_runs": 1})),
        ("ctx_runs 7", json!({"ctx_runs": 7})),
        ("ctx_runs 1000", json!({"ctx_runs": 1000})),
        ("--gpus 1", json!({"gpus": [1]})),
        ("--gpus 0,2", json!({"gpus": [0, 2]})),
        ("--gpus 9", json!({"gpus": [9]})),
        ("timeout 1 s", json!({"timeout_s": 1})),
        ("timeout 600 s", json!({"timeout_s": 600})),
        (
            "launch 2x1024",
            json!({"memory_launch": [{"blocks_per_sm": 2, "threads": 1024}]}),
        ),
        (
            "launch 8x128,4x512",
            json!({"memory_launch": [
                {"blocks_per_sm": 8, "threads": 128},
                {"blocks_per_sm": 4, "threads": 512}
            ]}),
        ),
        ("gemm size 1024", json!({"gemm_size": 1024})),
        ("layout nn", json!({"gemm_layout": "nn"})),
        ("layout tn", json!({"gemm_layout": "tn"})),
        ("layout auto", json!({"gemm_layout": "auto"})),
        ("order one by one", json!({"gpu_order": "one_by_one"})),
        ("order interleaved", json!({"gpu_order": "interleaved"})),
        ("order all at once", json!({"gpu_order": "all_at_once"})),
        ("burn 0 s", json!({"burn_seconds": 0})),
        ("burn 100000 s", json!({"burn_seconds": 100000})),
        ("burn 1 s", json!({"burn_seconds": 1})),
    ]
}

/// Each group alone, as `gpuaudit bench NAME` asks it.
const GROUPS: [&str; 7] = ["context", "pcie", "memory", "gemm", "p2p", "nccl", "burn"];

/// Every case: (name, GPUs, options, libraries).
fn cases() -> Vec<(String, Vec<Target>, Options, LibStatus)> {
    let mut out = Vec::new();
    let libs = libraries();
    let all = LibStatus::all_found();
    for (m, targets) in machines() {
        for (mode, opts) in modes() {
            if LIB_MACHINES.contains(&m) {
                for (l, status) in &libs {
                    out.push((
                        format!("{m} | {mode} | {l}"),
                        targets.clone(),
                        opts.clone(),
                        status.clone(),
                    ));
                }
            } else {
                out.push((
                    format!("{m} | {mode} | all libraries"),
                    targets.clone(),
                    opts.clone(),
                    all.clone(),
                ));
            }
        }
    }
    let bench = Options::bench(&[]);
    for m in ["1 H200", "2 H200", "8 H200", "H200, A100, V100, unknown"] {
        let targets = machines()
            .into_iter()
            .find(|(n, _)| *n == m)
            .map(|(_, t)| t)
            .unwrap_or_default();
        for g in GROUPS {
            let opts = tweak(&bench, json!({"groups": [g]}));
            for (l, status) in [&libs[0], &libs[6]] {
                out.push((
                    format!("{m} | bench {g} | {l}"),
                    targets.clone(),
                    opts.clone(),
                    status.clone(),
                ));
            }
        }
        let two = tweak(&bench, json!({"groups": ["gemm", "burn"]}));
        out.push((
            format!("{m} | bench gemm burn | all libraries"),
            targets.clone(),
            two,
            all.clone(),
        ));
        let none = tweak(&bench, json!({"groups": []}));
        out.push((
            format!("{m} | bench of no group | all libraries"),
            targets.clone(),
            none,
            all.clone(),
        ));
    }
    let quick = Options::default();
    let full = tweak(&quick, json!({"full": true}));
    for (n, targets) in [(1, h200s(1)), (3, h200s(3)), (8, h200s(8))] {
        for (mode, base) in [("quick", &quick), ("full", &full)] {
            for (v, with) in variants() {
                out.push((
                    format!("{n} H200 | {mode} {v} | all libraries"),
                    targets.clone(),
                    tweak(base, with),
                    all.clone(),
                ));
            }
        }
    }
    // A rehearsal with --gpus and with a busy GPU forced.
    let mut r = rehearsal(64);
    r.gpus = Some(vec![1]);
    out.push((
        "2 H200 | rehearse --gpus 1 | all libraries".into(),
        h200s(2),
        r,
        all.clone(),
    ));
    let mut r = rehearsal(64);
    r.force = true;
    out.push((
        "H200 + busy H200 | rehearse --force | all libraries".into(),
        vec![h200(0), busy(h200(1))],
        r,
        all.clone(),
    ));
    out
}

/// One line of the fixture.
fn line(name: &str, targets: &[Target], opts: &Options, libs: &LibStatus) -> String {
    let p = plan(targets, opts, libs);
    let v = json!({
        "case": name,
        "plan": serde_json::to_value(&p).expect("a plan serialises"),
        "jobs": serde_json::to_value(p.jobs()).expect("jobs serialise"),
        "estimate_ms": p.estimate_ms(),
        "child_startup_ms": p.child_startup_ms(),
    });
    v.to_string()
}

#[test]
fn plans_are_what_they_were() {
    let cases = cases();
    let mut names: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "every case has a name of its own");

    let got: Vec<String> = cases.iter().map(|(n, t, o, l)| line(n, t, o, l)).collect();
    let path = fixture();
    if std::env::var_os("GPUAUDIT_UPDATE_PLANS").is_some() {
        let mut text = got.join("\n");
        text.push('\n');
        std::fs::write(&path, text).expect("write tests/plans.jsonl");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (GPUAUDIT_UPDATE_PLANS=1 cargo test -p gpuaudit-probe --test plan_matrix \
             writes it)",
            path.display()
        )
    });
    let want: Vec<&str> = want.lines().collect();
    let differ: Vec<String> = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| g.as_str() != **w)
        .map(|(g, w)| {
            let case = serde_json::from_str::<Value>(w)
                .ok()
                .and_then(|v| v["case"].as_str().map(str::to_string))
                .unwrap_or_default();
            format!("{case}\n  was: {w}\n  now: {g}")
        })
        .take(3)
        .collect();
    assert!(
        differ.is_empty() && got.len() == want.len(),
        "{} cases planned, {} pinned; plans that differ (first 3):\n{}",
        got.len(),
        want.len(),
        differ.join("\n")
    );
}
