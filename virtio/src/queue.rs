//! The split virtqueue (virtio 1.2, 2.7): see the crate docs.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{fence, Ordering};

/// The largest split-queue size (2.7: "the maximum Queue Size value is
/// 32768").
pub const MAX_QUEUE_SIZE: u16 = 32768;

/// Descriptor flag: the chain continues at `next`.
const DESC_F_NEXT: u16 = 1;
/// Descriptor flag: the device writes this buffer (otherwise reads it).
const DESC_F_WRITE: u16 = 2;
/// Driver-ring flag (without event index): do not interrupt me.
const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// Device-ring flag (without event index): do not notify me.
const USED_F_NO_NOTIFY: u16 = 1;

/// Bytes of a descriptor: `addr` u64, `len` u32, `flags` u16, `next` u16.
const DESC_BYTES: usize = 16;
/// Bytes of a device-ring element: `id` u32, `len` u32.
const USED_ELEM_BYTES: usize = 8;

/// The memory the rings live in, as byte offsets into a window the device
/// sees too. Accesses are naturally aligned; `None` means outside the
/// window (or misaligned). Writes take `&self`: the memory is shared with
/// the device, so implementations write through (volatile in `rt`, a cell
/// in tests).
pub trait QueueMemory {
    /// The 16-bit value at `offset`.
    fn read16(&self, offset: usize) -> Option<u16>;
    /// The 32-bit value at `offset`.
    fn read32(&self, offset: usize) -> Option<u32>;
    /// The 64-bit value at `offset`.
    fn read64(&self, offset: usize) -> Option<u64>;
    /// Stores a 16-bit value at `offset`.
    fn write16(&self, offset: usize, value: u16) -> Option<()>;
    /// Stores a 32-bit value at `offset`.
    fn write32(&self, offset: usize, value: u32) -> Option<()>;
    /// Stores a 64-bit value at `offset`.
    fn write64(&self, offset: usize, value: u64) -> Option<()>;
    /// Bytes of the window.
    fn len(&self) -> usize;
    /// Whether the window is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The layout of a split queue of `size` entries in one memory window
/// (2.7, "Virtqueue Alignment"): the descriptor table at 0 (16-aligned),
/// the driver ring right after it (2-aligned), the device ring after that
/// rounded up to 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Entries.
    pub size: u16,
    /// Offset of the descriptor table (16 × size bytes).
    pub desc: usize,
    /// Offset of the driver ring: `flags`, `idx`, `ring[size]`, `used_event`.
    pub driver: usize,
    /// Offset of the device ring: `flags`, `idx`, `ring[size]` (8 bytes
    /// each), `avail_event`.
    pub device: usize,
    /// Bytes from the descriptor table to the end of the device ring.
    pub bytes: usize,
}

impl Layout {
    /// The layout for `size` entries: a power of two from 1 to
    /// [`MAX_QUEUE_SIZE`].
    pub fn new(size: u16) -> Result<Layout, QueueError> {
        if !size.is_power_of_two() || size > MAX_QUEUE_SIZE {
            return Err(QueueError::BadSize(size));
        }
        let n = usize::from(size);
        let desc = 0;
        let driver = desc + DESC_BYTES * n;
        let device = (driver + 6 + 2 * n).next_multiple_of(4);
        let bytes = device + 6 + USED_ELEM_BYTES * n;
        Ok(Layout {
            size,
            desc,
            driver,
            device,
            bytes,
        })
    }

    /// The size to give a queue whose device offers `offered` entries
    /// (its `queue_size` register) when the driver wants at most `cap`:
    /// the largest power of two within both (and 32768); `None` when
    /// either is 0 (no such queue).
    pub fn queue_size(offered: u16, cap: u16) -> Option<u16> {
        let n = offered.min(cap).min(MAX_QUEUE_SIZE);
        (n != 0).then(|| 1 << (15 - n.leading_zeros()))
    }

    fn ring_slot(&self, i: u16) -> usize {
        self.driver + 4 + 2 * usize::from(i % self.size)
    }
    fn used_event(&self) -> usize {
        self.driver + 4 + 2 * usize::from(self.size)
    }
    fn used_elem(&self, i: u16) -> usize {
        self.device + 4 + USED_ELEM_BYTES * usize::from(i % self.size)
    }
    fn avail_event(&self) -> usize {
        self.device + 4 + USED_ELEM_BYTES * usize::from(self.size)
    }
}

