//! Init's side of sessions (docs/architecture.md, "Sessions and
//! routing"; protocol `abi::session`): a child's `OPEN` answered by its
//! routes — opened at the sibling that provides the type, served by init
//! itself (`Rom`), or refused — and the replies that carry a session
//! capability through init's transit slot.

use rt::abi::caddr::own;
use rt::abi::{session, MsgInfo, Rights};
use rt::println;
use rt::session::rom::Rom as RomSession;
use rt::session::Interface;
use rt::syscall;
use rt::transfer;
use ucore::config::{Rom, Target};

use crate::Kid;

/// Answers child `badge`'s request for a session of the type in `words`
/// (`abi::session`, "Sessions and routing" in docs/architecture.md): by
/// its routes, refused, or opened at the provider and passed on through
/// init's slot `transit`.
pub fn answer_open(
    rom: &Rom<'_>,
    kids: &[Kid<'_>],
    badge: u64,
    words: &[u64; 4],
    (own_ep, transit): (u32, u32),
) {
    let (bytes, len) = session::unpack(words);
    let service = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
    let client = kids.iter().find(|k| k.component.index as u64 + 1 == badge);
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
            if offered && service == RomSession::NAME {
                return open_rom(name, own_ep, badge, transit);
            }
            println!(
                "init: {name} asks for a {service} session: routed to the parent, which {}; \
                 refused",
                if offered {
                    "does not serve it itself (only Rom)"
                } else {
                    "does not provide it"
                }
            );
            return reply(session::REFUSED_PARENT, [0; 4], None);
        }
        Some(Target::Component(i)) => i,
    };
    let provider = kids.iter().find(|k| k.component.index == target);
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
    let info = MsgInfo::new(session::OPEN_SESSION, 4, 0).unwrap_or_default();
    let pname = provider.component.name;
    match transfer::call_for_cap(own(ep), info, session::pack(name), own(transit)) {
        Ok((answer, _)) if answer.label() == session::OK && answer.caps() == 1 => {
            println!("init: {name} -> {service} session at {pname}");
            reply(session::OK, [0; 4], Some(transit));
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

/// Opens a ROM session for child `badge` (`name`): init's own endpoint
/// `own_ep`, minted write-only with the child's badge and
/// `session::PARENT_SESSION`, passed on through `transit`. Init answers it
/// itself ([`RomService`]): no call out, so no client can block init.
fn open_rom(name: &str, own_ep: u32, badge: u64, transit: u32) {
    let session_badge = badge | session::PARENT_SESSION;
    match syscall::cap_mint(own(own_ep), own(transit), Rights::WRITE, session_badge) {
        Ok(()) => {
            println!("init: {name} -> Rom session at init");
            reply(session::OK, [0; 4], Some(transit));
        }
        Err(e) => {
            println!("init: {name} asks for a Rom session: CapMint failed: {e}; refused");
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
