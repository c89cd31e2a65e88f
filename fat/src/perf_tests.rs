//! Device requests of sequential file I/O: a counting device under a
//! FAT32 volume of 512-byte clusters (the benchmark's worst case: one
//! FAT entry per 512 bytes of data), a 10 MiB file written and read in
//! calls of 1 MiB down to 512 bytes. Each request to a real device is a
//! round trip through the file-system, partition and driver components,
//! so their number is what these tests bound — and, with a device that
//! has reads in flight, how many of them the reader waits for.

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
    /// Reads started in the background (each a request too).
    started: usize,
    started_blocks: u64,
    /// Started reads whose data was taken, and those dropped.
    finished: usize,
    cancelled: usize,
    /// The most reads in flight at once.
    most_in_flight: usize,
}

impl Counts {
    fn requests(&self) -> usize {
        self.reads + self.writes + self.flushes + self.started
    }
}

/// A read in flight: its name, first block and data — taken when it
/// started, the worst case for a write that comes before its finish.
struct InFlight {
    id: u64,
    block: u64,
    data: Vec<u8>,
}

struct Counting {
    disk: RamDisk,
    n: Counts,
    /// Reads in flight; `None`: a device without them (the trait's
    /// defaults: every read waited for).
    in_flight: Option<Vec<InFlight>>,
    ids: u64,
}

impl Counting {
    fn new(disk: RamDisk, asynchronous: bool) -> Counting {
        Counting {
            disk,
            n: Counts::default(),
            in_flight: asynchronous.then(Vec::new),
            ids: 0,
        }
    }
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
    fn start_read(&mut self, block: u64, count: usize) -> Result<ReadId, DeviceError> {
        let Some(reads) = &mut self.in_flight else {
            return Ok(ReadId(0));
        };
        let mut data = vec![0; count * 512];
        self.disk.read(block, &mut data)?;
        self.ids += 1;
        reads.push(InFlight {
            id: self.ids,
            block,
            data,
        });
        self.n.started += 1;
        self.n.started_blocks += count as u64;
        self.n.most_in_flight = self.n.most_in_flight.max(reads.len());
        Ok(ReadId(self.ids))
    }
    fn finish_read(&mut self, id: ReadId, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let Some(reads) = &mut self.in_flight else {
            return self.read(block, buf);
        };
        let i = reads
            .iter()
            .position(|r| r.id == id.0)
            .expect("a read in flight");
        let r = reads.swap_remove(i);
        assert_eq!((r.block, r.data.len()), (block, buf.len()));
        buf.copy_from_slice(&r.data);
        self.n.finished += 1;
        Ok(())
    }
    fn cancel_read(&mut self, id: ReadId) {
        if let Some(reads) = &mut self.in_flight {
            let i = reads
                .iter()
                .position(|r| r.id == id.0)
                .expect("a read in flight");
            reads.swap_remove(i);
            self.n.cancelled += 1;
        }
    }
}

const MIB: usize = 1 << 20;
const FILE: usize = 10 * MIB;

/// A fresh 48 MiB FAT32 volume (512-byte clusters) on a counting device
/// without reads in flight.
fn volume() -> Volume<Counting> {
    volume_on(false)
}

