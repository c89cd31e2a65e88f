//! The Input session: key presses and releases (with the character the
//! keymap gives), pointer motion and mouse buttons, queued by the
//! provider and fetched by the client (Genode's `input_session`). The
//! provider is an input driver (`components/drivers/ps2`) or, for each of
//! its clients, the GUI multiplexer (which passes input only to the
//! focused client).
//!
//! | opcode | words | reply |
//! |--------|-------|-------|
//! | [`NOTIFIER`] | — | [`OK`] with one capability: the session's notification, read-only (the caller names an empty receive slot), signalled whenever events are queued; [`NO_RESOURCES`] |
//! | [`EVENTS`] | — | [`OK`], words: up to [`EVENTS_PER_CALL`] events, oldest first, each one word ([`Event::word`]); a word of 0 is none |
//!
//! The client waits on the notification, then calls `EVENTS` until a
//! reply has fewer than four (rule: a signal means "look", never "how
//! many"). A provider keeps a bounded queue per session: when a client
//! does not fetch, the oldest events are dropped (and counted), never the
//! provider's memory. Words that name no event are dropped by the client
//! ([`Event::from_word`]). Quota: none (the provider's queues are small
//! and bounded).

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use abi::caddr::own;
use abi::{CapSlot, Error, MsgInfo, ObjectType, Rights};

use super::{Interface, Session};
use crate::server::answer;
use crate::syscall::{self, Words};
use crate::transfer;

pub use interfaces::input::*;

/// The Input interface.
pub struct Input;

impl Interface for Input {
    const NAME: &'static str = "Input";
}

impl Session<Input> {
    /// Asks for the session's notification into the empty own slot
    /// `slot`; the read-only capability to wait on.
    pub fn notifier(&self, slot: u32) -> Result<CapSlot, Error> {
        let info = MsgInfo::new(NOTIFIER, 4, 0).unwrap_or_default();
        let (reply, _) = transfer::call_for_cap(self.cap(), info, [0; 4], own(slot))?;
        match reply.label() {
            OK if reply.caps() == 1 => Ok(own(slot)),
            _ => Err(Error::InvalidState),
        }
    }

    /// Every event queued now, oldest first (several calls when more than
    /// [`EVENTS_PER_CALL`] wait).
    pub fn events(&self) -> Result<Vec<Event>, Error> {
        let mut all = Vec::new();
        loop {
            let (reply, words) = self.call(EVENTS, [0; 4])?;
            if reply.label() != OK {
                return Err(Error::InvalidState);
            }
            let got = words.iter().take_while(|&&w| w != 0).count();
            all.extend(words[..got].iter().filter_map(|&w| Event::from_word(w)));
            if got < EVENTS_PER_CALL {
                return Ok(all);
            }
        }
    }
}

/// Events a provider keeps for a client that does not fetch them.
pub const QUEUE: usize = 256;

/// An Input session as its provider holds it: the client's bounded event
/// queue and its notification (made on `NOTIFIER` in the provider's own
/// slot `slot`, the client's read-only copy in `slot + 1`). Dropping it
/// (the session closed) revokes the notification, so the client's copy
/// goes too.
pub struct ServedQueue {
    queue: VecDeque<Event>,
    dropped: u64,
    slot: u32,
    notify: bool,
    /// Events pushed since the last [`Self::publish`].
    fresh: bool,
}

impl ServedQueue {
    /// A session's queue using the provider's own slots `slot` and
    /// `slot + 1` for its notification.
    pub fn new(slot: u32) -> ServedQueue {
        ServedQueue {
            queue: VecDeque::new(),
            dropped: 0,
            slot,
            notify: false,
            fresh: false,
        }
    }

    /// Queues `e`; the oldest event goes when [`QUEUE`] are waiting.
    pub fn push(&mut self, e: Event) {
        if self.queue.len() == QUEUE {
            self.queue.pop_front();
            self.dropped += 1;
        }
        self.queue.push_back(e);
        self.fresh = true;
    }

    /// Signals the client once for everything pushed since the last call.
    pub fn publish(&mut self) {
        if core::mem::take(&mut self.fresh) && self.notify {
            let _ = syscall::signal(own(self.slot));
        }
    }

    /// Events dropped because the client did not fetch them.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The reply to request `op` of the session (`NOTIFIER`, `EVENTS`;
    /// anything else `UNKNOWN`).
    pub fn request(&mut self, op: u64) -> (MsgInfo, Words) {
        match op {
            NOTIFIER => match self.notifier() {
                Some(cap) => {
                    transfer::set_send_cap(cap);
                    (MsgInfo::new(OK, 0, 1).unwrap_or_default(), [0; 4])
                }
                None => answer(NO_RESOURCES, [0; 4]),
            },
            EVENTS => {
                let mut words = [0u64; EVENTS_PER_CALL];
                for w in &mut words {
                    match self.queue.pop_front() {
                        Some(e) => *w = e.word(),
                        None => break,
                    }
                }
                answer(OK, words)
            }
            _ => answer(UNKNOWN, [op, 0, 0, 0]),
        }
    }

    /// The notification, made from the provider's own memory on first
    /// use; the client's read-only copy to send.
    fn notifier(&mut self) -> Option<CapSlot> {
        let (n, copy) = (own(self.slot), own(self.slot + 1));
        if !self.notify {
            let untyped = own(interfaces::child::UNTYPED);
            syscall::retype(untyped, ObjectType::Notification, 0, n, 1).ok()?;
            if syscall::cap_mint(n, copy, Rights::READ, 0).is_err() {
                // SAFETY: the notification just made; nothing is mapped.
                let _ = unsafe { syscall::cap_delete(n) };
                return None;
            }
            self.notify = true;
        }
        Some(copy)
    }
}

impl Drop for ServedQueue {
    fn drop(&mut self) {
        if self.notify {
            let (n, copy) = (own(self.slot), own(self.slot + 1));
            // SAFETY: notification capabilities; nothing is mapped.
            unsafe {
                let _ = syscall::cap_revoke(n);
                let _ = syscall::cap_delete(copy);
                let _ = syscall::cap_delete(n);
            }
        }
    }
}
