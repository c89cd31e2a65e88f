//! The source end: allocates, submits, takes acknowledgements, releases.

use super::alloc::{AllocError, BlockAllocator};
use super::region::Region;
use super::{bitmap, Config, Counters, End, Error, Layout, LayoutError, Notify, Packet, Ring};

/// The source end of a stream (see the module doc of `super`), with an
/// allocator for up to `WORDS * 64` buffer blocks ([`super::bitmap_words`]).
///
/// A typical loop:
///
/// ```text
/// loop {
///     while let Some(p) = source.get_ack()? { use(p); source.release(p)?; }
///     match source.alloc(len) {
///         Ok(p) => { fill(source.payload_mut(&p)?); submit or, on RingFull, wait_for_submit_space }
///         Err(Error::BufferFull) => source.wait_for_acks()?,
///         ...
///     }
/// }
/// ```
///
/// Every packet the source hands out is checked against its own private
/// bookkeeping before use: payload access, submission and release need a
/// packet that is allocated here and not in flight, and an
/// acknowledgement must name a packet in flight (rule 7).
#[derive(Debug)]
pub struct Source<N, const WORDS: usize> {
    end: End<N>,
    alloc: BlockAllocator<WORDS>,
    /// Bit b: the allocation that starts at block b is submitted and not
    /// acknowledged yet.
    in_flight: [u64; WORDS],
    in_flight_count: usize,
    shift: u32,
}

impl<N: Notify, const WORDS: usize> Source<N, WORDS> {
    /// The source end over `region` (whose control words are zero, see the
    /// module doc), waking and sleeping through `notify`.
    pub fn new(region: Region, config: Config, notify: N) -> Result<Self, LayoutError> {
        let end = End::new(region, config, notify, Ring::Submit)?;
        let alloc = BlockAllocator::new(end.layout.blocks(), config.block_size)?;
        Ok(Source {
            end,
            alloc,
            in_flight: [0; WORDS],
            in_flight_count: 0,
            shift: config.block_size.trailing_zeros(),
        })
    }

    /// Where everything lies.
    pub fn layout(&self) -> &Layout {
        &self.end.layout
    }

    /// What this end did so far.
    pub fn counters(&self) -> Counters {
        self.end.counters
    }

    /// Packets submitted and not acknowledged yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight_count
    }

    /// Free buffer bytes (not necessarily adjacent).
    pub fn free_bytes(&self) -> usize {
        self.alloc.free_bytes()
    }

    /// A packet of `len` bytes in the buffer, owned by this side until it
    /// is submitted: `BufferFull` when there is no room now, `TooLarge`
    /// when there never is.
    pub fn alloc(&mut self, len: u32) -> Result<Packet, Error> {
        self.end.check()?;
        match self.alloc.alloc(len) {
            Ok(offset) => Ok(Packet {
                offset,
                len,
                op: 0,
                tag: 0,
            }),
            Err(AllocError::Full) => {
                self.end.counters.buffer_full += 1;
                Err(Error::BufferFull)
            }
            Err(AllocError::TooLarge) => Err(Error::TooLarge { len }),
        }
    }

    /// Whether `packet` is allocated here, within its allocation, and in
    /// flight (`true`) or not (`false`).
    fn is_owned(&self, packet: &Packet, in_flight: bool) -> bool {
        self.alloc.owns(packet.offset, packet.len)
            && bitmap::get(&self.in_flight, (packet.offset >> self.shift) as usize) == in_flight
    }

    /// Checks that this side owns `packet` (allocated, not in flight).
    fn owned(&self, packet: &Packet) -> Result<(), Error> {
        if self.is_owned(packet, false) {
            Ok(())
        } else {
            Err(Error::NotOwned(*packet))
        }
    }

    /// The payload of a packet this side owns.
    pub fn payload(&self, packet: &Packet) -> Result<&[u8], Error> {
        self.owned(packet)?;
        self.end.payload(packet)
    }

    /// The payload of a packet this side owns, for writing.
    pub fn payload_mut(&mut self, packet: &Packet) -> Result<&mut [u8], Error> {
        self.owned(packet)?;
        self.end.payload_mut(packet)
    }

    /// Stages `packet` for the sink (published at the next [`Self::flush`],
    /// or when the ring fills up). `RingFull`: not submitted, still owned
    /// here; wait for space ([`Self::wait_for_submit_space`]) and retry.
    pub fn submit(&mut self, packet: Packet) -> Result<(), Error> {
        self.end.check()?;
        self.owned(&packet)?;
        self.end.push(packet)?;
        bitmap::put(
            &mut self.in_flight,
            (packet.offset >> self.shift) as usize,
            true,
        );
        self.in_flight_count += 1;
        self.end.counters.packets += 1;
        Ok(())
    }

    /// Publishes the staged packets and the acknowledgement slots taken,
    /// signalling the sink if it sleeps on either.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.end.flush()
    }

    /// The next acknowledged packet, owned by this side again (its payload
    /// readable, then [`Self::release`] it); `None` if there is none now.
    /// `Rejected`: the sink acknowledged something that is not in flight;
    /// the entry is dropped and nothing else changes.
    pub fn get_ack(&mut self) -> Result<Option<Packet>, Error> {
        let Some(ack) = self.end.pop()? else {
            return Ok(None);
        };
        if !self.is_owned(&ack, true) {
            self.end.counters.rejected += 1;
            return Err(Error::Rejected(ack));
        }
        bitmap::put(
            &mut self.in_flight,
            (ack.offset >> self.shift) as usize,
            false,
        );
        self.in_flight_count -= 1;
        Ok(Some(ack))
    }

    /// Gives a packet's space back: one this side owns (acknowledged, or
    /// allocated and never submitted).
    pub fn release(&mut self, packet: Packet) -> Result<(), Error> {
        // The whole allocation goes, whatever `len` says: it must not be in
        // flight (bits are only ever set for allocations in the buffer),
        // and `free` checks that it is a live one.
        let block = (packet.offset >> self.shift) as usize;
        if block >= WORDS * 64 || bitmap::get(&self.in_flight, block) {
            return Err(Error::NotOwned(packet));
        }
        self.alloc
            .free(packet.offset)
            .map(drop)
            .map_err(|_| Error::NotOwned(packet))
    }

    /// Flushes and asks the sink to signal when an acknowledgement
    /// arrives (and, with `space`, when the submit ring gets a free
    /// slot), for a source that waits in an event loop instead of
    /// [`Self::wait_for_acks`]: `true` if that is so already (nothing
    /// asked: look now), `false` if the sink will signal.
    pub fn arm(&mut self, space: bool) -> Result<bool, Error> {
        self.end.arm(true, space)
    }

    /// Flushes, then sleeps until an acknowledgement arrives (returns at
    /// once if one is there). May return without one: check again.
    pub fn wait_for_acks(&mut self) -> Result<(), Error> {
        self.end.sleep(true, false)
    }

    /// Flushes, then sleeps until the submit ring has a free slot or an
    /// acknowledgement arrives (rule 6).
    pub fn wait_for_submit_space(&mut self) -> Result<(), Error> {
        self.end.sleep(true, true)
    }
}
