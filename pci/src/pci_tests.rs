//! Tests of the crate across its modules against [`Model`]: the q35 machine as QEMU builds
//! it, hostile devices, and random configuration spaces that must never
//! make the crate panic or loop.

use std::cell::Cell;
use std::string::{String, ToString};
use std::vec::Vec;
use std::{format, vec};

use formats::test_rng::Rng;

use crate::bar::{Bar, BarError, BarKind, BarSlot};
use crate::cap::{self, id, CapError, Capability, MAX_CAPABILITIES};
use crate::config::{reg, set_command, Bdf, ConfigExt, ConfigSpace, Layout, OffsetError};
use crate::enumerate::{enumerate, BridgeBuses, BusRange, Device, Found, SkipReason, Skipped};
use crate::matching::DeviceMatch;
use crate::msi::{self, mappable_around, BarLocation, MsiMessage};
use crate::testing::{Function, Model};
use crate::virtio::{cfg_type, Region, VirtioError, VirtioPci};

fn bdf(text: &str) -> Bdf {
    text.parse().unwrap()
}

/// Enumerates the whole machine: the devices and the skipped buses.
fn scan_range(model: &mut Model, buses: BusRange) -> (Vec<Device>, Vec<Skipped>) {
    let (mut devices, mut skipped) = (Vec::new(), Vec::new());
    enumerate(model, buses, |found| match found {
        Found::Device(d) => devices.push(d),
        Found::Skipped(s) => skipped.push(s),
    });
    (devices, skipped)
}

fn scan(model: &mut Model) -> (Vec<Device>, Vec<Skipped>) {
    scan_range(model, BusRange::ALL)
}

fn device<'a>(devices: &'a [Device], at: &str) -> &'a Device {
    let at = bdf(at);
    devices.iter().find(|d| d.bdf == at).unwrap()
}

fn mem(kind: BarKind, prefetchable: bool, size: u64) -> BarSlot {
    BarSlot::Bar(Bar {
        kind,
        prefetchable,
        address: 0,
        size,
    })
}

/// The machine's device list as lspci -n prints its first columns.
fn listing(devices: &[Device]) -> Vec<String> {
    devices.iter().map(|d| d.to_string()).collect()
}

#[test]
fn q35_enumerates_to_exactly_the_qemu_device_list() {
    let (devices, skipped) = scan(&mut Model::q35());
    assert_eq!(
        listing(&devices),
        [
            "00:00.0 8086:29c0 class 06:00:00",
            "00:01.0 1af4:1042 class 01:00:00",
            "00:02.0 1af4:1041 class 02:00:00",
            "00:03.0 1234:1111 class 03:80:00",
            "00:1f.0 8086:2918 class 06:01:00",
            "00:1f.2 8086:2922 class 01:06:01",
            "00:1f.3 8086:2930 class 0c:05:00",
        ]
    );
    assert!(skipped.is_empty());
    for d in &devices {
        assert_eq!(d.header.layout, Layout::Endpoint, "{d}");
        assert_eq!(d.bdf.device() == 0x1f, d.header.multifunction, "{d}");
        assert_eq!(
            d.subsystem.map(|s| (s.vendor, s.device)),
            Some((0x1af4, 0x1100))
        );
        assert_eq!(d.capabilities.error(), None, "{d}");
        assert!(d.bridge.is_none());
    }
    let blk = device(&devices, "00:01.0");
    assert_eq!(
        (blk.revision, blk.interrupt_line, blk.interrupt_pin),
        (1, 11, 1)
    );
    let ids: Vec<(u8, u8)> = blk
        .capabilities
        .as_slice()
        .iter()
        .map(|c| (c.id, c.offset))
        .collect();
    assert_eq!(
        ids,
        [
            (0x11, 0x98),
            (0x09, 0x84),
            (0x09, 0x70),
            (0x09, 0x60),
            (0x09, 0x50),
            (0x09, 0x40)
        ]
    );
    let sata = device(&devices, "00:1f.2");
    assert_eq!(sata.capabilities.as_slice().len(), 2);
    let msi = sata.msi.unwrap().unwrap();
    assert!(msi.is_64bit() && !msi.per_vector_masking() && !msi.enabled());
    assert_eq!(
        (msi.vectors(), msi.cap_len(), msi.data_offset()),
        (1, 16, 0x8c)
    );
    assert!(sata.msix.is_none());
}

#[test]
fn q35_bar_sizes() {
    let (devices, _) = scan(&mut Model::q35());
    let unused = BarSlot::Unused;
    let virtio_bars = [
        unused,
        mem(BarKind::Memory32, false, 0x1000),
        unused,
        unused,
        mem(BarKind::Memory64, true, 0x4000),
        BarSlot::Upper,
    ];
    assert_eq!(device(&devices, "00:01.0").bars, virtio_bars);
    assert_eq!(device(&devices, "00:02.0").bars, virtio_bars);
    assert_eq!(
        device(&devices, "00:03.0").bars,
        [
            mem(BarKind::Memory32, true, 0x100_0000),
            unused,
            mem(BarKind::Memory32, false, 0x1000),
            unused,
            unused,
            unused
        ]
    );
    assert_eq!(
        device(&devices, "00:1f.2").bars[4..],
        [
            mem(BarKind::Io, false, 0x20),
            mem(BarKind::Memory32, false, 0x1000)
        ]
    );
    assert_eq!(
        device(&devices, "00:1f.3").bars[4],
        mem(BarKind::Io, false, 0x40)
    );
    assert_eq!(device(&devices, "00:00.0").bars, [unused; 6]);
}

