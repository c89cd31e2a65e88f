//! Hand-built tables: good ones parse to exactly their partitions, and
//! each hostile class gives its documented error.

mod common;

use common::*;
use partition::write::{self, GptHeaderFields, MbrEntry};
use partition::{
    GptFault, GptHeader, Guid, Kind, Partition, ReadError, Scheme, TableError, BLOCK, MAX_LOGICAL,
};

fn mbr_part(number: u32, first_lba: u64, blocks: u64, type_byte: u8) -> Partition {
    Partition {
        number,
        first_lba,
        blocks,
        kind: Kind::Mbr { type_byte },
    }
}

#[test]
fn mbr_primaries_keep_their_slot_numbers() {
    let mut d = mbr_disk(
        10_000,
        [entry(0x0C, 2048, 1000), None, entry(0x83, 4000, 6000), None],
    );
    let t = d.table().unwrap();
    assert_eq!(t.scheme, Scheme::Mbr);
    assert_eq!(t.gpt, None);
    assert_eq!(
        t.partitions,
        [mbr_part(1, 2048, 1000, 0x0C), mbr_part(3, 4000, 6000, 0x83)]
    );
    assert_eq!(d.reads, 1);
}

#[test]
fn a_closure_reads_blocks() {
    let d = mbr_disk(10_000, [entry(0x0C, 2048, 1000), None, None, None]);
    let mut read = |lba: u64, buf: &mut [u8; BLOCK]| {
        *buf = d.data.get(&lba).copied().unwrap_or([0; BLOCK]);
        Ok(())
    };
    let t = partition::read_table(&mut read, 10_000).unwrap();
    assert_eq!(t.partitions, [mbr_part(1, 2048, 1000, 0x0C)]);
}

#[test]
fn no_table() {
    assert_eq!(Disk::new(100).table(), Err(TableError::NoTable));
    assert_eq!(Disk::new(0).table(), Err(TableError::NoTable));
    // A signed MBR with no entries is a table without partitions.
    let t = mbr_disk(100, [None; 4]).table().unwrap();
    assert!(t.partitions.is_empty());
}

#[test]
fn read_errors_pass_through() {
    let mut d = mbr_disk(100, [None; 4]);
    d.bad_block = Some(0);
    assert_eq!(d.table(), Err(TableError::Read(ReadError(7))));
    let mut d = extended_disk(&[(0, 100)]);
    d.bad_block = Some(10240);
    assert_eq!(d.table(), Err(TableError::Read(ReadError(7))));
    let mut d = gpt_disk(1000, &[gpt_entry(1, 100, 200)]);
    d.bad_block = Some(5);
    assert_eq!(d.table(), Err(TableError::Read(ReadError(7))));
}

#[test]
fn a_boot_sector_is_not_a_table() {
    // A FAT boot sector on the whole disk: 0x55AA, but code where the
    // entries would be.
    let mut d = Disk::new(1000);
    let b = d.block(0);
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i * 13) as u8;
    }
    b[510] = 0x55;
    b[511] = 0xAA;
    let e = d.table().unwrap_err();
    assert!(matches!(e, TableError::BadEntry { number: 1, .. }), "{e:?}");
    assert!(e.to_string().contains("boot indicator"), "{e}");
}

