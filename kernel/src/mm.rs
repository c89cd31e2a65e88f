//! Kernel memory: the physical frame allocator, the kernel's page tables,
//! the direct map and device (MMIO) mappings. The kernel has no heap: its
//! few tables are static or fixed-capacity, and kernel objects are made from
//! the creator's untyped memory, so no allocation can fail with a panic.
//!
//! Virtual layout (top half only; the bottom half belongs to user space):
//!
//! | range                                  | what                                  |
//! |----------------------------------------|---------------------------------------|
//! | `0xffff_8000_0000_0000 + phys`          | direct map of RAM and ACPI memory, write-back, NX; firmware tables elsewhere mapped on demand |
//! | `0xffff_a000_0000_0000 + phys`          | device memory (MMIO), uncached, NX    |
//! | `0xffff_ffff_8000_0000 + phys`          | the kernel image (text RX, rodata R, data RW) |
//!
//! Invariants: kernel page tables live below 4 GiB (so the boot tables can
//! reach them while the kernel builds its own); a frame is either free in
//! [`FRAMES`], or owned by exactly one user (page tables, later the
//! root task's untyped memory); the page below the boot stack is unmapped.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use kcore::paging::{CacheAttr, MapFlags, PageSize, PageTable, TableMemory, PAT_MSR_VALUE};
use kcore::phys::{FrameAllocator, PhysRange, RegionKind, PAGE_SIZE};
use spin::Mutex;

use crate::arch::cpu;
use crate::pvh::BootInfo;

/// Pages below 1 MiB kept for the application processors' start-up code
/// and its page tables (`smp.rs`), and where they are (0: none found).
pub const AP_TRAMPOLINE_PAGES: u64 = 4;
static AP_TRAMPOLINE: AtomicU64 = AtomicU64::new(0);

/// The physical address of the start-up pages below 1 MiB, if there are any.
pub fn ap_trampoline() -> Option<u64> {
    match AP_TRAMPOLINE.load(Ordering::Relaxed) {
        0 => None,
        phys => Some(phys),
    }
}

/// Takes `pages` contiguous frames from the kernel's reserve for the
/// kernel's own use (application processors' stacks); never returned.
pub fn alloc_kernel_frames(pages: u64) -> Option<u64> {
    FRAMES.lock().as_mut()?.alloc(pages, 1).ok()
}

pub const DIRECT_MAP_BASE: u64 = 0xffff_8000_0000_0000;
pub const MMIO_BASE: u64 = 0xffff_a000_0000_0000;
/// Where the application processors' kernel stacks are mapped, each below
/// an unmapped guard page ([`map_kernel_stack`]).
pub const KERNEL_STACKS_BASE: u64 = 0xffff_c000_0000_0000;
pub const KERNEL_VMA: u64 = 0xffff_ffff_8000_0000;
const FOUR_GIB: u64 = 1 << 32;

/// The physical frames nobody owns yet.
pub static FRAMES: Mutex<Option<FrameAllocator>> = Mutex::new(None);
/// Physical address of the kernel's PML4 (shared top half of every space).
static KERNEL_PML4: AtomicU64 = AtomicU64::new(0);
/// Serialises changes to the kernel's page tables.
static KERNEL_TABLES_LOCK: Mutex<()> = Mutex::new(());

unsafe extern "C" {
    static __kernel_phys_start: u8;
    static __kernel_phys_end: u8;
    static __text_start: u8;
    static __text_end: u8;
    static __rodata_start: u8;
    static __rodata_end: u8;
    static __data_start: u8;
    static __data_end: u8;
    static boot_kernel_stack_guard: u8;
}

/// Address of a linker-script symbol.
macro_rules! symbol_addr {
    ($sym:ident) => {
        // Only the address of the linker symbol is taken, never its value.
        &raw const $sym as u64
    };
}

