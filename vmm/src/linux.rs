//! The Linux x86 boot protocol (the kernel's
//! `Documentation/arch/x86/boot.rst`), 64-bit entry: the VMM loads the
//! bzImage's protected-mode part at its preferred address, writes
//! `boot_params` (the "zero page") with the e820 map, the command line
//! and the initramfs, identity-maps the low 4 GiB with 2 MiB pages and a
//! GDT with `__BOOT_CS` (0x10) and `__BOOT_DS` (0x18), and enters at the
//! load address + 0x200 in long mode with `rsi` = the zero page.
//!
//! The image is untrusted input: [`BzImage::parse`] checks every field it
//! uses and [`Plan::new`] that everything fits the guest's RAM, with an
//! error that says what is wrong.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use abi::vcpu::{segment as seg, word};

/// Guest-physical layout of what the VMM writes below 1 MiB.
pub mod layout {
    /// The GDT (4 entries).
    pub const GDT: u64 = 0x500;
    /// `boot_params`, the zero page.
    pub const ZERO_PAGE: u64 = 0x7000;
    /// The identity page tables: PML4, PDPT and 4 page directories.
    pub const PAGE_TABLES: u64 = 0x9000;
    pub const PAGE_TABLES_LEN: usize = 6 * 4096;
    /// The command line (at most [`super::MAX_CMDLINE`] bytes and a NUL).
    pub const CMDLINE: u64 = 0x20000;
    /// Where the low RAM ends: the EBDA and the BIOS area above are
    /// reserved in the e820 map (and firmware tables live there).
    pub const LOW_RAM_END: u64 = 0x9fc00;
    /// The BIOS area, where the MP table / ACPI RSDP would be searched.
    pub const BIOS_AREA: u64 = 0xf0000;
    /// Where RAM above the low megabyte starts.
    pub const HIGH_RAM: u64 = 0x10_0000;
    /// RAM below 4 GiB ends here at most; the rest of RAM is above 4 GiB
    /// (the hole is for device memory: the I/O APIC, the local APIC, PCI).
    pub const LOW_RAM_LIMIT: u64 = 0xc000_0000;
    pub const FOUR_GIB: u64 = 1 << 32;
}

/// The longest command line the VMM passes.
pub const MAX_CMDLINE: usize = 2047;

/// e820 entry types.
pub const E820_RAM: u32 = 1;
pub const E820_RESERVED: u32 = 2;

/// Offsets in `boot_params` and its setup header (boot.rst).
mod off {
    pub const EXT_RAMDISK_IMAGE: usize = 0x0c0;
    pub const EXT_RAMDISK_SIZE: usize = 0x0c4;
    pub const EXT_CMD_LINE_PTR: usize = 0x0c8;
    pub const E820_ENTRIES: usize = 0x1e8;
    pub const SETUP_SECTS: usize = 0x1f1;
    pub const BOOT_FLAG: usize = 0x1fe;
    pub const JUMP: usize = 0x200;
    pub const HEADER: usize = 0x202;
    pub const VERSION: usize = 0x206;
    pub const TYPE_OF_LOADER: usize = 0x210;
    pub const LOADFLAGS: usize = 0x211;
    pub const RAMDISK_IMAGE: usize = 0x218;
    pub const RAMDISK_SIZE: usize = 0x21c;
    pub const CMD_LINE_PTR: usize = 0x228;
    pub const INITRD_ADDR_MAX: usize = 0x22c;
    pub const KERNEL_ALIGNMENT: usize = 0x230;
    pub const RELOCATABLE_KERNEL: usize = 0x234;
    pub const XLOADFLAGS: usize = 0x236;
    pub const CMDLINE_SIZE: usize = 0x238;
    pub const PREF_ADDRESS: usize = 0x258;
    pub const INIT_SIZE: usize = 0x260;
    pub const E820_TABLE: usize = 0x2d0;
}

/// The most e820 entries `boot_params` holds.
const E820_MAX: usize = 128;
/// `xloadflags` bit 0: the kernel has the 64-bit entry at +0x200.
const XLF_KERNEL_64: u16 = 1;
/// `loadflags` bit 0: the protected-mode part is loaded at 1 MiB or above.
const LOADED_HIGH: u8 = 1;
/// The oldest protocol with `xloadflags`, `pref_address` and `init_size`.
const MIN_VERSION: u16 = 0x020c;

