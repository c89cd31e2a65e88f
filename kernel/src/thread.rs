//! Threads and the scheduler.
//!
//! A thread control block ([`Thread`]) is a kernel object made by `Retype`
//! from untyped memory (2 KiB: more than half of it the x87/SSE/AVX state,
//! `arch::x86_64::fpu`), or by the kernel for root at boot. A
//! thread's user context is saved *inside* its `Thread` (the entry paths
//! push registers straight into `Thread::context`), and the kernel itself
//! runs on one stack per CPU: a system call that blocks simply does not
//! return to its caller's context; the scheduler restores another thread's.
//! There is no kernel-thread state to save, which keeps every entry path a
//! straight line.
//!
//! Scheduling: fixed priorities (0..=255, higher runs first), round-robin
//! within a priority, preemption on every timer tick. Each CPU has its own
//! run queue (intrusive lists through the threads' `next`/`prev` links plus
//! a bitmap of non-empty priorities), in its `PerCpu`; a thread runs on its
//! `cpu` (`Thread::run_queue` points at that CPU's queue). Waking a thread
//! of another CPU sends that CPU a reschedule IPI when it should run at
//! once (`smp::kick`).
//!
//! # Invariants
//!
//! - A thread is in at most one queue at a time — a run queue (only while
//!   `Runnable`), an endpoint's queue (`BlockedSend`/`BlockedRecv`) or a
//!   notification's queue (`BlockedNotification`) — and `queue` says which;
//!   `Running`, `BlockedReply`, `Inactive` and `Suspended` threads are in
//!   none. A thread in no queue has `next` = `prev` = `None` (the IPC
//!   fast path relies on it when it queues a thread); the head of a queue
//!   has `prev` = `None`.
//! - `caller`/`reply_from` are symmetric: `a.caller == Some(b)` iff `b` is
//!   `BlockedReply` with `b.reply_from == Some(a)`. A `BlockedReply` thread
//!   whose reply was saved (`SaveReply`) has `reply_from == None` and
//!   `reply_slot` naming the slot of its reply capability, which names it
//!   back (`crate::reply`).
//! - [`live_threads`] counts threads that are runnable, running or blocked;
//!   every state change goes through [`set_state`] to keep it exact (but
//!   the IPC fast path's, which are live to live). The machine powers off
//!   when it reaches zero.
//! - The kernel runs with interrupts disabled and, with several CPUs
//!   online, under the big kernel lock (`smp.rs`), so these structures
//!   need no locks of their own. The borrow checker enforces it: a
//!   `Thread` is reached only through the kernel token's [`Threads`] part
//!   (`token.rs`) — [`Threads::get`], [`Threads::get_mut`] — so a thread
//!   reference lives no longer than
//!   the borrow of the token, and two `&mut` to one thread do not
//!   compile. Functions that change threads take `&mut Threads` (or the
//!   whole `&mut Kernel` when they also change run queues or objects);
//!   the ones that do not return take the token by value and give it up
//!   on the way out.
//! - A thread that is another CPU's current thread may have its frame
//!   written by that CPU's entry paths at any moment (they store into it
//!   before they take the lock): a token holder does not touch such a
//!   thread's frame (`smp::current_elsewhere`; `syscall.rs`).

use core::ptr::NonNull;

use kcore::cap::Slot;

use crate::arch::percpu;
use crate::arch::trap::TrapFrame;
use crate::arch::{cpu, fpu, gdt};
use crate::syscall::{after_ipc, lookup, thread_cap, user_address, Outcome};
use crate::token::{Kernel, Objects, Threads};
use crate::uaccess::USER_END;
use crate::{ipc, object, vspace};
use abi::args::{self, Args};
use abi::ipc_buffer::registers as reg;
use abi::{Error, ObjectType, Rights, Sys};
use kcore::cap::{self, SlotId};

/// A thread's state. The encoding is fixed (`repr(u8)`, explicit values)
/// because the IPC fast path (`arch::x86_64::syscall_entry`) reads and
/// writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// Made but not started, or exited: runs again only with `ThreadStart`.
    Inactive = 0,
    /// Stopped by `ThreadSuspend`: `ThreadResume` continues it.
    Suspended = 1,
    Runnable = 2,
    Running = 3,
    /// Waiting in an endpoint's queue to send (or to deliver a fault or
    /// exit message).
    BlockedSend = 4,
    /// Waiting in an endpoint's queue to receive.
    BlockedRecv = 5,
    /// Sent a call (or a fault) and waits for the reply.
    BlockedReply = 6,
    /// Waiting on a notification.
    BlockedNotification = 7,
}

impl State {
    /// Counts towards [`live_threads`].
    pub const fn is_live(self) -> bool {
        !matches!(self, State::Inactive | State::Suspended)
    }
}

/// Which queue a thread is linked into. `repr(u64)`: a tag word, then the
/// payload word (a layout Rust defines for primitive-repr enums), because
/// the IPC fast path writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Queue {
    None = 0,
    Run = 1,
    /// The endpoint or notification at this physical address.
    Object(u64) = 2,
}

/// What a blocked sender delivers when a receiver comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendKind {
    /// `Send`/`NbSend`: the message is in the sender's registers.
    Send,
    /// `Call`: as `Send`, then the sender waits for the reply.
    Call,
    /// A fault message (in `Thread::kernel_msg`); the thread waits for the
    /// reply that resumes it.
    Fault,
    /// An exit report (in `Thread::kernel_msg`); the thread is gone after.
    Exit,
}

/// A thread's saved user registers. 16-byte aligned so that the CPU's
/// interrupt frame push (which aligns RSP to 16) lands exactly in it.
#[repr(C, align(16))]
pub struct UserContext(pub TrapFrame);

