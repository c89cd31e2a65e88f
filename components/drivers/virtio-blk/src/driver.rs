//! The request path of the virtio-blk driver.
//!
//! 1. A client's signal runs [`Driver::submitted`]: every packet on its
//!    submit ring is taken and checked ([`check`]); a bad one is
//!    acknowledged at once with its status, a good one joins the
//!    driver's FIFO of pending requests.
//! 2. [`Driver::issue`] moves pending requests into the virtqueue while
//!    it has descriptors, a header slot and bounce pages for them — a
//!    write's payload copied into its bounce pages — and rings the
//!    doorbell once for the whole batch (if the device asked to be told:
//!    event index).
//! 3. The interrupt runs [`Driver::interrupt`]: every used chain is
//!    completed — a read's data copied from the bounce pages into the
//!    client's packet — and acknowledged with its status; freed
//!    resources let more pending requests in (step 2); then every
//!    session's acknowledgements are published with one signal each at
//!    most.
//!
//! The FIFO keeps a large request from being overtaken forever by small
//! ones. A client that stops taking its acknowledgements (its ack ring
//! full) only holds up its own: they wait in its backlog, retried at its
//! next signal and at every interrupt.
//!
//! Invariants: `inflight[t]` is `Some` exactly for the chains in the
//! queue with head descriptor `t`; a bounce page or header slot is marked
//! used exactly while a request in flight holds it.

use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::fmt;

use rt::abi::CapSlot;
use rt::mmio::Region;
use rt::println;
use rt::session::block::{self, BlockInfo, Served, STREAM_BYTES};
use rt::session::platform::Platform;
use rt::session::{Donated, Session, SessionTable};
use rt::stream::{self, Taken};
use rt::virtio::{dma_region as dma, Buffer, QueueIrq, VirtQueue, VirtioDevice, VirtioError};

use crate::SharedSignals;

/// virtio-blk feature bits (virtio 1.2, 5.2.3).
const F_RO: u32 = 5;
const F_BLK_SIZE: u32 = 6;
const F_FLUSH: u32 = 9;
/// Request types (5.2.6).
const T_IN: u32 = 0;
const T_OUT: u32 = 1;
const T_FLUSH: u32 = 4;
/// The device's sector: 512 bytes, whatever its block size.
const SECTOR: u64 = 512;

/// Queue entries asked for (QEMU offers 256).
const QUEUE: u16 = 256;
/// Bytes of the bounce area (DMA memory: the Platform session's quota is
/// 1 MiB, of which the rings and headers take a few pages).
pub const BOUNCE_BYTES: usize = 512 * 1024;
const PAGE: usize = 4096;
const BOUNCE_PAGES: usize = BOUNCE_BYTES / PAGE;
/// The most bytes one request moves: a quarter of the bounce area, so
/// several large requests are in flight at once.
pub const MAX_REQUEST: u32 = 128 * 1024;
/// Header slots (16-byte headers, then 1-byte statuses, in one page).
const SLOTS: usize = 128;
const STATUS_AT: usize = 16 * SLOTS;

/// How long a closing session's requests are waited for (yields).
const DRAIN_SPINS: u32 = 1_000_000;

/// Where session `i`'s stream frame is mapped.
const STREAM_VA: u64 = 0x40_0000_0000;

/// A request in the virtqueue.
struct Request {
    client: u64,
    taken: Taken,
    slot: usize,
    /// Its bounce pages (`pages` 0: a flush, or the data in place).
    page: usize,
    pages: usize,
    read: bool,
    /// Whether its data went through the bounce area.
    bounced: bool,
}

/// The driver: the device, its queue, DMA memory and the requests.
pub struct Driver {
    dev: VirtioDevice<'static>,
    q: VirtQueue,
    meta: Region,
    meta_bus: u64,
    bounce: Region,
    bounce_bus: u64,
    /// Bounce pages in use.
    pages: [bool; BOUNCE_PAGES],
    free_slots: Vec<usize>,
    inflight: Vec<Option<Request>>,
    pending: VecDeque<(u64, Taken)>,
    geometry: BlockInfo,
    /// Session ids are never reused (a late completion for a closed
    /// session finds nobody).
    next_id: u64,
    /// Which stream windows are in use.
    windows: [bool; crate::MAX_SESSIONS as usize],
    broken: bool,
    /// The platform's bus-address translation, if it gave one: then
    /// the device reads and writes the clients' streams in place.
    translate: Option<CapSlot>,
    /// Chains completed while a closing session was drained, for the
    /// next handler run (which has the sessions).
    deferred: Vec<u16>,
}

