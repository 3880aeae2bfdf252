//! Facts about the software stack and the host around the GPU: libraries, frameworks,
//! environment, containers, storage, network, Jupyter, ssh.
//!
//! Paths in these facts are as the machine names them ("/usr/lib/x86_64-linux-gnu/..."), never
//! prefixed with a snapshot directory, so a live audit and an audit of its snapshot compare
//! equal.

use crate::figures::results::{DirThroughput, LoopbackRtt};
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostFacts {
    /// The environment variables that change how CUDA, NCCL and the loader behave.
    pub env: Reading<EnvFacts>,
    /// Every copy of the CUDA libraries found (ld cache, LD_LIBRARY_PATH, toolkits, wheels).
    pub libraries: Reading<Vec<LibraryCopy>>,
    /// Python environments that have PyTorch installed.
    pub python: Reading<Vec<PythonEnv>>,
    pub container: ContainerFacts,
    /// /proc/mounts, in order (a later mount on the same point hides the earlier one).
    pub mounts: Reading<Vec<Mount>>,
    /// The directories where data and models live (`--data-dir`, or the defaults).
    pub data_dirs: Reading<Vec<DataDir>>,
    /// storage.throughput: one entry per data directory (live, measured runs only).
    pub throughput: Reading<Vec<DirThroughput>>,
    /// net.loopback (live, measured runs only).
    pub loopback: Reading<LoopbackRtt>,
    pub fabric: FabricFacts,
    /// Jupyter configuration files found (an empty list: none).
    pub jupyter: Reading<Vec<JupyterConfig>>,
    pub ssh: SshFacts,
    /// The graphics driver's loader files (Vulkan ICD manifests, glvnd EGL vendor files).
    #[serde(default)]
    pub graphics: Reading<GraphicsFiles>,
    /// Installed versions of the stack around the GPU, where they came from (security.versions;
    /// the fabric manager's package for the NVLink fabric checks).
    #[serde(default)]
    pub versions: VersionFacts,
}

impl HostFacts {
    pub fn unread(reason: &str) -> Self {
        HostFacts {
            env: Reading::unavailable(reason),
            libraries: Reading::unavailable(reason),
            python: Reading::unavailable(reason),
            container: ContainerFacts::unread(reason),
            mounts: Reading::unavailable(reason),
            data_dirs: Reading::unavailable(reason),
            throughput: Reading::unavailable(reason),
            loopback: Reading::unavailable(reason),
            fabric: FabricFacts {
                rdma: Reading::unavailable(reason),
                nics: Reading::unavailable(reason),
            },
            jupyter: Reading::unavailable(reason),
            ssh: SshFacts {
                sshd: Reading::unavailable(reason),
                authorized_keys: Reading::unavailable(reason),
            },
            graphics: Reading::unavailable(reason),
            versions: VersionFacts::unread(reason),
        }
    }
}

/// What the package database and the programs themselves say about installed versions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionFacts {
    /// The watched packages of the package database (`parse::packages::WATCHED`):
    /// dpkg's status file, or rpm's listing. `Unavailable` where there is no database, or it
    /// could not be read.
    pub packages: Reading<InstalledPackages>,
    /// The container stack's programs that were found and asked `--version` (live), or
    /// their answers as `collect` recorded them.
    pub programs: Reading<Vec<ProgramVersion>>,
}

impl VersionFacts {
    pub fn unread(reason: &str) -> Self {
        VersionFacts {
            packages: Reading::unavailable(reason),
            programs: Reading::unavailable(reason),
        }
    }

    /// The installed package of that name, where the database was read and lists it.
    pub fn package(&self, name: &str) -> Option<&Package> {
        self.packages.value()?.get(name)
    }
}

/// Packages of the package database, and which database it was.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstalledPackages {
    /// "/var/lib/dpkg/status" or "rpm -qa".
    pub source: String,
    pub packages: Vec<Package>,
}

impl InstalledPackages {
    pub fn get(&self, name: &str) -> Option<&Package> {
        self.packages.iter().find(|p| p.name == name)
    }

    /// The packages whose names start with `prefix` ("nvidia-fabricmanager").
    pub fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a Package> + 'a {
        self.packages
            .iter()
            .filter(move |p| p.name.starts_with(prefix))
    }
}

/// One installed package.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    pub name: String,
    /// As the database writes it, epoch and revision included ("5:27.1.1-1~ubuntu.22.04~jammy").
    pub version: String,
    pub arch: Option<String>,
    /// Who built it: dpkg's Maintainer, rpm's Vendor ("Docker <support@docker.com>",
    /// "NVIDIA CORPORATION <cudatools@nvidia.com>", "Ubuntu Developers <...>", "Red Hat, Inc.").
    pub vendor: Option<String>,
}

