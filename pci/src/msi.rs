//! Message-signalled interrupts: parsing the MSI and MSI-X capabilities,
//! the x86 message a device writes to raise an interrupt, and the helpers
//! the platform service needs to program them.
//!
//! # The x86 message
//!
//! An MSI is a memory write the device issues: address
//! `0xfee0_0000 | destination APIC ID << 12` (physical destination mode,
//! no redirection hint) and data = the vector (fixed delivery, edge
//! triggered) — Intel SDM vol. 3, 11.11. Vectors below 32 are the CPU's
//! exceptions and are refused ([`MessageError`]).
//!
//! # MSI-X
//!
//! The capability names a table of 16-byte entries (message address low and
//! high, data, vector control whose bit 0 masks the entry) and a pending
//! bit array, each at an offset inside one of the function's memory BARs.
//! A driver that could write the table could aim interrupts at any vector,
//! so the platform service programs it and leaves the page(s) holding it
//! out of the driver's mapping of that BAR: [`Msix::table_pages`] is that
//! page range, [`mappable_around`] the parts of the BAR that remain. The
//! programming order (PCI 3.0, 6.8.2): enable MSI-X with the function
//! masked ([`set_msix_control`]), write each entry masked, unmask the
//! entries, then clear the function mask. MSI must be off while MSI-X is
//! on, and INTx is turned off in the command register.
//!
//! Invariant: parsing checks every field the device supplies (reserved BAR
//! indicators, reserved vector counts, bodies that run past 256 bytes) and
//! every offset computation is checked, so nothing here panics on a
//! device's answers.

use core::fmt;
use core::ops::Range;

use crate::bar::{BarSlot, MAX_BARS};
use crate::cap::{CapError, Capability};
use crate::config::{dword, write_dword, Bdf, ConfigSpace};
use crate::PAGE_SIZE;

/// Offset of the message control register in both capabilities.
pub const CONTROL: u8 = 2;

/// MSI message control: MSI is on.
pub const MSI_ENABLE: u16 = 1 << 0;
const MSI_CAPABLE_SHIFT: u16 = 1;
const MSI_ENABLED_VECTORS_SHIFT: u16 = 4;
const MSI_VECTORS_MASK: u16 = 0b111;
/// MSI message control: the message address has an upper half.
pub const MSI_64BIT: u16 = 1 << 7;
/// MSI message control: the capability has mask and pending registers.
pub const MSI_PER_VECTOR_MASKING: u16 = 1 << 8;
/// Largest value of the "multiple message capable" field: 32 vectors.
const MSI_MAX_LOG2_VECTORS: u16 = 5;

/// MSI-X message control: the table size minus one.
pub const MSIX_TABLE_SIZE_MASK: u16 = 0x07ff;
/// MSI-X message control: every entry is masked regardless of its own bit.
pub const MSIX_FUNCTION_MASK: u16 = 1 << 14;
/// MSI-X message control: MSI-X is on.
pub const MSIX_ENABLE: u16 = 1 << 15;
/// Offsets in the MSI-X capability of the table and PBA locations.
pub const MSIX_TABLE: u8 = 4;
pub const MSIX_PBA: u8 = 8;
/// Bytes of the MSI-X capability.
pub const MSIX_CAP_LEN: u8 = 12;
/// The low three bits of a table or PBA location: the BAR indicator.
const BIR_MASK: u32 = 0b111;

/// Bytes of an MSI-X table entry, and its fields' offsets.
pub const ENTRY_SIZE: u32 = 16;
pub const ENTRY_ADDRESS_LOW: u32 = 0;
pub const ENTRY_ADDRESS_HIGH: u32 = 4;
pub const ENTRY_DATA: u32 = 8;
pub const ENTRY_VECTOR_CONTROL: u32 = 12;
/// Vector control: this entry is masked.
pub const ENTRY_MASKED: u32 = 1;

/// Base of the x86 local APIC's message address range.
pub const X86_MSI_ADDRESS: u64 = 0xfee0_0000;
const X86_DESTINATION_SHIFT: u32 = 12;
/// The first vector an MSI may carry (below are the exceptions).
pub const FIRST_VECTOR: u8 = 32;

/// The message a device writes to raise one interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsiMessage {
    pub address: u64,
    pub data: u32,
}