#[test]
fn mbr_zero_size_overlap_beyond_disk() {
    let zero = mbr_disk(10_000, [entry(0x83, 2048, 0), None, None, None]);
    assert_eq!(
        zero.clone().table(),
        Err(TableError::ZeroSize { number: 1 })
    );
    // Type 0 with a size is an empty slot, as everywhere.
    let t = mbr_disk(10_000, [entry(0, 2048, 10), None, None, None])
        .table()
        .unwrap();
    assert!(t.partitions.is_empty());
    assert_eq!(
        mbr_disk(
            10_000,
            [None, entry(0x83, 2048, 1000), None, entry(0x0C, 3047, 10)]
        )
        .table(),
        Err(TableError::Overlap { a: 2, b: 4 })
    );
    // Adjacent is fine.
    assert!(mbr_disk(
        10_000,
        [None, entry(0x83, 2048, 1000), None, entry(0x0C, 3048, 10)]
    )
    .table()
    .is_ok());
    // One inside another (the later-starting one ends earlier).
    assert_eq!(
        mbr_disk(
            10_000,
            [entry(0x83, 100, 5000), entry(0x83, 200, 10), None, None]
        )
        .table(),
        Err(TableError::Overlap { a: 1, b: 2 })
    );
    assert_eq!(
        mbr_disk(10_000, [None, None, entry(0x83, 9000, 1001), None]).table(),
        Err(TableError::BeyondDisk {
            number: 3,
            end: 10_001,
            disk_blocks: 10_000
        })
    );
    // u32::MAX + u32::MAX does not overflow anything.
    let e = mbr_disk(10_000, [entry(0x83, u32::MAX, u32::MAX), None, None, None])
        .table()
        .unwrap_err();
    assert!(matches!(e, TableError::BeyondDisk { number: 1, .. }));
    let e = mbr_disk(10_000, [entry(0x83, 0, 100), None, None, None])
        .table()
        .unwrap_err();
    assert!(matches!(e, TableError::BadEntry { number: 1, .. }));
}

#[test]
fn extended_chain() {
    let mut d = extended_disk(&[(0, 1000), (2000, 500), (30000, 10897)]);
    let t = d.table().unwrap();
    assert_eq!(
        t.partitions,
        [
            mbr_part(1, 2048, 8192, 0x83),
            mbr_part(5, 10240 + 63, 1000, 0x83),
            mbr_part(6, 12240 + 63, 500, 0x83),
            mbr_part(7, 40240 + 63, 10897, 0x83),
        ]
    );
    assert_eq!(d.reads, 4);
    // The last logical one block too long leaves the extended partition.
    let d = extended_disk(&[(0, 1000), (2000, 500), (30000, 10898)]);
    assert_eq!(
        d.clone().table(),
        Err(TableError::LogicalOutside { number: 7 })
    );
}

#[test]
fn an_ebr_with_no_logical_partition_spends_no_number() {
    let mut d = extended_disk(&[(0, 1000), (2000, 500)]);
    // The first EBR keeps its link but loses its logical partition.
    d.block(10240)[446..462].fill(0);
    let t = d.table().unwrap();
    assert_eq!(
        t.partitions,
        [
            mbr_part(1, 2048, 8192, 0x83),
            mbr_part(5, 12240 + 63, 500, 0x83)
        ]
    );
}

#[test]
fn extended_loop() {
    let mut d = extended_disk(&[(0, 100), (1000, 100), (2000, 100)]);
    // The third EBR links back to the second.
    let ext = 10240;
    d.put(
        12240,
        write::ebr(
            12240,
            ext,
            entry(0x83, 63, 100),
            Some(MbrEntry {
                boot: 0,
                type_byte: 0x05,
                first_lba: 1000,
                sectors: 163,
            }),
        ),
    );
    assert_eq!(d.table(), Err(TableError::ExtendedLoop { lba: 11240 }));
    // An EBR linking to itself (offset 0: the first EBR).
    let mut d = extended_disk(&[(0, 100)]);
    d.put(
        ext,
        write::ebr(ext, ext, entry(0x83, 63, 100), entry(0x05, 0, 1)),
    );
    assert_eq!(d.table(), Err(TableError::ExtendedLoop { lba: ext }));
}

#[test]
fn ebr_pointing_outside() {
    let mut d = extended_disk(&[(0, 100)]);
    d.put(
        10240,
        write::ebr(10240, 10240, entry(0x83, 63, 100), entry(0x05, 40960, 100)),
    );
    assert_eq!(d.table(), Err(TableError::EbrOutside { lba: 51200 }));
    // A logical partition whose offset leaves the extended partition.
    let mut d = extended_disk(&[(0, 100)]);
    d.put(
        10240,
        write::ebr(10240, 10240, entry(0x83, u32::MAX, 100), None),
    );
    assert_eq!(d.table(), Err(TableError::LogicalOutside { number: 5 }));
}

