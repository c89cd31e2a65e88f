//! Files for components: what a Rust programmer expects from `std::fs`,
//! over a File system session (`session::fs`, whose module doc is the
//! wire protocol).
//!
//! ```ignore
//! // SAFETY: the 2 MiB at 0x60_0000_0000 are used by nothing else.
//! let fs = unsafe { Fs::connect(slots, 0x60_0000_0000) }?;
//! fs.create_dir("/logs")?;
//! fs.set_current_dir("/logs")?;
//! let mut f = fs.create("today.txt")?;          // relative to the current directory
//! f.write_all(b"hello\n")?;
//! for entry in fs.read_dir(".")? {
//!     let entry = entry?;
//!     println!("{} {}", entry.name, entry.metadata.len());
//! }
//! ```
//!
//! Paths: absolute, or relative to the current directory
//! ([`Fs::set_current_dir`]); `.` and `..` are resolved here, so the
//! service only sees absolute, normalized paths. Errors are
//! [`session::fs::Error`] values (`Display` says what went wrong).
//! Data crosses once between the caller's buffer and the session's I/O
//! buffer, which the service reads and writes in place.
//!
//! **Read-ahead.** A read smaller than [`DIRECT`] asks the service for
//! [`READ_AHEAD`] bytes and keeps the rest in the `File`; the next small
//! reads are served from there without a call (each call is a switch of
//! address spaces, which under TCG flushes the emulator's whole TLB). The
//! kept bytes are used only while the volume's write generation
//! (`session::fs`, "The write generation": a word the service updates in
//! every session's buffer before it answers a request that may change
//! anything) is the one read before they were fetched, so a write through
//! any session or handle is seen by the next read, as without the
//! read-ahead. The service's position of the file runs ahead of the
//! reader's by the kept bytes; a write, seek or truncate through the same
//! `File` first moves it back (one `SEEK`) and drops them.

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use abi::caddr::own;
use abi::map::{Cache, MapAttr};
use abi::MsgInfo;
use interfaces::child;

use crate::mmio::Region;
use crate::session::fs::{self as proto, FileSystem, Stat, Time};
use crate::session::{self, Donor, Session};

pub use crate::session::fs::Error;

/// Results of file operations.
pub type Result<T> = core::result::Result<T, Error>;

/// Own slots a connection needs: the session, the donation's block and
/// table, the I/O buffer's frame.
#[derive(Clone, Copy, Debug)]
pub struct Slots {
    /// The session's capability.
    pub session: u32,
    /// The donation's untyped block.
    pub donor_block: u32,
    /// The donation's capability table.
    pub donor_table: u32,
    /// The I/O buffer's frame.
    pub frame: u32,
}

/// A connection to a file system (a File system session and its I/O
/// buffer), and the current directory.
pub struct Fs {
    session: Session<FileSystem>,
    buffer: Region,
    cwd: RefCell<String>,
    slots: Slots,
    va: u64,
}

/// What [`Fs::metadata`] tells about a file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata(Stat);

impl Metadata {
    /// Bytes (0 for a directory).
    pub fn len(&self) -> u64 {
        self.0.size
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.size == 0
    }

    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.0.is_dir
    }

    /// Whether it is a file.
    pub fn is_file(&self) -> bool {
        !self.0.is_dir
    }

    /// When it was last written.
    pub fn modified(&self) -> Time {
        self.0.modified
    }

    /// When it was made.
    pub fn created(&self) -> Time {
        self.0.created
    }

    /// FAT attribute bits.
    pub fn attributes(&self) -> u8 {
        self.0.attributes
    }
}

/// An entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Its long name (or 8.3 name).
    pub name: String,
    /// What [`Fs::metadata`] would tell.
    pub metadata: Metadata,
}

/// How to open a file, as `std::fs::OpenOptions`.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptions(u64);

impl OpenOptions {
    /// Nothing set: set at least read or write.
    pub fn new() -> OpenOptions {
        OpenOptions(0)
    }

    fn flag(self, bit: u64, on: bool) -> OpenOptions {
        OpenOptions(if on { self.0 | bit } else { self.0 & !bit })
    }

    /// Read access.
    pub fn read(self, on: bool) -> OpenOptions {
        self.flag(proto::mode::READ, on)
    }