#[repr(C)]
pub struct Thread {
    pub context: UserContext,
    pub state: State,
    pub priority: u8,
    pub cpu: u32,
    /// 1 while this thread's FPU state is live in its CPU's registers
    /// (`fpu.rs`). Right after `cpu`: the IPC fast path compares both as
    /// one word, so that a live thread fails its "same CPU" check.
    pub fpu_live: u32,
    /// `cpu`'s run queue (kept with `cpu`: one load instead of an index
    /// computation on every wake-up). Private: always
    /// `percpu::run_queue_of(cpu)` ([`init_at`], [`set_cpu`]).
    run_queue: *mut RunQueue,
    /// The CPUs this thread may place threads on (`abi::cpu`): given by
    /// `ThreadSetSchedParams` (a subset of the caller's, holding `cpu`),
    /// else the set of the thread that made it (`Retype`).
    pub cpus: u64,
    pub id: u64,
    /// Number of capabilities naming this thread.
    pub refs: u64,
    pub next: Option<ThreadRef>,
    pub prev: Option<ThreadRef>,
    pub queue: Queue,
    /// While `BlockedSend`: the badge of the capability sent through,
    /// whether it may transfer a capability, and what it sends.
    pub send_badge: u64,
    pub send_grant: bool,
    pub send_kind: SendKind,
    /// A message the kernel sends for the thread (fault, exit): label and
    /// four words.
    pub kernel_msg: [u64; 5],
    /// The thread whose call (or fault) this thread received and has not
    /// answered yet.
    pub caller: Option<ThreadRef>,
    /// While `BlockedReply`: the thread that holds our reply.
    pub reply_from: Option<ThreadRef>,
    /// Whether the pending reply resumes a fault (registers untouched).
    pub reply_is_fault: bool,
    /// While `BlockedReply` with a saved reply (`SaveReply`): the slot
    /// (kernel address, `SlotId`) holding the reply capability that answers
    /// this thread; 0 if none (see `crate::reply`).
    pub reply_slot: u64,
    /// Physical address of the bound notification, 0 if none.
    pub bound_notification: u64,
    /// User address of the IPC buffer, 0 if none.
    pub ipc_buffer: u64,
    /// The last translation of `ipc_buffer` (`ipc::ipc_buffer_ptr`).
    pub ipc_buffer_cache: core::cell::Cell<IpcBufferCache>,
    /// The capability space, address space and fault endpoint the thread
    /// was configured with: copies of the caller's capabilities, so that
    /// revoking them reaches the thread too.
    pub cspace: Slot,
    pub vspace: Slot,
    pub fault_endpoint: Slot,
    name: [u8; 16],
    name_len: u8,
    /// Link in the kernel's list of destroyed objects whose slots are
    /// still to be emptied (`object::PENDING`).
    pub pending_next: u64,
    /// Timer ticks that found this thread running in user mode
    /// (`ThreadCpuTime`): sampled CPU time, charged on the timer's path,
    /// never on the IPC paths.
    pub cpu_ticks: u64,
    /// The x87/SSE/AVX state while the thread is not live (64-byte
    /// aligned, as `xsave` requires; last, so the fields above share cache
    /// lines).
    pub fpu: fpu::FpuState,
}

const _: () = assert!(core::mem::size_of::<Thread>() <= 1 << abi::object::THREAD_BITS);

/// A translation of a thread's IPC buffer address, kept so that a long
/// message does not walk the page tables on both sides (four walks per
/// call, half of a long message's cost before it was kept). Valid while
/// the thread's buffer address and address space are the ones it was made
/// for and that address space has unmapped nothing since
/// (`vspace::Header::unmaps`): a mapping changes only by being unmapped
/// (`Map` never replaces one), so an unchanged count means an unchanged
/// translation. Only successful translations are kept. All-zero (a fresh
/// thread's) is "nothing kept": `root` 0 names no address space.
#[derive(Clone, Copy, Default, Debug)]
pub struct IpcBufferCache {
    /// The buffer address translated.
    pub va: u64,
    /// The address space (its top-level table) it was translated in.
    pub root: u64,
    /// That address space's unmap count then.
    pub unmaps: u64,
    /// The buffer in the kernel's direct map.
    pub kernel_ptr: u64,
    /// Whether the mapping is writable.
    pub writable: bool,
}

impl Thread {
    pub fn name(&self) -> &str {
        core::str::from_utf8(&self.name[..usize::from(self.name_len)]).unwrap_or("?")
    }

    pub fn set_name(&mut self, name: &str) {
        let len = name.len().min(self.name.len());
        self.name[..len].copy_from_slice(&name.as_bytes()[..len]);
        self.name_len = len as u8;
    }

    /// The physical address of this thread control block.
    pub fn object_phys(&self) -> u64 {
        self as *const Thread as u64 - crate::mm::DIRECT_MAP_BASE
    }

    pub fn context_top(&self) -> u64 {
        &self.context as *const UserContext as u64 + core::mem::size_of::<UserContext>() as u64
    }

    pub fn frame(&mut self) -> &mut TrapFrame {
        &mut self.context.0
    }

    /// Physical address of the thread's top-level page table, if its
    /// address-space slot holds one.
    pub fn page_table_root(&self) -> Option<u64> {
        match self.vspace.cap {
            Some(cap) if cap.kind == abi::ObjectType::AddressSpace => Some(cap.object),
            _ => None,
        }
    }
}

/// A pointer to a live thread control block. A `Thread` is destroyed (see
/// `object::destroy_thread`) only after every `ThreadRef` to it has been
/// removed from queues, `caller`/`reply_from` links and per-CPU state (its
/// memory stays a `Thread` until its untyped memory is revoked and
/// retyped, which no `ThreadRef` survives). Made only by `unsafe`
/// constructors ([`ThreadRef::from_ptr`], `object::thread_at`) and by the
/// entry paths from `PerCpu::current`, so a `ThreadRef` is a valid handle
/// and reaching the thread through the kernel token ([`Threads`]) is safe.
///
/// `repr(transparent)` over `NonNull`, so `Option<ThreadRef>` is a plain
/// pointer with `None` = null (guaranteed by Rust; the IPC fast path relies
/// on it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct ThreadRef(NonNull<Thread>);

// SAFETY: a ThreadRef is only dereferenced through the kernel token
// (`token.rs`), which only the holder of the big kernel lock has.
unsafe impl Send for ThreadRef {}

impl ThreadRef {
    /// The thread's kernel virtual address.
    pub fn as_ptr(self) -> *mut Thread {
        self.0.as_ptr()
    }

