use super::*;

/// A PLX/Broadcom switch downstream port with ACS as Linux enables it (SV RR CR UF) and as
/// NCCL's troubleshooting page leaves it (all clear).
#[test]
fn reads_port_type_and_acs() {
    let b = synthetic(0x1000, 0xc010, Some(6), Some((0x005f, 0x001d)));
    let c = parse(&b);
    assert_eq!(c.len, 4096);
    assert!(c.has_extended());
    assert_eq!(c.port_type, Some(6));
    assert_eq!(c.acs, Some((0x005f, 0x001d)));
    assert_eq!(acs_bit_names(0x001d), "SV RR CR UF");
    assert_eq!(
        acs_lspci(0x001d),
        "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    );
    assert_eq!(acs_bit_names(0), "none");
    assert_eq!(acs_bit_names(0x7f), "SV TB RR CR UF EC DT");
    let none = parse(&synthetic(0x10de, 0x2335, Some(0), None));
    assert_eq!(none.port_type, Some(0));
    assert_eq!(none.acs, None);
    assert_eq!(port_type_name(6), "switch downstream port");
    assert_eq!(port_type_name(4), "root port");
    assert_eq!(port_type_name(5), "switch upstream port");
    assert_eq!(port_type_name(0), "endpoint");
    assert_eq!(port_type_name(15), "PCIe function of a reserved type");
}

#[test]
fn an_unprivileged_read_holds_the_header_only() {
    let b = synthetic(0x1000, 0xc010, Some(6), Some((0x005f, 0x001d)));
    let c = parse(&b[..UNPRIVILEGED_BYTES]);
    assert_eq!(c.len, 64);
    assert!(!c.has_extended());
    assert_eq!(c.port_type, None);
    assert_eq!(c.acs, None);
    // 256 bytes: the PCIe capability, no extended space.
    let c = parse(&b[..256]);
    assert_eq!(c.port_type, Some(6));
    assert!(!c.has_extended());
    assert_eq!(c.acs, None);
    // The boundary: the first extended header and ACS's registers need 0x108 bytes at least.
    assert!(!parse(&b[..EXTENDED_START + 7]).has_extended());
    assert!(parse(&b[..EXTENDED_START + 8]).has_extended());
    // ACS cut off mid-register.
    assert_eq!(parse(&b[..0x14F]).acs, None);
    assert_eq!(parse(&b[..0x150]).acs, Some((0x005f, 0x001d)));
}

#[test]
fn the_walks_stop_on_loops_zeros_and_garbage() {
    // Standard list: no capabilities-list bit.
    let mut b = synthetic(0x1000, 0xc010, Some(6), None);
    b[0x06] = 0;
    assert_eq!(port_type(&b), None);
    // A pointer into the header ends the walk.
    let mut b = synthetic(0x1000, 0xc010, Some(6), None);
    b[0x34] = 0x20;
    assert_eq!(port_type(&b), None);
    // A loop: 0x40 -> 0x40.
    let mut b = synthetic(0x1000, 0xc010, Some(6), None);
    b[0x41] = 0x40;
    assert_eq!(port_type(&b), None);
    // Low pointer bits are reserved: 0x53 reads as 0x50.
    let mut b = synthetic(0x1000, 0xc010, Some(6), None);
    b[0x41] = 0x53;
    assert_eq!(port_type(&b), Some(6));
    // Extended list: a loop back to 0x100.
    let mut b = synthetic(0x1000, 0xc010, None, Some((1, 2)));
    b[0x148..0x14C].copy_from_slice(&(0x0002u32 | (0x100 << 20)).to_le_bytes());
    assert_eq!(find_extended(&b, ACS_CAP_ID), None);
    // All ones (a device gone from the bus) and zero headers.
    let mut b = vec![0xFF; 4096];
    assert_eq!(parse(&b).acs, None);
    b[0x100..0x104].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(find_extended(&b, ACS_CAP_ID), None);
    // A next offset below 0x100 ends the list.
    let mut b = synthetic(0x1000, 0xc010, None, Some((1, 2)));
    b[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x0FC << 20)).to_le_bytes());
    assert_eq!(find_extended(&b, ACS_CAP_ID), None);
    // The cap on the walk: a chain of 70 capabilities with ACS last is not followed to its end.
    let mut b = vec![0u8; 4096];
    for i in 0..70usize {
        let at = 0x100 + i * 8;
        let next = if i == 69 { 0 } else { at + 8 };
        let id: u32 = if i == 69 { u32::from(ACS_CAP_ID) } else { 0x0B };
        b[at..at + 4].copy_from_slice(&(id | ((next as u32) << 20)).to_le_bytes());
    }
    assert_eq!(find_extended(&b, ACS_CAP_ID), None);
    // ...while the 64th is.
    let mut b = vec![0u8; 4096];
    for i in 0..MAX_CAPS {
        let at = 0x100 + i * 8;
        let id: u32 = if i == MAX_CAPS - 1 {
            u32::from(ACS_CAP_ID)
        } else {
            0x0B
        };
        b[at..at + 4].copy_from_slice(&(id | (((at + 8) as u32) << 20)).to_le_bytes());
    }
    assert_eq!(
        find_extended(&b, ACS_CAP_ID),
        Some(0x100 + (MAX_CAPS - 1) * 8)
    );
    // The same bound on the standard list.
    let mut b = vec![0u8; 256];
    b[0x06] = 0x10;
    b[0x34] = 0x40;
    for i in 0..MAX_CAPS.min(48) {
        let at = 0x40 + i * 4;
        b[at] = 0x05;
        b[at + 1] = (at + 4) as u8;
    }
    assert_eq!(port_type(&b), None);
}

/// Arbitrary bytes of every length up to 4 KiB: no panic, and what is found lies inside them.
#[test]
fn arbitrary_bytes_never_panic() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for case in 0..3000 {
        let len = (next() % 4200) as usize;
        let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Half the cases keep a plausible skeleton so that the walks go deep.
        if case % 2 == 0 && len > 0x110 {
            b[0x06] |= 0x10;
            b[0x34] = 0x40;
            let n = (next() % 0xF00) as u32 + 0x100;
            b[0x100..0x104].copy_from_slice(
                &(0x000Du32.wrapping_add(case as u32 % 3) | (n << 20)).to_le_bytes(),
            );
        }
        let c = parse(&b);
        assert_eq!(c.len, len);
        if let Some(at) = find_extended(&b, ACS_CAP_ID) {
            assert!(at + 4 <= len && at >= EXTENDED_START);
        }
        if c.acs.is_some() {
            assert!(c.has_extended());
        }
        let _ = acs_bit_names(next() as u16);
        let _ = acs_lspci(next() as u16);
        let _ = port_type_name(next() as u8);
    }
    for len in 0..=0x160 {
        let b = synthetic(0x1000, 0xc010, Some(6), Some((0x5f, 0x1d)));
        let _ = parse(&b[..len]);
    }
}
