//! Building and starting one child in its own address space and
//! capability space: root's children (`interfaces::child`) and init's
//! (`interfaces::init`) are built by this one function, [`spawn`], from a
//! [`ChildSpec`] and the parent's [`Resources`].
//!
//! 1. The ELF file is checked with `formats::elf::LoadPlan::from_elf`
//!    against `ucore::load::CHILD_LIMITS` (segments in `[64 KiB, stack
//!    bottom)`, W^X, no shared pages, entry in code). A malformed file is
//!    refused before anything is made.
//! 2. Objects from the parent's untyped memory: a capability table of
//!    2^`cspace_bits` slots, an address space with a page-table pool of
//!    2^`pt_pool_bits` bytes, a thread; an untyped of 2^`untyped_bits`
//!    bytes is retyped straight into the child's table at `child::UNTYPED`.
//! 3. The child's table gets the service endpoint (servers: a copy with all
//!    rights; others: minted write-only with the child's badge), with
//!    `parent_endpoint` the parent's endpoint at `child::PARENT` (minted
//!    with `WRITE` and `GRANT` and the child's badge: a session request
//!    may carry a capability, `interfaces::session`) and, for each of
//!    `own`, a copy of its own thread, table or address space capability
//!    (`child::OWN_THREAD`, ...), and the `grants` (device
//!    capabilities, minted from the parent's). With `notification`, a
//!    notification bound to the thread at `child::NOTIFICATION`.
//! 4. Every page of every segment is a fresh `Frame4K`. Pages with file
//!    bytes are mapped writable at [`SCRATCH`] in the parent's own address
//!    space (`scratch_vspace`), checked to be zero (a fresh frame is; a
//!    non-zero one means the kernel did not zero it or left a stale TLB
//!    entry for the scratch page), filled and unmapped. Then each page is
//!    mapped into the child with its segment's permissions. The stack (64
//!    KiB ending at `MAIN_STACK_TOP`), the IPC buffer page
//!    (`MAIN_IPC_BUFFER_ADDR`) are fresh frames too. With `rom`, the
//!    kernel's frames of the boot image (`abi::bootinfo`, "ROM frames")
//!    are mapped read-only into the child as well, no copy (root gives
//!    init its view of the image this way, `interfaces::init`).
//! 5. The thread is given its priority and CPU, configured (table, address
//!    space, IPC buffer, and the parent's endpoint minted write-only with
//!    the child's badge as its fault endpoint) and started at the ELF
//!    entry with `rsp = MAIN_STACK_TOP` and `rdi = arg`.
//!
//! The frame capabilities stay in the parent's capability space (a child
//! holding them could unmap its own code). A failure after step 1 leaves
//! what was made so far unused; the thread is never started.

use core::fmt;

use abi::bootinfo::BOOT_INFO_ADDR;
use abi::caddr::{in_table, own};
use abi::cpu::CpuSet;
use abi::map::{Cache, MapAttr};
use abi::{Error, ObjectType, Rights, MAIN_IPC_BUFFER_ADDR, MAIN_STACK_TOP};
use formats::bootimage::BootImage;
use formats::elf::{ElfError, LoadPlan};
use interfaces::child;
use ucore::load::{self, PageFill, CHILD_LIMITS, PAGE_SIZE, STACK_BOTTOM};

use crate::resources::{ResourceError, Resources};
use crate::syscall;

/// Where the parent maps a frame to fill it: 1 MiB above the
/// boot-information page, so for root in the page table that already maps
/// that page (mapping here costs root's address space no new page tables),
/// and far from any component's image, stack and boot image.
pub const SCRATCH: u64 = BOOT_INFO_ADDR + 0x10_0000;
/// log2 of a child's page-table pool: 16 tables, where a child with one
/// code region and the stack needs 6.
pub const PT_POOL_BITS: u32 = 16;

