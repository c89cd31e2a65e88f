//! test-platform: a driver checking what the platform service promises
//! (`rt::session::platform`; `scenarios/platform.toml`), by `arg`:
//!
//! - `arg & 0xff == 0`: the full check on its virtio-blk disk — its device
//!   and nothing more (a second device index refused, a second session
//!   refused while the first is open), the MSI-X table's page withheld
//!   from its BAR; then the device through the virtio transport
//!   (`rt::virtio`, no register offsets or `unsafe` here): features
//!   (event index), the capacity from the device configuration, queue 0
//!   as large as the device offers, a DMA round trip — sector 1 written
//!   from a DMA buffer and read back into it, completion by an MSI-X
//!   interrupt aimed at CPU `arg >> 8` (the kernel reports where it
//!   arrived) — and a batch: 32 writes in flight at once with one
//!   notification and one interrupt, then 32 reads of them likewise,
//!   compared. The host checks sector 1 and a batch sector in the disk
//!   image after the run. It closes the session and exits 0 when every
//!   check passed.
//! - `arg & 0xff == 6`: the full check, stepping aside with its first
//!   request in flight (`tests/platform-kill.toml`): right after the
//!   write of sector 1 is kicked it drops to priority [`ASIDE_PRIORITY`],
//!   so a killer waiting just above that priority kills it
//!   exactly there, however fast the device answers (its own thread
//!   capability: `own = ["thread"]`). With nobody waiting it goes on.
//! - `arg == 1`: a component without devices: its session is refused.
//! - `arg == 2`: writes just past its BAR mapping: the write faults (init
//!   reports it), nothing else happens.
//!
//! - `arg & 0xff == 4`: the lab's `blk-read-64k` (`blk_read`), `arg >> 8`
//!   recorded passes (0: as many as the Linux side).
//!
//! Every line it prints starts `test-platform:`; a failed check prints
//! `FAILED`.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use pci::virtio::{cfg_type, feature};
use rt::abi::caddr::own;
use rt::abi::map::Cache;
use rt::abi::ObjectType;
use rt::check::Findings;
use rt::interfaces::child;
use rt::mmio::Region;
use rt::println;
use rt::session::platform::{Platform, PlatformError, IRQ_MSIX};
use rt::session::{self, Donor, Session};
use rt::syscall;
use rt::virtio::{Buffer, QueueIrq, VirtQueue, VirtioDevice, VirtioError};

mod blk_read;

rt::entry!(main);

const SESSION: u32 = child::FIRST_FREE;
const DONOR_BLOCK: u32 = SESSION + 1;
const DONOR_TABLE: u32 = SESSION + 2;
const SECOND: u32 = SESSION + 3;
const SECOND_BLOCK: u32 = SESSION + 4;
const SECOND_TABLE: u32 = SESSION + 5;
const NOTIFICATION: u32 = SESSION + 6;
/// An empty slot (the MSI vector the translation must not allocate).
const SCRATCH: u32 = SESSION + 40;

const BAR_VA: usize = 0x20_0000_0000;
const DMA_VA: usize = 0x30_0000_0000;
/// Queue 0 gets as many entries as the device offers, up to this.
const QUEUE: u16 = 1024;
const SECTOR: u64 = 1;
/// The disk (tests/platform.toml: 1 MiB).
const DISK_SECTORS: u64 = 2048;
/// Requests in flight at once in the batch check, on sectors from
/// [`BATCH_SECTOR`] on (sector 1 keeps the host-checked pattern).
const BATCH: usize = 32;
const BATCH_SECTOR: u64 = 64;
/// The byte pattern written: `PATTERN_SEED + i` for byte i (the host
/// check in tests/platform.toml knows it).
const PATTERN_SEED: u8 = 0x5a;

