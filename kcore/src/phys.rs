//! Physical memory: the boot memory map and the physical frame allocator.
//!
//! Firmware memory maps are untrusted input: entries come unsorted, overlap,
//! have zero length or run off the end of the address space. [`MemoryMap`]
//! turns them into a clean map; [`FrameAllocator`] hands out page frames from
//! the usable part of it, minus what the boot path still occupies.
//!
//! Invariants:
//! - `MemoryMap` regions are non-empty, sorted, pairwise disjoint, and two
//!   regions that touch always differ in kind (touching equals are merged).
//! - `FrameAllocator` keeps two range lists, *free* and *managed* (all memory
//!   it was ever given). Both are page-aligned, non-empty, sorted, disjoint
//!   and never touch (touching ranges are coalesced), and free ⊆ managed.
//!   Because ranges are maximal runs, "the highest fit" can be found by
//!   looking at each range once.
//! - Everything is fixed-capacity (no heap exists this early) and every
//!   failing operation returns an error value and leaves the structure as it
//!   was, except where a doc comment says otherwise.

use core::fmt;

use crate::fixed::FixedVec;

/// Size of a base page frame.
pub const PAGE_SIZE: u64 = 4096;

/// Capacity of a [`MemoryMap`] after sanitizing; real maps have a few dozen.
pub const MAX_REGIONS: usize = 128;

/// Capacity of each of the [`FrameAllocator`]'s range lists.
pub const MAX_FREE_RANGES: usize = 256;

const PAGE_MASK: u64 = PAGE_SIZE - 1;

/// A half-open physical address range `[start, end)`.
///
/// A range with `start >= end` is empty; every helper treats it so, which is
/// why the fields can be public without an invariant to break.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PhysRange {
    pub start: u64,
    pub end: u64,
}

impl PhysRange {
    pub const fn new(start: u64, end: u64) -> Self {
        Self { start, end }
    }

    /// `None` when `start + len` does not fit in 64 bits.
    pub const fn from_start_len(start: u64, len: u64) -> Option<Self> {
        match start.checked_add(len) {
            Some(end) => Some(Self { start, end }),
            None => None,
        }
    }

    pub const fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    pub const fn is_empty(&self) -> bool {
        self.start >= self.end
    }

    pub const fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// Whether `other` is non-empty and lies entirely inside `self`.
    pub const fn contains_range(&self, other: &PhysRange) -> bool {
        !other.is_empty() && self.start <= other.start && other.end <= self.end
    }

    pub const fn overlaps(&self, other: &PhysRange) -> bool {
        !self.is_empty() && !other.is_empty() && self.start < other.end && other.start < self.end
    }

    /// The common part, or `None` when there is none.
    pub fn intersect(&self, other: &PhysRange) -> Option<PhysRange> {
        let r = PhysRange::new(self.start.max(other.start), self.end.min(other.end));
        (!r.is_empty()).then_some(r)
    }

    pub const fn is_page_aligned(&self) -> bool {
        self.start & PAGE_MASK == 0 && self.end & PAGE_MASK == 0
    }

    /// The whole pages inside the range (start rounded up, end rounded down),
    /// or `None` when not even one whole page fits.
    pub fn page_align_inward(&self) -> Option<PhysRange> {
        let start = self.start.checked_add(PAGE_MASK)? & !PAGE_MASK;
        let r = PhysRange::new(start, self.end & !PAGE_MASK);
        (!r.is_empty()).then_some(r)
    }

    /// Every page the range touches (start rounded down, end rounded up), or
    /// `None` for an empty range. The end saturates at `u64::MAX` because the
    /// top page's end (2^64) is not representable; that only matters for a
    /// range reaching into the very last page of the address space.
    pub fn page_align_outward(&self) -> Option<PhysRange> {
        if self.is_empty() {
            return None;
        }
        let end = match self.end.checked_add(PAGE_MASK) {
            Some(e) => e & !PAGE_MASK,
            None => u64::MAX,
        };
        Some(PhysRange::new(self.start & !PAGE_MASK, end))
    }
}

impl fmt::Display for PhysRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:#x}, {:#x})", self.start, self.end)
    }
}

/// What a region of the physical address space is, per the firmware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegionKind {
    Usable,
    Reserved,
    AcpiReclaimable,
    AcpiNvs,
    Bad,
}

impl RegionKind {
    /// Decodes an E820 type. Unknown types are `Reserved`: memory we do not
    /// understand must never be handed out.
    pub const fn from_e820(kind: u32) -> Self {
        match kind {
            1 => RegionKind::Usable,
            3 => RegionKind::AcpiReclaimable,
            4 => RegionKind::AcpiNvs,
            5 => RegionKind::Bad,
            _ => RegionKind::Reserved,
        }
    }

    /// Where firmware entries overlap, the higher value wins: trusting the
    /// more permissive claim could hand out memory that firmware or failing
    /// hardware still owns.
    const fn restrictiveness(self) -> u8 {
        match self {
            RegionKind::Usable => 0,
            RegionKind::AcpiReclaimable => 1,
            RegionKind::Reserved => 2,
            RegionKind::AcpiNvs => 3,
            RegionKind::Bad => 4,
        }
    }
}

impl fmt::Display for RegionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegionKind::Usable => "usable",
            RegionKind::Reserved => "reserved",
            RegionKind::AcpiReclaimable => "ACPI reclaimable",
            RegionKind::AcpiNvs => "ACPI NVS",
            RegionKind::Bad => "bad memory",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryMapError {
    /// `addr + len` does not fit in 64 bits.
    Overflow { addr: u64, len: u64 },
    /// The sanitized map would need more than `capacity` regions.
    TooManyRegions { capacity: usize },
}

impl fmt::Display for MemoryMapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryMapError::Overflow { addr, len } => write!(
                f,
                "memory map entry at {addr:#x} with length {len:#x} runs past the end of the 64-bit address space"
            ),
            MemoryMapError::TooManyRegions { capacity } => write!(
                f,
                "memory map needs more than {capacity} regions after sanitizing"
            ),
        }
    }
}

impl core::error::Error for MemoryMapError {}

/// A sanitized physical memory map (see the module invariants).
#[derive(Clone, Debug)]
pub struct MemoryMap {
    regions: FixedVec<(PhysRange, RegionKind), MAX_REGIONS>,
}

impl Default for MemoryMap {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryMap {
    pub const fn new() -> Self {
        Self {
            regions: FixedVec::new((PhysRange::new(0, 0), RegionKind::Reserved)),
        }
    }

    /// Builds a map from raw E820 entries `(addr, len, type)` in any order.
    ///
    /// The result does not depend on entry order: every byte gets the most
    /// restrictive kind of the entries covering it (see [`RegionKind`]).
    pub fn from_e820<I>(entries: I) -> Result<Self, MemoryMapError>
    where
        I: IntoIterator<Item = (u64, u64, u32)>,
    {
        let mut map = Self::new();
        for (addr, len, kind) in entries {
            map.add(addr, len, RegionKind::from_e820(kind))?;
        }
        Ok(map)
    }

