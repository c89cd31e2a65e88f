//! The PVH boot protocol's start-info structure (Xen `hvm_start_info`).
//!
//! QEMU's `-kernel` loader passes its physical address in %ebx. Everything
//! the kernel needs from it (memory map, command line, RSDP address, boot
//! modules) is copied out here, before the physical allocator starts handing
//! out the memory it lives in. The structure comes from the loader, but the
//! kernel still checks it: a bad magic, an absurd entry count or an
//! unterminated string is a clear boot error, not a wild read.

use core::fmt;

use kcore::phys::{MemoryMap, MemoryMapError, PhysRange};

use crate::mm;

const START_INFO_MAGIC: u32 = 0x336e_c578;
const MAX_MEMMAP_ENTRIES: u32 = 1024;
const MAX_MODULES: usize = 8;
const CMDLINE_CAPACITY: usize = 1024;

#[derive(Clone, Copy)]
#[repr(C)]
struct StartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
    memmap_paddr: u64,
    memmap_entries: u32,
    reserved: u32,
}

#[derive(Clone, Copy)]
#[repr(C)]
struct ModlistEntry {
    paddr: u64,
    size: u64,
    cmdline_paddr: u64,
    reserved: u64,
}

#[derive(Clone, Copy)]
#[repr(C)]
struct MemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

#[derive(Debug)]
pub enum BootInfoError {
    BadMagic(u32),
    NoMemoryMap { version: u32 },
    TooManyMemoryMapEntries(u32),
    MemoryMap(MemoryMapError),
}

impl fmt::Display for BootInfoError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::BadMagic(m) => write!(f, "PVH start info has bad magic {m:#x} (expected {START_INFO_MAGIC:#x}); was this kernel booted through PVH?"),
            Self::NoMemoryMap { version } => write!(f, "PVH start info version {version} carries no memory map (need version 1)"),
            Self::TooManyMemoryMapEntries(n) => write!(f, "PVH memory map claims {n} entries (limit {MAX_MEMMAP_ENTRIES})"),
            Self::MemoryMap(e) => write!(f, "boot memory map rejected: {e}"),
        }
    }
}

/// What the kernel keeps from the boot loader.
pub struct BootInfo {
    pub memory_map: MemoryMap,
    cmdline: [u8; CMDLINE_CAPACITY],
    cmdline_len: usize,
    pub cmdline_truncated: bool,
    pub rsdp: Option<u64>,
    modules: [PhysRange; MAX_MODULES],
    module_count: usize,
    pub modules_dropped: usize,
}

impl BootInfo {
    pub fn cmdline(&self) -> &str {
        core::str::from_utf8(&self.cmdline[..self.cmdline_len]).unwrap_or("")
    }

    pub fn modules(&self) -> &[PhysRange] {
        &self.modules[..self.module_count]
    }
}

/// Reads a `T` from low physical memory through the boot direct map.
fn read_phys<T: Copy>(phys: u64) -> T {
    // SAFETY: the boot page tables direct-map all of the low 4 GiB, where
    // the PVH loader places its structures; read_unaligned tolerates any
    // alignment, and T is plain old data.
    unsafe { core::ptr::read_unaligned(mm::phys_to_virt(phys) as *const T) }
}

/// Copies the start info at `start_info_phys` into a [`BootInfo`].
pub fn parse(start_info_phys: u64) -> Result<BootInfo, BootInfoError> {
    let info: StartInfo = read_phys(start_info_phys);
    if info.magic != START_INFO_MAGIC {
        return Err(BootInfoError::BadMagic(info.magic));
    }
    if info.version < 1 || info.memmap_paddr == 0 {
        return Err(BootInfoError::NoMemoryMap {
            version: info.version,
        });
    }
    if info.memmap_entries > MAX_MEMMAP_ENTRIES {
        return Err(BootInfoError::TooManyMemoryMapEntries(info.memmap_entries));
    }
    let entries = (0..u64::from(info.memmap_entries)).map(|i| {
        let e: MemmapEntry =
            read_phys(info.memmap_paddr + i * core::mem::size_of::<MemmapEntry>() as u64);
        (e.addr, e.size, e.kind)
    });
    let memory_map = MemoryMap::from_e820(entries).map_err(BootInfoError::MemoryMap)?;

    let mut boot = BootInfo {
        memory_map,
        cmdline: [0; CMDLINE_CAPACITY],
        cmdline_len: 0,
        cmdline_truncated: false,
        rsdp: (info.rsdp_paddr != 0).then_some(info.rsdp_paddr),
        modules: [PhysRange { start: 0, end: 0 }; MAX_MODULES],
        module_count: 0,
        modules_dropped: 0,
    };
    if info.cmdline_paddr != 0 {
        copy_cmdline(info.cmdline_paddr, &mut boot);
    }
    for i in 0..u64::from(info.nr_modules) {
        let m: ModlistEntry =
            read_phys(info.modlist_paddr + i * core::mem::size_of::<ModlistEntry>() as u64);
        let Some(end) = m.paddr.checked_add(m.size) else {
            boot.modules_dropped += 1;
            continue;
        };
        if boot.module_count == MAX_MODULES {
            boot.modules_dropped += 1;
            continue;
        }
        boot.modules[boot.module_count] = PhysRange {
            start: m.paddr,
            end,
        };
        boot.module_count += 1;
    }
    Ok(boot)
}

fn copy_cmdline(phys: u64, boot: &mut BootInfo) {
    let mut len = 0;
    while len < CMDLINE_CAPACITY {
        let byte: u8 = read_phys(phys + len as u64);
        if byte == 0 {
            break;
        }
        // Keep the command line valid UTF-8 by replacing non-ASCII bytes.
        boot.cmdline[len] = if byte.is_ascii() { byte } else { b'?' };
        len += 1;
    }
    if len == CMDLINE_CAPACITY {
        boot.cmdline_truncated = read_phys::<u8>(phys + len as u64) != 0;
    }
    boot.cmdline_len = len;
}
