//! cuda.env: the environment variables that change CUDA, NCCL and the loader.

use crate::checks::common::{gpu_count, plural};
use crate::checks::cuda::{compat_state, describe, is_compat, CompatState, FORWARD_COMPAT_DOC};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, LibraryCopy, LibrarySource};
use crate::finding::{Finding, Status};
use crate::parse::host::cudaenv::{
    coverage, is_set, parse_hca_list, parse_torch_arch_list, parse_visible_devices,
    specs_as_arch_list, Coverage, DeviceRef, VisibleDevices,
};
use crate::policy::{Policy, Profile};

const ID: &str = "cuda.env";

pub const CHECK: Check = Check {
    id: ID,
    title: "Environment variables that change CUDA, NCCL and the loader",
    looks_at: "environment that changes behaviour: CUDA_VISIBLE_DEVICES, CUDA_MODULE_LOADING, \
               CUDA_LAUNCH_BLOCKING, NCCL_P2P_DISABLE / NCCL_IB_DISABLE, LD_LIBRARY_PATH tricks",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "The environment gpuaudit runs in: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, \
               CUDA_MODULE_LOADING, CUDA_LAUNCH_BLOCKING, CUDA_CACHE_DISABLE, NCCL_P2P_DISABLE, \
               NCCL_IB_DISABLE, NCCL_SHM_DISABLE, NCCL_DEBUG, TORCH_CUDA_ARCH_LIST against the \
               GPUs, NCCL_IB_HCA against the RDMA ports present, and LD_LIBRARY_PATH / \
               LD_PRELOAD entries that shadow the driver's libraries (a forward-compatibility \
               libcuda older than the kernel module included) or make the loader search the \
               current directory.",
        why: "These variables are inherited by every job started from the same shell, \
              profile or container image, and they are invisible in the code: \
              CUDA_VISIBLE_DEVICES hides GPUs you pay for, CUDA_LAUNCH_BLOCKING=1 \
              serialises every kernel launch, NCCL_P2P_DISABLE=1 sends GPU-to-GPU traffic \
              through host memory instead of NVLink, NCCL_IB_DISABLE=1 sends multi-node \
              traffic over TCP, an NCCL_IB_HCA naming devices this machine does not have \
              does the same, and a libcuda on LD_LIBRARY_PATH that does not match the \
              kernel module breaks CUDA initialisation (error 803 for a compat copy older \
              than the module).",
        verify: "env | grep -E '^(CUDA_|NCCL_|LD_LIBRARY_PATH|LD_PRELOAD|TORCH_CUDA_ARCH_LIST)'\n\
                 grep -rE 'CUDA_|NCCL_|LD_LIBRARY_PATH' ~/.bashrc ~/.profile /etc/environment /etc/profile.d 2>/dev/null",
        fix: "Unset the variable (or remove it from ~/.bashrc, /etc/environment, the image's \
              ENV, the job script); set it per job only where it is meant, e.g. \
              `CUDA_VISIBLE_DEVICES=0 python train.py`.",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "NCCL_P2P_DISABLE on a machine of several GPUs fails instead of warning, and NCCL_IB_DISABLE on a machine with RDMA devices fails instead of warning.",
        },
    ],
    run: run_env,
};

