//! A snapshot collected on this machine and audited gives the same host facts as the live
//! audit (measured readings aside).

use gpuaudit_probe::host::{collect_into, gather, HostOptions};
use gpuaudit_probe::root::RootFs;

#[test]
fn live_and_snapshot_agree() {
    let opts = HostOptions {
        ask_interpreter: false,
        ..HostOptions::default()
    };
    let live = gather(&RootFs::live(), &opts);
    let d = tempfile::tempdir().unwrap();
    let notes = collect_into(&RootFs::live(), &opts, d.path());
    let snap = gather(&RootFs::new(d.path()), &opts);
    let mut a = serde_json::to_value(&live).unwrap();
    let mut b = serde_json::to_value(&snap).unwrap();
    for v in [&mut a, &mut b] {
        let o = v.as_object_mut().unwrap();
        o.remove("throughput");
        o.remove("loopback");
    }
    let pa = serde_json::to_string_pretty(&a).unwrap();
    let pb = serde_json::to_string_pretty(&b).unwrap();
    if pa != pb {
        for (x, y) in pa.lines().zip(pb.lines()) {
            if x != y {
                eprintln!("live: {x}\nsnap: {y}");
            }
        }
        panic!("live and snapshot facts differ (notes: {notes:?})");
    }
}