/// Why an image cannot be booted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootError {
    /// Shorter than a setup header, or than its setup sectors say.
    TooShort { len: usize, need: usize },
    /// No 0xAA55 boot flag or no "HdrS": not a bzImage.
    NotBzImage,
    /// A boot protocol older than 2.12.
    OldProtocol(u16),
    /// The kernel has no 64-bit entry point.
    No64BitEntry,
    /// Not loaded high (a zImage).
    NotLoadedHigh,
    /// The command line is longer than the kernel takes.
    CmdlineTooLong { len: usize, max: usize },
    /// The kernel, its working memory and the initramfs do not fit RAM.
    DoesNotFit { need: u64, ram: u64 },
    /// Guest RAM below what the layout needs (low megabyte and kernel).
    TooLittleRam(u64),
}

impl fmt::Display for BootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BootError::TooShort { len, need } => {
                write!(
                    f,
                    "the kernel image has {len} bytes, its header needs {need}"
                )
            }
            BootError::NotBzImage => write!(f, "not a bzImage (no boot flag or no \"HdrS\")"),
            BootError::OldProtocol(v) => write!(
                f,
                "boot protocol {}.{:02}: 2.12 or later needed",
                v >> 8,
                v & 0xff
            ),
            BootError::No64BitEntry => write!(f, "the kernel has no 64-bit entry point"),
            BootError::NotLoadedHigh => write!(f, "not a kernel loaded at 1 MiB (a zImage?)"),
            BootError::CmdlineTooLong { len, max } => {
                write!(f, "command line of {len} bytes; the kernel takes {max}")
            }
            BootError::DoesNotFit { need, ram } => write!(
                f,
                "kernel, its working memory and initramfs need {} MiB of RAM; the guest has {} MiB",
                need.div_ceil(1 << 20),
                ram >> 20
            ),
            BootError::TooLittleRam(ram) => {
                write!(f, "{ram} bytes of guest RAM: at least 16 MiB needed")
            }
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32_at(b, at)) | u64::from(u32_at(b, at + 4)) << 32
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// A parsed bzImage: its setup header's fields and the protected-mode
/// part to load.
#[derive(Clone, Copy, Debug)]
pub struct BzImage<'a> {
    image: &'a [u8],
    /// Where the protected-mode part starts in the image.
    pub kernel_offset: usize,
    /// The boot protocol version (0x020f = 2.15).
    pub version: u16,
    /// Where the kernel wants to be loaded, and its alignment if it can
    /// be moved.
    pub pref_address: u64,
    pub kernel_alignment: u64,
    pub relocatable: bool,
    /// Bytes from the load address the kernel needs while it
    /// decompresses and starts.
    pub init_size: u64,
    /// The highest address the initramfs may end at (inclusive).
    pub initrd_addr_max: u64,
    /// The longest command line (without its NUL).
    pub cmdline_size: usize,
    /// Bytes of the setup header (copied into `boot_params`).
    header_end: usize,
}

impl<'a> BzImage<'a> {
    /// Parses `image`'s setup header.
    pub fn parse(image: &'a [u8]) -> Result<BzImage<'a>, BootError> {
        let need = off::INIT_SIZE + 4;
        if image.len() < need {
            return Err(BootError::TooShort {
                len: image.len(),
                need,
            });
        }
        if u16_at(image, off::BOOT_FLAG) != 0xaa55
            || &image[off::HEADER..off::HEADER + 4] != b"HdrS"
        {
            return Err(BootError::NotBzImage);
        }
        let version = u16_at(image, off::VERSION);
        if version < MIN_VERSION {
            return Err(BootError::OldProtocol(version));
        }
        if u16_at(image, off::XLOADFLAGS) & XLF_KERNEL_64 == 0 {
            return Err(BootError::No64BitEntry);
        }
        if image[off::LOADFLAGS] & LOADED_HIGH == 0 {
            return Err(BootError::NotLoadedHigh);
        }
        let sects = match image[off::SETUP_SECTS] {
            0 => 4,
            n => usize::from(n),
        };
        let kernel_offset = (sects + 1) * 512;
        if image.len() <= kernel_offset {
            return Err(BootError::TooShort {
                len: image.len(),
                need: kernel_offset + 1,
            });
        }
        let header_end = off::HEADER + usize::from(image[off::JUMP + 1]);
        let header_end = header_end.clamp(off::INIT_SIZE + 4, 0x290);
        Ok(BzImage {
            image,
            kernel_offset,
            version,
            pref_address: u64_at(image, off::PREF_ADDRESS),
            kernel_alignment: u64::from(u32_at(image, off::KERNEL_ALIGNMENT)),
            relocatable: image[off::RELOCATABLE_KERNEL] != 0,
            init_size: u64::from(u32_at(image, off::INIT_SIZE)),
            initrd_addr_max: u64::from(u32_at(image, off::INITRD_ADDR_MAX)),
            cmdline_size: u32_at(image, off::CMDLINE_SIZE) as usize,
            header_end,
        })
    }

    /// The protected-mode part: what is loaded at the load address.
    pub fn kernel(&self) -> &'a [u8] {
        &self.image[self.kernel_offset..]
    }
}

