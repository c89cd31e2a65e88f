//! The PC's CMOS real-time clock (the MC146818 and its descendants in
//! every chipset): which registers hold the date and time, how to read them
//! while the chip may be updating, and how a reading becomes a calendar
//! date — for the RTC service (`components/services/rtc`,
//! `rt::session::rtc`). The port I/O is behind [`Cmos`], so tests run the
//! reading against a model of the chip that ticks between reads.
//!
//! # Reading the clock
//!
//! The chip is reached through two ports: the register index is written
//! to [`INDEX_PORT`], the register is then read at [`DATA_PORT`]. Once a
//! second the chip advances its registers one after the other; while
//! [`UIP`] (update in progress, [`STATUS_A`] bit 7) is set an update is
//! about to run or running (at most 244 µs ahead of it plus the update
//! itself, under 2 ms) and a reading may mix two seconds. [`read`] waits
//! for the flag to clear ([`UIP_SPINS`] polls at most), reads the seven
//! registers, and repeats until two readings in a row agree (at most
//! [`MAX_READS`] times): an update that began during a reading makes it
//! differ from the next one, so two equal readings are one second's.
//!
//! # What a reading means
//!
//! [`STATUS_B`] says how the chip stores its values: [`BINARY`] set means
//! binary, clear means BCD (each nibble a decimal digit, the default);
//! [`HOUR_24`] set means hours 0–23, clear means 1–12 with [`PM`] (bit 7
//! of the hour register) marking the afternoon — 12 AM is hour 0, 12 PM
//! hour 12. The year register holds two digits; the century comes from
//! [`reg::CENTURY`] (0x32, where QEMU and most PCs keep it — ACPI's FADT
//! names the index on real hardware) when it reads a plausible century,
//! 19 to 29, else the year is 20xx. The clock is kept in UTC (QEMU's
//! default, `-rtc base=utc`); nothing here knows time zones.
//!
//! A reading that is not a date — a BCD nibble above 9, month 13, 31
//! November, hour 24, a 12-hour clock at hour 0 — is an error value
//! ([`Invalid`]: which field, what it held), never a panic and never a
//! date clamped into range: a clock that reads nonsense (a dead battery,
//! a chip that is not there and reads 0xff) must say so.

use core::fmt;

/// Where the register index is written.
pub const INDEX_PORT: u16 = 0x70;
/// Where the selected register is read.
pub const DATA_PORT: u16 = 0x71;

/// The registers of the clock.
pub mod reg {
    /// Seconds, 0–59.
    pub const SECONDS: u8 = 0x00;
    /// Minutes, 0–59.
    pub const MINUTES: u8 = 0x02;
    /// Hours: 0–23, or 1–12 with [`super::PM`].
    pub const HOURS: u8 = 0x04;
    /// Day of the month, 1–31.
    pub const DAY: u8 = 0x07;
    /// Month, 1–12.
    pub const MONTH: u8 = 0x08;
    /// Year of the century, 0–99.
    pub const YEAR: u8 = 0x09;
    /// The century (not in the MC146818 itself; 0x32 on PCs).
    pub const CENTURY: u8 = 0x32;
}

/// Status register A: [`UIP`].
pub const STATUS_A: u8 = 0x0a;
/// Status register B: [`BINARY`], [`HOUR_24`].
pub const STATUS_B: u8 = 0x0b;
/// Status A: an update is in progress (or about to start).
pub const UIP: u8 = 0x80;
/// Status B: values are binary, not BCD.
pub const BINARY: u8 = 0x04;
/// Status B: hours run 0–23, not 1–12 with [`PM`].
pub const HOUR_24: u8 = 0x02;
/// The hour register's afternoon flag on a 12-hour clock.
pub const PM: u8 = 0x80;

/// Polls of [`UIP`] before [`read`] gives up ([`ReadError::Busy`]): far
/// more than the flag's longest span (under 2 ms) takes, even at a
/// microsecond per poll.
pub const UIP_SPINS: u32 = 100_000;
/// Readings before [`read`] gives up finding two that agree
/// ([`ReadError::Unsettled`]); two suffice unless the clock is broken.
pub const MAX_READS: u32 = 8;

/// The clock's registers: what [`read`] needs from the chip.
pub trait Cmos {
    /// Why a register could not be read (a port that is not there).
    type Error;
    /// The value of register `index`.
    fn read(&mut self, index: u8) -> Result<u8, Self::Error>;
}

/// One reading of the date and time registers, as stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Registers {
    pub second: u8,
    pub minute: u8,
    pub hour: u8,
    pub day: u8,
    pub month: u8,
    pub year: u8,
    pub century: u8,
}

