//! The stack's driver on Pecan: smoltcp's device over a Nic session
//! (`rt::session::nic`), time and timeouts from a Timer session
//! (`rt::session::timer`), seeds from RDRAND (`rt::entropy`).
//!
//! # Frames without copies
//!
//! - Receive: the device wrote the frame into the client's receive
//!   stream; smoltcp reads it there ([`Rx::consume`] hands it the
//!   stream's bytes) and the buffer is acknowledged back to the provider.
//! - Transmit: [`Tx::consume`] allocates the packet in the transmit
//!   stream and smoltcp builds the frame in place; it is submitted as is.
//!   [`Device::transmit`] hands out a token only when the stream has room
//!   for a whole frame (a packet and a ring entry), so smoltcp keeps what
//!   does not fit in its socket buffers instead of losing it. The token
//!   that comes with a received frame (for an immediate reply) cannot
//!   know that in advance: if the stream is full then, the reply is built
//!   in a scratch buffer and dropped (counted; ARP and TCP send again).
//!
//! Everything staged — frames submitted, receive buffers acknowledged —
//! is published once per poll of the interface ([`Driver::flush`]): one
//! signal per batch at most.
//!
//! # Waiting on two notifications
//!
//! The Nic session's streams signal one notification, the Timer session
//! another; both were made by their providers and are held read-only, so
//! the stack's thread cannot wait on both with `Wait`. Instead the Nic
//! notification is bound to the thread (`BindNotification`) and the
//! thread waits in `Recv` on an endpoint of its own: the bound
//! notification's signals end that `Recv` (label
//! `abi::LABEL_NOTIFICATION`), and a helper thread that waits on the
//! Timer's notification sends a message to the same endpoint when a
//! timeout fires ([`TIMER_FIRED`]). No polling; a timeout costs one
//! extra message. One one-shot timeout at a time is armed, for the
//! earliest deadline the stack asked for; a later deadline keeps it (the
//! wake-up is early and the stack just waits again).
//!
//! # The gateway's ARP resolution, logged
//!
//! smoltcp does not report what its neighbour cache learns, so the
//! receive path looks at each ARP frame and records every address it has
//! not seen before ([`NicDevice::take_neighbour`]).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use rt::abi::caddr::{own, NULL_SLOT};
use rt::abi::{CapSlot, MsgInfo, ObjectType, LABEL_NOTIFICATION};
use rt::interfaces::child;
use rt::session::nic::{self, Nic, NicClient, NicInfo};
use rt::session::timer::{Timeout, Timer};
use rt::session::{self, Session};
use rt::stream::{Notifications, Sink, Source, Taken};
use rt::{syscall, thread};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, Ipv4Address,
};

use crate::stack::Driver;

/// The label of the helper thread's message: a timeout fired; word 0 the
/// Timer notification's bits.
pub const TIMER_FIRED: u64 = 0x7130_0001;

/// Most frames the peer may have in flight to us: the receive buffers
/// the device holds at once (docs/network.md, "max_burst_size").
pub const MAX_BURST: usize = 128;

/// Counters of the device adapter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Frames received (given to smoltcp).
    pub received: u64,
    /// Frames submitted for sending.
    pub sent: u64,
    /// Frames the provider acknowledged with an error status.
    pub failed: u64,
    /// Replies dropped because the transmit stream was full.
    pub dropped: u64,
    /// Times smoltcp had to wait for room in the transmit stream.
    pub tx_full: u64,
}

type TxStream = Source<Notifications, { nic::STREAM_WORDS }>;

/// smoltcp's device over a Nic session's streams.
pub struct NicDevice {
    nic: NicClient,
    mtu: usize,
    /// The last `transmit` found no room: wake up when there is.
    want_space: bool,
    broken: bool,
    rx_counters: DeviceCounters,
    tx_counters: DeviceCounters,
    scratch: Box<[u8]>,
    /// Addresses seen in ARP frames, and the ones not logged yet.
    neighbours: Vec<(Ipv4Address, EthernetAddress)>,
    news: VecDeque<(Ipv4Address, EthernetAddress)>,
}

impl NicDevice {
    /// The device over `client`, an interface of MTU `mtu` (at most
    /// `nic::MTU`: every frame fits [`nic::MAX_FRAME`] and the scratch
    /// buffer).
    pub fn new(client: NicClient, mtu: u32) -> NicDevice {
        NicDevice {
            nic: client,
            // A frame takes one stream block: no larger MTU than the
            // session's (a provider reporting more is not believed).
            mtu: mtu.min(nic::MTU) as usize,
            want_space: false,
            broken: false,
            rx_counters: DeviceCounters::default(),
            tx_counters: DeviceCounters::default(),
            scratch: alloc::vec![0u8; nic::MAX_FRAME as usize].into_boxed_slice(),
            neighbours: Vec::new(),
            news: VecDeque::new(),
        }
    }

