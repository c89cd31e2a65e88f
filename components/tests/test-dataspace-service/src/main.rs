//! test-dataspace-service: provides `Ds_test` (`protocols::ds_test`). Per
//! session it allocates a 4 KiB dataspace (`rt::dataspace`), maps it, and
//! registers a signal context (`rt::signal`) on its own notification,
//! which is bound to its thread: one provider loop
//! (`Provider::serve_with_signals`) serves the session requests and runs
//! the handlers. A handler reads the client's request from the dataspace,
//! writes the sum and the sequence number it answered, and signals the
//! client's notification (made here; the client gets it read-only).
//!
//! It also shares the dataspace read-only (the client checks that it
//! cannot map it writable) and, on request, unregisters a session's
//! context (the client checks that its capability is gone). Its
//! scenario grants it its own thread and address space (`own = ["thread",
//! "vspace"]`), to bind the notification and map the dataspaces.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use core::cell::RefCell;

use protocols::ds_test::{self, DsTest};
use rt::abi::caddr::own;
use rt::abi::{CapSlot, MsgInfo, ObjectType, Rights};
use rt::dataspace::{Attached, Dataspace, DsSize};
use rt::interfaces::child::{FIRST_FREE, OWN_THREAD, OWN_VSPACE, UNTYPED};
use rt::println;
use rt::server::answer;
use rt::session::{Donated, Label, Provider, SessionTable};
use rt::signal::{SignalContext, Signals};
use rt::syscall::{self, Words};
use rt::transfer;

rt::entry!(main);

/// The server's notification (its signal contexts' bits).
const NOTIFY: u32 = FIRST_FREE;
/// The provider's slots (two per session): from here.
const FIRST_SESSION_SLOT: u32 = FIRST_FREE + 1;
/// At most this many sessions.
const MAX_SESSIONS: u32 = 8;
/// Per session, slots from here: [`PER_SESSION`] each.
const FIRST_OBJECT_SLOT: u32 = FIRST_SESSION_SLOT + 2 * MAX_SESSIONS;
/// Slots per session: dataspace, its writable and read-only shares, the
/// context, the client's notification, its write and read copies.
const PER_SESSION: u32 = 7;
/// Where session `i`'s dataspace is mapped: `DS_VA + i * 4 KiB`.
const DS_VA: u64 = 0x40_0000_0000;

/// One session.
struct Session {
    /// The open order (which context is whose).
    id: u32,
    ds: Attached,
    /// Shares for the client: writable, read-only.
    shares: [Dataspace; 2],
    context: Option<SignalContext>,
    /// The client's notification: read-only copy (for the client) and
    /// the write copy badged with `RESULT_BIT` (for the handler).
    wake_read: u32,
    wake_write: u32,
    answered: u64,
}

/// What the signal handlers work on.
type Table = SessionTable<Option<Session>>;

