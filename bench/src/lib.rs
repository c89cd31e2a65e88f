//! The benchmark lab's shared measuring logic — one source, two platforms.
//!
//! The Pecan benchmark component (`components/bench/bench`) and the Linux
//! benchmark binary (`bench-linux`) both use this crate for everything but
//! the operation under test: the timestamp, the measuring loop (warm-up,
//! the timing stub's own cost measured and subtracted, samples), the
//! statistics, the CPU and memory kernels (a register-increment loop,
//! memcpy/memset variants), the I/O method (a soaker that makes idle time
//! visible, CPU cost per KiB, paired wall-clock ratios: [`soak`]) and the
//! report format. Each platform supplies
//! only a thin layer: how to make a null system call, how to send a message
//! to another thread, and so on.
//!
//! # Method (like sel4bench)
//!
//! - A *round-trip* or *local* operation is timed by the thread that does
//!   it: `t0 = now(); op(); t1 = now(); sample = t1 - t0 - overhead`.
//! - A *one-way* operation is timed across threads: the sender takes `t0`
//!   right before the system call and passes it along; the receiver takes
//!   `t1` right after its own system call returns; `sample = t1 - t0 -
//!   overhead`. Reports say `one-way` in their `what`.
//! - `overhead` is the minimum of [`OVERHEAD_SAMPLES`] back-to-back
//!   timestamp pairs ([`timestamp_overhead`]).
//! - Every benchmark first runs [`WARM_UP`] unrecorded iterations.
//! - Min, median and max are reported, with every sample.
//!
//! Under QEMU TCG with `-icount shift=0,align=off` the time-stamp counter
//! counts executed instructions, so a *tick* is one instruction and the
//! figures are deterministic path lengths; memory benchmarks report bytes
//! per tick. With hardware virtualization the same code reports TSC cycles;
//! the report's `clock` field says which, and the two are never mixed.
//!
//! # Report format
//!
//! One line per benchmark, `BENCH ` followed by a JSON object (written by
//! hand: no allocation, no serde in `no_std`):
//!
//! ```text
//! BENCH {"name":"null-syscall","what":"...","unit":"ticks","min":47,"median":47,"max":60,"samples":[47,47,...]}
//! ```
//!
//! `unit` is `"ticks"` (per operation) or `"bytes/tick"` (throughput, with
//! `min`/`median`/`max` scaled by [`THROUGHPUT_SCALE`] as integers: the
//! value 1234 means 1.234 bytes per tick) or `"ticks/KiB"` (an I/O
//! benchmark's CPU cost, scaled by [`soak::COST_SCALE`]: busy ticks per KiB
//! moved, one sample per run; its line adds an `"io"` object with each
//! run's elapsed ticks and soaker iterations, [`report_io`] and [`soak`]).
//! The HTTP benchmarks' figures, `"requests/s"` of the host's clock, are
//! no guest's lines: the host measures them ([`httpload`]).
//! `cargo xtask bench` parses these lines; anything else on the console is
//! ignored.
#![no_std]

use core::fmt::{self, Write};

pub mod blockio;
pub mod catalog;
pub mod httpload;
pub mod kernels;
pub mod netio;
pub mod soak;

/// Unrecorded iterations before measuring.
pub const WARM_UP: usize = 100;
/// Samples per benchmark, unless a benchmark says otherwise.
pub const SAMPLES: usize = 1000;
/// Timestamp pairs measured for the overhead.
pub const OVERHEAD_SAMPLES: usize = 1000;
/// Throughput figures are integers: value / THROUGHPUT_SCALE bytes per tick.
pub const THROUGHPUT_SCALE: u64 = 1000;

/// Reads the time-stamp counter (instructions under QEMU icount).
#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: `rdtsc` only reads the time-stamp counter; user mode may use
    // it on both platforms (CR4.TSD clear).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The cost of the timing stub: the minimum over back-to-back timestamps.
