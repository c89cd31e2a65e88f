//! The stack and its socket API over smoltcp's loopback device, with a
//! clock that moves only when the stack sleeps (so no test depends on
//! real time): TCP connect, accept, both directions, end of stream; UDP
//! to itself; an echo request answered; timeouts that expire; a
//! generated body (`net::pattern`) streamed with `write_with`.

use net::smoltcp::phy::{Loopback, Medium};
use net::smoltcp::time::{Duration, Instant};
use net::smoltcp::wire::{IpAddress, IpEndpoint, Ipv4Address, Ipv4Cidr};
use net::stack::{Driver, Error, Net, Pinger, TcpConfig, TcpListener, TcpStream, UdpSocket};

struct Fake {
    device: Loopback,
    now: Instant,
    seeds: u64,
}

impl Driver for Fake {
    type Device = Loopback;
    fn device(&mut self) -> &mut Loopback {
        &mut self.device
    }
    fn now(&mut self) -> Instant {
        self.now
    }
    fn wait(&mut self, until: Option<Instant>) {
        // Sleeping moves the clock to the deadline (or a millisecond on).
        self.now = until
            .unwrap_or(self.now + Duration::from_millis(1))
            .max(self.now + Duration::from_micros(1));
    }
    fn seed(&mut self) -> u64 {
        self.seeds = self
            .seeds
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.seeds
    }
}

fn net() -> Net<Fake> {
    let driver = Fake {
        device: Loopback::new(Medium::Ethernet),
        now: Instant::from_millis(0),
        seeds: 7,
    };
    let net = Net::new(driver, [2, 0, 0, 0, 0, 1], false).unwrap();
    net.set_address(Ipv4Cidr::new(Ipv4Address::new(127, 0, 0, 1), 8), None);
    net
}

const HOME: IpAddress = IpAddress::Ipv4(Ipv4Address::new(127, 0, 0, 1));

/// A connection to `port` at home, blocking up to 5 s.
fn connect(net: &Net<Fake>, port: u16) -> TcpStream<Fake> {
    TcpStream::connect(
        net,
        IpEndpoint::new(HOME, port),
        TcpConfig::DEFAULT,
        Some(Duration::from_secs(5)),
    )
    .unwrap()
}

#[test]
fn tcp_both_ways_and_end_of_stream() {
    let net = net();
    let mut listener = TcpListener::bind(&net, 80, 2, TcpConfig::DEFAULT).unwrap();
    listener.set_nonblocking(true);
    assert!(matches!(listener.accept(), Err(Error::WouldBlock)));
    let mut client = connect(&net, 80);
    let (mut server, peer) = listener.accept().unwrap();
    assert_eq!(peer.addr, HOME);
    assert!(peer.port >= net::stack::EPHEMERAL_FIRST);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
    // More than the buffers hold: the writer and the reader alternate.
    let mut got = Vec::new();
    let mut sent = 0;
    server.set_nonblocking(true);
    client.set_nonblocking(true);
    while got.len() < data.len() {
        if sent < data.len() {
            match client.write(&data[sent..]) {
                Ok(n) => sent += n,
                Err(Error::WouldBlock) => {}
                Err(e) => panic!("{e}"),
            }
        }
        let mut buf = [0u8; 4096];
        match server.read(&mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(Error::WouldBlock) => net.wait(None),
            Err(e) => panic!("{e}"),
        }
    }
    assert!(got == data);
    server.set_nonblocking(false);
    server.write_all(b"bye").unwrap();
    server.shutdown();
    client.set_nonblocking(false);
    client.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = [0u8; 8];
    assert_eq!(client.read(&mut buf), Ok(3));
    assert_eq!(&buf[..3], b"bye");
    assert_eq!(client.read(&mut buf), Ok(0), "end of stream");
    drop(client);
    drop(server);
    for _ in 0..100 {
        net.wait(None);
    }
    assert_eq!(net.counters().accepted, 1);
}

