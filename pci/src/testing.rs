//! An in-memory configuration space ([`Model`]) for tests — this crate's
//! and, behind the `testing` feature, those of crates built on it — and
//! the machine Pecan's scenarios run on ([`Model::q35`]).
//!
//! # Register model
//!
//! As in QEMU, every dword of a function has a value and a write mask:
//! a write changes exactly the bits of the mask (`new = old & !mask |
//! value & mask`). A BAR of size `s` has the mask `!(s − 1)` without its
//! flag bits, so writing all ones reads back the size mask and the flags —
//! the sizing semantics real devices have. Functions that are not there
//! read as all ones and ignore writes, as under ECAM. The model records
//! every write ([`Model::writes`]) and counts BAR writes made while the
//! function decodes memory or I/O ([`Model::bar_writes_while_decoding`]),
//! so tests can check the sizing sequence.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::bar::bar_offset;
use crate::cap::id;
use crate::config::{reg, Bdf, ConfigSpace, CONFIG_SIZE};
use crate::virtio::cfg_type;

const DWORDS: usize = CONFIG_SIZE as usize / 4;

/// One function's registers.
#[derive(Clone)]
pub struct Function {
    value: Box<[u32; DWORDS]>,
    wmask: Box<[u32; DWORDS]>,
    /// Offset of the last capability added (0: none yet).
    last_cap: u8,
}

impl Function {
    /// An endpoint (header type 0) with these IDs, class code and revision;
    /// its command register and interrupt line are writable.
    pub fn endpoint(vendor: u16, device: u16, class: [u8; 3], revision: u8) -> Function {
        let mut f = Function {
            value: Box::new([0; DWORDS]),
            wmask: Box::new([0; DWORDS]),
            last_cap: 0,
        };
        f.set32(reg::VENDOR_ID, u32::from(device) << 16 | u32::from(vendor));
        f.set32(
            reg::REVISION,
            u32::from_be_bytes([class[0], class[1], class[2], revision]),
        );
        // IO, memory, bus master, parity, SERR, INTx disable (as QEMU).
        f.set_wmask(reg::COMMAND, 0x0547);
        f.set_wmask(reg::INTERRUPT_LINE, 0xff);
        f
    }

    /// A PCI-to-PCI bridge (header type 1, class 06:04:00) with these bus
    /// numbers, which stay writable.
    pub fn bridge(
        vendor: u16,
        device: u16,
        primary: u8,
        secondary: u8,
        subordinate: u8,
    ) -> Function {
        let mut f = Function::endpoint(vendor, device, [0x06, 0x04, 0x00], 0);
        f.set_byte(reg::HEADER_TYPE, reg::HEADER_PCI_BRIDGE);
        f.set32(
            reg::PRIMARY_BUS,
            u32::from_le_bytes([primary, secondary, subordinate, 0]),
        );
        f.set_wmask(reg::PRIMARY_BUS, 0x00ff_ffff);
        f
    }

    /// Sets the multi-function bit of the header type.
    pub fn multifunction(mut self) -> Function {
        let header = self.byte(reg::HEADER_TYPE);
        self.set_byte(reg::HEADER_TYPE, header | reg::HEADER_MULTIFUNCTION);
        self
    }

    pub fn subsystem(mut self, vendor: u16, device: u16) -> Function {
        self.set32(
            reg::SUBSYSTEM_VENDOR_ID,
            u32::from(device) << 16 | u32::from(vendor),
        );
        self
    }

    /// The interrupt line the firmware wrote and the INTx pin (1 = INTA).
    pub fn interrupt(mut self, line: u8, pin: u8) -> Function {
        self.set_byte(reg::INTERRUPT_LINE, line);
        self.set_byte(reg::INTERRUPT_PIN, pin);
        self
    }

