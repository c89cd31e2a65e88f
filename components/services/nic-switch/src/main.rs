//! nic-switch: several clients on one network interface (Genode's
//! `nic_bridge`). It holds one Nic session at the driver (the *uplink*)
//! and serves a Nic session of its own to each client, with a MAC address
//! of its own ([`client_mac`]: `02:00:00:00:00:NN`, locally administered,
//! NN the session's window from 1), and forwards frames by destination
//! MAC:
//!
//! - from a client: to another client whose MAC it names (not out of the
//!   uplink), else out of the uplink; broadcast and multicast to both the
//!   uplink and every other client. A frame whose source is not the
//!   client's own MAC is refused (`nic::STATUS_SOURCE`): no client speaks
//!   for another;
//! - from the uplink: to the client whose MAC it names; broadcast and
//!   multicast to every client; unicast to nobody's MAC is dropped.
//!
//! So a client never sees another's unicast traffic (QEMU's virtio-net is
//! promiscuous, so the uplink receives every client's frames, and the
//! switch is what keeps them apart). Each hop copies the frame once —
//! from one stream into another, as Genode's bridge does; the driver
//! below writes into the uplink's stream in place.
//!
//! Flow: a frame a client sends is acknowledged once it is in the uplink's
//! stream; while that stream is full, it waits ([`Switch::pending`], in
//! order) and the client's stream with it — backpressure, not loss. A
//! frame for a client whose receive stream is full is dropped (counted),
//! as a full NIC drops: the client's stack retransmits.
//!
//! One thread serves the sessions and the clients' signals; the uplink's
//! notification — made by the driver, so it cannot be the thread's bound
//! one too — is waited on by a relay thread ([`relay`]) that signals a
//! context of the main thread. Its scenario grants it `own = ["thread",
//! "cspace", "vspace"]` (binding its notification, the relay thread,
//! mapping streams).
//!
//! When the driver stops (killed, faulted: init restarts it), the relay's
//! wait ends with the parent's `PROVIDER_GONE`; it tells the main thread
//! ([`UPLINK_GONE`]) and waits for it to reconnect (`NicLink::reconnect`,
//! which waits out the driver's restart). The clients keep their sessions
//! meanwhile; frames that were in the old uplink's streams are lost, as
//! on a link that went down, and the clients' protocols retransmit
//! (`tests/nic-switch-kill.toml`).
//!
//! Not yet: a MAC per client from the config, VLANs, per-client rate
//! limits.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::collections::VecDeque;
use alloc::rc::Rc;
use core::cell::RefCell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rt::abi::caddr::own;
use rt::abi::{MsgInfo, ObjectType};
use rt::interfaces::child;
use rt::println;
use rt::session::nic::{self, Mac, Nic, NicInfo, NicLink, NicServed, STREAM_BYTES};
use rt::session::{self, Donated, Label, Provider, SessionTable};
use rt::signal::Signals;
use rt::stream::Taken;
use rt::syscall::{self, Words};

rt::entry!(main);

const UPLINK: u32 = child::FIRST_FREE;
const UPLINK_BLOCK: u32 = UPLINK + 1;
const UPLINK_TABLE: u32 = UPLINK + 2;
const UPLINK_STREAM: [u32; 3] = [UPLINK + 3, UPLINK + 4, UPLINK + 5];
const NOTIFY: u32 = UPLINK + 6;
/// The uplink's signal context (the relay thread signals it).
const UPLINK_CONTEXT: u32 = UPLINK + 7;
/// The relay waits on it while the main thread reconnects.
const RESUME: u32 = UPLINK + 8;
const RELAY_THREAD: u32 = UPLINK + 9;
const RELAY_FRAMES: u32 = RELAY_THREAD + 1;
const FIRST_SESSION_SLOT: u32 = RELAY_FRAMES + rt::thread::PAGES as u32;
/// At most this many clients at once.
const MAX_SESSIONS: usize = 8;
const END_SESSION_SLOT: u32 = FIRST_SESSION_SLOT + 2 * MAX_SESSIONS as u32;

