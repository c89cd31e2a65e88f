//! The Nic session: an Ethernet interface as its client sees it (Genode's
//! `nic_session`). The provider — the virtio-net driver, later the switch
//! that gives each of several clients a Nic of its own — describes the
//! interface with [`INFO`] and moves frames through two packet streams
//! (`ucore::packet_stream`, whose module doc is the protocol) in one 2 MiB
//! frame it makes from the session's donation (so the client pays,
//! [`Nic::RAM`]) and hands out with [`STREAM`], with the two
//! notifications both streams share:
//!
//! | part of the frame | stream | source → sink |
//! |-------------------|--------|---------------|
//! | `[0, 1 MiB)` ([`TX_OFFSET`]) | transmit | client → provider |
//! | `[1 MiB, 2 MiB)` ([`RX_OFFSET`]) | receive | provider → client |
//!
//! | opcode | words | reply |
//! |--------|-------|-------|
//! | [`INFO`] | — | [`OK`]: 0: the MAC address (byte i in bits 8i..8i+8), 1: [`FLAG_LINK_UP`], 2: the MTU (bytes of IP packet; a frame is at most MTU + 14) |
//! | [`STREAM`] | 0: `rt::shared::CAP_FRAME`, `CAP_SERVER_NOTIFY` or `CAP_CLIENT_NOTIFY` | [`OK`] with that capability (the frame all rights; the provider's notification write-only; the client's read-only) |
//!
//! Both streams run with [`stream_config`] ([`ENTRIES`]-entry rings,
//! [`STREAM_BLOCK`]-byte blocks: one frame, one block). A frame is a
//! whole Ethernet frame — destination, source, type, payload — without
//! preamble or frame check sequence, 14 to MTU + 14 bytes.
//!
//! # Transmit
//!
//! The client allocates a packet, writes a frame into it and submits it
//! with op [`OP_SEND`] (many at once: one signal per batch, rule 4 of the
//! stream). The provider acknowledges each, in any order, with the op
//! replaced by a status: [`STATUS_OK`] (handed to the device), or why it
//! was refused ([`STATUS_SIZE`]: shorter than 14 bytes or longer than
//! MTU + 14; [`STATUS_OP`]) or failed ([`STATUS_IO`]: the device broke).
//! A refused frame is not sent, and the provider goes on.
//!
//! # Receive: the provider is the source
//!
//! The provider allocates receive buffers in the receive stream, lets them
//! be filled — by the device itself, in place — and submits each filled
//! one with op [`OP_RECEIVED`] and `len` the frame's bytes; the client
//! reads the frame and acknowledges the packet, which gives the buffer
//! back. This is Genode's choice (its driver is the source of the receive
//! stream); the other one — the client submits empty buffers that the
//! provider fills and acknowledges, sDDF's free and active queues — was
//! weighed and not taken:
//!
//! - **Zero copy either way.** A receive buffer lies in the client's
//!   frame whoever allocates it; the virtio-net driver learns its bus
//!   address (the platform's `TRANSLATE`) and puts it into the device's
//!   receive queue. The device writes the frame where the client reads it.
//! - **The provider knows what a buffer must hold.** The size a device
//!   needs (a whole frame here; more with large receive offload or a
//!   larger MTU) is the provider's business; with provider-owned buffers
//!   it can change without a protocol change, and a client cannot post
//!   buffers too small, overlapping, or so few that frames are lost.
//! - **A fixed pool, no allocator per frame.** The provider allocates its
//!   buffers once, when the session opens, and reuses each as its
//!   acknowledgement comes back (the original system allocated three
//!   times per packet). The client does nothing per frame but read and
//!   acknowledge — the smoltcp adapter's `RxToken`, the switch's uplink and
//!   a fuzzing client are all simple sinks.
//! - **Backpressure.** A client that does not acknowledge holds buffers;
//!   once the provider has none left to give the device, the device (and
//!   QEMU's network behind it) holds the next frames back. The client
//!   stalls its own receive path, nobody else's.
//!
//! The cost: the client cannot choose how many receive buffers it has
//! (the provider's pool: [`RX_POOL`] of them), and an acknowledgement is
//! needed per frame (batched like any other: one signal per batch).
//!
//! # Link state
//!
//! [`INFO`] answers the link state when asked; a change is not signalled
//! yet (QEMU's user network is always up).
//!
//! # A hostile client
//!
//! Everything is checked by the streams (rule 7) and here: a transmit
//! descriptor outside the stream's buffer is dropped by the stream (never
//! acknowledged: it names no packet), a frame of a bad size or an unknown
//! op is acknowledged with its status at once, an acknowledgement of a
//! receive buffer not in flight is dropped, and impossible ring indices
//! break that session's streams (the provider stops looking at them); the
//! provider serves on.

