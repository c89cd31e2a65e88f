//! The shared memory of a stream, and the only `unsafe` code of the packet
//! stream.
//!
//! A [`Region`] is one side's view of the dataspace: a base pointer and a
//! length, promised by the creator (the one `unsafe fn`, [`Region::new`])
//! to be mapped readable and writable for as long as the region exists.
//! Everything else reaches the memory through three accessors that check
//! bounds and alignment themselves, so no caller can turn a bad offset into
//! an access outside the region:
//!
//! - [`Region::word`]: a 32-bit atomic. Ring indices, flags and packet
//!   descriptors are only ever accessed as atomics, because the peer may
//!   write them at any moment (a racing plain access would be undefined
//!   behaviour; an atomic one just reads some value, which the protocol
//!   then validates).
//! - [`Region::bytes`] / [`Region::bytes_mut`]: payload bytes of the bulk
//!   buffer, handed out only for packets this side owns by the protocol
//!   (the peer does not touch them until they are handed over with a
//!   Release store of a ring index). A peer that breaks the protocol and
//!   writes into them anyway can only garble the payload of its own packets
//!   — the peer lives in another address space, outside anything this
//!   program's compiler can see; a reader that must act on checked content
//!   copies it out first, as with any memory shared across a trust
//!   boundary.
//!
//! `bytes_mut` takes `&mut self`: this side never holds two mutable views
//! of the buffer at once, and never a mutable view next to a shared one.

#![allow(unsafe_code)]

use core::ptr::NonNull;
use core::sync::atomic::AtomicU32;

use super::LayoutError;

