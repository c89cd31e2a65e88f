//! The Pecan system-call ABI: the one definition of syscall numbers, the
//! register convention, error codes, the message-info word, capability
//! rights, object types and the fault-message layout. The kernel and the
//! user runtime both depend on this crate and on nothing else for the ABI;
//! `docs/abi.md` is its prose form.
//!
//! # Register convention (x86_64, `syscall` instruction)
//!
//! | register | on entry                         | on return                         |
//! |----------|----------------------------------|-----------------------------------|
//! | `rax`    | syscall number ([`Sys`])          | error code ([`Error`] as u64, 0 = ok) |
//! | `rdi`    | argument 0 (IPC: capability slot) | result 0 (IPC: sender's badge)     |
//! | `rsi`    | argument 1 (IPC: [`MsgInfo`])     | result 1 (IPC: [`MsgInfo`])        |
//! | `rdx`    | argument 2 (IPC: message word 0)  | result 2 (IPC: message word 0)     |
//! | `r10`    | argument 3 (IPC: message word 1)  | result 3 (IPC: message word 1)     |
//! | `r8`     | argument 4 (IPC: message word 2)  | result 4 (IPC: message word 2)     |
//! | `r9`     | argument 5 (IPC: message word 3)  | result 5 (IPC: message word 3)     |
//!
//! `rcx` and `r11` are clobbered (the CPU uses them for the return address
//! and flags); every other register is preserved. Message words beyond the
//! first [`REGISTER_MESSAGE_WORDS`] travel in the thread's IPC buffer.
#![no_std]
#![forbid(unsafe_code)]

pub mod args;
pub mod bootinfo;
pub mod caddr;
pub mod cpu;
pub mod error;
pub mod fault;
pub mod ipc_buffer;
pub mod map;
pub mod msg;
pub mod object;
pub mod rights;
pub mod sys;
pub mod vcpu;

pub use error::Error;
pub use msg::MsgInfo;
pub use object::ObjectType;
pub use rights::Rights;
pub use sys::Sys;

/// Message words passed in registers (the IPC fast path).
pub const REGISTER_MESSAGE_WORDS: usize = 4;
/// Most message words one IPC can carry (registers + IPC buffer).
pub const MAX_MESSAGE_WORDS: usize = 64;
/// Most capabilities one IPC can transfer.
pub const MAX_MESSAGE_CAPS: usize = 1;
/// A capability address as passed to system calls (see [`caddr`]); a
/// plain slot index names a slot of the caller's own capability space.
pub type CapSlot = caddr::CapAddr;

/// The label of a message that `Recv` returns for a notification bound to
/// the receiving thread: `rdi` then holds the notification's word (already
/// cleared), the message has no words.
pub const LABEL_NOTIFICATION: u64 = 0xffff_ffff_0010;

/// Where a component's first thread finds its IPC buffer (one page, mapped
/// writable by whoever starts the component: the kernel for root, the
/// parent for the others).
pub const MAIN_IPC_BUFFER_ADDR: u64 = 0x0000_7fff_ffff_e000;
/// Top of a component's first stack (the stack grows down from here; the
/// page above it is unmapped, a guard between stack and IPC buffer).
pub const MAIN_STACK_TOP: u64 = 0x0000_7fff_ffff_0000;