#[test]
fn too_many_logical() {
    // MAX_LOGICAL fit; one more does not.
    let chain: Vec<(u32, u32)> = (0..MAX_LOGICAL).map(|i| (i * 200, 100)).collect();
    let t = extended_disk(&chain).table().unwrap();
    assert_eq!(t.partitions.len() as u32, 1 + MAX_LOGICAL);
    assert_eq!(t.partitions.last().unwrap().number, 4 + MAX_LOGICAL);
    let chain: Vec<(u32, u32)> = (0..=MAX_LOGICAL).map(|i| (i * 200, 100)).collect();
    assert_eq!(
        extended_disk(&chain).table(),
        Err(TableError::TooManyLogical)
    );
}

#[test]
fn logical_partitions_overlapping() {
    // The first logical partition runs over the second EBR.
    let d = extended_disk(&[(0, 1000), (500, 100)]);
    assert_eq!(
        d.clone().table(),
        Err(TableError::LogicalOverEbr {
            number: 5,
            ebr_lba: 10740
        })
    );
    // Two logical partitions overlapping, neither over an EBR: the
    // first lies beyond the second EBR, the second's runs into it.
    let mut d = extended_disk(&[]);
    d.put(
        10240,
        write::ebr(10240, 10240, entry(0x83, 2000, 100), entry(0x05, 1000, 1)),
    );
    d.put(
        11240,
        write::ebr(11240, 10240, entry(0x83, 1050, 100), None),
    );
    assert_eq!(d.table(), Err(TableError::Overlap { a: 5, b: 6 }));
}

#[test]
fn garbage_in_the_mbr() {
    // A second extended partition.
    let e = mbr_disk(
        100_000,
        [entry(0x05, 100, 100), entry(0x85, 300, 100), None, None],
    )
    .table()
    .unwrap_err();
    assert!(matches!(e, TableError::BadEntry { number: 2, .. }), "{e:?}");
    // A primary inside the extended partition.
    let e = mbr_disk(
        100_000,
        [entry(0x05, 100, 1000), entry(0x83, 300, 100), None, None],
    )
    .table()
    .unwrap_err();
    assert_eq!(e, TableError::Overlap { a: 1, b: 2 });
    // A hybrid MBR.
    let e = mbr_disk(
        100_000,
        [entry(0xEE, 1, 1000), entry(0x0C, 2048, 100), None, None],
    )
    .table()
    .unwrap_err();
    assert_eq!(e, TableError::HybridMbr);
    // A protective entry not at block 1.
    let e = mbr_disk(100_000, [entry(0xEE, 2, 1000), None, None, None])
        .table()
        .unwrap_err();
    assert!(matches!(e, TableError::BadEntry { number: 1, .. }), "{e:?}");
    // EBR without signature; EBR with garbage in entry 3; EBR whose link
    // has a data type.
    let mut d = extended_disk(&[(0, 100)]);
    d.block(10240)[511] = 0;
    assert!(matches!(
        d.table(),
        Err(TableError::BadEbr { lba: 10240, .. })
    ));
    let mut d = extended_disk(&[(0, 100)]);
    d.block(10240)[446 + 32 + 4] = 0x83;
    assert!(matches!(
        d.table(),
        Err(TableError::BadEbr { lba: 10240, .. })
    ));
    let mut d = extended_disk(&[(0, 100), (200, 100)]);
    d.block(10240)[446 + 16 + 4] = 0x83;
    assert!(matches!(
        d.table(),
        Err(TableError::BadEbr { lba: 10240, .. })
    ));
    // A logical entry of zero size.
    let mut d = extended_disk(&[(0, 100)]);
    d.block(10240)[446 + 12..446 + 16].fill(0);
    assert_eq!(d.table(), Err(TableError::ZeroSize { number: 5 }));
}

