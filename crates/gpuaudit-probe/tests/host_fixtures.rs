//! The host checks on the fixture snapshots (fixtures/snapshots/host-* and h200-x2-vm): each
//! bad case is found, the clean one passes, damaged files give `skip` with the reason.

use gpuaudit_core::checks::{find, run_one};
use gpuaudit_core::facts::Facts;
use gpuaudit_core::finding::{Finding, Status};
use gpuaudit_core::policy::{Policy, Profile};
use gpuaudit_probe::gather::{self, GatherOptions};
use std::path::PathBuf;

const HOST_CHECKS: &[&str] = &[
    "cuda.toolkit-compat",
    "cuda.libraries",
    "cuda.framework",
    "cuda.env",
    "net.somaxconn",
    "net.loopback",
    "net.fabric",
    "storage.mounts",
    "storage.throughput",
    "host.shm",
    "container.runtime",
    "env.jupyter",
    "env.ssh",
    "os.graphics",
];

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/snapshots")
        .join(name)
}

/// The facts of a fixture snapshot, read by the same gatherer as `gpuaudit --root`.
fn facts(name: &str) -> Facts {
    let path = dir(name);
    gather::snapshot(&path, &GatherOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn run(f: &Facts, policy: &Policy) -> Vec<Finding> {
    let mut out = Vec::new();
    for id in HOST_CHECKS {
        let check = find(id).unwrap_or_else(|| panic!("{id} is not registered"));
        let r = run_one(check, f, policy);
        assert!(!r.is_empty(), "{id} gave no finding");
        for x in &r {
            assert_ne!(
                x.message,
                "internal error in this check (a bug in gpuaudit; please report it with the snapshot)",
                "{id} panicked"
            );
        }
        out.extend(r);
    }
    if std::env::var_os("GPUAUDIT_SHOW").is_some() {
        for x in &out {
            eprintln!(
                "{:<18} {:<5} {:?} {}",
                x.check,
                x.status.as_str(),
                x.gpu,
                x.message
            );
        }
    }
    out
}

fn of<'a>(f: &'a [Finding], id: &str) -> Vec<&'a Finding> {
    f.iter().filter(|x| x.check == id).collect()
}

fn worst(f: &[Finding], id: &str) -> Status {
    of(f, id)
        .iter()
        .map(|x| x.status)
        .max()
        .unwrap_or(Status::Skip)
}

fn has(f: &[Finding], id: &str, status: Status, text: &str) -> bool {
    of(f, id)
        .iter()
        .any(|x| x.status == status && x.message.contains(text))
}

#[test]
fn h200_base_snapshot_skips_what_it_lacks() {
    let f = facts("h200-x2-vm");
    let r = run(&f, &Policy::default());
    assert_eq!(worst(&r, "host.shm"), Status::Pass);
    assert!(has(&r, "host.shm", Status::Pass, "256.0 GiB"));
    assert_eq!(worst(&r, "net.somaxconn"), Status::Pass);
    assert_eq!(worst(&r, "cuda.env"), Status::Skip);
    assert_eq!(worst(&r, "cuda.libraries"), Status::Skip);
    assert_eq!(worst(&r, "storage.mounts"), Status::Skip);
    assert!(has(
        &r,
        "storage.throughput",
        Status::Skip,
        "snapshot audit: nothing is measured"
    ));
    assert!(has(&r, "net.loopback", Status::Skip, "snapshot audit"));
    // The snapshot predates the host checks (no cmd/env.json): a missing sshd_config, Jupyter
    // file, RDMA class or container sign was never looked for, so nothing passes on it.
    for id in [
        "net.fabric",
        "env.ssh",
        "env.jupyter",
        "container.runtime",
        "cuda.framework",
    ] {
        assert_eq!(worst(&r, id), Status::Skip, "{id}: {:#?}", of(&r, id));
        assert!(
            has(&r, id, Status::Skip, "no host part"),
            "{id}: {:#?}",
            of(&r, id)
        );
    }
    // The toolkit is read from nvcc's output, which the snapshot has.
    assert!(has(&r, "cuda.toolkit-compat", Status::Pass, "CUDA 13.0"));
}

#[test]
fn no_rdma_on_a_training_machine() {
    // --profile train with two GPUs and no RDMA fabric (host-clean has no
    // /sys/class/infiniband, and a host part that says so).
    let t = run(
        &facts("host-clean"),
        &Policy {
            profile: Profile::Train,
            ..Policy::default()
        },
    );
    assert!(has(&t, "net.fabric", Status::Warn, "no InfiniBand or RoCE"));
}

