//! The PS/2 (i8042) keyboard and mouse as bytes: scan code set 1 (what
//! the controller's translation delivers) to key codes and presses, a US
//! keymap from key codes and modifiers to characters, and the mouse's
//! 3-byte packets to motion and buttons. The driver
//! (`components/drivers/ps2`) feeds the bytes it reads from port 0x60.
//!
//! Key codes are Linux's input codes (`interfaces::input`): for set 1's
//! main block the make code is the key code (`KEY_ESC` = 1 ... `KEY_F12` =
//! 0x58); the `0xE0`-prefixed keys have a table. Unknown codes are
//! dropped; the `0xE1` sequence (Pause) and the fake shifts `E0 2A`/`E0
//! AA` are swallowed. Nothing here panics on any byte sequence, and every
//! state is bounded.

use interfaces::input::{Event, BUTTON_LEFT, BUTTON_MIDDLE, BUTTON_RIGHT};

/// Key codes the keymap and the tests name (Linux's).
pub mod key {
    pub const ESC: u16 = 1;
    pub const BACKSPACE: u16 = 14;
    pub const TAB: u16 = 15;
    pub const ENTER: u16 = 28;
    pub const LEFTCTRL: u16 = 29;
    pub const LEFTSHIFT: u16 = 42;
    pub const RIGHTSHIFT: u16 = 54;
    pub const LEFTALT: u16 = 56;
    pub const SPACE: u16 = 57;
    pub const CAPSLOCK: u16 = 58;
    pub const F1: u16 = 59;
    pub const KPENTER: u16 = 96;
    pub const RIGHTCTRL: u16 = 97;
    pub const RIGHTALT: u16 = 100;
    pub const UP: u16 = 103;
    pub const LEFTMETA: u16 = 125;
}

/// The keys after an `0xE0` prefix: (set-1 code, key code).
const EXTENDED: [(u8, u16); 17] = [
    (0x1c, key::KPENTER),
    (0x1d, key::RIGHTCTRL),
    (0x35, 98), // KP slash
    (0x38, key::RIGHTALT),
    (0x47, 102), // Home
    (0x48, key::UP),
    (0x49, 104), // Page up
    (0x4b, 105), // Left
    (0x4d, 106), // Right
    (0x4f, 107), // End
    (0x50, 108), // Down
    (0x51, 109), // Page down
    (0x52, 110), // Insert
    (0x53, 111), // Delete
    (0x5b, key::LEFTMETA),
    (0x5c, 126), // Right meta
    (0x5d, 127), // Compose (menu)
];

/// Decodes scan code set 1 into key presses and releases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keyboard {
    extended: bool,
    /// Bytes of an `0xE1` sequence still to swallow.
    pause: u8,
}

/// A key went down or up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyChange {
    pub code: u16,
    pub pressed: bool,
}

impl Keyboard {
    /// Takes one byte from the controller; a key's change when the byte
    /// ends one.
    pub fn feed(&mut self, byte: u8) -> Option<KeyChange> {
        if self.pause > 0 {
            self.pause -= 1;
            return None;
        }
        match byte {
            0xe0 => {
                self.extended = true;
                return None;
            }
            // Pause: E1 1D 45 E1 9D C5, no release.
            0xe1 => {
                self.pause = 2;
                self.extended = false;
                return None;
            }
            // Keyboard replies (ACK, resend, errors, echo). 0xAA, the
            // self-test's pass, is also Left Shift's release: the driver
            // takes it at reset, here it is the release.
            0x00 if !self.extended => return None,
            0xfa | 0xfe | 0xff | 0xee | 0xfc | 0xfd => return None,
            _ => {}
        }
        let extended = core::mem::take(&mut self.extended);
        let pressed = byte & 0x80 == 0;
        let make = byte & 0x7f;
        let code = if extended {
            // The fake shifts around some extended keys.
            if make == 0x2a || make == 0x36 {
                return None;
            }
            EXTENDED.iter().find(|(m, _)| *m == make)?.1
        } else {
            match make {
                0x01..=0x58 => u16::from(make),
                _ => return None,
            }
        };
        Some(KeyChange { code, pressed })
    }
}

/// The modifiers a keymap looks at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modifiers {
    left_shift: bool,
    right_shift: bool,
    left_ctrl: bool,
    right_ctrl: bool,
    alt: bool,
    right_alt: bool,
    caps_lock: bool,
}

impl Modifiers {
    /// Follows a key change (Caps Lock toggles on its press).
    pub fn update(&mut self, k: KeyChange) {
        match k.code {
            key::LEFTSHIFT => self.left_shift = k.pressed,
            key::RIGHTSHIFT => self.right_shift = k.pressed,
            key::LEFTCTRL => self.left_ctrl = k.pressed,
            key::RIGHTCTRL => self.right_ctrl = k.pressed,
            key::LEFTALT => self.alt = k.pressed,
            key::RIGHTALT => self.right_alt = k.pressed,
            key::CAPSLOCK if k.pressed => self.caps_lock = !self.caps_lock,
            _ => {}
        }
    }