fn main(arg: u64) -> i32 {
    match arg & 0xff {
        1 => stranger(),
        2 => outside(),
        3 => benchmark("interrupt benchmark", bench_irq),
        4 => benchmark("blk-read-64k", |p| blk_read::run(p, (arg >> 8) as usize)),
        5 => benchmark("INTx", intx),
        6 => full((arg >> 8) as u32, StepAside::InFlight),
        _ => full((arg >> 8) as u32, StepAside::Never),
    }
}

/// Opens the Platform session and runs benchmark `what` on it: exit code 0
/// when it ran, 1 (and a `FAILED` line) when not.
fn benchmark<E: core::fmt::Display>(
    what: &str,
    run: impl FnOnce(&Session<Platform>) -> Result<(), E>,
) -> i32 {
    match open(DONOR_BLOCK, DONOR_TABLE, SESSION) {
        Err(e) => {
            println!("test-platform: FAILED: Platform session: {e}");
            1
        }
        Ok(platform) => match run(&platform) {
            Ok(()) => 0,
            Err(e) => {
                println!("test-platform: FAILED: {what}: {e}");
                1
            }
        },
    }
}

/// `arg == 5` (`tests/platform-intx.toml`): the legacy interrupt line as
/// the fallback for a device without MSI: asked for explicitly (the
/// platform service turns MSI-X off), the queue without an MSI-X vector,
/// a write and a read of sector 1 each completed by the line — the ISR
/// status read (which lowers the level) and `IrqAck` (which unmasks the
/// line) — and the sector read back equal.
fn intx(platform: &Session<Platform>) -> Result<(), VirtioError> {
    let mut dev = VirtioDevice::open(platform, 0, 0)?;
    let (line, kind) = platform.irq(0, rt::session::platform::INTX, 0)?;
    println!("test-platform: INTx: line handler (kind {kind})");
    let notification = make_notification(NOTIFICATION).map_err(VirtioError::Irq)?;
    syscall::irq_bind(line, notification).map_err(VirtioError::Irq)?;
    let mut q = dev.queue(0, 16, None)?;
    dev.driver_ok()?;
    let (mem, bus) = dma(platform, 4096)?;
    let one = ONE_SECTOR;
    one.fill(&mem, pattern_byte);
    for kind in [1u32, 0] {
        if kind == 0 {
            one.fill(&mem, |_| 0);
        }
        let chain = one.prepare(&mem, bus, kind, SECTOR);
        q.add(&chain)?;
        q.enable_interrupts()?;
        dev.kick(&mut q)?;
        syscall::wait(notification).map_err(VirtioError::Irq)?;
        // Lower the level first (reading the ISR clears it), then unmask.
        let isr = dev.isr_status()?;
        syscall::irq_ack(line).map_err(VirtioError::Irq)?;
        let used = q.pop_used()?;
        println!(
            "test-platform: INTx: {} of sector {SECTOR} completed by the line (ISR {isr:#x}, used {}, status {})",
            if kind == 1 { "write" } else { "read" },
            used.is_some(),
            mem.read8(one.status).unwrap_or(0xff)
        );
    }
    let same = one.holds(&mem, pattern_byte);
    println!(
        "test-platform: INTx: sector {SECTOR} read back {}",
        if same { "equal" } else { "DIFFERENT (FAILED)" }
    );
    Ok(())
}

/// Measured requests of [`bench_irq`], after [`BENCH_WARM_UP`] unrecorded.
const BENCH_SAMPLES: usize = 50;
const BENCH_WARM_UP: usize = 5;

