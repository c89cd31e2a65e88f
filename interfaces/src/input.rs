//! The Input session's protocol: opcodes, replies and [`Event`]s packed
//! into one word each (`rt::session::input` has the interface, the
//! client's side and the protocol's description). Key codes are Linux's
//! input codes (`KEY_A` = 30, `KEY_UP` = 103, ...): PS/2 scan code set 1
//! matches them for the main block, so the driver's table is short, and a
//! virtio-input device reports them as they are. Pure data, tested on
//! the host.

/// The session's notification (read-only), signalled when events wait.
pub const NOTIFIER: u64 = 1;
/// Up to [`EVENTS_PER_CALL`] waiting events, oldest first.
pub const EVENTS: u64 = 2;

/// The reply: done.
pub const OK: u64 = 0;
/// The reply to an unknown opcode.
pub const UNKNOWN: u64 = 0xe0;
/// The reply: no notification could be made.
pub const NO_RESOURCES: u64 = 0xe1;

/// Events one `EVENTS` reply carries (its four words; a word of 0 is
/// none, so fewer than four mean the queue is empty now).
pub const EVENTS_PER_CALL: usize = 4;

/// Mouse buttons, as the `code` of [`Event::Button`].
pub const BUTTON_LEFT: u16 = 0;
/// The right button.
pub const BUTTON_RIGHT: u16 = 1;
/// The middle button.
pub const BUTTON_MIDDLE: u16 = 2;

/// One input event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A key went down: its code and the character it types under the
    /// keymap with the modifiers held (`None`: no character).
    Press { code: u16, ch: Option<char> },
    /// A key went up.
    Release { code: u16 },
    /// The pointer moved by `dx`, `dy` (right and down positive).
    Motion { dx: i16, dy: i16 },
    /// A mouse button went down (`pressed`) or up.
    Button { button: u16, pressed: bool },
    /// The pointer is at `x`, `y` on a scale of 0..=[`ABS_MAX`] in each
    /// axis (a tablet's, e.g. QEMU's `virtio-tablet-pci`): the receiver
    /// scales it to its screen. Values above `ABS_MAX` are no event.
    Absolute { x: u16, y: u16 },
}

/// The largest coordinate of [`Event::Absolute`]: 2^15 - 1, a tablet's
/// own range in QEMU (`ABS_X`/`ABS_Y` 0..=32767).
pub const ABS_MAX: u16 = 0x7fff;

const KIND_PRESS: u64 = 1;
const KIND_RELEASE: u64 = 2;
const KIND_MOTION: u64 = 3;
const KIND_BUTTON_DOWN: u64 = 4;
const KIND_BUTTON_UP: u64 = 5;
const KIND_ABSOLUTE: u64 = 6;

impl Event {
    /// The event as one word: kind in bits 0..8, code in 8..24, value in
    /// 32..64. Never 0.
    pub fn word(self) -> u64 {
        let (kind, code, value): (u64, u16, u32) = match self {
            Event::Press { code, ch } => (KIND_PRESS, code, ch.map_or(0, u32::from)),
            Event::Release { code } => (KIND_RELEASE, code, 0),
            Event::Motion { dx, dy } => (
                KIND_MOTION,
                0,
                u32::from(dx as u16) | u32::from(dy as u16) << 16,
            ),
            Event::Button { button, pressed } => (
                if pressed {
                    KIND_BUTTON_DOWN
                } else {
                    KIND_BUTTON_UP
                },
                button,
                0,
            ),
            Event::Absolute { x, y } => (KIND_ABSOLUTE, 0, u32::from(x) | u32::from(y) << 16),
        };
        kind | u64::from(code) << 8 | u64::from(value) << 32
    }

    /// The event a word names; `None` for 0 and for words no event makes
    /// (a provider's nonsense is dropped, never trusted).
    pub fn from_word(w: u64) -> Option<Event> {
        let code = (w >> 8) as u16;
        let value = (w >> 32) as u32;
        if w & 0xff00_0000 != 0 {
            return None;
        }
        let no_code = code == 0;
        match w & 0xff {
            KIND_PRESS => Some(Event::Press {
                code,
                ch: match value {
                    0 => None,
                    v => Some(char::from_u32(v)?),
                },
            }),
            KIND_RELEASE if value == 0 => Some(Event::Release { code }),
            KIND_MOTION if no_code => Some(Event::Motion {
                dx: value as u16 as i16,
                dy: (value >> 16) as u16 as i16,
            }),
            KIND_BUTTON_DOWN | KIND_BUTTON_UP if value == 0 && code <= BUTTON_MIDDLE => {
                Some(Event::Button {
                    button: code,
                    pressed: w & 0xff == KIND_BUTTON_DOWN,
                })
            }
            KIND_ABSOLUTE if no_code => {
                let (x, y) = (value as u16, (value >> 16) as u16);
                (x <= ABS_MAX && y <= ABS_MAX).then_some(Event::Absolute { x, y })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip() {
        let all = [
            Event::Press {
                code: 30,
                ch: Some('a'),
            },
            Event::Press {
                code: 30,
                ch: Some('é'),
            },
            Event::Press { code: 42, ch: None },
            Event::Release { code: 103 },
            Event::Motion { dx: -5, dy: 300 },
            Event::Motion {
                dx: i16::MIN,
                dy: i16::MAX,
            },
            Event::Button {
                button: BUTTON_LEFT,
                pressed: true,
            },
            Event::Button {
                button: BUTTON_MIDDLE,
                pressed: false,
            },
            Event::Absolute { x: 0, y: 0 },
            Event::Absolute {
                x: ABS_MAX,
                y: 12345,
            },
        ];
        for e in all {
            assert_ne!(e.word(), 0);
            assert_eq!(Event::from_word(e.word()), Some(e), "{e:?}");
        }
    }

    #[test]
    fn nonsense_is_dropped() {
        assert_eq!(Event::from_word(0), None);
        assert_eq!(Event::from_word(9), None);
        // A surrogate is no character.
        assert_eq!(Event::from_word(KIND_PRESS | 30 << 8 | 0xd800 << 32), None);
        assert_eq!(Event::from_word(KIND_RELEASE | 30 << 8 | 1 << 32), None);
        assert_eq!(Event::from_word(KIND_MOTION | 1 << 8), None);
        assert_eq!(Event::from_word(KIND_BUTTON_DOWN | 7 << 8), None);
        // An absolute position has no code and stays in 0..=ABS_MAX.
        assert_eq!(Event::from_word(KIND_ABSOLUTE | 1 << 8), None);
        assert_eq!(Event::from_word(KIND_ABSOLUTE | 0x8000 << 32), None);
        assert_eq!(Event::from_word(KIND_ABSOLUTE | 0x8000 << 48), None);
        assert_eq!(
            Event::from_word(KIND_ABSOLUTE | 0x7fff_7fff << 32),
            Some(Event::Absolute {
                x: ABS_MAX,
                y: ABS_MAX
            })
        );
        // Bits 24..32 are never set.
        assert_eq!(Event::from_word(KIND_RELEASE | 30 << 8 | 1 << 24), None);
        // Every word decodes or is dropped, and what decodes encodes back.
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if let Some(e) = Event::from_word(x) {
                assert_eq!(Event::from_word(e.word()), Some(e));
            }
        }
    }
}