fn main(_arg: u64) -> i32 {
    let made = syscall::retype(own(UNTYPED), ObjectType::Notification, 0, own(NOTIFY), 1)
        .and_then(|()| syscall::bind_notification(own(OWN_THREAD), own(NOTIFY)));
    if let Err(e) = made {
        println!("test-dataspace-service: cannot make or bind its notification: {e}");
        return 1;
    }
    let signals: RefCell<Signals<Table>> = RefCell::new(Signals::new(own(NOTIFY)));
    // Two slots per session (`Provider`).
    let provider: Provider<DsTest, Option<Session>> =
        Provider::new(FIRST_SESSION_SLOT, FIRST_SESSION_SLOT + 2 * MAX_SESSIONS);
    let mut opened = 0u32;
    let new = |client: &Label, _no_quota: Option<Donated>| {
        let index = opened;
        opened += 1;
        match open(index, &signals) {
            Ok(session) => Ok(Some(session)),
            Err(why) => {
                println!(
                    "test-dataspace-service: session for {}: {why}",
                    client.as_str()
                );
                Ok(None)
            }
        }
    };
    let dispatch = |_: &Label, session: &mut Option<Session>, label, _words: Words| {
        let Some(s) = session.as_mut() else {
            return answer(ds_test::ERROR, [0; 4]);
        };
        let bytes = DsSize::Page.bytes() as u64;
        let give = |cap: CapSlot, words: Words| {
            transfer::set_send_cap(cap);
            (MsgInfo::new(ds_test::OK, 4, 1).unwrap_or_default(), words)
        };
        match label {
            ds_test::GET_DS => give(s.shares[0].cap(), [bytes, 0, 0, 0]),
            ds_test::GET_DS_RO => give(s.shares[1].cap(), [bytes, 0, 0, 0]),
            ds_test::GET_CONTEXT => match s.context {
                Some(c) => give(c.cap, [c.bit.into(), 0, 0, 0]),
                None => answer(ds_test::ERROR, [0; 4]),
            },
            ds_test::GET_WAKEUP => give(own(s.wake_read), [0; 4]),
            ds_test::DROP_CONTEXT => match s.context.take() {
                Some(c) => match signals.borrow_mut().unregister(c) {
                    Ok(()) => answer(ds_test::OK, [s.answered, 0, 0, 0]),
                    Err(_) => answer(ds_test::ERROR, [0; 4]),
                },
                None => answer(ds_test::ERROR, [0; 4]),
            },
            _ => answer(ds_test::ERROR, [label, 0, 0, 0]),
        }
    };
    provider.serve_with_signals(&signals, new, dispatch)
}

/// Makes session `index`'s objects and registers its context.
fn open(index: u32, signals: &RefCell<Signals<Table>>) -> Result<Session, &'static str> {
    if index >= MAX_SESSIONS {
        return Err("no slots left");
    }
    let slot = |i: u32| own(FIRST_OBJECT_SLOT + index * PER_SESSION + i);
    let ds = Dataspace::alloc(own(UNTYPED), slot(0), DsSize::Page)
        .map_err(|_| "no memory for the dataspace")?;
    let shares = [
        ds.share(slot(1), true)
            .map_err(|_| "CapMint (writable share) failed")?,
        ds.share(slot(2), false)
            .map_err(|_| "CapMint (read-only share) failed")?,
    ];
    syscall::retype(own(UNTYPED), ObjectType::Notification, 0, slot(4), 1)
        .map_err(|_| "no memory for the client's notification")?;
    syscall::cap_mint(slot(4), slot(5), Rights::WRITE, 1 << ds_test::RESULT_BIT)
        .map_err(|_| "CapMint (wake-up, write) failed")?;
    syscall::cap_mint(slot(4), slot(6), Rights::READ, 0)
        .map_err(|_| "CapMint (wake-up, read) failed")?;
    // SAFETY: session `index`'s page at DS_VA is used by nothing else.
    let ds = unsafe { ds.attach(own(OWN_VSPACE), DS_VA + u64::from(index) * 4096, true) }
        .map_err(|_| "Map failed")?;
    let context = signals
        .borrow_mut()
        .register(slot(3), move |table: &mut Table| {
            let mine = table
                .iter_mut()
                .find_map(|(_, s)| s.as_mut().filter(|s| s.id == index));
            if let Some(session) = mine {
                answer_request(session);
            }
        })
        .map_err(|_| "no signal context")?;
    Ok(Session {
        id: index,
        ds,
        shares,
        context: Some(context),
        wake_read: FIRST_OBJECT_SLOT + index * PER_SESSION + 6,
        wake_write: FIRST_OBJECT_SLOT + index * PER_SESSION + 5,
        answered: 0,
    })
}

/// The signal handler's work: answers the request in the dataspace.
fn answer_request(session: &mut Session) {
    let ds = &session.ds;
    let seq = ds.read_u64(0).unwrap_or(0);
    let sum = (1..=ds_test::WORDS)
        .filter_map(|i| ds.read_u64(i * 8))
        .fold(0u64, u64::wrapping_add);
    let written = ds
        .write_u64(ds_test::SUM_AT * 8, sum)
        .and_then(|()| ds.write_u64(ds_test::ANSWERED_AT * 8, seq));
    session.answered += 1;
    if written.is_err() || syscall::signal(own(session.wake_write)).is_err() {
        println!("test-dataspace-service: cannot answer request {seq}");
    }
}
