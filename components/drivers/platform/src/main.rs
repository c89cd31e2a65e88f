//! platform: the PCI platform service (Genode's `platform_drv`). It owns
//! PCI and hands each driver exactly its devices through a `Platform`
//! session (`rt::session::platform` has the protocol).
//!
//! At start it
//!
//! 1. reads its policy — which driver (session label) gets which devices,
//!    `policy = [{ label = "blk", pci = ["1af4:1042"] }]`, written by xtask
//!    from the drivers' `devices` keys (docs/scenarios.md, "Devices");
//! 2. maps the PCI configuration window (ECAM) from the device memory init
//!    handed it (`interfaces::child::platform`) — where the firmware's
//!    ACPI MCFG says it is, which the kernel answers as the device control
//!    capability's "physical address" — and enumerates every function
//!    reachable from buses 0 and 1 (`pci::enumerate`);
//! 3. places every memory BAR in the 32-bit window [`BAR_WINDOW`] and every
//!    I/O BAR in its I/O-port window — the firmware (qboot) leaves them all
//!    unassigned — largest first, each naturally aligned and on pages of
//!    its own (a page never holds two devices' registers, so handing a
//!    driver a page hands it nothing of another device), and turns
//!    decoding on;
//! 4. makes the frames of every memory BAR from device memory (in address
//!    order: untyped memory is carved from its start), and prints the
//!    device list: `platform: 00:02.0 1af4:1042 class 01:00:00 ...`.
//!
//! A session is opened for a driver only if the policy gives its label at
//! least one device and no other open session holds those devices. On
//! open the service turns bus mastering on for them; when the session
//! closes (the driver closes it or died: init closes its sessions before
//! it takes its memory back) the service turns bus mastering off and
//! resets the devices before it answers — before the DMA memory made from
//! the session's donation goes back.
//!
//! Bad input: a request naming a device, BAR or interrupt that is not the
//! session's is refused with `REFUSED`; a device the policy gives to two
//! drivers is given to neither (logged).
//!
//! INTx is the fallback for a device without MSI ([`Service::intx`], q35's
//! routing). Not yet: buses behind bridges beyond the first two buses'
//! worth of ECAM mapped,
//! and an IOMMU (a driver's device can DMA anywhere: QEMU's intel-iommu is
//! the later fix).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::Cell;

use pci::bar::{BarKind, BarSlot};
use pci::config::reg;
use pci::enumerate::BusRange;
use pci::{Bdf, ConfigSpace, Device, DeviceMatch, Found};
use rt::abi::caddr::own;
use rt::abi::map::Cache;
use rt::abi::object::{self as abi_object, io_ports_range};
use rt::abi::{Error, ObjectType, Rights};
use rt::interfaces::child::platform as slots;
use rt::mmio::Region;
use rt::println;
use rt::session::platform::{self as proto, Platform};
use rt::session::rom;
use rt::session::{Donated, Interface, Label, Provider};
use rt::syscall::{self, Words};

rt::entry!(main);

/// Buses mapped: one 2 MiB frame of ECAM covers buses 0 and 1.
const ECAM_BUSES: u8 = 2;
/// Where memory BARs are placed: above q35's ECAM window, below the I/O
/// APIC and the other chipset registers at 0xfe00_0000 and up.
const BAR_WINDOW: core::ops::Range<u64> = 0xc000_0000..0xfe00_0000;
const PAGE: u64 = 4096;

/// Own slots: the Rom session and the config ROM's frames, the sessions,
/// then everything the service makes (frames, untyped pieces, handlers).
const ROM_SLOT: u32 = slots::FIRST_FREE;
const CONFIG_FIRST: u32 = ROM_SLOT + 1;
const CONFIG_END: u32 = CONFIG_FIRST + 8;
const CONFIG_VA: u64 = 0x10_0000_0000;
const SESSION_FIRST: u32 = CONFIG_END;
const SESSIONS: u32 = 16;
const MADE_FIRST: u32 = SESSION_FIRST + 2 * SESSIONS;

fn main(_arg: u64) -> i32 {
    let policy = match read_policy() {
        Ok(p) => p,
        Err(e) => {
            println!("platform: cannot read the policy: {e}");
            return 1;
        }
    };
    let mut platform = match Service::start(policy) {
        Ok(p) => p,
        Err(e) => {
            println!("platform: cannot start: {e}");
            return 2;
        }
    };
    let provider: Provider<Platform, Client> =
        Provider::new(SESSION_FIRST, SESSION_FIRST + 2 * SESSIONS);
    // Both closures need the service: one at a time, through a cell.
    let service = core::cell::RefCell::new(&mut platform);
    provider.serve(
        |label: &Label, donated: Option<Donated>| service.borrow_mut().open(label, donated),
        |_label: &Label, client: &mut Client, op, words| {
            proto::answer(service.borrow_mut().request(client, op, words))
        },
    )
}

