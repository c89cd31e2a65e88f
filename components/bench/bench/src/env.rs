//! What the benchmarks are built from: objects retyped from the
//! component's own untyped memory into its next free slots, mappings into
//! its own address space, and helper threads that share that address space.
//!
//! # Address-space layout (besides the image, main stack and IPC buffer)
//!
//! | region | what |
//! |--------|------|
//! | [`HELPERS_VA`] + h · [`HELPER_STRIDE`] | helper `h`: an unmapped guard page, a [`HELPER_STACK_PAGES`]-page stack, a gap, its own IPC buffer page at [`ipc_buffer`] |
//! | [`SHM_VA`] | the 2 MiB frame shared with `bench-server` |
//! | [`MEMORY_VA`] | the memory benchmarks' 8 MiB regions, in 2 MiB frames |
//!
//! Each region lies in its own 1 GiB of address space: the whole layout
//! costs four page tables of the address space's pool of sixteen (the
//! image, stack and IPC buffer take six).
//!
//! # Helper threads
//!
//! Helper `h` runs an `extern "C" fn(u64) -> !` in this address space and
//! capability space on its own stack, with its own IPC buffer (long
//! messages travel through it), at a priority the benchmark chooses. Its
//! fault endpoint is [`Helpers`]' endpoint badged `h + 1`, so its exit
//! (`abi::fault::LABEL_EXIT`) or fault arrives there: [`Helpers::join`]
//! waits for them. A thread object, its stack and IPC buffer are made the
//! first time a helper is started and reused by every later start
//! (`ThreadStart` restarts an exited thread). Helpers never use the heap
//! (its lock is not meant for several threads) and never print.

use rt::abi::caddr::own;
use rt::abi::fault::{LABEL_EXCEPTION, LABEL_EXIT, LABEL_PAGE_FAULT};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{CapSlot, Error, ObjectType, Rights};
use rt::interfaces::child;
use rt::interfaces::child::{OWN_CSPACE, OWN_VSPACE, UNTYPED};
use rt::syscall;

use crate::Failure;

/// Helper threads' stacks and IPC buffers.
pub const HELPERS_VA: u64 = 0x0000_0010_0000_0000;
/// Address space per helper.
pub const HELPER_STRIDE: u64 = 0x1_0000;
/// Stack pages per helper (16 KiB; helpers only loop over system calls).
pub const HELPER_STACK_PAGES: u64 = 4;
/// Where `bench-server`'s shared frame is mapped.
pub const SHM_VA: u64 = 0x0000_0020_0000_0000;
/// The memory benchmarks' regions.
pub const MEMORY_VA: u64 = 0x0000_0030_0000_0000;
/// Most helper threads.
pub const MAX_HELPERS: usize = 12;

const PAGE: u64 = 4096;
/// Bytes of a `Frame2M`.
pub const LARGE_PAGE: u64 = 2 << 20;

/// Writable, write-back: ordinary memory.
pub const RW: MapAttr = MapAttr {
    writable: true,
    executable: false,
    cache: Cache::WriteBack,
};

/// The top of helper `h`'s stack.
pub fn stack_top(h: usize) -> u64 {
    HELPERS_VA + h as u64 * HELPER_STRIDE + (1 + HELPER_STACK_PAGES) * PAGE
}

/// Helper `h`'s IPC buffer (a page of its own).
pub fn ipc_buffer(h: usize) -> u64 {
    HELPERS_VA + h as u64 * HELPER_STRIDE + HELPER_STRIDE / 2
}

/// A system call's error as a [`Failure`] naming what was being done.
pub fn failed(what: &'static str) -> impl Fn(Error) -> Failure {
    move |error| Failure::Syscall { what, error }
}

/// The component's own slots and untyped memory.
pub struct Env {
    next_slot: u32,
}

impl Env {
    pub const fn new() -> Env {
        Env {
            next_slot: child::FIRST_FREE,
        }
    }

    /// A free slot of the own capability space.
    pub fn slot(&mut self) -> Result<CapSlot, Failure> {
        if self.next_slot >= 1 << child::CSPACE_BITS {
            return Err(Failure::OutOfSlots);
        }
        self.next_slot += 1;
        Ok(own(self.next_slot - 1))
    }

    /// A new object of `kind` from the own untyped memory, in a fresh slot.
    pub fn make(&mut self, kind: ObjectType, size_bits: u64) -> Result<CapSlot, Failure> {
        let slot = self.slot()?;
        syscall::retype(own(UNTYPED), kind, size_bits, slot, 1).map_err(failed("Retype"))?;
        Ok(slot)
    }

    /// The object in `kept`, made (`kind`, fixed size) on the first call.
    pub fn once(
        &mut self,
        kept: &mut Option<CapSlot>,
        kind: ObjectType,
    ) -> Result<CapSlot, Failure> {
        match *kept {
            Some(slot) => Ok(slot),
            None => Ok(*kept.insert(self.make(kind, 0)?)),
        }
    }

    /// `count` fresh frames of `kind` mapped back to back from `vaddr` with
    /// `attr`.
    pub fn map_frames(
        &mut self,
        kind: ObjectType,
        vaddr: u64,
        count: u64,
        attr: MapAttr,
    ) -> Result<(), Failure> {
        let size = if kind == ObjectType::Frame2M {
            LARGE_PAGE
        } else {
            PAGE
        };
        for i in 0..count {
            let frame = self.make(kind, 0)?;
            map(frame, vaddr + i * size, attr)?;
        }
        Ok(())
    }
}