#[test]
fn sizing_turns_decoding_off_and_restores_every_register() {
    let mut model = Model::q35();
    let blk = bdf("00:01.0");
    // As if firmware had assigned and enabled the BARs.
    {
        let f = model.function_mut(blk).unwrap();
        f.set32(0x14, 0xfebd_1000);
        f.set32(0x20, 0xfe00_000c);
        f.set32(0x24, 0x1);
        f.set32(
            reg::COMMAND,
            f.get32(reg::COMMAND) | u32::from(reg::COMMAND_MEMORY | reg::COMMAND_BUS_MASTER),
        );
    }
    let before = model.clone();
    let (devices, _) = scan(&mut model);
    assert_eq!(model.bar_writes_while_decoding, 0);
    assert!(!model.writes.is_empty());
    for (at, offset, _) in &model.writes {
        assert_eq!(
            model.read32(*at, *offset),
            before.read32(*at, *offset),
            "{at} {offset:#x} not restored"
        );
    }
    let blk = device(&devices, "00:01.0");
    assert_eq!(
        blk.bar(1),
        Some(&Bar {
            kind: BarKind::Memory32,
            prefetchable: false,
            address: 0xfebd_1000,
            size: 0x1000
        })
    );
    assert_eq!(
        blk.bar(4).map(|b| (b.address, b.end())),
        Some((0x1_fe00_0000, 0x1_fe00_4000))
    );
}

#[test]
fn q35_msix_table_location() {
    let (devices, _) = scan(&mut Model::q35());
    for (at, entries) in [("00:01.0", 2), ("00:02.0", 4)] {
        let d = device(&devices, at);
        let msix = d.msix.unwrap().unwrap();
        assert_eq!(msix.table_size(), entries);
        assert_eq!(msix.table, BarLocation { bar: 1, offset: 0 });
        assert_eq!(
            msix.pba,
            BarLocation {
                bar: 1,
                offset: 0x800
            }
        );
        assert!(!msix.enabled() && !msix.function_masked());
        assert_eq!(d.msix_table_pages(), Some(Ok(0..0x1000)));
        // QEMU's MSI-X BAR is the table's page only: a driver maps none of it.
        assert_eq!(
            mappable_around(d.bar(1).unwrap().size, 0..0x1000),
            [None, None]
        );
    }
    assert_eq!(device(&devices, "00:03.0").msix_table_pages(), None);
}

#[test]
fn q35_virtio_register_blocks() {
    let mut model = Model::q35();
    let (devices, _) = scan(&mut model);
    let region = |offset| Region {
        bar: 4,
        offset,
        length: 0x1000,
    };
    for at in ["00:01.0", "00:02.0"] {
        let v = device(&devices, at).virtio(&model).unwrap();
        assert_eq!(
            v,
            VirtioPci {
                common: region(0),
                notify: region(0x3000),
                notify_off_multiplier: 4,
                isr: region(0x1000),
                device: Some(region(0x2000)),
                pci_cfg: Some(Capability {
                    id: id::VENDOR_SPECIFIC,
                    offset: 0x84
                }),
            }
        );
        assert_eq!(v.notify_offset(1), Some(0x3004));
    }
    assert_eq!(
        device(&devices, "00:03.0").virtio(&model),
        Err(VirtioError::Missing {
            cfg_type: cfg_type::COMMON,
            ignored_bar: None
        })
    );
}

