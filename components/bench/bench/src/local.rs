//! Benchmarks timed within one thread: the null system call and the CPU
//! and memory kernels of `bench::kernels`.
//!
//! The memory kernels work on 8 MiB regions of 2 MiB frames from the
//! component's own untyped memory, mapped once at [`MEMORY_VA`] on first
//! use: a source and a destination (write-back) and one mapped
//! `Cache::Uncached`. Each sample is one pass over a region, reported as
//! bytes per tick (`bench::throughput`).
//!
//! `bench::measure` runs `bench::WARM_UP` (100) unrecorded passes first:
//! 800 MiB per kernel here, minutes of emulation for the bytewise copy,
//! without changing a figure under icount (caches are not modelled, and
//! the regions are mapped up front, so no first touch faults). The memory
//! kernels therefore take [`MEMORY_SAMPLES`] samples after
//! [`MEMORY_WARM_UP`] unrecorded pass, timed exactly as `bench::measure`
//! times them ([`measure_passes`]).
//!
//! Under QEMU icount every instruction is one tick and a `rep movs`/`rep
//! stos` one tick per iteration. The runtime's `memcpy` and `memset`
//! (`memops`, linked in place of `compiler_builtins`' `rep movsq`/`rep
//! stosq` ones, which approach 8 bytes per tick) move these 8 MiB with AVX:
//! 1024 bytes per loop of 66 instructions (copy) or 34 (fill), about 15.5
//! and 30 bytes per tick.

use alloc::vec;
use alloc::vec::Vec;

use bench::catalog::Bench;
use bench::kernels;
use bench::{now, Unit, SAMPLES};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::ObjectType;
use rt::syscall;

use crate::env::{failed, LARGE_PAGE, MEMORY_VA, RW};
use crate::{Ctx, Failure};

/// Bytes per memory region and pass.
pub const REGION: usize = 8 << 20;
/// Samples of each memory kernel.
pub const MEMORY_SAMPLES: usize = 10;
/// Unrecorded passes before them.
pub const MEMORY_WARM_UP: usize = 1;
/// Iterations of the bogomips loop per sample.
pub const BOGOMIPS_ITERATIONS: u64 = 1000;

const SOURCE: u64 = MEMORY_VA;
const DESTINATION: u64 = MEMORY_VA + REGION as u64;
const UNCACHED: u64 = MEMORY_VA + 2 * REGION as u64;
const FRAMES_PER_REGION: u64 = REGION as u64 / LARGE_PAGE;

/// Which regions are mapped.
#[derive(Default)]
pub struct Regions {
    cached: bool,
    uncached: bool,
}

/// `null-syscall`: `Null`, timed around the call.
pub fn null_syscall(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    // Checked once here, so that the timed calls carry no check.
    syscall::null().map_err(failed("Null"))?;
    let mut samples = vec![0; SAMPLES];
    bench::measure(&mut samples, ctx.overhead, || {
        let _ = syscall::null();
    });
    ctx.report(
        b,
        "Null system call (syscall, dispatch, sysret), round trip",
        Unit::Ticks,
        &samples,
    )
}

/// `bogomips`: ticks per [`BOGOMIPS_ITERATIONS`] of the decrement loop.
pub fn bogomips(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    let mut samples = vec![0; SAMPLES];
    bench::measure(&mut samples, ctx.overhead, || {
        kernels::bogomips(BOGOMIPS_ITERATIONS)
    });
    ctx.report(b, b.what, Unit::Ticks, &samples)
}

/// Like `bench::measure` with `warm_up` unrecorded runs; returns the
/// samples as throughput of `bytes` per run.
fn measure_passes(overhead: u64, warm_up: usize, bytes: usize, mut op: impl FnMut()) -> Vec<u64> {
    for _ in 0..warm_up {
        op();
    }
    let mut samples = vec![0; MEMORY_SAMPLES];
    for s in samples.iter_mut() {
        let t0 = now();
        op();
        let t1 = now();
        let ticks = t1.wrapping_sub(t0).saturating_sub(overhead);
        *s = bench::throughput(bytes as u64, ticks);
    }
    samples
}

/// The write-back source and destination regions.
fn cached(ctx: &mut Ctx) -> Result<(&mut [u8], &mut [u8]), Failure> {
    let regions = ctx.memory.get_or_insert_with(Regions::default);
    if !regions.cached {
        ctx.env
            .map_frames(ObjectType::Frame2M, SOURCE, 2 * FRAMES_PER_REGION, RW)?;
        regions.cached = true;
    }
    // SAFETY: both regions are mapped writable (above, or on an earlier
    // call) for the rest of the run, hold fresh (zeroed) frames, do not
    // overlap and are reached only through these slices, which borrow
    // `ctx` mutably: no two sets of them live at once.
    Ok(unsafe {
        (
            core::slice::from_raw_parts_mut(SOURCE as *mut u8, REGION),
            core::slice::from_raw_parts_mut(DESTINATION as *mut u8, REGION),
        )
    })
}