/// A message that cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageError {
    /// Vectors 0–31 are exceptions.
    ReservedVector(u8),
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageError::ReservedVector(v) => write!(f, "vector {v} is reserved for exceptions"),
        }
    }
}

impl MsiMessage {
    /// The x86 message delivering `vector` to the CPU whose local APIC ID
    /// is `apic_id` (module docs).
    pub fn x86(apic_id: u8, vector: u8) -> Result<MsiMessage, MessageError> {
        if vector < FIRST_VECTOR {
            return Err(MessageError::ReservedVector(vector));
        }
        Ok(MsiMessage {
            address: X86_MSI_ADDRESS | u64::from(apic_id) << X86_DESTINATION_SHIFT,
            data: u32::from(vector),
        })
    }

    /// The four dwords of an MSI-X table entry carrying this message, in
    /// table order (address low, address high, data, vector control).
    pub fn msix_entry(&self, masked: bool) -> [u32; 4] {
        [
            self.address as u32,
            (self.address >> 32) as u32,
            self.data,
            if masked { ENTRY_MASKED } else { 0 },
        ]
    }
}

/// An MSI capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msi {
    pub cap: Capability,
    /// Message control as read.
    pub control: u16,
}

impl Msi {
    /// Parses the MSI capability `cap`.
    pub fn parse<C: ConfigSpace + ?Sized>(
        cs: &C,
        at: Bdf,
        cap: Capability,
    ) -> Result<Msi, CapError> {
        cap.check_len(4)?;
        let control = read_control(cs, at, cap);
        let msi = Msi { cap, control };
        let capable = (control >> MSI_CAPABLE_SHIFT) & MSI_VECTORS_MASK;
        if capable > MSI_MAX_LOG2_VECTORS {
            return Err(CapError::Reserved {
                id: cap.id,
                offset: cap.offset,
                field: "multiple message capable",
                value: u32::from(capable),
            });
        }
        cap.check_len(msi.cap_len())?;
        Ok(msi)
    }

    pub fn enabled(&self) -> bool {
        self.control & MSI_ENABLE != 0
    }

    pub fn is_64bit(&self) -> bool {
        self.control & MSI_64BIT != 0
    }

    pub fn per_vector_masking(&self) -> bool {
        self.control & MSI_PER_VECTOR_MASKING != 0
    }

    /// How many vectors the function can use (1–32).
    pub fn vectors(&self) -> u8 {
        1 << ((self.control >> MSI_CAPABLE_SHIFT) & MSI_VECTORS_MASK).min(MSI_MAX_LOG2_VECTORS)
    }

    /// Bytes of the capability.
    pub fn cap_len(&self) -> u8 {
        // Header, address, data (padded to a dword); an upper address
        // dword; mask and pending dwords.
        let mut len = 12;
        if self.is_64bit() {
            len += 4;
        }
        if self.per_vector_masking() {
            len += 8;
        }
        len
    }

    /// Offset of the data register (16 bits).
    pub fn data_offset(&self) -> u16 {
        self.cap.at(if self.is_64bit() { 12 } else { 8 })
    }

    /// Offset of the mask register, when the function can mask vectors.
    pub fn mask_offset(&self) -> Option<u16> {
        self.per_vector_masking()
            .then(|| self.cap.at(if self.is_64bit() { 16 } else { 12 }))
    }
}

/// Where an MSI-X structure lies: BAR `bar` (0–5), `offset` bytes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarLocation {
    pub bar: u8,
    pub offset: u32,
}

/// An MSI-X capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msix {
    pub cap: Capability,
    /// Message control as read.
    pub control: u16,
    pub table: BarLocation,
    /// The pending bit array.
    pub pba: BarLocation,
}

/// MSI-X structures that do not fit the BAR they are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsixError {
    /// The BAR the structure names is unused, broken or an I/O BAR.
    NotAMemoryBar { bar: u8 },
    /// The structure runs past the end of its BAR.
    OutsideBar {
        bar: u8,
        offset: u32,
        len: u32,
        bar_size: u64,
    },
}

