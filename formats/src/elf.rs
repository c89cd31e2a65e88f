//! The load plan of a component: a static, non-PIE ELF64 x86_64 executable.
//!
//! The kernel loads the root task with this, and the root task loads every
//! other component. [`LoadPlan::from_elf`] reads the ELF header and program
//! headers of untrusted bytes, checks them against the rules below and the
//! caller's [`Limits`], and returns the entry point and the `PT_LOAD`
//! segments. It never panics and never allocates; the loader then maps
//! `mem_size` bytes at each segment's `vaddr`, copies the `file_size` bytes
//! at `file_offset` there and zero-fills the rest.
//!
//! The ELF is parsed by hand rather than with `xmas-elf` or `goblin`:
//! `xmas-elf` 0.10 slices the program-header table without bounds checks
//! (a malformed `e_phoff` panics) and reinterprets unaligned bytes as
//! structs; `goblin`'s little-endian ELF reader (`endian_fd`) pulls in
//! `alloc`, which the kernel does not have. The part needed here is two
//! fixed little-endian layouts, read with checked offsets.
//!
//! # What is accepted
//!
//! - `\x7fELF`, ELFCLASS64, ELFDATA2LSB, EV_CURRENT in both version fields,
//!   `e_machine` = 62 (x86_64), `e_type` = ET_EXEC. ET_DYN (PIE, shared
//!   objects, static-pie) is refused: components are linked non-PIE, at the
//!   addresses they run at, so the loader never relocates.
//! - `e_phentsize` = 56 and the program-header table inside the file.
//! - `PT_INTERP` is refused: such a file needs a dynamic linker.
//! - Every other non-`PT_LOAD` header (`PT_TLS`, `PT_GNU_STACK`, `PT_NOTE`,
//!   `PT_GNU_RELRO`, `PT_PHDR`, ...) is ignored: their bytes, if any, lie
//!   inside a `PT_LOAD` segment anyway, and stacks are never executable here.
//! - `PT_LOAD` segments, at most [`MAX_SEGMENTS`], each with
//!   `file_size <= mem_size`, its file bytes inside the file, no address
//!   overflow, its page-rounded range inside `[min_addr, user_end)`, not both
//!   writable and executable (W^X), and no page shared with another segment
//!   (two segments on one page would need conflicting permissions). A
//!   `PT_LOAD` with `mem_size` 0 maps nothing and is dropped after the file
//!   checks. `p_align` and `p_paddr` are not used.
//! - The entry point lies in the file-backed bytes of an executable segment
//!   (the zero-filled tail would be zeros, not code).
//!
//! Segments keep the ELF's order and its exact `vaddr`; page rounding is the
//! loader's business ([`Segment::page_range`]). "Segment N" in errors is
//! program header N, counted from 0 over all program headers as
//! `readelf -l` lists them.

use core::fmt;

use crate::bytes::{read_u16, read_u32, read_u64, read_u8};
use crate::PAGE_SIZE;

/// Most `PT_LOAD` segments a component may have; linkers emit three or four.
pub const MAX_SEGMENTS: usize = 16;

/// `e_machine` of x86_64.
pub const EM_X86_64: u16 = 62;

const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;
const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const PF_X: u32 = 1;
const PF_W: u32 = 2;
const PF_R: u32 = 4;
const PAGE_MASK: u64 = PAGE_SIZE - 1;

/// Where the loader may put segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Every segment's page-rounded end must be at or below this.
    pub user_end: u64,
    /// Every segment's page-rounded start must be at or above this
    /// (`abi::map::USER_MAP_START` keeps the lowest 64 KiB unmapped so
    /// null dereferences fault).
    pub min_addr: u64,
}

impl Limits {
    /// What `Map` accepts: `[abi::map::USER_MAP_START,
    /// abi::map::USER_MAP_END)`, the lower half without its lowest 64 KiB
    /// and its last page.
    pub const LOWER_HALF: Limits = Limits {
        user_end: abi::map::USER_MAP_END,
        min_addr: abi::map::USER_MAP_START,
    };
}

/// One `PT_LOAD` segment. For segments of a [`LoadPlan`] the address and
/// file arithmetic is known not to overflow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// Virtual address of the first byte, as in the ELF (not page-rounded).
    pub vaddr: u64,
    /// Bytes in memory: `file_size` from the file, the rest zero-filled.
    pub mem_size: u64,
    /// Offset of the file bytes in the ELF.
    pub file_offset: u64,
    /// Bytes taken from the file; `<= mem_size`.
    pub file_size: u64,
    pub readable: bool,
    pub writable: bool,
    pub executable: bool,
}

impl Segment {
    /// `(first page start, end rounded up to a page)`: the pages the loader
    /// maps. Saturates instead of overflowing, which only a hand-made
    /// `Segment` can reach; a [`LoadPlan`]'s segments never do.
    pub fn page_range(&self) -> (u64, u64) {
        let end = self
            .vaddr
            .saturating_add(self.mem_size)
            .saturating_add(PAGE_MASK)
            & !PAGE_MASK;
        (self.vaddr & !PAGE_MASK, end)
    }