    /// BAR `index`: 32-bit memory of `size` bytes (a power of two ≥ 16) at
    /// `address`.
    pub fn memory32(
        mut self,
        index: usize,
        size: u32,
        prefetchable: bool,
        address: u32,
    ) -> Function {
        let flags = if prefetchable { 0x8 } else { 0 };
        self.set32(bar_offset(index), address | flags);
        self.set_wmask(bar_offset(index), !(size - 1) & !0xf);
        self
    }

    /// BARs `index` and `index + 1`: 64-bit memory of `size` bytes at
    /// `address`.
    pub fn memory64(
        mut self,
        index: usize,
        size: u64,
        prefetchable: bool,
        address: u64,
    ) -> Function {
        let flags = 0x4 | if prefetchable { 0x8 } else { 0 };
        let mask = !(size - 1);
        self.set32(bar_offset(index), address as u32 | flags);
        self.set_wmask(bar_offset(index), mask as u32 & !0xf);
        self.set32(bar_offset(index + 1), (address >> 32) as u32);
        self.set_wmask(bar_offset(index + 1), (mask >> 32) as u32);
        self
    }

    /// BAR `index`: `size` I/O ports (a power of two ≥ 4) at `port`.
    pub fn io(mut self, index: usize, size: u32, port: u32) -> Function {
        self.set32(bar_offset(index), port | 1);
        self.set_wmask(bar_offset(index), !(size - 1) & !0x3);
        self
    }

    /// The expansion ROM BAR (not decoded by the crate; QEMU has one on
    /// some devices, and sizing must leave it alone).
    pub fn rom(mut self, size: u32) -> Function {
        self.set_wmask(reg::EXPANSION_ROM, !(size - 1) | 1);
        self
    }

    /// Appends a capability at `offset` (4-aligned, ≥ 0x40): ID `id`, body
    /// bytes `body` from offset +2 on; links it at the end of the list and
    /// sets the status register's capability bit.
    pub fn capability(mut self, offset: u8, cap_id: u8, body: &[u8]) -> Function {
        let pointer_register = if self.last_cap == 0 {
            reg::CAPABILITIES_PTR
        } else {
            u16::from(self.last_cap) + 1
        };
        self.set_byte(pointer_register, offset);
        self.set_byte(u16::from(offset), cap_id);
        self.set_byte(u16::from(offset) + 1, 0);
        for (i, b) in body.iter().enumerate() {
            self.set_byte(u16::from(offset) + 2 + i as u16, *b);
        }
        self.last_cap = offset;
        let status = self.value[usize::from(reg::COMMAND / 4)];
        self.set32(
            reg::COMMAND,
            status | u32::from(reg::STATUS_CAPABILITIES) << 16,
        );
        self
    }

    /// An MSI-X capability at `offset` with `entries` table entries; table
    /// and PBA in BAR `bar` at the given offsets.
    pub fn msix(self, offset: u8, entries: u16, bar: u8, table: u32, pba: u32) -> Function {
        let mut body = [0u8; 10];
        body[0..2].copy_from_slice(&(entries - 1).to_le_bytes());
        body[2..6].copy_from_slice(&(table | u32::from(bar)).to_le_bytes());
        body[6..10].copy_from_slice(&(pba | u32::from(bar)).to_le_bytes());
        let mut f = self.capability(offset, id::MSIX, &body);
        // Enable and function mask are writable.
        f.set_wmask(u16::from(offset), 0xc000_0000);
        f
    }

    /// An MSI capability at `offset` with message control `control`;
    /// enable and multiple-message-enable, address and data are writable.
    pub fn msi(self, offset: u8, control: u16) -> Function {
        let mut f = self.capability(offset, id::MSI, &control.to_le_bytes());
        f.set_wmask(u16::from(offset), 0x0071_0000);
        f.set_wmask(u16::from(offset) + 4, 0xffff_fffc);
        let is_64bit = control & crate::msi::MSI_64BIT != 0;
        if is_64bit {
            f.set_wmask(u16::from(offset) + 8, u32::MAX);
        }
        f.set_wmask(u16::from(offset) + if is_64bit { 12 } else { 8 }, 0xffff);
        f
    }

