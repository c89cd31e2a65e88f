//! GUIDs and partition names as GPT stores them.

use core::fmt;

/// A GUID in GPT's on-disk byte order: the first three fields
/// little-endian, the last two as written (UEFI 2.10, appendix A). Its
/// text form is the usual `EBD0A0A2-B9E5-4433-87C0-68B6B72699C7`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Guid(pub [u8; 16]);

/// Where each of the 16 on-disk bytes appears in the text form's 32
/// hex digits, in digit-pair order.
const TEXT_ORDER: [usize; 16] = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15];

impl Guid {
    /// "Microsoft basic data" (FAT, NTFS, exFAT data partitions).
    pub const BASIC_DATA: Guid = match Guid::parse("EBD0A0A2-B9E5-4433-87C0-68B6B72699C7") {
        Some(g) => g,
        None => Guid([0; 16]),
    };
    /// "Linux filesystem data".
    pub const LINUX_DATA: Guid = match Guid::parse("0FC63DAF-8483-4772-8E79-3D69D8477DE4") {
        Some(g) => g,
        None => Guid([0; 16]),
    };

    /// The GUID written as `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX` (either
    /// case), or `None`.
    pub const fn parse(text: &str) -> Option<Guid> {
        let t = text.as_bytes();
        if t.len() != 36 {
            return None;
        }
        let mut bytes = [0u8; 16];
        let mut pos = 0; // in `t`
        let mut pair = 0; // hex-digit pairs read
        while pair < 16 {
            if pos == 8 || pos == 13 || pos == 18 || pos == 23 {
                if t[pos] != b'-' {
                    return None;
                }
                pos += 1;
            }
            let (Some(hi), Some(lo)) = (hex(t[pos]), hex(t[pos + 1])) else {
                return None;
            };
            bytes[TEXT_ORDER[pair]] = (hi << 4) | lo;
            pos += 2;
            pair += 1;
        }
        Some(Guid(bytes))
    }

    /// Whether every byte is zero (an unused GPT entry's type).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
}

const fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (pair, &i) in TEXT_ORDER.iter().enumerate() {
            if matches!(pair, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{:02X}", self.0[i])?;
        }
        Ok(())
    }
}

/// A GPT partition name: 36 UTF-16LE code units, NUL-padded. Kept as
/// the units (so [`crate::Partition`] stays `Copy` without a heap);
/// [`fmt::Display`] decodes them, unpaired surrogates as U+FFFD.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct GptName(pub [u16; 36]);

impl GptName {
    /// The name of `text`, cut at 36 UTF-16 units (a character that
    /// would be split is left out).
    pub fn new(text: &str) -> GptName {
        let mut units = [0u16; 36];
        let mut n = 0;
        for c in text.chars() {
            let mut buf = [0u16; 2];
            let enc = c.encode_utf16(&mut buf);
            if n + enc.len() > units.len() {
                break;
            }
            units[n..n + enc.len()].copy_from_slice(enc);
            n += enc.len();
        }
        GptName(units)
    }

    /// The units up to the first NUL.
    pub fn units(&self) -> &[u16] {
        let end = self.0.iter().position(|&u| u == 0).unwrap_or(self.0.len());
        &self.0[..end]
    }

    /// The decoded characters.
    pub fn chars(&self) -> impl Iterator<Item = char> + '_ {
        char::decode_utf16(self.units().iter().copied())
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
    }
}

impl fmt::Display for GptName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        for c in self.chars() {
            f.write_char(c)?;
        }
        Ok(())
    }
}

impl fmt::Debug for GptName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GptName(\"{}\")", self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn guid_text_round_trip() {
        let g = Guid::BASIC_DATA;
        assert_eq!(
            g.0,
            [
                0xA2, 0xA0, 0xD0, 0xEB, 0xE5, 0xB9, 0x33, 0x44, 0x87, 0xC0, 0x68, 0xB6, 0xB7, 0x26,
                0x99, 0xC7
            ]
        );
        assert_eq!(g.to_string(), "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7");
        assert_eq!(
            Guid::parse("ebd0a0a2-b9e5-4433-87c0-68b6b72699c7"),
            Some(Guid::BASIC_DATA)
        );
        assert_eq!(Guid::parse("EBD0A0A2-B9E5-4433-87C0-68B6B72699C"), None);
        assert_eq!(Guid::parse("EBD0A0A2+B9E5-4433-87C0-68B6B72699C7"), None);
        assert_eq!(Guid::parse("XBD0A0A2-B9E5-4433-87C0-68B6B72699C7"), None);
        assert_eq!(Guid::parse("ÉBD0A0A2-B9E5-4433-87C0-68B6B72699C"), None);
    }

    #[test]
    fn names() {
        let n = GptName::new("data ü 😀");
        assert_eq!(n.to_string(), "data ü 😀");
        assert_eq!(n.units().len(), 9);
        let long = GptName::new(&"x".repeat(40));
        assert_eq!(long.units().len(), 36);
        // A surrogate pair that does not fit is left out whole.
        let cut = GptName::new(&("y".repeat(35) + "😀"));
        assert_eq!(cut.units().len(), 35);
        let mut bad = GptName::new("ab");
        bad.0[1] = 0xD800;
        assert_eq!(bad.to_string(), "a\u{FFFD}");
    }
}
