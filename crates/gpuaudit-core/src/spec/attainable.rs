//! What a healthy GPU of a model reaches, measured: `data/attainable.toml`, embedded at build
//! time. compute.gemm and memory.bandwidth hold a measurement against these fractions of the
//! datasheet rather than against the datasheet peak alone, which no GPU reaches (an H200's
//! bf16 GEMM reads 0.81-0.83 of its dense peak when healthy).
//!
//! Each entry names its measurement (gpuaudit's own run in BENCHMARKS.md, or a published
//! one with its repository and commit). A model, dtype or size without an entry has no
//! attainable figure: the checks then judge with their generic floor and say so.

use super::{GpuSpec, SpecDb};
use crate::facts::GemmDtype;
use serde::Deserialize;
use std::collections::HashSet;
use std::sync::OnceLock;

const EMBEDDED: &str = include_str!("../../../../data/attainable.toml");

/// A GEMM figure healthy GPUs of the listed models reach at one size and dtype.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmAttainable {
    /// Spec database keys.
    pub models: Vec<String>,
    pub dtype: GemmDtype,
    /// Square GEMM size (M = N = K) the figure was measured at.
    pub size: u64,
    /// Measured TFLOPS / the datasheet figure compute.gemm compares the dtype with.
    pub fraction: f64,
    /// The figures behind the fraction.
    pub measured: String,
    /// The run or publication they come from.
    pub source: String,
}

/// The device copy figure healthy GPUs of the listed models reach.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryAttainable {
    pub models: Vec<String>,
    /// Measured copy bandwidth (read + written) / the datasheet memory bandwidth.
    pub fraction: f64,
    pub measured: String,
    pub source: String,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attainable {
    #[serde(default)]
    pub gemm: Vec<GemmAttainable>,
    #[serde(default)]
    pub memory: Vec<MemoryAttainable>,
}

#[derive(Debug, thiserror::Error)]
pub enum AttainableError {
    #[error("data/attainable.toml: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("data/attainable.toml: {0}")]
    Invalid(String),
}

impl Attainable {
    /// Parse and check against the spec database `db`: every model exists and has the
    /// datasheet figure its fraction is of, fractions lie in (0, 1], sources are given, and no
    /// (model, dtype, size) or memory model is listed twice.
    pub fn parse(text: &str, db: &SpecDb) -> Result<Attainable, AttainableError> {
        let a: Attainable = toml::from_str(text)?;
        let bad = |what: String| Err(AttainableError::Invalid(what));
        let fraction_ok = |f: f64| f > 0.0 && f <= 1.0;
        let mut seen = HashSet::new();
        for e in &a.gemm {
            let what = format!("gemm {} {}", e.dtype.as_str(), e.size);
            if !fraction_ok(e.fraction) {
                return bad(format!("{what}: fraction {} not in (0, 1]", e.fraction));
            }
            if e.size == 0 || e.models.is_empty() || e.measured.trim().is_empty() {
                return bad(format!(
                    "{what}: needs a size, models and the figures measured"
                ));
            }
            if e.source.trim().is_empty() {
                return bad(format!("{what}: no source"));
            }
            for m in &e.models {
                let Some(spec) = db.by_key(m) else {
                    return bad(format!("{what}: no model '{m}' in data/gpus.toml"));
                };
                if spec.gemm_peak(e.dtype).is_none() {
                    return bad(format!(
                        "{what}: {m} has no datasheet {} figure",
                        e.dtype.as_str()
                    ));
                }
                if !seen.insert((m.clone(), e.dtype, e.size)) {
                    return bad(format!("{what}: {m} listed twice"));
                }
            }
        }
        let mut seen = HashSet::new();
        for e in &a.memory {
            if !fraction_ok(e.fraction) || e.models.is_empty() || e.source.trim().is_empty() {
                return bad(format!(
                    "memory {:?}: needs models, a source and a fraction in (0, 1]",
                    e.models
                ));
            }
            for m in &e.models {
                match db.by_key(m) {
                    Some(s) if s.memory_bandwidth_gbps.is_some() => {}
                    _ => return bad(format!("memory: {m} has no datasheet memory bandwidth")),
                }
                if !seen.insert(m.clone()) {
                    return bad(format!("memory: {m} listed twice"));
                }
            }
        }
        Ok(a)
    }

