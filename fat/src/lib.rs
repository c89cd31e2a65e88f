//! A FAT12/16/32 file system with long file names, as pure logic over a
//! [`BlockDevice`] trait: no hardware access, no `unsafe`, built for the
//! host so that `cargo test` drives it against images made by dosfstools
//! and mtools, and for `x86_64-unknown-none`, where the FAT service runs
//! it over a block session.
//!
//! Why our own: `embedded-sdmmc` 0.10 rejects FAT12, creates only 8.3
//! names and cannot rename; `fatfs` 0.3.6 needs nightly (`core_io`) and
//! its master is unreleased. Nothing here is copied from either.
//!
//! - [`Volume::mount`] reads the boot sector into a geometry: the FAT type
//!   by cluster count (Microsoft's rule: below 4085 FAT12, below 65525
//!   FAT16, else FAT32), every BPB field checked against it and the device.
//! - Files through [`Handle`]s ([`Volume::open`], read, write, seek,
//!   truncate, close); directories by path ([`Volume::mkdir`],
//!   [`Volume::rmdir`], [`Volume::read_dir`] / [`Volume::read_dir_at`],
//!   [`Volume::rename`], [`Volume::unlink`], [`Volume::stat`]), each call
//!   complete in itself, so that a server can map one request to one call.
//!   Paths are absolute, `/` separated, already normalised by the caller
//!   (`.` and `..` components are refused); names compare
//!   case-insensitively (Unicode upper case), a short alias (`NAME~1.TXT`)
//!   names its file too. Files are at most 4 GiB - 1 bytes; the open-file
//!   table holds [`MAX_OPEN`] handles; an open file cannot be unlinked or
//!   renamed ([`FsError::Busy`]); rename does not replace ([`FsError::Exists`]).
//! - Long names are stored as UTF-16 LFN entries with the checksum of a
//!   generated unique short name (`NAME~1.TXT`); a name that is already
//!   an upper-case 8.3 name gets no LFN entries.
//! - Time stamps come from outside ([`Volume::set_time`],
//!   [`Volume::set_clock`]; 1980-01-01 until set): creation on create,
//!   modification and access date on every write.
//! - [`format`] makes a fresh volume (mkfs); [`RamDisk`] is a device in
//!   memory.
//!
//! Tests: unit tests per module and in `tests.rs`; `crash_tests.rs`
//! (interruption at every write); `perf_tests.rs` (device requests of
//! sequential I/O); `tests/tools.rs` against dosfstools and mtools
//! (skipped where they are not installed); `tests/fuzz.rs` (102,000
//! hostile images).
//!
//! # Few device requests
//!
//! A device request is a round trip through other components (file
//! system, partition, driver), so the crate makes few and large ones: a
//! large read or write (64 KiB and up) goes straight between the caller's
//! buffer and the device, one request per run of contiguous clusters;
//! smaller reads are served from a read-ahead window that a miss fills
//! with the file's next contiguous sectors (64 KiB), and while a reader
//! goes on through it the next window — twice as large, up to 256 KiB —
//! is read in the background ([`BlockDevice::start_read`]: a device with
//! many requests in flight serves it while the reader is served from the
//! current one, so that the reader rarely waits; a device write to its
//! blocks cancels it); smaller writes collect in a 128 KiB write-behind
//! window written out in one request. FAT sectors stay dirty in the
//! cache until a sync (or eviction) writes them in block order, one
//! request per run and FAT copy; a FAT miss reads 32 sectors.
//! Allocation is next-fit from the last allocated cluster (or FAT32's
//! FSInfo hint), so a file's clusters are contiguous while free space
//! allows. `perf_tests.rs` counts it: a 10 MiB file on FAT32 with
//! 512-byte clusters takes 26 requests to write in 1 MiB calls and sync
//! (1,150 before), 93 in 4 KiB calls (3,848), and 47 to read in 512-byte
//! calls (20,641; 165 with 64 KiB windows only) — with reads in flight,
//! 8 of them waited for.
//!
//! # Write order
//!
//! Blocks go through a bounded write-back cache (256 blocks, least
//! recently used out first) and the two file-data windows. Every dirty
//! block carries a class — data, then FAT sectors changed only in entries
//! of fresh clusters (allocated since a FAT link or directory block last
//! reached the medium, so reachable from nothing there), then other FAT
//! sectors, then directory — and a block reaches the medium only after
//! every dirty block of a lower class has been written and the device
//! flushed (see `cache.rs`), at eviction as at [`Volume::sync`]. A fresh
//! directory cluster is written at once, before the FAT links it. Within
//! the FAT, a new cluster's end mark is on the medium before a link to it
//! from a chain the medium holds (fresh sectors go first; links between
//! fresh clusters may land in any order), a cut chain's new end before its
//! tail is freed, and a FAT12 entry straddling two sectors changes half by
//! half in an order whose half-written value is no cluster number
//! (`fat.rs`).
//! Likewise a new entry's LFN slots land before its short entry, and a
//! deleted entry's short entry before its LFN slots, when they lie in
//! different sectors (`dir.rs`).
//! Freeing runs the other way: unlink, rmdir, truncate and rename first
//! clear (or shrink) the directory entry and sync, then free the clusters.
//! So an interruption at any point leaves at worst lost clusters
//! (allocated, named by no entry) — never an entry naming free or
//! unwritten clusters, never two chains sharing a cluster — in the first
//! FAT, which every reader uses; the copies may differ until the next
//! sync (the cache keeps the first FAT only and writes each of its dirty
//! sectors to every copy). `crash_tests.rs` replays every prefix of a
//! busy session's writes to hold the code to this.
//!
//! One residue, FAT12 only: cutting a chain (truncate) whose new last
//! cluster's entry straddles two sectors (2 entries in 1024) can, if
//! interrupted between the halves, end the chain with an out-of-range
//! value instead of an end mark — fsck.fat cuts the chain there; no byte
//! the entry's size covers is lost. Linking avoids it by choosing the
//! next cluster so that the half-written value is an end mark.
//!
//! # A hostile image
//!
//! Every value read from the medium is checked before use: BPB fields,
//! FAT entries (cluster numbers in range, no free or bad cluster inside a
//! chain), chain lengths (a chain longer than the cluster count loops),
//! directory lengths (at most 65536 entries), file sizes against their
//! chains. A broken image gives [`FsError::Corrupt`], never a panic or an
//! endless walk; arithmetic on disk values is checked or bounded by the
//! geometry. The fuzz test in `tests/fuzz.rs` holds the crate to that.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod bpb;
mod cache;
mod dir;
mod error;
mod fat;
mod file;
mod format;
mod name;
mod volume;

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod perf_tests;
#[cfg(test)]
mod tests;

