//! Building the system: the kernel and every component in one `cargo build
//! --release --target x86_64-unknown-none -p pecan-kernel -p <component>...`,
//! then packing the components into the boot image
//! `target/pecan/boot.img` (format: [`crate::bootimage`]), which QEMU hands
//! to the kernel with `-initrd`.
//!
//! Every component goes into the image, `root` first. A scenario with
//! components boots an image of its own, `target/pecan/scenarios/NAME.img`:
//! the same components and its config ROM as the entry [`CONFIG_ENTRY`]
//! ([`scenario_image`]). Scenario tests with malformed modules get images
//! of their own ([`crate::fixtures`]), written with [`write_boot_image`]
//! too.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::components::{self, Component};
use crate::kernel::{self, TARGET};
use crate::scenario::Scenario;
use crate::util::{cargo, display_path, workspace_root};

/// The runtime library's package: bare-metal only, like the kernel.
pub const RT_PACKAGE: &str = "pecan-rt";

/// What a build produced.
#[derive(Debug, Clone)]
pub struct System {
    /// The kernel ELF (`-kernel`).
    pub kernel: PathBuf,
    /// The boot image (`-initrd`).
    pub boot_image: PathBuf,
    /// The components packed into it, in order: name and ELF file.
    pub components: Vec<(String, Vec<u8>)>,
}

/// The boot-image entry that carries a scenario's config ROM
/// (`ucore::config`); no component may have this name.
pub const CONFIG_ENTRY: &str = "config";

/// The boot-image entry that carries a scenario's config update (its
/// `update` key), which init applies when a component asks it to; the
/// same name as `interfaces::init::UPDATE_ENTRY`, where root and init look.
pub const UPDATE_ENTRY: &str = "config.update";

/// Where the boot image is written.
pub fn boot_image_path(root: &Path) -> PathBuf {
    root.join("target").join("pecan").join("boot.img")
}

/// Where cargo leaves a bare-metal binary.
pub fn binary_path(root: &Path, name: &str) -> PathBuf {
    root.join("target").join(TARGET).join("release").join(name)
}

/// The packages that build for `x86_64-unknown-none` only: the kernel, the
/// runtime, the components and the libraries they share. The host's
/// `cargo clippy --workspace` excludes them; the bare-metal lint covers
/// them.
pub fn bare_metal_packages(root: &Path) -> Result<Vec<String>> {
    let mut packages = vec![kernel::PACKAGE.to_string(), RT_PACKAGE.to_string()];
    let dir = components::dir(root);
    packages.extend(components::discover(&dir)?.into_iter().map(|c| c.name));
    packages.extend(
        components::discover_libraries(&dir)?
            .into_iter()
            .map(|c| c.name),
    );
    Ok(packages)
}

/// Where the scenario tests' kernel is built ([`build_checked_kernel`]):
/// a target directory of its own, so that it and the release build (the
/// benchmarks' kernel) do not evict each other from cargo's cache.
pub const CHECKED_TARGET_DIR: &str = "target/checked";

/// Builds the kernel once more with debug assertions on
/// (`CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true`: the release profile
/// otherwise, optimised) into [`CHECKED_TARGET_DIR`] and returns its ELF:
/// the kernel `cargo xtask test` boots for the scenario tests, so the
/// kernel's own checks (`debug_assert!`, e.g. that the big kernel lock is
/// held wherever kernel objects are touched) and the standard library's
/// undefined-behaviour checks run on every test. The benchmarks boot the
/// release kernel of [`build`], without them.
pub fn build_checked_kernel() -> Result<PathBuf> {
    println!("==> building the kernel with debug assertions (for the scenario tests)");
    build_kernel_variant(
        CHECKED_TARGET_DIR,
        &[],
        &[("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", "true")],
    )
}

/// Where the trace kernel is built ([`build_trace_kernel`]), apart from
/// the others for the same reason as [`CHECKED_TARGET_DIR`].
pub const TRACE_TARGET_DIR: &str = "target/trace-kernel";

