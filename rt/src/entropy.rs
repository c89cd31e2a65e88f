//! Entropy from the CPU: RDRAND (Intel SDM vol. 1, 7.3.17), which QEMU's
//! `-cpu max` offers (seeded under `cargo xtask run --icount`, so runs
//! repeat). For seeds that must differ from boot to boot — TCP initial
//! sequence numbers, ephemeral ports, DHCP transaction ids — never for
//! keys on its own.

use core::arch::x86_64::{__cpuid, _rdrand64_step};

/// CPUID leaf 1, ECX bit 30: RDRAND.
const RDRAND_BIT: u32 = 1 << 30;
/// RDRAND may fail when its source is drained; Intel recommends 10 tries.
const TRIES: u32 = 10;

/// Whether the CPU has RDRAND.
pub fn has_rdrand() -> bool {
    // CPUID leaf 1 exists on every x86_64 CPU.
    __cpuid(1).ecx & RDRAND_BIT != 0
}

/// One RDRAND: 1 and `value` written, or 0 when the source was drained.
#[target_feature(enable = "rdrand")]
fn step(value: &mut u64) -> i32 {
    _rdrand64_step(value)
}

/// 64 random bits, `None` if the CPU has no RDRAND or it failed
/// [`TRIES`] times in a row.
pub fn rdrand64() -> Option<u64> {
    if !has_rdrand() {
        return None;
    }
    let mut value = 0;
    for _ in 0..TRIES {
        // SAFETY: CPUID said the CPU has RDRAND, the function's target
        // feature.
        if unsafe { step(&mut value) } == 1 {
            return Some(value);
        }
    }
    None
}
