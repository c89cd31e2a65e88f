//! Test and benchmark traffic for a stream, shared by the host tests and
//! the Pecan test components (`test-stream-source`,
//! `test-stream-sink-server`), so both run the very same checks.
//!
//! - [`run_source`] and [`run_sink`] push a workload through a stream the
//!   way an application would: the source takes acknowledgements, allocates,
//!   fills and submits until the buffer or the ring is full, then sleeps;
//!   the sink takes packets, processes them, holds up to `hold` of them and
//!   acknowledges a random one of those it holds (out of order) when the
//!   pool is full or no packet is waiting. After the last packet the source
//!   submits an end marker (tag [`END_TAG`], `op` = the number of packets),
//!   so the sink can tell a lost packet from a slow one. Descriptors the
//!   stream rejects (a hostile peer's) are skipped: the stream counts them.
//! - [`Verify`] / [`VerifySink`]: packets of random sizes ([`Traffic`],
//!   seeded), each payload pseudo-random, its checksum in `op` and its
//!   sequence number in `tag`. The sink checks the length, the checksum
//!   (against the payload and against the expected data) and that no
//!   sequence number comes twice or is missing at the end; then it answers
//!   by flipping every payload bit pattern with `0xa5` and putting the new
//!   checksum in `op`, and the source checks that answer for every
//!   acknowledgement. So every byte is checked both ways.
//! - [`Bulk`] / [`BulkSink`]: fixed-size packets copied in from a private
//!   buffer and out into one (a pipe's write and read), in-order
//!   acknowledgements: the throughput benchmark.

use core::fmt;

use super::sink::NotAcked;
use super::{Error, Notify, Packet, Sink, Source, Taken};

/// The end marker's tag (sequence numbers are below it).
pub const END_TAG: u32 = u32::MAX;

/// xorshift64*: small, fast and deterministic; not for secrets.
#[derive(Clone, Debug)]
pub struct Rng(u64);

/// SplitMix64's finaliser: spreads nearby seeds far apart.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator for `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng(mix(seed) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (0 for `n = 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// A checksum over 8-byte little-endian words (the tail zero-padded) and
/// the length: a bijection per word, so any change of a single word —
/// any corrupted byte — changes the state, which later steps never merge
/// back.
struct Checksum(u64);

impl Checksum {
    fn new(len: usize) -> Checksum {
        Checksum(0xcbf2_9ce4_8422_2325 ^ len as u64)
    }

    fn word(&mut self, w: u64) {
        self.0 = (self.0 ^ w)
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(29);
    }

    fn finish(self) -> u32 {
        (self.0 ^ (self.0 >> 32)) as u32
    }
}

/// The checksum of `bytes`.
pub fn checksum(bytes: &[u8]) -> u32 {
    let mut sum = Checksum::new(bytes.len());
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut w = [0; 8];
        w.copy_from_slice(chunk);
        sum.word(u64::from_le_bytes(w));
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut w = [0; 8];
        w[..tail.len()].copy_from_slice(tail);
        sum.word(u64::from_le_bytes(w));
    }
    sum.finish()
}

/// The sink's answer: every byte XOR this.
const ANSWER: u8 = 0xa5;

/// Turns a payload into the sink's answer (and back).
pub fn answer(bytes: &mut [u8]) {
    let mut chunks = bytes.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut w = [0; 8];
        w.copy_from_slice(chunk);
        let flipped = u64::from_le_bytes(w) ^ u64::from_ne_bytes([ANSWER; 8]);
        chunk.copy_from_slice(&flipped.to_le_bytes());
    }
    for b in chunks.into_remainder() {
        *b ^= ANSWER;
    }
}

/// The packets of a verification run: `count` packets, sizes and contents
/// a function of `seed` and the sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Traffic {
    pub seed: u64,
    pub count: u32,
    /// Largest packet (at least 4096).
    pub max_len: u32,
}

impl Traffic {
    fn rng(&self, seq: u32, salt: u64) -> Rng {
        Rng::new(self.seed ^ (u64::from(seq) << 8 | salt).rotate_left(24))
    }

    /// Bytes of packet `seq`: 80 % up to 256 (0 included), 18 % up to 4
    /// KiB, 2 % up to `max_len` — mostly small, so the rings fill, with
    /// large ones that fill the buffer.
    pub fn len(&self, seq: u32) -> u32 {
        let mut rng = self.rng(seq, 1);
        let max = u64::from(self.max_len.max(4096));
        let len = match rng.below(100) {
            0..80 => rng.below(257),
            80..98 => 257 + rng.below(4096 - 256),
            _ => 4097 + rng.below(max - 4096),
        };
        len as u32
    }

