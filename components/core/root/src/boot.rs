//! What the kernel hands root at start: the boot-information page at
//! `abi::bootinfo::BOOT_INFO_ADDR` (whose address is root's argument word)
//! and the boot image mapped read-only at `BOOT_IMAGE_ADDR`.
//!
//! Both are checked before they are used: the argument must be the
//! documented address (anything else is never dereferenced), the page must
//! carry the magic, and the boot image must fit below the boot-information
//! page before a slice is made of it.

use core::fmt;

use formats::bootimage::{BootImage, BootImageError};
use rt::abi::bootinfo::{BootInfo, BOOT_IMAGE_ADDR, BOOT_INFO_ADDR, BOOT_INFO_MAGIC};

/// Why root cannot use what it was given.
#[derive(Debug)]
pub enum BootError {
    /// The argument word is not `BOOT_INFO_ADDR`.
    NoBootInfo { arg: u64 },
    /// The page at `BOOT_INFO_ADDR` does not start with the magic.
    BadMagic { magic: u64 },
    /// `boot_image_len` would run into the boot-information page.
    ImageTooLong { len: u64 },
    /// The boot image does not parse.
    Image(BootImageError),
}

impl fmt::Display for BootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BootError::NoBootInfo { arg } => write!(
                f,
                "no boot information: started with argument {arg:#x}, expected the \
                 boot-information page at {BOOT_INFO_ADDR:#x}"
            ),
            BootError::BadMagic { magic } => write!(
                f,
                "the boot-information page at {BOOT_INFO_ADDR:#x} has magic {magic:#x}, \
                 expected {BOOT_INFO_MAGIC:#x} (\"PECANBI1\")"
            ),
            BootError::ImageTooLong { len } => write!(
                f,
                "boot image length {len:#x} at {BOOT_IMAGE_ADDR:#x} runs into the \
                 boot-information page"
            ),
            BootError::Image(e) => write!(f, "boot image rejected: {e}"),
        }
    }
}

/// The boot-information page, if `arg` is its address and it has the
/// magic.
pub fn info(arg: u64) -> Result<&'static BootInfo, BootError> {
    if arg != BOOT_INFO_ADDR {
        return Err(BootError::NoBootInfo { arg });
    }
    // SAFETY: the kernel starts root with rdi = BOOT_INFO_ADDR only after
    // mapping the boot-information page there, read-only, for root's whole
    // life (abi::bootinfo); the address is page-aligned, so aligned for
    // `BootInfo`, which fits in the page (a const assertion in abi), and any
    // bit pattern is a valid `BootInfo` (integers and arrays of them).
    let info = unsafe { &*(BOOT_INFO_ADDR as *const BootInfo) };
    if info.magic != BOOT_INFO_MAGIC {
        return Err(BootError::BadMagic { magic: info.magic });
    }
    Ok(info)
}

/// The boot image described by `info`, parsed.
pub fn image(info: &BootInfo) -> Result<BootImage<'static>, BootError> {
    BootImage::parse(image_bytes(info)?).map_err(BootError::Image)
}

/// The bytes of the boot image described by `info`.
fn image_bytes(info: &BootInfo) -> Result<&'static [u8], BootError> {
    let len = info.boot_image_len;
    if len > BOOT_INFO_ADDR - BOOT_IMAGE_ADDR {
        return Err(BootError::ImageTooLong { len });
    }
    // SAFETY: the kernel maps the boot image read-only at BOOT_IMAGE_ADDR,
    // `boot_image_len` bytes, for root's whole life (abi::bootinfo); the
    // range was checked to end below the boot-information page, so it stays
    // inside the user half and the length fits `isize`.
    Ok(unsafe { core::slice::from_raw_parts(BOOT_IMAGE_ADDR as *const u8, len as usize) })
}
