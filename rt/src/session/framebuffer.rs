//! The Framebuffer session: a screen's pixels as memory the client draws
//! into, and a request that puts a rectangle of it on the screen
//! (Genode's `framebuffer_session`). The provider is a display driver
//! (`components/drivers/framebuffer`) or, for each of its clients, the GUI
//! multiplexer.
//!
//! | opcode | words | reply |
//! |--------|-------|-------|
//! | [`MODE`] | — | [`OK`], words: width, height (pixels), stride (bytes per row), [`FORMAT_XRGB8888`] |
//! | [`SET_MODE`] | 0: width, 1: height | [`OK`] with the new mode's words; [`REFUSED`] for a mode the provider cannot show or that does not fit the donation ([`Mode::fits`]), or once the buffer exists |
//! | [`BUFFER`] | — | [`OK`], words: 0: the buffer's 2 MiB frames (in donated slots `0..n`), 1: its bytes (`stride × height`) |
//! | [`REFRESH`] | 0: x, 1: y, 2: width, 3: height | [`OK`] once the rectangle (clipped to the mode) is on the screen; [`NO_BUFFER`] before [`BUFFER`] |
//!
//! **The mode-change signal.** When it opens the session the provider
//! makes the session's notification from the donation (donated slot
//! [`MAX_FRAMES`], the client's read-only copy in the next,
//! [`Session::notification`]) and names it the session's wake
//! notification (`Donated::set_wake`), as Block, Nic and Input sessions
//! do. The provider signals it whenever the mode changes
//! ([`signal_mode_change`]; the client asks `MODE`), and the parent
//! signals it with `interfaces::session::PROVIDER_GONE` when the provider
//! stops: a client waiting on it learns at once that its display is gone
//! and reconnects ([`Session::reconnect`]).
//!
//! **The buffer** is client memory: the provider makes it from the
//! session's donation as 2 MiB frames in the donated slots — several
//! frames, so a dataspace is no longer limited to one 2 MiB frame — and
//! the client maps them one after the other (`Session::buffer`). The
//! provider maps its own copies of them, out of the client's reach. A
//! pixel is 32 bits, `0x00RRGGBB` (little-endian B, G, R, X in memory);
//! row `y` starts at byte `y × stride`.
//!
//! **The donation fits the mode.** A client gives at least
//! [`Framebuffer::RAM`] ([`DONATION`], 8 MiB: after the notification
//! three frames, a mode of up to 6 MiB — 1600×900, 1280×1024), and more
//! when it will use a larger mode ([`open_for`]: [`donation_for`] the
//! mode, a power of two up to [`MAX_DONATION`], 32 MiB: fifteen frames).
//! The provider learns the donation's size when the session opens
//! ([`open_notification`] answers its [`frames_in`]) and refuses a
//! `SET_MODE` whose buffer would not fit it. So only a client of a large
//! mode pays for one; the others' donor blocks stay as they were.
//!
//! **Refresh** is synchronous: the reply comes when the pixels are on the
//! screen (a driver copies the rectangle into the device's framebuffer),
//! so the client may draw again at once. A rectangle partly off the
//! screen is clipped; one wholly off it, or empty, is answered [`OK`]
//! with nothing done — bad input is never an error that costs the
//! provider anything.

use abi::map::Cache;
use abi::Error;

use super::{Interface, Session};
use crate::mmio::Region;

/// The Framebuffer interface.
pub struct Framebuffer;

impl Interface for Framebuffer {
    const NAME: &'static str = "Framebuffer";
    /// The session's notification and three 2 MiB frames after it: the
    /// least donation ([`DONATION`]; a client of a larger mode gives
    /// more, [`open_for`]).
    const RAM: u64 = DONATION;
    /// The buffer's frames (as many as the largest donation holds), the
    /// notification and the client's copy.
    const CAPS: u32 = MAX_FRAMES + 2;
}

/// The donated slot of the session's notification.
const SLOT_NOTIFY: u32 = MAX_FRAMES;
/// The donated slot of the client's read-only copy of it.
const SLOT_CLIENT_READ: u32 = MAX_FRAMES + 1;

/// Makes a session's notification from its donation (the provider's
/// side, when the session opens): read-only copy for the client, and the
/// wake notification the parent signals when the provider stops. The
/// frames the donation holds beside it ([`frames_in`] its size): the
/// largest buffer the session's `SET_MODE` and `BUFFER` may make. The
/// error says which step failed.
pub fn open_notification(donated: &super::Donated) -> Result<u32, &'static str> {
    use abi::{ObjectType, Rights};
    let notify = donated.slot(SLOT_NOTIFY);
    let frames = frames_in(donated_bytes(donated, notify));
    crate::syscall::retype(donated.untyped(), ObjectType::Notification, 0, notify, 1)
        .map_err(|_| "the donation holds no notification")?;
    crate::syscall::cap_mint(notify, donated.slot(SLOT_CLIENT_READ), Rights::READ, 0)
        .map_err(|_| "minting the client's notification failed")?;
    donated
        .set_wake(notify)
        .map_err(|_| "copying the notification to the wake slot failed")?;
    Ok(frames)
}

