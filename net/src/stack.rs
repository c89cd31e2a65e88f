//! The network stack: smoltcp's interface and sockets over a [`Driver`]
//! (a device, a clock and a way to sleep), with DHCP, and the socket API
//! applications use ([`TcpListener`], [`TcpStream`], [`UdpSocket`],
//! [`Pinger`]), in blocking and non-blocking forms with timeouts.
//!
//! The stack is a library in the application's address space (Genode's
//! and LionsOS's model; docs/network.md says why). One thread drives it:
//! every socket holds a [`Net`], a shared handle to the one [`Stack`]; a
//! blocking call polls the stack, tries, and sleeps in
//! [`Driver::wait`] until the device has work or smoltcp's next timer
//! (retransmission, DHCP renewal) or the call's own deadline is due — no
//! busy-waiting. A program that serves many sockets uses the
//! non-blocking forms and [`Net::wait`] as its `poll(2)`.
//!
//! Settings (docs/network.md has what each changes):
//!
//! - TCP: no delayed ACK (`set_ack_delay(None)`: smoltcp's default 10 ms
//!   stalls request/response traffic); Nagle on unless
//!   [`TcpStream::set_nodelay`]; buffers per socket as [`TcpConfig`] says
//!   (default [`TcpConfig::DEFAULT`]: 64 KiB each way, the largest window
//!   without scaling).
//! - Randomness: smoltcp's seed (TCP initial sequence numbers, DHCP
//!   transaction ids) and the ephemeral ports come from the seed the
//!   driver gives ([`Driver::seed`]: RDRAND on Pecan), never a constant.
//!
//! Invariant: every socket handle a [`TcpStream`], [`TcpListener`],
//! [`UdpSocket`] or [`Pinger`] holds is in the stack's socket set until
//! that value is dropped; a dropped TCP stream's socket stays until its
//! connection closed (or [`LINGER`] passed), then goes.

use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::{RefCell, RefMut};
use core::fmt;

use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::phy::Device;
use smoltcp::socket::{dhcpv4, icmp, tcp, udp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{
    EthernetAddress, HardwareAddress, Icmpv4Packet, Icmpv4Repr, IpAddress, IpCidr, IpEndpoint,
    IpListenEndpoint, Ipv4Address, Ipv4Cidr,
};

/// How long a dropped stream's socket may take to close before it is
/// aborted.
pub const LINGER: Duration = Duration::from_secs(10);
/// The first ephemeral port (IANA's dynamic range, RFC 6335).
pub const EPHEMERAL_FIRST: u16 = 49152;

/// What the stack runs on.
pub trait Driver {
    /// The network device.
    type Device: Device;
    /// The device.
    fn device(&mut self) -> &mut Self::Device;
    /// The time now (any monotonic clock starting near 0).
    fn now(&mut self) -> Instant;
    /// Sleeps until the device has something (a frame, room to send) or
    /// `until` (`None`: no deadline) passed; may return early.
    fn wait(&mut self, until: Option<Instant>);
    /// 64 random bits, fresh for each call.
    fn seed(&mut self) -> u64;
    /// Publishes what the device staged in a poll (called after each).
    fn flush(&mut self) {}
}

/// Why a socket operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Non-blocking, and it would block.
    WouldBlock,
    /// The timeout passed.
    TimedOut,
    /// The connection was reset or is not open.
    NotConnected,
    /// The connection was refused (reset while connecting).
    Refused,
    /// The port is taken, or the address is not one to bind or reach.
    Address,
    /// The interface has no address yet (no DHCP lease).
    NoAddress,
    /// The datagram does not fit the socket's buffer.
    TooLarge,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::WouldBlock => "would block",
            Error::TimedOut => "timed out",
            Error::NotConnected => "not connected",
            Error::Refused => "connection refused",
            Error::Address => "address in use or not reachable",
            Error::NoAddress => "no address yet",
            Error::TooLarge => "too large for the buffer",
        })
    }
}

/// The address DHCP gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The interface's address and prefix.
    pub address: Ipv4Cidr,
    /// The default router, if the server named one.
    pub router: Option<Ipv4Address>,
    /// The DHCP server.
    pub server: Ipv4Address,
    /// When the lease was taken (the stack's clock).
    pub since: Instant,
}

impl fmt::Display for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} from {}", self.address, self.server)?;
        match self.router {
            Some(r) => write!(f, ", router {r}"),
            None => f.write_str(", no router"),
        }
    }
}