use abi::caddr::own;
use abi::CapSlot;

use super::frame::{AckedSink, ServeError, StreamFrame};
use super::{Interface, Session};
use crate::shared::ReceiveError;
use crate::stream::{Config, Notifications, Packet, Region, Sink, Source, Taken};

/// The Nic interface.
pub struct Nic;

impl Interface for Nic {
    const NAME: &'static str = "Nic";
    /// The streams' 2 MiB frame (made first, at the donation's 2 MiB
    /// aligned start) and the client's notification.
    const RAM: u64 = 4 << 20;
    /// The frame, the client's notification and its read-only copy, the
    /// provider's notification's badged write copy.
    const CAPS: u32 = 4;
}

/// Describes the interface.
pub const INFO: u64 = 1;
/// Hands out one of the streams' capabilities.
pub const STREAM: u64 = 2;

/// The reply to a request served.
pub const OK: u64 = 0;
/// The reply to an opcode the provider does not know, or a bad argument.
pub const REFUSED: u64 = 0xb1;

/// [`INFO`] word 1: the link is up.
pub const FLAG_LINK_UP: u64 = 1;

/// Transmit packet op: send the frame.
pub const OP_SEND: u32 = 1;
/// Receive packet op: a frame arrived.
pub const OP_RECEIVED: u32 = 2;

/// Acknowledgement status: sent.
pub const STATUS_OK: u32 = 0;
/// Refused: shorter than an Ethernet header or longer than MTU + 14.
pub const STATUS_SIZE: u32 = 0x12;
/// Refused: an op the provider does not know.
pub const STATUS_OP: u32 = 0x14;
/// Refused: the frame's source address is not the session's own MAC
/// (a provider that gives each client its own, like the switch).
pub const STATUS_SOURCE: u32 = 0x15;
/// Failed: the device broke.
pub const STATUS_IO: u32 = 0x20;

/// Bytes of an Ethernet header (destination, source, type).
pub const HEADER: u32 = 14;
/// The MTU every Nic provider offers now (Ethernet's).
pub const MTU: u32 = 1500;
/// The largest frame: MTU and header.
pub const MAX_FRAME: u32 = MTU + HEADER;

/// Entries of each ring of each stream.
pub const ENTRIES: u32 = 256;
/// The streams' allocation unit: a receive buffer, the most a transmit
/// frame may take.
pub const STREAM_BLOCK: u32 = 2048;
/// Where the transmit stream lies in the frame.
pub const TX_OFFSET: usize = 0;
/// Where the receive stream lies in the frame.
pub const RX_OFFSET: usize = 1 << 20;
/// Bytes of each stream.
pub const PART_BYTES: usize = 1 << 20;
/// Bytes of the frame.
pub const STREAM_BYTES: usize = super::frame::FRAME_BYTES;
/// Receive buffers a provider allocates (of [`STREAM_BLOCK`] bytes): fewer
/// than the rings' entries, so the client's acknowledgements always fit.
pub const RX_POOL: usize = 192;

/// The allocation bitmap of either stream's source, in 64-bit words.
pub const STREAM_WORDS: usize = PART_BYTES / STREAM_BLOCK as usize / 64;

/// The streams' configuration, the same on both sides.
pub fn stream_config() -> Config {
    Config {
        entries: ENTRIES,
        block_size: STREAM_BLOCK,
    }
}

/// A MAC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// The broadcast address.
    pub const BROADCAST: Mac = Mac([0xff; 6]);

    /// As [`INFO`] word 0 carries it.
    pub fn word(&self) -> u64 {
        self.0
            .iter()
            .enumerate()
            .fold(0, |w, (i, b)| w | u64::from(*b) << (8 * i))
    }

    /// From [`INFO`] word 0.
    pub fn from_word(w: u64) -> Mac {
        Mac(core::array::from_fn(|i| (w >> (8 * i)) as u8))
    }
}