    /// The thread at kernel virtual address `ptr`.
    ///
    /// # Safety
    /// `ptr` must point to an initialised `Thread` that stays alive while
    /// the handle is used.
    pub unsafe fn from_ptr(ptr: *mut Thread) -> ThreadRef {
        // SAFETY: the caller promises a valid, hence non-null, pointer.
        ThreadRef(unsafe { NonNull::new_unchecked(ptr) })
    }
}

/// Thread access through the kernel token: every reference borrows the
/// token, so it cannot outlive the lock and cannot alias a `&mut`.
impl Threads {
    /// The thread `t`, to read.
    #[inline(always)]
    pub fn get(&self, t: ThreadRef) -> &Thread {
        // SAFETY: `t` names a live thread (`ThreadRef`'s constructors);
        // the token is borrowed shared for the reference's lifetime, so no
        // `&mut Thread` is live (every one borrows the token mutably).
        unsafe { &*t.as_ptr() }
    }

    /// The thread `t`, to change.
    #[inline(always)]
    pub fn get_mut(&mut self, t: ThreadRef) -> &mut Thread {
        // SAFETY: as in `get`; the token is borrowed mutably for the
        // reference's lifetime, so no other reference to a thread is live.
        unsafe { &mut *t.as_ptr() }
    }
}

/// Interrupts enabled, IOPL 0; the RFLAGS a thread starts with.
pub const USER_RFLAGS: u64 = 0x202;
static NEXT_ID: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// A fresh user frame: user selectors, interrupts on, returned with `iretq`.
pub fn initial_frame(rip: u64, rsp: u64, arg: u64) -> TrapFrame {
    TrapFrame {
        rip,
        cs: u64::from(gdt::USER_CODE64),
        rflags: USER_RFLAGS,
        rsp,
        ss: u64::from(gdt::USER_DATA),
        rdi: arg,
        // vector 0 (not the syscall marker): the first entry uses iretq.
        ..TrapFrame::default()
    }
}

/// Initialises a thread control block in the zeroed memory at `ptr`:
/// inactive, priority 0, CPU 0 (its CPU set: CPU 0), no spaces, one
/// reference, the clean FPU state.
///
/// # Safety
/// `ptr` must be 2^`THREAD_BITS` bytes of writable kernel memory, aligned
/// to that size, that nothing else uses.
pub unsafe fn init_at(ptr: *mut Thread) -> ThreadRef {
    let thread = Thread {
        context: UserContext(initial_frame(0, 0, 0)),
        state: State::Inactive,
        priority: 0,
        cpu: 0,
        fpu_live: 0,
        run_queue: percpu::run_queue_of(0),
        cpus: 1,
        id: NEXT_ID.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
        refs: 1,
        next: None,
        prev: None,
        queue: Queue::None,
        send_badge: 0,
        send_grant: false,
        send_kind: SendKind::Send,
        kernel_msg: [0; 5],
        caller: None,
        reply_from: None,
        reply_is_fault: false,
        reply_slot: 0,
        bound_notification: 0,
        ipc_buffer: 0,
        ipc_buffer_cache: core::cell::Cell::new(IpcBufferCache {
            va: 0,
            root: 0,
            unmaps: 0,
            kernel_ptr: 0,
            writable: false,
        }),
        cspace: Slot::default(),
        vspace: Slot::default(),
        fault_endpoint: Slot::default(),
        name: [0; 16],
        name_len: 0,
        pending_next: 0,
        cpu_ticks: 0,
        fpu: fpu::FpuState::CLEAN,
    };
    // SAFETY: the caller provides exclusive, writable, suitably sized memory
    // (untyped memory is aligned to the object size, 2 KiB; the Thread
    // needs 64).
    unsafe {
        ptr.write(thread);
        ThreadRef::from_ptr(ptr)
    }
}

// ---------------------------------------------------------------------------
// Intrusive queues
// ---------------------------------------------------------------------------

/// Head and tail of an intrusive thread queue (run queues, endpoints,
/// notifications).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct ThreadQueue {
    pub head: Option<ThreadRef>,
    pub tail: Option<ThreadRef>,
}

impl ThreadQueue {
    pub const EMPTY: ThreadQueue = ThreadQueue {
        head: None,
        tail: None,
    };

    pub fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    pub fn push_back(&mut self, threads: &mut Threads, t: ThreadRef, queue: Queue) {
        let tail = self.tail;
        let thread = threads.get_mut(t);
        thread.next = None;
        thread.prev = tail;
        thread.queue = queue;
        match tail {
            Some(tail) => threads.get_mut(tail).next = Some(t),
            None => self.head = Some(t),
        }
        self.tail = Some(t);
    }

    pub fn pop_front(&mut self, threads: &mut Threads) -> Option<ThreadRef> {
        let t = self.head?;
        self.remove(threads, t);
        Some(t)
    }

    /// Unlinks `t`, which must be in this queue.
    pub fn remove(&mut self, threads: &mut Threads, t: ThreadRef) {
        let thread = threads.get_mut(t);
        let (prev, next) = (thread.prev, thread.next);
        thread.next = None;
        thread.prev = None;
        thread.queue = Queue::None;
        match prev {
            Some(p) => threads.get_mut(p).next = next,
            None => self.head = next,
        }
        match next {
            Some(n) => threads.get_mut(n).prev = prev,
            None => self.tail = prev,
        }
    }
}

// ---------------------------------------------------------------------------
// Run queues
// ---------------------------------------------------------------------------

/// `repr(C)`: the IPC fast path reads `nonempty` and `summary`.
#[repr(C)]
pub struct RunQueue {
    queues: [ThreadQueue; 256],
    /// Bit p set iff queues[p] is non-empty: finding the highest priority
    /// is four word scans, not 256 queue checks.
    nonempty: [u64; 4],
    /// Bit w set iff nonempty[w] != 0.
    summary: u64,
}

impl RunQueue {
    pub const fn new() -> Self {
        Self {
            queues: [ThreadQueue::EMPTY; 256],
            nonempty: [0; 4],
            summary: 0,
        }
    }

    fn push(&mut self, threads: &mut Threads, t: ThreadRef, priority: u8) {
        let p = usize::from(priority);
        self.queues[p].push_back(threads, t, Queue::Run);
        self.nonempty[p / 64] |= 1 << (p % 64);
        self.summary |= 1 << (p / 64);
    }

