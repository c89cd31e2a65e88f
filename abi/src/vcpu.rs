//! Virtual CPUs (AMD SVM): the state block `VcpuRun` exchanges through the
//! caller's IPC buffer, its load flags, exit codes and the event word.
//! `docs/virtualization.md` explains the design.
//!
//! `VcpuRun(vcpu, space, flags)` loads the parts of the block that `flags`
//! names ([`load`]) into the virtual CPU, enters the guest, and returns at
//! its next exit with the whole block written back (every field below) and
//! result 0 = the exit code ([`exit`]), result 1 = exit info 1, result 2 =
//! exit info 2. A host interrupt during the guest's run ends the call with
//! [`exit::INTR`] and nothing for the VMM to do: `rt::vcpu::run` calls
//! again (the interrupt is taken on the way back to user mode, so the
//! host's scheduler and timer keep working). A thread with a bound
//! notification whose bits are set does not enter the guest: the call
//! returns [`exit::NOTIFICATION`] with the bits.
//!
//! The block: `words[i]` of the IPC buffer (`abi::ipc_buffer`), `u64`s.

/// Word indices of the state block.
pub mod word {
    /// Out: the exit code ([`super::exit`]).
    pub const EXIT_CODE: usize = 0;
    /// Out: exit info 1 (IOIO: the port and access, [`super::ioio`]; MSR:
    /// 0 read, 1 write; NPF: the page-fault error code).
    pub const EXIT_INFO1: usize = 1;
    /// Out: exit info 2 (IOIO: the next RIP; NPF: the guest-physical
    /// address).
    pub const EXIT_INFO2: usize = 2;
    /// Out: an event whose delivery the exit interrupted (the kernel
    /// injects it again on the next run unless [`super::load::EVENT`]
    /// replaces it).
    pub const EXIT_INT_INFO: usize = 3;
    pub const RAX: usize = 4;
    pub const RBX: usize = 5;
    pub const RCX: usize = 6;
    pub const RDX: usize = 7;
    pub const RSI: usize = 8;
    pub const RDI: usize = 9;
    pub const RBP: usize = 10;
    pub const RSP: usize = 11;
    pub const R8: usize = 12;
    pub const R9: usize = 13;
    pub const R10: usize = 14;
    pub const R11: usize = 15;
    pub const R12: usize = 16;
    pub const R13: usize = 17;
    pub const R14: usize = 18;
    pub const R15: usize = 19;
    pub const RIP: usize = 20;
    pub const RFLAGS: usize = 21;
    pub const CR0: usize = 22;
    pub const CR2: usize = 23;
    pub const CR3: usize = 24;
    pub const CR4: usize = 25;
    /// The guest's EFER (SVME, which SVM requires of a guest, is always
    /// set in the VMCB; this word shows it as the VMCB has it).
    pub const EFER: usize = 26;
    /// In: an event to inject ([`super::event`]), with [`super::load::EVENT`].
    pub const EVENT: usize = 27;
    /// In: a virtual interrupt ([`super::virq`]), with [`super::load::VIRQ`].
    pub const VIRQ: usize = 28;
    /// In: the TSC offset (guest TSC = host TSC + offset), with
    /// [`super::load::TSC_OFFSET`].
    pub const TSC_OFFSET: usize = 29;
    /// Out: bit 0 the guest is in an interrupt shadow (after `sti` or
    /// `mov ss`), bit 1 its virtual interrupt is still pending (V_IRQ).
    pub const INTERRUPT_STATE: usize = 30;
    /// Segments ES, CS, SS, DS, FS, GS, GDTR, LDTR, IDTR, TR: two words
    /// each from here, [`super::segment`].
    pub const SEGMENTS: usize = 31;
    /// Words in the block.
    pub const COUNT: usize = SEGMENTS + 2 * super::segment::COUNT;
}

/// The segment registers in the block: index `i` at
/// `word::SEGMENTS + 2 * i` (selector, attributes, limit) and `+ 1` (base).
pub mod segment {
    pub const ES: usize = 0;
    pub const CS: usize = 1;
    pub const SS: usize = 2;
    pub const DS: usize = 3;
    pub const FS: usize = 4;
    pub const GS: usize = 5;
    pub const GDTR: usize = 6;
    pub const LDTR: usize = 7;
    pub const IDTR: usize = 8;
    pub const TR: usize = 9;
    pub const COUNT: usize = 10;

    /// The first word of a segment: selector (bits 0..16), SVM's packed
    /// attributes (bits 16..28: descriptor bits 40..48 and 52..56) and the
    /// limit (bits 32..64).
    pub const fn pack(selector: u16, attributes: u16, limit: u32) -> u64 {
        selector as u64 | ((attributes as u64 & 0xfff) << 16) | (limit as u64) << 32
    }

    /// The parts of a first word: (selector, attributes, limit).
    pub const fn unpack(word: u64) -> (u16, u16, u32) {
        (
            word as u16,
            ((word >> 16) & 0xfff) as u16,
            (word >> 32) as u32,
        )
    }

