//! Partition tables — MBR with its chain of extended boot records, and
//! GPT — as pure logic: no hardware access, no `unsafe`, built for the
//! host so that `cargo test` drives it with hand-built and fuzzed disk
//! images, and for `x86_64-unknown-none`, where the partition service
//! reads a Block session through it.
//!
//! - [`ReadBlock`]: how the table is read, one 512-byte block at a time
//!   (any `FnMut(u64, &mut [u8; 512]) -> Result<(), ReadError>` is one).
//! - [`read_table`]: finds the scheme, reads and checks the table, and
//!   returns the partitions as a [`Table`] — or a [`TableError`] saying
//!   exactly what is wrong.
//! - [`write`](mod@write): the encoders (MBR, EBR, protective MBR, GPT headers and
//!   entries) that the tests and xtask's generated disk images use.
//! - [`crc32`] / [`Crc32`]: GPT's CRC32.
//!
//! # Numbering
//!
//! As Linux numbers them (`sda1`, ...): MBR primaries are 1 to 4 by slot,
//! an empty slot's number is skipped, not reused; logical partitions are
//! 5, 6, ... in chain order. The extended partition itself is a container
//! and not listed (its slot number is spent). GPT entries are numbered
//! index + 1; unused entries (type GUID all zero) are skipped, their
//! numbers not reused.
//!
//! # A hostile disk
//!
//! Everything on the disk is input. The invariants [`read_table`] keeps
//! for every input: it never panics, it reads at most a bounded number of
//! blocks (1 + [`MAX_LOGICAL`] for MBR; for GPT 1 + 2 × (1 + the entry
//! array's blocks), at most 1024 blocks per array: [`MAX_GPT_ENTRIES`]
//! entries of at most 512 bytes), never a block at or past `block_count`,
//! and all arithmetic on disk values is checked.
//! A table it returns satisfies:
//! - every partition has at least one block and lies within the disk
//!   (GPT: within the header's first..=last usable blocks, which exclude
//!   both headers and both entry arrays);
//! - no two partitions overlap, no primary overlaps the extended
//!   partition, no logical partition covers an EBR, and every logical
//!   partition lies within the extended partition;
//! - no block of the table itself (MBR, EBRs) lies inside a partition.
//!
//! What it refuses instead of guessing: a hybrid MBR (a protective 0xEE
//! entry beside others — which table would be the truth?), a second
//! extended partition, an EBR chain that loops, leaves the extended
//! partition or is longer than [`MAX_LOGICAL`], boot indicators other
//! than 0x00 and 0x80 (the mark of a boot sector that is not a partition
//! table, e.g. a FAT file system on the whole disk), and any GPT header
//! field out of the UEFI specification's bounds. A bad primary GPT
//! (header or entry array) falls back to the backup at the last block,
//! and [`Table::gpt`] says so; only both bad is an error.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod crc;
mod gpt;
mod guid;
mod mbr;
pub mod write;

use alloc::vec::Vec;
use core::fmt;

pub use crc::{crc32, Crc32};
pub use guid::{GptName, Guid};

/// Bytes of a block: the unit of LBAs in both schemes (4 KiB-sector
/// disks, whose GPT uses 4 KiB LBAs, are not supported).
pub const BLOCK: usize = 512;
/// The most logical partitions (EBRs) an extended partition may chain.
pub const MAX_LOGICAL: u32 = 128;
/// The most GPT entries a header may announce (the usual is 128).
pub const MAX_GPT_ENTRIES: u32 = 1024;

/// Reads one 512-byte block; the partition service passes a closure over
/// its Block session.
pub trait ReadBlock {
    /// Fills `buf` with block `lba`.
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK]) -> Result<(), ReadError>;
}

impl<F> ReadBlock for F
where
    F: FnMut(u64, &mut [u8; BLOCK]) -> Result<(), ReadError>,
{
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK]) -> Result<(), ReadError> {
        self(lba, buf)
    }
}

/// A failed block read; the code is the reader's own (the service's
/// Block session error, say), passed through untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadError(pub u32);

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block read failed (error {})", self.0)
    }
}

/// One partition: `blocks` blocks from `first_lba`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    /// 1..=4 for MBR primaries, 5.. for logical ones, entry index + 1
    /// for GPT (see the crate docs).
    pub number: u32,
    pub first_lba: u64,
    /// At least 1.
    pub blocks: u64,
    pub kind: Kind,
}