    /// Write access.
    pub fn write(self, on: bool) -> OpenOptions {
        self.flag(proto::mode::WRITE, on)
    }

    /// Writes go to the end.
    pub fn append(self, on: bool) -> OpenOptions {
        self.flag(proto::mode::APPEND, on)
    }

    /// Create the file if missing.
    pub fn create(self, on: bool) -> OpenOptions {
        self.flag(proto::mode::CREATE, on)
    }

    /// Create the file; an error if it exists.
    pub fn create_new(self, on: bool) -> OpenOptions {
        self.flag(proto::mode::CREATE_NEW, on)
    }

    /// Cut the file to 0 bytes.
    pub fn truncate(self, on: bool) -> OpenOptions {
        self.flag(proto::mode::TRUNCATE, on)
    }

    /// Opens `path` on `fs` this way.
    pub fn open<'f>(&self, fs: &'f Fs, path: &str) -> Result<File<'f>> {
        let len = fs.put_path(path, 0)?;
        let w = fs.call(proto::OPEN, [len as u64, self.0, 0, 0])?;
        Ok(File {
            fs,
            handle: w[0],
            open: true,
            ahead: Vec::new(),
            ahead_at: 0,
            ahead_generation: 0,
        })
    }
}

/// Where [`File::seek`] goes, as `std::io::SeekFrom`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekFrom {
    /// From the start.
    Start(u64),
    /// From the end.
    End(i64),
    /// From the current position.
    Current(i64),
}

/// An open file; closed when dropped (or with [`File::close`], which
/// reports an error).
pub struct File<'f> {
    fs: &'f Fs,
    handle: u64,
    open: bool,
    /// Bytes read ahead (module doc): `ahead[ahead_at..]` follow the
    /// reader's position, valid while the write generation is
    /// `ahead_generation`.
    ahead: Vec<u8>,
    ahead_at: usize,
    ahead_generation: u64,
}

/// Bytes a small read asks the service for (module doc, "Read-ahead").
pub const READ_AHEAD: usize = 64 * 1024;
/// Reads of this many bytes and more go to the service as they are: the
/// call is paid by enough bytes, and keeping bytes costs a copy.
pub const DIRECT: usize = 16 * 1024;

