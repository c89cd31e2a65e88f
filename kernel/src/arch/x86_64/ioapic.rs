//! I/O APIC driver: routes global system interrupts (GSIs) — device
//! interrupt lines — to vectors on the boot CPU, masks and unmasks them, and
//! counts what arrives. IRQ capabilities are built on this API; the register
//! layout, the ISA IRQ → GSI resolution and the vector bookkeeping are
//! `kcore::ioapic` (host-tested), this module only touches the chips.
//!
//! Invariants:
//! - From [`init`] on, every line is masked until it is [`route`]d and
//!   [`unmask`]ed; a line can only be unmasked while it owns a vector (so an
//!   interrupt always names its GSI), and a vector belongs to at most one GSI.
//! - Vectors are `kcore::ioapic::VECTOR_FIRST..VECTOR_END` (0x30..0x80); the
//!   trap path hands every vector in that window to [`on_interrupt`].
//! - The registers are reached only through [`STATE`]'s lock, taken with
//!   interrupts disabled: `IOREGSEL`/`IOWIN` is a select-then-access pair
//!   that must not interleave, not even with [`on_interrupt`] on this CPU.
//! - A redirection entry is written so that it is never live while half
//!   written: masking writes the low half (mask bit) first, unmasking writes
//!   the high half (destination) first and the low half last.
//! - A level-triggered line is masked when it fires (before the EOI, so it
//!   cannot storm); its owner unmasks it once the device is quiet.
//!
//! An edge that arrives while its line is masked is lost (82093AA data
//! sheet; QEMU does the same), so a driver unmasks its line before it lets
//! the device interrupt. A level that is still asserted when a level line
//! is unmasked is delivered again.

use core::fmt;

use kcore::acpi::{InterruptOverride, MadtInfo, MAX_OVERRIDES};
pub use kcore::ioapic::{default_vector, is_line_vector, Line, Polarity, Trigger};
use kcore::ioapic::{
    redirection_registers, resolve_isa_irq, Controller, EntryError, GsiError, IsaError, Layout,
    LayoutError, Redirection, VectorError, VectorMap, Version, IOREGSEL, IOWIN, MAX_IOAPICS,
    MMIO_LEN, REG_VERSION, VECTOR_END, VECTOR_FIRST,
};
use spin::Mutex;

use super::{cpu, lapic, trap};
use crate::{kprintln, mm};

// The window must not overlap the LAPIC timer or the remapped PIC.
const _: () =
    assert!(VECTOR_FIRST as u64 > trap::VECTOR_TIMER && VECTOR_END as u64 <= trap::VECTOR_PIC_BASE);

#[derive(Debug)]
pub enum IoApicError {
    NotInitialised,
    AlreadyInitialised,
    /// ACPI found no MADT.
    NoMadt,
    /// The MADT lists no I/O APIC.
    NoIoApic,
    /// The local APIC is not set up, so the destination is unknown.
    NoLocalApic,
    /// The boot CPU's APIC id does not fit the 8-bit physical destination.
    DestinationTooLarge(u32),
    Map {
        address: u64,
        error: mm::MapMmioError,
    },
    /// Nothing answers at the I/O APIC address the MADT gave.
    NoDevice {
        address: u64,
    },
    Layout(LayoutError),
    Gsi(GsiError),
    Isa(IsaError),
    Vector(VectorError),
    /// The line has no vector yet (see [`route`]).
    NotRouted(u32),
    /// A redirection entry read back in a form this driver never writes.
    Entry {
        gsi: u32,
        error: EntryError,
    },
}

impl fmt::Display for IoApicError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::NotInitialised => write!(f, "I/O APICs not initialised"),
            Self::AlreadyInitialised => write!(f, "I/O APICs already initialised"),
            Self::NoMadt => write!(f, "no ACPI MADT"),
            Self::NoIoApic => write!(f, "the MADT lists no I/O APIC"),
            Self::NoLocalApic => write!(f, "the local APIC is not initialised"),
            Self::DestinationTooLarge(id) => {
                write!(f, "APIC id {id} is not an 8-bit physical destination")
            }
            Self::Map { address, error } => write!(f, "cannot map {address:#x}: {error}"),
            Self::NoDevice { address } => write!(f, "no I/O APIC answers at {address:#x}"),
            Self::Layout(e) => write!(f, "bad I/O APIC layout: {e:?}"),
            Self::Gsi(GsiError::NoController(gsi)) => write!(f, "no I/O APIC serves GSI {gsi}"),
            Self::Isa(e) => write!(f, "ISA IRQ: {e:?}"),
            Self::Vector(e) => write!(f, "vector: {e:?}"),
            Self::NotRouted(gsi) => write!(f, "GSI {gsi} has no vector"),
            Self::Entry { gsi, error } => write!(f, "GSI {gsi}: unexpected entry {error:?}"),
        }
    }
}

impl From<GsiError> for IoApicError {
    fn from(e: GsiError) -> Self {
        Self::Gsi(e)
    }
}

