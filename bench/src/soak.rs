//! The lab's I/O benchmark method: a soaker makes idle time visible, so a
//! device benchmark can say how much CPU it cost, and interleaved
//! wall-clock pairs say how fast it went. One source for Pecan and Linux.
//!
//! # Protocol
//!
//! 1. **Soaker.** Before an I/O benchmark the platform starts one soaker
//!    thread at the lowest priority on the benchmark's CPU (Linux:
//!    `SCHED_IDLE`, pinned; Pecan: priority 0 on the CPU the scenario
//!    gives the driver's client). It runs [`Soaker::run`], a loop of
//!    exactly [`TICKS_PER_ITERATION`] instructions that adds one to a
//!    counter per turn:
//!
//!    ```text
//!    2:  add qword ptr [count], 1
//!        cmp byte ptr [stop], 0
//!        je  2b
//!    ```
//!
//!    It runs only when nothing else on that CPU wants to: exactly the
//!    time the CPU would otherwise have halted.
//! 2. **Measure.** The benchmark thread (higher priority) takes `t0 =`
//!    [`now`](crate::now) and `c0 =` [`Soaker::count`], moves its bytes
//!    (blocking while the device works: the soaker runs), takes `t1` and
//!    `c1`. `elapsed = t1 - t0`, `soaked = (c1 - c0) ×`
//!    [`TICKS_PER_ITERATION`].
//! 3. **Busy** = `elapsed - soaked` ([`busy`]): every tick the CPU spent on
//!    anything but the soaker — the benchmark thread, the kernel (system
//!    calls, the scheduler, the block layer), the driver (on Pecan a
//!    component of its own), interrupt entry and handling, and timer
//!    ticks that fall in the window. It saturates at 0.
//! 4. **CPU cost** = busy ticks per KiB moved ([`cpu_cost`]), lower is
//!    better: the figure an I/O goal binds under icount.
//! 5. **Runs.** A benchmark repeats the transfer ([`MIN_RUNS`] or more
//!    passes after an unrecorded one) and reports the median with min,
//!    max and the spread ([`RunStats`]).
//! 6. **Stop.** The platform sets the stop flag ([`Soaker::stop`]) and
//!    waits for the soaker to leave its loop.
//!
//! The lab paces the device in these runs (see "Pacing") and measures
//! throughput separately, without icount (see "Wall-clock throughput").
//!
//! # Why a soaker
//!
//! The lab runs under `-icount shift=0,align=off,sleep=off`: the TSC
//! counts executed instructions, and when the guest halts (nothing to run
//! while the device works) virtual time *jumps* to the next timer deadline
//! instead of following the host. A halted wait therefore costs a
//! meaningless number of ticks — from zero (the completion arrived before
//! the jump) to a whole timer period. With the soaker the guest never
//! halts: idle becomes instructions the soaker counts, and elapsed minus
//! soaked is the work. (On hardware or under KVM the soaker is the classic
//! idle-loop CPU meter: the same arithmetic with real cycles.)
//!
//! # Tolerance
//!
//! Device completions come from QEMU's host threads (the block layer's
//! thread pool, the network backend), so *when* a completion lands in the
//! instruction stream depends on the host, and busy ticks vary a little
//! from run to run (a completion that lands mid-system-call is handled on
//! a different path than one that lands in the soaker). The figure is the
//! median of at least [`MIN_RUNS`] runs with its spread
//! (`(max - min) / median`); [`TOLERANCE_PERCENT`] is the spread the lab
//! accepts, and two medians closer than that are equal for the lab's
//! purposes. The counter read itself is exact to within one iteration: a
//! soaker preempted inside its loop has done up to two of the three
//! instructions of a turn it has not counted yet (at most 2 ticks per
//! preemption, counted as busy).
//!
//! # Pacing
//!
//! Host timing does more than add noise: it picks the guest's path. When
//! QEMU's host thread completes a request before the emulated CPU has
//! gone to sleep waiting for it, the guest skips the switch to the soaker
//! and back, and may take cheaper completion paths still. Measured on
//! Linux (`blk-read-64k-linux`, unpaced): runs at 319, 398 and 452 busy
//! ticks per KiB, and mixtures of them, depending on the host's load —
//! medians of boots from 319 to 452. On hardware a disk takes tens of
//! microseconds and the submission path one or two, so the reader always
//! sleeps. The lab therefore paces its disks in CPU-cost runs (QEMU's
//! `throttling.iops-total`, 2000 requests per second of host time: xtask's
//! `devices::Attached::pace_disks`), which puts every request on that
//! path; it never paces wall-clock runs.
//!
//! The guest's memory state picks the path too: how many physical
//! segments a transfer has depends on where the buffer's pages lie, so the
//! same reads into an ordinary buffer cost 453 busy ticks per KiB run
//! alone and 375 after a benchmark that freed 8 MiB. A benchmark therefore
//! transfers into physically contiguous memory, as a driver's DMA buffer
//! is on Pecan (Linux: a transparent huge page, checked in
//! `/proc/self/pagemap`). Paced and contiguous, 5 boots of 8 runs gave
//! medians of 324.2–325.3 busy ticks per KiB (0.3 % apart) with a spread
//! within a boot of 0.1–0.3 %; the tolerance is [`TOLERANCE_PERCENT`] =
//! 3 %, and no claim is made on a difference smaller than that.
//!
//! # Wall-clock throughput
//!
//! Icount time is not wall time: how fast the bytes went is measured
//! without icount, where the TSC is the host's. Pecan and Linux boot
//! alternately in pairs — at least [`MIN_RUNS`] pairs, so that a change
//! of the host's load hits both sides of a pair alike — and each pair
//! gives a ratio of the two figures, oriented so that above 1 means
//! Pecan is better ([`paired_ratios`]). The lab reports the median ratio
//! and its range (min–max over the pairs).

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Instructions (ticks under icount) per turn of the soaker's loop: `add`,
/// `cmp`, `je`.
pub const TICKS_PER_ITERATION: u64 = 3;
/// The fewest recorded runs (passes, or wall-clock pairs) behind a figure.
pub const MIN_RUNS: usize = 5;
/// The spread of an I/O CPU cost the lab accepts, in percent of the
/// median (see the module doc, "Tolerance").
pub const TOLERANCE_PERCENT: u64 = 3;
/// Fixed-point scale of CPU cost figures: 1000 means 1 busy tick per KiB.
pub const COST_SCALE: u64 = 1000;

