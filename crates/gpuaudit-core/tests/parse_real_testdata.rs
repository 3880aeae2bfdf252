//! Parser test data that other projects published from real machines (each file under
//! `src/parse/testdata/` with a `*.PROVENANCE.md` naming its source and licence). The expected
//! values are read by eye from the files.

use gpuaudit_core::parse::nvlink;

/// `nvidia-smi nvlink -s` of an 8x A100-SXM4-80GB (leptonai/gpud, Apache-2.0): the speed is a
/// whole number ("25 GB/s"), the indentation nine spaces.
const NVLINK_A100X8_GPUD: &str = include_str!("../src/parse/testdata/nvlink-s-a100x8-gpud.txt");

#[test]
fn nvlink_status_of_an_hgx_a100_with_whole_number_speeds() {
    let gpus = nvlink::parse_status(NVLINK_A100X8_GPUD).expect("the published output parses");
    let indices: Vec<u32> = gpus.iter().map(|g| g.gpu).collect();
    assert_eq!(
        indices,
        (0..8).collect::<Vec<u32>>(),
        "eight GPU blocks, in order"
    );
    for g in &gpus {
        assert!(!g.all_inactive, "GPU {}: links are listed", g.gpu);
        let numbers: Vec<u32> = g.links.iter().map(|l| l.link).collect();
        assert_eq!(
            numbers,
            (0..12).collect::<Vec<u32>>(),
            "GPU {}: twelve NVLink 3 links",
            g.gpu
        );
        for l in &g.links {
            assert!(l.active, "GPU {} link {}: up", g.gpu, l.link);
            assert_eq!(
                l.speed_gbps,
                Some(25.0),
                "GPU {} link {}: \"25 GB/s\" is a reading of 25 GB/s",
                g.gpu,
                l.link
            );
        }
    }
}
