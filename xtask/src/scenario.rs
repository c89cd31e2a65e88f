//! Scenarios: `scenarios/NAME.toml`, what `cargo xtask run NAME` boots and
//! what scenario tests refer to. The format is in `docs/scenarios.md`:
//!
//! ```toml
//! description = "Kernel boot banner and self-checks"
//! cmdline = ""            # optional, kernel command line
//! smp = 1                 # optional, the machine's CPUs
//! memory_mib = 256        # optional, the machine's memory
//! parent_provides = []    # optional, services the parent offers
//! display = "virtio-gpu"  # optional, the machine's display device
//! pointer = "virtio-tablet" # optional, the machine's tablet
//! [[component]]           # optional, repeatable: a component for init
//! ...
//! [[disk]]                # optional, repeatable: a virtio-blk disk
//! [[nic]]                 # optional, repeatable: a virtio-net NIC
//! ```
//!
//! The devices are checked and attached by [`crate::devices`].
//!
//! Loading a scenario checks it completely (the components with
//! [`crate::config::check`]), so a broken one is refused before anything
//! is built. Every error names the file, line, column and key:
//! `scenarios/demo.toml:12:1: component "fs": route Block -> "sd": no
//! component "sd"`.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use toml::Spanned;
use ucore::config::Spec;

use crate::config::{self, Machine, RawComponent};
use crate::devices::{self, Devices};
use crate::util::display_path;
use crate::{components, qemu, tomlfile};

/// The scenario directory of the workspace at `root`.
pub fn dir(root: &Path) -> PathBuf {
    root.join("scenarios")
}

/// The names of the components under `root/components`: what a scenario's
/// `binary` may name.
pub fn binaries(root: &Path) -> Result<Vec<String>> {
    Ok(components::discover(&components::dir(root))?
        .into_iter()
        .map(|c| c.name)
        .collect())
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    description: String,
    #[serde(default)]
    cmdline: String,
    smp: Option<Spanned<u32>>,
    memory_mib: Option<Spanned<u32>>,
    #[serde(default)]
    parent_provides: Vec<Spanned<String>>,
    /// Another scenario of the same directory whose components are the
    /// config update init may be told to apply at run time.
    update: Option<Spanned<String>>,
    /// Components packed into the boot image although nothing starts them:
    /// boot modules a component reads as ROMs (`Rom` sessions).
    #[serde(default)]
    boot_modules: Vec<Spanned<String>>,
    /// Directories packed as ROM modules (`newc` cpio archives of their
    /// regular files).
    #[serde(default)]
    archives: Vec<Spanned<RawArchive>>,
    /// Modules of deterministic bytes for tests (`ucore::testdata`).
    #[serde(default)]
    data_modules: Vec<Spanned<RawDataModule>>,
    /// Linux guests of the VMM: the kernel and an initramfs per guest
    /// packed as boot modules (`crate::vmguest`).
    #[serde(default)]
    linux_guests: Vec<Spanned<RawLinuxGuest>>,
    #[serde(default, rename = "component")]
    components: Vec<Spanned<RawComponent>>,
    /// The machine's devices (`crate::devices`).
    #[serde(default, rename = "disk")]
    disks: Vec<Spanned<devices::RawDisk>>,
    #[serde(default, rename = "nic")]
    nics: Vec<Spanned<devices::RawNic>>,
    display: Option<Spanned<String>>,
    pointer: Option<Spanned<String>>,
}

/// One entry of `archives`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArchive {
    name: Spanned<String>,
    dir: Spanned<String>,
}

/// One entry of `data_modules`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataModule {
    name: Spanned<String>,
    mib: Spanned<u64>,
}

/// Most MiB of one data module.
pub const MAX_DATA_MODULE_MIB: u64 = 256;

/// A boot module of deterministic bytes (`data_modules`): `mib` MiB of
/// `ucore::testdata` words ending in their checksum, for a test component
/// to map and check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataModule {
    /// The module's name.
    pub name: String,
    /// Its size in MiB.
    pub mib: u64,
}