    fn remove(&mut self, threads: &mut Threads, t: ThreadRef, priority: u8) {
        let p = usize::from(priority);
        self.queues[p].remove(threads, t);
        if self.queues[p].is_empty() {
            self.nonempty[p / 64] &= !(1 << (p % 64));
            if self.nonempty[p / 64] == 0 {
                self.summary &= !(1 << (p / 64));
            }
        }
    }

    #[inline(always)]
    fn highest_priority(&self) -> Option<u8> {
        if self.summary == 0 {
            return None;
        }
        let word = 63 - self.summary.leading_zeros() as usize;
        let bits = self.nonempty[word & 3];
        Some((word * 64 + 63 - bits.leading_zeros() as usize) as u8)
    }

    fn pop_highest(&mut self, threads: &mut Threads) -> Option<ThreadRef> {
        let p = self.highest_priority()?;
        let t = self.queues[usize::from(p)].head?;
        self.remove(threads, t, p);
        Some(t)
    }
}

impl Objects {
    /// The run queue at `rq`.
    ///
    /// # Safety
    /// `rq` is some CPU's run queue: a thread's `run_queue` (always its
    /// CPU's) or `percpu::run_queue_of`. Run queues are shared state under
    /// the big kernel lock (a lock-free reader reads only its own CPU's
    /// bitmaps, and never while a token exists: `smp.rs`).
    #[inline(always)]
    unsafe fn run_queue_mut(&mut self, rq: *mut RunQueue) -> &mut RunQueue {
        // SAFETY: the caller's promise; borrowed from the token.
        unsafe { &mut *rq }
    }
}

/// Offsets of the run-queue bitmaps, for the IPC fast path (which reads
/// its own CPU's through GS: the run queue is part of `PerCpu`).
pub(crate) const RUN_QUEUE_NONEMPTY: usize = core::mem::offset_of!(RunQueue, nonempty);
pub(crate) const RUN_QUEUE_SUMMARY: usize = core::mem::offset_of!(RunQueue, summary);
static LIVE_THREADS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Moves thread `t` (in no run queue) to CPU `cpu`.
pub fn set_cpu(threads: &mut Threads, t: ThreadRef, cpu: u32) {
    let thread = threads.get_mut(t);
    thread.cpu = cpu;
    thread.run_queue = percpu::run_queue_of(cpu as usize);
}

pub fn live_threads() -> u64 {
    LIVE_THREADS.load(core::sync::atomic::Ordering::Relaxed)
}

/// Changes a thread's state and keeps [`live_threads`] exact. Queue
/// membership is the caller's business.
pub fn set_state(threads: &mut Threads, t: ThreadRef, state: State) {
    let thread = threads.get_mut(t);
    let (was, is) = (thread.state.is_live(), state.is_live());
    thread.state = state;
    use core::sync::atomic::Ordering::Relaxed;
    if is && !was {
        LIVE_THREADS.fetch_add(1, Relaxed);
    } else if was && !is {
        LIVE_THREADS.fetch_sub(1, Relaxed);
    }
}

/// Makes a thread runnable and puts it at the end of its priority's queue
/// (its CPU's); when that CPU is another, [`queued_on_other_cpu`] follows.
#[inline(always)]
pub fn make_runnable(k: &mut Kernel, t: ThreadRef) {
    k.check();
    set_state(&mut k.threads, t, State::Runnable);
    let thread = k.threads.get(t);
    let (rq, priority) = (thread.run_queue, thread.priority);
    // SAFETY: a thread's `run_queue` is its CPU's.
    unsafe { k.objects.run_queue_mut(rq) }.push(&mut k.threads, t, priority);
    if !percpu::is_own_run_queue(rq) {
        queued_on_other_cpu(k, t);
    }
}

/// `t` was just queued on another CPU's run queue: if its FPU state is
/// live here (it ran here and moves), save it; then tell that CPU
/// (`smp::kick`). The big kernel lock is held, so nobody takes `t` off
/// the queue meanwhile. (A thread's state is live only on its own CPU or
/// while it runs: `ThreadSetSchedParams` saves it on the old CPU, and a
/// CPU saves it before it idles.)
#[cold]
#[inline(never)]
fn queued_on_other_cpu(k: &mut Kernel, t: ThreadRef) {
    let thread = k.threads.get(t);
    let (fpu_live, cpu, priority) = (thread.fpu_live, thread.cpu, thread.priority);
    if fpu_live != 0 {
        fpu::before_moving(&mut k.threads, t, cpu);
    }
    crate::smp::kick(&k.threads, cpu, priority);
}

/// Takes a thread out of whatever run queue it is in (it must be
/// `Runnable`).
pub fn remove_from_run_queue(k: &mut Kernel, t: ThreadRef) {
    let thread = k.threads.get(t);
    if thread.queue == Queue::Run {
        let (rq, priority) = (thread.run_queue, thread.priority);
        // SAFETY: a thread's `run_queue` is its CPU's.
        unsafe { k.objects.run_queue_mut(rq) }.remove(&mut k.threads, t, priority);
    }
}

/// Whether a runnable thread of higher priority than `priority` waits.
#[inline(always)]
pub fn higher_priority_waiting(priority: u8) -> bool {
    // This CPU's run queue's bitmaps, read GS-relative like the IPC fast
    // path does (one load each, as from a static).
    let summary = percpu::run_queue_summary();
    if summary == 0 {
        return false;
    }
    let word = 63 - summary.leading_zeros() as usize;
    let bits = percpu::run_queue_nonempty(word);
    (word * 64 + 63 - bits.leading_zeros() as usize) as u8 > priority
}

/// Takes the highest-priority runnable thread of this CPU's run queue.
#[inline(always)]
pub fn pop_highest_here(k: &mut Kernel) -> Option<ThreadRef> {
    // SAFETY: this CPU's PerCpu (a raw place, no reference made).
    let rq = unsafe { &raw mut (*percpu::this_cpu()).run_queue };
    // SAFETY: this CPU's run queue.
    unsafe { k.objects.run_queue_mut(rq) }.pop_highest(&mut k.threads)
}