/// One buffer of a chain: what the device is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Bus address of its first byte.
    pub addr: u64,
    /// Bytes.
    pub len: u32,
    /// The device writes it (otherwise it reads it).
    pub device_writes: bool,
}

/// A chain in flight: the index of its head descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(pub u16);

/// A chain the device is done with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Used {
    /// The chain, as [`SplitQueue::add`] returned it.
    pub token: Token,
    /// Bytes the device wrote into its device-writable buffers.
    pub len: u32,
}

/// What a device did wrong; the queue is broken from then on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// A used element names descriptor `id`, not below the queue size.
    IdOutOfRange { id: u32 },
    /// A used element names descriptor `id`, which is not the head of a
    /// chain in flight (free, a chain's middle, or returned already).
    NotInFlight { id: u16 },
    /// The device ring's `idx` moved `moved` entries past the last one
    /// taken, more than the `in_flight` chains.
    UsedIdxJump { moved: u16, in_flight: u16 },
    /// A used element says `len` bytes were written into a chain with
    /// only `writable` device-writable bytes.
    LengthTooLarge { id: u16, len: u32, writable: u32 },
}

/// Why a queue operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueError {
    /// Not a power of two from 1 to 32768.
    BadSize(u16),
    /// The layout needs `needs` bytes, the memory has `has`.
    TooSmall { needs: usize, has: usize },
    /// The rings' bus address is not 16-aligned.
    Misaligned(u64),
    /// A chain without buffers.
    EmptyChain,
    /// A device-readable buffer after a device-writable one (2.7.4.2:
    /// readable ones come first).
    ReadableAfterWritable,
    /// Not enough free descriptors: `needs` for the chain, `free` left.
    Full { needs: usize, free: u16 },
    /// A ring access fell outside the memory (cannot happen with a
    /// layout that fit; reported rather than trusted).
    Memory,
    /// The device broke the protocol (now or earlier).
    Device(DeviceError),
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DeviceError::IdOutOfRange { id } => {
                write!(f, "used element names descriptor {id}, out of range")
            }
            DeviceError::NotInFlight { id } => {
                write!(
                    f,
                    "used element names descriptor {id}, not a chain in flight"
                )
            }
            DeviceError::UsedIdxJump { moved, in_flight } => write!(
                f,
                "used idx moved by {moved} with {in_flight} chains in flight"
            ),
            DeviceError::LengthTooLarge { id, len, writable } => write!(
                f,
                "chain {id}: {len} bytes written, only {writable} writable"
            ),
        }
    }
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            QueueError::BadSize(s) => write!(f, "queue size {s} is not a power of two up to 32768"),
            QueueError::TooSmall { needs, has } => {
                write!(f, "the rings need {needs} bytes, the memory has {has}")
            }
            QueueError::Misaligned(a) => write!(f, "ring bus address {a:#x} is not 16-aligned"),
            QueueError::EmptyChain => f.write_str("a chain without buffers"),
            QueueError::ReadableAfterWritable => {
                f.write_str("a device-readable buffer after a device-writable one")
            }
            QueueError::Full { needs, free } => {
                write!(
                    f,
                    "queue full: the chain needs {needs} descriptors, {free} free"
                )
            }
            QueueError::Memory => f.write_str("a ring access outside the queue memory"),
            QueueError::Device(e) => write!(f, "device error: {e}"),
        }
    }
}

/// `vring_need_event` (2.7.10): whether moving an index from `old` to
/// `new` passes `event`, i.e. `event` is in `[old, new)` modulo 2^16 —
/// the other side asked to be told once the index goes past `event`.
pub fn vring_need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