impl core::fmt::Display for Mac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// The interface as [`INFO`] describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NicInfo {
    /// Its MAC address.
    pub mac: Mac,
    /// Whether the link is up.
    pub link_up: bool,
    /// Its MTU.
    pub mtu: u32,
}

impl NicInfo {
    /// The [`INFO`] reply's words.
    pub fn words(&self) -> [u64; 4] {
        [
            self.mac.word(),
            if self.link_up { FLAG_LINK_UP } else { 0 },
            u64::from(self.mtu),
            0,
        ]
    }
}

/// Why a Nic request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicError {
    /// The call failed.
    Ipc(abi::Error),
    /// The provider answered with this label.
    Refused(u64),
    /// It described an impossible interface.
    BadInfo,
    /// Setting up the streams failed.
    Stream(ReceiveError),
    /// A stream broke, or a packet could not be had.
    Packet(crate::stream::Error),
    /// The streams' layout does not fit their memory.
    Layout,
    /// A frame longer than [`MAX_FRAME`] or shorter than [`HEADER`].
    FrameSize(usize),
}

impl NicError {
    /// Whether the provider stopped: a call failed the way a call on a
    /// dead provider's endpoint fails, or a wait was woken by the
    /// parent's `PROVIDER_GONE` (`Aborted`), or the provider's
    /// notification went with it (`EmptySlot`). A [`NicLink`] reconnects.
    pub fn provider_gone(&self) -> bool {
        use abi::Error::{Aborted, EmptySlot};
        matches!(
            self,
            NicError::Ipc(Aborted | EmptySlot)
                | NicError::Packet(crate::stream::Error::Notify(Aborted | EmptySlot))
        )
    }
}

impl core::fmt::Display for NicError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NicError::Ipc(e) => write!(f, "call failed: {e}"),
            NicError::Refused(l) => write!(f, "refused by the provider ({l:#x})"),
            NicError::BadInfo => f.write_str("the provider described an impossible interface"),
            NicError::Stream(e) => write!(f, "stream set-up: {e}"),
            NicError::Packet(e) => write!(f, "packet stream: {e}"),
            NicError::Layout => f.write_str("the streams do not fit their memory"),
            NicError::FrameSize(n) => write!(f, "a frame of {n} bytes"),
        }
    }
}

/// What acknowledgement status `s` means.
pub fn status_text(s: u32) -> &'static str {
    match s {
        STATUS_OK => "sent",
        STATUS_SIZE => "bad frame size",
        STATUS_OP => "unknown operation",
        STATUS_SOURCE => "not the session's own source address",
        STATUS_IO => "device error",
        _ => "unknown status",
    }
}

/// Whether transmit packet `packet` is one a provider of MTU `mtu` sends:
/// `Err(status)` to acknowledge it at once with that status instead.
pub fn check(packet: &Packet, mtu: u32) -> Result<(), u32> {
    if packet.op != OP_SEND {
        return Err(STATUS_OP);
    }
    if packet.len() < HEADER || packet.len() > mtu.saturating_add(HEADER) {
        return Err(STATUS_SIZE);
    }
    Ok(())
}

impl Session<Nic> {
    /// The interface.
    pub fn info(&self) -> Result<NicInfo, NicError> {
        let (info, w) = self.call(INFO, [0; 4]).map_err(NicError::Ipc)?;
        if info.label() != OK {
            return Err(NicError::Refused(info.label()));
        }
        let mtu = u32::try_from(w[2]).map_err(|_| NicError::BadInfo)?;
        if w[0] >> 48 != 0 || !(68..=STREAM_BLOCK - HEADER).contains(&mtu) {
            return Err(NicError::BadInfo);
        }
        Ok(NicInfo {
            mac: Mac::from_word(w[0]),
            link_up: w[1] & FLAG_LINK_UP != 0,
            mtu,
        })
    }

