//! The kernel panic handler: report with file:line and stop the machine with
//! a failure status. A panic while panicking stops at once.

use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::exit::{exit, ExitCode};
use crate::kprintln;

static PANICKING: AtomicBool = AtomicBool::new(false);

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    crate::arch::cpu::disable_interrupts();
    if PANICKING.swap(true, Ordering::SeqCst) {
        exit(ExitCode::Failure);
    }
    crate::console::force_unlock();
    match info.location() {
        Some(at) => kprintln!(
            "\n==== KERNEL PANIC at {}:{}:{} ====",
            at.file(),
            at.line(),
            at.column()
        ),
        None => kprintln!("\n==== KERNEL PANIC ===="),
    }
    kprintln!("{}", info.message());
    exit(ExitCode::Failure)
}
