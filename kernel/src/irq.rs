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
//!
//! Message signalled interrupts (MSI, MSI-X) of PCI devices arrive on
//! vectors the kernel owns, `kcore::ioapic::MSI_VECTOR_FIRST..END`. The
//! holder of the device control capability (the platform service) asks
//! for one with `MsiAlloc`, naming the CPU it should arrive at: the kernel
//! picks a free vector, makes an IRQ handler capability for it and answers
//! the address and data words the device must write; the platform service
//! programs them into the device (a driver never sees the MSI-X table, so
//! it cannot aim interrupts at vectors it does not own). Such a handler is
//! bound and acknowledged like a line: an MSI is an edge, nothing is masked
//! (the device's own mask bits are the platform service's business), so
//! `IrqAck` only checks that the handler is bound; interrupts that arrive
//! before the driver looked coalesce in the notification word. A vector is
//! never given back: the platform service allocates one per device
//! interrupt once and keeps it across driver restarts, so the 96 vectors
//! bound the devices, not the restarts.

use abi::Error;
use spin::Mutex;

use crate::arch::ioapic;
use crate::syscall::{lookup, Outcome};
use crate::thread::{Thread, ThreadRef};
use crate::token::Kernel;
use abi::args::{self, Args};
use abi::{ObjectType, Rights, Sys};
use kcore::cap::{Capability, SlotId};
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

/// The object word of an MSI handler capability: `MSI_OBJECT + index`, the
/// index of its vector from `MSI_VECTOR_FIRST` (line handlers are below).
const MSI_OBJECT: u64 = 1 << 16;
const MSI_VECTORS: usize =
    (kcore::ioapic::MSI_VECTOR_END - kcore::ioapic::MSI_VECTOR_FIRST) as usize;

/// The MSI vectors: allocated or not, where each is bound, and the CPU
/// and time (TSC) its last interrupt arrived at (`IrqAck` tells the
/// driver: the proof that steering works, and the start of the interrupt
/// latency the lab measures).
struct MsiVectors {
    allocated: usize,
    lines: [Line; MSI_VECTORS],
    last_cpu: [u32; MSI_VECTORS],
    last_tsc: [u64; MSI_VECTORS],
}

static MSI: Mutex<MsiVectors> = Mutex::new(MsiVectors {
    allocated: 0,
    lines: [Line {
        notification: 0,
        badge: 0,
    }; MSI_VECTORS],
    last_cpu: [0; MSI_VECTORS],
    last_tsc: [0; MSI_VECTORS],
});

/// The PCI configuration window (ECAM) of segment 0 from the ACPI MCFG,
/// as `PhysAddress` answers it for the device control capability: its
/// physical base (bus 0's registers) and log2 of the bytes of the buses it
/// covers, rounded up to a power of two. `None` without an MCFG.
static PCI_WINDOW: Mutex<Option<(u64, u32)>> = Mutex::new(None);

/// Records the MCFG's segment-0 window (boot, before user space).
pub fn set_pci_window(regions: &[kcore::acpi::EcamRegion]) {
    let window = regions
        .iter()
        .find(|r| r.segment == 0 && r.bus_start == 0)
        .map(|r| {
            let buses = u64::from(r.bus_end) + 1;
            (r.base, 20 + buses.next_power_of_two().trailing_zeros())
        });
    *PCI_WINDOW.lock() = window;
}

/// Whether `vector` is an MSI vector (handled by [`on_interrupt`] too).
pub fn is_msi_vector(vector: u64) -> bool {
    kcore::ioapic::is_msi_vector(vector)
}

/// Allocates the next MSI vector, aimed at CPU `cpu` (online, checked by
/// decode): its handler object word and the MSI address and data.
fn msi_alloc(apic_id: u32) -> Result<(u64, u64, u32), Error> {
    let mut msi = MSI.lock();
    if msi.allocated >= MSI_VECTORS {
        return Err(Error::OutOfMemory);
    }
    let index = msi.allocated;
    let vector = kcore::ioapic::MSI_VECTOR_FIRST + index as u8;
    let (address, data) =
        kcore::ioapic::msi_message(apic_id, vector).ok_or(Error::InvalidArgument)?;
    msi.allocated += 1;
    Ok((MSI_OBJECT + index as u64, address, data))
}

/// The MSI vector index of handler object `object`, if it is an MSI one.
fn msi_index(object: u64) -> Option<usize> {
    let index = object.checked_sub(MSI_OBJECT)?;
    (index < MSI_VECTORS as u64).then_some(index as usize)
}

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
    if let Some(index) = msi_index(line) {
        MSI.lock().lines[index] = Line {
            notification,
            badge,
        };
        return Ok(());
    }
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

/// Acknowledges `line`; for an MSI handler the result is the CPU index
/// its last interrupt arrived at and the TSC then (0, 0 for a line).
pub fn ack(line: u64) -> Result<(u64, u64), Error> {
    if let Some(index) = msi_index(line) {
        let msi = MSI.lock();
        return match msi.lines[index].notification {
            0 => Err(Error::InvalidState),
            _ => Ok((u64::from(msi.last_cpu[index]), msi.last_tsc[index])),
        };
    }
    if line >= line_count() || LINES.lock()[line as usize].notification == 0 {
        return Err(Error::InvalidState);
    }
    ioapic::unmask(line as u32).map_err(|_| Error::InvalidState)?;
    Ok((0, 0))
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
    drop(lines);
    for line in MSI.lock().lines.iter_mut() {
        if line.notification == notification {
            line.notification = 0;
        }
    }
}

