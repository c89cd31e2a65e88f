//! Interruption at every point: a device records each write and flush of
//! a busy session (many files through a full cache of 12 blocks, so
//! eviction writes too; unlink, rename, truncate, mkdir, rmdir; two files
//! growing in turns), then every prefix of that record — a request of
//! many blocks recorded block by block, as it may land in part — is
//! replayed onto the starting image — of the writes since the last flush
//! all in order, only the newest, or all but the oldest, since a device
//! may reorder them — and the result is checked: every chain a directory
//! entry names is allocated, loop-free and owned once, long enough for
//! the file's size; every directory holds only entries the session made
//! (a fresh directory cluster that never reached the medium would show
//! garbage); every file's bytes are ones the session wrote. Lost clusters
//! are fine.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::cache::{Cache, FatLayout};
use crate::dir::DirRef;
use crate::*;

/// What the recording device saw.
enum Op {
    Write(u64, Vec<u8>),
    Flush,
}

struct Recorder {
    disk: RamDisk,
    ops: Vec<Op>,
}

impl BlockDevice for Recorder {
    fn block_size(&self) -> u32 {
        512
    }
    fn block_count(&self) -> u64 {
        self.disk.block_count()
    }
    fn read(&mut self, b: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.disk.read(b, buf)
    }
    /// A request of many blocks is recorded block by block: only a
    /// block's write is atomic, a larger one may land in part.
    fn write(&mut self, b: u64, buf: &[u8]) -> Result<(), DeviceError> {
        for (i, block) in buf.chunks(512).enumerate() {
            self.ops.push(Op::Write(b + i as u64, block.to_vec()));
        }
        self.disk.write(b, buf)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.ops.push(Op::Flush);
        Ok(())
    }
}

/// An image: the durable blocks under the ones written since the flush.
struct View<'a> {
    base: &'a RamDisk,
    over: BTreeMap<u64, Vec<u8>>,
}

impl BlockDevice for View<'_> {
    fn block_size(&self) -> u32 {
        512
    }
    fn block_count(&self) -> u64 {
        self.base.block_count()
    }
    fn read(&mut self, b: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        for (i, chunk) in buf.chunks_exact_mut(512).enumerate() {
            let k = b + i as u64;
            match self.over.get(&k) {
                Some(d) => chunk.copy_from_slice(d),
                None => {
                    let o = k as usize * 512;
                    let src = self.base.bytes().get(o..o + 512).ok_or(DeviceError(1))?;
                    chunk.copy_from_slice(src);
                }
            }
        }
        Ok(())
    }
    fn write(&mut self, b: u64, buf: &[u8]) -> Result<(), DeviceError> {
        for (i, chunk) in buf.chunks_exact(512).enumerate() {
            self.over.insert(b + i as u64, chunk.to_vec());
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }
}

/// File contents that say which file and offset they are: a 4-byte seed,
/// then bytes derived from it and the offset. Any prefix is valid.
fn content(seed: u32, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed * 7) as u8)
        .collect();
    for (i, b) in seed.to_le_bytes().iter().enumerate().take(len) {
        v[i] = *b;
    }
    v
}

fn valid_content(data: &[u8]) -> bool {
    if data.len() < 4 {
        return true; // too short to say; still read without error
    }
    let seed = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    data == content(seed, data.len()).as_slice()
}