#[test]
fn q35_device_matches() {
    let (devices, _) = scan(&mut Model::q35());
    let selected = |text: &str| {
        let m: DeviceMatch = text.parse().unwrap();
        devices
            .iter()
            .filter(|d| m.matches(d))
            .map(|d| d.bdf.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(selected("1af4:1042"), ["00:01.0"]);
    assert_eq!(selected("1af4:1041@00:02.0"), ["00:02.0"]);
    assert!(selected("1af4:1042@00:02.0").is_empty());
    assert_eq!(selected("class=01"), ["00:01.0", "00:1f.2"]);
    assert_eq!(selected("class=01:00"), ["00:01.0"]);
    assert_eq!(selected("class=01:06:01@00:1f.2"), ["00:1f.2"]);
    assert_eq!(selected("class=03:80"), ["00:03.0"]);
    assert!(selected("class=03:00").is_empty());
}

#[test]
fn checked_accesses() {
    let model = Model::q35();
    let blk = bdf("00:01.0");
    assert_eq!(model.read_u16(blk, reg::DEVICE_ID), Ok(0x1042));
    assert_eq!(model.read_u8(blk, reg::CLASS), Ok(0x01));
    assert_eq!(model.read_u8(blk, reg::INTERRUPT_PIN), Ok(1));
    assert_eq!(model.read_u32(blk, 0), Ok(0x1042_1af4));
    assert_eq!(
        model.read_u16(blk, 3),
        Err(OffsetError::Misaligned {
            offset: 3,
            width: 2
        })
    );
    assert_eq!(
        model.read_u32(blk, 0x1000),
        Err(OffsetError::OutOfRange {
            offset: 0x1000,
            width: 4
        })
    );
    // Nothing answers: all ones.
    assert_eq!(model.read_u32(bdf("00:05.0"), 0), Ok(u32::MAX));
}

#[test]
fn command_writes_leave_status_alone() {
    let mut model = Model::q35();
    let sata = bdf("00:1f.2");
    let before = set_command(
        &mut model,
        sata,
        reg::COMMAND_BUS_MASTER | reg::COMMAND_INTX_DISABLE,
        0,
    );
    assert_eq!(before, 0);
    // Only the command half was written; the status half as zero, which
    // clears no write-one-to-clear bit.
    assert_eq!(model.writes, [(sata, reg::COMMAND, 0x0404)]);
    assert_eq!(model.read_u16(sata, reg::COMMAND), Ok(0x0404));
    assert_eq!(
        model.read_u16(sata, reg::STATUS),
        Ok(reg::STATUS_CAPABILITIES)
    );
    // Nothing to change: nothing written.
    set_command(&mut model, sata, reg::COMMAND_BUS_MASTER, 0);
    assert_eq!(model.writes.len(), 1);
}

#[test]
fn msix_enable_and_function_mask() {
    let mut model = Model::q35();
    let net = bdf("00:02.0");
    let (devices, _) = scan(&mut model);
    let msix = device(&devices, "00:02.0").msix.unwrap().unwrap();
    assert_eq!(
        msi::set_msix_control(&mut model, net, &msix, true, true),
        0xc003
    );
    let reread = msi::Msix::parse(&model, net, msix.cap).unwrap();
    assert!(reread.enabled() && reread.function_masked());
    assert_eq!(reread.table_size(), 4);
    assert_eq!(
        msi::set_msix_control(&mut model, net, &msix, true, false),
        0x8003
    );
    // The ID and next pointer are written back unchanged.
    assert_eq!(model.read_u16(net, 0x98), Ok(0x8411));
    // The x86 message for entry 0: vector 0x41 on the CPU with APIC ID 1.
    let entry = MsiMessage::x86(1, 0x41).unwrap().msix_entry(true);
    assert_eq!(entry, [0xfee0_1000, 0, 0x41, 1]);
    assert_eq!(msix.entry_offset(3), Some(0x30));
}

#[test]
fn msi_fallback_programming() {
    let mut model = Model::q35();
    let sata = bdf("00:1f.2");
    let (devices, _) = scan(&mut model);
    let msi = device(&devices, "00:1f.2").msi.unwrap().unwrap();
    let message = MsiMessage::x86(0, 0x50).unwrap();
    assert_eq!(
        msi::program_msi(&mut model, sata, &msi, message),
        Ok(0x0081)
    );
    assert_eq!(model.read_u32(sata, 0x84), Ok(0xfee0_0000));
    assert_eq!(model.read_u32(sata, 0x88), Ok(0));
    assert_eq!(model.read_u16(sata, 0x8c), Ok(0x50));
    assert!(msi::Msi::parse(&model, sata, msi.cap).unwrap().enabled());
    assert_eq!(msi::disable_msi(&mut model, sata, &msi), 0x0080);
    let high = MsiMessage {
        address: 0x1_0000_0000,
        data: 0,
    };
    let narrow = msi::Msi { control: 0, ..msi };
    assert_eq!(
        msi::program_msi(&mut model, sata, &narrow, high),
        Err(msi::MsiProgramError::AddressNeeds64Bits)
    );
}

#[test]
fn bridges_lead_to_their_buses() {
    let mut model = Model::q35();
    // A pcie-root-port at 00:1c.0 with a virtio-rng behind it, as qboot
    // numbers it.
    model.insert(
        bdf("00:1c.0"),
        Function::bridge(0x1b36, 0x000c, 0, 1, 1).memory32(0, 0x1000, false, 0),
    );
    model.insert(
        bdf("01:00.0"),
        Function::endpoint(0x1af4, 0x1044, [0xff, 0x00, 0x00], 1),
    );
    let (devices, skipped) = scan(&mut model);
    assert!(skipped.is_empty());
    let listed = listing(&devices);
    assert_eq!(listed[4], "00:1c.0 1b36:000c class 06:04:00");
    assert_eq!(listed.last().unwrap(), "01:00.0 1af4:1044 class ff:00:00");
    let port = device(&devices, "00:1c.0");
    assert_eq!(port.header.layout, Layout::PciBridge);
    assert_eq!(
        port.bridge,
        Some(BridgeBuses {
            primary: 0,
            secondary: 1,
            subordinate: 1
        })
    );
    assert_eq!(port.bars[0], mem(BarKind::Memory32, false, 0x1000));
    assert_eq!(port.bars[1..], [BarSlot::Unused; 5]);
    assert_eq!(port.subsystem, None);
    // An ECAM window of bus 0 only: bus 1 is out of reach.
    let (devices, skipped) = scan_range(&mut model, BusRange { first: 0, last: 0 });
    assert_eq!(devices.len(), 8);
    assert_eq!(
        skipped[0].reason,
        SkipReason::OutsideParent(BusRange { first: 0, last: 0 })
    );
    // A bridge the firmware did not number.
    model.insert(bdf("00:1c.0"), Function::bridge(0x1b36, 0x000c, 0, 0, 0));
    let (devices, skipped) = scan(&mut model);
    assert_eq!(devices.len(), 8);
    assert_eq!(skipped[0].reason, SkipReason::Unconfigured);
    assert_eq!(
        skipped[0].to_string(),
        "bridge 00:1c.0 (buses 00/00/00): bus 00 not scanned: bridge not configured"
    );
}

#[test]
fn bridge_loops_and_bad_bus_numbers_are_skipped() {
    let mut model = Model::new();
    let host = || Function::endpoint(0x8086, 0x29c0, [6, 0, 0], 0);
    model.insert(bdf("00:00.0"), host());
    // Two bridges claim bus 1; the second is skipped.
    model.insert(bdf("00:01.0"), Function::bridge(0x1b36, 0xc, 0, 1, 3));
    model.insert(bdf("00:02.0"), Function::bridge(0x1b36, 0xc, 0, 1, 1));
    // Behind bus 1: a bridge back to bus 0 (a loop), one to itself, one
    // beyond its parent's subordinate bus, one with subordinate < secondary,
    // and a good one to bus 2.
    model.insert(
        bdf("01:00.0"),
        Function::bridge(0x1b36, 0xc, 1, 0x00, 0x05).multifunction(),
    );
    model.insert(bdf("01:00.1"), Function::bridge(0x1b36, 0xc, 1, 0x01, 0x01));
    model.insert(bdf("01:00.2"), Function::bridge(0x1b36, 0xc, 1, 0x09, 0x09));
    model.insert(bdf("01:00.3"), Function::bridge(0x1b36, 0xc, 1, 0x03, 0x02));
    model.insert(bdf("01:00.4"), Function::bridge(0x1b36, 0xc, 1, 0x02, 0x02));
    // Bus 2 points back at bus 1, already scanned.
    model.insert(bdf("02:00.0"), Function::bridge(0x1b36, 0xc, 2, 0x01, 0x03));
    let (devices, skipped) = scan(&mut model);
    assert_eq!(devices.len(), 9);
    let reasons: Vec<(String, SkipReason)> = skipped
        .iter()
        .map(|s| (s.bridge.to_string(), s.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            ("00:02.0".to_string(), SkipReason::AlreadyClaimed),
            ("01:00.0".to_string(), SkipReason::Unconfigured),
            ("01:00.1".to_string(), SkipReason::NotBehindBridge),
            (
                "01:00.2".to_string(),
                SkipReason::OutsideParent(BusRange { first: 1, last: 3 })
            ),
            ("01:00.3".to_string(), SkipReason::SubordinateBelowSecondary),
            ("02:00.0".to_string(), SkipReason::NotBehindBridge),
        ]
    );
}

/// Every bus looks the same: a bridge at 00.0 whose secondary bus is one
/// above the bus asked about — the deepest chain there can be.
struct Staircase;

impl ConfigSpace for Staircase {
    fn read32(&self, at: Bdf, offset: u16) -> u32 {
        if at.device() != 0 || at.function() != 0 {
            return u32::MAX;
        }
        match offset {
            0x00 => 0x000c_1b36,
            0x08 => 0x0604_0000,
            0x0c => 0x0001_0000,
            0x18 => {
                let next = at.bus().wrapping_add(1);
                u32::from_le_bytes([at.bus(), next, 0xff, 0])
            }
            _ => 0,
        }
    }

    fn write32(&mut self, _: Bdf, _: u16, _: u32) {}
}

#[test]
fn the_deepest_bridge_chain_ends() {
    let mut count = 0;
    let mut skipped = Vec::new();
    enumerate(&mut Staircase, BusRange::ALL, |f| match f {
        Found::Device(_) => count += 1,
        Found::Skipped(s) => skipped.push(s),
    });
    assert_eq!(count, 256);
    // Bus 255's bridge names bus 0, which is not behind it.
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].reason, SkipReason::Unconfigured);
}

