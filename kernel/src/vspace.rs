//! Address-space objects, mapping and unmapping frames.
//!
//! An address space made by `Retype` with `size_bits = s` is an object of
//! 2^(s+1) bytes:
//!
//! | page | contents |
//! |------|----------|
//! | 0 | the top-level page table (PML4); entries 256..512 are the kernel half, copied from the kernel's PML4 |
//! | 1 | [`Header`]: reference count, ASID, the pool's free list |
//! | 2.. | the page-table pool: every lower-level page table of this address space comes from here |
//!
//! So the memory for page tables is paid for by whoever made the address
//! space, a full pool makes `Map` fail with `OutOfMemory` for this space
//! only, and unmapping returns emptied tables to the pool.
//!
//! # ASIDs and stale mappings
//!
//! A frame capability records its one mapping as the address space's ASID
//! with a generation and the virtual address (`kcore::typed::FrameMapping`).
//! The ASID table maps an ASID to the address space's physical
//! address; destroying an address space frees its ASID and bumps the
//! generation, so a frame capability still recording a mapping in a dead
//! space is recognised as stale and never touches memory that may have been
//! reused. Unmapping also checks that the page table still maps *this*
//! frame at that address before removing anything.
//!
//! Pool pages are zero except for the free-list link in their first word,
//! which is cleared when a page is handed out as a table.

use abi::map::{Cache, MapAttr};
use abi::Error;
use kcore::paging::{CacheAttr, MapError, MapFlags, PageSize, PageTable, TableMemory};
use kcore::phys::PAGE_SIZE;
use kcore::typed::{FrameCap, FrameMapping};
use spin::Mutex;

use crate::arch::cpu;
use crate::mm::{self, phys_to_virt};
use crate::syscall::{full_slot, Outcome};
use crate::thread::{Thread, ThreadRef};
use crate::token::Kernel;
use crate::token::Objects;
use abi::args::{self, Args};
use abi::{ObjectType, Rights, Sys};
use kcore::cap::SlotId;

#[repr(C)]
pub struct Header {
    pub refs: u64,
    pub asid: u64,
    /// Physical address of the first free pool page, 0 if none.
    free_head: u64,
    /// How many mappings were removed from this address space: a cached
    /// translation (`thread::IpcBufferCache`) made at another count may be
    /// stale.
    pub unmaps: u64,
    /// The CPUs (bit per index) that may have loaded this space: those of
    /// every thread configured with it, marked when a thread gets it
    /// ([`note_cpu`]) or moves to another CPU; never cleared. TLB
    /// shootdown asks only these (`smp::shootdown`). A superset of the
    /// CPUs that ran it, kept off the switch paths on purpose.
    pub cpus: u64,
}

/// Where the next address space's unmap count starts (`Header::unmaps`):
/// 2^32 apart, so counts of two spaces made at the same physical address
/// do not meet.
static NEXT_UNMAPS_BASE: core::sync::atomic::AtomicU64 =
    core::sync::atomic::AtomicU64::new(1 << 32);

/// Most address spaces that can exist at once.
pub const MAX_ASIDS: usize = 16384;

struct AsidTable {
    /// Per ASID: the address space's physical address (0 = free) and the
    /// generation, bumped on every release. A static table (256 KiB of
    /// .bss), not a heap allocation: the kernel has no heap, so making an
    /// address space can fail only with a value, never with a panic.
    entries: [(u64, u64); MAX_ASIDS],
    free: usize,
}

static ASIDS: Mutex<AsidTable> = Mutex::new(AsidTable {
    entries: {
        let mut entries = [(0, 0); MAX_ASIDS];
        entries[0] = (u64::MAX, 0); // ASID 0 is never used
        entries
    },
    free: MAX_ASIDS - 1,
});

/// Number of address spaces that can still be made.
pub fn free_asids() -> usize {
    ASIDS.lock().free
}

fn alloc_asid(space: u64) -> Option<u64> {
    let mut table = ASIDS.lock();
    let (index, entry) = table
        .entries
        .iter_mut()
        .enumerate()
        .find(|(_, e)| e.0 == 0)?;
    entry.0 = space;
    table.free -= 1;
    Some(index as u64)
}

/// The header of the address space at `space`.
///
/// # Safety
/// `space` names a live address space: the object of an address-space
/// capability (as in `object.rs`, "Access"), a thread's
/// `page_table_root`, a live entry of the ASID table, or one just made.
pub unsafe fn header(objects: &Objects, space: u64) -> &Header {
    // SAFETY: the caller's promise; page 1 of the object.
    unsafe { objects.object(space + PAGE_SIZE) }
}

