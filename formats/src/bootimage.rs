//! The boot image: one file that carries the user-level components (ELF
//! files) from the build to the running system.
//!
//! xtask packs it with [`image_size`] + [`write_image`]; QEMU passes it as
//! `-initrd`; the kernel finds it as a PVH boot module and hands it on; the
//! root task parses it with [`BootImage::parse`] and looks components up by
//! name. The image is untrusted input to everyone who reads it, so the parser
//! checks every rule below and never panics, whatever the bytes.
//!
//! # Format, version 1 (all integers little-endian)
//!
//! ```text
//! offset 0: header, 32 bytes
//!   magic      [u8; 8] = b"PECANIMG"
//!   version    u32     = 1
//!   count      u32     = number of entries, at most 64
//!   total_size u64     = size of the whole image in bytes
//!   reserved   u64     = 0
//! offset 32: `count` entries, 64 bytes each
//!   name   [u8; 48]  UTF-8, NUL-padded
//!   offset u64       from the image start
//!   size   u64       bytes
//! then the data
//! ```
//!
//! # Invariants a parsed image satisfies
//!
//! - Names are non-empty, valid UTF-8, contain no NUL (everything after the
//!   first NUL of the 48-byte field is NUL too), and are unique in the image.
//!   A 48-byte name fills the field and has no terminator.
//! - Each entry's `offset` is a multiple of 4096, so the root task can map a
//!   module's pages instead of copying it.
//! - Each entry's `[offset, offset + size)` lies after the entry table and
//!   inside the image, and no two entries' ranges overlap. Empty entries
//!   (size 0) overlap nothing, but their offset obeys the same rules.
//! - `total_size` may be *smaller* than the bytes handed to the parser, never
//!   larger: whoever maps the image in whole pages hands over a page-rounded
//!   slice, and the bytes past `total_size` are ignored. [`BootImage::len`] is
//!   `total_size`.
//!
//! The writer lays entries out in the given order, each at the next multiple
//! of 4096 after the entry table and the previous entry — an entry of
//! [`LARGE`] bytes or more at the next multiple of [`LARGE`], so that its
//! middle can be 2 MiB frames when the image's physical start is 2 MiB
//! aligned too — zero-fills the padding and does not pad after the last
//! entry (the kernel zeroes the rest of the image's last page).
//!
//! # Frames
//!
//! The kernel hands the image's memory to root as read-only frame
//! capabilities (`abi::bootinfo`, "ROM frames"), which root and init pass
//! on without copying. [`BootImage::regions`] lists the page ranges that
//! become frames — the header and entry table, then each entry's pages in
//! table order — and [`Region::frame`] cuts each range into frames: 4 KiB
//! frames up to the first 2 MiB boundary of *physical* memory, 2 MiB frames
//! while whole ones fit in the range, 4 KiB frames after. No frame crosses
//! a range's end, so a client handed an entry's frames sees that entry's
//! bytes (and zeros up to its last page's end) and nothing of another.
//! The cut depends only on the image's physical start modulo [`LARGE`]
//! (its *phase*), which the kernel, root and init all know, so they agree
//! on every frame's index without a table.

use core::fmt;

use crate::bytes::{read_u32, read_u64};
use crate::elf::{ElfError, Limits, LoadPlan};

/// The first eight bytes of every boot image.
pub const MAGIC: [u8; 8] = *b"PECANIMG";
/// The format version this module reads and writes.
pub const VERSION: u32 = 1;
/// Most entries an image may carry; keeps the table inside one 4 KiB page
/// plus the header, and the overlap check at 64² / 2 comparisons.
pub const MAX_ENTRIES: usize = 64;
/// Size of the header in bytes.
pub const HEADER_SIZE: usize = 32;
/// Size of one entry-table record in bytes.
pub const ENTRY_SIZE: usize = 64;
/// Size of the name field; the longest name is this many bytes.
pub const NAME_LEN: usize = 48;
/// Alignment of every entry's offset: the page size, so modules map page by page.
pub const ALIGN: u64 = 4096;
/// A large frame's size (2 MiB): the writer aligns entries of this size or
/// more to it, and [`Region::frame`] cuts 2 MiB frames where they fit.
pub const LARGE: u64 = 2 << 20;
/// 4 KiB pages in a large frame.
const PAGES_PER_LARGE: u64 = LARGE / ALIGN;

/// Why a name is not acceptable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameFault {
    /// The name is empty (the field starts with NUL).
    Empty,
    /// The name is longer than [`NAME_LEN`] bytes (writer only).
    TooLong,
    /// A NUL byte inside the name, or a non-NUL byte after the padding began.
    NulInside,
    /// The name is not valid UTF-8.
    NotUtf8,
}

impl fmt::Display for NameFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameFault::Empty => "is empty",
            NameFault::TooLong => "is longer than 48 bytes",
            NameFault::NulInside => "has a NUL byte inside it",
            NameFault::NotUtf8 => "is not valid UTF-8",
        })
    }
}

