//! Which devices a scenario assigns to a driver: a [`DeviceMatch`] parsed
//! from the config's string, tested against enumerated [`Device`]s.
//!
//! # Syntax
//!
//! ```text
//! match    = selector [ "@" bdf ]
//! selector = ids | class
//! ids      = hex4 ":" hex4                      vendor and device ID: 1af4:1042
//! class    = "class=" hex2 [ ":" hex2 [ ":" hex2 ] ]
//!                                               class [subclass [prog-if]]: class=01:00
//! bdf      = hex2 ":" hex2 "." hex1             bus:device.function: 00:03.0
//! ```
//!
//! Hexadecimal digits in either case, exact digit counts, no spaces:
//! `1af4:1042@00:03.0` is "the virtio-blk function at 00:03.0",
//! `class=03` "any display controller". A class match with fewer fields
//! matches any value of the missing ones. Every parse error names the
//! character, what was expected there and what was found
//! ([`ParseError`]); [`DeviceMatch`]'s `Display` writes the canonical
//! (lower-case) form back.

use core::fmt;
use core::str::FromStr;

use crate::config::Bdf;
use crate::enumerate::Device;
use crate::parse::{Cursor, ParseError};

/// What a match selects by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selector {
    /// Vendor and device ID.
    Ids { vendor: u16, device: u16 },
    /// Class code, optionally narrowed by subclass and programming
    /// interface (`prog_if` only with `subclass`).
    Class {
        class: u8,
        subclass: Option<u8>,
        prog_if: Option<u8>,
    },
}

/// A device selector, optionally narrowed to one function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMatch {
    pub selector: Selector,
    pub at: Option<Bdf>,
}

impl DeviceMatch {
    /// Whether `device` is selected.
    pub fn matches(&self, device: &Device) -> bool {
        if self.at.is_some_and(|at| at != device.bdf) {
            return false;
        }
        match self.selector {
            Selector::Ids { vendor, device: id } => device.vendor == vendor && device.device == id,
            Selector::Class {
                class,
                subclass,
                prog_if,
            } => {
                device.class.class == class
                    && subclass.is_none_or(|s| s == device.class.subclass)
                    && prog_if.is_none_or(|p| p == device.class.prog_if)
            }
        }
    }
}

const CLASS_PREFIX: &str = "class=";

impl FromStr for DeviceMatch {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<DeviceMatch, ParseError> {
        let mut cursor = Cursor::new(text);
        let selector = if cursor.eat_word("class") {
            cursor.expect('=', "'=' after \"class\"")?;
            parse_class(&mut cursor)?
        } else {
            let vendor = cursor.hex(4, "a four-digit hexadecimal vendor ID or \"class=\"")?;
            cursor.expect(':', "':' between vendor and device ID")?;
            let device = cursor.hex(4, "a four-digit hexadecimal device ID")?;
            // Four hex digits fit in 16 bits.
            Selector::Ids {
                vendor: vendor as u16,
                device: device as u16,
            }
        };
        let at = if cursor.eat('@') {
            Some(Bdf::parse_at(&mut cursor)?)
        } else {
            None
        };
        cursor.end(match (selector, at) {
            (_, Some(_)) => "the end after the function number",
            (Selector::Ids { .. }, None) => "'@' and a bus:device.function, or the end",
            (Selector::Class { prog_if: None, .. }, None) => {
                "':' and two more hexadecimal digits, '@', or the end"
            }
            (Selector::Class { .. }, None) => "'@' and a bus:device.function, or the end",
        })?;
        Ok(DeviceMatch { selector, at })
    }
}

/// Parses `CC[:SS[:PP]]` after `class=`.
fn parse_class(cursor: &mut Cursor<'_>) -> Result<Selector, ParseError> {
    // Two hex digits fit in 8 bits.
    let class = cursor.hex(2, "a two-digit hexadecimal class code")? as u8;
    let mut subclass = None;
    let mut prog_if = None;
    if cursor.eat(':') {
        subclass = Some(cursor.hex(2, "a two-digit hexadecimal subclass")? as u8);
        if cursor.eat(':') {
            prog_if = Some(cursor.hex(2, "a two-digit hexadecimal programming interface")? as u8);
        }
    }
    Ok(Selector::Class {
        class,
        subclass,
        prog_if,
    })
}

