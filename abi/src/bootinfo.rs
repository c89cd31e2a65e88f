//! What the kernel gives the root task: its fixed capability slots and the
//! boot-information page.
//!
//! The kernel starts root with `rdi` = [`BOOT_INFO_ADDR`], where a read-only
//! page holds a [`BootInfo`]. The boot image (all components as ELF files,
//! `formats::bootimage` format) is mapped read-only at
//! [`BOOT_IMAGE_ADDR`]. Root's capability space has
//! `1 << BootInfo::cspace_bits` slots laid out as below; everything from
//! `first_free_slot` on is empty.
//!
//! # ROM frames
//!
//! The boot image's memory is also handed over as frame capabilities, read-only
//! (`Rights::READ`: no holder can map them writable or executable, nor mint
//! more rights) and never copied: a capability table at [`slot::ROM_FRAMES`]
//! (its own kernel object, 2^n slots, made from the kernel's memory at boot
//! like root's own table) holds in its slots `1..=BootInfo::rom_frames` the
//! frames of `formats::bootimage::BootImage::regions` cut by
//! `Region::frame` for the image's physical start
//! [`BootInfo::boot_image_phys`] — 4 KiB frames and, where a whole 2 MiB of
//! one region is 2 MiB aligned in physical memory, 2 MiB frames; slot
//! `1 + i` holds frame `i`. The frames are derivation-tree roots: they
//! belong to no untyped memory, so no quota pays for them and nothing
//! returns when they are deleted. Root gives the table to init, which maps
//! its view of the image from it and serves boot modules as ROM
//! dataspaces from it (`rt::session::rom`). At most 2^16 − 1 frames (a
//! capability table's limit): a boot image of 256 MiB cut into 4 KiB frames
//! alone, far more with 2 MiB ones; a larger one is refused at boot.

/// Where root finds its boot-information page.
pub const BOOT_INFO_ADDR: u64 = 0x0000_7fff_f000_0000;
/// Where the boot image is mapped (read-only) in root's address space.
pub const BOOT_IMAGE_ADDR: u64 = 0x0000_7f00_0000_0000;
/// The priority the kernel starts root at.
pub const ROOT_PRIORITY: u8 = 200;
/// `BootInfo::magic`.
pub const BOOT_INFO_MAGIC: u64 = u64::from_le_bytes(*b"PECANBI1");

/// Root's fixed slots.
pub mod slot {
    /// Root's own thread.
    pub const THREAD: u32 = 1;
    /// Root's capability space (a capability table).
    pub const CSPACE: u32 = 2;
    /// Root's address space.
    pub const VSPACE: u32 = 3;
    /// All I/O ports (0..=0xffff).
    pub const IO_PORTS: u32 = 4;
    /// The device control capability (`ObjectType::DeviceControl`).
    pub const DEVICE_CONTROL: u32 = 5;
    /// IRQ handler capabilities for IOAPIC lines (GSIs) `0..BootInfo::irq_count`.
    pub const IRQ_FIRST: u32 = 16;
    /// Most IRQ lines handed out.
    pub const IRQ_MAX: u32 = 48;
    /// The capability table of the boot image's frames (module docs,
    /// "ROM frames").
    pub const ROM_FRAMES: u32 = 6;
    /// Untyped memory capabilities, `BootInfo::untyped_count` of them,
    /// described in `BootInfo::untyped`.
    pub const UNTYPED_FIRST: u32 = 64;
}

/// log2 of the slots of root's capability table: 8,192 slots (1 MiB).
/// The boot image's frames live in a table of their own
/// ([`slot::ROM_FRAMES`]), so this does not bound the boot image.
pub const ROOT_CSPACE_BITS: u32 = 13;
/// Most frames of the boot image: the slots of the largest capability
/// table but its header slot 0 (module docs, "ROM frames").
pub const MAX_ROM_FRAMES: u64 = (1 << crate::object::MAX_CAP_TABLE_BITS) - 1;
/// Where the kernel image ends at most: its boot self-check `kernel image`
/// refuses a kernel that ends above (self-check `memory map`; the memory rule, `ucore::plan`,
/// gives root nothing below this).
pub const KERNEL_IMAGE_END_MAX: u64 = 4 << 20;
/// Most untyped capabilities described in the boot information.
pub const MAX_UNTYPED: usize = 192;
/// Most command-line bytes passed on.
pub const MAX_CMDLINE: usize = 512;

