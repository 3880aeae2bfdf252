//! Causes one check knows from the facts and another check reports: a symptom's check asks
//! here whether a known cause explains it, names that cause's finding (`caused_by`) and says
//! the cause in its own text instead of guessing another. Each function here holds exactly
//! when the check it names fails for that reason, so that the reference resolves (the
//! fixtures' test `every_cause_names_a_problem_of_its_report` holds every reference to that).

use crate::facts::{normalize_bus_id, short_bus_id, Fabric, Facts, GpuFacts, PciFunction};
use crate::finding::Cause;
use crate::reading::Reading;

/// gpu.driver-binding's id.
pub const BINDING: &str = "gpu.driver-binding";
/// kernel.modules' id.
pub const MODULES: &str = "kernel.modules";

/// nvlink.fabric's id.
pub const FABRIC: &str = "nvlink.fabric";

/// A GPU's NVSwitch fabric registration where it is not what a working fabric shows (not
/// "Completed" with "Success"; "Not Supported" is no fabric at all). nvlink.fabric has a
/// finding about exactly these GPUs (warn or fail), which nvlink.status's fabric findings name
/// as their cause.
pub fn fabric_unregistered(g: &GpuFacts) -> Option<&Fabric> {
    let f = g.fabric.value()?;
    let state_ok =
        f.state.eq_ignore_ascii_case("completed") || f.state.eq_ignore_ascii_case("not supported");
    let status_ok = f
        .status
        .as_deref()
        .is_none_or(|s| s.eq_ignore_ascii_case("success") || s.eq_ignore_ascii_case("n/a"));
    (!state_ok || !status_ok).then_some(f)
}

/// nvlink.fabric's finding about GPU `g`'s registration, where it has one.
pub fn fabric_cause(g: &GpuFacts) -> Option<Cause> {
    fabric_unregistered(g).map(|_| Cause::gpu(FABRIC, g.index))
}

/// A PCI function held by another driver than nvidia: gpu.driver-binding fails on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignBinding {
    /// "0000:00:07.0".
    pub bus_id: String,
    /// "nouveau", "vfio-pci", ...
    pub driver: String,
}

impl ForeignBinding {
    /// gpu.driver-binding's finding about this function.
    pub fn cause(&self) -> Cause {
        Cause::device(BINDING, &self.bus_id)
    }

    /// "00:07.0 is bound to nouveau (the open-source driver), not nvidia".
    pub fn sentence(&self) -> String {
        let what = match self.driver.as_str() {
            "nouveau" => "nouveau (the open-source driver)".to_string(),
            "vfio-pci" => "vfio-pci (reserved for a VM)".to_string(),
            d => format!("'{d}'"),
        };
        format!(
            "{} is bound to {what}, not nvidia",
            short_bus_id(&self.bus_id)
        )
    }
}

/// The driver another than nvidia that holds the PCI function at `bus_id`, where the bus
/// was read and says so.
pub fn foreign_binding(facts: &Facts, bus_id: &str) -> Option<ForeignBinding> {
    let f = facts
        .pci_gpus
        .value()?
        .iter()
        .find(|p| same_function(&p.bus_id, bus_id))?;
    foreign(f)
}

fn foreign(f: &PciFunction) -> Option<ForeignBinding> {
    match &f.driver {
        Reading::Value(Some(d)) if d != "nvidia" => Some(ForeignBinding {
            bus_id: f.bus_id.clone(),
            driver: d.clone(),
        }),
        _ => None,
    }
}

/// Every NVIDIA function bound to `driver`, in bus order.
pub fn bound_to(facts: &Facts, driver: &str) -> Vec<ForeignBinding> {
    facts
        .pci_gpus
        .value()
        .map(|p| {
            p.iter()
                .filter_map(foreign)
                .filter(|b| b.driver == driver)
                .collect()
        })
        .unwrap_or_default()
}

/// kernel.modules' finding "the nvidia kernel module is not loaded", where the module list
/// was read and has no nvidia and no function is held by nouveau (which is then the cause:
/// nvidia cannot take a GPU nouveau holds).
pub fn nvidia_module_missing(facts: &Facts) -> Option<Cause> {
    let mods = facts.modules.value()?;
    let loaded = mods.iter().any(|m| m.name == "nvidia");
    (!loaded && bound_to(facts, "nouveau").is_empty()).then(|| Cause::check(MODULES))
}

/// Whether an XID line's address ("0000:00:07", the device without its function, as the
/// kernel writes it; or a whole "0000:00:07.0") names the PCI function `bus_id`.
pub fn xid_names(bus_id: &str, xid_bus: &str) -> bool {
    let g = normalize_bus_id(bus_id);
    let x = normalize_bus_id(xid_bus);
    g == x || g.rsplit_once('.').is_some_and(|(device, _)| device == x)
}