#[test]
fn clean_host_passes() {
    let f = facts("host-clean");
    let r = run(&f, &Policy::default());
    for id in HOST_CHECKS {
        let w = worst(&r, id);
        let expected_not_pass = matches!(
            *id,
            "storage.throughput" | "net.loopback" | "net.fabric" | "os.graphics"
        );
        if !expected_not_pass {
            assert!(
                w <= Status::Info && w != Status::Skip,
                "{id}: {w:?} {:#?}",
                of(&r, id)
            );
        }
    }
    assert!(has(&r, "cuda.framework", Status::Pass, "torch 2.9.1+cu130"));
    assert!(has(&r, "cuda.libraries", Status::Pass, "libnccl 2.27.7"));
    assert!(has(
        &r,
        "storage.mounts",
        Status::Pass,
        "/root (current directory) is on / (ext4"
    ));
}

#[test]
fn bad_stack_is_found() {
    let f = facts("host-bad-stack");
    let r = run(&f, &Policy::default());
    assert!(has(
        &r,
        "cuda.libraries",
        Status::Warn,
        "3 versions of libnccl.so.2 on this machine (2.14.3, 2.18.1, 2.27.7)"
    ));
    // cuBLAS 11 and 13 have different sonames: no conflict.
    assert!(!has(&r, "cuda.libraries", Status::Warn, "libcublas"));
    assert!(has(
        &r,
        "cuda.libraries",
        Status::Warn,
        "LD_LIBRARY_PATH puts libnccl 2.18.1"
    ));
    let fw: Vec<&Finding> = of(&r, "cuda.framework")
        .into_iter()
        .filter(|x| x.status == Status::Fail)
        .collect();
    assert_eq!(fw.len(), 2, "{fw:#?}");
    assert!(fw[0].message.contains("no kernel image"));
    assert_eq!(fw[0].gpu, Some(0));
    assert!(has(&r, "cuda.framework", Status::Pass, "torch 2.9.1+cu130"));
    assert!(has(&r, "cuda.env", Status::Warn, "shows 1 of the 2 GPUs"));
    assert!(has(&r, "cuda.env", Status::Warn, "CUDA_LAUNCH_BLOCKING=1"));
    assert!(has(&r, "cuda.env", Status::Warn, "NCCL_P2P_DISABLE=1"));
    assert!(has(&r, "cuda.env", Status::Warn, "empty entry"));
    assert!(has(&r, "cuda.env", Status::Warn, "leaves out GPU 0"));
    let t = run(
        &f,
        &Policy {
            profile: Profile::Train,
            ..Policy::default()
        },
    );
    assert!(has(&t, "cuda.env", Status::Fail, "NCCL_P2P_DISABLE=1"));
}

#[test]
fn bad_storage_is_found() {
    let f = facts("host-bad-storage");
    let r = run(&f, &Policy::default());
    assert!(has(
        &r,
        "storage.mounts",
        Status::Warn,
        "rsize=65536 wsize=65536"
    ));
    assert!(has(&r, "storage.mounts", Status::Warn, "'soft'"));
    // The escaped space in the mount point is decoded; that NFS mount is fine.
    assert!(has(
        &r,
        "storage.mounts",
        Status::Info,
        "/mnt/team share/models (--data-dir) is on /mnt/team share"
    ));
    assert!(has(&r, "host.shm", Status::Fail, "only 64 MiB"));
    assert_eq!(worst(&r, "net.somaxconn"), Status::Info);
    let inf = run(
        &f,
        &Policy {
            profile: Profile::Inference,
            ..Policy::default()
        },
    );
    assert!(has(
        &inf,
        "net.somaxconn",
        Status::Fail,
        "net.core.somaxconn is 128"
    ));
    let t = run(
        &f,
        &Policy {
            profile: Profile::Train,
            ..Policy::default()
        },
    );
    assert!(has(&t, "storage.mounts", Status::Fail, "'soft'"));
}

#[test]
fn bad_container_is_found() {
    let f = facts("host-bad-container");
    let r = run(&f, &Policy::default());
    assert!(has(
        &r,
        "container.runtime",
        Status::Info,
        "inside a docker container"
    ));
    assert!(has(
        &r,
        "container.runtime",
        Status::Fail,
        "1 of the 2 GPUs has a /dev/nvidiaN"
    ));
    assert!(has(
        &r,
        "container.runtime",
        Status::Fail,
        "/dev/nvidia-uvm is missing"
    ));
    assert!(has(
        &r,
        "container.runtime",
        Status::Fail,
        "user 1000 cannot open /dev/nvidia0"
    ));
    assert!(has(&r, "host.shm", Status::Fail, "64 MiB"));
    assert!(has(&r, "storage.mounts", Status::Info, "writable layer"));
}

