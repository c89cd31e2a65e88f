//! framebuffer: the display driver for QEMU's standard display devices,
//! `bochs-display` and the standard VGA (`-vga std`), both PCI 1234:1111
//! with the Bochs "DISPI" interface. It gets exactly its device from the
//! platform service (`devices = [{ pci = "1234:1111" }]`) and serves one
//! Framebuffer session (`rt::session::framebuffer`; a second is refused
//! while one is open: the GUI multiplexer is meant to be the one client).
//!
//! The device: BAR 0 is the framebuffer (16 MiB by default), mapped
//! write-combining (TCG ignores cache attributes: on QEMU that costs and
//! changes nothing); BAR 2 holds the registers, the DISPI ones at 0x500
//! as 16-bit words (index × 2): ID, XRES, YRES, BPP, ENABLE, BANK,
//! VIRT_WIDTH, VIRT_HEIGHT, X_OFFSET, Y_OFFSET. A mode is set with ENABLE
//! 0, the sizes, 32 bits per pixel, then ENABLE with the linear
//! framebuffer bit; the driver reads the sizes back and refuses a mode
//! the device did not take.
//!
//! The mode at start is 1024×768 (`arg` = `width | height << 16` asks for
//! another); a client may ask for another with `SET_MODE` before it takes
//! its buffer. The screen is cleared to black at start and on each mode
//! change, and the session's notification (made from the client's
//! donation when the session opens; init signals it with
//! `PROVIDER_GONE` when this driver stops) is signalled. The client's buffer is its own memory (2 MiB frames made from
//! its donation); the driver maps its own copies of those frames and on
//! `REFRESH` copies the rectangle, row by row, into the framebuffer.
//!
//! Bad input is an error, never a crash: a mode out of range or too large
//! for the donation (the client gives more for a larger mode:
//! `rt::session::framebuffer`, "The donation fits the mode") or the BAR
//! is refused, a rectangle is clipped to the
//! screen, a request before the buffer is answered `NO_BUFFER`.
//!
//! Prints `framebuffer: 1234:1111 at BDF, N MiB framebuffer, mode WxHx32`
//! when it serves.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::rc::Rc;
use core::cell::RefCell;

use rt::abi::map::Cache;
use rt::abi::MsgInfo;
use rt::interfaces::child;
use rt::mmio::Region;
use rt::println;
use rt::session::framebuffer::{self as fb, Framebuffer, Mode, ServedBuffer};
use rt::session::platform::{Platform, PlatformError};
use rt::session::{self, Donated, Provider, Session};
use rt::syscall::Words;

rt::entry!(main);

/// The Platform session and its donation's block and table.
const BASE: u32 = child::FIRST_FREE;
/// The provider's slots: two for its one session.
const SESSION_SLOT: u32 = BASE + 3;
/// The driver's own copies of the client's buffer frames.
const COPIES: u32 = SESSION_SLOT + 2;

/// The device QEMU's `bochs-display` and `VGA` are.
const VENDOR: u16 = 0x1234;
const DEVICE: u16 = 0x1111;

/// The DISPI registers in BAR 2, 16 bits each.
const DISPI: usize = 0x500;
const DISPI_ID: usize = 0;
const DISPI_XRES: usize = 1;
const DISPI_YRES: usize = 2;
const DISPI_BPP: usize = 3;
const DISPI_ENABLE: usize = 4;
const DISPI_BANK: usize = 5;
const DISPI_VIRT_WIDTH: usize = 6;
const DISPI_VIRT_HEIGHT: usize = 7;
const DISPI_X_OFFSET: usize = 8;
const DISPI_Y_OFFSET: usize = 9;
/// `ENABLE`: on, with the linear framebuffer.
const ENABLED: u16 = 0x01;
const LFB_ENABLED: u16 = 0x40;
/// The IDs of the interface's versions (0xB0C0 to 0xB0C5 in QEMU).
const ID_FIRST: u16 = 0xb0c0;
const ID_LAST: u16 = 0xb0cf;

/// The default mode.
const DEFAULT: (u32, u32) = (1024, 768);

/// The device, mapped.
struct Display {
    regs: Region,
    fb: Region,
    mode: Mode,
}