    /// A shift key is held.
    pub fn shift(&self) -> bool {
        self.left_shift || self.right_shift
    }

    /// A control key is held.
    pub fn ctrl(&self) -> bool {
        self.left_ctrl || self.right_ctrl
    }

    /// An alt key is held.
    pub fn alt(&self) -> bool {
        self.alt || self.right_alt
    }
}

/// The US layout's main block from `KEY_1` (2) to `KEY_SLASH` (53):
/// (unshifted, shifted); `\0` where a code types nothing.
const US: [(u8, u8); 52] = [
    (b'1', b'!'),
    (b'2', b'@'),
    (b'3', b'#'),
    (b'4', b'$'),
    (b'5', b'%'),
    (b'6', b'^'),
    (b'7', b'&'),
    (b'8', b'*'),
    (b'9', b'('),
    (b'0', b')'),
    (b'-', b'_'),
    (b'=', b'+'),
    (8, 8),
    (b'\t', b'\t'),
    (b'q', b'Q'),
    (b'w', b'W'),
    (b'e', b'E'),
    (b'r', b'R'),
    (b't', b'T'),
    (b'y', b'Y'),
    (b'u', b'U'),
    (b'i', b'I'),
    (b'o', b'O'),
    (b'p', b'P'),
    (b'[', b'{'),
    (b']', b'}'),
    (b'\n', b'\n'),
    (0, 0),
    (b'a', b'A'),
    (b's', b'S'),
    (b'd', b'D'),
    (b'f', b'F'),
    (b'g', b'G'),
    (b'h', b'H'),
    (b'j', b'J'),
    (b'k', b'K'),
    (b'l', b'L'),
    (b';', b':'),
    (b'\'', b'"'),
    (b'`', b'~'),
    (0, 0),
    (b'\\', b'|'),
    (b'z', b'Z'),
    (b'x', b'X'),
    (b'c', b'C'),
    (b'v', b'V'),
    (b'b', b'B'),
    (b'n', b'N'),
    (b'm', b'M'),
    (b',', b'<'),
    (b'.', b'>'),
    (b'/', b'?'),
];

/// The character key `code` types on a US keyboard with `m` held: Shift
/// and Caps Lock (letters only), Ctrl with a letter its control
/// character; `None` for a key that types nothing (modifiers, function
/// keys, arrows) or with Alt held.
pub fn us_char(code: u16, m: &Modifiers) -> Option<char> {
    if m.alt() {
        return None;
    }
    let c = match code {
        key::ESC => 0x1b,
        key::SPACE => b' ',
        key::KPENTER => b'\n',
        2..=53 => {
            let (plain, shifted) = US[usize::from(code - 2)];
            let letter = plain.is_ascii_lowercase();
            let upper = m.shift() ^ (letter && m.caps_lock);
            match (m.ctrl(), letter) {
                (true, true) => plain - b'a' + 1,
                (true, false) => return None,
                (false, _) if upper => shifted,
                (false, _) => plain,
            }
        }
        _ => return None,
    };
    (c != 0).then_some(char::from(c))
}

/// A keyboard with its modifiers: bytes in, [`Event`]s out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyboardInput {
    decoder: Keyboard,
    modifiers: Modifiers,
}

impl KeyboardInput {
    /// Takes one byte; the event it completes, if any.
    pub fn feed(&mut self, byte: u8) -> Option<Event> {
        let k = self.decoder.feed(byte)?;
        self.modifiers.update(k);
        Some(match k.pressed {
            true => Event::Press {
                code: k.code,
                ch: us_char(k.code, &self.modifiers),
            },
            false => Event::Release { code: k.code },
        })
    }
}

/// Decodes the mouse's 3-byte packets (standard PS/2, no wheel).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mouse {
    packet: [u8; 3],
    have: usize,
    buttons: u8,
}

