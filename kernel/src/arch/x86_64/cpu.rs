//! Thin wrappers around privileged x86_64 instructions.
//!
//! This is one of the few places with `unsafe`: each wrapper states what the
//! caller must guarantee. Wrappers that cannot break memory safety on their
//! own (reading a control register, `hlt`, `pause`) are safe functions.

use core::arch::asm;

/// Writes a byte to an I/O port.
///
/// # Safety
/// The port must belong to a device the kernel drives, and the write must be
/// valid for that device's state; port writes can reconfigure hardware.
pub unsafe fn outb(port: u16, value: u8) {
    // SAFETY: the caller guarantees the port write is valid.
    unsafe {
        asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags))
    }
}

/// Reads a byte from an I/O port.
///
/// # Safety
/// As for [`outb`]: reads can have side effects on devices (e.g. clearing a
/// status register).
pub unsafe fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: the caller guarantees the port read is valid.
    unsafe {
        asm!("in al, dx", out("al") value, in("dx") port, options(nomem, nostack, preserves_flags))
    }
    value
}

/// Writes a 16-bit value to an I/O port.
///
/// # Safety
/// As for [`outb`].
pub unsafe fn outw(port: u16, value: u16) {
    // SAFETY: the caller guarantees the port write is valid.
    unsafe {
        asm!("out dx, ax", in("dx") port, in("ax") value, options(nomem, nostack, preserves_flags))
    }
}

/// Reads a model-specific register.
///
/// # Safety
/// The MSR must exist on this CPU (else #GP).
pub unsafe fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: the caller guarantees the MSR exists.
    unsafe {
        asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags))
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Writes a model-specific register.
///
/// # Safety
/// The MSR must exist and the value must be valid; MSRs control paging,
/// system-call entry points and caching, so a wrong value breaks the kernel.
pub unsafe fn wrmsr(msr: u32, value: u64) {
    // SAFETY: the caller guarantees the write is valid.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32,
             options(nostack, preserves_flags))
    }
}

pub const MSR_APIC_BASE: u32 = 0x1b;
pub const MSR_PAT: u32 = 0x277;

pub fn read_cr2() -> u64 {
    let value: u64;
    // SAFETY: reading CR2 has no side effects.
    unsafe { asm!("mov {}, cr2", out(reg) value, options(nomem, nostack, preserves_flags)) }
    value
}

pub fn read_cr3() -> u64 {
    let value: u64;
    // SAFETY: reading CR3 has no side effects.
    unsafe { asm!("mov {}, cr3", out(reg) value, options(nomem, nostack, preserves_flags)) }
    value
}

/// Switches to another top-level page table.
///
/// # Safety
/// `pml4_phys` must be a valid PML4 that maps the currently executing code,
/// the current stack and every kernel object still in use.
pub unsafe fn write_cr3(pml4_phys: u64) {
    // SAFETY: the caller guarantees the new tables map everything in use.
    unsafe { asm!("mov cr3, {}", in(reg) pml4_phys, options(nostack, preserves_flags)) }
}

pub fn read_cr0() -> u64 {
    let value: u64;
    // SAFETY: reading CR0 has no side effects.
    unsafe { asm!("mov {}, cr0", out(reg) value, options(nomem, nostack, preserves_flags)) }
    value
}

/// Writes CR0.
///
/// # Safety
/// CR0 controls paging, protection and the FPU: the value must keep PE,
/// PG and WP set and leave the FPU bits as `arch::x86_64::fpu` expects.
pub unsafe fn write_cr0(value: u64) {
    // SAFETY: the caller guarantees a valid value.
    unsafe { asm!("mov cr0, {}", in(reg) value, options(nomem, nostack, preserves_flags)) }
}

/// Clears CR0.TS: x87/SSE/AVX instructions no longer trap with #NM.
pub fn clts() {
    // SAFETY: clearing TS only stops #NM traps; the FPU code decides when
    // the registers hold the running thread's state (see fpu.rs).
    unsafe { asm!("clts", options(nomem, nostack, preserves_flags)) }
}

/// Writes CR4.
///
/// # Safety
/// CR4 enables paging extensions and CPU features: the value must keep
/// PAE (and everything else the kernel relies on) set.
pub unsafe fn write_cr4(value: u64) {
    // SAFETY: the caller guarantees a valid value.
    unsafe { asm!("mov cr4, {}", in(reg) value, options(nomem, nostack, preserves_flags)) }
}

