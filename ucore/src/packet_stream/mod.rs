//! The packet stream: bulk data between two components through shared
//! memory, with a notification only when one side must wake the other.
//! The protocol comes first (as in Genode's `os/packet_stream.h`); the code
//! below implements it.
//!
//! # Parties
//!
//! A stream has a **source** and a **sink**. The source allocates packets
//! in a shared buffer, fills them (or leaves them to be filled) and
//! *submits* them; the sink takes them, processes them — reads what the
//! source wrote, or writes what the source asked for — and *acknowledges*
//! them; the source gets the acknowledged packets back and releases their
//! space. A block-device client is the source of a stream whose sink is the
//! driver; a network interface has one stream in each direction.
//!
//! # Shared memory
//!
//! Both sides map one dataspace of R bytes, 64-byte aligned. Its layout is
//! a function of R and a [`Config`] (ring entries E, a power of two, and the
//! block size) that both sides agree on out of band (in the session
//! request); neither side ever reads layout information from the shared
//! memory, so a peer cannot change it. [`Layout`]:
//!
//! | offset | bytes | what | written by |
//! |--------|-------|------|------------|
//! | 0 | 64 | submit ring, producer line: `tail`, `wants_space` | `tail`: source; `wants_space`: set by the source, cleared by either |
//! | 64 | 64 | submit ring, consumer line: `head`, `wants_entries` | `head`: sink; `wants_entries`: set by the sink, cleared by either |
//! | 128 | 128 | acknowledgement ring: the same two lines | roles swapped: the sink produces, the source consumes |
//! | 256 | 16 · E | submit descriptors | source |
//! | 256 + 16 · E | 16 · E | acknowledgement descriptors | sink |
//! | next 4 KiB boundary | the rest, whole blocks, at most 4 GiB | the bulk buffer | the packet's current owner |
//!
//! A **descriptor** ([`Packet`]) is four little-endian `u32`: `offset` (of
//! the payload, from the buffer's start), `len` (bytes), `op` and `tag`
//! (free for the session: an opcode, a block number, a sequence number; the
//! stream only carries them).
//!
//! Each ring is single-producer/single-consumer. `tail` counts the entries
//! the producer has published, `head` those the consumer has taken and
//! given back (their slots free again); both
//! are free-running `u32` counters that wrap, the entry of index i sits in
//! slot i mod E, and the ring holds `tail − head` (wrapping) entries, 0 to
//! E. The two indices sit in separate cache lines, each line written by one
//! side only (but for the other side clearing a flag).
//!
//! The control words must be zero when the stream starts: a fresh
//! dataspace is; [`Layout::reset`] makes it so before a stream is set up
//! again on used memory.
//!
//! # Rules
//!
//! 1. **Ownership.** A packet's bytes belong to the source from `alloc`
//!    until it submits the packet, to the sink from when it takes the packet
//!    until it acknowledges it, and to the source again until it releases
//!    it. Only the owner reads or writes them.
//! 2. **Indices.** The producer alone writes `tail`, the consumer alone
//!    writes `head`. Each side keeps its own index in private memory and
//!    only ever stores it to the shared one, never reads it back: a peer that
//!    overwrites it changes nothing for this side.
//! 3. **Memory ordering.** The producer writes a descriptor, then stores
//!    `tail` with Release; the consumer loads `tail` with Acquire, then reads
//!    the descriptor, then stores `head` with Release; the producer loads
//!    `head` with Acquire before it reuses the slot. So the payload written
//!    before a submit is visible to the sink that took the packet, and a slot
//!    is never overwritten while it is read. Descriptors and control words
//!    are accessed as atomics only (they are shared with a peer that may
//!    write them at any time); payload bytes are plain memory, handed over
//!    by these Release/Acquire pairs.
//! 4. **Batching.** A producer stages entries privately and publishes them
//!    with one `tail` store per batch ([`Source::flush`] /
//!    [`Sink::flush`]: after a batch, and on its own when the ring is full
//!    and before sleeping). A consumer gives slots back with one `head`
//!    store when it finds the ring empty, after every E/2 entries, and before
//!    sleeping. A signal can only follow such a store, and only when the peer
//!    sleeps (rule 5): one signal per batch, never one per packet.
//! 5. **Sleeping and waking, without lost wake-ups.** A side that must wait
//!    for a condition — entries in a ring it consumes, or a free slot in a
//!    ring it produces — (a) publishes what it has staged or taken (rule 4),
//!    (b) sets its flag for the condition (`wants_entries` or
//!    `wants_space`), (c) executes a full (SeqCst) fence, (d) loads the
//!    peer's index again: if the condition holds now it clears the flag and
//!    goes on; otherwise (e) it waits on its notification. The other side,
//!    after every index store, executes a full fence and loads the flag; if
//!    set, it clears it and signals the sleeper's notification. Both sides
//!    store, fence, then load, so at least one sees the other's store: the
//!    sleeper sees the new index and does not sleep, or the publisher sees
//!    the flag and signals (and lowers the sleeper's other flag too, if it
//!    raised two: it re-checks both when it wakes). A notification keeps a signal that comes before
//!    the wait (its word stays set), so a signal between (d) and (e) is not
//!    lost either. Therefore a side signals only on empty → non-empty of a
//!    ring the peer sleeps on, or on full → non-full of a ring the peer waits
//!    to write to. A wake-up may be spurious (the sleeper cleared its flag
//!    itself just as the peer read it): every waiter re-checks its condition.
//! 6. **Full ring, full buffer.** `alloc` fails with [`Error::BufferFull`]
//!    when no run of free blocks is long enough; the source then takes
//!    acknowledgements and releases their packets, and if there are none,
//!    sleeps until one arrives ([`Source::wait_for_acks`]). `submit` fails
//!    with [`Error::RingFull`] when the submit ring is full; the source
//!    sleeps until a slot is free *or* an acknowledgement arrives
//!    ([`Source::wait_for_submit_space`]). A sink whose acknowledgement ring
//!    is full sleeps until a slot is free ([`Sink::wait_for_ack_space`]); one
//!    with nothing to do sleeps until packets arrive
//!    ([`Sink::wait_for_packets`]). **No deadlock:** whenever the source
//!    sleeps it also wakes for acknowledgements, so a sink blocked on a full
//!    acknowledgement ring always gets its slots back; a sink only sleeps
//!    for space when that ring is full, so it never sleeps on a source
//!    blocked on a full submit ring that only the sink could drain. One
//!    application rule remains: a sink must not sleep for more packets
//!    while it holds unacknowledged ones the source may be waiting for.
//! 7. **A malicious peer is contained.** Everything the peer writes is
//!    validated before use, and a violation is an error value, never an
//!    access outside the dataspace or to another packet's state:
//!    - A descriptor is read once into private memory, then checked, so the
//!      peer cannot change it between check and use.
//!    - The sink refuses a descriptor whose `offset + len` (computed in 64
//!      bits) exceeds the buffer: [`Error::Rejected`] for that packet; the
//!      entry is consumed and the stream goes on.
//!    - The source accepts an acknowledgement only for a packet in flight:
//!      `offset` must be the first block of a live allocation that it
//!      submitted and has not had back, and `len` at most that allocation's
//!      size (a sink may report fewer bytes, e.g. a short read). Anything
//!      else — a forged, repeated, misaligned or out-of-range one — is
//!      [`Error::Rejected`] and leaves the allocator alone, so a sink cannot
//!      make the source free space that is in use.
//!    - A peer's index is valid only between the last value seen and this
//!      side's own published index (a consumer: `tail − head ≤ E` and not
//!      backwards; a producer: `head` not backwards and not past the
//!      published `tail`). An invalid one is [`Error::BadIndex`], fatal for
//!      the stream: every later call returns it. Slot addresses are taken
//!      modulo E, so no index can point outside the ring anyway.
//!    - A peer that sets or clears flags at random only causes extra or
//!      missing signals: it can stall the stream it is part of, which it
//!      could do by stopping. Liveness depends on the peer, safety never does.
//!    - The peer can write into payload it does not own; it garbles only
//!      data of its own stream (see [`region`] for what that means for a
//!      reader).
//!
//! # The code
//!
//! - [`Source`] and [`Sink`]: the two ends; both generic over the
//!   notification mechanism ([`Notify`]: Pecan notifications in components,
//!   threads and a condition variable in host tests).
//! - [`region::Region`]: the shared memory as a base pointer and a length;
//!   the only `unsafe` code of the stream.
//! - [`alloc::BlockAllocator`]: buffer space, a bitmap over blocks with
//!   next fit (its doc states the complexity).
//! - [`traffic`]: deterministic test traffic (payloads, checksums,
//!   bookkeeping of arrivals) and the drivers that push it through a stream,
//!   shared by the host tests and the Pecan test components; [`hostile`]:
//!   a misbehaving peer's hand on the shared memory, for their tests of
//!   rule 7.