/// The uncached region's base.
fn uncached(ctx: &mut Ctx) -> Result<*mut u64, Failure> {
    let regions = ctx.memory.get_or_insert_with(Regions::default);
    if !regions.uncached {
        let attr = MapAttr {
            cache: Cache::Uncached,
            ..RW
        };
        ctx.env
            .map_frames(ObjectType::Frame2M, UNCACHED, FRAMES_PER_REGION, attr)?;
        regions.uncached = true;
    }
    Ok(UNCACHED as *mut u64)
}

/// Whether `region` starts and ends with `value`.
fn check(region: &[u8], value: u8, what: &'static str) -> Result<(), Failure> {
    match (region.first(), region.last()) {
        (Some(&a), Some(&z)) if a == value && z == value => Ok(()),
        _ => Err(Failure::WrongData { what }),
    }
}

/// A memory kernel's report.
fn report(ctx: &mut Ctx, b: &Bench, how: &str, samples: &[u64]) -> Result<(), Failure> {
    let what = alloc::format!(
        "{how}, {} MiB per pass, {} passes after {} unrecorded, bytes/tick",
        REGION >> 20,
        MEMORY_SAMPLES,
        MEMORY_WARM_UP
    );
    ctx.report(b, &what, Unit::BytesPerTick, samples)
}

/// `memcpy-runtime`.
pub fn memcpy_runtime(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    copy(
        ctx,
        b,
        kernels::copy_runtime,
        "memcpy, the runtime's (memops: from 2 KiB on, AVX loops of 16 ymm loads and 16 \
         aligned stores, twice per 1024 bytes)",
    )
}

/// `memcpy-bytewise`.
pub fn memcpy_bytewise(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    copy(
        ctx,
        b,
        kernels::copy_bytewise,
        "memcpy one byte at a time (volatile byte load and store)",
    )
}

/// A copy benchmark: `kernel` copies the source region to the destination
/// (checked to arrive).
fn copy(ctx: &mut Ctx, b: &Bench, kernel: fn(&mut [u8], &[u8]), how: &str) -> Result<(), Failure> {
    let overhead = ctx.overhead;
    let (src, dst) = cached(ctx)?;
    let pattern = 0x5a;
    kernels::set_runtime(src, pattern);
    kernels::set_runtime(dst, 0);
    let samples = measure_passes(overhead, MEMORY_WARM_UP, REGION, || kernel(dst, src));
    check(dst, pattern, b.name)?;
    report(ctx, b, how, &samples)
}

/// `memset-runtime`.
pub fn memset_runtime(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    let overhead = ctx.overhead;
    let (_, dst) = cached(ctx)?;
    let samples = measure_passes(overhead, MEMORY_WARM_UP, REGION, || {
        kernels::set_runtime(dst, 0x3c)
    });
    check(dst, 0x3c, "memset-runtime")?;
    report(
        ctx,
        b,
        "memset, the runtime's (memops: from 2 KiB on, an AVX loop of 32 aligned ymm \
         stores per 1024 bytes)",
        &samples,
    )
}

/// `uncached-write`.
pub fn uncached_write(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    let overhead = ctx.overhead;
    let base = uncached(ctx)?;
    let value = 0x0123_4567_89ab_cdef;
    let samples = measure_passes(overhead, MEMORY_WARM_UP, REGION, || {
        // SAFETY: the uncached region is mapped writable for the rest of
        // the run, 2 MiB aligned, REGION bytes long, and only the uncached
        // benchmarks touch it (through this pointer).
        unsafe { kernels::write_words(base, REGION, value) }
    });
    // SAFETY: as above; the last word of the region.
    let last = unsafe { base.add(REGION / 8 - 1).read_volatile() };
    if last != value {
        return Err(Failure::WrongData {
            what: "uncached-write",
        });
    }
    report(
        ctx,
        b,
        "8-byte volatile stores to a mapping with Cache::Uncached",
        &samples,
    )
}

/// `uncached-read`.
pub fn uncached_read(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    let overhead = ctx.overhead;
    let base = uncached(ctx)?;
    let mut sink = 0;
    let samples = measure_passes(overhead, MEMORY_WARM_UP, REGION, || {
        // SAFETY: as in `uncached_write`.
        sink ^= unsafe { kernels::read_words(base, REGION) };
    });
    // The XOR of all words read: keeps the reads, says nothing.
    core::hint::black_box(sink);
    report(
        ctx,
        b,
        "8-byte volatile loads from a mapping with Cache::Uncached",
        &samples,
    )
}
