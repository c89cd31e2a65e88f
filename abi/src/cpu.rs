//! CPU sets: the CPUs a thread may place threads on.
//!
//! Every thread has a CPU set (a bit per CPU index). `ThreadSetSchedParams`
//! may put a thread only on a CPU of the *caller's* set and gives it a set
//! that is a subset of the caller's (and holds its CPU); a thread made by
//! `Retype` starts with the set of the thread that made it; root's first
//! thread has every CPU online. `CpuSet` returns the caller's own set: that
//! is how a component learns how many CPUs it may use and which (init
//! gives each child the CPUs its scenario entry names, `docs/scenarios.md`).

/// A set of CPU indices, bit `i` for CPU `i`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpuSet(pub u64);

impl CpuSet {
    /// The empty set.
    pub const EMPTY: CpuSet = CpuSet(0);

    /// The set of CPU `cpu` alone (empty for an index beyond 63).
    pub const fn single(cpu: u32) -> CpuSet {
        if cpu < 64 {
            CpuSet(1 << cpu)
        } else {
            CpuSet(0)
        }
    }

    /// CPUs `first .. first + count` (cut at 64).
    pub const fn range(first: u32, count: u32) -> CpuSet {
        let mut bits = 0u64;
        let mut i = first;
        while i < first.saturating_add(count) && i < 64 {
            bits |= 1 << i;
            i += 1;
        }
        CpuSet(bits)
    }

    pub const fn bits(self) -> u64 {
        self.0
    }

    pub const fn count(self) -> u32 {
        self.0.count_ones()
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub const fn contains(self, cpu: u32) -> bool {
        cpu < 64 && self.0 & (1 << cpu) != 0
    }

    pub const fn is_subset_of(self, other: CpuSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The `n`th CPU of the set in index order (`n` from 0), if the set has
    /// that many: how a component places its threads "on its second CPU".
    pub const fn nth(self, n: u32) -> Option<u32> {
        let mut bits = self.0;
        let mut seen = 0;
        while bits != 0 {
            let cpu = bits.trailing_zeros();
            if seen == n {
                return Some(cpu);
            }
            seen += 1;
            bits &= bits - 1;
        }
        None
    }

    /// The CPUs in index order.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        (0..64).filter(move |&cpu| self.contains(cpu))
    }
}

/// The CPUs in index order, separated by commas (`1,2`); `none` for the
/// empty set: how logs print a set.
impl core::fmt::Display for CpuSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        for (i, cpu) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{cpu}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_count_order_and_compare() {
        let s = CpuSet::range(1, 2);
        assert_eq!(s, CpuSet(0b110));
        assert_eq!(
            (s.count(), s.nth(0), s.nth(1), s.nth(2)),
            (2, Some(1), Some(2), None)
        );
        assert!(s.contains(2) && !s.contains(0) && !s.contains(64));
        assert!(CpuSet::single(2).is_subset_of(s) && !CpuSet::single(3).is_subset_of(s));
        assert!(CpuSet::EMPTY.is_subset_of(s) && CpuSet::EMPTY.is_empty());
        let mut it = s.iter();
        assert_eq!((it.next(), it.next(), it.next()), (Some(1), Some(2), None));
        assert_eq!(CpuSet::range(62, 5), CpuSet(0b11 << 62));
        assert_eq!(CpuSet::single(64), CpuSet::EMPTY);
        assert_eq!(CpuSet(u64::MAX).nth(63), Some(63));
        extern crate std;
        use std::format;
        assert_eq!(
            format!("{s} {} {}", CpuSet::single(0), CpuSet::EMPTY),
            "1,2 0 none"
        );
    }
}
