//! Thread control: `ThreadConfigure`, `ThreadStart`, `ThreadSetSchedParams`,
//! `ThreadSuspend`, `ThreadResume`, `ThreadRegisters`; deleting a running
//! thread; a user-level pager (fault messages and their replies); and,
//! last, priorities.

use core::sync::atomic::{AtomicU64, Ordering};

use rt::abi::fault::{self, LABEL_EXCEPTION, LABEL_PAGE_FAULT};
use rt::abi::ipc_buffer::registers as reg;
use rt::abi::map::WRITABLE;
use rt::abi::{CapSlot, Error, MsgInfo, ObjectType, Rights, Sys};
use rt::interfaces::child::PRIORITY;
use rt::syscall;

use crate::helpers::{
    buf_read, buf_write, clear_rec, delete, exit, map_new_frame, next_report, rec, set_rec, spawn,
    stack_top, wait_exit, yields, Report, Spawn, MAIN_BUFFER,
};
use crate::{sys, sys2, Test, ALIAS_VA, BAD_SLOT, CSPACE, PAGER_VA, THREAD, VSPACE};

/// Counts the spinner's rounds.
static SPINS: AtomicU64 = AtomicU64::new(0);
/// The thread the register-less helper reads.
static TARGET: AtomicU64 = AtomicU64::new(0);

/// Spins, counting and yielding, until stopped from outside.
extern "C" fn spinner(_: u64) -> ! {
    loop {
        SPINS.fetch_add(1, Ordering::SeqCst);
        let _ = syscall::yield_now();
    }
}

/// Where `ThreadRegisters` sends the spinner: records its argument.
extern "C" fn redirected(arg: u64) -> ! {
    set_rec(8, arg);
    exit(7)
}

/// Helper without an IPC buffer: `ThreadRegisters` needs one.
extern "C" fn registers_without_buffer(_: u64) -> ! {
    // SAFETY: a read writes the caller's IPC buffer, which this thread
    // does not have: the call must fail and change nothing.
    let (rax, _) = unsafe {
        syscall::raw(
            Sys::ThreadRegisters,
            [TARGET.load(Ordering::SeqCst), 0, 0, 0, 0, 0],
        )
    };
    exit(rax)
}

/// Helper that waits on an endpoint until suspended and resumed.
extern "C" fn suspended_waiter(_: u64) -> ! {
    set_rec(8, 1);
    let r = syscall::recv(TARGET.load(Ordering::SeqCst));
    set_rec(
        9,
        match r {
            Ok(_) => 0,
            Err(e) => e.raw(),
        },
    );
    exit(0)
}

pub fn run(t: &mut Test) {
    configure(t);
    configure_from_dying_cspace(t);
    start_and_sched(t);
    suspend_and_registers(t);
    pager(t);
}

/// Helper that replaces its own capability space, address space and fault
/// endpoint with capabilities in its current space (slots 1, 2, 4; its own
/// thread capability in 3), whose last capability is its own: the old
/// space goes, and the new capabilities must be copied before its slots
/// are emptied. Then signals slot 1 of the new space; exits with the
/// error code of whichever call failed (+100 for the configure).
extern "C" fn reconfigure_self(_: u64) -> ! {
    let own = rt::abi::caddr::own;
    let r = sys(Sys::ThreadConfigure, [own(3), own(1), own(2), 0, own(4), 0]);
    if let Err(e) = r {
        exit(100 + e)
    }
    exit(crate::code(&sys2(Sys::Signal, own(1), 0)))
}

