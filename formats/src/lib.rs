//! The formats Pecan's parts exchange as bytes — pure parsing and checking,
//! no hardware access, no allocation, built for the host so that `cargo
//! test` exercises it:
//!
//! - [`elf`]: a static x86-64 ELF executable checked into a load plan (the
//!   kernel loads root with it, the runtime every other component);
//! - [`bootimage`]: the boot image that carries every component (xtask
//!   writes it, the kernel and root read it);
//! - [`cmdline`]: the kernel command line's `key=value` words;
//! - [`bytes`]: bounds-checked little-endian reads;
//! - [`trace`]: the kernel trace dump (a `trace` kernel writes it on the
//!   serial console, `cargo xtask trace` reads it).
//!
//! Every input here is untrusted: bad input is an error value, nothing
//! panics on input, and address arithmetic is checked rather than wrapping.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod bootimage;
pub mod bytes;
pub mod cmdline;
pub mod elf;
#[doc(hidden)]
pub mod test_rng;
pub mod trace;

/// Bytes of a page (x86-64's smallest): the granule of ELF load plans.
pub const PAGE_SIZE: u64 = 4096;
