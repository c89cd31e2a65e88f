//! Building and starting one child, as `abi::child` specifies.
//!
//! 1. The ELF file is found in the boot image and checked with
//!    `kcore::elf::LoadPlan::from_elf` against `ucore::load::CHILD_LIMITS`
//!    (segments in `[4 KiB, stack bottom)`, W^X, no shared pages, entry in
//!    code). A missing or malformed file is refused before anything is
//!    made.
//! 2. Objects from root's untyped memory: a capability table of
//!    2^`CSPACE_BITS` slots, an address space with a page-table pool of
//!    2^[`PT_POOL_BITS`] bytes, a thread; an untyped of the entry's size
//!    (`@MIB`, default 2^`UNTYPED_BITS` bytes) is retyped straight into the
//!    child's table.
//! 3. The child's table gets the service endpoint (servers: a copy with all
//!    rights; others: minted write-only with the child's index as badge)
//!    and, for `test-` and `bench` components (`child::has_own_caps`),
//!    copies of its own thread, table and address space capabilities.
//! 4. Every page of every segment is a fresh `Frame4K`. Pages with file
//!    bytes are mapped writable at [`SCRATCH`] in root's own address space,
//!    checked to be zero (a fresh frame is; a non-zero one means the kernel
//!    did not zero it or left a stale TLB entry for the scratch page), filled
//!    and unmapped. Then each page is mapped into the child with its
//!    segment's permissions. The stack (64 KiB ending at `MAIN_STACK_TOP`)
//!    and the IPC buffer page (`MAIN_IPC_BUFFER_ADDR`) are fresh frames too.
//! 5. The thread is configured (table, address space, IPC buffer, and root's
//!    endpoint minted write-only with the child's index as badge as its
//!    fault endpoint), given priority `child::PRIORITY` on CPU 0 and started
//!    at the ELF entry with `rsp = MAIN_STACK_TOP` and `rdi = ARG`.
//!
//! The frame capabilities stay in root's capability space (a child holding
//! them could unmap its own code). A failure after step 1 leaves what was
//! made so far unused; the thread is never started.

use core::fmt;

use kcore::bootimage::BootImage;
use kcore::elf::{ElfError, LoadPlan};
use rt::abi::bootinfo::{slot, BOOT_INFO_ADDR};
use rt::abi::caddr::{in_table, own};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{child, Error, ObjectType, Rights, MAIN_IPC_BUFFER_ADDR, MAIN_STACK_TOP};
use rt::syscall;
use ucore::load::{self, PageFill, CHILD_LIMITS, PAGE_SIZE, STACK_BOTTOM};
use ucore::start::StartEntry;

use crate::resources::{ResourceError, Resources};

/// Where root maps a frame to fill it: 1 MiB above the boot-information
/// page, so in the page table that already maps that page (mapping here
/// costs root's address space no new page tables), and far from root's
/// image, stack and boot image.
pub const SCRATCH: u64 = BOOT_INFO_ADDR + 0x10_0000;
/// log2 of a child's page-table pool: 16 tables, where a child with one
/// code region and the stack needs 6.
pub const PT_POOL_BITS: u32 = 16;

const RW: MapAttr = MapAttr {
    writable: true,
    executable: false,
    cache: Cache::WriteBack,
};

/// The endpoints every child gets a capability to.
#[derive(Clone, Copy, Debug)]
pub struct Endpoints {
    /// Root's own endpoint: children's faults and exits arrive here.
    pub root: u32,
    /// The service endpoint shared by all children.
    pub service: u32,
}

/// What root keeps of a started child: its thread capability's slot (the
/// rest of the child's capabilities stay in root's space, unused).
#[derive(Clone, Copy, Debug)]
pub struct ChildCaps {
    pub thread: u32,
}

/// Why a child was not started.
#[derive(Debug)]
pub enum SpawnError {
    /// No boot-image entry of that name.
    NotInImage,
    /// The ELF file is malformed.
    Elf(ElfError),
    Resource(ResourceError),
    /// A system call failed.
    Syscall {
        call: &'static str,
        error: Error,
    },
    /// A fresh frame mapped at the scratch page was not all zeros.
    NotZeroed {
        vaddr: u64,
    },
    /// A segment's bytes are not in the file: impossible for a checked plan.
    BadSegment,
}

impl SpawnError {
    /// Whether the module itself is at fault (refused), rather than root's
    /// resources or the kernel.
    pub fn is_refusal(&self) -> bool {
        matches!(self, SpawnError::NotInImage | SpawnError::Elf(_))
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::NotInImage => f.write_str("not in the boot image"),
            SpawnError::Elf(e) => write!(f, "{e}"),
            SpawnError::Resource(e) => write!(f, "{e}"),
            SpawnError::Syscall { call, error } => write!(f, "{call} failed: {error}"),
            SpawnError::NotZeroed { vaddr } => write!(
                f,
                "the fresh frame for {vaddr:#x} was not zero at the scratch page {SCRATCH:#x} \
                 (not zeroed by the kernel, or a stale TLB entry)"
            ),
            SpawnError::BadSegment => f.write_str("a segment's bytes are not inside the file"),
        }
    }
}

impl From<ResourceError> for SpawnError {
    fn from(e: ResourceError) -> Self {
        SpawnError::Resource(e)
    }
}

/// A `map_err` for system calls: names the call.
fn failed(call: &'static str) -> impl Fn(Error) -> SpawnError {
    move |error| SpawnError::Syscall { call, error }
}