use core::fmt;
use core::sync::atomic::{fence, Ordering};

pub mod alloc;
mod bitmap;
pub mod hostile;
pub mod region;
mod ring;
mod sink;
mod source;
pub mod traffic;

#[cfg(test)]
mod tests;

pub use region::Region;
pub use sink::{NotAcked, Sink, Taken};
pub use source::Source;

use ring::{BadIndex, Consumer, Flag, Producer, RingLayout, CTRL_BYTES, DESCRIPTOR_BYTES};

/// Parameters both sides agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Descriptors per ring: a power of two, 2 to [`MAX_ENTRIES`].
    pub entries: u32,
    /// Bytes per block of the buffer: a power of two, at least
    /// [`MIN_BLOCK_SIZE`].
    pub block_size: u32,
}

impl Config {
    /// 256 descriptors per ring, 64-byte blocks.
    pub const DEFAULT: Config = Config {
        entries: 256,
        block_size: 64,
    };
}

/// Most descriptors per ring.
pub const MAX_ENTRIES: u32 = 1 << 16;
/// Smallest block size.
pub const MIN_BLOCK_SIZE: u32 = 8;
/// The buffer starts at a multiple of this.
pub const BUFFER_ALIGN: usize = 4096;
/// The largest buffer: offsets and lengths are `u32`.
pub const MAX_BUFFER: u64 = 1 << 32;

