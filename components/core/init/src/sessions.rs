//! Init's side of sessions (docs/architecture.md, "Sessions and
//! routing"; protocol `interfaces::session`): a child's `OPEN` answered by its
//! routes — opened at the sibling that provides the type (with the
//! client's quota donation passed on), served by init itself (`Rom`), or
//! refused — its `CLOSE`, and the sessions init closes for a child that
//! finished. Init keeps a record of every session it opened at a provider
//! ([`Sessions`]); `Rom` sessions, which init serves itself, are not
//! recorded and not closed (yet).
//!
//! Init never calls a provider itself: a request for a provider is saved
//! (`SaveReply`: the client's reply capability, in a slot of init's) and
//! becomes a [`Job`] for a proxy thread ([`crate::proxy`]); the client is
//! answered through its saved reply when the proxy brings the provider's
//! answer ([`Sessions::proxy_message`]). Meanwhile init serves everybody
//! else (docs/architecture.md, "Sessions and routing", 10).
//!
//! An `OPEN` for a provider that waits out its restart back-off is parked
//! ([`Parked`], at most [`MAX_PARKED`]): its reply saved, its donation in
//! a slot of init's. [`Sessions::unpark`] decides it again, as if it had
//! just arrived, once the provider no longer waits (restarted, given up,
//! removed); a client that finishes meanwhile loses its parked opens
//! ([`Sessions::finished`]: reply and donation deleted). Invariant: every
//! saved reply and kept donation belongs to exactly one job or parked
//! open, and is deleted and its slot freed when that ends.

use alloc::vec::Vec;

use rt::abi::caddr::own;
use rt::abi::{Error, MsgInfo, Rights};
use rt::interfaces::session;
use rt::println;
use rt::resources::Resources;
use rt::session::power::Power;
use rt::session::reconfig::Reconfig;
use rt::session::rom::Rom as RomSession;
use rt::session::status::Status;
use rt::session::Interface;
use rt::syscall;
use rt::transfer;
use ucore::config::{Rom, Target};

use crate::proxy::{Arrival, Job, Proxies, Purpose};
use crate::{name_of_id, Kid};

/// A session init opened at a provider.
struct Record {
    /// Init's id for it, given to the client.
    id: u64,
    /// The client's and the provider's `Kid::id`.
    client: usize,
    provider: usize,
    /// The provider's restart count when it was opened.
    restarts: u32,
    /// The provider's badge for it.
    badge: u64,
    /// Init's slot with a write copy of the notification the client
    /// waits on (badge `session::PROVIDER_GONE`), if the provider named
    /// one (`interfaces::session`, "The provider's death").
    wake: Option<u32>,
}

/// The sessions init opened, and its slots for passing capabilities on.
pub struct Sessions {
    records: Vec<Record>,
    next_id: u64,
    /// Init's endpoint (a `Rom` session is minted from it).
    own_ep: u32,
    /// Where a session capability passes through init.
    transit: u32,
    /// Where a client's donation arrives with its `OPEN`.
    donation: u32,
    /// The proxy threads that call providers for init.
    proxies: Proxies,
    /// Opens waiting for their provider's restart, at most
    /// [`MAX_PARKED`].
    parked: Vec<Parked>,
    /// Finished children whose sessions are still being closed at their
    /// providers: (child id, closes outstanding). Init returns a child's
    /// memory only when none is left ([`Sessions::take_closed`]), so a
    /// provider (a platform service) stops what the client's donation
    /// feeds — a device's DMA — before that memory is reused.
    closing: Vec<(usize, u32)>,
    /// Children from `closing` whose closes all ended.
    closed: Vec<usize>,
    /// Wake notifications of the sessions a stopped provider served:
    /// (the provider's id, init's slot), signalled once the provider's
    /// own sessions are closed ([`Sessions::wake_clients`]).
    wakes: Vec<(usize, u32)>,
}

/// How many `OPEN`s init keeps waiting for providers that are being
/// restarted (all providers together); beyond, a client is answered
/// `RESTARTING` at once and asks again (`rt::session::Session::reopen`).
/// Each parked open holds a saved reply and maybe a donation in init's
/// slots, so the bound keeps clients from filling init's table.
pub const MAX_PARKED: usize = 8;

