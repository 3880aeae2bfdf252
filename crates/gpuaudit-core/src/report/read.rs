//! A saved report read back (`gpuaudit report REPORT.json`): this version's schema is read,
//! any other is refused with one sentence that names it.

use super::limits::{bound_text, check_counts, thousands};
use super::{Report, SCHEMA};
use crate::finding::{Evidence, Finding, Status};
use crate::parse::fact_line;

/// Why a file is not a report this gpuaudit reads. The caller puts the file's name in front.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReadError {
    #[error("not JSON ({0})")]
    NotJson(String),
    #[error("not a gpuaudit report (it has no \"schema\")")]
    NotAReport,
    #[error("schema '{0}' is not one this gpuaudit reads ({SCHEMA})")]
    OtherSchema(String),
    #[error("not a valid {SCHEMA} report ({0})")]
    Invalid(String),
    #[error("nested deeper than the {0} levels a report may be")]
    TooDeep(usize),
    #[error("more {what} ({}) than the {} a report may hold", thousands(*n), thousands(*max))]
    TooMany {
        what: &'static str,
        n: usize,
        max: usize,
    },
}

/// The `schema` of a JSON object, without building the rest of it: missing is `None`, any
/// value (null included) is `Some`.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(default, deserialize_with = "present")]
    schema: Option<serde_json::Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// Whether `text` is a JSON object whose `schema` is [`SCHEMA`]; the text is parsed once for
/// that, without building a tree of it (a report of 8 GPUs with `--full` is a few hundred KiB,
/// and `gpuaudit fleet` reads a thousand).
fn check_schema(text: &str) -> Result<(), ReadError> {
    let not_json = |e: serde_json::Error| ReadError::NotJson(fact_line(&e.to_string()));
    if !text.trim_start().starts_with('{') {
        // An array, a number, a string: JSON, but no report; or not JSON at all.
        serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(not_json)?;
        return Err(ReadError::NotAReport);
    }
    let head: Head = serde_json::from_str(text).map_err(not_json)?;
    match head.schema {
        None => Err(ReadError::NotAReport),
        Some(serde_json::Value::String(s)) if s == SCHEMA => Ok(()),
        Some(serde_json::Value::String(s)) => Err(ReadError::OtherSchema(fact_line(&s))),
        Some(other) => Err(ReadError::OtherSchema(fact_line(&other.to_string()))),
    }
}

fn invalid(e: serde_json::Error) -> ReadError {
    ReadError::Invalid(fact_line(&e.to_string()))
}

/// The report in `text`, where it is one of [`SCHEMA`].
/// Held to the bounds of [`super::limits`]: a string too long is cut, nesting too deep or a
/// list too long is refused.
pub fn from_json(text: &str) -> Result<Report, ReadError> {
    let text = bound_text(text)?;
    check_schema(&text)?;
    let r = serde_json::from_str(&text).map_err(invalid)?;
    check_counts(&r)?;
    Ok(r)
}

/// A finding as a summary reads it: check, status, GPU and cause; its evidence only for the checks
/// in `keep` (read where `check` comes before `evidence`, as gpuaudit writes them); message and
/// fix only of a problem (warn or fail), which `ProblemCounts` groups by them as the verdict
/// does (one cause on several GPUs once, two faults of one check twice). Skipping what is not
/// read is most of the time a fleet spends on a report.
struct SummaryFinding(Finding);

struct SummaryFindingSeed<'a>(&'a [&'a str]);

impl<'de> serde::de::DeserializeSeed<'de> for SummaryFindingSeed<'_> {
    type Value = SummaryFinding;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<SummaryFinding, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for SummaryFindingSeed<'_> {
    type Value = SummaryFinding;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a finding")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<SummaryFinding, A::Error> {
        use serde::de::{Error, IgnoredAny};
        let (mut check, mut status, mut gpu) = (None::<String>, None::<Status>, None::<u32>);
        let mut evidence = Evidence::new();
        let mut caused_by = None;
        let (mut message, mut fix) = (String::new(), None::<String>);
        while let Some(key) = m.next_key::<String>()? {
            match key.as_str() {
                "check" => check = Some(m.next_value()?),
                "message" => message = m.next_value()?,
                "fix" => fix = m.next_value()?,
                "status" => status = Some(m.next_value()?),
                "gpu" => gpu = m.next_value()?,
                // The fleet counts problems as causes: it needs what explains what.
                "caused_by" => caused_by = m.next_value()?,
                "evidence" if check.as_deref().is_some_and(|c| self.0.contains(&c)) => {
                    evidence = m.next_value()?
                }
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        let status = status.ok_or_else(|| A::Error::missing_field("status"))?;
        if !matches!(status, Status::Warn | Status::Fail) {
            message = String::new();
            fix = None;
        }
        Ok(SummaryFinding(Finding {
            check: check.ok_or_else(|| A::Error::missing_field("check"))?,
            status,
            gpu,
            message,
            evidence,
            fix,
            caused_by,
        }))
    }
}

struct SummaryFindings<'a>(&'a [&'a str]);

impl<'de> serde::de::DeserializeSeed<'de> for SummaryFindings<'_> {
    type Value = Vec<Finding>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<Finding>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for SummaryFindings<'_> {
    type Value = Vec<Finding>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of findings")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Vec<Finding>, A::Error> {
        let mut out = Vec::new();
        while let Some(f) = s.next_element_seed(SummaryFindingSeed(self.0))? {
            out.push(f.0);
        }
        Ok(out)
    }
}

