//! root: the first user-level component. It owns every resource the kernel
//! hands out at boot and starts the other components.
//!
//! The kernel starts root with `rdi` = the address of the boot-information
//! page (`abi::bootinfo`). Root
//!
//! 1. greets, measures the null system call and checks that bad arguments
//!    come back as the documented errors ([`checks`]);
//! 2. checks the boot-information page ([`boot`]), runs smoke checks of the
//!    kernel's object and IPC calls ([`kernel_checks`]) and, if the command line
//!    says `pecan.root-fault=page-fault|invalid-opcode`, faults on purpose
//!    (tests of the kernel's handling of a thread without fault handler);
//! 3. takes over its free capability slots and untyped memory
//!    (`rt::resources`), starts init when the boot image has a config ROM
//!    (`interfaces::init`), else every component of
//!    `pecan.start=NAME[:ARG][@MIB][+own][+serve],...`, each in its own
//!    address space and capability space (`rt::spawn`) with the authority
//!    its markers grant, and supervises them as their fault handler until
//!    every child that does not serve (`+serve`) has exited or faulted,
//!    then deletes the children's threads ([`children`]);
//! 4. returns, which ends its thread; with no thread left the kernel powers
//!    the machine off. A run that failed — root's exit code is not 0: a
//!    component of the list or init could not be started, init did not
//!    exit with 0 ([`children::exit`]) — root ends itself with the failure
//!    status ([`power`]), so `cargo xtask run` and the tests see it.
//!
//! ```text
//! root: hello from user space (boot info at 0x7ffff0000000)
//! root: null syscall min=N median=N ticks (rdtsc overhead M subtracted)
//! root: check <name>: ok                 (or: FAILED (...)), system calls, then kernel objects
//! root: ipc call+reply round trip min=N median=N ticks (same address space, 0 words)
//! root: N checks, F failed
//! root: N KiB of untyped memory in N capabilities (N device capabilities unused), N free slots
//! root: started hello (index 1, entry 0x201120)
//! root: refusing NAME: <reason>          (not in the boot image, malformed ELF, bad entry)
//! root: child hello exited with code 0
//! root: child NAME faulted: page fault at 0x.. (ip 0x..)
//! root: child NAME faulted: exception vector V at ip 0x..
//! root: all children finished
//! root: done
//! root: the run failed (exit code N): powering off with the failure status
//! ```
//!
//! Exit codes: 0 normally, 2 without a valid boot-information page, and
//! those of [`children::exit`].
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

mod boot;
mod checks;
mod children;
mod kernel_checks;

use rt::println;

rt::entry!(main);

/// Root's exit code when the boot-information page is missing or invalid.
const EXIT_NO_BOOT_INFO: i32 = 2;

/// Root's exit code is the run's status: not 0 makes the kernel power
/// off with the failure status (`kernel/src/exit.rs`, `note_end`).
fn main(arg: u64) -> i32 {
    let code = run(arg);
    if code != 0 {
        println!("root: the run failed (exit code {code})");
    }
    code
}

/// Everything root does (the module doc); its exit code.
fn run(arg: u64) -> i32 {
    println!("root: hello from user space (boot info at {arg:#x})");
    checks::measure_null();
    let mut c = rt::check::Checks::unnumbered();
    checks::run_checks(&mut c);
    let info = boot::info(arg);
    if let Ok(info) = info {
        kernel_checks::run(info, &mut c);
    }
    c.finish();
    let info = match info {
        Ok(info) => info,
        Err(e) => {
            println!("root: {e}");
            return EXIT_NO_BOOT_INFO;
        }
    };
    checks::deliberate_fault(info.cmdline());
    let code = children::run(info);
    println!("root: done");
    code
}
