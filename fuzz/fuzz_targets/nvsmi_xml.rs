#![no_main]

use gpuaudit_core::parse::nvsmi_xml;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(log) = nvsmi_xml::parse(&text) {
        assert!(log.gpus.len() <= nvsmi_xml::MAX_GPUS);
        for (i, gpu) in log.gpus.iter().enumerate() {
            assert_eq!(gpu.index as usize, i);
        }
    }
});
