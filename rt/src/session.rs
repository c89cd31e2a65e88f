//! Sessions, typed: one place per session interface, and the two loops
//! around it — a client opening a session through its parent, a provider
//! serving sessions the parent opens on it. The protocol (labels, slots,
//! badges) is `interfaces::session`; the design, with init's routing, is in
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
//! [`log`] is the first: Genode's `log_session.h` pattern; [`rom`],
//! [`timer`] and [`rtc`] follow it. A server is a
//! [`Provider`] loop with the interface's `dispatch`; a client is
//! [`open`] and the stub. A session whose provider stopped fails with an
//! error (never a hang); [`Session::reopen`] opens it again at the
//! restarted provider. An interface with a quota ([`Interface::RAM`],
//! [`Interface::CAPS`]) is opened with [`open_donating`] and a [`Donor`];
//! [`Session::close`] closes a session and takes the donation back,
//! whatever the provider made from it (docs/architecture.md, "Quota
//! donation and close"). [`counter`] and `components/apps/counter-*` show
//! both (docs/architecture.md, "Restart and reconnect").

use core::fmt;
use core::marker::PhantomData;

use abi::caddr::own;
use abi::{CapSlot, Error, MsgInfo};
use interfaces::child;
use interfaces::session::{self as proto, pack, NAME_BYTES};

use crate::syscall::{self, Words};
use crate::transfer;

pub mod block;
pub mod counter;
mod donor;
pub mod frame;
pub mod framebuffer;
pub mod fs;
pub mod input;
pub mod log;
pub mod nic;
pub mod platform;
pub mod power;
mod provider;
pub mod reconfig;
pub mod rom;
pub mod rtc;
pub mod status;
pub mod timer;

pub use donor::Donor;
pub use provider::{open_donated, Donated, Provider, SessionTable, REFUSED_FULL};

/// A session interface (see the module doc).
pub trait Interface {
    /// The session type, as the scenario config names it.
    const NAME: &'static str;
    /// RAM a client donates per session, in bytes (rounded up to a power
    /// of two of at least 4 KiB; 0: none): the provider makes the
    /// session's objects from it (`interfaces::session`, "Donation").
    const RAM: u64 = 0;
    /// Capability slots a client donates per session: where the provider
    /// puts the session's capabilities.
    const CAPS: u32 = 0;
}

/// Whether sessions of `I` need a donation.
const fn donates<I: Interface>() -> bool {
    I::RAM > 0 || I::CAPS > 0
}

/// The interfaces one provider serves, in its scenario entry's
/// `provides` order: one [`Interface`], or a tuple of two for a
/// component that provides both (the GUI multiplexer: `Framebuffer` and
/// `Input`). The parent names the interface of each session it opens
/// (`interfaces::session::OPEN_SESSION`); the provider reads it from the
/// session's [`Label::interface`].
pub trait Interfaces {
    /// Interface `index`'s donation (`Interface::RAM`, `Interface::CAPS`),
    /// `None` past the last.
    fn quota(index: u32) -> Option<(u64, u32)>;
}

impl<I: Interface> Interfaces for I {
    fn quota(index: u32) -> Option<(u64, u32)> {
        (index == 0).then_some((I::RAM, I::CAPS))
    }
}

impl<A: Interface, B: Interface> Interfaces for (A, B) {
    fn quota(index: u32) -> Option<(u64, u32)> {
        match index {
            0 => Some((A::RAM, A::CAPS)),
            1 => Some((B::RAM, B::CAPS)),
            _ => None,
        }
    }
}

/// An open session of interface `I`: an endpoint capability, badged by
/// the provider for this session, and what the client donated for it.
pub struct Session<I: Interface> {
    cap: CapSlot,
    /// The slot of `cap` in the caller's own table.
    slot: u32,
    /// The session's id at the parent, for [`Session::close`] (0: the
    /// parent does not track it — a session init serves itself).
    id: u64,
    donor: Option<Donor>,
    _interface: PhantomData<I>,
}

/// How often [`Session::reopen`] asks again while the parent answers that
/// the provider is being restarted (`RESTARTING`: init's park of waiting
/// opens is full, or it does not wait the back-off on a Timer; a parked
/// open just waits, without a retry).
pub const REOPEN_TRIES: u32 = 64;

