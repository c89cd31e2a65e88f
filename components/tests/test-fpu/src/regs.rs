//! Filling and reading the x87/SSE/AVX registers, in assembly (the
//! component is soft-float: the compiler never touches these registers, so
//! what one function leaves in them is still there when the next one
//! looks, unless a system call switched threads and the kernel did not
//! keep them apart).

use core::mem::offset_of;

/// The registers a check compares: the 16 `ymm` registers and the FXSAVE
/// image (x87 control, status and tag words, `MXCSR`, `st0`–`st7`).
#[repr(C, align(64))]
pub struct Regs {
    pub ymm: [u8; 512],
    pub fx: [u8; 512],
}

/// What [`fill`] loads: `ymm0`–`ymm15`, `MXCSR`, the x87 control word,
/// and one integer pushed onto the x87 stack.
#[repr(C)]
pub struct Pattern {
    pub ymm: [u8; 512],
    pub mxcsr: u32,
    pub fcw: u16,
    pub st0: i64,
}

/// FXSAVE offsets (Intel SDM, "FXSAVE"): FCW 0, FSW 2, abridged FTW 4,
/// MXCSR 24, the eight 16-byte x87 registers from 32.
const FCW: usize = 0;
const FSW: usize = 2;
const FTW: usize = 4;
const MXCSR: usize = 24;
const ST: core::ops::Range<usize> = 32..160;

/// The reset state's x87 control word and `MXCSR`.
pub const FCW_CLEAN: u16 = 0x037f;
pub const MXCSR_CLEAN: u32 = 0x1f80;

core::arch::global_asm!(
    // test_fpu_fill(pattern: *const Pattern)
    ".globl test_fpu_fill",
    "test_fpu_fill:",
    ".irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15",
    "    vmovdqu \\i*32(%rdi), %ymm\\i",
    ".endr",
    "    ldmxcsr {mxcsr}(%rdi)",
    "    fninit",
    "    fldcw {fcw}(%rdi)",
    "    fildq {st0}(%rdi)",
    "    ret",
    // test_fpu_snapshot(regs: *mut Regs)
    ".globl test_fpu_snapshot",
    "test_fpu_snapshot:",
    ".irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15",
    "    vmovdqu %ymm\\i, \\i*32(%rdi)",
    ".endr",
    "    fxsave64 {fx}(%rdi)",
    "    ret",
    mxcsr = const offset_of!(Pattern, mxcsr),
    fcw = const offset_of!(Pattern, fcw),
    st0 = const offset_of!(Pattern, st0),
    fx = const offset_of!(Regs, fx),
    options(att_syntax)
);

unsafe extern "C" {
    fn test_fpu_fill(pattern: *const Pattern);
    fn test_fpu_snapshot(regs: *mut Regs);
}

impl Pattern {
    /// A pattern that differs from every other seed's in every register:
    /// `ymm` bytes, the rounding mode of `MXCSR` and of the x87 control
    /// word (1..=3, never the reset state's 0), and `st0`.
    pub fn new(seed: u64) -> Pattern {
        let rounding = (seed % 3 + 1) as u16;
        Pattern {
            ymm: core::array::from_fn(|i| (seed as usize * 37 + i * 7 + 1) as u8),
            mxcsr: MXCSR_CLEAN | u32::from(rounding) << 13,
            fcw: FCW_CLEAN | rounding << 10,
            st0: seed as i64 * 0x0101_0101 + 1,
        }
    }
}

impl Regs {
    pub const fn new() -> Regs {
        Regs {
            ymm: [0; 512],
            fx: [0; 512],
        }
    }

    /// Reads the registers now.
    pub fn read(&mut self) {
        // SAFETY: stores into `self` (64-byte aligned, as fxsave needs 16)
        // only; changes no register.
        unsafe { test_fpu_snapshot(self) }
    }

    fn word(&self, at: usize) -> u16 {
        u16::from_le_bytes([self.fx[at], self.fx[at + 1]])
    }

    pub fn fcw(&self) -> u16 {
        self.word(FCW)
    }

    pub fn mxcsr(&self) -> u32 {
        u32::from_le_bytes([
            self.fx[MXCSR],
            self.fx[MXCSR + 1],
            self.fx[MXCSR + 2],
            self.fx[MXCSR + 3],
        ])
    }

    /// The reset state: every `ymm` zero, x87 empty and zero with the
    /// default control word, `MXCSR` 0x1f80.
    pub fn is_clean(&self) -> bool {
        self.ymm.iter().all(|&b| b == 0)
            && self.fcw() == FCW_CLEAN
            && self.word(FSW) == 0
            && self.fx[FTW] == 0
            && self.mxcsr() == MXCSR_CLEAN
            && self.fx[ST].iter().all(|&b| b == 0)
    }

    /// The same register contents (the x87 instruction and data pointers
    /// aside, which not every CPU saves).
    pub fn same(&self, other: &Regs) -> bool {
        self.ymm == other.ymm
            && self.fcw() == other.fcw()
            && self.word(FSW) == other.word(FSW)
            && self.fx[FTW] == other.fx[FTW]
            && self.mxcsr() == other.mxcsr()
            && self.fx[ST] == other.fx[ST]
    }

    /// Whether these are the registers `pattern` loads.
    pub fn holds(&self, pattern: &Pattern) -> bool {
        self.ymm == pattern.ymm && self.mxcsr() == pattern.mxcsr && self.fcw() == pattern.fcw
    }

    /// A one-line summary for a failure message.
    pub fn summary(&self) -> Summary<'_> {
        Summary(self)
    }
}

pub struct Summary<'a>(&'a Regs);

impl core::fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let r = self.0;
        write!(
            f,
            "ymm0 starts {:02x?}, fcw {:#x}, mxcsr {:#x}, ftw {:#x}",
            &r.ymm[..8],
            r.fcw(),
            r.mxcsr(),
            r.fx[FTW]
        )
    }
}

/// Loads `pattern` into the registers.
pub fn fill(pattern: &Pattern) {
    // SAFETY: reads `pattern` only; the registers it sets are not used by
    // compiled code (soft-float) and are call-clobbered anyway. The
    // control words it loads are valid (reserved bits clear).
    unsafe { test_fpu_fill(pattern) }
}