    /// The segment's bytes in `elf` (the file the plan was made from), or
    /// `None` if they are not inside it.
    pub fn file_bytes<'a>(&self, elf: &'a [u8]) -> Option<&'a [u8]> {
        let start = usize::try_from(self.file_offset).ok()?;
        let len = usize::try_from(self.file_size).ok()?;
        elf.get(start..start.checked_add(len)?)
    }

    /// Whether the file bytes sit at the same offset within a page as the
    /// segment in memory, so a loader could map the file's pages directly
    /// instead of copying (linkers arrange this; `-N`/`-n` links do not).
    pub fn page_congruent(&self) -> bool {
        self.vaddr & PAGE_MASK == self.file_offset & PAGE_MASK
    }
}

/// What a loader needs: the entry point and the segments to map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadPlan {
    entry: u64,
    segments: [Segment; MAX_SEGMENTS],
    count: usize,
}

/// Why an ELF file cannot be loaded. `index` is a program-header index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElfError {
    /// The file does not start with `\x7fELF`.
    NotElf,
    /// The file is shorter than the 64-byte ELF64 header.
    TruncatedHeader { have: usize },
    /// `EI_CLASS` is not ELFCLASS64 (2).
    Not64Bit { class: u8 },
    /// `EI_DATA` is not ELFDATA2LSB (1).
    NotLittleEndian { data: u8 },
    /// `EI_VERSION` or `e_version` is not EV_CURRENT (1).
    UnsupportedVersion { version: u32 },
    /// `e_machine` is not x86_64 (62).
    WrongMachine { machine: u16 },
    /// `e_type` is ET_DYN: a PIE or shared object.
    PositionIndependent,
    /// `e_type` is neither ET_EXEC nor ET_DYN (e.g. a relocatable object).
    NotExecutable { e_type: u16 },
    /// `e_phentsize` is not 56.
    BadProgramHeaderSize { size: u16 },
    /// The program-header table does not lie inside the file.
    ProgramHeadersOutOfBounds { offset: u64, count: u16 },
    /// A `PT_INTERP` header: the file wants a dynamic linker.
    DynamicallyLinked { index: usize },
    /// More than [`MAX_SEGMENTS`] non-empty `PT_LOAD`s; `index` is the first
    /// one past the limit.
    TooManySegments { index: usize },
    /// A segment takes more bytes from the file than it occupies in memory.
    FileSizeExceedsMemSize {
        index: usize,
        file_size: u64,
        mem_size: u64,
    },
    /// A segment's file bytes are not inside the file.
    SegmentOutsideFile {
        index: usize,
        offset: u64,
        size: u64,
    },
    /// A segment's end address (or its page-rounded end) overflows 64 bits.
    AddressOverflow { index: usize },
    /// A segment's first page starts below `Limits::min_addr`.
    BelowMinAddr {
        index: usize,
        page: u64,
        min_addr: u64,
    },
    /// A segment's page-rounded end lies above `Limits::user_end`.
    AboveUserEnd {
        index: usize,
        end: u64,
        user_end: u64,
    },
    /// A segment is both writable and executable.
    WriteAndExecute { index: usize },
    /// Segment `index` shares pages with the earlier segment `other`,
    /// starting at page `page`.
    Overlap {
        index: usize,
        other: usize,
        page: u64,
    },
    /// No non-empty `PT_LOAD` segment.
    NoLoadSegments,
    /// The entry point is not in the file bytes of an executable segment.
    EntryNotExecutable { entry: u64 },
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ElfError::NotElf => f.write_str("not an ELF file (no \\x7fELF magic)"),
            ElfError::TruncatedHeader { have } => write!(
                f,
                "ELF header truncated: needs {EHDR_SIZE} bytes, file has {have}"
            ),
            ElfError::Not64Bit { class } => {
                write!(f, "ELF class {class} is not ELFCLASS64 (2): not a 64-bit file")
            }
            ElfError::NotLittleEndian { data } => {
                write!(f, "ELF data encoding {data} is not ELFDATA2LSB (1): not little-endian")
            }
            ElfError::UnsupportedVersion { version } => {
                write!(f, "ELF version {version} is not EV_CURRENT (1)")
            }
            ElfError::WrongMachine { machine } => {
                write!(f, "ELF machine {machine} is not x86_64 ({EM_X86_64})")
            }
            ElfError::PositionIndependent => f.write_str(
                "ELF type is ET_DYN (position-independent): components must be linked non-PIE \
                 (static, ET_EXEC)",
            ),
            ElfError::NotExecutable { e_type } => {
                write!(f, "ELF type {e_type} is not an executable (ET_EXEC = 2)")
            }
            ElfError::BadProgramHeaderSize { size } => write!(
                f,
                "program header entry size is {size}, ELF64 needs {PHDR_SIZE}"
            ),
            ElfError::ProgramHeadersOutOfBounds { offset, count } => write!(
                f,
                "program header table ({count} entries at offset {offset:#x}) runs past the end of the file"
            ),
            ElfError::DynamicallyLinked { index } => write!(
                f,
                "segment {index} is PT_INTERP: components must be linked statically"
            ),
            ElfError::TooManySegments { index } => write!(
                f,
                "segment {index} is PT_LOAD number {}: at most {MAX_SEGMENTS} are supported",
                MAX_SEGMENTS + 1
            ),
            ElfError::FileSizeExceedsMemSize {
                index,
                file_size,
                mem_size,
            } => write!(
                f,
                "segment {index} has file size {file_size:#x} larger than its memory size {mem_size:#x}"
            ),
            ElfError::SegmentOutsideFile {
                index,
                offset,
                size,
            } => write!(
                f,
                "segment {index}'s file bytes ({size:#x} at offset {offset:#x}) run past the end of the file"
            ),
            ElfError::AddressOverflow { index } => {
                write!(f, "segment {index}'s end address overflows 64 bits")
            }
            ElfError::BelowMinAddr {
                index,
                page,
                min_addr,
            } => write!(
                f,
                "segment {index} starts on page {page:#x}, below the lowest allowed address {min_addr:#x}"
            ),
            ElfError::AboveUserEnd {
                index,
                end,
                user_end,
            } => write!(
                f,
                "segment {index} ends at {end:#x} (page-rounded), above the end of user space {user_end:#x}"
            ),
            ElfError::WriteAndExecute { index } => {
                write!(f, "segment {index} is both writable and executable (W^X)")
            }
            ElfError::Overlap { index, other, page } => {
                write!(f, "segment {index} overlaps segment {other} at {page:#x}")
            }
            ElfError::NoLoadSegments => f.write_str("ELF file has no PT_LOAD segment"),
            ElfError::EntryNotExecutable { entry } => write!(
                f,
                "entry point {entry:#x} is not inside the file bytes of an executable segment"
            ),
        }
    }
}