/// Maps `frame` at `vaddr` of the own address space.
pub fn map(frame: CapSlot, vaddr: u64, attr: MapAttr) -> Result<(), Failure> {
    // SAFETY: every address this component maps at lies in one of the
    // regions of the module doc, which nothing else of the program uses
    // (the image sits at 2 MiB, the stack and IPC buffer just below 128
    // TiB); the memory becomes reachable only through the raw pointers of
    // the code that owns the region.
    unsafe { syscall::map(own(OWN_VSPACE), frame, vaddr, attr) }.map_err(failed("Map"))
}

/// The helper threads.
pub struct Helpers {
    /// Receives the helpers' exits and faults.
    fault_ep: Option<CapSlot>,
    threads: [Option<CapSlot>; MAX_HELPERS],
}

impl Helpers {
    pub const fn new() -> Helpers {
        Helpers {
            fault_ep: None,
            threads: [None; MAX_HELPERS],
        }
    }

    /// Starts helper `h` at `entry` with `arg` and `priority` (at most the
    /// component's own, `child::PRIORITY`).
    pub fn start(
        &mut self,
        env: &mut Env,
        h: usize,
        entry: extern "C" fn(u64) -> !,
        arg: u64,
        priority: u8,
    ) -> Result<(), Failure> {
        let thread = self.thread(env, h)?;
        syscall::thread_set_sched_params(thread, priority, 0)
            .map_err(failed("ThreadSetSchedParams"))?;
        // SysV: at function entry rsp + 8 is 16-byte aligned (as after a
        // call).
        let rsp = stack_top(h) - 8;
        // SAFETY: the helper runs `entry`, written to run as a helper (see
        // the module doc), on its own stack that nothing else uses; it is
        // not running now (`join` saw its exit, or it is new).
        unsafe { syscall::thread_start(thread, entry as *const () as u64, rsp, arg) }
            .map_err(failed("ThreadStart"))
    }

    /// Helper `h`'s thread: made, given its stack and IPC buffer and
    /// configured the first time.
    fn thread(&mut self, env: &mut Env, h: usize) -> Result<CapSlot, Failure> {
        if h >= MAX_HELPERS {
            return Err(Failure::TooManyHelpers);
        }
        if let Some(thread) = self.threads[h] {
            return Ok(thread);
        }
        let fault_ep = match self.fault_ep {
            Some(ep) => ep,
            None => {
                let ep = env.make(ObjectType::Endpoint, 0)?;
                self.fault_ep = Some(ep);
                ep
            }
        };
        let fault = env.slot()?;
        syscall::cap_mint(fault_ep, fault, Rights::WRITE, h as u64 + 1)
            .map_err(failed("CapMint"))?;
        let stack_bottom = stack_top(h) - HELPER_STACK_PAGES * PAGE;
        env.map_frames(ObjectType::Frame4K, stack_bottom, HELPER_STACK_PAGES, RW)?;
        env.map_frames(ObjectType::Frame4K, ipc_buffer(h), 1, RW)?;
        let thread = env.make(ObjectType::Thread, 0)?;
        syscall::thread_configure(
            thread,
            own(OWN_CSPACE),
            own(OWN_VSPACE),
            ipc_buffer(h),
            fault,
        )
        .map_err(failed("ThreadConfigure"))?;
        self.threads[h] = Some(thread);
        Ok(thread)
    }

    /// Stops helpers `0..count` after a failure, whatever they are doing,
    /// so that they can be started again: suspends them and takes their
    /// pending exit or fault reports.
    pub fn stop(&mut self, count: usize) {
        for thread in self.threads.iter().take(count).flatten() {
            // An exited helper cannot be suspended: nothing to do then.
            let _ = syscall::thread_suspend(*thread);
        }
        if let Some(ep) = self.fault_ep {
            while syscall::nb_recv(ep).is_ok() {}
        }
    }

    /// Waits until helpers `0..count` have all exited; a non-zero exit code
    /// or a fault is a failure (a faulted helper is suspended, so it can be
    /// started again).
    pub fn join(&mut self, count: usize) -> Result<(), Failure> {
        let ep = self.fault_ep.ok_or(Failure::TooManyHelpers)?;
        let mut first_failure = None;
        for _ in 0..count {
            let (badge, info, words) = syscall::recv(ep).map_err(failed("Recv (helper exit)"))?;
            let h = badge.wrapping_sub(1) as usize;
            let failure = match info.label() {
                LABEL_EXIT if words[0] == 0 => None,
                LABEL_EXIT => Some(Failure::Helper {
                    helper: h,
                    code: words[0],
                }),
                label @ (LABEL_PAGE_FAULT | LABEL_EXCEPTION) => {
                    if let Some(thread) = self.threads.get(h).copied().flatten() {
                        let _ = syscall::thread_suspend(thread);
                    }
                    Some(Failure::HelperFault {
                        helper: h,
                        label,
                        words,
                    })
                }
                label => Some(Failure::Unexpected { label }),
            };
            first_failure = first_failure.or(failure);
        }
        first_failure.map_or(Ok(()), Err)
    }
}