/// The thread that entered the kernel on this CPU.
pub fn current() -> Option<ThreadRef> {
    // SAFETY: reading this CPU's own PerCpu with interrupts disabled.
    let current = unsafe { (*percpu::this_cpu()).current };
    NonNull::new(current).map(ThreadRef)
}

/// Whether a system call can return straight to `t`, the calling thread:
/// it still runs and its address space is the one loaded.
#[inline(always)]
pub fn can_return_directly(threads: &Threads, t: ThreadRef) -> bool {
    let thread = threads.get(t);
    thread.state == State::Running && thread.page_table_root() == Some(cpu::read_cr3())
}

/// Records the thread a system call switches to (see `syscall_continue`).
pub fn set_next(next: Option<ThreadRef>) {
    let ptr = next.map_or(core::ptr::null_mut(), |t| t.0.as_ptr());
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    unsafe { (*percpu::this_cpu()).next = ptr };
}

/// Takes the thread recorded by [`set_next`].
pub fn take_next() -> Option<ThreadRef> {
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    let ptr = unsafe { core::mem::replace(&mut (*percpu::this_cpu()).next, core::ptr::null_mut()) };
    NonNull::new(ptr).map(ThreadRef)
}

/// Runs `t` now: saves another thread's live FPU state (`fpu.rs`; the
/// IPC fast path, the only other switch, does the same in assembly),
/// switches address space and restores its user context. A thread whose address
/// space was deleted cannot run: it is made inactive (and reported) and
/// the scheduler picks another.
pub fn switch_to(mut k: Kernel, t: ThreadRef) -> ! {
    k.check();
    // First, while `t` is the only value the (rare) call must keep.
    fpu::before_running(&mut k.threads, percpu::this_cpu(), t);
    let thread = k.threads.get(t);
    let Some(root) = thread.page_table_root() else {
        crate::kprintln!(
            "kernel: thread '{}' (id {}) has no address space: stopped",
            thread.name(),
            thread.id
        );
        set_state(&mut k.threads, t, State::Inactive);
        schedule(k)
    };
    set_state(&mut k.threads, t, State::Running);
    enter(&mut k.threads, t, root);
    restore(k, t)
}

/// Makes `t` (already marked running) this CPU's current thread with the
/// address space `root`: `PerCpu::current` (where the next system call
/// saves registers), `TSS.rsp0` (where the next interrupt does) and CR3.
/// Its context is loaded by the caller. The IPC fast path does the same in
/// assembly (`SE_ENTER` in `arch/x86_64/syscall_entry.s`): keep the two in
/// step.
pub fn enter(threads: &mut Threads, t: ThreadRef, root: u64) {
    let thread = threads.get_mut(t);
    thread.state = State::Running;
    trace!(run(thread.id));
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    unsafe { (*percpu::this_cpu()).current = t.0.as_ptr() };
    percpu::set_context_top(thread.context_top());
    if cpu::read_cr3() != root {
        // SAFETY: every address space shares the kernel half (copied from
        // the kernel's PML4 at creation), so the kernel keeps running.
        unsafe { cpu::write_cr3(root) };
    }
}

/// Returns to the thread that entered the kernel on this CPU. Unlike
/// [`switch_to`] it leaves the per-CPU state and TSS alone: they still
/// describe this thread (the common syscall return path). Should the
/// system call have stopped the thread or changed its address space, it
/// takes the long way.
pub fn resume(k: Kernel, t: ThreadRef) -> ! {
    k.check();
    let thread = k.threads.get(t);
    if thread.state != State::Running {
        schedule(k)
    }
    // Moved to another CPU while it ran here (`smp.rs`): it goes there.
    if thread.cpu != percpu::this_cpu_index() {
        preempt(k, t)
    }
    match thread.page_table_root() {
        Some(root) if root == cpu::read_cr3() => restore(k, t),
        _ => switch_to(k, t),
    }
}

/// Loads `t`'s user context: the way out to user mode. The token is given
/// up here, right before `return_to_user` releases the lock.
fn restore(k: Kernel, t: ThreadRef) -> ! {
    unsafe extern "C" {
        fn return_to_user(frame: *const TrapFrame) -> !;
    }
    let frame = &raw const k.threads.get(t).context.0;
    // The lock-free IPC fast path may run again (only this thread's frame
    // is read from here on; `return_to_user` then gives the lock on).
    if crate::smp::active() {
        crate::smp::open_gates();
    }
    k.leave();
    // SAFETY: the frame is a complete user context (built by the entry
    // path, by initial_frame or by ThreadRegisters, which checks rip/rsp)
    // with user selectors, so iretq/sysretq return to user mode; a syscall
    // frame's rip came from the CPU and is canonical. `t` is this CPU's
    // current thread: nobody else writes its frame now.
    unsafe { return_to_user(frame) }
}

/// Ends the current thread's turn: it goes to the back of its queue.
pub fn preempt(mut k: Kernel, t: ThreadRef) -> ! {
    if k.threads.get(t).state == State::Running {
        make_runnable(&mut k, t);
    }
    schedule(k)
}

/// Waits for an interrupt with nothing to run: no thread's FPU state
/// stays live here (it may move to another CPU meanwhile), and the big
/// kernel lock is released meanwhile (interrupts in here take it
/// themselves when they need it), so the token is given up and a fresh
/// one is returned. With several CPUs, a wake-up that
/// queued nothing here (a timer tick) goes back to sleep without the
/// lock: an idle CPU does not compete for it 100 times a second. (A
/// thread queued here comes with a reschedule IPI, sent after the queue
/// was written.)
#[inline(never)]
fn idle(mut k: Kernel) -> Kernel {
    let smp = crate::smp::active();
    if smp {
        fpu::release_live(&mut k.threads);
    }
    trace!(idle());
    crate::smp::unlock(k);
    loop {
        cpu::enable_interrupts_and_halt();
        cpu::disable_interrupts();
        if !smp || percpu::run_queue_summary() != 0 || live_threads() == 0 {
            break;
        }
    }
    crate::smp::lock();
    // SAFETY: the lock is taken again, interrupts are masked, and this
    // CPU's token was given up by `unlock` above (the interrupt handlers
    // that ran meanwhile gave theirs up before they returned).
    unsafe { Kernel::enter() }
}

