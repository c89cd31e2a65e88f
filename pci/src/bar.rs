//! Base address registers: what each BAR of a function decodes (memory
//! below or above 4 GiB, prefetchable or not, or I/O ports), where the
//! firmware put it and how large it is.
//!
//! # Sizing
//!
//! A BAR's size is found by the standard sequence ([`probe`]): save the
//! register, write all ones, read back, write the saved value. The device
//! returns zeros in the address bits below its size, so the read-back
//! (flag bits masked off) is `!(size − 1)`: its lowest set bit is the
//! size. A 64-bit memory BAR takes two slots; both halves are sized
//! together. While the BARs hold all ones they would decode nonsense
//! addresses, so I/O and memory decoding are switched off in the command
//! register for the whole sequence and the register is restored after.
//!
//! # Invariants
//!
//! - A read-back of exactly zero is an unimplemented BAR ([`BarSlot::Unused`]).
//! - Anything else that is not a well-formed BAR is a [`BarError`] in that
//!   slot — a size that is not a power of two, no address bits at all, a
//!   64-bit BAR in the last slot, a reserved memory type, flag bits that
//!   change between reads, an address not aligned to the size or an end
//!   beyond 64 bits — never a panic; the other slots are still decoded.
//! - [`probe`] restores every register it wrote, including the command
//!   register, whatever the device answers.
//!
//! An address of 0 is a BAR the firmware did not assign (qboot, the
//! firmware Pecan boots with, assigns none): it is reported as it is.
//! The expansion ROM BAR is not decoded.

use core::fmt;

use crate::config::{reg, set_command, Bdf, ConfigSpace};

/// BAR slots of the largest header (an endpoint's six).
pub const MAX_BARS: usize = reg::ENDPOINT_BARS as usize;

/// Bit 0 of a BAR: 1 for I/O space.
const IO_SPACE: u32 = 1;
/// Flag bits of an I/O BAR (bit 1 is reserved).
const IO_FLAGS: u32 = 0x3;
/// Flag bits of a memory BAR: space, type (2 bits), prefetchable.
const MEMORY_FLAGS: u32 = 0xf;
const MEMORY_TYPE_SHIFT: u32 = 1;
const MEMORY_TYPE_32: u32 = 0b00;
const MEMORY_TYPE_64: u32 = 0b10;
const MEMORY_PREFETCHABLE: u32 = 1 << 3;

/// Which address space a BAR decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarKind {
    /// Memory below 4 GiB (one slot).
    Memory32,
    /// Memory anywhere in 64 bits (two slots: this one and the next).
    Memory64,
    /// I/O ports.
    Io,
}

/// A well-formed BAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    pub kind: BarKind,
    /// Reads have no side effects, so the region may be mapped
    /// write-combining or prefetched (memory BARs only).
    pub prefetchable: bool,
    /// Bus address (or port) as the firmware programmed it; 0 when
    /// unassigned. Aligned to `size`.
    pub address: u64,
    /// Bytes (or ports) decoded: a power of two, at least 16 for memory and
    /// 4 for I/O.
    pub size: u64,
}

impl Bar {
    pub fn is_memory(&self) -> bool {
        self.kind != BarKind::Io
    }

    /// One past the last byte (or port) decoded (exact for a decoded BAR,
    /// whose end decoding checked; saturating for one built by hand).
    pub fn end(&self) -> u64 {
        self.address.saturating_add(self.size)
    }
}

/// What one BAR slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarSlot {
    /// Not implemented by the function (reads back as zero), or beyond the
    /// BARs its header layout has.
    Unused,
    Bar(Bar),
    /// The upper half of the 64-bit BAR in the slot below.
    Upper,
    /// The register's read-back makes no sense.
    Invalid(BarError),
}

impl BarSlot {
    pub fn bar(&self) -> Option<&Bar> {
        match self {
            BarSlot::Bar(bar) => Some(bar),
            _ => None,
        }
    }
}

