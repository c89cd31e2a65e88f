//! The virtio transport on modern virtio-pci (virtio 1.2, 4.1), over a
//! Platform session ([`crate::session::platform`]): a driver needs no
//! `unsafe` and no register offsets of its own.
//!
//! - [`VirtioDevice::open`] finds the common, notify, ISR and device
//!   register blocks through the session (`VIRTIO`), maps the pages of the
//!   BARs that hold them uncached ([`Region::map_new`]), resets the device
//!   and negotiates features (3.1.1): the driver names what it wants,
//!   `VERSION_1` is required, `RING_EVENT_IDX` is taken whenever the
//!   device offers it; transport features this code does not implement
//!   (packed or indirect rings, notification data, in-order) are never
//!   accepted, whatever the driver asks.
//! - [`VirtioDevice::queue`] sets up queue N with the largest power-of-two
//!   size the device offers up to the caller's cap, its rings in DMA
//!   memory from the session (`DMA`: the bus address comes from the
//!   platform service, never a guess), and, when asked, an MSI-X vector
//!   of its own (`IRQ`, on the CPU the caller names) bound to the
//!   caller's notification. The queue ([`VirtQueue`]) is a
//!   [`virtio::SplitQueue`] over that memory.
//! - [`VirtioDevice::driver_ok`] ends the set-up; [`VirtioDevice::kick`]
//!   publishes every chain added since the last kick and rings the
//!   queue's doorbell (at `queue_notify_off × notify_off_multiplier`)
//!   only if the device asked for it — one notification per batch at most;
//!   [`VirtQueue::wait_interrupt`] blocks on the notification (no
//!   spinning) and acknowledges the interrupt.
//! - [`VirtioDevice::restart`] resets the device and sets it up again
//!   over the same queue memory and interrupts: the way to take every
//!   buffer back from a device at once (a closing client's receive
//!   buffers), or to recover from a device that broke a queue.
//! - Device-specific configuration: [`VirtioDevice::config_read32`] and
//!   friends (64-bit reads retried on a configuration generation change),
//!   [`VirtioDevice::config_write8`] for selector bytes.
//!
//! - [`driver_base`]: what a driver serving sessions sets up first (its
//!   Platform session, a notification bound to its thread, badged
//!   capabilities for its interrupts); [`dma_region`]: DMA memory of its
//!   own, mapped, with its bus address.
//!
//! The buffers a driver chains into a queue are its own DMA memory
//! (`Session::<Platform>::dma`: their bus addresses are the session's) or
//! a client's stream frame (its bus address from the platform's
//! `TRANSLATE`), and the device reads and writes them in place — no
//! bounce copy.
//!
//! Not yet: legacy (0.9) devices, INTx and the ISR-driven interrupt path
//! for devices without MSI-X, queue reset, blocks in a page that also
//! holds the MSI-X table (the platform service withholds that page, so
//! mapping fails with an error).

use core::fmt;
use core::ops::{Deref, DerefMut};

use abi::map::Cache;
use abi::{CapSlot, Error};
use pci::virtio::{cfg_type, common, feature, status, NO_VECTOR};
use virtio::{Layout, QueueError, QueueMemory, SplitQueue};

use crate::mmio::Region;
use crate::session::platform::{Platform, PlatformError, IRQ_MSIX};
use crate::session::Session;
use crate::syscall;

pub use virtio::{Buffer, Token, Used};

impl QueueMemory for Region {
    fn read16(&self, offset: usize) -> Option<u16> {
        Region::read16(self, offset)
    }
    fn read32(&self, offset: usize) -> Option<u32> {
        Region::read32(self, offset)
    }
    fn read64(&self, offset: usize) -> Option<u64> {
        Region::read64(self, offset)
    }
    fn write16(&self, offset: usize, value: u16) -> Option<()> {
        Region::write16(self, offset, value)
    }
    fn write32(&self, offset: usize, value: u32) -> Option<()> {
        Region::write32(self, offset, value)
    }
    fn write64(&self, offset: usize, value: u64) -> Option<()> {
        Region::write64(self, offset, value)
    }
    fn len(&self) -> usize {
        Region::len(self)
    }
}