impl Registers {
    /// The registers, read from `cmos` in order.
    pub fn read<C: Cmos>(cmos: &mut C) -> Result<Registers, C::Error> {
        Ok(Registers {
            second: cmos.read(reg::SECONDS)?,
            minute: cmos.read(reg::MINUTES)?,
            hour: cmos.read(reg::HOURS)?,
            day: cmos.read(reg::DAY)?,
            month: cmos.read(reg::MONTH)?,
            year: cmos.read(reg::YEAR)?,
            century: cmos.read(reg::CENTURY)?,
        })
    }
}

/// A calendar date and time of day, UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DateTime {
    pub year: u16,
    /// 1–12.
    pub month: u8,
    /// 1 to the month's length.
    pub day: u8,
    /// 0–23.
    pub hour: u8,
    /// 0–59.
    pub minute: u8,
    /// 0–59 (the clock knows no leap seconds).
    pub second: u8,
}

impl DateTime {
    /// Whether the fields name a real date and time of day.
    pub fn is_valid(&self) -> bool {
        (1..=12).contains(&self.month)
            && self.day >= 1
            && self.day <= days_in_month(self.year, self.month)
            && self.hour <= 23
            && self.minute <= 59
            && self.second <= 59
    }
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// Whether `year` is a Gregorian leap year.
pub const fn is_leap_year(year: u16) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

/// Days in `month` (1–12) of `year`; 0 for a month that is none.
pub const fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// A field of a reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Second,
    Minute,
    Hour,
    Day,
    Month,
    Year,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::Day => "day",
            Field::Month => "month",
            Field::Year => "year",
        })
    }
}

/// A reading that is no date: `field`'s register held `raw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub field: Field,
    pub raw: u8,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} register reads {:#04x}", self.field, self.raw)
    }
}

/// Why [`read`] has no date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError<E> {
    /// A register could not be read.
    Port(E),
    /// The update flag stayed set for [`UIP_SPINS`] polls.
    Busy,
    /// No two of [`MAX_READS`] readings in a row agreed.
    Unsettled,
    /// The reading is no date.
    Invalid(Invalid),
}

impl<E: fmt::Display> fmt::Display for ReadError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Port(e) => write!(f, "reading a register failed: {e}"),
            ReadError::Busy => write!(f, "the update flag stayed set for {UIP_SPINS} polls"),
            ReadError::Unsettled => {
                write!(f, "no two of {MAX_READS} readings in a row agreed")
            }
            ReadError::Invalid(i) => write!(f, "no date: {i}"),
        }
    }
}

/// Reads the clock (see the module doc): waits out an update, reads
/// until two readings agree, and decodes the reading by [`STATUS_B`].
pub fn read<C: Cmos>(cmos: &mut C) -> Result<DateTime, ReadError<C::Error>> {
    let mut last = None;
    for _ in 0..MAX_READS {
        wait_for_update(cmos)?;
        let now = Registers::read(cmos).map_err(ReadError::Port)?;
        if last == Some(now) {
            let format = cmos.read(STATUS_B).map_err(ReadError::Port)?;
            return decode(&now, format).map_err(ReadError::Invalid);
        }
        last = Some(now);
    }
    Err(ReadError::Unsettled)
}

/// Returns once [`UIP`] is clear.
fn wait_for_update<C: Cmos>(cmos: &mut C) -> Result<(), ReadError<C::Error>> {
    for _ in 0..UIP_SPINS {
        if cmos.read(STATUS_A).map_err(ReadError::Port)? & UIP == 0 {
            return Ok(());
        }
    }
    Err(ReadError::Busy)
}