impl Driver {
    /// Resets and sets up device 0 of `platform`: features, queue 0 with
    /// its MSI-X interrupt on `cpu` signalling `irq_cap`, DMA memory;
    /// prints what it found.
    pub fn start(
        platform: &'static Session<Platform>,
        irq_cap: CapSlot,
        cpu: u32,
    ) -> Result<Driver, VirtioError> {
        let info = platform.device(0)?;
        let wanted = 1 << F_RO | 1 << F_BLK_SIZE | 1 << F_FLUSH;
        let mut dev = VirtioDevice::open(platform, 0, wanted)?;
        let capacity = dev.config_read64(0)?;
        let block_size = match dev.has_feature(F_BLK_SIZE) {
            true => dev.config_read32(20)?,
            false => SECTOR as u32,
        };
        if !(512..=65536).contains(&block_size) || !block_size.is_power_of_two() {
            return Err(VirtioError::Device(
                "block size not a power of two of 512 to 64 KiB",
            ));
        }
        let per_block = u64::from(block_size) / SECTOR;
        let geometry = BlockInfo {
            block_size,
            block_count: capacity / per_block,
            writable: !dev.has_feature(F_RO),
            sync: dev.has_feature(F_FLUSH),
            max_bytes: MAX_REQUEST,
        };
        let irq = QueueIrq {
            entry: 0,
            cpu,
            notification: irq_cap,
        };
        let q = dev.queue(0, QUEUE, Some(irq))?;
        let translate = match platform.translate() {
            Ok(t) => Some(t),
            Err(e) => {
                println!("virtio-blk: no bus-address translation ({e}): data goes through the bounce area");
                None
            }
        };
        let (meta, meta_bus) = dma(platform, PAGE)?;
        let (bounce, bounce_bus) = dma(platform, BOUNCE_BYTES)?;
        dev.driver_ok()?;
        println!(
            "virtio-blk: {:02x}:{:02x}.{} {} blocks of {} bytes ({} MiB), {}, {}, queue {} entries, MSI-X on CPU {cpu}, {}",
            info.bdf >> 8,
            (info.bdf >> 3) & 0x1f,
            info.bdf & 7,
            geometry.block_count,
            block_size,
            (geometry.block_count * u64::from(block_size)) >> 20,
            if geometry.writable { "writable" } else { "read-only" },
            if geometry.sync { "flush" } else { "write-through" },
            q.size(),
            if translate.is_some() { "zero-copy" } else { "bounce copies" },
        );
        let size = usize::from(q.size());
        Ok(Driver {
            dev,
            q,
            meta,
            meta_bus,
            bounce,
            bounce_bus,
            pages: [false; BOUNCE_PAGES],
            free_slots: (0..SLOTS).rev().collect(),
            inflight: (0..size).map(|_| None).collect(),
            pending: VecDeque::new(),
            geometry,
            next_id: 1,
            windows: [false; crate::MAX_SESSIONS as usize],
            broken: false,
            translate,
            deferred: Vec::new(),
        })
    }

    /// The device, as `INFO` describes it.
    pub fn info(&self) -> BlockInfo {
        self.geometry
    }

    /// Client `id`'s stream has packets: take and check them all, start
    /// what fits, publish; until its stream is armed again (the client
    /// signals its next batch).
    pub fn submitted(&mut self, table: &mut SessionTable<Client>, id: u64) {
        loop {
            self.take(table, id);
            self.issue(table);
            publish(table);
            if !find(table, id).is_some_and(|c| c.served.arm()) {
                return;
            }
        }
    }

