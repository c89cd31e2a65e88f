//! The Pecan side of the lab's I/O method (`bench::soak`,
//! docs/benchmarks.md): a soaker thread at priority 0 on the benchmark's
//! CPU counts while the benchmark waits, so each run's busy ticks are its
//! elapsed ticks less the soaker's share, and the `BENCH` line gives each
//! run's CPU cost per KiB. `bench-block` and `bench-net` use it.
//!
//! Invariant: one soaker per component ([`SOAKER`] is a static); it runs
//! from [`start`] until [`stop`] returned.
#![no_std]

extern crate alloc;

use alloc::format;
use alloc::string::String;

use bench::soak::{self, Soaker};
use rt::abi::caddr::{own, NULL_SLOT};
use rt::interfaces::child;
use rt::syscall;
use rt::thread::{self, Placement};

/// The component's soaker.
static SOAKER: Soaker = Soaker::new();

/// Own slots for the soaker: the notification it signals when it has
/// left its loop, its thread, and its stack's and IPC buffer's frames
/// (`rt::thread::Slots`: from `frames` on).
#[derive(Clone, Copy, Debug)]
pub struct SoakerSlots {
    pub done: u32,
    pub thread: u32,
    pub frames: u32,
}

/// The soaker thread: counts until stopped, says so on notification
/// `done`, ends.
extern "C" fn soaker(done: u64) -> ! {
    SOAKER.run();
    let _ = syscall::signal(done);
    syscall::thread_exit(0)
}

/// Starts the soaker on `cpu` at priority 0 (after the benchmark's
/// sessions are open: their donations need aligned blocks of the quota,
/// which the soaker's small objects would cut into). The error says
/// which step failed.
pub fn start(slots: SoakerSlots, cpu: u32) -> Result<(), String> {
    let done = own(slots.done);
    syscall::retype(
        own(child::UNTYPED),
        rt::abi::ObjectType::Notification,
        0,
        done,
        1,
    )
    .map_err(|e| format!("notification: {e}"))?;
    thread::spawn(
        soaker,
        done,
        thread::Slots {
            thread: own(slots.thread),
            frames: own(slots.frames),
        },
        Placement {
            priority: 0,
            cpu,
            fault_endpoint: NULL_SLOT,
        },
    )
    .map_err(|e| format!("soaker: {e:?}"))?;
    Ok(())
}

/// Stops the soaker and waits until it has left its loop.
pub fn stop(slots: SoakerSlots) {
    SOAKER.stop();
    let _ = syscall::wait(own(slots.done));
}

/// The method's runs around `pass` (`Soaker::measure`): one unrecorded,
/// then `N` recorded — each one's elapsed ticks and the soaker's turns.
pub fn measure<E, const N: usize>(
    pass: impl FnMut() -> Result<(), E>,
) -> Result<([u64; N], [u64; N]), E> {
    let (mut elapsed, mut soaked) = ([0u64; N], [0u64; N]);
    SOAKER.measure(&mut elapsed, &mut soaked, pass)?;
    Ok((elapsed, soaked))
}

/// Prints the `BENCH` line of benchmark `name` (a Pecan name of
/// `bench::catalog`): each run's CPU cost for `bytes`, and the runs
/// behind it.
pub fn report<const N: usize>(name: &str, bytes: u64, elapsed: &[u64; N], soaked: &[u64; N]) {
    let mut costs = [0u64; N];
    for ((c, &e), &s) in costs.iter_mut().zip(elapsed).zip(soaked) {
        *c = soak::cpu_cost(soak::busy(e, s), bytes).unwrap_or(0);
    }
    let what = bench::catalog::find_pecan(name).map_or("", |b| b.what);
    let mut scratch = [0u64; N];
    let mut line = String::new();
    let io = bench::IoRuns {
        bytes,
        elapsed,
        soaked,
    };
    if bench::report_io(&mut line, name, what, &costs, io, &mut scratch).is_ok() {
        let _ = syscall::debug_write(line.as_bytes());
    }
}
