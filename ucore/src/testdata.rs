//! Data modules: boot modules of deterministic bytes that xtask generates
//! for a scenario (`data_modules = [{ name = "...", mib = N }]`,
//! docs/scenarios.md) and that a test component checks after mapping them
//! (`test-rom`, `tests/rom-large.toml`).
//!
//! A module of `n` bytes (a multiple of 8, at least 16) is `n / 8`
//! little-endian 64-bit words: word `i` is [`word`]`(i)` for every word
//! but the last, and the last is the [`checksum`] of the others — the
//! value xtask computed when it wrote the module, which the reader
//! recomputes over what it mapped. [`word`] makes every word differ, so a
//! frame mapped at the wrong place changes the checksum too.

/// Word `i` of a data module (SplitMix64 of `i`).
pub fn word(i: u64) -> u64 {
    let mut z = i.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The checksum of a module's words: FNV-1a over 64-bit words.
pub fn checksum(words: impl Iterator<Item = u64>) -> u64 {
    words.fold(0xcbf2_9ce4_8422_2325, |h, w| {
        (h ^ w).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Fills `out` as a data module: [`word`]s and the checksum in the last
/// word. `out`'s length is rounded down to words; fewer than two words
/// are left zero.
pub fn fill(out: &mut [u8]) {
    let words = out.len() / 8;
    if words < 2 {
        return;
    }
    for (i, chunk) in out.chunks_exact_mut(8).take(words - 1).enumerate() {
        chunk.copy_from_slice(&word(i as u64).to_le_bytes());
    }
    let sum = checksum((0..words as u64 - 1).map(word));
    out[(words - 1) * 8..words * 8].copy_from_slice(&sum.to_le_bytes());
}

/// Checks a mapped data module: whether its length is whole words (two
/// or more) and its last word is the checksum of the others as read, and
/// the index of the first word that is not [`word`]`(i)`, if any.
pub fn check(bytes: &[u8]) -> (bool, Option<u64>) {
    if !bytes.len().is_multiple_of(8) || bytes.len() < 16 {
        return (false, None);
    }
    let read = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
    let (body, last) = bytes.split_at(bytes.len() - 8);
    let mut first_wrong = None;
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for (i, c) in body.chunks_exact(8).enumerate() {
        let w = read(c);
        if first_wrong.is_none() && w != word(i as u64) {
            first_wrong = Some(i as u64);
        }
        h = (h ^ w).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h == read(last), first_wrong)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    #[test]
    fn filled_modules_check_and_damage_is_found() {
        let mut m = vec![0u8; 4096 * 3];
        fill(&mut m);
        assert_eq!(check(&m), (true, None));
        m[5000] ^= 1;
        assert_eq!(check(&m), (false, Some(5000 / 8)));
        // Two pages swapped: every word is still some word(i), not in place.
        let mut m = vec![0u8; 4096 * 3];
        fill(&mut m);
        let (a, b) = m.split_at_mut(4096);
        a.swap_with_slice(&mut b[..4096]);
        assert_eq!(check(&m).1, Some(0));
        assert_eq!(check(&m[..8]), (false, None));
        assert_ne!(word(0), word(1));
    }
}
