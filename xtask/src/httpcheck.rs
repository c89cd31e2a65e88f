//! `cargo xtask check-http PORT`: does the HTTP server behind host port
//! PORT (on 127.0.0.1, QEMU's forward to the guest's port 80) serve as
//! `components/apps/http-server` promises? A scenario test runs it as a
//! host command while the guest runs (`tests/http.toml`); curl checks
//! the pages there too, as a client that is not ours.
//!
//! In order, each with its own connection(s):
//!
//! 1. `GET /`: 200, HTML; `HEAD /`: 200, the same `Content-Length`, no
//!    body; `/status.json`: JSON (serde_json parses it) with the server's
//!    figures and init's row for each component of `scenarios/http.toml`; `/hello.txt`: the bytes of `scenarios/www/hello.txt`;
//!    `/nope`: 404; `POST`: 501.
//! 2. [`KEEP_ALIVE`] requests in a row on one connection, every body right.
//! 3. [`CONCURRENT`] connections at once, each with several requests.
//! 4. Malformed: a bad request line gets 400, a 10 KiB header 431, a head
//!    without its empty line 408 after the head timeout, a slowloris (a
//!    byte every 300 ms) 408 — and each connection is closed by the server.
//! 5. `GET /` still served.
//!
//! `cargo xtask http-load PORT` ([`load`]) is the lab's load generator
//! (issue 17's requests per second): CONNECTIONS keep-alive connections,
//! each sending `GET PATH` and reading the whole response before the next
//! (no pipelining), for SECONDS; every response must be 200 with the first
//! one's body length, or the run fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use crate::util::workspace_root;

/// Requests on one keep-alive connection.
pub const KEEP_ALIVE: usize = 200;
/// Connections at once.
pub const CONCURRENT: usize = 20;

/// What to check.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckHttpArgs {
    /// The host port forwarded to the server.
    pub port: u16,
    /// The server's head timeout, ms (its 408 must come after it, and
    /// well before twice it).
    #[arg(long, default_value_t = 5000)]
    pub head_timeout_ms: u64,
}

/// A response as read.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn connect(port: u16) -> Result<TcpStream> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connecting to 127.0.0.1:{port}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Reads one response (`head`: to a HEAD request, without a body).
fn read_response(r: &mut BufReader<TcpStream>, head: bool) -> Result<Response> {
    let mut line = String::new();
    r.read_line(&mut line).context("reading the status line")?;
    let mut parts = line.trim_end().splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        bail!("no status line: {line:?}");
    };
    ensure!(version == "HTTP/1.1", "status line {line:?}");
    let status: u16 = code
        .parse()
        .with_context(|| format!("status line {line:?}"))?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).context("reading a header")?;
        ensure!(h.ends_with("\r\n"), "header line without CRLF: {h:?}");
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (n, v) = h.split_once(':').with_context(|| format!("header {h:?}"))?;
        headers.push((n.to_string(), v.trim().to_string()));
    }
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    let len: usize = resp
        .header("content-length")
        .context("no Content-Length")?
        .parse()
        .context("Content-Length")?;
    if !head {
        resp.body.resize(len, 0);
        r.read_exact(&mut resp.body).context("reading the body")?;
    }
    Ok(resp)
}

/// Sends `request` on `r`'s connection and reads the response.
fn exchange(r: &mut BufReader<TcpStream>, request: &str) -> Result<Response> {
    r.get_mut().write_all(request.as_bytes())?;
    read_response(r, request.starts_with("HEAD "))
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: xtask\r\n\r\n")
}

/// Whether the server closed the connection (reads end of file).
fn closed(r: &mut BufReader<TcpStream>) -> Result<()> {
    let mut rest = Vec::new();
    r.read_to_end(&mut rest)
        .context("waiting for the server to close")?;
    ensure!(rest.is_empty(), "bytes after the response: {rest:?}");
    Ok(())
}

