//! x86_64 4-level page tables as pure logic over an abstract table memory.
//!
//! The kernel implements [`TableMemory`] over its direct map; tests implement
//! it with a hash map. Nothing here touches CR3 or the TLB: after `unmap` or
//! any change to an existing mapping the caller must invalidate the TLB (and
//! shoot down other CPUs); `map` only fills empty slots, which needs no flush.
//!
//! Invariants of tables built here:
//! - Intermediate entries are present + writable, plus user when any mapping
//!   below is user, and never no-execute: permissions live in the leaf, so
//!   the leaf alone says what a mapping allows.
//! - No empty intermediate table stays linked: `map` unlinks and frees what
//!   it allocated when it fails, `unmap` frees tables it empties. The root
//!   (PML4) is never freed. Tables handed to `free_table` are all zero.
//! - Leaves carry their cache attribute through the PAT layout programmed by
//!   the kernel ([`PAT_MSR_VALUE`]); the PAT selector bit is bit 7 in 4 KiB
//!   leaves and bit 12 in 2 MiB / 1 GiB leaves, where bit 7 means "huge".
//!
//! Caveat for the kernel: if upper-half PDPTs are shared between address
//! spaces, unmapping the last kernel mapping under one of them frees it for
//! everyone; pre-populate kernel PML4 entries with tables that always hold a
//! mapping, or never unmap through a non-owning address space.

use core::fmt;

pub mod bits {
    //! Bits of an x86_64 page-table entry (Intel SDM vol. 3, 4.5). The same
    //! bit 7 means "PAT" in a 4 KiB leaf and "huge page" (PS) in a PDPT or
    //! PD entry; a huge leaf's PAT bit moves to bit 12, which is why
    //! [`ADDR_MASK`] alone does not give a huge leaf's frame address.

    pub const PRESENT: u64 = 1 << 0;
    pub const WRITABLE: u64 = 1 << 1;
    pub const USER: u64 = 1 << 2;
    pub const WRITE_THROUGH: u64 = 1 << 3;
    pub const CACHE_DISABLE: u64 = 1 << 4;
    pub const ACCESSED: u64 = 1 << 5;
    pub const DIRTY: u64 = 1 << 6;
    /// PS: this PDPT/PD entry maps a 1 GiB/2 MiB page instead of a table.
    pub const HUGE: u64 = 1 << 7;
    /// PAT selector of a 4 KiB leaf.
    pub const PAT_4K: u64 = 1 << 7;
    pub const GLOBAL: u64 = 1 << 8;
    /// PAT selector of a 2 MiB or 1 GiB leaf.
    pub const PAT_HUGE: u64 = 1 << 12;
    /// Requires EFER.NXE; without it this bit is reserved and faults.
    pub const NO_EXECUTE: u64 = 1 << 63;
    /// Physical address bits 12..=51 of an entry.
    pub const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;
}

use bits::*;

/// The IA32_PAT value the kernel programs (Linux's layout): PA0=WB, PA1=WC,
/// PA2=UC-, PA3=UC, PA4=WB, PA5=WP, PA6=UC-, PA7=WT. Entries of
/// [`CacheAttr`] select from it; a CPU with a different PAT would make every
/// cache attribute here wrong.
pub const PAT_MSR_VALUE: u64 = 0x0407_0506_0007_0106;

/// Entries per table at every level.
pub const ENTRIES: usize = 512;

/// Physical addresses are at most 52 bits on x86_64.
const PHYS_LIMIT: u64 = 1 << 52;

/// Levels counted from the leaf: 1 = PT, 2 = PD, 3 = PDPT, 4 = PML4.
const ROOT_LEVEL: u8 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageSize {
    Size4K,
    Size2M,
    Size1G,
}

impl PageSize {
    pub const fn bytes(self) -> u64 {
        match self {
            PageSize::Size4K => 1 << 12,
            PageSize::Size2M => 1 << 21,
            PageSize::Size1G => 1 << 30,
        }
    }

    /// The table level whose entries map pages of this size.
    const fn leaf_level(self) -> u8 {
        match self {
            PageSize::Size4K => 1,
            PageSize::Size2M => 2,
            PageSize::Size1G => 3,
        }
    }

    /// The page size a leaf at `level` maps (`None` for the PML4).
    const fn at_level(level: u8) -> Option<Self> {
        match level {
            1 => Some(PageSize::Size4K),
            2 => Some(PageSize::Size2M),
            3 => Some(PageSize::Size1G),
            _ => None,
        }
    }

    const fn pat_bit(self) -> u64 {
        match self {
            PageSize::Size4K => PAT_4K,
            PageSize::Size2M | PageSize::Size1G => PAT_HUGE,
        }
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PageSize::Size4K => "4 KiB",
            PageSize::Size2M => "2 MiB",
            PageSize::Size1G => "1 GiB",
        })
    }
}

/// Memory type of a mapping, as selected through [`PAT_MSR_VALUE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheAttr {
    /// Normal RAM.
    WriteBack,
    /// Frame buffers and other write-streaming device memory.
    WriteCombining,
    /// Strong uncached: MMIO registers, DMA buffers on non-coherent paths.
    Uncached,
    /// Uncached, but an MTRR saying WC may override it.
    UncachedMinus,
    WriteThrough,
    /// Not asked for by the kernel, but PA5 holds it, so decoding an entry
    /// always yields a value.
    WriteProtected,
}

impl CacheAttr {
    pub const ALL: [CacheAttr; 6] = [
        CacheAttr::WriteBack,
        CacheAttr::WriteCombining,
        CacheAttr::Uncached,
        CacheAttr::UncachedMinus,
        CacheAttr::WriteThrough,
        CacheAttr::WriteProtected,
    ];

    /// What each PAT index selects with [`PAT_MSR_VALUE`] programmed.
    const BY_PAT_INDEX: [CacheAttr; 8] = [
        CacheAttr::WriteBack,
        CacheAttr::WriteCombining,
        CacheAttr::UncachedMinus,
        CacheAttr::Uncached,
        CacheAttr::WriteBack,
        CacheAttr::WriteProtected,
        CacheAttr::UncachedMinus,
        CacheAttr::WriteThrough,
    ];

    /// The PAT index (PAT:PCD:PWT) that selects this type; the lowest one
    /// where two indices hold the same type, so common types need no PAT bit.
    pub const fn pat_index(self) -> u8 {
        match self {
            CacheAttr::WriteBack => 0,
            CacheAttr::WriteCombining => 1,
            CacheAttr::UncachedMinus => 2,
            CacheAttr::Uncached => 3,
            CacheAttr::WriteProtected => 5,
            CacheAttr::WriteThrough => 7,
        }
    }

    /// The architectural memory-type encoding (as stored in a PAT byte).
    pub const fn memory_type(self) -> u8 {
        match self {
            CacheAttr::Uncached => 0x00,
            CacheAttr::WriteCombining => 0x01,
            CacheAttr::WriteThrough => 0x04,
            CacheAttr::WriteProtected => 0x05,
            CacheAttr::WriteBack => 0x06,
            CacheAttr::UncachedMinus => 0x07,
        }
    }

