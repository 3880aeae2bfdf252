//! Which CUDA toolkit a driver can run, from NVIDIA's release-notes tables.
//!
//! `data/cuda.toml` at the repository root is embedded at build time; it cites the release
//! notes every row was copied from.

use crate::facts::{ComputeCapability, CudaVersion};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

const EMBEDDED: &str = include_str!("../../../../data/cuda.toml");

/// An NVIDIA driver version such as "580.159.04" or "455.23".
///
/// Compared numerically, field by field, a missing field counting as 0 ("455.23" ==
/// "455.23.0" < "455.32"). The text is kept as read so that "580.65.06" prints with its
/// leading zero.
#[derive(Clone, Debug)]
pub struct DriverVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: Option<u32>,
    text: String,
}

impl DriverVersion {
    /// "580.159.04", "455.23", or a bare branch "580". Surrounding whitespace is ignored;
    /// anything else (letters, empty fields, more than three fields) is `None`.
    pub fn parse(s: &str) -> Option<DriverVersion> {
        let text = s.trim();
        let mut fields = text.split('.');
        let major = parse_field(fields.next()?)?;
        let minor = match fields.next() {
            Some(f) => parse_field(f)?,
            None => 0,
        };
        let patch = match fields.next() {
            Some(f) => Some(parse_field(f)?),
            None => None,
        };
        if fields.next().is_some() {
            return None;
        }
        Some(DriverVersion {
            major,
            minor,
            patch,
            text: text.to_string(),
        })
    }

    /// The driver branch ("R580" is branch 580).
    pub fn branch(&self) -> u32 {
        self.major
    }

    fn key(&self) -> (u32, u32, u32) {
        (self.major, self.minor, self.patch.unwrap_or(0))
    }
}

fn parse_field(f: &str) -> Option<u32> {
    if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    f.parse().ok()
}

impl PartialEq for DriverVersion {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for DriverVersion {}

impl PartialOrd for DriverVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DriverVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a driver version: {0:?}")]
pub struct BadDriverVersion(pub String);

impl FromStr for DriverVersion {
    type Err = BadDriverVersion;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DriverVersion::parse(s).ok_or_else(|| BadDriverVersion(s.to_string()))
    }
}

impl Serialize for DriverVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for DriverVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        DriverVersion::parse(&s).ok_or_else(|| serde::de::Error::custom(BadDriverVersion(s)))
    }
}

/// One later release of a toolkit minor version ("CUDA 12.4 Update 1").
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolkitUpdate {
    pub update: u32,
    pub min_driver: DriverVersion,
}

/// What one CUDA toolkit minor version asks of the driver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolkitReq {
    pub version: CudaVersion,
    /// The Linux driver of the toolkit's GA release (Table 3): a driver at least this new runs
    /// everything the toolkit builds.
    pub ga_min_driver: DriverVersion,
    /// The least driver that runs this toolkit's binaries through minor version compatibility
    /// (Table 2), with a limited feature set and no JIT of newer PTX.
    pub minor_compat_min_driver: DriverVersion,
    /// "Update N" releases, in order.
    pub updates: Vec<ToolkitUpdate>,
}

/// The first toolkit and driver that support an architecture, and the last driver branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArchSupport {
    pub name: String,
    pub compute_capabilities: Vec<ComputeCapability>,
    pub first_cuda: CudaVersion,
    pub min_driver: DriverVersion,
    /// The last driver branch that drives the architecture's GPUs (Kepler: R470; Maxwell,
    /// Pascal, Volta: R580); `None` while NVIDIA supports it in new branches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_branch: Option<u32>,
}

impl ArchSupport {
    /// Whether the driver's branch comes after the architecture's last one ("595" on a
    /// Pascal GPU, "535" on a Kepler GPU).
    pub fn after_last_branch(&self, driver: &DriverVersion) -> bool {
        self.last_branch.is_some_and(|b| driver.branch() > b)
    }
}

/// How a driver stands to a toolkit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DriverSupport {
    /// At least the toolkit's GA driver.
    Full,
    /// Older than the GA driver but within minor version compatibility.
    MinorCompat,
    /// Too old: the toolkit's binaries fail with "CUDA driver version is insufficient" unless
    /// the forward-compatibility package is installed.
    Unsupported,
}

