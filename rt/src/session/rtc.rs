//! The Rtc session: the wall-clock date and time, UTC, from the machine's
//! real-time clock. Served by `components/services/rtc` (the CMOS clock's
//! driver; reading the chip and checking the reading is `ucore::rtc`);
//! the FAT service asks it for its files' timestamps.
//!
//! | opcode | label | words | reply |
//! |--------|-------|-------|-------|
//! | [`NOW`] | `NOW` | — | [`OK`], word 0: the date and time ([`Time::pack`]); [`UNREADABLE`] if the clock gave no date |
//! | other | | | [`UNKNOWN`], word 0: the label |
//!
//! The value type is the File system session's [`Time`] (year, month,
//! day, hour, minute, second), so a file system passes a reading on as
//! it came. A reply [`OK`] always carries a real date and time of day
//! ([`ucore::rtc::DateTime::is_valid`]): [`dispatch`] answers
//! [`UNREADABLE`] rather than pass on a server's nonsense, and the client
//! stub checks again ([`RtcError::Invalid`]), since a client trusts no
//! provider's words. Resolution is a second; there is no way to set the
//! clock.
//!
//! Cost: one session RPC; the server reads the chip for each `NOW`
//! (some thirty port accesses, more when it waits out the chip's once-a-
//! second update). Quota: none (the server keeps no per-session state).

use core::fmt;

use abi::{Error, MsgInfo};
use ucore::rtc::DateTime;

use super::fs::Time;
use super::{Interface, Session};
use crate::server::answer;
use crate::syscall::Words;

/// The Rtc interface.
pub struct Rtc;

impl Interface for Rtc {
    const NAME: &'static str = "Rtc";
}

/// Opcode: the date and time now.
pub const NOW: u64 = 1;
/// The reply to a request served.
pub const OK: u64 = 0;
/// The reply to a request the server does not know.
pub const UNKNOWN: u64 = 0xe0;
/// Refused: the clock could not be read, or read no date (the server
/// logs why).
pub const UNREADABLE: u64 = 0xe1;

/// Why [`Session::now`] has no time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtcError {
    /// The call failed: the session is broken (its provider stopped).
    Ipc(Error),
    /// The provider answered with this label ([`UNREADABLE`], ...).
    Refused(u64),
    /// The provider answered [`OK`] with this word, which is no date.
    Invalid(u64),
}

impl fmt::Display for RtcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RtcError::Ipc(e) => write!(f, "the call failed: {e}"),
            RtcError::Refused(UNREADABLE) => f.write_str("refused: the clock reads no date"),
            RtcError::Refused(UNKNOWN) => f.write_str("refused: unknown request"),
            RtcError::Refused(label) => write!(f, "refused (label {label:#x})"),
            RtcError::Invalid(w) => write!(f, "the provider answered no date ({w:#x})"),
        }
    }
}

impl From<DateTime> for Time {
    fn from(d: DateTime) -> Time {
        Time {
            year: d.year,
            month: d.month,
            day: d.day,
            hour: d.hour,
            minute: d.minute,
            second: d.second,
        }
    }
}

/// Whether `t` is a real date and time of day.
pub fn is_valid(t: &Time) -> bool {
    DateTime {
        year: t.year,
        month: t.month,
        day: t.day,
        hour: t.hour,
        minute: t.minute,
        second: t.second,
    }
    .is_valid()
}

impl Session<Rtc> {
    /// The date and time now, UTC.
    pub fn now(&self) -> Result<Time, RtcError> {
        let (reply, words) = self.call(NOW, [0; 4]).map_err(RtcError::Ipc)?;
        match reply.label() {
            OK => {
                let t = Time::unpack(words[0]);
                match is_valid(&t) && t.pack() == words[0] {
                    true => Ok(t),
                    false => Err(RtcError::Invalid(words[0])),
                }
            }
            other => Err(RtcError::Refused(other)),
        }
    }
}

/// What an Rtc server does.
pub trait Server {
    /// The date and time now, UTC; `None` if the clock has none (the
    /// server says why in its log).
    fn now(&mut self) -> Option<Time>;
}

/// Serves one request of an Rtc session: the reply to send.
pub fn dispatch(server: &mut impl Server, label: u64, _words: Words) -> (MsgInfo, Words) {
    match label {
        NOW => match server.now().filter(is_valid) {
            Some(t) => answer(OK, [t.pack(), 0, 0, 0]),
            None => answer(UNREADABLE, [0; 4]),
        },
        _ => answer(UNKNOWN, [label, 0, 0, 0]),
    }
}
