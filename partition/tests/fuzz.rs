//! A deterministic fuzz test: 100,000+ tables (MBR with extended chains,
//! GPT) built valid, then mutated — random bytes, bit flips, interesting
//! values in the fields that matter, GPT CRCs resealed half the time so
//! the checks behind them are reached too. `read_table` must never
//! panic, never read past the disk or without bound, and every table it
//! returns must keep the crate's invariants (checked here independently).

mod common;

use std::time::Instant;

use common::*;
use partition::write::{self, GptHeaderFields, MbrEntry};
use partition::{Table, TableError, BLOCK};

/// xorshift64* (Vigna): tiny, deterministic, good enough to pick bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// An MBR disk with up to three primaries and an extended partition of
/// up to six logical ones, sizes random.
fn random_mbr(rng: &mut Rng) -> Disk {
    let blocks = 4096 + rng.below(60_000);
    let mut d = Disk::new(blocks);
    let mut entries = [None; 4];
    let mut at = 1 + rng.below(64) as u32;
    let ext_slot = rng.below(5) as usize; // 4: none
    let mut ext = None;
    for (slot, e) in entries.iter_mut().enumerate() {
        if rng.chance(5) {
            continue;
        }
        let size = 1 + rng.below(blocks / 8) as u32;
        if u64::from(at) + u64::from(size) > blocks {
            break;
        }
        let type_byte = if slot == ext_slot {
            [0x05, 0x0F, 0x85][rng.below(3) as usize]
        } else {
            [0x0C, 0x83, 0x07, 0x01][rng.below(4) as usize]
        };
        *e = Some(MbrEntry {
            boot: if rng.chance(4) { 0x80 } else { 0 },
            type_byte,
            first_lba: at,
            sectors: size,
        });
        if slot == ext_slot {
            ext = Some((at, size));
        }
        at += size + rng.below(16) as u32;
    }
    d.put(0, write::mbr(rng.next() as u32, &entries));
    if let Some((start, size)) = ext {
        // EBRs at increasing offsets, each logical right after its EBR.
        let n = rng.below(7);
        let mut offset = 0u32;
        let mut chain = Vec::new();
        for _ in 0..n {
            let len = 2 + rng.below(u64::from(size) / 8 + 1) as u32;
            if offset + len > size {
                break;
            }
            chain.push((offset, len));
            offset += len + rng.below(4) as u32;
        }
        if chain.is_empty() {
            // An extended partition without logical ones still starts
            // with an (empty) EBR.
            d.put(
                u64::from(start),
                write::ebr(u64::from(start), u64::from(start), None, None),
            );
        }
        for (i, &(off, len)) in chain.iter().enumerate() {
            let lba = u64::from(start + off);
            let next = chain.get(i + 1).map(|&(o, l)| MbrEntry {
                boot: 0,
                type_byte: 0x05,
                first_lba: o,
                sectors: l,
            });
            let logical = MbrEntry {
                boot: 0,
                type_byte: 0x83,
                first_lba: 1,
                sectors: len - 1,
            };
            d.put(lba, write::ebr(lba, u64::from(start), Some(logical), next));
        }
    }
    d
}