/// A program of the container stack and what it said of its version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramVersion {
    /// "runc", "containerd", "dockerd", "nvidia-ctk", "nvidia-container-cli".
    pub program: String,
    /// Where it is ("/usr/bin/runc").
    pub path: String,
    /// The version it printed ("1.1.12", "1.1.7-0ubuntu1~22.04.2"), or why there is none
    /// ("runc: timed out after 5 s", "'--version' printed no version: ...").
    pub version: Reading<String>,
}

/// The variables gpuaudit reads, and nothing else (no secrets travel into reports or
/// snapshots).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvFacts {
    /// (name, value), sorted by name.
    pub vars: Vec<(String, String)>,
}

impl EnvFacts {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One file of a CUDA library.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryCopy {
    /// "libcuda", "libcudart", "libcublas", "libcublasLt", "libnccl", "libnvrtc", "libcudnn",
    /// "libnvidia-ml".
    pub library: String,
    /// The path a program asks for ("/usr/lib/x86_64-linux-gnu/libnccl.so.2").
    pub path: String,
    /// The file name it resolves to through symbolic links ("libnccl.so.2.21.5").
    pub file: String,
    /// Full version where known: from the resolved file name, or from the wheel that installed
    /// it.
    pub version: Option<String>,
    pub source: LibrarySource,
}

/// Where a library copy was found; also the order in which the dynamic loader looks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LibrarySource {
    /// A directory of LD_LIBRARY_PATH (searched first).
    LdLibraryPath,
    /// /etc/ld.so.cache (what `ldconfig -p` lists): where a program without RUNPATH resolves.
    LdCache,
    /// A CUDA toolkit directory that is not in the ld cache (/usr/local/cuda-*/lib64).
    Toolkit,
    /// A Python wheel (nvidia-nccl-cu12 ...); `package` is its distribution name.
    Wheel { package: String },
    /// Shipped inside a framework's own directory (torch/lib).
    Framework { name: String },
    /// A conda environment's lib directory.
    Conda,
    /// Another directory that was searched (/usr/local/nvidia/lib64, ...).
    Other,
}

impl LibrarySource {
    pub fn label(&self) -> String {
        match self {
            LibrarySource::LdLibraryPath => "LD_LIBRARY_PATH".into(),
            LibrarySource::LdCache => "ld.so.cache".into(),
            LibrarySource::Toolkit => "toolkit".into(),
            LibrarySource::Wheel { package } => format!("wheel:{package}"),
            LibrarySource::Framework { name } => format!("framework:{name}"),
            LibrarySource::Conda => "conda".into(),
            LibrarySource::Other => "other".into(),
        }
    }

    /// The inverse of [`label`](Self::label); `None` for an unknown label.
    pub fn from_label(s: &str) -> Option<LibrarySource> {
        Some(match s {
            "LD_LIBRARY_PATH" => LibrarySource::LdLibraryPath,
            "ld.so.cache" => LibrarySource::LdCache,
            "toolkit" => LibrarySource::Toolkit,
            "conda" => LibrarySource::Conda,
            "other" => LibrarySource::Other,
            _ => {
                if let Some(p) = s.strip_prefix("wheel:") {
                    LibrarySource::Wheel {
                        package: p.to_string(),
                    }
                } else if let Some(n) = s.strip_prefix("framework:") {
                    LibrarySource::Framework {
                        name: n.to_string(),
                    }
                } else {
                    return None;
                }
            }
        })
    }
}

