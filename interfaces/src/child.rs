//! How root starts the components named on the kernel command line when
//! the boot image has no config ROM, and the slots every child finds in its
//! capability space — also init's children (with a boot image that has a
//! config ROM, root starts only init: [`crate::init`]).
//!
//! `pecan.start=NAME[:ARG][@MIB][+own][+serve],...` lists components of
//! the boot image; root starts them in order, each in its own address
//! space and capability space, at priority [`PRIORITY`], with `rdi = ARG`
//! (decimal or `0x` hex; 0 if absent) and untyped memory of `MIB` MiB
//! rounded up to a power of two (decimal or `0x` hex; 2^[`UNTYPED_BITS`]
//! bytes = 1 MiB if absent; see [`untyped_bits_for_mib`]). The markers
//! after the entry grant authority (`ucore::start`): `+own` capabilities
//! to the child's own thread, capability space and address space
//! ([`OwnCaps::ALL`]), `+serve` the service endpoint with all rights (the
//! child serves it; root does not wait for it). A name that is not in the
//! boot image, or whose ELF file is malformed, an `ARG` that is not a
//! number, a `MIB` of 0 or above 2^[`MAX_UNTYPED_BITS`] bytes, or a marker
//! that is unknown or given twice is refused with a message naming the
//! entry and the reason; the others still start. Memory that root does not
//! have is reported when the child is started (`root: cannot start NAME:
//! no untyped memory left ...`).
//!
//! # Authority is declared, never inferred from a name
//!
//! What a child may do beyond using its untyped memory and calling the
//! service endpoint is written down where it is started: the markers of
//! its `pecan.start=` entry, or the keys `own` and `shared_endpoint` of its
//! scenario entry (`docs/scenarios.md`), which init reads from the config
//! ROM. The name of a component or of its binary decides nothing.
//!
//! Each child's capability space (2^[`CSPACE_BITS`] slots) holds:
//!
//! | slot | capability | granted by |
//! |------|------------|------------|
//! | [`UNTYPED`] | untyped memory of 2^[`UNTYPED_BITS`] bytes (or as `@MIB` asks), the child's own to retype | always |
//! | [`SERVICE_ENDPOINT`] | an endpoint shared by all children of one parent: a child that *serves* it gets all rights and receives on it; every other child gets it write-only, badged with its index, and calls it. (Init's children that `provide` sessions find an endpoint of their own here instead.) | all rights: `+serve` / `shared_endpoint = "serve"`; else write-only |
//! | [`PARENT`] | only for init's children: init's endpoint, minted with `WRITE` and `GRANT` (a request may carry a capability) and the child's badge: where it asks for sessions (`crate::session`) | init, always |
//! | [`OWN_THREAD`] | the child's own thread, so it can set its own scheduling and bind notifications to itself | `+own` / `own = ["thread"]` |
//! | [`OWN_CSPACE`] | its own capability space, so it can configure threads it makes and address its table as a table | `+own` / `own = ["cspace"]` |
//! | [`OWN_VSPACE`] | its own address space, so it can map memory (shared frames, dataspaces, ROM pages) and configure threads | `+own` / `own = ["vspace"]` |
//! | [`NOTIFICATION`] | only for init's children with IRQs (a driver): a notification (all rights) bound to its thread, so its `Recv` on its service endpoint also returns when the notification is signalled (label `LABEL_NOTIFICATION`, badge = the bits): bind the IRQs to it and serve requests and interrupts in one loop | `irqs` |
//! | [`CONSOLE`] | empty at start: the runtime opens its `Console` session here at the component's first printed line, if the scenario routes one (`rt::print`: the lines go to a terminal as well as to the kernel console) | the runtime |
//! | [`FIRST_FREE`].. | empty — but see [`DEVICES`] | |
//!
//! A component of a scenario config that names devices (`io_ports`,
//! `irqs`, `docs/scenarios.md`) finds them from [`DEVICES`] on, in the
//! config's order: one I/O-port capability per range (exactly that range,
//! [`io_ports_slot`]), then one IRQ handler capability per ISA IRQ (for
//! the GSI where it arrives, [`irq_slot`]); its free slots start after the
//! last of them. Components without devices have nothing there.
//!
//! A child without the grant has nothing in the own-capability slots: it
//! cannot undo its own set-up. Root is each child's fault handler (the
//! fault endpoint is badged with the child's index, 1-based): a faulting
//! child is reported and stopped, and a child's exit arrives as a
//! [`abi::fault::LABEL_EXIT`] message.
//!
//! The child's stack (64 KiB) ends at [`abi::MAIN_STACK_TOP`]; its IPC
//! buffer page is at [`abi::MAIN_IPC_BUFFER_ADDR`].
//!
//! When every started child that does not serve (`+serve`) has exited or
//! faulted, root prints `root: all children finished`, deletes the
//! remaining children and exits, which ends the run (the kernel powers off
//! when no thread is left): a server answers for ever, so root does not
//! wait for it.

