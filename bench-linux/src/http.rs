//! `bench-linux http-serve [PORT] [ARCHIVE]`: Pecan's HTTP server's
//! request handling on Linux, for the lab's HTTP benchmarks
//! (`bench::httpload`: the host's `cargo xtask http-load` counts the
//! requests per second; this only serves, until the guest is stopped).
//!
//! The same code as `components/apps/http-server` where it decides
//! anything: each connection's request side is `net::conn::Conn` (the
//! parser `net::http::parse`, keep-alive and pipelining, 400/431 for a
//! malformed or oversized head, 408 for a head not whole within 5 s, an
//! idle connection closed after 30 s), and every answer is
//! `net::serve::respond`'s (the routes: `/pattern/BYTES` from
//! `net::pattern`, `/` and `/status.json` a `net::report` — here of the
//! server's own figures —, static files, 404, 501). The static files come
//! from a `newc` cpio archive through `net::archive`: the scenario's
//! `www` module, which xtask puts into the initramfs as ARCHIVE.
//!
//! What is Linux's: the transport. Blocking `std::net` sockets with a
//! thread per connection — what a Rust programmer writes first — and
//! `TCP_NODELAY` on every connection (Nagle off, as on Pecan). Each
//! connection's thread reads what came, answers every whole request in
//! it, and writes the answers with one `write_all` (a head and a 1 KiB
//! body go out in one system call; a generated body over [`CHUNK`] bytes
//! is written in pieces of that size, never held whole). The read waits
//! with `SO_RCVTIMEO` no later than the connection's deadline
//! (`Conn::deadline`), so the timeouts are `Conn`'s; the option is set
//! again only when the deadline comes closer or the wait ran out (not a
//! system call per request).

use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use net::conn::{Conn, Expiry, Next, Timeouts};
use net::http::Status;
use net::report::{Report, Section};

/// The port served when none is given.
pub const DEFAULT_PORT: u16 = 80;
/// Bytes read at once, and the largest piece of a generated body written
/// at once.
const CHUNK: usize = 64 * 1024;

/// What every connection's thread shares.
struct Shared {
    started: Instant,
    /// The static files: a `newc` cpio archive (empty: none).
    files: Vec<u8>,
    requests: AtomicU64,
    by_class: [AtomicU64; 6],
    accepted: AtomicU64,
    open: AtomicU64,
    timeouts: AtomicU64,
    bytes_out: AtomicU64,
}

impl Shared {
    fn new(files: Vec<u8>) -> Shared {
        Shared {
            started: Instant::now(),
            files,
            requests: AtomicU64::new(0),
            by_class: Default::default(),
            accepted: AtomicU64::new(0),
            open: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
        }
    }

    /// Milliseconds since the server started: `Conn`'s clock.
    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn count(&self, status: Status) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let class = usize::from(status.code() / 100).min(5);
        self.by_class[class].fetch_add(1, Ordering::Relaxed);
    }

    /// The status report: the server's own figures.
    fn report(&self) -> Report {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let server = Section::new("server")
            .field("uptime_ms", self.now())
            .field("requests", get(&self.requests))
            .field("responses_2xx", get(&self.by_class[2]))
            .field("responses_4xx", get(&self.by_class[4]))
            .field("responses_5xx", get(&self.by_class[5]))
            .field("timeouts_408", get(&self.timeouts))
            .field("connections_accepted", get(&self.accepted))
            .field("connections_open", get(&self.open))
            .field("bytes_sent", get(&self.bytes_out))
            .field(
                "static_files",
                if self.files.is_empty() {
                    "none"
                } else {
                    "cpio archive"
                },
            )
            .field(
                "transport",
                "Linux std::net, a thread per connection, TCP_NODELAY",
            );
        Report {
            title: "Pecan's HTTP server on Linux".into(),
            sections: vec![server],
        }
    }
}

