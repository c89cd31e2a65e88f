//! The panic handler every component gets: prints
//! `panic in <component>: <message> at <file>:<line>` on the kernel console
//! and ends the thread with exit code [`crate::PANIC_EXIT_CODE`]. A panic
//! while printing a panic (a `Display` impl that panics) ends the thread at
//! once.

use core::fmt::Write;
use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::print::DebugWriter;
use crate::{component, syscall, PANIC_EXIT_CODE};

static PANICKING: AtomicBool = AtomicBool::new(false);

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    if PANICKING.swap(true, Ordering::AcqRel) {
        syscall::thread_exit(PANIC_EXIT_CODE);
    }
    let mut out = DebugWriter::new();
    let _ = write!(out, "panic in {}: {}", component().name, info.message());
    if let Some(at) = info.location() {
        let _ = write!(out, " at {}:{}", at.file(), at.line());
    }
    let _ = out.write_str("\n");
    out.flush();
    syscall::thread_exit(PANIC_EXIT_CODE)
}
