//! A generated body of any length for transfers that test and measure the
//! network (`GET /pattern/BYTES` of the HTTP server): the same bytes every
//! time, made piece by piece from any offset, so a server streams it
//! without holding it and a client checks it without trusting the server's
//! code.
//!
//! # The pattern
//!
//! Records of 16 bytes: record `k` (from 0) is its own offset, `16 × k`,
//! as 15 lower-case hexadecimal digits and a line feed —
//!
//! ```text
//! 000000000000000\n000000000000010\n000000000000020\n...
//! ```
//!
//! — and a body of `n` bytes is the first `n` bytes of that sequence (the
//! last record cut short when `n` is not a multiple of 16). Every record
//! differs from every other (15 hex digits count to 2^60), so a segment
//! lost, repeated or put at the wrong offset shows up in a byte compare
//! wherever it lands, and `head`/`od` of a damaged copy names the offset
//! where the damage starts. A host produces the same bytes with a
//! one-liner (`b"".join(b"%015x\n" % (16 * k) for k in range(n // 16 + 1))[:n]`
//! in Python; `tests/http-kill.toml` does exactly that).
//!
//! # The path
//!
//! `/pattern/BYTES`: `BYTES` in decimal, digits only, no leading zero
//! (`0` itself is an empty body), at most [`MAX`]. [`parse`] tells the
//! server's three answers apart: not a pattern path at all, a pattern of
//! that length, or a refused one ([`Refused`]).

/// The largest body served: 64 MiB (a benchmark's transfer, not a way to
/// keep a connection busy for ever).
pub const MAX: u64 = 64 * 1024 * 1024;

/// The prefix of a pattern path.
pub const PREFIX: &str = "/pattern/";

/// The bytes of a record.
pub const RECORD: u64 = 16;

/// Why a pattern path is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `BYTES` is not a decimal number as written above (empty, another
    /// character, a leading zero, a sign): no such resource (404).
    NotANumber,
    /// A number over [`MAX`] (overflowing ones included): 400.
    TooLarge,
}

/// What `path` asks for: `None` if it is not under [`PREFIX`], else the
/// body's length or why it is refused.
pub fn parse(path: &str) -> Option<Result<u64, Refused>> {
    let digits = path.strip_prefix(PREFIX)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !canonical {
        return Some(Err(Refused::NotANumber));
    }
    // Digits only, so the only parse error is overflow.
    Some(match digits.parse::<u64>() {
        Ok(n) if n <= MAX => Ok(n),
        _ => Err(Refused::TooLarge),
    })
}

/// Writes the pattern's bytes `offset..offset + buf.len()` into `buf`.
pub fn fill(offset: u64, buf: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut record = offset / RECORD;
    let mut at = (offset % RECORD) as usize;
    let mut rest = buf;
    while !rest.is_empty() {
        let mut r = [b'\n'; RECORD as usize];
        let value = record * RECORD;
        for (i, d) in r[..15].iter_mut().enumerate() {
            *d = HEX[((value >> (4 * (14 - i))) & 0xf) as usize];
        }
        let n = (RECORD as usize - at).min(rest.len());
        let (now, later) = rest.split_at_mut(n);
        now.copy_from_slice(&r[at..at + n]);
        rest = later;
        at = 0;
        record += 1;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use alloc::format;
    use alloc::vec;
    use alloc::vec::Vec;

    /// The pattern as the module doc defines it, written the obvious way.
    fn reference(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        let mut k = 0u64;
        while v.len() < n {
            v.extend_from_slice(format!("{:015x}\n", 16 * k).as_bytes());
            k += 1;
        }
        v.truncate(n);
        v
    }

    #[test]
    fn starts_as_documented() {
        let mut b = [0u8; 40];
        fill(0, &mut b);
        assert_eq!(&b, b"000000000000000\n000000000000010\n00000000");
        let mut b = [0u8; 16];
        fill(0x1400000 - 16, &mut b);
        assert_eq!(&b, b"0000000013ffff0\n");
    }

    #[test]
    fn any_offset_and_length_matches_the_reference() {
        let whole = reference(5000);
        for offset in [0usize, 1, 7, 15, 16, 17, 31, 100, 1023, 4095] {
            for len in [0usize, 1, 2, 15, 16, 17, 33, 500] {
                let mut b = vec![0xaau8; len];
                fill(offset as u64, &mut b);
                assert_eq!(b, whole[offset..offset + len], "offset {offset} len {len}");
            }
        }
    }

    #[test]
    fn pieces_make_the_whole() {
        // A stream made in uneven pieces is the same as one fill.
        let whole = reference(70_000);
        let mut made = Vec::new();
        let mut piece = 1;
        while made.len() < whole.len() {
            let n = piece.min(whole.len() - made.len());
            let mut b = vec![0u8; n];
            fill(made.len() as u64, &mut b);
            made.extend_from_slice(&b);
            piece = piece * 3 % 1461 + 1;
        }
        assert_eq!(made, whole);
    }

    #[test]
    fn records_are_unique_up_to_max() {
        // The last record of the largest body still names its offset.
        let mut b = [0u8; 16];
        fill(MAX - 16, &mut b);
        assert_eq!(&b, b"000000003fffff0\n");
    }

    #[test]
    fn paths() {
        assert_eq!(parse("/"), None);
        assert_eq!(parse("/pattern"), None);
        assert_eq!(parse("/patterns/1"), None);
        assert_eq!(parse("/pattern/0"), Some(Ok(0)));
        assert_eq!(parse("/pattern/1"), Some(Ok(1)));
        assert_eq!(parse("/pattern/20971520"), Some(Ok(20 * 1024 * 1024)));
        assert_eq!(parse("/pattern/67108864"), Some(Ok(MAX)));
        assert_eq!(parse("/pattern/67108865"), Some(Err(Refused::TooLarge)));
        assert_eq!(
            parse("/pattern/99999999999999999999999"),
            Some(Err(Refused::TooLarge))
        );
        for bad in [
            "/pattern/",
            "/pattern/01",
            "/pattern/00",
            "/pattern/+1",
            "/pattern/-1",
            "/pattern/1k",
            "/pattern/ 1",
            "/pattern/1/",
            "/pattern/0x10",
            "/pattern/1.5",
        ] {
            assert_eq!(parse(bad), Some(Err(Refused::NotANumber)), "{bad}");
        }
    }
}