/// What to build: everything [`spawn`] needs to know about one child.
#[derive(Clone, Copy, Debug)]
pub struct ChildSpec<'a> {
    /// Its name: the thread's name in the kernel trace (`TraceName`).
    pub name: &'a str,
    /// Its ELF file.
    pub file: &'a [u8],
    /// The badge of its fault endpoint (and of its service endpoint, unless
    /// it is a server).
    pub badge: u64,
    /// `rdi` at its entry.
    pub arg: u64,
    /// log2 of its capability table's slots.
    pub cspace_bits: u32,
    /// log2 of its address space's page-table pool.
    pub pt_pool_bits: u32,
    /// log2 of the untyped memory put at `child::UNTYPED`.
    pub untyped_bits: u32,
    /// Its scheduling priority and CPU.
    pub priority: u8,
    /// The CPU its thread runs on.
    pub cpu: u32,
    /// The CPUs it may place threads on: a subset of the parent's set that
    /// holds `cpu` ([`CpuSet::EMPTY`]: the parent's own set).
    pub cpus: CpuSet,
    /// Whether it gets the service endpoint with all rights (it receives).
    pub server: bool,
    /// Which of its own thread, table and address space it gets
    /// capabilities to (`child::OwnCaps`).
    pub own: child::OwnCaps,
    /// Whether it gets the parent's fault endpoint, minted write-only with
    /// `badge`, at `child::PARENT`: where init's children ask for sessions
    /// (`interfaces::session`).
    pub parent_endpoint: bool,
    /// The boot image's frames to map read-only into the child (root
    /// gives init its view of the image this way).
    pub rom: Option<RomView<'a>>,
    /// Capabilities of the parent's to put into the child's table before
    /// it starts (devices: `interfaces::init`, `interfaces::child::DEVICES`).
    pub grants: &'a [Grant],
    /// Untyped memory of the parent's to hand the child whole, before it
    /// starts (device memory for the platform service): untyped is never
    /// copied, so each becomes a child of the parent's of the same size.
    pub memory_grants: &'a [MemoryGrant],
    /// Whether it gets a notification bound to its thread at
    /// `child::NOTIFICATION` (a driver, to wait for interrupts and
    /// requests at once).
    pub notification: bool,
}

/// The boot image's frames (`abi::bootinfo`, "ROM frames") mapped
/// read-only into a child: frame `i` of the table in the parent's slot
/// `table` (at its slot `1 + i`) goes where its region of `image`
/// (`formats::bootimage::BootImage::regions`) lies, counted from `base`.
#[derive(Clone, Copy, Debug)]
pub struct RomView<'a> {
    /// The parent's slot of the frames' table.
    pub table: u32,
    /// The image whose regions the frames cut.
    pub image: &'a BootImage<'a>,
    /// The image's physical start modulo 2 MiB.
    pub phase: u64,
    /// Where the image starts in the child: `phase` past a 2 MiB boundary.
    pub base: u64,
}

/// One capability [`spawn`] gives a child: the parent's slot `src` minted
/// with all its rights and `word` (0: an exact copy; for I/O ports a
/// sub-range, `abi::object::io_ports_range`) into the child's slot `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The parent's slot.
    pub src: u32,
    /// The slot in the child's table.
    pub dst: u32,
    /// The `CapMint` badge word.
    pub word: u64,
}

/// Untyped memory [`spawn`] gives a child: an untyped of `2^bits` bytes
/// made from the parent's untyped `src` (of that size, with nothing made
/// from it yet) into the child's slot `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryGrant {
    /// The parent's untyped.
    pub src: u32,
    /// The slot in the child's table.
    pub dst: u32,
    /// log2 of its size.
    pub bits: u32,
}

/// The parent's own capabilities that [`spawn`] uses.
#[derive(Clone, Copy, Debug)]
pub struct ParentCaps {
    /// The parent's address space, for the scratch page ([`SCRATCH`]).
    pub vspace: u32,
    /// The parent's endpoint: children's faults and exits arrive here.
    pub fault: u32,
    /// The service endpoint shared by all the parent's children.
    pub service: u32,
}

