//! How names are compared: GPU names as NVML reports them, names users type for `--expect`,
//! and the names and families of the database's entries.

use super::GpuSpec;
use std::collections::HashSet;

/// Words that say nothing about the model ("NVIDIA Tesla V100", "NVIDIA GeForce RTX 4090").
const NOISE: [&str; 4] = ["nvidia", "tesla", "geforce", "gpu"];

/// Lower case, noise words dropped, separators collapsed:
/// "NVIDIA H100 80GB HBM3" -> "h100 80gb hbm3".
pub(super) fn normalize(s: &str) -> String {
    tokens(s).join(" ")
}

/// Lower-case words, split at every character that is not a letter or digit, noise words
/// dropped, "40g" read as "40gb".
pub(super) fn tokens(s: &str) -> Vec<String> {
    s.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty() && !NOISE.contains(t))
        .map(canonical_word)
        .collect()
}

/// "40g" -> "40gb": users write both.
fn canonical_word(t: &str) -> String {
    match t.strip_suffix('g') {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => format!("{n}gb"),
        _ => t.to_string(),
    }
}

/// The words of a name, plus every two adjacent words joined ("rtx" "4090" gives "rtx4090").
fn words_and_pairs(s: &str) -> HashSet<String> {
    let words = tokens(s);
    let mut out: HashSet<String> = words
        .windows(2)
        .map(|p| format!("{}{}", p[0], p[1]))
        .collect();
    out.extend(words);
    out
}

/// Every word an entry answers to: from its key, name, family, aliases and NVML names.
pub(super) fn vocabulary(g: &GpuSpec) -> HashSet<String> {
    let mut vocab = HashSet::new();
    let names = [&g.key, &g.name, &g.family]
        .into_iter()
        .chain(g.aliases.iter())
        .chain(g.nvml_names.iter());
    for n in names {
        vocab.extend(words_and_pairs(n));
    }
    vocab
}

/// Whether `name` carries every word of `family` ("NVIDIA RTX 6000 Ada Generation" carries
/// "RTX 6000 Ada"; "Quadro RTX 6000" does not). A family with no words fits nothing.
pub(super) fn family_fits(family: &str, name: &str) -> bool {
    let want = tokens(family);
    if want.is_empty() {
        return false;
    }
    let have = words_and_pairs(name);
    want.iter().all(|w| have.contains(w)) || have.contains(&want.concat())
}

/// A query word against an entry's word: equal, or "sxm" for "sxm2" / "sxm4" / "sxm5".
pub(super) fn word_matches(query: &str, word: &str) -> bool {
    if query == word {
        return true;
    }
    query == "sxm"
        && word
            .strip_prefix("sxm")
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}