/// `bytes` of physically contiguous DMA memory from `platform`, mapped
/// write-back (x86 DMA snoops the caches), and its bus address: for a
/// driver's own buffers next to its queues (request headers, bounce
/// pages).
pub fn dma_region(
    platform: &Session<Platform>,
    bytes: usize,
) -> Result<(Region, u64), VirtioError> {
    let d = platform.dma(bytes as u64)?;
    let frames = (d.first..d.first + d.frames).filter_map(|i| platform.donated_slot(i));
    let mem = Region::map_new(frames, d.frames as usize, 4096, Cache::WriteBack)
        .map_err(VirtioError::Map)?;
    Ok((mem, d.bus_address))
}

/// What a driver that serves its device as sessions sets up first
/// (virtio-blk, virtio-net): its Platform session, donated from its own
/// quota and kept for the driver's life; a notification bound to its
/// thread, so that one `Recv` returns session calls, clients' signals and
/// interrupts alike (Genode's entrypoint); and a write capability on it
/// badged with bit `bits[i]` for each interrupt `i`.
pub struct DriverBase<const N: usize> {
    /// The Platform session.
    pub platform: &'static Session<Platform>,
    /// The thread's notification.
    pub notify: CapSlot,
    /// The interrupts' badged capabilities (for [`QueueIrq::notification`]).
    pub irq_caps: [CapSlot; N],
}

/// Sets up a [`DriverBase`] in own slots `first..first + 4 + N` (the
/// session, its donation's block and table, the notification, the
/// interrupts' capabilities); the error says which step failed.
pub fn driver_base<const N: usize>(
    first: u32,
    bits: [u32; N],
) -> Result<DriverBase<N>, alloc::string::String> {
    use abi::caddr::own;
    use abi::{ObjectType, Rights};
    use interfaces::child;
    let platform = crate::session::open_from_quota::<Platform>(first, first + 1, first + 2)
        .map_err(|e| alloc::format!("Platform session: {e}"))?;
    // The devices borrow the session for as long as the driver runs.
    let platform: &'static Session<Platform> =
        alloc::boxed::Box::leak(alloc::boxed::Box::new(platform));
    let notify = own(first + 3);
    let irq_caps: [CapSlot; N] = core::array::from_fn(|i| own(first + 4 + i as u32));
    syscall::retype(own(child::UNTYPED), ObjectType::Notification, 0, notify, 1)
        .and_then(|()| syscall::bind_notification(own(child::OWN_THREAD), notify))
        .map_err(|e| alloc::format!("notification: {e}"))?;
    for (cap, bit) in irq_caps.iter().zip(bits) {
        syscall::cap_mint(notify, *cap, Rights::WRITE, 1 << bit)
            .map_err(|e| alloc::format!("interrupt capability: {e}"))?;
    }
    Ok(DriverBase {
        platform,
        notify,
        irq_caps,
    })
}

/// Transport features this code does not implement: never accepted.
const UNSUPPORTED: u64 = 1 << feature::RING_INDIRECT_DESC
    | 1 << feature::RING_PACKED
    | 1 << feature::IN_ORDER
    | 1 << feature::NOTIFICATION_DATA
    | 1 << feature::NOTIF_CONFIG_DATA
    | 1 << feature::RING_RESET
    | 1 << feature::SR_IOV;

/// How often a reset is polled (with a yield between) before giving up.
const RESET_POLLS: u32 = 1000;
/// How often a 64-bit configuration read is retried on a generation change.
const CONFIG_RETRIES: u32 = 16;

