//! Capability calls: `CapCopy`, `CapMint`, `CapDelete`, `CapRevoke` and
//! `Retype`, with two-level capability addresses (`abi::caddr`).

use rt::abi::caddr::{in_table, split};
use rt::abi::object::MIN_PT_POOL_BITS;
use rt::abi::{CapSlot, Error, MsgInfo, ObjectType, Rights, Sys};

use crate::helpers::delete;
use crate::{sys, sys2, Test, BAD_SLOT, UT};

pub fn run(t: &mut Test) {
    copy(t);
    mint(t);
    delete_and_revoke(t);
    retype(t);
    retype_limits(t);
    retype_all_or_nothing(t);
}

/// The own-space index of a slot address, for building `in_table` ones.
fn index(slot: CapSlot) -> u32 {
    split(slot).1
}

/// Signals `via` and returns what `Poll` on `ntfn` then reads (0 if the
/// signal failed).
fn signal_reaches(via: CapSlot, ntfn: CapSlot) -> u64 {
    if sys2(Sys::Signal, via, 0).is_err() {
        return 0;
    }
    sys2(Sys::Poll, ntfn, 0).map_or(0, |r| r[0])
}

fn copy(t: &mut Test) {
    let ntfn = t.make(ObjectType::Notification, 0);
    let dst = t.slot();
    t.ok(Sys::CapCopy, "ok", &sys2(Sys::CapCopy, ntfn, dst));
    t.eq(
        Sys::CapCopy,
        "copy-names-the-object",
        signal_reaches(dst, ntfn),
        1,
    );
    let cases: [(&str, CapSlot, CapSlot, Error); 4] = [
        ("slot-occupied", ntfn, dst, Error::SlotOccupied),
        ("empty-source", t.slot(), t.slot(), Error::EmptySlot),
        ("invalid-source", BAD_SLOT, t.slot(), Error::InvalidSlot),
        ("invalid-destination", ntfn, BAD_SLOT, Error::InvalidSlot),
    ];
    for (case, src, dst, want) in cases {
        t.err(Sys::CapCopy, case, &sys2(Sys::CapCopy, src, dst), want);
    }
    let dst = t.slot();
    t.err(
        Sys::CapCopy,
        "untyped-refused",
        &sys2(Sys::CapCopy, UT, dst),
        Error::InvalidArgument,
    );

    // Two-level addresses: a table of 8 slots.
    let table = t.make(ObjectType::CapTable, 3);
    let ti = index(table);
    t.ok(
        Sys::CapCopy,
        "into-table",
        &sys2(Sys::CapCopy, ntfn, in_table(ti, 1)),
    );
    t.eq(
        Sys::CapCopy,
        "use-from-table",
        signal_reaches(in_table(ti, 1), ntfn),
        1,
    );
    let from_table = t.slot();
    t.ok(
        Sys::CapCopy,
        "out-of-table",
        &sys2(Sys::CapCopy, in_table(ti, 1), from_table),
    );
    let read_only = t.mint(table, Rights::READ, 0);
    let write_only = t.mint(table, Rights::WRITE, 0);
    let empty = t.slot();
    let cases: [(&str, CapSlot, CapSlot, Error); 6] = [
        (
            "table-index-past-end",
            ntfn,
            in_table(ti, 8),
            Error::InvalidSlot,
        ),
        (
            "table-slot-out-of-range",
            ntfn,
            in_table(5000, 1),
            Error::InvalidSlot,
        ),
        (
            "table-slot-empty",
            ntfn,
            in_table(index(empty), 1),
            Error::EmptySlot,
        ),
        (
            "table-slot-not-a-table",
            ntfn,
            in_table(index(ntfn), 1),
            Error::WrongObjectType,
        ),
        (
            "table-write-needs-write",
            ntfn,
            in_table(index(read_only), 2),
            Error::MissingRights,
        ),
        (
            "table-read-needs-read",
            in_table(index(write_only), 1),
            t.slot(),
            Error::MissingRights,
        ),
    ];
    for (case, src, dst, want) in cases {
        t.err(Sys::CapCopy, case, &sys2(Sys::CapCopy, src, dst), want);
    }
    let dst = t.slot();
    let r = sys2(Sys::CapCopy, in_table(index(read_only), 1), dst);
    t.ok(Sys::CapCopy, "table-read-with-read", &r);
}

