//! One-way IPC figures (sel4bench method) from ping-pong between two
//! parties: futex wake/wait between threads and between processes, pipes,
//! unix stream sockets and eventfd.
//!
//! Every benchmark is a ping-pong in which the *peer* (thread or forked
//! process) is the timed sender and this process the timed receiver:
//!
//! 1. this process sends a ping (payload as named) and blocks receiving;
//! 2. the peer receives it, writes its reply payload, takes `t0 = now()`,
//!    stores `t0` in shared memory ([`Exchange::t0`]) and makes the system
//!    call that sends the pong (`write`, `futex` wake);
//! 3. this process takes `t1 = now()` right after its receiving system call
//!    returns; the sample is `t1 - t0 - overhead`.
//!
//! With one CPU the window holds the sender's system call, the sender
//! blocking in its next receive, the switch (of address space, between
//! processes) and the receiver's return to user mode — one hand-over, as
//! on Pecan. Between processes `t0` travels through a `MAP_SHARED` page;
//! a 1-byte payload could not carry it. For the futex rows the payload
//! words are written to shared memory *before* `t0`: shared memory needs
//! no copy, so the 4/8/16-word rows show that the wake-up costs the same
//! whatever the payload (the receiver reads the words after `t1`). For
//! pipes and sockets the payload is copied by `write` and `read`, inside
//! the window.

use std::hint::black_box;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;

use bench::now;

use crate::sys::{self, Exchange, SharedPage, STOP};

/// The sel4bench one-way loop: [`bench::WARM_UP`] unrecorded exchanges,
/// then one per sample. `exchange` does one ping-pong and returns the
/// peer's send timestamp `t0` and this process's receive timestamp `t1`.
pub fn one_way(
    samples: &mut [u64],
    overhead: u64,
    mut exchange: impl FnMut() -> io::Result<(u64, u64)>,
) -> io::Result<()> {
    for _ in 0..bench::WARM_UP {
        exchange()?;
    }
    for s in samples.iter_mut() {
        let (t0, t1) = exchange()?;
        *s = t1.wrapping_sub(t0).saturating_sub(overhead);
    }
    Ok(())
}

/// The peer side of the futex ping-pong: wait for ping `seq`, read the
/// payload, write the reply payload, then timestamp and wake.
fn futex_peer(x: &Exchange, words: usize, private: bool) -> io::Result<()> {
    let mut seq = 0u32;
    loop {
        seq += 1;
        if sys::futex_wait_for(&x.ping, seq, private)? == STOP {
            return Ok(());
        }
        let mut acc = 0;
        for w in &x.words[..words] {
            acc ^= w.load(Ordering::Relaxed);
        }
        black_box(acc);
        for w in &x.words[..words] {
            w.store(u64::from(seq), Ordering::Relaxed);
        }
        let t0 = now();
        x.t0.store(t0, Ordering::Relaxed);
        x.pong.store(seq, Ordering::Release);
        sys::futex_wake(&x.pong, private)?;
    }
}

/// This process's side of the futex ping-pong; always tells the peer to
/// stop at the end, also after an error.
fn futex_parent(
    x: &Exchange,
    words: usize,
    private: bool,
    samples: &mut [u64],
    overhead: u64,
) -> io::Result<()> {
    let mut seq = 0u32;
    let result = one_way(samples, overhead, || {
        seq += 1;
        for w in &x.words[..words] {
            w.store(u64::from(seq), Ordering::Relaxed);
        }
        x.ping.store(seq, Ordering::Release);
        sys::futex_wake(&x.ping, private)?;
        sys::futex_wait_for(&x.pong, seq, private)?;
        let t1 = now();
        let mut acc = 0;
        for w in &x.words[..words] {
            acc ^= w.load(Ordering::Relaxed);
        }
        black_box(acc);
        Ok((x.t0.load(Ordering::Relaxed), t1))
    });
    x.ping.store(STOP, Ordering::Release);
    let stopped = sys::futex_wake(&x.ping, private);
    result.and(stopped)
}