/// The date and time `r` holds, in the format `status_b` describes.
pub fn decode(r: &Registers, status_b: u8) -> Result<DateTime, Invalid> {
    let binary = status_b & BINARY != 0;
    let number = |field, raw: u8, max: u8| {
        let value = match binary {
            true => Some(raw),
            false => from_bcd(raw),
        };
        value.filter(|&v| v <= max).ok_or(Invalid { field, raw })
    };
    let second = number(Field::Second, r.second, 59)?;
    let minute = number(Field::Minute, r.minute, 59)?;
    let hour = match status_b & HOUR_24 != 0 {
        true => number(Field::Hour, r.hour, 23)?,
        false => {
            let h = number(Field::Hour, r.hour & !PM, 12).map_err(|_| Invalid {
                field: Field::Hour,
                raw: r.hour,
            })?;
            if h == 0 {
                return Err(Invalid {
                    field: Field::Hour,
                    raw: r.hour,
                });
            }
            h % 12 + if r.hour & PM != 0 { 12 } else { 0 }
        }
    };
    let year_of_century = number(Field::Year, r.year, 99)?;
    let century = match binary {
        true => Some(r.century),
        false => from_bcd(r.century),
    }
    .filter(|c| (19..=29).contains(c))
    .unwrap_or(20);
    let year = u16::from(century) * 100 + u16::from(year_of_century);
    let month = number(Field::Month, r.month, 12)?;
    if month == 0 {
        return Err(Invalid {
            field: Field::Month,
            raw: r.month,
        });
    }
    let day = number(Field::Day, r.day, days_in_month(year, month))?;
    if day == 0 {
        return Err(Invalid {
            field: Field::Day,
            raw: r.day,
        });
    }
    Ok(DateTime {
        year,
        month,
        day,
        hour,
        minute,
        second,
    })
}