#[test]
fn bad_docker_host_is_found() {
    let f = facts("host-bad-docker");
    let r = run(&f, &Policy::default());
    assert!(has(
        &r,
        "container.runtime",
        Status::Warn,
        "registers no nvidia runtime"
    ));
    assert!(has(
        &r,
        "container.runtime",
        Status::Warn,
        "generated for driver 550.54.15"
    ));
    assert!(has(
        &r,
        "container.runtime",
        Status::Warn,
        "lists 1 GPU but the machine has 2"
    ));
}

#[test]
fn bad_access_is_found() {
    let f = facts("host-bad-access");
    let r = run(&f, &Policy::default());
    assert!(has(&r, "env.ssh", Status::Fail, "sshd accepts passwords"));
    assert!(has(
        &r,
        "env.ssh",
        Status::Warn,
        "2 keys can log in as root with no restriction"
    ));
    assert!(has(
        &r,
        "env.ssh",
        Status::Warn,
        "ssh-rsa 1024 bits for root"
    ));
    assert!(has(
        &r,
        "env.jupyter",
        Status::Warn,
        "iopub_data_rate_limit is lowered to 1000"
    ));
    assert!(has(&r, "env.jupyter", Status::Fail, "empty token"));
    assert!(has(
        &r,
        "env.jupyter",
        Status::Warn,
        "notebook directory /mnt/datasets/notebooks is on /mnt/datasets"
    ));
}

#[test]
fn infiniband_port_down_and_no_peermem() {
    let f = facts("host-ib");
    let r = run(
        &f,
        &Policy {
            profile: Profile::Train,
            ..Policy::default()
        },
    );
    assert!(has(&r, "net.fabric", Status::Fail, "mlx5_1 port 1 is DOWN"));
    assert!(has(
        &r,
        "net.fabric",
        Status::Warn,
        "nvidia_peermem is not loaded"
    ));
    assert!(has(
        &r,
        "net.fabric",
        Status::Pass,
        "mlx5_0 port 1 InfiniBand 400 Gb/sec (4X NDR)"
    ));
}

#[test]
fn damaged_files_skip_with_reasons() {
    let f = facts("host-garbage");
    for p in [
        Policy::default(),
        Policy {
            profile: Profile::Train,
            ..Policy::default()
        },
    ] {
        let r = run(&f, &p);
        for id in [
            "cuda.libraries",
            "cuda.framework",
            "cuda.env",
            "storage.mounts",
            "host.shm",
            "net.somaxconn",
        ] {
            assert_eq!(worst(&r, id), Status::Skip, "{id}: {:#?}", of(&r, id));
        }
        assert!(has(
            &r,
            "env.ssh",
            Status::Skip,
            "/etc/ssh/sshd_config: malformed: binary content"
        ));
        // A daemon.json that does not parse is no unreadable file: dockerd refuses it.
        assert!(has(
            &r,
            "container.runtime",
            Status::Fail,
            "/etc/docker/daemon.json: malformed: not JSON"
        ));
        assert!(has(
            &r,
            "container.runtime",
            Status::Skip,
            "/etc/containerd/config.toml: malformed: not TOML"
        ));
        assert!(has(
            &r,
            "container.runtime",
            Status::Skip,
            "CDI specification /etc/cdi/nvidia.yaml"
        ));
        assert!(has(
            &r,
            "env.jupyter",
            Status::Skip,
            "jupyter_server_config.json: malformed"
        ));
        assert!(has(&r, "net.somaxconn", Status::Skip, "not a number"));
        // Snapshot paths never leak into messages: they name the machine's files.
        let snap = dir("host-garbage").display().to_string();
        assert!(r.iter().all(|x| !x.message.contains(&snap)), "{r:#?}");
    }
}

fn train() -> Policy {
    Policy {
        profile: Profile::Train,
        ..Policy::default()
    }
}

#[test]
fn an_older_compat_libcuda_on_ld_library_path_is_found() {
    let r = run(&facts("host-compat-older"), &Policy::default());
    assert!(
        has(&r, "cuda.env", Status::Fail, "error 803"),
        "{:#?}",
        of(&r, "cuda.env")
    );
    assert!(!has(&r, "cuda.env", Status::Pass, "nothing harmful"));
    assert!(has(
        &r,
        "cuda.libraries",
        Status::Fail,
        "forward-compatibility libcuda 580.95.05 (/usr/local/cuda/compat/libcuda.so.1), older than the kernel module 580.159.04"
    ));
    assert!(has(&r, "cuda.toolkit-compat", Status::Pass, "CUDA 13.0.2"));
}

