//! `rt`, the Pecan user runtime: what every user-level component links
//! against so that it can be a plain `#![no_std] #![no_main]` binary with a
//! `main` function.
//!
//! - [`entry!`] names the component's `main`; `_start` (in [`start`]) sets
//!   up the stack frame and the heap, calls it, and ends the thread with
//!   its return value.
//! - [`syscall`] is the one place that executes the `syscall` instruction:
//!   raw wrappers that follow the register convention of [`abi`] exactly,
//!   and typed, safe wrappers that return `Result<_, abi::Error>`.
//! - [`print!`] / [`println!`] write to the kernel console through
//!   `DebugWrite` (see [`print`]); no allocation needed.
//! - A panic handler prints `panic in <component>: <message> at file:line`
//!   and ends the thread with exit code [`PANIC_EXIT_CODE`].
//!   [`check`] prints their named checks.
//! - [`session`]: typed session interfaces (the first: [`session::log`]),
//!   opening one through the parent and serving them as a provider.
//! - [`transfer`]: capability transfer through the main thread's IPC
//!   buffer; [`shared`]: a frame and a notification pair a server shares
//!   with a client; [`server`]: a server's loop and replies.
//! - [`dataspace`]: memory a component allocates, shares (read-only or
//!   writable) and maps; [`signal`]: asynchronous signal handlers on a
//!   notification's bits, also served from a provider's loop
//!   (`session::Provider::serve_with_signals`).
//! - [`resources`] and [`spawn`]: how a parent (root, init) makes kernel
//!   objects from its slots and untyped memory and builds and starts a
//!   child from an ELF file; [`spawn`]'s module doc lists the steps.
//! - [`cpu`]: the CPUs the component may use (its CPU set) and placing
//!   its threads on them; [`thread`]: starting a helper thread in the
//!   component's own spaces ([`thread::spawn`]).
//! - [`mmio`]: device registers and DMA memory as bounds-checked
//!   windows; [`virtio`]: the virtio-pci transport and split virtqueues
//!   (the `virtio` crate) over a Platform session.
//! - [`stream`]: packet streams (`ucore::packet_stream`) on Pecan
//!   notifications.
//! - A global allocator (`linked_list_allocator`) over a static 256 KiB
//!   arena, ready before `main` runs, so `extern crate alloc;` just works.
//! - `memcpy` and `memset` are [`memops`]' (linked in place of
//!   `compiler_builtins`' weak ones): AVX loops for blocks of 2 KiB and
//!   more, `rep movsq`/`rep stosq` and overlapping moves below.
//!
//! A whole component:
//!
//! ```ignore
//! #![no_std]
//! #![no_main]
//!
//! rt::entry!(main);
//!
//! fn main(arg: u64) -> i32 {
//!     rt::println!("hello: started with {arg:#x}");
//!     0
//! }
//! ```
//!
//! The runtime is built for `x86_64-unknown-none` only; components are
//! linked by rust-lld as static, non-PIE executables (see
//! `components/README.md`).
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

extern crate alloc;

pub use abi;
pub use interfaces;
pub use memops;

pub mod check;
pub mod cpu;
pub mod dataspace;
pub mod entropy;
pub mod fs;
pub mod heap;
pub mod mmio;
mod panic;
pub mod print;
pub mod resources;
pub mod server;
pub mod session;
pub mod shared;
pub mod signal;
pub mod spawn;
pub mod start;
pub mod stream;
pub mod syscall;
pub mod thread;
pub mod transfer;
pub mod vcpu;
pub mod virtio;

pub use heap::HEAP_SIZE;
pub use start::{component, Component};

/// The exit code a thread ends with when it panics.
pub const PANIC_EXIT_CODE: i32 = 101;