    /// The PWT/PCD/PAT bits of a leaf of `size` selecting this type.
    pub const fn entry_bits(self, size: PageSize) -> u64 {
        let index = self.pat_index();
        let mut bits = 0;
        if index & 1 != 0 {
            bits |= WRITE_THROUGH;
        }
        if index & 2 != 0 {
            bits |= CACHE_DISABLE;
        }
        if index & 4 != 0 {
            bits |= size.pat_bit();
        }
        bits
    }

    /// Decodes the type of a leaf `entry` of `size`.
    pub const fn from_entry(entry: u64, size: PageSize) -> CacheAttr {
        let mut index = 0;
        if entry & WRITE_THROUGH != 0 {
            index |= 1;
        }
        if entry & CACHE_DISABLE != 0 {
            index |= 2;
        }
        if entry & size.pat_bit() != 0 {
            index |= 4;
        }
        Self::BY_PAT_INDEX[index]
    }
}

/// Access rights of a mapping. Not executable sets NX in the leaf.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MapFlags {
    pub writable: bool,
    pub user: bool,
    pub executable: bool,
    /// Survives CR3 switches (kernel mappings only; needs CR4.PGE).
    pub global: bool,
}

impl MapFlags {
    pub const KERNEL_RO: MapFlags = MapFlags {
        writable: false,
        user: false,
        executable: false,
        global: true,
    };
    pub const KERNEL_RW: MapFlags = MapFlags {
        writable: true,
        ..Self::KERNEL_RO
    };
    pub const KERNEL_RX: MapFlags = MapFlags {
        executable: true,
        ..Self::KERNEL_RO
    };
    pub const USER_RO: MapFlags = MapFlags {
        writable: false,
        user: true,
        executable: false,
        global: false,
    };
    pub const USER_RW: MapFlags = MapFlags {
        writable: true,
        ..Self::USER_RO
    };
    pub const USER_RX: MapFlags = MapFlags {
        executable: true,
        ..Self::USER_RO
    };
}

/// Access to page-table frames. The kernel implements it over its direct
/// map. `table_phys` is always a value `alloc_table` returned (or the root),
/// and `index < ENTRIES`.
pub trait TableMemory {
    fn read_entry(&self, table_phys: u64, index: usize) -> u64;
    fn write_entry(&mut self, table_phys: u64, index: usize, value: u64);
    /// A zeroed, 4 KiB-aligned frame, or `None` when out of memory.
    fn alloc_table(&mut self) -> Option<u64>;
    /// Takes back a table that is all zero again.
    fn free_table(&mut self, phys: u64);
}

/// What a virtual address maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// The physical address of the virtual address itself (offset included).
    pub phys: u64,
    pub size: PageSize,
    /// Effective rights: writable/user only if every level allows them,
    /// executable only if no level sets NX; global as in the leaf.
    pub flags: MapFlags,
    pub cache: CacheAttr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// `virt` or `phys` is not a multiple of the page size.
    Misaligned {
        virt: u64,
        phys: u64,
        size: PageSize,
    },
    /// `map_range` length not a multiple of 4 KiB.
    LengthMisaligned { len: u64 },
    /// Bits 63..=47 of `virt` are not all equal (or the range crosses the
    /// non-canonical hole).
    NonCanonical { virt: u64 },
    /// The frame does not fit in the 52-bit physical address space.
    PhysOutOfRange { phys: u64 },
    /// `virt + len` or `phys + len` overflows.
    RangeOverflow { virt: u64, phys: u64, len: u64 },
    /// A leaf (or, for a huge page, a lower-level table) already occupies
    /// the slot for `virt`.
    AlreadyMapped { virt: u64 },
    /// A huge page of `size` at a higher level covers `virt`.
    HugePageInTheWay { virt: u64, size: PageSize },
    /// `alloc_table` returned `None`; nothing was changed.
    OutOfTableMemory,
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::Misaligned { virt, phys, size } => write!(
                f,
                "cannot map {virt:#x} -> {phys:#x}: not aligned to the {size} page size"
            ),
            MapError::LengthMisaligned { len } => {
                write!(f, "length {len:#x} is not a multiple of 4 KiB")
            }
            MapError::NonCanonical { virt } => write!(
                f,
                "virtual address {virt:#x} is not canonical (bits 63..47 must be equal)"
            ),
            MapError::PhysOutOfRange { phys } => write!(
                f,
                "physical address {phys:#x} is beyond the 52-bit physical address space"
            ),
            MapError::RangeOverflow { virt, phys, len } => write!(
                f,
                "range {virt:#x} -> {phys:#x} of length {len:#x} runs past the end of the address space"
            ),
            MapError::AlreadyMapped { virt } => write!(f, "{virt:#x} is already mapped"),
            MapError::HugePageInTheWay { virt, size } => {
                write!(f, "{virt:#x} lies inside an existing {size} page")
            }
            MapError::OutOfTableMemory => f.write_str("out of memory for page tables"),
        }
    }
}

impl core::error::Error for MapError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnmapError {
    NonCanonical {
        virt: u64,
    },
    NotMapped {
        virt: u64,
    },
    /// `virt` is inside a page of `size` that starts at `page_start`; pages
    /// are unmapped whole, never split.
    NotPageStart {
        virt: u64,
        page_start: u64,
        size: PageSize,
    },
}

impl fmt::Display for UnmapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnmapError::NonCanonical { virt } => write!(
                f,
                "virtual address {virt:#x} is not canonical (bits 63..47 must be equal)"
            ),
            UnmapError::NotMapped { virt } => write!(f, "{virt:#x} is not mapped"),
            UnmapError::NotPageStart {
                virt,
                page_start,
                size,
            } => write!(
                f,
                "{virt:#x} is inside the {size} page at {page_start:#x}; unmap it from its start"
            ),
        }
    }
}

impl core::error::Error for UnmapError {}

/// Whether `virt` is canonical for 4-level paging (48-bit virtual space).
pub const fn is_canonical(virt: u64) -> bool {
    (((virt << 16) as i64) >> 16) as u64 == virt
}

const fn index(virt: u64, level: u8) -> usize {
    ((virt >> (12 + 9 * (level as u32 - 1))) & 0x1ff) as usize
}

/// The leaf entry mapping `phys` with the given rights and cache type.
/// `phys` must be aligned to `size` and below 2^52 (`map` checks both).
pub const fn leaf_entry(phys: u64, size: PageSize, flags: MapFlags, cache: CacheAttr) -> u64 {
    let mut e = (phys & ADDR_MASK) | PRESENT | cache.entry_bits(size);
    if !matches!(size, PageSize::Size4K) {
        e |= HUGE;
    }
    if flags.writable {
        e |= WRITABLE;
    }
    if flags.user {
        e |= USER;
    }
    if flags.global {
        e |= GLOBAL;
    }
    if !flags.executable {
        e |= NO_EXECUTE;
    }
    e
}

