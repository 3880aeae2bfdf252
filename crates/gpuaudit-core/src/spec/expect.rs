//! What was ordered against what the evidence says: `--expect MODEL` judged for one GPU.
//!
//! A GPU contradicts the order when any piece of evidence rules out every model the order
//! names, whether or not the database knows the model that was delivered: a PCI device id
//! that none of the ordered models has, a name no ordered model carries, a memory size or SM
//! count none of them has. It matches when some ordered model fits every piece of evidence
//! and the PCI id or the name positively points at it; with neither readable, it cannot tell.

use super::{names, readable_pci_id, GpuSpec, SpecDb};
use crate::facts::GpuFacts;
use crate::reading::Reading;

/// The facts that tell one GPU model from another, as read (`None`: not read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuEvidence<'a> {
    pub pci_device_id: Option<u16>,
    /// The PCI subsystem device id (the high half of NVML's `pciSubSystemId`).
    pub pci_subsystem_device_id: Option<u16>,
    /// The product name NVML / nvidia-smi reports.
    pub name: Option<&'a str>,
    pub memory_mib: Option<u64>,
    pub sm_count: Option<u32>,
}

impl<'a> GpuEvidence<'a> {
    /// The identifying facts of a GPU. Zeros are not readings (a vGPU guest or a zeroed
    /// register reads 0): a device id of 0x0000 or 0xffff, a memory size or SM count of 0, an
    /// empty name count as not read.
    pub fn of(g: &'a GpuFacts) -> GpuEvidence<'a> {
        GpuEvidence {
            pci_device_id: g.pci_device_id.value().copied().and_then(readable_pci_id),
            pci_subsystem_device_id: g
                .pci_subsystem_id
                .value()
                .map(|s| (s >> 16) as u16)
                .filter(|s| *s != 0 && *s != 0xffff),
            name: g
                .name
                .value()
                .map(String::as_str)
                .filter(|n| !n.trim().is_empty()),
            memory_mib: g.memory.total_mib.value().copied().filter(|m| *m > 0),
            sm_count: g.sm_count.value().copied().filter(|s| *s > 0),
        }
    }
}

/// The verdict of [`SpecDb::judge_expected`].
///
/// For `gpu.identity`: `Contradicts` is a failure whether or not `delivered` is known;
/// `Unknown` cannot confirm the order (a warning); only `Matches` lets a count finding say
/// "as ordered".
#[derive(Clone, Debug, PartialEq)]
pub enum ExpectMatch<'a> {
    /// Some ordered model fits every piece of evidence, and the PCI id or the name points at
    /// it; this is the one.
    Matches(&'a GpuSpec),
    /// The evidence says the GPU is not what was ordered.
    Contradicts {
        /// One sentence fragment per piece of evidence that rules the order out, strongest
        /// first ("PCI device id 0x1df6 is that of the NVIDIA Tesla V100S PCIe 32GB, ...").
        why: Vec<String>,
        /// The model the evidence identifies, where the database knows it.
        delivered: Option<&'a GpuSpec>,
    },
    /// Nothing read says either way: no PCI id and no name, and what was read fits.
    Unknown {
        /// Why it cannot tell.
        why: String,
    },
}

impl ExpectMatch<'_> {
    /// The reasons of a contradiction as one sentence fragment ("; " between them).
    pub fn why_text(&self) -> String {
        match self {
            ExpectMatch::Matches(_) => String::new(),
            ExpectMatch::Contradicts { why, .. } => why.join("; "),
            ExpectMatch::Unknown { why } => why.clone(),
        }
    }
}

/// An `--expect` model no entry answers to.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown GPU model '{model}'; known: {}; `gpuaudit models` lists every name --expect accepts",
    known.join(", ")
)]
pub struct UnknownModel {
    pub model: String,
    /// The family short names of the database.
    pub known: Vec<String>,
}

