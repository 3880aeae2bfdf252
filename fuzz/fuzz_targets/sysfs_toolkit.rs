#![no_main]

use gpuaudit_core::parse::{sysfs, toolkit};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = sysfs::parse_hex_u16(&text);
    let _ = sysfs::parse_hex_u32(&text);
    if let Some(gts) = sysfs::parse_link_speed_gts(&text) {
        assert!(gts.is_finite() && gts > 0.0);
    }
    let _ = sysfs::parse_u32(&text);
    let _ = sysfs::parse_i32(&text);
    for version in [
        toolkit::parse_version_json(&text),
        toolkit::parse_version_txt(&text),
        toolkit::parse_nvcc_version(&text),
        toolkit::parse_cuda_h(&text),
        toolkit::parse_libcudart_name(&text),
    ]
    .into_iter()
    .flatten()
    {
        assert!(version.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
    }
});
