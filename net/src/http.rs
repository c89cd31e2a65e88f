//! HTTP/1.1 requests and responses (RFC 9110, RFC 9112) as pure logic: a
//! request-head parser that never panics on any input, and the head of a
//! response. The server's per-connection logic is [`crate::conn`].
//!
//! What the parser accepts (stricter than many servers, because a
//! lenient parser is how request smuggling starts):
//!
//! - a request line `METHOD SP TARGET SP HTTP/1.x CRLF`: the method a
//!   token, the target in origin form (`/...`) or `*`, without spaces or
//!   control characters; `HTTP/1.0` and `HTTP/1.1` (another `HTTP/d.d` is
//!   [`Error::Version`], 505; anything else 400);
//! - header lines `NAME: VALUE CRLF`: the name a token with no space
//!   before the colon, the value without control characters but tab; no
//!   obsolete line folding; lines end in CRLF only — a bare CR or LF is a
//!   bad request;
//! - an empty line ends the head, which is at most [`MAX_HEAD`] bytes
//!   including it: a longer one is [`Error::HeadTooLarge`] (431);
//! - `Content-Length` digits only, repeated only with the same value;
//!   `Transfer-Encoding` is not implemented (501): this server takes no
//!   request bodies but skips a `Content-Length` one;
//! - an HTTP/1.1 request needs exactly one `Host` header.
//!
//! A request line that is already complete is checked before the head
//! is, so a bad one gets its 400 without waiting for the rest.

use core::fmt::{self, Write};

/// The most bytes a request head may take, the empty line ending it
/// included.
pub const MAX_HEAD: usize = 8192;

/// The methods the server tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`: a `GET` without the body.
    Head,
    /// Any other token (answered 405 or 501 by the server).
    Other,
}

/// The protocol version of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// `HTTP/1.0`: the connection closes after the response unless the
    /// client asked for keep-alive.
    Http10,
    /// `HTTP/1.1`: persistent unless `Connection: close`.
    Http11,
}

/// A parsed request head; the strings borrow from the buffer parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The method.
    pub method: Method,
    /// The method's token as sent.
    pub method_name: &'a str,
    /// The request target: the path with its query, `*` for `OPTIONS *`.
    pub target: &'a str,
    /// The version.
    pub version: Version,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// The bytes of body that follow the head (0 without `Content-Length`).
    pub content_length: u64,
}

impl Request<'_> {
    /// The target's path, without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// Why a request head was refused; [`Error::status`] is the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Malformed (400); the reason, for the log.
    Bad(&'static str),
    /// The head is longer than [`MAX_HEAD`] (431).
    HeadTooLarge,
    /// An HTTP version other than 1.0 and 1.1 (505).
    Version,
    /// A transfer coding, which this server does not take (501).
    TransferEncoding,
}

impl Error {
    /// The status to answer with.
    pub fn status(self) -> Status {
        match self {
            Error::Bad(_) => Status::BadRequest,
            Error::HeadTooLarge => Status::HeaderFieldsTooLarge,
            Error::Version => Status::VersionNotSupported,
            Error::TransferEncoding => Status::NotImplemented,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Bad(why) => write!(f, "bad request: {why}"),
            Error::HeadTooLarge => write!(f, "request head over {MAX_HEAD} bytes"),
            Error::Version => f.write_str("HTTP version not supported"),
            Error::TransferEncoding => f.write_str("transfer coding not implemented"),
        }
    }
}

/// The statuses the server answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// 200.
    Ok,
    /// 400.
    BadRequest,
    /// 404.
    NotFound,
    /// 405.
    MethodNotAllowed,
    /// 408: the client did not send a whole request in time.
    RequestTimeout,
    /// 413: a request body larger than the server takes.
    ContentTooLarge,
    /// 431: the request head is too large (RFC 6585; 413 is about the
    /// body, 431 names what is too large).
    HeaderFieldsTooLarge,
    /// 500.
    InternalError,
    /// 501.
    NotImplemented,
    /// 503: no room for another connection.
    Unavailable,
    /// 505.
    VersionNotSupported,
}

impl Status {
    /// The status code.
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::ContentTooLarge => 413,
            Status::HeaderFieldsTooLarge => 431,
            Status::InternalError => 500,
            Status::NotImplemented => 501,
            Status::Unavailable => 503,
            Status::VersionNotSupported => 505,
        }
    }

    /// The reason phrase.
    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::RequestTimeout => "Request Timeout",
            Status::ContentTooLarge => "Content Too Large",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::InternalError => "Internal Server Error",
            Status::NotImplemented => "Not Implemented",
            Status::Unavailable => "Service Unavailable",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}