    /// Adds one firmware entry (for boot protocols other than E820, too).
    /// Zero-length entries are ignored. On error the map is unchanged.
    ///
    /// The capacity check counts regions before merging, so an entry whose
    /// pieces would all merge into neighbours can still be refused when the
    /// map is within two regions of full; real maps are nowhere near that.
    pub fn add(&mut self, addr: u64, len: u64, kind: RegionKind) -> Result<(), MemoryMapError> {
        let end = addr
            .checked_add(len)
            .ok_or(MemoryMapError::Overflow { addr, len })?;
        if len == 0 {
            return Ok(());
        }
        let first = self
            .regions
            .as_slice()
            .partition_point(|(r, _)| r.end <= addr);

        // Count the slots the paint below inserts, so that a full map is
        // refused before anything changes.
        let mut extra = 0;
        let mut cursor = addr;
        for &(r, k) in self.regions.as_slice().get(first..).unwrap_or(&[]) {
            if r.start >= end {
                break;
            }
            if r.start > cursor {
                extra += 1;
            }
            if k.restrictiveness() < kind.restrictiveness() {
                extra += usize::from(r.start < addr) + usize::from(r.end > end);
            }
            cursor = r.end;
        }
        if cursor < end {
            extra += 1;
        }
        if self.regions.len() + extra > MAX_REGIONS {
            return Err(MemoryMapError::TooManyRegions {
                capacity: MAX_REGIONS,
            });
        }

        self.paint(first, PhysRange::new(addr, end), kind)
            .map_err(|_| MemoryMapError::TooManyRegions {
                capacity: MAX_REGIONS,
            })?;
        self.merge_touching();
        Ok(())
    }

    /// Gives `new` the kind `kind` wherever it is uncovered or covered by a
    /// less restrictive kind. `first` is the first region ending after
    /// `new.start`. Regions only ever start before the cursor at the first
    /// step and only ever extend past `new.end` at the last one, which is
    /// what the slot count in `add` relies on.
    fn paint(
        &mut self,
        first: usize,
        new: PhysRange,
        kind: RegionKind,
    ) -> Result<(), crate::fixed::Rejected> {
        let mut i = first;
        let mut cursor = new.start;
        while cursor < new.end {
            match self.regions.get(i) {
                Some((r, k)) if r.start < new.end => {
                    if r.start > cursor {
                        self.regions
                            .insert(i, (PhysRange::new(cursor, r.start), kind))?;
                        i += 1;
                        cursor = r.start;
                        continue;
                    }
                    let seg_end = r.end.min(new.end);
                    if k.restrictiveness() < kind.restrictiveness() {
                        let painted = (PhysRange::new(cursor, seg_end), kind);
                        if r.start < cursor {
                            self.regions.set(i, (PhysRange::new(r.start, cursor), k))?;
                            i += 1;
                            self.regions.insert(i, painted)?;
                        } else {
                            self.regions.set(i, painted)?;
                        }
                        if seg_end < r.end {
                            i += 1;
                            self.regions
                                .insert(i, (PhysRange::new(seg_end, r.end), k))?;
                        }
                    }
                    i += 1;
                    cursor = seg_end;
                }
                _ => {
                    self.regions
                        .insert(i, (PhysRange::new(cursor, new.end), kind))?;
                    cursor = new.end;
                }
            }
        }
        Ok(())
    }

    fn merge_touching(&mut self) {
        let regions = self.regions.as_mut_slice();
        let mut kept = 0usize;
        for read in 0..regions.len() {
            let Some(&(r, k)) = regions.get(read) else {
                break;
            };
            if let Some(prev) = kept.checked_sub(1).and_then(|p| regions.get_mut(p)) {
                if prev.0.end == r.start && prev.1 == k {
                    prev.0.end = r.end;
                    continue;
                }
            }
            if let Some(slot) = regions.get_mut(kept) {
                *slot = (r, k);
            }
            kept += 1;
        }
        self.regions.truncate(kept);
    }

    /// The regions in address order.
    pub fn regions(&self) -> impl Iterator<Item = (PhysRange, RegionKind)> + '_ {
        self.regions.as_slice().iter().copied()
    }

    pub fn len(&self) -> usize {
        self.regions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.regions.len() == 0
    }

    /// The kind of the region containing `addr`; `None` for a hole.
    pub fn kind_at(&self, addr: u64) -> Option<RegionKind> {
        let slice = self.regions.as_slice();
        let i = slice.partition_point(|(r, _)| r.end <= addr);
        slice
            .get(i)
            .filter(|(r, _)| r.contains(addr))
            .map(|&(_, k)| k)
    }

    /// Total bytes of regions of `kind`.
    pub fn total(&self, kind: RegionKind) -> u64 {
        self.regions()
            .filter(|&(_, k)| k == kind)
            .fold(0u64, |sum, (r, _)| sum.saturating_add(r.len()))
    }

    pub fn usable_bytes(&self) -> u64 {
        self.total(RegionKind::Usable)
    }

    /// The exclusive end of the highest region of any kind (0 for an empty
    /// map): how far a direct map of physical memory has to reach.
    pub fn highest_address(&self) -> u64 {
        self.regions.as_slice().last().map_or(0, |(r, _)| r.end)
    }
}

/// [`FrameAllocator`] construction failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitError {
    /// Usable memory minus the reserved ranges needs more than `capacity`
    /// ranges.
    TooFragmented { capacity: usize },
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::TooFragmented { capacity } => write!(
                f,
                "usable memory minus reserved ranges needs more than {capacity} free ranges"
            ),
        }
    }
}

impl core::error::Error for InitError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    ZeroPages,
    /// Zero, not a power of two, or so large it overflows in bytes.
    BadAlignment {
        align_pages: u64,
    },
    /// The size in bytes does not fit in 64 bits.
    TooLarge {
        pages: u64,
    },
    /// No free range has a suitably aligned run of `pages` pages (below the
    /// limit, for `alloc_below`).
    OutOfMemory {
        pages: u64,
        align_pages: u64,
    },
    /// A fit exists but taking it would split a free range and the range
    /// list is full.
    TooFragmented {
        pages: u64,
    },
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocError::ZeroPages => f.write_str("cannot allocate zero pages"),
            AllocError::BadAlignment { align_pages } => write!(
                f,
                "alignment of {align_pages} pages is not a usable power of two"
            ),
            AllocError::TooLarge { pages } => {
                write!(f, "{pages} pages do not fit in the 64-bit address space")
            }
            AllocError::OutOfMemory { pages, align_pages } => write!(
                f,
                "no free run of {pages} pages aligned to {align_pages} pages"
            ),
            AllocError::TooFragmented { pages } => write!(
                f,
                "free memory for {pages} pages exists but the free-range list is full"
            ),
        }
    }
}

impl core::error::Error for AllocError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeError {
    /// The range has no bytes (or `start > end`).
    Empty { range: PhysRange },
    /// Start or end is not on a page boundary.
    Misaligned { range: PhysRange },
    /// Not entirely inside memory this allocator manages: freeing it would
    /// turn reserved or device memory into "free RAM".
    NotManaged { range: PhysRange },
    /// Part of the range (`already_free`) is free already.
    DoubleFree {
        range: PhysRange,
        already_free: PhysRange,
    },
    /// `add` was given memory the allocator already manages.
    AlreadyManaged { range: PhysRange },
    /// Taking the range back would need a new list slot and the list is full.
    TooFragmented { range: PhysRange },
}

impl fmt::Display for FreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FreeError::Empty { range } => write!(f, "range {range} is empty"),
            FreeError::Misaligned { range } => {
                write!(f, "range {range} is not page-aligned")
            }
            FreeError::NotManaged { range } => {
                write!(f, "range {range} is not memory this allocator manages")
            }
            FreeError::DoubleFree {
                range,
                already_free,
            } => write!(
                f,
                "double free: {already_free} of range {range} is already free"
            ),
            FreeError::AlreadyManaged { range } => write!(
                f,
                "range {range} overlaps memory the allocator already manages"
            ),
            FreeError::TooFragmented { range } => {
                write!(f, "cannot take back {range}: the free-range list is full")
            }
        }
    }
}

impl core::error::Error for FreeError {}

type RangeList = FixedVec<PhysRange, MAX_FREE_RANGES>;

