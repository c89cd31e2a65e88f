//! test-status: checks init's Status session (`rt::session::status`,
//! `tests/status.toml`). It computes for about half a second of its own
//! CPU time, then reads every component's figures, prints one line each
//! (`test-status: NAME: STATE, N restarts, M MiB RAM (K KiB used), C
//! caps (U used), T ms CPU`) and checks them against its scenario: its
//! own entry running with CPU time above 0, its use within its quotas
//! and growing by exactly the four frames it then makes, `crashy` (which faults at once, restarted twice) stopped
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
/// Four frames made to see them counted (its table has 16 slots).
const FRAMES_SLOT: u32 = 12;

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
        let known = |v: Option<u64>| v.map_or("?".into(), |v| alloc::format!("{v}"));
        println!(
            "test-status: {}: {}, {} restarts, {} MiB RAM ({} KiB used), {} caps ({} used), {} ms CPU",
            c.name,
            c.state.as_str(),
            c.restarts,
            c.ram_quota >> 20,
            known(c.ram_used.map(|b| b >> 10)),
            c.caps_quota,
            known(c.caps_used),
            c.cpu_ms
        );
    }
    let me = all.iter().find(|c| c.name == "test-status");
    found.expect(
        me.is_some_and(|c| c.state == State::Running && c.cpu_ms >= 500),
        format_args!("its own entry: running, at least 500 ms CPU"),
    );
    // What it uses of its quotas: what it made from its own untyped
    // memory (its program, stack and tables are made by init from the
    // component's block, not its quota) and its full slots. Four frames
    // more must show as 16 KiB and four slots more.
    found.expect(
        me.is_some_and(|c| {
            c.ram_used.is_some_and(|b| b <= c.ram_quota)
                && c.caps_used.is_some_and(|n| n > 0 && n <= c.caps_quota)
        }),
        format_args!("its own use: within its quotas"),
    );
    let own_use = |s: &rt::session::Session<Status>| {
        s.components().ok().and_then(|all| {
            let me = all.into_iter().find(|c| c.name == "test-status")?;
            Some((me.ram_used?, me.caps_used?))
        })
    };
    let before = own_use(&status);
    let made = syscall::retype(
        rt::abi::caddr::own(child::UNTYPED),
        rt::abi::ObjectType::Frame4K,
        0,
        rt::abi::caddr::own(FRAMES_SLOT),
        4,
    );
    let after = own_use(&status);
    found.expect(
        made.is_ok()
            && matches!((before, after), (Some((b0, s0)), Some((b1, s1)))
                if b1 >= b0 + (16 << 10) && s1 == s0 + 4),
        format_args!("four frames more: {before:?} -> {after:?} (bytes, slots)"),
    );
    let crashy = all.iter().find(|c| c.name == "crashy");
    found.expect(
        crashy.is_some_and(|c| {
            c.state == State::Stopped
                && c.restarts == 2
                && c.ram_used.is_none()
                && c.caps_used.is_none()
        }),
        format_args!("crashy: stopped after 2 restarts, using nothing"),
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