/// [`PageTable::walk`] for entry `index` of the table at `table` (on
/// `level`), whose addresses start at `base`, with the rights the path
/// above allows.
fn walk_entry<M: TableMemory + ?Sized>(
    mem: &M,
    table: u64,
    index: usize,
    level: u8,
    base: u64,
    above: MapFlags,
    f: &mut dyn FnMut(u64, Translation),
) {
    let entry = mem.read_entry(table, index);
    if entry & PRESENT == 0 {
        return;
    }
    let mut virt = base | (index as u64) << (12 + 9 * (u32::from(level) - 1));
    if virt & (1 << 47) != 0 {
        virt |= 0xffff_0000_0000_0000;
    }
    let flags = MapFlags {
        writable: above.writable && entry & WRITABLE != 0,
        user: above.user && entry & USER != 0,
        executable: above.executable && entry & NO_EXECUTE == 0,
        global: entry & GLOBAL != 0,
    };
    match PageSize::at_level(level) {
        Some(size) if level == 1 || entry & HUGE != 0 => f(
            virt,
            Translation {
                phys: entry & ADDR_MASK & !(size.bytes() - 1),
                size,
                flags,
                cache: CacheAttr::from_entry(entry, size),
            },
        ),
        _ => {
            for i in 0..ENTRIES {
                walk_entry(mem, entry & ADDR_MASK, i, level - 1, virt, flags, f);
            }
        }
    }
}

/// A table reached while walking: where its entry lives in the parent.
#[derive(Clone, Copy)]
struct Link {
    parent: u64,
    index: usize,
    table: u64,
}

/// An address space's page tables, identified by the PML4's physical address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageTable {
    root: u64,
}

impl PageTable {
    /// Wraps an existing PML4 (e.g. the one the boot loader left in CR3).
    pub const fn new(root: u64) -> Self {
        Self { root }
    }

    /// Allocates an empty PML4.
    pub fn create<M: TableMemory + ?Sized>(mem: &mut M) -> Option<Self> {
        mem.alloc_table().map(Self::new)
    }

    /// The PML4's physical address, the value for CR3.
    pub const fn root(&self) -> u64 {
        self.root
    }

    /// Maps one page of `size` at `virt` to `phys`. On error nothing has
    /// changed: tables allocated on the way are unlinked and freed, and
    /// existing intermediate entries are only upgraded once the leaf is in.
    pub fn map<M: TableMemory + ?Sized>(
        &self,
        mem: &mut M,
        virt: u64,
        phys: u64,
        size: PageSize,
        flags: MapFlags,
        cache: CacheAttr,
    ) -> Result<(), MapError> {
        if !is_canonical(virt) {
            return Err(MapError::NonCanonical { virt });
        }
        let mask = size.bytes() - 1;
        if virt & mask != 0 || phys & mask != 0 {
            return Err(MapError::Misaligned { virt, phys, size });
        }
        if phys >= PHYS_LIMIT {
            return Err(MapError::PhysOutOfRange { phys });
        }

        // Rights the path must grant for the leaf to be the only gate.
        let grant = PRESENT | WRITABLE | if flags.user { USER } else { 0 };
        let revoke = if flags.executable { NO_EXECUTE } else { 0 };
        let mut upgrades: [Option<(u64, usize, u64)>; 3] = [None; 3];
        let mut created: [Option<Link>; 3] = [None; 3];

        let leaf_level = size.leaf_level();
        let mut table = self.root;
        let mut level = ROOT_LEVEL;
        let mut slot = 0;
        while level > leaf_level {
            let i = index(virt, level);
            let entry = mem.read_entry(table, i);
            if entry & PRESENT != 0 {
                if level < ROOT_LEVEL && entry & HUGE != 0 {
                    // Only pre-existing tables come before a huge entry, so
                    // nothing has been created yet.
                    self.undo(mem, &created);
                    let size = PageSize::at_level(level).unwrap_or(PageSize::Size1G);
                    return Err(MapError::HugePageInTheWay { virt, size });
                }
                let upgraded = (entry | grant) & !revoke;
                if upgraded != entry {
                    if let Some(u) = upgrades.get_mut(slot) {
                        *u = Some((table, i, upgraded));
                    }
                }
                table = entry & ADDR_MASK;
            } else {
                let Some(new) = mem.alloc_table() else {
                    self.undo(mem, &created);
                    return Err(MapError::OutOfTableMemory);
                };
                mem.write_entry(table, i, (new & ADDR_MASK) | grant);
                if let Some(c) = created.get_mut(slot) {
                    *c = Some(Link {
                        parent: table,
                        index: i,
                        table: new,
                    });
                }
                table = new;
            }
            slot += 1;
            level -= 1;
        }

        let i = index(virt, leaf_level);
        if mem.read_entry(table, i) & PRESENT != 0 {
            self.undo(mem, &created);
            return Err(MapError::AlreadyMapped { virt });
        }
        mem.write_entry(table, i, leaf_entry(phys, size, flags, cache));
        for (t, i, value) in upgrades.into_iter().flatten() {
            mem.write_entry(t, i, value);
        }
        Ok(())
    }

    /// Unlinks and frees tables `map` created, deepest first, so that each
    /// table is all zero when freed.
    fn undo<M: TableMemory + ?Sized>(&self, mem: &mut M, created: &[Option<Link>; 3]) {
        for link in created.iter().rev().flatten() {
            mem.write_entry(link.parent, link.index, 0);
            mem.free_table(link.table);
        }
    }

    /// Removes the page that starts at `virt` and returns its frame and size.
    /// Intermediate tables left empty are unlinked and freed. The caller
    /// flushes the TLB.
    pub fn unmap<M: TableMemory + ?Sized>(
        &self,
        mem: &mut M,
        virt: u64,
    ) -> Result<(u64, PageSize), UnmapError> {
        if !is_canonical(virt) {
            return Err(UnmapError::NonCanonical { virt });
        }
        // path[k] is the table at level 4 - k and the index used in it.
        let mut path = [(0u64, 0usize); 4];
        let mut table = self.root;
        let mut level = ROOT_LEVEL;
        let mut depth = 0;
        let (entry, size) = loop {
            let i = index(virt, level);
            if let Some(p) = path.get_mut(depth) {
                *p = (table, i);
            }
            let entry = mem.read_entry(table, i);
            if entry & PRESENT == 0 {
                return Err(UnmapError::NotMapped { virt });
            }
            match PageSize::at_level(level) {
                Some(size) if level == 1 || entry & HUGE != 0 => break (entry, size),
                _ => {}
            }
            table = entry & ADDR_MASK;
            level -= 1;
            depth += 1;
        };

        let mask = size.bytes() - 1;
        if virt & mask != 0 {
            return Err(UnmapError::NotPageStart {
                virt,
                page_start: virt & !mask,
                size,
            });
        }
        let (leaf_table, leaf_index) = path.get(depth).copied().unwrap_or_default();
        mem.write_entry(leaf_table, leaf_index, 0);

        // Free emptied tables bottom-up; path[0] is the root and stays.
        for k in (1..=depth).rev() {
            let (Some(&(t, _)), Some(&(parent, pi))) = (path.get(k), path.get(k - 1)) else {
                break;
            };
            if (0..ENTRIES).any(|i| mem.read_entry(t, i) != 0) {
                break;
            }
            mem.write_entry(parent, pi, 0);
            mem.free_table(t);
        }
        Ok((entry & ADDR_MASK & !mask, size))
    }

