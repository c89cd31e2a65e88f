//! Init's arithmetic of quotas and placement: a child's quota untyped
//! and capability table, where it runs and the line init logs for it.
//!
//! Each child is paid from one untyped *block* of its own, which init cuts
//! from its pool when it first starts the child and keeps for it; its size
//! is the memory rule's (`crate::plan::block_bits`): the smallest power of
//! two holding the child's existence (capability table of `caps` × 128
//! bytes, address space, thread, the frames of its ELF image, stack and
//! IPC buffer) and its *quota*: an untyped of 2^[`quota_bits`] bytes, the
//! largest power of two not above `ram_mib` MiB, put into the child's own
//! table (`interfaces::child::UNTYPED`). Whatever the child makes comes
//! from the quota, and the kernel refuses a `Retype` beyond it
//! (`OutOfMemory`): that is the quota's enforcement.
//!
//! Revoking the block destroys every object made from it, which returns
//! all of the child's memory at once (a restart, or the end).
//!
//! Not yet: a `ram_mib` that is not a power of two gets only the power of
//! two below as quota (the kernel's untyped objects are powers of two; a
//! quota split over several untypeds would give the rest), and a block is
//! a power of two, so a quota of 2^n with its existence takes 2^(n+1).

use core::fmt;

use crate::config::{Component, CpuSet};

/// log2 of one MiB.
pub const MIB_BITS: u32 = 20;
/// log2 of what init keeps for itself from the pool (its endpoints).
pub const OWN_BITS: u32 = 20;

/// log2 of the quota untyped of a child with `ram_mib` MiB: the largest
/// power of two not above it (`ram_mib` ≥ 1, as a parsed ROM guarantees;
/// 0 counts as 1).
pub fn quota_bits(ram_mib: u32) -> u32 {
    MIB_BITS + (u32::BITS - 1 - ram_mib.max(1).leading_zeros())
}

/// log2 of the slots of a child's capability table (`caps` is a power of
/// two in a parsed ROM; otherwise the power of two below).
pub fn cspace_bits(caps: u32) -> u32 {
    u32::BITS - 1 - caps.max(1).leading_zeros()
}

/// Where init runs a child: its first thread's CPU and the CPU set its
/// threads may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub cpu: u32,
    pub cpus: CpuSet,
}

impl Placement {
    /// Where `c`'s config asks to run: its `cpu` and `cpus`.
    pub fn asked(c: &Component<'_>) -> Placement {
        Placement {
            cpu: c.cpu.into(),
            cpus: c.cpus,
        }
    }

    /// CPU 0 with the set {0}: where init runs a child whose CPU or set
    /// the kernel refused (the machine has fewer CPUs than the scenario
    /// was checked for).
    pub fn home() -> Placement {
        Placement {
            cpu: 0,
            cpus: CpuSet::single(0),
        }
    }
}

/// Init's log line for component `c` started `at` a placement — where it
/// runs, which is not what its config asks when the kernel refused that:
/// `started NAME (binary B, N MiB, N caps, priority P, cpu C, cpus S)`.
pub struct Started<'c, 'a> {
    pub component: &'c Component<'a>,
    pub at: Placement,
}

impl fmt::Display for Started<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.component;
        write!(
            f,
            "started {} (binary {}, {} MiB, {} caps, priority {}, cpu {}, cpus {})",
            c.name, c.binary, c.ram_mib, c.caps, c.priority, self.at.cpu, self.at.cpus
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{encode, ComponentSpec, OwnCaps, Restart, Rom, SharedEndpoint, Spec};
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn quotas_round_down() {
        assert_eq!(quota_bits(1), 20);
        assert_eq!(quota_bits(2), 21);
        assert_eq!(quota_bits(3), 21);
        assert_eq!(quota_bits(4), 22);
        assert_eq!(quota_bits(65536), 36);
        assert_eq!(cspace_bits(64), 6);
    }

    /// The line names the CPU the child runs on: what it asked for, or
    /// CPU 0 after the kernel refused that (`cpu = 12` on a machine of 8).
    #[test]
    fn started_line_names_the_placement() {
        let cpus = CpuSet::range(12, 2);
        let spec = Spec {
            parent_provides: vec![],
            components: vec![ComponentSpec {
                name: "log".into(),
                binary: "log-service".into(),
                ram_mib: 2,
                caps: 64,
                priority: 90,
                cpu: 12,
                cpus,
                restart: Restart::Never,
                own: OwnCaps::NONE,
                shared_endpoint: SharedEndpoint::Call,
                killable: false,
                provides: vec![],
                routes: vec![],
                devices: vec![],
                config: vec![],
            }],
        };
        let bytes = encode(&spec).unwrap();
        let rom = Rom::parse(&bytes).unwrap();
        let c = rom.components().next().unwrap();
        let asked = Placement::asked(&c);
        assert_eq!(
            Started {
                component: &c,
                at: asked
            }
            .to_string(),
            "started log (binary log-service, 2 MiB, 64 caps, priority 90, cpu 12, cpus 12,13)"
        );
        assert_eq!(
            Started {
                component: &c,
                at: Placement::home()
            }
            .to_string(),
            "started log (binary log-service, 2 MiB, 64 caps, priority 90, cpu 0, cpus 0)"
        );
    }
}