/// Entry `index` (taken modulo 512) of the page table at `table_phys`,
/// read through the direct map.
///
/// # Safety
/// `table_phys` must be a page-table frame in RAM (direct-mapped).
pub unsafe fn read_table_entry(table_phys: u64, index: usize) -> u64 {
    // SAFETY: the caller names a direct-mapped table; index & 511 keeps the
    // access inside its 4 KiB.
    unsafe { core::ptr::read_volatile((phys_to_virt(table_phys) as *const u64).add(index & 511)) }
}

/// Writes entry `index` (modulo 512) of the page table at `table_phys`.
///
/// # Safety
/// As for [`read_table_entry`], and the caller must own the table (no
/// concurrent writer) and keep the page-table invariants of kcore::paging.
pub unsafe fn write_table_entry(table_phys: u64, index: usize, value: u64) {
    // SAFETY: as in read_table_entry; ownership is the caller's promise.
    unsafe {
        core::ptr::write_volatile(
            (phys_to_virt(table_phys) as *mut u64).add(index & 511),
            value,
        )
    }
}

/// Whether the direct map covers the frame at `phys` (RAM and ACPI memory
/// do; device memory does not). The kernel reads user memory through the
/// direct map, so it must ask before touching a user frame.
pub fn is_direct_mapped(phys: u64) -> bool {
    phys < DIRECT_MAP_LIMIT && translate(kernel_page_table(), phys_to_virt(phys)).is_some()
}

/// Physical addresses at or above this cannot be direct-mapped.
const DIRECT_MAP_LIMIT: u64 = MMIO_BASE - DIRECT_MAP_BASE;

/// Physical address of the kernel's own PML4 (the CR3 value when no user
/// address space is active).
pub fn kernel_page_table() -> u64 {
    KERNEL_PML4.load(Ordering::Acquire)
}

pub fn phys_to_virt(phys: u64) -> u64 {
    DIRECT_MAP_BASE + phys
}

/// The kernel image's physical extent (loaded by the boot loader).
pub fn kernel_image() -> PhysRange {
    PhysRange {
        start: symbol_addr!(__kernel_phys_start),
        end: symbol_addr!(__kernel_phys_end),
    }
}

/// [`TableMemory`] over the direct map, with tables taken from [`FRAMES`].
struct KernelTableMemory<'a> {
    frames: &'a mut FrameAllocator,
}

impl TableMemory for KernelTableMemory<'_> {
    fn read_entry(&self, table_phys: u64, index: usize) -> u64 {
        // SAFETY: table_phys is a page-table frame below 4 GiB, which both
        // the boot and the kernel direct map cover.
        unsafe { read_table_entry(table_phys, index) }
    }

    fn write_entry(&mut self, table_phys: u64, index: usize, value: u64) {
        // SAFETY: as in read_entry; page-table frames are owned by this
        // module and written only under KERNEL_TABLES_LOCK or during boot.
        unsafe { write_table_entry(table_phys, index, value) }
    }

    fn alloc_table(&mut self) -> Option<u64> {
        let phys = self.frames.alloc_below(1, 1, FOUR_GIB).ok()?;
        // SAFETY: the frame was just taken from the free pool, so nothing
        // else references it; it is direct-mapped (below 4 GiB).
        unsafe { core::ptr::write_bytes(phys_to_virt(phys) as *mut u8, 0, PAGE_SIZE as usize) }
        Some(phys)
    }

    fn free_table(&mut self, phys: u64) {
        // A failure here would mean the table frame was already free: a bug
        // in paging, reported rather than silently ignored.
        if let Err(e) = self.frames.free(PhysRange {
            start: phys,
            end: phys + PAGE_SIZE,
        }) {
            crate::kprintln!("warning: freeing page-table frame {phys:#x}: {e}");
        }
    }
}

#[derive(Debug)]
pub enum MmInitError {
    Frames(kcore::phys::InitError),
    Map(&'static str, kcore::paging::MapError),
    NoTableMemory,
}

impl fmt::Display for MmInitError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::Frames(e) => write!(f, "cannot build the frame allocator: {e}"),
            Self::Map(what, e) => write!(f, "cannot map {what}: {e}"),
            Self::NoTableMemory => write!(f, "no memory below 4 GiB for the kernel page tables"),
        }
    }
}

