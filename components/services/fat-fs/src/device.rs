//! The volume's block device: a Block session (`rt::session::block`)
//! as the `fat` crate's `BlockDevice`. A read or write of many blocks is
//! cut into requests of the provider's largest size, all in flight at
//! once, and waited for; `flush` is a Block sync.

use alloc::string::String;
use alloc::vec::Vec;

use fat::{BlockDevice, DeviceError};
use rt::session::block::{self, BlockError, BlockInfo, BlockSource};
use rt::stream::Packet;

/// Where a transfer's bytes go or come from.
enum Io<'b> {
    Read(&'b mut [u8]),
    Write(&'b [u8]),
}

impl Io<'_> {
    fn len(&self) -> usize {
        match self {
            Io::Read(b) => b.len(),
            Io::Write(b) => b.len(),
        }
    }
}

/// The Block session's stream and what it describes.
pub struct BlockDisk {
    stream: BlockSource,
    info: BlockInfo,
}

/// The device error a Block failure is (its status, or an I/O error).
fn device_error(e: BlockError) -> DeviceError {
    match e {
        BlockError::Status(s) => DeviceError(s),
        _ => DeviceError(block::STATUS_IO),
    }
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
        Ok(BlockDisk { stream, info })
    }

    /// `op` on `io`'s bytes from `block`: requests of at most the
    /// provider's maximum, all in flight; a read's data copied into its
    /// buffer.
    fn transfer(&mut self, op: u32, block: u64, mut io: Io<'_>) -> Result<(), DeviceError> {
        let bs = self.info.block_size as usize;
        let chunk = self.info.max_bytes as usize;
        let total = io.len();
        if !total.is_multiple_of(bs) {
            return Err(DeviceError(block::STATUS_ALIGN));
        }
        // (stream offset, offset in the bytes) of each request in flight.
        let mut inflight: Vec<(u32, usize)> = Vec::new();
        let mut failed: Option<u32> = None;
        let mut at = 0;
        while at < total {
            let len = chunk.min(total - at);
            let first = block + (at / bs) as u64;
            let first = u32::try_from(first).map_err(|_| DeviceError(block::STATUS_RANGE))?;
            let p = loop {
                match self.stream.alloc(len as u32) {
                    Ok(p) => break p,
                    Err(rt::stream::Error::BufferFull) => {
                        if let Some(ack) = self.stream.next_ack(true).map_err(device_error)? {
                            complete(&mut self.stream, ack, &mut inflight, &mut io, &mut failed);
                        }
                    }
                    Err(_) => return Err(DeviceError(block::STATUS_IO)),
                }
            };
            if let Io::Write(data) = &io {
                let payload = self
                    .stream
                    .payload_mut(&p)
                    .map_err(|_| DeviceError(block::STATUS_IO))?;
                payload.copy_from_slice(&data[at..at + len]);
            }
            inflight.push((p.offset(), at));
            let mut early: Vec<Packet> = Vec::new();
            let mut keep = |_: &mut BlockSource, ack: Packet| early.push(ack);
            self.stream
                .submit_waiting(p, op, first, &mut keep)
                .map_err(device_error)?;
            for ack in early {
                complete(&mut self.stream, ack, &mut inflight, &mut io, &mut failed);
            }
            at += len;
        }
        self.stream
            .flush()
            .map_err(|_| DeviceError(block::STATUS_IO))?;
        while !inflight.is_empty() {
            if let Some(ack) = self.stream.next_ack(true).map_err(device_error)? {
                complete(&mut self.stream, ack, &mut inflight, &mut io, &mut failed);
            }
        }
        match failed {
            Some(status) => Err(DeviceError(status)),
            None => Ok(()),
        }
    }
}

/// Acknowledgement `p` of a transfer: its request done (a read's data
/// copied to its place), or its failure kept in `failed`.
fn complete(
    s: &mut BlockSource,
    p: Packet,
    inflight: &mut Vec<(u32, usize)>,
    io: &mut Io<'_>,
    failed: &mut Option<u32>,
) {
    if let Some(i) = inflight.iter().position(|e| e.0 == p.offset()) {
        let (_, from) = inflight.swap_remove(i);
        if p.op != block::STATUS_OK {
            failed.get_or_insert(p.op);
        } else if let (Io::Read(buf), Ok(data)) = (io, s.payload(&p)) {
            let n = data.len().min(buf.len() - from);
            buf[from..from + n].copy_from_slice(&data[..n]);
        }
    }
    let _ = s.release(p);
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
        self.stream.sync().map_err(device_error)
    }
}
