//! Device registers mapped into a component: [`Region`], a bounds-checked
//! window of volatile accesses, so a driver needs no `unsafe` of its own
//! to reach its device (Asterinas' `IoMem` idea).
//!
//! Invariant: a [`Region`] exists only while its pages are mapped to
//! device memory (or memory the caller shares with a device) for the
//! caller alone; every access is inside it and naturally aligned.

use abi::map::{Cache, MapAttr};
use abi::{CapSlot, Error};

use crate::syscall;

/// A mapped window of device registers.
#[derive(Debug)]
pub struct Region {
    va: usize,
    len: usize,
}

impl Region {
    /// Maps `frames` (each `frame_bytes` bytes: 4 KiB or 2 MiB) one after
    /// the other at `va` in address space `vspace`, writable, with
    /// `cache`, and returns the window over them.
    ///
    /// # Safety
    ///
    /// `[va, va + frames × frame_bytes)` is a region of the address space
    /// nothing else of the program uses while the `Region` exists.
    pub unsafe fn map(
        vspace: CapSlot,
        frames: impl Iterator<Item = CapSlot>,
        frame_bytes: usize,
        va: usize,
        cache: Cache,
    ) -> Result<Region, Error> {
        let attr = MapAttr {
            writable: true,
            executable: false,
            cache,
        };
        let mut len = 0;
        for frame in frames {
            // SAFETY: the caller gives the region to this window alone.
            unsafe { syscall::map(vspace, frame, (va + len) as u64, attr) }?;
            len += frame_bytes;
        }
        Ok(Region { va, len })
    }

    /// The window over `len` bytes at `va`, already mapped.
    ///
    /// # Safety
    ///
    /// `[va, va + len)` is mapped (to device registers or shared memory)
    /// and used by nothing else of the program while the `Region` exists.
    pub unsafe fn from_mapped(va: usize, len: usize) -> Region {
        Region { va, len }
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never empty in practice; for clippy.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where it is mapped.
    pub fn base(&self) -> usize {
        self.va
    }

    /// The pointer to `size_of::<T>()` bytes at `offset`, if inside and
    /// aligned.
    fn at<T>(&self, offset: usize) -> Option<*mut T> {
        let size = core::mem::size_of::<T>();
        let end = offset.checked_add(size)?;
        (end <= self.len && offset.is_multiple_of(size)).then(|| (self.va + offset) as *mut T)
    }

    /// Reads the 8-bit register at `offset`; `None` outside or misaligned.
    pub fn read8(&self, offset: usize) -> Option<u8> {
        // SAFETY: `at` checked bounds and alignment; the mapping lives
        // while `self` does (the type's invariant).
        self.at::<u8>(offset).map(|p| unsafe { p.read_volatile() })
    }

    /// Reads the 16-bit register at `offset`; `None` outside or misaligned.
    pub fn read16(&self, offset: usize) -> Option<u16> {
        // SAFETY: as in `read8`.
        self.at::<u16>(offset).map(|p| unsafe { p.read_volatile() })
    }

    /// Reads the 32-bit register at `offset`; `None` outside or misaligned.
    pub fn read32(&self, offset: usize) -> Option<u32> {
        // SAFETY: as in `read8`.
        self.at::<u32>(offset).map(|p| unsafe { p.read_volatile() })
    }

    /// Reads the 64-bit register at `offset`; `None` outside or misaligned.
    pub fn read64(&self, offset: usize) -> Option<u64> {
        // SAFETY: as in `read8`.
        self.at::<u64>(offset).map(|p| unsafe { p.read_volatile() })
    }

    /// Writes the 8-bit register at `offset`; `None` (nothing written) outside or misaligned.
    pub fn write8(&self, offset: usize, value: u8) -> Option<()> {
        // SAFETY: as in `read8`.
        self.at::<u8>(offset)
            .map(|p| unsafe { p.write_volatile(value) })
    }

    /// Writes the 16-bit register at `offset`; `None` (nothing written) outside or misaligned.
    pub fn write16(&self, offset: usize, value: u16) -> Option<()> {
        // SAFETY: as in `read8`.
        self.at::<u16>(offset)
            .map(|p| unsafe { p.write_volatile(value) })
    }

    /// Writes the 32-bit register at `offset`; `None` (nothing written) outside or misaligned.
    pub fn write32(&self, offset: usize, value: u32) -> Option<()> {
        // SAFETY: as in `read8`.
        self.at::<u32>(offset)
            .map(|p| unsafe { p.write_volatile(value) })
    }

    /// Writes the 64-bit register at `offset`; `None` (nothing written) outside or misaligned.
    pub fn write64(&self, offset: usize, value: u64) -> Option<()> {
        // SAFETY: as in `read8`.
        self.at::<u64>(offset)
            .map(|p| unsafe { p.write_volatile(value) })
    }
}
