//! The GUID partition table (UEFI 2.10, chapter 5).
//!
//! Block 0 is a protective MBR (checked by the caller). The primary
//! header is at block 1, its entry array after it (usually blocks
//! 2..=33); the backup entry array sits before the last block and the
//! backup header in the last block. A header (little-endian):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | signature "EFI PART" |
//! | 8 | 4 | revision (1.0: 0x00010000) |
//! | 12 | 4 | header size (92..=512) |
//! | 16 | 4 | CRC32 of the header's bytes, this field zero |
//! | 20 | 4 | reserved |
//! | 24 | 8 | my LBA |
//! | 32 | 8 | alternate LBA |
//! | 40 | 8 | first usable LBA |
//! | 48 | 8 | last usable LBA |
//! | 56 | 16 | disk GUID |
//! | 72 | 8 | entry array LBA |
//! | 80 | 4 | entry count |
//! | 84 | 4 | entry size (128 × 2^n) |
//! | 88 | 4 | CRC32 of the entry array (count × size bytes) |
//!
//! An entry: type GUID (16), unique GUID (16), first LBA (8), last LBA
//! (8, inclusive), attributes (8), name (72: 36 UTF-16LE units).

use alloc::vec::Vec;

use crate::{
    first_overlap, overlap, Crc32, GptFault, GptHeader, GptInfo, GptName, Kind, Partition,
    ReadBlock, Region, Scheme, Table, TableError, BLOCK, MAX_GPT_ENTRIES,
};

pub(crate) const SIGNATURE: &[u8; 8] = b"EFI PART";
pub(crate) const REVISION: u32 = 0x0001_0000;
/// The header's size as the specification defines it (UEFI 2.x).
pub(crate) const HEADER_SIZE: u32 = 92;
/// The largest entry we accept: an entry never straddles a block.
pub(crate) const MAX_ENTRY_SIZE: u32 = 512;
pub(crate) const MIN_ENTRY_SIZE: u32 = 128;

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

fn guid(b: &[u8]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[..16]);
    g
}

/// A used entry as read, not yet checked.
struct Entry {
    number: u32,
    first: u64,
    /// Inclusive.
    last: u64,
    kind: Kind,
}

/// A header that passed every check, with the used entries of its array.
struct Parsed {
    disk_guid: [u8; 16],
    first_usable: u64,
    last_usable: u64,
    entry_count: u32,
    entries: Vec<Entry>,
}

/// The GPT of a disk of `block_count` blocks with a protective MBR.
pub(crate) fn read(dev: &mut impl ReadBlock, block_count: u64) -> Result<Table, TableError> {
    let last = block_count - 1; // block_count > 0: the caller read block 0
    let (parsed, header) = match header(dev, 1, block_count)? {
        Ok(p) => (p, GptHeader::Primary),
        Err(primary) => match header(dev, last, block_count)? {
            Ok(p) => (p, GptHeader::Backup { primary }),
            Err(backup) => return Err(TableError::BothGptHeadersBad { primary, backup }),
        },
    };
    let mut partitions = Vec::with_capacity(parsed.entries.len());
    let mut regions = Vec::with_capacity(parsed.entries.len());
    for e in &parsed.entries {
        let number = e.number;
        if e.last < e.first {
            return Err(TableError::ZeroSize { number });
        }
        if e.last >= block_count {
            return Err(TableError::BeyondDisk {
                number,
                end: e.last.saturating_add(1),
                disk_blocks: block_count,
            });
        }
        if e.first < parsed.first_usable || e.last > parsed.last_usable {
            return Err(TableError::OutsideUsable { number });
        }
        // last < block_count: no overflow.
        let end = e.last + 1;
        partitions.push(Partition {
            number,
            first_lba: e.first,
            blocks: end - e.first,
            kind: e.kind,
        });
        regions.push(Region {
            start: e.first,
            end,
            who: number,
        });
    }
    if let Some((a, b)) = first_overlap(&mut regions) {
        return Err(overlap(a, b));
    }
    Ok(Table {
        scheme: Scheme::Gpt,
        partitions,
        gpt: Some(GptInfo {
            header,
            disk_guid: parsed.disk_guid,
            first_usable: parsed.first_usable,
            last_usable: parsed.last_usable,
            entry_count: parsed.entry_count,
        }),
    })
}

fn bad(why: &'static str) -> Result<Parsed, GptFault> {
    Err(GptFault::BadHeader(why))
}

