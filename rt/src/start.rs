//! Process entry: `_start`, the component descriptor and [`entry!`].
//!
//! # Contract with the kernel
//!
//! The kernel starts a component's first thread at the ELF entry `_start`
//! with `rsp` at the top of a mapped stack (16-byte aligned) and `rdi` = an
//! argument word: the address of the boot-information page for root, 0
//! otherwise. Every other register is unspecified. The loader has zeroed
//! `.bss` (ELF semantics: memory size beyond file size is zero).
//!
//! # What `_start` does
//!
//! It clears `rbp` (the end of the frame-pointer chain), aligns `rsp` down to
//! 16 bytes (defensive: the kernel promises it already is) and `call`s
//! [`rt_start`], so that Rust code is entered as the SysV ABI requires
//! (`rsp + 8` a multiple of 16 at function entry). `rt_start` allows
//! `memcpy`/`memset` their AVX path when the CPU has it ([`memops::init`]),
//! sets up the heap, calls the component's `main` with the argument word
//! and ends the thread with `ThreadExit(main's return value)`.
//!
//! # The component descriptor
//!
//! [`entry!`] defines the one symbol the runtime needs from a component,
//! `__PECAN_COMPONENT`, a [`Component`] holding the component's name (its
//! cargo package name, used in panic messages) and its `main`. A component
//! that forgets `entry!` fails to link with `undefined symbol:
//! __PECAN_COMPONENT`.
//!
//! `main` has the type `fn(arg: u64) -> i32`; its return value is the
//! thread's exit code. A `main` that never returns can still have that type
//! (its body is `loop { ... }` or ends in [`crate::syscall::thread_exit`]).

use crate::{heap, syscall};

/// What the runtime knows about the component it runs: defined by
/// [`entry!`].
#[derive(Debug)]
pub struct Component {
    /// The component's name (its cargo package name).
    pub name: &'static str,
    /// Its main function: gets the argument word the kernel passed in
    /// `rdi`, returns the thread's exit code.
    pub main: fn(arg: u64) -> i32,
}

/// Declares the component's `main` function (`fn(arg: u64) -> i32`).
/// Use it exactly once, at the top level of the component's crate.
///
/// ```ignore
/// rt::entry!(main);
/// fn main(arg: u64) -> i32 { 0 }
/// ```
#[macro_export]
macro_rules! entry {
    ($main:path) => {
        /// The component descriptor the runtime reads (see `rt::start`).
        #[unsafe(no_mangle)]
        pub static __PECAN_COMPONENT: $crate::Component = $crate::Component {
            name: ::core::env!("CARGO_PKG_NAME"),
            main: $main,
        };
    };
}

// SAFETY: `entry!` is the only definer of `__PECAN_COMPONENT`, and it
// defines it as an immutable `static` of exactly this type; a second
// definition is a link error, a missing one too.
unsafe extern "Rust" {
    safe static __PECAN_COMPONENT: Component;
}

/// The running component's descriptor.
pub fn component() -> &'static Component {
    &__PECAN_COMPONENT
}

core::arch::global_asm!(
    ".globl _start",
    ".type _start, @function",
    "_start:",
    // End of the frame-pointer chain, for debuggers and backtraces.
    "    xor ebp, ebp",
    // SysV: rsp is 16-byte aligned before a call, so rsp + 8 is at entry.
    "    and rsp, -16",
    // rdi (the argument word) is passed through untouched.
    "    call {start}",
    // rt_start does not return.
    "    ud2",
    ".size _start, . - _start",
    start = sym rt_start,
);

/// Called by `_start` with the kernel's argument word: `memcpy`'s vector
/// path (allowed when the CPU and kernel support AVX, see [`memops`]),
/// heap, `main`, exit.
extern "C" fn rt_start(arg: u64) -> ! {
    memops::init();
    heap::init();
    let code = (component().main)(arg);
    syscall::thread_exit(code)
}
