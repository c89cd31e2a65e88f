//! The mounted volume: handles, path operations on directories, and the
//! order rules of the crate docs (entry before chain when freeing, with a
//! sync between).

use alloc::string::String;
use alloc::vec::Vec;

use crate::bpb::{self, SECTOR};
use crate::cache::{Cache, FatLayout};
use crate::dir::{self, components, DirRef, Entry, Node, ATTR_DIR};
use crate::error::FsError;
use crate::fat::Fs;
use crate::name;
use crate::{BlockDevice, DateTime};

/// Blocks the cache holds (128 KiB: room for the FAT sectors of a
/// 10 MiB file on a FAT32 volume of 512-byte clusters).
const CACHE_BLOCKS: usize = 256;
/// Files open at once.
pub const MAX_OPEN: usize = 64;

/// Attribute bits of [`Metadata::attributes`].
pub mod attr {
    pub const READ_ONLY: u8 = 0x01;
    pub const HIDDEN: u8 = 0x02;
    pub const SYSTEM: u8 = 0x04;
    pub const VOLUME_LABEL: u8 = 0x08;
    pub const DIRECTORY: u8 = 0x10;
    pub const ARCHIVE: u8 = 0x20;
}

/// How to open a file, as `std::fs::OpenOptions`: `append` implies
/// write; `create`, `create_new` and `truncate` need write or append.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenMode {
    pub read: bool,
    pub write: bool,
    pub append: bool,
    /// Create the file if it does not exist.
    pub create: bool,
    /// Create the file; [`FsError::Exists`] if it exists.
    pub create_new: bool,
    /// Cut the file to 0 bytes.
    pub truncate: bool,
}

impl OpenMode {
    /// Read an existing file.
    pub const READ: OpenMode = OpenMode {
        read: true,
        write: false,
        append: false,
        create: false,
        create_new: false,
        truncate: false,
    };
    /// Write a file from scratch: create or truncate (`File::create`).
    pub const CREATE: OpenMode = OpenMode {
        read: false,
        write: true,
        append: false,
        create: true,
        create_new: false,
        truncate: true,
    };
    /// Append to a file, creating it if needed.
    pub const APPEND: OpenMode = OpenMode {
        read: false,
        write: true,
        append: true,
        create: true,
        create_new: false,
        truncate: false,
    };
    /// Read and write an existing file in place.
    pub const READ_WRITE: OpenMode = OpenMode {
        read: true,
        write: true,
        append: false,
        create: false,
        create_new: false,
        truncate: false,
    };

    pub(crate) fn writes(&self) -> bool {
        self.write || self.append
    }
}

/// Where [`Volume::seek`] goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekFrom {
    Start(u64),
    End(i64),
    Current(i64),
}

/// An open file: a slot index and that slot's generation, so that a
/// stale handle is [`FsError::BadHandle`], not another file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Handle(pub u32);

/// What [`Volume::stat`] tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    pub size: u64,
    pub is_dir: bool,
    /// [`attr`] bits as stored.
    pub attributes: u8,
    pub created: DateTime,
    pub modified: DateTime,
    /// The day only (FAT stores no access time).
    pub accessed: DateTime,
}

impl Metadata {
    pub(crate) fn of(raw: &[u8; 32]) -> Metadata {
        let w = |o: usize| u16::from_le_bytes([raw[o], raw[o + 1]]);
        let attributes = raw[11];
        let is_dir = attributes & ATTR_DIR != 0;
        Metadata {
            size: if is_dir {
                0
            } else {
                u64::from(u32::from_le_bytes([raw[28], raw[29], raw[30], raw[31]]))
            },
            is_dir,
            attributes,
            created: DateTime::from_fat(w(16), w(14), raw[13]),
            modified: DateTime::from_fat(w(24), w(22), 0),
            accessed: DateTime::from_fat(w(18), 0, 0),
        }
    }

    fn root() -> Metadata {
        Metadata {
            size: 0,
            is_dir: true,
            attributes: attr::DIRECTORY,
            created: DateTime::EPOCH,
            modified: DateTime::EPOCH,
            accessed: DateTime::EPOCH,
        }
    }
}

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The long name if there is one, else the 8.3 name.
    pub name: String,
    pub metadata: Metadata,
}

/// Where a listing continues: a slot index, valid as long as the
/// directory does not change (after a change a listing may skip or
/// repeat an entry, never fail).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirCursor(pub u32);

/// Where time stamps come from.
#[derive(Clone, Copy)]
enum Clock {
    Fixed(DateTime),
    Call(fn() -> DateTime),
}

