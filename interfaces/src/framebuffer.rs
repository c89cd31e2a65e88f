//! The Framebuffer session's protocol: opcodes, replies and the screen
//! [`Mode`] (`rt::session::framebuffer` has the interface, the client's
//! side and the protocol's description). Pure data, tested on the host.

/// The most 2 MiB frames a buffer has: three, as the session's
/// notification is made from the donation (8 MiB) first and the frames
/// are aligned to their size after it — a mode of up to 6 MiB
/// (1600×900, 1280×1024 at 32 bits).
pub const MAX_FRAMES: u32 = 3;
/// Bytes of one buffer frame.
pub const FRAME_BYTES: u64 = 2 << 20;

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

    /// Whether its buffer fits a session's donation.
    pub fn fits(&self) -> bool {
        self.frames() <= u64::from(MAX_FRAMES)
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
        assert!(m.fits());
        assert!(Mode::new(1600, 900).unwrap().fits());
        assert!(Mode::new(1280, 1024).unwrap().fits());
        // 7.9 MiB: four frames, and the notification takes the first.
        assert!(!Mode::new(1920, 1080).unwrap().fits());
        assert!(!Mode::new(2560, 1600).unwrap().fits());
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
