//! The config ROM: a checked scenario's components in the compact binary
//! form that init reads (`docs/scenarios.md` describes the TOML it comes
//! from and the checks xtask makes first).
//!
//! xtask encodes it with [`encode`] and packs it into the boot image as the
//! entry `config`; init will parse it with [`Rom::parse`]. Both sides use
//! this module, so they cannot drift apart, and the encoder runs its output
//! through the decoder, so it cannot write a ROM the decoder refuses. The
//! ROM is untrusted input to whoever reads it: the decoder checks every
//! rule below before it hands anything out, turns a broken ROM into a
//! [`RomError`] and never panics, whatever the bytes.
//!
//! # Format, version 5
//!
//! All integers are little-endian; nothing is aligned (readers read byte
//! by byte), so the ROM can sit anywhere in the boot image.
//!
//! ```text
//! offset 0: header, 32 bytes
//!   magic       [u8; 8] = b"PECANCFG"
//!   version     u32     = 5 (version 2 added the device table, version 3
//!                       the CPU set of a component record, version 4 its
//!                       own capabilities and shared-endpoint grant,
//!                       version 5 its flags)
//!   size        u32     bytes of the whole ROM
//!   components  u16     C, at most 64
//!   services    u16     S, at most 256: the distinct session types
//!   parent      u16     P: entries of the parent-provides list
//!   provides    u16     V: entries of the provides list, all components
//!   routes      u16     R: route records, all components
//!   devices     u16     D: device records, all components
//!   config_len  u32     bytes of the config area
//! then, each right after the one before:
//!   component table  C × 64 bytes (below)
//!   service table    S × 6 bytes: a string (pool offset u32, length u16)
//!   parent list      P × u16: service index
//!   provides list    V × u16: service index
//!   route table      R × 4 bytes: service index u16, target u16
//!                    (0xffff = the parent, else a component index)
//!   device table     D × 6 bytes: kind u8, reserved u8 = 0, a u16, b u16
//!                    kind 1 = I/O ports a..=b (a <= b);
//!                    kind 2 = ISA IRQ a (0..=15, not 2), b = 0;
//!                    kind 3 = the PCI platform, a = b = 0 (the
//!                    component is the platform service: init hands it
//!                    `interfaces::child::platform`'s capabilities, among
//!                    them the I/O ports of the I/O-BAR window)
//!   config area      config_len bytes: the components' config trees
//!   string pool      the rest of `size`: names, UTF-8, not terminated
//! ```
//!
//! A component record (64 bytes):
//!
//! ```text
//!  0  name            pool offset u32, length u16
//!  6  binary          pool offset u32, length u16
//! 12  ram_mib         u32   1 ..= MAX_RAM_MIB
//! 16  caps            u32   a power of two, MIN_CAPS ..= MAX_CAPS
//! 20  priority        u8    0 ..= MAX_PRIORITY
//! 21  restart         u8    0 = never, 1 = always
//! 22  cpu             u16   below MAX_CPUS
//! 24  restart_max     u32   never: 0; always: 1 ..= MAX_RESTARTS
//! 28  backoff_ms      u32   never: 0; always: 0 ..= MAX_BACKOFF_MS
//! 32  provides_first  u16   its entries of the provides list:
//! 34  provides_count  u16     [first, first + count)
//! 36  routes_first    u16   its records of the route table:
//! 38  routes_count    u16     [first, first + count)
//! 40  config_offset   u32   its config tree in the config area:
//! 44  config_len      u32     [offset, offset + len), at most MAX_CONFIG_BYTES
//! 48  devices_first   u16   its records of the device table:
//! 50  devices_count   u16     [first, first + count); I/O ports first
//! 52  cpus            u64   its CPU set (`abi::cpu::CpuSet`, bit i =
//!                         CPU i): not empty, holds `cpu`
//! 60  own             u8    its own capabilities (`interfaces::child::OwnCaps`):
//!                         bit 0 thread, 1 cspace, 2 vspace; others 0
//! 61  shared_endpoint u8    0 = call (write-only), 1 = serve (all rights);
//!                         serve only without provides entries
//! 62  flags           u8    bit 0: killable (init kills it when a client of
//!                         its Reconfig session asks, [`FLAG_KILLABLE`]);
//!                         others 0
//! 63  reserved        u8 = 0
//! ```
//!
//! A config tree is one value, always a table at the top; a value is a
//! tag byte and its payload:
//!
//! ```text
//! 1 bool     u8: 0 or 1
//! 2 integer  i64
//! 3 float    f64 (IEEE 754 bits)
//! 4 string   length u32, UTF-8 bytes
//! 5 array    count u32, length u32 (bytes of the elements), the elements
//! 6 table    count u32, length u32 (bytes of the entries), the entries:
//!            key length u16, key (UTF-8), value — keys in strictly
//!            ascending byte order, so each appears once
//! ```
//!
//! Arrays and tables carry their byte length, so a reader skips one without
//! descending into it; the config table is depth 1 and nothing may be
//! nested deeper than [`MAX_DEPTH`].
//!
//! # Rules a parsed ROM satisfies
//!
//! - The header's `size` covers the header, the tables and the config area
//!   and is at most the bytes handed over (bytes past it are ignored, as a
//!   reader mapping whole pages hands over more); `reserved` fields are 0.
//! - Every string lies in the pool and is UTF-8. Component names and
//!   binaries follow [`valid_name`], session types [`valid_service`];
//!   component names are unique, and so are session types.
//! - Every field is in the range given above; the capability quotas add up
//!   to at most [`MAX_TOTAL_CAPS`]. A component that provides services
//!   does not serve the shared endpoint (its slot for it holds an endpoint
//!   of its own).
//! - Each component's provides entries, route records and config tree lie
//!   inside their tables; a component provides a service at most once and
//!   routes it at most once; the parent list names a service at most once.
//! - A route's target is the parent, and then the service is in the parent
//!   list, or another component that provides the service. (Cycles of
//!   routes between components, which the format can express, are refused
//!   by xtask's checker; they would block a start, they cannot break a
//!   reader.)
//! - A component's device records are at most [`MAX_IO_RANGES`] I/O-port
//!   ranges followed by at most [`MAX_IRQS`] ISA IRQs, or one platform
//!   record alone; at most one component of the ROM has it. No two records of
//!   the ROM share a port or an IRQ (a device has one driver), and no
//!   range touches the ports the kernel drives itself ([`KERNEL_PORTS`]).
//!   ISA IRQ 2 is the 8259 cascade: no device raises it, and on most
//!   machines IRQ 0 arrives at its GSI.
//! - Each config tree is exactly one table of exactly `config_len` bytes,
//!   follows the value rules above and nests at most [`MAX_DEPTH`] deep.

