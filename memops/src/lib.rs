//! `memcpy` and `memset` for Pecan's user components, in assembly
//! (`memops.s`), plus the check that decides whether they may use AVX.
//!
//! Components are built for `x86_64-unknown-none`, which is soft-float: the
//! compiler never puts a value in an x87, SSE or AVX register, so vector
//! code has to be written by hand, and any function may clobber those
//! registers (the SysV ABI makes them all call-clobbered anyway). The kernel
//! gives every thread its own x87/SSE/AVX state (`docs/kernel.md`, "FPU
//! state"): a thread's first vector instruction in a turn traps once and
//! loads its state, so vector code pays a one-time cost per turn, and a
//! thread that never executes one pays nothing.
//!
//! # The algorithm
//!
//! Under QEMU's icount, the benchmark lab's clock, every instruction is one
//! tick and a `rep movs`/`rep stos` one tick per iteration, so what counts is
//! the number of instructions per byte; the choices below are also the
//! usual ones on hardware.
//!
//! | size `n` | `memcpy` | `memset` |
//! |----------|----------|----------|
//! | 0 | nothing | nothing |
//! | 1..16 | the first and the last 1, 2, 4 or 8 bytes, overlapping: at most 4 moves | the same with stores |
//! | 16..[`VECTOR_MIN`] | `rep movsq` of ⌊n/8⌋ quadwords, then the last 8 bytes again | the last 8 bytes, then `rep stosq` |
//! | ≥ [`VECTOR_MIN`] with AVX | 32 bytes unaligned; from the destination's next 32-byte boundary, loops of 1024 bytes (16 `ymm` loads and 16 aligned stores, twice, plus `add`/`jnz`: 66 instructions, 15.5 bytes per tick); the rest as at most one block of 512 and the buffer's last 512 bytes (overlapping); `vzeroupper` | the same with one broadcast register: 34 instructions per 1024 bytes, 30 bytes per tick |
//! | ≥ [`VECTOR_MIN`] without AVX | as the row above it: `rep movsq`, 8 bytes per tick | `rep stosq` |
//!
//! The vector path starts at [`VECTOR_MIN`] bytes so that a thread whose
//! copies are small never touches the vector registers: it never takes the
//! kernel's first-use trap (about a hundred ticks) and keeps the IPC fast
//! path (a thread that used its vector state in the current turn leaves the
//! CPU through the general path, which saves that state). From 2 KiB on, the
//! vector loop saves more than the trap costs: n·(1/8 − 1/15.5) ≥ 120
//! ticks.
//!
//! # Which CPUs
//!
//! [`init`] allows the vector path only when the CPU has AVX and the kernel
//! has enabled it (`CPUID.1:ECX.OSXSAVE` and `AVX`, and `XCR0` with SSE and
//! AVX state, read with `xgetbv`). Until `init` runs, and on CPUs without
//! AVX, every size takes the integer path. `rt` calls `init` before `main`.
//!
//! # Symbols
//!
//! The functions are `pecan_memcpy` and `pecan_memset` ([`copy`], [`fill`]).
//! Built for a bare-metal target (`target_os = "none"`), this crate also
//! defines `memcpy` and `memset` as strong aliases of them, which the
//! linker prefers to `compiler_builtins`' weak definitions: every
//! `copy_from_slice`, `fill` and struct copy the compiler turns into a call
//! lands here. On the host only the `pecan_` names exist: the unit tests
//! call this same assembly there (both paths, when the host has AVX) and
//! check every byte written and the guard bytes around it.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

use core::sync::atomic::{AtomicBool, Ordering};

/// The size from which the vector path is taken (when allowed). At least
/// one 1024-byte block must remain after aligning the destination, and the
/// last 512 bytes must lie inside the buffer: checked below.
pub const VECTOR_MIN: usize = 2048;
const _: () = assert!(VECTOR_MIN >= 1024 + 31 && VECTOR_MIN >= 512);

/// Whether the vector path may run: set by [`init`]. The assembly reads it
/// as a byte (`AtomicBool` has `bool`'s layout).
static VECTOR: AtomicBool = AtomicBool::new(false);

core::arch::global_asm!(
    include_str!("memops.s"),
    vector = sym VECTOR,
    vector_min = const VECTOR_MIN,
    options(att_syntax)
);

