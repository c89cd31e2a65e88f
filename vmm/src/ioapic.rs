//! An I/O APIC (82093AA-style, version 0x20 with the EOI register) with
//! 24 pins at guest-physical [`BASE`]: the chip the MADT names, so
//! that Linux routes the ISA and PCI interrupts through it instead of the
//! 8259s in virtual-wire mode. Its MMIO page has IOREGSEL (0x00), IOWIN
//! (0x10) and EOI (0x40); through the window are the ID (0x00), version
//! (0x01), arbitration ID (0x02) and the redirection entries (0x10 + 2n,
//! low then high half).
//!
//! Pins take the wire's electrical level ([`IoApic::set_irq`]); the
//! entry's polarity says which level is asserted, so an active-low PCI
//! line idles high and is asserted low, as the ACPI tables say it is.
//! An edge-triggered pin latches a request on its asserting edge while
//! unmasked (the 82093AA ignores edges on a masked pin: Linux unmasking
//! the PIT's pin gets no stale tick); a level-triggered one requests
//! while asserted and its Remote IRR is clear, masked or not, and its
//! delivery — once unmasked — sets Remote IRR until the local APIC's EOI
//! of its vector ([`IoApic::eoi`]); then, still asserted, it requests
//! again.
//!
//! The VMM has one CPU: fixed and lowest-priority delivery both go to it
//! when the destination names it (physical x2APIC ID 0 or broadcast,
//! logical: any set bit). SMI, NMI, INIT and ExtINT entries deliver
//! nothing (Linux programs none of them when its timer check passes).
//! [`IoApic::take`] hands out what to deliver; the VMM raises it in the
//! local APIC, level-triggered vectors so that the APIC's EOI comes back.
//!
//! Invariant: every guest input — any register index, any value, any
//! access size or offset — is answered without a panic: reserved
//! registers read 0 and ignore writes, read-only bits keep their value.

/// The MMIO page's guest-physical address (the PC's).
pub const BASE: u64 = 0xfec0_0000;
/// Its size: one page.
pub const SIZE: u64 = 0x1000;
/// Pins (global system interrupts 0..24).
pub const PINS: u8 = 24;
/// Version 0x20 (it has the EOI register), highest entry 23.
const VERSION: u32 = (PINS as u32 - 1) << 16 | 0x20;

const IOREGSEL: u64 = 0x00;
const IOWIN: u64 = 0x10;
const EOI: u64 = 0x40;

const REG_ID: u8 = 0x00;
const REG_VERSION: u8 = 0x01;
const REG_ARBITRATION: u8 = 0x02;
const REG_REDIRECTION: u8 = 0x10;
/// The redirection entries' registers, two per pin.
const REDIRECTION: core::ops::Range<u8> = REG_REDIRECTION..REG_REDIRECTION + 2 * PINS;

/// Redirection entry bits.
const DELIVERY_MODE: u64 = 7 << 8;
const DEST_LOGICAL: u64 = 1 << 11;
const DELIVERY_STATUS: u64 = 1 << 12;
const POLARITY_LOW: u64 = 1 << 13;
const REMOTE_IRR: u64 = 1 << 14;
const LEVEL: u64 = 1 << 15;
const MASKED: u64 = 1 << 16;
/// What the guest may write: vector, delivery and destination mode,
/// polarity, trigger mode, mask, destination (bits 56..63). Delivery
/// status and Remote IRR are the chip's.
const WRITABLE: u64 =
    0xff | DELIVERY_MODE | DEST_LOGICAL | POLARITY_LOW | LEVEL | MASKED | 0xff << 56;

/// A vector for the local APIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub vector: u8,
    /// Level-triggered: the local APIC's EOI of it goes to [`IoApic::eoi`].
    pub level: bool,
}

