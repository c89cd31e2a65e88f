//! A tablet's reports as Linux input events (what a virtio-input device
//! puts into its event queue, virtio 1.2, 5.8.6: `type`, `code`, `value`)
//! to [`Event`]s: `EV_ABS` `ABS_X`/`ABS_Y` positions scaled from the
//! device's range (its config's `ABS_INFO`) to `0..=ABS_MAX`, `EV_KEY`
//! `BTN_LEFT`/`BTN_RIGHT`/`BTN_MIDDLE` to buttons, and `EV_SYN`
//! `SYN_REPORT` ending each report. The driver
//! (`components/drivers/virtio-input`) feeds each event it takes from the
//! device.
//!
//! A report yields at most one [`Event::Absolute`] (its last position,
//! when it moved) followed by its buttons' changes, in that order — a
//! click reported with a motion lands where the pointer went. A device's
//! nonsense (unknown types and codes, values beyond its range, key
//! values other than 0 and 1) is dropped or clamped; `SYN_DROPPED` drops
//! the report being gathered. Nothing here panics on any input, and the
//! state is bounded.

use interfaces::input::{Event, ABS_MAX, BUTTON_LEFT, BUTTON_MIDDLE, BUTTON_RIGHT};

/// Linux's event types and codes this module knows.
pub const EV_SYN: u16 = 0;
pub const EV_KEY: u16 = 1;
pub const EV_ABS: u16 = 3;
pub const SYN_REPORT: u16 = 0;
pub const SYN_DROPPED: u16 = 3;
pub const ABS_X: u16 = 0;
pub const ABS_Y: u16 = 1;
pub const BTN_LEFT: u16 = 0x110;
pub const BTN_RIGHT: u16 = 0x111;
pub const BTN_MIDDLE: u16 = 0x112;

/// The events one report yields, at most.
pub const PER_REPORT: usize = 4;

/// The decoder's state: the device's ranges, the position and the report
/// being gathered.
#[derive(Clone, Debug)]
pub struct Tablet {
    /// Each axis's `(min, max)`, `min < max`.
    range: [(i32, i32); 2],
    /// The position on the `0..=ABS_MAX` scale.
    at: [u16; 2],
    moved: bool,
    /// Buttons pressed (`Some(true)`) or released in this report, by
    /// `BUTTON_*`.
    buttons: [Option<bool>; 3],
}

impl Tablet {
    /// A decoder for a device whose axes span `x` and `y` (`(min, max)`
    /// from its `ABS_INFO`); an empty or reversed range is taken as
    /// QEMU's `0..=32767`.
    pub fn new(x: (i32, i32), y: (i32, i32)) -> Tablet {
        let sane = |(lo, hi): (i32, i32)| {
            if lo < hi {
                (lo, hi)
            } else {
                (0, i32::from(ABS_MAX))
            }
        };
        Tablet {
            range: [sane(x), sane(y)],
            at: [0; 2],
            moved: false,
            buttons: [None; 3],
        }
    }