const RW: MapAttr = MapAttr {
    writable: true,
    executable: false,
    cache: Cache::WriteBack,
};

impl ParentCaps {
    /// Makes the parent's two endpoints (fault and service) from `res`;
    /// `vspace` is the parent's own address-space slot.
    pub fn make(res: &mut Resources, vspace: u32) -> Result<ParentCaps, ResourceError> {
        let fault = res.make(ObjectType::Endpoint, 0)?;
        let service = res.make(ObjectType::Endpoint, 0)?;
        Ok(ParentCaps {
            vspace,
            fault,
            service,
        })
    }
}

/// What the parent keeps of a started child: the slots of its thread
/// capability and of its minted fault endpoint (the rest of the child's
/// capabilities stay in the parent's space, unused).
#[derive(Clone, Copy, Debug)]
pub struct ChildCaps {
    /// Its thread.
    pub thread: u32,
    /// Its capability table (the child's untyped memory is at
    /// `child::UNTYPED` in it: revoking that destroys everything the child
    /// made, its other threads too).
    pub cspace: u32,
    /// The parent's endpoint minted with the child's badge.
    pub fault: u32,
}

/// Why a child was not started.
#[derive(Debug)]
#[allow(missing_docs)]
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
    /// Whether the module itself is at fault (refused), rather than the
    /// parent's resources or the kernel.
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