impl fmt::Display for MsixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MsixError::NotAMemoryBar { bar } => write!(f, "MSI-X names BAR {bar}, not a memory BAR"),
            MsixError::OutsideBar {
                bar,
                offset,
                len,
                bar_size,
            } => write!(
                f,
                "MSI-X structure at {offset:#x} ({len:#x} bytes) runs past BAR {bar} ({bar_size:#x} bytes)"
            ),
        }
    }
}

impl Msix {
    /// Parses the MSI-X capability `cap`.
    pub fn parse<C: ConfigSpace + ?Sized>(
        cs: &C,
        at: Bdf,
        cap: Capability,
    ) -> Result<Msix, CapError> {
        cap.check_len(MSIX_CAP_LEN)?;
        let control = read_control(cs, at, cap);
        let location = |within: u8, field: &'static str| {
            let raw = dword(cs, at, cap.at(within));
            let bar = raw & BIR_MASK;
            if bar as usize >= MAX_BARS {
                return Err(CapError::Reserved {
                    id: cap.id,
                    offset: cap.offset,
                    field,
                    value: bar,
                });
            }
            Ok(BarLocation {
                bar: bar as u8,
                offset: raw & !BIR_MASK,
            })
        };
        Ok(Msix {
            cap,
            control,
            table: location(MSIX_TABLE, "table BAR indicator")?,
            pba: location(MSIX_PBA, "PBA BAR indicator")?,
        })
    }

    /// Entries in the table (1–2048).
    pub fn table_size(&self) -> u16 {
        (self.control & MSIX_TABLE_SIZE_MASK) + 1
    }

    pub fn enabled(&self) -> bool {
        self.control & MSIX_ENABLE != 0
    }

    pub fn function_masked(&self) -> bool {
        self.control & MSIX_FUNCTION_MASK != 0
    }

    /// Bytes of the table.
    pub fn table_len(&self) -> u32 {
        u32::from(self.table_size()) * ENTRY_SIZE
    }

    /// Bytes of the pending bit array: one bit per entry, in whole qwords.
    pub fn pba_len(&self) -> u32 {
        u32::from(self.table_size()).div_ceil(64) * 8
    }

    /// Offset of entry `index` in the table's BAR, or `None` past the
    /// table (or past 4 GiB, which no BAR offset field can reach).
    pub fn entry_offset(&self, index: u16) -> Option<u32> {
        if index >= self.table_size() {
            return None;
        }
        self.table.offset.checked_add(u32::from(index) * ENTRY_SIZE)
    }

    /// The page-aligned range of the table's BAR (offsets from the BAR's
    /// start) that holds the table: what the platform service keeps out of
    /// a driver's mapping. `bars` are the function's BARs. The BAR is
    /// assumed to start on a page boundary (the platform service places
    /// memory BARs so); for a BAR smaller than a page the range covers
    /// the page, i.e. the whole BAR.
    pub fn table_pages(&self, bars: &[BarSlot; MAX_BARS]) -> Result<Range<u64>, MsixError> {
        pages_of(bars, self.table, self.table_len())
    }

    /// The page-aligned range of the PBA's BAR holding the pending bits.
    pub fn pba_pages(&self, bars: &[BarSlot; MAX_BARS]) -> Result<Range<u64>, MsixError> {
        pages_of(bars, self.pba, self.pba_len())
    }
}

/// The pages of `location`'s BAR covering `len` bytes from its offset,
/// after checking they lie inside that memory BAR.
fn pages_of(
    bars: &[BarSlot; MAX_BARS],
    location: BarLocation,
    len: u32,
) -> Result<Range<u64>, MsixError> {
    let bar = match bars.get(usize::from(location.bar)).and_then(BarSlot::bar) {
        Some(bar) if bar.is_memory() => bar,
        _ => return Err(MsixError::NotAMemoryBar { bar: location.bar }),
    };
    // Offsets and lengths are below 2^32, so their sum fits in u64.
    let start = u64::from(location.offset);
    let end = start + u64::from(len);
    if end > bar.size {
        return Err(MsixError::OutsideBar {
            bar: location.bar,
            offset: location.offset,
            len,
            bar_size: bar.size,
        });
    }
    Ok(start & !(PAGE_SIZE - 1)..end.next_multiple_of(PAGE_SIZE))
}

