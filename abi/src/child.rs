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
//! | [`SERVICE_ENDPOINT`] | an endpoint shared by all children root starts: a *server* (see below) gets all rights and receives on it; every other child gets it write-only, badged with its index, and calls it |
//! | [`OWN_THREAD`], [`OWN_CSPACE`], [`OWN_VSPACE`] | only for *test* components (name starts with `test-`): the child's own thread, capability space and address space, so it can start threads in its own address space and test every call |
//! | [`FIRST_FREE`].. | empty |
//!
//! Other children do not hold capabilities to their own thread, address
//! space or capability space: they cannot undo their own set-up. Root is
//! each child's fault handler (the fault endpoint is badged with the
//! child's index, 1-based): a faulting child is reported and stopped, and a
//! child's exit arrives as a [`crate::fault::LABEL_EXIT`] message.
//!
//! The child's stack (64 KiB) ends at [`crate::MAIN_STACK_TOP`]; its IPC
//! buffer page is at [`crate::MAIN_IPC_BUFFER_ADDR`].
//!
//! When every started child that is not a server has exited or faulted,
//! root prints `root: all children finished`, deletes the remaining
//! children and exits, which ends the run (the kernel powers off when no
//! thread is left). A child is a *server* when its name ends in `-server`
//! or is `pinger`: root does not wait for it.

pub const UNTYPED: u32 = 1;
pub const SERVICE_ENDPOINT: u32 = 2;
pub const OWN_THREAD: u32 = 4;
pub const OWN_CSPACE: u32 = 5;
pub const OWN_VSPACE: u32 = 6;
pub const FIRST_FREE: u32 = 8;

pub const CSPACE_BITS: u32 = 10;
pub const UNTYPED_BITS: u32 = 20;
/// Priority of children (root runs at 200).
pub const PRIORITY: u8 = 100;
/// Root's own priority.
pub const ROOT_PRIORITY: u8 = 200;

/// Whether root treats `name` as a server (does not wait for it).
pub fn is_server(name: &str) -> bool {
    name == "pinger" || name.ends_with("-server")
}

/// Whether root gives `name` capabilities to itself.
pub fn is_test(name: &str) -> bool {
    name.starts_with("test-")
}