/// Where everything goes in the guest, and the zero page.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Guest RAM in bytes.
    pub ram: u64,
    /// Where the protected-mode part is loaded; the entry is +0x200.
    pub kernel_addr: u64,
    /// Where the initramfs is loaded (0 and 0 without one).
    pub initrd_addr: u64,
    pub initrd_len: u64,
    /// The command line, NUL-terminated.
    pub cmdline: Vec<u8>,
    /// The e820 map: (start, length, type).
    pub e820: Vec<(u64, u64, u32)>,
}

impl Plan {
    /// Lays out `kernel` with an initramfs of `initrd_len` bytes and
    /// `cmdline` in `ram` bytes of guest RAM (below
    /// [`layout::LOW_RAM_LIMIT`], the rest above 4 GiB).
    pub fn new(
        kernel: &BzImage,
        ram: u64,
        initrd_len: u64,
        cmdline: &str,
    ) -> Result<Plan, BootError> {
        if ram < 16 << 20 {
            return Err(BootError::TooLittleRam(ram));
        }
        let max = kernel.cmdline_size.min(MAX_CMDLINE);
        if cmdline.len() > max {
            return Err(BootError::CmdlineTooLong {
                len: cmdline.len(),
                max,
            });
        }
        let low_end = ram.min(layout::LOW_RAM_LIMIT);
        let align = kernel.kernel_alignment.max(4096).next_power_of_two();
        let kernel_addr = if kernel.relocatable {
            kernel
                .pref_address
                .max(layout::HIGH_RAM)
                .next_multiple_of(align)
        } else {
            kernel.pref_address.max(layout::HIGH_RAM)
        };
        let kernel_end = kernel_addr + kernel.init_size.max(kernel.kernel().len() as u64);
        // The initramfs at the top of low RAM, below the kernel's limit,
        // page-aligned; it must not overlap the kernel's working memory.
        let (initrd_addr, initrd_len) = if initrd_len == 0 {
            (0, 0)
        } else {
            let top = low_end.min(kernel.initrd_addr_max.saturating_add(1));
            let addr = top.saturating_sub(initrd_len) & !0xfff;
            if addr < kernel_end || top < initrd_len {
                return Err(BootError::DoesNotFit {
                    need: kernel_end + initrd_len.next_multiple_of(4096),
                    ram,
                });
            }
            (addr, initrd_len)
        };
        if kernel_end > low_end {
            return Err(BootError::DoesNotFit {
                need: kernel_end + initrd_len,
                ram,
            });
        }
        let mut e820 = vec![
            (0, layout::LOW_RAM_END, E820_RAM),
            (
                layout::LOW_RAM_END,
                0xa0000 - layout::LOW_RAM_END,
                E820_RESERVED,
            ),
            (
                layout::BIOS_AREA,
                layout::HIGH_RAM - layout::BIOS_AREA,
                E820_RESERVED,
            ),
            (layout::HIGH_RAM, low_end - layout::HIGH_RAM, E820_RAM),
        ];
        if ram > low_end {
            e820.push((layout::FOUR_GIB, ram - low_end, E820_RAM));
        }
        let mut line = Vec::with_capacity(cmdline.len() + 1);
        line.extend_from_slice(cmdline.as_bytes());
        line.push(0);
        Ok(Plan {
            ram,
            kernel_addr,
            initrd_addr,
            initrd_len,
            cmdline: line,
            e820,
        })
    }

    /// The guest-physical ranges of RAM: (start, length).
    pub fn ram_ranges(&self) -> Vec<(u64, u64)> {
        let low = self.ram.min(layout::LOW_RAM_LIMIT);
        let mut r = vec![(0, low)];
        if self.ram > low {
            r.push((layout::FOUR_GIB, self.ram - low));
        }
        r
    }

