//! Buffer space: a bitmap over fixed-size blocks, next fit.
//!
//! The bulk buffer is cut into blocks of a power-of-two size (64 bytes by
//! default: a cache line). A packet of `len` bytes takes `max(1,
//! ceil(len / block))` adjacent blocks. Two bitmaps, private to the source
//! (never in shared memory, so the peer cannot touch them), describe the
//! buffer:
//!
//! - `used`: the block belongs to an allocation. Bits past the last block
//!   are kept set, so no run of free blocks reaches past the buffer.
//! - `start`: the block is the first one of an allocation. An allocation
//!   runs from its start block up to the next start block or free block,
//!   so nothing else needs to be stored per packet, and an offset that is
//!   not the start of a live allocation is recognised as such — which is
//!   how the source refuses a forged or repeated acknowledgement.
//!
//! # Complexity
//!
//! With B blocks, W = B / 64 bitmap words, and a packet of n blocks:
//!
//! - `alloc`: next fit from a rotor (the block after the previous
//!   allocation). Runs are found a word at a time (`trailing_zeros` on a
//!   word, never a loop per bit), so the search costs O(W + r) for r runs
//!   of used blocks it skips, and marking costs O(n / 64 + 1). A stream
//!   frees mostly in the order it allocated — acknowledgements come back
//!   roughly in order even when not exactly — so the space behind the rotor
//!   is usually the oldest, freed first, and the search ends in the first
//!   word or two: O(1) in the common case, like a ring buffer, while any
//!   order of frees stays correct.
//! - `free` and `extent`: O(n / 64 + 1); `owns` (is this a live
//!   allocation of at least `len` bytes?) O(1) for a packet within one
//!   block, else O(n / 64 + 1).
//! - Memory: two bits per block (for a 2 MiB buffer of 64-byte blocks, 8
//!   KiB), no heap.
//!
//! The block size is the session's trade: small blocks waste little space
//! per small packet, large ones make a large packet fewer bits to mark
//! and check (with 64-byte blocks a 64 KiB packet is 1024 bits, 16 words
//! per pass; with 4 KiB blocks 16 bits, one word).

use super::bitmap;
use super::LayoutError;

/// Why an allocation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// No run of free blocks is long enough now; freeing may help.
    Full,
    /// More blocks than the whole buffer has: it never fits.
    TooLarge,
}

/// Offset `offset` is not the start of a live allocation (misaligned,
/// outside the buffer, inside an allocation, or free).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotAllocated;

/// Allocator of buffer space in blocks (see the module doc), for at most
/// `WORDS * 64` blocks.
#[derive(Clone, Debug)]
pub struct BlockAllocator<const WORDS: usize> {
    blocks: usize,
    shift: u32,
    used: [u64; WORDS],
    start: [u64; WORDS],
    rotor: usize,
    free: usize,
}

impl<const WORDS: usize> BlockAllocator<WORDS> {
    /// Most blocks an allocator of this size manages.
    pub const CAPACITY: usize = WORDS * 64;

    /// An allocator for `blocks` blocks of `block_size` bytes (a power of
    /// two), all free. Refused if `blocks` is 0 or more than
    /// [`Self::CAPACITY`], or `block_size` is not a power of two.
    pub fn new(blocks: usize, block_size: u32) -> Result<Self, LayoutError> {
        if !block_size.is_power_of_two() {
            return Err(LayoutError::BadBlockSize);
        }
        if blocks == 0 || blocks > Self::CAPACITY {
            return Err(LayoutError::TooManyBlocks {
                blocks,
                capacity: Self::CAPACITY,
            });
        }
        let mut used = [0; WORDS];
        bitmap::fill(&mut used, blocks, Self::CAPACITY, true);
        Ok(BlockAllocator {
            blocks,
            shift: block_size.trailing_zeros(),
            used,
            start: [0; WORDS],
            rotor: 0,
            free: blocks,
        })
    }

    /// Bytes per block.
    pub fn block_size(&self) -> u32 {
        1 << self.shift
    }

    /// Free bytes (not necessarily adjacent).
    pub fn free_bytes(&self) -> usize {
        self.free << self.shift
    }

    /// Blocks a packet of `len` bytes takes.
    fn blocks_for(&self, len: u32) -> usize {
        let mask = (1u64 << self.shift) - 1;
        ((u64::from(len) + mask) >> self.shift).max(1) as usize
    }