    /// A virtio capability (`virtio_pci_cap`) of `kind` for the block at
    /// `offset`/`length` of BAR `bar`; `extra` is the notify multiplier (or
    /// the PCI-cfg data dword) of the 20-byte forms.
    pub fn virtio_cap(
        self,
        at: u8,
        kind: u8,
        bar: u8,
        offset: u32,
        length: u32,
        extra: Option<u32>,
    ) -> Function {
        let len: u8 = if extra.is_some() { 20 } else { 16 };
        let mut body = [0u8; 18];
        body[0] = len;
        body[1] = kind;
        body[2] = bar;
        body[6..10].copy_from_slice(&offset.to_le_bytes());
        body[10..14].copy_from_slice(&length.to_le_bytes());
        body[14..18].copy_from_slice(&extra.unwrap_or(0).to_le_bytes());
        self.capability(at, id::VENDOR_SPECIFIC, &body[..usize::from(len) - 2])
    }

    /// Sets a dword's value (any offset; rounded down to the dword).
    pub fn set32(&mut self, offset: u16, value: u32) {
        self.value[usize::from(offset / 4) % DWORDS] = value;
    }

    /// Sets a byte's value.
    pub fn set_byte(&mut self, offset: u16, value: u8) {
        let slot = &mut self.value[usize::from(offset / 4) % DWORDS];
        let shift = (offset % 4) * 8;
        *slot = *slot & !(0xff << shift) | u32::from(value) << shift;
    }

    /// Sets the write mask of the dword containing `offset`, shifted to the
    /// byte `offset` names.
    pub fn set_wmask(&mut self, offset: u16, mask: u32) {
        self.wmask[usize::from(offset / 4) % DWORDS] = mask << ((offset % 4) * 8);
    }

    /// A dword's current value.
    pub fn get32(&self, offset: u16) -> u32 {
        self.value[usize::from(offset / 4) % DWORDS]
    }

    fn byte(&self, offset: u16) -> u8 {
        (self.get32(offset) >> ((offset % 4) * 8)) as u8
    }
}

/// A configuration space of functions kept in memory (module docs).
#[derive(Clone, Default)]
pub struct Model {
    functions: BTreeMap<Bdf, Function>,
    /// Every write, in order: function, offset, value written.
    pub writes: Vec<(Bdf, u16, u32)>,
    /// BAR writes made while the function had I/O or memory decoding on.
    pub bar_writes_while_decoding: usize,
}

impl Model {
    pub fn new() -> Model {
        Model::default()
    }

    /// Adds (or replaces) the function at `at`.
    pub fn insert(&mut self, at: Bdf, function: Function) {
        self.functions.insert(at, function);
    }

    pub fn function_mut(&mut self, at: Bdf) -> Option<&mut Function> {
        self.functions.get_mut(&at)
    }

    pub fn function(&self, at: Bdf) -> Option<&Function> {
        self.functions.get(&at)
    }

