//! Sessions, typed: one place per session interface, and the two loops
//! around it — a client opening a session through its parent, a provider
//! serving sessions the parent opens on it. The protocol (labels, slots,
//! badges) is `abi::session`; the design, with init's routing, is in
//! `docs/architecture.md` ("Sessions and routing").
//!
//! A session interface is a module that defines, in one place:
//!
//! - a type implementing [`Interface`]: its [`Interface::NAME`] is the
//!   session type as the scenario config spells it (`provides`, `routes`);
//! - its RPC opcodes (message labels), as constants;
//! - its client stub: methods on [`Session<ItsType>`] that turn typed
//!   arguments into calls on the session capability;
//! - its server side: a trait with one method per operation and a
//!   `dispatch` function that decodes a request and calls it.
//!
//! [`log`] is the first: Genode's `log_session.h` pattern; [`rom`] and
//! [`timer`] follow it. A server is a
//! [`Provider`] loop with the interface's `dispatch`; a client is
//! [`open`] and the stub.

use core::fmt;
use core::marker::PhantomData;

use abi::caddr::own;
use abi::session::{self as proto, pack, unpack, NAME_BYTES};
use abi::{child, CapSlot, Error, MsgInfo, Rights};

use crate::proto::ping::KERNEL_LABELS;
use crate::syscall::{self, Words};
use crate::transfer;

pub mod log;
pub mod rom;
pub mod timer;

/// A session interface (see the module doc).
pub trait Interface {
    /// The session type, as the scenario config names it.
    const NAME: &'static str;
}

/// An open session of interface `I`: an endpoint capability, badged by
/// the provider for this session.
pub struct Session<I: Interface> {
    cap: CapSlot,
    _interface: PhantomData<I>,
}

impl<I: Interface> Session<I> {
    /// A session whose capability is already in `cap` (init opens its own
    /// sessions at a provider, without asking a parent).
    pub fn from_cap(cap: CapSlot) -> Self {
        Session {
            cap,
            _interface: PhantomData,
        }
    }

    /// The session capability: a plain endpoint capability (for a
    /// benchmark's raw calls on it).
    pub fn cap(&self) -> CapSlot {
        self.cap
    }

    /// Calls the session with `label` and `words`.
    #[inline]
    pub fn call(&self, label: u64, words: Words) -> Result<(MsgInfo, Words), Error> {
        let info = MsgInfo::new(label, 4, 0).ok_or(Error::InvalidArgument)?;
        syscall::call(self.cap, info, words)
    }
}

/// Why [`open`] did not give a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// The config routes no such session type for this component.
    Unrouted,
    /// Routed to the parent, which does not serve it.
    ParentDoesNotServe,
    /// The provider is not there, or refused with this label.
    Provider(u64),
    /// The parent answered something else.
    Unexpected(u64),
    /// The call to the parent failed.
    Ipc(Error),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Unrouted => {
                f.write_str("refused by the parent: not routed for this component")
            }
            OpenError::ParentDoesNotServe => {
                f.write_str("refused by the parent: routed to the parent, which does not serve it")
            }
            OpenError::Provider(0) => f.write_str("refused: the provider is not running"),
            OpenError::Provider(label) => write!(f, "refused by the provider (label {label:#x})"),
            OpenError::Unexpected(label) => {
                write!(f, "unexpected answer {label:#x} from the parent")
            }
            OpenError::Ipc(e) => write!(f, "the call to the parent failed: {e}"),
        }
    }
}

/// Asks the parent (at `child::PARENT`) for a session of interface `I`;
/// the session capability lands in `slot`, an empty slot of the caller's.
pub fn open<I: Interface>(slot: u32) -> Result<Session<I>, OpenError> {
    let info = MsgInfo::new(proto::OPEN, 4, 0).unwrap_or_default();
    let (reply, words) = transfer::call_for_cap(own(child::PARENT), info, pack(I::NAME), own(slot))
        .map_err(OpenError::Ipc)?;
    match reply.label() {
        proto::OK if reply.caps() == 1 => Ok(Session {
            cap: own(slot),
            _interface: PhantomData,
        }),
        proto::REFUSED_UNROUTED => Err(OpenError::Unrouted),
        proto::REFUSED_PARENT => Err(OpenError::ParentDoesNotServe),
        proto::REFUSED_PROVIDER => Err(OpenError::Provider(words[0])),
        other => Err(OpenError::Unexpected(other)),
    }
}

/// The client label the parent gave a session: the client's name as
/// configured, cut to `abi::session::NAME_BYTES` bytes.
#[derive(Clone, Copy)]
pub struct Label {
    bytes: [u8; NAME_BYTES],
    len: usize,
}

