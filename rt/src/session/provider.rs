//! The provider's side of sessions: [`Provider`] serves the sessions the
//! parent opens on its endpoint and closes them, and [`Donated`] is what
//! a client donated for one (`interfaces::session`; docs/architecture.md,
//! "Sessions and routing").

use core::marker::PhantomData;

use abi::caddr::{in_table, own};
use abi::{CapSlot, Error, MsgInfo, ObjectType, Rights};
use interfaces::child;
use interfaces::session::{self as proto, unpack};

use super::{Interfaces, Label};
use crate::signal::Signals;
use crate::syscall::{self, Words};
use crate::transfer;
use abi::fault::KERNEL_LABELS;

/// What a client donated for a session (`interfaces::session`, "Donation"), as
/// the provider sees it: its copy of the donation table.
#[derive(Clone, Copy, Debug)]
pub struct Donated {
    table: u32,
}

impl Donated {
    /// The donated untyped memory (`Interface::RAM` bytes).
    pub fn untyped(&self) -> CapSlot {
        in_table(self.table, proto::DONATED_UNTYPED)
    }

    /// Donated slot `i` (`i < Interface::CAPS`), for the session's
    /// capabilities.
    pub fn slot(&self, i: u32) -> CapSlot {
        in_table(self.table, proto::FIRST_DONATED_SLOT + i)
    }

    /// Names `notification` (a capability in the donation, with all its
    /// rights) as the one the client waits on: a copy goes into the
    /// table's wake slot, from which the parent keeps the copy it signals
    /// when this provider stops (`interfaces::session`, "The provider's
    /// death").
    pub fn set_wake(&self, notification: CapSlot) -> Result<(), abi::Error> {
        crate::syscall::cap_copy(notification, in_table(self.table, proto::DONATED_WAKE))
    }
}

/// A session's state made from its donation by `make`, for a provider
/// of an interface with a quota (a driver's streams): refused with
/// `interfaces::session::REFUSED_QUOTA` when the client donated nothing
/// or `make` fails (then `WHO: session for LABEL: why` is printed);
/// `WHO: session ID for LABEL` is printed when it opens (`id` says the
/// state's id).
pub fn open_donated<S, E: core::fmt::Display>(
    who: &str,
    label: &super::Label,
    donated: Option<Donated>,
    make: impl FnOnce(Donated) -> Result<S, E>,
    id: impl FnOnce(&S) -> u64,
) -> Result<S, u64> {
    let donated = donated.ok_or(proto::REFUSED_QUOTA)?;
    let state = make(donated).map_err(|e| {
        crate::println!("{who}: session for {}: {e}", label.as_str());
        proto::REFUSED_QUOTA
    })?;
    crate::println!("{who}: session {} for {}", id(&state), label.as_str());
    Ok(state)
}

/// One session a provider serves.
struct Open<S> {
    label: Label,
    state: S,
}

/// A provider of interface `I` on its endpoint (`child::SERVICE_ENDPOINT`,
/// init's per-provider endpoint). Session `i` (0-based) has badge `i + 1`
/// and two slots of the provider's from `first_slot` on: `first_slot + 2i`
/// holds its minted capability (the provider keeps it: the client's is
/// derived from it, so revoking it ends the client's), `first_slot + 2i +
/// 1` its copy of the client's donation. A closed session's badge and
/// slots are used again. At most `(end_slot - first_slot) / 2` sessions
/// are open at once.
pub struct Provider<I: Interfaces, S> {
    ep: CapSlot,
    first_slot: u32,
    end_slot: u32,
    sessions: alloc::vec::Vec<Option<Open<S>>>,
    _interface: PhantomData<I>,
}

/// A provider's open sessions, as its signal handlers see them
/// ([`Provider::serve_with_signals`]).
pub struct SessionTable<S>(alloc::vec::Vec<Option<Open<S>>>);

impl<S> SessionTable<S> {
    /// Each open session's client label and state.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Label, &mut S)> {
        self.0
            .iter_mut()
            .flatten()
            .map(|open| (&open.label, &mut open.state))
    }
}

/// Refusal label of a provider that has no slot left for a session.
pub const REFUSED_FULL: u64 = 0x5e55_0f01;

/// The answer to a request on a badge that names no session of this
/// provider (`interfaces::session::UNKNOWN_SESSION`): an error, never silence,
/// so a client that holds a stale capability is not left waiting.
#[cold]
#[inline(never)]
fn unknown_session(badge: u64) -> (MsgInfo, Words) {
    crate::server::answer(proto::UNKNOWN_SESSION, [badge, 0, 0, 0])
}