    /// What `virt` maps to, or `None` if unmapped or non-canonical.
    pub fn translate<M: TableMemory + ?Sized>(&self, mem: &M, virt: u64) -> Option<Translation> {
        if !is_canonical(virt) {
            return None;
        }
        let mut writable = true;
        let mut user = true;
        let mut executable = true;
        let mut table = self.root;
        let mut level = ROOT_LEVEL;
        loop {
            let entry = mem.read_entry(table, index(virt, level));
            if entry & PRESENT == 0 {
                return None;
            }
            writable &= entry & WRITABLE != 0;
            user &= entry & USER != 0;
            executable &= entry & NO_EXECUTE == 0;
            match PageSize::at_level(level) {
                Some(size) if level == 1 || entry & HUGE != 0 => {
                    let mask = size.bytes() - 1;
                    return Some(Translation {
                        phys: (entry & ADDR_MASK & !mask) | (virt & mask),
                        size,
                        flags: MapFlags {
                            writable,
                            user,
                            executable,
                            global: entry & GLOBAL != 0,
                        },
                        cache: CacheAttr::from_entry(entry, size),
                    });
                }
                _ => {}
            }
            table = entry & ADDR_MASK;
            level -= 1;
        }
    }

    /// Calls `f(virt, translation)` for every present leaf (page) of the
    /// tables whose PML4 index lies in `pml4_slots`, in address order;
    /// `virt` is the leaf's canonical start address and the translation
    /// carries the effective rights of the whole path, as [`Self::translate`]
    /// gives them. For audits (the kernel's boot check that only its text
    /// is executable); the walk reads entries only.
    pub fn walk<M: TableMemory + ?Sized>(
        &self,
        mem: &M,
        pml4_slots: core::ops::Range<usize>,
        f: &mut dyn FnMut(u64, Translation),
    ) {
        let all = MapFlags {
            writable: true,
            user: true,
            executable: true,
            global: false,
        };
        for i in pml4_slots.start..pml4_slots.end.min(ENTRIES) {
            walk_entry(mem, self.root, i, ROOT_LEVEL, 0, all, f);
        }
    }

    /// Maps `len` bytes at `virt` to `phys` with the largest pages alignment
    /// allows at each step (1 GiB only if `allow_1g`: not every CPU has
    /// them). All or nothing: on error every page this call mapped is
    /// unmapped again.
    // The arguments are exactly `map`'s plus the length and the 1 GiB switch;
    // bundling them into a struct would only move the list elsewhere.
    #[allow(clippy::too_many_arguments)]
    pub fn map_range<M: TableMemory + ?Sized>(
        &self,
        mem: &mut M,
        virt: u64,
        phys: u64,
        len: u64,
        flags: MapFlags,
        cache: CacheAttr,
        allow_1g: bool,
    ) -> Result<(), MapError> {
        let page = PageSize::Size4K.bytes();
        if !virt.is_multiple_of(page) || !phys.is_multiple_of(page) {
            return Err(MapError::Misaligned {
                virt,
                phys,
                size: PageSize::Size4K,
            });
        }
        if !len.is_multiple_of(page) {
            return Err(MapError::LengthMisaligned { len });
        }
        if len == 0 {
            return Ok(());
        }
        let overflow = MapError::RangeOverflow { virt, phys, len };
        let virt_last = virt.checked_add(len - 1).ok_or(overflow)?;
        let phys_last = phys.checked_add(len - 1).ok_or(overflow)?;
        if !is_canonical(virt) {
            return Err(MapError::NonCanonical { virt });
        }
        // Both ends canonical and in the same half means no address in
        // between is in the hole. Only a lower-half start can run into the
        // hole (an upper-half range ends at 2^64 at most), and the first
        // address it hits there is 2^47.
        if !is_canonical(virt_last) || (virt ^ virt_last) >> 63 != 0 {
            return Err(MapError::NonCanonical { virt: 1 << 47 });
        }
        if phys_last >= PHYS_LIMIT {
            // The first address of the range that is out of range.
            return Err(MapError::PhysOutOfRange {
                phys: phys.max(PHYS_LIMIT),
            });
        }

        let mut done = 0;
        while done < len {
            let size = chunk_size(virt + done, phys + done, len - done, allow_1g);
            if let Err(e) = self.map(mem, virt + done, phys + done, size, flags, cache) {
                self.unmap_chunks(mem, virt, phys, done, allow_1g);
                return Err(e);
            }
            done += size.bytes();
        }
        Ok(())
    }

    /// Undoes the first `len` bytes of a `map_range` by replaying its page
    /// size choices. Those pages were just mapped by us, so unmapping them
    /// cannot fail; there is nothing useful to do with an error here anyway.
    fn unmap_chunks<M: TableMemory + ?Sized>(
        &self,
        mem: &mut M,
        virt: u64,
        phys: u64,
        len: u64,
        allow_1g: bool,
    ) {
        let mut done = 0;
        while done < len {
            let size = chunk_size(virt + done, phys + done, len - done, allow_1g);
            let _ = self.unmap(mem, virt + done);
            done += size.bytes();
        }
    }
}

