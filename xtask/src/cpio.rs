//! A writer for `newc` cpio archives, the format Linux unpacks as its
//! initramfs (`Documentation/driver-api/early-userspace/buffer-format.rst`).
//! The kernel takes the archive uncompressed.
//!
//! Each entry is a 110-byte ASCII header — the magic `070701` and thirteen
//! 8-digit hexadecimal fields: inode, mode, uid, gid, nlink, mtime,
//! filesize, devmajor, devminor, rdevmajor, rdevminor, namesize (with the
//! terminating NUL), check (0) — then the NUL-terminated name, padded to a
//! multiple of 4 bytes counted from the header's start, then the data (a
//! symlink's data is its target), padded to a multiple of 4. The entry
//! named `TRAILER!!!` ends the archive.
//!
//! Entries are owned by root with mtime 0 and numbered inodes, so the same
//! inputs give the same bytes. Names are paths without a leading `/`.

use anyhow::{bail, Result};

const MAGIC: &str = "070701";
const HEADER_LEN: usize = 110;
const TRAILER: &str = "TRAILER!!!";

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

/// An archive being written.
#[derive(Debug, Default)]
pub struct Archive {
    bytes: Vec<u8>,
    next_inode: u32,
}

/// The fields of one header that vary between entries.
struct Entry<'a> {
    name: &'a str,
    /// File type bits (`S_IF*`).
    kind: u32,
    /// Permission bits, at most 0o7777.
    permissions: u32,
    nlink: u32,
    rdev: (u32, u32),
    data: &'a [u8],
}

impl Archive {
    pub fn new() -> Self {
        Archive::default()
    }

    /// A directory.
    pub fn dir(&mut self, name: &str, permissions: u32) -> Result<()> {
        self.entry(Entry {
            name,
            kind: S_IFDIR,
            permissions,
            nlink: 2,
            rdev: (0, 0),
            data: &[],
        })
    }

    /// A regular file.
    pub fn file(&mut self, name: &str, permissions: u32, data: &[u8]) -> Result<()> {
        self.entry(Entry {
            name,
            kind: S_IFREG,
            permissions,
            nlink: 1,
            rdev: (0, 0),
            data,
        })
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) -> Result<()> {
        if target.is_empty() {
            bail!("cpio: symlink {name} has an empty target");
        }
        self.entry(Entry {
            name,
            kind: S_IFLNK,
            permissions: 0o777,
            nlink: 1,
            rdev: (0, 0),
            data: target.as_bytes(),
        })
    }

    /// A character device node.
    pub fn char_device(
        &mut self,
        name: &str,
        permissions: u32,
        major: u32,
        minor: u32,
    ) -> Result<()> {
        self.entry(Entry {
            name,
            kind: S_IFCHR,
            permissions,
            nlink: 1,
            rdev: (major, minor),
            data: &[],
        })
    }