/// The bytes of the donation's untyped, from [`DONATION`] to
/// [`MAX_DONATION`] (0 below): the kernel makes an untyped of that size
/// from it, into the empty donated slot `probe`, only when it holds one
/// (the session's checked donation, untouched yet); the probe is deleted
/// again, which leaves the donation whole.
fn donated_bytes(donated: &super::Donated, probe: abi::CapSlot) -> u64 {
    use interfaces::session::donation_ram_bits;
    let (least, most) = (donation_ram_bits(DONATION), donation_ram_bits(MAX_DONATION));
    for bits in (least..=most).rev() {
        let made = crate::syscall::retype(
            donated.untyped(),
            abi::ObjectType::Untyped,
            bits.into(),
            probe,
            1,
        );
        if made.is_ok() {
            // SAFETY: an untyped capability just made; nothing is mapped
            // through it.
            let _ = unsafe { crate::syscall::cap_delete(probe) };
            return 1 << bits;
        }
    }
    0
}

/// Signals a session's notification: its mode changed (the provider's
/// side).
pub fn signal_mode_change(donated: &super::Donated) {
    let _ = crate::syscall::signal(donated.slot(SLOT_NOTIFY));
}

pub use interfaces::framebuffer::*;

/// Why a Framebuffer request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FbError {
    /// The call failed (the provider is gone).
    Ipc(Error),
    /// The provider answered with this label.
    Refused(u64),
    /// The reply made no sense (a mode out of range, frames past the
    /// donation).
    Nonsense,
    /// Mapping the buffer failed.
    Map(Error),
}

impl core::fmt::Display for FbError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            FbError::Ipc(e) => write!(f, "the call failed: {e}"),
            FbError::Refused(REFUSED) => f.write_str("refused"),
            FbError::Refused(NO_BUFFER) => f.write_str("no buffer yet"),
            FbError::Refused(l) => write!(f, "refused (label {l:#x})"),
            FbError::Nonsense => f.write_str("the provider's reply makes no sense"),
            FbError::Map(e) => write!(f, "mapping the buffer: {e}"),
        }
    }
}

/// Opens a Framebuffer session whose donation holds a buffer of
/// `width` × `height` ([`donation_for`]; the donor block made from the
/// component's quota into own slots `donor_block` and `donor_table`, as
/// `open_from_quota` does): for a client that will ask for a mode larger
/// than the least donation holds. The error says which step failed.
pub fn open_for(
    slot: u32,
    donor_block: u32,
    donor_table: u32,
    width: u32,
    height: u32,
) -> Result<Session<Framebuffer>, alloc::string::String> {
    use alloc::format;
    let ram = Mode::new(width, height)
        .and_then(|m| donation_for(&m))
        .ok_or_else(|| format!("{width}x{height}: no donation holds that mode"))?;
    let untyped = abi::caddr::own(interfaces::child::UNTYPED);
    let donor =
        super::Donor::from_untyped_sized::<Framebuffer>(untyped, donor_block, donor_table, ram)
            .map_err(|e| format!("donation of {} MiB: {e}", ram >> 20))?;
    super::open_donating::<Framebuffer>(slot, donor).map_err(|(e, _)| format!("{e}"))
}

impl Session<Framebuffer> {
    fn request(&self, label: u64, words: [u64; 4]) -> Result<[u64; 4], FbError> {
        let (info, words) = self.call(label, words).map_err(FbError::Ipc)?;
        match info.label() {
            OK => Ok(words),
            other => Err(FbError::Refused(other)),
        }
    }

    /// The current mode.
    pub fn mode(&self) -> Result<Mode, FbError> {
        Mode::from_words(&self.request(MODE, [0; 4])?).ok_or(FbError::Nonsense)
    }

    /// Asks for `width` × `height`; the mode the provider set.
    pub fn set_mode(&self, width: u32, height: u32) -> Result<Mode, FbError> {
        let w = self.request(SET_MODE, [width.into(), height.into(), 0, 0])?;
        Mode::from_words(&w).ok_or(FbError::Nonsense)
    }

    /// The buffer, mapped write-back into a fresh window of the
    /// component's address space (`rt::mmio::Region`: bounds-checked,
    /// `copy_from` for rows).
    pub fn buffer(&self) -> Result<Region, FbError> {
        let w = self.request(BUFFER, [0; 4])?;
        let frames = u32::try_from(w[0])
            .ok()
            .filter(|&n| (1..=MAX_FRAMES).contains(&n) && w[1] <= u64::from(n) * FRAME_BYTES)
            .ok_or(FbError::Nonsense)?;
        let slots = (0..frames).filter_map(|i| self.donated_slot(i));
        Region::map_new(
            slots,
            frames as usize,
            FRAME_BYTES as usize,
            Cache::WriteBack,
        )
        .map_err(FbError::Map)
    }