    /// Attributes of a flat 32-bit ring-0 code segment (execute/read,
    /// accessed, present, 32-bit, 4 KiB granularity).
    pub const CODE32: u16 = 0xc9b;
    /// A flat 64-bit ring-0 code segment (L set).
    pub const CODE64: u16 = 0xa9b;
    /// A flat read/write data segment.
    pub const DATA32: u16 = 0xc93;
    /// A 16-bit real-mode style code or data segment (present, accessed).
    pub const REAL_CODE: u16 = 0x9b;
    pub const REAL_DATA: u16 = 0x93;
    /// A busy 32/64-bit TSS.
    pub const TSS_BUSY: u16 = 0x8b;
    /// An LDT.
    pub const LDT: u16 = 0x82;
}

/// The flags argument of `VcpuRun`: which parts of the block to load
/// before the run. Unknown bits are `InvalidArgument`.
pub mod load {
    /// The general registers, RIP and RFLAGS (words RAX..=RFLAGS).
    pub const REGISTERS: u64 = 1 << 0;
    /// CR0, CR2, CR3, CR4 and EFER.
    pub const CONTROL: u64 = 1 << 1;
    /// The segment registers and descriptor-table registers.
    pub const SEGMENTS: u64 = 1 << 2;
    /// Inject the event in word EVENT (replacing a re-injection).
    pub const EVENT: u64 = 1 << 3;
    /// Set the virtual interrupt of word VIRQ.
    pub const VIRQ: u64 = 1 << 4;
    /// Set the TSC offset of word TSC_OFFSET.
    pub const TSC_OFFSET: u64 = 1 << 5;
    /// Every flag.
    pub const ALL: u64 = (1 << 6) - 1;
}

/// The event word (SVM's EVENTINJ layout): vector bits 0..8, type bits
/// 8..11, error code valid bit 11, valid bit 31, error code bits 32..64.
pub mod event {
    pub const VALID: u64 = 1 << 31;
    pub const ERROR_CODE_VALID: u64 = 1 << 11;
    pub const TYPE_SHIFT: u64 = 8;
    /// An external interrupt.
    pub const TYPE_INTR: u64 = 0;
    pub const TYPE_NMI: u64 = 2;
    /// An exception (vector 0..32).
    pub const TYPE_EXCEPTION: u64 = 3;
    /// A software interrupt (`int n`).
    pub const TYPE_SOFT_INT: u64 = 4;

    /// An event word: `vector` of `kind`, with an error code if `Some`.
    pub const fn new(vector: u8, kind: u64, error_code: Option<u32>) -> u64 {
        let mut w = VALID | vector as u64 | (kind & 7) << TYPE_SHIFT;
        if let Some(code) = error_code {
            w |= ERROR_CODE_VALID | (code as u64) << 32;
        }
        w
    }

    /// Whether the kernel accepts `word` to inject: 0 (nothing), or valid
    /// with a known type, no reserved bit, an exception vector below 32,
    /// and an error code only with an exception.
    pub const fn acceptable(word: u64) -> bool {
        if word == 0 {
            return true;
        }
        let kind = (word >> TYPE_SHIFT) & 7;
        let vector = word & 0xff;
        if word & VALID == 0 || word & 0x7fff_f000 != 0 {
            return false;
        }
        match kind {
            TYPE_INTR | TYPE_SOFT_INT => word & ERROR_CODE_VALID == 0,
            TYPE_NMI => word & ERROR_CODE_VALID == 0 && vector == 2,
            TYPE_EXCEPTION => vector < 32 && vector != 2,
            _ => false,
        }
    }
}

/// The virtual-interrupt word: vector bits 0..8, bit 8 pending (V_IRQ),
/// priority bits 16..20; bit 9 asks for an exit ([`super::exit::VINTR`])
/// as soon as the guest can take it (the interrupt window).
pub mod virq {
    pub const PENDING: u64 = 1 << 8;
    pub const WINDOW_EXIT: u64 = 1 << 9;
    pub const PRIORITY_SHIFT: u64 = 16;
    /// Bits a word may have.
    pub const MASK: u64 = 0xff | PENDING | WINDOW_EXIT | 0xf << PRIORITY_SHIFT;
}

