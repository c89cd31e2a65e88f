//! The Framebuffer session's protocol: opcodes, replies and the screen
//! [`Mode`] (`rt::session::framebuffer` has the interface, the client's
//! side and the protocol's description). Pure data, tested on the host.

/// Bytes of one buffer frame.
pub const FRAME_BYTES: u64 = 2 << 20;
/// The least donation of a session, what most clients give: the
/// session's notification is made from it first and the frames are
/// aligned to their size after it, so it holds three frames — a mode of
/// up to 6 MiB (1600×900, 1280×1024 at 32 bits; 1024×768 is two).
pub const DONATION: u64 = 8 << 20;
/// The largest donation a provider makes use of: fifteen frames, a mode
/// of up to 30 MiB (2560×1600 is 8 frames, 3840×2160 16: beyond).
pub const MAX_DONATION: u64 = 32 << 20;
/// The most frames a buffer has ([`MAX_DONATION`]'s): the donated slots
/// a session reserves for them.
pub const MAX_FRAMES: u32 = frames_in(MAX_DONATION);

/// The frames a donation of `bytes` holds beside the session's
/// notification (which takes the first frame's place: the frames are
/// aligned to their size), at most [`MAX_FRAMES`]'s worth of
/// [`MAX_DONATION`].
pub const fn frames_in(bytes: u64) -> u32 {
    let bytes = if bytes > MAX_DONATION {
        MAX_DONATION
    } else {
        bytes
    };
    (bytes / FRAME_BYTES).saturating_sub(1) as u32
}

/// The least donation (a power of two, at least [`DONATION`]) whose
/// frames hold `mode`'s buffer: what a client that will use `mode` gives
/// when it opens the session. `None` beyond [`MAX_DONATION`].
pub fn donation_for(mode: &Mode) -> Option<u64> {
    let need = (mode.frames() + 1) * FRAME_BYTES;
    let bytes = need.checked_next_power_of_two()?.max(DONATION);
    (bytes <= MAX_DONATION).then_some(bytes)
}

/// The current mode.
pub const MODE: u64 = 1;
/// Asks for another mode.
pub const SET_MODE: u64 = 2;
/// Makes the buffer (once) and says where it is.
pub const BUFFER: u64 = 3;
/// Puts a rectangle of the buffer on the screen.
pub const REFRESH: u64 = 4;

/// The reply: done.
pub const OK: u64 = 0;
/// The reply to an unknown opcode.
pub const UNKNOWN: u64 = 0xe0;
/// The reply: not that mode (or not now).
pub const REFUSED: u64 = 0xe1;
/// The reply: no buffer yet.
pub const NO_BUFFER: u64 = 0xe2;

/// 32 bits per pixel, `0x00RRGGBB`.
pub const FORMAT_XRGB8888: u64 = 0;

/// The smallest width and height a mode may have.
pub const MIN_SIDE: u32 = 64;
/// The largest.
pub const MAX_SIDE: u32 = 4096;

/// A screen mode: 32-bit pixels, rows of `stride` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// Bytes per row (at least `width × 4`).
    pub stride: u32,
}

impl Mode {
    /// The packed mode of `width` × `height` (stride `width × 4`), if the
    /// sides are within [`MIN_SIDE`]..=[`MAX_SIDE`].
    pub fn new(width: u32, height: u32) -> Option<Mode> {
        let side = MIN_SIDE..=MAX_SIDE;
        (side.contains(&width) && side.contains(&height)).then_some(Mode {
            width,
            height,
            stride: width * 4,
        })
    }

    /// Bytes of the buffer.
    pub fn bytes(&self) -> u64 {
        u64::from(self.stride) * u64::from(self.height)
    }

    /// 2 MiB frames the buffer takes.
    pub fn frames(&self) -> u64 {
        self.bytes().div_ceil(FRAME_BYTES)
    }

    /// Whether its buffer fits in `frames` frames (a session's donation
    /// holds [`frames_in`] of its bytes).
    pub fn fits(&self, frames: u32) -> bool {
        self.frames() <= u64::from(frames)
    }

    /// [`MODE`]'s reply words.
    pub fn words(&self) -> [u64; 4] {
        [
            self.width.into(),
            self.height.into(),
            self.stride.into(),
            FORMAT_XRGB8888,
        ]
    }

    /// The mode in `MODE`'s reply words, checked (a provider's nonsense is
    /// `None`).
    pub fn from_words(w: &[u64; 4]) -> Option<Mode> {
        let width = u32::try_from(w[0]).ok()?;
        let height = u32::try_from(w[1]).ok()?;
        let stride = u32::try_from(w[2]).ok()?;
        let mode = Mode::new(width, height)?;
        (w[3] == FORMAT_XRGB8888 && stride >= mode.stride && stride % 4 == 0)
            .then_some(Mode { stride, ..mode })
    }

