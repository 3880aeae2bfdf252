//! The machine and its GPUs as the Markdown and HTML reports tabulate them: what a provider
//! ticket needs (host, system, OS, driver, each GPU's bus id, serial and UUID, when the audit
//! ran and with which version).
//!
//! The report's date, the system's firmware names and the GPUs' serials are read from the
//! report's JSON by name (`audit.audited_at`, `gpus[].serial`, ...): a report that has them
//! shows them, one that does not (an older report, a library caller without a clock) shows
//! the rest. Reading them by name keeps these views independent of which fields a given
//! report version carries.

use super::fmt_value;
use crate::report::Report;
use serde_json::Value;

/// The report as JSON, for the fields read by name.
pub struct Document<'a> {
    pub report: &'a Report,
    json: Value,
}

impl<'a> Document<'a> {
    pub fn of(report: &'a Report) -> Document<'a> {
        Document {
            report,
            json: serde_json::to_value(report).unwrap_or(Value::Null),
        }
    }

    /// A non-empty string at `path` ("audit.audited_at").
    pub fn text(&self, path: &str) -> Option<String> {
        text_at(&self.json, path)
    }

    fn gpu_text(&self, index: u32, key: &str) -> Option<String> {
        self.json
            .get("gpus")?
            .as_array()?
            .iter()
            .find(|g| g.get("index").and_then(Value::as_u64) == Some(u64::from(index)))
            .and_then(|g| text_at(g, key))
    }

    /// When the audit ran, where the report says.
    pub fn audited_at(&self) -> Option<String> {
        self.text("audit.audited_at")
    }

    /// (label, value) rows about the machine and the audit; values as the report has them
    /// (escape them for the format).
    pub fn machine_rows(&self) -> Vec<(&'static str, String)> {
        let r = self.report;
        let m = &r.machine;
        let mut rows: Vec<(&'static str, Option<String>)> = vec![
            ("host", m.hostname.clone()),
            (
                "system",
                join_some(&[
                    self.text("machine.system_vendor"),
                    self.text("machine.system_product"),
                ]),
            ),
            ("instance type", self.text("machine.instance_type")),
            ("OS", m.os.clone()),
            ("kernel", m.kernel.clone()),
            (
                "CPU",
                m.cpu.clone().map(|c| {
                    let mut s = c;
                    if let Some(n) = m.cpus {
                        s.push_str(&format!(", {n} CPUs"));
                    }
                    if let Some(k) = m.sockets {
                        s.push_str(&format!(", {k} socket{}", if k == 1 { "" } else { "s" }));
                    }
                    s
                }),
            ),
            (
                "memory",
                m.memory_gib.map(|g| format!("{} GiB", fmt_value(g))),
            ),
            ("virtualization", m.virtualization.clone()),
            ("driver", m.driver_version.clone()),
            ("CUDA (driver)", m.cuda_driver_version.clone()),
            (
                "CUDA toolkits",
                (!m.toolkits.is_empty()).then(|| m.toolkits.join(", ")),
            ),
            ("audited at", self.audited_at()),
            (
                "audit",
                Some({
                    let mut s = match &r.audit.snapshot {
                        Some(p) => format!("snapshot {p}"),
                        None => "live".to_string(),
                    };
                    if let Some(c) = self.text("audit.snapshot_collected_at") {
                        s.push_str(&format!(" (collected {c})"));
                    }
                    s.push_str(&format!(
                        ", profile {}{}{}",
                        r.audit.profile,
                        if r.audit.full { ", --full" } else { "" },
                        r.audit
                            .expect
                            .as_ref()
                            .map(|e| format!(", --expect {e}"))
                            .unwrap_or_default()
                    ));
                    s
                }),
            ),
            ("gpuaudit", Some(r.tool.version.clone())),
        ];
        rows.retain(|(_, v)| v.is_some());
        rows.into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    }

    /// The GPU table: a header and one row per GPU (values unescaped).
    pub fn gpu_rows(&self) -> (Vec<&'static str>, Vec<Vec<String>>) {
        let header = vec![
            "GPU",
            "name",
            "bus id",
            "memory",
            "PCIe",
            "power limit",
            "VBIOS",
            "serial",
            "UUID",
        ];
        let dash = || "-".to_string();
        let rows = self
            .report
            .gpus
            .iter()
            .map(|g| {
                let pcie = match (g.pcie.gen_current, g.pcie.width_current) {
                    (Some(gen), Some(w)) => {
                        let mut s = format!("gen{gen} x{w}");
                        if let (Some(gm), Some(wm)) = (g.pcie.gen_max, g.pcie.width_max) {
                            if (gm, wm) != (gen, w) {
                                s.push_str(&format!(" (max gen{gm} x{wm})"));
                            }
                        }
                        s
                    }
                    _ => dash(),
                };
                let power = match (g.power.limit_w, g.power.default_limit_w) {
                    (Some(l), Some(d)) if (l - d).abs() > 0.5 => {
                        format!("{} W (default {} W)", fmt_value(l), fmt_value(d))
                    }
                    (Some(l), _) => format!("{} W", fmt_value(l)),
                    _ => dash(),
                };
                vec![
                    g.index.to_string(),
                    g.name.clone().unwrap_or_else(dash),
                    g.pci_bus_id.clone(),
                    g.memory_total_mib
                        .map(|m| format!("{:.1} GiB", m as f64 / 1024.0))
                        .unwrap_or_else(dash),
                    pcie,
                    power,
                    g.vbios.clone().unwrap_or_else(dash),
                    self.gpu_text(g.index, "serial").unwrap_or_else(dash),
                    g.uuid.clone().unwrap_or_else(dash),
                ]
            })
            .collect();
        (header, rows)
    }
}

fn text_at(v: &Value, path: &str) -> Option<String> {
    let mut cur = v;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    cur.as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn join_some(parts: &[Option<String>]) -> Option<String> {
    let v: Vec<&str> = parts.iter().flatten().map(String::as_str).collect();
    (!v.is_empty()).then(|| v.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::testing::Machine;

    #[test]
    fn fields_by_name_are_read_where_present_and_left_out_where_not() {
        let facts = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| g.serial = crate::Reading::unavailable("not reported"))
            .build();
        let report = Report::from_findings(&facts, &Policy::default(), vec![]);
        let mut d = Document::of(&report);
        // This report carries no date, no serial, no firmware names: rows without them.
        let keys: Vec<&str> = d.machine_rows().iter().map(|(k, _)| *k).collect();
        assert!(
            !keys.contains(&"audited at") && !keys.contains(&"system"),
            "{keys:?}"
        );
        assert!(keys.contains(&"host") && keys.contains(&"gpuaudit"));
        let (h, rows) = d.gpu_rows();
        let serial = h.iter().position(|c| *c == "serial").unwrap();
        assert_eq!(rows[0][serial], "-");
        // A report that has them (as the JSON of a newer report would).
        d.json["audit"]["audited_at"] = "2026-12-01T10:00:00Z".into();
        d.json["machine"]["system_vendor"] = "Amazon EC2".into();
        d.json["machine"]["system_product"] = "p5.48xlarge".into();
        d.json["gpus"][1]["serial"] = "1654922004567".into();
        d.json["gpus"][0]["serial"] = "  ".into();
        let rows = d.machine_rows();
        assert!(rows.contains(&("audited at", "2026-12-01T10:00:00Z".to_string())));
        assert!(rows.contains(&("system", "Amazon EC2 p5.48xlarge".to_string())));
        let (_, g) = d.gpu_rows();
        assert_eq!(g[1][serial], "1654922004567");
        assert_eq!(g[0][serial], "-");
    }
}
