#![no_main]

use gpuaudit_core::parse::topo;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(t) = topo::parse(&text) {
        // The matrix is square over the GPUs, and every GPU row has one cell per NIC.
        assert_eq!(t.links.len(), t.gpus.len());
        assert!(t.links.iter().all(|row| row.len() == t.gpus.len()));
        assert_eq!(t.gpu_nic.len(), t.gpus.len());
        assert!(t.gpu_nic.iter().all(|row| row.len() == t.nics.len()));
        assert_eq!(t.cpu_affinity.len(), t.gpus.len());
        assert_eq!(t.numa_affinity.len(), t.gpus.len());
    }
});
