//! Generated disk images: a `[[disk]]` with `build = "RECIPE"`
//! (docs/scenarios.md, "Devices") gets a copy of an image xtask builds
//! itself, once per recipe, into `target/pecan/disks/RECIPE.img`. A
//! stamp beside it (`RECIPE.img.recipe`) names the recipe's version:
//! when [`RECIPE_VERSION`] changes (bump it whenever a recipe's bytes
//! change) the image is built again. It is built in a temporary file of
//! the same directory and renamed into place, so a concurrent run never
//! copies a half-built image; two runs building at once both finish and
//! one rename wins (same bytes).
//!
//! # The card recipes
//!
//! `card-mbr` and `card-gpt` are a 128 MiB "SD card" (262,144 blocks of
//! 512 bytes) with the same three partitions, each a FAT32 file system
//! holding one text file, the rest of the card unpartitioned:
//!
//! | # | first block | blocks | MiB | label | file | text |
//! |---|---|---|---|---|---|---|
//! | 1 | 2,048 | 77,824 | 38 | `FIRST` | `first.txt` | `This is the first partition.` |
//! | 2 | 79,872 | 67,584 | 33 | `SECOND` | `second.txt` | `This is the second partition.` |
//! | 3 | 147,456 | 67,584 | 33 | `THIRD` | `third.txt` | `This is the third partition.` |
//!
//! Every start is 1 MiB-aligned. The sizes make each a *valid* FAT32:
//! with 512-byte clusters (`mkfs.fat -s 1`, the smallest) 33 MiB gives
//! 66,512 clusters, above FAT32's minimum of 65,525 — a FAT driver picks
//! the FAT type from the cluster count (Microsoft's rule, and
//! embedded-sdmmc's), so a smaller "FAT32" (22 MiB has at most ~44,300
//! clusters) would be read as FAT16. 38 MiB gives 76,594.
//!
//! - `card-mbr`: an MBR (disk signature 0x50454341, "PECA"), the three
//!   partitions primary, type 0x0C (FAT32 with LBA), slot 4 empty.
//! - `card-gpt`: a protective MBR, the primary GPT header at block 1 and
//!   its 128 entries at blocks 2..=33, the backup entries at
//!   262,111..=262,142 and backup header at 262,143 (first usable block
//!   34, last 262,110); disk GUID and the partitions' unique GUIDs fixed
//!   (below), type "Microsoft basic data"
//!   (EBD0A0A2-B9E5-4433-87C0-68B6B72699C7), names `FIRST`, `SECOND`,
//!   `THIRD`.
//!
//! The tables are written here in Rust (the `partition` crate's
//! encoders, its CRC32); the file systems by `mkfs.fat -F 32 -s 1
//! --offset FIRST -h FIRST` (hidden sectors = the partition's start, as
//! on a real card), fixed volume IDs and `--invariant` (no timestamps or
//! random IDs), the files by `mcopy -m` from a source with a fixed time,
//! so an image is the same bytes each time it is built. Each partition
//! is checked with `fsck.fat -n` before the image is used.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use partition::write::{self as pw, GptEntry, MbrEntry};
use partition::{GptName, Guid, BLOCK};

use crate::setup::{disk_tool, ensure_disk_tools};
use crate::util::{display_path, run_captured, workspace_root};

/// The recipes' version: bump it when the bytes of any image change.
pub const RECIPE_VERSION: u32 = 1;

/// How to make a generated disk image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Every recipe is a card; the variants say which (as their names do).
#[allow(clippy::enum_variant_names)]
pub enum Recipe {
    CardMbr,
    CardGpt,
    /// The MBR card with partition 1's boot sector broken (its bytes per
    /// sector 0): a corrupt volume next to two healthy ones.
    CardMbrBadFirst,
}

