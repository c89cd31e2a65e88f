//! Interrupts for user-level drivers, and I/O ports.
//!
//! Each IOAPIC line (GSI) `g` has a slot in [`LINES`]: the notification it
//! signals and with which badge. An IRQ handler capability names a line by
//! number (root receives one per line at boot). `IrqBind` routes the line to
//! vector [`VECTOR_BASE`]` + g` and unmasks it; when it fires, the kernel
//! masks it, acknowledges the local APIC and signals the notification; the
//! driver serves the device and calls `IrqAck`, which unmasks the line.
//! So a line never interrupts again before its driver has seen the last
//! interrupt, and an unbound line stays masked.

use abi::Error;
use spin::Mutex;

use crate::arch::ioapic;

/// Vector of GSI 0; GSI g uses `VECTOR_BASE + g`.
pub const VECTOR_BASE: u64 = ioapic::VECTOR_BASE as u64;
/// Lines supported (vectors must stay below the PIC's remapped range).
pub const MAX_LINES: usize = 48;

#[derive(Clone, Copy)]
struct Line {
    /// Physical address of the bound notification, 0 if none.
    notification: u64,
    badge: u64,
}

static LINES: Mutex<[Line; MAX_LINES]> = Mutex::new(
    [Line {
        notification: 0,
        badge: 0,
    }; MAX_LINES],
);

/// Lines that exist (and for which root gets a capability).
pub fn line_count() -> u64 {
    u64::from(ioapic::line_count()).min(MAX_LINES as u64)
}

pub fn bind(line: u64, notification: u64, badge: u64) -> Result<(), Error> {
    let gsi = u32::try_from(line).map_err(|_| Error::InvalidArgument)?;
    if line >= line_count() {
        return Err(Error::InvalidArgument);
    }
    let vector = (VECTOR_BASE + line) as u8;
    ioapic::route_default(gsi, vector).map_err(|_| Error::InvalidArgument)?;
    LINES.lock()[line as usize] = Line {
        notification,
        badge,
    };
    ioapic::unmask(gsi);
    Ok(())
}

pub fn ack(line: u64) -> Result<(), Error> {
    if line >= line_count() || LINES.lock()[line as usize].notification == 0 {
        return Err(Error::InvalidState);
    }
    ioapic::unmask(line as u32);
    Ok(())
}

/// A notification is going away: lines bound to it are masked and unbound.
pub fn notification_destroyed(notification: u64) {
    let mut lines = LINES.lock();
    for (gsi, line) in lines.iter_mut().enumerate() {
        if line.notification == notification {
            ioapic::mask(gsi as u32);
            line.notification = 0;
        }
    }
}

/// Whether `vector` belongs to an IOAPIC line; if so, handles it (mask,
/// EOI, signal) and returns true.
pub fn on_interrupt(vector: u64) -> bool {
    if !(VECTOR_BASE..VECTOR_BASE + MAX_LINES as u64).contains(&vector) {
        return false;
    }
    let gsi = (vector - VECTOR_BASE) as usize;
    ioapic::mask(gsi as u32);
    crate::arch::lapic::end_of_interrupt();
    let line = LINES.lock()[gsi];
    if line.notification != 0 {
        crate::ipc::signal(line.notification, line.badge);
    }
    true
}

/// Performs a checked port access; returns the value read (0 for writes).
pub fn io_port(port: u16, write: bool, width: u8, value: u32) -> u64 {
    use crate::arch::cpu;
    // SAFETY: the caller holds an I/O-port capability covering these ports
    // (checked by decode); which device is behind them is its business —
    // the kernel's own devices (serial console, PIT, PIC) are driven with
    // interrupts disabled and tolerate interleaved accesses.
    unsafe {
        match (write, width) {
            (false, 1) => u64::from(cpu::inb(port)),
            (false, 2) => u64::from(cpu::inw(port)),
            (false, _) => u64::from(cpu::inl(port)),
            (true, 1) => {
                cpu::outb(port, value as u8);
                0
            }
            (true, 2) => {
                cpu::outw(port, value as u16);
                0
            }
            (true, _) => {
                cpu::outl(port, value);
                0
            }
        }
    }
}
