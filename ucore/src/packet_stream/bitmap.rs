//! Bit runs in a `[u64]` bitmap (bit `i` is bit `i % 64` of word `i / 64`),
//! a word at a time: the building blocks of [`super::alloc`] and of the
//! test traffic's bookkeeping. Every function costs O(number of words it
//! crosses), never a loop per bit.

/// Bits of `word` at and above `bit` (`bit < 64`).
fn from_bit(bit: usize) -> u64 {
    !0u64 << bit
}

/// Bits `lo..hi` of one word (`lo < hi <= 64`), without a branch.
fn span(lo: usize, hi: usize) -> u64 {
    (u64::MAX >> (64 - (hi - lo))) << lo
}

/// The first index in `from..limit` whose bit is `value`, or `limit`.
/// `limit` must be at most `bits.len() * 64`.
pub fn find(bits: &[u64], value: bool, from: usize, limit: usize) -> usize {
    find_by(from, limit, |w| if value { bits[w] } else { !bits[w] })
}

/// The first index in `from..limit` whose bit is set in the bitmap whose
/// word `w` is `word(w)` (a combination of bitmaps), or `limit`.
pub fn find_by(from: usize, limit: usize, word: impl Fn(usize) -> u64) -> usize {
    let mut i = from;
    while i < limit {
        let hits = word(i / 64) & from_bit(i % 64);
        if hits != 0 {
            return (i / 64 * 64 + hits.trailing_zeros() as usize).min(limit);
        }
        i = (i / 64 + 1) * 64;
    }
    limit
}

/// Sets (`value`) or clears bits `lo..hi`.
pub fn fill(bits: &mut [u64], lo: usize, hi: usize, value: bool) {
    if lo < hi && lo / 64 == (hi - 1) / 64 {
        // Within one word: the common case of a small packet.
        let mask = span(lo % 64, hi - lo / 64 * 64);
        let word = &mut bits[lo / 64];
        *word = if value { *word | mask } else { *word & !mask };
        return;
    }
    let mut i = lo;
    while i < hi {
        let end = ((i / 64 + 1) * 64).min(hi);
        let mask = span(i % 64, end - i / 64 * 64);
        if value {
            bits[i / 64] |= mask;
        } else {
            bits[i / 64] &= !mask;
        }
        i = end;
    }
}

/// Bit `i`.
pub fn get(bits: &[u64], i: usize) -> bool {
    bits[i / 64] >> (i % 64) & 1 != 0
}

/// Sets bit `i` to `value`.
pub fn put(bits: &mut [u64], i: usize, value: bool) {
    if value {
        bits[i / 64] |= 1 << (i % 64);
    } else {
        bits[i / 64] &= !(1 << (i % 64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_crosses_words_and_stops_at_the_limit() {
        let mut bits = [0u64; 3];
        fill(&mut bits, 60, 130, true);
        assert_eq!(bits[0], 0xf << 60);
        assert_eq!(bits[1], !0);
        assert_eq!(bits[2], 0b11);
        assert_eq!(find(&bits, true, 0, 192), 60);
        assert_eq!(find(&bits, false, 60, 192), 130);
        assert_eq!(find(&bits, false, 61, 100), 100);
        assert_eq!(find(&bits, true, 130, 192), 192);
        assert_eq!(find(&bits, true, 0, 10), 10);
        assert_eq!(find(&bits, true, 5, 5), 5);
        let other = [0, 1 << 5, !0];
        let both = |w: usize| bits[w] & other[w];
        assert_eq!(find_by(0, 192, both), 69);
        assert_eq!(find_by(70, 192, both), 128);
        assert_eq!(find_by(70, 128, both), 128);
        fill(&mut bits, 63, 65, false);
        assert_eq!(find(&bits, false, 62, 192), 63);
        assert_eq!(find(&bits, true, 63, 192), 65);
        assert!(get(&bits, 62) && !get(&bits, 63) && !get(&bits, 64) && get(&bits, 65));
        put(&mut bits, 64, true);
        assert!(get(&bits, 64));
        put(&mut bits, 64, false);
        assert!(!get(&bits, 64));
    }

    #[test]
    fn fill_matches_a_bit_by_bit_model() {
        let mut state = 0x1234_5678_9abc_def1u64;
        let mut bits = [0u64; 4];
        let mut model = [false; 256];
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let lo = (state % 256) as usize;
            let hi = lo + ((state >> 20) % (257 - lo as u64)) as usize;
            let value = state >> 40 & 1 != 0;
            fill(&mut bits, lo, hi, value);
            model[lo..hi].iter_mut().for_each(|b| *b = value);
            for (i, &m) in model.iter().enumerate() {
                assert_eq!(get(&bits, i), m, "bit {i}");
            }
            let from = (state >> 48) as usize % 256;
            let expect = (from..256).find(|&i| model[i]).unwrap_or(256);
            assert_eq!(find(&bits, true, from, 256), expect);
            let expect = (from..256).find(|&i| !model[i]).unwrap_or(256);
            assert_eq!(find(&bits, false, from, 256), expect);
        }
    }
}