impl SpecDb {
    /// The models an `--expect` model name stands for (see [`SpecDb::matching`]); an error
    /// that lists the names it knows where it stands for none.
    pub fn resolve_expected(&self, model: &str) -> Result<Vec<&GpuSpec>, UnknownModel> {
        let found = self.matching(model);
        if found.is_empty() {
            return Err(UnknownModel {
                model: model.trim().to_string(),
                known: self.family_short_names(),
            });
        }
        Ok(found)
    }

    /// Whether a GPU is the model ordered with `--expect` (the model name alone, without
    /// `:COUNT`), from its facts. See [`SpecDb::judge_evidence`].
    ///
    /// Where neither the PCI device id nor the name was read, `Unknown` says why each was not
    /// (the reason of the reading, or the zero it held).
    pub fn judge_expected<'a>(&'a self, expect: &str, gpu: &GpuFacts) -> ExpectMatch<'a> {
        let e = GpuEvidence::of(gpu);
        let verdict = self.judge_evidence(expect, &e);
        // An `Unknown` without a readable name is the kind where nothing points at a model
        // (the other kind, an id the database lacks, needs the name to vouch for the family);
        // an order the database does not know keeps its own reason.
        let nothing_points = matches!(verdict, ExpectMatch::Unknown { .. })
            && e.name.is_none()
            && !self.matching(expect).is_empty();
        if !nothing_points {
            return verdict;
        }
        let id_why = match (&gpu.pci_device_id, gpu.pci_device_id.reason()) {
            (_, Some(r)) => r.to_string(),
            (Reading::Value(id), None) => format!("{id:#06x} names no device"),
            (_, None) => "not read".to_string(),
        };
        let name_why = gpu.name.reason().unwrap_or("empty");
        ExpectMatch::Unknown {
            why: format!(
                "neither the PCI device id ({id_why}) nor the name ({name_why}) could be read; \
                 what was read fits"
            ),
        }
    }

    /// Whether the evidence says a GPU is the model ordered.
    ///
    /// The ordered models (what [`SpecDb::matching`] gives for `expect`) are narrowed by each
    /// piece of evidence in turn, strongest first:
    /// 1. the PCI device id: the models that list it (an id another entry lists rules the
    ///    order out; an id no entry lists rules it out too, unless the name carries the
    ///    ordered family, which makes it a variant the database lacks: `Unknown`);
    /// 2. the name: the models it is exactly the name of, where it is one of the database's
    ///    names; otherwise the models whose family it carries;
    /// 3. the memory size: the models whose label it fits ([`GpuSpec::memory_matches`]);
    /// 4. the SM count: the models with that count.
    ///
    /// A model whose figure is unknown is not ruled out by it. A piece of evidence that would
    /// rule out every remaining model is a reason for [`ExpectMatch::Contradicts`] and does
    /// not narrow the set, so each reason is judged against the same models.
    pub fn judge_evidence<'a>(&'a self, expect: &str, e: &GpuEvidence) -> ExpectMatch<'a> {
        let ordered = self.matching(expect);
        let Some(&first_ordered) = ordered.first() else {
            return ExpectMatch::Unknown {
                why: format!("no model in the spec database is named '{}'", expect.trim()),
            };
        };
        let label = expect.trim();
        let mut remaining = ordered;
        let mut why: Vec<String> = Vec::new();
        let mut pointed = false;
        // A device id no entry lists, judged once the name has been heard.
        let mut unlisted_id: Option<(u16, String)> = None;

        if let Some(id) = e.pci_device_id.and_then(readable_pci_id) {
            let named = self.by_pci_id(id, e.pci_subsystem_device_id);
            let kept = keep(&remaining, |g| named.iter().any(|n| n.key == g.key));
            if kept.is_empty() {
                match named.first() {
                    Some(other) => why.push(format!(
                        "PCI device id {id:#06x} is that of the {}, not of any model '{label}' names",
                        other.name
                    )),
                    None => {
                        unlisted_id = Some((id, id_list(&remaining)));
                    }
                }
            } else {
                remaining = kept;
                pointed = true;
            }
        }

        let mut name_fits = false;
        if let Some(name) = e.name.filter(|n| !names::normalize(n).is_empty()) {
            let exact = self.by_exact_name(name);
            let kept = if exact.is_empty() {
                keep(&remaining, |g| g.family_fits(name))
            } else {
                keep(&remaining, |g| exact.iter().any(|x| x.key == g.key))
            };
            if kept.is_empty() {
                why.push(match exact.first() {
                    Some(other) => format!(
                        "the driver names it '{name}', the name of the {}, not of any model '{label}' names",
                        other.name
                    ),
                    None => format!(
                        "the driver names it '{name}', a name no {} has",
                        families(&remaining)
                    ),
                });
            } else {
                remaining = kept;
                pointed = true;
                name_fits = true;
            }
        }

        // An id the database lists for no model: the ordered models' ids are NVIDIA's full
        // list for them, so it is another product, unless the driver's name for it carries
        // the ordered family (an H100 variant the list lacks): then it cannot tell which.
        let mut unlisted_but_named = None;
        if let Some((id, ids)) = unlisted_id {
            let text = format!(
                "PCI device id {id:#06x} is not among the ids of the models '{label}' names ({ids})"
            );
            if name_fits {
                unlisted_but_named = Some(text);
            } else {
                why.insert(0, text);
            }
        }

        if let Some(mib) = e.memory_mib {
            let kept = keep(&remaining, |g| g.memory_matches(mib) != Some(false));
            if kept.is_empty() {
                why.push(format!(
                    "it shows {:.1} GiB of memory; the datasheet label of '{label}' is {} GB",
                    mib as f64 / 1024.0,
                    alternatives(remaining.iter().filter_map(|g| g.memory_gb))
                ));
            } else {
                remaining = kept;
            }
        }

        if let Some(sms) = e.sm_count {
            let kept = keep(&remaining, |g| g.sm_count.is_none_or(|s| s == sms));
            if kept.is_empty() {
                why.push(format!(
                    "it has {sms} SMs; '{label}' has {}",
                    alternatives(remaining.iter().filter_map(|g| g.sm_count.map(f64::from)))
                ));
            } else {
                remaining = kept;
            }
        }

        if !why.is_empty() {
            return ExpectMatch::Contradicts {
                why,
                delivered: self.identify_evidence(e),
            };
        }
        if let Some(text) = unlisted_but_named {
            return ExpectMatch::Unknown {
                why: format!(
                    "{text}, though the driver names it as one: a variant the spec database does not list"
                ),
            };
        }
        if !pointed {
            return ExpectMatch::Unknown {
                why: "neither the PCI device id nor the name could be read; what was read fits"
                    .to_string(),
            };
        }
        // Several ordered models fit ("a100" and a name only): the one identification
        // prefers, where it is among them. Narrowing never empties `remaining`.
        let best = self
            .identify_evidence(e)
            .filter(|g| remaining.iter().any(|r| r.key == g.key))
            .unwrap_or_else(|| remaining.first().copied().unwrap_or(first_ordered));
        ExpectMatch::Matches(best)
    }
}

fn keep<'a>(set: &[&'a GpuSpec], pred: impl Fn(&GpuSpec) -> bool) -> Vec<&'a GpuSpec> {
    set.iter().copied().filter(|g| pred(g)).collect()
}

fn id_list(set: &[&GpuSpec]) -> String {
    let mut ids: Vec<u16> = set
        .iter()
        .flat_map(|g| g.pci_device_ids.iter().copied())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.iter()
        .map(|i| format!("{i:#06x}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "A100" or "RTX PRO 6000 or RTX 6000 Ada".
fn families(set: &[&GpuSpec]) -> String {
    let mut f: Vec<&str> = set.iter().map(|g| g.family.as_str()).collect();
    f.sort_unstable();
    f.dedup();
    f.join(" or ")
}

/// "40 or 80", "108".
fn alternatives(values: impl Iterator<Item = f64>) -> String {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    let v: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
    match v.split_last() {
        None => "?".to_string(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}
