//! A saved report read back (`gpuaudit report REPORT.json`): this version's schema is read,
//! any other is refused with one sentence that names it.

use super::{Report, SCHEMA};
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
}

/// The report in `text`, where it is one of [`SCHEMA`].
pub fn from_json(text: &str) -> Result<Report, ReadError> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ReadError::NotJson(fact_line(&e.to_string())))?;
    match v.get("schema") {
        None => return Err(ReadError::NotAReport),
        Some(serde_json::Value::String(s)) if s == SCHEMA => {}
        Some(serde_json::Value::String(s)) => return Err(ReadError::OtherSchema(fact_line(s))),
        Some(other) => return Err(ReadError::OtherSchema(fact_line(&other.to_string()))),
    }
    serde_json::from_value(v).map_err(|e| ReadError::Invalid(fact_line(&e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Machine;
    use crate::Policy;

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
}
