//! Linux kernel modules for the benchmark guest: which files of the kernel
//! package's `lib/modules/<release>/` a set of modules needs, in the
//! order `insmod` must load them.
//!
//! The Debian package ships no `modules.dep` (depmod writes it when the
//! package is installed), so dependencies are read where depmod reads
//! them: the `depends=` entry of each module's `.modinfo` ELF section
//! ([`modinfo`]). A module listed in `modules.builtin` is part of the
//! kernel image: nothing to load. Modules are found by name under
//! `kernel/` (`-` and `_` are the same in a module name, as for the
//! kernel). Busybox's `insmod` hands the kernel a plain file
//! (`init_module`), so compressed modules (`.ko.xz`, `.ko.zst`, as newer
//! Debian kernels ship them) are decompressed here, on the host, with
//! pure-Rust decoders (`lzma-rs`, `ruzstd`: nothing to install); the
//! cloud kernel of Debian 12 builds them uncompressed
//! (`CONFIG_MODULE_COMPRESS_NONE`). Gzip-compressed modules are refused
//! with an error that says so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use formats::bytes::{read_u16, read_u32, read_u64};

use crate::util::display_path;

/// What a module's `.modinfo` says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModInfo {
    /// `name=`, if present.
    pub name: Option<String>,
    /// `depends=`: the modules it needs loaded first.
    pub depends: Vec<String>,
}

/// A module's canonical name: `-` becomes `_`.
pub fn canonical(name: &str) -> String {
    name.replace('-', "_")
}

/// Reads the `.modinfo` section of an ELF64 little-endian relocatable
/// object (a `.ko`): NUL-separated `key=value` strings.
pub fn modinfo(elf: &[u8]) -> Result<ModInfo> {
    let u16_at = |o: usize| read_u16(elf, o);
    let u32_at = |o: usize| read_u32(elf, o);
    let u64_at = |o: usize| read_u64(elf, o);
    if elf.get(..6) != Some(b"\x7fELF\x02\x01") {
        bail!("not an ELF64 little-endian file");
    }
    let (Some(shoff), Some(shentsize), Some(shnum), Some(shstrndx)) =
        (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e))
    else {
        bail!("truncated ELF header");
    };
    let shoff = usize::try_from(shoff)?;
    let section = |i: usize| -> Result<(u32, &[u8])> {
        let at = i
            .checked_mul(usize::from(shentsize))
            .and_then(|o| o.checked_add(shoff))
            .context("section header offset overflows")?;
        let (Some(name), Some(offset), Some(size)) = (
            u32_at(at),
            at.checked_add(0x18).and_then(u64_at),
            at.checked_add(0x20).and_then(u64_at),
        ) else {
            bail!("truncated section header {i}");
        };
        let start = usize::try_from(offset)?;
        let end = start
            .checked_add(usize::try_from(size)?)
            .context("section size overflows")?;
        let data = elf
            .get(start..end)
            .with_context(|| format!("section {i} lies outside the file"))?;
        Ok((name, data))
    };
    let (_, names) = section(usize::from(shstrndx))?;
    for i in 0..usize::from(shnum) {
        let (name_at, data) = section(i)?;
        let name = names
            .get(name_at as usize..)
            .and_then(|n| n.split(|&b| b == 0).next())
            .unwrap_or_default();
        if name != b".modinfo" {
            continue;
        }
        let mut info = ModInfo {
            name: None,
            depends: Vec::new(),
        };
        for entry in data.split(|&b| b == 0) {
            let entry = String::from_utf8_lossy(entry);
            match entry.split_once('=') {
                Some(("name", v)) => info.name = Some(v.to_string()),
                Some(("depends", v)) => {
                    info.depends = v
                        .split(',')
                        .filter(|d| !d.is_empty())
                        .map(canonical)
                        .collect()
                }
                _ => {}
            }
        }
        return Ok(info);
    }
    bail!("no .modinfo section")
}

/// The modules of one kernel: where each is, and which are built in.
#[derive(Debug, Default)]
pub struct Index {
    /// Canonical name → file.
    files: BTreeMap<String, PathBuf>,
    /// Canonical names of `modules.builtin`.
    builtin: BTreeSet<String>,
}

