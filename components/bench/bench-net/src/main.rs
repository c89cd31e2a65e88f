//! bench-net: the Pecan side of the lab's network benchmarks
//! (`bench::netio`; the Linux side is bench-linux's `net-*-linux`).
//! The stack (`net`: smoltcp) is linked in, over a Nic session of the
//! virtio-net driver whose NIC is joined to the host peer of the socket
//! link (`xtask::netpeer`; the guest at 10.0.3.2/24, the peer at
//! 10.0.3.1). For each benchmark of [`bench::netio::all`] and then of
//! [`bench::netio::LOSS`] (or those whose bit is set in the component's
//! `arg`, bit `i` for the `i`-th in that order; 0: all),
//! one unrecorded run and [`RUNS`] recorded ones, with a soaker thread at
//! priority 0 on the CPU counting the idle time (the lab's I/O method,
//! `bench::soak`); one `BENCH` line each.
//!
//! The bytes sent come from a buffer of the pattern made before the runs
//! (the peer checks every byte of a TCP transfer and every UDP
//! datagram); the bytes received are counted, not checked, in the
//! measured runs (tests/net-peer.toml checks them) — as on the Linux
//! side. After a UDP transmit benchmark the peer's count of datagrams is
//! printed beside the number sent.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec;

use bench::netio::{self, Dir, Proto, RUNS};
use bench_io::SoakerSlots;
use net::pecan::PecanDriver;
use net::peerlink::{self, control, peer, read_line};
use net::smoltcp::time::Duration;
use net::stack::{Error, Net, TcpStream, UdpSocket};
use rt::interfaces::child;
use rt::println;
use ucore::netpeer as np;

rt::entry!(main);

const NET_FIRST: u32 = child::FIRST_FREE;
const HEAP_SLOT: u32 = NET_FIRST + net::pecan::SLOTS;
/// 2 MiB frames added to the heap: the sockets' buffers and the pattern.
const HEAP_FRAMES: u32 = 4;
const SOAKER_DONE: u32 = HEAP_SLOT + HEAP_FRAMES;
const SOAKER_THREAD: u32 = SOAKER_DONE + 1;
const SOAKER_FRAMES: u32 = SOAKER_DONE + 2;
const STREAM_VA: u64 = 0x50_0000_0000;
/// The benchmark's CPU (the machine has one, as the Linux guest's).
const CPU: u32 = 0;
/// The UDP port the guest receives on.
const UDP_PORT: u16 = 4000;
/// Every blocking call's limit (virtual time under icount: 1 ns per
/// instruction).
const TIMEOUT: Duration = Duration::from_secs(20);
/// How long a UDP receive run waits for a datagram before it fails.
const UDP_WAIT: Duration = Duration::from_secs(2);

type Stack = Net<PecanDriver>;

fn main(arg: u64) -> i32 {
    match run(arg) {
        Ok(failed) => i32::from(failed),
        Err(e) => {
            println!("bench-net: FAILED: {e}");
            1
        }
    }
}

fn connect(net: &Stack, port: u16) -> Result<TcpStream<PecanDriver>, Error> {
    peerlink::connect(net, port, TIMEOUT)
}

/// The soaker's slots (`bench_io`).
const SOAKER_SLOTS: SoakerSlots = SoakerSlots {
    done: SOAKER_DONE,
    thread: SOAKER_THREAD,
    frames: SOAKER_FRAMES,
};