impl From<VectorError> for IoApicError {
    fn from(e: VectorError) -> Self {
        Self::Vector(e)
    }
}

/// One chip's register window (virtual address of its MMIO page offset).
#[derive(Clone, Copy)]
struct Chip {
    base: u64,
}

impl Chip {
    fn read(&self, reg: u8) -> u32 {
        // SAFETY: `base` maps the chip's IOREGSEL/IOWIN uncached (init maps
        // MMIO_LEN bytes there); the caller holds STATE's lock with
        // interrupts off, or owns the chip before STATE is published.
        unsafe {
            core::ptr::write_volatile((self.base as usize + IOREGSEL) as *mut u32, reg.into());
            core::ptr::read_volatile((self.base as usize + IOWIN) as *const u32)
        }
    }

    fn write(&self, reg: u8, value: u32) {
        // SAFETY: as in `read`.
        unsafe {
            core::ptr::write_volatile((self.base as usize + IOREGSEL) as *mut u32, reg.into());
            core::ptr::write_volatile((self.base as usize + IOWIN) as *mut u32, value);
        }
    }

    /// `pin` < the chip's line count (from its `Layout` entry).
    fn read_entry(&self, pin: u32) -> Option<u64> {
        let (low, high) = redirection_registers(pin)?;
        Some(u64::from(self.read(low)) | u64::from(self.read(high)) << 32)
    }

    fn write_entry(&self, pin: u32, entry: Redirection) {
        let Some((low, high)) = redirection_registers(pin) else {
            return;
        };
        let (low_value, high_value) = entry.halves();
        if entry.masked {
            self.write(low, low_value);
            self.write(high, high_value);
        } else {
            self.write(high, high_value);
            self.write(low, low_value);
        }
    }
}

const COUNTS: usize = 256;

struct State {
    layout: Layout,
    /// `chips[i]` drives `layout.controllers()[i]`.
    chips: [Chip; MAX_IOAPICS],
    overrides: [InterruptOverride; MAX_OVERRIDES],
    override_count: usize,
    /// Local APIC id of the CPU that receives every line (the boot CPU).
    destination: u8,
    vectors: VectorMap,
    /// Interrupts per vector since it was last routed.
    counts: [u64; COUNTS],
}

impl State {
    fn chip_and_pin(&self, gsi: u32) -> Result<(Chip, u32), IoApicError> {
        let (index, pin) = self.layout.locate(gsi)?;
        Ok((self.chips[index], pin))
    }

    fn entry(&self, gsi: u32) -> Result<(Chip, u32, Redirection), IoApicError> {
        let (chip, pin) = self.chip_and_pin(gsi)?;
        let raw = chip.read_entry(pin).ok_or(GsiError::NoController(gsi))?;
        let entry = Redirection::decode(raw).map_err(|error| IoApicError::Entry { gsi, error })?;
        Ok((chip, pin, entry))
    }

    fn set_masked(&mut self, gsi: u32, masked: bool) -> Result<(), IoApicError> {
        if !masked && self.vectors.vector(gsi).is_none() {
            return Err(IoApicError::NotRouted(gsi));
        }
        let (chip, pin, mut entry) = self.entry(gsi)?;
        entry.masked = masked;
        chip.write_entry(pin, entry);
        Ok(())
    }
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// Runs `f` with interrupts disabled (restoring the previous state), so that
/// [`on_interrupt`] cannot spin on a lock its own CPU holds.
fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    let were_enabled = cpu::interrupts_enabled();
    cpu::disable_interrupts();
    let result = f();
    if were_enabled {
        cpu::enable_interrupts();
    }
    result
}

/// Runs `f` on the state under its lock, with interrupts disabled.
fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> Result<R, IoApicError> {
    without_interrupts(|| {
        STATE
            .lock()
            .as_mut()
            .map(f)
            .ok_or(IoApicError::NotInitialised)
    })
}

