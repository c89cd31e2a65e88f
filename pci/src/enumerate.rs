//! Enumeration: every function reachable from the root bus, with what the
//! platform service needs to know about it ([`Device`]).
//!
//! # Walk
//!
//! Buses are scanned one at a time, starting with the first bus of the
//! ECAM window, in the order they are discovered (breadth first). On a bus
//! each of the 32 devices is probed at function 0; a vendor ID of `ffff`
//! (nothing answers) or `0000` is no device. Functions 1–7 are probed only
//! when function 0's header type has the multi-function bit. A PCI-to-PCI
//! bridge's secondary bus joins the queue of buses to scan; the bridge
//! itself is listed like any other function.
//!
//! # Invariants (bounds against broken or hostile devices)
//!
//! - Each bus is scanned at most once, so the walk reads at most
//!   256 × 32 × 8 functions whatever the bridges say, and ends.
//! - A bridge's secondary bus is scanned only if the firmware configured
//!   it (not 0), it lies above the bridge's own bus, inside the bus range
//!   the bridge's parent forwards (the ECAM window for the root bus), its
//!   subordinate bus is not below it, and no other bridge claimed it first.
//!   Otherwise the bus is reported as [`Found::Skipped`] with the reason.
//!   A bridge loop is such a claim on a bus already scanned.
//! - Broken BARs and capability lists are reported inside the [`Device`]
//!   (per BAR, and as the list's error); nothing panics, and the devices
//!   around a broken one are still found.
//!
//! Probing writes configuration space: BAR sizing ([`crate::bar::probe`])
//! briefly turns decoding off. The platform service enumerates once, at
//! its start, before any driver has a device.

use core::fmt;

use crate::bar::{self, Bar, BarSlot, MAX_BARS};
use crate::cap::{self, id, CapError, Capabilities};
use crate::config::{dword, reg, Bdf, Class, ConfigSpace, HeaderType, Layout};
use crate::msi::{Msi, Msix, MsixError};
use crate::virtio::{VirtioError, VirtioPci};
use core::ops::Range;

/// A range of bus numbers (inclusive): the buses an ECAM window covers
/// (ACPI MCFG's start and end bus), or that a bridge forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusRange {
    pub first: u8,
    pub last: u8,
}

impl BusRange {
    /// Buses 0–255: q35's ECAM window.
    pub const ALL: BusRange = BusRange {
        first: 0,
        last: 255,
    };

    pub fn contains(&self, bus: u8) -> bool {
        (self.first..=self.last).contains(&bus)
    }
}

/// A PCI-to-PCI bridge's bus numbers: the bus it sits on, the bus right
/// behind it, and the highest bus behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BridgeBuses {
    pub primary: u8,
    pub secondary: u8,
    pub subordinate: u8,
}

/// The subsystem IDs of an endpoint (who built the board or the card).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subsystem {
    pub vendor: u16,
    pub device: u16,
}

/// One function, as enumeration found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    pub bdf: Bdf,
    pub vendor: u16,
    pub device: u16,
    pub class: Class,
    pub revision: u8,
    pub header: HeaderType,
    /// Endpoints only.
    pub subsystem: Option<Subsystem>,
    /// The legacy interrupt line the firmware wrote (a hint; 0xff or 0 when
    /// unassigned).
    pub interrupt_line: u8,
    /// The INTx pin the function uses: 0 none, 1–4 INTA–INTD.
    pub interrupt_pin: u8,
    /// Its BARs, sized; slots past the header layout's BARs are `Unused`.
    pub bars: [BarSlot; MAX_BARS],
    pub capabilities: Capabilities,
    /// The MSI capability, parsed, if the list has one.
    pub msi: Option<Result<Msi, CapError>>,
    /// The MSI-X capability, parsed, if the list has one.
    pub msix: Option<Result<Msix, CapError>>,
    /// PCI-to-PCI bridges only.
    pub bridge: Option<BridgeBuses>,
}

