//! The escape-sequence parser: bytes in, [`Action`]s out.
//!
//! A state machine after Paul Williams' DEC/ANSI parser (the one
//! `vte` and most terminal emulators follow), cut down to what a terminal
//! for Pecan's components needs:
//!
//! - **Ground**: printable ASCII is [`Action::Print`]; UTF-8 sequences are
//!   decoded into one `Print` each, a malformed one is one
//!   `Print('\u{FFFD}')`; C0 controls (and DEL) are [`Action::Control`];
//!   ESC starts a sequence.
//! - **ESC [** starts a control sequence (CSI): up to [`MAX_PARAMS`]
//!   numeric parameters separated by `;` or `:`, each saturating at
//!   `u16::MAX`, an optional private marker (`<`, `=`, `>`, `?`) first,
//!   intermediates (`0x20..=0x2f`), then a final byte (`0x40..=0x7e`):
//!   [`Action::Csi`]. A sequence with a misplaced marker is swallowed to
//!   its final byte and dropped.
//! - **ESC ]**, **ESC P**, **ESC X**, **ESC ^**, **ESC _** start a string
//!   (OSC, DCS, ...) that is dropped up to BEL or ESC `\`.
//! - Any other escape sequence is dropped. CAN and SUB abort a sequence;
//!   ESC inside one starts a new one.
//!
//! **Invariants.** The parser's state is a fixed-size value: no input
//! allocates or grows it, parameters past [`MAX_PARAMS`] are dropped and
//! values saturate. Every byte is consumed by exactly one step, and no byte
//! sequence panics (host tests feed it random bytes). Whatever the state,
//! [`Parser::reset`] returns it to Ground.

/// The most parameters a control sequence keeps; more are dropped.
pub const MAX_PARAMS: usize = 16;

/// What the bytes said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action<'a> {
    /// A character to show.
    Print(char),
    /// A C0 control (`0x00..=0x1f`) or DEL (`0x7f`).
    Control(u8),
    /// A control sequence (`ESC [ ...`).
    Csi(&'a Csi),
}

/// A complete control sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Csi {
    params: [u16; MAX_PARAMS],
    len: usize,
    /// The private marker (`?` in `ESC [ ? 25 h`), if any.
    pub private: Option<u8>,
    /// Whether the sequence had intermediate bytes (none is supported).
    pub intermediate: bool,
    /// The final byte: what the sequence does (`m`, `H`, `J`, ...).
    pub final_byte: u8,
}

impl Csi {
    const EMPTY: Csi = Csi {
        params: [0; MAX_PARAMS],
        len: 0,
        private: None,
        intermediate: false,
        final_byte: 0,
    };

    /// The parameters as written; an empty one (`ESC [ ; 5 H`) is 0.
    pub fn params(&self) -> &[u16] {
        &self.params[..self.len]
    }

