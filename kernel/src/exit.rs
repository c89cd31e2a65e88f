//! Ending the machine: clean power-off with a success or failure status.
//!
//! Under QEMU the `isa-debug-exit` device at port 0xf4 turns the written
//! value v into QEMU's exit status (v << 1) | 1: 0x10 → 33 means success,
//! 0x11 → 35 means failure (xtask relies on exactly these). Without that
//! device (real hardware), the kernel falls back to ACPI soft-off, and if
//! that is unavailable too, halts.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::arch::cpu;

/// The thread id of root, the first user thread (set when it is made).
static ROOT_ID: AtomicU64 = AtomicU64::new(u64::MAX);
/// Whether root ended badly: an exit code other than 0, or a fault with
/// no handler to report it to.
static ROOT_FAILED: AtomicBool = AtomicBool::new(false);

/// Records which thread is root.
pub fn set_root(id: u64) {
    ROOT_ID.store(id, Ordering::Relaxed);
}

/// Notes how thread `id` ended (exit code, or `None` for a fault without a
/// handler); only root's end decides the run's status. Whether the run
/// failed is root's to say: it knows what it was asked to start (docs/
/// architecture.md, "Ending the machine"); the kernel only carries its
/// word to the power-off.
pub fn note_end(id: u64, code: Option<i64>) {
    if id == ROOT_ID.load(Ordering::Relaxed) && code != Some(0) {
        ROOT_FAILED.store(true, Ordering::Relaxed);
    }
}

/// How the machine ends when no user thread is left: failure when root
/// ended badly, success otherwise.
pub fn run_status() -> ExitCode {
    if ROOT_FAILED.load(Ordering::Relaxed) {
        ExitCode::Failure
    } else {
        ExitCode::Success
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    Success,
    Failure,
}

const DEBUG_EXIT_PORT: u16 = 0xf4;

pub fn exit(code: ExitCode) -> ! {
    cpu::disable_interrupts();
    trace!(dump());
    let value: u8 = match code {
        ExitCode::Success => 0x10,
        ExitCode::Failure => 0x11,
    };
    // SAFETY: port 0xf4 is QEMU's isa-debug-exit (or unused on real PCs,
    // where writes to it are ignored).
    unsafe { cpu::outb(DEBUG_EXIT_PORT, value) }
    crate::acpi::power_off();
    crate::kprintln!("power-off failed; halting");
    cpu::halt_forever()
}
