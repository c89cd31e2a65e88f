//! The Platform session: how a driver reaches exactly its devices
//! (Genode's `platform_session`). The platform service
//! (`components/drivers/platform`) owns PCI: it enumerated the bus,
//! placed every BAR and holds the frames of the device registers, the
//! device control capability (MSI vectors, bus addresses) and the PCI
//! interrupt lines. A driver's session gives it the devices the scenario
//! assigns to it (`devices = [{ pci = "..." }]`, docs/scenarios.md) and
//! nothing else, as capabilities put into the driver's donation table.
//!
//! | opcode | words | reply |
//! |--------|-------|-------|
//! | [`DEVICE`] | 0: device index (0-based, of this session's) | [`OK`]: 0: `vendor \| device << 16 \| class << 32` (class code, subclass, prog-if: 24 bits), 1: bus:device.function (`bus << 8 \| device << 3 \| function`), 2: its BAR sizes' presence mask (bit b: BAR b is usable) |
//! | [`BAR`] | 0: device index, 1: BAR index | [`OK`]: 0: size in bytes (ports for I/O), 1: [`KIND_MEMORY`] or [`KIND_IO`], 2: first donated slot, 3: `frames \| frame_bits << 32` (I/O: 1 capability of the BAR's ports, frame_bits 0); for memory, slots of pages holding the MSI-X table or PBA stay empty (the driver cannot reach them) |
//! | [`IRQ`] | 0: device index, 1: MSI-X table entry (0 without MSI-X: MSI, or without MSI the legacy line; [`INTX`]: the legacy line in any case), 2: CPU index (ignored for INTx: lines go to CPU 0) | [`OK`]: 0: donated slot of the IRQ handler, 1: [`IRQ_MSIX`], [`IRQ_MSI`] or [`IRQ_INTX`] |
//! | [`CONFIG`] | 0: device index, 1: offset (4-aligned, below 0x100) | [`OK`]: 0: the 32-bit configuration register there (reading is harmless; writes are the service's alone) |
//! | [`VIRTIO`] | 0: device index, 1: a virtio `cfg_type` (1 common, 2 notify, 3 ISR, 4 device) | [`OK`]: 0: BAR, 1: offset, 2: length of that register block, 3: the notify block's `notify_off_multiplier` (0 for the others); [`REFUSED`] for a function that is not a modern virtio device |
//! | [`DMA`] | 0: bytes (a power of two, 4 KiB to the session's quota) | [`OK`]: 0: bus address, 1: first donated slot, 2: number of 4 KiB frames (physically contiguous from the bus address, in slot order) |
//! | [`TRANSLATE`] | — | [`OK`]: 0: donated slot of a read-only copy of the device control capability, with which `PhysAddress` answers the bus address of a frame the driver holds (its clients' stream frames: the zero-copy path), and nothing else (no MSI vectors: that needs write) |
//!
//! Refusals: [`REFUSED`] (no such device of this session's, no such BAR,
//! an interrupt the device cannot raise), [`NO_MEMORY`] (the DMA quota is
//! used up), [`NO_SLOTS`] (the donated slots are used up).
//!
//! Quota: [`Platform::RAM`] bytes of DMA memory and [`Platform::CAPS`]
//! slots per session. DMA memory is made from the session's donation, so
//! the driver's RAM quota pays for it; the bus address comes from the
//! kernel (`PhysAddress`, which only the platform service may ask), never
//! a guess. The driver maps frames with the cache attribute it needs:
//! write-back for DMA on x86 (devices snoop caches), uncached for
//! registers.
//!
//! Closing: when the session closes — the driver closes it, or init closes
//! it because the driver died, before it takes the driver's memory back —
//! the platform service turns bus mastering off for the session's devices
//! and resets them (a virtio device through its status register) before
//! it answers; only then does the donation (the DMA memory) go back. So
//! no device ever writes into memory that was freed.

use abi::{CapSlot, Error, MsgInfo};

use super::{Interface, Session};

use crate::syscall::Words;

/// The Platform interface.
pub struct Platform;

impl Interface for Platform {
    const NAME: &'static str = "Platform";
    /// The DMA memory a session may take.
    const RAM: u64 = 1 << 20;
    /// Slots for register frames, I/O ports, IRQ handlers and DMA frames.
    const CAPS: u32 = 510;
}