/// Why a region and a configuration do not make a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The region's base is null or not 64-byte aligned, or its range
    /// wraps.
    Misaligned,
    /// `entries` is not a power of two in `2..=MAX_ENTRIES`.
    BadEntries,
    /// `block_size` is not a power of two of at least `MIN_BLOCK_SIZE`.
    BadBlockSize,
    /// The region has no room for the rings and one block of buffer.
    RegionTooSmall { len: usize, needed: usize },
    /// The buffer has more blocks than the source's allocator manages.
    TooManyBlocks { blocks: usize, capacity: usize },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LayoutError::Misaligned => f.write_str("region not 64-byte aligned"),
            LayoutError::BadEntries => f.write_str("ring entries not a power of two in 2..=65536"),
            LayoutError::BadBlockSize => f.write_str("block size not a power of two >= 8"),
            LayoutError::RegionTooSmall { len, needed } => {
                write!(f, "region of {len} bytes too small (needs {needed})")
            }
            LayoutError::TooManyBlocks { blocks, capacity } => {
                write!(
                    f,
                    "{blocks} buffer blocks, the allocator manages {capacity}"
                )
            }
        }
    }
}

/// Where everything lies in the shared region (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    config: Config,
    submit: RingLayout,
    ack: RingLayout,
    buffer: usize,
    buffer_len: usize,
}

impl Layout {
    /// The layout of a region of `len` bytes.
    pub fn new(len: usize, config: Config) -> Result<Layout, LayoutError> {
        let Config {
            entries,
            block_size,
        } = config;
        if !entries.is_power_of_two() || !(2..=MAX_ENTRIES).contains(&entries) {
            return Err(LayoutError::BadEntries);
        }
        if !block_size.is_power_of_two() || block_size < MIN_BLOCK_SIZE {
            return Err(LayoutError::BadBlockSize);
        }
        let ring_bytes = entries as usize * DESCRIPTOR_BYTES;
        let submit = RingLayout {
            which: Ring::Submit,
            ctrl: 0,
            slots: 2 * CTRL_BYTES,
            entries,
        };
        let ack = RingLayout {
            which: Ring::Ack,
            ctrl: CTRL_BYTES,
            slots: 2 * CTRL_BYTES + ring_bytes,
            entries,
        };
        let buffer = (2 * CTRL_BYTES + 2 * ring_bytes).next_multiple_of(BUFFER_ALIGN);
        let needed = buffer + block_size as usize;
        if len < needed {
            return Err(LayoutError::RegionTooSmall { len, needed });
        }
        let usable = ((len - buffer) as u64).min(MAX_BUFFER);
        let buffer_len = (usable & !(u64::from(block_size) - 1)) as usize;
        Ok(Layout {
            config,
            submit,
            ack,
            buffer,
            buffer_len,
        })
    }