use alloc::vec;
use alloc::vec::Vec;

pub use bpb::FatKind;
pub use error::{Corruption, DeviceError, FsError};
pub use format::format;
pub use volume::{
    attr, DirCursor, DirEntry, Handle, Metadata, OpenMode, SeekFrom, Volume, MAX_OPEN,
};

/// A disk of 512-byte blocks.
pub trait BlockDevice {
    /// Bytes per block: the crate requires 512 and refuses others with
    /// [`FsError::Unsupported`].
    fn block_size(&self) -> u32;
    /// Blocks on the device.
    fn block_count(&self) -> u64;
    /// Reads `buf.len() / block_size` whole blocks starting at `block`.
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError>;
    /// Writes `buf.len() / block_size` whole blocks starting at `block`.
    fn write(&mut self, block: u64, buf: &[u8]) -> Result<(), DeviceError>;
    /// Returns only when every write before it is on the medium.
    fn flush(&mut self) -> Result<(), DeviceError>;

    /// Starts reading `count` blocks from `block` without waiting for
    /// them (the crate's asynchronous read-ahead) and names the read; the
    /// crate later either takes its data with [`Self::finish_read`] or
    /// drops it with [`Self::cancel_read`] — it cancels every read whose
    /// blocks it writes meanwhile, so the data a finished read gives may
    /// be the blocks' contents at any instant between start and finish.
    /// A device that cannot have requests in flight keeps the default:
    /// nothing starts, and `finish_read` reads then.
    fn start_read(&mut self, block: u64, count: usize) -> Result<ReadId, DeviceError> {
        let _ = (block, count);
        Ok(ReadId(0))
    }

    /// Waits for read `id`, started at `block` for `buf.len() / block_size`
    /// blocks, and puts its data in `buf`. A read the device no longer
    /// knows (it dropped it, or never started it) is done now, as
    /// [`Self::read`].
    fn finish_read(&mut self, id: ReadId, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let _ = id;
        self.read(block, buf)
    }

    /// Forgets read `id`: its data will not be asked for.
    fn cancel_read(&mut self, id: ReadId) {
        let _ = id;
    }
}

/// A read started by [`BlockDevice::start_read`]: the device's name for
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadId(pub u64);