    /// The table compiled into the binary.
    pub fn embedded() -> &'static Attainable {
        static TABLE: OnceLock<Attainable> = OnceLock::new();
        TABLE.get_or_init(|| {
            // The embedded file is checked by a test; a broken one is a build defect, and an
            // empty table makes the checks fall back to their generic floors rather than crash.
            Attainable::parse(EMBEDDED, SpecDb::embedded()).unwrap_or_default()
        })
    }

    /// The GEMM figure for this model, dtype and size, where one was measured.
    pub fn gemm(&self, spec: &GpuSpec, dtype: GemmDtype, size: u64) -> Option<&GemmAttainable> {
        self.gemm
            .iter()
            .find(|e| e.dtype == dtype && e.size == size && e.models.contains(&spec.key))
    }

    /// The device copy figure for this model, where one was measured.
    pub fn memory(&self, spec: &GpuSpec) -> Option<&MemoryAttainable> {
        self.memory.iter().find(|e| e.models.contains(&spec.key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Attainable {
        Attainable::parse(EMBEDDED, SpecDb::embedded()).expect("data/attainable.toml must parse")
    }

    #[test]
    fn embedded_table_parses_and_is_served() {
        let t = table();
        assert_eq!(&t, Attainable::embedded());
        let db = SpecDb::embedded();
        let h200 = db.by_key("h200-sxm-141gb").expect("in the database");
        let bf16 = t.gemm(h200, GemmDtype::Bf16, 8192).expect("measured");
        assert_eq!(bf16.fraction, 0.81);
        assert!(bf16.source.contains("3392854"), "{}", bf16.source);
        // Each size its own: the quick audit's 4096 was measured (twice, 809.3 and 810.0
        // TFLOPS of 989.5); 2048 never was, and takes nothing from its neighbours.
        let quick = t.gemm(h200, GemmDtype::Bf16, 4096).expect("measured");
        assert_eq!(quick.fraction, (809.3_f64 / 989.5 * 100.0).floor() / 100.0);
        assert!(quick.source.contains("39a64c0"), "{}", quick.source);
        assert!(t.gemm(h200, GemmDtype::Bf16, 2048).is_none());
        assert!(t.gemm(h200, GemmDtype::Fp16, 4096).is_none());
        assert_eq!(t.memory(h200).map(|m| m.fraction), Some(0.88));
        let l4 = db.by_key("l4").expect("in the database");
        assert!(t.gemm(l4, GemmDtype::Bf16, 8192).is_none());
        assert!(t.memory(l4).is_none());
    }

    /// The fractions are what BENCHMARKS.md measured: the lowest healthy GPU, rounded down.
    #[test]
    fn h200_fractions_are_the_lowest_measured_rounded_down() {
        let db = SpecDb::embedded();
        let h200 = db.by_key("h200-sxm-141gb").expect("in the database");
        let t = table();
        // The slowest of the three H200s measured (BENCHMARKS.md, both runs), per dtype.
        for (d, lowest) in [
            (GemmDtype::Bf16, 807.6),
            (GemmDtype::Fp16, 762.4),
            (GemmDtype::Fp8, 1591.7),
            (GemmDtype::Tf32, 409.6),
            (GemmDtype::Fp32, 51.2),
            (GemmDtype::Fp64, 56.67),
        ] {
            let peak = h200.gemm_peak(d).expect("datasheet");
            let want = (lowest / peak * 100.0_f64).floor() / 100.0;
            let got = t.gemm(h200, d, 8192).expect("measured").fraction;
            assert!((got - want).abs() < 1e-9, "{}: {got} != {want}", d.as_str());
        }
        let mem = (4265.69_f64 / 4800.0 * 100.0).floor() / 100.0;
        assert_eq!(t.memory(h200).map(|m| m.fraction), Some(mem));
    }

    #[test]
    fn bad_entries_are_refused() {
        let db = SpecDb::embedded();
        let entry = |models: &str, dtype: &str, fraction: &str| {
            format!(
                "[[gemm]]\nmodels = [{models}]\ndtype = \"{dtype}\"\nsize = 8192\nfraction = \
                 {fraction}\nmeasured = \"x\"\nsource = \"y\"\n"
            )
        };
        assert!(Attainable::parse(&entry("\"h200-sxm-141gb\"", "bf16", "0.8"), db).is_ok());
        for (text, why) in [
            (entry("\"no-such-gpu\"", "bf16", "0.8"), "no model"),
            (entry("\"h200-sxm-141gb\"", "bf16", "1.2"), "not in (0, 1]"),
            (entry("\"h200-sxm-141gb\"", "bf16", "0"), "not in (0, 1]"),
            // The L4's datasheet has no fp64 figure to take a fraction of.
            (entry("\"l4\"", "fp64", "0.5"), "no datasheet fp64"),
            (entry("\"h200-sxm-141gb\", \"h200-sxm-141gb\"", "bf16", "0.8"), "twice"),
            (
                "[[memory]]\nmodels = [\"a10g\"]\nfraction = 0.9\nmeasured = \"x\"\nsource = \"y\"\n"
                    .to_string(),
                "no datasheet memory bandwidth",
            ),
            (
                "[[memory]]\nmodels = [\"l4\", \"l4\"]\nfraction = 0.9\nmeasured = \"x\"\nsource = \"y\"\n"
                    .to_string(),
                "twice",
            ),
        ] {
            let e = Attainable::parse(&text, db).expect_err(why).to_string();
            assert!(e.contains(why), "{e}");
        }
        let no_source = entry("\"h200-sxm-141gb\"", "bf16", "0.8").replace("\"y\"", "\" \"");
        assert!(Attainable::parse(&no_source, db).is_err());
        assert!(Attainable::parse("[[gemm]]\nbogus = 1\n", db).is_err());
    }
}
