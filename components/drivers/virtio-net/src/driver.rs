//! The frame paths of the virtio-net driver.
//!
//! Two virtqueues (virtio 1.2, 5.1.2): receive (0) and transmit (1), each
//! with its own MSI-X interrupt. Every chain is two descriptors: the
//! 12-byte virtio-net header (5.1.6; no offloads are negotiated, so it is
//! all zeroes going out and ignored coming in) in the driver's DMA memory,
//! then the frame in the session's stream buffer — in place, zero copy.
//!
//! **Transmit.** The client's signal runs [`Driver::session_signal`]:
//! every packet on the transmit stream is taken and checked
//! (`nic::check`); a bad one is acknowledged at once with its status, a
//! good one joins the FIFO `tx_pending`. Pending frames enter the queue
//! while descriptors are free, and one `kick` publishes the batch (a
//! doorbell only if the device asked: event index). The driver asks for
//! one interrupt when the last chain in flight is done
//! (`interrupt_after`), and acknowledges each sent frame with
//! `STATUS_OK` when it is.
//!
//! **Receive.** When the session opens, the driver allocates [`nic::RX_POOL`]
//! buffers of `nic::STREAM_BLOCK` bytes in the receive stream — once; each
//! is reused for as long as the session lives — and gives as many to the
//! device as its queue holds (one `kick` per refill batch). The receive
//! interrupt ([`Driver::rx_interrupt`]) runs with the queue's interrupts
//! suppressed while it takes completions, then re-arms them and looks
//! again (a completion between the last look and the re-arm is never
//! missed). Each filled buffer is submitted to the client with its
//! frame's length; the client's acknowledgements bring buffers back, and
//! the next refill gives them to the device again.
//!
//! **Closing.** Receive buffers stay with the device until a frame
//! arrives, which may be never: a closing session's buffers are taken
//! back by resetting the device and setting it up again over the same
//! queues (`VirtioDevice::restart`) before the close is answered — only
//! then can the client's memory go. A frame the client submitted and the
//! device has not sent yet is dropped with it.
//!
//! **A hostile client** breaks at most its own session (`NicServed`
//! records it; the driver stops looking at it). **A device answering
//! nonsense** (a used element the queue refuses, a receive length
//! shorter than a header) is an error: a bad length drops that frame, a
//! broken queue restarts the device (frames in flight are lost: transmit
//! ones acknowledged with `STATUS_IO`), at most [`MAX_RESTARTS`] times;
//! then the driver gives the device up and fails every transmit frame.
//!
//! Invariants: `rx_posted[t]` is `Some` exactly for the receive chains in
//! the queue with head `t`, `tx_posted[t]` likewise for transmit; every
//! receive buffer of the pool is in exactly one of `rx_free`,
//! `rx_posted`, `rx_full` or the client's hands (submitted, not yet
//! acknowledged); all four are empty without a session.

use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::fmt;

use rt::abi::CapSlot;
use rt::mmio::Region;
use rt::println;
use rt::session::nic::{self, Mac, NicInfo, NicServed};
use rt::session::platform::Platform;
use rt::session::{Donated, Session, SessionTable};
use rt::stream::{Error as StreamError, Packet, Taken};
use rt::virtio::{dma_region, Buffer, QueueIrq, VirtQueue, VirtioDevice, VirtioError};

use crate::SharedSignals;

/// virtio-net feature bits (virtio 1.2, 5.1.3).
const F_MAC: u32 = 5;
const F_STATUS: u32 = 16;
/// Device configuration (5.1.4): the MAC address, then the status.
const CONFIG_MAC: u32 = 0;
const CONFIG_STATUS: u32 = 6;
const STATUS_LINK_UP: u16 = 1;
/// Bytes of the virtio-net header with `VERSION_1` (5.1.6).
const NET_HDR: u32 = 12;

/// The queues.
const RX_QUEUE: u16 = 0;
const TX_QUEUE: u16 = 1;
/// Entries asked for (QEMU offers 256 for each).
const QUEUE: u16 = 256;