    /// `x, y, w, h` clipped to the screen: `(x, y, w, h)` of the part on
    /// it, `None` when nothing is.
    pub fn clip(&self, x: u64, y: u64, w: u64, h: u64) -> Option<(u32, u32, u32, u32)> {
        let (sw, sh) = (u64::from(self.width), u64::from(self.height));
        if x >= sw || y >= sh || w == 0 || h == 0 {
            return None;
        }
        let w = w.min(sw - x);
        let h = h.min(sh - y);
        Some((x as u32, y as u32, w as u32, h as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        let m = Mode::new(1024, 768).unwrap();
        assert_eq!((m.stride, m.bytes(), m.frames()), (4096, 3 << 20, 2));
        let least = frames_in(DONATION);
        assert_eq!(least, 3);
        assert!(m.fits(least));
        assert!(Mode::new(1600, 900).unwrap().fits(least));
        assert!(Mode::new(1280, 1024).unwrap().fits(least));
        // 7.9 MiB: four frames, and the notification takes the first.
        let hd = Mode::new(1920, 1080).unwrap();
        assert!(!hd.fits(least));
        assert!(hd.fits(frames_in(16 << 20)));
        assert!(!Mode::new(2560, 1600).unwrap().fits(frames_in(16 << 20)));
        assert_eq!(Mode::new(63, 100), None);
        assert_eq!(Mode::new(100, 4097), None);
        assert_eq!(Mode::from_words(&m.words()), Some(m));
        // A stride too small, unaligned, or another format: nonsense.
        assert_eq!(Mode::from_words(&[1024, 768, 4092, 0]), None);
        assert_eq!(Mode::from_words(&[1024, 768, 4098, 0]), None);
        assert_eq!(Mode::from_words(&[1024, 768, 4096, 1]), None);
        assert_eq!(Mode::from_words(&[u64::MAX, 768, 4096, 0]), None);
        assert_eq!(
            Mode::from_words(&[1024, 768, 8192, 0]).map(|m| m.stride),
            Some(8192)
        );
    }

    #[test]
    fn donations() {
        assert_eq!(frames_in(0), 0);
        assert_eq!(frames_in(4 << 20), 1);
        assert_eq!(frames_in(16 << 20), 7);
        assert_eq!(frames_in(MAX_DONATION), MAX_FRAMES);
        assert_eq!(frames_in(u64::MAX), MAX_FRAMES);
        assert_eq!(MAX_FRAMES, 15);
        let donation = |w, h| donation_for(&Mode::new(w, h).unwrap());
        assert_eq!(donation(64, 64), Some(DONATION));
        assert_eq!(donation(1024, 768), Some(DONATION));
        assert_eq!(donation(1280, 1024), Some(DONATION));
        assert_eq!(donation(1920, 1080), Some(16 << 20));
        // 14.1 MiB: eight frames, the ninth place the notification's.
        assert_eq!(donation(2560, 1440), Some(32 << 20));
        assert_eq!(donation(3840, 2160), None);
        assert_eq!(donation(4096, 4096), None);
        // The donation asked for always holds the mode, and the next
        // smaller power of two never does (or is below the least).
        for w in (64..=4096).step_by(97) {
            for h in (64..=4096).step_by(89) {
                let m = Mode::new(w, h).unwrap();
                match donation_for(&m) {
                    Some(d) => {
                        assert!(m.fits(frames_in(d)), "{w}x{h}");
                        assert!(d == DONATION || !m.fits(frames_in(d / 2)), "{w}x{h}");
                    }
                    None => assert!(!m.fits(MAX_FRAMES), "{w}x{h}"),
                }
            }
        }
    }

    #[test]
    fn clipping() {
        let m = Mode::new(1024, 768).unwrap();
        assert_eq!(m.clip(0, 0, 1024, 768), Some((0, 0, 1024, 768)));
        assert_eq!(m.clip(1000, 700, 100, 100), Some((1000, 700, 24, 68)));
        assert_eq!(m.clip(1024, 0, 1, 1), None);
        assert_eq!(m.clip(0, 768, 1, 1), None);
        assert_eq!(m.clip(5, 5, 0, 9), None);
        assert_eq!(m.clip(0, 0, u64::MAX, u64::MAX), Some((0, 0, 1024, 768)));
        assert_eq!(m.clip(u64::MAX, 0, 1, 1), None);
    }
}
