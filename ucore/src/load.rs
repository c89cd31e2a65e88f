//! A child's memory layout and what each page of a segment receives.
//!
//! ```text
//! 0x0000_7fff_ffff_e000  IPC buffer page (MAIN_IPC_BUFFER_ADDR)
//! 0x0000_7fff_ffff_0000  stack top (MAIN_STACK_TOP); the pages between
//!                        it and the IPC buffer stay unmapped (a guard)
//! STACK_BOTTOM           = MAIN_STACK_TOP - 64 KiB: the stack
//!  ...                   segments: anywhere in [0x1000, STACK_BOTTOM)
//! 0x0000_0000_0000_0000  page 0, never mapped
//! ```
//!
//! [`CHILD_LIMITS`] is what `formats::elf::LoadPlan::from_elf` checks the
//! segments against, so they can collide neither with the stack nor with
//! the IPC buffer. For each page of a segment, [`page_fills`] says which
//! bytes of the file go where in the page; everything else stays zero
//! (fresh frames are zeroed by the kernel), which is the ELF rule for
//! `mem_size > file_size` (`.bss`).

use core::ops::Range;

use abi::map::{Cache, MapAttr};
use abi::{MAIN_IPC_BUFFER_ADDR, MAIN_STACK_TOP};
use formats::elf::{Limits, Segment};

/// Bytes of a page.
pub const PAGE_SIZE: u64 = 4096;
/// Bytes of a child's stack.
pub const STACK_SIZE: u64 = 64 * 1024;
/// The lowest stack address.
pub const STACK_BOTTOM: u64 = MAIN_STACK_TOP - STACK_SIZE;
/// Where a child's segments may lie.
pub const CHILD_LIMITS: Limits = Limits {
    user_end: STACK_BOTTOM,
    min_addr: abi::map::USER_MAP_START,
};

const _: () =
    assert!(MAIN_STACK_TOP.is_multiple_of(PAGE_SIZE) && STACK_SIZE.is_multiple_of(PAGE_SIZE));
const _: () = assert!(MAIN_STACK_TOP < MAIN_IPC_BUFFER_ADDR);
const _: () = assert!(MAIN_IPC_BUFFER_ADDR.is_multiple_of(PAGE_SIZE));

/// The mapping attributes of a segment's pages (write-back memory).
pub fn map_attr(segment: &Segment) -> MapAttr {
    MapAttr {
        writable: segment.writable,
        executable: segment.executable,
        cache: Cache::WriteBack,
    }
}

/// What one page of a segment receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageFill {
    /// The page's virtual address in the child.
    pub vaddr: u64,
    /// Where in the page the file bytes start.
    pub offset: usize,
    /// The file bytes (a range of the ELF file; empty for a page of zeros).
    pub file: Range<usize>,
}

/// A segment whose bytes are not inside the file, or whose addresses
/// overflow: never the case for segments of a `LoadPlan` made from the
/// same file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadSegment;