/// Why the transport failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VirtioError {
    /// The Platform session refused or broke.
    Platform(PlatformError),
    /// Mapping registers or DMA memory failed.
    Map(Error),
    /// A register outside its block or mapping.
    Register {
        /// The block's virtio `cfg_type` (0: a BAR that cannot be mapped).
        cfg_type: u8,
        /// The register's offset in it.
        offset: u32,
    },
    /// The device did not reset (status not 0).
    NoReset,
    /// The device does not offer `VERSION_1`: not a modern device.
    NoVersion1,
    /// The device refused the features (`FEATURES_OK` did not stick).
    FeaturesRefused,
    /// The device has no queue of that index (size 0), or the cap is 0.
    NoQueue(u16),
    /// The queue was set up already.
    QueueEnabled(u16),
    /// The device did not take MSI-X entry `entry` for the queue, or the
    /// function has no MSI-X.
    Vector(u16),
    /// Binding the interrupt to the notification, or waiting, failed.
    Irq(Error),
    /// The queue's doorbell lies outside the notify block.
    Doorbell(u16),
    /// The device configuration kept changing under a 64-bit read.
    ConfigUnstable,
    /// The split queue refused (layout, or a device that broke it).
    Queue(QueueError),
    /// The device (or the platform) lacks what the driver needs, or its
    /// configuration is impossible: the driver says what.
    Device(&'static str),
}

impl fmt::Display for VirtioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            VirtioError::Platform(e) => write!(f, "platform: {e}"),
            VirtioError::Map(e) => write!(f, "mapping failed: {e}"),
            VirtioError::Register { cfg_type, offset } => {
                write!(f, "register {offset:#x} outside virtio block {cfg_type}")
            }
            VirtioError::NoReset => f.write_str("the device does not reset"),
            VirtioError::NoVersion1 => f.write_str("the device does not offer VERSION_1"),
            VirtioError::FeaturesRefused => f.write_str("the device refused the features"),
            VirtioError::NoQueue(q) => write!(f, "no queue {q}"),
            VirtioError::QueueEnabled(q) => write!(f, "queue {q} is set up already"),
            VirtioError::Vector(e) => write!(f, "MSI-X entry {e} not taken"),
            VirtioError::Irq(e) => write!(f, "interrupt: {e}"),
            VirtioError::Doorbell(q) => {
                write!(f, "queue {q}'s doorbell is outside the notify block")
            }
            VirtioError::ConfigUnstable => f.write_str("the device configuration keeps changing"),
            VirtioError::Queue(e) => write!(f, "queue: {e}"),
            VirtioError::Device(what) => write!(f, "device: {what}"),
        }
    }
}

impl From<PlatformError> for VirtioError {
    fn from(e: PlatformError) -> Self {
        VirtioError::Platform(e)
    }
}

impl From<QueueError> for VirtioError {
    fn from(e: QueueError) -> Self {
        VirtioError::Queue(e)
    }
}

/// A register block in a mapped BAR window.
#[derive(Clone, Copy, Debug)]
struct Block {
    cfg_type: u8,
    /// Index into [`VirtioDevice::bars`].
    bar: usize,
    /// Its offset in that window.
    start: usize,
    len: usize,
}

/// Where a queue's interrupt goes: MSI-X table entry `entry` (also the
/// value written to the queue's `queue_msix_vector`), delivered to CPU
/// `cpu`, signalling `notification` (the caller's).
#[derive(Clone, Copy, Debug)]
pub struct QueueIrq {
    /// MSI-X table entry.
    pub entry: u16,
    /// CPU the interrupt is delivered to.
    pub cpu: u32,
    /// The notification the IRQ handler is bound to.
    pub notification: CapSlot,
}

/// A modern virtio device of a Platform session, features negotiated.
pub struct VirtioDevice<'s> {
    platform: &'s Session<Platform>,
    index: u32,
    /// The mapped pages of the BARs holding the blocks (up to one window
    /// per BAR).
    bars: [Option<Region>; 6],
    common: Block,
    notify: Block,
    notify_off_multiplier: u32,
    isr: Block,
    device: Option<Block>,
    features: u64,
    /// What the driver asked for at [`VirtioDevice::open`] (for a restart).
    wanted: u64,
}

