//! The report's JSON Schema, generated from the report's types, so that it cannot drift from
//! what gpuaudit writes. The published copy is docs/report.schema.json; a test fails when it
//! differs from the generated one (`GPUAUDIT_UPDATE_SCHEMA=1 cargo test -p gpuaudit-core
//! report_schema` rewrites it).

use super::{Report, SCHEMA};

/// The JSON Schema (draft 2020-12) of `gpuaudit.report/1`.
pub fn json_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(Report);
    schema.insert("title".into(), SCHEMA.into());
    schema.to_value()
}

/// [`json_schema`] as the published file holds it: pretty-printed, one final newline.
pub fn json_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&json_schema())
        .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn published() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.schema.json")
    }

    #[test]
    fn report_schema_is_the_published_one() {
        let want = json_schema_text();
        if std::env::var_os("GPUAUDIT_UPDATE_SCHEMA").is_some() {
            std::fs::write(published(), &want).expect("docs/report.schema.json is writable");
        }
        let have = std::fs::read_to_string(published()).unwrap_or_default();
        let first_difference = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .map(|i| format!("line {}: {:?}", i + 1, want.lines().nth(i).unwrap_or("")))
            .unwrap_or_else(|| "its length".into());
        assert!(
            have == want,
            "docs/report.schema.json differs from the report's types at {first_difference}; \
             regenerate it with GPUAUDIT_UPDATE_SCHEMA=1 cargo test -p gpuaudit-core report_schema"
        );
    }

    fn validator() -> jsonschema::Validator {
        jsonschema::options()
            .should_validate_formats(true)
            .build(&json_schema())
            .expect("the generated schema is a valid JSON Schema")
    }

    fn errors(v: &jsonschema::Validator, report: &serde_json::Value) -> Vec<String> {
        v.iter_errors(report)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect()
    }

    fn sample() -> serde_json::Value {
        use crate::facts::{Dmi, Origin};
        use crate::reading::Reading;
        use crate::testing::Machine;
        let mut facts = Machine::healthy("h200-sxm-141gb", 2).build();
        facts.origin = Origin::Snapshot {
            path: "snap".into(),
            description: Some("d".into()),
            collected_at: Some("2026-12-01T10:24:13Z".into()),
        };
        facts.machine.dmi = Dmi {
            sys_vendor: Reading::Value("Amazon EC2".into()),
            product_name: Reading::Value("p5en.48xlarge".into()),
            ..Dmi::unread("not read")
        };
        let mut r = Report::build(&facts, &crate::Policy::default());
        r.audit.audited_at = Some("2026-12-02T08:00:00Z".into());
        serde_json::to_value(r).unwrap()
    }

    #[test]
    fn a_report_validates_and_a_wrong_one_does_not() {
        let v = validator();
        let good = sample();
        assert_eq!(errors(&v, &good), Vec::<String>::new());
        assert_eq!(good["machine"]["instance_type"], "p5en.48xlarge");
        assert_eq!(
            good["audit"]["snapshot_collected_at"],
            "2026-12-01T10:24:13Z"
        );
        assert!(good["gpus"][0]["serial"].is_string(), "{}", good["gpus"][0]);

        // Each of these breaks the contract in one place; the schema must say where.
        type Break = fn(&mut serde_json::Value);
        let cases: [(&str, Break); 6] = [
            ("/schema", |r| r["schema"] = "gpuaudit.report/2".into()),
            ("/findings/0/status", |r| {
                r["findings"][0]["status"] = "ok".into()
            }),
            ("/audit/audited_at", |r| {
                r["audit"]["audited_at"] = "yesterday".into()
            }),
            ("/summary/fail", |r| r["summary"]["fail"] = (-1).into()),
            ("/gpus/0/index", |r| r["gpus"][0]["index"] = "0".into()),
            ("", |r| {
                r.as_object_mut().unwrap().remove("findings");
            }),
        ];
        for (path, break_it) in cases {
            let mut r = good.clone();
            break_it(&mut r);
            let e = errors(&v, &r);
            assert!(
                e.iter().any(|m| m.starts_with(&format!("{path}:"))),
                "{path}: {e:?}"
            );
        }
        // A report written before the fields of this version were added still validates:
        // they are optional.
        let mut old = good.clone();
        for (section, key) in [
            ("audit", "audited_at"),
            ("audit", "snapshot_collected_at"),
            ("machine", "instance_type"),
            ("gpus", "serial"),
        ] {
            match section {
                "gpus" => {
                    old["gpus"][0].as_object_mut().unwrap().remove(key);
                }
                s => {
                    old[s].as_object_mut().unwrap().remove(key);
                }
            }
        }
        assert_eq!(errors(&v, &old), Vec::<String>::new());
    }

    #[test]
    fn a_reading_is_its_value_or_the_reason() {
        use crate::reading::Reading;
        let schema = schemars::schema_for!(Reading<u32>).to_value();
        let v = jsonschema::validator_for(&schema).unwrap();
        for ok in [
            serde_json::to_value(Reading::Value(16u32)).unwrap(),
            serde_json::to_value(Reading::<u32>::unavailable("sysfs: no such file")).unwrap(),
        ] {
            assert!(v.is_valid(&ok), "{ok}");
        }
        for bad in [
            serde_json::json!("16"),
            serde_json::json!({"unavailable": 3}),
            serde_json::json!({"unavailable": "x", "also": 1}),
            serde_json::json!({"Value": 16}),
        ] {
            assert!(!v.is_valid(&bad), "{bad}");
        }
    }
}
