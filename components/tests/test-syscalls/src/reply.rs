//! Reply capabilities (`SaveReply`, `ReplyTo`; docs/abi.md, "Reply
//! capabilities"): a saved call answered later and out of order, the
//! error paths of both calls, and what happens to a saved reply when its
//! capability is deleted unanswered, when its caller is suspended or
//! destroyed meanwhile (the capability goes stale), when the thread that
//! saved it is gone or the table holding it is destroyed, when a message
//! names it as its capability (it is not transferred), and for a saved
//! fault (a pager answering later).
//!
//! Helpers 1 and 2 are clients: each calls [`REPLY_EP`] once with its
//! number as word 0 and records the answer (label, word 0 or the error) in
//! `REC[h * 2 .. h * 2 + 2]`, the answer's capability count in
//! `REC[CAPS + h]`. Helper 3 is a server that saves one call and
//! exits without answering.

use core::sync::atomic::{AtomicU64, Ordering};

use rt::abi::caddr::{in_table, split};
use rt::abi::fault::LABEL_PAGE_FAULT;
use rt::abi::{CapSlot, Error, MsgInfo, ObjectType, Rights, Sys};
use rt::syscall;

use crate::helpers::{
    buf_write, clear_rec, exit, ipc_buffer, map_new_frame, next_report, rec, set_rec, spawn,
    wait_exit, yields, Report, Spawn, MAIN_BUFFER, RECV_SLOT, SEND_CAP,
};
use crate::{err_code, sys, sys2, Test, BAD_SLOT, TEST_BASE};

/// The endpoint the clients call.
static REPLY_EP: AtomicU64 = AtomicU64::new(0);
/// Where helper 3 saves the call it receives.
static SAVE_SLOT: AtomicU64 = AtomicU64::new(0);
/// A page the fault check leaves unmapped until the helper touches it.
const REPLY_VA: u64 = TEST_BASE + 0x1e_0000;
/// Where client h records how many capabilities its answer carried.
const CAPS: usize = 8;
/// The label of a client's call and of the answers.
const CALL: u64 = 0x700;
const ANSWER: u64 = 0x701;

fn info(label: u64, length: usize) -> MsgInfo {
    MsgInfo::new(label, length, 0).expect("valid message info")
}

/// Helpers 1 and 2: one call, the answer recorded.
extern "C" fn client(h: u64) -> ! {
    let i = h as usize * 2;
    match syscall::call(REPLY_EP.load(Ordering::SeqCst), info(CALL, 1), [h, 0, 0, 0]) {
        Ok((answer, w)) => {
            set_rec(i, answer.label());
            set_rec(i + 1, w[0]);
            set_rec(CAPS + h as usize, answer.caps() as u64);
        }
        Err(e) => set_rec(i, e.raw()),
    }
    exit(0)
}

/// Helper 3: receives one call, saves it, exits.
extern "C" fn saving_server(_: u64) -> ! {
    let _ = syscall::recv(REPLY_EP.load(Ordering::SeqCst));
    let r = syscall::save_reply(SAVE_SLOT.load(Ordering::SeqCst));
    exit(err_code(&r))
}

/// Helper 1 for the fault check: reads the unmapped page.
extern "C" fn touch(_: u64) -> ! {
    // SAFETY: `REPLY_VA` is unmapped: the read faults, the main thread
    // saves the fault, maps a frame there and answers, and the read is
    // retried. Volatile: the page changes under us.
    let value = unsafe { (REPLY_VA as *const u64).read_volatile() };
    exit(value)
}

fn save(slot: CapSlot) -> Result<[u64; 6], u64> {
    sys2(Sys::SaveReply, slot, 0)
}

fn reply_to(slot: CapSlot, label: u64, w0: u64) -> Result<[u64; 6], u64> {
    sys(Sys::ReplyTo, [slot, info(label, 1).0, w0, 0, 0, 0])
}

/// Receives one call on `ep`; its word 0 (the client's number).
fn receive(t: &mut Test, ep: CapSlot) -> u64 {
    t.setup("receive a call", sys2(Sys::Recv, ep, 0))
        .map_or(0, |r| r[2])
}

pub fn run(t: &mut Test) {
    let ep = t.make(ObjectType::Endpoint, 0);
    REPLY_EP.store(ep, Ordering::SeqCst);
    errors(t, ep);
    out_of_order(t, ep);
    deleted_unanswered(t, ep);
    table_destroyed(t, ep);
    not_transferred(t, ep);
    stale(t, ep);
    saver_gone(t);
    saved_fault(t);
}