/// One driver's entry of the policy.
struct Rule {
    label: String,
    matches: Vec<DeviceMatch>,
}

fn read_policy() -> Result<Vec<Rule>, String> {
    use alloc::format;
    // SAFETY: CONFIG_VA.. is used by nothing else of this program.
    let tree = unsafe { rom::config(ROM_SLOT, CONFIG_FIRST, CONFIG_END, CONFIG_VA) }?;
    let mut rules = Vec::new();
    let Some(list) = tree.get("policy") else {
        return Ok(rules);
    };
    let list = list.as_array().ok_or("policy: not an array")?;
    for (i, entry) in list.iter().enumerate() {
        let table = entry
            .as_table()
            .ok_or_else(|| format!("policy[{i}]: not a table"))?;
        let label = table
            .get("label")
            .and_then(|v| v.as_str())
            .ok_or_else(|| format!("policy[{i}].label: missing or not a string"))?;
        let mut matches = Vec::new();
        if let Some(pci) = table.get("pci").and_then(|v| v.as_array()) {
            for (j, m) in pci.iter().enumerate() {
                let text = m
                    .as_str()
                    .ok_or_else(|| format!("policy[{i}].pci[{j}]: not a string"))?;
                matches.push(
                    text.parse()
                        .map_err(|e| format!("policy[{i}].pci[{j}]: {e}"))?,
                );
            }
        }
        rules.push(Rule {
            label: label.into(),
            matches,
        });
    }
    Ok(rules)
}

/// The configuration space through the mapped ECAM window.
struct Ecam(Region);

impl ConfigSpace for Ecam {
    fn read32(&self, at: Bdf, offset: u16) -> u32 {
        at.ecam_offset(0)
            .filter(|_| at.bus() < ECAM_BUSES)
            .and_then(|o| self.0.read32(o as usize + usize::from(offset)))
            .unwrap_or(u32::MAX)
    }

    fn write32(&mut self, at: Bdf, offset: u16, value: u32) {
        if let Some(o) = at.ecam_offset(0).filter(|_| at.bus() < ECAM_BUSES) {
            let _ = self.0.write32(o as usize + usize::from(offset), value);
        }
    }
}

/// A placed memory BAR: where, and its frames (own slots).
#[derive(Clone, Copy)]
struct Placed {
    address: u64,
    size: u64,
    io: bool,
    /// First own slot of its frames (memory) or 0 (I/O).
    first: u32,
    frames: u32,
    frame_bits: u32,
}

struct Dev {
    pci: Device,
    bars: [Option<Placed>; 6],
    /// The driver the policy gives it to.
    owner: Option<String>,
    /// Whether an open session holds it (shared with that session's
    /// [`Stop`], which clears it).
    busy: Rc<Cell<bool>>,
    /// The vectors allocated for it: one per MSI-X entry (or 0 for MSI) and
    /// CPU, kept across sessions (the entry is programmed for the CPU asked
    /// for last).
    vectors: Vec<Vector>,
    /// The I/O APIC line its INTx was handed out on ([`Service::intx`]).
    intx_gsi: Option<u32>,
    /// The pages of its MSI-X table the service mapped: (BAR, page index
    /// in the BAR, the mapping), each mapped once.
    msix_pages: Vec<(u8, u64, Region)>,
}

/// An MSI vector the service allocated for a device's interrupt.
#[derive(Clone, Copy)]
struct Vector {
    entry: u16,
    cpu: u32,
    /// Own slot of its IRQ handler.
    handler: u32,
    message: pci::msi::MsiMessage,
}

/// Device memory init handed over, as carving state.
struct Memory {
    slot: u32,
    base: u64,
    size: u64,
    watermark: u64,
}

/// The device memory init handed over and the service's own slots: what
/// frames and handlers are made from, and where they go.
struct Carver {
    memory: Vec<Memory>,
    next_slot: u32,
}

struct Service {
    ecam: Ecam,
    devices: Vec<Dev>,
    carver: Carver,
}

impl Carver {
    /// A new own slot.
    fn slot(&mut self) -> u32 {
        self.next_slot += 1;
        self.next_slot - 1
    }