/// Writes extended control register `xcr` (`xsetbv`).
///
/// # Safety
/// CR4.OSXSAVE must be set and the value valid for this CPU (only
/// supported state components, x87 always set, AVX only with SSE), else
/// #GP.
pub unsafe fn xsetbv(xcr: u32, value: u64) {
    // SAFETY: the caller guarantees a valid register and value.
    unsafe {
        asm!("xsetbv", in("ecx") xcr, in("eax") value as u32, in("edx") (value >> 32) as u32,
             options(nomem, nostack, preserves_flags))
    }
}

pub fn read_cr4() -> u64 {
    let value: u64;
    // SAFETY: reading CR4 has no side effects.
    unsafe { asm!("mov {}, cr4", out(reg) value, options(nomem, nostack, preserves_flags)) }
    value
}

/// Reads the time-stamp counter. Under QEMU `-icount shift=0` it counts
/// executed guest instructions exactly, which makes it our cost unit.
pub fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: rdtsc only reads the counter.
    unsafe { asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags)) }
    (u64::from(hi) << 32) | u64::from(lo)
}

pub fn cpuid(leaf: u32, subleaf: u32) -> core::arch::x86_64::CpuidResult {
    core::arch::x86_64::__cpuid_count(leaf, subleaf)
}

/// Whether the CPU supports 1 GiB pages (CPUID 0x8000_0001 EDX bit 26).
pub fn has_1g_pages() -> bool {
    cpuid(0x8000_0000, 0).eax >= 0x8000_0001 && cpuid(0x8000_0001, 0).edx & (1 << 26) != 0
}

pub fn enable_interrupts() {
    // SAFETY: the IDT is loaded before anyone calls this (see arch::init).
    unsafe { asm!("sti", options(nomem, nostack)) }
}

pub fn disable_interrupts() {
    // SAFETY: masking interrupts cannot break memory safety.
    unsafe { asm!("cli", options(nomem, nostack)) }
}

pub fn interrupts_enabled() -> bool {
    let flags: u64;
    // SAFETY: reading RFLAGS has no side effects.
    unsafe { asm!("pushfq; pop {}", out(reg) flags, options(nomem, preserves_flags)) }
    flags & (1 << 9) != 0
}

/// Enables interrupts and halts until the next one, atomically: `sti` takes
/// effect after the following instruction, so no wake-up is lost between them.
pub fn enable_interrupts_and_halt() {
    // SAFETY: see enable_interrupts.
    unsafe { asm!("sti; hlt", options(nomem, nostack)) }
}

pub fn halt() {
    // SAFETY: hlt waits for an interrupt; it cannot break memory safety.
    unsafe { asm!("hlt", options(nomem, nostack, preserves_flags)) }
}

/// Stops this CPU for good.
pub fn halt_forever() -> ! {
    loop {
        disable_interrupts();
        halt();
    }
}

/// Flushes the whole TLB including global entries by toggling CR4.PGE.
pub fn flush_tlb_all() {
    let cr4 = read_cr4();
    // SAFETY: toggling PGE only invalidates TLB entries; the page tables
    // themselves are unchanged.
    unsafe {
        asm!("mov cr4, {}", "mov cr4, {}", in(reg) cr4 & !(1 << 7), in(reg) cr4, options(nostack, preserves_flags));
    }
}

/// Invalidates the TLB entry for the page containing `virt` (this CPU).
pub fn invlpg(virt: u64) {
    // SAFETY: invalidating a TLB entry cannot break memory safety; the next
    // access walks the page tables again.
    unsafe { asm!("invlpg [{}]", in(reg) virt, options(nostack, preserves_flags)) }
}

/// Reads a 16-bit value from an I/O port.
///
/// # Safety
/// As for [`inb`].
pub unsafe fn inw(port: u16) -> u16 {
    let value: u16;
    // SAFETY: the caller guarantees the port read is valid.
    unsafe {
        asm!("in ax, dx", out("ax") value, in("dx") port, options(nomem, nostack, preserves_flags))
    }
    value
}

/// Reads a 32-bit value from an I/O port.
///
/// # Safety
/// As for [`inb`].
pub unsafe fn inl(port: u16) -> u32 {
    let value: u32;
    // SAFETY: the caller guarantees the port read is valid.
    unsafe {
        asm!("in eax, dx", out("eax") value, in("dx") port, options(nomem, nostack, preserves_flags))
    }
    value
}

/// Writes a 32-bit value to an I/O port.
///
/// # Safety
/// As for [`outb`].
pub unsafe fn outl(port: u16, value: u32) {
    // SAFETY: the caller guarantees the port write is valid.
    unsafe {
        asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack, preserves_flags))
    }
}
