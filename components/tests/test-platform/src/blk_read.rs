//! `blk-read-64k` (`arg & 0xff == 4`, `scenarios/blk-bench.toml`): the
//! Pecan counterpart of `blk-read-64k-linux`, measured with the lab's I/O
//! method (`bench::soak`, whose module doc is the protocol).
//!
//! The driver reads its whole virtio-blk disk (the capacity from the
//! device configuration) sequentially in 64 KiB requests, one in flight —
//! as Linux's `O_DIRECT` `pread` — each a chain of header, data and status
//! into one physically contiguous 64 KiB DMA buffer, each completion by
//! its MSI-X interrupt (a `Wait` on the notification, no spinning). A
//! soaker ([`bench::soak::Soaker`]) runs on a helper thread
//! (`rt::thread::spawn`) at priority 0 on this thread's CPU and counts the
//! idle time. One unrecorded pass, then `arg >> 8` recorded ones (0: as
//! many as the Linux side, [`RUNS`]); each pass's elapsed ticks and soaker
//! turns go into one `BENCH` line (`bench::report_io`, ticks/KiB). Then
//! the soaker is stopped and waited for.

use bench::soak::{self, Soaker};
use rt::abi::caddr::{own, NULL_SLOT};
use rt::session::platform::Platform;
use rt::session::Session;
use rt::syscall;
use rt::thread::{self, Placement, Slots};
use rt::virtio::{Buffer, QueueIrq, VirtioDevice, VirtioError};

use crate::{dma, make_notification, NOTIFICATION};

/// Recorded passes, as the Linux side's (`bench-linux`'s `disk::RUNS`).
pub const RUNS: usize = 8;
/// Bytes per request.
const BLOCK: u64 = 64 * 1024;
const SECTOR_BYTES: u64 = 512;
/// The most recorded passes a config may ask for.
const MAX_RUNS: usize = 32;

/// The benchmark's CPU: the interrupt's, the soaker's, and this thread's
/// (the scenario's machine has one CPU, as the Linux guest's).
const CPU: u32 = 0;

/// The soaker's notification: it signals it once it has left its loop.
const SOAKER_DONE: u32 = NOTIFICATION + 1;
const SOAKER_THREAD: u32 = NOTIFICATION + 2;
const SOAKER_FRAMES: u32 = NOTIFICATION + 3;

static SOAKER: Soaker = Soaker::new();

/// The soaker thread: counts until stopped, says so on notification
/// `done`, ends.
extern "C" fn soaker(done: u64) -> ! {
    SOAKER.run();
    let _ = syscall::signal(done);
    syscall::thread_exit(0)
}

/// Why the benchmark failed.
#[derive(Debug)]
pub enum BenchError {
    Virtio(VirtioError),
    Soaker(thread::SpawnError),
    /// The device answered a read with this status (0 is OK).
    Status(u64, u8),
    /// The disk holds less than one block, or too many passes asked for.
    Config(&'static str),
}

impl From<VirtioError> for BenchError {
    fn from(e: VirtioError) -> Self {
        BenchError::Virtio(e)
    }
}

impl core::fmt::Display for BenchError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BenchError::Virtio(e) => write!(f, "{e}"),
            BenchError::Soaker(e) => write!(f, "soaker: {e}"),
            BenchError::Status(sector, s) => write!(f, "read at sector {sector}: status {s}"),
            BenchError::Config(what) => f.write_str(what),
        }
    }
}