impl Recipe {
    /// The names `build` takes, and their recipes.
    pub const ALL: [(&'static str, Recipe); 3] = [
        ("card-mbr", Recipe::CardMbr),
        ("card-gpt", Recipe::CardGpt),
        ("card-mbr-bad-first", Recipe::CardMbrBadFirst),
    ];

    /// Whether partition `i` (0-based) of the recipe's card holds a
    /// healthy file system.
    pub fn healthy(self, i: usize) -> bool {
        !(self == Recipe::CardMbrBadFirst && i == 0)
    }

    pub fn from_name(name: &str) -> Option<Recipe> {
        Recipe::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| *r)
    }

    pub fn name(self) -> &'static str {
        Recipe::ALL
            .iter()
            .find(|(_, r)| *r == self)
            .map_or("?", |(n, _)| n)
    }
}

/// Blocks of a card: 128 MiB.
pub const CARD_BLOCKS: u64 = 128 * 2048;

/// One FAT32 partition of a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CardPartition {
    pub first_lba: u64,
    pub blocks: u64,
    pub label: &'static str,
    pub file: &'static str,
    pub text: &'static str,
    /// The FAT volume ID (and the low bytes of the GPT unique GUID).
    pub volume_id: u32,
}

const MIB: u64 = 2048; // blocks

/// The card's partitions (the table in the module docs).
pub const CARD_PARTITIONS: [CardPartition; 3] = [
    CardPartition {
        first_lba: MIB,
        blocks: 38 * MIB,
        label: "FIRST",
        file: "first.txt",
        text: "This is the first partition.\n",
        volume_id: 0x5045_4301,
    },
    CardPartition {
        first_lba: 39 * MIB,
        blocks: 33 * MIB,
        label: "SECOND",
        file: "second.txt",
        text: "This is the second partition.\n",
        volume_id: 0x5045_4302,
    },
    CardPartition {
        first_lba: 72 * MIB,
        blocks: 33 * MIB,
        label: "THIRD",
        file: "third.txt",
        text: "This is the third partition.\n",
        volume_id: 0x5045_4303,
    },
];

/// The MBR's disk signature: "PECA".
pub const CARD_DISK_SIGNATURE: u32 = 0x5045_4341;
/// The GPT's disk GUID.
pub const CARD_DISK_GUID: &str = "50454341-0000-4000-8000-000000000000";

/// The GPT unique GUID of card partition `i` (0-based).
pub fn card_unique_guid(i: usize) -> Guid {
    let text = format!("50454341-0000-4000-8000-0000000000{:02X}", i + 1);
    Guid::parse(&text).unwrap_or_default()
}

/// The blocks of the partition table of `recipe`, as (LBA, bytes).
pub fn table_blocks(recipe: Recipe) -> Vec<(u64, [u8; BLOCK])> {
    match recipe {
        Recipe::CardMbr | Recipe::CardMbrBadFirst => {
            let mut entries = [None; 4];
            for (e, p) in entries.iter_mut().zip(CARD_PARTITIONS) {
                *e = Some(MbrEntry {
                    boot: 0,
                    type_byte: 0x0C,
                    // The card is 2^18 blocks: every value fits.
                    first_lba: p.first_lba as u32,
                    sectors: p.blocks as u32,
                });
            }
            vec![(0, pw::mbr(CARD_DISK_SIGNATURE, &entries))]
        }
        Recipe::CardGpt => {
            let entries: Vec<Option<GptEntry>> = CARD_PARTITIONS
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    Some(GptEntry {
                        type_guid: Guid::BASIC_DATA.0,
                        unique_guid: card_unique_guid(i).0,
                        first_lba: p.first_lba,
                        last_lba: p.first_lba + p.blocks - 1,
                        attributes: 0,
                        name: GptName::new(p.label),
                    })
                })
                .collect();
            let disk_guid = Guid::parse(CARD_DISK_GUID).unwrap_or_default().0;
            // The card has room for a GPT: `gpt` returns blocks.
            pw::gpt(CARD_BLOCKS, disk_guid, &entries).unwrap_or_default()
        }
    }
}

/// Where generated images are kept.
pub fn disks_dir() -> PathBuf {
    workspace_root().join("target").join("pecan").join("disks")
}

