//! Parsing of the ACPI tables the kernel needs to bring up the machine: the
//! MADT (CPUs, I/O APICs, interrupt overrides) and the MCFG (PCI ECAM).
//!
//! Finding and checksumming tables is the `acpi` crate's job in the kernel;
//! this module only decodes a table's bytes, defensively: firmware tables can
//! be wrong, so a truncated or malformed entry ends the walk with an error
//! value recorded in the result, and never reads past the table.

use formats::bytes::{read_u16, read_u32, read_u64};

/// Most CPUs the kernel will record; more are counted but not stored.
pub const MAX_CPUS: usize = 64;
pub const MAX_IOAPICS: usize = 8;
pub const MAX_OVERRIDES: usize = 24;
pub const MAX_ECAM_REGIONS: usize = 4;

const SDT_HEADER_LEN: usize = 36;
const MADT_ENTRIES_OFFSET: usize = SDT_HEADER_LEN + 8;
const MCFG_ENTRIES_OFFSET: usize = SDT_HEADER_LEN + 8;
const MCFG_ENTRY_LEN: usize = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cpu {
    pub apic_id: u32,
    pub processor_uid: u32,
    /// Usable now (enabled) as opposed to only hot-pluggable later.
    pub enabled: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoApic {
    pub id: u8,
    pub address: u32,
    pub gsi_base: u32,
}

/// An ISA IRQ that is wired to a different global system interrupt, or with
/// non-default polarity/trigger mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InterruptOverride {
    pub isa_irq: u8,
    pub gsi: u32,
    pub flags: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadtProblem {
    /// The table is shorter than its fixed header.
    TooShort,
    /// An entry at this byte offset has a length that is too small or runs
    /// past the end of the table; entries from there on were ignored.
    BadEntry { offset: usize },
    /// More CPUs, I/O APICs or overrides than this parser records.
    Overflow,
}

#[derive(Clone, Debug)]
pub struct MadtInfo {
    pub local_apic_address: u32,
    /// PC-AT compatible dual 8259s present (flag bit 0).
    pub has_8259: bool,
    cpus: [Cpu; MAX_CPUS],
    cpu_count: usize,
    ioapics: [IoApic; MAX_IOAPICS],
    ioapic_count: usize,
    overrides: [InterruptOverride; MAX_OVERRIDES],
    override_count: usize,
    pub problem: Option<MadtProblem>,
}

impl MadtInfo {
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus[..self.cpu_count]
    }
    pub fn enabled_cpus(&self) -> impl Iterator<Item = &Cpu> {
        self.cpus().iter().filter(|c| c.enabled)
    }
    pub fn ioapics(&self) -> &[IoApic] {
        &self.ioapics[..self.ioapic_count]
    }
    /// Interrupt source overrides; `kcore::ioapic::resolve_isa_irq` turns
    /// them into an ISA IRQ's GSI, polarity and trigger mode.
    pub fn overrides(&self) -> &[InterruptOverride] {
        &self.overrides[..self.override_count]
    }
}

/// Decodes a whole MADT (`bytes` = the table including its SDT header; only
/// as many bytes as the header's length field are used).
pub fn parse_madt(bytes: &[u8]) -> MadtInfo {
    let mut info = MadtInfo {
        local_apic_address: 0,
        has_8259: false,
        cpus: [Cpu::default(); MAX_CPUS],
        cpu_count: 0,
        ioapics: [IoApic::default(); MAX_IOAPICS],
        ioapic_count: 0,
        overrides: [InterruptOverride::default(); MAX_OVERRIDES],
        override_count: 0,
        problem: None,
    };
    let declared = read_u32(bytes, 4).map_or(0, |l| l as usize);
    let bytes = &bytes[..declared.min(bytes.len())];
    let (Some(lapic), Some(flags)) = (
        read_u32(bytes, SDT_HEADER_LEN),
        read_u32(bytes, SDT_HEADER_LEN + 4),
    ) else {
        info.problem = Some(MadtProblem::TooShort);
        return info;
    };
    info.local_apic_address = lapic;
    info.has_8259 = flags & 1 != 0;

    let mut offset = MADT_ENTRIES_OFFSET;
    while offset < bytes.len() {
        let (Some(&kind), Some(&len)) = (bytes.get(offset), bytes.get(offset + 1)) else {
            info.problem = Some(MadtProblem::BadEntry { offset });
            break;
        };
        let len = usize::from(len);
        let Some(entry) = (len >= 2)
            .then(|| bytes.get(offset..offset + len))
            .flatten()
        else {
            info.problem = Some(MadtProblem::BadEntry { offset });
            break;
        };
        if !record_entry(&mut info, kind, entry) {
            info.problem = Some(MadtProblem::BadEntry { offset });
            break;
        }
        offset += len;
    }
    info
}

