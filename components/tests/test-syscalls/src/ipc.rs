//! IPC between the main thread and helper threads: `Send`, `NbSend`,
//! `Recv`, `NbRecv`, `Call`, `Reply`, `ReplyRecv` with 0, 4 and 64 words,
//! badges, a capability transfer, and what happens to a waiter when its
//! endpoint is deleted.
//!
//! Helper 0 is an echo server: it answers every call with label + 1 and
//! every word + 1 (the same length, so 64-word replies go through both IPC
//! buffers), and records what it received in `REC[0..8]`.

use core::sync::atomic::{AtomicU64, Ordering};

use rt::abi::{CapSlot, Error, MsgInfo, ObjectType, Rights, Sys, MAX_MESSAGE_WORDS};
use rt::syscall::{self, Words};

use crate::helpers::{
    buf_read, buf_write, clear_rec, exit, ipc_buffer, rec, set_rec, spawn, wait_exit, yields,
    Spawn, MAIN_BUFFER, RECV_SLOT, SEND_CAP,
};
use crate::{err_code, sys, sys2, Test, BAD_SLOT};

/// The echo server's endpoint.
static ECHO_EP: AtomicU64 = AtomicU64::new(0);
/// Where the echo server accepts a capability (0: none).
static ECHO_RECV_SLOT: AtomicU64 = AtomicU64::new(0);
/// The endpoint the other helpers use.
static HELPER_EP: AtomicU64 = AtomicU64::new(0);

/// Makes the echo server exit (with [`ECHO_EXIT_CODE`]) after replying.
const STOP: u64 = 0xdead;
const ECHO_EXIT_CODE: u64 = 42;
/// A call the echo server just answers (to wait for it to catch up).
const NOP: u64 = 0x300;

// What the echo server records.
const ECHO_COUNT: usize = 0;
const ECHO_BADGE: usize = 1;
const ECHO_INFO: usize = 2;
const ECHO_W0: usize = 3;
const ECHO_BUFFER_SUM: usize = 4;
const ECHO_PREVIOUS_LABEL: usize = 5;

fn info(label: u64, length: usize, caps: usize) -> MsgInfo {
    MsgInfo::new(label, length, caps).expect("valid message info")
}

fn words_plus(w: Words, n: u64) -> Words {
    w.map(|x| x.wrapping_add(n))
}

/// The echo server (helper 0); argument: its helper number.
extern "C" fn echo_server(h: u64) -> ! {
    let ep = ECHO_EP.load(Ordering::SeqCst);
    let buffer = ipc_buffer(h as usize);
    buf_write(buffer, RECV_SLOT, ECHO_RECV_SLOT.load(Ordering::SeqCst));
    let mut received = syscall::recv(ep);
    loop {
        let (badge, msg, words) = match received {
            Ok(m) => m,
            Err(_) => {
                received = syscall::recv(ep);
                continue;
            }
        };
        let length = msg.length().min(MAX_MESSAGE_WORDS);
        let mut sum = 0u64;
        for i in 4..length {
            let w = buf_read(buffer, i);
            sum = sum.wrapping_add(w);
            buf_write(buffer, i, w.wrapping_add(1));
        }
        set_rec(ECHO_PREVIOUS_LABEL, MsgInfo(rec(ECHO_INFO)).label());
        set_rec(ECHO_BADGE, badge);
        set_rec(ECHO_INFO, msg.0);
        set_rec(ECHO_W0, words[0]);
        set_rec(ECHO_BUFFER_SUM, sum);
        set_rec(ECHO_COUNT, rec(ECHO_COUNT) + 1);
        buf_write(buffer, RECV_SLOT, ECHO_RECV_SLOT.load(Ordering::SeqCst));
        let reply = info(
            msg.label().wrapping_add(1) & rt::abi::msg::MAX_LABEL,
            length,
            0,
        );
        if msg.label() == STOP {
            let _ = syscall::reply(reply, words_plus(words, 1));
            exit(ECHO_EXIT_CODE);
        }
        received = syscall::reply_recv(ep, reply, words_plus(words, 1));
    }
}

