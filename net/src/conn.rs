//! One HTTP/1.1 server connection's request side as pure logic: the bytes
//! received go in ([`Conn::feed`]), whole requests and refusals come out
//! ([`Conn::next_request`]), and the clock decides when a slow client has had
//! enough time ([`Conn::expired`]). The transport (a TCP socket), the
//! responses and the clock are the caller's; times are milliseconds of
//! any monotonic clock.
//!
//! Invariants: `buf` holds at most [`MAX_HEAD`] bytes, the start of the
//! next request (or all of it, pipelined); `skip` body bytes of the last
//! request still to be discarded come before it; `head_since` is set
//! exactly while `buf` is not empty (the time the request's first byte
//! came), so a client that sends a head slowly — a slowloris, or one that
//! never sends the empty line — has at most [`Timeouts::head_ms`] from its
//! first byte, however it spaces the rest.

use alloc::vec::Vec;

use crate::http::{self, Error, Request, Status, MAX_HEAD};

/// The largest request body the server reads past (and throws away).
pub const MAX_BODY: u64 = 1 << 20;

/// How long a client may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// From a request's first byte to its head's end: then 408.
    pub head_ms: u64,
    /// Of an idle persistent connection (no request begun): then it is
    /// closed without a response.
    pub idle_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            head_ms: 5_000,
            idle_ms: 30_000,
        }
    }
}

/// What [`Conn::next_request`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a> {
    /// Nothing whole yet: read more (or wait for the deadline).
    More,
    /// A request to answer; then call [`Conn::done`] with it answered.
    Request(Request<'a>),
    /// A request refused with this status: answer, then close.
    Refuse(Status, Error),
}

/// Why [`Conn::expired`] says a connection's time is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// A request head did not come whole in time: answer 408, close.
    Head,
    /// An idle persistent connection: close it.
    Idle,
}

/// The request side of one connection.
#[derive(Debug)]
pub struct Conn {
    buf: Vec<u8>,
    /// Body bytes of the last request still to discard.
    skip: u64,
    /// When the request now in `buf` began (set while `buf` is not empty).
    head_since: Option<u64>,
    /// When the connection last became idle.
    idle_since: u64,
    timeouts: Timeouts,
    /// The head length of the request [`Conn::next_request`] returned last.
    pending: Option<(usize, u64)>,
}

impl Conn {
    /// A connection accepted at `now`.
    pub fn new(now: u64, timeouts: Timeouts) -> Conn {
        Conn {
            buf: Vec::new(),
            skip: 0,
            head_since: None,
            idle_since: now,
            timeouts,
            pending: None,
        }
    }

    /// Takes bytes received at `now`; returns how many it took (fewer than
    /// `data` once the buffer holds [`MAX_HEAD`] bytes: then
    /// [`Conn::next_request`] has an answer).
    pub fn feed(&mut self, data: &[u8], now: u64) -> usize {
        let skipped = (self.skip.min(data.len() as u64)) as usize;
        self.skip -= skipped as u64;
        let data = &data[skipped..];
        let take = data.len().min(MAX_HEAD - self.buf.len());
        if take > 0 && self.buf.is_empty() {
            self.head_since = Some(now);
        }
        self.buf.extend_from_slice(&data[..take]);
        skipped + take
    }

    /// Whether the connection can take more bytes now.
    pub fn wants_input(&self) -> bool {
        self.pending.is_none() && (self.skip > 0 || self.buf.len() < MAX_HEAD)
    }

