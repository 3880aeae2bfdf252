#![no_main]

use gpuaudit_core::render::{render, Format, TableOptions};
use gpuaudit_core::report::limits::{MAX_FINDINGS, MAX_GPUS, MAX_MEASUREMENTS};
use gpuaudit_core::report::{from_json, from_json_for_summary};
use libfuzzer_sys::fuzz_target;

// A report someone else made (`gpuaudit report`, `compare`, `fleet`): read it both ways;
// what is read holds to the bounds and renders in every view, without a panic or a hang
// (libFuzzer's -timeout catches a chart that never ends).
fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(r) = from_json(&text) {
        assert!(r.findings.len() <= MAX_FINDINGS && r.gpus.len() <= MAX_GPUS);
        assert!(r.measurements.len() <= MAX_MEASUREMENTS);
        let opts = TableOptions::default();
        for f in [Format::Table, Format::Markdown, Format::Html, Format::Json] {
            let _ = render(&r, f, &opts);
        }
    }
    if let Ok(r) = from_json_for_summary(&text, gpuaudit_core::fleet::EVIDENCE_READ) {
        assert!(r.findings.len() <= MAX_FINDINGS && r.gpus.len() <= MAX_GPUS);
    }
});
