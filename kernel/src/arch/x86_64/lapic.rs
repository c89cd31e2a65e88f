//! Local APIC (xAPIC, memory-mapped): timer interrupts and end-of-interrupt.
//!
//! QEMU TCG has no x2APIC and no TSC-deadline timer (measured with QEMU 7.2), so
//! the timer runs in periodic mode, calibrated once against the PIT.

use core::sync::atomic::{AtomicU64, Ordering};

use super::{cpu, pit, trap};
use crate::mm;

const REG_ID: usize = 0x20;
const REG_EOI: usize = 0xb0;
const REG_SPURIOUS: usize = 0xf0;
const REG_TPR: usize = 0x80;
const REG_ICR_LOW: usize = 0x300;
const REG_ICR_HIGH: usize = 0x310;
const REG_LVT_TIMER: usize = 0x320;
const REG_TIMER_INITIAL: usize = 0x380;
const REG_TIMER_CURRENT: usize = 0x390;
const REG_TIMER_DIVIDE: usize = 0x3e0;

const SPURIOUS_ENABLE: u32 = 1 << 8;
const TIMER_PERIODIC: u32 = 1 << 17;
const TIMER_MASKED: u32 = 1 << 16;
const DIVIDE_BY_16: u32 = 0b0011;

/// Virtual address of this machine's LAPIC registers (same for every CPU).
static BASE: AtomicU64 = AtomicU64::new(0);
/// LAPIC timer ticks (after the divider) per millisecond, from calibration.
static TICKS_PER_MS: AtomicU64 = AtomicU64::new(0);

fn read(reg: usize) -> u32 {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: `base` maps the LAPIC's 4 KiB register page uncached (set in
    // init before any use); `reg` is one of the register offsets above.
    unsafe { core::ptr::read_volatile((base as usize + reg) as *const u32) }
}

fn write(reg: usize, value: u32) {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: as in `read`.
    unsafe { core::ptr::write_volatile((base as usize + reg) as *mut u32, value) }
}

/// Maps the LAPIC and enables it on the boot CPU.
pub fn init() -> Result<(), mm::MapMmioError> {
    // SAFETY: IA32_APIC_BASE exists on every x86_64 CPU.
    let apic_base = unsafe { cpu::rdmsr(cpu::MSR_APIC_BASE) };
    let phys = apic_base & 0xf_ffff_f000;
    let virt = mm::map_mmio(phys, 4096)?;
    BASE.store(virt, Ordering::Relaxed);
    enable_on_this_cpu();
    Ok(())
}

/// Enables this CPU's local APIC (the boot CPU: from [`init`]; the others
/// when they start).
pub fn enable_on_this_cpu() {
    write(REG_TPR, 0);
    write(REG_SPURIOUS, SPURIOUS_ENABLE | trap::VECTOR_SPURIOUS as u32);
}

/// This CPU's local APIC id (xAPIC: ID register bits 24..31), or `None`
/// before [`init`].
pub fn id() -> Option<u32> {
    if BASE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    Some(read(REG_ID) >> 24)
}

pub fn end_of_interrupt() {
    write(REG_EOI, 0);
}

/// Measures the timer rate against the PIT (10 ms), falling back to QEMU's
/// fixed 1 GHz APIC bus when there is no PIT (e.g. `microvm`).
pub fn calibrate_timer() -> u64 {
    write(REG_TIMER_DIVIDE, DIVIDE_BY_16);
    write(REG_LVT_TIMER, TIMER_MASKED);
    let per_ms = match pit::measure_10ms(|| write(REG_TIMER_INITIAL, u32::MAX)) {
        Some(()) => u64::from(u32::MAX - read(REG_TIMER_CURRENT)) / 10,
        None => 1_000_000_000 / 16 / 1000,
    };
    write(REG_TIMER_INITIAL, 0);
    let per_ms = per_ms.max(1);
    TICKS_PER_MS.store(per_ms, Ordering::Relaxed);
    per_ms
}

/// Starts periodic timer interrupts at `hz` on this CPU.
pub fn start_periodic_timer(hz: u64) {
    let per_ms = TICKS_PER_MS.load(Ordering::Relaxed);
    let count = (per_ms * 1000 / hz.max(1)).clamp(1, u64::from(u32::MAX)) as u32;
    write(REG_TIMER_DIVIDE, DIVIDE_BY_16);
    write(REG_LVT_TIMER, TIMER_PERIODIC | trap::VECTOR_TIMER as u32);
    write(REG_TIMER_INITIAL, count);
}

/// ICR delivery modes and flags.
const ICR_FIXED: u32 = 0 << 8;
const ICR_INIT: u32 = 5 << 8;
const ICR_STARTUP: u32 = 6 << 8;
const ICR_ASSERT: u32 = 1 << 14;
const ICR_PENDING: u32 = 1 << 12;

/// Sends an inter-processor interrupt (`low`: vector and delivery mode) to
/// the CPU with APIC id `apic_id`, after the previous one left the ICR.
/// Interrupts must be masked (the two ICR writes belong together).
fn send(apic_id: u32, low: u32) {
    while read(REG_ICR_LOW) & ICR_PENDING != 0 {
        core::hint::spin_loop();
    }
    write(REG_ICR_HIGH, apic_id << 24);
    write(REG_ICR_LOW, low);
}

/// Sends fixed interrupt `vector` to the CPU with APIC id `apic_id`.
pub fn send_ipi(apic_id: u32, vector: u8) {
    send(apic_id, ICR_FIXED | ICR_ASSERT | u32::from(vector));
}

/// INIT: resets the CPU into wait-for-SIPI.
pub fn send_init(apic_id: u32) {
    send(apic_id, ICR_INIT | ICR_ASSERT);
}

/// Start-up IPI: the CPU starts in real mode at `page << 12`.
pub fn send_startup(apic_id: u32, page: u8) {
    send(apic_id, ICR_STARTUP | ICR_ASSERT | u32::from(page));
}
