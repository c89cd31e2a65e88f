//! Multiprocessing: starting the application processors, the big kernel
//! lock, cross-CPU wake-ups and TLB shootdown.
//!
//! # Start-up
//!
//! The boot CPU is CPU 0; every other enabled CPU of the MADT gets the next
//! index (at most `percpu::MAX_CPUS`) and is started with INIT, then up to
//! two start-up IPIs, on the trampoline page below 1 MiB that `mm::init`
//! kept (`ap_boot.s`: real mode → protected mode → long mode on start-up
//! page tables → [`ap_entry`] in the higher half on its own kernel stack,
//! 64 KiB mapped below an unmapped guard page, `mm::map_kernel_stack`).
//! There it loads
//! the kernel's page tables, its own GDT/TSS (`gdt::CpuTables`), the shared
//! IDT, its `PerCpu` (GS base, syscall MSRs), PAT, the FPU set-up, its local
//! APIC and LAPIC timer (with the boot CPU's calibration), says it is online
//! and waits for the boot CPU's go. A CPU that is not online within
//! [`START_TIMEOUT_TICKS`] is reported and left out (its claim on the
//! trampoline is withdrawn, so a late start halts; one that ran the
//! start-up code but never said it is online is abandoned the same way,
//! and no further CPU is started after it); the indices of online CPUs are
//! always 0..n.
//!
//! # The big kernel lock
//!
//! With more than one CPU online, the kernel runs under one ticket lock
//! ([`BKL`]): it protects every kernel object, capability table, run queue,
//! the per-thread state and the `PerCpu::current`/run-queue fields other
//! CPUs read. It is taken on every kernel entry — the `syscall` entry
//! (`syscall_entry_locked`, inline in assembly before anything else, so
//! the IPC fast path runs under it too), interrupts and exceptions from
//! user mode (`trap_from_user`), device interrupts in the idle loop
//! (`trap_dispatch`; a timer tick or an IPI there touches only the CPU's
//! own state) — and released on every way out to user mode (the last
//! instruction before `sysretq` in the syscall paths and in
//! `return_to_user`: an unconditional `incl serving`) and before the idle
//! loop halts. An idle CPU woken by an interrupt that queued nothing for it
//! halts again without taking the lock. The kernel is not preemptible, so it is never held across a
//! switch. The global tables behind `spin::Mutex`es (frame allocator, ASID
//! table, IRQ lines, console) are taken inside it, never the other way
//! round. With one CPU online the lock does not exist: the boot decides
//! ([`active`]), the `syscall` MSR points at the entry without it (the
//! entry code is assembled twice), the Rust side tests the flag, and the
//! release on the way out is an increment nobody waits for.
//!
//! Rust code reaches what the lock protects only through the kernel token
//! (`token.rs`): each entry makes one after it has the lock and gives it
//! up before the lock goes, so the borrow checker sees the lock. Debug
//! builds check it ([`held_here`], `token_claimed`).
//!
//! After taking the lock, an entry must check that its thread is still
//! this CPU's running thread: while it waited, the holder may have
//! destroyed it (`PerCpu::current` is then null: [`evict`]), stopped it or
//! taken its address space. A system call in that case is restarted when
//! the thread runs again (`syscall_entry.s`); an interrupted thread's frame
//! is complete anyway.
//!
//! # Same-CPU IPC without the lock
//!
//! The IPC fast path (`Call` and `ReplyRecv` between two threads of the
//! same CPU, `syscall_entry.s`) runs without the big kernel lock, as a
//! *reader*, through its CPU's *gate* (`PerCpu::gate`, two bytes: `reader`,
//! written by the CPU itself, and `closed`, written by lock holders). It
//! enters with one 16-bit `lock xadd` of its (non-zero, below 256) call
//! number into the gate: that sets `reader` and returns the old `closed`
//! in the same atomic step; the sign of the sum is `closed`'s top bit
//! ([`CLOSED`]), so `js` gives up. Leaving, it stores 0 into `reader`.
//! A new lock holder, after getting the ticket, closes every online CPU's
//! gate with a locked instruction and waits until that CPU's `reader` is 0
//! ([`close_gates`]); releasing, it opens them ([`open_gates`]) before
//! the ticket goes on. Both sides use locked instructions on the same
//! word, which x86 orders totally: either the reader's comes first (the
//! holder then sees `reader` set and waits) or the holder's (the reader
//! sees the gate closed and takes the lock like any other entry). So a
//! lock holder is alone in the kernel's shared state, exactly as before;
//! readers run only while nobody holds the lock, and only among themselves.
//!
//! The reader does not check its own thread (a slow entry does, under the
//! lock): a lock holder that changes a thread running on another CPU —
//! destroys it ([`evict`]), stops or moves it ([`reschedule_running`]),
//! reconfigures it ([`thread_changed`]), takes its address space
//! ([`drop_space`]) — leaves that CPU's gate closed when it releases the
//! lock (`PerCpu::recheck`), until that CPU has taken the lock itself (any
//! entry: a system call, the IPI that holder sent, a tick), where the
//! thread is checked before it returns to user mode
//! (`syscall_entry_locked`, `thread::resume`).
//!
//! What readers touch, and why two readers on different CPUs cannot clash:
//! their own CPU's `PerCpu` (current thread, run queue, FPU owner, TSS,
//! CR3); the caller (running on this CPU: nobody else runs it); capability
//! tables (read only: only lock holders change them); the partner, which
//! the fast path takes only on this CPU (`cpu` is changed only by lock
//! holders), either from an endpoint's queue or as the caller whose reply
//! this thread holds (no other thread can reach it); and the endpoint's
//! queue and state, which two readers could both reach (a server with
//! threads on two CPUs) — so a reader uses an endpoint only if it belongs
//! to its CPU (`Endpoint::fast_cpu`, given by lock holders only: the CPU of
//! the receiver last queued there). The fast path compares that together
//! with the endpoint's state, one 16-bit compare with a per-CPU word, and
//! takes `ReplyRecv` only with no other receiver queued. Readers take no
//! locks and wait for nothing: no deadlock. (With `pecan.fastpath=off`
//! there are no readers: `syscall_entry_locked_general` takes the lock
//! for every system call.)
//!
//! A CPU waiting for the lock serves requests of the holder (TLB
//! shootdown, FPU state, leaving a destroyed thread) while it spins (with
//! interrupts masked it cannot take the IPI), so the holder's wait for
//! acknowledgements cannot deadlock.
//!
//! # Cross-CPU wake-up and shootdown
//!
//! `thread::make_runnable` of a thread whose CPU is another calls [`kick`]:
//! a reschedule IPI when that CPU idles or runs a lower priority.
//! Suspending or moving a thread that runs on another CPU sends it one too
//! ([`reschedule_running`]): that CPU stops or requeues it.
//! [`shootdown`] invalidates a user mapping on every other CPU that may
//! have the address space loaded (`vspace::Header::cpus`) and waits for
//! each to acknowledge.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

