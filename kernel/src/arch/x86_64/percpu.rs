//! Per-CPU kernel data, reached through the GS segment base while in the
//! kernel (user GS is swapped in with `swapgs` on the way out).
//!
//! One [`PerCpu`] per CPU index (0 = the boot CPU, then the application
//! processors in MADT order, `smp.rs`), in the static [`CPUS`] array. The
//! assembly entry paths read fields through GS at the `OFFSET_*` constants
//! here (passed to `global_asm!` as operands). A CPU's run queue lives in
//! its `PerCpu` so that the IPC fast path reaches its own with one
//! GS-relative load, as from a static.
//!
//! Invariant: only the owning CPU touches its `PerCpu` and TSS, with
//! interrupts masked — except the run queue, which other CPUs change while
//! they hold the big kernel lock (`smp.rs`), as does its owner.

use core::sync::atomic::{AtomicBool, Ordering};

use super::{cpu, gdt};
use crate::static_cell::StaticCell;
use crate::thread::RunQueue;

/// Most CPUs the kernel starts (the static per-CPU tables are sized by it).
pub const MAX_CPUS: usize = 8;

/// One cache line at least (and a whole number of them), so that CPUs do
/// not share lines of their blocks: the IPC fast path writes its own
/// block's `gate` without the big kernel lock (`smp.rs`).
#[repr(C, align(64))]
pub struct PerCpu {
    /// Top of this CPU's kernel stack (the kernel is event-driven: every
    /// entry from user mode starts at this fresh stack).
    pub kernel_stack_top: u64,
    /// The user stack pointer of the thread in a system call: the entry
    /// leaves it here and stores it into the thread's frame only when the
    /// thread stops running (see `syscall_entry.s`).
    pub scratch: u64,
    /// A second word for the locked syscall entry (`syscall_entry.s`).
    pub scratch2: u64,
    /// This block's own address, so Rust code can find it without reading
    /// the GS_BASE MSR.
    self_ptr: *mut PerCpu,
    /// The address of `run_queue` below, so that `thread::make_runnable`
    /// can tell "this CPU's queue" with one GS-relative compare.
    pub own_run_queue: *mut RunQueue,
    /// The thread running (or last run) on this CPU; null when idle. The
    /// syscall entry saves registers into its frame; interrupts do so
    /// through `TSS.rsp0`, which [`set_context_top`] keeps at the end of
    /// that frame.
    pub current: *mut crate::thread::Thread,
    /// Set by a system call that ends in a switch: the thread to run next
    /// (null: let the scheduler choose). Read by `syscall_continue`.
    pub next: *mut crate::thread::Thread,
    pub cpu_id: u32,
    /// The IPC fast path's entry to the kernel without the big kernel lock
    /// (`smp.rs`, "Same-CPU IPC without the lock"): this CPU's reader
    /// byte, and the closed byte lock holders write. At an even offset:
    /// the fast path reads and writes both with one 16-bit `lock xadd`.
    pub gate: crate::smp::Gate,
    /// What lock holders leave in `gate.closed` when they release the
    /// lock: [`crate::smp::CLOSED`] after one changed the thread running
    /// here (so that its next system call is checked under the lock), else
    /// 0. Written by lock holders, cleared by this CPU when it takes the
    /// lock.
    pub recheck: core::sync::atomic::AtomicU8,
    /// `state` and `fast_cpu` of an endpoint as one 16-bit word (little
    /// endian), as the lock-free fast path needs them: owned by this CPU
    /// and `Recv` (for `Call`), or owned by this CPU and `Idle` (for
    /// `ReplyRecv`). Set once in `init_cpu`.
    pub endpoint_recv_here: u16,
    pub endpoint_idle_here: u16,
    tables: *mut gdt::CpuTables,
    /// The thread whose x87/SSE/AVX state is in this CPU's registers with
    /// CR0.TS clear, or null (see `fpu.rs`).
    pub fpu_live: *mut crate::thread::Thread,
    /// This CPU's run queue (`thread.rs`).
    pub run_queue: RunQueue,
}