/// Describes one of the session's devices.
pub const DEVICE: u64 = 1;
/// Hands over a BAR's frames (or ports).
pub const BAR: u64 = 2;
/// Hands over an interrupt.
pub const IRQ: u64 = 3;
/// Hands over DMA memory.
pub const DMA: u64 = 4;
/// Reads a configuration register of one of the session's devices.
pub const CONFIG: u64 = 5;
/// Where a virtio device's register blocks are.
pub const VIRTIO: u64 = 6;
/// Hands over the bus-address translation (a read-only control
/// capability).
pub const TRANSLATE: u64 = 7;

/// The reply to a request served.
pub const OK: u64 = 0;
/// Refused: not a device (BAR, interrupt) of this session's.
pub const REFUSED: u64 = 0xe1;
/// Refused: the session's DMA quota is used up.
pub const NO_MEMORY: u64 = 0xe2;
/// Refused: the session's donated slots are used up.
pub const NO_SLOTS: u64 = 0xe3;
/// The reply to an opcode the service does not know.
pub const UNKNOWN: u64 = 0xe0;

/// [`BAR`] word 1: a memory BAR.
pub const KIND_MEMORY: u64 = 0;
/// [`BAR`] word 1: an I/O BAR.
pub const KIND_IO: u64 = 1;

/// [`IRQ`] word 1: an MSI-X table entry was programmed.
pub const IRQ_MSIX: u64 = 0;
/// [`IRQ`] word 1: the MSI capability was programmed.
pub const IRQ_MSI: u64 = 1;
/// [`IRQ`] word 1: the legacy INTx line through the I/O APIC.
pub const IRQ_INTX: u64 = 2;
/// [`IRQ`] word 1 (the entry) asking for the legacy INTx line rather than
/// MSI-X or MSI: the device's MSI and MSI-X are turned off. The line is
/// level-triggered and may be shared: the driver clears the device's
/// cause (virtio: reads its ISR status) and then calls `IrqAck`, which
/// unmasks the line.
pub const INTX: u16 = 0xffff;

/// A device of the session, as [`DEVICE`] describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Vendor ID.
    pub vendor: u16,
    /// Device ID.
    pub device: u16,
    /// Class code, subclass, programming interface.
    pub class: u32,
    /// `bus << 8 | device << 3 | function`.
    pub bdf: u16,
    /// Bit b: BAR b is usable.
    pub bars: u8,
}

/// A BAR, as [`BAR`] hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarInfo {
    /// Bytes (ports for I/O).
    pub size: u64,
    /// An I/O BAR (one I/O-port capability) rather than memory.
    pub io: bool,
    /// The index of the first of its capabilities among the donated
    /// slots ([`Session::donated_slot`]).
    pub first: u32,
    /// Its capabilities from `first` on.
    pub frames: u32,
    /// log2 of each frame's bytes (12 or 21; 0 for I/O).
    pub frame_bits: u32,
}

/// A virtio register block, as [`VIRTIO`] describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtioBlock {
    /// The BAR holding it.
    pub bar: u8,
    /// Its offset in the BAR.
    pub offset: u32,
    /// Its bytes.
    pub length: u32,
    /// The notify block's doorbell spacing (0 for other blocks).
    pub notify_off_multiplier: u32,
}

/// DMA memory, as [`DMA`] hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaInfo {
    /// What the device must be told: the physical address of the first byte.
    pub bus_address: u64,
    /// The donated-slot index of the first of its 4 KiB frames, in
    /// address order ([`Session::donated_slot`]).
    pub first: u32,
    /// How many frames.
    pub frames: u32,
}

/// Why a Platform request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlatformError {
    /// The call failed: the session is broken (the service stopped).
    Ipc(Error),
    /// The service answered with this label ([`REFUSED`], ...).
    Refused(u64),
    /// The reply named a slot outside the donation.
    BadSlot,
}

impl core::fmt::Display for PlatformError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            PlatformError::Ipc(e) => write!(f, "the call failed: {e}"),
            PlatformError::Refused(REFUSED) => {
                f.write_str("refused: not a device of this session's")
            }
            PlatformError::Refused(NO_MEMORY) => f.write_str("refused: the DMA quota is used up"),
            PlatformError::Refused(NO_SLOTS) => {
                f.write_str("refused: the donated slots are used up")
            }
            PlatformError::Refused(l) => write!(f, "refused (label {l:#x})"),
            PlatformError::BadSlot => f.write_str("the reply names a slot outside the donation"),
        }
    }
}