/// One side's view of the shared dataspace (see the module doc).
#[derive(Debug)]
pub struct Region {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Region` is a pointer to memory that, by the contract of
// `Region::new`, stays mapped for the region's lifetime and is shared with
// a peer through atomics and protocol-owned payload ranges only; nothing
// about it is tied to the thread that made it.
unsafe impl Send for Region {}

impl Region {
    /// Alignment the base must have: a cache line, so that the two
    /// indices of a ring never share one.
    pub const ALIGN: usize = 64;

    /// The region `[base, base + len)`.
    ///
    /// Refused ([`LayoutError::Misaligned`]) unless `base` is non-null and
    /// [`Region::ALIGN`]-aligned and the range does not wrap or exceed
    /// `isize::MAX` bytes.
    ///
    /// # Safety
    ///
    /// For as long as the returned region (or a stream built on it) exists:
    ///
    /// - all of `[base, base + len)` is mapped readable and writable;
    /// - this program touches those bytes only through this region, and
    ///   through at most one other region — the peer's end, when both ends
    ///   of a stream live in one program (tests) — so that every access
    ///   follows the protocol of `super` (atomics for the control words and
    ///   descriptors; payload only by the side that owns the packet).
    ///
    /// The peer in another address space may write anything at any time:
    /// that is what the stream is built to survive.
    pub unsafe fn new(base: *mut u8, len: usize) -> Result<Region, LayoutError> {
        let base = NonNull::new(base).ok_or(LayoutError::Misaligned)?;
        let addr = base.as_ptr() as usize;
        if !addr.is_multiple_of(Self::ALIGN)
            || len > isize::MAX as usize
            || addr.checked_add(len).is_none()
        {
            return Err(LayoutError::Misaligned);
        }
        Ok(Region { base, len })
    }

    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The 32-bit word at byte `offset`.
    ///
    /// Offsets come from the stream's own [`super::Layout`], never from the
    /// peer; one out of bounds or misaligned is a bug of this module and
    /// panics rather than touching memory outside the region.
    pub(crate) fn word(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset.is_multiple_of(4) && offset < self.len && self.len - offset >= 4,
            "packet stream: word offset {offset:#x} outside a region of {:#x} bytes",
            self.len
        );
        // SAFETY: `offset + 4 <= len` (checked above), so the four bytes
        // lie in the region, which `new`'s contract keeps mapped and
        // writable for `self`'s lifetime; `base` is 64-aligned and `offset`
        // a multiple of 4, so the pointer is aligned for `AtomicU32`, which
        // has the size and alignment of `u32` and is valid for every bit
        // pattern. Every access to these bytes, by either side, is atomic
        // (the protocol), so sharing the reference is sound.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// The `N` 32-bit words from byte `offset` (a packet descriptor): one
    /// check for all of them; panics like [`Self::word`].
    pub(crate) fn words<const N: usize>(&self, offset: usize) -> &[AtomicU32; N] {
        assert!(
            offset.is_multiple_of(4) && offset < self.len && self.len - offset >= 4 * N,
            "packet stream: words at {offset:#x} outside a region of {:#x} bytes",
            self.len
        );
        // SAFETY: as in `word`, for `4 * N` bytes: in the region (checked),
        // aligned for `AtomicU32` (so for an array of them), valid for
        // every bit pattern, and only ever accessed atomically.
        unsafe { &*self.base.as_ptr().add(offset).cast::<[AtomicU32; N]>() }
    }

    /// `len` bytes at `offset`, or `None` if they are not all in the region.
    pub(crate) fn bytes(&self, offset: usize, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: `[offset, offset + len)` lies in the region (checked),
        // which stays mapped for `self`'s lifetime. The caller asks only
        // for payload of a packet this side owns (module doc); no mutable
        // view exists meanwhile, because `bytes_mut` needs `&mut self`.
        Some(unsafe { core::slice::from_raw_parts(self.base.as_ptr().add(offset), len) })
    }

    /// `len` bytes at `offset` for writing, or `None` if they are not all
    /// in the region.
    pub(crate) fn bytes_mut(&mut self, offset: usize, len: usize) -> Option<&mut [u8]> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: in bounds as in `bytes`; `&mut self` makes this the only
        // view of the region this side holds while it lives. The caller
        // asks only for payload of a packet this side owns (module doc).
        Some(unsafe { core::slice::from_raw_parts_mut(self.base.as_ptr().add(offset), len) })
    }
}

/// Memory for host tests: zeroed, 64-byte aligned, leaked (so it outlives
/// every region made on it), and `count` regions on it — the two ends of a
/// stream, and a hostile peer's hand that writes control words and
/// descriptors directly.
#[cfg(test)]
pub(crate) fn test_regions<const COUNT: usize>(len: usize) -> [Region; COUNT] {
    #[derive(Clone, Copy)]
    #[repr(C, align(64))]
    struct Line([u8; 64]);
    let lines = std::vec![Line([0; 64]); len.div_ceil(64)].leak();
    let base = lines.as_mut_ptr().cast::<u8>();
    // SAFETY: the memory is leaked, so it stays allocated (mapped, readable
    // and writable) for the rest of the test process; nothing but these
    // regions ever reaches it; the tests use them as a stream's two ends
    // (and a peer that writes control words and descriptors, through
    // atomics only).
    core::array::from_fn(|_| unsafe { Region::new(base, len) }.expect("aligned"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_bases_and_checks_every_access() {
        let [mut r] = test_regions::<1>(256);
        let base = r.base.as_ptr();
        // SAFETY: these calls fail before a region exists.
        unsafe {
            assert_eq!(
                Region::new(base.add(8), 64).unwrap_err(),
                LayoutError::Misaligned
            );
            assert_eq!(
                Region::new(core::ptr::null_mut(), 64).unwrap_err(),
                LayoutError::Misaligned
            );
            assert_eq!(
                Region::new(base, usize::MAX).unwrap_err(),
                LayoutError::Misaligned
            );
        }
        assert_eq!(r.len(), 256);
        assert!(r.bytes(200, 57).is_none());
        assert!(r.bytes(usize::MAX, 2).is_none());
        assert!(r.bytes_mut(256, 1).is_none());
        r.bytes_mut(250, 6).unwrap().fill(7);
        assert_eq!(r.bytes(248, 8).unwrap(), &[0, 0, 7, 7, 7, 7, 7, 7]);
        assert_eq!(
            r.word(252).load(core::sync::atomic::Ordering::Relaxed),
            0x0707_0707
        );
        assert!(r.bytes(256, 0).is_some());
    }

    #[test]
    #[should_panic(expected = "outside a region")]
    fn words_outside_the_region_panic() {
        let [r] = test_regions::<1>(64);
        r.words::<4>(52);
    }

    #[test]
    #[should_panic(expected = "outside a region")]
    fn a_word_outside_the_region_panics() {
        let [r] = test_regions::<1>(64);
        r.word(64);
    }
}