/// The value of BCD byte `b`, if both nibbles are digits.
pub const fn from_bcd(b: u8) -> Option<u8> {
    let (high, low) = (b >> 4, b & 0x0f);
    if high > 9 || low > 9 {
        None
    } else {
        Some(high * 10 + low)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    const BCD_24: u8 = HOUR_24;
    const BIN_24: u8 = HOUR_24 | BINARY;

    fn bcd(v: u8) -> u8 {
        ((v / 10) << 4) | (v % 10)
    }

    fn regs(y: u16, mo: u8, d: u8, h: u8, mi: u8, s: u8) -> Registers {
        Registers {
            second: bcd(s),
            minute: bcd(mi),
            hour: bcd(h),
            day: bcd(d),
            month: bcd(mo),
            year: bcd((y % 100) as u8),
            century: bcd((y / 100) as u8),
        }
    }

    fn date(year: u16, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> DateTime {
        DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
        }
    }

    #[test]
    fn bcd_24_hour() {
        let r = regs(2026, 11, 27, 6, 45, 12);
        assert_eq!(decode(&r, BCD_24), Ok(date(2026, 11, 27, 6, 45, 12)));
        assert_eq!(
            date(2026, 11, 27, 6, 45, 12).to_string(),
            "2026-11-27 06:45:12"
        );
    }

    #[test]
    fn binary_24_hour() {
        let r = Registers {
            second: 59,
            minute: 59,
            hour: 23,
            day: 31,
            month: 12,
            year: 99,
            century: 20,
        };
        assert_eq!(decode(&r, BIN_24), Ok(date(2099, 12, 31, 23, 59, 59)));
    }

    #[test]
    fn twelve_hour_clock() {
        let at = |hour_reg: u8| {
            let mut r = regs(2026, 1, 1, 0, 0, 0);
            r.hour = hour_reg;
            decode(&r, 0).map(|d| d.hour)
        };
        assert_eq!(at(0x12), Ok(0), "12 AM");
        assert_eq!(at(0x01), Ok(1));
        assert_eq!(at(0x11), Ok(11));
        assert_eq!(at(PM | 0x12), Ok(12), "12 PM");
        assert_eq!(at(PM | 0x01), Ok(13));
        assert_eq!(at(PM | 0x11), Ok(23));
        assert!(at(0x00).is_err(), "no hour 0 on a 12-hour clock");
        assert!(at(PM).is_err());
        assert!(at(0x13).is_err());
        // Binary 12-hour.
        let r = Registers {
            second: 0,
            minute: 0,
            hour: PM | 7,
            day: 1,
            month: 1,
            year: 26,
            century: 20,
        };
        assert_eq!(decode(&r, BINARY).map(|d| d.hour), Ok(19));
    }

    #[test]
    fn century_when_plausible() {
        let mut r = regs(1999, 12, 31, 0, 0, 0);
        assert_eq!(decode(&r, BCD_24).map(|d| d.year), Ok(1999));
        for junk in [0x00, 0xff, 0x30, 0x18, 0x1a] {
            r.century = junk;
            assert_eq!(decode(&r, BCD_24).map(|d| d.year), Ok(2099), "{junk:#x}");
        }
    }

    #[test]
    fn nonsense_is_an_error() {
        let ok = regs(2024, 2, 29, 12, 0, 0);
        assert!(decode(&ok, BCD_24).is_ok(), "a leap day");
        type Break = fn(&mut Registers);
        let cases: [(Break, Field); 10] = [
            (|r| r.second = 0x60, Field::Second),
            (|r| r.second = 0x0a, Field::Second),
            (|r| r.minute = 0xff, Field::Minute),
            (|r| r.hour = 0x24, Field::Hour),
            (|r| r.day = 0x00, Field::Day),
            (|r| r.day = 0x30, Field::Day),
            (|r| r.month = 0x00, Field::Month),
            (|r| r.month = 0x13, Field::Month),
            (|r| r.year = 0xa0, Field::Year),
            (
                |r| {
                    r.year = 0x23;
                    r.day = 0x29
                },
                Field::Day,
            ),
        ];
        for (i, (break_it, field)) in cases.into_iter().enumerate() {
            let mut r = ok;
            break_it(&mut r);
            assert_eq!(
                decode(&r, BCD_24).map_err(|e| e.field),
                Err(field),
                "case {i}"
            );
        }
        // A chip that is not there reads 0xff everywhere.
        let absent = Registers {
            second: 0xff,
            minute: 0xff,
            hour: 0xff,
            day: 0xff,
            month: 0xff,
            year: 0xff,
            century: 0xff,
        };
        for format in [0, BINARY, HOUR_24, BIN_24] {
            assert!(decode(&absent, format).is_err());
        }
    }

    #[test]
    fn calendar() {
        assert!(is_leap_year(2000) && is_leap_year(2024));
        assert!(!is_leap_year(1900) && !is_leap_year(2026));
        assert_eq!(days_in_month(2026, 2), 28);
        assert_eq!(days_in_month(2028, 2), 29);
        assert_eq!(days_in_month(2026, 13), 0);
        assert!(!date(2026, 4, 31, 0, 0, 0).is_valid());
        assert!(date(2026, 12, 31, 23, 59, 59).is_valid());
    }

    /// A model of the chip: its time advances by a second after every
    /// `tick_every` register reads, with the update flag set for
    /// `uip_reads` reads of status A before each update.
    struct Model {
        time: u32,
        reads: u32,
        tick_every: u32,
        uip_reads: u32,
        status_b: u8,
        fail: bool,
    }

    impl Model {
        fn new(tick_every: u32, uip_reads: u32) -> Model {
            Model {
                time: 0,
                reads: 0,
                tick_every,
                uip_reads,
                status_b: BCD_24,
                fail: false,
            }
        }
    }

    impl Cmos for Model {
        type Error = &'static str;

        fn read(&mut self, index: u8) -> Result<u8, &'static str> {
            if self.fail {
                return Err("no port");
            }
            self.reads += 1;
            let until_tick = self.tick_every - self.reads % self.tick_every;
            if until_tick == self.tick_every {
                self.time += 1;
            }
            // 2026-11-27 06:45:00 plus `time` seconds (within the hour).
            let s = self.time % 60;
            let m = 45 + self.time / 60;
            Ok(match index {
                STATUS_A if until_tick <= self.uip_reads => UIP,
                STATUS_A => 0x26,
                STATUS_B => self.status_b,
                reg::SECONDS => bcd(s as u8),
                reg::MINUTES => bcd(m as u8),
                reg::HOURS => 0x06,
                reg::DAY => 0x27,
                reg::MONTH => 0x11,
                reg::YEAR => 0x26,
                reg::CENTURY => 0x20,
                _ => 0,
            })
        }
    }

    #[test]
    fn read_agrees_across_updates() {
        // An update after every 5 reads: a reading of 7 registers always
        // straddles one, so no two readings ever agree.
        let mut m = Model::new(5, 0);
        assert_eq!(read(&mut m), Err(ReadError::Unsettled));
        // An update every 100 reads: a reading may straddle one, the
        // next one agrees with the one after it.
        for start in 0..100 {
            let mut m = Model::new(100, 3);
            m.reads = start;
            let got = read(&mut m).expect("a reading");
            assert_eq!((got.year, got.month, got.day, got.hour), (2026, 11, 27, 6));
            assert!(got.minute == 45 && got.second <= 2, "{got}");
        }
    }

    #[test]
    fn read_errors() {
        let mut m = Model::new(u32::MAX, u32::MAX);
        assert_eq!(read(&mut m), Err(ReadError::Busy));
        let mut m = Model::new(1000, 0);
        m.fail = true;
        assert_eq!(read(&mut m), Err(ReadError::Port("no port")));
        let mut m = Model::new(1000, 0);
        m.status_b = BIN_24; // BCD values read as binary: 0x45 is minute 69.
        assert_eq!(
            read(&mut m),
            Err(ReadError::Invalid(Invalid {
                field: Field::Minute,
                raw: 0x45
            }))
        );
    }
}