/// A GPT disk with a small entry array (count 1..=16 of 128 bytes, so
/// the fuzz stays fast) and up to its count of partitions.
fn random_gpt(rng: &mut Rng) -> Disk {
    let blocks = 64 + rng.below(20_000);
    let count = 1 + rng.below(16) as u32;
    let array_blocks = u64::from(count).div_ceil(4);
    let first_usable = 2 + array_blocks;
    let last_usable = blocks - 2 - array_blocks;
    let mut entries = Vec::new();
    let mut at = first_usable;
    for i in 0..count {
        if rng.chance(4) {
            entries.push(None);
            continue;
        }
        let len = 1 + rng.below((last_usable - first_usable) / 8 + 1);
        if at + len - 1 > last_usable {
            break;
        }
        entries.push(gpt_entry(i as u8, at, at + len - 1));
        at += len + rng.below(3);
    }
    let array = write::gpt_entries(&entries, count);
    let mut d = Disk::new(blocks);
    d.put(0, write::protective_mbr(blocks));
    let primary = GptHeaderFields {
        my_lba: 1,
        alternate_lba: blocks - 1,
        first_usable,
        last_usable,
        disk_guid: DISK_GUID,
        entry_lba: 2,
        entry_count: count,
        entry_size: 128,
        entries_crc: partition::crc32(&array),
    };
    let backup = GptHeaderFields {
        my_lba: blocks - 1,
        alternate_lba: 1,
        entry_lba: blocks - 1 - array_blocks,
        ..primary
    };
    d.put(1, primary.encode());
    d.put(blocks - 1, backup.encode());
    for base in [primary.entry_lba, backup.entry_lba] {
        for (i, chunk) in array.chunks(BLOCK).enumerate() {
            let mut b = [0u8; BLOCK];
            b[..chunk.len()].copy_from_slice(chunk);
            d.put(base + i as u64, b);
        }
    }
    d
}

/// Recomputes both headers' entry-array CRC (when the header's fields
/// let it be read) and header CRC.
fn reseal(d: &mut Disk) {
    for lba in [1, d.blocks - 1] {
        let Some(h) = d.data.get(&lba).copied() else {
            continue;
        };
        let entry_lba = u64::from_le_bytes(h[72..80].try_into().unwrap());
        let count = u32::from_le_bytes(h[80..84].try_into().unwrap()) as usize;
        let size = u32::from_le_bytes(h[84..88].try_into().unwrap()) as usize;
        let bytes = count.saturating_mul(size);
        let mut h = h;
        if bytes <= 64 * 1024 && entry_lba < d.blocks {
            let mut array = Vec::new();
            for b in 0..bytes.div_ceil(BLOCK) as u64 {
                array.extend_from_slice(
                    &d.data.get(&(entry_lba + b)).copied().unwrap_or([0; BLOCK]),
                );
            }
            let crc = partition::crc32(&array[..bytes]);
            h[88..92].copy_from_slice(&crc.to_le_bytes());
        }
        write::seal_header(&mut h);
        d.put(lba, h);
    }
}

/// Values that sit on the edges of the checks.
fn interesting(rng: &mut Rng, d: &Disk) -> u64 {
    let n = d.blocks;
    let lbas: Vec<u64> = d.data.keys().copied().collect();
    match rng.below(12) {
        0 => 0,
        1 => 1,
        2 => n - 1,
        3 => n,
        4 => n + 1,
        5 => u64::from(u32::MAX),
        6 => u64::MAX,
        7 => lbas[rng.below(lbas.len() as u64) as usize],
        // Differences of table blocks: EBR offsets that make loops.
        8 => {
            let a = lbas[rng.below(lbas.len() as u64) as usize];
            let b = lbas[rng.below(lbas.len() as u64) as usize];
            a.abs_diff(b)
        }
        9 => 128 << rng.below(4),
        _ => rng.below(2 * n),
    }
}

