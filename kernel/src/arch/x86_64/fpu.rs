//! Each thread's x87/SSE/AVX state ("FPU state"): enabled at boot, kept in
//! the thread, loaded on first use in a turn, saved when the thread stops
//! running.
//!
//! The kernel is built soft-float and never uses these registers itself;
//! it only saves and restores them for user threads.
//!
//! # Boot ([`init`])
//!
//! CR0: `MP` and `NE` set (`wait` honours `TS`; x87 errors raise #MF),
//! `EM` clear; CR4: `OSFXSR`, `OSXMMEXCPT` (SIMD errors raise #XM) and,
//! when CPUID reports XSAVE, `OSXSAVE` with `XCR0` = x87 | SSE | AVX as far
//! as the CPU supports them. AVX-512 (and the rest: MPX, PKRU, AMX) is
//! left off: its state would not fit the thread object (x87+SSE+AVX take
//! 832 bytes in the standard XSAVE layout, the AVX-512 components another
//! 1856) and QEMU 7.2's TCG does not implement it. Save and restore use
//! `xsaveopt`/`xrstor` (64-bit forms), `xsave` without XSAVEOPT, and
//! `fxsave`/`fxrstor` on CPUs without XSAVE (x87 and SSE only). QEMU's
//! `-cpu max` under TCG (measured): XSAVE, XSAVEOPT and XGETBV1, AVX and
//! AVX2, no AVX-512; `XCR0` may hold x87, SSE, AVX, MPX and PKRU; the
//! XSAVE area for x87+SSE+AVX is 832 bytes.
//!
//! # Where a thread's state is
//!
//! Every thread has an [`FpuState`] (64-byte aligned, in its `Thread`),
//! initialised to the clean state ([`FpuState::CLEAN`]: x87, SSE and AVX in
//! their reset state, `MXCSR` = 0x1f80) when the thread is made and when
//! `ThreadStart` starts it afresh. Per CPU, `PerCpu::fpu_live` names the
//! thread whose state is *live*: in the registers, with CR0.TS clear, so
//! that it runs its vector code without traps. The thread's own
//! `Thread::fpu_live` is nonzero (that CPU's index + 1) exactly while it
//! is that thread. With several CPUs a thread is live only on its own CPU
//! or while it runs; moving it saves the state where it is live first
//! ([`before_moving`], `smp.rs`). Invariants:
//!
//! - While a thread runs in user mode, the registers hold either its own
//!   state (it is live, TS clear) or the clean state (TS set): **never
//!   another thread's**, not even behind TS, so the speculative reads of
//!   "LazyFP" (CVE-2018-3665) find nothing to leak either.
//! - A thread that is not live has its state in its `FpuState`.
//!
//! # Lazy restore, eager save
//!
//! - **First use in a turn**: with TS set, the thread's first x87/SSE/AVX
//!   instruction raises #NM; [`device_not_available`] clears TS, loads the
//!   thread's state (`xrstor`) and makes it live; the instruction is
//!   retried. One trap per turn, and only for a thread that uses vector
//!   registers in that turn.
//! - **Switch**: when another thread is about to run
//!   (`thread::switch_to`, [`before_running`]) and some thread is live, its
//!   state is saved (`xsaveopt`), the registers are reset to the clean
//!   state (`xrstor` of [`FpuState::CLEAN`]) and TS is set ([`release`]).
//!   Switching back to the live thread itself (after the CPU idled, or a
//!   preemption that picked it again) costs nothing.
//! - **The IPC fast path**: a live thread's `fpu_live` sits next to its
//!   `cpu`, and the fast path compares the two 32-bit fields as one 64-bit
//!   word with the partner's, so between threads that do not use vector
//!   registers it is unchanged, instruction for instruction. A live caller
//!   (the only thread that can be live while the fast path runs: the
//!   running one) fails that comparison; out of line, `SE_RELEASE_FPU` in
//!   `syscall_entry.s` then does what [`release`] does and the fast path
//!   goes on (with XSAVEOPT; otherwise the general path releases it).
//!
//! Costs, as `docs/kernel.md` tabulates: nothing for threads that do not
//! use vector registers; for one that does, per turn in which it uses
//! them: one #NM entry and exit, `clts` and `xrstor`, and when it stops
//! running `xsaveopt`, `xrstor` (clean) and one CR0 write. Eager switching
//! (save and restore on every switch) would put two XSAVE-family
//! instructions into every IPC; lazy switching that keeps a thread's state
//! in the registers while others run saves the save and the clean restore
//! but leaves that state to speculation and needs an owner pointer that
//! thread deletion and CPU migration must chase.
//!
//! # Faults
//!
//! #NM is consumed here (it cannot reach a user with TS clear: EM is
//! clear). Vector faults stay faults of the thread: #XM (unmasked SIMD
//! exception), #MF (unmasked x87 exception), #UD (an instruction the CPU or
//! `XCR0` lacks, e.g. AVX-512) and #GP (a bad `MXCSR` in `ldmxcsr`/
//! `fxrstor` on user memory) become fault messages like any exception. The
//! kernel's own `xrstor` only ever reads areas it wrote, so it cannot
//! fault.

