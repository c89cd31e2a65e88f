//! counter-cycles: opens a `Counter` session, uses it and closes it, `arg`
//! times (5 if 0), each time donating its quota (`rt::session::counter`:
//! a page and a slot) from the same block of its own memory
//! (`rt::session::Donor`). After each close it checks with the kernel
//! that the block is whole again — the kernel makes an untyped of the
//! block's full size from it only when no object made from it is left,
//! wherever its capability is — and prints one line per cycle. First it
//! checks that a session without a donation, and one with an endpoint
//! where the donation table belongs, are refused (`REFUSED_QUOTA`)
//! (`scenarios/session-quota.toml`). At the start and, after deleting the
//! donor's block, at the end it measures its free memory — the largest
//! untyped the kernel will make from its quota, which is all of it only
//! when nothing made from it is left — and prints whether the two are
//! equal. Exits 0 when every cycle got its memory back and the two are
//! equal, 1 otherwise.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
extern crate alloc;

use rt::abi::{MsgInfo, ObjectType};
use rt::interfaces::child;
use rt::interfaces::session::{self as proto, pack};
use rt::println;
use rt::session::Interface;
use rt::session::{self, counter::Counter, Donor};
use rt::syscall;
use rt::transfer;

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
    let free_at_start = largest_free();
    if !bad_donations_refused() {
        return 1;
    }
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
    // SAFETY: an untyped capability, nothing made from it left (the last
    // close revoked it); nothing is mapped through it.
    let _ = unsafe { syscall::cap_delete(own(DONOR_BLOCK)) };
    let free_at_end = largest_free();
    println!(
        "counter-cycles: free memory at start 2^{free_at_start} bytes, at the end 2^{free_at_end} \
         bytes: {}",
        if free_at_start == free_at_end {
            "equal"
        } else {
            "NOT EQUAL"
        }
    );
    (whole != cycles || free_at_start != free_at_end) as i32
}

/// Opens without a donation, then with an endpoint where the donation
/// table belongs: the provider must refuse both (`REFUSED_QUOTA`), and
/// init must pass the refusal on. Whether both were refused.
fn bad_donations_refused() -> bool {
    let none = session::open::<Counter>(SLOT).err();
    println!("counter-cycles: without a donation: {}", outcome(none));
    let ep = own(DONOR_TABLE);
    let bogus = syscall::retype(own(child::UNTYPED), ObjectType::Endpoint, 0, ep, 1)
        .map_err(session::OpenError::Donation)
        .and_then(|()| {
            transfer::set_send_cap(ep);
            let info = MsgInfo::new(proto::OPEN, 4, 1).unwrap_or_default();
            transfer::call_for_cap(own(child::PARENT), info, pack(Counter::NAME), own(SLOT))
                .map_err(session::OpenError::Ipc)
        });
    let bogus = match bogus {
        Ok((reply, words)) if reply.label() == proto::REFUSED_PROVIDER => {
            Some(session::OpenError::Provider(words[0]))
        }
        Ok(_) => None,
        Err(e) => Some(e),
    };
    println!(
        "counter-cycles: an endpoint as the donation: {}",
        outcome(bogus)
    );
    // SAFETY: the endpoint (made from the quota and deleted, so the quota
    // is whole for the measure) and the session slot, empty unless the
    // open succeeded; nothing is mapped through them.
    unsafe {
        let _ = syscall::cap_delete(ep);
        let _ = syscall::cap_delete(own(SLOT));
    }
    let quota = session::OpenError::Provider(proto::REFUSED_QUOTA);
    none == Some(quota) && bogus == Some(quota)
}

/// An open's outcome for the log: its error, or that it was opened.
fn outcome(error: Option<session::OpenError>) -> alloc::string::String {
    match error {
        Some(e) => alloc::format!("{e}"),
        None => alloc::string::String::from("OPENED"),
    }
}

/// log2 of the largest untyped the kernel makes from the quota
/// (`child::UNTYPED`) at once: all of it when nothing made from it is
/// left (the kernel places an object at the watermark, which is back at 0
/// only then). Probed from 2^36 bytes down, into the table slot, and
/// deleted again.
fn largest_free() -> u32 {
    let probe = own(DONOR_TABLE);
    for bits in (12..=36).rev() {
        if syscall::retype(own(child::UNTYPED), ObjectType::Untyped, bits, probe, 1).is_ok() {
            // SAFETY: the probe, an untyped; nothing is mapped through it.
            let _ = unsafe { syscall::cap_delete(probe) };
            return bits as u32;
        }
    }
    0
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "NO"
    }
}