/// DMA memory for the headers: one 16-byte receive header slot per pool
/// buffer in the first page, the transmit header (zeroes, read by the
/// device for every frame) in the second.
const META_BYTES: usize = 8192;
const TX_HEADER_AT: usize = 4096;
const RX_HEADER_SLOT: usize = 16;

/// How often a broken queue is mended by a device restart before the
/// driver gives the device up.
pub const MAX_RESTARTS: u32 = 3;

/// Where the session's stream frame is mapped.
const STREAM_VA: u64 = 0x40_0000_0000;

/// What one session saw, logged when it closes.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    sent: u64,
    received: u64,
    refused: u64,
    dropped_descriptors: u64,
    bad_acks: u64,
    device_errors: u64,
    /// Transmit doorbells rung, transmit and receive interrupts taken.
    tx_doorbells: u64,
    tx_interrupts: u64,
    rx_interrupts: u64,
    /// The most transmit chains the device had at once.
    most_tx_in_device: u16,
}

/// The session's stream buffers on the bus.
#[derive(Clone, Copy, Debug)]
struct Bus {
    tx: u64,
    rx: u64,
}

/// The driver: the device, its queues, the headers and the frames in
/// flight.
pub struct Driver {
    dev: VirtioDevice<'static>,
    rxq: VirtQueue,
    txq: VirtQueue,
    /// The headers' DMA memory (kept mapped while the device uses it).
    _meta: Region,
    meta_bus: u64,
    info: NicInfo,
    status_feature: bool,
    translate: CapSlot,
    /// The open session's id and buffers, if one is open.
    session: Option<(u64, Bus)>,
    next_id: u64,
    /// The pool's buffers as allocated (whole), by block of the receive
    /// buffer.
    pool: Vec<Option<Packet>>,
    rx_free: Vec<Packet>,
    rx_posted: Vec<Option<Packet>>,
    rx_full: VecDeque<Packet>,
    tx_pending: VecDeque<Taken>,
    tx_posted: Vec<Option<Taken>>,
    restarts: u32,
    /// Given up: the device broke its queues too often.
    dead: bool,
    counts: Counts,
}

impl Driver {
    /// Resets and sets up device 0 of `platform`: features, the receive
    /// and transmit queues with their MSI-X interrupts on `cpu`
    /// signalling `rx_irq` and `tx_irq`, DMA memory; prints what it found.
    pub fn start(
        platform: &'static Session<Platform>,
        rx_irq: CapSlot,
        tx_irq: CapSlot,
        cpu: u32,
    ) -> Result<Driver, VirtioError> {
        let device = platform.device(0)?;
        let mut dev = VirtioDevice::open(platform, 0, 1 << F_MAC | 1 << F_STATUS)?;
        if !dev.has_feature(F_MAC) {
            return Err(VirtioError::Device("the device has no MAC address"));
        }
        let mut mac = [0u8; 6];
        for (i, b) in mac.iter_mut().enumerate() {
            *b = dev.config_read8(CONFIG_MAC + i as u32)?;
        }
        let irq = |entry, notification| QueueIrq {
            entry,
            cpu,
            notification,
        };
        let rxq = dev.queue(RX_QUEUE, QUEUE, Some(irq(0, rx_irq)))?;
        let txq = dev.queue(TX_QUEUE, QUEUE, Some(irq(1, tx_irq)))?;
        let translate = platform.translate().map_err(|_| {
            VirtioError::Device("no bus-address translation from the platform: no zero copy")
        })?;
        let (meta, meta_bus) = dma_region(platform, META_BYTES)?;
        // The transmit header: no offloads, so all zeroes.
        meta.copy_from(TX_HEADER_AT, &[0; NET_HDR as usize])
            .ok_or(VirtioError::Device("DMA memory too small for the headers"))?;
        dev.driver_ok()?;
        let driver = Driver {
            info: NicInfo {
                mac: Mac(mac),
                link_up: true,
                mtu: nic::MTU,
            },
            status_feature: dev.has_feature(F_STATUS),
            dev,
            rx_posted: (0..rxq.size()).map(|_| None).collect(),
            tx_posted: (0..txq.size()).map(|_| None).collect(),
            rxq,
            txq,
            _meta: meta,
            meta_bus,
            translate,
            session: None,
            next_id: 1,
            pool: Vec::new(),
            rx_free: Vec::new(),
            rx_full: VecDeque::new(),
            tx_pending: VecDeque::new(),
            restarts: 0,
            dead: false,
            counts: Counts::default(),
        };
        let info = driver.info();
        println!(
            "virtio-net: {:02x}:{:02x}.{} MAC {}, link {}, MTU {}, queues {}+{} entries, event index {}, MSI-X on CPU {cpu}, zero-copy",
            device.bdf >> 8,
            (device.bdf >> 3) & 0x1f,
            device.bdf & 7,
            info.mac,
            if info.link_up { "up" } else { "down" },
            info.mtu,
            driver.rxq.size(),
            driver.txq.size(),
            driver.rxq.event_idx(),
        );
        Ok(driver)
    }