use core::sync::atomic::{AtomicU8, Ordering};

use super::{cpu, percpu};
use crate::thread::{Thread, ThreadRef};
use crate::token::Threads;

/// Bytes of a thread's state: the legacy area (x87 and SSE, 512), the XSAVE
/// header (64) and the AVX upper halves (256), standard layout.
pub const AREA_BYTES: usize = 832;

/// A thread's saved x87/SSE/AVX state in the XSAVE (or FXSAVE) layout.
#[repr(C, align(64))]
pub struct FpuState([u8; AREA_BYTES]);

/// x87 control word and MXCSR of the reset state.
const FCW_CLEAN: u16 = 0x037f;
const MXCSR_CLEAN: u32 = 0x1f80;
const OFFSET_FCW: usize = 0;
const OFFSET_MXCSR: usize = 24;

impl FpuState {
    /// The clean state: all registers zero, x87 empty with the default
    /// control word, `MXCSR` 0x1f80 (all SIMD exceptions masked), the
    /// XSAVE header's `XSTATE_BV` 0 (every component in its initial
    /// state). Valid for `xrstor` and `fxrstor` alike.
    pub const CLEAN: FpuState = {
        let mut bytes = [0u8; AREA_BYTES];
        let fcw = FCW_CLEAN.to_le_bytes();
        bytes[OFFSET_FCW] = fcw[0];
        bytes[OFFSET_FCW + 1] = fcw[1];
        let mxcsr = MXCSR_CLEAN.to_le_bytes();
        let mut i = 0;
        while i < 4 {
            bytes[OFFSET_MXCSR + i] = mxcsr[i];
            i += 1;
        }
        FpuState(bytes)
    };
}

/// The clean state at a fixed address, for resetting the registers (also
/// by the IPC fast path).
pub(crate) static CLEAN: FpuState = FpuState::CLEAN;

/// XCR0 bits.
const XCR0_X87: u64 = 1 << 0;
const XCR0_SSE: u64 = 1 << 1;
const XCR0_AVX: u64 = 1 << 2;
/// The state components the kernel enables when the CPU has them.
const XCR0_WANTED: u64 = XCR0_X87 | XCR0_SSE | XCR0_AVX;

const CR0_MP: u64 = 1 << 1;
const CR0_EM: u64 = 1 << 2;
pub(crate) const CR0_TS: u64 = 1 << 3;
const CR0_NE: u64 = 1 << 5;
const CR4_OSFXSR: u64 = 1 << 9;
const CR4_OSXMMEXCPT: u64 = 1 << 10;
const CR4_OSXSAVE: u64 = 1 << 18;

/// How state is saved and restored (set once by [`init`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// `fxsave64`/`fxrstor64`: x87 and SSE (CPUs without XSAVE).
    Fxsave = 0,
    /// `xsave64`/`xrstor64`.
    Xsave = 1,
    /// `xsaveopt64`/`xrstor64`: writes only components that changed since
    /// the thread's last restore.
    Xsaveopt = 2,
}

