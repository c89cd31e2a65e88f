//! The MBR and its extended partition's chain of EBRs.
//!
//! Block 0: 446 bytes of boot code, four 16-byte entries at 446, the
//! signature 0x55 0xAA at 510. An entry: boot indicator (0x00 or 0x80),
//! CHS of the first block (3 bytes, ignored: LBAs are the truth), type,
//! CHS of the last block, first LBA (u32 LE), sectors (u32 LE).
//!
//! An extended partition (type 0x05, 0x0F or 0x85) holds a chain of EBRs,
//! the first at its first block. Each EBR is an MBR-shaped block whose
//! entry 1 is a logical partition, its first LBA relative to *this EBR*,
//! and whose entry 2 links to the next EBR, its first LBA relative to
//! *the extended partition's start* (type 0: the chain ends). Entries 3
//! and 4 are empty.

use alloc::vec::Vec;

use crate::{
    first_overlap, overlap, slot_number, Kind, Partition, ReadBlock, Region, Scheme, Table,
    TableError, BLOCK, MAX_LOGICAL,
};

/// The type byte of GPT's protective entry.
pub(crate) const PROTECTIVE: u8 = 0xEE;
/// Where the four entries start.
pub(crate) const ENTRIES: usize = 446;

/// Whether a type byte marks an extended partition (CHS, LBA, Linux).
pub(crate) fn is_extended(type_byte: u8) -> bool {
    matches!(type_byte, 0x05 | 0x0F | 0x85)
}

/// One 16-byte entry, the fields that matter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub boot: u8,
    pub type_byte: u8,
    pub first_lba: u32,
    pub sectors: u32,
}

