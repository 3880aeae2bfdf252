#![no_main]

use gpuaudit_core::parse::{fact_line, FACT_LINE_CHARS};
use gpuaudit_core::render::escape::{escape_line, escape_text, markdown_cell};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let line = escape_line(&text);
    assert!(!line.chars().any(|c| c.is_control() && c != '\t'));
    let lines = escape_text(&text);
    assert!(!lines.chars().any(|c| c.is_control() && c != '\t' && c != '\n'));
    let cell = markdown_cell(&text);
    assert!(!cell.contains('<') && !cell.contains('>'));
    let fact = fact_line(&text);
    assert!(fact.chars().count() <= FACT_LINE_CHARS + 1 && !fact.contains('\n'));
});
