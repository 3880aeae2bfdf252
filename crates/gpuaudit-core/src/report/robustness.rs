//! The report reader (`from_json`, `from_json_for_summary`) and every view over a few thousand
//! mutated and hostile reports: none may panic, what is read holds to the bounds of
//! [`super::limits`], and what is read renders. A stable-toolchain stand-in for the cargo-fuzz
//! target `fuzz/fuzz_targets/report.rs`, deterministic so that a failure reproduces.

use super::limits::{MAX_FINDINGS, MAX_GPUS, MAX_MEASUREMENTS, MAX_TEXT_BYTES};
use super::{from_json, from_json_for_summary, Report};
use crate::render::{render, Format, TableOptions};
use std::panic::{catch_unwind, AssertUnwindSafe};

const REAL: &str = include_str!("../../../../fixtures/reports/h200-x1-vm-full.json");

/// What a mutation puts in: JSON's own tokens, figures no chart can draw, long texts.
const PIECES: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "\"",
    "\\",
    "\\u",
    "\\ud83d",
    "null",
    "true",
    "-0",
    "1.7e308",
    "-1.7e308",
    "1e400",
    "NaN",
    "0.000000000000000000001",
    "18446744073709551616",
    "\u{1b}]0;x\u{7}",
    "\"fail\"",
    "\"skip\"",
    "\"gpu.present\"",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `seed` with a few bytes changed, ranges cut or doubled, tokens put in.
fn mutate(rng: &mut Rng, seed: &str) -> Vec<u8> {
    let mut b = seed.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(5) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            1 => {
                let end = (at + rng.below(200)).min(b.len());
                b.drain(at..end);
            }
            2 => {
                let end = (at + rng.below(400)).min(b.len());
                let copy = b[at..end].to_vec();
                b.splice(at..at, copy);
            }
            _ => {
                let p = PIECES[rng.below(PIECES.len())];
                b.splice(at..at, p.bytes());
            }
        }
    }
    b
}

/// A string value longer than a report may hold, somewhere in the report.
fn long_text(rng: &mut Rng) -> String {
    let at = [
        "\"hostname\": ",
        "\"message\": ",
        "\"method\": ",
        "\"name\": ",
    ][rng.below(4)];
    let fill = ["x", "é", "\\n", "\\u00e9", "\\ud83d\\ude00"][rng.below(5)];
    let long = format!(
        "{at}\"{}\", \"x\": ",
        fill.repeat(MAX_TEXT_BYTES / fill.len() + 7)
    );
    REAL.replacen(at, &long, 1 + rng.below(3))
}

fn holds_to_the_bounds(r: &Report) {
    assert!(r.findings.len() <= MAX_FINDINGS);
    assert!(r.gpus.len() <= MAX_GPUS);
    assert!(r.measurements.len() <= MAX_MEASUREMENTS);
    let json = serde_json::to_value(r).unwrap();
    let mut strings = vec![&json];
    while let Some(v) = strings.pop() {
        match v {
            serde_json::Value::String(s) => {
                // Unescaped, a cut string is at most the bound and its marker.
                assert!(s.len() <= MAX_TEXT_BYTES + 40, "{} bytes", s.len())
            }
            serde_json::Value::Array(a) => strings.extend(a),
            serde_json::Value::Object(o) => strings.extend(o.values()),
            _ => {}
        }
    }
}

/// Reads `text` both ways; renders what the full reader read in every view (`render`: the
/// views take a while in a debug build, so not every case).
fn check(case: usize, bytes: &[u8], views: bool) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let run = || {
        let full = from_json(&text);
        if let Ok(r) = &full {
            holds_to_the_bounds(r);
            if views {
                let opts = TableOptions::default();
                for f in [Format::Table, Format::Markdown, Format::Html, Format::Json] {
                    let _ = render(r, f, &opts);
                }
            }
        }
        if let Ok(r) = from_json_for_summary(&text, crate::fleet::EVIDENCE_READ) {
            holds_to_the_bounds(&r);
        }
        full.is_ok()
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(read) => read,
        Err(_) => panic!(
            "case {case}: the reader or a view panicked on {} bytes starting {:?}",
            text.len(),
            text.chars().take(300).collect::<String>()
        ),
    }
}

#[test]
fn the_reader_survives_mutated_reports() {
    let mut rng = Rng(0x7265_706f_7274_2131);
    assert!(check(0, REAL.as_bytes(), true));
    let mut read = 0;
    for case in 1..800 {
        read += usize::from(check(case, &mutate(&mut rng, REAL), case % 100 == 0));
    }
    // The mutations must reach the fields, not only JSON's errors.
    assert!(read > 40, "only {read} of 800 mutated reports were read");
    for case in 0..20 {
        assert!(check(case, long_text(&mut rng).as_bytes(), case % 5 == 0));
    }
}

#[test]
fn the_views_survive_figures_no_chart_can_draw() {
    let mut v: serde_json::Value = serde_json::from_str(REAL).unwrap();
    let odd = [
        1.7e308,
        -1.7e308,
        f64::MAX,
        f64::MIN_POSITIVE,
        1e13,
        -0.0,
        0.0,
    ];
    let n = v["measurements"].as_array().unwrap().len();
    for (i, m) in v["measurements"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        m["value"] = odd[i % odd.len()].into();
        m["ratio"] = odd[(i + 1) % odd.len()].into();
        m["expected"] = odd[(i + 2) % odd.len()].into();
        m["size_bytes"] = serde_json::json!(u64::MAX - i as u64);
    }
    assert!(n > 0);
    let text = v.to_string();
    // Series: copy curves and burn samples of the same figures.
    let text = text.replace("\"gbps\":", "\"gbps\":1.7e308,\"x\":");
    assert!(check(0, text.as_bytes(), true));
}
