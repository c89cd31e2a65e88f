//! Hostile images: 102,000 mutated images (34,000 each of FAT12, FAT16 and
//! FAT32), each mounted, walked, every file read, then written to
//! (create, write past the end, truncate, append, mkdir, rename, unlink,
//! rmdir, sync), one in four mounted and walked again after that. Any
//! error is fine; a panic or a hang is not. A deterministic xorshift PRNG
//! picks the mutations (random bytes in the boot sector, FAT entries that
//! loop or leave the data area, directory-entry names, attributes,
//! clusters and sizes, any byte in use), so a failure names its iteration
//! and repeats. `FAT_FUZZ_ITERATIONS=n` runs n images per type instead.
//!
//! Kept fast by small images (FAT12 128 KiB; FAT16 and FAT32 at their
//! minimum cluster counts with 512-byte clusters, 2.2 and 33 MiB) shared
//! read-only under a copy-on-write overlay that holds only the blocks an
//! iteration changes. Measured on the 2-CPU build machine in the default
//! (dev, opt-level 1) profile: about 30 s of CPU for the three tests,
//! which run in parallel — 17–25 s wall, up to 47 s while other builds
//! shared the machine.

use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use fat::{
    format, BlockDevice, DeviceError, DirCursor, FatKind, OpenMode, RamDisk, SeekFrom, Volume,
};

/// Images per FAT type.
const ITERATIONS: u64 = 34_000;

fn iterations() -> u64 {
    std::env::var("FAT_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(ITERATIONS)
}

/// xorshift64* (Vigna): small, deterministic, good enough to pick bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A base image under a copy-on-write overlay of changed blocks.
struct Overlay<'a> {
    base: &'a [u8],
    changed: HashMap<u64, [u8; 512]>,
}

impl Overlay<'_> {
    fn block(&self, b: u64) -> [u8; 512] {
        if let Some(d) = self.changed.get(&b) {
            return *d;
        }
        let mut d = [0u8; 512];
        let o = b as usize * 512;
        d.copy_from_slice(&self.base[o..o + 512]);
        d
    }
}

impl BlockDevice for Overlay<'_> {
    fn block_size(&self) -> u32 {
        512
    }
    fn block_count(&self) -> u64 {
        self.base.len() as u64 / 512
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        for (i, chunk) in buf.chunks_exact_mut(512).enumerate() {
            let b = block + i as u64;
            if b >= self.block_count() {
                return Err(DeviceError(1));
            }
            chunk.copy_from_slice(&self.block(b));
        }
        Ok(())
    }
    fn write(&mut self, block: u64, buf: &[u8]) -> Result<(), DeviceError> {
        for (i, chunk) in buf.chunks_exact(512).enumerate() {
            let b = block + i as u64;
            if b >= self.block_count() {
                return Err(DeviceError(1));
            }
            self.changed.insert(b, chunk.try_into().unwrap());
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }
}

/// A formatted image of `blocks` with a few files and directories; the
/// sectors in use end before the returned sector.
fn base(kind: FatKind, blocks: u64) -> (Vec<u8>, u64) {
    let mut d = RamDisk::new(blocks);
    format(&mut d, Some(kind), "FUZZ").unwrap();
    let mut v = Volume::mount(d).unwrap();
    let put = |v: &mut Volume<RamDisk>, p: &str, n: usize| {
        let h = v.open(p, OpenMode::CREATE).unwrap();
        let data: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
        v.write(h, &data).unwrap();
        v.close(h).unwrap();
    };
    v.mkdir("/dir one").unwrap();
    v.mkdir("/dir one/Nested Directory").unwrap();
    v.mkdir("/EMPTY").unwrap();
    put(&mut v, "/README.TXT", 100);
    put(&mut v, "/a file with a long name.bin", 3000);
    put(&mut v, "/dir one/second file.txt", 1500);
    put(&mut v, "/dir one/Nested Directory/deep.dat", 700);
    for i in 0..20 {
        put(&mut v, &format!("/dir one/entry {i}"), i * 50);
    }
    put(&mut v, "/empty file", 0);
    v.sync().unwrap();
    let used = u64::from(v.cluster_count() - v.free_clusters().unwrap());
    let bytes = v.into_device().into_bytes();
    // The data area starts after the FATs and root: find it from the BPB.
    let mut b = [0u8; 512];
    b.copy_from_slice(&bytes[..512]);
    let w = |o: usize| u64::from(u16::from_le_bytes([b[o], b[o + 1]]));
    let fat_sectors = if w(22) != 0 {
        w(22)
    } else {
        u64::from(u32::from_le_bytes([b[36], b[37], b[38], b[39]]))
    };
    let data_start = w(14) + u64::from(b[16]) * fat_sectors + (w(17) * 32).div_ceil(512);
    (bytes, data_start + used * u64::from(b[13]) + 4)
}