/// Records one entry; false if the entry is too short for its type.
fn record_entry(info: &mut MadtInfo, kind: u8, e: &[u8]) -> bool {
    match kind {
        0 => {
            let (Some(&uid), Some(&apic_id), Some(flags)) = (e.get(2), e.get(3), read_u32(e, 4))
            else {
                return false;
            };
            let cpu = Cpu {
                apic_id: u32::from(apic_id),
                processor_uid: u32::from(uid),
                enabled: flags & 1 != 0,
            };
            push(&mut info.cpus, &mut info.cpu_count, cpu, &mut info.problem);
        }
        9 => {
            let (Some(apic_id), Some(flags), Some(uid)) =
                (read_u32(e, 4), read_u32(e, 8), read_u32(e, 12))
            else {
                return false;
            };
            let cpu = Cpu {
                apic_id,
                processor_uid: uid,
                enabled: flags & 1 != 0,
            };
            push(&mut info.cpus, &mut info.cpu_count, cpu, &mut info.problem);
        }
        1 => {
            let (Some(&id), Some(address), Some(gsi_base)) =
                (e.get(2), read_u32(e, 4), read_u32(e, 8))
            else {
                return false;
            };
            push(
                &mut info.ioapics,
                &mut info.ioapic_count,
                IoApic {
                    id,
                    address,
                    gsi_base,
                },
                &mut info.problem,
            );
        }
        2 => {
            let (Some(&isa_irq), Some(gsi), Some(flags)) =
                (e.get(3), read_u32(e, 4), read_u16(e, 8))
            else {
                return false;
            };
            let o = InterruptOverride {
                isa_irq,
                gsi,
                flags,
            };
            push(
                &mut info.overrides,
                &mut info.override_count,
                o,
                &mut info.problem,
            );
        }
        _ => {} // other entry types are not needed (yet)
    }
    true
}

fn push<T: Copy>(slots: &mut [T], count: &mut usize, value: T, problem: &mut Option<MadtProblem>) {
    match slots.get_mut(*count) {
        Some(slot) => {
            *slot = value;
            *count += 1;
        }
        None => *problem = Some(MadtProblem::Overflow),
    }
}

/// One PCI Express enhanced configuration space (ECAM) window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EcamRegion {
    pub base: u64,
    pub segment: u16,
    pub bus_start: u8,
    pub bus_end: u8,
}