    /// Takes client `id`'s submitted packets: each checked, then pending
    /// or acknowledged at once with its refusal.
    fn take(&mut self, table: &mut SessionTable<Client>, id: u64) {
        let Some(client) = find(table, id) else {
            return;
        };
        loop {
            match client.served.sink.get() {
                Ok(Some(taken)) => match block::check(&taken.packet(), &self.geometry) {
                    Ok(()) => self.pending.push_back((id, taken)),
                    Err(status) => client.served.ack(taken, status),
                },
                Ok(None) => return,
                // A descriptor outside the buffer was dropped by the
                // stream; the next one may be good.
                Err(stream::Error::Rejected(p)) => {
                    println!("virtio-blk: session {id}: bad descriptor {p:?} dropped");
                }
                Err(e) => {
                    if !client.logged {
                        println!("virtio-blk: session {id}: stream broken: {e}");
                    }
                    client.logged = true;
                    client.served.set_broken();
                    return;
                }
            }
        }
    }

    /// The queue's interrupt: complete what the device finished, start
    /// what now fits, publish.
    pub fn interrupt(&mut self, table: &mut SessionTable<Client>) {
        let _ = self.q.ack_interrupt();
        for token in core::mem::take(&mut self.deferred) {
            self.complete(token, table);
        }
        loop {
            loop {
                match self.q.pop_used() {
                    Ok(Some(used)) => self.complete(used.token.0, table),
                    Ok(None) => break,
                    Err(e) => {
                        self.fail_all(table, &e);
                        break;
                    }
                }
            }
            // Re-armed; chains that finished meanwhile are taken now
            // (no interrupt may come for them).
            match self.q.enable_interrupts() {
                Ok(true) if !self.broken => continue,
                _ => break,
            }
        }
        self.issue(table);
        publish(table);
        // Sessions whose acknowledgements waited for ring space, or whose
        // packets came meanwhile, are looked at again (and re-armed).
        let ids: Vec<u64> = table.iter_mut().map(|(_, c)| c.id).collect();
        for id in ids {
            self.submitted(table, id);
        }
    }

    /// The device broke the queue (`e`): every request in flight fails.
    fn fail_all(&mut self, table: &mut SessionTable<Client>, e: &dyn fmt::Debug) {
        if !self.broken {
            println!("virtio-blk: the device broke its queue ({e:?}): requests fail from now on");
        }
        self.broken = true;
        for i in 0..self.inflight.len() {
            if let Some(r) = self.inflight[i].take() {
                self.release(&r);
                if let Some(c) = find(table, r.client) {
                    c.served.ack(r.taken, block::STATUS_IO);
                }
            }
        }
    }

    /// Chain `token` is done: its request acknowledged with its status.
    fn complete(&mut self, token: u16, table: &mut SessionTable<Client>) {
        let Some(r) = self
            .inflight
            .get_mut(usize::from(token))
            .and_then(Option::take)
        else {
            // A used entry for no request of ours: the queue's own checks
            // make that a broken queue; nothing to complete here.
            return;
        };
        let device_status = self.meta.read8(STATUS_AT + r.slot).unwrap_or(0xff);
        self.release(&r);
        let Request {
            client,
            taken,
            page,
            read,
            bounced: r_bounced,
            ..
        } = r;
        let mut status = match device_status {
            0 => block::STATUS_OK,
            _ => block::STATUS_IO,
        };
        let Some(c) = find(table, client) else {
            return;
        };
        if read && r_bounced && status == block::STATUS_OK {
            let copied = c
                .served
                .sink
                .payload_mut(&taken)
                .ok()
                .and_then(|out| self.bounce.copy_to(page * PAGE, out));
            if copied.is_none() {
                status = block::STATUS_IO;
            }
        }
        c.served.ack(taken, status);
    }

    /// Frees `r`'s header slot and bounce pages.
    fn release(&mut self, r: &Request) {
        self.free(r.slot, r.page, r.pages);
    }

    /// Frees header slot `slot` and bounce pages `page..page + pages`.
    fn free(&mut self, slot: usize, page: usize, pages: usize) {
        self.free_slots.push(slot);
        for p in &mut self.pages[page..page + pages] {
            *p = false;
        }
    }

    /// `n` free adjacent bounce pages (first fit), marked used.
    fn alloc_pages(&mut self, n: usize) -> Option<usize> {
        let mut run = 0;
        for i in 0..BOUNCE_PAGES {
            run = if self.pages[i] { 0 } else { run + 1 };
            if run == n {
                let first = i + 1 - n;
                self.pages[first..=i].iter_mut().for_each(|p| *p = true);
                return Some(first);
            }
        }
        None
    }

