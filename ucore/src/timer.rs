//! The Timer service's arithmetic and bookkeeping (`components/services/timer`,
//! `rt::session::timer`): the PIT's clock and each session's timeouts.
//!
//! # The clock
//!
//! The PIT's channel 0 runs as a rate generator (mode 2) with divisor
//! [`TICK_CYCLES`]: its counter counts from 1193 down to 1 at
//! [`PIT_HZ`] and reloads, and each reload is one interrupt, one *tick*
//! (999.85 µs). Time since the driver started it, in PIT cycles, is
//! `ticks × TICK_CYCLES + (TICK_CYCLES − counter)` ([`Clock::cycles`]):
//! the tick count gives the coarse part, the latched counter the fine
//! part, so [`Clock::now_us`] resolves 0.84 µs and never drifts (the PIT
//! is never reprogrammed, so no cycle is lost). Deadlines are kept in PIT
//! cycles and rounded *up* from microseconds ([`us_to_cycles`]): a timeout
//! never fires early.
//!
//! Why a fixed 1 kHz tick and not a one-shot to the earliest deadline:
//! reprogramming the PIT for each deadline loses the cycles between the
//! last reload and the new count (the clock drifts, or needs a second time
//! source), and the work per tick here is small — one interrupt, one
//! notification to the driver, one `IrqAck`, a compare with the earliest
//! deadline of all sessions ([`Timeouts::earliest`]); only a tick that
//! reaches it walks the sessions. The price is 1000 wake-ups a second when
//! nothing is due, and a resolution of one tick for timeouts.
//!
//! # Timeouts
//!
//! A session has [`MAX_TIMEOUTS`] timeouts, numbered from 0; timeout `k`
//! is signalled as bit `1 << k` of the session's notification. A one-shot
//! fires once at its deadline and is freed; a periodic one fires at
//! `start + n × period` for n = 1, 2, ... (computed from `start`, never
//! accumulated, so a period that is no whole number of PIT cycles does not
//! drift). A tick that finds several periods past signals once and moves
//! on to the first future one (a notification cannot count); the periods
//! it skipped are counted in [`Timeout::missed`].
//!
//! # A clock without a request per reading: the TSC
//!
//! Reading the clock through the session costs a round trip to the
//! driver and three port accesses there; a network stack reads it at
//! every poll. So the driver also measures the TSC's rate against the
//! PIT ([`TscRate`]: ticks of the TSC per second, from the TSC and PIT
//! cycles at its start to those at the request, once at least
//! [`TSC_BASELINE_US`] passed) and tells a client the time with the rate
//! (`CLOCK`); the client reads its own TSC right before and after the
//! request, takes the middle as the time the answer was true, and
//! interpolates from there ([`TscClock`]) for at most
//! [`TSC_RESYNC_US`], then asks again. Its error is half a round trip
//! plus the rate's error over the interval (the rate is measured over the
//! driver's whole life: far below a microsecond) — and it never goes back
//! (a reading earlier than the last is the last). This assumes a TSC of
//! constant rate (CPUID's invariant TSC on hardware since about 2008; QEMU
//! counts the host's TSC, or instructions under `-icount`); a TSC that
//! runs backwards or jumps past the interval makes the client ask again.

/// The PIT's input clock, Hz.
pub const PIT_HZ: u64 = 1_193_182;
/// The divisor of channel 0: one tick every 1193 cycles, 999.85 µs.
pub const TICK_CYCLES: u64 = 1193;
/// Timeouts per session (bits of its notification).
pub const MAX_TIMEOUTS: usize = 8;
/// The shortest period: one tick, rounded up to whole microseconds
/// (a shorter period would fire once per tick, not as asked).
pub const MIN_PERIOD_US: u64 = 1000;
/// The longest timeout or period: one hour.
pub const MAX_US: u64 = 3_600_000_000;

/// PIT cycles in `us` microseconds, rounded up (saturating).
pub const fn us_to_cycles(us: u64) -> u64 {
    let cycles = (us as u128 * PIT_HZ as u128).div_ceil(1_000_000);
    if cycles > u64::MAX as u128 {
        u64::MAX
    } else {
        cycles as u64
    }
}

/// Whole microseconds in `cycles` PIT cycles (rounded down).
pub const fn cycles_to_us(cycles: u64) -> u64 {
    (cycles as u128 * 1_000_000 / PIT_HZ as u128) as u64
}

/// The clock: ticks counted by the driver, and the last time reported so
/// that time never runs backwards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    /// Interrupts handled since the PIT was started.
    pub ticks: u64,
    last: u64,
}

