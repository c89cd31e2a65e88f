//! test-timer: a client of the Timer service (`rt::session::timer`,
//! `components/services/timer`) that checks what it promises; `scenarios/timer.toml`
//! runs it, the `timer-*` tests read its lines. Exits with the number of
//! failed checks.
//!
//! | `arg` | what it checks |
//! |-------|----------------|
//! | [`BASIC`] | a 1000 µs periodic timeout fires exactly 50 times while `now()` advances 50 ms; `sleep(us)` returns after at least `us` and at most two ticks more; then the cost of a tick: a spinning loop counts the time-stamp-counter gaps the interrupts cut into it; then the TSC clock (`CLOCK`, `clock_now`) |
//! | [`REFUSED`] | 0 µs, a period below a tick, more than an hour, a ninth timeout, cancelling what is not set, an unknown opcode: each refused with its label; more sessions until the provider refuses one (full); and the server still answers |
//! | ≥ 1000 | a periodic timeout of `arg` µs, [`SPAN_US`] long, plus a one-shot of half the span in the same session: the count and the elapsed time match the period, and no bit but its own two arrives (several of these run at once in one scenario) |
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec::Vec;

use rt::abi::caddr::own;
use rt::abi::Error;
use rt::check::Checks;
use rt::interfaces::child;
use rt::println;
use rt::session::timer::{self, Timer, TimerError, TimerService};
use rt::session::{open, OpenError, REFUSED_FULL};
use rt::syscall;
use ucore::timer::{MAX_TIMEOUTS, MAX_US, MIN_PERIOD_US};

rt::entry!(main);

const BASIC: u64 = 1;
const REFUSED: u64 = 2;
/// The span the concurrent clients measure, µs.
const SPAN_US: u64 = 60_000;
/// One tick of the timer, rounded up (`ucore::timer::TICK_CYCLES`).
const TICK_US: u64 = 1000;
/// What a client's wake-up may add to a measured span.
const SLACK_US: u64 = 200;

fn main(arg: u64) -> i32 {
    let t = match Timer::open(child::FIRST_FREE, child::FIRST_FREE + 1) {
        Ok(t) => t,
        Err(e) => {
            println!("test-timer: no Timer session: {e}");
            return 1;
        }
    };
    let mut c = Checks::unnumbered();
    let result = match arg {
        BASIC => basic(&t, &mut c),
        REFUSED => refused(&t, &mut c),
        period if period >= MIN_PERIOD_US => concurrent(&t, &mut c, period),
        _ => {
            println!("test-timer: unknown mode {arg}");
            return 1;
        }
    };
    if let Err(e) = result {
        c.expect(
            "timer-requests",
            false,
            format_args!("a Timer request failed: {e}"),
        );
    }
    c.finish()
}

fn basic(t: &Timer, c: &mut Checks) -> Result<(), TimerError> {
    // Counted over a span of now(): the 50th fire is the first at or after
    // 50 ms, so exactly 50 fires fit.
    let start = t.now()?;
    let p = t.periodic(1000)?;
    let mut fires = 0;
    let elapsed = loop {
        t.wait_for(p)?;
        fires += 1;
        let elapsed = t.now()? - start;
        if elapsed >= 50_000 {
            break elapsed;
        }
    };
    t.cancel(p)?;
    println!("test-timer: periodic 1000 us: {fires} fires while now() advanced {elapsed} us");
    c.expect(
        "50-fires-in-50-ms",
        fires == 50 && elapsed < 50_000 + TICK_US + SLACK_US,
        format_args!("{fires} fires in {elapsed} us"),
    );

    for us in [1, 999, 1000, 2500, 20_000] {
        let before = t.now()?;
        t.sleep(us)?;
        let slept = t.now()? - before;
        println!("test-timer: sleep({us}) took {slept} us");
        c.expect(
            format_args!("sleep-{us}-us"),
            (us..=us + 2 * TICK_US + SLACK_US).contains(&slept),
            format_args!("slept {slept} us"),
        );
    }
    tick_cost(t)?;
    tsc_clock(t, c)
}