#[test]
fn absent_functions_are_no_devices() {
    let mut model = Model::new();
    // All-ones and all-zero vendor IDs, and a function 1 without function 0.
    model.insert(
        bdf("00:00.0"),
        Function::endpoint(0xffff, 0xffff, [0xff; 3], 0xff),
    );
    model.insert(
        bdf("00:01.0"),
        Function::endpoint(0x0000, 0x1234, [1, 0, 0], 0),
    );
    model.insert(
        bdf("00:02.1"),
        Function::endpoint(0x8086, 0x1234, [1, 0, 0], 0),
    );
    // Functions 1–7 of a device without the multi-function bit are ignored.
    model.insert(
        bdf("00:03.0"),
        Function::endpoint(0x8086, 0x1111, [1, 0, 0], 0),
    );
    model.insert(
        bdf("00:03.1"),
        Function::endpoint(0x8086, 0x2222, [1, 0, 0], 0),
    );
    let (devices, skipped) = scan(&mut model);
    assert_eq!(listing(&devices), ["00:03.0 8086:1111 class 01:00:00"]);
    assert!(skipped.is_empty());
}

#[test]
fn broken_bars_are_errors_in_their_slot_only() {
    let mut model = Model::new();
    let mut f = Function::endpoint(0x1234, 0x5678, [2, 0, 0], 0)
        .memory32(0, 0x1000, false, 0)
        .io(2, 0x20, 0xc000)
        // A 64-bit BAR in the last slot.
        .memory32(5, 0x1000, false, 0);
    // BAR 1: a size mask with a hole (not a power of two).
    f.set_wmask(0x14, 0xfff0_f000);
    // BAR 3: memory flags but no writable address bits.
    f.set32(0x1c, 0x8);
    f.set32(0x24, 0x4);
    model.insert(bdf("00:00.0"), f);
    let (devices, _) = scan(&mut model);
    let bars = devices[0].bars;
    assert_eq!(bars[0], mem(BarKind::Memory32, false, 0x1000));
    assert_eq!(
        bars[1],
        BarSlot::Invalid(BarError::SizeNotPowerOfTwo { mask: 0xfff0_f000 })
    );
    assert_eq!(
        bars[2],
        BarSlot::Bar(Bar {
            kind: BarKind::Io,
            prefetchable: false,
            address: 0xc000,
            size: 0x20
        })
    );
    assert_eq!(bars[3], BarSlot::Invalid(BarError::NoAddressBits));
    assert_eq!(bars[4], BarSlot::Unused);
    assert_eq!(bars[5], BarSlot::Invalid(BarError::Memory64InLastSlot));
}

