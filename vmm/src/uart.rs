//! A 16550A UART (ports base..base+8, IRQ 4 for COM1): what Linux's 8250
//! driver probes (scratch register, loopback, FIFO detection) and uses
//! (transmit with the THR-empty interrupt, receive with the data-ready
//! interrupt). The guest's output collects in a buffer the VMM takes
//! ([`Uart::take_output`]); input bytes are queued with [`Uart::receive`].
//! Baud rate, parity and stop bits are stored and ignored.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// Register offsets.
const DATA: u16 = 0;
const IER: u16 = 1;
const IIR_FCR: u16 = 2;
const LCR: u16 = 3;
const MCR: u16 = 4;
const LSR: u16 = 5;
const MSR: u16 = 6;
const SCR: u16 = 7;

const IER_RX: u8 = 1;
const IER_THRE: u8 = 2;
const LCR_DLAB: u8 = 0x80;
const MCR_LOOP: u8 = 0x10;
const LSR_DR: u8 = 0x01;
const LSR_THRE: u8 = 0x20;
const LSR_TEMT: u8 = 0x40;
const IIR_NONE: u8 = 0x01;
const IIR_THRE: u8 = 0x02;
const IIR_RX: u8 = 0x04;
const IIR_FIFO: u8 = 0xc0;

/// Input bytes queued at most; more are dropped (a flood from the
/// terminal cannot grow the VMM's heap).
const MAX_INPUT: usize = 4096;
/// Output bytes kept at most before the VMM takes them.
const MAX_OUTPUT: usize = 64 * 1024;

/// One 16550A.
#[derive(Debug, Default)]
pub struct Uart {
    ier: u8,
    lcr: u8,
    mcr: u8,
    scr: u8,
    fcr: u8,
    dll: u8,
    dlm: u8,
    /// A THR-empty interrupt is pending (set when the transmitter
    /// empties with the interrupt enabled; cleared by reading IIR while
    /// it is the reason, or by the next write).
    thre_pending: bool,
    input: VecDeque<u8>,
    output: Vec<u8>,
    /// Bytes written in loopback mode come back as input.
    dropped: u64,
}

impl Uart {
    pub fn new() -> Uart {
        Uart::default()
    }

    /// A read of register `offset` (0..8).
    pub fn read(&mut self, offset: u16) -> u8 {
        match offset {
            DATA if self.lcr & LCR_DLAB != 0 => self.dll,
            DATA => self.input.pop_front().unwrap_or(0),
            IER if self.lcr & LCR_DLAB != 0 => self.dlm,
            IER => self.ier,
            IIR_FCR => {
                let fifo = if self.fcr & 1 != 0 { IIR_FIFO } else { 0 };
                let reason = self.reason();
                if reason == IIR_THRE {
                    self.thre_pending = false;
                }
                fifo | reason
            }
            LCR => self.lcr,
            MCR => self.mcr,
            LSR => {
                let dr = if self.input.is_empty() { 0 } else { LSR_DR };
                LSR_THRE | LSR_TEMT | dr
            }
            MSR => {
                if self.mcr & MCR_LOOP != 0 {
                    // DTR→DSR, RTS→CTS, OUT1→RI, OUT2→DCD.
                    let m = self.mcr;
                    (m & 0x2) << 3 | (m & 0x1) << 5 | (m & 0x4) << 4 | (m & 0x8) << 4
                } else {
                    // CTS, DSR and DCD: a terminal is always there.
                    0xb0
                }
            }
            SCR => self.scr,
            _ => 0xff,
        }
    }

    /// A write of `value` to register `offset` (0..8).
    pub fn write(&mut self, offset: u16, value: u8) {
        match offset {
            DATA if self.lcr & LCR_DLAB != 0 => self.dll = value,
            DATA => {
                if self.mcr & MCR_LOOP != 0 {
                    self.receive(&[value]);
                } else if self.output.len() < MAX_OUTPUT {
                    self.output.push(value);
                } else {
                    self.dropped += 1;
                }
                // The byte leaves at once: the transmitter is empty again.
                self.thre_pending = self.ier & IER_THRE != 0;
            }
            IER if self.lcr & LCR_DLAB != 0 => self.dlm = value,
            IER => {
                let was = self.ier;
                self.ier = value & 0x0f;
                // Enabling the THR-empty interrupt with the transmitter
                // empty raises it (the 8250 driver relies on this).
                if was & IER_THRE == 0 && self.ier & IER_THRE != 0 {
                    self.thre_pending = true;
                }
                if self.ier & IER_THRE == 0 {
                    self.thre_pending = false;
                }
            }
            IIR_FCR => {
                self.fcr = value & 0xc9;
                if value & 0x2 != 0 {
                    self.input.clear();
                }
            }
            LCR => self.lcr = value,
            MCR => self.mcr = value & 0x1f,
            SCR => self.scr = value,
            _ => {}
        }
    }

