//! The Block session: a block device — a disk, a partition of one — as
//! the client sees it (Genode's `block_session`). The provider (the
//! virtio-blk driver, a partition service) describes the device with
//! [`INFO`] and moves the data through a packet stream
//! (`ucore::packet_stream`, whose module doc is the protocol): the client
//! is the source, the provider the sink. The stream's memory is one
//! 2 MiB frame the provider makes from the session's donation (so the
//! client pays for it, [`Block::RAM`]) and hands out with [`STREAM`],
//! with the two notifications of the stream.
//!
//! | opcode | words | reply |
//! |--------|-------|-------|
//! | [`INFO`] | — | [`OK`]: 0: block size in bytes, 1: block count, 2: [`FLAG_WRITABLE`] \| [`FLAG_SYNC`], 3: the most bytes one packet may move |
//! | [`STREAM`] | 0: `rt::shared::CAP_FRAME`, `CAP_SERVER_NOTIFY` or `CAP_CLIENT_NOTIFY` | [`OK`] with that capability (the frame all rights; the provider's notification write-only; the client's read-only) |
//!
//! # Packets
//!
//! The stream runs with [`stream_config`] ([`ENTRIES`]-entry rings,
//! [`STREAM_BLOCK`]-byte buffer blocks). A request is a packet whose
//! `op` is [`OP_READ`], [`OP_WRITE`] or [`OP_SYNC`] and whose `tag` is
//! the first block (so at most 2^32 blocks: 2 TiB of 512-byte blocks);
//! its `len` is a whole number of blocks, at least one and at most the
//! [`INFO`] maximum (a sync moves nothing: `len` 0, tag ignored). The
//! provider acknowledges every packet — in any order — with the `op`
//! replaced by a status: [`STATUS_OK`], or why it was refused
//! ([`STATUS_RANGE`], [`STATUS_ALIGN`], [`STATUS_SIZE`],
//! [`STATUS_READ_ONLY`], [`STATUS_OP`]) or failed ([`STATUS_IO`]). A
//! refused request changes nothing on the device, and the provider goes
//! on serving: a bad request is an error value for that request only.
//!
//! [`OP_SYNC`] is acknowledged once every write acknowledged before it was
//! submitted is on the medium (a virtio `FLUSH`).

use abi::caddr::own;
use abi::CapSlot;

use super::frame::{AckedSink, StreamFrame};
use super::{Interface, Session};
use crate::shared::{self, ReceiveError};
use crate::stream::{Config, Notifications, Packet, Region, Sink, Source};

/// The Block interface.
pub struct Block;

impl Interface for Block {
    const NAME: &'static str = "Block";
    /// The stream's 2 MiB frame (made first, at the donation's 2 MiB
    /// aligned start) and the client's notification.
    const RAM: u64 = 4 << 20;
    /// The frame, the client's notification and its read-only copy, the
    /// provider's notification's badged write copy.
    const CAPS: u32 = 4;
}

/// Describes the device.
pub const INFO: u64 = 1;
/// Hands out one of the stream's capabilities.
pub const STREAM: u64 = 2;

/// The reply to a request served.
pub const OK: u64 = 0;
/// The reply to an opcode the provider does not know, or a bad argument.
pub const REFUSED: u64 = 0xb1;

/// [`INFO`] word 2: the device takes writes.
pub const FLAG_WRITABLE: u64 = 1;
/// [`INFO`] word 2: [`OP_SYNC`] reaches the medium (without it, writes
/// are on the medium when acknowledged).
pub const FLAG_SYNC: u64 = 2;

/// Packet op: read `len` bytes from block `tag` on.
pub const OP_READ: u32 = 1;
/// Packet op: write the packet's bytes to block `tag` on.
pub const OP_WRITE: u32 = 2;
/// Packet op: every acknowledged write to the medium.
pub const OP_SYNC: u32 = 3;

