//! The boot sector's BIOS parameter block (BPB): parsed and checked once at
//! mount into a [`Geometry`] every other module trusts. The FAT type comes
//! from the cluster count alone (Microsoft's FAT specification, "FAT type
//! determination"), and the rest of the BPB must agree with it.

use crate::error::Corruption;

/// Bytes per sector; the only size this crate reads or writes.
pub const SECTOR: usize = 512;

/// Clusters below which a volume is FAT12.
pub const FAT12_MAX_CLUSTERS: u32 = 4084;
/// Clusters below which a volume is FAT16 (at or above: FAT32).
pub const FAT16_MAX_CLUSTERS: u32 = 65524;
/// The most clusters FAT32 can number (cluster numbers end below the
/// reserved values 0x0FFFFFF7..).
pub const FAT32_MAX_CLUSTERS: u32 = 0x0FFF_FFF5 - 1;

/// The FAT type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FatKind {
    /// 12-bit entries, two per three bytes; fixed root directory.
    Fat12,
    /// 16-bit entries; fixed root directory.
    Fat16,
    /// 28-bit entries in 32 bits; the root directory is a cluster chain.
    Fat32,
}

impl FatKind {
    /// The type a volume of `clusters` data clusters has.
    pub fn for_clusters(clusters: u32) -> FatKind {
        if clusters <= FAT12_MAX_CLUSTERS {
            FatKind::Fat12
        } else if clusters <= FAT16_MAX_CLUSTERS {
            FatKind::Fat16
        } else {
            FatKind::Fat32
        }
    }

    /// Bytes the FAT needs for `entries` entries (clusters + 2).
    pub fn fat_bytes(self, entries: u64) -> u64 {
        match self {
            FatKind::Fat12 => (entries * 3).div_ceil(2),
            FatKind::Fat16 => entries * 2,
            FatKind::Fat32 => entries * 4,
        }
    }
}

/// Where everything is, in sectors from the start of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub kind: FatKind,
    pub sectors_per_cluster: u32,
    /// First sector of the first FAT.
    pub fat_start: u64,
    /// Sectors of one FAT.
    pub fat_sectors: u64,
    /// FAT copies (1..=4), each written on every update.
    pub fats: u32,
    /// First sector of the fixed root directory (FAT12/16).
    pub root_start: u64,
    /// Entries of the fixed root directory (0 on FAT32).
    pub root_entries: u32,
    /// First sector of cluster 2.
    pub data_start: u64,
    /// Data clusters: valid cluster numbers are `2..clusters + 2`.
    pub clusters: u32,
    /// The root directory's first cluster (FAT32).
    pub root_cluster: u32,
    /// The FSInfo sector (FAT32), if the BPB names a plausible one.
    pub fsinfo: Option<u64>,
    /// Sectors of the volume.
    pub total_sectors: u64,
}

impl Geometry {
    /// Bytes per cluster.
    pub fn cluster_bytes(&self) -> u32 {
        self.sectors_per_cluster * SECTOR as u32
    }

    /// Whether `c` numbers a data cluster.
    pub fn is_cluster(&self, c: u32) -> bool {
        c >= 2 && c - 2 < self.clusters
    }

    /// The first sector of data cluster `c` (which must be valid).
    pub fn cluster_sector(&self, c: u32) -> u64 {
        self.data_start + u64::from(c - 2) * u64::from(self.sectors_per_cluster)
    }
}

