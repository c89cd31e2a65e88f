//! The capability list: a chain of small register blocks in the first 256
//! bytes of configuration space, each starting with an ID byte and the
//! offset of the next one (0 ends the chain). The header's capabilities
//! pointer starts it when the status register says there is one.
//!
//! # Invariants of the walk
//!
//! A device chooses every pointer, so the walk trusts none of them:
//!
//! - a pointer below 0x40 (into the header) or with its low two bits set
//!   is an error ([`CapError::PointerIntoHeader`], [`CapError::Misaligned`]).
//!   PCI 3.0 calls those two bits reserved and tells software to mask them;
//!   every conforming device returns them as zero, so one that does not is
//!   treated as broken rather than guessed at;
//! - a pointer to a capability already walked is an error
//!   ([`CapError::Loop`]); as only 48 aligned offsets lie in 0x40..0x100,
//!   the walk takes at most [`MAX_CAPABILITIES`] steps;
//! - an error ends the walk; the capabilities found before it are kept.
//!
//! Parsers of a capability's body ([`crate::msi`], [`crate::virtio`]) check
//! with [`Capability::check_len`] that the body ends inside the 256 bytes
//! ([`CapError::Truncated`]). Extended capabilities (PCI Express, from
//! 0x100 on) are not walked yet.

use core::fmt;

use crate::config::{byte, reg, word, Bdf, ConfigSpace, Layout, LEGACY_CONFIG_SIZE};

/// Capability IDs (PCI Code and ID Assignment, chapter 2).
pub mod id {
    pub const POWER_MANAGEMENT: u8 = 0x01;
    pub const MSI: u8 = 0x05;
    pub const VENDOR_SPECIFIC: u8 = 0x09;
    pub const PCI_EXPRESS: u8 = 0x10;
    pub const MSIX: u8 = 0x11;
    pub const SATA: u8 = 0x12;
}

/// The lowest offset a capability can have: the header ends there.
pub const FIRST_OFFSET: u8 = 0x40;

/// Most capabilities a list can hold: one per aligned offset in
/// `0x40..0x100`.
pub const MAX_CAPABILITIES: usize = (LEGACY_CONFIG_SIZE as usize - FIRST_OFFSET as usize) / 4;

/// One capability: its ID and where it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capability {
    pub id: u8,
    /// Offset in configuration space: 4-aligned, at least 0x40.
    pub offset: u8,
}

impl Capability {
    /// Checks that a body of `len` bytes starting at this capability ends
    /// inside the first 256 bytes.
    pub fn check_len(&self, len: u8) -> Result<(), CapError> {
        if u16::from(self.offset) + u16::from(len) > LEGACY_CONFIG_SIZE {
            Err(CapError::Truncated {
                id: self.id,
                offset: self.offset,
                len,
            })
        } else {
            Ok(())
        }
    }

    /// Configuration-space offset of byte `within` of this capability.
    pub fn at(&self, within: u8) -> u16 {
        u16::from(self.offset) + u16::from(within)
    }
}

/// Why a capability list or a capability is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapError {
    /// The pointer read at config offset `from` points into the header.
    PointerIntoHeader { from: u16, pointer: u8 },
    /// The pointer read at config offset `from` has its low bits set.
    Misaligned { from: u16, pointer: u8 },
    /// The pointer read at config offset `from` leads back to a capability
    /// already walked.
    Loop { from: u16, pointer: u8 },
    /// Capability `id` at `offset` needs `len` bytes, which run past the
    /// first 256 bytes of configuration space.
    Truncated { id: u8, offset: u8, len: u8 },
    /// A field of capability `id` at `offset` holds a value the
    /// specification reserves.
    Reserved {
        id: u8,
        offset: u8,
        field: &'static str,
        value: u32,
    },
}