    /// Moves pending requests into the queue while they fit, in order;
    /// one doorbell for all.
    fn issue(&mut self, table: &mut SessionTable<Client>) {
        let mut added = false;
        while let Some((client, taken)) = self.pending.front() {
            let (client, packet) = (*client, taken.packet());
            let flush = packet.op == block::OP_SYNC;
            let descriptors = if flush { 2 } else { 3 };
            if self.broken || usize::from(self.q.free()) < descriptors || self.free_slots.is_empty()
            {
                break;
            }
            // Where the data is on the bus: in place in the client's
            // stream when the driver can translate its frame (zero copy),
            // else in bounce pages (a write's payload copied in now).
            let in_place = find(table, client).and_then(|c| c.data_bus(&packet));
            let (bounced, page, pages) = match (flush, in_place) {
                (true, _) | (false, Some(_)) => (false, 0, 0),
                (false, None) => {
                    let pages = (packet.len() as usize).div_ceil(PAGE);
                    match self.alloc_pages(pages) {
                        Some(p) => (true, p, pages),
                        None => break,
                    }
                }
            };
            let Some((_, taken)) = self.pending.pop_front() else {
                break;
            };
            let Some(slot) = self.free_slots.pop() else {
                break;
            };
            let read = packet.op == block::OP_READ;
            let Some(c) = find(table, client) else {
                self.free(slot, page, pages);
                continue;
            };
            if bounced && packet.op == block::OP_WRITE {
                let copied = c
                    .served
                    .sink
                    .payload(&taken)
                    .ok()
                    .and_then(|data| self.bounce.copy_from(page * PAGE, data));
                if copied.is_none() {
                    self.free(slot, page, pages);
                    c.served.ack(taken, block::STATUS_IO);
                    continue;
                }
            }
            let kind = match packet.op {
                block::OP_READ => T_IN,
                block::OP_WRITE => T_OUT,
                _ => T_FLUSH,
            };
            let sector = match flush {
                true => 0,
                false => u64::from(packet.tag) * (u64::from(self.geometry.block_size) / SECTOR),
            };
            let header = 16 * slot;
            self.meta.write32(header, kind);
            self.meta.write32(header + 4, 0);
            self.meta.write64(header + 8, sector);
            self.meta.write8(STATUS_AT + slot, 0xff);
            let head = Buffer {
                addr: self.meta_bus + header as u64,
                len: 16,
                device_writes: false,
            };
            let status = Buffer {
                addr: self.meta_bus + (STATUS_AT + slot) as u64,
                len: 1,
                device_writes: true,
            };
            let data = Buffer {
                addr: in_place.unwrap_or(self.bounce_bus + (page * PAGE) as u64),
                len: packet.len(),
                device_writes: read,
            };
            let added_chain = match flush {
                true => self.q.add(&[head, status]),
                false => self.q.add(&[head, data, status]),
            };
            match added_chain {
                Ok(token) => {
                    let r = Request {
                        client,
                        taken,
                        slot,
                        page,
                        pages,
                        read,
                        bounced,
                    };
                    if let Some(entry) = self.inflight.get_mut(usize::from(token.0)) {
                        *entry = Some(r);
                    }
                    added = true;
                }
                Err(e) => {
                    println!("virtio-blk: queue refused a chain: {e:?}");
                    self.free(slot, page, pages);
                    c.served.ack(taken, block::STATUS_IO);
                    self.broken = true;
                }
            }
        }
        if added {
            if let Err(e) = self.dev.kick(&mut self.q) {
                println!("virtio-blk: doorbell: {e}");
            }
        }
    }