/// A function with capabilities at the given offsets, each linking to the
/// next as listed (the last one's pointer is `last_next`).
fn cap_chain(offsets: &[u8], last_next: u8) -> Function {
    let mut f = Function::endpoint(0x1234, 0x5678, [2, 0, 0], 0);
    for &o in offsets {
        f = f.capability(o, id::VENDOR_SPECIFIC, &[]);
    }
    if let Some(&last) = offsets.last() {
        f.set_byte(u16::from(last) + 1, last_next);
    }
    f
}

fn walk(f: Function) -> cap::Capabilities {
    let mut model = Model::new();
    model.insert(bdf("00:00.0"), f);
    cap::read(&model, bdf("00:00.0"), Layout::Endpoint)
}

#[test]
fn capability_loops_and_bad_pointers_end_the_walk() {
    let caps = walk(cap_chain(&[0x40, 0x50], 0x40));
    assert_eq!(caps.as_slice().len(), 2);
    assert_eq!(
        caps.error(),
        Some(CapError::Loop {
            from: 0x51,
            pointer: 0x40
        })
    );
    let caps = walk(cap_chain(&[0x40], 0x40));
    assert_eq!(caps.as_slice().len(), 1);
    assert!(matches!(caps.error(), Some(CapError::Loop { .. })));
    let caps = walk(cap_chain(&[0x40, 0x50], 0x20));
    assert_eq!(
        caps.error(),
        Some(CapError::PointerIntoHeader {
            from: 0x51,
            pointer: 0x20
        })
    );
    let caps = walk(cap_chain(&[0x40], 0x45));
    assert_eq!(
        caps.error(),
        Some(CapError::Misaligned {
            from: 0x41,
            pointer: 0x45
        })
    );
    // The header's pointer itself.
    let mut f = cap_chain(&[], 0);
    f.set_byte(reg::CAPABILITIES_PTR, 0x3c);
    f.set32(reg::COMMAND, u32::from(reg::STATUS_CAPABILITIES) << 16);
    assert_eq!(
        walk(f).error(),
        Some(CapError::PointerIntoHeader {
            from: reg::CAPABILITIES_PTR,
            pointer: 0x3c
        })
    );
    // Without the status bit there is no list, whatever the pointer says.
    let mut f = cap_chain(&[0x40], 0);
    f.set32(reg::COMMAND, 0);
    assert!(walk(f).as_slice().is_empty());
}

#[test]
fn the_longest_capability_list() {
    let offsets: Vec<u8> = (0..MAX_CAPABILITIES as u8).map(|i| 0xfc - 4 * i).collect();
    let caps = walk(cap_chain(&offsets, 0));
    assert_eq!(caps.as_slice().len(), MAX_CAPABILITIES);
    assert_eq!(caps.error(), None);
    let caps = walk(cap_chain(&offsets, 0xfc));
    assert_eq!(caps.as_slice().len(), MAX_CAPABILITIES);
    assert!(matches!(caps.error(), Some(CapError::Loop { .. })));
}

