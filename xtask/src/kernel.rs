//! Building the kernel: `cargo build --release -p pecan-kernel --target
//! x86_64-unknown-none`, which leaves the ELF that QEMU boots (PVH entry via
//! `-kernel`) at `target/x86_64-unknown-none/release/pecan-kernel`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::util::{cargo, workspace_root};

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

/// Builds the kernel (cargo's output goes to the terminal) and returns the
/// ELF's path.
pub fn build() -> Result<PathBuf> {
    println!("==> building kernel");
    let status = cargo()
        .args(["build", "--release", "-p", PACKAGE, "--target", TARGET])
        .status()
        .context("running cargo build for the kernel")?;
    if !status.success() {
        bail!("building the kernel failed ({status})");
    }
    let elf = elf_path();
    if !elf.is_file() {
        bail!("cargo built the kernel, but {} is missing", elf.display());
    }
    Ok(elf)
}