impl DataModule {
    /// Its bytes (`ucore::testdata::fill`).
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; (self.mib << 20) as usize];
        ucore::testdata::fill(&mut out);
        out
    }
}

/// One entry of `linux_guests`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLinuxGuest {
    name: Spanned<String>,
    commands: Spanned<String>,
    #[serde(default)]
    modules: Vec<String>,
    /// Pack `/bench-linux` into the initramfs (`crate::vmguest`).
    #[serde(default)]
    bench: bool,
    /// After the commands, a shell on `/dev/hvc0` instead of the
    /// power-off (`crate::vmguest`).
    #[serde(default)]
    interactive: bool,
}

/// A directory packed as a ROM module: boot-image entry `name`, a `newc`
/// cpio archive of the regular files under `dir` (names relative to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// The module's name.
    pub name: String,
    /// The directory (absolute: resolved against the scenario's).
    pub dir: PathBuf,
}

impl Archive {
    /// The archive's bytes: the directory's regular files in name order
    /// (directories as their own entries), owned by root, mtime 0, so the
    /// same files give the same bytes.
    pub fn pack(&self) -> Result<Vec<u8>> {
        fn walk(dir: &Path, prefix: &str, out: &mut crate::cpio::Archive) -> Result<()> {
            let mut entries: Vec<_> = std::fs::read_dir(dir)
                .with_context(|| format!("reading {}", display_path(dir)))?
                .collect::<std::io::Result<_>>()?;
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let name = format!("{prefix}{}", e.file_name().to_string_lossy());
                let kind = e.file_type()?;
                if kind.is_dir() {
                    out.dir(&name, 0o755)?;
                    walk(&e.path(), &format!("{name}/"), out)?;
                } else if kind.is_file() {
                    let data = std::fs::read(e.path())
                        .with_context(|| format!("reading {}", display_path(&e.path())))?;
                    out.file(&name, 0o644, &data)?;
                }
            }
            Ok(())
        }
        let mut archive = crate::cpio::Archive::new();
        walk(&self.dir, "", &mut archive)?;
        Ok(archive.finish())
    }
}

/// One parsed and checked scenario file.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file stem.
    pub name: String,
    pub path: PathBuf,
    /// One line saying what the scenario shows; printed in listings.
    pub description: String,
    /// Kernel command line (QEMU `-append`).
    pub cmdline: String,
    /// The machine it names (or the defaults).
    pub machine: Machine,
    /// The checked components, when it has any: what the config ROM holds.
    pub config: Option<Spec>,
    /// The checked config update (`update = "NAME"`), packed as the
    /// boot-image entry `config.update`.
    pub update: Option<Box<Scenario>>,
    /// Components packed as boot modules without being started
    /// (`boot_modules`), checked to exist.
    pub boot_modules: Vec<String>,
    /// Directories packed as ROM modules (`archives`), checked to exist.
    pub archives: Vec<Archive>,
    /// Generated modules of test data (`data_modules`).
    pub data_modules: Vec<DataModule>,
    /// Linux guests whose kernel and initramfs are packed as ROM modules
    /// (`linux_guests`).
    pub linux_guests: Vec<crate::vmguest::LinuxGuest>,
    /// The machine's disks, NICs and display (`[[disk]]`, `[[nic]]`,
    /// `display`; an update's are not used: the machine is the booted
    /// scenario's).
    pub devices: Devices,
    /// Whether the file has an `update` key (an update's own is not
    /// loaded: see [`parse`]).
    names_an_update: bool,
    /// The file's text and the components it was checked against, to
    /// check it again for another machine.
    text: String,
    /// Where memory-rule errors point: the `memory_mib` key, else the
    /// first component.
    memory_span: std::ops::Range<usize>,
    binaries: Vec<String>,
}

/// A scenario as listed: its name and its description, or the reason its
/// file does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub description: std::result::Result<String, String>,
}

