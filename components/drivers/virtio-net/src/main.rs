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

use alloc::rc::Rc;
use core::cell::RefCell;

use rt::abi::MsgInfo;
use rt::interfaces::child;
use rt::println;
use rt::session::nic::{self, Nic};
use rt::session::{self, Provider, SessionTable};
use rt::signal::Signals;
use rt::syscall::Words;

use driver::{Client, Driver};

rt::entry!(main);

/// The Platform session, its donation, the notification and the
/// interrupts' badged capabilities (`rt::virtio::driver_base`).
const BASE: u32 = child::FIRST_FREE;
/// The provider's slots: two for its one session.
const SESSION_SLOT: u32 = BASE + 8;

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
    let base = match rt::virtio::driver_base(BASE, [RX_BIT, TX_BIT]) {
        Ok(b) => b,
        Err(e) => {
            println!("virtio-net: {e}");
            return 1;
        }
    };
    let [rx_irq, tx_irq] = base.irq_caps;
    let driver = match Driver::start(base.platform, rx_irq, tx_irq, CPU) {
        Ok(d) => Rc::new(RefCell::new(d)),
        Err(e) => {
            println!("virtio-net: FAILED: {e}");
            return 1;
        }
    };
    let signals: SharedSignals = Rc::new(RefCell::new(Signals::new(base.notify)));
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
        move |label, donated| {
            let make = |d| Client::open(&for_new.0, &for_new.1, d);
            session::open_donated("virtio-net", label, donated, make, Client::id)
        },
        move |_, client, op, words| request(&driver, client, op, words),
    )
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
