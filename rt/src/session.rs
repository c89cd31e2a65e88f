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
//! [`log`] is the first: Genode's `log_session.h` pattern. A server is a
//! [`Provider`] loop with the interface's `dispatch`; a client is
//! [`open`] and the stub. A session whose provider stopped fails with an
//! error (never a hang); [`Session::reopen`] opens it again at the
//! restarted provider. An interface with a quota ([`Interface::RAM`],
//! [`Interface::CAPS`]) is opened with [`open_donating`] and a [`Donor`];
//! [`Session::close`] closes a session and takes the donation back,
//! whatever the provider made from it (docs/architecture.md, "Quota
//! donation and close"). [`counter`] and `components/counter-*` show
//! both (docs/architecture.md, "Restart and reconnect").

use core::fmt;
use core::marker::PhantomData;

use abi::caddr::{in_table, own};
use abi::session::{self as proto, pack, unpack, NAME_BYTES};
use abi::{child, CapSlot, Error, MsgInfo, ObjectType, Rights};

use crate::proto::ping::KERNEL_LABELS;
use crate::syscall::{self, Words};
use crate::transfer;

pub mod counter;
pub mod log;
pub mod reconfig;
pub mod rom;

/// A session interface (see the module doc).
pub trait Interface {
    /// The session type, as the scenario config names it.
    const NAME: &'static str;
    /// RAM a client donates per session, in bytes (rounded up to a power
    /// of two of at least 4 KiB; 0: none): the provider makes the
    /// session's objects from it (`abi::session`, "Donation").
    const RAM: u64 = 0;
    /// Capability slots a client donates per session: where the provider
    /// puts the session's capabilities.
    const CAPS: u32 = 0;
}

