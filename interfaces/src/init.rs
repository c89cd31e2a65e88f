//! How root hands over to init when the boot image has a config ROM (the
//! entry `config`, written by xtask for a scenario with `[[component]]`
//! tables; `docs/scenarios.md`), and the capability layout init gives its
//! own children.
//!
//! # Root → init
//!
//! With a `config` entry in the boot image root ignores `pecan.start=` and
//! starts one child, the boot-image entry `init`, built like any other
//! child (`crate::child`) but with:
//!
//! | what | value |
//! |------|-------|
//! | priority | [`crate::child::INIT_PRIORITY`], CPU 0 |
//! | capability table | 2^[`CSPACE_BITS`] slots: `child::UNTYPED`, `child::SERVICE_ENDPOINT` (root's, unused yet) and `child::OWN_THREAD`, `OWN_CSPACE`, `OWN_VSPACE` (`child::OwnCaps::ALL`, as `+own` grants them) |
//! | devices | at [`IO_PORTS`] all I/O ports (root's own capability, copied); at [`isa_irq_slot`]`(i)` the IRQ handler of the GSI where ISA IRQ `i` arrives (`bootinfo::BootInfo::isa_gsi`, the MADT's overrides applied — on QEMU IRQ 0 at GSI 2), for each `i < 16` that arrives at a line root has; empty otherwise |
//! | untyped memory | the pieces of `ucore::plan::pool_pieces(image, rom, update)`, largest first: the first at `child::UNTYPED`, the others from [`POOL_FIRST`] on — the binary digits of the sum of every child's block (its RAM quota and what its existence costs, `ucore::plan::block_bits`) of the config and of its update ([`UPDATE_ENTRY`], if any) and init's own MiB; init computes the same pieces from the same boot image |
//! | page-table pool | 2^[`PT_POOL_BITS`] bytes |
//! | the boot image | the kernel's frames of it (`bootinfo`, "ROM frames"): root copies the capability of their table to [`ROM_FRAMES`] and maps every frame read-only into init's address space at [`image_addr`]`(phase)` — the image's own memory, no copy — so init finds the ROM and the children's ELF files by name exactly as root does, and serves boot modules from the same frames (`rt::session::rom`) |
//! | `rdi` | where the image starts in init's address space: [`image_addr`] of its physical start's phase |
//!
//! No copy: the image (tens of MiB with a guest's kernel and initramfs)
//! costs neither root's nor init's memory, only the page tables of init's
//! view (from init's page-table pool, [`PT_POOL_BITS`]; 2 MiB frames need
//! none below the directory).
//!
//! Root waits for init as for any other child: `root: child init exited
//! with code N`, then `root: all children finished`. Init's exit code is
//! the scenario's result: anything but 0 (a bad config ROM, a component
//! it could not start, [`EXIT_NOT_STARTED`]) or a fault of init, and root
//! ends the run with the failure status.
//!
//! # Init's slots
//!
//! Slots `child::FIRST_FREE..`[`OWN_SLOTS_END`] are init's own (its
//! endpoints and the children's blocks); child `i` (its id: 0-based, the
//! config's start order at boot; a child a config update adds takes the
//! lowest id no running child has) owns the [`CHILD_SLOTS`] slots from [`child_slots`]`(i)`,
//! where its capability table, address space, thread, frames and fault
//! endpoint capability live, all made from its block — so revoking the
//! block empties the range, and it is reused by the restarted child.
//!
//! # Init → its children
//!
//! Devices: init hands a component exactly the devices its config names
//! (`ucore::config::Device`) at `child::DEVICES..` — an I/O-port
//! capability narrowed to each range (`CapMint` with
//! `abi::object::io_ports_range`) and a copy of the IRQ handler of each
//! ISA IRQ — before its thread starts. A component whose devices init
//! cannot give (an ISA IRQ without a handler, a refused mint) is not
//! started: `init: cannot start NAME: ...`. The config ROM's rules
//! (checked by xtask, again by init's parser) keep each port and IRQ with
//! one component.
//!
//! Each child gets what a child of root gets (`crate::child`: the same
//! slots, stack and IPC buffer) with the values of its config record: a
//! capability table of `caps` slots, `ram_mib` as untyped at
//! `child::UNTYPED` (the largest power of two not above it,
//! `ucore::init`), its `priority` and `cpu`, `rdi` = the integer `arg` of
//! its config table (0 without one). At `child::PARENT` every child gets
//! init's endpoint minted with `WRITE`, `GRANT` and its badge: where it asks for
//! sessions (`crate::session`). A component that provides a service gets,
//! at `child::SERVICE_ENDPOINT`, an endpoint of its own that init makes
//! from the component's block (so it goes, with every session capability
//! minted from it, when the block is revoked) and keeps a capability to;
//! the others get init's shared service endpoint, like root's children:
//! with all rights if their entry says `shared_endpoint = "serve"` (then
//! init does not wait for them), else write-only and badged. The
//! own-capability slots (`child::OWN_THREAD`, `OWN_CSPACE`, `OWN_VSPACE`)
//! hold what the entry's `own` list names and nothing else: the binary's
//! name grants nothing. Init is every child's fault handler (badge =
//! index + 1).

