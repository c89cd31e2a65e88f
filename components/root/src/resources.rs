//! Root's capability space and untyped memory: the free slots
//! (`first_free_slot..1 << cspace_bits`, a `ucore::slots::SlotAllocator`)
//! and the boot untyped capabilities (`slot::UNTYPED_FIRST..`, a
//! `ucore::untyped::UntypedAllocator`, device memory left out). [`Resources::make`]
//! is "an object of this type, in a fresh slot of mine".

use core::fmt;

use rt::abi::bootinfo::{slot, BootInfo};
use rt::abi::caddr::{self, CapAddr};
use rt::abi::object::MAX_CAP_TABLE_BITS;
use rt::abi::{Error, ObjectType};
use rt::syscall;
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
            ResourceError::NoSlot => f.write_str("no free slot left in root's capability space"),
            ResourceError::Alloc(e) => write!(f, "{e}"),
        }
    }
}

/// Root's free slots and untyped memory.
pub struct Resources {
    slots: SlotAllocator,
    untyped: UntypedAllocator,
}

/// What [`Resources::from_boot_info`] found, for the log.
pub struct Summary {
    pub untyped_caps: usize,
    pub device_caps: usize,
    pub free_bytes: u64,
    pub free_slots: u32,
}

impl Resources {
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

    /// A free slot of root's own space.
    pub fn slot(&mut self) -> Result<u32, ResourceError> {
        self.slots.alloc().ok_or(ResourceError::NoSlot)
    }

    /// An object of `kind` (`size_bits` for sized types) in a fresh slot of
    /// root's own space; returns the slot.
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