/// What is wrong with an image (when parsing) or with the entries to pack
/// (when writing). `index` is the entry's position in the table, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootImageError {
    /// The first eight bytes are not `PECANIMG`.
    BadMagic,
    /// The header's version is not [`VERSION`].
    UnsupportedVersion(u32),
    /// The header's (or the caller's) entry count exceeds [`MAX_ENTRIES`].
    TooManyEntries(u32),
    /// `need` bytes are required but only `have` are there: the input is
    /// shorter than the header or the entry table, or (writer) the output
    /// buffer is too small.
    Truncated { need: u64, have: u64 },
    /// The header's `total_size` is larger than the bytes present.
    SizeMismatch { header: u64, actual: u64 },
    /// The header's `total_size` does not even cover the header and the
    /// entry table, which end at `table_end`.
    SizeBelowTable { header: u64, table_end: u64 },
    /// The header's reserved field is not zero.
    ReservedNotZero(u64),
    /// An entry's name breaks the name rules.
    BadName { index: usize, reason: NameFault },
    /// An entry's name equals the name of the earlier entry `other`.
    DuplicateName { index: usize, other: usize },
    /// An entry's offset is not a multiple of [`ALIGN`].
    Misaligned { index: usize, offset: u64 },
    /// An entry's data starts inside the header or the entry table, which
    /// end at `table_end`.
    InsideTable {
        index: usize,
        offset: u64,
        table_end: u64,
    },
    /// An entry's data ends at `end`, past the image's end at `image_end`
    /// (its `total_size`).
    PastEnd {
        index: usize,
        end: u64,
        image_end: u64,
    },
    /// An entry's `offset + size` does not fit in 64 bits.
    EndOverflows {
        index: usize,
        offset: u64,
        size: u64,
    },
    /// An entry's data overlaps the data of the earlier entry `other`.
    Overlap { index: usize, other: usize },
    /// (writer) The image would not fit in the address space.
    TooLarge,
}

impl fmt::Display for BootImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BootImageError::BadMagic => {
                f.write_str("boot image does not start with the magic \"PECANIMG\"")
            }
            BootImageError::UnsupportedVersion(v) => {
                write!(f, "boot image has version {v}, only version {VERSION} is supported")
            }
            BootImageError::TooManyEntries(n) => {
                write!(f, "boot image has {n} entries, at most {MAX_ENTRIES} are allowed")
            }
            BootImageError::Truncated { need, have } => {
                write!(f, "boot image is truncated: needs {need} bytes, has {have}")
            }
            BootImageError::SizeMismatch { header, actual } => write!(
                f,
                "boot image header says the image is {header} bytes, but only {actual} bytes are present"
            ),
            BootImageError::SizeBelowTable { header, table_end } => write!(
                f,
                "boot image header says the image is {header} bytes, less than its header and \
                 entry table ({table_end} bytes)"
            ),
            BootImageError::ReservedNotZero(v) => {
                write!(f, "boot image header's reserved field is {v:#x}, must be 0")
            }
            BootImageError::BadName { index, reason } => {
                write!(f, "boot image entry {index}: name {reason}")
            }
            BootImageError::DuplicateName { index, other } => write!(
                f,
                "boot image entry {index}: name is already used by entry {other}"
            ),
            BootImageError::Misaligned { index, offset } => write!(
                f,
                "boot image entry {index}: offset {offset:#x} is not a multiple of {ALIGN:#x}"
            ),
            BootImageError::InsideTable {
                index,
                offset,
                table_end,
            } => write!(
                f,
                "boot image entry {index}: data at offset {offset:#x} is inside the header or \
                 the entry table (which end at {table_end:#x})"
            ),
            BootImageError::PastEnd {
                index,
                end,
                image_end,
            } => write!(
                f,
                "boot image entry {index}: data ends at {end:#x}, past the end of the image at \
                 {image_end:#x}"
            ),
            BootImageError::EndOverflows {
                index,
                offset,
                size,
            } => write!(
                f,
                "boot image entry {index}: offset {offset:#x} + size {size:#x} does not fit in 64 bits"
            ),
            BootImageError::Overlap { index, other } => write!(
                f,
                "boot image entry {index}: data overlaps the data of entry {other}"
            ),
            BootImageError::TooLarge => {
                f.write_str("boot image would be larger than the address space")
            }
        }
    }
}

/// One component in the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub name: &'a str,
    /// Offset of `data` from the image start; a multiple of [`ALIGN`].
    pub offset: u64,
    pub data: &'a [u8],
}

