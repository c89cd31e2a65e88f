//! The HTTP benchmarks (issue 17's "requests per second from the host"):
//! requests per second that a server in the guest answers to the host's
//! load generator (`cargo xtask http-load`, `xtask/src/httpcheck.rs`),
//! keep-alive connections each sending `GET` [`PATH`] and reading the
//! whole response before the next (no pipelining), through QEMU's user
//! network (`restrict=on`) and a host forward on 127.0.0.1.
//!
//! - `http-rps-N` (Pecan): `components/apps/http-server` in
//!   `scenarios/http.toml` (behind the switch and the virtio-net driver,
//!   smoltcp linked into the server);
//! - `http-rps-N-linux`: the same request handling (`net::conn`,
//!   `net::http`, `net::pattern`) built for Linux as `bench-linux
//!   http-serve`, on Linux's virtio_net and TCP/IP stack.
//!
//! Unlike the other benchmarks these are measured by the host, not by the
//! guest: the guest only serves, and `cargo xtask bench` counts the
//! responses in host time. The figure is wall clock — requests per second
//! of the host's clock, never under icount — so it depends on the host's
//! speed and load (the lab's pairs: `cargo xtask bench --wall N`).
//!
//! A benchmark opens its connections once and keeps them busy through an
//! unrecorded warm-up of [`WARM_UP_SECS`] and then [`RUNS`] windows of
//! [`RUN_SECS`] each: its samples are the windows' requests per second
//! ([`crate::Unit::RequestsPerSecond`]; a response counts in the window in
//! which it was read whole).

/// The path every request gets: a generated body of 1 KiB
/// (`net::pattern`).
pub const PATH: &str = "/pattern/1024";
/// Its body's bytes.
pub const BODY: usize = 1024;
/// Recorded runs per benchmark.
pub const RUNS: usize = 5;
/// Seconds per recorded run.
pub const RUN_SECS: u64 = 2;
/// Seconds of the unrecorded run before them.
pub const WARM_UP_SECS: u64 = 1;
/// The prefix of the benchmarks' names.
pub const PREFIX: &str = "http-rps-";
/// The suffix of a Linux counterpart's name.
pub const LINUX_SUFFIX: &str = "-linux";

/// The keep-alive connections of HTTP benchmark `name` (Pecan's or its
/// Linux counterpart), or `None` if `name` is not one.
pub fn connections(name: &str) -> Option<usize> {
    let rest = name.strip_prefix(PREFIX)?;
    let digits = rest.strip_suffix(LINUX_SUFFIX).unwrap_or(rest);
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| (1..=64).contains(&n))
}

/// Whether `name` is an HTTP benchmark: measured by the host, the guest
/// serving.
pub fn is_http(name: &str) -> bool {
    connections(name).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(connections("http-rps-1"), Some(1));
        assert_eq!(connections("http-rps-16"), Some(16));
        assert_eq!(connections("http-rps-4-linux"), Some(4));
        for bad in [
            "http-rps-",
            "http-rps-0",
            "http-rps-04",
            "http-rps-65",
            "http-rps-x",
            "http-rps-1-linuxx",
            "net-tcp-tx-64",
            "http-rps--linux",
        ] {
            assert_eq!(connections(bad), None, "{bad}");
        }
        assert!(is_http("http-rps-1-linux") && !is_http("getppid"));
    }
}
