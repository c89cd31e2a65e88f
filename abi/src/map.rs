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
