//! virtio-input: the driver of a virtio tablet (QEMU's
//! `virtio-tablet-pci`, PCI 1af4:1052, virtio 1.0 modern), the one device
//! its Platform session gives it (`devices = [{ pci = "1af4:1052" }]`),
//! serving one **Pointer session** (`rt::session::input::Pointer`: the
//! Input protocol under its own name; the GUI multiplexer is meant to be
//! its client, beside the PS/2 driver's Input session).
//!
//! Set-up through the virtio transport (`rt::virtio`): no features
//! beyond `VERSION_1`; the device's name and each axis's range read from
//! its configuration (5.8.4: `ID_NAME`, `ABS_INFO` for `ABS_X` and
//! `ABS_Y`); the event queue (0) with its MSI-X interrupt, filled with
//! [`BUFFERS`] 8-byte buffers (one `virtio_input_event` each: le16 type,
//! le16 code, le32 value) in DMA memory of its own. The status queue (1)
//! is left unused: a tablet has no LEDs.
//!
//! On each interrupt it takes every filled buffer, decodes its event
//! (`ucore::tablet`: one [`Event::Absolute`](rt::session::input::Event)
//! per report that moved, scaled to `0..=ABS_MAX`, then its buttons),
//! gives the buffer back to the device, rings the doorbell once and
//! signals the client once (`rt::session::input::serve_one`: the same
//! bounded queue and notification as the PS/2 driver's session).
//!
//! A hostile device cannot crash it: a buffer shorter than an event, or
//! a used element naming no buffer in flight, is dropped; the decoder
//! drops or clamps nonsense values; a queue the device broke (a used
//! ring index from nowhere, `virtio::SplitQueue` checks) restarts the
//! device over the same memory, at most [`MAX_RESTARTS`] times, then the
//! driver stops looking at it (logged) and keeps serving its session.
//!
//! Prints `virtio-input: BB:DD.F "NAME", x MIN..MAX, y MIN..MAX, N event
//! buffers, MSI-X on CPU 0` when it serves.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;

use rt::abi::CapSlot;
use rt::interfaces::child;
use rt::mmio::Region;
use rt::println;
use rt::session::input::{self, Pointer, ServedQueue};
use rt::session::platform::Platform;
use rt::session::Session;
use rt::virtio::{dma_region, Buffer, QueueIrq, VirtQueue, VirtioDevice, VirtioError};
use ucore::tablet::{Tablet, ABS_X, ABS_Y};

rt::entry!(main);

/// Own slots: from `BASE` what `rt::virtio::driver_base` sets up (the
/// Platform session and its donation, the thread's notification, the
/// interrupt's badged copy), from `SESSION_SLOT` the provider's two.
const BASE: u32 = child::FIRST_FREE;
const SESSION_SLOT: u32 = BASE + 8;
/// The queue's interrupt: its bit in the notification word, its CPU.
const IRQ_BIT: u32 = 0;
const CPU: u32 = 0;

/// The event queue, and the buffers given to it.
const EVENT_QUEUE: u16 = 0;
const BUFFERS: u16 = 64;
/// Bytes of one `virtio_input_event`.
const EVENT_BYTES: u32 = 8;

/// The configuration (5.8.4): `select`, `subsel`, `size`, then the data.
const CFG_SELECT: u32 = 0;
const CFG_SUBSEL: u32 = 1;
const CFG_SIZE: u32 = 2;
const CFG_DATA: u32 = 8;
const CFG_ID_NAME: u8 = 0x01;
const CFG_ABS_INFO: u8 = 0x12;
/// The longest name read from the configuration.
const NAME_BYTES: u8 = 40;

/// Restarts of a device that broke its queue before the driver gives it
/// up.
const MAX_RESTARTS: u32 = 3;

/// The driver: the device, its queue, the buffers in flight, the decoder.
struct Driver {
    dev: VirtioDevice<'static>,
    queue: VirtQueue,
    /// The buffers' DMA memory, buffer `i` at `i * EVENT_BYTES`.
    memory: Region,
    bus: u64,
    /// By descriptor head: the buffer its chain holds.
    posted: Vec<Option<u16>>,
    tablet: Tablet,
    restarts: u32,
    dead: bool,
}

impl Driver {
    fn start(platform: &'static Session<Platform>, irq: CapSlot) -> Result<Driver, VirtioError> {
        let device = platform.device(0)?;
        let mut dev = VirtioDevice::open(platform, 0, 0)?;
        let name = config_name(&dev)?;
        let x = abs_range(&dev, ABS_X)?;
        let y = abs_range(&dev, ABS_Y)?;
        let queue = dev.queue(
            EVENT_QUEUE,
            BUFFERS,
            Some(QueueIrq {
                entry: 0,
                cpu: CPU,
                notification: irq,
            }),
        )?;
        let (memory, bus) = dma_region(platform, 4096)?;
        dev.driver_ok()?;
        let mut driver = Driver {
            posted: (0..queue.size()).map(|_| None).collect(),
            dev,
            queue,
            memory,
            bus,
            tablet: Tablet::new(x, y),
            restarts: 0,
            dead: false,
        };
        driver.fill()?;
        println!(
            "virtio-input: {:02x}:{:02x}.{} \"{name}\", x {}..{}, y {}..{}, {} event buffers, MSI-X on CPU {CPU}",
            device.bdf >> 8,
            (device.bdf >> 3) & 0x1f,
            device.bdf & 7,
            x.0,
            x.1,
            y.0,
            y.1,
            driver.queue.size(),
        );
        Ok(driver)
    }