pub fn run(t: &mut Test) {
    clear_rec();
    let ep = t.make(ObjectType::Endpoint, 0);
    ECHO_EP.store(ep, Ordering::SeqCst);
    spawn(t, 0, Spawn::new(echo_server, 0));
    calls(t, ep);
    sends(t, ep);
    capability_transfer(t, ep);
    let ep2 = t.make(ObjectType::Endpoint, 0);
    HELPER_EP.store(ep2, Ordering::SeqCst);
    without_buffer(t, ep, ep2);
    receives(t, ep, ep2);
    as_server(t, ep2);
    nb_recv(t, ep2);
    aborted(t);
    // Stop the echo server: its exit code arrives at the fault endpoint.
    let r = syscall::call(ep, info(STOP, 0, 0), [0; 4]);
    t.expect(Sys::Call, "last-reply-before-exit", err_code(&r), None);
    let exit_code = wait_exit(t, 0);
    t.eq(
        Sys::ThreadExit,
        "exit-code-reported",
        exit_code.unwrap_or(u64::MAX),
        ECHO_EXIT_CODE,
    );
}

/// A call through `slot` as raw registers (rdi = badge, rsi = info, ...).
fn raw_call(slot: CapSlot, msg: MsgInfo, w: Words) -> Result<[u64; 6], u64> {
    sys(Sys::Call, [slot, msg.0, w[0], w[1], w[2], w[3]])
}

fn calls(t: &mut Test, ep: CapSlot) {
    let r = raw_call(ep, info(0x100, 0, 0), [9; 4]);
    t.ok(Sys::Call, "zero-words", &r);
    if let Ok(regs) = r {
        t.eq(
            Sys::Call,
            "zero-words-reply-info",
            regs[1],
            info(0x101, 0, 0).0,
        );
        t.eq(Sys::Call, "reply-badge-is-0", regs[0], 0);
    }
    t.eq(Sys::Call, "unbadged-arrives-as-0", rec(ECHO_BADGE), 0);

    let r = raw_call(ep, info(0x110, 4, 0), [1, 2, 3, 4]);
    t.ok(Sys::Call, "four-words", &r);
    if let Ok(regs) = r {
        t.eq(
            Sys::Call,
            "four-words-reply-info",
            regs[1],
            info(0x111, 4, 0).0,
        );
        let got = [regs[2], regs[3], regs[4], regs[5]];
        t.holds(
            Sys::Call,
            "four-words-reply",
            got == [2, 3, 4, 5],
            "words 2, 3, 4, 5",
            got[0],
        );
    }

    let mut sent = 0u64;
    for i in 4..MAX_MESSAGE_WORDS {
        buf_write(MAIN_BUFFER, i, 1000 + i as u64);
        sent += 1000 + i as u64;
    }
    let r = raw_call(ep, info(0x120, 64, 0), [10, 11, 12, 13]);
    t.ok(Sys::Call, "sixty-four-words", &r);
    t.eq(
        Sys::Call,
        "sixty-four-words-arrive",
        rec(ECHO_BUFFER_SUM),
        sent,
    );
    if let Ok(regs) = r {
        t.eq(
            Sys::Call,
            "sixty-four-words-reply-info",
            regs[1],
            info(0x121, 64, 0).0,
        );
        t.eq(Sys::Call, "sixty-four-words-reply-w3", regs[5], 14);
        let wrong = (4..MAX_MESSAGE_WORDS)
            .filter(|&i| buf_read(MAIN_BUFFER, i) != 1001 + i as u64)
            .count();
        t.eq(Sys::Call, "sixty-four-words-reply-buffer", wrong as u64, 0);
    }

    buffer_replaced(t, ep);

    let badged = t.mint(ep, Rights::WRITE, 0x55);
    let r = raw_call(badged, info(NOP, 0, 0), [0; 4]);
    t.ok(Sys::Call, "badged", &r);
    t.eq(Sys::Call, "badge-arrives", rec(ECHO_BADGE), 0x55);

    let read_only = t.mint(ep, Rights::READ, 0);
    let ntfn = t.make(ObjectType::Notification, 0);
    let empty = t.slot();
    let cases: [(&str, CapSlot, Error); 4] = [
        ("empty-slot", empty, Error::EmptySlot),
        ("invalid-slot", BAD_SLOT, Error::InvalidSlot),
        ("wrong-type", ntfn, Error::WrongObjectType),
        ("needs-write", read_only, Error::MissingRights),
    ];
    for (case, slot, want) in cases {
        t.err(
            Sys::Call,
            case,
            &raw_call(slot, info(NOP, 0, 0), [0; 4]),
            want,
        );
    }
}

