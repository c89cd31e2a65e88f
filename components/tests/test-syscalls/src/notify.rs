//! Notifications: `Signal`, `Wait`, `Poll` and `BindNotification`.

use core::sync::atomic::{AtomicU64, Ordering};

use rt::abi::{CapSlot, Error, ObjectType, Rights, Sys, LABEL_NOTIFICATION};
use rt::syscall;

use crate::helpers::{exit, spawn, wait_exit, yields, Spawn};
use crate::{sys2, Test, BAD_SLOT, THREAD};

/// The notification capability the signalling helper uses.
static SIGNAL_VIA: AtomicU64 = AtomicU64::new(0);

/// Helper 1: lets the main thread block in `Wait` first, then signals.
extern "C" fn signaller(_: u64) -> ! {
    yields(3);
    let r = syscall::signal(SIGNAL_VIA.load(Ordering::SeqCst));
    exit(u64::from(r.is_err()))
}

fn poll(slot: CapSlot) -> u64 {
    sys2(Sys::Poll, slot, 0).map_or(u64::MAX, |r| r[0])
}

pub fn run(t: &mut Test) {
    let ntfn = t.make(ObjectType::Notification, 0);
    t.ok(Sys::Signal, "ok", &sys2(Sys::Signal, ntfn, 0));
    t.eq(Sys::Poll, "unbadged-signal-is-1", poll(ntfn), 1);
    t.eq(Sys::Poll, "word-cleared", poll(ntfn), 0);
    let b1 = t.mint(ntfn, Rights::WRITE, 0b0101);
    let b2 = t.mint(ntfn, Rights::WRITE, 0b0010);
    for via in [b1, b2, b1] {
        t.setup("signal", sys2(Sys::Signal, via, 0));
    }
    t.eq(Sys::Signal, "badges-ored", poll(ntfn), 0b0111);

    t.setup("signal", sys2(Sys::Signal, b2, 0));
    let r = sys2(Sys::Wait, ntfn, 0);
    t.eq(
        Sys::Wait,
        "returns-at-once-when-set",
        r.map_or(u64::MAX, |r| r[0]),
        0b0010,
    );
    SIGNAL_VIA.store(b1, Ordering::SeqCst);
    spawn(t, 1, Spawn::new(signaller, 0));
    let r = sys2(Sys::Wait, ntfn, 0);
    t.eq(
        Sys::Wait,
        "woken-by-signal",
        r.map_or(u64::MAX, |r| r[0]),
        0b0101,
    );
    let signalled = wait_exit(t, 1);
    t.eq(
        Sys::Signal,
        "from-another-thread",
        signalled.unwrap_or(u64::MAX),
        0,
    );
    t.eq(Sys::Wait, "word-cleared", poll(ntfn), 0);

    let read_only = t.mint(ntfn, Rights::READ, 0);
    let ep = t.make(ObjectType::Endpoint, 0);
    let empty = t.slot();
    let cases: [(Sys, &str, CapSlot, Error); 10] = [
        (Sys::Signal, "needs-write", read_only, Error::MissingRights),
        (Sys::Signal, "wrong-type", ep, Error::WrongObjectType),
        (Sys::Signal, "empty-slot", empty, Error::EmptySlot),
        (Sys::Signal, "invalid-slot", BAD_SLOT, Error::InvalidSlot),
        (Sys::Wait, "needs-read", b1, Error::MissingRights),
        (Sys::Wait, "wrong-type", ep, Error::WrongObjectType),
        (Sys::Wait, "invalid-slot", BAD_SLOT, Error::InvalidSlot),
        (Sys::Poll, "needs-read", b1, Error::MissingRights),
        (Sys::Poll, "wrong-type", ep, Error::WrongObjectType),
        (Sys::Poll, "empty-slot", empty, Error::EmptySlot),
    ];
    for (call, case, slot, want) in cases {
        t.err(call, case, &sys2(call, slot, 0), want);
    }
    bound(t, ntfn, read_only, ep);
}

fn bound(t: &mut Test, other: CapSlot, read_only: CapSlot, ep: CapSlot) {
    let ntfn = t.make(ObjectType::Notification, 0);
    let idle = t.make(ObjectType::Endpoint, 0);
    let bind = |thread: CapSlot, n: CapSlot| sys2(Sys::BindNotification, thread, n);
    t.ok(Sys::BindNotification, "ok", &bind(THREAD, ntfn));
    t.setup("signal", sys2(Sys::Signal, ntfn, 0));
    // Nobody sends on `idle`: only the notification can end the receive.
    let r = sys2(Sys::Recv, idle, 0);
    t.ok(Sys::BindNotification, "recv-returns", &r);
    if let Ok(regs) = r {
        t.eq(
            Sys::BindNotification,
            "label",
            regs[1] >> 16,
            LABEL_NOTIFICATION,
        );
        t.eq(Sys::BindNotification, "word-in-rdi", regs[0], 1);
        t.eq(Sys::BindNotification, "no-words", regs[1] & 0xffff, 0);
    }
    t.eq(Sys::BindNotification, "word-cleared", poll(ntfn), 0);
    t.err(
        Sys::BindNotification,
        "thread-already-bound",
        &bind(THREAD, other),
        Error::InvalidState,
    );
    let thread = t.make(ObjectType::Thread, 0);
    t.err(
        Sys::BindNotification,
        "notification-already-bound",
        &bind(thread, ntfn),
        Error::InvalidState,
    );
    t.ok(Sys::BindNotification, "unbind", &bind(THREAD, 0));
    t.setup("signal", sys2(Sys::Signal, ntfn, 0));
    t.err(
        Sys::BindNotification,
        "unbound-not-delivered",
        &sys2(Sys::NbRecv, idle, 0),
        Error::WouldBlock,
    );
    t.eq(Sys::BindNotification, "unbound-word-kept", poll(ntfn), 1);
    let thread_read_only = t.mint(thread, Rights::READ, 0);
    let write_only = t.mint(ntfn, Rights::WRITE, 0);
    let cases: [(&str, CapSlot, CapSlot, Error); 6] = [
        (
            "thread-needs-write",
            thread_read_only,
            ntfn,
            Error::MissingRights,
        ),
        (
            "notification-needs-read",
            thread,
            write_only,
            Error::MissingRights,
        ),
        ("thread-wrong-type", ep, ntfn, Error::WrongObjectType),
        (
            "notification-wrong-type",
            thread,
            ep,
            Error::WrongObjectType,
        ),
        ("empty-thread", t.slot(), ntfn, Error::EmptySlot),
        ("invalid-notification", thread, BAD_SLOT, Error::InvalidSlot),
    ];
    for (case, th, n, want) in cases {
        t.err(Sys::BindNotification, case, &bind(th, n), want);
    }
    t.ok(
        Sys::BindNotification,
        "read-right-is-enough",
        &bind(thread, read_only),
    );
}
