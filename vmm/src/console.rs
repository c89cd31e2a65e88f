//! A guest console's bytes as lines of printable text: what the VMM
//! prints (`[vm1] text`) and hands to a terminal from the serial port and
//! from virtio-console. A terminal's line is whole or nothing, so the
//! guest's cursor movement is taken out here: CR is dropped, backspace
//! takes back a character (a shell's line editing echoes it), escape
//! sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL`/`ESC \`, and
//! two-byte `ESC x`) and other control bytes are dropped, a tab stays.
//! A line longer than [`MAX_LINE`] bytes is cut into lines of that size.
//!
//! Bounded: a line holds at most [`MAX_LINE`] bytes, an escape sequence
//! never accumulates (its bytes are skipped as they come), so no output
//! grows the VMM's memory beyond a line.

use alloc::string::String;
use alloc::vec::Vec;

/// The longest line kept; a longer one is split.
pub const MAX_LINE: usize = 240;

/// Where the collector is in an escape sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    /// After ESC.
    Start,
    /// In a CSI sequence: parameters until a final byte 0x40..=0x7e.
    Csi,
    /// In an OSC string: until BEL or ESC \.
    Osc,
    /// ESC inside an OSC string (the `\` of its end should follow).
    OscEsc,
}

/// The line being collected.
#[derive(Debug, Default)]
pub struct Lines {
    line: Vec<u8>,
    /// How much of `line` went out already as a part ([`Lines::take_partial`]).
    sent: usize,
    escape: Escape,
}

impl Lines {
    pub fn new() -> Lines {
        Lines::default()
    }

    /// Feeds `bytes`; each line they complete goes to `done` with how many
    /// of its bytes went out already as a part.
    pub fn feed(&mut self, bytes: &[u8], done: &mut dyn FnMut(&str, usize)) {
        for &b in bytes {
            match self.escape {
                Escape::Start => {
                    self.escape = match b {
                        b'[' => Escape::Csi,
                        b']' => Escape::Osc,
                        _ => Escape::None,
                    };
                    continue;
                }
                Escape::Csi => {
                    if (0x40..=0x7e).contains(&b) {
                        self.escape = Escape::None;
                    }
                    continue;
                }
                Escape::Osc => {
                    match b {
                        0x07 => self.escape = Escape::None,
                        0x1b => self.escape = Escape::OscEsc,
                        _ => {}
                    }
                    continue;
                }
                Escape::OscEsc => {
                    self.escape = if b == b'\\' {
                        Escape::None
                    } else {
                        Escape::Osc
                    };
                    continue;
                }
                Escape::None => {}
            }
            match b {
                b'\n' => self.emit(done),
                0x1b => self.escape = Escape::Start,
                0x08 => {
                    self.line.pop();
                    // A part sent cannot be taken back: the line's end is
                    // what comes after it (an edge: a prompt is not edited).
                    self.sent = self.sent.min(self.line.len());
                }
                0x20..=0x7e | b'\t' => {
                    self.line.push(b);
                    if self.line.len() >= MAX_LINE {
                        self.emit(done);
                    }
                }
                // CR, other control bytes, and bytes beyond ASCII (the
                // terminal and the log are ASCII here; a UTF-8 sequence
                // would need its whole character): dropped.
                _ => {}
            }
        }
    }

    /// The bytes of the line collected so far that did not go out yet,
    /// marked as gone out: a prompt, which waits for what is typed
    /// without its line's end. `None` if there are none.
    pub fn take_partial(&mut self) -> Option<&str> {
        if self.sent >= self.line.len() {
            return None;
        }
        let from = core::mem::replace(&mut self.sent, self.line.len());
        // Only printable ASCII and tabs are ever pushed.
        core::str::from_utf8(&self.line[from..]).ok()
    }

    /// The part of a line collected so far, as a line of its own (at the
    /// end, when nothing more comes); nothing if it is empty.
    pub fn finish(&mut self, done: &mut dyn FnMut(&str, usize)) {
        if !self.line.is_empty() {
            self.emit(done);
        }
        self.escape = Escape::None;
    }

    fn emit(&mut self, done: &mut dyn FnMut(&str, usize)) {
        // Only printable ASCII and tabs are ever pushed.
        let text = String::from_utf8_lossy(&self.line);
        done(&text, self.sent);
        self.line.clear();
        self.sent = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    fn lines(input: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        let mut l = Lines::new();
        l.feed(input, &mut |s, _| out.push(s.to_string()));
        l.finish(&mut |s, _| out.push(s.to_string()));
        out
    }

    #[test]
    fn plain_lines_without_cr() {
        assert_eq!(lines(b"a\r\nb\n\nc"), vec!["a", "b", "", "c"]);
    }

    #[test]
    fn escape_sequences_are_dropped() {
        assert_eq!(
            lines(b"\x1b[6n~ # \x1b[1;32mls\x1b[0m\x1b]0;title\x07 x\x1b]2;t\x1b\\y\x1b7z\n"),
            vec!["~ # ls xyz"]
        );
    }

    #[test]
    fn backspace_takes_back() {
        assert_eq!(lines(b"lx\x08 \x08s\n"), vec!["ls"]);
        assert_eq!(lines(b"\x08\x08a\n"), vec!["a"], "nothing to take back");
    }

    #[test]
    fn long_lines_are_split_and_bytes_beyond_ascii_dropped() {
        let long = [b'x'; MAX_LINE + 5];
        let got = lines(&long);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), MAX_LINE);
        assert_eq!(got[1].len(), 5);
        assert_eq!(lines("é\tok\n".as_bytes()), vec!["\tok"]);
    }

    #[test]
    fn a_sequence_split_over_feeds() {
        let mut out = Vec::new();
        let mut l = Lines::new();
        l.feed(b"a\x1b[", &mut |s, _| out.push(s.to_string()));
        l.feed(b"31mb\n", &mut |s, _| out.push(s.to_string()));
        assert_eq!(out, vec!["ab"]);
    }

    #[test]
    fn a_prompt_goes_out_before_its_line_ends() {
        let mut out = Vec::new();
        let mut l = Lines::new();
        l.feed(b"vm1:/# ", &mut |s, n| out.push((s.to_string(), n)));
        assert_eq!(l.take_partial(), Some("vm1:/# "));
        assert_eq!(l.take_partial(), None, "once");
        l.feed(b"ls\r\n", &mut |s, n| out.push((s.to_string(), n)));
        assert_eq!(out, vec![("vm1:/# ls".to_string(), 7)]);
        assert_eq!(l.take_partial(), None);
        l.feed(b"ab", &mut |_, _| {});
        assert_eq!(l.take_partial(), Some("ab"));
        l.feed(b"\x08\x08\x08c\n", &mut |s, n| out.push((s.to_string(), n)));
        assert_eq!(
            out[1],
            ("c".to_string(), 0),
            "taken back below what went out"
        );
    }
}
