//! Threads and the scheduler.
//!
//! A thread's user context is saved *inside* its `Thread` (the entry paths
//! push registers straight into `Thread::context`), and the kernel itself
//! runs on one stack per CPU: a system call that blocks simply does not
//! return to its caller's context; the scheduler restores another thread's.
//! There is no kernel-thread state to save, which keeps every entry path a
//! straight line.
//!
//! Scheduling: fixed priorities (0..=255, higher runs first), round-robin
//! within a priority, preemption on every timer tick. The run queue is
//! per CPU in design; with one CPU there is one queue.
//!
//! Invariants: a thread is in at most one run queue, and only while
//! `Runnable`; `Running` threads are in none; a `Dead` thread is never
//! enqueued or resumed again.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::ptr::NonNull;

use spin::Mutex;

use crate::arch::percpu;
use crate::arch::trap::TrapFrame;
use crate::arch::{cpu, gdt};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Runnable,
    Running,
    Dead,
}

/// A thread's saved user registers. 16-byte aligned so that the CPU's
/// interrupt frame push (which aligns RSP to 16) lands exactly in it.
#[repr(C, align(16))]
pub struct UserContext(pub TrapFrame);

pub struct Thread {
    pub context: UserContext,
    /// Physical address of the address space's top-level page table.
    pub address_space: u64,
    pub state: State,
    pub priority: u8,
    pub id: u64,
    name: [u8; 16],
    name_len: usize,
}

impl Thread {
    pub fn name(&self) -> &str {
        core::str::from_utf8(&self.name[..self.name_len]).unwrap_or("?")
    }

    fn context_top(&self) -> u64 {
        &self.context as *const UserContext as u64 + core::mem::size_of::<UserContext>() as u64
    }
}

/// A pointer to a live thread. Threads are never freed while referenced
/// from a run queue or a CPU's `current` (they are leaked for now; object
/// lifetime comes with capabilities).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ThreadRef(NonNull<Thread>);

// SAFETY: a ThreadRef is only dereferenced with interrupts disabled on the
// CPU that owns the thread (one CPU for now; SMP adds per-CPU ownership).
unsafe impl Send for ThreadRef {}

impl ThreadRef {
    /// # Safety
    /// No other reference to the thread may be live (interrupts disabled,
    /// single owner CPU).
    pub unsafe fn get(&self) -> &'static mut Thread {
        // SAFETY: see the function contract.
        unsafe { &mut *self.0.as_ptr() }
    }
}

/// Interrupts enabled, IOPL 0; the only RFLAGS a new thread starts with.
const USER_RFLAGS: u64 = 0x202;
static NEXT_ID: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// Creates a runnable user thread starting at `entry` with `rsp` and `rdi = arg`.
pub fn create_user(
    name: &str,
    address_space: u64,
    entry: u64,
    rsp: u64,
    arg: u64,
    priority: u8,
) -> ThreadRef {
    let frame = TrapFrame {
        rip: entry,
        cs: u64::from(gdt::USER_CODE64),
        rflags: USER_RFLAGS,
        rsp,
        ss: u64::from(gdt::USER_DATA),
        rdi: arg,
        // vector 0 (not the syscall marker): the first entry uses iretq.
        ..TrapFrame::default()
    };
    let mut name_bytes = [0u8; 16];
    let len = name.len().min(16);
    name_bytes[..len].copy_from_slice(&name.as_bytes()[..len]);
    let thread = Box::new(Thread {
        context: UserContext(frame),
        address_space,
        state: State::Runnable,
        priority,
        id: NEXT_ID.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
        name: name_bytes,
        name_len: len,
    });
    ThreadRef(NonNull::from(Box::leak(thread)))
}

struct RunQueue {
    queues: Vec<VecDeque<ThreadRef>>,
    /// Bit p set iff queues[p] is non-empty: finding the highest priority
    /// is four word scans, not 256 queue checks.
    nonempty: [u64; 4],
    live_threads: usize,
}

impl RunQueue {
    fn push(&mut self, t: ThreadRef, priority: u8) {
        let p = usize::from(priority);
        self.queues[p].push_back(t);
        self.nonempty[p / 64] |= 1 << (p % 64);
    }

    fn pop_highest(&mut self) -> Option<ThreadRef> {
        for word in (0..4).rev() {
            let bits = self.nonempty[word];
            if bits != 0 {
                let p = word * 64 + 63 - bits.leading_zeros() as usize;
                let t = self.queues[p].pop_front();
                if self.queues[p].is_empty() {
                    self.nonempty[word] &= !(1 << (p % 64));
                }
                return t;
            }
        }
        None
    }
}