/// Why a BAR slot is not a usable BAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarError {
    /// A 64-bit memory BAR in the last slot has no upper half.
    Memory64InLastSlot,
    /// Memory type `0b01` (PCI 2.x "below 1 MiB") or `0b11` (reserved).
    ReservedMemoryType(u8),
    /// The read-back's flag bits differ from the saved value's, which are
    /// read-only.
    FlagsChanged { saved: u32, read_back: u32 },
    /// The read-back has no address bits set at all: no size.
    NoAddressBits,
    /// The address bits read back are not ones followed by zeros, so the
    /// size is not a power of two.
    SizeNotPowerOfTwo { mask: u64 },
    /// The address has bits set below the size.
    Misaligned { address: u64, size: u64 },
    /// `address + size` does not fit in 64 bits (a 64-bit BAR at the very
    /// top of the address space).
    EndOverflows { address: u64, size: u64 },
}

impl fmt::Display for BarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BarError::Memory64InLastSlot => write!(f, "64-bit BAR in the last slot"),
            BarError::ReservedMemoryType(t) => write!(f, "reserved memory type {t:#04b}"),
            BarError::FlagsChanged { saved, read_back } => write!(
                f,
                "read-only flag bits changed ({saved:#x} saved, {read_back:#x} read back)"
            ),
            BarError::NoAddressBits => write!(f, "no writable address bits"),
            BarError::SizeNotPowerOfTwo { mask } => {
                write!(f, "size mask {mask:#x} is not a power of two")
            }
            BarError::Misaligned { address, size } => {
                write!(f, "address {address:#x} not aligned to its size {size:#x}")
            }
            BarError::EndOverflows { address, size } => {
                write!(f, "{address:#x} + {size:#x} does not fit in 64 bits")
            }
        }
    }
}

/// Offset of BAR `index` in configuration space.
pub const fn bar_offset(index: usize) -> u16 {
    reg::BAR0 + 4 * index as u16
}

/// Reads and sizes the first `count` BARs (at most [`MAX_BARS`]) of
/// function `at`; slots from `count` on are [`BarSlot::Unused`]. Memory and
/// I/O decoding are off during the sequence and the command register is
/// restored after (module docs).
pub fn probe<C: ConfigSpace + ?Sized>(cs: &mut C, at: Bdf, count: usize) -> [BarSlot; MAX_BARS] {
    let count = count.min(MAX_BARS);
    let mut slots = [BarSlot::Unused; MAX_BARS];
    if count == 0 {
        return slots;
    }
    let command = set_command(cs, at, 0, reg::COMMAND_IO | reg::COMMAND_MEMORY);
    let mut index = 0;
    while index < count {
        let (saved, read_back) = size_register(cs, at, bar_offset(index));
        let next = index + 1;
        if read_back != 0
            && read_back & IO_SPACE == 0
            && (read_back >> MEMORY_TYPE_SHIFT) & 0b11 == MEMORY_TYPE_64
            && saved & MEMORY_FLAGS == read_back & MEMORY_FLAGS
        {
            if next >= count {
                slots[index] = BarSlot::Invalid(BarError::Memory64InLastSlot);
            } else {
                let (saved_high, read_back_high) = size_register(cs, at, bar_offset(next));
                slots[index] = decode_memory64(saved, read_back, saved_high, read_back_high);
                slots[next] = BarSlot::Upper;
            }
            index += 2;
        } else {
            slots[index] = decode32(saved, read_back);
            index += 1;
        }
    }
    if command & (reg::COMMAND_IO | reg::COMMAND_MEMORY) != 0 {
        // Written back whole: the status half as zero clears nothing.
        cs.write32(at, reg::COMMAND, u32::from(command));
    }
    slots
}

/// Saves the register at `offset`, writes all ones, reads back, restores:
/// `(saved, read_back)`.
fn size_register<C: ConfigSpace + ?Sized>(cs: &mut C, at: Bdf, offset: u16) -> (u32, u32) {
    let saved = cs.read32(at, offset);
    cs.write32(at, offset, u32::MAX);
    let read_back = cs.read32(at, offset);
    cs.write32(at, offset, saved);
    (saved, read_back)
}