    /// Makes `count` frames of 2^`bits` bytes each from `phys` on, from
    /// the device memory that covers them, carving off everything below
    /// that is not yet carved; they land in consecutive own slots, the
    /// first returned. `phys` must not lie below what was carved before.
    fn frames_at(&mut self, phys: u64, bits: u32, count: u32) -> Result<u32, Error> {
        let bytes = u64::from(count) << bits;
        let index = self
            .memory
            .iter()
            .position(|m| m.base <= phys && phys + bytes <= m.base + m.size)
            .ok_or(Error::InvalidArgument)?;
        if self.memory[index].watermark > phys {
            return Err(Error::InvalidState);
        }
        // Everything below `phys` not yet carved, in the fewest aligned
        // pieces (retyping advances the block's watermark past them).
        let (untyped, watermark) = (self.memory[index].slot, self.memory[index].watermark);
        let (min, max) = (abi_object::MIN_UNTYPED_BITS, abi_object::MAX_UNTYPED_BITS);
        for (_, piece) in abi_object::aligned_blocks(watermark, phys, min, max) {
            let dst = self.slot();
            syscall::retype(
                own(untyped),
                ObjectType::Untyped,
                u64::from(piece),
                own(dst),
                1,
            )?;
        }
        self.memory[index].watermark = phys;
        let kind = if bits == 21 {
            ObjectType::Frame2M
        } else {
            ObjectType::Frame4K
        };
        let first = self.next_slot;
        self.next_slot += count;
        syscall::retype(
            own(self.memory[index].slot),
            kind,
            0,
            own(first),
            u64::from(count),
        )?;
        self.memory[index].watermark += bytes;
        Ok(first)
    }
}

/// A driver's session.
struct Client {
    label: String,
    /// Indices into `Service::devices`.
    devices: Vec<usize>,
    donated: Donated,
    next_slot: u32,
    dma_used: u64,
    stops: Vec<Stop>,
    /// The donated slot of its read-only control capability
    /// ([`proto::TRANSLATE`]), if it asked.
    translate: Option<u32>,
}

impl Service {
    fn start(policy: Vec<Rule>) -> Result<Service, String> {
        let control = own(slots::CONTROL);
        let mut memory = Vec::new();
        for i in 0..slots::DEVICE_MEMORY_SLOTS {
            let slot = slots::DEVICE_MEMORY_FIRST + i;
            let Ok(info) = syscall::phys_address(control, own(slot)) else {
                break;
            };
            memory.push(Memory {
                slot,
                base: info.phys,
                size: 1 << info.size_bits,
                watermark: info.phys,
            });
        }
        let mut carver = Carver {
            memory,
            next_slot: MADE_FIRST,
        };
        // The configuration window the firmware's ACPI MCFG names (q35:
        // 0xb000_0000): the kernel answers it for the control capability.
        let window = syscall::phys_address(control, control).map_err(|e| {
            alloc::format!("no PCI configuration window (the kernel found no ACPI MCFG: {e})")
        })?;
        let ecam = window.phys;
        println!(
            "platform: PCI configuration window at {ecam:#x} ({} buses; buses 0..{} mapped)",
            (1u64 << window.size_bits) >> 20,
            ECAM_BUSES
        );
        let ecam_frame = carver
            .frames_at(ecam, 21, 1)
            .map_err(|e| alloc::format!("ECAM at {ecam:#x}: {e}"))?;
        let region = Region::map_new([own(ecam_frame)].into_iter(), 1, 2 << 20, Cache::Uncached)
            .map_err(|e| alloc::format!("mapping ECAM: {e}"))?;
        let mut service = Service {
            ecam: Ecam(region),
            devices: Vec::new(),
            carver,
        };
        let mut found = Vec::new();
        pci::enumerate::enumerate(
            &mut service.ecam,
            BusRange {
                first: 0,
                last: ECAM_BUSES - 1,
            },
            |f| match f {
                Found::Device(d) => found.push(d),
                Found::Skipped(s) => println!("platform: skipped: {s:?}"),
            },
        );
        service.devices = found
            .into_iter()
            .map(|pci| Dev {
                pci,
                bars: [None; 6],
                owner: None,
                busy: Rc::new(Cell::new(false)),
                vectors: Vec::new(),
                msix_pages: Vec::new(),
                intx_gsi: None,
            })
            .collect();
        service.place_bars()?;
        service.assign(&policy);
        service.print();
        Ok(service)
    }

