//! CUDA library file names: which library a file is, and the version its name carries.

/// The libraries cuda.libraries follows, in the order reports list them.
pub const LIBRARIES: &[&str] = &[
    "libcuda",
    "libnvidia-ml",
    "libcudart",
    "libcublas",
    "libcublasLt",
    "libnvrtc",
    "libnccl",
    "libcudnn",
];

/// "libnccl.so.2.21.5" -> ("libnccl", Some("2.21.5")); "libnccl.so.2" -> ("libnccl", None)
/// (a bare major says nothing about the build); "libcudart-d0da41ae.so.11.0" (a copy that a
/// wheel renamed) -> ("libcudart", Some("11.0")). Anything else, including
/// "libnvrtc-builtins.so.12.4" and "libcudnn_ops.so.9", -> `None`.
pub fn library_of(file_name: &str) -> Option<(&'static str, Option<String>)> {
    let (stem, rest) = file_name.split_once(".so")?;
    if !(rest.is_empty() || rest.starts_with('.')) {
        return None;
    }
    let version = rest.trim_start_matches('.');
    if !version.is_empty()
        && !version
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
    {
        return None;
    }
    let base = match stem.rsplit_once('-') {
        // auditwheel-style renames append "-<8 hex digits>".
        Some((b, h)) if h.len() == 8 && h.bytes().all(|c| c.is_ascii_hexdigit()) => b,
        _ => stem,
    };
    let lib = LIBRARIES.iter().find(|l| **l == base)?;
    let version = (version.contains('.')).then(|| version.to_string());
    Some((lib, version))
}

/// Compare dotted versions numerically ("2.9.1" < "2.21.5"); non-numeric parts compare as
/// text.
pub fn cmp_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let mut ia = a.split(['.', '+', '-']);
    let mut ib = b.split(['.', '+', '-']);
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => {
                let o = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(x), Ok(y)) => x.cmp(&y),
                    _ => x.cmp(y),
                };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

/// The first `n` dotted components: ("12.4.127", 2) -> "12.4".
pub fn version_prefix(v: &str, n: usize) -> String {
    v.split('.').take(n).collect::<Vec<_>>().join(".")
}

/// The library a wheel's distribution name ships, where it is one of ours:
/// "nvidia-nccl-cu12" -> "libnccl". Both spellings (dashes, underscores) are accepted.
pub fn wheel_library(dist: &str) -> Option<&'static str> {
    let d = dist.to_ascii_lowercase().replace('_', "-");
    let d = d
        .trim_end_matches("-cu11")
        .trim_end_matches("-cu12")
        .trim_end_matches("-cu13");
    Some(match d {
        "nvidia-nccl" => "libnccl",
        "nvidia-cudnn" => "libcudnn",
        "nvidia-cublas" => "libcublas",
        "nvidia-cuda-runtime" => "libcudart",
        "nvidia-cuda-nvrtc" => "libnvrtc",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            library_of("libnccl.so.2.21.5"),
            Some(("libnccl", Some("2.21.5".into())))
        );
        assert_eq!(library_of("libnccl.so.2"), Some(("libnccl", None)));
        assert_eq!(library_of("libnccl.so"), Some(("libnccl", None)));
        assert_eq!(
            library_of("libcublasLt.so.12.4.5.8"),
            Some(("libcublasLt", Some("12.4.5.8".into())))
        );
        assert_eq!(
            library_of("libcuda.so.580.159.04"),
            Some(("libcuda", Some("580.159.04".into())))
        );
        assert_eq!(
            library_of("libcudart-d0da41ae.so.11.0"),
            Some(("libcudart", Some("11.0".into())))
        );
        assert_eq!(library_of("libnvrtc-builtins.so.12.4"), None);
        assert_eq!(library_of("libcudnn_ops.so.9"), None);
        assert_eq!(library_of("libcublas.so.12.bak"), None);
        assert_eq!(library_of("libcudart_static.a"), None);
        assert_eq!(library_of("libcuda.sox"), None);
        assert_eq!(library_of(""), None);
    }

    #[test]
    fn versions_compare_numerically() {
        use std::cmp::Ordering::*;
        assert_eq!(cmp_versions("2.9.1", "2.21.5"), Less);
        assert_eq!(cmp_versions("12.4", "12.4"), Equal);
        assert_eq!(cmp_versions("12.4.1", "12.4"), Greater);
        assert_eq!(version_prefix("12.4.127", 2), "12.4");
    }

    #[test]
    fn wheels() {
        assert_eq!(wheel_library("nvidia-nccl-cu12"), Some("libnccl"));
        assert_eq!(wheel_library("nvidia_cudnn_cu12"), Some("libcudnn"));
        assert_eq!(wheel_library("nvidia-cuda-runtime"), Some("libcudart"));
        assert_eq!(wheel_library("nvidia-cufft-cu12"), None);
    }
}