/// The pages of `segment` (of an ELF file of `file_len` bytes), lowest
/// first.
pub fn page_fills(
    segment: &Segment,
    file_len: usize,
) -> Result<impl Iterator<Item = PageFill>, BadSegment> {
    let file_start = usize::try_from(segment.file_offset).map_err(|_| BadSegment)?;
    let file_size = usize::try_from(segment.file_size).map_err(|_| BadSegment)?;
    let file_end = file_start.checked_add(file_size).ok_or(BadSegment)?;
    let mem_end = segment.vaddr.checked_add(segment.mem_size);
    let data_end = segment.vaddr.checked_add(segment.file_size);
    let (Some(_), Some(data_end)) = (mem_end, data_end) else {
        return Err(BadSegment);
    };
    if file_end > file_len || segment.file_size > segment.mem_size {
        return Err(BadSegment);
    }
    let (first, end) = segment.page_range();
    let vaddr = segment.vaddr;
    Ok((first..end).step_by(PAGE_SIZE as usize).map(move |page| {
        // The part of [vaddr, data_end) inside this page.
        let start = page.max(vaddr);
        let stop = (page + PAGE_SIZE).min(data_end);
        if start >= stop {
            return PageFill {
                vaddr: page,
                offset: 0,
                file: 0..0,
            };
        }
        // All below is bounded by the checks above: start - vaddr <
        // file_size and start - page < PAGE_SIZE.
        let from = file_start + (start - vaddr) as usize;
        PageFill {
            vaddr: page,
            offset: (start - page) as usize,
            file: from..from + (stop - start) as usize,
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn seg(vaddr: u64, mem_size: u64, file_offset: u64, file_size: u64) -> Segment {
        Segment {
            vaddr,
            mem_size,
            file_offset,
            file_size,
            readable: true,
            writable: true,
            executable: false,
        }
    }

    fn fills(s: &Segment, len: usize) -> Vec<PageFill> {
        page_fills(s, len).unwrap().collect()
    }

    fn fill(vaddr: u64, offset: usize, file: Range<usize>) -> PageFill {
        PageFill {
            vaddr,
            offset,
            file,
        }
    }

    #[test]
    fn unaligned_data_then_bss() {
        // 0x1800 file bytes at 0x20_1100, memory up to 0x20_4000 + 0x10.
        let s = seg(0x20_1100, 0x2f10, 0x100, 0x1800);
        assert_eq!(
            fills(&s, 0x2000),
            [
                fill(0x20_1000, 0x100, 0x100..0x1000),
                fill(0x20_2000, 0, 0x1000..0x1900),
                fill(0x20_3000, 0, 0..0),
                fill(0x20_4000, 0, 0..0),
            ]
        );
    }

    #[test]
    fn single_page_and_empty_file_part() {
        let s = seg(0x40_0000, 0x10, 0, 0x10);
        assert_eq!(fills(&s, 0x10), [fill(0x40_0000, 0, 0..0x10)]);
        let bss = seg(0x40_0008, 0x1000, 0x99, 0);
        assert_eq!(
            fills(&bss, 0x99),
            [fill(0x40_0000, 0, 0..0), fill(0x40_1000, 0, 0..0)]
        );
    }

    #[test]
    fn every_file_byte_lands_once_at_its_address() {
        for (vaddr, mem, off, size) in [
            (0x1000u64, 0x3000u64, 0u64, 0x3000u64),
            (0x1fff, 0x2, 0x5, 0x2),
            (0x12345, 0x5555, 0x345, 0x4444),
        ] {
            let s = seg(vaddr, mem, off, size);
            let mut covered = Vec::new();
            for f in fills(&s, (off + size) as usize) {
                assert!(f.offset + f.file.len() <= PAGE_SIZE as usize);
                for (i, byte) in f.file.clone().enumerate() {
                    let at = f.vaddr + (f.offset + i) as u64;
                    assert_eq!(at - vaddr, byte as u64 - off);
                    covered.push(byte);
                }
            }
            let want: Vec<usize> = (off as usize..(off + size) as usize).collect();
            assert_eq!(covered, want);
        }
    }

    #[test]
    fn bad_segments_are_errors() {
        assert!(page_fills(&seg(0x1000, 0x10, 0, 0x10), 0xf).is_err());
        assert!(page_fills(&seg(0x1000, 0x10, u64::MAX, 0x10), 0x100).is_err());
        assert!(page_fills(&seg(u64::MAX - 4, 0x10, 0, 0), 0x100).is_err());
        assert!(page_fills(&seg(0x1000, 0x10, 0, 0x20), 0x100).is_err());
    }

    #[test]
    fn map_attr_follows_the_segment() {
        let s = Segment {
            executable: true,
            writable: false,
            ..seg(0x1000, 1, 0, 1)
        };
        let a = map_attr(&s);
        assert!(a.executable && !a.writable && a.cache == Cache::WriteBack);
    }
}
