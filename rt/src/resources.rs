//! A component's capability slots and untyped memory, for making kernel
//! objects: free slots (a `ucore::slots::SlotAllocator`) and untyped
//! capabilities (a `ucore::untyped::UntypedAllocator`, device memory left
//! out). [`Resources::make`] is "an object of this type, in a fresh slot of
//! mine".
//!
//! Root builds one from its boot information ([`Resources::from_boot_info`]:
//! `first_free_slot..1 << cspace_bits` and the boot untyped capabilities);
//! init builds one per child ([`Resources::new`]: a range of its slots and
//! the one untyped block that child's existence is paid from, so revoking
//! that block returns all of it).

use core::fmt;

use crate::syscall;
use abi::bootinfo::{slot, BootInfo, UntypedInfo};
use abi::caddr::{self, CapAddr};
use abi::object::MAX_CAP_TABLE_BITS;
use abi::{Error, ObjectType};
use ucore::slots::SlotAllocator;
use ucore::untyped::{AllocError, Retyper, UntypedAllocator};

/// The kernel's `Retype`, for the untyped allocator.
struct Kernel;

impl Retyper for Kernel {
    fn retype(
        &mut self,
        untyped: u32,
        kind: ObjectType,
        size_bits: u32,
        dst: CapAddr,
        count: u32,
    ) -> Result<(), Error> {
        syscall::retype(
            caddr::own(untyped),
            kind,
            size_bits.into(),
            dst,
            count.into(),
        )
    }
}

/// Why a resource could not be had.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceError {
    /// The boot information describes an impossible capability space.
    BadCSpace {
        bits: u64,
        first_free: u64,
    },
    /// No free slot left in root's capability space.
    NoSlot,
    Alloc(AllocError),
}

impl fmt::Display for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceError::BadCSpace { bits, first_free } => write!(
                f,
                "boot information describes a capability space of 2^{bits} slots \
                 with the first free at {first_free}"
            ),
            ResourceError::NoSlot => f.write_str("no free capability slot left"),
            ResourceError::Alloc(e) => write!(f, "{e}"),
        }
    }
}

/// Free slots and untyped memory of one capability space (or a part of it).
pub struct Resources {
    slots: SlotAllocator,
    untyped: UntypedAllocator,
}

/// What [`Resources::from_boot_info`] found, for the log.
#[allow(missing_docs)]
pub struct Summary {
    pub untyped_caps: usize,
    pub device_caps: usize,
    pub free_bytes: u64,
    pub free_slots: u32,
}

impl Resources {
    /// The slots `first..end` of the caller's own space and the untouched,
    /// non-device untyped capability of 2^`untyped_bits` bytes in its own
    /// slot `untyped` (outside `first..end`).
    pub fn new(
        first: u32,
        end: u32,
        untyped: u32,
        untyped_bits: u8,
    ) -> Result<Resources, ResourceError> {
        let bad = ResourceError::BadCSpace {
            bits: u64::from(end),
            first_free: u64::from(first),
        };
        let slots = SlotAllocator::new(first.into(), end.into()).map_err(|_| bad)?;
        let mut pool = UntypedAllocator::new();
        let info = UntypedInfo {
            phys: 0,
            size_bits: untyped_bits,
            device: 0,
            _reserved: [0; 6],
        };
        if !pool.add(untyped, &info) {
            return Err(ResourceError::Alloc(AllocError::OutOfMemory {
                bits: untyped_bits.into(),
            }));
        }
        Ok(Resources {
            slots,
            untyped: pool,
        })
    }

    /// Adds the untouched, non-device untyped capability of 2^`bits` bytes
    /// in own slot `slot` (outside the slot range) to the memory served;
    /// false for a size the allocator does not take.
    pub fn add_untyped(&mut self, slot: u32, bits: u8) -> bool {
        let info = UntypedInfo {
            phys: 0,
            size_bits: bits,
            device: 0,
            _reserved: [0; 6],
        };
        self.untyped.add(slot, &info)
    }

    /// Takes over the free slots and the RAM untyped capabilities that the
    /// boot information describes.
    pub fn from_boot_info(info: &BootInfo) -> Result<(Resources, Summary), ResourceError> {
        let bits = info.cspace_bits;
        let first_free = info.first_free_slot;
        let bad = ResourceError::BadCSpace { bits, first_free };
        if bits > u64::from(MAX_CAP_TABLE_BITS) {
            return Err(bad);
        }
        let end = 1u64 << bits;
        let slots = SlotAllocator::new(first_free, end).map_err(|_| bad)?;
        let mut untyped = UntypedAllocator::new();
        let mut summary = Summary {
            untyped_caps: 0,
            device_caps: 0,
            free_bytes: 0,
            free_slots: slots.free_count(),
        };
        for (i, ut) in info.untyped().iter().enumerate() {
            let Some(slot) = u32::try_from(i)
                .ok()
                .and_then(|i| slot::UNTYPED_FIRST.checked_add(i))
                .filter(|&s| u64::from(s) < first_free)
            else {
                // Described, but not below the first free slot: the boot
                // information contradicts itself; leave it alone.
                continue;
            };
            if untyped.add(slot, ut) {
                summary.untyped_caps += 1;
            } else if ut.device != 0 {
                summary.device_caps += 1;
            }
        }
        summary.free_bytes = untyped.free_bytes();
        Ok((Resources { slots, untyped }, summary))
    }

    /// The untouched untyped blocks: `(log2 of the size, count)` per size,
    /// smallest first.
    pub fn untyped_blocks(&self) -> impl Iterator<Item = (u32, usize)> + Clone + '_ {
        self.untyped.free_blocks()
    }

    /// Gives back a slot that [`Resources::slot`] handed out and that is
    /// empty again.
    pub fn free_slot(&mut self, slot: u32) {
        let _ = self.slots.free(slot);
    }

    /// A free slot of the caller's own space.
    pub fn slot(&mut self) -> Result<u32, ResourceError> {
        self.slots.alloc().ok_or(ResourceError::NoSlot)
    }

    /// An object of `kind` (`size_bits` for sized types) in a fresh slot of
    /// the caller's own space; returns the slot.
    pub fn make(&mut self, kind: ObjectType, size_bits: u32) -> Result<u32, ResourceError> {
        let slot = self.slot()?;
        match self.make_at(kind, size_bits, caddr::own(slot)) {
            Ok(()) => Ok(slot),
            Err(e) => {
                // The slot stayed empty.
                let _ = self.slots.free(slot);
                Err(e)
            }
        }
    }

    /// An object of `kind` into the empty slot `dst` (any table).
    pub fn make_at(
        &mut self,
        kind: ObjectType,
        size_bits: u32,
        dst: CapAddr,
    ) -> Result<(), ResourceError> {
        self.untyped
            .alloc(&mut Kernel, &mut self.slots, kind, size_bits, dst)
            .map_err(ResourceError::Alloc)
    }
}
