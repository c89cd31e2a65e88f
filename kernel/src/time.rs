//! Kernel time: the periodic tick that drives preemption and timeouts.

use core::sync::atomic::{AtomicU64, Ordering};

/// Timer interrupts per second.
pub const HZ: u64 = 100;

static TICKS: AtomicU64 = AtomicU64::new(0);

/// A LAPIC timer interrupt on this CPU: the boot CPU's count the time
/// (every CPU's timer preempts its own threads).
pub fn on_timer_tick() {
    if crate::arch::percpu::this_cpu_index() == 0 {
        TICKS.fetch_add(1, Ordering::Relaxed);
        trace!(on_tick(ticks()));
    }
}

/// Timer ticks since the timer was started.
pub fn ticks() -> u64 {
    TICKS.load(Ordering::Relaxed)
}