    /// The 64-bit entry point.
    pub fn entry(&self) -> u64 {
        self.kernel_addr + 0x200
    }

    /// `boot_params` for `kernel`: its setup header, the loader's fields,
    /// the e820 map. `acpi_rsdp` is the RSDP's address if the VMM wrote
    /// ACPI tables (0: Linux searches the BIOS area).
    pub fn zero_page(&self, kernel: &BzImage, acpi_rsdp: u64) -> [u8; 4096] {
        let mut z = [0u8; 4096];
        let hdr = off::SETUP_SECTS..kernel.header_end;
        z[hdr.clone()].copy_from_slice(&kernel.image[hdr]);
        z[off::TYPE_OF_LOADER] = 0xff;
        z[off::LOADFLAGS] |= LOADED_HIGH;
        let (lo, hi) = (self.initrd_addr as u32, (self.initrd_addr >> 32) as u32);
        put_u32(&mut z, off::RAMDISK_IMAGE, lo);
        put_u32(&mut z, off::EXT_RAMDISK_IMAGE, hi);
        put_u32(&mut z, off::RAMDISK_SIZE, self.initrd_len as u32);
        put_u32(
            &mut z,
            off::EXT_RAMDISK_SIZE,
            (self.initrd_len >> 32) as u32,
        );
        put_u32(&mut z, off::CMD_LINE_PTR, layout::CMDLINE as u32);
        put_u32(&mut z, off::EXT_CMD_LINE_PTR, 0);
        put_u64(&mut z, 0x070, acpi_rsdp);
        let n = self.e820.len().min(E820_MAX);
        z[off::E820_ENTRIES] = n as u8;
        for (i, &(start, len, kind)) in self.e820.iter().take(n).enumerate() {
            let at = off::E820_TABLE + 20 * i;
            put_u64(&mut z, at, start);
            put_u64(&mut z, at + 8, len);
            put_u32(&mut z, at + 16, kind);
        }
        z
    }
}

/// The identity page tables at [`layout::PAGE_TABLES`]: the low 4 GiB in
/// 2 MiB pages (PML4, PDPT, 4 page directories).
pub fn page_tables() -> Vec<u8> {
    let mut t = vec![0u8; layout::PAGE_TABLES_LEN];
    let base = layout::PAGE_TABLES;
    const P_RW: u64 = 0x3;
    const PS: u64 = 0x80;
    put_u64(&mut t, 0, (base + 0x1000) | P_RW);
    for pd in 0..4u64 {
        put_u64(
            &mut t,
            0x1000 + 8 * pd as usize,
            (base + 0x2000 + pd * 0x1000) | P_RW,
        );
        for e in 0..512u64 {
            let at = 0x2000 + (pd as usize) * 0x1000 + 8 * e as usize;
            put_u64(&mut t, at, ((pd << 30) | (e << 21)) | P_RW | PS);
        }
    }
    t
}

/// The GDT at [`layout::GDT`]: null, null, a 64-bit code segment at 0x10
/// (`__BOOT_CS`) and a data segment at 0x18 (`__BOOT_DS`).
pub fn gdt() -> [u8; 32] {
    let mut g = [0u8; 32];
    g[0x10..0x18].copy_from_slice(&0x00af_9a00_0000_ffffu64.to_le_bytes());
    g[0x18..0x20].copy_from_slice(&0x00cf_9200_0000_ffffu64.to_le_bytes());
    g
}

