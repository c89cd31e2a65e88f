//! Pecan's network stack, a library linked into each network application
//! (docs/network.md says why a library and not a component):
//!
//! - [`stack`]: smoltcp 0.14 — DHCP, ARP, IPv4, ICMP echo, UDP, TCP —
//!   over a [`stack::Driver`] (a device, a clock, a way to sleep, a seed),
//!   and the socket API: [`stack::TcpListener`], [`stack::TcpStream`],
//!   [`stack::UdpSocket`], [`stack::Pinger`];
//! - [`http`]: the HTTP/1.1 request parser and response heads;
//!   [`conn`]: one server connection's request side, timeouts included;
//! - [`serve`]: which request gets which response, one source for Pecan's
//!   server and its Linux build;
//! - [`pattern`]: the generated body of `GET /pattern/BYTES` (transfer
//!   tests and benchmarks);
//! - [`report`]: a status report rendered as HTML and JSON;
//! - [`archive`]: the static files of a ROM module (a `newc` cpio archive);
//! - [`peerlink`]: the guest's side of the peer link (its address, the
//!   host peer's services);
//! - `pecan` (on Pecan only): the driver over a Nic session, the Timer
//!   session and RDRAND.
//!
//! Everything but `pecan` is pure logic and tested on the host
//! (`cargo test -p pecan-net`), the stack over smoltcp's loopback device.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]
#![cfg_attr(not(target_os = "none"), forbid(unsafe_code))]

extern crate alloc;

pub mod archive;
pub mod conn;
pub mod http;
pub mod pattern;
#[cfg(target_os = "none")]
pub mod pecan;
pub mod peerlink;
pub mod report;
pub mod serve;
pub mod stack;

pub use smoltcp;
