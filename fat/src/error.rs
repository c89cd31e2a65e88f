//! Errors as values: what the device reports, what the caller did wrong,
//! and what is wrong with the image.

use core::fmt;

/// An opaque error code from the block-device layer (a driver's status,
/// a session error); the file system passes it on untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceError(pub u32);

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block device error {}", self.0)
    }
}

/// Why an operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsError {
    /// The block device failed.
    Device(DeviceError),
    /// No file or directory by that path.
    NotFound,
    /// The name is taken (create_new, mkdir, rename's target).
    Exists,
    /// A path component in the middle is a file.
    NotADirectory,
    /// A file operation on a directory.
    IsADirectory,
    /// rmdir of a directory with entries.
    DirectoryNotEmpty,
    /// A name FAT cannot store, or `.`/`..` as a new name.
    InvalidName,
    /// No free cluster, or a directory that cannot take more entries (a
    /// FAT12/16 root is fixed; any directory holds at most 65536 slots).
    NoSpace,
    /// A file would exceed FAT's 4 GiB - 1 bytes.
    FileTooLarge,
    /// The image breaks the format: see [`Corruption`].
    Corrupt(Corruption),
    /// Every handle slot is in use.
    TooManyOpen,
    /// A closed, stale or never-issued handle.
    BadHandle,
    /// Writing through a handle opened without write access, or opening a
    /// file with the read-only attribute for writing.
    ReadOnly,
    /// The file or directory is open (unlink, rename, rmdir refuse).
    Busy,
    /// A meaningless request: a seek before 0, an open mode without read
    /// or write, moving a directory into itself, removing the root.
    InvalidArgument,
    /// The device or the request is outside what this crate supports
    /// (blocks other than 512 bytes, a volume too small or too large for
    /// the FAT type asked for).
    Unsupported(&'static str),
}

impl From<DeviceError> for FsError {
    fn from(e: DeviceError) -> Self {
        FsError::Device(e)
    }
}

impl From<Corruption> for FsError {
    fn from(c: Corruption) -> Self {
        FsError::Corrupt(c)
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FsError::Device(e) => write!(f, "{e}"),
            FsError::NotFound => f.write_str("no such file or directory"),
            FsError::Exists => f.write_str("the name exists already"),
            FsError::NotADirectory => f.write_str("a path component is not a directory"),
            FsError::IsADirectory => f.write_str("is a directory"),
            FsError::DirectoryNotEmpty => f.write_str("directory not empty"),
            FsError::InvalidName => f.write_str("a name FAT cannot store"),
            FsError::NoSpace => f.write_str("no space left on the volume or in the directory"),
            FsError::FileTooLarge => f.write_str("a FAT file holds at most 4 GiB - 1 bytes"),
            FsError::Corrupt(c) => write!(f, "corrupt file system: {c}"),
            FsError::TooManyOpen => f.write_str("too many open files"),
            FsError::BadHandle => f.write_str("bad file handle"),
            FsError::ReadOnly => f.write_str("not open for writing, or read-only"),
            FsError::Busy => f.write_str("the file or directory is open"),
            FsError::InvalidArgument => f.write_str("invalid argument"),
            FsError::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

/// What is wrong with the image. Clusters are cluster numbers (2 is the
/// first data cluster).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corruption {
    /// A boot-sector (BPB) field is impossible; the text names it.
    BadBootSector(&'static str),
    /// The FAT has fewer entries than the volume has clusters.
    FatTooShort,
    /// A cluster chain is longer than the volume's cluster count: it loops.
    ChainLoop {
        /// Where the chain starts.
        start: u32,
    },
    /// A chain runs into a cluster that another chain owns, or that is
    /// already free while being freed.
    CrossLinked {
        /// The shared (or free) cluster.
        cluster: u32,
    },
    /// A FAT entry or directory entry names a cluster outside the data
    /// area, a reserved value, or a bad-cluster mark inside a chain.
    ClusterOutOfRange {
        /// The entry that holds the value (0 for a directory entry).
        at: u32,
        /// The value.
        value: u32,
    },
    /// A chain ends before the file's size says it should.
    ChainTooShort {
        /// Where the chain starts.
        start: u32,
    },
    /// A directory is longer than the 65536 entries FAT allows.
    EntryPastEnd,
    /// A directory entry names a directory without a cluster, or a file
    /// with a size but no cluster.
    BadEntry,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Corruption::BadBootSector(what) => write!(f, "bad boot sector: {what}"),
            Corruption::FatTooShort => f.write_str("the FAT is shorter than the cluster count"),
            Corruption::ChainLoop { start } => {
                write!(f, "the cluster chain from {start} loops")
            }
            Corruption::CrossLinked { cluster } => {
                write!(f, "cluster {cluster} is in two chains, or free inside one")
            }
            Corruption::ClusterOutOfRange { at, value } => {
                write!(
                    f,
                    "entry {at} names cluster {value:#x}, outside the data area"
                )
            }
            Corruption::ChainTooShort { start } => {
                write!(f, "the chain from {start} is shorter than the file")
            }
            Corruption::EntryPastEnd => f.write_str("a directory runs past 65536 entries"),
            Corruption::BadEntry => f.write_str("a directory entry without a valid cluster"),
        }
    }
}