/// Page frame allocator over sorted, coalesced free ranges.
///
/// Allocation is top-down so that scarce low memory (below 1 MiB for SMP
/// trampolines, below 4 GiB for 32-bit DMA) stays free for requests that
/// need it. About 8 KiB large; [`FrameAllocator::empty`] is `const` so the
/// kernel can keep it in a static and [`FrameAllocator::init`] it in place.
#[derive(Clone, Debug)]
pub struct FrameAllocator {
    free: RangeList,
    managed: RangeList,
}

impl FrameAllocator {
    /// An allocator that manages nothing.
    pub const fn empty() -> Self {
        Self {
            free: FixedVec::new(PhysRange::new(0, 0)),
            managed: FixedVec::new(PhysRange::new(0, 0)),
        }
    }

    /// Every usable region of `map`, shrunk to whole pages, minus the pages
    /// touched by any of `reserved` (kernel image, boot info, modules, low
    /// memory — the caller knows what is still in use).
    pub fn new(map: &MemoryMap, reserved: &[PhysRange]) -> Result<Self, InitError> {
        let mut a = Self::empty();
        a.init(map, reserved)?;
        Ok(a)
    }

    /// In-place form of [`FrameAllocator::new`]. On error `self` manages
    /// nothing.
    pub fn init(&mut self, map: &MemoryMap, reserved: &[PhysRange]) -> Result<(), InitError> {
        let result = self.try_init(map, reserved);
        if result.is_err() {
            self.free.clear();
            self.managed.clear();
        }
        result
    }

    fn try_init(&mut self, map: &MemoryMap, reserved: &[PhysRange]) -> Result<(), InitError> {
        let full = InitError::TooFragmented {
            capacity: MAX_FREE_RANGES,
        };
        self.free.clear();
        for (range, kind) in map.regions() {
            if kind != RegionKind::Usable {
                continue;
            }
            if let Some(pages) = range.page_align_inward() {
                insert_coalescing(&mut self.free, pages).map_err(|_| full)?;
            }
        }
        for r in reserved {
            if let Some(r) = r.page_align_outward() {
                subtract(&mut self.free, r).map_err(|_| full)?;
            }
        }
        self.managed = self.free.clone();
        Ok(())
    }

    /// `pages` contiguous pages aligned to `align_pages` pages, at the
    /// highest address that fits. Returns the physical start address.
    pub fn alloc(&mut self, pages: u64, align_pages: u64) -> Result<u64, AllocError> {
        self.alloc_below(pages, align_pages, u64::MAX)
    }

    /// Like [`FrameAllocator::alloc`], but the allocation ends at or below
    /// `limit` (e.g. 0x10_0000 for an SMP trampoline, 1 << 32 for 32-bit
    /// DMA). Still the highest fit below the limit, to spare even lower memory.
    pub fn alloc_below(
        &mut self,
        pages: u64,
        align_pages: u64,
        limit: u64,
    ) -> Result<u64, AllocError> {
        if pages == 0 {
            return Err(AllocError::ZeroPages);
        }
        let bad_align = AllocError::BadAlignment { align_pages };
        if !align_pages.is_power_of_two() {
            return Err(bad_align);
        }
        let align = align_pages.checked_mul(PAGE_SIZE).ok_or(bad_align)?;
        let size = pages
            .checked_mul(PAGE_SIZE)
            .ok_or(AllocError::TooLarge { pages })?;

        let mut blocked = false;
        for i in (0..self.free.len()).rev() {
            let Some(f) = self.free.get(i) else { continue };
            let top = f.end.min(limit);
            let Some(highest_start) = top.checked_sub(size) else {
                continue;
            };
            let start = highest_start & !(align - 1);
            if start < f.start {
                continue;
            }
            // start + size <= top, so no overflow.
            if carve(&mut self.free, i, PhysRange::new(start, start + size)).is_ok() {
                return Ok(start);
            }
            // The top fit would split the range and the list is full; the
            // bottom of the range splits nothing if it is aligned.
            if f.start & (align - 1) == 0 && f.start.checked_add(size).is_some_and(|e| e <= top) {
                let low = PhysRange::new(f.start, f.start + size);
                if carve(&mut self.free, i, low).is_ok() {
                    return Ok(f.start);
                }
            }
            blocked = true;
        }
        Err(if blocked {
            AllocError::TooFragmented { pages }
        } else {
            AllocError::OutOfMemory { pages, align_pages }
        })
    }

    /// Returns `range` to the free pool, coalescing with its neighbours.
    /// Refuses (and changes nothing) on misalignment, memory never managed,
    /// any overlap with free memory (a double free), or a full list.
    pub fn free(&mut self, range: PhysRange) -> Result<(), FreeError> {
        check_pages(range)?;
        if !contained_in_one(&self.managed, range) {
            return Err(FreeError::NotManaged { range });
        }
        if let Some(already_free) = first_overlap(&self.free, range) {
            return Err(FreeError::DoubleFree {
                range,
                already_free,
            });
        }
        insert_coalescing(&mut self.free, range).map_err(|_| FreeError::TooFragmented { range })
    }

    /// Hands the allocator memory it did not manage before and frees it, e.g.
    /// boot-info pages that were reserved at `new` and are no longer needed.
    pub fn add(&mut self, range: PhysRange) -> Result<(), FreeError> {
        check_pages(range)?;
        if first_overlap(&self.managed, range).is_some() {
            return Err(FreeError::AlreadyManaged { range });
        }
        // free ⊆ managed, so the range overlaps nothing free either; check
        // both lists for room first so a failure changes nothing.
        if (self.managed.is_full() && needs_slot(&self.managed, range))
            || (self.free.is_full() && needs_slot(&self.free, range))
        {
            return Err(FreeError::TooFragmented { range });
        }
        insert_coalescing(&mut self.managed, range)
            .and_then(|()| insert_coalescing(&mut self.free, range))
            .map_err(|_| FreeError::TooFragmented { range })
    }

    pub fn free_bytes(&self) -> u64 {
        sum_len(&self.free)
    }

    pub fn free_pages(&self) -> u64 {
        self.free_bytes() / PAGE_SIZE
    }

    /// All memory ever given to the allocator, free or allocated.
    pub fn managed_bytes(&self) -> u64 {
        sum_len(&self.managed)
    }

    /// The free ranges in address order.
    pub fn free_ranges(&self) -> impl Iterator<Item = PhysRange> + '_ {
        self.free.as_slice().iter().copied()
    }

    /// Empties the free pool and returns what was in it, for handing the rest
    /// of memory to the root task. The memory stays managed, so it can be
    /// freed back later.
    pub fn take_all(&mut self) -> impl Iterator<Item = PhysRange> {
        core::mem::replace(&mut self.free, FixedVec::new(PhysRange::new(0, 0))).into_items()
    }
}

/// Splits `range` into the fewest naturally aligned power-of-two blocks
/// (each `(start, log2 size)`, `min_bits <= log2 size <= max_bits`), in
/// address order; parts too small or misaligned for `min_bits` are left
/// out. This is how free memory becomes untyped-memory capabilities.
pub fn aligned_blocks(
    range: PhysRange,
    min_bits: u32,
    max_bits: u32,
) -> impl Iterator<Item = (u64, u32)> {
    abi::object::aligned_blocks(range.start, range.end, min_bits, max_bits)
}

fn check_pages(range: PhysRange) -> Result<(), FreeError> {
    if range.is_empty() {
        return Err(FreeError::Empty { range });
    }
    if !range.is_page_aligned() {
        return Err(FreeError::Misaligned { range });
    }
    Ok(())
}

fn sum_len(list: &RangeList) -> u64 {
    list.as_slice()
        .iter()
        .fold(0u64, |sum, r| sum.saturating_add(r.len()))
}

/// Index of the first range that ends after `addr`.
fn first_ending_after(list: &RangeList, addr: u64) -> usize {
    list.as_slice().partition_point(|r| r.end <= addr)
}

