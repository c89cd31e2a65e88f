//! The small text parser behind [`Bdf`](crate::Bdf)'s and
//! [`DeviceMatch`](crate::matching::DeviceMatch)'s `FromStr`: a cursor
//! over the input that reports every error as the character position,
//! what was expected there and what was found.
//!
//! Invariant: the cursor only ever steps over ASCII characters (every
//! accepted character is ASCII), so its byte position is also the
//! character position an error reports.

use core::fmt;

/// A syntax error: at which character (0-based), what was expected there
/// and what was found instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Position of the offending character, counted from 0.
    pub at: usize,
    /// What would have been accepted there, in words.
    pub expected: &'static str,
    /// What was there instead.
    pub found: Unexpected,
}

/// What a [`ParseError`] found where it expected something else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unexpected {
    /// This character.
    Char(char),
    /// The end of the input.
    End,
    /// A well-formed number that is out of range (shown in hex).
    Value(u32),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Humans count characters from 1.
        write!(
            f,
            "at character {}: expected {}, found ",
            self.at + 1,
            self.expected
        )?;
        match self.found {
            Unexpected::Char(c) => write!(f, "{c:?}"),
            Unexpected::End => write!(f, "the end"),
            Unexpected::Value(v) => write!(f, "{v:02x}"),
        }
    }
}

/// A position in the input being parsed.
pub(crate) struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Cursor { text, pos: 0 }
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    /// An error at the current position.
    pub(crate) fn error(&self, expected: &'static str) -> ParseError {
        ParseError {
            at: self.pos,
            expected,
            found: self.peek().map_or(Unexpected::End, Unexpected::Char),
        }
    }

    /// Steps over `c` if it comes next.
    pub(crate) fn eat(&mut self, c: char) -> bool {
        debug_assert!(c.is_ascii());
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Steps over `word` if it comes next.
    pub(crate) fn eat_word(&mut self, word: &str) -> bool {
        debug_assert!(word.is_ascii());
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    /// Requires `c` next.
    pub(crate) fn expect(&mut self, c: char, expected: &'static str) -> Result<(), ParseError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(expected))
        }
    }

    /// Requires exactly `digits` hexadecimal digits (either case) next.
    pub(crate) fn hex(&mut self, digits: usize, expected: &'static str) -> Result<u32, ParseError> {
        debug_assert!(digits <= 8);
        let mut value = 0u32;
        for _ in 0..digits {
            match self.peek().and_then(|c| c.to_digit(16)) {
                Some(d) => {
                    value = value << 4 | d;
                    self.pos += 1;
                }
                None => return Err(self.error(expected)),
            }
        }
        Ok(value)
    }

    /// Requires `digits` hexadecimal digits next whose value is below
    /// `limit`; a well-formed number out of range is reported at its first
    /// digit.
    pub(crate) fn hex_below(
        &mut self,
        digits: usize,
        limit: u32,
        expected: &'static str,
    ) -> Result<u32, ParseError> {
        let at = self.pos;
        let value = self.hex(digits, expected)?;
        if value >= limit {
            return Err(ParseError {
                at,
                expected,
                found: Unexpected::Value(value),
            });
        }
        Ok(value)
    }

    /// Requires the end of the input.
    pub(crate) fn end(&self, expected: &'static str) -> Result<(), ParseError> {
        if self.pos == self.text.len() {
            Ok(())
        } else {
            Err(self.error(expected))
        }
    }
}