// The C names on bare metal (see the crate docs).
#[cfg(target_os = "none")]
core::arch::global_asm!(
    ".globl memcpy",
    ".type memcpy, @function",
    ".set memcpy, pecan_memcpy",
    ".globl memset",
    ".type memset, @function",
    ".set memset, pecan_memset",
);

unsafe extern "C" {
    fn pecan_memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8;
    fn pecan_memset(dst: *mut u8, c: i32, n: usize) -> *mut u8;
}

/// Copies `n` bytes from `src` to `dst` (what `memcpy` does).
///
/// # Safety
/// As for `memcpy`: `src..src+n` readable, `dst..dst+n` writable, the two
/// ranges do not overlap.
pub unsafe fn copy(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller's contract is memcpy's.
    unsafe { pecan_memcpy(dst, src, n) };
}

/// Sets `n` bytes at `dst` to `value` (what `memset` does).
///
/// # Safety
/// `dst..dst+n` writable.
pub unsafe fn fill(dst: *mut u8, value: u8, n: usize) {
    // SAFETY: the caller's contract is memset's.
    unsafe { pecan_memset(dst, i32::from(value), n) };
}

/// Whether this CPU has AVX and the operating system has enabled it for
/// user code: `CPUID.1:ECX` bits 27 (OSXSAVE) and 28 (AVX), and `XCR0`
/// bits 1 and 2 (SSE and AVX state).
pub fn avx_usable() -> bool {
    const OSXSAVE: u32 = 1 << 27;
    const AVX: u32 = 1 << 28;
    const XCR0_SSE_AVX: u32 = 0b110;
    // `cpuid` is available in every mode and leaf 1 on every x86-64 CPU.
    let ecx = core::arch::x86_64::__cpuid(1).ecx;
    if ecx & (OSXSAVE | AVX) != OSXSAVE | AVX {
        return false;
    }
    let xcr0: u32;
    // SAFETY: `xgetbv` with ecx = 0 reads XCR0; it is allowed in user mode
    // once CR4.OSXSAVE is set, which CPUID.1:ECX.OSXSAVE (checked above)
    // reports. It touches no memory.
    unsafe {
        core::arch::asm!(
            "xgetbv",
            in("ecx") 0,
            out("eax") xcr0,
            out("edx") _,
            options(nomem, nostack, preserves_flags)
        );
    }
    xcr0 & XCR0_SSE_AVX == XCR0_SSE_AVX
}

/// Allows the vector path if [`avx_usable`]; returns whether it is allowed.
pub fn init() -> bool {
    let on = avx_usable();
    VECTOR.store(on, Ordering::Relaxed);
    on
}

/// Whether the vector path is allowed.
pub fn vector_enabled() -> bool {
    VECTOR.load(Ordering::Relaxed)
}

