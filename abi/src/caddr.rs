//! Capability addresses: how a system call names a slot.
//!
//! Every slot argument is a 64-bit capability address:
//!
//! ```text
//!  63                 32 31                  0
//! +---------------------+---------------------+
//! |  table (0 = own)    |       index         |
//! +---------------------+---------------------+
//! ```
//!
//! - `table == 0`: slot `index` of the caller's own capability space (the
//!   capability table its thread was configured with).
//! - `table == t != 0`: slot `index` of the capability table whose
//!   capability sits in the caller's own slot `t`. Writing into such a slot
//!   (as the destination of copy, mint, retype) needs `WRITE` on that table
//!   capability; reading from it needs `READ`. This is how a parent fills
//!   a child's capability space without holding the child's capabilities
//!   itself.
//!
//! Slot 0 of every capability space is the null slot by convention: tools
//! never put a capability there, and IPC uses address 0 for "no slot".

/// A capability address (see the module doc).
pub type CapAddr = u64;

/// The null capability address ("no slot").
pub const NULL_SLOT: CapAddr = 0;

/// Slot `index` of the caller's own capability space.
pub const fn own(index: u32) -> CapAddr {
    index as u64
}

/// Slot `index` of the capability table held in the caller's own slot
/// `table` (which must not be 0).
pub const fn in_table(table: u32, index: u32) -> CapAddr {
    ((table as u64) << 32) | index as u64
}

/// Splits an address into `(table, index)`; `table == 0` means own space.
pub const fn split(addr: CapAddr) -> (u32, u32) {
    ((addr >> 32) as u32, addr as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        assert_eq!(split(own(7)), (0, 7));
        assert_eq!(split(in_table(3, 9)), (3, 9));
        assert_eq!(split(in_table(u32::MAX, u32::MAX)), (u32::MAX, u32::MAX));
    }
}
