//! `ring-N`: a token passed around a ring of N processes through pipes,
//! like LMBench's `lat_ctx -s 0 N`.
//!
//! Process `k` reads the token from pipe `k` and writes it into pipe
//! `k + 1 (mod N)`; this process is number 0 and times whole rounds with
//! [`bench::measure`]: `write` into pipe 1 to `read` from pipe 0 returning.
//! A sample is the round's ticks (timing overhead subtracted) divided by N:
//! the cost of one hand-over — a pipe write, a pipe read and a switch to
//! another address space. Unlike `lat_ctx` the pipe cost is not subtracted;
//! Pecan's ring also pays for its IPC.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::sys::{self, Peer};

/// Runs the ring of `n` (at least 2) processes.
pub fn ring(samples: &mut [u64], overhead: u64, n: usize) -> io::Result<()> {
    assert!(n >= 2, "a ring needs two processes");
    let mut reads: Vec<Option<OwnedFd>> = Vec::with_capacity(n);
    let mut writes: Vec<Option<OwnedFd>> = Vec::with_capacity(n);
    for _ in 0..n {
        let (r, w) = sys::pipe()?;
        reads.push(Some(r));
        writes.push(Some(w));
    }
    let all = sys::raw_fds(reads.iter().chain(&writes).flatten());
    let mut peers: Vec<Peer> = Vec::with_capacity(n - 1);
    for k in 1..n {
        let rx = reads[k].as_ref().map(AsRawFd::as_raw_fd).unwrap_or(-1);
        let tx = writes[(k + 1) % n]
            .as_ref()
            .map(AsRawFd::as_raw_fd)
            .unwrap_or(-1);
        peers.push(sys::fork_peer("ring", || {
            sys::close_except(&all, &[rx, tx]);
            let mut token = [0u8; 1];
            while sys::read_exact(rx, &mut token)? {
                sys::write_all(tx, &token)?;
            }
            Ok(())
        })?);
    }
    // Keep only this process's ends: read pipe 0, write pipe 1.
    let rx = reads[0].take().expect("pipe 0's read end");
    let tx = writes[1].take().expect("pipe 1's write end");
    drop((reads, writes));

    let mut failure = None;
    let mut token = [b't'];
    bench::measure(samples, overhead, || {
        if failure.is_some() {
            return;
        }
        let round = sys::write_all(tx.as_raw_fd(), &token)
            .and_then(|()| sys::read_message(rx.as_raw_fd(), &mut token));
        if let Err(e) = round {
            failure = Some(e);
        }
    });
    for s in samples.iter_mut() {
        *s /= n as u64;
    }
    // End of file travels around the ring and ends every peer.
    drop(tx);
    let mut result = failure.map_or(Ok(()), Err);
    for peer in peers {
        result = result.and(peer.wait());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_run() {
        let _alone = crate::sys::fork_tests_alone();
        let o = bench::timestamp_overhead();
        for n in [2, 4, 10] {
            let mut samples = [0u64; 10];
            ring(&mut samples, o, n).unwrap_or_else(|e| panic!("ring-{n}: {e}"));
            assert!(samples.iter().any(|&s| s > 0), "ring-{n}: {samples:?}");
        }
    }
}
