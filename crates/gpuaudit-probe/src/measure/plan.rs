//! What to measure: a pure function of the GPUs, the options and the libraries found.
//!
//! The plan decides everything that can be decided without touching a GPU (which groups run,
//! on which GPUs, at which sizes, within which time limits, and why a group or GPU is left
//! out), so it is tested here and the child process only executes it.
//!
//! [`plan`] is a composition: the gate (`measure::gate`: the GPUs measured, libcuda, the mode,
//! what was asked for, the time budgets) is built once, and each group's own plan
//! (`measure::<group>/plan.rs`: its params, what it schedules, its time estimate) is called
//! with it in the catalog's order. The groups' params are re-exported here, the plan's
//! vocabulary for the parent, the child and library callers.

use super::budget;
use super::gate::Gate;
use super::{burn, context, gemm, memory, nccl, p2p, pcie, rehearse, GpuGroup};
use gpuaudit_core::facts::{SkippedGpu, NOT_REHEARSED};
use serde::{Deserialize, Serialize};

pub use super::budget::Budget;
pub use super::burn::BurnParams;
pub use super::context::ContextParams;
pub use super::gate::{GpuOrder, LibStatus, Mode, Step, Target};
pub use super::gemm::{GemmLayout, GemmParams};
pub use super::memory::{read_shapes, LaunchShape, MemoryParams, READ_MIN_BLOCKS_PER_SM};
pub use super::nccl::NcclParams;
pub use super::p2p::{ordered_pairs, p2p_copies, pattern_copies, unordered_pairs, P2pParams};
pub use super::pcie::{PcieParams, HOST_EXTRAS_MS};
pub use super::rehearse::{RehearseParams, RehearseRequest, REHEARSE_REFERENCE_BATCH};

/// What the user asked for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Options {
    /// `--full` (also `bench` and `burn`): full sweeps, every dtype, the burn.
    pub full: bool,
    /// `gpuaudit bench NAME...` / `gpuaudit burn`: only these groups; `None` is every group
    /// of the mode.
    pub groups: Option<Vec<GpuGroup>>,
    pub burn_seconds: u32,
    /// Measure GPUs that are busy too.
    pub force: bool,
    /// Fresh processes for context creation (default 5 quick, 10 full).
    pub ctx_runs: Option<u32>,
    /// `--gpus`: only these GPU indices.
    pub gpus: Option<Vec<u32>>,
    /// Hard limit per group, replacing the computed one.
    pub timeout_s: Option<u64>,
    /// Launch shapes for the bandwidth kernels (`GPUAUDIT_MEMBW_LAUNCH`); `None`: defaults.
    pub memory_launch: Option<Vec<LaunchShape>>,
    /// GEMM size override (`GPUAUDIT_GEMM_SIZE`), square.
    pub gemm_size: Option<u64>,
    /// GEMM operand layout override (`GPUAUDIT_GEMM_LAYOUT=nn|tn`).
    pub gemm_layout: Option<GemmLayout>,
    /// How the per-GPU groups take the GPUs (`GPUAUDIT_GPU_ORDER`); `None`: the planner's
    /// choice.
    #[serde(default)]
    pub gpu_order: Option<GpuOrder>,
    /// `gpuaudit rehearse`: what to rehearse.
    #[serde(default)]
    pub rehearse: Option<RehearseRequest>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            full: false,
            groups: None,
            burn_seconds: 60,
            force: false,
            ctx_runs: None,
            gpus: None,
            timeout_s: None,
            memory_launch: None,
            gemm_size: None,
            gemm_layout: None,
            gpu_order: None,
            rehearse: None,
        }
    }
}

impl Options {
    /// `gpuaudit bench [NAME...]`: full measurements of the named groups (all but the burn
    /// when none is named).
    pub fn bench(groups: &[GpuGroup]) -> Options {
        let groups = if groups.is_empty() {
            GpuGroup::BENCH
                .into_iter()
                .filter(|g| *g != GpuGroup::Burn)
                .collect()
        } else {
            groups.to_vec()
        };
        Options {
            full: true,
            groups: Some(groups),
            ..Options::default()
        }
    }

    /// `gpuaudit rehearse`: the rehearsal's GPU stages alone.
    pub fn rehearse(req: RehearseRequest) -> Options {
        Options {
            full: true,
            groups: Some(vec![GpuGroup::Rehearse]),
            rehearse: Some(req),
            ..Options::default()
        }
    }

