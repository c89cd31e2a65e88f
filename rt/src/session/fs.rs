//! The File system session: files and directories of one volume (Genode's
//! `file_system_session`, simplified to synchronous calls). The provider
//! (the FAT service) makes a 2 MiB I/O buffer from the session's donation
//! and hands it out with [`BUFFER`]; paths and file data travel through
//! it, everything else in the call's words. `rt::fs` is the API a
//! component uses (`File`, `read_dir`, `metadata`, ...); this is the wire.
//!
//! Paths are absolute (`/a/b`), UTF-8, at most [`MAX_PATH`] bytes, put at
//! the buffer's start; a second path (rename's target) follows the first.
//!
//! | opcode | words | reply words ([`OK`]) |
//! |--------|-------|----------------------|
//! | [`BUFFER`] | — | the buffer's frame capability |
//! | [`OPEN`] | 0: path length, 1: [`mode`] bits | 0: handle |
//! | [`CLOSE`] | 0: handle | — |
//! | [`READ`] | 0: handle, 1: bytes (≤ [`MAX_IO`]) | 0: bytes read, at the buffer's start (0: end of file) |
//! | [`WRITE`] | 0: handle, 1: bytes, at the buffer's start | 0: bytes written |
//! | [`SEEK`] | 0: handle, 1: [`SEEK_START`], [`SEEK_END`] or [`SEEK_CURRENT`], 2: offset (two's complement) | 0: the new position |
//! | [`TRUNCATE`] | 0: handle, 1: length | — |
//! | [`STAT`] | 0: path length | [`Stat`] words |
//! | [`FSTAT`] | 0: handle | [`Stat`] words |
//! | [`MKDIR`], [`RMDIR`], [`UNLINK`] | 0: path length | — |
//! | [`RENAME`] | 0: from's length, 1: to's length (after from) | — |
//! | [`READ_DIR`] | 0: path length, 1: entry index | the entry's name at the buffer's start, [`Stat`] words with word 1's bits 32.. the name's length; [`END`] past the last entry |
//! | [`SYNC`] | — | — (everything written is on the device) |
//! | [`INFO`] | — | 0: FAT type (12, 16, 32), 1: cluster bytes, 2: clusters, 3: free clusters |
//!
//! **The write generation.** The buffer's last 8 bytes
//! ([`GENERATION_OFFSET`], little-endian) hold the volume's write
//! generation: the provider increments it after every request that may
//! change a file or a directory (`OPEN` with a writing mode, `WRITE`,
//! `TRUNCATE`, `MKDIR`, `RMDIR`, `UNLINK`, `RENAME`) and stores it into
//! every session's buffer before it answers. A client may keep bytes it
//! read for as long as the generation it read before the read stays the
//! same — no other session (and no other handle) changed anything since —
//! and checks that with a load, no call (`rt::fs`'s read-ahead). Data
//! paths never reach the buffer's last page ([`MAX_IO`] and two paths are
//! far below it).
//!
//! Errors are the reply's label ([`Error`]): a bad request is refused with
//! an error value and the service goes on serving. A handle belongs to the
//! session that opened it; another session's handle is [`Error::BadHandle`].
//! Closing the session closes its handles.

use super::Interface;

/// The File system interface.
pub struct FileSystem;

impl Interface for FileSystem {
    const NAME: &'static str = "File_system";
    /// The 2 MiB I/O buffer (at the donation's aligned start).
    const RAM: u64 = 4 << 20;
    /// The buffer's frame.
    const CAPS: u32 = 1;
}

/// Hands out the I/O buffer.
pub const BUFFER: u64 = 1;
/// Opens a file: a handle.
pub const OPEN: u64 = 2;
/// Closes a handle.
pub const CLOSE: u64 = 3;
/// Reads from a file into the buffer.
pub const READ: u64 = 4;
/// Writes the buffer's bytes to a file.
pub const WRITE: u64 = 5;
/// Moves a file's position.
pub const SEEK: u64 = 6;
/// Sets a file's length.
pub const TRUNCATE: u64 = 7;
/// Describes a path.
pub const STAT: u64 = 8;
/// Describes an open file.
pub const FSTAT: u64 = 9;
/// Makes a directory.
pub const MKDIR: u64 = 10;
/// Removes an empty directory.
pub const RMDIR: u64 = 11;
/// Removes a file.
pub const UNLINK: u64 = 12;
/// Moves a file or directory.
pub const RENAME: u64 = 13;
/// One entry of a directory.
pub const READ_DIR: u64 = 14;
/// Writes everything back to the device.
pub const SYNC: u64 = 15;
/// Describes the volume.
pub const INFO: u64 = 16;

/// The reply to a request served.
pub const OK: u64 = 0;
/// [`READ_DIR`]: no entry at that index.
pub const END: u64 = 1;

/// Bytes of the I/O buffer.
pub const BUFFER_BYTES: usize = 2 << 20;
/// The most bytes one [`READ`] or [`WRITE`] moves.
pub const MAX_IO: usize = 1 << 20;
/// The longest path.
pub const MAX_PATH: usize = 4096;
/// Where the write generation lies in the buffer (module doc).
pub const GENERATION_OFFSET: usize = BUFFER_BYTES - 8;

/// [`OPEN`] word 1 bits.
pub mod mode {
    /// Read access.
    pub const READ: u64 = 1;
    /// Write access.
    pub const WRITE: u64 = 2;
    /// Writes go to the end (implies write).
    pub const APPEND: u64 = 4;
    /// Create the file if it is missing.
    pub const CREATE: u64 = 8;
    /// Create the file; `Exists` if it is there.
    pub const CREATE_NEW: u64 = 16;
    /// Cut the file to 0 bytes.
    pub const TRUNCATE: u64 = 32;
}

