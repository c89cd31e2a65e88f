//! Device registers mapped into a component: [`Region`], a bounds-checked
//! window of volatile accesses, so a driver needs no `unsafe` of its own
//! to reach its device (Asterinas' `IoMem` idea).
//!
//! Invariant: a [`Region`] exists only while its pages are mapped to
//! device memory (or memory the caller shares with a device) for the
//! caller alone; every access is inside it and naturally aligned.
//!
//! [`Region::map_new`] maps without `unsafe` at the caller: it places
//! the window in [`WINDOWS`], a range of every component's address space
//! that belongs to the runtime (like its heap arena) — nothing else of a
//! program maps there.

use core::ops::Range;
use core::sync::atomic::{AtomicUsize, Ordering};

use abi::caddr::own;
use abi::map::{Cache, MapAttr};
use abi::{CapSlot, Error};
use interfaces::child;

use crate::syscall;

/// The runtime's range for [`Region::map_new`]'s windows (1 TiB, never
/// reused: a window's addresses are not handed out again).
pub const WINDOWS: Range<usize> = 0x6000_0000_0000..0x6100_0000_0000;

/// The next free address in [`WINDOWS`].
static NEXT_WINDOW: AtomicUsize = AtomicUsize::new(WINDOWS.start);

/// Reserves `bytes` of [`WINDOWS`] aligned to `align` (a power of two).
fn reserve(bytes: usize, align: usize) -> Option<usize> {
    let mut next = NEXT_WINDOW.load(Ordering::Relaxed);
    loop {
        let start = next.checked_next_multiple_of(align)?;
        let end = start.checked_add(bytes)?;
        if end > WINDOWS.end {
            return None;
        }
        match NEXT_WINDOW.compare_exchange(next, end, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Some(start),
            Err(now) => next = now,
        }
    }
}

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

    /// Maps `count` frames (each `frame_bytes` bytes: 4 KiB or 2 MiB, the
    /// window aligned to it) one after the other into the component's own
    /// address space (`interfaces::child::OWN_VSPACE`), writable, with
    /// `cache`, at a fresh window of [`WINDOWS`]. Frames past `count` are
    /// not mapped. [`Error::OutOfMemory`] when the range is used up.
    pub fn map_new(
        frames: impl Iterator<Item = CapSlot>,
        count: usize,
        frame_bytes: usize,
        cache: Cache,
    ) -> Result<Region, Error> {
        if !frame_bytes.is_power_of_two() {
            return Err(Error::InvalidArgument);
        }
        let bytes = count
            .checked_mul(frame_bytes)
            .ok_or(Error::InvalidArgument)?;
        let va = reserve(bytes, frame_bytes).ok_or(Error::OutOfMemory)?;
        // SAFETY: `reserve` handed `[va, va + bytes)` out of the runtime's
        // own range to this window alone (module docs).
        let region = unsafe {
            Region::map(
                own(child::OWN_VSPACE),
                frames.take(count),
                frame_bytes,
                va,
                cache,
            )
        }?;
        if region.len != bytes {
            // Fewer frames than promised: the window is what was mapped.
            return Err(Error::InvalidArgument);
        }
        Ok(region)
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

    /// The range `[offset, offset + len)` as a pointer, if inside.
    fn span(&self, offset: usize, len: usize) -> Option<*mut u8> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then_some((self.va + offset) as *mut u8)
    }

    /// Copies `data` to `offset` with a plain (non-volatile) copy: for DMA
    /// memory only, never for registers — a device reads it after the
    /// release fence the queue's publication puts in. `None` (nothing
    /// copied) when it does not fit.
    pub fn copy_from(&self, offset: usize, data: &[u8]) -> Option<()> {
        let to = self.span(offset, data.len())?;
        // SAFETY: `span` checked the bounds; the mapping lives while `self`
        // does, and a caller's slice never lies in a device window.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
        Some(())
    }

    /// Copies `len` bytes from `src` at `src_offset` to `offset` with a
    /// plain copy: between memory windows (a client's buffer and a
    /// device's framebuffer, which is memory, not registers). `None`
    /// (nothing copied) when either range is outside its window.
    pub fn copy_region(
        &self,
        offset: usize,
        src: &Region,
        src_offset: usize,
        len: usize,
    ) -> Option<()> {
        let to = self.span(offset, len)?;
        let from = src.span(src_offset, len)?;
        // SAFETY: `span` checked both ranges; both mappings live while
        // the windows do; two windows never overlap (each has its own
        // part of `WINDOWS`, or of the caller's region).
        unsafe { core::ptr::copy_nonoverlapping(from, to, len) };
        Some(())
    }

    /// Moves `len` bytes from `from` to `to` within the window (the
    /// ranges may overlap: `memmove`), with a plain copy: for memory
    /// windows, never registers (a terminal scrolling its buffer). `None`
    /// (nothing moved) when either range is outside.
    pub fn copy_within(&self, from: usize, to: usize, len: usize) -> Option<()> {
        let src = self.span(from, len)?;
        let dst = self.span(to, len)?;
        // SAFETY: `span` checked both ranges against the window, which
        // stays mapped while `self` lives; `ptr::copy` allows overlap.
        unsafe { core::ptr::copy(src, dst, len) };
        Some(())
    }

    /// Fills `len` bytes at `offset` with the 32-bit `value` repeated
    /// (`offset` and `len` multiples of 4): plain stores, for memory
    /// windows. `None` (nothing written) when outside or unaligned.
    pub fn fill32(&self, offset: usize, len: usize, value: u32) -> Option<()> {
        if !offset.is_multiple_of(4) || !len.is_multiple_of(4) {
            return None;
        }
        let to = self.span(offset, len)? as *mut u32;
        for i in 0..len / 4 {
            // SAFETY: inside the span checked above, aligned (the window
            // starts page-aligned and `offset` is a multiple of 4).
            unsafe { to.add(i).write(value) };
        }
        Some(())
    }

    /// Copies `out.len()` bytes from `offset` into `out` (DMA memory only,
    /// as [`Self::copy_from`]; read after the device's used-ring entry was
    /// taken, which has its acquire fence). `None` when outside.
    pub fn copy_to(&self, offset: usize, out: &mut [u8]) -> Option<()> {
        let from = self.span(offset, out.len())?;
        // SAFETY: as in `copy_from`.
        unsafe { core::ptr::copy_nonoverlapping(from, out.as_mut_ptr(), out.len()) };
        Some(())
    }
}
