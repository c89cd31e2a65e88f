//! test-platform: a driver checking what the platform service promises
//! (`rt::session::platform`; `scenarios/platform.toml`), by `arg`:
//!
//! - `arg & 0xff == 0`: the full check on its virtio-blk disk — its device
//!   and nothing more (a second device index refused, a second session
//!   refused while the first is open), the MSI-X table's page withheld
//!   from its BAR, the virtio registers read and written through its BAR
//!   mapping, then a DMA round trip: sector 1 written from one DMA buffer
//!   and read back into another, completion by an MSI-X interrupt aimed
//!   at CPU `arg >> 8` (the kernel reports where it arrived); the host
//!   checks the sector in the disk image after the run. It closes the
//!   session and exits 0 when every check passed.
//! - `arg == 1`: a component without devices: its session is refused.
//! - `arg == 2`: writes just past its BAR mapping: the write faults (init
//!   reports it), nothing else happens.
//!
//! Every line it prints starts `test-platform:`; a failed check prints
//! `FAILED`.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use core::sync::atomic::{fence, Ordering};

use pci::virtio::{cfg_type, common, feature, status};
use rt::abi::caddr::own;
use rt::abi::map::Cache;
use rt::abi::ObjectType;
use rt::interfaces::child;
use rt::mmio::Region;
use rt::println;
use rt::session::platform::{Platform, PlatformError};
use rt::session::{self, Donor, Session};
use rt::syscall;

rt::entry!(main);

const SESSION: u32 = child::FIRST_FREE;
const DONOR_BLOCK: u32 = SESSION + 1;
const DONOR_TABLE: u32 = SESSION + 2;
const SECOND: u32 = SESSION + 3;
const SECOND_BLOCK: u32 = SESSION + 4;
const SECOND_TABLE: u32 = SESSION + 5;
const NOTIFICATION: u32 = SESSION + 6;

const BAR_VA: usize = 0x20_0000_0000;
const DMA_VA: usize = 0x30_0000_0000;
/// The virtio BAR of QEMU's modern virtio-pci functions is found through
/// the session (`VIRTIO`), not assumed; queue 0 gets this many entries.
const QUEUE: u16 = 16;
const SECTOR: u64 = 1;
/// The byte pattern written: `PATTERN_SEED + i` for byte i (the host
/// check in tests/platform.toml knows it).
const PATTERN_SEED: u8 = 0x5a;

fn main(arg: u64) -> i32 {
    match arg & 0xff {
        1 => stranger(),
        2 => outside(),
        _ => full((arg >> 8) as u32),
    }
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

/// Counts failed checks.
struct Checks(u32);

impl Checks {
    fn expect(&mut self, ok: bool, what: core::fmt::Arguments<'_>) {
        if ok {
            println!("test-platform: {what}");
        } else {
            println!("test-platform: FAILED: {what}");
            self.0 += 1;
        }
    }
}

fn full(cpu: u32) -> i32 {
    let mut c = Checks(0);
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
    match map_virtio_bar(&platform) {
        Ok((bar, bar_index)) => round_trip(&platform, &bar, bar_index, cpu, &mut c),
        Err(e) => c.expect(false, format_args!("virtio BAR: {e}")),
    }
    match platform.close() {
        Ok(_) => println!("test-platform: session closed"),
        Err(e) => c.expect(false, format_args!("close: {e}")),
    }
    println!("test-platform: {} checks failed", c.0);
    i32::from(c.0 != 0)
}

fn alloc_free_refusal(e: &session::OpenError) -> &'static str {
    match e {
        session::OpenError::Provider(_) => "refused by the platform service",
        _ => "failed otherwise",
    }
}

