//! Small helpers several checks share.

use crate::facts::{Facts, GpuFacts, Mount};
use crate::finding::Finding;
use crate::parse::host::mounts::{mount_of, FsClass};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::spec::{GpuSpec, SpecDb};

/// Why there is no GPU to look at, short (gpu.present carries the details).
pub fn no_gpu_reason(facts: &Facts) -> String {
    let on_bus = facts.pci_gpus.value().map(|p| p.len());
    match (&facts.gpus, on_bus) {
        (Reading::Unavailable(_), Some(0)) => "no NVIDIA GPU found (see gpu.present)".to_string(),
        (Reading::Unavailable(_), Some(_)) => {
            "the NVIDIA driver does not answer (see gpu.present)".to_string()
        }
        (Reading::Unavailable(r), None) => format!("no GPU to look at: {r}"),
        (Reading::Value(v), _) if v.is_empty() => {
            "no NVIDIA GPU found (see gpu.present)".to_string()
        }
        (Reading::Value(_), _) => "none of the GPUs chosen with --gpus exists".to_string(),
    }
}

/// The GPUs this audit looks at (all, or those chosen with `--gpus`).
pub fn selected<'a>(facts: &'a Facts, policy: &'a Policy) -> impl Iterator<Item = &'a GpuFacts> {
    facts
        .gpu_list()
        .iter()
        .filter(move |g| policy.selects(g.index))
}

/// One finding per selected GPU from `f`, or one `skip` saying why there is none.
pub fn per_gpu(
    check: &str,
    facts: &Facts,
    policy: &Policy,
    f: impl Fn(&GpuFacts) -> Finding,
) -> Vec<Finding> {
    let out: Vec<Finding> = selected(facts, policy).map(|g| f(g).gpu(g.index)).collect();
    if out.is_empty() {
        vec![Finding::skip(check, no_gpu_reason(facts))]
    } else {
        out
    }
}

/// Like [`per_gpu`], for checks that may say several things about one GPU.
pub fn per_gpu_many(
    check: &str,
    facts: &Facts,
    policy: &Policy,
    f: impl Fn(&GpuFacts) -> Vec<Finding>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for g in selected(facts, policy) {
        out.extend(f(g).into_iter().map(|x| x.gpu(g.index)));
    }
    if out.is_empty() {
        vec![Finding::skip(check, no_gpu_reason(facts))]
    } else {
        out
    }
}

/// The datasheet entry for a GPU, where the spec database knows the model.
pub fn spec_of(g: &GpuFacts) -> Option<&'static GpuSpec> {
    SpecDb::embedded().identify_gpu(g)
}

/// "NVIDIA H200" or "unknown model".
pub fn name_of(g: &GpuFacts) -> String {
    g.name
        .value()
        .cloned()
        .unwrap_or_else(|| "unknown model".to_string())
}

/// `a` as a percentage of `b`: "72%" ("n/a" for a zero `b`).
pub fn pct(a: f64, b: f64) -> String {
    if b == 0.0 {
        return "n/a".into();
    }
    format!("{:.0}%", 100.0 * a / b)
}

/// How many GPUs the machine has: the driver's list, else the NVIDIA PCI functions.
pub fn gpu_count(facts: &Facts) -> Option<usize> {
    if let Some(g) = facts.gpus.value() {
        return Some(g.len());
    }
    facts.pci_gpus.value().map(Vec::len)
}

/// The mount a path lives on, and its class.
pub fn storage_of<'a>(facts: &'a Facts, path: &str) -> Option<(&'a Mount, FsClass)> {
    let mounts = facts.host.mounts.value()?;
    let m = mount_of(mounts, path)?;
    Some((m, FsClass::of(&m.fstype)))
}

/// "1 key" / "2 keys".
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A threshold written as a whole percent, as a fraction: `fraction(98)` is 0.98. The checks
/// keep each percent as one literal that both the constant and the explain text are built
/// from.
pub const fn fraction(percent: u32) -> f64 {
    percent as f64 / 100.0
}
