//! Making a fresh volume (mkfs) over a whole device: two FATs, the
//! smallest cluster that keeps the cluster count in the type's range
//! (FAT32: 512 B up to 260 MiB, then 4 KiB and up, as Microsoft's table),
//! a backup boot sector and FSInfo on FAT32.

use alloc::vec;

use crate::bpb::{FatKind, FAT12_MAX_CLUSTERS, FAT16_MAX_CLUSTERS, SECTOR};
use crate::dir::{short_entry, ATTR_VOLUME};
use crate::error::FsError;
use crate::{BlockDevice, DateTime};

/// A planned layout.
struct Plan {
    spc: u32,
    reserved: u32,
    fat_sectors: u32,
    root_entries: u32,
    clusters: u32,
}

/// The layout of a `total`-sector volume of `kind` with `spc` sectors per
/// cluster, if its cluster count is in the type's range.
fn plan(kind: FatKind, total: u32, spc: u32) -> Option<Plan> {
    let (reserved, root_entries) = match kind {
        FatKind::Fat32 => (32, 0),
        _ => (1, 512),
    };
    let root_sectors = root_entries * 32 / SECTOR as u32;
    // The FAT's size depends on the cluster count and the other way
    // round: iterate to the fixed point (it only grows, so it ends).
    let mut fat_sectors = 1u32;
    let clusters = loop {
        let meta = reserved + 2 * fat_sectors + root_sectors;
        let clusters = total.checked_sub(meta)? / spc;
        let need = kind
            .fat_bytes(u64::from(clusters) + 2)
            .div_ceil(SECTOR as u64) as u32;
        if need <= fat_sectors {
            break clusters;
        }
        fat_sectors = need;
    };
    let ok = match kind {
        FatKind::Fat12 => (1..=FAT12_MAX_CLUSTERS).contains(&clusters),
        FatKind::Fat16 => (FAT12_MAX_CLUSTERS + 1..=FAT16_MAX_CLUSTERS).contains(&clusters),
        FatKind::Fat32 => clusters > FAT16_MAX_CLUSTERS && clusters < 0x0FFF_FFF5,
    };
    ok.then_some(Plan {
        spc,
        reserved,
        fat_sectors,
        root_entries,
        clusters,
    })
}

/// Formats the whole of `dev` as a FAT volume of `kind` (by size if
/// `None`: FAT12 below 8 MiB, FAT16 below 512 MiB, FAT32 above) labelled
/// `label` (up to 11 characters of an 8.3 name; empty for none).
pub fn format(
    dev: &mut impl BlockDevice,
    kind: Option<FatKind>,
    label: &str,
) -> Result<(), FsError> {
    if dev.block_size() as usize != SECTOR {
        return Err(FsError::Unsupported("block size other than 512"));
    }
    let total = u32::try_from(dev.block_count()).map_err(|_| FsError::Unsupported("over 2 TiB"))?;
    let kind = kind.unwrap_or(if total < 16 * 1024 {
        FatKind::Fat12
    } else if total < 1024 * 1024 {
        FatKind::Fat16
    } else {
        FatKind::Fat32
    });
    if label.len() > 11
        || !label.bytes().all(|b| {
            b.is_ascii_uppercase() || b.is_ascii_digit() || b" _-!#$%&'()@^`{}~".contains(&b)
        })
    {
        return Err(FsError::InvalidName);
    }
    // The smallest cluster in range, but FAT32 from Microsoft's table
    // (fewer, larger clusters on big volumes keep the FAT small).
    let start = match kind {
        FatKind::Fat32 if total > 16 * 1024 * 1024 => 32,
        FatKind::Fat32 if total > 532_480 => 8,
        _ => 1,
    };
    let mut spc = start;
    let p = loop {
        if let Some(p) = plan(kind, total, spc) {
            break p;
        }
        spc = match kind {
            FatKind::Fat32 if spc > 1 && spc <= start => spc / 2,
            FatKind::Fat32 if spc <= start => {
                return Err(FsError::Unsupported("too small for FAT32"))
            }
            _ if spc >= 128 => return Err(FsError::Unsupported("device size for this FAT type")),
            _ => spc * 2,
        };
    };

    let mut label_field = [b' '; 11];
    label_field[..label.len()].copy_from_slice(label.as_bytes());
    let boot = boot_sector(kind, &p, total, &label_field);

    // Zero the reserved sectors, both FATs and the root directory.
    let zero = vec![0u8; SECTOR];
    let root_sectors = p.root_entries * 32 / SECTOR as u32;
    let meta = p.reserved + 2 * p.fat_sectors + root_sectors;
    let first_data = u64::from(meta);
    for s in 0..u64::from(meta) {
        dev.write(s, &zero)?;
    }
    dev.write(0, &boot)?;
    let mut root_sector = [0u8; SECTOR];
    if !label.is_empty() {
        root_sector[..32].copy_from_slice(&short_entry(
            &label_field,
            ATTR_VOLUME,
            0,
            0,
            DateTime::EPOCH,
        ));
    }
    let media_fat0: u32 = match kind {
        FatKind::Fat12 => 0xFF8,
        FatKind::Fat16 => 0xFFF8,
        FatKind::Fat32 => 0x0FFF_FFF8,
    };
    let mut fat = [0u8; SECTOR];
    match kind {
        FatKind::Fat12 => fat[..3].copy_from_slice(&[0xF8, 0xFF, 0xFF]),
        FatKind::Fat16 => fat[..4].copy_from_slice(&[0xF8, 0xFF, 0xFF, 0xFF]),
        FatKind::Fat32 => {
            fat[..4].copy_from_slice(&media_fat0.to_le_bytes());
            fat[4..8].copy_from_slice(&0x0FFF_FFFFu32.to_le_bytes());
            // Cluster 2: the root directory, one cluster long.
            fat[8..12].copy_from_slice(&0x0FFF_FFFFu32.to_le_bytes());
        }
    }
    for copy in 0..2 {
        dev.write(u64::from(p.reserved + copy * p.fat_sectors), &fat)?;
    }
    if kind == FatKind::Fat32 {
        let mut info = [0u8; SECTOR];
        info[0..4].copy_from_slice(&0x4161_5252u32.to_le_bytes());
        info[484..488].copy_from_slice(&0x6141_7272u32.to_le_bytes());
        info[488..492].copy_from_slice(&(p.clusters - 1).to_le_bytes());
        info[492..496].copy_from_slice(&3u32.to_le_bytes());
        info[508..512].copy_from_slice(&0xAA55_0000u32.to_le_bytes());
        dev.write(1, &info)?;
        dev.write(6, &boot)?;
        dev.write(7, &info)?;
        // The root cluster: the label (if any), then zeros.
        for k in 0..u64::from(p.spc) {
            dev.write(first_data + k, if k == 0 { &root_sector } else { &zero })?;
        }
    } else {
        dev.write(u64::from(p.reserved + 2 * p.fat_sectors), &root_sector)?;
    }
    dev.flush()?;
    Ok(())
}