impl fmt::Display for CapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CapError::PointerIntoHeader { from, pointer } => write!(
                f,
                "capability pointer {pointer:#04x} (at {from:#x}) points into the header"
            ),
            CapError::Misaligned { from, pointer } => write!(
                f,
                "capability pointer {pointer:#04x} (at {from:#x}) is not 4-byte aligned"
            ),
            CapError::Loop { from, pointer } => write!(
                f,
                "capability pointer {pointer:#04x} (at {from:#x}) leads back into the list"
            ),
            CapError::Truncated { id, offset, len } => write!(
                f,
                "capability {id:#04x} at {offset:#04x} needs {len} bytes beyond the first 256"
            ),
            CapError::Reserved {
                id,
                offset,
                field,
                value,
            } => write!(
                f,
                "capability {id:#04x} at {offset:#04x}: reserved {field} {value:#x}"
            ),
        }
    }
}

/// A function's capabilities in list order, and the error that ended the
/// walk early, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    list: [Capability; MAX_CAPABILITIES],
    len: u8,
    error: Option<CapError>,
}

impl Capabilities {
    /// No capabilities, no error.
    pub const EMPTY: Capabilities = Capabilities {
        list: [Capability { id: 0, offset: 0 }; MAX_CAPABILITIES],
        len: 0,
        error: None,
    };

    /// The capabilities found, in list order.
    pub fn as_slice(&self) -> &[Capability] {
        &self.list[..usize::from(self.len)]
    }

    /// The first capability with ID `id`.
    pub fn find(&self, id: u8) -> Option<Capability> {
        self.as_slice().iter().copied().find(|c| c.id == id)
    }

    /// Why the walk stopped before the end of the list, if it did.
    pub fn error(&self) -> Option<CapError> {
        self.error
    }
}

/// Walks the capability list of function `at`, whose header has layout
/// `layout`: no list when the status register says there is none or the
/// layout is unknown.
pub fn read<C: ConfigSpace + ?Sized>(cs: &C, at: Bdf, layout: Layout) -> Capabilities {
    let pointer_register = match layout {
        Layout::Endpoint | Layout::PciBridge => reg::CAPABILITIES_PTR,
        Layout::CardBusBridge => reg::CARDBUS_CAPABILITIES_PTR,
        Layout::Unknown(_) => return Capabilities::EMPTY,
    };
    if word(cs, at, reg::STATUS) & reg::STATUS_CAPABILITIES == 0 {
        return Capabilities::EMPTY;
    }
    walk(cs, at, pointer_register)
}

/// Walks the list whose first pointer is the byte at config offset
/// `pointer_register` (module docs: bounded, never panics).
pub fn walk<C: ConfigSpace + ?Sized>(cs: &C, at: Bdf, pointer_register: u16) -> Capabilities {
    let mut caps = Capabilities::EMPTY;
    // Bit i: the capability at 0x40 + 4 i has been walked.
    let mut seen = 0u64;
    let mut from = pointer_register;
    let mut pointer = byte(cs, at, from);
    while pointer != 0 {
        let error = if pointer < FIRST_OFFSET {
            Some(CapError::PointerIntoHeader { from, pointer })
        } else if !pointer.is_multiple_of(4) {
            Some(CapError::Misaligned { from, pointer })
        } else if seen & 1 << ((pointer - FIRST_OFFSET) / 4) != 0 {
            Some(CapError::Loop { from, pointer })
        } else {
            None
        };
        if let Some(error) = error {
            caps.error = Some(error);
            break;
        }
        seen |= 1 << ((pointer - FIRST_OFFSET) / 4);
        let offset = u16::from(pointer);
        // `seen` admits each of the 48 offsets once, so the list never
        // overflows; the check only documents that.
        if let Some(slot) = caps.list.get_mut(usize::from(caps.len)) {
            *slot = Capability {
                id: byte(cs, at, offset),
                offset: pointer,
            };
            caps.len += 1;
        }
        from = offset + 1;
        pointer = byte(cs, at, from);
    }
    caps
}