/// Acknowledgement status: done.
pub const STATUS_OK: u32 = 0;
/// Refused: blocks beyond the device's end.
pub const STATUS_RANGE: u32 = 0x10;
/// Refused: `len` is not a whole number of blocks (or 0).
pub const STATUS_ALIGN: u32 = 0x11;
/// Refused: more bytes than [`INFO`] allows in one packet.
pub const STATUS_SIZE: u32 = 0x12;
/// Refused: a write to a read-only device.
pub const STATUS_READ_ONLY: u32 = 0x13;
/// Refused: an op the provider does not know.
pub const STATUS_OP: u32 = 0x14;
/// Failed: the device reported an error.
pub const STATUS_IO: u32 = 0x20;

/// Entries of each ring of the stream.
pub const ENTRIES: u32 = 128;
/// The stream buffer's allocation unit.
pub const STREAM_BLOCK: u32 = 4096;
/// Bytes of the stream's frame.
pub const STREAM_BYTES: usize = shared::FRAME_BYTES;

/// The source's allocation bitmap, in 64-bit words: one bit per
/// [`STREAM_BLOCK`] of the frame's buffer.
pub const SOURCE_WORDS: usize = STREAM_BYTES / STREAM_BLOCK as usize / 64;

/// The stream's configuration, the same on both sides.
pub fn stream_config() -> Config {
    Config {
        entries: ENTRIES,
        block_size: STREAM_BLOCK,
    }
}

/// The device as [`INFO`] describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Bytes per block (a power of two, at least 512).
    pub block_size: u32,
    /// Blocks of the device.
    pub block_count: u64,
    /// Whether it takes writes.
    pub writable: bool,
    /// Whether [`OP_SYNC`] does something.
    pub sync: bool,
    /// The most bytes one packet may move (a whole number of blocks).
    pub max_bytes: u32,
}

/// Why a Block request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockError {
    /// The call failed.
    Ipc(abi::Error),
    /// The provider answered with this label.
    Refused(u64),
    /// It described an impossible device.
    BadInfo,
    /// Setting up the stream failed.
    Stream(ReceiveError),
    /// The stream broke.
    Packet(crate::stream::Error),
    /// The stream's layout does not fit its memory.
    Layout,
    /// A request was acknowledged with this status.
    Status(u32),
}

impl BlockError {
    /// Whether the provider stopped: a call on the session failed the way
    /// a call on a dead provider's endpoint fails, or the stream's wait
    /// was woken by the parent's `PROVIDER_GONE` (`Aborted`) or found
    /// the provider's notification gone with it (`EmptySlot`). A
    /// [`BlockClient`] reconnects then.
    pub fn provider_gone(&self) -> bool {
        use abi::Error::{Aborted, EmptySlot};
        matches!(
            self,
            BlockError::Ipc(Aborted | EmptySlot)
                | BlockError::Packet(crate::stream::Error::Notify(Aborted | EmptySlot))
        )
    }
}

impl core::fmt::Display for BlockError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BlockError::Ipc(e) => write!(f, "call failed: {e}"),
            BlockError::Refused(l) => write!(f, "refused by the provider ({l:#x})"),
            BlockError::BadInfo => f.write_str("the provider described an impossible device"),
            BlockError::Stream(e) => write!(f, "stream set-up: {e}"),
            BlockError::Packet(e) => write!(f, "packet stream: {e:?}"),
            BlockError::Layout => f.write_str("the stream does not fit its memory"),
            BlockError::Status(s) => write!(f, "request failed: {}", status_text(*s)),
        }
    }
}

/// What acknowledgement status `s` means.
pub fn status_text(s: u32) -> &'static str {
    match s {
        STATUS_OK => "done",
        STATUS_RANGE => "beyond the device's end",
        STATUS_ALIGN => "not a whole number of blocks",
        STATUS_SIZE => "more bytes than one request may move",
        STATUS_READ_ONLY => "the device is read-only",
        STATUS_OP => "unknown operation",
        STATUS_IO => "I/O error",
        _ => "unknown status",
    }
}