/// Offsets of the fields the assembly entry paths reach through GS.
pub const OFFSET_KERNEL_STACK_TOP: usize = core::mem::offset_of!(PerCpu, kernel_stack_top);
pub const OFFSET_SCRATCH: usize = core::mem::offset_of!(PerCpu, scratch);
pub const OFFSET_SCRATCH2: usize = core::mem::offset_of!(PerCpu, scratch2);
pub const OFFSET_CURRENT: usize = core::mem::offset_of!(PerCpu, current);
pub const OFFSET_TABLES: usize = core::mem::offset_of!(PerCpu, tables);
pub const OFFSET_FPU_LIVE: usize = core::mem::offset_of!(PerCpu, fpu_live);
pub const OFFSET_RUN_QUEUE: usize = core::mem::offset_of!(PerCpu, run_queue);
pub const OFFSET_CPU_ID: usize = core::mem::offset_of!(PerCpu, cpu_id);
pub const OFFSET_GATE: usize = core::mem::offset_of!(PerCpu, gate);
pub const OFFSET_GATE_CLOSED: usize = OFFSET_GATE + crate::smp::Gate::OFFSET_CLOSED;
pub const OFFSET_RECHECK: usize = core::mem::offset_of!(PerCpu, recheck);
pub const OFFSET_ENDPOINT_RECV_HERE: usize = core::mem::offset_of!(PerCpu, endpoint_recv_here);
pub const OFFSET_ENDPOINT_IDLE_HERE: usize = core::mem::offset_of!(PerCpu, endpoint_idle_here);
/// The distance between two CPUs' blocks in [`CPUS`] (assembly loops over
/// them).
pub const STRIDE: usize = core::mem::size_of::<StaticCell<PerCpu>>();
const _: () = assert!(OFFSET_GATE.is_multiple_of(2) && STRIDE.is_multiple_of(64));

const MSR_STAR: u32 = 0xc000_0081;
const MSR_LSTAR: u32 = 0xc000_0082;
const MSR_CSTAR: u32 = 0xc000_0083;
const MSR_SFMASK: u32 = 0xc000_0084;
const MSR_SYSENTER_CS: u32 = 0x174;
const MSR_SYSENTER_ESP: u32 = 0x175;
const MSR_SYSENTER_EIP: u32 = 0x176;
const MSR_GS_BASE: u32 = 0xc000_0101;
const MSR_KERNEL_GS_BASE: u32 = 0xc000_0102;

/// RFLAGS bits cleared on syscall entry: TF, IF, DF, AC (and NT).
const SFMASK: u64 = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 18) | (1 << 14);

unsafe extern "C" {
    fn syscall_entry();
    fn syscall_entry_locked();
    fn syscall_entry_general();
    fn syscall_entry_locked_general();
    fn syscall_compat_entry();
    static boot_kernel_stack_top: u8;
}

/// Every CPU's block, indexed by CPU index.
pub static CPUS: [StaticCell<PerCpu>; MAX_CPUS] = [const {
    StaticCell::new(PerCpu {
        kernel_stack_top: 0,
        scratch: 0,
        scratch2: 0,
        self_ptr: core::ptr::null_mut(),
        own_run_queue: core::ptr::null_mut(),
        current: core::ptr::null_mut(),
        next: core::ptr::null_mut(),
        cpu_id: 0,
        gate: crate::smp::Gate::new(),
        recheck: core::sync::atomic::AtomicU8::new(0),
        endpoint_recv_here: 0,
        endpoint_idle_here: 0,
        tables: core::ptr::null_mut(),
        fpu_live: core::ptr::null_mut(),
        run_queue: RunQueue::new(),
    })
}; MAX_CPUS];

/// Sets up the boot CPU's per-CPU block, GS base and the syscall MSRs.
pub fn init_boot_cpu(tables: *mut gdt::CpuTables) {
    init_cpu(0, tables, &raw const boot_kernel_stack_top as u64);
}