/// A measurement as a summary reads it: without its method.
#[derive(serde::Deserialize)]
struct SummaryMeasurement {
    name: String,
    gpu: Option<u32>,
    peer: Option<u32>,
    value: f64,
    unit: String,
    expected: Option<f64>,
    ratio: Option<f64>,
    #[serde(default)]
    size_bytes: Option<u64>,
    #[serde(default)]
    dtype: Option<String>,
    #[serde(default)]
    attainable: Option<f64>,
    #[serde(default)]
    path: Option<String>,
}

/// The top level of a report as a summary reads it (`series` is not read).
struct SummaryReport<'a>(&'a [&'a str]);

impl<'de> serde::de::Visitor<'de> for SummaryReport<'_> {
    type Value = Report;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a gpuaudit report")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Report, A::Error> {
        use serde::de::{Error, IgnoredAny};
        let (mut schema, mut tool, mut audit, mut machine) = (None, None, None, None);
        let (mut gpus, mut findings, mut measurements, mut summary) = (None, None, None, None);
        while let Some(key) = m.next_key::<String>()? {
            match key.as_str() {
                // A second schema is refused, as `check_schema` refuses it (the caller asks
                // it why: see `from_json_for_summary`).
                "schema" if schema.is_some() => return Err(A::Error::duplicate_field("schema")),
                "schema" => schema = Some(m.next_value()?),
                "tool" => tool = Some(m.next_value()?),
                "audit" => audit = Some(m.next_value()?),
                "machine" => machine = Some(m.next_value()?),
                "gpus" => gpus = Some(m.next_value()?),
                "findings" => findings = Some(m.next_value_seed(SummaryFindings(self.0))?),
                "measurements" => {
                    let v: Vec<SummaryMeasurement> = m.next_value()?;
                    measurements = Some(
                        v.into_iter()
                            .map(|x| crate::facts::Measurement {
                                name: x.name,
                                gpu: x.gpu,
                                peer: x.peer,
                                value: x.value,
                                unit: x.unit,
                                expected: x.expected,
                                ratio: x.ratio,
                                method: String::new(),
                                size_bytes: x.size_bytes,
                                dtype: x.dtype,
                                attainable: x.attainable,
                                path: x.path,
                            })
                            .collect(),
                    )
                }
                "summary" => summary = Some(m.next_value()?),
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Report {
            schema: schema.ok_or_else(|| A::Error::missing_field("schema"))?,
            tool: tool.ok_or_else(|| A::Error::missing_field("tool"))?,
            audit: audit.ok_or_else(|| A::Error::missing_field("audit"))?,
            machine: machine.ok_or_else(|| A::Error::missing_field("machine"))?,
            gpus: gpus.ok_or_else(|| A::Error::missing_field("gpus"))?,
            findings: findings.ok_or_else(|| A::Error::missing_field("findings"))?,
            measurements: measurements.ok_or_else(|| A::Error::missing_field("measurements"))?,
            series: super::Series::default(),
            summary: summary.ok_or_else(|| A::Error::missing_field("summary"))?,
        })
    }
}