/// `ThreadConfigure` whose sources lie in the capability table it
/// replaces (a failing perform must not leave the thread half configured).
fn configure_from_dying_cspace(t: &mut Test) {
    use rt::abi::caddr::{in_table, split};
    const H: usize = 0;
    let old = t.make(ObjectType::CapTable, 3);
    let new = t.make(ObjectType::CapTable, 3);
    let ntfn = t.make(ObjectType::Notification, 0);
    let thread = t.make(ObjectType::Thread, 0);
    let (o, n) = (split(old).1, split(new).1);
    let copies = [
        (new, in_table(o, 1)),
        (VSPACE, in_table(o, 2)),
        (thread, in_table(o, 3)),
        (t.fault_caps[H], in_table(o, 4)),
        (ntfn, in_table(n, 1)),
    ];
    for (src, dst) in copies {
        t.setup("copy", sys2(Sys::CapCopy, src, dst));
    }
    let configure = sys(
        Sys::ThreadConfigure,
        [thread, old, VSPACE, 0, t.fault_caps[H], 0],
    );
    t.setup("configure", configure);
    t.setup(
        "priority",
        sys(
            Sys::ThreadSetSchedParams,
            [thread, u64::from(PRIORITY), 0, 0, 0, 0],
        ),
    );
    // The helper's slot holds the old table's last capability now.
    delete(t, old);
    let entry = reconfigure_self as *const () as u64;
    let start = sys(Sys::ThreadStart, [thread, entry, stack_top(H) - 8, 0, 0, 0]);
    t.setup("start", start);
    if let Some(code) = wait_exit(t, H) {
        t.eq(Sys::ThreadConfigure, "sources-in-dying-cspace", code, 0);
    }
    let word = sys2(Sys::Poll, ntfn, 0).map_or(0, |r| r[0]);
    t.eq(
        Sys::ThreadConfigure,
        "sources-in-dying-cspace-signal",
        word,
        1,
    );
    delete(t, thread);
    delete(t, new);
}

fn configure(t: &mut Test) {
    let thread = t.make(ObjectType::Thread, 0);
    let ntfn = t.make(ObjectType::Notification, 0);
    let ep = t.make(ObjectType::Endpoint, 0);
    let ep_ro = t.mint(ep, Rights::READ, 0);
    let thread_ro = t.mint(thread, Rights::READ, 0);
    let c = |th: CapSlot, cs: CapSlot, vs: CapSlot, buffer: u64, fault_ep: CapSlot| {
        sys(Sys::ThreadConfigure, [th, cs, vs, buffer, fault_ep, 0])
    };
    let inval = Error::InvalidArgument;
    let wrong = Error::WrongObjectType;
    let cases: [(&str, CapSlot, CapSlot, CapSlot, u64, CapSlot, Error); 10] = [
        (
            "buffer-misaligned",
            thread,
            CSPACE,
            VSPACE,
            crate::IPC_VA + 0x100,
            0,
            inval,
        ),
        (
            "buffer-kernel-address",
            thread,
            CSPACE,
            VSPACE,
            0xffff_8000_0000_0000,
            0,
            inval,
        ),
        (
            "buffer-non-user",
            thread,
            CSPACE,
            VSPACE,
            0x0000_8000_0000_0000,
            0,
            inval,
        ),
        ("cspace-wrong-type", thread, ntfn, VSPACE, 0, 0, wrong),
        ("vspace-wrong-type", thread, CSPACE, ntfn, 0, 0, wrong),
        (
            "fault-endpoint-needs-write",
            thread,
            CSPACE,
            VSPACE,
            0,
            ep_ro,
            Error::MissingRights,
        ),
        (
            "fault-endpoint-wrong-type",
            thread,
            CSPACE,
            VSPACE,
            0,
            ntfn,
            wrong,
        ),
        (
            "thread-needs-write",
            thread_ro,
            CSPACE,
            VSPACE,
            0,
            0,
            Error::MissingRights,
        ),
        ("not-a-thread", ep, CSPACE, VSPACE, 0, 0, wrong),
        (
            "empty-slot",
            t.slot(),
            CSPACE,
            VSPACE,
            0,
            0,
            Error::EmptySlot,
        ),
    ];
    for (case, th, cs, vs, buffer, fault_ep, want) in cases {
        t.err(
            Sys::ThreadConfigure,
            case,
            &c(th, cs, vs, buffer, fault_ep),
            want,
        );
    }
    t.ok(
        Sys::ThreadConfigure,
        "ok",
        &c(thread, CSPACE, VSPACE, crate::IPC_VA, ep),
    );
    t.ok(
        Sys::ThreadConfigure,
        "again",
        &c(thread, CSPACE, VSPACE, 0, 0),
    );
}