/// Exit codes (AMD APM vol. 2, appendix C) that a run can end with.
pub mod exit {
    /// Reads of CR0..CR15 are `CR_READ + n`, writes `CR_WRITE + n` (CR4
    /// writes are intercepted: the VMM decodes `mov cr4, reg` itself and
    /// loads CR4 with `load::CONTROL`, where PKE, CET and PKS are cleared).
    pub const CR_READ: u64 = 0x00;
    pub const CR_WRITE: u64 = 0x10;
    /// Debug-register reads `DR_READ + n`, writes `DR_WRITE + n`.
    pub const DR_READ: u64 = 0x20;
    pub const DR_WRITE: u64 = 0x30;
    /// Exception `n`: `EXCEPTION + n` (only #MC is intercepted).
    pub const EXCEPTION: u64 = 0x40;
    /// A host interrupt: nothing for the VMM (run again).
    pub const INTR: u64 = 0x60;
    pub const NMI: u64 = 0x61;
    pub const SMI: u64 = 0x62;
    pub const INIT: u64 = 0x63;
    /// The interrupt window opened ([`super::virq::WINDOW_EXIT`]).
    pub const VINTR: u64 = 0x64;
    pub const RDPMC: u64 = 0x6f;
    pub const CPUID: u64 = 0x72;
    pub const RSM: u64 = 0x73;
    pub const IRET: u64 = 0x74;
    pub const INVD: u64 = 0x76;
    pub const HLT: u64 = 0x78;
    pub const INVLPGA: u64 = 0x7a;
    /// Port I/O: exit info 1 [`super::ioio`], exit info 2 the next RIP.
    pub const IOIO: u64 = 0x7b;
    /// RDMSR (exit info 1 = 0) or WRMSR (1); the MSR in RCX.
    pub const MSR: u64 = 0x7c;
    pub const TASK_SWITCH: u64 = 0x7d;
    pub const FERR_FREEZE: u64 = 0x7e;
    /// The guest shut down (a triple fault): end the VM.
    pub const SHUTDOWN: u64 = 0x7f;
    pub const VMRUN: u64 = 0x80;
    pub const VMMCALL: u64 = 0x81;
    pub const VMLOAD: u64 = 0x82;
    pub const VMSAVE: u64 = 0x83;
    pub const STGI: u64 = 0x84;
    pub const CLGI: u64 = 0x85;
    pub const SKINIT: u64 = 0x86;
    pub const ICEBP: u64 = 0x88;
    pub const WBINVD: u64 = 0x89;
    pub const MONITOR: u64 = 0x8a;
    pub const MWAIT: u64 = 0x8b;
    pub const MWAIT_CONDITIONAL: u64 = 0x8c;
    pub const XSETBV: u64 = 0x8d;
    /// A nested page fault: exit info 1 the error code, exit info 2 the
    /// guest-physical address.
    pub const NPF: u64 = 0x400;
    /// The guest state was refused by VMRUN's consistency checks.
    pub const INVALID: u64 = u64::MAX;
    /// Pecan's own, not SVM's: the calling thread's bound notification
    /// had bits set, so the guest did not run (the loads were made):
    /// exit info 1 holds the bits, now cleared. How another thread of
    /// the VMM (a device model, a timer) gets the VCPU's thread out of
    /// the guest to inject an interrupt — within a timer tick, since the
    /// next host interrupt ends any run.
    pub const NOTIFICATION: u64 = 1 << 32;
}

/// Exit info 1 of an IOIO exit.
pub mod ioio {
    /// Set for `in`, clear for `out`.
    pub const IN: u64 = 1 << 0;
    /// A string instruction (`ins`/`outs`).
    pub const STRING: u64 = 1 << 2;
    /// With a `rep` prefix.
    pub const REP: u64 = 1 << 3;

    /// The port.
    pub const fn port(info1: u64) -> u16 {
        (info1 >> 16) as u16
    }

    /// The access width in bytes (1, 2 or 4).
    pub const fn width(info1: u64) -> u8 {
        if info1 & (1 << 4) != 0 {
            1
        } else if info1 & (1 << 5) != 0 {
            2
        } else {
            4
        }
    }
}

/// Guest-physical addresses a guest space can map: below 2^39 (512 GiB;
/// the CPUs this runs on have at least 40 physical address bits).
pub const GUEST_PHYS_END: u64 = 1 << 39;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        assert_eq!(word::COUNT, 51);
        const { assert!(word::COUNT <= crate::MAX_MESSAGE_WORDS) };
        let w = segment::pack(0x10, segment::CODE32, 0xffff_ffff);
        assert_eq!(segment::unpack(w), (0x10, 0xc9b, 0xffff_ffff));
    }

    #[test]
    fn events() {
        assert!(event::acceptable(0));
        assert!(event::acceptable(event::new(32, event::TYPE_INTR, None)));
        assert!(event::acceptable(event::new(
            14,
            event::TYPE_EXCEPTION,
            Some(2)
        )));
        assert!(!event::acceptable(event::new(
            40,
            event::TYPE_EXCEPTION,
            None
        )));
        assert!(!event::acceptable(event::new(32, 1, None)));
        assert!(!event::acceptable(event::new(
            32,
            event::TYPE_INTR,
            Some(0)
        )));
        assert!(!event::acceptable(32)); // not valid
        assert!(!event::acceptable(event::VALID | 1 << 20));
    }

    #[test]
    fn ioio_fields() {
        let info = 0x1234 << 16 | 1 << 4 | ioio::IN;
        assert_eq!(ioio::port(info), 0x1234);
        assert_eq!(ioio::width(info), 1);
        assert_eq!(ioio::width(1 << 6), 4);
    }
}