/// The relay thread's priority: the scenario default, so the switch
/// itself must run at 100 or above (a thread may not place one above
/// itself).
const RELAY_PRIORITY: u8 = 100;

const UPLINK_VA: u64 = 0x40_0000_0000;
/// Session window `i`'s streams.
const CLIENT_VA: u64 = 0x50_0000_0000;

type SharedSignals = Rc<RefCell<Signals<SessionTable<Client>>>>;

/// The relay thread's notifications: the uplink's (waited on) and the
/// main thread's context (signalled). Set before it starts.
static RELAY_WAIT: AtomicU64 = AtomicU64::new(0);
static RELAY_SIGNAL: AtomicU64 = AtomicU64::new(0);
/// The relay saw the driver stop: the main thread reconnects, then clears
/// it and signals [`RESUME`].
static UPLINK_GONE: AtomicBool = AtomicBool::new(false);

fn main(_: u64) -> i32 {
    let uplink = match open_uplink() {
        Ok(u) => u,
        Err(e) => {
            println!("nic-switch: the uplink's Nic session: {e}");
            return 1;
        }
    };
    let info = uplink.info();
    let notify = own(NOTIFY);
    let made = syscall::retype(own(child::UNTYPED), ObjectType::Notification, 0, notify, 1)
        .and_then(|()| {
            syscall::retype(
                own(child::UNTYPED),
                ObjectType::Notification,
                0,
                own(RESUME),
                1,
            )
        })
        .and_then(|()| syscall::bind_notification(own(child::OWN_THREAD), notify));
    if let Err(e) = made {
        println!("nic-switch: notification: {e}");
        return 1;
    }
    let wait_on = uplink.notifications().own;
    let switch = Rc::new(RefCell::new(Switch {
        up: uplink,
        info,
        windows: [None; MAX_SESSIONS],
        pending: VecDeque::new(),
        next_id: 1,
        dropped: 0,
    }));
    let signals: SharedSignals = Rc::new(RefCell::new(Signals::new(notify)));
    let on_uplink = switch.clone();
    let context = signals
        .borrow_mut()
        .register(own(UPLINK_CONTEXT), move |table| {
            on_uplink.borrow_mut().uplink_ready(table)
        });
    let context = match context {
        Ok(c) => c,
        Err(e) => {
            println!("nic-switch: the uplink's signal context: {e}");
            return 1;
        }
    };
    RELAY_WAIT.store(wait_on, Ordering::SeqCst);
    RELAY_SIGNAL.store(context.cap, Ordering::SeqCst);
    let relay_thread = rt::thread::spawn(
        relay,
        0,
        rt::thread::Slots {
            thread: own(RELAY_THREAD),
            frames: own(RELAY_FRAMES),
        },
        rt::thread::Placement {
            priority: RELAY_PRIORITY,
            cpu: rt::cpu::set().nth(0).unwrap_or(0),
            fault_endpoint: rt::abi::caddr::NULL_SLOT,
        },
    );
    if let Err(e) = relay_thread {
        println!("nic-switch: the relay thread: {e}");
        return 1;
    }
    println!(
        "nic-switch: uplink {} (MTU {}, link {}); clients get 02:00:00:00:00:01..{:02x}",
        info.mac,
        info.mtu,
        if info.link_up { "up" } else { "down" },
        MAX_SESSIONS
    );
    // Frames that arrived before the relay ran.
    let _ = context.signal();
    let provider = Provider::<Nic, Client>::new(FIRST_SESSION_SLOT, END_SESSION_SLOT);
    let for_new = (switch.clone(), signals.clone());
    provider.serve_with_signals(
        &signals,
        move |label, donated| open_session(&for_new.0, &for_new.1, label, donated),
        move |_, client, op, words| request(client, op, words),
    )
}

