//! CUDA toolkit version sources: version.json, version.txt, `nvcc --version`, cuda.h,
//! libcudart file names.

/// version.json: `{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, ...}` -> "12.4.1".
pub fn parse_version_json(_text: &str) -> Option<String> {
    None
}

/// version.txt: "CUDA Version 11.8.89" -> "11.8.89".
pub fn parse_version_txt(_text: &str) -> Option<String> {
    None
}

/// `nvcc --version`: "... release 13.0, V13.0.88" -> "13.0.88".
pub fn parse_nvcc_version(_text: &str) -> Option<String> {
    None
}

/// include/cuda.h: "#define CUDA_VERSION 12040" -> "12.4".
pub fn parse_cuda_h(_text: &str) -> Option<String> {
    None
}

/// "libcudart.so.12.4.127" -> "12.4.127"; "libcudart.so.12" -> "12".
pub fn parse_libcudart_name(_name: &str) -> Option<String> {
    None
}