    /// The interface, as `INFO` describes it (the link state read now).
    pub fn info(&self) -> NicInfo {
        let link_up = match self.status_feature {
            true => self
                .dev
                .config_read16(CONFIG_STATUS)
                .is_ok_and(|s| s & STATUS_LINK_UP != 0),
            false => true,
        };
        NicInfo {
            link_up,
            ..self.info
        }
    }

    /// The client's signal: take what it submitted and acknowledged, give
    /// the device work, hand over what arrived, publish; until its streams
    /// are armed again.
    pub fn session_signal(&mut self, table: &mut SessionTable<Client>) {
        let Some(c) = client(table) else {
            return;
        };
        while !c.served.broken() {
            self.take_tx(c);
            self.take_rx_acks(c);
            self.run(c);
            if !c.served.arm(!self.rx_full.is_empty()) {
                break;
            }
        }
        self.report_broken(c);
    }

    /// The receive queue's interrupt: every filled buffer taken (with the
    /// queue's interrupts suppressed meanwhile), handed to the client.
    pub fn rx_interrupt(&mut self, table: &mut SessionTable<Client>) {
        let _ = self.rxq.ack_interrupt();
        self.counts.rx_interrupts += 1;
        let _ = self.rxq.disable_interrupts();
        loop {
            match self.rxq.pop_used() {
                Ok(Some(used)) => {
                    let Some(p) = self
                        .rx_posted
                        .get_mut(usize::from(used.token.0))
                        .and_then(Option::take)
                    else {
                        continue;
                    };
                    let frame = used.len.checked_sub(NET_HDR).filter(|n| *n >= nic::HEADER);
                    match frame.and_then(|n| p.truncated(n)) {
                        Some(frame) => self.rx_full.push_back(frame),
                        None => {
                            self.counts.device_errors += 1;
                            self.rx_free.push(p);
                        }
                    }
                }
                // Re-armed; buffers filled meanwhile are taken now.
                Ok(None) => match self.rxq.enable_interrupts() {
                    Ok(true) => continue,
                    _ => break,
                },
                Err(e) => {
                    self.device_broke(client(table), &e);
                    break;
                }
            }
        }
        self.after_interrupt(table);
    }

    /// The transmit queue's interrupt: every sent frame acknowledged.
    pub fn tx_interrupt(&mut self, table: &mut SessionTable<Client>) {
        let _ = self.txq.ack_interrupt();
        self.counts.tx_interrupts += 1;
        if let Some(c) = client(table) {
            self.reap_tx(c);
        } else {
            // No session: nothing can be in flight (closing restarts the
            // device); take whatever the device says all the same.
            while let Ok(Some(_)) = self.txq.pop_used() {}
        }
        self.after_interrupt(table);
    }

    /// After an interrupt: the session's work goes on (and its streams
    /// are re-armed, as after its own signal).
    fn after_interrupt(&mut self, table: &mut SessionTable<Client>) {
        if client(table).is_some() {
            self.session_signal(table);
        }
    }

