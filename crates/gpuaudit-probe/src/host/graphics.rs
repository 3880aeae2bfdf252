//! The graphics loaders' manifests: Vulkan ICD files and glvnd EGL vendor files, which tell
//! the loaders where the NVIDIA driver's Vulkan and EGL libraries are.

use crate::root::RootFs;
use crate::root::{abs, join};
use gpuaudit_core::facts::{GraphicsFiles, IcdManifest};
use gpuaudit_core::parse::host::graphics::parse_icd_manifest;
use gpuaudit_core::reading::Reading;

/// Where the Vulkan loader looks for ICD manifests on Linux (XDG_DATA_DIRS' defaults and
/// SYSCONFDIR), as root-relative paths.
pub const VULKAN_DIRS: &[&str] = &[
    "usr/share/vulkan/icd.d",
    "usr/local/share/vulkan/icd.d",
    "etc/vulkan/icd.d",
];
/// Where glvnd's libEGL looks for vendor files.
pub const EGL_DIRS: &[&str] = &["usr/share/glvnd/egl_vendor.d", "etc/glvnd/egl_vendor.d"];

/// The manifest files of some directories (root-relative), in directory order.
pub fn files(root: &RootFs, dirs: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    for d in dirs {
        for n in root.children(d) {
            if n.ends_with(".json") {
                v.push(join(d, &n));
            }
        }
    }
    v
}

fn manifests(root: &RootFs, dirs: &[&str]) -> Vec<IcdManifest> {
    files(root, dirs)
        .into_iter()
        .filter_map(|f| match root.read_text(&f) {
            Ok(Some(t)) => Some(parse_icd_manifest(&abs(&f), &t)),
            Ok(None) => None,
            Err(e) => Some(IcdManifest {
                path: abs(&f),
                library: None,
                error: Some(e),
            }),
        })
        .collect()
}

pub fn read(root: &RootFs) -> Reading<GraphicsFiles> {
    Reading::Value(GraphicsFiles {
        vulkan_icds: manifests(root, VULKAN_DIRS),
        egl_vendors: manifests(root, EGL_DIRS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn reads_the_manifests() {
        let d = tempfile::tempdir().unwrap();
        let v = d.path().join("usr/share/vulkan/icd.d");
        fs::create_dir_all(&v).unwrap();
        fs::write(
            v.join("nvidia_icd.json"),
            r#"{"file_format_version":"1.0.1","ICD":{"library_path":"libGLX_nvidia.so.0"}}"#,
        )
        .unwrap();
        fs::write(v.join("README"), "not a manifest").unwrap();
        let e = d.path().join("etc/glvnd/egl_vendor.d");
        fs::create_dir_all(&e).unwrap();
        fs::write(e.join("10_nvidia.json"), "{ broken").unwrap();
        let g = read(&RootFs::new(d.path())).into_value().unwrap();
        assert_eq!(g.vulkan_icds.len(), 1);
        assert_eq!(
            g.vulkan_icds[0].path,
            "/usr/share/vulkan/icd.d/nvidia_icd.json"
        );
        assert!(g.vulkan_icds[0].is_nvidia());
        assert_eq!(g.egl_vendors.len(), 1);
        assert!(g.egl_vendors[0].error.is_some());
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            read(&RootFs::new(empty.path())),
            Reading::Value(GraphicsFiles::default())
        );
    }
}
