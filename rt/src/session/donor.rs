//! The client's side of quota donation (`interfaces::session`, "Donation";
//! docs/architecture.md, "Quota donation and close"): a block of the
//! client's own memory that each session's donation is made from and
//! that closing the session makes whole again.

use abi::caddr::{in_table, own};
use abi::{CapSlot, Error, ObjectType};
use interfaces::session as proto;

use super::Interface;
use crate::syscall;

/// Untyped memory a client keeps to donate from, one session at a time:
/// for each session it makes the donation table and untyped of
/// `interfaces::session` ("Donation") from its block; closing the session
/// revokes the block, which destroys both and everything made from them,
/// so the block is whole again.
pub struct Donor {
    /// Own slot of the untyped block.
    pub(super) block: u32,
    pub(super) bits: u32,
    /// Own empty slot for the donation table.
    pub(super) table: u32,
    /// Bytes of each donation's untyped: the interface's own
    /// (`Interface::RAM`) when 0 or less.
    pub(super) ram: u64,
}

impl Donor {
    /// log2 of the block a donation for `I` needs: the table and the
    /// untyped, each aligned to its size, the larger first.
    pub const fn bits_for<I: Interface>() -> u32 {
        Self::bits_for_ram::<I>(I::RAM)
    }

    /// [`Self::bits_for`] with donations of `ram` bytes, when more than
    /// `I::RAM` ([`Self::from_untyped_sized`]).
    pub const fn bits_for_ram<I: Interface>(ram: u64) -> u32 {
        let table = proto::donation_table_bits(I::CAPS) + abi::object::SLOT_BYTES_BITS;
        if I::RAM == 0 {
            return table;
        }
        let ram = proto::donation_ram_bits(if ram > I::RAM { ram } else { I::RAM });
        if ram > table {
            ram + 1
        } else {
            table + 1
        }
    }

    /// A donor for sessions of `I` with a block of
    /// [`Self::bits_for`]`::<I>()` bytes made from the caller's untyped
    /// memory `untyped` (its quota, `child::UNTYPED`) into own slot
    /// `block`; `table`: an empty own slot for the donation table.
    pub fn from_untyped<I: Interface>(
        untyped: CapSlot,
        block: u32,
        table: u32,
    ) -> Result<Donor, Error> {
        Self::from_untyped_sized::<I>(untyped, block, table, I::RAM)
    }

    /// [`Self::from_untyped`] for donations of `ram` bytes (a power of
    /// two, rounded up) where the provider makes more of a larger one —
    /// a Framebuffer session's buffer for a large mode — so that only
    /// the client that wants more pays for it. `ram` below `I::RAM` is
    /// `I::RAM`. The block is [`Self::bits_for_ram`] bytes.
    pub fn from_untyped_sized<I: Interface>(
        untyped: CapSlot,
        block: u32,
        table: u32,
        ram: u64,
    ) -> Result<Donor, Error> {
        let bits = Self::bits_for_ram::<I>(ram);
        syscall::retype(untyped, ObjectType::Untyped, bits.into(), own(block), 1)?;
        Ok(Donor {
            ram,
            ..Donor::new(block, bits, table)
        })
    }

    /// log2 of the block's bytes.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// A donor with the untouched untyped block of 2^`bits` bytes in own
    /// slot `block` and the empty own slot `table`.
    pub fn new(block: u32, bits: u32, table: u32) -> Donor {
        Donor {
            block,
            bits,
            table,
            ram: 0,
        }
    }

    /// Makes the donation for `I` from the block: the table in `table`,
    /// the untyped in its slot `DONATED_UNTYPED`.
    pub(super) fn make<I: Interface>(&self) -> Result<(), Error> {
        let table_bits = proto::donation_table_bits(I::CAPS);
        let block = own(self.block);
        let table = own(self.table);
        if I::RAM == 0 {
            return syscall::retype(block, ObjectType::CapTable, table_bits.into(), table, 1);
        }
        let ram_bits = proto::donation_ram_bits(self.ram.max(I::RAM));
        let untyped = in_table(self.table, proto::DONATED_UNTYPED);
        // The table must exist before the untyped goes into it; the kernel
        // aligns each object to its size, so the block holds both either
        // way (`bits_for`).
        syscall::retype(block, ObjectType::CapTable, table_bits.into(), table, 1)?;
        syscall::retype(block, ObjectType::Untyped, ram_bits.into(), untyped, 1)
    }

    /// Revokes the block: the donation and everything made from it or
    /// derived from it — the parent's and the provider's copies, the
    /// provider's objects — are destroyed, and the block is whole again.
    pub fn reclaim(&self) -> Result<(), Error> {
        // SAFETY: the block holds only the donation (a table and an
        // untyped) and what the provider made from it; nothing of the
        // caller's own is mapped from it.
        unsafe { syscall::cap_revoke(own(self.block)) }
    }

    /// Whether the block is whole: the kernel makes an untyped of the
    /// block's full size from it only when no object made from it is left
    /// (it is made in the table slot and deleted again).
    pub fn is_whole(&self) -> bool {
        let probe = own(self.table);
        let whole = syscall::retype(
            own(self.block),
            ObjectType::Untyped,
            self.bits.into(),
            probe,
            1,
        )
        .is_ok();
        // SAFETY: an untyped capability; nothing is mapped through it.
        let _ = unsafe { syscall::cap_delete(probe) };
        whole
    }
}
