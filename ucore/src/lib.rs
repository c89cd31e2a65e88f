//! Pure logic of Pecan's user-level components: no system calls, no
//! hardware, builds for the host so `cargo test` exercises it. The root
//! task (`components/core/root`) is its first user; init will be the next.
//!
//! - [`slots`]: which slots of a capability space are free.
//! - [`untyped`]: serving "an object of 2^n bytes" from untyped memory,
//!   splitting large untyped capabilities buddy-style; the system call is
//!   behind a trait, so tests run it against a model of the kernel.
//! - [`start`]: the `pecan.start=NAME[:ARG][@MIB][+own][+serve],...` list of
//!   the command line.
//! - [`load`]: where a child's segments, stack and IPC buffer go, and which
//!   file bytes each page of a segment receives.
//! - [`supervise`]: what a message on root's fault endpoint means, and which
//!   children root still waits for.
//! - [`config`]: the config ROM init will read — a scenario's components,
//!   quotas, routes, restart policies and config tables; encoder (used by
//!   xtask) and bounds-checked decoder.
//! - [`init`]: a child's quota untyped and capability table, where it
//!   runs and init's line for it.
//! - [`plan`]: the memory rule — whether a scenario can start: each
//!   component's block, init's pool pieces, root's allocations for init,
//!   the verdict, and a model of the memory the kernel hands root.
//! - [`timer`]: the Timer service's clock (PIT ticks plus counter) and
//!   each session's one-shot and periodic timeouts.
//! - [`rtc`]: the CMOS real-time clock's registers, reading them across
//!   an update, and turning a reading into a checked calendar date.
//! - [`packet_stream`]: the bulk-data channel between components (shared
//!   buffer, submit and acknowledgement rings, notifications only when
//!   needed), its buffer allocator and its test traffic.
//! - [`netcheck`]: hand-made Ethernet frames (ARP, ICMP echo, DHCP) and
//!   their parsers, for the network driver's test client.
//! - [`netpeer`]: what the guest and the host peer of the socket link
//!   agree on: addresses, ports, the transfer pattern and its checksum.
//! - [`shell`]: the shell component's command language — words,
//!   quotes, `>`/`>>` redirection, commands and their operands checked
//!   before any file is touched.
//! - [`gui`]: the GUI multiplexer's views, stacking, pointer and focus.
//! - [`ps2`]: the PS/2 keyboard's scan codes, a US keymap and the
//!   mouse's packets, as input events.
//! - [`signal`]: signal contexts on a notification word — which bit has
//!   which handler, and dispatching a word (`rt::signal` adds the
//!   capabilities).
//!
//! Like `kcore`, everything here takes untrusted input (boot information,
//! command lines, ELF files, messages) and turns bad input into error
//! values; nothing panics on input.
//!
//! There is no `unsafe` code here but in one place: the packet stream's
//! view of shared memory (`packet_stream::region`), which allows it for
//! itself; everything else is checked by `deny(unsafe_code)`.
#![no_std]
#![deny(unsafe_code)]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod blockcheck;
pub mod config;
pub mod fattest;
pub mod gui;
pub mod init;
pub mod load;
pub mod netcheck;
pub mod netpeer;
pub mod packet_stream;
pub mod plan;
pub mod ps2;
pub mod rtc;
pub mod shell;
pub mod signal;
pub mod slots;
pub mod start;
pub mod supervise;
pub mod tablet;
pub mod testdata;
pub mod timer;
pub mod untyped;