/// Waits on the uplink's notification and passes each wake-up on to the
/// main thread's context: the main thread arms the uplink's streams, so a
/// wake-up that comes while it works is not lost (the word keeps it).
/// When the driver stops, it says so ([`UPLINK_GONE`]) and waits until
/// the main thread has reconnected: the new uplink's notification is in
/// the same slot.
extern "C" fn relay(_: u64) -> ! {
    let wait_on = RELAY_WAIT.load(Ordering::SeqCst);
    let signal = RELAY_SIGNAL.load(Ordering::SeqCst);
    loop {
        let gone = match syscall::wait(wait_on) {
            Ok(word) => word & rt::interfaces::session::PROVIDER_GONE != 0,
            // The notification itself is gone (a reconnect is under way).
            Err(_) => true,
        };
        if gone {
            UPLINK_GONE.store(true, Ordering::SeqCst);
        }
        let _ = syscall::signal(signal);
        if gone && syscall::wait(own(RESUME)).is_err() {
            syscall::thread_exit(1);
        }
    }
}

/// The uplink's session and streams.
fn open_uplink() -> Result<NicLink, alloc::string::String> {
    // SAFETY: UPLINK_VA.. is used by nothing else of this program.
    unsafe { NicLink::connect(UPLINK, UPLINK_BLOCK, UPLINK_TABLE, UPLINK_STREAM, UPLINK_VA) }
}

/// Session window `window`'s MAC address.
fn client_mac(window: usize) -> Mac {
    Mac([0x02, 0, 0, 0, 0, window as u8 + 1])
}

/// A new client's session, in the first free window.
fn open_session(
    switch: &Rc<RefCell<Switch>>,
    signals: &SharedSignals,
    label: &Label,
    donated: Option<Donated>,
) -> Result<Client, u64> {
    let donated = donated.ok_or(rt::interfaces::session::REFUSED_QUOTA)?;
    let s = switch.borrow_mut();
    let Some(window) = s.windows.iter().position(Option::is_none) else {
        println!(
            "nic-switch: session for {} refused: {MAX_SESSIONS} clients already",
            label.as_str()
        );
        return Err(session::REFUSED_FULL);
    };
    let id = s.next_id;
    let mac = client_mac(window);
    drop(s);
    let va = CLIENT_VA + window as u64 * STREAM_BYTES as u64;
    let on_signal = switch.clone();
    // SAFETY: window `window` is free (checked above) and taken now.
    let served = unsafe {
        NicServed::open(donated, signals, va, move |table| {
            on_signal.borrow_mut().client_signalled(table, id)
        })
    }
    .map_err(|why| {
        println!("nic-switch: session for {}: {why}", label.as_str());
        nic::REFUSED
    })?;
    let mut s = switch.borrow_mut();
    s.windows[window] = Some(mac);
    s.next_id += 1;
    println!("nic-switch: session {id} for {}: MAC {mac}", label.as_str());
    Ok(Client {
        id,
        window,
        mac,
        served,
        switch: switch.clone(),
    })
}

/// A request on a client's session.
fn request(client: &mut Client, op: u64, words: Words) -> (MsgInfo, Words) {
    match op {
        nic::INFO => {
            let s = client.switch.borrow();
            let info = NicInfo {
                mac: client.mac,
                ..s.info
            };
            rt::server::answer(nic::OK, info.words())
        }
        nic::STREAM => client.served.stream_reply(words[0]),
        _ => rt::server::answer(nic::REFUSED, [0; 4]),
    }
}

/// A client's session.
pub struct Client {
    id: u64,
    window: usize,
    mac: Mac,
    served: NicServed<SessionTable<Client>>,
    switch: Rc<RefCell<Switch>>,
}

impl Drop for Client {
    fn drop(&mut self) {
        let mut s = self.switch.borrow_mut();
        s.windows[self.window] = None;
        let id = self.id;
        // Its frames waiting for the uplink go with it.
        s.pending.retain(|(p, _)| *p != id);
        println!("nic-switch: session {id} closed");
    }
}

/// The uplink and the clients' addresses.
pub struct Switch {
    up: NicLink,
    info: NicInfo,
    /// Each session window's MAC, while a session holds it.
    windows: [Option<Mac>; MAX_SESSIONS],
    /// Clients' frames for the uplink, waiting for room in its stream, in
    /// the order they came: (session id, packet).
    pending: VecDeque<(u64, Taken)>,
    next_id: u64,
    /// Frames dropped: a client's receive stream full, or nobody's MAC.
    dropped: u64,
}