    /// The machine Pecan's device scenarios boot: QEMU 7.2's q35 with
    /// `-vga none -nic none` and `-device virtio-blk-pci,disable-legacy=on`,
    /// `-device virtio-net-pci,disable-legacy=on`, `-device bochs-display`,
    /// in that order, as qboot leaves it (bus numbers and interrupt lines
    /// set, BARs unassigned). Values transcribed from the machine's ECAM
    /// window read through the QEMU monitor.
    pub fn q35() -> Model {
        let mut m = Model::new();
        let at = |d, f| Bdf::new(0, d, f).unwrap_or_else(|| unreachable!());
        let qemu = |f: Function| f.subsystem(0x1af4, 0x1100);
        m.insert(
            at(0, 0),
            qemu(Function::endpoint(0x8086, 0x29c0, [0x06, 0x00, 0x00], 0)),
        );
        m.insert(
            at(1, 0),
            virtio(
                qemu(Function::endpoint(0x1af4, 0x1042, [0x01, 0x00, 0x00], 1)),
                2,
            ),
        );
        m.insert(
            at(2, 0),
            virtio(
                qemu(Function::endpoint(0x1af4, 0x1041, [0x02, 0x00, 0x00], 1)),
                4,
            )
            .rom(0x4_0000),
        );
        m.insert(
            at(3, 0),
            qemu(Function::endpoint(0x1234, 0x1111, [0x03, 0x80, 0x00], 2))
                .memory32(0, 0x100_0000, true, 0)
                .memory32(2, 0x1000, false, 0)
                .rom(0x8000)
                // PCI Express capability, version 2, root-complex
                // integrated endpoint (QEMU adds it on pcie.0).
                .capability(0x80, id::PCI_EXPRESS, &[0x92, 0x00]),
        );
        m.insert(
            at(31, 0),
            qemu(Function::endpoint(0x8086, 0x2918, [0x06, 0x01, 0x00], 2)).multifunction(),
        );
        m.insert(
            at(31, 2),
            qemu(Function::endpoint(0x8086, 0x2922, [0x01, 0x06, 0x01], 2))
                .multifunction()
                .interrupt(10, 1)
                .io(4, 0x20, 0)
                .memory32(5, 0x1000, false, 0)
                // MSI: 64-bit address, one vector.
                .msi(0x80, 0x0080)
                .capability(0xa8, id::SATA, &[0x10, 0x00, 0x48, 0x00, 0x00, 0x00]),
        );
        m.insert(
            at(31, 3),
            qemu(Function::endpoint(0x8086, 0x2930, [0x0c, 0x05, 0x00], 2))
                .multifunction()
                .interrupt(10, 1)
                .io(4, 0x40, 0),
        );
        m
    }
}

/// A modern virtio function as QEMU builds it: MSI-X with `vectors`
/// entries (table at 0, PBA at 0x800 of the 4 KiB BAR 1), and the virtio
/// blocks in the 16 KiB BAR 4, common/ISR/device/notify 4 KiB each, notify
/// multiplier 4. Capability list order as QEMU links it.
fn virtio(f: Function, vectors: u16) -> Function {
    f.interrupt(11, 1)
        .memory32(1, 0x1000, false, 0)
        .memory64(4, 0x4000, true, 0)
        .msix(0x98, vectors, 1, 0, 0x800)
        .virtio_cap(0x84, cfg_type::PCI_CFG, 0, 0, 0, Some(0))
        .virtio_cap(0x70, cfg_type::NOTIFY, 4, 0x3000, 0x1000, Some(4))
        .virtio_cap(0x60, cfg_type::DEVICE, 4, 0x2000, 0x1000, None)
        .virtio_cap(0x50, cfg_type::ISR, 4, 0x1000, 0x1000, None)
        .virtio_cap(0x40, cfg_type::COMMON, 4, 0, 0x1000, None)
}

impl ConfigSpace for Model {
    fn read32(&self, at: Bdf, offset: u16) -> u32 {
        self.functions
            .get(&at)
            .map_or(u32::MAX, |f| f.get32(offset))
    }

    fn write32(&mut self, at: Bdf, offset: u16, value: u32) {
        self.writes.push((at, offset, value));
        let Some(f) = self.functions.get_mut(&at) else {
            return;
        };
        let layout = f.byte(reg::HEADER_TYPE) & reg::HEADER_LAYOUT_MASK;
        let bars = match layout {
            reg::HEADER_ENDPOINT => reg::ENDPOINT_BARS,
            reg::HEADER_PCI_BRIDGE => reg::BRIDGE_BARS,
            _ => 0,
        };
        let decoding = f.get32(reg::COMMAND) as u16 & (reg::COMMAND_IO | reg::COMMAND_MEMORY) != 0;
        if decoding && (reg::BAR0..bar_offset(usize::from(bars))).contains(&offset) {
            self.bar_writes_while_decoding += 1;
        }
        let slot = usize::from(offset / 4) % DWORDS;
        let mask = f.wmask[slot];
        f.value[slot] = f.value[slot] & !mask | value & mask;
    }
}