/// `tchar` of RFC 9110 §5.6.2.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// Where the first CRLF of `buf` starts; `Err` on a bare CR or LF before it.
fn line_end(buf: &[u8]) -> Result<Option<usize>, Error> {
    for (i, &b) in buf.iter().enumerate() {
        match b {
            b'\n' => return Err(Error::Bad("bare LF")),
            b'\r' => {
                return match buf.get(i + 1) {
                    Some(b'\n') => Ok(Some(i)),
                    Some(_) => Err(Error::Bad("bare CR")),
                    None => Ok(None),
                }
            }
            _ => {}
        }
    }
    Ok(None)
}

/// Parses the request line (without its CRLF).
fn request_line(line: &[u8]) -> Result<(Method, &str, &str, Version), Error> {
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::Bad("request line is not METHOD TARGET VERSION"));
    };
    if !is_token(method) {
        return Err(Error::Bad("method is not a token"));
    }
    let target_ok = (target.first() == Some(&b'/') || target == b"*")
        && target.iter().all(|&b| b.is_ascii_graphic());
    if !target_ok {
        return Err(Error::Bad("request target"));
    }
    let version = match version {
        b"HTTP/1.1" => Version::Http11,
        b"HTTP/1.0" => Version::Http10,
        [b'H', b'T', b'T', b'P', b'/', a, b'.', b] if a.is_ascii_digit() && b.is_ascii_digit() => {
            return Err(Error::Version)
        }
        _ => return Err(Error::Bad("HTTP version")),
    };
    // Tokens and graphic ASCII are UTF-8.
    let method_name = core::str::from_utf8(method).map_err(|_| Error::Bad("method"))?;
    let target = core::str::from_utf8(target).map_err(|_| Error::Bad("target"))?;
    let m = match method {
        b"GET" => Method::Get,
        b"HEAD" => Method::Head,
        _ => Method::Other,
    };
    Ok((m, method_name, target, version))
}