/// What the table says about a partition besides where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An MBR entry (primary or logical) and its type byte (0x0C: FAT32
    /// with LBA, 0x83: Linux, ...).
    Mbr { type_byte: u8 },
    /// A GPT entry. GUIDs are in their on-disk byte order ([`Guid`]
    /// prints and parses the usual text form).
    Gpt {
        type_guid: [u8; 16],
        unique_guid: [u8; 16],
        /// The entry's attribute bits (bit 0: required by the platform,
        /// bit 2: legacy BIOS bootable, 48..=63: the type's own).
        attributes: u64,
        name: GptName,
    },
}

/// Which kind of table the disk has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Mbr,
    Gpt,
}

/// Which GPT header and entry array the partitions come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GptHeader {
    /// The primary at LBA 1 (the backup is not read).
    Primary,
    /// The backup at the last block, because the primary was bad.
    Backup { primary: GptFault },
}

/// What a GPT's header says about the whole disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GptInfo {
    pub header: GptHeader,
    pub disk_guid: [u8; 16],
    pub first_usable: u64,
    pub last_usable: u64,
    /// Entries in the array, used or not.
    pub entry_count: u32,
}

/// A checked partition table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub scheme: Scheme,
    /// In number order.
    pub partitions: Vec<Partition>,
    /// For [`Scheme::Gpt`]: which header was used, and the disk's GUID.
    pub gpt: Option<GptInfo>,
}

/// Why one GPT header (with its entry array) cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GptFault {
    /// The header's CRC32 does not match its bytes.
    HeaderCrc,
    /// The entry array's CRC32 does not match the header's.
    EntriesCrc,
    /// A field is out of bounds; which one, and why.
    BadHeader(&'static str),
}

impl fmt::Display for GptFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GptFault::HeaderCrc => f.write_str("header CRC32 mismatch"),
            GptFault::EntriesCrc => f.write_str("partition entry array CRC32 mismatch"),
            GptFault::BadHeader(why) => write!(f, "bad header: {why}"),
        }
    }
}

/// Why a disk has no usable partition table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableError {
    /// A block could not be read.
    Read(ReadError),
    /// Block 0 does not end in the 0x55AA signature (or the disk has no
    /// blocks).
    NoTable,
    /// Partition `number`'s entry is malformed.
    BadEntry { number: u32, why: &'static str },
    /// Partition `number` has no blocks (MBR: a type but zero sectors;
    /// GPT: last LBA before first).
    ZeroSize { number: u32 },
    /// Partition `number` ends (exclusive) at `end`, past the disk's
    /// `disk_blocks`.
    BeyondDisk {
        number: u32,
        end: u64,
        disk_blocks: u64,
    },
    /// Partitions `a` < `b` share blocks (for MBR, `a` or `b` may be the
    /// extended partition's slot).
    Overlap { a: u32, b: u32 },
    /// A protective 0xEE entry beside other entries, or two of them.
    HybridMbr,
    /// The EBR chain comes back to the EBR at `lba`.
    ExtendedLoop { lba: u64 },
    /// The EBR chain is longer than [`MAX_LOGICAL`].
    TooManyLogical,
    /// The EBR at `lba` is malformed.
    BadEbr { lba: u64, why: &'static str },
    /// An EBR's link points to `lba`, outside the extended partition.
    EbrOutside { lba: u64 },
    /// Logical partition `number` does not lie within the extended
    /// partition.
    LogicalOutside { number: u32 },
    /// Logical partition `number` covers the EBR at `ebr_lba`.
    LogicalOverEbr { number: u32, ebr_lba: u64 },
    /// GPT partition `number` is not within the header's first..=last
    /// usable blocks.
    OutsideUsable { number: u32 },
    /// Neither GPT header can be used.
    BothGptHeadersBad { primary: GptFault, backup: GptFault },
}

impl From<ReadError> for TableError {
    fn from(e: ReadError) -> TableError {
        TableError::Read(e)
    }
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TableError::*;
        match *self {
            Read(e) => write!(f, "{e}"),
            NoTable => f.write_str("no partition table (no 0x55AA signature in block 0)"),
            BadEntry { number, why } => write!(f, "partition {number}: {why}"),
            ZeroSize { number } => write!(f, "partition {number}: no blocks"),
            BeyondDisk {
                number,
                end,
                disk_blocks,
            } => write!(
                f,
                "partition {number}: ends at block {end}, beyond the disk's {disk_blocks} blocks"
            ),
            Overlap { a, b } => write!(f, "partitions {a} and {b} overlap"),
            HybridMbr => f.write_str(
                "hybrid MBR: a protective GPT entry (0xEE) beside other entries; refused \
                 (which table is the truth?)",
            ),
            ExtendedLoop { lba } => {
                write!(
                    f,
                    "extended partition: the EBR chain loops back to block {lba}"
                )
            }
            TooManyLogical => write!(
                f,
                "extended partition: more than {MAX_LOGICAL} logical partitions in the EBR chain"
            ),
            BadEbr { lba, why } => write!(f, "EBR at block {lba}: {why}"),
            EbrOutside { lba } => write!(
                f,
                "extended partition: an EBR link points to block {lba}, outside the extended \
                 partition"
            ),
            LogicalOutside { number } => write!(
                f,
                "partition {number}: not within the extended partition it is chained in"
            ),
            LogicalOverEbr { number, ebr_lba } => {
                write!(f, "partition {number}: covers the EBR at block {ebr_lba}")
            }
            OutsideUsable { number } => write!(
                f,
                "partition {number}: outside the GPT's usable blocks (over a header or entry \
                 array)"
            ),
            BothGptHeadersBad { primary, backup } => write!(
                f,
                "GPT: both headers bad (primary: {primary}; backup: {backup})"
            ),
        }
    }
}