/// A validated boot image borrowed from its bytes.
///
/// Invariant: `bytes` is exactly the image (`total_size` long) and satisfies
/// every rule in the module docs, with `count` entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootImage<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> BootImage<'a> {
    /// Checks every rule of the format and borrows the image. Bytes after the
    /// header's `total_size` are ignored (see the module docs).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, BootImageError> {
        // Magic first, on whatever prefix is there, so that a short non-image
        // says "not an image" rather than "truncated".
        let prefix = bytes.len().min(MAGIC.len());
        if bytes.get(..prefix) != MAGIC.get(..prefix) {
            return Err(BootImageError::BadMagic);
        }
        let header = bytes.get(..HEADER_SIZE).ok_or(BootImageError::Truncated {
            need: HEADER_SIZE as u64,
            have: bytes.len() as u64,
        })?;
        let version = read_u32(header, 8).ok_or(BootImageError::BadMagic)?;
        let count = read_u32(header, 12).ok_or(BootImageError::BadMagic)?;
        let total_size = read_u64(header, 16).ok_or(BootImageError::BadMagic)?;
        let reserved = read_u64(header, 24).ok_or(BootImageError::BadMagic)?;
        if version != VERSION {
            return Err(BootImageError::UnsupportedVersion(version));
        }
        if count as usize > MAX_ENTRIES {
            return Err(BootImageError::TooManyEntries(count));
        }
        if reserved != 0 {
            return Err(BootImageError::ReservedNotZero(reserved));
        }
        let count = count as usize;
        // Cannot overflow: count <= 64.
        let table_end = HEADER_SIZE + count * ENTRY_SIZE;
        if bytes.len() < table_end {
            return Err(BootImageError::Truncated {
                need: table_end as u64,
                have: bytes.len() as u64,
            });
        }
        if total_size > bytes.len() as u64 {
            return Err(BootImageError::SizeMismatch {
                header: total_size,
                actual: bytes.len() as u64,
            });
        }
        if total_size < table_end as u64 {
            return Err(BootImageError::SizeBelowTable {
                header: total_size,
                table_end: table_end as u64,
            });
        }
        // total_size <= bytes.len(), so it fits in usize.
        let image = bytes
            .get(..total_size as usize)
            .ok_or(BootImageError::SizeMismatch {
                header: total_size,
                actual: bytes.len() as u64,
            })?;

        for index in 0..count {
            let e = raw_entry(image, index).ok_or(BootImageError::Truncated {
                need: table_end as u64,
                have: total_size,
            })?;
            let name =
                decode_name(e.name).map_err(|reason| BootImageError::BadName { index, reason })?;
            if e.offset % ALIGN != 0 {
                return Err(BootImageError::Misaligned {
                    index,
                    offset: e.offset,
                });
            }
            let end = e
                .offset
                .checked_add(e.size)
                .ok_or(BootImageError::EndOverflows {
                    index,
                    offset: e.offset,
                    size: e.size,
                })?;
            if e.offset < table_end as u64 {
                return Err(BootImageError::InsideTable {
                    index,
                    offset: e.offset,
                    table_end: table_end as u64,
                });
            }
            if end > total_size {
                return Err(BootImageError::PastEnd {
                    index,
                    end,
                    image_end: total_size,
                });
            }
            // Quadratic, but at most 64 entries. Earlier records were read
            // successfully above, so the `else` arm is unreachable.
            for other in 0..index {
                let Some(o) = raw_entry(image, other) else {
                    continue;
                };
                if decode_name(o.name) == Ok(name) {
                    return Err(BootImageError::DuplicateName { index, other });
                }
                // Half-open ranges: empty ones never intersect anything.
                let o_end = o.offset.saturating_add(o.size);
                if e.offset < o_end && o.offset < end {
                    return Err(BootImageError::Overlap { index, other });
                }
            }
        }
        Ok(BootImage {
            bytes: image,
            count,
        })
    }

    /// Size of the image in bytes (the header's `total_size`).
    // An image always has its 32-byte header, so an `is_empty` would be
    // constantly false; `count` says whether it carries components.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Number of entries.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The image's bytes, `len()` long.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The entries in table order.
    pub fn entries(&self) -> Entries<'a> {
        Entries {
            image: *self,
            next: 0,
        }
    }

    /// The entry called `name`, if any (names are unique).
    pub fn find(&self, name: &str) -> Option<Entry<'a>> {
        self.entries().find(|e| e.name == name)
    }

    fn entry(&self, index: usize) -> Option<Entry<'a>> {
        if index >= self.count {
            return None;
        }
        let e = raw_entry(self.bytes, index)?;
        let name = decode_name(e.name).ok()?;
        let start = usize::try_from(e.offset).ok()?;
        let end = start.checked_add(usize::try_from(e.size).ok()?)?;
        let data = self.bytes.get(start..end)?;
        Some(Entry {
            name,
            offset: e.offset,
            data,
        })
    }
}

impl BootImage<'_> {
    /// The page ranges of the image that become frames (module docs,
    /// "Frames"): region 0 is the header and entry table, region `i + 1`
    /// entry `i`'s pages (none for an empty entry).
    pub fn regions(&self) -> impl Iterator<Item = Region> + '_ {
        let table = (HEADER_SIZE + self.count * ENTRY_SIZE) as u64;
        let table = Region {
            offset: 0,
            pages: table.div_ceil(ALIGN),
        };
        core::iter::once(table).chain(self.entries().map(|e| Region {
            offset: e.offset,
            pages: (e.data.len() as u64).div_ceil(ALIGN),
        }))
    }

    /// How many frames the image's regions make for an image whose
    /// physical start is `phase` past a 2 MiB boundary.
    pub fn frame_count(&self, phase: u64) -> u64 {
        self.regions().map(|r| r.frame_count(phase)).sum()
    }

    /// Entry `name`'s region and the index of its first frame among all
    /// the image's frames (counted over [`BootImage::regions`] in order),
    /// for an image whose physical start is `phase` past a 2 MiB boundary.
    pub fn entry_frames(&self, name: &str, phase: u64) -> Option<(u64, Region)> {
        let mut first = 0;
        let index = self.entries().position(|e| e.name == name)?;
        for (i, region) in self.regions().enumerate() {
            if i == index + 1 {
                return Some((first, region));
            }
            first += region.frame_count(phase);
        }
        None
    }
}

/// A page range of the image that becomes frames ([`BootImage::regions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Offset of its first page from the image start (a multiple of
    /// [`ALIGN`]).
    pub offset: u64,
    /// Its pages.
    pub pages: u64,
}

impl Region {
    /// Its cut for an image whose physical start is `phase` past a 2 MiB
    /// boundary: 4 KiB frames before the first 2 MiB boundary, 2 MiB
    /// frames, 4 KiB frames after (counts).
    pub fn split(&self, phase: u64) -> (u64, u64, u64) {
        let start = phase.wrapping_add(self.offset) % LARGE / ALIGN;
        let head = if start == 0 {
            0
        } else {
            (PAGES_PER_LARGE - start).min(self.pages)
        };
        let rest = self.pages - head;
        (head, rest / PAGES_PER_LARGE, rest % PAGES_PER_LARGE)
    }

