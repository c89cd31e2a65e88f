//! test-status: checks init's Status session (`rt::session::status`,
//! `tests/status.toml`). It computes for about half a second of its own
//! CPU time, then reads every component's figures, prints one line each
//! (`test-status: NAME: STATE, N restarts, M MiB RAM, C caps, T ms CPU`)
//! and checks them against its scenario: its own entry running with CPU
//! time above 0, `crashy` (which faults at once, restarted twice) stopped
//! after 2 restarts, the quotas as configured, and `NOT_FOUND` past the
//! end. Prints `test-status: N checks failed` and exits 0 when N is 0.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use rt::check::Findings;
use rt::interfaces::child;
use rt::println;
use rt::session::status::{State, Status};
use rt::session::{self};
use rt::syscall;

rt::entry!(main);

const STATUS_SLOT: u32 = child::FIRST_FREE;

fn main(_: u64) -> i32 {
    let status = match session::open::<Status>(STATUS_SLOT) {
        Ok(s) => s,
        Err(e) => {
            println!("test-status: FAILED: Status session: {e}");
            return 1;
        }
    };
    let mut found = Findings::new();
    // Half a second of its own CPU time (50 ticks), sampled by the kernel
    // (its own thread: `own = ["thread"]`); bounded, should a tick never
    // be charged.
    let own = rt::abi::caddr::own(child::OWN_THREAD);
    let mut x = 1u64;
    for _ in 0..100_000 {
        match syscall::thread_cpu_time(own) {
            Ok(t) if t.millis() >= 500 => break,
            Ok(_) => {}
            Err(e) => {
                println!("test-status: FAILED: ThreadCpuTime of its own thread: {e}");
                return 1;
            }
        }
        for _ in 0..10_000 {
            x = core::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    let all = match status.components() {
        Ok(all) => all,
        Err(e) => {
            println!("test-status: FAILED: reading the components: {e}");
            return 1;
        }
    };
    for c in &all {
        println!(
            "test-status: {}: {}, {} restarts, {} MiB RAM, {} caps, {} ms CPU",
            c.name,
            c.state.as_str(),
            c.restarts,
            c.ram_quota >> 20,
            c.caps_quota,
            c.cpu_ms
        );
    }
    let me = all.iter().find(|c| c.name == "test-status");
    found.expect(
        me.is_some_and(|c| c.state == State::Running && c.cpu_ms >= 500),
        format_args!("its own entry: running, at least 500 ms CPU"),
    );
    let crashy = all.iter().find(|c| c.name == "crashy");
    found.expect(
        crashy.is_some_and(|c| c.state == State::Stopped && c.restarts == 2),
        format_args!("crashy: stopped after 2 restarts"),
    );
    let log = all.iter().find(|c| c.name == "log");
    found.expect(
        log.is_some_and(|c| c.ram_quota == 2 << 20 && c.caps_quota == 64),
        format_args!("log: 2 MiB RAM and 64 caps, as configured"),
    );
    found.expect(
        matches!(status.component(all.len() as u64), Ok(None)),
        format_args!("no component past the end"),
    );
    found.finish()
}
