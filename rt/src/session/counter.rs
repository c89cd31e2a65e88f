//! The Counter session: the smallest stateful interface — each session
//! keeps a running total the client adds to. It exists to test what
//! happens to sessions around their provider: a provider that stops
//! (`counter-service` with a crash count, `scenarios/session-restart.toml`)
//! and a client that reconnects (`counter-client`, [`Session::reopen`]).
//!
//! | opcode | label | words | reply |
//! |--------|-------|-------|-------|
//! | [`ADD`] | `ADD` | word 0: n | [`OK`], word 0: the session's total after adding n |
//!
//! A fresh session starts at 0; a session reopened after its provider
//! restarted is a fresh session (the provider's state died with it).
//! Quota: a client donates a page of RAM and one capability slot per
//! session (`interfaces::session`, "Donation"); `counter-service` makes a
//! notification from it, only to have something to lose when the session
//! closes (the total lives in its session vector). A client opens with
//! `rt::session::open_donating` and a `Donor` of
//! `Donor::bits_for::<Counter>()` bytes.

use abi::{Error, MsgInfo};

use super::{Interface, Session};
use crate::server::answer;
use crate::syscall::Words;

/// The Counter interface.
pub struct Counter;

impl Interface for Counter {
    const NAME: &'static str = "Counter";
    /// A page: the provider makes the session's objects from it.
    const RAM: u64 = 4096;
    /// One slot, for the session's object.
    const CAPS: u32 = 1;
}

/// Adds word 0 to the session's total.
pub const ADD: u64 = 1;
/// The reply to a request served.
pub const OK: u64 = 0;
/// The reply to a request the server does not know.
pub const UNKNOWN: u64 = 0xe0;

/// Why [`Session::add`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterError {
    /// The call failed: the session is broken (its provider stopped).
    Ipc(Error),
    /// The provider answered with this label (`interfaces::session::UNKNOWN_SESSION`
    /// for a session it does not know).
    Refused(u64),
}

impl core::fmt::Display for CounterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CounterError::Ipc(e) => write!(f, "the call failed: {e}"),
            CounterError::Refused(label) => write!(f, "refused (label {label:#x})"),
        }
    }
}

impl Session<Counter> {
    /// Adds `n`; returns the session's new total.
    pub fn add(&self, n: u64) -> Result<u64, CounterError> {
        let (reply, words) = self.call(ADD, [n, 0, 0, 0]).map_err(CounterError::Ipc)?;
        match reply.label() {
            OK => Ok(words[0]),
            other => Err(CounterError::Refused(other)),
        }
    }
}

/// Serves one request of a Counter session whose total is `total`.
pub fn dispatch(total: &mut u64, label: u64, words: Words) -> (MsgInfo, Words) {
    if label != ADD {
        return answer(UNKNOWN, [label, 0, 0, 0]);
    }
    *total = total.wrapping_add(words[0]);
    answer(OK, [*total, 0, 0, 0])
}
