//! The split virtqueue of virtio 1.x (virtio 1.2, section 2.7) as pure
//! logic: no hardware access, no `unsafe`, built for the host so that
//! `cargo test` drives it against a simulated device, and for
//! `x86_64-unknown-none`, where `rt::virtio` runs it over DMA memory.
//!
//! - [`QueueMemory`]: the memory the rings live in — byte offsets into a
//!   window the device also sees (`rt::mmio::Region` over DMA memory in a
//!   component, a plain buffer in tests). The queue never holds a pointer.
//! - [`Layout`]: where the descriptor table, the driver ring (with
//!   `used_event`) and the device ring (with `avail_event`) go for a
//!   power-of-two queue size up to 32768, with their alignments (16, 2, 4).
//! - [`SplitQueue`]: the driver's side. [`SplitQueue::add`] puts a chain
//!   of buffers (bus address, length, device-writable) into free
//!   descriptors and the next driver-ring slot and returns a [`Token`];
//!   many chains may be in flight. [`SplitQueue::publish`] makes every
//!   chain added since the last publication visible with one `idx` store;
//!   [`SplitQueue::needs_notify`] says whether the device must be told
//!   (event index, or the device's `NO_NOTIFY` flag without it) — one
//!   doorbell per batch at most. [`SplitQueue::pop_used`] takes completed
//!   chains back; [`SplitQueue::interrupt_after`] and
//!   [`SplitQueue::enable_interrupts`] say when the device should
//!   interrupt.
//!
//! # Memory ordering
//!
//! The device reads the rings concurrently. Three fences, in the queue's
//! code (not left to callers):
//! - before the driver ring's `idx` store in [`SplitQueue::publish`], a
//!   release fence: the descriptors and ring slots written before it are
//!   visible to the device first (2.7.13.3.1);
//! - between that store (or the `used_event` store) and reading the
//!   device's `avail_event` / `flags` (or the device ring's `idx`), a
//!   sequentially consistent fence (`mfence` on x86): otherwise the load
//!   could pass the store and a notification (or an interrupt) be lost
//!   (2.7.10, the race Linux's `virtio_mb` closes);
//! - after reading the device ring's `idx` in [`SplitQueue::pop_used`], an
//!   acquire fence before reading the used elements it covers.
//!
//! The [`QueueMemory`] accesses are volatile in `rt` and fences order them
//! on x86 (loads are not reordered with loads, nor stores with stores;
//! only store→load needs the `mfence`) as the compiler barrier they also are.
//!
//! # A hostile device
//!
//! Everything read from the device ring is checked: a used element naming
//! a descriptor that is out of range, not the head of a chain in flight
//! (a free descriptor, a chain's middle, a chain already returned), a used
//! `idx` that moved further than the chains in flight, or a written length
//! larger than the chain's device-writable bytes, is a [`DeviceError`].
//! The queue then counts as broken: every later call returns that error,
//! no descriptor is recycled or handed out again, and the driver resets
//! the device. The queue's own bookkeeping (free list, chain lengths)
//! lives in private memory the device cannot write.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod queue;

pub use queue::{
    vring_need_event, Buffer, DeviceError, Layout, QueueError, QueueMemory, SplitQueue, Token,
    Used, MAX_QUEUE_SIZE,
};
