//! The legacy 8254 PIT and 8259 PIC: used to calibrate the LAPIC timer, as
//! an interrupt source for the I/O APIC self-test, and to be silenced.

use super::cpu::{inb, outb};
use super::trap::VECTOR_PIC_BASE;

const PIT_CHANNEL0: u16 = 0x40;
const PIT_CHANNEL2: u16 = 0x42;
const PIT_COMMAND: u16 = 0x43;
const PORT_B: u16 = 0x61;
const PIT_HZ: u64 = 1_193_182;

/// Runs `start` and then waits 10 ms measured by PIT channel 2 (the speaker
/// channel, whose output can be polled without interrupts). Returns `None`
/// if the PIT does not seem to count (no PIT, or it never fires).
pub fn measure_10ms(start: impl FnOnce()) -> Option<()> {
    let count = (PIT_HZ / 100) as u16;
    // SAFETY: ports 0x42/0x43/0x61 are the PIT channel 2 and its gate; the
    // speaker output is kept off. The kernel owns these legacy devices.
    unsafe {
        let gate = inb(PORT_B);
        outb(PORT_B, (gate & !0x02) | 0x01);
        outb(PIT_COMMAND, 0b1011_0000); // channel 2, lo/hi byte, mode 0
        outb(PIT_CHANNEL2, count as u8);
        outb(PIT_CHANNEL2, (count >> 8) as u8);
        // A rising gate edge (re)starts the count.
        let gate = inb(PORT_B) & !0x01;
        outb(PORT_B, gate);
        outb(PORT_B, gate | 0x01);
    }
    start();
    // Bounded: a missing PIT reads 0xff (output "high") or never changes.
    for _ in 0..50_000_000u64 {
        // SAFETY: reading port B has no side effects.
        if unsafe { inb(PORT_B) } & 0x20 != 0 {
            return Some(());
        }
    }
    None
}

/// Starts PIT channel 0, whose output is ISA IRQ 0, as a rate generator
/// (mode 2): one interrupt edge about `hz` times a second (19..=596_591).
pub fn start_channel0(hz: u32) {
    let divisor = (PIT_HZ / u64::from(hz.max(1))).clamp(2, 0xffff) as u16;
    // SAFETY: ports 0x40/0x43 are PIT channel 0 and the command register;
    // channel 0 is otherwise unused by the kernel.
    unsafe {
        outb(PIT_COMMAND, 0b0011_0100); // channel 0, lo/hi byte, mode 2
        outb(PIT_CHANNEL0, divisor as u8);
        outb(PIT_CHANNEL0, (divisor >> 8) as u8);
    }
}

/// Reprograms PIT channel 0 to mode 0 (interrupt on terminal count): its
/// output, ISA IRQ 0, drops now, rises once after `ticks` (at 1.193182 MHz)
/// and then stays high with the channel idle. This stops the periodic mode
/// and doubles as a one-shot level source.
pub fn channel0_one_shot(ticks: u16) {
    let ticks = ticks.max(1);
    // SAFETY: as in start_channel0.
    unsafe {
        outb(PIT_COMMAND, 0b0011_0000); // channel 0, lo/hi byte, mode 0
        outb(PIT_CHANNEL0, ticks as u8);
        outb(PIT_CHANNEL0, (ticks >> 8) as u8);
    }
}

/// Remaps the 8259 PICs away from the exception vectors and masks them: the
/// kernel uses the LAPIC and IOAPIC, but a masked PIC can still raise a
/// spurious IRQ 7/15, which must not look like a CPU exception.
pub fn disable_pic() {
    // SAFETY: the standard 8259 initialisation sequence on the PIC ports.
    unsafe {
        outb(0x20, 0x11);
        outb(0xa0, 0x11);
        outb(0x21, VECTOR_PIC_BASE as u8);
        outb(0xa1, VECTOR_PIC_BASE as u8 + 8);
        outb(0x21, 4);
        outb(0xa1, 2);
        outb(0x21, 0x01);
        outb(0xa1, 0x01);
        outb(0x21, 0xff);
        outb(0xa1, 0xff);
    }
}
