//! counter-service: provides `Counter` (`rt::session::counter`), a running
//! total per session.
//!
//! Each session's quota donation (`rt::session::counter`: a page and a
//! slot) pays for a notification it makes into the donated slot — and,
//! acting as a hostile provider would, it keeps a copy of that capability
//! in a slot of its own ([`KEPT`]) and never deletes it. When a session
//! opens it reports how many of the copies it kept from earlier sessions
//! still exist: a closed session's client revoked its donation, which
//! destroys the object whatever the provider holds
//! (`scenarios/session-quota.toml`).
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

use rt::abi::caddr::own;
use rt::abi::ObjectType;
use rt::interfaces::{child, session as proto};
use rt::println;
use rt::session::counter::{self, Counter};
use rt::session::{Donated, Label, Provider};
use rt::syscall;

rt::entry!(main);

/// The unmapped address the crash writes to.
const FAULT_ADDRESS: u64 = 0xdead_0000;
/// Yields before the crash: room for the other clients to call.
const YIELDS_BEFORE_CRASH: u32 = 8;
/// Own slots where it keeps copies of its sessions' objects, the oldest
/// replaced first.
const KEPT: [u32; 2] = [child::FIRST_FREE, child::FIRST_FREE + 1];
/// Its sessions' slots: after `KEPT`, three sessions' worth (two slots
/// each) — as many as its capability table holds (`caps = 32` for three;
/// the smallest table, 16, holds two: a third open is refused full).
const SESSION_SLOTS: (u32, u32) = (child::FIRST_FREE + 2, child::FIRST_FREE + 8);

fn main(crash_after: u64) -> i32 {
    println!("counter-service: serving (crash after {crash_after} requests; 0: never)");
    let provider: Provider<Counter, u64> = Provider::new(SESSION_SLOTS.0, SESSION_SLOTS.1);
    let mut served = 0u64;
    let mut opened = 0usize;
    provider.serve(
        |client: &Label, donated: Option<Donated>| {
            let kept = own(KEPT[opened % KEPT.len()]);
            let alive = KEPT.iter().filter(|&&k| exists(own(k))).count();
            println!(
                "counter-service: session for {}; {alive} of the objects I kept from earlier \
                 sessions still exist",
                client.as_str()
            );
            // SAFETY: a notification capability (or nothing); nothing is
            // mapped through it.
            let _ = unsafe { syscall::cap_delete(kept) };
            let donated = donated.ok_or(proto::REFUSED_QUOTA)?;
            let object = donated.slot(0);
            syscall::retype(donated.untyped(), ObjectType::Notification, 0, object, 1)
                .and_then(|()| syscall::cap_copy(object, kept))
                .map_err(|_| proto::REFUSED_QUOTA)?;
            opened += 1;
            Ok(0)
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

/// Whether own slot `slot` still holds the notification kept there: a
/// signal on it (which nobody waits for) succeeds.
fn exists(slot: u64) -> bool {
    syscall::signal(slot).is_ok()
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
