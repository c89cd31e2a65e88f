//! Console output for components: [`print!`](crate::print!) and
//! [`println!`](crate::println!) format into a 256-byte buffer on the stack
//! and hand it to the kernel with `DebugWrite` whenever it fills up and at
//! the end, so a short line is one system call and nothing allocates.
//! Errors from `DebugWrite` are ignored: there is nowhere else to report
//! them.
//!
//! `DebugWrite` is a debugging aid until the LOG service exists; the
//! macros will then write to the component's LOG session instead.

use core::fmt;

use crate::syscall;

/// Bytes formatted before they are written out.
pub const BUFFER_SIZE: usize = 256;

/// A [`fmt::Write`] sink that buffers [`BUFFER_SIZE`] bytes and writes them
/// to the kernel console. Flushes when full, on [`DebugWriter::flush`] and
/// when dropped.
pub struct DebugWriter {
    buf: [u8; BUFFER_SIZE],
    len: usize,
}

impl DebugWriter {
    /// An empty writer.
    pub const fn new() -> Self {
        DebugWriter {
            buf: [0; BUFFER_SIZE],
            len: 0,
        }
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) {
        if self.len > 0 {
            let _ = syscall::debug_write(&self.buf[..self.len]);
            self.len = 0;
        }
    }
}

impl Default for DebugWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Write for DebugWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut bytes = s.as_bytes();
        if self.len == 0 && bytes.len() >= BUFFER_SIZE {
            // Too big to buffer and nothing to keep in order: write directly.
            let _ = syscall::debug_write(bytes);
            return Ok(());
        }
        while !bytes.is_empty() {
            let n = bytes.len().min(BUFFER_SIZE - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            if self.len == BUFFER_SIZE {
                self.flush();
            }
        }
        Ok(())
    }
}

impl Drop for DebugWriter {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Behind [`print!`](crate::print!): formats `args` and writes them out.
#[doc(hidden)]
pub fn _print(args: fmt::Arguments<'_>) {
    let mut out = DebugWriter::new();
    let _ = fmt::Write::write_fmt(&mut out, args);
}

/// Behind [`println!`](crate::println!): `args` and a newline, in one write
/// when they fit the buffer.
#[doc(hidden)]
pub fn _print_line(args: fmt::Arguments<'_>) {
    let mut out = DebugWriter::new();
    let _ = fmt::Write::write_fmt(&mut out, args);
    let _ = fmt::Write::write_str(&mut out, "\n");
}

/// Prints to the kernel console (like `std::print!`).
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::print::_print(::core::format_args!($($arg)*))
    };
}

/// Prints a line to the kernel console (like `std::println!`).
#[macro_export]
macro_rules! println {
    () => {
        $crate::print::_print(::core::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::print::_print_line(::core::format_args!($($arg)*))
    };
}
