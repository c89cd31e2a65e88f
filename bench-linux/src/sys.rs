//! The Linux system calls the benchmarks use, as small safe functions.
//!
//! The operations under test (`getppid`, `read`, `write`, `futex`) go
//! through `libc::syscall` with the raw system call number: one `syscall`
//! instruction behind a few register moves, with none of the extra work of
//! glibc's wrappers (cancellation points, errno juggling). Setting up —
//! pipes, sockets, `fork`, `mmap` — uses the ordinary libc functions; it is
//! never timed.
//!
//! Errors are `io::Error`s that name the call that failed. Code that runs in
//! a forked peer process uses only these functions (system calls, no
//! locks), so it is safe after `fork` even when the parent has other
//! threads, as it has under `cargo test`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A raw system call's result: `-1` means failure with `errno` set.
fn check(ret: libc::c_long, what: &str) -> io::Result<libc::c_long> {
    if ret == -1 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(ret)
    }
}

/// The null system call: `getppid`.
#[inline]
pub fn getppid() -> libc::c_long {
    // SAFETY: getppid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_getppid) }
}

/// One `read` system call; `Ok(0)` is end of file.
#[inline]
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most buf.len() bytes into buf, which we
    // borrow mutably for the call.
    let n = unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) };
    check(n, "read").map(|n| n as usize)
}

/// One `write` system call; returns how many bytes were taken.
#[inline]
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the kernel reads at most buf.len() bytes from buf.
    let n = unsafe { libc::syscall(libc::SYS_write, fd, buf.as_ptr(), buf.len()) };
    check(n, "write").map(|n| n as usize)
}

/// Reads exactly `buf.len()` bytes. `Ok(false)`: end of file before the
/// first byte (the peer is done); end of file in the middle is an error.
#[inline]
pub fn read_exact(fd: RawFd, buf: &mut [u8]) -> io::Result<bool> {
    let mut done = 0;
    while done < buf.len() {
        match read(fd, &mut buf[done..]) {
            Ok(0) if done == 0 => return Ok(false),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read: end of file in the middle of a message",
                ))
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Reads exactly `buf.len()` bytes; end of file is an error (the peer quit).
#[inline]
pub fn read_message(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    if read_exact(fd, buf)? {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "read: the peer closed its end",
        ))
    }
}

/// Writes all of `buf`.
#[inline]
pub fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match write(fd, buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One `futex` system call on `word` (no timeout, no second word).
/// `private`: the word is not shared with another process
/// (`FUTEX_PRIVATE_FLAG`: the kernel skips the shared-mapping look-up).
#[inline]
fn futex(word: &AtomicU32, op: libc::c_int, private: bool, value: u32) -> libc::c_long {
    let op = if private {
        op | libc::FUTEX_PRIVATE_FLAG
    } else {
        op
    };
    // SAFETY: the address is a live, aligned u32 we borrow for the call; no
    // timeout (null) and the unused arguments are null/0.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            value,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    }
}

/// Sleeps in the kernel while `word` holds `expected` (returns at once if
/// it does not).
#[inline]
pub fn futex_wait(word: &AtomicU32, expected: u32, private: bool) -> io::Result<()> {
    match check(
        futex(word, libc::FUTEX_WAIT, private, expected),
        "futex wait",
    ) {
        Ok(_) => Ok(()),
        // The word changed before we slept, or a signal: the caller re-checks.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Wakes one waiter on `word`.
#[inline]
pub fn futex_wake(word: &AtomicU32, private: bool) -> io::Result<()> {
    check(futex(word, libc::FUTEX_WAKE, private, 1), "futex wake").map(|_| ())
}

/// A futex value that tells the peer to stop (sequence numbers start at 1
/// and never reach it).
pub const STOP: u32 = u32::MAX;

/// Blocks until `word` holds `want` or [`STOP`]; returns the value seen.
#[inline]
pub fn futex_wait_for(word: &AtomicU32, want: u32, private: bool) -> io::Result<u32> {
    loop {
        let v = word.load(Ordering::Acquire);
        if v == want || v == STOP {
            return Ok(v);
        }
        futex_wait(word, v, private)?;
    }
}

/// Two connected file descriptors: `(read end, write end)` of a pipe, or
/// the two ends of a socket pair.
pub type FdPair = (OwnedFd, OwnedFd);

/// Takes ownership of two descriptors the kernel just returned.
fn owned_pair(fds: [libc::c_int; 2]) -> FdPair {
    // SAFETY: the kernel just returned these descriptors to us and nobody
    // else owns them.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// A pipe: `(read end, write end)`.
pub fn pipe() -> io::Result<FdPair> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    check(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }.into(),
        "pipe2",
    )?;
    Ok(owned_pair(fds))
}

/// A connected pair of unix stream sockets.
pub fn socketpair() -> io::Result<FdPair> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the array.
    check(
        unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        }
        .into(),
        "socketpair",
    )?;
    Ok(owned_pair(fds))
}