/// The soaker's shared state: its counter and its stop flag. Lives where
/// both the soaker and the benchmark thread see it (on one CPU).
#[derive(Debug, Default)]
#[repr(C)]
pub struct Soaker {
    count: AtomicU64,
    stop: AtomicBool,
}

impl Soaker {
    pub const fn new() -> Self {
        Soaker {
            count: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        }
    }

    /// The soaker's loop (see the module doc); returns once [`stop`] was
    /// called. Run it on a thread of the lowest priority.
    ///
    /// [`stop`]: Soaker::stop
    pub fn run(&self) {
        let count = self.count.as_ptr();
        let stop = self.stop.as_ptr();
        // SAFETY: both pointers come from live fields of `self`, which the
        // borrow keeps alive for the whole loop; the loop touches only
        // them (an aligned 8-byte read-modify-write of the counter, a byte
        // read of the flag) and no stack, and leaves every register but
        // the flags as it found them. The only writer of the counter is
        // this loop; other threads only load it (an aligned 8-byte store is
        // atomic on x86, so they see the old or the new value), and the
        // flag is only stored by `stop`.
        unsafe {
            core::arch::asm!(
                "2:",
                "add qword ptr [{count}], 1",
                "cmp byte ptr [{stop}], 0",
                "je 2b",
                count = in(reg) count,
                stop = in(reg) stop,
                options(nostack),
            );
        }
    }

