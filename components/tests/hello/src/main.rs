//! hello: the smallest child of root, a good module to start next to bad
//! ones and a deliberate faulter for tests of root's fault handling.
//!
//! Started as `pecan.start=hello:ARG`, it prints
//!
//! ```text
//! hello: hello from a child (arg=ARG)
//! ```
//!
//! and then, by `ARG`:
//!
//! | ARG | what it does |
//! |-----|--------------|
//! | 1 | writes to the unmapped address 0xdead0000 (a page fault) |
//! | 2 | executes `ud2` (an invalid-opcode exception, vector 6) |
//! | 3 | calls the service endpoint (slot `interfaces::child::SERVICE_ENDPOINT`) with word 41 and prints the answer of the server there (`echo-server`: 42 and the caller's badge): `hello: the server answered 42, my badge is N`; exits 0, or 1 if the call fails. Marks `call server` (value 41) before the call and `answered` (the answer) after it in the kernel trace (`scenarios/trace-ping.toml`) |
//! | 4 | reports which own capabilities it holds — for each of slots 4, 5 and 6 (`interfaces::child::OWN_THREAD`, `OWN_CSPACE`, `OWN_VSPACE`) `hello: own thread (slot 4): held` (the capability is there and works on its own object: `protocols::own_caps::probe`) or `...: empty`; exits 0, or 1 if a probe fails. Its name grants it nothing: only its start entry (`+own`, a scenario's `own`) does |
//! | anything else | returns 0, so its thread exits with code 0 |
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use protocols::own_caps::{self, Slot};
use rt::abi::caddr::own;
use rt::abi::MsgInfo;
use rt::interfaces::child::{self, OwnCaps};
use rt::println;
use rt::syscall;

rt::entry!(main);

/// The unmapped address ARG 1 writes to.
const FAULT_ADDRESS: u64 = 0xdead_0000;

fn main(arg: u64) -> i32 {
    println!("hello: hello from a child (arg={arg})");
    match arg {
        1 => {
            println!("hello: deliberately writing to unmapped address {FAULT_ADDRESS:#x}");
            // SAFETY: deliberately unsound: nothing is mapped there, the
            // write faults, and root (the fault handler) stops this thread.
            unsafe { core::ptr::write_volatile(FAULT_ADDRESS as *mut u64, 1) };
        }
        2 => {
            println!("hello: deliberately executing an invalid opcode");
            // SAFETY: `ud2` raises #UD; root stops this thread.
            unsafe { core::arch::asm!("ud2") };
        }
        3 => return call_server(),
        4 => return report_own_caps(),
        _ => {}
    }
    0
}

/// Calls the service endpoint with word 41 and prints the answer.
fn call_server() -> i32 {
    let info = MsgInfo::new(1, 1, 0).unwrap_or_default();
    syscall::trace_mark("call server", 41);
    match syscall::call(own(child::SERVICE_ENDPOINT), info, [41, 0, 0, 0]) {
        Ok((_, words)) => {
            syscall::trace_mark("answered", words[0]);
            println!(
                "hello: the server answered {}, my badge is {}",
                words[0], words[1]
            );
            0
        }
        Err(e) => {
            println!("hello: calling the service endpoint failed: {e}");
            1
        }
    }
}

/// Probes each own-capability slot and prints what it holds.
fn report_own_caps() -> i32 {
    let mut code = 0;
    for (word, kind, slot) in OwnCaps::KINDS {
        match own_caps::probe(kind, child::FIRST_FREE) {
            Ok(Slot::Held) => println!("hello: own {word} (slot {slot}): held"),
            Ok(Slot::Empty) => println!("hello: own {word} (slot {slot}): empty"),
            Err((step, e)) => {
                println!("hello: own {word} (slot {slot}): {step} failed: {e}");
                code = 1;
            }
        }
    }
    code
}