    /// Parameter `i`, or `default` when it is missing or 0 (the VT
    /// convention for counts and positions).
    pub fn param_or(&self, i: usize, default: u16) -> u16 {
        match self.params().get(i) {
            Some(&p) if p != 0 => p,
            _ => default,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ground,
    /// Inside a UTF-8 sequence: `need` more continuation bytes of `value`.
    Utf8 {
        need: u8,
        value: u32,
        min: u32,
    },
    Escape,
    EscapeIntermediate,
    /// In a CSI; `started` once a parameter byte was seen.
    Csi {
        started: bool,
    },
    CsiIgnore,
    /// In a string that is dropped; `esc` after its ESC.
    String {
        esc: bool,
    },
}

/// The parser; see the module doc.
#[derive(Clone, Debug)]
pub struct Parser {
    state: State,
    csi: Csi,
}

impl Default for Parser {
    fn default() -> Self {
        Self::new()
    }
}

const ESC: u8 = 0x1b;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;
const BEL: u8 = 0x07;
const REPLACEMENT: char = '\u{FFFD}';

impl Parser {
    /// A parser in Ground.
    pub const fn new() -> Self {
        Parser {
            state: State::Ground,
            csi: Csi::EMPTY,
        }
    }

    /// Back to Ground, whatever was half-parsed dropped.
    pub fn reset(&mut self) {
        self.state = State::Ground;
    }

    /// Whether the parser is in Ground (no sequence half-parsed).
    pub fn is_ground(&self) -> bool {
        self.state == State::Ground
    }

    /// Feeds `bytes`, calling `act` for each action.
    pub fn feed(&mut self, bytes: &[u8], mut act: impl FnMut(Action<'_>)) {
        for &b in bytes {
            self.advance(b, &mut act);
        }
    }

    /// Feeds one byte.
    pub fn advance(&mut self, byte: u8, act: &mut impl FnMut(Action<'_>)) {
        match self.state {
            State::Ground => self.ground(byte, act),
            State::Utf8 { need, value, min } => {
                if byte & 0xc0 == 0x80 {
                    let value = value << 6 | u32::from(byte & 0x3f);
                    if need > 1 {
                        self.state = State::Utf8 {
                            need: need - 1,
                            value,
                            min,
                        };
                    } else {
                        self.state = State::Ground;
                        let c = (value >= min)
                            .then(|| char::from_u32(value))
                            .flatten()
                            .unwrap_or(REPLACEMENT);
                        act(Action::Print(c));
                    }
                } else {
                    // Cut short: the sequence is one replacement, the byte
                    // starts afresh.
                    self.state = State::Ground;
                    act(Action::Print(REPLACEMENT));
                    self.ground(byte, act);
                }
            }
            State::Escape => match byte {
                b'[' => {
                    self.csi = Csi::EMPTY;
                    self.state = State::Csi { started: false };
                }
                b']' | b'P' | b'X' | b'^' | b'_' => self.state = State::String { esc: false },
                0x20..=0x2f => self.state = State::EscapeIntermediate,
                ESC => {}
                CAN | SUB => self.state = State::Ground,
                0x00..=0x1f => act(Action::Control(byte)),
                // Any other final byte ends a sequence nothing here does.
                _ => self.state = State::Ground,
            },
            State::EscapeIntermediate => match byte {
                0x20..=0x2f => {}
                ESC => self.state = State::Escape,
                0x00..=0x1f if byte != CAN && byte != SUB => act(Action::Control(byte)),
                _ => self.state = State::Ground,
            },
            State::Csi { started } => self.csi(byte, started, act),
            State::CsiIgnore => match byte {
                0x40..=0x7e | CAN | SUB => self.state = State::Ground,
                ESC => self.state = State::Escape,
                0x00..=0x1f => act(Action::Control(byte)),
                _ => {}
            },
            State::String { esc } => match byte {
                BEL | CAN | SUB => self.state = State::Ground,
                b'\\' if esc => self.state = State::Ground,
                ESC => self.state = State::String { esc: true },
                _ => self.state = State::String { esc: false },
            },
        }
    }

    fn ground(&mut self, byte: u8, act: &mut impl FnMut(Action<'_>)) {
        match byte {
            ESC => self.state = State::Escape,
            0x00..=0x1f | 0x7f => act(Action::Control(byte)),
            0x20..=0x7e => act(Action::Print(char::from(byte))),
            0xc2..=0xdf => {
                self.state = State::Utf8 {
                    need: 1,
                    value: u32::from(byte & 0x1f),
                    min: 0x80,
                }
            }
            0xe0..=0xef => {
                self.state = State::Utf8 {
                    need: 2,
                    value: u32::from(byte & 0x0f),
                    min: 0x800,
                }
            }
            0xf0..=0xf4 => {
                self.state = State::Utf8 {
                    need: 3,
                    value: u32::from(byte & 0x07),
                    min: 0x1_0000,
                }
            }
            // A stray continuation byte, an overlong lead, or past U+10FFFF.
            _ => act(Action::Print(REPLACEMENT)),
        }
    }

    fn csi(&mut self, byte: u8, started: bool, act: &mut impl FnMut(Action<'_>)) {
        let csi = &mut self.csi;
        match byte {
            b'0'..=b'9' => {
                if csi.len == 0 {
                    csi.len = 1;
                }
                if csi.len <= MAX_PARAMS {
                    let p = &mut csi.params[csi.len - 1];
                    *p = p.saturating_mul(10).saturating_add(u16::from(byte - b'0'));
                }
                self.state = State::Csi { started: true };
            }
            b';' | b':' => {
                // The first separator closes an implicit empty parameter.
                if csi.len == 0 {
                    csi.len = 1;
                }
                if csi.len < MAX_PARAMS {
                    csi.len += 1;
                } else {
                    // Past the last kept parameter: the rest is dropped.
                    csi.len = MAX_PARAMS + 1;
                }
                self.state = State::Csi { started: true };
            }
            0x3c..=0x3f => {
                if started || csi.private.is_some() {
                    self.state = State::CsiIgnore;
                } else {
                    csi.private = Some(byte);
                }
            }
            0x20..=0x2f => {
                csi.intermediate = true;
                self.state = State::Csi { started: true };
            }
            0x40..=0x7e => {
                csi.final_byte = byte;
                csi.len = csi.len.min(MAX_PARAMS);
                self.state = State::Ground;
                act(Action::Csi(&self.csi));
            }
            ESC => self.state = State::Escape,
            CAN | SUB => self.state = State::Ground,
            0x00..=0x1f => act(Action::Control(byte)),
            // DEL is ignored; bytes >= 0x80 end the sequence, dropped.
            0x7f => {}
            _ => self.state = State::Ground,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::String;
    use alloc::vec::Vec;

    /// The actions for `bytes`, as text: `p` prints, `^` controls,
    /// `[params;final]` sequences.
    fn run(bytes: &[u8]) -> String {
        let mut p = Parser::new();
        let mut out = String::new();
        p.feed(bytes, |a| match a {
            Action::Print(c) => out.push(c),
            Action::Control(b) => out.push_str(&format!("^{b:02x}")),
            Action::Csi(c) => out.push_str(&format!(
                "[{}{:?}{}{}]",
                c.private.map(char::from).unwrap_or(' '),
                c.params(),
                if c.intermediate { "!" } else { "" },
                char::from(c.final_byte)
            )),
        });
        out
    }

    #[test]
    fn plain_text_and_controls() {
        assert_eq!(run(b"ab\r\n\tc\x08"), "ab^0d^0a^09c^08");
        assert_eq!(run(b"\x7f"), "^7f");
    }

    #[test]
    fn utf8() {
        assert_eq!(run("é€😀".as_bytes()), "é€😀");
        // A lead byte cut short by ASCII: one replacement, then the ASCII.
        assert_eq!(run(b"\xc3a"), "\u{FFFD}a");
        // Stray continuation, invalid leads, overlong, surrogate.
        assert_eq!(run(b"\x80\xc0\xff"), "\u{FFFD}\u{FFFD}\u{FFFD}");
        assert_eq!(run(b"\xe0\x80\x80"), "\u{FFFD}");
        assert_eq!(run(b"\xed\xa0\x80"), "\u{FFFD}");
    }

    #[test]
    fn control_sequences() {
        assert_eq!(run(b"\x1b[m"), "[ []m]");
        assert_eq!(run(b"\x1b[1;31mX"), "[ [1, 31]m]X");
        assert_eq!(run(b"\x1b[;5H"), "[ [0, 5]H]");
        assert_eq!(run(b"\x1b[?25h"), "[?[25]h]");
        assert_eq!(run(b"\x1b[1 q"), "[ [1]!q]");
        // Saturating values, dropped extra parameters.
        assert_eq!(run(b"\x1b[99999999m"), "[ [65535]m]");
        let many = b"\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18m";
        assert_eq!(
            run(many),
            "[ [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]m]"
        );
        // A misplaced marker: swallowed to the final byte.
        assert_eq!(run(b"\x1b[1?2mZ"), "Z");
        // Controls inside a sequence are executed.
        assert_eq!(run(b"\x1b[3\n1m"), "^0a[ [31]m]");
    }

    #[test]
    fn dropped_sequences() {
        assert_eq!(run(b"\x1b]0;title\x07A"), "A");
        assert_eq!(run(b"\x1b]0;title\x1b\\A"), "A");
        assert_eq!(run(b"\x1bPdata\x1b\\B"), "B");
        assert_eq!(run(b"\x1b(BC"), "C");
        assert_eq!(run(b"\x1b7D"), "D");
        assert_eq!(run(b"\x1b[12\x18E"), "E");
        assert_eq!(run(b"\x1b[12\x1b[1mF"), "[ [1]m]F");
        assert_eq!(run(b"\x1b[1\xc3G"), "G");
    }

    #[test]
    fn reset_returns_to_ground() {
        let mut p = Parser::new();
        p.feed(b"\x1b]unterminated", |_| {});
        assert!(!p.is_ground());
        p.reset();
        assert!(p.is_ground());
        let mut printed = Vec::new();
        p.feed(b"ok", |a| {
            if let Action::Print(c) = a {
                printed.push(c)
            }
        });
        assert_eq!(printed, ['o', 'k']);
    }
}
