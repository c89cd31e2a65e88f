//! virtio-blk: the block driver. It drives the one virtio block device
//! its Platform session gives it (`devices = [{ pci = "1af4:1042" }]`)
//! through the virtio transport (`rt::virtio`) and serves it as Block
//! sessions (`rt::session::block` has the protocol) — usually to one
//! client, the partition service, but any number may be open.
//!
//! One thread serves everything (Genode's entrypoint): its notification
//! is bound to it, so one `Recv` returns a session request, a client's
//! stream signal (one signal context per session) or the queue's MSI-X
//! interrupt (bit [`IRQ_BIT`]). See [`driver`] for the request path.
//!
//! Memory: the device's rings, the request headers and a bounce area of
//! [`driver::BOUNCE_BYTES`] come from the Platform session's DMA memory;
//! each session's stream frame from that session's donation (the client
//! pays). Data is copied once in the driver, between the client's stream
//! buffer and the bounce area (docs/drivers.md, "Copies on the bulk
//! paths": the zero-copy path needs bus addresses of the client's frames,
//! which only the platform service may ask the kernel for).
//!
//! Bad input — a request beyond the device's end, not a whole number of
//! blocks, too large, a write to a read-only device, an unknown op, a
//! descriptor outside the stream buffer — is refused for that request
//! with a status (the client gets it in the acknowledgement) and the
//! driver goes on; a device answering nonsense breaks the queue (logged),
//! and every request in flight fails with `STATUS_IO`.
//!
//! Its scenario grants it `own = ["thread", "vspace"]` (binding its
//! notification, mapping BARs, DMA memory and stream frames).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

mod driver;

use alloc::rc::Rc;
use core::cell::RefCell;

use rt::abi::MsgInfo;
use rt::interfaces::child;
use rt::println;
use rt::session::block::{self, Block};
use rt::session::{self, Provider, SessionTable};
use rt::signal::Signals;
use rt::syscall::Words;

use driver::{Client, Driver};

rt::entry!(main);

/// The Platform session, its donation, the notification and the
/// interrupt's badged capability (`rt::virtio::driver_base`).
const BASE: u32 = child::FIRST_FREE;
/// The provider's slots: two per session.
const FIRST_SESSION_SLOT: u32 = BASE + 8;
/// At most this many sessions at once.
pub const MAX_SESSIONS: u32 = 8;
const END_SESSION_SLOT: u32 = FIRST_SESSION_SLOT + 2 * MAX_SESSIONS;

/// The interrupt's bit in the notification word (sessions' contexts take
/// the others).
const IRQ_BIT: u32 = 0;

/// The CPU the interrupt goes to (the driver's: one CPU serves).
const CPU: u32 = 0;

/// The signal contexts, shared by the provider loop and the sessions
/// (which register and unregister theirs).
pub type SharedSignals = Rc<RefCell<Signals<SessionTable<Client>>>>;

fn main(_: u64) -> i32 {
    let base = match rt::virtio::driver_base(BASE, [IRQ_BIT]) {
        Ok(b) => b,
        Err(e) => {
            println!("virtio-blk: {e}");
            return 1;
        }
    };
    let [irq_cap] = base.irq_caps;
    let driver = match Driver::start(base.platform, irq_cap, CPU) {
        Ok(d) => Rc::new(RefCell::new(d)),
        Err(e) => {
            println!("virtio-blk: FAILED: {e}");
            return 1;
        }
    };
    let signals: SharedSignals = Rc::new(RefCell::new(Signals::new(base.notify)));
    let on_irq = driver.clone();
    if let Err(e) = signals
        .borrow_mut()
        .on(IRQ_BIT, move |table| on_irq.borrow_mut().interrupt(table))
    {
        println!("virtio-blk: interrupt handler: {e}");
        return 1;
    }
    let provider = Provider::<Block, Client>::new(FIRST_SESSION_SLOT, END_SESSION_SLOT);
    let for_new = (driver.clone(), signals.clone());
    provider.serve_with_signals(
        &signals,
        move |label, donated| {
            let make = |d| Client::open(&for_new.0, &for_new.1, d);
            session::open_donated("virtio-blk", label, donated, make, Client::id)
        },
        move |_, client, op, words| request(&driver, client, op, words),
    )
}

/// A request on `client`'s session.
fn request(
    driver: &Rc<RefCell<Driver>>,
    client: &mut Client,
    op: u64,
    words: Words,
) -> (MsgInfo, Words) {
    match op {
        block::INFO => rt::server::answer(block::OK, driver.borrow().info().words()),
        block::STREAM => client.stream_reply(words[0]),
        _ => rt::server::answer(block::REFUSED, [0; 4]),
    }
}