fn run_env(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let env = match facts.host.env.get() {
        Ok(e) => e,
        Err(r) => {
            return vec![Finding::skip(
                ID,
                format!("could not read the environment: {r}"),
            )]
        }
    };
    let gpus = gpu_count(facts);
    let multi = gpus.is_some_and(|n| n > 1);
    let train = policy.profile == Profile::Train;
    let mut out = Vec::new();

    if let Some(v) = env.get("CUDA_VISIBLE_DEVICES") {
        let VisibleDevices::List { visible, ignored } =
            parse_visible_devices(v, gpus.and_then(|n| u32::try_from(n).ok()));
        // UUIDs that match no GPU of the driver's list hide that entry (CUDA stops there).
        let uuids: Vec<String> = facts
            .gpu_list()
            .iter()
            .filter_map(|g| g.uuid.value().cloned())
            .collect();
        let mut visible_ok = 0usize;
        let mut unknown = Vec::new();
        for d in &visible {
            match d {
                DeviceRef::Uuid(u)
                    if !uuids.is_empty() && !uuids.iter().any(|x| x.starts_with(u.as_str())) =>
                {
                    unknown.push(u.clone())
                }
                _ => visible_ok += 1,
            }
        }
        let f = match gpus {
            Some(n) if visible_ok == 0 && n > 0 => Some(Finding::fail(
                ID,
                format!("CUDA_VISIBLE_DEVICES='{v}' hides every GPU: CUDA programs started from this environment see no device ('no CUDA-capable device is detected')"),
            )),
            Some(n) if visible_ok < n && unknown.is_empty() && ignored.is_empty() => Some(Finding::warn(
                ID,
                format!("CUDA_VISIBLE_DEVICES='{v}' shows {} of the {n} GPUs: the others stay idle for every program started from this environment", visible_ok),
            )),
            _ if !ignored.is_empty() || !unknown.is_empty() => Some(Finding::warn(
                ID,
                format!(
                    "CUDA_VISIBLE_DEVICES='{v}' has entries CUDA cannot use ({}); CUDA stops at the first one, so only {} visible",
                    ignored.iter().chain(unknown.iter()).cloned().collect::<Vec<_>>().join(", "),
                    plural(visible_ok, "GPU is", "GPUs are")
                ),
            )),
            _ => None,
        };
        if let Some(f) = f {
            out.push(
                f.with("CUDA_VISIBLE_DEVICES", v)
                    .with("gpus", gpus)
                    .fix("unset CUDA_VISIBLE_DEVICES (or set it per job: CUDA_VISIBLE_DEVICES=0,1 python ...); find where it is set with: grep -r CUDA_VISIBLE_DEVICES ~/.bashrc ~/.profile /etc/environment /etc/profile.d"),
            );
        }
        if env.get("CUDA_DEVICE_ORDER") != Some("PCI_BUS_ID")
            && visible.iter().any(|d| matches!(d, DeviceRef::Index(_)))
            && !uniform_gpus(facts)
        {
            out.push(
                Finding::info(ID, "CUDA_VISIBLE_DEVICES uses indices but CUDA_DEVICE_ORDER is not PCI_BUS_ID: with different GPU models, CUDA numbers the fastest first, not as nvidia-smi does")
                    .fix("export CUDA_DEVICE_ORDER=PCI_BUS_ID"),
            );
        }
    }

    let flag = |name: &str| env.get(name).filter(|v| is_set(v));
    if let Some(v) = flag("CUDA_LAUNCH_BLOCKING") {
        out.push(
            Finding::warn(ID, format!("CUDA_LAUNCH_BLOCKING={v}: every kernel launch waits for the previous kernel to finish; a debugging switch that makes real workloads several times slower"))
                .with("CUDA_LAUNCH_BLOCKING", v)
                .fix("unset CUDA_LAUNCH_BLOCKING"),
        );
    }
    if let Some(v) = flag("CUDA_CACHE_DISABLE") {
        out.push(
            Finding::warn(ID, format!("CUDA_CACHE_DISABLE={v}: PTX kernels are JIT-compiled again in every process instead of being cached"))
                .with("CUDA_CACHE_DISABLE", v)
                .fix("unset CUDA_CACHE_DISABLE"),
        );
    }
    if let Some(v) = env.get("CUDA_MODULE_LOADING") {
        if v.eq_ignore_ascii_case("EAGER") {
            out.push(
                Finding::info(ID, "CUDA_MODULE_LOADING=EAGER: every kernel of every CUDA library is loaded at start-up (seconds of start and hundreds of MiB of GPU memory per process; LAZY is the default since CUDA 12.2)")
                    .with("CUDA_MODULE_LOADING", v)
                    .fix("unset CUDA_MODULE_LOADING (or set it to LAZY)"),
            );
        }
    }
    if let Some(v) = flag("NCCL_P2P_DISABLE") {
        let msg = format!("NCCL_P2P_DISABLE={v}: NCCL does not use NVLink or PCIe peer-to-peer between GPUs; collectives go through host memory, several times slower");
        let f = if multi && train {
            Finding::fail(ID, msg)
        } else if multi {
            Finding::warn(ID, msg)
        } else {
            Finding::info(ID, msg)
        };
        out.push(f.with("NCCL_P2P_DISABLE", v).fix("unset NCCL_P2P_DISABLE; if it was set to work around a hang, check IOMMU/ACS settings (nvidia-smi topo -p2p r) instead"));
    }
    if let Some(v) = flag("NCCL_SHM_DISABLE") {
        let msg = format!("NCCL_SHM_DISABLE={v}: NCCL cannot use shared memory between processes; where P2P is not possible, traffic falls back to sockets");
        let f = if multi {
            Finding::warn(ID, msg)
        } else {
            Finding::info(ID, msg)
        };
        out.push(f.with("NCCL_SHM_DISABLE", v).fix("unset NCCL_SHM_DISABLE; if it was set because of 'unable to allocate shared memory', enlarge /dev/shm instead (see host.shm)"));
    }
    if let Some(v) = flag("NCCL_IB_DISABLE") {
        let rdma = facts
            .host
            .fabric
            .rdma
            .value()
            .is_some_and(|p| !p.is_empty());
        let msg = format!(
            "NCCL_IB_DISABLE={v}: NCCL will not use InfiniBand/RoCE{}; traffic between nodes goes over TCP sockets",
            if rdma { " although this machine has RDMA devices" } else { "" }
        );
        let f = match (rdma, train) {
            (true, true) => Finding::fail(ID, msg),
            (true, false) => Finding::warn(ID, msg),
            _ => Finding::info(ID, msg),
        };
        out.push(f.with("NCCL_IB_DISABLE", v).fix("unset NCCL_IB_DISABLE"));
    }
    if let Some(v) = env.get("NCCL_DEBUG") {
        let trace = v.eq_ignore_ascii_case("TRACE");
        let msg = format!(
            "NCCL_DEBUG={v}: NCCL logs {}",
            if trace {
                "every call; that slows collectives down"
            } else {
                "its set-up to stderr"
            }
        );
        let f = if trace {
            Finding::warn(ID, msg)
        } else {
            Finding::info(ID, msg)
        };
        out.push(
            f.with("NCCL_DEBUG", v)
                .fix("unset NCCL_DEBUG outside of debugging"),
        );
    }
    let forced: Vec<(String, String)> = [
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_P2P_LEVEL",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_SOCKET_IFNAME",
    ]
    .iter()
    .filter_map(|k| env.get(k).map(|v| (k.to_string(), v.to_string())))
    .collect();
    if !forced.is_empty() {
        out.push(
            Finding::info(
                ID,
                format!(
                    "NCCL tuning is forced: {}; right for one cluster, wrong on another",
                    forced
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            )
            .with("variables", &forced),
        );
    }

    if let Some(v) = env.get("NCCL_IB_HCA") {
        out.push(judge_ib_hca(facts, v));
    }

    if let Some(v) = env.get("TORCH_CUDA_ARCH_LIST") {
        let (specs, bad) = parse_torch_arch_list(v);
        let list = specs_as_arch_list(&specs);
        if !bad.is_empty() {
            out.push(
                Finding::warn(
                    ID,
                    format!(
                        "TORCH_CUDA_ARCH_LIST='{v}' has entries PyTorch does not understand: {}",
                        bad.join(", ")
                    ),
                )
                .fix("write capabilities as major.minor, separated by ';' (e.g. '8.0;9.0+PTX')"),
            );
        }
        for g in facts.gpu_list().iter().filter(|g| policy.selects(g.index)) {
            let Some(cc) = g.compute_capability.value() else {
                continue;
            };
            if coverage(&list, cc.major, cc.minor) == Coverage::None {
                out.push(
                    Finding::warn(ID, format!("TORCH_CUDA_ARCH_LIST='{v}' leaves out {} (compute capability {cc}): CUDA extensions built here fail on it with 'no kernel image is available'", g.label()))
                        .gpu(g.index)
                        .with("TORCH_CUDA_ARCH_LIST", v)
                        .fix(format!("add {}.{} to TORCH_CUDA_ARCH_LIST (or unset it to build for the GPUs present)", cc.major, cc.minor)),
                );
            }
        }
    }

    if let Some(v) = env.get("LD_LIBRARY_PATH") {
        let entries: Vec<&str> = v.split(':').collect();
        if entries.iter().any(|e| e.is_empty()) {
            out.push(
                Finding::warn(ID, format!("LD_LIBRARY_PATH='{v}' has an empty entry: the loader then searches the current directory, so whatever directory a job starts in can replace its libraries"))
                    .fix("remove the empty entry (a leading, trailing or doubled ':'), e.g. export LD_LIBRARY_PATH=${LD_LIBRARY_PATH%:}"),
            );
        }
        if let Some(rel) = entries
            .iter()
            .find(|e| !e.is_empty() && !e.starts_with('/'))
        {
            out.push(
                Finding::warn(ID, format!("LD_LIBRARY_PATH has a relative entry '{rel}': it depends on the directory a job starts in"))
                    .fix("use absolute paths in LD_LIBRARY_PATH"),
            );
        }
        if let (Ok(copies), Some(driver)) =
            (facts.host.libraries.get(), facts.driver.version.value())
        {
            let shadow: Vec<&LibraryCopy> = copies
                .iter()
                .filter(|c| {
                    c.source == LibrarySource::LdLibraryPath
                        && matches!(c.library.as_str(), "libcuda" | "libnvidia-ml")
                })
                .filter(|c| !is_compat(c) && c.version.as_deref().is_some_and(|cv| cv != driver))
                .collect();
            if !shadow.is_empty() {
                out.push(
                    Finding::fail(ID, format!("LD_LIBRARY_PATH shadows the driver's libraries with another version ({}); the kernel module is {driver}", shadow.iter().map(|c| format!("{} {}", c.library, c.version.as_deref().unwrap_or("?"))).collect::<Vec<_>>().join(", ")))
                        .with("copies", shadow.iter().map(|c| describe(c)).collect::<Vec<_>>())
                        .fix("remove that directory from LD_LIBRARY_PATH; libcuda and libnvidia-ml must come from the installed driver"),
                );
            }
        }
        if let CompatState::Older {
            copy,
            version,
            module,
        } = compat_state(facts)
        {
            if copy.source == LibrarySource::LdLibraryPath {
                let dir = copy
                    .path
                    .rsplit_once('/')
                    .map(|(d, _)| d)
                    .unwrap_or(&copy.path);
                let rest: Vec<&str> = entries
                    .iter()
                    .copied()
                    .filter(|e| !e.is_empty() && e.trim_end_matches('/') != dir)
                    .collect();
                out.push(
                    Finding::fail(ID, format!("LD_LIBRARY_PATH puts the forward-compatibility libcuda {version} of {dir} ahead of the driver's, and it is older than the kernel module {module}: every CUDA program started from this environment fails with error 803 (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH); a compat package serves only a driver older than it"))
                        .with("LD_LIBRARY_PATH", v)
                        .with("copy", describe(copy))
                        .with("kernel_module", &module)
                        .with("source", FORWARD_COMPAT_DOC)
                        .fix(if rest.is_empty() {
                            format!("remove {dir} from LD_LIBRARY_PATH: unset LD_LIBRARY_PATH (and where it is set: ~/.bashrc, the image's ENV)")
                        } else {
                            format!("remove {dir} from LD_LIBRARY_PATH: export LD_LIBRARY_PATH={} (and where it is set: ~/.bashrc, the image's ENV)", rest.join(":"))
                        }),
                );
            }
        }
    }
    if let Some(v) = env.get("LD_PRELOAD") {
        let cuda = v
            .split([':', ' '])
            .filter(|e| {
                e.rsplit('/')
                    .next()
                    .and_then(crate::parse::host::libs::library_of)
                    .is_some()
            })
            .collect::<Vec<_>>();
        let f = if cuda.is_empty() {
            Finding::info(ID, format!("LD_PRELOAD='{v}' is loaded into every process"))
        } else {
            Finding::warn(ID, format!("LD_PRELOAD forces CUDA libraries into every process ({}): they win over the ones each program was built with", cuda.join(", ")))
                .fix("unset LD_PRELOAD")
        };
        out.push(f.with("LD_PRELOAD", v));
    }
    if let Some(v) = env.get("PYTORCH_CUDA_ALLOC_CONF") {
        out.push(
            Finding::info(
                ID,
                format!("PYTORCH_CUDA_ALLOC_CONF='{v}' changes PyTorch's GPU memory allocator"),
            )
            .with("PYTORCH_CUDA_ALLOC_CONF", v),
        );
    }

    if out.iter().all(|f| f.status < Status::Warn) {
        let set: Vec<String> = env
            .vars
            .iter()
            .filter(|(k, _)| {
                k.starts_with("CUDA_")
                    || k.starts_with("NCCL_")
                    || k.starts_with("LD_")
                    || k == "TORCH_CUDA_ARCH_LIST"
            })
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push(
            Finding::pass(
                ID,
                if set.is_empty() {
                    "no variable that changes CUDA, NCCL or the loader is set".to_string()
                } else {
                    format!("nothing harmful among {}", set.join(" "))
                },
            )
            .with("variables", &set),
        );
    }
    out
}

/// NCCL_IB_HCA against the RDMA ports read: a list that selects none of them sends NCCL's
/// inter-node traffic over TCP sockets ("NET/IB : No device found").
fn judge_ib_hca(facts: &Facts, v: &str) -> Finding {
    let list = parse_hca_list(v);
    let ports = match facts.host.fabric.rdma.get() {
        Ok(p) => p,
        Err(r) => {
            return Finding::info(
                ID,
                format!(
                "NCCL_IB_HCA='{v}' is set; it could not be compared with the RDMA devices ({r})"
            ),
            )
            .with("NCCL_IB_HCA", v)
        }
    };
    let names = |ps: &[&crate::facts::RdmaPort]| {
        ps.iter()
            .map(|p| format!("{}:{}", p.device, p.port))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let all: Vec<&crate::facts::RdmaPort> = ports.iter().collect();
    if all.is_empty() {
        return Finding::info(ID, format!("NCCL_IB_HCA='{v}' names RDMA devices and this machine has none: NCCL talks to other nodes over TCP sockets whatever it says (a setting copied from another cluster?)"))
            .with("NCCL_IB_HCA", v)
            .fix("unset NCCL_IB_HCA on machines without InfiniBand/RoCE");
    }
    let selected: Vec<&crate::facts::RdmaPort> = all
        .iter()
        .copied()
        .filter(|p| list.selects(&p.device, p.port))
        .collect();
    let missing: Vec<String> = if list.exclude {
        Vec::new()
    } else {
        (0..list.entries.len())
            .filter(|i| {
                !all.iter()
                    .any(|p| list.entry_matches(*i, &p.device, p.port))
            })
            .map(|i| {
                let (n, p) = &list.entries[i];
                p.map(|p| format!("{n}:{p}")).unwrap_or_else(|| n.clone())
            })
            .collect()
    };
    let ev = |f: Finding| {
        f.with("NCCL_IB_HCA", v)
            .with("rdma_ports", names(&all))
            .with("selected", names(&selected))
    };
    let fix = format!(
        "set NCCL_IB_HCA to the ports this machine has (e.g. NCCL_IB_HCA={}) or unset it: NCCL then uses every RDMA device",
        if all.iter().all(|p| p.port == 1) {
            format!("={}", all.iter().map(|p| p.device.as_str()).collect::<Vec<_>>().join(","))
        } else {
            format!("={}", names(&all).replace(", ", ","))
        }
    );
    if selected.is_empty() {
        ev(Finding::fail(ID, format!("NCCL_IB_HCA='{v}' selects none of this machine's RDMA ports ({}): NCCL finds no InfiniBand device ('NET/IB : No device found') and sends all traffic between nodes over TCP sockets", names(&all))))
            .fix(fix)
    } else if !missing.is_empty() {
        ev(Finding::warn(ID, format!("NCCL_IB_HCA='{v}' names {} that this machine does not have: NCCL uses only {} of its {} RDMA ports", missing.join(", "), names(&selected), all.len())))
            .fix(fix)
    } else {
        ev(Finding::info(
            ID,
            format!(
                "NCCL_IB_HCA='{v}' selects {} of the {} RDMA ports",
                names(&selected),
                all.len()
            ),
        ))
    }
}

fn uniform_gpus(facts: &Facts) -> bool {
    let names: Vec<&String> = facts
        .gpu_list()
        .iter()
        .filter_map(|g| g.name.value())
        .collect();
    names.windows(2).all(|w| w[0] == w[1])
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::cuda::copy;
    use crate::facts::EnvFacts;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::{statuses, Machine};

    fn env(vars: &[(&str, &str)]) -> Reading<EnvFacts> {
        Reading::Value(EnvFacts {
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    #[test]
    fn env_visible_devices_hides_gpu() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "0")]);
        let r = run_env(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Warn);
        assert!(r[0].message.contains("1 of the 2"));
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "")]);
        assert_eq!(run_env(&f, &Policy::default())[0].status, Status::Fail);
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "0,7,1")]);
        let r = run_env(&f, &Policy::default());
        assert!(r[0].message.contains("stops at the first"), "{r:#?}");
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "GPU-0aaa,GPU-1")]);
        assert_eq!(run_env(&f, &Policy::default())[0].status, Status::Pass);
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "GPU-zzz")]);
        assert_eq!(run_env(&f, &Policy::default())[0].status, Status::Fail);
    }

    #[test]
    fn env_switches_and_paths() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
        f.host.env = env(&[
            ("CUDA_LAUNCH_BLOCKING", "1"),
            ("NCCL_P2P_DISABLE", "1"),
            ("TORCH_CUDA_ARCH_LIST", "7.0;8.0+PTX"),
            ("LD_LIBRARY_PATH", "/usr/local/cuda/lib64:"),
        ]);
        let p = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        let r = run_env(&f, &p);
        let s = statuses(&r);
        assert!(s.contains(&Status::Fail), "{r:#?}");
        assert!(r.iter().any(|x| x.message.contains("CUDA_LAUNCH_BLOCKING")));
        assert!(r.iter().any(|x| x.message.contains("empty entry")));
        // 8.0+PTX covers 9.0 through PTX: no arch warning.
        assert!(!r.iter().any(|x| x.message.contains("leaves out")));
        f.host.env = env(&[("TORCH_CUDA_ARCH_LIST", "7.0;8.0")]);
        let r = run_env(&f, &Policy::default());
        assert_eq!(
            r.iter()
                .filter(|x| x.message.contains("leaves out"))
                .count(),
            2
        );
        f.host.env = env(&[("HOME", "/root")]);
        assert_eq!(
            statuses(&run_env(&f, &Policy::default())),
            vec![Status::Pass]
        );
        f.host.env = Reading::unavailable("x");
        assert_eq!(
            statuses(&run_env(&f, &Policy::default())),
            vec![Status::Skip]
        );
    }

    #[test]
    fn env_ld_library_path_shadows_libcuda() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.host.env = env(&[("LD_LIBRARY_PATH", "/opt/old")]);
        f.host.libraries = Reading::Value(vec![copy(
            "libcuda",
            "/opt/old/libcuda.so.1",
            "libcuda.so.535.1.1",
            Some("535.1.1"),
            LibrarySource::LdLibraryPath,
        )]);
        let r = run_env(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail, "{r:#?}");
    }

    fn compat(v: &str) -> crate::facts::LibraryCopy {
        copy(
            "libcuda",
            "/usr/local/cuda/compat/libcuda.so.1",
            &format!("libcuda.so.{v}"),
            Some(v),
            LibrarySource::LdLibraryPath,
        )
    }

    #[test]
    fn an_older_compat_libcuda_on_ld_library_path_fails() {
        // Seen: "nothing harmful among LD_LIBRARY_PATH=/usr/local/cuda/compat:..." while every
        // CUDA program failed with error 803.
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.host.env = env(&[(
            "LD_LIBRARY_PATH",
            "/usr/local/cuda/compat:/usr/local/cuda/lib64",
        )]);
        f.host.libraries = Reading::Value(vec![compat("580.95.05")]);
        let r = run_env(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail], "{r:#?}");
        assert!(r[0].message.contains("error 803"));
        assert!(r[0].message.contains("580.95.05"));
        assert_eq!(
            r[0].fix.as_deref(),
            Some("remove /usr/local/cuda/compat from LD_LIBRARY_PATH: export LD_LIBRARY_PATH=/usr/local/cuda/lib64 (and where it is set: ~/.bashrc, the image's ENV)")
        );
        f.host.env = env(&[("LD_LIBRARY_PATH", "/usr/local/cuda/compat/")]);
        let r = run_env(&f, &Policy::default());
        assert!(r[0]
            .fix
            .as_deref()
            .is_some_and(|x| x.contains("unset LD_LIBRARY_PATH")));
        // Newer than the module: forward compatibility, not the environment's fault.
        f.host.libraries = Reading::Value(vec![compat("590.44.01")]);
        assert_eq!(
            statuses(&run_env(&f, &Policy::default())),
            vec![Status::Pass]
        );
        // The same version: harmless.
        f.host.libraries = Reading::Value(vec![compat("580.159.04")]);
        assert_eq!(
            statuses(&run_env(&f, &Policy::default())),
            vec![Status::Pass]
        );
    }

    fn port(dev: &str, n: u32) -> crate::facts::RdmaPort {
        crate::facts::RdmaPort {
            device: dev.into(),
            port: n,
            state: Some("ACTIVE".into()),
            phys_state: Some("LinkUp".into()),
            rate_gbps: Some(400.0),
            rate_text: Some("400 Gb/sec (4X NDR)".into()),
            link_layer: Some("InfiniBand".into()),
            hca_type: None,
        }
    }

    fn ib_hca(value: &str, ports: Reading<Vec<crate::facts::RdmaPort>>) -> Vec<Finding> {
        let mut f = Machine::healthy("h200-sxm-141gb", 8).build();
        f.host.env = env(&[("NCCL_IB_HCA", value)]);
        f.host.fabric.rdma = ports;
        run_env(&f, &Policy::default())
    }

    #[test]
    fn nccl_ib_hca_against_the_rdma_devices() {
        let two = || Reading::Value(vec![port("mlx5_0", 1), port("mlx5_1", 1)]);
        // Seen: devices of another cluster: info, then pass; NCCL used sockets.
        let r = ib_hca("=mlx5_8,mlx5_9", two());
        assert_eq!(r[0].status, Status::Fail, "{r:#?}");
        assert!(r[0]
            .message
            .contains("selects none of this machine's RDMA ports (mlx5_0:1, mlx5_1:1)"));
        assert!(r[0].message.contains("TCP sockets"));
        assert!(r[0]
            .fix
            .as_deref()
            .is_some_and(|x| x.contains("NCCL_IB_HCA==mlx5_0,mlx5_1")));
        assert!(!r.iter().any(|x| x.status == Status::Pass));
        // A port the HCA does not have.
        assert_eq!(ib_hca("mlx5_0:2", two())[0].status, Status::Fail);
        // Excluding all of them.
        assert_eq!(ib_hca("^mlx5", two())[0].status, Status::Fail);
        // Some named, some missing.
        let r = ib_hca("=mlx5_0,mlx5_7", two());
        assert_eq!(r[0].status, Status::Warn, "{r:#?}");
        assert!(r[0]
            .message
            .contains("names mlx5_7 that this machine does not have"));
        assert!(r[0].message.contains("uses only mlx5_0:1 of its 2"));
        // All named: said, not judged.
        let r = ib_hca("mlx5", two());
        assert_eq!(statuses(&r), vec![Status::Info, Status::Pass]);
        assert!(r[0].message.contains("selects mlx5_0:1, mlx5_1:1 of the 2"));
        // Excluding a device that does not exist changes nothing.
        assert_eq!(ib_hca("^=mlx5_5", two())[0].status, Status::Info);
        // No RDMA device at all.
        let r = ib_hca("mlx5_0", Reading::Value(vec![]));
        assert_eq!(r[0].status, Status::Info);
        assert!(r[0].message.contains("this machine has none"));
        let r = ib_hca("mlx5_0", Reading::unavailable("permission denied"));
        assert_eq!(r[0].status, Status::Info);
        assert!(r[0].message.contains("permission denied"));
        // Two ports on one HCA: the suggestion names the ports.
        let r = ib_hca(
            "=mlx5_9",
            Reading::Value(vec![port("mlx5_0", 1), port("mlx5_0", 2)]),
        );
        assert!(r[0]
            .fix
            .as_deref()
            .is_some_and(|x| x.contains("NCCL_IB_HCA==mlx5_0:1,mlx5_0:2")));
    }

    fn one(vars: &[(&str, &str)], gpus: u32, policy: &Policy) -> Vec<Finding> {
        let mut f = Machine::healthy("h200-sxm-141gb", gpus).build();
        f.host.env = env(vars);
        run_env(&f, policy)
    }

    fn train() -> Policy {
        Policy {
            profile: Profile::Train,
            ..Policy::default()
        }
    }

    #[test]
    fn switches_by_gpu_count_and_profile() {
        let d = Policy::default();
        let st = |v: &[(&str, &str)], gpus: u32, p: &Policy| statuses(&one(v, gpus, p));
        assert_eq!(
            st(&[("CUDA_CACHE_DISABLE", "1")], 1, &d),
            vec![Status::Warn]
        );
        assert_eq!(
            st(&[("CUDA_CACHE_DISABLE", "0")], 1, &d),
            vec![Status::Pass]
        );
        assert_eq!(
            st(&[("CUDA_MODULE_LOADING", "eager")], 1, &d),
            vec![Status::Info, Status::Pass]
        );
        assert_eq!(
            st(&[("CUDA_MODULE_LOADING", "LAZY")], 1, &d),
            vec![Status::Pass]
        );
        // P2P off: info on one GPU, warn on several, fail on several under train.
        let p2p = [("NCCL_P2P_DISABLE", "1")];
        assert_eq!(st(&p2p, 1, &train()), vec![Status::Info, Status::Pass]);
        assert_eq!(st(&p2p, 2, &d), vec![Status::Warn]);
        assert_eq!(st(&p2p, 2, &train()), vec![Status::Fail]);
        let shm = [("NCCL_SHM_DISABLE", "1")];
        assert_eq!(st(&shm, 1, &d), vec![Status::Info, Status::Pass]);
        assert_eq!(st(&shm, 2, &d), vec![Status::Warn]);
        assert_eq!(st(&[("NCCL_DEBUG", "TRACE")], 1, &d), vec![Status::Warn]);
        assert_eq!(
            st(&[("NCCL_DEBUG", "INFO")], 1, &d),
            vec![Status::Info, Status::Pass]
        );
        let r = one(&[("NCCL_ALGO", "Ring"), ("NCCL_PROTO", "Simple")], 1, &d);
        assert_eq!(statuses(&r), vec![Status::Info, Status::Pass]);
        assert!(r[0].message.contains("NCCL_ALGO=Ring NCCL_PROTO=Simple"));
        assert!(r[1]
            .message
            .contains("nothing harmful among NCCL_ALGO=Ring NCCL_PROTO=Simple"));
        let r = one(
            &[("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")],
            1,
            &d,
        );
        assert_eq!(statuses(&r), vec![Status::Info, Status::Pass]);
    }

    #[test]
    fn ib_disable_against_the_rdma_devices() {
        let mut f = Machine::healthy("h200-sxm-141gb", 8).build();
        f.host.env = env(&[("NCCL_IB_DISABLE", "1")]);
        f.host.fabric.rdma = Reading::Value(vec![port("mlx5_0", 1)]);
        assert_eq!(run_env(&f, &Policy::default())[0].status, Status::Warn);
        assert_eq!(run_env(&f, &train())[0].status, Status::Fail);
        assert!(run_env(&f, &train())[0]
            .message
            .contains("although this machine has RDMA devices"));
        for none in [Reading::Value(vec![]), Reading::unavailable("x")] {
            f.host.fabric.rdma = none;
            let r = run_env(&f, &train());
            assert_eq!(r[0].status, Status::Info);
            assert!(!r[0].message.contains("although"));
        }
    }

    #[test]
    fn paths_preload_and_arch_lists() {
        let d = Policy::default();
        let r = one(&[("LD_LIBRARY_PATH", "lib:/usr/lib")], 1, &d);
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert!(r[0].message.contains("relative entry 'lib'"));
        assert_eq!(
            statuses(&one(&[("LD_LIBRARY_PATH", "/a:/b")], 1, &d)),
            vec![Status::Pass]
        );
        let r = one(
            &[("LD_PRELOAD", "/opt/x/libnccl.so.2 /usr/lib/libjemalloc.so")],
            1,
            &d,
        );
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert!(r[0].message.contains("(/opt/x/libnccl.so.2)"));
        let r = one(&[("LD_PRELOAD", "/usr/lib/libjemalloc.so")], 1, &d);
        assert_eq!(statuses(&r), vec![Status::Info, Status::Pass]);
        let r = one(&[("TORCH_CUDA_ARCH_LIST", "9.0;sm_90")], 1, &d);
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert!(r[0].message.contains("does not understand: sm_90"));
        // --gpus 1 judges GPU 1 only.
        let p = Policy {
            gpus: Some(vec![1]),
            ..Policy::default()
        };
        let r = one(&[("TORCH_CUDA_ARCH_LIST", "8.0")], 2, &p);
        assert_eq!(
            r.iter()
                .filter(|x| x.message.contains("leaves out"))
                .count(),
            1
        );
        assert_eq!(r[0].gpu, Some(1));
    }

    #[test]
    fn visible_devices_and_device_order() {
        let d = Policy::default();
        // Every GPU named: nothing to say (indices on identical GPUs need no order).
        assert_eq!(
            statuses(&one(&[("CUDA_VISIBLE_DEVICES", "0,1")], 2, &d)),
            vec![Status::Pass]
        );
        // Different models and indices without PCI_BUS_ID order: said.
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| g.name = Reading::Value("NVIDIA H100".into()))
            .build();
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "0,1")]);
        let r = run_env(&f, &d);
        assert_eq!(statuses(&r), vec![Status::Info, Status::Pass], "{r:#?}");
        assert!(r[0].message.contains("CUDA_DEVICE_ORDER"));
        f.host.env = env(&[
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
        ]);
        assert_eq!(statuses(&run_env(&f, &d)), vec![Status::Pass]);
        // A UUID prefix of a GPU counts; one of no GPU hides that entry.
        let r = one(&[("CUDA_VISIBLE_DEVICES", "GPU-0aaa,GPU-dead")], 2, &d);
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert!(
            r[0].message.contains("(GPU-dead)") && r[0].message.contains("only 1 GPU is visible")
        );
        // No GPU list read: UUIDs cannot be judged, and nothing is hidden that is known.
        let mut u = Machine::healthy("h200-sxm-141gb", 2).build();
        u.gpus = Reading::unavailable("no driver");
        u.host.env = env(&[("CUDA_VISIBLE_DEVICES", "GPU-zzz")]);
        let r = run_env(&u, &d);
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert!(r[0].message.contains("shows 1 of the 2 GPUs"));
    }
}
