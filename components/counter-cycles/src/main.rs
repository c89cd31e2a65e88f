//! counter-cycles: opens a `Counter` session, uses it and closes it, `arg`
//! times (5 if 0), each time donating its quota (`rt::session::counter`:
//! a page and a slot) from the same block of its own memory
//! (`rt::session::Donor`). After each close it checks with the kernel
//! that the block is whole again — the kernel makes an untyped of the
//! block's full size from it only when no object made from it is left,
//! wherever its capability is — and prints one line per cycle
//! (`scenarios/session-quota.toml`). Exits 0 when every cycle got its
//! memory back, 1 otherwise.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
use rt::abi::child;
use rt::println;
use rt::session::{self, counter::Counter, Donor};

rt::entry!(main);

/// Its slots: the session capability's, then the donor's block and
/// donation table.
const SLOT: u32 = child::FIRST_FREE;
const DONOR_BLOCK: u32 = SLOT + 1;
const DONOR_TABLE: u32 = SLOT + 2;
/// Cycles without an `arg`.
const DEFAULT_CYCLES: u64 = 5;

fn main(arg: u64) -> i32 {
    let cycles = if arg == 0 { DEFAULT_CYCLES } else { arg };
    let mut donor =
        match Donor::from_untyped::<Counter>(own(child::UNTYPED), DONOR_BLOCK, DONOR_TABLE) {
            Ok(donor) => donor,
            Err(e) => {
                println!("counter-cycles: no block for the donations: {e}");
                return 1;
            }
        };
    let bits = donor.bits();
    let mut whole = 0;
    for cycle in 1..=cycles {
        let before = donor.is_whole();
        let counter = match session::open_donating::<Counter>(SLOT, donor) {
            Ok(s) => s,
            Err((e, _)) => {
                println!("counter-cycles: cycle {cycle}: open: {e}");
                return 1;
            }
        };
        let total = match counter.add(1) {
            Ok(total) => total,
            Err(e) => {
                println!("counter-cycles: cycle {cycle}: ADD failed: {e}");
                return 1;
            }
        };
        donor = match counter.close() {
            Ok(Some(d)) => d,
            Ok(None) => {
                println!("counter-cycles: cycle {cycle}: the session kept no donor");
                return 1;
            }
            Err(e) => {
                println!("counter-cycles: cycle {cycle}: close: {e}");
                return 1;
            }
        };
        let after = donor.is_whole();
        whole += after as u64;
        println!(
            "counter-cycles: cycle {cycle}: total {total} in a fresh session; my 2^{bits}-byte \
             donation block whole before open: {}, after close: {}",
            yes(before),
            yes(after)
        );
    }
    println!("counter-cycles: {whole} of {cycles} closes gave all the donated memory back");
    (whole != cycles) as i32
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "NO"
    }
}
