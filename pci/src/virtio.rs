//! virtio over PCI, modern interface (virtio 1.x, section 4.1): which
//! functions are virtio devices, where their register blocks are, and the
//! layout of the common configuration block.
//!
//! # Where the registers are
//!
//! A modern virtio function describes its register blocks with
//! vendor-specific capabilities (ID 0x09), each `virtio_pci_cap`
//! (4.1.4): `cap_len` at +2, `cfg_type` at +3, `bar` at +4, `offset` at +8
//! and `length` at +12; the notification capability adds
//! `notify_off_multiplier` at +16. [`VirtioPci::parse`] turns them into
//! [`Region`]s: the common configuration (feature negotiation, status,
//! queue setup), the notification area (one doorbell per queue, at
//! `queue_notify_off × notify_off_multiplier`), the ISR status byte, the
//! device-specific configuration, and the location of the PCI
//! configuration access capability.
//!
//! # Validation
//!
//! Following 4.1.4.1 and the driver requirements after it:
//! - capabilities of an unknown `cfg_type` are ignored, and so are
//!   capabilities naming a reserved BAR (6–255) — the specification
//!   demands that so later versions can add to the list; a required block
//!   that is missing says which reserved BAR its ignored capability named;
//! - the first capability of each type is the one used; for it, a
//!   capability shorter than its structure, a BAR that is not a usable BAR
//!   of the function, a block running past its BAR's size, a block shorter
//!   than its registers or an odd `notify_off_multiplier` is an error, not a
//!   guess;
//! - common, notify and ISR are required; the device block is optional
//!   (some device types have none).
//!
//! Taken from `virtio-drivers` 0.13 (read as a reference, not copied):
//! nothing but the register offsets and feature numbers, which are the
//! specification's. Its transport, queues and DMA model are not used: it
//! hard-codes small queues, spin-waits for completions, notifies per
//! request, cannot set MSI-X vectors and wants bus addresses for arbitrary
//! memory (issue 15).

use core::fmt;

use crate::bar::{BarSlot, MAX_BARS};
use crate::cap::{id, CapError, Capabilities, Capability};
use crate::config::{byte, dword, Bdf, ConfigSpace};

/// The vendor ID of every virtio function (Red Hat, Inc.).
pub const VENDOR_ID: u16 = 0x1af4;
/// A modern function's device ID is this plus the virtio device type.
pub const MODERN_DEVICE_ID_BASE: u16 = 0x1040;
/// The last device ID a modern virtio function may have.
pub const MODERN_DEVICE_ID_LAST: u16 = 0x107f;

/// virtio device types (5, "Device Types").
pub mod device_type {
    pub const NETWORK: u16 = 1;
    pub const BLOCK: u16 = 2;
    pub const CONSOLE: u16 = 3;
    pub const ENTROPY: u16 = 4;
    pub const BALLOON: u16 = 5;
    pub const SCSI: u16 = 8;
    pub const GPU: u16 = 16;
    pub const INPUT: u16 = 18;
    pub const SOCKET: u16 = 19;
}

/// The virtio device type of a modern (non-transitional) virtio function,
/// or `None` for anything else. Transitional functions (0x1000–0x103f)
/// are not driven: Pecan speaks only the modern interface.
pub fn modern_device_type(vendor: u16, device: u16) -> Option<u16> {
    (vendor == VENDOR_ID && (MODERN_DEVICE_ID_BASE + 1..=MODERN_DEVICE_ID_LAST).contains(&device))
        .then(|| device - MODERN_DEVICE_ID_BASE)
}

/// `cfg_type` values of `virtio_pci_cap`.
pub mod cfg_type {
    pub const COMMON: u8 = 1;
    pub const NOTIFY: u8 = 2;
    pub const ISR: u8 = 3;
    pub const DEVICE: u8 = 4;
    pub const PCI_CFG: u8 = 5;
    pub const SHARED_MEMORY: u8 = 8;
    pub const VENDOR: u8 = 9;
}

/// Offsets in `virtio_pci_cap`.
pub mod cap_field {
    pub const CAP_LEN: u8 = 2;
    pub const CFG_TYPE: u8 = 3;
    pub const BAR: u8 = 4;
    pub const ID: u8 = 5;
    pub const OFFSET: u8 = 8;
    pub const LENGTH: u8 = 12;
    /// In the notification capability only.
    pub const NOTIFY_OFF_MULTIPLIER: u8 = 16;
    /// Bytes of `virtio_pci_cap`.
    pub const SIZE: u8 = 16;
    /// Bytes of `virtio_pci_notify_cap` and of `virtio_pci_cfg_cap`.
    pub const EXTENDED_SIZE: u8 = 20;
}

