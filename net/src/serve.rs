//! The HTTP server's answers, one source for Pecan's `http-server`
//! (`components/apps/http-server`) and its Linux build (`bench-linux
//! http-serve`, the lab's counterpart): which request gets which
//! response. The transport, the status report's figures, where static
//! files come from and the log are the server's ([`Site`]).
//!
//! | request | response |
//! |---------|----------|
//! | `GET`/`HEAD /pattern/BYTES` | 200 and a generated body ([`crate::pattern`]; its length is returned for the server to stream), 404 for a path that is not plain decimal, 400 over 64 MiB |
//! | `GET`/`HEAD /` | 200, the status report as HTML |
//! | `GET`/`HEAD /status.json` | 200, the report as JSON |
//! | `GET`/`HEAD` any other path | 200 and the static file ([`crate::http::content_type`]), or 404 (a `..` segment is never a file) |
//! | any other method | 501 |
//!
//! `HEAD` gets the head `GET` would, with its `Content-Length`, and no
//! body. Every response has `Content-Length` and keeps the connection
//! alive if the request did ([`crate::http::Request::keep_alive`]);
//! [`error`] is a refusal's response, after which the connection closes.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::http::{Method, Request, ResponseHead, Status};
use crate::report::Report;

/// What a server supplies to [`respond`].
pub trait Site {
    /// The status report (`/` and `/status.json`).
    fn report(&mut self) -> Report;
    /// The static file at `path` (checked: no `..` segment), if there is
    /// one.
    fn file(&mut self, path: &str) -> Option<Vec<u8>>;
    /// A response with `status` was made.
    fn count(&mut self, status: Status);
    /// A line for the server's log: a 404 or a refused pattern, with its
    /// path.
    fn log(&mut self, line: fmt::Arguments<'_>);
}

/// Appends a response head.
pub fn head(out: &mut Vec<u8>, status: Status, ctype: &str, len: u64, keep_alive: bool) {
    let mut text = String::new();
    let _ = ResponseHead {
        status,
        content_type: ctype,
        content_length: len,
        keep_alive,
    }
    .write(&mut text);
    out.extend_from_slice(text.as_bytes());
}

/// Appends the response refusing a request with `status` (a plain-text
/// body naming it; `Connection: close`: the server closes after it).
pub fn error(out: &mut Vec<u8>, status: Status) {
    let body = format!("{} {}\n", status.code(), status.reason());
    head(
        out,
        status,
        "text/plain; charset=utf-8",
        body.len() as u64,
        false,
    );
    out.extend_from_slice(body.as_bytes());
}

/// Appends the response to `r` to `out` (see the module doc). For a
/// generated body the head is appended and the body's length returned:
/// the server streams [`crate::pattern::fill`]'s bytes after it.
pub fn respond(site: &mut impl Site, r: &Request<'_>, out: &mut Vec<u8>) -> Option<u64> {
    if matches!(r.method, Method::Get | Method::Head) {
        if let Some(asked) = crate::pattern::parse(r.path()) {
            return pattern(site, r, asked, out);
        }
    }
    let (status, ctype, body): (Status, &str, Vec<u8>) = match r.method {
        Method::Other => {
            let s = Status::NotImplemented;
            (
                s,
                "text/plain; charset=utf-8",
                format!("{} {}\n", s.code(), s.reason()).into_bytes(),
            )
        }
        Method::Get | Method::Head => match r.path() {
            "/" => (
                Status::Ok,
                "text/html; charset=utf-8",
                site.report().html().into_bytes(),
            ),
            "/status.json" => (
                Status::Ok,
                "application/json",
                site.report().json().into_bytes(),
            ),
            path => match file(site, path) {
                Some(bytes) => (Status::Ok, crate::http::content_type(path), bytes),
                None => {
                    // The target is graphic ASCII (the parser's rule):
                    // safe to log, cut to a line's length.
                    site.log(format_args!("404 {}", &path[..path.len().min(80)]));
                    (
                        Status::NotFound,
                        "text/plain; charset=utf-8",
                        b"404 Not Found\n".to_vec(),
                    )
                }
            },
        },
    };
    site.count(status);
    head(out, status, ctype, body.len() as u64, r.keep_alive);
    if r.method != Method::Head {
        out.extend_from_slice(&body);
    }
    None
}

/// The static file at `path`, never one with a `..` segment.
fn file(site: &mut impl Site, path: &str) -> Option<Vec<u8>> {
    if path.split('/').any(|s| s == "..") {
        return None;
    }
    site.file(path)
}

/// The response to a `/pattern/...` request: its head in `out`, the
/// length of the body to stream (none for `HEAD`, an empty body or a
/// refusal).
fn pattern(
    site: &mut impl Site,
    r: &Request<'_>,
    asked: Result<u64, crate::pattern::Refused>,
    out: &mut Vec<u8>,
) -> Option<u64> {
    let refused = match asked {
        Ok(len) => {
            site.count(Status::Ok);
            head(
                out,
                Status::Ok,
                "text/plain; charset=utf-8",
                len,
                r.keep_alive,
            );
            return (r.method != Method::Head && len > 0).then_some(len);
        }
        Err(crate::pattern::Refused::NotANumber) => Status::NotFound,
        Err(crate::pattern::Refused::TooLarge) => Status::BadRequest,
    };
    let path = r.path();
    site.log(format_args!(
        "{} {}",
        refused.code(),
        &path[..path.len().min(80)]
    ));
    let body = format!("{} {}\n", refused.code(), refused.reason());
    site.count(refused);
    head(
        out,
        refused,
        "text/plain; charset=utf-8",
        body.len() as u64,
        r.keep_alive,
    );
    if r.method != Method::Head {
        out.extend_from_slice(body.as_bytes());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Section;
    use alloc::string::ToString;
    use alloc::vec;

    #[derive(Default)]
    struct Test {
        counted: Vec<u16>,
        logged: Vec<String>,
    }

    impl Site for Test {
        fn report(&mut self) -> Report {
            Report {
                title: "t".into(),
                sections: vec![Section::new("s").field("n", 1u64)],
            }
        }
        fn file(&mut self, path: &str) -> Option<Vec<u8>> {
            (path == "/a.txt").then(|| b"file".to_vec())
        }
        fn count(&mut self, status: Status) {
            self.counted.push(status.code());
        }
        fn log(&mut self, line: fmt::Arguments<'_>) {
            self.logged.push(line.to_string());
        }
    }

    fn answer(site: &mut Test, request: &str) -> (String, Option<u64>) {
        let (r, _) = crate::http::parse(request.as_bytes()).unwrap().unwrap();
        let mut out = Vec::new();
        let body = respond(site, &r, &mut out);
        (String::from_utf8(out).unwrap(), body)
    }

    #[test]
    fn routes() {
        let mut s = Test::default();
        let (out, body) = answer(&mut s, "GET /pattern/1024 HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n") && out.ends_with("\r\n\r\n"));
        assert!(out.contains("Content-Length: 1024\r\n") && out.contains("keep-alive"));
        assert_eq!(body, Some(1024));
        let (out, body) = answer(&mut s, "HEAD /pattern/1024 HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(out.contains("Content-Length: 1024\r\n") && body.is_none());
        let (out, _) = answer(&mut s, "GET /pattern/01 HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 404 ") && out.ends_with("404 Not Found\n"));
        let (out, _) = answer(
            &mut s,
            "GET /pattern/99999999999 HTTP/1.1\r\nHost: h\r\n\r\n",
        );
        assert!(out.starts_with("HTTP/1.1 400 "));
        let (out, _) = answer(
            &mut s,
            "GET /a.txt HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        );
        assert!(out.contains("text/plain") && out.contains("Connection: close\r\n"));
        assert!(out.ends_with("\r\n\r\nfile"));
        let (out, _) = answer(&mut s, "GET /x/../a.txt HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 404 "));
        let (out, _) = answer(&mut s, "GET /status.json HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(
            out.contains("application/json") && out.contains("\"n\": 1"),
            "{out}"
        );
        let (out, _) = answer(&mut s, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(out.contains("text/html"));
        let (out, _) = answer(
            &mut s,
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
        );
        assert!(out.starts_with("HTTP/1.1 501 "));
        assert_eq!(s.counted, [200, 200, 404, 400, 200, 404, 200, 200, 501]);
        assert_eq!(
            s.logged,
            [
                "404 /pattern/01",
                "400 /pattern/99999999999",
                "404 /x/../a.txt"
            ]
        );
        let mut out = Vec::new();
        error(&mut out, Status::RequestTimeout);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Connection: close\r\n") && text.ends_with("408 Request Timeout\n"));
    }
}
