//! How root starts the components named on the kernel command line, until
//! the framework's init takes over (the component-framework issue).
//!
//! `pecan.start=NAME[:ARG],NAME[:ARG],...` lists components of the boot
//! image; root starts them in order, each in its own address space and
//! capability space, at priority [`PRIORITY`], with `rdi = ARG` (decimal or
//! `0x` hex; 0 if absent). A name that is not in the boot image, or whose
//! ELF file is malformed, is refused with a message naming it and the
//! reason; the others still start.
//!
//! Each child's capability space (2^[`CSPACE_BITS`] slots) holds:
//!
//! | slot | capability |
//! |------|------------|
//! | [`UNTYPED`] | untyped memory of 2^[`UNTYPED_BITS`] bytes, the child's own to retype |
//! | [`SERVICE_ENDPOINT`] | an endpoint shared by all children root starts (all rights): a server receives on it, clients call it |
//! | [`ROOT_ENDPOINT`] | an endpoint to root, write-only, badged with the child's index (1-based); see [`REPORT_DONE`] |
//! | [`FIRST_FREE`].. | empty |
//!
//! A child does not hold capabilities to its own thread, address space or
//! capability space: it cannot undo its own set-up. Root is each child's
//! fault handler: a faulting child is reported and stopped.
//!
//! The child's stack (64 KiB) ends at [`crate::MAIN_STACK_TOP`]; its IPC
//! buffer page is at [`crate::MAIN_IPC_BUFFER_ADDR`].
//!
//! When every started child that is not a server has reported
//! [`REPORT_DONE`] (or exited or faulted), root prints `root: all children
//! finished`, deletes the children and exits, which ends the run. A child
//! is a server when its name ends in `-server` or is `pinger`: root does not
//! wait for it.

pub const UNTYPED: u32 = 1;
pub const SERVICE_ENDPOINT: u32 = 2;
pub const ROOT_ENDPOINT: u32 = 3;
pub const FIRST_FREE: u32 = 8;

pub const CSPACE_BITS: u32 = 10;
pub const UNTYPED_BITS: u32 = 20;
/// Priority of children (root runs at 200).
pub const PRIORITY: u8 = 100;
/// Root's own priority.
pub const ROOT_PRIORITY: u8 = 200;

/// Label of the message a child sends (with `Call` or `Send`) on
/// [`ROOT_ENDPOINT`] to say it has finished; word 0 is its result (0 =
/// success). Root replies with an empty message when the child called.
pub const REPORT_DONE: u64 = 1;
