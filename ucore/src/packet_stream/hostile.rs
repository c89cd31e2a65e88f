//! What a misbehaving peer can do to a stream: write any descriptor into
//! any slot and store any value as an index or a flag. For tests — the
//! host tests and the Pecan test components use it to play the hostile
//! source or sink that rule 7 of the protocol (module doc of `super`)
//! contains. A correct end never needs it.

use core::sync::atomic::Ordering;

use super::region::Region;
use super::ring::{RingLayout, HEAD, TAIL, WANTS_ENTRIES, WANTS_SPACE};
use super::{Config, Layout, LayoutError, Ring};

/// A peer's hand on the shared memory of a stream.
#[derive(Debug)]
pub struct Forger {
    region: Region,
    layout: Layout,
}

/// A word of a ring's control block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// The producer's index.
    Tail,
    /// The consumer's index.
    Head,
    /// The producer's "waiting for space" flag.
    WantsSpace,
    /// The consumer's "waiting for entries" flag.
    WantsEntries,
}

impl Forger {
    /// A hand on `region`, laid out by `config` like the stream's ends.
    pub fn new(region: Region, config: Config) -> Result<Forger, LayoutError> {
        let layout = Layout::new(region.len(), config)?;
        Ok(Forger { region, layout })
    }

    /// The layout it writes into.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn ring(&self, ring: Ring) -> RingLayout {
        match ring {
            Ring::Submit => self.layout.submit,
            Ring::Ack => self.layout.ack,
        }
    }

    /// Writes `words` (offset, length, opcode, tag) into the slot of
    /// `index` in `ring`.
    pub fn descriptor(&self, ring: Ring, index: u32, words: [u32; 4]) {
        let r = self.ring(ring);
        let slot = r.slots + (index & (r.entries - 1)) as usize * 16;
        for (word, value) in self.region.words::<4>(slot).iter().zip(words) {
            word.store(value, Ordering::Relaxed);
        }
    }

    /// Stores `value` into `word` of `ring`'s control block (Release, as a
    /// producer or consumer publishes).
    pub fn control(&self, ring: Ring, word: Control, value: u32) {
        let offset = match word {
            Control::Tail => TAIL,
            Control::Head => HEAD,
            Control::WantsSpace => WANTS_SPACE,
            Control::WantsEntries => WANTS_ENTRIES,
        };
        self.region
            .word(self.ring(ring).ctrl + offset)
            .store(value, Ordering::Release);
    }

    /// Writes `words` into slot `index` of `ring` and publishes `index + 1`
    /// as its tail: one descriptor "submitted" (or "acknowledged").
    pub fn publish(&self, ring: Ring, index: u32, words: [u32; 4]) {
        self.descriptor(ring, index, words);
        self.control(ring, Control::Tail, index.wrapping_add(1));
    }
}
