//! The volume's block device: a Block session (`rt::session::block`)
//! as the `fat` crate's `BlockDevice`. A read or write of many blocks is
//! cut into requests of the provider's largest size, all in flight at
//! once, and waited for; `flush` is a Block sync.
//!
//! Reads started ahead (`start_read`, the crate's asynchronous
//! read-ahead) are submitted and left in flight: their acknowledgements,
//! whenever they arrive — while another transfer waits, or when the
//! crate finishes the read — are kept with their data in the stream
//! until `finish_read` copies it out; a cancelled read's packets are
//! released as they come back. Every acknowledgement is sorted by its
//! packet: the transfer waiting, a started read, or a cancelled one.

use alloc::string::String;
use alloc::vec::Vec;

use fat::{BlockDevice, DeviceError, ReadId};
use rt::session::block::{self, BlockError, BlockInfo, BlockSource};
use rt::stream::Packet;

/// Where a transfer's bytes go or come from.
enum Io<'b> {
    Read(&'b mut [u8]),
    Write(&'b [u8]),
    /// A sync: one packet that moves nothing.
    Sync,
}

impl Io<'_> {
    fn len(&self) -> usize {
        match self {
            Io::Read(b) => b.len(),
            Io::Write(b) => b.len(),
            Io::Sync => 0,
        }
    }
}

/// A request of a started read: its packet's stream offset, where its
/// bytes go in the read, and its acknowledgement once here (the packet,
/// its data still in the stream).
struct Part {
    offset: u32,
    at: usize,
    ack: Option<Packet>,
}

/// A read started ahead and not finished: its requests.
struct Started {
    id: u64,
    parts: Vec<Part>,
}

/// The Block session's stream and what it describes.
pub struct BlockDisk {
    stream: BlockSource,
    info: BlockInfo,
    /// Reads started and not finished or cancelled.
    started: Vec<Started>,
    /// Stream offsets of cancelled reads' packets still in flight:
    /// released when acknowledged.
    orphans: Vec<u32>,
    /// The next started read's name.
    next_id: u64,
}

/// The device error a Block failure is (its status, or an I/O error).
fn device_error(e: BlockError) -> DeviceError {
    match e {
        BlockError::Status(s) => DeviceError(s),
        _ => DeviceError(block::STATUS_IO),
    }
}

/// The device error of a stream failure.
fn stream_error(_: rt::stream::Error) -> DeviceError {
    DeviceError(block::STATUS_IO)
}

/// The requests in flight of one transfer: (stream offset, offset in the
/// bytes) each, and the first failure's status.
#[derive(Default)]
struct Inflight {
    packets: Vec<(u32, usize)>,
    failed: Option<u32>,
}

impl BlockDisk {
    /// Opens the Block session (own slot `slot`, donating from the
    /// service's quota through `donor`/`table`) and its stream (`stream`
    /// slots, mapped at `va`).
    pub fn open(
        slot: u32,
        donor: u32,
        table: u32,
        stream: [u32; 3],
        va: u64,
    ) -> Result<BlockDisk, String> {
        // SAFETY: the caller gives [va, va + 2 MiB) to the stream alone.
        let (stream, info) = unsafe { block::connect(slot, donor, table, stream, va) }?;
        Ok(BlockDisk {
            stream,
            info,
            started: Vec::new(),
            orphans: Vec::new(),
            next_id: 1,
        })
    }

    /// A packet of `len` bytes. While the buffer is full it takes
    /// acknowledgements (each to `take`); when nothing is in flight and
    /// the buffer is still full (started reads hold it), the started
    /// reads are dropped (their `finish_read` reads then). `None`: there
    /// is no room, nothing to wait for and nothing to drop.
    fn alloc(
        &mut self,
        len: u32,
        io: &mut Io<'_>,
        inflight: &mut Inflight,
    ) -> Result<Option<Packet>, DeviceError> {
        loop {
            match self.stream.alloc(len) {
                Ok(p) => return Ok(Some(p)),
                Err(rt::stream::Error::BufferFull) if self.stream.in_flight() > 0 => {
                    if let Some(ack) = self.stream.next_ack(true).map_err(device_error)? {
                        self.take(ack, io, inflight);
                    }
                }
                Err(rt::stream::Error::BufferFull) if !self.started.is_empty() => {
                    for s in core::mem::take(&mut self.started) {
                        self.drop_started(s);
                    }
                }
                Err(rt::stream::Error::BufferFull) => return Ok(None),
                Err(e) => return Err(stream_error(e)),
            }
        }
    }