/// Reads and checks the header at `lba` (1 or the last block) and its
/// entry array. The outer error is a failed read (not the table's fault,
/// so no fallback); the inner one what is wrong with this header.
fn header(
    dev: &mut impl ReadBlock,
    lba: u64,
    block_count: u64,
) -> Result<Result<Parsed, GptFault>, TableError> {
    // The smallest GPT: MBR, primary header, backup header, one block of
    // entries each, one usable block.
    if block_count < 6 || lba >= block_count {
        return Ok(bad("the disk is too small for a GPT"));
    }
    let mut block = [0u8; BLOCK];
    dev.read_block(lba, &mut block)?;
    let h = &block;
    if &h[0..8] != SIGNATURE {
        return Ok(bad("no \"EFI PART\" signature"));
    }
    if le32(&h[8..12]) >> 16 != 1 {
        return Ok(bad("revision is not 1.x"));
    }
    let size = le32(&h[12..16]);
    if !(HEADER_SIZE..=BLOCK as u32).contains(&size) {
        return Ok(bad("header size not from 92 to 512"));
    }
    let mut crc = Crc32::new();
    crc.update(&h[..16]);
    crc.update(&[0; 4]);
    crc.update(&h[20..size as usize]);
    if crc.finish() != le32(&h[16..20]) {
        return Ok(Err(GptFault::HeaderCrc));
    }
    if le64(&h[24..32]) != lba {
        return Ok(bad("my LBA is not the header's own block"));
    }
    let first_usable = le64(&h[40..48]);
    let last_usable = le64(&h[48..56]);
    // Blocks 0, 1 and the last hold the MBR and the headers.
    if first_usable < 2 || last_usable >= block_count - 1 || first_usable > last_usable {
        return Ok(bad("usable blocks not within the disk between the headers"));
    }
    let entry_lba = le64(&h[72..80]);
    let count = le32(&h[80..84]);
    let entry_size = le32(&h[84..88]);
    // 128 × 2^n (UEFI), at most a block (ours: an entry never straddles
    // two blocks, and nobody writes bigger ones).
    if !(MIN_ENTRY_SIZE..=MAX_ENTRY_SIZE).contains(&entry_size)
        || !(entry_size / MIN_ENTRY_SIZE).is_power_of_two()
        || !entry_size.is_multiple_of(MIN_ENTRY_SIZE)
    {
        return Ok(bad("entry size not 128, 256 or 512"));
    }
    if count > MAX_GPT_ENTRIES {
        return Ok(bad("more than 1024 entries"));
    }
    // Both bounded: at most 512 KiB.
    let array_bytes = u64::from(count) * u64::from(entry_size);
    let array_blocks = array_bytes.div_ceil(BLOCK as u64);
    // Between the headers (so over neither, nor over the MBR), and
    // beside the usable blocks.
    const BETWEEN: &str = "entry array not between the headers";
    let Some(array_end) = entry_lba.checked_add(array_blocks) else {
        return Ok(bad(BETWEEN));
    };
    if array_blocks > 0 {
        if entry_lba < 2 || array_end > block_count - 1 {
            return Ok(bad(BETWEEN));
        }
        if entry_lba <= last_usable && first_usable < array_end {
            return Ok(bad("entry array over the usable blocks"));
        }
    }
    let disk_guid = guid(&h[56..72]);
    let entries_crc = le32(&h[88..92]);

    // The entry array, block by block: every used entry, then the CRC.
    // Entries are checked only once the array is known good (a bad entry
    // in a corrupted array would be the wrong error) and the header is
    // chosen: a bad entry in a good array is the table's error, no reason
    // to try the other copy, which says the same.
    let mut crc = Crc32::new();
    let mut entries = Vec::new();
    let mut index = 0u32;
    for b in 0..array_blocks {
        dev.read_block(entry_lba + b, &mut block)?;
        for e in block.chunks_exact(entry_size as usize) {
            if index == count {
                break;
            }
            crc.update(e);
            index += 1;
            let type_guid = guid(&e[0..16]);
            if type_guid != [0; 16] {
                entries.push(Entry {
                    number: index,
                    first: le64(&e[32..40]),
                    last: le64(&e[40..48]),
                    kind: Kind::Gpt {
                        type_guid,
                        unique_guid: guid(&e[16..32]),
                        attributes: le64(&e[48..56]),
                        name: GptName(core::array::from_fn(|i| {
                            u16::from_le_bytes([e[56 + 2 * i], e[57 + 2 * i]])
                        })),
                    },
                });
            }
        }
    }
    if crc.finish() != entries_crc {
        return Ok(Err(GptFault::EntriesCrc));
    }
    Ok(Ok(Parsed {
        disk_guid,
        first_usable,
        last_usable,
        entry_count: count,
        entries,
    }))
}
