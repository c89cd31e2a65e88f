//! test-term: writes [`LINES`] to its Log session, which
//! `scenarios/terminal.toml` routes to the terminal, then prints
//! `test-term: N lines written` — each `WRITE` is answered once the line
//! is on the screen, so the screen is complete then, and
//! `tests/terminal.toml` takes a screenshot and checks, row by row of
//! 16 pixels, the colours of [`LINES`] as its module doc lists them. It
//! stays until the power button (the screen must stay drawn for the
//! screenshot), and says so in a second line, after which the test
//! presses it.
//!
//! With `arg = 1` ([`SCROLL`], `scenarios/terminal-scroll.toml`) it writes
//! [`SCROLL_LINES`] lines instead, `line N` in colour 31 + N mod 6 (red
//! to cyan), so that the screen scrolls by more than its height; the host
//! checks that each row shows the line it should in its colour.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use rt::abi::caddr::own;
use rt::abi::ObjectType;
use rt::interfaces::child;
use rt::println;
use rt::session::{self, log::Log};
use rt::syscall;

rt::entry!(main);

/// The Log session.
const LOG_SLOT: u32 = child::FIRST_FREE;
/// A notification nobody signals: where it stays.
const STAY: u32 = LOG_SLOT + 1;

/// The lines, one screen row each but the fourth (two rows). The host
/// check depends on their order and colours.
const LINES: [&str; 6] = [
    // Row 0: red, never reset (the terminal resets it at the line's end).
    "\x1b[31mred text: the colour ends with the line",
    // Row 1: the default colour.
    "plain text in the default colour",
    // Row 2: bold green is bright green.
    "\x1b[1;32mbright green\x1b[0m",
    // Rows 3 and 4: longer than a row of 146 columns, wraps.
    "a long line: 0123456789 0123456789 0123456789 0123456789 0123456789 \
     0123456789 0123456789 0123456789 0123456789 0123456789 0123456789 0123456789 end",
    // Row 5: hostile: erase the screen, move the cursor, CR and BS over
    // the label, 20 parameters, an extended colour, a private mode, an
    // OSC title, a DCS string, then an OSC never terminated. The SGR of
    // 21 parameters keeps 16: bold (1) stays, the closing 22 is dropped,
    // so `junk ?` (DEL dropped, `é` outside the font) is bright white.
    "\x1b[2J\x1b[H\x1b[99999;99999H\r\x08\x08\x1b[38;2;1;2;3m\x1b[?1049h\x1b]0;title\x07\
     \x1bPdcs\x1b\\\x1b[1;2;3;4;5;6;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22mjunk \u{7f}\u{e9}\
     \x1b]2;an OSC that never ends",
    // Row 6: the default colour again.
    "after the junk: the default colour",
];

/// `arg` of the scrolling test.
const SCROLL: u64 = 1;
/// How many lines it writes: more than two screens of 48 rows.
const SCROLL_LINES: u32 = 100;

fn main(arg: u64) -> i32 {
    let log = match session::open::<Log>(LOG_SLOT) {
        Ok(log) => log,
        Err(e) => {
            println!("test-term: FAILED: Log session: {e}");
            return 1;
        }
    };
    let start = syscall::rdtsc();
    let written = if arg == SCROLL {
        (0..SCROLL_LINES)
            .try_for_each(|n| log.write_line(&alloc::format!("\x1b[{}mline {n}", 31 + n % 6)))
    } else {
        LINES.iter().try_for_each(|line| log.write_line(line))
    };
    if let Err(e) = written {
        println!("test-term: FAILED: writing a line: {e}");
        return 1;
    }
    let lines = if arg == SCROLL {
        SCROLL_LINES as usize
    } else {
        LINES.len()
    };
    println!(
        "test-term: {lines} lines written ({} M TSC ticks)",
        (syscall::rdtsc() - start) / 1_000_000
    );
    println!("test-term: staying until the power button");
    // Stays, its lines on the screen, until init stops it.
    let stay = own(STAY);
    if syscall::retype(own(child::UNTYPED), ObjectType::Notification, 0, stay, 1).is_ok() {
        loop {
            let _ = syscall::wait(stay);
        }
    }
    0
}