/// What changed in the stack, for the application to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// DHCP gave (or renewed with changes) a lease.
    Leased(Lease),
    /// The lease was lost.
    LeaseLost,
}

/// Socket buffer sizes of a TCP socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// Receive buffer bytes (the most window advertised).
    pub rx: usize,
    /// Transmit buffer bytes (the most data unacknowledged plus queued).
    pub tx: usize,
}

impl TcpConfig {
    /// 64 KiB each way: the largest window without window scaling.
    pub const DEFAULT: TcpConfig = TcpConfig {
        rx: 64 * 1024,
        tx: 64 * 1024,
    };
}

/// Counters of the stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Polls of the interface.
    pub polls: u64,
    /// TCP connections accepted.
    pub accepted: u64,
    /// Sockets of dropped streams aborted after [`LINGER`].
    pub lingered_out: u64,
}

/// The stack: smoltcp's interface and sockets, the driver, DHCP.
pub struct Stack<D: Driver> {
    iface: Interface,
    sockets: SocketSet<'static>,
    driver: D,
    dhcp: Option<SocketHandle>,
    lease: Option<Lease>,
    events: VecDeque<Event>,
    /// Dropped streams' sockets still closing, with their deadlines.
    closing: Vec<(SocketHandle, Instant)>,
    /// State of the ephemeral-port generator (xorshift64, seeded from
    /// the driver).
    ports: u64,
    counters: Counters,
}

/// A shared handle to the stack (cheap to clone; one thread).
pub struct Net<D: Driver>(Rc<RefCell<Stack<D>>>);

impl<D: Driver> Clone for Net<D> {
    fn clone(&self) -> Self {
        Net(self.0.clone())
    }
}

/// The time `timeout` after `now`, if any.
fn deadline(now: Instant, timeout: Option<Duration>) -> Option<Instant> {
    timeout.map(|t| now + t)
}

impl<D: Driver> Net<D> {
    /// A stack on `driver` for the interface of MAC address `mac`, with
    /// the DHCP client running when `dhcp` (else configure it with
    /// [`Net::set_address`]).
    pub fn new(mut driver: D, mac: [u8; 6], dhcp: bool) -> Result<Net<D>, Error> {
        let mac = EthernetAddress(mac);
        if !mac.is_unicast() {
            return Err(Error::Address);
        }
        let mut config = Config::new(HardwareAddress::Ethernet(mac));
        config.random_seed = driver.seed();
        let now = driver.now();
        let iface = Interface::new(config, driver.device(), now);
        let mut sockets = SocketSet::new(vec![]);
        let dhcp = dhcp.then(|| sockets.add(dhcpv4::Socket::new()));
        let ports = driver.seed() | 1;
        Ok(Net(Rc::new(RefCell::new(Stack {
            iface,
            sockets,
            driver,
            dhcp,
            lease: None,
            events: VecDeque::new(),
            closing: Vec::new(),
            ports,
            counters: Counters::default(),
        }))))
    }

