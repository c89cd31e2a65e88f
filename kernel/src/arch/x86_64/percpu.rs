//! Per-CPU kernel data, reached through the GS segment base while in the
//! kernel (user GS is swapped in with `swapgs` on the way out).
//!
//! The first three fields are read by the assembly entry paths at fixed
//! offsets (`%gs:0`, `%gs:8`, `%gs:16`); keep them in this order.

use super::{cpu, gdt};
use crate::static_cell::StaticCell;

#[repr(C)]
pub struct PerCpu {
    /// Top (end) of the current thread's saved-context area: the syscall
    /// entry pushes the user context there, and TSS.rsp0 points there too.
    pub context_top: u64,
    /// Top of this CPU's kernel stack (the kernel is event-driven: every
    /// entry from user mode starts at this fresh stack).
    pub kernel_stack_top: u64,
    /// Scratch for the user stack pointer during syscall entry.
    pub scratch: u64,
    /// This block's own address (`%gs:24`), so Rust code can find it
    /// without reading the GS_BASE MSR.
    self_ptr: *mut PerCpu,
    /// The thread running (or last run) on this CPU; null when idle.
    pub current: *mut crate::thread::Thread,
    /// Set by a system call that ends in a switch: the thread to run next
    /// (null: let the scheduler choose). Read by `syscall_continue`.
    pub next: *mut crate::thread::Thread,
    pub cpu_id: u32,
    tables: *mut gdt::CpuTables,
}

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
    context_top: 0,
    kernel_stack_top: 0,
    scratch: 0,
    self_ptr: core::ptr::null_mut(),
    current: core::ptr::null_mut(),
    next: core::ptr::null_mut(),
    cpu_id: 0,
    tables: core::ptr::null_mut(),
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
    // (set at boot, swapped only on the user boundary), whose `self_ptr`
    // field is at offset 24.
    unsafe {
        core::arch::asm!("mov {}, gs:[24]", out(reg) address, options(readonly, nostack, preserves_flags))
    };
    address as *mut PerCpu
}

/// Makes `context_top` the place where the next user entry on this CPU
/// saves registers (syscall entry and TSS.rsp0).
pub fn set_context_top(top: u64) {
    let percpu = this_cpu();
    // SAFETY: only this CPU touches its PerCpu and its TSS, with interrupts
    // disabled on every path that calls this.
    unsafe {
        (*percpu).context_top = top;
        (*(*percpu).tables).tss.rsp[0] = top;
    }
}
