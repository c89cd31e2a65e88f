//! Device requests of sequential file I/O: a counting device under a
//! FAT32 volume of 512-byte clusters (the benchmark's worst case: one
//! FAT entry per 512 bytes of data), a 10 MiB file written and read in
//! calls of 1 MiB down to 512 bytes. Each request to a real device is a
//! round trip through the file-system, partition and driver components,
//! so their number is what these tests bound.

use alloc::vec;
use alloc::vec::Vec;

use crate::*;

/// Counts requests and the blocks they move.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
struct Counts {
    reads: usize,
    read_blocks: u64,
    writes: usize,
    write_blocks: u64,
    flushes: usize,
}

impl Counts {
    fn requests(&self) -> usize {
        self.reads + self.writes + self.flushes
    }
}

struct Counting {
    disk: RamDisk,
    n: Counts,
}

impl BlockDevice for Counting {
    fn block_size(&self) -> u32 {
        512
    }
    fn block_count(&self) -> u64 {
        self.disk.block_count()
    }
    fn read(&mut self, b: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.n.reads += 1;
        self.n.read_blocks += buf.len() as u64 / 512;
        self.disk.read(b, buf)
    }
    fn write(&mut self, b: u64, buf: &[u8]) -> Result<(), DeviceError> {
        self.n.writes += 1;
        self.n.write_blocks += buf.len() as u64 / 512;
        self.disk.write(b, buf)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.n.flushes += 1;
        Ok(())
    }
}

const MIB: usize = 1 << 20;
const FILE: usize = 10 * MIB;

/// A fresh 48 MiB FAT32 volume (512-byte clusters) on a counting device.
fn volume() -> Volume<Counting> {
    let mut disk = RamDisk::new(96 * 1024);
    format(&mut disk, Some(FatKind::Fat32), "").unwrap();
    let v = Volume::mount(Counting {
        disk,
        n: Counts::default(),
    })
    .unwrap();
    assert_eq!(v.cluster_bytes(), 512);
    v
}

fn data() -> Vec<u8> {
    (0..FILE)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(7) as u8 ^ (i >> 9) as u8)
        .collect()
}

/// Writes `data` to `path` in calls of `chunk` bytes, closes, syncs:
/// the requests it took.
fn write_file(v: &mut Volume<Counting>, path: &str, data: &[u8], chunk: usize) -> Counts {
    v.fs.dev.n = Counts::default();
    let h = v.open(path, OpenMode::CREATE).unwrap();
    for c in data.chunks(chunk) {
        assert_eq!(v.write(h, c).unwrap(), c.len());
    }
    v.close(h).unwrap();
    v.sync().unwrap();
    v.fs.dev.n
}