use crate::arch::percpu::{self, MAX_CPUS};
use crate::arch::{cpu, fpu, gdt, lapic, protect};
use crate::static_cell::StaticCell;
use crate::token::{Kernel, Threads};
use crate::{kprintln, mm, time};

/// A ticket lock: fair, and released by one instruction the assembly can
/// execute unconditionally (`incl serving`: with one CPU online nobody
/// ever takes a ticket, so counting releases is harmless, and no flag
/// needs testing on the way out).
#[repr(C)]
pub struct BigLock {
    next: AtomicU32,
    serving: AtomicU32,
}

impl BigLock {
    pub const OFFSET_NEXT: usize = core::mem::offset_of!(BigLock, next);
    pub const OFFSET_SERVING: usize = core::mem::offset_of!(BigLock, serving);
}

/// The big kernel lock (module docs).
pub static BKL: BigLock = BigLock {
    next: AtomicU32::new(0),
    serving: AtomicU32::new(0),
};

/// A CPU's gate for the lock-free IPC fast path (module doc, "Same-CPU IPC
/// without the lock"), in its `PerCpu`.
#[repr(C, align(2))]
pub struct Gate {
    /// The fast path's call number while it runs without the lock, else 0.
    /// Written only by the CPU itself.
    reader: AtomicU8,
    /// [`CLOSED`] while a lock holder is in the kernel or the CPU's thread
    /// needs checking under the lock, else 0. Written only by lock holders.
    closed: AtomicU8,
}

impl Gate {
    pub const OFFSET_CLOSED: usize = core::mem::offset_of!(Gate, closed);

    pub const fn new() -> Gate {
        Gate {
            reader: AtomicU8::new(0),
            closed: AtomicU8::new(0),
        }
    }
}

/// A closed gate's `closed` byte: its top bit is the sign of the 16-bit
/// sum the fast path's `lock xadd` computes.
pub const CLOSED: u8 = 0x80;

/// The number of CPUs online (their indices are 0..n): how many gates
/// lock holders close and open. Set at boot before the lock is in use.
pub static ONLINE_COUNT: AtomicU32 = AtomicU32::new(1);

