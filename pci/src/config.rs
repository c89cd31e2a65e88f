//! Configuration space: how a function is named ([`Bdf`]), the one trait
//! through which this crate touches hardware ([`ConfigSpace`]), checked
//! accesses on top of it ([`ConfigExt`]) and the registers of the common
//! header ([`reg`]).
//!
//! # Access model
//!
//! PCI Express's enhanced configuration access mechanism (ECAM) maps 4 KiB
//! of registers per function into memory: function `bus:device.function`
//! starts at `base + (bus − first_bus) << 20 | device << 15 | function << 12`
//! ([`Bdf::ecam_offset`]). [`ConfigSpace`] is the raw 32-bit access the
//! platform service implements over that mapped window; a function that
//! does not exist reads as all ones, as ECAM does.
//!
//! Invariant: this crate calls [`ConfigSpace::read32`] and
//! [`ConfigSpace::write32`] only with an offset that is 4-aligned and below
//! [`CONFIG_SIZE`] — every access goes through [`ConfigExt`], which turns a
//! misaligned or out-of-range offset into an [`OffsetError`] before the
//! trait is called. Sub-dword reads are dword reads and a shift; there are
//! no sub-dword writes in general, because writing a dword back would
//! write its neighbours too (the status register's error bits are cleared
//! by writing ones): each register that needs a narrow write has a helper
//! that knows its neighbour ([`set_command`]).

use core::fmt;
use core::str::FromStr;

use crate::parse::{Cursor, ParseError};

/// Bytes of configuration space per function under ECAM.
pub const CONFIG_SIZE: u16 = 4096;

/// Bytes of the PCI-compatible part (header and standard capabilities).
pub const LEGACY_CONFIG_SIZE: u16 = 256;

/// A function's address: bus (0–255), device (0–31), function (0–7),
/// written as lspci does: `00:1f.2` (hexadecimal; one PCI segment, so no
/// segment prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    bus: u8,
    device: u8,
    function: u8,
}

impl Bdf {
    /// Devices on a bus.
    pub const DEVICES: u8 = 32;
    /// Functions of a device.
    pub const FUNCTIONS: u8 = 8;

    /// The function, or `None` when `device` ≥ 32 or `function` ≥ 8.
    pub const fn new(bus: u8, device: u8, function: u8) -> Option<Bdf> {
        if device < Self::DEVICES && function < Self::FUNCTIONS {
            Some(Bdf {
                bus,
                device,
                function,
            })
        } else {
            None
        }
    }

    pub const fn bus(self) -> u8 {
        self.bus
    }

    pub const fn device(self) -> u8 {
        self.device
    }

    pub const fn function(self) -> u8 {
        self.function
    }

    /// Byte offset of this function's registers in an ECAM window whose
    /// first bus is `first_bus`, or `None` when the bus lies below it.
    pub const fn ecam_offset(self, first_bus: u8) -> Option<u64> {
        if self.bus < first_bus {
            return None;
        }
        Some(
            ((self.bus - first_bus) as u64) << 20
                | (self.device as u64) << 15
                | (self.function as u64) << 12,
        )
    }

    /// Parses `BB:DD.F` from the cursor (shared with device matches).
    pub(crate) fn parse_at(cursor: &mut Cursor<'_>) -> Result<Bdf, ParseError> {
        let bus = cursor.hex(2, "a two-digit hexadecimal bus number")?;
        cursor.expect(':', "':' between bus and device")?;
        let device = cursor.hex_below(
            2,
            u32::from(Self::DEVICES),
            "a two-digit hexadecimal device number from 00 to 1f",
        )?;
        cursor.expect('.', "'.' between device and function")?;
        let function = cursor.hex_below(
            1,
            u32::from(Self::FUNCTIONS),
            "a function number from 0 to 7",
        )?;
        // The range checks above make the narrowing exact.
        Ok(Bdf {
            bus: bus as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02x}:{:02x}.{:x}",
            self.bus, self.device, self.function
        )
    }
}

impl FromStr for Bdf {
    type Err = ParseError;

    /// Parses exactly `BB:DD.F`: two hexadecimal digits of bus, two of
    /// device (00–1f), one of function (0–7).
    fn from_str(text: &str) -> Result<Bdf, ParseError> {
        let mut cursor = Cursor::new(text);
        let bdf = Bdf::parse_at(&mut cursor)?;
        cursor.end("the end after the function number")?;
        Ok(bdf)
    }
}

/// The header type register: which layout the rest of the header has, and
/// whether the device has functions besides 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderType {
    pub layout: Layout,
    /// Only meaningful in function 0: functions 1–7 exist.
    pub multifunction: bool,
}