/// Builds the kernel with the `trace` feature (the event rings,
/// `kernel/src/trace.rs`) into [`TRACE_TARGET_DIR`] and returns its ELF:
/// the kernel `cargo xtask trace` boots. No other build has the feature.
pub fn build_trace_kernel() -> Result<PathBuf> {
    println!("==> building the kernel with the trace feature");
    build_kernel_variant(TRACE_TARGET_DIR, &["--features", "trace"], &[])
}

/// `cargo build --release` of the kernel alone into `target_dir` with
/// the extra arguments `args` and environment `env`; its ELF.
fn build_kernel_variant(target_dir: &str, args: &[&str], env: &[(&str, &str)]) -> Result<PathBuf> {
    let root = workspace_root();
    let mut cmd = kernel_build();
    cmd.args(["--target-dir", target_dir])
        .args(args)
        .envs(env.iter().copied());
    let status = cmd.status().context("running cargo build")?;
    if !status.success() {
        bail!("building the kernel into {target_dir} failed ({status})");
    }
    let elf = root
        .join(target_dir)
        .join(TARGET)
        .join("release")
        .join(kernel::PACKAGE);
    if !elf.is_file() {
        bail!("cargo built the kernel, but {} is missing", elf.display());
    }
    Ok(elf)
}

/// `cargo build --release --target x86_64-unknown-none -p pecan-kernel`,
/// to add to.
fn kernel_build() -> std::process::Command {
    let mut cmd = cargo();
    cmd.args([
        "build",
        "--release",
        "--target",
        TARGET,
        "-p",
        kernel::PACKAGE,
    ]);
    cmd
}

/// Builds the kernel and the components (cargo's output goes to the
/// terminal) and packs the boot image.
pub fn build() -> Result<System> {
    let root = workspace_root();
    let found = components::discover(&components::dir(&root))?;
    let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
    if names.is_empty() {
        println!("==> building kernel (no components)");
    } else {
        println!("==> building kernel and components: {}", names.join(", "));
    }
    let mut cmd = kernel_build();
    for name in &names {
        cmd.args(["-p", name]);
    }
    let status = cmd.status().context("running cargo build")?;
    if !status.success() {
        bail!("building the kernel and components failed ({status})");
    }
    let elf = kernel::elf_path();
    if !elf.is_file() {
        bail!("cargo built the kernel, but {} is missing", elf.display());
    }
    let components = read_components(&root, &found)?;
    let boot_image = boot_image_path(&root);
    write_boot_image(&components, &boot_image)?;
    Ok(System {
        kernel: elf,
        boot_image,
        components,
    })
}

/// The boot-image entries for `scenario` booted with kernel command line
/// `cmdline`: the components it needs ([`Scenario::image_components`]:
/// root first, then the others in the system's order), then its config ROM
/// and config update when it has components. Only what the scenario names
/// is packed, so images stay small as components (drivers, guest kernels,
/// disk images) are added.
pub fn image_entries(
    components: &[(String, Vec<u8>)],
    scenario: &Scenario,
    cmdline: &str,
) -> Result<Vec<(String, Vec<u8>)>> {
    let wanted = scenario.image_components(cmdline);
    let mut entries: Vec<(String, Vec<u8>)> = components
        .iter()
        .filter(|(name, _)| wanted.contains(name))
        .cloned()
        .collect();
    if let Some(rom) = scenario.rom()? {
        if components.iter().any(|(name, _)| name == CONFIG_ENTRY) {
            bail!(
                "a component is named `{CONFIG_ENTRY}`, the boot-image entry of the config ROM \
                 of scenario {}: rename the component",
                scenario.name
            );
        }
        entries.push((CONFIG_ENTRY.to_string(), rom));
    }
    if let Some(rom) = scenario.update_rom()? {
        entries.push((UPDATE_ENTRY.to_string(), rom));
    }
    for archive in &scenario.archives {
        let bytes = archive.pack().with_context(|| {
            format!(
                "packing archive {} of scenario {}",
                archive.name, scenario.name
            )
        })?;
        entries.push((archive.name.clone(), bytes));
    }
    for module in &scenario.data_modules {
        entries.push((module.name.clone(), module.bytes()));
    }
    let guests = crate::vmguest::entries(&crate::util::workspace_root(), &scenario.linux_guests)
        .with_context(|| format!("packing the Linux guests of scenario {}", scenario.name))?;
    entries.extend(guests);
    Ok(entries)
}