/// Closes every online CPU's gate and waits until no fast path runs
/// there: called by every new holder of the big kernel lock right after
/// it got its ticket (the assembly entry does the same inline). Afterwards
/// the holder is alone in the kernel's shared state. It also clears this
/// CPU's `recheck`: whatever runs next here is checked under the lock.
#[inline(always)]
pub fn close_gates() {
    for index in 0..ONLINE_COUNT.load(Ordering::Relaxed) as usize {
        // SAFETY: the gate is atomic; other CPUs' blocks are 'static.
        let gate = unsafe { &(*percpu::cpu_block(index)).gate };
        // A locked instruction: ordered with the fast path's `lock xadd`.
        gate.closed.fetch_or(CLOSED, Ordering::SeqCst);
        while gate.reader.load(Ordering::Acquire) != 0 {
            core::hint::spin_loop();
        }
    }
    // SAFETY: this CPU's own block.
    unsafe { (*percpu::this_cpu()).recheck.store(0, Ordering::Relaxed) };
}

/// Opens every online CPU's gate again, but leaves it closed where a
/// thread running there needs checking (`recheck`): called by the lock
/// holder before it gives the lock on (the assembly does the same inline),
/// after its last change to shared state.
#[inline(always)]
pub fn open_gates() {
    for index in 0..ONLINE_COUNT.load(Ordering::Relaxed) as usize {
        // SAFETY: the gate is atomic; `recheck` changes only under the lock,
        // which we hold.
        let block = unsafe { &*percpu::cpu_block(index) };
        block
            .gate
            .closed
            .store(block.recheck.load(Ordering::Relaxed), Ordering::Release);
    }
}

/// CPU `index` runs a thread a lock holder just changed (stopped, moved,
/// destroyed, reconfigured): its next system call takes the lock and is
/// checked there (module doc). Called with the lock held.
fn recheck(index: usize) {
    debug_assert!(held_here());
    // SAFETY: `recheck` is atomic; lock holders write it, under the lock.
    unsafe {
        (*percpu::cpu_block(index))
            .recheck
            .store(CLOSED, Ordering::Relaxed)
    };
}

/// Thread `t` was changed by a lock holder (its address space, capability
/// space): if it runs on another CPU, that CPU's fast path leaves it to
/// the slow path until that CPU has taken the lock.
pub fn thread_changed(t: *mut crate::thread::Thread) {
    running_elsewhere(t).for_each(recheck);
}

/// The other online CPUs whose current thread is `t` (none with one CPU
/// online). Called with the big kernel lock held.
fn running_elsewhere(t: *mut crate::thread::Thread) -> impl Iterator<Item = usize> {
    debug_assert!(held_here());
    let (smp, me) = (active(), percpu::this_cpu_index() as usize);
    bits(if smp {
        ONLINE.load(Ordering::Acquire)
    } else {
        0
    })
    .filter(move |&index| {
        // SAFETY: under the big kernel lock the other CPU's `current` is
        // stable (it changes it only holding the lock, or as a reader,
        // which the lock excludes).
        index != me && unsafe { (*percpu::cpu_block(index)).current } == t
    })
}

/// More than one CPU is online: the lock is in use. Set once at boot,
/// before any other CPU enters the kernel.
pub static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Set by the boot CPU when the application processors may schedule.
static GO: AtomicBool = AtomicBool::new(false);
/// Online CPUs, bit per index.
static ONLINE: AtomicU64 = AtomicU64::new(1);
/// APIC id per CPU index.
static APIC_IDS: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];

/// Interrupt vectors of the IPIs: look at the run queue; serve a request.
pub const VECTOR_RESCHEDULE: u8 = 0xf0;
pub const VECTOR_REQUEST: u8 = 0xf1;

/// Whether the big kernel lock is in use.
#[inline(always)]
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Whether CPU `index` is online.
pub fn is_online(index: u32) -> bool {
    index < MAX_CPUS as u32 && ONLINE.load(Ordering::Acquire) & (1 << index) != 0
}

/// The local APIC id of online CPU `index` (where an interrupt for it is
/// sent), `None` for a CPU that is not online.
pub fn apic_id(index: u32) -> Option<u32> {
    is_online(index).then(|| APIC_IDS[index as usize].load(Ordering::Relaxed))
}

/// Takes the big kernel lock for this CPU (nothing when it is not in
/// use: one test of a flag). Serves requests while waiting.
#[inline(always)]
pub fn lock() {
    if active() {
        lock_now();
    }
}

