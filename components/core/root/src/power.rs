//! Ending a failed run with the failure status.
//!
//! The kernel powers the machine off when no user thread is left, always
//! with the success status: it knows nothing of runs, scenarios or exit
//! codes (docs/architecture.md, "Ending the machine"). Whether a run
//! failed is root's policy, so root ends a failed run itself, through the
//! device the kernel would use: QEMU's `isa-debug-exit` at I/O port 0xf4,
//! with the value the kernel writes for failure (`kernel/src/exit.rs`;
//! QEMU then exits with status 35, which xtask reads as failure). Root
//! holds every I/O port (`abi::bootinfo::slot::IO_PORTS`). Without the
//! device (a real PC) the write does nothing: root returns its exit code
//! and the kernel powers off as always.

use rt::abi::bootinfo::slot;
use rt::abi::caddr::own;
use rt::println;
use rt::syscall;

/// QEMU's `isa-debug-exit` port and the value that means failure.
const DEBUG_EXIT_PORT: u16 = 0xf4;
const FAILURE: u32 = 0x11;

/// Ends the run with the failure status (root's exit code `code` is not 0).
/// Returns only where there is no `isa-debug-exit` device.
pub fn fail(code: i32) {
    println!("root: the run failed (exit code {code}): powering off with the failure status");
    // SAFETY: the isa-debug-exit device ends QEMU; it has no memory to
    // write (no DMA). On a machine without it, the port is unused.
    let written =
        unsafe { syscall::io_port_write(own(slot::IO_PORTS), DEBUG_EXIT_PORT, 1, FAILURE) };
    if let Err(e) = written {
        println!("root: cannot write the failure status: {e}");
    }
}
