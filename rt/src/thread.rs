//! Helper threads of a component: [`spawn`] makes a thread in the
//! component's own capability and address space and starts it at an
//! `extern "C" fn(u64) -> !`, without hand-written boilerplate.
//!
//! What [`spawn`] does, in order (each step's failure is a [`SpawnError`]
//! value naming it):
//!
//! 1. retypes a `Thread` and [`PAGES`] 4 KiB frames (the stack's
//!    [`STACK_PAGES`] and the IPC buffer's one) from the component's
//!    untyped memory (`child::UNTYPED`) into the slots the caller names
//!    ([`Slots`]: one for the thread, [`PAGES`] consecutive ones for the
//!    frames);
//! 2. maps them in [`STACKS`], a range of every component's address space
//!    that belongs to the runtime (like [`crate::mmio::WINDOWS`]): each
//!    thread gets its own [`AREA`] there — an unmapped guard page, the
//!    stack, another guard page, the IPC buffer page — handed out once and
//!    never reused;
//! 3. configures the thread with the component's own capability space
//!    (`child::OWN_CSPACE`) and address space (`child::OWN_VSPACE`), the
//!    IPC buffer and the given fault endpoint (a component needs
//!    `own = ["cspace", "vspace"]` in its scenario);
//! 4. places it at the given priority (at most the caller's) on the given
//!    CPU and starts it at `entry(arg)`, its stack pointer at the stack's
//!    top (16-byte aligned, as the System V ABI wants at a call).
//!
//! The thread shares the component's memory: it may touch statics (which
//! are `Sync`) and the heap (the allocator is locked). It ends with
//! [`syscall::thread_exit`] (reported to its fault endpoint, if it has
//! one); its objects stay in their slots. Its IPC buffer is its own, but
//! the runtime's helpers that use *the main thread's* IPC buffer
//! ([`crate::transfer`], sessions) must stay on the main thread.

use core::ops::Range;
use core::sync::atomic::{AtomicUsize, Ordering};

use abi::caddr::own;
use abi::map::{Cache, MapAttr};
use abi::{CapSlot, Error, ObjectType};
use interfaces::child;

use crate::syscall;

/// The runtime's range for helper threads' stacks and IPC buffers (1 TiB,
/// never reused).
pub const STACKS: Range<usize> = 0x6100_0000_0000..0x6200_0000_0000;
/// Pages of a helper thread's stack.
pub const STACK_PAGES: usize = 4;
/// Frames [`spawn`] retypes per thread: the stack and the IPC buffer.
pub const PAGES: usize = STACK_PAGES + 1;
/// Bytes of [`STACKS`] per thread: a guard page, the stack, a guard
/// page, the IPC buffer page.
pub const AREA: usize = (STACK_PAGES + 3) * PAGE;

const PAGE: usize = 4096;

/// The next free area in [`STACKS`].
static NEXT_AREA: AtomicUsize = AtomicUsize::new(STACKS.start);

/// Hands out the next [`AREA`] of [`STACKS`]; `None` when the range is used
/// up.
fn reserve_area() -> Option<usize> {
    let start = NEXT_AREA.fetch_add(AREA, Ordering::Relaxed);
    (start.checked_add(AREA)? <= STACKS.end).then_some(start)
}

/// The caller's free slots for a helper thread's objects (own-space
/// addresses, e.g. `child::FIRST_FREE + n`).
#[derive(Clone, Copy, Debug)]
pub struct Slots {
    /// The thread.
    pub thread: CapSlot,
    /// The first of [`PAGES`] consecutive slots for its frames.
    pub frames: CapSlot,
}

/// Where and how a helper thread runs.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    /// Its priority (at most the caller's: the kernel refuses more).
    pub priority: u8,
    /// Its CPU (one of the component's, see [`crate::cpu`]).
    pub cpu: u32,
    /// Where its exit and faults are reported (`abi::caddr::NULL_SLOT`:
    /// nowhere; the thread just stops).
    pub fault_endpoint: CapSlot,
}