/// The XID codes the kernel log has for the function at `bus_id`, in log order, each once.
pub fn xids_at(facts: &Facts, bus_id: &str) -> Vec<u32> {
    let mut codes: Vec<u32> = Vec::new();
    for e in facts.xid_events.value().into_iter().flatten() {
        if !e.switch
            && e.bus_id.as_deref().is_some_and(|b| xid_names(bus_id, b))
            && !codes.contains(&e.code)
        {
            codes.push(e.code);
        }
    }
    codes
}

/// "0000:00:07.0" and "00:07.0" name one function.
fn same_function(a: &str, b: &str) -> bool {
    normalize_bus_id(a) == normalize_bus_id(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::KernelModule;
    use crate::testing::Machine;

    fn module(name: &str) -> KernelModule {
        KernelModule {
            name: name.into(),
            size: 1,
            used_by: vec![],
            state: "Live".into(),
            taints: String::new(),
        }
    }

    #[test]
    fn a_function_held_by_another_driver_is_named_with_its_driver() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .pci(1, |p| p.driver = Reading::Value(Some("nouveau".into())))
            .build();
        let b = foreign_binding(&f, "00:07.0").expect("held by nouveau");
        assert_eq!(b.driver, "nouveau");
        assert_eq!(b.cause(), Cause::device(BINDING, "0000:00:07.0"));
        assert_eq!(
            b.sentence(),
            "00:07.0 is bound to nouveau (the open-source driver), not nvidia"
        );
        assert_eq!(foreign_binding(&f, "0000:00:06.0"), None, "nvidia");
        assert_eq!(foreign_binding(&f, "00:09.0"), None, "not on the bus");
        assert_eq!(bound_to(&f, "nouveau").len(), 1);
        assert!(bound_to(&f, "vfio-pci").is_empty());
        let vfio = ForeignBinding {
            bus_id: "0000:00:07.0".into(),
            driver: "vfio-pci".into(),
        };
        assert!(vfio.sentence().contains("vfio-pci (reserved for a VM)"));
        let stub = ForeignBinding {
            bus_id: "0000:00:07.0".into(),
            driver: "pci-stub".into(),
        };
        assert_eq!(
            stub.sentence(),
            "00:07.0 is bound to 'pci-stub', not nvidia"
        );
        // No driver at all, or not read: no foreign driver.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .pci(0, |p| p.driver = Reading::Value(None))
            .build();
        assert_eq!(foreign_binding(&f, "00:06.0"), None);
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .pci(0, |p| p.driver = Reading::unavailable("denied"))
            .build();
        assert_eq!(foreign_binding(&f, "00:06.0"), None);
    }

    #[test]
    fn xids_are_matched_to_their_function() {
        use crate::facts::XidEvent;
        assert!(xid_names("0000:00:07.0", "0000:00:07"));
        assert!(xid_names("0000:00:07.0", "0000:00:07.0"));
        assert!(xid_names("00:07.0", "00000000:00:07.0"));
        assert!(!xid_names("0000:00:07.0", "0000:00:06"));
        assert!(!xid_names("0000:00:07.0", "0000:00:07.1"));
        let xid = |bus: Option<&str>, code| XidEvent {
            bus_id: bus.map(str::to_string),
            code,
            text: String::new(),
            ..Default::default()
        };
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                f.xid_events = Reading::Value(vec![
                    xid(Some("0000:00:07"), 79),
                    xid(Some("0000:00:06"), 13),
                    xid(None, 31),
                    xid(Some("0000:00:07"), 119),
                    xid(Some("0000:00:07"), 79),
                ])
            })
            .build();
        assert_eq!(xids_at(&f, "0000:00:07.0"), vec![79, 119]);
        assert_eq!(xids_at(&f, "0000:00:06.0"), vec![13]);
        assert!(xids_at(&f, "0000:00:08.0").is_empty());
    }

    #[test]
    fn the_missing_module_is_the_cause_unless_nouveau_holds_a_gpu() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        assert_eq!(nvidia_module_missing(&f), None, "loaded");
        f.modules = Reading::Value(vec![module("ext4")]);
        assert_eq!(nvidia_module_missing(&f), Some(Cause::check(MODULES)));
        f.modules = Reading::unavailable("no /proc/modules");
        assert_eq!(nvidia_module_missing(&f), None, "not known");
        let mut f = Machine::healthy("h200-sxm-141gb", 1)
            .pci(0, |p| p.driver = Reading::Value(Some("nouveau".into())))
            .build();
        f.modules = Reading::Value(vec![module("nouveau")]);
        assert_eq!(nvidia_module_missing(&f), None, "nouveau is the cause");
    }
}
