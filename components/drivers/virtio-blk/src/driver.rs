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

use rt::abi::caddr::own;
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{CapSlot, ObjectType, Rights};
use rt::interfaces::child;
use rt::mmio::Region;
use rt::println;
use rt::session::block::{self, stream_config, BlockInfo, STREAM_BYTES};
use rt::session::platform::Platform;
use rt::session::{Donated, Session, SessionTable};
use rt::signal::SignalContext;
use rt::stream::{self, Notifications, Sink, Taken};
use rt::syscall;
use rt::virtio::{Buffer, QueueIrq, VirtQueue, VirtioDevice, VirtioError};

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

/// Where session `i`'s stream frame is mapped.
const STREAM_VA: u64 = 0x40_0000_0000;

/// Why the driver could not start.
#[derive(Debug)]
pub enum StartError {
    Virtio(VirtioError),
    /// The device's configuration is impossible.
    Config(&'static str),
}

impl From<VirtioError> for StartError {
    fn from(e: VirtioError) -> Self {
        StartError::Virtio(e)
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Virtio(e) => write!(f, "{e}"),
            StartError::Config(what) => write!(f, "device configuration: {what}"),
        }
    }
}

/// A request in the virtqueue.
struct Request {
    client: u64,
    taken: Taken,
    slot: usize,
    /// Its bounce pages (`pages` 0: a flush).
    page: usize,
    pages: usize,
    read: bool,
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
}

/// The physically contiguous DMA memory of `bytes`, mapped write-back.
fn dma(platform: &Session<Platform>, bytes: usize) -> Result<(Region, u64), VirtioError> {
    let d = platform.dma(bytes as u64)?;
    let frames = (d.first..d.first + d.frames).filter_map(|i| platform.donated_slot(i));
    let mem = Region::map_new(frames, d.frames as usize, PAGE, Cache::WriteBack)
        .map_err(VirtioError::Map)?;
    Ok((mem, d.bus_address))
}

