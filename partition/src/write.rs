//! Encoders: the blocks of an MBR, an EBR, a protective MBR and a GPT,
//! as [`read_table`](crate::read_table) expects them and as `fdisk` and
//! `sgdisk` write them. The tests build their disks with these (and
//! break them byte by byte); xtask builds its generated disk images with
//! them. Nothing here checks the layout it is given — that is the
//! reader's job, and the tests want to write bad tables.

use alloc::vec;
use alloc::vec::Vec;

use crate::gpt::{HEADER_SIZE, REVISION, SIGNATURE};
use crate::mbr::{ENTRIES, PROTECTIVE};
use crate::{crc32, GptName, BLOCK};

/// One MBR or EBR entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MbrEntry {
    /// Boot indicator: 0x00, or 0x80 for the active partition.
    pub boot: u8,
    pub type_byte: u8,
    pub first_lba: u32,
    pub sectors: u32,
}

/// The CHS address of `lba` for a 255-head, 63-sector geometry, as the
/// three entry bytes; past cylinder 1023 the usual "too far" marker
/// (1023, 254, 63). Readers ignore CHS; tools still write it.
fn chs(lba: u64) -> [u8; 3] {
    let cylinder = lba / (255 * 63);
    if cylinder > 1023 {
        return [0xFE, 0xFF, 0xFF];
    }
    let head = (lba / 63) % 255;
    let sector = lba % 63 + 1;
    // cylinder <= 1023, head <= 254, sector <= 63: the casts keep every bit.
    [
        head as u8,
        (sector as u8) | (((cylinder >> 8) as u8) << 6),
        cylinder as u8,
    ]
}

fn put_entry(block: &mut [u8; BLOCK], slot: usize, e: &MbrEntry, base: u64) {
    let at = ENTRIES + 16 * slot;
    let b = &mut block[at..at + 16];
    b[0] = e.boot;
    if e.type_byte != 0 {
        // CHS of the absolute first and last block (`base`: where the
        // entry's LBA counts from).
        let first = base + u64::from(e.first_lba);
        let last = (first + u64::from(e.sectors)).saturating_sub(1);
        b[1..4].copy_from_slice(&chs(first));
        b[5..8].copy_from_slice(&chs(last));
    }
    b[4] = e.type_byte;
    b[8..12].copy_from_slice(&e.first_lba.to_le_bytes());
    b[12..16].copy_from_slice(&e.sectors.to_le_bytes());
}

/// An MBR: no boot code, the 32-bit disk signature at 440, the entries
/// (`None`: an empty slot) and 0x55AA.
pub fn mbr(disk_signature: u32, entries: &[Option<MbrEntry>; 4]) -> [u8; BLOCK] {
    let mut block = [0u8; BLOCK];
    block[440..444].copy_from_slice(&disk_signature.to_le_bytes());
    for (slot, e) in entries.iter().enumerate() {
        if let Some(e) = e {
            put_entry(&mut block, slot, e, 0);
        }
    }
    block[510] = 0x55;
    block[511] = 0xAA;
    block
}

/// An EBR at block `lba` of an extended partition starting at
/// `ext_start`: `logical`'s first LBA counts from this EBR, `next`'s (the
/// link, type 0x05) from `ext_start`.
pub fn ebr(
    lba: u64,
    ext_start: u64,
    logical: Option<MbrEntry>,
    next: Option<MbrEntry>,
) -> [u8; BLOCK] {
    let mut block = [0u8; BLOCK];
    if let Some(e) = logical {
        put_entry(&mut block, 0, &e, lba);
    }
    if let Some(e) = next {
        put_entry(&mut block, 1, &e, ext_start);
    }
    block[510] = 0x55;
    block[511] = 0xAA;
    block
}

/// A protective MBR for a disk of `block_count` blocks: one 0xEE entry
/// from block 1 over the rest of the disk (at most 2^32 - 1 sectors).
pub fn protective_mbr(block_count: u64) -> [u8; BLOCK] {
    let sectors = u32::try_from(block_count.saturating_sub(1)).unwrap_or(u32::MAX);
    let mut block = mbr(
        0,
        &[
            Some(MbrEntry {
                boot: 0,
                type_byte: PROTECTIVE,
                first_lba: 1,
                sectors,
            }),
            None,
            None,
            None,
        ],
    );
    // The protective entry's CHS start is 0/0/2 (block 1), as UEFI says.
    block[ENTRIES + 1..ENTRIES + 4].copy_from_slice(&[0x00, 0x02, 0x00]);
    block
}

/// One GPT entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GptEntry {
    pub type_guid: [u8; 16],
    pub unique_guid: [u8; 16],
    pub first_lba: u64,
    /// Inclusive.
    pub last_lba: u64,
    pub attributes: u64,
    pub name: GptName,
}

/// The entries usually allocated (16 KiB: 32 blocks) — what `sgdisk` and
/// `fdisk` write.
pub const GPT_ENTRIES: u32 = 128;
/// Bytes of an entry as written.
pub const GPT_ENTRY_SIZE: u32 = 128;

