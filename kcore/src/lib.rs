//! Pure kernel logic of Pecan: no hardware access, no allocation, builds for
//! the host so `cargo test` exercises it.
//!
//! Everything here takes untrusted or firmware-provided input and turns bad
//! input into error values; nothing panics on input, and address arithmetic
//! is checked rather than wrapping.
#![no_std]
#![forbid(unsafe_code)]
#![forbid(unsafe_op_in_unsafe_fn)]

#[cfg(test)]
extern crate std;

pub mod acpi;
pub mod cap;
mod fixed;
pub mod ioapic;
pub mod paging;
pub mod phys;
pub mod svm;
pub mod typed;