    /// Sets up the streams: the three capabilities into the empty own
    /// slots `slots` (frame, provider's notification, client's), the
    /// frame mapped at `va`; the client's ends of them.
    ///
    /// # Safety
    ///
    /// `[va, va + STREAM_BYTES)` is a region of the address space nothing
    /// else of the program uses, 2 MiB aligned.
    pub unsafe fn streams(&self, slots: [u32; 3], va: u64) -> Result<NicClient, NicError> {
        // SAFETY: the caller's promise, passed on.
        let notify = unsafe { super::frame::receive(self.cap(), STREAM, OK, slots, va) }
            .map_err(NicError::Stream)?;
        // SAFETY: the frame is mapped there now; the two parts are
        // disjoint, each one stream's alone.
        let (tx, rx) = unsafe {
            (
                Region::new((va as usize + TX_OFFSET) as *mut u8, PART_BYTES),
                Region::new((va as usize + RX_OFFSET) as *mut u8, PART_BYTES),
            )
        };
        let (tx, rx) = (
            tx.map_err(|_| NicError::Layout)?,
            rx.map_err(|_| NicError::Layout)?,
        );
        Ok(NicClient {
            tx: Source::new(tx, stream_config(), notify).map_err(|_| NicError::Layout)?,
            rx: Sink::new(rx, stream_config(), notify).map_err(|_| NicError::Layout)?,
            notify,
            frame: own(slots[0]),
        })
    }
}

/// The client's ends of a Nic session's streams.
pub struct NicClient {
    /// Transmit: the client is the source.
    pub tx: Source<Notifications, STREAM_WORDS>,
    /// Receive: the client is the sink.
    pub rx: Sink<Notifications>,
    notify: Notifications,
    /// The frame's slot (mapped).
    pub frame: CapSlot,
}

impl NicClient {
    /// Stages `frame` for sending (published at [`Self::flush`], or when
    /// the ring fills): the packet it went out in, whose acknowledgement
    /// [`Self::sent`] returns. `Packet(BufferFull)` or `Packet(RingFull)`:
    /// take acknowledgements first ([`Self::wait`]).
    pub fn send(&mut self, frame: &[u8]) -> Result<Packet, NicError> {
        if frame.len() < HEADER as usize || frame.len() > MAX_FRAME as usize {
            return Err(NicError::FrameSize(frame.len()));
        }
        let mut packet = self
            .tx
            .alloc(frame.len() as u32)
            .map_err(NicError::Packet)?;
        let copied = self
            .tx
            .payload_mut(&packet)
            .map(|p| p.copy_from_slice(frame));
        packet.op = OP_SEND;
        let submitted = copied.and_then(|()| self.tx.submit(packet));
        if let Err(e) = submitted {
            let _ = self.tx.release(packet);
            return Err(NicError::Packet(e));
        }
        Ok(packet)
    }

    /// The next acknowledged transmit packet, released: its status
    /// ([`STATUS_OK`], ...) and the packet as it was acknowledged; `None`
    /// if there is none now. An acknowledgement the provider made up is
    /// dropped by the stream and skipped here.
    pub fn sent(&mut self) -> Result<Option<(u32, Packet)>, NicError> {
        loop {
            match self.tx.get_ack() {
                Ok(Some(p)) => {
                    self.tx.release(p).map_err(NicError::Packet)?;
                    return Ok(Some((p.op, p)));
                }
                Ok(None) => return Ok(None),
                Err(e) if e.is_fatal() => return Err(NicError::Packet(e)),
                Err(_) => {}
            }
        }
    }

    /// The next received frame, `None` if there is none now: read it with
    /// [`Self::frame`], then give the buffer back with [`Self::done`].
    pub fn receive(&mut self) -> Result<Option<Taken>, NicError> {
        loop {
            match self.rx.get() {
                Ok(t) => return Ok(t),
                Err(e) if e.is_fatal() => return Err(NicError::Packet(e)),
                // A descriptor outside the buffer: dropped by the stream.
                Err(_) => {}
            }
        }
    }

    /// The bytes of received frame `taken`.
    pub fn frame(&self, taken: &Taken) -> Result<&[u8], NicError> {
        self.rx.payload(taken).map_err(NicError::Packet)
    }

    /// Gives received frame `taken`'s buffer back to the provider (staged:
    /// published at [`Self::flush`] or [`Self::wait`]).
    pub fn done(&mut self, taken: Taken) -> Result<(), NicError> {
        // The ring has room: the provider never has more buffers out than
        // it has entries.
        self.rx.ack(taken).map_err(|e| NicError::Packet(e.error))
    }