#[inline(never)]
fn lock_now() {
    let ticket = BKL.next.fetch_add(1, Ordering::SeqCst);
    while BKL.serving.load(Ordering::Acquire) != ticket {
        serve_requests_now();
        core::hint::spin_loop();
    }
    close_gates();
}

/// Releases the big kernel lock (the assembly's `SE_UNLOCK` does the
/// same), giving up this CPU's kernel token.
#[inline(always)]
pub fn unlock(k: Kernel) {
    k.leave();
    if active() {
        unlock_now();
    }
}

/// Debug builds: the CPU that holds the kernel token (`token.rs`), as its
/// index + 1; 0 while no CPU does.
static TOKEN_HOLDER: AtomicU32 = AtomicU32::new(0);

/// Whether the big kernel lock is taken, as far as the lock can tell: it
/// does not know by whom (the assembly takes it with one `xadd`).
fn lock_taken() -> bool {
    !active() || BKL.next.load(Ordering::Relaxed) != BKL.serving.load(Ordering::Relaxed)
}

/// Whether this CPU holds the big kernel lock and the kernel token (xv6's
/// `holding`): the lock is taken (or not in use: one CPU) and, in debug
/// builds, the token is this CPU's. For `debug_assert!`s on the lock
/// holder's paths.
pub fn held_here() -> bool {
    lock_taken()
        && (!cfg!(debug_assertions)
            || TOKEN_HOLDER.load(Ordering::Relaxed) == percpu::this_cpu_index() + 1)
}

/// Debug builds: a kernel token is made on this CPU (`Kernel::enter`): the
/// lock must be taken and no CPU may hold a token already.
#[cfg(debug_assertions)]
pub fn token_claimed() {
    let me = percpu::this_cpu_index();
    assert!(
        lock_taken(),
        "cpu {me}: kernel token without the big kernel lock"
    );
    let before = TOKEN_HOLDER.swap(me + 1, Ordering::Relaxed);
    assert!(
        before == 0,
        "cpu {me}: a second kernel token (CPU {} holds one)",
        before.wrapping_sub(1)
    );
}

/// Debug builds: this CPU's kernel token is given up.
#[cfg(debug_assertions)]
pub fn token_released() {
    let me = percpu::this_cpu_index();
    let before = TOKEN_HOLDER.swap(0, Ordering::Relaxed);
    assert!(
        before == me + 1,
        "cpu {me}: gave up a kernel token it did not hold ({before})"
    );
}

#[inline(never)]
fn unlock_now() {
    open_gates();
    BKL.serving.fetch_add(1, Ordering::Release);
}

/// Called by `syscall_entry_locked` when its ticket is not served yet:
/// waits for it, serving requests meanwhile.
#[unsafe(no_mangle)]
extern "C" fn smp_wait_ticket(ticket: u32) {
    while BKL.serving.load(Ordering::Acquire) != ticket {
        serve_requests_now();
        core::hint::spin_loop();
    }
}

/// The end of a system call whose caller another CPU destroyed or
/// stopped while it entered (`syscall_entry_locked`); the lock is held.
#[unsafe(no_mangle)]
extern "C" fn smp_syscall_stopped() -> ! {
    // SAFETY: called by the assembly entry with the lock held and
    // interrupts masked; this CPU has no token (it was in user mode).
    let k = unsafe { Kernel::enter() };
    match crate::thread::current() {
        Some(t) => crate::thread::resume(k, t),
        None => crate::thread::schedule(k),
    }
}

/// Makes CPU `cpu` look at its run queue soon, where a thread of
/// `priority` was just put: an IPI when it idles or runs a lower priority
/// (with the lock held, its `current` cannot change under us). `_threads`:
/// the caller holds the token and no `&mut` to a thread.
pub fn kick(_threads: &Threads, cpu: u32, priority: u8) {
    debug_assert!(held_here());
    if !is_online(cpu) {
        return;
    }
    // SAFETY: under the big kernel lock the other CPU's `current` and the
    // thread it names are stable (it changes them only holding the lock).
    let current = unsafe { (*percpu::cpu_block(cpu as usize)).current };
    // SAFETY: as above; a non-null `current` is a live thread.
    let preempts = current.is_null() || unsafe { (*current).priority } < priority;
    if preempts {
        lapic::send_ipi(
            APIC_IDS[cpu as usize].load(Ordering::Relaxed),
            VECTOR_RESCHEDULE,
        );
    }
}

