//! PCI configuration space (the bytes of `/sys/bus/pci/devices/<bdf>/config`): the PCI Express
//! capability's device/port type and the Access Control Services (ACS) extended capability.
//!
//! Layout (PCI Express Base Specification; Linux `include/uapi/linux/pci_regs.h`):
//! - the standard capability list starts at the pointer at 0x34 (where the status register at
//!   0x06 has bit 4, "capabilities list"); each entry is `id: u8, next: u8`; the PCI Express
//!   capability is id 0x10 and its capabilities register (at +2) holds the device/port type
//!   in bits 7:4;
//! - the extended capability list starts at 0x100; each header is a little-endian u32: id in
//!   bits 15:0, version 19:16, next offset 31:20 (low two bits reserved). ACS is id 0x000D:
//!   its capability register is at +4 and its control register at +6 (both u16).
//!
//! A reader without CAP_SYS_ADMIN gets the first 64 bytes only (the kernel's
//! `pci_read_config`): neither list can be followed then. Both walks are bounded (at most
//! [`MAX_CAPS`] entries, an offset seen twice ends the walk, as a zero or all-ones header
//! does) and never read past the bytes given: no input panics.

/// Bytes a reader without root gets (the header only).
pub const UNPRIVILEGED_BYTES: usize = 64;
/// Where the extended capabilities start (bytes below are the conventional 256).
pub const EXTENDED_START: usize = 0x100;
/// At most this many capabilities are followed in each list.
pub const MAX_CAPS: usize = 64;
/// The ACS extended capability's id.
pub const ACS_CAP_ID: u16 = 0x000D;
/// The PCI Express capability's id (standard list).
pub const PCIE_CAP_ID: u8 = 0x10;

/// ACS control bits (PCIe Base Specification 7.7.8.3; `PCI_ACS_*` in pci_regs.h), in the order
/// lspci prints them (`ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+
/// EgressCtrl- DirectTrans-`), each with the short name used in findings.
pub const ACS_BITS: [(u16, &str, &str); 7] = [
    (0x0001, "SV", "SrcValid"),
    (0x0002, "TB", "TransBlk"),
    (0x0004, "RR", "ReqRedir"),
    (0x0008, "CR", "CmpltRedir"),
    (0x0010, "UF", "UpstreamFwd"),
    (0x0020, "EC", "EgressCtrl"),
    (0x0040, "DT", "DirectTrans"),
];
/// P2P Request Redirect.
pub const ACS_RR: u16 = 0x0004;
/// P2P Completion Redirect.
pub const ACS_CR: u16 = 0x0008;
/// P2P Egress Control.
pub const ACS_EC: u16 = 0x0020;

/// What the configuration space says, as far as its bytes reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSpace {
    /// How many bytes were read (64 for a reader without root, 256 or 4096 for root).
    pub len: usize,
    /// The PCI Express capability's device/port type (0 endpoint, 4 root port, 5 switch
    /// upstream port, 6 switch downstream port, ...), where the capability was found.
    pub port_type: Option<u8>,
    /// The ACS capability: `(capability register, control register)`, where found.
    pub acs: Option<(u16, u16)>,
}

impl ConfigSpace {
    /// Whether the extended capabilities (ACS among them) could be read at all.
    pub fn has_extended(&self) -> bool {
        self.len >= EXTENDED_START + 8
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([
        *b.get(at)?,
        *b.get(at.checked_add(1)?)?,
    ]))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *b.get(at)?,
        *b.get(at.checked_add(1)?)?,
        *b.get(at.checked_add(2)?)?,
        *b.get(at.checked_add(3)?)?,
    ]))
}

/// The PCI Express capability's device/port type from the standard capability list.
pub fn port_type(b: &[u8]) -> Option<u8> {
    let status = u16_at(b, 0x06)?;
    if status & 0x0010 == 0 {
        return None;
    }
    let mut at = usize::from(*b.get(0x34)? & 0xFC);
    let mut seen = Vec::new();
    for _ in 0..MAX_CAPS {
        // Pointers below 0x40 point into the header: the list ends (or is garbage).
        if at < 0x40 || seen.contains(&at) {
            return None;
        }
        seen.push(at);
        let id = *b.get(at)?;
        if id == PCIE_CAP_ID {
            return Some((*b.get(at.checked_add(2)?)? >> 4) & 0x0F);
        }
        at = usize::from(*b.get(at.checked_add(1)?)? & 0xFC);
    }
    None
}

