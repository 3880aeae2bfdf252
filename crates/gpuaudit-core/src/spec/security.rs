//! The security bulletins of the GPU software stack: which versions of the NVIDIA driver, the
//! CUDA toolkit, the NVIDIA container toolkit, runc, containerd and Docker Engine each bulletin
//! concerns, and the version that fixes it.
//!
//! `data/security.toml` at the repository root is embedded at build time; it is dated
//! (`checked`) and every entry names the bulletin or advisory it was read from.

use crate::parse::version::{compare, in_branch, Upstream};
use serde::Deserialize;
use std::cmp::Ordering;
use std::sync::OnceLock;

const EMBEDDED: &str = include_str!("../../../../data/security.toml");

/// The products the table covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Product {
    Driver,
    CudaToolkit,
    ContainerToolkit,
    Runc,
    Containerd,
    Docker,
}

impl Product {
    pub const ALL: [Product; 6] = [
        Product::Driver,
        Product::CudaToolkit,
        Product::ContainerToolkit,
        Product::Runc,
        Product::Containerd,
        Product::Docker,
    ];

    /// As a finding names it.
    pub fn name(self) -> &'static str {
        match self {
            Product::Driver => "NVIDIA driver",
            Product::CudaToolkit => "CUDA toolkit",
            Product::ContainerToolkit => "NVIDIA Container Toolkit",
            Product::Runc => "runc",
            Product::Containerd => "containerd",
            Product::Docker => "Docker Engine",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

/// What a source says of a branch older than its newest listed one that it gives no fix for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unlisted {
    /// Every version is affected (the source says so).
    Affected,
    /// "Earlier branch releases ... might also be affected" (NVIDIA's note).
    Maybe,
    /// Only the listed ranges are affected.
    Unaffected,
}

/// One branch the bulletin lists.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    /// "570" (570.*), "1.2" (1.2.*), "*" (every version).
    pub branch: String,
    pub fixed: Option<String>,
    pub last_affected: Option<String>,
    pub introduced: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bulletin {
    pub id: String,
    pub title: String,
    pub updated: String,
    pub product: Product,
    pub cves: Vec<String>,
    pub severity: Severity,
    pub cvss: Option<f64>,
    /// The source says an exploit reaches the host from a container.
    pub escape: bool,
    pub unlisted: Unlisted,
    pub impact: String,
    pub url: String,
    pub source: Option<String>,
    pub move_to: Option<String>,
    #[serde(rename = "range")]
    pub ranges: Vec<Range>,
}

/// How a bulletin concerns a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// Not concerned: fixed, before the flaw, or a branch the bulletin does not cover.
    Unaffected,
    /// Inside an affected range; `fix` is the version to move to.
    Affected { fix: String },
    /// A branch the bulletin lists no fix for, which its source says may be affected.
    Maybe { fix: String },
}

impl Bulletin {
    fn upstream(v: &str) -> String {
        Upstream::parse(v)
            .map(|u| u.version)
            .unwrap_or_else(|| v.to_string())
    }

    /// How this bulletin concerns the upstream `version` ([`Upstream::version`]).
    pub fn exposure(&self, version: &str) -> Exposure {
        let lt = |a: &str, b: &str| compare(a, &Self::upstream(b)) == Ordering::Less;
        let le = |a: &str, b: &str| compare(a, &Self::upstream(b)) != Ordering::Greater;
        if let Some(r) = self.ranges.iter().find(|r| in_branch(version, &r.branch)) {
            if r.introduced.as_deref().is_some_and(|i| lt(version, i)) {
                return Exposure::Unaffected;
            }
            let affected = match (&r.fixed, &r.last_affected) {
                (Some(f), Some(l)) => lt(version, f) || le(version, l),
                (Some(f), None) => lt(version, f),
                (None, Some(l)) => le(version, l),
                (None, None) => true,
            };
            if !affected {
                return Exposure::Unaffected;
            }
            let fix = r
                .fixed
                .clone()
                .or_else(|| self.move_to.clone())
                .unwrap_or_else(|| self.next_fix(version));
            return Exposure::Affected { fix };
        }
        // A branch the bulletin does not list: newer than every listed branch is not
        // concerned; an older or in-between one is what `unlisted` says.
        let newest = self
            .ranges
            .iter()
            .filter_map(|r| r.fixed.as_deref().or(r.last_affected.as_deref()))
            .map(Self::upstream)
            .max_by(|a, b| compare(a, b));
        match newest {
            Some(n) if compare(version, &n) == Ordering::Less => {}
            _ => return Exposure::Unaffected,
        }
        let fix = self
            .move_to
            .clone()
            .unwrap_or_else(|| self.next_fix(version));
        match self.unlisted {
            Unlisted::Affected => Exposure::Affected { fix },
            Unlisted::Maybe => Exposure::Maybe { fix },
            Unlisted::Unaffected => Exposure::Unaffected,
        }
    }