impl Clock {
    /// PIT cycles since the start, given a latched `counter` reading
    /// (1..=TICK_CYCLES in mode 2; anything else is clamped). Never less
    /// than an earlier result: a reload whose interrupt the driver has not
    /// handled yet would otherwise look like a step back by a tick.
    pub fn cycles(&mut self, counter: u16) -> u64 {
        let counter = u64::from(counter).clamp(1, TICK_CYCLES);
        let now = self.ticks * TICK_CYCLES + (TICK_CYCLES - counter);
        self.last = self.last.max(now);
        self.last
    }

    /// Microseconds since the start ([`Self::cycles`]).
    pub fn now_us(&mut self, counter: u16) -> u64 {
        cycles_to_us(self.cycles(counter))
    }

    /// PIT cycles at the last tick: what a tick compares deadlines with.
    pub fn tick_cycles(&self) -> u64 {
        self.ticks * TICK_CYCLES
    }
}

/// One timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// When it was set, PIT cycles.
    start: u64,
    /// Its period (or its delay, for a one-shot), µs.
    us: u64,
    periodic: bool,
    /// Fires so far: the next deadline is `start + (fired + missed + 1) ×
    /// period`.
    pub fired: u64,
    /// Periods a late tick skipped.
    pub missed: u64,
    /// The next deadline, PIT cycles.
    deadline: u64,
}

impl Timeout {
    fn new(start: u64, us: u64, periodic: bool) -> Timeout {
        Timeout {
            start,
            us,
            periodic,
            fired: 0,
            missed: 0,
            deadline: start.saturating_add(us_to_cycles(us)),
        }
    }

    /// Deadline number `n` (1-based) of a periodic timeout.
    fn nth(&self, n: u64) -> u64 {
        self.start
            .saturating_add(us_to_cycles(self.us.saturating_mul(n)))
    }
}

/// Why a timeout was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutError {
    /// 0 µs, more than [`MAX_US`], or a period below [`MIN_PERIOD_US`].
    BadDuration,
    /// All [`MAX_TIMEOUTS`] are in use.
    Full,
    /// No such timeout is set.
    NotSet,
}

/// A session's timeouts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeouts {
    slots: [Option<Timeout>; MAX_TIMEOUTS],
}

impl Timeouts {
    /// Sets a timeout `us` from `now` (PIT cycles), periodic or one-shot;
    /// its number.
    pub fn set(&mut self, now: u64, us: u64, periodic: bool) -> Result<usize, TimeoutError> {
        let shortest = if periodic { MIN_PERIOD_US } else { 1 };
        if !(shortest..=MAX_US).contains(&us) {
            return Err(TimeoutError::BadDuration);
        }
        let free = self.slots.iter().position(Option::is_none);
        let k = free.ok_or(TimeoutError::Full)?;
        self.slots[k] = Some(Timeout::new(now, us, periodic));
        Ok(k)
    }

    /// Cancels timeout `k`.
    pub fn cancel(&mut self, k: u64) -> Result<(), TimeoutError> {
        let slot = usize::try_from(k)
            .ok()
            .and_then(|k| self.slots.get_mut(k))
            .filter(|s| s.is_some())
            .ok_or(TimeoutError::NotSet)?;
        *slot = None;
        Ok(())
    }

    /// Timeout `k`, if set.
    pub fn get(&self, k: usize) -> Option<&Timeout> {
        self.slots.get(k)?.as_ref()
    }

    /// The earliest deadline, PIT cycles.
    pub fn earliest(&self) -> Option<u64> {
        self.slots.iter().flatten().map(|t| t.deadline).min()
    }

    /// Fires every timeout whose deadline is at or before `now`: one-shots
    /// are freed, periodic ones move to their first deadline after `now`.
    /// The bits of the timeouts that fired.
    pub fn expire(&mut self, now: u64) -> u64 {
        let mut bits = 0;
        for (k, slot) in self.slots.iter_mut().enumerate() {
            let Some(t) = slot else { continue };
            if t.deadline > now {
                continue;
            }
            bits |= 1 << k;
            if !t.periodic {
                *slot = None;
                continue;
            }
            t.fired += 1;
            let mut n = t.fired + t.missed + 1;
            while t.nth(n) <= now {
                t.missed += 1;
                n += 1;
            }
            t.deadline = t.nth(n);
        }
        bits
    }
}

/// The least time, µs, the driver measures the TSC's rate over before it
/// tells clients the rate (before that, `CLOCK` answers rate 0 and
/// clients ask for the time at each reading).
pub const TSC_BASELINE_US: u64 = 100_000;
/// The longest a client interpolates from one `CLOCK` answer, µs.
pub const TSC_RESYNC_US: u64 = 10_000;