    /// Feeds one event of the device; at the end of a report, what it
    /// yields (otherwise nothing).
    pub fn feed(&mut self, kind: u16, code: u16, value: u32) -> impl Iterator<Item = Event> {
        let mut out = [None; PER_REPORT];
        match (kind, code) {
            (EV_ABS, ABS_X | ABS_Y) => {
                let axis = usize::from(code);
                let (lo, hi) = self.range[axis];
                // The wire's value is a signed 32-bit number.
                let v = (value as i32).clamp(lo, hi);
                let scaled = (i64::from(v) - i64::from(lo)) * i64::from(ABS_MAX)
                    / (i64::from(hi) - i64::from(lo));
                self.at[axis] = scaled as u16;
                self.moved = true;
            }
            (EV_KEY, BTN_LEFT | BTN_RIGHT | BTN_MIDDLE) if value <= 1 => {
                let button = match code {
                    BTN_LEFT => BUTTON_LEFT,
                    BTN_RIGHT => BUTTON_RIGHT,
                    _ => BUTTON_MIDDLE,
                };
                self.buttons[usize::from(button)] = Some(value == 1);
            }
            (EV_SYN, SYN_REPORT) => {
                let mut n = 0;
                if core::mem::take(&mut self.moved) {
                    out[0] = Some(Event::Absolute {
                        x: self.at[0],
                        y: self.at[1],
                    });
                    n = 1;
                }
                for (button, state) in self.buttons.iter_mut().enumerate() {
                    if let Some(pressed) = state.take() {
                        out[n] = Some(Event::Button {
                            button: button as u16,
                            pressed,
                        });
                        n += 1;
                    }
                }
            }
            (EV_SYN, SYN_DROPPED) => {
                // Events were lost: what this report holds is not whole.
                self.moved = false;
                self.buttons = [None; 3];
            }
            _ => {}
        }
        out.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn feed(t: &mut Tablet, events: &[(u16, u16, u32)]) -> Vec<Event> {
        events
            .iter()
            .flat_map(|&(k, c, v)| t.feed(k, c, v).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn a_report_yields_its_position_then_its_buttons() {
        let mut t = Tablet::new((0, 32767), (0, 32767));
        let got = feed(
            &mut t,
            &[
                (EV_KEY, BTN_LEFT, 1),
                (EV_ABS, ABS_X, 16384),
                (EV_ABS, ABS_Y, 100),
                (EV_ABS, ABS_X, 8192),
                (EV_SYN, SYN_REPORT, 0),
            ],
        );
        assert_eq!(
            got,
            [
                Event::Absolute { x: 8192, y: 100 },
                Event::Button {
                    button: BUTTON_LEFT,
                    pressed: true
                }
            ]
        );
        // Only the buttons: no position.
        let got = feed(
            &mut t,
            &[
                (EV_KEY, BTN_LEFT, 0),
                (EV_KEY, BTN_MIDDLE, 1),
                (EV_SYN, SYN_REPORT, 0),
            ],
        );
        assert_eq!(
            got,
            [
                Event::Button {
                    button: BUTTON_LEFT,
                    pressed: false
                },
                Event::Button {
                    button: BUTTON_MIDDLE,
                    pressed: true
                }
            ]
        );
        // One axis moved: the other keeps its place.
        let got = feed(&mut t, &[(EV_ABS, ABS_Y, 32767), (EV_SYN, SYN_REPORT, 0)]);
        assert_eq!(
            got,
            [Event::Absolute {
                x: 8192,
                y: ABS_MAX
            }]
        );
        assert_eq!(feed(&mut t, &[(EV_SYN, SYN_REPORT, 0)]), []);
    }

    #[test]
    fn another_range_is_scaled_and_clamped() {
        let mut t = Tablet::new((-100, 100), (0, 1000));
        let got = feed(
            &mut t,
            &[
                (EV_ABS, ABS_X, 0),
                (EV_ABS, ABS_Y, 1000),
                (EV_SYN, SYN_REPORT, 0),
            ],
        );
        assert_eq!(
            got,
            [Event::Absolute {
                x: 16383,
                y: ABS_MAX
            }]
        );
        let got = feed(
            &mut t,
            &[
                (EV_ABS, ABS_X, (-5000i32) as u32),
                (EV_ABS, ABS_Y, u32::MAX / 2),
                (EV_SYN, SYN_REPORT, 0),
            ],
        );
        assert_eq!(got, [Event::Absolute { x: 0, y: ABS_MAX }]);
        // A reversed range is QEMU's.
        let mut t = Tablet::new((5, 5), (9, -9));
        let got = feed(&mut t, &[(EV_ABS, ABS_X, 40000), (EV_SYN, SYN_REPORT, 0)]);
        assert_eq!(got, [Event::Absolute { x: ABS_MAX, y: 0 }]);
    }

    #[test]
    fn nonsense_is_dropped() {
        let mut t = Tablet::new((0, 32767), (0, 32767));
        let got = feed(
            &mut t,
            &[
                (EV_KEY, BTN_LEFT, 2),
                (EV_KEY, 30, 1),
                (EV_ABS, 7, 5),
                (9, 0, 1),
                (EV_SYN, 1, 0),
                (EV_SYN, SYN_REPORT, 0),
            ],
        );
        assert_eq!(got, []);
        // SYN_DROPPED forgets the report being gathered.
        let got = feed(
            &mut t,
            &[
                (EV_ABS, ABS_X, 5),
                (EV_KEY, BTN_RIGHT, 1),
                (EV_SYN, SYN_DROPPED, 0),
                (EV_SYN, SYN_REPORT, 0),
            ],
        );
        assert_eq!(got, []);
        // Random events: every position in range, every event a word.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let kind = (x & 3) as u16;
            let code = match (x >> 2) & 3 {
                0 => (x >> 8) as u16 & 1,
                1 => BTN_LEFT + ((x >> 8) as u16 & 3),
                2 => (x >> 8) as u16 & 3,
                _ => (x >> 8) as u16,
            };
            for e in t.feed(kind, code, (x >> 32) as u32) {
                assert_eq!(Event::from_word(e.word()), Some(e));
            }
        }
    }
}
