//! Benchmarks that stay in one thread: the null system call, the bogomips
//! loop and the memory kernels of [`bench::kernels`], timed with
//! [`bench::measure`].
//!
//! `memcpy-glibc` and `memset-glibc` run [`kernels::copy_runtime`] and
//! [`kernels::set_runtime`], whose `copy_from_slice`/`fill` compile to calls
//! of `memcpy`/`memset`; in this statically linked binary those are glibc's
//! (resolved through glibc's IFUNC for the CPU it runs on).

use std::hint::black_box;
use std::io;

use bench::kernels;

use crate::sys;

/// The region the memory benchmarks copy or fill.
pub const REGION: usize = 8 * 1024 * 1024;
/// Iterations of the bogomips loop per sample.
pub const BOGOMIPS_ITERATIONS: u64 = 1000;

/// `getppid`: the null system call, round trip.
pub fn getppid(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    bench::measure(samples, overhead, || {
        black_box(sys::getppid());
    });
    Ok(())
}

/// `bogomips`: ticks per [`BOGOMIPS_ITERATIONS`] iterations of the
/// register-decrement loop.
pub fn bogomips(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    bench::measure(samples, overhead, || kernels::bogomips(BOGOMIPS_ITERATIONS));
    Ok(())
}

/// Ticks per sample turned into bytes per tick for `bytes` per sample.
fn to_throughput(samples: &mut [u64], bytes: usize) {
    for s in samples.iter_mut() {
        *s = bench::throughput(bytes as u64, *s);
    }
}

/// Copies of [`REGION`] bytes with `copy`, in bytes per tick; checks
/// that the copy is right.
fn copies(samples: &mut [u64], overhead: u64, copy: fn(&mut [u8], &[u8])) -> io::Result<()> {
    let src: Vec<u8> = (0..REGION).map(|i| (i % 251) as u8).collect();
    let mut dst = vec![0u8; REGION];
    bench::measure(samples, overhead, || copy(&mut dst, &src));
    if dst != src {
        return Err(io::Error::other("the copy differs from its source"));
    }
    to_throughput(samples, REGION);
    Ok(())
}

/// `memcpy-glibc`: glibc's `memcpy` over [`REGION`] bytes.
pub fn memcpy_glibc(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    copies(samples, overhead, kernels::copy_runtime)
}

/// `memcpy-bytewise`: one byte at a time over [`REGION`] bytes.
pub fn memcpy_bytewise(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    copies(samples, overhead, kernels::copy_bytewise)
}

/// `memset-glibc`: glibc's `memset` over [`REGION`] bytes.
pub fn memset_glibc(samples: &mut [u64], overhead: u64) -> io::Result<()> {
    let mut dst = vec![0u8; REGION];
    let mut value = 0u8;
    bench::measure(samples, overhead, || {
        value = value.wrapping_add(1);
        kernels::set_runtime(&mut dst, value)
    });
    if dst.iter().any(|&b| b != value) {
        return Err(io::Error::other("memset left bytes of another value"));
    }
    to_throughput(samples, REGION);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_syscall_and_loop() {
        let o = bench::timestamp_overhead();
        let mut samples = [0u64; 10];
        getppid(&mut samples, o).unwrap();
        assert!(samples.iter().any(|&s| s > 0));
        bogomips(&mut samples, o).unwrap();
        assert!(samples.iter().any(|&s| s > 0));
    }

    #[test]
    fn memory_kernels_copy_and_fill() {
        let o = bench::timestamp_overhead();
        let mut samples = [0u64; 2];
        memcpy_glibc(&mut samples, o).unwrap();
        assert!(samples.iter().all(|&s| s > 0));
        memset_glibc(&mut samples, o).unwrap();
        assert!(samples.iter().all(|&s| s > 0));
    }

    #[test]
    fn to_bytes_per_tick() {
        let mut s = [4, 8];
        to_throughput(&mut s, 8);
        assert_eq!(s, [2000, 1000]);
    }
}