    /// Why the UART interrupts now (IIR's low bits).
    fn reason(&self) -> u8 {
        if self.ier & IER_RX != 0 && !self.input.is_empty() {
            IIR_RX
        } else if self.thre_pending {
            IIR_THRE
        } else {
            IIR_NONE
        }
    }

    /// The interrupt line: high while an enabled reason is pending (and
    /// OUT2, which gates it on a PC, is set).
    pub fn irq(&self) -> bool {
        self.mcr & 0x8 != 0 && self.reason() != IIR_NONE
    }

    /// Queues input for the guest (dropped beyond 4 KiB).
    pub fn receive(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.input.len() < MAX_INPUT {
                self.input.push_back(b);
            } else {
                self.dropped += 1;
            }
        }
    }

    /// What the guest wrote since the last call.
    pub fn take_output(&mut self) -> Vec<u8> {
        core::mem::take(&mut self.output)
    }

    /// Bytes dropped because a buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_linux_probes() {
        let mut u = Uart::new();
        u.write(SCR, 0xa5);
        assert_eq!(u.read(SCR), 0xa5);
        // Loopback check of the 8250 driver's autoconfig: RTS and OUT2
        // come back as CTS and DCD.
        u.write(MCR, MCR_LOOP | 0x0a);
        assert_eq!(u.read(MSR) & 0xf0, 0x90);
        u.write(MCR, 0);
        // FIFO: enabled, IIR says so in its top bits.
        u.write(IIR_FCR, 0xe7);
        assert_eq!(u.read(IIR_FCR) & 0xc0, 0xc0);
        // Divisor latch.
        u.write(LCR, LCR_DLAB);
        u.write(DATA, 1);
        u.write(IER, 0);
        assert_eq!(u.read(DATA), 1);
        u.write(LCR, 3);
        assert_eq!(u.read(LSR) & (LSR_THRE | LSR_TEMT), LSR_THRE | LSR_TEMT);
    }

    #[test]
    fn transmits_with_the_thre_interrupt() {
        let mut u = Uart::new();
        u.write(MCR, 0x8); // OUT2: the line reaches the PIC
        assert!(!u.irq());
        u.write(IER, IER_THRE);
        assert!(
            u.irq(),
            "enabling THRE with an empty transmitter interrupts"
        );
        assert_eq!(u.read(IIR_FCR) & 0xf, IIR_THRE);
        assert!(!u.irq(), "reading IIR clears it");
        u.write(DATA, b'h');
        assert!(u.irq());
        u.write(DATA, b'i');
        u.write(IER, 0);
        assert!(!u.irq());
        assert_eq!(u.take_output(), b"hi");
        assert!(u.take_output().is_empty());
    }

    #[test]
    fn receives_with_the_data_interrupt() {
        let mut u = Uart::new();
        u.write(MCR, 0x8);
        u.write(IER, IER_RX);
        assert!(!u.irq());
        u.receive(b"ls\n");
        assert!(u.irq());
        assert_eq!(u.read(IIR_FCR) & 0xf, IIR_RX);
        assert_eq!(u.read(LSR) & LSR_DR, LSR_DR);
        let got: Vec<u8> = (0..3).map(|_| u.read(DATA)).collect();
        assert_eq!(got, b"ls\n");
        assert_eq!(u.read(LSR) & LSR_DR, 0);
        assert!(!u.irq());
        // Overflow is dropped and counted.
        u.receive(&[0; MAX_INPUT + 10]);
        assert_eq!(u.dropped(), 10);
    }

    #[test]
    fn any_register_any_value() {
        let mut u = Uart::new();
        for off in 0..16 {
            for v in [0, 0x55, 0xaa, 0xff] {
                u.write(off, v);
                let _ = u.read(off);
            }
        }
    }
}