/// Builds and starts the child of start-list entry `entry` (its index is
/// its badge): component `entry.name` of `image`, with argument
/// `entry.arg` and 2^`entry.untyped_bits` bytes of untyped memory. Returns
/// its capabilities and entry point.
pub fn spawn(
    res: &mut Resources,
    image: &BootImage<'_>,
    endpoints: Endpoints,
    entry: &StartEntry<'_>,
) -> Result<(ChildCaps, u64), SpawnError> {
    let (name, arg) = (entry.name, entry.arg);
    let file = image.find(name).ok_or(SpawnError::NotInImage)?.data;
    let plan = LoadPlan::from_elf(file, &CHILD_LIMITS).map_err(SpawnError::Elf)?;
    let badge = entry.index as u64;

    let cspace = res.make(ObjectType::CapTable, child::CSPACE_BITS)?;
    let vspace = res.make(ObjectType::AddressSpace, PT_POOL_BITS)?;
    let thread = res.make(ObjectType::Thread, 0)?;
    res.make_at(
        ObjectType::Untyped,
        entry.untyped_bits,
        in_table(cspace, child::UNTYPED),
    )?;
    let service = in_table(cspace, child::SERVICE_ENDPOINT);
    if child::is_server(name) {
        syscall::cap_copy(own(endpoints.service), service).map_err(failed("CapCopy"))?;
    } else {
        syscall::cap_mint(own(endpoints.service), service, Rights::WRITE, badge)
            .map_err(failed("CapMint"))?;
    }
    if child::has_own_caps(name) {
        for (src, dst) in [
            (thread, child::OWN_THREAD),
            (cspace, child::OWN_CSPACE),
            (vspace, child::OWN_VSPACE),
        ] {
            syscall::cap_copy(own(src), in_table(cspace, dst)).map_err(failed("CapCopy"))?;
        }
    }

    for segment in plan.segments() {
        let fills = load::page_fills(segment, file.len()).map_err(|_| SpawnError::BadSegment)?;
        for fill in fills {
            map_page(res, vspace, &fill, file, load::map_attr(segment))?;
        }
    }
    let mut page = STACK_BOTTOM;
    while page < MAIN_STACK_TOP {
        let frame = res.make(ObjectType::Frame4K, 0)?;
        map_into(vspace, frame, page, RW)?;
        page += PAGE_SIZE;
    }
    let ipc_buffer = res.make(ObjectType::Frame4K, 0)?;
    map_into(vspace, ipc_buffer, MAIN_IPC_BUFFER_ADDR, RW)?;

    let fault = res.slot()?;
    syscall::cap_mint(own(endpoints.root), own(fault), Rights::WRITE, badge)
        .map_err(failed("CapMint"))?;
    syscall::thread_configure(
        own(thread),
        own(cspace),
        own(vspace),
        MAIN_IPC_BUFFER_ADDR,
        own(fault),
    )
    .map_err(failed("ThreadConfigure"))?;
    syscall::thread_set_sched_params(own(thread), child::PRIORITY, 0)
        .map_err(failed("ThreadSetSchedParams"))?;
    // SAFETY: the thread runs in the child's own address space, not root's.
    unsafe { syscall::thread_start(own(thread), plan.entry(), MAIN_STACK_TOP, arg) }
        .map_err(failed("ThreadStart"))?;
    Ok((ChildCaps { thread }, plan.entry()))
}

/// A fresh frame with `fill`'s file bytes, mapped into the child.
fn map_page(
    res: &mut Resources,
    vspace: u32,
    fill: &PageFill,
    file: &[u8],
    attr: MapAttr,
) -> Result<(), SpawnError> {
    let frame = res.make(ObjectType::Frame4K, 0)?;
    if !fill.file.is_empty() {
        let bytes = file.get(fill.file.clone()).ok_or(SpawnError::BadSegment)?;
        fill_frame(frame, fill.offset, bytes, fill.vaddr)?;
    }
    map_into(vspace, frame, fill.vaddr, attr)
}

/// Maps `frame` into the child's address space.
fn map_into(vspace: u32, frame: u32, vaddr: u64, attr: MapAttr) -> Result<(), SpawnError> {
    // SAFETY: the mapping goes into the child's address space, not root's.
    unsafe { syscall::map(own(vspace), own(frame), vaddr, attr) }.map_err(failed("Map"))
}

/// Copies `bytes` to `offset` in the fresh frame `frame` (for the child's
/// page `vaddr`) through the scratch page.
fn fill_frame(frame: u32, offset: usize, bytes: &[u8], vaddr: u64) -> Result<(), SpawnError> {
    // SAFETY: SCRATCH is reserved for this function: nothing of root's is
    // mapped there, and the kernel refuses (AlreadyMapped) rather than
    // replaces a mapping.
    unsafe { syscall::map(own(slot::VSPACE), own(frame), SCRATCH, RW) }
        .map_err(failed("Map (scratch page)"))?;
    // SAFETY: one page is mapped writable at SCRATCH, page-aligned, and only
    // this slice refers to it until the unmap below; the `Map` system call
    // above is a compiler barrier (its asm is not `nomem`).
    let page = unsafe { core::slice::from_raw_parts_mut(SCRATCH as *mut u8, PAGE_SIZE as usize) };
    let zeroed = page.iter().all(|&b| b == 0);
    let target = offset
        .checked_add(bytes.len())
        .and_then(|end| page.get_mut(offset..end));
    let copied = match (zeroed, target) {
        (true, Some(target)) => {
            target.copy_from_slice(bytes);
            true
        }
        _ => false,
    };
    // SAFETY: `page` is not used after this point.
    unsafe { syscall::unmap(own(frame)) }.map_err(failed("Unmap (scratch page)"))?;
    match (zeroed, copied) {
        (false, _) => Err(SpawnError::NotZeroed { vaddr }),
        (true, false) => Err(SpawnError::BadSegment),
        (true, true) => Ok(()),
    }
}
