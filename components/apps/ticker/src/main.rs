//! ticker: ticks `arg` times (10 if 0), yielding [`YIELDS_PER_TICK`] times
//! between ticks, and prints each tick. With a `Counter` route it opens a
//! session first (donating its quota) and adds 1 per tick, printing the
//! session's total: a total that keeps counting shows the session survived
//! whatever happened in between — a config update that left the ticker and
//! its provider running (`scenarios/reconfig.toml`). Exits 0, or 1 if a
//! request on the session failed.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
use rt::interfaces::child;
use rt::println;
use rt::session::{self, counter::Counter, Donor};
use rt::syscall;

rt::entry!(main);

/// Yields between two ticks: room for the others.
const YIELDS_PER_TICK: u32 = 2;
/// Ticks without an `arg`.
const DEFAULT_TICKS: u64 = 10;
/// Its slots: the session capability's, then the donor's block and
/// donation table.
const SLOT: u32 = child::FIRST_FREE;
const DONOR_BLOCK: u32 = SLOT + 1;
const DONOR_TABLE: u32 = SLOT + 2;

fn main(arg: u64) -> i32 {
    let ticks = if arg == 0 { DEFAULT_TICKS } else { arg };
    let counter = Donor::from_untyped::<Counter>(own(child::UNTYPED), DONOR_BLOCK, DONOR_TABLE)
        .ok()
        .and_then(|donor| session::open_donating::<Counter>(SLOT, donor).ok());
    for tick in 1..=ticks {
        for _ in 0..YIELDS_PER_TICK {
            let _ = syscall::yield_now();
        }
        match &counter {
            Some(c) => match c.add(1) {
                Ok(total) => println!("ticker: tick {tick} of {ticks} (session total {total})"),
                Err(e) => {
                    println!("ticker: tick {tick}: the Counter session failed: {e}");
                    return 1;
                }
            },
            None => println!("ticker: tick {tick} of {ticks} (no Counter session)"),
        }
    }
    0
}
