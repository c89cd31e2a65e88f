//! log-client: opens a `Log` session through its parent (`rt::session`)
//! and writes lines on it; then asks for a `Timer` session, which its
//! config does not route, and reports the refusal, and a `Rom` session
//! (routed to the parent, which serves it itself); then writes once more,
//! to show the Log session still works. Without a Log route it reports the
//! refusal, checks that none of its capability slots reaches a receiver
//! (it holds only what init gave it) and exits 1.
//!
//! With `arg = 1` ([`BENCH`], `scenarios/session-rpc.toml`, against
//! `log-service` in its benchmark mode) it measures instead, sel4bench-style
//! (`bench::measure`: warm-up, timestamp overhead subtracted, 1000
//! samples), a `PING` round trip on its Log session (the typed stub, the
//! provider's badge lookup and `log::dispatch`) and a raw call+reply on the
//! same capability that the server answers in its receive loop
//! (`log::RAW_PING`), both 4 words each way, and prints the medians and
//! their ratio in one line. Ticks are instructions under `cargo xtask run
//! session-rpc --icount`; without icount they are TSC cycles of an emulator.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::string::String;

use rt::abi::caddr::own;
use rt::abi::MsgInfo;
use rt::interfaces::child;
use rt::println;
use rt::session::{
    self,
    log::{self, Log},
    rom::Rom,
};
use rt::syscall;

rt::entry!(main);

/// `arg` of the benchmark mode.
const BENCH: u64 = 1;

/// Where the Log session capability goes.
const LOG_SLOT: u32 = child::FIRST_FREE;
/// Where a second session would go.
const OTHER_SLOT: u32 = child::FIRST_FREE + 1;
/// Slots probed for a reachable receiver: a component's table has at
/// least 16 (`ucore::config::MIN_CAPS`).
const PROBED_SLOTS: u32 = 16;

/// A session type for the refusal check (not routed in `sessions-log`).
struct Timer;
impl session::Interface for Timer {
    const NAME: &'static str = "Timer";
}

fn main(arg: u64) -> i32 {
    let log = match session::open::<Log>(LOG_SLOT) {
        Ok(log) => log,
        Err(e) => {
            println!("log-client: Log session: {e}");
            probe_slots();
            return 1;
        }
    };
    if arg == BENCH {
        return measure(&log);
    }
    let lines = [
        "hello",
        "a line longer than one message of thirty-two bytes, in three parts",
    ];
    for line in lines {
        if let Err(e) = log.write_line(line) {
            println!("log-client: write failed: {e}");
            return 2;
        }
    }
    match session::open::<Timer>(OTHER_SLOT) {
        Ok(_) => println!("log-client: Timer session opened, but it is not routed"),
        Err(e) => println!("log-client: Timer session: {e}"),
    }
    match session::open::<Rom>(OTHER_SLOT) {
        Ok(_) => println!("log-client: Rom session opened at the parent"),
        Err(e) => println!("log-client: Rom session: {e}"),
    }
    if log.write_line("still here after the refusal").is_err() {
        return 2;
    }
    0
}

/// The session RPC benchmark (module doc): 0 if every call was answered.
fn measure(log: &session::Session<Log>) -> i32 {
    let mut failed = 0u32;
    let overhead = bench::timestamp_overhead();
    let mut session_rpc = [0u64; bench::SAMPLES];
    bench::measure(&mut session_rpc, overhead, || {
        failed += log.ping().is_err() as u32;
    });
    let cap = log.cap();
    let info = MsgInfo::new(log::RAW_PING, 4, 0).unwrap_or_default();
    let mut raw = [0u64; bench::SAMPLES];
    bench::measure(&mut raw, overhead, || {
        failed += syscall::call(cap, info, [0; 4]).is_err() as u32;
    });
    for (name, samples) in [("session-rpc", &session_rpc), ("session-raw-call", &raw)] {
        let what = match name {
            "session-rpc" => "session RPC round trip: PING on a Log session (badge lookup, dispatch), 4 words each way",
            _ => "raw IPC call+reply round trip on the same capability, answered before the session layer, 4 words each way",
        };
        let mut line = String::new();
        let mut scratch = [0u64; bench::SAMPLES];
        let formatted = bench::report(
            &mut line,
            name,
            what,
            bench::Unit::Ticks,
            samples,
            &mut scratch,
        );
        if formatted.is_err() || syscall::debug_write(line.as_bytes()).is_err() {
            failed += 1;
        }
    }
    let s = bench::stats(&mut session_rpc).median;
    let r = bench::stats(&mut raw).median;
    let ratio = s * 100 / r.max(1);
    println!(
        "session-rpc: Log PING round trip {s} ticks, raw call+reply {r} ticks (medians of {}, \
         4 words each way, timestamp overhead {overhead} subtracted), ratio {}.{:02}",
        bench::SAMPLES,
        ratio / 100,
        ratio % 100
    );
    if failed > 0 {
        println!("log-client: {failed} benchmark calls FAILED");
        return 2;
    }
    0
}

/// Sends a non-blocking message on every slot but the parent's: it is
/// delivered only to a receiver waiting on an endpoint the slot names.
/// The LOG server waits on its endpoint all the time, so a capability to
/// it (or to any session) would show here.
fn probe_slots() {
    let info = MsgInfo::new(0x7e57, 0, 0).unwrap_or_default();
    let reached: u32 = (0..PROBED_SLOTS)
        .filter(|&s| s != child::PARENT)
        .filter(|&s| syscall::nb_send(own(s), info, [0; 4]).is_ok())
        .count() as u32;
    println!(
        "log-client: {reached} of my slots 0..{PROBED_SLOTS} (all but the parent's) reach a receiver"
    );
}