/// An `OPEN` init keeps waiting while its provider waits out its restart
/// back-off: the client's saved reply, the request and the client's
/// donation (in a slot of init's, if it carried one). When the provider
/// runs again (or will not), it is decided again as if it had just
/// arrived ([`Sessions::unpark`]); when the client finishes meanwhile, it
/// is dropped with its reply and donation ([`Sessions::finished`]).
struct Parked {
    /// The client's badge and `Kid::id`, the provider's `Kid::id`.
    badge: u64,
    client: usize,
    provider: usize,
    /// The request's words (the session type).
    words: [u64; 4],
    reply: u32,
    donation: Option<u32>,
}

/// What an `OPEN` gets ([`Sessions::decide`]).
#[derive(Clone, Copy)]
enum Decision {
    /// Refused with this label and word 0 (the refusal is logged).
    Refuse(u64, u64),
    /// A session init serves itself, minted with this badge.
    AtInit { client: usize, session_badge: u64 },
    /// Opened at the running provider (a proxy's job).
    Provider {
        client: usize,
        provider: usize,
        restarts: u32,
    },
    /// The provider waits out its restart back-off: parked.
    Backoff { client: usize, provider: usize },
}

/// Who waits for the answer to a request.
#[derive(Clone, Copy)]
enum To {
    /// The child whose request init received last (`Reply`).
    Caller,
    /// A saved reply in this slot of init's (`ReplyTo`).
    Saved(u32),
}

/// A client's donation with its `OPEN`.
#[derive(Clone, Copy)]
enum Donation {
    /// In init's donation slot, if the message carried one (the main
    /// loop empties the slot after the message).
    Received(bool),
    /// Kept in a slot of init's own (a parked open's).
    Kept(Option<u32>),
}

impl Donation {
    /// The donation in a slot of its own (a copy of a received one), or
    /// none; `Err` if it could not be kept (logged).
    fn keep(self, res: &mut Resources, received: u32) -> Result<Option<u32>, ()> {
        match self {
            Donation::Received(false) | Donation::Kept(None) => Ok(None),
            Donation::Received(true) => copy_to_new_slot(res, received).map(Some).ok_or(()),
            Donation::Kept(slot) => Ok(slot),
        }
    }

    /// Lets go of a kept donation (refused: the client's capability
    /// table stays the client's).
    fn drop_kept(self, res: &mut Resources) {
        if let Donation::Kept(Some(slot)) = self {
            delete_and_free(res, slot);
        }
    }
}

impl Sessions {
    /// No sessions yet; `own_ep`, `transit`, `donation`: init's slots.
    pub fn new(own_ep: u32, transit: u32, donation: u32) -> Self {
        Sessions {
            records: Vec::new(),
            wakes: Vec::new(),
            next_id: 1,
            own_ep,
            transit,
            donation,
            proxies: Proxies::new(),
            parked: Vec::new(),
            closing: Vec::new(),
            closed: Vec::new(),
        }
    }

    /// Lets init's next receive take a capability (a donation) into the
    /// donation slot.
    pub fn accept_donation(&self) {
        transfer::set_recv_slot(own(self.donation));
    }

    /// Empties the donation slot after a message that carried a
    /// capability (`info`): passed on to a provider or refused, init
    /// keeps none (the provider's copy stays: a deleted capability's
    /// children move up to its parent, the client's).
    pub fn drop_donation(&self, info: MsgInfo) {
        if info.caps() > 0 {
            // SAFETY: a capability table of a client's; nothing is
            // mapped through it.
            let _ = unsafe { syscall::cap_delete(own(self.donation)) };
        }
    }