#[test]
fn a_container_without_compute_has_no_libcuda() {
    let r = run(&facts("host-container-utility"), &Policy::default());
    assert!(
        has(&r, "cuda.libraries", Status::Fail, "no libcuda"),
        "{:#?}",
        of(&r, "cuda.libraries")
    );
    assert!(!has(
        &r,
        "cuda.libraries",
        Status::Info,
        "libcuda 580.95.05"
    ));
    assert!(has(
        &r,
        "container.runtime",
        Status::Fail,
        "NVIDIA_DRIVER_CAPABILITIES=utility, without 'compute'"
    ));
}

#[test]
fn a_compat_package_off_the_loader_path_is_no_bridge() {
    let r = run(
        &facts("host-old-driver-compat-off-path"),
        &Policy::default(),
    );
    let fw: Vec<&Finding> = of(&r, "cuda.framework")
        .into_iter()
        .filter(|x| x.status == Status::Fail)
        .collect();
    assert!(
        fw.iter().any(|x| x.message.contains("torch 2.9.1+cu130")
            && x.message.contains("on no loader path")
            && x.fix
                .as_deref()
                .is_some_and(|f| f.contains("LD_LIBRARY_PATH=/usr/local/cuda-13.0/compat"))),
        "{:#?}",
        of(&r, "cuda.framework")
    );
    assert!(has(
        &r,
        "cuda.toolkit-compat",
        Status::Fail,
        "/usr/local/cuda-13.0/compat) is on no loader path"
    ));
}

#[test]
fn a_daemon_json_dockerd_refuses_is_found() {
    let r = run(&facts("host-bad-daemon-json"), &Policy::default());
    assert!(
        has(&r, "container.runtime", Status::Fail, "line 9 column 1"),
        "{:#?}",
        of(&r, "container.runtime")
    );
    assert!(has(
        &r,
        "container.runtime",
        Status::Fail,
        "dockerd refuses to start"
    ));
}

#[test]
fn an_infiniband_port_slower_than_its_siblings_is_found() {
    let f = facts("host-ib-port-slow");
    let r = run(&f, &Policy::default());
    assert!(has(
        &r,
        "net.fabric",
        Status::Warn,
        "mlx5_3 port 1 runs at 200 Gb/sec (2X NDR), below the 400 Gb/sec (4X NDR) of 7 sibling ports (MT4129, InfiniBand)"
    ), "{:#?}", of(&r, "net.fabric"));
    assert!(has(&r, "net.fabric", Status::Pass, "mlx5_7 port 1"));
    assert!(!has(&r, "net.fabric", Status::Pass, "mlx5_3"));
    assert!(has(
        &run(&f, &train()),
        "net.fabric",
        Status::Fail,
        "mlx5_3 port 1 runs at 200"
    ));
}

#[test]
fn nccl_ib_hca_of_another_cluster_is_found() {
    let r = run(&facts("host-nccl-ib-hca-foreign"), &Policy::default());
    assert!(
        has(
            &r,
            "cuda.env",
            Status::Fail,
            "selects none of this machine's RDMA ports"
        ),
        "{:#?}",
        of(&r, "cuda.env")
    );
    assert!(has(&r, "net.fabric", Status::Pass, "RDMA ports up"));
}

#[test]
fn graphics_readiness_under_render() {
    let render = Policy {
        profile: Profile::Render,
        ..Policy::default()
    };
    let r = run(&facts("host-graphics-files"), &render);
    assert!(
        has(
            &r,
            "os.graphics",
            Status::Fail,
            "compute-only data-center GPU"
        ),
        "{:#?}",
        of(&r, "os.graphics")
    );
    assert!(has(
        &r,
        "os.graphics",
        Status::Pass,
        "nvidia_icd.json -> libGLX_nvidia.so.0"
    ));
    assert!(has(
        &r,
        "os.graphics",
        Status::Pass,
        "10_nvidia.json -> libEGL_nvidia.so.0"
    ));
    let r = run(&facts("host-clean"), &render);
    assert!(has(&r, "os.graphics", Status::Fail, "no NVIDIA Vulkan ICD"));
    assert!(has(
        &r,
        "os.graphics",
        Status::Fail,
        "no NVIDIA EGL vendor file"
    ));
    let r = run(&facts("host-container-utility"), &render);
    assert!(has(&r, "os.graphics", Status::Fail, "without 'graphics'"));
    let r = run(&facts("host-graphics-files"), &Policy::default());
    assert_eq!(worst(&r, "os.graphics"), Status::Skip);
}