impl File<'_> {
    /// Reads up to `buf.len()` bytes; 0 at the end of the file.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let kept = self.ahead.len() - self.ahead_at;
        if kept > 0 && self.fs.generation() == self.ahead_generation {
            let n = kept.min(buf.len());
            buf[..n].copy_from_slice(&self.ahead[self.ahead_at..self.ahead_at + n]);
            self.ahead_at += n;
            return Ok(n);
        }
        self.give_back()?;
        if buf.len() >= DIRECT {
            return self.read_call(buf.len(), |bytes, fs| {
                fs.buffer.copy_to(0, &mut buf[..bytes])
            });
        }
        // The generation before the call: a change during it shows next
        // time, and the kept bytes go.
        let generation = self.fs.generation();
        let mut ahead = core::mem::take(&mut self.ahead);
        ahead.resize(READ_AHEAD, 0);
        let got = self.read_call(READ_AHEAD, |bytes, fs| {
            fs.buffer.copy_to(0, &mut ahead[..bytes])
        });
        let got = match got {
            Ok(got) => got,
            Err(e) => {
                ahead.clear();
                self.ahead = ahead;
                return Err(e);
            }
        };
        ahead.truncate(got);
        let n = got.min(buf.len());
        buf[..n].copy_from_slice(&ahead[..n]);
        self.ahead = ahead;
        self.ahead_at = n;
        self.ahead_generation = generation;
        Ok(n)
    }

    /// One `READ` of up to `want` bytes (at most [`proto::MAX_IO`]); `copy`
    /// takes the bytes read out of the buffer. The bytes read.
    fn read_call(
        &mut self,
        want: usize,
        copy: impl FnOnce(usize, &Fs) -> Option<()>,
    ) -> Result<usize> {
        let want = want.min(proto::MAX_IO);
        let w = self
            .fs
            .call(proto::READ, [self.handle, want as u64, 0, 0])?;
        let n = usize::try_from(w[0])
            .ok()
            .filter(|&n| n <= want)
            .ok_or(Error::Other)?;
        copy(n, self.fs).ok_or(Error::Other)?;
        Ok(n)
    }

    /// Drops the bytes read ahead and moves the service's position back to
    /// the reader's (before anything else that uses the position).
    fn give_back(&mut self) -> Result<()> {
        let kept = self.ahead.len() - self.ahead_at;
        self.ahead.clear();
        self.ahead_at = 0;
        if kept > 0 {
            let back = (kept as u64).wrapping_neg();
            self.fs
                .call(proto::SEEK, [self.handle, proto::SEEK_CURRENT, back, 0])?;
        }
        Ok(())
    }

    /// Reads until `buf` is full; [`Error::Other`] if the file ends first.
    pub fn read_exact(&mut self, mut buf: &mut [u8]) -> Result<()> {
        while !buf.is_empty() {
            match self.read(buf)? {
                0 => return Err(Error::Other),
                n => buf = &mut buf[n..],
            }
        }
        Ok(())
    }

    /// Reads the rest of the file, appended to `out`; the bytes read.
    pub fn read_to_end(&mut self, out: &mut Vec<u8>) -> Result<usize> {
        let start = out.len();
        let mut chunk = alloc::vec![0u8; 64 * 1024];
        loop {
            match self.read(&mut chunk)? {
                0 => return Ok(out.len() - start),
                n => out.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Writes up to `data.len()` bytes (at most [`proto::MAX_IO`]).
    pub fn write(&mut self, data: &[u8]) -> Result<usize> {
        self.give_back()?;
        let n = data.len().min(proto::MAX_IO);
        self.fs
            .buffer
            .copy_from(0, &data[..n])
            .ok_or(Error::Other)?;
        let w = self.fs.call(proto::WRITE, [self.handle, n as u64, 0, 0])?;
        usize::try_from(w[0])
            .ok()
            .filter(|&w| w <= n)
            .ok_or(Error::Other)
    }

    /// Writes all of `data`.
    pub fn write_all(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            match self.write(data)? {
                0 => return Err(Error::NoSpace),
                n => data = &data[n..],
            }
        }
        Ok(())
    }

    /// Moves the position; the new one.
    pub fn seek(&mut self, to: SeekFrom) -> Result<u64> {
        self.give_back()?;
        let (whence, offset) = match to {
            SeekFrom::Start(o) => (proto::SEEK_START, o),
            SeekFrom::End(o) => (proto::SEEK_END, o as u64),
            SeekFrom::Current(o) => (proto::SEEK_CURRENT, o as u64),
        };
        Ok(self
            .fs
            .call(proto::SEEK, [self.handle, whence, offset, 0])?[0])
    }

    /// Cuts (or extends with zeros) the file to `len` bytes.
    pub fn set_len(&mut self, len: u64) -> Result<()> {
        self.give_back()?;
        self.fs
            .call(proto::TRUNCATE, [self.handle, len, 0, 0])
            .map(drop)
    }

    /// The open file's metadata.
    pub fn metadata(&self) -> Result<Metadata> {
        let w = self.fs.call(proto::FSTAT, [self.handle, 0, 0, 0])?;
        Ok(Metadata(Stat::from_words(&w)))
    }

    /// Closes it, reporting an error (dropping closes silently).
    pub fn close(mut self) -> Result<()> {
        self.open = false;
        self.fs.call(proto::CLOSE, [self.handle, 0, 0, 0]).map(drop)
    }
}

impl Drop for File<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.fs.call(proto::CLOSE, [self.handle, 0, 0, 0]);
        }
    }
}

/// The entries of a directory, read one call each (as `std::fs::ReadDir`).
pub struct ReadDir<'f> {
    fs: &'f Fs,
    path: String,
    index: u64,
    done: bool,
}