impl<I: Interfaces, S> Provider<I, S> {
    /// A provider on `child::SERVICE_ENDPOINT` using slots
    /// `first_slot..end_slot` for its sessions.
    pub fn new(first_slot: u32, end_slot: u32) -> Self {
        let provider = Provider {
            ep: own(child::SERVICE_ENDPOINT),
            first_slot,
            end_slot,
            sessions: alloc::vec::Vec::new(),
            _interface: PhantomData,
        };
        provider.accept_donation();
        provider
    }

    /// Serves forever: the parent's `OPEN_SESSION` (badge 0) makes a
    /// session with state `new(label, donation)` (`Err(label)` refuses it
    /// with that label; the donation is there when `I` has a quota and is
    /// checked to hold it), its `CLOSE_SESSION` ends one; a client's
    /// request (its session's badge) goes to `dispatch` with that
    /// session's label and state, and its return is the reply. Kernel
    /// messages are not answered; a badge that names no session gets
    /// `interfaces::session::UNKNOWN_SESSION`.
    pub fn serve(
        mut self,
        mut new: impl FnMut(&Label, Option<Donated>) -> Result<S, u64>,
        mut dispatch: impl FnMut(&Label, &mut S, u64, Words) -> (MsgInfo, Words),
    ) -> ! {
        let mut reply: Option<(MsgInfo, Words)> = None;
        loop {
            let received = self.next(reply.take());
            reply = self.handle(received, &mut new, &mut dispatch);
        }
    }

    /// Serves like [`Self::serve`] and also runs `signals`' handlers: the
    /// provider's thread must have `signals`' notification bound
    /// (`syscall::bind_notification`), so its `Recv` returns a signal word
    /// (label `abi::LABEL_NOTIFICATION`) as well as requests — one thread
    /// serves both, Genode's entrypoint. Handlers get the open sessions
    /// ([`SessionTable`]). `signals` is in a `RefCell` so that `new` and
    /// `dispatch` can register contexts (`rt::signal`); a handler must not
    /// borrow it again.
    pub fn serve_with_signals(
        mut self,
        signals: &core::cell::RefCell<Signals<SessionTable<S>>>,
        mut new: impl FnMut(&Label, Option<Donated>) -> Result<S, u64>,
        mut dispatch: impl FnMut(&Label, &mut S, u64, Words) -> (MsgInfo, Words),
    ) -> ! {
        let mut reply: Option<(MsgInfo, Words)> = None;
        loop {
            match self.next(reply.take()) {
                Ok((word, info, _)) if info.label() == abi::LABEL_NOTIFICATION => {
                    // The handlers get the table for the call; nothing else
                    // touches it meanwhile (one thread).
                    let mut table = SessionTable(core::mem::take(&mut self.sessions));
                    signals.borrow_mut().dispatch(word, &mut table);
                    self.sessions = table.0;
                }
                received => reply = self.handle(received, &mut new, &mut dispatch),
            }
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
        new: &mut impl FnMut(&Label, Option<Donated>) -> Result<S, u64>,
        dispatch: &mut impl FnMut(&Label, &mut S, u64, Words) -> (MsgInfo, Words),
    ) -> Option<(MsgInfo, Words)> {
        let (badge, info, words) = received.ok()?;
        if info.label() >= KERNEL_LABELS {
            return None;
        }
        // The hot path first: a client's request on an open session. Badge
        // 0 (the parent) wraps to an index no vector reaches.
        let index = badge.wrapping_sub(1) as usize;
        if let Some(Some(open)) = self.sessions.get_mut(index) {
            return Some(dispatch(&open.label, &mut open.state, info.label(), words));
        }
        if badge == 0 {
            return Some(self.parent(info, &words, new));
        }
        Some(unknown_session(badge))
    }

    /// The slot of session `i`'s minted capability; its donation's is the
    /// next.
    fn session_slot(&self, i: usize) -> u32 {
        self.first_slot + 2 * i as u32
    }

    /// The first free session: its index.
    fn free_session(&self) -> usize {
        self.sessions
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.sessions.len())
    }

    /// Points the receive slot at the donation slot of the next session,
    /// so the parent's next `OPEN_SESSION` puts its donation there.
    fn accept_donation(&self) {
        let slot = self.session_slot(self.free_session()) + 1;
        transfer::set_recv_slot(if slot < self.end_slot {
            own(slot)
        } else {
            abi::caddr::NULL_SLOT
        });
    }

