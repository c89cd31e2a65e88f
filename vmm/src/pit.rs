//! The 8254 PIT (ports 0x40..0x43) and port 0x61's channel-2 gate and
//! output: channel 0 drives ISA IRQ 0 (Linux's first clock-event device,
//! until the local APIC timer takes over), channel 2 is what Linux's TSC
//! calibration would poll. Time is the VMM's: every call passes `now` in
//! nanoseconds since the VMM started, and the counters are computed from
//! it at 1.193182 MHz, so they advance in real time whether or not the
//! guest looks.
//!
//! Modelled: modes 0 (interrupt on terminal count), 2 (rate generator)
//! and 3 (square wave; 1, 4 and 5 count like 0), LSB/MSB/both accesses,
//! the latch command. Not modelled: BCD counting (accepted, counts
//! binary), read-back command.

/// The PIT's input clock.
pub const PIT_HZ: u64 = 1_193_182;

fn ticks(ns: u64) -> u64 {
    (ns as u128 * PIT_HZ as u128 / 1_000_000_000) as u64
}

fn ns(ticks: u64) -> u64 {
    (ticks as u128 * 1_000_000_000 / PIT_HZ as u128) as u64
}

#[derive(Clone, Copy, Debug, Default)]
struct Channel {
    mode: u8,
    /// Access: 1 LSB, 2 MSB, 3 LSB then MSB.
    access: u8,
    reload: u16,
    /// When counting started (ns), if it did.
    start: Option<u64>,
    /// LSB written, MSB awaited.
    half: Option<u8>,
    /// Latched value and which byte the next read returns.
    latch: Option<u16>,
    read_msb: bool,
    /// For channel 0: terminal counts already turned into interrupts.
    fired: u64,
}

impl Channel {
    fn period(&self) -> u64 {
        if self.reload == 0 {
            0x1_0000
        } else {
            u64::from(self.reload)
        }
    }

    fn periodic(&self) -> bool {
        matches!(self.mode, 2 | 3)
    }

    /// The count at `now`.
    fn count(&self, now: u64) -> u16 {
        let Some(start) = self.start else {
            return self.reload;
        };
        let elapsed = ticks(now.saturating_sub(start));
        let p = self.period();
        if self.periodic() {
            (p - elapsed % p) as u16
        } else if elapsed >= p {
            // Mode 0 wraps on past 0.
            (0x1_0000 - (elapsed - p) % 0x1_0000) as u16
        } else {
            (p - elapsed) as u16
        }
    }

    /// Terminal counts reached by `now` (mode 0 at most one).
    fn terminal_counts(&self, now: u64) -> u64 {
        let Some(start) = self.start else { return 0 };
        let elapsed = ticks(now.saturating_sub(start));
        if self.periodic() {
            elapsed / self.period()
        } else {
            u64::from(elapsed >= self.period())
        }
    }

    /// The output line at `now` (mode 0: high after terminal count;
    /// periodic modes: high but for the end of each period).
    fn output(&self, now: u64) -> bool {
        match self.start {
            None => self.mode != 0,
            Some(_) if self.periodic() => {
                let c = self.count(now);
                if self.mode == 3 {
                    u64::from(c) > self.period() / 2
                } else {
                    c != 1
                }
            }
            Some(_) => self.terminal_counts(now) > 0,
        }
    }

    fn load(&mut self, value: u16, now: u64) {
        self.reload = value;
        self.start = Some(now);
        self.fired = 0;
    }

    fn write(&mut self, v: u8, now: u64) {
        match self.access {
            1 => self.load(u16::from(v), now),
            2 => self.load(u16::from(v) << 8, now),
            _ => match self.half.take() {
                None => self.half = Some(v),
                Some(lsb) => self.load(u16::from(lsb) | u16::from(v) << 8, now),
            },
        }
    }

    fn read(&mut self, now: u64) -> u8 {
        let value = self.latch.unwrap_or_else(|| self.count(now));
        let (byte, done) = match self.access {
            1 => (value as u8, true),
            2 => ((value >> 8) as u8, true),
            _ if self.read_msb => ((value >> 8) as u8, true),
            _ => (value as u8, false),
        };
        self.read_msb = !done;
        if done {
            self.latch = None;
        }
        byte
    }
}

/// The three channels and the gate of channel 2.
#[derive(Clone, Debug, Default)]
pub struct Pit {
    channels: [Channel; 3],
    port61: u8,
}

impl Pit {
    pub fn new() -> Pit {
        Pit::default()
    }

    /// Whether `port` is the PIT's or port 0x61.
    pub fn owns(port: u16) -> bool {
        matches!(port, 0x40..=0x43 | 0x61)
    }