    /// Fills `buf` with packet `seq`'s payload.
    pub fn fill(&self, seq: u32, buf: &mut [u8]) {
        let mut rng = self.rng(seq, 2);
        let mut chunks = buf.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        let tail = chunks.into_remainder();
        let last = rng.next_u64().to_le_bytes();
        tail.copy_from_slice(&last[..tail.len()]);
    }

    /// The checksum packet `seq` of `len` bytes must have, as the source
    /// sent it or (`answered`) as the sink answers it — computed from the
    /// generator, without the payload.
    pub fn expected_checksum(&self, seq: u32, len: u32, answered: bool) -> u32 {
        let len = len as usize;
        let mut rng = self.rng(seq, 2);
        let mut sum = Checksum::new(len);
        let flip = if answered {
            u64::from_ne_bytes([ANSWER; 8])
        } else {
            0
        };
        for _ in 0..len / 8 {
            sum.word(rng.next_u64() ^ flip);
        }
        let tail = len % 8;
        if tail != 0 {
            let mask = (1u64 << (8 * tail)) - 1;
            sum.word((rng.next_u64() ^ flip) & mask);
        }
        sum.finish()
    }
}

/// Which sequence numbers arrived: a bitmap of `WORDS * 64` bits.
#[derive(Clone, Debug)]
pub struct Seen<const WORDS: usize> {
    bits: [u64; WORDS],
    count: u32,
}

impl<const WORDS: usize> Default for Seen<WORDS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const WORDS: usize> Seen<WORDS> {
    /// Nothing seen.
    pub const fn new() -> Self {
        Seen {
            bits: [0; WORDS],
            count: 0,
        }
    }

    /// Records `seq` of a run of `count`: `Unknown` if it is out of range,
    /// `Duplicate` if it came before.
    pub fn mark(&mut self, seq: u32, count: u32) -> Result<(), Fault> {
        let i = seq as usize;
        if seq >= count || i >= WORDS * 64 {
            return Err(Fault::Unknown { tag: seq });
        }
        if super::bitmap::get(&self.bits, i) {
            return Err(Fault::Duplicate { tag: seq });
        }
        super::bitmap::put(&mut self.bits, i, true);
        self.count += 1;
        Ok(())
    }

    /// How many were recorded.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The first of `0..count` not seen.
    pub fn first_missing(&self, count: u32) -> Option<u32> {
        let limit = (count as usize).min(WORDS * 64);
        let i = super::bitmap::find(&self.bits, false, 0, limit);
        (i < limit).then_some(i as u32)
    }
}

/// What a run found wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A stream call failed.
    Stream(Error),
    /// A packet with a sequence number outside the run.
    Unknown { tag: u32 },
    /// A sequence number that came before.
    Duplicate { tag: u32 },
    /// A packet of the wrong length.
    Length { tag: u32, len: u32, expected: u32 },
    /// A payload that does not match its checksum or the expected data.
    Corrupt { tag: u32 },
    /// The end marker came, but packet `first` never did (`seen` of
    /// `count` arrived).
    Missing { first: u32, seen: u32, count: u32 },
}

impl From<Error> for Fault {
    fn from(e: Error) -> Fault {
        Fault::Stream(e)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Fault::Stream(e) => write!(f, "stream: {e}"),
            Fault::Unknown { tag } => write!(f, "packet {tag} is not part of the run"),
            Fault::Duplicate { tag } => write!(f, "packet {tag} came twice"),
            Fault::Length { tag, len, expected } => {
                write!(f, "packet {tag} has {len} bytes, expected {expected}")
            }
            Fault::Corrupt { tag } => write!(f, "packet {tag} is corrupted"),
            Fault::Missing { first, seen, count } => {
                write!(
                    f,
                    "{seen} of {count} packets arrived, first missing: {first}"
                )
            }
        }
    }
}

/// What a source sends.
pub trait Produce {
    /// Whether [`Produce::acked`] looks at the payload (if not, it gets an
    /// empty one).
    const READS_ANSWERS: bool;
    /// Packets in the run.
    fn count(&self) -> u32;
    /// Bytes of packet `seq`.
    fn len(&self, seq: u32) -> u32;
    /// Fills packet `seq`'s payload; returns its `op`.
    fn fill(&mut self, seq: u32, payload: &mut [u8]) -> u32;
    /// Checks an acknowledged data packet with its payload.
    fn acked(&mut self, packet: &Packet, payload: &[u8]) -> Result<(), Fault>;
}

/// What a sink does with each packet.
pub trait Consume {
    /// Processes a data packet (its `tag` below [`END_TAG`]) and its
    /// payload; returns the `op` its acknowledgement carries.
    fn take(&mut self, packet: &Packet, payload: &mut [u8]) -> Result<u32, Fault>;
    /// The end marker came: the source sent `count` packets.
    fn end(&mut self, count: u32) -> Result<(), Fault>;
}