/// An eventfd (counter 0, blocking reads).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes plain values and returns a new descriptor.
    let fd = check(
        unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) }.into(),
        "eventfd",
    )?;
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Closes every descriptor in `fds` except those in `keep` (used by a
/// forked peer to drop the parent's other pipe ends, so that end of file
/// propagates).
pub fn close_except(fds: &[RawFd], keep: &[RawFd]) {
    for &fd in fds {
        if !keep.contains(&fd) {
            // SAFETY: closing a descriptor this process has; the OwnedFd
            // copies in this forked process are never dropped (it leaves
            // with _exit).
            unsafe { libc::close(fd) };
        }
    }
}

/// Pins the calling thread (and so every thread and process it creates
/// later) to CPU 0.
pub fn pin_to_cpu0() -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU 0 is within the set's bounds.
    unsafe { libc::CPU_SET(0, &mut set) };
    // SAFETY: the set is a valid cpu_set_t of the size given.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    check(r.into(), "sched_setaffinity(CPU 0)").map(|_| ())
}

/// Puts the calling thread (and so every thread and process it creates
/// later) under `SCHED_FIFO` at priority 1; see the crate doc for why.
/// Needs root (or `CAP_SYS_NICE`).
pub fn fifo_scheduling() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: param is a valid sched_param for the call.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    check(r.into(), "sched_setscheduler(SCHED_FIFO, 1)").map(|_| ())
}

/// Puts the calling thread under `SCHED_IDLE`: it runs only when no other
/// thread of its CPU wants to (the soaker of the I/O method).
pub fn idle_scheduling() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: param is a valid sched_param for the call.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    check(r.into(), "sched_setscheduler(SCHED_IDLE)").map(|_| ())
}

/// A fresh anonymous read-write mapping of `len` bytes, `MAP_PRIVATE` or
/// `MAP_SHARED` (`sharing`): page-aligned and zero-filled.
fn anonymous_mapping(len: usize, sharing: libc::c_int) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh anonymous mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            sharing | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("mmap {len} bytes: {e}")));
    }
    NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
}

/// A private anonymous mapping: page-aligned memory (for `O_DIRECT`).
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    /// Where `bytes` starts within the mapping.
    offset: usize,
    /// How many bytes `bytes` covers.
    used: usize,
}

/// The size of an x86-64 huge page.
pub const HUGE_PAGE: usize = 2 << 20;

