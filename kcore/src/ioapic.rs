//! The I/O APIC as data: register indices, the 64-bit redirection entry,
//! which I/O APIC and pin serve a global system interrupt (GSI), how an ISA
//! IRQ reaches its GSI, and which interrupt vector belongs to which GSI.
//! The kernel's `arch::x86_64::ioapic` does the register accesses; every
//! decision it makes is one of the functions here, so it is host-tested.
//!
//! # Programming model
//!
//! Each I/O APIC has two 32-bit MMIO registers: `IOREGSEL` (offset 0x00)
//! selects an internal register by index, `IOWIN` (offset 0x10) reads or
//! writes it. Internal registers: `ID` (0x00), `VER` (0x01, bits 16..23 hold
//! the index of the last redirection entry, i.e. lines − 1) and, per input
//! pin `n`, the redirection entry's low half at `0x10 + 2n` and high half at
//! `0x11 + 2n`. Pin `n` of an I/O APIC whose MADT entry says `gsi_base = b`
//! is GSI `b + n`.
//!
//! # ISA IRQs
//!
//! ISA IRQ `i` is GSI `i`, edge-triggered and active high, unless a MADT
//! interrupt source override names it: then the override's GSI and flags
//! apply (polarity bits 0..1 and trigger bits 2..3: `00` = the bus default,
//! `01` = high / edge, `11` = low / level, `10` is reserved). Lines at
//! GSI ≥ 16 are PCI-style interrupt lines: level-triggered, active low.
//!
//! # Vectors
//!
//! I/O APIC lines are delivered on vectors [`VECTOR_FIRST`]`..`[`VECTOR_END`]
//! (0x30..0x80): below are the exceptions (0..0x1f) and the local APIC's own
//! vectors (0x20..0x2f: the timer, later IPIs); above them the message
//! signalled interrupts of PCI devices, [`MSI_VECTOR_FIRST`]`..`
//! [`MSI_VECTOR_END`] (0x80..0xe0), then the remapped legacy PIC
//! (0xe0..0xef), the kernel's IPIs (0xf0, 0xf1) and the spurious vector
//! (0xff). [`VectorMap`] records which GSI owns which vector, so the
//! interrupt path can name the line that fired; [`default_vector`]
//! (`0x30 + gsi`) is the collision-free choice for the first 80 GSIs
//! (root gets handlers for 48).

use crate::acpi::InterruptOverride;

/// Byte offset of the index register in an I/O APIC's MMIO page.
pub const IOREGSEL: usize = 0x00;
/// Byte offset of the data window in an I/O APIC's MMIO page.
pub const IOWIN: usize = 0x10;
/// Bytes of MMIO an I/O APIC decodes that the kernel uses.
pub const MMIO_LEN: u64 = 0x20;

/// Internal register indices (written to `IOREGSEL`).
pub const REG_ID: u8 = 0x00;
pub const REG_VERSION: u8 = 0x01;
const REG_REDIRECTION_BASE: u8 = 0x10;

/// Most lines one I/O APIC can have that the 8-bit register index still
/// reaches: redirection entries start at 0x10 and take two registers each.
pub const MAX_LINES_PER_IOAPIC: u32 = (256 - REG_REDIRECTION_BASE as u32) / 2;

/// Most I/O APICs the kernel drives (as many as `kcore::acpi` records).
pub const MAX_IOAPICS: usize = crate::acpi::MAX_IOAPICS;

/// ISA IRQs are 0..16.
pub const ISA_IRQS: u8 = 16;

/// First vector used for I/O APIC lines.
pub const VECTOR_FIRST: u8 = 0x30;
/// One past the last vector used for I/O APIC lines.
pub const VECTOR_END: u8 = 0x80;
/// First vector handed out for message signalled interrupts (MSI, MSI-X).
pub const MSI_VECTOR_FIRST: u8 = 0x80;
/// One past the last MSI vector.
pub const MSI_VECTOR_END: u8 = 0xe0;