/// Pushes `work` through `source` (see the module doc): returns when every
/// packet and the end marker are acknowledged.
pub fn run_source<N: Notify, W: Produce, const WORDS: usize>(
    source: &mut Source<N, WORDS>,
    work: &mut W,
) -> Result<(), Fault> {
    let count = work.count();
    // Sequence numbers `0..count` are data, `count` the end marker.
    let mut next = 0;
    let mut acked = 0;
    let mut pending: Option<Packet> = None;
    while acked <= count {
        while let Some(packet) = skip_rejected(|| source.get_ack())? {
            if packet.tag != END_TAG {
                let payload = if W::READS_ANSWERS {
                    source.payload(&packet)?
                } else {
                    &[]
                };
                work.acked(&packet, payload)?;
            }
            source.release(packet)?;
            acked += 1;
        }
        if acked > count {
            break;
        }
        let mut ring_full = false;
        loop {
            let packet = match pending.take() {
                Some(packet) => packet,
                None if next <= count => {
                    let len = if next < count { work.len(next) } else { 0 };
                    let mut packet = match source.alloc(len) {
                        Ok(packet) => packet,
                        Err(Error::BufferFull) => break,
                        Err(e) => return Err(e.into()),
                    };
                    if next < count {
                        packet.op = work.fill(next, source.payload_mut(&packet)?);
                        packet.tag = next;
                    } else {
                        packet.op = count;
                        packet.tag = END_TAG;
                    }
                    next += 1;
                    packet
                }
                None => break,
            };
            match source.submit(packet) {
                Ok(()) => {}
                Err(Error::RingFull) => {
                    pending = Some(packet);
                    ring_full = true;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        if ring_full {
            source.wait_for_submit_space()?;
        } else {
            source.wait_for_acks()?;
        }
    }
    source.flush()?;
    Ok(())
}

/// Takes packets from `sink` until the end marker, hands each to `work`
/// and acknowledges it — out of order when `hold` > 0 (up to `HOLD`): it
/// keeps up to `hold` packets and acknowledges a random one of them (drawn
/// from `rng`) when the pool is full or no packet waits. Returns the
/// number of data packets.
pub fn run_sink<N: Notify, const HOLD: usize>(
    sink: &mut Sink<N>,
    work: &mut impl Consume,
    hold: usize,
    rng: &mut Rng,
) -> Result<u32, Fault> {
    let hold = hold.min(HOLD);
    let mut pool: [Option<Taken>; HOLD] = core::array::from_fn(|_| None);
    let mut held = 0;
    let mut packets = 0;
    loop {
        let Some(mut taken) = skip_rejected(|| sink.get())? else {
            if held > 0 {
                ack_held(sink, &mut pool, &mut held, rng)?;
            } else {
                sink.wait_for_packets()?;
            }
            continue;
        };
        let packet = taken.packet();
        if packet.tag == END_TAG {
            work.end(packet.op)?;
            while held > 0 {
                ack_held(sink, &mut pool, &mut held, rng)?;
            }
            ack(sink, taken)?;
            sink.flush()?;
            return Ok(packets);
        }
        let op = work.take(&packet, sink.payload_mut(&taken)?)?;
        taken.set_op(op);
        packets += 1;
        if hold == 0 {
            ack(sink, taken)?;
            continue;
        }
        pool[held] = Some(taken);
        held += 1;
        if held == hold {
            ack_held(sink, &mut pool, &mut held, rng)?;
        }
    }
}

/// The next packet `take` gives, skipping descriptors the peer got wrong
/// (`Rejected`: the stream dropped and counted them, rule 7) — what a
/// robust application does.
fn skip_rejected<T>(
    mut take: impl FnMut() -> Result<Option<T>, Error>,
) -> Result<Option<T>, Error> {
    loop {
        match take() {
            Err(Error::Rejected(_)) => {}
            other => return other,
        }
    }
}

/// Acknowledges a random one of the `held` packets of `pool`.
fn ack_held<N: Notify>(
    sink: &mut Sink<N>,
    pool: &mut [Option<Taken>],
    held: &mut usize,
    rng: &mut Rng,
) -> Result<(), Fault> {
    let i = rng.below(*held as u64) as usize;
    *held -= 1;
    pool.swap(i, *held);
    match pool[*held].take() {
        Some(taken) => ack(sink, taken),
        None => Ok(()),
    }
}

/// Acknowledges `taken`, sleeping while the ring is full.
fn ack<N: Notify>(sink: &mut Sink<N>, mut taken: Taken) -> Result<(), Fault> {
    loop {
        match sink.ack(taken) {
            Ok(()) => return Ok(()),
            Err(NotAcked {
                error: Error::RingFull,
                packet,
            }) => {
                taken = packet;
                sink.wait_for_ack_space()?;
            }
            Err(NotAcked { error, .. }) => return Err(error.into()),
        }
    }
}

/// The source of a verification run: `traffic`, checking every
/// acknowledgement; `acked` records the sequence numbers that came back.
#[derive(Debug)]
pub struct Verify<const WORDS: usize> {
    pub traffic: Traffic,
    pub acked: Seen<WORDS>,
}

impl<const WORDS: usize> Produce for Verify<WORDS> {
    const READS_ANSWERS: bool = true;

    fn count(&self) -> u32 {
        self.traffic.count
    }

    fn len(&self, seq: u32) -> u32 {
        self.traffic.len(seq)
    }

    fn fill(&mut self, seq: u32, payload: &mut [u8]) -> u32 {
        self.traffic.fill(seq, payload);
        checksum(payload)
    }

    fn acked(&mut self, packet: &Packet, payload: &[u8]) -> Result<(), Fault> {
        let tag = packet.tag;
        self.acked.mark(tag, self.traffic.count)?;
        check_length(&self.traffic, packet)?;
        let expected = self.traffic.expected_checksum(tag, packet.len(), true);
        if checksum(payload) != expected || packet.op != expected {
            return Err(Fault::Corrupt { tag });
        }
        Ok(())
    }
}

fn check_length(traffic: &Traffic, packet: &Packet) -> Result<(), Fault> {
    let expected = traffic.len(packet.tag);
    if packet.len() != expected {
        return Err(Fault::Length {
            tag: packet.tag,
            len: packet.len(),
            expected,
        });
    }
    Ok(())
}

/// The sink of a verification run: checks every packet of `traffic` and
/// answers it; `seen` records the sequence numbers that arrived.
#[derive(Debug)]
pub struct VerifySink<const WORDS: usize> {
    pub traffic: Traffic,
    pub seen: Seen<WORDS>,
}

impl<const WORDS: usize> Consume for VerifySink<WORDS> {
    fn take(&mut self, packet: &Packet, payload: &mut [u8]) -> Result<u32, Fault> {
        let tag = packet.tag;
        self.seen.mark(tag, self.traffic.count)?;
        check_length(&self.traffic, packet)?;
        let sum = checksum(payload);
        if sum != packet.op || sum != self.traffic.expected_checksum(tag, packet.len(), false) {
            return Err(Fault::Corrupt { tag });
        }
        answer(payload);
        Ok(checksum(payload))
    }

    fn end(&mut self, count: u32) -> Result<(), Fault> {
        let seen = self.seen.count();
        match self.seen.first_missing(self.traffic.count) {
            Some(first) => Err(Fault::Missing {
                first,
                seen,
                count: self.traffic.count,
            }),
            None if count != self.traffic.count => Err(Fault::Missing {
                first: seen,
                seen,
                count,
            }),
            None => Ok(()),
        }
    }
}

/// The source of a throughput run: `count` packets of `data.len()` bytes,
/// each a copy of `data` (the runtime's `memcpy`).
#[derive(Debug)]
pub struct Bulk<'a> {
    pub data: &'a [u8],
    pub count: u32,
}

impl Produce for Bulk<'_> {
    const READS_ANSWERS: bool = false;

    fn count(&self) -> u32 {
        self.count
    }

    fn len(&self, _: u32) -> u32 {
        self.data.len() as u32
    }

    fn fill(&mut self, _: u32, payload: &mut [u8]) -> u32 {
        payload.copy_from_slice(self.data);
        0
    }

    fn acked(&mut self, _: &Packet, _: &[u8]) -> Result<(), Fault> {
        Ok(())
    }
}

/// The sink of a throughput run: copies each payload out into `out` (at
/// least as long as a packet), counts bytes.
#[derive(Debug)]
pub struct BulkSink<'a> {
    pub out: &'a mut [u8],
    pub bytes: u64,
}

impl Consume for BulkSink<'_> {
    fn take(&mut self, packet: &Packet, payload: &mut [u8]) -> Result<u32, Fault> {
        let room = self.out.len() as u32;
        let out = self.out.get_mut(..payload.len()).ok_or(Fault::Length {
            tag: packet.tag,
            len: packet.len(),
            expected: room,
        })?;
        out.copy_from_slice(payload);
        self.bytes += payload.len() as u64;
        Ok(0)
    }

    fn end(&mut self, _: u32) -> Result<(), Fault> {
        Ok(())
    }
}
