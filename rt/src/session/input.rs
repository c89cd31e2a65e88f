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

use alloc::vec::Vec;

use abi::caddr::own;
use abi::{CapSlot, Error, MsgInfo};

use super::{Interface, Session};
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
