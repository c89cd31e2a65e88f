//! Kernel console: `kprint!`/`kprintln!` to the serial port.
//!
//! Output is serialised by a spin lock so lines from different CPUs do not
//! interleave. The panic and exception reporters use [`force_unlock`] first:
//! a fault raised while the lock was held must still be able to report.

use core::fmt::{self, Write};
use spin::Mutex;

use crate::arch::serial;

struct Serial;

impl Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for byte in s.bytes() {
            if byte == b'\n' {
                serial::write_byte(b'\r');
            }
            serial::write_byte(byte);
        }
        Ok(())
    }
}

static CONSOLE: Mutex<Serial> = Mutex::new(Serial);

pub fn init() {
    serial::init();
}

#[doc(hidden)]
pub fn print_fmt(args: fmt::Arguments) {
    // Formatting errors cannot happen with Serial; ignoring is correct.
    let _ = CONSOLE.lock().write_fmt(args);
}

/// Writes raw bytes (e.g. from a user thread's `DebugWrite`), translating
/// `\n` to `\r\n` like all console output.
pub fn write_bytes(bytes: &[u8]) {
    let _guard = CONSOLE.lock();
    for &byte in bytes {
        if byte == b'\n' {
            serial::write_byte(b'\r');
        }
        serial::write_byte(byte);
    }
}

/// Releases the console lock regardless of owner. Only for the panic and
/// fatal-exception paths, which never return to the interrupted code.
pub fn force_unlock() {
    // SAFETY: called only on paths that never resume the interrupted holder,
    // so no two writers will use the port concurrently after this point
    // except other CPUs, whose output may interleave (acceptable when dying).
    unsafe { CONSOLE.force_unlock() }
}

#[macro_export]
macro_rules! kprint {
    ($($arg:tt)*) => { $crate::console::print_fmt(format_args!($($arg)*)) };
}

#[macro_export]
macro_rules! kprintln {
    () => { $crate::kprint!("\n") };
    ($($arg:tt)*) => { $crate::console::print_fmt(format_args!("{}\n", format_args!($($arg)*))) };
}