/// Picks the next thread and runs it; halts while there is none. When no
/// live thread is left, the machine is powered off.
pub fn schedule(mut k: Kernel) -> ! {
    // Interrupts are masked on every way here (the kernel runs with them
    // masked; the idle loop masks them again after its halt).
    loop {
        k.check();
        if let Some(cur) = current() {
            // A thread that was running and is still marked so (e.g. it
            // yielded without being requeued) would be lost: requeue it.
            if k.threads.get(cur).state == State::Running {
                make_runnable(&mut k, cur);
            }
        }
        // SAFETY: this CPU's PerCpu, interrupts disabled: nothing runs now.
        unsafe { (*percpu::this_cpu()).current = core::ptr::null_mut() };
        if let Some(next) = pop_highest_here(&mut k) {
            switch_to(k, next);
        }
        if live_threads() == 0 {
            let status = crate::exit::run_status();
            match status {
                crate::exit::ExitCode::Success => {
                    crate::kprintln!("kernel: no user threads left: powering off")
                }
                crate::exit::ExitCode::Failure => crate::kprintln!(
                    "kernel: no user threads left: powering off with the failure status (root ended with an error)"
                ),
            }
            crate::exit::exit(status);
        }
        k = idle(k);
    }
}

// ---------------------------------------------------------------------------
// System calls: decode and perform; `syscall` dispatches here.
// ---------------------------------------------------------------------------

/// A checked call of `ThreadConfigure`, `ThreadSetSchedParams`, `CpuSet`,
/// `ThreadStart`, `ThreadSuspend`, `ThreadResume`, `ThreadRegisters`,
/// `BindNotification`, ready to perform.
#[derive(Debug)]
pub enum Call {
    ThreadConfigure {
        target: ThreadRef,
        cspace: SlotId,
        vspace: SlotId,
        ipc_buffer: u64,
        fault: Option<SlotId>,
    },
    ThreadSetSchedParams {
        target: ThreadRef,
        priority: u8,
        /// Below the CPU count (at most `percpu::MAX_CPUS`).
        cpu: u8,
        /// A subset of the caller's CPU set, holding `cpu`.
        cpus: u64,
    },
    CpuSet,
    ThreadStart {
        target: ThreadRef,
        rip: u64,
        rsp: u64,
        arg: u64,
    },
    ThreadSuspend(ThreadRef),
    ThreadResume(ThreadRef),
    ThreadRegisters {
        target: ThreadRef,
        write: bool,
        buffer: *mut u64,
    },
    ThreadCpuTime(ThreadRef),
    BindNotification {
        target: ThreadRef,
        n: Option<u64>,
    },
}

/// Decodes `ThreadConfigure`, `ThreadSetSchedParams`, `CpuSet`, `ThreadStart`,
/// `ThreadSuspend`, `ThreadResume`, `ThreadRegisters`, `BindNotification`
/// (`sys`, with the argument registers `regs`) of the caller `c` (borrowed from
/// `k`): checks everything, changes nothing.
#[inline(always)]
pub fn decode(k: &Kernel, c: &Thread, sys: Sys, regs: [u64; 6]) -> Result<Call, Error> {
    Ok(match sys {
        Sys::ThreadConfigure => {
            let a = args::ThreadConfigure::from_regs(regs);
            let target = thread_cap(k, c, a.thread, Rights::WRITE)?;
            let (cspace, _) = lookup(k, c, a.cspace, ObjectType::CapTable, Rights::NONE)?;
            let (vspace, _) = lookup(k, c, a.vspace, ObjectType::AddressSpace, Rights::NONE)?;
            if a.ipc_buffer % abi::ipc_buffer::IPC_BUFFER_ALIGN != 0 || a.ipc_buffer >= USER_END {
                return Err(Error::InvalidArgument);
            }
            let fault = match a.fault_endpoint {
                abi::caddr::NULL_SLOT => None,
                addr => Some(lookup(k, c, addr, ObjectType::Endpoint, Rights::WRITE)?.0),
            };
            Call::ThreadConfigure {
                target,
                cspace,
                vspace,
                ipc_buffer: a.ipc_buffer,
                fault,
            }
        }
        Sys::ThreadSetSchedParams => {
            let a = args::ThreadSetSchedParams::from_regs(regs);
            let target = thread_cap(k, c, a.thread, Rights::WRITE)?;
            // The new set: the caller's (0), or a subset of it; it holds
            // the CPU, which is online (the caller's set holds only online
            // CPUs).
            let cpus = if a.cpus == 0 { c.cpus } else { a.cpus };
            if a.priority > u64::from(c.priority)
                || a.cpu >= crate::arch::cpu_count()
                || cpus & !c.cpus != 0
                || cpus & (1 << a.cpu) == 0
            {
                return Err(Error::InvalidArgument);
            }
            Call::ThreadSetSchedParams {
                target,
                priority: a.priority as u8,
                cpu: a.cpu as u8,
                cpus,
            }
        }
        Sys::CpuSet => Call::CpuSet,
        Sys::ThreadStart => {
            let a = args::ThreadStart::from_regs(regs);
            let target = thread_cap(k, c, a.thread, Rights::WRITE)?;
            let (rip, rsp) = (user_address(a.rip)?, user_address(a.rsp)?);
            let tt = k.threads.get(target);
            if !matches!(tt.state, State::Inactive | State::Suspended)
                || tt.page_table_root().is_none()
                || tt.cspace.cap.is_none()
            {
                return Err(Error::InvalidState);
            }
            Call::ThreadStart {
                target,
                rip,
                rsp,
                arg: a.arg,
            }
        }
        Sys::ThreadSuspend => Call::ThreadSuspend(thread_cap(
            k,
            c,
            args::Slot::from_regs(regs).slot,
            Rights::WRITE,
        )?),
        Sys::ThreadResume => {
            let a = args::Slot::from_regs(regs);
            let target = thread_cap(k, c, a.slot, Rights::WRITE)?;
            if k.threads.get(target).state != State::Suspended {
                return Err(Error::InvalidState);
            }
            Call::ThreadResume(target)
        }
        Sys::ThreadRegisters => {
            let a = args::ThreadRegisters::from_regs(regs);
            let write = match a.write {
                0 => false,
                1 => true,
                _ => return Err(Error::InvalidArgument),
            };
            let rights = if write { Rights::WRITE } else { Rights::READ };
            let target = thread_cap(k, c, a.thread, rights)?;
            // The caller's own frame is incomplete while it runs (see
            // arch::x86_64::syscall_entry): its registers are its own
            // business.
            if core::ptr::eq(target.as_ptr(), c) {
                return Err(Error::InvalidArgument);
            }
            let buffer = ipc::ipc_buffer_ptr(&k.objects, c, !write).ok_or(Error::BadAddress)?;
            if write {
                // SAFETY: the buffer holds REGISTER_COUNT words (checked
                // mapped by ipc_buffer_ptr, within one page).
                let (rip, rsp) =
                    unsafe { (buffer.add(reg::RIP).read(), buffer.add(reg::RSP).read()) };
                user_address(rip)?;
                user_address(rsp)?;
            }
            Call::ThreadRegisters {
                target,
                write,
                buffer,
            }
        }
        Sys::ThreadCpuTime => Call::ThreadCpuTime(thread_cap(
            k,
            c,
            args::Slot::from_regs(regs).slot,
            Rights::READ,
        )?),
        Sys::BindNotification => {
            let a = args::BindNotification::from_regs(regs);
            let target = thread_cap(k, c, a.thread, Rights::WRITE)?;
            let n = match a.notification {
                abi::caddr::NULL_SLOT => None,
                addr => {
                    let (_, n) = lookup(k, c, addr, ObjectType::Notification, Rights::READ)?;
                    // SAFETY: the object of a notification capability.
                    let bound = unsafe { k.objects.notification(n.object) }.bound;
                    if k.threads.get(target).bound_notification != 0 || bound.is_some() {
                        return Err(Error::InvalidState);
                    }
                    Some(n.object)
                }
            };
            Call::BindNotification { target, n }
        }
        _ => return Err(Error::UnknownSyscall),
    })
}

