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
//! | [`INFO`] | `INFO` | the module's name | [`OK`], words: its size in bytes, its pages, its frames, its phase ([`ModuleInfo`]); or [`NOT_FOUND`] |
//! | [`FRAME`] | `FRAME` \| i << [`INDEX_SHIFT`] | the module's name | [`OK`] with one capability: frame `i` of the module, minted read-only, and words: its offset in the module, its size (4 KiB or 2 MiB); or [`NOT_FOUND`], [`OUT_OF_RANGE`], [`NO_MEMORY`] |
//!
//! (Opcode 2, `PAGE`, a copied 4 KiB page, is gone: [`FRAME`] replaced it.)
//!
//! Names: every boot-image entry, and `config`: the client's own config
//! table (its tree as the config ROM encodes it, `ucore::config`; none
//! without a config), read with `ucore::config::parse_tree` — never the
//! scenario's ROM, which holds every component's config. Genode's
//! `config` ROM.
//!
//! **A boot module is a read-only dataspace of the boot image's own
//! memory.** Its frames are the kernel's frames of the boot image
//! (`abi::bootinfo`, "ROM frames"): 4 KiB frames, and 2 MiB frames where
//! a whole 2 MiB of the module is 2 MiB aligned in physical memory (xtask
//! puts modules of 2 MiB or more on 2 MiB boundaries of the image, so
//! when QEMU loads the image 2 MiB aligned a large module is 2 MiB frames
//! but for its last partial 2 MiB). No frame holds bytes of another
//! module. To map the 2 MiB frames the module must start `phase` bytes
//! past a 2 MiB boundary of the client's address space ([`ModuleInfo`];
//! [`Session::map_module`] places it so). Read-only is the frames' own
//! right: the kernel made them with `READ` alone, a mint cannot add
//! rights, so a writable (or executable) mapping is refused
//! (`InsufficientRights`), for every holder, init and root included.
//!
//! **Cost.** A `FRAME` of a boot module is one `CapMint` in init: no copy,
//! no memory and no slot of init's, the same frames for every client (a
//! module read by three clients is in memory once: where QEMU loaded the
//! boot image, which was never free memory). The client pays one slot of
//! its capability quota per frame and its page tables (from its address
//! space's page-table pool; a 2 MiB frame needs no page table) — nothing
//! of its RAM quota for the bytes. Only `config` (the client's config
//! tree, a slice of the config ROM that starts anywhere) is copied: a
//! fresh frame of init's own memory per page and request (a `Retype`, a
//! `Map` at init's scratch page, a copy, an `Unmap`, a `CapMint`), kept
//! for the rest of the run — a page or two per component.

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

/// Opcode: a module's size and shape ([`ModuleInfo`]).
pub const INFO: u64 = 1;
/// Opcode: one frame of a module, as a read-only frame capability.
pub const FRAME: u64 = 3;
/// Shift of the frame index in a `FRAME` label.
pub const INDEX_SHIFT: u32 = 8;
/// The reply to a request served.
pub const OK: u64 = 0;
/// The reply to a request the server does not know.
pub const UNKNOWN: u64 = 0xe0;
/// Refused: no module of that name.
pub const NOT_FOUND: u64 = 0xe1;
/// Refused: the frame index is past the module's last frame.
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
        /// The module's frames (one slot each).
        frames: u64,
    },
    /// The frame index is past the module's last frame.
    OutOfRange,
    /// The module has 2 MiB frames and the address given is not `phase`
    /// bytes past a 2 MiB boundary ([`Session::map_module`] places it).
    Misaligned {
        /// Where the module must start in a 2 MiB page.
        phase: u64,
    },
    /// The server's answer does not describe a frame of the module.
    BadReply,
    /// The call failed.
    Ipc(Error),
    /// Mapping a frame failed.
    Map(Error),
}

impl core::fmt::Display for RomError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RomError::NotFound => f.write_str("refused: no such ROM module"),
            RomError::Refused(label) => write!(f, "refused by the server (label {label:#x})"),
            RomError::TooLarge { frames } => {
                write!(f, "{frames} frames: more than the slots given")
            }
            RomError::Misaligned { phase } => write!(
                f,
                "the module's 2 MiB frames need an address {phase:#x} past a 2 MiB boundary"
            ),
            RomError::OutOfRange => f.write_str("refused: past the module's last frame"),
            RomError::BadReply => f.write_str("the server's reply is not a frame of the module"),
            RomError::Ipc(e) => write!(f, "the call failed: {e}"),
            RomError::Map(e) => write!(f, "mapping a frame failed: {e}"),
        }
    }
}

fn refused(label: u64) -> RomError {
    match label {
        NOT_FOUND => RomError::NotFound,
        OUT_OF_RANGE => RomError::OutOfRange,
        other => RomError::Refused(other),
    }
}

/// A module's size and shape: `INFO`'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Its bytes.
    pub size: u64,
    /// Its 4 KiB pages (the last zero past `size`).
    pub pages: u64,
    /// Its frames: a slot each to map it.
    pub frames: u64,
    /// Where it must start in a 2 MiB page of the client's address space
    /// for its 2 MiB frames to map: 0 when it has none (any page-aligned
    /// address then).
    pub phase: u64,
}

impl ModuleInfo {
    /// Whether it has 2 MiB frames.
    pub fn has_large(&self) -> bool {
        self.frames != self.pages
    }

    /// The bytes of address space [`Session::map_module`] takes from a
    /// 2 MiB-aligned window's start: the phase and the pages.
    pub fn window_bytes(&self) -> u64 {
        self.phase + self.pages * PAGE_SIZE
    }
}