/// Whether thread `t` is another CPU's current thread: it may run there
/// right now, its registers not in its frame, even when a lock holder has
/// stopped it (until that CPU takes the lock and sees it). Such a thread
/// must not be queued to run anywhere else meanwhile (`ThreadResume`).
pub fn current_elsewhere(t: *mut crate::thread::Thread) -> bool {
    running_elsewhere(t).next().is_some()
}

/// If thread `t` runs on another CPU, that CPU gets a reschedule IPI (it
/// then stops `t` if `t` was stopped or moved meanwhile).
pub fn reschedule_running(t: *mut crate::thread::Thread) {
    for index in running_elsewhere(t) {
        recheck(index);
        lapic::send_ipi(APIC_IDS[index].load(Ordering::Relaxed), VECTOR_RESCHEDULE);
    }
}

// ---------------------------------------------------------------------------
// Requests to other CPUs: TLB shootdown, FPU state
// ---------------------------------------------------------------------------

/// What a request asks of a CPU.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Ask {
    /// Invalidate page `b` of address space `a` if it is loaded.
    Invalidate = 0,
    /// Address space `a` goes away: stop using it.
    DropSpace = 1,
    /// If thread `a`'s FPU state is live here, save it (it moves to
    /// another CPU).
    SaveFpu = 2,
    /// If thread `a`'s FPU state is live here, drop it (it is destroyed
    /// or restarted); and the CPU has left thread `a` if it ran it.
    DropFpu = 3,
}

/// One request per target CPU: only the holder of the big kernel lock
/// asks, and it waits for every acknowledgement before it goes on.
struct Request {
    pending: AtomicBool,
    ask: AtomicU32,
    a: AtomicU64,
    b: AtomicU64,
}

static REQUESTS: [Request; MAX_CPUS] = [const {
    Request {
        pending: AtomicBool::new(false),
        ask: AtomicU32::new(0),
        a: AtomicU64::new(0),
        b: AtomicU64::new(0),
    }
}; MAX_CPUS];

/// Serves this CPU's pending request, if any. Runs where the CPU cannot
/// hold the lock: in the IPI handler before it takes the lock, and while
/// it waits for the lock. Touches only this CPU's registers and per-CPU
/// state, and the thread named by the asker (alive: the asker waits).
#[inline(always)]
pub fn serve_requests() {
    if active() {
        serve_requests_now();
    }
}

#[inline(never)]
fn serve_requests_now() {
    let request = &REQUESTS[percpu::this_cpu_index() as usize];
    if !request.pending.load(Ordering::Acquire) {
        return;
    }
    let (a, b) = (
        request.a.load(Ordering::Relaxed),
        request.b.load(Ordering::Relaxed),
    );
    match request.ask.load(Ordering::Relaxed) {
        x if x == Ask::Invalidate as u32 => {
            // No PCIDs: a CPU that loaded another space since has no
            // entries of this one.
            if cpu::read_cr3() == a {
                cpu::invlpg(b);
            }
        }
        x if x == Ask::DropSpace as u32 => {
            if cpu::read_cr3() == a {
                // SAFETY: the kernel's page tables map the kernel like
                // every address space; a thread of the dropped space is
                // stopped when it would run again (no address space).
                unsafe { cpu::write_cr3(mm::kernel_page_table()) };
            }
        }
        x if x == Ask::SaveFpu as u32 => fpu::release_here(a as *mut crate::thread::Thread),
        _ => fpu::forget_here(a as *mut crate::thread::Thread),
    }
    request.pending.store(false, Ordering::Release);
}

/// Asks every online CPU in `cpus` but this one and waits until each has
/// done it. Called with the big kernel lock held.
fn ask(cpus: u64, what: Ask, a: u64, b: u64) {
    if !active() {
        return;
    }
    debug_assert!(held_here());
    let me = percpu::this_cpu_index();
    let targets = cpus & ONLINE.load(Ordering::Acquire) & !(1 << me);
    for index in bits(targets) {
        let request = &REQUESTS[index];
        request.ask.store(what as u32, Ordering::Relaxed);
        request.a.store(a, Ordering::Relaxed);
        request.b.store(b, Ordering::Relaxed);
        request.pending.store(true, Ordering::Release);
        lapic::send_ipi(APIC_IDS[index].load(Ordering::Relaxed), VECTOR_REQUEST);
    }
    for index in bits(targets) {
        while REQUESTS[index].pending.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
    }
}

/// TLB shootdown: invalidates `vaddr` in address space `space` (physical
/// address of its PML4) on every other CPU of `cpus` (bit per CPU index)
/// and waits for them.
pub fn shootdown(space: u64, cpus: u64, vaddr: u64) {
    ask(cpus, Ask::Invalidate, space, vaddr);
}