/// The boot image for `scenario` booted with kernel command line
/// `cmdline` ([`image_entries`]), written to
/// `target/pecan/images/NAME.img` (`name`: the scenario's, or a test's).
/// With `machine`, the memory rule is checked on the packed image for
/// that machine (`Scenario::check_image_memory`).
pub fn scenario_image(
    system: &System,
    scenario: &Scenario,
    cmdline: &str,
    name: &str,
    machine: Option<crate::config::Machine>,
) -> Result<PathBuf> {
    let entries = image_entries(&system.components, scenario, cmdline)?;
    let image = pack(&entries)?;
    if let Some(machine) = machine {
        scenario.check_image_memory(machine, &image)?;
    }
    let path = workspace_root()
        .join("target")
        .join("pecan")
        .join("images")
        .join(format!("{name}.img"));
    write_packed(&entries, &image, &path)
        .with_context(|| format!("the boot image of scenario {}", scenario.name))?;
    Ok(path)
}

/// The built binaries of `components`.
fn read_components(root: &Path, components: &[Component]) -> Result<Vec<(String, Vec<u8>)>> {
    components
        .iter()
        .map(|c| {
            let path = binary_path(root, &c.name);
            let bytes = std::fs::read(&path).with_context(|| {
                format!(
                    "reading component `{}` at {} (a component's binary must be named like \
                     its package, {})",
                    c.name,
                    display_path(&path),
                    display_path(&c.manifest)
                )
            })?;
            Ok((c.name.clone(), bytes))
        })
        .collect()
}

/// `entries` (name, contents), in order, packed into a boot image.
fn pack(entries: &[(String, Vec<u8>)]) -> Result<Vec<u8>> {
    let entries: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let mut image = crate::bootimage::write_image(&entries).context("packing the boot image")?;
    crate::bootimage::pad_for_large_frames(&mut image);
    Ok(image)
}

/// Packs `entries` (name, contents), in order, into a boot image at `path`.
pub fn write_boot_image(entries: &[(String, Vec<u8>)], path: &Path) -> Result<()> {
    write_packed(entries, &pack(entries)?, path)
}