impl HeaderType {
    pub const fn from_byte(value: u8) -> HeaderType {
        HeaderType {
            layout: match value & reg::HEADER_LAYOUT_MASK {
                reg::HEADER_ENDPOINT => Layout::Endpoint,
                reg::HEADER_PCI_BRIDGE => Layout::PciBridge,
                reg::HEADER_CARDBUS_BRIDGE => Layout::CardBusBridge,
                other => Layout::Unknown(other),
            },
            multifunction: value & reg::HEADER_MULTIFUNCTION != 0,
        }
    }
}

/// The layout of a header beyond its first 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Type 0: a device (six BARs, subsystem IDs).
    Endpoint,
    /// Type 1: a PCI-to-PCI bridge (two BARs, bus numbers, windows).
    PciBridge,
    /// Type 2: a CardBus bridge (one BAR).
    CardBusBridge,
    /// A type no specification defines (the value, without bit 7).
    Unknown(u8),
}

impl Layout {
    /// How many BAR registers the layout has.
    pub const fn bars(self) -> u8 {
        match self {
            Layout::Endpoint => reg::ENDPOINT_BARS,
            Layout::PciBridge => reg::BRIDGE_BARS,
            Layout::CardBusBridge => reg::CARDBUS_BARS,
            Layout::Unknown(_) => 0,
        }
    }
}

/// The class code triple: what kind of function this is (PCI Code and ID
/// Assignment, chapter 1), shown as lspci does, `01:06:01`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class {
    pub class: u8,
    pub subclass: u8,
    pub prog_if: u8,
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02x}:{:02x}:{:02x}",
            self.class, self.subclass, self.prog_if
        )
    }
}

/// Raw access to configuration space, implemented by the platform service
/// over the mapped ECAM window (and by [`crate::testing::Model`] in tests).
///
/// Callers in this crate guarantee `offset % 4 == 0` and
/// `offset < CONFIG_SIZE` (module docs); an implementation must still
/// never misbehave on any `at` — a function that does not exist reads as
/// `0xffff_ffff` and ignores writes.
pub trait ConfigSpace {
    /// The 32-bit register at `offset` of function `at`.
    fn read32(&self, at: Bdf, offset: u16) -> u32;
    /// Writes the 32-bit register at `offset` of function `at`.
    fn write32(&mut self, at: Bdf, offset: u16, value: u32);
}

/// A configuration-space offset that cannot be accessed with the width
/// asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetError {
    /// `offset` is not a multiple of `width` bytes.
    Misaligned { offset: u16, width: u8 },
    /// `offset + width` lies beyond the function's 4 KiB.
    OutOfRange { offset: u16, width: u8 },
}

impl fmt::Display for OffsetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            OffsetError::Misaligned { offset, width } => {
                write!(f, "config offset {offset:#x} is not {width}-byte aligned")
            }
            OffsetError::OutOfRange { offset, width } => write!(
                f,
                "config offset {offset:#x} ({width} bytes) lies beyond the function's {CONFIG_SIZE} bytes"
            ),
        }
    }
}

/// Checks that `width` bytes (1, 2 or 4) at `offset` are one naturally
/// aligned access inside a function's configuration space.
pub(crate) const fn check_offset(offset: u16, width: u8) -> Result<(), OffsetError> {
    debug_assert!(width == 1 || width == 2 || width == 4);
    if !offset.is_multiple_of(width as u16) {
        return Err(OffsetError::Misaligned { offset, width });
    }
    // Aligned and below 4096 with width ≤ 4 means the access ends inside.
    if offset >= CONFIG_SIZE {
        return Err(OffsetError::OutOfRange { offset, width });
    }
    Ok(())
}

/// Checked reads and writes of any width, for every [`ConfigSpace`].
pub trait ConfigExt: ConfigSpace {
    /// The 32-bit register at `offset`.
    fn read_u32(&self, at: Bdf, offset: u16) -> Result<u32, OffsetError> {
        check_offset(offset, 4)?;
        Ok(self.read32(at, offset))
    }

    /// The 16-bit register at `offset` (2-aligned).
    fn read_u16(&self, at: Bdf, offset: u16) -> Result<u16, OffsetError> {
        check_offset(offset, 2)?;
        Ok((self.read32(at, offset & !3) >> ((offset & 3) * 8)) as u16)
    }

    /// The byte at `offset`.
    fn read_u8(&self, at: Bdf, offset: u16) -> Result<u8, OffsetError> {
        check_offset(offset, 1)?;
        Ok((self.read32(at, offset & !3) >> ((offset & 3) * 8)) as u8)
    }

    /// Writes the 32-bit register at `offset`.
    fn write_u32(&mut self, at: Bdf, offset: u16, value: u32) -> Result<(), OffsetError> {
        check_offset(offset, 4)?;
        self.write32(at, offset, value);
        Ok(())
    }
}

