//! The Debian packages the Linux guest is made of: the cloud kernel
//! (`linux-image-<release>-cloud-amd64`, its `boot/vmlinuz-*` and its
//! modules, `lib/modules/<release>/`) and `busybox-static` (its
//! `bin/busybox`).
//!
//! They are fetched once with `apt-get download` (the newest kernel is the
//! one the meta-package `linux-image-cloud-amd64` depends on), unpacked
//! with `dpkg-deb -x`, and cached under `target/linux/`:
//!
//! ```text
//! target/linux/vmlinuz        the kernel
//! target/linux/modules/       the kernel's modules: the package's lib/modules/<release>/
//!                             (kernel/**/*.ko, modules.builtin, modules.order)
//! target/linux/busybox        the static busybox
//! target/linux/versions.txt   what they are (key=value lines, see Versions)
//! ```
//!
//! The cloud kernel builds the virtio drivers and FAT as modules; the
//! benchmark guest's initramfs carries those it needs from this same
//! package (`crate::kmod`). The package has no `modules.dep` (depmod makes
//! it at install time): dependencies come from each module's own
//! `.modinfo` section.
//!
//! A complete cache is used as it is, so figures stay comparable across
//! runs; delete `target/linux/` to fetch the newest packages again. On a
//! machine without apt the three files can be put there by hand.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::setup;
use crate::util::{display_path, run_captured, which};

/// The meta-package that depends on the newest cloud kernel.
const KERNEL_META: &str = "linux-image-cloud-amd64";
/// The package with a statically linked busybox.
const BUSYBOX_PACKAGE: &str = "busybox-static";
const VERSIONS_FILE: &str = "versions.txt";

/// What the cached pieces are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    /// e.g. `linux-image-6.1.0-56-cloud-amd64`.
    pub kernel_package: String,
    /// The Debian version of that package, e.g. `6.1.192-2`.
    pub kernel_version: String,
    /// The kernel release (`uname -r`), e.g. `6.1.0-56-cloud-amd64`.
    pub kernel_release: String,
    /// The Debian version of busybox-static.
    pub busybox_version: String,
}

impl Versions {
    fn to_text(&self) -> String {
        format!(
            "kernel_package={}\nkernel_version={}\nkernel_release={}\nbusybox_version={}\n",
            self.kernel_package, self.kernel_version, self.kernel_release, self.busybox_version
        )
    }