/// The state block words of the 64-bit entry: long mode with paging on
/// the identity tables, the boot GDT's segments, interrupts off, `rsi` =
/// the zero page, RIP = the entry. Load with `REGISTERS | CONTROL |
/// SEGMENTS`.
pub fn entry_state(plan: &Plan) -> Vec<(usize, u64)> {
    let segment = |i: usize| word::SEGMENTS + 2 * i;
    let mut s = vec![
        (word::RIP, plan.entry()),
        (word::RSI, layout::ZERO_PAGE),
        (word::RFLAGS, 2),
        (word::RSP, 0),
        (word::CR0, 0x8000_0033), // PG, NE, ET, MP, PE
        (word::CR3, layout::PAGE_TABLES),
        (word::CR4, 0x20),   // PAE
        (word::EFER, 0x500), // LME, LMA
        (segment(seg::CS), seg::pack(0x10, seg::CODE64, 0xffff_ffff)),
        (segment(seg::CS) + 1, 0),
        (segment(seg::GDTR), seg::pack(0, 0, 31)),
        (segment(seg::GDTR) + 1, layout::GDT),
        (segment(seg::IDTR), seg::pack(0, 0, 0)),
        (segment(seg::IDTR) + 1, 0),
        (segment(seg::LDTR), seg::pack(0, seg::LDT, 0)),
        (segment(seg::LDTR) + 1, 0),
        (segment(seg::TR), seg::pack(0, seg::TSS_BUSY, 0x67)),
        (segment(seg::TR) + 1, 0),
    ];
    for i in [seg::DS, seg::ES, seg::SS, seg::FS, seg::GS] {
        s.push((segment(i), seg::pack(0x18, seg::DATA32, 0xffff_ffff)));
        s.push((segment(i) + 1, 0));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal bzImage header: protocol 2.15, 64-bit entry, relocatable,
    /// preferred at 16 MiB with 2 MiB alignment, 48 MiB of working memory.
    fn image(kernel_len: usize) -> Vec<u8> {
        let mut b = vec![0u8; 5 * 512 + kernel_len];
        b[off::SETUP_SECTS] = 4;
        b[off::BOOT_FLAG..off::BOOT_FLAG + 2].copy_from_slice(&0xaa55u16.to_le_bytes());
        b[off::JUMP] = 0xeb;
        b[off::JUMP + 1] = 0x6a; // header to 0x26c
        b[off::HEADER..off::HEADER + 4].copy_from_slice(b"HdrS");
        b[off::VERSION..off::VERSION + 2].copy_from_slice(&0x020fu16.to_le_bytes());
        b[off::LOADFLAGS] = LOADED_HIGH;
        put_u32(&mut b, off::INITRD_ADDR_MAX, 0x7fff_ffff);
        put_u32(&mut b, off::KERNEL_ALIGNMENT, 0x20_0000);
        b[off::RELOCATABLE_KERNEL] = 1;
        b[off::XLOADFLAGS..off::XLOADFLAGS + 2].copy_from_slice(&0x7fu16.to_le_bytes());
        put_u32(&mut b, off::CMDLINE_SIZE, 2047);
        put_u64(&mut b, off::PREF_ADDRESS, 0x100_0000);
        put_u32(&mut b, off::INIT_SIZE, 48 << 20);
        b
    }

    #[test]
    fn parses_the_header() {
        let b = image(1000);
        let k = BzImage::parse(&b).unwrap();
        assert_eq!(k.kernel_offset, 5 * 512);
        assert_eq!(k.kernel().len(), 1000);
        assert_eq!(k.version, 0x020f);
        assert_eq!(k.pref_address, 0x100_0000);
        assert_eq!(k.init_size, 48 << 20);
        assert!(k.relocatable);
        assert_eq!(k.header_end, 0x26c);
    }

    #[test]
    fn refuses_what_is_not_a_64bit_bzimage() {
        assert!(matches!(
            BzImage::parse(&[0; 100]),
            Err(BootError::TooShort { .. })
        ));
        let mut b = image(10);
        b[off::HEADER] = b'X';
        assert_eq!(BzImage::parse(&b).unwrap_err(), BootError::NotBzImage);
        let mut b = image(10);
        b[off::VERSION] = 0x0a;
        assert_eq!(
            BzImage::parse(&b).unwrap_err(),
            BootError::OldProtocol(0x020a)
        );
        let mut b = image(10);
        b[off::XLOADFLAGS] = 0x7e;
        assert_eq!(BzImage::parse(&b).unwrap_err(), BootError::No64BitEntry);
        let mut b = image(10);
        b[off::LOADFLAGS] = 0;
        assert_eq!(BzImage::parse(&b).unwrap_err(), BootError::NotLoadedHigh);
        let mut b = image(0);
        b.truncate(5 * 512);
        assert!(matches!(
            BzImage::parse(&b),
            Err(BootError::TooShort { .. })
        ));
        // Setup sectors pointing past the end.
        let mut b = image(10);
        b[off::SETUP_SECTS] = 200;
        assert!(matches!(
            BzImage::parse(&b),
            Err(BootError::TooShort { .. })
        ));
    }

    #[test]
    fn plans_kernel_initrd_and_e820() {
        let b = image(1000);
        let k = BzImage::parse(&b).unwrap();
        let p = Plan::new(&k, 256 << 20, 5 << 20, "console=ttyS0").unwrap();
        assert_eq!(p.kernel_addr, 0x100_0000);
        assert_eq!(p.entry(), 0x100_0200);
        assert_eq!(p.initrd_addr, (256 << 20) - (5 << 20));
        assert_eq!(p.cmdline.last(), Some(&0));
        assert_eq!(p.ram_ranges(), vec![(0, 256 << 20)]);
        let ram: u64 = p.e820.iter().filter(|e| e.2 == E820_RAM).map(|e| e.1).sum();
        assert_eq!(ram, (256 << 20) - (layout::HIGH_RAM - layout::LOW_RAM_END));
        let z = p.zero_page(&k, 0);
        assert_eq!(z[off::TYPE_OF_LOADER], 0xff);
        assert_eq!(u32_at(&z, off::RAMDISK_IMAGE) as u64, p.initrd_addr);
        assert_eq!(u32_at(&z, off::RAMDISK_SIZE), 5 << 20);
        assert_eq!(u32_at(&z, off::CMD_LINE_PTR) as u64, layout::CMDLINE);
        assert_eq!(z[off::E820_ENTRIES], 4);
        assert_eq!(u64_at(&z, off::E820_TABLE + 3 * 20), layout::HIGH_RAM);
        assert_eq!(&z[off::HEADER..off::HEADER + 4], b"HdrS");
        // Past the header nothing of the image is copied.
        assert_eq!(z[0x26c..0x2d0], [0u8; 0x64]);
    }

    #[test]
    fn big_guests_get_ram_above_4gib() {
        let b = image(1000);
        let k = BzImage::parse(&b).unwrap();
        let p = Plan::new(&k, 4 << 30, 0, "").unwrap();
        assert_eq!(
            p.ram_ranges(),
            vec![
                (0, layout::LOW_RAM_LIMIT),
                (layout::FOUR_GIB, (4 << 30) - layout::LOW_RAM_LIMIT)
            ]
        );
        assert_eq!(
            p.e820.last(),
            Some(&(
                layout::FOUR_GIB,
                (4 << 30) - layout::LOW_RAM_LIMIT,
                E820_RAM
            ))
        );
        assert_eq!((p.initrd_addr, p.initrd_len), (0, 0));
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let b = image(1000);
        let k = BzImage::parse(&b).unwrap();
        assert_eq!(
            Plan::new(&k, 8 << 20, 0, "").unwrap_err(),
            BootError::TooLittleRam(8 << 20)
        );
        // 16 MiB + 48 MiB of working memory do not fit in 32 MiB.
        assert!(matches!(
            Plan::new(&k, 32 << 20, 0, ""),
            Err(BootError::DoesNotFit { .. })
        ));
        // The initramfs would overlap the kernel's working memory.
        assert!(matches!(
            Plan::new(&k, 80 << 20, 30 << 20, ""),
            Err(BootError::DoesNotFit { .. })
        ));
        let long = "x".repeat(3000);
        assert!(matches!(
            Plan::new(&k, 256 << 20, 0, &long),
            Err(BootError::CmdlineTooLong { .. })
        ));
        let e = Plan::new(&k, 32 << 20, 0, "").unwrap_err();
        assert!(alloc::format!("{e}").contains("MiB"));
    }

    #[test]
    fn identity_tables_and_entry_state() {
        let t = page_tables();
        assert_eq!(u64_at(&t, 0), layout::PAGE_TABLES + 0x1000 + 3);
        assert_eq!(u64_at(&t, 0x1000 + 8 * 3), layout::PAGE_TABLES + 0x5000 + 3);
        // 3 GiB + 2 MiB: PD 3, entry 1.
        assert_eq!(u64_at(&t, 0x5000 + 8), (3 << 30) + (2 << 20) + 0x83);
        let b = image(1000);
        let k = BzImage::parse(&b).unwrap();
        let p = Plan::new(&k, 256 << 20, 0, "").unwrap();
        let s = entry_state(&p);
        assert!(s.contains(&(word::RIP, 0x100_0200)));
        assert!(s.contains(&(word::RSI, layout::ZERO_PAGE)));
        assert_eq!(gdt()[0x10 + 5], 0x9a);
    }
}