    /// The streams' notifications (the provider's to signal, the own to
    /// wait on).
    pub fn notifications(&self) -> Notifications {
        self.notify
    }

    /// Publishes what was sent and given back (one signal per batch at
    /// most).
    pub fn flush(&mut self) -> Result<(), NicError> {
        self.tx.flush().map_err(NicError::Packet)?;
        self.rx.flush().map_err(NicError::Packet)
    }

    /// Publishes, then sleeps until a frame arrives, a transmit packet is
    /// acknowledged or (with `space`) the transmit ring has room; returns
    /// at once if one of them is so already. May return for nothing:
    /// look, then wait again.
    pub fn wait(&mut self, space: bool) -> Result<(), NicError> {
        let acks = self.tx.arm(space).map_err(NicError::Packet)?;
        let frames = self.rx.arm(false).map_err(NicError::Packet)?;
        if !acks && !frames {
            // Through the stream's `Notify`: `Aborted` when the parent
            // says the provider stopped (`interfaces::session::PROVIDER_GONE`).
            use crate::stream::Notify;
            self.notify.wait().map_err(NicError::Ipc)?;
        }
        Ok(())
    }
}

/// The provider's ends of one Nic session's streams: the stream frame
/// (`super::frame::StreamFrame`), the transmit sink with its backlog of
/// acknowledgements (`super::frame::AckedSink`) and the receive source.
///
/// Dropping it (the session closed) unregisters the signal context and
/// unmaps the frame; the objects go when the client revokes its donation.
pub struct NicServed<T: 'static> {
    /// Transmit: the provider is the sink.
    pub tx: AckedSink,
    /// Receive: the provider is the source.
    pub rx: Source<Notifications, STREAM_WORDS>,
    frame: StreamFrame<T>,
}

impl<T: 'static> NicServed<T> {
    /// Makes the session's streams from `donated`, maps the frame at `va`
    /// and registers `on_signal` on `signals` (whose notification is bound
    /// to the provider's thread); both streams are armed, so the client's
    /// first batch signals.
    ///
    /// # Safety
    ///
    /// `[va, va + STREAM_BYTES)` is a 2 MiB aligned region nothing else of
    /// the provider uses while the `NicServed` exists.
    pub unsafe fn open(
        donated: crate::session::Donated,
        signals: &alloc::rc::Rc<core::cell::RefCell<crate::signal::Signals<T>>>,
        va: u64,
        on_signal: impl FnMut(&mut T) + 'static,
    ) -> Result<NicServed<T>, ServeError> {
        // SAFETY: the caller's promise, passed on.
        let (frame, notify) = unsafe { StreamFrame::open(donated, signals, va, on_signal) }?;
        // SAFETY: two disjoint parts of the frame, one per stream, living
        // no longer than it (`frame` is the last field).
        let (tx, rx) = unsafe {
            (
                frame.region(TX_OFFSET, PART_BYTES),
                frame.region(RX_OFFSET, PART_BYTES),
            )
        };
        let (tx, rx) = (
            tx.ok_or("stream region misaligned")?,
            rx.ok_or("stream region misaligned")?,
        );
        let tx = Sink::new(tx, stream_config(), notify).map_err(|_| "stream layout")?;
        let mut rx = Source::new(rx, stream_config(), notify).map_err(|_| "stream layout")?;
        rx.arm(false).map_err(|_| "stream broken at start")?;
        Ok(NicServed {
            tx: AckedSink::new(tx)?,
            rx,
            frame,
        })
    }

    /// The streams' frame (the provider's capability: to learn its bus
    /// address).
    pub fn frame(&self) -> CapSlot {
        self.frame.frame()
    }

    /// Where transmit packets' bytes start in the frame: add the offset.
    pub fn tx_buffer(&self) -> usize {
        TX_OFFSET + self.tx.sink.layout().buffer_offset()
    }

    /// Where receive packets' bytes start in the frame: add the offset.
    pub fn rx_buffer(&self) -> usize {
        RX_OFFSET + self.rx.layout().buffer_offset()
    }

    /// The reply to a [`STREAM`] request (the capability in it).
    pub fn stream_reply(&self, which: u64) -> (abi::MsgInfo, crate::syscall::Words) {
        self.frame.stream_reply(which, OK, REFUSED)
    }

    /// Publishes both streams: the transmit acknowledgements (the backlog
    /// first, as far as the ring takes it) and the received frames
    /// submitted; `Err` once a stream is broken ([`Self::broken`]).
    pub fn publish(&mut self) -> Result<(), crate::stream::Error> {
        self.tx.publish()?;
        self.rx.flush().inspect_err(|e| {
            if e.is_fatal() {
                self.tx.set_broken();
            }
        })
    }

    /// Re-arms both streams before the provider returns to its `Recv`:
    /// `true` if packets, acknowledgements or ring space (for the
    /// transmit backlog, or, with `rx_waiting`, for received frames) are
    /// there already — look again now.
    pub fn arm(&mut self, rx_waiting: bool) -> bool {
        if self.broken() {
            return false;
        }
        let tx = self.tx.arm();
        match self.rx.arm(rx_waiting) {
            Ok(rx) => tx || rx,
            Err(_) => {
                self.tx.set_broken();
                false
            }
        }
    }

    /// Whether a stream broke (the client wrote impossible indices): the
    /// session is not looked at any more.
    pub fn broken(&self) -> bool {
        self.tx.broken()
    }

    /// Marks the session broken.
    pub fn set_broken(&mut self) {
        self.tx.set_broken();
    }
}

