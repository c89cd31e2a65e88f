//! What a guest's `cpuid` answers: the host's leaves (the VMM executes
//! `cpuid` itself) with everything the VMM does not give the guest taken
//! out, and KVM's hypervisor leaves added so that Linux reads the TSC
//! rate from kvmclock and uses the x2APIC without interrupt remapping.
//!
//! Taken out, each for a reason: what the kernel intercepts or cannot
//! switch (SVM, VMX, MONITOR/MWAIT, XSAVE and everything built on it —
//! AVX, AVX-512, protection keys, CET — since the guest's x87/SSE state
//! is switched with the kernel's own XCR0), what needs MSRs the VMM does
//! not emulate (MTRR, machine checks, performance counters, thermal and
//! power management, speculation-control MSRs, TSC_ADJUST), RDTSCP and
//! RDPID (they would read the host's TSC_AUX), 5-level paging and PCID.
//! Added: the hypervisor bit, x2APIC and the TSC-deadline timer (the VMM
//! emulates both), the invariant TSC, one CPU per package with the
//! VCPU's APIC ID.

/// A leaf's four registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    pub eax: u32,
    pub ebx: u32,
    pub ecx: u32,
    pub edx: u32,
}

/// The highest basic and extended leaves a guest sees.
const MAX_BASIC: u32 = 0xd;
const MAX_EXTENDED: u32 = 0x8000_0008;
/// KVM's signature leaf and its feature leaf.
pub const HYPERVISOR_BASE: u32 = 0x4000_0000;
/// kvmclock through the "new" MSRs (0x4b564d00/01) and its stable bit.
pub const KVM_FEATURE_CLOCKSOURCE2: u32 = 1 << 3;
pub const KVM_FEATURE_CLOCKSOURCE_STABLE_BIT: u32 = 1 << 24;

const fn bits(list: &[u32]) -> u32 {
    let mut m = 0;
    let mut i = 0;
    while i < list.len() {
        m |= 1 << list[i];
        i += 1;
    }
    m
}

/// Leaf 1 ECX: kept bits. SSE3, PCLMULQDQ, SSSE3, CX16, SSE4.1, SSE4.2,
/// MOVBE, POPCNT, AES, RDRAND.
const LEAF1_ECX_KEEP: u32 = bits(&[0, 1, 9, 13, 19, 20, 22, 23, 25, 30]);
/// Added: x2APIC (21), TSC deadline (24), hypervisor (31).
const LEAF1_ECX_ADD: u32 = bits(&[21, 24, 31]);
/// Leaf 1 EDX: kept bits. FPU, VME, DE, PSE, TSC, MSR, PAE, CX8, APIC,
/// SEP, PGE, CMOV, PAT, PSE36, CLFSH, MMX, FXSR, SSE, SSE2.
const LEAF1_EDX_KEEP: u32 = bits(&[
    0, 1, 2, 3, 4, 5, 6, 8, 9, 11, 13, 15, 16, 17, 19, 23, 24, 25, 26,
]);
/// Leaf 7.0 EBX: kept bits. FSGSBASE, BMI1, SMEP, BMI2, ERMS, RDSEED,
/// ADX, SMAP, CLFLUSHOPT, CLWB, SHA.
const LEAF7_EBX_KEEP: u32 = bits(&[0, 3, 7, 8, 9, 18, 19, 20, 23, 24, 29]);
/// Leaf 7.0 ECX: kept bits. UMIP... none that need state: only
/// VAES/VPCLMULQDQ need AVX, so nothing but UMIP (2) is kept.
const LEAF7_ECX_KEEP: u32 = bits(&[2]);
/// Extended leaf 1 ECX: LAHF/SAHF, ABM/LZCNT, SSE4A, misaligned SSE,
/// PREFETCHW.
const EXT1_ECX_KEEP: u32 = bits(&[0, 5, 6, 7, 8]);
/// Extended leaf 1 EDX: the leaf-1 bits AMD repeats and SYSCALL, NX,
/// MMXEXT, FFXSR, 1 GiB pages, long mode.
const EXT1_EDX_KEEP: u32 = LEAF1_EDX_KEEP & !bits(&[11, 16]) | bits(&[11, 20, 22, 25, 26, 29]);