static RUN_QUEUE: Mutex<Option<RunQueue>> = Mutex::new(None);

pub fn init() {
    let queues = (0..256).map(|_| VecDeque::new()).collect();
    *RUN_QUEUE.lock() = Some(RunQueue {
        queues,
        nonempty: [0; 4],
        live_threads: 0,
    });
}

fn with_queue<R>(f: impl FnOnce(&mut RunQueue) -> R) -> R {
    let mut guard = RUN_QUEUE.lock();
    match guard.as_mut() {
        Some(q) => f(q),
        None => panic!("scheduler used before thread::init"),
    }
}

/// Makes a new thread known to the scheduler and runnable.
pub fn start(t: ThreadRef) {
    // SAFETY: interrupts are disabled in the kernel; the thread is new.
    let priority = unsafe { t.get() }.priority;
    with_queue(|q| {
        q.live_threads += 1;
        q.push(t, priority);
    });
}

/// Puts a thread that was running back at the end of its priority's queue.
pub fn requeue(t: ThreadRef) {
    // SAFETY: interrupts are disabled; t was this CPU's current thread.
    let thread = unsafe { t.get() };
    if thread.state == State::Dead {
        return;
    }
    thread.state = State::Runnable;
    let priority = thread.priority;
    with_queue(|q| q.push(t, priority));
}

/// Marks the thread dead; it is never scheduled again.
pub fn kill(t: ThreadRef) {
    // SAFETY: interrupts are disabled; t is this CPU's current thread and
    // not in any queue (it was running).
    let thread = unsafe { t.get() };
    if thread.state != State::Dead {
        thread.state = State::Dead;
        with_queue(|q| q.live_threads = q.live_threads.saturating_sub(1));
    }
}

/// The thread that entered the kernel on this CPU.
pub fn current() -> Option<ThreadRef> {
    // SAFETY: reading this CPU's own PerCpu with interrupts disabled.
    let current = unsafe { (*percpu::this_cpu()).current };
    NonNull::new(current).map(ThreadRef)
}

/// Runs `t` now: switches address space and restores its user context.
pub fn switch_to(t: ThreadRef) -> ! {
    // SAFETY: interrupts are disabled; t came off the run queue (or is the
    // current thread resuming), so this CPU owns it.
    let thread = unsafe { t.get() };
    thread.state = State::Running;
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    unsafe { (*percpu::this_cpu()).current = t.0.as_ptr() };
    percpu::set_context_top(thread.context_top());
    if cpu::read_cr3() != thread.address_space {
        // SAFETY: every address space shares the kernel half (copied from
        // the kernel's PML4 at creation), so the kernel keeps running.
        unsafe { cpu::write_cr3(thread.address_space) };
    }
    restore(thread)
}

/// Returns to the thread that entered the kernel on this CPU. Unlike
/// [`switch_to`] it leaves the per-CPU state, TSS and CR3 alone: they still
/// describe this thread (this is the common syscall return path).
pub fn resume(t: ThreadRef) -> ! {
    // SAFETY: interrupts are disabled; t is this CPU's current thread.
    restore(unsafe { t.get() })
}

fn restore(thread: &Thread) -> ! {
    unsafe extern "C" {
        fn return_to_user(frame: *const TrapFrame) -> !;
    }
    // SAFETY: the frame is a complete user context (built by the entry
    // path or by create_user) with user selectors, so iretq/sysretq return
    // to user mode; a syscall frame's rip came from the CPU and is canonical.
    unsafe { return_to_user(&thread.context.0) }
}

/// Picks the next thread and runs it; halts while there is none. When no
/// live thread is left, the machine is powered off.
pub fn schedule() -> ! {
    loop {
        cpu::disable_interrupts();
        // SAFETY: this CPU's PerCpu, interrupts disabled: nothing runs now.
        unsafe { (*percpu::this_cpu()).current = core::ptr::null_mut() };
        if let Some(next) = with_queue(|q| q.pop_highest()) {
            switch_to(next);
        }
        if with_queue(|q| q.live_threads) == 0 {
            crate::kprintln!("kernel: no user threads left: powering off");
            crate::exit::exit(crate::exit::ExitCode::Success);
        }
        cpu::enable_interrupts_and_halt();
    }
}