    fn stack(&self) -> RefMut<'_, Stack<D>> {
        self.0.borrow_mut()
    }

    /// Runs the stack once: frames in and out, timers, DHCP.
    pub fn poll(&self) {
        let _ = self.stack().poll();
    }

    /// Polls, then sleeps until the device has work, smoltcp's next
    /// timer is due or `until` passed; polls again. A program serving many
    /// sockets calls this, then looks at its sockets (its `poll(2)`).
    pub fn wait(&self, until: Option<Instant>) {
        let mut s = self.stack();
        if s.poll() {
            // Sockets changed: the caller looks at them before sleeping.
            return;
        }
        let now = s.driver.now();
        let Stack { iface, sockets, .. } = &mut *s;
        let next = iface.poll_at(now, sockets);
        let wake = match (next, until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if wake.is_none_or(|w| w > now) {
            s.driver.wait(wake);
        }
        s.poll();
    }

    /// The time now.
    pub fn now(&self) -> Instant {
        self.stack().driver.now()
    }

    /// The lease, once DHCP gave one.
    pub fn lease(&self) -> Option<Lease> {
        self.stack().lease
    }

    /// The next thing that happened, for the log.
    pub fn event(&self) -> Option<Event> {
        self.stack().events.pop_front()
    }

    /// The stack's counters.
    pub fn counters(&self) -> Counters {
        self.stack().counters
    }

    /// The interface's IPv4 address, if it has one.
    pub fn address(&self) -> Option<Ipv4Address> {
        self.stack().iface.ipv4_addr()
    }

    /// Configures the address statically (and the default route).
    pub fn set_address(&self, address: Ipv4Cidr, router: Option<Ipv4Address>) {
        self.stack().configure(Some((address, router)));
    }

    /// Waits until DHCP gave a lease, at most `timeout`.
    pub fn wait_for_lease(&self, timeout: Option<Duration>) -> Result<Lease, Error> {
        let end = deadline(self.now(), timeout);
        loop {
            if let Some(l) = self.lease() {
                return Ok(l);
            }
            if end.is_some_and(|e| self.now() >= e) {
                return Err(Error::TimedOut);
            }
            self.wait(end);
        }
    }

    /// Runs `f` on the driver (to read its counters).
    pub fn with_driver<R>(&self, f: impl FnOnce(&mut D) -> R) -> R {
        f(&mut self.stack().driver)
    }

    /// Repeats `op` until it does not say [`Error::WouldBlock`], waiting
    /// for the stack in between, at most until `end`.
    fn block<R>(
        &self,
        end: Option<Instant>,
        mut op: impl FnMut(&mut Stack<D>) -> Result<R, Error>,
    ) -> Result<R, Error> {
        // What can be done without a poll is: a read of data already
        // received, a write into free buffer space.
        let first = op(&mut self.stack());
        match first {
            Err(Error::WouldBlock) => {}
            r => return r,
        }
        loop {
            {
                let mut s = self.stack();
                s.poll();
                match op(&mut s) {
                    Err(Error::WouldBlock) => {}
                    r => return r,
                }
                if end.is_some_and(|e| s.driver.now() >= e) {
                    return Err(Error::TimedOut);
                }
            }
            self.wait(end);
        }
    }
}

impl<D: Driver> Stack<D> {
    /// Polls the interface: whether a socket's state may have changed.
    fn poll(&mut self) -> bool {
        let now = self.driver.now();
        self.counters.polls += 1;
        let Stack {
            iface,
            sockets,
            driver,
            ..
        } = self;
        let changed = iface.poll(now, driver.device(), sockets) == PollResult::SocketStateChanged;
        driver.flush();
        if let Some(h) = self.dhcp {
            // The event borrows the socket: take what is needed first.
            let event = match self.sockets.get_mut::<dhcpv4::Socket>(h).poll() {
                Some(dhcpv4::Event::Configured(c)) => Some(Some(Lease {
                    address: c.address,
                    router: c.router,
                    server: c.server.address,
                    since: now,
                })),
                Some(dhcpv4::Event::Deconfigured) => Some(None),
                None => None,
            };
            match event {
                Some(Some(lease)) => {
                    let c = lease;
                    self.configure(Some((c.address, c.router)));
                    self.lease = Some(lease);
                    self.events.push_back(Event::Leased(lease));
                }
                // The client starts deconfigured: only a lease held is lost.
                Some(None) if self.lease.is_some() => {
                    self.configure(None);
                    self.lease = None;
                    self.events.push_back(Event::LeaseLost);
                }
                Some(None) => {}
                None => {}
            }
        }
        let sockets = &mut self.sockets;
        let counters = &mut self.counters;
        self.closing.retain(|&(h, end)| {
            let s = sockets.get_mut::<tcp::Socket>(h);
            let done = matches!(s.state(), tcp::State::Closed | tcp::State::TimeWait);
            if done || now >= end {
                if !done {
                    s.abort();
                    counters.lingered_out += 1;
                }
                // An aborted socket's RST is lost with it: the peer learns
                // at its next segment.
                sockets.remove(h);
                return false;
            }
            true
        });
        changed
    }

    fn configure(&mut self, config: Option<(Ipv4Cidr, Option<Ipv4Address>)>) {
        self.iface.update_ip_addrs(|addrs| {
            addrs.clear();
            if let Some((a, _)) = config {
                // One address: the vector has room for it.
                let _ = addrs.push(IpCidr::Ipv4(a));
            }
        });
        let routes = self.iface.routes_mut();
        routes.remove_default_ipv4_route();
        if let Some((_, Some(r))) = config {
            // The table has room for the default route.
            let _ = routes.add_default_ipv4_route(r);
        }
    }

    fn ephemeral_port(&mut self) -> u16 {
        // xorshift64: not for secrets, only to make ports hard to guess
        // from the seed's start.
        let mut x = self.ports;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.ports = x;
        EPHEMERAL_FIRST + (x % u64::from(u16::MAX - EPHEMERAL_FIRST + 1)) as u16
    }

