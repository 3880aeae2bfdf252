//! The one way gpuaudit's results leave the process: every command's standard output goes
//! through [`print`], every result file through [`deliver`], every message to stderr through
//! [`note`]. A reader that went away (`gpuaudit checks | head -1`) stops the output quietly;
//! a write that fails (`> /dev/full`) is an error of one line (exit 2), never a panic, which
//! is what `print!` does in both cases.

use anyhow::{anyhow, Context, Result};
use std::io::{ErrorKind, Write};
use std::path::Path;

/// Write `text` to standard output. A closed pipe is not an error: the rest is dropped.
pub fn print(text: impl AsRef<[u8]>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_ref()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow!(
            "cannot write to standard output: {}",
            gpuaudit_probe::root::io_reason(&e)
        )),
    }
}

/// Write `text` to the file `output`, or to standard output where there is none.
pub fn deliver(text: impl AsRef<[u8]>, output: Option<&Path>) -> Result<()> {
    match output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display())),
        None => print(text),
    }
}

/// One line to standard error; a standard error that cannot be written loses it (there is
/// nowhere left to say so).
pub fn note(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}