pub fn timestamp_overhead() -> u64 {
    let mut best = u64::MAX;
    for _ in 0..OVERHEAD_SAMPLES {
        let t0 = now();
        let t1 = now();
        best = best.min(t1.wrapping_sub(t0));
    }
    best
}

/// Fills `samples` with measurements of `op`, each taken as
/// `now(); op(); now()` minus `overhead`, after [`WARM_UP`] unrecorded runs.
pub fn measure(samples: &mut [u64], overhead: u64, mut op: impl FnMut()) {
    for _ in 0..WARM_UP {
        op();
    }
    for s in samples.iter_mut() {
        let t0 = now();
        op();
        let t1 = now();
        *s = t1.wrapping_sub(t0).saturating_sub(overhead);
    }
}

/// Min, median and max of a set of samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    pub min: u64,
    pub median: u64,
    pub max: u64,
}

/// Statistics of `samples` (sorted in place: the caller keeps its own copy
/// if it needs the original order). All zero for no samples.
pub fn stats(samples: &mut [u64]) -> Stats {
    if samples.is_empty() {
        return Stats {
            min: 0,
            median: 0,
            max: 0,
        };
    }
    samples.sort_unstable();
    Stats {
        min: samples[0],
        median: samples[samples.len() / 2],
        max: samples[samples.len() - 1],
    }
}

/// What a figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Ticks per operation (lower is better).
    Ticks,
    /// Bytes per tick × [`THROUGHPUT_SCALE`] (higher is better).
    BytesPerTick,
    /// Busy ticks per KiB moved × [`soak::COST_SCALE`] (an I/O benchmark's
    /// CPU cost, lower is better; [`soak`]).
    TicksPerKib,
    /// Requests per second of the host's clock (higher is better): an HTTP
    /// benchmark measured by the host ([`httpload`]), never under icount.
    RequestsPerSecond,
}

impl Unit {
    pub const fn as_str(self) -> &'static str {
        match self {
            Unit::Ticks => "ticks",
            Unit::BytesPerTick => "bytes/tick",
            Unit::TicksPerKib => "ticks/KiB",
            Unit::RequestsPerSecond => "requests/s",
        }
    }
}

/// Throughput sample: `bytes` moved in `ticks`, scaled.
pub fn throughput(bytes: u64, ticks: u64) -> u64 {
    let scaled = u128::from(bytes) * u128::from(THROUGHPUT_SCALE) / u128::from(ticks.max(1));
    scaled.min(u128::from(u64::MAX)) as u64
}

/// Writes one report line (see the module doc). `samples` are reported in
/// the order given; the statistics are computed on a sorted copy made in
/// `scratch` (at least as long as `samples`).
pub fn report(
    out: &mut impl Write,
    name: &str,
    what: &str,
    unit: Unit,
    samples: &[u64],
    scratch: &mut [u64],
) -> fmt::Result {
    report_fields(out, name, what, unit, samples, scratch)?;
    out.write_str("}\n")
}

/// What an I/O benchmark measured in each of its runs, besides its CPU
/// cost ([`soak`]): the bytes each run moved and, per run, the elapsed
/// ticks and the soaker's iterations.
#[derive(Clone, Copy, Debug)]
pub struct IoRuns<'a> {
    pub bytes: u64,
    pub elapsed: &'a [u64],
    pub soaked: &'a [u64],
}

/// Writes an I/O benchmark's report line: [`report`]'s fields (the
/// samples are the runs' CPU costs, [`Unit::TicksPerKib`]) and
/// `"io":{"bytes":B,"ticks_per_iteration":T,"elapsed":[...],"soaked":[...]}`,
/// from which throughput (bytes per elapsed tick) follows.
pub fn report_io(
    out: &mut impl Write,
    name: &str,
    what: &str,
    costs: &[u64],
    io: IoRuns<'_>,
    scratch: &mut [u64],
) -> fmt::Result {
    report_fields(out, name, what, Unit::TicksPerKib, costs, scratch)?;
    write!(
        out,
        ",\"io\":{{\"bytes\":{},\"ticks_per_iteration\":{},\"elapsed\":",
        io.bytes,
        soak::TICKS_PER_ITERATION
    )?;
    json_list(out, io.elapsed)?;
    out.write_str(",\"soaked\":")?;
    json_list(out, io.soaked)?;
    out.write_str("}}\n")
}