/// The offset of the extended capability `id`, walking the list from 0x100.
pub fn find_extended(b: &[u8], id: u16) -> Option<usize> {
    let mut at = EXTENDED_START;
    let mut seen = Vec::new();
    for _ in 0..MAX_CAPS {
        if at < EXTENDED_START || seen.contains(&at) {
            return None;
        }
        seen.push(at);
        let header = u32_at(b, at)?;
        if header == 0 || header == u32::MAX {
            return None;
        }
        if (header & 0xFFFF) as u16 == id {
            return Some(at);
        }
        at = ((header >> 20) & 0xFFC) as usize;
    }
    None
}

/// The ACS capability and control registers, where the capability is there.
pub fn acs(b: &[u8]) -> Option<(u16, u16)> {
    let at = find_extended(b, ACS_CAP_ID)?;
    Some((
        u16_at(b, at.checked_add(4)?)?,
        u16_at(b, at.checked_add(6)?)?,
    ))
}

/// Read what the bytes hold.
pub fn parse(b: &[u8]) -> ConfigSpace {
    ConfigSpace {
        len: b.len(),
        port_type: port_type(b),
        acs: acs(b),
    }
}

/// The control bits set, by their short names ("SV RR CR UF"); "none" where none is.
pub fn acs_bit_names(control: u16) -> String {
    let set: Vec<&str> = ACS_BITS
        .iter()
        .filter(|(bit, _, _)| control & bit != 0)
        .map(|(_, short, _)| *short)
        .collect();
    if set.is_empty() {
        "none".into()
    } else {
        set.join(" ")
    }
}

/// The control register as lspci prints it ("SrcValid+ TransBlk- ReqRedir+ ...").
pub fn acs_lspci(control: u16) -> String {
    ACS_BITS
        .iter()
        .map(|(bit, _, long)| format!("{long}{}", if control & bit != 0 { '+' } else { '-' }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The words for a PCI Express device/port type.
pub fn port_type_name(t: u8) -> &'static str {
    match t {
        0 => "endpoint",
        1 => "legacy endpoint",
        4 => "root port",
        5 => "switch upstream port",
        6 => "switch downstream port",
        7 => "PCIe-to-PCI bridge",
        8 => "PCI-to-PCIe bridge",
        9 => "root complex integrated endpoint",
        10 => "root complex event collector",
        _ => "PCIe function of a reserved type",
    }
}

/// A 4096-byte configuration space built from parts: a PCI Express capability of `port_type`
/// at 0x40 (where given), and after an AER capability at 0x100 the ACS capability at 0x148
/// with `(capability, control)` (where given). For tests of the readers that take the bytes
/// from a file (the probe's, the fixtures').
pub fn synthetic(
    vendor: u16,
    device: u16,
    port_type: Option<u8>,
    acs: Option<(u16, u16)>,
) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..2].copy_from_slice(&vendor.to_le_bytes());
    b[2..4].copy_from_slice(&device.to_le_bytes());
    if let Some(t) = port_type {
        b[0x06] = 0x10;
        b[0x34] = 0x40;
        // A power-management capability first, so the walk follows a pointer.
        b[0x40] = 0x01;
        b[0x41] = 0x50;
        b[0x50] = PCIE_CAP_ID;
        b[0x51] = 0x00;
        b[0x52] = 0x02 | (t << 4);
    }
    // AER (id 0x0001, version 2), then ACS or the end of the list.
    let next: u32 = if acs.is_some() { 0x148 } else { 0 };
    b[0x100..0x104].copy_from_slice(&(0x0001u32 | (2 << 16) | (next << 20)).to_le_bytes());
    if let Some((cap, ctl)) = acs {
        b[0x148..0x14C].copy_from_slice(&(u32::from(ACS_CAP_ID) | (1 << 16)).to_le_bytes());
        b[0x14C..0x14E].copy_from_slice(&cap.to_le_bytes());
        b[0x14E..0x150].copy_from_slice(&ctl.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests;