/// Where a frame goes.
fn is_group(dst: &[u8]) -> bool {
    dst.first().is_some_and(|b| b & 1 != 0)
}

impl Switch {
    /// Client `id` signalled: its frames forwarded and acknowledged, its
    /// given-back receive buffers released; until its streams are armed.
    fn client_signalled(&mut self, table: &mut SessionTable<Client>, id: u64) {
        loop {
            let Some(c) = find(table, id) else {
                return;
            };
            if c.served.broken() {
                return;
            }
            // Its receive buffers back.
            while let Ok(Some(p)) = c.served.rx.get_ack() {
                let _ = c.served.rx.release(p);
            }
            let mut frames = alloc::vec::Vec::new();
            loop {
                match c.served.tx.sink.get() {
                    Ok(Some(taken)) => frames.push(taken),
                    Ok(None) => break,
                    Err(e) if e.is_fatal() => {
                        println!("nic-switch: session {id}: stream broken: {e}");
                        c.served.set_broken();
                        return;
                    }
                    Err(_) => {}
                }
            }
            for taken in frames {
                self.forward_from_client(table, id, taken);
            }
            self.publish(table);
            let Some(c) = find(table, id) else {
                return;
            };
            if !c.served.arm(false) {
                return;
            }
        }
    }

    /// Client `id`'s frame `taken`: checked, forwarded, acknowledged (or
    /// kept waiting for room in the uplink).
    fn forward_from_client(&mut self, table: &mut SessionTable<Client>, id: u64, taken: Taken) {
        let Some(c) = find(table, id) else {
            return;
        };
        if let Err(status) = nic::check(&taken.packet(), self.info.mtu) {
            return c.served.tx.ack(taken, status);
        }
        let mut frame = [0u8; nic::STREAM_BLOCK as usize];
        let len = match c.served.tx.sink.payload(&taken) {
            Ok(bytes) if bytes[6..12] == c.mac.0 => {
                frame[..bytes.len()].copy_from_slice(bytes);
                bytes.len()
            }
            Ok(_) => return c.served.tx.ack(taken, nic::STATUS_SOURCE),
            Err(_) => return c.served.tx.ack(taken, nic::STATUS_IO),
        };
        let frame = &frame[..len];
        let dst = &frame[..6];
        let group = is_group(dst);
        let to_client = (!group)
            .then(|| {
                self.windows
                    .iter()
                    .position(|m| m.is_some_and(|m| m.0 == dst))
            })
            .flatten();
        // To the other clients: each group frame, or the one it names.
        for (_, other) in table.iter_mut() {
            if other.id != id && (group || Some(other.window) == to_client) {
                self.dropped += u64::from(!deliver(other, frame));
            }
        }
        if to_client.is_some() {
            if let Some(c) = find(table, id) {
                c.served.tx.ack(taken, nic::STATUS_OK);
            }
            return;
        }
        // Out of the uplink, in order behind what waits already.
        if !self.pending.is_empty() || !self.send_up(frame) {
            return self.pending.push_back((id, taken));
        }
        if let Some(c) = find(table, id) {
            c.served.tx.ack(taken, nic::STATUS_OK);
        }
    }

    /// Puts `frame` into the uplink's stream: `false` when it is full.
    fn send_up(&mut self, frame: &[u8]) -> bool {
        match self.up.send(frame) {
            Ok(_) => true,
            Err(nic::NicError::Packet(
                rt::stream::Error::BufferFull | rt::stream::Error::RingFull,
            )) => false,
            // The uplink broke: the frame is lost, as on a dead link.
            Err(_) => true,
        }
    }

