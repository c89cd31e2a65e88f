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

use alloc::boxed::Box;
use alloc::rc::Rc;
use core::cell::RefCell;

use rt::abi::caddr::own;
use rt::abi::{MsgInfo, ObjectType, Rights};
use rt::interfaces::child;
use rt::println;
use rt::session::block::{self, Block};
use rt::session::platform::Platform;
use rt::session::{self, Donated, Donor, Label, Provider, Session, SessionTable};
use rt::signal::Signals;
use rt::syscall::{self, Words};

use driver::{Client, Driver};

rt::entry!(main);

/// The Platform session and its donation.
const PLATFORM: u32 = child::FIRST_FREE;
const PLATFORM_BLOCK: u32 = PLATFORM + 1;
const PLATFORM_TABLE: u32 = PLATFORM + 2;
/// The thread's notification: signal contexts and the interrupt.
const NOTIFY: u32 = PLATFORM + 3;
/// The interrupt's badged capability (bit [`IRQ_BIT`]).
const IRQ_CAP: u32 = PLATFORM + 4;
/// The provider's slots: two per session.
const FIRST_SESSION_SLOT: u32 = PLATFORM + 8;
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
    let platform = match open_platform() {
        Ok(p) => p,
        Err(e) => {
            println!("virtio-blk: Platform session: {e}");
            return 1;
        }
    };
    // The device borrows the session for as long as the driver runs.
    let platform: &'static Session<Platform> = Box::leak(Box::new(platform));
    let notify = own(NOTIFY);
    let made = syscall::retype(own(child::UNTYPED), ObjectType::Notification, 0, notify, 1)
        .and_then(|()| syscall::bind_notification(own(child::OWN_THREAD), notify))
        .and_then(|()| syscall::cap_mint(notify, own(IRQ_CAP), Rights::WRITE, 1 << IRQ_BIT));
    if let Err(e) = made {
        println!("virtio-blk: notification: {e}");
        return 1;
    }
    let driver = match Driver::start(platform, own(IRQ_CAP), CPU) {
        Ok(d) => Rc::new(RefCell::new(d)),
        Err(e) => {
            println!("virtio-blk: FAILED: {e}");
            return 1;
        }
    };
    let signals: SharedSignals = Rc::new(RefCell::new(Signals::new(notify)));
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
        move |label, donated| open_session(&for_new.0, &for_new.1, label, donated),
        move |_, client, op, words| request(&driver, client, op, words),
    )
}

/// Opens the Platform session, donating from the driver's own quota.
fn open_platform() -> Result<Session<Platform>, session::OpenError> {
    let donor =
        Donor::from_untyped::<Platform>(own(child::UNTYPED), PLATFORM_BLOCK, PLATFORM_TABLE)
            .map_err(session::OpenError::Donation)?;
    session::open_donating::<Platform>(PLATFORM, donor).map_err(|(e, _)| e)
}

/// A new session for `label`: its stream made from `donated`, its signal
/// context registered; refused with `interfaces::session::REFUSED_QUOTA`
/// when the donation cannot hold the stream.
fn open_session(
    driver: &Rc<RefCell<Driver>>,
    signals: &SharedSignals,
    label: &Label,
    donated: Option<Donated>,
) -> Result<Client, u64> {
    let donated = donated.ok_or(rt::interfaces::session::REFUSED_QUOTA)?;
    let client = Client::open(driver, signals, donated).map_err(|e| {
        println!("virtio-blk: session for {}: {e}", label.as_str());
        rt::interfaces::session::REFUSED_QUOTA
    })?;
    println!("virtio-blk: session {} for {}", client.id(), label.as_str());
    Ok(client)
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
