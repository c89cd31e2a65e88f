//! One single-producer/single-consumer ring of packet descriptors in the
//! shared region: the producer's and the consumer's private state and the
//! rules of the module doc of `super` (indices, ordering, flags), shared by
//! both rings of a stream.

use core::sync::atomic::{fence, Ordering};

use super::region::Region;
use super::{Packet, Ring};

/// Bytes of a ring's control block: two cache lines, one per writer.
pub const CTRL_BYTES: usize = 128;
/// Bytes of one descriptor: offset, length, opcode, tag (`u32` each).
pub const DESCRIPTOR_BYTES: usize = 16;

/// Offsets in the control block. The producer's line: its index and its
/// "waiting for space" flag; the consumer's line: its index and its
/// "waiting for entries" flag. Each flag is set by its owner and cleared by
/// either side (the other one clears it when it signals).
pub(crate) const TAIL: usize = 0;
pub(crate) const WANTS_SPACE: usize = 4;
pub(crate) const HEAD: usize = 64;
pub(crate) const WANTS_ENTRIES: usize = 68;

/// Where one ring lives in the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    pub which: Ring,
    /// Byte offset of the control block.
    pub ctrl: usize,
    /// Byte offset of the first descriptor.
    pub slots: usize,
    /// Descriptors (a power of two).
    pub entries: u32,
}

impl RingLayout {
    fn slot(&self, index: u32) -> usize {
        self.slots + (index & (self.entries - 1)) as usize * DESCRIPTOR_BYTES
    }

    /// Raises (`up`) or lowers `flag`.
    pub fn set(&self, region: &Region, flag: Flag, up: bool) {
        region
            .word(self.ctrl + flag.offset())
            .store(u32::from(up), Ordering::Relaxed);
    }

    /// Zeroes the control block (indices and flags).
    pub fn reset(&self, region: &Region) {
        for offset in [TAIL, WANTS_SPACE, HEAD, WANTS_ENTRIES] {
            region.word(self.ctrl + offset).store(0, Ordering::Relaxed);
        }
    }
}

/// The peer stored this impossible index (small, so that the fast paths
/// return it in registers; `End` turns it into `Error::BadIndex`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadIndex(pub u32);

/// A ring's "peer is waiting" flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// The producer sleeps until a slot is free.
    WantsSpace,
    /// The consumer sleeps until an entry arrives.
    WantsEntries,
}

impl Flag {
    fn offset(self) -> usize {
        match self {
            Flag::WantsSpace => WANTS_SPACE,
            Flag::WantsEntries => WANTS_ENTRIES,
        }
    }
}

/// Stores an own index (`at`) with Release, then — full fence — takes the
/// peer's `flag`: whether the peer sleeps on this store and must be
/// signalled (rule 5; the flag is cleared then). The other half of the
/// handshake is `End::sleep`: store flag, fence, load index.
fn publish(region: &Region, ring: &RingLayout, at: usize, index: u32, flag: Flag) -> bool {
    region.word(ring.ctrl + at).store(index, Ordering::Release);
    fence(Ordering::SeqCst);
    let flag = region.word(ring.ctrl + flag.offset());
    if flag.load(Ordering::Relaxed) == 0 {
        return false;
    }
    flag.store(0, Ordering::Relaxed);
    true
}

/// The producing side of a ring.
#[derive(Debug)]
pub struct Producer {
    pub ring: RingLayout,
    /// Next index to write (private; entries up to it are staged).
    tail: u32,
    /// The tail last stored to shared memory.
    published: u32,
    /// The consumer's head as last loaded and validated.
    head: u32,
}

impl Producer {
    pub fn new(ring: RingLayout) -> Producer {
        Producer {
            ring,
            tail: 0,
            published: 0,
            head: 0,
        }
    }

    /// Loads and validates the consumer's head: it may only have moved
    /// forward, and not past the published tail.
    fn refresh(&mut self, region: &Region) -> Result<(), BadIndex> {
        let head = region.word(self.ring.ctrl + HEAD).load(Ordering::Acquire);
        if head.wrapping_sub(self.head) > self.published.wrapping_sub(self.head) {
            return Err(BadIndex(head));
        }
        self.head = head;
        Ok(())
    }

    fn is_full(&self) -> bool {
        self.tail.wrapping_sub(self.head) == self.ring.entries
    }