/// The state of an open file (copied out and back around each operation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenFile {
    /// Its short entry's slot: the file's identity while open.
    pub entry: dir::Pos,
    pub first: u32,
    pub size: u32,
    pub pos: u64,
    pub mode: OpenMode,
    /// The last cluster reached: its index in the chain and number.
    pub cursor: Option<(u32, u32)>,
    /// Where the last look ahead along the chain ended (a read-ahead
    /// window's last cluster), in the same form: the next one starts
    /// there. Forgotten with the cursor when the chain changes.
    pub ahead: Option<(u32, u32)>,
    /// A stretch of the file the looks ahead found in consecutive
    /// sectors: reads in it find their sectors without a step along the
    /// chain, and take many at once. Forgotten with the cursor.
    pub span: Option<Span>,
    /// Where the last read on this handle ended: a read starting there
    /// (or at 0) is sequential and reads ahead in full.
    pub read_end: u64,
}

/// File bytes from `pos` (a sector's start) on, `blocks` sectors of
/// them, lie in the consecutive sectors from `sector`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub pos: u64,
    pub sector: u64,
    pub blocks: u64,
}

impl Span {
    /// The sector of file byte `pos` and the sectors from there to the
    /// span's end, if the span holds it.
    pub fn at(&self, pos: u64) -> Option<(u64, u64)> {
        let k = pos.checked_sub(self.pos)? / SECTOR as u64;
        (k < self.blocks).then(|| (self.sector + k, self.blocks - k))
    }
}

/// A mounted FAT volume.
pub struct Volume<D: BlockDevice> {
    pub(crate) fs: Fs<D>,
    pub(crate) files: Vec<Option<OpenFile>>,
    pub(crate) gens: Vec<u16>,
    clock: Clock,
}

impl<D: BlockDevice> Volume<D> {
    /// Mounts the volume on `dev`: its boot sector checked, nothing else
    /// read yet.
    pub fn mount(mut dev: D) -> Result<Self, FsError> {
        if dev.block_size() as usize != SECTOR {
            return Err(FsError::Unsupported("block size other than 512"));
        }
        let mut boot = [0u8; SECTOR];
        dev.read(0, &mut boot)?;
        let geo = bpb::parse(&boot, dev.block_count())?;
        // FAT32's FSInfo says where free clusters start: a hint, used
        // only when its signatures hold and it names a cluster. Its free
        // count is not trusted (it is recounted when asked for).
        let mut next_free = 2;
        if let Some(s) = geo.fsinfo {
            let mut info = [0u8; SECTOR];
            dev.read(s, &mut info)?;
            let word =
                |o: usize| u32::from_le_bytes([info[o], info[o + 1], info[o + 2], info[o + 3]]);
            if word(0) == 0x4161_5252 && word(484) == 0x6141_7272 && geo.is_cluster(word(492)) {
                next_free = word(492);
            }
        }
        Ok(Volume {
            fs: Fs {
                dev,
                cache: Cache::new(
                    CACHE_BLOCKS,
                    Some(FatLayout {
                        start: geo.fat_start,
                        len: geo.fat_sectors,
                        copies: geo.fats,
                    }),
                ),
                geo,
                free: None,
                next_free,
                changed: false,
                fresh: Vec::new(),
                fresh_epoch: 0,
            },
            files: Vec::new(),
            gens: Vec::new(),
            clock: Clock::Fixed(DateTime::EPOCH),
        })
    }

    /// The FAT type.
    pub fn kind(&self) -> bpb::FatKind {
        self.fs.geo.kind
    }

    /// Bytes per cluster.
    pub fn cluster_bytes(&self) -> u32 {
        self.fs.geo.cluster_bytes()
    }

    /// Data clusters on the volume.
    pub fn cluster_count(&self) -> u32 {
        self.fs.geo.clusters
    }

    /// Free clusters (the first call counts them in the FAT).
    pub fn free_clusters(&mut self) -> Result<u32, FsError> {
        self.fs.free_clusters()
    }

    /// Time stamps from now on say `now`.
    pub fn set_time(&mut self, now: DateTime) {
        self.clock = Clock::Fixed(now);
    }

    /// Time stamps from now on come from `clock` (an RTC's reading).
    pub fn set_clock(&mut self, clock: fn() -> DateTime) {
        self.clock = Clock::Call(clock);
    }

    pub(crate) fn now(&self) -> DateTime {
        match self.clock {
            Clock::Fixed(t) => t,
            Clock::Call(f) => f(),
        }
    }