impl fmt::Display for DeviceMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.selector {
            Selector::Ids { vendor, device } => write!(f, "{vendor:04x}:{device:04x}")?,
            Selector::Class {
                class,
                subclass,
                prog_if,
            } => {
                write!(f, "{CLASS_PREFIX}{class:02x}")?;
                if let Some(s) = subclass {
                    write!(f, ":{s:02x}")?;
                    if let Some(p) = prog_if {
                        write!(f, ":{p:02x}")?;
                    }
                }
            }
        }
        if let Some(at) = self.at {
            write!(f, "@{at}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::Unexpected;
    use std::string::ToString;

    fn parse(text: &str) -> DeviceMatch {
        text.parse().unwrap()
    }

    fn error(text: &str) -> (usize, Unexpected, &'static str) {
        let e = text.parse::<DeviceMatch>().unwrap_err();
        (e.at, e.found, e.expected)
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(
            parse("1af4:1042"),
            DeviceMatch {
                selector: Selector::Ids {
                    vendor: 0x1af4,
                    device: 0x1042
                },
                at: None
            }
        );
        assert_eq!(
            parse("1AF4:1042@00:03.0").at,
            Some(Bdf::new(0, 3, 0).unwrap())
        );
        assert_eq!(
            parse("class=01:00").selector,
            Selector::Class {
                class: 1,
                subclass: Some(0),
                prog_if: None
            }
        );
        assert_eq!(
            parse("class=01:06:01@00:1f.2"),
            DeviceMatch {
                selector: Selector::Class {
                    class: 1,
                    subclass: Some(6),
                    prog_if: Some(1)
                },
                at: Some(Bdf::new(0, 0x1f, 2).unwrap())
            }
        );
        assert_eq!(
            parse("class=03").selector,
            Selector::Class {
                class: 3,
                subclass: None,
                prog_if: None
            }
        );
    }

    #[test]
    fn display_is_canonical_and_round_trips() {
        for text in [
            "1af4:1042",
            "1af4:1041@00:02.0",
            "class=03",
            "class=01:00",
            "class=01:06:01@00:1f.2",
        ] {
            assert_eq!(parse(text).to_string(), text);
        }
        assert_eq!(parse("1AF4:10A2@0A:1F.7").to_string(), "1af4:10a2@0a:1f.7");
    }

    #[test]
    fn errors_say_where_and_what() {
        assert_eq!(
            error("1af4"),
            (4, Unexpected::End, "':' between vendor and device ID")
        );
        assert_eq!(
            error("1af4-1042"),
            (4, Unexpected::Char('-'), "':' between vendor and device ID")
        );
        assert_eq!(
            error("1af:1042"),
            (
                3,
                Unexpected::Char(':'),
                "a four-digit hexadecimal vendor ID or \"class=\""
            )
        );
        assert_eq!(
            error("1af4:10g2"),
            (
                7,
                Unexpected::Char('g'),
                "a four-digit hexadecimal device ID"
            )
        );
        assert_eq!(
            error("1af4:10421"),
            (
                9,
                Unexpected::Char('1'),
                "'@' and a bus:device.function, or the end"
            )
        );
        assert_eq!(
            error("class01"),
            (5, Unexpected::Char('0'), "'=' after \"class\"")
        );
        assert_eq!(
            error("class=1"),
            (7, Unexpected::End, "a two-digit hexadecimal class code")
        );
        assert_eq!(
            error("class=01:0x"),
            (
                10,
                Unexpected::Char('x'),
                "a two-digit hexadecimal subclass"
            )
        );
        assert_eq!(
            error("class=01 "),
            (
                8,
                Unexpected::Char(' '),
                "':' and two more hexadecimal digits, '@', or the end"
            )
        );
        assert_eq!(
            error("class=01:00:01:02"),
            (
                14,
                Unexpected::Char(':'),
                "'@' and a bus:device.function, or the end"
            )
        );
        assert_eq!(
            error("1af4:1042@00:3.0"),
            (
                14,
                Unexpected::Char('.'),
                "a two-digit hexadecimal device number from 00 to 1f"
            )
        );
        assert_eq!(
            error("1af4:1042@00:03.0x"),
            (
                17,
                Unexpected::Char('x'),
                "the end after the function number"
            )
        );
        assert_eq!(
            error("1af4:1042@00:40.0"),
            (
                13,
                Unexpected::Value(0x40),
                "a two-digit hexadecimal device number from 00 to 1f"
            )
        );
        assert_eq!(
            error("vendor=1af4"),
            (
                0,
                Unexpected::Char('v'),
                "a four-digit hexadecimal vendor ID or \"class=\""
            )
        );
        assert_eq!(
            error(""),
            (
                0,
                Unexpected::End,
                "a four-digit hexadecimal vendor ID or \"class=\""
            )
        );
        let e = "1af4:1042@00:03.9".parse::<DeviceMatch>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "at character 17: expected a function number from 0 to 7, found 09"
        );
    }
}