    /// Opens the session again after its provider stopped (init parks
    /// the open while it restarts; `Session::reopen`) and maps the new
    /// buffer — in `mode`, the one the client draws for: a provider that
    /// comes back in another (a restarted driver starts in its default)
    /// is asked for it (the same donation holds it). The error says
    /// which step failed.
    pub fn reconnect(&mut self, mode: Mode) -> Result<Region, alloc::string::String> {
        use alloc::format;
        self.reopen().map_err(|e| format!("{e}"))?;
        let now = self.mode().map_err(|e| format!("MODE: {e}"))?;
        let now = match now == mode {
            true => now,
            false => self.set_mode(mode.width, mode.height).unwrap_or(now),
        };
        match now {
            m if m == mode => self.buffer().map_err(|e| format!("BUFFER: {e}")),
            m => Err(format!("the mode changed to {}x{}", m.width, m.height)),
        }
    }

    /// The session's notification (read-only, in the client's donation):
    /// signalled when the mode changes, and with
    /// `interfaces::session::PROVIDER_GONE` when the provider stops.
    pub fn notification(&self) -> Option<abi::CapSlot> {
        self.donated_slot(SLOT_CLIENT_READ)
    }

    /// Puts the rectangle `x, y, w, h` of the buffer on the screen.
    pub fn refresh(&self, x: u32, y: u32, w: u32, h: u32) -> Result<(), FbError> {
        self.request(REFRESH, [x.into(), y.into(), w.into(), h.into()])
            .map(drop)
    }
}

/// A client's buffer as its provider holds it: the 2 MiB frames made
/// from the session's donation into the donated slots `0..n` (the
/// client's, which it maps itself), the provider's own copies of them in
/// its slots `first_copy..first_copy + n` (out of the client's reach),
/// and the provider's mapping of those. Dropping it unmaps and deletes
/// the copies; the frames go when the client revokes its donation.
pub struct ServedBuffer {
    region: Region,
    first_copy: u32,
    frames: u32,
}

impl ServedBuffer {
    /// Makes the buffer for `mode` from `donated` and maps the provider's
    /// copies (own slots from `first_copy`, as many free as the mode has
    /// frames, at most [`MAX_FRAMES`]). The error says which step failed:
    /// a mode the donation does not hold is refused by the kernel's
    /// retype, before anything is made.
    pub fn make(
        donated: &super::Donated,
        mode: Mode,
        first_copy: u32,
    ) -> Result<ServedBuffer, &'static str> {
        use abi::{ObjectType, Rights};
        let frames = mode.frames() as u32;
        if !mode.fits(MAX_FRAMES) || frames == 0 {
            return Err("the mode does not fit the donation");
        }
        crate::syscall::retype(
            donated.untyped(),
            ObjectType::Frame2M,
            0,
            donated.slot(0),
            frames.into(),
        )
        .map_err(|_| "the donation holds no such frames")?;
        let copies = |n: u32| (0..n).map(move |i| abi::caddr::own(first_copy + i));
        for (i, copy) in copies(frames).enumerate() {
            let rw = Rights::READ.union(Rights::WRITE);
            if crate::syscall::cap_mint(donated.slot(i as u32), copy, rw, 0).is_err() {
                delete_copies(copies(i as u32));
                return Err("copying a frame failed");
            }
        }
        match Region::map_new(
            copies(frames),
            frames as usize,
            FRAME_BYTES as usize,
            Cache::WriteBack,
        ) {
            Ok(region) => Ok(ServedBuffer {
                region,
                first_copy,
                frames,
            }),
            Err(_) => {
                delete_copies(copies(frames));
                Err("mapping the buffer failed")
            }
        }
    }

    /// The provider's window over the buffer.
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// Its frames.
    pub fn frames(&self) -> u32 {
        self.frames
    }
}

impl Drop for ServedBuffer {
    fn drop(&mut self) {
        let first = self.first_copy;
        delete_copies((0..self.frames).map(|i| abi::caddr::own(first + i)));
    }
}

/// Deletes the provider's copies of a buffer's frames (deleting a frame
/// capability unmaps its mapping).
fn delete_copies(copies: impl Iterator<Item = abi::CapSlot>) {
    for copy in copies {
        // SAFETY: the provider's own copies of a client's frames; the
        // window over them is gone or never existed, so nothing of the
        // provider reaches their mappings any more.
        let _ = unsafe { crate::syscall::cap_delete(copy) };
    }
}