    /// Gives the device work and the client what arrived, publishes.
    fn run(&mut self, c: &mut Client) {
        self.issue_tx(c);
        self.refill_rx();
        self.deliver(c);
        if c.served.publish().is_err() {
            c.served.set_broken();
        }
    }

    /// Takes every transmit packet the client submitted: bad ones are
    /// acknowledged with their status at once, good ones wait to be sent.
    fn take_tx(&mut self, c: &mut Client) {
        loop {
            match c.served.tx.sink.get() {
                Ok(Some(taken)) => match nic::check(&taken.packet(), self.info.mtu) {
                    Ok(()) if self.dead => c.served.tx.ack(taken, nic::STATUS_IO),
                    Ok(()) => self.tx_pending.push_back(taken),
                    Err(status) => {
                        self.counts.refused += 1;
                        c.served.tx.ack(taken, status);
                    }
                },
                Ok(None) => return,
                Err(StreamError::Rejected(_)) => self.counts.dropped_descriptors += 1,
                Err(_) => {
                    c.served.set_broken();
                    return;
                }
            }
        }
    }

    /// Takes the client's acknowledgements of received frames: their
    /// buffers are free for the device again.
    fn take_rx_acks(&mut self, c: &mut Client) {
        loop {
            match c.served.rx.get_ack() {
                Ok(Some(p)) => {
                    let whole = self.pool_index(&p).and_then(|i| self.pool[i]);
                    match whole {
                        Some(whole) => self.rx_free.push(whole),
                        None => self.counts.bad_acks += 1,
                    }
                }
                Ok(None) => return,
                Err(StreamError::Rejected(_)) => self.counts.bad_acks += 1,
                Err(_) => {
                    c.served.set_broken();
                    return;
                }
            }
        }
    }

    /// The pool slot of receive buffer `p` (by its offset).
    fn pool_index(&self, p: &Packet) -> Option<usize> {
        let i = (p.offset() / nic::STREAM_BLOCK) as usize;
        (i < self.pool.len()).then_some(i)
    }

    /// Moves pending frames into the transmit queue while descriptors are
    /// free, in order; one doorbell for the batch; one interrupt asked for
    /// when the last frame in flight is sent.
    fn issue_tx(&mut self, c: &mut Client) {
        let Some((_, bus)) = self.session else {
            return;
        };
        let mut added = false;
        while self.txq.free() >= 2 && !self.dead {
            let Some(taken) = self.tx_pending.pop_front() else {
                break;
            };
            let packet = taken.packet();
            let chain = [
                Buffer {
                    addr: self.meta_bus + TX_HEADER_AT as u64,
                    len: NET_HDR,
                    device_writes: false,
                },
                Buffer {
                    addr: bus.tx + u64::from(packet.offset()),
                    len: packet.len(),
                    device_writes: false,
                },
            ];
            match self.txq.add(&chain) {
                Ok(token) => {
                    self.tx_posted[usize::from(token.0)] = Some(taken);
                    added = true;
                }
                Err(e) => {
                    c.served.tx.ack(taken, nic::STATUS_IO);
                    self.device_broke(Some(c), &e);
                    return;
                }
            }
        }
        if added {
            self.counts.most_tx_in_device = self.counts.most_tx_in_device.max(self.txq.in_flight());
            match self.dev.kick(&mut self.txq) {
                Ok(rang) => self.counts.tx_doorbells += u64::from(rang),
                Err(e) => println!("virtio-net: transmit doorbell: {e}"),
            }
            self.reap_tx(c);
        }
    }

    /// Acknowledges every sent frame; asks for an interrupt when the last
    /// one still in flight is sent (taking those that are done already).
    fn reap_tx(&mut self, c: &mut Client) {
        loop {
            match self.txq.pop_used() {
                Ok(Some(used)) => {
                    let taken = self
                        .tx_posted
                        .get_mut(usize::from(used.token.0))
                        .and_then(Option::take);
                    if let Some(taken) = taken {
                        self.counts.sent += 1;
                        c.served.tx.ack(taken, nic::STATUS_OK);
                    }
                }
                Ok(None) => {
                    let in_flight = self.txq.in_flight();
                    if in_flight == 0 {
                        let _ = self.txq.disable_interrupts();
                        return;
                    }
                    match self.txq.interrupt_after(in_flight) {
                        Ok(true) => continue,
                        _ => return,
                    }
                }
                Err(e) => {
                    self.device_broke(Some(c), &e);
                    return;
                }
            }
        }
    }

