//! CRC32 as GPT uses it (UEFI 2.10, 4.2: "the CRC32 algorithm" is the
//! IEEE 802.3 one): reflected polynomial 0xEDB88320, initial value and
//! final XOR all ones. Table-driven, one byte per step — the tables are
//! at most 128 KiB (1024 entries of 128 bytes), so speed is not worth
//! a slice-by-8 table's 8 KiB.

/// The 256 remainders of one byte, computed at compile time.
const TABLE: [u32; 256] = table();

const fn table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
}

/// A CRC32 computed over bytes given in pieces (a GPT entry array arrives
/// block by block).
#[derive(Clone, Copy, Debug)]
pub struct Crc32(u32);

impl Crc32 {
    /// A CRC over no bytes yet.
    pub const fn new() -> Crc32 {
        Crc32(!0)
    }

    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        let mut crc = self.0;
        for &b in bytes {
            // The low byte indexes the table: `as u8` keeps exactly it.
            crc = (crc >> 8) ^ TABLE[usize::from(crc as u8 ^ b)];
        }
        self.0 = crc;
    }

    /// The CRC of every byte added.
    pub const fn finish(self) -> u32 {
        !self.0
    }
}

impl Default for Crc32 {
    fn default() -> Crc32 {
        Crc32::new()
    }
}

/// The CRC32 of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = Crc32::new();
    crc.update(bytes);
    crc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // The check value of CRC-32/ISO-HDLC and other published vectors.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"a"), 0xE8B7_BE43);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
        assert_eq!(crc32(&[0u8; 32]), 0x190A_55AD);
        assert_eq!(crc32(&[0xFFu8; 32]), 0xFF6C_AB0B);
    }

    #[test]
    fn pieces_make_the_whole() {
        let data: [u8; 300] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        let mut crc = Crc32::new();
        for piece in data.chunks(17) {
            crc.update(piece);
        }
        assert_eq!(crc.finish(), crc32(&data));
    }
}