/// Decodes a one-slot BAR (32-bit memory or I/O) from its saved value and
/// its all-ones read-back.
pub fn decode32(saved: u32, read_back: u32) -> BarSlot {
    if read_back == 0 {
        return BarSlot::Unused;
    }
    let flags = if read_back & IO_SPACE != 0 {
        IO_FLAGS
    } else {
        MEMORY_FLAGS
    };
    if saved & flags != read_back & flags {
        return BarSlot::Invalid(BarError::FlagsChanged { saved, read_back });
    }
    if read_back & IO_SPACE != 0 {
        let mut mask = read_back & !IO_FLAGS;
        // A device made for the 64 KiB x86 port space may hard-wire the
        // upper 16 bits to zero (PCI 3.0, 6.2.5.1): they are not size bits.
        // (With no address bits at all there is nothing to widen.)
        if mask != 0 && mask & 0xffff_0000 == 0 {
            mask |= 0xffff_0000;
        }
        return finish(
            BarKind::Io,
            false,
            u64::from(saved & !IO_FLAGS),
            u64::from(mask),
            32,
        );
    }
    match (read_back >> MEMORY_TYPE_SHIFT) & 0b11 {
        MEMORY_TYPE_32 => finish(
            BarKind::Memory32,
            read_back & MEMORY_PREFETCHABLE != 0,
            u64::from(saved & !MEMORY_FLAGS),
            u64::from(read_back & !MEMORY_FLAGS),
            32,
        ),
        other => BarSlot::Invalid(BarError::ReservedMemoryType(other as u8)),
    }
}

/// Decodes a 64-bit memory BAR from both halves' saved values and
/// read-backs (the low half's flags already say 64-bit).
pub fn decode_memory64(
    saved: u32,
    read_back: u32,
    saved_high: u32,
    read_back_high: u32,
) -> BarSlot {
    let address = u64::from(saved_high) << 32 | u64::from(saved & !MEMORY_FLAGS);
    let mask = u64::from(read_back_high) << 32 | u64::from(read_back & !MEMORY_FLAGS);
    finish(
        BarKind::Memory64,
        read_back & MEMORY_PREFETCHABLE != 0,
        address,
        mask,
        64,
    )
}