/// The image of `recipe`, built first if missing or from an older recipe
/// version.
pub fn ensure(recipe: Recipe) -> Result<PathBuf> {
    ensure_in(&disks_dir(), recipe)
}

/// [`ensure`] in directory `dir`. One build at a time in this process:
/// scenario tests run on several threads, and two of them asking for the
/// same missing image must not both build it (the temporary files are
/// named by process).
pub fn ensure_in(dir: &Path, recipe: Recipe) -> Result<PathBuf> {
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let name = recipe.name();
    let image = dir.join(format!("{name}.img"));
    let stamp = dir.join(format!("{name}.img.recipe"));
    let want = format!("{name} recipe version {RECIPE_VERSION}\n");
    if image.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(image);
    }
    ensure_disk_tools()?;
    println!(
        "==> building the disk image {} (recipe {name}, version {RECIPE_VERSION})",
        display_path(&image)
    );
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", display_path(dir)))?;
    let temp = dir.join(format!(".{name}.img.{}", std::process::id()));
    let built = build(recipe, &temp, dir);
    if let Err(e) = built {
        let _ = std::fs::remove_file(&temp);
        return Err(e.context(format!("building the disk image {name}")));
    }
    std::fs::rename(&temp, &image).with_context(|| format!("writing {}", display_path(&image)))?;
    crate::util::write_atomically(&stamp, want.as_bytes())?;
    Ok(image)
}

/// Builds the image of `recipe` at `path` (`work`: a directory for the
/// files copied in).
fn build(recipe: Recipe, path: &Path, work: &Path) -> Result<()> {
    let mut file =
        std::fs::File::create(path).with_context(|| format!("creating {}", display_path(path)))?;
    file.set_len(CARD_BLOCKS * BLOCK as u64)
        .with_context(|| format!("sizing {}", display_path(path)))?;
    for (lba, block) in table_blocks(recipe) {
        file.seek(SeekFrom::Start(lba * BLOCK as u64))
            .and_then(|_| file.write_all(&block))
            .with_context(|| format!("writing block {lba} of {}", display_path(path)))?;
    }
    file.sync_all()
        .with_context(|| format!("writing {}", display_path(path)))?;
    drop(file);
    for (i, p) in CARD_PARTITIONS.into_iter().enumerate() {
        format_fat32(path, &p)?;
        copy_in(path, &p, work)?;
        fsck(path, &p, work)?;
        if !recipe.healthy(i) {
            // The BPB's bytes per sector (offset 11), 0: no FAT layer may
            // mount it.
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("opening {}", display_path(path)))?;
            file.seek(SeekFrom::Start(p.first_lba * BLOCK as u64 + 11))
                .and_then(|_| file.write_all(&[0, 0]))
                .and_then(|()| file.sync_all())
                .with_context(|| {
                    format!("breaking partition {} of {}", i + 1, display_path(path))
                })?;
        }
    }
    Ok(())
}

/// A disk tool's full path (present: [`ensure_disk_tools`] ran).
pub(crate) fn tool(name: &str) -> Result<PathBuf> {
    disk_tool(name).with_context(|| format!("{name} is missing"))
}

/// Runs `cmd`, failing with its output unless it exits 0; returns the
/// output.
fn run(cmd: &mut Command) -> Result<String> {
    // mtools refuses images whose FAT geometry it finds odd unless told
    // not to check; every FAT here is checked by fsck.fat instead.
    cmd.env("MTOOLS_SKIP_CHECK", "1");
    let described = crate::util::describe(cmd);
    let (status, output) = run_captured(cmd)?;
    if !status.success() {
        bail!("`{described}` failed ({status}):\n{output}");
    }
    Ok(output)
}

/// `IMAGE@@BYTES`: mtools' name for the file system at a byte offset.
pub(crate) fn mtools_target(image: &Path, p: &CardPartition) -> String {
    format!("{}@@{}", image.display(), p.first_lba * BLOCK as u64)
}