impl Placement {
    /// At `priority` on the first of the component's CPUs, its exit and
    /// faults reported nowhere: a helper thread beside the main one.
    pub fn first_cpu(priority: u8) -> Placement {
        Placement {
            priority,
            cpu: crate::cpu::set().nth(0).unwrap_or(0),
            fault_endpoint: abi::caddr::NULL_SLOT,
        }
    }
}

/// Which step of [`spawn`] failed, with the kernel's error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnError {
    /// Retyping the thread or its frames from the untyped.
    Retype(Error),
    /// No room left in [`STACKS`].
    NoAddressSpace,
    /// Mapping the stack or the IPC buffer.
    Map(Error),
    /// `ThreadConfigure` (does the component own its cspace and vspace?).
    Configure(Error),
    /// `ThreadSetSchedParams`.
    Place(Error),
    /// `ThreadStart`.
    Start(Error),
}

impl core::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SpawnError::Retype(e) => write!(f, "retyping the thread's objects: {e:?}"),
            SpawnError::NoAddressSpace => f.write_str("no room left for another thread's stack"),
            SpawnError::Map(e) => write!(f, "mapping the thread's stack: {e:?}"),
            SpawnError::Configure(e) => write!(
                f,
                "configuring the thread: {e:?} (own = [\"cspace\", \"vspace\"] needed)"
            ),
            SpawnError::Place(e) => write!(f, "placing the thread: {e:?}"),
            SpawnError::Start(e) => write!(f, "starting the thread: {e:?}"),
        }
    }
}

/// A started helper thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thread {
    /// Its capability (suspend, resume, place it again).
    pub slot: CapSlot,
    /// Its stack's top.
    pub stack_top: u64,
}

/// Makes a helper thread and starts it at `entry(arg)` (see the module
/// doc for the steps).
pub fn spawn(
    entry: extern "C" fn(u64) -> !,
    arg: u64,
    slots: Slots,
    placement: Placement,
) -> Result<Thread, SpawnError> {
    let untyped = own(child::UNTYPED);
    let vspace = own(child::OWN_VSPACE);
    syscall::retype(untyped, ObjectType::Thread, 0, slots.thread, 1).map_err(SpawnError::Retype)?;
    syscall::retype(untyped, ObjectType::Frame4K, 0, slots.frames, PAGES as u64)
        .map_err(SpawnError::Retype)?;
    let area = reserve_area().ok_or(SpawnError::NoAddressSpace)?;
    let stack = area + PAGE;
    let ipc_buffer = stack + (STACK_PAGES + 1) * PAGE;
    let rw = MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    };
    for i in 0..STACK_PAGES {
        // SAFETY: `reserve_area` handed this area of the runtime's own
        // range to this thread alone (nothing else of the program maps in
        // STACKS), and the frame is fresh from the untyped.
        unsafe {
            syscall::map(
                vspace,
                slots.frames + i as u64,
                (stack + i * PAGE) as u64,
                rw,
            )
        }
        .map_err(SpawnError::Map)?;
    }
    // SAFETY: as above: the area's last page, reserved for this IPC buffer.
    unsafe {
        syscall::map(
            vspace,
            slots.frames + STACK_PAGES as u64,
            ipc_buffer as u64,
            rw,
        )
    }
    .map_err(SpawnError::Map)?;
    syscall::thread_configure(
        slots.thread,
        own(child::OWN_CSPACE),
        vspace,
        ipc_buffer as u64,
        placement.fault_endpoint,
    )
    .map_err(SpawnError::Configure)?;
    syscall::thread_set_sched_params(slots.thread, placement.priority, placement.cpu)
        .map_err(SpawnError::Place)?;
    let stack_top = (stack + STACK_PAGES * PAGE - 16) as u64;
    // SAFETY: the thread runs `entry`, a function of the program that
    // never returns, on a stack of its own that nothing else uses (mapped
    // above, guard pages either side), with its own IPC buffer; it shares
    // only what any code of the program may reach (statics, the locked
    // heap), as a spawned thread does.
    unsafe { syscall::thread_start(slots.thread, entry as usize as u64, stack_top, arg) }
        .map_err(SpawnError::Start)?;
    Ok(Thread {
        slot: slots.thread,
        stack_top,
    })
}
