//! `Null`, `Yield`, `DebugWrite`, unknown numbers, `TraceMark` and
//! `TraceName` (in a kernel without the `trace` feature: checked, then
//! nothing done), `ThreadCpuTime`, `Usage`, and the error paths of the interrupt and I/O-port calls
//! (a child holds no IRQ or port capability, so their success paths belong
//! to root's tests).

use rt::abi::{Error, ObjectType, Sys, MAIN_STACK_TOP};
use rt::syscall;

use crate::{code, outcome, sys, sys2, Test, BAD_SLOT, CSPACE, THREAD};

pub fn run(t: &mut Test) {
    t.ok(Sys::Null, "ok", &sys(Sys::Null, [0; 6]));
    t.ok(Sys::Yield, "ok", &sys(Sys::Yield, [0; 6]));
    debug_write(t);
    unknown(t);
    trace(t);
    cpu_time(t);
    usage(t);
    irq_and_ports(t);
}

/// `Usage`: a fresh untyped of 64 KiB uses nothing; a notification
/// retyped from it, then a split of 16 KiB with an endpoint in it, count
/// as the watermarks say (the split as what is used of it, not its size);
/// deleting the split gives its part back. A capability table counts its
/// full slots, one more for each new capability. Other kinds, empty and
/// bad slots are refused.
fn usage(t: &mut Test) {
    use rt::abi::object::{ENDPOINT_BITS, NOTIFICATION_BITS};
    // Both results, or `u64::MAX` twice for an error.
    let use_of = |slot| match sys(Sys::Usage, [slot, 0, 0, 0, 0, 0]) {
        Ok([used, size, ..]) => (used, size),
        Err(_) => (u64::MAX, u64::MAX),
    };
    let check = |t: &mut Test, case: &str, slot, want: (u64, u64)| {
        let (used, size) = use_of(slot);
        t.eq(Sys::Usage, case, used, want.0);
        t.eq(Sys::Usage, case, size, want.1);
    };
    let ut = t.make(ObjectType::Untyped, 16);
    check(t, "fresh", ut, (0, 64 << 10));
    t.make_from(ut, ObjectType::Notification, 0);
    check(t, "object", ut, (1 << NOTIFICATION_BITS, 64 << 10));
    let split = t.make_from(ut, ObjectType::Untyped, 14);
    // The split starts at 16 KiB (size-aligned), so the notification's
    // alignment gap counts too; the empty split counts nothing.
    check(t, "split", ut, (16 << 10, 64 << 10));
    t.make_from(split, ObjectType::Endpoint, 0);
    let ep = 1 << ENDPOINT_BITS;
    check(t, "in-split", ut, ((16 << 10) + ep, 64 << 10));
    check(t, "the-split", split, (ep, 16 << 10));
    t.ok(
        Sys::CapDelete,
        "usage-split",
        &sys(Sys::CapDelete, [split, 0, 0, 0, 0, 0]),
    );
    // The endpoint made from the deleted split stays (its capability
    // moves up to the split's parent), so the whole split range counts.
    check(t, "after-delete", ut, (32 << 10, 64 << 10));
    let (full, slots) = use_of(CSPACE);
    t.holds(
        Sys::Usage,
        "table",
        full > 0 && full < slots,
        "0 < full < slots",
        full,
    );
    t.make(ObjectType::Notification, 0);
    check(t, "table-grows", CSPACE, (full + 1, slots));
    refuses_other_slots(t, Sys::Usage);
}

/// `call` with its one slot argument naming a notification, an empty
/// slot, and no slot: each refused with its error.
fn refuses_other_slots(t: &mut Test, call: Sys) {
    let ntfn = t.make(ObjectType::Notification, 0);
    let empty = t.slot();
    let cases = [
        ("wrong-type", ntfn, Error::WrongObjectType),
        ("empty-slot", empty, Error::EmptySlot),
        ("bad-slot", BAD_SLOT, Error::InvalidSlot),
    ];
    for (case, slot, want) in cases {
        t.err(call, case, &sys(call, [slot, 0, 0, 0, 0, 0]), want);
    }
}

/// `ThreadCpuTime`: the caller's own ticks at 100 per second, growing
/// while it computes (a tick that interrupts it is charged to it); a
/// capability that is not a thread's, or none, is refused.
fn cpu_time(t: &mut Test) {
    let first = sys(Sys::ThreadCpuTime, [THREAD, 0, 0, 0, 0, 0]);
    t.ok(Sys::ThreadCpuTime, "ok", &first);
    let [ticks, hz, ..] = first.unwrap_or_default();
    t.eq(Sys::ThreadCpuTime, "hz", hz, 100);
    // Compute until a tick lands (bounded: 10 ms of the machine's time is
    // far below this many rounds, even under icount).
    let mut later = ticks;
    let mut x = 1u64;
    for _ in 0..20_000_000u64 {
        x = core::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        if let Ok([now, ..]) = sys(Sys::ThreadCpuTime, [THREAD, 0, 0, 0, 0, 0]) {
            later = now;
        }
        if later > ticks {
            break;
        }
    }
    t.holds(
        Sys::ThreadCpuTime,
        "grows-while-computing",
        later > ticks,
        "more ticks after computing",
        later,
    );
    refuses_other_slots(t, Sys::ThreadCpuTime);
}