/// Performs a checked call of `ThreadConfigure`, `ThreadSetSchedParams`,
/// `CpuSet`, `ThreadStart`, `ThreadSuspend`, `ThreadResume`, `ThreadRegisters`,
/// `BindNotification`. Object addresses in it are the objects of capabilities
/// `decode` found in slots a moment ago: live (`object.rs`, "Access").
pub fn perform(k: &mut Kernel, call: Call, caller: ThreadRef) -> Result<Outcome, Error> {
    match call {
        Call::ThreadConfigure {
            target,
            cspace,
            vspace,
            ipc_buffer,
            fault,
        } => {
            let tt = k.threads.get(target);
            let own = [
                (object::slot_id(&tt.cspace), Some(cspace)),
                (object::slot_id(&tt.vspace), Some(vspace)),
                (object::slot_id(&tt.fault_endpoint), fault),
            ];
            // The old capabilities go first, but what goes with them (the
            // slots of a table whose last capability that was) only after
            // the copies: a source slot may lie in such a table, and must
            // still hold its capability when it is copied.
            let replaced = replace_own_slots(k, own);
            object::finish_deletions(k);
            replaced?;
            let tt = k.threads.get_mut(target);
            tt.ipc_buffer = ipc_buffer;
            tt.ipc_buffer_cache.set(Default::default());
            let (root, cpu) = (tt.page_table_root(), tt.cpu);
            if let Some(root) = root {
                // SAFETY: the thread's address space (its slot holds a
                // capability to it).
                unsafe { vspace::note_cpu(&mut k.objects, root, cpu) };
            }
            // Running on another CPU: its next system call there is checked.
            crate::smp::thread_changed(target.as_ptr());
            Ok(after_ipc(k, caller))
        }
        Call::ThreadSetSchedParams {
            target,
            priority,
            cpu,
            cpus,
        } => {
            k.threads.get_mut(target).cpus = cpus;
            Ok(set_sched_params(
                k,
                caller,
                target,
                priority,
                u32::from(cpu),
            ))
        }
        Call::CpuSet => {
            let c = k.threads.get_mut(caller);
            c.frame().rdi = c.cpus;
            Ok(Outcome::Resume)
        }
        Call::ThreadCpuTime(target) => {
            let ticks = k.threads.get(target).cpu_ticks;
            let f = k.threads.get_mut(caller).frame();
            f.rdi = ticks;
            f.rsi = crate::time::HZ;
            Ok(Outcome::Resume)
        }
        Call::ThreadStart {
            target,
            rip,
            rsp,
            arg,
        } => {
            // First: a CPU still running it (stopped, not yet left) leaves
            // it, pushing its old registers into the frame.
            crate::arch::fpu::reset(&mut k.threads, target);
            *k.threads.get_mut(target).frame() = initial_frame(rip, rsp, arg);
            trace!(event(
                &k.threads,
                target,
                formats::trace::Kind::ThreadStart,
                [rip, crate::trace::id(&k.threads, caller), 0, 0]
            ));
            make_runnable(k, target);
            Ok(after_ipc(k, caller))
        }
        Call::ThreadSuspend(target) => {
            suspend(k, target);
            Ok(after_ipc(k, caller))
        }
        Call::ThreadResume(target) => {
            if crate::smp::current_elsewhere(target.as_ptr()) {
                // Stopped while it ran on another CPU, which has not left
                // it yet: it simply runs on (that CPU sees it moved, if it
                // was); queued, a second CPU could start it from its stale
                // frame while the first still runs it.
                set_state(&mut k.threads, target, State::Running);
            } else {
                make_runnable(k, target);
            }
            Ok(after_ipc(k, caller))
        }
        Call::ThreadRegisters {
            target,
            write,
            buffer,
        } => {
            // A thread running on another CPU: its frame is incomplete
            // too (see above), and that CPU may write it at any moment —
            // also when it was just stopped but that CPU has not left it.
            if k.threads.get(target).state == State::Running
                || crate::smp::current_elsewhere(target.as_ptr())
            {
                return Err(Error::InvalidState);
            }
            thread_registers(k.threads.get_mut(target), write, buffer);
            Ok(Outcome::Resume)
        }
        Call::BindNotification { target, n } => {
            match n {
                Some(n) => {
                    k.threads.get_mut(target).bound_notification = n;
                    // SAFETY: a notification capability's object.
                    unsafe { k.objects.notification_mut(n) }.bound = Some(target);
                }
                None => {
                    let bound = core::mem::take(&mut k.threads.get_mut(target).bound_notification);
                    if bound != 0 {
                        // SAFETY: a thread's bound notification is live
                        // (destroying the notification unbinds it).
                        unsafe { k.objects.notification_mut(bound) }.bound = None;
                    }
                }
            }
            Ok(Outcome::Resume)
        }
    }
}

