//! The Status session: what init knows about the components it runs —
//! for a status page (the HTTP server's, issue 17) or a shell. Served by
//! init itself, like `Rom`: a component gets it only with a `Status`
//! route to `parent` and `Status` in the scenario's `parent_provides`.
//! Every figure is measured or configured, none estimated:
//!
//! - the component's name, state and restarts (init's supervision);
//! - its RAM and capability quotas (its scenario entry);
//! - its CPU time: the kernel's sampled CPU time of its main thread
//!   (`ThreadCpuTime`: timer ticks that found it running, 10 ms each),
//!   summed over its restarts. Threads a component makes itself are not
//!   counted (init does not hold them);
//! - what it uses of its quotas while it runs (`Usage`): the bytes of its
//!   RAM quota no longer free to retype — its objects, their alignment
//!   gaps, and what it donated to the providers of its sessions — and the
//!   full slots of its capability table.
//!
//! | opcode | label | words | reply |
//! |--------|-------|-------|-------|
//! | [`COUNT`] | `COUNT` | — | [`OK`], word 0: the number of components |
//! | [`COMPONENT`] | `COMPONENT` | word 0: index (from 0, start order) | [`OK`], words: RAM quota (bytes), capability quota, CPU time (ms), restarts + state × 2^32; or [`NOT_FOUND`] past the end |
//! | [`NAME`] | `NAME` | word 0: index | [`OK`], words: the name (`interfaces::session::pack`); or [`NOT_FOUND`] |
//! | [`USE`] | `USE` | word 0: index | [`OK`], words: RAM quota in use (bytes), capability slots in use, each [`UNKNOWN_USE`] when it is not running; or [`NOT_FOUND`] |
//! | [`INIT`] | `INIT` | — | [`OK`], words: bytes of init's own memory (its untyped pool, the components' blocks among it) in use, the pool's bytes (the kernel's `Usage` of each piece, summed) |
//!
//! A component that is removed by a config update leaves the list; indices
//! are a snapshot, so a client reads `COUNT` and then each index, and
//! takes `NOT_FOUND` as the end.

use abi::Error;
use alloc::string::String;
use interfaces::session::unpack;

use super::{Interface, Session};

/// The Status interface.
pub struct Status;

impl Interface for Status {
    const NAME: &'static str = "Status";
}

/// The number of components.
pub const COUNT: u64 = 1;
/// One component's figures.
pub const COMPONENT: u64 = 2;
/// One component's name.
pub const NAME: u64 = 3;
/// What one component uses of its quotas.
pub const USE: u64 = 4;
/// Init's own memory: what of its pool is in use.
pub const INIT: u64 = 5;
/// A figure of [`USE`]'s reply that is not known (the component is not
/// running).
pub const UNKNOWN_USE: u64 = u64::MAX;
/// The reply: done.
pub const OK: u64 = 0;
/// The reply to an unknown opcode.
pub const UNKNOWN: u64 = 0xe0;
/// The reply: no component at that index.
pub const NOT_FOUND: u64 = 0xe1;

/// A component's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Started and not finished.
    Running,
    /// Finished; init restarts it after its back-off.
    Restarting,
    /// Finished for good (exited, faulted without restarts left, or
    /// stopped by a power-off).
    Stopped,
}

impl State {
    /// Its code in [`COMPONENT`]'s reply.
    pub const fn code(self) -> u64 {
        match self {
            State::Running => 0,
            State::Restarting => 1,
            State::Stopped => 2,
        }
    }

    /// The state of code `code`, if it is one.
    pub const fn from_code(code: u64) -> Option<State> {
        match code {
            0 => Some(State::Running),
            1 => Some(State::Restarting),
            2 => Some(State::Stopped),
            _ => None,
        }
    }

    /// Its name, for a page or a log line.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Restarting => "restarting",
            State::Stopped => "stopped",
        }
    }
}

/// What init reports about one component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentStatus {
    /// Its name in the scenario.
    pub name: String,
    /// Running, waiting for its restart, or stopped.
    pub state: State,
    /// Restarts init made so far.
    pub restarts: u32,
    /// RAM quota, bytes.
    pub ram_quota: u64,
    /// Capability quota, slots.
    pub caps_quota: u64,
    /// Sampled CPU time of its main thread over all its runs, ms.
    pub cpu_ms: u64,
    /// Bytes of its RAM quota in use; `None` when it is not running.
    pub ram_used: Option<u64>,
    /// Slots of its capability table in use; `None` when it is not
    /// running.
    pub caps_used: Option<u64>,
}

/// The words of [`USE`]'s reply for `c` (init's side).
pub fn use_words(c: &ComponentStatus) -> [u64; 4] {
    [
        c.ram_used.unwrap_or(UNKNOWN_USE),
        c.caps_used.unwrap_or(UNKNOWN_USE),
        0,
        0,
    ]
}

/// The words of [`COMPONENT`]'s reply for `c` (init's side).
pub fn component_words(c: &ComponentStatus) -> [u64; 4] {
    [
        c.ram_quota,
        c.caps_quota,
        c.cpu_ms,
        u64::from(c.restarts) | c.state.code() << 32,
    ]
}

impl Session<Status> {
    /// The number of components.
    pub fn count(&self) -> Result<u64, Error> {
        let (reply, w) = self.call(COUNT, [0; 4])?;
        match reply.label() {
            OK => Ok(w[0]),
            _ => Err(Error::InvalidArgument),
        }
    }

    /// Component `index` (start order), `None` past the end.
    pub fn component(&self, index: u64) -> Result<Option<ComponentStatus>, Error> {
        let (reply, w) = self.call(COMPONENT, [index, 0, 0, 0])?;
        match reply.label() {
            OK => {}
            NOT_FOUND => return Ok(None),
            _ => return Err(Error::InvalidArgument),
        }
        let state = State::from_code(w[3] >> 32).ok_or(Error::InvalidArgument)?;
        let (reply, n) = self.call(NAME, [index, 0, 0, 0])?;
        match reply.label() {
            OK => {}
            NOT_FOUND => return Ok(None),
            _ => return Err(Error::InvalidArgument),
        }
        let (bytes, len) = unpack(&n);
        let name = String::from_utf8_lossy(&bytes[..len]).into_owned();
        let (reply, u) = self.call(USE, [index, 0, 0, 0])?;
        match reply.label() {
            OK => {}
            NOT_FOUND => return Ok(None),
            _ => return Err(Error::InvalidArgument),
        }
        let known = |w: u64| (w != UNKNOWN_USE).then_some(w);
        Ok(Some(ComponentStatus {
            name,
            state,
            restarts: w[3] as u32,
            ram_quota: w[0],
            caps_quota: w[1],
            cpu_ms: w[2],
            ram_used: known(u[0]),
            caps_used: known(u[1]),
        }))
    }

    /// Init's own memory (its untyped pool): bytes in use and bytes in
    /// all, as the kernel counts them.
    pub fn init_memory(&self) -> Result<(u64, u64), Error> {
        let (reply, w) = self.call(INIT, [0; 4])?;
        match reply.label() {
            OK => Ok((w[0], w[1])),
            _ => Err(Error::InvalidArgument),
        }
    }

    /// Every component, in start order.
    pub fn components(&self) -> Result<alloc::vec::Vec<ComponentStatus>, Error> {
        let mut all = alloc::vec::Vec::new();
        for i in 0..self.count()? {
            match self.component(i)? {
                Some(c) => all.push(c),
                None => break,
            }
        }
        Ok(all)
    }
}