/// Builds the frame allocator and the kernel page tables, and switches to
/// the new tables.
pub fn init(boot: &BootInfo) -> Result<(), MmInitError> {
    let mut reserved = [PhysRange { start: 0, end: 0 }; 16];
    let mut count = 0;
    // Page 0: never hand out a frame whose address is null.
    reserved[count] = PhysRange {
        start: 0,
        end: PAGE_SIZE,
    };
    count += 1;
    reserved[count] = kernel_image();
    count += 1;
    for module in boot.modules().iter().take(reserved.len() - count) {
        reserved[count] = *module;
        count += 1;
    }
    let mut frames =
        FrameAllocator::new(&boot.memory_map, &reserved[..count]).map_err(MmInitError::Frames)?;
    // The application processors start in real mode on a page below 1 MiB
    // (`smp.rs`): taken first, before anything else can use low memory.
    let trampoline = frames
        .alloc_below(AP_TRAMPOLINE_PAGES, 1, 1 << 20)
        .unwrap_or(0);
    AP_TRAMPOLINE.store(trampoline, Ordering::Relaxed);

    let mut memory = KernelTableMemory {
        frames: &mut frames,
    };
    let root = memory.alloc_table().ok_or(MmInitError::NoTableMemory)?;
    let table = PageTable::new(root);
    map_kernel_image(&table, &mut memory)?;
    map_direct(&table, &mut memory, boot)?;

    // Address spaces copy the kernel half's PML4 entries when they are
    // created; a kernel-half PML4 entry created later would be missing from
    // them. The MMIO window and the kernel stacks are the regions that grow
    // after boot, so their PML4 entries are created now.
    for base in [MMIO_BASE, KERNEL_STACKS_BASE] {
        let slot = ((base >> 39) & 511) as usize;
        if memory.read_entry(root, slot) == 0 {
            let pdpt = memory.alloc_table().ok_or(MmInitError::NoTableMemory)?;
            memory.write_entry(
                root,
                slot,
                pdpt | kcore::paging::bits::PRESENT | kcore::paging::bits::WRITABLE,
            );
        }
    }

    // SAFETY: PAT index 0 stays write-back, the type every existing mapping
    // uses, so reprogramming the PAT changes no current mapping's type.
    unsafe { cpu::wrmsr(cpu::MSR_PAT, PAT_MSR_VALUE) };
    // SAFETY: the new tables map the kernel image (this code, its data and
    // the boot stack we run on) and the direct map at the same addresses as
    // the boot tables do; the identity map of the boot code is no longer used.
    unsafe { cpu::write_cr3(root) };
    cpu::flush_tlb_all();
    KERNEL_PML4.store(root, Ordering::Release);

    *FRAMES.lock() = Some(frames);
    Ok(())
}

fn map_kernel_image(table: &PageTable, memory: &mut KernelTableMemory) -> Result<(), MmInitError> {
    let guard = symbol_addr!(boot_kernel_stack_guard);
    let sections = [
        (
            "kernel text",
            symbol_addr!(__text_start),
            symbol_addr!(__text_end),
            false,
            true,
        ),
        (
            "kernel rodata",
            symbol_addr!(__rodata_start),
            symbol_addr!(__rodata_end),
            false,
            false,
        ),
        (
            "kernel data",
            symbol_addr!(__data_start),
            symbol_addr!(__data_end),
            true,
            false,
        ),
    ];
    for (what, start, end, writable, executable) in sections {
        let flags = MapFlags {
            writable,
            user: false,
            executable,
            global: true,
        };
        let mut virt = start;
        while virt < end {
            if virt != guard {
                table
                    .map(
                        memory,
                        virt,
                        virt - KERNEL_VMA,
                        PageSize::Size4K,
                        flags,
                        CacheAttr::WriteBack,
                    )
                    .map_err(|e| MmInitError::Map(what, e))?;
            }
            virt += PAGE_SIZE;
        }
    }
    Ok(())
}

