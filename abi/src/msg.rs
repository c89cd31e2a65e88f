//! The message-info word that describes an IPC message (in `rsi`).
//!
//! ```text
//!  63                               16 15     8 7       0
//! +-----------------------------------+--------+---------+
//! |              label (48 bits)      |  caps  | length  |
//! +-----------------------------------+--------+---------+
//! ```
//! `length`: message words (0..=64; the first 4 in registers, the rest in
//! the IPC buffer); `caps`: capabilities transferred (0..=1); `label`: free
//! for the protocol (e.g. the RPC opcode; fault messages use
//! [`crate::fault`] labels).

use crate::{MAX_MESSAGE_CAPS, MAX_MESSAGE_WORDS};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MsgInfo(pub u64);

pub const LABEL_BITS: u32 = 48;
pub const MAX_LABEL: u64 = (1 << LABEL_BITS) - 1;

impl MsgInfo {
    /// Builds a message info; `None` if a field is out of range.
    pub const fn new(label: u64, length: usize, caps: usize) -> Option<MsgInfo> {
        if label > MAX_LABEL || length > MAX_MESSAGE_WORDS || caps > MAX_MESSAGE_CAPS {
            return None;
        }
        Some(MsgInfo(
            (label << 16) | ((caps as u64) << 8) | length as u64,
        ))
    }

    pub const fn label(self) -> u64 {
        self.0 >> 16
    }

    /// Message words as encoded (may exceed the maximum in a hostile word;
    /// use [`MsgInfo::validate`]).
    pub const fn length(self) -> usize {
        (self.0 & 0xff) as usize
    }

    pub const fn caps(self) -> usize {
        ((self.0 >> 8) & 0xff) as usize
    }

    /// Checks a word that came from an untrusted caller.
    pub const fn validate(self) -> Result<MsgInfo, crate::Error> {
        if self.length() > MAX_MESSAGE_WORDS || self.caps() > MAX_MESSAGE_CAPS {
            return Err(crate::Error::InvalidArgument);
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_limits() {
        let m = MsgInfo::new(0xabc, 7, 1).unwrap();
        assert_eq!((m.label(), m.length(), m.caps()), (0xabc, 7, 1));
        assert!(MsgInfo::new(MAX_LABEL + 1, 0, 0).is_none());
        assert!(MsgInfo::new(0, MAX_MESSAGE_WORDS + 1, 0).is_none());
        assert!(MsgInfo::new(0, 0, 2).is_none());
        assert!(MsgInfo(0xff).validate().is_err());
        assert!(MsgInfo(0x200).validate().is_err());
        assert_eq!(
            MsgInfo::new(MAX_LABEL, 64, 1).unwrap().validate(),
            Ok(MsgInfo::new(MAX_LABEL, 64, 1).unwrap())
        );
    }
}
