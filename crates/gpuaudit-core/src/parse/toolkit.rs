//! CUDA toolkit version sources: version.json, version.txt, `nvcc --version`, cuda.h,
//! libcudart file names.
//!
//! Each returns the version as the source writes it ("12.4.1", "13.0.88", "12.4"), or `None`
//! when the text does not hold one; `CudaVersion::parse` turns it into major.minor.

/// version.json: `{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, ...}` -> "12.4.1".
pub fn parse_version_json(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let version = v.get("cuda")?.get("version")?.as_str()?.trim();
    is_version(version).then(|| version.to_string())
}

/// version.txt: "CUDA Version 11.8.89" -> "11.8.89".
pub fn parse_version_txt(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let version = l
            .trim()
            .strip_prefix("CUDA Version")?
            .split_whitespace()
            .next()?;
        is_version(version).then(|| version.to_string())
    })
}

/// `nvcc --version`: "... release 13.0, V13.0.88" -> "13.0.88"; "release 13.0" alone -> "13.0".
pub fn parse_nvcc_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.contains("release "))?;
    let full = line
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter_map(|t| t.strip_prefix('V'))
        .find(|t| is_version(t));
    if let Some(v) = full {
        return Some(v.to_string());
    }
    let (_, after) = line.split_once("release ")?;
    let short = after
        .split(|c: char| c == ',' || c.is_whitespace())
        .next()?;
    is_version(short).then(|| short.to_string())
}

/// include/cuda.h: "#define CUDA_VERSION 12040" -> "12.4".
pub fn parse_cuda_h(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let tokens: Vec<&str> = l.split_whitespace().collect();
        // "#define NAME value" or "# define NAME value".
        let rest = match tokens.as_slice() {
            ["#define", rest @ ..] | ["#", "define", rest @ ..] => rest,
            _ => return None,
        };
        let [name, value, ..] = rest else {
            return None;
        };
        if *name != "CUDA_VERSION" {
            return None;
        }
        let n: u32 = value.parse().ok().filter(|n| *n > 0)?;
        Some(format!("{}.{}", n / 1000, (n % 1000) / 10))
    })
}

/// "libcudart.so.12.4.127" -> "12.4.127"; "libcudart.so.12" -> "12".
pub fn parse_libcudart_name(name: &str) -> Option<String> {
    let file = name.trim().rsplit('/').next()?;
    let version = file.strip_prefix("libcudart.so.")?;
    is_version_or_major(version).then(|| version.to_string())
}

/// "12.4", "13.0.88": numbers joined by dots, at least major.minor.
fn is_version(t: &str) -> bool {
    t.contains('.') && is_version_or_major(t)
}

fn is_version_or_major(t: &str) -> bool {
    !t.is_empty()
        && t.split('.')
            .all(|p| !p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NVCC: &str =
        include_str!("../../../../fixtures/snapshots/h200-x2-vm/cmd/nvcc-version.txt");

    #[test]
    fn version_json() {
        let cuda12 = r#"{
           "cuda" : { "name" : "CUDA SDK", "version" : "12.4.1" },
           "cuda_cccl" : { "name" : "CUDA C++ Core Compute Libraries", "version" : "12.4.127" },
           "cuda_cudart" : { "name" : "CUDA Runtime (cudart)", "version" : "12.4.127" }
        }"#;
        assert_eq!(parse_version_json(cuda12).as_deref(), Some("12.4.1"));
        let cuda11 = r#"{"cuda": {"name": "CUDA SDK", "version": "11.8.0"}, "libcublas": {"version": "11.11.3.6"}}"#;
        assert_eq!(parse_version_json(cuda11).as_deref(), Some("11.8.0"));
        assert_eq!(
            parse_version_json(r#"{"cuda_cudart": {"version": "12.4.127"}}"#),
            None
        );
        assert_eq!(parse_version_json(r#"{"cuda": {"version": 12}}"#), None);
        assert_eq!(
            parse_version_json(r#"{"cuda": {"version": "twelve"}}"#),
            None
        );
        assert_eq!(parse_version_json(r#"{"cuda": {"version": "12.4"#), None);
        assert_eq!(parse_version_json(""), None);
        assert_eq!(parse_version_json("[1,2]"), None);
    }

    #[test]
    fn version_txt() {
        assert_eq!(
            parse_version_txt("CUDA Version 11.8.89\n").as_deref(),
            Some("11.8.89")
        );
        assert_eq!(
            parse_version_txt("CUDA Version 10.2.89\r\n").as_deref(),
            Some("10.2.89")
        );
        assert_eq!(parse_version_txt("CUDA Version \n"), None);
        assert_eq!(parse_version_txt("CUDA Version abc\n"), None);
        assert_eq!(parse_version_txt(""), None);
    }

    #[test]
    fn nvcc() {
        assert_eq!(parse_nvcc_version(NVCC).as_deref(), Some("13.0.88"));
        let cuda11 = "nvcc: NVIDIA (R) Cuda compiler driver\n\
                      Copyright (c) 2005-2022 NVIDIA Corporation\n\
                      Built on Wed_Sep_21_10:33:58_PDT_2022\n\
                      Cuda compilation tools, release 11.8, V11.8.89\n\
                      Build cuda_11.8.r11.8/compiler.31833905_0\n";
        assert_eq!(parse_nvcc_version(cuda11).as_deref(), Some("11.8.89"));
        assert_eq!(
            parse_nvcc_version("Cuda compilation tools, release 9.2\n").as_deref(),
            Some("9.2")
        );
        assert_eq!(parse_nvcc_version("bash: nvcc: command not found\n"), None);
        assert_eq!(parse_nvcc_version("release , V\n"), None);
    }

    #[test]
    fn cuda_h() {
        assert_eq!(
            parse_cuda_h("#define CUDA_VERSION 12040\n").as_deref(),
            Some("12.4")
        );
        assert_eq!(
            parse_cuda_h("/* x */\n#  define CUDA_VERSION_X 1\n# define CUDA_VERSION 13000\n")
                .as_deref(),
            Some("13.0")
        );
        assert_eq!(
            parse_cuda_h("#define CUDA_VERSION 11080 /* 11.8 */").as_deref(),
            Some("11.8")
        );
        assert_eq!(parse_cuda_h("#define CUDA_VERSION 0"), None);
        assert_eq!(parse_cuda_h("#define CUDA_VERSION 99999999999"), None);
        assert_eq!(parse_cuda_h("#define CUDA_VERSION"), None);
        assert_eq!(parse_cuda_h(""), None);
    }

    #[test]
    fn libcudart_names() {
        assert_eq!(
            parse_libcudart_name("libcudart.so.12.4.127").as_deref(),
            Some("12.4.127")
        );
        assert_eq!(
            parse_libcudart_name("libcudart.so.12").as_deref(),
            Some("12")
        );
        assert_eq!(
            parse_libcudart_name("/usr/local/cuda/lib64/libcudart.so.13.0.96").as_deref(),
            Some("13.0.96")
        );
        assert_eq!(parse_libcudart_name("libcudart.so"), None);
        assert_eq!(parse_libcudart_name("libcudart.so."), None);
        assert_eq!(parse_libcudart_name("libcudart.so.12..1"), None);
        assert_eq!(parse_libcudart_name("libcudart_static.a"), None);
        assert_eq!(parse_libcudart_name("libcudart.so.12.4.127.bak"), None);
    }
}
