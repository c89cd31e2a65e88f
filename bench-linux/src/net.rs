//! The network benchmarks ([`bench::netio`]) on Linux: std::net sockets
//! through Linux's TCP/IP stack and its virtio_net driver, against the
//! host peer of the socket link (`xtask::netpeer`; the guest's `/init`
//! gives eth0 10.0.3.2/24), the same protocol as Pecan's bench-net
//! (`ucore::netpeer`), measured with the lab's I/O method (a soaker).
//!
//! As on Pecan: the bytes sent come from a buffer of the pattern made
//! before the runs, the bytes received are counted, not checked; TCP
//! with Nagle off at 64 B; a UDP receive run fails if a datagram is
//! lost (the socket's receive buffer is raised to 4 MiB with
//! `SO_RCVBUFFORCE` so that none is); after a UDP transmit benchmark the
//! peer's count is printed on standard error.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use bench::netio::{self, Dir, Proto, RUNS};
use ucore::netpeer as np;

use crate::disk::{measure, IoRuns};

/// Every blocking call's limit.
const TIMEOUT: Duration = Duration::from_secs(20);
/// How long a UDP receive run waits for a datagram before it fails.
const UDP_WAIT: Duration = Duration::from_secs(2);
/// The UDP port the guest receives on.
const UDP_PORT: u16 = 4000;

fn peer(port: u16) -> SocketAddr {
    SocketAddr::from((np::PEER_IP, port))
}

fn connect(port: u16) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&peer(port), TIMEOUT)?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    Ok(s)
}

/// One line from the peer, without its newline.
fn read_line(s: &mut BufReader<TcpStream>) -> io::Result<String> {
    let mut line = String::new();
    s.read_line(&mut line)?;
    if !line.ends_with('\n') {
        return Err(io::Error::other("the connection ended before the line"));
    }
    line.pop();
    Ok(line)
}

/// The control connection to the peer, one for all benchmarks (as
/// Pecan's bench-net keeps one).
static CONTROL: std::sync::Mutex<Option<BufReader<TcpStream>>> = std::sync::Mutex::new(None);

/// Runs `f` on the control connection (made at the first call).
fn with_control<R>(f: impl FnOnce(&mut BufReader<TcpStream>) -> io::Result<R>) -> io::Result<R> {
    let mut c = CONTROL
        .lock()
        .map_err(|_| io::Error::other("control lock"))?;
    if c.is_none() {
        *c = Some(BufReader::new(connect(np::PORT_CONTROL)?));
    }
    match c.as_mut() {
        Some(c) => f(c),
        None => Err(io::Error::other("no control connection")),
    }
}

fn control(c: &mut BufReader<TcpStream>, command: &str) -> io::Result<String> {
    c.get_mut().write_all(format!("{command}\n").as_bytes())?;
    read_line(c)
}

/// `SO_RCVBUFFORCE` (root: above `rmem_max`).
fn receive_buffer(socket: &UdpSocket, bytes: libc::c_int) -> io::Result<()> {
    // SAFETY: the option value is a c_int we pass by reference with its size.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A loss benchmark (`bench::netio::LOSS`): the TCP benchmark of `dir` at
/// [`netio::LOSS_SIZE`] while the peer drops every
/// [`netio::LOSS_EVERY`]-th data segment; the count dropped is printed.
pub fn run_with_loss(dir: Dir) -> io::Result<IoRuns> {
    let set = with_control(|c| control(c, &format!("loss {}", netio::LOSS_EVERY)))?;
    if !set.starts_with("loss ") {
        return Err(io::Error::other(format!("the peer: {set}")));
    }
    let runs = run(Proto::Tcp, dir, netio::LOSS_SIZE);
    let ended = with_control(|c| control(c, "loss 0"))?;
    println!("bench-linux: TCP {dir:?} with loss: the peer: {ended}");
    runs
}

/// The benchmark of `proto`, `dir` and payload `size`.
pub fn run(proto: Proto, dir: Dir, size: usize) -> io::Result<IoRuns> {
    let bytes = netio::run_bytes(size);
    let count = bytes / size as u64;
    let mut pattern = vec![0u8; bytes as usize];
    np::fill(&mut pattern, 0);
    let mut buf = vec![0u8; size];
    match (proto, dir) {
        (Proto::Tcp, Dir::Tx) => measure(
            bytes,
            RUNS,
            || Ok(()),
            || {
                let s = connect(np::PORT_SINK)?;
                s.set_nodelay(size == 64)?;
                let mut w = &s;
                w.write_all(&bytes.to_be_bytes())?;
                for piece in pattern.chunks(size) {
                    w.write_all(piece)?;
                }
                let line = read_line(&mut BufReader::new(s))?;
                match np::SinkReport::parse(&line) {
                    Some(r) if r.bytes == bytes && r.first_bad.is_none() => Ok(()),
                    _ => Err(io::Error::other(format!("the peer's report: {line}"))),
                }
            },
        ),
        (Proto::Tcp, Dir::Rx) => measure(
            bytes,
            RUNS,
            || Ok(()),
            || {
                let mut s = connect(np::PORT_SOURCE)?;
                s.write_all(&bytes.to_be_bytes())?;
                let mut got = 0u64;
                loop {
                    match s.read(&mut buf)? {
                        0 => break,
                        n => got += n as u64,
                    }
                }
                if got == bytes {
                    Ok(())
                } else {
                    Err(io::Error::other(format!(
                        "{got} of {bytes} bytes from the source"
                    )))
                }
            },
        ),
        (Proto::Udp, Dir::Tx) => with_control(|ctl| {
            control(ctl, "udp-reset")?;
            let udp = UdpSocket::bind(("0.0.0.0", UDP_PORT))?;
            let to = peer(np::PORT_SINK);
            let runs = measure(
                bytes,
                RUNS,
                || Ok(()),
                || {
                    for _ in 0..count {
                        udp.send_to(&pattern[..size], to)?;
                    }
                    Ok(())
                },
            )?;
            // The last datagrams may still be on their way: ask until the
            // count stops growing.
            let mut stats = String::new();
            for _ in 0..50 {
                let now = control(ctl, "udp-stats")?;
                if now == stats {
                    break;
                }
                stats = now;
                std::thread::sleep(Duration::from_millis(20));
            }
            eprintln!(
                "bench-linux: net-udp-tx-{size}: {} datagrams sent; the peer: {stats}",
                count * (RUNS as u64 + 1)
            );
            Ok(runs)
        }),
        (Proto::Udp, Dir::Rx) => with_control(|ctl| {
            let udp = UdpSocket::bind(("0.0.0.0", UDP_PORT))?;
            receive_buffer(&udp, 4 << 20)?;
            udp.set_read_timeout(Some(UDP_WAIT))?;
            measure(
                bytes,
                RUNS,
                || Ok(()),
                || {
                    ctl.get_mut()
                        .write_all(format!("udp-send {size} {count} {UDP_PORT}\n").as_bytes())?;
                    for got in 0..count {
                        match udp.recv_from(&mut buf) {
                            Ok((n, _)) if n == size => {}
                            Ok((n, from)) => {
                                return Err(io::Error::other(format!(
                                    "a datagram of {n} bytes from {from}"
                                )))
                            }
                            Err(e) => {
                                return Err(io::Error::other(format!(
                                    "{got} of {count} datagrams, then {e}"
                                )))
                            }
                        }
                    }
                    let line = read_line(ctl)?;
                    if line.starts_with("udp-sent") {
                        Ok(())
                    } else {
                        Err(io::Error::other(format!("the peer: {line}")))
                    }
                },
            )
        }),
    }
}