/// `arg == 3` (`scenarios/platform-bench.toml`, the lab's `irq-latency`
/// and `irq-ack`): one-sector reads of the virtio-blk disk, one at a time,
/// each completed by its MSI-X interrupt on CPU 0. For each: the ticks from
/// the kernel taking the interrupt (the TSC `IrqAck` answers) to this
/// thread running after its `Wait`, and the ticks of the `IrqAck` itself
/// (timing stub subtracted). `BENCH` lines (`bench::report`).
fn bench_irq(platform: &Session<Platform>) -> Result<(), VirtioError> {
    let mut dev = VirtioDevice::open(platform, 0, 0)?;
    let notification = make_notification(NOTIFICATION).map_err(VirtioError::Irq)?;
    let irq = QueueIrq {
        entry: 0,
        cpu: 0,
        notification,
    };
    let mut q = dev.queue(0, 16, Some(irq))?;
    dev.driver_ok()?;
    let (mem, bus) = dma(platform, 4096)?;
    let one = ONE_SECTOR;
    let overhead = bench::timestamp_overhead();
    let mut latency = [0u64; BENCH_SAMPLES];
    let mut ack = [0u64; BENCH_SAMPLES];
    for i in 0..BENCH_WARM_UP + BENCH_SAMPLES {
        let chain = one.prepare(&mem, bus, 0, SECTOR);
        q.add(&chain)?;
        q.enable_interrupts()?;
        dev.kick(&mut q)?;
        let t = q.wait_interrupt_timed()?;
        q.pop_used()?;
        if let Some(k) = i.checked_sub(BENCH_WARM_UP) {
            latency[k] = t.woke.wrapping_sub(t.arrival.tsc).saturating_sub(overhead);
            ack[k] = t.ack_ticks.saturating_sub(overhead);
        }
    }
    let mut scratch = [0u64; BENCH_SAMPLES];
    for (name, what, samples) in [
        (
            "irq-latency",
            "virtio-blk read completions: the kernel taking the MSI-X to the driver running after its Wait, ticks",
            &latency,
        ),
        ("irq-ack", "IrqAck of an MSI-X handler, round trip, ticks", &ack),
    ] {
        let mut line = alloc::string::String::new();
        if bench::report(&mut line, name, what, bench::Unit::Ticks, samples, &mut scratch).is_ok() {
            let _ = syscall::debug_write(line.as_bytes());
        }
    }
    Ok(())
}

fn open(block: u32, table: u32, slot: u32) -> Result<Session<Platform>, session::OpenError> {
    let donor = Donor::from_untyped::<Platform>(own(child::UNTYPED), block, table)
        .map_err(session::OpenError::Donation)?;
    session::open_donating::<Platform>(slot, donor).map_err(|(e, _)| e)
}

fn stranger() -> i32 {
    match open(DONOR_BLOCK, DONOR_TABLE, SESSION) {
        Ok(_) => {
            println!("test-platform: FAILED: a session without devices was opened");
            1
        }
        Err(e) => {
            println!("test-platform: no device assigned: session refused ({e})");
            0
        }
    }
}

fn outside() -> i32 {
    let Ok(platform) = open(DONOR_BLOCK, DONOR_TABLE, SESSION) else {
        println!("test-platform: FAILED: no session");
        return 1;
    };
    let Ok((bar, _)) = map_virtio_bar(&platform) else {
        println!("test-platform: FAILED: BAR not mapped");
        return 1;
    };
    println!(
        "test-platform: writing just past my BAR ({:#x} bytes at {BAR_VA:#x})",
        bar.len()
    );
    // SAFETY: deliberately wrong: the page after the mapping is not
    // mapped, so the write faults and init reports it (the test's point).
    let past = unsafe { Region::from_mapped(BAR_VA + bar.len(), 4) };
    let _ = past.write32(0, 0xdead);
    println!("test-platform: FAILED: the write past the BAR did not fault");
    1
}

/// Whether the full check steps aside with its first request in flight.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StepAside {
    Never,
    InFlight,
}

/// The priority it steps aside to (below `killer`'s `wait_priority`).
const ASIDE_PRIORITY: u8 = 40;

/// Drops its own priority to [`ASIDE_PRIORITY`] for good (the kernel
/// lets a thread lower its priority, never raise it), on the first CPU
/// of its set: whatever waits above that runs now. The rest of the check
/// runs at that priority; its partners are above it and it waits for
/// nothing else.
fn step_aside(c: &mut Findings) {
    if let Err(e) = rt::cpu::place(own(child::OWN_THREAD), ASIDE_PRIORITY, 0) {
        c.expect(false, format_args!("stepping aside: {e}"));
    }
}