fn errors(t: &mut Test, ep: CapSlot) {
    let slot = t.slot();
    t.err(Sys::SaveReply, "no-caller", &save(slot), Error::NoCaller);
    t.err(
        Sys::SaveReply,
        "bad-slot",
        &save(BAD_SLOT),
        Error::InvalidSlot,
    );
    t.err(
        Sys::ReplyTo,
        "bad-slot",
        &reply_to(BAD_SLOT, ANSWER, 0),
        Error::InvalidSlot,
    );
    t.err(
        Sys::ReplyTo,
        "empty-slot",
        &reply_to(slot, ANSWER, 0),
        Error::EmptySlot,
    );
    t.err(
        Sys::ReplyTo,
        "not-a-reply-capability",
        &reply_to(ep, ANSWER, 0),
        Error::WrongObjectType,
    );

    clear_rec();
    spawn(t, 1, Spawn::new(client, 1));
    receive(t, ep);
    let occupied = t.make(ObjectType::Notification, 0);
    t.err(
        Sys::SaveReply,
        "occupied-slot",
        &save(occupied),
        Error::SlotOccupied,
    );
    t.ok(Sys::SaveReply, "ok", &save(slot));
    t.err(
        Sys::Reply,
        "after-save-reply",
        &sys(Sys::Reply, [0, info(ANSWER, 1).0, 0, 0, 0, 0]),
        Error::NoCaller,
    );
    let other = t.slot();
    t.err(Sys::SaveReply, "twice", &save(other), Error::NoCaller);
    let copy = t.slot();
    t.err(
        Sys::CapCopy,
        "reply-capability",
        &sys2(Sys::CapCopy, slot, copy),
        Error::InvalidArgument,
    );
    let mint = sys(Sys::CapMint, [slot, copy, Rights::WRITE.raw(), 0, 0, 0]);
    t.err(
        Sys::CapMint,
        "reply-capability",
        &mint,
        Error::InvalidArgument,
    );
    let bad_info = sys(Sys::ReplyTo, [slot, MsgInfo(65).0, 0, 0, 0, 0]);
    t.err(
        Sys::ReplyTo,
        "bad-message-info",
        &bad_info,
        Error::InvalidArgument,
    );
    t.ok(Sys::ReplyTo, "ok", &reply_to(slot, ANSWER, 42));
    t.err(
        Sys::ReplyTo,
        "used-up",
        &reply_to(slot, ANSWER, 0),
        Error::EmptySlot,
    );
    wait_exit(t, 1);
    t.eq(Sys::ReplyTo, "answer-label", rec(2), ANSWER);
    t.eq(Sys::ReplyTo, "answer-word", rec(3), 42);
}

/// Two calls saved, answered in the reverse order.
fn out_of_order(t: &mut Test, ep: CapSlot) {
    clear_rec();
    spawn(t, 1, Spawn::new(client, 1));
    spawn(t, 2, Spawn::new(client, 2));
    let (a, b) = (t.slot(), t.slot());
    let first = receive(t, ep);
    t.ok(Sys::SaveReply, "first-of-two", &save(a));
    let second = receive(t, ep);
    t.ok(Sys::SaveReply, "second-of-two", &save(b));
    t.ok(
        Sys::ReplyTo,
        "second-first",
        &reply_to(b, ANSWER, second + 100),
    );
    yields(3);
    t.eq(
        Sys::ReplyTo,
        "first-still-waits",
        rec(first as usize * 2),
        0,
    );
    t.ok(
        Sys::ReplyTo,
        "first-last",
        &reply_to(a, ANSWER, first + 100),
    );
    // The one answered first exits first.
    wait_exit(t, second as usize);
    wait_exit(t, first as usize);
    for h in [1, 2] {
        let answered = rec(h * 2) == ANSWER && rec(h * 2 + 1) == h as u64 + 100;
        t.holds(
            Sys::ReplyTo,
            "each-gets-its-answer",
            answered,
            "its answer",
            rec(h * 2 + 1),
        );
    }
}

/// Deleting a saved reply unanswered aborts the call.
fn deleted_unanswered(t: &mut Test, ep: CapSlot) {
    clear_rec();
    spawn(t, 1, Spawn::new(client, 1));
    receive(t, ep);
    let slot = t.slot();
    t.setup("save", save(slot));
    t.ok(
        Sys::CapDelete,
        "unanswered-reply",
        &sys2(Sys::CapDelete, slot, 0),
    );
    wait_exit(t, 1);
    t.expect(
        Sys::CapDelete,
        "reply-caller-aborted",
        rec(2),
        Some(Error::Aborted),
    );
}

/// The capability table holding a saved reply is destroyed (as when the
/// component that saved it goes): the call is aborted.
fn table_destroyed(t: &mut Test, ep: CapSlot) {
    clear_rec();
    let table = t.make(ObjectType::CapTable, 2);
    spawn(t, 1, Spawn::new(client, 1));
    receive(t, ep);
    let (_, index) = split(table);
    t.ok(
        Sys::SaveReply,
        "into-another-table",
        &save(in_table(index, 1)),
    );
    t.ok(
        Sys::CapDelete,
        "table-with-reply",
        &sys2(Sys::CapDelete, table, 0),
    );
    wait_exit(t, 1);
    t.expect(
        Sys::CapDelete,
        "table-gone-caller-aborted",
        rec(2),
        Some(Error::Aborted),
    );
}