/// Allows (if the CPU can: [`avx_usable`]) or forbids the vector path, for
/// tests that cover both paths; returns whether it is allowed now.
pub fn set_vector(on: bool) -> bool {
    let on = on && avx_usable();
    VECTOR.store(on, Ordering::Relaxed);
    on
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::sync::Mutex;
    use std::vec;
    use std::vec::Vec;

    /// The tests switch the global vector flag: one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    /// Holds [`SERIAL`]; a test that failed while holding it does not fail
    /// the others.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Guard bytes on each side of a destination, checked untouched.
    const GUARD: usize = 64;
    const ALIGNS: [usize; 9] = [0, 1, 7, 8, 16, 31, 32, 33, 63];

    /// Both paths when the host has AVX, else the integer path only.
    fn modes() -> Vec<bool> {
        if avx_usable() {
            vec![true, false]
        } else {
            std::eprintln!("memops: the host has no usable AVX; testing the integer path only");
            vec![false]
        }
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8 | 1).collect()
    }

    /// Copies `n` bytes from `src[s..]` into a fresh buffer at offset
    /// `GUARD + d` and checks the copy and both guards.
    fn check_copy(src: &[u8], dst: &mut [u8], s: usize, d: usize, n: usize) {
        let end = GUARD + d + n + GUARD;
        dst[..end].fill(0xee);
        // SAFETY: both ranges are inside their buffers; distinct buffers.
        unsafe { copy(dst.as_mut_ptr().add(GUARD + d), src.as_ptr().add(s), n) };
        assert!(
            dst[..GUARD + d].iter().all(|&b| b == 0xee),
            "memcpy n={n} s={s} d={d} wrote before dst"
        );
        assert!(
            dst[GUARD + d..GUARD + d + n] == src[s..s + n],
            "memcpy n={n} s={s} d={d} copied wrong bytes (vector {})",
            vector_enabled()
        );
        assert!(
            dst[GUARD + d + n..end].iter().all(|&b| b == 0xee),
            "memcpy n={n} s={s} d={d} wrote past the end"
        );
    }

    fn check_fill(dst: &mut [u8], d: usize, n: usize, value: u8) {
        let end = GUARD + d + n + GUARD;
        dst[..end].fill(0xee);
        // SAFETY: inside the buffer.
        unsafe { fill(dst.as_mut_ptr().add(GUARD + d), value, n) };
        assert!(
            dst[..GUARD + d].iter().all(|&b| b == 0xee),
            "memset n={n} d={d} before"
        );
        assert!(
            dst[GUARD + d..GUARD + d + n].iter().all(|&b| b == value),
            "memset n={n} d={d} wrong bytes (vector {})",
            vector_enabled()
        );
        assert!(
            dst[GUARD + d + n..end].iter().all(|&b| b == 0xee),
            "memset n={n} d={d} past"
        );
    }

    /// Every size up to well past the vector threshold (so every remainder
    /// of the 1024-byte loop and of the 32-byte alignment), with source and
    /// destination at the alignments that matter (0, 1, 7, 8, 16, 31, 32,
    /// 33, 63 bytes past a 64-byte boundary).
    #[test]
    fn copy_every_size_and_alignment() {
        let _serial = serial();
        let max = VECTOR_MIN + 2 * 1024 + 64;
        let src = pattern(max + 128);
        let mut dst = vec![0u8; max + 2 * GUARD + 128];
        for vector in modes() {
            assert_eq!(set_vector(vector), vector);
            for n in 0..=max {
                for s in ALIGNS {
                    for d in ALIGNS {
                        check_copy(&src, &mut dst, s, d, n);
                    }
                }
            }
        }
        init();
    }

    #[test]
    fn fill_every_size_and_alignment() {
        let _serial = serial();
        let max = VECTOR_MIN + 2 * 1024 + 64;
        let mut dst = vec![0u8; max + 2 * GUARD + 128];
        for vector in modes() {
            assert_eq!(set_vector(vector), vector);
            for n in 0..=max {
                for d in ALIGNS {
                    check_fill(&mut dst, d, n, (n as u8) ^ 0x5a);
                }
            }
        }
        init();
    }

    /// Large buffers (several loop iterations, the benchmark's 8 MiB) with
    /// odd sizes.
    #[test]
    fn large_copies_and_fills() {
        let _serial = serial();
        let big = 8 << 20;
        let src = pattern(big + 2048);
        let mut dst = vec![0u8; big + 2 * GUARD + 2048];
        for vector in modes() {
            assert_eq!(set_vector(vector), vector);
            for n in [
                big,
                big + 1,
                big - 1,
                big + 31,
                big + 513,
                big + 1023,
                100_000,
            ] {
                for (s, d) in [(0, 0), (1, 0), (0, 33), (63, 17)] {
                    check_copy(&src, &mut dst, s, d, n);
                    check_fill(&mut dst, d, n, 0xa5);
                }
            }
        }
        init();
    }

    #[test]
    fn value_is_the_low_byte_and_result_is_dst() {
        let _serial = serial();
        let mut buf = [0u8; 4096];
        for vector in modes() {
            set_vector(vector);
            for n in [3, 15, 100, 4000] {
                // SAFETY: inside `buf`.
                let r = unsafe { pecan_memset(buf.as_mut_ptr(), 0x1ff, n) };
                assert_eq!(r, buf.as_mut_ptr());
                assert!(buf[..n].iter().all(|&b| b == 0xff));
                let src = [9u8; 4096];
                // SAFETY: inside both arrays.
                let r = unsafe { pecan_memcpy(buf.as_mut_ptr(), src.as_ptr(), n) };
                assert_eq!(r, buf.as_mut_ptr());
                assert!(buf[..n].iter().all(|&b| b == 9));
            }
        }
        init();
    }

    #[test]
    fn init_matches_the_cpu() {
        let _serial = serial();
        assert_eq!(init(), avx_usable());
        assert_eq!(vector_enabled(), avx_usable());
        assert!(!set_vector(false) && !vector_enabled());
        init();
    }
}