    /// The configuration it was made from.
    pub fn config(&self) -> Config {
        self.config
    }

    /// Byte offset of the bulk buffer in the region.
    pub fn buffer_offset(&self) -> usize {
        self.buffer
    }

    /// Bytes of the bulk buffer (whole blocks).
    pub fn buffer_len(&self) -> usize {
        self.buffer_len
    }

    /// Blocks of the bulk buffer.
    pub fn blocks(&self) -> usize {
        self.buffer_len / self.config.block_size as usize
    }

    /// Zeroes both rings' indices and flags: before a stream starts on
    /// memory that held one before, while neither end uses it.
    pub fn reset(&self, region: &Region) {
        self.submit.reset(region);
        self.ack.reset(region);
    }

    /// Whether `packet`'s bytes lie in the buffer.
    fn contains(&self, packet: &Packet) -> bool {
        u64::from(packet.offset) + u64::from(packet.len) <= self.buffer_len as u64
    }
}

/// Bitmap words an allocator needs for the buffer of `region_len` bytes
/// under `config` (for `Source`'s `WORDS`): one bit per block.
pub const fn bitmap_words(region_len: usize, block_size: u32) -> usize {
    (region_len / block_size as usize).div_ceil(64)
}

/// Which ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ring {
    /// Source to sink.
    Submit,
    /// Sink to source.
    Ack,
}

/// A packet descriptor: where its payload lies in the buffer, and the
/// session's opcode and tag (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    offset: u32,
    len: u32,
    /// The session's opcode (the stream only carries it).
    pub op: u32,
    /// The session's tag (the stream only carries it).
    pub tag: u32,
}

impl Packet {
    /// Byte offset of the payload in the buffer.
    pub fn offset(&self) -> u32 {
        self.offset
    }

    /// Bytes of payload.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The same packet with `len` bytes of payload, if that is no more
    /// than it has (a source that filled fewer bytes than it allocated —
    /// a received frame — submits it so). `None` if `len` is longer.
    pub fn truncated(self, len: u32) -> Option<Packet> {
        (len <= self.len).then_some(Packet { len, ..self })
    }

    fn to_words(self) -> [u32; 4] {
        [self.offset, self.len, self.op, self.tag]
    }

    fn from_words([offset, len, op, tag]: [u32; 4]) -> Packet {
        Packet {
            offset,
            len,
            op,
            tag,
        }
    }
}

/// What went wrong, or why a call cannot go on now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// No room in the buffer now: take acknowledgements, or wait for them.
    BufferFull,
    /// A packet of `len` bytes is larger than the whole buffer.
    TooLarge { len: u32 },
    /// The ring is full: wait for space.
    RingFull,
    /// The packet is not this side's to use that way (not allocated here,
    /// in flight, or out of the buffer).
    NotOwned(Packet),
    /// The peer put this descriptor in a ring, and it names no valid packet
    /// (rule 7); it was taken off the ring and dropped, the stream goes on.
    Rejected(Packet),
    /// The peer stored an impossible index into `ring`; the stream is
    /// broken for good.
    BadIndex { ring: Ring, value: u32 },
    /// Signalling or waiting on a notification failed; the stream is
    /// broken for good.
    Notify(abi::Error),
}

