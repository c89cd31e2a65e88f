//! The network-throughput benchmarks both sides run (issue 17's
//! measurement): TCP and UDP, the guest transmitting and receiving,
//! payloads of 64, 1024 and 1450 bytes, against the host peer of the
//! socket link (`xtask::netpeer`, protocol in `ucore::netpeer`),
//! measured with the lab's I/O method ([`crate::soak`]).
//!
//! - `net-tcp-tx-S`: a connection to the peer's TCP sink, the length,
//!   then [`run_bytes`] bytes of the pattern in writes of S bytes; the run
//!   ends when the peer's report line arrived (every byte received and
//!   checked there). Nagle off at 64 B (`TCP_NODELAY`), on otherwise.
//! - `net-tcp-rx-S`: a connection to the peer's TCP source, the length;
//!   reads of S bytes until the peer closes.
//! - `net-udp-tx-S`: [`run_bytes`]` / S` datagrams of S bytes to the
//!   peer's UDP sink; the run ends when the last one has left the stack
//!   (Linux: `sendto` returned). The peer's count is read after the runs.
//! - `net-udp-rx-S`: `udp-send S COUNT PORT` on the peer's control port;
//!   the run ends when all COUNT datagrams came (a lost one fails the
//!   run: the receiver's buffers are sized so that none is lost).
//!
//! - `net-tcp-tx-1450-loss`, `net-tcp-rx-1450-loss` ([`LOSS`]): the TCP
//!   runs at 1450 B while the peer drops every [`LOSS_EVERY`]-th data
//!   segment of the transfer, both ways (`loss N` on its control port):
//!   what recovering from 1 % loss costs, in CPU and in time (smoltcp's
//!   sender has no SACK; the peer's smoltcp neither, so Linux's cannot use
//!   its own against it).
//!
//! A run moves [`run_bytes`] bytes: 2 MiB in whole payloads, or 4096
//! payloads where that is less (64 B: 256 KiB).

/// Payload sizes and the names' suffixes.
pub const SIZES: [(usize, &str); 3] = [(64, "64"), (1024, "1k"), (1450, "1450")];

/// Recorded runs per benchmark (after one unrecorded).
pub const RUNS: usize = 5;

/// The most bytes a run moves.
pub const MAX_RUN_BYTES: u64 = 2 << 20;
/// The most payloads a run sends.
pub const MAX_RUN_PAYLOADS: u64 = 4096;

/// Bytes one run of payloads of `size` bytes moves (whole payloads).
pub fn run_bytes(size: usize) -> u64 {
    let size = size as u64;
    (MAX_RUN_BYTES / size).min(MAX_RUN_PAYLOADS) * size
}

/// The loss-recovery benchmarks: TCP at 1450 B with every
/// [`LOSS_EVERY`]-th data segment dropped by the peer; they come after
/// [`all`]'s in both sides' order.
pub const LOSS: [(Dir, &str); 2] = [
    (Dir::Tx, "net-tcp-tx-1450-loss"),
    (Dir::Rx, "net-tcp-rx-1450-loss"),
];
/// The loss benchmarks' payload size.
pub const LOSS_SIZE: usize = 1450;
/// The peer drops every this-many-th data segment in a loss benchmark (1 %).
pub const LOSS_EVERY: u64 = 100;

/// The transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

/// Which way the bytes go, seen from the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Tx,
    Rx,
}

/// Every benchmark: (protocol, direction, payload size, name stem without
/// the `-linux` suffix), in the order both sides run them.
pub fn all() -> impl Iterator<Item = (Proto, Dir, usize, &'static str)> {
    const NAMES: [&str; 12] = [
        "net-tcp-tx-64",
        "net-tcp-tx-1k",
        "net-tcp-tx-1450",
        "net-tcp-rx-64",
        "net-tcp-rx-1k",
        "net-tcp-rx-1450",
        "net-udp-tx-64",
        "net-udp-tx-1k",
        "net-udp-tx-1450",
        "net-udp-rx-64",
        "net-udp-rx-1k",
        "net-udp-rx-1450",
    ];
    let kinds = [
        (Proto::Tcp, Dir::Tx),
        (Proto::Tcp, Dir::Rx),
        (Proto::Udp, Dir::Tx),
        (Proto::Udp, Dir::Rx),
    ];
    kinds
        .into_iter()
        .flat_map(|(p, d)| SIZES.into_iter().map(move |(s, _)| (p, d, s)))
        .zip(NAMES)
        .map(|((p, d, s), n)| (p, d, s, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_kinds_and_runs_are_whole() {
        for (p, d, size, name) in all() {
            let proto = if p == Proto::Tcp { "tcp" } else { "udp" };
            let dir = if d == Dir::Tx { "tx" } else { "rx" };
            let suffix = SIZES.iter().find(|s| s.0 == size).unwrap().1;
            assert_eq!(name, ["net", proto, dir, suffix].join("-"));
            assert_eq!(run_bytes(size) % size as u64, 0);
            assert!(run_bytes(size) <= MAX_RUN_BYTES);
        }
        assert_eq!(all().count(), 12);
        for (_, name) in LOSS {
            assert!(name.starts_with("net-tcp-") && name.ends_with("-1450-loss"));
            assert!(all().all(|b| b.3 != name));
        }
        assert_eq!(run_bytes(64), 256 << 10);
        assert_eq!(run_bytes(1024), 2 << 20);
    }
}