#[test]
fn truncated_capabilities() {
    let mut model = Model::new();
    let at = bdf("00:00.0");
    // MSI-X at 0xf8 needs 12 bytes, 8 are left.
    model.insert(
        at,
        Function::endpoint(0x1234, 0x5678, [2, 0, 0], 0)
            .memory32(0, 0x1000, false, 0)
            .msix(0xf8, 4, 0, 0, 0x800),
    );
    let (devices, _) = scan(&mut model);
    assert_eq!(
        devices[0].msix,
        Some(Err(CapError::Truncated {
            id: id::MSIX,
            offset: 0xf8,
            len: 12
        }))
    );
    // MSI with per-vector masking at 0xf0 needs 0x18 bytes.
    model.insert(
        at,
        Function::endpoint(0x1234, 0x5678, [2, 0, 0], 0).msi(0xf0, 0x0180),
    );
    let (devices, _) = scan(&mut model);
    assert_eq!(
        devices[0].msi,
        Some(Err(CapError::Truncated {
            id: id::MSI,
            offset: 0xf0,
            len: 24
        }))
    );
    // A virtio capability at 0xfc, and one that says it is 8 bytes long.
    let virtio = |f: Function| {
        let mut model = Model::new();
        model.insert(at, f.memory64(4, 0x4000, true, 0));
        let (devices, _) = scan(&mut model);
        devices[0].virtio(&model)
    };
    let base = || Function::endpoint(0x1af4, 0x1042, [1, 0, 0], 1);
    assert_eq!(
        virtio(base().virtio_cap(0xfc, cfg_type::COMMON, 4, 0, 0x1000, None)),
        Err(VirtioError::Cap(CapError::Truncated {
            id: id::VENDOR_SPECIFIC,
            offset: 0xfc,
            len: 16
        }))
    );
    let mut f = base().virtio_cap(0x40, cfg_type::COMMON, 4, 0, 0x1000, None);
    f.set_byte(0x42, 8);
    assert_eq!(
        virtio(f),
        Err(VirtioError::CapTooShort {
            cfg_type: cfg_type::COMMON,
            cap_len: 8,
            needs: 16
        })
    );
}

#[test]
fn reserved_msix_bar_indicator() {
    let mut model = Model::new();
    model.insert(
        bdf("00:00.0"),
        Function::endpoint(0x1234, 0x5678, [2, 0, 0], 0).msix(0x40, 4, 6, 0, 0x800),
    );
    let (devices, _) = scan(&mut model);
    assert_eq!(
        devices[0].msix,
        Some(Err(CapError::Reserved {
            id: id::MSIX,
            offset: 0x40,
            field: "table BAR indicator",
            value: 6
        }))
    );
}

/// A virtio function with the given blocks (kind, bar, offset, length,
/// extra), BAR 4 of 16 KiB, parsed.
fn virtio_with(blocks: &[(u8, u8, u32, u32, Option<u32>)]) -> Result<VirtioPci, VirtioError> {
    let mut f = Function::endpoint(0x1af4, 0x1042, [1, 0, 0], 1).memory64(4, 0x4000, true, 0);
    for (i, &(kind, bar, offset, length, extra)) in blocks.iter().enumerate() {
        f = f.virtio_cap(0x40 + 0x14 * i as u8, kind, bar, offset, length, extra);
    }
    let mut model = Model::new();
    model.insert(bdf("00:00.0"), f);
    let (devices, _) = scan(&mut model);
    devices[0].virtio(&model)
}

#[test]
fn virtio_validation() {
    use cfg_type::{COMMON, ISR, NOTIFY};
    let good = [
        (COMMON, 4, 0, 0x1000, None),
        (ISR, 4, 0x1000, 0x1000, None),
        (NOTIFY, 4, 0x3000, 0x1000, Some(4)),
    ];
    let parsed = virtio_with(&good).unwrap();
    assert_eq!(parsed.device, None);
    assert_eq!(parsed.pci_cfg, None);
    // A reserved BAR value: ignored, as the specification demands; the
    // later capability of the same type is used instead.
    let mut with_reserved = vec![(COMMON, 7, 0, 0x1000, None)];
    with_reserved.extend_from_slice(&good);
    assert_eq!(virtio_with(&with_reserved), Ok(parsed));
    assert_eq!(
        virtio_with(&[(COMMON, 7, 0, 0x1000, None), good[1], good[2]]),
        Err(VirtioError::Missing {
            cfg_type: COMMON,
            ignored_bar: Some(7)
        })
    );
    assert_eq!(
        virtio_with(&[good[0], good[1]]),
        Err(VirtioError::Missing {
            cfg_type: NOTIFY,
            ignored_bar: None
        })
    );
    // Unknown cfg_types are ignored.
    let mut with_unknown = vec![
        (0x42, 4, 0, 0x1000, None),
        (cfg_type::SHARED_MEMORY, 4, 0, 0x1000, None),
    ];
    with_unknown.extend_from_slice(&good);
    assert_eq!(virtio_with(&with_unknown), Ok(parsed));
    // Past the BAR's end, in an unused BAR, in the upper half of BAR 4/5.
    assert_eq!(
        virtio_with(&[(COMMON, 4, 0x3800, 0x1000, None), good[1], good[2]]),
        Err(VirtioError::OutsideBar {
            cfg_type: COMMON,
            region: Region {
                bar: 4,
                offset: 0x3800,
                length: 0x1000
            },
            bar_size: 0x4000
        })
    );
    assert_eq!(
        virtio_with(&[(COMMON, 4, u32::MAX, 0x1000, None), good[1], good[2]]),
        Err(VirtioError::OutsideBar {
            cfg_type: COMMON,
            region: Region {
                bar: 4,
                offset: u32::MAX,
                length: 0x1000
            },
            bar_size: 0x4000
        })
    );
    assert_eq!(
        virtio_with(&[(COMMON, 2, 0, 0x1000, None), good[1], good[2]]),
        Err(VirtioError::BarNotUsable {
            cfg_type: COMMON,
            bar: 2
        })
    );
    assert_eq!(
        virtio_with(&[(COMMON, 5, 0, 0x1000, None), good[1], good[2]]),
        Err(VirtioError::BarNotUsable {
            cfg_type: COMMON,
            bar: 5
        })
    );
    // Blocks shorter than their registers, a bad multiplier.
    assert_eq!(
        virtio_with(&[(COMMON, 4, 0, 0x30, None), good[1], good[2]]),
        Err(VirtioError::BlockTooShort {
            cfg_type: COMMON,
            length: 0x30,
            needs: 0x38
        })
    );
    assert_eq!(
        virtio_with(&[good[0], good[1], (NOTIFY, 4, 0x3000, 0x1000, Some(3))]),
        Err(VirtioError::BadNotifyMultiplier(3))
    );
    assert_eq!(
        virtio_with(&[good[0], good[1], (NOTIFY, 4, 0x3000, 0x1000, Some(1))]),
        Err(VirtioError::BadNotifyMultiplier(1))
    );
    assert_eq!(
        virtio_with(&[good[0], good[1], (NOTIFY, 4, 0x3000, 0x1000, Some(0))])
            .map(|v| v.notify_off_multiplier),
        Ok(0)
    );
}