    /// Space for `len` bytes: the byte offset of its first block.
    pub fn alloc(&mut self, len: u32) -> Result<u32, AllocError> {
        let n = self.blocks_for(len);
        if n > self.free {
            return Err(if n > self.blocks {
                AllocError::TooLarge
            } else {
                AllocError::Full
            });
        }
        let found = match self.at_rotor(n) {
            Some((found, run)) => {
                self.used[found / 64] |= run;
                found
            }
            None => {
                let found = self
                    .find_run(self.rotor, self.blocks, n)
                    .or_else(|| self.find_run(0, self.rotor, n))
                    .ok_or(AllocError::Full)?;
                bitmap::fill(&mut self.used, found, found + n, true);
                found
            }
        };
        bitmap::put(&mut self.start, found, true);
        self.free -= n;
        self.rotor = if found + n == self.blocks {
            0
        } else {
            found + n
        };
        // `found < blocks <= WORDS * 64` and the buffer is at most 4 GiB
        // (the layout's limit), so the offset fits.
        Ok((found << self.shift) as u32)
    }

    /// The rotor and the run's bits in its word, if `n` free blocks start
    /// there within one bitmap word: the common case, one word looked at.
    fn at_rotor(&self, n: usize) -> Option<(usize, u64)> {
        let bit = self.rotor % 64;
        if bit + n > 64 {
            return None;
        }
        let run = (u64::MAX >> (64 - n)) << bit;
        // Bits past the last block are set: no run passes the end.
        let used = *self.used.get(self.rotor / 64)?;
        (used & run == 0).then_some((self.rotor, run))
    }

    /// The first block of a run of `n` free blocks that starts in
    /// `from..to`.
    fn find_run(&self, from: usize, to: usize, n: usize) -> Option<usize> {
        let mut pos = from;
        while pos < to {
            let free = bitmap::find(&self.used, false, pos, to);
            if free >= to {
                return None;
            }
            // Bits past the last block are set: a run ends by the buffer's
            // end at the latest.
            let limit = free.saturating_add(n).min(Self::CAPACITY);
            let end = bitmap::find(&self.used, true, free, limit);
            if end - free >= n {
                return Some(free);
            }
            pos = end;
        }
        None
    }

    /// The first block of the allocation that starts at byte `offset`.
    fn start_block(&self, offset: u32) -> Result<usize, NotAllocated> {
        let block = (offset >> self.shift) as usize;
        if offset & ((1 << self.shift) - 1) != 0
            || block >= self.blocks
            || !bitmap::get(&self.start, block)
        {
            return Err(NotAllocated);
        }
        Ok(block)
    }

    /// The first block in `from..to` that is the start of an allocation
    /// or free: where an allocation running through `from - 1` ends.
    fn boundary(&self, from: usize, to: usize) -> usize {
        bitmap::find_by(from, to, |w| self.start[w] | !self.used[w])
    }

    /// The block after the allocation that starts at `block`.
    fn end_block(&self, block: usize) -> usize {
        self.boundary(block + 1, self.blocks)
    }

    /// Whether an allocation starts at byte `offset` and reaches at least
    /// `len` bytes: O(len / 64 blocks), independent of how much larger the
    /// allocation is (one word or none for a small packet).
    pub fn owns(&self, offset: u32, len: u32) -> bool {
        let Ok(block) = self.start_block(offset) else {
            return false;
        };
        if u64::from(len) <= 1 << self.shift {
            // Within the start block: every allocation has it.
            return true;
        }
        let end = block + self.blocks_for(len);
        end <= self.blocks && self.boundary(block + 1, end) == end
    }

    /// Bytes of the allocation that starts at byte `offset` (whole
    /// blocks).
    pub fn extent(&self, offset: u32) -> Result<usize, NotAllocated> {
        let block = self.start_block(offset)?;
        Ok((self.end_block(block) - block) << self.shift)
    }

