//! Serving kernel objects from untyped memory.
//!
//! The kernel's rule (`Retype`, docs/abi.md): objects are placed at the
//! untyped capability's watermark, rounded up to the object's size, and the
//! watermark moves past them. Carving objects of mixed sizes out of one
//! large untyped therefore wastes the alignment gaps. This allocator avoids
//! them the buddy way:
//!
//! - It keeps untouched untyped capabilities in free lists by size
//!   (2^12 .. 2^47 bytes). A request for an object of 2^n bytes, n ≥ 12,
//!   takes the smallest free block of at least 2^n; while that block is
//!   larger than needed it is split — retyped into two `Untyped` halves
//!   (two adjacent slots of the caller's own space from the
//!   [`SlotAllocator`]) — and the upper half goes to the free list. The
//!   object is then retyped from a block of exactly its size, at offset 0.
//! - Objects smaller than [`PACK_BITS`] (64 KiB: frames, threads,
//!   endpoints, notifications) are packed into shared blocks of 64 KiB
//!   (never smaller ones, so the memory rule of `crate::plan` can count
//!   each small object's memory as a 64 KiB request): the allocator mirrors
//!   such a block's watermark and retypes objects from it while they fit.
//!   Splitting all the way down to each 4 KiB frame would cost every
//!   frame two extra capability slots (its own untyped and its share of
//!   the split tree); packed, sixteen frames share one. Objects of one
//!   size pack without gaps; mixing sizes in a block loses at most the
//!   alignment of the larger ones.
//!
//! Device untyped memory is never used (it must not hold kernel objects
//! and is not zeroed); [`UntypedAllocator::add`] leaves it out. Memory is
//! never given back here: root hands out what its children need once.
//!
//! The system call is behind [`Retyper`], so the same code runs against the
//! kernel in root and against a model of the kernel in the tests.

use alloc::vec::Vec;
use core::fmt;

use abi::bootinfo::UntypedInfo;
use abi::caddr::{self, CapAddr};
use abi::object::{MAX_UNTYPED_BITS, MIN_UNTYPED_BITS};
use abi::{Error, ObjectType};

use crate::slots::SlotAllocator;

/// Objects smaller than 2^`PACK_BITS` bytes share blocks of this size.
pub const PACK_BITS: u32 = 16;

/// The `Retype` system call.
pub trait Retyper {
    /// Makes `count` objects of `kind` (with `size_bits` for sized types)
    /// from the untyped capability in the caller's own slot `untyped`, into
    /// the slots `dst`, `dst + 1`, ...
    fn retype(
        &mut self,
        untyped: u32,
        kind: ObjectType,
        size_bits: u32,
        dst: CapAddr,
        count: u32,
    ) -> Result<(), Error>;
}

/// Why an object could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// The type cannot be made by `Retype`, or not with this size.
    BadRequest { kind: ObjectType, size_bits: u32 },
    /// No free block of 2^`bits` bytes or more is left.
    OutOfMemory { bits: u32 },
    /// No adjacent pair of free slots to split a block into.
    OutOfSlots,
    /// The kernel refused a `Retype` this allocator asked for.
    Kernel(Error),
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AllocError::BadRequest { kind, size_bits } => {
                write!(f, "cannot make {kind:?} of size bits {size_bits}")
            }
            AllocError::OutOfMemory { bits } => {
                write!(f, "no untyped memory left for an object of 2^{bits} bytes")
            }
            AllocError::OutOfSlots => f.write_str("no free capability slots left"),
            AllocError::Kernel(e) => write!(f, "Retype failed: {e}"),
        }
    }
}

/// An untouched untyped capability in the caller's own space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    slot: u32,
}

/// A block that small objects are packed into.
#[derive(Clone, Copy, Debug)]
struct SmallBlock {
    slot: u32,
    /// log2 of its size.
    bits: u32,
    /// The kernel's watermark, mirrored: bytes used from the block's start.
    used: u64,
}

/// The untyped memory of one capability space (see the module docs).
#[derive(Clone, Debug)]
pub struct UntypedAllocator {
    /// `free[b]`: untouched blocks of 2^b bytes.
    free: [Vec<Block>; MAX_UNTYPED_BITS as usize + 1],
    small: Vec<SmallBlock>,
}

impl Default for UntypedAllocator {
    fn default() -> Self {
        UntypedAllocator {
            free: core::array::from_fn(|_| Vec::new()),
            small: Vec::new(),
        }
    }
}

