//! timer: the Timer service — a driver for the PIT (8254) and the server
//! of `Timer` sessions (`rt::session::timer`) in one component.
//!
//! Its scenario gives it the PIT's ports and interrupt (`io_ports = [{
//! base = 0x40, count = 4 }]`, `irqs = [0]`, `scenarios/timer.toml`), which
//! init hands over at `interfaces::child::io_ports_slot(0)` and
//! `interfaces::child::irq_slot(1, 0)` with a notification bound to its thread at
//! `interfaces::child::NOTIFICATION`. ISA IRQ 0 arrives at the GSI the MADT's
//! interrupt source override names (GSI 2 on QEMU); init resolves that
//! (`interfaces::init`), the kernel programs its polarity and trigger mode. The
//! kernel itself uses the PIT only before root starts (channel 2, to
//! calibrate the local-APIC timer, and the `ioapic-pit` self-test):
//! channel 0 is this driver's alone.
//!
//! It programs channel 0 as a rate generator with a fixed period of 1193
//! PIT cycles (1000.15 Hz) and never reprograms it; why, and how the time
//! is computed from the tick count and the latched counter, is
//! `ucore::timer`. One loop serves both: `Recv` on its service endpoint
//! returns the bound notification's bits first (an interrupt: count the
//! tick, `IrqAck`, fire what is due) and otherwise a session request
//! (`Provider::handle` with `rt::session::timer::dispatch`).
//!
//! Slots: each session gets two provider slots from [`SESSION_CAPS`] (its
//! capability and a donation slot, `rt::session::Provider`) and a
//! block of [`PER_SESSION`] slots from [`SESSION_SLOTS`]: its notification
//! (made from the timer's untyped memory when the client asks for it,
//! `NOTIFIER`; timeouts of a session without one fire unseen), the
//! read-only copy sent to the client, and one copy per timeout
//! minted write-only with badge `1 << k`, which the tick signals. With
//! `caps = 128` that is [`MAX_SESSIONS`] sessions; a further one is
//! refused by the provider.
//!
//! `arg` (the integer `arg` of its config): 0 serves for ever; N > 0 exits
//! after N ticks — for tests of what happens to init's back-off waits when
//! the Timer provider stops (`scenarios/init-restart-timer-gone.toml`).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec::Vec;
use core::cell::RefCell;

use rt::abi::caddr::own;
use rt::abi::{CapSlot, ObjectType, Rights, LABEL_NOTIFICATION};
use rt::interfaces::child;
use rt::println;
use rt::session::timer::{self as timer, TimerService};
use rt::session::{Donated, Label, Provider, REFUSED_FULL};
use rt::syscall;
use ucore::timer::{Clock, TimeoutError, Timeouts, TscRate, MAX_TIMEOUTS, PIT_HZ, TICK_CYCLES};

rt::entry!(main);

const PORTS: CapSlot = own(child::io_ports_slot(0));
const IRQ: CapSlot = own(child::irq_slot(1, 0));
const IRQ_NOTIFICATION: CapSlot = own(child::NOTIFICATION);
const PIT_CHANNEL0: u16 = 0x40;
const PIT_COMMAND: u16 = 0x43;
/// Channel 0, low then high byte, mode 2 (rate generator), binary.
const MODE_RATE: u32 = 0x34;
/// Channel 0, latch the counter.
const LATCH: u32 = 0x00;

/// The provider's session capabilities.
const SESSION_CAPS: u32 = 16;
/// Sessions served at once.
const MAX_SESSIONS: u32 = 8;
/// Each session's own slots (after the provider's two per session).
const SESSION_SLOTS: u32 = SESSION_CAPS + 2 * MAX_SESSIONS;
const PER_SESSION: u32 = 2 + MAX_TIMEOUTS as u32;
const _: () = assert!(SESSION_SLOTS + MAX_SESSIONS * PER_SESSION <= 128);

/// One session's state, kept for the next session when it closes.
struct Session {
    /// Its first slot ([`PER_SESSION`] of them), once its notification
    /// exists.
    slots: Option<u32>,
    /// Whether the client's and the timeouts' copies of the notification
    /// exist (revoked when the session closes, made again on first use).
    minted: bool,
    /// Whether a client has it.
    open: bool,
    timeouts: Timeouts,
}

/// A session as the provider keeps it: its entry in the driver. Dropped
/// when the session closes: its timeouts end and every copy of its
/// notification goes (the client's too), so the entry can serve the next
/// session without a stale client signalled by it.
struct Open<'d> {
    driver: &'d RefCell<Driver>,
    index: usize,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let mut d = self.driver.borrow_mut();
        if let Some(s) = d.sessions.get_mut(self.index) {
            s.open = false;
            s.timeouts = Timeouts::default();
            if let (Some(first), true) = (s.slots, s.minted) {
                // SAFETY: a notification capability; nothing is mapped
                // through it. Revoking deletes the copies derived from it.
                let _ = unsafe { syscall::cap_revoke(own(first)) };
                s.minted = false;
            }
        }
        d.update_due();
    }
}