/// Address space `space` is destroyed: every other CPU of `cpus` that has
/// it loaded switches to the kernel's page tables.
pub fn drop_space(space: u64, cpus: u64) {
    if !active() {
        return;
    }
    let me = percpu::this_cpu_index();
    for index in bits(cpus & ONLINE.load(Ordering::Acquire) & !(1 << me)) {
        recheck(index);
    }
    ask(cpus, Ask::DropSpace, space, 0);
}

/// Thread `t`'s FPU state is live on CPU `cpu` (another one): save it there.
pub fn save_fpu_on(cpu: u32, t: *mut crate::thread::Thread) {
    ask(1 << cpu, Ask::SaveFpu, t as u64, 0);
}

/// Thread `t` is destroyed or restarted: every other CPU running it
/// leaves it (its `current` becomes null: it schedules on its next entry
/// to the kernel, and a system call it waited to enter is dropped), every
/// CPU with its FPU state live drops it. Waits until they have left user
/// mode, so that no CPU writes into `t` afterwards (a restart writes its
/// fresh frame after this: the interrupt that took the other CPU out of
/// user mode pushed the old registers into it).
pub fn evict(t: *mut crate::thread::Thread) {
    if !active() {
        return;
    }
    debug_assert!(held_here());
    let me = percpu::this_cpu_index();
    let mut cpus = 0u64;
    for index in bits(ONLINE.load(Ordering::Acquire)) {
        let block = percpu::cpu_block(index);
        // SAFETY: under the big kernel lock; other CPUs change `current`
        // and `fpu_live` only holding it (or, for `fpu_live`, serving our
        // request, which we wait for).
        unsafe {
            if index as u32 != me && (*block).current == t {
                (*block).current = core::ptr::null_mut();
                cpus |= 1 << index;
                recheck(index);
            }
            if (*block).fpu_live == t && index as u32 != me {
                cpus |= 1 << index;
            }
        }
    }
    ask(cpus, Ask::DropFpu, t as u64, 0);
}

fn bits(mask: u64) -> impl Iterator<Item = usize> {
    (0..MAX_CPUS).filter(move |i| mask & (1 << i) != 0)
}

// ---------------------------------------------------------------------------
// Start-up
// ---------------------------------------------------------------------------

/// How long the boot CPU waits for one CPU to come online (timer ticks).
pub const START_TIMEOUT_TICKS: u64 = 20;

/// Kernel stack of an application processor.
const AP_STACK_PAGES: u64 = 16;

/// The data block of the trampoline page (`ap_boot.s`).
const TR_DATA: usize = 0xf00;
const TR_GDT: usize = TR_DATA;
const TR_GDT_PTR: usize = TR_DATA + 0x20;
const TR_CR3: usize = TR_DATA + 0x28;
const TR_STACK: usize = TR_DATA + 0x30;
const TR_ENTRY: usize = TR_DATA + 0x38;
const TR_ARG: usize = TR_DATA + 0x40;
const TR_CLAIM: usize = TR_DATA + 0x48;

core::arch::global_asm!(
    include_str!("arch/x86_64/ap_boot.s"),
    tr_data = const TR_DATA,
    tr_gdt_ptr = const TR_GDT_PTR,
    tr_cr3 = const TR_CR3,
    tr_stack = const TR_STACK,
    tr_entry = const TR_ENTRY,
    tr_arg = const TR_ARG,
    tr_claim = const TR_CLAIM,
    options(att_syntax)
);

unsafe extern "C" {
    static ap_trampoline_start: u8;
    static ap_trampoline_end: u8;
}

/// The application processors' descriptor tables (index 0 is the boot
/// CPU's, in `arch`).
static AP_TABLES: [StaticCell<gdt::CpuTables>; MAX_CPUS - 1] =
    [const { StaticCell::new(gdt::CpuTables::new()) }; MAX_CPUS - 1];
/// Each CPU's kernel stack top, for [`ap_entry`].
static STACK_TOPS: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// Set by a CPU when it is online.
/// Per CPU index: [`WAITING`] while the boot CPU waits for it, then
/// [`ONLINE_NOW`] (set by the CPU) or [`ABANDONED`] (set by the boot CPU
/// that gave up): whoever changes it first decides.
static STARTED: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];
const WAITING: u32 = 1;
const ONLINE_NOW: u32 = 2;
const ABANDONED: u32 = 3;