    /// What it counted.
    pub fn counters(&self) -> DeviceCounters {
        let (r, t) = (self.rx_counters, self.tx_counters);
        DeviceCounters {
            received: r.received,
            sent: t.sent,
            failed: t.failed,
            dropped: t.dropped,
            tx_full: t.tx_full,
        }
    }

    /// Whether a stream broke (the provider wrote impossible indices).
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// The next address learnt from ARP that was not taken yet.
    pub fn take_neighbour(&mut self) -> Option<(Ipv4Address, EthernetAddress)> {
        self.news.pop_front()
    }

    /// Takes the transmit acknowledgements there are.
    fn reclaim(&mut self) {
        loop {
            match self.nic.sent() {
                Ok(Some((status, _))) => {
                    if status != nic::STATUS_OK {
                        self.tx_counters.failed += 1;
                    }
                }
                Ok(None) => return,
                Err(_) => {
                    self.broken = true;
                    return;
                }
            }
        }
    }

    /// Whether the transmit stream has room for a whole frame now.
    fn tx_room(&mut self) -> bool {
        self.reclaim();
        let tx = &self.nic.tx;
        tx.in_flight() < nic::ENTRIES as usize - 1 && tx.free_bytes() >= nic::STREAM_BLOCK as usize
    }

    fn flush(&mut self) {
        if !self.broken && self.nic.flush().is_err() {
            self.broken = true;
        }
    }

    /// Arms both streams' signals: `true` if there is work already.
    fn arm(&mut self) -> bool {
        if self.broken {
            return false;
        }
        // Acknowledgements already there would make the arm say "look
        // now" for ever when nothing is sent (the stack only takes them
        // when it transmits): take them first.
        self.reclaim();
        let acks = self.nic.tx.arm(self.want_space);
        let frames = self.nic.rx.arm(false);
        match (acks, frames) {
            (Ok(a), Ok(f)) => a || f,
            _ => {
                self.broken = true;
                false
            }
        }
    }
}

/// A received frame's token.
pub struct Rx<'a> {
    rx: &'a mut Sink<Notifications>,
    taken: Option<Taken>,
    counters: &'a mut DeviceCounters,
    neighbours: &'a mut Vec<(Ipv4Address, EthernetAddress)>,
    news: &'a mut VecDeque<(Ipv4Address, EthernetAddress)>,
}

/// Records the sender of an ARP frame if it is new.
fn snoop_arp(
    frame: &[u8],
    neighbours: &mut Vec<(Ipv4Address, EthernetAddress)>,
    news: &mut VecDeque<(Ipv4Address, EthernetAddress)>,
) {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return;
    };
    if eth.ethertype() != EthernetProtocol::Arp {
        return;
    }
    let Ok(arp) = ArpPacket::new_checked(eth.payload()) else {
        return;
    };
    if let Ok(ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Reply,
        source_hardware_addr,
        source_protocol_addr,
        ..
    }) = ArpRepr::parse(&arp)
    {
        let entry = (source_protocol_addr, source_hardware_addr);
        // A handful of neighbours on a user network: a list is enough.
        if !neighbours.contains(&entry) && neighbours.len() < 64 {
            neighbours.push(entry);
            news.push_back(entry);
        }
    }
}

impl phy::RxToken for Rx<'_> {
    fn consume<R, F>(mut self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let Some(taken) = self.taken.take() else {
            return f(&[]);
        };
        self.counters.received += 1;
        let r = match self.rx.payload(&taken) {
            Ok(frame) => {
                snoop_arp(frame, self.neighbours, self.news);
                f(frame)
            }
            // Not readable (cannot be, the stream checked it): nothing.
            Err(_) => f(&[]),
        };
        // The ring has room: the provider has fewer buffers out than entries.
        let _ = self.rx.ack(taken);
        r
    }
}

impl Drop for Rx<'_> {
    fn drop(&mut self) {
        // A token smoltcp did not consume still gives its buffer back.
        if let Some(t) = self.taken.take() {
            let _ = self.rx.ack(t);
        }
    }
}

/// A transmit token: the frame is built in the stream.
pub struct Tx<'a> {
    tx: &'a mut TxStream,
    counters: &'a mut DeviceCounters,
    scratch: &'a mut [u8],
}

impl phy::TxToken for Tx<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let packet = u32::try_from(len)
            .ok()
            .filter(|&l| l <= nic::MAX_FRAME)
            .and_then(|l| self.tx.alloc(l).ok());
        if let Some(mut p) = packet {
            if let Ok(buf) = self.tx.payload_mut(&p) {
                let r = f(buf);
                p.op = nic::OP_SEND;
                match self.tx.submit(p) {
                    Ok(()) => self.counters.sent += 1,
                    Err(_) => {
                        let _ = self.tx.release(p);
                        self.counters.dropped += 1;
                    }
                }
                return r;
            }
            let _ = self.tx.release(p);
        }
        self.counters.dropped += 1;
        let n = len.min(self.scratch.len());
        f(&mut self.scratch[..n])
    }
}