/// Checks the invariants on `disk`; `names` are all names the session used.
fn check<D: BlockDevice>(disk: D, names: &BTreeSet<String>) -> Result<(), String> {
    let mut v = Volume::mount(disk).map_err(|e| format!("mount: {e}"))?;
    let clusters = v.fs.geo.clusters as usize;
    let cb = u64::from(v.fs.geo.cluster_bytes());
    let mut owner = vec![false; clusters + 2];
    let mut dirs = vec![(v.fs.root(), String::from(""))];
    while let Some((d, path)) = dirs.pop() {
        let mut w = v.fs.walker(d).map_err(|e| format!("{path}: {e}"))?;
        while let Some(e) =
            v.fs.next_entry(&mut w)
                .map_err(|e| format!("{path}: {e}"))?
        {
            if e.is_dot() || e.is_label() {
                continue;
            }
            let name = e.name();
            let p = format!("{path}/{name}");
            if !names.contains(&name) {
                return Err(format!("{p}: an entry the session never made"));
            }
            let start = e.cluster(v.fs.geo.kind);
            let mut count = 0u64;
            if start != 0 {
                let mut c = start;
                let mut steps = 0;
                loop {
                    if !v.fs.geo.is_cluster(c) || owner[c as usize] {
                        return Err(format!("{p}: cluster {c} out of range or cross-linked"));
                    }
                    owner[c as usize] = true;
                    count += 1;
                    match v.fs.step(start, c, &mut steps) {
                        Ok(Some(n)) => c = n,
                        Ok(None) => break,
                        Err(err) => return Err(format!("{p}: {err}")),
                    }
                }
            }
            if e.is_dir() {
                if start == 0 {
                    return Err(format!("{p}: a directory without a cluster"));
                }
                dirs.push((DirRef::Chain(start), p));
            } else {
                if u64::from(e.size()) > count * cb {
                    return Err(format!("{p}: size {} beyond its chain", e.size()));
                }
                let h = v
                    .open(&p, OpenMode::READ)
                    .map_err(|e| format!("{p}: {e}"))?;
                let mut data = vec![0u8; e.size() as usize];
                let n = v.read(h, &mut data).map_err(|e| format!("{p}: {e}"))?;
                if n != data.len() || !valid_content(&data) {
                    return Err(format!("{p}: bytes the session never wrote"));
                }
                v.close(h).unwrap();
            }
        }
    }
    Ok(())
}

/// The busy session; returns every name it used.
fn session(v: &mut Volume<Recorder>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let put = |v: &mut Volume<Recorder>,
               names: &mut BTreeSet<String>,
               dir: &str,
               name: &str,
               seed: u32,
               len: usize| {
        names.insert(String::from(name));
        let h = v.open(&format!("{dir}/{name}"), OpenMode::CREATE).unwrap();
        v.write(h, &content(seed, len)).unwrap();
        v.close(h).unwrap();
    };
    // A big file first: later chains cross FAT sector boundaries (on
    // FAT12, entries 341 and 682 straddle two sectors).
    put(v, &mut names, "", "big first file", 1000, 170_000);
    for d in ["Directory One", "Directory Two", "third"] {
        names.insert(String::from(d));
        v.mkdir(&format!("/{d}")).unwrap();
    }
    // Enough blocks to overflow the cache before any sync.
    for i in 0..40u32 {
        let dir = ["/Directory One", "/Directory Two", ""][i as usize % 3];
        let len = 300 + i as usize * 97;
        put(
            v,
            &mut names,
            dir,
            &format!("file number {i}.dat"),
            i + 1,
            len,
        );
    }
    names.insert(String::from("sub"));
    v.mkdir("/Directory One/sub").unwrap();
    put(v, &mut names, "/Directory One/sub", "deep file", 99, 5000);
    v.unlink("/Directory One/file number 3.dat").unwrap();
    v.rename("/file number 2.dat", "/Directory Two/moved file.dat")
        .unwrap();
    names.insert(String::from("moved file.dat"));
    v.rename("/Directory One/sub", "/third/sub").unwrap();
    for (p, len) in [
        ("/Directory Two/file number 1.dat", 100),
        ("/Directory One/file number 30.dat", 700),
    ] {
        let h = v.open(p, OpenMode::READ_WRITE).unwrap();
        v.truncate(h, len).unwrap();
        v.close(h).unwrap();
    }
    // Append the continuation of the file's own pattern.
    let h = v
        .open("/Directory Two/file number 4.dat", OpenMode::APPEND)
        .unwrap();
    let full = content(5, 300 + 4 * 97 + 3000);
    v.write(h, &full[300 + 4 * 97..]).unwrap();
    v.close(h).unwrap();
    // Two files growing in turns: their chains interleave, links from
    // one cluster to the next cross FAT sectors, and neither write
    // continues where the last one ended.
    let (a, b) = (content(300, 60 * 1500), content(301, 60 * 1100));
    names.insert(String::from("turn a"));
    names.insert(String::from("turn b"));
    let ha = v.open("/third/turn a", OpenMode::CREATE).unwrap();
    let hb = v.open("/turn b", OpenMode::CREATE).unwrap();
    for (ca, cb) in a.chunks(1500).zip(b.chunks(1100)) {
        v.write(ha, ca).unwrap();
        v.write(hb, cb).unwrap();
    }
    v.close(ha).unwrap();
    v.close(hb).unwrap();
    v.rmdir("/Directory Two").unwrap_err();
    names.insert(String::from("empty"));
    v.mkdir("/empty").unwrap();
    v.rmdir("/empty").unwrap();
    for i in 0..10u32 {
        put(
            v,
            &mut names,
            "/third",
            &format!("late {i}"),
            200 + i,
            1000 + i as usize * 611,
        );
    }
    v.sync().unwrap();
    names
}