/// Bytes of a 2 MiB frame.
const LARGE: u64 = 2 << 20;

impl Session<Rom> {
    /// Module `name`'s size in bytes and pages.
    pub fn info(&self, name: &str) -> Result<(u64, u64), RomError> {
        self.module(name).map(|m| (m.size, m.pages))
    }

    /// Module `name`'s size and shape.
    pub fn module(&self, name: &str) -> Result<ModuleInfo, RomError> {
        let (reply, words) = self.call(INFO, pack(name)).map_err(RomError::Ipc)?;
        match reply.label() {
            OK => Ok(ModuleInfo {
                size: words[0],
                pages: words[1],
                frames: words[2],
                phase: words[3],
            }),
            other => Err(refused(other)),
        }
    }

    /// Maps module `name` read-only at `va`, its frames in the empty
    /// slots `first_slot..end_slot` of the caller's (one per frame:
    /// [`ModuleInfo::frames`], at most one per page); returns its bytes.
    /// `va` is page-aligned, and for a module with 2 MiB frames
    /// [`ModuleInfo::phase`] past a 2 MiB boundary (else
    /// [`RomError::Misaligned`]: [`Session::map_module`] finds the place).
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
        let module = self.module(name)?;
        if module.has_large() && va % LARGE != module.phase {
            return Err(RomError::Misaligned {
                phase: module.phase,
            });
        }
        // SAFETY: the caller's promise, passed on.
        unsafe { self.map_frames(name, &module, first_slot, end_slot, va) }
    }

    /// Maps module `name` read-only in the 2 MiB-aligned `window` of the
    /// caller's address space, where its 2 MiB frames map — at `window +`
    /// [`ModuleInfo::phase`] — with its frames in the empty slots
    /// `first_slot..end_slot`; returns its bytes, one contiguous
    /// read-only slice. What a VMM does with a guest kernel or an
    /// initramfs of tens of MiB: no copy, a slot per frame (a 40 MiB
    /// module loaded 2 MiB aligned is 20 frames), nothing of its RAM
    /// quota but page tables. Needs `child::OWN_VSPACE`.
    ///
    /// # Safety
    ///
    /// `[window, window + 2 MiB + the module's size)` (at least
    /// [`ModuleInfo::window_bytes`]) is a region of the caller's address
    /// space that nothing else uses, for as long as the returned slice
    /// lives.
    pub unsafe fn map_module(
        &self,
        name: &str,
        first_slot: u32,
        end_slot: u32,
        window: u64,
    ) -> Result<&'static [u8], RomError> {
        if !window.is_multiple_of(LARGE) {
            return Err(RomError::Misaligned { phase: 0 });
        }
        let module = self.module(name)?;
        // SAFETY: the caller gives the window, which holds phase + pages.
        unsafe { self.map_frames(name, &module, first_slot, end_slot, window + module.phase) }
    }

    /// Frame `i` of module `name`, read-only, into the caller's empty
    /// slot `slot`: its offset in the module and its bytes (4 KiB or
    /// 2 MiB). An index past the module's frames is refused
    /// ([`RomError::OutOfRange`]).
    pub fn frame(&self, name: &str, i: u64, slot: u32) -> Result<(u64, u64), RomError> {
        let label = i
            .checked_shl(INDEX_SHIFT)
            .filter(|l| l >> INDEX_SHIFT == i)
            .ok_or(RomError::OutOfRange)?;
        let info = MsgInfo::new(FRAME | label, 4, 0).ok_or(RomError::OutOfRange)?;
        let (reply, words) =
            transfer::call_for_cap(self.cap, info, pack(name), own(slot)).map_err(RomError::Ipc)?;
        if reply.label() != OK || reply.caps() != 1 {
            return Err(refused(reply.label()));
        }
        Ok((words[0], words[1]))
    }

    /// Asks for every frame of `module` and maps each at its offset from
    /// `va`.
    ///
    /// # Safety
    ///
    /// As for [`Session::map`].
    unsafe fn map_frames(
        &self,
        name: &str,
        module: &ModuleInfo,
        first_slot: u32,
        end_slot: u32,
        va: u64,
    ) -> Result<&'static [u8], RomError> {
        let frames = module.frames;
        if frames > u64::from(end_slot.saturating_sub(first_slot)) {
            return Err(RomError::TooLarge { frames });
        }
        if module.size > module.pages * PAGE_SIZE || !va.is_multiple_of(PAGE_SIZE) {
            return Err(RomError::BadReply);
        }
        // The frames must tile the module in order, without a gap or an
        // overlap: `covered` is where the next one has to start.
        let mut covered = 0u64;
        for i in 0..frames {
            let slot = first_slot + i as u32;
            let (offset, bytes) = self.frame(name, i, slot)?;
            let slot = own(slot);
            let fits = offset
                .checked_add(bytes)
                .is_some_and(|end| end <= module.pages * PAGE_SIZE);
            if !fits || !(bytes == PAGE_SIZE || bytes == LARGE) || offset != covered {
                return Err(RomError::BadReply);
            }
            covered = offset + bytes;
            // SAFETY: the caller gives the region to this module alone;
            // the frame lies inside the module's pages.
            unsafe { syscall::map(own(OWN_VSPACE), slot, va + offset, RO) }
                .map_err(RomError::Map)?;
        }
        if covered < module.size {
            return Err(RomError::BadReply);
        }
        // SAFETY: the frames mapped above tile [va, va + covered) without
        // a gap (checked in the loop and just now), and covered >= size;
        // the caller keeps the region for them; the frames are
        // read-only, so nobody writes them while the slice lives.
        Ok(unsafe { core::slice::from_raw_parts(va as *const u8, module.size as usize) })
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
