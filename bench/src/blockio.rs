//! The block-throughput benchmarks both sides run (the storage issue's
//! measurement, from the system Pecan comes from): sequential reads and
//! writes with request sizes from 512 bytes to 1 MiB, each request waited
//! for before the next (as `dd` with `iflag=direct`/`oflag=direct`),
//! measured with the lab's I/O method ([`crate::soak`]).
//!
//! A run moves [`run_bytes`] bytes: 10 MiB, or 2048 requests where 10
//! MiB would take more (512 B and 1 KiB requests: 1 and 2 MiB) — the lab
//! paces its disks at 2000 requests per second of host time, so a 10 MiB
//! run of 512-byte requests would take 10 s; the figure is per KiB
//! either way.

/// Request sizes and the names' suffixes.
pub const SIZES: [(u32, &str); 7] = [
    (512, "512"),
    (1024, "1k"),
    (4096, "4k"),
    (16 * 1024, "16k"),
    (64 * 1024, "64k"),
    (256 * 1024, "256k"),
    (1024 * 1024, "1m"),
];

/// Recorded runs per benchmark (after one unrecorded).
pub const RUNS: usize = 5;

/// The most bytes a run moves.
pub const MAX_RUN_BYTES: u64 = 10 << 20;
/// The most requests a run makes.
pub const MAX_RUN_REQUESTS: u64 = 2048;

/// Bytes one run of requests of `size` bytes moves.
pub fn run_bytes(size: u32) -> u64 {
    MAX_RUN_BYTES.min(u64::from(size) * MAX_RUN_REQUESTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_whole_requests_and_bounded() {
        for (size, _) in SIZES {
            let b = run_bytes(size);
            assert_eq!(b % u64::from(size), 0);
            assert!(b <= MAX_RUN_BYTES && b / u64::from(size) <= MAX_RUN_REQUESTS);
        }
        assert_eq!(run_bytes(512), 1 << 20);
        assert_eq!(run_bytes(1 << 20), 10 << 20);
    }
}