/// Runs `blk-read-64k` with `recorded` passes (0: [`RUNS`]).
pub fn run(platform: &Session<Platform>, recorded: usize) -> Result<(), BenchError> {
    let runs = if recorded == 0 { RUNS } else { recorded };
    if runs > MAX_RUNS {
        return Err(BenchError::Config(
            "more recorded passes than the driver keeps",
        ));
    }
    let mut dev = VirtioDevice::open(platform, 0, 0)?;
    let notification = make_notification(NOTIFICATION).map_err(VirtioError::Irq)?;
    let done = make_notification(SOAKER_DONE).map_err(VirtioError::Irq)?;
    let cpu = CPU;
    let irq = QueueIrq {
        entry: 0,
        cpu,
        notification,
    };
    let mut q = dev.queue(0, 16, Some(irq))?;
    dev.driver_ok()?;
    let blocks = dev.config_read64(0)? * SECTOR_BYTES / BLOCK;
    if blocks == 0 {
        return Err(BenchError::Config(
            "the disk holds less than one 64 KiB block",
        ));
    }
    // The data buffer: one physically contiguous DMA allocation; the
    // header (offset 0) and the status (offset 16) in a page of their own.
    // (`_data` keeps the window mapped while the device writes into it.)
    let (_data, data_bus) = dma(platform, BLOCK)?;
    let (ctl, ctl_bus) = dma(platform, 4096)?;
    let chain = [
        Buffer {
            addr: ctl_bus,
            len: 16,
            device_writes: false,
        },
        Buffer {
            addr: data_bus,
            len: BLOCK as u32,
            device_writes: true,
        },
        Buffer {
            addr: ctl_bus + 16,
            len: 1,
            device_writes: true,
        },
    ];
    let mut pass = || -> Result<(), BenchError> {
        for i in 0..blocks {
            let sector = i * (BLOCK / SECTOR_BYTES);
            ctl.write32(0, 0); // VIRTIO_BLK_T_IN
            ctl.write32(4, 0);
            ctl.write64(8, sector);
            ctl.write8(16, 0xff);
            q.add(&chain).map_err(VirtioError::from)?;
            q.enable_interrupts().map_err(VirtioError::from)?;
            dev.kick(&mut q)?;
            q.wait_interrupt()?;
            q.pop_used().map_err(VirtioError::from)?;
            match ctl.read8(16) {
                Some(0) => {}
                s => return Err(BenchError::Status(sector, s.unwrap_or(0xff))),
            }
        }
        Ok(())
    };

    thread::spawn(
        soaker,
        done,
        Slots {
            thread: own(SOAKER_THREAD),
            frames: own(SOAKER_FRAMES),
        },
        Placement {
            priority: 0,
            cpu,
            fault_endpoint: NULL_SLOT,
        },
    )
    .map_err(BenchError::Soaker)?;
    let (mut elapsed, mut soaked) = ([0u64; MAX_RUNS], [0u64; MAX_RUNS]);
    let measured = SOAKER
        .measure(&mut elapsed[..runs], &mut soaked[..runs], &mut pass)
        .map(|()| (elapsed, soaked));
    // Stop (the protocol's step 6): the flag, then a wait that lets the
    // soaker run, leave its loop and say so.
    SOAKER.stop();
    syscall::wait(done).map_err(VirtioError::Irq)?;
    let (elapsed, soaked) = measured?;
    report(blocks * BLOCK, &elapsed[..runs], &soaked[..runs]);
    Ok(())
}

/// The `BENCH` line: each pass's CPU cost and the runs behind it.
fn report(bytes: u64, elapsed: &[u64], soaked: &[u64]) {
    let mut costs = [0u64; MAX_RUNS];
    for ((c, &e), &s) in costs.iter_mut().zip(elapsed).zip(soaked) {
        *c = soak::cpu_cost(soak::busy(e, s), bytes).unwrap_or(0);
    }
    let costs = &costs[..elapsed.len()];
    let what = bench::catalog::find_pecan("blk-read-64k").map_or("", |b| b.what);
    let mut scratch = [0u64; MAX_RUNS];
    let mut line = alloc::string::String::new();
    let io = bench::IoRuns {
        bytes,
        elapsed,
        soaked,
    };
    if bench::report_io(&mut line, "blk-read-64k", what, costs, io, &mut scratch).is_ok() {
        let _ = syscall::debug_write(line.as_bytes());
    }
}