    /// Writes back every dirty block (data, FAT, directories, in that
    /// order with a device flush between) and flushes the device.
    pub fn sync(&mut self) -> Result<(), FsError> {
        self.fs.write_fsinfo()?;
        self.fs.cache.sync(&mut self.fs.dev)
    }

    /// The device back, after a sync whose error is dropped: call
    /// [`Volume::sync`] first to see it. Open handles are forgotten.
    pub fn into_device(mut self) -> D {
        let _ = self.sync();
        self.fs.dev
    }

    #[cfg(test)]
    pub(crate) fn into_fs(self) -> Fs<D> {
        self.fs
    }

    /// What `path` is.
    pub fn stat(&mut self, path: &str) -> Result<Metadata, FsError> {
        match self.fs.resolve(path)? {
            Node::Root => Ok(Metadata::root()),
            Node::Entry { entry, .. } => Ok(Metadata::of(&entry.raw)),
        }
    }

    /// The directory `path` names.
    fn dir(&mut self, path: &str) -> Result<DirRef, FsError> {
        match self.fs.resolve(path)? {
            Node::Root => Ok(self.fs.root()),
            Node::Entry { entry, .. } if entry.is_dir() => self.fs.dir_of(&entry),
            Node::Entry { .. } => Err(FsError::NotADirectory),
        }
    }

    /// The `index`th entry of directory `path` (no `.`, `..` or volume
    /// labels); `None` past the last. Each call walks the directory from
    /// its start (listing a directory of n entries this way reads n²/2
    /// slots): [`Volume::read_dir_at`] continues where the last call ended.
    pub fn read_dir(&mut self, path: &str, index: usize) -> Result<Option<DirEntry>, FsError> {
        let dir = self.dir(path)?;
        let mut w = self.fs.walker(dir)?;
        let mut seen = 0;
        while let Some(e) = self.fs.next_entry(&mut w)? {
            if e.is_label() || e.is_dot() {
                continue;
            }
            if seen == index {
                return Ok(Some(DirEntry {
                    metadata: Metadata::of(&e.raw),
                    name: e.name(),
                }));
            }
            seen += 1;
        }
        Ok(None)
    }

    /// The first entry of directory `path` at or after `cursor` (start
    /// with `DirCursor::default()`), and the cursor after it.
    pub fn read_dir_at(
        &mut self,
        path: &str,
        cursor: DirCursor,
    ) -> Result<Option<(DirEntry, DirCursor)>, FsError> {
        let dir = self.dir(path)?;
        Ok(self.fs.list_from(dir, cursor.0)?.map(|e| {
            let next = DirCursor(e.next_index);
            (
                DirEntry {
                    metadata: Metadata::of(&e.raw),
                    name: e.name(),
                },
                next,
            )
        }))
    }

