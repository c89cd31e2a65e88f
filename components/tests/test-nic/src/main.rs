//! test-nic: a Nic session client checking its provider (the virtio-net
//! driver on QEMU's user network with `restrict=on`) — `tests/nic.toml`.
//! The frames are made by hand (`ucore::netcheck`); the guest is 10.0.2.15, the
//! user network's gateway 10.0.2.2.
//!
//! 1. The interface (`INFO`): MAC address, link, MTU; a second session
//!    while this one is open is refused.
//! 2. ARP: a request for 10.0.2.2, its reply (the gateway's MAC).
//! 3. ICMP echo to 10.0.2.2, then an ARP request as a fence: slirp answers
//!    frames in the order they come, synchronously, so the echo reply (if
//!    any) arrives before the fence's reply — no timeout needed to say
//!    whether it answered.
//! 4. DHCP: a DISCOVER, broadcast; slirp's OFFER (UDP, broadcast).
//! 5. A burst of [`BURST`] ARP requests, as many in flight as the stream
//!    holds: every one acknowledged as sent, every one answered.
//! 6. Bad transmit packets — too long, too short, an unknown op — each
//!    refused with its status while the driver goes on (an ARP after
//!    them is answered).
//! 7. [`AT_CLOSE`] frames submitted and the session closed (and opened
//!    again) without waiting for one acknowledgement: the driver takes
//!    its buffers back from the device before the close is answered, and
//!    in the next session an ARP is answered.
//! 8. A hostile hand on the streams (`rt::stream::hostile`): a transmit
//!    descriptor outside the buffer (dropped; the good one after it is
//!    sent), an acknowledgement of a receive buffer that is not out
//!    (dropped), then an impossible ring index, which breaks the session;
//!    the driver still answers `INFO`, the session closes (the driver logs
//!    what it dropped) and a new one works: ARP answered again.
//! 9. The link taken down and up again by the host (QEMU's `set_link`):
//!    `INFO` says so; an ARP after it is answered.
//!
//! With `arg` 1 it is one of two clients behind the switch
//! (`nic-switch`, `tests/nic-switch.toml`) and checks that instead
//! ([`behind_switch`]); with `arg` 2 a client behind the switch that
//! keeps asking the gateway while the driver is killed and restarted
//! (`tests/nic-switch-kill.toml`, [`across_restart`]); with `arg` 3 a
//! fuzzer behind the switch that sends [`FUZZ_FRAMES`] random and mutated
//! frames to the other client's MAC — the HTTP server's stack
//! (`tests/http-fuzz.toml`, [`fuzz`]).
//!
//! Prints `test-nic: N checks failed` and exits 0 when N is 0; every
//! failed check prints `FAILED`.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec::Vec;

use rt::check::Findings;
use rt::interfaces::child;
use rt::println;
use rt::session::nic::{self, Nic, NicClient, NicError};
use rt::session::{self, Session};
use rt::stream::hostile::{Control, Forger};
use rt::stream::{Notifications, Packet, Region, Ring, Sink, Source};
use rt::syscall;

use ucore::netcheck::{self as frames, Dotted, Ip, Mac};

rt::entry!(main);

const SESSION: u32 = child::FIRST_FREE;
const DONOR_BLOCK: u32 = SESSION + 1;
const DONOR_TABLE: u32 = SESSION + 2;
/// The streams' capabilities of the first, second and third session
/// (one open at a time, on the same donation).
const STREAM_SLOTS: [[u32; 3]; 3] = [
    [SESSION + 3, SESSION + 4, SESSION + 5],
    [SESSION + 6, SESSION + 7, SESSION + 8],
    [SESSION + 9, SESSION + 10, SESSION + 11],
];
/// The refused second session.
const SECOND: u32 = SESSION + 12;
/// `arg` 2's Timer session and its notification.
const TIMER: u32 = SESSION + 15;
const TIMER_NOTIFY: u32 = SESSION + 16;
const SECOND_BLOCK: u32 = SESSION + 13;
const SECOND_TABLE: u32 = SESSION + 14;
/// Where each session's streams are mapped (2 MiB aligned).
const STREAM_VA: [u64; 3] = [0x50_0000_0000, 0x50_0020_0000, 0x50_0040_0000];

