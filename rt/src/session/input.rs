//! The Input session: key presses and releases (with the character the
//! keymap gives), pointer motion and mouse buttons, queued by the
//! provider and fetched by the client (Genode's `input_session`). The
//! provider is an input driver (`components/drivers/ps2`; a tablet's,
//! `components/drivers/virtio-input`, under the name [`Pointer`]) or,
//! for each of its clients, the GUI multiplexer (which passes input only
//! to the focused client). A driver serves its one session with
//! [`serve_one`].
//!
//! | opcode | words | reply |
//! |--------|-------|-------|
//! | [`NOTIFIER`] | — | [`OK`] with one capability: the session's notification, read-only (the caller names an empty receive slot), signalled whenever events are queued (and by the parent, with `PROVIDER_GONE`, when the provider stops) |
//! | [`EVENTS`] | — | [`OK`], words: up to [`EVENTS_PER_CALL`] events, oldest first, each one word ([`Event::word`]); a word of 0 is none |
//!
//! The client waits on the notification, then calls `EVENTS` until a
//! reply has fewer than four (rule: a signal means "look", never "how
//! many"). A provider keeps a bounded queue per session: when a client
//! does not fetch, the oldest events are dropped (and counted), never the
//! provider's memory. Words that name no event are dropped by the client
//! ([`Event::from_word`]).
//!
//! **Quota**: one page and two slots ([`Input::RAM`], [`Input::CAPS`]).
//! The provider makes the session's notification from the donation at
//! open (donated slot 0, the client's read-only copy in slot 1) and names
//! it the session's wake notification (`Donated::set_wake`), as Block and
//! Nic sessions do: the notification is the client's memory, so it
//! outlives the provider, and when the provider stops the parent signals
//! it with `interfaces::session::PROVIDER_GONE` — a client waiting for
//! keys learns at once that its driver is gone and reopens the session
//! ([`Session::reopen`]; the GUI multiplexer does, docs/display.md). The
//! provider's queue itself is small, bounded and its own.

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
    /// The session's notification.
    const RAM: u64 = 4096;
    /// The notification and the client's read-only copy of it.
    const CAPS: u32 = 2;
}

/// A pointing device's input: the Input protocol under another name
/// (as `log::Console` is LOG's), served by a tablet's driver
/// (`components/drivers/virtio-input`: [`Event::Absolute`] and buttons).
/// Under its own name so that the GUI multiplexer can route `Input` to
/// the keyboard's driver and `Pointer` to the tablet's at once (a route
/// names one provider per interface).
pub struct Pointer;

impl Interface for Pointer {
    const NAME: &'static str = "Pointer";
    const RAM: u64 = Input::RAM;
    const CAPS: u32 = Input::CAPS;
}

/// The interfaces that speak the Input protocol.
pub trait InputProtocol: Interface {}
impl InputProtocol for Input {}
impl InputProtocol for Pointer {}

/// The donated slot of the session's notification.
const SLOT_NOTIFY: u32 = 0;
/// The donated slot of the client's read-only copy.
const SLOT_CLIENT_READ: u32 = 1;

/// Whether a word of the session's notification says the provider
/// stopped (the parent's `interfaces::session::PROVIDER_GONE`): the
/// session is to be reopened.
pub fn provider_gone(word: u64) -> bool {
    word & interfaces::session::PROVIDER_GONE != 0
}

impl<I: InputProtocol> Session<I> {
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
/// queue and its notification (made from the session's donation at open,
/// module doc). The objects are the client's: they go when it revokes
/// its donation.
pub struct ServedQueue {
    queue: VecDeque<Event>,
    dropped: u64,
    donated: super::Donated,
    /// Events pushed since the last [`Self::publish`].
    fresh: bool,
}

impl ServedQueue {
    /// A session's queue: makes its notification from `donated` and names
    /// it the wake notification; the error says which step failed.
    pub fn open(donated: super::Donated) -> Result<ServedQueue, &'static str> {
        let notify = donated.slot(SLOT_NOTIFY);
        syscall::retype(donated.untyped(), ObjectType::Notification, 0, notify, 1)
            .map_err(|_| "the donation holds no notification")?;
        syscall::cap_mint(notify, donated.slot(SLOT_CLIENT_READ), Rights::READ, 0)
            .map_err(|_| "minting the client's notification failed")?;
        // The parent wakes the client through it when this provider stops
        // (`interfaces::session`, "The provider's death").
        donated
            .set_wake(notify)
            .map_err(|_| "copying the notification to the wake slot failed")?;
        Ok(ServedQueue {
            queue: VecDeque::new(),
            dropped: 0,
            donated,
            fresh: false,
        })
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
        if core::mem::take(&mut self.fresh) {
            let _ = syscall::signal(self.donated.slot(SLOT_NOTIFY));
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
            NOTIFIER => {
                transfer::set_send_cap(self.donated.slot(SLOT_CLIENT_READ));
                (MsgInfo::new(OK, 0, 1).unwrap_or_default(), [0; 4])
            }
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
}

/// Serves one session of `I` at a time for an input driver (ps2,
/// virtio-input) on its endpoint, forever: a second open is refused
/// (`REFUSED_FULL`), so is one without its donation; events while no
/// session is open are dropped. The signals of the thread's bound
/// notification (the driver's interrupts) go to `signalled` with their
/// word and the open session's queue, if any, which it fills and
/// publishes. `driver` names the driver in its log lines (`DRIVER:
/// session for LABEL`; at the close, the events the client lost). Uses
/// own slots `slot` and `slot + 1`.
pub fn serve_one<I: InputProtocol>(
    driver: &str,
    slot: u32,
    mut signalled: impl FnMut(u64, Option<&mut ServedQueue>),
) -> ! {
    use core::cell::RefCell;
    let queue: RefCell<Option<ServedQueue>> = RefCell::new(None);
    /// The one session: dropping it closes it at the driver.
    struct Open<'a>(&'a RefCell<Option<ServedQueue>>, &'a str);
    impl Drop for Open<'_> {
        fn drop(&mut self) {
            if let Some(q) = self.0.borrow_mut().take() {
                crate::println!(
                    "{}: session closed: {} events dropped (queue full)",
                    self.1,
                    q.dropped()
                );
            }
        }
    }
    let mut provider: super::Provider<I, Open<'_>> = super::Provider::new(slot, slot + 2);
    let mut new = |label: &super::Label, donated: Option<super::Donated>| {
        let mut q = queue.borrow_mut();
        if q.is_some() {
            return Err(super::REFUSED_FULL);
        }
        let quota = interfaces::session::REFUSED_QUOTA;
        let opened = donated.ok_or(quota).and_then(|d| {
            ServedQueue::open(d).map_err(|why| {
                crate::println!("{driver}: session for {}: {why}; refused", label.as_str());
                quota
            })
        })?;
        *q = Some(opened);
        crate::println!("{driver}: session for {}", label.as_str());
        Ok(Open(&queue, driver))
    };
    let mut dispatch =
        |_: &super::Label, _: &mut Open<'_>, op, _: Words| match queue.borrow_mut().as_mut() {
            Some(q) => q.request(op),
            None => answer(UNKNOWN, [op, 0, 0, 0]),
        };
    let mut reply = None;
    loop {
        let received = provider.next(reply.take());
        if let Ok((word, info, _)) = received {
            if info.label() == abi::LABEL_NOTIFICATION {
                signalled(word, queue.borrow_mut().as_mut());
                continue;
            }
        }
        reply = provider.handle(received, &mut new, &mut dispatch);
    }
}