/// The largest page that fits at this point of a range: both addresses
/// aligned to it and at least that much left. Inputs are 4 KiB-aligned.
fn chunk_size(virt: u64, phys: u64, remaining: u64, allow_1g: bool) -> PageSize {
    let fits = |size: PageSize| {
        let mask = size.bytes() - 1;
        virt & mask == 0 && phys & mask == 0 && remaining >= size.bytes()
    };
    if allow_1g && fits(PageSize::Size1G) {
        PageSize::Size1G
    } else if fits(PageSize::Size2M) {
        PageSize::Size2M
    } else {
        PageSize::Size4K
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::string::ToString;
    use std::vec::Vec;
    use std::{boxed::Box, vec};

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    /// Tables in a hash map, with an allocation budget and accounting so
    /// tests can see leaks.
    struct FakeMem {
        tables: HashMap<u64, Box<[u64; ENTRIES]>>,
        next: u64,
        budget: Option<usize>,
        allocs: usize,
        frees: usize,
    }

    impl FakeMem {
        fn new() -> (Self, PageTable) {
            let mut m = FakeMem {
                tables: HashMap::new(),
                next: 0x100_0000,
                budget: None,
                allocs: 0,
                frees: 0,
            };
            let pt = PageTable::create(&mut m).unwrap();
            (m, pt)
        }
        fn live(&self) -> usize {
            self.tables.len()
        }
        fn table(&self, phys: u64) -> &[u64; ENTRIES] {
            self.tables.get(&phys).expect("not a table")
        }
        /// All leaves reachable from `root`: (virt, size).
        fn leaves(&self, root: u64) -> Vec<(u64, PageSize)> {
            let mut out = Vec::new();
            self.collect(root, 4, 0, &mut out);
            out.sort_by_key(|l| l.0);
            out
        }
        fn collect(&self, table: u64, level: u8, base: u64, out: &mut Vec<(u64, PageSize)>) {
            for (i, &e) in self.table(table).iter().enumerate() {
                if e & PRESENT == 0 {
                    continue;
                }
                let mut virt = base | (i as u64) << (12 + 9 * (level as u32 - 1));
                if virt & (1 << 47) != 0 {
                    virt |= 0xffff_0000_0000_0000;
                }
                if level == 1 || (level < 4 && e & HUGE != 0) {
                    out.push((virt, PageSize::at_level(level).unwrap()));
                } else {
                    self.collect(e & ADDR_MASK, level - 1, virt, out);
                }
            }
        }
    }

    impl TableMemory for FakeMem {
        fn read_entry(&self, table_phys: u64, index: usize) -> u64 {
            self.table(table_phys)[index]
        }
        fn write_entry(&mut self, table_phys: u64, index: usize, value: u64) {
            self.tables.get_mut(&table_phys).expect("not a table")[index] = value;
        }
        fn alloc_table(&mut self) -> Option<u64> {
            if let Some(b) = &mut self.budget {
                if *b == 0 {
                    return None;
                }
                *b -= 1;
            }
            let phys = self.next;
            self.next += 0x1000;
            self.allocs += 1;
            self.tables.insert(phys, Box::new([0; ENTRIES]));
            Some(phys)
        }
        fn free_table(&mut self, phys: u64) {
            let t = self.tables.remove(&phys).expect("freeing a non-table");
            assert!(t.iter().all(|&e| e == 0), "freed a non-empty table");
            self.frees += 1;
        }
    }

    const SIZES: [PageSize; 3] = [PageSize::Size4K, PageSize::Size2M, PageSize::Size1G];

    #[test]
    fn walk_reports_every_leaf_with_effective_rights() {
        let (mut m, pt) = FakeMem::new();
        let text = MapFlags {
            writable: false,
            user: false,
            executable: true,
            global: true,
        };
        let data = MapFlags {
            writable: true,
            executable: false,
            ..text
        };
        let user = MapFlags {
            user: true,
            global: false,
            ..data
        };
        let wb = CacheAttr::WriteBack;
        let kernel = 0xffff_ffff_8000_0000;
        pt.map(&mut m, kernel, 0x10_0000, PageSize::Size4K, text, wb)
            .unwrap();
        pt.map(
            &mut m,
            kernel + 0x1000,
            0x10_1000,
            PageSize::Size4K,
            data,
            wb,
        )
        .unwrap();
        pt.map(
            &mut m,
            0xffff_8000_0000_0000,
            0,
            PageSize::Size2M,
            data,
            CacheAttr::Uncached,
        )
        .unwrap();
        pt.map(&mut m, 0x40_0000, 0x20_0000, PageSize::Size4K, user, wb)
            .unwrap();
        let mut seen = Vec::new();
        pt.walk(&m, 256..512, &mut |virt, t| seen.push((virt, t)));
        let got: Vec<_> = seen
            .iter()
            .map(|(v, t)| (*v, t.phys, t.size, t.flags))
            .collect();
        assert_eq!(
            got,
            [
                (0xffff_8000_0000_0000, 0, PageSize::Size2M, data),
                (kernel, 0x10_0000, PageSize::Size4K, text),
                (kernel + 0x1000, 0x10_1000, PageSize::Size4K, data),
            ]
        );
        assert_eq!(seen[0].1.cache, CacheAttr::Uncached);
        // Each walked leaf agrees with translate.
        for (virt, t) in &seen {
            assert_eq!(pt.translate(&m, *virt), Some(*t));
        }
        let mut low = Vec::new();
        pt.walk(&m, 0..256, &mut |virt, t| low.push((virt, t.flags)));
        assert_eq!(low, [(0x40_0000, user)]);
        // An upper level without WRITABLE or with NX takes the right away.
        let root = pt.root();
        let i = index(kernel, 4);
        let e = m.read_entry(root, i);
        m.write_entry(root, i, (e & !WRITABLE) | NO_EXECUTE);
        let mut after = Vec::new();
        pt.walk(&m, i..i + 1, &mut |_, t| after.push(t.flags));
        assert!(after.iter().all(|f| !f.writable && !f.executable));
        assert_eq!(after.len(), 2);
    }

    #[test]
    fn pat_msr_value_matches_the_layout() {
        for (i, attr) in CacheAttr::BY_PAT_INDEX.iter().enumerate() {
            let byte = (PAT_MSR_VALUE >> (8 * i)) as u8;
            assert_eq!(byte, attr.memory_type(), "PA{i}");
        }
        for attr in CacheAttr::ALL {
            assert_eq!(CacheAttr::BY_PAT_INDEX[attr.pat_index() as usize], attr);
        }
    }

    #[test]
    fn cache_bits_per_size() {
        use CacheAttr::*;
        assert_eq!(WriteBack.entry_bits(PageSize::Size4K), 0);
        assert_eq!(WriteCombining.entry_bits(PageSize::Size4K), WRITE_THROUGH);
        assert_eq!(UncachedMinus.entry_bits(PageSize::Size2M), CACHE_DISABLE);
        assert_eq!(
            Uncached.entry_bits(PageSize::Size1G),
            CACHE_DISABLE | WRITE_THROUGH
        );
        assert_eq!(
            WriteThrough.entry_bits(PageSize::Size4K),
            PAT_4K | CACHE_DISABLE | WRITE_THROUGH
        );
        assert_eq!(
            WriteThrough.entry_bits(PageSize::Size2M),
            PAT_HUGE | CACHE_DISABLE | WRITE_THROUGH
        );
        // A huge leaf's HUGE bit (7) must not read as PAT.
        let wb_huge = leaf_entry(2 * MIB, PageSize::Size2M, MapFlags::KERNEL_RW, WriteBack);
        assert_eq!(CacheAttr::from_entry(wb_huge, PageSize::Size2M), WriteBack);
        assert_eq!(wb_huge & PAT_HUGE, 0);
    }

    #[test]
    fn every_cache_attr_round_trips_at_every_size() {
        for size in SIZES {
            for cache in CacheAttr::ALL {
                let (mut m, pt) = FakeMem::new();
                let virt = 0xffff_8000_0000_0000 + 4 * GIB;
                let phys = 8 * GIB;
                pt.map(&mut m, virt, phys, size, MapFlags::KERNEL_RW, cache)
                    .unwrap();
                let t = pt.translate(&m, virt).unwrap();
                assert_eq!(
                    (t.cache, t.size, t.phys),
                    (cache, size, phys),
                    "{cache:?} {size:?}"
                );
                assert_eq!(pt.unmap(&mut m, virt), Ok((phys, size)));
            }
        }
    }

    #[test]
    fn map_translate_unmap_each_size() {
        for size in SIZES {
            let (mut m, pt) = FakeMem::new();
            let virt = 0x40_0000_0000 + size.bytes();
            let phys = 3 * GIB;
            pt.map(
                &mut m,
                virt,
                phys,
                size,
                MapFlags::USER_RW,
                CacheAttr::WriteBack,
            )
            .unwrap();
            let expected_tables = 1 + (4 - size.leaf_level() as usize);
            assert_eq!(m.live(), expected_tables);
            for offset in [0, 0x123, size.bytes() - 1] {
                let t = pt.translate(&m, virt + offset).unwrap();
                assert_eq!(t.phys, phys + offset);
                assert_eq!(t.size, size);
                assert_eq!(t.flags, MapFlags::USER_RW);
            }
            assert_eq!(pt.translate(&m, virt + size.bytes()), None);
            assert_eq!(pt.translate(&m, virt - 1), None);
            assert_eq!(m.leaves(pt.root()), vec![(virt, size)]);
            assert_eq!(pt.unmap(&mut m, virt), Ok((phys, size)));
            assert_eq!(pt.translate(&m, virt), None);
            // Empty tables went away; only the root is left, and it is empty.
            assert_eq!(m.live(), 1);
            assert!(m.table(pt.root()).iter().all(|&e| e == 0));
            assert_eq!(pt.unmap(&mut m, virt), Err(UnmapError::NotMapped { virt }));
        }
    }

    #[test]
    fn argument_errors() {
        let (mut m, pt) = FakeMem::new();
        let kw = MapFlags::KERNEL_RW;
        let wb = CacheAttr::WriteBack;
        assert_eq!(
            pt.map(&mut m, 0x1000, 0x1000, PageSize::Size2M, kw, wb),
            Err(MapError::Misaligned {
                virt: 0x1000,
                phys: 0x1000,
                size: PageSize::Size2M
            })
        );
        assert!(matches!(
            pt.map(&mut m, 2 * MIB, 0x1000, PageSize::Size2M, kw, wb),
            Err(MapError::Misaligned { .. })
        ));
        assert!(matches!(
            pt.map(&mut m, 0x1001, 0x1000, PageSize::Size4K, kw, wb),
            Err(MapError::Misaligned { .. })
        ));
        for virt in [
            0x0000_8000_0000_0000,
            0xffff_7fff_ffff_f000,
            0x0001_0000_0000_0000,
        ] {
            assert_eq!(
                pt.map(&mut m, virt, 0, PageSize::Size4K, kw, wb),
                Err(MapError::NonCanonical { virt })
            );
            assert_eq!(
                pt.unmap(&mut m, virt),
                Err(UnmapError::NonCanonical { virt })
            );
            assert_eq!(pt.translate(&m, virt), None);
        }
        assert_eq!(
            pt.map(&mut m, 0x1000, 1 << 52, PageSize::Size4K, kw, wb),
            Err(MapError::PhysOutOfRange { phys: 1 << 52 })
        );
        assert_eq!(
            pt.map(&mut m, 0x1000, 1 << 63, PageSize::Size4K, kw, wb),
            Err(MapError::PhysOutOfRange { phys: 1 << 63 })
        );
        assert_eq!(m.live(), 1);
        assert_eq!(m.allocs, 1);
        for e in [
            MapError::OutOfTableMemory,
            MapError::LengthMisaligned { len: 1 },
            MapError::AlreadyMapped { virt: 0 },
            MapError::HugePageInTheWay {
                virt: 0,
                size: PageSize::Size1G,
            },
        ] {
            assert!(!e.to_string().is_empty());
        }
        assert!(MapError::NonCanonical {
            virt: 0x8000_0000_0000
        }
        .to_string()
        .contains("not canonical"));
    }

    #[test]
    fn double_map_and_huge_pages_in_the_way() {
        let (mut m, pt) = FakeMem::new();
        let kw = MapFlags::KERNEL_RW;
        let wb = CacheAttr::WriteBack;
        pt.map(&mut m, 0x20_0000_1000, 0x5000, PageSize::Size4K, kw, wb)
            .unwrap();
        pt.map(&mut m, 0x40_0000_0000, 0, PageSize::Size1G, kw, wb)
            .unwrap();
        pt.map(&mut m, 0x60_0020_0000, 0, PageSize::Size2M, kw, wb)
            .unwrap();
        let tables = m.live();
        let cases = [
            // Same 4K slot.
            (
                0x20_0000_1000,
                PageSize::Size4K,
                MapError::AlreadyMapped {
                    virt: 0x20_0000_1000,
                },
            ),
            // A 2M page over a PT that holds mappings.
            (
                0x20_0000_0000,
                PageSize::Size2M,
                MapError::AlreadyMapped {
                    virt: 0x20_0000_0000,
                },
            ),
            // A 1G page over a PD.
            (
                0x20_0000_0000,
                PageSize::Size1G,
                MapError::AlreadyMapped {
                    virt: 0x20_0000_0000,
                },
            ),
            (
                0x40_0000_0000,
                PageSize::Size1G,
                MapError::AlreadyMapped {
                    virt: 0x40_0000_0000,
                },
            ),
            (
                0x40_1000_0000,
                PageSize::Size2M,
                MapError::HugePageInTheWay {
                    virt: 0x40_1000_0000,
                    size: PageSize::Size1G,
                },
            ),
            (
                0x40_3fff_f000,
                PageSize::Size4K,
                MapError::HugePageInTheWay {
                    virt: 0x40_3fff_f000,
                    size: PageSize::Size1G,
                },
            ),
            (
                0x60_0030_0000,
                PageSize::Size4K,
                MapError::HugePageInTheWay {
                    virt: 0x60_0030_0000,
                    size: PageSize::Size2M,
                },
            ),
            (
                0x60_0020_0000,
                PageSize::Size2M,
                MapError::AlreadyMapped {
                    virt: 0x60_0020_0000,
                },
            ),
        ];
        for (virt, size, want) in cases {
            let flags = MapFlags::USER_RX;
            assert_eq!(
                pt.map(&mut m, virt, 0, size, flags, wb),
                Err(want),
                "{virt:#x} {size:?}"
            );
            assert_eq!(m.live(), tables);
        }
        // Failed user mappings upgraded no intermediate entry.
        assert!(m.table(pt.root()).iter().all(|&e| e & USER == 0));
        // The 4K mapping is intact.
        assert_eq!(pt.translate(&m, 0x20_0000_1abc).unwrap().phys, 0x5abc);
    }

    #[test]
    fn unmap_inside_huge_page_is_refused() {
        let (mut m, pt) = FakeMem::new();
        let wb = CacheAttr::WriteBack;
        pt.map(&mut m, GIB, 0, PageSize::Size1G, MapFlags::KERNEL_RW, wb)
            .unwrap();
        pt.map(
            &mut m,
            2 * GIB,
            0,
            PageSize::Size2M,
            MapFlags::KERNEL_RW,
            wb,
        )
        .unwrap();
        pt.map(
            &mut m,
            3 * GIB,
            0,
            PageSize::Size4K,
            MapFlags::KERNEL_RW,
            wb,
        )
        .unwrap();
        assert_eq!(
            pt.unmap(&mut m, GIB + 2 * MIB),
            Err(UnmapError::NotPageStart {
                virt: GIB + 2 * MIB,
                page_start: GIB,
                size: PageSize::Size1G
            })
        );
        assert_eq!(
            pt.unmap(&mut m, 2 * GIB + 0x1000),
            Err(UnmapError::NotPageStart {
                virt: 2 * GIB + 0x1000,
                page_start: 2 * GIB,
                size: PageSize::Size2M
            })
        );
        assert!(matches!(
            pt.unmap(&mut m, 3 * GIB + 8),
            Err(UnmapError::NotPageStart { .. })
        ));
        assert!(pt.translate(&m, GIB + 2 * MIB).is_some());
        assert_eq!(pt.unmap(&mut m, GIB), Ok((0, PageSize::Size1G)));
        assert_eq!(pt.unmap(&mut m, 2 * GIB), Ok((0, PageSize::Size2M)));
        assert_eq!(pt.unmap(&mut m, 3 * GIB), Ok((0, PageSize::Size4K)));
        assert_eq!(m.live(), 1);
        assert!(!UnmapError::NotMapped { virt: 0 }.to_string().is_empty());
    }

    #[test]
    fn user_bit_propagates_to_intermediates_only_as_needed() {
        let (mut m, pt) = FakeMem::new();
        let wb = CacheAttr::WriteBack;
        let kernel = 0x10_0000;
        pt.map(
            &mut m,
            kernel,
            0x1000,
            PageSize::Size4K,
            MapFlags::KERNEL_RW,
            wb,
        )
        .unwrap();
        let path_entries = |m: &FakeMem| {
            let mut out = Vec::new();
            let mut table = pt.root();
            for level in (2..=4).rev() {
                let e = m.table(table)[index(kernel, level)];
                out.push(e);
                table = e & ADDR_MASK;
            }
            out
        };
        assert!(path_entries(&m)
            .iter()
            .all(|e| e & USER == 0 && e & WRITABLE != 0));
        assert!(path_entries(&m).iter().all(|e| e & NO_EXECUTE == 0));
        // A user page in the same PT upgrades the whole path.
        pt.map(
            &mut m,
            kernel + 0x1000,
            0x2000,
            PageSize::Size4K,
            MapFlags::USER_RO,
            wb,
        )
        .unwrap();
        assert!(path_entries(&m).iter().all(|e| e & USER != 0));
        // The leaves still say who may access them.
        let k = pt.translate(&m, kernel).unwrap();
        assert!(!k.flags.user && k.flags.writable && k.flags.global);
        let u = pt.translate(&m, kernel + 0x1000).unwrap();
        assert!(u.flags.user && !u.flags.writable && !u.flags.global);
        assert_eq!(m.table(pt.root())[index(kernel, 4)] & USER, USER);
    }

    #[test]
    fn foreign_restrictive_intermediate_is_upgraded_and_translate_reports_effective_rights() {
        let (mut m, pt) = FakeMem::new();
        let wb = CacheAttr::WriteBack;
        pt.map(
            &mut m,
            0x1000,
            0x1000,
            PageSize::Size4K,
            MapFlags::KERNEL_RX,
            wb,
        )
        .unwrap();
        // Someone else made the PML4 entry read-only and no-execute.
        let i = index(0x1000, 4);
        let e = m.table(pt.root())[i];
        m.write_entry(pt.root(), i, (e & !WRITABLE) | NO_EXECUTE);
        let t = pt.translate(&m, 0x1000).unwrap();
        assert!(!t.flags.executable && !t.flags.writable);
        // Mapping an executable, writable page below it restores the rights.
        pt.map(
            &mut m,
            0x2000,
            0x2000,
            PageSize::Size4K,
            MapFlags::USER_RX,
            wb,
        )
        .unwrap();
        let e = m.table(pt.root())[i];
        assert_eq!(e & (WRITABLE | USER | NO_EXECUTE), WRITABLE | USER);
        assert!(pt.translate(&m, 0x1000).unwrap().flags.executable);
    }

    #[test]
    fn nx_follows_executable() {
        let (mut m, pt) = FakeMem::new();
        let wb = CacheAttr::WriteBack;
        for size in SIZES {
            let virt = 4 * GIB * (1 + size.leaf_level() as u64);
            for (j, exec) in [false, true].into_iter().enumerate() {
                let virt = virt + j as u64 * size.bytes();
                let flags = MapFlags {
                    executable: exec,
                    ..MapFlags::KERNEL_RO
                };
                pt.map(&mut m, virt, 0, size, flags, wb).unwrap();
                let t = pt.translate(&m, virt).unwrap();
                assert_eq!(t.flags, flags);
                let leaf = leaf_entry(0, size, flags, wb);
                assert_eq!(leaf & NO_EXECUTE != 0, !exec);
                assert_eq!(leaf & WRITABLE, 0);
            }
        }
    }

    #[test]
    fn out_of_table_memory_mid_walk_leaks_nothing() {
        for budget in 0..3 {
            let (mut m, pt) = FakeMem::new();
            m.budget = Some(budget);
            let r = pt.map(
                &mut m,
                0x7f_0000_1000,
                0x1000,
                PageSize::Size4K,
                MapFlags::USER_RW,
                CacheAttr::WriteBack,
            );
            assert_eq!(r, Err(MapError::OutOfTableMemory));
            assert_eq!(m.live(), 1, "budget {budget}");
            assert_eq!(m.allocs - 1, m.frees);
            assert!(m.table(pt.root()).iter().all(|&e| e == 0));
        }
        // With part of the path present, only the new part is rolled back.
        let (mut m, pt) = FakeMem::new();
        let kw = MapFlags::KERNEL_RW;
        pt.map(
            &mut m,
            0x1000,
            0x1000,
            PageSize::Size4K,
            kw,
            CacheAttr::WriteBack,
        )
        .unwrap();
        let before = m.live();
        m.budget = Some(1);
        // Same PML4 entry, different PDPT entry: needs a PD and a PT.
        let r = pt.map(
            &mut m,
            GIB,
            0x1000,
            PageSize::Size4K,
            MapFlags::USER_RW,
            CacheAttr::WriteBack,
        );
        assert_eq!(r, Err(MapError::OutOfTableMemory));
        assert_eq!(m.live(), before);
        // The failed user mapping did not upgrade the shared PML4 entry.
        assert_eq!(m.table(pt.root())[0] & USER, 0);
        assert_eq!(pt.translate(&m, 0x1000).unwrap().phys, 0x1000);
        m.budget = Some(2);
        pt.map(
            &mut m,
            GIB,
            0x1000,
            PageSize::Size4K,
            kw,
            CacheAttr::WriteBack,
        )
        .unwrap();
    }

    #[test]
    fn unmap_frees_only_tables_that_become_empty() {
        let (mut m, pt) = FakeMem::new();
        let wb = CacheAttr::WriteBack;
        let kw = MapFlags::KERNEL_RW;
        pt.map(&mut m, 0x1000, 0x1000, PageSize::Size4K, kw, wb)
            .unwrap();
        pt.map(&mut m, 0x2000, 0x2000, PageSize::Size4K, kw, wb)
            .unwrap();
        pt.map(&mut m, 0x40_0000, 0x20_0000, PageSize::Size2M, kw, wb)
            .unwrap();
        assert_eq!(m.live(), 4);
        pt.unmap(&mut m, 0x1000).unwrap();
        assert_eq!(m.live(), 4);
        assert_eq!(pt.unmap(&mut m, 0x2000), Ok((0x2000, PageSize::Size4K)));
        // The PT went away, the PD still holds the 2M page.
        assert_eq!(m.live(), 3);
        pt.unmap(&mut m, 0x40_0000).unwrap();
        assert_eq!(m.live(), 1);
        assert_eq!(m.allocs, m.frees + 1);
    }

    #[test]
    fn map_range_picks_largest_pages() {
        let wb = CacheAttr::WriteBack;
        let kw = MapFlags::KERNEL_RW;
        // Starts 2 MiB + 8 KiB below a 1 GiB boundary, ends 2 MiB + 4 KiB past
        // the next one.
        let virt = 0xffff_8000_0000_0000 + 2 * GIB - 2 * MIB - 0x2000;
        let phys = 2 * GIB - 2 * MIB - 0x2000;
        let len = 0x2000 + 2 * MIB + GIB + 2 * MIB + 0x1000;
        let count = |leaves: &[(u64, PageSize)], s| leaves.iter().filter(|l| l.1 == s).count();

        let (mut m, pt) = FakeMem::new();
        pt.map_range(&mut m, virt, phys, len, kw, wb, true).unwrap();
        let leaves = m.leaves(pt.root());
        assert_eq!(
            leaves,
            vec![
                (virt, PageSize::Size4K),
                (virt + 0x1000, PageSize::Size4K),
                (virt + 0x2000, PageSize::Size2M),
                (virt + 0x2000 + 2 * MIB, PageSize::Size1G),
                (virt + 0x2000 + 2 * MIB + GIB, PageSize::Size2M),
                (virt + 0x2000 + 4 * MIB + GIB, PageSize::Size4K),
            ]
        );
        for off in [0, 0x1fff, 0x2000, 5 * MIB, len - 1] {
            assert_eq!(pt.translate(&m, virt + off).unwrap().phys, phys + off);
        }
        assert_eq!(pt.translate(&m, virt + len), None);

        let (mut m, pt) = FakeMem::new();
        pt.map_range(&mut m, virt, phys, len, kw, wb, false)
            .unwrap();
        let leaves = m.leaves(pt.root());
        assert_eq!(count(&leaves, PageSize::Size4K), 3);
        assert_eq!(count(&leaves, PageSize::Size2M), 514);
        assert_eq!(count(&leaves, PageSize::Size1G), 0);

        // Offsets that differ modulo 2 MiB allow only 4 KiB pages.
        let (mut m, pt) = FakeMem::new();
        pt.map_range(&mut m, 4 * MIB, 4 * MIB + 0x1000, 4 * MIB, kw, wb, true)
            .unwrap();
        let leaves = m.leaves(pt.root());
        assert_eq!(
            (leaves.len(), count(&leaves, PageSize::Size4K)),
            (1024, 1024)
        );
    }

    #[test]
    fn map_range_errors_and_rollback() {
        let wb = CacheAttr::WriteBack;
        let kw = MapFlags::KERNEL_RW;
        let (mut m, pt) = FakeMem::new();
        assert_eq!(
            pt.map_range(&mut m, 0x1000, 0x1000, 0, kw, wb, true),
            Ok(())
        );
        assert!(matches!(
            pt.map_range(&mut m, 0x1001, 0x1000, 0x1000, kw, wb, true),
            Err(MapError::Misaligned { .. })
        ));
        assert_eq!(
            pt.map_range(&mut m, 0, 0, 0x1001, kw, wb, true),
            Err(MapError::LengthMisaligned { len: 0x1001 })
        );
        let virt = 0xffff_ffff_ffff_f000;
        assert_eq!(
            pt.map_range(&mut m, virt, 0, 0x2000, kw, wb, true),
            Err(MapError::RangeOverflow {
                virt,
                phys: 0,
                len: 0x2000
            })
        );
        assert!(matches!(
            pt.map_range(&mut m, 0, 0xffff_ffff_ffff_f000, 0x2000, kw, wb, true),
            Err(MapError::RangeOverflow { .. })
        ));
        // Crossing into the non-canonical hole.
        assert_eq!(
            pt.map_range(&mut m, 0x7fff_ffff_f000, 0, 0x2000, kw, wb, true),
            Err(MapError::NonCanonical {
                virt: 0x8000_0000_0000
            })
        );
        assert_eq!(
            pt.map_range(&mut m, 0, (1 << 52) - 0x1000, 0x2000, kw, wb, true),
            Err(MapError::PhysOutOfRange { phys: 1 << 52 })
        );
        assert_eq!(m.live(), 1);

        // A page in the way in the middle: everything mapped before it is
        // undone, the page in the way is untouched.
        pt.map(&mut m, GIB + 0x1000, 0x9000, PageSize::Size4K, kw, wb)
            .unwrap();
        let tables = m.live();
        let r = pt.map_range(&mut m, GIB - 4 * MIB, 0, 8 * MIB, kw, wb, true);
        // The 2 MiB page at GIB is refused because a PT holds GIB + 0x1000.
        assert_eq!(r, Err(MapError::AlreadyMapped { virt: GIB }));
        assert_eq!(m.leaves(pt.root()), vec![(GIB + 0x1000, PageSize::Size4K)]);
        assert_eq!(m.live(), tables);

        // Out of table memory halfway: same.
        m.budget = Some(1);
        let r = pt.map_range(&mut m, 0x80_0000_0000 - 2 * MIB, 0, 4 * MIB, kw, wb, true);
        assert_eq!(r, Err(MapError::OutOfTableMemory));
        assert_eq!(m.live(), tables);
    }

    /// Random maps and unmaps against a shadow map of leaves.
    #[test]
    fn random_ops_match_shadow() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let (mut m, pt) = FakeMem::new();
        let mut shadow: HashMap<u64, (u64, PageSize, MapFlags, CacheAttr)> = HashMap::new();
        let covers =
            |shadow: &HashMap<u64, (u64, PageSize, MapFlags, CacheAttr)>, v: u64, len: u64| {
                shadow
                    .iter()
                    .any(|(&sv, s)| sv < v + len && v < sv + s.1.bytes())
            };
        for _ in 0..5000 {
            let size = SIZES[(next() % 3) as usize];
            // A small window so operations collide often.
            let slot = next() % 16;
            let virt = [0x0, 0xffff_ff80_0000_0000][(next() % 2) as usize] + slot * size.bytes();
            if next() % 3 != 0 {
                let phys = (next() % 64) * size.bytes();
                let flags = MapFlags {
                    writable: next() % 2 == 0,
                    user: next() % 2 == 0,
                    executable: next() % 2 == 0,
                    global: next() % 2 == 0,
                };
                let cache = CacheAttr::ALL[(next() % 6) as usize];
                let r = pt.map(&mut m, virt, phys, size, flags, cache);
                if covers(&shadow, virt, size.bytes()) {
                    assert!(r.is_err());
                } else {
                    r.unwrap();
                    shadow.insert(virt, (phys, size, flags, cache));
                }
            } else {
                let r = pt.unmap(&mut m, virt);
                match shadow.remove(&virt) {
                    Some((phys, s, _, _)) => assert_eq!(r, Ok((phys, s))),
                    None => assert!(r.is_err()),
                }
            }
            if next() % 64 == 0 {
                let mut expected: Vec<(u64, PageSize)> =
                    shadow.iter().map(|(&v, s)| (v, s.1)).collect();
                expected.sort_by_key(|e| e.0);
                assert_eq!(m.leaves(pt.root()), expected);
                for (&v, &(phys, size, flags, cache)) in &shadow {
                    let t = pt.translate(&m, v + size.bytes() / 2).unwrap();
                    assert_eq!(
                        t,
                        Translation {
                            phys: phys + size.bytes() / 2,
                            size,
                            flags,
                            cache
                        }
                    );
                }
            }
        }
        let all: Vec<u64> = shadow.keys().copied().collect();
        for v in all {
            pt.unmap(&mut m, v).unwrap();
        }
        assert_eq!(m.live(), 1);
        assert_eq!(m.allocs, m.frees + 1);
    }
}