    fn tcp(&mut self, h: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(h)
    }

    fn new_tcp(&mut self, config: TcpConfig) -> SocketHandle {
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; config.rx]),
            tcp::SocketBuffer::new(vec![0; config.tx]),
        );
        s.set_ack_delay(None);
        self.sockets.add(s)
    }
}

/// A TCP socket listening on a port, with a backlog of sockets each
/// ready to take one connection (smoltcp's listening socket becomes the
/// connection; a fresh one takes its place when it is accepted).
pub struct TcpListener<D: Driver> {
    net: Net<D>,
    port: u16,
    config: TcpConfig,
    backlog: Vec<SocketHandle>,
    nonblocking: bool,
}

impl<D: Driver> TcpListener<D> {
    /// Listens on `port` of every address, with `backlog` connections
    /// (at least 1) accepted by the stack before [`Self::accept`] takes
    /// them, each with buffers of `config`.
    pub fn bind(
        net: &Net<D>,
        port: u16,
        backlog: usize,
        config: TcpConfig,
    ) -> Result<TcpListener<D>, Error> {
        if port == 0 {
            return Err(Error::Address);
        }
        let mut l = TcpListener {
            net: net.clone(),
            port,
            config,
            backlog: Vec::new(),
            nonblocking: false,
        };
        for _ in 0..backlog.max(1) {
            let h = l.listening()?;
            l.backlog.push(h);
        }
        Ok(l)
    }