/// The bytes of an entry array of `count` entries of [`GPT_ENTRY_SIZE`]:
/// entry `i` is `entries[i]` (`None`: unused).
pub fn gpt_entries(entries: &[Option<GptEntry>], count: u32) -> Vec<u8> {
    let size = GPT_ENTRY_SIZE as usize;
    let mut bytes = vec![0u8; count as usize * size];
    for (i, e) in entries.iter().enumerate().take(count as usize) {
        let Some(e) = e else { continue };
        let b = &mut bytes[i * size..(i + 1) * size];
        b[0..16].copy_from_slice(&e.type_guid);
        b[16..32].copy_from_slice(&e.unique_guid);
        b[32..40].copy_from_slice(&e.first_lba.to_le_bytes());
        b[40..48].copy_from_slice(&e.last_lba.to_le_bytes());
        b[48..56].copy_from_slice(&e.attributes.to_le_bytes());
        for (j, u) in e.name.0.iter().enumerate() {
            b[56 + 2 * j..58 + 2 * j].copy_from_slice(&u.to_le_bytes());
        }
    }
    bytes
}

/// The fields of a GPT header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GptHeaderFields {
    pub my_lba: u64,
    pub alternate_lba: u64,
    pub first_usable: u64,
    pub last_usable: u64,
    pub disk_guid: [u8; 16],
    pub entry_lba: u64,
    pub entry_count: u32,
    pub entry_size: u32,
    pub entries_crc: u32,
}

impl GptHeaderFields {
    /// The header block: revision 1.0, 92 bytes, its CRC computed.
    pub fn encode(&self) -> [u8; BLOCK] {
        let mut h = [0u8; BLOCK];
        h[0..8].copy_from_slice(SIGNATURE);
        h[8..12].copy_from_slice(&REVISION.to_le_bytes());
        h[12..16].copy_from_slice(&HEADER_SIZE.to_le_bytes());
        h[24..32].copy_from_slice(&self.my_lba.to_le_bytes());
        h[32..40].copy_from_slice(&self.alternate_lba.to_le_bytes());
        h[40..48].copy_from_slice(&self.first_usable.to_le_bytes());
        h[48..56].copy_from_slice(&self.last_usable.to_le_bytes());
        h[56..72].copy_from_slice(&self.disk_guid);
        h[72..80].copy_from_slice(&self.entry_lba.to_le_bytes());
        h[80..84].copy_from_slice(&self.entry_count.to_le_bytes());
        h[84..88].copy_from_slice(&self.entry_size.to_le_bytes());
        h[88..92].copy_from_slice(&self.entries_crc.to_le_bytes());
        seal_header(&mut h);
        h
    }
}

/// Recomputes a header block's CRC32 over its header size (clamped to
/// 92..=512), the CRC field taken as zero.
pub fn seal_header(h: &mut [u8; BLOCK]) {
    let size = u32::from_le_bytes([h[12], h[13], h[14], h[15]]).clamp(HEADER_SIZE, BLOCK as u32);
    h[16..20].fill(0);
    let crc = crc32(&h[..size as usize]);
    h[16..20].copy_from_slice(&crc.to_le_bytes());
}

/// The usual layout of a GPT on a disk of `block_count` blocks:
/// (first usable, last usable), with [`GPT_ENTRIES`] entries after the
/// primary header (blocks 2..=33) and before the backup header; `None`
/// if the disk has no room for one usable block.
pub fn gpt_usable(block_count: u64) -> Option<(u64, u64)> {
    let array_blocks = u64::from(GPT_ENTRIES * GPT_ENTRY_SIZE) / BLOCK as u64;
    let first = 2 + array_blocks;
    let last = block_count.checked_sub(2 + array_blocks)?;
    (first <= last).then_some((first, last))
}

/// Every block of a GPT on a disk of `block_count` blocks, as (LBA,
/// bytes): the protective MBR, the primary header and entry array, the
/// backup entry array and header, laid out as [`gpt_usable`] says, entry
/// `i` being `entries[i]` (at most [`GPT_ENTRIES`]). `None` if the disk
/// is too small.
pub fn gpt(
    block_count: u64,
    disk_guid: [u8; 16],
    entries: &[Option<GptEntry>],
) -> Option<Vec<(u64, [u8; BLOCK])>> {
    let (first_usable, last_usable) = gpt_usable(block_count)?;
    let last = block_count - 1;
    let array = gpt_entries(entries, GPT_ENTRIES);
    let array_blocks = (array.len() / BLOCK) as u64;
    let primary = GptHeaderFields {
        my_lba: 1,
        alternate_lba: last,
        first_usable,
        last_usable,
        disk_guid,
        entry_lba: 2,
        entry_count: GPT_ENTRIES,
        entry_size: GPT_ENTRY_SIZE,
        entries_crc: crc32(&array),
    };
    let backup = GptHeaderFields {
        my_lba: last,
        alternate_lba: 1,
        entry_lba: last - array_blocks,
        ..primary
    };
    let mut blocks = vec![(0, protective_mbr(block_count)), (1, primary.encode())];
    for base in [primary.entry_lba, backup.entry_lba] {
        for (i, chunk) in array.chunks_exact(BLOCK).enumerate() {
            let mut b = [0u8; BLOCK];
            b.copy_from_slice(chunk);
            blocks.push((base + i as u64, b));
        }
    }
    blocks.push((last, backup.encode()));
    Some(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chs_addresses() {
        assert_eq!(chs(0), [0, 1, 0]);
        assert_eq!(chs(2048), [32, 33, 0]);
        // Cylinder 256: its bits 8..9 go to the sector byte's top bits.
        assert_eq!(chs(256 * 255 * 63), [0, 0x41, 0]);
        assert_eq!(chs(1024 * 255 * 63), [0xFE, 0xFF, 0xFF]);
    }

    #[test]
    fn usual_layout() {
        assert_eq!(gpt_usable(262_144), Some((34, 262_110)));
        assert_eq!(gpt_usable(68), Some((34, 34)));
        assert_eq!(gpt_usable(67), None);
        assert_eq!(gpt(67, [0; 16], &[]), None);
    }
}
