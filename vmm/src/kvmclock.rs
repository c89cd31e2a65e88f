//! kvmclock, the paravirtual clock of KVM that Linux reads its TSC rate
//! from (`arch/x86/kernel/kvmclock.c`, `pvclock.c`): the guest writes a
//! guest-physical address to MSR_KVM_SYSTEM_TIME_NEW, and the VMM puts a
//! `pvclock_vcpu_time_info` there — a TSC value, the guest time in ns at
//! that TSC, and the multiplier and shift that turn TSC ticks into ns.
//! MSR_KVM_WALL_CLOCK_NEW asks for the wall-clock time at guest time 0.
//! The VMM's TSC never changes rate, so the structure is written once per
//! MSR write and marked stable (PVCLOCK_TSC_STABLE_BIT).

pub const MSR_WALL_CLOCK: u32 = 0x4b56_4d00;
pub const MSR_SYSTEM_TIME: u32 = 0x4b56_4d01;
const TSC_STABLE: u8 = 1;

/// `tsc_to_system_mul` and `tsc_shift` for a TSC of `tsc_hz`: ns =
/// ((ticks << shift, or >> -shift) * mul) >> 32, with the largest `mul`
/// below 2^32 (the most precise).
pub fn scale(tsc_hz: u64) -> (u32, i8) {
    let hz = u128::from(tsc_hz.max(1));
    for shift in -31i32..=31 {
        // mul = 1e9 * 2^(32 - shift) / hz
        let e = 32 - shift;
        let mul = (1_000_000_000u128 << e) / hz;
        if mul < 1 << 32 {
            return (mul as u32, shift as i8);
        }
    }
    (u32::MAX, 31)
}

/// ns for `ticks` with a scale (Linux's `pvclock_scale_delta`).
pub fn ticks_to_ns(ticks: u64, mul: u32, shift: i8) -> u64 {
    let t = if shift < 0 {
        ticks >> (-shift) as u32
    } else {
        ticks << shift as u32
    };
    ((u128::from(t) * u128::from(mul)) >> 32) as u64
}

/// The 32-byte `pvclock_vcpu_time_info`: at guest TSC `tsc`, guest time
/// `system_ns`.
pub fn time_info(tsc: u64, system_ns: u64, tsc_hz: u64) -> [u8; 32] {
    let (mul, shift) = scale(tsc_hz);
    let mut b = [0u8; 32];
    b[0..4].copy_from_slice(&2u32.to_le_bytes()); // version: even, stable
    b[8..16].copy_from_slice(&tsc.to_le_bytes());
    b[16..24].copy_from_slice(&system_ns.to_le_bytes());
    b[24..28].copy_from_slice(&mul.to_le_bytes());
    b[28] = shift as u8;
    b[29] = TSC_STABLE;
    b
}

/// The 12-byte `pvclock_wall_clock`: the wall-clock time when guest time
/// was 0.
pub fn wall_clock(boot_unix_ns: u64) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[0..4].copy_from_slice(&2u32.to_le_bytes());
    b[4..8].copy_from_slice(&((boot_unix_ns / 1_000_000_000) as u32).to_le_bytes());
    b[8..12].copy_from_slice(&((boot_unix_ns % 1_000_000_000) as u32).to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_convert_ticks_to_ns() {
        for hz in [
            1_000_000u64,
            1_193_182,
            2_300_000_000,
            3_999_999_999,
            5_000_000_000,
        ] {
            let (mul, shift) = scale(hz);
            assert!(mul >= 1 << 31, "{hz}: mul {mul} not the most precise");
            // One second of ticks is one second, within a part per million.
            let ns = ticks_to_ns(hz, mul, shift);
            assert!(ns.abs_diff(1_000_000_000) < 1_000, "{hz}: {ns}");
        }
    }

    #[test]
    fn structures() {
        let t = time_info(0x1122, 5, 2_000_000_000);
        assert_eq!(u64::from_le_bytes(t[8..16].try_into().unwrap()), 0x1122);
        assert_eq!(t[29], TSC_STABLE);
        assert_eq!(t[0] & 1, 0);
        let w = wall_clock(1_795_796_400_123_456_789);
        assert_eq!(
            u32::from_le_bytes(w[4..8].try_into().unwrap()),
            1_795_796_400
        );
        assert_eq!(
            u32::from_le_bytes(w[8..12].try_into().unwrap()),
            123_456_789
        );
    }
}
