//! AMD SVM's MSR permission map (APM vol. 2, 15.11): which bits say
//! "intercept" for an MSR, and the MSRs a guest may read and write
//! without an exit.
//!
//! Invariant: only MSRs that `VMLOAD`/`VMSAVE` switch between host and
//! guest are passed through ([`PASSED_THROUGH`]). The kernel runs a guest
//! between `VMLOAD guest` and `VMSAVE guest` and then `VMLOAD host`, so a
//! guest's write to one of them lands in its own VMCB and the host's value
//! is back before the kernel runs again; every other MSR stays
//! intercepted.

/// MSRs the guest reads and writes directly: the segment bases, the
/// system-call MSRs and SYSENTER's, all in the VMCB state that `VMLOAD`
/// and `VMSAVE` switch. Linux writes them at every boot and FS_BASE at
/// every switch of user thread (without FSGSBASE): an exit each would
/// cost much and protect nothing.
pub const PASSED_THROUGH: [u32; 10] = [
    0x0000_0174, // SYSENTER_CS
    0x0000_0175, // SYSENTER_ESP
    0x0000_0176, // SYSENTER_EIP
    0xc000_0081, // STAR
    0xc000_0082, // LSTAR
    0xc000_0083, // CSTAR
    0xc000_0084, // SFMASK
    0xc000_0100, // FS_BASE
    0xc000_0101, // GS_BASE
    0xc000_0102, // KERNEL_GS_BASE
];

/// Bytes in the MSR permission map (two 4 KiB pages).
pub const MSRPM_BYTES: usize = 8192;

/// Where MSR `msr`'s two bits are in the map: the byte and the bit of its
/// read intercept (the write intercept is the next bit). `None` for MSRs
/// outside the map's three ranges (always intercepted by the hardware).
pub fn msrpm_position(msr: u32) -> Option<(usize, u8)> {
    let (base, range) = match msr {
        0x0000_0000..=0x0000_1fff => (0x0000, msr),
        0xc000_0000..=0xc000_1fff => (0x0800, msr - 0xc000_0000),
        0xc001_0000..=0xc001_1fff => (0x1000, msr - 0xc001_0000),
        _ => return None,
    };
    let bit = range as usize * 2;
    Some((base + bit / 8, (bit % 8) as u8))
}

/// Clears both intercept bits of every MSR of [`PASSED_THROUGH`] in `map`
/// (which starts all ones: everything intercepted).
pub fn pass_through(map: &mut [u8]) {
    for msr in PASSED_THROUGH {
        if let Some((byte, bit)) = msrpm_position(msr) {
            map[byte] &= !(0b11 << bit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_follow_the_apm() {
        // APM vol. 2, table 15-5: MSR 0 at byte 0, C000_0000 at 0x800,
        // C001_0000 at 0x1000, 4 MSRs per byte.
        assert_eq!(msrpm_position(0), Some((0, 0)));
        assert_eq!(msrpm_position(3), Some((0, 6)));
        assert_eq!(msrpm_position(4), Some((1, 0)));
        assert_eq!(msrpm_position(0xc000_0000), Some((0x800, 0)));
        assert_eq!(msrpm_position(0xc000_0082), Some((0x800 + 0x20, 4)));
        assert_eq!(msrpm_position(0xc001_0117), Some((0x1000 + 0x45, 6)));
        assert_eq!(msrpm_position(0x1fff), Some((0x7ff, 6)));
        assert_eq!(msrpm_position(0x2000), None);
        assert_eq!(msrpm_position(0xc000_2000), None);
        assert_eq!(msrpm_position(0x4b56_4d01), None);
    }

    #[test]
    fn only_the_switched_msrs_pass() {
        let mut map = [0xffu8; MSRPM_BYTES];
        pass_through(&mut map);
        let intercepted = |msr: u32| {
            let (byte, bit) = msrpm_position(msr).unwrap();
            (map[byte] >> bit) & 0b11
        };
        for msr in PASSED_THROUGH {
            assert_eq!(intercepted(msr), 0, "{msr:#x}");
        }
        // EFER, the SVM MSRs, APIC base, TSC, PAT: still intercepted.
        for msr in [0xc000_0080, 0xc001_0117, 0xc001_0114, 0x1b, 0x10, 0x277] {
            assert_eq!(intercepted(msr), 0b11, "{msr:#x}");
        }
        let cleared: u32 = map.iter().map(|b| b.count_zeros()).sum();
        assert_eq!(cleared, 2 * PASSED_THROUGH.len() as u32);
    }
}