/// The canonical module name of a module file's name: `virtio-blk.ko` and
/// `virtio_blk.ko.xz` → `virtio_blk`; anything else → `None`.
fn module_name(file: &str) -> Option<String> {
    [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
        .iter()
        .find_map(|ext| file.strip_suffix(ext))
        .map(canonical)
}

impl Index {
    /// Indexes `dir` (a `lib/modules/<release>/`): its `modules.builtin`
    /// and every module file under `kernel/`.
    pub fn load(dir: &Path) -> Result<Index> {
        let builtin_path = dir.join("modules.builtin");
        let builtin = std::fs::read_to_string(&builtin_path)
            .with_context(|| format!("reading {}", display_path(&builtin_path)))?;
        let mut index = Index {
            builtin: builtin
                .lines()
                .filter_map(|l| l.trim().rsplit('/').next())
                .filter_map(module_name)
                .collect(),
            ..Index::default()
        };
        let mut dirs = vec![dir.join("kernel")];
        while let Some(d) = dirs.pop() {
            let entries =
                std::fs::read_dir(&d).with_context(|| format!("reading {}", display_path(&d)))?;
            for entry in entries {
                let path = entry?.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if let Some(name) = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(module_name)
                {
                    index.files.insert(name, path);
                }
            }
        }
        Ok(index)
    }

    /// The modules to load for `wanted`, dependencies first, each once,
    /// as (name, plain `.ko` contents); built-in modules (wanted or
    /// depended on) are left out. An unknown module, one that does not
    /// decompress, or a dependency cycle is an error.
    pub fn resolve(&self, wanted: &[&str]) -> Result<Vec<(String, Vec<u8>)>> {
        let mut order = Vec::new();
        let mut done = BTreeSet::new();
        for name in wanted {
            self.visit(&canonical(name), &mut Vec::new(), &mut done, &mut order)?;
        }
        Ok(order)
    }

    fn visit(
        &self,
        name: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        order: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<()> {
        if done.contains(name) || self.builtin.contains(name) {
            return Ok(());
        }
        if path.iter().any(|p| p == name) {
            bail!("module dependency cycle: {} -> {name}", path.join(" -> "));
        }
        let Some(file) = self.files.get(name) else {
            bail!(
                "the kernel has no module {name}{} (neither a file under kernel/ nor in \
                 modules.builtin)",
                if path.is_empty() {
                    String::new()
                } else {
                    format!(" (needed by {})", path.join(" -> "))
                }
            );
        };
        let raw = std::fs::read(file).with_context(|| format!("reading {}", display_path(file)))?;
        let elf = decompress(file, raw)?;
        let info = modinfo(&elf).with_context(|| format!("module {}", display_path(file)))?;
        path.push(name.to_string());
        for dep in &info.depends {
            self.visit(dep, path, done, order)?;
        }
        path.pop();
        done.insert(name.to_string());
        order.push((name.to_string(), elf));
        Ok(())
    }
}

/// The plain contents of module file `path`: `bytes` as they are for a
/// `.ko`, decompressed for `.ko.xz` and `.ko.zst`.
fn decompress(path: &Path, bytes: Vec<u8>) -> Result<Vec<u8>> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let shown = display_path(path);
    if name.ends_with(".ko") {
        Ok(bytes)
    } else if name.ends_with(".ko.xz") {
        let mut out = Vec::new();
        lzma_rs::xz_decompress(&mut bytes.as_slice(), &mut out)
            .map_err(|e| anyhow::anyhow!("decompressing {shown} (xz): {e}"))?;
        Ok(out)
    } else if name.ends_with(".ko.zst") {
        let mut decoder = ruzstd::decoding::StreamingDecoder::new(bytes.as_slice())
            .map_err(|e| anyhow::anyhow!("decompressing {shown} (zstd): {e}"))?;
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut decoder, &mut out)
            .with_context(|| format!("decompressing {shown} (zstd)"))?;
        Ok(out)
    } else {
        bail!("module {shown}: this compression is not supported (plain, .xz and .zst are)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 relocatable object whose `.modinfo` holds `info`
    /// (NUL-separated entries).
    fn fake_ko(info: &str) -> Vec<u8> {
        let shstrtab = b"\0.modinfo\0.shstrtab\0";
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let modinfo_at = elf.len();
        elf.extend_from_slice(info.replace(';', "\0").as_bytes());
        let shstr_at = elf.len();
        elf.extend_from_slice(shstrtab);
        let shoff = elf.len();
        // Section 0: null; 1: .modinfo; 2: .shstrtab.
        let header = |name: u32, offset: usize, size: usize| {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&(offset as u64).to_le_bytes());
            h[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            h
        };
        let headers = [
            header(0, 0, 0),
            header(1, modinfo_at, info.len()),
            header(10, shstr_at, shstrtab.len()),
        ]
        .concat();
        elf.extend_from_slice(&headers);
        elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        elf[0x3e..0x40].copy_from_slice(&2u16.to_le_bytes());
        elf
    }

    #[test]
    fn reads_modinfo() {
        let info = modinfo(&fake_ko(
            "license=GPL;depends=virtio,virtio-ring;name=virtio_blk;",
        ))
        .unwrap();
        assert_eq!(info.name.as_deref(), Some("virtio_blk"));
        assert_eq!(info.depends, ["virtio", "virtio_ring"]);
        let none = modinfo(&fake_ko("depends=;name=fat;")).unwrap();
        assert!(none.depends.is_empty());
        assert!(modinfo(b"not elf").is_err());
        let mut truncated = fake_ko("depends=;");
        truncated.truncate(100);
        assert!(modinfo(&truncated).is_err());
    }

    #[test]
    fn names_of_module_files() {
        assert_eq!(module_name("virtio-blk.ko").as_deref(), Some("virtio_blk"));
        assert_eq!(module_name("fat.ko.xz").as_deref(), Some("fat"));
        assert_eq!(module_name("fat.ko.zst").as_deref(), Some("fat"));
        assert_eq!(module_name("modules.order"), None);
    }

    #[test]
    fn resolves_in_dependency_order() {
        let dir = crate::util::temp_dir("kmod-index");
        let k = dir.join("kernel").join("drivers");
        std::fs::create_dir_all(&k).unwrap();
        std::fs::write(dir.join("modules.builtin"), "kernel/fs/nls/nls_base.ko\n").unwrap();
        for (file, info) in [
            ("virtio_blk.ko", "depends=virtio,virtio_ring;"),
            ("virtio.ko", "depends=virtio_ring;"),
            ("virtio_ring.ko", "depends=;"),
            ("vfat.ko", "depends=fat;"),
            ("fat.ko", "depends=nls_base;"),
            ("loop_a.ko", "depends=loop_b;"),
            ("loop_b.ko", "depends=loop_a;"),
            ("zipped.ko.gz", "depends=;"),
            ("broken.ko.xz", "depends=;"),
        ] {
            std::fs::write(k.join(file), fake_ko(info)).unwrap();
        }
        // Compressed as the kernel's build compresses them.
        let plain = fake_ko("depends=virtio_ring;name=squeezed;");
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut plain.as_slice(), &mut xz).unwrap();
        std::fs::write(k.join("squeezed.ko.xz"), &xz).unwrap();
        let zst = ruzstd::encoding::compress_to_vec(
            plain.as_slice(),
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        std::fs::write(k.join("pressed.ko.zst"), &zst).unwrap();
        let index = Index::load(&dir).unwrap();
        let names = |wanted: &[&str]| -> Vec<String> {
            index
                .resolve(wanted)
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        assert_eq!(
            names(&["virtio-blk", "vfat"]),
            ["virtio_ring", "virtio", "virtio_blk", "fat", "vfat"]
        );
        assert_eq!(names(&["nls_base"]), Vec::<String>::new(), "built in");
        let e = format!("{:#}", index.resolve(&["loop_a"]).unwrap_err());
        assert!(e.contains("cycle: loop_a -> loop_b -> loop_a"), "{e}");
        let e = format!("{:#}", index.resolve(&["nope"]).unwrap_err());
        assert!(e.contains("no module nope"), "{e}");
        let e = format!("{:#}", index.resolve(&["zipped"]).unwrap_err());
        assert!(e.contains("compression is not supported"), "{e}");
        let e = format!("{:#}", index.resolve(&["broken"]).unwrap_err());
        assert!(e.contains("(xz)"), "{e}");
        let loaded = index.resolve(&["squeezed", "pressed"]).unwrap();
        assert_eq!(loaded[0].0, "virtio_ring");
        assert_eq!(loaded[1], ("squeezed".to_string(), plain.clone()));
        assert_eq!(loaded[2].0, "pressed");
        assert_eq!(
            modinfo(&loaded[2].1).unwrap().name.as_deref(),
            Some("squeezed")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
