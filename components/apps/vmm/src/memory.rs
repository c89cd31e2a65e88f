//! Guest RAM: 2 MiB frames made from the VMM's quota, each mapped twice —
//! into the guest space at its guest-physical address and into the VMM's
//! own address space at `RAM_VA + address`, where the VMM loads the
//! kernel and reads and writes what devices touch. One contiguous range
//! from guest-physical 0 (at most 3 GiB, below the device hole).
//!
//! Every access is bounds-checked: a guest address from an exit or a
//! page table is untrusted, and a bad one reads zeros or is ignored.

use rt::abi::caddr::own;
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{CapSlot, Error, ObjectType};
use rt::interfaces::child;
use rt::syscall;

const FRAME: u64 = 2 << 20;
/// The most objects one `Retype` makes.
const RETYPE_MAX: u64 = 256;

/// The guest's RAM as the VMM sees it.
pub struct Ram {
    va: u64,
    size: u64,
}

impl Ram {
    /// Makes `size` bytes (a multiple of 2 MiB) of frames in slots from
    /// `first` (and their copies after them), maps them into `gspace`
    /// from guest-physical 0 and into this component at `va`.
    pub fn make(gspace: CapSlot, first: u32, size: u64, va: u64) -> Result<Ram, Error> {
        let frames = size / FRAME;
        let u = own(child::UNTYPED);
        let vspace = own(child::OWN_VSPACE);
        // A `Retype` makes at most 256 objects (docs/abi.md): 512 MiB.
        let mut made = 0;
        while made < frames {
            let n = (frames - made).min(RETYPE_MAX);
            syscall::retype(u, ObjectType::Frame2M, 0, own(first + made as u32), n)?;
            made += n;
        }
        let view = first + frames as u32;
        let guest = MapAttr {
            writable: true,
            executable: true,
            cache: Cache::WriteBack,
        };
        let mine = MapAttr {
            writable: true,
            executable: false,
            cache: Cache::WriteBack,
        };
        for i in 0..frames {
            let frame = own(first + i as u32);
            syscall::cap_copy(frame, own(view + i as u32))?;
            // SAFETY: a guest space is not this component's memory.
            unsafe { syscall::map(gspace, frame, i * FRAME, guest)? };
            // SAFETY: va.. is the VMM's window on guest RAM, used by
            // nothing else (main's layout).
            unsafe { syscall::map(vspace, own(view + i as u32), va + i * FRAME, mine)? };
        }
        Ok(Ram { va, size })
    }

    /// The offset of guest RAM `gpa..gpa + len` in the view, if all of
    /// it is RAM.
    fn check(&self, gpa: u64, len: usize) -> Option<u64> {
        let end = gpa.checked_add(len as u64)?;
        (end <= self.size).then_some(self.va + gpa)
    }

    /// Guest RAM from `gpa`, `len` bytes, if all of it is RAM.
    pub fn slice(&self, gpa: u64, len: usize) -> Option<&[u8]> {
        let at = self.check(gpa, len)?;
        // SAFETY: [va, va + size) maps the guest's RAM frames (`make`);
        // the guest changes it only while this thread waits in VcpuRun.
        Some(unsafe { core::slice::from_raw_parts(at as *const u8, len) })
    }

    /// Guest RAM from `gpa`, `len` bytes, writable, if all of it is RAM.
    pub fn slice_mut(&mut self, gpa: u64, len: usize) -> Option<&mut [u8]> {
        let at = self.check(gpa, len)?;
        // SAFETY: as in `slice`, mapped writable; `&mut self` makes this
        // the only slice of guest RAM the VMM holds.
        Some(unsafe { core::slice::from_raw_parts_mut(at as *mut u8, len) })
    }

    /// Copies `data` to `gpa` (ignored if it does not fit: the loader
    /// planned every address within RAM, and a guest's address that is
    /// not RAM gets nothing).
    pub fn write(&mut self, gpa: u64, data: &[u8]) {
        if let Some(s) = self.slice_mut(gpa, data.len()) {
            s.copy_from_slice(data);
        }
    }

    pub fn read_u64(&self, gpa: u64) -> Option<u64> {
        let s = self.slice(gpa, 8)?;
        Some(u64::from_le_bytes(s[..8].try_into().ok()?))
    }

    /// The guest-physical address of guest-virtual `va` under the 4-level
    /// page tables at `cr3` (long mode; 1 GiB and 2 MiB pages), if mapped.
    pub fn translate(&self, cr3: u64, va: u64) -> Option<u64> {
        const ADDR: u64 = 0x000f_ffff_ffff_f000;
        let mut table = cr3 & ADDR;
        for level in (0..4).rev() {
            let index = (va >> (12 + 9 * level)) & 0x1ff;
            let entry = self.read_u64(table + 8 * index)?;
            if entry & 1 == 0 {
                return None;
            }
            let large = entry & 0x80 != 0 && (level == 1 || level == 2);
            if large || level == 0 {
                let page = 1u64 << (12 + 9 * level);
                let base = entry & ADDR & !(page - 1);
                return Some(base | (va & (page - 1)));
            }
            table = entry & ADDR;
        }
        None
    }

    /// Up to 15 bytes of instruction at guest-virtual `rip` (fewer if a
    /// page after the first is not mapped).
    pub fn fetch(&self, cr3: u64, paging: bool, rip: u64) -> ([u8; 15], usize) {
        let mut bytes = [0u8; 15];
        let mut n = 0;
        while n < 15 {
            let va = rip.wrapping_add(n as u64);
            let pa = if paging {
                self.translate(cr3, va)
            } else {
                Some(va)
            };
            let Some(b) = pa.and_then(|pa| self.slice(pa, 1)) else {
                break;
            };
            bytes[n] = b[0];
            n += 1;
        }
        (bytes, n)
    }
}
