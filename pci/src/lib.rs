//! PCI as data, for the platform service and the virtio transport: no
//! hardware access (that is behind [`ConfigSpace`], which the platform
//! service implements over the mapped ECAM window), no `unsafe`, no
//! allocation (but in the test model); built for the host so `cargo test`
//! exercises it.
//!
//! - [`config`]: naming a function ([`Bdf`], `00:1f.2`), the
//!   [`ConfigSpace`] trait and checked accesses, header registers.
//! - [`enumerate`]: every function reachable from the root bus, bounded
//!   against bridge loops and nonsense ([`enumerate::enumerate`],
//!   [`Device`]).
//! - [`bar`]: BAR decoding and sizing.
//! - [`cap`]: the capability list walk, bounded.
//! - [`msi`]: MSI and MSI-X capabilities, the x86 message, MSI-X table
//!   entries and the table's pages within its BAR.
//! - [`virtio`]: modern virtio-pci register blocks and the common
//!   configuration layout.
//! - [`matching`]: the scenario config's device selectors
//!   (`1af4:1042@00:02.0`, `class=01:00`).
//! - [`testing`] (tests, or the `testing` feature): an in-memory
//!   configuration space and the q35 machine Pecan's scenarios boot.
//!
//! Every value a device returns is untrusted: a broken or hostile device
//! gets error values (per BAR, per capability list, per bridge), never a
//! panic, an endless loop or an out-of-range access.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(any(test, feature = "testing"))]
extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod bar;
pub mod cap;
pub mod config;
pub mod enumerate;
pub mod matching;
pub mod msi;
mod parse;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
// Named so that `cargo xtask test pci` selects them.
#[cfg(test)]
mod pci_tests;
pub mod virtio;

pub use config::{Bdf, ConfigExt, ConfigSpace};
pub use enumerate::{Device, Found};
pub use matching::DeviceMatch;
pub use parse::{ParseError, Unexpected};

/// Bytes of a page: the granule in which BARs are mapped to drivers.
pub const PAGE_SIZE: u64 = 4096;