/// [`SEEK`] from the start.
pub const SEEK_START: u64 = 0;
/// [`SEEK`] from the end.
pub const SEEK_END: u64 = 1;
/// [`SEEK`] from the current position.
pub const SEEK_CURRENT: u64 = 2;

/// A date and time, packed into a word: year << 40 | month << 32 | day
/// << 24 | hour << 16 | minute << 8 | second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time {
    /// 1980 to 2107.
    pub year: u16,
    /// 1 to 12.
    pub month: u8,
    /// 1 to 31.
    pub day: u8,
    /// 0 to 23.
    pub hour: u8,
    /// 0 to 59.
    pub minute: u8,
    /// 0 to 59 (FAT keeps even seconds).
    pub second: u8,
}

impl Time {
    /// The packed word.
    pub fn pack(&self) -> u64 {
        u64::from(self.year) << 40
            | u64::from(self.month) << 32
            | u64::from(self.day) << 24
            | u64::from(self.hour) << 16
            | u64::from(self.minute) << 8
            | u64::from(self.second)
    }

    /// From a packed word.
    pub fn unpack(w: u64) -> Time {
        Time {
            year: (w >> 40) as u16,
            month: (w >> 32) as u8,
            day: (w >> 24) as u8,
            hour: (w >> 16) as u8,
            minute: (w >> 8) as u8,
            second: w as u8,
        }
    }
}

impl core::fmt::Display for Time {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// What [`STAT`] tells, in reply words: 0: size, 1: attributes (bits
/// 0..8) and [`Stat::is_dir`] (bit 8), 2: modified, 3: created
/// ([`Time::pack`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Bytes (0 for a directory).
    pub size: u64,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// FAT attribute bits as stored.
    pub attributes: u8,
    /// Last written.
    pub modified: Time,
    /// Made.
    pub created: Time,
}

impl Stat {
    /// The reply words.
    pub fn words(&self) -> [u64; 4] {
        [
            self.size,
            u64::from(self.attributes) | u64::from(self.is_dir) << 8,
            self.modified.pack(),
            self.created.pack(),
        ]
    }

    /// From reply words.
    pub fn from_words(w: &[u64; 4]) -> Stat {
        Stat {
            size: w[0],
            is_dir: w[1] & 1 << 8 != 0,
            attributes: w[1] as u8,
            modified: Time::unpack(w[2]),
            created: Time::unpack(w[3]),
        }
    }
}

/// Why a request failed: the reply's label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Error {
    /// The call itself failed (the provider is gone).
    Ipc = 0x100,
    /// No such file or directory.
    NotFound = 0x101,
    /// The name is taken.
    Exists = 0x102,
    /// A path component is a file.
    NotADirectory = 0x103,
    /// A file operation on a directory.
    IsADirectory = 0x104,
    /// rmdir of a directory with entries.
    DirectoryNotEmpty = 0x105,
    /// A name the file system cannot store.
    InvalidName = 0x106,
    /// No free space (or directory slots).
    NoSpace = 0x107,
    /// Over FAT's 4 GiB - 1 bytes.
    FileTooLarge = 0x108,
    /// The volume is corrupt there (the service's log says how).
    Corrupt = 0x109,
    /// Every handle is in use.
    TooManyOpen = 0x10a,
    /// Not an open file of this session.
    BadHandle = 0x10b,
    /// Writing without write access, or to a read-only file.
    ReadOnly = 0x10c,
    /// Open (unlink, rename, rmdir refuse).
    Busy = 0x10d,
    /// The device failed.
    Device = 0x10e,
    /// A malformed request: a path too long or not UTF-8, a size over
    /// [`MAX_IO`], an unknown opcode.
    InvalidArgument = 0x10f,
    /// The service has no volume: it could not mount it.
    NotMounted = 0x110,
    /// Something else.
    Other = 0x1ff,
}

impl Error {
    /// The error a reply label names ([`Error::Other`] for an unknown one).
    pub fn from_label(label: u64) -> Error {
        use Error::*;
        [
            Ipc,
            NotFound,
            Exists,
            NotADirectory,
            IsADirectory,
            DirectoryNotEmpty,
            InvalidName,
            NoSpace,
            FileTooLarge,
            Corrupt,
            TooManyOpen,
            BadHandle,
            ReadOnly,
            Busy,
            Device,
            InvalidArgument,
            NotMounted,
        ]
        .into_iter()
        .find(|e| *e as u64 == label)
        .unwrap_or(Other)
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::Ipc => "the file system service is gone",
            Error::NotFound => "no such file or directory",
            Error::Exists => "already exists",
            Error::NotADirectory => "not a directory",
            Error::IsADirectory => "is a directory",
            Error::DirectoryNotEmpty => "directory not empty",
            Error::InvalidName => "a name the file system cannot store",
            Error::NoSpace => "no space left",
            Error::FileTooLarge => "file too large",
            Error::Corrupt => "the file system is corrupt there",
            Error::TooManyOpen => "too many open files",
            Error::BadHandle => "not an open file of this session",
            Error::ReadOnly => "read-only",
            Error::Busy => "in use (open)",
            Error::Device => "the device failed",
            Error::InvalidArgument => "invalid argument",
            Error::NotMounted => "no file system (the volume could not be mounted)",
            Error::Other => "unknown error",
        })
    }
}