impl Device {
    /// BAR `index`, if it is a well-formed BAR.
    pub fn bar(&self, index: usize) -> Option<&Bar> {
        self.bars.get(index).and_then(BarSlot::bar)
    }

    /// The page range of the MSI-X table inside its BAR (see
    /// [`Msix::table_pages`]), or `None` when the function has no usable
    /// MSI-X capability.
    pub fn msix_table_pages(&self) -> Option<Result<Range<u64>, MsixError>> {
        match self.msix {
            Some(Ok(msix)) => Some(msix.table_pages(&self.bars)),
            _ => None,
        }
    }

    /// The function's modern virtio register blocks.
    pub fn virtio<C: ConfigSpace + ?Sized>(&self, cs: &C) -> Result<VirtioPci, VirtioError> {
        VirtioPci::parse(cs, self.bdf, &self.capabilities, &self.bars)
    }
}

impl fmt::Display for Device {
    /// `00:02.0 1af4:1042 class 01:00:00`, as lspci -n starts its lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:04x}:{:04x} class {}",
            self.bdf, self.vendor, self.device, self.class
        )
    }
}

/// A bus behind a bridge that is not scanned, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub bridge: Bdf,
    pub buses: BridgeBuses,
    pub reason: SkipReason,
}

/// Why a bridge's secondary bus is not scanned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// Secondary bus 0: the firmware did not configure the bridge.
    Unconfigured,
    /// The secondary bus is not above the bridge's own bus.
    NotBehindBridge,
    /// The secondary bus is outside what the bridge's parent forwards.
    OutsideParent(BusRange),
    /// The subordinate bus is below the secondary bus.
    SubordinateBelowSecondary,
    /// Another bridge claimed the bus first, or it is scanned already (a
    /// bridge loop).
    AlreadyClaimed,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bridge {} (buses {:02x}/{:02x}/{:02x}): bus {:02x} not scanned: ",
            self.bridge,
            self.buses.primary,
            self.buses.secondary,
            self.buses.subordinate,
            self.buses.secondary
        )?;
        match self.reason {
            SkipReason::Unconfigured => write!(f, "bridge not configured"),
            SkipReason::NotBehindBridge => write!(f, "not above the bridge's own bus"),
            SkipReason::OutsideParent(r) => {
                write!(
                    f,
                    "outside buses {:02x}-{:02x} of its parent",
                    r.first, r.last
                )
            }
            SkipReason::SubordinateBelowSecondary => write!(f, "subordinate below secondary"),
            SkipReason::AlreadyClaimed => write!(f, "already claimed (bridge loop?)"),
        }
    }
}

/// What enumeration reports, one at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "reported one at a time to a callback, never stored in bulk as this enum"
)]
pub enum Found {
    Device(Device),
    Skipped(Skipped),
}

/// Set of bus numbers.
struct BusSet([u64; 4]);

impl BusSet {
    /// Adds `bus`; false if it was there already.
    fn insert(&mut self, bus: u8) -> bool {
        let (word, bit) = (usize::from(bus / 64), bus % 64);
        let new = self.0[word] & 1 << bit == 0;
        self.0[word] |= 1 << bit;
        new
    }
}