/// A JSON list of integers.
fn json_list(out: &mut impl Write, values: &[u64]) -> fmt::Result {
    out.write_char('[')?;
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.write_char(',')?;
        }
        write!(out, "{v}")?;
    }
    out.write_char(']')
}

/// The fields of a report line, from `BENCH {` to the samples' `]`.
fn report_fields(
    out: &mut impl Write,
    name: &str,
    what: &str,
    unit: Unit,
    samples: &[u64],
    scratch: &mut [u64],
) -> fmt::Result {
    let n = samples.len().min(scratch.len());
    scratch[..n].copy_from_slice(&samples[..n]);
    let st = stats(&mut scratch[..n]);
    out.write_str("BENCH {\"name\":")?;
    json_string(out, name)?;
    out.write_str(",\"what\":")?;
    json_string(out, what)?;
    write!(
        out,
        ",\"unit\":\"{}\",\"min\":{},\"median\":{},\"max\":{},\"samples\":",
        unit.as_str(),
        st.min,
        st.median,
        st.max
    )?;
    json_list(out, &samples[..n])
}

/// A JSON string literal (quotes, backslashes and control characters
/// escaped).
fn json_string(out: &mut impl Write, s: &str) -> fmt::Result {
    out.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => out.write_str("\\\"")?,
            '\\' => out.write_str("\\\\")?,
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32)?,
            c => out.write_char(c)?,
        }
    }
    out.write_char('"')
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::String;

    #[test]
    fn stats_of_samples() {
        let mut s = [5, 1, 9, 3, 7];
        assert_eq!(
            stats(&mut s),
            Stats {
                min: 1,
                median: 5,
                max: 9
            }
        );
        assert_eq!(
            stats(&mut []),
            Stats {
                min: 0,
                median: 0,
                max: 0
            }
        );
    }

    #[test]
    fn report_line_is_json_after_the_prefix() {
        let mut out = String::new();
        let mut scratch = [0; 3];
        report(
            &mut out,
            "ipc \"x\"",
            "one-way\n",
            Unit::Ticks,
            &[3, 1, 2],
            &mut scratch,
        )
        .unwrap();
        assert_eq!(
            out,
            "BENCH {\"name\":\"ipc \\\"x\\\"\",\"what\":\"one-way\\u000a\",\"unit\":\"ticks\",\"min\":1,\"median\":2,\"max\":3,\"samples\":[3,1,2]}\n"
        );
    }

    #[test]
    fn io_report_line_carries_the_runs() {
        let mut out = String::new();
        let mut scratch = [0; 2];
        report_io(
            &mut out,
            "blk",
            "w",
            &[7, 5],
            IoRuns {
                bytes: 1024,
                elapsed: &[100, 90],
                soaked: &[10, 0],
            },
            &mut scratch,
        )
        .unwrap();
        assert_eq!(
            out,
            "BENCH {\"name\":\"blk\",\"what\":\"w\",\"unit\":\"ticks/KiB\",\"min\":5,\"median\":7,\"max\":7,\"samples\":[7,5],\"io\":{\"bytes\":1024,\"ticks_per_iteration\":3,\"elapsed\":[100,90],\"soaked\":[10,0]}}\n"
        );
    }

    #[test]
    fn throughput_is_scaled_and_safe() {
        assert_eq!(throughput(8, 2), 4000);
        assert_eq!(throughput(1, 0), 1000);
        assert_eq!(throughput(u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn measure_subtracts_overhead() {
        let mut samples = [0u64; 10];
        measure(&mut samples, u64::MAX, || {});
        assert!(samples.iter().all(|&s| s == 0));
    }
}
