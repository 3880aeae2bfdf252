#![no_main]

use gpuaudit_core::parse::procfs;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = procfs::parse_modules(&text);
    let _ = procfs::parse_meminfo_total_kib(&text);
    if let Ok(cpu) = procfs::parse_cpuinfo(&text) {
        assert!(cpu.logical_cpus > 0);
    }
    let _ = procfs::parse_os_release(&text);
    let _ = procfs::parse_driver_version(&text);
});
