//! rtc: the RTC service — a driver for the PC's CMOS real-time clock (the
//! MC146818 at ports 0x70/0x71) and the server of `Rtc` sessions
//! (`rt::session::rtc`) in one component. How the clock is read across
//! its once-a-second update and how a reading is decoded and checked is
//! `ucore::rtc`; this is the port I/O around it.
//!
//! Its scenario gives it the two ports (`io_ports = [{ base = 0x70,
//! count = 2 }]`, `scenarios/rtc.toml`), which init hands over at
//! `interfaces::child::io_ports_slot(0)`; it needs no interrupt (the
//! clock is read when asked, never programmed). At start it reads the
//! clock once and prints it (`rtc: 2026-11-27 06:45:12 UTC`), or why it
//! could not (and serves all the same: every `NOW` reads the chip again,
//! and each failure is an `UNREADABLE` reply and a log line). Ports it
//! cannot use at all — a config without them — end it at once.
//!
//! The clock runs in UTC: QEMU's default (`-rtc base=utc`); under
//! `-icount` xtask starts it at 2020-01-01 on virtual time
//! (`xtask::qemu::ICOUNT_RTC`). Nothing here writes the clock's
//! registers, only the index port: the chip's time and its alarm and
//! interrupt settings are left as the firmware set them.
//!
//! Slots: each session gets two provider slots from [`SESSION_SLOTS`]
//! (`rt::session::Provider`); no session keeps state.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
use rt::abi::{CapSlot, Error};
use rt::interfaces::child;
use rt::println;
use rt::session::fs::Time;
use rt::session::rtc::{self, Rtc};
use rt::session::{Donated, Label, Provider};
use rt::syscall;
use ucore::rtc::{Cmos, ReadError, DATA_PORT, INDEX_PORT};

rt::entry!(main);

const PORTS: CapSlot = own(child::io_ports_slot(0));
/// Sessions served at once.
const MAX_SESSIONS: u32 = 16;
/// The provider's slots: two per session, after the port capability.
const SESSION_SLOTS: (u32, u32) = (
    child::io_ports_slot(1),
    child::io_ports_slot(1) + 2 * MAX_SESSIONS,
);

/// The chip behind the port capability.
struct Chip;

impl Cmos for Chip {
    type Error = Error;

    fn read(&mut self, index: u8) -> Result<u8, Error> {
        // SAFETY: the capability holds the CMOS clock's ports only; a
        // write to the index port selects a register for the next read
        // at the data port and changes nothing the chip keeps. Bit 7 of
        // the index (the NMI mask on many chipsets) is left clear, as
        // the register numbers are.
        unsafe { syscall::io_port_write(PORTS, INDEX_PORT, 1, u32::from(index & 0x7f))? };
        syscall::io_port_read(PORTS, DATA_PORT, 1).map(|v| v as u8)
    }
}

/// The server: a reading of the chip per request.
struct Server;

impl rtc::Server for Server {
    fn now(&mut self) -> Option<Time> {
        match ucore::rtc::read(&mut Chip) {
            Ok(t) => Some(t.into()),
            Err(e) => {
                println!("rtc: reading the clock: {e}");
                None
            }
        }
    }
}

fn main(_: u64) -> i32 {
    match ucore::rtc::read(&mut Chip) {
        Ok(t) => println!("rtc: {t} UTC"),
        Err(ReadError::Port(e)) => {
            println!(
                "rtc: cannot use the clock's ports: {e}; is `io_ports = [{{ base = 0x70, count = 2 }}]` in its config?"
            );
            return 1;
        }
        Err(e) => println!("rtc: reading the clock: {e}; serving anyway (each NOW reads it again)"),
    }
    let provider: Provider<Rtc, ()> = Provider::new(SESSION_SLOTS.0, SESSION_SLOTS.1);
    provider.serve(
        |_: &Label, _no_quota: Option<Donated>| Ok(()),
        |_, _, label, words| rtc::dispatch(&mut Server, label, words),
    )
}