/// Whether `packet` is a request a provider of `info` takes: `Err(status)`
/// to acknowledge it at once with that status instead (a sync without
/// [`BlockInfo::sync`] is done at once: `Err(STATUS_OK)`, writes reach
/// the medium as they complete).
pub fn check(packet: &Packet, info: &BlockInfo) -> Result<(), u32> {
    match packet.op {
        OP_SYNC if !info.sync => return Err(STATUS_OK),
        OP_SYNC => return Ok(()),
        OP_READ => {}
        OP_WRITE if !info.writable => return Err(STATUS_READ_ONLY),
        OP_WRITE => {}
        _ => return Err(STATUS_OP),
    }
    if packet.is_empty() || !packet.len().is_multiple_of(info.block_size) {
        return Err(STATUS_ALIGN);
    }
    if packet.len() > info.max_bytes {
        return Err(STATUS_SIZE);
    }
    let blocks = u64::from(packet.len() / info.block_size);
    match u64::from(packet.tag).checked_add(blocks) {
        Some(end) if end <= info.block_count => Ok(()),
        _ => Err(STATUS_RANGE),
    }
}

impl BlockInfo {
    /// The [`INFO`] reply's words.
    pub fn words(&self) -> [u64; 4] {
        let flags =
            if self.writable { FLAG_WRITABLE } else { 0 } | if self.sync { FLAG_SYNC } else { 0 };
        [
            u64::from(self.block_size),
            self.block_count,
            flags,
            u64::from(self.max_bytes),
        ]
    }
}

impl Session<Block> {
    /// The device.
    pub fn info(&self) -> Result<BlockInfo, BlockError> {
        let (info, w) = self.call(INFO, [0; 4]).map_err(BlockError::Ipc)?;
        if info.label() != OK {
            return Err(BlockError::Refused(info.label()));
        }
        let block_size = u32::try_from(w[0]).map_err(|_| BlockError::BadInfo)?;
        let max_bytes = u32::try_from(w[3]).map_err(|_| BlockError::BadInfo)?;
        if block_size < 512
            || !block_size.is_power_of_two()
            || max_bytes < block_size
            || !max_bytes.is_multiple_of(block_size)
        {
            return Err(BlockError::BadInfo);
        }
        Ok(BlockInfo {
            block_size,
            block_count: w[1],
            writable: w[2] & FLAG_WRITABLE != 0,
            sync: w[2] & FLAG_SYNC != 0,
            max_bytes,
        })
    }

    /// Sets up the stream: the three capabilities into the empty own
    /// slots `slots` (frame, provider's notification, client's), the
    /// frame mapped at `va`; the client's end of it.
    ///
    /// # Safety
    ///
    /// `[va, va + STREAM_BYTES)` is a region of the address space nothing
    /// else of the program uses, 2 MiB aligned.
    pub unsafe fn stream(&self, slots: [u32; 3], va: u64) -> Result<BlockSource, BlockError> {
        // SAFETY: the caller's promise, passed on.
        let notify = unsafe { super::frame::receive(self.cap(), STREAM, OK, slots, va) }
            .map_err(BlockError::Stream)?;
        // SAFETY: the frame is mapped there now, for the stream alone.
        let region =
            unsafe { Region::new(va as *mut u8, STREAM_BYTES) }.map_err(|_| BlockError::Layout)?;
        let source =
            Source::new(region, stream_config(), notify).map_err(|_| BlockError::Layout)?;
        Ok(BlockSource {
            source,
            frame: own(slots[0]),
        })
    }
}

/// The client's end of a Block stream (`Source`, through `Deref`: alloc,
/// payload, submit, flush, get_ack, release, wait_for_acks).
pub struct BlockSource {
    /// The stream.
    pub source: Source<Notifications, SOURCE_WORDS>,
    /// The frame's slot (mapped).
    pub frame: CapSlot,
}

impl core::ops::Deref for BlockSource {
    type Target = Source<Notifications, SOURCE_WORDS>;
    fn deref(&self) -> &Self::Target {
        &self.source
    }
}

impl core::ops::DerefMut for BlockSource {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.source
    }
}

impl BlockSource {
    /// The next acknowledgement: waiting for one if `wait`, else `None`
    /// when there is none now. A descriptor the provider made up is
    /// dropped by the stream and skipped here.
    pub fn next_ack(&mut self, wait: bool) -> Result<Option<Packet>, BlockError> {
        loop {
            match self.source.get_ack() {
                Ok(Some(p)) => return Ok(Some(p)),
                Ok(None) if !wait => return Ok(None),
                Ok(None) => self.source.wait_for_acks().map_err(BlockError::Packet)?,
                Err(e) if e.is_fatal() => return Err(BlockError::Packet(e)),
                Err(_) => {}
            }
        }
    }

