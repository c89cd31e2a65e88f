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
//! | anything else | returns 0, so its thread exits with code 0 |
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::println;

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
        _ => {}
    }
    0
}
