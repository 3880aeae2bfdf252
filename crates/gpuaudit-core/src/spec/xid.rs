//! NVIDIA's Xid catalog: what each Xid code means, who causes it and what to do.
//!
//! `data/xid.toml` at the repository root is embedded at build time; it cites the page of
//! NVIDIA's "XID Errors" document every row was read from.

use serde::Deserialize;
use std::sync::OnceLock;

const EMBEDDED: &str = include_str!("../../../../data/xid.toml");

/// How health.xid judges a code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XidJudge {
    /// Caused by the application: information, a warning where it repeats.
    Application,
    Info,
    Warn,
    Fail,
    /// Xid 154: judged by the recovery action its text names.
    Recovery,
}

/// One row of the catalog.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XidInfo {
    pub code: u32,
    pub mnemonic: String,
    pub name: String,
    pub cause: String,
    pub immediate: String,
    pub meaning: String,
    pub resolution: String,
    pub judge: XidJudge,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    xid: Vec<XidInfo>,
}

/// The catalog could not be read.
#[derive(Debug, thiserror::Error)]
pub enum XidCatalogError {
    #[error("data/xid.toml: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("data/xid.toml: Xid {0} is listed twice")]
    Twice(u32),
    #[error("data/xid.toml: Xid {0} has cause {1:?} (application, driver, hardware, or two of them joined by \" or \")")]
    Cause(u32, String),
}

/// The catalog, in code order.
#[derive(Debug)]
pub struct XidCatalog {
    rows: Vec<XidInfo>,
}

impl XidCatalog {
    pub fn parse(text: &str) -> Result<XidCatalog, XidCatalogError> {
        let mut rows = toml::from_str::<Raw>(text)?.xid;
        rows.sort_by_key(|r| r.code);
        for w in rows.windows(2) {
            if w[0].code == w[1].code {
                return Err(XidCatalogError::Twice(w[0].code));
            }
        }
        for r in &rows {
            let ok = r
                .cause
                .split(" or ")
                .all(|c| matches!(c, "application" | "driver" | "hardware"));
            if !ok {
                return Err(XidCatalogError::Cause(r.code, r.cause.clone()));
            }
        }
        Ok(XidCatalog { rows })
    }

    /// The embedded catalog (empty, never a panic, should it not parse: its test fails then).
    pub fn embedded() -> &'static XidCatalog {
        static CATALOG: OnceLock<XidCatalog> = OnceLock::new();
        CATALOG
            .get_or_init(|| XidCatalog::parse(EMBEDDED).unwrap_or(XidCatalog { rows: Vec::new() }))
    }

    pub fn get(&self, code: u32) -> Option<&XidInfo> {
        self.rows
            .binary_search_by_key(&code, |r| r.code)
            .ok()
            .and_then(|i| self.rows.get(i))
    }

    pub fn rows(&self) -> &[XidInfo] {
        &self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_catalog_parses() {
        let c = XidCatalog::parse(EMBEDDED).unwrap();
        assert!(c.rows().len() >= 30);
        assert_eq!(XidCatalog::embedded().rows().len(), c.rows().len());
        // The classes the issue names.
        for code in [13, 31, 43, 45] {
            assert_eq!(c.get(code).unwrap().judge, XidJudge::Application, "{code}");
        }
        for code in [48, 64, 79, 95, 140] {
            assert_eq!(c.get(code).unwrap().judge, XidJudge::Fail, "{code}");
        }
        assert_eq!(c.get(154).unwrap().judge, XidJudge::Recovery);
        assert!(c.get(999).is_none());
        for r in c.rows() {
            assert!(
                !r.meaning.is_empty() && !r.resolution.is_empty(),
                "{}",
                r.code
            );
        }
    }

    #[test]
    fn a_bad_catalog_is_an_error() {
        let row = |code: u32, cause: &str| {
            format!(
                "[[xid]]\ncode = {code}\nmnemonic = \"M\"\nname = \"N\"\ncause = \"{cause}\"\nimmediate = \"I\"\nmeaning = \"m\"\nresolution = \"r\"\njudge = \"info\"\n"
            )
        };
        let twice = format!("{}{}", row(1, "driver"), row(1, "driver"));
        assert!(matches!(
            XidCatalog::parse(&twice),
            Err(XidCatalogError::Twice(1))
        ));
        assert!(matches!(
            XidCatalog::parse(&row(2, "cosmic rays")),
            Err(XidCatalogError::Cause(2, _))
        ));
        assert!(XidCatalog::parse("[[xid]]\ncode = 1\n").is_err());
    }
}