/// Reads `path` in calls of `chunk` bytes, checking it against `data`:
/// the requests it took.
fn read_file(v: &mut Volume<Counting>, path: &str, data: &[u8], chunk: usize) -> Counts {
    v.fs.dev.n = Counts::default();
    let h = v.open(path, OpenMode::READ).unwrap();
    let mut buf = vec![0u8; chunk];
    let mut at = 0;
    loop {
        let n = v.read(h, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        assert_eq!(buf[..n], data[at..at + n]);
        at += n;
    }
    assert_eq!(at, data.len());
    v.close(h).unwrap();
    v.fs.dev.n
}

/// A fresh mount of `v`'s device: a cold cache.
fn remount(v: Volume<Counting>) -> Volume<Counting> {
    Volume::mount(v.into_device()).unwrap()
}

/// Sequential I/O of a 10 MiB file: requests (reads + writes + flushes)
/// per pattern, before this crate read ahead, wrote behind and batched
/// its FAT writes, and now (the bounds asserted leave a little room):
///
/// | pattern                          | before | now |
/// |----------------------------------|-------:|----:|
/// | write in 1 MiB calls, sync       |  1,150 |  26 |
/// | the same again (file truncated)  |  1,795 |  20 |
/// | write in 4 KiB calls, sync       |  3,848 |  93 |
/// | write in 512 B calls, sync       | 21,768 |  93 |
/// | read in 1 MiB calls (cold cache) |    172 |  17 |
/// | read in 16 KiB calls             |    801 | 165 |
/// | read in 512 B calls              | 20,641 | 165 |
///
/// Now: a 1 MiB write is one data request (its clusters contiguous), the
/// FAT goes out once at sync as one run per copy (160 sectors), FAT
/// misses read 32 sectors; small reads fill a 64 KiB window, small
/// writes a 128 KiB one.
#[test]
fn sequential_io_requests() {
    let data = data();
    let mut v = volume();
    let w1m = write_file(&mut v, "/a", &data, MIB);
    let w1m_again = write_file(&mut v, "/a", &data, MIB);
    let w4k = write_file(&mut v, "/b", &data, 4096);
    let w512 = write_file(&mut v, "/c", &data, 512);
    let mut v = remount(v);
    let r1m = read_file(&mut v, "/a", &data, MIB);
    let r16k = read_file(&mut v, "/b", &data, 16384);
    let r512 = read_file(&mut v, "/c", &data, 512);
    for (what, n, most) in [
        ("write 1 MiB", w1m, 40),
        ("write 1 MiB again", w1m_again, 40),
        ("write 4 KiB", w4k, 150),
        ("write 512 B", w512, 150),
        ("read 1 MiB", r1m, 30),
        ("read 16 KiB", r16k, 200),
        ("read 512 B", r512, 200),
    ] {
        std::println!("{what}: {} requests: {n:?}", n.requests());
        assert!(n.requests() <= most, "{what}: {n:?}");
    }
    // Every byte went out once (plus 320 FAT sectors and some metadata).
    assert!(w1m.write_blocks < (FILE / 512 + 400) as u64, "{w1m:?}");
    assert!(w4k.write_blocks < (FILE / 512 + 400) as u64, "{w4k:?}");
}

/// Small writes that do not continue one another still land (each
/// turn writes the window out), and reads see what is still only in the
/// write-behind window or in a slot.
#[test]
fn interleaved_small_writes_and_reads() {
    let mut v = volume();
    let a: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 511) as u8).collect();
    let b: Vec<u8> = (0..300_000u32).map(|i| (i * 13 + i / 509) as u8).collect();
    let ha = v.open("/a", OpenMode::CREATE).unwrap();
    let hb = v.open("/b", OpenMode::CREATE).unwrap();
    for (ca, cb) in a.chunks(1000).zip(b.chunks(3000)) {
        v.write(ha, ca).unwrap();
        v.write(hb, cb).unwrap();
    }
    v.close(ha).unwrap();
    v.close(hb).unwrap();
    // Read back before any sync, through both paths.
    for (path, want) in [("/a", &a[..300_000]), ("/b", &b[..])] {
        let len = v.stat(path).unwrap().size as usize;
        let want = &want[..len];
        for chunk in [700, 128 * 1024] {
            let h = v.open(path, OpenMode::READ).unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; chunk];
            loop {
                let n = v.read(h, &mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            v.close(h).unwrap();
            assert!(got == want, "{path} in {chunk}-byte reads");
        }
    }
    // Overwrite the middle of /a in place, small and unaligned, then
    // read it through a fresh mount.
    let h = v.open("/a", OpenMode::READ_WRITE).unwrap();
    v.seek(h, SeekFrom::Start(12_345)).unwrap();
    v.write(h, &[0xEE; 5000]).unwrap();
    v.close(h).unwrap();
    let mut want = a[..v.stat("/a").unwrap().size as usize].to_vec();
    want[12_345..17_345].fill(0xEE);
    let mut v = remount(v);
    let h = v.open("/a", OpenMode::READ).unwrap();
    let mut got = vec![0u8; want.len()];
    assert_eq!(v.read(h, &mut got).unwrap(), want.len());
    assert!(got == want);
}

/// A reader going backwards gets no read-ahead: each 512-byte read of a
/// 1 MiB file reads its one block (not 64 KiB).
#[test]
fn backward_reads_fetch_what_they_need() {
    let data = &data()[..MIB];
    let mut v = volume();
    write_file(&mut v, "/f", data, MIB);
    let mut v = remount(v);
    let h = v.open("/f", OpenMode::READ).unwrap();
    v.fs.dev.n = Counts::default();
    let mut buf = [0u8; 512];
    for k in (0..MIB / 512).rev() {
        v.seek(h, SeekFrom::Start((k * 512) as u64)).unwrap();
        assert_eq!(v.read(h, &mut buf).unwrap(), 512);
        assert!(buf[..] == data[k * 512..(k + 1) * 512]);
    }
    let n = v.fs.dev.n;
    // 2048 data blocks (the read at 0 reads ahead: a file's start counts
    // as sequential), and the FAT sectors of the chain.
    assert!(n.reads <= 2048 + 2, "{n:?}");
    assert!(n.read_blocks <= 2048 + 127 + 32, "{n:?}");
}

/// Extending a file with zeros (truncate up) writes them through the
/// write-behind window: 10 MiB in 128 KiB requests (2,560 of 4 KiB
/// before).
#[test]
fn extending_with_zeros_is_batched() {
    // Garbage where the clusters go: the zeros must be written.
    let mut disk = RamDisk::from_bytes(vec![0xA5; 96 * 1024 * 512]);
    format(&mut disk, Some(FatKind::Fat32), "").unwrap();
    let mut v = Volume::mount(Counting {
        disk,
        n: Counts::default(),
    })
    .unwrap();
    v.fs.dev.n = Counts::default();
    let h = v.open("/z", OpenMode::CREATE).unwrap();
    v.truncate(h, FILE as u64).unwrap();
    v.close(h).unwrap();
    v.sync().unwrap();
    let n = v.fs.dev.n;
    assert!(n.requests() <= 120, "{n:?}");
    let h = v.open("/z", OpenMode::READ).unwrap();
    let mut buf = vec![1u8; MIB];
    for _ in 0..10 {
        assert_eq!(v.read(h, &mut buf).unwrap(), MIB);
        assert!(buf.iter().all(|&b| b == 0));
    }
}
