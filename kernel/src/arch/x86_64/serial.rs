//! 16550 UART on COM1 (port 0x3f8): the kernel console.
//!
//! Output only, polled. Under QEMU the transmitter is always ready, on real
//! hardware the wait loop is bounded so a missing UART cannot hang the kernel.

use super::cpu::{inb, outb};

const COM1: u16 = 0x3f8;
const DATA: u16 = 0;
const INTERRUPT_ENABLE: u16 = 1;
const FIFO_CONTROL: u16 = 2;
const LINE_CONTROL: u16 = 3;
const MODEM_CONTROL: u16 = 4;
const LINE_STATUS: u16 = 5;
const LINE_STATUS_THR_EMPTY: u8 = 1 << 5;

pub fn init() {
    // SAFETY: COM1 is the kernel's console UART; this is its documented
    // initialisation sequence (115200 baud, 8N1, FIFOs on, no interrupts).
    unsafe {
        outb(COM1 + INTERRUPT_ENABLE, 0x00);
        outb(COM1 + LINE_CONTROL, 0x80); // DLAB: next two writes set the divisor
        outb(COM1 + DATA, 0x01);
        outb(COM1 + INTERRUPT_ENABLE, 0x00);
        outb(COM1 + LINE_CONTROL, 0x03);
        outb(COM1 + FIFO_CONTROL, 0xc7);
        outb(COM1 + MODEM_CONTROL, 0x03);
    }
}

pub fn write_byte(byte: u8) {
    for _ in 0..100_000 {
        // SAFETY: reading the line status register has no side effects.
        if unsafe { inb(COM1 + LINE_STATUS) } & LINE_STATUS_THR_EMPTY != 0 {
            break;
        }
        core::hint::spin_loop();
    }
    // SAFETY: writing the data register transmits one byte.
    unsafe { outb(COM1 + DATA, byte) }
}