/// The parts of a BAR of `bar_size` bytes outside `hole` (e.g. the MSI-X
/// table's pages): below it and above it, each `None` when empty. A hole
/// reaching past the BAR's end is cut at it.
pub fn mappable_around(bar_size: u64, hole: Range<u64>) -> [Option<Range<u64>>; 2] {
    let start = hole.start.min(bar_size);
    let end = hole.end.clamp(start, bar_size);
    [
        (start > 0).then_some(0..start),
        (end < bar_size).then_some(end..bar_size),
    ]
}

/// Sets the MSI-X enable and function-mask bits of `msix`'s capability in
/// function `at` and returns the control value written. The capability's
/// first dword is read fresh and written whole: its ID and next pointer
/// are read-only, so writing them back changes nothing.
pub fn set_msix_control<C: ConfigSpace + ?Sized>(
    cs: &mut C,
    at: Bdf,
    msix: &Msix,
    enable: bool,
    function_mask: bool,
) -> u16 {
    let mut set = 0;
    if enable {
        set |= MSIX_ENABLE;
    }
    if function_mask {
        set |= MSIX_FUNCTION_MASK;
    }
    update_control(cs, at, msix.cap, MSIX_ENABLE | MSIX_FUNCTION_MASK, set)
}

/// Turns MSI off in `msi`'s capability (before MSI-X goes on, or when the
/// function is reset).
pub fn disable_msi<C: ConfigSpace + ?Sized>(cs: &mut C, at: Bdf, msi: &Msi) -> u16 {
    update_control(cs, at, msi.cap, MSI_ENABLE, 0)
}

/// Programs `msi` to send `message` with a single vector and enables it
/// (the fallback for functions without MSI-X). MSI is off while the
/// address and data change, so no half-written message is ever sent.
pub fn program_msi<C: ConfigSpace + ?Sized>(
    cs: &mut C,
    at: Bdf,
    msi: &Msi,
    message: MsiMessage,
) -> Result<u16, MsiProgramError> {
    if !msi.is_64bit() && message.address > u64::from(u32::MAX) {
        return Err(MsiProgramError::AddressNeeds64Bits);
    }
    disable_msi(cs, at, msi);
    write_dword(cs, at, msi.cap.at(4), message.address as u32);
    if msi.is_64bit() {
        write_dword(cs, at, msi.cap.at(8), (message.address >> 32) as u32);
    }
    // The dword holds the 16-bit data register and (PCI 3.0) reserved or
    // extended-data bits above it, which stay zero.
    write_dword(cs, at, msi.data_offset(), message.data & 0xffff);
    // One vector: "multiple message enable" = 0.
    let clear = MSI_ENABLE | MSI_VECTORS_MASK << MSI_ENABLED_VECTORS_SHIFT;
    Ok(update_control(cs, at, msi.cap, clear, MSI_ENABLE))
}

/// An MSI message the capability cannot carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsiProgramError {
    /// The address is above 4 GiB and the capability has 32 address bits.
    AddressNeeds64Bits,
}

/// The message control register of `cap` (the upper half of its first
/// dword, behind the ID and next pointer).
fn read_control<C: ConfigSpace + ?Sized>(cs: &C, at: Bdf, cap: Capability) -> u16 {
    (dword(cs, at, cap.at(0)) >> 16) as u16
}