impl<I: Interface> Session<I> {
    /// A session whose capability is already in `cap`, an own slot (init
    /// opens its own sessions at a provider, without asking a parent; no
    /// parent tracks it and nothing was donated, so [`Session::close`]
    /// only empties the slot after the parent refuses id 0).
    pub fn from_cap(cap: CapSlot) -> Self {
        Session {
            cap,
            slot: abi::caddr::split(cap).1,
            id: 0,
            donor: None,
            _interface: PhantomData,
        }
    }

    /// Donated slot `i` of this session as the client addresses it (where
    /// the provider put a capability for it, `interfaces::session`,
    /// "Donation"); `None` without a donation or past `I::CAPS`.
    pub fn donated_slot(&self, i: u32) -> Option<CapSlot> {
        let donor = self.donor.as_ref()?;
        (i < I::CAPS).then(|| abi::caddr::in_table(donor.table, proto::FIRST_DONATED_SLOT + i))
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

    /// Closes the session: asks the parent to close it at the provider
    /// (`interfaces::session::CLOSE`), empties the session slot and revokes the
    /// donation — whatever the provider made from it goes, whether or not
    /// the provider let go of it. Returns the donor, whole again, for
    /// another session; an error if the parent did not know the session
    /// (it is closed all the same on this side).
    pub fn close(mut self) -> Result<Option<Donor>, Error> {
        let answer = self.close_at_parent();
        self.forget()?;
        match answer {
            Ok(()) => Ok(self.donor.take()),
            Err(e) => Err(e),
        }
    }

    /// Tells the parent the session is closed.
    fn close_at_parent(&self) -> Result<(), Error> {
        let info = MsgInfo::new(proto::CLOSE, 4, 0).ok_or(Error::InvalidArgument)?;
        let (reply, _) = syscall::call(own(child::PARENT), info, [self.id, 0, 0, 0])?;
        match reply.label() {
            proto::OK => Ok(()),
            _ => Err(Error::InvalidArgument),
        }
    }

    /// Empties the session slot and takes the donation back.
    fn forget(&mut self) -> Result<(), Error> {
        // SAFETY: the slot holds an endpoint capability (the session) or
        // nothing; no mapping goes through it.
        let _ = unsafe { syscall::cap_delete(self.cap) };
        match &self.donor {
            Some(donor) => donor.reclaim(),
            None => Ok(()),
        }
    }

    /// Opens the session again, in the same slot, after it broke: its
    /// provider stopped (faulted, exited, was removed), and a call on it
    /// returned an error — `Aborted` for a call the provider never
    /// answered, `EmptySlot` once init has revoked the session capability
    /// with the provider (docs/architecture.md, "Restart and reconnect").
    /// The old session is closed first (at the parent, which may no longer
    /// know it, and its donation revoked) and the new one donated from the
    /// same donor. While the provider waits out its restart back-off, init
    /// keeps the open waiting (parked, answered once the provider runs
    /// again), so the call simply blocks; only when init parks too many
    /// opens already, or does not wait the back-off on a Timer, it answers
    /// that the provider is being restarted (`interfaces::session::RESTARTING`),
    /// and then this yields and asks again, up to [`REOPEN_TRIES`] times.
    /// A provider that is not running for good is an error at once. The
    /// new session is a fresh one: the provider's state for the old one
    /// is gone.
    pub fn reopen(&mut self) -> Result<(), OpenError> {
        self.reopen_counted().map(|_| ())
    }

    /// [`Session::reopen`], returning how many `RESTARTING` answers it
    /// got before the session opened (0 when init parked the open).
    pub fn reopen_counted(&mut self) -> Result<u32, OpenError> {
        let _ = self.close_at_parent();
        self.forget().map_err(OpenError::Donation)?;
        let mut tries = 0;
        loop {
            match open_at::<I>(self.slot, self.donor.take()) {
                Ok(session) => {
                    self.id = session.id;
                    self.donor = session.donor;
                    return Ok(tries);
                }
                Err((OpenError::Provider(proto::RESTARTING), donor))
                    if tries + 1 < REOPEN_TRIES =>
                {
                    self.donor = donor;
                    tries += 1;
                    let _ = syscall::yield_now();
                }
                Err((e, donor)) => {
                    self.donor = donor;
                    return Err(e);
                }
            }
        }
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
    /// The donation could not be made (or taken back) from the donor.
    Donation(Error),
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
            OpenError::Provider(proto::RESTARTING) => {
                f.write_str("refused: the provider is being restarted")
            }
            OpenError::Provider(proto::REFUSED_QUOTA) => f.write_str(
                "refused by the provider: no quota donated, or not the donation the interface asks",
            ),
            OpenError::Provider(label) => write!(f, "refused by the provider (label {label:#x})"),
            OpenError::Unexpected(label) => {
                write!(f, "unexpected answer {label:#x} from the parent")
            }
            OpenError::Ipc(e) => write!(f, "the call to the parent failed: {e}"),
            OpenError::Donation(e) => write!(f, "making the quota donation failed: {e}"),
        }
    }
}