fn start_and_sched(t: &mut Test) {
    let start = |th: CapSlot, rip: u64, rsp: u64| sys(Sys::ThreadStart, [th, rip, rsp, 0, 0, 0]);
    let rip = spinner as *const () as u64;
    let rsp = stack_top(2) - 8;
    let unconfigured = t.make(ObjectType::Thread, 0);
    t.err(
        Sys::ThreadStart,
        "unconfigured",
        &start(unconfigured, rip, rsp),
        Error::InvalidState,
    );
    let thread = t.make(ObjectType::Thread, 0);
    t.setup(
        "configure",
        sys(Sys::ThreadConfigure, [thread, CSPACE, VSPACE, 0, 0, 0]),
    );
    let read_only = t.mint(thread, Rights::READ, 0);
    let cases: [(&str, CapSlot, u64, u64, Error); 5] = [
        (
            "kernel-rip",
            thread,
            0xffff_ffff_8000_0000,
            rsp,
            Error::InvalidArgument,
        ),
        (
            "non-canonical-rsp",
            thread,
            rip,
            0x0000_8000_0000_0000,
            Error::InvalidArgument,
        ),
        ("needs-write", read_only, rip, rsp, Error::MissingRights),
        ("not-a-thread", CSPACE, rip, rsp, Error::WrongObjectType),
        ("invalid-slot", BAD_SLOT, rip, rsp, Error::InvalidSlot),
    ];
    for (case, th, rip, rsp, want) in cases {
        t.err(Sys::ThreadStart, case, &start(th, rip, rsp), want);
    }

    let sched =
        |th: CapSlot, prio: u64, cpu: u64| sys(Sys::ThreadSetSchedParams, [th, prio, cpu, 0, 0, 0]);
    let own = u64::from(PRIORITY);
    t.ok(Sys::ThreadSetSchedParams, "ok", &sched(thread, own, 0));
    let cases: [(&str, CapSlot, u64, u64, Error); 5] = [
        (
            "above-own-priority",
            thread,
            own + 1,
            0,
            Error::InvalidArgument,
        ),
        ("priority-255", thread, 255, 0, Error::InvalidArgument),
        ("no-such-cpu", thread, own, 1000, Error::InvalidArgument),
        ("needs-write", read_only, own, 0, Error::MissingRights),
        ("not-a-thread", CSPACE, own, 0, Error::WrongObjectType),
    ];
    for (case, th, prio, cpu, want) in cases {
        t.err(Sys::ThreadSetSchedParams, case, &sched(th, prio, cpu), want);
    }

    SPINS.store(0, Ordering::SeqCst);
    t.ok(Sys::ThreadStart, "ok", &start(thread, rip, rsp));
    yields(10);
    let spins = SPINS.load(Ordering::SeqCst);
    t.holds(
        Sys::ThreadStart,
        "thread-runs",
        spins > 0,
        "spins > 0",
        spins,
    );
    t.err(
        Sys::ThreadStart,
        "already-started",
        &start(thread, rip, rsp),
        Error::InvalidState,
    );
    // A thread lives while a capability to it is left; deleting the last
    // one stops it.
    t.ok(
        Sys::CapDelete,
        "running-thread",
        &sys2(Sys::CapDelete, thread, 0),
    );
    let spun = spins_while_yielding();
    t.holds(
        Sys::CapDelete,
        "thread-lives-while-a-copy-is-left",
        spun > 0,
        "more spins",
        spun,
    );
    t.ok(
        Sys::CapDelete,
        "last-thread-capability",
        &sys2(Sys::CapDelete, read_only, 0),
    );
    t.eq(Sys::CapDelete, "thread-stops", spins_while_yielding(), 0);
}

/// How often the spinner counted while this thread yielded 10 times.
fn spins_while_yielding() -> u64 {
    let before = SPINS.load(Ordering::SeqCst);
    yields(10);
    SPINS.load(Ordering::SeqCst) - before
}

