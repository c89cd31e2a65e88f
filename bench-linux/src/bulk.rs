//! `bw-pipe` and `bw-unix`: bulk transfer to a forked process, like
//! LMBench's `bw_pipe` and `bw_unix`.
//!
//! This process writes [`TRANSFER`] bytes in [`CHUNK`]-byte `write`s; the
//! peer reads them (into a buffer of its own) and answers each complete
//! transfer with a 1-byte acknowledgement. A sample is one transfer, from
//! the first `write` to the acknowledgement's `read` returning, timed with
//! [`bench::measure`] and reported in bytes per tick
//! ([`bench::throughput`]).

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use crate::sys::{self, FdPair};

/// Bytes per `write`, as LMBench's default transfer size.
pub const CHUNK: usize = 64 * 1024;
/// Bytes per sample.
pub const TRANSFER: usize = 4 * 1024 * 1024;

/// The peer: read until end of file, acknowledging every [`TRANSFER`]
/// bytes.
fn sink(rx: RawFd, ack: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut received = 0;
    loop {
        let n = sys::read(rx, buf)?;
        if n == 0 {
            return Ok(());
        }
        received += n;
        while received >= TRANSFER {
            received -= TRANSFER;
            sys::write_all(ack, b"k")?;
        }
    }
}

/// Measures transfers from `tx` to the peer's `rx`, acknowledged from the
/// peer's `peer_ack` to this process's `ack`. `fds` are all the
/// descriptors (the peer closes those it does not use).
fn transfer(
    samples: &mut [u64],
    overhead: u64,
    fds: &[RawFd],
    (tx, rx): (RawFd, RawFd),
    (peer_ack, ack): (RawFd, RawFd),
) -> io::Result<sys::Peer> {
    let mut buf = vec![0x5au8; CHUNK];
    let peer = sys::fork_peer("bulk transfer", || {
        sys::close_except(fds, &[rx, peer_ack]);
        sink(rx, peer_ack, &mut buf)
    })?;
    let mut failure = None;
    let mut reply = [0u8; 1];
    bench::measure(samples, overhead, || {
        if failure.is_some() {
            return;
        }
        let mut sent = Ok(());
        for _ in 0..TRANSFER / CHUNK {
            sent = sent.and_then(|()| sys::write_all(tx, &buf));
        }
        if let Err(e) = sent.and_then(|()| sys::read_message(ack, &mut reply)) {
            failure = Some(e);
        }
    });
    for s in samples.iter_mut() {
        *s = bench::throughput(TRANSFER as u64, *s);
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(peer),
    }
}

/// `bw-pipe`: data through one pipe, acknowledgements through another.
pub fn pipe(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    let (data_r, data_w): FdPair = sys::pipe()?;
    let (ack_r, ack_w): FdPair = sys::pipe()?;
    let all = sys::raw_fds([&data_r, &data_w, &ack_r, &ack_w]);
    let peer = transfer(
        samples,
        overhead,
        &all,
        (data_w.as_raw_fd(), data_r.as_raw_fd()),
        (ack_w.as_raw_fd(), ack_r.as_raw_fd()),
    );
    // Closing every end here gives the peer end of file.
    drop((data_r, data_w, ack_r, ack_w));
    peer?.wait()
}

/// `bw-unix`: data and acknowledgements through a unix stream socket pair.
pub fn unix(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    let (mine, theirs): FdPair = sys::socketpair()?;
    let all = sys::raw_fds([&mine, &theirs]);
    let (m, t) = (mine.as_raw_fd(), theirs.as_raw_fd());
    let peer = transfer(samples, overhead, &all, (m, t), (t, m));
    drop((mine, theirs));
    peer?.wait()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_run() {
        let _alone = crate::sys::fork_tests_alone();
        let o = bench::timestamp_overhead();
        let mut samples = [0u64; 3];
        pipe(&mut samples, o).unwrap();
        assert!(samples.iter().all(|&s| s > 0), "{samples:?}");
        unix(&mut samples, o).unwrap();
        assert!(samples.iter().all(|&s| s > 0), "{samples:?}");
    }
}