/// `CLOCK` and [`Timer::clock_now`]: the server knows the TSC's rate once
/// it measured it for long enough; the interpolated clock stays between
/// two `now()` readings around it (within [`CLOCK_SLACK_US`]), never goes
/// back, and a burst of readings costs a request per resync interval at
/// most.
fn tsc_clock(t: &Timer, c: &mut Checks) -> Result<(), TimerError> {
    const CLOCK_SLACK_US: u64 = 20;
    let mut hz = 0;
    for _ in 0..30 {
        hz = t.clock()?.1;
        if hz != 0 {
            break;
        }
        t.sleep(10_000)?;
    }
    c.expect(
        "clock-rate",
        hz != 0,
        format_args!("no TSC rate after 300 ms"),
    );
    let (mut worst, mut last, mut ordered) = (0u64, 0u64, true);
    for _ in 0..30 {
        let before = t.now()?;
        let read = t.clock_now()?;
        let after = t.now()?;
        ordered &=
            read >= last && read + CLOCK_SLACK_US >= before && read <= after + CLOCK_SLACK_US;
        worst = worst
            .max(before.saturating_sub(read))
            .max(read.saturating_sub(after));
        last = read;
        t.sleep(3_000)?;
    }
    c.expect(
        "clock-now-between-nows",
        ordered,
        format_args!("clock_now off by {worst} us or went back"),
    );
    let requests = t.requests();
    let start = t.clock_now()?;
    let mut prev = start;
    for _ in 0..1000 {
        let now = t.clock_now()?;
        ordered &= now >= prev;
        prev = now;
    }
    let made = t.requests() - requests;
    let bound = 2 + (prev - start) / ucore::timer::TSC_RESYNC_US;
    println!(
        "test-timer: CLOCK: the TSC at {hz} Hz; clock_now() within {worst} us of now() over 30 readings; 1000 readings over {} us made {made} requests",
        prev - start
    );
    c.expect(
        "clock-now-cheap",
        ordered && made <= bound,
        format_args!("{made} requests (at most {bound}), monotonic: {ordered}"),
    );
    Ok(())
}

/// Spins for 50 ms of `now()` reading the time-stamp counter: each gap of
/// more than [`GAP`] TSC ticks is an interruption (a PIT tick handled by
/// the kernel and the timer, or the kernel's own timeslice interrupt).
/// Under `-icount` the TSC counts instructions, so the average gap is
/// what an interrupt costs a running program, in instructions.
fn tick_cost(t: &Timer) -> Result<(), TimerError> {
    const GAP: u64 = 300;
    let start = t.now()?;
    let (mut gaps, mut stolen) = (0u64, 0u64);
    let mut prev = syscall::rdtsc();
    let first = prev;
    // Bounded by the TSC: 50 M ticks are 50 ms under icount.
    while prev - first < 50_000_000 {
        let now = syscall::rdtsc();
        if now - prev > GAP {
            gaps += 1;
            stolen += now - prev;
        }
        prev = now;
    }
    let elapsed = t.now()? - start;
    println!(
        "test-timer: spinning {} TSC ticks ({elapsed} us of now()): {gaps} interruptions, {} TSC ticks each",
        prev - first,
        stolen.checked_div(gaps).unwrap_or(0)
    );
    Ok(())
}