impl<C: ConfigSpace + ?Sized> ConfigExt for C {}

/// Mask that turns any offset into a valid dword access.
const DWORD_MASK: u16 = CONFIG_SIZE - 4;

/// The dword containing `offset`, for offsets this crate computes itself
/// (header constants, capability bodies): the mask makes any value a valid
/// access, so there is no error to handle — and for the 4-aligned offsets
/// < 4096 callers pass, it changes nothing.
pub(crate) fn dword<C: ConfigSpace + ?Sized>(cs: &C, at: Bdf, offset: u16) -> u32 {
    cs.read32(at, offset & DWORD_MASK)
}

/// The byte at `offset`, as [`dword`].
pub(crate) fn byte<C: ConfigSpace + ?Sized>(cs: &C, at: Bdf, offset: u16) -> u8 {
    (dword(cs, at, offset) >> ((offset & 3) * 8)) as u8
}

/// The 16 bits at `offset` (2-aligned), as [`dword`].
pub(crate) fn word<C: ConfigSpace + ?Sized>(cs: &C, at: Bdf, offset: u16) -> u16 {
    (dword(cs, at, offset) >> ((offset & 2) * 8)) as u16
}

/// Writes the dword containing `offset`, as [`dword`].
pub(crate) fn write_dword<C: ConfigSpace + ?Sized>(cs: &mut C, at: Bdf, offset: u16, value: u32) {
    cs.write32(at, offset & DWORD_MASK, value);
}

/// Offsets and bits of the configuration header (PCI Local Bus 3.0,
/// chapter 6; PCI-to-PCI Bridge 1.2, chapter 3).
pub mod reg {
    // Common to every header layout.
    pub const VENDOR_ID: u16 = 0x00;
    pub const DEVICE_ID: u16 = 0x02;
    pub const COMMAND: u16 = 0x04;
    pub const STATUS: u16 = 0x06;
    pub const REVISION: u16 = 0x08;
    pub const PROG_IF: u16 = 0x09;
    pub const SUBCLASS: u16 = 0x0a;
    pub const CLASS: u16 = 0x0b;
    pub const CACHE_LINE_SIZE: u16 = 0x0c;
    pub const LATENCY_TIMER: u16 = 0x0d;
    pub const HEADER_TYPE: u16 = 0x0e;
    pub const BIST: u16 = 0x0f;
    /// First base address register; BAR `i` is at `BAR0 + 4 i`.
    pub const BAR0: u16 = 0x10;
    /// The capabilities pointer of the endpoint and bridge layouts.
    pub const CAPABILITIES_PTR: u16 = 0x34;
    pub const INTERRUPT_LINE: u16 = 0x3c;
    pub const INTERRUPT_PIN: u16 = 0x3d;

    // Endpoint layout (header type 0).
    pub const SUBSYSTEM_VENDOR_ID: u16 = 0x2c;
    pub const SUBSYSTEM_ID: u16 = 0x2e;
    pub const EXPANSION_ROM: u16 = 0x30;
    /// BARs of an endpoint.
    pub const ENDPOINT_BARS: u8 = 6;

    // PCI-to-PCI bridge layout (header type 1).
    pub const PRIMARY_BUS: u16 = 0x18;
    pub const SECONDARY_BUS: u16 = 0x19;
    pub const SUBORDINATE_BUS: u16 = 0x1a;
    pub const BRIDGE_EXPANSION_ROM: u16 = 0x38;
    /// BARs of a PCI-to-PCI bridge.
    pub const BRIDGE_BARS: u8 = 2;

    // CardBus bridge layout (header type 2).
    pub const CARDBUS_CAPABILITIES_PTR: u16 = 0x14;
    /// BARs of a CardBus bridge (the socket registers).
    pub const CARDBUS_BARS: u8 = 1;

    /// Header type byte: the layout is in bits 0..7, bit 7 says the
    /// device has functions besides 0.
    pub const HEADER_LAYOUT_MASK: u8 = 0x7f;
    pub const HEADER_MULTIFUNCTION: u8 = 0x80;
    pub const HEADER_ENDPOINT: u8 = 0;
    pub const HEADER_PCI_BRIDGE: u8 = 1;
    pub const HEADER_CARDBUS_BRIDGE: u8 = 2;

    /// Command register: respond to I/O BARs.
    pub const COMMAND_IO: u16 = 1 << 0;
    /// Command register: respond to memory BARs.
    pub const COMMAND_MEMORY: u16 = 1 << 1;
    /// Command register: the device may initiate DMA.
    pub const COMMAND_BUS_MASTER: u16 = 1 << 2;
    pub const COMMAND_PARITY_ERROR_RESPONSE: u16 = 1 << 6;
    pub const COMMAND_SERR: u16 = 1 << 8;
    /// Command register: the device must not assert INTx.
    pub const COMMAND_INTX_DISABLE: u16 = 1 << 10;