/// The boot sector of a volume laid out as `p`.
fn boot_sector(kind: FatKind, p: &Plan, total: u32, label: &[u8; 11]) -> [u8; SECTOR] {
    let mut b = [0u8; SECTOR];
    // A jump over the BPB to a halt loop (`jmp $`): not bootable.
    let code = if kind == FatKind::Fat32 { 0x5A } else { 0x3E };
    b[0..3].copy_from_slice(&[0xEB, code - 2, 0x90]);
    b[code as usize..code as usize + 2].copy_from_slice(&[0xEB, 0xFE]);
    b[3..11].copy_from_slice(b"PECAN   ");
    b[11..13].copy_from_slice(&(SECTOR as u16).to_le_bytes());
    b[13] = p.spc as u8;
    b[14..16].copy_from_slice(&(p.reserved as u16).to_le_bytes());
    b[16] = 2;
    b[17..19].copy_from_slice(&(p.root_entries as u16).to_le_bytes());
    if total < 0x10000 && kind != FatKind::Fat32 {
        b[19..21].copy_from_slice(&(total as u16).to_le_bytes());
    } else {
        b[32..36].copy_from_slice(&total.to_le_bytes());
    }
    b[21] = 0xF8;
    b[24..26].copy_from_slice(&32u16.to_le_bytes()); // sectors per track
    b[26..28].copy_from_slice(&64u16.to_le_bytes()); // heads
    let serial = 0x5045_4341 ^ total;
    let ext = if kind == FatKind::Fat32 {
        b[36..40].copy_from_slice(&p.fat_sectors.to_le_bytes());
        b[44..48].copy_from_slice(&2u32.to_le_bytes()); // root cluster
        b[48..50].copy_from_slice(&1u16.to_le_bytes()); // FSInfo
        b[50..52].copy_from_slice(&6u16.to_le_bytes()); // backup boot sector
        64
    } else {
        b[22..24].copy_from_slice(&(p.fat_sectors as u16).to_le_bytes());
        36
    };
    b[ext] = 0x80; // drive number
    b[ext + 2] = 0x29; // extended boot signature: the next three fields exist
    b[ext + 3..ext + 7].copy_from_slice(&serial.to_le_bytes());
    if label == b"           " {
        b[ext + 7..ext + 18].copy_from_slice(b"NO NAME    ");
    } else {
        b[ext + 7..ext + 18].copy_from_slice(label);
    }
    b[ext + 18..ext + 26].copy_from_slice(match kind {
        FatKind::Fat12 => b"FAT12   ",
        FatKind::Fat16 => b"FAT16   ",
        FatKind::Fat32 => b"FAT32   ",
    });
    b[510] = 0x55;
    b[511] = 0xAA;
    b
}
