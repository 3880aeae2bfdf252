//! The CUDA stack: the driver, the toolkit, the libraries, the framework, the environment, and
//! how long a context takes.

pub mod context_latency;
pub mod driver;
pub mod env;
pub mod framework;
pub mod libraries;
pub mod toolkit_compat;

use crate::facts::{Facts, LibraryCopy};
use crate::spec::DriverVersion;

/// The driver version as reported and parsed, or why there is none (cuda.driver,
/// cuda.toolkit-compat).
pub(crate) fn driver_version(facts: &Facts) -> Result<(String, DriverVersion), String> {
    let v = facts.driver.version.get().map_err(|r| r.to_string())?;
    let parsed =
        DriverVersion::parse(v).ok_or_else(|| format!("driver version '{v}' not understood"))?;
    Ok((v.clone(), parsed))
}

/// One library copy in a line, "path -> file [source] version x" (cuda.libraries, cuda.env).
pub(crate) fn describe(c: &LibraryCopy) -> String {
    format!(
        "{} -> {} [{}]{}",
        c.path,
        c.file,
        c.source.label(),
        c.version
            .as_deref()
            .map(|v| format!(" version {v}"))
            .unwrap_or_default()
    )
}

/// Whether this copy belongs to a CUDA forward-compatibility package (its libcuda is meant
/// to differ from the kernel module's version).
pub(crate) fn is_compat(c: &LibraryCopy) -> bool {
    c.path.contains("/compat/")
}

/// A library copy for a test.
#[cfg(test)]
pub(crate) fn copy(
    lib: &str,
    path: &str,
    file: &str,
    v: Option<&str>,
    s: crate::facts::LibrarySource,
) -> LibraryCopy {
    LibraryCopy {
        library: lib.into(),
        path: path.into(),
        file: file.into(),
        version: v.map(str::to_string),
        source: s,
    }
}