/// Changes 1–4 things in `dev`: random bytes anywhere in use (boot
/// sector, FATs, directories, data), directory-entry fields, or FAT
/// entries that loop or leave the data area.
fn mutate(rng: &mut Rng, dev: &mut Overlay, kind: FatKind, used_end: u64) {
    let boot = dev.block(0);
    let fat_start = u64::from(u16::from_le_bytes([boot[14], boot[15]]));
    for _ in 0..1 + rng.below(4) {
        let (sector, offset, value): (u64, usize, u8) = match rng.below(10) {
            // The boot sector's BPB.
            0 | 1 => (0, rng.below(100) as usize, rng.next() as u8),
            // A FAT byte: often a chain that loops back or runs away.
            2..=4 => {
                let entry = 2 + rng.below(40);
                let (off, v) = match kind {
                    FatKind::Fat12 => (entry * 3 / 2, rng.below(50) as u8),
                    FatKind::Fat16 => (entry * 2, rng.below(50) as u8),
                    FatKind::Fat32 => (entry * 4 + rng.below(4), rng.below(50) as u8),
                };
                let v = if rng.below(4) == 0 {
                    rng.next() as u8
                } else {
                    v
                };
                (fat_start + off / 512, (off % 512) as usize, v)
            }
            // A directory entry's cluster, size, attribute or name byte.
            5..=7 => {
                let slot = rng.below(16) as usize * 32;
                let field = [0, 11, 20, 21, 26, 27, 28, 30, 31, 13][rng.below(10) as usize];
                (
                    fat_start + rng.below(used_end - fat_start),
                    slot + field,
                    rng.next() as u8,
                )
            }
            // Any byte in use.
            _ => (
                rng.below(used_end),
                rng.below(512) as usize,
                rng.next() as u8,
            ),
        };
        let mut b = dev.block(sector);
        b[offset] = value;
        dev.changed.insert(sector, b);
    }
}

/// Lists and reads everything (bounded: depth 6, 64 KiB per file, since
/// a hostile directory may contain itself), then changes things. Errors
/// are fine.
fn exercise<D: BlockDevice>(v: &mut Volume<D>, count_free: bool) -> usize {
    let mut dirs = vec![(String::from("/"), 0)];
    let mut files = Vec::new();
    let mut visited = 0;
    while let Some((d, depth)) = dirs.pop() {
        let mut c = DirCursor::default();
        for _ in 0..300 {
            let Ok(Some((e, next))) = v.read_dir_at(&d, c) else {
                break;
            };
            c = next;
            visited += 1;
            let p = format!("{}/{}", d.trim_end_matches('/'), e.name);
            let _ = v.stat(&p);
            if e.metadata.is_dir {
                if depth < 6 && visited < 2000 {
                    dirs.push((p, depth + 1));
                }
            } else {
                files.push(p);
            }
        }
    }
    let _ = v.read_dir("/", 3);
    let mut read = 0;
    let mut buf = [0u8; 4096];
    for p in files.iter().take(40) {
        if let Ok(h) = v.open(p, OpenMode::READ) {
            for _ in 0..16 {
                match v.read(h, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
            let _ = v.fstat(h);
            let _ = v.close(h);
        }
    }
    let data = [0x5Au8; 3000];
    if let Ok(h) = v.open("/fuzz written file.txt", OpenMode::CREATE) {
        let _ = v.write(h, &data);
        let _ = v.seek(h, SeekFrom::Start(9000));
        let _ = v.write(h, &data);
        let _ = v.truncate(h, 100);
        let _ = v.close(h);
    }
    let _ = v.mkdir("/dir one/made by fuzz");
    let _ = v.mkdir("/New Dir");
    if let Some(p) = files.first() {
        if let Ok(h) = v.open(p, OpenMode::APPEND) {
            let _ = v.write(h, b"appended");
            let _ = v.truncate(h, 10);
            let _ = v.close(h);
        }
        let _ = v.rename(p, "/New Dir/moved here");
    }
    if let Some(p) = files.get(1) {
        let _ = v.unlink(p);
    }
    let _ = v.rename("/dir one", "/EMPTY/dir one moved");
    let _ = v.rmdir("/EMPTY");
    if count_free {
        let _ = v.free_clusters();
    }
    let _ = v.sync();
    read
}

fn fuzz(kind: FatKind, blocks: u64, seed: u64) {
    let (image, used_end) = base(kind, blocks);
    let mut rng = Rng(seed);
    let (mut mounted, mut read) = (0, 0);
    for i in 0..iterations() {
        let mut dev = Overlay {
            base: &image,
            changed: HashMap::new(),
        };
        mutate(&mut rng, &mut dev, kind, used_end);
        // Counting free clusters reads the whole FAT (65,000 entries on
        // FAT32): one image in eight.
        let count_free = rng.below(8) == 0;
        let remount = rng.below(4) == 0;
        let r = catch_unwind(AssertUnwindSafe(|| {
            if let Ok(mut v) = Volume::mount(&mut dev) {
                mounted += 1;
                read += exercise(&mut v, count_free);
            }
            // What was written on the broken image must not break the
            // next mount either (one image in four).
            if remount {
                if let Ok(mut v) = Volume::mount(&mut dev) {
                    read += exercise(&mut v, false);
                }
            }
        }));
        if let Err(p) = r {
            eprintln!("{kind:?}: iteration {i} panicked");
            resume_unwind(p);
        }
    }
    println!(
        "{kind:?}: {} images, {mounted} mounted, {read} bytes read",
        iterations()
    );
}

#[test]
fn hostile_fat12_images() {
    fuzz(FatKind::Fat12, 256, 0x1234_5678_9ABC_DEF1);
}

#[test]
fn hostile_fat16_images() {
    fuzz(FatKind::Fat16, 4400, 0x0FED_CBA9_8765_4321);
}

#[test]
fn hostile_fat32_images() {
    fuzz(FatKind::Fat32, 66_700, 0x5555_AAAA_3333_CCCC);
}
