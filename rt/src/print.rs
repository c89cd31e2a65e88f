//! Console output for components: [`print!`](crate::print!) and
//! [`println!`](crate::println!) format into a 256-byte buffer on the stack
//! and hand it to the kernel with `DebugWrite` whenever it fills up and at
//! the end, so a short line is one system call and nothing allocates.
//! Errors from `DebugWrite` are ignored: there is nowhere else to report
//! them.
//!
//! **The console.** When the component's scenario routes a `Console`
//! session (`rt::session::log::Console`: the LOG protocol, served by a
//! terminal), the same bytes also go there, line by line: the runtime
//! opens the session into `interfaces::child::CONSOLE` at the first
//! printed line (init refuses an unrouted `Console` without a word), so
//! a component's output shows in its terminal with no change to its code,
//! and the kernel console keeps every line (tests and `--headless` read
//! it). A console that fails is given up (the lines still reach the
//! kernel console).

use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

use crate::syscall;

/// The console session's state.
static CONSOLE: AtomicU8 = AtomicU8::new(UNTRIED);
const UNTRIED: u8 = 0;
const OPENING: u8 = 1;
const OPEN: u8 = 2;
const NONE: u8 = 3;

/// The component's console session, once it is open (after its first
/// printed line, when its scenario routes `Console`): for input
/// (`Session::input_notifier`, `Session::read`).
pub fn console() -> Option<crate::session::Session<crate::session::log::Log>> {
    (CONSOLE.load(Ordering::Acquire) == OPEN)
        .then(|| crate::session::Session::from_cap(abi::caddr::own(interfaces::child::CONSOLE)))
}

/// Sends `bytes` to the console, if there is one: each complete line
/// ends with the LOG protocol's `END`, a part of a line (a full buffer)
/// goes without it.
fn to_console(bytes: &[u8]) {
    use crate::session::log::{Console, Log};
    use crate::session::Session;
    let state = CONSOLE.load(Ordering::Acquire);
    if state == UNTRIED
        && CONSOLE
            .compare_exchange(UNTRIED, OPENING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        let opened = crate::session::open::<Console>(interfaces::child::CONSOLE).is_ok();
        CONSOLE.store(if opened { OPEN } else { NONE }, Ordering::Release);
    }
    if CONSOLE.load(Ordering::Acquire) != OPEN {
        return;
    }
    let console: Session<Log> = Session::from_cap(abi::caddr::own(interfaces::child::CONSOLE));
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let (text, end) = match line.strip_suffix(b"\n") {
            Some(t) => (t, true),
            None => (line, false),
        };
        let mut parts = text.chunks(interfaces::session::NAME_BYTES).peekable();
        let ok = if parts.peek().is_none() {
            !end || console.write_part(&[], true).is_ok()
        } else {
            let mut ok = true;
            while let Some(part) = parts.next() {
                let last = end && parts.peek().is_none();
                if console.write_part(part, last).is_err() {
                    ok = false;
                    break;
                }
            }
            ok
        };
        if !ok {
            CONSOLE.store(NONE, Ordering::Release);
            return;
        }
    }
}

/// One line told two ways: `kernel` to the kernel console only,
/// `console` to the console only (if there is one). For a component that
/// relays other programs' output — the VMM its guest's console lines:
/// `[vm1] text` in the kernel log, where every component's lines mix,
/// and `text` in the terminal, whose label already names the VMM.
pub fn line_apart(kernel: &str, console: &str) {
    with_newline(kernel.as_bytes(), |b| {
        let _ = syscall::debug_write(b);
    });
    with_newline(console.as_bytes(), to_console);
}

/// A part of a line, to the console only (if there is one): it shows
/// when the line ends — or, at a terminal, at once if this component
/// reads its input (a prompt before what is typed).
pub fn console_part(text: &str) {
    to_console(text.as_bytes());
}

/// Hands `line` and a newline to `write`: in one piece when they fit
/// [`BUFFER_SIZE`], else in two.
fn with_newline(line: &[u8], mut write: impl FnMut(&[u8])) {
    let mut buf = [0u8; BUFFER_SIZE];
    if line.len() < BUFFER_SIZE {
        buf[..line.len()].copy_from_slice(line);
        buf[line.len()] = b'\n';
        write(&buf[..=line.len()]);
    } else {
        write(line);
        write(b"\n");
    }
}

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
            to_console(&self.buf[..self.len]);
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
            to_console(bytes);
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
