//! http-server: an HTTP/1.1 server on the network stack library (`net`)
//! over a Nic session (docs/network.md, "The HTTP server").
//!
//! 1. Opens the Nic and Timer sessions (`net::pecan::open`), takes an
//!    address by DHCP and prints the lease, pings the DHCP server (which
//!    resolves its MAC address by ARP, logged), and listens on port 80.
//! 2. Serves, in one thread, every connection with the non-blocking
//!    socket API and `Net::wait` as its `poll(2)`: HTTP/1.1 with
//!    keep-alive and pipelining, `GET` and `HEAD`, `Content-Length` on
//!    every response. Each connection's request side is
//!    `net::conn::Conn` (host-tested): a malformed request gets 400, a
//!    head over 8 KiB 431, a head not complete within the head timeout
//!    (slowloris, a missing empty line) 408 — then the connection closes
//!    and the server goes on.
//! 3. Pages (`net::serve` decides the answers: the same source as the
//!    lab's Linux build of this server, `bench-linux http-serve`): `/` the
//!    status page (HTML), `/status.json` the same report
//!    as JSON (`net::report`: only figures measured or configured — with a
//!    `Status` route, init's for every component (state, restarts, RAM and
//!    capability quotas, sampled CPU time); the server's own uptime,
//!    requests, connections, the lease, the stack's and the device's
//!    counters); any other path a static file — from the File system
//!    session when the scenario routes one (a FAT partition), else from
//!    the ROM module `www` (a cpio archive xtask packs from the scenario's
//!    `archives`), else 404.
//! 4. `/pattern/BYTES`: a generated body of BYTES bytes (decimal, at
//!    most 64 MiB; `net::pattern` defines the bytes — 16-byte records,
//!    each its own offset in hex and a line feed — and the path's
//!    rules): for transfer tests (`tests/http-kill.toml`, 20 MiB across
//!    a driver kill) and throughput benchmarks. It is streamed: made
//!    piece by piece straight into the socket's send buffer
//!    (`TcpStream::write_with`) as room frees up, never held whole;
//!    `HEAD` answers the head with the same `Content-Length`. A number
//!    that is not plain decimal (a leading zero, a sign, another
//!    character) is 404, one over 64 MiB 400. Pipelined requests behind
//!    it wait until its last byte is queued. Bodies of 1 MiB or more are
//!    logged when they start and when their last byte is queued
//!    (`http-server: /pattern/N: sending N bytes`, `... N bytes queued in
//!    M ms`).
//!
//! The component's argument is the head timeout in ms (0: 5000).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

use net::conn::{Conn, Expiry, Next, Timeouts};
use net::http::{Request, Status};
use net::pecan::PecanDriver;
use net::report::{Report, Section};
use net::smoltcp::time::{Duration, Instant};
use net::stack::{Error, Event, Lease, Net, Pinger, TcpConfig, TcpListener, TcpStream};
use rt::interfaces::child;
use rt::println;
use rt::session::rom::Rom;
use rt::session::status::Status as InitStatus;
use rt::session::{self, Session};

rt::entry!(main);

/// The stack's slots, then the others.
const NET_FIRST: u32 = child::FIRST_FREE;
const HEAP_SLOT: u32 = NET_FIRST + net::pecan::SLOTS;
/// 2 MiB frames added to the heap: the sockets' buffers.
const HEAP_FRAMES: u32 = 3;
const FS_FIRST: u32 = HEAP_SLOT + HEAP_FRAMES;
const ROM_SLOT: u32 = FS_FIRST + 4;
/// Init's Status session, when the scenario routes one.
const STATUS_SLOT: u32 = ROM_SLOT + 1;
const ROM_FIRST: u32 = STATUS_SLOT + 1;
/// Pages of the `www` module the server maps at most (1 MiB).
const ROM_PAGES: u32 = 256;

/// Where the Nic streams, the file system's buffer and the ROM go.
const STREAM_VA: u64 = 0x50_0000_0000;
const FS_VA: u64 = 0x60_0000_0000;
const ROM_VA: u64 = 0x58_0000_0000;