const GPT_BLOCKS: u64 = 20_000;

fn good_gpt() -> Disk {
    gpt_disk(
        GPT_BLOCKS,
        &[gpt_entry(1, 2048, 4095), None, gpt_entry(3, 4096, 19_965)],
    )
}

#[test]
fn gpt_parses() {
    let mut d = good_gpt();
    let t = d.table().unwrap();
    assert_eq!(t.scheme, Scheme::Gpt);
    let info = t.gpt.unwrap();
    assert_eq!(info.header, GptHeader::Primary);
    assert_eq!(info.disk_guid, DISK_GUID);
    assert_eq!((info.first_usable, info.last_usable), (34, 19_966));
    assert_eq!(info.entry_count, 128);
    let numbers: Vec<_> = t
        .partitions
        .iter()
        .map(|p| (p.number, p.first_lba, p.blocks))
        .collect();
    assert_eq!(numbers, [(1, 2048, 2048), (3, 4096, 15_870)]);
    let Kind::Gpt {
        type_guid,
        unique_guid,
        name,
        attributes,
    } = t.partitions[1].kind
    else {
        panic!("not GPT")
    };
    assert_eq!(type_guid, Guid::LINUX_DATA.0);
    assert_eq!(unique_guid, [3; 16]);
    assert_eq!(name.to_string(), "part3");
    assert_eq!(attributes, 0);
    // The MBR, the header and its 32 entry blocks; not the backup.
    assert_eq!(d.reads, 34);
}

#[test]
fn gpt_bad_header_crc_falls_back_to_the_backup() {
    let mut d = good_gpt();
    d.block(1)[40] ^= 1; // first usable, CRC not recomputed
    let t = d.table().unwrap();
    assert_eq!(
        t.gpt.unwrap().header,
        GptHeader::Backup {
            primary: GptFault::HeaderCrc
        }
    );
    assert_eq!(t.partitions.len(), 2);
}

#[test]
fn gpt_bad_entries_crc_falls_back_to_the_backup() {
    let mut d = good_gpt();
    d.block(2)[33] ^= 0x80; // entry 1's first LBA
    let t = d.table().unwrap();
    assert_eq!(
        t.gpt.unwrap().header,
        GptHeader::Backup {
            primary: GptFault::EntriesCrc
        }
    );
    assert_eq!(t.partitions[0].first_lba, 2048);
}

#[test]
fn gpt_both_headers_bad() {
    let mut d = good_gpt();
    d.block(1)[0] = b'X';
    d.block(GPT_BLOCKS - 1)[20] ^= 1; // reserved: covered by the CRC
    let e = d.table().unwrap_err();
    assert_eq!(
        e,
        TableError::BothGptHeadersBad {
            primary: GptFault::BadHeader("no \"EFI PART\" signature"),
            backup: GptFault::HeaderCrc,
        }
    );
    assert_eq!(
        e.to_string(),
        "GPT: both headers bad (primary: bad header: no \"EFI PART\" signature; backup: header \
         CRC32 mismatch)"
    );
    // Backup entries bad too.
    let mut d = good_gpt();
    d.block(3)[0] ^= 1;
    d.block(GPT_BLOCKS - 32)[0] ^= 1;
    assert_eq!(
        d.table(),
        Err(TableError::BothGptHeadersBad {
            primary: GptFault::EntriesCrc,
            backup: GptFault::EntriesCrc,
        })
    );
}