impl Display {
    fn dispi(&self, index: usize) -> u16 {
        self.regs.read16(DISPI + 2 * index).unwrap_or(0)
    }

    fn set_dispi(&self, index: usize, value: u16) {
        let _ = self.regs.write16(DISPI + 2 * index, value);
    }

    /// Sets `mode` (32 bits per pixel) and clears the screen; an error
    /// when it is larger than the framebuffer or the device did not take
    /// it (the old mode is set again then).
    fn set_mode(&mut self, mode: Mode) -> Result<(), &'static str> {
        if mode.bytes() > self.fb.len() as u64 {
            return Err("larger than the framebuffer");
        }
        self.program(mode);
        let took = self.dispi(DISPI_XRES) == mode.width as u16
            && self.dispi(DISPI_YRES) == mode.height as u16
            && self.dispi(DISPI_BPP) == 32;
        if !took {
            self.program(self.mode);
            return Err("the device did not take it");
        }
        self.mode = mode;
        self.fb.fill32(0, mode.bytes() as usize, 0);
        Ok(())
    }

    fn program(&self, mode: Mode) {
        self.set_dispi(DISPI_ENABLE, 0);
        self.set_dispi(DISPI_XRES, mode.width as u16);
        self.set_dispi(DISPI_YRES, mode.height as u16);
        self.set_dispi(DISPI_BPP, 32);
        self.set_dispi(DISPI_BANK, 0);
        self.set_dispi(DISPI_VIRT_WIDTH, mode.width as u16);
        self.set_dispi(DISPI_VIRT_HEIGHT, mode.height as u16);
        self.set_dispi(DISPI_X_OFFSET, 0);
        self.set_dispi(DISPI_Y_OFFSET, 0);
        self.set_dispi(DISPI_ENABLE, ENABLED | LFB_ENABLED);
    }

    /// Copies the rectangle `x, y, w, h` (clipped) of `buffer` (rows of
    /// `self.mode.stride` bytes) to the screen.
    fn refresh(&self, buffer: &Region, rect: [u64; 4]) {
        let m = self.mode;
        let Some((x, y, w, h)) = m.clip(rect[0], rect[1], rect[2], rect[3]) else {
            return;
        };
        let stride = m.stride as usize;
        for row in y as usize..(y + h) as usize {
            let at = row * stride + x as usize * 4;
            let _ = self.fb.copy_region(at, buffer, at, w as usize * 4);
        }
    }
}

/// The one session's state.
struct Client {
    donated: Donated,
    /// The frames its donation holds: the largest buffer, so the largest
    /// mode, it may have.
    frames: u32,
    /// The client's buffer, once made, with the driver's mapping.
    buffer: Option<ServedBuffer>,
}

fn main(arg: u64) -> i32 {
    let display = match start(arg) {
        Ok(d) => Rc::new(RefCell::new(d)),
        Err(e) => {
            println!("framebuffer: {e}");
            return 1;
        }
    };
    let provider = Provider::<Framebuffer, Client>::new(SESSION_SLOT, SESSION_SLOT + 2);
    provider.serve(
        |label, donated| {
            let make = |d| {
                let frames = fb::open_notification(&d)?;
                Ok::<_, &str>(Client {
                    donated: d,
                    frames,
                    buffer: None,
                })
            };
            session::open_donated("framebuffer", label, donated, make, |_| 1)
        },
        move |_, client, op, words| request(&mut display.borrow_mut(), client, op, words),
    )
}