fn full(cpu: u32, aside: StepAside) -> i32 {
    let mut c = Findings::new();
    let platform = match open(DONOR_BLOCK, DONOR_TABLE, SESSION) {
        Ok(p) => p,
        Err(e) => {
            println!("test-platform: FAILED: Platform session: {e}");
            return 1;
        }
    };
    let dev = match platform.device(0) {
        Ok(d) => d,
        Err(e) => {
            println!("test-platform: FAILED: device 0: {e}");
            return 1;
        }
    };
    println!(
        "test-platform: device 0: {:04x}:{:04x} class {:06x} at {:02x}:{:02x}.{}",
        dev.vendor,
        dev.device,
        dev.class,
        dev.bdf >> 8,
        (dev.bdf >> 3) & 0x1f,
        dev.bdf & 7
    );
    let second_device = platform.device(1);
    c.expect(
        matches!(second_device, Err(PlatformError::Refused(_))),
        format_args!("device 1: {:?} (not mine)", second_device.err()),
    );
    let second = open(SECOND_BLOCK, SECOND_TABLE, SECOND);
    c.expect(
        second.is_err(),
        format_args!(
            "a second session for my device: {}",
            match &second {
                Ok(_) => "opened",
                Err(e) => alloc_free_refusal(e),
            }
        ),
    );
    check_msix_withheld(&platform, &mut c);
    check_bad_requests(&platform, &mut c);
    check_translate(&platform, &mut c);
    round_trip(&platform, cpu, aside, &mut c);
    match platform.close() {
        Ok(_) => println!("test-platform: session closed"),
        Err(e) => c.expect(false, format_args!("close: {e}")),
    }
    c.finish()
}

fn alloc_free_refusal(e: &session::OpenError) -> &'static str {
    match e {
        session::OpenError::Provider(_) => "refused by the platform service",
        _ => "failed otherwise",
    }
}

/// Bad requests on its own session are refused with an error value, and
/// cost nothing (the DMA refused takes no quota, the interrupt refused no
/// vector): a BAR the device lacks, DMA of no power of two or beyond the
/// session's quota, an MSI-X entry beyond the table, configuration
/// registers out of range or misaligned, an unknown opcode.
fn check_bad_requests(platform: &Session<Platform>, c: &mut Findings) {
    use rt::session::platform::{NO_MEMORY, REFUSED, UNKNOWN};
    let refused =
        |r: Result<(), PlatformError>, label: u64| r == Err(PlatformError::Refused(label));
    let results = [
        ("BAR 6", refused(platform.bar(0, 6).map(|_| ()), REFUSED)),
        (
            "DMA of 3000 bytes",
            refused(platform.dma(3000).map(|_| ()), REFUSED),
        ),
        (
            "DMA of 2 MiB",
            refused(platform.dma(2 << 20).map(|_| ()), NO_MEMORY),
        ),
        (
            "MSI-X entry 999",
            refused(platform.irq(0, 999, 0).map(|_| ()), REFUSED),
        ),
        (
            "config register 0x100",
            refused(platform.config(0, 0x100).map(|_| ()), REFUSED),
        ),
        (
            "config register 0x2",
            refused(platform.config(0, 2).map(|_| ()), REFUSED),
        ),
        (
            "opcode 99",
            platform.call(99, [0; 4]).map(|(info, _)| info.label()) == Ok(UNKNOWN),
        ),
    ];
    let failed: alloc::vec::Vec<&str> = results.iter().filter(|r| !r.1).map(|r| r.0).collect();
    c.expect(
        failed.is_empty(),
        format_args!(
            "bad requests refused: {} of {} ({failed:?} not)",
            results.len() - failed.len(),
            results.len()
        ),
    );
}