fn format_fat32(image: &Path, p: &CardPartition) -> Result<()> {
    run(Command::new(tool("mkfs.fat")?)
        .args(["-F", "32", "-s", "1", "-S", "512", "--invariant"])
        .arg(format!("--offset={}", p.first_lba))
        .args(["-h", &p.first_lba.to_string()])
        .args(["-i", &format!("{:08X}", p.volume_id)])
        .args(["-n", p.label])
        .arg(image)
        // The file system's size in KiB.
        .arg((p.blocks / 2).to_string()))?;
    Ok(())
}

/// A fixed time for the files copied in (2024-01-01T00:00:00Z).
const FILE_TIME: u64 = 1_704_067_200;

fn copy_in(image: &Path, p: &CardPartition, work: &Path) -> Result<()> {
    let source = work.join(format!(".{}.{}", p.file, std::process::id()));
    std::fs::write(&source, p.text)
        .with_context(|| format!("writing {}", display_path(&source)))?;
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(FILE_TIME);
    let result = std::fs::File::options()
        .write(true)
        .open(&source)
        .and_then(|f| f.set_modified(time))
        .with_context(|| format!("setting the time of {}", display_path(&source)))
        .and_then(|_| {
            run(Command::new(tool("mcopy")?)
                .args(["-m", "-i", &mtools_target(image, p)])
                .arg(&source)
                .arg(format!("::/{}", p.file)))
        });
    let _ = std::fs::remove_file(&source);
    result.map(|_| ())
}

/// The bytes of partition `p` of `image` copied to a file of their own
/// in `work` (fsck.fat takes no offset).
pub(crate) fn extract(image: &Path, p: &CardPartition, work: &Path) -> Result<PathBuf> {
    use std::io::Read;
    let out = work.join(format!(".{}-{}.fat", p.label, std::process::id()));
    let mut src =
        std::fs::File::open(image).with_context(|| format!("opening {}", display_path(image)))?;
    src.seek(SeekFrom::Start(p.first_lba * BLOCK as u64))?;
    let mut dst =
        std::fs::File::create(&out).with_context(|| format!("creating {}", display_path(&out)))?;
    std::io::copy(&mut src.take(p.blocks * BLOCK as u64), &mut dst)
        .with_context(|| format!("copying a partition to {}", display_path(&out)))?;
    Ok(out)
}

/// `fsck.fat -n` on partition `p` of `image`: exit 0 and no warning.
pub fn fsck(image: &Path, p: &CardPartition, work: &Path) -> Result<()> {
    let region = extract(image, p, work)?;
    let result = run(Command::new(tool("fsck.fat")?).arg("-n").arg(&region));
    let _ = std::fs::remove_file(&region);
    let output = result
        .with_context(|| format!("checking partition {} of {}", p.label, display_path(image)))?;
    if output.to_lowercase().contains("warning") {
        bail!(
            "fsck.fat -n on partition {} of {} warns:\n{output}",
            p.label,
            display_path(image)
        );
    }
    Ok(())
}