/// Whether comma-separated header value `value` lists `token`
/// (case-insensitive).
fn lists(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Parses the request head at the start of `buf`: `Ok(None)` while it is
/// incomplete (read more), else the request and the head's length (the
/// body, if any, follows).
pub fn parse(buf: &[u8]) -> Result<Option<(Request<'_>, usize)>, Error> {
    let window = &buf[..buf.len().min(MAX_HEAD)];
    let Some(first) = line_end(window)? else {
        return if buf.len() >= MAX_HEAD {
            Err(Error::HeadTooLarge)
        } else {
            Ok(None)
        };
    };
    let (method, method_name, target, version) = request_line(&window[..first])?;
    let mut keep_alive = version == Version::Http11;
    let mut content_length: Option<u64> = None;
    let mut hosts = 0u32;
    let mut at = first + 2;
    loop {
        let rest = &window[at..];
        let Some(end) = line_end(rest)? else {
            return if buf.len() >= MAX_HEAD {
                Err(Error::HeadTooLarge)
            } else {
                Ok(None)
            };
        };
        let line = &rest[..end];
        at += end + 2;
        if line.is_empty() {
            break;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            return Err(Error::Bad("obsolete line folding"));
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or(Error::Bad("header line without a colon"))?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if !is_token(name) {
            return Err(Error::Bad("header name"));
        }
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(Error::Bad("control character in a header value"));
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            if value.is_empty() || !value.iter().all(u8::is_ascii_digit) || value.len() > 18 {
                return Err(Error::Bad("Content-Length"));
            }
            let n = value.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            if content_length.is_some_and(|c| c != n) {
                return Err(Error::Bad("conflicting Content-Length"));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return Err(Error::TransferEncoding);
        } else if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case(b"connection") {
            if lists(value, b"close") {
                keep_alive = false;
            } else if lists(value, b"keep-alive") {
                keep_alive = true;
            }
        }
    }
    if version == Version::Http11 && hosts != 1 {
        return Err(Error::Bad("an HTTP/1.1 request needs one Host header"));
    }
    Ok(Some((
        Request {
            method,
            method_name,
            target,
            version,
            keep_alive,
            content_length: content_length.unwrap_or(0),
        },
        at,
    )))
}

/// A bounded writer into a byte slice (`fmt::Write`): fails instead of
/// growing.
pub struct SliceWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> SliceWriter<'a> {
    /// Writes into `buf` from its start.
    pub fn new(buf: &'a mut [u8]) -> SliceWriter<'a> {
        SliceWriter { buf, len: 0 }
    }

    /// The bytes written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The head of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead<'a> {
    /// Its status.
    pub status: Status,
    /// `Content-Type`.
    pub content_type: &'a str,
    /// `Content-Length`: the body's bytes (also for `HEAD`, which sends none).
    pub content_length: u64,
    /// `Connection: keep-alive` or `close`.
    pub keep_alive: bool,
}

impl ResponseHead<'_> {
    /// Writes the head, its empty line included, into `w`.
    pub fn write(&self, w: &mut impl Write) -> fmt::Result {
        write!(
            w,
            "HTTP/1.1 {} {}\r\nServer: pecan\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Cache-Control: no-store\r\nConnection: {}\r\n\r\n",
            self.status.code(),
            self.status.reason(),
            self.content_type,
            self.content_length,
            if self.keep_alive {
                "keep-alive"
            } else {
                "close"
            }
        )
    }
}

/// The `Content-Type` of a static file named `path`, by its extension.
pub fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" => "text/plain; charset=utf-8",
        "css" => "text/css",
        "js" => "text/javascript",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "svg" => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(content_type("/hello.txt"), "text/plain; charset=utf-8");
        assert_eq!(content_type("/a.b/index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("/noext"), "application/octet-stream");
        assert_eq!(content_type("/x.JPG"), "application/octet-stream");
    }

    fn ok(text: &str) -> (Request<'_>, usize) {
        parse(text.as_bytes()).unwrap().unwrap()
    }

    #[test]
    fn get() {
        let (r, n) = ok("GET /status.json?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\nrest");
        assert_eq!(n, 55);
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.target, "/status.json?x=1");
        assert_eq!(r.path(), "/status.json");
        assert!(r.keep_alive);
        assert_eq!(r.content_length, 0);
    }

    #[test]
    fn versions_and_connection() {
        assert!(!ok("GET / HTTP/1.0\r\n\r\n").0.keep_alive);
        assert!(
            ok("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
                .0
                .keep_alive
        );
        assert!(
            !ok("HEAD / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n")
                .0
                .keep_alive
        );
        assert_eq!(parse(b"GET / HTTP/2.0\r\n\r\n"), Err(Error::Version));
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\n\r\n"),
            Err(Error::Bad("an HTTP/1.1 request needs one Host header"))
        );
    }

    #[test]
    fn incomplete() {
        for text in [
            "",
            "GET",
            "GET / HTTP/1.1\r",
            "GET / HTTP/1.1\r\nHost: a\r\n",
        ] {
            assert_eq!(parse(text.as_bytes()), Ok(None), "{text:?}");
        }
    }

    #[test]
    fn bad_request_line_early() {
        // Refused as soon as the line is complete, before the head is.
        assert!(matches!(parse(b"GARBAGE\r\n"), Err(Error::Bad(_))));
        assert!(matches!(parse(b"GET  / HTTP/1.1\r\n"), Err(Error::Bad(_))));
        assert!(matches!(parse(b"GET x HTTP/1.1\r\n"), Err(Error::Bad(_))));
        assert!(matches!(parse(b"G(T / HTTP/1.1\r\n"), Err(Error::Bad(_))));
        assert!(matches!(parse(b"GET / HTTP/1.1\n"), Err(Error::Bad(_))));
        assert!(matches!(parse(b"GET / HTTP/1.1\rX"), Err(Error::Bad(_))));
    }

    #[test]
    fn bad_headers() {
        for text in [
            "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
            "GET / HTTP/1.1\r\nHost a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n",
        ] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Error::Bad(_))),
                "{text:?}"
            );
        }
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(Error::TransferEncoding)
        );
        let (r, _) = ok("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n");
        assert_eq!((r.method, r.content_length), (Method::Other, 12));
    }

    #[test]
    fn too_large() {
        let mut text = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
        text.resize(MAX_HEAD - 4, b'a');
        assert_eq!(parse(&text), Ok(None));
        text.extend_from_slice(b"\r\n\r\n");
        assert!(parse(&text).unwrap().is_some(), "exactly MAX_HEAD fits");
        text.insert(30, b'a');
        assert_eq!(parse(&text), Err(Error::HeadTooLarge));
        // An endless request line too.
        assert_eq!(parse(&[b'a'; MAX_HEAD]), Err(Error::HeadTooLarge));
    }

    #[test]
    fn response_head() {
        let mut buf = [0u8; 256];
        let mut w = SliceWriter::new(&mut buf);
        ResponseHead {
            status: Status::HeaderFieldsTooLarge,
            content_type: "text/plain",
            content_length: 3,
            keep_alive: false,
        }
        .write(&mut w)
        .unwrap();
        let n = w.len();
        let text = core::str::from_utf8(&buf[..n]).unwrap();
        assert!(text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(text
            .contains("Content-Length: 3\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"));
        let mut small = [0u8; 8];
        let mut w = SliceWriter::new(&mut small);
        assert!(ResponseHead {
            status: Status::Ok,
            content_type: "x",
            content_length: 0,
            keep_alive: true
        }
        .write(&mut w)
        .is_err());
    }
}