impl UntypedAllocator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the untouched untyped capability in own slot `slot`, described
    /// by `info`. Device memory and sizes outside 2^12 ..= 2^47 are left
    /// out; returns whether it was added.
    pub fn add(&mut self, slot: u32, info: &UntypedInfo) -> bool {
        let bits = u32::from(info.size_bits);
        if info.device != 0 || !(MIN_UNTYPED_BITS..=MAX_UNTYPED_BITS).contains(&bits) {
            return false;
        }
        match self.free.get_mut(bits as usize) {
            Some(list) => {
                list.push(Block { slot });
                true
            }
            None => false,
        }
    }

    /// Bytes in untouched blocks (the rests of shared blocks not counted).
    pub fn free_bytes(&self) -> u64 {
        self.free
            .iter()
            .enumerate()
            .map(|(bits, list)| (list.len() as u64) << bits)
            .sum()
    }

    /// How many untouched blocks of each size it holds: `(log2 of the
    /// size, count)` for each size it has, smallest first.
    pub fn free_blocks(&self) -> impl Iterator<Item = (u32, usize)> + Clone + '_ {
        self.free
            .iter()
            .enumerate()
            .filter(|(_, list)| !list.is_empty())
            .map(|(bits, list)| (bits as u32, list.len()))
    }

    /// Makes one object of `kind` (`size_bits` for sized types) into slot
    /// `dst`, which may be in another table (`abi::caddr::in_table`).
    /// Slots for splitting come from `slots`.
    pub fn alloc(
        &mut self,
        kernel: &mut impl Retyper,
        slots: &mut SlotAllocator,
        kind: ObjectType,
        size_bits: u32,
        dst: CapAddr,
    ) -> Result<(), AllocError> {
        let bad = AllocError::BadRequest { kind, size_bits };
        // `object_bits` is `None` for what `Retype` cannot make (IRQ
        // handlers, I/O ports) and for sizes out of range.
        let bits = kind.object_bits(size_bits.into()).ok_or(bad)?;
        if bits < PACK_BITS {
            return self.alloc_small(kernel, slots, kind, size_bits, bits, dst);
        }
        let block = self.take_block(kernel, slots, bits)?;
        match kernel.retype(block.slot, kind, size_bits, dst, 1) {
            Ok(()) => Ok(()),
            Err(e) => {
                // A refused call changes nothing: the block is still whole.
                self.put_back(bits, block);
                Err(AllocError::Kernel(e))
            }
        }
    }

    /// An object of 2^`bits` < 2^[`PACK_BITS`] bytes, packed into a shared
    /// block.
    fn alloc_small(
        &mut self,
        kernel: &mut impl Retyper,
        slots: &mut SlotAllocator,
        kind: ObjectType,
        size_bits: u32,
        bits: u32,
        dst: CapAddr,
    ) -> Result<(), AllocError> {
        let size = 1u64 << bits;
        let fits = |b: &SmallBlock| b.used.next_multiple_of(size) + size <= 1 << b.bits;
        let index = match self.small.iter().position(fits) {
            Some(i) => i,
            None => {
                // Always a block of 2^PACK_BITS, never a smaller one: so
                // every small object's memory is a 64 KiB request, which
                // the memory rule (`crate::plan`) counts exactly.
                let block = self
                    .take_block(kernel, slots, PACK_BITS)
                    .map_err(|e| match e {
                        AllocError::OutOfMemory { .. } => AllocError::OutOfMemory { bits },
                        e => e,
                    })?;
                self.small.push(SmallBlock {
                    slot: block.slot,
                    bits: PACK_BITS,
                    used: 0,
                });
                self.small.len() - 1
            }
        };
        let Some(block) = self.small.get_mut(index) else {
            return Err(AllocError::OutOfMemory { bits });
        };
        kernel
            .retype(block.slot, kind, size_bits, dst, 1)
            .map_err(AllocError::Kernel)?;
        block.used = block.used.next_multiple_of(size) + size;
        Ok(())
    }

    /// An untouched block of exactly 2^`bits` bytes, split off a larger
    /// one if needed.
    fn take_block(
        &mut self,
        kernel: &mut impl Retyper,
        slots: &mut SlotAllocator,
        bits: u32,
    ) -> Result<Block, AllocError> {
        let (mut have, mut block) = (bits..=MAX_UNTYPED_BITS)
            .find_map(|b| Some((b, self.free.get_mut(b as usize)?.pop()?)))
            .ok_or(AllocError::OutOfMemory { bits })?;
        while have > bits {
            let half = have - 1;
            let Some(pair) = slots.alloc_range(2) else {
                self.put_back(have, block);
                return Err(AllocError::OutOfSlots);
            };
            let split = kernel.retype(block.slot, ObjectType::Untyped, half, caddr::own(pair), 2);
            if let Err(e) = split {
                let _ = slots.free(pair);
                let _ = slots.free(pair + 1);
                self.put_back(have, block);
                return Err(AllocError::Kernel(e));
            }
            // The halves lie at offsets 0 and 2^half of the parent, whose
            // slot now holds only them and is kept as their parent.
            self.put_back(half, Block { slot: pair + 1 });
            block = Block { slot: pair };
            have = half;
        }
        Ok(block)
    }

    fn put_back(&mut self, bits: u32, block: Block) {
        if let Some(list) = self.free.get_mut(bits as usize) {
            list.push(block);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::vec;
    use std::vec::Vec;

    /// The kernel's `Retype` as docs/abi.md states it, for untyped
    /// capabilities only: objects at the watermark aligned to their size,
    /// `OutOfMemory` when they do not fit, `SlotOccupied` for a full slot.
    #[derive(Default)]
    pub(crate) struct Model {
        /// slot -> (phys, bits, watermark)
        untyped: BTreeMap<u64, (u64, u32, u64)>,
        /// Every slot that holds something.
        occupied: BTreeMap<u64, ObjectType>,
        /// Physical ranges of non-untyped objects.
        objects: Vec<(u64, u64)>,
        calls: usize,
        fail_next: Option<Error>,
    }

    impl Model {
        pub(crate) fn with(untyped: &[(u32, u64, u32)]) -> Model {
            let mut m = Model::default();
            for &(slot, phys, bits) in untyped {
                m.untyped.insert(slot.into(), (phys, bits, 0));
                m.occupied.insert(slot.into(), ObjectType::Untyped);
            }
            m
        }
    }

    impl Retyper for Model {
        fn retype(
            &mut self,
            untyped: u32,
            kind: ObjectType,
            size_bits: u32,
            dst: CapAddr,
            count: u32,
        ) -> Result<(), Error> {
            self.calls += 1;
            if let Some(e) = self.fail_next.take() {
                return Err(e);
            }
            let &(phys, bits, mark) = self.untyped.get(&untyped.into()).ok_or(Error::EmptySlot)?;
            let obj = kind
                .object_bits(size_bits.into())
                .ok_or(Error::InvalidArgument)?;
            let start = mark.next_multiple_of(1 << obj);
            let end = start + (u64::from(count) << obj);
            if end > 1 << bits {
                return Err(Error::OutOfMemory);
            }
            for i in 0..u64::from(count) {
                if self.occupied.contains_key(&(dst + i)) {
                    return Err(Error::SlotOccupied);
                }
            }
            for i in 0..u64::from(count) {
                let at = phys + start + (i << obj);
                self.occupied.insert(dst + i, kind);
                if kind == ObjectType::Untyped {
                    self.untyped.insert(dst + i, (at, obj, 0));
                } else {
                    self.objects.push((at, at + (1 << obj)));
                }
            }
            self.untyped.get_mut(&untyped.into()).unwrap().2 = end;
            Ok(())
        }
    }

    fn info(phys: u64, bits: u8, device: bool) -> UntypedInfo {
        UntypedInfo {
            phys,
            size_bits: bits,
            device: device.into(),
            _reserved: [0; 6],
        }
    }

    fn no_overlaps(objects: &[(u64, u64)]) {
        let mut sorted = objects.to_vec();
        sorted.sort();
        for pair in sorted.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "{pair:x?} overlap");
        }
    }

    #[test]
    fn add_skips_device_and_bad_sizes() {
        let mut a = UntypedAllocator::new();
        assert!(a.add(64, &info(0x10_0000, 20, false)));
        assert!(!a.add(65, &info(0xfe00_0000, 20, true)));
        assert!(!a.add(66, &info(0, 11, false)));
        assert!(!a.add(67, &info(0, 48, false)));
        assert_eq!(a.free_bytes(), 1 << 20);
    }

    fn object_bytes(kernel: &Model) -> u64 {
        kernel.objects.iter().map(|(s, e)| e - s).sum()
    }

    #[test]
    fn splits_buddy_style_and_packs_small_objects() {
        // One 1 MiB untyped at 0x100000 in slot 64.
        let mut kernel = Model::with(&[(64, 0x10_0000, 20)]);
        let mut slots = SlotAllocator::new(100, 1100).unwrap();
        let mut a = UntypedAllocator::new();
        a.add(64, &info(0x10_0000, 20, false));
        let mut dst = 2000u64;
        let mut next = || {
            dst += 1;
            dst
        };
        // A capability table of 2^10 slots (2^17 bytes), an address space
        // with a 2^16 pool (2^17), a thread (2^10), an endpoint (2^6) and
        // frames: sizes out of order, as a spawn asks for them.
        a.alloc(&mut kernel, &mut slots, ObjectType::CapTable, 10, next())
            .unwrap();
        a.alloc(&mut kernel, &mut slots, ObjectType::Thread, 0, next())
            .unwrap();
        a.alloc(
            &mut kernel,
            &mut slots,
            ObjectType::AddressSpace,
            16,
            next(),
        )
        .unwrap();
        a.alloc(&mut kernel, &mut slots, ObjectType::Endpoint, 0, next())
            .unwrap();
        for _ in 0..20 {
            a.alloc(&mut kernel, &mut slots, ObjectType::Frame4K, 0, next())
                .unwrap();
        }
        a.alloc(&mut kernel, &mut slots, ObjectType::Thread, 0, next())
            .unwrap();
        no_overlaps(&kernel.objects);
        // The two large objects, and two shared 64 KiB blocks.
        assert_eq!(a.free_bytes(), (1 << 20) - 2 * (1 << 17) - 2 * (1 << 16));

        // The rest can be handed out in pages, losing only the alignment of
        // pages after threads and endpoints in the shared blocks.
        while a
            .alloc(&mut kernel, &mut slots, ObjectType::Frame4K, 0, next())
            .is_ok()
        {}
        assert_eq!(a.free_bytes(), 0);
        no_overlaps(&kernel.objects);
        assert!(kernel
            .objects
            .iter()
            .all(|&(s, e)| s >= 0x10_0000 && e <= 0x20_0000));
        let lost = (1 << 20) - object_bytes(&kernel);
        assert!(lost < 2 * 4096, "{lost} bytes lost");
        // Splitting 1 MiB down to 64 KiB blocks: at most two slots per
        // level and block, never per frame.
        let split_slots = 1000 - slots.free_count();
        assert!(split_slots <= 2 * 16, "{split_slots} slots for splits");
    }

    #[test]
    fn small_objects_take_only_64k_blocks() {
        // Only 4 KiB blocks: small objects are refused (the memory rule
        // counts every small object's memory as a 64 KiB request), and the
        // blocks stay untouched.
        let mut kernel = Model::with(&[(64, 0, 12), (65, 0x1000, 12)]);
        let mut slots = SlotAllocator::new(100, 200).unwrap();
        let mut a = UntypedAllocator::new();
        a.add(64, &info(0, 12, false));
        a.add(65, &info(0x1000, 12, false));
        for (kind, bits) in [
            (ObjectType::Thread, 11),
            (ObjectType::Endpoint, 6),
            (ObjectType::Frame4K, 12),
        ] {
            assert_eq!(
                a.alloc(&mut kernel, &mut slots, kind, 0, 300),
                Err(AllocError::OutOfMemory { bits })
            );
        }
        assert_eq!(kernel.calls, 0);
        assert_eq!(a.free_bytes(), 2 << 12);

        // Sixteen frames share one 64 KiB untyped, no slots spent.
        let mut kernel = Model::with(&[(64, 0, 16)]);
        let mut a = UntypedAllocator::new();
        a.add(64, &info(0, 16, false));
        for i in 0..16 {
            a.alloc(&mut kernel, &mut slots, ObjectType::Frame4K, 0, 600 + i)
                .unwrap();
        }
        assert_eq!(
            a.alloc(&mut kernel, &mut slots, ObjectType::Frame4K, 0, 700),
            Err(AllocError::OutOfMemory { bits: 12 })
        );
        assert_eq!(slots.free_count(), 100);
        no_overlaps(&kernel.objects);
    }

    #[test]
    fn destination_in_another_table() {
        let mut kernel = Model::with(&[(64, 0, 21)]);
        let mut slots = SlotAllocator::new(100, 200).unwrap();
        let mut a = UntypedAllocator::new();
        a.add(64, &info(0, 21, false));
        let dst = caddr::in_table(7, 1);
        a.alloc(&mut kernel, &mut slots, ObjectType::Untyped, 20, dst)
            .unwrap();
        assert_eq!(kernel.untyped.get(&dst), Some(&(0, 20, 0)));
    }

    #[test]
    fn errors_leave_everything_usable() {
        let mut kernel = Model::with(&[(64, 0, 18)]);
        let mut slots = SlotAllocator::new(100, 102).unwrap();
        let mut a = UntypedAllocator::new();
        a.add(64, &info(0, 18, false));
        assert_eq!(
            a.alloc(&mut kernel, &mut slots, ObjectType::IrqHandler, 0, 300),
            Err(AllocError::BadRequest {
                kind: ObjectType::IrqHandler,
                size_bits: 0
            })
        );
        assert!(matches!(
            a.alloc(&mut kernel, &mut slots, ObjectType::CapTable, 0, 300),
            Err(AllocError::BadRequest { .. })
        ));
        assert_eq!(
            a.alloc(&mut kernel, &mut slots, ObjectType::Untyped, 19, 300),
            Err(AllocError::OutOfMemory { bits: 19 })
        );
        // A refused split gives its slots and the block back.
        kernel.fail_next = Some(Error::InvalidArgument);
        assert_eq!(
            a.alloc(&mut kernel, &mut slots, ObjectType::Untyped, 16, 300),
            Err(AllocError::Kernel(Error::InvalidArgument))
        );
        assert_eq!((slots.free_count(), a.free_bytes()), (2, 1 << 18));
        // Only two slots: one split (256 K -> 2 x 128 K) fits, the second
        // (128 K -> 2 x 64 K) has no slots left.
        assert_eq!(
            a.alloc(&mut kernel, &mut slots, ObjectType::Untyped, 16, 300),
            Err(AllocError::OutOfSlots)
        );
        assert_eq!(a.free_bytes(), 1 << 18);
        // 128 KiB objects need no further split.
        a.alloc(&mut kernel, &mut slots, ObjectType::Untyped, 17, 300)
            .unwrap();
        a.alloc(&mut kernel, &mut slots, ObjectType::Untyped, 17, 301)
            .unwrap();
        assert_eq!(a.free_bytes(), 0);

        // A refused retype from a shared block keeps the block usable.
        let mut kernel = Model::with(&[(64, 0, 16)]);
        let mut a = UntypedAllocator::new();
        a.add(64, &info(0, 16, false));
        kernel.occupied.insert(300, ObjectType::Endpoint);
        assert_eq!(
            a.alloc(&mut kernel, &mut slots, ObjectType::Frame4K, 0, 300),
            Err(AllocError::Kernel(Error::SlotOccupied))
        );
        a.alloc(&mut kernel, &mut slots, ObjectType::Frame4K, 0, 301)
            .unwrap();
        assert_eq!(kernel.objects, [(0, 0x1000)]);
    }

    #[test]
    fn many_untyped_random_requests() {
        let regions: Vec<(u32, u64, u32)> = vec![
            (64, 0x0010_0000, 20),
            (65, 0x0040_0000, 22),
            (66, 0x0080_0000, 23),
            (67, 0x0100_0000, 12),
        ];
        let mut kernel = Model::with(&regions);
        let mut slots = SlotAllocator::new(100, 4096).unwrap();
        let mut a = UntypedAllocator::new();
        for &(slot, phys, bits) in &regions {
            a.add(slot, &info(phys, bits as u8, false));
        }
        let total = a.free_bytes();
        let kinds = [
            (ObjectType::Frame4K, 0),
            (ObjectType::Thread, 0),
            (ObjectType::Endpoint, 0),
            (ObjectType::CapTable, 10),
            (ObjectType::AddressSpace, 16),
            (ObjectType::Untyped, 18),
            (ObjectType::Frame2M, 0),
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut dst = 10_000u64;
        let mut big_bytes = 0u64;
        for _ in 0..300 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let (kind, size) = kinds[(state % kinds.len() as u64) as usize];
            dst += 1;
            let bits = kind.object_bits(size.into()).unwrap();
            match a.alloc(&mut kernel, &mut slots, kind, size, dst) {
                Ok(()) if bits >= PACK_BITS => big_bytes += 1 << bits,
                Ok(()) => {}
                Err(AllocError::OutOfMemory { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
        no_overlaps(&kernel.objects);
        for &(s, e) in &kernel.objects {
            assert!(regions
                .iter()
                .any(|&(_, p, b)| s >= p && e <= p + (1u64 << b)));
        }
        // Large objects cost exactly their size; small ones cost the
        // blocks they share, nothing else is lost.
        let shared: u64 = a.small.iter().map(|b| 1u64 << b.bits).sum();
        assert_eq!(total - a.free_bytes() - big_bytes, shared);
        assert!(!a.small.is_empty() && big_bytes > 0);
    }
}