/// `TraceMark` takes any words; `TraceName` a thread capability with
/// `WRITE` and a UTF-8 name padded with NULs only.
fn trace(t: &mut Test) {
    let any = [u64::MAX, 0x8000_0000_0000_0000, 1, 42, 0, 0];
    t.ok(Sys::TraceMark, "any-words", &sys(Sys::TraceMark, any));
    // Little-endian, NUL-padded, as `rt::syscall::trace_name` packs it.
    let name = |bytes: &[u8]| {
        let mut w = [0u64; 4];
        for (i, &byte) in bytes.iter().enumerate() {
            w[i / 8] |= u64::from(byte) << (8 * (i % 8));
        }
        w
    };
    let [a, b, c, d] = name("test-syscalls".as_bytes());
    t.ok(
        Sys::TraceName,
        "ok",
        &sys(Sys::TraceName, [THREAD, a, b, c, d, 0]),
    );
    let ntfn = t.make(ObjectType::Notification, 0);
    let empty = t.slot();
    let [x, y, z, w] = name(b"caf\xe9");
    let cases: [(&str, [u64; 6], Option<Error>); 4] = [
        (
            "wrong-type",
            [ntfn, a, b, c, d, 0],
            Some(Error::WrongObjectType),
        ),
        ("empty-slot", [empty, a, b, c, d, 0], Some(Error::EmptySlot)),
        (
            "not-utf8",
            [THREAD, x, y, z, w, 0],
            Some(Error::InvalidArgument),
        ),
        (
            "bytes-after-nul",
            [THREAD, a, 0, 0, 1, 0],
            Some(Error::InvalidArgument),
        ),
    ];
    for (case, args, want) in cases {
        t.expect(Sys::TraceName, case, code(&sys(Sys::TraceName, args)), want);
    }
}

fn debug_write(t: &mut Test) {
    let text = b"test-syscalls: DebugWrite prints this line\n";
    let w = |ptr: u64, len: u64| sys2(Sys::DebugWrite, ptr, len);
    t.ok(
        Sys::DebugWrite,
        "ok",
        &w(text.as_ptr() as u64, text.len() as u64),
    );
    let bad = Some(Error::BadAddress);
    let cases: [(&str, u64, u64, Option<Error>); 7] = [
        ("kernel-direct-map", 0xffff_8000_0000_0000, 8, bad),
        ("kernel-image", 0xffff_ffff_8000_0000, 8, bad),
        ("non-canonical", 0x0000_8000_0000_0000, 8, bad),
        ("unmapped", 0x1000, 8, bad),
        // Readable stack, then the unmapped guard page above it.
        ("crossing-into-unmapped", MAIN_STACK_TOP - 8, 16, bad),
        ("address-wraps", u64::MAX - 3, 8, bad),
        (
            "too-long",
            text.as_ptr() as u64,
            syscall::DEBUG_WRITE_MAX as u64 + 1,
            Some(Error::InvalidArgument),
        ),
    ];
    for (case, ptr, len, want) in cases {
        t.expect(Sys::DebugWrite, case, code(&w(ptr, len)), want);
    }
}

fn unknown(t: &mut Test) {
    for (case, number) in [
        ("first-unknown", Sys::ALL.len() as u64),
        ("max", u64::MAX),
        // A kernel that looked at the low 32 bits only would run `Null`.
        ("high-bits", 1 << 32),
    ] {
        // SAFETY: no system call has these numbers; the kernel must do
        // nothing but fail them.
        let r = outcome(unsafe { syscall::raw_number(number, [0; 6]) });
        t.expect_named(
            "unknown-syscall",
            case,
            code(&r),
            Some(Error::UnknownSyscall),
        );
    }
}

fn irq_and_ports(t: &mut Test) {
    let ntfn = t.make(ObjectType::Notification, 0);
    let empty = t.slot();
    let wrong = Some(Error::WrongObjectType);
    let cases: [(Sys, &str, [u64; 6], Option<Error>); 11] = [
        (Sys::IrqBind, "wrong-type", [ntfn, ntfn, 0, 0, 0, 0], wrong),
        (
            Sys::IrqBind,
            "empty-slot",
            [empty, ntfn, 0, 0, 0, 0],
            Some(Error::EmptySlot),
        ),
        (Sys::IrqAck, "wrong-type", [ntfn, 0, 0, 0, 0, 0], wrong),
        (
            Sys::IrqAck,
            "invalid-slot",
            [BAD_SLOT, 0, 0, 0, 0, 0],
            Some(Error::InvalidSlot),
        ),
        (Sys::IoPort, "wrong-type", [ntfn, 0x80, 0, 1, 0, 0], wrong),
        (
            Sys::IoPort,
            "empty-slot",
            [empty, 0x80, 0, 1, 0, 0],
            Some(Error::EmptySlot),
        ),
        (
            Sys::IoPort,
            "invalid-slot",
            [BAD_SLOT, 0x80, 1, 1, 0, 0],
            Some(Error::InvalidSlot),
        ),
        // Only the device control capability (the platform service's)
        // allocates MSI vectors and tells physical addresses.
        (
            Sys::MsiAlloc,
            "wrong-type",
            [ntfn, empty, 0, 0, 0, 0],
            wrong,
        ),
        (
            Sys::MsiAlloc,
            "empty-slot",
            [empty, empty, 0, 0, 0, 0],
            Some(Error::EmptySlot),
        ),
        (
            Sys::PhysAddress,
            "wrong-type",
            [ntfn, ntfn, 0, 0, 0, 0],
            wrong,
        ),
        (
            Sys::PhysAddress,
            "invalid-slot",
            [BAD_SLOT, ntfn, 0, 0, 0, 0],
            Some(Error::InvalidSlot),
        ),
    ];
    for (call, case, args, want) in cases {
        t.expect(call, case, code(&sys(call, args)), want);
    }
}
