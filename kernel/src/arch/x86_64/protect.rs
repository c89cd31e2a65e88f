//! The CPU's own protections at the user/kernel boundary, set on every CPU
//! before it first enters user mode; `docs/security.md` lists each one with
//! the test that shows it works.
//!
//! - **SMEP** (CR4 bit 20): the kernel never executes an instruction from a
//!   user page, so a kernel bug that jumps to a user address faults
//!   instead of running a component's code in ring 0.
//! - **SMAP** (CR4 bit 21): the kernel never reads or writes a user page
//!   through its user address. The kernel never does on purpose: it
//!   reaches user memory only by walking the address space's page tables
//!   to the frame and going through the direct map (`uaccess.rs`), which
//!   maps frames as supervisor pages. So there are no `stac`/`clac` pairs
//!   around user accesses; the only `clac` is at the interrupt entry from
//!   user mode (`trap.s`), because an interrupt, unlike `syscall`
//!   (`SFMASK`), keeps the user's RFLAGS.AC, which would switch SMAP off.
//! - **UMIP** (CR4 bit 11): `sgdt`, `sidt`, `sldt`, `str` and `smsw` raise
//!   #GP in user mode instead of telling a component where the kernel's
//!   descriptor tables are.
//! - **NX** (EFER.NXE) and **write protection** (CR0.WP) are switched on by
//!   `boot.s` and `ap_boot.s` on every CPU; they are checked and reported
//!   here. With WP the kernel cannot write a read-only page either (its
//!   own text and rodata); with NX only the kernel's text is executable
//!   (`mm.rs`; the boot self-check `kernel-mappings` proves it).
//!
//! A feature the CPU does not report is left off and printed as absent; the
//! kernel works without any of them.

use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

use super::cpu;

const CR0_WP: u64 = 1 << 16;
const CR4_UMIP: u64 = 1 << 11;
const CR4_SMEP: u64 = 1 << 20;
const CR4_SMAP: u64 = 1 << 21;
const MSR_EFER: u32 = 0xc000_0080;
const EFER_NXE: u64 = 1 << 11;

/// 1 when SMAP is on (every CPU alike): `trap.s` then clears RFLAGS.AC on
/// entries from user mode (`clac` is an invalid opcode without SMAP).
pub static SMAP_ENABLED: AtomicU8 = AtomicU8::new(0);

/// What this CPU enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protections {
    pub smep: bool,
    pub smap: bool,
    pub umip: bool,
    pub nx: bool,
    pub write_protect: bool,
}

/// Turns on every protection this CPU has (the boot CPU first, then each
/// application processor with the same result) and returns what it
/// enforces now.
pub fn enable() -> Protections {
    let max_leaf = cpu::cpuid(0, 0).eax;
    let (ebx, ecx) = if max_leaf >= 7 {
        let leaf = cpu::cpuid(7, 0);
        (leaf.ebx, leaf.ecx)
    } else {
        (0, 0)
    };
    let has_smep = ebx & (1 << 7) != 0;
    let has_smap = ebx & (1 << 20) != 0;
    let has_umip = ecx & (1 << 2) != 0;
    let mut cr4 = cpu::read_cr4();
    if has_smep {
        cr4 |= CR4_SMEP;
    }
    if has_smap {
        cr4 |= CR4_SMAP;
    }
    if has_umip {
        cr4 |= CR4_UMIP;
    }
    // SAFETY: only bits the CPU reports are added; the kernel never
    // executes or touches user pages through user addresses (module doc),
    // and RFLAGS.AC is clear in the kernel (SFMASK, trap.s), so SMEP and
    // SMAP cannot fault a correct kernel; UMIP affects user mode only.
    unsafe { cpu::write_cr4(cr4) };
    // Every CPU reports the same features: the boot CPU's store is the one
    // that counts (before any user thread runs); the others repeat it.
    SMAP_ENABLED.store(u8::from(has_smap), Ordering::Relaxed);
    current()
}

/// What this CPU enforces, read from its control registers.
pub fn current() -> Protections {
    let cr4 = cpu::read_cr4();
    // SAFETY: EFER exists on every x86_64 CPU (long mode needs it).
    let efer = unsafe { cpu::rdmsr(MSR_EFER) };
    Protections {
        smep: cr4 & CR4_SMEP != 0,
        smap: cr4 & CR4_SMAP != 0,
        umip: cr4 & CR4_UMIP != 0,
        nx: efer & EFER_NXE != 0,
        write_protect: cpu::read_cr0() & CR0_WP != 0,
    }
}

impl fmt::Display for Protections {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let on = |b: bool| if b { "on" } else { "absent" };
        write!(
            f,
            "SMEP {}, SMAP {}, UMIP {}, NX {}, WP {}",
            on(self.smep),
            on(self.smap),
            on(self.umip),
            on(self.nx),
            on(self.write_protect)
        )
    }
}