/// The port served.
const PORT: u16 = 80;
/// Connections the stack accepts before the server takes them: more
/// than the tests' 20 at once.
const BACKLOG: usize = 24;
/// Connections served at once; one more gets 503.
const MAX_CLIENTS: usize = 48;
/// Small buffers: requests are small, and responses wait in `out`.
const SOCKET: TcpConfig = TcpConfig {
    rx: 16 * 1024,
    tx: 32 * 1024,
};
/// How long DHCP may take.
const DHCP_TIMEOUT: Duration = Duration::from_secs(30);

type Stream = TcpStream<PecanDriver>;

/// One client connection.
struct Client {
    stream: Stream,
    conn: Conn,
    /// Response bytes not yet in the socket, from `sent` on.
    out: Vec<u8>,
    sent: usize,
    /// A generated body being streamed after `out`.
    body: Option<Pattern>,
    /// Close once `out` (and `body`) is sent.
    close: bool,
}

/// A `/pattern/N` body being streamed: bytes `next..len` are still to go.
struct Pattern {
    next: u64,
    len: u64,
    /// When it started (ms), and whether it is logged (large ones are).
    since: u64,
    logged: bool,
}

/// Pattern bodies from this size on are logged.
const LOG_PATTERN: u64 = 1024 * 1024;

/// Where static files come from.
enum Files {
    None,
    Rom(&'static [u8]),
    Fat(rt::fs::Fs),
}

/// What the server counted.
#[derive(Default)]
struct Stats {
    requests: u64,
    by_class: [u64; 6],
    accepted: u64,
    refused_busy: u64,
    timeouts: u64,
    bytes_out: u64,
}

struct Server {
    net: Net<PecanDriver>,
    started: Instant,
    lease: Option<Lease>,
    mac: String,
    files: Files,
    /// Init's Status session: the components' figures, if routed.
    init: Option<Session<InitStatus>>,
    stats: Stats,
}

fn main(arg: u64) -> i32 {
    match run(arg) {
        Ok(()) => 0,
        Err(e) => {
            println!("http-server: FAILED: {e}");
            1
        }
    }
}

fn run(arg: u64) -> Result<(), String> {
    // First, while the quota is in one piece: a File system session's
    // 8 MiB donation block, aligned to its size. Without a route the
    // block stays carved out of the quota (documented in the scenario).
    let files = static_files();
    let init = match session::open::<InitStatus>(STATUS_SLOT) {
        Ok(s) => {
            println!("http-server: component figures from init's Status session");
            Some(s)
        }
        Err(e) => {
            println!(
                "http-server: no Status session ({e}): the page has the server's figures only"
            );
            None
        }
    };
    rt::heap::grow(HEAP_SLOT, HEAP_FRAMES).map_err(|e| format!("growing the heap: {e}"))?;
    // SAFETY: STREAM_VA's 2 MiB are used by nothing else of this program.
    let driver = unsafe { net::pecan::open(NET_FIRST, STREAM_VA) }?;
    let info = driver.info;
    println!(
        "http-server: interface MAC {}, link {}, MTU {}",
        info.mac,
        if info.link_up { "up" } else { "down" },
        info.mtu
    );
    let net = Net::new(driver, info.mac.0, true).map_err(|e| format!("the stack: {e}"))?;
    let lease = net
        .wait_for_lease(Some(DHCP_TIMEOUT))
        .map_err(|e| format!("DHCP: {e}"))?;
    log_events(&net);
    let mut pinger = Pinger::new(&net).map_err(|e| format!("ICMP socket: {e}"))?;
    match pinger.ping(lease.server, b"pecan ping", Duration::from_secs(2)) {
        Ok(rtt) => println!(
            "http-server: ICMP echo to {} answered in {} ms",
            lease.server,
            rtt.total_millis()
        ),
        Err(e) => println!("http-server: ICMP echo to {}: {e}", lease.server),
    }
    drop(pinger);
    log_events(&net);
    let mut listener =
        TcpListener::bind(&net, PORT, BACKLOG, SOCKET).map_err(|e| format!("listen: {e}"))?;
    listener.set_nonblocking(true);
    let timeouts = Timeouts {
        head_ms: if arg == 0 { 5_000 } else { arg },
        ..Timeouts::default()
    };
    println!(
        "http-server: serving http://{}:{PORT}/ (head timeout {} ms)",
        lease.address.address(),
        timeouts.head_ms
    );
    let mut server = Server {
        started: net.now(),
        net: net.clone(),
        lease: Some(lease),
        mac: format!("{}", info.mac),
        files,
        init,
        stats: Stats::default(),
    };
    let mut clients: Vec<Client> = Vec::new();
    loop {
        let now = net.now();
        let ms = now.total_millis() as u64;
        loop {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    server.stats.accepted += 1;
                    stream.set_nodelay(true);
                    let mut c = Client {
                        stream,
                        conn: Conn::new(ms, timeouts),
                        out: Vec::new(),
                        sent: 0,
                        body: None,
                        close: false,
                    };
                    if clients.len() >= MAX_CLIENTS {
                        server.stats.refused_busy += 1;
                        server.error(&mut c, Status::Unavailable);
                    }
                    clients.push(c);
                }
                Err(Error::WouldBlock) => break,
                Err(e) => {
                    println!("http-server: accept: {e}");
                    break;
                }
            }
        }
        let open = clients.len();
        clients.retain_mut(|c| server.service(c, ms, open));
        net.poll();
        for e in core::iter::from_fn(|| net.event()) {
            log_event(e);
            if let Event::Leased(l) = e {
                server.lease = Some(l);
            } else {
                server.lease = None;
            }
        }
        let deadline = clients
            .iter()
            .filter(|c| c.out.is_empty() && c.body.is_none())
            .map(|c| c.conn.deadline())
            .min()
            .map(|d| Instant::from_millis(d as i64));
        net.wait(deadline);
    }
}

