//! test-syscalls: one check per documented outcome of every system call
//! (`docs/abi.md`): the success path and each error path the
//! documentation lists, plus the semantics behind them — capability
//! derivation and revocation, retype limits and the untyped watermark,
//! mapping (shared memory, W^X, the page-table pool), IPC between threads
//! (0, 4 and 64 words, badges, a capability transfer, the non-blocking
//! forms), notifications (badges ORed, a bound notification arriving
//! through `Recv`), thread control (registers, suspend/resume, priorities)
//! and a user-level pager; reply capabilities (a call saved and answered
//! later, out of order; stale and deleted replies; a saved fault).
//!
//! Start it with its own capabilities (`pecan.start=test-syscalls+own`,
//! `interfaces::child::OwnCaps`): besides its untyped memory (1 MiB) it
//! then holds its own thread, capability space and address space, so it
//! can make threads that share its address space.
//! Such a helper thread runs one of the `extern "C"` functions in
//! [`helpers`] on a 16 KiB stack the main thread maps for it (with an IPC
//! buffer page of its own when it needs one), has the main thread's fault
//! endpoint, badged with the helper's number, as its fault handler, and
//! reports through the atomics in [`helpers::REC`] and its exit code, which
//! arrives at the fault endpoint as an `abi::fault::LABEL_EXIT` message.
//!
//! Output, one line per check, then a summary; the exit code is the number
//! of failed checks:
//!
//! ```text
//! test-syscalls: check <call> <case>: ok
//! test-syscalls: check <call> <case>: FAILED (expected E, got G)
//! test-syscalls: N checks, F failed
//! ```
//!
//! Set-up steps that must succeed for later checks to mean anything (making
//! objects, mapping stacks) are silent when they work and print a failed
//! check `setup <what>` when they do not.
//!
//! The priority checks lower the main thread's priority and therefore run
//! last. Interrupt and I/O-port calls can only be checked on their error
//! paths: a child holds no IRQ or port capability.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

mod caps;
mod helpers;
mod ipc;
mod memory;
mod misc;
mod notify;
mod reply;
mod threads;

use core::fmt;

use rt::abi::{caddr, CapSlot, Error, ObjectType, Rights, Sys};
use rt::check::Checks;
use rt::interfaces::child::{OWN_CSPACE, OWN_THREAD, OWN_VSPACE, SERVICE_ENDPOINT, UNTYPED};
use rt::println;
use rt::syscall::{self, RawResult};

rt::entry!(main);

/// Own capabilities (`interfaces::child`).
pub const UT: CapSlot = caddr::own(UNTYPED);
pub const SVC: CapSlot = caddr::own(SERVICE_ENDPOINT);
pub const THREAD: CapSlot = caddr::own(OWN_THREAD);
pub const CSPACE: CapSlot = caddr::own(OWN_CSPACE);
pub const VSPACE: CapSlot = caddr::own(OWN_VSPACE);
/// An own-space index past the end of the capability space.
pub const BAD_SLOT: CapSlot = caddr::own(5000);

/// Where the test maps memory: one 2 MiB region in the page directory
/// that already holds the stack, so only one page table is needed.
pub const TEST_BASE: u64 = 0x7fff_ff00_0000;
/// Pages for the mapping checks.
pub const MAP_VA: u64 = TEST_BASE;
/// Helper stacks: helper `h` at `STACKS_VA + h * STACK_STRIDE`.
pub const STACKS_VA: u64 = TEST_BASE + 0x10_0000;
pub const STACK_PAGES: u64 = 4;
pub const STACK_STRIDE: u64 = 0x8000;
/// Helper IPC buffers: helper `h`'s page at `IPC_VA + h * 0x2000`.
pub const IPC_VA: u64 = TEST_BASE + 0x18_0000;
/// Pages the pager check leaves unmapped until the helper touches them.
pub const PAGER_VA: u64 = TEST_BASE + 0x1c_0000;
/// Where the pager check maps the same frames for the main thread.
pub const ALIAS_VA: u64 = TEST_BASE + 0x1d_0000;
/// Helpers that can run at once.
pub const HELPERS: usize = 4;

/// The result of a raw call: `Ok(result registers)` or the error code.
pub type Outcome = Result<[u64; 6], u64>;

/// Makes system call `sys` with `args`.
pub fn sys(sys: Sys, args: [u64; 6]) -> Outcome {
    // SAFETY: the test's calls change its memory only where it chose to:
    // frames it maps at `TEST_BASE..` (accessed through raw pointers only,
    // after the mapping succeeded) and the IPC buffers (read and written
    // with volatile accesses only); threads it starts run code written for
    // that (`helpers`), on stacks it mapped for them.
    outcome(unsafe { syscall::raw(sys, args) })
}

/// `RawResult` as an [`Outcome`].
pub fn outcome((rax, regs): RawResult) -> Outcome {
    if rax == 0 {
        Ok(regs)
    } else {
        Err(rax)
    }
}

/// Shorthand for calls with fewer arguments.
pub fn sys2(s: Sys, a0: u64, a1: u64) -> Outcome {
    sys(s, [a0, a1, 0, 0, 0, 0])
}

/// A result code for printing: `ok`, an error name, or an unknown code.
pub struct Code(pub u64);

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, Error::from_raw(self.0)) {
            (0, _) => f.write_str("ok"),
            (_, Some(e)) => write!(f, "{e:?}"),
            (code, None) => write!(f, "unknown code {code}"),
        }
    }
}