/// Rewrites the message control register of `cap`: clears `clear`, sets
/// `set`, returns the value written.
fn update_control<C: ConfigSpace + ?Sized>(
    cs: &mut C,
    at: Bdf,
    cap: Capability,
    clear: u16,
    set: u16,
) -> u16 {
    let first = dword(cs, at, cap.at(0));
    let control = ((first >> 16) as u16 & !clear) | set;
    write_dword(
        cs,
        at,
        cap.at(0),
        (first & 0xffff) | u32::from(control) << 16,
    );
    control
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bar::{Bar, BarKind};
    use crate::cap::id;

    fn msix(control: u16, table: BarLocation, pba: BarLocation) -> Msix {
        Msix {
            cap: Capability {
                id: id::MSIX,
                offset: 0x98,
            },
            control,
            table,
            pba,
        }
    }

    fn memory_bar(size: u64) -> BarSlot {
        BarSlot::Bar(Bar {
            kind: BarKind::Memory32,
            prefetchable: false,
            address: 0xfebd_1000,
            size,
        })
    }

    #[test]
    fn x86_message() {
        let m = MsiMessage::x86(3, 0x41).unwrap();
        assert_eq!(m.address, 0xfee0_3000);
        assert_eq!(m.data, 0x41);
        assert_eq!(m.msix_entry(true), [0xfee0_3000, 0, 0x41, 1]);
        assert_eq!(m.msix_entry(false), [0xfee0_3000, 0, 0x41, 0]);
        assert_eq!(MsiMessage::x86(255, 0xfe).unwrap().address, 0xfeef_f000);
        assert_eq!(
            MsiMessage::x86(0, 31),
            Err(MessageError::ReservedVector(31))
        );
    }

    #[test]
    fn msix_sizes_and_entries() {
        let loc = |bar, offset| BarLocation { bar, offset };
        let m = msix(0x0003, loc(1, 0), loc(1, 0x800));
        assert_eq!(m.table_size(), 4);
        assert_eq!(m.table_len(), 64);
        assert_eq!(m.pba_len(), 8);
        assert_eq!(m.entry_offset(3), Some(0x30));
        assert_eq!(m.entry_offset(4), None);
        let full = msix(0x07ff | MSIX_ENABLE, loc(0, 0x2000), loc(0, 0x3000));
        assert_eq!(full.table_size(), 2048);
        assert_eq!(full.pba_len(), 256);
        assert!(full.enabled() && !full.function_masked());
        let top = msix(0x0001, loc(0, 0xffff_fff8), loc(0, 0));
        assert_eq!(top.entry_offset(1), None);
    }

    #[test]
    fn msix_table_pages() {
        let loc = |bar, offset| BarLocation { bar, offset };
        let mut bars = [BarSlot::Unused; MAX_BARS];
        bars[1] = memory_bar(0x1000);
        bars[4] = memory_bar(0x4000);
        // QEMU's virtio: table and PBA share BAR 1's only page.
        let m = msix(0x0003, loc(1, 0), loc(1, 0x800));
        assert_eq!(m.table_pages(&bars), Ok(0..0x1000));
        assert_eq!(m.pba_pages(&bars), Ok(0..0x1000));
        // A table straddling a page boundary takes both pages.
        let m = msix(0x00ff, loc(4, 0x1800), loc(4, 0x3000));
        assert_eq!(m.table_pages(&bars), Ok(0x1000..0x3000));
        assert_eq!(m.pba_pages(&bars), Ok(0x3000..0x4000));
        let m = msix(0x00ff, loc(4, 0x3800), loc(4, 0));
        assert_eq!(
            m.table_pages(&bars),
            Err(MsixError::OutsideBar {
                bar: 4,
                offset: 0x3800,
                len: 0x1000,
                bar_size: 0x4000
            })
        );
        let m = msix(0, loc(2, 0), loc(1, 0));
        assert_eq!(
            m.table_pages(&bars),
            Err(MsixError::NotAMemoryBar { bar: 2 })
        );
        bars[2] = BarSlot::Bar(Bar {
            kind: BarKind::Io,
            prefetchable: false,
            address: 0xc000,
            size: 0x40,
        });
        assert_eq!(
            m.table_pages(&bars),
            Err(MsixError::NotAMemoryBar { bar: 2 })
        );
    }

    #[test]
    #[allow(
        clippy::reversed_empty_ranges,
        reason = "nonsense holes are under test"
    )]
    fn mappable_parts_around_a_hole() {
        assert_eq!(
            mappable_around(0x4000, 0x1000..0x2000),
            [Some(0..0x1000), Some(0x2000..0x4000)]
        );
        assert_eq!(mappable_around(0x1000, 0..0x1000), [None, None]);
        assert_eq!(
            mappable_around(0x4000, 0..0x1000),
            [None, Some(0x1000..0x4000)]
        );
        assert_eq!(
            mappable_around(0x4000, 0x3000..0x5000),
            [Some(0..0x3000), None]
        );
        assert_eq!(mappable_around(0x100, 0..0x1000), [None, None]);
        // Nonsense holes never produce an inverted or out-of-BAR range.
        assert_eq!(
            mappable_around(0x4000, 0x9000..0x1000),
            [Some(0..0x4000), None]
        );
    }
}
