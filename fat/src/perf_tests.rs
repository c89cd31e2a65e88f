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
    std::println!("write 1 MiB: {w1m:?} = {}", w1m.requests());
    std::println!("rewrite 1 MiB: {w1m_again:?}");
    std::println!("write 4 KiB: {w4k:?}");
    std::println!("write 512 B: {w512:?}");
    std::println!("read 1 MiB: {r1m:?}");
    std::println!("read 16 KiB: {r16k:?}");
    std::println!("read 512 B: {r512:?}");
}
