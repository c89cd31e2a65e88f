//! What the guest and the host peer of the socket link agree on
//! (docs/network.md, "The peer link"): the link's static addresses, the
//! peer's service ports, the deterministic byte pattern of bulk
//! transfers and the checksum both sides compute over a transfer.
//!
//! The peer (`xtask::netpeer`) runs a TCP/IP stack on the host at
//! [`PEER_IP`]; the guest takes [`GUEST_IP`] statically. The TCP sink
//! and source start with an 8-byte big-endian length; the sink answers
//! one line ([`SinkReport`]) after the last byte. Byte `i` of every
//! transfer is [`pattern`]`(i)`, so the receiver checks each byte
//! without the sender telling it what it sent; [`Fnv`] (FNV-1a, 64
//! bits) is the checksum both print.
//!
//! Invariants: [`pattern`] depends only on the offset; [`Fnv`] over a
//! stream cut into any pieces equals it over the whole; parsing a
//! report never panics (bad text is `None`).

/// The guest's address on the peer link (a /24).
pub const GUEST_IP: [u8; 4] = [10, 0, 3, 2];
/// The peer's address.
pub const PEER_IP: [u8; 4] = [10, 0, 3, 1];
/// The link's prefix length.
pub const PREFIX: u8 = 24;
/// The peer's MAC address (locally administered).
pub const PEER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x03, 0x01];

/// TCP and UDP echo.
pub const PORT_ECHO: u16 = 7;
/// TCP sink: length, then that many pattern bytes; answered by a
/// [`SinkReport`] line. UDP sink: datagrams counted.
pub const PORT_SINK: u16 = 9;
/// TCP source: the guest sends a length, the peer that many pattern
/// bytes, then closes.
pub const PORT_SOURCE: u16 = 19;
/// TCP control: one command a line, one answer a line (`udp-stats`,
/// `udp-reset`, `udp-send SIZE COUNT PORT`, `wait-ping`).
pub const PORT_CONTROL: u16 = 5;

/// Byte `offset` of every bulk transfer.
pub fn pattern(offset: u64) -> u8 {
    let x = offset.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8 ^ (offset as u8)
}

/// Fills `buf` with the pattern from `offset` on.
pub fn fill(buf: &mut [u8], offset: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern(offset + i as u64);
    }
}

/// FNV-1a over a byte stream, 64 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    /// Adds `bytes` to the checksum.
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// A receiver's view of a pattern transfer: bytes, checksum, the offset
/// of the first byte that was not the pattern.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Receiver {
    pub bytes: u64,
    pub fnv: Fnv,
    pub first_bad: Option<u64>,
}

impl Receiver {
    /// Takes the next piece of the transfer.
    pub fn take(&mut self, piece: &[u8]) {
        if self.first_bad.is_none() {
            if let Some(i) = piece
                .iter()
                .enumerate()
                .position(|(i, &b)| b != pattern(self.bytes + i as u64))
            {
                self.first_bad = Some(self.bytes + i as u64);
            }
        }
        self.fnv.update(piece);
        self.bytes += piece.len() as u64;
    }
}

/// The TCP sink's answer: `sink BYTES fnv HEX pattern ok|bad-at-N us
/// MICROS` (the host's time from the first to the last byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkReport {
    pub bytes: u64,
    pub fnv: u64,
    pub first_bad: Option<u64>,
    pub micros: u64,
}

impl SinkReport {
    /// The line, without its newline.
    pub fn line(&self) -> alloc::string::String {
        let pattern = match self.first_bad {
            None => alloc::string::String::from("ok"),
            Some(at) => alloc::format!("bad-at-{at}"),
        };
        alloc::format!(
            "sink {} fnv {:016x} pattern {} us {}",
            self.bytes,
            self.fnv,
            pattern,
            self.micros
        )
    }

    /// Parses [`SinkReport::line`]'s text (a trailing newline allowed).
    pub fn parse(text: &str) -> Option<SinkReport> {
        let words: alloc::vec::Vec<&str> = text.trim_end().split(' ').collect();
        let ["sink", bytes, "fnv", fnv, "pattern", pattern, "us", micros] = words[..] else {
            return None;
        };
        let first_bad = match pattern {
            "ok" => None,
            bad => Some(bad.strip_prefix("bad-at-")?.parse().ok()?),
        };
        Some(SinkReport {
            bytes: bytes.parse().ok()?,
            fnv: u64::from_str_radix(fnv, 16).ok()?,
            first_bad,
            micros: micros.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn checksum_of_pieces_is_checksum_of_whole() {
        let mut whole = vec![0u8; 5000];
        fill(&mut whole, 0);
        let mut a = Receiver::default();
        a.take(&whole);
        let mut b = Receiver::default();
        for piece in whole.chunks(333) {
            b.take(piece);
        }
        assert_eq!(a, b);
        assert_eq!(a.first_bad, None);
        assert_eq!(a.bytes, 5000);
        // FNV-1a's published value for "a".
        let mut f = Fnv::default();
        f.update(b"a");
        assert_eq!(f.0, 0xaf63_dc4c_8601_ec8c);
        // The pattern is not constant and depends on the offset.
        assert_ne!(whole[..256], whole[256..512]);
        let mut bad = whole.clone();
        bad[4321] ^= 1;
        let mut c = Receiver::default();
        for piece in bad.chunks(1000) {
            c.take(piece);
        }
        assert_eq!(c.first_bad, Some(4321));
    }

    #[test]
    fn report_round_trip() {
        for first_bad in [None, Some(77)] {
            let r = SinkReport {
                bytes: 123,
                fnv: 0xdead_beef,
                first_bad,
                micros: 9,
            };
            assert_eq!(SinkReport::parse(&(r.line() + "\n")), Some(r));
        }
        for bad in [
            "",
            "sink",
            "sink x fnv 1 pattern ok us 1",
            "sink 1 fnv 1 pattern ok us 1 x",
        ] {
            assert_eq!(SinkReport::parse(bad), None, "{bad}");
        }
    }
}
