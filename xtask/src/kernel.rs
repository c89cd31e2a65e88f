//! The kernel's build coordinates: `cargo build --release -p pecan-kernel
//! --target x86_64-unknown-none` (run by [`crate::system::build`] together
//! with the components) leaves the ELF that QEMU boots (PVH entry via
//! `-kernel`) at `target/x86_64-unknown-none/release/pecan-kernel`.

use std::path::PathBuf;

use crate::util::workspace_root;

/// The Rust target everything that runs on the bare machine is built for.
pub const TARGET: &str = "x86_64-unknown-none";

/// The kernel's package (and binary) name.
pub const PACKAGE: &str = "pecan-kernel";

/// Where the kernel ELF lands.
pub fn elf_path() -> PathBuf {
    workspace_root()
        .join("target")
        .join(TARGET)
        .join("release")
        .join(PACKAGE)
}
