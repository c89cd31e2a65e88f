//! Capability rights. Deriving a capability (mint) can only remove rights.
//!
//! - endpoints: `WRITE` to send/call, `READ` to receive, `GRANT` to transfer
//!   a capability in a message;
//! - notifications: `WRITE` to signal, `READ` to wait/poll;
//! - frames: `READ`/`WRITE` become the mapping's permissions; `GRANT` is
//!   needed to map it executable (W^X is enforced separately);
//! - everything else: `WRITE` to modify the object.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Rights(u8);

impl Rights {
    pub const NONE: Rights = Rights(0);
    pub const READ: Rights = Rights(1);
    pub const WRITE: Rights = Rights(2);
    pub const GRANT: Rights = Rights(4);
    pub const ALL: Rights = Rights(7);

    /// From an untrusted word: `None` if unknown bits are set.
    pub const fn from_raw(raw: u64) -> Option<Rights> {
        if raw & !(Self::ALL.0 as u64) != 0 {
            return None;
        }
        Some(Rights(raw as u8))
    }

    pub const fn raw(self) -> u64 {
        self.0 as u64
    }

    pub const fn contains(self, other: Rights) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn union(self, other: Rights) -> Rights {
        Rights(self.0 | other.0)
    }

    pub const fn intersection(self, other: Rights) -> Rights {
        Rights(self.0 & other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_logic() {
        let rw = Rights::READ.union(Rights::WRITE);
        assert!(rw.contains(Rights::READ));
        assert!(!rw.contains(Rights::GRANT));
        assert!(Rights::ALL.contains(rw));
        assert_eq!(Rights::from_raw(8), None);
        assert_eq!(Rights::from_raw(3), Some(rw));
        assert_eq!(rw.intersection(Rights::GRANT), Rights::NONE);
    }
}