impl Device for NicDevice {
    type RxToken<'a> = Rx<'a>;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _: Instant) -> Option<(Rx<'_>, Tx<'_>)> {
        if self.broken {
            return None;
        }
        let taken = loop {
            match self.nic.rx.get() {
                Ok(Some(t)) => break t,
                Ok(None) => return None,
                Err(e) if e.is_fatal() => {
                    self.broken = true;
                    return None;
                }
                // A descriptor outside the buffer: dropped by the stream.
                Err(_) => {}
            }
        };
        self.reclaim();
        Some((
            Rx {
                rx: &mut self.nic.rx,
                taken: Some(taken),
                counters: &mut self.rx_counters,
                neighbours: &mut self.neighbours,
                news: &mut self.news,
            },
            Tx {
                tx: &mut self.nic.tx,
                counters: &mut self.tx_counters,
                scratch: &mut self.scratch,
            },
        ))
    }

    fn transmit(&mut self, _: Instant) -> Option<Tx<'_>> {
        if self.broken {
            return None;
        }
        if !self.tx_room() {
            if !self.want_space {
                self.tx_counters.tx_full += 1;
            }
            self.want_space = true;
            return None;
        }
        self.want_space = false;
        Some(Tx {
            tx: &mut self.nic.tx,
            counters: &mut self.tx_counters,
            scratch: &mut self.scratch,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        // smoltcp counts the Ethernet header in an Ethernet device's MTU.
        caps.max_transmission_unit = self.mtu + nic::HEADER as usize;
        caps.max_burst_size = Some(MAX_BURST);
        caps
    }
}

/// Counters of the waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCounters {
    /// Sleeps in `Recv`.
    pub sleeps: u64,
    /// Wake-ups by the Nic notification.
    pub nic: u64,
    /// Wake-ups by a timeout.
    pub timer: u64,
    /// Timer requests (`CLOCK`, `ONESHOT`, `CANCEL`, ...).
    pub timer_calls: u64,
}

/// The stack's driver on Pecan.
pub struct PecanDriver {
    /// The device.
    pub device: NicDevice,
    /// What the Nic provider said about the interface.
    pub info: NicInfo,
    timer: Timer,
    endpoint: CapSlot,
    /// The one-shot timeout armed, and its deadline (µs).
    armed: Option<(Timeout, u64)>,
    /// The last time read (for a failed read: time does not go back).
    last_us: u64,
    counters: WaitCounters,
    // Kept open for as long as the driver lives.
    _session: Session<Nic>,
}

/// The slots [`open`] fills, from its `first` on.
pub const SLOTS: u32 = 10 + thread::PAGES as u32;
/// Bytes of address space [`open`] maps the streams in (2 MiB aligned).
pub const STREAM_SPACE: usize = nic::STREAM_BYTES;

/// The helper thread's notification and endpoint.
static HELPER_NOTIFICATION: AtomicU64 = AtomicU64::new(NULL_SLOT);
static HELPER_ENDPOINT: AtomicU64 = AtomicU64::new(NULL_SLOT);

/// The helper thread: forwards each wake-up of the Timer's notification
/// to the stack's endpoint as a [`TIMER_FIRED`] message.
extern "C" fn forward_timeouts(_: u64) -> ! {
    let notification = HELPER_NOTIFICATION.load(Ordering::Acquire);
    let endpoint = HELPER_ENDPOINT.load(Ordering::Acquire);
    let info = MsgInfo::new(TIMER_FIRED, 1, 0).unwrap_or_default();
    loop {
        match syscall::wait(notification) {
            Ok(bits) => {
                if syscall::send(endpoint, info, [bits, 0, 0, 0]).is_err() {
                    syscall::thread_exit(2);
                }
            }
            // The Timer session is gone: nothing more will come.
            Err(_) => syscall::thread_exit(1),
        }
    }
}