/// Sets up CPU `index`'s per-CPU block (kernel stack top `stack_top`,
/// descriptor tables `tables`), this CPU's GS base and syscall MSRs. Runs
/// on that CPU, before it enters the kernel from user mode.
pub fn init_cpu(index: usize, tables: *mut gdt::CpuTables, stack_top: u64) {
    let percpu = CPUS[index].get();
    // SAFETY: this CPU is being set up: nothing else references its block.
    unsafe {
        (*percpu).kernel_stack_top = stack_top;
        (*percpu).tables = tables;
        (*percpu).self_ptr = percpu;
        (*percpu).own_run_queue = &raw mut (*percpu).run_queue;
        (*percpu).cpu_id = index as u32;
        (*percpu).endpoint_recv_here =
            crate::object::fast_path_endpoint_word(index, crate::object::EndpointState::Recv);
        (*percpu).endpoint_idle_here =
            crate::object::fast_path_endpoint_word(index, crate::object::EndpointState::Idle);
    }
    // SAFETY: GS_BASE points at a 'static PerCpu; KERNEL_GS_BASE (the user
    // value swapped in on exit) starts as 0. STAR/LSTAR/SFMASK set up the
    // syscall entry with the selectors of gdt.rs; EFER.SCE was set in boot.s
    // (application processors: in the trampoline).
    //
    // Every other way a user instruction could enter ring 0 through these
    // MSRs is closed (docs/security.md): CSTAR, where an AMD CPU enters
    // for a `syscall` in 32-bit compatibility mode, points at an entry that
    // makes it an invalid-opcode fault of the thread (trap.s) instead of
    // staying 0 (ring 0 at address 0); SYSENTER_CS = 0 makes `sysenter`
    // raise #GP on an Intel CPU (an AMD CPU has no `sysenter` in long
    // mode: #UD), whatever the firmware left there.
    unsafe {
        cpu::wrmsr(MSR_GS_BASE, percpu as u64);
        cpu::wrmsr(MSR_KERNEL_GS_BASE, 0);
        let star = (u64::from(gdt::USER_CODE32 & !3) << 48) | (u64::from(gdt::KERNEL_CODE) << 32);
        cpu::wrmsr(MSR_STAR, star);
        cpu::wrmsr(MSR_LSTAR, syscall_entry_address(false));
        cpu::wrmsr(MSR_CSTAR, syscall_compat_entry as *const () as u64);
        cpu::wrmsr(MSR_SFMASK, SFMASK);
        cpu::wrmsr(MSR_SYSENTER_CS, 0);
        cpu::wrmsr(MSR_SYSENTER_ESP, 0);
        cpu::wrmsr(MSR_SYSENTER_EIP, 0);
    }
}

/// Points this CPU's `syscall` at the entry that takes the big kernel
/// lock first (`smp.rs`): done on every CPU when more than one is online.
pub fn use_locked_syscall_entry() {
    // SAFETY: the locked entry takes the lock and continues at
    // `syscall_entry` with every register as the CPU left it (or, with the
    // fast path off, at its general path: `syscall_entry_locked_general`).
    unsafe { cpu::wrmsr(MSR_LSTAR, syscall_entry_address(true)) };
}

/// Whether `Call` and `ReplyRecv` try the assembly fast path
/// (`syscall_entry.s`); cleared once at boot by [`disable_fast_path`]
/// (`pecan.fastpath=off`). Read only when a CPU's `LSTAR` is written, never
/// on a system call: the choice is which entry `LSTAR` points at.
static FAST_PATH: AtomicBool = AtomicBool::new(true);

/// The entry for `LSTAR`: with or without the big kernel lock (`locked`),
/// with or without the IPC fast path ([`FAST_PATH`]). The entries without
/// it (`syscall_entry_general`, `syscall_entry_locked_general`) go straight
/// to the general path, so every `Call` and `ReplyRecv` takes `ipc.rs`.
fn syscall_entry_address(locked: bool) -> u64 {
    let entry: unsafe extern "C" fn() = match (locked, FAST_PATH.load(Ordering::Relaxed)) {
        (false, true) => syscall_entry,
        (true, true) => syscall_entry_locked,
        (false, false) => syscall_entry_general,
        (true, false) => syscall_entry_locked_general,
    };
    entry as *const () as u64
}