/// `futex-threads-Nw`: futex ping-pong with a second thread of this
/// process (private futexes), `words` payload words in shared memory.
pub fn futex_threads(samples: &mut [u64], overhead: u64, words: usize) -> io::Result<()> {
    let x = Exchange::default();
    std::thread::scope(|scope| {
        let peer = std::thread::Builder::new()
            .name("futex-peer".into())
            .spawn_scoped(scope, || futex_peer(&x, words, true))
            .map_err(|e| io::Error::new(e.kind(), format!("spawning the peer thread: {e}")))?;
        let result = futex_parent(&x, words, true, samples, overhead);
        let peer_result = peer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the peer thread panicked")));
        result.and(peer_result)
    })
}

/// `futex-shm-Nw`: futex ping-pong with a forked process over a
/// `MAP_SHARED` page (shared futexes).
pub fn futex_shm(samples: &mut [u64], overhead: u64, words: usize) -> io::Result<()> {
    let page = SharedPage::new()?;
    let peer = sys::fork_peer("futex-shm", || futex_peer(&page, words, false))?;
    let result = futex_parent(&page, words, false, samples, overhead);
    result.and(peer.wait())
}

/// The peer side of a stream ping-pong: echo each `len`-byte message after
/// timestamping, until end of file.
fn stream_peer(x: &Exchange, rx: RawFd, tx: RawFd, len: usize) -> io::Result<()> {
    let mut buf = [0u8; 128];
    let buf = &mut buf[..len];
    while sys::read_exact(rx, buf)? {
        let t0 = now();
        x.t0.store(t0, Ordering::Relaxed);
        sys::write_all(tx, buf)?;
    }
    Ok(())
}

/// This process's side of a stream ping-pong.
fn stream_parent(
    x: &Exchange,
    tx: RawFd,
    rx: RawFd,
    len: usize,
    samples: &mut [u64],
    overhead: u64,
) -> io::Result<()> {
    let mut buf = [0x5au8; 128];
    let buf = &mut buf[..len];
    one_way(samples, overhead, || {
        sys::write_all(tx, buf)?;
        sys::read_message(rx, buf)?;
        let t1 = now();
        Ok((x.t0.load(Ordering::Relaxed), t1))
    })
}

/// The payload of a stream benchmark: 1 byte for 0 words (a pipe cannot
/// carry less), else 8 bytes per word.
pub fn stream_len(words: usize) -> usize {
    (words * 8).max(1)
}

/// `pipe-Nw`: ping-pong with a forked process through two pipes.
pub fn pipe(samples: &mut [u64], overhead: u64, words: usize) -> io::Result<()> {
    let len = stream_len(words);
    let page = SharedPage::new()?;
    let (ping_r, ping_w) = sys::pipe()?;
    let (pong_r, pong_w) = sys::pipe()?;
    let all = sys::raw_fds([&ping_r, &ping_w, &pong_r, &pong_w]);
    let (peer_rx, peer_tx) = (ping_r.as_raw_fd(), pong_w.as_raw_fd());
    let peer = sys::fork_peer("pipe", || {
        sys::close_except(&all, &[peer_rx, peer_tx]);
        stream_peer(&page, peer_rx, peer_tx, len)
    })?;
    drop((ping_r, pong_w));
    let result = stream_parent(
        &page,
        ping_w.as_raw_fd(),
        pong_r.as_raw_fd(),
        len,
        samples,
        overhead,
    );
    // End of file on the ping pipe ends the peer.
    drop(ping_w);
    result.and(peer.wait())
}

/// `unix-Nw`: ping-pong with a forked process over a unix stream socket
/// pair.
pub fn unix(samples: &mut [u64], overhead: u64, words: usize) -> io::Result<()> {
    let len = stream_len(words);
    let page = SharedPage::new()?;
    let (mine, theirs) = sys::socketpair()?;
    let all = sys::raw_fds([&mine, &theirs]);
    let peer_fd = theirs.as_raw_fd();
    let peer = sys::fork_peer("unix", || {
        sys::close_except(&all, &[peer_fd]);
        stream_peer(&page, peer_fd, peer_fd, len)
    })?;
    drop(theirs);
    let fd = mine.as_raw_fd();
    let result = stream_parent(&page, fd, fd, len, samples, overhead);
    drop(mine);
    result.and(peer.wait())
}