fn suspend_and_registers(t: &mut Test) {
    clear_rec();
    SPINS.store(0, Ordering::SeqCst);
    let thread = spawn(t, 2, Spawn::new(spinner, 0));
    yields(10);
    t.err(
        Sys::ThreadResume,
        "not-suspended",
        &sys2(Sys::ThreadResume, thread, 0),
        Error::InvalidState,
    );
    t.ok(
        Sys::ThreadSuspend,
        "ok",
        &sys2(Sys::ThreadSuspend, thread, 0),
    );
    t.eq(
        Sys::ThreadSuspend,
        "thread-stops",
        spins_while_yielding(),
        0,
    );
    let read_only = t.mint(thread, Rights::READ, 0);
    let write_only = t.mint(thread, Rights::WRITE, 0);
    for s in [Sys::ThreadSuspend, Sys::ThreadResume] {
        t.err(
            s,
            "needs-write",
            &sys2(s, read_only, 0),
            Error::MissingRights,
        );
        t.err(
            s,
            "not-a-thread",
            &sys2(s, CSPACE, 0),
            Error::WrongObjectType,
        );
        t.err(s, "invalid-slot", &sys2(s, BAD_SLOT, 0), Error::InvalidSlot);
    }

    // Registers of the suspended spinner.
    let regs = |th: CapSlot, mode: u64| sys2(Sys::ThreadRegisters, th, mode);
    t.ok(Sys::ThreadRegisters, "read", &regs(thread, 0));
    let rsp = buf_read(MAIN_BUFFER, reg::RSP);
    let rip = buf_read(MAIN_BUFFER, reg::RIP);
    let stack = stack_top(2) - crate::STACK_PAGES * 4096..stack_top(2);
    t.holds(
        Sys::ThreadRegisters,
        "read-rsp",
        stack.contains(&rsp),
        "rsp in the helper's stack",
        rsp,
    );
    t.holds(
        Sys::ThreadRegisters,
        "read-rip",
        rip != 0 && rip < 0x4000_0000,
        "rip in the program",
        rip,
    );
    t.err(
        Sys::ThreadRegisters,
        "read-needs-read",
        &regs(write_only, 0),
        Error::MissingRights,
    );
    t.err(
        Sys::ThreadRegisters,
        "write-needs-write",
        &regs(read_only, 1),
        Error::MissingRights,
    );
    t.err(
        Sys::ThreadRegisters,
        "bad-mode",
        &regs(thread, 2),
        Error::InvalidArgument,
    );
    t.err(
        Sys::ThreadRegisters,
        "not-a-thread",
        &regs(CSPACE, 0),
        Error::WrongObjectType,
    );
    t.err(
        Sys::ThreadRegisters,
        "own-thread-refused",
        &regs(THREAD, 0),
        Error::InvalidArgument,
    );
    buf_write(MAIN_BUFFER, reg::RIP, 0xffff_ffff_8000_0000);
    t.err(
        Sys::ThreadRegisters,
        "write-kernel-rip",
        &regs(thread, 1),
        Error::InvalidArgument,
    );
    t.ok(Sys::ThreadRegisters, "read-again", &regs(thread, 0));
    t.eq(
        Sys::ThreadRegisters,
        "refused-write-changed-nothing",
        buf_read(MAIN_BUFFER, reg::RIP),
        rip,
    );
    buf_write(MAIN_BUFFER, reg::RIP, redirected as *const () as u64);
    buf_write(MAIN_BUFFER, reg::RSP, stack_top(2) - 8);
    buf_write(MAIN_BUFFER, reg::RDI, 0xfeed_beef);
    t.ok(Sys::ThreadRegisters, "write", &regs(thread, 1));

    TARGET.store(thread, Ordering::SeqCst);
    let mut s = Spawn::new(registers_without_buffer, 0);
    s.ipc_buffer = false;
    spawn(t, 3, s);
    let got = wait_exit(t, 3).unwrap_or(u64::MAX);
    t.expect(
        Sys::ThreadRegisters,
        "without-ipc-buffer",
        got,
        Some(Error::BadAddress),
    );

    t.ok(Sys::ThreadResume, "ok", &sys2(Sys::ThreadResume, thread, 0));
    let code = wait_exit(t, 2).unwrap_or(u64::MAX);
    t.eq(Sys::ThreadRegisters, "written-rip-runs", code, 7);
    t.eq(
        Sys::ThreadRegisters,
        "written-rdi-arrives",
        rec(8),
        0xfeed_beef,
    );

    // Suspending a thread that waits in an IPC aborts the IPC.
    clear_rec();
    let ep = t.make(ObjectType::Endpoint, 0);
    TARGET.store(ep, Ordering::SeqCst);
    let waiter = spawn(t, 3, Spawn::new(suspended_waiter, 0));
    yields(5);
    t.eq(Sys::ThreadSuspend, "waiter-started", rec(8), 1);
    t.ok(
        Sys::ThreadSuspend,
        "waiting-thread",
        &sys2(Sys::ThreadSuspend, waiter, 0),
    );
    t.ok(
        Sys::ThreadResume,
        "waiting-thread",
        &sys2(Sys::ThreadResume, waiter, 0),
    );
    wait_exit(t, 3);
    t.expect(
        Sys::ThreadSuspend,
        "ipc-aborted",
        rec(9),
        Some(Error::Aborted),
    );
}