    /// Iterations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The method's runs around `pass` (which moves the same bytes each
    /// time), with this soaker counting on the CPU: one unrecorded run,
    /// then one recorded run per slot of `elapsed` and `soaked` — its
    /// elapsed ticks and the soaker's turns meanwhile.
    pub fn measure<E>(
        &self,
        elapsed: &mut [u64],
        soaked: &mut [u64],
        mut pass: impl FnMut() -> Result<(), E>,
    ) -> Result<(), E> {
        pass()?;
        for (e, s) in elapsed.iter_mut().zip(soaked.iter_mut()) {
            let c0 = self.count();
            let t0 = crate::now();
            pass()?;
            let t1 = crate::now();
            let c1 = self.count();
            *e = t1.wrapping_sub(t0);
            *s = c1.wrapping_sub(c0);
        }
        Ok(())
    }

    /// Tells the loop to end after its current turn.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether [`stop`](Soaker::stop) was called.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Busy ticks of a window of `elapsed` ticks in which the soaker did
/// `soaked_iterations` turns: `elapsed - soaked_iterations ×`
/// [`TICKS_PER_ITERATION`], 0 if the soaker seems to have run longer than
/// the window (it cannot; a preempted turn can make it look so by 2).
pub fn busy(elapsed: u64, soaked_iterations: u64) -> u64 {
    elapsed.saturating_sub(soaked_iterations.saturating_mul(TICKS_PER_ITERATION))
}

/// CPU cost: `busy` ticks per KiB of `bytes` moved, × [`COST_SCALE`];
/// `None` when nothing moved.
pub fn cpu_cost(busy: u64, bytes: u64) -> Option<u64> {
    if bytes == 0 {
        return None;
    }
    let scaled = u128::from(busy) * 1024 * u128::from(COST_SCALE) / u128::from(bytes);
    Some(scaled.min(u128::from(u64::MAX)) as u64)
}

/// Statistics of a figure over runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunStats {
    pub runs: usize,
    pub median: u64,
    pub min: u64,
    pub max: u64,
    /// `(max - min) / median` in percent (0 for a zero median with no
    /// spread, infinite for a zero median with some).
    pub spread_percent: f64,
}

impl RunStats {
    /// Whether the spread is within [`TOLERANCE_PERCENT`] and there were
    /// at least [`MIN_RUNS`] runs.
    pub fn within_tolerance(&self) -> bool {
        self.runs >= MIN_RUNS && self.spread_percent <= TOLERANCE_PERCENT as f64
    }
}

/// Median (the upper one of an even count, like [`crate::stats`]), min,
/// max and spread of `values` (sorted in place); `None` for no values.
pub fn run_stats(values: &mut [u64]) -> Option<RunStats> {
    if values.is_empty() {
        return None;
    }
    let s = crate::stats(values);
    let spread = s.max - s.min;
    let spread_percent = match (spread, s.median) {
        (0, _) => 0.0,
        (_, 0) => f64::INFINITY,
        (d, m) => d as f64 * 100.0 / m as f64,
    };
    Some(RunStats {
        runs: values.len(),
        median: s.median,
        min: s.min,
        max: s.max,
        spread_percent,
    })
}

/// Which way a figure is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Ticks, ticks per KiB.
    Lower,
    /// Bytes per tick.
    Higher,
}

/// Why paired ratios could not be formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairError {
    /// No pairs.
    NoPairs,
    /// Pair `n` (from 0) has a zero figure: no ratio.
    Zero(usize),
}