/// Whether `vector` is an MSI vector.
pub fn is_msi_vector(vector: u64) -> bool {
    (u64::from(MSI_VECTOR_FIRST)..u64::from(MSI_VECTOR_END)).contains(&vector)
}

/// The address and data words of an MSI aimed at the local APIC with id
/// `apic_id` on `vector` (fixed delivery, edge, physical destination):
/// what a device's MSI capability or MSI-X table entry holds. `None` for
/// an APIC id beyond the 8 bits of the xAPIC's destination field.
pub fn msi_message(apic_id: u32, vector: u8) -> Option<(u64, u32)> {
    (apic_id <= 0xff).then(|| (0xfee0_0000 | u64::from(apic_id) << 12, u32::from(vector)))
}
const VECTOR_COUNT: usize = (VECTOR_END - VECTOR_FIRST) as usize;

/// The index registers (low half, high half) of pin `pin`'s redirection
/// entry, or `None` for a pin no I/O APIC can have.
pub fn redirection_registers(pin: u32) -> Option<(u8, u8)> {
    if pin >= MAX_LINES_PER_IOAPIC {
        return None;
    }
    let low = REG_REDIRECTION_BASE + 2 * pin as u8;
    Some((low, low + 1))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionError {
    /// The register read as all ones: nothing answers at that address.
    NoDevice,
}

/// The decoded `VER` register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub version: u8,
    /// Number of redirection entries (input pins), capped at
    /// [`MAX_LINES_PER_IOAPIC`].
    pub lines: u32,
}