mod read;
mod value;
mod write;

use core::fmt;

pub use abi::cpu::CpuSet;
use interfaces::child::platform;
pub use interfaces::child::OwnCaps;
pub use read::{
    ArgError, Component, Components, Devices, Route, Routes, Services, Target, ARG_KEY,
};
pub use value::{parse_tree, Array, Table, Value, ValueBuf};
pub use write::{encode, encoded_config_len, ComponentSpec, EncodeError, RouteSpec, Spec};

/// The first eight bytes of every config ROM.
pub const MAGIC: [u8; 8] = *b"PECANCFG";
/// The format version this module reads and writes.
pub const VERSION: u32 = 5;
/// Component flag: init kills the component when a component with a
/// `Reconfig` session asks it to (scenario key `killable`; for tests of
/// what happens when a component dies under load).
pub const FLAG_KILLABLE: u8 = 1;
/// Size of the header.
pub const HEADER_SIZE: usize = 32;
/// Size of a component record.
pub const COMPONENT_SIZE: usize = 64;
/// Size of a service-table record.
pub const SERVICE_SIZE: usize = 6;
/// Size of a route record.
pub const ROUTE_SIZE: usize = 4;
/// Size of a device record.
pub const DEVICE_SIZE: usize = 6;
/// Most I/O-port ranges one component may be given.
pub const MAX_IO_RANGES: usize = 4;
/// Most IRQs one component may be given.
pub const MAX_IRQS: usize = 4;
/// ISA IRQs are numbered below this.
pub const ISA_IRQS: u8 = 16;
/// The 8259 cascade line: no device raises ISA IRQ 2.
pub const CASCADE_IRQ: u8 = 2;
/// The I/O ports the kernel drives itself after boot, which no component
/// may be given: (first, last, what).
pub const KERNEL_PORTS: [(u16, u16, &str); 4] = [
    (
        0x20,
        0x21,
        "the master 8259 PIC, which the kernel keeps masked",
    ),
    (
        0xa0,
        0xa1,
        "the slave 8259 PIC, which the kernel keeps masked",
    ),
    (
        0xf4,
        0xf7,
        "the debug-exit port the kernel ends the run with",
    ),
    (0x3f8, 0x3ff, "COM1, the kernel's serial console"),
];

