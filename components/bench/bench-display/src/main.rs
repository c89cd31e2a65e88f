//! bench-display: the Pecan side of the lab's display rows (issue 18,
//! "Performance"; docs/display.md, "Cost"). There is no Linux
//! counterpart: the rows stand alone. What it measures depends on `arg`:
//!
//! - **0** (`scenarios/display-bench.toml`, its `Framebuffer` route a
//!   full-screen view of the GUI multiplexer): `gui-refresh-full`, the
//!   instructions of one full-screen frame — a `REFRESH` of its whole
//!   view (1024×752, the screen less the title bar), during which the
//!   multiplexer draws the title bar and copies the client's rows into
//!   its screen buffer and refreshes that at the driver, which copies the
//!   whole screen into the device's framebuffer — from the call to its
//!   reply.
//! - **1** (`scenarios/fb-bench.toml`, the route straight to the driver):
//!   `fb-refresh-full`, a full-screen `REFRESH` (1024×768) at the driver
//!   alone: the multiplexer's share is the difference.
//! - **2** (`scenarios/term-bench.toml`, its `Log` route a terminal
//!   straight on the display driver: the lab's 256 MiB machine holds no
//!   multiplexer beside it): `term-line`, a Log line of 100 non-blank
//!   characters written to the terminal — its label `[bench] ` with it,
//!   108 characters drawn: four `WRITE` calls, the parse, the glyphs
//!   drawn and the line's rectangle refreshed at the driver — per
//!   character drawn. 40 lines, after 5
//!   unrecorded, so that none scrolls (a scroll moves the whole buffer).
//! - **3** (`scenarios/glyph-bench.toml`, no sessions): `term-glyph`,
//!   the terminal's rendering per character: `term::Renderer` (the
//!   terminal's code and font) drawing a full grid of 146×48 non-blank
//!   characters into a 1024×768 surface in memory, a whole-grid render
//!   divided by its cells.
//!
//! Under `-icount` (`cargo xtask bench NAME --pecan-only`) a tick is an
//! instruction; `rep movs` counts once per iteration there and TCG
//! ignores cache attributes (the device's framebuffer is mapped
//! write-combining, which costs nothing here), so the figures are path
//! lengths, not hardware times. Prints one `BENCH` line per row and exits.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::string::String;
use alloc::vec;

use rt::interfaces::child;
use rt::println;
use rt::session;
use rt::session::framebuffer::Framebuffer;
use rt::session::log::Log;
use term::{Palette, PixelBuffer, Renderer, Terminal};

rt::entry!(main);

/// The Framebuffer session, its donor block and table.
const FB_SLOT: u32 = child::FIRST_FREE;
/// The Log session.
const LOG_SLOT: u32 = FB_SLOT + 3;
/// The heap's two extra 2 MiB frames (the 3 MiB surface of `term-glyph`).
const HEAP_SLOT: u32 = LOG_SLOT + 1;

/// Recorded frames (after `bench::WARM_UP` unrecorded ones).
const FRAMES: usize = 100;
/// Recorded whole-grid renders.
const RENDERS: usize = 50;
/// The Log rows: lines recorded, unrecorded first, characters a line.
const LINES: usize = 40;
const LINES_WARM_UP: usize = 5;
const LINE_CHARS: usize = 100;
/// The label the terminal draws before each line (`[NAME] `, the
/// component's name in its scenario).
const LABEL: &str = "[bench] ";

fn main(arg: u64) -> i32 {
    let done = match arg {
        0 => refresh("gui-refresh-full"),
        1 => refresh("fb-refresh-full"),
        2 => line(),
        3 => rt::heap::grow(HEAP_SLOT, 2)
            .map_err(|e| alloc::format!("growing the heap: {e}"))
            .and_then(|()| glyphs()),
        _ => Err(String::from("arg: 0 to 3")),
    };
    match done {
        Ok(()) => 0,
        Err(e) => {
            println!("bench-display: FAILED: {e}");
            1
        }
    }
}