/// [`header`], to change.
///
/// # Safety
/// As for [`header`].
pub unsafe fn header_mut(objects: &mut Objects, space: u64) -> &mut Header {
    // SAFETY: the caller's promise; page 1 of the object.
    unsafe { objects.object_mut(space + PAGE_SIZE) }
}

/// Sets up a freshly retyped (zeroed) address space at `space` with a pool
/// sized by `size_bits`. The caller checked that an ASID is free.
///
/// # Safety
/// `space` is fresh memory of the object's size (2^(`size_bits` + 1)
/// bytes), aligned to it, that nothing else uses.
pub unsafe fn init(objects: &mut Objects, space: u64, size_bits: u64) {
    let kernel = mm::kernel_page_table();
    let mut mem = Pool { space, objects };
    for index in 256..512 {
        let entry = mem.read_entry(kernel, index);
        mem.write_entry(space, index, entry);
    }
    // SAFETY: the caller's promise.
    unsafe { init_pool(objects, space, size_bits) };
}

/// Sets up a freshly retyped (zeroed) guest space (`ObjectType::
/// GuestSpace`) at `space`: the same layout as an address space, but its
/// top-level table stays empty — no kernel half: it is the nested page
/// table of virtual CPUs (`crate::vcpu`), whose every mapping is a frame
/// its holder mapped. The caller checked that an ASID is free (guest
/// spaces use the ASID table for their frames' mapping records, never as
/// a hardware ASID).
///
/// # Safety
/// As for [`init`].
pub unsafe fn init_guest(objects: &mut Objects, space: u64, size_bits: u64) {
    // SAFETY: the caller's promise.
    unsafe { init_pool(objects, space, size_bits) };
}

/// The pool's free list and the header of a fresh address or guest space.
///
/// # Safety
/// As for [`init`].
unsafe fn init_pool(objects: &mut Objects, space: u64, size_bits: u64) {
    let mut mem = Pool { space, objects };
    let pages = (1u64 << (size_bits + 1)) / PAGE_SIZE;
    let mut free_head = 0;
    for page in (2..pages).rev() {
        let phys = space + page * PAGE_SIZE;
        // SAFETY: a pool page of this fresh object, direct-mapped.
        unsafe { (phys_to_virt(phys) as *mut u64).write(free_head) };
        free_head = phys;
    }
    let asid = alloc_asid(space).unwrap_or(0);
    *mem.header() = Header {
        refs: 1,
        asid,
        free_head,
        // A fresh range per address space: a translation kept for an
        // earlier space at this address never matches this one's count.
        unmaps: NEXT_UNMAPS_BASE.fetch_add(1 << 32, core::sync::atomic::Ordering::Relaxed),
        cpus: 0,
    };
}

/// The last capability to the address space went.
///
/// # Safety
/// `space` names the address space (the object of that capability).
pub unsafe fn destroy(objects: &mut Objects, space: u64) {
    // SAFETY: the caller's promise.
    let h = unsafe { header_mut(objects, space) };
    {
        let mut table = ASIDS.lock();
        if let Some(entry) = table.entries.get_mut(h.asid as usize) {
            if entry.0 == space {
                *entry = (0, entry.1.wrapping_add(1));
                table.free += 1;
            }
        }
    }
    h.asid = 0;
    crate::smp::drop_space(space, h.cpus);
    if cpu::read_cr3() == space {
        // SAFETY: the kernel's page table maps the kernel like every space.
        unsafe { cpu::write_cr3(mm::kernel_page_table()) };
    }
}

/// Page-table memory of one address space: its pool. Made only for a live
/// address space (the functions that make one say why `space` is).
struct Pool<'k> {
    space: u64,
    objects: &'k mut Objects,
}

impl Pool<'_> {
    fn header(&mut self) -> &mut Header {
        // SAFETY: `space` names a live address space (type doc).
        unsafe { header_mut(self.objects, self.space) }
    }
}