impl Error {
    /// Whether the stream is broken (every later call fails the same way).
    pub fn is_fatal(&self) -> bool {
        matches!(self, Error::BadIndex { .. } | Error::Notify(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::BufferFull => f.write_str("packet buffer full"),
            Error::TooLarge { len } => write!(f, "packet of {len} bytes larger than the buffer"),
            Error::RingFull => f.write_str("ring full"),
            Error::NotOwned(p) => write!(f, "packet {p:?} not owned here"),
            Error::Rejected(p) => write!(f, "peer's descriptor {p:?} rejected"),
            Error::BadIndex { ring, value } => {
                write!(
                    f,
                    "peer stored impossible index {value} into the {ring:?} ring"
                )
            }
            Error::Notify(e) => write!(f, "notification failed: {e}"),
        }
    }
}

/// How a side wakes its peer and sleeps until woken: a pair of Pecan
/// notifications in components (`rt::stream`), threads and a condition
/// variable in tests.
pub trait Notify {
    /// Wakes the peer (Pecan: `Signal` on the peer's notification).
    fn signal_peer(&mut self) -> Result<(), abi::Error>;
    /// Sleeps until the peer has signalled since the last wait returned; a
    /// signal that came before the call is not lost (Pecan: `Wait` on this
    /// side's notification). May return without a signal.
    fn wait(&mut self) -> Result<(), abi::Error>;
}

/// What one side did, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets submitted (source) or taken (sink, rejected ones included).
    pub packets: u64,
    /// Signals sent to the peer.
    pub signals: u64,
    /// Waits on the own notification.
    pub waits: u64,
    /// Times a push found the ring full.
    pub ring_full: u64,
    /// Times `alloc` found the buffer full (source).
    pub buffer_full: u64,
    /// Descriptors from the peer that were rejected.
    pub rejected: u64,
}

/// What both ends have: the region, the ring this side produces and the
/// one it consumes, the notification and the counters.
#[derive(Debug)]
struct End<N> {
    region: Region,
    layout: Layout,
    producer: Producer,
    consumer: Consumer,
    notify: N,
    counters: Counters,
    broken: Option<Error>,
}

impl<N: Notify> End<N> {
    fn new(region: Region, config: Config, notify: N, produces: Ring) -> Result<Self, LayoutError> {
        let layout = Layout::new(region.len(), config)?;
        let (produced, consumed) = match produces {
            Ring::Submit => (layout.submit, layout.ack),
            Ring::Ack => (layout.ack, layout.submit),
        };
        Ok(End {
            region,
            layout,
            producer: Producer::new(produced),
            consumer: Consumer::new(consumed),
            notify,
            counters: Counters::default(),
            broken: None,
        })
    }

    /// The bytes of `packet` in the buffer (`NotOwned` if they are not all
    /// in it).
    fn payload(&self, packet: &Packet) -> Result<&[u8], Error> {
        let start = self.layout.buffer + packet.offset as usize;
        self.layout
            .contains(packet)
            .then(|| self.region.bytes(start, packet.len as usize))
            .flatten()
            .ok_or(Error::NotOwned(*packet))
    }

    /// The bytes of `packet` in the buffer, for writing.
    fn payload_mut(&mut self, packet: &Packet) -> Result<&mut [u8], Error> {
        let start = self.layout.buffer + packet.offset as usize;
        if !self.layout.contains(packet) {
            return Err(Error::NotOwned(*packet));
        }
        self.region
            .bytes_mut(start, packet.len as usize)
            .ok_or(Error::NotOwned(*packet))
    }

    /// Fails with the error that broke the stream, if one did.
    #[inline]
    fn check(&self) -> Result<(), Error> {
        if self.broken.is_none() {
            return Ok(());
        }
        self.broken_error()
    }

    #[cold]
    #[inline(never)]
    fn broken_error(&self) -> Result<(), Error> {
        self.broken.map_or(Ok(()), Err)
    }

    /// Records a fatal error.
    fn fail<T>(&mut self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = result {
            if e.is_fatal() {
                self.broken = Some(e);
            }
        }
        result
    }

    /// The peer broke the stream with an impossible index into `ring`.
    #[cold]
    #[inline(never)]
    fn bad_index(&mut self, ring: Ring, BadIndex(value): BadIndex) -> Error {
        let e = Error::BadIndex { ring, value };
        self.broken = Some(e);
        e
    }

    /// Signals the peer, lowering both of its flags: whichever condition
    /// it sleeps on, it re-checks all of them when it wakes, so a second
    /// flag left up would only cost a second, useless signal.
    fn signal(&mut self) -> Result<(), Error> {
        self.producer
            .ring
            .set(&self.region, Flag::WantsEntries, false);
        self.consumer
            .ring
            .set(&self.region, Flag::WantsSpace, false);
        self.counters.signals += 1;
        let result = self.notify.signal_peer().map_err(Error::Notify);
        self.fail(result)
    }