/// Loads scenario `name` of the workspace at `root`: `scenarios/NAME.toml`,
/// or, when `name` ends in `.toml`, that file. An unknown name is an error
/// that lists the known scenarios.
pub fn load(root: &Path, name: &str) -> Result<Scenario> {
    let binaries = binaries(root)?;
    if name.ends_with(".toml") {
        let path = PathBuf::from(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading scenario file {}", display_path(&path)))?;
        return parse(&path, &text, &binaries);
    }
    let dir = dir(root);
    let path = dir.join(format!("{name}.toml"));
    let plain_name = !name.is_empty() && !name.contains(['/', '\\']) && !name.starts_with('.');
    if !plain_name || !path.is_file() {
        let known = list(root).unwrap_or_default();
        bail!(
            "unknown scenario `{name}` (no {})\nknown scenarios:\n{}",
            display_path(&path),
            format_listing(&known)
        );
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}", display_path(&path)))?;
    parse(&path, &text, &binaries)
}

/// Parses and checks the scenario file `path` whose contents are `text`;
/// `binaries` are the components that exist.
pub fn parse(path: &Path, text: &str, binaries: &[String]) -> Result<Scenario> {
    parse_following(path, text, binaries, true)
}

/// [`parse`]; the scenario's `update` is loaded only when `follow_update`
/// (an update is parsed without following its own, so that a scenario
/// naming itself, or two naming each other, is an error, not endless
/// recursion).
fn parse_following(
    path: &Path,
    text: &str,
    binaries: &[String],
    follow_update: bool,
) -> Result<Scenario> {
    tomlfile::check_nesting(path, text)?;
    let raw: Raw = toml::from_str(text).map_err(|e| parse_error(path, text, &e))?;
    let error = |span, message: &str| tomlfile::error_at(path, text, span, message);
    let smp = match &raw.smp {
        Some(s) if !(1..=255).contains(s.get_ref()) => {
            return Err(error(
                s.span(),
                &format!("smp: {} is not from 1 to 255", s.get_ref()),
            ));
        }
        Some(s) => *s.get_ref(),
        None => qemu::DEFAULT_SMP,
    };
    let memory_mib = match &raw.memory_mib {
        Some(m) if !(qemu::MIN_MEMORY_MIB..=qemu::MAX_MEMORY_MIB).contains(m.get_ref()) => {
            return Err(error(
                m.span(),
                &format!(
                    "memory_mib: {} is not from {} to {} (1 TiB)",
                    m.get_ref(),
                    qemu::MIN_MEMORY_MIB,
                    qemu::MAX_MEMORY_MIB
                ),
            ));
        }
        Some(m) => *m.get_ref(),
        None => qemu::DEFAULT_MEMORY_MIB,
    };
    let machine = Machine { smp, memory_mib };
    let mut boot_modules = Vec::new();
    for module in &raw.boot_modules {
        let name = module.get_ref();
        if !binaries.contains(name) {
            return Err(error(
                module.span(),
                &format!("boot_modules: no component \"{name}\" in components/"),
            ));
        }
        if boot_modules.contains(name) {
            return Err(error(
                module.span(),
                &format!("boot_modules: \"{name}\" is listed twice"),
            ));
        }
        boot_modules.push(name.clone());
    }
    let mut archives: Vec<Archive> = Vec::new();
    // A generated module's name: 1..=48 of [A-Za-z0-9._-], no other
    // module's or component's; the message, else.
    let name_fault = |key: &str, name: &str, taken: bool| {
        let good = !name.is_empty()
            && name.len() <= 48
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !good {
            Some(format!(
                "{key}: name \"{name}\" is not 1..=48 of [A-Za-z0-9._-]"
            ))
        } else if taken || boot_modules.iter().chain(binaries).any(|n| n == name) {
            Some(format!(
                "{key}: \"{name}\" is already the name of a module or component"
            ))
        } else {
            None
        }
    };
    for a in &raw.archives {
        let a = a.get_ref();
        let name = a.name.get_ref();
        let taken = archives.iter().any(|x| &x.name == name);
        if let Some(message) = name_fault("archives", name, taken) {
            return Err(error(a.name.span(), &message));
        }
        let dir = path
            .parent()
            .unwrap_or(Path::new("."))
            .join(a.dir.get_ref());
        if !dir.is_dir() {
            return Err(error(
                a.dir.span(),
                &format!("archives: {} is not a directory", display_path(&dir)),
            ));
        }
        archives.push(Archive {
            name: name.clone(),
            dir,
        });
    }
    let mut data_modules: Vec<DataModule> = Vec::new();
    for m in &raw.data_modules {
        let m = m.get_ref();
        let name = m.name.get_ref();
        let taken = data_modules.iter().any(|x| &x.name == name)
            || archives.iter().any(|x| &x.name == name);
        if let Some(message) = name_fault("data_modules", name, taken) {
            return Err(error(m.name.span(), &message));
        }
        let mib = *m.mib.get_ref();
        if mib == 0 || mib > MAX_DATA_MODULE_MIB {
            return Err(error(
                m.mib.span(),
                &format!("data_modules: mib = {mib} is not 1..={MAX_DATA_MODULE_MIB}"),
            ));
        }
        data_modules.push(DataModule {
            name: name.clone(),
            mib,
        });
    }
    let mut linux_guests: Vec<crate::vmguest::LinuxGuest> = Vec::new();
    for g in &raw.linux_guests {
        let g = g.get_ref();
        let name = g.name.get_ref();
        crate::vmguest::check_name(name).map_err(|e| error(g.name.span(), &e.to_string()))?;
        let module = format!("{name}.initramfs");
        if linux_guests.iter().any(|x| &x.name == name)
            || archives.iter().any(|a| a.name == module)
            || binaries.contains(&module)
        {
            return Err(error(
                g.name.span(),
                &format!(
                    "linux_guests: \"{name}\" is listed twice or its module {module} is taken"
                ),
            ));
        }
        let commands = path
            .parent()
            .unwrap_or(Path::new("."))
            .join(g.commands.get_ref());
        if !commands.is_file() {
            return Err(error(
                g.commands.span(),
                &format!("linux_guests: {} is not a file", display_path(&commands)),
            ));
        }
        linux_guests.push(crate::vmguest::LinuxGuest {
            name: name.clone(),
            commands,
            modules: g.modules.clone(),
            bench: g.bench,
            interactive: g.interactive,
        });
    }
    let devices = devices::check(
        &raw.disks,
        &raw.nics,
        raw.display.as_ref(),
        raw.pointer.as_ref(),
        &crate::util::workspace_root(),
        |offset| tomlfile::line_column(text, offset).0,
    )
    .map_err(|(span, message)| error(span, &message))?;
    let memory_span = match (&raw.memory_mib, raw.components.first()) {
        (Some(m), _) => m.span(),
        (None, Some(c)) => c.span(),
        (None, None) => 0..0,
    };
    let config = check(path, text, &raw, binaries, machine)?;
    let update = match &raw.update {
        Some(name) if follow_update => {
            Some(Box::new(load_update(path, text, name, binaries, machine)?))
        }
        _ => None,
    };
    if update.is_some() && config.is_none() {
        let span = raw.update.as_ref().map(|u| u.span()).unwrap_or(0..0);
        return Err(error(
            span,
            "update: only a scenario with components (started by init) can be updated",
        ));
    }
    Ok(Scenario {
        name: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        path: path.to_path_buf(),
        description: raw.description,
        cmdline: raw.cmdline,
        machine,
        config,
        names_an_update: raw.update.is_some(),
        boot_modules,
        archives,
        data_modules,
        linux_guests,
        devices,
        update,
        text: text.to_string(),
        memory_span,
        binaries: binaries.to_vec(),
    })
}

/// The update `name` of the scenario `path` (whose text is `text`): the
/// scenario file `NAME.toml` next to it, checked exactly like any scenario
/// (for the same machine); it must have components and no update of its
/// own. Errors point at the `update` key, or into the update's file.
fn load_update(
    path: &Path,
    text: &str,
    name: &Spanned<String>,
    binaries: &[String],
    machine: Machine,
) -> Result<Scenario> {
    let error = |message: &str| tomlfile::error_at(path, text, name.span(), message);
    let stem = name.get_ref();
    let plain = !stem.is_empty() && !stem.contains(['/', '\\', '.']);
    let file = path
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{stem}.toml"));
    if !plain || !file.is_file() {
        return Err(error(&format!(
            "update: no scenario file {} (the update is a scenario of the same directory, \
             named without .toml)",
            display_path(&file)
        )));
    }
    let update_text = std::fs::read_to_string(&file)
        .with_context(|| format!("reading {}", display_path(&file)))?;
    let update = parse_following(&file, &update_text, binaries, false)?;
    if update.names_an_update {
        return Err(error(&format!(
            "update: {stem} names an update of its own (one update per scenario)"
        )));
    }
    if update.config.is_none() {
        return Err(error(&format!("update: {stem} has no components")));
    }
    update.check_machine(machine)?;
    Ok(update)
}

/// The components of `raw` checked for `machine`: `None` without
/// components; every error, one per line, each `file:line:col: message`.
fn check(
    path: &Path,
    text: &str,
    raw: &Raw,
    binaries: &[String],
    machine: Machine,
) -> Result<Option<Spec>> {
    if raw.components.is_empty() && raw.parent_provides.is_empty() {
        return Ok(None);
    }
    match config::check(
        text,
        &raw.parent_provides,
        &raw.components,
        binaries,
        machine,
    ) {
        Ok(spec) if spec.components.is_empty() => Ok(None),
        Ok(spec) => Ok(Some(spec)),
        Err(diags) => Err(anyhow!("{}", report_diags(path, text, &diags))),
    }
}

/// Errors shown of one file; the rest are counted.
const MAX_ERRORS_SHOWN: usize = 50;

/// Every error of `diags` as `file:line:col: message` lines, in file order,
/// at most [`MAX_ERRORS_SHOWN`] of them and then how many more there are.
fn report_diags(path: &Path, text: &str, diags: &[config::Diag]) -> String {
    let index = tomlfile::LineIndex::new(text);
    let mut lines: Vec<String> = diags
        .iter()
        .take(MAX_ERRORS_SHOWN)
        .map(|d| format!("{:#}", index.error_at(path, d.span.clone(), &d.message)))
        .collect();
    if diags.len() > MAX_ERRORS_SHOWN {
        lines.push(format!(
            "... and {} more errors ({} in all; the first {MAX_ERRORS_SHOWN} are shown)",
            diags.len() - MAX_ERRORS_SHOWN,
            diags.len()
        ));
    }
    lines.join("\n")
}

impl Scenario {
    /// Checks the scenario again for `machine` (a run's `--smp` and
    /// `--memory`, a test's `smp` and `memory_mib`).
    pub fn check_machine(&self, machine: Machine) -> Result<()> {
        if machine == self.machine {
            return Ok(());
        }
        let raw: Raw =
            toml::from_str(&self.text).map_err(|e| parse_error(&self.path, &self.text, &e))?;
        check(&self.path, &self.text, &raw, &self.binaries, machine)
            .map(drop)
            .with_context(|| {
                format!(
                    "scenario {} checked for smp = {}, memory_mib = {}",
                    self.name, machine.smp, machine.memory_mib
                )
            })
    }

    /// The memory rule before anything is built (`crate::memory`): an
    /// error at the file's `memory_mib` key, or at its first component
    /// when it has none. Nothing to check without components.
    pub fn check_memory(&self, machine: Machine) -> Result<()> {
        self.memory_rule(machine, crate::memory::Built::Nothing)
            .map_err(|message| {
                tomlfile::error_at(&self.path, &self.text, self.memory_span.clone(), &message)
            })
    }

    /// The memory rule on the scenario's packed boot image `image`
    /// (`crate::memory`).
    pub fn check_image_memory(&self, machine: Machine, image: &[u8]) -> Result<()> {
        self.memory_rule(machine, crate::memory::Built::Image(image))
            .map_err(|message| {
                anyhow!(
                    "{}: with its boot image: {message}",
                    display_path(&self.path)
                )
            })
    }

    /// The memory rule's message, if it refuses; Ok without components.
    fn memory_rule(
        &self,
        machine: Machine,
        built: crate::memory::Built<'_>,
    ) -> std::result::Result<(), String> {
        let rom = self.rom().map_err(|e| format!("{e:#}"))?;
        let update = self.update_rom().map_err(|e| format!("{e:#}"))?;
        match rom {
            Some(rom) => crate::memory::check(&rom, update.as_deref(), machine, built),
            None => Ok(()),
        }
    }

    /// The least memory (MiB, at most `qemu::MAX_MEMORY_MIB`) with which
    /// the memory rule accepts the scenario on its packed boot image
    /// `image` with `machine`'s CPUs.
    pub fn least_image_memory(&self, machine: Machine, image: &[u8]) -> Result<u32> {
        let rom = self.rom()?.context("the scenario has no components")?;
        let update = self.update_rom()?;
        crate::memory::least_for_image(&rom, update.as_deref(), machine.smp, image)
            .with_context(|| format!("{}: no memory size starts it", display_path(&self.path)))
    }

    /// The components the boot image of this scenario must carry when the
    /// kernel's command line is `cmdline` (the scenario's, plus a test's
    /// additions): root; with components, init and every component's
    /// binary, also those of the config update; the components the
    /// command line's `pecan.start=` list names (those that exist: a test
    /// may name a missing one on purpose); and `boot_modules`.
    pub fn image_components(&self, cmdline: &str) -> std::collections::BTreeSet<String> {
        let mut names = std::collections::BTreeSet::new();
        names.insert(components::ROOT.to_string());
        let add_config = |scenario: &Scenario, names: &mut std::collections::BTreeSet<String>| {
            if let Some(spec) = &scenario.config {
                names.insert(components::INIT.to_string());
                names.extend(spec.components.iter().map(|c| c.binary.clone()));
            }
        };
        add_config(self, &mut names);
        if let Some(update) = &self.update {
            add_config(update, &mut names);
        }
        if let Some(list) = formats::cmdline::value(cmdline, ucore::start::KEY) {
            names.extend(
                ucore::start::entries(list)
                    .flatten()
                    .map(|e| e.name.to_string())
                    .filter(|name| self.binaries.contains(name)),
            );
        }
        names.extend(self.boot_modules.iter().cloned());
        names
    }

    /// The config update's ROM, when the scenario has one.
    pub fn update_rom(&self) -> Result<Option<Vec<u8>>> {
        match &self.update {
            Some(update) => update.rom(),
            None => Ok(None),
        }
    }

    /// The config ROM, when the scenario has components.
    pub fn rom(&self) -> Result<Option<Vec<u8>>> {
        let Some(spec) = &self.config else {
            return Ok(None);
        };
        ucore::config::encode(spec).map(Some).map_err(|e| {
            anyhow!(
                "encoding the config ROM of {}: {e}",
                display_path(&self.path)
            )
        })
    }
}

/// A toml error about `text` (the contents of `path`) as
/// `path:line:col: [component "NAME": ][KEY: ]message`.
fn parse_error(path: &Path, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let keys = tomlfile::key_path(e).unwrap_or_default();
    let span = e.span().unwrap_or(0..0);
    let (who, keys) = match keys.strip_prefix("component") {
        Some(rest) if rest.is_empty() || rest.starts_with('.') => {
            match component_at(text, span.start) {
                Some(who) => (who, rest.trim_start_matches('.').to_string()),
                None => (String::new(), keys.clone()),
            }
        }
        _ => (String::new(), keys.clone()),
    };
    let keys = if keys.is_empty() {
        keys
    } else {
        format!("{keys}: ")
    };
    // toml's "duplicate key" names no key; its span is the key.
    let detail = match text.get(span.clone()) {
        Some(key) if e.message() == "duplicate key" && !key.is_empty() => {
            format!("duplicate key `{key}`")
        }
        _ => e.message().to_string(),
    };
    // A top-level key written after a table header belongs to that table.
    let top_level = [
        "display",
        "pointer",
        "cmdline",
        "smp",
        "memory_mib",
        "update",
    ];
    let hint = match top_level
        .iter()
        .find(|k| detail.starts_with(&format!("unknown field `{k}`")))
    {
        Some(k) => format!(
            " ({k} is a top-level key: write it before the first [[component]], [[disk]] or \
             [[nic]] table)"
        ),
        None => String::new(),
    };
    let message = format!("{who}{keys}{detail}{hint}");
    match e.span() {
        Some(span) => tomlfile::error_at(path, text, span, &message),
        None => anyhow!("{}: {message}", display_path(path)),
    }
}

/// [`component_at`] for a text that does not parse even leniently (say, an
/// integer beyond 64 bits): the last `[[component]]` header line before
/// `offset` and a `name = "..."` line of that table.
fn component_at_by_lines(text: &str, offset: usize) -> Option<String> {
    let before = &text[..offset.min(text.len())];
    let mut index = 0;
    let mut start = None;
    let mut at = 0;
    for line in before.split_inclusive('\n') {
        if line.trim_start().starts_with("[[component]]") {
            index += 1;
            start = Some(at);
        }
        at += line.len();
    }
    let start = start?;
    let name = text[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .find_map(|l| {
            let (key, value) = l.split_once('=')?;
            let value = value.trim();
            (key.trim() == "name" && value.len() >= 2 && value.starts_with('"'))
                .then(|| value[1..].split('"').next().unwrap_or("").to_string())
        });
    Some(match name {
        Some(name) => format!("component \"{name}\": "),
        None => format!("component #{index}: "),
    })
}

/// `component "NAME": ` (or `component #N: ` when it has no name) for the
/// `[[component]]` table that holds byte `offset` of `text`: the last one
/// whose header is before it.
fn component_at(text: &str, offset: usize) -> Option<String> {
    #[derive(Deserialize)]
    struct Lenient {
        #[serde(default)]
        component: Vec<Spanned<toml::Table>>,
    }
    let Ok(lenient) = toml::from_str::<Lenient>(text) else {
        return component_at_by_lines(text, offset);
    };
    let (index, table) = lenient
        .component
        .iter()
        .enumerate()
        .rfind(|(_, c)| c.span().start <= offset)?;
    Some(match table.get_ref().get("name").and_then(|n| n.as_str()) {
        Some(name) => format!("component \"{name}\": "),
        None => format!("component #{}: ", index + 1),
    })
}

/// Every `*.toml` in the scenario directory of `root`, sorted by name.
pub fn list(root: &Path) -> Result<Vec<Listed>> {
    let dir = dir(root);
    let binaries = binaries(root).unwrap_or_default();
    let mut listed = Vec::new();
    let entries =
        std::fs::read_dir(&dir).with_context(|| format!("reading {}", display_path(&dir)))?;
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let description = std::fs::read_to_string(&path)
            .map_err(anyhow::Error::from)
            .and_then(|text| parse(&path, &text, &binaries))
            .map(|s| s.description)
            .map_err(|e| format!("{e:#}"));
        listed.push(Listed {
            name: name.to_string(),
            description,
        });
    }
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(listed)
}

/// The listing printed for an unknown scenario: one `  name  description`
/// line per scenario, names padded to one column.
pub fn format_listing(listed: &[Listed]) -> String {
    if listed.is_empty() {
        return "  (none)".to_string();
    }
    let width = listed.iter().map(|l| l.name.len()).max().unwrap_or(0);
    listed
        .iter()
        .map(|l| match &l.description {
            Ok(d) => format!("  {:width$}  {d}", l.name),
            Err(e) => format!("  {:width$}  (broken: {e})", l.name),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