/// A random but structured function: valid-looking IDs, a random header
/// type (bridges with random bus numbers), random BAR masks and values,
/// capability pointers and bodies from a small pool of offsets, random
/// bytes elsewhere.
fn random_function(rng: &mut Rng) -> Function {
    let vendor = match rng.below(8) {
        0 => 0xffff,
        1 => 0x1af4,
        _ => rng.next() as u16,
    };
    let device = if vendor == 0x1af4 {
        0x1040 + rng.below(0x40) as u16
    } else {
        rng.next() as u16
    };
    let mut f = Function::endpoint(vendor, device, [rng.below(4) as u8, 0, 0], 0);
    // Random dwords across the legacy space, then structure on top.
    for offset in (0x08..0x100).step_by(4) {
        if rng.below(3) == 0 {
            f.set32(offset, rng.next() as u32);
        }
        if rng.below(4) == 0 {
            f.set_wmask(offset, rng.next() as u32);
        }
    }
    let header = match rng.below(6) {
        0 => reg::HEADER_PCI_BRIDGE,
        1 => rng.next() as u8,
        _ => reg::HEADER_ENDPOINT,
    } | if rng.below(2) == 0 {
        reg::HEADER_MULTIFUNCTION
    } else {
        0
    };
    f.set_byte(reg::HEADER_TYPE, header);
    if header & reg::HEADER_LAYOUT_MASK == reg::HEADER_PCI_BRIDGE {
        let bus = |rng: &mut Rng| {
            if rng.below(2) == 0 {
                rng.below(6) as u8
            } else {
                rng.next() as u8
            }
        };
        f.set32(
            reg::PRIMARY_BUS,
            u32::from_le_bytes([bus(rng), bus(rng), bus(rng), 0]),
        );
    }
    for i in 0..6 {
        if rng.below(2) == 0 {
            // A real-looking size mask, sometimes with a hole.
            let size_log2 = 4 + rng.below(28) as u32;
            let mut mask = !((1u32 << size_log2) - 1);
            if rng.below(4) == 0 {
                mask ^= 1 << (size_log2 + rng.below(u64::from(32 - size_log2)) as u32).min(31);
            }
            f.set_wmask(0x10 + 4 * i, mask & !0xf);
        }
    }
    if rng.below(4) != 0 {
        f.set32(
            reg::COMMAND,
            f.get32(reg::COMMAND) | u32::from(reg::STATUS_CAPABILITIES) << 16,
        );
        let pointer = |rng: &mut Rng| match rng.below(8) {
            0 => rng.next() as u8,
            1 => 0,
            _ => 0x40 + 4 * rng.below(48) as u8,
        };
        f.set_byte(reg::CAPABILITIES_PTR, pointer(rng));
        for _ in 0..rng.below(12) {
            let at = 0x40 + 4 * rng.below(48) as u16;
            let cap_id =
                [id::MSI, id::MSIX, id::VENDOR_SPECIFIC, id::PCI_EXPRESS][rng.below(4) as usize];
            f.set_byte(at, cap_id);
            f.set_byte(at + 1, pointer(rng));
            if cap_id == id::VENDOR_SPECIFIC {
                f.set_byte(at + 2, [16, 20, rng.next() as u8][rng.below(3) as usize]);
                f.set_byte(at + 3, rng.below(10) as u8);
                f.set_byte(at + 4, rng.below(8) as u8);
            }
        }
    }
    f
}