/// The I/O ports of the platform service's I/O-BAR window (first, last).
pub const PLATFORM_IO_WINDOW: (u16, u16) = (platform::IO_WINDOW_FIRST, platform::IO_WINDOW_LAST);

/// A device a component is given: what the kernel hands a driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The I/O ports `first..=last`.
    IoPorts { first: u16, last: u16 },
    /// An ISA IRQ (init hands over the handler of the GSI it arrives at).
    Irq(u8),
    /// The PCI platform: the component is the platform service
    /// (`interfaces::child::platform`), which includes the I/O ports of
    /// the I/O-BAR window.
    Platform,
}

impl Device {
    /// Whether `self` and `other` share a port or an IRQ.
    pub fn overlaps(&self, other: &Device) -> bool {
        match (*self, *other) {
            (Device::IoPorts { first, last }, Device::IoPorts { first: f, last: l }) => {
                first <= l && f <= last
            }
            (Device::Irq(a), Device::Irq(b)) => a == b,
            (Device::Platform, Device::Platform) => true,
            (Device::Platform, Device::IoPorts { first, last })
            | (Device::IoPorts { first, last }, Device::Platform) => {
                // Ranges overlap when each starts before the other ends.
                let window = platform::IO_WINDOW_FIRST..=platform::IO_WINDOW_LAST;
                window.contains(&first)
                    || window.contains(&last)
                    || (first..=last).contains(window.start())
            }
            _ => false,
        }
    }

    /// The kernel's port range this one overlaps, if any (its index in
    /// [`KERNEL_PORTS`]).
    pub fn kernel_conflict(&self) -> Option<usize> {
        KERNEL_PORTS
            .iter()
            .position(|&(first, last, _)| self.overlaps(&Device::IoPorts { first, last }))
    }

    fn to_raw(self) -> (u8, u16, u16) {
        match self {
            Device::IoPorts { first, last } => (1, first, last),
            Device::Irq(irq) => (2, u16::from(irq), 0),
            Device::Platform => (3, 0, 0),
        }
    }

    fn from_raw(kind: u8, a: u16, b: u16) -> Option<Device> {
        match kind {
            1 if a <= b => Some(Device::IoPorts { first: a, last: b }),
            2 if a < u16::from(ISA_IRQS) && a != u16::from(CASCADE_IRQ) && b == 0 => {
                Some(Device::Irq(a as u8))
            }
            3 if a == 0 && b == 0 => Some(Device::Platform),
            _ => None,
        }
    }
}
/// A route target meaning the parent.
pub const PARENT: u16 = 0xffff;

/// Most components a scenario may have.
pub const MAX_COMPONENTS: usize = 64;
/// Most distinct session types a ROM may name.
pub const MAX_SERVICES: usize = 256;
/// Longest component name or binary, in bytes: a boot-image name.
pub const NAME_LEN: usize = formats::bootimage::NAME_LEN;
/// Longest session type, in bytes.
pub const SERVICE_LEN: usize = 32;
/// The smallest capability quota (slots).
pub const MIN_CAPS: u32 = 16;
/// The largest capability quota: the kernel's largest capability table.
pub const MAX_CAPS: u32 = 1 << abi::object::MAX_CAP_TABLE_BITS;
/// Most capability slots all components together may have (65536 slots
/// of 128 bytes are 8 MiB; each table is paid from its component's block,
/// `crate::plan`).
pub const MAX_TOTAL_CAPS: u32 = 65536;
/// The largest RAM quota in MiB (64 GiB, `interfaces::child::MAX_UNTYPED_BITS`).
pub const MAX_RAM_MIB: u32 =
    1 << (interfaces::child::MAX_UNTYPED_BITS - interfaces::child::MIB_BITS);