    /// Places every BAR (module doc, step 3) and makes the memory BARs'
    /// frames.
    fn place_bars(&mut self) -> Result<(), String> {
        let mut memory: Vec<(usize, usize, u64)> = Vec::new();
        let mut io: Vec<(usize, usize, u64)> = Vec::new();
        for (d, dev) in self.devices.iter().enumerate() {
            for (b, slot) in dev.pci.bars.iter().enumerate() {
                if let BarSlot::Bar(bar) = slot {
                    match bar.kind {
                        BarKind::Io => io.push((d, b, bar.size)),
                        _ => memory.push((d, b, bar.size.max(PAGE))),
                    }
                }
            }
        }
        // Largest first: each stays naturally aligned with no gaps.
        memory.sort_by_key(|m| core::cmp::Reverse(m.2));
        io.sort_by_key(|p| core::cmp::Reverse(p.2));
        let mut next = BAR_WINDOW.start;
        for &(d, b, size) in &memory {
            let address = next.next_multiple_of(size);
            if address + size > BAR_WINDOW.end {
                println!(
                    "platform: {} BAR {b}: {size:#x} bytes do not fit the window; left off",
                    self.devices[d].pci.bdf
                );
                continue;
            }
            next = address + size;
            self.write_bar(d, b, address);
            let frame_bits = if size >= 2 << 20 { 21 } else { 12 };
            // At most 256 frames of a BAR (one Retype): 512 MiB in 2 MiB
            // frames; larger BARs are not met on the machines emulated.
            let frames = (size >> frame_bits).min(256) as u32;
            let first = self
                .carver
                .frames_at(address, frame_bits, frames)
                .map_err(|e| alloc::format!("frames at {address:#x}: {e}"))?;
            self.devices[d].bars[b] = Some(Placed {
                address,
                size,
                io: false,
                first,
                frames,
                frame_bits,
            });
        }
        let (io_first, io_last) = (slots::IO_WINDOW_FIRST, slots::IO_WINDOW_LAST);
        let mut next = u64::from(io_first);
        for &(d, b, size) in &io {
            let address = next.next_multiple_of(size);
            if address + size > u64::from(io_last) + 1 {
                println!(
                    "platform: {} BAR {b}: {size} ports do not fit the I/O window; left off",
                    self.devices[d].pci.bdf
                );
                continue;
            }
            next = address + size;
            self.write_bar(d, b, address);
            self.devices[d].bars[b] = Some(Placed {
                address,
                size,
                io: true,
                first: 0,
                frames: 0,
                frame_bits: 0,
            });
        }
        for dev in &self.devices {
            let has = |io: bool| dev.bars.iter().flatten().any(|p| p.io == io);
            let mut set = 0;
            if has(false) {
                set |= reg::COMMAND_MEMORY;
            }
            if has(true) {
                set |= reg::COMMAND_IO;
            }
            pci::config::set_command(&mut self.ecam, dev.pci.bdf, set, reg::COMMAND_BUS_MASTER);
        }
        Ok(())
    }

    /// Programs BAR `b` of device `d` with `address` (decoding is off
    /// meanwhile: the firmware left it off, placement turns it on after).
    fn write_bar(&mut self, d: usize, b: usize, address: u64) {
        let bdf = self.devices[d].pci.bdf;
        let offset = reg::BAR0 + 4 * b as u16;
        let low = self.ecam.read32(bdf, offset) & 0xf;
        let flags = if matches!(self.devices[d].pci.bars[b], BarSlot::Bar(bar) if bar.kind == BarKind::Io)
        {
            low & 0x3
        } else {
            low
        };
        self.ecam.write32(bdf, offset, address as u32 | flags);
        if matches!(self.devices[d].pci.bars[b], BarSlot::Bar(bar) if bar.kind == BarKind::Memory64)
        {
            self.ecam.write32(bdf, offset + 4, (address >> 32) as u32);
        }
    }

    /// Gives each device to the driver whose policy selects it; a device
    /// two drivers' policies select goes to neither.
    fn assign(&mut self, policy: &[Rule]) {
        for dev in &mut self.devices {
            let mut owners = policy
                .iter()
                .filter(|r| r.matches.iter().any(|m| m.matches(&dev.pci)));
            let first = owners.next();
            match (first, owners.next()) {
                (Some(rule), None) => dev.owner = Some(rule.label.clone()),
                (Some(a), Some(b)) => println!(
                    "platform: {} is selected by the policies of {} and {}: a device has one \
                     driver; given to neither",
                    dev.pci.bdf, a.label, b.label
                ),
                _ => {}
            }
        }
    }

    fn print(&self) {
        for dev in &self.devices {
            let p = &dev.pci;
            let mut irq = String::new();
            if let Some(Ok(msix)) = &p.msix {
                irq = alloc::format!(" msi-x {}", msix.table_size());
            } else if let Some(Ok(msi)) = &p.msi {
                irq = alloc::format!(" msi {}", msi.vectors());
            }
            println!(
                "platform: {p}{irq}{}",
                match &dev.owner {
                    Some(o) => alloc::format!(" -> {o}"),
                    None => String::new(),
                }
            );
            for (b, placed) in dev.bars.iter().enumerate() {
                if let Some(placed) = placed {
                    println!(
                        "platform:   bar {b}: {} {:#x} at {:#x}",
                        if placed.io { "io" } else { "memory" },
                        placed.size,
                        placed.address
                    );
                }
            }
        }
        println!("platform: {} PCI functions", self.devices.len());
    }

