//! The soaker thread of the lab's I/O method ([`bench::soak`]) on Linux:
//! `SCHED_IDLE`, pinned to CPU 0 (the benchmark's CPU), running the shared
//! soaker loop from its start until it is dropped.

use std::io;
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;

use bench::soak::Soaker;

use crate::sys;

/// A soaker thread (see [`bench::soak`]): `SCHED_IDLE`, pinned to CPU 0,
/// counting in [`Soaker::run`] until dropped.
pub struct SoakerThread {
    soaker: Arc<Soaker>,
    thread: Option<JoinHandle<()>>,
}

impl SoakerThread {
    /// Starts the soaker and returns once it runs under `SCHED_IDLE`. The
    /// caller (under `SCHED_FIFO`, or any policy above `SCHED_IDLE`)
    /// keeps the CPU whenever it wants it.
    pub fn start() -> io::Result<Self> {
        let soaker = Arc::new(Soaker::new());
        // The new thread inherits the caller's policy: under SCHED_FIFO it
        // would wait behind the caller, which must therefore block (here)
        // until the soaker has lowered itself.
        let ready = Arc::new(Barrier::new(2));
        let (s, r) = (soaker.clone(), ready.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("soaker".into())
            .spawn(move || {
                let set = sys::pin_to_cpu0().and_then(|()| sys::idle_scheduling());
                let ok = set.is_ok();
                let _ = tx.send(set);
                r.wait();
                if ok {
                    s.run();
                }
            })?;
        ready.wait();
        let started = SoakerThread {
            soaker,
            thread: Some(thread),
        };
        match rx.recv() {
            Ok(Ok(())) => Ok(started),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other(
                "the soaker thread ended before it started",
            )),
        }
    }

    /// The soaker's iterations so far.
    pub fn count(&self) -> u64 {
        self.soaker.count()
    }
}

impl Drop for SoakerThread {
    fn drop(&mut self) {
        self.soaker.stop();
        if let Some(t) = self.thread.take() {
            // Blocking here lets the soaker run, see the flag and return.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The soaker counts while the caller sleeps and stops when dropped.
    #[test]
    fn soaker_thread_counts_idle_time() {
        let soaker = SoakerThread::start().unwrap();
        let c0 = soaker.count();
        // SCHED_IDLE on CPU 0 runs only when CPU 0 is otherwise idle (or
        // with CFS's smallest weight): on a host busy with other work that
        // can take a while, so the test waits for progress (30 s at most)
        // instead of expecting it within a fixed time.
        let counted = (0..3000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            soaker.count() > c0
        });
        assert!(counted, "the soaker never counted in 30 s");
        drop(soaker);
    }
}
