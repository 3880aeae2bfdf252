//! `nvidia-smi topo -m`: the connection matrix between GPUs (and NICs).
//!
//! The matrix is read by whitespace-separated tokens, not by tab positions: drivers pad with
//! tabs or spaces, and R580 writes an empty cell between "NUMA Affinity" and "GPU NUMA ID".
//! Colours and underlines (ANSI escapes, present when nvidia-smi wrote to a terminal) are
//! removed first.

use super::text::{first_line, strip_ansi};
use super::ParseError;
use crate::facts::{TopoLink, Topology};

/// The columns after the matrix, as the header names them.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Extra {
    CpuAffinity,
    NumaAffinity,
    GpuNumaId,
    /// A word of a header this parser does not know; it still takes one cell.
    Unknown,
}

pub fn parse(text: &str) -> Result<Topology, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let clean = strip_ansi(text);
    let lines: Vec<&str> = clean.lines().collect();
    let header_at = lines
        .iter()
        .position(|l| l.split_whitespace().next().is_some_and(is_gpu_label))
        .ok_or_else(|| {
            ParseError::Malformed(format!(
                "nvidia-smi topo -m: no matrix header (a line starting with GPU0); it printed: {}",
                first_line(&clean)
            ))
        })?;
    let header: Vec<&str> = lines[header_at].split_whitespace().collect();
    let n_labels = header
        .iter()
        .position(|t| matches!(*t, "CPU" | "NUMA" | "GPU"))
        .unwrap_or(header.len());
    let labels = &header[..n_labels];
    let extras = extra_columns(&header[n_labels..]);

    let gpus: Vec<String> = labels
        .iter()
        .filter(|l| is_gpu_label(l))
        .map(|l| l.to_string())
        .collect();
    let nics: Vec<String> = labels
        .iter()
        .filter(|l| !is_gpu_label(l))
        .map(|l| l.to_string())
        .collect();
    if let Some(dup) = labels
        .iter()
        .enumerate()
        .find(|(i, l)| labels[..*i].contains(l))
    {
        return Err(ParseError::Malformed(format!(
            "nvidia-smi topo -m: column {} appears twice in the header",
            dup.1
        )));
    }

    // One parsed row per GPU, in header order.
    let mut rows: Vec<Option<GpuRow>> = vec![None; gpus.len()];
    let mut nic_names = Vec::new();
    let mut in_nic_legend = false;
    for line in &lines[header_at + 1..] {
        let trimmed = line.trim();
        if trimmed.starts_with("NIC Legend") {
            in_nic_legend = true;
            continue;
        }
        if in_nic_legend {
            // "  NIC0: mlx5_0"
            if let Some((label, name)) = trimmed.split_once(':') {
                let (label, name) = (label.trim(), name.trim());
                if !label.is_empty() && !name.is_empty() && !label.contains(char::is_whitespace) {
                    nic_names.push((label.to_string(), name.to_string()));
                }
            }
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Some((&label, cells)) = tokens.split_first() else {
            continue;
        };
        let Some(row_index) = gpus.iter().position(|g| g == label) else {
            // NIC rows repeat what the GPU rows say; the legend and blank lines say nothing.
            continue;
        };
        if rows[row_index].is_some() {
            continue;
        }
        if cells.len() < labels.len() {
            return Err(ParseError::Malformed(format!(
                "nvidia-smi topo -m: row {label} has {} cells, the header has {} columns",
                cells.len(),
                labels.len()
            )));
        }
        let (matrix, rest) = cells.split_at(labels.len());
        let mut row = GpuRow::default();
        for (col, cell) in labels.iter().zip(matrix) {
            if is_gpu_label(col) {
                row.links.push(link(cell));
            } else {
                row.nic_links.push(link(cell));
            }
        }
        for (kind, value) in extras.iter().zip(rest) {
            let value = (*value != "N/A").then(|| value.to_string());
            match kind {
                Extra::CpuAffinity => row.cpu_affinity = value,
                Extra::NumaAffinity => row.numa_affinity = value,
                Extra::GpuNumaId | Extra::Unknown => {}
            }
        }
        rows[row_index] = Some(row);
    }

    let mut topo = Topology {
        gpus,
        links: Vec::new(),
        nics,
        gpu_nic: Vec::new(),
        nic_names,
        cpu_affinity: Vec::new(),
        numa_affinity: Vec::new(),
    };
    for (label, row) in topo.gpus.iter().zip(rows) {
        let row = row.ok_or_else(|| {
            ParseError::Malformed(format!(
                "nvidia-smi topo -m: the header names {label} but there is no row for it"
            ))
        })?;
        topo.links.push(row.links);
        topo.gpu_nic.push(row.nic_links);
        topo.cpu_affinity.push(row.cpu_affinity);
        topo.numa_affinity.push(row.numa_affinity);
    }
    Ok(topo)
}

#[derive(Clone, Default)]
struct GpuRow {
    links: Vec<TopoLink>,
    nic_links: Vec<TopoLink>,
    cpu_affinity: Option<String>,
    numa_affinity: Option<String>,
}

fn is_gpu_label(token: &str) -> bool {
    token
        .strip_prefix("GPU")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn extra_columns(words: &[&str]) -> Vec<Extra> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let rest = &words[i..];
        let (kind, len) = if rest.starts_with(&["CPU", "Affinity"]) {
            (Extra::CpuAffinity, 2)
        } else if rest.starts_with(&["NUMA", "Affinity"]) {
            (Extra::NumaAffinity, 2)
        } else if rest.starts_with(&["GPU", "NUMA", "ID"]) {
            (Extra::GpuNumaId, 3)
        } else {
            (Extra::Unknown, 1)
        };
        out.push(kind);
        i += len;
    }
    out
}

/// One cell of the matrix.
pub fn link(cell: &str) -> TopoLink {
    match cell {
        "X" => TopoLink::Itself,
        "PIX" => TopoLink::Pix,
        "PXB" => TopoLink::Pxb,
        "PHB" => TopoLink::Phb,
        "NODE" => TopoLink::Node,
        "SYS" => TopoLink::Sys,
        _ => match cell
            .strip_prefix("NV")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
        {
            Some(n) => TopoLink::NvLink(n),
            None => TopoLink::Other(cell.to_string()),
        },
    }
}

#[cfg(test)]
mod tests;
