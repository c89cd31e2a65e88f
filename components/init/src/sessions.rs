//! Init's side of sessions (docs/architecture.md, "Sessions and
//! routing"; protocol `abi::session`): a child's `OPEN` answered by its
//! routes — opened at the sibling that provides the type (with the
//! client's quota donation passed on), served by init itself (`Rom`), or
//! refused — its `CLOSE`, and the sessions init closes for a child that
//! finished. Init keeps a record of every session it opened at a provider
//! ([`Sessions`]); `Rom` sessions, which init serves itself, are not
//! recorded and not closed (yet).

use alloc::vec::Vec;

use rt::abi::caddr::own;
use rt::abi::{session, MsgInfo, Rights};
use rt::println;
use rt::session::reconfig::Reconfig;
use rt::session::rom::Rom as RomSession;
use rt::session::Interface;
use rt::syscall;
use rt::transfer;
use ucore::config::{Rom, Target};

use crate::{name_of_id, Kid};

/// A session init opened at a provider.
struct Record {
    /// Init's id for it, given to the client.
    id: u64,
    /// The client's and the provider's `Kid::id`.
    client: usize,
    provider: usize,
    /// The provider's badge for it.
    badge: u64,
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
}

impl Sessions {
    /// No sessions yet; `own_ep`, `transit`, `donation`: init's slots.
    pub fn new(own_ep: u32, transit: u32, donation: u32) -> Self {
        Sessions {
            records: Vec::new(),
            next_id: 1,
            own_ep,
            transit,
            donation,
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
    /// refused, or opened at the provider and passed on through init's
    /// transit slot.
    pub fn open(
        &mut self,
        rom: &Rom<'_>,
        kids: &[Kid<'_>],
        badge: u64,
        info: MsgInfo,
        words: &[u64; 4],
    ) {
        let (bytes, len) = session::unpack(words);
        let service = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
        let client = kids.iter().find(|k| k.id as u64 + 1 == badge);
        let Some(client) = client else {
            return reply(session::REFUSED_UNROUTED, [0; 4], None);
        };
        let name = client.component.name;
        let target = match client.component.route(service) {
            None => {
                println!("init: {name} asks for a {service} session: not routed to it; refused");
                return reply(session::REFUSED_UNROUTED, [0; 4], None);
            }
            Some(Target::Parent) => {
                let offered = rom.parent_provides().any(|s| s == service);
                let extra = match service {
                    RomSession::NAME => Some(0),
                    Reconfig::NAME => Some(session::RECONFIG_SESSION),
                    _ => None,
                };
                if let Some(extra) = extra.filter(|_| offered) {
                    let session_badge = badge | session::PARENT_SESSION | extra;
                    return open_at_init(name, service, self.own_ep, session_badge, self.transit);
                }
                println!(
                    "init: {name} asks for a {service} session: routed to the parent, which {}; \
                     refused",
                    if offered {
                        "does not serve it itself (only Rom and Reconfig)"
                    } else {
                        "does not provide it"
                    }
                );
                return reply(session::REFUSED_PARENT, [0; 4], None);
            }
            // Followed by name: the provider may have another position
            // in the config since an update.
            Some(target) => client.component.target_name(target).unwrap_or("?"),
        };
        let provider = kids.iter().find(|k| k.component.name == target);
        let Some((provider, ep)) = provider
            .and_then(|k| Some((k, k.service?)))
            .filter(|(k, _)| k.caps.is_some())
        else {
            // Stopped, but with a restart to come (after its back-off): the
            // client may ask again (`Session::reopen` does).
            let restarting = provider.is_some_and(|k| {
                k.caps.is_none() && k.component.restart.delay_ms(k.restarts + 1).is_some()
            });
            let (why, word) = match restarting {
                true => ("is being restarted", session::RESTARTING),
                false => ("is not running", 0),
            };
            println!("init: {name} asks for a {service} session: its provider {why}; refused");
            return reply(session::REFUSED_PROVIDER, [word, 0, 0, 0], None);
        };
        let donated = info.caps() > 0;
        if donated {
            transfer::set_send_cap(own(self.donation));
        }
        let info = MsgInfo::new(session::OPEN_SESSION, 4, donated as usize).unwrap_or_default();
        let pname = provider.component.name;
        let call = transfer::call_for_cap(own(ep), info, session::pack(name), own(self.transit));
        match call {
            Ok((answer, words)) if answer.label() == session::OK && answer.caps() == 1 => {
                let id = self.next_id;
                self.next_id += 1;
                self.records.push(Record {
                    id,
                    client: client.id,
                    provider: provider.id,
                    badge: words[0],
                });
                let quota = if donated { " (quota donated)" } else { "" };
                println!("init: {name} -> {service} session at {pname}{quota}");
                reply(session::OK, [id, 0, 0, 0], Some(self.transit));
            }
            Ok((answer, _)) => {
                println!(
                    "init: {name} asks for a {service} session: {pname} refused it ({:#x})",
                    answer.label()
                );
                reply(session::REFUSED_PROVIDER, [answer.label(), 0, 0, 0], None);
            }
            Err(e) => {
                println!("init: {name} asks for a {service} session: calling {pname} failed: {e}");
                reply(session::REFUSED_PROVIDER, [0; 4], None);
            }
        }
    }

    /// Answers child `badge`'s `CLOSE` of its session `words[0]`.
    pub fn close(&mut self, kids: &[Kid<'_>], badge: u64, words: &[u64; 4]) {
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
        close_at_provider(kids, &record);
        let client = name_of_id(kids, record.client).unwrap_or("?");
        let provider = name_of_id(kids, record.provider).unwrap_or("?");
        println!("init: {client} closed its session at {provider}");
        reply(session::OK, [0; 4], None);
    }

    /// Child `index` (its `Kid::id`) exited, faulted or was removed by a
    /// config update: the sessions it opened
    /// are closed at their providers, and those it provided are gone with
    /// its endpoint (their clients' capabilities with it).
    pub fn finished(&mut self, kids: &[Kid<'_>], index: usize) {
        let (mut closed, mut lost) = (0, 0);
        let mut i = 0;
        while let Some(record) = self.records.get(i) {
            if record.client == index {
                let record = self.records.swap_remove(i);
                close_at_provider(kids, &record);
                closed += 1;
            } else if record.provider == index {
                self.records.swap_remove(i);
                lost += 1;
            } else {
                i += 1;
            }
        }
        let Some(name) = name_of_id(kids, index) else {
            return;
        };
        if closed > 0 {
            println!("init: closed {closed} sessions of {name} at their providers");
        }
        if lost > 0 {
            println!("init: {lost} sessions provided by {name} closed with it");
        }
    }
}

/// Tells the provider of `record` that its session is closed (if the
/// provider still runs: else the session went with it).
fn close_at_provider(kids: &[Kid<'_>], record: &Record) {
    let Some(provider) = kids.iter().find(|k| k.id == record.provider) else {
        return;
    };
    let Some(ep) = provider.service.filter(|_| provider.caps.is_some()) else {
        return;
    };
    let info = MsgInfo::new(session::CLOSE_SESSION, 4, 0).unwrap_or_default();
    let pname = provider.component.name;
    match syscall::call(own(ep), info, [record.badge, 0, 0, 0]) {
        Ok((answer, _)) if answer.label() == session::OK => {}
        Ok((answer, _)) => println!(
            "init: {pname} did not close session {} ({:#x})",
            record.badge,
            answer.label()
        ),
        Err(e) => println!("init: closing a session at {pname} failed: {e}"),
    }
}

/// Opens a session init serves itself (`Rom`, `Reconfig`) for child
/// `name`: init's own endpoint `own_ep`, minted write-only with
/// `session_badge` (the child's badge, `session::PARENT_SESSION` and the
/// service's bit), passed on through `transit`. Init answers it itself
/// (`rom::RomService`, `reconfig::Update`): no call out, so no client can
/// block init.
fn open_at_init(name: &str, service: &str, own_ep: u32, session_badge: u64, transit: u32) {
    match syscall::cap_mint(own(own_ep), own(transit), Rights::WRITE, session_badge) {
        Ok(()) => {
            println!("init: {name} -> {service} session at init");
            reply(session::OK, [0; 4], Some(transit));
        }
        Err(e) => {
            println!("init: {name} asks for a {service} session: CapMint failed: {e}; refused");
            reply(session::REFUSED_PARENT, [0; 4], None);
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