/// Direct-maps RAM and ACPI memory plus the first MiB (BIOS data, the RSDP),
/// with neighbouring regions merged after page alignment.
fn map_direct(
    table: &PageTable,
    memory: &mut KernelTableMemory,
    boot: &BootInfo,
) -> Result<(), MmInitError> {
    let flags = MapFlags {
        writable: true,
        user: false,
        executable: false,
        global: true,
    };
    let allow_1g = cpu::has_1g_pages();
    let mut map = |range: PhysRange| {
        table
            .map_range(
                memory,
                phys_to_virt(range.start),
                range.start,
                range.end - range.start,
                flags,
                CacheAttr::WriteBack,
                allow_1g,
            )
            .map_err(|e| MmInitError::Map("the direct map", e))
    };
    let mut pending = PhysRange {
        start: 0,
        end: 1 << 20,
    };
    // Reserved regions can be device memory (QEMU lists the PCI ECAM window
    // as reserved): never map those write-back. ACPI tables that live there
    // are mapped on demand by `map_firmware`.
    let ram = boot.memory_map.regions().filter(|(_, kind)| {
        matches!(
            kind,
            RegionKind::Usable | RegionKind::AcpiReclaimable | RegionKind::AcpiNvs
        )
    });
    for (range, _kind) in ram {
        let start = range.start & !(PAGE_SIZE - 1);
        let end = range.end.saturating_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1);
        if start <= pending.end {
            pending.end = pending.end.max(end);
        } else {
            map(pending)?;
            pending = PhysRange { start, end };
        }
    }
    map(pending)
}

#[derive(Debug)]
pub enum MapMmioError {
    NotInitialised,
    Map(kcore::paging::MapError),
}

impl fmt::Display for MapMmioError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::NotInitialised => write!(f, "memory management is not initialised"),
            Self::Map(e) => write!(f, "{e}"),
        }
    }
}

/// Makes kernel stack `index` (an application processor's): `pages` fresh
/// frames mapped write-back, not executable, in the kernel-stack window,
/// below them one page left unmapped, so that an overflow faults (a
/// double fault on the CPU's IST stack) instead of overwriting whatever
/// lies below. Returns the stack's top; `None` without the memory for it
/// (frames or page tables). Slot `index` spans `pages + 1` pages; each
/// index is mapped once.
pub fn map_kernel_stack(index: u64, pages: u64) -> Option<u64> {
    let frames_phys = alloc_kernel_frames(pages)?;
    let guard = KERNEL_STACKS_BASE + index * (pages + 1) * PAGE_SIZE;
    with_kernel_tables(|table, memory| {
        (0..pages).try_for_each(|page| {
            table.map(
                memory,
                guard + (page + 1) * PAGE_SIZE,
                frames_phys + page * PAGE_SIZE,
                PageSize::Size4K,
                KERNEL_DATA,
                CacheAttr::WriteBack,
            )
        })
    })?
    .ok()?;
    Some(guard + (pages + 1) * PAGE_SIZE)
}

/// Kernel data mappings made after boot: writable, not executable, global.
const KERNEL_DATA: MapFlags = MapFlags {
    writable: true,
    user: false,
    executable: false,
    global: true,
};