/// The guest's address and the user network's gateway.
const ME: Ip = [10, 0, 2, 15];
const GATEWAY: Ip = [10, 0, 2, 2];
/// Frames in the burst.
pub const BURST: u32 = 200;
/// Frames published at once in the burst.
pub const BATCH: u32 = 32;
/// Frames in flight when the first session closes.
pub const AT_CLOSE: u32 = 100;

/// The client's ends and what it counted.
struct Net {
    nic: NicClient,
    mac: Mac,
    /// Transmit acknowledgements: OK, and the other statuses seen.
    sent_ok: u32,
    refused: Vec<u32>,
    /// Receive buffers given back.
    given_back: u32,
    /// Unicast frames received for another MAC than this interface's:
    /// none may come (the switch keeps clients' traffic apart).
    foreign: u32,
    /// Behind the switch: the other client's frame ([`is_hello`]) came.
    hello: bool,
}

impl Net {
    /// The client `nic` of interface `mac`, nothing counted yet.
    fn new(nic: NicClient, mac: Mac) -> Net {
        Net {
            nic,
            mac,
            sent_ok: 0,
            refused: Vec::new(),
            given_back: 0,
            foreign: 0,
            hello: false,
        }
    }

    /// Takes the transmit acknowledgements there are.
    fn take_acks(&mut self) -> Result<(), NicError> {
        while let Some((status, _)) = self.nic.sent()? {
            match status {
                nic::STATUS_OK => self.sent_ok += 1,
                s => self.refused.push(s),
            }
        }
        Ok(())
    }