    /// A packet of `len` bytes, taking acknowledgements while the buffer
    /// is full: each goes to `on_ack`, which must release it.
    pub fn alloc_waiting(
        &mut self,
        len: u32,
        on_ack: &mut dyn FnMut(&mut Self, Packet),
    ) -> Result<Packet, BlockError> {
        loop {
            match self.source.alloc(len) {
                Ok(p) => return Ok(p),
                Err(crate::stream::Error::BufferFull) => {
                    let ack = self.next_ack(true)?;
                    if let Some(p) = ack {
                        on_ack(self, p);
                    }
                }
                Err(e) => return Err(BlockError::Packet(e)),
            }
        }
    }

    /// Submits request `op` on `packet` from block `first`, taking
    /// acknowledgements (to `on_ack`) while the submit ring is full.
    pub fn submit_waiting(
        &mut self,
        mut packet: Packet,
        op: u32,
        first: u32,
        on_ack: &mut dyn FnMut(&mut Self, Packet),
    ) -> Result<(), BlockError> {
        packet.op = op;
        packet.tag = first;
        loop {
            match self.source.submit(packet) {
                Ok(()) => return Ok(()),
                Err(crate::stream::Error::RingFull) => {
                    self.source.flush().map_err(BlockError::Packet)?;
                    match self.next_ack(false)? {
                        Some(p) => on_ack(self, p),
                        None => self
                            .source
                            .wait_for_submit_space()
                            .map_err(BlockError::Packet)?,
                    }
                }
                Err(e) => return Err(BlockError::Packet(e)),
            }
        }
    }

    /// Publishes what was submitted and takes every acknowledgement
    /// still to come (each to `on_ack`, which must release it).
    pub fn drain(&mut self, on_ack: &mut dyn FnMut(&mut Self, Packet)) -> Result<(), BlockError> {
        self.source.flush().map_err(BlockError::Packet)?;
        while self.source.in_flight() > 0 {
            if let Some(p) = self.next_ack(true)? {
                on_ack(self, p);
            }
        }
        Ok(())
    }

    /// One request alone (nothing else in flight): `op` on `len` bytes
    /// from block `first`, `data` copied in before (a write) or the
    /// packet's bytes copied out after (a read, into `out`).
    fn one(
        &mut self,
        op: u32,
        first: u32,
        len: u32,
        data: Option<&[u8]>,
        out: Option<&mut [u8]>,
    ) -> Result<(), BlockError> {
        let packet = self.source.alloc(len).map_err(BlockError::Packet)?;
        if let Some(data) = data {
            let payload = self
                .source
                .payload_mut(&packet)
                .map_err(BlockError::Packet)?;
            let n = payload.len().min(data.len());
            payload[..n].copy_from_slice(&data[..n]);
        }
        let mut stray = |_: &mut Self, _: Packet| {};
        self.submit_waiting(packet, op, first, &mut stray)?;
        self.source.flush().map_err(BlockError::Packet)?;
        let ack = loop {
            match self.next_ack(true)? {
                Some(p) if p.offset() == packet.offset() => break p,
                // Not ours: nothing else is in flight, so a provider's
                // invention (the stream refused it already).
                _ => {}
            }
        };
        let result = match ack.op {
            STATUS_OK => {
                if let Some(out) = out {
                    let payload = self.source.payload(&ack).map_err(BlockError::Packet)?;
                    let n = payload.len().min(out.len());
                    out[..n].copy_from_slice(&payload[..n]);
                }
                Ok(())
            }
            status => Err(BlockError::Status(status)),
        };
        self.source.release(ack).map_err(BlockError::Packet)?;
        result
    }

    /// Reads `out.len()` bytes (whole blocks) from block `first`, alone.
    pub fn read(&mut self, first: u32, out: &mut [u8]) -> Result<(), BlockError> {
        let len = u32::try_from(out.len()).map_err(|_| BlockError::Status(STATUS_SIZE))?;
        self.one(OP_READ, first, len, None, Some(out))
    }

