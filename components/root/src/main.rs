//! root: the first user-level component. The kernel starts it with the
//! address of the boot-information page as its argument.
//!
//! Until the kernel hands out capabilities, root proves that user space
//! works: it greets, measures the null system call and checks that bad
//! arguments come back as the documented errors:
//!
//! ```text
//! root: hello from user space (arg=0x...)
//! root: null syscall min=N median=N ticks (rdtsc overhead M subtracted)
//! root: check <name>: ok                 (or: FAILED (got ...))
//! root: done
//! ```
//!
//! Null-call method (sel4bench-style): 100 warm-up calls, then 1000
//! samples of `t0 = rdtsc; null(); t1 = rdtsc`; the overhead of the timing
//! stub is the minimum of 1000 empty `rdtsc; rdtsc` pairs and is subtracted
//! from every sample. Under `-icount shift=0` a tick is one instruction.
//! The samples live in a heap vector, which also shows the runtime's heap
//! works.
//!
//! Until root gets a boot-information page, its argument word comes from
//! the kernel command line (`pecan.root-arg=N`) and selects a deliberate
//! fault after the checks, so tests can show that a faulting user thread is
//! stopped and reported while the kernel keeps running: 1 = write to an
//! unmapped page, 2 = invalid opcode.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec;

use rt::abi::{Error, Sys};
use rt::println;
use rt::syscall::{self, rdtsc};

rt::entry!(main);

const WARM_UP: usize = 100;
const SAMPLES: usize = 1000;

mod kernel_checks;

fn main(boot_info: u64) -> i32 {
    let info = read_boot_info(boot_info);
    let arg = info.map_or(0, fault_selector);
    println!("root: hello from user space (boot info at {boot_info:#x}, arg={arg:#x})");
    measure_null();
    let mut failed = run_checks();
    if let Some(info) = info {
        failed += kernel_checks::run(info);
    }
    if failed > 0 {
        println!("root: {failed} checks FAILED");
    }
    match arg {
        1 => {
            println!("root: deliberately writing to unmapped address 0xdead0000");
            // SAFETY: deliberately unsound: the page is unmapped, the write
            // faults and the kernel stops this thread.
            unsafe { core::ptr::write_volatile(0xdead_0000 as *mut u64, 1) };
        }
        2 => {
            println!("root: deliberately executing an invalid opcode");
            // SAFETY: deliberately raises #UD; the kernel stops this thread.
            unsafe { core::arch::asm!("ud2") };
        }
        _ => {}
    }
    println!("root: done");
    0
}

/// The boot information the kernel passed, if it looks right.
fn read_boot_info(addr: u64) -> Option<&'static rt::abi::bootinfo::BootInfo> {
    if addr != rt::abi::bootinfo::BOOT_INFO_ADDR {
        println!("root: started without boot information (rdi={addr:#x})");
        return None;
    }
    // SAFETY: the kernel maps the boot-information page read-only at
    // BOOT_INFO_ADDR for root's whole life; BootInfo is plain old data.
    let info = unsafe { &*(addr as *const rt::abi::bootinfo::BootInfo) };
    if info.magic != rt::abi::bootinfo::BOOT_INFO_MAGIC {
        println!("root: boot information has a bad magic number");
        return None;
    }
    Some(info)
}

/// The deliberate-fault selector `pecan.root-arg=N` from the command line
/// (0 if absent).
fn fault_selector(info: &rt::abi::bootinfo::BootInfo) -> u64 {
    info.cmdline()
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pecan.root-arg="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Times the null system call and prints min and median.
fn measure_null() {
    for _ in 0..WARM_UP {
        if let Err(e) = syscall::null() {
            println!("root: null syscall FAILED ({e:?})");
            return;
        }
    }
    // On the heap: it proves the allocator works and keeps 8 KB off the stack.
    let mut samples = vec![0u64; SAMPLES];
    let mut overhead = u64::MAX;
    for _ in 0..SAMPLES {
        let t0 = rdtsc();
        let t1 = rdtsc();
        overhead = overhead.min(t1.wrapping_sub(t0));
    }
    for sample in samples.iter_mut() {
        let t0 = rdtsc();
        let _ = syscall::null();
        let t1 = rdtsc();
        *sample = t1.wrapping_sub(t0).saturating_sub(overhead);
    }
    samples.sort_unstable();
    println!(
        "root: null syscall min={} median={} ticks (rdtsc overhead {overhead} subtracted)",
        samples[0],
        samples[SAMPLES / 2]
    );
}

/// Error paths of the system-call interface; returns how many failed.
fn run_checks() -> usize {
    let valid = b"checkbuf";
    let checks: [(&str, Result<(), Error>, Error); 4] = [
        (
            "debug-write-kernel-pointer",
            syscall::debug_write_raw(0xffff_8000_0000_0000, 8),
            Error::BadAddress,
        ),
        (
            "debug-write-unmapped-pointer",
            syscall::debug_write_raw(0x1000, 8),
            Error::BadAddress,
        ),
        (
            "debug-write-too-long",
            syscall::debug_write_raw(valid.as_ptr() as u64, 100_000),
            Error::InvalidArgument,
        ),
        ("unknown-syscall", unknown_syscall(), Error::UnknownSyscall),
    ];
    let mut failed = 0;
    for (name, got, want) in checks {
        if got == Err(want) {
            println!("root: check {name}: ok");
        } else {
            println!("root: check {name}: FAILED (got {got:?}, want Err({want:?}))");
            failed += 1;
        }
    }
    failed
}

/// System call number 9999, which does not exist.
fn unknown_syscall() -> Result<(), Error> {
    const NUMBER: u64 = 9999;
    debug_assert!(Sys::from_raw(NUMBER).is_none());
    // SAFETY: 9999 is no system call; the kernel must fail it with
    // `UnknownSyscall` without doing anything.
    let (err, _) = unsafe { syscall::raw_number(NUMBER, [0; 6]) };
    rt::abi::error::result_from_raw(err)
}