/// The highest priority a component may have: init's.
pub const MAX_PRIORITY: u8 = interfaces::child::INIT_PRIORITY;
/// A component's priority when the scenario does not give one.
pub const DEFAULT_PRIORITY: u8 = interfaces::child::PRIORITY;
/// CPUs are numbered below this (QEMU's `-smp` limit for the machines
/// used here).
pub const MAX_CPUS: u32 = 255;
/// CPUs a component's CPU set can name: those numbered below this (the
/// bits of `abi::cpu::CpuSet`).
pub const SET_CPUS: u32 = 64;
/// Most restarts a policy may allow.
pub const MAX_RESTARTS: u32 = 65535;
/// The longest first back-off of a restart policy (one hour).
pub const MAX_BACKOFF_MS: u32 = 3_600_000;
/// The longest wait before a restart, however often it doubled.
pub const MAX_RESTART_DELAY_MS: u32 = 60_000;
/// Most bytes of one component's encoded config tree.
pub const MAX_CONFIG_BYTES: usize = 65536;
/// Deepest nesting of config values; the config table itself is depth 1.
pub const MAX_DEPTH: usize = 16;

/// Whether `name` may name a component or a binary: 1 to [`NAME_LEN`]
/// bytes of ASCII letters, digits, `-`, `_` and `.`.
pub fn valid_name(name: &str) -> bool {
    (1..=NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Whether `service` is a session type: 1 to [`SERVICE_LEN`] bytes of
/// ASCII letters, digits and `_`, starting with a letter.
pub fn valid_service(service: &str) -> bool {
    (1..=SERVICE_LEN).contains(&service.len())
        && service.as_bytes()[0].is_ascii_alphabetic()
        && service
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `caps` is an acceptable capability quota: a power of two from
/// [`MIN_CAPS`] to [`MAX_CAPS`].
pub fn valid_caps(caps: u32) -> bool {
    caps.is_power_of_two() && (MIN_CAPS..=MAX_CAPS).contains(&caps)
}

/// What init does when a component exits or faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// It stays stopped.
    Never,
    /// Restart it at most `max` times; the n-th restart waits
    /// [`Restart::delay_ms`]`(n)`.
    Always { max: u32, backoff_ms: u32 },
}

impl Restart {
    /// How long init waits before restart number `n` (1-based):
    /// `backoff_ms` × 2^(n−1), at most [`MAX_RESTART_DELAY_MS`]; `None`
    /// when the policy allows no `n`-th restart.
    pub fn delay_ms(&self, n: u32) -> Option<u32> {
        match *self {
            Restart::Never => None,
            Restart::Always { max, .. } if n == 0 || n > max => None,
            Restart::Always { backoff_ms, .. } => {
                let factor = 1u64.checked_shl(n - 1).unwrap_or(u64::MAX);
                let delay = u64::from(backoff_ms).saturating_mul(factor);
                Some(delay.min(u64::from(MAX_RESTART_DELAY_MS)) as u32)
            }
        }
    }

    /// The policy's fields as stored: (kind, max, backoff_ms).
    fn to_raw(self) -> (u8, u32, u32) {
        match self {
            Restart::Never => (0, 0, 0),
            Restart::Always { max, backoff_ms } => (1, max, backoff_ms),
        }
    }

    /// The policy stored as (kind, max, backoff_ms), if those are valid.
    fn from_raw(kind: u8, max: u32, backoff_ms: u32) -> Option<Restart> {
        match kind {
            0 if max == 0 && backoff_ms == 0 => Some(Restart::Never),
            1 if (1..=MAX_RESTARTS).contains(&max) && backoff_ms <= MAX_BACKOFF_MS => {
                Some(Restart::Always { max, backoff_ms })
            }
            _ => None,
        }
    }
}

/// What a component that provides no sessions finds of the service
/// endpoint its parent's children share (`interfaces::child::SERVICE_ENDPOINT`):
/// the scenario key `shared_endpoint`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SharedEndpoint {
    /// Write-only, badged with its index: it calls the server there.
    #[default]
    Call,
    /// All rights: it receives on it and answers; it is a server, so its
    /// parent does not wait for it to finish.
    Serve,
}

impl SharedEndpoint {
    /// Both, with their words in a scenario.
    pub const WORDS: [(&'static str, SharedEndpoint); 2] = [
        ("call", SharedEndpoint::Call),
        ("serve", SharedEndpoint::Serve),
    ];

    /// The grant written as `word` (`"call"`, `"serve"`).
    pub fn from_word(word: &str) -> Option<SharedEndpoint> {
        SharedEndpoint::WORDS
            .iter()
            .find(|(w, _)| *w == word)
            .map(|&(_, e)| e)
    }

    fn to_raw(self) -> u8 {
        match self {
            SharedEndpoint::Call => 0,
            SharedEndpoint::Serve => 1,
        }
    }

    fn from_raw(raw: u8) -> Option<SharedEndpoint> {
        match raw {
            0 => Some(SharedEndpoint::Call),
            1 => Some(SharedEndpoint::Serve),
            _ => None,
        }
    }
}

/// Where in the ROM a fault is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Header,
    /// Component record `n` (from 0).
    Component(usize),
    /// Service-table record `n`.
    Service(usize),
    /// Entry `n` of the parent list.
    Parent(usize),
}

/// Which field of a component record is out of range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    RamMib,
    Caps,
    Priority,
    Cpu,
    /// The CPU set is empty or lacks `cpu`.
    Cpus,
    Restart,
    /// Bits of the own-capability set that name nothing.
    Own,
    /// Neither call nor serve, or serve by a component that provides
    /// services.
    SharedEndpoint,
    /// Flag bits that name nothing.
    Flags,
    Reserved,
}