/// Enumerates every function reachable from `buses.first` within `buses`
/// and hands each [`Found`] to `found` (module docs: order and bounds).
pub fn enumerate<C: ConfigSpace + ?Sized>(
    cs: &mut C,
    buses: BusRange,
    mut found: impl FnMut(Found),
) {
    if buses.first > buses.last {
        return;
    }
    // Buses to scan, each with the range its parent forwards; each bus is
    // queued at most once (`claimed`), so 256 entries always suffice.
    let mut queue = [(0u8, BusRange::ALL); 256];
    let (mut head, mut tail) = (0, 1);
    queue[0] = (buses.first, buses);
    let mut claimed = BusSet([0; 4]);
    claimed.insert(buses.first);
    while head < tail {
        let (bus, range) = queue[head];
        head += 1;
        for device in 0..Bdf::DEVICES {
            for function in 0..Bdf::FUNCTIONS {
                let Some(bdf) = Bdf::new(bus, device, function) else {
                    break;
                };
                let Some(dev) = probe_function(cs, bdf) else {
                    if function == 0 {
                        break;
                    }
                    continue;
                };
                if let Some(buses) = dev.bridge {
                    let checked = check_secondary(bus, range, buses).and_then(|child| {
                        if claimed.insert(buses.secondary) {
                            Ok(child)
                        } else {
                            Err(SkipReason::AlreadyClaimed)
                        }
                    });
                    match checked {
                        // `claimed` admits each bus once: the queue has room.
                        Ok(child) => {
                            if let Some(slot) = queue.get_mut(tail) {
                                *slot = (buses.secondary, child);
                                tail += 1;
                            }
                        }
                        Err(reason) => found(Found::Skipped(Skipped {
                            bridge: bdf,
                            buses,
                            reason,
                        })),
                    }
                }
                let multifunction = dev.header.multifunction;
                found(Found::Device(dev));
                if function == 0 && !multifunction {
                    break;
                }
            }
        }
    }
}

/// Whether the bus behind a bridge on `bus` (which forwards `range`) may
/// be scanned, and if so the range that bus forwards in turn.
fn check_secondary(bus: u8, range: BusRange, buses: BridgeBuses) -> Result<BusRange, SkipReason> {
    let BridgeBuses {
        secondary,
        subordinate,
        ..
    } = buses;
    if secondary == 0 {
        Err(SkipReason::Unconfigured)
    } else if secondary <= bus {
        Err(SkipReason::NotBehindBridge)
    } else if !range.contains(secondary) {
        Err(SkipReason::OutsideParent(range))
    } else if subordinate < secondary {
        Err(SkipReason::SubordinateBelowSecondary)
    } else {
        Ok(BusRange {
            first: secondary,
            last: subordinate.min(range.last),
        })
    }
}

/// Reads function `at`, sizing its BARs and parsing its capabilities;
/// `None` when nothing answers there.
pub fn probe_function<C: ConfigSpace + ?Sized>(cs: &mut C, at: Bdf) -> Option<Device> {
    let ids = dword(cs, at, reg::VENDOR_ID);
    let vendor = ids as u16;
    if vendor == 0xffff || vendor == 0 {
        return None;
    }
    let class = dword(cs, at, reg::REVISION);
    let header = HeaderType::from_byte((dword(cs, at, reg::CACHE_LINE_SIZE) >> 16) as u8);
    let interrupt = dword(cs, at, reg::INTERRUPT_LINE);
    let bars = bar::probe(cs, at, usize::from(header.layout.bars()));
    let capabilities = cap::read(cs, at, header.layout);
    let subsystem = (header.layout == Layout::Endpoint).then(|| {
        let ids = dword(cs, at, reg::SUBSYSTEM_VENDOR_ID);
        Subsystem {
            vendor: ids as u16,
            device: (ids >> 16) as u16,
        }
    });
    let bridge = (header.layout == Layout::PciBridge).then(|| {
        let buses = dword(cs, at, reg::PRIMARY_BUS);
        BridgeBuses {
            primary: buses as u8,
            secondary: (buses >> 8) as u8,
            subordinate: (buses >> 16) as u8,
        }
    });
    // A function without a known layout has no interrupt registers either.
    let (interrupt_line, interrupt_pin) = match header.layout {
        Layout::Unknown(_) => (0, 0),
        _ => (interrupt as u8, (interrupt >> 8) as u8),
    };
    Some(Device {
        bdf: at,
        vendor,
        device: (ids >> 16) as u16,
        class: Class {
            class: (class >> 24) as u8,
            subclass: (class >> 16) as u8,
            prog_if: (class >> 8) as u8,
        },
        revision: class as u8,
        header,
        subsystem,
        interrupt_line,
        interrupt_pin,
        bars,
        msi: capabilities.find(id::MSI).map(|c| Msi::parse(cs, at, c)),
        msix: capabilities.find(id::MSIX).map(|c| Msix::parse(cs, at, c)),
        capabilities,
        bridge,
    })
}
