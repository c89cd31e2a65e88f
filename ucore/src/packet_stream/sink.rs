//! The sink end: takes packets, gives access to their payload,
//! acknowledges them.

use super::region::Region;
use super::{Config, Counters, End, Error, Layout, LayoutError, Notify, Packet, Ring};

/// A packet the sink has taken and not acknowledged yet: the only way to
/// its payload, and consumed by [`Sink::ack`], so the sink cannot touch the
/// payload once the source owns it again. Its offset and length were
/// checked against the buffer when it was taken.
#[derive(Debug, PartialEq, Eq)]
pub struct Taken {
    packet: Packet,
}

impl Taken {
    /// The descriptor as the source submitted it (with any changes made
    /// here since).
    pub fn packet(&self) -> Packet {
        self.packet
    }

    /// Sets the opcode the acknowledgement carries (a result code, say).
    pub fn set_op(&mut self, op: u32) {
        self.packet.op = op;
    }

    /// Sets the tag the acknowledgement carries.
    pub fn set_tag(&mut self, tag: u32) {
        self.packet.tag = tag;
    }

    /// Reports fewer bytes than submitted (a short read); `false` and
    /// unchanged if `len` is longer.
    pub fn shorten(&mut self, len: u32) -> bool {
        if len > self.packet.len {
            return false;
        }
        self.packet.len = len;
        true
    }
}

/// [`Sink::ack`] could not queue the acknowledgement: why, and the packet
/// back.
#[derive(Debug, PartialEq, Eq)]
pub struct NotAcked {
    pub error: Error,
    pub packet: Taken,
}

/// The sink end of a stream (see the module doc of `super`).
///
/// A typical loop:
///
/// ```text
/// loop {
///     match sink.get()? {
///         Some(t) => { process(sink.payload(&t)?); ack t, on RingFull wait_for_ack_space and retry }
///         None => sink.wait_for_packets()?,
///     }
/// }
/// ```
#[derive(Debug)]
pub struct Sink<N> {
    end: End<N>,
}

impl<N: Notify> Sink<N> {
    /// The sink end over `region` (whose control words are zero, see the
    /// module doc), waking and sleeping through `notify`.
    pub fn new(region: Region, config: Config, notify: N) -> Result<Self, LayoutError> {
        Ok(Sink {
            end: End::new(region, config, notify, Ring::Ack)?,
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

    /// The next submitted packet; `None` if there is none now. `Rejected`:
    /// the source submitted a descriptor outside the buffer; the entry is
    /// dropped (never acknowledged) and the stream goes on.
    pub fn get(&mut self) -> Result<Option<Taken>, Error> {
        let Some(packet) = self.end.pop()? else {
            return Ok(None);
        };
        self.end.counters.packets += 1;
        if !self.end.layout.contains(&packet) {
            self.end.counters.rejected += 1;
            return Err(Error::Rejected(packet));
        }
        Ok(Some(Taken { packet }))
    }

    /// The payload of a taken packet.
    pub fn payload(&self, taken: &Taken) -> Result<&[u8], Error> {
        self.end.payload(&taken.packet)
    }

    /// The payload of a taken packet, for writing.
    pub fn payload_mut(&mut self, taken: &Taken) -> Result<&mut [u8], Error> {
        self.end.payload_mut(&taken.packet)
    }

    /// Stages the acknowledgement of `taken` (published at the next
    /// [`Self::flush`], or when the ring fills up). On `RingFull` the
    /// packet comes back: wait ([`Self::wait_for_ack_space`]) and retry.
    pub fn ack(&mut self, taken: Taken) -> Result<(), NotAcked> {
        match self.end.push(taken.packet) {
            Ok(()) => Ok(()),
            Err(error) => Err(NotAcked {
                error,
                packet: taken,
            }),
        }
    }

    /// Publishes the staged acknowledgements and the submit slots taken,
    /// signalling the source if it sleeps on either.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.end.flush()
    }

    /// Flushes and asks the source to signal when a packet arrives (and,
    /// with `space`, when the acknowledgement ring gets a free slot), for
    /// a sink that waits in an event loop instead of
    /// [`Self::wait_for_packets`]: `true` if that is so already (nothing
    /// asked: look now), `false` if the source will signal.
    pub fn arm(&mut self, space: bool) -> Result<bool, Error> {
        self.end.arm(true, space)
    }

    /// Flushes, then sleeps until a packet arrives (returns at once if one
    /// is there). May return without one: check again.
    pub fn wait_for_packets(&mut self) -> Result<(), Error> {
        self.end.sleep(true, false)
    }

    /// Flushes, then sleeps until the acknowledgement ring has a free slot.
    pub fn wait_for_ack_space(&mut self) -> Result<(), Error> {
        self.end.sleep(false, true)
    }
}