/// Handles an interrupt on an IOAPIC vector (`ioapic::is_line_vector`):
/// a line bound to a notification is masked until `IrqAck` and the
/// notification is signalled; the IOAPIC driver counts it and ends it at
/// the local APIC.
pub fn on_interrupt(k: &mut Kernel, vector: u64) {
    if is_msi_vector(vector) {
        let index = (vector - u64::from(kcore::ioapic::MSI_VECTOR_FIRST)) as usize;
        let arrived = crate::arch::cpu::rdtsc();
        let line = {
            let mut msi = MSI.lock();
            msi.last_cpu[index] = crate::arch::percpu::this_cpu_index();
            msi.last_tsc[index] = arrived;
            msi.lines[index]
        };
        // In the trace an MSI is told from a line by its vector (0x80..).
        trace!(record(
            0,
            formats::trace::Kind::Irq,
            [
                vector,
                u64::from(line.notification != 0),
                crate::trace::current_id(&k.threads),
                0
            ]
        ));
        crate::arch::lapic::end_of_interrupt();
        if line.notification != 0 {
            trace!(in_interrupt(true));
            // SAFETY: a bound vector's notification is live: deleting it
            // unbinds it (`notification_destroyed`).
            unsafe { crate::ipc::signal(k, line.notification, line.badge) };
            trace!(in_interrupt(false));
        }
        return;
    }
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

/// A checked call of `IrqBind`, `IrqAck`, `IoPort`, `MsiAlloc`,
/// `PhysAddress`, ready to perform.
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
    MsiAlloc {
        control: SlotId,
        slot: SlotId,
        apic_id: u32,
    },
    PhysAddress {
        phys: u64,
        size_bits: u32,
        device: bool,
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
        Sys::MsiAlloc => {
            let a = args::MsiAlloc::from_regs(regs);
            let (control, _) = lookup(k, c, a.control, ObjectType::DeviceControl, Rights::WRITE)?;
            let slot = crate::syscall::empty_slot(k, c, a.slot)?;
            kcore::cap::check_insert_child(k, control, slot)?;
            if MSI.lock().allocated >= MSI_VECTORS {
                return Err(Error::OutOfMemory);
            }
            let cpu = u32::try_from(a.cpu).map_err(|_| Error::InvalidArgument)?;
            let apic_id = crate::smp::apic_id(cpu).ok_or(Error::InvalidArgument)?;
            if apic_id > 0xff {
                return Err(Error::InvalidArgument);
            }
            Call::MsiAlloc {
                control,
                slot,
                apic_id,
            }
        }
        Sys::PhysAddress => {
            let a = args::PhysAddress::from_regs(regs);
            lookup(k, c, a.control, ObjectType::DeviceControl, Rights::READ)?;
            let (_, cap) = crate::syscall::full_slot(k, c, a.cap)?;
            if cap.kind == ObjectType::DeviceControl {
                // The control capability stands for the PCI host bridge:
                // its "address" is the configuration window.
                let (phys, size_bits) = (*PCI_WINDOW.lock()).ok_or(Error::InvalidState)?;
                Call::PhysAddress {
                    phys,
                    size_bits,
                    device: true,
                }
            } else if let Some(u) = kcore::typed::UntypedCap::from_cap(&cap) {
                Call::PhysAddress {
                    phys: u.phys,
                    size_bits: u.size_bits,
                    device: u.device,
                }
            } else if let Some(f) = kcore::typed::FrameCap::from_cap(&cap) {
                let size_bits = match f.kind() {
                    ObjectType::Frame2M => 21,
                    _ => 12,
                };
                Call::PhysAddress {
                    phys: f.phys,
                    size_bits,
                    device: false,
                }
            } else {
                return Err(Error::WrongObjectType);
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
            let (cpu, tsc) = crate::irq::ack(line)?;
            trace!(event(
                &k.threads,
                caller,
                formats::trace::Kind::IrqAck,
                [line, 0, 0, 0]
            ));
            let frame = k.threads.get_mut(caller).frame();
            frame.rdi = cpu;
            frame.rsi = tsc;
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
        Call::MsiAlloc {
            control,
            slot,
            apic_id,
        } => {
            let (object, address, data) = msi_alloc(apic_id)?;
            let cap = Capability::new(ObjectType::IrqHandler, object, Rights::ALL);
            // Cannot fail: decode checked the insertion, nothing changed since.
            kcore::cap::insert_child(k, control, slot, cap)?;
            let frame = k.threads.get_mut(caller).frame();
            frame.rdi = address;
            frame.rsi = u64::from(data);
            Ok(Outcome::Resume)
        }
        Call::PhysAddress {
            phys,
            size_bits,
            device,
        } => {
            let frame = k.threads.get_mut(caller).frame();
            frame.rdi = phys;
            frame.rsi = u64::from(size_bits);
            frame.rdx = u64::from(device);
            Ok(Outcome::Resume)
        }
    }
}
