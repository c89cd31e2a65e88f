//! Malformed boot modules for scenario tests.
//!
//! A test file may add modules to its boot image that are derived from a
//! real component's ELF file with one deliberate defect (see
//! [`crate::testspec`]'s `[[module]]`), so root's refusal of each kind of
//! bad file is tested against the real loader on the real machine:
//!
//! | defect | what is changed | what `formats::elf` reports |
//! |--------|-----------------|---------------------------|
//! | `truncated` | the file ends one byte before the end of the last segment's file bytes | `SegmentOutsideFile` |
//! | `wrong-machine` | `e_machine` = 183 (AArch64) | `WrongMachine` |
//! | `overlapping-segments` | the second non-empty `PT_LOAD` is moved to the first one's address | `Overlap` |
//! | `write-execute` | the first executable `PT_LOAD` is also made writable | `WriteAndExecute` |
//!
//! [`corrupt`] checks that the source file loads and that the result is
//! refused with exactly the error in the table, so a fixture cannot
//! silently test something else (or nothing) when the linker's output
//! changes.
//!
//! The images of tests with such modules are written to
//! `target/pecan/tests/NAME.img`: the components, then the modules in the
//! order the test lists them.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use formats::elf::{ElfError, Limits, LoadPlan};
use serde::Deserialize;

use crate::testspec::TestSpec;
use crate::util::display_path;

mod image;
pub use image::{corrupt_image, ImageDefect};

/// A deliberate defect of a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Defect {
    Truncated,
    WrongMachine,
    OverlappingSegments,
    WriteExecute,
}

/// `e_machine` written by [`Defect::WrongMachine`]: AArch64.
pub const WRONG_MACHINE: u16 = 183;

const E_MACHINE: usize = 18;
const E_PHOFF: usize = 32;
const E_PHENTSIZE: usize = 54;
const E_PHNUM: usize = 56;
const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;
const PF_W: u32 = 2;

/// A program header's place in the file and the fields used here.
#[derive(Debug, Clone, Copy)]
struct LoadHeader {
    /// Offset of the header in the file.
    at: usize,
    flags: u32,
    offset: u64,
    vaddr: u64,
    file_size: u64,
    mem_size: u64,
}

fn u16_at(b: &[u8], at: usize) -> Result<u16> {
    let bytes = b
        .get(at..at + 2)
        .ok_or_else(|| anyhow!("truncated at {at:#x}"))?;
    Ok(u16::from_le_bytes(bytes.try_into()?))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    let bytes = b
        .get(at..at + 4)
        .ok_or_else(|| anyhow!("truncated at {at:#x}"))?;
    Ok(u32::from_le_bytes(bytes.try_into()?))
}

fn u64_at(b: &[u8], at: usize) -> Result<u64> {
    let bytes = b
        .get(at..at + 8)
        .ok_or_else(|| anyhow!("truncated at {at:#x}"))?;
    Ok(u64::from_le_bytes(bytes.try_into()?))
}

fn put(b: &mut [u8], at: usize, bytes: &[u8]) {
    b[at..at + bytes.len()].copy_from_slice(bytes);
}

/// The `PT_LOAD` headers of a file that `formats::elf` accepts.
fn load_headers(elf: &[u8]) -> Result<Vec<LoadHeader>> {
    let phoff = usize::try_from(u64_at(elf, E_PHOFF)?)?;
    let size = usize::from(u16_at(elf, E_PHENTSIZE)?);
    let count = usize::from(u16_at(elf, E_PHNUM)?);
    let mut headers = Vec::new();
    for i in 0..count {
        let at = phoff + i * size;
        if u32_at(elf, at)? != PT_LOAD {
            continue;
        }
        headers.push(LoadHeader {
            at,
            flags: u32_at(elf, at + 4)?,
            offset: u64_at(elf, at + 8)?,
            vaddr: u64_at(elf, at + 16)?,
            file_size: u64_at(elf, at + 32)?,
            mem_size: u64_at(elf, at + 40)?,
        });
    }
    Ok(headers)
}