impl<D: BlockDevice + ?Sized> BlockDevice for &mut D {
    fn block_size(&self) -> u32 {
        (**self).block_size()
    }
    fn block_count(&self) -> u64 {
        (**self).block_count()
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        (**self).read(block, buf)
    }
    fn write(&mut self, block: u64, buf: &[u8]) -> Result<(), DeviceError> {
        (**self).write(block, buf)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        (**self).flush()
    }
    fn start_read(&mut self, block: u64, count: usize) -> Result<ReadId, DeviceError> {
        (**self).start_read(block, count)
    }
    fn finish_read(&mut self, id: ReadId, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        (**self).finish_read(id, block, buf)
    }
    fn cancel_read(&mut self, id: ReadId) {
        (**self).cancel_read(id)
    }
}

/// A block device in memory: for tests, and for a RAM disk.
#[derive(Clone, Debug)]
pub struct RamDisk {
    data: Vec<u8>,
}

/// [`DeviceError`] code of a [`RamDisk`] access outside the disk.
pub const RAMDISK_OUT_OF_RANGE: u32 = 1;

impl RamDisk {
    /// A zeroed disk of `blocks` 512-byte blocks.
    pub fn new(blocks: u64) -> RamDisk {
        RamDisk {
            data: vec![0; blocks as usize * 512],
        }
    }

    /// A disk holding `bytes` (cut to whole blocks).
    pub fn from_bytes(mut bytes: Vec<u8>) -> RamDisk {
        bytes.truncate(bytes.len() / 512 * 512);
        RamDisk { data: bytes }
    }

    /// The disk's contents.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The disk's contents, taken.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    fn range(&self, block: u64, len: usize) -> Result<core::ops::Range<usize>, DeviceError> {
        let start = usize::try_from(block)
            .ok()
            .and_then(|b| b.checked_mul(512))
            .ok_or(DeviceError(RAMDISK_OUT_OF_RANGE))?;
        let end = start
            .checked_add(len / 512 * 512)
            .filter(|&e| e <= self.data.len())
            .ok_or(DeviceError(RAMDISK_OUT_OF_RANGE))?;
        Ok(start..end)
    }
}

impl BlockDevice for RamDisk {
    fn block_size(&self) -> u32 {
        512
    }
    fn block_count(&self) -> u64 {
        self.data.len() as u64 / 512
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let r = self.range(block, buf.len())?;
        let n = r.len();
        buf[..n].copy_from_slice(&self.data[r]);
        Ok(())
    }
    fn write(&mut self, block: u64, buf: &[u8]) -> Result<(), DeviceError> {
        let r = self.range(block, buf.len())?;
        let n = r.len();
        self.data[r].copy_from_slice(&buf[..n]);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        Ok(())
    }
}

/// A date and time at FAT's resolution: years 1980–2107, two seconds for
/// modification times, a day for access dates. Fields read from an image
/// are passed on as stored (a corrupt entry may say month 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DateTime {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

impl DateTime {
    /// 1980-01-01 00:00:00, FAT's first instant and the clock's default.
    pub const EPOCH: DateTime = DateTime {
        year: 1980,
        month: 1,
        day: 1,
        hour: 0,
        minute: 0,
        second: 0,
    };

    /// The FAT date and time words and the creation-time hundredths byte
    /// (which carries the odd second), out-of-range fields clamped.
    pub(crate) fn to_fat(self) -> (u16, u16, u8) {
        let year = self.year.clamp(1980, 2107) - 1980;
        let month = u16::from(self.month.clamp(1, 12));
        let day = u16::from(self.day.clamp(1, 31));
        let hour = u16::from(self.hour.min(23));
        let minute = u16::from(self.minute.min(59));
        let second = self.second.min(59);
        let date = (year << 9) | (month << 5) | day;
        let time = (hour << 11) | (minute << 5) | u16::from(second / 2);
        (date, time, (second % 2) * 100)
    }

    /// The instant FAT words `date` and `time` (and `hundredths`) name.
    pub(crate) fn from_fat(date: u16, time: u16, hundredths: u8) -> DateTime {
        DateTime {
            year: 1980 + (date >> 9),
            month: ((date >> 5) & 0xF) as u8,
            day: (date & 0x1F) as u8,
            hour: (time >> 11) as u8,
            minute: ((time >> 5) & 0x3F) as u8,
            second: ((time & 0x1F) * 2) as u8 + (hundredths / 100).min(1),
        }
    }
}

impl Default for DateTime {
    fn default() -> Self {
        DateTime::EPOCH
    }
}