    /// Frees the allocation that starts at byte `offset`; returns its
    /// bytes (whole blocks).
    pub fn free(&mut self, offset: u32) -> Result<usize, NotAllocated> {
        let block = self.start_block(offset)?;
        let end = self.end_block(block);
        bitmap::fill(&mut self.used, block, end, false);
        bitmap::put(&mut self.start, block, false);
        self.free += end - block;
        Ok((end - block) << self.shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet_stream::traffic::Rng;
    use std::vec::Vec;

    #[test]
    fn allocates_whole_blocks_next_fit_and_frees_exactly() {
        let mut a = BlockAllocator::<2>::new(100, 64).unwrap();
        assert_eq!(a.free_bytes(), 6400);
        assert_eq!(a.alloc(0), Ok(0)); // a zero-length packet takes one block
        assert_eq!(a.alloc(64), Ok(64));
        assert_eq!(a.alloc(65), Ok(128)); // two blocks
        assert_eq!(a.extent(128), Ok(128));
        assert_eq!(a.extent(0), Ok(64));
        assert_eq!(a.free_bytes(), 6400 - 4 * 64);
        // Next fit: a freed hole before the rotor is used only after the
        // space behind it.
        assert_eq!(a.free(64), Ok(64));
        assert_eq!(a.alloc(1), Ok(256));
        assert_eq!(a.alloc(96 * 64 - 64), Ok(320)); // up to the last block
        assert_eq!(a.alloc(1), Ok(64)); // wrapped around to the hole
        assert_eq!(a.alloc(1), Err(AllocError::Full));
        assert_eq!(a.free_bytes(), 0);
        assert_eq!(a.alloc(100 * 64 + 1), Err(AllocError::TooLarge));
    }

    #[test]
    fn refuses_frees_of_anything_but_a_live_allocation() {
        let mut a = BlockAllocator::<1>::new(64, 16).unwrap();
        let p = a.alloc(40).unwrap(); // three blocks
        assert_eq!(a.free(p + 16), Err(NotAllocated)); // inside it
        assert_eq!(a.free(p + 1), Err(NotAllocated)); // misaligned
        assert_eq!(a.free(64 * 16), Err(NotAllocated)); // past the buffer
        assert_eq!(a.free(!15), Err(NotAllocated));
        assert_eq!(a.free(p + 48), Err(NotAllocated)); // free block
        assert_eq!(a.free(p), Ok(48));
        assert_eq!(a.free(p), Err(NotAllocated)); // twice
        assert_eq!(a.extent(p), Err(NotAllocated));
        assert_eq!(a.free_bytes(), 64 * 16);
    }

    #[test]
    fn adjacent_allocations_keep_their_own_extent() {
        let mut a = BlockAllocator::<4>::new(256, 64).unwrap();
        let x = a.alloc(64 * 70).unwrap(); // across word boundaries
        let y = a.alloc(64 * 70).unwrap();
        let z = a.alloc(64 * 116).unwrap(); // exactly the rest
        assert_eq!((x, y, z), (0, 64 * 70, 64 * 140));
        assert_eq!(a.extent(y), Ok(64 * 70));
        assert!(a.owns(y, 64 * 70) && a.owns(y, 0) && a.owns(y, 64 * 69 + 1));
        assert!(!a.owns(y, 64 * 70 + 1) && !a.owns(y + 64, 1) && !a.owns(z, 64 * 116 + 1));
        assert_eq!(a.extent(z), Ok(64 * 116));
        assert_eq!(a.free(y), Ok(64 * 70));
        assert_eq!(a.extent(x), Ok(64 * 70));
        assert_eq!(a.alloc(64 * 71), Err(AllocError::Full)); // 70 free, fragmented? no: one hole of 70
        assert_eq!(a.alloc(64 * 70), Ok(y));
    }

    #[test]
    fn refuses_bad_geometry() {
        assert_eq!(
            BlockAllocator::<1>::new(65, 64).unwrap_err(),
            LayoutError::TooManyBlocks {
                blocks: 65,
                capacity: 64
            }
        );
        assert!(BlockAllocator::<1>::new(0, 64).is_err());
        assert_eq!(
            BlockAllocator::<1>::new(8, 48).unwrap_err(),
            LayoutError::BadBlockSize
        );
    }

    /// Random allocations and frees against a model that records every
    /// live allocation: no two overlap, every one stays inside the buffer,
    /// the free count is exact, and an allocation fails only if no run of
    /// free blocks in the model is long enough.
    #[test]
    fn random_allocations_match_a_model() {
        const BLOCKS: usize = 300;
        let mut rng = Rng::new(0x5eed_a110c);
        let mut a = BlockAllocator::<5>::new(BLOCKS, 64).unwrap();
        let mut owner = [usize::MAX; BLOCKS];
        let mut live: Vec<(u32, usize)> = Vec::new();
        for step in 0..20_000 {
            if live.is_empty() || rng.below(100) < 55 {
                let len = if rng.below(10) == 0 {
                    rng.below(64 * 40) as u32
                } else {
                    rng.below(64 * 4) as u32
                };
                let n = (len as usize).div_ceil(64).max(1);
                match a.alloc(len) {
                    Ok(off) => {
                        let b = off as usize / 64;
                        assert_eq!(off % 64, 0);
                        assert!(b + n <= BLOCKS, "step {step}: past the end");
                        for o in &mut owner[b..b + n] {
                            assert_eq!(*o, usize::MAX, "step {step}: overlap");
                            *o = step;
                        }
                        live.push((off, n));
                    }
                    Err(e) => {
                        assert_eq!(e, AllocError::Full);
                        let longest = owner
                            .split(|&o| o != usize::MAX)
                            .map(<[usize]>::len)
                            .max()
                            .unwrap_or(0);
                        assert!(
                            longest < n,
                            "step {step}: {n} blocks refused, {longest} free"
                        );
                    }
                }
            } else {
                let (off, n) = live.swap_remove(rng.below(live.len() as u64) as usize);
                assert_eq!(a.extent(off), Ok(n * 64));
                assert!(a.owns(off, (n * 64) as u32) && !a.owns(off, (n * 64 + 1) as u32));
                assert_eq!(a.free(off), Ok(n * 64));
                owner[off as usize / 64..][..n].fill(usize::MAX);
            }
            let free = owner.iter().filter(|&&o| o == usize::MAX).count();
            assert_eq!(a.free_bytes(), free * 64, "step {step}");
        }
    }
}
