//! Loading the root task from the boot image.
//!
//! The boot image (a PVH boot module, `kcore::bootimage` format) carries the
//! components as ELF files. The kernel loads only `root`; root loads the
//! rest. Every malformed input (image or ELF) is refused with a message that
//! says what is wrong; nothing here can crash the kernel.

use core::fmt;

use kcore::bootimage::{BootImage, BootImageError};
use kcore::elf::{ElfError, Limits, LoadPlan};
use kcore::paging::MapFlags;
use kcore::phys::PAGE_SIZE;

use crate::mm;
use crate::pvh::BootInfo;
use crate::thread::{self, ThreadRef};
use crate::uaccess::USER_END;

/// The root task's initial stack: 64 KiB below this address.
const STACK_TOP: u64 = 0x0000_7fff_ffff_0000;
const _: () = assert!(STACK_TOP <= USER_END);
const STACK_PAGES: u64 = 16;
pub const ROOT_PRIORITY: u8 = 100;

#[derive(Debug)]
pub enum LoadError {
    NoBootImage,
    Image(BootImageError),
    NoRoot,
    Elf(ElfError),
    OutOfMemory,
    Map(kcore::paging::MapError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::NoBootImage => write!(f, "no boot image (QEMU -initrd) was passed"),
            Self::Image(e) => write!(f, "boot image rejected: {e}"),
            Self::NoRoot => write!(f, "the boot image has no component named 'root'"),
            Self::Elf(e) => write!(f, "root's ELF file rejected: {e}"),
            Self::OutOfMemory => write!(f, "out of memory while loading root"),
            Self::Map(e) => write!(f, "mapping root's memory failed: {e}"),
        }
    }
}

/// The boot image's bytes (boot module 0).
fn boot_image_bytes(boot: &BootInfo) -> Option<&'static [u8]> {
    let module = boot.modules().first()?;
    let len = usize::try_from(module.end - module.start).ok()?;
    // SAFETY: boot modules lie in usable RAM (covered by the direct map),
    // and mm::init reserved them, so nothing else writes to them.
    Some(unsafe { core::slice::from_raw_parts(mm::phys_to_virt(module.start) as *const u8, len) })
}

/// Loads `root` from the boot image and creates its first thread.
pub fn load_root(boot: &BootInfo) -> Result<ThreadRef, LoadError> {
    // Temporary, until root gets a boot-information page: an argument word
    // from the command line (root uses it to select deliberate faults).
    let arg = kcore::cmdline::value(boot.cmdline(), "pecan.root-arg")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let bytes = boot_image_bytes(boot).ok_or(LoadError::NoBootImage)?;
    let image = BootImage::parse(bytes).map_err(LoadError::Image)?;
    let root = image.find("root").ok_or(LoadError::NoRoot)?;
    let limits = Limits {
        user_end: STACK_TOP - STACK_PAGES * PAGE_SIZE,
        min_addr: PAGE_SIZE,
    };
    let plan = LoadPlan::from_elf(root.data, &limits).map_err(LoadError::Elf)?;

    let space = mm::new_address_space().map_err(|_| LoadError::OutOfMemory)?;
    for segment in plan.segments() {
        let (first, end) = segment.page_range();
        let flags = MapFlags {
            writable: segment.writable,
            user: true,
            executable: segment.executable,
            global: false,
        };
        let mut page = first;
        while page < end {
            let frame = mm::alloc_zeroed_frame().ok_or(LoadError::OutOfMemory)?;
            copy_segment_bytes(root.data, segment, page, frame);
            mm::map_user_page(space, page, frame, flags).map_err(LoadError::Map)?;
            page += PAGE_SIZE;
        }
    }
    let stack_flags = MapFlags {
        writable: true,
        user: true,
        executable: false,
        global: false,
    };
    for i in 1..=STACK_PAGES {
        let frame = mm::alloc_zeroed_frame().ok_or(LoadError::OutOfMemory)?;
        mm::map_user_page(space, STACK_TOP - i * PAGE_SIZE, frame, stack_flags)
            .map_err(LoadError::Map)?;
    }
    Ok(thread::create_user(
        "root",
        space,
        plan.entry(),
        STACK_TOP,
        arg,
        ROOT_PRIORITY,
    ))
}

/// Copies the part of the segment's file bytes that falls into the user
/// page at `page` into `frame` (already zeroed, so the rest is bss).
fn copy_segment_bytes(file: &[u8], segment: &kcore::elf::Segment, page: u64, frame: u64) {
    let file_start = segment.vaddr;
    let file_end = segment.vaddr + segment.file_size; // checked by LoadPlan
    let start = page.max(file_start);
    let end = (page + PAGE_SIZE).min(file_end);
    if start >= end {
        return;
    }
    let offset_in_file = (segment.file_offset + (start - file_start)) as usize;
    let len = (end - start) as usize;
    let Some(src) = file.get(offset_in_file..offset_in_file + len) else {
        return; // impossible: LoadPlan checked the file bounds
    };
    // SAFETY: `frame` is a fresh frame owned by the loader, direct-mapped;
    // start - page + len <= PAGE_SIZE by construction.
    unsafe {
        core::ptr::copy_nonoverlapping(
            src.as_ptr(),
            (mm::phys_to_virt(frame) + (start - page)) as *mut u8,
            len,
        );
    }
}
