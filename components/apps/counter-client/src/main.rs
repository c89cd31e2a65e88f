//! counter-client: opens a `Counter` session (`rt::session::counter`) and
//! adds 1 until `arg` requests (10 if 0) were acknowledged. When a request
//! fails — its provider stopped, so the call was aborted or the session
//! capability is gone — it reports the error, reconnects
//! (`Session::reopen_counted`), reports how often init answered
//! `RESTARTING` meanwhile (0 when init parked the open while the provider
//! waited out its back-off, `scenarios/session-park.toml`) and goes on
//! with a fresh session; at the end it prints how many requests were
//! acknowledged, how often it reconnected and its last session's total
//! (`scenarios/session-restart.toml`).
//! Its lines start `counter-client/N`, N its count, which tells clients
//! apart. Exits 0 when all were acknowledged, 1 if it could not (re)open.
//!
//! `arg = -1`: open only — it opens the session once, without retrying
//! (`counter-client/open-only: Counter session: ...` with the refusal,
//! e.g. the provider is being restarted), closes it and exits 0
//! (`scenarios/session-park-full.toml`: more opens during a back-off
//! than init parks).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
use rt::interfaces::child;
use rt::println;
use rt::session::{self, counter::Counter, Donor, Session};

rt::entry!(main);

/// Where the session capability goes.
const SLOT: u32 = child::FIRST_FREE;
/// The donor's block and the slot for its donation table.
const DONOR_BLOCK: u32 = child::FIRST_FREE + 1;
const DONOR_TABLE: u32 = child::FIRST_FREE + 2;
/// Requests without an `arg`.
const DEFAULT_REQUESTS: u64 = 10;
/// Failed requests in a row after which it gives up.
const MAX_FAILURES_IN_A_ROW: u32 = 3;

/// `arg = -1`: open only (see the module doc).
const OPEN_ONLY: u64 = u64::MAX;

fn main(arg: u64) -> i32 {
    if arg == OPEN_ONLY {
        return open_only();
    }
    let want = if arg == 0 { DEFAULT_REQUESTS } else { arg };
    // Its name in the log: the count, which tells two clients apart.
    let me = want;
    let mut counter = match open() {
        Ok(s) => s,
        Err(e) => {
            println!("counter-client/{me}: Counter session: {e}");
            return 1;
        }
    };
    let (mut acked, mut reconnects, mut failures, mut total) = (0u64, 0u32, 0u32, 0u64);
    while acked < want {
        match counter.add(1) {
            Ok(t) => {
                acked += 1;
                failures = 0;
                total = t;
            }
            Err(e) => {
                failures += 1;
                println!(
                    "counter-client/{me}: request {} failed ({e}); reconnecting",
                    acked + 1
                );
                if failures >= MAX_FAILURES_IN_A_ROW {
                    println!("counter-client/{me}: {failures} failures in a row; giving up");
                    return 1;
                }
                let restarting = match counter.reopen_counted() {
                    Ok(n) => n,
                    Err(e) => {
                        println!("counter-client/{me}: reconnecting failed: {e}");
                        return 1;
                    }
                };
                reconnects += 1;
                println!("counter-client/{me}: reconnected (reconnect {reconnects})");
                println!(
                    "counter-client/{me}: reconnect {reconnects} got {restarting} RESTARTING answers"
                );
            }
        }
    }
    println!(
        "counter-client/{me}: {acked} requests acknowledged, {reconnects} reconnects, \
         last session's total {total}"
    );
    0
}

/// `arg = -1`: opens the session once (no retry: a `RESTARTING` answer
/// is reported as it is), closes it and exits 0 either way.
fn open_only() -> i32 {
    match open() {
        Ok(s) => {
            let closed = s.close().map(|_| ());
            println!("counter-client/open-only: opened; closed: {closed:?}");
        }
        Err(e) => println!("counter-client/open-only: Counter session: {e}"),
    }
    0
}

/// Opens the Counter session, its quota donated from a block of the
/// client's own memory.
fn open() -> Result<Session<Counter>, session::OpenError> {
    let donor = Donor::from_untyped::<Counter>(own(child::UNTYPED), DONOR_BLOCK, DONOR_TABLE)
        .map_err(session::OpenError::Donation)?;
    session::open_donating::<Counter>(SLOT, donor).map_err(|(e, _)| e)
}