    /// Answers child `badge`'s request for a session of the type in
    /// `words`, with a donation if `info` carries one: by its routes,
    /// refused, opened at the provider and passed on through init's
    /// transit slot, or parked while the provider waits out its restart
    /// back-off (`in_backoff`; see [`Parked`]).
    pub fn open(
        &mut self,
        (rom, res): (&Rom<'_>, &mut Resources),
        (kids, in_backoff): (&[Kid<'_>], &dyn Fn(usize) -> bool),
        badge: u64,
        info: MsgInfo,
        words: &[u64; 4],
    ) {
        let decision = self.decide(rom, (kids, in_backoff), badge, words);
        let donation = Donation::Received(info.caps() > 0);
        if let Decision::Backoff { client, provider } = decision {
            if self.parked.len() < MAX_PARKED {
                return self.park(kids, res, (badge, *words, donation), (client, provider));
            }
            let (name, pname) = (
                name_of_id(kids, client).unwrap_or("?"),
                name_of_id(kids, provider).unwrap_or("?"),
            );
            println!(
                "init: {name} asks for a session at {pname}: its provider is being restarted \
                 and {MAX_PARKED} opens are parked already; refused"
            );
            let words = [session::RESTARTING, 0, 0, 0];
            return answer(res, To::Caller, session::REFUSED_PROVIDER, words, None);
        }
        self.act((kids, res), (decision, words), To::Caller, donation);
    }

    /// What to do with child `badge`'s `OPEN` of the session type in
    /// `words`, by its routes and its provider's state; a refusal is
    /// logged here.
    fn decide(
        &self,
        rom: &Rom<'_>,
        (kids, in_backoff): (&[Kid<'_>], &dyn Fn(usize) -> bool),
        badge: u64,
        words: &[u64; 4],
    ) -> Decision {
        let (bytes, len) = session::unpack(words);
        let service = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
        let client = kids.iter().find(|k| k.id as u64 + 1 == badge);
        let Some(client) = client else {
            return Decision::Refuse(session::REFUSED_UNROUTED, 0);
        };
        let name = client.component.name;
        let target = match client.component.route(service) {
            None => {
                // Every component's runtime asks for its console at its
                // first printed line (`rt::print`), and the GUI
                // multiplexer for a tablet's Pointer session at its
                // start: without a route that is the normal case, not
                // worth a line.
                let optional = [
                    rt::session::log::Console::NAME,
                    rt::session::input::Pointer::NAME,
                ];
                if !optional.contains(&service) {
                    println!(
                        "init: {name} asks for a {service} session: not routed to it; refused"
                    );
                }
                return Decision::Refuse(session::REFUSED_UNROUTED, 0);
            }
            Some(Target::Parent) => {
                let offered = rom.parent_provides().any(|s| s == service);
                let extra = match service {
                    RomSession::NAME => Some(0),
                    Reconfig::NAME => Some(session::RECONFIG_SESSION),
                    Power::NAME => Some(session::POWER_SESSION),
                    Status::NAME => Some(session::STATUS_SESSION),
                    _ => None,
                };
                if let Some(extra) = extra.filter(|_| offered) {
                    return Decision::AtInit {
                        client: client.id,
                        session_badge: badge | session::PARENT_SESSION | extra,
                    };
                }
                println!(
                    "init: {name} asks for a {service} session: routed to the parent, which {}; \
                     refused",
                    if offered {
                        "does not serve it itself (only Rom, Reconfig, Power and Status)"
                    } else {
                        "does not provide it"
                    }
                );
                return Decision::Refuse(session::REFUSED_PARENT, 0);
            }
            // Followed by name: the provider may have another position
            // in the config since an update.
            Some(target) => client.component.target_name(target).unwrap_or("?"),
        };
        let provider = kids.iter().find(|k| k.component.name == target);
        let Some(provider) = provider.filter(|k| k.service.is_some() && k.caps.is_some()) else {
            if let Some(p) = provider.filter(|k| k.caps.is_none() && in_backoff(k.id)) {
                return Decision::Backoff {
                    client: client.id,
                    provider: p.id,
                };
            }
            // Stopped, but with a restart to come that init does not wait
            // out on its Timer: the client may ask again
            // (`Session::reopen` does).
            let restarting = provider.is_some_and(|k| {
                k.caps.is_none() && k.component.restart.delay_ms(k.restarts + 1).is_some()
            });
            let (why, word) = match restarting {
                true => ("is being restarted", session::RESTARTING),
                false => ("is not running", 0),
            };
            println!("init: {name} asks for a {service} session: its provider {why}; refused");
            return Decision::Refuse(session::REFUSED_PROVIDER, word);
        };
        Decision::Provider {
            client: client.id,
            provider: provider.id,
            restarts: provider.restarts,
        }
    }

    /// Carries out `decision` for an `OPEN` of the session type in
    /// `words`, answered through `to`, with `donation` (a
    /// [`Decision::Backoff`] here is answered `RESTARTING`: the callers
    /// park before they get here).
    fn act(
        &mut self,
        (kids, res): (&[Kid<'_>], &mut Resources),
        (decision, words): (Decision, &[u64; 4]),
        to: To,
        donation: Donation,
    ) {
        let refuse = |res: &mut Resources, label, word| {
            donation.drop_kept(res);
            answer(res, to, label, [word, 0, 0, 0], None);
        };
        let (client, provider, restarts) = match decision {
            Decision::Refuse(label, word) => return refuse(res, label, word),
            Decision::Backoff { .. } => {
                return refuse(res, session::REFUSED_PROVIDER, session::RESTARTING)
            }
            Decision::AtInit {
                client,
                session_badge,
            } => {
                donation.drop_kept(res);
                let (bytes, len) = session::unpack(words);
                let service = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
                let name = name_of_id(kids, client).unwrap_or("?");
                let at = (self.own_ep, session_badge, self.transit);
                return open_at_init(res, to, (name, service), at);
            }
            Decision::Provider {
                client,
                provider,
                restarts,
            } => (client, provider, restarts),
        };
        // The client waits for the provider's answer through its saved
        // reply; its donation waits in a slot of the job's.
        let saved = match to {
            To::Saved(slot) => slot,
            To::Caller => match save_reply(res) {
                Some(slot) => slot,
                None => return refuse(res, session::REFUSED_PROVIDER, 0),
            },
        };
        let Ok(donation) = donation.keep(res, self.donation) else {
            let _ = answer_saved(res, Some(saved), session::REFUSED_PROVIDER, [0; 4], None);
            return;
        };
        let name = name_of_id(kids, client).unwrap_or("?");
        // Which of the provider's interfaces (its `provides` order): a
        // provider of several tells them apart by it.
        let (bytes, len) = session::unpack(words);
        let interface = kids
            .iter()
            .find(|k| k.id == provider)
            .and_then(|k| {
                k.component
                    .provides()
                    .position(|p| p.as_bytes() == &bytes[..len])
            })
            .unwrap_or(0);
        self.proxies.push(Job {
            purpose: Purpose::Open {
                client,
                service: *words,
                donated: donation.is_some(),
            },
            label: session::open_session_label(interface as u32),
            words: session::pack(name),
            provider,
            restarts,
            reply: Some(saved),
            donation,
        });
        self.pump(kids, res);
    }

    /// Keeps the `OPEN` init just received (`request`: the client's
    /// badge, the words, its donation) waiting for `provider`'s restart:
    /// its reply saved, its donation kept.
    fn park(
        &mut self,
        kids: &[Kid<'_>],
        res: &mut Resources,
        (badge, words, donation): (u64, [u64; 4], Donation),
        (client, provider): (usize, usize),
    ) {
        let Some(reply) = save_reply(res) else {
            let words = [session::RESTARTING, 0, 0, 0];
            return answer(res, To::Caller, session::REFUSED_PROVIDER, words, None);
        };
        let Ok(donation) = donation.keep(res, self.donation) else {
            let _ = answer_saved(res, Some(reply), session::REFUSED_PROVIDER, [0; 4], None);
            return;
        };
        let name = name_of_id(kids, client).unwrap_or("?");
        let pname = name_of_id(kids, provider).unwrap_or("?");
        println!("init: parked open of {name} for {pname} (restarting)");
        self.parked.push(Parked {
            badge,
            client,
            provider,
            words,
            reply,
            donation,
        });
    }

    /// Decides each parked `OPEN` again whose provider no longer waits
    /// out its back-off (restarted, stopped for good, removed): as if it
    /// had just arrived, answered through its saved reply.
    pub fn unpark(
        &mut self,
        rom: &Rom<'_>,
        res: &mut Resources,
        (kids, in_backoff): (&[Kid<'_>], &dyn Fn(usize) -> bool),
    ) {
        let mut i = 0;
        while let Some(p) = self.parked.get(i) {
            // (A config update may have put a new, running provider at
            // the same id: then it goes on.)
            let waits = kids.iter().any(|k| k.id == p.provider && k.caps.is_none());
            if waits && in_backoff(p.provider) {
                i += 1;
                continue;
            }
            // (In the order they came: `remove`, not `swap_remove`.)
            let p = self.parked.remove(i);
            let name = name_of_id(kids, p.client).unwrap_or("?");
            let pname = name_of_id(kids, p.provider).unwrap_or("a removed provider");
            println!("init: resuming parked open of {name} for {pname}");
            let decision = self.decide(rom, (kids, in_backoff), p.badge, &p.words);
            if let Decision::Backoff { provider, .. } = decision {
                // Routed by an update to another provider that waits out
                // its back-off: parked again, for that one (looked at
                // again at the end of this pass, and kept).
                let pname = name_of_id(kids, provider).unwrap_or("?");
                println!("init: parked open of {name} for {pname} (restarting)");
                self.parked.push(Parked { provider, ..p });
                continue;
            }
            let donation = Donation::Kept(p.donation);
            self.act(
                (kids, res),
                (decision, &p.words),
                To::Saved(p.reply),
                donation,
            );
        }
    }

    /// Answers child `badge`'s `CLOSE` of its session `words[0]` once its
    /// provider closed it (a proxy's job).
    pub fn close(&mut self, kids: &[Kid<'_>], res: &mut Resources, badge: u64, words: &[u64; 4]) {
        let id = words[0];
        let position = self
            .records
            .iter()
            .position(|r| r.id == id && r.client as u64 + 1 == badge);
        // (A `Rom` or `Reconfig` session, served by init, has id 0: no
        // record, nothing to close.)
        let Some(position) = position else {
            return reply(session::UNKNOWN_SESSION, [id, 0, 0, 0], None);
        };
        let record = self.records.swap_remove(position);
        if let Some(w) = record.wake {
            delete_and_free(res, w);
        }
        let Some(saved) = save_reply(res) else {
            return reply(session::OK, [0; 4], None);
        };
        self.close_at_provider(&record, Some(saved));
        self.pump(kids, res);
    }

    /// Child `index` (its `Kid::id`) exited, faulted or was removed by a
    /// config update: the sessions it opened are closed at their
    /// providers (proxies' jobs), and those it provided are gone with its
    /// endpoint (their clients' capabilities with it). Returns whether
    /// closes are outstanding: then [`Sessions::take_closed`] names the
    /// child once they all ended.
    pub fn finished(&mut self, kids: &[Kid<'_>], res: &mut Resources, index: usize) -> bool {
        let (mut closed, mut lost) = (0, 0);
        let mut i = 0;
        while let Some(record) = self.records.get(i) {
            if record.client == index {
                let record = self.records.swap_remove(i);
                if let Some(w) = record.wake {
                    delete_and_free(res, w);
                }
                self.close_at_provider(&record, None);
                closed += 1;
            } else if record.provider == index {
                let record = self.records.swap_remove(i);
                if let Some(w) = record.wake {
                    self.wakes.push((index, w));
                }
                lost += 1;
            } else {
                i += 1;
            }
        }
        // Its parked opens: nobody waits for them any more.
        let mut dropped = 0;
        self.parked.retain(|p| {
            let gone = p.client == index;
            if gone {
                delete_and_free(res, p.reply);
                if let Some(d) = p.donation {
                    delete_and_free(res, d);
                }
                dropped += 1;
            }
            !gone
        });
        if closed > 0 {
            self.closing.push((index, closed));
        }
        self.pump(kids, res);
        let pending = self.closing.iter().any(|&(c, _)| c == index);
        if !pending {
            // Every close ended already (stale jobs end at once): the
            // caller releases the child now.
            self.closed.retain(|&c| c != index);
            self.wake_clients(res, index);
        }
        let Some(name) = name_of_id(kids, index) else {
            return pending;
        };
        if dropped > 0 {
            println!("init: dropped {dropped} parked opens of {name}");
        }
        if closed > 0 {
            println!("init: closed {closed} sessions of {name} at their providers");
        }
        if lost > 0 {
            println!("init: {lost} sessions provided by {name} closed with it");
        }
        pending
    }

    /// Whether provider `id` (its `Kid::id`) serves a session init opened
    /// at it that is still open.
    pub fn serves_open(&self, id: usize) -> bool {
        self.records.iter().any(|r| r.provider == id)
    }

    /// Whether a finished child's sessions are still being closed.
    pub fn closing(&self) -> bool {
        !self.closing.is_empty() || !self.closed.is_empty()
    }

    /// The finished children whose sessions are now all closed at their
    /// providers (see `closing`).
    pub fn take_closed(&mut self) -> Vec<usize> {
        core::mem::take(&mut self.closed)
    }

    /// One close for finished child `client` ended (however it ended).
    fn close_ended(&mut self, res: &mut Resources, client: usize) {
        if let Some(i) = self.closing.iter().position(|&(c, _)| c == client) {
            self.closing[i].1 -= 1;
            if self.closing[i].1 == 0 {
                self.closing.swap_remove(i);
                self.closed.push(client);
                self.wake_clients(res, client);
            }
        }
    }

    /// Stopped provider `provider`'s own sessions are all closed (a
    /// driver's device is reset): the clients of the sessions it served
    /// are woken with `session::PROVIDER_GONE` — one waiting on its stream
    /// reconnects — and init lets go of their wake copies.
    fn wake_clients(&mut self, res: &mut Resources, provider: usize) {
        self.wakes.retain(|&(p, slot)| {
            if p != provider {
                return true;
            }
            // (A client that revoked its donation meanwhile took the
            // notification and this copy with it: nothing to signal.)
            let _ = syscall::signal(own(slot));
            delete_and_free(res, slot);
            false
        });
    }

    /// A `CLOSE_SESSION` job for `record`'s provider; `reply`: the
    /// client's saved reply, answered when it is done.
    fn close_at_provider(&mut self, record: &Record, reply: Option<u32>) {
        self.proxies.push(Job {
            purpose: Purpose::Close {
                client: record.client,
                badge: record.badge,
            },
            label: session::CLOSE_SESSION,
            words: [record.badge, 0, 0, 0],
            provider: record.provider,
            restarts: record.restarts,
            reply,
            donation: None,
        });
    }

    /// Hands waiting jobs to idle proxies; a job whose provider stopped
    /// meanwhile is finished as failed.
    fn pump(&mut self, kids: &[Kid<'_>], res: &mut Resources) {
        let running = |job: &Job| {
            let k = kids.iter().find(|k| k.id == job.provider)?;
            k.service
                .filter(|_| k.caps.is_some() && k.restarts == job.restarts)
        };
        let stale = self.proxies.pump(res, self.own_ep, running);
        for job in stale {
            self.finish_job(kids, res, job, Err(Error::Aborted.raw()), None);
        }
    }

    /// A proxy's message (`badge` has `proxy::PROXY_BADGE`): the result of
    /// its job goes to whoever waits for it; then the proxy takes the
    /// next job.
    pub fn proxy_message(
        &mut self,
        kids: &[Kid<'_>],
        res: &mut Resources,
        badge: u64,
        label: u64,
        words: &[u64; 4],
    ) {
        match self.proxies.arrived(badge, label, words) {
            Some(Arrival {
                job: Some(job),
                result,
                transit,
            }) => self.finish_job(kids, res, job, result, Some(transit)),
            Some(_) => {}
            None => println!("init: a message from unknown proxy {badge:#x}"),
        }
        self.pump(kids, res);
    }

    /// Ends `job` with the proxy's `result` (`Err`: its call failed, or
    /// the job never ran); the answer's capability, if any, is in
    /// `transit`, which is emptied.
    fn finish_job(
        &mut self,
        kids: &[Kid<'_>],
        res: &mut Resources,
        job: Job,
        result: Result<(u64, u64, u64), u64>,
        transit: Option<u32>,
    ) {
        // The wake copy is taken from the donation before init lets go of
        // it (the provider filled the table's wake slot when it opened).
        let opened = matches!(result, Ok((session::OK, _, _)));
        let wake = match (job.purpose, job.donation) {
            (Purpose::Open { .. }, Some(d)) if opened => keep_wake(res, d),
            _ => None,
        };
        if let Some(d) = job.donation {
            delete_and_free(res, d);
        }
        let pname = name_of_id(kids, job.provider).unwrap_or("?");
        let with_cap = matches!(result, Ok((_, _, caps)) if caps > 0);
        let cap = transit.filter(|_| with_cap);
        match job.purpose {
            Purpose::Open {
                client,
                service,
                donated,
            } => {
                let record = Record {
                    id: self.next_id,
                    client,
                    provider: job.provider,
                    restarts: job.restarts,
                    badge: 0,
                    wake,
                };
                let what = (&job, service, donated, record);
                self.opened(kids, res, what, result, cap);
            }
            Purpose::Close { client, badge } => {
                match result {
                    Ok((session::OK, _, _)) => {}
                    Ok((label, _, _)) => {
                        println!("init: {pname} did not close session {badge} ({label:#x})")
                    }
                    // The provider stopped: the session went with it.
                    Err(code) if code == Error::Aborted.raw() => {}
                    Err(code) => println!(
                        "init: closing a session at {pname} failed: {}",
                        error_text(code)
                    ),
                }
                if job.reply.is_some() {
                    let cname = name_of_id(kids, client).unwrap_or("?");
                    println!("init: {cname} closed its session at {pname}");
                    let _ = answer_saved(res, job.reply, session::OK, [0; 4], None);
                } else {
                    self.close_ended(res, client);
                }
            }
        }
        if let Some(t) = cap {
            // SAFETY: an endpoint capability; nothing is mapped through it.
            let _ = unsafe { syscall::cap_delete(own(t)) };
        }
    }

    /// The end of an `OPEN_SESSION` job: the client gets the session (and
    /// init records it) or the refusal; a session opened for a client
    /// that is gone is closed again.
    fn opened(
        &mut self,
        kids: &[Kid<'_>],
        res: &mut Resources,
        (job, service, donated, mut record): (&Job, [u64; 4], bool, Record),
        result: Result<(u64, u64, u64), u64>,
        cap: Option<u32>,
    ) {
        if self.open_ended(kids, res, (job, service, donated, &mut record), result, cap) {
            self.next_id += 1;
            self.records.push(record);
        } else if let Some(w) = record.wake {
            // Not recorded: nobody waits on the session's notification.
            delete_and_free(res, w);
        }
    }

    /// [`Self::opened`]'s answer: whether the client got the session
    /// (then it is recorded).
    fn open_ended(
        &mut self,
        kids: &[Kid<'_>],
        res: &mut Resources,
        (job, service, donated, record): (&Job, [u64; 4], bool, &mut Record),
        result: Result<(u64, u64, u64), u64>,
        cap: Option<u32>,
    ) -> bool {
        let (bytes, len) = session::unpack(&service);
        let service = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
        let name = name_of_id(kids, record.client).unwrap_or("?");
        let pname = name_of_id(kids, job.provider).unwrap_or("?");
        let live = kids
            .iter()
            .any(|k| k.id == job.provider && k.caps.is_some() && k.restarts == job.restarts);
        let refused = |res: &mut Resources, words: [u64; 4]| {
            let _ = answer_saved(res, job.reply, session::REFUSED_PROVIDER, words, None);
        };
        match result {
            Ok((session::OK, provider_badge, 1)) if live => {
                record.badge = provider_badge;
                let words = [record.id, 0, 0, 0];
                match answer_saved(res, job.reply, session::OK, words, cap) {
                    Ok(()) => {
                        let quota = if donated { " (quota donated)" } else { "" };
                        println!("init: {name} -> {service} session at {pname}{quota}");
                        return true;
                    }
                    Err(e) => {
                        println!(
                            "init: {name} asked for a {service} session but is gone ({e}); \
                             closing it at {pname}"
                        );
                        self.close_at_provider(record, None);
                    }
                }
            }
            Ok((session::OK, _, _)) if !live => {
                println!(
                    "init: {name} asks for a {service} session: {pname} stopped meanwhile; \
                     refused"
                );
                refused(res, [0; 4]);
            }
            Ok((label, _, _)) => {
                println!(
                    "init: {name} asks for a {service} session: {pname} refused it ({label:#x})"
                );
                refused(res, [label, 0, 0, 0]);
            }
            Err(code) => {
                println!(
                    "init: {name} asks for a {service} session: calling {pname} failed: {}",
                    error_text(code)
                );
                refused(res, [0; 4]);
            }
        }
        false
    }
}

/// The text of an error code a proxy reported.
fn error_text(code: u64) -> &'static str {
    Error::from_raw(code).map_or("unknown error", Error::text)
}

/// Saves the reply to the request init received last in a fresh slot.
fn save_reply(res: &mut Resources) -> Option<u32> {
    let slot = match res.slot() {
        Ok(slot) => slot,
        Err(e) => {
            println!("init: no slot to keep a request waiting: {e}; refused");
            return None;
        }
    };
    match syscall::save_reply(own(slot)) {
        Ok(()) => Some(slot),
        Err(e) => {
            println!("init: cannot save a request's reply: {e}; refused");
            res.free_slot(slot);
            None
        }
    }
}

/// A copy of the capability in `src` in a fresh slot.
fn copy_to_new_slot(res: &mut Resources, src: u32) -> Option<u32> {
    let slot = res.slot().ok()?;
    match syscall::cap_copy(own(src), own(slot)) {
        Ok(()) => Some(slot),
        Err(e) => {
            println!("init: cannot keep a donation: {e}; refused");
            res.free_slot(slot);
            None
        }
    }
}

/// A write copy, badged `session::PROVIDER_GONE`, of the notification the
/// provider put into the wake slot of donation table `table` (in init's
/// slot `table`), in a fresh slot; `None` if it put none.
fn keep_wake(res: &mut Resources, table: u32) -> Option<u32> {
    let slot = res.slot().ok()?;
    let wake = rt::abi::caddr::in_table(table, session::DONATED_WAKE);
    match syscall::cap_mint(wake, own(slot), Rights::WRITE, session::PROVIDER_GONE) {
        Ok(()) => Some(slot),
        Err(_) => {
            res.free_slot(slot);
            None
        }
    }
}

/// Deletes the capability in `slot` (a reply, a donation) and frees it.
fn delete_and_free(res: &mut Resources, slot: u32) {
    // SAFETY: a reply capability or a client's capability table: nothing
    // is mapped through either.
    let _ = unsafe { syscall::cap_delete(own(slot)) };
    res.free_slot(slot);
}

/// Answers the request saved in `reply` (if any) with `label`, `words`
/// and the capability in `cap`; `Aborted` if the client stopped waiting
/// (its reply capability went stale: it died or was restarted). The slot
/// is free after.
fn answer_saved(
    res: &mut Resources,
    reply: Option<u32>,
    label: u64,
    words: [u64; 4],
    cap: Option<u32>,
) -> Result<(), Error> {
    let Some(slot) = reply else {
        return Ok(());
    };
    if let Some(c) = cap {
        transfer::set_send_cap(own(c));
    }
    let info = MsgInfo::new(label, 4, cap.is_some() as usize).unwrap_or_default();
    let r = syscall::reply_to(own(slot), info, words);
    match r {
        Ok(()) => res.free_slot(slot),
        Err(_) => delete_and_free(res, slot),
    }
    r
}

/// Opens a session init serves itself (`Rom`, `Reconfig`) for child
/// `name`: init's own endpoint `own_ep`, minted write-only with
/// `session_badge` (the child's badge, `session::PARENT_SESSION` and the
/// service's bit), passed on through `transit` to `to`. Init answers it
/// itself (`rom::RomService`, `Init::on_reconfig`): no call out, so no
/// client can block init.
fn open_at_init(
    res: &mut Resources,
    to: To,
    (name, service): (&str, &str),
    (own_ep, session_badge, transit): (u32, u64, u32),
) {
    match syscall::cap_mint(own(own_ep), own(transit), Rights::WRITE, session_badge) {
        Ok(()) => {
            println!("init: {name} -> {service} session at init");
            answer(res, to, session::OK, [0; 4], Some(transit));
        }
        Err(e) => {
            println!("init: {name} asks for a {service} session: CapMint failed: {e}; refused");
            answer(res, to, session::REFUSED_PARENT, [0; 4], None);
        }
    }
}

/// Answers `to` with `label`, `words` and the capability in `cap` (which
/// init then lets go of: the client's copy stays); a saved reply's slot
/// is free after.
fn answer(res: &mut Resources, to: To, label: u64, words: [u64; 4], cap: Option<u32>) {
    match to {
        To::Caller => reply(label, words, cap),
        To::Saved(slot) => {
            if let Err(e) = answer_saved(res, Some(slot), label, words, cap) {
                println!("init: a parked client is gone ({e})");
            }
            if let Some(c) = cap {
                // SAFETY: an endpoint capability; nothing is mapped
                // through it.
                let _ = unsafe { syscall::cap_delete(own(c)) };
            }
        }
    }
}

/// Replies to the child whose request init received last, with the
/// capability in `cap` (which init then lets go of: the client's copy
/// stays).
pub fn reply(label: u64, words: [u64; 4], cap: Option<u32>) {
    if let Some(slot) = cap {
        transfer::set_send_cap(own(slot));
    }
    let info = MsgInfo::new(label, 4, cap.is_some() as usize).unwrap_or_default();
    if let Err(e) = syscall::reply(info, words) {
        println!("init: reply to a session request failed: {e}");
    }
    if let Some(slot) = cap {
        // SAFETY: an endpoint capability; nothing is mapped through it.
        if let Err(e) = unsafe { syscall::cap_delete(own(slot)) } {
            println!("init: cannot empty its transit slot: {e}");
        }
    }
}
