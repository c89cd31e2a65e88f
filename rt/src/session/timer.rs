//! The Timer session: the time since the timer started, and one-shot and
//! periodic timeouts signalled on a notification the server makes for the
//! session. Served by `components/services/timer` (the PIT driver); the clock and
//! the timeout bookkeeping are `ucore::timer`.
//!
//! | opcode | label | words | reply |
//! |--------|-------|-------|-------|
//! | [`NOW`] | `NOW` | — | [`OK`], word 0: µs since the timer started |
//! | [`NOTIFIER`] | `NOTIFIER` | — | [`OK`] with one capability: the session's notification, read-only (the caller names an empty slot as its receive slot); [`NO_RESOURCES`] if the server had none to make |
//! | [`ONESHOT`] | `ONESHOT` | word 0: µs (1 ..= `ucore::timer::MAX_US`) | [`OK`], word 0: the timeout's number `k`; bit `1 << k` of the notification is set once, at or after the deadline; [`BAD_DURATION`], [`FULL`] |
//! | [`PERIODIC`] | `PERIODIC` | word 0: the period, µs (`MIN_PERIOD_US` ..= `MAX_US`) | as `ONESHOT`, the bit set once per period until cancelled |
//! | [`CANCEL`] | `CANCEL` | word 0: `k` | [`OK`], or [`NOT_SET`] |
//! | [`CLOCK`] | `CLOCK` | — | [`OK`], word 0: µs since the timer started, word 1: the TSC's rate, ticks per second (0 while the server has not measured it yet) |
//! | other | | | [`UNKNOWN`], word 0: the label |
//!
//! Each session has its own timeouts (`ucore::timer::MAX_TIMEOUTS`) and
//! its own notification; capabilities travel only in replies from the
//! server (`interfaces::child`), so a client first asks for the notification
//! ([`Timer::open`] does) and then waits on it — or, like init, binds it
//! to its thread so its `Recv` returns the bits as a `LABEL_NOTIFICATION`
//! message. A bit says *that* its timeout fired since the last wait, not
//! how often: a periodic timeout that a client does not wait for in time
//! is signalled once (the server counts the periods it skipped).
//!
//! [`Timer::clock_now`] reads the time with the client's own TSC,
//! interpolating from a `CLOCK` answer for up to
//! `ucore::timer::TSC_RESYNC_US` (`ucore::timer`, "A clock without a
//! request per reading"): for a client that reads the clock often, such
//! as a network stack at each poll.
//!
//! Cost: a request is one session RPC; a timeout firing is one `Signal`
//! by the server at a tick. Quota: none yet (the server's notifications
//! come from its own memory).

use core::cell::Cell;
use core::fmt;

use abi::caddr::own;
use abi::{CapSlot, Error, MsgInfo};
use ucore::timer::{TimeoutError, TscClock};

use super::{open, Interface, OpenError, Session};
use crate::server::answer;
use crate::syscall::{self, Words};
use crate::transfer;

/// The Timer interface.
pub struct TimerService;

impl Interface for TimerService {
    const NAME: &'static str = "Timer";
}

/// Opcode: the current time.
pub const NOW: u64 = 1;
/// Opcode: the session's notification.
pub const NOTIFIER: u64 = 2;
/// Opcode: a one-shot timeout.
pub const ONESHOT: u64 = 3;
/// Opcode: a periodic timeout.
pub const PERIODIC: u64 = 4;
/// Opcode: cancel a timeout.
pub const CANCEL: u64 = 5;
/// Opcode: the current time and the TSC's rate.
pub const CLOCK: u64 = 6;
/// The reply to a request served.
pub const OK: u64 = 0;
/// The reply to a request the server does not know.
pub const UNKNOWN: u64 = 0xe0;
/// Refused: 0 µs, more than an hour, or a period shorter than a tick.
pub const BAD_DURATION: u64 = 0xe1;
/// Refused: all the session's timeouts are in use.
pub const FULL: u64 = 0xe2;
/// Refused: no such timeout is set.
pub const NOT_SET: u64 = 0xe3;
/// Refused: the server had no memory or slot for the notification.
pub const NO_RESOURCES: u64 = 0xe4;

/// Why a Timer request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerError {
    /// The session could not be opened.
    Open(OpenError),
    /// The call failed.
    Ipc(Error),
    /// The server refused with this label ([`BAD_DURATION`], ...).
    Refused(u64),
}