/// Serves on `port` for ever (an error only if the port cannot be bound);
/// `files` is a cpio archive of static files (empty: none).
pub fn serve(port: u16, files: Vec<u8>) -> io::Result<()> {
    let listener = TcpListener::bind(("0.0.0.0", port))?;
    let shared = Arc::new(Shared::new(files));
    let count = net::archive::files(&shared.files)
        .map_while(Result::ok)
        .count();
    println!(
        "bench-linux: http-serve: serving http://0.0.0.0:{port}/ (a thread per connection, \
         TCP_NODELAY, {count} static files)"
    );
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                eprintln!("bench-linux: http-serve: accept: {e}");
                continue;
            }
        };
        shared.accepted.fetch_add(1, Ordering::Relaxed);
        let shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                shared.open.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = connection(stream, &shared) {
                    if !matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) {
                        eprintln!("bench-linux: http-serve: a connection: {e}");
                    }
                }
                shared.open.fetch_sub(1, Ordering::Relaxed);
            });
        if let Err(e) = spawned {
            eprintln!("bench-linux: http-serve: no thread for a connection: {e}");
        }
    }
    Ok(())
}

/// What a connection does after the requests in hand were answered.
enum After {
    /// Read more.
    Read,
    /// Close (the client asked, or a refusal).
    Close,
}

/// Serves one connection until it closes.
fn connection(mut stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut conn = Conn::new(shared.now(), Timeouts::default());
    let mut input = vec![0u8; CHUNK];
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    // The read timeout set on the socket, ms.
    let mut timeout: Option<u64> = None;
    loop {
        let after = answer(&mut conn, &mut stream, &mut out, shared)?;
        if !out.is_empty() {
            stream.write_all(&out)?;
            shared
                .bytes_out
                .fetch_add(out.len() as u64, Ordering::Relaxed);
            out.clear();
        }
        if let After::Close = after {
            return Ok(());
        }
        let now = shared.now();
        match conn.expired(now) {
            Some(Expiry::Head) => {
                shared.timeouts.fetch_add(1, Ordering::Relaxed);
                eprintln!("bench-linux: http-serve: 408: no whole request head in time");
                error(&mut out, Status::RequestTimeout, shared);
                stream.write_all(&out)?;
                return Ok(());
            }
            Some(Expiry::Idle) => return Ok(()),
            None => {}
        }
        // The read waits at most until the deadline: the timeout is set
        // when the deadline comes closer than the one set (a head begun)
        // and after it ran out, not once per request.
        let wait = conn.deadline().saturating_sub(now).max(1);
        if timeout.is_none_or(|t| wait < t) {
            stream.set_read_timeout(Some(Duration::from_millis(wait)))?;
            timeout = Some(wait);
        }
        let n = match stream.read(&mut input) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                timeout = None;
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // Bytes past a full head buffer are dropped: the refusal (431)
        // that `next_request` then gives closes the connection.
        let now = shared.now();
        let mut fed = 0;
        while fed < n && conn.wants_input() {
            let took = conn.feed(&input[fed..n], now);
            if took == 0 {
                break;
            }
            fed += took;
        }
    }
}

/// Answers every whole request `conn` holds into `out` (a generated body
/// over [`CHUNK`] bytes is written to `stream` as it is made).
fn answer(
    conn: &mut Conn,
    stream: &mut TcpStream,
    out: &mut Vec<u8>,
    shared: &Shared,
) -> io::Result<After> {
    loop {
        let (keep, body) = match conn.next_request() {
            Next::More => return Ok(After::Read),
            Next::Request(r) => (
                r.keep_alive,
                net::serve::respond(&mut Site(shared), &r, out),
            ),
            Next::Refuse(status, e) => {
                eprintln!(
                    "bench-linux: http-serve: {} {}: {e}",
                    status.code(),
                    status.reason()
                );
                error(out, status, shared);
                return Ok(After::Close);
            }
        };
        if let Some(len) = body {
            pattern_body(len, stream, out, shared)?;
        }
        conn.done(shared.now());
        if !keep {
            return Ok(After::Close);
        }
    }
}