fn log_event(e: Event) {
    match e {
        Event::Leased(l) => println!("http-server: DHCP lease: {l}"),
        Event::LeaseLost => println!("http-server: DHCP lease lost"),
    }
}

/// Logs the stack's events and the addresses ARP resolved.
fn log_events(net: &Net<PecanDriver>) {
    for e in core::iter::from_fn(|| net.event()) {
        log_event(e);
    }
    while let Some((ip, mac)) = net.with_driver(|d| d.device.take_neighbour()) {
        let m = mac.0;
        println!(
            "http-server: ARP: {ip} is at {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        );
    }
}

/// The static files: a File system session if the scenario routes one,
/// else the ROM module `www`, else none.
fn static_files() -> Files {
    let slots = rt::fs::Slots {
        session: FS_FIRST,
        donor_block: FS_FIRST + 1,
        donor_table: FS_FIRST + 2,
        frame: FS_FIRST + 3,
    };
    // SAFETY: FS_VA's 2 MiB are used by nothing else of this program.
    match unsafe { rt::fs::Fs::connect(slots, FS_VA) } {
        Ok(fs) => {
            println!("http-server: static files from the File system session");
            return Files::Fat(fs);
        }
        Err(e) => println!("http-server: no File system session ({e})"),
    }
    let rom = match session::open::<Rom>(ROM_SLOT) {
        Ok(r) => r,
        Err(e) => {
            println!("http-server: no Rom session ({e}): no static files");
            return Files::None;
        }
    };
    let rom: Session<Rom> = rom;
    // SAFETY: ROM_VA's ROM_PAGES pages are used by nothing else.
    match unsafe { rom.map("www", ROM_FIRST, ROM_FIRST + ROM_PAGES, ROM_VA) } {
        Ok(bytes) => {
            let count = net::archive::files(bytes).map_while(Result::ok).count();
            println!(
                "http-server: static files from the ROM module www ({count} files, {} bytes)",
                bytes.len()
            );
            Files::Rom(bytes)
        }
        Err(e) => {
            println!("http-server: no ROM module www ({e}): no static files");
            Files::None
        }
    }
}

impl Server {
    /// Serves client `c` at `now` (ms) with `open` connections: whether
    /// to keep it.
    fn service(&mut self, c: &mut Client, now: u64, open: usize) -> bool {
        // Each round answers requests up to the first one with a
        // generated body; another round starts once that body is queued.
        loop {
            // What is waiting goes out first.
            match self.flush(c) {
                Err(()) => return false,
                Ok(false) => return true,
                Ok(true) => {}
            }
            // Then the body being generated; the request it answers is
            // done (its time and the next request's start) once it is all
            // queued.
            if c.body.is_some() {
                match self.stream_body(c, now) {
                    Err(()) => return false,
                    Ok(false) => return true,
                    Ok(true) => c.conn.done(now),
                }
            }
            if c.close {
                // Dropping the stream closes it (FIN after the data).
                return false;
            }
            let mut eof = false;
            while c.conn.wants_input() {
                let conn = &mut c.conn;
                match c.stream.read_with(|data| {
                    let n = conn.feed(data, now);
                    (n, n)
                }) {
                    Ok(Some(0)) | Err(Error::WouldBlock) => break,
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        eof = true;
                        break;
                    }
                    Err(_) => return false,
                }
            }
            loop {
                match c.conn.next_request() {
                    Next::More => break,
                    Next::Request(r) => {
                        let keep = r.keep_alive;
                        c.body = self.respond(&r, &mut c.out, open, now);
                        if !keep {
                            c.close = true;
                        }
                        if c.body.is_some() {
                            // `done` once the body is queued: the requests
                            // behind it wait until then.
                            break;
                        }
                        c.conn.done(now);
                        if !keep {
                            break;
                        }
                    }
                    Next::Refuse(status, e) => {
                        println!("http-server: {} {}: {e}", status.code(), status.reason());
                        self.error(c, status);
                        break;
                    }
                }
            }
            if c.body.is_some() {
                // The next round sends its head and streams it.
                continue;
            }
            if c.out.is_empty() && !c.close {
                match c.conn.expired(now) {
                    Some(Expiry::Head) => {
                        self.stats.timeouts += 1;
                        println!("http-server: 408: no whole request head in time");
                        self.error(c, Status::RequestTimeout);
                    }
                    Some(Expiry::Idle) => return false,
                    None if eof => return false,
                    None => {}
                }
            }
            // Start sending now; the rest at the next turn.
            return match self.flush(c) {
                Err(()) => false,
                Ok(done) => !(done && c.close),
            };
        }
    }

    /// Generates as much of `c.body` as the send buffer takes: whether
    /// all of it is queued now (then `c.body` is `None`); `Err` if the
    /// connection is gone.
    fn stream_body(&mut self, c: &mut Client, now: u64) -> Result<bool, ()> {
        let Some(b) = c.body.as_mut() else {
            return Ok(true);
        };
        // The send buffer is a ring: its free part may be two stretches.
        while b.next < b.len {
            let next = b.next;
            let left = b.len - next;
            let n = c
                .stream
                .write_with(|buf| {
                    let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    net::pattern::fill(next, &mut buf[..n]);
                    n
                })
                .map_err(|_| ())?;
            if n == 0 {
                return Ok(false);
            }
            b.next += n as u64;
            self.stats.bytes_out += n as u64;
        }
        if b.logged {
            println!(
                "http-server: /pattern/{}: {} bytes queued in {} ms",
                b.len,
                b.len,
                now.saturating_sub(b.since)
            );
        }
        c.body = None;
        Ok(true)
    }

    /// Puts as much of `c.out` into the socket as fits: whether all of
    /// it went; `Err` if the connection is gone.
    fn flush(&mut self, c: &mut Client) -> Result<bool, ()> {
        while c.sent < c.out.len() {
            match c.stream.write_some(&c.out[c.sent..]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    c.sent += n;
                    self.stats.bytes_out += n as u64;
                }
                Err(_) => return Err(()),
            }
        }
        c.out.clear();
        c.sent = 0;
        Ok(true)
    }

    /// Queues an error response with `status` and closes after it.
    fn error(&mut self, c: &mut Client, status: Status) {
        self.count(status);
        net::serve::error(&mut c.out, status);
        c.close = true;
    }

    fn count(&mut self, status: Status) {
        self.stats.requests += 1;
        let class = usize::from(status.code() / 100).min(5);
        self.stats.by_class[class] += 1;
    }

    /// Queues the response to `r` into `out` (`net::serve`, the server's
    /// answers); a generated body to stream after it is returned instead
    /// of queued.
    fn respond(
        &mut self,
        r: &Request<'_>,
        out: &mut Vec<u8>,
        open: usize,
        now: u64,
    ) -> Option<Pattern> {
        let len = net::serve::respond(&mut Site { server: self, open }, r, out)?;
        let logged = len >= LOG_PATTERN;
        if logged {
            println!("http-server: /pattern/{len}: sending {len} bytes");
        }
        Some(Pattern {
            next: 0,
            len,
            since: now,
            logged,
        })
    }

    /// The static file at `path`.
    fn file(&self, path: &str) -> Option<Vec<u8>> {
        match &self.files {
            Files::None => None,
            Files::Rom(archive) => net::archive::find(archive, path).map(<[u8]>::to_vec),
            Files::Fat(fs) => fs.read(path).ok(),
        }
    }

    /// The status report: only what the server knows.
    fn report(&self, open: usize) -> Report {
        let now = self.net.now();
        let s = &self.stats;
        let server = Section::new("server")
            .field("uptime_ms", (now - self.started).total_millis())
            .field("timer_ms", now.total_millis() as u64)
            .field("requests", s.requests)
            .field("responses_2xx", s.by_class[2])
            .field("responses_4xx", s.by_class[4])
            .field("responses_5xx", s.by_class[5])
            .field("timeouts_408", s.timeouts)
            .field("connections_accepted", s.accepted)
            .field("connections_open", open as u64)
            .field("refused_busy", s.refused_busy)
            .field("bytes_sent", s.bytes_out)
            .field(
                "static_files",
                match self.files {
                    Files::None => "none",
                    Files::Rom(_) => "ROM module www",
                    Files::Fat(_) => "File system session",
                },
            );
        let mut address = String::new();
        let lease = self.lease;
        if let Some(l) = lease {
            let _ = write!(address, "{}", l.address);
        }
        let counters = self.net.counters();
        let (dev, waits) = self
            .net
            .with_driver(|d| (d.device.counters(), d.counters()));
        let network = Section::new("network")
            .field("mac", self.mac.as_str())
            .field("address", lease.map(|_| address))
            .field(
                "router",
                lease.and_then(|l| l.router).map(|r| format!("{r}")),
            )
            .field("dhcp_server", lease.map(|l| format!("{}", l.server)))
            .field(
                "lease_age_ms",
                lease.map(|l| (now - l.since).total_millis()),
            )
            .field("frames_received", dev.received)
            .field("frames_sent", dev.sent)
            .field("frames_failed", dev.failed)
            .field("replies_dropped", dev.dropped)
            .field("tx_stream_full", dev.tx_full)
            .field("stack_polls", counters.polls)
            .field("sleeps", waits.sleeps)
            .field("nic_wakeups", waits.nic)
            .field("timer_wakeups", waits.timer);
        let mut sections = alloc::vec![server, network];
        if let Some(init) = &self.init {
            sections.insert(0, components(init));
        }
        Report {
            title: "Pecan status".into(),
            sections,
        }
    }
}