    fn from_text(text: &str) -> Option<Versions> {
        let get = |key: &str| {
            text.lines()
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        Some(Versions {
            kernel_package: get("kernel_package")?,
            kernel_version: get("kernel_version")?,
            kernel_release: get("kernel_release")?,
            busybox_version: get("busybox_version")?,
        })
    }

    /// One line for reports: `Linux 6.1.0-56-cloud-amd64 (Debian
    /// linux-image-6.1.0-56-cloud-amd64 6.1.192-2)`.
    pub fn kernel_description(&self) -> String {
        format!(
            "Linux {} (Debian {} {})",
            self.kernel_release, self.kernel_package, self.kernel_version
        )
    }
}

/// The guest's kernel and busybox, ready to use.
#[derive(Debug, Clone)]
pub struct GuestPieces {
    pub vmlinuz: PathBuf,
    /// The kernel package's `lib/modules/<release>/`.
    pub modules: PathBuf,
    pub busybox: PathBuf,
    pub versions: Versions,
}

/// Where the pieces are cached.
pub fn cache_dir(root: &Path) -> PathBuf {
    root.join("target").join("linux")
}

/// The cached pieces, fetching them first when the cache is incomplete.
pub fn guest_pieces(root: &Path) -> Result<GuestPieces> {
    let dir = cache_dir(root);
    if let Some(pieces) = cached(&dir) {
        return Ok(pieces);
    }
    fetch(&dir).with_context(|| {
        format!(
            "the Linux side of the benchmarks needs Debian's cloud kernel ({KERNEL_META}) and \
             {BUSYBOX_PACKAGE}; xtask fetches them with apt-get and dpkg-deb. Without those, put \
             a kernel at {0}/vmlinuz, its lib/modules/<release>/ at {0}/modules, a static \
             busybox at {0}/busybox and their versions in {0}/{VERSIONS_FILE} (see \
             xtask/src/debian.rs)",
            display_path(&dir)
        )
    })
}

/// The cache's pieces if all are there (a cache from before the modules
/// were kept is incomplete: it is fetched again).
fn cached(dir: &Path) -> Option<GuestPieces> {
    let versions = Versions::from_text(&std::fs::read_to_string(dir.join(VERSIONS_FILE)).ok()?)?;
    let pieces = GuestPieces {
        vmlinuz: dir.join("vmlinuz"),
        modules: dir.join("modules"),
        busybox: dir.join("busybox"),
        versions,
    };
    (pieces.vmlinuz.is_file()
        && pieces.busybox.is_file()
        && pieces.modules.join("modules.builtin").is_file())
    .then_some(pieces)
}

/// Downloads and unpacks both packages into `dir`.
fn fetch(dir: &Path) -> Result<GuestPieces> {
    for tool in ["apt-get", "apt-cache", "dpkg-deb"] {
        if which(tool).is_none() {
            bail!("`{tool}` is not installed (this is not a Debian-like system)");
        }
    }
    let kernel_package = newest_kernel_package()?;
    let download = dir.join("download");
    let _ = std::fs::remove_dir_all(&download);
    std::fs::create_dir_all(&download)
        .with_context(|| format!("creating {}", display_path(&download)))?;
    println!("==> fetching the Linux guest: apt-get download {kernel_package} {BUSYBOX_PACKAGE}");
    let mut cmd = Command::new("apt-get");
    cmd.args(["download", &kernel_package, BUSYBOX_PACKAGE])
        .current_dir(&download);
    let (status, output) = run_captured(&mut cmd)?;
    if !status.success() {
        bail!("`apt-get download {kernel_package} {BUSYBOX_PACKAGE}` failed ({status}):\n{output}");
    }
    let kernel_deb = find_deb(&download, &kernel_package)?;
    let busybox_deb = find_deb(&download, BUSYBOX_PACKAGE)?;

    let unpacked = download.join("kernel");
    unpack(&kernel_deb, &unpacked)?;
    let vmlinuz_src = find_vmlinuz(&unpacked.join("boot"))?;
    let kernel_release = vmlinuz_src
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .context("the kernel file has no release in its name")?
        .to_string();
    let busybox_dir = download.join("busybox");
    unpack(&busybox_deb, &busybox_dir)?;

    let versions = Versions {
        kernel_package: kernel_package.clone(),
        kernel_version: deb_version(&kernel_deb)?,
        kernel_release,
        busybox_version: deb_version(&busybox_deb)?,
    };
    let pieces = GuestPieces {
        vmlinuz: dir.join("vmlinuz"),
        modules: dir.join("modules"),
        busybox: dir.join("busybox"),
        versions,
    };
    copy(&vmlinuz_src, &pieces.vmlinuz)?;
    let modules_src = unpacked
        .join("lib")
        .join("modules")
        .join(&pieces.versions.kernel_release);
    let _ = std::fs::remove_dir_all(&pieces.modules);
    copy_tree(&modules_src, &pieces.modules)?;
    copy(&busybox_dir.join("bin").join("busybox"), &pieces.busybox)?;
    // The versions file goes last: it marks the cache complete.
    let versions_path = dir.join(VERSIONS_FILE);
    std::fs::write(&versions_path, pieces.versions.to_text())
        .with_context(|| format!("writing {}", display_path(&versions_path)))?;
    let _ = std::fs::remove_dir_all(&download);
    println!(
        "==> Linux guest: {}, busybox {} (cached in {})",
        pieces.versions.kernel_description(),
        pieces.versions.busybox_version,
        display_path(dir)
    );
    Ok(pieces)
}

/// The kernel package the meta-package depends on, running `apt-get
/// update` first (as root) when the package lists do not know it.
fn newest_kernel_package() -> Result<String> {
    if let Some(p) = kernel_dependency()? {
        return Ok(p);
    }
    if !setup::is_root() {
        bail!(
            "apt does not know {KERNEL_META}: the package lists are missing or old. \
             Run `sudo apt-get update` (xtask does it itself only when run as root)"
        );
    }
    setup::apt_get(&["update"])?;
    kernel_dependency()?.with_context(|| {
        format!("apt knows no {KERNEL_META} even after `apt-get update` (is this Debian?)")
    })
}

/// `apt-cache depends linux-image-cloud-amd64`'s kernel package, if any.
fn kernel_dependency() -> Result<Option<String>> {
    let mut cmd = Command::new("apt-cache");
    cmd.args(["depends", KERNEL_META]);
    let (_, output) = run_captured(&mut cmd)?;
    Ok(parse_kernel_dependency(&output))
}

/// The `linux-image-*-cloud-amd64` package named in `apt-cache depends`'s
/// output.
fn parse_kernel_dependency(output: &str) -> Option<String> {
    output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(|p| p.trim().trim_start_matches('<').trim_end_matches('>'))
        .find(|p| p.starts_with("linux-image-") && p.ends_with("-cloud-amd64") && *p != KERNEL_META)
        .map(str::to_string)
}

/// The downloaded `.deb` of `package` in `dir`.
fn find_deb(dir: &Path, package: &str) -> Result<PathBuf> {
    let prefix = format!("{package}_");
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("reading {}", display_path(dir)))?;
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".deb") {
            return Ok(path);
        }
    }
    bail!(
        "apt-get download left no {package}_*.deb in {}",
        display_path(dir)
    )
}