impl Session<Platform> {
    fn request(&self, label: u64, words: Words) -> Result<Words, PlatformError> {
        let (info, words) = self.call(label, words).map_err(PlatformError::Ipc)?;
        match info.label() {
            OK => Ok(words),
            other => Err(PlatformError::Refused(other)),
        }
    }

    /// A donated-slot index from a reply, checked: `count` slots from it
    /// lie in the donation.
    fn index(&self, i: u64, count: u32) -> Result<u32, PlatformError> {
        let i = u32::try_from(i).map_err(|_| PlatformError::BadSlot)?;
        match i.checked_add(count) {
            Some(end) if end <= Platform::CAPS => Ok(i),
            _ => Err(PlatformError::BadSlot),
        }
    }

    fn slot(&self, i: u64) -> Result<CapSlot, PlatformError> {
        u32::try_from(i)
            .ok()
            .and_then(|i| self.donated_slot(i))
            .ok_or(PlatformError::BadSlot)
    }

    /// Device `index` of this session's.
    pub fn device(&self, index: u32) -> Result<DeviceInfo, PlatformError> {
        let w = self.request(DEVICE, [u64::from(index), 0, 0, 0])?;
        Ok(DeviceInfo {
            vendor: w[0] as u16,
            device: (w[0] >> 16) as u16,
            class: (w[0] >> 32) as u32 & 0xff_ffff,
            bdf: w[1] as u16,
            bars: w[2] as u8,
        })
    }

    /// BAR `bar` of device `index`: its frames (or ports) in the donation.
    pub fn bar(&self, index: u32, bar: u32) -> Result<BarInfo, PlatformError> {
        let w = self.request(BAR, [u64::from(index), u64::from(bar), 0, 0])?;
        Ok(BarInfo {
            size: w[0],
            io: w[1] == KIND_IO,
            first: self.index(w[2], w[3] as u32)?,
            frames: w[3] as u32,
            frame_bits: (w[3] >> 32) as u32,
        })
    }

    /// An interrupt of device `index` (MSI-X entry `entry`), delivered to
    /// CPU `cpu`: its IRQ handler and how the device raises it.
    pub fn irq(&self, index: u32, entry: u16, cpu: u32) -> Result<(CapSlot, u64), PlatformError> {
        let w = self.request(IRQ, [u64::from(index), u64::from(entry), u64::from(cpu), 0])?;
        Ok((self.slot(w[0])?, w[1]))
    }

    /// The 32-bit configuration register at `offset` of device `index`.
    pub fn config(&self, index: u32, offset: u16) -> Result<u32, PlatformError> {
        let w = self.request(CONFIG, [u64::from(index), u64::from(offset), 0, 0])?;
        Ok(w[0] as u32)
    }

    /// Where virtio register block `cfg_type` of device `index` is.
    pub fn virtio(&self, index: u32, cfg_type: u8) -> Result<VirtioBlock, PlatformError> {
        let w = self.request(VIRTIO, [u64::from(index), u64::from(cfg_type), 0, 0])?;
        Ok(VirtioBlock {
            bar: w[0] as u8,
            offset: w[1] as u32,
            length: w[2] as u32,
            notify_off_multiplier: w[3] as u32,
        })
    }

    /// The bus-address translation: a capability with which
    /// `syscall::phys_address(it, frame)` answers where a frame of the
    /// driver's is on the bus (given once per session).
    pub fn translate(&self) -> Result<CapSlot, PlatformError> {
        let w = self.request(TRANSLATE, [0; 4])?;
        self.slot(w[0])
    }

    /// `bytes` of physically contiguous DMA memory.
    pub fn dma(&self, bytes: u64) -> Result<DmaInfo, PlatformError> {
        let w = self.request(DMA, [bytes, 0, 0, 0])?;
        Ok(DmaInfo {
            bus_address: w[0],
            first: self.index(w[1], w[2] as u32)?,
            frames: w[2] as u32,
        })
    }
}

/// The answer to a request served, or refused with `label`.
pub fn answer(result: Result<Words, u64>) -> (MsgInfo, Words) {
    match result {
        Ok(words) => crate::server::answer(OK, words),
        Err(label) => crate::server::answer(label, [0; 4]),
    }
}