fn run(arg: u64) -> Result<bool, String> {
    // SAFETY: STREAM_VA's 2 MiB are used by nothing else of this program.
    let driver = unsafe { net::pecan::open(NET_FIRST, STREAM_VA) }?;
    rt::heap::grow(HEAP_SLOT, HEAP_FRAMES).map_err(|e| format!("growing the heap: {e}"))?;
    let mac = driver.info.mac;
    let net = Net::new(driver, mac.0, false).map_err(|e| format!("the stack: {e}"))?;
    let [a, b, c, d] = np::GUEST_IP;
    peerlink::configure(&net);
    println!(
        "bench-net: {a}.{b}.{c}.{d}/{} on the peer link, MAC {mac}",
        np::PREFIX
    );
    let mut pattern = vec![0u8; netio::MAX_RUN_BYTES as usize];
    np::fill(&mut pattern, 0);
    let mut ctl = connect(&net, np::PORT_CONTROL).map_err(|e| format!("control: {e}"))?;
    let mut udp =
        UdpSocket::bind(&net, UDP_PORT, 512, 512 * 1472).map_err(|e| format!("UDP socket: {e}"))?;
    udp.set_read_timeout(Some(UDP_WAIT));
    bench_io::start(SOAKER_SLOTS, CPU)?;
    let mut failed = false;
    let benchmarks = netio::all().map(|(p, d, s, n)| (p, d, s, n, false)).chain(
        netio::LOSS
            .into_iter()
            .map(|(d, n)| (Proto::Tcp, d, netio::LOSS_SIZE, n, true)),
    );
    for (i, (proto, dir, size, name, loss)) in benchmarks.enumerate() {
        if arg != 0 && arg & (1 << i) == 0 {
            continue;
        }
        if loss {
            let set = control(&mut ctl, &format!("loss {}", netio::LOSS_EVERY))?;
            if !set.starts_with("loss ") {
                return Err(format!("the peer: {set}"));
            }
        }
        let bytes = netio::run_bytes(size);
        let count = bytes / size as u64;
        if proto == Proto::Udp && dir == Dir::Tx {
            control(&mut ctl, "udp-reset")?;
        }
        let mut buf = vec![0u8; size];
        let mut pass = || -> Result<(), String> {
            match (proto, dir) {
                (Proto::Tcp, Dir::Tx) => {
                    let mut s = connect(&net, np::PORT_SINK).map_err(|e| format!("sink: {e}"))?;
                    s.set_nodelay(size == 64);
                    s.write_all(&bytes.to_be_bytes())
                        .map_err(|e| format!("sink: {e}"))?;
                    for piece in pattern[..bytes as usize].chunks(size) {
                        s.write_all(piece).map_err(|e| format!("sink: {e}"))?;
                    }
                    let line = read_line(&mut s)?;
                    match np::SinkReport::parse(&line) {
                        Some(r) if r.bytes == bytes && r.first_bad.is_none() => Ok(()),
                        _ => Err(format!("the peer's report: {line}")),
                    }
                }
                (Proto::Tcp, Dir::Rx) => {
                    let mut s =
                        connect(&net, np::PORT_SOURCE).map_err(|e| format!("source: {e}"))?;
                    s.write_all(&bytes.to_be_bytes())
                        .map_err(|e| format!("source: {e}"))?;
                    let mut got = 0u64;
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => got += n as u64,
                            Err(e) => return Err(format!("source at byte {got}: {e}")),
                        }
                    }
                    if got == bytes {
                        Ok(())
                    } else {
                        Err(format!("{got} of {bytes} bytes from the source"))
                    }
                }
                (Proto::Udp, Dir::Tx) => {
                    for _ in 0..count {
                        udp.send_to_waiting(&pattern[..size], peer(np::PORT_SINK), Some(TIMEOUT))
                            .map_err(|e| format!("UDP to the sink: {e}"))?;
                    }
                    udp.flush(Some(TIMEOUT))
                        .map_err(|e| format!("UDP to the sink: {e}"))
                }
                (Proto::Udp, Dir::Rx) => {
                    ctl.write_all(format!("udp-send {size} {count} {UDP_PORT}\n").as_bytes())
                        .map_err(|e| format!("udp-send: {e}"))?;
                    for got in 0..count {
                        match udp.recv_from(&mut buf) {
                            Ok((n, _)) if n == size => {}
                            Ok((n, from)) => {
                                return Err(format!("a datagram of {n} bytes from {from}"))
                            }
                            Err(e) => return Err(format!("{got} of {count} datagrams, then {e}")),
                        }
                    }
                    let line = read_line(&mut ctl)?;
                    if line.starts_with("udp-sent") {
                        Ok(())
                    } else {
                        Err(format!("the peer: {line}"))
                    }
                }
            }
        };
        match bench_io::measure::<_, RUNS>(&mut pass) {
            Ok((elapsed, soaked)) => bench_io::report(name, bytes, &elapsed, &soaked),
            Err(e) => {
                println!("bench-net: FAILED: {name}: {e}");
                failed = true;
            }
        }
        if loss {
            let ended = control(&mut ctl, "loss 0")?;
            println!("bench-net: {name}: the peer: {ended}");
        }
        if proto == Proto::Udp && dir == Dir::Tx {
            let stats = control(&mut ctl, "stats")?;
            let c = net.with_driver(|d| d.device.counters());
            println!(
                "bench-net: {name}: {} datagrams sent; the peer: {stats}; the device: {c:?}",
                count * (RUNS as u64 + 1)
            );
        }
    }
    bench_io::stop(SOAKER_SLOTS);
    Ok(failed)
}