/// The driver: the clock, the sessions, the next deadline.
struct Driver {
    clock: Clock,
    /// The TSC's rate against the clock (`CLOCK`), from its start.
    tsc: TscRate,
    sessions: Vec<Session>,
    /// The earliest deadline of all sessions, PIT cycles (`u64::MAX`: none).
    next_due: u64,
}

fn main(arg: u64) -> i32 {
    if let Err(e) = syscall::irq_bind(IRQ, IRQ_NOTIFICATION) {
        println!("timer: cannot bind the PIT's interrupt (ISA IRQ 0): {e}; is `irqs = [0]` in its config?");
        return 1;
    }
    // SAFETY: the ports are the PIT's (the capability holds 0x40..=0x43
    // only); channel 0 drives ISA IRQ 0 and nothing else uses it.
    let started = unsafe {
        syscall::io_port_write(PORTS, PIT_COMMAND, 1, MODE_RATE)
            .and_then(|()| {
                syscall::io_port_write(PORTS, PIT_CHANNEL0, 1, TICK_CYCLES as u32 & 0xff)
            })
            .and_then(|()| syscall::io_port_write(PORTS, PIT_CHANNEL0, 1, TICK_CYCLES as u32 >> 8))
    };
    if let Err(e) = started {
        println!("timer: cannot program the PIT: {e}; is `io_ports = [{{ base = 0x40, count = 4 }}]` in its config?");
        return 1;
    }
    // Init narrowed the capability to the config's range: the ports next
    // to it are refused (the scenario test checks this line).
    let outside = [0x3f, 0x44].map(|port| syscall::io_port_read(PORTS, port, 1).is_err());
    if outside == [true, true] {
        println!("timer: its I/O ports are 0x40..=0x43 only (0x3f and 0x44 refused)");
    } else {
        println!("timer: its I/O-port capability reaches beyond 0x40..=0x43");
    }
    println!(
        "timer: PIT channel 0 at {} mHz (every {TICK_CYCLES} cycles of {PIT_HZ} Hz), ISA IRQ 0; serving Timer",
        PIT_HZ * 1_000_000 / TICK_CYCLES / 1000
    );

    let driver = RefCell::new(Driver {
        clock: Clock::default(),
        tsc: TscRate::default(),
        sessions: Vec::new(),
        next_due: u64::MAX,
    });
    // Two provider slots per session.
    let mut provider: Provider<TimerService, Open<'_>> =
        Provider::new(SESSION_CAPS, SESSION_CAPS + 2 * MAX_SESSIONS);
    let mut new = |_: &Label, _no_quota: Option<Donated>| {
        let mut d = driver.borrow_mut();
        let index = match d.sessions.iter().position(|s| !s.open) {
            Some(free) => free,
            None if d.sessions.len() < MAX_SESSIONS as usize => {
                d.sessions.push(Session {
                    slots: None,
                    minted: false,
                    open: false,
                    timeouts: Timeouts::default(),
                });
                d.sessions.len() - 1
            }
            None => return Err(REFUSED_FULL),
        };
        d.sessions[index].open = true;
        Ok(Open {
            driver: &driver,
            index,
        })
    };
    let mut dispatch = |_: &Label, session: &mut Open<'_>, label, words| {
        let mut d = driver.borrow_mut();
        let mut server = Server {
            driver: &mut d,
            session: session.index,
        };
        timer::dispatch(&mut server, &mut (), label, words)
    };
    if arg != 0 {
        println!("timer: stopping after {arg} ticks (arg, for tests of a provider's restart)");
    }
    // The TSC's rate is measured from here (`CLOCK`).
    {
        let mut d = driver.borrow_mut();
        let (tsc, cycles) = d.now_tsc();
        d.tsc.hz(tsc, cycles);
    }
    let mut reply = None;
    loop {
        let received = provider.next(reply.take());
        if let Ok((_, info, _)) = received {
            if info.label() == LABEL_NOTIFICATION {
                let mut d = driver.borrow_mut();
                d.tick();
                if d.clock.ticks == arg {
                    println!("timer: stopping after {arg} ticks");
                    return 0;
                }
                continue;
            }
        }
        reply = provider.handle(received, &mut new, &mut dispatch);
    }
}

impl Driver {
    /// One interrupt: count it, let the line interrupt again, fire what is
    /// due.
    fn tick(&mut self) {
        self.clock.ticks += 1;
        if let Err(e) = syscall::irq_ack(IRQ) {
            println!("timer: IrqAck failed: {e}");
        }
        let now = self.clock.tick_cycles();
        if now < self.next_due {
            return;
        }
        for s in &mut self.sessions {
            let bits = s.timeouts.expire(now);
            let (Some(first), true) = (s.slots, s.minted) else {
                continue;
            };
            for k in 0..MAX_TIMEOUTS as u32 {
                if bits & 1 << k != 0 {
                    let _ = syscall::signal(own(first + 2 + k));
                }
            }
        }
        self.update_due();
    }