    /// The parent directory of `path` and its last component, checked as
    /// a new name.
    pub(crate) fn parent_of<'p>(
        &mut self,
        path: &'p str,
    ) -> Result<(DirRef, &'p str, Vec<u16>), FsError> {
        let parts = components(path)?;
        let Some((last, up)) = parts.split_last() else {
            return Err(FsError::InvalidArgument);
        };
        let units = name::validate(last)?;
        Ok((self.fs.dir_at(up)?, last, units))
    }

    /// Adds entry `raw` (its short name filled in here) for `name` to
    /// `dir`; returns its short slot.
    pub(crate) fn add_entry(
        &mut self,
        dir: DirRef,
        name: &str,
        units: &[u16],
        mut raw: [u8; 32],
    ) -> Result<dir::Pos, FsError> {
        let (short, lfn) = self.fs.short_for(dir, name)?;
        raw[..11].copy_from_slice(&short);
        raw[12] = 0;
        let set = dir::entry_set(units, lfn, raw);
        let slots = self.fs.reserve(dir, set.len())?;
        self.fs.write_set(&slots, &set)?;
        Ok(slots[slots.len() - 1])
    }

    /// Makes directory `path`, with its `.` and `..` entries.
    pub fn mkdir(&mut self, path: &str) -> Result<(), FsError> {
        let (parent, last, units) = self.parent_of(path)?;
        if self.fs.find(parent, last)?.is_some() {
            return Err(FsError::Exists);
        }
        let now = self.now();
        // Room in the parent first (it may grow), then the new cluster.
        let (short, lfn) = self.fs.short_for(parent, last)?;
        let mut raw = dir::short_entry(&short, ATTR_DIR, 0, 0, now);
        let set_len = dir::entry_set(&units, lfn, raw).len();
        let slots = self.fs.reserve(parent, set_len)?;
        let c = self.fs.find_free()?;
        // `..` names the root as cluster 0, on FAT32 too.
        let up = match parent {
            DirRef::Chain(p) if parent != self.fs.root() => p,
            _ => 0,
        };
        let mut first = [0u8; SECTOR];
        first[..32].copy_from_slice(&dir::short_entry(b".          ", ATTR_DIR, c, 0, now));
        first[32..64].copy_from_slice(&dir::short_entry(b"..         ", ATTR_DIR, up, 0, now));
        self.fs.write_fresh(c, &first)?;
        self.fs.claim(c, None)?;
        dir::set_cluster(&mut raw, c);
        self.fs
            .write_set(&slots, &dir::entry_set(&units, lfn, raw))?;
        Ok(())
    }

    /// Whether a handle is open on the entry at `pos`.
    fn is_open(&self, pos: dir::Pos) -> bool {
        self.files.iter().flatten().any(|f| f.entry == pos)
    }

    /// Removes empty directory `path`.
    pub fn rmdir(&mut self, path: &str) -> Result<(), FsError> {
        let Node::Entry { entry, .. } = self.fs.resolve(path)? else {
            return Err(FsError::InvalidArgument);
        };
        if !entry.is_dir() {
            return Err(FsError::NotADirectory);
        }
        let d = self.fs.dir_of(&entry)?;
        if self.fs.list_from(d, 0)?.is_some() {
            return Err(FsError::DirectoryNotEmpty);
        }
        self.remove(&entry)
    }

    /// Removes file `path`; refused while it is open.
    pub fn unlink(&mut self, path: &str) -> Result<(), FsError> {
        let Node::Entry { entry, .. } = self.fs.resolve(path)? else {
            return Err(FsError::IsADirectory);
        };
        if entry.is_dir() {
            return Err(FsError::IsADirectory);
        }
        if self.is_open(entry.pos()) {
            return Err(FsError::Busy);
        }
        self.remove(&entry)
    }

    /// Clears `entry`, syncs, then frees its chain (the crate's order).
    fn remove(&mut self, entry: &Entry) -> Result<(), FsError> {
        self.fs.delete_entry(entry)?;
        self.sync()?;
        let c = entry.cluster(self.kind());
        if c != 0 {
            if !self.fs.geo.is_cluster(c) {
                return Err(crate::Corruption::ClusterOutOfRange { at: 0, value: c }.into());
            }
            self.fs.free_chain(c)?;
        }
        Ok(())
    }

    /// Renames (moves) `from` to `to`, across directories too. An
    /// existing `to` is [`FsError::Exists`] (no replacing), unless it is
    /// `from` itself under another case. Open files and moving a
    /// directory into itself are refused. The old entry is cleared and
    /// synced before the new one is written: an interruption loses the
    /// file's name (its clusters are lost, for fsck), never links it twice.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        let Node::Entry {
            parent: fparent,
            entry,
        } = self.fs.resolve(from)?
        else {
            return Err(FsError::InvalidArgument);
        };
        let (tparent, last, units) = self.parent_of(to)?;
        if let Some(x) = self.fs.find(tparent, last)? {
            if x.pos() != entry.pos() {
                return Err(FsError::Exists);
            }
            if x.name() == last {
                return Ok(());
            }
        } else if entry.is_dir() {
            let moved = entry.cluster(self.kind());
            if self.fs.is_within(tparent, moved)? {
                return Err(FsError::InvalidArgument);
            }
        }
        if self.is_open(entry.pos()) {
            return Err(FsError::Busy);
        }
        let (short, lfn) = self.fs.short_for(tparent, last)?;
        let mut raw = entry.raw;
        raw[..11].copy_from_slice(&short);
        raw[12] = 0;
        let set = dir::entry_set(&units, lfn, raw);
        let slots = self.fs.reserve(tparent, set.len())?;
        self.fs.delete_entry(&entry)?;
        self.sync()?;
        self.fs.write_set(&slots, &set)?;
        if entry.is_dir() && fparent != tparent {
            let up = match tparent {
                DirRef::Chain(p) if tparent != self.fs.root() => p,
                _ => 0,
            };
            let d = self.fs.dir_of(&entry)?;
            let mut w = self.fs.walker(d)?;
            while let Some(e) = self.fs.next_entry(&mut w)? {
                if &e.raw[..11] == b"..         " {
                    let mut raw = e.raw;
                    dir::set_cluster(&mut raw, up);
                    self.fs.write_slot(e.pos(), &raw)?;
                    break;
                }
            }
        }
        Ok(())
    }
}