impl fmt::Display for TimerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerError::Open(e) => write!(f, "opening the session: {e}"),
            TimerError::Ipc(e) => write!(f, "the call failed: {e}"),
            TimerError::Refused(BAD_DURATION) => f.write_str("refused: bad duration"),
            TimerError::Refused(FULL) => f.write_str("refused: all timeouts in use"),
            TimerError::Refused(NOT_SET) => f.write_str("refused: no such timeout"),
            TimerError::Refused(NO_RESOURCES) => f.write_str("refused: the server has no room"),
            TimerError::Refused(UNKNOWN) => f.write_str("refused: unknown request"),
            TimerError::Refused(l) => write!(f, "refused ({l:#x})"),
        }
    }
}

/// A timeout of a session: its bit is `1 << number`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeout(pub u64);

impl Timeout {
    /// Its bit in the session's notification word.
    pub fn bit(self) -> u64 {
        1u64.checked_shl(self.0 as u32).unwrap_or(0)
    }
}

/// A client's Timer session with its notification.
pub struct Timer {
    session: Session<TimerService>,
    notification: CapSlot,
    /// Bits a wait took from the notification that nobody asked for yet.
    pending: Cell<u64>,
    /// [`Self::clock_now`]'s interpolation.
    clock: Cell<TscClock>,
    /// Requests made (every opcode).
    requests: Cell<u64>,
}

impl Timer {
    /// Opens a Timer session through the parent into the empty slot
    /// `session_slot` and fetches its notification into the empty slot
    /// `notification_slot`.
    pub fn open(session_slot: u32, notification_slot: u32) -> Result<Timer, TimerError> {
        let session = open::<TimerService>(session_slot).map_err(TimerError::Open)?;
        Timer::with_session(session, notification_slot)
    }

    /// Fetches the notification of an open `session` into the empty slot
    /// `notification_slot` (init opens its own session at the provider).
    pub fn with_session(
        session: Session<TimerService>,
        notification_slot: u32,
    ) -> Result<Timer, TimerError> {
        let info = MsgInfo::new(NOTIFIER, 4, 0).unwrap_or_default();
        let (reply, _) =
            transfer::call_for_cap(session.cap(), info, [0; 4], own(notification_slot))
                .map_err(TimerError::Ipc)?;
        match reply.label() {
            OK if reply.caps() == 1 => Ok(Timer {
                session,
                notification: own(notification_slot),
                pending: Cell::new(0),
                clock: Cell::new(TscClock::default()),
                requests: Cell::new(0),
            }),
            OK => Err(TimerError::Refused(NO_RESOURCES)),
            other => Err(TimerError::Refused(other)),
        }
    }

    /// Closes the session (`Session::close`): the provider cancels its
    /// timeouts and revokes its notification, so the copy in this
    /// component's slot goes too (a later `Wait` on it fails).
    pub fn close(self) -> Result<(), Error> {
        self.session.close().map(drop)
    }

    /// The session's notification (read-only).
    pub fn notification(&self) -> CapSlot {
        self.notification
    }

    /// The session capability.
    pub fn session(&self) -> &Session<TimerService> {
        &self.session
    }

    fn request(&self, label: u64, word: u64) -> Result<u64, TimerError> {
        self.request_words(label, word).map(|w| w[0])
    }

    fn request_words(&self, label: u64, word: u64) -> Result<Words, TimerError> {
        self.requests.set(self.requests.get() + 1);
        let (reply, words) = self
            .session
            .call(label, [word, 0, 0, 0])
            .map_err(TimerError::Ipc)?;
        match reply.label() {
            OK => Ok(words),
            other => Err(TimerError::Refused(other)),
        }
    }

    /// Requests made on this session so far.
    pub fn requests(&self) -> u64 {
        self.requests.get()
    }

    /// Microseconds since the timer started, as the server reads them now
    /// (one request).
    pub fn now(&self) -> Result<u64, TimerError> {
        self.request(NOW, 0)
    }

    /// Microseconds since the timer started and the TSC's rate in ticks
    /// per second (0: not measured yet), one `CLOCK` request.
    pub fn clock(&self) -> Result<(u64, u64), TimerError> {
        self.request_words(CLOCK, 0).map(|w| (w[0], w[1]))
    }

