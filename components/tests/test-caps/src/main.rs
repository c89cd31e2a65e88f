//! test-caps: checks the capability space its parent gives it
//! (`interfaces::child`) by using every capability in it once. `ARG` is the
//! set of own capabilities it expects (`interfaces::child::OwnCaps` bits:
//! 1 thread, 2 capability space, 4 address space) — what its start entry
//! grants (`pecan.start=test-caps:7+own`, or a scenario's `own` list); the
//! others must be missing, however the component is called.
//!
//! | check | slot | what |
//! |-------|------|------|
//! | `untyped` | 1 | retype an endpoint from the child's untyped into slot 8 |
//! | `service-write-only` | 2 | minting a readable copy of the service endpoint fails (`MissingRights`) |
//! | `own-thread` / `no-own-thread` | 4 | expected: set its own thread's priority to the children's (it must run at it, on CPU 0); else the slot is empty |
//! | `own-cspace` / `no-own-cspace` | 5 | expected: copy the service endpoint into its slot 9 through its own table's capability (`caddr::in_table(5, ..)`) and find it there; else the slot is empty |
//! | `own-vspace` / `no-own-vspace` | 6 | expected: map a frame retyped from its untyped into its own address space and use it; else the slot is empty |
//!
//! (The probes are `protocols::own_caps`, which `hello` runs too.) Prints
//! `test-caps: check NAME: ok` (or `FAILED (...)`) for each, then
//! `test-caps: N of M checks failed` or `test-caps: all checks passed`;
//! its exit code is the number of failed checks (1 for an `ARG` that is
//! no set).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use protocols::own_caps::{self, Slot};
use rt::abi::caddr::own;
use rt::abi::{Error, ObjectType, Rights};
use rt::interfaces::child::{self, OwnCaps};
use rt::println;
use rt::syscall;

rt::entry!(main);

/// Slots this component fills (its first free ones).
const ENDPOINT: u32 = child::FIRST_FREE;
const SCRATCH: u32 = child::FIRST_FREE + 1;
const READABLE: u32 = child::FIRST_FREE + 2;

/// Why a check failed.
enum Failure {
    /// A system call returned this error.
    Kernel(Error),
    /// A step of a probe failed (`protocols::own_caps::Failed`).
    Probe(&'static str, Error),
    /// A slot that should be empty holds a working capability.
    Held,
    /// A slot that should hold a capability is empty.
    Empty,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Kernel(e) => write!(f, "{e}"),
            Failure::Probe(step, e) => write!(f, "{step} failed: {e}"),
            Failure::Held => f.write_str("the slot holds the capability"),
            Failure::Empty => f.write_str("the slot is empty"),
        }
    }
}

fn main(arg: u64) -> i32 {
    let Some(expected) = u8::try_from(arg).ok().and_then(OwnCaps::from_bits) else {
        println!(
            "test-caps: ARG {arg:#x} is no set of own capabilities (bits 1 thread, 2 cspace, \
             4 vspace)"
        );
        return 1;
    };
    let untyped = syscall::retype(
        own(child::UNTYPED),
        ObjectType::Endpoint,
        0,
        own(ENDPOINT),
        1,
    );
    let write_only =
        match syscall::cap_mint(own(child::SERVICE_ENDPOINT), own(READABLE), Rights::READ, 0) {
            Err(Error::MissingRights) => Ok(()),
            Ok(()) => Err(Error::InvalidState),
            Err(e) => Err(e),
        };
    let mut checks: Vec<(&str, Result<(), Failure>)> = vec![
        ("untyped", untyped.map_err(Failure::Kernel)),
        ("service-write-only", write_only.map_err(Failure::Kernel)),
    ];
    let names = [
        ("own-thread", "no-own-thread"),
        ("own-cspace", "no-own-cspace"),
        ("own-vspace", "no-own-vspace"),
    ];
    for ((_, kind, _), (held, missing)) in OwnCaps::KINDS.into_iter().zip(names) {
        let want_held = expected.contains(kind);
        let result = match (own_caps::probe(kind, SCRATCH), want_held) {
            (Ok(Slot::Held), true) | (Ok(Slot::Empty), false) => Ok(()),
            (Ok(Slot::Held), false) => Err(Failure::Held),
            (Ok(Slot::Empty), true) => Err(Failure::Empty),
            (Err((step, e)), _) => Err(Failure::Probe(step, e)),
        };
        checks.push((if want_held { held } else { missing }, result));
    }
    let mut failed = 0;
    for (name, result) in &checks {
        match result {
            Ok(()) => println!("test-caps: check {name}: ok"),
            Err(why) => {
                println!("test-caps: check {name}: FAILED ({why})");
                failed += 1;
            }
        }
    }
    if failed == 0 {
        println!("test-caps: all checks passed");
    } else {
        println!("test-caps: {failed} of {} checks failed", checks.len());
    }
    failed
}