/// Builds and starts the child `spec` from `res` (see the module doc);
/// returns its capabilities and entry point.
pub fn spawn(
    res: &mut Resources,
    parent: ParentCaps,
    spec: &ChildSpec<'_>,
) -> Result<(ChildCaps, u64), SpawnError> {
    let file = spec.file;
    let plan = LoadPlan::from_elf(file, &CHILD_LIMITS).map_err(SpawnError::Elf)?;
    let badge = spec.badge;

    let cspace = res.make(ObjectType::CapTable, spec.cspace_bits)?;
    let vspace = res.make(ObjectType::AddressSpace, spec.pt_pool_bits)?;
    let thread = res.make(ObjectType::Thread, 0)?;
    res.make_at(
        ObjectType::Untyped,
        spec.untyped_bits,
        in_table(cspace, child::UNTYPED),
    )?;
    let service = in_table(cspace, child::SERVICE_ENDPOINT);
    if spec.server {
        syscall::cap_copy(own(parent.service), service).map_err(failed("CapCopy"))?;
    } else {
        syscall::cap_mint(own(parent.service), service, Rights::WRITE, badge)
            .map_err(failed("CapMint"))?;
    }
    if spec.parent_endpoint {
        // GRANT: a session request may carry the client's quota
        // donation (`interfaces::session`, "Donation").
        syscall::cap_mint(
            own(parent.fault),
            in_table(cspace, child::PARENT),
            Rights::WRITE.union(Rights::GRANT),
            badge,
        )
        .map_err(failed("CapMint"))?;
    }
    for g in spec.grants {
        syscall::cap_mint(own(g.src), in_table(cspace, g.dst), Rights::ALL, g.word)
            .map_err(failed("CapMint"))?;
    }
    for g in spec.memory_grants {
        let dst = in_table(cspace, g.dst);
        syscall::retype(own(g.src), ObjectType::Untyped, u64::from(g.bits), dst, 1)
            .map_err(failed("Retype"))?;
    }
    // `OwnCaps::KINDS` lists thread, capability table, address space.
    for (src, (_, kind, dst)) in [thread, cspace, vspace]
        .into_iter()
        .zip(child::OwnCaps::KINDS)
    {
        if spec.own.contains(kind) {
            syscall::cap_copy(own(src), in_table(cspace, dst)).map_err(failed("CapCopy"))?;
        }
    }

    for segment in plan.segments() {
        let fills = load::page_fills(segment, file.len()).map_err(|_| SpawnError::BadSegment)?;
        for fill in fills {
            map_page(
                res,
                parent.vspace,
                vspace,
                &fill,
                file,
                load::map_attr(segment),
            )?;
        }
    }
    if let Some(view) = spec.rom {
        let ro = MapAttr {
            writable: false,
            ..RW
        };
        let mut slot = 1u32;
        for region in view.image.regions() {
            let mut i = 0;
            while let Some((offset, _)) = region.frame(view.phase, i) {
                let va = view.base + region.offset + offset;
                // SAFETY: the mapping goes into the child's address space,
                // not the parent's.
                unsafe { syscall::map(own(vspace), in_table(view.table, slot), va, ro) }
                    .map_err(failed("Map"))?;
                slot += 1;
                i += 1;
            }
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

    // Scheduling parameters first: a refused priority or CPU leaves
    // nothing behind but objects made from `res`.
    syscall::thread_place(own(thread), spec.priority, spec.cpu, spec.cpus)
        .map_err(failed("ThreadSetSchedParams"))?;
    if spec.notification {
        let n = res.make(ObjectType::Notification, 0)?;
        syscall::cap_copy(own(n), in_table(cspace, child::NOTIFICATION))
            .map_err(failed("CapCopy"))?;
        syscall::bind_notification(own(thread), own(n)).map_err(failed("BindNotification"))?;
    }
    let fault = res.slot()?;
    syscall::cap_mint(own(parent.fault), own(fault), Rights::WRITE, badge)
        .map_err(failed("CapMint"))?;
    syscall::thread_configure(
        own(thread),
        own(cspace),
        own(vspace),
        MAIN_IPC_BUFFER_ADDR,
        own(fault),
    )
    .map_err(failed("ThreadConfigure"))?;
    // Its track's name in a kernel trace (a no-op in other kernels).
    syscall::trace_name(own(thread), spec.name).map_err(failed("TraceName"))?;
    // SAFETY: the thread runs in the child's own address space, not the
    // parent's.
    unsafe { syscall::thread_start(own(thread), plan.entry(), MAIN_STACK_TOP, spec.arg) }
        .map_err(failed("ThreadStart"))?;
    Ok((
        ChildCaps {
            thread,
            cspace,
            fault,
        },
        plan.entry(),
    ))
}

/// A fresh frame with `fill`'s file bytes, mapped into the child.
fn map_page(
    res: &mut Resources,
    scratch_vspace: u32,
    vspace: u32,
    fill: &PageFill,
    file: &[u8],
    attr: MapAttr,
) -> Result<(), SpawnError> {
    let frame = res.make(ObjectType::Frame4K, 0)?;
    if !fill.file.is_empty() {
        let bytes = file.get(fill.file.clone()).ok_or(SpawnError::BadSegment)?;
        fill_frame(scratch_vspace, frame, fill.offset, bytes, fill.vaddr)?;
    }
    map_into(vspace, frame, fill.vaddr, attr)
}

/// Maps `frame` into the child's address space.
fn map_into(vspace: u32, frame: u32, vaddr: u64, attr: MapAttr) -> Result<(), SpawnError> {
    // SAFETY: the mapping goes into the child's address space, not the
    // parent's.
    unsafe { syscall::map(own(vspace), own(frame), vaddr, attr) }.map_err(failed("Map"))
}

/// Copies `bytes` to `offset` in the fresh frame `frame` (for the child's
/// page `vaddr`) through the scratch page of `scratch_vspace`. Also init's
/// ROM service (`rt::session::rom`) fills its frames with it.
pub fn fill_frame(
    scratch_vspace: u32,
    frame: u32,
    offset: usize,
    bytes: &[u8],
    vaddr: u64,
) -> Result<(), SpawnError> {
    // SAFETY: SCRATCH is reserved for this function: nothing of the
    // parent's is
    // mapped there, and the kernel refuses (AlreadyMapped) rather than
    // replaces a mapping.
    unsafe { syscall::map(own(scratch_vspace), own(frame), SCRATCH, RW) }
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
