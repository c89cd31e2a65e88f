//! x86_64: boot entry (PVH), descriptor tables, traps, LAPIC, legacy timers.

pub mod cpu;
pub mod fpu;
pub mod gdt;
pub mod ioapic;
pub mod lapic;
pub mod percpu;
pub mod pit;
pub mod protect;
pub mod serial;
pub mod svm;
pub mod syscall_entry;
pub mod trap;

use core::sync::atomic::{AtomicU64, Ordering};

use crate::static_cell::StaticCell;

/// CPUs the kernel schedules on: those online after `smp.rs` started them
/// (indices 0..count).
static CPU_COUNT: AtomicU64 = AtomicU64::new(1);

pub fn cpu_count() -> u64 {
    CPU_COUNT.load(Ordering::Relaxed)
}

/// Records how many CPUs came online (once, at boot).
pub fn set_cpu_count(count: u64) {
    CPU_COUNT.store(count, Ordering::Relaxed);
}

core::arch::global_asm!(include_str!("boot.s"), options(att_syntax));
core::arch::global_asm!(
    include_str!("trap.s"),
    pc_kernel_stack_top = const percpu::OFFSET_KERNEL_STACK_TOP,
    vector_syscall = const trap::VECTOR_SYSCALL,
    f_vector = const core::mem::offset_of!(trap::TrapFrame, vector),
    f_rip = const core::mem::offset_of!(trap::TrapFrame, rip),
    f_rflags = const core::mem::offset_of!(trap::TrapFrame, rflags),
    f_rsp = const core::mem::offset_of!(trap::TrapFrame, rsp),
    bkl = sym crate::smp::BKL,
    bkl_serving = const crate::smp::BigLock::OFFSET_SERVING,
    pc_scratch = const percpu::OFFSET_SCRATCH,
    pc_tables = const percpu::OFFSET_TABLES,
    tss_rsp0 = const core::mem::offset_of!(gdt::CpuTables, tss) + core::mem::offset_of!(gdt::Tss, rsp),
    user_data = const gdt::USER_DATA,
    user_code32 = const gdt::USER_CODE32,
    vector_invalid_opcode = const trap::VECTOR_INVALID_OPCODE,
    smap_enabled = sym protect::SMAP_ENABLED,
    options(att_syntax)
);

/// The boot CPU's descriptor tables and emergency stacks.
static BOOT_CPU_TABLES: StaticCell<gdt::CpuTables> = StaticCell::new(gdt::CpuTables::new());

/// What the boot CPU set up, for the boot log.
pub struct BootCpu {
    pub fpu: fpu::Enabled,
    pub protections: protect::Protections,
}

/// Loads the boot CPU's GDT, TSS and the IDT, then enables the FPU state
/// for user threads and the CPU's protections (SMEP, SMAP, UMIP). Must run
/// first thing, so that any fault after it is reported instead of
/// triple-faulting.
pub fn init_boot_cpu() -> BootCpu {
    gdt::init_idt();
    gdt::load_idt();
    // SAFETY: runs once, on the boot CPU, before other CPUs exist; the tables
    // are a 'static that nothing else references.
    unsafe { (&mut *BOOT_CPU_TABLES.get()).load() };
    percpu::init_boot_cpu(BOOT_CPU_TABLES.get());
    BootCpu {
        fpu: fpu::init(),
        protections: protect::enable(),
    }
}

/// For the hostile test only (kernel option `pecan.test-compat32=1`): a
/// present 32-bit user code segment on every CPU (`gdt::allow_compat_mode`).
/// Must run on the boot CPU before the other CPUs start.
pub fn allow_compat_mode() {
    // SAFETY: the boot CPU's tables, changed on the boot CPU before other
    // CPUs exist; the CPU keeps only their address, which does not change.
    gdt::allow_compat_mode(unsafe { &mut *BOOT_CPU_TABLES.get() });
}