/// The MSI-X table's BAR comes with the table's page left out: mapping
/// that slot finds nothing.
fn check_msix_withheld(platform: &Session<Platform>, c: &mut Checks) {
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

/// A virtio-blk request through queue 0: write sector 1 from a DMA
/// buffer, read it back into another, compare; completions by MSI-X.
fn round_trip(
    platform: &Session<Platform>,
    bar: &Region,
    bar_index: u32,
    cpu: u32,
    c: &mut Checks,
) {
    let block = |t| {
        platform
            .virtio(0, t)
            .ok()
            .filter(|b| u32::from(b.bar) == bar_index)
    };
    let (Some(cfg), Some(notify)) = (block(cfg_type::COMMON), block(cfg_type::NOTIFY)) else {
        c.expect(false, format_args!("virtio blocks outside the mapped BAR"));
        return;
    };
    let at = |r: u32| cfg.offset as usize + r as usize;
    // Reset, then the handshake of virtio 1.x (3.1.1).
    bar.write8(at(common::DEVICE_STATUS), 0);
    bar.write8(
        at(common::DEVICE_STATUS),
        status::ACKNOWLEDGE | status::DRIVER,
    );
    bar.write32(at(common::DEVICE_FEATURE_SELECT), 1);
    let high = bar.read32(at(common::DEVICE_FEATURE)).unwrap_or(0);
    let version_1 = 1 << (feature::VERSION_1 - 32);
    c.expect(
        high & version_1 != 0,
        format_args!("the device offers VERSION_1 (features 63..32 {high:#x})"),
    );
    bar.write32(at(common::DRIVER_FEATURE_SELECT), 1);
    bar.write32(at(common::DRIVER_FEATURE), version_1);
    bar.write32(at(common::DRIVER_FEATURE_SELECT), 0);
    bar.write32(at(common::DRIVER_FEATURE), 0);
    bar.write8(
        at(common::DEVICE_STATUS),
        status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK,
    );
    let st = bar.read8(at(common::DEVICE_STATUS)).unwrap_or(0);
    c.expect(
        st & status::FEATURES_OK != 0,
        format_args!("features accepted (status {st:#x})"),
    );

    // The interrupt: MSI-X entry 0 on the CPU asked for.
    let irq = match platform.irq(0, 0, cpu) {
        Ok((slot, kind)) => {
            println!("test-platform: interrupt handler for MSI-X entry 0 (kind {kind}), CPU {cpu}");
            slot
        }
        Err(e) => {
            c.expect(false, format_args!("interrupt refused: {e}"));
            return;
        }
    };
    let notification = own(NOTIFICATION);
    if syscall::retype(
        own(child::UNTYPED),
        ObjectType::Notification,
        0,
        notification,
        1,
    )
    .is_err()
        || syscall::irq_bind(irq, notification).is_err()
    {
        c.expect(false, format_args!("cannot bind the interrupt"));
        return;
    }

    // DMA: page 0 the queue, page 1 the requests.
    let dma = match platform.dma(8192) {
        Ok(d) => d,
        Err(e) => {
            c.expect(false, format_args!("DMA memory refused: {e}"));
            return;
        }
    };
    let pages = (dma.first..dma.first + dma.frames).filter_map(|i| platform.donated_slot(i));
    // SAFETY: DMA_VA.. is used by nothing else of this program.
    let Ok(mem) = (unsafe {
        Region::map(
            own(child::OWN_VSPACE),
            pages,
            4096,
            DMA_VA,
            Cache::WriteBack,
        )
    }) else {
        c.expect(false, format_args!("cannot map the DMA memory"));
        return;
    };
    println!(
        "test-platform: DMA memory: {} bytes at bus address {:#x}",
        mem.len(),
        dma.bus_address
    );
    let bus = dma.bus_address;
    let (desc, avail, used) = (0usize, 256usize, 512usize);
    let (header, data, status_at) = (4096usize, 4096 + 512, 4096 + 1024);

    bar.write16(at(common::QUEUE_SELECT), 0);
    let max = bar.read16(at(common::QUEUE_SIZE)).unwrap_or(0);
    let size = QUEUE.min(max);
    bar.write16(at(common::QUEUE_SIZE), size);
    bar.write16(at(common::QUEUE_MSIX_VECTOR), 0);
    let vector = bar.read16(at(common::QUEUE_MSIX_VECTOR)).unwrap_or(0xffff);
    c.expect(
        vector == 0 && size > 0,
        format_args!("queue 0: {size} of {max} entries, MSI-X entry {vector}"),
    );
    for (reg, addr) in [
        (common::QUEUE_DESC, bus + desc as u64),
        (common::QUEUE_DRIVER, bus + avail as u64),
        (common::QUEUE_DEVICE, bus + used as u64),
    ] {
        bar.write32(at(reg), addr as u32);
        bar.write32(at(reg) + 4, (addr >> 32) as u32);
    }
    bar.write16(at(common::QUEUE_ENABLE), 1);
    let notify_off = bar.read16(at(common::QUEUE_NOTIFY_OFF)).unwrap_or(0);
    let doorbell =
        notify.offset as usize + usize::from(notify_off) * notify.notify_off_multiplier as usize;
    bar.write8(
        at(common::DEVICE_STATUS),
        status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK | status::DRIVER_OK,
    );

    for i in 0..512 {
        mem.write8(data + i, PATTERN_SEED.wrapping_add(i as u8));
    }
    let mut used_idx = 0u16;
    // Write (type 1), then read (type 0) into the same buffer after
    // clearing it: the bytes that come back came from the disk.
    for (n, (kind, what)) in [(1u32, "write"), (0u32, "read")].into_iter().enumerate() {
        if kind == 0 {
            for i in 0..512 {
                mem.write8(data + i, 0);
            }
        }
        mem.write32(header, kind);
        mem.write32(header + 4, 0);
        mem.write64(header + 8, SECTOR);
        mem.write8(status_at, 0xff);
        let data_flags = if kind == 0 { 2 } else { 0 }; // WRITE: the device writes it
        let chain = [
            (bus + header as u64, 16u32, 1u16),
            (bus + data as u64, 512, 1 | data_flags),
            (bus + status_at as u64, 1, 2),
        ];
        for (i, (addr, len, flags)) in chain.into_iter().enumerate() {
            let d = desc + 16 * i;
            mem.write64(d, addr);
            mem.write32(d + 8, len);
            mem.write16(d + 12, flags);
            mem.write16(d + 14, i as u16 + 1);
        }
        let idx = n as u16;
        mem.write16(avail + 4 + 2 * usize::from(idx % size), 0);
        fence(Ordering::SeqCst);
        mem.write16(avail + 2, idx + 1);
        fence(Ordering::SeqCst);
        bar.write16(doorbell, 0);
        // Wait for the interrupt (no spinning): the notification word.
        let woke = syscall::wait(notification);
        let arrived = syscall::irq_ack_cpu(irq);
        used_idx = mem.read16(used + 2).unwrap_or(0);
        let st = mem.read8(status_at).unwrap_or(0xff);
        c.expect(
            woke.is_ok() && used_idx == idx + 1 && st == 0,
            format_args!(
                "{what} of sector {SECTOR}: completed by an interrupt on CPU {} (used {used_idx}, status {st})",
                arrived.map_or(-1, i64::from)
            ),
        );
        c.expect(
            arrived == Ok(cpu),
            format_args!("the interrupt arrived at the CPU asked for ({cpu})"),
        );
    }
    let same = (0..512).all(|i| mem.read8(data + i) == Some(PATTERN_SEED.wrapping_add(i as u8)));
    c.expect(
        same && used_idx == 2,
        format_args!("DMA round trip: sector {SECTOR} written and read back, 512 bytes equal"),
    );
}