/// Starts every enabled CPU of the MADT but the boot CPU; returns the
/// number of CPUs online. With more than one, the big kernel lock is in
/// use from now on and held by the caller (interrupts are masked).
pub fn start_application_processors(madt: Option<&kcore::acpi::MadtInfo>) -> u64 {
    let boot_apic = lapic::id().unwrap_or(0);
    APIC_IDS[0].store(boot_apic, Ordering::Relaxed);
    let mut online = 1usize;
    let mut candidates = 0usize;
    let trampoline = mm::ap_trampoline();
    if let (Some(madt), Some(page)) = (madt, trampoline) {
        prepare_trampoline(page);
        for c in madt
            .cpus()
            .iter()
            .filter(|c| c.enabled && c.apic_id != boot_apic)
        {
            candidates += 1;
            if online == MAX_CPUS {
                kprintln!(
                    "cpu: APIC id {} left out: the kernel starts at most {MAX_CPUS} CPUs",
                    c.apic_id
                );
                continue;
            }
            match start_one(page, online, c.apic_id) {
                Ok(()) => {
                    ONLINE.fetch_or(1 << online, Ordering::AcqRel);
                    kprintln!("cpu {online}: online (APIC id {})", c.apic_id);
                    online += 1;
                }
                Err(why) => {
                    kprintln!("cpu: APIC id {} did not start: {why}; left out", c.apic_id);
                    if matches!(why, StartError::Stuck) {
                        break;
                    }
                }
            }
        }
    } else if madt.is_some_and(|m| m.cpus().iter().filter(|c| c.enabled).count() > 1) {
        kprintln!("warning: no free page below 1 MiB for the start-up code: one CPU only");
    }
    kprintln!(
        "smp: {online} of {} CPUs online{}",
        candidates + 1,
        if online > 1 { " (big kernel lock)" } else { "" }
    );
    if online > 1 {
        cpu::disable_interrupts();
        ONLINE_COUNT.store(online as u32, Ordering::Release);
        ACTIVE.store(true, Ordering::Release);
        percpu::use_locked_syscall_entry();
        lock();
    }
    GO.store(true, Ordering::Release);
    online as u64
}

/// Copies the start-up code and builds its page tables: the first 2 MiB
/// identity-mapped (executable, for the instruction that enables paging
/// and the jump after it), the kernel half as in the kernel's tables.
fn prepare_trampoline(page: u64) {
    let start = &raw const ap_trampoline_start as usize;
    let len = &raw const ap_trampoline_end as usize - start;
    assert!(len <= TR_DATA, "AP start-up code larger than its page");
    let base = mm::phys_to_virt(page) as *mut u8;
    let pml4 = page + 0x1000;
    let pdpt = page + 0x2000;
    let pd = page + 0x3000;
    let kernel = mm::phys_to_virt(mm::kernel_page_table()) as *const u64;
    let gdt: [u64; 4] = [
        0,
        0x00cf_9a00_0000_ffff, // 0x08: 32-bit code
        0x00cf_9200_0000_ffff, // 0x10: data
        0x00af_9a00_0000_ffff, // 0x18: 64-bit code
    ];
    // SAFETY: the four pages below 1 MiB are ours (taken from the frame
    // allocator by mm::init) and direct-mapped; the code is `len` bytes of
    // the kernel image; the kernel PML4 is a live page table.
    unsafe {
        core::ptr::write_bytes(base, 0, (mm::AP_TRAMPOLINE_PAGES * 4096) as usize);
        core::ptr::copy_nonoverlapping(start as *const u8, base, len);
        let table = |phys: u64| mm::phys_to_virt(phys) as *mut u64;
        for (i, entry) in gdt.iter().enumerate() {
            (base.add(TR_GDT) as *mut u64).add(i).write(*entry);
        }
        (base.add(TR_GDT_PTR) as *mut u16).write(31);
        (base.add(TR_GDT_PTR + 2) as *mut u32).write_unaligned((page + TR_GDT as u64) as u32);
        (base.add(TR_CR3) as *mut u64).write(pml4);
        (base.add(TR_ENTRY) as *mut u64).write(ap_entry as *const () as u64);
        for i in 256..512 {
            table(pml4).add(i).write(kernel.add(i).read());
        }
        table(pml4).write(pdpt | 3);
        table(pdpt).write(pd | 3);
        table(pd).write(0x83); // 2 MiB page at 0: present, writable
    }
}

