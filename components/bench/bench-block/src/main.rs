//! bench-block: the Pecan side of the lab's block-throughput benchmarks
//! (`bench::blockio`; the Linux side is bench-linux's `blk-raw-*-linux`).
//! Through its Block session (the virtio-blk driver's, on a scratch disk)
//! it reads, then writes, [`bench::blockio::run_bytes`] bytes
//! sequentially in requests of each size of [`bench::blockio::SIZES`],
//! one request at a time as `dd` with direct I/O does — a request larger
//! than the provider's largest packet goes as several packets, all in
//! flight, waited for together (Linux splits a large direct request the
//! same way). The data stays in place in the packet stream (the
//! counterpart of O_DIRECT's user buffer): no copy in this component.
//!
//! A soaker thread at priority 0 on the CPU counts the idle time (the
//! lab's I/O method, `bench::soak`): one unrecorded run, then
//! [`bench::blockio::RUNS`] recorded ones; one `BENCH` line per
//! benchmark (`blk-raw-read-4k`, ...). Its scenario is
//! `scenarios/blk-raw-bench.toml`; `cargo xtask bench blk-raw-read-4k`
//! runs it under icount.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::format;
use alloc::string::String;

use bench::blockio::{run_bytes, RUNS, SIZES};
use bench::soak::{self, Soaker};
use rt::abi::caddr::{own, NULL_SLOT};
use rt::interfaces::child;
use rt::println;
use rt::session::block::{self, BlockError, BlockInfo, BlockSource};
use rt::syscall;
use rt::thread::{self, Placement, Slots};

rt::entry!(main);

const SESSION: u32 = child::FIRST_FREE;
const DONOR_BLOCK: u32 = SESSION + 1;
const DONOR_TABLE: u32 = SESSION + 2;
const STREAM: [u32; 3] = [SESSION + 3, SESSION + 4, SESSION + 5];
const SOAKER_DONE: u32 = SESSION + 6;
const SOAKER_THREAD: u32 = SESSION + 7;
const SOAKER_FRAMES: u32 = SESSION + 8;
const STREAM_VA: u64 = 0x50_0000_0000;
/// The benchmark's CPU (the scenario's machine has one, as the Linux
/// guest's).
const CPU: u32 = 0;

static SOAKER: Soaker = Soaker::new();

/// The soaker thread: counts until stopped, says so on notification
/// `done`, ends.
extern "C" fn soaker(done: u64) -> ! {
    SOAKER.run();
    let _ = syscall::signal(done);
    syscall::thread_exit(0)
}

fn main(_: u64) -> i32 {
    // SAFETY: STREAM_VA.. is used by nothing else of this program.
    let (mut s, info) =
        match unsafe { block::connect(SESSION, DONOR_BLOCK, DONOR_TABLE, STREAM, STREAM_VA) } {
            Ok(c) => c,
            Err(e) => {
                println!("bench-block: FAILED: Block session: {e}");
                return 1;
            }
        };
    let done = own(SOAKER_DONE);
    let made = syscall::retype(
        own(child::UNTYPED),
        rt::abi::ObjectType::Notification,
        0,
        done,
        1,
    );
    if let Err(e) = made {
        println!("bench-block: FAILED: notification: {e}");
        return 1;
    }
    let spawned = thread::spawn(
        soaker,
        done,
        Slots {
            thread: own(SOAKER_THREAD),
            frames: own(SOAKER_FRAMES),
        },
        Placement {
            priority: 0,
            cpu: CPU,
            fault_endpoint: NULL_SLOT,
        },
    );
    if let Err(e) = spawned {
        println!("bench-block: FAILED: soaker: {e:?}");
        return 1;
    }
    let mut failed = false;
    for (op, dir) in [(block::OP_READ, "read"), (block::OP_WRITE, "write")] {
        for (size, suffix) in SIZES {
            let name = format!("blk-raw-{dir}-{suffix}");
            if let Err(e) = benchmark(&mut s, &info, &name, op, size) {
                println!("bench-block: FAILED: {name}: {e}");
                failed = true;
            }
        }
    }
    SOAKER.stop();
    let _ = syscall::wait(done);
    i32::from(failed)
}

/// One benchmark: an unrecorded run, then [`RUNS`] recorded; its `BENCH`
/// line.
fn benchmark(
    s: &mut BlockSource,
    info: &BlockInfo,
    name: &str,
    op: u32,
    size: u32,
) -> Result<(), BlockError> {
    let bytes = run_bytes(size);
    let blocks_per_request = size / info.block_size;
    let requests = bytes / u64::from(size);
    if requests * u64::from(blocks_per_request) > info.block_count {
        return Err(BlockError::Status(block::STATUS_RANGE));
    }
    let mut pass = || -> Result<(), BlockError> {
        for r in 0..requests {
            request(
                s,
                info,
                op,
                (r * u64::from(blocks_per_request)) as u32,
                size,
            )?;
        }
        Ok(())
    };
    pass()?;
    let mut elapsed = [0u64; RUNS];
    let mut soaked = [0u64; RUNS];
    for k in 0..RUNS {
        let c0 = SOAKER.count();
        let t0 = bench::now();
        pass()?;
        let t1 = bench::now();
        let c1 = SOAKER.count();
        elapsed[k] = t1.wrapping_sub(t0);
        soaked[k] = c1.wrapping_sub(c0);
    }
    report(name, bytes, &elapsed, &soaked);
    Ok(())
}

/// One request of `size` bytes at block `first`: packets of at most the
/// provider's largest size, all in flight, all waited for.
fn request(
    s: &mut BlockSource,
    info: &BlockInfo,
    op: u32,
    first: u32,
    size: u32,
) -> Result<(), BlockError> {
    let mut bad: Option<u32> = None;
    let mut on_ack = |s: &mut BlockSource, p: rt::stream::Packet| {
        if p.op != block::STATUS_OK {
            bad.get_or_insert(p.op);
        }
        let _ = s.release(p);
    };
    let mut at = 0;
    while at < size {
        let len = info.max_bytes.min(size - at);
        let p = s.alloc_waiting(len, &mut on_ack)?;
        s.submit_waiting(p, op, first + at / info.block_size, &mut on_ack)?;
        at += len;
    }
    s.drain(&mut on_ack)?;
    match bad {
        Some(status) => Err(BlockError::Status(status)),
        None => Ok(()),
    }
}

/// The `BENCH` line: each run's CPU cost and the runs behind it.
fn report(name: &str, bytes: u64, elapsed: &[u64], soaked: &[u64]) {
    let mut costs = [0u64; RUNS];
    for ((c, &e), &s) in costs.iter_mut().zip(elapsed).zip(soaked) {
        *c = soak::cpu_cost(soak::busy(e, s), bytes).unwrap_or(0);
    }
    let what = bench::catalog::find_pecan(name).map_or("", |b| b.what);
    let mut scratch = [0u64; RUNS];
    let mut line = String::new();
    let io = bench::IoRuns {
        bytes,
        elapsed,
        soaked,
    };
    if bench::report_io(&mut line, name, what, &costs, io, &mut scratch).is_ok() {
        let _ = syscall::debug_write(line.as_bytes());
    }
}
