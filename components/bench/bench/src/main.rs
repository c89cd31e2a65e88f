//! bench: the Pecan side of the benchmark lab. It runs the Pecan
//! benchmarks of `bench::catalog` and prints one `BENCH` line per
//! benchmark (`bench::report`; format in the `bench` crate's docs), using
//! the shared measuring logic of the `bench` crate — the same source as
//! the Linux benchmark binary.
//!
//! Run with its partner in another address space (a server in root's
//! sense, see `interfaces::child`) and enough memory:
//!
//! ```text
//! pecan.start=bench-server@16+own+serve,bench:ARG@64+own
//! ```
//!
//! (`cargo xtask run bench --icount` boots `scenarios/bench.toml`, which
//! runs all of them). Both hold their own thread, capability space and
//! address space capabilities (the `+own` markers,
//! `interfaces::child::OwnCaps`): they start threads and map memory.
//!
//! # ARG: which benchmarks
//!
//! `ARG` is a bit mask over the Pecan entries of `bench::catalog::ALL`, in
//! catalog order: bit *i* selects the *i*-th entry whose platform is
//! `Pecan`. 0 selects all. Selected benchmarks run in catalog order. A bit
//! at or above the number of Pecan entries is refused (`bench: ARG ...
//! selects no known benchmark`, exit code [`EXIT_BAD_ARG`]) and nothing
//! runs. `cargo xtask bench` computes the mask from names; with today's
//! catalog:
//!
//! | bit | benchmark | bit | benchmark |
//! |-----|-----------|-----|-----------|
//! | 0 | `null-syscall` | 10 | `ring-2` |
//! | 1 | `ipc-intra-0w` | 11 | `ring-4` |
//! | 2 | `ipc-intra-4w` | 12 | `ring-10` |
//! | 3 | `ipc-intra-8w` | 13 | `bulk-shm` |
//! | 4 | `ipc-intra-16w` | 14 | `bogomips` |
//! | 5 | `ipc-inter-0w` | 15 | `memcpy-runtime` |
//! | 6 | `ipc-inter-4w` | 16 | `memcpy-bytewise` |
//! | 7 | `ipc-inter-8w` | 17 | `memset-runtime` |
//! | 8 | `ipc-inter-16w` | 18 | `uncached-write` |
//! | 9 | `notification` | 19 | `uncached-read` |
//! | | | 20 | `ipc-intra-0w-fpu` |
//! | | | 21 | `fpu-first-use` |
//! | | | 22 | `vm-exit` |
//!
//! The regression gate's quick pass (`null-syscall`, `ipc-intra-0w`,
//! `ipc-inter-0w`, `notification`, `ring-2`) is [`QUICK_MASK`] = `0x623`.
//!
//! # What each measures
//!
//! The method is the `bench` crate's (sel4bench's): [`bench::WARM_UP`]
//! unrecorded runs, then [`bench::SAMPLES`] samples unless said otherwise,
//! the timing stub's cost ([`bench::timestamp_overhead`], measured once at
//! start) subtracted. All threads run at the children's priority
//! (`interfaces::child::PRIORITY`) unless said otherwise.
//!
//! - `null-syscall`: `Null`, timed around the call ([`bench::measure`]).
//! - `ipc-intra-Nw`: one-way `Call` of N words to a helper thread of this
//!   address space blocked in `ReplyRecv` (so 0 and 4 words take the fast
//!   path, 8 and 16 words go through both IPC buffers): the timestamp
//!   before the call in the caller, after the receive in the helper
//!   ([`ipc`]).
//! - `ipc-inter-Nw`: the same to `bench-server` through the service
//!   endpoint, its timestamps written to the shared frame.
//! - `notification`: `Signal` to the wake-up of a helper blocked in `Wait`
//!   at a higher priority (100) than the signalling helper (99), so the
//!   waiter runs at once, as sel4bench measures it; one-way.
//! - `ring-N`: a one-word token passed by `Send`/`Recv` around a ring of N
//!   threads of this address space (this thread and N − 1 helpers, an
//!   endpoint each); a round timed by [`bench::measure`], divided by N.
//! - `bulk-shm`: 1 MiB per sample through the 2 MiB frame shared with
//!   `bench-server`, in 64 KiB chunks: this side copies a chunk in and
//!   signals, the server copies it out and signals back (two copies per
//!   byte, like a pipe's write and read) ([`bulk`]).
//! - `bogomips`, `memcpy-runtime`, `memcpy-bytewise`, `memset-runtime`,
//!   `uncached-write`, `uncached-read`: the `bench::kernels` over 8 MiB
//!   regions of 2 MiB frames, the uncached ones mapped `Cache::Uncached`
//!   ([`local`], also `null-syscall`).
//! - `ipc-intra-0w-fpu`: `ipc-intra-0w` with a caller that executes a
//!   vector instruction before each call, so that its x87/SSE/AVX state is
//!   live and saved on the way (what vector use adds to an IPC);
//!   `fpu-first-use`: after such a call and the reply, the first
//!   vector instruction, timed alone (the #NM trap that loads the state)
//!   ([`ipc`]).
//! - `vm-exit`: a VM exit round trip — a guest `out`, the exit, the
//!   VMM's answer and the next run — through `rt::vcpu` ([`vm`]); needs
//!   AMD SVM (fails with `Unsupported` without it).
//!
//! # Output
//!
//! ```text
//! bench: start (ARG 0x623: 5 benchmarks, timestamp overhead 2 ticks)
//! BENCH {"name":"null-syscall",...}
//! bench: NAME FAILED: <reason>
//! bench: done (5 benchmarks, 0 failed)
//! ```
//!
//! A report line (several KiB with 1000 samples) is formatted into one
//! heap buffer and written with as few `DebugWrite` calls as the kernel
//! allows (4096 bytes each, each one whole on the console). A timer tick
//! between two of them may run another thread, so nothing else may print
//! while `bench` runs: helpers never print, `bench-server` prints only
//! when it fails, root only when a child exits or faults. The exit code is the number of failed
//! benchmarks ([`EXIT_BAD_ARG`] for a bad `ARG`).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