/// Reads and checks the partition table of a disk of `block_count`
/// 512-byte blocks (see the crate docs for what is checked).
pub fn read_table(dev: &mut impl ReadBlock, block_count: u64) -> Result<Table, TableError> {
    if block_count == 0 {
        return Err(TableError::NoTable);
    }
    let mut block = [0u8; BLOCK];
    dev.read_block(0, &mut block)?;
    if !mbr::signed(&block) {
        return Err(TableError::NoTable);
    }
    let entries = mbr::entries(&block);
    for (i, e) in entries.iter().enumerate() {
        if e.boot != 0 && e.boot != 0x80 {
            return Err(TableError::BadEntry {
                number: slot_number(i),
                why: "boot indicator neither 0x00 nor 0x80 (a boot sector, not a partition \
                      table?)",
            });
        }
    }
    let protective = entries
        .iter()
        .filter(|e| e.type_byte == mbr::PROTECTIVE)
        .count();
    if protective == 0 {
        return mbr::read(dev, block_count, &entries);
    }
    let others = entries
        .iter()
        .filter(|e| e.type_byte != 0 && e.type_byte != mbr::PROTECTIVE)
        .count();
    if protective > 1 || others > 0 {
        return Err(TableError::HybridMbr);
    }
    if let Some(i) = entries
        .iter()
        .position(|e| e.type_byte == mbr::PROTECTIVE && e.first_lba != 1)
    {
        return Err(TableError::BadEntry {
            number: slot_number(i),
            why: "protective GPT entry (0xEE) does not start at block 1",
        });
    }
    gpt::read(dev, block_count)
}

/// The number of MBR slot `i` (0..4).
fn slot_number(i: usize) -> u32 {
    // i < 4: the cast cannot truncate.
    i as u32 + 1
}

/// One table region: blocks `start..end` and who holds them.
#[derive(Clone, Copy)]
struct Region<W> {
    start: u64,
    end: u64,
    who: W,
}

/// The first pair (in start order) of regions that share a block, if any.
fn first_overlap<W: Copy>(regions: &mut [Region<W>]) -> Option<(W, W)> {
    regions.sort_unstable_by_key(|r| (r.start, r.end));
    // The region reaching furthest so far: a later region (starting no
    // earlier) overlaps some earlier one iff it starts before that end.
    let mut reach: Option<Region<W>> = None;
    for r in regions.iter() {
        if let Some(prev) = reach {
            if r.start < prev.end {
                return Some((prev.who, r.who));
            }
        }
        if reach.is_none_or(|p| r.end > p.end) {
            reach = Some(*r);
        }
    }
    None
}

/// `(a, b)` ordered, for [`TableError::Overlap`].
fn overlap(a: u32, b: u32) -> TableError {
    TableError::Overlap {
        a: a.min(b),
        b: a.max(b),
    }
}