/// The label of the message the echo server got before the last one,
/// after a `NOP` call made sure it has handled everything sent so far.
/// The kernel keeps the translation of a thread's IPC buffer address
/// until its address space unmaps something: after the echo server's
/// buffer frame is unmapped and a fresh one mapped at the same address, a
/// long message must arrive in the fresh frame (the server adds up what it
/// finds there) and the reply come from it.
fn buffer_replaced(t: &mut Test, ep: CapSlot) {
    let old = t.buffer_frames[0];
    t.setup("unmap", sys(Sys::Unmap, [old, 0, 0, 0, 0, 0]));
    t.buffer_frames[0] = crate::helpers::map_new_frame(t, ipc_buffer(0));
    let mut sent = 0u64;
    for i in 4..MAX_MESSAGE_WORDS {
        buf_write(MAIN_BUFFER, i, 5000 + i as u64);
        sent += 5000 + i as u64;
    }
    let r = raw_call(ep, info(0x130, 64, 0), [1, 2, 3, 4]);
    t.ok(Sys::Call, "long-after-buffer-replaced", &r);
    t.eq(
        Sys::Call,
        "long-arrives-in-the-new-buffer",
        rec(ECHO_BUFFER_SUM),
        sent,
    );
    let wrong = (4..MAX_MESSAGE_WORDS)
        .filter(|&i| buf_read(MAIN_BUFFER, i) != 5001 + i as u64)
        .count();
    t.eq(Sys::Call, "reply-from-the-new-buffer", wrong as u64, 0);
}

fn previous_label(ep: CapSlot) -> u64 {
    let _ = syscall::call(ep, info(NOP, 0, 0), [0; 4]);
    rec(ECHO_PREVIOUS_LABEL)
}

fn sends(t: &mut Test, ep: CapSlot) {
    let send = |s: Sys, slot: CapSlot, raw_info: u64| sys(s, [slot, raw_info, 7, 0, 0, 0]);
    t.ok(Sys::Send, "ok", &send(Sys::Send, ep, info(0x200, 1, 0).0));
    t.eq(Sys::Send, "delivered", previous_label(ep), 0x200);
    // The echo server waits in ReplyRecv again after every call.
    t.ok(
        Sys::NbSend,
        "receiver-waiting",
        &send(Sys::NbSend, ep, info(0x210, 1, 0).0),
    );
    t.eq(Sys::NbSend, "delivered", previous_label(ep), 0x210);
    let idle = t.make(ObjectType::Endpoint, 0);
    t.err(
        Sys::NbSend,
        "no-receiver",
        &send(Sys::NbSend, idle, info(0x220, 0, 0).0),
        Error::WouldBlock,
    );

    let read_only = t.mint(ep, Rights::READ, 0);
    let write_only = t.mint(ep, Rights::WRITE, 0);
    let ntfn = t.make(ObjectType::Notification, 0);
    let empty = t.slot();
    let ok_info = info(0x230, 0, 0).0;
    let cases: [(&str, CapSlot, u64, Error); 7] = [
        ("empty-slot", empty, ok_info, Error::EmptySlot),
        ("invalid-slot", BAD_SLOT, ok_info, Error::InvalidSlot),
        ("wrong-type", ntfn, ok_info, Error::WrongObjectType),
        ("needs-write", read_only, ok_info, Error::MissingRights),
        ("length-65", ep, 65, Error::InvalidArgument),
        ("two-caps", ep, 2 << 8, Error::InvalidArgument),
        (
            "cap-needs-grant",
            write_only,
            info(0x240, 0, 1).0,
            Error::MissingRights,
        ),
    ];
    for (case, slot, raw_info, want) in cases {
        t.err(Sys::Send, case, &send(Sys::Send, slot, raw_info), want);
        t.err(Sys::NbSend, case, &send(Sys::NbSend, slot, raw_info), want);
    }
}

