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

use bench::blockio::{run_bytes, RUNS, SIZES};
use bench_io::SoakerSlots;
use rt::fs::{Fs, Slots};
use rt::interfaces::child;
use rt::println;
use rt::session::block::{self, BlockError, BlockInfo, BlockSource};

rt::entry!(main);

const SESSION: u32 = child::FIRST_FREE;
const DONOR_BLOCK: u32 = SESSION + 1;
const DONOR_TABLE: u32 = SESSION + 2;
const STREAM: [u32; 3] = [SESSION + 3, SESSION + 4, SESSION + 5];
const SOAKER_DONE: u32 = SESSION + 6;
const SOAKER_THREAD: u32 = SESSION + 7;
const SOAKER_FRAMES: u32 = SESSION + 8;
const STREAM_VA: u64 = 0x50_0000_0000;
/// `arg`: the benchmarks through the file system.
const FS: u64 = 1;
/// (After the soaker's frames, which take the slots from
/// `SOAKER_FRAMES` on.)
const FS_SLOTS: Slots = Slots {
    session: SESSION + 32,
    donor_block: SESSION + 33,
    donor_table: SESSION + 34,
    frame: SESSION + 35,
};
const FS_VA: u64 = 0x60_0000_0000;
const HEAP_SLOT: u32 = SESSION + 36;
/// The benchmarks' file.
const FILE: &str = "/bench.bin";
/// The benchmark's CPU (the scenario's machine has one, as the Linux
/// guest's).
const CPU: u32 = 0;

fn main(arg: u64) -> i32 {
    let failed = match arg {
        FS => files(),
        _ => raw(),
    };
    i32::from(failed)
}

/// The soaker's slots (`bench_io`).
const SOAKER_SLOTS: SoakerSlots = SoakerSlots {
    done: SOAKER_DONE,
    thread: SOAKER_THREAD,
    frames: SOAKER_FRAMES,
};

/// The raw benchmarks, through the Block session: whether one failed.
fn raw() -> bool {
    // SAFETY: STREAM_VA.. is used by nothing else of this program.
    let (mut s, info) =
        match unsafe { block::connect(SESSION, DONOR_BLOCK, DONOR_TABLE, STREAM, STREAM_VA) } {
            Ok(c) => c,
            Err(e) => {
                println!("bench-block: FAILED: Block session: {e}");
                return true;
            }
        };
    if let Err(e) = bench_io::start(SOAKER_SLOTS, CPU) {
        println!("bench-block: FAILED: {e}");
        return true;
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
    bench_io::stop(SOAKER_SLOTS);
    failed
}

/// The benchmarks through the file system (`arg` [`FS`]): a file of
/// [`bench::blockio::run_bytes`] bytes written (created, written in
/// requests of each size, synced: the sync is timed, as Linux's) and read
/// back (opened, read in requests of each size), through `rt::fs`.
fn files() -> bool {
    // SAFETY: FS_VA.. is used by nothing else of this program.
    let fs = match unsafe { Fs::connect(FS_SLOTS, FS_VA) } {
        Ok(fs) => fs,
        Err(e) => {
            println!("bench-block: FAILED: File system session: {e}");
            return true;
        }
    };
    if let Err(e) = rt::heap::grow(HEAP_SLOT, 1) {
        println!("bench-block: FAILED: heap: {e}");
        return true;
    }
    if let Err(e) = bench_io::start(SOAKER_SLOTS, CPU) {
        println!("bench-block: FAILED: {e}");
        return true;
    }
    let mut buf = alloc::vec![0x5au8; 1 << 20];
    let mut failed = false;
    for write in [true, false] {
        for (size, suffix) in SIZES {
            let dir = if write { "write" } else { "read" };
            let name = format!("fat-{dir}-{suffix}");
            let bytes = run_bytes(size);
            if !write {
                // The file to read: as large as this run reads.
                let made = fs.create(FILE).and_then(|mut f| {
                    let mut left = bytes as usize;
                    while left > 0 {
                        let n = left.min(buf.len());
                        f.write_all(&buf[..n])?;
                        left -= n;
                    }
                    f.close()
                });
                if let Err(e) = made.and_then(|()| fs.sync()) {
                    println!("bench-block: FAILED: {name}: making the file: {e}");
                    failed = true;
                    continue;
                }
            }
            let chunk = &mut buf[..size as usize];
            let mut pass = || -> Result<(), rt::fs::Error> {
                match write {
                    true => {
                        let mut f = fs.create(FILE)?;
                        for _ in 0..bytes / u64::from(size) {
                            f.write_all(chunk)?;
                        }
                        f.close()?;
                        fs.sync()
                    }
                    false => {
                        let mut f = fs.open(FILE)?;
                        for _ in 0..bytes / u64::from(size) {
                            f.read_exact(chunk)?;
                        }
                        f.close()
                    }
                }
            };
            match bench_io::measure::<_, RUNS>(&mut pass) {
                Ok((elapsed, soaked)) => bench_io::report(&name, bytes, &elapsed, &soaked),
                Err(e) => {
                    println!("bench-block: FAILED: {name}: {e}");
                    failed = true;
                }
            }
        }
    }
    bench_io::stop(SOAKER_SLOTS);
    failed
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
    let (elapsed, soaked) = bench_io::measure::<_, RUNS>(&mut pass)?;
    bench_io::report(name, bytes, &elapsed, &soaked);
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
