#![no_main]

use gpuaudit_core::parse::nvlink;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(gpus) = nvlink::parse_status(&text) {
        for g in gpus {
            assert!(!g.all_inactive || g.links.is_empty());
            for link in g.links {
                assert_eq!(link.active, link.speed_gbps.is_some());
            }
        }
    }
});