/// Helper 1 for the pager check: reads one unmapped page, writes another.
extern "C" fn touch_unmapped(_: u64) -> ! {
    // SAFETY: `PAGER_VA` is unmapped: the read faults, the pager (the main
    // thread) maps a frame there and replies, and the read is retried.
    // Nothing else uses these pages; volatile because they change under us.
    let value = unsafe { (PAGER_VA as *const u64).read_volatile() };
    set_rec(8, value);
    // SAFETY: as above, for the second page and a write.
    unsafe { ((PAGER_VA + 0x2000) as *mut u64).write_volatile(value + 1) };
    exit(0)
}

/// Helper 1 for the exception check.
extern "C" fn invalid_opcode(_: u64) -> ! {
    // SAFETY: raises #UD; the kernel reports it to the fault endpoint and
    // stops this thread, which is then deleted.
    unsafe { core::arch::asm!("ud2", options(noreturn, nomem, nostack)) }
}

fn check_fault(t: &mut Test, case: &str, report: Option<Report>, label: u64) -> Option<[u64; 4]> {
    match report {
        Some(Report::Fault(l, words)) if l == label => {
            t.holds(Sys::ThreadConfigure, case, true, "", 0);
            Some(words)
        }
        Some(Report::Fault(l, _)) => {
            t.holds(Sys::ThreadConfigure, case, false, "the fault's label", l);
            None
        }
        Some(Report::Exit(code)) => {
            t.holds(
                Sys::ThreadConfigure,
                case,
                false,
                "a fault message, not an exit",
                code,
            );
            None
        }
        None => None,
    }
}