    /// Writes `data` (whole blocks) from block `first`, alone.
    pub fn write(&mut self, first: u32, data: &[u8]) -> Result<(), BlockError> {
        let len = u32::try_from(data.len()).map_err(|_| BlockError::Status(STATUS_SIZE))?;
        self.one(OP_WRITE, first, len, Some(data), None)
    }

    /// Every acknowledged write to the medium, alone.
    pub fn sync(&mut self) -> Result<(), BlockError> {
        self.one(OP_SYNC, 0, 0, None, None)
    }

    /// Sends request `op` of `len` bytes at block `first` alone and
    /// returns the acknowledgement's status (for tests of refusals).
    pub fn status_of(&mut self, op: u32, first: u32, len: u32) -> Result<u32, BlockError> {
        match self.one(op, first, len, None, None) {
            Ok(()) => Ok(STATUS_OK),
            Err(BlockError::Status(s)) => Ok(s),
            Err(e) => Err(e),
        }
    }
}

/// The provider's end of one Block session's stream: the stream frame
/// (`super::frame::StreamFrame`: made from the session's donation,
/// mapped, a signal context that runs the provider's handler when the
/// client signals) and the sink on it with its backlog
/// (`super::frame::AckedSink`, reached through `Deref`: `sink`, `ack`,
/// `publish`, `arm`, `broken`).
///
/// Dropping it (the session closed) unregisters the context and unmaps
/// the frame; the objects themselves go when the client revokes its
/// donation.
pub struct Served<T: 'static> {
    stream: AckedSink,
    frame: StreamFrame<T>,
}

impl<T: 'static> core::ops::Deref for Served<T> {
    type Target = AckedSink;
    fn deref(&self) -> &AckedSink {
        &self.stream
    }
}

impl<T: 'static> core::ops::DerefMut for Served<T> {
    fn deref_mut(&mut self) -> &mut AckedSink {
        &mut self.stream
    }
}

/// Why [`Served::open`] failed.
pub type ServeError = super::frame::ServeError;

impl<T: 'static> Served<T> {
    /// Makes the session's stream from `donated`, maps the frame at `va`
    /// and registers `on_signal` on `signals` (whose notification is
    /// bound to the provider's thread); the stream is armed, so the
    /// client's first batch signals.
    ///
    /// # Safety
    ///
    /// `[va, va + STREAM_BYTES)` is a 2 MiB aligned region nothing else of
    /// the provider uses while the `Served` exists.
    pub unsafe fn open(
        donated: crate::session::Donated,
        signals: &alloc::rc::Rc<core::cell::RefCell<crate::signal::Signals<T>>>,
        va: u64,
        on_signal: impl FnMut(&mut T) + 'static,
    ) -> Result<Served<T>, ServeError> {
        // SAFETY: the caller's promise, passed on.
        let (frame, notifications) = unsafe { StreamFrame::open(donated, signals, va, on_signal) }?;
        // SAFETY: the whole frame is this one stream's, for the frame's life
        // (`frame` is the last field: dropped after the sink).
        let region = unsafe { frame.region(0, STREAM_BYTES) }.ok_or("stream region misaligned")?;
        let sink =
            Sink::new(region, stream_config(), notifications).map_err(|_| "stream layout")?;
        Ok(Served {
            stream: AckedSink::new(sink)?,
            frame,
        })
    }

    /// The stream's frame (the provider's capability: to learn its bus
    /// address, say).
    pub fn frame(&self) -> CapSlot {
        self.frame.frame()
    }

    /// Where the packets' buffer starts in the frame: a packet's bytes are
    /// at this plus its offset.
    pub fn buffer_offset(&self) -> usize {
        self.sink.layout().buffer_offset()
    }

    /// The capability [`STREAM`] request `which` hands out.
    pub fn stream_cap(&self, which: u64) -> Option<CapSlot> {
        self.frame.stream_cap(which)
    }

    /// The reply to a [`STREAM`] request (the capability in it).
    pub fn stream_reply(&self, which: u64) -> (abi::MsgInfo, crate::syscall::Words) {
        self.frame.stream_reply(which, OK, REFUSED)
    }
}