/// Turns an address and the read-back's address bits (`mask`, within
/// `bits` of address space) into a BAR, or says why they are nonsense.
fn finish(kind: BarKind, prefetchable: bool, address: u64, mask: u64, bits: u32) -> BarSlot {
    let space = if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    };
    let mask = mask & space;
    if mask == 0 {
        return BarSlot::Invalid(BarError::NoAddressBits);
    }
    // The bits the device ignores: all of them below the size, none above.
    let ignored = !mask & space;
    if ignored & ignored.wrapping_add(1) != 0 {
        return BarSlot::Invalid(BarError::SizeNotPowerOfTwo { mask });
    }
    // `ignored` is 2^k − 1 with k < bits ≤ 64 because mask ≠ 0: no overflow.
    let size = ignored + 1;
    if address & ignored != 0 {
        return BarSlot::Invalid(BarError::Misaligned { address, size });
    }
    // Aligned and below 2^bits, the range stays inside its space; only
    // its end can be unrepresentable, for a 64-bit BAR at the very top.
    if address.checked_add(size).is_none() {
        return BarSlot::Invalid(BarError::EndOverflows { address, size });
    }
    BarSlot::Bar(Bar {
        kind,
        prefetchable,
        address,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(kind: BarKind, prefetchable: bool, address: u64, size: u64) -> BarSlot {
        BarSlot::Bar(Bar {
            kind,
            prefetchable,
            address,
            size,
        })
    }

    #[test]
    fn decodes_memory32() {
        assert_eq!(
            decode32(0xfebd_1000, 0xffff_f000),
            bar(BarKind::Memory32, false, 0xfebd_1000, 0x1000)
        );
        assert_eq!(
            decode32(0xfd00_0008, 0xff00_0008),
            bar(BarKind::Memory32, true, 0xfd00_0000, 0x100_0000)
        );
        // Unassigned: address 0.
        assert_eq!(
            decode32(0, 0xffff_f000),
            bar(BarKind::Memory32, false, 0, 0x1000)
        );
        // The smallest memory BAR, and the largest (2 GiB).
        assert_eq!(
            decode32(0x10, 0xffff_fff0),
            bar(BarKind::Memory32, false, 0x10, 0x10)
        );
        assert_eq!(
            decode32(0x8000_0000, 0x8000_0000),
            bar(BarKind::Memory32, false, 0x8000_0000, 0x8000_0000)
        );
    }

    #[test]
    fn decodes_io_including_16_bit_decoders() {
        assert_eq!(
            decode32(0xc041, 0xffff_ffc1),
            bar(BarKind::Io, false, 0xc040, 0x40)
        );
        // Upper 16 bits hard-wired to zero: still 64 ports.
        assert_eq!(
            decode32(0xc041, 0x0000_ffc1),
            bar(BarKind::Io, false, 0xc040, 0x40)
        );
        assert_eq!(decode32(0x1, 0xffff_fffd), bar(BarKind::Io, false, 0, 4));
    }

    #[test]
    fn decodes_memory64() {
        assert_eq!(
            decode_memory64(0xfe00_000c, 0xffff_c00c, 0x0000_0008, 0xffff_ffff),
            bar(BarKind::Memory64, true, 0x8_fe00_0000, 0x4000)
        );
        // A BAR larger than 4 GiB: the low half's address bits are all zero.
        assert_eq!(
            decode_memory64(0x4, 0x4, 0x10, 0xffff_fff0),
            bar(BarKind::Memory64, false, 0x10_0000_0000, 0x10_0000_0000)
        );
    }

    #[test]
    fn unimplemented_is_unused() {
        assert_eq!(decode32(0, 0), BarSlot::Unused);
        assert_eq!(decode32(0x1234_5678, 0), BarSlot::Unused);
    }

    #[test]
    fn nonsense_is_an_error() {
        assert_eq!(
            decode32(0, 0xfff0_f000),
            BarSlot::Invalid(BarError::SizeNotPowerOfTwo { mask: 0xfff0_f000 })
        );
        assert_eq!(
            decode32(0x8, 0x8),
            BarSlot::Invalid(BarError::NoAddressBits)
        );
        assert_eq!(
            decode_memory64(0xffff_f00c, 0xffff_f00c, u32::MAX, u32::MAX),
            BarSlot::Invalid(BarError::EndOverflows {
                address: 0xffff_ffff_ffff_f000,
                size: 0x1000
            })
        );
        assert_eq!(decode32(1, 1), BarSlot::Invalid(BarError::NoAddressBits));
        assert_eq!(
            decode32(0x2, 0xffff_f002),
            BarSlot::Invalid(BarError::ReservedMemoryType(0b01))
        );
        assert_eq!(
            decode32(0x6, 0xffff_f006),
            BarSlot::Invalid(BarError::ReservedMemoryType(0b11))
        );
        assert_eq!(
            decode32(0x0, 0xffff_f008),
            BarSlot::Invalid(BarError::FlagsChanged {
                saved: 0,
                read_back: 0xffff_f008
            })
        );
        assert_eq!(
            decode32(0xfebd_1800, 0xffff_f000),
            BarSlot::Invalid(BarError::Misaligned {
                address: 0xfebd_1800,
                size: 0x1000
            })
        );
        assert_eq!(
            decode_memory64(0x4, 0xffff_fff4, 0, 0),
            BarSlot::Invalid(BarError::SizeNotPowerOfTwo { mask: 0xffff_fff0 })
        );
        assert_eq!(
            decode_memory64(0x4, 0x4, 0, 0),
            BarSlot::Invalid(BarError::NoAddressBits)
        );
    }
}