/// `ThreadConfigure`: empties each of the thread's own slots (`dst`) and
/// copies `src` (if any) into it, without finishing the deletions (the
/// caller does, after): so the source slots, which decode checked full,
/// stay full, and the copies fail only on corrupt derivation links —
/// which the kcore::cap invariants rule out (then the slots before the
/// failing one are already replaced: the one place this call is not all
/// or nothing).
fn replace_own_slots(k: &mut Kernel, own: [(SlotId, Option<SlotId>); 3]) -> Result<(), Error> {
    for (dst, _) in own {
        if k.slot(dst).cap.is_some() {
            object::delete(k, dst)?;
        }
    }
    for (dst, src) in own {
        if let Some(src) = src {
            let cap = k.slot(src).cap.ok_or(Error::EmptySlot)?;
            cap::copy(k, src, dst)?;
            object::add_ref(k, &cap);
        }
    }
    Ok(())
}

/// `ThreadSetSchedParams`, out of line (rare; keeps the dispatcher lean).
#[inline(never)]
fn set_sched_params(
    k: &mut Kernel,
    caller: ThreadRef,
    target: ThreadRef,
    priority: u8,
    cpu: u32,
) -> Outcome {
    let queued = k.threads.get(target).state == State::Runnable;
    if queued {
        remove_from_run_queue(k, target);
    }
    if k.threads.get(target).cpu != cpu {
        // Its FPU state is saved where it is live, before it can run on
        // the new CPU; the address space may be loaded there from now on.
        crate::arch::fpu::before_moving(&mut k.threads, target, cpu);
        set_cpu(&mut k.threads, target, cpu);
        if let Some(root) = k.threads.get(target).page_table_root() {
            // SAFETY: the thread's address space (its slot holds a
            // capability to it).
            unsafe { vspace::note_cpu(&mut k.objects, root, cpu) };
        }
        // Running on another CPU: that CPU lets it go at once.
        if k.threads.get(target).state == State::Running && target != caller {
            crate::smp::reschedule_running(target.as_ptr());
        }
    }
    k.threads.get_mut(target).priority = priority;
    if queued {
        make_runnable(k, target);
    }
    // The caller moved itself: it continues on its new CPU.
    if target == caller && cpu != crate::arch::percpu::this_cpu_index() {
        return Outcome::Yield;
    }
    after_ipc(k, caller)
}

/// Stops a thread until `ThreadResume`. An IPC it waited in ends with
/// `Aborted` (a fault it waited to deliver is simply delivered again when
/// it resumes and retries the instruction).
pub fn suspend(k: &mut Kernel, target: ThreadRef) {
    let tt = k.threads.get(target);
    match tt.state {
        State::Inactive | State::Suspended => return,
        State::BlockedSend
        | State::BlockedRecv
        | State::BlockedReply
        | State::BlockedNotification => {
            let fault = (tt.state == State::BlockedSend && tt.send_kind == SendKind::Fault)
                || (tt.state == State::BlockedReply && tt.reply_is_fault);
            let exiting = tt.state == State::BlockedSend && tt.send_kind == SendKind::Exit;
            object::cancel_ipc(k, target);
            let tt = k.threads.get_mut(target);
            tt.reply_is_fault = false;
            if exiting {
                set_state(&mut k.threads, target, State::Inactive);
                return;
            }
            if !fault {
                tt.frame().rax = Error::Aborted.raw();
            }
        }
        State::Runnable => remove_from_run_queue(k, target),
        // Suspending oneself: the call succeeded when the thread resumes.
        // A thread running on another CPU: that CPU stops it at its next
        // entry, where its frame is completed — or already was, by an
        // interrupt that waits for the lock there: its `rax` is the
        // thread's own then, not a result, so it is left alone.
        State::Running => {
            if current() == Some(target) {
                k.threads.get_mut(target).frame().rax = 0;
            } else {
                crate::smp::reschedule_running(target.as_ptr());
            }
        }
    }
    set_state(&mut k.threads, target, State::Suspended);
}

fn thread_registers(target: &mut Thread, write: bool, buffer: *mut u64) {
    let f = target.frame();
    let fields: [&mut u64; reg::REGISTER_COUNT] = [
        &mut f.rip,
        &mut f.rsp,
        &mut f.rflags,
        &mut f.rax,
        &mut f.rbx,
        &mut f.rcx,
        &mut f.rdx,
        &mut f.rsi,
        &mut f.rdi,
        &mut f.rbp,
        &mut f.r8,
        &mut f.r9,
        &mut f.r10,
        &mut f.r11,
        &mut f.r12,
        &mut f.r13,
        &mut f.r14,
        &mut f.r15,
    ];
    for (i, field) in fields.into_iter().enumerate() {
        // SAFETY: `buffer` is the caller's mapped IPC buffer (checked by
        // decode; writable when reading registers into it), and
        // i < REGISTER_COUNT words fit in it.
        unsafe {
            if write {
                *field = buffer.add(i).read();
            } else {
                buffer.add(i).write(*field);
            }
        }
    }
    if write {
        f.rflags = (f.rflags & reg::USER_RFLAGS_MASK) | USER_RFLAGS;
        // Return with iretq: sysretq would take rcx/r11 for rip/rflags.
        f.vector = 0;
        f.cs = u64::from(crate::arch::gdt::USER_CODE64);
        f.ss = u64::from(crate::arch::gdt::USER_DATA);
    }
}