/// `unix-rpc-4w`: a local RPC, the counterpart of a Pecan session RPC: a
/// 4-word request to a forked process over a unix stream socket and its
/// 4-word answer, timed as a whole by the caller (a round trip, not
/// one-way: the timestamps are both this process's).
pub fn unix_rpc(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    let len = stream_len(4);
    let page = SharedPage::new()?;
    let (mine, theirs) = sys::socketpair()?;
    let all = sys::raw_fds([&mine, &theirs]);
    let peer_fd = theirs.as_raw_fd();
    let peer = sys::fork_peer("unix-rpc", || {
        sys::close_except(&all, &[peer_fd]);
        stream_peer(&page, peer_fd, peer_fd, len)
    })?;
    drop(theirs);
    let fd = mine.as_raw_fd();
    let mut buf = [0x5au8; 128];
    let buf = &mut buf[..len];
    let mut round_trip = || -> io::Result<u64> {
        let t0 = now();
        sys::write_all(fd, buf)?;
        sys::read_message(fd, buf)?;
        let t1 = now();
        Ok(t1.wrapping_sub(t0).saturating_sub(overhead))
    };
    let result = (|| {
        for _ in 0..bench::WARM_UP {
            round_trip()?;
        }
        for s in samples.iter_mut() {
            *s = round_trip()?;
        }
        Ok(())
    })();
    // End of file on the socket ends the peer.
    drop(mine);
    result.and(peer.wait())
}

/// The eventfd value that tells the peer to stop (a ping adds 1).
const EVENTFD_STOP: u64 = 2;

/// `eventfd`: the peer blocks in `read` on one eventfd; this process
/// signals it with `write`; the peer timestamps and signals back on a
/// second eventfd, on which this process blocks in `read`.
pub fn eventfd(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    let page = SharedPage::new()?;
    let ping = sys::eventfd()?;
    let pong = sys::eventfd()?;
    let (ping_fd, pong_fd) = (ping.as_raw_fd(), pong.as_raw_fd());
    let x: &Exchange = &page;
    let peer = sys::fork_peer("eventfd", || {
        let mut value = [0u8; 8];
        loop {
            sys::read_message(ping_fd, &mut value)?;
            if u64::from_ne_bytes(value) >= EVENTFD_STOP {
                return Ok(());
            }
            let t0 = now();
            x.t0.store(t0, Ordering::Relaxed);
            sys::write_all(pong_fd, &1u64.to_ne_bytes())?;
        }
    })?;
    let mut value = [0u8; 8];
    let result = one_way(samples, overhead, || {
        sys::write_all(ping_fd, &1u64.to_ne_bytes())?;
        sys::read_message(pong_fd, &mut value)?;
        let t1 = now();
        Ok((x.t0.load(Ordering::Relaxed), t1))
    });
    let stopped = sys::write_all(ping_fd, &EVENTFD_STOP.to_ne_bytes());
    result.and(stopped).and(peer.wait())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each benchmark really runs (on the host, a few samples) and gives
    /// plausible figures: a one-way hand-over takes some time.
    fn check(name: &str, run: impl FnOnce(&mut [u64]) -> io::Result<()>) {
        let mut samples = [0u64; 20];
        run(&mut samples).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(samples.iter().any(|&s| s > 0), "{name}: {samples:?}");
    }

    #[test]
    fn ping_pongs_run() {
        let _alone = crate::sys::fork_tests_alone();
        let o = bench::timestamp_overhead();
        check("futex-threads", |s| futex_threads(s, o, 16));
        check("futex-shm", |s| futex_shm(s, o, 4));
        check("pipe", |s| pipe(s, o, 0));
        check("pipe-16w", |s| pipe(s, o, 16));
        check("unix", |s| unix(s, o, 8));
        check("eventfd", |s| eventfd(s, o));
        check("unix-rpc", |s| unix_rpc(s, o));
    }

    #[test]
    fn payload_sizes() {
        assert_eq!(stream_len(0), 1);
        assert_eq!(stream_len(4), 32);
        assert_eq!(stream_len(16), 128);
    }
}