    /// Its frames.
    pub fn frame_count(&self, phase: u64) -> u64 {
        let (head, large, tail) = self.split(phase);
        head + large + tail
    }

    /// Whether it has a 2 MiB frame.
    pub fn has_large(&self, phase: u64) -> bool {
        self.split(phase).1 > 0
    }

    /// Frame `i` of it: its offset from the region's start and whether it
    /// is a 2 MiB frame; `None` past the last.
    pub fn frame(&self, phase: u64, i: u64) -> Option<(u64, bool)> {
        let (head, large, tail) = self.split(phase);
        if i < head {
            Some((i * ALIGN, false))
        } else if i - head < large {
            Some((head * ALIGN + (i - head) * LARGE, true))
        } else if i - head - large < tail {
            Some((
                (head + large * PAGES_PER_LARGE + (i - head - large)) * ALIGN,
                false,
            ))
        } else {
            None
        }
    }
}

/// Iterator over a [`BootImage`]'s entries.
#[derive(Clone, Debug)]
pub struct Entries<'a> {
    image: BootImage<'a>,
    next: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        // `entry` cannot fail for a validated image; if it somehow did, the
        // iteration simply ends rather than panicking.
        let e = self.image.entry(self.next)?;
        self.next += 1;
        Some(e)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.image.count.saturating_sub(self.next);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Entries<'_> {}

/// The entry the kernel starts: root, the first user-level component.
pub const ROOT: &str = "root";

/// Bytes of root's stack, which ends at [`abi::MAIN_STACK_TOP`]: the kernel
/// maps it below the top, so root's segments must end below it.
pub const ROOT_STACK_BYTES: u64 = 64 * 1024;

/// Where root's segments may lie: the user range below its stack.
pub const ROOT_LIMITS: Limits = Limits {
    user_end: abi::MAIN_STACK_TOP - ROOT_STACK_BYTES,
    min_addr: abi::map::USER_MAP_START,
};

/// Why the kernel cannot start root from a boot image ([`root_plan`]); the
/// kernel prints it as `==== FATAL BOOT ERROR: cannot start root: ... ====`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootError {
    /// The image breaks a rule of the format.
    Image(BootImageError),
    /// The image has no entry named [`ROOT`].
    NoRoot,
    /// Root's ELF file does not load within [`ROOT_LIMITS`].
    Elf(ElfError),
}

impl fmt::Display for RootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootError::Image(e) => write!(f, "boot image rejected: {e}"),
            RootError::NoRoot => write!(f, "the boot image has no component named '{ROOT}'"),
            RootError::Elf(e) => write!(f, "root's ELF file rejected: {e}"),
        }
    }
}

/// What the kernel checks of the boot image before it starts root: the
/// image is parsed, its [`ROOT`] entry found and root's ELF file checked
/// into a load plan within [`ROOT_LIMITS`]. The image, root's entry and
/// its plan; or the first thing that is wrong.
pub fn root_plan(bytes: &[u8]) -> Result<(BootImage<'_>, Entry<'_>, LoadPlan), RootError> {
    let image = BootImage::parse(bytes).map_err(RootError::Image)?;
    let root = image.find(ROOT).ok_or(RootError::NoRoot)?;
    let plan = LoadPlan::from_elf(root.data, &ROOT_LIMITS).map_err(RootError::Elf)?;
    Ok((image, root, plan))
}

/// Size of the image [`write_image`] produces for entries with these names
/// and data lengths, after checking the names and count. Lets a caller size
/// the output buffer first, since kcore has no allocator.
pub fn image_size(entries: &[(&str, u64)]) -> Result<usize, BootImageError> {
    layout(entries.len(), |i| entries.get(i).copied())
}

/// Writes an image of `entries` (name, data) in this order into the start of
/// `out` and returns its size; `out` must hold at least [`image_size`]
/// bytes. Bytes of `out` past the image are left alone.
pub fn write_image(entries: &[(&str, &[u8])], out: &mut [u8]) -> Result<usize, BootImageError> {
    let at = |i: usize| {
        entries
            .get(i)
            .map(|(name, data)| (*name, data.len() as u64))
    };
    let size = layout(entries.len(), at)?;
    let have = out.len() as u64;
    let image = out.get_mut(..size).ok_or(BootImageError::Truncated {
        need: size as u64,
        have,
    })?;
    // Padding and unused name bytes must be zero, and the output
    // deterministic for the same input.
    image.fill(0);

    let table_end = (HEADER_SIZE + entries.len() * ENTRY_SIZE) as u64;
    put(image, 0, &MAGIC)?;
    put(image, 8, &VERSION.to_le_bytes())?;
    put(image, 12, &(entries.len() as u32).to_le_bytes())?;
    put(image, 16, &(size as u64).to_le_bytes())?;
    let mut cursor = table_end;
    for (index, (name, data)) in entries.iter().enumerate() {
        let offset = entry_offset(cursor, data.len() as u64).ok_or(BootImageError::TooLarge)?;
        let record = HEADER_SIZE + index * ENTRY_SIZE;
        put(image, record, name.as_bytes())?;
        put(image, record + NAME_LEN, &offset.to_le_bytes())?;
        put(
            image,
            record + NAME_LEN + 8,
            &(data.len() as u64).to_le_bytes(),
        )?;
        let start = usize::try_from(offset).map_err(|_| BootImageError::TooLarge)?;
        put(image, start, data)?;
        cursor = offset
            .checked_add(data.len() as u64)
            .ok_or(BootImageError::TooLarge)?;
    }
    Ok(size)
}

