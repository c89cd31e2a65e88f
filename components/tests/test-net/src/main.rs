//! test-net: the network stack (`net`) against the host peer over the
//! peer link (docs/network.md, "The peer link"; tests/net-peer.toml).
//!
//! Takes 10.0.3.2/24 statically (no DHCP on that link), then, against
//! the peer at 10.0.3.1 (`xtask::netpeer`; ports in `ucore::netpeer`):
//!
//! 1. ICMP echo to the peer (and its MAC by ARP);
//! 2. UDP echo: 20 round trips of 1 to 1472 bytes, each byte equal;
//! 3. UDP to the peer's sink: 200 pattern datagrams, all counted there,
//!    none bad; UDP from the peer: 100 datagrams, all the pattern;
//! 4. TCP to the peer's sink: 4 MiB of the pattern; the peer's report
//!    says every byte was the pattern and its checksum equals ours;
//! 5. TCP from the peer's source: 4 MiB, every byte the pattern;
//! 6. TCP echo of 64 KiB;
//! 7. waits (answering) while the host pings the guest, until the peer
//!    says in the link how the host's ping went (the check itself is
//!    host-side, in the test's `[[host]]` command).
//!
//! Prints `test-net: N checks failed` and exits 0 when N is 0. Every
//! blocking call has a generous timeout (a loaded host), so a lost
//! answer is a failed check, never a hang.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use net::pecan::PecanDriver;
use net::peerlink::{self, control, peer, read_line};
use net::smoltcp::time::Duration;
use net::stack::{Net, Pinger, TcpStream, UdpSocket};
use rt::interfaces::child;
use rt::println;
use ucore::netpeer::{self as np, Fnv, Receiver, SinkReport};

rt::entry!(main);

/// The stack's slots, then the heap's.
const NET_FIRST: u32 = child::FIRST_FREE;
const HEAP_SLOT: u32 = NET_FIRST + net::pecan::SLOTS;
/// 2 MiB frames added to the heap: the sockets' buffers.
const HEAP_FRAMES: u32 = 2;
/// Where the Nic's streams are mapped (nothing else uses it).
const STREAM_VA: u64 = 0x50_0000_0000;
/// Bytes of each TCP transfer.
const TRANSFER: u64 = 4 << 20;
/// Every blocking call's limit.
const TIMEOUT: Duration = Duration::from_secs(60);

type Stack = Net<PecanDriver>;

fn main(_: u64) -> i32 {
    let mut failed = 0u32;
    let mut check = |ok: bool, what: String| {
        if ok {
            println!("test-net: {what}");
        } else {
            failed += 1;
            println!("test-net: FAILED: {what}");
        }
    };
    match run(&mut check) {
        Ok(()) => {}
        Err(e) => check(false, e),
    }
    println!("test-net: {failed} checks failed");
    i32::from(failed != 0)
}

fn connect(net: &Stack, port: u16) -> Result<TcpStream<PecanDriver>, String> {
    peerlink::connect(net, port, TIMEOUT)
        .map_err(|e| format!("connecting to the peer's port {port}: {e}"))
}

