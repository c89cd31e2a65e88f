//! `Null`, `Yield`, `DebugWrite`, unknown numbers, `TraceMark` and
//! `TraceName` (in a kernel without the `trace` feature: checked, then
//! nothing done), `ThreadCpuTime`, and the error paths of the interrupt and I/O-port calls
//! (a child holds no IRQ or port capability, so their success paths belong
//! to root's tests).

use rt::abi::{Error, ObjectType, Sys, MAIN_STACK_TOP};
use rt::syscall;

use crate::{code, outcome, sys, sys2, Test, BAD_SLOT, THREAD};

pub fn run(t: &mut Test) {
    t.ok(Sys::Null, "ok", &sys(Sys::Null, [0; 6]));
    t.ok(Sys::Yield, "ok", &sys(Sys::Yield, [0; 6]));
    debug_write(t);
    unknown(t);
    trace(t);
    cpu_time(t);
    irq_and_ports(t);
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
    let ntfn = t.make(ObjectType::Notification, 0);
    let empty = t.slot();
    let cases = [
        ("wrong-type", ntfn, Error::WrongObjectType),
        ("empty-slot", empty, Error::EmptySlot),
        ("bad-slot", BAD_SLOT, Error::InvalidSlot),
    ];
    for (case, slot, want) in cases {
        t.err(
            Sys::ThreadCpuTime,
            case,
            &sys(Sys::ThreadCpuTime, [slot, 0, 0, 0, 0, 0]),
            want,
        );
    }
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