/// The I/O APIC.
#[derive(Clone, Debug)]
pub struct IoApic {
    /// The ID register (bits 24..27 hold the ID).
    id: u32,
    select: u8,
    entries: [u64; PINS as usize],
    /// The pins' electrical levels (bit n: pin n high).
    wires: u32,
    /// Edge-triggered requests latched and not yet delivered (cleared
    /// when the entry is masked or turns level).
    latched: u32,
    /// Something changed since [`IoApic::take`] last found nothing: the
    /// VMM calls it before every run, and most runs change nothing.
    dirty: bool,
}

fn bit(pin: u8) -> u32 {
    1 << pin
}

impl IoApic {
    /// The chip after reset, with I/O APIC ID `id`: every entry masked,
    /// edge-triggered, active high, vector 0; all wires low.
    pub fn new(id: u8) -> IoApic {
        IoApic {
            id: u32::from(id & 0xf) << 24,
            select: 0,
            entries: [MASKED; PINS as usize],
            wires: 0,
            latched: 0,
            dirty: false,
        }
    }

    /// Whether guest-physical `gpa` is in the MMIO page.
    pub fn owns(gpa: u64) -> bool {
        (BASE..BASE + SIZE).contains(&gpa)
    }

    fn asserted(&self, pin: u8) -> bool {
        let high = self.wires & bit(pin) != 0;
        high != (self.entries[usize::from(pin)] & POLARITY_LOW != 0)
    }

    /// Sets the wire of `pin` high or low (a pin past the last is
    /// ignored: no device is wired there).
    pub fn set_irq(&mut self, pin: u8, high: bool) {
        if pin >= PINS {
            return;
        }
        if (self.wires & bit(pin) != 0) == high {
            return;
        }
        self.dirty = true;
        let was = self.asserted(pin);
        if high {
            self.wires |= bit(pin);
        } else {
            self.wires &= !bit(pin);
        }
        let entry = self.entries[usize::from(pin)];
        if entry & (LEVEL | MASKED) == 0 && !was && self.asserted(pin) {
            self.latched |= bit(pin);
        }
    }

    /// Whether `pin` has a request not yet delivered (the delivery status
    /// the guest reads; a masked level pin's too).
    fn requesting(&self, pin: u8) -> bool {
        let entry = self.entries[usize::from(pin)];
        if entry & LEVEL != 0 {
            entry & REMOTE_IRR == 0 && self.asserted(pin)
        } else {
            self.latched & bit(pin) != 0
        }
    }

    /// Whether `entry` reaches the one CPU (x2APIC ID 0) as an interrupt.
    fn delivers(entry: u64) -> bool {
        let mode = (entry & DELIVERY_MODE) >> 8;
        let dest = (entry >> 56) as u8;
        let to_us = if entry & DEST_LOGICAL != 0 {
            dest != 0
        } else {
            dest == 0 || dest == 0xff
        };
        entry & MASKED == 0 && (mode == 0 || mode == 1) && to_us
    }

    /// The next vector to deliver, if a pin requests one: an edge pin's
    /// latch is cleared, a level pin's Remote IRR set. Call until `None`.
    pub fn take(&mut self) -> Option<Delivery> {
        if !self.dirty {
            return None;
        }
        let found = (0..PINS).find(|&p| {
            let entry = self.entries[usize::from(p)];
            // A request to nowhere (no CPU, or a mode not modelled) is
            // dropped, as the chip's message would be.
            if self.requesting(p) && entry & MASKED == 0 && !Self::delivers(entry) {
                self.latched &= !bit(p);
                return false;
            }
            self.requesting(p) && Self::delivers(entry)
        });
        let Some(pin) = found else {
            self.dirty = false;
            return None;
        };
        let entry = &mut self.entries[usize::from(pin)];
        let level = *entry & LEVEL != 0;
        if level {
            *entry |= REMOTE_IRR;
        } else {
            self.latched &= !bit(pin);
        }
        Some(Delivery {
            vector: *entry as u8,
            level,
        })
    }

    /// The local APIC ended level-triggered `vector` (its EOI broadcast,
    /// or a write to the EOI register): Remote IRR of the level entries
    /// with that vector is cleared, and a pin still asserted requests
    /// again at the next [`IoApic::take`].
    pub fn eoi(&mut self, vector: u8) {
        for entry in &mut self.entries {
            if *entry as u8 == vector && *entry & (LEVEL | REMOTE_IRR) == LEVEL | REMOTE_IRR {
                *entry &= !REMOTE_IRR;
                self.dirty = true;
            }
        }
    }

