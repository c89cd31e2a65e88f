//! Ending the machine: clean power-off with a success or failure status.
//!
//! Under QEMU the `isa-debug-exit` device at port 0xf4 turns the written
//! value v into QEMU's exit status (v << 1) | 1: 0x10 → 33 means success,
//! 0x11 → 35 means failure (xtask relies on exactly these). Without that
//! device (real hardware), the kernel falls back to ACPI soft-off, and if
//! that is unavailable too, halts.

use crate::arch::cpu;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    Success,
    Failure,
}

const DEBUG_EXIT_PORT: u16 = 0xf4;

pub fn exit(code: ExitCode) -> ! {
    cpu::disable_interrupts();
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