/// Each header field out of bounds (CRC resealed) is a `BadHeader`.
#[test]
fn gpt_header_fields_out_of_bounds() {
    type Patch = fn(&mut [u8; BLOCK]);
    let cases: &[(Patch, &str)] = &[
        (|h| h[10] = 2, "revision is not 1.x"),
        (|h| h[12] = 91, "header size not from 92 to 512"),
        (
            |h| h[12..14].copy_from_slice(&513u16.to_le_bytes()),
            "header size not from 92 to 512",
        ),
        (|h| h[24] = 2, "my LBA is not the header's own block"),
        (
            |h| h[40..48].copy_from_slice(&1u64.to_le_bytes()),
            "usable blocks not within the disk between the headers",
        ),
        (
            |h| h[48..56].copy_from_slice(&(GPT_BLOCKS - 1).to_le_bytes()),
            "usable blocks not within the disk between the headers",
        ),
        (
            |h| h[48..56].copy_from_slice(&33u64.to_le_bytes()),
            "usable blocks not within the disk between the headers",
        ),
        (|h| h[84] = 64, "entry size not 128, 256 or 512"),
        (
            |h| h[84..88].copy_from_slice(&384u32.to_le_bytes()),
            "entry size not 128, 256 or 512",
        ),
        (
            |h| h[84..88].copy_from_slice(&1024u32.to_le_bytes()),
            "entry size not 128, 256 or 512",
        ),
        (
            |h| h[80..84].copy_from_slice(&1025u32.to_le_bytes()),
            "more than 1024 entries",
        ),
        (
            |h| h[72..80].copy_from_slice(&u64::MAX.to_le_bytes()),
            "entry array not between the headers",
        ),
        (
            |h| h[72..80].copy_from_slice(&(GPT_BLOCKS - 10).to_le_bytes()),
            "entry array not between the headers",
        ),
        (
            |h| h[72..80].copy_from_slice(&1u64.to_le_bytes()),
            "entry array not between the headers",
        ),
        (
            |h| h[72..80].copy_from_slice(&100u64.to_le_bytes()),
            "entry array over the usable blocks",
        ),
    ];
    for (i, (patch, why)) in cases.iter().enumerate() {
        let mut d = good_gpt();
        patch_header(&mut d, 1, patch);
        let t = d.table().unwrap_or_else(|e| panic!("case {i}: {e}"));
        assert_eq!(
            t.gpt.unwrap().header,
            GptHeader::Backup {
                primary: GptFault::BadHeader(why)
            },
            "case {i}"
        );
    }
    // The backup's entry array running into the backup header.
    let mut d = good_gpt();
    d.block(1)[0] = 0;
    patch_header(&mut d, GPT_BLOCKS - 1, |h| {
        h[72..80].copy_from_slice(&(GPT_BLOCKS - 32).to_le_bytes())
    });
    assert_eq!(
        d.table(),
        Err(TableError::BothGptHeadersBad {
            primary: GptFault::BadHeader("no \"EFI PART\" signature"),
            backup: GptFault::BadHeader("entry array not between the headers"),
        })
    );
    // A header size of 512 (the rest zero) is fine when sealed so.
    let mut d = good_gpt();
    patch_header(&mut d, 1, |h| {
        h[12..16].copy_from_slice(&512u32.to_le_bytes())
    });
    assert_eq!(d.table().unwrap().gpt.unwrap().header, GptHeader::Primary);
}

#[test]
fn gpt_entry_sizes_and_counts() {
    // 256-byte entries, 7 of them (a partial last block), hand-laid.
    let mut d = Disk::new(GPT_BLOCKS);
    d.put(0, write::protective_mbr(GPT_BLOCKS));
    let mut array = vec![0u8; 7 * 256];
    let one = write::gpt_entries(&[gpt_entry(9, 100, 199)], 1);
    array[6 * 256..6 * 256 + 128].copy_from_slice(&one);
    array[6 * 256 + 200] = 0xAB; // beyond the 128 known bytes: kept in the CRC
    for (i, chunk) in array.chunks(BLOCK).enumerate() {
        let mut b = [0u8; BLOCK];
        b[..chunk.len()].copy_from_slice(chunk);
        // Bytes past the array in its last block are not covered.
        if chunk.len() < BLOCK {
            b[BLOCK - 1] = 0xCD;
        }
        d.put(2 + i as u64, b);
    }
    d.put(
        1,
        GptHeaderFields {
            my_lba: 1,
            alternate_lba: GPT_BLOCKS - 1,
            first_usable: 6,
            last_usable: GPT_BLOCKS - 6,
            disk_guid: DISK_GUID,
            entry_lba: 2,
            entry_count: 7,
            entry_size: 256,
            entries_crc: partition::crc32(&array),
        }
        .encode(),
    );
    let t = d.table().unwrap();
    assert_eq!(t.gpt.unwrap().header, GptHeader::Primary);
    assert_eq!(t.partitions.len(), 1);
    assert_eq!((t.partitions[0].number, t.partitions[0].blocks), (7, 100));
    // Zero entries: a GPT without partitions.
    let mut d = good_gpt();
    patch_header(&mut d, 1, |h| {
        h[80..84].fill(0);
        h[88..92].copy_from_slice(&partition::crc32(&[]).to_le_bytes());
    });
    let t = d.table().unwrap();
    assert_eq!(t.gpt.unwrap().header, GptHeader::Primary);
    assert!(t.partitions.is_empty());
}