/// The driver's side of a split virtqueue over memory `M` whose first byte
/// has bus address `bus`.
pub struct SplitQueue<M> {
    mem: M,
    bus: u64,
    layout: Layout,
    event_idx: bool,
    /// Private shadow of each descriptor's `next`: the free list and the
    /// chains in flight (never read back from shared memory).
    next: Vec<u16>,
    /// Per head descriptor: descriptors in its chain while in flight, 0
    /// otherwise.
    chain_len: Vec<u16>,
    /// Per head descriptor: device-writable bytes of its chain.
    writable: Vec<u32>,
    free_head: u16,
    num_free: u16,
    /// Chains added, not yet returned.
    in_flight: u16,
    /// The driver ring's `idx` as the driver will publish it.
    avail_idx: u16,
    /// The `idx` last stored into the driver ring.
    published: u16,
    /// `published` when [`SplitQueue::needs_notify`] last ran.
    notified: u16,
    /// The next device-ring entry to take.
    last_used: u16,
    /// The driver-ring flags as last written (without event index).
    avail_flags: u16,
    broken: Option<DeviceError>,
}

impl<M: QueueMemory> SplitQueue<M> {
    /// A queue of `size` entries in `mem` (bus address `bus`, 16-aligned),
    /// with event-index suppression when `event_idx` (VIRTIO_F_EVENT_IDX
    /// negotiated). Zeroes the rings. The device learns the three bus
    /// addresses ([`SplitQueue::desc_bus`], ...) from the transport.
    pub fn new(mem: M, bus: u64, size: u16, event_idx: bool) -> Result<Self, QueueError> {
        let layout = Layout::new(size)?;
        if layout.bytes > mem.len() {
            return Err(QueueError::TooSmall {
                needs: layout.bytes,
                has: mem.len(),
            });
        }
        if !bus.is_multiple_of(16) || bus.checked_add(layout.bytes as u64).is_none() {
            return Err(QueueError::Misaligned(bus));
        }
        let n = usize::from(size);
        let mut queue = SplitQueue {
            mem,
            bus,
            layout,
            event_idx,
            next: vec![0; n],
            chain_len: vec![0; n],
            writable: vec![0; n],
            free_head: 0,
            num_free: 0,
            in_flight: 0,
            avail_idx: 0,
            published: 0,
            notified: 0,
            last_used: 0,
            avail_flags: 0,
            broken: None,
        };
        queue.reset()?;
        Ok(queue)
    }

    /// Empties the queue as if it were new: the rings zeroed, every
    /// descriptor free, the indices at 0, a broken queue whole again —
    /// after the device was reset (it forgot the queue and every chain in
    /// flight; their tokens are dead), before the transport programs the
    /// queue into it again. With the device still running, a chain it
    /// completes later would be taken for a new one.
    pub fn reset(&mut self) -> Result<(), QueueError> {
        // Descriptors need no zeroing: the device reads only those the
        // driver ring names. The rings start at 0 (flags, idx, events).
        for offset in (self.layout.driver..self.layout.bytes).step_by(2) {
            self.mem.write16(offset, 0).ok_or(QueueError::Memory)?;
        }
        let size = self.layout.size;
        let n = usize::from(size);
        for (i, next) in self.next.iter_mut().enumerate() {
            *next = ((i + 1) % n) as u16;
        }
        self.chain_len.fill(0);
        self.writable.fill(0);
        self.free_head = 0;
        self.num_free = size;
        self.in_flight = 0;
        self.avail_idx = 0;
        self.published = 0;
        self.notified = 0;
        self.last_used = 0;
        self.avail_flags = 0;
        self.broken = None;
        Ok(())
    }

    /// Entries.
    pub fn size(&self) -> u16 {
        self.layout.size
    }
    /// Where the rings are.
    pub fn layout(&self) -> Layout {
        self.layout
    }
    /// Whether event-index suppression is in use.
    pub fn event_idx(&self) -> bool {
        self.event_idx
    }
    /// Bus address of the descriptor table.
    pub fn desc_bus(&self) -> u64 {
        self.bus + self.layout.desc as u64
    }
    /// Bus address of the driver (available) ring.
    pub fn driver_bus(&self) -> u64 {
        self.bus + self.layout.driver as u64
    }
    /// Bus address of the device (used) ring.
    pub fn device_bus(&self) -> u64 {
        self.bus + self.layout.device as u64
    }
    /// Free descriptors.
    pub fn free(&self) -> u16 {
        self.num_free
    }
    /// Chains added and not yet returned by [`SplitQueue::pop_used`].
    pub fn in_flight(&self) -> u16 {
        self.in_flight
    }
    /// The memory (for a device model in tests; for the transport).
    pub fn memory(&self) -> &M {
        &self.mem
    }
    /// The error that broke the queue, if the device broke it.
    pub fn broken(&self) -> Option<DeviceError> {
        self.broken
    }

