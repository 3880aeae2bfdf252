//! Findings: what a check concluded, with the evidence and the fix.

use crate::reading::Reading;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A finding's verdict. The variants are declared from least to most severe, so the derived
/// order is "the worst of": `skip < pass < info < warn < fail` (`a.max(b)`, `iter.max()`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The check could not run; the message says why.
    Skip,
    Pass,
    Info,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Info => "info",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// Values and where they came from, as an ordered JSON object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Evidence(pub Map<String, Value>);

impl Evidence {
    pub fn new() -> Self {
        Evidence(Map::new())
    }

    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        self.insert(key, value);
        self
    }

    pub fn insert(&mut self, key: &str, value: impl Serialize) {
        let v = serde_json::to_value(value).unwrap_or(Value::Null);
        self.0.insert(key.to_string(), v);
    }

    /// Every reading that has a value, under its key; the missing ones are left out.
    /// Returns whether any had a value.
    pub fn insert_readings<T: Serialize>(&mut self, items: &[(&str, &Reading<T>)]) -> bool {
        let mut any = false;
        for (k, r) in items {
            if let Some(v) = r.value() {
                self.insert(k, v);
                any = true;
            }
        }
        any
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The finding whose cause explains another one: named by its check and, where that finding
/// is about a GPU, the GPU's index, or about a PCI device the driver does not list, its
/// address. `report::Causes` resolves it to the finding; a reference that names no problem
/// (a warn or fail) of the report resolves to nothing, and the finding then stands alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Cause {
    /// The check of the finding that names the cause ("gpu.driver-binding").
    pub check: String,
    /// That finding's GPU (NVML index); absent: a finding about the machine or a device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// For a finding about a PCI device (a GPU the driver does not list): the address its
    /// evidence gives as `pci_bus_id` ("0000:00:07.0").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
}

impl Cause {
    /// The finding of `check` about the machine.
    pub fn check(check: &str) -> Cause {
        Cause {
            check: check.to_string(),
            gpu: None,
            pci_bus_id: None,
        }
    }

    /// The finding of `check` about GPU `index`.
    pub fn gpu(check: &str, index: u32) -> Cause {
        Cause {
            gpu: Some(index),
            ..Cause::check(check)
        }
    }

    /// The finding of `check` about the PCI device at `bus_id`.
    pub fn device(check: &str, bus_id: &str) -> Cause {
        Cause {
            pci_bus_id: Some(bus_id.to_string()),
            ..Cause::check(check)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    pub check: String,
    pub status: Status,
    /// The GPU this finding is about (NVML index); null for the machine.
    pub gpu: Option<u32>,
    /// One sentence a person understands.
    pub message: String,
    pub evidence: Evidence,
    /// What to run by hand, or what to ask the provider; null where nothing needs fixing.
    pub fix: Option<String>,
    /// The finding whose cause explains this one (a GPU missing from the driver's list
    /// because nouveau holds it names gpu.driver-binding's finding): the views show this one
    /// under that one, and count them as one problem whose fix is the cause's. Absent where
    /// this finding is its own cause; reports before it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caused_by: Option<Cause>,
}

impl Finding {
    pub fn new(check: &str, status: Status, message: impl Into<String>) -> Self {
        Finding {
            check: check.to_string(),
            status,
            gpu: None,
            message: message.into(),
            evidence: Evidence::new(),
            fix: None,
            caused_by: None,
        }
    }

    pub fn pass(check: &str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Pass, message)
    }
    pub fn info(check: &str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Info, message)
    }
    pub fn warn(check: &str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Warn, message)
    }
    pub fn fail(check: &str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Fail, message)
    }
    pub fn skip(check: &str, message: impl Into<String>) -> Self {
        Self::new(check, Status::Skip, message)
    }

    pub fn gpu(mut self, index: u32) -> Self {
        self.gpu = Some(index);
        self
    }

    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        self.evidence.insert(key, value);
        self
    }

    pub fn evidence(mut self, evidence: Evidence) -> Self {
        for (k, v) in evidence.0 {
            self.evidence.0.insert(k, v);
        }
        self
    }

    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    /// Name the finding whose cause explains this one.
    pub fn caused_by(mut self, cause: Cause) -> Self {
        self.caused_by = Some(cause);
        self
    }

    /// [`Finding::caused_by`] where there is a cause.
    pub fn caused_by_opt(mut self, cause: Option<Cause>) -> Self {
        if cause.is_some() {
            self.caused_by = cause;
        }
        self
    }

    /// Raise or lower the status (profiles do this), keeping skip as skip.
    pub fn with_status(mut self, status: Status) -> Self {
        if self.status != Status::Skip {
            self.status = status;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_order_is_the_worst_of_and_names_stay() {
        let all = [
            Status::Skip,
            Status::Pass,
            Status::Info,
            Status::Warn,
            Status::Fail,
        ];
        assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
        assert_eq!(
            [Status::Info, Status::Skip, Status::Fail, Status::Pass]
                .into_iter()
                .max(),
            Some(Status::Fail)
        );
        assert_eq!(Status::Skip.max(Status::Pass), Status::Pass);
        for s in all {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