fn mint(t: &mut Test) {
    let ntfn = t.make(ObjectType::Notification, 0);
    let mint = |src: CapSlot, dst: CapSlot, rights: u64, badge: u64| {
        sys(Sys::CapMint, [src, dst, rights, badge, 0, 0])
    };
    let write_only = t.slot();
    t.ok(
        Sys::CapMint,
        "ok",
        &mint(ntfn, write_only, Rights::WRITE.raw(), 0),
    );
    t.err(
        Sys::CapMint,
        "fewer-rights-enforced",
        &sys2(Sys::Poll, write_only, 0),
        Error::MissingRights,
    );
    t.eq(
        Sys::CapMint,
        "kept-rights-work",
        signal_reaches(write_only, ntfn),
        1,
    );
    let badged = t.slot();
    t.ok(
        Sys::CapMint,
        "badge",
        &mint(ntfn, badged, Rights::WRITE.raw(), 0x40),
    );
    t.eq(
        Sys::CapMint,
        "badge-is-signalled",
        signal_reaches(badged, ntfn),
        0x40,
    );
    let frame = t.make(ObjectType::Frame4K, 0);
    let rw = Rights::READ.union(Rights::WRITE).raw();
    let cases: [(&str, CapSlot, CapSlot, u64, u64, Error); 6] = [
        (
            "rights-not-a-subset",
            write_only,
            t.slot(),
            rw,
            0,
            Error::MissingRights,
        ),
        (
            "unknown-rights-bits",
            ntfn,
            t.slot(),
            8,
            0,
            Error::InvalidArgument,
        ),
        (
            "rebadge-refused",
            badged,
            t.slot(),
            Rights::WRITE.raw(),
            0x80,
            Error::InvalidArgument,
        ),
        (
            "badge-on-frame-refused",
            frame,
            t.slot(),
            Rights::ALL.raw(),
            7,
            Error::InvalidArgument,
        ),
        (
            "empty-source",
            t.slot(),
            t.slot(),
            Rights::READ.raw(),
            0,
            Error::EmptySlot,
        ),
        (
            "slot-occupied",
            ntfn,
            badged,
            Rights::READ.raw(),
            0,
            Error::SlotOccupied,
        ),
    ];
    for (case, src, dst, rights, badge, want) in cases {
        t.err(Sys::CapMint, case, &mint(src, dst, rights, badge), want);
    }
}

fn delete_and_revoke(t: &mut Test) {
    let ntfn = t.make(ObjectType::Notification, 0);
    let doomed = t.copy(ntfn);
    t.ok(Sys::CapDelete, "ok", &sys2(Sys::CapDelete, doomed, 0));
    t.err(
        Sys::CapDelete,
        "slot-is-empty-after",
        &sys2(Sys::Signal, doomed, 0),
        Error::EmptySlot,
    );
    t.eq(
        Sys::CapDelete,
        "other-copies-stay",
        signal_reaches(ntfn, ntfn),
        1,
    );
    t.err(
        Sys::CapDelete,
        "invalid-slot",
        &sys2(Sys::CapDelete, BAD_SLOT, 0),
        Error::InvalidSlot,
    );

    // Revoke: everything derived from the slot, at any depth, goes; the
    // slot itself stays.
    let ep = t.make(ObjectType::Endpoint, 0);
    let child = t.mint(ep, Rights::WRITE, 0x99);
    let grandchild = t.copy(child);
    let table = t.make(ObjectType::CapTable, 2);
    let in_tbl = in_table(index(table), 1);
    t.setup("copy into table", sys2(Sys::CapCopy, child, in_tbl));
    t.ok(Sys::CapRevoke, "ok", &sys2(Sys::CapRevoke, ep, 0));
    let info = MsgInfo::default().0;
    for (case, slot) in [
        ("derived-cap-gone", child),
        ("derived-of-derived-gone", grandchild),
        ("derived-cap-in-table-gone", in_tbl),
    ] {
        let r = sys(Sys::NbSend, [slot, info, 0, 0, 0, 0]);
        t.err(Sys::CapRevoke, case, &r, Error::EmptySlot);
    }
    t.err(
        Sys::CapRevoke,
        "revoked-cap-stays",
        &sys2(Sys::NbRecv, ep, 0),
        Error::WouldBlock,
    );
    t.err(
        Sys::CapRevoke,
        "invalid-slot",
        &sys2(Sys::CapRevoke, BAD_SLOT, 0),
        Error::InvalidSlot,
    );

    // Revoking untyped memory deletes every object made from it and
    // resets its watermark.
    let untyped = t.make(ObjectType::Untyped, 12);
    let eps = t.slots(4);
    let retype = |count: u64| {
        sys(
            Sys::Retype,
            [untyped, ObjectType::Endpoint as u64, 0, eps, count, 0],
        )
    };
    t.setup("retype endpoints", retype(4));
    t.ok(Sys::CapRevoke, "untyped", &sys2(Sys::CapRevoke, untyped, 0));
    t.err(
        Sys::CapRevoke,
        "untyped-objects-gone",
        &sys2(Sys::NbRecv, eps + 3, 0),
        Error::EmptySlot,
    );
    t.ok(Sys::CapRevoke, "untyped-reusable", &retype(4));
}