    fn check(&self) -> Result<(), QueueError> {
        match self.broken {
            Some(e) => Err(QueueError::Device(e)),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: DeviceError) -> QueueError {
        self.broken = Some(e);
        QueueError::Device(e)
    }

    /// Puts `chain` into free descriptors and the next driver-ring slot;
    /// the device sees it after [`SplitQueue::publish`]. Refuses a chain
    /// that does not fit ([`QueueError::Full`]) without changing anything.
    pub fn add(&mut self, chain: &[Buffer]) -> Result<Token, QueueError> {
        self.check()?;
        if chain.is_empty() {
            return Err(QueueError::EmptyChain);
        }
        if chain
            .windows(2)
            .any(|w| w[0].device_writes && !w[1].device_writes)
        {
            return Err(QueueError::ReadableAfterWritable);
        }
        if chain.len() > usize::from(self.num_free) {
            return Err(QueueError::Full {
                needs: chain.len(),
                free: self.num_free,
            });
        }
        let head = self.free_head;
        let mut at = head;
        let mut writable = 0u32;
        for (i, b) in chain.iter().enumerate() {
            let last = i + 1 == chain.len();
            let next = self.next[usize::from(at)];
            let mut flags = if b.device_writes { DESC_F_WRITE } else { 0 };
            if !last {
                flags |= DESC_F_NEXT;
            }
            if b.device_writes {
                writable = writable.saturating_add(b.len);
            }
            let d = self.layout.desc + DESC_BYTES * usize::from(at);
            self.mem.write64(d, b.addr).ok_or(QueueError::Memory)?;
            self.mem.write32(d + 8, b.len).ok_or(QueueError::Memory)?;
            self.mem.write16(d + 12, flags).ok_or(QueueError::Memory)?;
            self.mem
                .write16(d + 14, if last { 0 } else { next })
                .ok_or(QueueError::Memory)?;
            if !last {
                at = next;
            }
        }
        // The chain is `head ..= at` along `next`; the free list goes on
        // after `at`.
        self.free_head = self.next[usize::from(at)];
        let n = chain.len() as u16;
        self.num_free -= n;
        self.in_flight += 1;
        self.chain_len[usize::from(head)] = n;
        self.writable[usize::from(head)] = writable;
        self.mem
            .write16(self.layout.ring_slot(self.avail_idx), head)
            .ok_or(QueueError::Memory)?;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        Ok(Token(head))
    }

    /// Makes every chain added since the last publication visible to the
    /// device with one store of the driver ring's `idx` (after a release
    /// fence: descriptors and slots first). Returns how many it published.
    pub fn publish(&mut self) -> Result<u16, QueueError> {
        self.check()?;
        let new = self.avail_idx.wrapping_sub(self.published);
        if new == 0 {
            return Ok(0);
        }
        fence(Ordering::Release);
        self.mem
            .write16(self.layout.driver + 2, self.avail_idx)
            .ok_or(QueueError::Memory)?;
        self.published = self.avail_idx;
        Ok(new)
    }

    /// Whether the device must be notified of what was published since
    /// the last call: with event index, when the published `idx` passed
    /// the device's `avail_event` (`vring_need_event`); without, unless
    /// the device set `NO_NOTIFY`. Call once per batch, after
    /// [`SplitQueue::publish`]; a full fence orders the `idx` store before
    /// the read of the device's wish.
    pub fn needs_notify(&mut self) -> Result<bool, QueueError> {
        self.check()?;
        let old = self.notified;
        let new = self.published;
        if old == new {
            return Ok(false);
        }
        fence(Ordering::SeqCst);
        self.notified = new;
        if self.event_idx {
            let event = self
                .mem
                .read16(self.layout.avail_event())
                .ok_or(QueueError::Memory)?;
            Ok(vring_need_event(event, new, old))
        } else {
            let flags = self
                .mem
                .read16(self.layout.device)
                .ok_or(QueueError::Memory)?;
            Ok(flags & USED_F_NO_NOTIFY == 0)
        }
    }

    /// Whether the device ring holds chains not yet taken.
    pub fn has_used(&self) -> Result<bool, QueueError> {
        self.check()?;
        let idx = self
            .mem
            .read16(self.layout.device + 2)
            .ok_or(QueueError::Memory)?;
        Ok(idx != self.last_used)
    }

    /// The next chain the device is done with, its descriptors free
    /// again; `Ok(None)` when there is none. A device that broke the
    /// protocol gets a [`QueueError::Device`] (module docs).
    pub fn pop_used(&mut self) -> Result<Option<Used>, QueueError> {
        self.check()?;
        let idx = self
            .mem
            .read16(self.layout.device + 2)
            .ok_or(QueueError::Memory)?;
        let moved = idx.wrapping_sub(self.last_used);
        if moved == 0 {
            return Ok(None);
        }
        if moved > self.in_flight {
            return Err(self.fail(DeviceError::UsedIdxJump {
                moved,
                in_flight: self.in_flight,
            }));
        }
        fence(Ordering::Acquire);
        let elem = self.layout.used_elem(self.last_used);
        let id = self.mem.read32(elem).ok_or(QueueError::Memory)?;
        let len = self.mem.read32(elem + 4).ok_or(QueueError::Memory)?;
        if id >= u32::from(self.layout.size) {
            return Err(self.fail(DeviceError::IdOutOfRange { id }));
        }
        let head = id as u16;
        let count = self.chain_len[usize::from(head)];
        if count == 0 {
            return Err(self.fail(DeviceError::NotInFlight { id: head }));
        }
        let writable = self.writable[usize::from(head)];
        if len > writable {
            return Err(self.fail(DeviceError::LengthTooLarge {
                id: head,
                len,
                writable,
            }));
        }
        // Recycle: the chain's tail links to the old free list.
        let mut tail = head;
        for _ in 1..count {
            tail = self.next[usize::from(tail)];
        }
        self.next[usize::from(tail)] = self.free_head;
        self.free_head = head;
        self.num_free += count;
        self.chain_len[usize::from(head)] = 0;
        self.in_flight -= 1;
        self.last_used = self.last_used.wrapping_add(1);
        Ok(Some(Used {
            token: Token(head),
            len,
        }))
    }

    /// Asks for an interrupt once `n` (at least 1) more chains are done
    /// — with event index, `used_event` = last taken + n − 1; without,
    /// interrupts are just enabled (the device interrupts on every
    /// completion it chooses to). Returns whether that many are done
    /// already (then no interrupt may come: take them first). A full
    /// fence orders the store before the check.
    pub fn interrupt_after(&mut self, n: u16) -> Result<bool, QueueError> {
        self.check()?;
        let n = n.max(1);
        if self.event_idx {
            self.mem
                .write16(self.layout.used_event(), self.last_used.wrapping_add(n - 1))
                .ok_or(QueueError::Memory)?;
        } else if self.avail_flags & AVAIL_F_NO_INTERRUPT != 0 {
            self.avail_flags &= !AVAIL_F_NO_INTERRUPT;
            self.mem
                .write16(self.layout.driver, self.avail_flags)
                .ok_or(QueueError::Memory)?;
        }
        fence(Ordering::SeqCst);
        let idx = self
            .mem
            .read16(self.layout.device + 2)
            .ok_or(QueueError::Memory)?;
        let done = idx.wrapping_sub(self.last_used);
        Ok(done >= n || (!self.event_idx && done > 0))
    }

    /// Asks for an interrupt at the next completion; returns whether
    /// chains are done already (take them before waiting).
    pub fn enable_interrupts(&mut self) -> Result<bool, QueueError> {
        self.interrupt_after(1)
    }

    /// Asks the device not to interrupt (a hint: it still may). Without
    /// event index, the driver ring's `NO_INTERRUPT` flag; with it,
    /// `used_event` is left behind, so the device interrupts again only
    /// after 2^16 completions — [`SplitQueue::interrupt_after`] re-arms.
    pub fn disable_interrupts(&mut self) -> Result<(), QueueError> {
        self.check()?;
        if self.event_idx {
            self.mem
                .write16(self.layout.used_event(), self.last_used.wrapping_sub(1))
                .ok_or(QueueError::Memory)?;
        } else {
            self.avail_flags |= AVAIL_F_NO_INTERRUPT;
            self.mem
                .write16(self.layout.driver, self.avail_flags)
                .ok_or(QueueError::Memory)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