/// Runs the check.
pub fn run(args: &CheckHttpArgs) -> Result<()> {
    let port = args.port;
    let hello = std::fs::read(workspace_root().join("scenarios/www/hello.txt"))
        .context("reading scenarios/www/hello.txt")?;

    // 1. The pages.
    let mut c = BufReader::new(connect(port)?);
    let page = exchange(&mut c, &get("/"))?;
    ensure!(page.status == 200, "GET /: {}", page.status);
    ensure!(
        page.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "GET /: {:?}",
        page.header("content-type")
    );
    let html = String::from_utf8_lossy(&page.body);
    ensure!(
        html.starts_with("<!DOCTYPE html>") && html.contains("requests"),
        "GET /: not the status page"
    );
    let head = exchange(&mut c, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")?;
    ensure!(head.status == 200, "HEAD /: {}", head.status);
    let len = head.header("content-length").unwrap_or_default();
    ensure!(
        len.parse::<usize>()
            .is_ok_and(|l| l.abs_diff(page.body.len()) < 16),
        "HEAD /: Content-Length {len}, GET's body {} bytes",
        page.body.len()
    );
    let json = exchange(&mut c, &get("/status.json"))?;
    ensure!(json.status == 200, "/status.json: {}", json.status);
    let v: serde_json::Value =
        serde_json::from_slice(&json.body).context("/status.json is not JSON")?;
    let requests = v["server"]["requests"]
        .as_u64()
        .context("server.requests")?;
    ensure!(requests >= 2, "server.requests {requests} after 2 requests");
    ensure!(
        v["network"]["address"].as_str() == Some("10.0.2.15/24"),
        "network.address {}",
        v["network"]["address"]
    );
    // init's figures: every component of the scenario, the server running
    // with its quota.
    let rows = v["components"]["rows"]
        .as_array()
        .context("components.rows (init's Status session)")?;
    let http = rows
        .iter()
        .find(|r| r["name"] == "http")
        .context("no row for the server in components.rows")?;
    ensure!(
        http["state"] == "running" && http["ram_quota_bytes"] == 32u64 << 20,
        "the server's row: {http}"
    );
    // What it uses of its quotas (the kernel's Usage): some, within them.
    let used = http["ram_used_bytes"].as_u64().unwrap_or(0);
    let slots = http["caps_used"].as_u64().unwrap_or(0);
    ensure!(
        used > 0 && used <= 32 << 20 && slots > 0 && Some(slots) <= http["caps_quota"].as_u64(),
        "the server's use of its quotas: {http}"
    );
    for name in ["timer", "platform", "net", "power"] {
        ensure!(
            rows.iter().any(|r| r["name"] == name),
            "no row for {name} in components.rows"
        );
    }
    let file = exchange(&mut c, &get("/hello.txt"))?;
    ensure!(
        file.status == 200 && file.body == hello,
        "/hello.txt: {} {:?}",
        file.status,
        String::from_utf8_lossy(&file.body)
    );
    ensure!(
        exchange(&mut c, &get("/nope"))?.status == 404,
        "/nope not 404"
    );
    let post = exchange(
        &mut c,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody",
    )?;
    ensure!(post.status == 501, "POST: {}", post.status);
    println!("check-http: pages, HEAD, JSON, the static file, 404 and 501: right");

    // 2. Keep-alive.
    let start = Instant::now();
    let mut c = BufReader::new(connect(port)?);
    for i in 0..KEEP_ALIVE {
        let r = exchange(&mut c, &get("/hello.txt")).with_context(|| format!("request {i}"))?;
        ensure!(
            r.status == 200 && r.body == hello,
            "keep-alive request {i}: {}",
            r.status
        );
        ensure!(
            r.header("connection") == Some("keep-alive"),
            "request {i}: Connection {:?}",
            r.header("connection")
        );
    }
    println!(
        "check-http: {KEEP_ALIVE} requests on one keep-alive connection: right ({:.1} s)",
        start.elapsed().as_secs_f64()
    );

    // 3. Concurrent connections, all open before any request.
    let conns: Vec<_> = (0..CONCURRENT)
        .map(|_| connect(port).map(BufReader::new))
        .collect::<Result<_>>()?;
    let threads: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            let hello = hello.clone();
            std::thread::spawn(move || -> Result<()> {
                for j in 0..5 {
                    let path = if j % 2 == 0 {
                        "/hello.txt"
                    } else {
                        "/status.json"
                    };
                    let r = exchange(&mut c, &get(path))?;
                    ensure!(r.status == 200, "connection {i} request {j}: {}", r.status);
                    if j % 2 == 0 {
                        ensure!(r.body == hello, "connection {i} request {j}: wrong body");
                    } else {
                        serde_json::from_slice::<serde_json::Value>(&r.body)
                            .with_context(|| format!("connection {i} request {j}: not JSON"))?;
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
    }
    println!("check-http: {CONCURRENT} connections at once, 5 requests each: right");

    // 4. Malformed requests.
    let refused = |what: &str, request: &[u8], want: u16| -> Result<()> {
        let mut c = BufReader::new(connect(port)?);
        c.get_mut().write_all(request)?;
        let r = read_response(&mut c, false).with_context(|| what.to_string())?;
        ensure!(r.status == want, "{what}: {} (want {want})", r.status);
        ensure!(
            r.header("connection") == Some("close"),
            "{what}: not closing"
        );
        closed(&mut c).with_context(|| what.to_string())?;
        println!("check-http: {what}: {want}, connection closed");
        Ok(())
    };
    refused("a bad request line", b"GET /\r\nHost: x\r\n\r\n", 400)?;
    refused("a bare LF", b"GET / HTTP/1.1\nHost: x\n\n", 400)?;
    let mut big = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 10 * 1024));
    big.extend_from_slice(b"\r\n\r\n");
    refused("a 10 KiB header", &big, 431)?;
    let timeout = Duration::from_millis(args.head_timeout_ms);
    let start = Instant::now();
    refused(
        "a head without its empty line",
        b"GET / HTTP/1.1\r\nHost: x\r\n",
        408,
    )?;
    let took = start.elapsed();
    ensure!(
        took >= timeout && took < timeout * 2 + Duration::from_secs(5),
        "408 after {took:?}, head timeout {timeout:?}"
    );
    // Slowloris: a byte every 300 ms, never the end of the head.
    let mut c = BufReader::new(connect(port)?);
    let start = Instant::now();
    let drip = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut answered = false;
    for b in drip {
        if c.get_mut().write_all(&[*b]).is_err() {
            answered = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
        let mut peek = [0u8; 1];
        c.get_ref().set_nonblocking(true)?;
        let ready = c.get_ref().peek(&mut peek).is_ok_and(|n| n > 0);
        c.get_ref().set_nonblocking(false)?;
        if ready {
            answered = true;
            break;
        }
    }
    ensure!(answered, "the slowloris was never answered");
    let r = read_response(&mut c, false).context("slowloris")?;
    ensure!(r.status == 408, "slowloris: {}", r.status);
    let took = start.elapsed();
    ensure!(
        took < timeout * 2 + Duration::from_secs(5),
        "slowloris answered after {took:?}"
    );
    println!(
        "check-http: a slowloris (a byte every 300 ms): 408 after {:.1} s",
        took.as_secs_f64()
    );

    // 5. Still serving.
    let mut c = BufReader::new(connect(port)?);
    let r = exchange(&mut c, &get("/"))?;
    ensure!(r.status == 200, "GET / afterwards: {}", r.status);
    println!("check-http: still serving afterwards");
    Ok(())
}

/// What to load.
#[derive(Debug, Clone, clap::Args)]
pub struct HttpLoadArgs {
    /// The host port forwarded to the server.
    pub port: u16,
    /// The path to get (default: a generated 1 KiB body).
    #[arg(long, default_value = "/pattern/1024")]
    pub path: String,
    /// Keep-alive connections at once.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// How long to load, seconds.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
}

/// One connection's requests until `end`: how many, and the body length.
fn load_one(port: u16, path: &str, end: Instant) -> Result<(u64, usize)> {
    let mut r = BufReader::new(connect(port)?);
    let request = get(path);
    let mut count = 0u64;
    let mut body = None;
    while Instant::now() < end {
        let resp = exchange(&mut r, &request)?;
        ensure!(resp.status == 200, "{path}: status {}", resp.status);
        let len = *body.get_or_insert(resp.body.len());
        ensure!(
            resp.body.len() == len,
            "{path}: a body of {} bytes, then {len}",
            resp.body.len()
        );
        count += 1;
    }
    Ok((count, body.unwrap_or(0)))
}

/// What one load run gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadRun {
    /// Responses read, every one 200 with the same body length.
    pub requests: u64,
    /// Seconds from the start to the last connection's end.
    pub seconds: f64,
    /// The body length.
    pub body: usize,
}

impl LoadRun {
    /// Requests per second.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.seconds.max(1e-9)
    }
}

/// `connections` keep-alive connections to 127.0.0.1:`port`, each
/// getting `path` until `duration` is over (the lab's load, [`load`]).
pub fn run_load(port: u16, path: &str, connections: usize, duration: Duration) -> Result<LoadRun> {
    let start = Instant::now();
    let end = start + duration;
    let results: Vec<Result<(u64, usize)>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..connections)
            .map(|_| s.spawn(|| load_one(port, path, end)))
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| bail!("a load thread panicked")))
            .collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut requests = 0;
    let mut body = None;
    for r in results {
        let (n, b) = r?;
        requests += n;
        if n == 0 {
            // A connection whose first response came after the end.
            continue;
        }
        if let Some(first) = body.filter(|&f| f != b) {
            bail!("{path}: bodies of {first} and {b} bytes on different connections");
        }
        body = Some(b);
    }
    Ok(LoadRun {
        requests,
        seconds,
        body: body.unwrap_or(0),
    })
}