    /// Sends `frame`, waiting for room while the stream is full.
    fn send(&mut self, frame: &[u8]) -> Result<(), NicError> {
        loop {
            match self.nic.send(frame) {
                Ok(_) => return Ok(()),
                Err(NicError::Packet(
                    rt::stream::Error::BufferFull | rt::stream::Error::RingFull,
                )) => {
                    self.take_acks()?;
                    self.drop_frames()?;
                    self.nic.wait(true)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Gives back every received frame there is, unread.
    fn drop_frames(&mut self) -> Result<(), NicError> {
        while let Some(t) = self.nic.receive()? {
            self.count_foreign(&t)?;
            self.nic.done(t)?;
            self.given_back += 1;
        }
        Ok(())
    }

    /// Publishes, then reads frames (each to `f`) until `f` says `true`;
    /// acknowledgements are taken meanwhile.
    fn until(&mut self, mut f: impl FnMut(&[u8]) -> bool) -> Result<(), NicError> {
        self.nic.flush()?;
        loop {
            self.take_acks()?;
            while let Some(t) = self.nic.receive()? {
                self.count_foreign(&t)?;
                let done = f(self.nic.frame(&t)?);
                self.nic.done(t)?;
                self.given_back += 1;
                if done {
                    return self.nic.flush();
                }
            }
            self.nic.wait(false)?;
        }
    }

    /// Counts received frame `t` if it is unicast for another MAC.
    fn count_foreign(&mut self, t: &rt::stream::Taken) -> Result<(), NicError> {
        let f = self.nic.frame(t)?;
        let dst = &f[..6.min(f.len())];
        if dst != self.mac && dst.first().is_some_and(|b| b & 1 == 0) {
            self.foreign += 1;
        }
        self.hello |= is_hello(f, self.mac);
        Ok(())
    }

    /// Every frame sent is acknowledged.
    fn drain(&mut self) -> Result<(), NicError> {
        self.nic.flush()?;
        while self.nic.tx.in_flight() > 0 {
            self.take_acks()?;
            self.drop_frames()?;
            if self.nic.tx.in_flight() > 0 {
                self.nic.wait(false)?;
            }
        }
        self.nic.flush()
    }

    /// Asks for the gateway's MAC: the answer.
    fn arp(&mut self) -> Result<Mac, NicError> {
        self.send(&frames::arp_request(self.mac, ME, GATEWAY))?;
        let mut got = None;
        self.until(|f| {
            got = frames::arp_reply(f, GATEWAY, ME);
            got.is_some()
        })?;
        Ok(got.unwrap_or_default())
    }
}

fn main(arg: u64) -> i32 {
    let mut c = Findings::new();
    let ran = match arg {
        1 => behind_switch(&mut c),
        2 => across_restart(&mut c),
        3 => fuzz(&mut c),
        _ => run(&mut c),
    };
    match ran {
        Ok(()) => {}
        Err(e) => c.expect(false, format_args!("{e}")),
    }
    c.finish()
}

fn run(c: &mut Findings) -> Result<(), alloc::string::String> {
    use alloc::format;
    let session = session::open_from_quota::<Nic>(SESSION, DONOR_BLOCK, DONOR_TABLE)
        .map_err(|e| format!("Nic session: {e}"))?;
    let info = session.info().map_err(|e| format!("INFO: {e}"))?;
    c.expect(
        info.link_up && info.mtu == nic::MTU,
        format_args!(
            "interface: MAC {}, link {}, MTU {}",
            info.mac,
            if info.link_up { "up" } else { "down" },
            info.mtu
        ),
    );
    let second = session::open_from_quota::<Nic>(SECOND, SECOND_BLOCK, SECOND_TABLE);
    c.expect(
        second.is_err(),
        format_args!(
            "a second session while one is open: {}",
            match &second {
                Ok(_) => "opened",
                Err(e) => e.as_str(),
            }
        ),
    );
    let mut session = session;
    let mut net = streams(&session, 0)?;
    exchanges(&mut net, c).map_err(|e| format!("exchanges: {e}"))?;
    burst(&mut net, c).map_err(|e| format!("burst: {e}"))?;
    refusals(&mut net, c).map_err(|e| format!("refusals: {e}"))?;
    // A session closed with frames in flight: the next one works.
    let pending = close_in_flight(net, &mut session)?;
    let mut net = streams(&session, 1)?;
    let gateway = net.arp().map_err(|e| format!("ARP: {e}"))?;
    c.expect(
        gateway != [0; 6],
        format_args!(
            "a session closed with {pending} frames submitted and none acknowledged; in the next, ARP answered"
        ),
    );
    net.drain().map_err(|e| format!("drain: {e}"))?;
    hostile(net, STREAM_VA[1])?;
    // The driver still serves: INFO, then the session closes and a new
    // one works.
    let info_again = session.info();
    c.expect(
        info_again.is_ok(),
        format_args!(
            "after the broken stream, INFO still answered: {}",
            info_again.is_ok()
        ),
    );
    let closed = session.reopen();
    c.expect(
        closed.is_ok(),
        format_args!("closed and opened again: {closed:?}"),
    );
    let mut net = streams(&session, 2)?;
    let gateway = net.arp().map_err(|e| format!("ARP: {e}"))?;
    c.expect(
        gateway != [0; 6],
        format_args!(
            "a new session after the broken one: ARP answered ({})",
            nic::Mac(gateway)
        ),
    );
    net.drain().map_err(|e| format!("drain: {e}"))?;
    link(&session, &mut net, c).map_err(|e| format!("link: {e}"))
}

/// The link state as `INFO` reads it, while the host's monitor takes the
/// link down and up again (`set_link`, tests/nic.toml): each change is
/// waited for, with no clock — the test's time limit catches one that
/// never comes. An ARP after the link is back is answered.
fn link(session: &Session<Nic>, net: &mut Net, c: &mut Findings) -> Result<(), NicError> {
    for up in [false, true] {
        let state = if up { "up" } else { "down" };
        println!("test-nic: link: waiting for it to go {state}");
        while session.info()?.link_up != up {
            let _ = syscall::yield_now();
        }
        println!("test-nic: link: {state}, as INFO says");
    }
    let gateway = net.arp()?;
    c.expect(
        gateway != [0; 6],
        format_args!("link: up again, ARP answered"),
    );
    net.drain()
}

/// The streams of `session`'s `n`-th opening (its own slots and
/// address), counted from nothing.
fn streams(session: &Session<Nic>, n: usize) -> Result<Net, alloc::string::String> {
    let mac = session.info().map_err(|e| alloc::format!("INFO: {e}"))?.mac;
    // SAFETY: STREAM_VA[n].. is this opening's alone: nothing else of the
    // program uses it, and each opening has its own.
    let nic = unsafe { session.streams(STREAM_SLOTS[n], STREAM_VA[n]) }
        .map_err(|e| alloc::format!("streams: {e}"))?;
    Ok(Net::new(nic, mac.0))
}

/// Submits [`AT_CLOSE`] frames and closes the session (opening it again)
/// without waiting for one acknowledgement: the driver must take its
/// buffers back from the device first. How many were in flight.
fn close_in_flight(
    mut net: Net,
    session: &mut Session<Nic>,
) -> Result<usize, alloc::string::String> {
    use alloc::format;
    let request = frames::arp_request(net.mac, ME, GATEWAY);
    for _ in 0..AT_CLOSE {
        net.send(&request).map_err(|e| format!("send: {e}"))?;
    }
    net.nic.flush().map_err(|e| format!("flush: {e}"))?;
    let pending = net.nic.tx.in_flight();
    session.reopen().map_err(|e| format!("reopen: {e}"))?;
    Ok(pending)
}

/// ARP, ICMP echo and DHCP with the user network.
fn exchanges(net: &mut Net, c: &mut Findings) -> Result<(), NicError> {
    let gateway = net.arp()?;
    c.expect(
        gateway != [0; 6],
        format_args!("ARP: {} is at {}", Dotted(GATEWAY), nic::Mac(gateway)),
    );
    // ICMP echo, then an ARP request as the fence.
    let data: Vec<u8> = (0..56u8).collect();
    let (id, seq) = (0x7065, 1);
    net.send(&frames::echo_request(
        net.mac, ME, gateway, GATEWAY, id, seq, &data,
    ))?;
    net.send(&frames::arp_request(net.mac, ME, GATEWAY))?;
    let mut echo = None;
    net.until(|f| {
        if let Some(d) = frames::echo_reply(f, GATEWAY, id, seq) {
            echo = Some(d == &data[..]);
        }
        frames::arp_reply(f, GATEWAY, ME).is_some()
    })?;
    match echo {
        Some(same) => c.expect(
            same,
            format_args!(
                "ICMP echo to {}: answered, {} bytes {}",
                Dotted(GATEWAY),
                data.len(),
                if same { "equal" } else { "DIFFERENT" }
            ),
        ),
        None => println!(
            "test-nic: ICMP echo to {}: not answered before the next ARP reply",
            Dotted(GATEWAY)
        ),
    }
    // DHCP.
    let xid = 0x5065_6361;
    net.send(&frames::dhcp_discover(net.mac, xid))?;
    let mut offer = None;
    net.until(|f| {
        offer = frames::dhcp_offer(f, xid);
        offer.is_some()
    })?;
    if let Some(o) = offer {
        // With restrict=on slirp names no router and no DNS server.
        let router = match o.router {
            Some(r) => alloc::format!("router {}", Dotted(r)),
            None => alloc::string::String::from("no router"),
        };
        c.expect(
            o.address[..3] == ME[..3] && o.server == Some(GATEWAY),
            format_args!(
                "DHCP: offered {} by {} ({router}), {}",
                Dotted(o.address),
                Dotted(o.server.unwrap_or_default()),
                if o.broadcast { "broadcast" } else { "unicast" }
            ),
        );
    }
    net.drain()?;
    c.expect(
        net.sent_ok == 4 && net.refused.is_empty(),
        format_args!(
            "{} frames sent and acknowledged, {} refused",
            net.sent_ok,
            net.refused.len()
        ),
    );
    Ok(())
}

/// [`BURST`] ARP requests, as many in flight as fit.
fn burst(net: &mut Net, c: &mut Findings) -> Result<(), NicError> {
    let before = net.sent_ok;
    let request = frames::arp_request(net.mac, ME, GATEWAY);
    let mut most = 0;
    let mut replies = 0u32;
    for i in 0..BURST {
        net.send(&request)?;
        // Published in batches, as a stack would after each burst of
        // work: the driver takes each batch while the next is written.
        if i % BATCH == BATCH - 1 {
            net.nic.flush()?;
            net.take_acks()?;
        }
        most = most.max(net.nic.tx.in_flight());
    }
    net.nic.flush()?;
    // Replies counted until every request is answered (slirp answers each).
    net.until(|f| {
        replies += u32::from(frames::arp_reply(f, GATEWAY, ME).is_some());
        replies == BURST
    })?;
    net.drain()?;
    let sent = net.sent_ok - before;
    c.expect(
        sent == BURST && net.refused.is_empty() && most > 1,
        format_args!(
            "burst: {BURST} frames, {sent} acknowledged as sent, up to {most} in flight at once"
        ),
    );
    c.expect(
        replies == BURST,
        format_args!("burst: {replies} ARP replies"),
    );
    Ok(())
}

/// Bad transmit packets: each refused with its status.
fn refusals(net: &mut Net, c: &mut Findings) -> Result<(), NicError> {
    let tx = &mut net.nic.tx;
    let mut bad = |len: u32, op: u32| -> Result<(), NicError> {
        let mut p = tx.alloc(len).map_err(NicError::Packet)?;
        tx.payload_mut(&p).map_err(NicError::Packet)?.fill(0xee);
        p.op = op;
        tx.submit(p).map_err(NicError::Packet)
    };
    bad(nic::MAX_FRAME + 1, nic::OP_SEND)?;
    bad(nic::HEADER - 1, nic::OP_SEND)?;
    bad(64, 99)?;
    net.drain()?;
    let expected = [nic::STATUS_SIZE, nic::STATUS_SIZE, nic::STATUS_OP];
    let got = core::mem::take(&mut net.refused);
    c.expect(
        got == expected,
        format_args!(
            "bad frames refused with their status: {got:x?} (too long, too short, unknown op)"
        ),
    );
    let gateway = net.arp()?;
    c.expect(
        gateway != [0; 6],
        format_args!("after the refusals an ARP is still answered"),
    );
    net.drain()
}

/// A hostile hand on the streams (module doc, 7): the session breaks.
fn hostile(net: Net, va: u64) -> Result<(), alloc::string::String> {
    use alloc::format;
    let Net {
        nic: client,
        mac,
        given_back,
        ..
    } = net;
    let notify = client.notifications();
    let NicClient { tx, rx, .. } = client;
    // A good ARP request, written into a packet now, submitted by the hand;
    // the transmit end goes, the hand takes its place.
    let request = frames::arp_request(mac, ME, GATEWAY);
    let (p, submitted) = stage(tx, &request)?;
    let config = nic::stream_config();
    // SAFETY: a part of the frame mapped at `va` whose stream end is gone
    // (`stage` and `answered` consumed them), so the hand is the only
    // region on it.
    let part =
        |offset: usize| unsafe { Region::new((va as usize + offset) as *mut u8, nic::PART_BYTES) };
    let hand = part(nic::TX_OFFSET)
        .and_then(|r| Forger::new(r, config))
        .map_err(|e| format!("hand: {e}"))?;
    let outside = hand.layout().buffer_len() as u32;
    hand.descriptor(Ring::Submit, submitted, [outside, 64, nic::OP_SEND, 0]);
    hand.publish(
        Ring::Submit,
        submitted + 1,
        [p.offset(), p.len(), nic::OP_SEND, 0],
    );
    syscall::signal(notify.peer).map_err(|e| format!("signal: {e}"))?;
    // The good one after the bad one is sent and answered; the receive end
    // goes too.
    let acked = answered(rx, notify)?;
    println!("test-nic: a descriptor outside the buffer, then a good frame: the good one answered");
    // An acknowledgement of a buffer that is not out, then an impossible
    // transmit index.
    let rx_hand = part(nic::RX_OFFSET)
        .and_then(|r| Forger::new(r, config))
        .map_err(|e| format!("hand: {e}"))?;
    rx_hand.publish(Ring::Ack, given_back + acked, [outside, 64, 0, 0]);
    hand.control(Ring::Submit, Control::Tail, submitted + 2 + 1000);
    syscall::signal(notify.peer).map_err(|e| format!("signal: {e}"))?;
    println!("test-nic: a forged acknowledgement and an impossible transmit index sent");
    Ok(())
}

/// Writes `frame` into a packet of `tx` and ends the transmit end there:
/// the packet, and the index its ring's next entry has.
fn stage(
    mut tx: Source<Notifications, { nic::STREAM_WORDS }>,
    frame: &[u8],
) -> Result<(Packet, u32), alloc::string::String> {
    use alloc::format;
    let p = tx
        .alloc(frame.len() as u32)
        .map_err(|e| format!("alloc: {e}"))?;
    tx.payload_mut(&p)
        .map_err(|e| format!("payload: {e}"))?
        .copy_from_slice(frame);
    Ok((p, tx.counters().packets as u32))
}

/// Takes frames from `rx` until an ARP reply from the gateway comes, and
/// ends the receive end there: how many frames it acknowledged.
fn answered(
    mut rx: Sink<Notifications>,
    notify: Notifications,
) -> Result<u32, alloc::string::String> {
    use alloc::format;
    let mut acked = 0;
    let mut answered = false;
    while !answered {
        while let Some(t) = rx.get().ok().flatten() {
            let payload = rx.payload(&t).map_err(|e| format!("payload: {e}"))?;
            answered |= frames::arp_reply(payload, GATEWAY, ME).is_some();
            rx.ack(t).map_err(|e| format!("ack: {:?}", e.error))?;
            acked += 1;
        }
        if !answered && !rx.arm(false).map_err(|e| format!("arm: {e}"))? {
            syscall::wait(notify.own).map_err(|e| format!("wait: {e}"))?;
        }
    }
    rx.flush().map_err(|e| format!("flush: {e}"))?;
    Ok(acked)
}

/// Echo requests each client behind the switch sends.
const ECHOES: u16 = 10;
/// The EtherType of the frame each client sends the other (IEEE's local
/// experimental one).
const LOCAL_TYPE: [u8; 2] = [0x88, 0xb5];

/// One of two clients behind the switch (`arg` 1): its own MAC
/// (`02:00:00:00:00:0N`), ARP and DHCP through the switch (each client
/// offered its own address), a frame with the other client's source
/// address refused, echo requests answered, a frame to the other client
/// delivered and the other's received — and no unicast frame for another
/// MAC seen all along.
fn behind_switch(c: &mut Findings) -> Result<(), alloc::string::String> {
    use alloc::format;
    let session = session::open_from_quota::<Nic>(SESSION, DONOR_BLOCK, DONOR_TABLE)
        .map_err(|e| format!("Nic session: {e}"))?;
    let info = session.info().map_err(|e| format!("INFO: {e}"))?;
    let mine = info.mac.0;
    c.expect(
        mine[..5] == [2, 0, 0, 0, 0] && info.link_up,
        format_args!("behind the switch: MAC {}", info.mac),
    );
    let peer: Mac = [2, 0, 0, 0, 0, if mine[5] == 1 { 2 } else { 1 }];
    let mut net = streams(&session, 0)?;
    let gateway = net.arp().map_err(|e| format!("ARP: {e}"))?;
    c.expect(
        gateway != [0; 6],
        format_args!(
            "ARP through the switch: {} is at {}",
            Dotted(GATEWAY),
            nic::Mac(gateway)
        ),
    );
    let xid = 0x5377_0000 | u32::from(mine[5]);
    net.send(&frames::dhcp_discover(net.mac, xid))
        .map_err(|e| format!("DHCP: {e}"))?;
    let mut offer = None;
    net.until(|f| {
        offer = frames::dhcp_offer(f, xid);
        offer.is_some()
    })
    .map_err(|e| format!("DHCP: {e}"))?;
    let me = offer.map_or(ME, |o| o.address);
    c.expect(
        offer.is_some(),
        format_args!("DHCP through the switch: offered {}", Dotted(me)),
    );
    // The other client's source address: refused.
    let forged = frames::arp_request(peer, me, GATEWAY);
    net.send(&forged).map_err(|e| format!("send: {e}"))?;
    net.drain().map_err(|e| format!("drain: {e}"))?;
    c.expect(
        net.refused == [nic::STATUS_SOURCE],
        format_args!(
            "a frame with the other client's source address: refused ({:?})",
            net.refused
        ),
    );
    // Echo requests, then an ARP request as the fence.
    let data: Vec<u8> = (0..56u8).collect();
    for seq in 0..ECHOES {
        net.send(&frames::echo_request(
            net.mac, me, gateway, GATEWAY, 0x7377, seq, &data,
        ))
        .map_err(|e| format!("echo: {e}"))?;
    }
    net.send(&frames::arp_request(net.mac, me, GATEWAY))
        .map_err(|e| format!("fence: {e}"))?;
    let mut echoes = 0;
    net.until(|f| {
        echoes +=
            u16::from((0..ECHOES).any(|s| frames::echo_reply(f, GATEWAY, 0x7377, s).is_some()));
        frames::arp_reply(f, GATEWAY, me).is_some()
    })
    .map_err(|e| format!("echo replies: {e}"))?;
    c.expect(
        echoes == ECHOES,
        format_args!("{echoes} of {ECHOES} echo requests answered through the switch"),
    );
    // A frame to the other client; the other's to this one.
    let mut hello = [0u8; 60];
    hello[..6].copy_from_slice(&peer);
    hello[6..12].copy_from_slice(&mine);
    hello[12..14].copy_from_slice(&LOCAL_TYPE);
    hello[14..24].copy_from_slice(b"hello peer");
    net.send(&hello)
        .map_err(|e| format!("to the other client: {e}"))?;
    // (It may have come already, while this client waited for others.)
    if !net.hello {
        net.until(|f| is_hello(f, mine))
            .map_err(|e| format!("from the other client: {e}"))?;
    }
    c.expect(
        true,
        format_args!("a frame from the other client ({}) arrived", nic::Mac(peer)),
    );
    net.drain().map_err(|e| format!("drain: {e}"))?;
    c.expect(
        net.foreign == 0,
        format_args!("unicast frames for another MAC seen: {}", net.foreign),
    );
    Ok(())
}

/// Whether `f` is the other client's frame to `mine` (behind the switch).
fn is_hello(f: &[u8], mine: Mac) -> bool {
    f.len() >= 24
        && f[..6] == mine
        && f[6..11] == [2, 0, 0, 0, 0]
        && f[12..14] == LOCAL_TYPE
        && &f[14..24] == b"hello peer"
}

/// Rounds `arg` 2 asks the gateway, [`ROUND_GAP_US`] apart.
const ROUNDS: u32 = 60;
const ROUND_GAP_US: u64 = 5_000;
/// How long it waits for an answer before asking again.
const ANSWER_WAIT_US: u64 = 50_000;
/// Times it asks again in all before it gives up.
const MAX_RETRIES: u32 = 200;

/// `arg` 2: [`ROUNDS`] ARP requests for the gateway, one at a time, each
/// asked again when no answer comes within [`ANSWER_WAIT_US`] (frames in
/// the old uplink's streams are lost when the driver is killed); every
/// round must be answered in the end. The Nic session (the switch's)
/// stays open throughout. Polls with a Timer: a Nic client waits on its
/// stream's notification, and a thread waits on one notification at once.
fn across_restart(c: &mut Findings) -> Result<(), alloc::string::String> {
    use alloc::format;
    let timer = rt::session::timer::Timer::open(TIMER, TIMER_NOTIFY)
        .map_err(|e| format!("Timer session: {e:?}"))?;
    let session = session::open_from_quota::<Nic>(SESSION, DONOR_BLOCK, DONOR_TABLE)
        .map_err(|e| format!("Nic session: {e}"))?;
    let mut net = streams(&session, 0)?;
    let mine = net.mac;
    let me: Ip = [10, 0, 2, 20 + mine[5]];
    let (mut answered, mut retries) = (0u32, 0u32);
    while answered < ROUNDS && retries <= MAX_RETRIES {
        net.send(&frames::arp_request(mine, me, GATEWAY))
            .map_err(|e| format!("send: {e}"))?;
        net.nic.flush().map_err(|e| format!("flush: {e}"))?;
        let mut waited = 0;
        let mut got = false;
        while !got && waited < ANSWER_WAIT_US {
            net.take_acks().map_err(|e| format!("acks: {e}"))?;
            while let Some(t) = net.nic.receive().map_err(|e| format!("receive: {e}"))? {
                got |=
                    frames::arp_reply(net.nic.frame(&t).map_err(|e| format!("{e}"))?, GATEWAY, me)
                        .is_some();
                net.nic.done(t).map_err(|e| format!("done: {e}"))?;
            }
            net.nic.flush().map_err(|e| format!("flush: {e}"))?;
            if !got {
                timer.sleep(1_000).map_err(|e| format!("sleep: {e:?}"))?;
                waited += 1_000;
            }
        }
        match got {
            true => answered += 1,
            false => retries += 1,
        }
        timer
            .sleep(ROUND_GAP_US)
            .map_err(|e| format!("sleep: {e:?}"))?;
    }
    c.expect(
        answered == ROUNDS,
        format_args!("across the driver's restart: {answered} of {ROUNDS} ARP rounds answered ({retries} asked again)"),
    );
    Ok(())
}

/// Frames `arg` 3 sends.
pub const FUZZ_FRAMES: u32 = 100_000;

/// `arg` 3: [`FUZZ_FRAMES`] frames to the other client behind the switch
/// (its MAC the other of `02:00:00:00:00:01` and `:02`): a third random
/// bytes of random length, the rest an ARP request, an ICMP echo request
/// or a DHCP discover to the server with 1 to 8 random bytes changed and
/// a random length — every header field of Ethernet, ARP, IPv4, ICMP and
/// UDP, and by a changed protocol byte TCP, gets nonsense — and every
/// thousandth an intact ARP request, whose answers show the stack kept
/// serving. The destination and source stay (the switch refuses a forged
/// source and delivers by destination). What the server answers is read
/// and dropped.
fn fuzz(c: &mut Findings) -> Result<(), alloc::string::String> {
    use alloc::format;
    let session = session::open_from_quota::<Nic>(SESSION, DONOR_BLOCK, DONOR_TABLE)
        .map_err(|e| format!("Nic session: {e}"))?;
    let mut net = streams(&session, 0)?;
    let mine = net.mac;
    let target: Mac = [2, 0, 0, 0, 0, if mine[5] == 1 { 2 } else { 1 }];
    let server: Ip = [10, 0, 2, 15];
    // An address of its own: a stack ignores frames from its own.
    let me: Ip = [10, 0, 2, 99];
    let templates = [
        frames::arp_request(mine, me, server),
        frames::echo_request(mine, me, target, server, 0x6675, 1, &[0x7a; 32]),
        frames::dhcp_discover(mine, 0x6675_7a7a),
    ];
    let mut rng = ucore::packet_stream::traffic::Rng::new(0x6675_7a7a_0000_0001);
    let mut frame = [0u8; nic::MAX_FRAME as usize];
    for i in 0..FUZZ_FRAMES {
        let len = if i % 1000 == 999 {
            // Now and then an intact ARP request: its answers show the
            // stack is there, and serving, all along.
            let t = &templates[0];
            frame[..t.len()].copy_from_slice(t);
            t.len()
        } else if i % 3 == 0 {
            let len = 14 + rng.below(u64::from(nic::MAX_FRAME) - 13) as usize;
            for b in frame[..len].iter_mut() {
                *b = rng.next_u64() as u8;
            }
            len
        } else {
            let t = &templates[i as usize % templates.len()];
            frame[..t.len()].copy_from_slice(t);
            for _ in 0..1 + rng.below(8) {
                let at = 12 + rng.below(t.len() as u64 - 12) as usize;
                frame[at] = rng.next_u64() as u8;
            }
            14 + rng.below(t.len() as u64 - 13) as usize
        };
        frame[..6].copy_from_slice(&target);
        frame[6..12].copy_from_slice(&mine);
        net.send(&frame[..len]).map_err(|e| format!("send: {e}"))?;
        if i % 64 == 63 {
            net.nic.flush().map_err(|e| format!("flush: {e}"))?;
            net.take_acks().map_err(|e| format!("acks: {e}"))?;
            net.drop_frames().map_err(|e| format!("receive: {e}"))?;
        }
    }
    net.drain().map_err(|e| format!("drain: {e}"))?;
    c.expect(
        net.sent_ok == FUZZ_FRAMES,
        format_args!(
            "fuzz: {} frames sent to {}, {} acknowledged, {} refused, {} answers read",
            FUZZ_FRAMES,
            nic::Mac(target),
            net.sent_ok,
            net.refused.len(),
            net.given_back
        ),
    );
    Ok(())
}
