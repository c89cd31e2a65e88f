//! The 8259A PIC pair (master at 0x20/0x21, slave at 0xa0/0xa1 on the
//! master's line 2, edge/level control at 0x4d0/0x4d1): what Linux's
//! `i8259` driver programs. In virtual-wire mode the local APIC's LINT0
//! passes the master's output to the CPU as ExtINT: the VMM asks
//! [`Pics::pending`] for a vector and [`Pics::acknowledge`]s it when it
//! injects it.
//!
//! Modelled: the initialization sequence (ICW1..4, vector base, auto-EOI),
//! the mask, IRR/ISR with fixed priority, non-specific and specific EOI,
//! reading IRR or ISR (OCW3), edge and level triggering (ELCR). Not
//! modelled: priority rotation, special mask mode, polling (commands
//! accepted and ignored).

/// One 8259A.
#[derive(Clone, Copy, Debug, Default)]
struct Chip {
    irr: u8,
    isr: u8,
    imr: u8,
    /// The input lines' levels (for edge detection).
    lines: u8,
    /// Level-triggered lines (ELCR).
    level: u8,
    base: u8,
    /// Which ICW comes next (0: none; 2, 3, 4).
    init_step: u8,
    needs_icw4: bool,
    auto_eoi: bool,
    read_isr: bool,
}

impl Chip {
    fn set_line(&mut self, line: u8, high: bool) {
        let bit = 1 << line;
        if self.level & bit != 0 {
            if high {
                self.irr |= bit;
            } else {
                self.irr &= !bit;
            }
        } else if high && self.lines & bit == 0 {
            self.irr |= bit;
        }
        if high {
            self.lines |= bit;
        } else {
            self.lines &= !bit;
        }
    }

    /// The highest-priority requested, unmasked line not blocked by one
    /// in service of equal or higher priority.
    fn best(&self) -> Option<u8> {
        let requested = self.irr & !self.imr;
        (0..8)
            .find(|&i| (self.isr | requested) & (1 << i) != 0)
            .filter(|&i| (requested & !self.isr) & (1 << i) != 0)
    }

    fn acknowledge(&mut self, line: u8) {
        let bit = 1 << line;
        if self.level & bit == 0 || self.lines & bit == 0 {
            self.irr &= !bit;
        }
        if !self.auto_eoi {
            self.isr |= bit;
        }
    }

    fn write_command(&mut self, v: u8) {
        if v & 0x10 != 0 {
            // ICW1: start over.
            self.init_step = 2;
            self.needs_icw4 = v & 1 != 0;
            self.imr = 0;
            self.isr = 0;
            self.irr = 0;
            self.auto_eoi = false;
            self.read_isr = false;
        } else if v & 0x08 != 0 {
            // OCW3: which register a read returns.
            if v & 0x02 != 0 {
                self.read_isr = v & 0x01 != 0;
            }
        } else {
            // OCW2: EOI commands (rotation ignored).
            match v >> 5 {
                0b001 | 0b101 => {
                    if let Some(i) = (0..8).find(|&i| self.isr & (1 << i) != 0) {
                        self.isr &= !(1 << i);
                    }
                }
                0b011 | 0b111 => self.isr &= !(1 << (v & 7)),
                _ => {}
            }
        }
    }

    fn write_data(&mut self, v: u8) {
        match self.init_step {
            2 => {
                self.base = v & 0xf8;
                self.init_step = 3;
            }
            3 => self.init_step = if self.needs_icw4 { 4 } else { 0 },
            4 => {
                self.auto_eoi = v & 0x02 != 0;
                self.init_step = 0;
            }
            _ => self.imr = v,
        }
    }

    fn read_command(&self) -> u8 {
        if self.read_isr {
            self.isr
        } else {
            self.irr
        }
    }
}

/// The master and the slave.
#[derive(Clone, Copy, Debug)]
pub struct Pics {
    chips: [Chip; 2],
}

impl Default for Pics {
    fn default() -> Pics {
        Pics::new()
    }
}

impl Pics {
    /// Both chips as after reset: every line masked, vectors 8 and 0x70
    /// (the BIOS's).
    pub fn new() -> Pics {
        let mut chips = [Chip::default(); 2];
        chips[0].base = 0x08;
        chips[1].base = 0x70;
        chips[0].imr = 0xff;
        chips[1].imr = 0xff;
        Pics { chips }
    }

    /// Whether `port` is one of the PICs'.
    pub fn owns(port: u16) -> bool {
        matches!(port, 0x20 | 0x21 | 0xa0 | 0xa1 | 0x4d0 | 0x4d1)
    }

    pub fn read(&mut self, port: u16) -> u8 {
        match port {
            0x20 => self.chips[0].read_command(),
            0x21 => self.chips[0].imr,
            0xa0 => self.chips[1].read_command(),
            0xa1 => self.chips[1].imr,
            0x4d0 => self.chips[0].level,
            0x4d1 => self.chips[1].level,
            _ => 0xff,
        }
    }