    /// Submits `p` as request `op` from block `first`, taking the
    /// acknowledgements that arrive meanwhile (a full ring).
    fn submit(
        &mut self,
        p: Packet,
        op: u32,
        first: u32,
        io: &mut Io<'_>,
        inflight: &mut Inflight,
    ) -> Result<(), DeviceError> {
        let mut early: Vec<Packet> = Vec::new();
        let mut keep = |_: &mut BlockSource, ack: Packet| early.push(ack);
        let r = self
            .stream
            .submit_waiting(p, op, first, &mut keep)
            .map_err(device_error);
        for ack in early {
            self.take(ack, io, inflight);
        }
        r
    }

    /// Sends `op` on `io`'s bytes from `block` (a sync: one empty
    /// packet) in requests of at most the provider's maximum, all in
    /// flight: the requests' (stream offset, offset in the bytes), once
    /// submitted and published. `Ok(None)`: the buffer has no room at all.
    fn send(
        &mut self,
        op: u32,
        block: u64,
        io: &mut Io<'_>,
        inflight: &mut Inflight,
    ) -> Result<Option<()>, DeviceError> {
        let bs = self.info.block_size as usize;
        let total = io.len();
        if !total.is_multiple_of(bs) {
            return Err(DeviceError(block::STATUS_ALIGN));
        }
        let mut at = 0;
        loop {
            let len = (self.info.max_bytes as usize).min(total - at);
            let first = block + (at / bs) as u64;
            let first = u32::try_from(first).map_err(|_| DeviceError(block::STATUS_RANGE))?;
            let Some(p) = self.alloc(len as u32, io, inflight)? else {
                return Ok(None);
            };
            if let Io::Write(data) = io {
                let payload = self.stream.payload_mut(&p).map_err(stream_error)?;
                payload.copy_from_slice(&data[at..at + len]);
            }
            inflight.packets.push((p.offset(), at));
            self.submit(p, op, first, io, inflight)?;
            at += len;
            if at >= total {
                break;
            }
        }
        self.stream.flush().map_err(stream_error)?;
        Ok(Some(()))
    }

    /// `op` on `io`'s bytes from `block`: requests of at most the
    /// provider's maximum, all in flight, waited for; a read's data
    /// copied into its buffer.
    fn transfer(&mut self, op: u32, block: u64, mut io: Io<'_>) -> Result<(), DeviceError> {
        let mut inflight = Inflight::default();
        let sent = self.send(op, block, &mut io, &mut inflight);
        // Whatever was submitted is waited for, even after a failure:
        // the caller's buffer must not be left to a request in flight.
        while !inflight.packets.is_empty() {
            if let Some(ack) = self.stream.next_ack(true).map_err(device_error)? {
                self.take(ack, &mut io, &mut inflight);
            }
        }
        match (sent?, inflight.failed) {
            (None, _) => Err(DeviceError(block::STATUS_IO)),
            (_, Some(status)) => Err(DeviceError(status)),
            _ => Ok(()),
        }
    }

    /// Acknowledgement `p`: a request of the transfer waiting (done, a
    /// read's data copied to its place, or its failure kept), of a
    /// started read (kept, with its data, for `finish_read`), or of a
    /// cancelled one (released).
    fn take(&mut self, p: Packet, io: &mut Io<'_>, inflight: &mut Inflight) {
        if let Some(i) = inflight.packets.iter().position(|e| e.0 == p.offset()) {
            let (_, from) = inflight.packets.swap_remove(i);
            if p.op != block::STATUS_OK {
                inflight.failed.get_or_insert(p.op);
            } else if let (Io::Read(buf), Ok(data)) = (io, self.stream.payload(&p)) {
                let n = data.len().min(buf.len() - from);
                buf[from..from + n].copy_from_slice(&data[..n]);
            }
        } else if let Some(part) = self
            .started
            .iter_mut()
            .flat_map(|s| s.parts.iter_mut())
            .find(|part| part.offset == p.offset() && part.ack.is_none())
        {
            part.ack = Some(p);
            return;
        } else if let Some(i) = self.orphans.iter().position(|&o| o == p.offset()) {
            self.orphans.swap_remove(i);
        }
        let _ = self.stream.release(p);
    }