fn retype(t: &mut Test) {
    let r = |kind: u64, bits: u64, dst: CapSlot, count: u64| {
        sys(Sys::Retype, [UT, kind, bits, dst, count, 0])
    };
    let ep = ObjectType::Endpoint as u64;
    let dst = t.slot();
    t.ok(Sys::Retype, "endpoint", &r(ep, 0, dst, 1));
    t.err(
        Sys::Retype,
        "endpoint-is-one",
        &sys2(Sys::NbRecv, dst, 0),
        Error::WouldBlock,
    );
    let three = t.slots(3);
    t.ok(
        Sys::Retype,
        "count-3",
        &r(ObjectType::Notification as u64, 0, three, 3),
    );
    t.eq(
        Sys::Retype,
        "count-3-last-usable",
        signal_reaches(three + 2, three + 2),
        1,
    );
    for (case, kind, bits) in [
        ("thread", ObjectType::Thread, 0),
        ("cap-table", ObjectType::CapTable, 4),
        (
            "address-space",
            ObjectType::AddressSpace,
            MIN_PT_POOL_BITS.into(),
        ),
        ("frame", ObjectType::Frame4K, 0),
        ("untyped", ObjectType::Untyped, 12),
    ] {
        let dst = t.slot();
        t.ok(Sys::Retype, case, &r(kind as u64, bits, dst, 1));
    }
    let table = t.make(ObjectType::CapTable, 2);
    t.ok(
        Sys::Retype,
        "into-table",
        &r(ep, 0, in_table(index(table), 1), 2),
    );
    let inval = Error::InvalidArgument;
    let cases: [(&str, u64, u64, CapSlot, u64, Error); 13] = [
        ("count-0", ep, 0, t.slot(), 0, inval),
        ("count-257", ep, 0, t.slot(), 257, inval),
        ("unknown-type", 10, 0, t.slot(), 1, inval),
        (
            "irq-handler-refused",
            ObjectType::IrqHandler as u64,
            0,
            t.slot(),
            1,
            inval,
        ),
        (
            "io-ports-refused",
            ObjectType::IoPorts as u64,
            0,
            t.slot(),
            1,
            inval,
        ),
        (
            "cap-table-size-0",
            ObjectType::CapTable as u64,
            0,
            t.slot(),
            1,
            inval,
        ),
        (
            "cap-table-size-17",
            ObjectType::CapTable as u64,
            17,
            t.slot(),
            1,
            inval,
        ),
        (
            "untyped-size-11",
            ObjectType::Untyped as u64,
            11,
            t.slot(),
            1,
            inval,
        ),
        (
            "address-space-pool-too-small",
            ObjectType::AddressSpace as u64,
            (MIN_PT_POOL_BITS - 1).into(),
            t.slot(),
            1,
            inval,
        ),
        (
            "out-of-memory",
            ObjectType::Frame2M as u64,
            0,
            t.slot(),
            1,
            Error::OutOfMemory,
        ),
        ("slot-occupied", ep, 0, dst, 1, Error::SlotOccupied),
        (
            "past-table-end",
            ep,
            0,
            rt::abi::caddr::own(1023),
            2,
            Error::InvalidSlot,
        ),
        (
            "table-index-past-end",
            ep,
            0,
            in_table(index(table), 3),
            2,
            Error::InvalidSlot,
        ),
    ];
    for (case, kind, bits, dst, count, want) in cases {
        t.err(Sys::Retype, case, &r(kind, bits, dst, count), want);
    }
    let not_untyped = sys(Sys::Retype, [dst, ep, 0, t.slot(), 1, 0]);
    t.err(
        Sys::Retype,
        "not-untyped",
        &not_untyped,
        Error::WrongObjectType,
    );
    let empty = sys(Sys::Retype, [t.slot(), ep, 0, t.slot(), 1, 0]);
    t.err(Sys::Retype, "empty-untyped", &empty, Error::EmptySlot);
}