fn capability_transfer(t: &mut Test, ep: CapSlot) {
    let ntfn = t.make(ObjectType::Notification, 0);
    let landing = t.slot();
    ECHO_RECV_SLOT.store(landing, Ordering::SeqCst);
    let _ = previous_label(ep); // the echo server re-arms its receive slot
    buf_write(MAIN_BUFFER, SEND_CAP, ntfn);
    let r = raw_call(ep, info(0x400, 0, 1), [0; 4]);
    t.ok(Sys::Call, "capability-transfer", &r);
    t.eq(
        Sys::Call,
        "capability-arrives",
        MsgInfo(rec(ECHO_INFO)).caps() as u64,
        1,
    );
    let works = sys2(Sys::Signal, landing, 0).and_then(|_| sys2(Sys::Poll, ntfn, 0));
    t.eq(
        Sys::Call,
        "transferred-capability-works",
        works.map_or(0, |r| r[0]),
        1,
    );

    ECHO_RECV_SLOT.store(0, Ordering::SeqCst);
    let _ = previous_label(ep);
    let r = raw_call(ep, info(0x410, 0, 1), [0; 4]);
    t.ok(Sys::Call, "capability-refused-by-receiver", &r);
    t.eq(
        Sys::Call,
        "receiver-accepts-none",
        MsgInfo(rec(ECHO_INFO)).caps() as u64,
        0,
    );

    // A capability that cannot be transferred does not stop the message:
    // it arrives with caps = 0 (kernel/src/ipc.rs; docs/abi.md is silent).
    let landing = t.slot();
    ECHO_RECV_SLOT.store(landing, Ordering::SeqCst);
    let _ = previous_label(ep);
    let empty = t.slot();
    buf_write(MAIN_BUFFER, SEND_CAP, empty);
    let r = raw_call(ep, info(0x420, 0, 1), [0; 4]);
    t.ok(Sys::Call, "send-cap-empty-slot", &r);
    t.eq(
        Sys::Call,
        "empty-send-cap-arrives-as-none",
        MsgInfo(rec(ECHO_INFO)).caps() as u64,
        0,
    );
    t.err(
        Sys::Call,
        "landing-slot-stays-empty",
        &sys2(Sys::Signal, landing, 0),
        Error::EmptySlot,
    );
    buf_write(MAIN_BUFFER, SEND_CAP, 0);
    ECHO_RECV_SLOT.store(0, Ordering::SeqCst);
}

/// Helper 2 without an IPC buffer: a long send fails with `BadAddress`; a
/// long message to it is cut to the register words.
extern "C" fn no_buffer(_: u64) -> ! {
    let ep = ECHO_EP.load(Ordering::SeqCst);
    let r = syscall::nb_send(ep, info(0x500, 5, 0), [0; 4]);
    set_rec(8, err_code(&r));
    let r = syscall::recv(HELPER_EP.load(Ordering::SeqCst));
    set_rec(9, err_code(&r));
    set_rec(10, r.map_or(0, |(_, msg, _)| msg.0));
    exit(0)
}

fn without_buffer(t: &mut Test, ep: CapSlot, ep2: CapSlot) {
    let _ = previous_label(ep); // the echo server is waiting
    let mut s = Spawn::new(no_buffer, 0);
    s.ipc_buffer = false;
    spawn(t, 2, s);
    let r = syscall::send(ep2, info(0x510, 10, 0), [1, 2, 3, 4]);
    t.expect(Sys::Send, "to-receiver-without-buffer", err_code(&r), None);
    wait_exit(t, 2);
    t.expect(
        Sys::NbSend,
        "long-without-buffer",
        rec(8),
        Some(Error::BadAddress),
    );
    t.expect(Sys::Recv, "without-buffer", rec(9), None);
    t.eq(
        Sys::Recv,
        "without-buffer-cut-to-registers",
        rec(10),
        info(0x510, 4, 0).0,
    );
}