    fn register(&self, index: u8) -> u32 {
        match index {
            REG_ID | REG_ARBITRATION => self.id,
            REG_VERSION => VERSION,
            i if REDIRECTION.contains(&i) => {
                let pin = (i - REG_REDIRECTION) / 2;
                let mut entry = self.entries[usize::from(pin)];
                if self.requesting(pin) {
                    entry |= DELIVERY_STATUS;
                }
                (entry >> (32 * u32::from(i & 1))) as u32
            }
            _ => 0,
        }
    }

    fn set_register(&mut self, index: u8, v: u32) {
        self.dirty = true;
        match index {
            REG_ID => self.id = v & 0x0f00_0000,
            i if REDIRECTION.contains(&i) => {
                let pin = (i - REG_REDIRECTION) / 2;
                let entry = &mut self.entries[usize::from(pin)];
                let shift = 32 * u32::from(i & 1);
                let written = *entry & !(0xffff_ffff << shift) | u64::from(v) << shift;
                *entry = *entry & !WRITABLE | written & WRITABLE;
                // Remote IRR means nothing to an edge entry; a stale one
                // would block the pin if it turned level again.
                if *entry & LEVEL == 0 {
                    *entry &= !REMOTE_IRR;
                }
                if *entry & (LEVEL | MASKED) != 0 {
                    self.latched &= !bit(pin);
                }
            }
            // Version, arbitration ID and the rest: read-only or reserved.
            _ => {}
        }
    }

    /// A read of `size` bytes at `offset` in the MMIO page. The registers
    /// are 32 bits wide; a narrower read gets the bytes it covers, an
    /// access elsewhere 0.
    pub fn read(&self, offset: u64, size: u8) -> u64 {
        let (reg, at) = match offset {
            o if (IOREGSEL..IOREGSEL + 4).contains(&o) => (u32::from(self.select), o - IOREGSEL),
            o if (IOWIN..IOWIN + 4).contains(&o) => (self.register(self.select), o - IOWIN),
            _ => return 0,
        };
        let v = u64::from(reg) >> (8 * at);
        if size >= 8 {
            v
        } else {
            v & ((1u64 << (8 * size)) - 1)
        }
    }