    /// Gives free receive buffers to the device while its queue has room;
    /// one doorbell for the batch.
    fn refill_rx(&mut self) {
        let Some((_, bus)) = self.session else {
            return;
        };
        let mut added = false;
        while self.rxq.free() >= 2 && !self.dead {
            let Some(p) = self.rx_free.pop() else {
                break;
            };
            let slot = self.pool_index(&p).unwrap_or(0);
            let chain = [
                Buffer {
                    addr: self.meta_bus + (slot * RX_HEADER_SLOT) as u64,
                    len: NET_HDR,
                    device_writes: true,
                },
                Buffer {
                    addr: bus.rx + u64::from(p.offset()),
                    len: p.len(),
                    device_writes: true,
                },
            ];
            match self.rxq.add(&chain) {
                Ok(token) => {
                    self.rx_posted[usize::from(token.0)] = Some(p);
                    added = true;
                }
                Err(e) => {
                    self.rx_free.push(p);
                    println!("virtio-net: receive queue refused a buffer: {e:?}");
                    break;
                }
            }
        }
        if added {
            if let Err(e) = self.dev.kick(&mut self.rxq) {
                println!("virtio-net: receive doorbell: {e}");
            }
        }
    }

    /// Submits the received frames to the client, as far as its ring
    /// takes them.
    fn deliver(&mut self, c: &mut Client) {
        while let Some(mut p) = self.rx_full.pop_front() {
            p.op = nic::OP_RECEIVED;
            match c.served.rx.submit(p) {
                Ok(()) => self.counts.received += 1,
                Err(StreamError::RingFull) => {
                    self.rx_full.push_front(p);
                    return;
                }
                Err(_) => {
                    self.rx_full.push_front(p);
                    c.served.set_broken();
                    return;
                }
            }
        }
    }

    /// A queue broke (`e`): the device is restarted — every frame in flight
    /// lost, transmit ones acknowledged with `STATUS_IO`, receive buffers
    /// free again — or, after [`MAX_RESTARTS`], given up.
    fn device_broke(&mut self, mut c: Option<&mut Client>, e: &dyn fmt::Debug) {
        self.counts.device_errors += 1;
        for taken in self.tx_posted.iter_mut().filter_map(Option::take) {
            if let Some(c) = c.as_deref_mut() {
                c.served.tx.ack(taken, nic::STATUS_IO);
            }
        }
        let back = self.rx_posted.iter_mut().filter_map(Option::take);
        self.rx_free.extend(back);
        self.restarts += 1;
        if self.restarts > MAX_RESTARTS {
            println!("virtio-net: the device broke its queues again ({e:?}): given up");
            self.give_up(c);
            return;
        }
        println!("virtio-net: the device broke a queue ({e:?}): restarted");
        if let Err(e) = self.dev.restart(&mut [&mut self.rxq, &mut self.txq]) {
            println!("virtio-net: restart failed ({e}): given up");
            self.give_up(c);
        }
    }

    /// Stops using the device: it is reset, and every frame waiting to be
    /// sent fails.
    fn give_up(&mut self, c: Option<&mut Client>) {
        self.dead = true;
        self.dev.reset();
        if let Some(c) = c {
            for taken in self.tx_pending.drain(..) {
                c.served.tx.ack(taken, nic::STATUS_IO);
            }
        }
    }

    /// Logs, once, that the client broke its session.
    fn report_broken(&self, c: &mut Client) {
        if c.served.broken() && !c.logged {
            c.logged = true;
            println!(
                "virtio-net: session {}: a stream broke (impossible ring index): the session is not served any more",
                c.id
            );
        }
    }