/// The bus-address translation (`TRANSLATE`): `PhysAddress` with it
/// answers a DMA frame's bus address as the platform service reported
/// it; it allocates no MSI vector (read only); a second one is refused.
fn check_translate(platform: &Session<Platform>, c: &mut Findings) {
    let t = match platform.translate() {
        Ok(t) => t,
        Err(e) => return c.expect(false, format_args!("TRANSLATE: {e}")),
    };
    let same = platform.dma(4096).ok().and_then(|d| {
        let frame = platform.donated_slot(d.first)?;
        let phys = syscall::phys_address(t, frame).ok()?;
        Some(phys.phys == d.bus_address)
    });
    let msi = syscall::msi_alloc(t, own(SCRATCH), 0);
    let again = platform.translate();
    c.expect(
        same == Some(true) && msi.is_err() && matches!(again, Err(PlatformError::Refused(_))),
        format_args!(
            "translation: a DMA frame's bus address {}; MSI vectors {}; a second TRANSLATE {}",
            if same == Some(true) {
                "matches"
            } else {
                "does not match"
            },
            match msi {
                Err(_) => "refused",
                Ok(_) => "allocated",
            },
            if again.is_err() { "refused" } else { "given" }
        ),
    );
}

/// The MSI-X table's BAR comes with the table's page left out: mapping
/// that slot finds nothing.
fn check_msix_withheld(platform: &Session<Platform>, c: &mut Findings) {
    let Ok(dev) = platform.device(0) else { return };
    // The MSI-X capability: walk the list in configuration space.
    let mut at = (platform.config(0, 0x34).unwrap_or(0) & 0xfc) as u16;
    let mut table = None;
    for _ in 0..48 {
        if at < 0x40 {
            break;
        }
        let Ok(word) = platform.config(0, at) else {
            break;
        };
        if word & 0xff == 0x11 {
            table = platform.config(0, at + 4).ok();
            break;
        }
        at = ((word >> 8) & 0xfc) as u16;
    }
    let Some(table) = table else {
        c.expect(
            false,
            format_args!("no MSI-X capability on {:04x}", dev.device),
        );
        return;
    };
    let (bar, offset) = (table & 7, table & !7);
    let Ok(info) = platform.bar(0, bar) else {
        c.expect(false, format_args!("BAR {bar} of the MSI-X table refused"));
        return;
    };
    let page = offset >> info.frame_bits;
    let slot = platform.donated_slot(info.first + page);
    let mapped = slot.map(|s| {
        // SAFETY: a probe at an address nothing else uses; a successful
        // map is undone at once.
        let r = unsafe {
            syscall::map(
                own(child::OWN_VSPACE),
                s,
                (DMA_VA - 0x10_0000) as u64,
                rt::abi::map::MapAttr {
                    writable: false,
                    executable: false,
                    cache: Cache::Uncached,
                },
            )
        };
        if r.is_ok() {
            // SAFETY: just mapped by this probe, used by nothing.
            let _ = unsafe { syscall::unmap(s) };
        }
        r
    });
    c.expect(
        matches!(mapped, Some(Err(_))),
        format_args!(
            "BAR {bar}: the MSI-X table's page is withheld ({:?})",
            mapped.and_then(|r| r.err())
        ),
    );
}

/// Maps the BAR holding the virtio common configuration, uncached.
fn map_virtio_bar(platform: &Session<Platform>) -> Result<(Region, u32), PlatformError> {
    let common = platform.virtio(0, cfg_type::COMMON)?;
    let bar = platform.bar(0, u32::from(common.bar))?;
    let frames = (bar.first..bar.first + bar.frames).filter_map(|i| platform.donated_slot(i));
    // SAFETY: BAR_VA.. is used by nothing else of this program.
    let region = unsafe {
        Region::map(
            own(child::OWN_VSPACE),
            frames,
            1 << bar.frame_bits,
            BAR_VA,
            Cache::Uncached,
        )
    }
    .map_err(PlatformError::Ipc)?;
    Ok((region, u32::from(common.bar)))
}

/// A sector's request in DMA memory `mem`: the 16-byte header at
/// `header`, 512 data bytes at `data`, the status byte at `status`.
#[derive(Clone, Copy)]
struct Request {
    header: usize,
    data: usize,
    status: usize,
}

