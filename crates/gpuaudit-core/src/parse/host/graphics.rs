//! Graphics loader manifests: Vulkan ICD JSON files (the Vulkan loader's "Loader and Driver
//! Interface") and glvnd's EGL vendor JSON files. Both name the driver library under
//! `ICD.library_path`.

use crate::facts::IcdManifest;

/// One manifest file. A file that is not JSON, or names no library, keeps the reason in
/// `error` (the loader skips such a file).
pub fn parse_icd_manifest(path: &str, text: &str) -> IcdManifest {
    let mut m = IcdManifest {
        path: path.to_string(),
        library: None,
        error: None,
    };
    let v: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            m.error = Some(format!("not JSON: {e}"));
            return m;
        }
    };
    // File format 1.0.1 of the Vulkan loader also allows an "ICDs" array.
    let icd = v.get("ICD").or_else(|| {
        v.get("ICDs")
            .and_then(|a| a.as_array())
            .and_then(|a| a.first())
    });
    match icd
        .and_then(|i| i.get("library_path"))
        .and_then(|p| p.as_str())
        .filter(|p| !p.trim().is_empty())
    {
        Some(p) => m.library = Some(crate::parse::fact_line(p)),
        None => m.error = Some("names no ICD.library_path".into()),
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests() {
        let m = parse_icd_manifest(
            "/usr/share/vulkan/icd.d/nvidia_icd.json",
            r#"{"file_format_version":"1.0.1","ICD":{"library_path":"libGLX_nvidia.so.0","api_version":"1.4.312"}}"#,
        );
        assert_eq!(m.library.as_deref(), Some("libGLX_nvidia.so.0"));
        assert!(m.error.is_none() && m.is_nvidia());
        let m = parse_icd_manifest(
            "/usr/share/glvnd/egl_vendor.d/50_mesa.json",
            r#"{"file_format_version":"1.0.0","ICD":{"library_path":"libEGL_mesa.so.0"}}"#,
        );
        assert!(!m.is_nvidia());
        let m = parse_icd_manifest(
            "x.json",
            r#"{"ICDs":[{"library_path":"/opt/nv/libGLX_nvidia.so.0"}]}"#,
        );
        assert!(m.is_nvidia());
        let m = parse_icd_manifest("x.json", "{ not json");
        assert!(m
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("not JSON")));
        assert!(!m.is_nvidia());
        let m = parse_icd_manifest("x.json", r#"{"ICD":{"library_path":" "}}"#);
        assert_eq!(m.error.as_deref(), Some("names no ICD.library_path"));
        let m = parse_icd_manifest(
            "x.json",
            r#"{"ICD":{"library_path":"libnvidia_x.so"}, "x": 1}"#,
        );
        assert!(m.is_nvidia());
        let m = parse_icd_manifest(
            "x.json",
            r#"{"ICD":{"library_path":"/usr/lib/nvidia/libEGL_mesa.so.0"}}"#,
        );
        assert!(!m.is_nvidia(), "only the file name counts");
    }
}
