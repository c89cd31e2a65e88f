//! The FAT test's files (the original system's test program, `fat-test`):
//! what round `r` writes, so that the host can check the disk image after
//! the run with tools of its own (`cargo xtask check-fat`) — every file
//! the test wrote, byte for byte.

use alloc::format;
use alloc::string::String;

/// Rounds of the test.
pub const ROUNDS: u32 = 10;

/// Round `r`'s directory (a long name: lower case).
pub fn dir(r: u32) -> String {
    format!("round-{r:02}")
}

/// Round `r`'s file in its directory (a long name with spaces).
pub fn file(r: u32) -> String {
    format!("pattern file {r:02}.bin")
}

/// Bytes of round `r`'s file: from a few hundred bytes to over 100 KiB,
/// so files of one cluster and of many are both written.
pub fn len(r: u32) -> usize {
    (r as usize * r as usize) * 1531 + 321
}

/// Byte `j` of round `r`'s file.
pub fn byte(r: u32, j: usize) -> u8 {
    let x = (j as u64)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(u64::from(r) * 97);
    (x >> 7) as u8 ^ (j as u8).wrapping_mul(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_differ_and_sizes_grow() {
        assert_eq!(dir(3), "round-03");
        assert_eq!(file(10), "pattern file 10.bin");
        assert!(len(1) < 4096 && len(10) > 100 * 1024);
        assert!((0..64).any(|j| byte(1, j) != byte(2, j)));
    }
}