/// `dpkg-deb -x deb dir`.
fn unpack(deb: &Path, dir: &Path) -> Result<()> {
    let mut cmd = Command::new("dpkg-deb");
    cmd.arg("-x").arg(deb).arg(dir);
    let (status, output) = run_captured(&mut cmd)?;
    if !status.success() {
        bail!(
            "`dpkg-deb -x {}` failed ({status}):\n{output}",
            display_path(deb)
        );
    }
    Ok(())
}

/// The package version recorded in a `.deb`.
fn deb_version(deb: &Path) -> Result<String> {
    let mut cmd = Command::new("dpkg-deb");
    cmd.arg("-f").arg(deb).arg("Version");
    let (status, output) = run_captured(&mut cmd)?;
    let version = output.trim();
    if !status.success() || version.is_empty() {
        bail!(
            "`dpkg-deb -f {} Version` failed ({status}): {output}",
            display_path(deb)
        );
    }
    Ok(version.to_string())
}

/// The one `vmlinuz-*` in a package's `boot/`.
fn find_vmlinuz(boot: &Path) -> Result<PathBuf> {
    let entries =
        std::fs::read_dir(boot).with_context(|| format!("reading {}", display_path(boot)))?;
    for entry in entries {
        let path = entry?.path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        {
            return Ok(path);
        }
    }
    bail!("the kernel package has no boot/vmlinuz-*")
}

/// Copies the directory `from` to `to` (made), files and directories only.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", display_path(to)))?;
    let entries =
        std::fs::read_dir(from).with_context(|| format!("reading {}", display_path(from)))?;
    for entry in entries {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_file() {
            copy(&src, &dst)?;
        }
    }
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .map(|_| ())
        .with_context(|| format!("copying {} to {}", display_path(from), display_path(to)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_from_apt_cache_depends() {
        let out = "linux-image-cloud-amd64\n  Depends: linux-image-6.1.0-56-cloud-amd64\n";
        assert_eq!(
            parse_kernel_dependency(out).as_deref(),
            Some("linux-image-6.1.0-56-cloud-amd64")
        );
        assert_eq!(
            parse_kernel_dependency("W: Unable to locate package x\n"),
            None
        );
        let virtual_dep = "linux-image-cloud-amd64\n  Depends: <linux-image-6.1.0-9-cloud-amd64>\n";
        assert_eq!(
            parse_kernel_dependency(virtual_dep).as_deref(),
            Some("linux-image-6.1.0-9-cloud-amd64")
        );
    }

    #[test]
    fn versions_file_round_trip() {
        let v = Versions {
            kernel_package: "linux-image-6.1.0-56-cloud-amd64".into(),
            kernel_version: "6.1.192-2".into(),
            kernel_release: "6.1.0-56-cloud-amd64".into(),
            busybox_version: "1:1.35.0-4+deb12u1+b1".into(),
        };
        assert_eq!(Versions::from_text(&v.to_text()), Some(v.clone()));
        assert_eq!(Versions::from_text("kernel_package=x\n"), None);
        assert_eq!(
            v.kernel_description(),
            "Linux 6.1.0-56-cloud-amd64 (Debian linux-image-6.1.0-56-cloud-amd64 6.1.192-2)"
        );
    }

    #[test]
    fn cache_is_used_only_when_complete() {
        let dir = crate::util::temp_dir("debian-cache");
        assert!(cached(&dir).is_none());
        std::fs::write(dir.join("vmlinuz"), b"k").unwrap();
        std::fs::write(dir.join("busybox"), b"b").unwrap();
        assert!(cached(&dir).is_none());
        std::fs::write(
            dir.join(VERSIONS_FILE),
            "kernel_package=p\nkernel_version=1\nkernel_release=r\nbusybox_version=2\n",
        )
        .unwrap();
        assert!(cached(&dir).is_none(), "no modules yet");
        std::fs::create_dir_all(dir.join("modules")).unwrap();
        std::fs::write(dir.join("modules").join("modules.builtin"), b"").unwrap();
        let pieces = cached(&dir).unwrap();
        assert_eq!(pieces.versions.kernel_release, "r");
        std::fs::remove_file(dir.join("busybox")).unwrap();
        assert!(cached(&dir).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