    /// Opens a session for `label`: its devices, which must be free.
    fn open(&mut self, label: &Label, donated: Option<Donated>) -> Result<Client, u64> {
        let name = label.as_str();
        let donated = donated.ok_or(rt::interfaces::session::REFUSED_QUOTA)?;
        let devices: Vec<usize> = (0..self.devices.len())
            .filter(|&d| self.devices[d].owner.as_deref() == Some(name))
            .collect();
        if devices.is_empty() {
            println!("platform: refused a session for {name}: no device is assigned to it");
            return Err(proto::REFUSED);
        }
        if let Some(&d) = devices.iter().find(|&&d| self.devices[d].busy.get()) {
            println!(
                "platform: refused a session for {name}: {} is in use by another session",
                self.devices[d].pci.bdf
            );
            return Err(proto::REFUSED);
        }
        let mut stops = Vec::new();
        for &d in &devices {
            self.devices[d].busy.set(true);
            stops.push(self.stopper(d));
            let bdf = self.devices[d].pci.bdf;
            pci::config::set_command(&mut self.ecam, bdf, reg::COMMAND_BUS_MASTER, 0);
        }
        println!("platform: session for {name}: {} devices", devices.len());
        Ok(Client {
            label: name.into(),
            devices,
            donated,
            next_slot: 0,
            dma_used: 0,
            stops,
            translate: None,
        })
    }