/// The one-sector request of the round trips and the interrupt
/// benchmark: header, data and status in the first page of their DMA
/// memory.
const ONE_SECTOR: Request = Request {
    header: 0,
    data: 512,
    status: 1024,
};

/// Byte `i` of sector [`SECTOR`]'s pattern (`PATTERN_SEED + i`).
fn pattern_byte(i: usize) -> u8 {
    PATTERN_SEED.wrapping_add(i as u8)
}

/// A notification made from the component's quota into own slot `slot`.
fn make_notification(slot: u32) -> Result<rt::abi::CapSlot, rt::abi::Error> {
    syscall::retype(
        own(child::UNTYPED),
        ObjectType::Notification,
        0,
        own(slot),
        1,
    )?;
    Ok(own(slot))
}

impl Request {
    /// Writes `byte(i)` to data byte `i` of the sector.
    fn fill(&self, mem: &Region, byte: impl Fn(usize) -> u8) {
        for i in 0..512 {
            mem.write8(self.data + i, byte(i));
        }
    }

    /// Whether data byte `i` of the sector is `byte(i)` for every `i`.
    fn holds(&self, mem: &Region, byte: impl Fn(usize) -> u8) -> bool {
        (0..512).all(|i| mem.read8(self.data + i) == Some(byte(i)))
    }

    /// Writes the header (`kind` 1: write, 0: read) and a status the
    /// device must overwrite; the chain to add, in bus addresses.
    fn prepare(&self, mem: &Region, bus: u64, kind: u32, sector: u64) -> [Buffer; 3] {
        mem.write32(self.header, kind);
        mem.write32(self.header + 4, 0);
        mem.write64(self.header + 8, sector);
        mem.write8(self.status, 0xff);
        [
            Buffer {
                addr: bus + self.header as u64,
                len: 16,
                device_writes: false,
            },
            Buffer {
                addr: bus + self.data as u64,
                len: 512,
                device_writes: kind == 0,
            },
            Buffer {
                addr: bus + self.status as u64,
                len: 1,
                device_writes: true,
            },
        ]
    }
}

/// Byte `j` of the batch's sector `i`.
fn batch_byte(i: usize, j: usize) -> u8 {
    (i * 31 + j * 7 + 3) as u8
}

/// Maps `bytes` of the session's DMA memory write-back: the window and
/// its bus address.
fn dma(platform: &Session<Platform>, bytes: u64) -> Result<(Region, u64), VirtioError> {
    let d = platform.dma(bytes)?;
    let frames = (d.first..d.first + d.frames).filter_map(|i| platform.donated_slot(i));
    let mem = Region::map_new(frames, d.frames as usize, 4096, Cache::WriteBack)
        .map_err(VirtioError::Map)?;
    Ok((mem, d.bus_address))
}