fn pager(t: &mut Test) {
    clear_rec();
    // Two frames, mapped for the main thread at ALIAS_VA..., to be mapped
    // for the helper at PAGER_VA... when it faults there.
    let first = map_new_frame(t, ALIAS_VA);
    let second = map_new_frame(t, ALIAS_VA + 0x2000);
    // SAFETY: `ALIAS_VA` was just mapped writable (checked by `setup`).
    unsafe { (ALIAS_VA as *mut u64).write_volatile(0x5eed_cafe) };
    let lazy_first = t.copy(first);
    let lazy_second = t.copy(second);
    spawn(t, 1, Spawn::new(touch_unmapped, 0));

    let report = next_report(t, 1);
    if let Some(w) = check_fault(t, "page-fault-message", report, LABEL_PAGE_FAULT) {
        t.eq(
            Sys::ThreadConfigure,
            "fault-address",
            w[fault::WORD_ADDRESS],
            PAGER_VA,
        );
        let ip = w[fault::WORD_IP];
        t.holds(
            Sys::ThreadConfigure,
            "fault-ip",
            ip != 0 && ip < 0x4000_0000,
            "ip in the program",
            ip,
        );
        // Error code: bit 0 present, bit 1 write, bit 2 user.
        t.eq(
            Sys::ThreadConfigure,
            "fault-code-user-read-not-present",
            w[fault::WORD_CODE] & 7,
            4,
        );
    }
    let attr = WRITABLE;
    t.setup(
        "pager map",
        sys(Sys::Map, [VSPACE, lazy_first, PAGER_VA, attr, 0, 0]),
    );
    t.ok(
        Sys::Reply,
        "resumes-faulting-thread",
        &sys(Sys::Reply, [0, MsgInfo::default().0, 0, 0, 0, 0]),
    );

    let report = next_report(t, 1);
    if let Some(w) = check_fault(t, "second-page-fault", report, LABEL_PAGE_FAULT) {
        t.eq(
            Sys::ThreadConfigure,
            "second-fault-address",
            w[fault::WORD_ADDRESS],
            PAGER_VA + 0x2000,
        );
        t.eq(
            Sys::ThreadConfigure,
            "fault-code-user-write-not-present",
            w[fault::WORD_CODE] & 7,
            6,
        );
    }
    t.setup(
        "pager map",
        sys(
            Sys::Map,
            [VSPACE, lazy_second, PAGER_VA + 0x2000, attr, 0, 0],
        ),
    );
    t.setup(
        "pager reply",
        sys(Sys::Reply, [0, MsgInfo::default().0, 0, 0, 0, 0]),
    );
    let code = wait_exit(t, 1);
    t.eq(
        Sys::ThreadConfigure,
        "pager-thread-finishes",
        code.unwrap_or(u64::MAX),
        0,
    );
    t.eq(
        Sys::ThreadConfigure,
        "thread-read-mapped-value",
        rec(8),
        0x5eed_cafe,
    );
    // SAFETY: `ALIAS_VA + 0x2000` was mapped writable above.
    let written = unsafe { ((ALIAS_VA + 0x2000) as *const u64).read_volatile() };
    t.eq(
        Sys::ThreadConfigure,
        "thread-write-arrived",
        written,
        0x5eed_caff,
    );

    let thread = spawn(t, 1, Spawn::new(invalid_opcode, 0));
    let report = next_report(t, 1);
    if let Some(w) = check_fault(t, "exception-message", report, LABEL_EXCEPTION) {
        t.eq(
            Sys::ThreadConfigure,
            "exception-vector",
            w[fault::WORD_CODE],
            6,
        );
    }
    delete(t, thread);
}

/// Helper: marks that it ran.
extern "C" fn mark(i: u64) -> ! {
    set_rec(i as usize, 1);
    exit(0)
}

/// Helper: marks that it ran, waits for a signal, marks again.
extern "C" fn mark_wait_mark(ntfn: u64) -> ! {
    set_rec(10, 1);
    let _ = syscall::wait(ntfn);
    set_rec(11, 1);
    exit(0)
}

/// Fixed priorities: a lower-priority thread does not run while this one
/// can; a higher-priority one runs at once. Lowers this thread's priority
/// for good, so it runs last.
pub fn priorities(t: &mut Test) {
    clear_rec();
    let own = u64::from(PRIORITY);
    let mut low = Spawn::new(mark, 8);
    low.priority = PRIORITY - 50;
    spawn(t, 2, low);
    let ntfn = t.make(ObjectType::Notification, 0);
    let mut mid = Spawn::new(mark_wait_mark, ntfn);
    mid.priority = PRIORITY - 10;
    spawn(t, 1, mid);
    yields(5);
    t.eq(
        Sys::ThreadSetSchedParams,
        "lower-priority-waits",
        rec(8) + rec(10),
        0,
    );
    let r = sys(Sys::ThreadSetSchedParams, [THREAD, own - 20, 0, 0, 0, 0]);
    t.ok(Sys::ThreadSetSchedParams, "lower-own", &r);
    t.eq(
        Sys::ThreadSetSchedParams,
        "higher-priority-preempts",
        rec(10),
        1,
    );
    t.eq(Sys::ThreadSetSchedParams, "still-lower-waits", rec(8), 0);
    t.setup("signal", sys2(Sys::Signal, ntfn, 0));
    t.eq(Sys::Signal, "wakes-higher-priority-at-once", rec(11), 1);
    let r = sys(Sys::ThreadSetSchedParams, [THREAD, own, 0, 0, 0, 0]);
    t.err(
        Sys::ThreadSetSchedParams,
        "cannot-raise-own",
        &r,
        Error::InvalidArgument,
    );
    wait_exit(t, 1);
    // Blocking in `Recv` lets the lowest-priority helper run at last.
    let code = wait_exit(t, 2);
    t.eq(
        Sys::ThreadSetSchedParams,
        "lowest-runs-when-others-block",
        code.unwrap_or(u64::MAX),
        0,
    );
}
