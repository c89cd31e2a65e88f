//! virtio-net: the network driver. It drives the one virtio network
//! device its Platform session gives it (`devices = [{ pci = "1af4:1041"
//! }]`) through the virtio transport (`rt::virtio`) and serves it as a
//! Nic session (`rt::session::nic` has the protocol) — to one client at a
//! time (the switch, later); a second open is refused
//! (`rt::session::REFUSED_FULL`) while one is open.
//!
//! One thread serves everything (Genode's entrypoint): its notification
//! is bound to it, so one `Recv` returns a session request, the client's
//! stream signal, or one of the queues' MSI-X interrupts (receive on bit
//! [`RX_BIT`], transmit on [`TX_BIT`]). See [`driver`] for the paths.
//!
//! Memory: the device's rings and the virtio-net headers come from the
//! Platform session's DMA memory; the frames themselves live in the
//! session's stream frame (the client's donation), which the device
//! reads and writes in place — the driver learns its bus address with the
//! platform's `TRANSLATE` capability and refuses to start without it.
//!
//! Its scenario grants it `own = ["thread", "vspace"]` (binding its
//! notification, mapping BARs, DMA memory and the stream frame).
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
use rt::session::nic::{self, Nic};
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
/// The thread's notification: the session's signal context and the
/// interrupts.
const NOTIFY: u32 = PLATFORM + 3;
/// The interrupts' badged capabilities.
const RX_IRQ_CAP: u32 = PLATFORM + 4;
const TX_IRQ_CAP: u32 = PLATFORM + 5;
/// The provider's slots: two for its one session.
const SESSION_SLOT: u32 = PLATFORM + 8;

/// The receive queue's interrupt bit in the notification word.
const RX_BIT: u32 = 0;
/// The transmit queue's.
const TX_BIT: u32 = 1;

/// The CPU the interrupts go to (the driver's: one CPU serves).
const CPU: u32 = 0;

/// The signal contexts, shared by the provider loop and the session
/// (which registers and unregisters its own).
pub type SharedSignals = Rc<RefCell<Signals<SessionTable<Client>>>>;

fn main(_: u64) -> i32 {
    let platform = match open_platform() {
        Ok(p) => p,
        Err(e) => {
            println!("virtio-net: Platform session: {e}");
            return 1;
        }
    };
    // The device borrows the session for as long as the driver runs.
    let platform: &'static Session<Platform> = Box::leak(Box::new(platform));
    let notify = own(NOTIFY);
    let made = syscall::retype(own(child::UNTYPED), ObjectType::Notification, 0, notify, 1)
        .and_then(|()| syscall::bind_notification(own(child::OWN_THREAD), notify))
        .and_then(|()| syscall::cap_mint(notify, own(RX_IRQ_CAP), Rights::WRITE, 1 << RX_BIT))
        .and_then(|()| syscall::cap_mint(notify, own(TX_IRQ_CAP), Rights::WRITE, 1 << TX_BIT));
    if let Err(e) = made {
        println!("virtio-net: notification: {e}");
        return 1;
    }
    let driver = match Driver::start(platform, own(RX_IRQ_CAP), own(TX_IRQ_CAP), CPU) {
        Ok(d) => Rc::new(RefCell::new(d)),
        Err(e) => {
            println!("virtio-net: FAILED: {e}");
            return 1;
        }
    };
    let signals: SharedSignals = Rc::new(RefCell::new(Signals::new(notify)));
    let (on_rx, on_tx) = (driver.clone(), driver.clone());
    let rx = signals
        .borrow_mut()
        .on(RX_BIT, move |table| on_rx.borrow_mut().rx_interrupt(table));
    let tx = signals
        .borrow_mut()
        .on(TX_BIT, move |table| on_tx.borrow_mut().tx_interrupt(table));
    if let Err(e) = rx.and(tx) {
        println!("virtio-net: interrupt handlers: {e}");
        return 1;
    }
    // Slots for one session: a second open is refused (REFUSED_FULL).
    let provider = Provider::<Nic, Client>::new(SESSION_SLOT, SESSION_SLOT + 2);
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

/// The session for `label`: its streams made from `donated`, its signal
/// context registered, receive buffers given to the device; refused with
/// `interfaces::session::REFUSED_QUOTA` when the donation cannot hold the
/// streams.
fn open_session(
    driver: &Rc<RefCell<Driver>>,
    signals: &SharedSignals,
    label: &Label,
    donated: Option<Donated>,
) -> Result<Client, u64> {
    let donated = donated.ok_or(rt::interfaces::session::REFUSED_QUOTA)?;
    let client = Client::open(driver, signals, donated).map_err(|e| {
        println!("virtio-net: session for {}: {e}", label.as_str());
        rt::interfaces::session::REFUSED_QUOTA
    })?;
    println!("virtio-net: session {} for {}", client.id(), label.as_str());
    Ok(client)
}

/// A request on the session.
fn request(
    driver: &Rc<RefCell<Driver>>,
    client: &mut Client,
    op: u64,
    words: Words,
) -> (MsgInfo, Words) {
    match op {
        nic::INFO => rt::server::answer(nic::OK, driver.borrow().info().words()),
        nic::STREAM => client.stream_reply(words[0]),
        _ => rt::server::answer(nic::REFUSED, [0; 4]),
    }
}