/// Which list a component's range points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    Provides,
    Routes,
    Config,
    Devices,
}

/// What is wrong with a value of a config tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueFault {
    /// The value runs past the end of its tree (or its container).
    Truncated,
    /// A tag byte that is not 1 to 6.
    UnknownTag(u8),
    /// A bool byte that is not 0 or 1.
    BadBool(u8),
    /// A string or key that is not UTF-8.
    NotUtf8,
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A table's keys are not in strictly ascending order.
    KeysOutOfOrder,
    /// An array's or table's elements do not fill exactly its length, or
    /// the tree does not fill exactly the component's `config_len`.
    LengthMismatch,
    /// The tree is not a table.
    NotATable,
}

impl fmt::Display for ValueFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ValueFault::Truncated => f.write_str("a value runs past the end of its container"),
            ValueFault::UnknownTag(t) => write!(f, "unknown value tag {t}"),
            ValueFault::BadBool(b) => write!(f, "bool byte {b} is neither 0 nor 1"),
            ValueFault::NotUtf8 => f.write_str("a string or key is not UTF-8"),
            ValueFault::TooDeep => write!(f, "values nest deeper than {MAX_DEPTH}"),
            ValueFault::KeysOutOfOrder => {
                f.write_str("table keys are not in strictly ascending order")
            }
            ValueFault::LengthMismatch => {
                f.write_str("the contents do not fill exactly the declared length")
            }
            ValueFault::NotATable => f.write_str("the config is not a table"),
        }
    }
}

