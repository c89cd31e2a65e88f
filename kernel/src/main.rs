//! The Pecan microkernel.
//!
//! Boot order matters: descriptor tables first (so every later fault is
//! reported, not a triple fault), then the boot information (copied before
//! the allocator can reuse its memory), memory, ACPI, interrupts, and
//! finally the other CPUs (`smp.rs`).
//! The kernel never panics on bad input from user space or boot modules;
//! a panic means a kernel bug and stops the machine with a report.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

/// A call into the trace buffer (`trace.rs`), e.g. `trace!(run(id))`:
/// `crate::trace::run(id)` in a kernel built with the `trace` feature,
/// nothing at all (not even the arguments) without it.
#[cfg(feature = "trace")]
macro_rules! trace {
    ($($call:tt)*) => {
        $crate::trace::$($call)*
    };
}
#[cfg(not(feature = "trace"))]
macro_rules! trace {
    ($($call:tt)*) => {};
}

mod acpi;
mod arch;
mod captable;
mod console;
mod exit;
mod ipc;
mod irq;
mod loader;
mod mm;
mod object;
mod panic;
mod pvh;
mod reply;
mod selftest;
mod smp;
mod static_cell;
mod syscall;
mod thread;
mod time;
mod token;
#[cfg(feature = "trace")]
mod trace;
mod uaccess;
mod untyped;
mod vcpu;
mod vspace;

use arch::{cpu, lapic, pit};
use exit::{exit, ExitCode};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Entered from `boot.s` in 64-bit mode on the boot stack.
#[unsafe(no_mangle)]
extern "C" fn kernel_entry(start_info_phys: u64) -> ! {
    console::init();
    let boot_cpu = arch::init_boot_cpu();

    let boot = match pvh::parse(start_info_phys) {
        Ok(boot) => boot,
        Err(e) => fatal(format_args!("boot information: {e}")),
    };
    if let Err(e) = mm::init(&boot) {
        fatal(format_args!("memory: {e}"));
    }
    // `pecan.svm=off` leaves SVM off (tests the machine without it).
    let svm = arch::svm::init(formats::cmdline::value(boot.cmdline(), "pecan.svm") != Some("off"));
    let platform = match acpi::init(boot.rsdp) {
        Ok(p) => Some(p),
        Err(e) => {
            kprintln!("warning: {e}; assuming one CPU and no PCI");
            None
        }
    };
    let cpus = platform.map_or(1, |p| p.cpu_count());
    if let Some(p) = &platform {
        irq::set_pci_window(p.ecam_regions());
    }
    let banner_tsc = cpu::rdtsc();
    kprintln!(
        "Pecan {VERSION} microkernel (x86_64): {} MiB usable memory, {cpus} CPU{}",
        boot.memory_map.usable_bytes() >> 20,
        if cpus == 1 { "" } else { "s" }
    );
    kprintln!("boot: banner reached at TSC {banner_tsc} (under -icount shift=0: instructions since reset)");
    kprintln!("fpu: {}", boot_cpu.fpu);
    kprintln!("cpu protections: {}", boot_cpu.protections);
    kprintln!("virtualization: {svm}");
    report_machine(&boot, platform);

    let cmdline = boot.cmdline();
    if let Some(name) = formats::cmdline::value(cmdline, "pecan.selftest") {
        if !selftest::deliberate_failure(name) {
            kprintln!(
                "error: unknown pecan.selftest={name}; known: {}",
                selftest::Known
            );
            exit(ExitCode::Failure);
        }
    }

    match formats::cmdline::value(cmdline, "pecan.fastpath") {
        None | Some("on") => {}
        Some("off") => {
            arch::percpu::disable_fast_path();
            kprintln!("ipc: fast path off (pecan.fastpath=off): every call takes the general path");
        }
        Some(other) => {
            kprintln!("error: unknown pecan.fastpath={other}; known: on, off");
            exit(ExitCode::Failure);
        }
    }

    #[cfg(feature = "trace")]
    {
        if crate::trace::init(cmdline).is_err() {
            kprintln!("error: pecan.trace takes a number of seconds");
            exit(ExitCode::Failure);
        }
        // The records are written on the general path (`trace.rs`).
        arch::percpu::disable_fast_path();
        kprintln!("ipc: fast path off (trace kernel): every call takes the general path");
    }

    if formats::cmdline::value(cmdline, "pecan.test-compat32") == Some("1") {
        arch::allow_compat_mode();
        kprintln!("warning: pecan.test-compat32=1: user code may enter 32-bit compatibility mode (for the hostile test)");
    }

    pit::disable_pic();
    if let Err(e) = lapic::init() {
        fatal(format_args!("local APIC: {e}"));
    }
    match arch::ioapic::init(platform.and_then(|p| p.madt.as_ref())) {
        Ok(found) => kprintln!("ioapic: {found}"),
        Err(e) => kprintln!("warning: ioapic: {e}; no device interrupts"),
    }
    let per_ms = lapic::calibrate_timer();
    lapic::start_periodic_timer(time::HZ);
    cpu::enable_interrupts();
    kprintln!(
        "timer: LAPIC {} kHz (after /16 divider), {} Hz tick",
        per_ms,
        time::HZ
    );

    run_self_checks(&boot);
    let online = smp::start_application_processors(platform.and_then(|p| p.madt.as_ref()));
    arch::set_cpu_count(online);
    trace!(start(online));

    // From here on the boot CPU is the kernel: interrupts masked (the
    // handlers of the idle loop take the token themselves), the lock held
    // (taken by `start_application_processors` with several CPUs).
    cpu::disable_interrupts();
    // SAFETY: the lock is held (or one CPU is online), interrupts are
    // masked, and no token was made before.
    let mut k = unsafe { token::Kernel::enter() };
    match loader::load_root(&mut k, &boot, arch::cpu_count()) {
        Ok(root) => {
            kprintln!("kernel: starting root");
            thread::make_runnable(&mut k, root);
            thread::schedule(k)
        }
        Err(loader::LoadError::NoBootImage) => {
            kprintln!("nothing to run (no boot image): powering off");
            exit(ExitCode::Success)
        }
        Err(e) => fatal(format_args!("cannot start root: {e}")),
    }
}