/// Prints a `BENCH` line of tick samples.
fn report(name: &str, what: &str, samples: &[u64]) -> Result<(), String> {
    let mut line = String::new();
    let mut scratch = vec![0u64; samples.len()];
    bench::report(
        &mut line,
        name,
        what,
        bench::Unit::Ticks,
        samples,
        &mut scratch,
    )
    .map_err(|_| String::from("formatting the report"))?;
    rt::print!("{line}");
    Ok(())
}

/// Full-screen frames through the `Framebuffer` route, reported as
/// `name`.
fn refresh(name: &str) -> Result<(), String> {
    use alloc::format;
    let fb = session::open_from_quota::<Framebuffer>(FB_SLOT, FB_SLOT + 1, FB_SLOT + 2)
        .map_err(|e| format!("Framebuffer session: {e}"))?;
    let mode = fb.mode().map_err(|e| format!("MODE: {e}"))?;
    let buffer = fb.buffer().map_err(|e| format!("BUFFER: {e}"))?;
    // Something to show: bands of colour.
    for y in 0..mode.height {
        let colour = 0x40_40_40 + (y / 64) * 0x08_04_02;
        buffer.fill32(
            y as usize * mode.stride as usize,
            mode.width as usize * 4,
            colour,
        );
    }
    let overhead = bench::timestamp_overhead();
    let mut samples = [0u64; FRAMES];
    let mut failed = 0u32;
    bench::measure(&mut samples, overhead, || {
        failed += fb.refresh(0, 0, mode.width, mode.height).is_err() as u32;
    });
    if failed > 0 {
        return Err(format!("{failed} refreshes failed"));
    }
    let what = format!(
        "a full-screen frame: REFRESH of the client's whole {}x{} buffer, call to reply (instructions per frame)",
        mode.width, mode.height
    );
    report(name, &what, &samples)
}

/// The terminal's glyph rendering alone, per character.
fn glyphs() -> Result<(), String> {
    let mut renderer = Renderer::new(Palette::VGA, 1);
    let (cols, rows) = renderer.grid_size(1024, 768);
    let mut term = Terminal::new(cols, rows, 0);
    let cells = cols * rows;
    // Every cell a printable, non-blank character ('!' to '~'), no
    // scroll: exactly the grid's cells, the last one left pending.
    let text: alloc::vec::Vec<u8> = (0..cells).map(|i| b'!' + (i % 94) as u8).collect();
    term.feed(&text);
    let mut surface = PixelBuffer::new(1024, 768, 0);
    let overhead = bench::timestamp_overhead();
    let mut samples = [0u64; RENDERS];
    let mut drawn = true;
    bench::measure(&mut samples, overhead, || {
        term.damage_all();
        drawn &= renderer.render(&mut term, &mut surface).is_some();
    });
    if !drawn {
        return Err(String::from("a render drew nothing"));
    }
    for s in &mut samples {
        *s /= cells as u64;
    }
    let what = alloc::format!(
        "terminal glyph rendering: term::Renderer drawing a full grid of {cols}x{rows} non-blank characters (Noto Sans Mono 7x16) into a 1024x768 surface in memory, per character"
    );
    report("term-glyph", &what, &samples)
}

/// Log lines through the terminal, per character drawn.
fn line() -> Result<(), String> {
    use alloc::format;
    let log = session::open::<Log>(LOG_SLOT).map_err(|e| format!("Log session: {e}"))?;
    let text: String = (0..LINE_CHARS)
        .map(|i| char::from(b'A' + (i % 26) as u8))
        .collect();
    let chars = (LINE_CHARS + LABEL.len()) as u64;
    let overhead = bench::timestamp_overhead();
    let mut samples = [0u64; LINES];
    for i in 0..LINES_WARM_UP + LINES {
        let t0 = bench::now();
        log.write_line(&text)
            .map_err(|e| format!("writing a line: {e}"))?;
        let t1 = bench::now();
        if let Some(s) = i
            .checked_sub(LINES_WARM_UP)
            .and_then(|i| samples.get_mut(i))
        {
            *s = t1.wrapping_sub(t0).saturating_sub(overhead) / chars;
        }
    }
    let what = format!(
        "a Log line of {LINE_CHARS} non-blank characters to the terminal (with its label, {chars} drawn): the WRITE calls, parsed, drawn and refreshed at the display driver, per character"
    );
    report("term-line", &what, &samples)
}