impl Label {
    /// The label as text (`?` if the parent sent bytes that are not UTF-8).
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("?")
    }
}

/// A provider of interface `I` on its endpoint (`child::SERVICE_ENDPOINT`,
/// init's per-provider endpoint): sessions get badges 1, 2, ... and each
/// a capability slot of the provider's from `first_slot` on, up to
/// `end_slot` (the provider keeps its minted capability: the client's is
/// derived from it).
pub struct Provider<I: Interface, S> {
    ep: CapSlot,
    next_slot: u32,
    end_slot: u32,
    sessions: alloc::vec::Vec<(Label, S)>,
    _interface: PhantomData<I>,
}

/// Refusal label of a provider that has no slot left for a session.
pub const REFUSED_FULL: u64 = 0x5e55_0f01;

impl<I: Interface, S> Provider<I, S> {
    /// A provider on `child::SERVICE_ENDPOINT` minting session capabilities
    /// into slots `first_slot..end_slot`.
    pub fn new(first_slot: u32, end_slot: u32) -> Self {
        Provider {
            ep: own(child::SERVICE_ENDPOINT),
            next_slot: first_slot,
            end_slot,
            sessions: alloc::vec::Vec::new(),
            _interface: PhantomData,
        }
    }

    /// Serves forever: the parent's `OPEN_SESSION` (badge 0) makes a
    /// session with state `new(label)`; a client's request (its session's
    /// badge) goes to `dispatch` with that session's label and state, and
    /// its return is the reply. Kernel messages and unknown badges are not
    /// answered.
    pub fn serve(
        mut self,
        mut new: impl FnMut(&Label) -> S,
        mut dispatch: impl FnMut(&Label, &mut S, u64, Words) -> (MsgInfo, Words),
    ) -> ! {
        let mut reply: Option<(MsgInfo, Words)> = None;
        loop {
            let received = self.next(reply.take());
            reply = self.handle(received, &mut new, &mut dispatch);
        }
    }

    /// Sends `reply` (if any) and receives the next message on the
    /// provider's endpoint: one step of [`Self::serve`], for a server that
    /// looks at a message before the provider does (`log-service`'s
    /// benchmark mode answers raw calls itself).
    #[inline(always)]
    pub fn next(&self, reply: Option<(MsgInfo, Words)>) -> Result<(u64, MsgInfo, Words), Error> {
        match reply {
            Some((info, words)) => syscall::reply_recv(self.ep, info, words),
            None => syscall::recv(self.ep),
        }
    }

    /// Handles a message [`Self::next`] received (see [`Self::serve`]):
    /// the reply to send, or `None` for a message that gets none.
    #[inline(always)]
    pub fn handle(
        &mut self,
        received: Result<(u64, MsgInfo, Words), Error>,
        new: &mut impl FnMut(&Label) -> S,
        dispatch: &mut impl FnMut(&Label, &mut S, u64, Words) -> (MsgInfo, Words),
    ) -> Option<(MsgInfo, Words)> {
        let (badge, info, words) = received.ok()?;
        if info.label() >= KERNEL_LABELS {
            return None;
        }
        if badge == 0 {
            return Some(self.open(info.label(), &words, new));
        }
        let (label, state) = usize::try_from(badge - 1)
            .ok()
            .and_then(|i| self.sessions.get_mut(i))?;
        Some(dispatch(label, state, info.label(), words))
    }

    /// The parent's request `label`, `words`: a new session, or a refusal.
    #[cold]
    #[inline(never)]
    fn open(
        &mut self,
        label: u64,
        words: &Words,
        new: &mut impl FnMut(&Label) -> S,
    ) -> (MsgInfo, Words) {
        let refuse = |why| crate::server::answer(why, [0; 4]);
        if label != proto::OPEN_SESSION {
            return refuse(label);
        }
        if self.next_slot >= self.end_slot {
            return refuse(REFUSED_FULL);
        }
        let slot = self.next_slot;
        let badge = self.sessions.len() as u64 + 1;
        if syscall::cap_mint(self.ep, own(slot), Rights::WRITE, badge).is_err() {
            return refuse(REFUSED_FULL);
        }
        self.next_slot += 1;
        let (bytes, len) = unpack(words);
        let client = Label { bytes, len };
        let state = new(&client);
        self.sessions.push((client, state));
        transfer::set_send_cap(own(slot));
        (MsgInfo::new(proto::OK, 0, 1).unwrap_or_default(), [0; 4])
    }
}