/// The median ratio over interleaved pairs and its range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairedStats {
    pub pairs: usize,
    /// Pecan's advantage: above 1 means Pecan is better.
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// Ratios of `(pecan, linux)` figures of interleaved pairs, each oriented
/// as Pecan's advantage (`linux / pecan` when lower is better, `pecan /
/// linux` when higher is), written into `ratios` (at least as long as
/// `pairs`; sorted on return), and their median (the upper one of an even
/// count) and range.
pub fn paired_ratios(
    pairs: &[(u64, u64)],
    better: Better,
    ratios: &mut [f64],
) -> Result<PairedStats, PairError> {
    let n = pairs.len().min(ratios.len());
    if n == 0 {
        return Err(PairError::NoPairs);
    }
    for (i, (&(pecan, linux), r)) in pairs.iter().zip(ratios.iter_mut()).enumerate() {
        if pecan == 0 || linux == 0 {
            return Err(PairError::Zero(i));
        }
        *r = match better {
            Better::Lower => linux as f64 / pecan as f64,
            Better::Higher => pecan as f64 / linux as f64,
        };
    }
    let ratios = &mut ratios[..n];
    ratios.sort_unstable_by(f64::total_cmp);
    Ok(PairedStats {
        pairs: n,
        median: ratios[n / 2],
        min: ratios[0],
        max: ratios[n - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_is_elapsed_minus_soaked() {
        assert_eq!(busy(1000, 100), 700);
        assert_eq!(busy(1000, 0), 1000, "a soaker that never ran");
        assert_eq!(busy(1000, 334), 0, "soaked beyond elapsed saturates");
        assert_eq!(busy(0, u64::MAX), 0);
        assert_eq!(busy(u64::MAX, 0), u64::MAX);
    }

    #[test]
    fn cost_is_busy_ticks_per_kib_scaled() {
        assert_eq!(cpu_cost(1000, 1024), Some(1000 * COST_SCALE));
        assert_eq!(cpu_cost(1, 2048), Some(COST_SCALE / 2));
        assert_eq!(cpu_cost(5, 0), None);
        assert_eq!(cpu_cost(u64::MAX, 1), Some(u64::MAX));
        assert_eq!(cpu_cost(0, 65536), Some(0));
    }

    #[test]
    fn run_statistics() {
        let mut v = [110, 100, 90, 105, 95];
        let s = run_stats(&mut v).unwrap();
        assert_eq!((s.runs, s.median, s.min, s.max), (5, 100, 90, 110));
        assert!((s.spread_percent - 20.0).abs() < 1e-9);
        assert!(!s.within_tolerance());
        let mut tight = [100, 101, 99, 100, 102];
        assert!(run_stats(&mut tight).unwrap().within_tolerance());
        let mut few = [100, 100];
        assert!(!run_stats(&mut few).unwrap().within_tolerance());
        assert_eq!(run_stats(&mut []), None);
        let mut zeros = [0, 0, 0];
        assert_eq!(run_stats(&mut zeros).unwrap().spread_percent, 0.0);
        let mut zero_median = [0, 0, 5];
        assert!(run_stats(&mut zero_median)
            .unwrap()
            .spread_percent
            .is_infinite());
    }

    #[test]
    fn paired_ratios_are_pecan_advantage() {
        let mut r = [0.0; 5];
        let p = paired_ratios(
            &[(10, 20), (10, 30), (10, 10), (20, 20), (10, 40)],
            Better::Lower,
            &mut r,
        )
        .unwrap();
        assert_eq!((p.pairs, p.median, p.min, p.max), (5, 2.0, 1.0, 4.0));
        let p = paired_ratios(&[(30, 10), (20, 10)], Better::Higher, &mut r).unwrap();
        assert_eq!((p.median, p.min, p.max), (3.0, 2.0, 3.0));
        assert_eq!(
            paired_ratios(&[], Better::Lower, &mut r),
            Err(PairError::NoPairs)
        );
        assert_eq!(
            paired_ratios(&[(1, 1), (0, 1)], Better::Lower, &mut r),
            Err(PairError::Zero(1))
        );
    }

    #[test]
    fn soaker_counts_until_stopped() {
        extern crate std;
        let s = std::sync::Arc::new(Soaker::new());
        let t = {
            let s = s.clone();
            std::thread::spawn(move || s.run())
        };
        while s.count() < 1000 {
            std::thread::yield_now();
        }
        s.stop();
        t.join().unwrap();
        let after = s.count();
        assert!(after >= 1000 && s.stopped());
        // A stopped soaker runs one turn and returns.
        s.run();
        assert_eq!(s.count(), after + 1);
    }
}