    /// Ends the archive with the trailer and returns its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.header(0, 0, 1, (0, 0), 0, TRAILER);
        self.bytes
    }

    fn entry(&mut self, e: Entry) -> Result<()> {
        if e.name.is_empty() || e.name.starts_with('/') || e.name.contains('\0') {
            bail!(
                "cpio: bad entry name {:?} (must be a non-empty relative path without NUL)",
                e.name
            );
        }
        if e.name == TRAILER {
            bail!("cpio: {TRAILER} is reserved for the end of the archive");
        }
        if e.permissions > 0o7777 {
            bail!("cpio: bad permissions {:o} for {}", e.permissions, e.name);
        }
        let Ok(size) = u32::try_from(e.data.len()) else {
            bail!(
                "cpio: {} is {} bytes; newc holds at most 4 GiB - 1",
                e.name,
                e.data.len()
            );
        };
        self.next_inode += 1;
        let inode = self.next_inode;
        self.header(inode, e.kind | e.permissions, e.nlink, e.rdev, size, e.name);
        self.bytes.extend_from_slice(e.data);
        self.pad();
        Ok(())
    }

    fn header(
        &mut self,
        inode: u32,
        mode: u32,
        nlink: u32,
        rdev: (u32, u32),
        size: u32,
        name: &str,
    ) {
        let name_size = name.len() as u32 + 1;
        let fields = [
            inode, mode, 0, 0, nlink, 0, size, 0, 0, rdev.0, rdev.1, name_size, 0,
        ];
        let start = self.bytes.len();
        self.bytes.extend_from_slice(MAGIC.as_bytes());
        for f in fields {
            self.bytes.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        debug_assert_eq!(self.bytes.len() - start, HEADER_LEN);
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
    }

    /// Pads with NULs to a multiple of 4 (every entry starts aligned, so
    /// the archive's length is the offset that counts).
    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One entry as read back: name, mode, rdev, data.
    #[derive(Debug, PartialEq)]
    pub(crate) struct Read {
        pub name: String,
        pub mode: u32,
        pub rdev: (u32, u32),
        pub data: Vec<u8>,
    }

    /// A reader for the tests, written from the format description: checks
    /// the magic, the alignment, the field syntax and the trailer.
    pub(crate) fn read_back(bytes: &[u8]) -> Vec<Read> {
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            assert_eq!(at % 4, 0, "entry at unaligned offset {at}");
            let header = std::str::from_utf8(&bytes[at..at + HEADER_LEN]).unwrap();
            assert_eq!(&header[..6], MAGIC);
            let field = |i: usize| u32::from_str_radix(&header[6 + 8 * i..14 + 8 * i], 16).unwrap();
            let (mode, size, name_size) = (field(1), field(6) as usize, field(11) as usize);
            assert_eq!(field(12), 0, "check field");
            let name_at = at + HEADER_LEN;
            assert_eq!(bytes[name_at + name_size - 1], 0, "name not NUL-terminated");
            let name = std::str::from_utf8(&bytes[name_at..name_at + name_size - 1]).unwrap();
            let data_at = (name_at + name_size).next_multiple_of(4);
            if name == TRAILER {
                assert_eq!(data_at, bytes.len(), "bytes after the trailer");
                return out;
            }
            out.push(Read {
                name: name.to_string(),
                mode,
                rdev: (field(9), field(10)),
                data: bytes[data_at..data_at + size].to_vec(),
            });
            at = (data_at + size).next_multiple_of(4);
        }
    }

    #[test]
    fn exact_bytes_of_one_file() {
        let mut a = Archive::new();
        a.file("init", 0o755, b"#!/bin/sh\n").unwrap();
        let bytes = a.finish();
        let header = "070701\
                      00000001\
                      000081ed\
                      00000000\
                      00000000\
                      00000001\
                      00000000\
                      0000000a\
                      00000000\
                      00000000\
                      00000000\
                      00000000\
                      00000005\
                      00000000";
        let mut expected = header.as_bytes().to_vec();
        // 110 + 5 = 115 bytes: one NUL of padding to 116.
        expected.extend_from_slice(b"init\0\0");
        // 10 bytes of data: two NULs of padding.
        expected.extend_from_slice(b"#!/bin/sh\n\0\0");
        assert_eq!(&bytes[..expected.len()], &expected[..]);
        let trailer = &bytes[expected.len()..];
        assert!(trailer.starts_with(b"07070100000000"));
        // 110 + 11 = 121: padded to 124.
        assert_eq!(trailer.len(), 124);
        assert_eq!(&trailer[110..], b"TRAILER!!!\0\0\0\0");
    }

    #[test]
    fn round_trip_of_every_kind() {
        let mut a = Archive::new();
        a.dir("bin", 0o755).unwrap();
        a.dir("dev", 0o755).unwrap();
        a.char_device("dev/console", 0o600, 5, 1).unwrap();
        a.file("bin/busybox", 0o755, &[7; 1001]).unwrap();
        a.symlink("bin/sh", "busybox").unwrap();
        a.file("empty", 0o644, &[]).unwrap();
        let entries = read_back(&a.finish());
        let summary: Vec<_> = entries
            .iter()
            .map(|e| (e.name.as_str(), e.mode, e.rdev, e.data.len()))
            .collect();
        assert_eq!(
            summary,
            [
                ("bin", 0o040755, (0, 0), 0),
                ("dev", 0o040755, (0, 0), 0),
                ("dev/console", 0o020600, (5, 1), 0),
                ("bin/busybox", 0o100755, (0, 0), 1001),
                ("bin/sh", 0o120777, (0, 0), 7),
                ("empty", 0o100644, (0, 0), 0),
            ]
        );
        assert_eq!(entries[3].data, vec![7; 1001]);
        assert_eq!(entries[4].data, b"busybox");
    }

    #[test]
    fn bad_names_are_refused() {
        let mut a = Archive::new();
        assert!(a.file("", 0o644, b"").is_err());
        assert!(a.file("/init", 0o644, b"").is_err());
        assert!(a.file("a\0b", 0o644, b"").is_err());
        assert!(a.file(TRAILER, 0o644, b"").is_err());
        assert!(a.file("x", 0o100644, b"").is_err());
        assert!(a.symlink("x", "").is_err());
        // Nothing was written: the archive is just the trailer.
        assert!(read_back(&a.finish()).is_empty());
    }

    #[test]
    fn same_input_same_bytes() {
        let build = || {
            let mut a = Archive::new();
            a.dir("bin", 0o755).unwrap();
            a.file("bin/x", 0o755, b"abc").unwrap();
            a.finish()
        };
        assert_eq!(build(), build());
    }
}
