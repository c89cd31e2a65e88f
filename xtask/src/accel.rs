//! Choosing QEMU's accelerator: TCG (emulation) or KVM.
//!
//! The rule: TCG unless KVM is known to work. On the project's machines
//! `/dev/kvm` is a software PVM (`/sys/module/kvm_pvm` exists) under which
//! user-mode `syscall` and x87/SSE fail, so KVM is chosen automatically only
//! when `/dev/kvm` exists, `/sys/module/kvm_pvm` does not, and a probe boot
//! (the `demo` scenario with the boot image, headless, 30 s) ends with the
//! kernel's success exit.
//! `--accel` overrides the rule; `--icount` needs TCG. The decision is made
//! once per xtask process.

use std::path::Path;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::qemu::{self, GuestExit, Machine};
use crate::scenario;

/// A QEMU accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Accel {
    Tcg,
    Kvm,
}

impl Accel {
    /// The name QEMU's `-accel` takes.
    pub fn qemu_name(self) -> &'static str {
        match self {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        }
    }
}

/// The accelerator chosen and why.
#[derive(Debug, Clone)]
pub struct Choice {
    pub accel: Accel,
    pub reason: String,
}

/// How long the KVM probe boot may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

static AUTO: OnceLock<Choice> = OnceLock::new();

/// Chooses the accelerator for booting `kernel` (with boot image `initrd`)
/// and prints the choice. `requested` is `--accel`; `icount` is whether
/// `-icount` will be used.
pub fn choose(
    requested: Option<Accel>,
    icount: bool,
    kernel: &Path,
    initrd: Option<&Path>,
    root: &Path,
) -> Result<Choice> {
    let choice = match (requested, icount) {
        (Some(Accel::Kvm), true) => bail!("--icount needs TCG; it cannot be used with --accel kvm"),
        (Some(accel), _) => Choice {
            accel,
            reason: "requested with --accel".to_string(),
        },
        (None, true) => Choice {
            accel: Accel::Tcg,
            reason: "--icount needs TCG".to_string(),
        },
        (None, false) => AUTO.get_or_init(|| auto(kernel, initrd, root)).clone(),
    };
    println!(
        "==> accelerator: {} ({})",
        choice.accel.qemu_name().to_uppercase(),
        choice.reason
    );
    Ok(choice)
}

/// The automatic rule, before the probe boot. `Err` carries why TCG is used.
fn host_allows_kvm(dev_kvm: bool, kvm_pvm: bool) -> std::result::Result<(), &'static str> {
    if !dev_kvm {
        Err("no /dev/kvm")
    } else if kvm_pvm {
        Err("/dev/kvm is the software PVM (/sys/module/kvm_pvm exists), under which user-mode syscall and x87/SSE fail")
    } else {
        Ok(())
    }
}

/// The automatic choice: the host rule, then a probe boot under KVM.
fn auto(kernel: &Path, initrd: Option<&Path>, root: &Path) -> Choice {
    let tcg = |reason: String| Choice {
        accel: Accel::Tcg,
        reason,
    };
    if let Err(why) = host_allows_kvm(
        Path::new("/dev/kvm").exists(),
        Path::new("/sys/module/kvm_pvm").exists(),
    ) {
        return tcg(why.to_string());
    }
    println!("==> /dev/kvm is there: probing KVM with a headless boot of scenario demo");
    match probe(kernel, initrd, root) {
        Ok(()) => Choice {
            accel: Accel::Kvm,
            reason: "/dev/kvm exists, no kvm_pvm, and the probe boot passed".to_string(),
        },
        Err(why) => tcg(format!("the KVM probe boot failed: {why}")),
    }
}

/// Boots scenario `kernel` (the bare system, quick to end) under KVM; `Ok` when the kernel reports success
/// within [`PROBE_TIMEOUT`].
fn probe(kernel: &Path, initrd: Option<&Path>, root: &Path) -> std::result::Result<(), String> {
    let demo = scenario::load(root, "kernel").map_err(|e| format!("{e:#}"))?;
    let machine = Machine::new(
        kernel.to_path_buf(),
        initrd.map(Path::to_path_buf),
        demo.cmdline,
        Accel::Kvm,
    );
    let mut child = machine
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start QEMU: {e}"))?;
    let deadline = Instant::now() + PROBE_TIMEOUT;
    match qemu::wait_until(&mut child, deadline) {
        Ok(Some(status)) => match GuestExit::from_status(status) {
            GuestExit::Success => Ok(()),
            other => Err(other.describe()),
        },
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("no exit within {} s", PROBE_TIMEOUT.as_secs()))
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("waiting for QEMU: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_rule() {
        assert_eq!(host_allows_kvm(false, false), Err("no /dev/kvm"));
        assert!(host_allows_kvm(true, true).unwrap_err().contains("kvm_pvm"));
        assert_eq!(host_allows_kvm(true, false), Ok(()));
    }

    #[test]
    fn overrides() {
        let nowhere = Path::new("/nonexistent");
        let c = choose(Some(Accel::Kvm), false, nowhere, None, nowhere).unwrap();
        assert_eq!(c.accel, Accel::Kvm);
        let c = choose(None, true, nowhere, None, nowhere).unwrap();
        assert_eq!(c.accel, Accel::Tcg);
        assert!(choose(Some(Accel::Kvm), true, nowhere, None, nowhere).is_err());
    }
}
