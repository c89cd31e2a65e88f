//! Names: which ones FAT can store, case-insensitive comparison, 8.3
//! short names (exact, or generated with a `~N` tail) and the LFN
//! checksum that ties long-name entries to their short entry.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::FsError;

/// The most UTF-16 units of a long name.
pub const MAX_LFN_UNITS: usize = 255;

/// A short name as stored: 8 bytes of base, 3 of extension, space padded.
pub type ShortName = [u8; 11];

/// Checks a new name; its UTF-16 units for the LFN entries.
pub fn validate(name: &str) -> Result<Vec<u16>, FsError> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(FsError::InvalidName);
    }
    // Windows strips trailing dots and spaces; storing them would make
    // names other systems cannot open.
    if name.ends_with('.') || name.ends_with(' ') {
        return Err(FsError::InvalidName);
    }
    if name
        .chars()
        .any(|c| c < ' ' || matches!(c, '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|'))
    {
        return Err(FsError::InvalidName);
    }
    let units: Vec<u16> = name.encode_utf16().collect();
    if units.len() > MAX_LFN_UNITS {
        return Err(FsError::InvalidName);
    }
    Ok(units)
}

/// Whether two names are the same file's: equal after upper-casing each
/// character (Unicode simple and full mappings from `core`).
pub fn same(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_uppercase)
        .eq(b.chars().flat_map(char::to_uppercase))
}

/// Bytes a short name may hold besides letters and digits (letters upper
/// case only).
fn short_char(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit() || b"!#$%&'()-@^_`{}~".contains(&c)
}

/// `name` as a short name if it is one exactly: an upper-case 8.3 name of
/// allowed characters. Such names need no LFN entries.
pub fn exact_short(name: &str) -> Option<ShortName> {
    let (base, ext) = match name.rfind('.') {
        Some(i) => (&name[..i], &name[i + 1..]),
        None => (name, ""),
    };
    let ok = |s: &str, max: usize| s.len() <= max && s.bytes().all(short_char);
    if base.is_empty() || !ok(base, 8) || !ok(ext, 3) || (ext.is_empty() && name.contains('.')) {
        return None;
    }
    let mut out = [b' '; 11];
    out[..base.len()].copy_from_slice(base.as_bytes());
    out[8..8 + ext.len()].copy_from_slice(ext.as_bytes());
    Some(out)
}

/// The basis of a generated short name: base (up to 8 bytes) and
/// extension (up to 3), upper-cased, spaces and leading dots dropped,
/// everything a short name cannot hold as `_`.
pub fn basis(name: &str) -> (Vec<u8>, Vec<u8>) {
    let trimmed = name.trim_start_matches('.');
    let (base, ext) = match trimmed.rfind('.') {
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (trimmed, ""),
    };
    let conv = |s: &str, max: usize| -> Vec<u8> {
        s.chars()
            .filter(|&c| c != ' ' && c != '.')
            .map(|c| {
                let u = c.to_ascii_uppercase();
                if u.is_ascii() && short_char(u as u8) {
                    u as u8
                } else {
                    b'_'
                }
            })
            .take(max)
            .collect()
    };
    let mut b = conv(base, 8);
    if b.is_empty() {
        b.push(b'_');
    }
    (b, conv(ext, 3))
}