impl LoadPlan {
    /// Checks `bytes` as described in the module docs and returns what to load.
    pub fn from_elf(bytes: &[u8], limits: &Limits) -> Result<LoadPlan, ElfError> {
        let magic = b"\x7fELF";
        // Magic first, on whatever prefix exists, so a short non-ELF file is
        // "not ELF" and a short ELF file is "truncated".
        let prefix = bytes.len().min(magic.len());
        if bytes.get(..prefix) != magic.get(..prefix) {
            return Err(ElfError::NotElf);
        }
        let truncated = ElfError::TruncatedHeader { have: bytes.len() };
        let ehdr = bytes.get(..EHDR_SIZE).ok_or(truncated)?;
        let class = read_u8(ehdr, 4).ok_or(truncated)?;
        let data = read_u8(ehdr, 5).ok_or(truncated)?;
        let ident_version = read_u8(ehdr, 6).ok_or(truncated)?;
        let e_type = read_u16(ehdr, 16).ok_or(truncated)?;
        let machine = read_u16(ehdr, 18).ok_or(truncated)?;
        let version = read_u32(ehdr, 20).ok_or(truncated)?;
        let entry = read_u64(ehdr, 24).ok_or(truncated)?;
        let phoff = read_u64(ehdr, 32).ok_or(truncated)?;
        let phentsize = read_u16(ehdr, 54).ok_or(truncated)?;
        let phnum = read_u16(ehdr, 56).ok_or(truncated)?;

        if class != 2 {
            return Err(ElfError::Not64Bit { class });
        }
        if data != 1 {
            return Err(ElfError::NotLittleEndian { data });
        }
        if ident_version != 1 {
            return Err(ElfError::UnsupportedVersion {
                version: ident_version.into(),
            });
        }
        if version != 1 {
            return Err(ElfError::UnsupportedVersion { version });
        }
        if machine != EM_X86_64 {
            return Err(ElfError::WrongMachine { machine });
        }
        match e_type {
            ET_EXEC => {}
            ET_DYN => return Err(ElfError::PositionIndependent),
            _ => return Err(ElfError::NotExecutable { e_type }),
        }
        if phnum == 0 {
            return Err(ElfError::NoLoadSegments);
        }
        if usize::from(phentsize) != PHDR_SIZE {
            return Err(ElfError::BadProgramHeaderSize { size: phentsize });
        }
        // phnum <= 0xffff and PHDR_SIZE = 56, so the product fits in u64.
        let table = usize::try_from(phoff)
            .ok()
            .and_then(|start| {
                let end = start.checked_add(usize::from(phnum) * PHDR_SIZE)?;
                bytes.get(start..end)
            })
            .ok_or(ElfError::ProgramHeadersOutOfBounds {
                offset: phoff,
                count: phnum,
            })?;

        let mut plan = LoadPlan {
            entry,
            segments: [Segment::default(); MAX_SEGMENTS],
            count: 0,
        };
        // Program-header index of each stored segment, for error messages.
        let mut indices = [0usize; MAX_SEGMENTS];
        for (index, ph) in table.chunks_exact(PHDR_SIZE).enumerate() {
            let bad = ElfError::ProgramHeadersOutOfBounds {
                offset: phoff,
                count: phnum,
            };
            let p_type = read_u32(ph, 0).ok_or(bad)?;
            if p_type == PT_INTERP {
                return Err(ElfError::DynamicallyLinked { index });
            }
            if p_type != PT_LOAD {
                continue;
            }
            let flags = read_u32(ph, 4).ok_or(bad)?;
            let seg = Segment {
                file_offset: read_u64(ph, 8).ok_or(bad)?,
                vaddr: read_u64(ph, 16).ok_or(bad)?,
                file_size: read_u64(ph, 32).ok_or(bad)?,
                mem_size: read_u64(ph, 40).ok_or(bad)?,
                readable: flags & PF_R != 0,
                writable: flags & PF_W != 0,
                executable: flags & PF_X != 0,
            };
            check_segment(&seg, index, bytes.len(), limits)?;
            if seg.mem_size == 0 {
                continue;
            }
            let (start, end) = seg.page_range();
            for (prev, &other) in plan.segments().iter().zip(indices.iter()) {
                let (p_start, p_end) = prev.page_range();
                if start < p_end && p_start < end {
                    return Err(ElfError::Overlap {
                        index,
                        other,
                        page: start.max(p_start),
                    });
                }
            }
            let (Some(slot), Some(slot_index)) = (
                plan.segments.get_mut(plan.count),
                indices.get_mut(plan.count),
            ) else {
                return Err(ElfError::TooManySegments { index });
            };
            *slot = seg;
            *slot_index = index;
            plan.count += 1;
        }
        if plan.count == 0 {
            return Err(ElfError::NoLoadSegments);
        }
        // Overflow was excluded per segment, so `vaddr + file_size` is exact.
        let runnable = plan
            .segments()
            .iter()
            .any(|s| s.executable && s.vaddr <= entry && entry - s.vaddr < s.file_size);
        if !runnable {
            return Err(ElfError::EntryNotExecutable { entry });
        }
        Ok(plan)
    }