/// virtio-blk through the transport (`rt::virtio`): queue 0 as large as
/// the device offers (up to [`QUEUE`]), its MSI-X interrupt on CPU `cpu`.
/// Sector 1 written from a DMA buffer and read back into it, one request
/// at a time; then [`BATCH`] sectors written at once and read back at
/// once, each batch with one notification and completion by interrupt.
fn round_trip(platform: &Session<Platform>, cpu: u32, aside: StepAside, c: &mut Findings) {
    let mut dev = match VirtioDevice::open(platform, 0, 0) {
        Ok(d) => d,
        Err(e) => return c.expect(false, format_args!("virtio device: {e}")),
    };
    let event_idx = dev.has_feature(feature::RING_EVENT_IDX);
    c.expect(
        dev.has_feature(feature::VERSION_1),
        format_args!(
            "features accepted: {:#x} (VERSION_1, event index {})",
            dev.features(),
            if event_idx { "on" } else { "off" }
        ),
    );
    let capacity = dev.config_read64(0);
    c.expect(
        capacity == Ok(DISK_SECTORS),
        format_args!("capacity from the device configuration: {capacity:?} sectors"),
    );
    let Ok(notification) = make_notification(NOTIFICATION) else {
        return c.expect(false, format_args!("cannot make a notification"));
    };
    let irq = QueueIrq {
        entry: 0,
        cpu,
        notification,
    };
    let mut q = match dev.queue(0, QUEUE, Some(irq)) {
        Ok(q) => q,
        Err(e) => return c.expect(false, format_args!("queue 0: {e}")),
    };
    // The transport took only an MSI-X interrupt (kind IRQ_MSIX).
    println!("test-platform: interrupt handler for MSI-X entry 0 (kind {IRQ_MSIX}), CPU {cpu}");
    c.expect(
        q.size() == q.max_size().min(QUEUE) && usize::from(q.size()) >= 3 * BATCH,
        format_args!(
            "queue 0: {} of {} entries, MSI-X entry 0, event index {}",
            q.size(),
            q.max_size(),
            q.event_idx()
        ),
    );
    if let Err(e) = dev.driver_ok() {
        return c.expect(false, format_args!("DRIVER_OK: {e}"));
    }

    let (mem, bus) = match dma(platform, 8192) {
        Ok(m) => m,
        Err(e) => return c.expect(false, format_args!("DMA memory refused: {e}")),
    };
    println!(
        "test-platform: DMA memory: {} bytes at bus address {bus:#x}",
        mem.len()
    );
    let one = ONE_SECTOR;
    one.fill(&mem, pattern_byte);
    let mut completed = 0u32;
    // Write (type 1), then read (type 0) into the same buffer after
    // clearing it: the bytes that come back came from the disk.
    for (kind, what) in [(1u32, "write"), (0u32, "read")] {
        if kind == 0 {
            one.fill(&mem, |_| 0);
        }
        let chain = one.prepare(&mem, bus, kind, SECTOR);
        let sent = q
            .add(&chain)
            .map_err(VirtioError::Queue)
            .and_then(|_| q.enable_interrupts().map_err(VirtioError::Queue))
            .and_then(|_| dev.kick(&mut q));
        if kind == 1 && aside == StepAside::InFlight {
            step_aside(c);
        }
        // Wait for the interrupt (no spinning): the notification word.
        let arrived = sent.and_then(|_| q.wait_interrupt());
        let used = q.pop_used();
        completed += u32::from(matches!(used, Ok(Some(_))));
        let st = mem.read8(one.status).unwrap_or(0xff);
        c.expect(
            arrived.is_ok() && completed == 2 - kind && st == 0,
            format_args!(
                "{what} of sector {SECTOR}: completed by an interrupt on CPU {} (used {completed}, status {st})",
                arrived.map_or(-1, i64::from)
            ),
        );
        c.expect(
            arrived == Ok(cpu),
            format_args!("the interrupt arrived at the CPU asked for ({cpu})"),
        );
    }
    let same = one.holds(&mem, pattern_byte);
    c.expect(
        same && completed == 2,
        format_args!("DMA round trip: sector {SECTOR} written and read back, 512 bytes equal"),
    );
    batch(platform, &dev, &mut q, cpu, c);
}