    /// The relay thread signalled: the uplink's acknowledgements taken,
    /// waiting frames sent, received frames delivered; until its streams
    /// are armed.
    fn uplink_ready(&mut self, table: &mut SessionTable<Client>) {
        if UPLINK_GONE.load(Ordering::SeqCst) {
            self.reconnect();
        }
        loop {
            while let Ok(Some(_)) = self.up.sent() {}
            while let Some((id, taken)) = self.pending.pop_front() {
                let Some(c) = find(table, id) else {
                    continue;
                };
                let sent = match c.served.tx.sink.payload(&taken) {
                    Ok(bytes) => {
                        let mut frame = [0u8; nic::STREAM_BLOCK as usize];
                        frame[..bytes.len()].copy_from_slice(bytes);
                        let n = bytes.len();
                        self.send_up(&frame[..n])
                    }
                    Err(_) => true,
                };
                if !sent {
                    self.pending.push_front((id, taken));
                    break;
                }
                if let Some(c) = find(table, id) {
                    c.served.tx.ack(taken, nic::STATUS_OK);
                }
            }
            loop {
                let taken = match self.up.receive() {
                    Ok(Some(t)) => t,
                    Ok(None) => break,
                    Err(e) => {
                        println!("nic-switch: the uplink's receive stream: {e}");
                        return;
                    }
                };
                if let Ok(frame) = self.up.frame(&taken) {
                    let dst = &frame[..6.min(frame.len())];
                    let group = is_group(dst);
                    let mut delivered = false;
                    for (_, c) in table.iter_mut() {
                        if group || c.mac.0 == dst {
                            delivered |= deliver(c, frame);
                        }
                    }
                    self.dropped += u64::from(!delivered);
                }
                let _ = self.up.done(taken);
            }
            self.publish(table);
            let acks = self.up.tx.arm(!self.pending.is_empty());
            let frames = self.up.rx.arm(false);
            match (acks, frames) {
                (Ok(false), Ok(false)) => return,
                (Ok(_), Ok(_)) => {}
                _ => {
                    println!("nic-switch: the uplink's streams broke");
                    return;
                }
            }
        }
    }

    /// The driver stopped: a fresh uplink (waiting out its restart); the
    /// relay goes on waiting on it. What was in the old uplink's streams is
    /// lost; the clients' frames still waiting go out of the new one.
    fn reconnect(&mut self) {
        println!("nic-switch: the uplink's driver stopped; reconnecting");
        // The frames the driver took and never acknowledged: lost, unless
        // the device sent them before the driver stopped (nobody can
        // tell). What is lost the clients' protocols send again.
        println!(
            "nic-switch: {} frames sent up were not acknowledged",
            self.up.tx.in_flight()
        );
        match self.up.reconnect() {
            Ok(()) => {
                println!(
                    "nic-switch: uplink back ({}); {} client frames waiting",
                    self.up.info().mac,
                    self.pending.len()
                );
                UPLINK_GONE.store(false, Ordering::SeqCst);
                let _ = syscall::signal(own(RESUME));
            }
            Err(e) => println!("nic-switch: reconnecting the uplink failed: {e}"),
        }
    }

    /// Publishes the uplink's streams and every client's.
    fn publish(&mut self, table: &mut SessionTable<Client>) {
        let _ = self.up.flush();
        for (_, c) in table.iter_mut() {
            if c.served.publish().is_err() {
                c.served.set_broken();
            }
        }
    }
}

/// Copies `frame` into client `c`'s receive stream (submitted, published
/// later): `false` if its stream has no room (the frame is dropped).
fn deliver(c: &mut Client, frame: &[u8]) -> bool {
    if c.served.broken() {
        return false;
    }
    let Ok(mut packet) = c.served.rx.alloc(frame.len() as u32) else {
        return false;
    };
    let copied = c
        .served
        .rx
        .payload_mut(&packet)
        .map(|p| p.copy_from_slice(frame));
    packet.op = nic::OP_RECEIVED;
    if copied.and_then(|()| c.served.rx.submit(packet)).is_err() {
        let _ = c.served.rx.release(packet);
        return false;
    }
    true
}

/// The session of id `id`, if still open.
fn find(table: &mut SessionTable<Client>, id: u64) -> Option<&mut Client> {
    table.iter_mut().map(|(_, c)| c).find(|c| c.id == id)
}