/// An interrupt waited for with [`VirtQueue::wait_interrupt_timed`].
#[derive(Clone, Copy, Debug)]
pub struct TimedInterrupt {
    /// Where and when the kernel took it.
    pub arrival: syscall::IrqArrival,
    /// The TSC right after the thread's `Wait` returned.
    pub woke: u64,
    /// Ticks from `woke` to after the `IrqAck` (the timing stub's own
    /// cost included; subtract `bench::timestamp_overhead`).
    pub ack_ticks: u64,
}

/// A virtqueue of a [`VirtioDevice`]: a [`SplitQueue`] in DMA memory (use
/// it through `Deref`: `add`, `pop_used`, `interrupt_after`, ...), its
/// doorbell and its interrupt.
pub struct VirtQueue {
    ring: SplitQueue<Region>,
    index: u16,
    /// Offset of the doorbell in the notify block.
    doorbell: u32,
    max_size: u16,
    irq: Option<(CapSlot, CapSlot)>,
    /// What `queue_msix_vector` holds: the MSI-X entry, or `NO_VECTOR`.
    vector: u16,
}

impl Deref for VirtQueue {
    type Target = SplitQueue<Region>;
    fn deref(&self) -> &SplitQueue<Region> {
        &self.ring
    }
}

impl DerefMut for VirtQueue {
    fn deref_mut(&mut self) -> &mut SplitQueue<Region> {
        &mut self.ring
    }
}

impl VirtQueue {
    /// Its index.
    pub fn index(&self) -> u16 {
        self.index
    }
    /// The largest size the device offered.
    pub fn max_size(&self) -> u16 {
        self.max_size
    }
    /// Blocks until the queue's interrupt signals its notification, then
    /// acknowledges it: the CPU it arrived at. No interrupt was asked for
    /// ([`VirtioDevice::queue`] without [`QueueIrq`]): an error.
    pub fn wait_interrupt(&self) -> Result<u32, VirtioError> {
        let (handler, notification) = self.irq.ok_or(VirtioError::Irq(Error::InvalidArgument))?;
        syscall::wait(notification).map_err(VirtioError::Irq)?;
        syscall::irq_ack_cpu(handler).map_err(VirtioError::Irq)
    }

    /// [`Self::wait_interrupt`], timed: where and when the kernel took the
    /// interrupt (`IrqAck`'s answer), the TSC when this thread ran again
    /// after its `Wait`, and the ticks the `IrqAck` took (the lab's
    /// `irq-latency` and `irq-ack`).
    pub fn wait_interrupt_timed(&self) -> Result<TimedInterrupt, VirtioError> {
        let (handler, notification) = self.irq.ok_or(VirtioError::Irq(Error::InvalidArgument))?;
        syscall::wait(notification).map_err(VirtioError::Irq)?;
        let woke = syscall::rdtsc();
        let arrival = syscall::irq_ack_info(handler).map_err(VirtioError::Irq)?;
        let acked = syscall::rdtsc();
        Ok(TimedInterrupt {
            arrival,
            woke,
            ack_ticks: acked.wrapping_sub(woke),
        })
    }

    /// Acknowledges the queue's interrupt (`IrqAck`: the next one may
    /// come), for a driver whose notification is bound to its thread and
    /// that learnt of the interrupt from its own `Recv` (a server's
    /// signal handler), not from [`Self::wait_interrupt`].
    pub fn ack_interrupt(&self) -> Result<(), VirtioError> {
        let (handler, _) = self.irq.ok_or(VirtioError::Irq(Error::InvalidArgument))?;
        syscall::irq_ack(handler).map_err(VirtioError::Irq)
    }

    /// Whether the queue's interrupt signalled its notification since the
    /// last wait, without blocking (acknowledged if so). Interrupts that
    /// arrive before the driver looks coalesce in the notification word:
    /// this says "at least one".
    pub fn poll_interrupt(&self) -> Result<bool, VirtioError> {
        let (handler, notification) = self.irq.ok_or(VirtioError::Irq(Error::InvalidArgument))?;
        let word = syscall::poll(notification).map_err(VirtioError::Irq)?;
        if word != 0 {
            syscall::irq_ack_cpu(handler).map_err(VirtioError::Irq)?;
        }
        Ok(word != 0)
    }
}