mod bulk;
mod env;
mod ipc;
mod local;
mod vm;

use alloc::string::String;
use alloc::vec;
use core::fmt;

use bench::catalog::{self, Bench, Platform};
use bench::Unit;
use rt::abi::Error;
use rt::{println, syscall};

use env::{Env, Helpers};

rt::entry!(main);

/// Exit code for an `ARG` with bits beyond the Pecan benchmarks.
pub const EXIT_BAD_ARG: i32 = 100;
/// The regression gate's quick pass: `null-syscall`, `ipc-intra-0w`,
/// `ipc-inter-0w`, `notification`, `ring-2`.
pub const QUICK_MASK: u64 = 0x623;

/// Why a benchmark could not be measured.
#[derive(Debug)]
pub enum Failure {
    Syscall {
        what: &'static str,
        error: Error,
    },
    OutOfSlots,
    TooManyHelpers,
    /// A helper thread exited with a non-zero code (see its function).
    Helper {
        helper: usize,
        code: u64,
    },
    HelperFault {
        helper: usize,
        label: u64,
        words: [u64; 4],
    },
    /// Something arrived on the helpers' fault endpoint that is neither an
    /// exit nor a fault.
    Unexpected {
        label: u64,
    },
    /// Getting the shared frame and notifications from `bench-server`
    /// failed.
    Setup(rt::shared::ReceiveError),
    /// `bench-server` answered with this label (or not as the protocol says).
    Server {
        request: u64,
        label: u64,
    },
    /// The server recorded a different number of arrivals than calls made.
    Arrivals {
        expected: usize,
        got: u64,
    },
    /// A copy or fill did not produce the expected bytes.
    WrongData {
        what: &'static str,
    },
    /// The report line could not be formatted.
    Format,
    /// The catalog names a Pecan benchmark this component does not know.
    NotImplemented,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Syscall { what, error } => write!(f, "{what} failed: {error}"),
            Failure::OutOfSlots => f.write_str("no free capability slot left"),
            Failure::TooManyHelpers => f.write_str("more helper threads than there is room for"),
            Failure::Helper { helper, code } => {
                write!(f, "helper thread {helper} exited with code {code}")
            }
            Failure::HelperFault {
                helper,
                label,
                words,
            } => write!(
                f,
                "helper thread {helper} faulted (label {label:#x}, words {words:#x?})"
            ),
            Failure::Unexpected { label } => {
                write!(f, "unexpected message (label {label:#x}) from a helper")
            }
            Failure::Setup(e) => write!(f, "SETUP: {e}"),
            Failure::Server { request, label } => write!(
                f,
                "bench-server answered request {request:#x} with label {label:#x}"
            ),
            Failure::Arrivals { expected, got } => write!(
                f,
                "bench-server recorded {got} arrivals for {expected} calls"
            ),
            Failure::WrongData { what } => write!(f, "{what} produced wrong data"),
            Failure::Format => f.write_str("the report line could not be formatted"),
            Failure::NotImplemented => f.write_str("not implemented on Pecan"),
        }
    }
}