    fn update_due(&mut self) {
        self.next_due = self
            .sessions
            .iter()
            .filter_map(|s| s.timeouts.earliest())
            .min()
            .unwrap_or(u64::MAX);
    }

    /// PIT cycles since the start: the tick count plus the latched counter.
    /// A reload before the latch has raised its interrupt by the time the
    /// counter is read (the line is unmasked between ticks), so an
    /// interrupt pending after the read is handled and the counter read
    /// again: the reload is never counted without its tick.
    fn now_cycles(&mut self) -> u64 {
        let mut counter = read_counter();
        if syscall::poll(IRQ_NOTIFICATION).is_ok_and(|bits| bits != 0) {
            self.tick();
            counter = read_counter();
        }
        self.clock.cycles(counter)
    }

    /// The TSC and the clock's cycles read together: the middle of the
    /// TSC readings around the counter's. Of three tries the tightest pair
    /// is kept, so an interrupt or a preemption between the readings
    /// rarely puts its length into the rate.
    fn now_tsc(&mut self) -> (u64, u64) {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..3 {
            let before = syscall::rdtsc();
            let cycles = self.now_cycles();
            let after = syscall::rdtsc();
            let spread = after.wrapping_sub(before);
            if spread < best.0 {
                best = (spread, before / 2 + after / 2, cycles);
            }
        }
        (best.1, best.2)
    }

    /// Session `i`'s slots, its notification made on first use.
    fn slots(&mut self, i: usize) -> Option<u32> {
        let s = self.sessions.get_mut(i)?;
        if s.slots.is_none() {
            let first = SESSION_SLOTS + u32::try_from(i).ok()? * PER_SESSION;
            if i >= MAX_SESSIONS as usize {
                return None;
            }
            syscall::retype(
                own(child::UNTYPED),
                ObjectType::Notification,
                0,
                own(first),
                1,
            )
            .ok()?;
            s.slots = Some(first);
        }
        let first = s.slots?;
        if !s.minted {
            // Word left from a closed session: cleared.
            let _ = syscall::poll(own(first));
            syscall::cap_mint(own(first), own(first + 1), Rights::READ, 0).ok()?;
            for k in 0..MAX_TIMEOUTS as u32 {
                syscall::cap_mint(own(first), own(first + 2 + k), Rights::WRITE, 1 << k).ok()?;
            }
            s.minted = true;
        }
        s.slots
    }
}

/// Channel 0's counter, latched (1..=TICK_CYCLES).
fn read_counter() -> u16 {
    // SAFETY: latching channel 0's counter changes nothing it counts.
    let latched = unsafe { syscall::io_port_write(PORTS, PIT_COMMAND, 1, LATCH) };
    let low = syscall::io_port_read(PORTS, PIT_CHANNEL0, 1);
    let high = syscall::io_port_read(PORTS, PIT_CHANNEL0, 1);
    match (latched, low, high) {
        (Ok(()), Ok(low), Ok(high)) => (high << 8 | low) as u16,
        // Cannot happen with the PIT's ports; time at the last tick.
        _ => TICK_CYCLES as u16,
    }
}

/// The Timer server for one request of session `session`.
struct Server<'d> {
    driver: &'d mut Driver,
    session: usize,
}

impl timer::Server<()> for Server<'_> {
    fn now_us(&mut self) -> u64 {
        ucore::timer::cycles_to_us(self.driver.now_cycles())
    }

    fn clock(&mut self) -> (u64, u64) {
        let (tsc, cycles) = self.driver.now_tsc();
        let hz = self.driver.tsc.hz(tsc, cycles);
        (ucore::timer::cycles_to_us(cycles), hz)
    }

    fn notifier(&mut self, _: &mut ()) -> Option<CapSlot> {
        self.driver.slots(self.session).map(|first| own(first + 1))
    }

    fn set(&mut self, _: &mut (), us: u64, periodic: bool) -> Result<usize, TimeoutError> {
        let now = self.driver.now_cycles();
        let s = self
            .driver
            .sessions
            .get_mut(self.session)
            .ok_or(TimeoutError::NotSet)?;
        let k = s.timeouts.set(now, us, periodic)?;
        self.driver.update_due();
        Ok(k)
    }

    fn cancel(&mut self, _: &mut (), k: u64) -> Result<(), TimeoutError> {
        let s = self
            .driver
            .sessions
            .get_mut(self.session)
            .ok_or(TimeoutError::NotSet)?;
        s.timeouts.cancel(k)?;
        self.driver.update_due();
        Ok(())
    }
}
