//! A snapshot collected on this machine and audited gives the same host facts as the live
//! audit (measured readings aside).

use gpuaudit_probe::host::{gather, HostOptions};
use gpuaudit_probe::root::{Recorder, RootFs};
use std::sync::Arc;

#[test]
fn live_and_snapshot_agree() {
    let opts = HostOptions {
        ask_interpreter: false,
        ..HostOptions::default()
    };
    let live = gather(&RootFs::live(), &opts);
    let d = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recorder::create(&d.path().join("snap")).unwrap());
    gather(&RootFs::live().recording(rec.clone()), &opts);
    let notes = rec.summary().notes;
    assert_eq!(rec.summary().failed, Vec::<String>::new());
    let snap = gather(&RootFs::new(rec.out()), &opts);
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

/// Collecting from a snapshot gives a snapshot with the same facts: every reduction (sshd,
/// Jupyter, containerd, the listings) reads back to what it was made from.
#[test]
fn recollected_fixtures_keep_their_facts() {
    let base =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/snapshots");
    let mut n = 0;
    for e in std::fs::read_dir(&base).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("host-") && name != "h200-x2-vm" {
            continue;
        }
        n += 1;
        let opts = HostOptions::default();
        let a = gather(&RootFs::new(&p), &opts);
        let d = tempfile::tempdir().unwrap();
        let rec = Arc::new(Recorder::create(&d.path().join("snap")).unwrap());
        gather(&RootFs::new(&p).recording(rec.clone()), &opts);
        let b = gather(&RootFs::new(rec.out()), &opts);
        let sa = serde_json::to_string_pretty(&a).unwrap();
        let sb = serde_json::to_string_pretty(&b).unwrap();
        if sa != sb {
            for (x, y) in sa.lines().zip(sb.lines()) {
                if x != y {
                    eprintln!("{name}\n  first:  {x}\n  second: {y}");
                }
            }
            panic!("{name}: facts changed through collect");
        }
    }
    assert!(n >= 8);
}