/// Checks count and names of `count` entries given by `at(i)` = (name, size)
/// and returns the image size: the shared first half of both writer
/// functions, so they cannot disagree about the layout.
fn layout<'n>(
    count: usize,
    at: impl Fn(usize) -> Option<(&'n str, u64)>,
) -> Result<usize, BootImageError> {
    if count > MAX_ENTRIES {
        return Err(BootImageError::TooManyEntries(
            u32::try_from(count).unwrap_or(u32::MAX),
        ));
    }
    let mut cursor = (HEADER_SIZE + count * ENTRY_SIZE) as u64;
    for index in 0..count {
        let (name, size) = at(index).ok_or(BootImageError::TooLarge)?;
        check_name(name).map_err(|reason| BootImageError::BadName { index, reason })?;
        for other in 0..index {
            if at(other).is_some_and(|(n, _)| n == name) {
                return Err(BootImageError::DuplicateName { index, other });
            }
        }
        let offset = entry_offset(cursor, size).ok_or(BootImageError::TooLarge)?;
        cursor = offset.checked_add(size).ok_or(BootImageError::TooLarge)?;
    }
    usize::try_from(cursor).map_err(|_| BootImageError::TooLarge)
}

/// Where the writer puts an entry of `size` bytes whose data may start at
/// `cursor`: the next page, or the next 2 MiB for an entry of [`LARGE`] or
/// more.
fn entry_offset(cursor: u64, size: u64) -> Option<u64> {
    if size >= LARGE {
        Some(cursor.checked_add(LARGE - 1)? & !(LARGE - 1))
    } else {
        align_up(cursor)
    }
}

/// An entry-table record, undecoded.
struct RawEntry<'a> {
    name: &'a [u8],
    offset: u64,
    size: u64,
}

fn raw_entry(image: &[u8], index: usize) -> Option<RawEntry<'_>> {
    let start = HEADER_SIZE.checked_add(index.checked_mul(ENTRY_SIZE)?)?;
    let record = image.get(start..start.checked_add(ENTRY_SIZE)?)?;
    Some(RawEntry {
        name: record.get(..NAME_LEN)?,
        offset: read_u64(record, NAME_LEN)?,
        size: read_u64(record, NAME_LEN + 8)?,
    })
}

/// The name in a NUL-padded field, if it follows the rules.
fn decode_name(field: &[u8]) -> Result<&str, NameFault> {
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    let (name, padding) = field.split_at(len);
    if name.is_empty() {
        return Err(NameFault::Empty);
    }
    // A non-NUL byte after the first NUL means the name has a NUL inside.
    if padding.iter().any(|&b| b != 0) {
        return Err(NameFault::NulInside);
    }
    core::str::from_utf8(name).map_err(|_| NameFault::NotUtf8)
}

/// The writer's side of the name rules (a `&str` is UTF-8 already).
fn check_name(name: &str) -> Result<(), NameFault> {
    if name.is_empty() {
        Err(NameFault::Empty)
    } else if name.len() > NAME_LEN {
        Err(NameFault::TooLong)
    } else if name.as_bytes().contains(&0) {
        Err(NameFault::NulInside)
    } else {
        Ok(())
    }
}

fn align_up(x: u64) -> Option<u64> {
    Some(x.checked_add(ALIGN - 1)? & !(ALIGN - 1))
}