    pub fn read(&mut self, port: u16, now: u64) -> u8 {
        match port {
            0x40..=0x42 => self.channels[usize::from(port - 0x40)].read(now),
            0x61 => {
                let out2 = self.channels[2].output(now);
                // Bit 4 toggles with the DRAM refresh: every 15 µs.
                let refresh = (now / 15_000) & 1 == 1;
                self.port61 & 0x0f | u8::from(refresh) << 4 | u8::from(out2) << 5
            }
            _ => 0xff,
        }
    }

    pub fn write(&mut self, port: u16, v: u8, now: u64) {
        match port {
            0x40..=0x42 => self.channels[usize::from(port - 0x40)].write(v, now),
            0x43 => {
                let sc = usize::from(v >> 6);
                if sc == 3 {
                    return; // read-back: not modelled
                }
                let c = &mut self.channels[sc];
                let access = (v >> 4) & 3;
                if access == 0 {
                    c.latch = Some(c.count(now));
                    c.read_msb = false;
                    return;
                }
                c.access = access;
                c.mode = match (v >> 1) & 7 {
                    6 => 2,
                    7 => 3,
                    m => m,
                };
                c.start = None;
                c.half = None;
                c.latch = None;
                c.read_msb = false;
                c.fired = 0;
            }
            0x61 => {
                // Gate of channel 2 rising restarts its count.
                if v & 1 != 0 && self.port61 & 1 == 0 {
                    let c = &mut self.channels[2];
                    if c.start.is_some() {
                        c.start = Some(now);
                    }
                }
                self.port61 = v & 0x0f;
            }
            _ => {}
        }
    }

    /// IRQ 0 edges due by `now` that were not reported yet (periodic
    /// ticks missed while the guest did not run are folded into one).
    pub fn irq0_due(&mut self, now: u64) -> bool {
        let c = &mut self.channels[0];
        let n = c.terminal_counts(now);
        if n > c.fired {
            c.fired = n;
            true
        } else {
            false
        }
    }

    /// When channel 0's next interrupt is due (ns), if it will interrupt.
    pub fn next_irq0(&self) -> Option<u64> {
        let c = &self.channels[0];
        let start = c.start?;
        if !c.periodic() && c.fired > 0 {
            return None;
        }
        Some(start + ns((c.fired + 1) * c.period()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_channel_0_interrupts_at_its_rate() {
        let mut p = Pit::new();
        // Linux's periodic mode at HZ 250: mode 2, LATCH = 4773.
        p.write(0x43, 0x34, 0);
        p.write(0x40, (4773 & 0xff) as u8, 0);
        p.write(0x40, (4773 >> 8) as u8, 1000);
        let period = ns(4773);
        assert_eq!(p.next_irq0(), Some(1000 + period));
        assert!(!p.irq0_due(1000 + period - 10));
        assert!(p.irq0_due(1000 + period + 1000));
        assert!(!p.irq0_due(1000 + period + 2000));
        // Ten missed periods: one interrupt.
        assert!(p.irq0_due(1000 + 11 * period + 1000));
        assert!(!p.irq0_due(1000 + 11 * period + 2000));
    }

    #[test]
    fn one_shot_and_latched_reads() {
        let mut p = Pit::new();
        p.write(0x43, 0x30, 0); // channel 0, both bytes, mode 0
        p.write(0x40, 0x00, 0);
        p.write(0x40, 0x10, 0); // 4096 ticks
        let half = ns(2048);
        p.write(0x43, 0x00, half); // latch
        let lo = p.read(0x40, half + 1_000_000);
        let hi = p.read(0x40, half + 1_000_000);
        let latched = u16::from(lo) | u16::from(hi) << 8;
        assert!((2047..=2049).contains(&latched), "{latched}");
        assert!(!p.irq0_due(ns(4095)));
        assert!(p.irq0_due(ns(4097)));
        assert!(!p.irq0_due(ns(100_000)), "one shot");
        assert_eq!(p.next_irq0(), None);
    }

    #[test]
    fn channel_2_output_through_port_61() {
        let mut p = Pit::new();
        p.write(0x61, 0x01, 0); // gate on, speaker off
        p.write(0x43, 0xb0, 0); // channel 2, both bytes, mode 0
        p.write(0x42, 0xff, 0);
        p.write(0x42, 0xff, 0);
        assert_eq!(p.read(0x61, ns(100)) & 0x20, 0);
        assert_eq!(p.read(0x61, ns(0x1_0000)) & 0x20, 0x20);
    }

    #[test]
    fn any_port_any_value() {
        let mut p = Pit::new();
        for port in 0x40..=0x43u16 {
            for v in 0..=255u8 {
                p.write(port, v, u64::from(v) * 1000);
                let _ = p.read(port, u64::from(v) * 977);
                let _ = p.irq0_due(u64::from(v) * 5000);
                let _ = p.next_irq0();
            }
        }
    }
}
