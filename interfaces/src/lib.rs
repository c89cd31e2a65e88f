//! The component framework's interfaces — the user-level protocols on top
//! of the kernel's system-call ABI (`abi`), shared by root, init, the
//! runtime (`rt`) and every component:
//!
//! - [`child`]: what a component finds when it starts — its capability
//!   slots, stack and IPC buffer, priorities, quotas;
//! - [`init`]: how root starts init and what init hands its children;
//! - [`session`]: the session protocol between a client, init (which
//!   routes requests by the scenario's config) and the provider;
//! - [`framebuffer`]: the Framebuffer session's protocol;
//! - [`input`]: the Input session's protocol and events.
//!
//! The kernel knows none of this: it depends on `abi` only. Like `abi`,
//! this crate is pure data and constants, built for the host too so that
//! its tests run with `cargo test`.
#![no_std]
#![forbid(unsafe_code)]

pub mod child;
pub mod framebuffer;
pub mod init;
pub mod input;
pub mod session;