/// The lab's measurement (`bench::httpload`): `connections` keep-alive
/// connections to 127.0.0.1:`port` getting `path` without a pause, opened
/// once and kept through a warm-up of `warm_up` and then `runs` windows
/// of `window` each; each window's requests per second (a response counts
/// in the window in which it was read whole). Every response must be 200
/// with a body of `body` bytes.
pub fn run_windows(
    port: u16,
    (path, body): (&str, usize),
    connections: usize,
    warm_up: Duration,
    (runs, window): (usize, Duration),
) -> Result<Vec<f64>> {
    let start = Instant::now() + Duration::from_millis(100);
    let first = start + warm_up;
    let end = first + window * runs as u32;
    let per_thread: Vec<Result<Vec<u64>>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..connections)
            .map(|_| {
                s.spawn(move || -> Result<Vec<u64>> {
                    let mut r = BufReader::new(connect(port)?);
                    let request = get(path);
                    let mut counts = vec![0u64; runs];
                    loop {
                        let resp = exchange(&mut r, &request)?;
                        let now = Instant::now();
                        ensure!(
                            resp.status == 200 && resp.body.len() == body,
                            "{path}: status {}, a body of {} bytes (want 200, {body})",
                            resp.status,
                            resp.body.len()
                        );
                        if now >= end {
                            return Ok(counts);
                        }
                        if now >= first {
                            let i = ((now - first).as_nanos() / window.as_nanos()) as usize;
                            counts[i.min(runs - 1)] += 1;
                        }
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| bail!("a load thread panicked")))
            .collect()
    });
    let mut totals = vec![0u64; runs];
    for counts in per_thread {
        for (t, c) in totals.iter_mut().zip(counts?) {
            *t += c;
        }
    }
    Ok(totals
        .iter()
        .map(|&n| n as f64 / window.as_secs_f64())
        .collect())
}

/// Runs the load and prints `http-load: N requests in S s: R requests/s
/// (C keep-alive connections, body B bytes)`.
pub fn load(args: &HttpLoadArgs) -> Result<()> {
    ensure!(
        (1..=64).contains(&args.connections) && (1..=600).contains(&args.seconds),
        "--connections 1 to 64, --seconds 1 to 600"
    );
    let run = run_load(
        args.port,
        &args.path,
        args.connections,
        Duration::from_secs(args.seconds),
    )?;
    println!(
        "http-load: {} requests in {:.1} s: {:.0} requests/s ({} keep-alive connections, body {} bytes, GET {})",
        run.requests,
        run.seconds,
        run.rate(),
        args.connections,
        run.body,
        args.path
    );
    Ok(())
}