/// A Python environment (a site-packages directory) with PyTorch in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PythonEnv {
    /// The site-packages (or dist-packages) directory.
    pub site_packages: String,
    /// "system", "user", "venv", "conda".
    pub kind: String,
    /// The interpreter that uses this directory, where one was found.
    pub interpreter: Option<String>,
    pub torch: TorchInstall,
    /// NVIDIA wheels installed beside it: (distribution name, version).
    pub nvidia_wheels: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TorchInstall {
    /// "2.5.1+cu124".
    pub version: String,
    /// `torch.version.cuda`: "12.4"; `None` for a CPU-only (or ROCm) build.
    pub cuda: Option<String>,
    /// `torch.version.hip` (a ROCm build), where set.
    pub hip: Option<String>,
    /// The GPU architectures compiled in ("sm_80", "sm_90", "compute_90" for PTX).
    pub arch_list: Reading<Vec<String>>,
    /// cuDNN version as torch reports it (91002 -> "9.1.2"), or the nvidia-cudnn wheel's.
    pub cudnn: Reading<String>,
    /// NCCL version torch carries ("2.21.5"), or the nvidia-nccl wheel's.
    pub nccl: Reading<String>,
    /// "interpreter" (asked `python -c`) or "files" (read version.py and the wheels).
    pub source: String,
    /// What went wrong asking the interpreter, where it was asked and failed.
    pub interpreter_error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ContainerFacts {
    /// Inside a container: `Value(Some(kind))` ("docker", "podman", "kubernetes",
    /// "containerd", "lxc", ...), `Value(None)` when no sign of one was found.
    pub inside: Reading<Option<String>>,
    /// What the verdict rests on ("/.dockerenv exists", "/proc/1/cgroup: kubepods", ...).
    pub signs: Vec<String>,
    /// /etc/docker/daemon.json: `Value(None)` when absent.
    pub docker: Reading<Option<DockerDaemon>>,
    /// /etc/containerd/config.toml: `Value(None)` when absent.
    pub containerd: Reading<Option<ContainerdConfig>>,
    /// The NVIDIA container toolkit's pieces found.
    pub toolkit: Reading<ContainerToolkit>,
    /// CDI specifications in /etc/cdi and /var/run/cdi.
    pub cdi: Reading<Vec<CdiSpec>>,
    /// /dev/nvidia* device nodes.
    pub devices: Reading<Vec<DeviceNode>>,
    /// The audit's own user: (uid, gids), to judge device permissions.
    pub identity: Reading<(u32, Vec<u32>)>,
}

impl ContainerFacts {
    pub fn unread(reason: &str) -> Self {
        ContainerFacts {
            inside: Reading::unavailable(reason),
            signs: Vec::new(),
            docker: Reading::unavailable(reason),
            containerd: Reading::unavailable(reason),
            toolkit: Reading::unavailable(reason),
            cdi: Reading::unavailable(reason),
            devices: Reading::unavailable(reason),
            identity: Reading::unavailable(reason),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerDaemon {
    /// Names under "runtimes" with their "path".
    pub runtimes: Vec<(String, String)>,
    pub default_runtime: Option<String>,
    /// `features.cdi` (Docker 25+).
    pub cdi_enabled: Option<bool>,
    /// Why dockerd refuses this file (not JSON, with the parser's line and column; not a JSON
    /// object; ...), starting with the file's path; `None` when it parses. A file that is there
    /// but does not parse is a finding, not a reading that failed: dockerd does not start.
    #[serde(default)]
    pub invalid: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerdConfig {
    /// Runtime names configured for the CRI plugin ("runc", "nvidia").
    pub runtimes: Vec<String>,
    pub default_runtime: Option<String>,
    /// `enable_cdi`.
    pub cdi_enabled: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerToolkit {
    /// Paths found among nvidia-container-runtime, nvidia-container-runtime-hook,
    /// nvidia-container-cli, nvidia-ctk, /etc/nvidia-container-runtime/config.toml.
    pub found: Vec<String>,
    /// Container engines installed on this machine (dockerd, containerd, podman, crio), by
    /// the path of their program.
    pub engines: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdiSpec {
    pub path: String,
    /// "nvidia.com/gpu".
    pub kind: Option<String>,
    /// Device names ("0", "GPU-...", "all").
    pub devices: Vec<String>,
    /// Versions of libcuda.so.X the spec mounts (it names the driver it was generated for).
    pub libcuda_versions: Vec<String>,
    /// Why the file could not be read, where it could not.
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceNode {
    /// "/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", ...
    pub path: String,
    /// Permission bits (0o666).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// A character device (false: a plain file or directory stands where a device should).
    pub char_device: bool,
}

/// One line of /proc/mounts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub source: String,
    /// With the kernel's octal escapes (`\040`) decoded.
    pub target: String,
    pub fstype: String,
    pub options: Vec<String>,
}

impl Mount {
    /// The value of `key=value`, or `Some("")` for a bare flag `key`.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.iter().find_map(|o| match o.split_once('=') {
            Some((k, v)) if k == key => Some(v),
            None if o == key => Some(""),
            _ => None,
        })
    }
}

/// A directory where data or models live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataDir {
    /// As given ("--data-dir", or the default it came from).
    pub path: String,
    /// "--data-dir", "current directory", "Hugging Face cache", "torch cache".
    pub role: String,
    /// Whether it exists.
    pub exists: bool,
    /// Why whether it exists could not be told: a directory on its way this user may not
    /// enter ("/root/.cache/torch: permission denied"); `exists` is then false. Left out of
    /// cmd/data-dirs.json where it was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
    /// With symbolic links resolved, where that could be done.
    pub resolved: Option<String>,
    /// Whether this audit's user can create files in it.
    pub writable: Reading<bool>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FabricFacts {
    /// Ports of /sys/class/infiniband (InfiniBand and RoCE); an empty list: no RDMA device.
    pub rdma: Reading<Vec<RdmaPort>>,
    /// Physical network interfaces of /sys/class/net (those with a `device`).
    pub nics: Reading<Vec<NetInterface>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RdmaPort {
    /// "mlx5_0".
    pub device: String,
    pub port: u32,
    /// "ACTIVE", "DOWN", "INIT", ...
    pub state: Option<String>,
    /// "LinkUp", "Disabled", "Polling", ...
    pub phys_state: Option<String>,
    /// Gb/s.
    pub rate_gbps: Option<f64>,
    /// The rate file as written: "400 Gb/sec (4X NDR)".
    pub rate_text: Option<String>,
    /// "InfiniBand" or "Ethernet" (RoCE).
    pub link_layer: Option<String>,
    /// The HCA's model as the driver names it (/sys/class/infiniband/<hca>/hca_type: "MT4129"
    /// for a ConnectX-7), where read: ports are compared with their siblings of one model.
    #[serde(default)]
    pub hca_type: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetInterface {
    pub name: String,
    /// Mb/s as the driver reports it; `None` where unknown (many virtual NICs).
    pub speed_mbps: Option<u32>,
    /// "up", "down", ...
    pub operstate: Option<String>,
    /// The driver of the device ("mlx5_core", "ena", "virtio_net").
    pub driver: Option<String>,
}

/// One Jupyter configuration file, reduced to the settings gpuaudit judges.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JupyterConfig {
    pub path: String,
    /// (Class.key, value as written): ("ServerApp.iopub_data_rate_limit", "1000"). Token and
    /// password values are never kept: only "<set>" or "''".
    pub settings: Vec<(String, String)>,
    /// Why the file could not be read or parsed; it starts with the file's path.
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SshFacts {
    /// sshd's settings; `Value(None)` when there is no sshd configuration.
    pub sshd: Reading<Option<SshdConfig>>,
    pub authorized_keys: Reading<Vec<AuthorizedKey>>,
}

/// The sshd settings gpuaudit judges, as sshd resolves them (the first value wins; settings
/// inside `Match` blocks are kept apart: they apply only to some connections).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshdConfig {
    /// (keyword in lower case, value) from the global part, first value of each.
    pub global: Vec<(String, String)>,
    /// (Match criteria, keyword, value) of settings inside Match blocks.
    pub matched: Vec<(String, String, String)>,
    /// The files read, in order.
    pub files: Vec<String>,
    /// Lines that were not understood (file:line).
    pub ignored: Vec<String>,
}

impl SshdConfig {
    pub fn get(&self, keyword: &str) -> Option<&str> {
        let k = keyword.to_ascii_lowercase();
        self.global
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v.as_str())
    }
}

/// One authorized_keys entry, without its key material or comment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizedKey {
    pub file: String,
    /// The account it logs in as.
    pub user: String,
    /// "ssh-ed25519", "ssh-rsa", ...
    pub key_type: String,
    /// Key size in bits where it could be told (RSA from the key, fixed for the others).
    pub bits: Option<u32>,
    /// Option names only ("restrict", "command", "from", "no-port-forwarding", ...).
    pub options: Vec<String>,
}

impl AuthorizedKey {
    /// A key limited to a command or to source addresses, or with `restrict`.
    pub fn is_restricted(&self) -> bool {
        self.options
            .iter()
            .any(|o| matches!(o.as_str(), "restrict" | "command" | "from"))
    }
}

/// What tells the graphics loaders where the NVIDIA driver is: without its Vulkan ICD
/// manifest the Vulkan loader does not find the driver, without its EGL vendor file glvnd's
/// EGL does not (headless OpenGL then falls back to Mesa's software renderer).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphicsFiles {
    /// /usr/share/vulkan/icd.d, /usr/local/share/vulkan/icd.d, /etc/vulkan/icd.d.
    pub vulkan_icds: Vec<IcdManifest>,
    /// /usr/share/glvnd/egl_vendor.d, /etc/glvnd/egl_vendor.d.
    pub egl_vendors: Vec<IcdManifest>,
}

/// One loader manifest: the driver library it names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IcdManifest {
    pub path: String,
    /// `ICD.library_path` ("libGLX_nvidia.so.0", "libEGL_nvidia.so.0").
    pub library: Option<String>,
    /// Why the file could not be read or understood.
    pub error: Option<String>,
}

impl IcdManifest {
    /// Whether it points the loader at the NVIDIA driver.
    pub fn is_nvidia(&self) -> bool {
        self.library
            .as_deref()
            .is_some_and(|l| l.rsplit('/').next().unwrap_or(l).contains("nvidia"))
    }
}