    /// Gives a started read up: its packets back (those still in flight
    /// when they are acknowledged).
    fn drop_started(&mut self, s: Started) {
        for part in s.parts {
            match part.ack {
                Some(ack) => {
                    let _ = self.stream.release(ack);
                }
                None => self.orphans.push(part.offset),
            }
        }
    }
}

impl BlockDevice for BlockDisk {
    fn block_size(&self) -> u32 {
        self.info.block_size
    }

    fn block_count(&self) -> u64 {
        self.info.block_count
    }

    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.transfer(block::OP_READ, block, Io::Read(buf))
    }

    fn write(&mut self, block: u64, buf: &[u8]) -> Result<(), DeviceError> {
        self.transfer(block::OP_WRITE, block, Io::Write(buf))
    }

    fn flush(&mut self) -> Result<(), DeviceError> {
        self.transfer(block::OP_SYNC, 0, Io::Sync)
    }

    /// Submits the read's requests and publishes them (the provider is
    /// signalled): they go on while the crate serves the data before
    /// them. A buffer without room for all of it starts what fits; the
    /// rest is read at `finish_read`.
    fn start_read(&mut self, block: u64, count: usize) -> Result<ReadId, DeviceError> {
        let bs = self.info.block_size as usize;
        let total = count * bs;
        let last = block + count.saturating_sub(1) as u64;
        let first = u32::try_from(block).map_err(|_| DeviceError(block::STATUS_RANGE))?;
        u32::try_from(last).map_err(|_| DeviceError(block::STATUS_RANGE))?;
        let id = self.next_id;
        self.next_id += 1;
        // Among the started reads before its first request goes: its
        // acknowledgements can come while later ones are submitted.
        self.started.push(Started {
            id,
            parts: Vec::new(),
        });
        let mut none = Io::Sync;
        let mut inflight = Inflight::default();
        let mut at = 0;
        while at < total {
            let len = (self.info.max_bytes as usize).min(total - at);
            // Never waits for room: a read ahead is not worth it.
            let Ok(p) = self.stream.alloc(len as u32) else {
                break;
            };
            let part = Part {
                offset: p.offset(),
                at,
                ack: None,
            };
            if let Some(s) = self.started.iter_mut().find(|s| s.id == id) {
                s.parts.push(part);
            }
            let first = first + (at / bs) as u32;
            self.submit(p, block::OP_READ, first, &mut none, &mut inflight)?;
            at += len;
        }
        self.stream.flush().map_err(stream_error)?;
        Ok(ReadId(id))
    }

    /// Waits for the started read's acknowledgements (sorting the others
    /// that arrive meanwhile), copies its data out and releases its
    /// packets; what it did not cover (a full buffer at its start) is
    /// read now. A read it does not know is read now.
    fn finish_read(&mut self, id: ReadId, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let Some(i) = self.started.iter().position(|s| s.id == id.0) else {
            return self.read(block, buf);
        };
        let mut none = Io::Sync;
        let mut inflight = Inflight::default();
        while self.started[i].parts.iter().any(|p| p.ack.is_none()) {
            if let Some(ack) = self.stream.next_ack(true).map_err(device_error)? {
                self.take(ack, &mut none, &mut inflight);
            }
        }
        let s = self.started.swap_remove(i);
        let mut failed = None;
        let mut covered = 0;
        for part in s.parts {
            let Some(ack) = part.ack else { continue };
            match self.stream.payload(&ack) {
                Ok(data) if ack.op == block::STATUS_OK => {
                    let n = data.len().min(buf.len() - part.at);
                    buf[part.at..part.at + n].copy_from_slice(&data[..n]);
                    covered = covered.max(part.at + n);
                }
                Ok(_) => {
                    failed.get_or_insert(ack.op);
                }
                Err(_) => {
                    failed.get_or_insert(block::STATUS_IO);
                }
            }
            let _ = self.stream.release(ack);
        }
        if let Some(status) = failed {
            return Err(DeviceError(status));
        }
        if covered < buf.len() {
            let bs = self.info.block_size as usize;
            let first = block + (covered / bs) as u64;
            return self.read(first, &mut buf[covered..]);
        }
        Ok(())
    }

    fn cancel_read(&mut self, id: ReadId) {
        if let Some(i) = self.started.iter().position(|s| s.id == id.0) {
            let s = self.started.swap_remove(i);
            self.drop_started(s);
        }
    }
}