    /// Status register: an INTx interrupt is pending.
    pub const STATUS_INTERRUPT: u16 = 1 << 3;
    /// Status register: the capabilities pointer is valid.
    pub const STATUS_CAPABILITIES: u16 = 1 << 4;

    /// Interrupt pin values: 0 means none, 1..=4 are INTA..INTD.
    pub const INTERRUPT_PIN_NONE: u8 = 0;
}

/// Reads the command register, sets `set` and clears `clear` in it, and
/// writes it back; returns the value it had before.
///
/// The command register shares a dword with the status register, whose
/// error bits are cleared by writing ones: the status half is written as
/// zero, which leaves every status bit as it was.
pub fn set_command<C: ConfigSpace + ?Sized>(cs: &mut C, at: Bdf, set: u16, clear: u16) -> u16 {
    let before = word(cs, at, reg::COMMAND);
    let after = (before & !clear) | set;
    if after != before {
        write_dword(cs, at, reg::COMMAND, u32::from(after));
    }
    before
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::Unexpected;
    use std::string::ToString;

    #[test]
    fn bdf_display_and_parse_round_trip() {
        let bdf = Bdf::new(0, 0x1f, 2).unwrap();
        assert_eq!(bdf.to_string(), "00:1f.2");
        assert_eq!("00:1f.2".parse::<Bdf>(), Ok(bdf));
        assert_eq!("00:1F.2".parse::<Bdf>(), Ok(bdf));
        assert_eq!(
            "ff:00.7".parse::<Bdf>().unwrap(),
            Bdf::new(255, 0, 7).unwrap()
        );
    }

    #[test]
    fn bdf_parse_errors_name_the_character() {
        let e = "00:20.0".parse::<Bdf>().unwrap_err();
        assert_eq!((e.at, e.found), (3, Unexpected::Value(0x20)));
        assert_eq!(
            e.to_string(),
            "at character 4: expected a two-digit hexadecimal device number from 00 to 1f, found 20"
        );
        let e = "00:1f.8".parse::<Bdf>().unwrap_err();
        assert_eq!((e.at, e.found), (6, Unexpected::Value(8)));
        let e = "00-1f.2".parse::<Bdf>().unwrap_err();
        assert_eq!((e.at, e.found), (2, Unexpected::Char('-')));
        assert_eq!(e.expected, "':' between bus and device");
        let e = "0:1f.2".parse::<Bdf>().unwrap_err();
        assert_eq!((e.at, e.found), (1, Unexpected::Char(':')));
        let e = "00:1f".parse::<Bdf>().unwrap_err();
        assert_eq!((e.at, e.found), (5, Unexpected::End));
        let e = "00:1f.2 ".parse::<Bdf>().unwrap_err();
        assert_eq!((e.at, e.found), (7, Unexpected::Char(' ')));
        let e = "00:1é.2".parse::<Bdf>().unwrap_err();
        assert_eq!((e.at, e.found), (4, Unexpected::Char('é')));
        assert_eq!("".parse::<Bdf>().unwrap_err().found, Unexpected::End);
    }

    #[test]
    fn bdf_new_rejects_out_of_range() {
        assert!(Bdf::new(0, 32, 0).is_none());
        assert!(Bdf::new(0, 0, 8).is_none());
    }

    #[test]
    fn ecam_offsets() {
        let bdf = Bdf::new(2, 3, 4).unwrap();
        assert_eq!(bdf.ecam_offset(0), Some(0x20_0000 | 0x1_8000 | 0x4000));
        assert_eq!(bdf.ecam_offset(2), Some(0x1_8000 | 0x4000));
        assert_eq!(bdf.ecam_offset(3), None);
        assert_eq!(
            Bdf::new(255, 31, 7).unwrap().ecam_offset(0),
            Some(0x0fff_f000)
        );
    }

    #[test]
    fn offsets_are_checked() {
        assert_eq!(check_offset(0xffc, 4), Ok(()));
        assert_eq!(check_offset(0xfff, 1), Ok(()));
        assert_eq!(
            check_offset(0x1000, 4),
            Err(OffsetError::OutOfRange {
                offset: 0x1000,
                width: 4
            })
        );
        assert_eq!(
            check_offset(0x6, 4),
            Err(OffsetError::Misaligned {
                offset: 6,
                width: 4
            })
        );
        assert_eq!(
            check_offset(0x7, 2),
            Err(OffsetError::Misaligned {
                offset: 7,
                width: 2
            })
        );
        assert_eq!(
            check_offset(u16::MAX, 1),
            Err(OffsetError::OutOfRange {
                offset: u16::MAX,
                width: 1
            })
        );
    }
}