/// A `Retype` refused part-way (its third destination is taken) makes
/// nothing: every destination stays empty and the untyped's memory is all
/// still free.
fn retype_all_or_nothing(t: &mut Test) {
    let frame = ObjectType::Frame4K as u64;
    // 64 KiB: exactly 16 frames.
    let untyped = t.make(ObjectType::Untyped, 16);
    let frames = t.slots(16);
    let blocker = t.make(ObjectType::Notification, 0);
    t.setup("copy", sys2(Sys::CapCopy, blocker, frames + 2));
    let r = |dst: CapSlot, count: u64| sys(Sys::Retype, [untyped, frame, 0, dst, count, 0]);
    t.err(
        Sys::Retype,
        "refused-part-way",
        &r(frames, 16),
        Error::SlotOccupied,
    );
    for i in [0, 1, 3, 15] {
        t.err(
            Sys::Retype,
            "refused-part-way-slot-empty",
            &sys2(Sys::CapDelete, frames + i, 0),
            Error::EmptySlot,
        );
    }
    delete(t, frames + 2);
    t.ok(
        Sys::Retype,
        "refused-part-way-memory-all-free",
        &r(frames, 16),
    );
    t.setup("revoke", sys2(Sys::CapRevoke, untyped, 0));
    delete(t, untyped);
    delete(t, blocker);
}

/// The watermark: objects are size-aligned, memory comes back only when
/// nothing made from the untyped is left.
fn retype_limits(t: &mut Test) {
    let frame = ObjectType::Frame4K as u64;
    // 64 KiB: exactly 16 frames.
    let untyped = t.make(ObjectType::Untyped, 16);
    let frames = t.slots(16);
    let r =
        |kind: u64, dst: CapSlot, count: u64| sys(Sys::Retype, [untyped, kind, 0, dst, count, 0]);
    t.ok(Sys::Retype, "fill-untyped", &r(frame, frames, 16));
    let extra = t.slot();
    t.err(
        Sys::Retype,
        "full-untyped",
        &r(frame, extra, 1),
        Error::OutOfMemory,
    );
    for i in 1..16 {
        delete(t, frames + i);
    }
    t.err(
        Sys::Retype,
        "no-reset-while-objects-left",
        &r(frame, extra, 1),
        Error::OutOfMemory,
    );
    delete(t, frames);
    t.ok(Sys::Retype, "reset-when-all-gone", &r(frame, extra, 1));
    t.setup("revoke", sys2(Sys::CapRevoke, untyped, 0));

    // 8 KiB: an endpoint at 0, a frame aligned up to 4 KiB after it, and
    // then no room even for an endpoint (a bump without alignment would
    // have put the frame at 64 and left room).
    let small = t.make(ObjectType::Untyped, 13);
    let r = |kind: ObjectType, dst: CapSlot| sys(Sys::Retype, [small, kind as u64, 0, dst, 1, 0]);
    let dst = t.slot();
    t.ok(
        Sys::Retype,
        "small-object-first",
        &r(ObjectType::Endpoint, dst),
    );
    let dst = t.slot();
    t.ok(
        Sys::Retype,
        "frame-after-small-object",
        &r(ObjectType::Frame4K, dst),
    );
    let dst = t.slot();
    t.err(
        Sys::Retype,
        "frame-was-size-aligned",
        &r(ObjectType::Endpoint, dst),
        Error::OutOfMemory,
    );
}