impl Mouse {
    /// Takes one byte; the events a completed packet makes (motion, then
    /// each button that changed), at most four.
    pub fn feed(&mut self, byte: u8) -> impl Iterator<Item = Event> {
        let mut out = [None; 4];
        // The first byte always has bit 3 set: anything else is out of
        // step (a lost byte) and dropped until a first byte comes.
        if self.have == 0 && byte & 0x08 == 0 {
            return out.into_iter().flatten();
        }
        self.packet[self.have] = byte;
        self.have += 1;
        if self.have < 3 {
            return out.into_iter().flatten();
        }
        self.have = 0;
        let [flags, x, y] = self.packet;
        // Overflowed motion is nonsense: the buttons still count.
        if flags & 0xc0 == 0 {
            let dx = i16::from(x) - if flags & 0x10 != 0 { 256 } else { 0 };
            let dy = i16::from(y) - if flags & 0x20 != 0 { 256 } else { 0 };
            if dx != 0 || dy != 0 {
                // PS/2 counts up as positive; screens count down.
                out[0] = Some(Event::Motion { dx, dy: -dy });
            }
        }
        let buttons = flags & 0x07;
        let changed = buttons ^ self.buttons;
        self.buttons = buttons;
        for (i, (bit, button)) in [(1, BUTTON_LEFT), (2, BUTTON_RIGHT), (4, BUTTON_MIDDLE)]
            .into_iter()
            .enumerate()
        {
            if changed & bit != 0 {
                out[i + 1] = Some(Event::Button {
                    button,
                    pressed: buttons & bit != 0,
                });
            }
        }
        out.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn typed(bytes: &[u8]) -> Vec<Event> {
        let mut k = KeyboardInput::default();
        bytes.iter().filter_map(|&b| k.feed(b)).collect()
    }

    #[test]
    fn keys_and_characters() {
        // a, Shift+b, Enter.
        let e = typed(&[0x1e, 0x9e, 0x2a, 0x30, 0xb0, 0xaa, 0x1c, 0x9c]);
        assert_eq!(
            e,
            [
                Event::Press {
                    code: 30,
                    ch: Some('a')
                },
                Event::Release { code: 30 },
                Event::Press {
                    code: key::LEFTSHIFT,
                    ch: None
                },
                Event::Press {
                    code: 48,
                    ch: Some('B')
                },
                Event::Release { code: 48 },
                Event::Release {
                    code: key::LEFTSHIFT
                },
                Event::Press {
                    code: key::ENTER,
                    ch: Some('\n')
                },
                Event::Release { code: key::ENTER },
            ]
        );
        // Caps Lock: letters upper, digits not; Shift undoes it for letters.
        let e = typed(&[0x3a, 0xba, 0x1e, 0x02, 0x2a, 0x1e]);
        let chars: Vec<_> = e
            .iter()
            .filter_map(|e| match e {
                Event::Press { ch, .. } => *ch,
                _ => None,
            })
            .collect();
        assert_eq!(chars, ['A', '1', 'a']);
        // Ctrl+C is 0x03.
        let e = typed(&[0x1d, 0x2e]);
        assert_eq!(
            e[1],
            Event::Press {
                code: 46,
                ch: Some('\u{3}')
            }
        );
    }

    #[test]
    fn extended_keys_pause_and_fake_shifts() {
        // Up arrow with the fake shift around it, then Pause, then Right Ctrl.
        let e = typed(&[
            0xe0, 0x2a, 0xe0, 0x48, 0xe0, 0xc8, 0xe0, 0xaa, 0xe1, 0x1d, 0x45, 0xe1, 0x9d, 0xc5,
            0xe0, 0x1d,
        ]);
        assert_eq!(
            e,
            [
                Event::Press {
                    code: key::UP,
                    ch: None
                },
                Event::Release { code: key::UP },
                Event::Press {
                    code: key::RIGHTCTRL,
                    ch: None
                },
            ]
        );
        // Replies of the keyboard are no keys.
        assert_eq!(typed(&[0xfa, 0xfe, 0x00, 0xee]), []);
    }

    #[test]
    fn any_bytes_are_safe() {
        let mut k = KeyboardInput::default();
        let mut m = Mouse::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x as u8;
            if let Some(e) = k.feed(b) {
                assert_eq!(Event::from_word(e.word()), Some(e));
            }
            assert!(m.feed(b).count() <= 4);
        }
    }

    #[test]
    fn mouse_packets() {
        let mut m = Mouse::default();
        // Left down, 5 right, 3 up (PS/2 +3 = screen -3).
        let e: Vec<_> = [0x09, 5, 3].iter().flat_map(|&b| m.feed(b)).collect();
        assert_eq!(
            e,
            [
                Event::Motion { dx: 5, dy: -3 },
                Event::Button {
                    button: BUTTON_LEFT,
                    pressed: true
                }
            ]
        );
        // Negative x (sign bit), left up.
        let e: Vec<_> = [0x18, 0xfe, 0].iter().flat_map(|&b| m.feed(b)).collect();
        assert_eq!(
            e,
            [
                Event::Motion { dx: -2, dy: 0 },
                Event::Button {
                    button: BUTTON_LEFT,
                    pressed: false
                }
            ]
        );
        // Out of step: a byte without bit 3 first is dropped.
        let e: Vec<_> = [0x00, 0x08, 1, 1].iter().flat_map(|&b| m.feed(b)).collect();
        assert_eq!(e, [Event::Motion { dx: 1, dy: -1 }]);
        // Overflow: no motion.
        let e: Vec<_> = [0x48, 200, 0].iter().flat_map(|&b| m.feed(b)).collect();
        assert_eq!(e, []);
    }
}
