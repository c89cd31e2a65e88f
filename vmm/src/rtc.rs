//! The CMOS clock (index port 0x70, data port 0x71): the date and time
//! Linux reads at boot (`mc146818_get_time`), from the host's wall clock
//! that the VMM passes with every read, in BCD and 24-hour mode as a PC
//! BIOS leaves it, and the other 114 bytes of CMOS memory. Writes to the
//! clock's registers are accepted and ignored (the host's clock stays the
//! one truth); the update-in-progress bit is never set.

/// Unix time (seconds) as (year, month, day, hour, minute, second,
/// weekday 1 = Sunday).
pub fn civil(unix: u64) -> (u64, u8, u8, u8, u8, u8, u8) {
    let days = unix / 86_400;
    let secs = unix % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + u64::from(month <= 2);
    let weekday = ((days + 4) % 7 + 1) as u8; // 1970-01-01 was a Thursday
    (
        year,
        month,
        day,
        (secs / 3600) as u8,
        (secs / 60 % 60) as u8,
        (secs % 60) as u8,
        weekday,
    )
}

/// Unix time (seconds) of a date and time, UTC (the inverse of
/// [`civil`]; Howard Hinnant's days-from-civil).
pub fn unix(year: u64, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> u64 {
    let (y, m) = if month <= 2 {
        (year - 1, u64::from(month) + 9)
    } else {
        (year, u64::from(month) - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + u64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + u64::from(hour) * 3600 + u64::from(minute) * 60 + u64::from(second)
}

fn bcd(v: u8) -> u8 {
    (v / 10) << 4 | (v % 10)
}

/// The CMOS chip.
#[derive(Clone, Debug)]
pub struct Rtc {
    index: u8,
    ram: [u8; 128],
}

impl Default for Rtc {
    fn default() -> Rtc {
        Rtc::new()
    }
}

impl Rtc {
    pub fn new() -> Rtc {
        let mut ram = [0u8; 128];
        ram[0x0a] = 0x26; // 32.768 kHz base, 1024 Hz rate
        ram[0x0b] = 0x02; // 24-hour, BCD
        ram[0x0d] = 0x80; // battery good
        Rtc { index: 0, ram }
    }

    pub fn owns(port: u16) -> bool {
        matches!(port, 0x70 | 0x71)
    }

    /// A read at `port` with the host's wall clock at `unix` seconds.
    pub fn read(&mut self, port: u16, unix: u64) -> u8 {
        if port != 0x71 {
            return 0xff;
        }
        let (year, month, day, hour, min, sec, wday) = civil(unix);
        let i = self.index & 0x7f;
        match i {
            0x00 => bcd(sec),
            0x02 => bcd(min),
            0x04 => bcd(hour),
            0x06 => bcd(wday),
            0x07 => bcd(day),
            0x08 => bcd(month),
            0x09 => bcd((year % 100) as u8),
            0x32 => bcd((year / 100 % 100) as u8),
            0x0a => self.ram[0x0a] & 0x7f,
            0x0c => core::mem::take(&mut self.ram[0x0c]),
            _ => self.ram[usize::from(i)],
        }
    }

    pub fn write(&mut self, port: u16, v: u8) {
        match port {
            0x70 => self.index = v,
            0x71 => {
                let i = usize::from(self.index & 0x7f);
                match i {
                    0x00..=0x09 | 0x32 | 0x0c | 0x0d => {}
                    // Status B: keep BCD and 24-hour whatever the guest
                    // asks (the clock reads are computed that way).
                    0x0b => self.ram[i] = (v & !0x06) | 0x02,
                    _ => self.ram[i] = v,
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0, 5));
        // 2026-11-27 16:20:00 UTC, a Friday.
        assert_eq!(civil(1_795_796_400), (2026, 11, 27, 16, 20, 0, 6));
        assert_eq!(civil(951_782_400), (2000, 2, 29, 0, 0, 0, 3));
        for t in [0, 951_782_400, 1_795_796_459, 4_102_444_800] {
            let (y, mo, d, h, mi, s, _) = civil(t);
            assert_eq!(unix(y, mo, d, h, mi, s), t);
        }
    }

    #[test]
    fn reads_bcd_time() {
        let mut r = Rtc::new();
        let t = 1_795_796_400 + 59;
        let mut read = |i: u8| {
            r.write(0x70, i);
            r.read(0x71, t)
        };
        assert_eq!(read(0x00), 0x59);
        assert_eq!(read(0x02), 0x20);
        assert_eq!(read(0x04), 0x16);
        assert_eq!(read(0x07), 0x27);
        assert_eq!(read(0x08), 0x11);
        assert_eq!(read(0x09), 0x26);
        assert_eq!(read(0x32), 0x20);
        assert_eq!(read(0x0a) & 0x80, 0);
        assert_eq!(read(0x0b), 0x02);
        assert_eq!(read(0x0d), 0x80);
    }

    #[test]
    fn memory_and_any_value() {
        let mut r = Rtc::new();
        r.write(0x70, 0x80 | 0x40);
        r.write(0x71, 0x5a);
        r.write(0x70, 0x40);
        assert_eq!(r.read(0x71, 0), 0x5a);
        for i in 0..=255u8 {
            r.write(0x70, i);
            r.write(0x71, i);
            let _ = r.read(0x71, u64::MAX / 2);
        }
    }
}