#[test]
fn gpt_partitions_checked() {
    let e = gpt_disk(
        GPT_BLOCKS,
        &[gpt_entry(1, 2048, 4095), gpt_entry(2, 4095, 5000)],
    )
    .table();
    assert_eq!(e, Err(TableError::Overlap { a: 1, b: 2 }));
    let e = gpt_disk(GPT_BLOCKS, &[None, gpt_entry(2, 3000, 2999)]).table();
    assert_eq!(e, Err(TableError::ZeroSize { number: 2 }));
    let e = gpt_disk(GPT_BLOCKS, &[gpt_entry(1, 3000, GPT_BLOCKS)]).table();
    assert_eq!(
        e,
        Err(TableError::BeyondDisk {
            number: 1,
            end: GPT_BLOCKS + 1,
            disk_blocks: GPT_BLOCKS
        })
    );
    let e = gpt_disk(GPT_BLOCKS, &[gpt_entry(1, 3000, u64::MAX)]).table();
    assert!(matches!(e, Err(TableError::BeyondDisk { number: 1, .. })));
    // Over the backup entry array / the primary one.
    let e = gpt_disk(GPT_BLOCKS, &[gpt_entry(1, 3000, GPT_BLOCKS - 2)]).table();
    assert_eq!(e, Err(TableError::OutsideUsable { number: 1 }));
    let e = gpt_disk(GPT_BLOCKS, &[gpt_entry(1, 33, 100)]).table();
    assert_eq!(e, Err(TableError::OutsideUsable { number: 1 }));
    // A one-block partition is fine.
    let t = gpt_disk(GPT_BLOCKS, &[gpt_entry(1, 34, 34)])
        .table()
        .unwrap();
    assert_eq!(t.partitions[0].blocks, 1);
}

#[test]
fn gpt_on_tiny_disks() {
    for blocks in 1..80 {
        let mut d = Disk::new(blocks);
        d.put(0, write::protective_mbr(blocks));
        assert!(
            matches!(d.table(), Err(TableError::BothGptHeadersBad { .. })),
            "{blocks}"
        );
    }
}

#[test]
fn errors_read_well() {
    let cases = [
        (
            TableError::NoTable,
            "no partition table (no 0x55AA signature in block 0)",
        ),
        (
            TableError::Overlap { a: 1, b: 5 },
            "partitions 1 and 5 overlap",
        ),
        (
            TableError::ExtendedLoop { lba: 7 },
            "extended partition: the EBR chain loops back to block 7",
        ),
        (
            TableError::TooManyLogical,
            "extended partition: more than 128 logical partitions in the EBR chain",
        ),
        (
            TableError::BeyondDisk {
                number: 2,
                end: 11,
                disk_blocks: 10,
            },
            "partition 2: ends at block 11, beyond the disk's 10 blocks",
        ),
        (
            TableError::Read(ReadError(3)),
            "block read failed (error 3)",
        ),
    ];
    for (e, text) in cases {
        assert_eq!(e.to_string(), text);
    }
}
