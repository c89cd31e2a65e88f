//! test-input: checks the Input session (`rt::session::input`,
//! `tests/input.toml`) against the PS/2 driver. It takes the session's
//! notification, prints `test-input: waiting for input` and then one line
//! per event as it comes — `test-input: press CODE 'C'` (or without the
//! character), `test-input: release CODE`, `test-input: motion DX,DY`,
//! `test-input: button N down|up` — while the host types and moves the
//! mouse through QEMU's monitor (each step after the line of the one
//! before). When `q` is released it checks that the characters typed were
//! `aB!q` and that the pointer moved right and down and the left button
//! went down and up, prints `test-input: N checks failed` and exits.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::string::String;

use rt::check::Findings;
use rt::interfaces::child;
use rt::println;
use rt::session::input::{Event, Input, BUTTON_LEFT};
use rt::session::{self};
use rt::syscall;

rt::entry!(main);

const INPUT_SLOT: u32 = child::FIRST_FREE;
const NOTIFY_SLOT: u32 = INPUT_SLOT + 1;
/// The session's donor block and table.
const INPUT_BLOCK: u32 = NOTIFY_SLOT + 1;
const INPUT_TABLE: u32 = INPUT_BLOCK + 1;
/// `KEY_Q`.
const KEY_Q: u16 = 16;

fn main(_: u64) -> i32 {
    let input = match session::open_from_quota::<Input>(INPUT_SLOT, INPUT_BLOCK, INPUT_TABLE) {
        Ok(s) => s,
        Err(e) => {
            println!("test-input: FAILED: Input session: {e}");
            return 1;
        }
    };
    let notify = match input.notifier(NOTIFY_SLOT) {
        Ok(n) => n,
        Err(e) => {
            println!("test-input: FAILED: NOTIFIER: {e}");
            return 1;
        }
    };
    println!("test-input: waiting for input");
    let mut typed = String::new();
    let (mut right, mut down) = (0i32, 0i32);
    let (mut pressed, mut released) = (false, false);
    'events: loop {
        if let Err(e) = syscall::wait(notify) {
            println!("test-input: FAILED: waiting: {e}");
            return 1;
        }
        let events = match input.events() {
            Ok(e) => e,
            Err(e) => {
                println!("test-input: FAILED: EVENTS: {e}");
                return 1;
            }
        };
        for e in events {
            match e {
                Event::Press { code, ch: Some(c) } => {
                    typed.push(c);
                    println!("test-input: press {code} {c:?}");
                }
                Event::Press { code, ch: None } => println!("test-input: press {code}"),
                Event::Release { code } => {
                    println!("test-input: release {code}");
                    if code == KEY_Q {
                        break 'events;
                    }
                }
                Event::Motion { dx, dy } => {
                    right += i32::from(dx);
                    down += i32::from(dy);
                    println!("test-input: motion {dx},{dy}");
                }
                Event::Button { button, pressed: p } => {
                    println!(
                        "test-input: button {button} {}",
                        if p { "down" } else { "up" }
                    );
                    if button == BUTTON_LEFT {
                        pressed |= p;
                        released |= pressed && !p;
                    }
                }
                Event::Absolute { x, y } => println!("test-input: at {x},{y}"),
            }
        }
    }
    let mut found = Findings::new();
    found.expect(
        typed == "aB!q",
        format_args!("typed {typed:?}, sent \"aB!q\""),
    );
    found.expect(
        right > 0 && down > 0,
        format_args!("the pointer moved right and down ({right},{down})"),
    );
    found.expect(
        pressed && released,
        format_args!("the left button went down and up"),
    );
    found.finish()
}