/// Appends `len` bytes of the pattern to `out`, writing `out` to `stream`
/// whenever it holds [`CHUNK`] bytes.
fn pattern_body(
    len: u64,
    stream: &mut TcpStream,
    out: &mut Vec<u8>,
    shared: &Shared,
) -> io::Result<()> {
    let mut next = 0u64;
    while next < len {
        let room = CHUNK.saturating_sub(out.len()).max(1);
        let n = room.min(usize::try_from(len - next).unwrap_or(usize::MAX));
        let at = out.len();
        out.resize(at + n, 0);
        net::pattern::fill(next, &mut out[at..]);
        next += n as u64;
        if out.len() >= CHUNK {
            stream.write_all(out)?;
            shared
                .bytes_out
                .fetch_add(out.len() as u64, Ordering::Relaxed);
            out.clear();
        }
    }
    Ok(())
}

/// Appends a refusal with `status` (the connection closes after it).
fn error(out: &mut Vec<u8>, status: Status, shared: &Shared) {
    shared.count(status);
    net::serve::error(out, status);
}

/// The server as `net::serve` sees it.
struct Site<'a>(&'a Shared);

impl net::serve::Site for Site<'_> {
    fn report(&mut self) -> Report {
        self.0.report()
    }

    fn file(&mut self, path: &str) -> Option<Vec<u8>> {
        net::archive::find(&self.0.files, path).map(<[u8]>::to_vec)
    }

    fn count(&mut self, status: Status) {
        self.0.count(status);
    }

    fn log(&mut self, line: std::fmt::Arguments<'_>) {
        eprintln!("bench-linux: http-serve: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    /// A server on a free port of 127.0.0.1 with no static files.
    fn server() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        std::thread::spawn(move || serve_on(port));
        for _ in 0..100 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return port;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the server did not listen");
    }

    fn serve_on(port: u16) {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let shared = Arc::new(Shared::new(Vec::new()));
        for s in listener.incoming() {
            let shared = shared.clone();
            std::thread::spawn(move || connection(s.unwrap(), &shared));
        }
    }

    /// Reads one response: status and body.
    fn response(r: &mut io::BufReader<TcpStream>) -> (u16, Vec<u8>) {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut len = 0;
        loop {
            let mut h = String::new();
            r.read_line(&mut h).unwrap();
            if h == "\r\n" {
                break;
            }
            if let Some(v) = h.strip_prefix("Content-Length: ") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        (status, body)
    }

    #[test]
    fn keep_alive_pipelined_patterns_and_refusals() {
        let port = server();
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut r = io::BufReader::new(s.try_clone().unwrap());
        let mut w = s;
        // Two pipelined requests, then a large body in pieces.
        w.write_all(
            b"GET /pattern/1024 HTTP/1.1\r\nHost: h\r\n\r\nGET /pattern/100000 HTTP/1.1\r\nHost: h\r\n\r\n",
        )
        .unwrap();
        for len in [1024usize, 100_000] {
            let (status, body) = response(&mut r);
            let mut want = vec![0; len];
            net::pattern::fill(0, &mut want);
            assert_eq!((status, body), (200, want));
        }
        w.write_all(b"GET /status.json HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap();
        let (status, body) = response(&mut r);
        assert_eq!(status, 200);
        let text = String::from_utf8(body).unwrap();
        assert!(text.contains("\"requests\":"), "{text}");
        w.write_all(
            b"GET /pattern/01 HTTP/1.1\r\nHost: h\r\n\r\nGET /nope HTTP/1.1\r\nHost: h\r\n\r\n",
        )
        .unwrap();
        assert_eq!(response(&mut r).0, 404);
        assert_eq!(response(&mut r).0, 404);
        w.write_all(b"GET /\r\n\r\n").unwrap();
        assert_eq!(response(&mut r).0, 400);
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }
}
