//! counter-service: provides `Counter` (`rt::session::counter`), a running
//! total per session.
//!
//! With `arg = N > 0` it crashes on request N + 1 (counted over all its
//! sessions): it yields a few times first — so that other clients' calls
//! queue on its endpoint while their caller waits for its reply — and then
//! writes to the unmapped address 0xdead0000. Init restarts it by its
//! policy and the clients, woken with an error, reconnect
//! (`scenarios/session-restart.toml`). `arg = 0` never crashes.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::child;
use rt::println;
use rt::session::counter::{self, Counter};
use rt::session::{Label, Provider};
use rt::syscall;

rt::entry!(main);

/// The unmapped address the crash writes to.
const FAULT_ADDRESS: u64 = 0xdead_0000;
/// Yields before the crash: room for the other clients to call.
const YIELDS_BEFORE_CRASH: u32 = 8;

fn main(crash_after: u64) -> i32 {
    println!("counter-service: serving (crash after {crash_after} requests; 0: never)");
    // One slot per session from FIRST_FREE; a component's table has at
    // least 16 slots (`ucore::config::MIN_CAPS`).
    let provider: Provider<Counter, u64> = Provider::new(child::FIRST_FREE, 16);
    let mut served = 0u64;
    provider.serve(
        |client: &Label| {
            println!("counter-service: session for {}", client.as_str());
            0
        },
        |_, total, label, words| {
            if crash_after != 0 && served == crash_after {
                crash();
            }
            served += 1;
            counter::dispatch(total, label, words)
        },
    )
}

/// The crash: a page fault after letting the other threads run.
fn crash() -> ! {
    println!("counter-service: crashing now");
    for _ in 0..YIELDS_BEFORE_CRASH {
        let _ = syscall::yield_now();
    }
    // SAFETY: nothing is mapped at FAULT_ADDRESS in any component; the
    // write page-faults and init, the fault handler, never resumes it.
    unsafe { (FAULT_ADDRESS as *mut u64).write_volatile(1) };
    unreachable!("the write to an unmapped address returned");
}