/// Whether the block ends in 0x55 0xAA.
pub(crate) fn signed(block: &[u8; BLOCK]) -> bool {
    block[510] == 0x55 && block[511] == 0xAA
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The four entries of an MBR or EBR.
pub(crate) fn entries(block: &[u8; BLOCK]) -> [Entry; 4] {
    core::array::from_fn(|i| {
        let e = &block[ENTRIES + 16 * i..ENTRIES + 16 * (i + 1)];
        Entry {
            boot: e[0],
            type_byte: e[4],
            first_lba: le32(&e[8..12]),
            sectors: le32(&e[12..16]),
        }
    })
}

/// Who holds a region of the extended partition.
#[derive(Clone, Copy)]
enum Holder {
    Logical(u32),
    Ebr(u64),
}

/// The table of an MBR disk whose block 0 holds `entries` (boot
/// indicators already checked, no protective entry).
pub(crate) fn read(
    dev: &mut impl ReadBlock,
    block_count: u64,
    entries: &[Entry; 4],
) -> Result<Table, TableError> {
    let mut partitions = Vec::new();
    let mut primaries: Vec<Region<u32>> = Vec::new();
    let mut extended: Option<Region<u32>> = None;
    for (i, e) in entries.iter().enumerate() {
        let number = slot_number(i);
        if e.type_byte == 0 {
            continue;
        }
        let region = extent(number, u64::from(e.first_lba), e.sectors, block_count)?;
        if is_extended(e.type_byte) {
            if extended.is_some() {
                return Err(TableError::BadEntry {
                    number,
                    why: "a second extended partition",
                });
            }
            extended = Some(region);
        } else {
            partitions.push(partition(number, &region, e.type_byte));
        }
        primaries.push(region);
    }
    if let Some((a, b)) = first_overlap(&mut primaries) {
        return Err(overlap(a, b));
    }
    if let Some(ext) = extended {
        logicals(dev, &ext, &mut partitions)?;
    }
    Ok(Table {
        scheme: Scheme::Mbr,
        partitions,
        gpt: None,
    })
}

/// The region of partition `number`, `sectors` from `first`, checked:
/// not empty, not over block 0, within the disk.
fn extent(
    number: u32,
    first: u64,
    sectors: u32,
    block_count: u64,
) -> Result<Region<u32>, TableError> {
    if sectors == 0 {
        return Err(TableError::ZeroSize { number });
    }
    if first == 0 {
        return Err(TableError::BadEntry {
            number,
            why: "starts at block 0, over the MBR",
        });
    }
    // Both below 2^32: no overflow, but stay checked on principle.
    let end = first
        .checked_add(u64::from(sectors))
        .ok_or(TableError::BeyondDisk {
            number,
            end: u64::MAX,
            disk_blocks: block_count,
        })?;
    if end > block_count {
        return Err(TableError::BeyondDisk {
            number,
            end,
            disk_blocks: block_count,
        });
    }
    Ok(Region {
        start: first,
        end,
        who: number,
    })
}

fn partition(number: u32, region: &Region<u32>, type_byte: u8) -> Partition {
    Partition {
        number,
        first_lba: region.start,
        blocks: region.end - region.start,
        kind: Kind::Mbr { type_byte },
    }
}

/// Follows the EBR chain of the extended partition `ext`, appending its
/// logical partitions (numbered from 5) to `partitions`.
fn logicals(
    dev: &mut impl ReadBlock,
    ext: &Region<u32>,
    partitions: &mut Vec<Partition>,
) -> Result<(), TableError> {
    // Every EBR read, in chain order: the visited set that makes a loop
    // an error, and regions no logical partition may cover.
    let mut ebrs: Vec<u64> = Vec::new();
    let mut regions: Vec<Region<Holder>> = Vec::new();
    let mut number = 5u32;
    let mut lba = ext.start;
    let mut block = [0u8; BLOCK];
    loop {
        if ebrs.contains(&lba) {
            return Err(TableError::ExtendedLoop { lba });
        }
        if ebrs.len() >= MAX_LOGICAL as usize {
            return Err(TableError::TooManyLogical);
        }
        ebrs.push(lba);
        regions.push(Region {
            start: lba,
            end: lba + 1, // lba < ext.end <= disk blocks: no overflow
            who: Holder::Ebr(lba),
        });
        dev.read_block(lba, &mut block)?;
        if !signed(&block) {
            return Err(TableError::BadEbr {
                lba,
                why: "no 0x55AA signature",
            });
        }
        let [logical, link, rest @ ..] = entries(&block);
        if rest.iter().any(|e| e.type_byte != 0) {
            return Err(TableError::BadEbr {
                lba,
                why: "entries 3 and 4 are not empty",
            });
        }
        if logical.boot != 0 && logical.boot != 0x80 {
            return Err(TableError::BadEbr {
                lba,
                why: "boot indicator neither 0x00 nor 0x80",
            });
        }
        if logical.type_byte != 0 {
            if is_extended(logical.type_byte) || logical.type_byte == PROTECTIVE {
                return Err(TableError::BadEbr {
                    lba,
                    why: "its first entry has an extended or protective type",
                });
            }
            if logical.sectors == 0 {
                return Err(TableError::ZeroSize { number });
            }
            if logical.first_lba == 0 {
                return Err(TableError::BadEntry {
                    number,
                    why: "starts at its own EBR",
                });
            }
            let start = lba.checked_add(u64::from(logical.first_lba));
            let end = start.and_then(|s| s.checked_add(u64::from(logical.sectors)));
            let (Some(start), Some(end)) = (start, end) else {
                return Err(TableError::LogicalOutside { number });
            };
            if start < ext.start || end > ext.end {
                return Err(TableError::LogicalOutside { number });
            }
            let region = Region {
                start,
                end,
                who: number,
            };
            partitions.push(partition(number, &region, logical.type_byte));
            regions.push(Region {
                start,
                end,
                who: Holder::Logical(number),
            });
            // At most 5 + MAX_LOGICAL: no overflow.
            number += 1;
        }
        match link.type_byte {
            0 => break,
            t if is_extended(t) => {
                let next = ext.start.checked_add(u64::from(link.first_lba));
                match next {
                    Some(next) if next < ext.end => lba = next,
                    _ => {
                        return Err(TableError::EbrOutside {
                            lba: next.unwrap_or(u64::MAX),
                        })
                    }
                }
            }
            _ => {
                return Err(TableError::BadEbr {
                    lba,
                    why: "its second entry is neither empty nor a link to the next EBR",
                })
            }
        }
    }
    match first_overlap(&mut regions) {
        None => Ok(()),
        Some((Holder::Logical(a), Holder::Logical(b))) => Err(overlap(a, b)),
        Some((Holder::Logical(number), Holder::Ebr(ebr_lba)))
        | Some((Holder::Ebr(ebr_lba), Holder::Logical(number))) => {
            Err(TableError::LogicalOverEbr { number, ebr_lba })
        }
        // EBRs are distinct single blocks (the visited set): they never
        // overlap each other.
        Some((Holder::Ebr(lba), Holder::Ebr(_))) => Err(TableError::ExtendedLoop { lba }),
    }
}