/// Offsets (in the common configuration block) of
/// `virtio_pci_common_cfg`'s registers (4.1.4.3), with their widths.
pub mod common {
    /// u32: which 32 bits of the device's features `DEVICE_FEATURE` shows.
    pub const DEVICE_FEATURE_SELECT: u32 = 0x00;
    /// u32, read-only.
    pub const DEVICE_FEATURE: u32 = 0x04;
    /// u32: which 32 bits of the driver's features `DRIVER_FEATURE` takes.
    pub const DRIVER_FEATURE_SELECT: u32 = 0x08;
    /// u32.
    pub const DRIVER_FEATURE: u32 = 0x0c;
    /// u16: MSI-X entry for configuration changes ([`super::NO_VECTOR`]: none).
    pub const CONFIG_MSIX_VECTOR: u32 = 0x10;
    /// u16, read-only.
    pub const NUM_QUEUES: u32 = 0x12;
    /// u8: [`super::status`] bits; writing 0 resets the device.
    pub const DEVICE_STATUS: u32 = 0x14;
    /// u8, read-only: changes whenever the device configuration does.
    pub const CONFIG_GENERATION: u32 = 0x15;
    /// u16: which queue the `QUEUE_*` registers show.
    pub const QUEUE_SELECT: u32 = 0x16;
    /// u16: the queue's size (the device's maximum on reset; 0 = no queue).
    pub const QUEUE_SIZE: u32 = 0x18;
    /// u16: MSI-X entry for this queue.
    pub const QUEUE_MSIX_VECTOR: u32 = 0x1a;
    /// u16: 1 once the driver has set the queue up.
    pub const QUEUE_ENABLE: u32 = 0x1c;
    /// u16, read-only: the queue's doorbell index in the notify block.
    pub const QUEUE_NOTIFY_OFF: u32 = 0x1e;
    /// u64: bus address of the descriptor table.
    pub const QUEUE_DESC: u32 = 0x20;
    /// u64: bus address of the driver (available) ring.
    pub const QUEUE_DRIVER: u32 = 0x28;
    /// u64: bus address of the device (used) ring.
    pub const QUEUE_DEVICE: u32 = 0x30;
    /// Bytes of the 1.0 layout: every register above.
    pub const LEN: u32 = 0x38;
}

/// The `msix_vector` value meaning "no interrupt".
pub const NO_VECTOR: u16 = 0xffff;

/// Device status bits (2.1).
pub mod status {
    pub const ACKNOWLEDGE: u8 = 1;
    pub const DRIVER: u8 = 2;
    pub const DRIVER_OK: u8 = 4;
    pub const FEATURES_OK: u8 = 8;
    pub const DEVICE_NEEDS_RESET: u8 = 64;
    pub const FAILED: u8 = 128;
}

/// ISR status bits (4.1.4.5), read-to-clear; only meaningful without MSI-X.
pub mod isr {
    pub const QUEUE: u8 = 1;
    pub const CONFIG: u8 = 2;
}

/// Bit numbers of the device-independent feature bits (6).
pub mod feature {
    pub const RING_INDIRECT_DESC: u32 = 28;
    pub const RING_EVENT_IDX: u32 = 29;
    pub const VERSION_1: u32 = 32;
    pub const ACCESS_PLATFORM: u32 = 33;
    pub const RING_PACKED: u32 = 34;
    pub const IN_ORDER: u32 = 35;
    pub const ORDER_PLATFORM: u32 = 36;
    pub const SR_IOV: u32 = 37;
    pub const NOTIFICATION_DATA: u32 = 38;
    pub const NOTIF_CONFIG_DATA: u32 = 39;
    pub const RING_RESET: u32 = 40;
}

/// A register block: `length` bytes at `offset` in BAR `bar`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub bar: u8,
    pub offset: u32,
    pub length: u32,
}

/// Where a modern virtio function's registers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtioPci {
    pub common: Region,
    pub notify: Region,
    /// Bytes between consecutive `queue_notify_off` values' doorbells.
    pub notify_off_multiplier: u32,
    pub isr: Region,
    pub device: Option<Region>,
    /// The PCI configuration access capability (an alternative window
    /// onto the BARs through configuration space), if present.
    pub pci_cfg: Option<Capability>,
}

