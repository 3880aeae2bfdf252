//! The report as JSON, exactly `gpuaudit.report/1`.

use crate::report::Report;

pub fn render(report: &Report) -> String {
    match serde_json::to_string_pretty(report) {
        Ok(mut s) => {
            s.push('\n');
            s
        }
        // Serialising plain structs cannot fail; keep stdout valid JSON regardless.
        Err(e) => format!("{{\"error\": {:?}}}\n", e.to_string()),
    }
}