    /// The next request, if one is whole.
    pub fn next_request(&mut self) -> Next<'_> {
        if self.skip > 0 {
            return Next::More;
        }
        match http::parse(&self.buf) {
            Ok(None) => Next::More,
            Ok(Some((request, head))) => {
                if request.content_length > MAX_BODY {
                    return Next::Refuse(
                        Status::ContentTooLarge,
                        Error::Bad("request body too large"),
                    );
                }
                self.pending = Some((head, request.content_length));
                Next::Request(request)
            }
            Err(e) => Next::Refuse(e.status(), e),
        }
    }

    /// The request [`Conn::next_request`] returned was answered at `now`: its head
    /// and body go, the next request's time starts.
    pub fn done(&mut self, now: u64) {
        let Some((head, body)) = self.pending.take() else {
            return;
        };
        self.buf.drain(..head.min(self.buf.len()));
        // Body bytes already here are dropped now, the rest as they come.
        let here = (body.min(self.buf.len() as u64)) as usize;
        self.buf.drain(..here);
        self.skip = body - here as u64;
        self.head_since = if self.buf.is_empty() { None } else { Some(now) };
        self.idle_since = now;
    }

    /// When the connection's time is up, if nothing changes.
    pub fn deadline(&self) -> u64 {
        match self.head_since {
            Some(t) => t.saturating_add(self.timeouts.head_ms),
            None => self.idle_since.saturating_add(self.timeouts.idle_ms),
        }
    }

    /// Whether (and why) the connection's time is up at `now`.
    pub fn expired(&self, now: u64) -> Option<Expiry> {
        if now < self.deadline() {
            return None;
        }
        Some(if self.head_since.is_some() {
            Expiry::Head
        } else {
            Expiry::Idle
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Method;

    const T: Timeouts = Timeouts {
        head_ms: 100,
        idle_ms: 1000,
    };

    #[test]
    fn keep_alive_pipelined_with_bodies() {
        let mut c = Conn::new(0, T);
        let two = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(c.feed(two, 1), two.len());
        match c.next_request() {
            Next::Request(r) => assert_eq!((r.method, r.path()), (Method::Other, "/a")),
            n => panic!("{n:?}"),
        }
        c.done(2);
        match c.next_request() {
            Next::Request(r) => assert_eq!((r.method, r.path()), (Method::Get, "/b")),
            n => panic!("{n:?}"),
        }
        c.done(3);
        assert_eq!(c.next_request(), Next::More);
        assert_eq!(c.deadline(), 1003);
    }

    #[test]
    fn body_arriving_later_is_skipped() {
        let mut c = Conn::new(0, T);
        c.feed(
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nab",
            0,
        );
        assert!(matches!(c.next_request(), Next::Request(_)));
        c.done(0);
        assert_eq!(c.next_request(), Next::More);
        assert_eq!(c.feed(b"cdefghijGET / HTTP/1.1\r\nHost: h\r\n\r\n", 1), 35);
        assert!(matches!(c.next_request(), Next::Request(r) if r.method == Method::Get));
    }

    #[test]
    fn slowloris_gets_408_in_time() {
        let mut c = Conn::new(0, T);
        assert_eq!(c.expired(999), None);
        c.feed(b"G", 10);
        // One byte every 50 ms does not buy more time.
        for (i, b) in b"ET / HTTP/1.1\r\n".iter().enumerate() {
            let now = 10 + i as u64;
            c.feed(&[*b], now);
            assert_eq!(c.expired(now), None);
        }
        assert_eq!(c.next_request(), Next::More);
        assert_eq!(c.expired(110), Some(Expiry::Head));
        let mut idle = Conn::new(0, T);
        assert_eq!(idle.expired(1000), Some(Expiry::Idle));
        assert_eq!(idle.next_request(), Next::More);
    }

    #[test]
    fn oversized_head_and_body() {
        let mut c = Conn::new(0, T);
        let big = [b'a'; 10 * 1024];
        assert_eq!(c.feed(&big, 0), MAX_HEAD);
        assert!(!c.wants_input());
        assert!(matches!(
            c.next_request(),
            Next::Refuse(Status::HeaderFieldsTooLarge, _)
        ));
        let mut c = Conn::new(0, T);
        c.feed(
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9999999\r\n\r\n",
            0,
        );
        assert!(matches!(
            c.next_request(),
            Next::Refuse(Status::ContentTooLarge, _)
        ));
    }
}