/// The server as `net::serve` sees it, with `open` connections.
struct Site<'a> {
    server: &'a mut Server,
    open: usize,
}

impl net::serve::Site for Site<'_> {
    fn report(&mut self) -> Report {
        self.server.report(self.open)
    }

    fn file(&mut self, path: &str) -> Option<Vec<u8>> {
        self.server.file(path)
    }

    fn count(&mut self, status: Status) {
        self.server.count(status);
    }

    fn log(&mut self, line: core::fmt::Arguments<'_>) {
        println!("http-server: {line}");
    }
}

/// The components as init's Status session reports them: one row each.
fn components(init: &Session<InitStatus>) -> Section {
    let list = match init.components() {
        Ok(l) => l,
        Err(e) => return Section::new("components").field("error", format!("{e:?}")),
    };
    let mut s = Section::new("components").field("count", list.len() as u64);
    s.columns = [
        "name",
        "state",
        "restarts",
        "ram_quota_bytes",
        "ram_used_bytes",
        "caps_quota",
        "caps_used",
        "cpu_ms",
    ]
    .map(String::from)
    .to_vec();
    s.rows = list
        .into_iter()
        .map(|c| {
            alloc::vec![
                c.name.into(),
                c.state.as_str().into(),
                u64::from(c.restarts).into(),
                c.ram_quota.into(),
                c.ram_used.into(),
                c.caps_quota.into(),
                c.caps_used.into(),
                c.cpu_ms.into(),
            ]
        })
        .collect();
    s
}
