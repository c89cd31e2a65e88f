//! Interrupts for user-level drivers, and I/O ports.
//!
//! Each IOAPIC line (GSI) `g` has a slot in [`LINES`]: the notification it
//! signals and with which badge. An IRQ handler capability names a line by
//! number (root receives one per line at boot). `IrqBind` routes the line to
//! its default vector (`0x30 + g`, see `kcore::ioapic`) with the polarity
//! and trigger mode the MADT gives for it (an ISA IRQ's override, else the
//! PCI default) and unmasks it; when it fires, the kernel masks it,
//! acknowledges the local APIC and signals the notification; the driver
//! serves the device and calls `IrqAck`, which unmasks the line.
//! So a line never interrupts again before its driver has seen the last
//! interrupt, and an unbound line stays masked.

use abi::Error;
use spin::Mutex;

use crate::arch::ioapic;
use crate::syscall::{lookup, Outcome};
use crate::thread::{Thread, ThreadRef};
use crate::token::Kernel;
use abi::args::{self, Args};
use abi::{ObjectType, Rights, Sys};
use kcore::typed::IoPortsCap;

/// Lines supported.
pub const MAX_LINES: usize = abi::bootinfo::slot::IRQ_MAX as usize;

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

/// The polarity and trigger mode of `gsi`: an ISA IRQ's (with the MADT's
/// overrides) if one arrives there, else the PCI default.
fn line_config(gsi: u32) -> ioapic::Line {
    (0..16u8)
        .filter_map(|irq| ioapic::isa_irq_to_gsi(irq).ok())
        .find(|line| line.gsi == gsi)
        .unwrap_or_else(|| ioapic::Line::default_for(gsi))
}

pub fn bind(line: u64, notification: u64, badge: u64) -> Result<(), Error> {
    if line >= line_count() {
        return Err(Error::InvalidArgument);
    }
    let gsi = line as u32;
    let vector = ioapic::default_vector(gsi).ok_or(Error::InvalidArgument)?;
    ioapic::route(line_config(gsi), vector).map_err(|_| Error::InvalidArgument)?;
    LINES.lock()[line as usize] = Line {
        notification,
        badge,
    };
    ioapic::unmask(gsi).map_err(|_| Error::InvalidState)
}

pub fn ack(line: u64) -> Result<(), Error> {
    if line >= line_count() || LINES.lock()[line as usize].notification == 0 {
        return Err(Error::InvalidState);
    }
    ioapic::unmask(line as u32).map_err(|_| Error::InvalidState)
}

/// A notification is going away: lines bound to it are masked and unbound.
pub fn notification_destroyed(notification: u64) {
    let mut lines = LINES.lock();
    for (gsi, line) in lines.iter_mut().enumerate() {
        if line.notification == notification {
            let _ = ioapic::mask(gsi as u32);
            line.notification = 0;
        }
    }
}

/// Handles an interrupt on an IOAPIC vector (`ioapic::is_line_vector`):
/// a line bound to a notification is masked until `IrqAck` and the
/// notification is signalled; the IOAPIC driver counts it and ends it at
/// the local APIC.
pub fn on_interrupt(k: &mut Kernel, vector: u64) {
    let gsi = vector.wrapping_sub(u64::from(kcore::ioapic::VECTOR_FIRST));
    let bound = (gsi < MAX_LINES as u64)
        .then(|| LINES.lock()[gsi as usize])
        .filter(|line| line.notification != 0);
    trace!(record(
        0,
        formats::trace::Kind::Irq,
        [
            gsi,
            u64::from(bound.is_some()),
            crate::trace::current_id(&k.threads),
            0
        ]
    ));
    if bound.is_some() {
        let _ = ioapic::mask(gsi as u32);
    }
    ioapic::on_interrupt(vector);
    if let Some(line) = bound {
        trace!(in_interrupt(true));
        // SAFETY: a bound line's notification is live: deleting it
        // unbinds its lines (`notification_destroyed`).
        unsafe { crate::ipc::signal(k, line.notification, line.badge) };
        trace!(in_interrupt(false));
    }
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

// ---------------------------------------------------------------------------
// System calls: decode and perform; `syscall` dispatches here.
// ---------------------------------------------------------------------------

/// A checked call of `IrqBind`, `IrqAck`, `IoPort`, ready to perform.
#[derive(Debug)]
pub enum Call {
    IrqBind {
        line: u64,
        n: u64,
        badge: u64,
    },
    IrqAck {
        line: u64,
    },
    IoPort {
        port: u16,
        write: bool,
        width: u8,
        value: u32,
    },
}

/// Decodes `IrqBind`, `IrqAck`, `IoPort` (`sys`, with the argument registers
/// `regs`) of the caller `c` (borrowed from `k`): checks everything, changes
/// nothing.
#[inline(always)]
pub fn decode(k: &Kernel, c: &Thread, sys: Sys, regs: [u64; 6]) -> Result<Call, Error> {
    Ok(match sys {
        Sys::IrqBind => {
            let a = args::IrqBind::from_regs(regs);
            let (_, irq) = lookup(k, c, a.irq, ObjectType::IrqHandler, Rights::NONE)?;
            let (_, n) = lookup(
                k,
                c,
                a.notification,
                ObjectType::Notification,
                Rights::WRITE,
            )?;
            Call::IrqBind {
                line: irq.object,
                n: n.object,
                badge: n.badge,
            }
        }
        Sys::IrqAck => {
            let a = args::Slot::from_regs(regs);
            let (_, irq) = lookup(k, c, a.slot, ObjectType::IrqHandler, Rights::NONE)?;
            Call::IrqAck { line: irq.object }
        }
        Sys::IoPort => {
            let a = args::IoPort::from_regs(regs);
            let (_, ports) = lookup(k, c, a.ports, ObjectType::IoPorts, Rights::NONE)?;
            let write = match a.write {
                0 => false,
                1 => true,
                _ => return Err(Error::InvalidArgument),
            };
            let width = match a.width {
                1 | 2 | 4 => a.width,
                _ => return Err(Error::InvalidArgument),
            };
            let range = IoPortsCap::from_cap(&ports).ok_or(Error::InvalidArgument)?;
            if !range.covers(a.port, width) || a.value > u64::from(u32::MAX) {
                return Err(Error::InvalidArgument);
            }
            Call::IoPort {
                port: a.port as u16,
                write,
                width: width as u8,
                value: a.value as u32,
            }
        }
        _ => return Err(Error::UnknownSyscall),
    })
}

/// Performs a checked call of `IrqBind`, `IrqAck`, `IoPort`. Object addresses
/// in it are the objects of capabilities `decode` found in slots a moment ago:
/// live (`object.rs`, "Access").
pub fn perform(k: &mut Kernel, call: Call, caller: ThreadRef) -> Result<Outcome, Error> {
    match call {
        Call::IrqBind { line, n, badge } => {
            crate::irq::bind(line, n, badge)?;
            Ok(Outcome::Resume)
        }
        Call::IrqAck { line } => {
            crate::irq::ack(line)?;
            trace!(event(
                &k.threads,
                caller,
                formats::trace::Kind::IrqAck,
                [line, 0, 0, 0]
            ));
            Ok(Outcome::Resume)
        }
        Call::IoPort {
            port,
            write,
            width,
            value,
        } => {
            k.threads.get_mut(caller).frame().rdi = crate::irq::io_port(port, write, width, value);
            Ok(Outcome::Resume)
        }
    }
}
