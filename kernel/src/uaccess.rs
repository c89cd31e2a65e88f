//! Access to user memory from the kernel.
//!
//! A user pointer is an *allegation* (as Hubris puts it): [`UserSlice`] can
//! only be built from an address range that lies entirely in the user half,
//! and its bytes can only be reached by walking the address space's page
//! tables, page by page, requiring present + user (+ writable to write)
//! mappings. The kernel never dereferences a user address directly, so a
//! bad pointer is an error value (`BadAddress`), never a kernel fault.

use abi::Error;

use crate::mm;

/// End of the user half (exclusive): the lowest non-canonical address.
pub const USER_END: u64 = 0x0000_8000_0000_0000;

#[derive(Clone, Copy, Debug)]
pub struct UserSlice {
    address: u64,
    len: u64,
}

impl UserSlice {
    pub fn new(address: u64, len: u64) -> Result<UserSlice, Error> {
        let end = address.checked_add(len).ok_or(Error::BadAddress)?;
        if end > USER_END {
            return Err(Error::BadAddress);
        }
        Ok(UserSlice { address, len })
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// Copies the slice into `out` (which must be exactly `len` bytes).
    pub fn copy_in(&self, address_space: u64, out: &mut [u8]) -> Result<(), Error> {
        if out.len() as u64 != self.len {
            return Err(Error::InvalidArgument);
        }
        let mut done = 0usize;
        while done < out.len() {
            let virt = self.address + done as u64;
            let t = mm::translate(address_space, virt).ok_or(Error::BadAddress)?;
            if !t.flags.user || !mm::is_direct_mapped(t.phys) {
                return Err(Error::BadAddress);
            }
            let page_left = t.size.bytes() - (virt & (t.size.bytes() - 1));
            let chunk = (out.len() - done).min(page_left as usize);
            // SAFETY: `t.phys` is the physical address backing `virt` in a
            // present user mapping, in the direct map (checked above);
            // `chunk` stays within that page.
            let src = unsafe {
                core::slice::from_raw_parts(mm::phys_to_virt(t.phys) as *const u8, chunk)
            };
            out[done..done + chunk].copy_from_slice(src);
            done += chunk;
        }
        Ok(())
    }
}