/// Asks the parent (at `child::PARENT`) for a session of interface `I`;
/// the session capability lands in `slot`, an empty slot of the caller's.
/// Without a donation: an interface with a quota needs [`open_donating`].
pub fn open<I: Interface>(slot: u32) -> Result<Session<I>, OpenError> {
    open_at::<I>(slot, None).map_err(|(e, _)| e)
}

/// [`open`] for an interface with a quota (`Interface::RAM`, `CAPS`): the
/// donation is made from `donor`, which the session keeps until
/// [`Session::close`] hands it back; on a refusal the donor comes back
/// with the error, whole.
pub fn open_donating<I: Interface>(
    slot: u32,
    donor: Donor,
) -> Result<Session<I>, (OpenError, Donor)> {
    let Donor {
        block,
        bits,
        table,
        ram,
    } = donor;
    open_at::<I>(slot, Some(donor)).map_err(|(e, d)| {
        (
            e,
            d.unwrap_or(Donor {
                block,
                bits,
                table,
                ram,
            }),
        )
    })
}

/// [`open_donating`] from the component's own quota: a donor block made
/// from `child::UNTYPED` in own slots `donor_block` and `donor_table`
/// (what most clients of an interface with a quota do). The error says
/// which step failed.
pub fn open_from_quota<I: Interface>(
    slot: u32,
    donor_block: u32,
    donor_table: u32,
) -> Result<Session<I>, alloc::string::String> {
    use alloc::format;
    let donor = Donor::from_untyped::<I>(own(child::UNTYPED), donor_block, donor_table)
        .map_err(|e| format!("donation: {e}"))?;
    open_donating::<I>(slot, donor).map_err(|(e, _)| format!("{e}"))
}

/// [`open`] with an optional donor, which comes back with an error.
fn open_at<I: Interface>(
    slot: u32,
    donor: Option<Donor>,
) -> Result<Session<I>, (OpenError, Option<Donor>)> {
    let mut caps = 0;
    if let Some(d) = donor.as_ref().filter(|_| donates::<I>()) {
        if let Err(e) = d.make::<I>() {
            let _ = d.reclaim();
            return Err((OpenError::Donation(e), donor));
        }
        transfer::set_send_cap(own(d.table));
        caps = 1;
    }
    let info = MsgInfo::new(proto::OPEN, 4, caps).unwrap_or_default();
    let answer = transfer::call_for_cap(own(child::PARENT), info, pack(I::NAME), own(slot));
    let refused = |e, donor: Option<Donor>| {
        if let Some(d) = &donor {
            let _ = d.reclaim();
        }
        Err((e, donor))
    };
    let (reply, words) = match answer {
        Ok(answer) => answer,
        Err(e) => return refused(OpenError::Ipc(e), donor),
    };
    match reply.label() {
        proto::OK if reply.caps() == 1 => Ok(Session {
            cap: own(slot),
            slot,
            id: words[0],
            donor,
            _interface: PhantomData,
        }),
        proto::REFUSED_UNROUTED => refused(OpenError::Unrouted, donor),
        proto::REFUSED_PARENT => refused(OpenError::ParentDoesNotServe, donor),
        proto::REFUSED_PROVIDER => refused(OpenError::Provider(words[0]), donor),
        other => refused(OpenError::Unexpected(other), donor),
    }
}

/// The client label the parent gave a session: the client's name as
/// configured, cut to `interfaces::session::NAME_BYTES` bytes.
#[derive(Clone, Copy)]
pub struct Label {
    bytes: [u8; NAME_BYTES],
    len: usize,
    interface: u32,
}

impl Label {
    /// Which of the provider's interfaces the session is of (its index in
    /// the provider's `provides` list; always 0 for a provider of one).
    pub fn interface(&self) -> u32 {
        self.interface
    }

    /// The label as text (`?` if the parent sent bytes that are not UTF-8).
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("?")
    }
}