fn report_machine(boot: &pvh::BootInfo, platform: Option<&acpi::Platform>) {
    kprintln!("memory map:");
    for (range, kind) in boot.memory_map.regions() {
        kprintln!("  [{:#012x}..{:#012x}) {:?}", range.start, range.end, kind);
    }
    let kernel = mm::kernel_image();
    kprintln!(
        "kernel image: [{:#x}..{:#x}), {} KiB",
        kernel.start,
        kernel.end,
        (kernel.end - kernel.start) >> 10
    );
    if !boot.cmdline().is_empty() {
        kprintln!("command line: {}", boot.cmdline());
    }
    if boot.cmdline_truncated {
        kprintln!("warning: command line truncated");
    }
    for (i, m) in boot.modules().iter().enumerate() {
        kprintln!("boot module {i}: [{:#x}..{:#x})", m.start, m.end);
    }
    if boot.modules_dropped > 0 {
        kprintln!(
            "warning: {} boot modules ignored (bad address or too many)",
            boot.modules_dropped
        );
    }
    let Some(platform) = platform else { return };
    match platform.rsdp {
        0 => kprintln!("acpi: RSDP found by searching the BIOS areas"),
        rsdp => kprintln!("acpi: RSDP at {rsdp:#x} (from the boot loader)"),
    }
    if let Some(madt) = &platform.madt {
        for c in madt.cpus() {
            kprintln!(
                "cpu: APIC id {} uid {}{}",
                c.apic_id,
                c.processor_uid,
                if c.enabled { "" } else { " (disabled)" }
            );
        }
        for io in madt.ioapics() {
            kprintln!(
                "ioapic: id {} at {:#x}, GSI base {}",
                io.id,
                io.address,
                io.gsi_base
            );
        }
    }
    for e in platform.ecam_regions() {
        kprintln!(
            "pci: ECAM segment {} buses {}..={} at {:#x}",
            e.segment,
            e.bus_start,
            e.bus_end,
            e.base
        );
    }
}

fn run_self_checks(boot: &pvh::BootInfo) {
    type Check<'a> = &'a dyn Fn() -> Result<(), selftest::CheckFailed>;
    let checks: [(&str, Check); 4] = [
        ("memory map", &|| selftest::check_memory_map(boot)),
        ("frame allocator", &selftest::check_frames),
        ("kernel mappings", &selftest::check_kernel_mappings),
        ("timer interrupts", &|| selftest::check_timer(5)),
    ];
    for (name, check) in checks {
        match check() {
            Ok(()) => kprintln!("self-check {name}: ok"),
            Err(selftest::CheckFailed(why)) => {
                kprintln!("self-check {name}: FAILED: {why}");
                exit(ExitCode::Failure);
            }
        }
    }
    let free = mm::FRAMES.lock().as_ref().map_or(0, |f| f.free_bytes());
    kprintln!(
        "self-checks passed ({} MiB free, {} timer ticks)",
        free >> 20,
        time::ticks()
    );
}

/// Stops the machine after a boot error that leaves nothing to continue with.
fn fatal(args: core::fmt::Arguments) -> ! {
    kprintln!("==== FATAL BOOT ERROR: {args} ====");
    exit(ExitCode::Failure)
}