/// The guest's answer to `cpuid` with `leaf` and `subleaf` on the VCPU
/// with APIC ID `apic_id`; `host` executes `cpuid` on the host.
pub fn guest(leaf: u32, subleaf: u32, apic_id: u32, host: impl Fn(u32, u32) -> Regs) -> Regs {
    let zero = Regs::default();
    match leaf {
        0 => {
            let h = host(0, 0);
            Regs {
                eax: h.eax.min(MAX_BASIC),
                ..h
            }
        }
        1 => {
            let h = host(1, 0);
            Regs {
                eax: h.eax,
                // CLFLUSH line size (bits 8..16) kept, one logical CPU,
                // the APIC ID.
                ebx: (h.ebx & 0xff00) | 1 << 16 | (apic_id & 0xff) << 24,
                ecx: (h.ecx & LEAF1_ECX_KEEP) | LEAF1_ECX_ADD,
                edx: h.edx & LEAF1_EDX_KEEP,
            }
        }
        7 if subleaf == 0 => {
            let h = host(7, 0);
            Regs {
                eax: 0,
                ebx: h.ebx & LEAF7_EBX_KEEP,
                ecx: h.ecx & LEAF7_ECX_KEEP,
                edx: 0,
            }
        }
        // Topology: one thread per core, one core per package.
        0xb => {
            let (shift, kind) = match subleaf {
                0 => (0, 1),
                1 => (0, 2),
                _ => (0, 0),
            };
            Regs {
                eax: shift,
                ebx: u32::from(kind != 0),
                ecx: (subleaf & 0xff) | kind << 8,
                edx: apic_id,
            }
        }
        // Deterministic cache parameters: the host's, with one thread
        // sharing each cache and one core per package.
        4 => {
            let h = host(4, subleaf);
            Regs {
                eax: h.eax & 0x3ff,
                ..h
            }
        }
        // Thermal and power, performance monitoring, XSAVE: none.
        HYPERVISOR_BASE => Regs {
            eax: HYPERVISOR_BASE + 1,
            ebx: u32::from_le_bytes(*b"KVMK"),
            ecx: u32::from_le_bytes(*b"VMKV"),
            edx: u32::from_le_bytes(*b"M\0\0\0"),
        },
        0x4000_0001 => Regs {
            eax: KVM_FEATURE_CLOCKSOURCE2 | KVM_FEATURE_CLOCKSOURCE_STABLE_BIT,
            ..zero
        },
        0x8000_0000 => {
            let h = host(leaf, 0);
            Regs {
                eax: h.eax.min(MAX_EXTENDED),
                ..h
            }
        }
        0x8000_0001 => {
            let h = host(leaf, 0);
            Regs {
                eax: h.eax,
                ebx: 0,
                ecx: h.ecx & EXT1_ECX_KEEP,
                edx: h.edx & EXT1_EDX_KEEP,
            }
        }
        // Brand string and caches.
        0x8000_0002..=0x8000_0006 => host(leaf, 0),
        // Invariant TSC: the guest's TSC is the host's plus an offset.
        0x8000_0007 => Regs {
            edx: 1 << 8,
            ..zero
        },
        // Address sizes only: one core, no speculation-control features.
        0x8000_0008 => Regs {
            eax: host(leaf, 0).eax & 0xffff,
            ..zero
        },
        _ => zero,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host with every feature bit set and leaf 0 saying 0x16 leaves.
    fn host(leaf: u32, _sub: u32) -> Regs {
        match leaf {
            0 => Regs {
                eax: 0x16,
                ebx: 0x6874_7541,
                ecx: 0x444d_4163,
                edx: 0x6974_6e65,
            },
            0x8000_0000 => Regs {
                eax: 0x8000_001f,
                ..Regs::default()
            },
            _ => Regs {
                eax: u32::MAX,
                ebx: u32::MAX,
                ecx: u32::MAX,
                edx: u32::MAX,
            },
        }
    }

    #[test]
    fn hides_what_the_vmm_does_not_give() {
        let l1 = guest(1, 0, 3, host);
        for (bit, what) in [
            (5, "vmx"),
            (3, "monitor"),
            (26, "xsave"),
            (27, "osxsave"),
            (28, "avx"),
            (17, "pcid"),
        ] {
            assert_eq!(l1.ecx >> bit & 1, 0, "{what}");
        }
        for (bit, what) in [(21, "x2apic"), (24, "tsc-deadline"), (31, "hypervisor")] {
            assert_eq!(l1.ecx >> bit & 1, 1, "{what}");
        }
        assert_eq!(l1.edx >> 12 & 1, 0, "mtrr");
        assert_eq!(l1.edx >> 14 & 1, 0, "mca");
        assert_eq!(l1.edx >> 9 & 1, 1, "apic");
        assert_eq!(l1.ebx >> 24, 3);
        let ext = guest(0x8000_0001, 0, 0, host);
        assert_eq!(ext.ecx >> 2 & 1, 0, "svm");
        assert_eq!(ext.edx >> 27 & 1, 0, "rdtscp");
        assert_eq!(ext.edx >> 29 & 1, 1, "long mode");
        assert_eq!(ext.edx >> 20 & 1, 1, "nx");
        let l7 = guest(7, 0, 0, host);
        assert_eq!(l7.ebx >> 5 & 1, 0, "avx2");
        assert_eq!(l7.ebx >> 16 & 1, 0, "avx512f");
        assert_eq!(l7.ecx >> 3 & 1, 0, "pku");
        assert_eq!(l7.ecx >> 22 & 1, 0, "rdpid");
        assert_eq!(l7.edx, 0);
        assert_eq!(guest(0xd, 0, 0, host), Regs::default());
        assert_eq!(guest(0x8000_000a, 0, 0, host), Regs::default());
    }

    #[test]
    fn says_kvm_with_kvmclock() {
        let sig = guest(HYPERVISOR_BASE, 0, 0, host);
        let mut name = [0u8; 12];
        name[..4].copy_from_slice(&sig.ebx.to_le_bytes());
        name[4..8].copy_from_slice(&sig.ecx.to_le_bytes());
        name[8..].copy_from_slice(&sig.edx.to_le_bytes());
        assert_eq!(&name, b"KVMKVMKVM\0\0\0");
        assert_eq!(
            guest(0x4000_0001, 0, 0, host).eax & KVM_FEATURE_CLOCKSOURCE2,
            KVM_FEATURE_CLOCKSOURCE2
        );
        assert_eq!(guest(0, 0, 0, host).eax, MAX_BASIC);
        assert_eq!(guest(0x8000_0000, 0, 0, host).eax, MAX_EXTENDED);
        assert_eq!(guest(0xb, 0, 5, host).edx, 5);
        assert_eq!(guest(0xb, 1, 5, host).ecx, 1 | 2 << 8);
    }
}