/// The TSC's rate as the driver measures it against the PIT: the TSC and
/// the PIT's cycles at the first reading, and the rate from there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TscRate {
    start: Option<(u64, u64)>,
}

impl TscRate {
    /// Takes a reading (`tsc`, PIT `cycles` as [`Clock::cycles`] counts
    /// them) and returns the TSC's ticks per second, 0 while less than
    /// [`TSC_BASELINE_US`] passed since the first reading or if the TSC did
    /// not move forward.
    pub fn hz(&mut self, tsc: u64, cycles: u64) -> u64 {
        let (tsc0, cycles0) = *self.start.get_or_insert((tsc, cycles));
        let elapsed = cycles.saturating_sub(cycles0);
        if elapsed < us_to_cycles(TSC_BASELINE_US) || tsc <= tsc0 {
            return 0;
        }
        let hz = u128::from(tsc - tsc0) * u128::from(PIT_HZ) / u128::from(elapsed);
        u64::try_from(hz).unwrap_or(u64::MAX)
    }
}

/// A client's clock interpolated from the driver's time by its own TSC
/// (the module doc, "A clock without a request per reading").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TscClock {
    /// The driver's time (µs), the client's TSC when it was true, the
    /// TSC's rate (ticks per second; 0: none).
    anchor: Option<(u64, u64, u64)>,
    /// The latest time returned: the clock never goes back.
    last_us: u64,
}

impl TscClock {
    /// The time at `tsc`, µs, if the last anchor is fresh enough to
    /// interpolate from; `None`: ask the driver ([`Self::anchor`]).
    pub fn now(&mut self, tsc: u64) -> Option<u64> {
        let (us, at, hz) = self.anchor?;
        if hz == 0 || tsc < at {
            return None;
        }
        let elapsed = u128::from(tsc - at) * 1_000_000 / u128::from(hz);
        if elapsed > u128::from(TSC_RESYNC_US) {
            return None;
        }
        Some(self.monotonic(us + elapsed as u64))
    }

    /// The driver answered `us` with rate `hz` (0: unknown) to a request
    /// made between the client's TSC readings `before` and `after`;
    /// returns the time now.
    pub fn anchor(&mut self, us: u64, hz: u64, before: u64, after: u64) -> u64 {
        let at = before / 2 + after / 2 + (before % 2 + after % 2) / 2;
        self.anchor = Some((us, at.max(before), hz));
        self.monotonic(us)
    }

