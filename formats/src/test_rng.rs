//! A deterministic pseudo-random generator for the randomized tests of
//! this crate, `kcore` and `xtask` (xorshift64*): a failing seed
//! reproduces exactly, and no dependency is needed. Public only so that
//! those tests share one copy; nothing outside tests uses it.

/// The generator; the field is the state (any non-zero seed).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 pseudo-random bits.
    #[allow(
        clippy::should_implement_trait,
        reason = "an endless generator, not an iterator; the tests call next() directly"
    )]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next().checked_rem(n).unwrap_or(0)
    }
}
