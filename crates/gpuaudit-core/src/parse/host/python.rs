//! Python installs: torch/version.py, wheel metadata (dist-info), and the JSON the torch
//! query script prints.

use super::truncate;
use crate::parse::ParseError;
use serde::{Deserialize, Serialize};

/// What torch/version.py says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TorchVersionPy {
    pub version: String,
    pub cuda: Option<String>,
    pub hip: Option<String>,
}

/// The right-hand side of `name = 'x'` / `name: Optional[str] = 'x'` / `name = None`:
/// `Some(Some(x))`, `Some(None)` for None, `None` when the line is not that assignment.
fn assignment(line: &str, name: &str) -> Option<Option<String>> {
    let rest = line.trim().strip_prefix(name)?;
    // Not a longer name ("cuda_version").
    if rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let (_, value) = rest.split_once('=')?;
    let v = value.trim();
    if v.starts_with("None") {
        return Some(None);
    }
    let q = v.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = &v[1..];
    let end = inner.find(q)?;
    Some(Some(inner[..end].to_string()))
}

pub fn parse_torch_version_py(text: &str) -> Result<TorchVersionPy, ParseError> {
    if crate::parse::host::looks_binary(text) {
        return Err(ParseError::Malformed("binary content".into()));
    }
    let mut version = None;
    let mut cuda = None;
    let mut hip = None;
    for line in text.lines() {
        if let Some(v) = assignment(line, "__version__") {
            version = v;
        } else if let Some(v) = assignment(line, "cuda") {
            cuda = v;
        } else if let Some(v) = assignment(line, "hip") {
            hip = v;
        }
    }
    let version =
        version.ok_or_else(|| ParseError::Malformed("no __version__ = '...' line".into()))?;
    Ok(TorchVersionPy { version, cuda, hip })
}

/// The "Name:" and "Version:" of a dist-info METADATA (its header, before the first blank
/// line).
pub fn parse_metadata(text: &str) -> Result<(String, String), ParseError> {
    let mut name = None;
    let mut version = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("Version:") {
            version = Some(v.trim().to_string());
        }
    }
    match (name, version) {
        (Some(n), Some(v)) if !n.is_empty() && !v.is_empty() => Ok((n, v)),
        _ => Err(ParseError::Malformed("no Name:/Version: header".into())),
    }
}

/// The header part of METADATA (what a snapshot keeps: no long description).
pub fn metadata_header(text: &str) -> String {
    let mut s = String::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with("Name:")
            || line.starts_with("Version:")
            || line.starts_with("Metadata-Version:")
        {
            s.push_str(line);
            s.push('\n');
        }
    }
    s
}

/// "nvidia_nccl_cu12-2.21.5.dist-info" -> ("nvidia_nccl_cu12", "2.21.5").
pub fn dist_info_name(dir: &str) -> Option<(String, String)> {
    let stem = dir.strip_suffix(".dist-info")?;
    let (n, v) = stem.split_once('-')?;
    (!n.is_empty() && !v.is_empty()).then(|| (n.to_string(), v.to_string()))
}

/// Shared-library paths listed in a wheel's RECORD ("nvidia/nccl/lib/libnccl.so.2,sha256=..,n").
pub fn parse_record_libs(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split(',').next())
        .map(str::trim)
        .filter(|p| {
            p.rsplit('/')
                .next()
                .is_some_and(|f| super::libs::library_of(f).is_some())
        })
        .map(str::to_string)
        .collect()
}

/// What the torch query script printed (see gpuaudit-probe's host::python).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TorchQuery {
    pub python: Option<String>,
    pub prefix: Option<String>,
    /// Set when `import torch` failed.
    pub error: Option<String>,
    pub torch: Option<String>,
    /// torch.__file__.
    pub file: Option<String>,
    pub cuda: Option<String>,
    pub hip: Option<String>,
    /// torch._C._cuda_getArchFlags(): "sm_50 sm_60 ... sm_90".
    pub arch_flags: Option<String>,
    pub arch_error: Option<String>,
    /// torch.backends.cudnn.version(): 90100.
    pub cudnn: Option<i64>,
    /// torch.cuda.nccl.version() joined with dots: "2.21.5".
    pub nccl: Option<String>,
}