fn run(check: &mut impl FnMut(bool, String)) -> Result<(), String> {
    rt::heap::grow(HEAP_SLOT, HEAP_FRAMES).map_err(|e| format!("growing the heap: {e}"))?;
    // SAFETY: STREAM_VA's 2 MiB are used by nothing else of this program.
    let driver = unsafe { net::pecan::open(NET_FIRST, STREAM_VA) }?;
    let info = driver.info;
    let net = Net::new(driver, info.mac.0, false).map_err(|e| format!("the stack: {e}"))?;
    let [a, b, c, d] = np::GUEST_IP;
    peerlink::configure(&net);
    println!(
        "test-net: interface MAC {}, link {}; address {}.{}.{}.{}/{} on the peer link",
        info.mac,
        if info.link_up { "up" } else { "down" },
        a,
        b,
        c,
        d,
        np::PREFIX
    );
    let peer_ip = peerlink::peer_ip();

    // 1. ICMP echo to the peer.
    let mut pinger = Pinger::new(&net).map_err(|e| format!("ICMP socket: {e}"))?;
    let echo = pinger.ping(peer_ip, b"pecan test-net", TIMEOUT);
    check(
        echo.is_ok(),
        format!(
            "ICMP echo to {peer_ip}: {}",
            match echo {
                Ok(_) => String::from("answered"),
                Err(e) => format!("{e}"),
            }
        ),
    );
    drop(pinger);
    while let Some((ip, mac)) = net.with_driver(|d| d.device.take_neighbour()) {
        let m = mac.0;
        println!(
            "test-net: ARP: {ip} is at {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        );
    }

    // 2. UDP echo.
    let mut u = UdpSocket::bind(&net, 4000, 128, 256 * 1024).map_err(|e| format!("UDP: {e}"))?;
    u.set_read_timeout(Some(Duration::from_secs(5)));
    let mut good = 0;
    let mut buf = vec![0u8; 1500];
    for round in 0..20usize {
        let size = [1, 64, 512, 1024, 1472][round % 5];
        let data: Vec<u8> = (0..size).map(|i| (i + round) as u8).collect();
        // A datagram may be lost: up to three tries.
        for _ in 0..3 {
            if u.send_to(&data, peer(np::PORT_ECHO)).is_err() {
                continue;
            }
            match u.recv_from(&mut buf) {
                Ok((n, from)) if from == peer(np::PORT_ECHO) && buf[..n] == data[..] => {
                    good += 1;
                    break;
                }
                _ => {}
            }
        }
    }
    check(
        good == 20,
        format!("UDP echo: {good} of 20 round trips (1 to 1472 bytes), bytes equal"),
    );

    // 3. UDP to the peer's sink and from its source.
    let mut c = connect(&net, np::PORT_CONTROL)?;
    check(
        control(&mut c, "udp-reset")? == "ok",
        "the peer's UDP sink reset".into(),
    );
    let mut datagram = vec![0u8; 1024];
    np::fill(&mut datagram, 0);
    for _ in 0..200 {
        u.send_to(&datagram, peer(np::PORT_SINK))
            .map_err(|e| format!("UDP to the sink: {e}"))?;
    }
    // The control line may overtake the datagrams (sockets leave the
    // stack in their order): ask until the count stops growing.
    let mut stats = String::new();
    for _ in 0..50 {
        stats = control(&mut c, "udp-stats")?;
        if stats == "udp-sink 200 204800 0" {
            break;
        }
        net.wait(Some(net.now() + Duration::from_millis(20)));
    }
    check(
        stats == "udp-sink 200 204800 0",
        format!("UDP to the peer: 200 datagrams of 1024 bytes sent; the peer: {stats}"),
    );
    let answer = control(&mut c, &format!("udp-send 1024 100 {}", u.port()))?;
    let mut got = 0;
    let mut bad = 0;
    u.set_read_timeout(Some(Duration::from_secs(1)));
    while got + bad < 100 {
        match u.recv_from(&mut buf) {
            Ok((n, from)) if from == peer(np::PORT_SOURCE) => {
                if buf[..n] == datagram[..] {
                    got += 1;
                } else {
                    bad += 1;
                }
            }
            Ok(_) => bad += 1,
            Err(_) => break,
        }
    }
    check(
        got == 100 && answer.starts_with("udp-sent 100 of 1024 B"),
        format!("UDP from the peer: {got} of 100 datagrams the pattern, {bad} other ({answer})"),
    );
    drop(u);

    // 4. TCP to the peer's sink.
    let mut s = connect(&net, np::PORT_SINK)?;
    s.write_all(&TRANSFER.to_be_bytes())
        .map_err(|e| format!("sink: {e}"))?;
    let mut sent = Fnv::default();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut off = 0u64;
    while off < TRANSFER {
        let n = chunk.len().min((TRANSFER - off) as usize);
        np::fill(&mut chunk[..n], off);
        sent.update(&chunk[..n]);
        s.write_all(&chunk[..n])
            .map_err(|e| format!("sink at byte {off}: {e}"))?;
        off += n as u64;
    }
    let line = read_line(&mut s)?;
    drop(s);
    let report = SinkReport::parse(&line);
    check(
        report.is_some_and(|r| r.bytes == TRANSFER && r.first_bad.is_none() && r.fnv == sent.0),
        format!(
            "TCP to the peer: {TRANSFER} bytes, fnv {:016x}; the peer: {line}",
            sent.0
        ),
    );

    // 5. TCP from the peer's source.
    let mut s = connect(&net, np::PORT_SOURCE)?;
    s.write_all(&TRANSFER.to_be_bytes())
        .map_err(|e| format!("source: {e}"))?;
    let mut got = Receiver::default();
    loop {
        let n = s
            .read(&mut chunk)
            .map_err(|e| format!("source at byte {}: {e}", got.bytes))?;
        if n == 0 {
            break;
        }
        got.take(&chunk[..n]);
    }
    drop(s);
    check(
        got.bytes == TRANSFER && got.first_bad.is_none(),
        format!(
            "TCP from the peer: {} bytes, first not the pattern: {:?}, fnv {:016x}",
            got.bytes, got.first_bad, got.fnv.0
        ),
    );

    // 6. TCP echo.
    let mut s = connect(&net, np::PORT_ECHO)?;
    let data: Vec<u8> = (0..65536u32).map(|i| (i % 253) as u8).collect();
    s.write_all(&data).map_err(|e| format!("echo: {e}"))?;
    let mut back = Vec::new();
    while back.len() < data.len() {
        let n = s.read(&mut buf).map_err(|e| format!("echo: {e}"))?;
        if n == 0 {
            break;
        }
        back.extend_from_slice(&buf[..n]);
    }
    drop(s);
    check(
        back == data,
        format!(
            "TCP echo: {} of {} bytes back, equal: {}",
            back.len(),
            data.len(),
            back == data
        ),
    );

    // 7. The host pings the guest; the stack answers while this waits.
    println!("test-net: waiting for the host's ping");
    let answer = control(&mut c, "wait-ping")?;
    println!("test-net: the peer: {answer}");
    Ok(())
}