/// The same, on a counting device with reads in flight if
/// `asynchronous`.
fn volume_on(asynchronous: bool) -> Volume<Counting> {
    let mut disk = RamDisk::new(96 * 1024);
    format(&mut disk, Some(FatKind::Fat32), "").unwrap();
    let v = Volume::mount(Counting::new(disk, asynchronous)).unwrap();
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

/// The same device with reads in flight (`asynchronous`) or without.
fn remount_as(v: Volume<Counting>, asynchronous: bool) -> Volume<Counting> {
    let dev = v.into_device();
    Volume::mount(Counting::new(dev.disk, asynchronous)).unwrap()
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
/// | read in 16 KiB calls             |    801 |  47 |
/// | read in 512 B calls              | 20,641 |  47 |
///
/// Now: a 1 MiB write is one data request (its clusters contiguous), the
/// FAT goes out once at sync as one run per copy (160 sectors), FAT
/// misses read 32 sectors; small reads fill a window of 64 KiB, then
/// (the reader going on) of 128 KiB and then 256 KiB (165 requests with
/// 64 KiB windows only), small writes a 128 KiB one.
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
        ("read 16 KiB", r16k, 60),
        ("read 512 B", r512, 60),
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
    let mut v = Volume::mount(Counting::new(disk, false)).unwrap();
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

/// With a device that has reads in flight, a sequential reader waits
/// for the device only at its first window (and at FAT misses): every
/// window after it was started in the background while the reader was
/// in the one before, read once, and taken — one in flight at a time.
#[test]
fn sequential_reads_wait_only_for_the_first_window() {
    let data = data();
    let mut v = volume();
    write_file(&mut v, "/a", &data, MIB);
    for chunk in [512, 4096, 16384] {
        v = remount_as(v, true);
        let n = read_file(&mut v, "/a", &data, chunk);
        std::println!("read {chunk} B with reads in flight: {n:?}");
        // Waited for: the first window, 6 FAT misses of 32 sectors (the
        // file's 160 FAT sectors, not aligned on 32), the root directory.
        assert!(n.reads <= 8, "{chunk}: {n:?}");
        // After the first window of 64 KiB, windows of 128 KiB and then
        // 256 KiB in the background: 10 MiB in 42.
        assert!(n.started >= 40 && n.started <= 42, "{chunk}: {n:?}");
        assert_eq!((n.finished, n.cancelled), (n.started, 0), "{chunk}: {n:?}");
        assert_eq!(n.most_in_flight, 1, "{chunk}: {n:?}");
        // No data block read twice.
        let fat_and_dir = 6 * 32 + 8;
        assert!(n.read_blocks + n.started_blocks <= (FILE / 512 + fat_and_dir) as u64);
    }
    // The same reads on a device without reads in flight: the same
    // windows, each waited for.
    let mut v = remount_as(v, false);
    let n = read_file(&mut v, "/a", &data, 512);
    assert!(n.reads >= 48 && n.reads <= 50 && n.started == 0, "{n:?}");
}

/// A write to blocks of the window in flight cancels it: whether it goes
/// to the device at once (64 KiB and more) or through the write-behind
/// window and a sync, the reader then gets the new bytes, never the
/// window's (which the device read before the write). Bytes still in the
/// write-behind window are read from there.
#[test]
fn writes_cancel_the_window_in_flight() {
    let old = &data()[..MIB];
    let mut v = volume();
    write_file(&mut v, "/f", old, MIB);
    // (where, how many bytes, sync after the write)
    let cases: [(usize, usize, bool); 3] = [
        (100_000, 5000, true),          // small, written out by the sync
        (70 * 1024, 128 * 1024, false), // large: straight to the device
        (90_000, 3000, false),          // small, still in the write-behind window
    ];
    for (at, len, sync) in cases {
        v = remount_as(v, true);
        let mut want = old.to_vec();
        let r = v.open("/f", OpenMode::READ).unwrap();
        let w = v.open("/f", OpenMode::READ_WRITE).unwrap();
        let mut got = vec![0u8; MIB];
        // Two reads: the first fills the window of 64 KiB, the second
        // (the reader goes on) starts the next one, 64..192 KiB.
        assert_eq!(v.read(r, &mut got[..512]).unwrap(), 512);
        assert_eq!(v.read(r, &mut got[512..1024]).unwrap(), 512);
        assert_eq!(v.fs.dev.n.started, 1);
        v.seek(w, SeekFrom::Start(at as u64)).unwrap();
        let new = vec![0xEE; len];
        assert_eq!(v.write(w, &new).unwrap(), len);
        want[at..at + len].copy_from_slice(&new);
        if sync {
            v.sync().unwrap();
        }
        if sync || len >= 64 * 1024 {
            assert_eq!(v.fs.dev.n.cancelled, 1, "{at}+{len}");
        }
        let mut k = 1024;
        while k < MIB {
            let n = v.read(r, &mut got[k..(k + 512).min(MIB)]).unwrap();
            assert!(n > 0);
            k += n;
        }
        assert!(got == want, "{at}+{len}: stale bytes read");
        v.close(r).unwrap();
        v.close(w).unwrap();
        // Back to the old contents for the next case.
        let w = v.open("/f", OpenMode::READ_WRITE).unwrap();
        assert_eq!(v.write(w, old).unwrap(), MIB);
        v.close(w).unwrap();
    }
}

/// Only a reader that goes on where it left off reads ahead: one going
/// backwards starts nothing; one that jumps elsewhere has the window in
/// flight cancelled at its next miss.
#[test]
fn readers_elsewhere_start_no_read_ahead() {
    let data = &data()[..MIB];
    let mut v = volume();
    write_file(&mut v, "/f", data, MIB);
    let mut v = remount_as(v, true);
    let h = v.open("/f", OpenMode::READ).unwrap();
    let mut buf = [0u8; 512];
    for k in (0..MIB / 512).rev().step_by(7) {
        v.seek(h, SeekFrom::Start((k * 512) as u64)).unwrap();
        assert_eq!(v.read(h, &mut buf).unwrap(), 512);
        assert!(buf[..] == data[k * 512..(k + 1) * 512]);
    }
    assert_eq!(v.fs.dev.n.started, 0, "{:?}", v.fs.dev.n);
    v.seek(h, SeekFrom::Start(0)).unwrap();
    for k in 0..2 {
        assert_eq!(v.read(h, &mut buf).unwrap(), 512);
        assert!(buf[..] == data[k * 512..(k + 1) * 512]);
    }
    assert_eq!(v.fs.dev.n.started, 1, "{:?}", v.fs.dev.n);
    v.seek(h, SeekFrom::Start(700 * 1024)).unwrap();
    assert_eq!(v.read(h, &mut buf).unwrap(), 512);
    assert!(buf[..] == data[700 * 1024..700 * 1024 + 512]);
    assert_eq!(v.fs.dev.n.cancelled, 1, "{:?}", v.fs.dev.n);
    v.close(h).unwrap();
}

/// A reader takes many sectors at once where its read-ahead found the
/// file contiguous (a span): when another handle cuts the file short and
/// writes the rest anew in other, scattered clusters, the reader follows
/// the new chain, never the sectors its span named.
#[test]
fn a_changed_chain_is_not_read_through_an_old_span() {
    const KEPT: usize = 8192;
    let all = data();
    let old = &all[..300 * 1024];
    let mut new = all[MIB..MIB + old.len()].to_vec();
    new[..KEPT].copy_from_slice(&old[..KEPT]);
    let mut v = volume();
    write_file(&mut v, "/f", old, MIB);
    let mut v = remount_as(v, true);
    let r = v.open("/f", OpenMode::READ).unwrap();
    let mut got = vec![0u8; old.len()];
    for k in 0..4 {
        let at = k * 4096;
        assert_eq!(v.read(r, &mut got[at..at + 4096]).unwrap(), 4096);
    }
    assert!(got[..16384] == old[..16384]);
    // Cut to 8 KiB (the first cluster stays), then the rest in 1000-byte
    // writes, each followed by one to another file: scattered clusters.
    let w = v.open("/f", OpenMode::READ_WRITE).unwrap();
    v.truncate(w, KEPT as u64).unwrap();
    v.seek(w, SeekFrom::Start(KEPT as u64)).unwrap();
    let g = v.open("/g", OpenMode::CREATE).unwrap();
    for c in new[KEPT..].chunks(1000) {
        assert_eq!(v.write(w, c).unwrap(), c.len());
        assert_eq!(v.write(g, &[7; 1000]).unwrap(), 1000);
    }
    v.close(w).unwrap();
    v.close(g).unwrap();
    let mut at = 16384;
    while at < new.len() {
        let n = v.read(r, &mut got[at..(at + 4096).min(new.len())]).unwrap();
        assert!(n > 0);
        at += n;
    }
    assert!(got[16384..] == new[16384..], "read through the old chain");
    v.close(r).unwrap();
}