pub fn parse_torch_query(text: &str) -> Result<TorchQuery, ParseError> {
    // The script prints one JSON line last; anything before it (warnings) is ignored.
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| {
            let first = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("");
            ParseError::Malformed(format!("no JSON in the output: {}", truncate(first, 160)))
        })?;
    serde_json::from_str(line).map_err(|e| ParseError::Malformed(format!("bad JSON: {e}")))
}

/// cuDNN's version number as a version: 90100 -> "9.1.0" (cuDNN 9: major*10000), 8902 ->
/// "8.9.2" (cuDNN 7 and 8: major*1000).
pub fn cudnn_version(v: i64) -> Option<String> {
    if v <= 0 {
        return None;
    }
    if v >= 90000 {
        Some(format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100))
    } else {
        Some(format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100))
    }
}

/// pyvenv.cfg's `home = /usr/bin`.
pub fn pyvenv_home(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| v.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_py() {
        let t = "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n\
                 __version__ = '2.5.1+cu124'\n\
                 debug = False\n\
                 cuda: Optional[str] = '12.4'\n\
                 git_version = 'abc'\n\
                 hip: Optional[str] = None\n";
        let v = parse_torch_version_py(t).unwrap();
        assert_eq!(v.version, "2.5.1+cu124");
        assert_eq!(v.cuda.as_deref(), Some("12.4"));
        assert_eq!(v.hip, None);
        let cpu = parse_torch_version_py("__version__ = \"2.4.0+cpu\"\ncuda = None\n").unwrap();
        assert_eq!(cpu.cuda, None);
        assert!(parse_torch_version_py("garbage").is_err());
        assert!(parse_torch_version_py("\0\0\0").is_err());
        assert!(parse_torch_version_py("__version__ = '").is_err());
    }

    #[test]
    fn metadata_and_dist_info() {
        let m = "Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.21.5\n\nLong text\nName: no\n";
        assert_eq!(
            parse_metadata(m).unwrap(),
            ("nvidia-nccl-cu12".into(), "2.21.5".into())
        );
        assert_eq!(
            metadata_header(m),
            "Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.21.5\n"
        );
        assert!(parse_metadata("garbage").is_err());
        assert_eq!(
            dist_info_name("nvidia_nccl_cu12-2.21.5.dist-info"),
            Some(("nvidia_nccl_cu12".into(), "2.21.5".into()))
        );
        assert_eq!(dist_info_name("torch"), None);
        let r = "nvidia/nccl/lib/libnccl.so.2,sha256=x,1\nnvidia/nccl/include/nccl.h,sha256=y,2\n";
        assert_eq!(parse_record_libs(r), vec!["nvidia/nccl/lib/libnccl.so.2"]);
    }

    #[test]
    fn query_output() {
        let q = parse_torch_query(
            "Warning: something\n{\"python\": \"3.12.3\", \"torch\": \"2.5.1+cu124\", \"cuda\": \"12.4\", \"arch_flags\": \"sm_50 sm_90\", \"cudnn\": 90100, \"nccl\": \"2.21.5\"}\n",
        )
        .unwrap();
        assert_eq!(q.torch.as_deref(), Some("2.5.1+cu124"));
        assert_eq!(q.cudnn, Some(90100));
        assert!(parse_torch_query("Traceback ...\nImportError").is_err());
        assert!(parse_torch_query("{not json").is_err());
    }

    #[test]
    fn cudnn_numbers() {
        assert_eq!(cudnn_version(90100).as_deref(), Some("9.1.0"));
        assert_eq!(cudnn_version(8902).as_deref(), Some("8.9.2"));
        assert_eq!(cudnn_version(0), None);
    }

    #[test]
    fn venv_home() {
        assert_eq!(
            pyvenv_home("home = /usr/bin\ninclude-system-site-packages = false\n").as_deref(),
            Some("/usr/bin")
        );
    }
}