    /// Gives every buffer to the device (after the start or a restart:
    /// none is in flight) and rings the doorbell.
    fn fill(&mut self) -> Result<(), VirtioError> {
        for i in 0..self.queue.size() {
            self.post(i)?;
        }
        self.dev.kick(&mut self.queue).map(drop)
    }

    /// Adds buffer `i` to the queue (published at the next kick).
    fn post(&mut self, i: u16) -> Result<(), VirtioError> {
        let token = self.queue.add(&[Buffer {
            addr: self.bus + u64::from(i) * u64::from(EVENT_BYTES),
            len: EVENT_BYTES,
            device_writes: true,
        }])?;
        if let Some(slot) = self.posted.get_mut(usize::from(token.0)) {
            *slot = Some(i);
        }
        Ok(())
    }

    /// The queue's interrupt: every event taken and decoded into the
    /// session's queue (none: dropped), its buffer given back, the
    /// client signalled once.
    fn interrupt(&mut self, mut session: Option<&mut ServedQueue>) {
        let _ = self.queue.ack_interrupt();
        if self.dead {
            return;
        }
        let broke = loop {
            let used = match self.queue.pop_used() {
                Ok(Some(used)) => used,
                // Re-armed (with event index the device interrupts only
                // past `used_event`); events that came meanwhile are taken
                // now.
                Ok(None) => match self.queue.enable_interrupts() {
                    Ok(true) => continue,
                    Ok(false) => break None,
                    Err(e) => break Some(VirtioError::from(e)),
                },
                Err(e) => break Some(VirtioError::from(e)),
            };
            let Some(i) = self
                .posted
                .get_mut(usize::from(used.token.0))
                .and_then(Option::take)
            else {
                continue;
            };
            let at = usize::from(i) * EVENT_BYTES as usize;
            let event = (used.len >= EVENT_BYTES)
                .then(|| {
                    let kind = self.memory.read16(at)?;
                    let code = self.memory.read16(at + 2)?;
                    let value = self.memory.read32(at + 4)?;
                    Some((kind, code, value))
                })
                .flatten();
            if let Some((kind, code, value)) = event {
                for e in self.tablet.feed(kind, code, value) {
                    if let Some(q) = session.as_deref_mut() {
                        q.push(e);
                    }
                }
            }
            if let Err(e) = self.post(i) {
                break Some(e);
            }
        };
        let kicked = self.dev.kick(&mut self.queue).map(drop);
        if let Some(e) = broke.map_or(kicked.err(), Some) {
            self.restart(e);
        }
        if let Some(q) = session {
            q.publish();
        }
    }

    /// The device broke its queue: reset and set up again over the same
    /// memory, every buffer given anew; after [`MAX_RESTARTS`], given up.
    fn restart(&mut self, why: VirtioError) {
        self.restarts += 1;
        if self.restarts > MAX_RESTARTS {
            println!("virtio-input: the device broke its queue again ({why}); given up");
            self.dead = true;
            self.dev.reset();
            return;
        }
        println!("virtio-input: the device broke its queue ({why}); restarting it");
        self.posted.iter_mut().for_each(|p| *p = None);
        let again = self
            .dev
            .restart(&mut [&mut self.queue])
            .and_then(|()| self.fill());
        if let Err(e) = again {
            println!("virtio-input: restarting the device failed: {e}; given up");
            self.dead = true;
        }
    }
}

/// Selects configuration `select`/`subsel`: the size of its data.
fn config_select(dev: &VirtioDevice<'_>, select: u8, subsel: u8) -> Result<u8, VirtioError> {
    dev.config_write8(CFG_SELECT, select)?;
    dev.config_write8(CFG_SUBSEL, subsel)?;
    dev.config_read8(CFG_SIZE)
}

/// The device's name (`ID_NAME`, to its first NUL; printable ASCII
/// kept, the rest `?`).
fn config_name(dev: &VirtioDevice<'_>) -> Result<String, VirtioError> {
    let size = config_select(dev, CFG_ID_NAME, 0)?.min(NAME_BYTES);
    let mut name = String::new();
    for i in 0..u32::from(size) {
        // QEMU counts the string's terminating NUL.
        match dev.config_read8(CFG_DATA + i)? {
            0 => break,
            b @ 0x20..=0x7e => name.push(b as char),
            _ => name.push('?'),
        }
    }
    Ok(name)
}

/// Axis `axis`'s `(min, max)` (`ABS_INFO`: le32 min, le32 max, ...);
/// `(0, 0)` when the device has none — the decoder then takes QEMU's.
fn abs_range(dev: &VirtioDevice<'_>, axis: u16) -> Result<(i32, i32), VirtioError> {
    if config_select(dev, CFG_ABS_INFO, axis as u8)? < 8 {
        return Ok((0, 0));
    }
    let min = dev.config_read32(CFG_DATA)? as i32;
    let max = dev.config_read32(CFG_DATA + 4)? as i32;
    Ok((min, max))
}

fn main(_: u64) -> i32 {
    let base = match rt::virtio::driver_base(BASE, [IRQ_BIT]) {
        Ok(b) => b,
        Err(e) => {
            println!("virtio-input: {e}");
            return 1;
        }
    };
    let [irq] = base.irq_caps;
    let mut driver = match Driver::start(base.platform, irq) {
        Ok(d) => d,
        Err(e) => {
            println!("virtio-input: FAILED: {e}");
            return 1;
        }
    };
    input::serve_one::<Pointer>("virtio-input", SESSION_SLOT, |_, session| {
        driver.interrupt(session)
    })
}