/// Copies `src` into `image` at `at`; the layout was computed beforehand, so
/// failure means a bug, reported as an error rather than a panic.
fn put(image: &mut [u8], at: usize, src: &[u8]) -> Result<(), BootImageError> {
    let end = at.checked_add(src.len()).ok_or(BootImageError::TooLarge)?;
    image
        .get_mut(at..end)
        .ok_or(BootImageError::TooLarge)?
        .copy_from_slice(src);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::string::String;
    use std::vec;
    use std::vec::Vec;

    fn build(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let sizes: Vec<(&str, u64)> = entries.iter().map(|(n, d)| (*n, d.len() as u64)).collect();
        let size = image_size(&sizes).unwrap();
        let mut out = vec![0xAA; size + 100];
        assert_eq!(write_image(entries, &mut out).unwrap(), size);
        // Bytes past the image are untouched.
        assert!(out[size..].iter().all(|&b| b == 0xAA));
        out.truncate(size);
        out
    }

    fn sample() -> Vec<u8> {
        let init: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        build(&[
            ("root", b"\x7fELF root component"),
            ("init", &init),
            ("empty", b""),
            ("drivers/serial-with-a-long-name-of-forty-eight!!", b"x"),
        ])
    }

    fn set_u32(img: &mut [u8], at: usize, v: u32) {
        img[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn set_u64(img: &mut [u8], at: usize, v: u64) {
        img[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    fn entry_at(index: usize) -> usize {
        HEADER_SIZE + index * ENTRY_SIZE
    }

    #[test]
    fn large_entries_start_on_2_mib() {
        let big = vec![7u8; (LARGE + 5000) as usize];
        let img = build(&[("small", b"abc"), ("big", &big), ("after", b"z")]);
        let parsed = BootImage::parse(&img).unwrap();
        let e: Vec<Entry> = parsed.entries().collect();
        assert_eq!(e[0].offset, 4096);
        assert_eq!(e[1].offset, LARGE);
        assert_eq!(e[1].data, &big[..]);
        assert_eq!(e[2].offset, LARGE + (LARGE + 8192));
    }

    #[test]
    fn frames_cut_each_region_without_crossing_it() {
        let big = vec![1u8; (3 * LARGE + 100) as usize];
        let img = build(&[("root", b"r"), ("big", &big), ("tiny", b"t")]);
        let image = BootImage::parse(&img).unwrap();
        let regions: Vec<Region> = image.regions().collect();
        assert_eq!(regions.len(), 4);
        assert_eq!(
            regions[0],
            Region {
                offset: 0,
                pages: 1
            }
        );
        assert_eq!(regions[2].pages, 3 * PAGES_PER_LARGE + 1);
        // Aligned physically: the big entry is three 2 MiB frames and a page.
        assert_eq!(regions[2].split(0), (0, 3, 1));
        assert_eq!(regions[2].frame(0, 2), Some((2 * LARGE, true)));
        assert_eq!(regions[2].frame(0, 3), Some((3 * LARGE, false)));
        assert_eq!(regions[2].frame(0, 4), None);
        assert_eq!(image.frame_count(0), 1 + 1 + 4 + 1);
        assert_eq!(image.entry_frames("big", 0), Some((2, regions[2])));
        assert_eq!(image.entry_frames("tiny", 0).map(|f| f.0), Some(6));
        assert_eq!(image.entry_frames("nope", 0), None);
        // Any phase: frames tile the region exactly, large ones on
        // physical 2 MiB boundaries, and every frame lies inside it.
        for phase in (0..LARGE).step_by(ALIGN as usize * 37) {
            for r in &regions {
                let mut next = 0;
                let mut i = 0;
                while let Some((off, large)) = r.frame(phase, i) {
                    assert_eq!(off, next);
                    if large {
                        assert_eq!((phase + r.offset + off) % LARGE, 0);
                    }
                    next = off + if large { LARGE } else { ALIGN };
                    i += 1;
                }
                assert_eq!(next, r.pages * ALIGN);
                assert_eq!(i, r.frame_count(phase));
            }
        }
        // A phase of one page: the big entry's head is 511 pages.
        assert_eq!(regions[2].split(ALIGN), (511, 2, 2));
        assert!(regions[2].has_large(ALIGN));
        assert!(!regions[3].has_large(0));
    }

    #[test]
    fn round_trip() {
        let init: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let long = "drivers/serial-with-a-long-name-of-forty-eight!!";
        assert_eq!(long.len(), NAME_LEN);
        let img = sample();
        let parsed = BootImage::parse(&img).unwrap();
        assert_eq!(parsed.len(), img.len());
        assert_eq!(parsed.count(), 4);
        let entries: Vec<Entry> = parsed.entries().collect();
        assert_eq!(parsed.entries().len(), 4);
        assert_eq!(entries.len(), 4);
        assert_eq!(entries[0].name, "root");
        assert_eq!(entries[0].data, b"\x7fELF root component");
        assert_eq!(entries[0].offset, 4096);
        assert_eq!(entries[1].name, "init");
        assert_eq!(entries[1].data, &init[..]);
        assert_eq!(entries[1].offset, 8192);
        assert_eq!(entries[2].name, "empty");
        assert_eq!(entries[2].data, b"");
        assert_eq!(entries[3].name, long);
        assert_eq!(entries[3].data, b"x");
        // No padding after the last entry.
        assert_eq!(img.len() as u64, entries[3].offset + 1);
        for e in &entries {
            assert_eq!(e.offset % ALIGN, 0);
        }
        assert_eq!(parsed.find("init").unwrap().data, &init[..]);
        assert_eq!(parsed.find("empty").unwrap().data, b"");
        assert!(parsed.find("nope").is_none());
        assert!(parsed.find("").is_none());
    }

    #[test]
    fn empty_image_and_trailing_bytes() {
        let img = build(&[]);
        assert_eq!(img.len(), HEADER_SIZE);
        let parsed = BootImage::parse(&img).unwrap();
        assert_eq!(parsed.count(), 0);
        assert_eq!(parsed.entries().count(), 0);

        // A page-rounded slice: the extra bytes are ignored.
        let mut padded = sample();
        let len = padded.len();
        padded.resize(len.next_multiple_of(4096), 0xFF);
        let parsed = BootImage::parse(&padded).unwrap();
        assert_eq!(parsed.len(), len);
        assert_eq!(parsed.as_bytes(), &padded[..len]);
    }

    #[test]
    fn writer_errors() {
        assert_eq!(
            image_size(&[("a", 1), ("", 1)]),
            Err(BootImageError::BadName {
                index: 1,
                reason: NameFault::Empty
            })
        );
        let long = "x".repeat(NAME_LEN + 1);
        assert_eq!(
            image_size(&[(&long, 1)]),
            Err(BootImageError::BadName {
                index: 0,
                reason: NameFault::TooLong
            })
        );
        assert_eq!(
            image_size(&[("a\0b", 1)]),
            Err(BootImageError::BadName {
                index: 0,
                reason: NameFault::NulInside
            })
        );
        assert_eq!(
            image_size(&[("a", 1), ("b", 1), ("a", 2)]),
            Err(BootImageError::DuplicateName { index: 2, other: 0 })
        );
        let many: Vec<String> = (0..=MAX_ENTRIES).map(|i| std::format!("m{i}")).collect();
        let sizes: Vec<(&str, u64)> = many.iter().map(|n| (n.as_str(), 0)).collect();
        assert_eq!(image_size(&sizes), Err(BootImageError::TooManyEntries(65)));
        assert!(image_size(&sizes[..MAX_ENTRIES]).is_ok());
        assert_eq!(
            image_size(&[("a", u64::MAX - 100)]),
            Err(BootImageError::TooLarge)
        );
        let mut small = [0u8; 100];
        assert_eq!(
            write_image(&[("a", b"data")], &mut small),
            Err(BootImageError::Truncated {
                need: 4100,
                have: 100
            })
        );
    }

    #[test]
    fn header_errors() {
        let good = sample();
        assert_eq!(
            BootImage::parse(b""),
            Err(BootImageError::Truncated { need: 32, have: 0 })
        );
        assert_eq!(
            BootImage::parse(b"PECAN"),
            Err(BootImageError::Truncated { need: 32, have: 5 })
        );
        assert_eq!(BootImage::parse(b"ELF"), Err(BootImageError::BadMagic));

        let mut img = good.clone();
        img[7] = b'X';
        assert_eq!(BootImage::parse(&img), Err(BootImageError::BadMagic));

        let mut img = good.clone();
        set_u32(&mut img, 8, 2);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::UnsupportedVersion(2))
        );

        let mut img = good.clone();
        set_u32(&mut img, 12, 65);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::TooManyEntries(65))
        );

        let mut img = good.clone();
        set_u64(&mut img, 24, 1);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::ReservedNotZero(1))
        );

        let mut img = good.clone();
        set_u64(&mut img, 16, good.len() as u64 + 1);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::SizeMismatch {
                header: good.len() as u64 + 1,
                actual: good.len() as u64
            })
        );

        // total_size too small for its own entry table.
        let mut img = good.clone();
        set_u64(&mut img, 16, 40);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::SizeBelowTable {
                header: 40,
                table_end: (HEADER_SIZE + 4 * ENTRY_SIZE) as u64,
            })
        );

        // The table itself runs past the bytes.
        assert_eq!(
            BootImage::parse(&good[..100]),
            Err(BootImageError::Truncated {
                need: (HEADER_SIZE + 4 * ENTRY_SIZE) as u64,
                have: 100
            })
        );
    }

    #[test]
    fn entry_errors() {
        let good = sample();

        let mut img = good.clone();
        img[entry_at(1)..entry_at(1) + NAME_LEN].fill(0);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::BadName {
                index: 1,
                reason: NameFault::Empty
            })
        );

        let mut img = good.clone();
        img[entry_at(0) + 10] = b'z'; // after "root\0..."
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::BadName {
                index: 0,
                reason: NameFault::NulInside
            })
        );

        let mut img = good.clone();
        img[entry_at(0) + 1] = 0xFF;
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::BadName {
                index: 0,
                reason: NameFault::NotUtf8
            })
        );

        let mut img = good.clone();
        img[entry_at(2)..entry_at(2) + 5].copy_from_slice(b"root\0");
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::DuplicateName { index: 2, other: 0 })
        );

        let mut img = good.clone();
        set_u64(&mut img, entry_at(1) + NAME_LEN, 8192 + 16);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::Misaligned {
                index: 1,
                offset: 8192 + 16
            })
        );

        // Past the end.
        let mut img = good.clone();
        set_u64(&mut img, entry_at(3) + NAME_LEN + 8, 2);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::PastEnd {
                index: 3,
                end: 16386,
                image_end: 16385
            })
        );
        // Inside the header/table.
        let mut img = good.clone();
        set_u64(&mut img, entry_at(2) + NAME_LEN, 0);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::InsideTable {
                index: 2,
                offset: 0,
                table_end: 288
            })
        );
        // offset + size overflows.
        let mut img = good.clone();
        set_u64(&mut img, entry_at(0) + NAME_LEN + 8, u64::MAX - 100);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::EndOverflows {
                index: 0,
                offset: 4096,
                size: u64::MAX - 100
            })
        );

        // Entry 1 moved onto entry 0's page.
        let mut img = good.clone();
        set_u64(&mut img, entry_at(1) + NAME_LEN, 4096);
        assert_eq!(
            BootImage::parse(&img),
            Err(BootImageError::Overlap { index: 1, other: 0 })
        );
        // An empty entry sharing an offset overlaps nothing.
        let mut img = good.clone();
        set_u64(&mut img, entry_at(2) + NAME_LEN, 4096);
        assert!(BootImage::parse(&img).is_ok());
    }

    #[test]
    fn every_error_displays_exactly() {
        let cases: [(BootImageError, &str); 18] = [
            (
                BootImageError::BadMagic,
                "boot image does not start with the magic \"PECANIMG\"",
            ),
            (
                BootImageError::UnsupportedVersion(2),
                "boot image has version 2, only version 1 is supported",
            ),
            (
                BootImageError::TooManyEntries(65),
                "boot image has 65 entries, at most 64 are allowed",
            ),
            (
                BootImageError::Truncated { need: 32, have: 1 },
                "boot image is truncated: needs 32 bytes, has 1",
            ),
            (
                BootImageError::SizeMismatch {
                    header: 9,
                    actual: 8,
                },
                "boot image header says the image is 9 bytes, but only 8 bytes are present",
            ),
            (
                BootImageError::SizeBelowTable {
                    header: 40,
                    table_end: 96,
                },
                "boot image header says the image is 40 bytes, less than its header and entry \
                 table (96 bytes)",
            ),
            (
                BootImageError::ReservedNotZero(1),
                "boot image header's reserved field is 0x1, must be 0",
            ),
            (
                BootImageError::BadName {
                    index: 1,
                    reason: NameFault::Empty,
                },
                "boot image entry 1: name is empty",
            ),
            (
                BootImageError::BadName {
                    index: 1,
                    reason: NameFault::TooLong,
                },
                "boot image entry 1: name is longer than 48 bytes",
            ),
            (
                BootImageError::BadName {
                    index: 1,
                    reason: NameFault::NulInside,
                },
                "boot image entry 1: name has a NUL byte inside it",
            ),
            (
                BootImageError::BadName {
                    index: 1,
                    reason: NameFault::NotUtf8,
                },
                "boot image entry 1: name is not valid UTF-8",
            ),
            (
                BootImageError::DuplicateName { index: 2, other: 0 },
                "boot image entry 2: name is already used by entry 0",
            ),
            (
                BootImageError::Misaligned {
                    index: 3,
                    offset: 0x1010,
                },
                "boot image entry 3: offset 0x1010 is not a multiple of 0x1000",
            ),
            (
                BootImageError::InsideTable {
                    index: 1,
                    offset: 0,
                    table_end: 0xe0,
                },
                "boot image entry 1: data at offset 0x0 is inside the header or the entry table \
                 (which end at 0xe0)",
            ),
            (
                BootImageError::PastEnd {
                    index: 1,
                    end: 0x3001,
                    image_end: 0x3000,
                },
                "boot image entry 1: data ends at 0x3001, past the end of the image at 0x3000",
            ),
            (
                BootImageError::EndOverflows {
                    index: 1,
                    offset: 0x1000,
                    size: u64::MAX,
                },
                "boot image entry 1: offset 0x1000 + size 0xffffffffffffffff does not fit in 64 \
                 bits",
            ),
            (
                BootImageError::Overlap { index: 2, other: 1 },
                "boot image entry 2: data overlaps the data of entry 1",
            ),
            (
                BootImageError::TooLarge,
                "boot image would be larger than the address space",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(std::format!("{e}"), want);
        }
    }

    /// An independent, straightforward (std-using) statement of the rules,
    /// to judge what the parser should do with mutated images.
    fn reference_valid(b: &[u8]) -> Option<Vec<(String, u64, u64)>> {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        if b.len() < 32 || b[..8] != *b"PECANIMG" || u32_at(8) != 1 || u64_at(24) != 0 {
            return None;
        }
        let count = u32_at(12) as u128;
        let total = u64_at(16) as u128;
        let table_end = 32 + 64 * count;
        if count > 64 || table_end > b.len() as u128 || total > b.len() as u128 || total < table_end
        {
            return None;
        }
        let mut names = HashSet::new();
        let mut out: Vec<(String, u64, u64)> = Vec::new();
        for i in 0..count as usize {
            let r = &b[32 + 64 * i..32 + 64 * (i + 1)];
            let field = &r[..48];
            let n = field.iter().position(|&c| c == 0).unwrap_or(48);
            if n == 0 || field[n..].iter().any(|&c| c != 0) {
                return None;
            }
            let name = String::from(std::str::from_utf8(&field[..n]).ok()?);
            let (off, size) = (u64_at(32 + 64 * i + 48), u64_at(32 + 64 * i + 56));
            let end = off as u128 + size as u128;
            if off % 4096 != 0 || (off as u128) < table_end || end > total {
                return None;
            }
            if !names.insert(name.clone()) {
                return None;
            }
            for (_, o_off, o_size) in &out {
                if (off as u128) < *o_off as u128 + *o_size as u128 && (*o_off as u128) < end {
                    return None;
                }
            }
            out.push((name, off, size));
        }
        Some(out)
    }

    fn check_against_reference(bytes: &[u8]) -> bool {
        let got = BootImage::parse(bytes);
        let want = reference_valid(bytes);
        match (got, want) {
            (Ok(img), Some(entries)) => {
                let got: Vec<(String, u64, u64)> = img
                    .entries()
                    .map(|e| (String::from(e.name), e.offset, e.data.len() as u64))
                    .collect();
                assert_eq!(got, entries);
                true
            }
            (Err(_), None) => false,
            (got, want) => panic!("parser says {got:?}, reference says {want:?}"),
        }
    }

    #[test]
    fn truncation_never_panics_and_never_passes() {
        let img = sample();
        for len in 0..img.len() {
            assert!(BootImage::parse(&img[..len]).is_err(), "length {len}");
            check_against_reference(&img[..len]);
        }
        assert!(check_against_reference(&img));
    }

    #[test]
    fn random_mutations_agree_with_reference() {
        let mut rng = crate::test_rng::Rng(0x9E37_79B9_7F4A_7C15);
        let mut rand = move || rng.next();
        let good = sample();
        // Mutations concentrate on the header and table, where the rules
        // are; a few land in the data, which must not matter.
        let hot = HEADER_SIZE + 4 * ENTRY_SIZE;
        let interesting: [u8; 8] = [0, 1, 0x10, 0x20, 0x40, 0xFF, 0x7F, b'r'];
        let mut ok = 0;
        for _ in 0..20_000 {
            let mut img = good.clone();
            for _ in 0..1 + rand() % 3 {
                let r = rand();
                let at = if r % 8 == 0 {
                    (r >> 8) as usize % img.len()
                } else {
                    (r >> 8) as usize % hot
                };
                img[at] = if r & 0x10 != 0 {
                    interesting[(r >> 5) as usize % interesting.len()]
                } else {
                    (r >> 40) as u8
                };
            }
            if check_against_reference(&img) {
                ok += 1;
            }
        }
        // Both outcomes must have been exercised.
        assert!(ok > 100 && ok < 20_000, "{ok} mutants were valid");
    }
}