/// A reply capability named in a message is not transferred (the
/// message arrives without it) and stays where it is.
fn not_transferred(t: &mut Test, ep: CapSlot) {
    clear_rec();
    let target = t.slot();
    buf_write(ipc_buffer(2), RECV_SLOT, target);
    spawn(t, 1, Spawn::new(client, 1));
    spawn(t, 2, Spawn::new(client, 2));
    let first = receive(t, ep);
    let saved = t.slot();
    t.setup("save", save(saved));
    let second = receive(t, ep);
    if (first, second) != (1, 2) {
        t.holds(Sys::ReplyTo, "callers-in-order", false, "1 then 2", first);
    }
    buf_write(MAIN_BUFFER, SEND_CAP, saved);
    let with_cap = MsgInfo::new(ANSWER, 1, 1).expect("valid message info");
    t.ok(
        Sys::Reply,
        "naming-a-reply-capability",
        &sys(Sys::Reply, [0, with_cap.0, 5, 0, 0, 0]),
    );
    wait_exit(t, 2);
    t.eq(
        Sys::Reply,
        "reply-capability-not-transferred",
        rec(CAPS + 2),
        0,
    );
    let empty = sys2(Sys::CapDelete, target, 0);
    t.err(Sys::CapDelete, "no-copy-arrived", &empty, Error::EmptySlot);
    t.ok(
        Sys::ReplyTo,
        "still-answers-after",
        &reply_to(saved, ANSWER, 6),
    );
    wait_exit(t, 1);
    t.eq(Sys::ReplyTo, "kept-reply-answered", rec(3), 6);
    buf_write(ipc_buffer(2), RECV_SLOT, 0);
}

/// A caller suspended or destroyed meanwhile: the capability is stale.
fn stale(t: &mut Test, ep: CapSlot) {
    clear_rec();
    let client_thread = spawn(t, 1, Spawn::new(client, 1));
    receive(t, ep);
    let slot = t.slot();
    t.setup("save", save(slot));
    t.setup("suspend", sys2(Sys::ThreadSuspend, client_thread, 0));
    t.err(
        Sys::ReplyTo,
        "caller-suspended",
        &reply_to(slot, ANSWER, 0),
        Error::Aborted,
    );
    t.ok(
        Sys::CapDelete,
        "stale-reply",
        &sys2(Sys::CapDelete, slot, 0),
    );
    t.setup("resume", sys2(Sys::ThreadResume, client_thread, 0));
    wait_exit(t, 1);
    t.expect(
        Sys::ThreadSuspend,
        "saved-caller-aborted",
        rec(2),
        Some(Error::Aborted),
    );

    clear_rec();
    let client_thread = spawn(t, 2, Spawn::new(client, 2));
    receive(t, ep);
    let slot = t.slot();
    t.setup("save", save(slot));
    // The last capability to the client: it is destroyed.
    t.setup("delete client", sys2(Sys::CapDelete, client_thread, 0));
    // Its memory could be another object now: the stale capability must
    // not reach it. Retyping more threads reuses nothing here (the
    // watermark), but the kernel must not read the thread either way.
    t.err(
        Sys::ReplyTo,
        "caller-destroyed",
        &reply_to(slot, ANSWER, 0),
        Error::Aborted,
    );
    t.ok(
        Sys::CapDelete,
        "stale-reply-of-destroyed",
        &sys2(Sys::CapDelete, slot, 0),
    );
    t.eq(Sys::ReplyTo, "destroyed-caller-got-nothing", rec(4), 0);
}

/// The thread that saved a reply is gone: the capability (in the shared
/// capability space) still answers.
fn saver_gone(t: &mut Test) {
    clear_rec();
    let slot = t.slot();
    SAVE_SLOT.store(slot, Ordering::SeqCst);
    let server = spawn(t, 3, Spawn::new(saving_server, 0));
    yields(3);
    spawn(t, 1, Spawn::new(client, 1));
    let code = wait_exit(t, 3);
    t.eq(Sys::SaveReply, "by-helper", code.unwrap_or(u64::MAX), 0);
    t.setup("delete server", sys2(Sys::CapDelete, server, 0));
    t.ok(Sys::ReplyTo, "saver-destroyed", &reply_to(slot, ANSWER, 7));
    wait_exit(t, 1);
    t.eq(Sys::ReplyTo, "answer-after-saver-gone", rec(3), 7);
}

/// A fault saved and answered later: the faulting thread retries.
fn saved_fault(t: &mut Test) {
    spawn(t, 1, Spawn::new(touch, 0));
    let Some(Report::Fault(label, _)) = next_report(t, 1) else {
        t.holds(Sys::SaveReply, "fault-arrives", false, "a fault", 0);
        return;
    };
    t.eq(Sys::SaveReply, "fault-label", label, LABEL_PAGE_FAULT);
    let slot = t.slot();
    t.ok(Sys::SaveReply, "fault", &save(slot));
    map_new_frame(t, REPLY_VA);
    // SAFETY: just mapped writable (checked by `setup`).
    unsafe { (REPLY_VA as *mut u64).write_volatile(0xfa17) };
    t.ok(Sys::ReplyTo, "fault", &reply_to(slot, 0, 0));
    let code = wait_exit(t, 1);
    t.eq(
        Sys::ReplyTo,
        "faulting-thread-resumed",
        code.unwrap_or(0),
        0xfa17,
    );
}