pub const UNTYPED: u32 = 1;
pub const SERVICE_ENDPOINT: u32 = 2;
/// Init's children: the parent endpoint for session requests (`crate::session`).
pub const PARENT: u32 = 3;
pub const OWN_THREAD: u32 = 4;
pub const OWN_CSPACE: u32 = 5;
pub const OWN_VSPACE: u32 = 6;
/// Init's children with IRQs: a notification bound to their thread.
pub const NOTIFICATION: u32 = 7;
/// The runtime's `Console` session (a Log session its printed lines also
/// go to), once opened.
pub const CONSOLE: u32 = 8;
pub const FIRST_FREE: u32 = 9;
/// The first device capability of a component with devices.
pub const DEVICES: u32 = FIRST_FREE;

/// The slot of a component's I/O-port range `index` (0-based, config order).
pub const fn io_ports_slot(index: u32) -> u32 {
    DEVICES + index
}

/// The slot of IRQ `index` (0-based, config order) of a component with
/// `io_ranges` I/O-port ranges.
pub const fn irq_slot(io_ranges: u32, index: u32) -> u32 {
    DEVICES + io_ranges + index
}

/// The slots of the platform service (the component whose config entry
/// says `platform = true`, docs/scenarios.md): what init hands it from
/// `child::DEVICES` on, instead of I/O-port ranges and ISA IRQs.
pub mod platform {
    use super::DEVICES;

    /// The device control capability: MSI vectors and bus addresses.
    pub const CONTROL: u32 = DEVICES;
    /// The I/O ports where the platform service places devices' I/O
    /// BARs: [`IO_WINDOW_FIRST`]`..=`[`IO_WINDOW_LAST`].
    pub const IO_PORTS: u32 = DEVICES + 1;
    /// First and last port of the I/O-BAR window (no other component may
    /// be given ports there).
    pub const IO_WINDOW_FIRST: u16 = 0xc000;
    pub const IO_WINDOW_LAST: u16 = 0xffff;
    /// The PCI interrupt lines (INTx): on q35 PIRQ A–H arrive at GSI
    /// 16–23; the handler of GSI `PCI_GSI_FIRST + i` at `PCI_IRQ_FIRST + i`.
    pub const PCI_IRQ_FIRST: u32 = DEVICES + 2;
    pub const PCI_GSI_FIRST: u32 = 16;
    pub const PCI_IRQS: u32 = 8;
    /// Device memory (untyped), in address order, the first empty slot
    /// ending the list.
    pub const DEVICE_MEMORY_FIRST: u32 = PCI_IRQ_FIRST + PCI_IRQS;
    pub const DEVICE_MEMORY_SLOTS: u32 = 32;
    /// The first slot the platform service may use for its own.
    pub const FIRST_FREE: u32 = DEVICE_MEMORY_FIRST + DEVICE_MEMORY_SLOTS;
}

pub const CSPACE_BITS: u32 = 10;
/// log2 of a child's untyped memory when its entry has no `@MIB`.
pub const UNTYPED_BITS: u32 = 20;
/// log2 of the most untyped memory an entry may ask for (64 GiB): far
/// beyond any machine the project emulates, so a larger `@MIB` is a typo.
pub const MAX_UNTYPED_BITS: u32 = 36;
/// log2 of one MiB, the unit of `@MIB`.
pub const MIB_BITS: u32 = 20;
/// Priority of children (root runs at 200).
pub const PRIORITY: u8 = 100;
/// Root's own priority (the kernel starts it there).
pub const ROOT_PRIORITY: u8 = abi::bootinfo::ROOT_PRIORITY;
/// Init's priority, once root starts init (the component-framework
/// issue): below root's, so root finishes a request before init runs on,
/// and the highest a component of a scenario config may have — the kernel
/// lets a thread give no other thread more than its own priority.
pub const INIT_PRIORITY: u8 = 150;

/// Which of its own kernel objects a child gets capabilities to
/// ([`OWN_THREAD`], [`OWN_CSPACE`], [`OWN_VSPACE`]): a set of
/// [`OwnCaps::THREAD`], [`OwnCaps::CSPACE`] and [`OwnCaps::VSPACE`], as the
/// child's start-list entry (`+own`: all three) or scenario entry (`own =
/// ["thread", ...]`) declares. Stored in the config ROM as its bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OwnCaps(u8);

