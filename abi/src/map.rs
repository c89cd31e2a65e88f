//! The attribute word of `Map` (argument 3).
//!
//! ```text
//! bit 0      writable
//! bit 1      executable
//! bits 8..10 cache attribute: 0 write-back, 1 uncached, 2 write-combining,
//!            3 write-through
//! ```
//! Other bits must be 0. A mapping is always readable and user-accessible.
//! Writable needs `WRITE` on the frame capability, executable needs
//! `GRANT`; writable and executable together are refused (W^X).
//!
//! Every mapping lies in `[USER_MAP_START, USER_MAP_END)`: the lowest
//! 64 KiB and the highest page of the lower half are never mapped in any
//! address space (`docs/security.md`).

/// The lowest address a mapping may start at. The first 64 KiB stay
/// unmapped in every address space (Linux's default `mmap_min_addr`), so
/// that a null pointer plus a small offset — in a component or, were
/// there such a bug, in the kernel — always faults and can never be made
/// to point at data or code a component placed there.
pub const USER_MAP_START: u64 = 0x1_0000;

/// The end (exclusive) of the addresses a mapping may cover: the last
/// 4 KiB page below the canonical boundary `0x0000_8000_0000_0000` stays
/// unmapped, so no `syscall` instruction can end at that boundary. Such a
/// `syscall` leaves a non-canonical return address in `rcx`, and an Intel
/// CPU's `sysretq` to it raises #GP in ring 0 on the user's stack
/// (CVE-2012-0217); Linux keeps the same page unmapped for the same reason.
pub const USER_MAP_END: u64 = 0x0000_7fff_ffff_f000;

/// Whether `[start, start + len)` lies inside the mappable range
/// `[USER_MAP_START, USER_MAP_END)` (false when the sum overflows).
pub const fn user_mappable(start: u64, len: u64) -> bool {
    match start.checked_add(len) {
        Some(end) => start >= USER_MAP_START && end <= USER_MAP_END,
        None => false,
    }
}

pub const WRITABLE: u64 = 1 << 0;
pub const EXECUTABLE: u64 = 1 << 1;
pub const CACHE_SHIFT: u32 = 8;
pub const CACHE_MASK: u64 = 0b111 << CACHE_SHIFT;

/// Cache attributes of a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Cache {
    WriteBack = 0,
    Uncached = 1,
    WriteCombining = 2,
    WriteThrough = 3,
}

/// A decoded, valid attribute word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapAttr {
    pub writable: bool,
    pub executable: bool,
    pub cache: Cache,
}

impl MapAttr {
    /// Decodes an untrusted word; `None` for unknown bits, an unknown cache
    /// attribute or writable + executable.
    pub const fn from_raw(raw: u64) -> Option<MapAttr> {
        if raw & !(WRITABLE | EXECUTABLE | CACHE_MASK) != 0 {
            return None;
        }
        let cache = match (raw & CACHE_MASK) >> CACHE_SHIFT {
            0 => Cache::WriteBack,
            1 => Cache::Uncached,
            2 => Cache::WriteCombining,
            3 => Cache::WriteThrough,
            _ => return None,
        };
        let writable = raw & WRITABLE != 0;
        let executable = raw & EXECUTABLE != 0;
        if writable && executable {
            return None;
        }
        Some(MapAttr {
            writable,
            executable,
            cache,
        })
    }

    /// Decodes an untrusted word for a mapping into a guest space
    /// (`ObjectType::GuestSpace`): as [`MapAttr::from_raw`], but writable
    /// and executable together are allowed — guest RAM holds the guest's
    /// code and data, and the host never executes through a guest space.
    pub const fn from_raw_guest(raw: u64) -> Option<MapAttr> {
        let (w, x) = (raw & WRITABLE, raw & EXECUTABLE);
        match MapAttr::from_raw(raw & !EXECUTABLE) {
            Some(attr) => Some(MapAttr {
                writable: w != 0,
                executable: x != 0,
                cache: attr.cache,
            }),
            None => None,
        }
    }

    pub const fn raw(self) -> u64 {
        (if self.writable { WRITABLE } else { 0 })
            | (if self.executable { EXECUTABLE } else { 0 })
            | ((self.cache as u64) << CACHE_SHIFT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappable_range() {
        assert!(!user_mappable(0, 4096));
        assert!(!user_mappable(USER_MAP_START - 4096, 4096));
        assert!(user_mappable(USER_MAP_START, 4096));
        assert!(user_mappable(USER_MAP_END - 4096, 4096));
        assert!(!user_mappable(USER_MAP_END, 4096));
        // A 2 MiB frame at the last 2 MiB-aligned address would cover the
        // last page.
        assert!(!user_mappable(0x0000_7fff_ffe0_0000, 2 << 20));
        assert!(user_mappable(0x0000_7fff_ffc0_0000, 2 << 20));
        assert!(!user_mappable(u64::MAX - 4095, 4096));
        assert!(!user_mappable(USER_MAP_START, u64::MAX));
    }

    #[test]
    fn decode() {
        assert_eq!(
            MapAttr::from_raw(WRITABLE | (1 << CACHE_SHIFT)),
            Some(MapAttr {
                writable: true,
                executable: false,
                cache: Cache::Uncached
            })
        );
        assert_eq!(MapAttr::from_raw(WRITABLE | EXECUTABLE), None);
        assert_eq!(MapAttr::from_raw(4 << CACHE_SHIFT), None);
        assert_eq!(MapAttr::from_raw(1 << 20), None);
        for raw in [0, WRITABLE, EXECUTABLE, 3 << CACHE_SHIFT] {
            assert_eq!(MapAttr::from_raw(raw).unwrap().raw(), raw);
        }
    }
}
