//! `fork` and `fork-exec`: process creation, like LMBench's `lat_proc
//! fork` and `lat_proc exec`.
//!
//! A sample is one round trip timed by this process with
//! [`bench::measure`]: `fork`, the child's exit, and this process's
//! `waitpid` returning. In `fork` the child calls `_exit(0)` at once; in
//! `fork-exec` it `execv`s this very binary (a static executable: no
//! dynamic linker) with the argument [`EXIT_ARG`], on which `main` returns
//! before doing anything else — so the figure includes Rust's and glibc's
//! start-up of a static binary, as `lat_proc exec`'s includes its hello
//! program's. The child inherits `SCHED_FIFO` and CPU 0: it runs once the
//! parent blocks in `waitpid`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;

/// The argument on which `bench-linux` exits at once (the exec target of
/// `fork-exec`).
pub const EXIT_ARG: &str = "--exit";
/// Samples of both benchmarks: a fork costs some 10^5 instructions, so
/// fewer samples than the usual thousand.
pub const SAMPLES: usize = 200;

/// Forks a child that runs `child` and waits for it; an exit status other
/// than 0 is an error. `child` must end the process (`_exit`, `execv`);
/// should it return, the child leaves with status 126.
fn fork_and_wait(child: impl Fn()) -> io::Result<()> {
    // SAFETY: the child runs only `child`, which calls async-signal-safe
    // functions (execv, _exit) and never returns into the caller.
    let pid = unsafe { libc::fork() };
    if pid == -1 {
        return Err(io::Error::other(format!(
            "fork: {}",
            io::Error::last_os_error()
        )));
    }
    if pid == 0 {
        child();
        // SAFETY: leaving the child without returning into the caller.
        unsafe { libc::_exit(126) }
    }
    let mut status = 0;
    // SAFETY: status is a valid int for waitpid to write.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    if r != pid {
        return Err(io::Error::other(format!(
            "waitpid: {}",
            io::Error::last_os_error()
        )));
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "the child ended with wait status {status:#x}"
        )))
    }
}

/// Runs `round` in [`bench::measure`], keeping the first failure.
fn measure(
    samples: &mut [u64],
    overhead: u64,
    round: impl Fn() -> io::Result<()>,
) -> io::Result<()> {
    let mut failure = None;
    bench::measure(samples, overhead, || {
        if failure.is_none() {
            failure = round().err();
        }
    });
    failure.map_or(Ok(()), Err)
}

/// `fork`: fork, `_exit(0)` in the child, `waitpid`.
pub fn fork(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    measure(samples, overhead, || {
        fork_and_wait(|| {
            // SAFETY: leaving the child at once, without the parent's
            // destructors or buffered output.
            unsafe { libc::_exit(0) }
        })
    })
}

/// `fork-exec`: fork, `execv` of this binary with [`EXIT_ARG`] in the
/// child, `waitpid`.
pub fn fork_exec(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    let exe = std::env::current_exe()?;
    let path = CString::new(exe.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("the executable's path has a NUL byte"))?;
    let arg = CString::new(EXIT_ARG).expect("no NUL");
    let argv = [path.as_ptr(), arg.as_ptr(), std::ptr::null()];
    measure(samples, overhead, || {
        fork_and_wait(|| {
            // SAFETY: path and argv are NUL-terminated strings and a
            // null-terminated array that live until execv replaces the
            // process image (or fails).
            unsafe { libc::execv(path.as_ptr(), argv.as_ptr()) };
            // SAFETY: exec failed: leave the child at once.
            unsafe { libc::_exit(127) }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_runs() {
        let _alone = crate::sys::fork_tests_alone();
        let o = bench::timestamp_overhead();
        let mut samples = [0u64; 5];
        fork(&mut samples, o).unwrap();
        assert!(samples.iter().all(|&s| s > 0), "{samples:?}");
    }
}