/// The short name `BASE~N.EXT` for tail `n` (1 to 999999).
pub fn with_tail(base: &[u8], ext: &[u8], n: u32) -> ShortName {
    let mut digits = [0u8; 8];
    let mut len = 0;
    let mut v = n;
    loop {
        digits[len] = b'0' + (v % 10) as u8;
        len += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let keep = base.len().min(8 - 1 - len);
    let mut out = [b' '; 11];
    out[..keep].copy_from_slice(&base[..keep]);
    out[keep] = b'~';
    for i in 0..len {
        out[keep + 1 + i] = digits[len - 1 - i];
    }
    out[8..8 + ext.len()].copy_from_slice(ext);
    out
}

/// The LFN checksum of a short name (rotate right, add).
pub fn checksum(s: &ShortName) -> u8 {
    s.iter()
        .fold(0u8, |sum, &b| sum.rotate_right(1).wrapping_add(b))
}

/// Byte 12's case flags (Windows NT): base, extension stored upper but
/// shown lower case.
const LOWER_BASE: u8 = 0x08;
const LOWER_EXT: u8 = 0x10;

/// How a short name reads: `BASE.EXT` without padding, a leading 0x05 as
/// 0xE5, bytes above 0x7F as Latin-1, the case flags applied.
pub fn display(s: &ShortName, case: u8) -> String {
    let mut out = String::new();
    let part = |out: &mut String, bytes: &[u8], lower: bool| {
        let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
        for (i, &b) in bytes[..end].iter().enumerate() {
            let b = if i == 0 && b == 0x05 { 0xE5 } else { b };
            let c = char::from(b);
            out.push(if lower { c.to_ascii_lowercase() } else { c });
        }
    };
    part(&mut out, &s[..8], case & LOWER_BASE != 0);
    if s[8..].iter().any(|&b| b != b' ') {
        out.push('.');
        part(&mut out, &s[8..], case & LOWER_EXT != 0);
    }
    out
}

/// An ASCII short name as it reads (`BASE.EXT`, no case flags), without
/// allocating: the bytes and their count.
pub fn display_ascii(s: &ShortName) -> ([u8; 12], usize) {
    let mut out = [0u8; 12];
    let base = s[..8].iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    let ext = s[8..].iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    out[..base].copy_from_slice(&s[..base]);
    let mut n = base;
    if ext > 0 {
        out[n] = b'.';
        out[n + 1..n + 1 + ext].copy_from_slice(&s[8..8 + ext]);
        n += 1 + ext;
    }
    (out, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_known_value() {
        // Computed by hand for "FOO     BAR": the rotate-add over 11 bytes.
        let mut sum = 0u8;
        for &b in b"FOO     BAR" {
            sum = ((sum & 1) << 7) + (sum >> 1);
            sum = sum.wrapping_add(b);
        }
        assert_eq!(checksum(b"FOO     BAR"), sum);
    }

    #[test]
    fn short_names() {
        assert_eq!(exact_short("README.TXT"), Some(*b"README  TXT"));
        assert_eq!(exact_short("readme.txt"), None);
        assert_eq!(exact_short("A.B.C"), None);
        assert_eq!(exact_short("LONGNAME1.TXT"), None);
        let (b, e) = basis("My Long File.name.html");
        assert_eq!((&b[..], &e[..]), (&b"MYLONGFI"[..], &b"HTM"[..]));
        assert_eq!(&with_tail(&b, &e, 1), b"MYLONG~1HTM");
        assert_eq!(&with_tail(&b, &e, 12345), b"MY~12345HTM");
        let (b, e) = basis(".bashrc");
        assert_eq!(&with_tail(&b, &e, 2), b"BASHRC~2   ");
        let (b, _) = basis("ä+b");
        assert_eq!(b, b"__B");
        assert_eq!(display(b"MYLONG~1HTM", 0), "MYLONG~1.HTM");
        assert_eq!(display(b"\x05BC     TX ", 0x18), "\u{e5}bc.tx");
    }

    #[test]
    fn names_checked() {
        for bad in [
            "", ".", "..", "a/b", "a\\b", "a:b", "a*", "a?", "\"", "<", ">", "|", "a\0", "x.",
        ] {
            assert_eq!(validate(bad), Err(FsError::InvalidName), "{bad:?}");
        }
        let long = "x".repeat(256);
        assert_eq!(validate(&long), Err(FsError::InvalidName));
        assert_eq!(validate(&long[..255]).unwrap().len(), 255);
        assert!(same("Straße.TXT", "STRASSE.txt"));
        assert!(!same("a", "b"));
    }
}