/// Everything the platform service would do with a device, to shake out
/// panics: virtio parsing, MSI-X pages, matching, formatting.
fn exercise(cs: &dyn ConfigSpace, d: &Device) {
    let _ = format!("{d} {:?}", d);
    if let Ok(v) = d.virtio(cs) {
        for q in 0..4 {
            let _ = v.notify_offset(q);
        }
    }
    if let Some(Ok(range)) = d.msix_table_pages() {
        assert!(
            range.start <= range.end
                && range.start.is_multiple_of(4096)
                && range.end.is_multiple_of(4096)
        );
        let size = d
            .bar(d.msix.unwrap().unwrap().table.bar.into())
            .unwrap()
            .size;
        for part in mappable_around(size, range).into_iter().flatten() {
            assert!(part.start < part.end && part.end <= size);
        }
    }
    for text in ["1af4:1042", "class=01:00", "class=02@00:00.0"] {
        let _ = text.parse::<DeviceMatch>().unwrap().matches(d);
    }
    for slot in d.bars {
        if let BarSlot::Bar(bar) = slot {
            assert!(bar.size.is_power_of_two() && bar.address % bar.size == 0);
            assert!(bar.address.checked_add(bar.size).is_some());
        }
    }
}

#[test]
fn random_config_spaces_never_panic_or_loop() {
    let mut rng = Rng(0x5eed_f0c1);
    let mut seen_devices = 0;
    for _ in 0..300 {
        let mut model = Model::new();
        for _ in 0..rng.below(24) {
            // Mostly bus 0 and function 0, so that most functions are reached.
            let bus = if rng.below(2) == 0 {
                0
            } else {
                rng.below(6) as u8
            };
            let function = if rng.below(2) == 0 {
                0
            } else {
                rng.below(8) as u8
            };
            let at = Bdf::new(bus, rng.below(32) as u8, function).unwrap();
            model.insert(at, random_function(&mut rng));
        }
        let (devices, _) = scan(&mut model);
        let mut bdfs: Vec<Bdf> = devices.iter().map(|d| d.bdf).collect();
        bdfs.sort();
        bdfs.dedup();
        assert_eq!(bdfs.len(), devices.len(), "a function listed twice");
        for d in &devices {
            exercise(&model, d);
        }
        seen_devices += devices.len();
    }
    // The generator reaches the code under test.
    assert!(seen_devices > 300, "{seen_devices}");
}

#[test]
fn mutated_q35_machines_never_panic() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let functions = [
        "00:00.0", "00:01.0", "00:02.0", "00:03.0", "00:1f.0", "00:1f.2", "00:1f.3",
    ]
    .map(bdf);
    let (mut virtio_ok, mut virtio_err, mut msix_pages) = (0, 0, 0);
    for _ in 0..500 {
        let mut model = Model::q35();
        for _ in 0..1 + rng.below(4) {
            let f = model
                .function_mut(functions[rng.below(7) as usize])
                .unwrap();
            // Mostly the capability area and the BARs, where the structure is.
            let offset = match rng.below(4) {
                0 => rng.below(0x40),
                1 => 0x10 + rng.below(0x18),
                _ => 0x40 + rng.below(0xc0),
            } as u16;
            match rng.below(3) {
                0 => f.set_byte(offset, rng.next() as u8),
                1 => f.set_byte(
                    offset,
                    f.get32(offset).to_le_bytes()[usize::from(offset % 4)] ^ 1 << rng.below(8),
                ),
                _ => f.set_wmask(offset & !3, rng.next() as u32),
            }
        }
        let (devices, _) = scan(&mut model);
        for d in &devices {
            exercise(&model, d);
            if d.vendor == 0x1af4 {
                match d.virtio(&model) {
                    Ok(_) => virtio_ok += 1,
                    Err(_) => virtio_err += 1,
                }
            }
            msix_pages += usize::from(matches!(d.msix_table_pages(), Some(Ok(_))));
        }
    }
    // The mutations reach both outcomes of the deep parsers.
    assert!(
        virtio_ok > 100 && virtio_err > 20,
        "{virtio_ok} {virtio_err}"
    );
    assert!(msix_pages > 100, "{msix_pages}");
}

/// A configuration space whose every read is random: nothing is stable,
/// not even between two reads of the same register.
struct Noise(Cell<u64>);

impl ConfigSpace for Noise {
    fn read32(&self, _: Bdf, offset: u16) -> u32 {
        assert!(offset.is_multiple_of(4) && offset < 4096);
        let mut rng = Rng(self.0.get());
        let value = rng.next();
        self.0.set(rng.0);
        value as u32
    }

    fn write32(&mut self, _: Bdf, offset: u16, _: u32) {
        assert!(offset.is_multiple_of(4) && offset < 4096);
    }
}

#[test]
fn noise_never_panics_or_loops() {
    for seed in 1..4u64 {
        let mut noise = Noise(Cell::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        let mut found = 0usize;
        enumerate(&mut noise, BusRange::ALL, |f| {
            found += 1;
            if let Found::Device(d) = f {
                assert!(d.capabilities.as_slice().len() <= MAX_CAPABILITIES);
                for slot in d.bars {
                    if let BarSlot::Bar(bar) = slot {
                        assert!(bar.size.is_power_of_two());
                    }
                }
            }
        });
        // At most every function of every bus, plus one skip per bridge.
        assert!(found <= 2 * 256 * 256, "{found}");
    }
}