#[derive(Clone, Debug, Serialize)]
pub struct CudaTable {
    /// Ascending by version.
    pub toolkits: Vec<ToolkitReq>,
    /// Ascending by first CUDA version.
    pub architectures: Vec<ArchSupport>,
}

#[derive(Debug, thiserror::Error)]
pub enum CudaTableError {
    #[error("data/cuda.toml: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("data/cuda.toml: {0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    minor_compat: Vec<RawMinorCompat>,
    toolkit: Vec<RawToolkit>,
    architecture: Vec<RawArch>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMinorCompat {
    major: u32,
    min_driver: DriverVersion,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolkit {
    version: String,
    ga: DriverVersion,
    #[serde(default)]
    updates: Vec<RawUpdate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpdate {
    update: u32,
    min_driver: DriverVersion,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArch {
    name: String,
    compute_capabilities: Vec<String>,
    first_cuda: String,
    min_driver: DriverVersion,
    #[serde(default)]
    last_branch: Option<u32>,
}

/// "12.4" exactly: `CudaVersion::parse` also takes "12" and "12.4.1", which in this file
/// would be typos.
fn strict_cuda(s: &str) -> Result<CudaVersion, CudaTableError> {
    let bad = || CudaTableError::Invalid(format!("bad CUDA version {s:?} (want MAJOR.MINOR)"));
    let (a, b) = s.split_once('.').ok_or_else(bad)?;
    let major = parse_field(a).ok_or_else(bad)?;
    let minor = parse_field(b).ok_or_else(bad)?;
    Ok(CudaVersion::new(major, minor))
}

fn parse_cc(s: &str) -> Result<ComputeCapability, CudaTableError> {
    let bad = || CudaTableError::Invalid(format!("bad compute capability {s:?}"));
    let (a, b) = s.split_once('.').ok_or_else(bad)?;
    Ok(ComputeCapability {
        major: parse_field(a).ok_or_else(bad)?,
        minor: parse_field(b).ok_or_else(bad)?,
    })
}

impl CudaTable {
    pub fn parse(text: &str) -> Result<CudaTable, CudaTableError> {
        let raw: RawTable = toml::from_str(text)?;
        let mut toolkits = Vec::with_capacity(raw.toolkit.len());
        for t in raw.toolkit {
            let version = strict_cuda(&t.version)?;
            let compat = raw
                .minor_compat
                .iter()
                .find(|m| m.major == version.major)
                .ok_or_else(|| {
                    CudaTableError::Invalid(format!(
                        "CUDA {version}: no minor_compat row for major {}",
                        version.major
                    ))
                })?;
            let mut updates: Vec<ToolkitUpdate> = t
                .updates
                .into_iter()
                .map(|u| ToolkitUpdate {
                    update: u.update,
                    min_driver: u.min_driver,
                })
                .collect();
            updates.sort_by_key(|u| u.update);
            toolkits.push(ToolkitReq {
                version,
                ga_min_driver: t.ga,
                minor_compat_min_driver: compat.min_driver.clone(),
                updates,
            });
        }
        toolkits.sort_by_key(|t| t.version);
        if let Some(w) = toolkits.windows(2).find(|w| w[0].version == w[1].version) {
            return Err(CudaTableError::Invalid(format!(
                "CUDA {} listed twice",
                w[0].version
            )));
        }
        let mut architectures = Vec::with_capacity(raw.architecture.len());
        for a in raw.architecture {
            let compute_capabilities = a
                .compute_capabilities
                .iter()
                .map(|c| parse_cc(c))
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(last) = a.last_branch {
                if last < a.min_driver.branch() {
                    return Err(CudaTableError::Invalid(format!(
                        "{}: last_branch {last} is older than min_driver {}",
                        a.name, a.min_driver
                    )));
                }
            }
            architectures.push(ArchSupport {
                name: a.name,
                compute_capabilities,
                first_cuda: strict_cuda(&a.first_cuda)?,
                min_driver: a.min_driver,
                last_branch: a.last_branch,
            });
        }
        architectures.sort_by_key(|a| a.first_cuda);
        Ok(CudaTable {
            toolkits,
            architectures,
        })
    }

    /// The requirements of one toolkit minor version; the patch of "12.4.1" is not part of a
    /// `CudaVersion`, so any 12.4 release finds the 12.4 row.
    pub fn toolkit(&self, version: CudaVersion) -> Option<&ToolkitReq> {
        self.toolkits.iter().find(|t| t.version == version)
    }

    /// The newest toolkit whose GA driver requirement `driver` meets. Minor version
    /// compatibility is deliberately not counted: it runs binaries with a reduced feature set,
    /// which is not what "supports CUDA 12.8" means to a user.
    pub fn max_cuda_for_driver(&self, driver: &DriverVersion) -> Option<CudaVersion> {
        self.toolkits
            .iter()
            .filter(|t| *driver >= t.ga_min_driver)
            .map(|t| t.version)
            .max()
    }

    /// How `driver` stands to toolkit `version`; `None` for a toolkit not in the table.
    pub fn driver_support(
        &self,
        driver: &DriverVersion,
        version: CudaVersion,
    ) -> Option<DriverSupport> {
        let t = self.toolkit(version)?;
        Some(if *driver >= t.ga_min_driver {
            DriverSupport::Full
        } else if *driver >= t.minor_compat_min_driver {
            DriverSupport::MinorCompat
        } else {
            DriverSupport::Unsupported
        })
    }

    /// The architecture a compute capability belongs to.
    pub fn architecture(&self, cc: ComputeCapability) -> Option<&ArchSupport> {
        self.architectures
            .iter()
            .find(|a| a.compute_capabilities.contains(&cc))
    }
}

/// The table compiled into the binary.
pub fn cuda_table() -> &'static CudaTable {
    static TABLE: OnceLock<CudaTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        // The embedded file is checked by a test; a broken one is a build defect, and an empty
        // table makes the checks that need it skip rather than crash.
        CudaTable::parse(EMBEDDED).unwrap_or(CudaTable {
            toolkits: Vec::new(),
            architectures: Vec::new(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dv(s: &str) -> DriverVersion {
        DriverVersion::parse(s).unwrap()
    }

    fn table() -> CudaTable {
        CudaTable::parse(EMBEDDED).expect("data/cuda.toml must parse")
    }

    #[test]
    fn driver_versions_parse_and_print_as_written() {
        let v = dv("580.65.06");
        assert_eq!((v.major, v.minor, v.patch), (580, 65, Some(6)));
        assert_eq!(v.to_string(), "580.65.06");
        assert_eq!(dv(" 455.23 ").to_string(), "455.23");
        assert_eq!(dv("580").branch(), 580);
        for bad in [
            "",
            ".",
            "580.",
            ".65",
            "580..06",
            "a.b",
            "580.65.06.1",
            "580,65",
            "-1",
            "580.6x",
            "+580",
            "580.+65",
        ] {
            assert!(DriverVersion::parse(bad).is_none(), "{bad:?} parsed");
            assert!(bad.parse::<DriverVersion>().is_err());
        }
    }

    #[test]
    fn driver_versions_compare_numerically() {
        assert!(dv("580.159.04") > dv("580.65.06"));
        assert!(dv("455.32") > dv("455.23.04"));
        assert!(dv("535.104.05") > dv("535.86.09"));
        assert!(dv("580") < dv("580.65.06"));
        assert_eq!(dv("455.23"), dv("455.23.0"));
        assert_ne!(dv("580.65.06"), dv("580.65.07"));
        assert_ne!(dv("580"), dv("590"));
        assert!(dv("1000.1") > dv("999.99.99"));
    }

    #[test]
    fn embedded_table_parses_and_is_ordered() {
        let t = table();
        let versions: Vec<CudaVersion> = t.toolkits.iter().map(|t| t.version).collect();
        let mut expected = Vec::new();
        for minor in 0..=8 {
            expected.push(CudaVersion::new(11, minor));
        }
        for minor in [0, 1, 2, 3, 4, 5, 6, 8, 9] {
            expected.push(CudaVersion::new(12, minor));
        }
        for minor in 0..=2 {
            expected.push(CudaVersion::new(13, minor));
        }
        assert_eq!(versions, expected);
        // A newer toolkit never asks for an older driver, and updates never go backwards.
        for w in t.toolkits.windows(2) {
            assert!(w[0].ga_min_driver < w[1].ga_min_driver, "{}", w[1].version);
        }
        for tk in &t.toolkits {
            let mut last = &tk.ga_min_driver;
            for u in &tk.updates {
                assert!(u.min_driver >= *last, "{} update {}", tk.version, u.update);
                last = &u.min_driver;
            }
            assert!(tk.minor_compat_min_driver <= tk.ga_min_driver || tk.version.minor == 0);
        }
    }

    #[test]
    fn lookups_match_the_release_notes() {
        let t = table();
        let r = t.toolkit(CudaVersion::new(12, 4)).unwrap();
        assert_eq!(r.ga_min_driver.to_string(), "550.54.14");
        assert_eq!(r.minor_compat_min_driver.to_string(), "525.60.13");
        assert_eq!(r.updates[0].min_driver.to_string(), "550.54.15");
        let r = t.toolkit(CudaVersion::new(13, 0)).unwrap();
        assert_eq!(r.ga_min_driver.to_string(), "580.65.06");
        assert_eq!(r.minor_compat_min_driver.to_string(), "580");
        let r = t.toolkit(CudaVersion::new(11, 8)).unwrap();
        assert_eq!(r.ga_min_driver.to_string(), "520.61.05");
        assert_eq!(r.minor_compat_min_driver.to_string(), "450.80.02");
        assert!(t.toolkit(CudaVersion::new(12, 7)).is_none());
        assert!(t.toolkit(CudaVersion::new(10, 2)).is_none());
    }

    #[test]
    fn newest_cuda_for_a_driver() {
        let t = table();
        let max = |d: &str| t.max_cuda_for_driver(&dv(d));
        assert_eq!(max("580.159.04"), Some(CudaVersion::new(13, 0)));
        assert_eq!(max("580.65.06"), Some(CudaVersion::new(13, 0)));
        assert_eq!(max("580.65.05"), Some(CudaVersion::new(12, 9)));
        assert_eq!(max("550.54.14"), Some(CudaVersion::new(12, 4)));
        assert_eq!(max("550.127.05"), Some(CudaVersion::new(12, 4)));
        assert_eq!(max("535.104.05"), Some(CudaVersion::new(12, 2)));
        assert_eq!(max("525.60.13"), Some(CudaVersion::new(12, 0)));
        assert_eq!(max("470.82.01"), Some(CudaVersion::new(11, 4)));
        assert_eq!(max("595.71.05"), Some(CudaVersion::new(13, 2)));
        assert_eq!(max("450.51.05"), Some(CudaVersion::new(11, 0)));
        assert_eq!(max("440.33"), None);
    }

    #[test]
    fn driver_support_levels() {
        let t = table();
        let s = |d: &str, v| t.driver_support(&dv(d), v);
        let c124 = CudaVersion::new(12, 4);
        assert_eq!(s("550.54.14", c124), Some(DriverSupport::Full));
        assert_eq!(s("535.104.05", c124), Some(DriverSupport::MinorCompat));
        assert_eq!(s("525.60.13", c124), Some(DriverSupport::MinorCompat));
        assert_eq!(s("520.61.05", c124), Some(DriverSupport::Unsupported));
        let c131 = CudaVersion::new(13, 1);
        assert_eq!(s("580.65.06", c131), Some(DriverSupport::MinorCompat));
        assert_eq!(s("575.57.08", c131), Some(DriverSupport::Unsupported));
        assert_eq!(s("590.44.01", c131), Some(DriverSupport::Full));
        assert_eq!(s("999", CudaVersion::new(12, 7)), None);
    }

    #[test]
    fn architectures_and_their_first_driver() {
        let t = table();
        let cc = |major, minor| ComputeCapability { major, minor };
        let a = t.architecture(cc(9, 0)).unwrap();
        assert_eq!(a.name, "Hopper");
        assert_eq!(a.first_cuda, CudaVersion::new(11, 8));
        assert_eq!(a.min_driver.to_string(), "520.61.05");
        assert_eq!(
            t.architecture(cc(8, 6)).unwrap().min_driver.to_string(),
            "455.23"
        );
        assert_eq!(t.architecture(cc(7, 0)).unwrap().min_driver.branch(), 384);
        assert_eq!(t.architecture(cc(10, 0)).unwrap().min_driver.branch(), 570);
        assert_eq!(t.architecture(cc(6, 1)).unwrap().name, "Pascal");
        assert_eq!(
            t.architecture(cc(6, 0)).unwrap().min_driver.to_string(),
            "367.48"
        );
        assert_eq!(
            t.architecture(cc(10, 3)).unwrap().first_cuda,
            CudaVersion::new(12, 9)
        );
        assert!(t.architecture(cc(5, 2)).is_none());
        // Kepler GK10x (the GRID K520): CUDA 4.2, driver branch R295.
        let k = t.architecture(cc(3, 0)).unwrap();
        assert_eq!(
            (k.name.as_str(), k.first_cuda),
            ("Kepler", CudaVersion::new(4, 2))
        );
        assert_eq!(k.min_driver.to_string(), "295");
        assert!(t.architecture(cc(3, 5)).is_none());
        // Where the first toolkit is in the table, the architecture's driver is its GA driver.
        for a in &t.architectures {
            if let Some(tk) = t.toolkit(a.first_cuda) {
                assert_eq!(a.min_driver, tk.ga_min_driver, "{}", a.name);
            }
        }
    }

    #[test]
    fn the_last_driver_branch_of_retired_architectures() {
        let t = table();
        let cc = |major, minor| ComputeCapability { major, minor };
        let last = |major, minor| t.architecture(cc(major, minor)).unwrap().last_branch;
        // NVIDIA's architecture matrix: Kepler ends with R470, Pascal and Volta with R580.
        assert_eq!(last(3, 0), Some(470));
        assert_eq!(last(6, 0), Some(580));
        assert_eq!(last(6, 1), Some(580));
        assert_eq!(last(7, 0), Some(580));
        for (major, minor) in [
            (7, 5),
            (8, 0),
            (8, 6),
            (8, 9),
            (9, 0),
            (10, 0),
            (10, 3),
            (12, 0),
        ] {
            assert_eq!(last(major, minor), None, "{major}.{minor}");
        }
        let kepler = t.architecture(cc(3, 0)).unwrap();
        // The whole last branch drives it; the next branch does not.
        assert!(!kepler.after_last_branch(&dv("470.256.02")));
        assert!(!kepler.after_last_branch(&dv("470")));
        assert!(!kepler.after_last_branch(&dv("418.87.01")));
        assert!(kepler.after_last_branch(&dv("495.29.05")));
        assert!(kepler.after_last_branch(&dv("471")));
        let volta = t.architecture(cc(7, 0)).unwrap();
        assert!(!volta.after_last_branch(&dv("580.159.04")));
        assert!(volta.after_last_branch(&dv("590.44.01")));
        let hopper = t.architecture(cc(9, 0)).unwrap();
        assert!(!hopper.after_last_branch(&dv("999.1")));
        // A last branch before the first driver is a typo, refused.
        let row = |last: &str| {
            format!(
                "minor_compat = []\ntoolkit = []\n[[architecture]]\nname = \"K\"\ncompute_capabilities = [\"3.0\"]\nfirst_cuda = \"4.2\"\nmin_driver = \"295\"\n{last}"
            )
        };
        assert!(CudaTable::parse(&row("")).is_ok());
        assert!(CudaTable::parse(&row("last_branch = 295")).is_ok());
        assert!(CudaTable::parse(&row("last_branch = 294")).is_err());
        assert!(CudaTable::parse(&row("last_branch = \"470\"")).is_err());
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for text in [
            "",
            "garbage = [",
            "minor_compat = []\ntoolkit = []\narchitecture = []\nextra = 1",
            "minor_compat = []\narchitecture = []\n[[toolkit]]\nversion = \"12.4\"\nga = \"550\"",
            "minor_compat = [{ major = 12, min_driver = \"x\" }]\ntoolkit = []\narchitecture = []",
            "minor_compat = [{ major = 12, min_driver = \"525\" }]\narchitecture = []\n[[toolkit]]\nversion = \"12\"\nga = \"550\"",
            "minor_compat = [{ major = 12, min_driver = \"525\" }]\narchitecture = []\n[[toolkit]]\nversion = \"12.4\"\nga = \"550\"\n[[toolkit]]\nversion = \"12.4\"\nga = \"551\"",
        ] {
            assert!(CudaTable::parse(text).is_err(), "{text:?} parsed");
        }
    }

    #[test]
    fn embedded_table_is_served() {
        assert!(!cuda_table().toolkits.is_empty());
    }
}