    /// A session opens on `served`'s buffers at bus addresses `bus`: the
    /// receive pool allocated in its receive stream, and given to the
    /// device.
    fn begin(&mut self, id: u64, bus: Bus, served: &mut NicServed<SessionTable<Client>>) {
        self.counts = Counts::default();
        let blocks = served.rx.layout().blocks();
        self.pool = (0..blocks).map(|_| None).collect();
        for _ in 0..nic::RX_POOL {
            match served.rx.alloc(nic::STREAM_BLOCK) {
                Ok(p) => {
                    if let Some(i) = self.pool_index(&p) {
                        self.pool[i] = Some(p);
                        self.rx_free.push(p);
                    }
                }
                Err(_) => break,
            }
        }
        self.session = Some((id, bus));
        self.refill_rx();
    }

    /// The session ends: the device gives every buffer back (it is reset
    /// and set up again), and the session's state goes.
    fn end(&mut self, id: u64) {
        if self.session.map(|(s, _)| s) != Some(id) {
            return;
        }
        let c = self.counts;
        println!(
            "virtio-net: session {id} closed: {} frames sent, {} received, {} refused, {} descriptors outside the buffer dropped, {} bad acknowledgements, {} device errors",
            c.sent, c.received, c.refused, c.dropped_descriptors, c.bad_acks, c.device_errors
        );
        println!(
            "virtio-net: session {id}: {} transmit doorbells, up to {} frames in the device at once, {} transmit and {} receive interrupts",
            c.tx_doorbells, c.most_tx_in_device, c.tx_interrupts, c.rx_interrupts
        );
        if !self.dead {
            if let Err(e) = self.dev.restart(&mut [&mut self.rxq, &mut self.txq]) {
                println!("virtio-net: restart after the session failed ({e}): given up");
                self.dead = true;
                self.dev.reset();
            }
        }
        self.session = None;
        self.pool.clear();
        self.rx_free.clear();
        self.rx_full.clear();
        self.tx_pending.clear();
        self.rx_posted.iter_mut().for_each(|p| *p = None);
        self.tx_posted.iter_mut().for_each(|p| *p = None);
    }
}

/// The open session, if there is one.
fn client(table: &mut SessionTable<Client>) -> Option<&mut Client> {
    table.iter_mut().map(|(_, c)| c).next()
}

/// The Nic session: its streams and the driver.
pub struct Client {
    id: u64,
    served: NicServed<SessionTable<Client>>,
    driver: Rc<RefCell<Driver>>,
    /// Whether its broken stream was logged.
    logged: bool,
}

impl Client {
    /// The session on `donated`: its streams made and mapped, its signals
    /// handled by [`Driver::session_signal`], its receive buffers given to
    /// the device.
    pub fn open(
        driver: &Rc<RefCell<Driver>>,
        signals: &SharedSignals,
        donated: Donated,
    ) -> Result<Client, &'static str> {
        let on_signal = driver.clone();
        // SAFETY: the window is the one session's alone (one at a time:
        // the provider has slots for one).
        let mut served = unsafe {
            NicServed::open(donated, signals, STREAM_VA, move |table| {
                on_signal.borrow_mut().session_signal(table)
            })
        }?;
        let mut d = driver.borrow_mut();
        let phys = rt::syscall::phys_address(d.translate, served.frame())
            .map_err(|_| "the stream frame's bus address is unknown")?
            .phys;
        let bus = Bus {
            tx: phys + served.tx_buffer() as u64,
            rx: phys + served.rx_buffer() as u64,
        };
        let id = d.next_id;
        d.next_id += 1;
        d.begin(id, bus, &mut served);
        drop(d);
        Ok(Client {
            id,
            served,
            driver: driver.clone(),
            logged: false,
        })
    }

    /// The session's id (in the log).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The reply to a `STREAM` request.
    pub fn stream_reply(&self, which: u64) -> (rt::abi::MsgInfo, rt::syscall::Words) {
        self.served.stream_reply(which)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.driver.borrow_mut().end(self.id);
    }
}