impl Iterator for ReadDir<'_> {
    type Item = Result<DirEntry>;

    fn next(&mut self) -> Option<Result<DirEntry>> {
        if self.done {
            return None;
        }
        let entry = self.fs.dir_entry(&self.path, self.index);
        self.index += 1;
        match entry {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Asks `session` for its I/O buffer (into `slots.frame`) and maps it at
/// `va`.
///
/// # Safety
///
/// `[va, va + 2 MiB)` is the buffer's alone (nothing else is mapped
/// there).
unsafe fn map_buffer(session: &Session<FileSystem>, slots: Slots, va: u64) -> Result<Region> {
    let info = MsgInfo::new(proto::BUFFER, 0, 0).unwrap_or_default();
    let (reply, _) = crate::transfer::call_for_cap(session.cap(), info, [0; 4], own(slots.frame))
        .map_err(|_| Error::Ipc)?;
    if reply.label() != proto::OK || reply.caps() != 1 {
        return Err(Error::from_label(reply.label()));
    }
    let rw = MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    };
    // SAFETY: the caller gives the region to the buffer alone.
    unsafe { crate::syscall::map(own(child::OWN_VSPACE), own(slots.frame), va, rw) }
        .map_err(|_| Error::Other)?;
    // SAFETY: just mapped, 2 MiB, used by nothing else.
    Ok(unsafe { Region::from_mapped(va as usize, proto::BUFFER_BYTES) })
}

impl Fs {
    /// Opens a File system session (routed by the scenario, donating from
    /// the caller's quota) and maps its I/O buffer at `va`.
    ///
    /// # Safety
    ///
    /// `[va, va + 2 MiB)` is a 2 MiB aligned region nothing else of the
    /// program uses.
    pub unsafe fn connect(slots: Slots, va: u64) -> Result<Fs> {
        let donor = Donor::from_untyped::<FileSystem>(
            own(child::UNTYPED),
            slots.donor_block,
            slots.donor_table,
        )
        .map_err(|_| Error::NoSpace)?;
        let session =
            session::open_donating::<FileSystem>(slots.session, donor).map_err(|_| Error::Ipc)?;
        // SAFETY: the caller gives the region to the buffer alone.
        let buffer = unsafe { map_buffer(&session, slots, va) }?;
        Ok(Fs {
            session,
            buffer,
            cwd: RefCell::new(String::from("/")),
            slots,
            va,
        })
    }

    /// Opens the session again after its provider stopped (a call failed
    /// with [`Error::Ipc`]; init restarts the service): a fresh session,
    /// its buffer mapped where the old one was. Open files are gone (a
    /// [`File`] of the old session answers [`Error::BadHandle`] or
    /// [`Error::Ipc`]); the current directory stays.
    pub fn reconnect(&mut self) -> Result<()> {
        self.session.reopen().map_err(|_| Error::Ipc)?;
        // The old buffer went with the old donation (its mapping too).
        // SAFETY: the region is the buffer's, as `connect`'s caller gave.
        self.buffer = unsafe { map_buffer(&self.session, self.slots, self.va) }?;
        Ok(())
    }

    /// The volume's write generation as the service last stored it in
    /// this session's buffer (`session::fs`, "The write generation").
    fn generation(&self) -> u64 {
        let mut word = [0u8; 8];
        match self.buffer.copy_to(proto::GENERATION_OFFSET, &mut word) {
            Some(()) => u64::from_le_bytes(word),
            // Cannot happen (the offset is inside the buffer); a value no
            // kept bytes carry makes the next read ask the service.
            None => u64::MAX,
        }
    }

    /// Calls `op` with `words`: the reply's words, or its error.
    fn call(&self, op: u64, words: [u64; 4]) -> Result<[u64; 4]> {
        let (info, w) = self.session.call(op, words).map_err(|_| Error::Ipc)?;
        match info.label() {
            proto::OK => Ok(w),
            label => Err(Error::from_label(label)),
        }
    }

    /// `path` made absolute and normalized, put into the buffer at `at`;
    /// its length.
    fn put_path(&self, path: &str, at: usize) -> Result<usize> {
        let full = self.absolute(path);
        if full.len() > proto::MAX_PATH {
            return Err(Error::InvalidArgument);
        }
        self.buffer
            .copy_from(at, full.as_bytes())
            .ok_or(Error::InvalidArgument)?;
        Ok(full.len())
    }

    /// `path` relative to the current directory, with `.` and `..`
    /// resolved (`..` of the root is the root).
    pub fn absolute(&self, path: &str) -> String {
        let mut parts: Vec<&str> = Vec::new();
        let cwd = self.cwd.borrow();
        let base = if path.starts_with('/') {
            ""
        } else {
            cwd.as_str()
        };
        for part in base.split('/').chain(path.split('/')) {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                p => parts.push(p),
            }
        }
        let mut out = String::new();
        for p in &parts {
            out.push('/');
            out.push_str(p);
        }
        if out.is_empty() {
            out.push('/');
        }
        out
    }

    /// Opens an existing file for reading.
    pub fn open(&self, path: &str) -> Result<File<'_>> {
        OpenOptions::new().read(true).open(self, path)
    }

    /// Creates (or truncates) a file for writing.
    pub fn create(&self, path: &str) -> Result<File<'_>> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(self, path)
    }

    /// The whole file.
    pub fn read(&self, path: &str) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.open(path)?.read_to_end(&mut out)?;
        Ok(out)
    }

    /// Makes `path` hold exactly `data`.
    pub fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        let mut f = self.create(path)?;
        f.write_all(data)?;
        f.close()
    }

    /// One path call: `op` on `path`.
    fn path_call(&self, op: u64, path: &str) -> Result<[u64; 4]> {
        let len = self.put_path(path, 0)?;
        self.call(op, [len as u64, 0, 0, 0])
    }

    /// What `path` is.
    pub fn metadata(&self, path: &str) -> Result<Metadata> {
        Ok(Metadata(Stat::from_words(
            &self.path_call(proto::STAT, path)?,
        )))
    }

    /// Makes directory `path` (its parent must exist).
    pub fn create_dir(&self, path: &str) -> Result<()> {
        self.path_call(proto::MKDIR, path).map(drop)
    }

    /// Removes an empty directory.
    pub fn remove_dir(&self, path: &str) -> Result<()> {
        self.path_call(proto::RMDIR, path).map(drop)
    }

    /// Removes file `path`.
    pub fn remove_file(&self, path: &str) -> Result<()> {
        self.path_call(proto::UNLINK, path).map(drop)
    }

    /// Moves `from` to `to` (across directories too).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        let a = self.put_path(from, 0)?;
        let b = self.put_path(to, a)?;
        self.call(proto::RENAME, [a as u64, b as u64, 0, 0])
            .map(drop)
    }

    /// The entries of directory `path` (without `.` and `..`).
    pub fn read_dir(&self, path: &str) -> Result<ReadDir<'_>> {
        let path = self.absolute(path);
        if !self.metadata(&path)?.is_dir() {
            return Err(Error::NotADirectory);
        }
        Ok(ReadDir {
            fs: self,
            path,
            index: 0,
            done: false,
        })
    }

    /// Entry `index` of directory `path` (absolute).
    fn dir_entry(&self, path: &str, index: u64) -> Result<Option<DirEntry>> {
        let len = self.put_path(path, 0)?;
        let (info, w) = self
            .session
            .call(proto::READ_DIR, [len as u64, index, 0, 0])
            .map_err(|_| Error::Ipc)?;
        match info.label() {
            proto::OK => {}
            proto::END => return Ok(None),
            label => return Err(Error::from_label(label)),
        }
        let name_len = (w[1] >> 32) as usize;
        if name_len > proto::MAX_PATH {
            return Err(Error::Other);
        }
        let mut name = alloc::vec![0u8; name_len];
        self.buffer.copy_to(0, &mut name).ok_or(Error::Other)?;
        let name = String::from_utf8(name).map_err(|_| Error::Other)?;
        let mut stat = w;
        stat[1] &= 0xffff_ffff;
        Ok(Some(DirEntry {
            name,
            metadata: Metadata(Stat::from_words(&stat)),
        }))
    }

    /// Makes `path` the directory relative paths start from.
    pub fn set_current_dir(&self, path: &str) -> Result<()> {
        let full = self.absolute(path);
        if !self.metadata(&full)?.is_dir() {
            return Err(Error::NotADirectory);
        }
        *self.cwd.borrow_mut() = full;
        Ok(())
    }

    /// The current directory.
    pub fn current_dir(&self) -> String {
        self.cwd.borrow().clone()
    }

    /// Everything written so far onto the device.
    pub fn sync(&self) -> Result<()> {
        self.call(proto::SYNC, [0; 4]).map(drop)
    }

    /// (FAT type, cluster bytes, clusters, free clusters).
    pub fn info(&self) -> Result<[u64; 4]> {
        self.call(proto::INFO, [0; 4])
    }
}