fn u16_at(b: &[u8; SECTOR], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8; SECTOR], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Parses and checks boot sector `b` of a device of `device_sectors`.
pub fn parse(b: &[u8; SECTOR], device_sectors: u64) -> Result<Geometry, Corruption> {
    use Corruption::BadBootSector as Bad;
    if b[510] != 0x55 || b[511] != 0xAA {
        return Err(Bad("no 0x55AA signature"));
    }
    if usize::from(u16_at(b, 11)) != SECTOR {
        return Err(Bad("bytes per sector is not 512"));
    }
    let spc = u32::from(b[13]);
    if !spc.is_power_of_two() || spc > 128 {
        return Err(Bad("sectors per cluster is not a power of two up to 128"));
    }
    let reserved = u64::from(u16_at(b, 14));
    if reserved == 0 {
        return Err(Bad("no reserved sectors"));
    }
    let fats = u32::from(b[16]);
    if fats == 0 || fats > 4 {
        return Err(Bad("number of FATs is not 1 to 4"));
    }
    let root_entries = u32::from(u16_at(b, 17));
    let media = b[21];
    if media != 0xF0 && media < 0xF8 {
        return Err(Bad("media descriptor"));
    }
    let total16 = u64::from(u16_at(b, 19));
    let total = if total16 != 0 {
        total16
    } else {
        u64::from(u32_at(b, 32))
    };
    if total == 0 {
        return Err(Bad("zero total sectors"));
    }
    if total > device_sectors {
        return Err(Bad("total sectors beyond the device"));
    }
    let fat16_size = u64::from(u16_at(b, 22));
    let fat_sectors = if fat16_size != 0 {
        fat16_size
    } else {
        u64::from(u32_at(b, 36))
    };
    if fat_sectors == 0 {
        return Err(Bad("zero sectors per FAT"));
    }
    let root_sectors = (u64::from(root_entries) * 32).div_ceil(SECTOR as u64);
    let fat_start = reserved;
    let root_start = fat_start + u64::from(fats) * fat_sectors;
    let data_start = root_start + root_sectors;
    if data_start >= total {
        return Err(Bad("no room for a data area"));
    }
    let clusters64 = (total - data_start) / u64::from(spc);
    if clusters64 == 0 {
        return Err(Bad("no data clusters"));
    }
    if clusters64 > u64::from(FAT32_MAX_CLUSTERS) {
        return Err(Bad("more clusters than FAT32 can number"));
    }
    let clusters = clusters64 as u32;
    let kind = FatKind::for_clusters(clusters);
    let mut root_cluster = 0;
    let mut fsinfo = None;
    if kind == FatKind::Fat32 {
        if root_entries != 0 || fat16_size != 0 {
            return Err(Bad("FAT32 by cluster count with a FAT12/16 layout"));
        }
        if u16_at(b, 42) != 0 {
            return Err(Bad("unknown FAT32 version"));
        }
        root_cluster = u32_at(b, 44);
        if root_cluster < 2 || root_cluster - 2 >= clusters {
            return Err(Bad("root cluster outside the data area"));
        }
        let fi = u64::from(u16_at(b, 48));
        if fi != 0 && fi < reserved {
            fsinfo = Some(fi);
        }
    } else {
        if root_entries == 0 {
            return Err(Bad("FAT12/16 by cluster count without a root directory"));
        }
        if fat16_size == 0 {
            return Err(Bad("FAT12/16 by cluster count with a FAT32 layout"));
        }
    }
    if kind.fat_bytes(u64::from(clusters) + 2) > fat_sectors * SECTOR as u64 {
        return Err(Corruption::FatTooShort);
    }
    Ok(Geometry {
        kind,
        sectors_per_cluster: spc,
        fat_start,
        fat_sectors,
        fats,
        root_start,
        root_entries,
        data_start,
        clusters,
        root_cluster,
        fsinfo,
        total_sectors: total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FAT16 boot sector: 8192 sectors, 4 per cluster, 2 FATs of 8.
    fn fat16() -> [u8; SECTOR] {
        let mut b = [0u8; SECTOR];
        b[11..13].copy_from_slice(&512u16.to_le_bytes());
        b[13] = 1;
        b[14] = 1;
        b[16] = 2;
        b[17..19].copy_from_slice(&512u16.to_le_bytes());
        b[19..21].copy_from_slice(&8192u16.to_le_bytes());
        b[21] = 0xF8;
        b[22..24].copy_from_slice(&32u16.to_le_bytes());
        b[510] = 0x55;
        b[511] = 0xAA;
        b
    }

    #[test]
    fn fat16_geometry() {
        let g = parse(&fat16(), 8192).unwrap();
        assert_eq!(g.kind, FatKind::Fat16);
        assert_eq!(g.root_start, 65);
        assert_eq!(g.data_start, 97);
        assert_eq!(g.clusters, 8192 - 97);
    }

    #[test]
    fn bad_fields_are_corruption() {
        let cases: [(usize, u8); 5] = [(12, 1), (13, 3), (14, 0), (16, 0), (21, 0x12)];
        for (off, v) in cases {
            let mut b = fat16();
            b[off] = v;
            if off == 14 {
                b[15] = 0;
            }
            assert!(matches!(parse(&b, 8192), Err(Corruption::BadBootSector(_))));
        }
        // Beyond the device.
        assert!(parse(&fat16(), 8000).is_err());
        // A FAT too short for the clusters.
        let mut b = fat16();
        b[22] = 8;
        assert_eq!(parse(&b, 8192), Err(Corruption::FatTooShort));
    }
}