    /// Microseconds since the timer started, mostly without a request:
    /// interpolated with this CPU's TSC from the last `CLOCK` answer, which
    /// is asked for again after `ucore::timer::TSC_RESYNC_US`, when the TSC
    /// went back, or at every call while the server knows no rate. Never
    /// less than an earlier answer; within about half a round trip of
    /// [`Self::now`].
    pub fn clock_now(&self) -> Result<u64, TimerError> {
        let mut clock = self.clock.get();
        let now = match clock.now(syscall::rdtsc()) {
            Some(us) => us,
            None => {
                let before = syscall::rdtsc();
                let (us, hz) = self.clock()?;
                let after = syscall::rdtsc();
                clock.anchor(us, hz, before, after)
            }
        };
        self.clock.set(clock);
        Ok(now)
    }

    /// A timeout `us` from now, signalled once.
    pub fn oneshot(&self, us: u64) -> Result<Timeout, TimerError> {
        self.request(ONESHOT, us).map(Timeout)
    }

    /// A timeout every `us`, from now on.
    pub fn periodic(&self, us: u64) -> Result<Timeout, TimerError> {
        self.request(PERIODIC, us).map(Timeout)
    }

    /// Cancels `t`; a bit of it that was already signalled stays pending.
    pub fn cancel(&self, t: Timeout) -> Result<(), TimerError> {
        self.request(CANCEL, t.0).map(|_| ())
    }

    /// Waits until the notification has bits; returns them and the ones
    /// an earlier [`Self::wait_for`] kept.
    pub fn wait(&self) -> Result<u64, TimerError> {
        let kept = self.pending.take();
        if kept != 0 {
            return Ok(kept);
        }
        syscall::wait(self.notification).map_err(TimerError::Ipc)
    }

    /// Waits until `t` fires; other timeouts' bits are kept for later.
    pub fn wait_for(&self, t: Timeout) -> Result<(), TimerError> {
        loop {
            let bits = self.wait()?;
            self.pending.set(bits & !t.bit());
            if bits & t.bit() != 0 {
                return Ok(());
            }
        }
    }

    /// Returns after at least `us` microseconds.
    pub fn sleep(&self, us: u64) -> Result<(), TimerError> {
        let t = self.oneshot(us)?;
        self.wait_for(t)
    }
}

/// What a Timer server does for a session of state `S`.
pub trait Server<S> {
    /// Microseconds since the timer started.
    fn now_us(&mut self) -> u64;
    /// Microseconds since the timer started and the TSC's rate, ticks per
    /// second (0 if unknown).
    fn clock(&mut self) -> (u64, u64);
    /// The slot of a read-only capability to the session's notification,
    /// to send; `None` if there is none.
    fn notifier(&mut self, session: &mut S) -> Option<CapSlot>;
    /// Sets a timeout of the session.
    fn set(&mut self, session: &mut S, us: u64, periodic: bool) -> Result<usize, TimeoutError>;
    /// Cancels timeout `k` of the session.
    fn cancel(&mut self, session: &mut S, k: u64) -> Result<(), TimeoutError>;
}

fn refused(e: TimeoutError) -> (MsgInfo, Words) {
    let label = match e {
        TimeoutError::BadDuration => BAD_DURATION,
        TimeoutError::Full => FULL,
        TimeoutError::NotSet => NOT_SET,
    };
    answer(label, [0; 4])
}

/// Serves one request of a Timer session: the reply to send.
pub fn dispatch<S>(
    server: &mut impl Server<S>,
    session: &mut S,
    label: u64,
    words: Words,
) -> (MsgInfo, Words) {
    match label {
        NOW => answer(OK, [server.now_us(), 0, 0, 0]),
        CLOCK => {
            let (us, hz) = server.clock();
            answer(OK, [us, hz, 0, 0])
        }
        NOTIFIER => match server.notifier(session) {
            Some(cap) => {
                transfer::set_send_cap(cap);
                (MsgInfo::new(OK, 0, 1).unwrap_or_default(), [0; 4])
            }
            None => answer(NO_RESOURCES, [0; 4]),
        },
        ONESHOT | PERIODIC => match server.set(session, words[0], label == PERIODIC) {
            Ok(k) => answer(OK, [k as u64, 0, 0, 0]),
            Err(e) => refused(e),
        },
        CANCEL => match server.cancel(session, words[0]) {
            Ok(()) => answer(OK, [0; 4]),
            Err(e) => refused(e),
        },
        _ => answer(UNKNOWN, [label, 0, 0, 0]),
    }
}