impl TableMemory for Pool<'_> {
    fn read_entry(&self, table_phys: u64, index: usize) -> u64 {
        // SAFETY: tables are the PML4 or pool pages of a live address space
        // (or the kernel's PML4), RAM in the direct map.
        unsafe { mm::read_table_entry(table_phys, index) }
    }

    fn write_entry(&mut self, table_phys: u64, index: usize, value: u64) {
        // SAFETY: as in read_entry; only this address space's tables are
        // written, with interrupts disabled.
        unsafe { mm::write_table_entry(table_phys, index, value) }
    }

    fn alloc_table(&mut self) -> Option<u64> {
        let h = self.header();
        let page = h.free_head;
        if page == 0 {
            return None;
        }
        let link = phys_to_virt(page) as *mut u64;
        // SAFETY: a free pool page: its first word is the link, the rest is
        // zero; clearing the link makes it an empty table.
        unsafe {
            h.free_head = link.read();
            link.write(0);
        }
        Some(page)
    }

    fn free_table(&mut self, phys: u64) {
        let h = self.header();
        // SAFETY: an emptied (all-zero) table of this pool goes back on the
        // free list.
        unsafe { (phys_to_virt(phys) as *mut u64).write(h.free_head) };
        h.free_head = phys;
    }
}

fn cache_attr(cache: Cache) -> CacheAttr {
    match cache {
        Cache::WriteBack => CacheAttr::WriteBack,
        Cache::Uncached => CacheAttr::Uncached,
        Cache::WriteCombining => CacheAttr::WriteCombining,
        Cache::WriteThrough => CacheAttr::WriteThrough,
    }
}

pub fn frame_size(kind: abi::ObjectType) -> PageSize {
    if kind == abi::ObjectType::Frame2M {
        PageSize::Size2M
    } else {
        PageSize::Size4K
    }
}

/// Maps `frame` into `space` at `vaddr`; on success returns the mapping
/// to record in the frame capability. Changes nothing on error.
///
/// # Safety
/// `space` names a live address space ([`header`]).
pub unsafe fn map(
    objects: &mut Objects,
    space: u64,
    frame: &FrameCap,
    vaddr: u64,
    attr: MapAttr,
) -> Result<FrameMapping, Error> {
    let flags = MapFlags {
        writable: attr.writable,
        user: true,
        executable: attr.executable,
        global: false,
    };
    let size = frame_size(frame.kind());
    let mut pool = Pool { space, objects };
    let result = PageTable::new(space).map(
        &mut pool,
        vaddr,
        frame.phys,
        size,
        flags,
        cache_attr(attr.cache),
    );
    match result {
        Ok(()) => {}
        Err(MapError::AlreadyMapped { .. } | MapError::HugePageInTheWay { .. }) => {
            return Err(Error::AlreadyMapped)
        }
        Err(MapError::OutOfTableMemory) => return Err(Error::OutOfMemory),
        Err(_) => return Err(Error::InvalidArgument),
    }
    let h = pool.header();
    let generation = ASIDS.lock().entries.get(h.asid as usize).map_or(0, |e| e.1);
    Ok(FrameMapping {
        // ASIDs are below MAX_ASIDS (checked at compile time below).
        asid: h.asid as u16,
        generation: generation & FrameMapping::GENERATION_MASK,
        vaddr,
    })
}

const _: () = assert!(MAX_ASIDS <= 1 << 16);

/// Removes the mapping a frame capability records, if its address space
/// is still alive and still maps this frame there. The caller clears the
/// record.
pub fn unmap_cap(objects: &mut Objects, frame: &FrameCap) {
    let Some(FrameMapping {
        asid,
        generation,
        vaddr,
    }) = frame.mapping
    else {
        return;
    };
    let space = match ASIDS.lock().entries.get(usize::from(asid)) {
        Some(&(space, gen))
            if space != 0
                && space != u64::MAX
                && gen & FrameMapping::GENERATION_MASK == generation =>
        {
            space
        }
        _ => return,
    };
    // The ASID table names live address spaces only (`destroy` frees the
    // entry), so `space` is one.
    let mut pool = Pool { space, objects };
    let table = PageTable::new(space);
    match table.translate(&pool, vaddr) {
        Some(t) if t.phys == frame.phys && t.size == frame_size(frame.kind()) => {}
        _ => return,
    }
    if table.unmap(&mut pool, vaddr).is_ok() {
        let h = pool.header();
        h.unmaps += 1;
        let cpus = h.cpus;
        if cpu::read_cr3() == space {
            cpu::invlpg(vaddr);
        }
        crate::smp::shootdown(space, cpus, vaddr);
    }
}

/// A thread on CPU `cpu` may load address space `space` from now on.
///
/// # Safety
/// `space` names a live address space ([`header`]).
pub unsafe fn note_cpu(objects: &mut Objects, space: u64, cpu: u32) {
    // SAFETY: the caller's promise.
    unsafe { header_mut(objects, space) }.cpus |= 1 << (cpu & 63);
}