/// Maps every I/O APIC the MADT lists, reads its line count and masks all
/// its lines; interrupts go to this CPU (its local APIC must be set up).
/// Returns what it found, for the boot log.
pub fn init(madt: Option<&MadtInfo>) -> Result<Summary, IoApicError> {
    if without_interrupts(|| STATE.lock().is_some()) {
        return Err(IoApicError::AlreadyInitialised);
    }
    let madt = madt.ok_or(IoApicError::NoMadt)?;
    if madt.ioapics().is_empty() {
        return Err(IoApicError::NoIoApic);
    }
    let apic_id = lapic::id().ok_or(IoApicError::NoLocalApic)?;
    let destination =
        u8::try_from(apic_id).map_err(|_| IoApicError::DestinationTooLarge(apic_id))?;

    let mut layout = Layout::new();
    let mut chips = [Chip { base: 0 }; MAX_IOAPICS];
    for io in madt.ioapics() {
        let address = u64::from(io.address);
        kcore::ioapic::check_address(address).map_err(IoApicError::Layout)?;
        let base =
            mm::map_mmio(address, MMIO_LEN).map_err(|error| IoApicError::Map { address, error })?;
        let chip = Chip { base };
        let version = Version::decode(chip.read(REG_VERSION))
            .map_err(|_| IoApicError::NoDevice { address })?;
        let index = layout.controllers().len();
        layout
            .add(Controller {
                id: io.id,
                address,
                gsi_base: io.gsi_base,
                lines: version.lines,
            })
            .map_err(IoApicError::Layout)?;
        // Masked at once, so even a failure with a later chip leaves none of
        // the lines reached so far as the firmware left them.
        for pin in 0..version.lines {
            chip.write_entry(pin, Redirection::masked(destination));
        }
        // `add` succeeded, so index < MAX_IOAPICS.
        chips[index] = chip;
    }

    let mut overrides = [InterruptOverride::default(); MAX_OVERRIDES];
    let override_count = madt.overrides().len().min(MAX_OVERRIDES);
    overrides[..override_count].copy_from_slice(&madt.overrides()[..override_count]);
    let summary = Summary {
        layout: layout.clone(),
        destination,
    };
    without_interrupts(|| {
        let mut state = STATE.lock();
        if state.is_some() {
            return Err(IoApicError::AlreadyInitialised);
        }
        *state = Some(State {
            layout,
            chips,
            overrides,
            override_count,
            destination,
            vectors: VectorMap::new(),
            counts: [0; COUNTS],
        });
        Ok(summary)
    })
}

/// Number of GSIs the I/O APICs serve together (0 before [`init`]).
pub fn line_count() -> u32 {
    with_state(|s| s.layout.line_count()).unwrap_or(0)
}

/// Where ISA IRQ `irq` arrives: its GSI, polarity and trigger mode, from
/// the MADT's interrupt source overrides or the ISA defaults.
pub fn isa_irq_to_gsi(irq: u8) -> Result<Line, IoApicError> {
    with_state(|s| {
        resolve_isa_irq(irq, &s.overrides[..s.override_count]).map_err(IoApicError::Isa)
    })?
}

/// Programs `line` to deliver `vector` (in the I/O APIC window, not owned
/// by another GSI) to the boot CPU. The line is left masked: call
/// [`unmask`] when its handler is ready. Re-routing a GSI frees its old
/// vector. Nothing changes on error.
pub fn route(line: Line, vector: u8) -> Result<(), IoApicError> {
    with_state(|s| {
        let (chip, pin) = s.chip_and_pin(line.gsi)?;
        s.vectors.assign(line.gsi, vector)?;
        s.counts[usize::from(vector)] = 0;
        chip.write_entry(
            pin,
            Redirection {
                vector,
                polarity: line.polarity,
                trigger: line.trigger,
                masked: true,
                destination: s.destination,
            },
        );
        Ok(())
    })?
}

/// Stops `gsi` from delivering interrupts.
pub fn mask(gsi: u32) -> Result<(), IoApicError> {
    with_state(|s| s.set_masked(gsi, true))?
}

/// Lets a [`route`]d `gsi` deliver interrupts.
pub fn unmask(gsi: u32) -> Result<(), IoApicError> {
    with_state(|s| s.set_masked(gsi, false))?
}

/// Interrupts that arrived for `gsi` since it was last routed (0 for a
/// line without a vector).
pub fn interrupt_count(gsi: u32) -> u64 {
    with_state(|s| {
        s.vectors
            .vector(gsi)
            .map_or(0, |v| s.counts[usize::from(v)])
    })
    .unwrap_or(0)
}

/// The trap path's handler for every vector with [`is_line_vector`], called
/// with interrupts disabled: counts the interrupt, masks the line if it is
/// level-triggered, and ends the interrupt at the local APIC.
pub fn on_interrupt(vector: u64) {
    let owned = u8::try_from(vector).ok().and_then(|v| {
        with_state(|s| {
            let gsi = s.vectors.gsi(v)?;
            s.counts[usize::from(v)] += 1;
            if let Ok((chip, pin, mut entry)) = s.entry(gsi) {
                if entry.trigger == Trigger::Level {
                    entry.masked = true;
                    chip.write_entry(pin, entry);
                }
            }
            Some(gsi)
        })
        .ok()
        .flatten()
    });
    if owned.is_none() {
        kprintln!("warning: interrupt on vector {vector:#x}, which no I/O APIC line owns");
    }
    lapic::end_of_interrupt();
}

/// What [`init`] found, for the boot log: `24 lines at 0xfec00000 (GSIs
/// 0..24), to APIC id 0`.
pub struct Summary {
    layout: Layout,
    destination: u8,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} lines at ", self.layout.line_count())?;
        for (i, c) in self.layout.controllers().iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{:#x} (GSIs {}..{})", c.address, c.gsi_base, c.gsi_end())?;
        }
        write!(f, ", to APIC id {}", self.destination)
    }
}