    /// The parent's request `info`, `words`: open or close a session.
    #[cold]
    #[inline(never)]
    fn parent(
        &mut self,
        info: MsgInfo,
        words: &Words,
        new: &mut impl FnMut(&Label, Option<Donated>) -> Result<S, u64>,
    ) -> (MsgInfo, Words) {
        let i = self.free_session();
        let donation = (info.caps() == 1).then_some(self.session_slot(i) + 1);
        let (op, interface) = proto::split_open_label(info.label());
        let answer = match op {
            proto::OPEN_SESSION => self.open(i, (words, interface), donation, new),
            proto::CLOSE_SESSION => self.close(words[0]),
            other => Err(other),
        };
        // A capability that came with anything but a session opened here
        // is not kept: its slot is the next session's.
        let opened = answer.is_ok() && op == proto::OPEN_SESSION;
        if let Some(slot) = donation.filter(|_| !opened) {
            // SAFETY: a capability init passed on (a client's table, or
            // whatever it sent); nothing is mapped through it.
            let _ = unsafe { syscall::cap_delete(own(slot)) };
        }
        let answer = answer.unwrap_or_else(|why| crate::server::answer(why, [0; 4]));
        self.accept_donation();
        answer
    }

    /// Opens session `i` of interface `interface` (its index in `I`) for
    /// the client labelled `words`, with the donation (if any) in own slot
    /// `donation`; the reply, or the refusal label.
    fn open(
        &mut self,
        i: usize,
        (words, interface): (&Words, u32),
        donation: Option<u32>,
        new: &mut impl FnMut(&Label, Option<Donated>) -> Result<S, u64>,
    ) -> Result<(MsgInfo, Words), u64> {
        let slot = self.session_slot(i);
        if slot + 1 >= self.end_slot {
            return Err(REFUSED_FULL);
        }
        // An interface this provider does not have: the parent's config
        // and the provider's code disagree.
        let (ram, caps) = I::quota(interface).ok_or(proto::REFUSED_PROVIDER)?;
        let donates = ram > 0 || caps > 0;
        let donated = match donation {
            Some(table) if donates => Some(check_donation((ram, caps), table, slot)?),
            _ if donates => return Err(proto::REFUSED_QUOTA),
            _ => None,
        };
        let (bytes, len) = unpack(words);
        let label = Label {
            bytes,
            len,
            interface,
        };
        let state = new(&label, donated)?;
        let badge = i as u64 + 1;
        if syscall::cap_mint(self.ep, own(slot), Rights::WRITE, badge).is_err() {
            return Err(REFUSED_FULL);
        }
        let open = Some(Open { label, state });
        match self.sessions.get_mut(i) {
            Some(entry) => *entry = open,
            None => self.sessions.push(open),
        }
        transfer::set_send_cap(own(slot));
        Ok((
            MsgInfo::new(proto::OK, 4, 1).unwrap_or_default(),
            [badge, 0, 0, 0],
        ))
    }

    /// Closes the session with `badge`: its state is dropped, its
    /// capability (and so the client's) revoked and deleted, and the
    /// provider's copy of the donation deleted. Objects the provider made
    /// from the donation are not its to clean up: the client's revoke of
    /// its donation destroys them.
    fn close(&mut self, badge: u64) -> Result<(MsgInfo, Words), u64> {
        let i = usize::try_from(badge.wrapping_sub(1)).map_err(|_| proto::UNKNOWN_SESSION)?;
        match self.sessions.get_mut(i) {
            Some(entry @ Some(_)) => *entry = None,
            _ => return Err(proto::UNKNOWN_SESSION),
        }
        let slot = own(self.session_slot(i));
        // SAFETY: an endpoint capability and a capability table; nothing
        // is mapped through them.
        unsafe {
            let _ = syscall::cap_revoke(slot);
            let _ = syscall::cap_delete(slot);
            let _ = syscall::cap_delete(slot + 1);
        }
        Ok(crate::server::answer(proto::OK, [0; 4]))
    }
}

/// Checks a donation of `ram` bytes and `caps` slots (an interface's
/// quota) in own slot `table`: the kernel makes an untyped of `ram` bytes
/// from its `DONATED_UNTYPED` slot into its last donated slot only when the table is a capability table with that slot
/// and the untyped is untouched and large enough (then the probe is
/// deleted again); `probe` is an empty own slot, for an interface without
/// donated slots.
fn check_donation((ram, caps): (u64, u32), table: u32, probe: u32) -> Result<Donated, u64> {
    let donated = Donated { table };
    let dst = match caps {
        0 => own(probe),
        n => donated.slot(n - 1),
    };
    let made = match ram {
        0 => syscall::cap_copy(own(child::SERVICE_ENDPOINT), dst),
        ram => syscall::retype(
            donated.untyped(),
            ObjectType::Untyped,
            proto::donation_ram_bits(ram).into(),
            dst,
            1,
        ),
    };
    made.map_err(|_| proto::REFUSED_QUOTA)?;
    // SAFETY: an untyped or endpoint capability; nothing is mapped
    // through it.
    let _ = unsafe { syscall::cap_delete(dst) };
    Ok(donated)
}
