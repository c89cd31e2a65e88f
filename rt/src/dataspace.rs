//! Dataspaces: memory a component allocates and shares, which every holder
//! of its capability can map (Genode's RAM dataspace and region map, on
//! Pecan frames).
//!
//! A dataspace is one frame object, 4 KiB or 2 MiB (the kernel's frame
//! sizes; larger shared regions are several dataspaces), named by a frame
//! capability. Its owner makes it from untyped memory
//! ([`Dataspace::alloc`], zeroed by the kernel) and hands copies out with
//! [`Dataspace::share`], read-only or writable: a writable mapping needs
//! `WRITE` on the capability, so a read-only share stays read-only in the
//! receiver (the kernel refuses to map it writable). The receiver wraps
//! the capability it got with [`Dataspace::from_cap`] (the size travels in
//! the message next to it) and maps it with [`Dataspace::attach`].
//!
//! Each capability maps the frame once (the kernel records one mapping per
//! capability); to map a dataspace twice, share it into a second slot.
//! [`Attached::detach`] unmaps. Revoking the owner's capability unmaps
//! every copy everywhere and, once the frame's last capability goes, the
//! memory returns to the untyped it came from: so an owner can take a
//! dataspace back from a client that misbehaves, and a client must treat
//! the memory as possibly gone (a later access faults).
//!
//! Boot modules are read-only dataspaces too, of the boot image's own
//! memory rather than an owner's: a `Rom` session hands out their frames
//! (`crate::session::rom`, `Session::map_module`).
//!
//! Invariant: an [`Attached`] exists only while its mapping does; the
//! bytes behind it may change under the holder at any time if the
//! dataspace is shared writable, so access goes through raw pointers or
//! volatile/atomic operations, never through long-lived references.

use abi::map::{Cache, MapAttr};
use abi::{CapSlot, Error, ObjectType, Rights};

use crate::syscall;

/// A dataspace's size: a frame size the kernel has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsSize {
    /// One 4 KiB frame.
    Page,
    /// One 2 MiB frame (2 MiB-aligned in memory and where it is mapped).
    Huge,
}

impl DsSize {
    /// The size in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            DsSize::Page => 4096,
            DsSize::Huge => 2 << 20,
        }
    }

    /// The frame object type.
    const fn object(self) -> ObjectType {
        match self {
            DsSize::Page => ObjectType::Frame4K,
            DsSize::Huge => ObjectType::Frame2M,
        }
    }

    /// The size that `bytes` names exactly (for a size received in a
    /// message: anything else is refused).
    pub fn from_bytes(bytes: u64) -> Option<DsSize> {
        match bytes {
            4096 => Some(DsSize::Page),
            0x20_0000 => Some(DsSize::Huge),
            _ => None,
        }
    }
}

/// A dataspace capability of the caller's, with its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dataspace {
    frame: CapSlot,
    size: DsSize,
}

impl Dataspace {
    /// Makes a zeroed dataspace of `size` from `untyped` into the empty
    /// slot `slot`. A 2 MiB dataspace needs a 2 MiB-aligned free part of
    /// the untyped (the kernel retypes at the next aligned offset).
    pub fn alloc(untyped: CapSlot, slot: CapSlot, size: DsSize) -> Result<Dataspace, Error> {
        syscall::retype(untyped, size.object(), 0, slot, 1)?;
        Ok(Dataspace { frame: slot, size })
    }

    /// A dataspace capability received in slot `frame` whose size the
    /// message said.
    pub fn from_cap(frame: CapSlot, size: DsSize) -> Dataspace {
        Dataspace { frame, size }
    }

    /// The capability.
    pub fn cap(&self) -> CapSlot {
        self.frame
    }

    /// The size.
    pub fn size(&self) -> DsSize {
        self.size
    }

    /// A copy of the capability in the empty slot `slot`, writable or
    /// read-only, to give to another component (or to map a second time).
    pub fn share(&self, slot: CapSlot, writable: bool) -> Result<Dataspace, Error> {
        let rights = if writable {
            Rights::READ.union(Rights::WRITE)
        } else {
            Rights::READ
        };
        syscall::cap_mint(self.frame, slot, rights, 0)?;
        Ok(Dataspace {
            frame: slot,
            size: self.size,
        })
    }

    /// Maps the dataspace into address space `vspace` (normally
    /// `interfaces::child::OWN_VSPACE`) at `va`, write-back, writable or not;
    /// never executable.
    ///
    /// # Safety
    ///
    /// `[va, va + size)` is a region of the address space that nothing
    /// else of the program uses while the mapping exists.
    pub unsafe fn attach(
        self,
        vspace: CapSlot,
        va: u64,
        writable: bool,
    ) -> Result<Attached, Error> {
        let attr = MapAttr {
            writable,
            executable: false,
            cache: Cache::WriteBack,
        };
        // SAFETY: the caller gives the region to this dataspace alone.
        unsafe { syscall::map(vspace, self.frame, va, attr) }?;
        Ok(Attached { ds: self, va })
    }
}

/// A dataspace mapped in the caller's address space.
#[derive(Debug, PartialEq, Eq)]
pub struct Attached {
    ds: Dataspace,
    va: u64,
}

impl Attached {
    /// The dataspace.
    pub fn dataspace(&self) -> Dataspace {
        self.ds
    }

    /// Where it is mapped.
    pub fn base(&self) -> *mut u8 {
        self.va as *mut u8
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.ds.size.bytes()
    }

    /// Never empty (for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Reads the 64-bit word at byte `offset` (volatile: the other side
    /// may write it at any time); `None` outside the dataspace or
    /// unaligned.
    pub fn read_u64(&self, offset: usize) -> Option<u64> {
        let ptr = self.word(offset)?;
        // SAFETY: `word` checked that the 8 bytes are inside the mapping,
        // which exists while `self` does, and aligned.
        Some(unsafe { ptr.read_volatile() })
    }

    /// Writes the 64-bit word at byte `offset` (volatile); `Err` outside
    /// the dataspace or unaligned. Faults if the mapping is read-only.
    pub fn write_u64(&self, offset: usize, value: u64) -> Result<(), Error> {
        let ptr = self.word(offset).ok_or(Error::InvalidArgument)?;
        // SAFETY: as in `read_u64`; writing a read-only mapping is the
        // caller's fault, reported as a page fault, not undefined
        // behaviour of the program's own memory.
        unsafe { ptr.write_volatile(value) };
        Ok(())
    }

    /// The aligned word pointer at `offset`, if inside.
    fn word(&self, offset: usize) -> Option<*mut u64> {
        let end = offset.checked_add(8)?;
        (end <= self.len() && offset.is_multiple_of(8))
            .then(|| (self.va as usize + offset) as *mut u64)
    }

    /// Unmaps it; the dataspace capability stays.
    pub fn detach(self) -> Result<Dataspace, Error> {
        // SAFETY: `self` is consumed: nothing of the program reaches the
        // region through it any more.
        unsafe { syscall::unmap(self.ds.frame) }?;
        Ok(self.ds)
    }
}