impl Mapping {
    /// `len` bytes (at most [`HUGE_PAGE`]) at the start of a 2 MiB-aligned
    /// region the kernel is asked to back with a transparent huge page
    /// (`MADV_HUGEPAGE`), touched once: physically contiguous memory when
    /// the kernel grants it (the cloud kernel's THP mode is `always`), as
    /// a device's DMA buffer is on Pecan. Without it a buffer's pages lie
    /// wherever the page allocator finds them, and how many segments a
    /// 64 KiB transfer has — so its cost — depends on what ran before
    /// (measured: 453 busy ticks per KiB for the same reads run alone, 375
    /// after memset-glibc, 325 into a huge page either way). The Linux
    /// guest's `/init` turns huge pages on for `madvise`d regions only
    /// (the cloud kernel boots with them off), so nothing else changes.
    pub fn huge(len: usize) -> io::Result<Self> {
        if len > HUGE_PAGE {
            return Err(io::Error::other(format!(
                "a huge-page buffer holds at most {HUGE_PAGE} bytes, not {len}"
            )));
        }
        let mut m = Mapping::new(2 * HUGE_PAGE)?;
        let base = m.ptr.as_ptr() as usize;
        m.offset = base.next_multiple_of(HUGE_PAGE) - base;
        m.used = len;
        // SAFETY: the range is inside our mapping (offset < HUGE_PAGE and
        // the mapping is two huge pages long); madvise only sets a hint.
        let r = unsafe {
            libc::madvise(
                m.ptr.as_ptr().add(m.offset).cast(),
                HUGE_PAGE,
                libc::MADV_HUGEPAGE,
            )
        };
        check(r.into(), "madvise(MADV_HUGEPAGE)")?;
        m.bytes().fill(0);
        Ok(m)
    }

    pub fn new(len: usize) -> io::Result<Self> {
        let ptr = anonymous_mapping(len, libc::MAP_PRIVATE)?;
        Ok(Mapping {
            ptr,
            len,
            offset: 0,
            used: len,
        })
    }

