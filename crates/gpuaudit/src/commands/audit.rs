//! `gpuaudit [audit]`: gather facts (live or from a snapshot), judge, report.

use crate::cli::{parse_gpu_list, AuditArgs, JudgeArgs};
use crate::output;
use crate::progress::Bar;
use anyhow::{bail, Result};
use gpuaudit_core::facts::{Facts, MeasuredFacts, ValueSource};
use gpuaudit_core::render::TableOptions;
use gpuaudit_core::report::Redactor;
use gpuaudit_core::spec::SpecDb;
use gpuaudit_core::Reading;
use gpuaudit_core::{Expectation, Policy, Report};
use gpuaudit_probe::gather::{self, GatherOptions};
use gpuaudit_probe::host::HostOptions;
use gpuaudit_probe::measure;

pub fn policy_from(args: &AuditArgs) -> Result<Policy> {
    policy_of(&args.judge, args.full)
}

/// The policy of `--expect`, `--profile`, `--concurrency` and `--gpus`: the audit's, and
/// `gpuaudit serve`'s (which never runs the full measurements).
pub fn policy_of(judge: &JudgeArgs, full: bool) -> Result<Policy> {
    let (expect, gpus) = expect_and_gpus(judge.expect.as_deref(), judge.gpus.as_deref())?;
    Ok(Policy {
        profile: judge.profile,
        expect,
        gpus,
        full,
        expected_concurrency: judge.concurrency,
    })
}

/// `--expect` (a model the spec database knows) and `--gpus` (a list of indices), as the audit
/// and `gpuaudit serve` take them.
pub fn expect_and_gpus(
    expect: Option<&str>,
    gpus: Option<&str>,
) -> Result<(Option<Expectation>, Option<Vec<u32>>)> {
    let expect = match expect {
        Some(s) => {
            let e: Expectation = s.parse().map_err(anyhow::Error::msg)?;
            if let Err(unknown) = SpecDb::embedded().resolve_expected(&e.model) {
                bail!("--expect '{s}': {unknown}");
            }
            Some(e)
        }
        None => None,
    };
    let gpus = gpus
        .map(parse_gpu_list)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    Ok((expect, gpus))
}

pub fn run(args: &AuditArgs) -> Result<u8> {
    let audited_at = gpuaudit_probe::time::now().map_err(anyhow::Error::msg)?;
    let policy = policy_from(args)?;
    let format = output::choose_format(args.format.map(Into::into), args.output.as_deref())?;
    let color = output::use_color(args.color, args.output.as_deref());
    let live = args.root.is_none();
    let opts = GatherOptions {
        host: HostOptions {
            data_dirs: args.judge.data_dirs.clone(),
            measure_storage: live && args.full,
            measure_loopback: live && !args.facts_only,
            // Importing torch takes seconds: a facts-only audit reads the installed files.
            ask_interpreter: !args.facts_only,
            ..HostOptions::default()
        },
        ..GatherOptions::default()
    };

    let mut bar = Bar::spinner("reading the machine");
    let (mut facts, pending_host) = match &args.root {
        Some(dir) => (gather::snapshot(dir, &opts)?, None),
        None => {
            let (f, h) = gather::live_deferred(&opts);
            (f, Some(h))
        }
    };
    if let Some(sel) = &policy.gpus {
        check_selection(&facts, sel)?;
    }
    if live && !args.facts_only {
        let mopts = measure::Options {
            full: args.full,
            force: args.force,
            gpus: policy.gpus.clone(),
            ..measure::Options::default()
        };
        let measured = measure::run(&facts, &mopts, &mut |p| {
            bar.update(&p.message, p.done_ms, p.total_ms)
        });
        apply_measured(&mut facts, measured);
    }
    if let Some(h) = pending_host {
        facts.host = h.join();
    }
    bar.finish();
    let mut report = Report::build(&facts, &policy);
    report.audit.audited_at = Some(audited_at);
    if args.redact {
        report = Redactor::new().redact(&report)?;
    }
    let table = TableOptions {
        color,
        verbose: args.verbose,
        quiet: args.quiet,
        width: output::table_width(args.output.as_deref()),
    };
    output::emit(&report, format, &table, args.output.as_deref())?;
    Ok(report.exit_code() as u8)
}

/// `--gpus` names only GPUs the machine has.
pub fn check_selection(facts: &Facts, selected: &[u32]) -> Result<()> {
    let have: Vec<u32> = facts.gpu_list().iter().map(|g| g.index).collect();
    if let Some(bad) = selected.iter().find(|i| !have.contains(i)) {
        bail!(
            "--gpus: there is no GPU {bad} (this machine has {})",
            if have.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "GPUs {}",
                    have.iter()
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
    Ok(())
}

/// Keep what was measured, and fill what the management library could not say (NVML has no
/// SM count for a whole GPU; CUDA has).
pub fn apply_measured(facts: &mut Facts, measured: MeasuredFacts) {
    if let Reading::Value(gpus) = &mut facts.gpus {
        for g in gpus.iter_mut() {
            let Some(d) = measured.device(g.index) else {
                continue;
            };
            if g.sm_count.value().is_none() {
                g.sm_count = Reading::Value(d.sm_count);
            }
            // The device's own answer replaces a datasheet value (a GPU identified as the
            // wrong model has the wrong one).
            let from_datasheet = g
                .compute_capability_source
                .is_some_and(ValueSource::is_datasheet);
            if g.compute_capability.value().is_none() || from_datasheet {
                g.compute_capability = Reading::Value(d.compute_capability);
                g.compute_capability_source = Some(ValueSource::Cuda);
            }
        }
    }
    facts.measured = measured;
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuaudit_core::facts::{ComputeCapability, CudaDevice, GpuFacts, Origin};

    fn machine(cc: ComputeCapability, source: ValueSource) -> Facts {
        let mut f = Facts::empty(Origin::Live, "not read in this test");
        let mut g = GpuFacts::unread(0, "0000:00:06.0", "nvml", "not read in this test");
        g.compute_capability = Reading::Value(cc);
        g.compute_capability_source = Some(source);
        f.gpus = Reading::Value(vec![g]);
        f
    }

    #[test]
    fn the_devices_compute_capability_replaces_a_datasheet_one() {
        let measured = |cc| {
            let mut m = MeasuredFacts::not_run("test");
            m.devices = Reading::Value(vec![CudaDevice {
                gpu: 0,
                ordinal: 0,
                name: "NVIDIA H200".into(),
                pci_bus_id: "0000:00:06.0".into(),
                compute_capability: cc,
                sm_count: 132,
                l2_bytes: 50 << 20,
                total_memory_bytes: 140 << 30,
                free_memory_bytes: 139 << 30,
                memory_clock_khz: None,
                memory_bus_width_bits: None,
                clock_khz: None,
                unified_addressing: true,
            }]);
            m
        };
        let ampere = ComputeCapability { major: 8, minor: 0 };
        let hopper = ComputeCapability { major: 9, minor: 0 };
        let mut f = machine(hopper, ValueSource::Datasheet);
        apply_measured(&mut f, measured(ampere));
        let g = &f.gpu_list()[0];
        assert_eq!(g.compute_capability, Reading::Value(ampere));
        assert_eq!(g.compute_capability_source, Some(ValueSource::Cuda));
        // One read through NVML stays.
        let mut f = machine(hopper, ValueSource::Nvml);
        apply_measured(&mut f, measured(ampere));
        let g = &f.gpu_list()[0];
        assert_eq!(g.compute_capability.value().map(|c| c.major), Some(9));
        assert_eq!(g.compute_capability_source, Some(ValueSource::Nvml));
    }
}