/// Opens a Block session (into own slot `slot`, donating a block made
/// from the component's own quota in own slots `donor_block` and
/// `donor_table`), asks for its description and sets up its stream
/// (`stream_slots`, the frame mapped at `va`): what most clients do
/// first. The session itself stays open for as long as the component
/// runs (its handle owns nothing); a client that outlives its provider
/// uses [`BlockClient`].
///
/// # Safety
///
/// As for [`Session::stream`]: `[va, va + STREAM_BYTES)` is a 2 MiB
/// aligned region nothing else of the program uses.
pub unsafe fn connect(
    slot: u32,
    donor_block: u32,
    donor_table: u32,
    stream_slots: [u32; 3],
    va: u64,
) -> Result<(BlockSource, BlockInfo), alloc::string::String> {
    // SAFETY: the caller's promise, passed on.
    let client = unsafe { BlockClient::connect(slot, donor_block, donor_table, stream_slots, va) }?;
    Ok((client.stream, client.info))
}

/// A Block session that survives its provider's restart: the session,
/// its stream (`BlockSource`, through `Deref`) and what it takes to open
/// both again. When a request fails with
/// [`BlockError::provider_gone`], [`BlockClient::reconnect`] opens a
/// fresh session of the restarted provider (waiting out its restart) and
/// a fresh stream in the same place; the requests that were in flight are
/// the caller's to submit again — it still holds their data, and a block
/// request may be repeated.
pub struct BlockClient {
    session: Session<Block>,
    stream: BlockSource,
    info: BlockInfo,
    stream_slots: [u32; 3],
    va: u64,
}

impl BlockClient {
    /// Opens the session and its stream as [`connect`] does.
    ///
    /// # Safety
    ///
    /// As for [`connect`]; the region stays the stream's for as long as
    /// the `BlockClient` exists (a reconnect maps the new stream there).
    pub unsafe fn connect(
        slot: u32,
        donor_block: u32,
        donor_table: u32,
        stream_slots: [u32; 3],
        va: u64,
    ) -> Result<BlockClient, alloc::string::String> {
        use alloc::format;
        let session = super::open_from_quota::<Block>(slot, donor_block, donor_table)?;
        let info = session.info().map_err(|e| format!("INFO: {e}"))?;
        // SAFETY: the caller's promise, passed on.
        let stream = unsafe { session.stream(stream_slots, va) }.map_err(|e| format!("{e}"))?;
        Ok(BlockClient {
            session,
            stream,
            info,
            stream_slots,
            va,
        })
    }

    /// The device as the provider described it when the session opened.
    pub fn info(&self) -> BlockInfo {
        self.info
    }

    /// Opens the session again after its provider stopped: the old one is
    /// closed and its donation revoked (the old stream with it), a new one
    /// opened — `Session::reopen` waits while init restarts the provider
    /// — and its stream set up where the old one was. Every packet of the
    /// old stream is gone. A device that comes back with another geometry
    /// is an error: the caller's view of it would be wrong.
    pub fn reconnect(&mut self) -> Result<(), alloc::string::String> {
        use alloc::format;
        self.session
            .reopen()
            .map_err(|e| format!("reopening the session: {e}"))?;
        let info = self
            .session
            .info()
            .map_err(|e| format!("INFO after reopening: {e}"))?;
        if (info.block_size, info.block_count) != (self.info.block_size, self.info.block_count) {
            return Err(format!(
                "the device came back with {} blocks of {} bytes, not {} of {}",
                info.block_count, info.block_size, self.info.block_count, self.info.block_size
            ));
        }
        // SAFETY: the old `BlockSource` is replaced below, never used again.
        unsafe { super::frame::forget_received(self.stream_slots) };
        // SAFETY: the region is the old stream's (`connect`'s caller gave
        // it to this client), unmapped with the old frame.
        self.stream = unsafe { self.session.stream(self.stream_slots, self.va) }
            .map_err(|e| format!("the new stream: {e}"))?;
        self.info = info;
        Ok(())
    }
}

impl core::ops::Deref for BlockClient {
    type Target = BlockSource;
    fn deref(&self) -> &BlockSource {
        &self.stream
    }
}

impl core::ops::DerefMut for BlockClient {
    fn deref_mut(&mut self) -> &mut BlockSource {
        &mut self.stream
    }
}
