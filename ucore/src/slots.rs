//! A free-slot allocator over one capability space: the slots
//! `first..end` (for root: `first_free_slot..1 << cspace_bits`) as a
//! bitmap, one bit per slot, set when the slot is in use.
//!
//! [`SlotAllocator::alloc_range`] hands out runs of adjacent slots, which
//! `Retype` needs (its destinations are `dst..dst + count`). Allocation is
//! first fit from the lowest slot; a hint remembers where the last single
//! allocation ended so that the common case does not rescan the full part.
//! The allocator only does bookkeeping: emptying a slot is a `CapDelete`
//! by the caller before [`SlotAllocator::free`].

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// Why a slot range or a free was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotError {
    /// `first > end`, slot 0 included (the null slot is never handed out),
    /// or an index space larger than 2^32 slots.
    BadRange { first: u64, end: u64 },
    /// The slot is not managed by this allocator.
    OutOfRange { slot: u32 },
    /// The slot is not allocated.
    NotAllocated { slot: u32 },
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SlotError::BadRange { first, end } => {
                write!(f, "bad slot range {first}..{end}")
            }
            SlotError::OutOfRange { slot } => write!(f, "slot {slot} is not managed here"),
            SlotError::NotAllocated { slot } => write!(f, "slot {slot} is not allocated"),
        }
    }
}

/// The free slots of `first..end`.
#[derive(Clone, Debug)]
pub struct SlotAllocator {
    first: u32,
    end: u32,
    /// Bit `i` set: slot `first + i` is in use.
    used: Vec<u64>,
    free: u32,
    /// Every slot below `first + hint` is in use.
    hint: u32,
}

impl SlotAllocator {
    /// Manages slots `first..end` (all free). `first` must be at least 1:
    /// slot 0 is the null slot.
    pub fn new(first: u64, end: u64) -> Result<Self, SlotError> {
        let bad = SlotError::BadRange { first, end };
        if first == 0 || first > end {
            return Err(bad);
        }
        let first32 = u32::try_from(first).map_err(|_| bad)?;
        // `end` may be exactly 2^32 in principle, but no table is that big
        // (at most 2^16 slots); refusing it keeps every index a `u32`.
        let end32 = u32::try_from(end).map_err(|_| bad)?;
        let count = end32 - first32;
        Ok(SlotAllocator {
            first: first32,
            end: end32,
            used: vec![0; count.div_ceil(64) as usize],
            free: count,
            hint: 0,
        })
    }

    /// Slots still free.
    pub fn free_count(&self) -> u32 {
        self.free
    }

    /// One free slot, marked used; `None` when none is left.
    pub fn alloc(&mut self) -> Option<u32> {
        let slot = self.alloc_range(1)?;
        self.hint = slot - self.first + 1;
        Some(slot)
    }

    /// `count` adjacent free slots, marked used; returns the first. `None`
    /// when no such run exists (or `count` is 0).
    pub fn alloc_range(&mut self, count: u32) -> Option<u32> {
        if count == 0 || count > self.free {
            return None;
        }
        let len = self.end - self.first;
        let mut start = self.hint;
        while start.checked_add(count)? <= len {
            // Extend a run of free slots from `start`.
            match (start..start + count).find(|&i| self.is_used(i)) {
                None => {
                    for i in start..start + count {
                        self.set(i, true);
                    }
                    self.free -= count;
                    return Some(self.first + start);
                }
                Some(taken) => start = taken + 1,
            }
        }
        None
    }

    /// Gives `slot` back (the caller has emptied it).
    pub fn free(&mut self, slot: u32) -> Result<(), SlotError> {
        if slot < self.first || slot >= self.end {
            return Err(SlotError::OutOfRange { slot });
        }
        let i = slot - self.first;
        if !self.is_used(i) {
            return Err(SlotError::NotAllocated { slot });
        }
        self.set(i, false);
        self.free += 1;
        self.hint = self.hint.min(i);
        Ok(())
    }

    /// Whether `slot` is allocated (slots outside the range: no).
    pub fn is_allocated(&self, slot: u32) -> bool {
        slot >= self.first && slot < self.end && self.is_used(slot - self.first)
    }

    fn is_used(&self, i: u32) -> bool {
        self.used
            .get((i / 64) as usize)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    fn set(&mut self, i: u32, used: bool) {
        if let Some(w) = self.used.get_mut((i / 64) as usize) {
            if used {
                *w |= 1 << (i % 64);
            } else {
                *w &= !(1 << (i % 64));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn bad_ranges() {
        assert_eq!(
            SlotAllocator::new(0, 10).unwrap_err(),
            SlotError::BadRange { first: 0, end: 10 }
        );
        assert!(SlotAllocator::new(11, 10).is_err());
        assert!(SlotAllocator::new(1, 1 << 32).is_err());
        let mut empty = SlotAllocator::new(5, 5).unwrap();
        assert_eq!(empty.alloc(), None);
        assert_eq!(empty.free_count(), 0);
    }

    #[test]
    fn single_slots_in_order_then_exhausted() {
        let mut a = SlotAllocator::new(100, 200).unwrap();
        for want in 100..200 {
            assert_eq!(a.alloc(), Some(want));
        }
        assert_eq!(a.alloc(), None);
        assert_eq!(a.free_count(), 0);
        a.free(150).unwrap();
        assert_eq!(a.free(150), Err(SlotError::NotAllocated { slot: 150 }));
        assert_eq!(a.free(99), Err(SlotError::OutOfRange { slot: 99 }));
        assert_eq!(a.free(200), Err(SlotError::OutOfRange { slot: 200 }));
        assert_eq!(a.alloc(), Some(150));
        assert!(a.is_allocated(150) && !a.is_allocated(99));
    }

    #[test]
    fn ranges_are_adjacent_and_skip_used_slots() {
        let mut a = SlotAllocator::new(1, 11).unwrap();
        assert_eq!(a.alloc_range(0), None);
        assert_eq!(a.alloc_range(3), Some(1)); // 1, 2, 3
        assert_eq!(a.alloc(), Some(4));
        a.free(2).unwrap();
        // 2 alone is too short for two: the run starts at 5.
        assert_eq!(a.alloc_range(2), Some(5));
        assert_eq!(a.alloc(), Some(2));
        assert_eq!(a.alloc_range(4), Some(7)); // 7..=10
        assert_eq!(a.alloc_range(1), None);
        assert_eq!(a.free_count(), 0);
        a.free(9).unwrap();
        assert_eq!(a.alloc_range(2), None);
        assert_eq!(a.alloc_range(1), Some(9));
    }

    /// Random allocations and frees agree with a set-based model: no slot
    /// is handed out twice, first fit holds, counts stay right.
    #[test]
    fn random_against_model() {
        let (first, end) = (64u32, 64 + 300);
        let mut a = SlotAllocator::new(first.into(), end.into()).unwrap();
        let mut model: BTreeSet<u32> = BTreeSet::new();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let r = state;
            if r.is_multiple_of(3) && !model.is_empty() {
                let victim = *model.iter().nth((r >> 8) as usize % model.len()).unwrap();
                a.free(victim).unwrap();
                model.remove(&victim);
            } else {
                let count = 1 + (r >> 16) as u32 % 5;
                let want =
                    (first..=end - count).find(|&s| (s..s + count).all(|x| !model.contains(&x)));
                let got = a.alloc_range(count);
                assert_eq!(got, want, "count {count}");
                if let Some(s) = got {
                    model.extend(s..s + count);
                }
            }
            assert_eq!(
                a.free_count() as usize,
                (end - first) as usize - model.len()
            );
        }
    }
}