/// The result code of an outcome (0 for success).
pub fn code<T>(r: &Result<T, u64>) -> u64 {
    match r {
        Ok(_) => 0,
        Err(c) => *c,
    }
}

/// The error code of a typed wrapper's result (0 for success).
pub fn err_code<T>(r: &Result<T, Error>) -> u64 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw(),
    }
}

/// The test run: counts, and a bump allocator for free slots.
pub struct Test {
    checks: Checks,
    next_slot: u32,
    /// Helper `h`'s fault endpoint: the main fault endpoint badged `h + 1`.
    pub fault_caps: [CapSlot; HELPERS],
    /// The endpoint the main thread receives helper faults and exits on.
    pub fault_ep: CapSlot,
    /// The frame mapped as helper `h`'s IPC buffer.
    pub buffer_frames: [CapSlot; HELPERS],
}

impl Test {
    fn report(
        &mut self,
        call: &str,
        case: &str,
        ok: bool,
        expected: fmt::Arguments,
        got: fmt::Arguments,
    ) {
        self.checks.expect(
            format_args!("{call} {case}"),
            ok,
            format_args!("expected {expected}, got {got}"),
        );
    }

    /// Checks that a result code is `want` (`None`: success).
    pub fn expect(&mut self, call: Sys, case: &str, got: u64, want: Option<Error>) {
        self.expect_named(call.name(), case, got, want);
    }

    /// [`Test::expect`] for a check not named after a system call.
    pub fn expect_named(&mut self, call: &str, case: &str, got: u64, want: Option<Error>) {
        let want_code = want.map_or(0, Error::raw);
        self.report(
            call,
            case,
            got == want_code,
            format_args!("{}", Code(want_code)),
            format_args!("{}", Code(got)),
        );
    }

    /// Checks that an outcome succeeded.
    pub fn ok<T>(&mut self, call: Sys, case: &str, r: &Result<T, u64>) {
        self.expect(call, case, code(r), None);
    }

    /// Checks that an outcome failed with `want`.
    pub fn err<T>(&mut self, call: Sys, case: &str, r: &Result<T, u64>, want: Error) {
        self.expect(call, case, code(r), Some(want));
    }

    /// Checks a value.
    pub fn eq(&mut self, call: Sys, case: &str, got: u64, want: u64) {
        self.report(
            call.name(),
            case,
            got == want,
            format_args!("{want:#x}"),
            format_args!("{got:#x}"),
        );
    }

    /// Checks a condition described by `what`.
    pub fn holds(&mut self, call: Sys, case: &str, ok: bool, what: &str, got: u64) {
        self.report(
            call.name(),
            case,
            ok,
            format_args!("{what}"),
            format_args!("{got:#x}"),
        );
    }

    /// A set-up step: silent when it works, a failed check otherwise.
    pub fn setup<T>(&mut self, what: &str, r: Result<T, u64>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(c) => {
                self.report(
                    "setup",
                    what,
                    false,
                    format_args!("ok"),
                    format_args!("{}", Code(c)),
                );
                None
            }
        }
    }

    /// A free slot of the own capability space (never reused).
    pub fn slot(&mut self) -> CapSlot {
        let s = self.next_slot;
        self.next_slot += 1;
        caddr::own(s)
    }

    /// `count` consecutive free slots; returns the first.
    pub fn slots(&mut self, count: u32) -> CapSlot {
        let first = self.slot();
        self.next_slot += count - 1;
        first
    }

    /// A new object from the untyped memory, in a new slot.
    pub fn make(&mut self, kind: ObjectType, size_bits: u64) -> CapSlot {
        self.make_from(UT, kind, size_bits)
    }

    /// A new object from untyped `untyped`, in a new slot.
    pub fn make_from(&mut self, untyped: CapSlot, kind: ObjectType, size_bits: u64) -> CapSlot {
        let slot = self.slot();
        let r = sys(Sys::Retype, [untyped, kind as u64, size_bits, slot, 1, 0]);
        self.setup("retype", r);
        slot
    }

    /// A copy of `src` with `rights` and `badge`, in a new slot.
    pub fn mint(&mut self, src: CapSlot, rights: Rights, badge: u64) -> CapSlot {
        let slot = self.slot();
        let r = sys(Sys::CapMint, [src, slot, rights.raw(), badge, 0, 0]);
        self.setup("mint", r);
        slot
    }

    /// A copy of `src` in a new slot.
    pub fn copy(&mut self, src: CapSlot) -> CapSlot {
        let slot = self.slot();
        let r = sys2(Sys::CapCopy, src, slot);
        self.setup("copy", r);
        slot
    }
}

fn main(_arg: u64) -> i32 {
    println!("test-syscalls: start");
    let mut t = Test {
        checks: Checks::unnumbered(),
        next_slot: rt::interfaces::child::FIRST_FREE,
        fault_caps: [0; HELPERS],
        fault_ep: 0,
        buffer_frames: [0; HELPERS],
    };
    helpers::prepare(&mut t);
    misc::run(&mut t);
    caps::run(&mut t);
    memory::run(&mut t);
    ipc::run(&mut t);
    notify::run(&mut t);
    reply::run(&mut t);
    threads::run(&mut t);
    // Last: it lowers this thread's priority for good.
    threads::priorities(&mut t);
    t.checks.finish()
}