impl<'s> VirtioDevice<'s> {
    /// Device `index` of `platform`: blocks found and mapped, the device
    /// reset, features negotiated (`wanted`, plus `VERSION_1` and
    /// `RING_EVENT_IDX`, as far as the device offers them), status
    /// `FEATURES_OK`. Set up the queues next, then [`Self::driver_ok`].
    pub fn open(
        platform: &'s Session<Platform>,
        index: u32,
        wanted: u64,
    ) -> Result<VirtioDevice<'s>, VirtioError> {
        let common = platform.virtio(index, cfg_type::COMMON)?;
        let notify = platform.virtio(index, cfg_type::NOTIFY)?;
        let isr = platform.virtio(index, cfg_type::ISR)?;
        let device = match platform.virtio(index, cfg_type::DEVICE) {
            Ok(d) => Some(d),
            Err(PlatformError::Refused(_)) => None,
            Err(e) => return Err(e.into()),
        };
        let blocks = [Some(common), Some(notify), Some(isr), device];
        // Map, per BAR, the pages from its first block's to its last's.
        let mut bars: [Option<Region>; 6] = Default::default();
        let mut first_page = [0usize; 6];
        for bar in 0..6u8 {
            let (mut lo, mut hi) = (usize::MAX, 0usize);
            for b in blocks.iter().flatten().filter(|b| b.bar == bar) {
                lo = lo.min(b.offset as usize);
                hi = hi.max(b.offset as usize + b.length as usize);
            }
            if hi == 0 {
                continue;
            }
            let info = platform.bar(index, u32::from(bar))?;
            if info.io || !(12..=21).contains(&info.frame_bits) {
                return Err(VirtioError::Register {
                    cfg_type: 0,
                    offset: lo as u32,
                });
            }
            let (from, to) = (lo >> info.frame_bits, (hi - 1) >> info.frame_bits);
            if to >= info.frames as usize {
                return Err(VirtioError::Register {
                    cfg_type: 0,
                    offset: hi as u32,
                });
            }
            let frames = (info.first + from as u32..info.first + to as u32 + 1)
                .filter_map(|i| platform.donated_slot(i));
            let region =
                Region::map_new(frames, to - from + 1, 1 << info.frame_bits, Cache::Uncached)
                    .map_err(VirtioError::Map)?;
            first_page[usize::from(bar)] = from << info.frame_bits;
            bars[usize::from(bar)] = Some(region);
        }
        let block = |cfg_type: u8, b: crate::session::platform::VirtioBlock| Block {
            cfg_type,
            bar: usize::from(b.bar),
            start: (b.offset as usize)
                .saturating_sub(first_page.get(usize::from(b.bar)).copied().unwrap_or(0)),
            len: b.length as usize,
        };
        let mut dev = VirtioDevice {
            platform,
            index,
            common: block(cfg_type::COMMON, common),
            notify: block(cfg_type::NOTIFY, notify),
            notify_off_multiplier: notify.notify_off_multiplier,
            isr: block(cfg_type::ISR, isr),
            device: device.map(|d| block(cfg_type::DEVICE, d)),
            bars,
            features: 0,
            wanted,
        };
        dev.negotiate(wanted)?;
        Ok(dev)
    }

    /// Reset and the feature handshake (3.1.1 steps 1–6).
    fn negotiate(&mut self, wanted: u64) -> Result<(), VirtioError> {
        self.set_status(0)?;
        let mut polls = 0;
        while self.status()? != 0 {
            polls += 1;
            if polls == RESET_POLLS {
                return Err(VirtioError::NoReset);
            }
            let _ = syscall::yield_now();
        }
        self.set_status(status::ACKNOWLEDGE)?;
        self.set_status(status::ACKNOWLEDGE | status::DRIVER)?;
        let mut offered = 0u64;
        for half in 0..2u32 {
            self.write32(common::DEVICE_FEATURE_SELECT, half)?;
            offered |= u64::from(self.read32(common::DEVICE_FEATURE)?) << (32 * half);
        }
        let version_1 = 1u64 << feature::VERSION_1;
        let want = (wanted | version_1 | 1 << feature::RING_EVENT_IDX) & !UNSUPPORTED;
        let accepted = offered & want;
        if accepted & version_1 == 0 {
            self.set_status(status::FAILED)?;
            return Err(VirtioError::NoVersion1);
        }
        for half in 0..2u32 {
            self.write32(common::DRIVER_FEATURE_SELECT, half)?;
            self.write32(common::DRIVER_FEATURE, (accepted >> (32 * half)) as u32)?;
        }
        let s = status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK;
        self.set_status(s)?;
        if self.status()? & status::FEATURES_OK == 0 {
            self.set_status(status::FAILED)?;
            return Err(VirtioError::FeaturesRefused);
        }
        self.features = accepted;
        Ok(())
    }

    /// The negotiated features (bit n: feature n).
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Whether feature bit `bit` was negotiated.
    pub fn has_feature(&self, bit: u32) -> bool {
        bit < 64 && self.features & (1 << bit) != 0
    }

    /// The device status register.
    pub fn status(&self) -> Result<u8, VirtioError> {
        self.reg(self.common, common::DEVICE_STATUS, 1)
            .and_then(|(r, o)| {
                r.read8(o)
                    .ok_or(self.oob(self.common, common::DEVICE_STATUS))
            })
    }

    fn set_status(&self, value: u8) -> Result<(), VirtioError> {
        let (r, o) = self.reg(self.common, common::DEVICE_STATUS, 1)?;
        r.write8(o, value)
            .ok_or(self.oob(self.common, common::DEVICE_STATUS))
    }

    /// Resets the device (status 0): it forgets its queues and stops
    /// using the memory they name — for a driver that gives up on a
    /// device that does not complete its requests.
    pub fn reset(&self) {
        let _ = self.set_status(0);
    }

    /// Sets `DRIVER_OK`: the queues are set up, the device may run.
    pub fn driver_ok(&self) -> Result<(), VirtioError> {
        let s = self.status()?;
        self.set_status(s | status::DRIVER_OK)
    }

    fn oob(&self, b: Block, offset: u32) -> VirtioError {
        VirtioError::Register {
            cfg_type: b.cfg_type,
            offset,
        }
    }

    /// The window and offset of `width` bytes at `offset` in block `b`.
    fn reg(&self, b: Block, offset: u32, width: usize) -> Result<(&Region, usize), VirtioError> {
        let at = offset as usize;
        match (
            at.checked_add(width),
            self.bars.get(b.bar).and_then(Option::as_ref),
        ) {
            (Some(end), Some(region)) if end <= b.len => Ok((region, b.start + at)),
            _ => Err(self.oob(b, offset)),
        }
    }

    fn read16(&self, offset: u32) -> Result<u16, VirtioError> {
        let (r, o) = self.reg(self.common, offset, 2)?;
        r.read16(o).ok_or(self.oob(self.common, offset))
    }

    fn read32(&self, offset: u32) -> Result<u32, VirtioError> {
        let (r, o) = self.reg(self.common, offset, 4)?;
        r.read32(o).ok_or(self.oob(self.common, offset))
    }

    fn write16(&self, offset: u32, value: u16) -> Result<(), VirtioError> {
        let (r, o) = self.reg(self.common, offset, 2)?;
        r.write16(o, value).ok_or(self.oob(self.common, offset))
    }

    fn write32(&self, offset: u32, value: u32) -> Result<(), VirtioError> {
        let (r, o) = self.reg(self.common, offset, 4)?;
        r.write32(o, value).ok_or(self.oob(self.common, offset))
    }

    /// A 64-bit queue address, as two 32-bit stores (4.1.3.1 allows it
    /// and every device takes it).
    fn write_address(&self, offset: u32, value: u64) -> Result<(), VirtioError> {
        self.write32(offset, value as u32)?;
        self.write32(offset + 4, (value >> 32) as u32)
    }

    /// Sets up queue `n` (before [`Self::driver_ok`]): the largest power
    /// of two the device offers up to `cap` entries, rings in fresh DMA
    /// memory of the session, write-back (x86 DMA snoops the caches);
    /// with `irq`, MSI-X entry `irq.entry` on CPU `irq.cpu` signals
    /// `irq.notification`, otherwise the queue raises no interrupt.
    pub fn queue(
        &mut self,
        n: u16,
        cap: u16,
        irq: Option<QueueIrq>,
    ) -> Result<VirtQueue, VirtioError> {
        self.write16(common::QUEUE_SELECT, n)?;
        let max = self.read16(common::QUEUE_SIZE)?;
        let size = Layout::queue_size(max, cap).ok_or(VirtioError::NoQueue(n))?;
        if self.read16(common::QUEUE_ENABLE)? != 0 {
            return Err(VirtioError::QueueEnabled(n));
        }
        let layout = Layout::new(size)?;
        let bytes = (layout.bytes as u64).next_power_of_two().max(4096);
        let dma = self.platform.dma(bytes)?;
        let frames =
            (dma.first..dma.first + dma.frames).filter_map(|i| self.platform.donated_slot(i));
        let memory = Region::map_new(frames, dma.frames as usize, 4096, Cache::WriteBack)
            .map_err(VirtioError::Map)?;
        let ring = SplitQueue::new(
            memory,
            dma.bus_address,
            size,
            self.has_feature(feature::RING_EVENT_IDX),
        )?;
        self.write16(common::QUEUE_SIZE, size)?;
        if self.read16(common::QUEUE_SIZE)? != size {
            return Err(VirtioError::NoQueue(n));
        }
        let handler = match irq {
            Some(irq) => {
                let (handler, kind) = self.platform.irq(self.index, irq.entry, irq.cpu)?;
                if kind != IRQ_MSIX {
                    return Err(VirtioError::Vector(irq.entry));
                }
                syscall::irq_bind(handler, irq.notification).map_err(VirtioError::Irq)?;
                Some((handler, irq.notification))
            }
            None => None,
        };
        let mut q = VirtQueue {
            ring,
            index: n,
            doorbell: 0,
            max_size: max,
            irq: handler,
            vector: irq.map_or(NO_VECTOR, |irq| irq.entry),
        };
        self.program(&mut q)?;
        Ok(q)
    }

    /// Tells the device (queue `q.index` selected, its size written) where
    /// `q`'s rings are and which MSI-X entry it raises, finds its
    /// doorbell and enables it.
    fn program(&self, q: &mut VirtQueue) -> Result<(), VirtioError> {
        let n = q.index;
        self.write16(common::QUEUE_MSIX_VECTOR, q.vector)?;
        if q.vector != NO_VECTOR && self.read16(common::QUEUE_MSIX_VECTOR)? != q.vector {
            return Err(VirtioError::Vector(q.vector));
        }
        self.write_address(common::QUEUE_DESC, q.ring.desc_bus())?;
        self.write_address(common::QUEUE_DRIVER, q.ring.driver_bus())?;
        self.write_address(common::QUEUE_DEVICE, q.ring.device_bus())?;
        let notify_off = self.read16(common::QUEUE_NOTIFY_OFF)?;
        q.doorbell = u32::from(notify_off)
            .checked_mul(self.notify_off_multiplier)
            .filter(|d| self.reg(self.notify, *d, 2).is_ok())
            .ok_or(VirtioError::Doorbell(n))?;
        self.write16(common::QUEUE_ENABLE, 1)
    }

    /// Resets the device and sets it up again as it was: the features
    /// negotiated anew (the same ones, or an error), each of `queues`
    /// emptied ([`SplitQueue::reset`]: every chain in flight is dropped,
    /// its token dead) and programmed again over its memory with its
    /// interrupt, then `DRIVER_OK`. For a driver that must take every
    /// buffer back from the device at once — buffers that may never
    /// complete, like a network device's receive buffers, in memory that
    /// goes back to a client — or that recovers from a device that broke
    /// a queue. No DMA memory or interrupt vector is spent.
    pub fn restart(&mut self, queues: &mut [&mut VirtQueue]) -> Result<(), VirtioError> {
        let before = self.features;
        self.negotiate(self.wanted)?;
        if self.features != before {
            self.set_status(status::FAILED)?;
            return Err(VirtioError::FeaturesRefused);
        }
        for q in queues.iter_mut() {
            q.ring.reset()?;
            self.write16(common::QUEUE_SELECT, q.index)?;
            self.write16(common::QUEUE_SIZE, q.ring.size())?;
            if self.read16(common::QUEUE_SIZE)? != q.ring.size() {
                return Err(VirtioError::NoQueue(q.index));
            }
            self.program(q)?;
        }
        self.driver_ok()
    }

    /// Rings queue `q`'s doorbell.
    pub fn notify(&self, q: &VirtQueue) -> Result<(), VirtioError> {
        let (r, o) = self.reg(self.notify, q.doorbell, 2)?;
        r.write16(o, q.index)
            .ok_or(self.oob(self.notify, q.doorbell))
    }

    /// Publishes every chain added to `q` since the last kick (one `idx`
    /// store) and rings the doorbell if the device asked to be told
    /// (event index, or its `NO_NOTIFY` flag): whether it rang.
    pub fn kick(&self, q: &mut VirtQueue) -> Result<bool, VirtioError> {
        q.ring.publish()?;
        let ring = q.ring.needs_notify()?;
        if ring {
            self.notify(q)?;
        }
        Ok(ring)
    }

    /// The ISR status byte (read-to-clear; only meaningful without MSI-X).
    pub fn isr_status(&self) -> Result<u8, VirtioError> {
        let (r, o) = self.reg(self.isr, 0, 1)?;
        r.read8(o).ok_or(self.oob(self.isr, 0))
    }

    fn device_block(&self) -> Result<Block, VirtioError> {
        self.device.ok_or(VirtioError::Register {
            cfg_type: cfg_type::DEVICE,
            offset: 0,
        })
    }

    /// The device-specific configuration byte at `offset`.
    pub fn config_read8(&self, offset: u32) -> Result<u8, VirtioError> {
        let b = self.device_block()?;
        let (r, o) = self.reg(b, offset, 1)?;
        r.read8(o).ok_or(self.oob(b, offset))
    }

    /// Writes the device-specific configuration byte at `offset` (a
    /// selector, as virtio-input's `select`/`subsel`, 5.8.4).
    pub fn config_write8(&self, offset: u32, value: u8) -> Result<(), VirtioError> {
        let b = self.device_block()?;
        let (r, o) = self.reg(b, offset, 1)?;
        r.write8(o, value).ok_or(self.oob(b, offset))
    }

    /// The device-specific configuration's 16 bits at `offset`.
    pub fn config_read16(&self, offset: u32) -> Result<u16, VirtioError> {
        let b = self.device_block()?;
        let (r, o) = self.reg(b, offset, 2)?;
        r.read16(o).ok_or(self.oob(b, offset))
    }

    /// The device-specific configuration's 32 bits at `offset`.
    pub fn config_read32(&self, offset: u32) -> Result<u32, VirtioError> {
        let b = self.device_block()?;
        let (r, o) = self.reg(b, offset, 4)?;
        r.read32(o).ok_or(self.oob(b, offset))
    }

    /// The device-specific configuration's 64 bits at `offset`, read as
    /// two 32-bit halves within one configuration generation (4.1.4.3.1).
    pub fn config_read64(&self, offset: u32) -> Result<u64, VirtioError> {
        let generation = || {
            self.reg(self.common, common::CONFIG_GENERATION, 1)
                .and_then(|(r, o)| r.read8(o).ok_or(self.oob(self.common, offset)))
        };
        for _ in 0..CONFIG_RETRIES {
            let before = generation()?;
            let low = self.config_read32(offset)?;
            let high =
                self.config_read32(offset.checked_add(4).ok_or(VirtioError::ConfigUnstable)?)?;
            if generation()? == before {
                return Ok(u64::from(low) | u64::from(high) << 32);
            }
        }
        Err(VirtioError::ConfigUnstable)
    }
}
