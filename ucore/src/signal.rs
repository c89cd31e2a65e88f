//! The bookkeeping of signal contexts on one notification word, without
//! system calls (`rt::signal` puts the capabilities and the `Wait` around
//! it): which bit each context has, its handler, and dispatching a word.
//!
//! Invariants: a bit is *used* exactly when it has a handler; the bits
//! are handed out lowest free first; [`Contexts::dispatch`] runs the
//! handlers of the used bits set in a word, each once, lowest bit first,
//! and counts the set bits nobody uses as stray.

use alloc::boxed::Box;

/// Bits of a notification word: the most contexts on one notification.
pub const MAX_CONTEXTS: usize = 64;

/// A handler: runs with the caller's state.
pub type Handler<T> = Box<dyn FnMut(&mut T)>;

/// Why a bit cannot be had or given back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextError {
    /// All 64 bits are used.
    Full,
    /// The bit is 64 or above.
    NoSuchBit,
    /// The bit is (or is not, for [`Contexts::remove`]) in use.
    Used,
    Unused,
}

/// The handlers of a notification's bits.
pub struct Contexts<T> {
    handlers: [Option<Handler<T>>; MAX_CONTEXTS],
    used: u64,
    stray: u64,
}

impl<T> Default for Contexts<T> {
    fn default() -> Self {
        Contexts {
            handlers: core::array::from_fn(|_| None),
            used: 0,
            stray: 0,
        }
    }
}

impl<T> Contexts<T> {
    /// The lowest free bit, not yet taken.
    pub fn free_bit(&self) -> Result<u32, ContextError> {
        match (!self.used).trailing_zeros() {
            64 => Err(ContextError::Full),
            bit => Ok(bit),
        }
    }

    /// Gives `bit` the handler `handler`; it must be free.
    pub fn insert(&mut self, bit: u32, handler: Handler<T>) -> Result<(), ContextError> {
        let mask = Self::mask(bit)?;
        if self.used & mask != 0 {
            return Err(ContextError::Used);
        }
        self.used |= mask;
        self.handlers[bit as usize] = Some(handler);
        Ok(())
    }

    /// Frees `bit`; a signal of it that arrives later is stray.
    pub fn remove(&mut self, bit: u32) -> Result<(), ContextError> {
        let mask = Self::mask(bit)?;
        if self.used & mask == 0 {
            return Err(ContextError::Unused);
        }
        self.used &= !mask;
        self.handlers[bit as usize] = None;
        Ok(())
    }

    /// Whether `bit` has a handler.
    pub fn is_used(&self, bit: u32) -> bool {
        Self::mask(bit).is_ok_and(|mask| self.used & mask != 0)
    }

    /// Runs the handler of each used bit set in `word`, lowest first, with
    /// `state`; returns how many ran.
    pub fn dispatch(&mut self, word: u64, state: &mut T) -> u32 {
        self.stray += u64::from((word & !self.used).count_ones());
        let mut pending = word & self.used;
        let mut ran = 0;
        while pending != 0 {
            let bit = pending.trailing_zeros() as usize;
            pending &= pending - 1;
            if let Some(handler) = self.handlers[bit].as_mut() {
                handler(state);
                ran += 1;
            }
        }
        ran
    }

    /// Set bits that arrived with no handler.
    pub fn stray(&self) -> u64 {
        self.stray
    }

    fn mask(bit: u32) -> Result<u64, ContextError> {
        1u64.checked_shl(bit).ok_or(ContextError::NoSuchBit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn recorder(tag: u32) -> Handler<Vec<u32>> {
        Box::new(move |log: &mut Vec<u32>| log.push(tag))
    }

    #[test]
    fn bits_are_handed_out_lowest_first_and_reused() {
        let mut c: Contexts<Vec<u32>> = Contexts::default();
        for expected in 0..3 {
            let bit = c.free_bit().unwrap();
            assert_eq!(bit, expected);
            c.insert(bit, recorder(bit)).unwrap();
        }
        c.remove(1).unwrap();
        assert_eq!(c.free_bit(), Ok(1));
        assert!(!c.is_used(1) && c.is_used(0) && c.is_used(2));
    }

    #[test]
    fn full_after_64_and_bad_bits_are_refused() {
        let mut c: Contexts<Vec<u32>> = Contexts::default();
        for bit in 0..64 {
            c.insert(bit, recorder(bit)).unwrap();
        }
        assert_eq!(c.free_bit(), Err(ContextError::Full));
        assert_eq!(c.insert(5, recorder(5)), Err(ContextError::Used));
        assert_eq!(c.insert(64, recorder(64)), Err(ContextError::NoSuchBit));
        assert_eq!(c.remove(u32::MAX), Err(ContextError::NoSuchBit));
        c.remove(63).unwrap();
        assert_eq!(c.remove(63), Err(ContextError::Unused));
        assert!(!c.is_used(200));
    }

    #[test]
    fn dispatch_runs_each_set_handler_once_in_bit_order_and_counts_strays() {
        let mut c: Contexts<Vec<u32>> = Contexts::default();
        for bit in [0, 3, 63] {
            c.insert(bit, recorder(bit)).unwrap();
        }
        let mut log = Vec::new();
        let ran = c.dispatch(1 << 63 | 1 << 7 | 1 << 3 | 1 << 2 | 1, &mut log);
        assert_eq!(ran, 3);
        assert_eq!(log, [0, 3, 63]);
        assert_eq!(c.stray(), 2);
        assert_eq!(c.dispatch(0, &mut log), 0);
        c.remove(3).unwrap();
        log.clear();
        assert_eq!(c.dispatch(u64::MAX, &mut log), 2);
        assert_eq!(log, [0, 63]);
        assert_eq!(c.stray(), 2 + 62);
    }

    #[test]
    fn handlers_change_the_callers_state() {
        let mut c: Contexts<u64> = Contexts::default();
        c.insert(4, Box::new(|n: &mut u64| *n += 10)).unwrap();
        let mut n = 1;
        for _ in 0..3 {
            c.dispatch(1 << 4, &mut n);
        }
        assert_eq!(n, 31);
    }
}