impl Driver {
    /// Resets and sets up device 0 of `platform`: features, queue 0 with
    /// its MSI-X interrupt on `cpu` signalling `irq_cap`, DMA memory;
    /// prints what it found.
    pub fn start(
        platform: &'static Session<Platform>,
        irq_cap: CapSlot,
        cpu: u32,
    ) -> Result<Driver, StartError> {
        let info = platform.device(0).map_err(VirtioError::from)?;
        let wanted = 1 << F_RO | 1 << F_BLK_SIZE | 1 << F_FLUSH;
        let mut dev = VirtioDevice::open(platform, 0, wanted)?;
        let capacity = dev.config_read64(0)?;
        let block_size = match dev.has_feature(F_BLK_SIZE) {
            true => dev.config_read32(20)?,
            false => SECTOR as u32,
        };
        if !(512..=65536).contains(&block_size) || !block_size.is_power_of_two() {
            return Err(StartError::Config(
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
        let (meta, meta_bus) = dma(platform, PAGE)?;
        let (bounce, bounce_bus) = dma(platform, BOUNCE_BYTES)?;
        dev.driver_ok()?;
        println!(
            "virtio-blk: {:02x}:{:02x}.{} {} blocks of {} bytes ({} MiB), {}, {}, queue {} entries, MSI-X on CPU {cpu}",
            info.bdf >> 8,
            (info.bdf >> 3) & 0x1f,
            info.bdf & 7,
            geometry.block_count,
            block_size,
            (geometry.block_count * u64::from(block_size)) >> 20,
            if geometry.writable { "writable" } else { "read-only" },
            if geometry.sync { "flush" } else { "write-through" },
            q.size(),
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
            let Some(client) = find(table, id) else {
                return;
            };
            let space = !client.backlog.is_empty();
            match client.sink.arm(space) {
                Ok(true) if !client.broken => {}
                _ => return,
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
            match client.sink.get() {
                Ok(Some(mut taken)) => match block::check(&taken.packet(), &self.geometry) {
                    Ok(()) => self.pending.push_back((id, taken)),
                    Err(status) => {
                        taken.set_op(status);
                        client.ack(taken);
                    }
                },
                Ok(None) => return,
                // A descriptor outside the buffer was dropped by the
                // stream; the next one may be good.
                Err(stream::Error::Rejected(p)) => {
                    println!("virtio-blk: session {id}: bad descriptor {p:?} dropped");
                }
                Err(e) => {
                    if !client.broken {
                        println!("virtio-blk: session {id}: stream broken: {e}");
                    }
                    client.broken = true;
                    return;
                }
            }
        }
    }

    /// The queue's interrupt: complete what the device finished, start
    /// what now fits, publish.
    pub fn interrupt(&mut self, table: &mut SessionTable<Client>) {
        let _ = self.q.ack_interrupt();
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
                let Request {
                    client, mut taken, ..
                } = r;
                taken.set_op(block::STATUS_IO);
                if let Some(c) = find(table, client) {
                    c.ack(taken);
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
            mut taken,
            page,
            read,
            ..
        } = r;
        let mut status = match device_status {
            0 => block::STATUS_OK,
            _ => block::STATUS_IO,
        };
        let Some(c) = find(table, client) else {
            return;
        };
        if read && status == block::STATUS_OK {
            let copied = c
                .sink
                .payload_mut(&taken)
                .ok()
                .and_then(|out| self.bounce.copy_to(page * PAGE, out));
            if copied.is_none() {
                status = block::STATUS_IO;
            }
        }
        taken.set_op(status);
        c.ack(taken);
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
            let pages = (packet.len() as usize).div_ceil(PAGE);
            let descriptors = if flush { 2 } else { 3 };
            if self.broken || usize::from(self.q.free()) < descriptors || self.free_slots.is_empty()
            {
                break;
            }
            let page = match flush {
                true => 0,
                false => match self.alloc_pages(pages) {
                    Some(p) => p,
                    None => break,
                },
            };
            let Some((_, mut taken)) = self.pending.pop_front() else {
                break;
            };
            let Some(slot) = self.free_slots.pop() else {
                break;
            };
            let pages = if flush { 0 } else { pages };
            let read = packet.op == block::OP_READ;
            let Some(c) = find(table, client) else {
                self.free(slot, page, pages);
                continue;
            };
            if packet.op == block::OP_WRITE {
                let copied = c
                    .sink
                    .payload(&taken)
                    .ok()
                    .and_then(|data| self.bounce.copy_from(page * PAGE, data));
                if copied.is_none() {
                    self.free(slot, page, pages);
                    taken.set_op(block::STATUS_IO);
                    c.ack(taken);
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
                addr: self.bounce_bus + (page * PAGE) as u64,
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
                    };
                    if let Some(entry) = self.inflight.get_mut(usize::from(token.0)) {
                        *entry = Some(r);
                    }
                    added = true;
                }
                Err(e) => {
                    println!("virtio-blk: queue refused a chain: {e:?}");
                    self.free(slot, page, pages);
                    taken.set_op(block::STATUS_IO);
                    c.ack(taken);
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
        c.retry_backlog();
        if let Err(e) = c.sink.flush() {
            if e.is_fatal() && !c.broken {
                println!("virtio-blk: session {}: stream broken: {e}", c.id);
                c.broken = true;
            }
        }
    }
}

/// One Block session: its stream and what the driver made for it.
pub struct Client {
    id: u64,
    window: usize,
    sink: Sink<Notifications>,
    /// Acknowledgements its full ring could not take yet.
    backlog: Vec<Taken>,
    donated: Donated,
    context: SignalContext,
    signals: SharedSignals,
    driver: Rc<RefCell<Driver>>,
    broken: bool,
}

/// Donated slots: the frame, the client's notification, its read-only
/// copy, the driver's notification's badged write copy.
const FRAME: u32 = 0;
const CLIENT_NOTIFY: u32 = 1;
const CLIENT_READ: u32 = 2;
const SERVER_WRITE: u32 = 3;

impl Client {
    /// A session on `donated`: the stream frame and the client's
    /// notification made from it, the frame mapped, the signal context
    /// registered.
    pub fn open(
        driver: &Rc<RefCell<Driver>>,
        signals: &SharedSignals,
        donated: Donated,
    ) -> Result<Client, &'static str> {
        let (id, window) = driver
            .borrow_mut()
            .new_session()
            .ok_or("no session window left")?;
        let made = Self::make(driver, signals, donated, id, window);
        if made.is_err() {
            driver.borrow_mut().end_session(id, window);
        }
        made
    }

    fn make(
        driver: &Rc<RefCell<Driver>>,
        signals: &SharedSignals,
        donated: Donated,
        id: u64,
        window: usize,
    ) -> Result<Client, &'static str> {
        let frame = donated.slot(FRAME);
        let notify = donated.slot(CLIENT_NOTIFY);
        syscall::retype(donated.untyped(), ObjectType::Frame2M, 0, frame, 1)
            .map_err(|_| "the donation holds no 2 MiB frame")?;
        syscall::retype(donated.untyped(), ObjectType::Notification, 0, notify, 1)
            .map_err(|_| "the donation holds no notification")?;
        syscall::cap_mint(notify, donated.slot(CLIENT_READ), Rights::READ, 0)
            .map_err(|_| "minting the client's notification failed")?;
        let va = STREAM_VA + window as u64 * STREAM_BYTES as u64;
        let rw = MapAttr {
            writable: true,
            executable: false,
            cache: Cache::WriteBack,
        };
        // SAFETY: window `window` is this session's alone (`new_session`),
        // and the frame is reached only through the stream's region.
        unsafe { syscall::map(own(child::OWN_VSPACE), frame, va, rw) }
            .map_err(|_| "mapping the stream frame failed")?;
        // SAFETY: just mapped, 2 MiB, used by nothing else.
        let region = unsafe { stream::Region::new(va as *mut u8, STREAM_BYTES) }
            .map_err(|_| "stream region")?;
        let notifications = Notifications {
            peer: notify,
            own: signals.borrow().notification(),
        };
        let mut sink =
            Sink::new(region, stream_config(), notifications).map_err(|_| "stream layout")?;
        // The client's first batch signals (a fresh stream has no packets:
        // `arm` cannot find one yet).
        sink.arm(false).map_err(|_| "stream broken at start")?;
        let on_signal = driver.clone();
        let context = signals
            .borrow_mut()
            .register(donated.slot(SERVER_WRITE), move |table| {
                on_signal.borrow_mut().submitted(table, id)
            })
            .map_err(|_| "no signal context left")?;
        Ok(Client {
            id,
            window,
            sink,
            backlog: Vec::new(),
            donated,
            context,
            signals: signals.clone(),
            driver: driver.clone(),
            broken: false,
        })
    }

    /// The session's id (in the log).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The capability `STREAM` request `which` hands out.
    pub fn stream_cap(&self, which: u64) -> Option<CapSlot> {
        match which {
            rt::shared::CAP_FRAME => Some(self.donated.slot(FRAME)),
            rt::shared::CAP_SERVER_NOTIFY => Some(self.donated.slot(SERVER_WRITE)),
            rt::shared::CAP_CLIENT_NOTIFY => Some(self.donated.slot(CLIENT_READ)),
            _ => None,
        }
    }

    /// Stages the acknowledgement of `taken`, or keeps it for later when
    /// the client's ring is full.
    fn ack(&mut self, taken: Taken) {
        if !self.backlog.is_empty() {
            self.backlog.push(taken);
            return;
        }
        if let Err(e) = self.sink.ack(taken) {
            self.backlog.push(e.packet);
        }
    }

    /// Tries the acknowledgements that waited for ring space, in order.
    fn retry_backlog(&mut self) {
        while !self.backlog.is_empty() {
            let taken = self.backlog.remove(0);
            if let Err(e) = self.sink.ack(taken) {
                self.backlog.insert(0, e.packet);
                let _ = self.sink.flush();
                return;
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.signals.borrow_mut().unregister(self.context);
        self.driver.borrow_mut().end_session(self.id, self.window);
        // SAFETY: the stream (its region) is not used again: the session
        // ends here. Its objects go when the client revokes its donation.
        let _ = unsafe { syscall::unmap(self.donated.slot(FRAME)) };
    }
}