impl OwnCaps {
    /// No own capabilities (the default).
    pub const NONE: OwnCaps = OwnCaps(0);
    /// Its own thread, at [`OWN_THREAD`].
    pub const THREAD: OwnCaps = OwnCaps(1);
    /// Its own capability space, at [`OWN_CSPACE`].
    pub const CSPACE: OwnCaps = OwnCaps(2);
    /// Its own address space, at [`OWN_VSPACE`].
    pub const VSPACE: OwnCaps = OwnCaps(4);
    /// All three (`+own`).
    pub const ALL: OwnCaps = OwnCaps(7);
    /// Each one: its word in a scenario's `own` list, the set of it alone
    /// and the slot it is put in.
    pub const KINDS: [(&'static str, OwnCaps, u32); 3] = [
        ("thread", OwnCaps::THREAD, OWN_THREAD),
        ("cspace", OwnCaps::CSPACE, OWN_CSPACE),
        ("vspace", OwnCaps::VSPACE, OWN_VSPACE),
    ];

    /// The set's bits (bit 0 thread, 1 cspace, 2 vspace).
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The set with these bits; `None` when a bit names nothing.
    pub const fn from_bits(bits: u8) -> Option<OwnCaps> {
        if bits & !OwnCaps::ALL.0 == 0 {
            Some(OwnCaps(bits))
        } else {
            None
        }
    }

    /// The set of one kind by its word (`"thread"`, `"cspace"`, `"vspace"`).
    pub fn from_word(word: &str) -> Option<OwnCaps> {
        OwnCaps::KINDS
            .iter()
            .find(|(w, _, _)| *w == word)
            .map(|&(_, set, _)| set)
    }

    /// Whether every capability of `other` is in the set.
    pub const fn contains(self, other: OwnCaps) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets together.
    #[must_use]
    pub const fn union(self, other: OwnCaps) -> OwnCaps {
        OwnCaps(self.0 | other.0)
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// log2 of the untyped bytes a `@MIB` entry gets: `mib` MiB rounded up to
/// a power of two; `None` for 0 or more than 2^[`MAX_UNTYPED_BITS`] bytes.
pub const fn untyped_bits_for_mib(mib: u64) -> Option<u32> {
    if mib == 0 {
        return None;
    }
    // ceil(log2(mib)): the bits needed to hold mib - 1 (0 for mib = 1).
    let bits = u64::BITS - (mib - 1).leading_zeros() + MIB_BITS;
    if bits > MAX_UNTYPED_BITS {
        None
    } else {
        Some(bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untyped_for_mib_rounds_up_and_refuses_absurd_sizes() {
        assert_eq!(untyped_bits_for_mib(1), Some(UNTYPED_BITS));
        assert_eq!(untyped_bits_for_mib(2), Some(21));
        assert_eq!(untyped_bits_for_mib(3), Some(22));
        assert_eq!(untyped_bits_for_mib(64), Some(26));
        assert_eq!(untyped_bits_for_mib(65), Some(27));
        assert_eq!(untyped_bits_for_mib(1 << 16), Some(MAX_UNTYPED_BITS));
        assert_eq!(untyped_bits_for_mib((1 << 16) + 1), None);
        assert_eq!(untyped_bits_for_mib(0), None);
        assert_eq!(untyped_bits_for_mib(u64::MAX), None);
    }

    #[test]
    fn own_caps_sets() {
        assert_eq!(OwnCaps::default(), OwnCaps::NONE);
        assert!(OwnCaps::NONE.is_empty() && !OwnCaps::THREAD.is_empty());
        let all = OwnCaps::KINDS
            .iter()
            .fold(OwnCaps::NONE, |set, &(_, one, _)| set.union(one));
        assert_eq!(all, OwnCaps::ALL);
        assert_eq!(OwnCaps::from_word("cspace"), Some(OwnCaps::CSPACE));
        assert_eq!(OwnCaps::from_word("stack"), None);
        assert_eq!(OwnCaps::from_word("Thread"), None);
        let two = OwnCaps::THREAD.union(OwnCaps::VSPACE);
        assert!(two.contains(OwnCaps::VSPACE) && !two.contains(OwnCaps::CSPACE));
        assert!(!two.contains(OwnCaps::ALL) && OwnCaps::ALL.contains(two));
        assert_eq!(two.bits(), 5);
        for bits in 0..=7 {
            assert_eq!(OwnCaps::from_bits(bits).map(OwnCaps::bits), Some(bits));
        }
        assert_eq!(OwnCaps::from_bits(8), None);
        assert_eq!(OwnCaps::from_bits(0xff), None);
        let slots: [u32; 3] = OwnCaps::KINDS.map(|(_, _, slot)| slot);
        assert_eq!(slots, [OWN_THREAD, OWN_CSPACE, OWN_VSPACE]);
    }
}