/// `elf` (which must load) with `defect`.
pub fn corrupt(elf: &[u8], defect: Defect) -> Result<Vec<u8>> {
    LoadPlan::from_elf(elf, &Limits::LOWER_HALF)
        .map_err(|e| anyhow!("the source ELF file does not load: {e}"))?;
    let headers = load_headers(elf)?;
    let mut out = elf.to_vec();
    match defect {
        Defect::Truncated => {
            let end = headers
                .iter()
                .filter(|h| h.file_size > 0)
                .map(|h| h.offset + h.file_size)
                .max()
                .ok_or_else(|| anyhow!("no PT_LOAD segment has file bytes"))?;
            out.truncate(usize::try_from(end)? - 1);
        }
        Defect::WrongMachine => put(&mut out, E_MACHINE, &WRONG_MACHINE.to_le_bytes()),
        Defect::OverlappingSegments => {
            let mut loaded = headers.iter().filter(|h| h.mem_size > 0);
            let (Some(first), Some(second)) = (loaded.next(), loaded.next()) else {
                bail!("fewer than two non-empty PT_LOAD segments");
            };
            // p_vaddr and p_paddr.
            put(&mut out, second.at + 16, &first.vaddr.to_le_bytes());
            put(&mut out, second.at + 24, &first.vaddr.to_le_bytes());
        }
        Defect::WriteExecute => {
            let code = headers
                .iter()
                .find(|h| h.flags & PF_X != 0)
                .ok_or_else(|| anyhow!("no executable PT_LOAD segment"))?;
            put(&mut out, code.at + 4, &(code.flags | PF_W).to_le_bytes());
        }
    }
    let verdict = LoadPlan::from_elf(&out, &Limits::LOWER_HALF);
    let intended = matches!(
        (defect, &verdict),
        (Defect::Truncated, Err(ElfError::SegmentOutsideFile { .. }))
            | (Defect::WrongMachine, Err(ElfError::WrongMachine { .. }))
            | (Defect::OverlappingSegments, Err(ElfError::Overlap { .. }))
            | (Defect::WriteExecute, Err(ElfError::WriteAndExecute { .. }))
    );
    if !intended {
        bail!("the {defect:?} module is not refused as intended: {verdict:?}");
    }
    Ok(out)
}

/// Puts the test's `[[config_value]]`s into the config ROM among
/// `entries` (the boot-image entry `config`): the ROM is decoded, each
/// value replaces (or adds) its key in its component's config table, and
/// the result is encoded again. Only the type rules of xtask's checker
/// are bypassed this way; the ROM's own rules (`ucore::config`) still hold,
/// as init checks them.
fn change_config(spec: &TestSpec, entries: &mut [(String, Vec<u8>)]) -> Result<()> {
    let first = &spec.config_values[0];
    let Some((_, rom)) = entries
        .iter_mut()
        .find(|(n, _)| n == crate::system::CONFIG_ENTRY)
    else {
        return Err(spec.config_value_error(
            first,
            &format!(
                "scenario `{}` has no components: there is no config ROM to change",
                spec.scenario
            ),
        ));
    };
    let mut config = ucore::config::Rom::parse(rom)
        .map_err(|e| anyhow!("the scenario's config ROM does not parse: {e}"))?
        .to_spec();
    for value in &spec.config_values {
        let Some(component) = config
            .components
            .iter()
            .position(|c| c.name == value.component)
        else {
            let names: Vec<&str> = config.components.iter().map(|c| c.name.as_str()).collect();
            let message = format!(
                "config_value: no component `{}` in scenario `{}` (components: {})",
                value.component,
                spec.scenario,
                names.join(", ")
            );
            return Err(spec.config_value_error(value, &message));
        };
        let table = &mut config.components[component].config;
        table.retain(|(k, _)| *k != value.key);
        table.push((value.key.clone(), value.value.clone()));
    }
    *rom = ucore::config::encode(&config)
        .map_err(|e| spec.config_value_error(first, &format!("config_value: {e}")))?;
    Ok(())
}