/// A [`Mode`]; the IPC fast path reads it as a byte.
pub(crate) static MODE: AtomicU8 = AtomicU8::new(Mode::Fxsave as u8);

fn mode() -> Mode {
    match MODE.load(Ordering::Relaxed) {
        2 => Mode::Xsaveopt,
        1 => Mode::Xsave,
        _ => Mode::Fxsave,
    }
}

/// What [`init`] enabled, for the boot log.
pub struct Enabled {
    pub mode: Mode,
    pub xcr0: u64,
    /// The XSAVE area size CPUID reports for `xcr0` (512 for FXSAVE).
    pub area: u32,
}

impl core::fmt::Display for Enabled {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let name = match self.mode {
            Mode::Fxsave => "fxsave",
            Mode::Xsave => "xsave",
            Mode::Xsaveopt => "xsaveopt",
        };
        write!(f, "{name}, state x87 SSE")?;
        if self.xcr0 & XCR0_AVX != 0 {
            write!(f, " AVX")?;
        }
        write!(
            f,
            " (XCR0 {:#x}), {} of {AREA_BYTES} bytes per thread; restored on first use, saved on switch",
            self.xcr0, self.area
        )
    }
}

/// Enables x87/SSE/AVX for user mode on this CPU (see the module docs),
/// loads the clean state and sets TS. Runs on every CPU before it runs a
/// user thread; no thread is live yet.
pub fn init() -> Enabled {
    let leaf1 = cpu::cpuid(1, 0);
    let has_xsave = leaf1.ecx & (1 << 26) != 0;
    let cr0 = (cpu::read_cr0() | CR0_MP | CR0_NE) & !CR0_EM;
    let mut cr4 = cpu::read_cr4() | CR4_OSFXSR | CR4_OSXMMEXCPT;
    let mut enabled = Enabled {
        mode: Mode::Fxsave,
        xcr0: XCR0_X87 | XCR0_SSE,
        area: 512,
    };
    if has_xsave {
        cr4 |= CR4_OSXSAVE;
    }
    // SAFETY: only FPU bits change (MP, NE, EM; OSFXSR, OSXMMEXCPT,
    // OSXSAVE when CPUID reports XSAVE): paging and protection stay.
    unsafe {
        cpu::write_cr0(cr0);
        cpu::write_cr4(cr4);
    }
    if has_xsave {
        let leaf_d = cpu::cpuid(0xd, 0);
        let supported = u64::from(leaf_d.eax) | (u64::from(leaf_d.edx) << 32);
        let mut xcr0 = supported & XCR0_WANTED;
        if xcr0 & XCR0_SSE == 0 {
            xcr0 &= !XCR0_AVX; // AVX state requires SSE state
        }
        xcr0 |= XCR0_X87;
        // SAFETY: OSXSAVE is set; x87 is always valid, SSE and AVX only as
        // CPUID reports them, AVX only with SSE.
        unsafe { cpu::xsetbv(0, xcr0) };
        // EBX: the area size for the components enabled in XCR0 now.
        let area = cpu::cpuid(0xd, 0).ebx;
        if area as usize > AREA_BYTES {
            panic!("fpu: XSAVE area of {area} bytes for XCR0 {xcr0:#x} exceeds {AREA_BYTES}");
        }
        let opt = cpu::cpuid(0xd, 1).eax & 1 != 0;
        enabled = Enabled {
            mode: if opt { Mode::Xsaveopt } else { Mode::Xsave },
            xcr0,
            area,
        };
    }
    MODE.store(enabled.mode as u8, Ordering::Relaxed);
    // Whatever firmware left in the registers goes; then TS: the first
    // vector instruction of any thread traps and loads that thread's state.
    restore(&CLEAN);
    set_ts();
    enabled
}

fn set_ts() {
    // SAFETY: only TS changes.
    unsafe { cpu::write_cr0(cpu::read_cr0() | CR0_TS) };
}