fn first_overlap(list: &RangeList, range: PhysRange) -> Option<PhysRange> {
    list.get(first_ending_after(list, range.start))
        .and_then(|r| r.intersect(&range))
}

fn contained_in_one(list: &RangeList, range: PhysRange) -> bool {
    list.get(first_ending_after(list, range.start))
        .is_some_and(|r| r.contains_range(&range))
}

/// Whether inserting `range` (disjoint from the list) would take a new slot
/// rather than extend a neighbour it touches.
fn needs_slot(list: &RangeList, range: PhysRange) -> bool {
    let i = first_ending_after(list, range.start);
    let touches_left = i
        .checked_sub(1)
        .and_then(|l| list.get(l))
        .is_some_and(|l| l.end == range.start);
    let touches_right = list.get(i).is_some_and(|r| r.start == range.end);
    !touches_left && !touches_right
}

/// Inserts `range`, which must not overlap the list, merging with touching
/// neighbours. On `Err` the list is unchanged.
fn insert_coalescing(list: &mut RangeList, range: PhysRange) -> Result<(), crate::fixed::Rejected> {
    let i = first_ending_after(list, range.start);
    let left = i
        .checked_sub(1)
        .and_then(|l| list.get(l).map(|r| (l, r)))
        .filter(|(_, r)| r.end == range.start);
    let right = list.get(i).filter(|r| r.start == range.end);
    match (left, right) {
        (Some((l, lr)), Some(rr)) => {
            list.set(l, PhysRange::new(lr.start, rr.end))?;
            list.remove(i);
            Ok(())
        }
        (Some((l, lr)), None) => list.set(l, PhysRange::new(lr.start, range.end)),
        (None, Some(rr)) => list.set(i, PhysRange::new(range.start, rr.end)),
        (None, None) => list.insert(i, range),
    }
}

/// Removes `part`, which lies inside `list[i]`. On `Err` (a split with a
/// full list) the list is unchanged.
fn carve(list: &mut RangeList, i: usize, part: PhysRange) -> Result<(), crate::fixed::Rejected> {
    let f = list.get(i).ok_or(crate::fixed::Rejected)?;
    match (part.start == f.start, part.end == f.end) {
        (true, true) => list.remove(i).map(|_| ()).ok_or(crate::fixed::Rejected),
        (true, false) => list.set(i, PhysRange::new(part.end, f.end)),
        (false, true) => list.set(i, PhysRange::new(f.start, part.start)),
        (false, false) => {
            if list.is_full() {
                return Err(crate::fixed::Rejected);
            }
            list.set(i, PhysRange::new(f.start, part.start))?;
            list.insert(i + 1, PhysRange::new(part.end, f.end))
        }
    }
}