/// Decodes the MCFG's ECAM windows (up to [`MAX_ECAM_REGIONS`]); a partial
/// trailing entry is ignored.
pub fn parse_mcfg(bytes: &[u8]) -> ([EcamRegion; MAX_ECAM_REGIONS], usize) {
    let mut regions = [EcamRegion::default(); MAX_ECAM_REGIONS];
    let mut count = 0;
    let declared = read_u32(bytes, 4).map_or(0, |l| l as usize);
    let bytes = &bytes[..declared.min(bytes.len())];
    let mut offset = MCFG_ENTRIES_OFFSET;
    while count < MAX_ECAM_REGIONS {
        let (Some(base), Some(segment), Some(&bus_start), Some(&bus_end)) = (
            read_u64(bytes, offset),
            read_u16(bytes, offset + 8),
            bytes.get(offset + 10),
            bytes.get(offset + 11),
        ) else {
            break;
        };
        if offset + MCFG_ENTRY_LEN > bytes.len() {
            break;
        }
        regions[count] = EcamRegion {
            base,
            segment,
            bus_start,
            bus_end,
        };
        count += 1;
        offset += MCFG_ENTRY_LEN;
    }
    (regions, count)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn table(signature: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(signature);
        t.extend_from_slice(&((SDT_HEADER_LEN + body.len()) as u32).to_le_bytes());
        t.resize(SDT_HEADER_LEN, 0);
        t.extend_from_slice(body);
        t
    }

    /// The MADT's fields after the SDT header: LAPIC address and `flags`.
    fn madt_body(flags: u32) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&0xfee0_0000u32.to_le_bytes());
        body.extend_from_slice(&flags.to_le_bytes());
        body
    }

    fn push_override(body: &mut Vec<u8>, irq: u8, gsi: u32, flags: u16) {
        body.extend_from_slice(&[2, 10, 0, irq]);
        body.extend_from_slice(&gsi.to_le_bytes());
        body.extend_from_slice(&flags.to_le_bytes());
    }

    fn qemu_like_madt() -> Vec<u8> {
        let mut body = madt_body(1);
        for (uid, apic, enabled) in [(0u8, 0u8, 1u32), (1, 1, 1), (2, 2, 0)] {
            body.extend_from_slice(&[0, 8, uid, apic]);
            body.extend_from_slice(&enabled.to_le_bytes());
        }
        body.extend_from_slice(&[1, 12, 0, 0]);
        body.extend_from_slice(&0xfec0_0000u32.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        push_override(&mut body, 0, 2, 0);
        body.extend_from_slice(&[4, 6, 0xff, 0, 0, 1]); // local APIC NMI: ignored
        table(b"APIC", &body)
    }

    #[test]
    fn madt_from_qemu_like_table() {
        let info = parse_madt(&qemu_like_madt());
        assert_eq!(info.problem, None);
        assert_eq!(info.local_apic_address, 0xfee0_0000);
        assert!(info.has_8259);
        assert_eq!(info.cpus().len(), 3);
        assert_eq!(info.enabled_cpus().count(), 2);
        assert_eq!(
            info.ioapics(),
            &[IoApic {
                id: 0,
                address: 0xfec0_0000,
                gsi_base: 0
            }]
        );
        assert_eq!(
            info.overrides(),
            &[InterruptOverride {
                isa_irq: 0,
                gsi: 2,
                flags: 0
            }]
        );
    }

    #[test]
    fn madt_override_flags_and_truncated_override() {
        let mut body = madt_body(0);
        // IRQ 9 → GSI 9, level, active high (QEMU's SCI).
        push_override(&mut body, 9, 9, 0xd);
        // An override entry whose length leaves out the flags.
        body.extend_from_slice(&[2, 8, 0, 10]);
        body.extend_from_slice(&10u32.to_le_bytes());
        let info = parse_madt(&table(b"APIC", &body));
        assert_eq!(
            info.overrides(),
            &[InterruptOverride {
                isa_irq: 9,
                gsi: 9,
                flags: 0xd
            }]
        );
        assert_eq!(
            info.problem,
            Some(MadtProblem::BadEntry {
                offset: MADT_ENTRIES_OFFSET + 10
            })
        );
    }

    #[test]
    fn madt_too_many_overrides_is_reported() {
        let mut body = madt_body(0);
        for i in 0..(MAX_OVERRIDES + 1) {
            push_override(&mut body, i as u8, i as u32, 0);
        }
        let info = parse_madt(&table(b"APIC", &body));
        assert_eq!(info.overrides().len(), MAX_OVERRIDES);
        assert_eq!(info.problem, Some(MadtProblem::Overflow));
    }

    #[test]
    fn madt_zero_length_entry_stops_the_walk() {
        let mut t = qemu_like_madt();
        t.extend_from_slice(&[0, 0]);
        let len = t.len() as u32;
        t[4..8].copy_from_slice(&len.to_le_bytes());
        let info = parse_madt(&t);
        assert_eq!(info.cpus().len(), 3);
        assert!(matches!(info.problem, Some(MadtProblem::BadEntry { .. })));
    }

    #[test]
    fn madt_entry_running_past_the_end_is_refused() {
        let mut t = qemu_like_madt();
        t.extend_from_slice(&[0, 200, 1, 1]);
        let len = t.len() as u32;
        t[4..8].copy_from_slice(&len.to_le_bytes());
        let info = parse_madt(&t);
        assert_eq!(info.cpus().len(), 3);
        assert!(matches!(info.problem, Some(MadtProblem::BadEntry { .. })));
    }

    #[test]
    fn madt_shorter_than_header_or_length_field_lies() {
        assert_eq!(parse_madt(&[0; 10]).problem, Some(MadtProblem::TooShort));
        let mut t = qemu_like_madt();
        t[4..8].copy_from_slice(&u32::MAX.to_le_bytes()); // claims 4 GiB
        let info = parse_madt(&t);
        assert_eq!(info.cpus().len(), 3, "only the bytes present are read");
    }

    #[test]
    fn madt_too_many_cpus_is_reported() {
        let mut body = madt_body(0);
        for i in 0..(MAX_CPUS + 3) {
            body.extend_from_slice(&[0, 8, i as u8, i as u8, 1, 0, 0, 0]);
        }
        let info = parse_madt(&table(b"APIC", &body));
        assert_eq!(info.cpus().len(), MAX_CPUS);
        assert_eq!(info.problem, Some(MadtProblem::Overflow));
    }

    #[test]
    fn madt_x2apic_entries() {
        let mut body = madt_body(0);
        body.extend_from_slice(&[9, 16, 0, 0]);
        body.extend_from_slice(&300u32.to_le_bytes());
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&7u32.to_le_bytes());
        let info = parse_madt(&table(b"APIC", &body));
        assert_eq!(
            info.cpus(),
            &[Cpu {
                apic_id: 300,
                processor_uid: 7,
                enabled: true
            }]
        );
    }

    #[test]
    fn mcfg_regions_and_truncated_entry() {
        let mut body = std::vec![0u8; 8];
        body.extend_from_slice(&0xb000_0000u64.to_le_bytes());
        body.extend_from_slice(&[0, 0, 0, 0xff, 0, 0, 0, 0]);
        body.extend_from_slice(&[1, 2, 3]); // truncated second entry
        let (regions, count) = parse_mcfg(&table(b"MCFG", &body));
        assert_eq!(count, 1);
        assert_eq!(
            regions[0],
            EcamRegion {
                base: 0xb000_0000,
                segment: 0,
                bus_start: 0,
                bus_end: 0xff
            }
        );
    }
}