    /// Whether a slot is free, looking at the consumer's head only if the
    /// last one seen says no.
    pub fn has_space(&mut self, region: &Region) -> Result<bool, BadIndex> {
        if self.is_full() {
            self.refresh(region)?;
        }
        Ok(!self.is_full())
    }

    /// Stages `packet` (invisible to the consumer until [`Self::publish`]);
    /// `false` if the ring is full.
    pub fn push(&mut self, region: &Region, packet: Packet) -> Result<bool, BadIndex> {
        if !self.has_space(region)? {
            return Ok(false);
        }
        let slot = region.words::<4>(self.ring.slot(self.tail));
        for (word, value) in slot.iter().zip(packet.to_words()) {
            word.store(value, Ordering::Relaxed);
        }
        self.tail = self.tail.wrapping_add(1);
        Ok(true)
    }

    /// Publishes the staged entries (Release: their descriptors first);
    /// returns whether the consumer sleeps waiting for entries and must be
    /// signalled (its flag is cleared then).
    pub fn publish(&mut self, region: &Region) -> bool {
        if self.tail == self.published {
            return false;
        }
        self.published = self.tail;
        publish(region, &self.ring, TAIL, self.tail, Flag::WantsEntries)
    }

    /// After raising [`Flag::WantsSpace`] and a fence: whether a slot is
    /// free after all.
    pub fn space_after_raise(&mut self, region: &Region) -> Result<bool, BadIndex> {
        self.refresh(region)?;
        Ok(!self.is_full())
    }
}

/// The consuming side of a ring.
#[derive(Debug)]
pub struct Consumer {
    pub ring: RingLayout,
    /// Next index to read (private).
    head: u32,
    /// The head last stored to shared memory.
    published: u32,
    /// The producer's tail as last loaded and validated.
    tail: u32,
}

impl Consumer {
    pub fn new(ring: RingLayout) -> Consumer {
        Consumer {
            ring,
            head: 0,
            published: 0,
            tail: 0,
        }
    }

    /// Loads and validates the producer's tail: at most `entries` ahead of
    /// the head, and not behind the tail seen before.
    fn refresh(&mut self, region: &Region) -> Result<(), BadIndex> {
        let tail = region.word(self.ring.ctrl + TAIL).load(Ordering::Acquire);
        let ahead = tail.wrapping_sub(self.head);
        if ahead > self.ring.entries || ahead < self.tail.wrapping_sub(self.head) {
            return Err(BadIndex(tail));
        }
        self.tail = tail;
        Ok(())
    }

    /// Whether an entry is waiting, looking at the producer's tail only if
    /// the last one seen says no.
    pub fn has_entries(&mut self, region: &Region) -> Result<bool, BadIndex> {
        if self.head == self.tail {
            self.refresh(region)?;
        }
        Ok(self.head != self.tail)
    }

    /// Takes the next entry: its descriptor, read once into private memory
    /// (the caller validates it). The slot is given back at the next
    /// [`Self::publish`].
    pub fn pop(&mut self, region: &Region) -> Result<Option<Packet>, BadIndex> {
        if !self.has_entries(region)? {
            return Ok(None);
        }
        let slot = region.words::<4>(self.ring.slot(self.head));
        let words = slot.each_ref().map(|word| word.load(Ordering::Relaxed));
        self.head = self.head.wrapping_add(1);
        Ok(Some(Packet::from_words(words)))
    }

    /// Entries taken since the last publish.
    pub fn unpublished(&self) -> u32 {
        self.head.wrapping_sub(self.published)
    }

    /// Gives the slots of the taken entries back (Release: after reading
    /// them); returns whether the producer sleeps waiting for space and
    /// must be signalled (its flag is cleared then).
    pub fn publish(&mut self, region: &Region) -> bool {
        if self.head == self.published {
            return false;
        }
        self.published = self.head;
        publish(region, &self.ring, HEAD, self.head, Flag::WantsSpace)
    }

    /// After raising [`Flag::WantsEntries`] and a fence: whether an entry
    /// arrived after all.
    pub fn entries_after_raise(&mut self, region: &Region) -> Result<bool, BadIndex> {
        self.refresh(region)?;
        Ok(self.head != self.tail)
    }
}