    /// Address of the first instruction.
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// The non-empty `PT_LOAD` segments in program-header order.
    pub fn segments(&self) -> &[Segment] {
        self.segments.get(..self.count).unwrap_or(&[])
    }
}

/// The per-segment rules, in the order their errors are reported.
fn check_segment(
    seg: &Segment,
    index: usize,
    file_len: usize,
    limits: &Limits,
) -> Result<(), ElfError> {
    if seg.file_size > seg.mem_size {
        return Err(ElfError::FileSizeExceedsMemSize {
            index,
            file_size: seg.file_size,
            mem_size: seg.mem_size,
        });
    }
    let file_end = seg.file_offset.checked_add(seg.file_size);
    if file_end.is_none_or(|end| end > file_len as u64) {
        return Err(ElfError::SegmentOutsideFile {
            index,
            offset: seg.file_offset,
            size: seg.file_size,
        });
    }
    if seg.mem_size == 0 {
        // Maps nothing: its address needs no checking.
        return Ok(());
    }
    let end = seg
        .vaddr
        .checked_add(seg.mem_size)
        .and_then(|end| end.checked_add(PAGE_MASK))
        .map(|end| end & !PAGE_MASK)
        .ok_or(ElfError::AddressOverflow { index })?;
    let page = seg.vaddr & !PAGE_MASK;
    if page < limits.min_addr {
        return Err(ElfError::BelowMinAddr {
            index,
            page,
            min_addr: limits.min_addr,
        });
    }
    if end > limits.user_end {
        return Err(ElfError::AboveUserEnd {
            index,
            end,
            user_end: limits.user_end,
        });
    }
    if seg.writable && seg.executable {
        return Err(ElfError::WriteAndExecute { index });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    const R: u32 = PF_R;
    const RW: u32 = PF_R | PF_W;
    const RX: u32 = PF_R | PF_X;
    const PT_NOTE: u32 = 4;
    const PT_TLS: u32 = 7;
    const PT_GNU_STACK: u32 = 0x6474_e551;

    #[derive(Clone, Copy)]
    struct Ph {
        p_type: u32,
        flags: u32,
        offset: u64,
        vaddr: u64,
        filesz: u64,
        memsz: u64,
    }

    fn load(flags: u32, offset: u64, vaddr: u64, filesz: u64, memsz: u64) -> Ph {
        Ph {
            p_type: PT_LOAD,
            flags,
            offset,
            vaddr,
            filesz,
            memsz,
        }
    }

    fn other(p_type: u32) -> Ph {
        Ph {
            p_type,
            flags: RW,
            offset: 0,
            vaddr: 0,
            filesz: 0,
            memsz: 0,
        }
    }

    /// A tiny ELF builder: header, program headers at offset 64, and the
    /// file padded with a byte pattern to `file_len` (at least the end of the
    /// table). Fields can be patched afterwards by offset.
    fn build(e_type: u16, entry: u64, phs: &[Ph], file_len: usize) -> Vec<u8> {
        let table_end = EHDR_SIZE + phs.len() * PHDR_SIZE;
        let mut b: Vec<u8> = (0..file_len.max(table_end))
            .map(|i| (i * 7) as u8)
            .collect();
        b[..EHDR_SIZE].fill(0);
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2; // ELFCLASS64
        b[5] = 1; // ELFDATA2LSB
        b[6] = 1; // EV_CURRENT
        b[16..18].copy_from_slice(&e_type.to_le_bytes());
        b[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        b[20..24].copy_from_slice(&1u32.to_le_bytes());
        b[24..32].copy_from_slice(&entry.to_le_bytes());
        b[32..40].copy_from_slice(&(EHDR_SIZE as u64).to_le_bytes());
        b[52..54].copy_from_slice(&(EHDR_SIZE as u16).to_le_bytes());
        b[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        b[56..58].copy_from_slice(&(phs.len() as u16).to_le_bytes());
        for (i, ph) in phs.iter().enumerate() {
            let p = &mut b[EHDR_SIZE + i * PHDR_SIZE..EHDR_SIZE + (i + 1) * PHDR_SIZE];
            p.fill(0);
            p[0..4].copy_from_slice(&ph.p_type.to_le_bytes());
            p[4..8].copy_from_slice(&ph.flags.to_le_bytes());
            p[8..16].copy_from_slice(&ph.offset.to_le_bytes());
            p[16..24].copy_from_slice(&ph.vaddr.to_le_bytes());
            p[24..32].copy_from_slice(&ph.vaddr.to_le_bytes());
            p[32..40].copy_from_slice(&ph.filesz.to_le_bytes());
            p[40..48].copy_from_slice(&ph.memsz.to_le_bytes());
            p[48..56].copy_from_slice(&PAGE_SIZE.to_le_bytes());
        }
        b
    }

    const ENTRY: u64 = 0x40_1010;

    /// The usual shape: text, rodata, data+bss, plus headers to ignore. The
    /// last segment's bytes end the file, so every truncation breaks it.
    fn typical_phs() -> Vec<Ph> {
        vec![
            other(PT_NOTE),
            load(RX, 0x1000, 0x40_1000, 0x100, 0x100),
            load(R, 0x2000, 0x40_2000, 0x50, 0x50),
            other(PT_TLS),
            load(RW, 0x3000, 0x40_3000, 0x20, 0x2000),
            other(PT_GNU_STACK),
        ]
    }

    fn typical() -> Vec<u8> {
        build(ET_EXEC, ENTRY, &typical_phs(), 0x3020)
    }

    fn plan(bytes: &[u8]) -> Result<LoadPlan, ElfError> {
        LoadPlan::from_elf(bytes, &Limits::LOWER_HALF)
    }

    fn with(phs: &[Ph]) -> Result<LoadPlan, ElfError> {
        plan(&build(ET_EXEC, ENTRY, phs, 0x4000))
    }

    fn text() -> Ph {
        load(RX, 0x1000, 0x40_1000, 0x100, 0x100)
    }

    #[test]
    fn typical_executable() {
        let elf = typical();
        let p = plan(&elf).unwrap();
        assert_eq!(p.entry(), ENTRY);
        let s = p.segments();
        assert_eq!(s.len(), 3);
        assert_eq!(
            s[0],
            Segment {
                vaddr: 0x40_1000,
                mem_size: 0x100,
                file_offset: 0x1000,
                file_size: 0x100,
                readable: true,
                writable: false,
                executable: true,
            }
        );
        assert!(s[1].readable && !s[1].writable && !s[1].executable);
        assert!(s[2].readable && s[2].writable && !s[2].executable);
        assert_eq!(s[2].mem_size, 0x2000);
        assert_eq!(s[2].file_size, 0x20);
        assert_eq!(s[0].page_range(), (0x40_1000, 0x40_2000));
        assert_eq!(s[2].page_range(), (0x40_3000, 0x40_5000));
        assert_eq!(s[1].file_bytes(&elf), Some(&elf[0x2000..0x2050]));
        assert!(s.iter().all(Segment::page_congruent));
    }

    #[test]
    fn unaligned_segments_and_page_rounding() {
        // lld's default layout: segments start mid-page, on distinct pages.
        let phs = [
            load(R, 0x0, 0x20_0000, 0x1e4, 0x1e4),
            load(RX, 0x1f0, 0x20_11f0, 0x30, 0x30),
            load(RW, 0x220, 0x20_2220, 0x8, 0x10),
        ];
        let elf = build(ET_EXEC, 0x20_11f0, &phs, 0x228);
        let p = plan(&elf).unwrap();
        assert_eq!(p.segments()[1].page_range(), (0x20_1000, 0x20_2000));
        assert_eq!(p.segments()[2].page_range(), (0x20_2000, 0x20_3000));
        assert!(p.segments()[1].page_congruent());
        // Entry in the last file-backed byte of text is fine; one past is not.
        let elf = build(ET_EXEC, 0x20_121f, &phs, 0x228);
        assert!(plan(&elf).is_ok());
        let elf = build(ET_EXEC, 0x20_1220, &phs, 0x228);
        assert_eq!(
            plan(&elf),
            Err(ElfError::EntryNotExecutable { entry: 0x20_1220 })
        );
    }

    #[test]
    fn limits_are_inclusive_at_the_edges() {
        let top = abi::map::USER_MAP_END - 0x1000;
        let phs = [
            load(RX, 0x1000, abi::map::USER_MAP_START, 0x10, 0x10),
            load(R, 0x1000, top, 0x10, 0x1000),
        ];
        let p = plan(&build(ET_EXEC, abi::map::USER_MAP_START, &phs, 0x2000)).unwrap();
        assert_eq!(p.segments()[0].page_range().0, Limits::LOWER_HALF.min_addr);
        assert_eq!(p.segments()[1].page_range().1, Limits::LOWER_HALF.user_end);
    }

    #[test]
    fn empty_load_segments_are_dropped() {
        let phs = [text(), load(RW, 0, 0, 0, 0)];
        assert_eq!(with(&phs).unwrap().segments().len(), 1);
        // ...but not counted as "a PT_LOAD" either.
        assert_eq!(
            with(&[load(RX, 0, 0x40_1000, 0, 0)]),
            Err(ElfError::NoLoadSegments)
        );
    }

    #[test]
    fn header_refusals() {
        let good = typical();
        assert_eq!(plan(b""), Err(ElfError::TruncatedHeader { have: 0 }));
        assert_eq!(plan(b"\x7fEL"), Err(ElfError::TruncatedHeader { have: 3 }));
        assert_eq!(
            plan(&good[..63]),
            Err(ElfError::TruncatedHeader { have: 63 })
        );
        assert_eq!(plan(b"MZ\x90\x00"), Err(ElfError::NotElf));
        let mut e = good.clone();
        e[3] = b'f';
        assert_eq!(plan(&e), Err(ElfError::NotElf));

        let mut e = good.clone();
        e[4] = 1;
        assert_eq!(plan(&e), Err(ElfError::Not64Bit { class: 1 }));
        let mut e = good.clone();
        e[5] = 2;
        assert_eq!(plan(&e), Err(ElfError::NotLittleEndian { data: 2 }));
        let mut e = good.clone();
        e[6] = 0;
        assert_eq!(plan(&e), Err(ElfError::UnsupportedVersion { version: 0 }));
        let mut e = good.clone();
        e[20] = 2;
        assert_eq!(plan(&e), Err(ElfError::UnsupportedVersion { version: 2 }));
        let mut e = good.clone();
        e[18..20].copy_from_slice(&183u16.to_le_bytes()); // aarch64
        assert_eq!(plan(&e), Err(ElfError::WrongMachine { machine: 183 }));

        let pie = build(ET_DYN, ENTRY, &typical_phs(), 0x3020);
        assert_eq!(plan(&pie), Err(ElfError::PositionIndependent));
        assert!(std::format!("{}", ElfError::PositionIndependent).contains("non-PIE"));
        let rel = build(1, ENTRY, &typical_phs(), 0x3020);
        assert_eq!(plan(&rel), Err(ElfError::NotExecutable { e_type: 1 }));

        let mut e = good.clone();
        e[54..56].copy_from_slice(&64u16.to_le_bytes());
        assert_eq!(plan(&e), Err(ElfError::BadProgramHeaderSize { size: 64 }));

        let mut e = good.clone();
        e[32..40].copy_from_slice(&0x3000u64.to_le_bytes());
        assert_eq!(
            plan(&e),
            Err(ElfError::ProgramHeadersOutOfBounds {
                offset: 0x3000,
                count: 6
            })
        );
        let mut e = good.clone();
        e[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(
            plan(&e),
            Err(ElfError::ProgramHeadersOutOfBounds {
                offset: u64::MAX,
                count: 6
            })
        );
        let mut e = good.clone();
        e[56..58].copy_from_slice(&0xffffu16.to_le_bytes());
        assert_eq!(
            plan(&e),
            Err(ElfError::ProgramHeadersOutOfBounds {
                offset: 64,
                count: 0xffff
            })
        );

        let none = build(ET_EXEC, ENTRY, &[], 0x100);
        assert_eq!(plan(&none), Err(ElfError::NoLoadSegments));
        let only_notes = build(
            ET_EXEC,
            ENTRY,
            &[other(PT_NOTE), other(PT_GNU_STACK)],
            0x200,
        );
        assert_eq!(plan(&only_notes), Err(ElfError::NoLoadSegments));
    }

    #[test]
    fn segment_refusals() {
        assert_eq!(
            with(&[text(), other(PT_INTERP)]),
            Err(ElfError::DynamicallyLinked { index: 1 })
        );
        assert_eq!(
            with(&[text(), load(RW, 0x2000, 0x40_2000, 0x200, 0x100)]),
            Err(ElfError::FileSizeExceedsMemSize {
                index: 1,
                file_size: 0x200,
                mem_size: 0x100
            })
        );
        assert_eq!(
            with(&[text(), load(R, 0x3f00, 0x40_2000, 0x101, 0x200)]),
            Err(ElfError::SegmentOutsideFile {
                index: 1,
                offset: 0x3f00,
                size: 0x101
            })
        );
        assert_eq!(
            with(&[text(), load(R, u64::MAX, 0x40_2000, 2, 2)]),
            Err(ElfError::SegmentOutsideFile {
                index: 1,
                offset: u64::MAX,
                size: 2
            })
        );
        assert_eq!(
            with(&[text(), load(R, 0, u64::MAX - 0x10, 0, 0x20)]),
            Err(ElfError::AddressOverflow { index: 1 })
        );
        // The end fits but rounding it up to a page does not.
        assert_eq!(
            with(&[text(), load(R, 0, u64::MAX - 0x10, 0, 0x8)]),
            Err(ElfError::AddressOverflow { index: 1 })
        );
        assert_eq!(
            with(&[load(RX, 0x1000, 0xff0, 0x100, 0x100)]),
            Err(ElfError::BelowMinAddr {
                index: 0,
                page: 0,
                min_addr: 0x1_0000
            })
        );
        // The lowest 64 KiB stay unmapped (abi::map::USER_MAP_START).
        assert_eq!(
            with(&[load(RX, 0x1000, 0xf000, 0x100, 0x100)]),
            Err(ElfError::BelowMinAddr {
                index: 0,
                page: 0xf000,
                min_addr: 0x1_0000
            })
        );
        assert_eq!(
            with(&[text(), load(RW, 0, 0x7fff_ffff_e000, 0, 0x1001)]),
            Err(ElfError::AboveUserEnd {
                index: 1,
                end: 0x8000_0000_0000,
                user_end: 0x7fff_ffff_f000
            })
        );
        // The last page below the canonical boundary is never mappable
        // (abi::map::USER_MAP_END).
        assert_eq!(
            with(&[text(), load(RW, 0, 0x7fff_ffff_f000, 0, 0x10)]),
            Err(ElfError::AboveUserEnd {
                index: 1,
                end: 0x8000_0000_0000,
                user_end: 0x7fff_ffff_f000
            })
        );
        assert_eq!(
            with(&[load(RX | PF_W, 0x1000, 0x40_1000, 0x100, 0x100)]),
            Err(ElfError::WriteAndExecute { index: 0 })
        );
        // Data starting on text's last page: permissions would conflict.
        assert_eq!(
            with(&[
                text(),
                other(PT_TLS),
                load(RW, 0x1100, 0x40_1100, 0x10, 0x1000)
            ]),
            Err(ElfError::Overlap {
                index: 2,
                other: 0,
                page: 0x40_1000
            })
        );
        assert_eq!(
            std::format!(
                "{}",
                ElfError::Overlap {
                    index: 2,
                    other: 1,
                    page: 0x40_1000
                }
            ),
            "segment 2 overlaps segment 1 at 0x401000"
        );
        // Overlap regardless of order; reported at the first shared page.
        assert_eq!(
            with(&[
                load(R, 0, 0x40_3000, 0, 0x3000),
                text(),
                load(RW, 0, 0x40_0000, 0, 0x4000)
            ]),
            Err(ElfError::Overlap {
                index: 2,
                other: 0,
                page: 0x40_3000
            })
        );
        // Entry in a non-executable segment, in bss, and nowhere.
        let phs = [text(), load(RW, 0x2000, 0x40_2000, 0x10, 0x1000)];
        let at = |entry| plan(&build(ET_EXEC, entry, &phs, 0x4000));
        assert_eq!(
            at(0x40_2000),
            Err(ElfError::EntryNotExecutable { entry: 0x40_2000 })
        );
        assert_eq!(
            at(0x40_1100),
            Err(ElfError::EntryNotExecutable { entry: 0x40_1100 })
        );
        assert_eq!(at(0), Err(ElfError::EntryNotExecutable { entry: 0 }));
        assert!(at(0x40_1000).is_ok());
        assert!(at(0x40_10ff).is_ok());
    }

    #[test]
    fn segment_count_limit() {
        let page = |i: u64| load(R, 0x1000, 0x40_2000 + i * 0x1000, 0x10, 0x10);
        let mut phs = vec![text()];
        phs.extend((0..15).map(page));
        phs.push(other(PT_GNU_STACK));
        assert_eq!(with(&phs).unwrap().segments().len(), MAX_SEGMENTS);
        phs.push(page(15));
        assert_eq!(with(&phs), Err(ElfError::TooManySegments { index: 17 }));
    }

    #[test]
    fn every_error_displays() {
        let errors = [
            ElfError::NotElf,
            ElfError::TruncatedHeader { have: 3 },
            ElfError::Not64Bit { class: 1 },
            ElfError::NotLittleEndian { data: 2 },
            ElfError::UnsupportedVersion { version: 0 },
            ElfError::WrongMachine { machine: 3 },
            ElfError::PositionIndependent,
            ElfError::NotExecutable { e_type: 1 },
            ElfError::BadProgramHeaderSize { size: 1 },
            ElfError::ProgramHeadersOutOfBounds {
                offset: 1,
                count: 1,
            },
            ElfError::DynamicallyLinked { index: 1 },
            ElfError::TooManySegments { index: 17 },
            ElfError::FileSizeExceedsMemSize {
                index: 1,
                file_size: 2,
                mem_size: 1,
            },
            ElfError::SegmentOutsideFile {
                index: 1,
                offset: 1,
                size: 1,
            },
            ElfError::AddressOverflow { index: 1 },
            ElfError::BelowMinAddr {
                index: 1,
                page: 0,
                min_addr: 0x1000,
            },
            ElfError::AboveUserEnd {
                index: 1,
                end: 1,
                user_end: 0,
            },
            ElfError::WriteAndExecute { index: 1 },
            ElfError::Overlap {
                index: 1,
                other: 0,
                page: 0,
            },
            ElfError::NoLoadSegments,
            ElfError::EntryNotExecutable { entry: 0 },
        ];
        for e in errors {
            assert!(!std::format!("{e}").is_empty());
        }
    }

    #[test]
    fn truncation_never_panics_and_never_passes() {
        let elf = typical();
        for len in 0..elf.len() {
            assert!(plan(&elf[..len]).is_err(), "length {len}");
        }
        assert!(plan(&elf).is_ok());
    }

    /// What every accepted plan must satisfy, checked independently.
    fn check_invariants(elf: &[u8], p: &LoadPlan, limits: &Limits) {
        let segs = p.segments();
        assert!(!segs.is_empty() && segs.len() <= MAX_SEGMENTS);
        for (i, s) in segs.iter().enumerate() {
            assert!(s.file_size <= s.mem_size && s.mem_size > 0);
            assert_eq!(
                s.file_bytes(elf).map(<[u8]>::len),
                Some(s.file_size as usize)
            );
            let (start, end) = s.page_range();
            let true_end = s.vaddr as u128 + s.mem_size as u128;
            assert!(start >= limits.min_addr && end as u128 >= true_end && end <= limits.user_end);
            assert!(!(s.writable && s.executable));
            for t in &segs[..i] {
                let (ts, te) = t.page_range();
                assert!(end <= ts || te <= start);
            }
        }
        let e = p.entry() as u128;
        assert!(segs.iter().any(|s| s.executable
            && s.vaddr as u128 <= e
            && e < s.vaddr as u128 + s.file_size as u128));
    }

    #[test]
    fn random_mutations_never_panic() {
        let mut rng = crate::test_rng::Rng(0x2545_F491_4F6C_DD1D);
        let mut rand = move || rng.next();
        let good = typical();
        let hot = EHDR_SIZE + 6 * PHDR_SIZE;
        let interesting: [u8; 8] = [0, 1, 2, 0x10, 0x40, 0x7F, 0x80, 0xFF];
        let tight = Limits {
            user_end: 0x40_4000,
            min_addr: 0x40_1000,
        };
        let mut ok = 0;
        for round in 0..20_000 {
            let mut elf = good.clone();
            for _ in 0..1 + rand() % 3 {
                let r = rand();
                let at = (r >> 8) as usize % hot;
                elf[at] = if r & 0x10 != 0 {
                    interesting[(r >> 5) as usize % interesting.len()]
                } else {
                    (r >> 40) as u8
                };
            }
            let limits = if round % 4 == 0 {
                tight
            } else {
                Limits::LOWER_HALF
            };
            if let Ok(p) = LoadPlan::from_elf(&elf, &limits) {
                check_invariants(&elf, &p, &limits);
                ok += 1;
            }
        }
        assert!(ok > 100 && ok < 20_000, "{ok} mutants were accepted");
    }
}
