//! CPU and memory kernels, identical on both platforms (the classic
//! "ARM boards" set: bogomips, memcpy, memset, uncached access).
//!
//! The runtime variants call the platform's own `memcpy`/`memset` (Pecan:
//! the runtime's, i.e. `memops`; Linux: glibc's) through
//! `copy_from_slice`/`fill`; the bytewise variant moves one byte per
//! iteration with volatile accesses, so the compiler cannot turn it into a
//! library call.

/// Runs a register-decrement loop of `iterations` (two instructions per
/// iteration: `dec`, `jnz`), the classic bogomips kernel.
#[inline(never)]
pub fn bogomips(iterations: u64) {
    if iterations == 0 {
        return;
    }
    // SAFETY: the loop only decrements a register until it is zero; it
    // touches no memory and leaves the stack alone.
    unsafe {
        core::arch::asm!(
            "2:",
            "dec {n}",
            "jnz 2b",
            n = inout(reg) iterations => _,
            options(nomem, nostack),
        );
    }
}

/// Copies with the platform's `memcpy`.
#[inline(never)]
pub fn copy_runtime(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    dst[..n].copy_from_slice(&src[..n]);
}

/// Fills with the platform's `memset`.
#[inline(never)]
pub fn set_runtime(dst: &mut [u8], value: u8) {
    dst.fill(value);
}

/// Copies one byte at a time.
#[inline(never)]
pub fn copy_bytewise(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    for i in 0..n {
        // SAFETY: i < n <= both lengths; volatile keeps the loop a loop.
        unsafe {
            core::ptr::write_volatile(
                dst.as_mut_ptr().add(i),
                core::ptr::read_volatile(src.as_ptr().add(i)),
            );
        }
    }
}

/// Writes `len` bytes at `base` with 8-byte volatile stores (for uncached
/// memory, where every store goes to memory).
///
/// # Safety
/// `base..base + len` must be writable memory of the caller, 8-byte
/// aligned, `len` a multiple of 8.
pub unsafe fn write_words(base: *mut u64, len: usize, value: u64) {
    for i in 0..len / 8 {
        // SAFETY: inside the range the caller vouches for.
        unsafe { core::ptr::write_volatile(base.add(i), value) };
    }
}

/// Reads `len` bytes at `base` with 8-byte volatile loads; returns their
/// XOR (so the reads are used).
///
/// # Safety
/// As for [`write_words`], readable.
pub unsafe fn read_words(base: *const u64, len: usize) -> u64 {
    let mut acc = 0;
    for i in 0..len / 8 {
        // SAFETY: inside the range the caller vouches for.
        acc ^= unsafe { core::ptr::read_volatile(base.add(i)) };
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_sets() {
        let src: [u8; 37] = core::array::from_fn(|i| i as u8);
        let mut a = [0u8; 37];
        let mut b = [0u8; 37];
        copy_runtime(&mut a, &src);
        copy_bytewise(&mut b, &src);
        assert_eq!(a, src);
        assert_eq!(b, src);
        set_runtime(&mut a, 7);
        assert!(a.iter().all(|&x| x == 7));
        let mut words = [0u64; 4];
        // SAFETY: a local array of 32 bytes.
        unsafe {
            write_words(words.as_mut_ptr(), 32, 5);
            assert_eq!(read_words(words.as_ptr(), 32), 0);
            assert_eq!(read_words(words.as_ptr(), 24), 5);
        }
        bogomips(1000);
        bogomips(0);
    }
}
