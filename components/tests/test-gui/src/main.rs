//! test-gui: a client of the GUI multiplexer (`tests/gui.toml`). It
//! reads its `name` and `colour` (`0xRRGGBB`) from its config ROM, opens
//! a Framebuffer and an Input session (both routed to `gui`), checks that
//! its mode is its view's content area and that another mode is refused,
//! fills its buffer with its colour — and,
//! beyond its view's size, nothing: it cannot reach more — then asks for
//! a refresh far larger than its view and one off it (both clipped by the
//! multiplexer, so nothing outside its view changes), and prints `NAME:
//! drawn WxH`. Then it prints `NAME: key 'C'` for each character it gets
//! until the system is powered off, each after a refresh of its whole
//! view (so a test can check that the multiplexer's cursor stays on top
//! of a client's refresh beneath it), and `NAME: pointer moved` once for
//! each batch of events with motion in it: a test waits for it before it
//! clicks, so the click does not depend on how fast the driver drains
//! QEMU's PS/2 queue (QEMU sends a mouse packet only when the 16-byte
//! queue has room for it, and one held back goes out with the next
//! mouse event — after a long motion, a click might wait for ever).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::check::Findings;
use rt::interfaces::child;
use rt::println;
use rt::session;
use rt::session::framebuffer::{FbError, Framebuffer, REFUSED};
use rt::session::input::{Event, Input};
use rt::syscall;

rt::entry!(main);

const FB_SLOT: u32 = child::FIRST_FREE;
const INPUT_SLOT: u32 = FB_SLOT + 3;
const NOTIFY_SLOT: u32 = INPUT_SLOT + 1;
/// The Input session's donor block and table.
const INPUT_BLOCK: u32 = NOTIFY_SLOT + 1;
const INPUT_TABLE: u32 = INPUT_BLOCK + 1;
const ROM_SLOT: u32 = INPUT_TABLE + 1;
const FIRST_FRAME: u32 = ROM_SLOT + 1;
const END_FRAME: u32 = FIRST_FRAME + 4;
const CONFIG_VA: u64 = 0x30_0000_0000;

fn main(_: u64) -> i32 {
    // SAFETY: CONFIG_VA.. is used by nothing else of this program.
    let config =
        match unsafe { rt::session::rom::config(ROM_SLOT, FIRST_FRAME, END_FRAME, CONFIG_VA) } {
            Ok(c) => c,
            Err(e) => {
                println!("test-gui: FAILED: config ROM: {e}");
                return 1;
            }
        };
    let name = config
        .get("name")
        .and_then(|v| v.as_str())
        .unwrap_or("test-gui");
    let colour = config
        .get("colour")
        .and_then(|v| v.as_integer())
        .unwrap_or(0x80_80_80) as u32
        & 0xff_ff_ff;
    let fb = match session::open_from_quota::<Framebuffer>(FB_SLOT, FB_SLOT + 1, FB_SLOT + 2) {
        Ok(s) => s,
        Err(e) => {
            println!("{name}: FAILED: Framebuffer session: {e}");
            return 1;
        }
    };
    let input = match session::open_from_quota::<Input>(INPUT_SLOT, INPUT_BLOCK, INPUT_TABLE) {
        Ok(s) => s,
        Err(e) => {
            println!("{name}: FAILED: Input session: {e}");
            return 1;
        }
    };
    let mut found = Findings::new();
    let (mode, buffer) = match fb.mode().and_then(|m| fb.buffer().map(|b| (m, b))) {
        Ok(x) => x,
        Err(e) => {
            println!("{name}: FAILED: MODE/BUFFER: {e}");
            return 1;
        }
    };
    found.expect(
        fb.set_mode(mode.width + 8, mode.height) == Err(FbError::Refused(REFUSED)),
        format_args!("another mode than its view's: refused"),
    );
    let bytes = mode.bytes() as usize;
    // Its whole buffer, and an attempt past it (the window ends there).
    let inside = buffer.fill32(0, bytes, colour).is_some();
    let past = buffer
        .fill32(bytes, buffer.len() - bytes + 4, colour)
        .is_none();
    found.expect(
        inside && past,
        format_args!("its buffer holds its view and no more"),
    );
    let big = fb.refresh(0, 0, u32::MAX, u32::MAX);
    let off = fb.refresh(mode.width, 0, 100, 100);
    found.expect(
        big.is_ok() && off.is_ok(),
        format_args!("a refresh larger than its view and one off it: answered (clipped)"),
    );
    println!("{name}: drawn {}x{}", mode.width, mode.height);
    if found.finish() != 0 {
        return 1;
    }
    let notify = match input.notifier(NOTIFY_SLOT) {
        Ok(n) => n,
        Err(e) => {
            println!("{name}: FAILED: NOTIFIER: {e}");
            return 1;
        }
    };
    loop {
        if syscall::wait(notify).is_err() {
            return 1;
        }
        let mut moved = false;
        for e in input.events().unwrap_or_default() {
            match e {
                Event::Press { ch: Some(c), .. } => {
                    if let Err(e) = fb.refresh(0, 0, mode.width, mode.height) {
                        println!("{name}: FAILED: refresh: {e}");
                    }
                    println!("{name}: key {c:?}");
                }
                Event::Motion { .. } => moved = true,
                _ => {}
            }
        }
        if moved {
            println!("{name}: pointer moved");
        }
    }
}