    /// The mapping's bytes (for [`Mapping::huge`], the buffer asked for).
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: offset + used <= len: the range lies in the mapping,
        // which is readable and writable and alive while self is, and the
        // mutable borrow of self makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(self.offset), self.used) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own the mapping and nothing borrows it any more.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Whether the pages of `buf` are physically consecutive, from
/// `/proc/self/pagemap`; `None` when the kernel hides frame numbers (not
/// root) or a page is not present.
pub fn physically_contiguous(buf: &[u8]) -> io::Result<Option<bool>> {
    use std::io::{Read, Seek, SeekFrom};
    const PAGE: u64 = 4096;
    const PFN_MASK: u64 = (1 << 55) - 1;
    const PRESENT: u64 = 1 << 63;
    let mut pagemap = std::fs::File::open("/proc/self/pagemap")?;
    let start = buf.as_ptr() as u64 / PAGE;
    let end = (buf.as_ptr() as u64 + buf.len() as u64).div_ceil(PAGE);
    let mut previous: Option<u64> = None;
    for page in start..end {
        pagemap.seek(SeekFrom::Start(page * 8))?;
        let mut entry = [0u8; 8];
        pagemap.read_exact(&mut entry)?;
        let entry = u64::from_le_bytes(entry);
        let pfn = entry & PFN_MASK;
        if entry & PRESENT == 0 || pfn == 0 {
            return Ok(None);
        }
        if previous.is_some_and(|p| p + 1 != pfn) {
            return Ok(Some(false));
        }
        previous = Some(pfn);
    }
    Ok(Some(true))
}

/// Waits until everything written to standard output has left (for a
/// terminal such as the serial console: until the UART sent it), so that
/// the console's interrupts do not land in the next benchmark. Not a
/// terminal: nothing to wait for.
pub fn drain_stdout() {
    // SAFETY: tcdrain only waits on descriptor 1; failure (not a tty) is
    // harmless.
    unsafe { libc::tcdrain(1) };
}

/// Words shared by the two sides of a ping-pong: futex words, the sender's
/// timestamp, and a payload area. Lives in a [`SharedPage`] between
/// processes, or on the stack between threads.
#[derive(Default)]
#[repr(C)]
pub struct Exchange {
    /// Parent → peer: the sequence number of the latest ping, or [`STOP`].
    pub ping: AtomicU32,
    /// Peer → parent: the sequence number of the latest pong.
    pub pong: AtomicU32,
    /// The sender's timestamp, taken right before its system call.
    pub t0: AtomicU64,
    /// Payload words (at most 16).
    pub words: [AtomicU64; 16],
}

/// An [`Exchange`] in an anonymous shared mapping: `fork` leaves parent and
/// child looking at the same memory.
pub struct SharedPage {
    ptr: NonNull<Exchange>,
}

impl SharedPage {
    pub fn new() -> io::Result<Self> {
        let len = std::mem::size_of::<Exchange>();
        // mmap returns page-aligned, zero-filled memory: an Exchange of
        // atomics that are all zero.
        let ptr = anonymous_mapping(len, libc::MAP_SHARED)?.cast::<Exchange>();
        Ok(SharedPage { ptr })
    }
}

impl std::ops::Deref for SharedPage {
    type Target = Exchange;
    fn deref(&self) -> &Exchange {
        // SAFETY: the mapping is live until drop, page-aligned, and zeroed
        // memory is a valid Exchange (atomics); shared access goes through
        // atomics only.
        unsafe { self.ptr.as_ref() }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in new(); no reference outlives
        // self.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), std::mem::size_of::<Exchange>()) };
    }
}

/// A forked peer process. Dropping it without [`Peer::wait`] kills it.
pub struct Peer {
    pid: libc::pid_t,
    reaped: bool,
}

/// Held by every unit test that forks peers. The test harness runs tests
/// on several threads of one process, and a child forked by one test
/// inherits the pipes and sockets another test has open at that moment:
/// it would keep their write ends open, so the end of file a ring's peers
/// wait for would never come (a hang seen under load). The benchmark
/// binary itself runs one benchmark at a time.
#[cfg(test)]
pub static FORK_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`FORK_TESTS`] (a test that panicked while holding it does not
/// stop the others).
#[cfg(test)]
pub fn fork_tests_alone() -> std::sync::MutexGuard<'static, ()> {
    FORK_TESTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Forks a peer process that runs `body` and exits: status 0 when `body`
/// returns `Ok`, else 1 after printing the error to standard error. The
/// peer is killed if this process dies first.
pub fn fork_peer(what: &str, body: impl FnOnce() -> io::Result<()>) -> io::Result<Peer> {
    // SAFETY: the child runs only `body` (system calls on memory it
    // inherited) and leaves with _exit, never returning into the caller.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => check(-1, "fork").map(|_| unreachable!()),
        0 => {
            // SAFETY: prctl with plain values.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            let status = match body() {
                Ok(()) => 0,
                Err(e) => {
                    let msg = format!("bench-linux: {what}: peer process: {e}\n");
                    let _ = write_all(2, msg.as_bytes());
                    1
                }
            };
            // SAFETY: leaving the child without running the parent's
            // destructors or flushing its buffers a second time.
            unsafe { libc::_exit(status) }
        }
        pid => Ok(Peer { pid, reaped: false }),
    }
}

impl Peer {
    /// Waits for the peer to exit; an exit status other than 0 is an error.
    pub fn wait(mut self) -> io::Result<()> {
        let status = self.reap()?;
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Ok(())
        } else if libc::WIFEXITED(status) {
            Err(io::Error::other(format!(
                "the peer process exited with status {}",
                libc::WEXITSTATUS(status)
            )))
        } else {
            Err(io::Error::other(format!(
                "the peer process ended by signal {}",
                libc::WTERMSIG(status)
            )))
        }
    }

    fn reap(&mut self) -> io::Result<libc::c_int> {
        let mut status = 0;
        loop {
            // SAFETY: waiting for our own child; status is a valid int.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            match check(r.into(), "waitpid") {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.reaped = true;
        Ok(status)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: signalling our own, not yet reaped child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = self.reap();
        }
    }
}

/// The raw descriptor numbers of some owned descriptors.
pub fn raw_fds<'a>(fds: impl IntoIterator<Item = &'a OwnedFd>) -> Vec<RawFd> {
    fds.into_iter().map(AsRawFd::as_raw_fd).collect()
}