/// Writes `image`, packed from `entries`, to `path` and says so.
fn write_packed(entries: &[(String, Vec<u8>)], image: &[u8], path: &Path) -> Result<()> {
    crate::util::write_atomically(path, image)?;
    println!(
        "==> boot image: {} ({} KiB: {})",
        display_path(path),
        image.len() / 1024,
        if entries.is_empty() {
            "no components".to_string()
        } else {
            entries
                .iter()
                .map(|(n, b)| format!("{n} {} KiB", b.len().div_ceil(1024)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_entries_end_with_the_config_rom() {
        let components = vec![
            ("root".to_string(), b"root elf".to_vec()),
            ("init".to_string(), b"init elf".to_vec()),
            ("hello".to_string(), b"hello elf".to_vec()),
            ("other".to_string(), b"other elf".to_vec()),
        ];
        let binaries: Vec<String> = components.iter().map(|(n, _)| n.clone()).collect();
        let names = |entries: &[(String, Vec<u8>)]| -> Vec<String> {
            entries.iter().map(|(n, _)| n.clone()).collect()
        };
        let path = Path::new("scenarios/x.toml");
        let plain = crate::scenario::parse(path, "description = 'x'\n", &binaries).unwrap();
        // Only what the command line starts (a missing name is left to root
        // to refuse), root always.
        assert_eq!(
            names(&image_entries(&components, &plain, "").unwrap()),
            ["root"]
        );
        let started = image_entries(
            &components,
            &plain,
            "a=b pecan.start=hello:1+own,nothere,hello:2",
        )
        .unwrap();
        assert_eq!(names(&started), ["root", "hello"]);
        assert_eq!(started[1].1, b"hello elf");
        // Boot modules are packed without being started.
        let with_module = crate::scenario::parse(
            path,
            "description = 'x'\nboot_modules = ['other']\n",
            &binaries,
        )
        .unwrap();
        assert_eq!(
            names(&image_entries(&components, &with_module, "").unwrap()),
            ["root", "other"]
        );
        let e = format!(
            "{:#}",
            crate::scenario::parse(
                path,
                "description = 'x'\nboot_modules = ['nope']\n",
                &binaries
            )
            .unwrap_err()
        );
        assert_eq!(
            e,
            "scenarios/x.toml:2:17: boot_modules: no component \"nope\" in components/"
        );

        // Archives: a directory packed as a cpio module, after the rest.
        let dir = std::env::temp_dir().join(format!("pecan-archive-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.txt"), b"alpha").unwrap();
        std::fs::write(dir.join("sub/b.txt"), b"beta").unwrap();
        let scenario = dir.join("x.toml");
        let with_archive = crate::scenario::parse(
            &scenario,
            "description = 'x'\narchives = [{ name = 'www', dir = '.' }]\n",
            &binaries,
        )
        .unwrap();
        let entries = image_entries(&components, &with_archive, "").unwrap();
        assert_eq!(names(&entries), ["root", "www"]);
        let cpio = String::from_utf8_lossy(&entries[1].1).into_owned();
        for part in [
            "a.txt\0",
            "alpha",
            "sub\0",
            "sub/b.txt\0",
            "beta",
            "TRAILER!!!",
        ] {
            assert!(cpio.contains(part), "{part:?} not in the archive");
        }
        for (text, message) in [
            (
                "archives = [{ name = 'hello', dir = '.' }]",
                "already the name of a module or component",
            ),
            (
                "archives = [{ name = 'a b', dir = '.' }]",
                "is not 1..=48 of",
            ),
            (
                "archives = [{ name = 'w', dir = 'nothere' }]",
                "is not a directory",
            ),
        ] {
            let e = crate::scenario::parse(
                &scenario,
                &format!("description = 'x'\n{text}\n"),
                &binaries,
            )
            .unwrap_err();
            assert!(format!("{e:#}").contains(message), "{e:#}");
        }
        std::fs::remove_dir_all(&dir).unwrap();

        let text = "description = 'x'\n[[component]]\nname = 'hello'\nram_mib = 1\ncaps = 16\n";
        let with = crate::scenario::parse(path, text, &binaries).unwrap();
        let entries = image_entries(&components, &with, "").unwrap();
        assert_eq!(names(&entries), ["root", "init", "hello", CONFIG_ENTRY]);
        let rom = ucore::config::Rom::parse(&entries[3].1).unwrap();
        assert_eq!(rom.find("hello").unwrap().caps, 16);
        // The packed image carries it under its name.
        let image = crate::bootimage::write_image(
            &entries
                .iter()
                .map(|(n, b)| (n.as_str(), b.as_slice()))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let parsed = formats::bootimage::BootImage::parse(&image).unwrap();
        assert_eq!(parsed.find(CONFIG_ENTRY).unwrap().data, &entries[3].1[..]);

        let mut clash = components.clone();
        clash.push((CONFIG_ENTRY.to_string(), b"a component".to_vec()));
        let e = format!("{:#}", image_entries(&clash, &with, "").unwrap_err());
        assert!(e.starts_with("a component is named `config`"), "{e}");
    }

    #[test]
    fn an_update_is_packed_after_the_config_rom() {
        let root = workspace_root();
        let scenario = crate::scenario::load(&root, "reconfig").unwrap();
        let components = vec![("root".to_string(), b"root elf".to_vec())];
        let entries = image_entries(&components, &scenario, "").unwrap();
        let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["root", CONFIG_ENTRY, UPDATE_ENTRY]);
        let update = ucore::config::Rom::parse(&entries[2].1).unwrap();
        assert!(update.find("newcomer").is_some());
        assert!(update.find("doomed").is_none());
    }
}
