//! Small helpers several checks share.

use crate::facts::{ComputeCapability, Facts, GpuFacts, Mount, ValueSource};
use crate::finding::Finding;
use crate::parse::host::mounts::{mount_of, FsClass};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::spec::{GpuSpec, SpecDb};

/// Why there is no GPU to look at, short (gpu.present carries the details).
pub fn no_gpu_reason(facts: &Facts) -> String {
    let on_bus = facts.pci_gpus.value().map(|p| p.len());
    if facts.gpus.value().is_none() && facts.driver.report_unreadable.is_some() {
        return "the GPUs are not known: the driver's report could not be read (see gpu.present)"
            .to_string();
    }
    match (&facts.gpus, on_bus) {
        (Reading::Unavailable(_), Some(0)) => "no NVIDIA GPU found (see gpu.present)".to_string(),
        (Reading::Unavailable(_), Some(_)) => {
            "the NVIDIA driver does not answer (see gpu.present)".to_string()
        }
        (Reading::Unavailable(r), None) => format!("no GPU to look at: {r}"),
        (Reading::Value(v), Some(n)) if v.is_empty() && n > 0 => {
            "the driver lists none of the GPUs on the PCI bus (see gpu.present)".to_string()
        }
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

/// "1 key" / "2 keys"; for irregular plurals ("1 GPU is" / "2 GPUs are").
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A threshold written as a whole percent, as a fraction: `fraction(98)` is 0.98. The checks
/// keep each percent as one literal that both the constant and the explain text are built
/// from.
pub const fn fraction(percent: u32) -> f64 {
    percent as f64 / 100.0
}

/// "1 GPU" / "2 GPUs" / "0 GPUs", "1 PCIe replay" / "3 PCIe replays": the noun with an `s`
/// for every count but one. Use [`plural`] where the plural is not the noun plus `s`.
pub fn count_of(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Capitals words that are said as words, not letter by letter, although written in capitals.
const CAPITALS_SAID_AS_WORDS: [&str; 4] = ["SUPER", "MIG", "GRID", "TITAN"];

/// Letters whose names begin with a vowel sound ("an H100", "an RTX 4090", "an NVIDIA L4",
/// "an SXM board"): A E F H I L M N O R S X.
const VOWEL_SOUNDING_LETTERS: &str = "AEFHILMNORSX";

/// The indefinite article for a name or phrase, by how its first word is said: a word in
/// capitals or a model number is said letter by letter ("an NVIDIA H200", "an A100", "an RTX
/// 3090", "an L4", "a T4", "a V100S"), another word as written ("a Tesla", "a Quadro", "an
/// unknown model"). "GRID", "TITAN", "SUPER" and "MIG" are said as words ("a GRID P4-1Q").
pub fn article(phrase: &str) -> &'static str {
    let first = phrase.split_whitespace().next().unwrap_or("");
    let Some(c) = first.chars().next() else {
        return "a";
    };
    let spelled = c.is_ascii_uppercase()
        && first
            .chars()
            .filter(char::is_ascii_alphabetic)
            .all(|ch| ch.is_ascii_uppercase())
        && !CAPITALS_SAID_AS_WORDS
            .contains(&first.trim_end_matches(|ch: char| !ch.is_ascii_alphanumeric()));
    let vowel_sound = if spelled {
        VOWEL_SOUNDING_LETTERS.contains(c)
    } else {
        matches!(c.to_ascii_lowercase(), 'a' | 'e' | 'i' | 'o' | 'u')
    };
    if vowel_sound {
        "an"
    } else {
        "a"
    }
}

/// The phrase with its indefinite article: "an NVIDIA H200", "a Tesla V100S-PCIE-32GB".
pub fn with_article(phrase: &str) -> String {
    format!("{} {phrase}", article(phrase))
}

/// A GPU's compute capability with where it came from: "compute capability 9.0", or
/// "compute capability 9.0 (from the datasheet)" where it was not read from the GPU but
/// filled from its model's spec entry. `None` where it is not known.
pub fn compute_capability_of(g: &GpuFacts) -> Option<(ComputeCapability, String)> {
    let cc = *g.compute_capability.value()?;
    let text = if g
        .compute_capability_source
        .is_some_and(ValueSource::is_datasheet)
    {
        format!("compute capability {cc} (from the datasheet)")
    } else {
        format!("compute capability {cc}")
    };
    Some((cc, text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Machine;

    #[test]
    fn why_there_is_no_gpu() {
        let no_driver = |pci: Reading<Vec<crate::facts::PciFunction>>| {
            Machine::healthy("h200-sxm-141gb", 2)
                .with(|f| {
                    f.gpus = Reading::unavailable("NVML: driver not loaded");
                    f.pci_gpus = pci;
                })
                .build()
        };
        assert_eq!(
            no_gpu_reason(&no_driver(Reading::Value(vec![]))),
            "no NVIDIA GPU found (see gpu.present)"
        );
        let on_bus = Machine::healthy("h200-sxm-141gb", 1).build().pci_gpus;
        assert_eq!(
            no_gpu_reason(&no_driver(on_bus)),
            "the NVIDIA driver does not answer (see gpu.present)"
        );
        assert_eq!(
            no_gpu_reason(&no_driver(Reading::unavailable("no sysfs"))),
            "no GPU to look at: NVML: driver not loaded"
        );
        let none = Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| {
                f.gpus = Reading::Value(vec![]);
                f.pci_gpus = Reading::Value(vec![]);
            })
            .build();
        assert_eq!(
            no_gpu_reason(&none),
            "no NVIDIA GPU found (see gpu.present)"
        );
        // The PCI bus has GPUs that the driver does not list: not "none found".
        let unlisted = Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| f.gpus = Reading::Value(vec![]))
            .build();
        assert_eq!(
            no_gpu_reason(&unlisted),
            "the driver lists none of the GPUs on the PCI bus (see gpu.present)"
        );
        // The driver's report was there but could not be read: whatever the PCI bus says.
        for pci in [
            Reading::Value(vec![]),
            Machine::healthy("h200-sxm-141gb", 1).build().pci_gpus,
            Reading::unavailable("no sysfs"),
        ] {
            let mut f = no_driver(pci);
            f.driver.report_unreadable = Some("nvidia-smi -q -x: malformed".into());
            assert_eq!(
                no_gpu_reason(&f),
                "the GPUs are not known: the driver's report could not be read (see gpu.present)"
            );
        }
        let two = Machine::healthy("h200-sxm-141gb", 2).build();
        assert_eq!(
            no_gpu_reason(&two),
            "none of the GPUs chosen with --gpus exists"
        );
    }

    #[test]
    fn per_gpu_findings_follow_the_selection() {
        let f = Machine::healthy("h200-sxm-141gb", 3).build();
        let all = Policy::default();
        let some = Policy {
            gpus: Some(vec![0, 2]),
            ..Policy::default()
        };
        let none = Policy {
            gpus: Some(vec![7]),
            ..Policy::default()
        };
        let one = |g: &GpuFacts| Finding::pass("t", g.label());
        let two = |g: &GpuFacts| vec![Finding::pass("t", g.label()), Finding::info("t", "x")];
        let gpus = |v: Vec<Finding>| v.iter().map(|f| f.gpu).collect::<Vec<_>>();
        assert_eq!(
            gpus(per_gpu("t", &f, &all, one)),
            [Some(0), Some(1), Some(2)]
        );
        assert_eq!(gpus(per_gpu("t", &f, &some, one)), [Some(0), Some(2)]);
        let skipped = per_gpu("t", &f, &none, one);
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].status, crate::finding::Status::Skip);
        assert_eq!(
            skipped[0].message,
            "none of the GPUs chosen with --gpus exists"
        );
        assert_eq!(
            gpus(per_gpu_many("t", &f, &some, two)),
            [Some(0), Some(0), Some(2), Some(2)]
        );
        let skipped = per_gpu_many("t", &f, &none, two);
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].status, crate::finding::Status::Skip);
        assert_eq!(gpu_count(&f), Some(3));
        let no_driver = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| f.gpus = Reading::unavailable("x"))
            .build();
        assert_eq!(gpu_count(&no_driver), Some(2));
        let nothing = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                f.gpus = Reading::unavailable("x");
                f.pci_gpus = Reading::unavailable("y");
            })
            .build();
        assert_eq!(gpu_count(&nothing), None);
    }

    #[test]
    fn names_percentages_and_mounts() {
        let f = Machine::healthy("h200-sxm-141gb", 1).build();
        let g = &f.gpu_list()[0];
        assert_eq!(name_of(g), "NVIDIA H200");
        assert_eq!(spec_of(g).map(|s| s.key.as_str()), Some("h200-sxm-141gb"));
        let mut unnamed = g.clone();
        unnamed.name = Reading::unavailable("N/A");
        assert_eq!(name_of(&unnamed), "unknown model");
        assert_eq!(pct(72.0, 100.0), "72%");
        assert_eq!(pct(1.0, 3.0), "33%");
        assert_eq!(pct(1.0, 0.0), "n/a");
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .mounts("/dev/sda1 / ext4 rw 0 0\nserver:/d /data nfs4 rw,rsize=1048576 0 0\n")
            .build();
        let (m, class) = storage_of(&f, "/data/x").unwrap();
        assert_eq!(m.target, "/data");
        assert_eq!(class, FsClass::of("nfs4"));
        assert_eq!(storage_of(&f, "/home").unwrap().0.target, "/");
        let unread = Machine::healthy("h200-sxm-141gb", 1).build();
        assert!(storage_of(&unread, "/data").is_none());
    }

    #[test]
    fn counts_are_singular_for_one_only() {
        assert_eq!(count_of(0u32, "GPU"), "0 GPUs");
        assert_eq!(count_of(1u32, "GPU"), "1 GPU");
        assert_eq!(count_of(2u64, "GPU"), "2 GPUs");
        assert_eq!(count_of(1u32, "PCIe replay"), "1 PCIe replay");
        assert_eq!(count_of(3u32, "PCIe replay"), "3 PCIe replays");
        assert_eq!(plural(1, "GPU is", "GPUs are"), "1 GPU is");
        assert_eq!(plural(2, "GPU is", "GPUs are"), "2 GPUs are");
    }

    #[test]
    fn the_article_follows_how_the_first_word_is_said() {
        for (phrase, a) in [
            ("NVIDIA H200", "an"),
            ("H100", "an"),
            ("A100-SXM4-80GB", "an"),
            ("RTX 3090", "an"),
            ("L4", "an"),
            ("SXM board", "an"),
            ("T4", "a"),
            ("V100S", "a"),
            ("P100", "a"),
            ("Tesla V100S-PCIE-32GB", "a"),
            ("Quadro P400", "a"),
            ("GRID P4-1Q", "a"),
            ("TITAN RTX", "a"),
            ("MIG slice", "a"),
            ("SUPER card", "a"),
            ("GeForce RTX 2080", "a"),
            ("unknown model", "an"),
            ("vGPU", "a"),
            ("", "a"),
        ] {
            assert_eq!(article(phrase), a, "{phrase}");
        }
        assert_eq!(with_article("NVIDIA A10G"), "an NVIDIA A10G");
        assert_eq!(with_article("Quadro P400"), "a Quadro P400");
    }

    #[test]
    fn a_datasheet_compute_capability_says_so() {
        let f = Machine::healthy("h200-sxm-141gb", 1).build();
        let g = &f.gpu_list()[0];
        assert_eq!(
            compute_capability_of(g).map(|c| c.1),
            Some("compute capability 9.0".to_string())
        );
        let mut g = g.clone();
        g.compute_capability_source = Some(ValueSource::Datasheet);
        assert_eq!(
            compute_capability_of(&g).map(|c| c.1),
            Some("compute capability 9.0 (from the datasheet)".to_string())
        );
        g.compute_capability = Reading::unavailable("nvidia-smi -q does not report it");
        assert!(compute_capability_of(&g).is_none());
    }
}