    /// Waits until the device is done with every request of session
    /// `id` — before the session's close is answered, its stream frame
    /// (the client's memory, which the device may be writing in place)
    /// stays: the client takes it back only after. Other sessions'
    /// completions met meanwhile wait in `deferred`. A device that never
    /// completes them is reset (it forgets its queues: the driver stops).
    fn drain(&mut self, id: u64) {
        let mine = |d: &Driver| d.inflight.iter().flatten().any(|r| r.client == id);
        let mut spins = 0u32;
        while mine(self) && !self.broken {
            match self.q.pop_used() {
                Ok(Some(used)) => {
                    let token = used.token.0;
                    match self
                        .inflight
                        .get(usize::from(token))
                        .and_then(Option::as_ref)
                    {
                        Some(r) if r.client == id => {
                            if let Some(r) = self.inflight[usize::from(token)].take() {
                                self.release(&r);
                            }
                        }
                        _ => self.deferred.push(token),
                    }
                }
                Ok(None) => {
                    spins += 1;
                    if spins > DRAIN_SPINS {
                        println!("virtio-blk: the device did not finish a closing session's requests: reset");
                        self.dev.reset();
                        self.broken = true;
                        return;
                    }
                    let _ = rt::syscall::yield_now();
                }
                Err(e) => {
                    println!("virtio-blk: the device broke its queue ({e:?}): reset");
                    self.dev.reset();
                    self.broken = true;
                    return;
                }
            }
        }
    }

    /// A fresh session id and a free stream window.
    fn new_session(&mut self) -> Option<(u64, usize)> {
        let window = self.windows.iter().position(|used| !used)?;
        self.windows[window] = true;
        let id = self.next_id;
        self.next_id += 1;
        Some((id, window))
    }

    /// Session `id` (window `window`) closed: its pending requests go
    /// (those in flight complete into nothing).
    fn end_session(&mut self, id: u64, window: usize) {
        self.pending.retain(|(client, _)| *client != id);
        self.drain(id);
        if let Some(w) = self.windows.get_mut(window) {
            *w = false;
        }
    }
}

/// The session of id `id`, if still open.
fn find(table: &mut SessionTable<Client>, id: u64) -> Option<&mut Client> {
    table.iter_mut().map(|(_, c)| c).find(|c| c.id == id)
}

/// Every session's staged acknowledgements published (its backlog first).
fn publish(table: &mut SessionTable<Client>) {
    for (_, c) in table.iter_mut() {
        if let Err(e) = c.served.publish() {
            if e.is_fatal() && !c.logged {
                println!("virtio-blk: session {}: stream broken: {e}", c.id);
                c.logged = true;
            }
        }
    }
}

/// One Block session: its stream (`block::Served`) and its window.
pub struct Client {
    id: u64,
    window: usize,
    served: Served<SessionTable<Client>>,
    /// The bus address of its stream's packet buffer, when the driver
    /// can translate (zero copy).
    bus: Option<u64>,
    driver: Rc<RefCell<Driver>>,
    /// Whether its broken stream was logged.
    logged: bool,
}

impl Client {
    /// A session on `donated`: its stream made and mapped in a window of
    /// its own, its signals handled by [`Driver::submitted`].
    pub fn open(
        driver: &Rc<RefCell<Driver>>,
        signals: &SharedSignals,
        donated: Donated,
    ) -> Result<Client, &'static str> {
        let (id, window) = driver
            .borrow_mut()
            .new_session()
            .ok_or("no session window left")?;
        let va = STREAM_VA + window as u64 * STREAM_BYTES as u64;
        let on_signal = driver.clone();
        // SAFETY: window `window` is this session's alone (`new_session`).
        let served = unsafe {
            Served::open(donated, signals, va, move |table| {
                on_signal.borrow_mut().submitted(table, id)
            })
        };
        let translate = driver.borrow().translate;
        match served {
            Ok(served) => Ok(Client {
                id,
                window,
                bus: translate
                    .and_then(|t| rt::syscall::phys_address(t, served.frame()).ok())
                    .map(|f| f.phys + served.buffer_offset() as u64),
                served,
                driver: driver.clone(),
                logged: false,
            }),
            Err(e) => {
                driver.borrow_mut().end_session(id, window);
                Err(e)
            }
        }
    }

    /// Where `packet`'s bytes are on the bus, for the device to use in
    /// place (`None`: no translation; they go through the bounce area).
    fn data_bus(&self, packet: &rt::stream::Packet) -> Option<u64> {
        self.bus.map(|b| b + u64::from(packet.offset()))
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
        self.driver.borrow_mut().end_session(self.id, self.window);
    }
}