/// Loads `state` into the registers. TS must be clear.
fn restore(state: &FpuState) {
    let p = state as *const FpuState;
    // SAFETY: `state` is a 64-byte aligned area written by `save` or built
    // as CLEAN, so it holds a valid image (reserved bits clear, MXCSR
    // valid); all-ones in edx:eax asks for every component enabled in
    // XCR0. The instruction reads only the area.
    unsafe {
        match mode() {
            Mode::Fxsave => {
                core::arch::asm!("fxrstor64 [{}]", in(reg) p, options(nostack, readonly, preserves_flags))
            }
            Mode::Xsave | Mode::Xsaveopt => core::arch::asm!(
                "xrstor64 [{}]", in(reg) p, in("eax") u32::MAX, in("edx") u32::MAX,
                options(nostack, readonly, preserves_flags)
            ),
        }
    }
}

/// Stores the registers into `state`. TS must be clear.
fn save(state: &mut FpuState) {
    let p = state as *mut FpuState;
    // SAFETY: `state` is a 64-byte aligned area of AREA_BYTES, at least
    // the size CPUID reports for XCR0 (checked in init); the instruction
    // writes only inside it.
    unsafe {
        match mode() {
            Mode::Fxsave => {
                core::arch::asm!("fxsave64 [{}]", in(reg) p, options(nostack, preserves_flags))
            }
            Mode::Xsave => core::arch::asm!(
                "xsave64 [{}]", in(reg) p, in("eax") u32::MAX, in("edx") u32::MAX,
                options(nostack, preserves_flags)
            ),
            Mode::Xsaveopt => core::arch::asm!(
                "xsaveopt64 [{}]", in(reg) p, in("eax") u32::MAX, in("edx") u32::MAX,
                options(nostack, preserves_flags)
            ),
        }
    }
}

/// Before `next` runs on this CPU (`thread::switch_to`): if another thread's
/// state is live, save it and reset the registers (see the module docs).
/// Three instructions when no state is live (the common case: a load, a
/// test, a branch). `_threads`: the caller holds the kernel token and no
/// thread reference (the live thread is written through a pointer).
#[inline(always)]
pub fn before_running(_threads: &mut Threads, pc: *mut percpu::PerCpu, next: ThreadRef) {
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    if !unsafe { (*pc).fpu_live }.is_null() {
        release_unless(pc, next.as_ptr());
    }
}

/// [`release`] unless `next` is the live thread itself.
#[cold]
#[inline(never)]
fn release_unless(pc: *mut percpu::PerCpu, next: *mut Thread) {
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    let live = unsafe { (*pc).fpu_live };
    if live != next {
        release(pc, live);
    }
}

/// Saves the live thread's state into its `FpuState`, resets the
/// registers to the clean state and sets TS. `SE_RELEASE_FPU` in
/// `syscall_entry.s` does the same for the IPC fast path: keep the two in
/// step.
fn release(pc: *mut percpu::PerCpu, live: *mut Thread) {
    // SAFETY: `live` is this CPU's live thread, alive (destroying a thread
    // calls `forget` first), and no other reference to it is in use
    // (interrupts disabled; the caller lent its kernel token — every
    // public way here takes `&mut Threads` — or this CPU serves the
    // request of the lock holder, which waits).
    let thread = unsafe { &mut *live };
    save(&mut thread.fpu);
    restore(&CLEAN);
    set_ts();
    thread.fpu_live = 0;
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    unsafe { (*pc).fpu_live = core::ptr::null_mut() };
}

/// The current thread `t` raised #NM (device not available): it used an
/// x87/SSE/AVX instruction with TS set. Loads its state and makes it live;
/// returns `false` if its state already was (TS clear: then the #NM is not
/// ours and stays a fault of the thread).
pub fn device_not_available(_threads: &mut Threads, t: ThreadRef) -> bool {
    let t = t.as_ptr();
    let pc = percpu::this_cpu();
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    let live = unsafe { (*pc).fpu_live };
    if live == t {
        return false;
    }
    if !live.is_null() {
        // Not reached (enter released it before `t` ran); kept so that the
        // invariant holds whatever the path.
        release(pc, live);
    }
    cpu::clts();
    // SAFETY: `t` is this CPU's running thread; no other reference to it
    // is in use (the caller lends us its token: `_threads`).
    let thread = unsafe { &mut *t };
    restore(&thread.fpu);
    // The CPU index + 1: nonzero, and says where (`smp.rs` asks that CPU
    // to save or drop it).
    thread.fpu_live = percpu::this_cpu_index() + 1;
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    unsafe { (*pc).fpu_live = t };
    true
}

