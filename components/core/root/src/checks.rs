//! Root's checks of the system-call interface, run before anything else:
//! the null-call measurement, error paths that must come back as the
//! documented errors, and the deliberate faults tests ask for.
//!
//! Null-call method (sel4bench-style): 100 warm-up calls, then 1000
//! samples of `t0 = rdtsc; null(); t1 = rdtsc`; the overhead of the timing
//! stub is the minimum of 1000 empty `rdtsc; rdtsc` pairs and is subtracted
//! from every sample. Under `-icount shift=0` a tick is one instruction.
//! The samples live in a heap vector, which also shows the runtime's heap
//! works.

use alloc::vec;

use rt::abi::{Error, Sys};
use rt::check::Checks;
use rt::println;
use rt::syscall::{self, rdtsc};

const WARM_UP: usize = 100;
const SAMPLES: usize = 1000;

/// The command-line key that makes root fault on purpose.
pub const FAULT_KEY: &str = "pecan.root-fault";

/// Times the null system call and prints min and median.
pub fn measure_null() {
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

/// Error paths of the system-call interface, counted in `c`.
pub fn run_checks(c: &mut Checks) {
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
    for (name, got, want) in checks {
        c.result(name, got, Err(want));
    }
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

/// The deliberate fault `pecan.root-fault=` selects, if any: root has no
/// fault handler, so the kernel reports the fault and stops root, which
/// shows that a faulting user thread cannot take the kernel down.
/// `page-fault` writes to the unmapped address 0xdead0000,
/// `invalid-opcode` executes `ud2`; an unknown value is reported and
/// ignored.
pub fn deliberate_fault(cmdline: &str) {
    match formats::cmdline::value(cmdline, FAULT_KEY) {
        None => {}
        Some("page-fault") => {
            println!("root: deliberately writing to unmapped address 0xdead0000");
            // SAFETY: deliberately unsound: the page is unmapped, the write
            // faults and the kernel stops this thread.
            unsafe { core::ptr::write_volatile(0xdead_0000 as *mut u64, 1) };
        }
        Some("invalid-opcode") => {
            println!("root: deliberately executing an invalid opcode");
            // SAFETY: deliberately raises #UD; the kernel stops this thread.
            unsafe { core::arch::asm!("ud2") };
        }
        Some(other) => {
            println!("root: unknown {FAULT_KEY}={other}; known: page-fault, invalid-opcode")
        }
    }
}