// ---------------------------------------------------------------------------
// System calls: decode and perform; `syscall` dispatches here.
// ---------------------------------------------------------------------------

/// A checked call of `Map`, `Unmap`, ready to perform.
#[derive(Debug)]
pub enum Call {
    Map {
        space: u64,
        frame: SlotId,
        vaddr: u64,
        attr: MapAttr,
    },
    Unmap(SlotId),
}

/// Decodes `Map`, `Unmap` (`sys`, with the argument registers `regs`) of the
/// caller `c` (borrowed from `k`): checks everything, changes nothing.
#[inline(always)]
pub fn decode(k: &Kernel, c: &Thread, sys: Sys, regs: [u64; 6]) -> Result<Call, Error> {
    Ok(match sys {
        Sys::Map => {
            let a = args::Map::from_regs(regs);
            let (_, space) = full_slot(k, c, a.vspace)?;
            let guest = match space.kind {
                ObjectType::AddressSpace => false,
                ObjectType::GuestSpace => true,
                _ => return Err(Error::WrongObjectType),
            };
            if !space.rights.contains(Rights::WRITE) {
                return Err(Error::MissingRights);
            }
            let (frame, fcap) = full_slot(k, c, a.frame)?;
            let fview = FrameCap::from_cap(&fcap).ok_or(Error::WrongObjectType)?;
            let attr = if guest {
                MapAttr::from_raw_guest(a.attr)
            } else {
                MapAttr::from_raw(a.attr)
            }
            .ok_or(Error::InvalidArgument)?;
            let mut need = Rights::READ;
            if attr.writable {
                need = need.union(Rights::WRITE);
            }
            if attr.executable {
                need = need.union(Rights::GRANT);
            }
            if !fcap.rights.contains(need) {
                return Err(Error::MissingRights);
            }
            let size = frame_size(fcap.kind).bytes();
            // Never the lowest 64 KiB nor the last page below the canonical
            // boundary (abi::map::USER_MAP_START/END say why).
            // A guest space: any guest-physical address below
            // abi::vcpu::GUEST_PHYS_END, 0 included.
            let mappable = if guest {
                a.vaddr
                    .checked_add(size)
                    .is_some_and(|end| end <= abi::vcpu::GUEST_PHYS_END)
            } else {
                abi::map::user_mappable(a.vaddr, size)
            };
            if a.vaddr % size != 0 || !mappable {
                return Err(Error::InvalidArgument);
            }
            if fview.mapping.is_some() {
                return Err(Error::InvalidState);
            }
            Call::Map {
                space: space.object,
                frame,
                vaddr: a.vaddr,
                attr,
            }
        }
        Sys::Unmap => {
            let a = args::Slot::from_regs(regs);
            let (frame, fcap) = full_slot(k, c, a.slot)?;
            let fview = FrameCap::from_cap(&fcap).ok_or(Error::WrongObjectType)?;
            if fview.mapping.is_none() {
                return Err(Error::NotMapped);
            }
            Call::Unmap(frame)
        }
        _ => return Err(Error::UnknownSyscall),
    })
}

/// Performs a checked call of `Map`, `Unmap`. Object addresses in it are the
/// objects of capabilities `decode` found in slots a moment ago: live
/// (`object.rs`, "Access").
pub fn perform(k: &mut Kernel, call: Call, _caller: ThreadRef) -> Result<Outcome, Error> {
    match call {
        Call::Map {
            space,
            frame,
            vaddr,
            attr,
        } => {
            let fcap = k.slot(frame).cap.ok_or(Error::EmptySlot)?;
            let fview = FrameCap::from_cap(&fcap).ok_or(Error::WrongObjectType)?;
            // SAFETY: `space` is an address-space capability's object.
            let mapping = unsafe { map(&mut k.objects, space, &fview, vaddr, attr) }?;
            if let Some(f) = k.slot_mut(frame).cap.as_mut() {
                *f = FrameCap {
                    mapping: Some(mapping),
                    ..fview
                }
                .to_cap(f.rights);
            }
            Ok(Outcome::Resume)
        }
        Call::Unmap(frame) => {
            if let Some(f) = k.slot(frame).cap.as_ref().and_then(FrameCap::from_cap) {
                unmap_cap(&mut k.objects, &f);
            }
            crate::ipc::clear_mapping(k, frame);
            Ok(Outcome::Resume)
        }
    }
}