/// Turns the IPC fast path off for good (kernel option
/// `pecan.fastpath=off`, so that the scenario tests can compare both
/// paths): every `Call` and `ReplyRecv` takes the general path, on every
/// CPU. Must run on the boot CPU before the other CPUs start and before any
/// user thread runs: it re-points this CPU's `LSTAR`, and the other CPUs
/// read the choice when they set theirs.
pub fn disable_fast_path() {
    FAST_PATH.store(false, Ordering::Relaxed);
    // SAFETY: the general entry handles every system call, `Call` and
    // `ReplyRecv` included, with the registers as the CPU leaves them (it
    // is the fast-path entry without its dispatch); no system call is in
    // progress on this CPU while the boot runs.
    unsafe { cpu::wrmsr(MSR_LSTAR, syscall_entry_address(false)) };
}

/// CPU `index`'s block (for other CPUs: only its run queue, under the big
/// kernel lock).
pub fn cpu_block(index: usize) -> *mut PerCpu {
    CPUS[index].get()
}

/// This CPU's per-CPU block.
pub fn this_cpu() -> *mut PerCpu {
    let address: u64;
    // SAFETY: in the kernel GS_BASE always holds this CPU's PerCpu address
    // (set at boot, swapped only on the user boundary), with its own
    // address in `self_ptr`. `pure, nomem`: the value never changes for
    // this CPU once set, so the compiler may reuse one load.
    unsafe {
        core::arch::asm!(
            "mov {}, gs:[{offset}]",
            out(reg) address,
            offset = const core::mem::offset_of!(PerCpu, self_ptr),
            options(pure, nomem, nostack, preserves_flags)
        )
    };
    address as *mut PerCpu
}

/// This CPU's run-queue summary word (`thread::RunQueue`), GS-relative:
/// one load, like the IPC fast path's.
#[inline(always)]
pub fn run_queue_summary() -> u64 {
    let value: u64;
    // SAFETY: GS_BASE is this CPU's block in the kernel; the offset is
    // that of its run queue's summary word.
    unsafe {
        core::arch::asm!(
            "mov {}, gs:[{offset}]",
            out(reg) value,
            offset = const OFFSET_RUN_QUEUE + crate::thread::RUN_QUEUE_SUMMARY,
            options(readonly, nostack, preserves_flags)
        )
    };
    value
}

/// Whether `rq` is this CPU's run queue (one GS-relative compare).
#[inline(always)]
pub fn is_own_run_queue(rq: *mut RunQueue) -> bool {
    let own: *mut RunQueue;
    // SAFETY: GS_BASE is this CPU's block in the kernel.
    unsafe {
        core::arch::asm!(
            "mov {}, gs:[{offset}]",
            out(reg) own,
            offset = const core::mem::offset_of!(PerCpu, own_run_queue),
            // Constant for this CPU once set (see `this_cpu`).
            options(pure, nomem, nostack, preserves_flags)
        )
    };
    own == rq
}

/// CPU `index`'s run queue.
pub fn run_queue_of(index: usize) -> *mut RunQueue {
    // SAFETY: only the field's address is taken.
    unsafe { &raw mut (*CPUS[index].get()).run_queue }
}

/// Word `index` (0..4) of this CPU's run-queue bitmap, GS-relative.
#[inline(always)]
pub fn run_queue_nonempty(index: usize) -> u64 {
    let value: u64;
    // SAFETY: as above; `index & 3` stays inside the four-word bitmap.
    unsafe {
        core::arch::asm!(
            "mov {}, gs:[{}*8 + {offset}]",
            out(reg) value,
            in(reg) index & 3,
            offset = const OFFSET_RUN_QUEUE + crate::thread::RUN_QUEUE_NONEMPTY,
            options(readonly, nostack, preserves_flags)
        )
    };
    value
}

/// This CPU's index.
pub fn this_cpu_index() -> u32 {
    // SAFETY: this CPU's own block; cpu_id is written once at set-up.
    unsafe { (*this_cpu()).cpu_id }
}

/// Makes `top` (the end of the current thread's frame) the place where the
/// next interrupt or exception from user mode on this CPU saves registers
/// (`TSS.rsp0`).
pub fn set_context_top(top: u64) {
    let percpu = this_cpu();
    // SAFETY: only this CPU touches its PerCpu and its TSS, with interrupts
    // disabled on every path that calls this.
    unsafe { (*(*percpu).tables).tss.rsp[0] = top };
}