/// Whether sessions of `I` need a donation.
const fn donates<I: Interface>() -> bool {
    I::RAM > 0 || I::CAPS > 0
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
/// the provider is being restarted.
pub const REOPEN_TRIES: u32 = 64;

impl<I: Interface> Session<I> {
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
    /// (`abi::session::CLOSE`), empties the session slot and revokes the
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
    /// same donor. While the parent answers that the provider is being
    /// restarted (`abi::session::RESTARTING`: it waits out its back-off)
    /// it yields and asks again, up to [`REOPEN_TRIES`] times; a provider
    /// that is not running for good is an error at once. The new session
    /// is a fresh one: the provider's state for the old one is gone.
    pub fn reopen(&mut self) -> Result<(), OpenError> {
        let _ = self.close_at_parent();
        self.forget().map_err(OpenError::Donation)?;
        let mut tries = 0;
        loop {
            match open_at::<I>(self.slot, self.donor.take()) {
                Ok(session) => {
                    self.id = session.id;
                    self.donor = session.donor;
                    return Ok(());
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

/// Untyped memory a client keeps to donate from, one session at a time:
/// for each session it makes the donation table and untyped of
/// `abi::session` ("Donation") from its block; closing the session
/// revokes the block, which destroys both and everything made from them,
/// so the block is whole again.
pub struct Donor {
    /// Own slot of the untyped block.
    block: u32,
    bits: u32,
    /// Own empty slot for the donation table.
    table: u32,
}

impl Donor {
    /// log2 of the block a donation for `I` needs: the table and the
    /// untyped, each aligned to its size, the larger first.
    pub const fn bits_for<I: Interface>() -> u32 {
        let table = proto::donation_table_bits(I::CAPS) + abi::object::SLOT_BYTES_BITS;
        if I::RAM == 0 {
            return table;
        }
        let ram = proto::donation_ram_bits(I::RAM);
        if ram > table {
            ram + 1
        } else {
            table + 1
        }
    }

    /// A donor for sessions of `I` with a block of
    /// [`Self::bits_for`]`::<I>()` bytes made from the caller's untyped
    /// memory `untyped` (its quota, `child::UNTYPED`) into own slot
    /// `block`; `table`: an empty own slot for the donation table.
    pub fn from_untyped<I: Interface>(
        untyped: CapSlot,
        block: u32,
        table: u32,
    ) -> Result<Donor, Error> {
        let bits = Self::bits_for::<I>();
        syscall::retype(untyped, ObjectType::Untyped, bits.into(), own(block), 1)?;
        Ok(Donor::new(block, bits, table))
    }

    /// log2 of the block's bytes.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// A donor with the untouched untyped block of 2^`bits` bytes in own
    /// slot `block` and the empty own slot `table`.
    pub fn new(block: u32, bits: u32, table: u32) -> Donor {
        Donor { block, bits, table }
    }

    /// Makes the donation for `I` from the block: the table in `table`,
    /// the untyped in its slot `DONATED_UNTYPED`.
    fn make<I: Interface>(&self) -> Result<(), Error> {
        let table_bits = proto::donation_table_bits(I::CAPS);
        let block = own(self.block);
        let table = own(self.table);
        if I::RAM == 0 {
            return syscall::retype(block, ObjectType::CapTable, table_bits.into(), table, 1);
        }
        let ram_bits = proto::donation_ram_bits(I::RAM);
        let untyped = in_table(self.table, proto::DONATED_UNTYPED);
        // The table must exist before the untyped goes into it; the kernel
        // aligns each object to its size, so the block holds both either
        // way (`bits_for`).
        syscall::retype(block, ObjectType::CapTable, table_bits.into(), table, 1)?;
        syscall::retype(block, ObjectType::Untyped, ram_bits.into(), untyped, 1)
    }

    /// Revokes the block: the donation and everything made from it or
    /// derived from it — the parent's and the provider's copies, the
    /// provider's objects — are destroyed, and the block is whole again.
    pub fn reclaim(&self) -> Result<(), Error> {
        // SAFETY: the block holds only the donation (a table and an
        // untyped) and what the provider made from it; nothing of the
        // caller's own is mapped from it.
        unsafe { syscall::cap_revoke(own(self.block)) }
    }

    /// Whether the block is whole: the kernel makes an untyped of the
    /// block's full size from it only when no object made from it is left
    /// (it is made in the table slot and deleted again).
    pub fn is_whole(&self) -> bool {
        let probe = own(self.table);
        let whole = syscall::retype(
            own(self.block),
            ObjectType::Untyped,
            self.bits.into(),
            probe,
            1,
        )
        .is_ok();
        // SAFETY: an untyped capability; nothing is mapped through it.
        let _ = unsafe { syscall::cap_delete(probe) };
        whole
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
    let Donor { block, bits, table } = donor;
    open_at::<I>(slot, Some(donor)).map_err(|(e, d)| (e, d.unwrap_or(Donor { block, bits, table })))
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

/// What a client donated for a session (`abi::session`, "Donation"), as
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
pub struct Provider<I: Interface, S> {
    ep: CapSlot,
    first_slot: u32,
    end_slot: u32,
    sessions: alloc::vec::Vec<Option<Open<S>>>,
    _interface: PhantomData<I>,
}

/// Refusal label of a provider that has no slot left for a session.
pub const REFUSED_FULL: u64 = 0x5e55_0f01;

/// The answer to a request on a badge that names no session of this
/// provider (`abi::session::UNKNOWN_SESSION`): an error, never silence,
/// so a client that holds a stale capability is not left waiting.
#[cold]
#[inline(never)]
fn unknown_session(badge: u64) -> (MsgInfo, Words) {
    crate::server::answer(proto::UNKNOWN_SESSION, [badge, 0, 0, 0])
}

impl<I: Interface, S> Provider<I, S> {
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
    /// `abi::session::UNKNOWN_SESSION`.
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
        if badge == 0 {
            return Some(self.parent(info, &words, new));
        }
        match usize::try_from(badge - 1)
            .ok()
            .and_then(|i| self.sessions.get_mut(i))
        {
            Some(Some(open)) => Some(dispatch(&open.label, &mut open.state, info.label(), words)),
            _ => Some(unknown_session(badge)),
        }
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
        let answer = match info.label() {
            proto::OPEN_SESSION => self.open(i, words, donation, new),
            proto::CLOSE_SESSION => self.close(words[0]),
            other => Err(other),
        };
        let answer = answer.unwrap_or_else(|why| {
            if let Some(slot) = donation {
                // SAFETY: a capability table; nothing is mapped through it.
                let _ = unsafe { syscall::cap_delete(own(slot)) };
            }
            crate::server::answer(why, [0; 4])
        });
        self.accept_donation();
        answer
    }

    /// Opens session `i` for the client labelled `words`, with the
    /// donation (if any) in own slot `donation`; the reply, or the refusal
    /// label.
    fn open(
        &mut self,
        i: usize,
        words: &Words,
        donation: Option<u32>,
        new: &mut impl FnMut(&Label, Option<Donated>) -> Result<S, u64>,
    ) -> Result<(MsgInfo, Words), u64> {
        let slot = self.session_slot(i);
        if slot + 1 >= self.end_slot {
            return Err(REFUSED_FULL);
        }
        let donated = match donation {
            Some(table) if donates::<I>() => Some(check_donation::<I>(table, slot)?),
            _ if donates::<I>() => return Err(proto::REFUSED_QUOTA),
            _ => None,
        };
        let (bytes, len) = unpack(words);
        let label = Label { bytes, len };
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

/// Checks a donation for `I` in own slot `table`: the kernel makes an
/// untyped of `I::RAM` bytes from its `DONATED_UNTYPED` slot into its last
/// donated slot only when the table is a capability table with that slot
/// and the untyped is untouched and large enough (then the probe is
/// deleted again); `probe` is an empty own slot, for an interface without
/// donated slots.
fn check_donation<I: Interface>(table: u32, probe: u32) -> Result<Donated, u64> {
    let donated = Donated { table };
    let dst = match I::CAPS {
        0 => own(probe),
        n => donated.slot(n - 1),
    };
    let made = match I::RAM {
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