/// What the benchmarks share: objects and mappings made on first use and
/// kept for later benchmarks.
pub struct Ctx {
    pub env: Env,
    pub helpers: Helpers,
    /// `bench::timestamp_overhead()`, measured once.
    pub overhead: u64,
    pub ipc: ipc::Objects,
    pub server: Option<rt::shared::Received>,
    pub memory: Option<local::Regions>,
    line: String,
}

impl Ctx {
    /// Prints the `BENCH` line of `bench` (see the module doc).
    pub fn report(
        &mut self,
        bench: &Bench,
        what: &str,
        unit: Unit,
        samples: &[u64],
    ) -> Result<(), Failure> {
        let mut scratch = vec![0; samples.len()];
        self.line.clear();
        bench::report(
            &mut self.line,
            bench.name,
            what,
            unit,
            samples,
            &mut scratch,
        )
        .map_err(|_| Failure::Format)?;
        syscall::debug_write(self.line.as_bytes()).map_err(env::failed("DebugWrite"))
    }
}

/// The Pecan benchmarks of the catalog, in order (bit i of `ARG` is the
/// i-th).
fn pecan_benchmarks() -> impl Iterator<Item = &'static Bench> {
    catalog::ALL
        .iter()
        .filter(|b| b.platform == Platform::Pecan)
}

/// Measures and reports one benchmark.
fn run(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    match b.name {
        "null-syscall" => local::null_syscall(ctx, b),
        "ipc-intra-0w" => ipc::intra(ctx, b, 0),
        "ipc-intra-4w" => ipc::intra(ctx, b, 4),
        "ipc-intra-8w" => ipc::intra(ctx, b, 8),
        "ipc-intra-16w" => ipc::intra(ctx, b, 16),
        "ipc-inter-0w" => ipc::inter(ctx, b, 0),
        "ipc-inter-4w" => ipc::inter(ctx, b, 4),
        "ipc-inter-8w" => ipc::inter(ctx, b, 8),
        "ipc-inter-16w" => ipc::inter(ctx, b, 16),
        "notification" => ipc::notification(ctx, b),
        "ring-2" => ipc::ring(ctx, b, 2),
        "ring-4" => ipc::ring(ctx, b, 4),
        "ring-10" => ipc::ring(ctx, b, 10),
        "bulk-shm" => bulk::bulk(ctx, b),
        "bogomips" => local::bogomips(ctx, b),
        "memcpy-runtime" => local::memcpy_runtime(ctx, b),
        "memcpy-bytewise" => local::memcpy_bytewise(ctx, b),
        "memset-runtime" => local::memset_runtime(ctx, b),
        "uncached-write" => local::uncached_write(ctx, b),
        "uncached-read" => local::uncached_read(ctx, b),
        "ipc-intra-0w-fpu" => ipc::intra_fpu(ctx, b),
        "fpu-first-use" => ipc::fpu_first_use(ctx, b),
        "vm-exit" => vm::vm_exit(ctx, b),
        _ => Err(Failure::NotImplemented),
    }
}

fn main(arg: u64) -> i32 {
    let count = pecan_benchmarks().count();
    if count < 64 && arg >> count != 0 {
        println!(
            "bench: ARG {arg:#x} selects no known benchmark with bits {:#x} (there are {count} \
             Pecan benchmarks, bits 0..{count})",
            arg & !((1u64 << count) - 1)
        );
        return EXIT_BAD_ARG;
    }
    let selected = |i: usize| arg == 0 || (i < 64 && arg & (1 << i) != 0);
    let chosen = (0..count).filter(|&i| selected(i)).count();
    let mut ctx = Ctx {
        env: Env::new(),
        helpers: Helpers::new(),
        overhead: bench::timestamp_overhead(),
        ipc: ipc::Objects::new(),
        server: None,
        memory: None,
        line: String::with_capacity(32 * 1024),
    };
    println!(
        "bench: start (ARG {arg:#x}: {chosen} benchmarks, timestamp overhead {} ticks)",
        ctx.overhead
    );
    let mut failed = 0;
    for (_, b) in pecan_benchmarks().enumerate().filter(|&(i, _)| selected(i)) {
        if let Err(e) = run(&mut ctx, b) {
            println!("bench: {} FAILED: {e}", b.name);
            failed += 1;
        }
    }
    println!("bench: done ({chosen} benchmarks, {failed} failed)");
    failed
}