fn receives(t: &mut Test, ep: CapSlot, idle: CapSlot) {
    let write_only = t.mint(ep, Rights::WRITE, 0);
    let ntfn = t.make(ObjectType::Notification, 0);
    let empty = t.slot();
    for s in [Sys::Recv, Sys::NbRecv] {
        t.err(
            s,
            "needs-read",
            &sys2(s, write_only, 0),
            Error::MissingRights,
        );
        t.err(s, "wrong-type", &sys2(s, ntfn, 0), Error::WrongObjectType);
        t.err(s, "empty-slot", &sys2(s, empty, 0), Error::EmptySlot);
        t.err(s, "invalid-slot", &sys2(s, BAD_SLOT, 0), Error::InvalidSlot);
    }
    t.err(
        Sys::NbRecv,
        "no-sender",
        &sys2(Sys::NbRecv, idle, 0),
        Error::WouldBlock,
    );
    t.err(
        Sys::ReplyRecv,
        "empty-slot",
        &sys2(Sys::ReplyRecv, empty, 0),
        Error::EmptySlot,
    );
}

/// Helper 1: a client of the main thread (see `as_server`).
extern "C" fn client(_: u64) -> ! {
    let ep = HELPER_EP.load(Ordering::SeqCst);
    let buffer = ipc_buffer(1);
    set_rec(8, err_code(&syscall::send(ep, info(0x3ff, 0, 0), [0; 4])));
    match syscall::call(ep, info(0x400, 4, 0), [1, 2, 3, 4]) {
        Ok((reply, w)) => {
            set_rec(9, reply.0);
            let right = (4..MAX_MESSAGE_WORDS)
                .filter(|&i| buf_read(buffer, i) == 3000 + i as u64)
                .count();
            set_rec(10, right as u64);
            set_rec(11, w.iter().sum());
        }
        Err(e) => set_rec(9, e.raw()),
    }
    for i in 4..MAX_MESSAGE_WORDS {
        buf_write(buffer, i, 2000 + i as u64);
    }
    match syscall::call(ep, info(0x402, 64, 0), [5, 6, 7, 8]) {
        Ok((reply, _)) => set_rec(12, reply.0),
        Err(e) => set_rec(12, e.raw()),
    }
    exit(0)
}

