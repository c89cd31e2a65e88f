//! Environment set-up done before anything is built or booted: the Rust
//! target `x86_64-unknown-none` must be installed, and QEMU
//! (`qemu-system-x86_64` plus qboot's firmware) must be present. Only
//! when a generated disk image is built (`crate::gendisk`): dosfstools and
//! mtools.
//!
//! Missing pieces are installed when that can be done without asking anyone
//! (rustup is there; we are root and have apt-get, which runs with no stdin
//! for CI). Otherwise xtask stops and says what to install.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::kernel::TARGET;
use crate::qemu::{QBOOT, QEMU};
use crate::util::{which, workspace_root};

/// Makes sure the bare-metal Rust target is installed.
pub fn ensure_target() -> Result<()> {
    if which("rustup").is_none() {
        if sysroot_has_target()? {
            return Ok(());
        }
        bail!(
            "the Rust target {TARGET} is not installed and rustup is missing: \
             install rustup and run `rustup target add {TARGET}` (or install the \
             target's standard library for your toolchain)"
        );
    }
    let output = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .output()
        .context("running `rustup target list --installed`")?;
    let installed = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && installed.lines().any(|l| l.trim() == TARGET) {
        return Ok(());
    }
    println!("==> installing the Rust target {TARGET} (rustup target add {TARGET})");
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .status()
        .context("running `rustup target add`")?;
    if !status.success() {
        bail!("`rustup target add {TARGET}` failed ({status})");
    }
    Ok(())
}

/// Whether the active toolchain's sysroot holds the target (for toolchains
/// not managed by rustup).
fn sysroot_has_target() -> Result<bool> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = match Command::new(rustc)
        .args(["--print", "sysroot"])
        .current_dir(workspace_root())
        .output()
    {
        Ok(output) if output.status.success() => output,
        _ => return Ok(false),
    };
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Ok(Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .is_dir())
}

/// Whether QEMU and qboot's firmware are there.
fn qemu_present() -> bool {
    which(QEMU).is_some() && Path::new(QBOOT).is_file()
}

/// Makes sure QEMU is installed, installing it with apt-get when we are root.
pub fn ensure_qemu() -> Result<()> {
    if qemu_present() {
        return Ok(());
    }
    if !is_root() || which("apt-get").is_none() {
        bail!("QEMU is missing. Install it with: sudo apt-get install -y qemu-system-x86");
    }
    println!("==> QEMU is missing ({QEMU} or {QBOOT}); installing it with apt-get");
    apt_get(&["update"])?;
    apt_get(&[
        "install",
        "-y",
        "--no-install-recommends",
        "qemu-system-x86",
    ])?;
    if !qemu_present() {
        bail!("installed qemu-system-x86, but {QEMU} or {QBOOT} is still missing");
    }
    Ok(())
}

/// The programs of dosfstools and mtools that generated disk images
/// need (`crate::gendisk`): to format, check, fill and read FAT file
/// systems inside a disk image.
pub const DISK_TOOLS: [&str; 5] = ["mkfs.fat", "fsck.fat", "mcopy", "mdir", "mtype"];

/// The full path of disk tool `name`: on `$PATH`, else in `/usr/sbin` or
/// `/sbin` (where dosfstools puts `mkfs.fat`, and which a user's `$PATH`
/// often lacks).
pub fn disk_tool(name: &str) -> Option<PathBuf> {
    which(name).or_else(|| {
        ["/usr/sbin", "/sbin"]
            .iter()
            .map(|dir| Path::new(dir).join(name))
            .find(|p| p.is_file())
    })
}

/// The disk tools that are missing.
fn missing_disk_tools() -> Vec<&'static str> {
    DISK_TOOLS
        .into_iter()
        .filter(|t| disk_tool(t).is_none())
        .collect()
}

/// Makes sure dosfstools and mtools are installed (every tool of
/// [`DISK_TOOLS`]), installing them with apt-get when we are root.
pub fn ensure_disk_tools() -> Result<()> {
    let missing = missing_disk_tools();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() || which("apt-get").is_none() {
        bail!(
            "{} missing (needed to build a generated disk image). Install them with: sudo \
             apt-get install -y dosfstools mtools",
            missing.join(", ")
        );
    }
    println!(
        "==> {} missing; installing dosfstools and mtools with apt-get",
        missing.join(", ")
    );
    apt_get(&["update"])?;
    apt_get(&[
        "install",
        "-y",
        "--no-install-recommends",
        "dosfstools",
        "mtools",
    ])?;
    let missing = missing_disk_tools();
    if !missing.is_empty() {
        bail!(
            "installed dosfstools and mtools, but {} still missing",
            missing.join(", ")
        );
    }
    Ok(())
}

/// Runs `apt-get ARGS` non-interactively, printing what it runs.
pub fn apt_get(args: &[&str]) -> Result<()> {
    println!(
        "==> DEBIAN_FRONTEND=noninteractive apt-get {}",
        args.join(" ")
    );
    let status = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .status()
        .context("running apt-get")?;
    if !status.success() {
        bail!("`apt-get {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Whether we run as root (effective uid 0), read from `/proc/self/status`,
/// else from `id -u`.
pub fn is_root() -> bool {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        if let Some(uid) = effective_uid(&status) {
            return uid == 0;
        }
    }
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The effective uid from the text of `/proc/self/status`
/// (`Uid:\treal\teffective\tsaved\tfs`).
fn effective_uid(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_from_proc_status() {
        let status = "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n";
        assert_eq!(effective_uid(status), Some(0));
        assert_eq!(effective_uid("Name:\tx\n"), None);
    }
}