/// One mutation of a random table block.
fn mutate(rng: &mut Rng, d: &mut Disk) {
    let lbas: Vec<u64> = d.data.keys().copied().collect();
    let lba = lbas[rng.below(lbas.len() as u64) as usize];
    let value = interesting(rng, d);
    let block = d.block(lba);
    // Mostly where the fields are: MBR/EBR entries, the GPT header, the
    // first entries.
    let region = match rng.below(4) {
        0 => 0..BLOCK,
        1 => 446..BLOCK,
        2 => 0..92,
        _ => 0..256,
    };
    let at = region.start + rng.below((region.end - region.start) as u64) as usize;
    match rng.below(5) {
        0 => block[at] = rng.next() as u8,
        1 => block[at] ^= 1 << rng.below(8),
        2 => {
            let at = (at & !3).min(BLOCK - 4);
            block[at..at + 4].copy_from_slice(&(value as u32).to_le_bytes());
        }
        3 => {
            let at = (at & !7).min(BLOCK - 8);
            block[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        _ => {
            // An entry field of an MBR/EBR: type, first LBA or size.
            let slot = 446 + 16 * rng.below(4) as usize;
            match rng.below(3) {
                0 => block[slot + 4] = [0, 0x05, 0x0F, 0x85, 0xEE, 0x83][rng.below(6) as usize],
                1 => block[slot + 8..slot + 12].copy_from_slice(&(value as u32).to_le_bytes()),
                _ => block[slot + 12..slot + 16].copy_from_slice(&(value as u32).to_le_bytes()),
            }
        }
    }
}

/// The crate's promises about a table it returns, checked the slow way.
fn check_invariants(t: &Table, blocks: u64) {
    for p in &t.partitions {
        assert!(p.blocks >= 1, "{p:?}");
        assert!(p.first_lba >= 1, "{p:?}");
        assert!(
            p.first_lba.checked_add(p.blocks).unwrap() <= blocks,
            "{p:?}"
        );
        if let Some(g) = t.gpt {
            assert!(p.first_lba >= g.first_usable && p.first_lba + p.blocks - 1 <= g.last_usable);
        }
    }
    for (i, a) in t.partitions.iter().enumerate() {
        for b in &t.partitions[i + 1..] {
            assert!(a.number < b.number, "{a:?} {b:?}");
            let disjoint =
                a.first_lba + a.blocks <= b.first_lba || b.first_lba + b.blocks <= a.first_lba;
            assert!(disjoint, "{a:?} {b:?}");
        }
    }
}

#[test]
fn mutated_tables_never_panic() {
    const TABLES: u64 = 120_000;
    let start = Instant::now();
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let (mut ok, mut mbr, mut gpt) = (0u64, 0u64, 0u64);
    let mut kinds = std::collections::BTreeMap::new();
    for i in 0..TABLES {
        let mut d = if i % 2 == 0 {
            random_mbr(&mut rng)
        } else {
            random_gpt(&mut rng)
        };
        // 1 in 8 stays valid: the builders themselves must be right.
        let valid = rng.chance(8);
        if !valid {
            for _ in 0..1 + rng.below(6) {
                mutate(&mut rng, &mut d);
            }
            if i % 2 == 1 && rng.chance(2) {
                reseal(&mut d);
            }
        }
        let blocks = d.blocks;
        match d.table() {
            Ok(t) => {
                check_invariants(&t, blocks);
                ok += 1;
                match t.scheme {
                    partition::Scheme::Mbr => mbr += 1,
                    partition::Scheme::Gpt => gpt += 1,
                }
            }
            Err(e) => {
                assert!(!valid, "a valid table refused: {e}");
                // Every error prints.
                assert!(!e.to_string().is_empty());
                let name = format!("{e:?}");
                let name = name.split([' ', '(', '{']).next().unwrap().to_string();
                *kinds.entry(name).or_insert(0u64) += 1;
                let _: &TableError = &e;
            }
        }
        assert!(d.reads <= 1 + 128 + 2 * (1 + 1024), "{} reads", d.reads);
    }
    println!(
        "{TABLES} tables in {:?}: {ok} accepted ({mbr} MBR, {gpt} GPT); errors: {kinds:?}",
        start.elapsed()
    );
    // The mutations reach most error classes.
    for class in [
        "NoTable",
        "BadEntry",
        "ZeroSize",
        "BeyondDisk",
        "Overlap",
        "HybridMbr",
        "ExtendedLoop",
        "BadEbr",
        "EbrOutside",
        "LogicalOutside",
        "LogicalOverEbr",
        "OutsideUsable",
        "BothGptHeadersBad",
    ] {
        assert!(
            kinds.contains_key(class),
            "never reached {class}: {kinds:?}"
        );
    }
}