/// As [`from_json`], for a summary of many reports (`gpuaudit fleet`): the same schema and the
/// same form are required, but what a summary does not read is left empty: `series`, every
/// finding's message and fix, the evidence of findings of checks not in `evidence_of`, the
/// measurements' methods.
pub fn from_json_for_summary(text: &str, evidence_of: &[&str]) -> Result<Report, ReadError> {
    let text = bound_text(text)?;
    // One parse where the text is a report of this schema (nearly every file of a fleet):
    // the schema's own pass (`check_schema`, a whole parse of its own) runs only where this
    // one fails or finds another schema, so that the error is the one `from_json` gives.
    let mut de = serde_json::Deserializer::from_str(&text);
    let parsed = serde::Deserializer::deserialize_map(&mut de, SummaryReport(evidence_of))
        .and_then(|r| de.end().map(|()| r));
    match parsed {
        Ok(r) if r.schema == SCHEMA => {
            check_counts(&r)?;
            Ok(r)
        }
        Ok(r) => {
            check_schema(&text)?;
            Err(ReadError::OtherSchema(fact_line(&r.schema)))
        }
        Err(e) => {
            check_schema(&text)?;
            Err(invalid(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Machine;
    use crate::Policy;

    /// The summary counts problems as the verdict does: two faults of one check on two GPUs
    /// are two problems, one fault on both GPUs is one (the messages group them).
    #[test]
    fn a_summary_counts_the_problems_the_verdict_counts() {
        use crate::finding::Finding;
        use crate::report::ProblemCounts;
        let base = Report::build(
            &Machine::healthy("h200-sxm-141gb", 2).build(),
            &Policy::default(),
        );
        for (messages, problems) in [(["a", "b"], 2), (["same", "same"], 1)] {
            let mut r = base.clone();
            r.findings
                .retain(|f| !matches!(f.status, Status::Warn | Status::Fail));
            for (i, m) in messages.iter().enumerate() {
                let bus = ["00:06.0", "00:07.0"][i];
                r.findings.push(
                    Finding::fail("memory.errors", format!("GPU {i} ({bus}): {m}"))
                        .gpu(i as u32)
                        .fix("replace it"),
                );
            }
            let text = serde_json::to_string(&r).unwrap();
            let full = ProblemCounts::of(&from_json(&text).unwrap());
            assert_eq!(full.fail, problems, "{messages:?}");
            let summary = ProblemCounts::of(&from_json_for_summary(&text, &[]).unwrap());
            assert_eq!(summary, full, "{messages:?}");
        }
    }

    /// Every figure to its last digit: ratios the H200's report held came back one unit in
    /// the last place off before serde_json's float_roundtrip.
    #[test]
    fn figures_read_back_to_the_last_digit() {
        let mut r = Report::build(
            &Machine::healthy("h200-sxm-141gb", 1).build(),
            &Policy::default(),
        );
        let seen = [0.9538145362314161, 0.9061222535333325, 0.9159319057511963];
        for (i, v) in seen.iter().enumerate() {
            r.measurements.push(crate::facts::Measurement {
                name: format!("m{i}"),
                gpu: Some(0),
                peer: None,
                value: *v * 4800.0,
                unit: "GB/s".into(),
                expected: Some(4800.0),
                ratio: Some(*v),
                method: "test".into(),
                size_bytes: None,
                dtype: None,
                attainable: None,
                path: None,
            });
        }
        let text = serde_json::to_string(&r).unwrap();
        let back = from_json(&text).unwrap();
        let ratios: Vec<f64> = back.measurements.iter().filter_map(|m| m.ratio).collect();
        assert_eq!(ratios, seen.to_vec());
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }

    #[test]
    fn a_report_reads_back_as_written() {
        let r = Report::build(
            &Machine::healthy("h200-sxm-141gb", 2).build(),
            &Policy::default(),
        );
        let text = serde_json::to_string(&r).unwrap();
        let back = from_json(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }

    #[test]
    fn a_summary_reads_what_it_needs_and_refuses_the_same() {
        use crate::testing::measured;
        let facts = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| measured::full_run(m, 2))
            .build();
        let r = Report::build(&facts, &Policy::default());
        assert!(!r.series.host_copy.is_empty());
        let text = serde_json::to_string(&r).unwrap();
        let back = from_json_for_summary(&text, &["pcie.link"]).unwrap();
        assert!(back.series.host_copy.is_empty() && back.series.burn.is_empty());
        // What the full reader reads (floats parse the same way in both), less what is skipped.
        let mut want = from_json(&text).unwrap();
        want.series = Default::default();
        for f in want.findings.iter_mut() {
            if !matches!(f.status, Status::Warn | Status::Fail) {
                f.message.clear();
                f.fix = None;
            }
            if f.check != "pcie.link" {
                f.evidence = Evidence::new();
            }
        }
        for m in want.measurements.iter_mut() {
            m.method.clear();
        }
        assert!(want.findings.iter().any(|f| !f.evidence.is_empty()));
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&want).unwrap()
        );
        // The summary reader parses once, the schema's pass only after a failure: the same
        // errors, a second "schema" and text after the report included.
        let dup = text.replacen('{', r#"{"schema": "gpuaudit.bench/1", "#, 1);
        let trailing = format!("{text} x");
        for bad in [
            dup.as_str(),
            trailing.as_str(),
            r#"{"schema": "gpuaudit.report/2"}"#,
            "[1]",
            "{ not",
            r#"{"a": 1}"#,
        ] {
            assert_eq!(
                from_json_for_summary(bad, &[]).unwrap_err(),
                from_json(bad).unwrap_err()
            );
        }
        let e = from_json_for_summary(r#"{"schema": "gpuaudit.report/1", "tool": 3}"#, &[])
            .unwrap_err();
        assert!(matches!(e, ReadError::Invalid(_)), "{e}");
        let e = from_json_for_summary(r#"{"schema": "gpuaudit.report/1"}"#, &[]).unwrap_err();
        assert!(e.to_string().contains("missing field"), "{e}");
        assert_eq!(
            from_json(r#"{"schema": null}"#).unwrap_err(),
            ReadError::OtherSchema("null".into())
        );
        assert_eq!(from_json("  7 ").unwrap_err(), ReadError::NotAReport);
    }

    #[test]
    fn other_files_are_refused_in_one_sentence() {
        assert_eq!(
            from_json(r#"{"schema": "gpuaudit.report/2"}"#)
                .unwrap_err()
                .to_string(),
            "schema 'gpuaudit.report/2' is not one this gpuaudit reads (gpuaudit.report/1)"
        );
        assert_eq!(
            from_json(r#"{"schema": "gpuaudit.bench/1", "measured": {}}"#).unwrap_err(),
            ReadError::OtherSchema("gpuaudit.bench/1".into())
        );
        assert_eq!(
            from_json(r#"{"schema": 7}"#).unwrap_err(),
            ReadError::OtherSchema("7".into())
        );
        assert_eq!(from_json("[1, 2]").unwrap_err(), ReadError::NotAReport);
        assert_eq!(from_json(r#"{"a": 1}"#).unwrap_err(), ReadError::NotAReport);
        let e = from_json("{ not json").unwrap_err();
        assert!(matches!(e, ReadError::NotJson(_)), "{e}");
        assert!(e.to_string().contains("line 1 column 3"), "{e}");
        let e = from_json(r#"{"schema": "gpuaudit.report/1", "tool": 3}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("not a valid gpuaudit.report/1 report (invalid type"),
            "{e}"
        );
        // A schema name from the file stays one line.
        let e = from_json("{\"schema\": \"a\\nb\"}")
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_report_past_a_bound_is_refused_and_a_long_text_cut() {
        use crate::report::limits::{MAX_FINDINGS, MAX_TEXT_BYTES};
        let r = Report::build(
            &Machine::healthy("h200-sxm-141gb", 1).build(),
            &Policy::default(),
        );
        let mut v = serde_json::to_value(&r).unwrap();
        v["machine"]["hostname"] = serde_json::Value::String("h".repeat(MAX_TEXT_BYTES + 10));
        let text = serde_json::to_string(&v).unwrap();
        for back in [
            from_json(&text).unwrap(),
            from_json_for_summary(&text, &[]).unwrap(),
        ] {
            let host = back.machine.hostname.unwrap();
            assert_eq!(
                host,
                format!("{}… (10 bytes cut)", "h".repeat(MAX_TEXT_BYTES))
            );
        }
        let f = v["findings"][0].clone();
        v["findings"] = serde_json::Value::Array(vec![f; MAX_FINDINGS + 1]);
        let text = serde_json::to_string(&v).unwrap();
        let want = "more findings (100,001) than the 100,000 a report may hold";
        assert_eq!(from_json(&text).unwrap_err().to_string(), want);
        assert_eq!(
            from_json_for_summary(&text, &[]).unwrap_err().to_string(),
            want
        );
        let deep = format!("{{\"schema\": {}1{}}}", "[".repeat(200), "]".repeat(200));
        let e = from_json(&deep).unwrap_err();
        assert_eq!(
            e.to_string(),
            "nested deeper than the 64 levels a report may be"
        );
    }
}