/// Finds the device, maps it and sets the first mode.
fn start(arg: u64) -> Result<Display, alloc::string::String> {
    use alloc::format;
    let platform: Session<Platform> =
        session::open_from_quota::<Platform>(BASE, BASE + 1, BASE + 2)
            .map_err(|e| format!("Platform session: {e}"))?;
    let platform: &'static Session<Platform> =
        alloc::boxed::Box::leak(alloc::boxed::Box::new(platform));
    let dev = platform.device(0).map_err(|e| {
        format!("no device: {e}; is `devices = [{{ pci = \"1234:1111\" }}]` in its config?")
    })?;
    if (dev.vendor, dev.device) != (VENDOR, DEVICE) {
        return Err(format!(
            "device {:04x}:{:04x} is not QEMU's standard display (1234:1111)",
            dev.vendor, dev.device
        ));
    }
    let map = |bar: u32, cache: Cache| -> Result<Region, alloc::string::String> {
        let info = platform
            .bar(0, bar)
            .map_err(|e: PlatformError| format!("BAR {bar}: {e}"))?;
        if info.io || !(12..=21).contains(&info.frame_bits) || info.frames == 0 {
            return Err(format!("BAR {bar} is not memory of 4 KiB or 2 MiB frames"));
        }
        let frames =
            (info.first..info.first + info.frames).filter_map(|i| platform.donated_slot(i));
        Region::map_new(frames, info.frames as usize, 1 << info.frame_bits, cache)
            .map_err(|e| format!("mapping BAR {bar}: {e}"))
    };
    let fb_region = map(0, Cache::WriteCombining)?;
    let regs = map(2, Cache::Uncached)?;
    let mut display = Display {
        regs,
        fb: fb_region,
        mode: Mode::new(DEFAULT.0, DEFAULT.1).ok_or("the default mode")?,
    };
    let id = display.dispi(DISPI_ID);
    if !(ID_FIRST..=ID_LAST).contains(&id) {
        return Err(format!(
            "no DISPI interface in BAR 2 (ID {id:#06x}): not a bochs-display or VGA"
        ));
    }
    let asked = match arg {
        0 => DEFAULT,
        a => ((a & 0xffff) as u32, ((a >> 16) & 0xffff) as u32),
    };
    let mode = Mode::new(asked.0, asked.1)
        .ok_or_else(|| format!("mode {}x{} out of range (arg)", asked.0, asked.1))?;
    display
        .set_mode(mode)
        .map_err(|e| format!("mode {}x{}x32: {e}", mode.width, mode.height))?;
    println!(
        "framebuffer: {VENDOR:04x}:{DEVICE:04x} at {:02x}:{:02x}.{}, {} MiB framebuffer, mode {}x{}x32",
        dev.bdf >> 8,
        (dev.bdf >> 3) & 0x1f,
        dev.bdf & 7,
        display.fb.len() >> 20,
        mode.width,
        mode.height
    );
    Ok(display)
}

/// A request on the session.
fn request(display: &mut Display, client: &mut Client, op: u64, words: Words) -> (MsgInfo, Words) {
    let answer = rt::server::answer;
    match op {
        fb::MODE => answer(fb::OK, display.mode.words()),
        fb::SET_MODE => {
            let mode = u32::try_from(words[0])
                .ok()
                .zip(u32::try_from(words[1]).ok())
                .and_then(|(w, h)| Mode::new(w, h))
                .filter(|_| client.buffer.is_none());
            let fits = |m: Mode| match m.fits(client.frames) {
                true => display.set_mode(m),
                false => Err("larger than the session's donation"),
            };
            match mode.map(fits) {
                Some(Ok(())) => {
                    fb::signal_mode_change(&client.donated);
                    answer(fb::OK, display.mode.words())
                }
                Some(Err(why)) => {
                    println!("framebuffer: mode {}x{} refused: {why}", words[0], words[1]);
                    answer(fb::REFUSED, [0; 4])
                }
                None => answer(fb::REFUSED, [0; 4]),
            }
        }
        fb::BUFFER => {
            if client.buffer.is_none() {
                match ServedBuffer::make(&client.donated, display.mode, COPIES) {
                    Ok(b) => client.buffer = Some(b),
                    Err(why) => {
                        println!("framebuffer: no buffer: {why}");
                        return answer(fb::REFUSED, [0; 4]);
                    }
                }
            }
            let frames = client.buffer.as_ref().map_or(0, ServedBuffer::frames);
            answer(fb::OK, [frames.into(), display.mode.bytes(), 0, 0])
        }
        fb::REFRESH => match client.buffer.as_ref() {
            Some(buffer) => {
                display.refresh(buffer.region(), words);
                answer(fb::OK, [0; 4])
            }
            None => answer(fb::NO_BUFFER, [0; 4]),
        },
        _ => answer(fb::UNKNOWN, [op, 0, 0, 0]),
    }
}
