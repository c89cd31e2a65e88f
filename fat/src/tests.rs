//! Operation tests on RAM disks: names, directory growth and limits, file
//! growth, seeks, truncation, free-space accounting, renames, write order.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use crate::dir::Node;
use crate::*;

fn fresh(kind: FatKind) -> Volume<RamDisk> {
    let blocks = match kind {
        FatKind::Fat12 => 2048,   // 1 MiB, 512-byte clusters
        FatKind::Fat16 => 16384,  // 8 MiB
        FatKind::Fat32 => 70_000, // 34 MiB, 512-byte clusters
    };
    let mut d = RamDisk::new(blocks);
    format(&mut d, Some(kind), "TEST").unwrap();
    let v = Volume::mount(d).unwrap();
    assert_eq!(v.kind(), kind);
    v
}

const KINDS: [FatKind; 3] = [FatKind::Fat12, FatKind::Fat16, FatKind::Fat32];

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8 ^ (i >> 9) as u8)
        .collect()
}

fn put(v: &mut Volume<RamDisk>, path: &str, data: &[u8]) {
    let h = v.open(path, OpenMode::CREATE).unwrap();
    assert_eq!(v.write(h, data).unwrap(), data.len());
    v.close(h).unwrap();
}

fn get(v: &mut Volume<RamDisk>, path: &str) -> Vec<u8> {
    let h = v.open(path, OpenMode::READ).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 777];
    loop {
        let n = v.read(h, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    v.close(h).unwrap();
    out
}

fn names(v: &mut Volume<RamDisk>, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = DirCursor::default();
    while let Some((e, next)) = v.read_dir_at(path, c).unwrap() {
        out.push(e.name);
        c = next;
    }
    out
}

#[test]
fn files_and_directories_round_trip() {
    for kind in KINDS {
        let mut v = fresh(kind);
        v.mkdir("/docs").unwrap();
        v.mkdir("/docs/Deeper Level").unwrap();
        let a = pattern(5000, 1);
        put(
            &mut v,
            "/docs/Deeper Level/Ünïcødé file — long name.txt",
            &a,
        );
        put(&mut v, "/README.TXT", b"hello");
        v.sync().unwrap();
        let mut v = Volume::mount(v.into_device()).unwrap();
        assert_eq!(
            get(&mut v, "/docs/deeper level/ÜNÏCØDÉ FILE — LONG NAME.TXT"),
            a
        );
        assert_eq!(get(&mut v, "/readme.txt"), b"hello");
        assert_eq!(names(&mut v, "/"), ["docs", "README.TXT"]);
        assert_eq!(
            names(&mut v, "/docs/Deeper Level"),
            ["Ünïcødé file — long name.txt"]
        );
        assert_eq!(v.read_dir("/", 1).unwrap().unwrap().name, "README.TXT");
        assert_eq!(v.read_dir("/", 2).unwrap(), None);
        let m = v.stat("/docs").unwrap();
        assert!(m.is_dir);
        assert_eq!(v.stat("/README.TXT").unwrap().size, 5);
        assert_eq!(v.stat("/nope"), Err(FsError::NotFound));
        assert_eq!(v.stat("/README.TXT/x"), Err(FsError::NotADirectory));
        assert_eq!(v.mkdir("/docs"), Err(FsError::Exists));
        assert_eq!(v.mkdir("/a?b"), Err(FsError::InvalidName));
        assert_eq!(v.open("/docs", OpenMode::READ), Err(FsError::IsADirectory));
    }
}

#[test]
fn generated_short_names_are_unique() {
    let mut v = fresh(FatKind::Fat12);
    for i in 1..=12 {
        put(
            &mut v,
            &format!("/Long File Name {i}.text"),
            format!("{i}").as_bytes(),
        );
    }
    // The first four get ~1..~4 in Windows' style, the rest follow on.
    for i in 1..=12 {
        let short = format!("/LONGFI~{i}.TEX");
        let short = if i >= 10 {
            format!("/LONGF~{i}.TEX")
        } else {
            short
        };
        assert_eq!(get(&mut v, &short), format!("{i}").as_bytes(), "{short}");
    }
    // A lower-case 8.3 name keeps its short name (plus an LFN for case).
    put(&mut v, "/mixed.Txt", b"m");
    assert_eq!(get(&mut v, "/MIXED.TXT"), b"m");
    assert!(names(&mut v, "/").contains(&"mixed.Txt".to_string()));
}

#[test]
fn directories_grow_and_the_fixed_root_fills() {
    for kind in KINDS {
        let mut v = fresh(kind);
        v.mkdir("/many").unwrap();
        // 200 entries of 3 slots each: 600 slots, dozens of clusters.
        for i in 0..200 {
            put(
                &mut v,
                &format!("/many/a long file name {i:03}"),
                &[i as u8],
            );
        }
        let got = names(&mut v, "/many");
        assert_eq!(got.len(), 200);
        assert_eq!(got[199], "a long file name 199");
        assert_eq!(get(&mut v, "/many/A LONG FILE NAME 123"), [123]);
    }
    // FAT12/16: 512 root slots, one per 8.3 name (the label takes one).
    for kind in [FatKind::Fat12, FatKind::Fat16] {
        let mut v = fresh(kind);
        let mut made = 0;
        let err = loop {
            match v.open(&format!("/F{made}.TXT"), OpenMode::CREATE) {
                Ok(h) => {
                    v.close(h).unwrap();
                    made += 1;
                }
                Err(e) => break e,
            }
        };
        assert_eq!((made, err), (511, FsError::NoSpace));
        assert_eq!(v.mkdir("/D"), Err(FsError::NoSpace));
    }
}

#[test]
fn files_grow_seek_and_shrink() {
    for kind in KINDS {
        let mut v = fresh(kind);
        let free0 = v.free_clusters().unwrap();
        let data = pattern(300 * 1024 + 17, 7);
        let h = v.open("/big.bin", OpenMode::CREATE).unwrap();
        for chunk in data.chunks(1000) {
            assert_eq!(v.write(h, chunk).unwrap(), chunk.len());
        }
        v.close(h).unwrap();
        assert_eq!(get(&mut v, "/big.bin"), data);
        let cb = u64::from(v.cluster_bytes());
        let used = (data.len() as u64).div_ceil(cb) as u32;
        assert_eq!(v.free_clusters().unwrap(), free0 - used);

        // Seek past the end and write: the gap reads as zeros.
        let h = v.open("/gap", OpenMode::CREATE).unwrap();
        v.write(h, b"head").unwrap();
        assert_eq!(v.seek(h, SeekFrom::Start(5000)).unwrap(), 5000);
        v.write(h, b"tail").unwrap();
        assert_eq!(v.seek(h, SeekFrom::End(-4)).unwrap(), 5000);
        assert_eq!(
            v.seek(h, SeekFrom::Current(-5001)),
            Err(FsError::InvalidArgument)
        );
        v.close(h).unwrap();
        let g = get(&mut v, "/gap");
        assert_eq!(g.len(), 5004);
        assert_eq!(&g[..4], b"head");
        assert!(g[4..5000].iter().all(|&b| b == 0));
        assert_eq!(&g[5000..], b"tail");

        // Truncate: shorter keeps the head, longer adds zeros, 0 frees all.
        let h = v.open("/big.bin", OpenMode::READ_WRITE).unwrap();
        v.truncate(h, 1234).unwrap();
        assert_eq!(v.fstat(h).unwrap().size, 1234);
        v.truncate(h, 3000).unwrap();
        v.close(h).unwrap();
        let b = get(&mut v, "/big.bin");
        assert_eq!(&b[..1234], &data[..1234]);
        assert!(b[1234..].iter().all(|&x| x == 0));
        let h = v.open("/big.bin", OpenMode::READ_WRITE).unwrap();
        v.truncate(h, 0).unwrap();
        v.close(h).unwrap();
        v.unlink("/gap").unwrap();
        assert_eq!(v.free_clusters().unwrap(), free0);
        // Counted again from the FAT after a remount: the same.
        v.sync().unwrap();
        let mut v = Volume::mount(v.into_device()).unwrap();
        assert_eq!(v.free_clusters().unwrap(), free0);
        assert_eq!(v.stat("/big.bin").unwrap().size, 0);
    }
}

#[test]
fn open_modes_and_handles() {
    let mut v = fresh(FatKind::Fat16);
    put(&mut v, "/f", b"abc");
    let new = OpenMode {
        create_new: true,
        write: true,
        ..OpenMode::default()
    };
    assert_eq!(v.open("/f", new), Err(FsError::Exists));
    let h = v.open("/f", OpenMode::APPEND).unwrap();
    v.write(h, b"def").unwrap();
    v.close(h).unwrap();
    assert_eq!(get(&mut v, "/f"), b"abcdef");
    assert_eq!(v.close(h), Err(FsError::BadHandle));
    let h = v.open("/f", OpenMode::READ).unwrap();
    assert_eq!(v.write(h, b"x"), Err(FsError::ReadOnly));
    assert_eq!(v.unlink("/f"), Err(FsError::Busy));
    v.close(h).unwrap();
    assert_eq!(
        v.open("/f", OpenMode::default()),
        Err(FsError::InvalidArgument)
    );
    let hs: Vec<Handle> = (0..MAX_OPEN)
        .map(|_| v.open("/f", OpenMode::READ).unwrap())
        .collect();
    assert_eq!(v.open("/f", OpenMode::READ), Err(FsError::TooManyOpen));
    for h in hs {
        v.close(h).unwrap();
    }
    // Two handles on one file see each other's growth.
    let a = v.open("/f", OpenMode::READ_WRITE).unwrap();
    let b = v.open("/f", OpenMode::READ).unwrap();
    v.seek(a, SeekFrom::End(0)).unwrap();
    v.write(a, &pattern(2000, 3)).unwrap();
    let mut buf = vec![0u8; 3000];
    assert_eq!(v.read(b, &mut buf).unwrap(), 2006);
}

#[test]
fn rename_moves_and_fixes_dotdot() {
    for kind in KINDS {
        let mut v = fresh(kind);
        v.mkdir("/a").unwrap();
        v.mkdir("/b").unwrap();
        v.mkdir("/a/sub").unwrap();
        put(&mut v, "/a/sub/file.txt", b"inside");
        put(&mut v, "/a/x", b"x");
        assert_eq!(v.rename("/a", "/a/sub/a"), Err(FsError::InvalidArgument));
        // Also through a short-name alias of the path.
        v.mkdir("/a/sub/Long Directory Name").unwrap();
        assert_eq!(
            v.rename("/a", "/A/SUB/LONGDI~1/a"),
            Err(FsError::InvalidArgument)
        );
        v.rmdir("/a/sub/long directory name").unwrap();
        assert_eq!(v.rename("/a/x", "/b"), Err(FsError::Exists));
        v.rename("/a/sub", "/b/Moved Directory").unwrap();
        v.rename("/a/x", "/b/Moved Directory/renamed file").unwrap();
        v.rename(
            "/b/moved directory/renamed file",
            "/b/moved directory/Renamed File",
        )
        .unwrap();
        assert_eq!(get(&mut v, "/b/Moved Directory/file.txt"), b"inside");
        assert_eq!(names(&mut v, "/a"), Vec::<String>::new());
        assert_eq!(
            names(&mut v, "/b/Moved Directory"),
            ["file.txt", "Renamed File"]
        );
        // The moved directory's `..` names its new parent.
        let Node::Entry { entry: b, .. } = v.fs.resolve("/b").unwrap() else {
            panic!()
        };
        let Node::Entry { entry: m, .. } = v.fs.resolve("/b/Moved Directory").unwrap() else {
            panic!()
        };
        let md = v.fs.dir_of(&m).unwrap();
        let up = v.fs.find(md, "..").unwrap().unwrap();
        assert_eq!(up.cluster(kind), b.cluster(kind));
        // rmdir: only empty directories, never the root.
        assert_eq!(v.rmdir("/b"), Err(FsError::DirectoryNotEmpty));
        assert_eq!(v.rmdir("/"), Err(FsError::InvalidArgument));
        v.rmdir("/a").unwrap();
        assert_eq!(v.stat("/a"), Err(FsError::NotFound));
    }
}

/// Records the blocks written (one number per block) and flushes (-1)
/// (the write-order tests here and in `cache`).
pub(crate) struct Recorder {
    pub(crate) disk: RamDisk,
    pub(crate) log: Vec<i64>,
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
    fn write(&mut self, b: u64, buf: &[u8]) -> Result<(), DeviceError> {
        for i in 0..buf.len() / 512 {
            self.log.push((b + i as u64) as i64);
        }
        self.disk.write(b, buf)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.log.push(-1);
        Ok(())
    }
}

#[test]
fn sync_writes_data_then_fat_then_directory() {
    let mut disk = RamDisk::new(2048);
    format(&mut disk, Some(FatKind::Fat12), "").unwrap();
    let mut v = Volume::mount(Recorder { disk, log: vec![] }).unwrap();
    let h = v
        .open("/a file with a long name", OpenMode::CREATE)
        .unwrap();
    v.write(h, &pattern(3000, 9)).unwrap();
    v.close(h).unwrap();
    v.sync().unwrap();
    let g = v.fs.geo;
    let log = v.fs.dev.log.clone();
    let class = |b: i64| -> u8 {
        let b = b as u64;
        if b >= g.data_start {
            0
        } else if b >= g.root_start {
            2
        } else {
            1
        }
    };
    // Classes never go down, and a flush separates each change of class.
    let mut last = 0;
    let mut flushed = true;
    for &op in &log {
        if op == -1 {
            flushed = true;
            continue;
        }
        let c = class(op);
        assert!(c >= last, "{log:?}");
        if c > last {
            assert!(flushed, "no flush before class {c}: {log:?}");
        }
        last = c;
        flushed = false;
    }
    // Six data sectors, two FAT copies, one root sector; a final flush.
    assert_eq!(log.iter().filter(|&&b| b >= 0 && class(b) == 0).count(), 6);
    assert_eq!(log.iter().filter(|&&b| b >= 0 && class(b) == 1).count(), 2);
    assert_eq!(log.iter().filter(|&&b| b >= 0 && class(b) == 2).count(), 1);
    assert_eq!(log.last(), Some(&-1));

    // Unlink: the directory entry goes out (and is flushed) before the
    // FAT sectors that free its chain.
    v.fs.dev.log.clear();
    v.unlink("/a file with a long name").unwrap();
    v.sync().unwrap();
    let log = v.fs.dev.log.clone();
    let first_fat = log.iter().position(|&b| b >= 0 && class(b) == 1).unwrap();
    let last_dir = log.iter().rposition(|&b| b >= 0 && class(b) == 2).unwrap();
    assert!(
        last_dir < first_fat && log[last_dir + 1..first_fat].contains(&-1),
        "{log:?}"
    );
}

#[test]
fn date_round_trip() {
    let t = DateTime {
        year: 2026,
        month: 11,
        day: 27,
        hour: 6,
        minute: 5,
        second: 21,
    };
    let (d, tm, h) = t.to_fat();
    assert_eq!(DateTime::from_fat(d, tm, h), t);
}

#[test]
fn long_names_at_slot_boundaries() {
    let mut v = fresh(FatKind::Fat16);
    // 13 units fill one LFN slot exactly (no terminator, no padding), 26
    // two; 255 is the most; an emoji is two UTF-16 units.
    let names = [
        "abcdefghijklm".to_string(),
        "abcdefghijklmnopqrstuvwxyz".to_string(),
        "x".repeat(255),
        format!("{}😀", "y".repeat(253)),
        "😀 smile.txt".to_string(),
    ];
    for (i, n) in names.iter().enumerate() {
        put(&mut v, &format!("/{n}"), &[i as u8]);
    }
    assert_eq!(
        v.open(&format!("/{}😀", "y".repeat(254)), OpenMode::CREATE),
        Err(FsError::InvalidName)
    );
    v.sync().unwrap();
    let mut v = Volume::mount(v.into_device()).unwrap();
    let listed = names_of(&mut v);
    for (i, n) in names.iter().enumerate() {
        assert!(listed.contains(n), "{n}");
        assert_eq!(get(&mut v, &format!("/{}", n.to_uppercase())), [i as u8]);
    }
}

fn names_of(v: &mut Volume<RamDisk>) -> Vec<String> {
    names(v, "/")
}

/// A device of 4096-byte blocks.
struct BigBlocks;

impl BlockDevice for BigBlocks {
    fn block_size(&self) -> u32 {
        4096
    }
    fn block_count(&self) -> u64 {
        1000
    }
    fn read(&mut self, _: u64, _: &mut [u8]) -> Result<(), DeviceError> {
        Err(DeviceError(7))
    }
    fn write(&mut self, _: u64, _: &[u8]) -> Result<(), DeviceError> {
        Err(DeviceError(7))
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }
}

#[test]
fn refuses_other_block_sizes_and_passes_device_errors() {
    assert!(matches!(
        Volume::mount(BigBlocks),
        Err(FsError::Unsupported(_))
    ));
    assert!(matches!(
        format(&mut BigBlocks, None, ""),
        Err(FsError::Unsupported(_))
    ));
    // A device that fails: its code comes through.
    let mut d = RamDisk::new(100);
    assert_eq!(
        Volume::mount(RamDisk::new(0)).err(),
        Some(FsError::Device(DeviceError(RAMDISK_OUT_OF_RANGE)))
    );
    assert!(matches!(
        Volume::mount(&mut d),
        Err(FsError::Corrupt(Corruption::BadBootSector(_)))
    ));
}

#[test]
fn hostile_images_give_corruption_errors() {
    // A file whose chain loops back on itself: reads stay bounded by its
    // size; freeing it stops at the first cluster seen twice.
    let mut v = fresh(FatKind::Fat12);
    put(&mut v, "/loop", &pattern(3000, 1));
    let first = match v.fs.resolve("/loop").unwrap() {
        Node::Entry { entry, .. } => entry.cluster(FatKind::Fat12),
        Node::Root => unreachable!(),
    };
    v.fs.set_entry(first + 2, first).unwrap();
    let h = v.open("/loop", OpenMode::READ).unwrap();
    let mut buf = vec![0u8; 4000];
    assert_eq!(v.read(h, &mut buf).unwrap(), 3000);
    v.close(h).unwrap();
    assert!(matches!(
        v.unlink("/loop"),
        Err(FsError::Corrupt(Corruption::CrossLinked { .. }))
    ));

    // A loop reached past the file's size: the walk is cut at the
    // cluster count.
    let mut v = fresh(FatKind::Fat16);
    put(&mut v, "/dir entry", b"x");
    v.mkdir("/d").unwrap();
    let d = match v.fs.resolve("/d").unwrap() {
        Node::Entry { entry, .. } => entry.cluster(FatKind::Fat16),
        Node::Root => unreachable!(),
    };
    // Full first cluster (16 slots), then a chain that loops to itself:
    // walks end at 65536 slots or the cluster count, whichever is first.
    for i in 0..14 {
        put(&mut v, &format!("/d/F{i}"), b"");
    }
    v.fs.set_entry(d, d).unwrap();
    assert!(matches!(
        v.read_dir("/d", usize::MAX),
        Err(FsError::Corrupt(
            Corruption::ChainLoop { .. } | Corruption::EntryPastEnd
        ))
    ));
    assert!(matches!(
        v.open("/d/new", OpenMode::CREATE),
        Err(FsError::Corrupt(_))
    ));

    // An entry naming a cluster outside the data area.
    let mut v = fresh(FatKind::Fat32);
    put(&mut v, "/f", b"abc");
    let Node::Entry { entry, .. } = v.fs.resolve("/f").unwrap() else {
        unreachable!()
    };
    let mut raw = entry.raw;
    crate::dir::set_cluster(&mut raw, 0x0FFF_0000);
    v.fs.write_slot(entry.pos(), &raw).unwrap();
    assert!(matches!(
        v.open("/f", OpenMode::READ),
        Err(FsError::Corrupt(Corruption::ClusterOutOfRange { .. }))
    ));

    // Boot sectors: 1024-byte sectors, 3 sectors per cluster, no FATs.
    for (off, val) in [(12usize, 4u8), (13, 3), (16, 0)] {
        let mut d = RamDisk::new(2048);
        format(&mut d, Some(FatKind::Fat12), "").unwrap();
        let mut bytes = d.into_bytes();
        bytes[off] = val;
        assert!(matches!(
            Volume::mount(RamDisk::from_bytes(bytes)),
            Err(FsError::Corrupt(Corruption::BadBootSector(_)))
        ));
    }
}

#[test]
fn directories_free_their_clusters() {
    let mut v = fresh(FatKind::Fat32);
    let free0 = v.free_clusters().unwrap();
    v.mkdir("/a").unwrap();
    for i in 0..40 {
        put(&mut v, &format!("/a/long enough name {i}"), &[1]);
    }
    assert!(v.free_clusters().unwrap() < free0 - 40);
    for i in 0..40 {
        v.unlink(&format!("/a/long enough name {i}")).unwrap();
    }
    v.rmdir("/a").unwrap();
    assert_eq!(v.free_clusters().unwrap(), free0);
}

/// Counts read and write requests and their blocks.
struct Counter {
    disk: RamDisk,
    reads: Vec<usize>,
    writes: Vec<usize>,
}

impl BlockDevice for Counter {
    fn block_size(&self) -> u32 {
        512
    }
    fn block_count(&self) -> u64 {
        self.disk.block_count()
    }
    fn read(&mut self, b: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.reads.push(buf.len() / 512);
        self.disk.read(b, buf)
    }
    fn write(&mut self, b: u64, buf: &[u8]) -> Result<(), DeviceError> {
        self.writes.push(buf.len() / 512);
        self.disk.write(b, buf)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }
}

#[test]
fn contiguous_clusters_go_in_one_request() {
    let mut disk = RamDisk::new(70_000);
    format(&mut disk, Some(FatKind::Fat32), "").unwrap();
    let mut v = Volume::mount(Counter {
        disk,
        reads: vec![],
        writes: vec![],
    })
    .unwrap();
    assert_eq!(v.cluster_bytes(), 512);
    let data = pattern(64 * 1024, 5);
    let h = v.open("/big", OpenMode::CREATE).unwrap();
    v.write(h, &data).unwrap();
    v.close(h).unwrap();
    // 128 one-sector clusters, allocated in a row: one request (FAT
    // sectors are persisted on the way, but they are not data).
    assert!(v.fs.dev.writes.contains(&128), "{:?}", v.fs.dev.writes);
    v.sync().unwrap();
    let h = v.open("/big", OpenMode::READ).unwrap();
    let mut back = vec![0u8; data.len()];
    v.fs.dev.reads.clear();
    assert_eq!(v.read(h, &mut back).unwrap(), data.len());
    assert_eq!(back, data);
    assert!(v.fs.dev.reads.contains(&128), "{:?}", v.fs.dev.reads);
}

/// `read_with` hands out the same bytes as `read`, piece by piece at
/// their offsets, small pieces from the cache and large ones through the
/// scratch buffer; it reads no more than the scratch buffer holds.
#[test]
fn read_with_gives_what_read_gives() {
    let mut v = fresh(FatKind::Fat32);
    let data = pattern(700_000, 5);
    put(&mut v, "/f", &data);
    for chunk in [1, 512, 1000, 4096, 70_000, 300_000] {
        let h = v.open("/f", OpenMode::READ).unwrap();
        let mut scratch = vec![0u8; chunk];
        let mut got = Vec::new();
        loop {
            let mut piece = vec![0u8; chunk];
            let mut seen = 0;
            let n = v
                .read_with(h, chunk + 5, &mut scratch, |at, bytes| {
                    piece[at..at + bytes.len()].copy_from_slice(bytes);
                    seen += bytes.len();
                })
                .unwrap();
            assert!(n <= chunk && seen == n, "{chunk}: {n} read, {seen} put");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&piece[..n]);
        }
        v.close(h).unwrap();
        assert!(got == data, "{chunk}-byte reads");
    }
}