/// The boot image for `spec`: `components` (name, bytes: the components
/// and, for a scenario with components, its config ROM) with the test's
/// config values ([`change_config`]), plus the test's modules, packed and,
/// with an `image_defect`, corrupted ([`corrupt_image`]); written to
/// `dir/NAME.img`. `None` when the test does none of these (it boots its
/// scenario's image).
pub fn test_image(
    spec: &TestSpec,
    base: &[(String, Vec<u8>)],
    components: &[(String, Vec<u8>)],
    dir: &Path,
) -> Result<Option<PathBuf>> {
    if !spec.has_own_image() {
        return Ok(None);
    }
    let mut entries: Vec<(String, Vec<u8>)> = base.to_vec();
    if !spec.config_values.is_empty() {
        change_config(spec, &mut entries)?;
    }
    // A module named like the config ROM makes root start init (the boot
    // protocol, `interfaces::init`): init must be in the image then.
    let config_module = spec
        .modules
        .iter()
        .any(|m| m.name == crate::system::CONFIG_ENTRY);
    let has_init = entries.iter().any(|(n, _)| n == crate::components::INIT);
    if config_module && !has_init {
        if let Some(init) = components
            .iter()
            .find(|(n, _)| n == crate::components::INIT)
        {
            entries.insert(1.min(entries.len()), init.clone());
        }
    }
    for module in &spec.modules {
        let Some((_, source)) = components.iter().find(|(n, _)| *n == module.from) else {
            let known: Vec<&str> = components.iter().map(|(n, _)| n.as_str()).collect();
            return Err(spec.module_error(
                module,
                &format!(
                    "no component `{}` to derive module `{}` from (components: {})",
                    module.from,
                    module.name,
                    known.join(", ")
                ),
            ));
        };
        let bytes = corrupt(source, module.defect)
            .map_err(|e| spec.module_error(module, &format!("module `{}`: {e:#}", module.name)))?;
        entries.push((module.name.clone(), bytes));
    }
    let path = dir.join(format!("{}.img", spec.name));
    let context = || format!("the boot image of test {}", display_path(&spec.path));
    let Some(defect) = spec.image_defect else {
        crate::system::write_boot_image(&entries, &path).with_context(context)?;
        return Ok(Some(path));
    };
    let entries: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let packed = crate::bootimage::write_image(&entries).with_context(context)?;
    let (image, error) = corrupt_image(&packed, defect)
        .map_err(|e| spec.image_defect_error(&format!("image_defect: {e:#}")))?;
    crate::util::write_atomically(&path, &image).with_context(context)?;
    println!(
        "==> boot image: {} ({} bytes, corrupted: {defect:?}; the kernel must say: {error})",
        display_path(&path),
        image.len()
    );
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: u32 = 4;
    const RX: u32 = 5;
    const RW: u32 = 6;

    /// A small ET_EXEC x86_64 file like lld makes: R, R+X (entry), R+W
    /// data and R+W bss, each on its own page, with file bytes.
    pub(super) fn sample_elf() -> Vec<u8> {
        let segments: [(u32, u64, u64, u64, u64); 4] = [
            // flags, offset, vaddr, file size, memory size
            (R, 0, 0x20_0000, 0x300, 0x300),
            (RX, 0x300, 0x20_1300, 0x200, 0x200),
            (RW, 0x500, 0x20_2500, 0x80, 0x80),
            (RW, 0x580, 0x20_3580, 0, 0x1000),
        ];
        let mut b = vec![0u8; 0x600];
        put(&mut b, 0, b"\x7fELF\x02\x01\x01");
        put(&mut b, 16, &2u16.to_le_bytes()); // ET_EXEC
        put(&mut b, E_MACHINE, &62u16.to_le_bytes());
        put(&mut b, 20, &1u32.to_le_bytes());
        put(&mut b, 24, &0x20_1300u64.to_le_bytes()); // entry
        put(&mut b, E_PHOFF, &64u64.to_le_bytes());
        put(&mut b, 52, &64u16.to_le_bytes());
        put(&mut b, E_PHENTSIZE, &56u16.to_le_bytes());
        put(&mut b, E_PHNUM, &(segments.len() as u16).to_le_bytes());
        for (i, &(flags, offset, vaddr, file, mem)) in segments.iter().enumerate() {
            let at = 64 + 56 * i;
            put(&mut b, at, &PT_LOAD.to_le_bytes());
            put(&mut b, at + 4, &flags.to_le_bytes());
            put(&mut b, at + 8, &offset.to_le_bytes());
            put(&mut b, at + 16, &vaddr.to_le_bytes());
            put(&mut b, at + 24, &vaddr.to_le_bytes());
            put(&mut b, at + 32, &file.to_le_bytes());
            put(&mut b, at + 40, &mem.to_le_bytes());
            put(&mut b, at + 48, &0x1000u64.to_le_bytes());
        }
        b
    }

    fn error_of(elf: &[u8]) -> ElfError {
        LoadPlan::from_elf(elf, &Limits::LOWER_HALF).unwrap_err()
    }

    #[test]
    fn sample_loads() {
        let plan = LoadPlan::from_elf(&sample_elf(), &Limits::LOWER_HALF).unwrap();
        assert_eq!(plan.segments().len(), 4);
    }

    #[test]
    fn each_defect_gives_its_error() {
        let elf = sample_elf();
        let truncated = corrupt(&elf, Defect::Truncated).unwrap();
        assert_eq!(truncated.len(), 0x57f);
        assert_eq!(
            error_of(&truncated),
            ElfError::SegmentOutsideFile {
                index: 2,
                offset: 0x500,
                size: 0x80
            }
        );
        assert_eq!(
            error_of(&corrupt(&elf, Defect::WrongMachine).unwrap()),
            ElfError::WrongMachine { machine: 183 }
        );
        assert_eq!(
            error_of(&corrupt(&elf, Defect::OverlappingSegments).unwrap()),
            ElfError::Overlap {
                index: 1,
                other: 0,
                page: 0x20_0000
            }
        );
        assert_eq!(
            error_of(&corrupt(&elf, Defect::WriteExecute).unwrap()),
            ElfError::WriteAndExecute { index: 1 }
        );
    }

    #[test]
    fn unusable_sources_are_errors() {
        let elf = sample_elf();
        let e = format!(
            "{:#}",
            corrupt(&elf[..40], Defect::WrongMachine).unwrap_err()
        );
        assert!(e.contains("source ELF file does not load"), "{e}");

        // Only one non-empty segment: nothing to overlap. (Segments 1..3
        // become empty; the entry must stay in an executable segment.)
        let mut one = elf.clone();
        put(&mut one, 24, &0x20_0000u64.to_le_bytes());
        put(&mut one, 64 + 4, &RX.to_le_bytes());
        for i in 1..4 {
            put(&mut one, 64 + 56 * i + 32, &0u64.to_le_bytes());
            put(&mut one, 64 + 56 * i + 40, &0u64.to_le_bytes());
        }
        let e = format!(
            "{:#}",
            corrupt(&one, Defect::OverlappingSegments).unwrap_err()
        );
        assert!(e.contains("fewer than two"), "{e}");
    }

    #[test]
    fn test_images_hold_components_then_modules() {
        let dir = crate::util::temp_dir("fixtures");
        let text = "description = \"d\"\ntimeout_secs = 5\nexpect = []\nexit = \"success\"\n\
                    [[module]]\nname = \"bad-machine\"\nfrom = \"hello\"\ndefect = \"wrong-machine\"\n\
                    [[module]]\nname = \"bad-wx\"\nfrom = \"nope\"\ndefect = \"write-execute\"\n";
        let spec = crate::testspec::parse(Path::new("tests/mods.toml"), text).unwrap();
        let components = vec![
            ("root".to_string(), b"root bytes".to_vec()),
            ("hello".to_string(), sample_elf()),
        ];
        let e = format!(
            "{:#}",
            test_image(&spec, &components, &components, &dir).unwrap_err()
        );
        assert_eq!(
            e,
            "tests/mods.toml:9:1: no component `nope` to derive module `bad-wx` from \
             (components: root, hello)"
        );

        let spec =
            crate::testspec::parse(Path::new("tests/mods.toml"), &text.replace("nope", "hello"))
                .unwrap();
        let path = test_image(&spec, &components, &components, &dir)
            .unwrap()
            .unwrap();
        assert_eq!(path, dir.join("mods.img"));
        let bytes = std::fs::read(&path).unwrap();
        let image = formats::bootimage::BootImage::parse(&bytes).unwrap();
        let names: Vec<&str> = image.entries().map(|e| e.name).collect();
        assert_eq!(names, ["root", "hello", "bad-machine", "bad-wx"]);
        assert_eq!(
            error_of(image.find("bad-machine").unwrap().data),
            ElfError::WrongMachine { machine: 183 }
        );
        assert_eq!(image.find("hello").unwrap().data, &sample_elf()[..]);

        let plain = crate::testspec::parse(
            Path::new("tests/plain.toml"),
            &text[..text.find("[[").unwrap()],
        )
        .unwrap();
        assert_eq!(
            test_image(&plain, &components, &components, &dir).unwrap(),
            None
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn image_defects_corrupt_the_packed_image() {
        let dir = crate::util::temp_dir("fixtures-image");
        let text = |defect: &str| {
            format!(
                "description = \"d\"\ntimeout_secs = 5\nexpect = []\nexit = \"failure\"\n\
                 image_defect = \"{defect}\"\n"
            )
        };
        let spec =
            crate::testspec::parse(Path::new("tests/img.toml"), &text("overlapping-entries"))
                .unwrap();
        assert_eq!(spec.image_defect, Some(ImageDefect::OverlappingEntries));
        let entries = vec![
            ("root".to_string(), sample_elf()),
            ("hello".to_string(), b"hello bytes".to_vec()),
        ];
        let path = test_image(&spec, &entries, &entries, &dir)
            .unwrap()
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            formats::bootimage::root_plan(&bytes)
                .unwrap_err()
                .to_string(),
            "boot image rejected: boot image entry 1: data overlaps the data of entry 0"
        );

        // An image the defect cannot be made in: the key's line.
        let e = format!(
            "{:#}",
            test_image(&spec, &entries[..1], &entries, &dir).unwrap_err()
        );
        assert_eq!(
            e,
            "tests/img.toml:5:16: image_defect: the OverlappingEntries defect needs an image of \
             two entries or more, this one has 1"
        );
        let e = format!(
            "{:#}",
            crate::testspec::parse(Path::new("tests/img.toml"), &text("sideways")).unwrap_err()
        );
        assert!(
            e.starts_with("tests/img.toml:5:16: unknown variant `sideways`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn config_values_change_the_config_rom() {
        use ucore::config::{Rom, ValueBuf};
        let dir = crate::util::temp_dir("fixtures-config");
        let head = "description = \"d\"\ntimeout_secs = 5\nexpect = []\nexit = \"success\"\n";
        let value = |component: &str, key: &str, value: &str| {
            format!("\n[[config_value]]\ncomponent = \"{component}\"\nkey = \"{key}\"\nvalue = {value}\n")
        };
        let text = format!(
            "{head}{}{}",
            value("b", "arg", "\"abc\""),
            value("a", "new", "[1, { x = 2.5 }]")
        );
        let spec = crate::testspec::parse(Path::new("tests/cv.toml"), &text).unwrap();
        let component = |name: &str, arg: i64| {
            format!(
                "[[component]]\nname = \"{name}\"\nbinary = \"hello\"\nram_mib = 1\ncaps = 16\n\
                 [component.config]\narg = {arg}\nkeep = true\n"
            )
        };
        let scenario = crate::scenario::parse(
            Path::new("scenarios/two.toml"),
            &format!(
                "description = \"two\"\n{}{}",
                component("a", 1),
                component("b", 2)
            ),
            &["hello".to_string()],
        )
        .unwrap();
        let rom = scenario.rom().unwrap().unwrap();
        let entries = vec![
            ("root".to_string(), b"root bytes".to_vec()),
            ("hello".to_string(), sample_elf()),
            (crate::system::CONFIG_ENTRY.to_string(), rom),
        ];
        let path = test_image(&spec, &entries, &entries, &dir)
            .unwrap()
            .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let image = formats::bootimage::BootImage::parse(&bytes).unwrap();
        let names: Vec<&str> = image.entries().map(|e| e.name).collect();
        assert_eq!(names, ["root", "hello", "config"]);
        let rom = Rom::parse(image.find("config").unwrap().data).unwrap();
        let (a, b) = (rom.find("a").unwrap(), rom.find("b").unwrap());
        // The rest of the ROM is as it was.
        assert_eq!(a.arg(), Ok(1));
        assert_eq!(a.config.get("keep"), b.config.get("keep"));
        assert_eq!(
            a.config.get("new").unwrap().to_buf(),
            ValueBuf::Array(vec![
                ValueBuf::Integer(1),
                ValueBuf::Table(vec![("x".to_string(), ValueBuf::Float(2.5))])
            ])
        );
        assert_eq!(
            b.arg().unwrap_err().to_string(),
            "config arg: \"abc\" is not an integer"
        );
        assert_eq!(b.config.len(), 2);

        // A component the scenario does not have; a scenario without
        // components.
        let spec = crate::testspec::parse(
            Path::new("tests/cv.toml"),
            &format!("{head}{}", value("c", "arg", "1")),
        )
        .unwrap();
        let e = format!(
            "{:#}",
            test_image(&spec, &entries, &entries, &dir).unwrap_err()
        );
        assert_eq!(
            e,
            "tests/cv.toml:6:1: config_value: no component `c` in scenario `kernel` \
             (components: a, b)"
        );
        let e = format!(
            "{:#}",
            test_image(&spec, &entries[..2], &entries, &dir).unwrap_err()
        );
        assert_eq!(
            e,
            "tests/cv.toml:6:1: scenario `kernel` has no components: there is no config ROM \
             to change"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