impl Version {
    pub fn decode(raw: u32) -> Result<Self, VersionError> {
        if raw == u32::MAX {
            return Err(VersionError::NoDevice);
        }
        let max_entry = (raw >> 16) & 0xff;
        Ok(Version {
            version: raw as u8,
            lines: (max_entry + 1).min(MAX_LINES_PER_IOAPIC),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polarity {
    ActiveHigh,
    ActiveLow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Edge,
    Level,
}

const ENTRY_VECTOR: u64 = 0xff;
const ENTRY_DELIVERY_MODE: u64 = 0b111 << 8;
const ENTRY_LOGICAL_DESTINATION: u64 = 1 << 11;
const ENTRY_ACTIVE_LOW: u64 = 1 << 13;
const ENTRY_LEVEL: u64 = 1 << 15;
const ENTRY_MASKED: u64 = 1 << 16;
const ENTRY_DESTINATION_SHIFT: u32 = 56;

/// A redirection entry as the kernel programs it: fixed delivery to one CPU
/// named by its (physical) local APIC id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Redirection {
    pub vector: u8,
    pub polarity: Polarity,
    pub trigger: Trigger,
    pub masked: bool,
    /// Local APIC id of the CPU that receives the interrupt.
    pub destination: u8,
}

/// Why a raw redirection entry is not one the kernel would have written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryError {
    /// Delivery mode other than fixed (000): lowest priority, SMI, NMI,
    /// INIT or ExtINT, with its 3-bit code.
    DeliveryMode(u8),
    /// Logical instead of physical destination mode.
    LogicalDestination,
}

impl Redirection {
    /// A masked entry that would deliver nothing anywhere: what every line
    /// holds until it is routed.
    pub const fn masked(destination: u8) -> Self {
        Redirection {
            vector: 0,
            polarity: Polarity::ActiveHigh,
            trigger: Trigger::Edge,
            masked: true,
            destination,
        }
    }

    pub fn encode(&self) -> u64 {
        let mut raw =
            u64::from(self.vector) | u64::from(self.destination) << ENTRY_DESTINATION_SHIFT;
        if self.polarity == Polarity::ActiveLow {
            raw |= ENTRY_ACTIVE_LOW;
        }
        if self.trigger == Trigger::Level {
            raw |= ENTRY_LEVEL;
        }
        if self.masked {
            raw |= ENTRY_MASKED;
        }
        raw
    }

    /// Decodes an entry read from the chip. The read-only bits (delivery
    /// status, remote IRR) and the reserved ones are ignored.
    pub fn decode(raw: u64) -> Result<Self, EntryError> {
        let delivery_mode = ((raw & ENTRY_DELIVERY_MODE) >> 8) as u8;
        if delivery_mode != 0 {
            return Err(EntryError::DeliveryMode(delivery_mode));
        }
        if raw & ENTRY_LOGICAL_DESTINATION != 0 {
            return Err(EntryError::LogicalDestination);
        }
        Ok(Redirection {
            vector: (raw & ENTRY_VECTOR) as u8,
            polarity: if raw & ENTRY_ACTIVE_LOW != 0 {
                Polarity::ActiveLow
            } else {
                Polarity::ActiveHigh
            },
            trigger: if raw & ENTRY_LEVEL != 0 {
                Trigger::Level
            } else {
                Trigger::Edge
            },
            masked: raw & ENTRY_MASKED != 0,
            destination: (raw >> ENTRY_DESTINATION_SHIFT) as u8,
        })
    }

    /// The two 32-bit register values, (low, high).
    pub fn halves(&self) -> (u32, u32) {
        let raw = self.encode();
        (raw as u32, (raw >> 32) as u32)
    }
}

/// A global system interrupt with its electrical signalling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line {
    pub gsi: u32,
    pub polarity: Polarity,
    pub trigger: Trigger,
}

impl Line {
    /// The signalling a GSI has when nothing overrides it: ISA-style (edge,
    /// active high) below 16, PCI-style (level, active low) from 16 on.
    pub fn default_for(gsi: u32) -> Self {
        if gsi < u32::from(ISA_IRQS) {
            Line {
                gsi,
                polarity: Polarity::ActiveHigh,
                trigger: Trigger::Edge,
            }
        } else {
            Line {
                gsi,
                polarity: Polarity::ActiveLow,
                trigger: Trigger::Level,
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsaError {
    /// Not an ISA IRQ (≥ 16).
    NotIsa(u8),
    /// The override for this IRQ uses the reserved encoding `10` for its
    /// polarity or trigger mode.
    ReservedFlags { irq: u8, flags: u16 },
    /// The IRQ has no override, so it would be GSI = IRQ, but an override
    /// already gives that GSI to another ISA IRQ (e.g. IRQ 2, the PIC
    /// cascade, when IRQ 0 is overridden to GSI 2).
    GsiTaken { irq: u8, gsi: u32, by_irq: u8 },
}

/// Polarity and trigger mode of an override's flags (ISA bus defaults for
/// `00`).
pub fn override_signalling(flags: u16) -> Option<(Polarity, Trigger)> {
    let polarity = match flags & 0b11 {
        0b00 | 0b01 => Polarity::ActiveHigh,
        0b11 => Polarity::ActiveLow,
        _ => return None,
    };
    let trigger = match (flags >> 2) & 0b11 {
        0b00 | 0b01 => Trigger::Edge,
        0b11 => Trigger::Level,
        _ => return None,
    };
    Some((polarity, trigger))
}

/// Where ISA IRQ `irq` arrives, given the MADT's interrupt source overrides.
/// When several overrides name the same IRQ, the first one counts; overrides
/// whose source is not an ISA IRQ (≥ 16, malformed) are ignored.
pub fn resolve_isa_irq(irq: u8, overrides: &[InterruptOverride]) -> Result<Line, IsaError> {
    if irq >= ISA_IRQS {
        return Err(IsaError::NotIsa(irq));
    }
    if let Some(o) = overrides.iter().find(|o| o.isa_irq == irq) {
        let (polarity, trigger) = override_signalling(o.flags).ok_or(IsaError::ReservedFlags {
            irq,
            flags: o.flags,
        })?;
        return Ok(Line {
            gsi: o.gsi,
            polarity,
            trigger,
        });
    }
    let gsi = u32::from(irq);
    if let Some(o) = overrides
        .iter()
        .find(|o| o.gsi == gsi && o.isa_irq < ISA_IRQS)
    {
        return Err(IsaError::GsiTaken {
            irq,
            gsi,
            by_irq: o.isa_irq,
        });
    }
    Ok(Line::default_for(gsi))
}

/// One I/O APIC: where it is and which GSIs it serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Controller {
    pub id: u8,
    pub address: u64,
    pub gsi_base: u32,
    pub lines: u32,
}

impl Controller {
    /// One past its last GSI (no overflow: [`Layout::add`] checked it).
    pub fn gsi_end(&self) -> u32 {
        self.gsi_base + self.lines
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// More than [`MAX_IOAPICS`].
    TooMany,
    /// Address 0 or not 16-byte aligned (the registers must be reachable).
    BadAddress(u64),
    /// `gsi_base + lines` does not fit in 32 bits.
    GsiOverflow { gsi_base: u32, lines: u32 },
    /// Two I/O APICs claim this GSI.
    Overlap { gsi: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsiError {
    /// No I/O APIC serves this GSI.
    NoController(u32),
}

/// Whether an I/O APIC can sit at `address` (before mapping it): not 0, and
/// 16-byte aligned so that both registers lie in the window.
pub fn check_address(address: u64) -> Result<(), LayoutError> {
    if address == 0 || !address.is_multiple_of(16) {
        return Err(LayoutError::BadAddress(address));
    }
    Ok(())
}

/// All I/O APICs of the machine, with disjoint GSI ranges.
#[derive(Clone, Debug)]
pub struct Layout {
    controllers: [Controller; MAX_IOAPICS],
    count: usize,
}

impl Default for Layout {
    fn default() -> Self {
        Self::new()
    }
}

impl Layout {
    pub const fn new() -> Self {
        Layout {
            controllers: [Controller {
                id: 0,
                address: 0,
                gsi_base: 0,
                lines: 0,
            }; MAX_IOAPICS],
            count: 0,
        }
    }

    pub fn controllers(&self) -> &[Controller] {
        &self.controllers[..self.count]
    }

    /// Adds an I/O APIC; refuses one whose GSIs overlap another's.
    pub fn add(&mut self, c: Controller) -> Result<(), LayoutError> {
        check_address(c.address)?;
        let end = c
            .gsi_base
            .checked_add(c.lines)
            .ok_or(LayoutError::GsiOverflow {
                gsi_base: c.gsi_base,
                lines: c.lines,
            })?;
        if let Some(other) = self
            .controllers()
            .iter()
            .find(|o| c.gsi_base < o.gsi_end() && o.gsi_base < end)
        {
            return Err(LayoutError::Overlap {
                gsi: c.gsi_base.max(other.gsi_base),
            });
        }
        let slot = self
            .controllers
            .get_mut(self.count)
            .ok_or(LayoutError::TooMany)?;
        *slot = c;
        self.count += 1;
        Ok(())
    }

    /// Which controller (index into [`Self::controllers`]) and pin serve `gsi`.
    pub fn locate(&self, gsi: u32) -> Result<(usize, u32), GsiError> {
        self.controllers()
            .iter()
            .position(|c| c.gsi_base <= gsi && gsi < c.gsi_end())
            .map(|i| (i, gsi - self.controllers[i].gsi_base))
            .ok_or(GsiError::NoController(gsi))
    }

    /// Lines of all controllers together (the GSIs that can be routed).
    pub fn line_count(&self) -> u32 {
        self.controllers().iter().map(|c| c.lines).sum()
    }
}

/// `0x30 + gsi` while that stays below [`VECTOR_END`]: a vector no other
/// GSI's default vector collides with.
pub fn default_vector(gsi: u32) -> Option<u8> {
    let v = u32::from(VECTOR_FIRST).checked_add(gsi)?;
    (v < u32::from(VECTOR_END)).then_some(v as u8)
}

/// Whether interrupts on `vector` come from an I/O APIC line.
pub fn is_line_vector(vector: u64) -> bool {
    (u64::from(VECTOR_FIRST)..u64::from(VECTOR_END)).contains(&vector)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorError {
    /// Outside [`VECTOR_FIRST`]`..`[`VECTOR_END`].
    OutOfRange(u8),
    /// Another GSI already owns the vector.
    InUse { vector: u8, gsi: u32 },
}

/// Which GSI owns which I/O APIC vector: at most one GSI per vector and one
/// vector per GSI.
#[derive(Clone, Debug)]
pub struct VectorMap {
    owner: [Option<u32>; VECTOR_COUNT],
}

impl Default for VectorMap {
    fn default() -> Self {
        Self::new()
    }
}

impl VectorMap {
    pub const fn new() -> Self {
        VectorMap {
            owner: [None; VECTOR_COUNT],
        }
    }

    fn slot(vector: u8) -> Option<usize> {
        is_line_vector(u64::from(vector)).then(|| usize::from(vector - VECTOR_FIRST))
    }

    /// Gives `vector` to `gsi`, releasing the vector `gsi` had before.
    /// Nothing changes on error.
    pub fn assign(&mut self, gsi: u32, vector: u8) -> Result<(), VectorError> {
        let slot = Self::slot(vector).ok_or(VectorError::OutOfRange(vector))?;
        match self.owner[slot] {
            Some(owner) if owner != gsi => {
                return Err(VectorError::InUse { vector, gsi: owner });
            }
            _ => {}
        }
        self.release(gsi);
        self.owner[slot] = Some(gsi);
        Ok(())
    }

    /// Forgets `gsi`'s vector, if it has one.
    pub fn release(&mut self, gsi: u32) {
        for owner in self.owner.iter_mut().filter(|o| **o == Some(gsi)) {
            *owner = None;
        }
    }

    /// The GSI that owns `vector`.
    pub fn gsi(&self, vector: u8) -> Option<u32> {
        Self::slot(vector).and_then(|s| self.owner[s])
    }

    /// The vector `gsi` owns.
    pub fn vector(&self, gsi: u32) -> Option<u8> {
        self.owner
            .iter()
            .position(|o| *o == Some(gsi))
            .map(|s| VECTOR_FIRST + s as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(isa_irq: u8, gsi: u32, flags: u16) -> InterruptOverride {
        InterruptOverride {
            isa_irq,
            gsi,
            flags,
        }
    }

    /// What QEMU's MADT says (pc and q35): IRQ 0 → GSI 2, and the PCI link
    /// IRQs 5, 9, 10, 11 level-triggered, active high (flags 0xd).
    fn qemu_overrides() -> [InterruptOverride; 5] {
        [
            ov(0, 2, 0),
            ov(5, 5, 0xd),
            ov(9, 9, 0xd),
            ov(10, 10, 0xd),
            ov(11, 11, 0xd),
        ]
    }

    #[test]
    fn register_indices() {
        assert_eq!(redirection_registers(0), Some((0x10, 0x11)));
        assert_eq!(redirection_registers(23), Some((0x3e, 0x3f)));
        assert_eq!(redirection_registers(119), Some((0xfe, 0xff)));
        assert_eq!(redirection_registers(120), None);
        assert_eq!(redirection_registers(u32::MAX), None);
        assert_eq!((IOREGSEL, IOWIN, REG_ID, REG_VERSION), (0, 0x10, 0, 1));
    }

    #[test]
    fn version_register() {
        // QEMU's I/O APIC: version 0x20, 24 entries (max index 23).
        assert_eq!(
            Version::decode(0x0017_0020),
            Ok(Version {
                version: 0x20,
                lines: 24
            })
        );
        assert_eq!(Version::decode(0x0000_0011).map(|v| v.lines), Ok(1));
        // A max index of 255 would need registers past 0xff.
        assert_eq!(
            Version::decode(0x00ff_0020).map(|v| v.lines),
            Ok(MAX_LINES_PER_IOAPIC)
        );
        assert_eq!(Version::decode(u32::MAX), Err(VersionError::NoDevice));
    }

    #[test]
    fn redirection_entry_bits() {
        let e = Redirection {
            vector: 0x32,
            polarity: Polarity::ActiveHigh,
            trigger: Trigger::Edge,
            masked: false,
            destination: 0,
        };
        assert_eq!(e.encode(), 0x32);
        let e = Redirection {
            vector: 0x45,
            polarity: Polarity::ActiveLow,
            trigger: Trigger::Level,
            masked: true,
            destination: 3,
        };
        assert_eq!(e.encode(), 0x0300_0000_0001_a045);
        assert_eq!(e.halves(), (0x0001_a045, 0x0300_0000));
        assert_eq!(
            Redirection::masked(7).encode(),
            0x0700_0000_0001_0000,
            "masked, vector 0, to APIC 7"
        );
    }

    #[test]
    fn redirection_entry_round_trips() {
        for vector in [0x30u8, 0x7f, 0xdf] {
            for polarity in [Polarity::ActiveHigh, Polarity::ActiveLow] {
                for trigger in [Trigger::Edge, Trigger::Level] {
                    for masked in [false, true] {
                        for destination in [0u8, 1, 0xff] {
                            let e = Redirection {
                                vector,
                                polarity,
                                trigger,
                                masked,
                                destination,
                            };
                            assert_eq!(Redirection::decode(e.encode()), Ok(e));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn redirection_decode_ignores_read_only_bits_and_refuses_other_modes() {
        // Delivery status (12) and remote IRR (14) set by the chip.
        let raw = 0x0000_0000_0000_5033;
        assert_eq!(
            Redirection::decode(raw).map(|e| (e.vector, e.masked)),
            Ok((0x33, false))
        );
        // ExtINT (111), as firmware may leave pin 0.
        assert_eq!(
            Redirection::decode(0x700),
            Err(EntryError::DeliveryMode(0b111))
        );
        assert_eq!(Redirection::decode(0x100), Err(EntryError::DeliveryMode(1)));
        assert_eq!(
            Redirection::decode(0x800),
            Err(EntryError::LogicalDestination)
        );
        // Power-on state of real chips: masked, everything else zero.
        assert_eq!(Redirection::decode(0x1_0000), Ok(Redirection::masked(0)));
    }

    #[test]
    fn override_flag_encodings() {
        use Polarity::*;
        use Trigger::*;
        assert_eq!(override_signalling(0b0000), Some((ActiveHigh, Edge)));
        assert_eq!(override_signalling(0b0101), Some((ActiveHigh, Edge)));
        assert_eq!(override_signalling(0b1101), Some((ActiveHigh, Level)));
        assert_eq!(override_signalling(0b1111), Some((ActiveLow, Level)));
        assert_eq!(override_signalling(0b0011), Some((ActiveLow, Edge)));
        assert_eq!(override_signalling(0b0010), None);
        assert_eq!(override_signalling(0b1000), None);
        // Reserved upper bits do not matter.
        assert_eq!(override_signalling(0xfff0), Some((ActiveHigh, Edge)));
        assert_eq!(override_signalling(0xffff), Some((ActiveLow, Level)));
    }

    #[test]
    fn isa_irqs_with_qemu_overrides() {
        let o = qemu_overrides();
        let high_edge = |gsi| Line {
            gsi,
            polarity: Polarity::ActiveHigh,
            trigger: Trigger::Edge,
        };
        assert_eq!(resolve_isa_irq(0, &o), Ok(high_edge(2)));
        assert_eq!(resolve_isa_irq(1, &o), Ok(high_edge(1)));
        assert_eq!(resolve_isa_irq(4, &o), Ok(high_edge(4)));
        assert_eq!(
            resolve_isa_irq(9, &o),
            Ok(Line {
                gsi: 9,
                polarity: Polarity::ActiveHigh,
                trigger: Trigger::Level
            })
        );
        assert_eq!(resolve_isa_irq(15, &o), Ok(high_edge(15)));
        assert_eq!(
            resolve_isa_irq(2, &o),
            Err(IsaError::GsiTaken {
                irq: 2,
                gsi: 2,
                by_irq: 0
            })
        );
    }

    #[test]
    fn isa_irqs_without_overrides_and_odd_overrides() {
        for irq in 0..16 {
            assert_eq!(
                resolve_isa_irq(irq, &[]),
                Ok(Line::default_for(u32::from(irq)))
            );
        }
        assert_eq!(resolve_isa_irq(16, &[]), Err(IsaError::NotIsa(16)));
        assert_eq!(resolve_isa_irq(255, &[]), Err(IsaError::NotIsa(255)));
        // Reserved polarity encoding.
        assert_eq!(
            resolve_isa_irq(3, &[ov(3, 3, 0b10)]),
            Err(IsaError::ReservedFlags { irq: 3, flags: 2 })
        );
        // Duplicates: the first override wins.
        assert_eq!(
            resolve_isa_irq(4, &[ov(4, 20, 0xf), ov(4, 4, 0)]).map(|l| l.gsi),
            Ok(20)
        );
        // An override to a GSI far outside every I/O APIC is still returned;
        // routing it is what fails (see layout_locates_gsis).
        assert_eq!(
            resolve_isa_irq(7, &[ov(7, u32::MAX, 0)]).map(|l| l.gsi),
            Ok(u32::MAX)
        );
        // Overrides with a non-ISA source number are ignored.
        assert_eq!(
            resolve_isa_irq(1, &[ov(200, 1, 0xf)]),
            Ok(Line::default_for(1))
        );
    }

    #[test]
    fn default_signalling_by_gsi() {
        assert_eq!(Line::default_for(15).trigger, Trigger::Edge);
        assert_eq!(Line::default_for(15).polarity, Polarity::ActiveHigh);
        assert_eq!(Line::default_for(16).trigger, Trigger::Level);
        assert_eq!(Line::default_for(16).polarity, Polarity::ActiveLow);
        assert_eq!(Line::default_for(u32::MAX).trigger, Trigger::Level);
    }

    fn ctl(address: u64, gsi_base: u32, lines: u32) -> Controller {
        Controller {
            id: 0,
            address,
            gsi_base,
            lines,
        }
    }

    #[test]
    fn layout_locates_gsis() {
        let mut l = Layout::new();
        assert_eq!(l.locate(0), Err(GsiError::NoController(0)));
        assert_eq!(l.line_count(), 0);
        l.add(ctl(0xfec0_0000, 0, 24)).unwrap();
        l.add(ctl(0xfec0_1000, 32, 16)).unwrap();
        assert_eq!(l.line_count(), 40);
        assert_eq!(l.locate(0), Ok((0, 0)));
        assert_eq!(l.locate(23), Ok((0, 23)));
        assert_eq!(l.locate(24), Err(GsiError::NoController(24)));
        assert_eq!(l.locate(31), Err(GsiError::NoController(31)));
        assert_eq!(l.locate(32), Ok((1, 0)));
        assert_eq!(l.locate(47), Ok((1, 15)));
        assert_eq!(l.locate(48), Err(GsiError::NoController(48)));
        assert_eq!(l.locate(u32::MAX), Err(GsiError::NoController(u32::MAX)));
    }

    #[test]
    fn layout_refuses_bad_controllers() {
        let mut l = Layout::new();
        l.add(ctl(0xfec0_0000, 8, 24)).unwrap();
        assert_eq!(
            l.add(ctl(0xfec0_1000, 0, 9)),
            Err(LayoutError::Overlap { gsi: 8 })
        );
        assert_eq!(
            l.add(ctl(0xfec0_1000, 31, 4)),
            Err(LayoutError::Overlap { gsi: 31 })
        );
        assert_eq!(
            l.add(ctl(0xfec0_1000, 10, 2)),
            Err(LayoutError::Overlap { gsi: 10 })
        );
        assert_eq!(l.add(ctl(0, 100, 4)), Err(LayoutError::BadAddress(0)));
        assert_eq!(
            l.add(ctl(0xfec0_0004, 100, 4)),
            Err(LayoutError::BadAddress(0xfec0_0004))
        );
        assert_eq!(
            l.add(ctl(0xfec0_1000, u32::MAX - 1, 4)),
            Err(LayoutError::GsiOverflow {
                gsi_base: u32::MAX - 1,
                lines: 4
            })
        );
        // Adjacent ranges and a line-less controller are fine.
        l.add(ctl(0xfec0_1000, 0, 8)).unwrap();
        l.add(ctl(0xfec0_2000, 32, 0)).unwrap();
        assert_eq!(l.locate(32), Err(GsiError::NoController(32)));
        for i in 0..(MAX_IOAPICS - 3) {
            l.add(ctl(0xfec1_0000, 100 + i as u32 * 8, 8)).unwrap();
        }
        assert_eq!(l.add(ctl(0xfec2_0000, 1000, 8)), Err(LayoutError::TooMany));
        assert_eq!(l.controllers().len(), MAX_IOAPICS);
    }

    #[test]
    fn default_vectors() {
        assert_eq!(default_vector(0), Some(0x30));
        assert_eq!(default_vector(2), Some(0x32));
        assert_eq!(default_vector(79), Some(0x7f));
        assert_eq!(default_vector(80), None);
        assert_eq!(default_vector(u32::MAX), None);
        assert!(!is_line_vector(0x2f));
        assert!(is_line_vector(0x30));
        assert!(is_line_vector(0x7f));
        assert!(!is_line_vector(0x80));
        assert!(!is_line_vector(0x1_0030));
        // The MSI window follows, without overlap.
        assert!(!is_msi_vector(0x7f));
        assert!(is_msi_vector(0x80) && is_msi_vector(0xdf));
        assert!(!is_msi_vector(0xe0));
    }

    #[test]
    fn msi_messages() {
        assert_eq!(msi_message(0, 0x80), Some((0xfee0_0000, 0x80)));
        assert_eq!(msi_message(3, 0x81), Some((0xfee0_3000, 0x81)));
        assert_eq!(msi_message(256, 0x80), None);
    }

    #[test]
    fn vector_map_assigns_one_vector_per_gsi() {
        let mut m = VectorMap::new();
        assert_eq!(m.gsi(0x32), None);
        assert_eq!(m.vector(2), None);
        m.assign(2, 0x32).unwrap();
        assert_eq!(m.gsi(0x32), Some(2));
        assert_eq!(m.vector(2), Some(0x32));
        // Same again: no change.
        m.assign(2, 0x32).unwrap();
        // Another GSI cannot take it; nothing changes.
        assert_eq!(
            m.assign(3, 0x32),
            Err(VectorError::InUse {
                vector: 0x32,
                gsi: 2
            })
        );
        assert_eq!(m.vector(3), None);
        // Moving GSI 2 frees its old vector.
        m.assign(2, 0x50).unwrap();
        assert_eq!(m.gsi(0x32), None);
        assert_eq!(m.vector(2), Some(0x50));
        m.assign(3, 0x32).unwrap();
        m.release(2);
        assert_eq!((m.gsi(0x50), m.vector(2)), (None, None));
        assert_eq!(m.vector(3), Some(0x32));
    }

    #[test]
    fn vector_map_refuses_vectors_outside_the_window() {
        let mut m = VectorMap::new();
        for v in [0u8, 0x20, 0x2f, 0x80, 0xe0, 0xef, 0xff] {
            assert_eq!(m.assign(1, v), Err(VectorError::OutOfRange(v)));
            assert_eq!(m.gsi(v), None);
        }
        m.assign(1, 0x7f).unwrap();
        assert_eq!(m.vector(1), Some(0x7f));
    }
}