    /// Publishes the staged entries and the taken slots (rule 4), and
    /// signals the peer once if it sleeps on either (rule 5).
    fn flush(&mut self) -> Result<(), Error> {
        self.check()?;
        let entries = self.producer.publish(&self.region);
        let space = self.consumer.publish(&self.region);
        if entries || space {
            self.signal()?;
        }
        Ok(())
    }

    /// Stages `packet` in the produced ring; when it is full, publishes
    /// what is staged (so the peer sees a full ring) and fails with
    /// `RingFull`.
    fn push(&mut self, packet: Packet) -> Result<(), Error> {
        self.check()?;
        match self.producer.push(&self.region, packet) {
            Ok(true) => Ok(()),
            Ok(false) => self.ring_full(),
            Err(bad) => Err(self.bad_index(self.producer.ring.which, bad)),
        }
    }

    #[cold]
    fn ring_full(&mut self) -> Result<(), Error> {
        self.counters.ring_full += 1;
        self.flush()?;
        Err(Error::RingFull)
    }

    /// Takes the next entry of the consumed ring; gives the slots back when
    /// the ring is empty or E/2 are taken (rule 4).
    fn pop(&mut self) -> Result<Option<Packet>, Error> {
        self.check()?;
        let popped = match self.consumer.pop(&self.region) {
            Ok(popped) => popped,
            Err(bad) => return Err(self.bad_index(self.consumer.ring.which, bad)),
        };
        if (popped.is_none() || self.consumer.unpublished() >= self.layout.config.entries / 2)
            && self.consumer.publish(&self.region)
        {
            self.signal()?;
        }
        Ok(popped)
    }

    /// Sleeps until the consumed ring has entries (if `entries`) or the
    /// produced ring has a free slot (if `space`): rule 5.
    fn sleep(&mut self, entries: bool, space: bool) -> Result<(), Error> {
        self.flush()?;
        self.set_own_flags(entries, space, true);
        fence(Ordering::SeqCst);
        let ready = self.ready_after_raise(entries, space);
        let ready = self.fail(ready);
        if let Ok(false) = ready {
            self.counters.waits += 1;
            let waited = self.notify.wait().map_err(Error::Notify);
            self.fail(waited)?;
        }
        self.set_own_flags(entries, space, false);
        ready.map(drop)
    }

    /// [`Self::sleep`] split at the wait, for a side that waits in an
    /// event loop (a server's `Recv`, which returns on any of its
    /// notification's signals) rather than in `sleep`: flushes and raises
    /// the flags as `sleep` does, then returns whether the wait is over
    /// already. `true`: the flags are lowered again, look now. `false`:
    /// they stay up, and the peer signals — lowering them — when it
    /// changes the ring (rule 5's handshake, unchanged).
    fn arm(&mut self, entries: bool, space: bool) -> Result<bool, Error> {
        self.flush()?;
        self.set_own_flags(entries, space, true);
        fence(Ordering::SeqCst);
        let ready = self.ready_after_raise(entries, space);
        let ready = self.fail(ready)?;
        if ready {
            self.set_own_flags(entries, space, false);
        }
        Ok(ready)
    }

    /// Raises or lowers this side's flags: `WantsEntries` on the consumed
    /// ring if `entries`, `WantsSpace` on the produced one if `space`.
    fn set_own_flags(&self, entries: bool, space: bool, up: bool) {
        if entries {
            self.consumer.ring.set(&self.region, Flag::WantsEntries, up);
        }
        if space {
            self.producer.ring.set(&self.region, Flag::WantsSpace, up);
        }
    }

    fn ready_after_raise(&mut self, entries: bool, space: bool) -> Result<bool, Error> {
        if entries {
            match self.consumer.entries_after_raise(&self.region) {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(bad) => return Err(self.bad_index(self.consumer.ring.which, bad)),
            }
        }
        if !space {
            return Ok(false);
        }
        match self.producer.space_after_raise(&self.region) {
            Ok(ready) => Ok(ready),
            Err(bad) => Err(self.bad_index(self.producer.ring.which, bad)),
        }
    }
}
