//! The ACPI tables the VMM gives a guest, and its PM1 and PM-timer
//! registers: an RSDP (ACPI 2.0) → XSDT → FADT → DSDT and FACS, in the
//! reserved BIOS area. The DSDT holds only `\_S5`, the soft-off sleep
//! type, so that Linux can power the VM off the ACPI way: it writes
//! SLP_TYP = 5 with SLP_EN to PM1a control, which the VMM traps
//! ([`Pm::write`] answers `PowerOff`). The MADT names one local APIC
//! (x2APIC mode: Linux picks its x2APIC driver from the MADT), the I/O
//! APIC ([`crate::ioapic`], ID [`IOAPIC_ID`], GSIs 0..24) and the
//! interrupt source overrides a PC has: ISA IRQ 0 (the PIT) on GSI 2, and
//! the SCI (IRQ [`SCI_IRQ`]) and the IRQs PCI devices may use
//! ([`PCI_IRQS`]) level-triggered, active low, as ACPI and PCI want them.
//! The DSDT has no `_PRT`: Linux finds no GSI for a PCI device's INTx and
//! keeps the ISA IRQ of its Interrupt Line register, whose signalling is
//! then the override's (without one, ISA's edge, active high: wrong for
//! a PCI line). The 8259s stay (PCAT_COMPAT): Linux starts on them in
//! virtual-wire mode and masks them when it switches to the I/O APIC.
//! Other ISA IRQs are GSI = IRQ, edge, active high.
//!
//! The PM timer (24 bits, 3.579545 MHz, from the VMM's clock) gives Linux
//! a second clocksource to watch the TSC with.

use alloc::vec;
use alloc::vec::Vec;

/// Where the tables go (guest-physical; the e820 map reserves it).
pub const TABLES: u64 = 0xf_0000;
/// The registers: PM1a event block (status, enable), PM1a control, the
/// PM timer.
pub const PM1A_EVT: u16 = 0x600;
pub const PM1A_CNT: u16 = 0x604;
pub const PM_TMR: u16 = 0x608;
/// The SCI's ISA interrupt.
pub const SCI_IRQ: u8 = 9;
/// The ISA IRQs the VMM's PCI devices may have in their Interrupt Line
/// registers (QEMU's PC has 5, 9, 10 and 11; 9 is the SCI's here).
pub const PCI_IRQS: [u8; 3] = [5, 10, 11];
/// The sleep type `\_S5` names.
pub const SLP_TYP_S5: u16 = 5;
const SLP_EN: u16 = 1 << 13;
/// The PM timer's rate.
pub const PM_TIMER_HZ: u64 = 3_579_545;

const RSDP_AT: usize = 0x000;
const XSDT_AT: usize = 0x040;
const FADT_AT: usize = 0x100;
const FACS_AT: usize = 0x240;
const MADT_AT: usize = 0x280;
/// The interrupt source overrides: IRQ 0, the SCI, the PCI IRQs.
const OVERRIDES: usize = 2 + PCI_IRQS.len();
/// The MADT: header, local APIC address and flags, one processor local
/// APIC (8 bytes), one I/O APIC (12), the overrides (10 each), one local
/// APIC NMI (6 bytes).
const MADT_LEN: usize = 44 + 8 + 12 + OVERRIDES * 10 + 6;
const _: () = assert!(MADT_AT + MADT_LEN <= DSDT_AT, "the MADT overlaps the DSDT");
/// The I/O APIC's ID.
pub const IOAPIC_ID: u8 = 0;
/// ISA IRQ 0 (the PIT)'s GSI: the I/O APIC's pin 2, as on a PC (pin 0 is
/// the 8259's output there).
pub const PIT_GSI: u8 = 2;
/// Interrupt source override flags: polarity (bits 0..1) and trigger mode
/// (2..3); 0 conforms to the bus (ISA: edge, active high).
const MPS_CONFORMING: u16 = 0;
const MPS_LEVEL_ACTIVE_LOW: u16 = 3 | 3 << 2;
const DSDT_AT: usize = 0x300;
const FADT_LEN: usize = 276;

fn checksum(bytes: &[u8]) -> u8 {
    0u8.wrapping_sub(bytes.iter().fold(0u8, |s, b| s.wrapping_add(*b)))
}

/// A table header (36 bytes) for `signature` of `len` bytes.
fn header(t: &mut [u8], signature: &[u8; 4], len: usize, revision: u8) {
    t[0..4].copy_from_slice(signature);
    t[4..8].copy_from_slice(&(len as u32).to_le_bytes());
    t[8] = revision;
    t[10..16].copy_from_slice(b"PECAN ");
    t[16..24].copy_from_slice(b"PECANVMM");
    t[24..28].copy_from_slice(&1u32.to_le_bytes());
    t[28..32].copy_from_slice(b"PCAN");
    t[32..36].copy_from_slice(&1u32.to_le_bytes());
}