    /// A write of `size` bytes of `value` at `offset`. IOREGSEL takes its
    /// low byte from any write that covers it; the window and the EOI
    /// register only whole 32-bit (or wider, low half) writes, as the chip
    /// wants them — anything else is ignored.
    pub fn write(&mut self, offset: u64, size: u8, value: u64) {
        match offset {
            IOREGSEL => self.select = value as u8,
            IOWIN if size >= 4 => self.set_register(self.select, value as u32),
            EOI if size >= 4 => self.eoi(value as u8),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes entry `pin` through the window, high half first (as Linux).
    fn program(a: &mut IoApic, pin: u8, entry: u64) {
        a.write(IOREGSEL, 4, u64::from(REG_REDIRECTION + 2 * pin + 1));
        a.write(IOWIN, 4, entry >> 32);
        a.write(IOREGSEL, 4, u64::from(REG_REDIRECTION + 2 * pin));
        a.write(IOWIN, 4, entry & 0xffff_ffff);
    }

    fn entry(a: &mut IoApic, pin: u8) -> u64 {
        a.write(IOREGSEL, 4, u64::from(REG_REDIRECTION + 2 * pin));
        let low = a.read(IOWIN, 4);
        a.write(IOREGSEL, 4, u64::from(REG_REDIRECTION + 2 * pin + 1));
        low | a.read(IOWIN, 4) << 32
    }

    fn reg(a: &mut IoApic, index: u8) -> u64 {
        a.write(IOREGSEL, 1, u64::from(index));
        a.read(IOWIN, 4)
    }

    #[test]
    fn identification_registers() {
        let mut a = IoApic::new(2);
        assert_eq!(reg(&mut a, REG_ID), 2 << 24);
        assert_eq!(reg(&mut a, REG_VERSION), 0x0017_0020);
        assert_eq!(reg(&mut a, REG_ARBITRATION), 2 << 24);
        a.write(IOWIN, 4, 0xffff_ffff); // arbitration ID: read-only
        assert_eq!(reg(&mut a, REG_ID), 2 << 24);
        a.write(IOREGSEL, 4, u64::from(REG_ID));
        a.write(IOWIN, 4, 0xffff_ffff);
        assert_eq!(reg(&mut a, REG_ID), 0x0f00_0000, "only the ID bits");
        a.write(IOREGSEL, 4, u64::from(REG_VERSION));
        a.write(IOWIN, 4, 0);
        assert_eq!(reg(&mut a, REG_VERSION), 0x0017_0020);
        assert_eq!(a.read(IOREGSEL, 4), u64::from(REG_VERSION));
    }

    #[test]
    fn entries_read_back_without_the_chips_bits() {
        let mut a = IoApic::new(0);
        assert_eq!(entry(&mut a, 5), MASKED, "reset: masked");
        a.set_irq(5, true); // not asserted once active low
        program(&mut a, 5, u64::MAX);
        assert_eq!(entry(&mut a, 5), WRITABLE);
        program(&mut a, 5, 0xab << 56 | LEVEL | POLARITY_LOW | 0x31);
        assert_eq!(entry(&mut a, 5), 0xab << 56 | LEVEL | POLARITY_LOW | 0x31);
        // Byte reads get the covered bytes.
        a.write(IOREGSEL, 4, u64::from(REG_REDIRECTION + 10));
        assert_eq!(a.read(IOWIN, 1), 0x31);
        assert_eq!(a.read(IOWIN + 1, 1), (LEVEL | POLARITY_LOW) >> 8);
        // A narrow window write is ignored.
        a.write(IOWIN, 1, 0x99);
        assert_eq!(entry(&mut a, 5) as u8, 0x31);
    }

    #[test]
    fn edge_pin_delivers_on_its_rising_edge() {
        let mut a = IoApic::new(0);
        program(&mut a, 2, 0x30);
        assert_eq!(a.take(), None);
        a.set_irq(2, true);
        assert_eq!(
            a.take(),
            Some(Delivery {
                vector: 0x30,
                level: false
            })
        );
        assert_eq!(a.take(), None, "once per edge");
        a.set_irq(2, true);
        assert_eq!(a.take(), None, "still high: no edge");
        a.set_irq(2, false);
        a.set_irq(2, true);
        a.set_irq(2, false);
        assert_eq!(a.take().map(|d| d.vector), Some(0x30));
        assert_eq!(a.take(), None);
    }

    #[test]
    fn masked_edges_are_lost() {
        let mut a = IoApic::new(0);
        program(&mut a, 4, MASKED | 0x34);
        a.set_irq(4, true);
        assert_eq!(entry(&mut a, 4) & DELIVERY_STATUS, 0);
        program(&mut a, 4, 0x34);
        assert_eq!(a.take(), None, "no stale request at the unmask");
        a.set_irq(4, false);
        a.set_irq(4, true);
        assert_ne!(entry(&mut a, 4) & DELIVERY_STATUS, 0, "pending");
        // Masked before it was taken: gone too.
        program(&mut a, 4, MASKED | 0x34);
        program(&mut a, 4, 0x34);
        assert_eq!(a.take(), None);
        a.set_irq(4, false);
        a.set_irq(4, true);
        assert_eq!(a.take().map(|d| d.vector), Some(0x34));
        assert_eq!(entry(&mut a, 4) & DELIVERY_STATUS, 0);
    }

    #[test]
    fn level_pin_delivers_again_after_eoi_while_asserted() {
        let mut a = IoApic::new(0);
        // Active low, as Linux programs a PCI line: the wire idles high.
        a.set_irq(10, true);
        program(&mut a, 10, LEVEL | POLARITY_LOW | 0x41);
        assert_eq!(a.take(), None, "idle");
        a.set_irq(10, false);
        let level = Some(Delivery {
            vector: 0x41,
            level: true,
        });
        assert_eq!(a.take(), level);
        assert_ne!(entry(&mut a, 10) & REMOTE_IRR, 0);
        assert_eq!(a.take(), None, "Remote IRR holds it");
        a.eoi(0x42);
        assert_eq!(a.take(), None, "another vector's EOI");
        a.eoi(0x41);
        assert_eq!(a.take(), level, "still asserted");
        a.set_irq(10, true); // the driver handled it
        a.eoi(0x41);
        assert_eq!(a.take(), None);
        assert_eq!(entry(&mut a, 10) & (REMOTE_IRR | DELIVERY_STATUS), 0);
        // The EOI register does what the broadcast does.
        a.set_irq(10, false);
        assert_eq!(a.take(), level);
        a.write(EOI, 4, 0x41);
        assert_eq!(a.take(), level);
    }

    #[test]
    fn mask_and_unmask_while_asserted() {
        let mut a = IoApic::new(0);
        program(&mut a, 11, LEVEL | MASKED | 0x51);
        a.set_irq(11, true);
        assert_eq!(a.take(), None, "masked");
        program(&mut a, 11, LEVEL | 0x51);
        assert_eq!(a.take().map(|d| d.vector), Some(0x51));
        program(&mut a, 11, LEVEL | MASKED | 0x51);
        a.eoi(0x51);
        assert_eq!(a.take(), None, "masked again");
        program(&mut a, 11, LEVEL | 0x51);
        assert_eq!(a.take().map(|d| d.vector), Some(0x51));
        // Turned edge, Remote IRR goes; no edge, no request.
        program(&mut a, 11, 0x51);
        assert_eq!(entry(&mut a, 11) & REMOTE_IRR, 0);
        assert_eq!(a.take(), None);
    }

    #[test]
    fn other_destinations_and_modes_deliver_nothing() {
        let mut a = IoApic::new(0);
        program(&mut a, 1, 1 << 56 | 0x31); // physical APIC 1: absent
        program(&mut a, 3, 7 << 8 | 0x33); // ExtINT
        program(&mut a, 5, DEST_LOGICAL | 1 << 56 | 0x35); // logical, ours
        program(&mut a, 6, 0xff << 56 | 1 << 8 | 0x36); // broadcast, lowest priority
        for pin in [1, 3, 5, 6] {
            a.set_irq(pin, true);
        }
        assert_eq!(a.take().map(|d| d.vector), Some(0x35));
        assert_eq!(a.take().map(|d| d.vector), Some(0x36));
        assert_eq!(a.take(), None);
        program(&mut a, 1, 0x31);
        assert_eq!(a.take(), None, "the request to nowhere was dropped");
    }

    #[test]
    fn bad_input_is_answered() {
        let mut a = IoApic::new(0);
        for index in [0x03, 0x0f, REG_REDIRECTION + 2 * PINS, 0xff] {
            a.write(IOREGSEL, 4, u64::from(index));
            a.write(IOWIN, 4, 0xffff_ffff);
            assert_eq!(a.read(IOWIN, 4), 0, "register {index:#x}");
        }
        a.set_irq(PINS, true);
        a.set_irq(0xff, true);
        assert_eq!(a.take(), None);
        for offset in (0..SIZE + 8).step_by(1) {
            for size in [0, 1, 2, 3, 4, 8, 16, 255] {
                let _ = a.read(offset, size);
                a.write(offset, size, u64::MAX);
            }
        }
        for index in 0..=255u8 {
            a.write(IOREGSEL, 4, u64::from(index));
            for v in [0, 0xffff_ffff, 0x1_0000_0000] {
                a.write(IOWIN, 4, v);
                let _ = a.read(IOWIN, 4);
            }
        }
        for pin in 0..PINS {
            a.set_irq(pin, pin % 2 == 0);
            a.eoi(pin);
        }
        while a.take().is_some() {}
    }
}