/// Starts CPU `index` (APIC id `apic_id`) and waits until it is online.
fn start_one(page: u64, index: usize, apic_id: u32) -> Result<(), StartError> {
    let Some(stack_top) = mm::map_kernel_stack(index as u64, AP_STACK_PAGES) else {
        return Err(StartError::NoStack);
    };
    STARTED[index].store(WAITING, Ordering::Release);
    STACK_TOPS[index].store(stack_top, Ordering::Relaxed);
    APIC_IDS[index].store(apic_id, Ordering::Relaxed);
    let base = mm::phys_to_virt(page);
    let claim = (base + TR_CLAIM as u64) as *const AtomicU32;
    // SAFETY: the trampoline page is ours and direct-mapped; the claim word
    // is 4-byte aligned and shared with the starting CPU only atomically.
    let claim = unsafe { &*claim };
    // SAFETY: as above; the starting CPU reads these only after the claim.
    unsafe {
        ((base + TR_STACK as u64) as *mut u64).write(stack_top);
        ((base + TR_ARG as u64) as *mut u64).write(index as u64);
    }
    claim.store(1, Ordering::Release);
    let vector = (page >> 12) as u8;
    lapic::send_init(apic_id);
    wait_ticks(1, || false);
    lapic::send_startup(apic_id, vector);
    if !wait_ticks(1, || claim.load(Ordering::Acquire) == 2) {
        lapic::send_startup(apic_id, vector);
    }
    let online = || STARTED[index].load(Ordering::Acquire) == ONLINE_NOW;
    if wait_ticks(START_TIMEOUT_TICKS, online) {
        return Ok(());
    }
    if claim
        .compare_exchange(1, 0, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        return Err(StartError::NoResponse);
    }
    // It claimed the page: it runs kernel code and should be online soon.
    if wait_ticks(10 * START_TIMEOUT_TICKS, online) {
        return Ok(());
    }
    match STARTED[index].compare_exchange(WAITING, ABANDONED, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Err(StartError::Stuck),
        Err(_) => Ok(()), // online after all, just now
    }
}

/// Why a CPU was left out.
#[derive(Debug)]
enum StartError {
    /// No memory for its kernel stack.
    NoStack,
    /// It never ran the start-up code.
    NoResponse,
    /// It ran the start-up code but never reported online: it may still
    /// use its index (it halts if it ever gets further), so no further CPU
    /// is started.
    Stuck,
}

impl core::fmt::Display for StartError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            StartError::NoStack => "no memory for its kernel stack",
            StartError::NoResponse => "no response to INIT-SIPI-SIPI",
            StartError::Stuck => "it started but did not come online; no further CPU is started",
        })
    }
}

/// Waits until `done` or `ticks` timer ticks passed (at least one full
/// tick); whether `done`.
fn wait_ticks(ticks: u64, done: impl Fn() -> bool) -> bool {
    let start = time::ticks();
    while time::ticks() <= start + ticks {
        if done() {
            return true;
        }
        core::hint::spin_loop();
    }
    done()
}

/// An application processor's first Rust code, on its kernel stack, on
/// the start-up page tables, interrupts masked.
extern "C" fn ap_entry(index: u64) -> ! {
    let index = index as usize;
    // SAFETY: the kernel's page tables map this code, the stack (direct
    // map) and all kernel data, like the start-up tables' kernel half.
    unsafe { cpu::write_cr3(mm::kernel_page_table()) };
    let tables = AP_TABLES[index - 1].get();
    // SAFETY: CPU `index`'s own tables, used by no other CPU, 'static.
    unsafe { (&mut *tables).load() };
    gdt::load_idt();
    percpu::init_cpu(index, tables, STACK_TOPS[index].load(Ordering::Relaxed));
    crate::selftest::ap_stack_overflow(index);
    // SAFETY: the same PAT as the boot CPU's (mm::init): every mapping's
    // cache type means the same on every CPU.
    unsafe { cpu::wrmsr(cpu::MSR_PAT, kcore::paging::PAT_MSR_VALUE) };
    fpu::init();
    protect::enable();
    if crate::arch::svm::available() && !crate::arch::svm::init_cpu(index) {
        crate::kprintln!("svm: cpu {index}: not enabled");
    }
    lapic::enable_on_this_cpu();
    lapic::start_periodic_timer(time::HZ);
    // Too late (the boot CPU gave up on this CPU): stop for good.
    if STARTED[index]
        .compare_exchange(WAITING, ONLINE_NOW, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        cpu::halt_forever();
    }
    while !GO.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    if active() {
        percpu::use_locked_syscall_entry();
    }
    lock();
    // SAFETY: the lock is taken, interrupts are masked (since the start),
    // and this CPU has made no token before.
    crate::thread::schedule(unsafe { Kernel::enter() })
}
