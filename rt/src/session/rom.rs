//! The ROM session: read-only boot modules, served by init itself (a
//! `Rom` route to `parent`, with `Rom` in the scenario's
//! `parent_provides`). Genode's `rom_session.h`, minus updates.
//!
//! The session capability is init's own endpoint, minted write-only with
//! the client's badge and [`interfaces::session::PARENT_SESSION`]; init answers
//! each request itself, at once (it never calls out while serving one). The
//! module's name travels in every request (words 0..4, `pack`, at most 32
//! bytes): `OPEN` carries only the session type until sessions get
//! arguments.
//!
//! | opcode | label | words | reply |
//! |--------|-------|-------|-------|
//! | [`INFO`] | `INFO` | the module's name | [`OK`], word 0: its size in bytes, word 1: its pages; or [`NOT_FOUND`] |
//! | [`PAGE`] | `PAGE` \| i << [`INDEX_SHIFT`] | the module's name | [`OK`] with one capability: a 4 KiB frame holding bytes `i * 4096..` of the module (zero past its end), minted read-only; or [`NOT_FOUND`], [`OUT_OF_RANGE`], [`NO_MEMORY`] |
//!
//! Names: every boot-image entry, and `config`: the client's own config
//! table (its tree as the config ROM encodes it, `ucore::config`; none
//! without a config), read with `ucore::config::parse_tree` — never the
//! scenario's ROM, which holds every component's config. Genode's
//! `config` ROM. **Cost**: init copies each page into
//! a fresh frame from its own memory (a `Retype`, a `Map` at its scratch
//! page, 4 KiB copied, an `Unmap`, a `CapMint`) on every `PAGE` request,
//! and keeps the frame (one slot of its own range and 4 KiB of its own
//! reserve each) for the rest of the run: no cache, no quota donated by the
//! client and no close yet, so a client that reads a module again pays
//! init again. The read-only mint is what makes the dataspace read-only:
//! the kernel refuses a writable mapping of it.

use abi::caddr::own;
use abi::map::{Cache, MapAttr};
use abi::{Error, MsgInfo};
use interfaces::child::OWN_VSPACE;
use interfaces::session::pack;
use ucore::load::PAGE_SIZE;

use super::{Interface, Session};
use crate::syscall;
use crate::transfer;

/// The ROM interface.
pub struct Rom;

impl Interface for Rom {
    const NAME: &'static str = "Rom";
}

/// Opcode: a module's size.
pub const INFO: u64 = 1;
/// Opcode: one page of a module, as a read-only frame capability.
pub const PAGE: u64 = 2;
/// Shift of the page index in a `PAGE` label.
pub const INDEX_SHIFT: u32 = 8;
/// The reply to a request served.
pub const OK: u64 = 0;
/// The reply to a request the server does not know.
pub const UNKNOWN: u64 = 0xe0;
/// Refused: no module of that name.
pub const NOT_FOUND: u64 = 0xe1;
/// Refused: the page index is past the module's end.
pub const OUT_OF_RANGE: u64 = 0xe2;
/// Refused: the server has no memory or slot left for the frame.
pub const NO_MEMORY: u64 = 0xe3;

/// Read-only, write-back.
const RO: MapAttr = MapAttr {
    writable: false,
    executable: false,
    cache: Cache::WriteBack,
};

/// Why a ROM request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RomError {
    /// No module of that name.
    NotFound,
    /// The server refused with this label.
    Refused(u64),
    /// The module needs more slots than the caller gave.
    TooLarge {
        /// The module's pages.
        pages: u64,
    },
    /// The call failed.
    Ipc(Error),
    /// Mapping a page failed.
    Map(Error),
}

impl core::fmt::Display for RomError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RomError::NotFound => f.write_str("refused: no such ROM module"),
            RomError::Refused(label) => write!(f, "refused by the server (label {label:#x})"),
            RomError::TooLarge { pages } => write!(f, "{pages} pages: more than the slots given"),
            RomError::Ipc(e) => write!(f, "the call failed: {e}"),
            RomError::Map(e) => write!(f, "mapping a page failed: {e}"),
        }
    }
}

fn refused(label: u64) -> RomError {
    match label {
        NOT_FOUND => RomError::NotFound,
        other => RomError::Refused(other),
    }
}

impl Session<Rom> {
    /// Module `name`'s size in bytes and pages.
    pub fn info(&self, name: &str) -> Result<(u64, u64), RomError> {
        let (reply, words) = self.call(INFO, pack(name)).map_err(RomError::Ipc)?;
        match reply.label() {
            OK => Ok((words[0], words[1])),
            other => Err(refused(other)),
        }
    }

    /// Maps module `name` read-only at `va`, its page frames in the empty
    /// slots `first_slot..end_slot` of the caller's; returns its bytes.
    /// Needs `child::OWN_VSPACE` (a component granted `own = ["vspace"]`).
    ///
    /// # Safety
    ///
    /// `[va, va + pages * 4096)` is a region of the caller's address space
    /// that nothing else uses, page-aligned, for as long as the returned
    /// slice lives.
    pub unsafe fn map(
        &self,
        name: &str,
        first_slot: u32,
        end_slot: u32,
        va: u64,
    ) -> Result<&'static [u8], RomError> {
        let (size, pages) = self.info(name)?;
        if pages > u64::from(end_slot.saturating_sub(first_slot)) {
            return Err(RomError::TooLarge { pages });
        }
        for i in 0..pages {
            let slot = own(first_slot + i as u32);
            let info =
                MsgInfo::new(PAGE | i << INDEX_SHIFT, 4, 0).ok_or(RomError::TooLarge { pages })?;
            let (reply, _) =
                transfer::call_for_cap(self.cap, info, pack(name), slot).map_err(RomError::Ipc)?;
            if reply.label() != OK || reply.caps() != 1 {
                return Err(refused(reply.label()));
            }
            // SAFETY: the caller gives the region to this module alone.
            unsafe { syscall::map(own(OWN_VSPACE), slot, va + i * PAGE_SIZE, RO) }
                .map_err(RomError::Map)?;
        }
        // SAFETY: `size` bytes (at most `pages` pages) are mapped readable
        // at `va` above, and the caller keeps the region for them; the
        // frames are read-only, so nobody writes them.
        Ok(unsafe { core::slice::from_raw_parts(va as *const u8, size as usize) })
    }
}

/// The component's own `config` ROM, parsed (`ucore::config`): a Rom
/// session opened through the parent into own slot `slot`, the module
/// mapped at `va` (its frames in slots `first_slot..end_slot`). What a
/// component with settings does first (its scenario routes `Rom` to the
/// parent and grants `own = ["vspace"]`). The error says which step
/// failed.
///
/// # Safety
///
/// As for [`Session::map`]: `[va, va + pages * 4096)` is the module's
/// alone for the rest of the program.
pub unsafe fn config(
    slot: u32,
    first_slot: u32,
    end_slot: u32,
    va: u64,
) -> Result<ucore::config::Table<'static>, alloc::string::String> {
    use alloc::format;
    let rom = super::open::<Rom>(slot).map_err(|e| format!("Rom session: {e}"))?;
    // SAFETY: the caller's promise, passed on.
    let bytes = unsafe { rom.map("config", first_slot, end_slot, va) }
        .map_err(|e| format!("config ROM: {e}"))?;
    ucore::config::parse_tree(bytes)
        .map_err(|(at, fault)| format!("config ROM at byte {at}: {fault}"))
}
