//! test-fb: checks the Framebuffer session (`rt::session::framebuffer`,
//! `tests/framebuffer.toml`, `tests/framebuffer-hd.toml`) against the
//! display driver. It draws in the mode `arg` names (`width | height <<
//! 16`; 0: 1024×768), opening the session with the donation that mode
//! needs (the least one for 1024×768, 16 MiB for 1920×1080). It asks for
//! the mode (the driver's default, 1024×768×32), checks that `REFRESH`
//! before the buffer is answered `NO_BUFFER` and that a mode out of range
//! is refused, and so is the least mode one frame beyond the donation
//! (2048 wide, a row more than its frames hold: 1920×1080 does not fit
//! the least donation, 2048×1793 not 16 MiB), that the session's
//! notification is signalled for each mode the driver sets (1280×1024,
//! then its mode) and for nothing else, takes its buffer (several 2 MiB
//! frames: a dataspace larger than one frame), draws four quadrants —
//! red, green, blue, white, a black 8-pixel cross between them — and
//! refreshes the screen in two halves, the second with a rectangle far
//! larger than the screen (clipped). Then it checks that a mode change is
//! refused once the buffer exists and prints `test-fb: drawn WxH: four
//! quadrants`; the host takes a screenshot and checks the quadrants'
//! pixels. It stays until the power button (the screen must stay drawn
//! for the screenshot), after `test-fb: N checks failed`.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
use rt::abi::ObjectType;
use rt::check::Findings;
use rt::interfaces::child;
use rt::println;
use rt::session;
use rt::session::framebuffer::{
    self as fb, FbError, Framebuffer, Mode, DONATION, FRAME_BYTES, NO_BUFFER, REFUSED,
};
use rt::syscall;

rt::entry!(main);

/// The session, its donor block and table.
const FB_SLOT: u32 = child::FIRST_FREE;
/// A notification nobody signals: where it stays.
const STAY: u32 = FB_SLOT + 3;

/// The quadrants' colours, `0x00RRGGBB`.
const COLOURS: [u32; 4] = [0xff_00_00, 0x00_ff_00, 0x00_00_ff, 0xff_ff_ff];
/// Half the width of the black cross between them.
const GAP: u32 = 4;

fn main(arg: u64) -> i32 {
    let (w, h) = match arg {
        0 => (1024, 768),
        a => ((a & 0xffff) as u32, ((a >> 16) & 0xffff) as u32),
    };
    let Some((target, donation)) = Mode::new(w, h).and_then(|m| Some((m, fb::donation_for(&m)?)))
    else {
        println!("test-fb: FAILED: {w}x{h}: no such mode (arg)");
        return 1;
    };
    let opened = match donation {
        DONATION => session::open_from_quota::<Framebuffer>(FB_SLOT, FB_SLOT + 1, FB_SLOT + 2),
        _ => fb::open_for(FB_SLOT, FB_SLOT + 1, FB_SLOT + 2, w, h),
    };
    let fb = match opened {
        Ok(s) => s,
        Err(e) => {
            println!("test-fb: FAILED: Framebuffer session: {e}");
            return 1;
        }
    };
    let mut found = Findings::new();
    let mode = match fb.mode() {
        Ok(m) => m,
        Err(e) => {
            println!("test-fb: FAILED: MODE: {e}");
            return 1;
        }
    };
    println!(
        "test-fb: mode {}x{}, stride {}",
        mode.width, mode.height, mode.stride
    );
    found.expect(
        (mode.width, mode.height, mode.stride) == (1024, 768, 4096),
        format_args!("the default mode: 1024x768, 4096 bytes a row"),
    );
    found.expect(
        fb.refresh(0, 0, 1, 1) == Err(FbError::Refused(NO_BUFFER)),
        format_args!("REFRESH before the buffer: NO_BUFFER"),
    );
    found.expect(
        fb.set_mode(10, 10) == Err(FbError::Refused(REFUSED))
            && fb.set_mode(4000, 4000) == Err(FbError::Refused(REFUSED)),
        format_args!("modes out of range or too large for the donation: refused"),
    );
    // The mode-change signal: nothing for refusals, a signal for each
    // mode the driver set (then the one it draws the quadrants in).
    let signalled = || {
        fb.notification()
            .and_then(|n| syscall::poll(n).ok())
            .unwrap_or(0)
    };
    found.expect(
        fb.notification().is_some() && signalled() == 0,
        format_args!("the session's notification, not signalled by refusals"),
    );
    // 2048 pixels a row: a 2 MiB frame is 256 rows.
    let beyond = 256 * fb::frames_in(donation) + 1;
    found.expect(
        fb.set_mode(2048, beyond) == Err(FbError::Refused(REFUSED)) && signalled() == 0,
        format_args!(
            "2048x{beyond}: a frame more than the {} MiB donation holds, refused",
            donation >> 20
        ),
    );
    let larger = fb.set_mode(1280, 1024).map(|m| (m.width, m.height));
    let changed = signalled();
    let back = fb.set_mode(w, h).map(|m| (m.width, m.height));
    found.expect(
        larger == Ok((1280, 1024)) && changed != 0 && back == Ok((w, h)) && signalled() != 0,
        format_args!("1280x1024, then {w}x{h}: each signalled ({larger:?}, {back:?})"),
    );
    let buffer = match fb.buffer() {
        Ok(b) => b,
        Err(e) => {
            println!("test-fb: FAILED: BUFFER: {e}");
            return 1;
        }
    };
    let frames = target.frames();
    found.expect(
        buffer.len() as u64 == frames * FRAME_BYTES,
        format_args!("the buffer: {frames} 2 MiB frames ({} bytes)", buffer.len()),
    );
    let stride = target.stride as usize;
    for y in 0..h {
        let row = y as usize * stride;
        let on_cross_row = y.abs_diff(h / 2) < GAP;
        let half = w / 2;
        for (x0, x1) in [(0, half), (half, w)] {
            let colour = match (on_cross_row, y < h / 2, x0 == 0) {
                (true, _, _) => 0,
                (false, top, left) => COLOURS[usize::from(!top) * 2 + usize::from(!left)],
            };
            let _ = buffer.fill32(row + x0 as usize * 4, (x1 - x0) as usize * 4, colour);
        }
        // The vertical bar of the cross.
        let _ = buffer.fill32(row + (w / 2 - GAP) as usize * 4, 2 * GAP as usize * 4, 0);
    }
    let top = fb.refresh(0, 0, w, h / 2);
    let bottom = fb.refresh(0, h / 2, u32::MAX, u32::MAX);
    let off = fb.refresh(w, h, 10, 10);
    found.expect(
        top.is_ok() && bottom.is_ok() && off.is_ok(),
        format_args!("refreshed in two halves, the second clipped; one off the screen answered"),
    );
    found.expect(
        fb.set_mode(800, 600) == Err(FbError::Refused(REFUSED)),
        format_args!("a mode change once the buffer exists: refused"),
    );
    println!("test-fb: drawn {w}x{h}: four quadrants");
    let failed = found.finish();
    // Stays, its picture on the screen, until init stops it.
    let stay = own(STAY);
    if syscall::retype(own(child::UNTYPED), ObjectType::Notification, 0, stay, 1).is_ok() {
        loop {
            let _ = syscall::wait(stay);
        }
    }
    failed
}