/// The boot-image entry of a scenario's config update (its `update` key,
/// docs/scenarios.md): a config ROM init applies when a component with a
/// `Reconfig` session asks it to (`rt::session::reconfig`). Root sizes
/// init's memory for the config and the update together
/// (`ucore::plan::pool_pieces`).
pub const UPDATE_ENTRY: &str = "config.update";

/// log2 of init's capability table's slots.
pub const CSPACE_BITS: u32 = 16;
/// log2 of init's page-table pool (128 tables: its image, the boot image,
/// the scratch page, stack). A boot image of 2 MiB frames needs no page
/// table below the directory, one of 4 KiB frames one per 2 MiB: room
/// for 200 MiB of 4 KiB frames (modules below 2 MiB only), far more with
/// large modules (2 MiB frames but for a head and tail of 4 KiB ones).
pub const PT_POOL_BITS: u32 = 19;
/// End of init's own slot range.
pub const OWN_SLOTS_END: u32 = 1024;
/// Slots each child's range holds.
pub const CHILD_SLOTS: u32 = 960;

/// The first slot of child `index`'s range (0-based; at most 64 children,
/// `ucore::config::MAX_COMPONENTS`, fit in 2^[`CSPACE_BITS`] slots).
pub const fn child_slots(index: u32) -> u32 {
    OWN_SLOTS_END + index * CHILD_SLOTS
}

/// Init's exit code for a boot image it cannot read.
pub const EXIT_BAD_IMAGE: i32 = 2;
/// Init's exit code for a missing or corrupt config ROM.
pub const EXIT_BAD_CONFIG: i32 = 3;
/// Init's exit code when it cannot set up its own resources.
pub const EXIT_NO_RESOURCES: i32 = 4;
/// Init's exit code when receiving on its endpoint fails.
pub const EXIT_RECV_FAILED: i32 = 5;
/// Init's exit code when a component could not be started (or restarted)
/// — the others ran; root ends the run with failure for any exit code but
/// 0.
pub const EXIT_NOT_STARTED: i32 = 6;

/// Root's I/O-port capability (all ports), past the 64 children's ranges.
pub const IO_PORTS: u32 = child_slots(64);
/// The first of the 16 ISA IRQ handler slots.
pub const ISA_IRQ_FIRST: u32 = IO_PORTS + 1;

/// Init's slot of the IRQ handler for ISA IRQ `irq` (0..16).
pub const fn isa_irq_slot(irq: u8) -> u32 {
    ISA_IRQ_FIRST + irq as u32
}

/// Where the second and later pieces of init's pool lie (the first is at
/// `child::UNTYPED`): at most [`POOL_SLOTS`] of them.
pub const POOL_FIRST: u32 = ISA_IRQ_FIRST + 16;
/// Slots for pool pieces from [`POOL_FIRST`]: one per size of untyped
/// (2^12 .. 2^47 bytes) but the first piece's.
pub const POOL_SLOTS: u32 = 35;

/// The device control capability (`abi::ObjectType::DeviceControl`),
/// for the component the config makes the platform service.
pub const DEVICE_CONTROL: u32 = POOL_FIRST + POOL_SLOTS;
/// The IRQ handlers of the PCI interrupt lines, GSI
/// [`crate::child::platform::PCI_GSI_FIRST`] + i at `PCI_IRQ_FIRST` + i
/// (empty when root has no handler for that GSI).
pub const PCI_IRQ_FIRST: u32 = DEVICE_CONTROL + 1;
/// Device memory: untyped capabilities covering what root got of it
/// (the physical space between RAM and the I/O APIC below 4 GiB, where
/// the PCI configuration window and the devices' registers are), in
/// address order, at most [`DEVICE_MEMORY_SLOTS`]; the first empty slot
/// ends the list.
pub const DEVICE_MEMORY_FIRST: u32 = PCI_IRQ_FIRST + crate::child::platform::PCI_IRQS;
/// Slots for device memory from [`DEVICE_MEMORY_FIRST`].
pub const DEVICE_MEMORY_SLOTS: u32 = crate::child::platform::DEVICE_MEMORY_SLOTS;

/// The capability table of the boot image's frames (`bootinfo::slot::ROM_FRAMES`,
/// root's copy): frame `i` of the image at its slot `1 + i`
/// (`formats::bootimage::BootImage::regions`).
pub const ROM_FRAMES: u32 = DEVICE_MEMORY_FIRST + DEVICE_MEMORY_SLOTS;

/// Where init's view of the boot image starts for an image whose physical
/// start is `phase` bytes past a 2 MiB boundary: the same distance past
/// `bootinfo::BOOT_IMAGE_ADDR` (2 MiB aligned), so that its 2 MiB frames
/// map at 2 MiB-aligned addresses.
pub const fn image_addr(phase: u64) -> u64 {
    abi::bootinfo::BOOT_IMAGE_ADDR + phase % (2 << 20)
}

const _: () = assert!(abi::bootinfo::BOOT_IMAGE_ADDR.is_multiple_of(2 << 20));
const _: () = assert!(ROM_FRAMES < 1 << CSPACE_BITS);
const _: () = assert!(isa_irq_slot(15) < 1 << CSPACE_BITS);
const _: () = assert!(DEVICE_MEMORY_FIRST + DEVICE_MEMORY_SLOTS <= 1 << CSPACE_BITS);