    fn monotonic(&mut self, us: u64) -> u64 {
        self.last_us = self.last_us.max(us);
        self.last_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_so_nothing_fires_early() {
        assert_eq!(us_to_cycles(0), 0);
        assert_eq!(us_to_cycles(1), 2);
        assert_eq!(us_to_cycles(1000), 1194);
        assert_eq!(us_to_cycles(1_000_000), PIT_HZ);
        assert_eq!(cycles_to_us(PIT_HZ), 1_000_000);
        assert_eq!(cycles_to_us(TICK_CYCLES), 999);
        for us in [1, 7, 999, 1000, 1001, 123_456, MAX_US] {
            assert!(cycles_to_us(us_to_cycles(us)) >= us, "{us}");
        }
        assert_eq!(us_to_cycles(u64::MAX), u64::MAX);
    }

    #[test]
    fn the_clock_counts_ticks_and_the_counter_and_never_goes_back() {
        let mut c = Clock::default();
        assert_eq!(c.cycles(1193), 0);
        assert_eq!(c.cycles(1), 1192);
        c.ticks = 1;
        assert_eq!(c.cycles(1193), 1193);
        // The counter reloaded, the tick not yet counted: no step back.
        assert_eq!(c.cycles(1190), 1196);
        c.ticks = 2;
        assert_eq!(c.cycles(1190), 2 * 1193 + 3);
        // Out-of-range readings are clamped.
        assert_eq!(c.cycles(0), 2 * 1193 + 1192);
        assert_eq!(c.cycles(u16::MAX), 2 * 1193 + 1192);
        c.ticks = 1000;
        assert_eq!(c.now_us(1193), 999_847);
    }

    #[test]
    fn one_shots_fire_once_at_or_after_their_deadline() {
        let mut t = Timeouts::default();
        let a = t.set(100, 2500, false).unwrap();
        let b = t.set(100, 1, false).unwrap();
        assert_eq!((a, b), (0, 1));
        assert_eq!(t.earliest(), Some(102));
        assert_eq!(t.expire(101), 0);
        assert_eq!(t.expire(102), 0b10);
        assert_eq!(t.earliest(), Some(100 + us_to_cycles(2500)));
        assert_eq!(t.expire(100 + us_to_cycles(2500) - 1), 0);
        assert_eq!(t.expire(100 + us_to_cycles(2500)), 0b01);
        assert_eq!(t.earliest(), None);
        assert_eq!(t.expire(u64::MAX), 0);
    }

    #[test]
    fn periodic_timeouts_do_not_drift_and_count_what_they_skip() {
        let mut t = Timeouts::default();
        let k = t.set(0, 1000, true).unwrap();
        let mut fires = 0;
        // A 1 kHz tick for 10 s: the 1000 µs period (1193.182 cycles) fires
        // 10000 times, although a period rounded to whole cycles would not.
        for tick in 1..=10_000u64 + 1 {
            if t.expire(tick * TICK_CYCLES) != 0 {
                fires += 1;
            }
        }
        let elapsed = cycles_to_us(10_001 * TICK_CYCLES);
        assert_eq!(fires, elapsed / 1000);
        assert_eq!(t.get(k).unwrap().missed, 0);
        // A late tick signals once and skips to the next future deadline.
        let now = t.earliest().unwrap() + us_to_cycles(3500);
        assert_eq!(t.expire(now), 1);
        assert_eq!(t.get(k).unwrap().missed, 3);
        assert!(t.earliest().unwrap() > now);
        t.cancel(k as u64).unwrap();
        assert_eq!(t.earliest(), None);
    }

    #[test]
    fn bad_requests_are_refused() {
        let mut t = Timeouts::default();
        let bad = Err(TimeoutError::BadDuration);
        assert_eq!(t.set(0, 0, false), bad);
        assert_eq!(t.set(0, 0, true), bad);
        assert_eq!(t.set(0, MIN_PERIOD_US - 1, true), bad);
        assert_eq!(t.set(0, MAX_US + 1, false), bad);
        assert_eq!(t.set(0, u64::MAX, true), bad);
        for k in 0..MAX_TIMEOUTS {
            assert_eq!(t.set(0, MAX_US, k % 2 == 0), Ok(k));
        }
        assert_eq!(t.set(0, 5, false), Err(TimeoutError::Full));
        assert_eq!(t.cancel(MAX_TIMEOUTS as u64), Err(TimeoutError::NotSet));
        assert_eq!(t.cancel(u64::MAX), Err(TimeoutError::NotSet));
        assert_eq!(t.cancel(3), Ok(()));
        assert_eq!(t.cancel(3), Err(TimeoutError::NotSet));
        assert_eq!(t.set(0, 5, false), Ok(3));
    }

    #[test]
    fn the_tsc_rate_waits_for_its_baseline_then_measures() {
        let mut r = TscRate::default();
        assert_eq!(r.hz(1_000, 5), 0);
        // 50 ms in: too short a baseline.
        assert_eq!(r.hz(1_000 + 50_000_000, 5 + PIT_HZ / 20), 0);
        // One second at 1 GHz.
        assert_eq!(r.hz(1_000 + 1_000_000_000, 5 + PIT_HZ), 1_000_000_000);
        // A TSC that went back: no rate.
        assert_eq!(r.hz(10, 5 + 2 * PIT_HZ), 0);
    }

    #[test]
    fn the_tsc_clock_interpolates_resyncs_and_never_goes_back() {
        let mut c = TscClock::default();
        assert_eq!(c.now(100), None);
        // The driver said 5,000 µs at 1 GHz between TSC 1,000 and 3,000.
        assert_eq!(c.anchor(5_000, 1_000_000_000, 1_000, 3_000), 5_000);
        assert_eq!(c.now(2_000), Some(5_000));
        assert_eq!(c.now(2_000 + 1_500_000), Some(6_500));
        // Past the resync interval: ask again.
        assert_eq!(c.now(2_000 + (TSC_RESYNC_US + 1) * 1_000), None);
        // A TSC before the anchor (another CPU's, or backwards): ask again.
        assert_eq!(c.now(1_999), None);
        // An answer earlier than a time returned: the clock stays.
        assert_eq!(c.anchor(6_000, 1_000_000_000, 4_000_000, 4_000_002), 6_500);
        assert_eq!(c.now(4_000_001), Some(6_500));
        assert_eq!(c.now(4_000_001 + 1_000_000), Some(7_000));
        // No rate known: every reading asks.
        c.anchor(8_000, 0, 5_000_000, 5_000_010);
        assert_eq!(c.now(5_000_010), None);
        // TSC readings at the top of the range do not overflow.
        c.anchor(9_000, 3_000_000_000, u64::MAX - 1, u64::MAX);
        assert_eq!(c.now(u64::MAX), Some(9_000));
    }
}