/// Removes every byte of `cut` from the list. On `Err` (a split with a full
/// list) the list is unchanged, because only a range strictly containing
/// `cut` splits, and then it is the only range touched.
fn subtract(list: &mut RangeList, cut: PhysRange) -> Result<(), crate::fixed::Rejected> {
    let mut i = first_ending_after(list, cut.start);
    while let Some(f) = list.get(i) {
        let Some(part) = f.intersect(&cut) else { break };
        carve(list, i, part)?;
        // Keep `i` on the next unvisited range: it moved down by one if `f`
        // vanished, and sits after the kept left piece otherwise.
        if part.start != f.start {
            i += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn aligned_blocks_cover_exactly_with_aligned_pieces() {
        let collect = |start, end, min, max| {
            aligned_blocks(PhysRange::new(start, end), min, max).collect::<Vec<_>>()
        };
        assert_eq!(
            collect(0x1000, 0x4000, 12, 47),
            vec![(0x1000, 12), (0x2000, 13)]
        );
        assert_eq!(collect(0, 1 << 20, 12, 47), vec![(0, 20)]);
        assert_eq!(
            collect(0, 1 << 20, 12, 18),
            vec![(0, 18), (1 << 18, 18), (2 << 18, 18), (3 << 18, 18)]
        );
        // Partial pages at both ends are left out.
        assert_eq!(collect(0x1800, 0x3800, 12, 47), vec![(0x2000, 12)]);
        assert_eq!(collect(0x1000, 0x1000, 12, 47), vec![]);
        let mut rng = formats::test_rng::Rng(7);
        for _ in 0..2000 {
            let a = rng.below(1 << 36) & !0xfff;
            let b = a + (rng.below(1 << 30) & !0xfff);
            let mut next = a;
            for (start, bits) in collect(a, b, 12, 30) {
                assert_eq!(start, next, "contiguous");
                assert_eq!(start % (1 << bits), 0, "aligned");
                assert!((12..=30).contains(&bits));
                next = start + (1 << bits);
            }
            assert_eq!(next, b.max(a), "covers the whole range");
        }
    }

    use super::*;
    use std::collections::BTreeSet;
    use std::string::ToString;
    use std::vec;
    use std::vec::Vec;

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    const GIB: u64 = 1024 * MIB;

    /// QEMU's map for `-m 128M` (as SeaBIOS reports it).
    fn qemu_128m() -> Vec<(u64, u64, u32)> {
        vec![
            (0, 0x9fc00, 1),
            (0x9fc00, 0x400, 2),
            (0xf0000, 0x10000, 2),
            (0x100000, 0x7fe0000 - 0x100000, 1),
            (0x7fe0000, 0x20000, 2),
            (0xfffc0000, 0x40000, 2),
        ]
    }

    /// QEMU with 8 GiB: RAM is split around the 32-bit PCI hole.
    fn qemu_8g() -> Vec<(u64, u64, u32)> {
        vec![
            (0, 0x9fc00, 1),
            (0x9fc00, 0x400, 2),
            (0xf0000, 0x10000, 2),
            (0x100000, 0xbffe0000 - 0x100000, 1),
            (0xbffe0000, 0x20000, 2),
            (0xfeffc000, 0x4000, 2),
            (0xfffc0000, 0x40000, 2),
            (0x1_0000_0000, 0x1_4000_0000, 1),
            (0xfd_0000_0000, 0x3_0000_0000, 2),
        ]
    }

    fn regions(map: &MemoryMap) -> Vec<(u64, u64, RegionKind)> {
        map.regions().map(|(r, k)| (r.start, r.end, k)).collect()
    }

    fn ranges(a: &FrameAllocator) -> Vec<(u64, u64)> {
        a.free_ranges().map(|r| (r.start, r.end)).collect()
    }

    fn r(start: u64, end: u64) -> PhysRange {
        PhysRange::new(start, end)
    }

    use formats::test_rng::Rng;

    use RegionKind::*;

    #[test]
    fn range_helpers() {
        let a = r(0x1000, 0x3000);
        assert_eq!(a.len(), 0x2000);
        assert!(!a.is_empty());
        assert!(r(5, 5).is_empty() && r(6, 5).is_empty());
        assert_eq!(r(6, 5).len(), 0);
        assert!(a.contains(0x1000) && a.contains(0x2fff) && !a.contains(0x3000));
        assert!(a.overlaps(&r(0x2fff, 0x4000)));
        assert!(!a.overlaps(&r(0x3000, 0x4000)));
        assert!(!a.overlaps(&r(0x2000, 0x2000)));
        assert_eq!(a.intersect(&r(0x2000, 0x9000)), Some(r(0x2000, 0x3000)));
        assert_eq!(a.intersect(&r(0x3000, 0x9000)), None);
        assert_eq!(
            r(0x1001, 0x3fff).page_align_inward(),
            Some(r(0x2000, 0x3000))
        );
        assert_eq!(r(0x1001, 0x1fff).page_align_inward(), None);
        assert_eq!(r(u64::MAX - 5, u64::MAX).page_align_inward(), None);
        assert_eq!(
            r(0x1001, 0x1002).page_align_outward(),
            Some(r(0x1000, 0x2000))
        );
        assert_eq!(
            r(0xffff_ffff_ffff_f001, u64::MAX).page_align_outward(),
            Some(r(0xffff_ffff_ffff_f000, u64::MAX))
        );
        assert_eq!(r(3, 3).page_align_outward(), None);
        assert_eq!(PhysRange::from_start_len(u64::MAX, 1), None);
        assert_eq!(PhysRange::from_start_len(1, 2), Some(r(1, 3)));
        assert!(a.contains_range(&r(0x1000, 0x3000)) && !a.contains_range(&r(0x1000, 0x3001)));
        assert_eq!(a.to_string(), "[0x1000, 0x3000)");
    }

    #[test]
    fn e820_types() {
        assert_eq!(RegionKind::from_e820(1), Usable);
        assert_eq!(RegionKind::from_e820(2), Reserved);
        assert_eq!(RegionKind::from_e820(3), AcpiReclaimable);
        assert_eq!(RegionKind::from_e820(4), AcpiNvs);
        assert_eq!(RegionKind::from_e820(5), Bad);
        assert_eq!(RegionKind::from_e820(0), Reserved);
        assert_eq!(RegionKind::from_e820(12), Reserved);
        assert_eq!(RegionKind::from_e820(u32::MAX), Reserved);
    }

    #[test]
    fn qemu_map_is_kept_as_is() {
        let map = MemoryMap::from_e820(qemu_128m()).unwrap();
        assert_eq!(
            regions(&map),
            vec![
                (0, 0x9fc00, Usable),
                (0x9fc00, 0xa0000, Reserved),
                (0xf0000, 0x100000, Reserved),
                (0x100000, 0x7fe0000, Usable),
                (0x7fe0000, 0x8000000, Reserved),
                (0xfffc0000, 0x1_0000_0000, Reserved),
            ]
        );
        assert_eq!(map.usable_bytes(), 0x9fc00 + 0x7ee0000);
        assert_eq!(map.total(Reserved), 0x400 + 0x10000 + 0x20000 + 0x40000);
        assert_eq!(map.total(Bad), 0);
        assert_eq!(map.highest_address(), 0x1_0000_0000);
        assert_eq!(map.kind_at(0x9fc00), Some(Reserved));
        assert_eq!(map.kind_at(0xa0000), None);
        assert_eq!(map.kind_at(0x7fd_ffff), Some(Usable));
        assert_eq!(map.len(), 6);
    }

    #[test]
    fn map_above_4g() {
        let map = MemoryMap::from_e820(qemu_8g()).unwrap();
        assert_eq!(
            map.usable_bytes(),
            0x9fc00 + 0xbffe0000 - 0x100000 + 5 * GIB
        );
        assert_eq!(map.highest_address(), 0x100_0000_0000);
        assert_eq!(map.kind_at(0x1_0000_0000), Some(Usable));
        assert_eq!(map.kind_at(0x2_3fff_ffff), Some(Usable));
        assert_eq!(map.kind_at(0x2_4000_0000), None);
    }

    #[test]
    fn unsorted_overlapping_and_zero_length() {
        let map = MemoryMap::from_e820([
            (0x10_0000, 0x10_0000, 1),
            (0, 0, 2),
            (0x8_0000, 0, 1),
            (0x0, 0x8_0000, 1),
            // Reserved punched into the middle of usable memory.
            (0x14_0000, 0x1000, 2),
            // Usable overlapping the tail of a usable entry extends it.
            (0x1f_0000, 0x2_0000, 1),
            // Usable claiming already reserved memory loses.
            (0x14_0000, 0x800, 1),
            // Bad beats ACPI NVS beats reserved beats ACPI reclaimable.
            (0x30_0000, 0x4000, 3),
            (0x30_1000, 0x1000, 2),
            (0x30_1800, 0x1000, 4),
            (0x30_3000, 0x100, 5),
            (0x30_2000, 0x2000, 3),
            // Adjacent usable entries merge.
            (0x8_0000, 0x1000, 1),
        ])
        .unwrap();
        assert_eq!(
            regions(&map),
            vec![
                (0, 0x8_1000, Usable),
                (0x10_0000, 0x14_0000, Usable),
                (0x14_0000, 0x14_1000, Reserved),
                (0x14_1000, 0x21_0000, Usable),
                (0x30_0000, 0x30_1000, AcpiReclaimable),
                (0x30_1000, 0x30_1800, Reserved),
                (0x30_1800, 0x30_2800, AcpiNvs),
                (0x30_2800, 0x30_3000, AcpiReclaimable),
                (0x30_3000, 0x30_3100, Bad),
                (0x30_3100, 0x30_4000, AcpiReclaimable),
            ]
        );
    }

    #[test]
    fn overflowing_entry_is_an_error() {
        let err =
            MemoryMap::from_e820([(0, 0x1000, 1), (u64::MAX - 0xfff, 0x1000, 2)]).unwrap_err();
        assert_eq!(
            err,
            MemoryMapError::Overflow {
                addr: u64::MAX - 0xfff,
                len: 0x1000
            }
        );
        assert!(err.to_string().contains("runs past the end"));
        // Ending exactly at u64::MAX is representable and fine.
        let map = MemoryMap::from_e820([(u64::MAX - 0xfff, 0xfff, 2)]).unwrap();
        assert_eq!(map.highest_address(), u64::MAX);
    }

    #[test]
    fn too_many_regions_is_an_error_and_leaves_map_unchanged() {
        let entries = (0..200u64).map(|i| (i * 0x2000, 0x1000, 1 + (i % 2) as u32));
        let err = MemoryMap::from_e820(entries).unwrap_err();
        assert_eq!(
            err,
            MemoryMapError::TooManyRegions {
                capacity: MAX_REGIONS
            }
        );
        assert!(err.to_string().contains("128"));

        let mut map = MemoryMap::new();
        for i in 0..MAX_REGIONS as u64 {
            map.add(i * 0x2000, 0x1000, Usable).unwrap();
        }
        let before = regions(&map);
        // Splitting a region in the middle needs two more slots.
        assert!(map.add(0x400, 0x100, Reserved).is_err());
        assert_eq!(regions(&map), before);
        // Extending into a gap merges, but is counted before merging.
        assert!(map.add(0x1000, 0x1000, Usable).is_err());
        assert_eq!(regions(&map), before);
        // Entirely covered with the same kind: no new slot, accepted.
        map.add(0x0, 0x800, Usable).unwrap();
        // Re-kinding a whole region takes no slot either.
        map.add(0x2000, 0x1000, Bad).unwrap();
        assert_eq!(map.kind_at(0x2000), Some(Bad));
        assert_eq!(map.len(), MAX_REGIONS);
    }

    /// Random maps over a small space against a byte-by-byte model: the
    /// sanitized map must not depend on entry order and must equal "most
    /// restrictive kind per byte, merged".
    #[test]
    fn sanitizing_matches_model() {
        let kinds = [Usable, AcpiReclaimable, Reserved, AcpiNvs, Bad];
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..2000 {
            let n = 1 + rng.below(12) as usize;
            let mut entries = Vec::new();
            for _ in 0..n {
                let addr = rng.below(64);
                let len = rng.below(24);
                let ty = 1 + rng.below(6) as u32;
                entries.push((addr, len, ty));
            }
            let mut model: [Option<RegionKind>; 96] = [None; 96];
            for &(addr, len, ty) in &entries {
                let k = RegionKind::from_e820(ty);
                for b in addr..addr + len {
                    let slot = &mut model[b as usize];
                    if slot.is_none_or(|old| old.restrictiveness() < k.restrictiveness()) {
                        *slot = Some(k);
                    }
                }
            }
            let mut expected: Vec<(u64, u64, RegionKind)> = Vec::new();
            for (b, k) in model.iter().enumerate() {
                let Some(k) = *k else { continue };
                let b = b as u64;
                match expected.last_mut() {
                    Some(last) if last.1 == b && last.2 == k => last.1 = b + 1,
                    _ => expected.push((b, b + 1, k)),
                }
            }
            let map = MemoryMap::from_e820(entries.iter().copied()).unwrap();
            assert_eq!(regions(&map), expected, "entries {entries:?}");
            entries.reverse();
            let reversed = MemoryMap::from_e820(entries.iter().copied()).unwrap();
            assert_eq!(regions(&reversed), expected, "reversed entries {entries:?}");
            for k in kinds {
                let bytes = model.iter().filter(|m| **m == Some(k)).count() as u64;
                assert_eq!(map.total(k), bytes);
            }
        }
    }

    #[test]
    fn allocator_on_qemu_map_with_reserved_carveouts() {
        let map = MemoryMap::from_e820(qemu_128m()).unwrap();
        let reserved = [
            // Low memory, real-mode IVT/BDA and the like.
            r(0, 0x1000),
            // Kernel image, deliberately unaligned: whole pages go.
            r(0x20_0800, 0x40_0100),
            // Boot info at the very end of usable RAM.
            r(0x7fd_f000, 0x7fe_0000),
            // Modules straddling the end of a usable region.
            r(0x9f000, 0xa_5000),
        ];
        let a = FrameAllocator::new(&map, &reserved).unwrap();
        assert_eq!(
            ranges(&a),
            vec![
                (0x1000, 0x9f000),
                (0x10_0000, 0x20_0000),
                (0x40_1000, 0x7fd_f000),
            ]
        );
        assert_eq!(a.free_bytes(), 0x9e000 + 0x10_0000 + 0x7fd_f000 - 0x40_1000);
        assert_eq!(a.managed_bytes(), a.free_bytes());
        assert_eq!(a.free_pages() * PAGE_SIZE, a.free_bytes());
    }

    #[test]
    fn allocator_prefers_high_memory_and_respects_limits() {
        let map = MemoryMap::from_e820(qemu_8g()).unwrap();
        let mut a = FrameAllocator::new(&map, &[r(0, 0x1000)]).unwrap();
        let top = 0x2_4000_0000;
        assert_eq!(a.alloc(1, 1), Ok(top - PAGE_SIZE));
        // 2 MiB aligned: skips the partially used top 2 MiB.
        assert_eq!(a.alloc(512, 512), Ok(top - 2 * 2 * MIB));
        assert_eq!(a.alloc(1, 1), Ok(top - 2 * PAGE_SIZE));
        // 32-bit DMA below 4 GiB comes from the top of the low RAM.
        assert_eq!(a.alloc_below(4, 1, 1 << 32), Ok(0xbffe0000 - 4 * PAGE_SIZE));
        // SMP trampoline below 1 MiB.
        assert_eq!(a.alloc_below(1, 1, 0x10_0000), Ok(0x9e000));
        // Unaligned limit: the allocation still ends at or below it.
        assert_eq!(a.alloc_below(1, 1, 0x9_e800), Ok(0x9d000));
        assert_eq!(
            a.alloc_below(1, 1, 0x1000),
            Err(AllocError::OutOfMemory {
                pages: 1,
                align_pages: 1
            })
        );
        assert_eq!(a.alloc_below(1, 1, 0), a.alloc_below(1, 1, 0x1fff));
        assert_eq!(a.alloc_below(1, 1, 0x2000), Ok(0x1000));
    }

    #[test]
    fn alignment_of_2m() {
        let map = MemoryMap::from_e820([(0x1000, 0x80_0000, 1)]).unwrap();
        let mut a = FrameAllocator::new(&map, &[]).unwrap();
        // Usable [0x1000, 0x801000): 2 MiB-aligned blocks at 6, 4, 2 MiB.
        assert_eq!(a.alloc(512, 512), Ok(6 * MIB));
        assert_eq!(a.alloc(512, 512), Ok(4 * MIB));
        assert_eq!(a.alloc(512, 512), Ok(2 * MIB));
        assert_eq!(
            a.alloc(512, 512),
            Err(AllocError::OutOfMemory {
                pages: 512,
                align_pages: 512
            })
        );
        // Smaller allocations still fit around them.
        assert_eq!(a.alloc(1, 1), Ok(0x800000));
        assert_eq!(a.alloc(16, 16), Ok(0x1f0000));
        assert_eq!(ranges(&a), vec![(0x1000, 0x1f0000)]);
    }

    #[test]
    fn alloc_argument_errors() {
        let map = MemoryMap::from_e820(qemu_128m()).unwrap();
        let mut a = FrameAllocator::new(&map, &[]).unwrap();
        let before = ranges(&a);
        assert_eq!(a.alloc(0, 1), Err(AllocError::ZeroPages));
        assert_eq!(
            a.alloc(1, 0),
            Err(AllocError::BadAlignment { align_pages: 0 })
        );
        assert_eq!(
            a.alloc(1, 3),
            Err(AllocError::BadAlignment { align_pages: 3 })
        );
        assert_eq!(
            a.alloc(1, 1 << 60),
            Err(AllocError::BadAlignment {
                align_pages: 1 << 60
            })
        );
        assert_eq!(
            a.alloc(u64::MAX, 1),
            Err(AllocError::TooLarge { pages: u64::MAX })
        );
        assert_eq!(
            a.alloc(1 << 40, 1),
            Err(AllocError::OutOfMemory {
                pages: 1 << 40,
                align_pages: 1
            })
        );
        assert_eq!(ranges(&a), before);
        for e in [
            AllocError::ZeroPages,
            AllocError::BadAlignment { align_pages: 3 },
            AllocError::TooLarge { pages: 1 },
            AllocError::TooFragmented { pages: 1 },
        ] {
            assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn exhaustion_then_free_everything_restores_single_range() {
        let map = MemoryMap::from_e820([(0x10_0000, 64 * PAGE_SIZE, 1)]).unwrap();
        let mut a = FrameAllocator::new(&map, &[]).unwrap();
        let mut got = Vec::new();
        for _ in 0..64 {
            got.push(a.alloc(1, 1).unwrap());
        }
        assert_eq!(a.free_bytes(), 0);
        assert!(matches!(a.alloc(1, 1), Err(AllocError::OutOfMemory { .. })));
        // Top-down: addresses descend.
        assert!(got.windows(2).all(|w| w[0] == w[1] + PAGE_SIZE));
        // Free in an order that forces every kind of coalescing.
        let mut order: Vec<usize> = (0..64).step_by(2).collect();
        order.extend((1..64).step_by(2));
        for i in order {
            a.free(r(got[i], got[i] + PAGE_SIZE)).unwrap();
        }
        assert_eq!(ranges(&a), vec![(0x10_0000, 0x10_0000 + 64 * PAGE_SIZE)]);
    }

    #[test]
    fn free_errors_leave_allocator_unchanged() {
        let map = MemoryMap::from_e820(qemu_128m()).unwrap();
        let mut a = FrameAllocator::new(&map, &[r(0x20_0000, 0x40_0000)]).unwrap();
        let initial = ranges(&a);
        let p = a.alloc(4, 1).unwrap();
        let check = |a: &mut FrameAllocator, range: PhysRange, want: FreeError| {
            assert_eq!(a.free(range), Err(want));
            assert!(!want.to_string().is_empty());
        };
        check(&mut a, r(p, p), FreeError::Empty { range: r(p, p) });
        let bad = r(p + 1, p + PAGE_SIZE);
        check(&mut a, bad, FreeError::Misaligned { range: bad });
        // Kernel image, a reserved hole, beyond RAM.
        for range in [
            r(0x20_0000, 0x20_1000),
            r(0xa_0000, 0xa_1000),
            r(1 << 40, (1 << 40) + PAGE_SIZE),
        ] {
            check(&mut a, range, FreeError::NotManaged { range });
        }
        // Straddling the end of usable memory.
        let edge = r(0x9f000, 0xa_1000);
        check(&mut a, edge, FreeError::NotManaged { range: edge });
        // Double free, whole or partial.
        a.free(r(p, p + PAGE_SIZE)).unwrap();
        let after_one = ranges(&a);
        check(
            &mut a,
            r(p, p + 2 * PAGE_SIZE),
            FreeError::DoubleFree {
                range: r(p, p + 2 * PAGE_SIZE),
                already_free: r(p, p + PAGE_SIZE),
            },
        );
        let around = r(p - PAGE_SIZE, p + 2 * PAGE_SIZE);
        check(
            &mut a,
            around,
            FreeError::DoubleFree {
                range: around,
                already_free: r(p - PAGE_SIZE, p + PAGE_SIZE),
            },
        );
        assert_eq!(ranges(&a), after_one);
        a.free(r(p + PAGE_SIZE, p + 4 * PAGE_SIZE)).unwrap();
        assert_eq!(ranges(&a), initial);
        assert_eq!(a.free_bytes(), a.managed_bytes());
    }

    #[test]
    fn add_reclaims_reserved_memory() {
        let map = MemoryMap::from_e820(qemu_128m()).unwrap();
        let mut a = FrameAllocator::new(&map, &[r(0x20_0000, 0x40_0000)]).unwrap();
        let boot_info = r(0x30_0000, 0x40_0000);
        assert_eq!(
            a.free(boot_info),
            Err(FreeError::NotManaged { range: boot_info })
        );
        a.add(boot_info).unwrap();
        assert_eq!(
            a.add(boot_info),
            Err(FreeError::AlreadyManaged { range: boot_info })
        );
        assert_eq!(
            a.free(boot_info),
            Err(FreeError::DoubleFree {
                range: boot_info,
                already_free: boot_info
            })
        );
        assert_eq!(ranges(&a)[1], (0x10_0000, 0x20_0000));
        assert_eq!(ranges(&a)[2], (0x30_0000, 0x7fe_0000));
        let managed = a.managed_bytes();
        let x = a.alloc_below(1, 1, 0x30_1000).unwrap();
        assert_eq!(x, 0x30_0000);
        a.free(r(x, x + PAGE_SIZE)).unwrap();
        assert_eq!(a.managed_bytes(), managed);
    }

    #[test]
    fn take_all_drains() {
        let map = MemoryMap::from_e820(qemu_8g()).unwrap();
        let mut a = FrameAllocator::new(&map, &[r(0, 0x10_0000)]).unwrap();
        let free = a.free_bytes();
        let taken: Vec<PhysRange> = a.take_all().collect();
        assert_eq!(taken.iter().map(|r| r.len()).sum::<u64>(), free);
        assert_eq!(taken.len(), 2);
        assert_eq!(a.free_bytes(), 0);
        assert!(a.alloc(1, 1).is_err());
        // Still managed: can be given back.
        a.free(taken[0]).unwrap();
        assert_eq!(a.free_bytes(), taken[0].len());
    }

    #[test]
    fn capacity_exhaustion_is_an_error_and_unchanged() {
        let pages = 2 * MAX_FREE_RANGES as u64 + 8;
        let map = MemoryMap::from_e820([(0, pages * PAGE_SIZE, 1)]).unwrap();
        let mut a = FrameAllocator::new(&map, &[]).unwrap();
        for _ in 0..pages {
            a.alloc(1, 1).unwrap();
        }
        let mut freed = 0;
        let mut refused = None;
        for p in (0..pages).step_by(2) {
            let range = r(p * PAGE_SIZE, (p + 1) * PAGE_SIZE);
            let before = ranges(&a);
            match a.free(range) {
                Ok(()) => freed += 1,
                Err(e) => {
                    assert_eq!(e, FreeError::TooFragmented { range });
                    assert_eq!(ranges(&a), before);
                    refused = Some(range);
                    break;
                }
            }
        }
        assert_eq!(freed, MAX_FREE_RANGES);
        let refused = refused.unwrap();
        // Freeing next to an existing free range needs no slot, and makes one.
        a.free(r(PAGE_SIZE, 2 * PAGE_SIZE)).unwrap();
        a.free(refused).unwrap();
        // Taking a single-page range whole needs no slot either.
        let before = ranges(&a);
        assert_eq!(a.alloc(1, 1), Ok(before.last().unwrap().0));
    }

    #[test]
    fn alloc_with_full_list_refuses_splits() {
        // Free ranges of 3 pages starting at odd pages, separated by one
        // allocated page: a 2-aligned page is only available in the middle,
        // which would split the range.
        let total = 4 * MAX_FREE_RANGES as u64;
        let map = MemoryMap::from_e820([(0, total * PAGE_SIZE, 1)]).unwrap();
        let mut a = FrameAllocator::new(&map, &[]).unwrap();
        for _ in 0..total {
            a.alloc(1, 1).unwrap();
        }
        for i in 0..MAX_FREE_RANGES as u64 {
            let p = 4 * i + 1;
            a.free(r(p * PAGE_SIZE, (p + 3) * PAGE_SIZE)).unwrap();
        }
        let before = ranges(&a);
        assert_eq!(a.alloc(1, 2), Err(AllocError::TooFragmented { pages: 1 }));
        assert_eq!(ranges(&a), before);
        // Top-of-range fits need no split.
        assert_eq!(a.alloc(1, 1), Ok((total - 1) * PAGE_SIZE));
        // The top range now ends right after a 2-aligned page: no split.
        assert_eq!(a.alloc(1, 2), Ok((total - 4 + 1 + 1) * PAGE_SIZE));
    }

    #[test]
    fn init_error_when_reserved_fragments_too_much() {
        let map = MemoryMap::from_e820([(0, 1 << 30, 1)]).unwrap();
        let reserved: Vec<PhysRange> = (0..MAX_FREE_RANGES as u64)
            .map(|i| r((2 * i + 1) * PAGE_SIZE, (2 * i + 2) * PAGE_SIZE))
            .collect();
        let err = FrameAllocator::new(&map, &reserved).unwrap_err();
        assert_eq!(
            err,
            InitError::TooFragmented {
                capacity: MAX_FREE_RANGES
            }
        );
        assert!(err.to_string().contains("256"));
        let mut a = FrameAllocator::new(&map, &[]).unwrap();
        assert!(a.init(&map, &reserved).is_err());
        assert_eq!(a.free_bytes(), 0);
        assert_eq!(a.managed_bytes(), 0);
        // One fewer split fits.
        assert!(FrameAllocator::new(&map, &reserved[1..]).is_ok());
    }

    #[test]
    fn reserved_ranges_at_edges_and_overlapping_each_other() {
        let map = MemoryMap::from_e820([(0x1000, 0x10_000, 1), (0x20_000, 0x10_000, 1)]).unwrap();
        let a = FrameAllocator::new(
            &map,
            &[
                r(0x1000, 0x2000),     // first page
                r(0x10_000, 0x11_000), // last page
                r(0x5000, 0x8000),
                r(0x6000, 0x9001), // overlaps the previous one
                r(0x1f_fff, 0x20_001),
                r(0x2f_000, 0x40_000), // beyond the end
                r(0x9000, 0x9000),     // empty: ignored
                r(9, 3),               // inverted: empty, ignored
            ],
        )
        .unwrap();
        assert_eq!(
            ranges(&a),
            vec![(0x2000, 0x5000), (0xa000, 0x10_000), (0x21_000, 0x2f_000)]
        );
        let whole = FrameAllocator::new(&map, &[r(0, u64::MAX)]).unwrap();
        assert_eq!(whole.free_bytes(), 0);
    }

    /// Shadow model: a page bitmap over a small map with holes and reserved
    /// pages. Every allocation must equal the model's highest aligned fit, lie
    /// in allocatable pages, and never overlap an outstanding allocation.
    #[test]
    fn random_ops_match_shadow_model() {
        const PAGES: u64 = 2048;
        let entries = [
            (0x0, 0x9_fc00, 1),
            (0x9_fc00, 0x400, 2),
            (0x10_0000, 0x40_0000, 1),
            (0x20_0000, 0x2_3000, 2),
            (0x50_0000, (PAGES * PAGE_SIZE) - 0x50_0000, 1),
            (0x60_0000, 0x1000, 5),
            (0x70_0000, 0x100, 4),
        ];
        let map = MemoryMap::from_e820(entries).unwrap();
        let reserved = [r(0, 0x1000), r(0x40_0000, 0x41_0800)];
        let allocatable = |p: u64| {
            let a = p * PAGE_SIZE;
            let page = r(a, a + PAGE_SIZE);
            map.regions()
                .any(|(reg, k)| k == Usable && reg.contains_range(&page))
                && !reserved
                    .iter()
                    .any(|x| x.page_align_outward().unwrap().overlaps(&page))
        };
        let initial_free: Vec<bool> = (0..PAGES).map(allocatable).collect();

        for seed in [1u64, 2, 3, 0xdead_beef] {
            let mut a = FrameAllocator::new(&map, &reserved).unwrap();
            let mut model = initial_free.clone();
            let mut outstanding: Vec<PhysRange> = Vec::new();
            let mut rng = Rng(seed);
            for step in 0..5000 {
                let op = rng.below(10);
                if op < 6 && outstanding.len() < 100 {
                    let max_pages = if rng.below(4) == 0 { 64 } else { 4 };
                    let pages = 1 + rng.below(max_pages);
                    let max_shift = if rng.below(8) == 0 { 10 } else { 3 };
                    let align = 1 << rng.below(max_shift);
                    let limit = if rng.below(4) == 0 {
                        rng.below(PAGES * PAGE_SIZE + 1)
                    } else {
                        u64::MAX
                    };
                    let expected = (0..PAGES)
                        .rev()
                        .filter(|s| s % align == 0)
                        .filter(|s| (s + pages) * PAGE_SIZE <= limit.min(PAGES * PAGE_SIZE))
                        .find(|&s| (s..s + pages).all(|p| model[p as usize]));
                    let got = a.alloc_below(pages, align, limit);
                    match expected {
                        Some(s) => {
                            assert_eq!(got, Ok(s * PAGE_SIZE), "seed {seed} step {step}");
                            for p in s..s + pages {
                                assert!(initial_free[p as usize]);
                                model[p as usize] = false;
                            }
                            let range = r(s * PAGE_SIZE, (s + pages) * PAGE_SIZE);
                            assert!(!outstanding.iter().any(|o| o.overlaps(&range)));
                            outstanding.push(range);
                        }
                        None => assert_eq!(
                            got,
                            Err(AllocError::OutOfMemory {
                                pages,
                                align_pages: align
                            }),
                            "seed {seed} step {step}"
                        ),
                    }
                } else if !outstanding.is_empty() {
                    let i = rng.below(outstanding.len() as u64) as usize;
                    let range = outstanding.swap_remove(i);
                    // Sometimes free only a part of the allocation.
                    let pages = range.len() / PAGE_SIZE;
                    let cut = rng.below(pages);
                    let (now, later) = (
                        r(range.start, range.start + (pages - cut) * PAGE_SIZE),
                        r(range.start + (pages - cut) * PAGE_SIZE, range.end),
                    );
                    a.free(now).unwrap();
                    for p in now.start / PAGE_SIZE..now.end / PAGE_SIZE {
                        model[p as usize] = true;
                    }
                    if !later.is_empty() {
                        outstanding.push(later);
                    }
                    // A double free of what was just freed is refused.
                    let before = ranges(&a);
                    assert!(matches!(a.free(now), Err(FreeError::DoubleFree { .. })));
                    assert_eq!(ranges(&a), before);
                }
                // The free list is exactly the model, as maximal runs.
                if step % 50 == 0 {
                    let mut runs = Vec::new();
                    for p in 0..PAGES {
                        if model[p as usize] {
                            match runs.last_mut() {
                                Some((_, e)) if *e == p * PAGE_SIZE => *e += PAGE_SIZE,
                                _ => runs.push((p * PAGE_SIZE, (p + 1) * PAGE_SIZE)),
                            }
                        }
                    }
                    assert_eq!(ranges(&a), runs, "seed {seed} step {step}");
                }
            }
            for range in outstanding.drain(..) {
                a.free(range).unwrap();
            }
            let fresh = FrameAllocator::new(&map, &reserved).unwrap();
            assert_eq!(ranges(&a), ranges(&fresh));
        }
    }

    /// Heavy fragmentation with the list at capacity: the allocator may
    /// refuse with `TooFragmented`, but must stay consistent and never hand
    /// out a page twice or a page it does not own.
    #[test]
    fn random_ops_under_fragmentation_stay_safe() {
        const PAGES: u64 = 8 * MAX_FREE_RANGES as u64;
        let map = MemoryMap::from_e820([(0x10_0000, PAGES * PAGE_SIZE, 1)]).unwrap();
        let base = 0x10_0000 / PAGE_SIZE;
        let mut a = FrameAllocator::new(&map, &[]).unwrap();
        let mut owned: BTreeSet<u64> = BTreeSet::new();
        let mut outstanding: Vec<PhysRange> = Vec::new();
        // Start full, so that random frees scatter holes everywhere.
        while let Ok(addr) = a.alloc(1, 1) {
            owned.insert(addr / PAGE_SIZE);
            outstanding.push(r(addr, addr + PAGE_SIZE));
        }
        let mut rng = Rng(77);
        let mut refused = (0, 0);
        for _ in 0..40000 {
            if rng.below(2) == 0 {
                let pages = 1 + rng.below(3);
                let align = 1 << rng.below(3);
                let before = ranges(&a);
                match a.alloc(pages, align) {
                    Ok(addr) => {
                        assert_eq!(addr % (align * PAGE_SIZE), 0);
                        for p in addr / PAGE_SIZE..addr / PAGE_SIZE + pages {
                            assert!(p >= base && p < base + PAGES);
                            assert!(owned.insert(p), "page {p:#x} handed out twice");
                        }
                        outstanding.push(r(addr, addr + pages * PAGE_SIZE));
                    }
                    Err(e) => {
                        if e == (AllocError::TooFragmented { pages }) {
                            refused.0 += 1;
                        }
                        assert_eq!(ranges(&a), before);
                    }
                }
            } else if !outstanding.is_empty() {
                let i = rng.below(outstanding.len() as u64) as usize;
                let range = outstanding[i];
                let before = ranges(&a);
                match a.free(range) {
                    Ok(()) => {
                        outstanding.swap_remove(i);
                        for p in range.start / PAGE_SIZE..range.end / PAGE_SIZE {
                            owned.remove(&p);
                        }
                    }
                    Err(e) => {
                        assert_eq!(e, FreeError::TooFragmented { range });
                        refused.1 += 1;
                        assert_eq!(ranges(&a), before);
                    }
                }
            }
            assert!(a.free_ranges().count() <= MAX_FREE_RANGES);
            assert_eq!(
                a.free_bytes() + owned.len() as u64 * PAGE_SIZE,
                PAGES * PAGE_SIZE
            );
        }
        // The point of this test is the refusal paths; make sure both ran.
        assert!(refused.0 > 0 && refused.1 > 0, "{refused:?}");
    }
}
