//! The IPC buffer: a per-thread block of user memory, registered with
//! `ThreadConfigure`, through which messages longer than the register words
//! travel and capabilities are named for transfer.
//!
//! Layout (all `u64`, little endian, offsets in bytes):
//!
//! | offset | field | meaning |
//! |--------|-------|---------|
//! | 0 + 8·i | `words[i]` | message word i for 4 ≤ i < 64 (words 0..4 travel in registers; their buffer places are unused) |
//! | 512 | `send_cap` | sending: the capability address of the capability to transfer when the message info says `caps = 1` |
//! | 520 | `recv_slot` | receiving: where a transferred capability goes (a capability address in the receiver's space; 0 = accept none) |
//!
//! The buffer must be [`IPC_BUFFER_ALIGN`]-aligned, so it never crosses a
//! page, and mapped writable in the thread's address space whenever the
//! thread sends or receives a long message. The kernel reads and writes it
//! through the page tables like any user memory: a missing or read-only
//! buffer makes the IPC fail with `BadAddress` (for the sender) or the
//! message be cut to the register words with `caps = 0` (for the receiver,
//! whose message info then says what arrived).
//!
//! `ThreadRegisters` uses `words[0..REGISTER_COUNT]` of the caller's buffer
//! for the register block (see [`registers`]).

/// Bytes the kernel may touch, from the buffer's start.
pub const IPC_BUFFER_SIZE: u64 = 528;
/// Required alignment of the buffer's address.
pub const IPC_BUFFER_ALIGN: u64 = 1024;
/// Offset of message word `i`.
pub const fn word_offset(i: usize) -> u64 {
    8 * i as u64
}
/// Offset of the capability to send.
pub const SEND_CAP_OFFSET: u64 = 512;
/// Offset of the receive slot.
pub const RECV_SLOT_OFFSET: u64 = 520;

/// The buffer as a Rust type, for user code that owns one.
#[repr(C, align(1024))]
#[derive(Clone, Copy, Debug)]
pub struct IpcBuffer {
    pub words: [u64; crate::MAX_MESSAGE_WORDS],
    pub send_cap: u64,
    pub recv_slot: u64,
}

impl IpcBuffer {
    pub const fn new() -> Self {
        Self {
            words: [0; crate::MAX_MESSAGE_WORDS],
            send_cap: 0,
            recv_slot: 0,
        }
    }
}

impl Default for IpcBuffer {
    fn default() -> Self {
        Self::new()
    }
}

/// The register block of `ThreadRegisters`: these registers, in this order,
/// in `words[0..REGISTER_COUNT]` of the caller's IPC buffer.
pub mod registers {
    pub const RIP: usize = 0;
    pub const RSP: usize = 1;
    pub const RFLAGS: usize = 2;
    pub const RAX: usize = 3;
    pub const RBX: usize = 4;
    pub const RCX: usize = 5;
    pub const RDX: usize = 6;
    pub const RSI: usize = 7;
    pub const RDI: usize = 8;
    pub const RBP: usize = 9;
    pub const R8: usize = 10;
    pub const R9: usize = 11;
    pub const R10: usize = 12;
    pub const R11: usize = 13;
    pub const R12: usize = 14;
    pub const R13: usize = 15;
    pub const R14: usize = 16;
    pub const R15: usize = 17;
    /// Words in the block.
    pub const REGISTER_COUNT: usize = 18;
    /// RFLAGS bits a writer may set (CF, PF, AF, ZF, SF, DF, OF); the kernel
    /// keeps IF set and IOPL 0 whatever is written.
    pub const USER_RFLAGS_MASK: u64 = 0x0cd5;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_offsets() {
        assert_eq!(
            core::mem::offset_of!(IpcBuffer, send_cap) as u64,
            SEND_CAP_OFFSET
        );
        assert_eq!(
            core::mem::offset_of!(IpcBuffer, recv_slot) as u64,
            RECV_SLOT_OFFSET
        );
        assert!(core::mem::size_of::<IpcBuffer>() as u64 <= IPC_BUFFER_ALIGN);
        const { assert!(IPC_BUFFER_SIZE <= IPC_BUFFER_ALIGN) };
        assert_eq!(word_offset(63), 504);
    }
}