/// Runs `f` on the kernel's page tables, serialised with every other
/// change to them; `None` before `init`.
fn with_kernel_tables<R>(f: impl FnOnce(&PageTable, &mut KernelTableMemory<'_>) -> R) -> Option<R> {
    let root = KERNEL_PML4.load(Ordering::Acquire);
    if root == 0 {
        return None;
    }
    let _tables = KERNEL_TABLES_LOCK.lock();
    let mut frames_guard = FRAMES.lock();
    let mut memory = KernelTableMemory {
        frames: frames_guard.as_mut()?,
    };
    Some(f(&PageTable::new(root), &mut memory))
}

/// For the `smep`/`smap` self-tests only: maps a fresh frame holding
/// `contents` (at its start) at `virt` in the lower half of the kernel's
/// own page tables as a *user* page, readable and executable, so that the
/// kernel can try to execute or read it. The machine stops right after
/// (the test ends in a kernel exception), so the frame and the mapping
/// are never taken back. `None` without the memory.
pub fn map_user_page_for_selftest(virt: u64, contents: &[u8]) -> Option<()> {
    let phys = alloc_kernel_frames(1)?;
    let len = contents.len().min(PAGE_SIZE as usize);
    // SAFETY: a frame just taken from the allocator, owned by nobody else,
    // direct-mapped and writable; `len` is at most a page.
    unsafe {
        core::ptr::copy_nonoverlapping(contents.as_ptr(), phys_to_virt(phys) as *mut u8, len)
    };
    let user_code = MapFlags {
        writable: false,
        user: true,
        executable: true,
        global: false,
    };
    with_kernel_tables(|table, memory| {
        table.map(
            memory,
            virt,
            phys,
            PageSize::Size4K,
            user_code,
            CacheAttr::WriteBack,
        )
    })?
    .ok()
}

/// Maps device registers at `phys` uncached into the MMIO window and
/// returns the virtual address of `phys`. Mapping the same device twice is
/// harmless: pages already mapped there are reused.
pub fn map_mmio(phys: u64, len: u64) -> Result<u64, MapMmioError> {
    map_window(MMIO_BASE, phys, len, CacheAttr::Uncached)
}

/// Makes sure firmware memory (e.g. an ACPI table outside every region of
/// the memory map) is reachable through the direct map; returns its address.
pub fn map_firmware(phys: u64, len: u64) -> Result<u64, MapMmioError> {
    map_window(DIRECT_MAP_BASE, phys, len, CacheAttr::WriteBack)
}

fn map_window(base: u64, phys: u64, len: u64, cache: CacheAttr) -> Result<u64, MapMmioError> {
    let first = phys & !(PAGE_SIZE - 1);
    let last = phys.saturating_add(len.max(1) - 1) & !(PAGE_SIZE - 1);
    with_kernel_tables(|table, memory| {
        let mut page = first;
        loop {
            if table.translate(memory, base + page).is_none() {
                table
                    .map(
                        memory,
                        base + page,
                        page,
                        PageSize::Size4K,
                        KERNEL_DATA,
                        cache,
                    )
                    .map_err(MapMmioError::Map)?;
            }
            if page >= last {
                return Ok(base + phys);
            }
            page += PAGE_SIZE;
        }
    })
    .ok_or(MapMmioError::NotInitialised)?
}

/// Read-only [`TableMemory`] over the direct map, for walks that never
/// change tables (translation of user addresses).
struct ReadOnlyTables;

impl TableMemory for ReadOnlyTables {
    fn read_entry(&self, table_phys: u64, index: usize) -> u64 {
        // SAFETY: page-table frames are RAM, covered by the direct map.
        unsafe { read_table_entry(table_phys, index) }
    }

    fn write_entry(&mut self, _table_phys: u64, _index: usize, _value: u64) {
        // Never called: translate does not write.
    }

    fn alloc_table(&mut self) -> Option<u64> {
        None
    }

    fn free_table(&mut self, _phys: u64) {}
}

/// Every page of the kernel's own page tables, as the CPU sees it (the
/// effective rights of the whole path), in address order: for the boot
/// check that only the kernel's text is executable.
pub fn walk_kernel_mappings(f: &mut dyn FnMut(u64, kcore::paging::Translation)) {
    PageTable::new(kernel_page_table()).walk(&ReadOnlyTables, 0..512, f);
}

/// The kernel's text (virtual addresses, page-rounded): the only kernel
/// memory mapped executable.
pub fn kernel_text() -> core::ops::Range<u64> {
    let end = symbol_addr!(__text_end);
    symbol_addr!(__text_start)..end.next_multiple_of(PAGE_SIZE)
}

/// What `virt` maps to in the address space rooted at `root`.
pub fn translate(root: u64, virt: u64) -> Option<kcore::paging::Translation> {
    PageTable::new(root).translate(&ReadOnlyTables, virt)
}
