//! Per-CPU kernel data, reached through the GS segment base while in the
//! kernel (user GS is swapped in with `swapgs` on the way out).
//!
//! The assembly entry paths read fields through GS at the `OFFSET_*`
//! constants here (passed to `global_asm!` as operands).

use super::{cpu, gdt};
use crate::static_cell::StaticCell;

#[repr(C)]
pub struct PerCpu {
    /// Top of this CPU's kernel stack (the kernel is event-driven: every
    /// entry from user mode starts at this fresh stack).
    pub kernel_stack_top: u64,
    /// The user stack pointer of the thread in a system call: the entry
    /// leaves it here and stores it into the thread's frame only when the
    /// thread stops running (see `syscall_entry.s`).
    pub scratch: u64,
    /// This block's own address, so Rust code can find it without reading
    /// the GS_BASE MSR.
    self_ptr: *mut PerCpu,
    /// The thread running (or last run) on this CPU; null when idle. The
    /// syscall entry saves registers into its frame; interrupts do so
    /// through `TSS.rsp0`, which [`set_context_top`] keeps at the end of
    /// that frame.
    pub current: *mut crate::thread::Thread,
    /// Set by a system call that ends in a switch: the thread to run next
    /// (null: let the scheduler choose). Read by `syscall_continue`.
    pub next: *mut crate::thread::Thread,
    pub cpu_id: u32,
    tables: *mut gdt::CpuTables,
    /// The thread whose x87/SSE/AVX state is in this CPU's registers with
    /// CR0.TS clear, or null (see `fpu.rs`).
    pub fpu_live: *mut crate::thread::Thread,
}

/// Offsets of the fields the assembly entry paths reach through GS.
pub const OFFSET_KERNEL_STACK_TOP: usize = core::mem::offset_of!(PerCpu, kernel_stack_top);
pub const OFFSET_SCRATCH: usize = core::mem::offset_of!(PerCpu, scratch);
pub const OFFSET_CURRENT: usize = core::mem::offset_of!(PerCpu, current);
pub const OFFSET_TABLES: usize = core::mem::offset_of!(PerCpu, tables);
pub const OFFSET_FPU_LIVE: usize = core::mem::offset_of!(PerCpu, fpu_live);

const MSR_STAR: u32 = 0xc000_0081;
const MSR_LSTAR: u32 = 0xc000_0082;
const MSR_SFMASK: u32 = 0xc000_0084;
const MSR_GS_BASE: u32 = 0xc000_0101;
const MSR_KERNEL_GS_BASE: u32 = 0xc000_0102;

/// RFLAGS bits cleared on syscall entry: TF, IF, DF, AC (and NT).
const SFMASK: u64 = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 18) | (1 << 14);

unsafe extern "C" {
    fn syscall_entry();
    static boot_kernel_stack_top: u8;
}

static BOOT_CPU: StaticCell<PerCpu> = StaticCell::new(PerCpu {
    kernel_stack_top: 0,
    scratch: 0,
    self_ptr: core::ptr::null_mut(),
    current: core::ptr::null_mut(),
    next: core::ptr::null_mut(),
    cpu_id: 0,
    tables: core::ptr::null_mut(),
    fpu_live: core::ptr::null_mut(),
});

/// Sets up the boot CPU's per-CPU block, GS base and the syscall MSRs.
pub fn init_boot_cpu(tables: *mut gdt::CpuTables) {
    let percpu = BOOT_CPU.get();
    // SAFETY: single-threaded boot; nothing else references BOOT_CPU yet.
    unsafe {
        (*percpu).kernel_stack_top = &raw const boot_kernel_stack_top as u64;
        (*percpu).tables = tables;
        (*percpu).self_ptr = percpu;
    }
    // SAFETY: GS_BASE points at a 'static PerCpu; KERNEL_GS_BASE (the user
    // value swapped in on exit) starts as 0. STAR/LSTAR/SFMASK set up the
    // syscall entry with the selectors of gdt.rs; EFER.SCE was set in boot.s.
    unsafe {
        cpu::wrmsr(MSR_GS_BASE, percpu as u64);
        cpu::wrmsr(MSR_KERNEL_GS_BASE, 0);
        let star = (u64::from(gdt::USER_CODE32 & !3) << 48) | (u64::from(gdt::KERNEL_CODE) << 32);
        cpu::wrmsr(MSR_STAR, star);
        cpu::wrmsr(MSR_LSTAR, syscall_entry as *const () as u64);
        cpu::wrmsr(MSR_SFMASK, SFMASK);
    }
}

/// This CPU's per-CPU block.
pub fn this_cpu() -> *mut PerCpu {
    let address: u64;
    // SAFETY: in the kernel GS_BASE always holds this CPU's PerCpu address
    // (set at boot, swapped only on the user boundary), with its own
    // address in `self_ptr`.
    unsafe {
        core::arch::asm!(
            "mov {}, gs:[{offset}]",
            out(reg) address,
            offset = const core::mem::offset_of!(PerCpu, self_ptr),
            options(readonly, nostack, preserves_flags)
        )
    };
    address as *mut PerCpu
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
