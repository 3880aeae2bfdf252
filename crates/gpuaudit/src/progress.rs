//! Progress on stderr: a bar on a terminal, nothing otherwise (stdout stays the report).

use gpuaudit_core::render::escape::escape_line;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

pub struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    /// A spinner with a message, for work of unknown length.
    pub fn spinner(message: &str) -> Bar {
        if !std::io::stderr().is_terminal() {
            return Bar { bar: None };
        }
        let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            b.set_style(style);
        }
        b.set_message(escape_line(message).into_owned());
        b.enable_steady_tick(Duration::from_millis(120));
        Bar { bar: Some(b) }
    }

    /// Switch to a bar measured in milliseconds of expected work.
    pub fn update(&mut self, message: &str, done_ms: u64, total_ms: u64) {
        let Some(b) = &self.bar else { return };
        if b.length() != Some(total_ms.max(1)) {
            b.set_length(total_ms.max(1));
            if let Ok(style) =
                ProgressStyle::with_template("{bar:30} {percent:>3}% {msg} (about {eta} left)")
            {
                b.set_style(style);
            }
        }
        b.set_position(done_ms.min(total_ms));
        b.set_message(escape_line(message).into_owned());
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.finish();
    }
}