#[test]
fn pattern_streamed_in_place() {
    // The HTTP server's way of sending `/pattern/N`: generated straight
    // into the send buffer, whatever stretch of it is free.
    let net = net();
    let mut listener = TcpListener::bind(&net, 81, 1, TcpConfig::DEFAULT).unwrap();
    let mut client = connect(&net, 81);
    let (mut server, _) = listener.accept().unwrap();
    server.set_nonblocking(true);
    client.set_nonblocking(true);
    let total = 300_001u64;
    let (mut made, mut got) = (0u64, Vec::new());
    while (got.len() as u64) < total {
        if made < total {
            let n = server
                .write_with(|buf| {
                    let n = buf.len().min((total - made) as usize);
                    net::pattern::fill(made, &mut buf[..n]);
                    n
                })
                .unwrap();
            made += n as u64;
        }
        net.poll();
        let mut buf = [0u8; 8192];
        match client.read(&mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(Error::WouldBlock) => net.wait(None),
            Err(e) => panic!("{e}"),
        }
    }
    let mut want = vec![0u8; total as usize];
    net::pattern::fill(0, &mut want);
    assert!(got == want);
}

#[test]
fn timeouts_expire() {
    let net = net();
    let _listener = TcpListener::bind(&net, 81, 1, TcpConfig::DEFAULT).unwrap();
    let mut client = connect(&net, 81);
    client.set_read_timeout(Some(Duration::from_millis(300)));
    let start = net.now();
    assert_eq!(client.read(&mut [0u8; 4]), Err(Error::TimedOut));
    assert!(net.now() - start >= Duration::from_millis(300));
    // Nobody listens on 82: refused by a reset.
    assert!(matches!(
        TcpStream::connect(
            &net,
            IpEndpoint::new(HOME, 82),
            TcpConfig::DEFAULT,
            Some(Duration::from_secs(5))
        ),
        Err(Error::Refused)
    ));
    let mut l = TcpListener::bind(&net, 83, 1, TcpConfig::DEFAULT).unwrap();
    assert!(matches!(
        l.accept_timeout(Some(Duration::from_millis(50))),
        Err(Error::TimedOut)
    ));
}

#[test]
fn udp_and_echo() {
    let net = net();
    let mut a = UdpSocket::bind(&net, 0, 4, 4096).unwrap();
    let mut b = UdpSocket::bind(&net, 5000, 4, 4096).unwrap();
    assert!(a.port() >= net::stack::EPHEMERAL_FIRST);
    a.send_to(b"datagram", IpEndpoint::new(HOME, 5000)).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 64];
    let (n, from) = b.recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..n], from.port), (&b"datagram"[..], a.port()));
    b.set_nonblocking(true);
    assert_eq!(b.recv_from(&mut buf), Err(Error::WouldBlock));
    let mut p = Pinger::new(&net).unwrap();
    p.ping(
        Ipv4Address::new(127, 0, 0, 1),
        b"ping!",
        Duration::from_secs(1),
    )
    .unwrap();
}

#[test]
fn udp_send_waits_for_room_and_flushes() {
    let net = net();
    // Room for 2 datagrams on the sending side: the 3rd waits for a poll.
    let mut a = UdpSocket::bind(&net, 0, 2, 4096).unwrap();
    let mut b = UdpSocket::bind(&net, 5001, 64, 64 * 1024).unwrap();
    let to = IpEndpoint::new(HOME, 5001);
    for i in 0..40u8 {
        a.send_to_waiting(&[i; 100], to, Some(Duration::from_secs(1)))
            .unwrap();
    }
    a.flush(Some(Duration::from_secs(1))).unwrap();
    b.set_nonblocking(true);
    let mut buf = [0u8; 200];
    for i in 0..40u8 {
        let (n, _) = b.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], &[i; 100][..]);
    }
    assert_eq!(b.recv_from(&mut buf), Err(Error::WouldBlock));
}
