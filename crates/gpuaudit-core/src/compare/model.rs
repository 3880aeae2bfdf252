//! The comparison as `--format json` writes it (`gpuaudit.compare/1`); the field names are
//! the contract (docs/DESIGN.md, "Comparing machines").

use crate::finding::Status;
use crate::fleet::stats::Better;
use crate::fleet::GpuGroup;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// Several machines side by side.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub schema: String,
    pub tool: Tool,
    pub columns: Vec<Column>,
    /// The key figures, in a fixed order: the ones that differ between providers.
    pub figures: Vec<FigureRow>,
    /// Every check id any machine ran, in the order of the first report that has it.
    pub checks: Vec<CheckRow>,
    /// The configuration.
    pub facts: Vec<FactRow>,
    /// Every report was redacted (`--redact`, or reports written with it); absent when not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

/// One machine: what it is and its verdict.
#[derive(Clone, Debug, Serialize)]
pub struct Column {
    /// Unique in the comparison: `--name`, else the hostname, else the file's stem.
    pub name: String,
    pub file: String,
    pub hostname: Option<String>,
    pub gpus: Vec<GpuGroup>,
    pub driver: Option<String>,
    pub audited_at: Option<String>,
    pub tool_version: String,
    /// "fail" (a finding failed), "warn" or "pass".
    pub verdict: Status,
    /// Findings that failed and that warned (the report's summary).
    pub fail: u32,
    pub warn: u32,
}

impl Column {
    /// `2× NVIDIA H200` (several models joined with " + "); "no GPU".
    pub fn gpu_label(&self) -> String {
        crate::fleet::node::gpus_label(&self.gpus)
    }

    /// When it was audited, to the minute ("2026-12-01 13:46", UTC): a table's narrow cell.
    /// A time not in gpuaudit's RFC 3339 UTC form is given as it is.
    pub fn audited_minute(&self) -> Option<String> {
        let at = self.audited_at.as_deref()?;
        let b = at.as_bytes();
        let ours = at.is_ascii() && at.len() >= 17 && at.ends_with('Z') && b.get(10) == Some(&b'T');
        Some(if ours {
            format!("{} {}", &at[..10], &at[11..16])
        } else {
            at.to_string()
        })
    }

    /// "1 fail · 2 warn", "pass".
    pub fn verdict_label(&self) -> String {
        match (self.fail, self.warn) {
            (0, 0) => "pass".into(),
            (f, 0) => format!("{f} fail"),
            (0, w) => format!("{w} warn"),
            (f, w) => format!("{f} fail · {w} warn"),
        }
    }
}

/// One key figure across the machines.
#[derive(Clone, Debug, Serialize)]
pub struct FigureRow {
    /// Stable: the measurement's name (`h2d_pinned_bandwidth`, `gemm_tflops_bf16`), or
    /// `pcie_link`, `power_limit`, `nvlink`, `loopback_rtt`.
    pub key: String,
    /// For a person: "host→device pinned".
    pub label: String,
    /// The unit of `value` ("GB/s", "ms", "W"); "" for NVLink (a state).
    pub unit: String,
    /// Which way is better; null for NVLink (the least severe status is best).
    pub better: Option<Better>,
    /// What a cell's ratio is a share of: "link" (the PCIe link's one-direction rate),
    /// "datasheet", "default" (the GPU's default power limit), "full width" (the link at the
    /// width it supports); null where there is none.
    pub ratio_of: Option<String>,
    /// The worst machine is more than [`DIFFERS`](super::DIFFERS) worse than the best (NVLink:
    /// the states differ).
    pub differs: bool,
    pub cells: Vec<FigureCell>,
}

/// One machine's value of a key figure.
#[derive(Clone, Debug, Serialize)]
pub struct FigureCell {
    /// The machine's value: its worst GPU's (or pair's) for a figure per GPU; null where it
    /// was not measured (never 0), and for NVLink.
    pub value: Option<f64>,
    /// How the views show it: "55.2", "gen5 x16 (of gen5 x16)", "pass · 18/18 links",
    /// "not measured".
    pub text: String,
    /// value / the report's expectation (the datasheet, the link's rate, the default power
    /// limit), where it has one.
    pub ratio: Option<f64>,
    /// The GPU whose figure is the machine's, for a figure per GPU.
    pub gpu: Option<u32>,
    /// Why it was not measured ("" where the report does not say); null where it was.
    pub not_measured: Option<String>,
    /// NVLink's state (the worst of nvlink.status's findings); null for the other rows.
    pub status: Option<Status>,
    /// The best of the row (ties: every one of them).
    pub best: bool,
    /// NVLink: the fewest links up of a GPU and the links its model has, where the findings
    /// say; what the row is judged on besides the state (the text words it).
    #[serde(skip)]
    pub links: Option<(u64, u64)>,
}

/// One check across the machines.
#[derive(Clone, Debug, Serialize)]
pub struct CheckRow {
    pub check: String,
    /// The statuses (n/a included) are not all the same.
    pub differs: bool,
    pub cells: Vec<CheckCell>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CheckCell {
    /// The worst of the machine's findings of this check; null: the report has none ("n/a").
    pub status: Option<Status>,
    /// The GPUs whose findings have that status, where it is fail or warn.
    pub gpus: Vec<u32>,
    /// The check whose cause explains each of those findings (`caused_by`), where one does:
    /// that machine's problem is that check's, shown there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caused_by: Option<String>,
}

/// One configuration fact across the machines.
#[derive(Clone, Debug, Serialize)]
pub struct FactRow {
    /// "driver", "CUDA (driver)", "kernel", "OS", "VBIOS", "GPU", "GPU memory", "memory", "CPU".
    pub field: String,
    /// The known values are not all the same (an unknown one does not make a row differ).
    pub differs: bool,
    pub cells: Vec<FactCell>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FactCell {
    /// null: the report does not say.
    pub value: Option<String>,
}