/// A Nic session that survives its provider's restart (a driver killed
/// and restarted by init): the session, its streams (`NicClient`, through
/// `Deref`) and what it takes to open both again. When an operation fails
/// with [`NicError::provider_gone`], [`NicLink::reconnect`] opens a fresh
/// session (waiting while init restarts the provider) and fresh streams
/// in the same place. Frames in flight are lost, as on a link that went
/// down: the protocols above retransmit.
pub struct NicLink {
    session: Session<Nic>,
    nic: NicClient,
    info: NicInfo,
    stream_slots: [u32; 3],
    va: u64,
}

impl NicLink {
    /// Opens the session from the component's quota (own slots `slot`,
    /// `donor_block`, `donor_table`) and its streams (`stream_slots`,
    /// mapped at `va`).
    ///
    /// # Safety
    ///
    /// `[va, va + STREAM_BYTES)` is a 2 MiB aligned region nothing else of
    /// the program uses for as long as the `NicLink` exists (a reconnect
    /// maps the new streams there).
    pub unsafe fn connect(
        slot: u32,
        donor_block: u32,
        donor_table: u32,
        stream_slots: [u32; 3],
        va: u64,
    ) -> Result<NicLink, alloc::string::String> {
        use alloc::format;
        let session = super::open_from_quota::<Nic>(slot, donor_block, donor_table)?;
        let info = session.info().map_err(|e| format!("INFO: {e}"))?;
        // SAFETY: the caller's promise, passed on.
        let nic = unsafe { session.streams(stream_slots, va) }.map_err(|e| format!("{e}"))?;
        Ok(NicLink {
            session,
            nic,
            info,
            stream_slots,
            va,
        })
    }

    /// The interface as the provider described it (at the last connect).
    pub fn info(&self) -> NicInfo {
        self.info
    }

    /// Opens the session again after its provider stopped: the old one
    /// closed and its donation revoked (the old streams with it), a new
    /// one opened — `Session::reopen` waits while init restarts the
    /// provider — and its streams set up where the old ones were.
    pub fn reconnect(&mut self) -> Result<(), alloc::string::String> {
        use alloc::format;
        self.session
            .reopen()
            .map_err(|e| format!("reopening the session: {e}"))?;
        let info = self
            .session
            .info()
            .map_err(|e| format!("INFO after reopening: {e}"))?;
        // SAFETY: the old `NicClient` is replaced below, never used again.
        unsafe { super::frame::forget_received(self.stream_slots) };
        // SAFETY: the region is the old streams' (`connect`'s caller gave
        // it to this link), unmapped with the old frame.
        self.nic = unsafe { self.session.streams(self.stream_slots, self.va) }
            .map_err(|e| format!("the new streams: {e}"))?;
        self.info = info;
        Ok(())
    }
}

impl core::ops::Deref for NicLink {
    type Target = NicClient;
    fn deref(&self) -> &NicClient {
        &self.nic
    }
}

impl core::ops::DerefMut for NicLink {
    fn deref_mut(&mut self) -> &mut NicClient {
        &mut self.nic
    }
}