fn put32(t: &mut [u8], at: usize, v: u32) {
    t[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(t: &mut [u8], at: usize, v: u64) {
    t[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The AML of the DSDT: `Name (_S5, Package (4) { 5, 0, 0, 0 })`.
const DSDT_AML: [u8; 13] = [
    0x08,
    b'_',
    b'S',
    b'5',
    b'_', // NameOp "_S5_"
    0x12,
    0x07,
    0x04, // PackageOp, PkgLength 7, 4 elements
    0x0a,
    SLP_TYP_S5 as u8, // BytePrefix 5
    0x00,
    0x00,
    0x00, // Zero, Zero, Zero
];

/// The tables, to be written at [`TABLES`]; the RSDP is at its start.
pub fn tables() -> Vec<u8> {
    let base = TABLES;
    let dsdt_len = 36 + DSDT_AML.len();
    let mut t = vec![0u8; DSDT_AT + dsdt_len];

    // DSDT.
    {
        let d = &mut t[DSDT_AT..DSDT_AT + dsdt_len];
        header(d, b"DSDT", dsdt_len, 2);
        d[36..].copy_from_slice(&DSDT_AML);
        d[9] = checksum(d);
    }
    // FACS: signature, length, no waking vector, version 2.
    {
        let f = &mut t[FACS_AT..FACS_AT + 64];
        f[0..4].copy_from_slice(b"FACS");
        put32(f, 4, 64);
        f[32] = 2;
    }
    // FADT (ACPI 6.0 layout).
    {
        let f = &mut t[FADT_AT..FADT_AT + FADT_LEN];
        header(f, b"FACP", FADT_LEN, 6);
        put32(f, 36, (base + FACS_AT as u64) as u32); // FIRMWARE_CTRL
        put32(f, 40, (base + DSDT_AT as u64) as u32); // DSDT
        f[45] = 0; // preferred PM profile: unspecified
        f[46..48].copy_from_slice(&u16::from(SCI_IRQ).to_le_bytes()); // SCI_INT
        put32(f, 48, 0); // SMI_CMD: none, ACPI mode is always on
        put32(f, 56, u32::from(PM1A_EVT)); // PM1a_EVT_BLK
        put32(f, 64, u32::from(PM1A_CNT)); // PM1a_CNT_BLK
        put32(f, 76, u32::from(PM_TMR)); // PM_TMR_BLK
        f[88] = 4; // PM1_EVT_LEN
        f[89] = 2; // PM1_CNT_LEN
        f[91] = 4; // PM_TMR_LEN
        f[108] = 0x32; // CENTURY: CMOS register
                       // IAPC_BOOT_ARCH: no VGA, no MSI restrictions; legacy devices
                       // (8042) absent is bit 1 clear with i8042 off on the command line.
        f[109..111].copy_from_slice(&(1u16 << 2).to_le_bytes()); // VGA not present
                                                                 // Flags: WBINVD (0), PROC_C1 (2), SLP_BUTTON (5: none), RTC_S4? no,
                                                                 // PWR_BUTTON (4: a control-method one, i.e. none), fixed-feature
                                                                 // power button absent.
        put32(f, 112, 1 | 1 << 2 | 1 << 4 | 1 << 5);
        f[131] = 0; // FADT minor version
        put64(f, 132, base + FACS_AT as u64); // X_FIRMWARE_CTRL
        put64(f, 140, base + DSDT_AT as u64); // X_DSDT
        f[9] = checksum(f);
    }
    // MADT: the boot CPU's local APIC (ID 0, enabled), the I/O APIC,
    // the overrides, LINT1 as NMI, the 8259s present (PCAT_COMPAT).
    {
        let m = &mut t[MADT_AT..MADT_AT + MADT_LEN];
        header(m, b"APIC", MADT_LEN, 4);
        put32(m, 36, 0xfee0_0000);
        put32(m, 40, 1);
        m[44..52].copy_from_slice(&[0, 8, 0, 0, 1, 0, 0, 0]);
        m[52..56].copy_from_slice(&[1, 12, IOAPIC_ID, 0]);
        put32(m, 56, crate::ioapic::BASE as u32);
        put32(m, 60, 0); // GSI base
        let level = [SCI_IRQ].into_iter().chain(PCI_IRQS);
        let overrides = [(0, PIT_GSI, MPS_CONFORMING)]
            .into_iter()
            .chain(level.map(|irq| (irq, irq, MPS_LEVEL_ACTIVE_LOW)));
        for (i, (irq, gsi, flags)) in overrides.enumerate() {
            let o = &mut m[64 + 10 * i..74 + 10 * i];
            o[..4].copy_from_slice(&[2, 10, 0, irq]); // ISA bus
            put32(o, 4, u32::from(gsi));
            o[8..10].copy_from_slice(&flags.to_le_bytes());
        }
        let nmi = 64 + 10 * OVERRIDES;
        m[nmi..nmi + 6].copy_from_slice(&[4, 6, 0xff, 0, 0, 1]);
        m[9] = checksum(m);
    }
    // XSDT: the FADT and the MADT.
    {
        let x = &mut t[XSDT_AT..XSDT_AT + 52];
        header(x, b"XSDT", 52, 1);
        put64(x, 36, base + FADT_AT as u64);
        put64(x, 44, base + MADT_AT as u64);
        x[9] = checksum(x);
    }
    // RSDP (ACPI 2.0, 36 bytes).
    {
        let r = &mut t[RSDP_AT..RSDP_AT + 36];
        r[0..8].copy_from_slice(b"RSD PTR ");
        r[9..15].copy_from_slice(b"PECAN ");
        r[15] = 2;
        put32(r, 16, 0); // no RSDT
        put32(r, 20, 36);
        put64(r, 24, base + XSDT_AT as u64);
        r[8] = checksum(&r[..20]);
        r[32] = checksum(&r[..36]);
    }
    t
}

/// What a PM register write asks of the VMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmAction {
    None,
    /// Sleep state S5: the guest is off.
    PowerOff,
    /// Another sleep state, which this VMM does not offer (ignored).
    OtherSleep(u16),
}

/// The PM1a event and control registers and the PM timer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pm {
    status: u16,
    enable: u16,
    control: u16,
}

impl Pm {
    pub fn owns(port: u16) -> bool {
        (PM1A_EVT..PM_TMR + 4).contains(&port)
    }

    /// A read of one byte at `port`, at `now` ns.
    pub fn read(&self, port: u16, now: u64) -> u8 {
        let timer =
            ((u128::from(now) * u128::from(PM_TIMER_HZ) / 1_000_000_000) as u32) & 0xff_ffff;
        let (value, shift) = match port {
            p if p < PM1A_EVT + 2 => (u32::from(self.status), p - PM1A_EVT),
            p if p < PM1A_CNT => (u32::from(self.enable), p - PM1A_EVT - 2),
            // SCI_EN (bit 0): ACPI mode on.
            p if p < PM1A_CNT + 2 => (u32::from(self.control | 1), p - PM1A_CNT),
            p if (PM_TMR..PM_TMR + 4).contains(&p) => (timer, p - PM_TMR),
            _ => (0xffff_ffff, 0),
        };
        (value >> (8 * shift)) as u8
    }

    /// A write of one byte at `port`.
    pub fn write(&mut self, port: u16, v: u8) -> PmAction {
        let set = |reg: &mut u16, byte: u16, v: u8| {
            let shift = 8 * byte;
            *reg = *reg & !(0xff << shift) | u16::from(v) << shift;
        };
        match port {
            // Status bits are cleared by writing ones.
            p if p < PM1A_EVT + 2 => self.status &= !(u16::from(v) << (8 * (p - PM1A_EVT))),
            p if p < PM1A_CNT => set(&mut self.enable, p - PM1A_EVT - 2, v),
            p if p < PM1A_CNT + 2 => {
                set(&mut self.control, p - PM1A_CNT, v);
                if self.control & SLP_EN != 0 {
                    self.control &= !SLP_EN;
                    let kind = (self.control >> 10) & 7;
                    return if kind == SLP_TYP_S5 {
                        PmAction::PowerOff
                    } else {
                        PmAction::OtherSleep(kind)
                    };
                }
            }
            _ => {}
        }
        PmAction::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(t: &[u8], at: usize) -> &[u8] {
        let len = u32::from_le_bytes(t[at + 4..at + 8].try_into().unwrap()) as usize;
        &t[at..at + len]
    }

    #[test]
    fn tables_link_up_with_checksums() {
        let t = tables();
        assert_eq!(&t[0..8], b"RSD PTR ");
        assert_eq!(checksum(&t[..20]), 0);
        assert_eq!(checksum(&t[..36]), 0);
        let xsdt_at = u64::from_le_bytes(t[24..32].try_into().unwrap()) - TABLES;
        let xsdt = table(&t, xsdt_at as usize);
        assert_eq!(&xsdt[..4], b"XSDT");
        assert_eq!(checksum(xsdt), 0);
        let fadt_at = u64::from_le_bytes(xsdt[36..44].try_into().unwrap()) - TABLES;
        let fadt = table(&t, fadt_at as usize);
        assert_eq!(&fadt[..4], b"FACP");
        assert_eq!(fadt.len(), FADT_LEN);
        assert_eq!(checksum(fadt), 0);
        let dsdt_at = u64::from_le_bytes(fadt[140..148].try_into().unwrap()) - TABLES;
        let dsdt = table(&t, dsdt_at as usize);
        assert_eq!(&dsdt[..4], b"DSDT");
        assert_eq!(checksum(dsdt), 0);
        assert_eq!(&dsdt[36..41], b"\x08_S5_");
        let madt_at = u64::from_le_bytes(xsdt[44..52].try_into().unwrap()) - TABLES;
        let madt = table(&t, madt_at as usize);
        assert_eq!(&madt[..4], b"APIC");
        assert_eq!(checksum(madt), 0);
        assert_eq!(&madt[44..48], &[0, 8, 0, 0], "local APIC 0 of processor 0");
        assert_eq!(&madt[MADT_LEN - 6..MADT_LEN - 4], &[4, 6], "LINT1 NMI last");
        madt_as_linux_reads_it(madt);
        let facs_at = u64::from_le_bytes(fadt[132..140].try_into().unwrap()) - TABLES;
        assert_eq!(facs_at % 64, 0);
        assert_eq!(&t[facs_at as usize..facs_at as usize + 4], b"FACS");
        assert_eq!(
            u32::from_le_bytes(fadt[64..68].try_into().unwrap()),
            u32::from(PM1A_CNT)
        );
    }

    /// The MADT through the kernel's own parser (`kcore`), which reads it
    /// as Linux does.
    fn madt_as_linux_reads_it(madt: &[u8]) {
        use kcore::ioapic::{resolve_isa_irq, Polarity, Trigger};
        let info = kcore::acpi::parse_madt(madt);
        assert_eq!(info.problem, None);
        assert!(info.has_8259);
        assert_eq!(info.cpus().len(), 1);
        assert_eq!(info.cpus()[0].apic_id, 0);
        let io = info.ioapics();
        assert_eq!(io.len(), 1);
        assert_eq!(
            (io[0].id, u64::from(io[0].address), io[0].gsi_base),
            (IOAPIC_ID, crate::ioapic::BASE, 0)
        );
        let pit = resolve_isa_irq(0, info.overrides()).unwrap();
        assert_eq!(
            (pit.gsi, pit.polarity, pit.trigger),
            (2, Polarity::ActiveHigh, Trigger::Edge)
        );
        assert_eq!(info.overrides().len(), OVERRIDES);
        for irq in [SCI_IRQ, 5, 10, 11] {
            let l = resolve_isa_irq(irq, info.overrides()).unwrap();
            assert_eq!(
                (l.gsi, l.polarity, l.trigger),
                (u32::from(irq), Polarity::ActiveLow, Trigger::Level)
            );
        }
        let com1 = resolve_isa_irq(4, info.overrides()).unwrap();
        assert_eq!((com1.gsi, com1.trigger), (4, Trigger::Edge));
    }

    #[test]
    fn s5_powers_off() {
        let mut pm = Pm::default();
        assert_eq!(pm.read(PM1A_CNT, 0) & 1, 1, "SCI_EN");
        // Linux writes the 16-bit control as two bytes (the VMM splits
        // wider accesses): SLP_TYP 5 << 10 | SLP_EN.
        let v = SLP_TYP_S5 << 10 | SLP_EN | 1;
        assert_eq!(pm.write(PM1A_CNT, v as u8), PmAction::None);
        assert_eq!(pm.write(PM1A_CNT + 1, (v >> 8) as u8), PmAction::PowerOff);
        let s3 = 1u16 << 10 | SLP_EN;
        pm.write(PM1A_CNT, s3 as u8);
        assert_eq!(
            pm.write(PM1A_CNT + 1, (s3 >> 8) as u8),
            PmAction::OtherSleep(1)
        );
    }

    #[test]
    fn pm_timer_counts_at_its_rate() {
        let pm = Pm::default();
        let read = |ns| {
            (0..4).fold(0u32, |v, i| {
                v | u32::from(pm.read(PM_TMR + i, ns)) << (8 * i)
            })
        };
        assert_eq!(read(0), 0);
        assert_eq!(read(1_000_000_000), (PM_TIMER_HZ as u32) & 0xff_ffff);
        assert!(read(u64::MAX / 4) <= 0xff_ffff);
    }
}