    pub fn write(&mut self, port: u16, v: u8) {
        match port {
            0x20 => self.chips[0].write_command(v),
            0x21 => self.chips[0].write_data(v),
            0xa0 => self.chips[1].write_command(v),
            0xa1 => self.chips[1].write_data(v),
            // IRQ 0, 1, 2, 8 and 13 are always edge-triggered.
            0x4d0 => self.chips[0].level = v & 0xf8,
            0x4d1 => self.chips[1].level = v & 0xde,
            _ => {}
        }
        self.cascade();
    }

    /// Sets ISA interrupt line `irq` (0..16) high or low.
    pub fn set_irq(&mut self, irq: u8, high: bool) {
        match irq {
            0..=7 => self.chips[0].set_line(irq, high),
            8..=15 => {
                self.chips[1].set_line(irq - 8, high);
                self.cascade();
            }
            _ => {}
        }
    }

    /// The slave's output drives the master's line 2.
    fn cascade(&mut self) {
        let out = self.chips[1].best().is_some();
        self.chips[0].set_line(2, out);
    }

    /// The vector the master presents now, if any.
    pub fn pending(&self) -> Option<u8> {
        let line = self.chips[0].best()?;
        if line == 2 {
            let s = self.chips[1].best()?;
            Some(self.chips[1].base + s)
        } else {
            Some(self.chips[0].base + line)
        }
    }

    /// The CPU takes the pending interrupt: its vector (the INTA cycle).
    pub fn acknowledge(&mut self) -> Option<u8> {
        let line = self.chips[0].best()?;
        self.chips[0].acknowledge(line);
        let vector = if line == 2 {
            let s = self.chips[1].best()?;
            self.chips[1].acknowledge(s);
            self.chips[1].base + s
        } else {
            self.chips[0].base + line
        };
        self.cascade();
        Some(vector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux's `init_8259A`: vectors 0x30 and 0x38, cascade on 2, 8086
    /// mode, everything masked, then lines unmasked.
    fn linux_init() -> Pics {
        let mut p = Pics::new();
        p.write(0x21, 0xff);
        p.write(0xa1, 0xff);
        p.write(0x20, 0x11);
        p.write(0x21, 0x30);
        p.write(0x21, 0x04);
        p.write(0x21, 0x01);
        p.write(0xa0, 0x11);
        p.write(0xa1, 0x38);
        p.write(0xa1, 0x02);
        p.write(0xa1, 0x01);
        p.write(0x21, !(1 | 1 << 2 | 1 << 4));
        p.write(0xa1, !(1 << 4)); // IRQ 12
        p
    }

    #[test]
    fn edge_interrupts_with_priority_and_eoi() {
        let mut p = linux_init();
        assert_eq!(p.pending(), None);
        p.set_irq(4, true);
        p.set_irq(0, true);
        assert_eq!(p.pending(), Some(0x30));
        assert_eq!(p.acknowledge(), Some(0x30));
        // IRQ 4 waits while 0 is in service.
        assert_eq!(p.pending(), None);
        p.write(0x20, 0x20); // non-specific EOI
        assert_eq!(p.acknowledge(), Some(0x34));
        p.write(0x20, 0x64); // specific EOI for 4
        assert_eq!(p.pending(), None);
        // Still high: an edge needs a low first.
        p.set_irq(4, true);
        assert_eq!(p.pending(), None);
        p.set_irq(4, false);
        p.set_irq(4, true);
        assert_eq!(p.pending(), Some(0x34));
    }

    #[test]
    fn masked_and_cascaded() {
        let mut p = linux_init();
        p.set_irq(3, true);
        assert_eq!(p.pending(), None, "IRQ 3 is masked");
        p.set_irq(12, true);
        assert_eq!(p.pending(), Some(0x3c));
        assert_eq!(p.acknowledge(), Some(0x3c));
        p.write(0xa0, 0x20);
        p.write(0x20, 0x20);
        assert_eq!(p.pending(), None);
        // OCW3 reads.
        p.write(0x20, 0x0b);
        assert_eq!(p.read(0x20), 0);
        p.write(0x20, 0x0a);
        assert_eq!(p.read(0x20) & 1 << 3, 1 << 3);
    }

    #[test]
    fn level_lines_follow_the_line() {
        let mut p = linux_init();
        p.write(0x4d1, 1 << 3); // IRQ 11 level
        p.write(0xa1, !(1 << 3 | 1 << 4));
        p.set_irq(11, true);
        assert_eq!(p.acknowledge(), Some(0x3b));
        p.write(0xa0, 0x20);
        p.write(0x20, 0x20);
        assert_eq!(p.pending(), Some(0x3b), "still high: again");
        p.set_irq(11, false);
        assert_eq!(p.pending(), None);
    }

    #[test]
    fn any_port_any_value() {
        let mut p = Pics::new();
        for port in [0x20, 0x21, 0xa0, 0xa1, 0x4d0, 0x4d1, 0x22] {
            for v in 0..=255u8 {
                p.write(port, v);
                let _ = p.read(port);
                let _ = p.acknowledge();
                p.set_irq(v % 20, v & 1 != 0);
            }
        }
    }
}