    fn request(&mut self, client: &mut Client, op: u64, w: Words) -> Result<Words, u64> {
        match op {
            proto::DEVICE => {
                let dev = self.device_of(client, w[0])?;
                let p = &dev.pci;
                let class = u32::from(p.class.class) << 16
                    | u32::from(p.class.subclass) << 8
                    | u32::from(p.class.prog_if);
                let bdf = u16::from(p.bdf.bus()) << 8
                    | u16::from(p.bdf.device()) << 3
                    | u16::from(p.bdf.function());
                let bars = dev
                    .bars
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.is_some())
                    .fold(0u64, |m, (i, _)| m | 1 << i);
                Ok([
                    u64::from(p.vendor) | u64::from(p.device) << 16 | u64::from(class) << 32,
                    u64::from(bdf),
                    bars,
                    0,
                ])
            }
            proto::BAR => self.lend_bar(client, w[0], w[1]),
            proto::IRQ => self.lend_irq(client, w[0], w[1], w[2]),
            proto::DMA => self.lend_dma(client, w[0]),
            proto::TRANSLATE => {
                // Read only: `PhysAddress` of the driver's own frames, no
                // MSI vectors. Once per session.
                if client.translate.is_some() {
                    return Err(proto::REFUSED);
                }
                let slot = Self::take_slots(client, 1)?;
                syscall::cap_mint(
                    own(slots::CONTROL),
                    client.donated.slot(slot),
                    Rights::READ,
                    0,
                )
                .map_err(|_| proto::REFUSED)?;
                client.translate = Some(slot);
                Ok([u64::from(slot), 0, 0, 0])
            }
            proto::CONFIG => {
                let dev = self.device_of(client, w[0])?;
                let offset = u16::try_from(w[1])
                    .ok()
                    .filter(|o| *o < 0x100 && o % 4 == 0)
                    .ok_or(proto::REFUSED)?;
                Ok([u64::from(self.ecam.read32(dev.pci.bdf, offset)), 0, 0, 0])
            }
            proto::VIRTIO => {
                let dev = self.device_of(client, w[0])?;
                let virtio = dev.pci.virtio(&self.ecam).map_err(|_| proto::REFUSED)?;
                let (block, multiplier) = match w[1] {
                    1 => (virtio.common, 0),
                    2 => (virtio.notify, virtio.notify_off_multiplier),
                    3 => (virtio.isr, 0),
                    4 => (virtio.device.ok_or(proto::REFUSED)?, 0),
                    _ => return Err(proto::REFUSED),
                };
                Ok([
                    u64::from(block.bar),
                    u64::from(block.offset),
                    u64::from(block.length),
                    u64::from(multiplier),
                ])
            }
            _ => Err(proto::UNKNOWN),
        }
    }

    fn device_of(&self, client: &Client, index: u64) -> Result<&Dev, u64> {
        let d = usize::try_from(index)
            .ok()
            .and_then(|i| client.devices.get(i))
            .ok_or(proto::REFUSED)?;
        Ok(&self.devices[*d])
    }

    /// Takes `n` donated slots of `client`'s; the first one's index.
    fn take_slots(client: &mut Client, n: u32) -> Result<u32, u64> {
        let first = client.next_slot;
        let end = first.checked_add(n).ok_or(proto::NO_SLOTS)?;
        if end > Platform::CAPS {
            return Err(proto::NO_SLOTS);
        }
        client.next_slot = end;
        Ok(first)
    }

    fn lend_bar(&mut self, client: &mut Client, index: u64, bar: u64) -> Result<Words, u64> {
        let dev = self.device_of(client, index)?;
        let placed = usize::try_from(bar)
            .ok()
            .and_then(|b| dev.bars.get(b).copied().flatten())
            .ok_or(proto::REFUSED)?;
        // Pages holding the MSI-X table or its pending bits stay the
        // service's: a driver that could write the table could aim
        // interrupts at any vector.
        let mut hidden: Vec<core::ops::Range<u64>> = Vec::new();
        if let Some(Ok(msix)) = &dev.pci.msix {
            for (location, pages) in [
                (msix.table, msix.table_pages(&dev.pci.bars)),
                (msix.pba, msix.pba_pages(&dev.pci.bars)),
            ] {
                if u64::from(location.bar) == bar {
                    hidden.push(pages.map_err(|_| proto::REFUSED)?);
                }
            }
        }
        if placed.io {
            let first = Self::take_slots(client, 1)?;
            let range = io_ports_range(
                placed.address as u16,
                (placed.address + placed.size - 1) as u16,
            );
            syscall::cap_mint(
                own(slots::IO_PORTS),
                client.donated.slot(first),
                Rights::ALL,
                range,
            )
            .map_err(|_| proto::REFUSED)?;
            return Ok([placed.address, proto::KIND_IO, u64::from(first), 1]);
        }
        let first = Self::take_slots(client, placed.frames)?;
        for i in 0..placed.frames {
            let offset = u64::from(i) << placed.frame_bits;
            let end = offset + (1 << placed.frame_bits);
            if hidden.iter().any(|h| h.start < end && offset < h.end) {
                continue;
            }
            syscall::cap_copy(own(placed.first + i), client.donated.slot(first + i))
                .map_err(|_| proto::REFUSED)?;
        }
        Ok([
            placed.size,
            proto::KIND_MEMORY,
            u64::from(first),
            u64::from(placed.frames) | u64::from(placed.frame_bits) << 32,
        ])
    }

    fn lend_irq(
        &mut self,
        client: &mut Client,
        index: u64,
        entry: u64,
        cpu: u64,
    ) -> Result<Words, u64> {
        let d = *usize::try_from(index)
            .ok()
            .and_then(|i| client.devices.get(i))
            .ok_or(proto::REFUSED)?;
        let entry = u16::try_from(entry).map_err(|_| proto::REFUSED)?;
        let cpu = u32::try_from(cpu).map_err(|_| proto::REFUSED)?;
        let (handler, kind) = if entry == proto::INTX {
            self.intx(d)?
        } else {
            self.vector(d, entry, cpu)?
        };
        let first = Self::take_slots(client, 1)?;
        syscall::cap_copy(own(handler), client.donated.slot(first)).map_err(|_| proto::REFUSED)?;
        Ok([u64::from(first), kind, 0, 0])
    }

    /// The IRQ handler (own slot) of `entry` of device `d`, allocated
    /// and programmed into the device on first use.
    fn vector(&mut self, d: usize, entry: u16, cpu: u32) -> Result<(u32, u64), u64> {
        let bdf = self.devices[d].pci.bdf;
        let msix = self.devices[d].pci.msix.and_then(Result::ok);
        let msi = self.devices[d].pci.msi.and_then(Result::ok);
        let kind = match (msix, msi) {
            (Some(_), _) => proto::IRQ_MSIX,
            (None, Some(_)) if entry == 0 => proto::IRQ_MSI,
            // Neither MSI nor MSI-X: the legacy line is all there is.
            (None, None) if entry == 0 => return self.intx(d),
            _ => return Err(proto::REFUSED),
        };
        // A bad entry is refused before a vector is spent on it.
        let offset = match msix {
            Some(msix) => Some(msix.entry_offset(entry).ok_or(proto::REFUSED)?),
            None => None,
        };
        let cached = self.devices[d]
            .vectors
            .iter()
            .find(|v| v.entry == entry && v.cpu == cpu)
            .map(|v| (v.handler, v.message));
        let (handler, message) = match cached {
            Some(known) => known,
            None => {
                let handler = self.carver.slot();
                let m =
                    syscall::msi_alloc(own(slots::CONTROL), own(handler), cpu).map_err(|e| {
                        println!("platform: no MSI vector for {bdf}: {e}");
                        proto::REFUSED
                    })?;
                let message = pci::msi::MsiMessage {
                    address: m.address,
                    data: m.data,
                };
                self.devices[d].vectors.push(Vector {
                    entry,
                    cpu,
                    handler,
                    message,
                });
                (handler, message)
            }
        };
        // Programmed on every request: the entry delivers to the CPU the
        // latest session asked for (an earlier session's may differ).
        if let (Some(msix), Some(offset)) = (msix, offset) {
            let (table, at) = self.msix_window(d, msix.table.bar, u64::from(offset))?;
            for (i, word) in message.msix_entry(false).into_iter().enumerate() {
                table.write32(at + 4 * i, word).ok_or(proto::REFUSED)?;
            }
            if let Some(msi) = msi {
                pci::msi::disable_msi(&mut self.ecam, bdf, &msi);
            }
            pci::msi::set_msix_control(&mut self.ecam, bdf, &msix, true, false);
        } else if let Some(msi) = msi {
            pci::msi::program_msi(&mut self.ecam, bdf, &msi, message)
                .map_err(|_| proto::REFUSED)?;
        }
        pci::config::set_command(&mut self.ecam, bdf, reg::COMMAND_INTX_DISABLE, 0);
        Ok((handler, kind))
    }

    /// The legacy interrupt line (INTx) of device `d`, the fallback for a
    /// device without MSI or a driver that asks for it: the IRQ handler of
    /// the I/O APIC line (GSI) its pin arrives at, with MSI and MSI-X
    /// turned off in the device and INTx on. Where a pin arrives is the
    /// chipset's routing, which the ACPI `_PRT` describes (AML, not read
    /// here); on q35 (QEMU's ICH9 routing for bus 0) pin p (INTA = 0) of
    /// slot s goes to PIRQ E–H, `(s + p) mod 4 + 4`, and PIRQ A–H arrive at
    /// GSI 16–23. Only bus 0 is known. Lines are shared between slots: a
    /// line another device's session uses is refused (one notification
    /// per line in the kernel).
    fn intx(&mut self, d: usize) -> Result<(u32, u64), u64> {
        let p = self.devices[d].pci;
        if p.interrupt_pin == 0 || p.interrupt_pin > 4 || p.bdf.bus() != 0 {
            return Err(proto::REFUSED);
        }
        let pirq = (u32::from(p.bdf.device()) + u32::from(p.interrupt_pin) - 1) % 4 + 4;
        let gsi = slots::PCI_GSI_FIRST + pirq;
        let line = slots::PCI_IRQ_FIRST + pirq;
        // Another device's open session already has this line.
        let shared = self
            .devices
            .iter()
            .enumerate()
            .any(|(o, dev)| o != d && dev.busy.get() && dev.intx_gsi == Some(gsi));
        if shared {
            println!(
                "platform: {}: INTx line GSI {gsi} is in use by another device's session",
                p.bdf
            );
            return Err(proto::REFUSED);
        }
        if let Some(Ok(msix)) = p.msix {
            pci::msi::set_msix_control(&mut self.ecam, p.bdf, &msix, false, false);
        }
        if let Some(Ok(msi)) = p.msi {
            pci::msi::disable_msi(&mut self.ecam, p.bdf, &msi);
        }
        pci::config::set_command(&mut self.ecam, p.bdf, 0, reg::COMMAND_INTX_DISABLE);
        self.devices[d].intx_gsi = Some(gsi);
        println!(
            "platform: {}: INTx pin {} -> GSI {gsi}",
            p.bdf,
            (b'A' + p.interrupt_pin - 1) as char
        );
        Ok((line, proto::IRQ_INTX))
    }

    /// The mapped MSI-X table page of device `d` holding `offset` of BAR
    /// `bar` (mapped on first use, kept), and the offset in it.
    fn msix_window(&mut self, d: usize, bar: u8, offset: u64) -> Result<(&Region, usize), u64> {
        let page = offset / PAGE;
        let known = self.devices[d]
            .msix_pages
            .iter()
            .position(|(b, p, _)| *b == bar && *p == page);
        let index = match known {
            Some(i) => i,
            None => {
                let (region, _) = self.own_map(d, bar, page * PAGE)?;
                self.devices[d].msix_pages.push((bar, page, region));
                self.devices[d].msix_pages.len() - 1
            }
        };
        let region = &self.devices[d].msix_pages[index].2;
        // The window is a whole frame: the offset of `offset` in it.
        let at = (offset & (region.len() as u64 - 1)) as usize;
        Ok((region, at))
    }

    /// Maps the page of BAR `bar` of device `d` holding `offset` into the
    /// service (a copy of its frame capability: the driver's copies map
    /// elsewhere) and returns it with the offset inside the window.
    fn own_map(&mut self, d: usize, bar: u8, offset: u64) -> Result<(Region, usize), u64> {
        let placed = self.devices[d]
            .bars
            .get(usize::from(bar))
            .copied()
            .flatten()
            .filter(|p| !p.io)
            .ok_or(proto::REFUSED)?;
        let frame = placed.first + (offset >> placed.frame_bits) as u32;
        let copy = self.carver.slot();
        syscall::cap_copy(own(frame), own(copy)).map_err(|_| proto::REFUSED)?;
        let bytes = 1usize << placed.frame_bits;
        let region = Region::map_new([own(copy)].into_iter(), 1, bytes, Cache::Uncached)
            .map_err(|_| proto::REFUSED)?;
        Ok((region, (offset & (bytes as u64 - 1)) as usize))
    }

    fn lend_dma(&mut self, client: &mut Client, bytes: u64) -> Result<Words, u64> {
        if !bytes.is_power_of_two() || bytes < PAGE {
            return Err(proto::REFUSED);
        }
        let used = client.dma_used.checked_add(bytes).ok_or(proto::NO_MEMORY)?;
        if used > Platform::RAM {
            return Err(proto::NO_MEMORY);
        }
        let frames = (bytes / PAGE) as u32;
        if u64::from(frames) > 256 {
            // One Retype makes at most 256 objects.
            return Err(proto::REFUSED);
        }
        let first = Self::take_slots(client, 1 + frames)?;
        let block = client.donated.slot(first);
        syscall::retype(
            client.donated.untyped(),
            ObjectType::Untyped,
            u64::from(bytes.trailing_zeros()),
            block,
            1,
        )
        .map_err(|_| proto::NO_MEMORY)?;
        syscall::retype(
            block,
            ObjectType::Frame4K,
            0,
            client.donated.slot(first + 1),
            u64::from(frames),
        )
        .map_err(|_| proto::NO_MEMORY)?;
        let info = syscall::phys_address(own(slots::CONTROL), block).map_err(|_| proto::REFUSED)?;
        client.dma_used = used;
        Ok([info.phys, u64::from(first + 1), u64::from(frames), 0])
    }

    /// What it takes to stop device `d` when its session closes (its
    /// virtio status register mapped now, so that the close cannot fail).
    fn stopper(&mut self, d: usize) -> Stop {
        let virtio_status = self.devices[d]
            .pci
            .virtio(&self.ecam)
            .ok()
            .and_then(|v| {
                self.own_map(d, v.common.bar, u64::from(v.common.offset))
                    .ok()
            })
            .map(|(region, at)| (region, at + pci::virtio::common::DEVICE_STATUS as usize));
        Stop {
            bdf: self.devices[d].pci.bdf,
            // SAFETY: the ECAM window stays mapped for the program's life;
            // every access is volatile and the program has one thread, so
            // this second view of it races with nothing.
            ecam: Ecam(unsafe { Region::from_mapped(self.ecam.0.base(), self.ecam.0.len()) }),
            virtio_status,
            busy: self.devices[d].busy.clone(),
        }
    }
}

/// How to stop one device of a session.
struct Stop {
    bdf: Bdf,
    ecam: Ecam,
    virtio_status: Option<(Region, usize)>,
    busy: Rc<Cell<bool>>,
}

impl Drop for Client {
    /// The provider drops a session's state when the session closes,
    /// before it answers the close: bus mastering off, then a reset where
    /// the service knows how (a virtio device: status 0, which makes it
    /// forget its queues) — before the donation, the DMA memory, goes
    /// back.
    fn drop(&mut self) {
        if let Some(slot) = self.translate {
            // SAFETY: a control capability; nothing is mapped through it.
            let _ = unsafe { syscall::cap_delete(self.donated.slot(slot)) };
        }
        for stop in &mut self.stops {
            pci::config::set_command(&mut stop.ecam, stop.bdf, 0, reg::COMMAND_BUS_MASTER);
            if let Some((region, at)) = &stop.virtio_status {
                let _ = region.write8(*at, 0);
            }
            stop.busy.set(false);
        }
        println!(
            "platform: session of {} closed: {} devices stopped (bus mastering off, reset)",
            self.label,
            self.stops.len()
        );
    }
}