    /// `gpuaudit burn [SECS]`.
    pub fn burn(seconds: u32) -> Options {
        Options {
            full: true,
            groups: Some(vec![GpuGroup::Burn]),
            burn_seconds: seconds,
            ..Options::default()
        }
    }

    /// Whether `g` was asked for (the gate's first question).
    pub(super) fn wants(&self, g: GpuGroup) -> bool {
        self.groups.as_ref().is_none_or(|v| v.contains(&g))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanGpu {
    pub index: u32,
    pub pci_bus_id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub mode: Mode,
    /// The GPUs measured.
    pub gpus: Vec<PlanGpu>,
    pub skipped_gpus: Vec<SkippedGpu>,
    pub context: Step<ContextParams>,
    pub pcie: Step<PcieParams>,
    pub memory: Step<MemoryParams>,
    pub gemm: Step<GemmParams>,
    pub p2p: Step<P2pParams>,
    pub nccl: Step<NcclParams>,
    pub burn: Step<BurnParams>,
    #[serde(default = "not_rehearsed")]
    pub rehearse: Step<RehearseParams>,
    /// Limit for a child to start (cuInit, contexts, kernels loaded) before its first group.
    pub startup_timeout_s: u64,
}

impl Plan {
    pub fn budget(&self, g: GpuGroup) -> Option<Budget> {
        match g {
            GpuGroup::Context => self.context.params().map(|p| p.budget),
            GpuGroup::Pcie => self.pcie.params().map(|p| p.budget),
            GpuGroup::Memory => self.memory.params().map(|p| p.budget),
            GpuGroup::Gemm => self.gemm.params().map(|p| p.budget),
            GpuGroup::P2p => self.p2p.params().map(|p| p.budget),
            GpuGroup::Nccl => self.nccl.params().map(|p| p.budget),
            GpuGroup::Burn => self.burn.params().map(|p| p.budget),
            GpuGroup::Rehearse => self.rehearse.params().map(|p| p.budget),
        }
    }

    pub fn skip_reason(&self, g: GpuGroup) -> Option<&str> {
        match g {
            GpuGroup::Context => self.context.skip_reason(),
            GpuGroup::Pcie => self.pcie.skip_reason(),
            GpuGroup::Memory => self.memory.skip_reason(),
            GpuGroup::Gemm => self.gemm.skip_reason(),
            GpuGroup::P2p => self.p2p.skip_reason(),
            GpuGroup::Nccl => self.nccl.skip_reason(),
            GpuGroup::Burn => self.burn.skip_reason(),
            GpuGroup::Rehearse => self.rehearse.skip_reason(),
        }
    }

    pub fn runs(&self, g: GpuGroup) -> bool {
        self.budget(g).is_some()
    }

    /// The child processes to start, each with the groups it runs in order. Quick mode runs
    /// every group in one child (each child pays cuInit again), NCCL last: results stream out
    /// group by group, so a crash or hang costs only the group it happened in (the parent
    /// restarts a child for the groups after it). Full mode gives every group a fresh child.
    pub fn jobs(&self) -> Vec<Vec<GpuGroup>> {
        let child: Vec<GpuGroup> = GpuGroup::ALL
            .into_iter()
            .filter(|g| g.in_child() && self.runs(*g))
            .collect();
        match self.mode {
            Mode::Full => child.into_iter().map(|g| vec![g]).collect(),
            Mode::Quick if child.is_empty() => Vec::new(),
            Mode::Quick => vec![child],
        }
    }

    /// Expected time of everything planned, milliseconds (progress bar length).
    pub fn estimate_ms(&self) -> u64 {
        let groups: u64 = GpuGroup::ALL
            .into_iter()
            .filter_map(|g| self.budget(g))
            .map(|b| b.estimate_ms)
            .sum();
        groups + self.jobs().len() as u64 * self.child_startup_ms()
    }

    /// Process start, cuInit over the machine's GPUs, then a context and the kernels on each
    /// GPU measured (about 140 ms a GPU: the primary context and first allocation took 111 ms
    /// on the H200s).
    pub fn child_startup_ms(&self) -> u64 {
        let machine = (self.gpus.len() + self.skipped_gpus.len()) as u64;
        budget::child_startup_ms(machine, self.gpus.len() as u64)
    }
}

fn not_rehearsed() -> Step<RehearseParams> {
    Step::Skip(NOT_REHEARSED.into())
}

/// The plan for these GPUs. `targets` are every GPU the driver enumerated; `--gpus`, busy
/// GPUs (unless `force`) and MIG GPUs are left out with the reason ([`Gate::new`]).
pub fn plan(targets: &[Target], opts: &Options, libs: &LibStatus) -> Plan {
    let gate = Gate::new(targets, opts, libs);
    Plan {
        mode: gate.mode(),
        gpus: gate
            .gpus
            .iter()
            .map(|t| PlanGpu {
                index: t.index,
                pci_bus_id: t.pci_bus_id.clone(),
            })
            .collect(),
        skipped_gpus: gate.skipped.clone(),
        context: context::plan(&gate),
        pcie: pcie::plan(&gate),
        memory: memory::plan(&gate),
        gemm: gemm::plan(&gate),
        p2p: p2p::plan(&gate),
        nccl: nccl::plan(&gate),
        burn: burn::plan(&gate),
        rehearse: rehearse::plan(&gate),
        startup_timeout_s: budget::startup_timeout_s(gate.gpu_count()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::sizes::{GIB, KIB, MIB};
    use crate::rehearse::loader::LoaderConfig;
    use gpuaudit_core::facts::{ComputeCapability, GemmDtype};

    fn h200(i: u32) -> Target {
        Target {
            index: i,
            pci_bus_id: format!("0000:00:{:02x}.0", 6 + i),
            name: Some("NVIDIA H200".into()),
            compute_capability: Some(ComputeCapability { major: 9, minor: 0 }),
            busy: None,
            mig: false,
        }
    }

    fn v100(i: u32) -> Target {
        Target {
            compute_capability: Some(ComputeCapability { major: 7, minor: 0 }),
            name: Some("Tesla V100-SXM2-16GB".into()),
            ..h200(i)
        }
    }

    #[test]
    fn quick_plan_on_two_gpus() {
        let p = plan(
            &[h200(0), h200(1)],
            &Options::default(),
            &LibStatus::all_found(),
        );
        assert_eq!(p.mode, Mode::Quick);
        assert_eq!(p.gpus.len(), 2);
        for g in [
            GpuGroup::Context,
            GpuGroup::Pcie,
            GpuGroup::Memory,
            GpuGroup::Gemm,
            GpuGroup::P2p,
        ] {
            assert!(p.runs(g), "{g:?}");
        }
        assert!(p.runs(GpuGroup::Nccl));
        assert_eq!(
            p.burn.skip_reason(),
            Some("quick audit: run with --full (or gpuaudit burn)")
        );
        assert_eq!(p.gemm.params().unwrap().dtypes, vec![GemmDtype::Bf16]);
        assert_eq!(p.gemm.params().unwrap().size, 4096);
        let nccl = p.nccl.params().unwrap();
        assert!(nccl.sizes.contains(&MIB) && nccl.sizes.contains(&(256 * MIB)));
        assert_eq!(p.context.params().unwrap().runs, 5);
        // One child, NCCL (the likeliest to hang) last.
        assert_eq!(
            p.jobs(),
            vec![vec![
                GpuGroup::Pcie,
                GpuGroup::Memory,
                GpuGroup::Gemm,
                GpuGroup::P2p,
                GpuGroup::Nccl
            ]]
        );
        // The quick audit must fit in 10 s on 2 GPUs.
        assert!(p.estimate_ms() < 8_000, "{}", p.estimate_ms());
    }

    #[test]
    fn full_plan_on_two_gpus_fits_two_minutes() {
        let opts = Options {
            full: true,
            ..Options::default()
        };
        let p = plan(&[h200(0), h200(1)], &opts, &LibStatus::all_found());
        assert_eq!(p.gemm.params().unwrap().dtypes.len(), 6);
        assert_eq!(p.gemm.params().unwrap().size, 8192);
        assert_eq!(p.burn.params().unwrap().seconds, 60);
        let pcie = p.pcie.params().unwrap();
        assert_eq!(pcie.sizes.first(), Some(&(4 * KIB)));
        assert_eq!(pcie.sizes.last(), Some(&GIB));
        assert_eq!(pcie.all_at_once_size, Some(GIB));
        let nccl = p.nccl.params().unwrap();
        assert_eq!(nccl.sizes.first(), Some(&8));
        assert_eq!(nccl.sizes.last(), Some(&GIB));
        assert!(nccl.sizes.contains(&MIB));
        assert_eq!(p.jobs().len(), 6);
        assert!(p.estimate_ms() < 110_000, "{}", p.estimate_ms());
        assert!(p.burn.params().unwrap().budget.timeout_s >= 60);
    }

    #[test]
    fn flat_kernels_read_shapes_and_host_extras_by_mode() {
        let quick = plan(&[h200(0)], &Options::default(), &LibStatus::all_found());
        let m = quick.memory.params().unwrap();
        assert_eq!(m.flat_threads, vec![256]);
        assert!(!quick.pcie.params().unwrap().host_extras);
        let opts = Options {
            full: true,
            ..Options::default()
        };
        let full = plan(&[h200(0)], &opts, &LibStatus::all_found());
        let m = full.memory.params().unwrap();
        assert_eq!(m.flat_threads, vec![256, 512, 1024]);
        assert!(m.read_shapes.iter().any(|s| s.blocks_per_sm >= 8));
        assert!(full.pcie.params().unwrap().host_extras);
        // The extras are in the full plan's time budget.
        let full_pcie = full.pcie.params().unwrap().budget;
        assert_eq!(full_pcie.estimate_ms, 2500 + HOST_EXTRAS_MS);
    }

    #[test]
    fn device_patterns_run_in_full_plans_on_two_or_more_gpus() {
        let opts = Options {
            full: true,
            ..Options::default()
        };
        let full = plan(&[h200(0), h200(1)], &opts, &LibStatus::all_found());
        assert!(full.p2p.params().unwrap().patterns);
        let quick = plan(
            &[h200(0), h200(1)],
            &Options::default(),
            &LibStatus::all_found(),
        );
        assert!(!quick.p2p.params().unwrap().patterns);
        // One GPU: no P2P group at all.
        let one = plan(&[h200(0)], &opts, &LibStatus::all_found());
        assert!(one.p2p.params().is_none());
        // 2 GPUs: 4 patterns of 1 copy; 8 GPUs: 16 patterns of 7 copies; each repeats + 1.
        assert_eq!(pattern_copies(2, 10), 2 * 2 * 11);
        assert_eq!(pattern_copies(8, 10), 2 * 8 * 7 * 11);
        assert_eq!(pattern_copies(1, 10), 0);
        assert_eq!(pattern_copies(0, 10), 0);
        // The full plan on 8 GPUs still fits (the patterns add to the P2P group's estimate).
        let eight: Vec<Target> = (0..8).map(h200).collect();
        let p = plan(&eight, &opts, &LibStatus::all_found());
        let p2p = p.p2p.params().unwrap();
        assert!(p2p.patterns);
        let pairs = 56;
        let volume = p2p_copies(8, p2p.repeats) * p2p.size;
        let pv = pattern_copies(8, p2p.repeats) * p2p.size;
        assert_eq!(
            p2p.budget.estimate_ms,
            200 + 15 * pairs + (volume + pv) / 200_000_000
        );
    }

    #[test]
    fn old_plans_without_the_new_memory_fields_still_parse() {
        let p = plan(&[h200(0)], &Options::default(), &LibStatus::all_found());
        let mut v = serde_json::to_value(p.memory.params().unwrap()).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("read_shapes");
        o.remove("flat_threads");
        let m: MemoryParams = serde_json::from_value(v).unwrap();
        assert!(m.read_shapes.is_empty() && m.flat_threads.is_empty());
    }

    #[test]
    fn one_gpu_has_no_p2p_or_allreduce() {
        let p = plan(&[h200(0)], &Options::default(), &LibStatus::all_found());
        assert!(p.p2p.skip_reason().unwrap().contains("need two"));
        assert!(p.nccl.skip_reason().unwrap().contains("needs two"));
        assert!(p.pcie.params().unwrap().all_at_once_size.is_none());
    }

    #[test]
    fn busy_gpu_is_skipped_unless_forced() {
        let mut busy = h200(1);
        busy.busy = Some("2 processes".into());
        let p = plan(
            &[h200(0), busy.clone()],
            &Options::default(),
            &LibStatus::all_found(),
        );
        assert_eq!(p.gpus.len(), 1);
        assert_eq!(
            p.skipped_gpus[0].reason,
            "GPU 1 busy (2 processes); --force to measure anyway"
        );
        assert!(p.p2p.skip_reason().is_some());
        let forced = plan(
            &[h200(0), busy.clone()],
            &Options {
                force: true,
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert_eq!(forced.gpus.len(), 2);
        // All GPUs busy: every group says why.
        let all = plan(&[busy], &Options::default(), &LibStatus::all_found());
        assert!(all.gemm.skip_reason().unwrap().contains("GPU 1 busy"));
        assert!(all.context.skip_reason().unwrap().contains("GPU 1 busy"));
    }

    #[test]
    fn fp8_only_where_the_gpu_has_it() {
        let full = Options {
            full: true,
            ..Options::default()
        };
        let p = plan(&[v100(0)], &full, &LibStatus::all_found());
        let d = &p.gemm.params().unwrap().dtypes;
        assert!(!d.contains(&GemmDtype::Fp8));
        assert!(!d.contains(&GemmDtype::Bf16));
        assert!(d.contains(&GemmDtype::Fp16) && d.contains(&GemmDtype::Fp64));
        // Quick on Volta measures fp16.
        let q = plan(&[v100(0)], &Options::default(), &LibStatus::all_found());
        assert_eq!(q.gemm.params().unwrap().dtypes, vec![GemmDtype::Fp16]);
        let h = plan(&[h200(0)], &full, &LibStatus::all_found());
        assert!(h.gemm.params().unwrap().dtypes.contains(&GemmDtype::Fp8));
    }

    #[test]
    fn missing_libraries_cost_their_groups_only() {
        let libs = LibStatus {
            nccl: Some("libnccl not found (looked in /usr/lib)".into()),
            cublaslt: Some("libcublasLt not found".into()),
            ..LibStatus::default()
        };
        let full = Options {
            full: true,
            ..Options::default()
        };
        let p = plan(&[h200(0), h200(1)], &full, &libs);
        assert_eq!(
            p.nccl.skip_reason(),
            Some("libnccl not found (looked in /usr/lib)")
        );
        assert_eq!(
            p.gemm.params().unwrap().dtypes,
            vec![GemmDtype::Fp32, GemmDtype::Fp64]
        );
        assert!(p.burn.skip_reason().is_some());
        assert!(p.runs(GpuGroup::Pcie) && p.runs(GpuGroup::P2p));

        let no_cuda = LibStatus {
            cuda: Some("libcuda.so.1 not found".into()),
            ..LibStatus::default()
        };
        let p = plan(&[h200(0)], &full, &no_cuda);
        assert!(GpuGroup::ALL.into_iter().all(|g| !p.runs(g)));
        assert!(p.pcie.skip_reason().unwrap().contains("libcuda.so.1"));
    }

    #[test]
    fn no_gpu_and_gpu_selection() {
        let p = plan(&[], &Options::default(), &LibStatus::all_found());
        assert_eq!(p.pcie.skip_reason(), Some("no NVIDIA GPU found"));
        let p = plan(
            &[h200(0), h200(1)],
            &Options {
                gpus: Some(vec![1]),
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert_eq!(p.gpus.len(), 1);
        assert_eq!(p.gpus[0].index, 1);
        assert!(p.skipped_gpus.is_empty());
    }

    #[test]
    fn bench_and_burn_select_groups() {
        let p = plan(
            &[h200(0), h200(1)],
            &Options::bench(&[GpuGroup::Gemm]),
            &LibStatus::all_found(),
        );
        assert!(p.runs(GpuGroup::Gemm));
        assert!(p
            .pcie
            .skip_reason()
            .unwrap()
            .contains("gpuaudit bench pcie"));
        let p = plan(&[h200(0)], &Options::burn(30), &LibStatus::all_found());
        assert_eq!(p.burn.params().unwrap().seconds, 30);
        assert!(!p.runs(GpuGroup::Gemm));
        assert_eq!(p.jobs(), vec![vec![GpuGroup::Burn]]);
        let all = Options::bench(&[]);
        assert!(!all.wants(GpuGroup::Burn) && all.wants(GpuGroup::Nccl));
    }

    #[test]
    fn mig_gpu_is_left_out() {
        let mut m = h200(0);
        m.mig = true;
        let p = plan(&[m, h200(1)], &Options::default(), &LibStatus::all_found());
        assert_eq!(p.gpus.len(), 1);
        assert!(p.skipped_gpus[0].reason.contains("MIG"));
    }

    #[test]
    fn group_names_and_shapes_parse() {
        assert_eq!(GpuGroup::parse("gemm"), Some(GpuGroup::Gemm));
        assert_eq!(GpuGroup::parse("nccl.allreduce"), Some(GpuGroup::Nccl));
        assert_eq!(GpuGroup::parse("x"), None);
        assert_eq!(
            LaunchShape::parse_list("4x512, 8X256"),
            Some(vec![
                LaunchShape {
                    blocks_per_sm: 4,
                    threads: 512
                },
                LaunchShape {
                    blocks_per_sm: 8,
                    threads: 256
                }
            ])
        );
        assert_eq!(LaunchShape::parse("4x500"), None);
        assert_eq!(LaunchShape::parse_list(""), None);
    }

    /// n H200s at 0000:00:06.0, 0000:00:07.0, ...
    fn h200s(n: u32) -> Vec<Target> {
        (0..n).map(h200).collect()
    }

    #[test]
    fn quick_plan_on_eight_gpus_fits_fifteen_seconds() {
        let p = plan(&h200s(8), &Options::default(), &LibStatus::all_found());
        assert_eq!(p.gpus.len(), 8);
        assert_eq!(p.gpus[7].pci_bus_id, "0000:00:0d.0");
        for g in [
            GpuGroup::Context,
            GpuGroup::Pcie,
            GpuGroup::Memory,
            GpuGroup::Gemm,
            GpuGroup::P2p,
            GpuGroup::Nccl,
        ] {
            assert!(p.runs(g), "{g:?}");
        }
        assert!(p.burn.skip_reason().is_some());
        // Every probe pays cuInit over 8 GPUs: 3 of them, not 5.
        assert_eq!(p.context.params().unwrap().runs, 3);
        // One size on each GPU in turn, 64 MiB; the all-at-once copies on all 8.
        let pcie = p.pcie.params().unwrap();
        assert_eq!(pcie.sizes, vec![64 * MIB]);
        assert_eq!(pcie.all_at_once_size, Some(64 * MIB));
        // Memory and GEMM on all GPUs at once.
        assert!(p.memory.params().unwrap().gpus_at_once);
        assert_eq!(p.gemm.params().unwrap().order, GpuOrder::AllAtOnce);
        assert_eq!(p.gemm.params().unwrap().dtypes, vec![GemmDtype::Bf16]);
        // The whole matrix (56 pairs one way, 28 both ways) at 64 MiB: 728 copies, ~46 GiB.
        let p2p = p.p2p.params().unwrap();
        assert_eq!((p2p.size, p2p.repeats), (64 * MIB, 5));
        assert_eq!(p2p_copies(8, p2p.repeats) * p2p.size, 728 * 64 * MIB);
        assert!(p2p.budget.estimate_ms < 2_000, "{:?}", p2p.budget);
        // The all-reduce runs over every GPU of the plan.
        assert!(p.nccl.params().is_some());
        assert_eq!(p.jobs().len(), 1);
        // 15 s on 8 GPUs, with the 2-GPU run's slack (7.3 s wall against a 6.6 s estimate).
        assert!(p.estimate_ms() < 14_000, "{}", p.estimate_ms());
    }

    #[test]
    fn full_plan_on_eight_gpus_fits_three_minutes() {
        let opts = Options {
            full: true,
            ..Options::default()
        };
        let p = plan(&h200s(8), &opts, &LibStatus::all_found());
        assert_eq!(p.gpus.len(), 8);
        assert_eq!(p.context.params().unwrap().runs, 5);
        let gemm = p.gemm.params().unwrap();
        assert_eq!(gemm.dtypes.len(), 6);
        assert_eq!(gemm.order, GpuOrder::Interleaved);
        // Interleaved, the 1 s rests happen while the 7 other GPUs run (~350 ms each).
        assert_eq!(gemm.budget.estimate_ms, 8 * (400 + 6 * 350));
        assert!(!p.memory.params().unwrap().gpus_at_once);
        // The complete matrix at 256 MiB: 1288 copies, 322 GiB, ~1 s over NVLink; through
        // host memory at 10 GB/s ~35 s, within the limit.
        let p2p = p.p2p.params().unwrap();
        assert_eq!((p2p.size, p2p.repeats), (256 * MIB, 10));
        let volume = p2p_copies(8, p2p.repeats) * p2p.size;
        assert_eq!(volume, 1288 * 256 * MIB);
        assert!(p2p.budget.estimate_ms < 5_000, "{:?}", p2p.budget);
        assert!(p2p.budget.timeout_s >= volume / 10_000_000_000 + 20);
        assert!(p2p.budget.timeout_s <= 120, "{:?}", p2p.budget);
        let nccl = p.nccl.params().unwrap();
        assert_eq!(nccl.sizes.last(), Some(&GIB));
        assert_eq!(p.burn.params().unwrap().seconds, 60);
        assert_eq!(p.jobs().len(), 6);
        // 3 minutes with the 60 s burn; the 2-GPU full audit ran 93 s against 98 s planned.
        assert!(p.estimate_ms() < 160_000, "{}", p.estimate_ms());
    }

    #[test]
    fn two_gpu_plans_keep_what_the_anchors_were_compared_with() {
        let quick = plan(&h200s(2), &Options::default(), &LibStatus::all_found());
        let full = plan(
            &h200s(2),
            &Options {
                full: true,
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        for p in [&quick, &full] {
            assert_eq!(p.gemm.params().unwrap().order, GpuOrder::OneByOne);
            assert!(!p.memory.params().unwrap().gpus_at_once);
        }
        assert_eq!(quick.p2p.params().unwrap().size, 256 * MIB);
        assert_eq!(quick.pcie.params().unwrap().sizes, vec![256 * MIB]);
        assert_eq!(quick.context.params().unwrap().runs, 5);
        assert_eq!(full.p2p.params().unwrap().size, GIB);
        assert_eq!(full.context.params().unwrap().runs, 10);
        // Four GPUs still go one by one, with 1 GiB P2P copies.
        let four = plan(
            &h200s(4),
            &Options {
                full: true,
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert_eq!(four.gemm.params().unwrap().order, GpuOrder::OneByOne);
        assert_eq!(four.p2p.params().unwrap().size, GIB);
    }

    #[test]
    fn p2p_size_shrinks_with_the_matrix() {
        for full in [false, true] {
            let opts = Options {
                full,
                ..Options::default()
            };
            let mut last = u64::MAX;
            for n in 2..=16 {
                let p = plan(&h200s(n), &opts, &LibStatus::all_found());
                let p2p = p.p2p.params().unwrap().clone();
                assert!(p2p.size.is_power_of_two() && p2p.size >= 64 * MIB);
                assert!(p2p.size <= last, "{n} GPUs: {}", p2p.size);
                last = p2p.size;
                // The limit holds every copy going through host memory at 10 GB/s.
                let volume = p2p_copies(n as usize, p2p.repeats) * p2p.size;
                assert!(p2p.budget.timeout_s >= volume / 10_000_000_000, "{n} GPUs");
            }
        }
    }

    #[test]
    fn gpu_order_can_be_forced() {
        let p = plan(
            &h200s(8),
            &Options {
                gpu_order: Some(GpuOrder::OneByOne),
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert_eq!(p.gemm.params().unwrap().order, GpuOrder::OneByOne);
        assert!(!p.memory.params().unwrap().gpus_at_once);
        // On 2 GPUs, to try the 8-GPU order where it can be compared with the usual one.
        let p = plan(
            &h200s(2),
            &Options {
                gpu_order: Some(GpuOrder::AllAtOnce),
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert!(p.memory.params().unwrap().gpus_at_once);
        assert_eq!(GpuOrder::parse("all-at-once"), Some(GpuOrder::AllAtOnce));
        assert_eq!(GpuOrder::parse(" Interleaved"), Some(GpuOrder::Interleaved));
        assert_eq!(GpuOrder::parse("one_by_one"), Some(GpuOrder::OneByOne));
        assert_eq!(GpuOrder::parse("fast"), None);
    }

    fn rehearse_request(batch: u32) -> RehearseRequest {
        let o = crate::rehearse::Options {
            batch,
            ..crate::rehearse::Options::defaults(16)
        };
        let loader = LoaderConfig {
            sample_bytes: o.sample_bytes,
            tensor_bytes: o.tensor_bytes,
            batch,
            readers: 4,
            workers: 14,
            transform_cost: 4,
            read_throttle_bytes_per_s: None,
            drop_cache: false,
        };
        o.request(loader, vec!["/tmp/d/sample-00000.bin".into()])
    }

    #[test]
    fn an_audit_does_not_rehearse() {
        for full in [false, true] {
            let p = plan(
                &h200s(2),
                &Options {
                    full,
                    ..Options::default()
                },
                &LibStatus::all_found(),
            );
            assert_eq!(p.rehearse.skip_reason(), Some(NOT_REHEARSED));
            assert!(p.jobs().iter().all(|j| !j.contains(&GpuGroup::Rehearse)));
        }
        let p = plan(&h200s(2), &Options::bench(&[]), &LibStatus::all_found());
        assert_eq!(p.rehearse.skip_reason(), Some(NOT_REHEARSED));
        assert_eq!(GpuGroup::parse("rehearse"), None);
        assert_eq!(GpuGroup::parse("workload.pipeline"), None);
    }

    #[test]
    fn a_rehearsal_on_one_gpu_has_no_allreduce_and_a_reference_batch() {
        let p = plan(
            &h200s(1),
            &Options::rehearse(rehearse_request(2)),
            &LibStatus::all_found(),
        );
        assert_eq!(p.jobs(), vec![vec![GpuGroup::Rehearse]]);
        let r = p.rehearse.params().unwrap();
        assert_eq!(
            r.allreduce_skip.as_deref(),
            Some("one GPU rehearsed: no gradients to all-reduce")
        );
        assert_eq!(r.reference_batch, Some(REHEARSE_REFERENCE_BATCH));
        assert!(r.lt && r.blas);
        // Set-up, the copies, the step, the reference step, the pipeline.
        assert_eq!(r.budget.estimate_ms, 1000 + 300 + 3 * 2400 + 14_000);
        assert_eq!(r.budget.timeout_s, 30 + r.budget.estimate_ms * 4 / 1000);
        assert!(p.pcie.skip_reason().is_some() && p.burn.skip_reason().is_some());
        // At the reference batch, no reference run.
        let p = plan(
            &h200s(1),
            &Options::rehearse(rehearse_request(256)),
            &LibStatus::all_found(),
        );
        assert_eq!(p.rehearse.params().unwrap().reference_batch, None);
    }

    #[test]
    fn the_allreduce_stage_is_planned_from_the_gpus_and_nccl() {
        let p = plan(
            &h200s(8),
            &Options::rehearse(rehearse_request(256)),
            &LibStatus::all_found(),
        );
        let r = p.rehearse.params().unwrap();
        assert_eq!(r.allreduce_skip, None);
        assert_eq!(p.gpus.len(), 8);
        assert_eq!(r.budget.estimate_ms, 1000 + 8 * 300 + 3 * 2400 + 14_000);
        let no_nccl = LibStatus {
            nccl: Some("libnccl not found (looked in /usr/lib)".into()),
            ..LibStatus::default()
        };
        let p = plan(
            &h200s(2),
            &Options::rehearse(rehearse_request(256)),
            &no_nccl,
        );
        assert_eq!(
            p.rehearse.params().unwrap().allreduce_skip.as_deref(),
            Some("libnccl not found (looked in /usr/lib)")
        );
        // --gpus 1: one GPU rehearsed.
        let mut o = Options::rehearse(rehearse_request(256));
        o.gpus = Some(vec![1]);
        let p = plan(&h200s(2), &o, &LibStatus::all_found());
        assert!(p.rehearse.params().unwrap().allreduce_skip.is_some());
    }

    #[test]
    fn a_rehearsal_needs_a_gpu_and_a_gemm_library() {
        let p = plan(
            &[],
            &Options::rehearse(rehearse_request(256)),
            &LibStatus::all_found(),
        );
        assert_eq!(p.rehearse.skip_reason(), Some("no NVIDIA GPU found"));
        let none = LibStatus {
            cublas: Some("libcublas not found".into()),
            cublaslt: Some("libcublasLt not found".into()),
            ..LibStatus::default()
        };
        let p = plan(&h200s(1), &Options::rehearse(rehearse_request(256)), &none);
        assert!(p
            .rehearse
            .skip_reason()
            .unwrap()
            .starts_with("no GEMM library"));
        // cuBLAS alone: fp32 in the child.
        let lt_only_missing = LibStatus {
            cublaslt: Some("libcublasLt not found".into()),
            ..LibStatus::default()
        };
        let p = plan(
            &h200s(1),
            &Options::rehearse(rehearse_request(256)),
            &lt_only_missing,
        );
        let r = p.rehearse.params().unwrap();
        assert!(!r.lt && r.blas);
        let mut busy = h200(0);
        busy.busy = Some("2 processes".into());
        let p = plan(
            &[busy],
            &Options::rehearse(rehearse_request(256)),
            &LibStatus::all_found(),
        );
        assert!(p.rehearse.skip_reason().unwrap().contains("busy"));
    }

    #[test]
    fn a_rehearsal_plan_round_trips_as_json() {
        let p = plan(
            &h200s(2),
            &Options::rehearse(rehearse_request(64)),
            &LibStatus::all_found(),
        );
        let back: Plan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn plan_round_trips_as_json() {
        for (n, full) in [(2, false), (8, false), (8, true)] {
            let opts = Options {
                full,
                ..Options::default()
            };
            let p = plan(&h200s(n), &opts, &LibStatus::all_found());
            let j = serde_json::to_string(&p).unwrap();
            let back: Plan = serde_json::from_str(&j).unwrap();
            assert_eq!(back, p);
        }
    }
}
