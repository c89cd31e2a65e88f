//! test-rtc: a client of the RTC service (`rt::session::rtc`,
//! `components/services/rtc`); `scenarios/rtc.toml` runs it and
//! `tests/rtc.toml` reads its lines. It prints the date and time the
//! service reads (`test-rtc: now 2026-11-27 06:45:12 UTC`: the test
//! checks the format and that the year is a plausible one for the host's
//! clock), checks that it is a real date, that a second reading is not
//! earlier than the first, and that an unknown opcode is refused while
//! the service goes on serving. Exits with the number of failed checks.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::check::Checks;
use rt::interfaces::child;
use rt::println;
use rt::session::open;
use rt::session::rtc::{self, Rtc};

rt::entry!(main);

/// A label the interface does not have.
const BOGUS: u64 = 0x77;

fn main(_: u64) -> i32 {
    let session = match open::<Rtc>(child::FIRST_FREE) {
        Ok(s) => s,
        Err(e) => {
            println!("test-rtc: no Rtc session: {e}");
            return 1;
        }
    };
    let mut c = Checks::unnumbered();
    let first = session.now();
    match first {
        Ok(t) => println!("test-rtc: now {t} UTC"),
        Err(e) => println!("test-rtc: now: {e}"),
    }
    c.expect(
        "a-date",
        first.is_ok_and(|t| rtc::is_valid(&t)),
        format_args!("{first:?}"),
    );
    let second = session.now();
    c.expect(
        "not-backwards",
        matches!((first, second), (Ok(a), Ok(b)) if b >= a),
        format_args!("first {first:?}, then {second:?}"),
    );
    let bogus = session
        .call(BOGUS, [0; 4])
        .map(|(info, w)| (info.label(), w[0]));
    c.expect(
        "unknown-refused",
        bogus == Ok((rtc::UNKNOWN, BOGUS)),
        format_args!("{bogus:?}"),
    );
    let after = session.now();
    c.expect("still-serving", after.is_ok(), format_args!("{after:?}"));
    c.finish()
}