/// `t` is being destroyed or started afresh: if its state is live, here
/// or on another CPU, drop it (registers to the clean state, TS set)
/// without saving; a destroyed thread that runs on another CPU is left by
/// that CPU (`smp::evict`). Afterwards no per-CPU state refers to `t`.
/// Called with the kernel token (`_threads`: no thread reference is live).
pub fn forget(_threads: &mut Threads, t: ThreadRef) {
    crate::smp::evict(t.as_ptr());
    forget_here(t.as_ptr());
}

/// [`forget`] on this CPU only (also serves another CPU's request, without
/// the lock: the asker holds it and waits, and touches nothing meanwhile).
pub fn forget_here(t: *mut Thread) {
    let pc = percpu::this_cpu();
    // SAFETY: this CPU's PerCpu, interrupts disabled; `t` is alive (the
    // caller, or the CPU that asked us, destroys it only afterwards).
    unsafe {
        if (*pc).fpu_live == t {
            restore(&CLEAN);
            set_ts();
            (*t).fpu_live = 0;
            (*pc).fpu_live = core::ptr::null_mut();
        }
    }
}

/// Saves whatever thread's state is live on this CPU (before it idles).
/// `_threads`: the caller's token, lent while the live thread is written.
pub fn release_live(_threads: &mut Threads) {
    let pc = percpu::this_cpu();
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    let live = unsafe { (*pc).fpu_live };
    if !live.is_null() {
        release(pc, live);
    }
}

/// If `t`'s state is live on this CPU, saves it (`t` moves to another
/// CPU; serves that request from the CPU that moves it, which holds the
/// lock and waits: or is this CPU, lending its token).
pub fn release_here(t: *mut Thread) {
    let pc = percpu::this_cpu();
    // SAFETY: this CPU's PerCpu, interrupts disabled.
    if unsafe { (*pc).fpu_live } == t {
        release(pc, t);
    }
}

/// `t` is about to run on CPU `cpu` (it was queued there): if its state
/// is live on another CPU, that CPU saves it first, so that `t` never
/// finds stale registers. Called with the kernel token (`threads`: no
/// thread reference is live while `t` is saved through a pointer).
pub fn before_moving(threads: &mut Threads, t: ThreadRef, cpu: u32) {
    let live = threads.get(t).fpu_live;
    if live == 0 || live == cpu + 1 {
        return;
    }
    let t = t.as_ptr();
    if live - 1 == percpu::this_cpu_index() {
        release_here(t);
    } else {
        crate::smp::save_fpu_on(live - 1, t);
    }
}

/// `t` starts afresh (`ThreadStart`): its state becomes the clean state,
/// like its general registers.
pub fn reset(threads: &mut Threads, t: ThreadRef) {
    forget(threads, t);
    threads.get_mut(t).fpu = FpuState::CLEAN;
}

/// Before a virtual CPU runs on this CPU (`crate::vcpu`): saves the live
/// thread's state if any (the VMM's own, usually), then loads the guest's
/// `state` with TS clear — the guest runs with its own CR0, so TS would
/// not stop it from reading whatever is in the registers: they must hold
/// the guest's state and nothing else. `_threads`: the caller's token,
/// lent while the live thread is written.
pub fn enter_guest(threads: &mut Threads, state: &FpuState) {
    release_live(threads);
    cpu::clts();
    restore(state);
}

/// After the guest's exit: saves its state into `state`, resets the
/// registers to the clean state and sets TS again (the invariant of the
/// module docs: never another's state in the registers of a thread).
pub fn leave_guest(state: &mut FpuState) {
    save(state);
    restore(&CLEAN);
    set_ts();
}