/// One untyped memory capability.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UntypedInfo {
    /// Physical base address (aligned to the size).
    pub phys: u64,
    /// log2 of the size in bytes.
    pub size_bits: u8,
    /// 1 for device memory (not RAM: may only become frames, never kernel
    /// objects, and is not zeroed).
    pub device: u8,
    pub _reserved: [u8; 6],
}

/// The boot-information page.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BootInfo {
    /// [`BOOT_INFO_MAGIC`].
    pub magic: u64,
    /// Number of CPUs online (indices 0 ..< count, the `cpu` argument of
    /// `ThreadSetSchedParams`).
    pub cpu_count: u64,
    /// log2 of root's capability-space size.
    pub cspace_bits: u64,
    /// First empty slot in root's capability space.
    pub first_free_slot: u64,
    /// Bytes of the boot image at [`BOOT_IMAGE_ADDR`].
    pub boot_image_len: u64,
    /// The boot image's physical address (page-aligned): with
    /// `formats::bootimage`'s cut, where its frames are 2 MiB ones.
    pub boot_image_phys: u64,
    /// Frames in the table at [`slot::ROM_FRAMES`], in its slots
    /// `1..=rom_frames`.
    pub rom_frames: u64,
    /// IRQ handler capabilities from [`slot::IRQ_FIRST`].
    pub irq_count: u64,
    /// Untyped capabilities from [`slot::UNTYPED_FIRST`].
    pub untyped_count: u64,
    /// Bytes used in `cmdline`.
    pub cmdline_len: u64,
    /// The kernel command line (UTF-8, not terminated).
    pub cmdline: [u8; MAX_CMDLINE],
    pub untyped: [UntypedInfo; MAX_UNTYPED],
    /// Where each ISA IRQ `0..16` arrives: its GSI (the IRQ handler at
    /// `slot::IRQ_FIRST + gsi`), after the MADT's interrupt source
    /// overrides — on QEMU the PIT's IRQ 0 arrives at GSI 2. [`NO_GSI`]
    /// when the line has no GSI below `irq_count`.
    pub isa_irq_gsi: [u8; ISA_IRQS],
}

/// ISA IRQ lines described in [`BootInfo::isa_irq_gsi`].
pub const ISA_IRQS: usize = 16;
/// [`BootInfo::isa_irq_gsi`] of an ISA IRQ that arrives nowhere root has
/// a handler for.
pub const NO_GSI: u8 = 0xff;

impl BootInfo {
    /// The command line as text (empty if not UTF-8).
    pub fn cmdline(&self) -> &str {
        let len = (self.cmdline_len as usize).min(MAX_CMDLINE);
        core::str::from_utf8(&self.cmdline[..len]).unwrap_or("")
    }

    /// The GSI ISA IRQ `irq` arrives at, if root has its handler.
    pub fn isa_gsi(&self, irq: u8) -> Option<u32> {
        let gsi = *self.isa_irq_gsi.get(usize::from(irq))?;
        (gsi != NO_GSI && u64::from(gsi) < self.irq_count).then_some(u32::from(gsi))
    }

    /// The untyped descriptions that are in use.
    pub fn untyped(&self) -> &[UntypedInfo] {
        &self.untyped[..(self.untyped_count as usize).min(MAX_UNTYPED)]
    }
}

const _: () = assert!(core::mem::size_of::<BootInfo>() <= 4096);
const _: () = assert!(slot::IRQ_FIRST + slot::IRQ_MAX <= slot::UNTYPED_FIRST);