    /// The lowest fixed version above `version` among the listed branches.
    fn next_fix(&self, version: &str) -> String {
        self.ranges
            .iter()
            .filter_map(|r| r.fixed.as_deref())
            .filter(|f| compare(&Self::upstream(f), version) == Ordering::Greater)
            .min_by(|a, b| compare(&Self::upstream(a), &Self::upstream(b)))
            .or_else(|| {
                self.ranges
                    .iter()
                    .filter_map(|r| r.fixed.as_deref())
                    .max_by(|a, b| compare(&Self::upstream(a), &Self::upstream(b)))
            })
            .unwrap_or("the newest release")
            .to_string()
    }
}

/// The table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SecurityTableError {
    #[error("data/security.toml: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("data/security.toml: {0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    checked: String,
    bulletin: Vec<Bulletin>,
}

/// The table.
#[derive(Debug)]
pub struct SecurityTable {
    /// The date every entry was last compared with its source ("2026-12-02").
    pub checked: String,
    pub bulletins: Vec<Bulletin>,
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

impl SecurityTable {
    pub fn parse(text: &str) -> Result<SecurityTable, SecurityTableError> {
        let raw: Raw = toml::from_str(text)?;
        let bad = |m: String| Err(SecurityTableError::Invalid(m));
        if !is_date(&raw.checked) {
            return bad(format!(
                "checked {:?} is not a date (YYYY-MM-DD)",
                raw.checked
            ));
        }
        let mut ids = std::collections::HashSet::new();
        for b in &raw.bulletin {
            if !ids.insert(b.id.as_str()) {
                return bad(format!("{} is listed twice", b.id));
            }
            if !is_date(&b.updated) {
                return bad(format!("{}: updated {:?} is not a date", b.id, b.updated));
            }
            if b.cves.is_empty() || !b.cves.iter().all(|c| c.starts_with("CVE-")) {
                return bad(format!("{}: cves must name CVEs", b.id));
            }
            if !b.url.starts_with("https://") {
                return bad(format!("{}: url must be https", b.id));
            }
            if b.ranges.is_empty() {
                return bad(format!("{}: no range", b.id));
            }
            for r in &b.ranges {
                if r.fixed.is_none() && r.last_affected.is_none() {
                    return bad(format!(
                        "{} {}: neither fixed nor last_affected",
                        b.id, r.branch
                    ));
                }
                for v in [&r.fixed, &r.last_affected, &r.introduced]
                    .into_iter()
                    .flatten()
                {
                    if Upstream::parse(v).is_none() {
                        return bad(format!("{} {}: {v:?} is not a version", b.id, r.branch));
                    }
                }
            }
        }
        Ok(SecurityTable {
            checked: raw.checked,
            bulletins: raw.bulletin,
        })
    }

    /// The bulletins of one product.
    pub fn of(&self, product: Product) -> impl Iterator<Item = &Bulletin> {
        self.bulletins.iter().filter(move |b| b.product == product)
    }
}

/// The embedded table. A table that does not parse is a build defect: the tests catch it, and
/// the check reports it as a skip rather than panicking.
pub fn security_table() -> Result<&'static SecurityTable, &'static str> {
    static TABLE: OnceLock<Result<SecurityTable, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| SecurityTable::parse(EMBEDDED).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(String::as_str)
}

#[cfg(test)]
mod tests;