    fn listening(&self) -> Result<SocketHandle, Error> {
        let mut s = self.net.stack();
        let h = s.new_tcp(self.config);
        if s.tcp(h).listen(self.port).is_err() {
            s.sockets.remove(h);
            return Err(Error::Address);
        }
        Ok(h)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Makes [`Self::accept`] return [`Error::WouldBlock`] instead of
    /// waiting.
    pub fn set_nonblocking(&mut self, yes: bool) {
        self.nonblocking = yes;
    }

    /// The next connection, and its peer.
    pub fn accept(&mut self) -> Result<(TcpStream<D>, IpEndpoint), Error> {
        if self.nonblocking {
            self.net.poll();
            self.try_accept()
        } else {
            self.accept_timeout(None)
        }
    }

    /// The next connection, waiting at most `timeout` (`None`: for ever).
    pub fn accept_timeout(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<(TcpStream<D>, IpEndpoint), Error> {
        let end = deadline(self.net.now(), timeout);
        loop {
            match self.try_accept() {
                Err(Error::WouldBlock) => {}
                r => return r,
            }
            if end.is_some_and(|e| self.net.now() >= e) {
                return Err(Error::TimedOut);
            }
            self.net.wait(end);
        }
    }

    fn try_accept(&mut self) -> Result<(TcpStream<D>, IpEndpoint), Error> {
        let ready = {
            let mut s = self.net.stack();
            self.backlog.iter().position(|&h| {
                let t = s.tcp(h);
                !matches!(t.state(), tcp::State::Listen | tcp::State::SynReceived)
            })
        };
        let Some(i) = ready else {
            return Err(Error::WouldBlock);
        };
        // A fresh socket takes its place first, so the port keeps
        // listening; the refill fails only if the port could not be
        // bound, which it was.
        let fresh = self.listening()?;
        let h = core::mem::replace(&mut self.backlog[i], fresh);
        let mut s = self.net.stack();
        s.counters.accepted += 1;
        let peer = s.tcp(h).remote_endpoint();
        drop(s);
        let stream = TcpStream::from_handle(&self.net, h);
        // Reset before it was taken: the peer is gone, the stream reads
        // end-of-file at once.
        let peer = peer.unwrap_or(IpEndpoint::new(IpAddress::v4(0, 0, 0, 0), 0));
        Ok((stream, peer))
    }
}

impl<D: Driver> Drop for TcpListener<D> {
    fn drop(&mut self) {
        let mut s = self.net.stack();
        for h in self.backlog.drain(..) {
            s.tcp(h).abort();
            s.sockets.remove(h);
        }
    }
}

/// A TCP connection.
pub struct TcpStream<D: Driver> {
    net: Net<D>,
    handle: SocketHandle,
    nonblocking: bool,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    /// Bytes read since the last poll this stream made ([`Self::consumed`]).
    read_unpolled: usize,
}

impl<D: Driver> TcpStream<D> {
    fn from_handle(net: &Net<D>, handle: SocketHandle) -> TcpStream<D> {
        TcpStream {
            net: net.clone(),
            handle,
            nonblocking: false,
            read_timeout: None,
            write_timeout: None,
            read_unpolled: 0,
        }
    }

    /// Connects to `remote` from an ephemeral port, waiting at most
    /// `timeout` for the handshake.
    pub fn connect(
        net: &Net<D>,
        remote: IpEndpoint,
        config: TcpConfig,
        timeout: Option<Duration>,
    ) -> Result<TcpStream<D>, Error> {
        let handle = {
            let mut s = net.stack();
            if s.iface.ipv4_addr().is_none() {
                return Err(Error::NoAddress);
            }
            let h = s.new_tcp(config);
            let port = s.ephemeral_port();
            let Stack { iface, sockets, .. } = &mut *s;
            let local = IpListenEndpoint { addr: None, port };
            if sockets
                .get_mut::<tcp::Socket>(h)
                .connect(iface.context(), remote, local)
                .is_err()
            {
                sockets.remove(h);
                return Err(Error::Address);
            }
            h
        };
        // From here the stream owns the socket: an error drops it.
        let stream = TcpStream::from_handle(net, handle);
        let end = deadline(net.now(), timeout);
        net.block(end, |s| match s.tcp(handle).state() {
            tcp::State::Established => Ok(()),
            tcp::State::SynSent | tcp::State::SynReceived => Err(Error::WouldBlock),
            _ => Err(Error::Refused),
        })?;
        Ok(stream)
    }

    /// Makes reads and writes return [`Error::WouldBlock`] instead of
    /// waiting.
    pub fn set_nonblocking(&mut self, yes: bool) {
        self.nonblocking = yes;
    }

    /// The longest a blocking read waits (`None`: for ever).
    pub fn set_read_timeout(&mut self, t: Option<Duration>) {
        self.read_timeout = t;
    }

    /// The longest a blocking write waits (`None`: for ever).
    pub fn set_write_timeout(&mut self, t: Option<Duration>) {
        self.write_timeout = t;
    }

    /// Turns Nagle's algorithm off (`true`) or on: off, every write goes
    /// out at the next poll even while data is unacknowledged.
    pub fn set_nodelay(&mut self, yes: bool) {
        self.net.stack().tcp(self.handle).set_nagle_enabled(!yes);
    }

    /// The peer's address and port.
    pub fn peer(&self) -> Option<IpEndpoint> {
        self.net.stack().tcp(self.handle).remote_endpoint()
    }

    /// Whether data (or the end of it) can be read now without blocking.
    pub fn readable(&self) -> bool {
        let mut s = self.net.stack();
        let t = s.tcp(self.handle);
        t.can_recv() || !t.may_recv()
    }

    /// Bytes waiting to be sent or acknowledged.
    pub fn unsent(&self) -> usize {
        self.net.stack().tcp(self.handle).send_queue()
    }

    /// Whether the connection is still open for sending.
    pub fn is_open(&self) -> bool {
        self.net.stack().tcp(self.handle).may_send()
    }

    fn mode_end(&self, timeout: Option<Duration>) -> Option<Option<Instant>> {
        (!self.nonblocking).then(|| deadline(self.net.now(), timeout))
    }

    /// Runs `op` on the socket, polling only when it would block (then
    /// waiting, in the blocking mode) and, if `poll_after`, once after it
    /// (a write's data leaves now, not at the next call).
    fn run<R>(
        &self,
        end: Option<Option<Instant>>,
        poll_after: bool,
        mut op: impl FnMut(&mut tcp::Socket<'static>) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let h = self.handle;
        let r = match end {
            None => {
                // (The borrow of the stack ends before the poll.)
                let first = op(self.net.stack().tcp(h));
                match first {
                    Err(Error::WouldBlock) => {
                        self.net.poll();
                        op(self.net.stack().tcp(h))
                    }
                    r => r,
                }
            }
            Some(end) => self.net.block(end, |s| op(s.tcp(h))),
        };
        if poll_after {
            self.net.poll();
        }
        r
    }

    /// After a read of `n` bytes: polls once a quarter of the receive
    /// buffer was read since the last poll, or when it is empty, so the
    /// peer learns of the opened window (smoltcp sends the update at a
    /// poll) — but not at every small read, which would cost a poll of
    /// the whole stack per read.
    fn consumed(&mut self, n: usize) {
        self.read_unpolled += n;
        let (queued, capacity) = {
            let mut s = self.net.stack();
            let t = s.tcp(self.handle);
            (t.recv_queue(), t.recv_capacity())
        };
        if queued == 0 || self.read_unpolled >= capacity / 4 {
            self.read_unpolled = 0;
            self.net.poll();
        }
    }

    /// Reads into `buf`: the bytes read, 0 at the end of the stream.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        let end = self.mode_end(self.read_timeout);
        let r = self.run(end, false, |t| {
            if t.can_recv() {
                return t.recv_slice(buf).map_err(|_| Error::NotConnected);
            }
            if !t.may_recv() {
                // The peer closed (FIN) or the connection is gone.
                return Ok(0);
            }
            Err(Error::WouldBlock)
        });
        if let Ok(n) = r {
            self.consumed(n);
        }
        r
    }

    /// Runs `f` on the bytes received so far (a contiguous part of the
    /// receive buffer, without copying); `f` says how many it consumed.
    /// [`Error::WouldBlock`] if there are none yet; `Ok(None)` at the end
    /// of the stream. Non-blocking.
    pub fn read_with<R>(
        &mut self,
        f: impl FnOnce(&[u8]) -> (usize, R),
    ) -> Result<Option<R>, Error> {
        let mut s = self.net.stack();
        let t = s.tcp(self.handle);
        if t.can_recv() {
            return t
                .recv(|data| {
                    let (n, r) = f(data);
                    (n.min(data.len()), Some(r))
                })
                .map_err(|_| Error::NotConnected);
        }
        if !t.may_recv() {
            return Ok(None);
        }
        Err(Error::WouldBlock)
    }

    /// Writes from `buf`: the bytes queued for sending.
    pub fn write(&mut self, buf: &[u8]) -> Result<usize, Error> {
        let end = self.mode_end(self.write_timeout);
        self.run(end, true, |t| {
            if !t.may_send() {
                return Err(Error::NotConnected);
            }
            if buf.is_empty() {
                return Ok(0);
            }
            match t.send_slice(buf) {
                Ok(0) => Err(Error::WouldBlock),
                Ok(n) => Ok(n),
                Err(_) => Err(Error::NotConnected),
            }
        })
    }

    /// Writes all of `buf` (blocking, whatever the mode, at most the
    /// write timeout for each part).
    pub fn write_all(&mut self, mut buf: &[u8]) -> Result<(), Error> {
        let was = self.nonblocking;
        self.nonblocking = false;
        let mut r = Ok(());
        while !buf.is_empty() {
            match self.write(buf) {
                Ok(n) => buf = &buf[n..],
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        self.nonblocking = was;
        r
    }

    /// Queues as much of `buf` as fits now, without waiting and without
    /// polling (the caller polls once for a batch of writes).
    pub fn write_some(&mut self, buf: &[u8]) -> Result<usize, Error> {
        let mut s = self.net.stack();
        let t = s.tcp(self.handle);
        if !t.may_send() {
            return Err(Error::NotConnected);
        }
        t.send_slice(buf).map_err(|_| Error::NotConnected)
    }

    /// Lets `f` write into the free part of the send buffer without a
    /// copy: `f` gets a contiguous stretch of it (empty when the buffer
    /// is full) and returns how many bytes it wrote from its start, which
    /// are queued. Returns that count. Like [`TcpStream::write_some`], it
    /// neither waits nor polls; the buffer is a ring, so a second call
    /// may find the stretch after the wrap.
    pub fn write_with(&mut self, f: impl FnOnce(&mut [u8]) -> usize) -> Result<usize, Error> {
        let mut s = self.net.stack();
        let t = s.tcp(self.handle);
        if !t.may_send() {
            return Err(Error::NotConnected);
        }
        t.send(|buf| {
            let n = f(buf).min(buf.len());
            (n, n)
        })
        .map_err(|_| Error::NotConnected)
    }

    /// Waits until everything written was acknowledged (blocking, at
    /// most the write timeout).
    pub fn flush(&mut self) -> Result<(), Error> {
        let end = deadline(self.net.now(), self.write_timeout);
        self.net.block(end, |s| {
            let t = s.tcp(self.handle);
            if t.send_queue() == 0 {
                Ok(())
            } else if !t.may_send() && !t.is_active() {
                Err(Error::NotConnected)
            } else {
                Err(Error::WouldBlock)
            }
        })
    }

    /// Closes the sending side (FIN after the data written); reading
    /// goes on until the peer closes.
    pub fn shutdown(&mut self) {
        self.net.stack().tcp(self.handle).close();
        self.net.poll();
    }

    /// Resets the connection (RST).
    pub fn abort(&mut self) {
        self.net.stack().tcp(self.handle).abort();
        self.net.poll();
    }
}

impl<D: Driver> Drop for TcpStream<D> {
    fn drop(&mut self) {
        let mut s = self.net.stack();
        let now = s.driver.now();
        s.tcp(self.handle).close();
        s.closing.push((self.handle, now + LINGER));
        drop(s);
        self.net.poll();
    }
}

/// A UDP socket.
pub struct UdpSocket<D: Driver> {
    net: Net<D>,
    handle: SocketHandle,
    nonblocking: bool,
    read_timeout: Option<Duration>,
}

impl<D: Driver> UdpSocket<D> {
    /// A socket bound to `port` (0: an ephemeral one) with room for
    /// `packets` datagrams of up to `bytes` in all each way.
    pub fn bind(
        net: &Net<D>,
        port: u16,
        packets: usize,
        bytes: usize,
    ) -> Result<UdpSocket<D>, Error> {
        let mut s = net.stack();
        let port = if port == 0 { s.ephemeral_port() } else { port };
        let buffer = || {
            udp::PacketBuffer::new(
                vec![udp::PacketMetadata::EMPTY; packets.max(1)],
                vec![0; bytes],
            )
        };
        let mut socket = udp::Socket::new(buffer(), buffer());
        socket.bind(port).map_err(|_| Error::Address)?;
        let handle = s.sockets.add(socket);
        drop(s);
        Ok(UdpSocket {
            net: net.clone(),
            handle,
            nonblocking: false,
            read_timeout: None,
        })
    }

    /// The local port.
    pub fn port(&self) -> u16 {
        self.net
            .stack()
            .sockets
            .get::<udp::Socket>(self.handle)
            .endpoint()
            .port
    }

    /// Makes receives return [`Error::WouldBlock`] instead of waiting.
    pub fn set_nonblocking(&mut self, yes: bool) {
        self.nonblocking = yes;
    }

    /// The longest a blocking receive waits (`None`: for ever).
    pub fn set_read_timeout(&mut self, t: Option<Duration>) {
        self.read_timeout = t;
    }

    /// Queues datagram `data` for `to` (sent at the next poll; never
    /// blocks: a full buffer is [`Error::WouldBlock`]).
    pub fn send_to(&mut self, data: &[u8], to: IpEndpoint) -> Result<(), Error> {
        let mut s = self.net.stack();
        let r = match s
            .sockets
            .get_mut::<udp::Socket>(self.handle)
            .send_slice(data, to)
        {
            Ok(()) => Ok(()),
            Err(udp::SendError::BufferFull) if data.len() > 1472 => Err(Error::TooLarge),
            Err(udp::SendError::BufferFull) => Err(Error::WouldBlock),
            Err(udp::SendError::Unaddressable) => Err(Error::Address),
        };
        drop(s);
        self.net.poll();
        r
    }

    /// Queues datagram `data` for `to`, waiting while the send buffer is
    /// full (at most `timeout`; `None`: for ever). The stack is polled
    /// only when the buffer is full: datagrams queued in a row leave in
    /// one batch (call [`UdpSocket::flush`] after the last).
    pub fn send_to_waiting(
        &mut self,
        data: &[u8],
        to: IpEndpoint,
        timeout: Option<Duration>,
    ) -> Result<(), Error> {
        let h = self.handle;
        let op = |s: &mut Stack<D>| match s.sockets.get_mut::<udp::Socket>(h).send_slice(data, to) {
            Ok(()) => Ok(()),
            Err(udp::SendError::BufferFull) if data.len() > 1472 => Err(Error::TooLarge),
            Err(udp::SendError::BufferFull) => Err(Error::WouldBlock),
            Err(udp::SendError::Unaddressable) => Err(Error::Address),
        };
        // `block` tries once before it polls: a datagram fits the
        // socket's buffer without a poll, and datagrams leave in batches.
        let end = deadline(self.net.now(), timeout);
        self.net.block(end, op)
    }

    /// Waits until every queued datagram has gone to the device (at
    /// most `timeout`; `None`: for ever).
    pub fn flush(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        let h = self.handle;
        let end = deadline(self.net.now(), timeout);
        self.net.block(end, |s| {
            if s.sockets.get::<udp::Socket>(h).send_queue() == 0 {
                Ok(())
            } else {
                Err(Error::WouldBlock)
            }
        })
    }

    /// Receives a datagram into `buf` (cut to fit): its length and sender.
    pub fn recv_from(&mut self, buf: &mut [u8]) -> Result<(usize, IpEndpoint), Error> {
        let h = self.handle;
        let mut op = |s: &mut Stack<D>| match s.sockets.get_mut::<udp::Socket>(h).recv() {
            Ok((data, meta)) => {
                let n = data.len().min(buf.len());
                buf[..n].copy_from_slice(&data[..n]);
                Ok((n, meta.endpoint))
            }
            Err(_) => Err(Error::WouldBlock),
        };
        // A datagram already buffered is taken without polling: a poll
        // may take in a whole batch of frames, and a reader that polled
        // for each datagram would fill the socket's buffer faster than it
        // empties it (datagrams beyond it are dropped).
        {
            let mut s = self.net.stack();
            if s.sockets.get::<udp::Socket>(h).can_recv() {
                return op(&mut s);
            }
            if self.nonblocking {
                s.poll();
                return op(&mut s);
            }
        }
        let end = deadline(self.net.now(), self.read_timeout);
        self.net.block(end, op)
    }
}

impl<D: Driver> Drop for UdpSocket<D> {
    fn drop(&mut self) {
        self.net.stack().sockets.remove(self.handle);
    }
}

/// ICMP echo requests and their replies (ping).
pub struct Pinger<D: Driver> {
    net: Net<D>,
    handle: SocketHandle,
    ident: u16,
    seq: u16,
}

impl<D: Driver> Pinger<D> {
    /// A socket for echo requests.
    pub fn new(net: &Net<D>) -> Result<Pinger<D>, Error> {
        let mut s = net.stack();
        let ident = s.ephemeral_port();
        let buffer =
            || icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 4], vec![0; 4 * 1100]);
        let mut socket = icmp::Socket::new(buffer(), buffer());
        socket
            .bind(icmp::Endpoint::Ident(ident))
            .map_err(|_| Error::Address)?;
        let handle = s.sockets.add(socket);
        drop(s);
        Ok(Pinger {
            net: net.clone(),
            handle,
            ident,
            seq: 0,
        })
    }

    /// Sends an echo request with `payload` to `to` and waits for its
    /// reply, at most `timeout`: the round trip.
    pub fn ping(
        &mut self,
        to: Ipv4Address,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<Duration, Error> {
        self.seq = self.seq.wrapping_add(1);
        let (ident, seq, h) = (self.ident, self.seq, self.handle);
        let start = self.net.now();
        let end = Some(start + timeout);
        let request = Icmpv4Repr::EchoRequest {
            ident,
            seq_no: seq,
            data: payload,
        };
        // Queued once; the wait below sends it (after ARP resolution).
        self.net.block(end, |s| {
            let caps = s.driver.device().capabilities();
            let socket = s.sockets.get_mut::<icmp::Socket>(h);
            match socket.send(request.buffer_len(), IpAddress::Ipv4(to)) {
                Ok(buf) => {
                    let mut packet = Icmpv4Packet::new_unchecked(buf);
                    request.emit(&mut packet, &caps.checksum);
                    Ok(())
                }
                Err(icmp::SendError::BufferFull) => Err(Error::WouldBlock),
                Err(icmp::SendError::Unaddressable) => Err(Error::Address),
            }
        })?;
        self.net.block(end, |s| {
            let caps = s.driver.device().capabilities();
            let socket = s.sockets.get_mut::<icmp::Socket>(h);
            while let Ok((data, from)) = socket.recv() {
                let Ok(packet) = Icmpv4Packet::new_checked(data) else {
                    continue;
                };
                let Ok(repr) = Icmpv4Repr::parse(&packet, &caps.checksum) else {
                    continue;
                };
                if let Icmpv4Repr::EchoReply {
                    ident: i,
                    seq_no,
                    data,
                } = repr
                {
                    if from == IpAddress::Ipv4(to) && i == ident && seq_no == seq && data == payload
                    {
                        return Ok(());
                    }
                }
            }
            Err(Error::WouldBlock)
        })?;
        Ok(self.net.now() - start)
    }
}

impl<D: Driver> Drop for Pinger<D> {
    fn drop(&mut self) {
        self.net.stack().sockets.remove(self.handle);
    }
}
