//! How names are compared: GPU names as NVML reports them, names users type for `--expect`,
//! and the names and families of the database's entries.

use super::GpuSpec;
use std::collections::HashSet;

/// Words that say nothing about the model ("NVIDIA Tesla V100", "NVIDIA GeForce RTX 4090").
const NOISE: [&str; 4] = ["nvidia", "tesla", "geforce", "gpu"];

/// Words that make another product of the same model number: an RTX 3080 Ti is not an RTX
/// 3080, an RTX 4090 D not an RTX 4090, a Max-Q or SFF card not the full-power one.
const VARIANT_WORDS: [&str; 8] = [
    "ti", "super", "d", "max", "sff", "laptop", "mobile", "embedded",
];

/// The variant words among a name's words, also where one is glued to a model number
/// ("2080ti" says "ti").
pub(super) fn variant_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for t in tokens(s) {
        for v in VARIANT_WORDS {
            let glued = t
                .strip_suffix(v)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if (t == v || glued) && !out.iter().any(|o| o == v) {
                out.push(v.to_string());
            }
        }
    }
    out
}

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

/// Whether `name` names a product of `family`: it carries every word of the family
/// ("NVIDIA RTX 6000 Ada Generation" carries "RTX 6000 Ada"; "Quadro RTX 6000" does not), and
/// no variant word the family lacks ("NVIDIA GeForce RTX 3080 Ti" is not an "RTX 3080"). A
/// family with no words fits nothing.
pub(super) fn family_fits(family: &str, name: &str) -> bool {
    let want = tokens(family);
    if want.is_empty() {
        return false;
    }
    let have = words_and_pairs(name);
    let carries = want.iter().all(|w| have.contains(w)) || have.contains(&want.concat());
    let family_variants = variant_words(family);
    carries
        && variant_words(name)
            .iter()
            .all(|v| family_variants.contains(v))
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