/// What is wrong with a ROM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The first eight bytes are not `PECANCFG`.
    BadMagic,
    /// A version other than [`VERSION`].
    UnsupportedVersion(u32),
    /// `need` bytes are required, only `have` are there (the input, or the
    /// header's `size` for the tables and config area).
    Truncated { need: u64, have: u64 },
    /// The header's `size` is larger than the bytes present.
    SizeMismatch { header: u64, actual: u64 },
    /// A reserved field is not zero.
    ReservedNotZero,
    /// More components or services than allowed.
    TooMany(usize),
    /// A string reaches past the pool or is not UTF-8.
    BadString,
    /// A name or session type that breaks [`valid_name`] or
    /// [`valid_service`].
    BadName,
    /// The name (or session type) of an earlier record.
    DuplicateName,
    /// The binary breaks [`valid_name`].
    BadBinary,
    /// A field out of its range.
    BadField(Field),
    /// The component's capability quota brings the total above
    /// [`MAX_TOTAL_CAPS`].
    TooManyCaps,
    /// A range that leaves its list.
    BadRange(List),
    /// A service index that is not in the service table.
    BadService(u16),
    /// A service listed twice (provides, routes or parent list).
    DuplicateService(u16),
    /// A route's target is neither the parent nor another component.
    BadTarget(u16),
    /// A route to a target that does not provide the service.
    NotProvided { service: u16, target: u16 },
    /// A config tree breaks the value rules at byte `at` of the tree.
    BadValue { at: usize, fault: ValueFault },
    /// Device record `n` (of the device table) has an unknown kind, an
    /// empty port range, an IRQ out of range or a reserved byte set.
    BadDevice(usize),
    /// More I/O-port ranges or IRQs than allowed, or an I/O-port range
    /// after an IRQ.
    TooManyDevices,
    /// Device record `n` shares a port or an IRQ with an earlier record.
    DeviceShared(usize),
    /// Device record `n` reaches into [`KERNEL_PORTS`].
    KernelPorts(usize),
}

/// A broken ROM: where and what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RomError {
    pub place: Place,
    pub fault: Fault,
}

impl fmt::Display for RomError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.place {
            Place::Header => f.write_str("config ROM: ")?,
            Place::Component(n) => write!(f, "config ROM component {n}: ")?,
            Place::Service(n) => write!(f, "config ROM service {n}: ")?,
            Place::Parent(n) => write!(f, "config ROM parent-list entry {n}: ")?,
        }
        match self.fault {
            Fault::BadMagic => f.write_str("does not start with the magic \"PECANCFG\""),
            Fault::UnsupportedVersion(v) => {
                write!(f, "version {v}, only version {VERSION} is supported")
            }
            Fault::Truncated { need, have } => {
                write!(f, "truncated: needs {need} bytes, has {have}")
            }
            Fault::SizeMismatch { header, actual } => write!(
                f,
                "the header says {header} bytes, only {actual} are present"
            ),
            Fault::ReservedNotZero => f.write_str("a reserved field is not zero"),
            Fault::TooMany(n) => write!(f, "{n} records, more than allowed"),
            Fault::BadString => f.write_str("a string is outside the pool or not UTF-8"),
            Fault::BadName => f.write_str("the name breaks the naming rules"),
            Fault::DuplicateName => f.write_str("the name of an earlier record"),
            Fault::BadBinary => f.write_str("the binary breaks the naming rules"),
            Fault::BadField(field) => write!(f, "{field:?} out of range"),
            Fault::TooManyCaps => write!(
                f,
                "the capability quotas add up to more than {MAX_TOTAL_CAPS}"
            ),
            Fault::BadRange(list) => write!(f, "its {list:?} range leaves the list"),
            Fault::BadService(s) => write!(f, "service index {s} is not in the service table"),
            Fault::DuplicateService(s) => write!(f, "service {s} is listed twice"),
            Fault::BadTarget(t) => {
                write!(
                    f,
                    "route target {t} is neither the parent nor another component"
                )
            }
            Fault::NotProvided { service, target } if target == PARENT => {
                write!(
                    f,
                    "routes service {service} to the parent, which does not provide it"
                )
            }
            Fault::NotProvided { service, target } => write!(
                f,
                "routes service {service} to component {target}, which does not provide it"
            ),
            Fault::BadValue { at, fault } => write!(f, "config byte {at}: {fault}"),
            Fault::BadDevice(n) => write!(f, "device record {n} is malformed"),
            Fault::TooManyDevices => write!(
                f,
                "more than {MAX_IO_RANGES} I/O-port ranges or {MAX_IRQS} IRQs, ports after IRQs, or the platform with other devices"
            ),
            Fault::DeviceShared(n) => {
                write!(f, "device record {n} shares a port or IRQ with another")
            }
            Fault::KernelPorts(n) => {
                write!(f, "device record {n} reaches ports the kernel drives")
            }
        }
    }
}

/// A parsed, validated config ROM borrowed from its bytes.
///
/// Invariant: `bytes` is exactly the ROM (`size` long) and satisfies every
/// rule in the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rom<'a> {
    bytes: &'a [u8],
    layout: read::Layout,
}

#[cfg(test)]
mod tests;
