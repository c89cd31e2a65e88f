//! ACPI discovery: which CPUs and interrupt controllers the machine has, where
//! PCI configuration space is, and how to power off.
//!
//! The `acpi` crate finds the RSDP and the tables and checks their checksums;
//! `kcore::acpi` decodes the entries defensively. Tables are read through the
//! direct map (mapping on demand any table outside the firmware memory map).

use core::ptr::NonNull;

use acpi::{
    fadt::Fadt, madt::Madt, mcfg::Mcfg, AcpiHandler, AcpiTable, AcpiTables, PhysicalMapping,
};
use kcore::acpi::{parse_madt, parse_mcfg, EcamRegion, MadtInfo, MAX_ECAM_REGIONS};
use spin::Once;

use crate::arch::cpu;
use crate::{kprintln, mm};

#[derive(Clone, Copy)]
struct DirectMapHandler;

impl AcpiHandler for DirectMapHandler {
    unsafe fn map_physical_region<T>(
        &self,
        physical_address: usize,
        size: usize,
    ) -> PhysicalMapping<Self, T> {
        let phys = physical_address as u64;
        let virt = match mm::map_firmware(phys, size as u64) {
            Ok(v) => v,
            // Nothing sensible can be returned; the crate's contract has no
            // error path. Firmware tables are always mappable unless memory
            // is exhausted at boot, which is fatal anyway.
            Err(e) => panic!("cannot map ACPI table at {phys:#x}: {e}"),
        };
        // SAFETY: map_firmware made [phys, phys+size) readable at virt, which
        // is non-null (it lies in the kernel half).
        unsafe {
            PhysicalMapping::new(
                physical_address,
                NonNull::new_unchecked(virt as *mut T),
                size,
                size,
                *self,
            )
        }
    }

    fn unmap_physical_region<T>(_region: &PhysicalMapping<Self, T>) {
        // The direct map is permanent.
    }
}

/// What the kernel learned from ACPI at boot.
pub struct Platform {
    pub madt: Option<MadtInfo>,
    ecam: [EcamRegion; MAX_ECAM_REGIONS],
    ecam_count: usize,
    pm1a_control_port: Option<u16>,
    /// Where the RSDP was found (0: searched in the BIOS areas).
    pub rsdp: u64,
}

impl Platform {
    pub fn ecam_regions(&self) -> &[EcamRegion] {
        &self.ecam[..self.ecam_count]
    }
    /// CPUs the firmware says are enabled (1 when there is no MADT).
    pub fn cpu_count(&self) -> usize {
        self.madt
            .as_ref()
            .map_or(1, |m| m.enabled_cpus().count().max(1))
    }
}

static PLATFORM: Once<Platform> = Once::new();

#[derive(Debug)]
pub enum AcpiInitError {
    Tables(acpi::AcpiError),
}

impl core::fmt::Display for AcpiInitError {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        match self {
            Self::Tables(e) => write!(f, "ACPI tables unusable: {e:?}"),
        }
    }
}

/// Reads the tables. `rsdp` comes from the boot loader; without it the BIOS
/// areas are searched.
pub fn init(rsdp: Option<u64>) -> Result<&'static Platform, AcpiInitError> {
    // SAFETY: the address comes from the boot loader (or the BIOS search),
    // and the handler maps whatever physical range the crate asks for.
    let tables = unsafe {
        match rsdp {
            Some(address) => AcpiTables::from_rsdp(DirectMapHandler, address as usize),
            None => AcpiTables::search_for_rsdp_bios(DirectMapHandler),
        }
    }
    .map_err(AcpiInitError::Tables)?;

    let madt = tables
        .find_table::<Madt>()
        .ok()
        .map(|m| parse_madt(table_bytes(&m)));
    if let Some(problem) = madt.as_ref().and_then(|m| m.problem) {
        kprintln!("warning: MADT: {problem:?}; using the entries before the problem");
    }
    let (ecam, ecam_count) = match tables.find_table::<Mcfg>() {
        Ok(m) => parse_mcfg(table_bytes(&m)),
        Err(_) => ([EcamRegion::default(); MAX_ECAM_REGIONS], 0),
    };
    let pm1a_control_port = tables.find_table::<Fadt>().ok().and_then(|fadt| {
        let block = fadt.pm1a_control_block().ok()?;
        matches!(block.address_space, acpi::address::AddressSpace::SystemIo)
            .then_some(block.address)
            .and_then(|a| u16::try_from(a).ok())
    });
    let rsdp = rsdp.unwrap_or(0);
    Ok(PLATFORM.call_once(|| Platform {
        madt,
        ecam,
        ecam_count,
        pm1a_control_port,
        rsdp,
    }))
}

/// What [`init`] found, once it has run successfully.
pub fn platform() -> Option<&'static Platform> {
    PLATFORM.get()
}

/// The bytes of a mapped table, as long as its header says (the crate has
/// already checked that length and checksum when it found the table).
fn table_bytes<T: AcpiTable>(mapping: &PhysicalMapping<DirectMapHandler, T>) -> &[u8] {
    let len = mapping.get().header().length as usize;
    // Make sure the whole table, not only its header, is mapped.
    if mm::map_firmware(mapping.physical_start() as u64, len as u64).is_err() {
        return &[];
    }
    // SAFETY: the table's `len` bytes are mapped (above) and stay mapped for
    // as long as the mapping, to whose lifetime the slice is tied.
    unsafe { core::slice::from_raw_parts(mapping.virtual_start().as_ptr() as *const u8, len) }
}

/// ACPI soft-off (S5) through PM1a_CNT. SLP_TYP for S5 is 0 on QEMU's q35
/// and i440fx; real firmware may need the value from the DSDT's `\_S5`
/// package, which needs an AML interpreter this kernel does not have.
pub fn power_off() {
    let Some(port) = PLATFORM.get().and_then(|p| p.pm1a_control_port) else {
        return;
    };
    const SLP_EN: u16 = 1 << 13;
    // SAFETY: writing SLP_TYP|SLP_EN to PM1a_CNT requests soft-off; the
    // machine is being shut down anyway.
    unsafe { cpu::outw(port, SLP_EN) }
}