#[test]
fn every_interruption_leaves_a_consistent_volume() {
    for kind in [FatKind::Fat12, FatKind::Fat16, FatKind::Fat32] {
        let blocks = match kind {
            FatKind::Fat12 => 2048,
            FatKind::Fat16 => 9000,
            FatKind::Fat32 => 67_000,
        };
        let mut disk = RamDisk::new(blocks);
        format(&mut disk, Some(kind), "").unwrap();
        // Garbage where clusters will go: unwritten ones must not pass.
        // (FAT32's root directory is cluster 2, the first: kept.)
        let g = Volume::mount(disk.clone()).unwrap().fs.geo;
        let free_start = g.cluster_sector(2 + u32::from(kind == FatKind::Fat32));
        let mut bytes = disk.into_bytes();
        for (i, b) in bytes[free_start as usize * 512..].iter_mut().enumerate() {
            *b = (i % 251) as u8 ^ 0xA5;
        }
        let start = bytes.clone();
        let mut v = Volume::mount(Recorder {
            disk: RamDisk::from_bytes(bytes),
            ops: Vec::new(),
        })
        .unwrap();
        // A small cache, so that eviction writes often (and in every
        // class), as a long session through the real one would.
        let g = v.fs.geo;
        v.fs.cache = Cache::new(
            12,
            Some(FatLayout {
                start: g.fat_start,
                len: g.fat_sectors,
                copies: g.fats,
            }),
        );
        let names = session(&mut v);
        let ops = core::mem::take(&mut v.fs.dev.ops);
        check(v.into_device().disk, &names).unwrap();

        let mut durable = RamDisk::from_bytes(start);
        let mut epoch: Vec<(u64, &[u8])> = Vec::new();
        let mut cuts = 0;
        for op in &ops {
            match op {
                Op::Flush => {
                    for (b, d) in epoch.drain(..) {
                        durable.write(b, d).unwrap();
                    }
                }
                Op::Write(b, d) => {
                    epoch.push((*b, d));
                    // The writes since the flush, in order and reversed.
                    // Which of the writes since the flush landed: all in
                    // order, only the newest, or all but the oldest.
                    for model in ["in order", "newest only", "all but oldest"] {
                        let mut img = View {
                            base: &durable,
                            over: BTreeMap::new(),
                        };
                        let landed = match model {
                            "in order" => &epoch[..],
                            "newest only" => &epoch[epoch.len() - 1..],
                            _ => &epoch[1..],
                        };
                        for &(b, d) in landed {
                            img.write(b, d).unwrap();
                        }
                        if let Err(msg) = check(img, &names) {
                            panic!("{kind:?}, after write {cuts} (block {b}, {model}): {msg}");
                        }
                    }
                    cuts += 1;
                }
            }
        }
        std::println!("{kind:?}: {cuts} writes");
        assert!(cuts > 100, "{cuts} writes only");
    }
}