fn as_server(t: &mut Test, ep2: CapSlot) {
    clear_rec();
    let badged = t.mint(ep2, Rights::WRITE, 0x66);
    HELPER_EP.store(badged, Ordering::SeqCst);
    let reply =
        |label: u64, length: usize| sys(Sys::Reply, [0, info(label, length, 0).0, 10, 20, 30, 40]);
    t.err(Sys::Reply, "no-caller", &reply(0x1, 0), Error::NoCaller);
    spawn(t, 1, Spawn::new(client, 0));

    let r = sys(Sys::ReplyRecv, [ep2, info(0x1, 0, 0).0, 0, 0, 0, 0]);
    t.ok(Sys::ReplyRecv, "no-caller-is-not-an-error", &r);
    t.eq(
        Sys::ReplyRecv,
        "received-send",
        r.map_or(0, |x| MsgInfo(x[1]).label()),
        0x3ff,
    );
    t.err(Sys::Reply, "after-a-send", &reply(0x1, 0), Error::NoCaller);

    let r = sys2(Sys::Recv, ep2, 0);
    t.ok(Sys::Recv, "ok", &r);
    if let Ok(regs) = r {
        t.eq(Sys::Recv, "badge", regs[0], 0x66);
        t.eq(Sys::Recv, "info", regs[1], info(0x400, 4, 0).0);
        let got = [regs[2], regs[3], regs[4], regs[5]];
        t.holds(
            Sys::Recv,
            "four-words",
            got == [1, 2, 3, 4],
            "words 1, 2, 3, 4",
            got[0],
        );
    }
    for i in 4..MAX_MESSAGE_WORDS {
        buf_write(MAIN_BUFFER, i, 3000 + i as u64);
    }
    let r = sys(Sys::ReplyRecv, [ep2, info(0x401, 64, 0).0, 10, 20, 30, 40]);
    t.ok(Sys::ReplyRecv, "reply-64-words-then-receive", &r);
    if let Ok(regs) = r {
        t.eq(
            Sys::ReplyRecv,
            "received-info",
            regs[1],
            info(0x402, 64, 0).0,
        );
        t.eq(Sys::ReplyRecv, "received-w3", regs[5], 8);
        let wrong = (4..MAX_MESSAGE_WORDS)
            .filter(|&i| buf_read(MAIN_BUFFER, i) != 2000 + i as u64)
            .count();
        t.eq(Sys::ReplyRecv, "received-64-words", wrong as u64, 0);
    }
    let empty = t.slot();
    let r = sys(Sys::ReplyRecv, [empty, info(0x1, 0, 0).0, 0, 0, 0, 0]);
    t.err(
        Sys::ReplyRecv,
        "bad-slot-changes-nothing",
        &r,
        Error::EmptySlot,
    );
    t.ok(Sys::Reply, "ok", &reply(0x403, 0));
    t.err(
        Sys::Reply,
        "already-answered",
        &reply(0x404, 0),
        Error::NoCaller,
    );

    let exit_code = wait_exit(t, 1);
    t.eq(
        Sys::ThreadExit,
        "client-exit-code",
        exit_code.unwrap_or(u64::MAX),
        0,
    );
    t.expect(Sys::Send, "blocking-until-received", rec(8), None);
    t.eq(Sys::Call, "reply-info", rec(9), info(0x401, 64, 0).0);
    t.eq(
        Sys::Call,
        "reply-64-words-arrive",
        rec(10),
        (MAX_MESSAGE_WORDS - 4) as u64,
    );
    t.eq(Sys::Call, "reply-register-words", rec(11), 100);
    t.eq(Sys::Call, "second-reply-info", rec(12), info(0x403, 0, 0).0);
}

/// Helper 1: sends one word and exits.
extern "C" fn sender(_: u64) -> ! {
    let r = syscall::send(
        HELPER_EP.load(Ordering::SeqCst),
        info(0x600, 1, 0),
        [77, 0, 0, 0],
    );
    exit(err_code(&r))
}

fn nb_recv(t: &mut Test, ep2: CapSlot) {
    HELPER_EP.store(ep2, Ordering::SeqCst);
    spawn(t, 1, Spawn::new(sender, 0));
    let mut r = Err(0);
    for _ in 0..100 {
        r = sys2(Sys::NbRecv, ep2, 0);
        if r != Err(Error::WouldBlock.raw()) {
            break;
        }
        yields(1);
    }
    t.ok(Sys::NbRecv, "sender-waiting", &r);
    if let Ok(regs) = r {
        t.eq(Sys::NbRecv, "info", regs[1], info(0x600, 1, 0).0);
        t.eq(Sys::NbRecv, "word", regs[2], 77);
    }
    let exit_code = wait_exit(t, 1);
    t.eq(Sys::Send, "sender-done", exit_code.unwrap_or(u64::MAX), 0);
}

/// Helper 2: waits on an endpoint that is then deleted.
extern "C" fn waiter(_: u64) -> ! {
    set_rec(8, 1);
    let r = syscall::recv(HELPER_EP.load(Ordering::SeqCst));
    set_rec(9, err_code(&r));
    exit(0)
}

fn aborted(t: &mut Test) {
    clear_rec();
    let ep = t.make(ObjectType::Endpoint, 0);
    HELPER_EP.store(ep, Ordering::SeqCst);
    spawn(t, 2, Spawn::new(waiter, 0));
    yields(5);
    t.eq(Sys::Recv, "waiter-started", rec(8), 1);
    t.ok(
        Sys::CapDelete,
        "endpoint-with-waiter",
        &sys2(Sys::CapDelete, ep, 0),
    );
    wait_exit(t, 2);
    t.expect(
        Sys::CapDelete,
        "waiter-gets-aborted",
        rec(9),
        Some(Error::Aborted),
    );
}