/// Why a function's virtio capabilities are unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VirtioError {
    /// A capability's body runs past the first 256 bytes.
    Cap(CapError),
    /// The capability of `cfg_type` says it is `cap_len` bytes, fewer than
    /// its structure's `needs`.
    CapTooShort {
        cfg_type: u8,
        cap_len: u8,
        needs: u8,
    },
    /// No usable capability of the required `cfg_type`; `ignored_bar` is
    /// the reserved BAR value of one that was ignored, if any.
    Missing {
        cfg_type: u8,
        ignored_bar: Option<u8>,
    },
    /// The block of `cfg_type` is in a BAR slot the function does not
    /// implement as a BAR (unused, broken, or a 64-bit BAR's upper half).
    BarNotUsable { cfg_type: u8, bar: u8 },
    /// The block of `cfg_type` runs past its BAR's size.
    OutsideBar {
        cfg_type: u8,
        region: Region,
        bar_size: u64,
    },
    /// The block of `cfg_type` is `length` bytes, fewer than its registers'
    /// `needs`.
    BlockTooShort {
        cfg_type: u8,
        length: u32,
        needs: u32,
    },
    /// `notify_off_multiplier` must be 0 or an even power of two.
    BadNotifyMultiplier(u32),
}

impl fmt::Display for VirtioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            VirtioError::Cap(e) => write!(f, "{e}"),
            VirtioError::CapTooShort {
                cfg_type,
                cap_len,
                needs,
            } => write!(
                f,
                "virtio capability of type {cfg_type} is {cap_len} bytes, needs {needs}"
            ),
            VirtioError::Missing {
                cfg_type,
                ignored_bar: None,
            } => write!(f, "no virtio capability of type {cfg_type}"),
            VirtioError::Missing {
                cfg_type,
                ignored_bar: Some(bar),
            } => write!(
                f,
                "no virtio capability of type {cfg_type} (one naming reserved BAR {bar} was ignored)"
            ),
            VirtioError::BarNotUsable { cfg_type, bar } => {
                write!(f, "virtio block of type {cfg_type} is in BAR {bar}, which is not usable")
            }
            VirtioError::OutsideBar {
                cfg_type,
                region,
                bar_size,
            } => write!(
                f,
                "virtio block of type {cfg_type} at {:#x}+{:#x} runs past BAR {} ({bar_size:#x} bytes)",
                region.offset, region.length, region.bar
            ),
            VirtioError::BlockTooShort {
                cfg_type,
                length,
                needs,
            } => write!(
                f,
                "virtio block of type {cfg_type} is {length:#x} bytes, needs {needs:#x}"
            ),
            VirtioError::BadNotifyMultiplier(m) => {
                write!(f, "notify_off_multiplier {m} is neither 0 nor an even power of two")
            }
        }
    }
}

impl From<CapError> for VirtioError {
    fn from(e: CapError) -> Self {
        VirtioError::Cap(e)
    }
}

/// The register blocks [`VirtioPci::parse`] looks for, as indices into its
/// bookkeeping (`cfg_type − 1`).
const BLOCKS: usize = 4;

impl VirtioPci {
    /// Finds and checks the register blocks of function `at` from its
    /// capabilities and BARs (module docs: validation).
    pub fn parse<C: ConfigSpace + ?Sized>(
        cs: &C,
        at: Bdf,
        caps: &Capabilities,
        bars: &[BarSlot; MAX_BARS],
    ) -> Result<VirtioPci, VirtioError> {
        let mut found: [Option<Region>; BLOCKS] = [None; BLOCKS];
        let mut ignored_bar: [Option<u8>; BLOCKS] = [None; BLOCKS];
        let mut notify_off_multiplier = 0;
        let mut pci_cfg = None;
        for cap in caps
            .as_slice()
            .iter()
            .filter(|c| c.id == id::VENDOR_SPECIFIC)
        {
            // cap_len and cfg_type follow the ID and next pointer.
            cap.check_len(cap_field::CFG_TYPE + 1)?;
            let cap_len = byte(cs, at, cap.at(cap_field::CAP_LEN));
            let kind = byte(cs, at, cap.at(cap_field::CFG_TYPE));
            let needs = match kind {
                cfg_type::NOTIFY | cfg_type::PCI_CFG => cap_field::EXTENDED_SIZE,
                cfg_type::COMMON | cfg_type::ISR | cfg_type::DEVICE => cap_field::SIZE,
                _ => continue,
            };
            if kind == cfg_type::PCI_CFG {
                if pci_cfg.is_none() {
                    check_cap(cap, kind, cap_len, needs)?;
                    pci_cfg = Some(*cap);
                }
                continue;
            }
            let slot = usize::from(kind - 1);
            if found[slot].is_some() {
                continue;
            }
            check_cap(cap, kind, cap_len, needs)?;
            let bar = byte(cs, at, cap.at(cap_field::BAR));
            if usize::from(bar) >= MAX_BARS {
                ignored_bar[slot].get_or_insert(bar);
                continue;
            }
            let region = Region {
                bar,
                offset: dword(cs, at, cap.at(cap_field::OFFSET)),
                length: dword(cs, at, cap.at(cap_field::LENGTH)),
            };
            check_region(kind, region, bars)?;
            if kind == cfg_type::NOTIFY {
                let m = dword(cs, at, cap.at(cap_field::NOTIFY_OFF_MULTIPLIER));
                if m != 0 && (!m.is_power_of_two() || m == 1) {
                    return Err(VirtioError::BadNotifyMultiplier(m));
                }
                notify_off_multiplier = m;
            }
            found[slot] = Some(region);
        }
        let required = |kind: u8| {
            let slot = usize::from(kind - 1);
            found[slot].ok_or(VirtioError::Missing {
                cfg_type: kind,
                ignored_bar: ignored_bar[slot],
            })
        };
        Ok(VirtioPci {
            common: required(cfg_type::COMMON)?,
            notify: required(cfg_type::NOTIFY)?,
            notify_off_multiplier,
            isr: required(cfg_type::ISR)?,
            device: found[usize::from(cfg_type::DEVICE - 1)],
            pci_cfg,
        })
    }