fn refused(t: &Timer, c: &mut Checks) -> Result<(), TimerError> {
    let bad =
        |r: Result<timer::Timeout, TimerError>| r == Err(TimerError::Refused(timer::BAD_DURATION));
    let refused_with = |c: &mut Checks, name: &str, r: Result<timer::Timeout, TimerError>| {
        c.expect(name, bad(r), format_args!("{r:?}"));
    };
    refused_with(&mut *c, "oneshot-0-us", t.oneshot(0));
    refused_with(&mut *c, "period-0-us", t.periodic(0));
    refused_with(
        &mut *c,
        "period-below-a-tick",
        t.periodic(MIN_PERIOD_US - 1),
    );
    refused_with(&mut *c, "oneshot-over-an-hour", t.oneshot(MAX_US + 1));
    refused_with(&mut *c, "period-u64-max", t.periodic(u64::MAX));
    let not_set = Err(TimerError::Refused(timer::NOT_SET));
    let r = t.cancel(timer::Timeout(3));
    c.expect("cancel-of-nothing", r == not_set, format_args!("{r:?}"));
    let r = t.cancel(timer::Timeout(u64::MAX));
    c.expect("cancel-out-of-range", r == not_set, format_args!("{r:?}"));
    for _ in 0..MAX_TIMEOUTS {
        t.oneshot(MAX_US)?;
    }
    let r = t.oneshot(5);
    c.expect(
        "one-timeout-too-many",
        r == Err(TimerError::Refused(timer::FULL)),
        format_args!("{r:?}"),
    );
    for k in 0..MAX_TIMEOUTS as u64 {
        t.cancel(timer::Timeout(k))?;
    }
    let unknown = t
        .session()
        .call(99, [1, 2, 3, 4])
        .map_err(TimerError::Ipc)?;
    c.expect(
        "unknown-opcode",
        unknown.0.label() == timer::UNKNOWN && unknown.1[0] == 99,
        format_args!("label {:#x}, word 0 {}", unknown.0.label(), unknown.1[0]),
    );
    // Sessions until the provider is full (its slots; `caps = 32` here
    // leaves room to get there).
    let mut more = 0;
    let mut extra = Vec::new();
    let full = loop {
        if more == 20 {
            break None;
        }
        match open::<TimerService>(child::FIRST_FREE + 2 + more) {
            Ok(s) => {
                extra.push(s);
                more += 1
            }
            Err(e) => break Some(e),
        }
    };
    match full {
        Some(e) => println!("test-timer: {more} more sessions opened, then {e}"),
        None => println!("test-timer: {more} more sessions opened, none refused"),
    }
    c.expect(
        "a-full-provider-refuses",
        full == Some(OpenError::Provider(REFUSED_FULL)),
        format_args!("{full:?}"),
    );
    // Closing gives the provider's entry back: a session with a running
    // periodic timeout, closed, loses its notification (the provider
    // revokes it) and the next open succeeds.
    if let Some(last) = extra.pop() {
        let r = last.close();
        c.expect("close", r.is_ok(), format_args!("{:?}", r.err()));
    }
    let (session_slot, notification_slot) = (child::FIRST_FREE + 18, child::FIRST_FREE + 19);
    let closed = match Timer::open(session_slot, notification_slot) {
        Ok(t2) => {
            let set = t2.periodic(MIN_PERIOD_US).is_ok();
            let closed = t2.close().is_ok();
            let polled = syscall::poll(own(notification_slot));
            let gone = polled == Err(Error::EmptySlot);
            if !(set && closed && gone) {
                println!(
                    "test-timer: periodic set {set}, closed {closed}, poll after close {polled:?}"
                );
            }
            set && closed && gone
        }
        Err(_) => false,
    };
    c.expect(
        "a-closed-sessions-notification-is-revoked",
        closed,
        format_args!("see the line above"),
    );
    let reopened = open::<TimerService>(session_slot);
    c.expect(
        "open-after-a-close",
        reopened.is_ok(),
        format_args!("{:?}", reopened.as_ref().err()),
    );
    let reopened = reopened.is_ok();
    println!(
        "test-timer: a closed session's entry serves the next one: {}",
        if closed && reopened { "yes" } else { "NO" }
    );
    // Still serving.
    let before = t.now()?;
    t.sleep(1500)?;
    let after = t.now()?;
    c.expect(
        "serving-after-refusals",
        after >= before + 1500,
        format_args!("slept {} us of 1500", after - before),
    );
    println!("test-timer: bad requests refused, the server still serves");
    Ok(())
}

fn concurrent(t: &Timer, c: &mut Checks, period: u64) -> Result<(), TimerError> {
    let count = SPAN_US / period;
    // Measured from before the timeouts are set: no fire can come early.
    let start = t.now()?;
    let p = t.periodic(period)?;
    let half = t.oneshot(SPAN_US / 2)?;
    let (mut fires, mut half_seen) = (0, false);
    let mut foreign_bits = 0;
    while fires < count {
        let bits = t.wait()?;
        foreign_bits |= bits & !(p.bit() | half.bit());
        if bits & half.bit() != 0 {
            half_seen = true;
            let at = t.now()? - start;
            c.expect(
                "oneshot-on-time",
                (SPAN_US / 2..SPAN_US / 2 + TICK_US + SLACK_US).contains(&at),
                format_args!("at {at} us"),
            );
        }
        if bits & p.bit() != 0 {
            fires += 1;
        }
    }
    let elapsed = t.now()? - start;
    t.cancel(p)?;
    println!(
        "test-timer: period {period} us: {fires} fires in {elapsed} us (from {start} us), one-shot {}",
        if half_seen { "seen" } else { "missing" }
    );
    c.expect(
        "only-its-own-bits",
        foreign_bits == 0,
        format_args!("bits {foreign_bits:#x}"),
    );
    c.expect("oneshot-fired", half_seen, format_args!("never"));
    c.expect(
        "span-matches-the-period",
        (SPAN_US..SPAN_US + TICK_US + SLACK_US).contains(&elapsed),
        format_args!("{elapsed} us"),
    );
    Ok(())
}