/// Opens the Nic and Timer sessions (through the parent, the Nic's
/// donation from the component's quota) into the empty own slots
/// `first..first + SLOTS`, maps the streams at `va` (2 MiB aligned,
/// [`STREAM_SPACE`] bytes nothing else uses), makes the endpoint, binds
/// the Nic's notification to the calling thread and starts the helper
/// thread. Needs RDRAND (checked here: [`Driver::seed`] has no other
/// source) and `own = ["thread", "cspace", "vspace"]`.
///
/// # Safety
///
/// `[va, va + STREAM_SPACE)` is a region of the address space nothing
/// else of the program uses.
pub unsafe fn open(first: u32, va: u64) -> Result<PecanDriver, String> {
    if !rt::entropy::has_rdrand() || rt::entropy::rdrand64().is_none() {
        return Err(
            "the CPU has no working RDRAND (QEMU: -cpu max): no seed for TCP sequence \
                    numbers, ports and DHCP ids"
                .into(),
        );
    }
    let slot = |i: u32| first + i;
    let session = session::open_from_quota::<Nic>(slot(0), slot(1), slot(2))
        .map_err(|e| format!("Nic session: {e}"))?;
    let info = session.info().map_err(|e| format!("Nic INFO: {e}"))?;
    // SAFETY: the caller's promise, passed on.
    let client = unsafe { session.streams([slot(3), slot(4), slot(5)], va) }
        .map_err(|e| format!("Nic streams: {e}"))?;
    let timer = Timer::open(slot(6), slot(7)).map_err(|e| format!("Timer session: {e}"))?;
    let endpoint = own(slot(8));
    syscall::retype(own(child::UNTYPED), ObjectType::Endpoint, 0, endpoint, 1)
        .map_err(|e| format!("endpoint: {e}"))?;
    syscall::bind_notification(own(child::OWN_THREAD), client.notifications().own)
        .map_err(|e| format!("binding the Nic notification: {e}"))?;
    HELPER_NOTIFICATION.store(timer.notification(), Ordering::Release);
    HELPER_ENDPOINT.store(endpoint, Ordering::Release);
    let cpu = rt::cpu::set().nth(0).unwrap_or(0);
    thread::spawn(
        forward_timeouts,
        0,
        thread::Slots {
            thread: own(slot(9)),
            frames: own(slot(10)),
        },
        thread::Placement {
            priority: child::PRIORITY,
            cpu,
            fault_endpoint: NULL_SLOT,
        },
    )
    .map_err(|e| format!("the timeout thread: {e}"))?;
    Ok(PecanDriver {
        device: NicDevice::new(client, info.mtu),
        info,
        timer,
        endpoint,
        armed: None,
        last_us: 0,
        counters: WaitCounters::default(),
        _session: session,
    })
}

impl PecanDriver {
    /// The wait counters.
    pub fn counters(&self) -> WaitCounters {
        WaitCounters {
            timer_calls: self.timer.requests(),
            ..self.counters
        }
    }

    fn now_us(&mut self) -> u64 {
        // Read at every poll: the TSC-interpolated clock, a request only
        // every few milliseconds.
        if let Ok(t) = self.timer.clock_now() {
            self.last_us = self.last_us.max(t);
        }
        self.last_us
    }

    /// Makes sure a timeout fires by `deadline` (µs), `now` being now.
    fn arm_timer(&mut self, deadline: u64, now: u64) {
        if let Some((t, at)) = self.armed {
            if at <= deadline && at > now {
                return;
            }
            if at > now {
                // Already fired, or cancelled: either way it is gone.
                let _ = self.timer.cancel(t);
            }
            self.armed = None;
        }
        // At least 1 µs, at most what the Timer takes (an hour: the stack
        // just waits again).
        let us = (deadline - now).clamp(1, 3_600_000_000);
        if let Ok(t) = self.timer.oneshot(us) {
            self.armed = Some((t, now + us));
        }
    }
}

impl Driver for PecanDriver {
    type Device = NicDevice;

    fn device(&mut self) -> &mut NicDevice {
        &mut self.device
    }

    fn now(&mut self) -> Instant {
        Instant::from_micros(self.now_us() as i64)
    }

    fn wait(&mut self, until: Option<Instant>) {
        self.device.flush();
        if let Some(u) = until {
            let deadline = u.total_micros().max(0) as u64;
            let now = self.now_us();
            if deadline <= now {
                return;
            }
            self.arm_timer(deadline, now);
        }
        if self.device.arm() {
            return;
        }
        self.counters.sleeps += 1;
        match syscall::recv(self.endpoint) {
            Ok((_, info, _)) if info.label() == LABEL_NOTIFICATION => self.counters.nic += 1,
            Ok((_, info, words)) if info.label() == TIMER_FIRED => {
                self.counters.timer += 1;
                if self.armed.is_some_and(|(t, _)| words[0] & t.bit() != 0) {
                    self.armed = None;
                }
            }
            // Nobody else has the endpoint; an error returns to the stack,
            // which looks again.
            _ => {}
        }
    }

    fn flush(&mut self) {
        self.device.flush();
    }

    fn seed(&mut self) -> u64 {
        // `open` checked that RDRAND works; a later failure (its source
        // drained ten times in a row) mixes in the clock rather than
        // stopping the stack.
        rt::entropy::rdrand64()
            .unwrap_or_else(|| self.now_us().rotate_left(17) ^ rt::syscall::rdtsc())
    }
}