    /// Offset in the notify block's BAR of the doorbell of a queue whose
    /// `queue_notify_off` register reads `queue_notify_off`, or `None`
    /// when that 16-bit doorbell would lie outside the notify block.
    pub fn notify_offset(&self, queue_notify_off: u16) -> Option<u32> {
        let within = u32::from(queue_notify_off).checked_mul(self.notify_off_multiplier)?;
        let end = within.checked_add(2)?;
        (end <= self.notify.length).then(|| self.notify.offset + within)
    }
}

/// Checks a capability's declared length and that its body fits.
fn check_cap(cap: &Capability, kind: u8, cap_len: u8, needs: u8) -> Result<(), VirtioError> {
    if cap_len < needs {
        return Err(VirtioError::CapTooShort {
            cfg_type: kind,
            cap_len,
            needs,
        });
    }
    cap.check_len(needs)?;
    Ok(())
}

/// Checks a block against its BAR and against the size of its registers.
fn check_region(kind: u8, region: Region, bars: &[BarSlot; MAX_BARS]) -> Result<(), VirtioError> {
    let needs = match kind {
        cfg_type::COMMON => common::LEN,
        // One 16-bit doorbell at least.
        cfg_type::NOTIFY => 2,
        cfg_type::ISR => 1,
        _ => 0,
    };
    if region.length < needs {
        return Err(VirtioError::BlockTooShort {
            cfg_type: kind,
            length: region.length,
            needs,
        });
    }
    let bar = match bars.get(usize::from(region.bar)).and_then(BarSlot::bar) {
        Some(bar) => bar,
        None => {
            return Err(VirtioError::BarNotUsable {
                cfg_type: kind,
                bar: region.bar,
            })
        }
    };
    // Both are below 2^32: the sum fits.
    if u64::from(region.offset) + u64::from(region.length) > bar.size {
        return Err(VirtioError::OutsideBar {
            cfg_type: kind,
            region,
            bar_size: bar.size,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_device_types() {
        assert_eq!(modern_device_type(0x1af4, 0x1042), Some(device_type::BLOCK));
        assert_eq!(
            modern_device_type(0x1af4, 0x1041),
            Some(device_type::NETWORK)
        );
        assert_eq!(modern_device_type(0x1af4, 0x1040), None);
        assert_eq!(modern_device_type(0x1af4, 0x1001), None);
        assert_eq!(modern_device_type(0x1af4, 0x1080), None);
        assert_eq!(modern_device_type(0x8086, 0x1042), None);
    }

    #[test]
    fn notify_offsets_stay_in_the_block() {
        let region = |length| Region {
            bar: 4,
            offset: 0x3000,
            length,
        };
        let mut v = VirtioPci {
            common: region(0x1000),
            notify: region(0x1000),
            notify_off_multiplier: 4,
            isr: region(0x1000),
            device: None,
            pci_cfg: None,
        };
        assert_eq!(v.notify_offset(0), Some(0x3000));
        assert_eq!(v.notify_offset(2), Some(0x3008));
        assert_eq!(v.notify_offset(0x3ff), Some(0x3ffc));
        assert_eq!(v.notify_offset(0x400), None);
        v.notify_off_multiplier = 0;
        assert_eq!(v.notify_offset(0xffff), Some(0x3000));
        v.notify_off_multiplier = 0x1000_0000;
        assert_eq!(v.notify_offset(0xffff), None);
    }
}
