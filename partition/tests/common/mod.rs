//! A sparse in-memory disk for the tests, and table builders.
#![allow(dead_code)]

use std::collections::HashMap;

use partition::write::{self, GptEntry, MbrEntry};
use partition::{GptName, ReadBlock, ReadError, BLOCK};

/// A disk of `blocks` blocks; blocks never written read as zeros. It
/// counts reads and refuses (as a test failure) any read past the end.
#[derive(Clone, Default)]
pub struct Disk {
    pub blocks: u64,
    pub data: HashMap<u64, [u8; BLOCK]>,
    pub reads: u64,
    /// Reads of this block fail with `ReadError(7)`.
    pub bad_block: Option<u64>,
}

impl Disk {
    pub fn new(blocks: u64) -> Disk {
        Disk {
            blocks,
            ..Disk::default()
        }
    }

    pub fn put(&mut self, lba: u64, block: [u8; BLOCK]) {
        self.data.insert(lba, block);
    }

    pub fn block(&mut self, lba: u64) -> &mut [u8; BLOCK] {
        self.data.entry(lba).or_insert([0; BLOCK])
    }

    pub fn table(&mut self) -> Result<partition::Table, partition::TableError> {
        let blocks = self.blocks;
        partition::read_table(self, blocks)
    }
}

impl ReadBlock for Disk {
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK]) -> Result<(), ReadError> {
        assert!(lba < self.blocks, "read of block {lba} of {}", self.blocks);
        self.reads += 1;
        if self.bad_block == Some(lba) {
            return Err(ReadError(7));
        }
        *buf = self.data.get(&lba).copied().unwrap_or([0; BLOCK]);
        Ok(())
    }
}

pub fn entry(type_byte: u8, first_lba: u32, sectors: u32) -> Option<MbrEntry> {
    Some(MbrEntry {
        boot: 0,
        type_byte,
        first_lba,
        sectors,
    })
}

/// An MBR disk of `blocks` with these primaries.
pub fn mbr_disk(blocks: u64, entries: [Option<MbrEntry>; 4]) -> Disk {
    let mut d = Disk::new(blocks);
    d.put(0, write::mbr(0x1234_5678, &entries));
    d
}

/// An MBR disk of 100000 blocks: primary 1 (0x83, 2048..+8192), an
/// extended partition in slot 2 over 10240..+40960 with `logicals` (each
/// (offset of its EBR from the extended start, size)), the logical data
/// starting 63 blocks after its EBR.
pub fn extended_disk(logicals: &[(u32, u32)]) -> Disk {
    let ext_start = 10240u32;
    let mut d = mbr_disk(
        100_000,
        [
            entry(0x83, 2048, 8192),
            entry(0x0F, ext_start, 40960),
            None,
            None,
        ],
    );
    for (i, &(offset, size)) in logicals.iter().enumerate() {
        let lba = u64::from(ext_start + offset);
        let next = logicals.get(i + 1).map(|&(o, s)| MbrEntry {
            boot: 0,
            type_byte: 0x05,
            first_lba: o,
            sectors: s + 63,
        });
        d.put(
            lba,
            write::ebr(lba, u64::from(ext_start), entry(0x83, 63, size), next),
        );
    }
    d
}

pub fn gpt_entry(n: u8, first_lba: u64, last_lba: u64) -> Option<GptEntry> {
    Some(GptEntry {
        type_guid: partition::Guid::LINUX_DATA.0,
        unique_guid: [n; 16],
        first_lba,
        last_lba,
        attributes: 0,
        name: GptName::new(&format!("part{n}")),
    })
}

pub const DISK_GUID: [u8; 16] = [0x42; 16];

/// A GPT disk of `blocks` with these entries.
pub fn gpt_disk(blocks: u64, entries: &[Option<GptEntry>]) -> Disk {
    let mut d = Disk::new(blocks);
    for (lba, b) in write::gpt(blocks, DISK_GUID, entries).expect("room for a GPT") {
        d.put(lba, b);
    }
    d
}

/// Rewrites the header at `lba` with `f` applied to its fields (CRC
/// recomputed).
pub fn patch_header(d: &mut Disk, lba: u64, f: impl FnOnce(&mut [u8; BLOCK])) {
    let h = d.block(lba);
    f(h);
    write::seal_header(h);
}