/// The text of file `name` in partition `p` of `image` (`mtype`).
#[cfg(test)]
pub fn read_file(image: &Path, p: &CardPartition, name: &str) -> Result<String> {
    run(Command::new(tool("mtype")?)
        .args(["-i", &mtools_target(image, p)])
        .arg(format!("::/{name}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use partition::{Kind, ReadError, Scheme};

    #[test]
    fn recipe_names() {
        assert_eq!(Recipe::from_name("card-mbr"), Some(Recipe::CardMbr));
        assert_eq!(Recipe::from_name("card-gpt"), Some(Recipe::CardGpt));
        assert_eq!(Recipe::from_name("card"), None);
        assert_eq!(Recipe::CardGpt.name(), "card-gpt");
    }

    #[test]
    fn layout_is_aligned_and_fits() {
        let mut end = 0;
        for p in CARD_PARTITIONS {
            assert_eq!(p.first_lba % MIB, 0);
            assert!(p.first_lba >= end);
            end = p.first_lba + p.blocks;
            // 512-byte clusters: enough for FAT32 even after the FATs
            // and reserved sectors (about 1.6 % of the blocks).
            assert!(p.blocks * 98 / 100 >= 65_525, "{p:?}");
        }
        assert!(end <= pw::gpt_usable(CARD_BLOCKS).unwrap().1);
        assert_eq!(
            card_unique_guid(2).to_string(),
            "50454341-0000-4000-8000-000000000003"
        );
    }

    /// Both recipes built into a temporary directory: the `partition`
    /// crate reads back the three partitions, `fsck.fat -n` is clean on
    /// each, each holds its file. Skipped without the tools.
    #[test]
    fn generated_cards() {
        if crate::setup::DISK_TOOLS
            .iter()
            .any(|t| disk_tool(t).is_none())
        {
            println!(
                "skipped: dosfstools or mtools missing (sudo apt-get install -y dosfstools mtools)"
            );
            return;
        }
        let dir = crate::util::temp_dir("gendisk");
        for (name, recipe) in Recipe::ALL {
            let image = ensure_in(&dir, recipe).unwrap();
            assert_eq!(image, dir.join(format!("{name}.img")));
            let bytes = std::fs::read(&image).unwrap();
            assert_eq!(bytes.len() as u64, CARD_BLOCKS * BLOCK as u64);
            let mut read = |lba: u64, buf: &mut [u8; BLOCK]| {
                let at = usize::try_from(lba).map_err(|_| ReadError(1))? * BLOCK;
                buf.copy_from_slice(bytes.get(at..at + BLOCK).ok_or(ReadError(2))?);
                Ok(())
            };
            let table = partition::read_table(&mut read, CARD_BLOCKS).unwrap();
            assert_eq!(table.partitions.len(), 3, "{name}");
            for (i, (got, want)) in table.partitions.iter().zip(CARD_PARTITIONS).enumerate() {
                assert_eq!(got.number, i as u32 + 1);
                assert_eq!((got.first_lba, got.blocks), (want.first_lba, want.blocks));
                match (recipe, got.kind) {
                    (Recipe::CardMbr | Recipe::CardMbrBadFirst, Kind::Mbr { type_byte }) => {
                        assert_eq!(type_byte, 0x0C)
                    }
                    (
                        Recipe::CardGpt,
                        Kind::Gpt {
                            type_guid,
                            unique_guid,
                            name,
                            ..
                        },
                    ) => {
                        assert_eq!(Guid(type_guid), Guid::BASIC_DATA);
                        assert_eq!(Guid(unique_guid), card_unique_guid(i));
                        assert_eq!(name.to_string(), want.label);
                    }
                    (_, kind) => panic!("{name}: partition {i}: {kind:?}"),
                }
                if recipe.healthy(i) {
                    fsck(&image, &want, &dir).unwrap();
                    assert_eq!(read_file(&image, &want, want.file).unwrap(), want.text);
                } else {
                    assert!(fsck(&image, &want, &dir).is_err(), "{name}: partition {i}");
                }
            }
            match recipe {
                Recipe::CardMbr | Recipe::CardMbrBadFirst => assert_eq!(table.scheme, Scheme::Mbr),
                Recipe::CardGpt => {
                    assert_eq!(table.scheme, Scheme::Gpt);
                    assert_eq!(
                        Guid(table.gpt.unwrap().disk_guid).to_string(),
                        CARD_DISK_GUID
                    );
                }
            }
            // A second call reuses the image; a new recipe version (a
            // stale stamp) builds it again.
            let modified = std::fs::metadata(&image).unwrap().modified().unwrap();
            ensure_in(&dir, recipe).unwrap();
            assert_eq!(
                std::fs::metadata(&image).unwrap().modified().unwrap(),
                modified
            );
            std::fs::write(dir.join(format!("{name}.img.recipe")), "old\n").unwrap();
            ensure_in(&dir, recipe).unwrap();
            assert_eq!(
                std::fs::read(&image).unwrap(),
                bytes,
                "{name}: not reproducible"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