/// [`BATCH`] requests in flight at once, published with one `idx` store
/// and one notification, completions by interrupt (asked for once all
/// are done: `used_event`), for writes of sectors [`BATCH_SECTOR`].. and
/// then for reading them back.
fn batch(
    platform: &Session<Platform>,
    dev: &VirtioDevice<'_>,
    q: &mut VirtQueue,
    cpu: u32,
    c: &mut Findings,
) {
    let (mem, bus) = match dma(platform, 32 * 1024) {
        Ok(m) => m,
        Err(e) => return c.expect(false, format_args!("batch DMA memory refused: {e}")),
    };
    let request = |i: usize| Request {
        data: 512 * i,
        header: 512 * BATCH + 16 * i,
        status: 512 * BATCH + 16 * BATCH + i,
    };
    for i in 0..BATCH {
        for j in 0..512 {
            mem.write8(request(i).data + j, batch_byte(i, j));
        }
    }
    let mut counts = [(0u32, 0u32); 2];
    for (phase, kind) in [1u32, 0].into_iter().enumerate() {
        if kind == 0 {
            for i in 0..BATCH {
                for j in 0..512 {
                    mem.write8(request(i).data + j, 0);
                }
            }
        }
        let mut tokens = [None; BATCH];
        for (i, token) in tokens.iter_mut().enumerate() {
            let chain = request(i).prepare(&mem, bus, kind, BATCH_SECTOR + i as u64);
            match q.add(&chain) {
                Ok(t) => *token = Some(t),
                Err(e) => return c.expect(false, format_args!("batch: request {i}: {e}")),
            }
        }
        let in_flight = q.in_flight();
        let (notifications, interrupts) = &mut counts[phase];
        // One interrupt when all are done; then one publication.
        let kicked = q
            .interrupt_after(BATCH as u16)
            .map_err(VirtioError::Queue)
            .and_then(|_| dev.kick(q));
        match kicked {
            Ok(rang) => *notifications += u32::from(rang),
            Err(e) => return c.expect(false, format_args!("batch: kick: {e}")),
        }
        let mut done = [false; BATCH];
        let mut left = BATCH;
        // The device interrupts once the last of them is done (maybe
        // already): wait for that (no spinning), take them all; should
        // some be missing, ask again for the rest.
        let mut wait = true;
        let mut elsewhere = 0;
        while left > 0 {
            if wait {
                match q.wait_interrupt() {
                    Ok(at) => {
                        *interrupts += 1;
                        elsewhere += u32::from(at != cpu);
                    }
                    Err(e) => return c.expect(false, format_args!("batch: wait: {e}")),
                }
            }
            loop {
                match q.pop_used() {
                    Ok(Some(used)) => {
                        let Some(i) = tokens.iter().position(|t| *t == Some(used.token)) else {
                            return c.expect(false, format_args!("batch: unknown token"));
                        };
                        let want = if kind == 0 { 513 } else { 1 };
                        if done[i] || used.len != want {
                            return c.expect(
                                false,
                                format_args!("batch: request {i} done twice or {} bytes", used.len),
                            );
                        }
                        done[i] = true;
                        left -= 1;
                    }
                    Ok(None) => break,
                    Err(e) => return c.expect(false, format_args!("batch: {e}")),
                }
            }
            if left > 0 {
                match q.interrupt_after(left as u16) {
                    Ok(already) => wait = !already,
                    Err(e) => return c.expect(false, format_args!("batch: {e}")),
                }
            }
        }
        // With event index the device sent exactly one interrupt, the one
        // waited for: nothing more may be pending (without suppression,
        // interrupts for completions after the wake-up would be).
        let later = q.poll_interrupt();
        let statuses = (0..BATCH).all(|i| mem.read8(request(i).status) == Some(0));
        let what = if kind == 1 { "write" } else { "read" };
        c.expect(
            usize::from(in_flight) == BATCH
                && *notifications == 1
                && *interrupts == 1
                && elsewhere == 0
                && later == Ok(false)
                && statuses,
            format_args!(
                "batch {what}: {in_flight} requests in flight at once, {notifications} notification, {interrupts} interrupt on CPU {cpu} ({elsewhere} elsewhere, {} later), every status 0",
                match later {
                    Ok(false) => "none",
                    Ok(true) => "some",
                    Err(_) => "unknown",
                }
            ),
        );
    }
    let equal = (0..BATCH)
        .filter(|&i| (0..512).all(|j| mem.read8(request(i).data + j) == Some(batch_byte(i, j))))
        .count();
    let (notifications, interrupts) = counts[1];
    c.expect(
        equal == BATCH,
        format_args!(
            "batch: {BATCH} requests in flight, {notifications} notification, {interrupts} interrupt{}, all {equal} sectors read back equal",
            if interrupts == 1 { "" } else { "s" }
        ),
    );
}
