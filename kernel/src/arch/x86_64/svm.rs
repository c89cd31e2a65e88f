//! AMD SVM: detection, per-CPU enabling, the VMCB layout and `VMRUN`.
//!
//! The virtual-CPU object and its system call are in `crate::vcpu`; this
//! module holds what touches the hardware (docs/virtualization.md).
//!
//! - **Detection** ([`init`], boot CPU): CPUID 0x8000_0001 ECX bit 2
//!   (SVM), leaf 0x8000_000A EDX bit 0 (nested paging), and VM_CR.SVMDIS
//!   clear (firmware did not lock SVM off). Without all three virtual CPUs
//!   are `Unsupported`. The boot log says which features the CPU has.
//! - **Per CPU** ([`init_cpu`]): EFER.SVME set, VM_HSAVE_PA pointing at a
//!   page where `VMRUN` keeps the host's state, and a second page for the
//!   host's `VMSAVE` state (FS, GS, TR, LDTR, KernelGsBase, STAR, LSTAR,
//!   CSTAR, SFMASK, SYSENTER_*: what `VMRUN`/`#VMEXIT` do not switch).
//! - **Intercepts** ([`setup_vmcb`]): every I/O port (one 12 KiB I/O
//!   permission map of all ones shared by every VCPU), every MSR but
//!   those `VMLOAD`/`VMSAVE` switch (an 8 KiB MSR permission map,
//!   `kcore::svm`: the segment bases, the system-call and SYSENTER MSRs
//!   pass), physical interrupts, NMI, SMI, INIT,
//!   CPUID, HLT, INVD, INVLPGA, RSM, task switches, FERR freeze,
//!   shutdown, every SVM instruction (VMRUN, VMMCALL, VMLOAD,
//!   VMSAVE, STGI, CLGI, SKINIT), RDPMC, ICEBP, WBINVD, MONITOR, MWAIT,
//!   XSETBV, INVLPGB, TLBSYNC, every debug-register access, writes of
//!   CR4 and machine checks; nested paging
//!   on (a guest reaches only what its guest space maps: the rest is a
//!   nested page fault), V_INTR_MASKING on (the guest's IF and TPR
//!   govern only its virtual interrupts; the host's IF, set during the
//!   run, lets every physical interrupt end it).
//! - **Run** ([`run`]): `CLGI`; `STI`; `VMSAVE` host; `VMLOAD` guest;
//!   the guest's general registers; `VMRUN`; store them; `VMSAVE` guest;
//!   `VMLOAD` host; `CLI`; `STGI`. Interrupts that arrive meanwhile end
//!   the run (INTR exit) and stay pending until the kernel returns to user
//!   mode. Every run flushes the TLB (TLB_CONTROL = 1: the whole TLB, the
//!   host's entries too — the one flush that needs no FlushByAsid): one
//!   ASID for all guests, no stale nested translation after an `Unmap`.
//!   Correct everywhere, slow on hardware; with FlushByAsid, per-space
//!   ASIDs and a flush only after an `Unmap` are the fix
//!   (docs/virtualization.md, "Next steps").

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{cpu, percpu};

/// EFER and its SVM enable bit.
const MSR_EFER: u32 = 0xc000_0080;
const EFER_SVME: u64 = 1 << 12;
/// The physical address of the host save area `VMRUN` uses.
const MSR_VM_HSAVE_PA: u32 = 0xc001_0117;
/// VM_CR: bit 4 (SVMDIS) set means firmware disabled SVM.
const MSR_VM_CR: u32 = 0xc001_0114;
const VM_CR_SVMDIS: u64 = 1 << 4;

static AVAILABLE: AtomicBool = AtomicBool::new(false);
/// The shared I/O and MSR permission maps (physical; 0 until [`init`]).
static IOPM: AtomicU64 = AtomicU64::new(0);
static MSRPM: AtomicU64 = AtomicU64::new(0);
/// Per CPU: the page for the host's `VMSAVE` state (physical; 0 if SVM
/// could not be enabled there).
static HOST_AREA: [AtomicU64; percpu::MAX_CPUS] = [const { AtomicU64::new(0) }; percpu::MAX_CPUS];

/// What CPUID says about SVM, for the boot log.
pub struct Features {
    /// False with the kernel option `pecan.svm=off`.
    pub wanted: bool,
    pub svm: bool,
    pub npt: bool,
    pub disabled_by_firmware: bool,
    /// CPUID 0x8000_000A EDX: the optional features.
    pub edx: u32,
    pub asids: u32,
}

impl core::fmt::Display for Features {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if !self.wanted {
            return f.write_str("off (pecan.svm=off): virtual CPUs unsupported");
        }
        if !self.svm {
            return f.write_str("not available (no SVM in CPUID): virtual CPUs unsupported");
        }
        if self.disabled_by_firmware {
            return f.write_str("disabled by firmware (VM_CR.SVMDIS): virtual CPUs unsupported");
        }
        if !self.npt {
            return f.write_str("no nested paging: virtual CPUs unsupported");
        }
        write!(f, "AMD SVM with nested paging, {} ASIDs;", self.asids)?;
        for (bit, name) in [
            (1, "lbrv"),
            (2, "svml"),
            (3, "nrip-save"),
            (4, "tsc-scale"),
            (5, "vmcb-clean"),
            (6, "flushbyasid"),
            (7, "decodeassists"),
            (10, "pause-filter"),
            (13, "avic"),
            (16, "vgif"),
        ] {
            if self.edx & (1 << bit) != 0 {
                write!(f, " {name}")?;
            }
        }
        f.write_str(" (used: nested paging only)")
    }
}

/// Whether virtual CPUs can run here (set once at boot by [`init`]).
pub fn available() -> bool {
    AVAILABLE.load(Ordering::Relaxed)
}

/// Detects SVM on the boot CPU, makes the shared permission maps and
/// enables SVM on it (unless `wanted` is false: `pecan.svm=off`). Runs
/// once, after the frame allocator exists.
pub fn init(wanted: bool) -> Features {
    let ext = cpu::cpuid(0x8000_0000, 0).eax;
    let svm = ext >= 0x8000_000a && cpu::cpuid(0x8000_0001, 0).ecx & (1 << 2) != 0;
    let mut features = Features {
        wanted,
        svm,
        npt: false,
        disabled_by_firmware: false,
        edx: 0,
        asids: 0,
    };
    if !svm || !wanted {
        return features;
    }
    let leaf = cpu::cpuid(0x8000_000a, 0);
    features.npt = leaf.edx & 1 != 0;
    features.edx = leaf.edx;
    features.asids = leaf.ebx;
    // SAFETY: VM_CR exists on every CPU with SVM (APM vol. 2, 15.30.1).
    features.disabled_by_firmware = unsafe { cpu::rdmsr(MSR_VM_CR) } & VM_CR_SVMDIS != 0;
    if !features.npt || features.disabled_by_firmware {
        return features;
    }
    let (Some(iopm), Some(msrpm)) = (
        crate::mm::alloc_kernel_frames(3),
        crate::mm::alloc_kernel_frames(2),
    ) else {
        crate::kprintln!("svm: no memory for the permission maps: virtual CPUs unsupported");
        return Features {
            npt: false,
            ..features
        };
    };
    // SAFETY: fresh kernel frames (3 and 2 pages), direct-mapped, nobody
    // else's: all ones = every port and every MSR intercepted.
    unsafe {
        core::ptr::write_bytes(crate::mm::phys_to_virt(iopm) as *mut u8, 0xff, 3 * 4096);
        core::ptr::write_bytes(crate::mm::phys_to_virt(msrpm) as *mut u8, 0xff, 2 * 4096);
    }
    // SAFETY: the same fresh MSR map, two pages, not yet shared.
    let map = unsafe {
        core::slice::from_raw_parts_mut(
            crate::mm::phys_to_virt(msrpm) as *mut u8,
            kcore::svm::MSRPM_BYTES,
        )
    };
    kcore::svm::pass_through(map);
    IOPM.store(iopm, Ordering::Relaxed);
    MSRPM.store(msrpm, Ordering::Relaxed);
    if init_cpu(0) {
        AVAILABLE.store(true, Ordering::Relaxed);
    }
    features
}

/// Enables SVM on this CPU (index `index`): EFER.SVME, the host save area
/// and the host's `VMSAVE` page. Returns whether it could. Application
/// processors call it after the boot CPU's [`init`] found SVM.
pub fn init_cpu(index: usize) -> bool {
    if IOPM.load(Ordering::Relaxed) == 0 || index >= percpu::MAX_CPUS {
        return false;
    }
    let Some(pages) = crate::mm::alloc_kernel_frames(2) else {
        crate::kprintln!("svm: cpu {index}: no memory for the host save area");
        return false;
    };
    // SAFETY: fresh kernel frames, direct-mapped, nobody else's.
    unsafe { core::ptr::write_bytes(crate::mm::phys_to_virt(pages) as *mut u8, 0, 2 * 4096) };
    // SAFETY: the CPU has SVM (checked by `init` on the boot CPU; every CPU
    // of the machine is the same model), so EFER.SVME and VM_HSAVE_PA
    // exist; SVME only makes the SVM instructions usable, and the save
    // area is a page the kernel owns for good.
    unsafe {
        cpu::wrmsr(MSR_EFER, cpu::rdmsr(MSR_EFER) | EFER_SVME);
        cpu::wrmsr(MSR_VM_HSAVE_PA, pages);
    }
    HOST_AREA[index].store(pages + 4096, Ordering::Relaxed);
    true
}

/// VMCB offsets (AMD APM vol. 2, appendix B): the control area, then the
/// state save area at 0x400.
pub mod vmcb {
    pub const INTERCEPT_CR: usize = 0x000;
    pub const INTERCEPT_DR: usize = 0x004;
    pub const INTERCEPT_EXCEPTIONS: usize = 0x008;
    pub const INTERCEPT_MISC1: usize = 0x00c;
    pub const INTERCEPT_MISC2: usize = 0x010;
    pub const INTERCEPT_MISC3: usize = 0x014;
    pub const IOPM_BASE: usize = 0x040;
    pub const MSRPM_BASE: usize = 0x048;
    pub const TSC_OFFSET: usize = 0x050;
    pub const GUEST_ASID: usize = 0x058;
    pub const TLB_CONTROL: usize = 0x05c;
    pub const INT_CTL: usize = 0x060;
    pub const INTERRUPT_SHADOW: usize = 0x068;
    pub const EXIT_CODE: usize = 0x070;
    pub const EXIT_INFO1: usize = 0x078;
    pub const EXIT_INFO2: usize = 0x080;
    pub const EXIT_INT_INFO: usize = 0x088;
    pub const NP_ENABLE: usize = 0x090;
    pub const EVENT_INJ: usize = 0x0a8;
    pub const N_CR3: usize = 0x0b0;
    pub const CLEAN_BITS: usize = 0x0c0;
    /// Segments: 16 bytes each (selector u16, attributes u16, limit u32,
    /// base u64) in the order ES, CS, SS, DS, FS, GS, GDTR, LDTR, IDTR,
    /// TR — the order of `abi::vcpu::segment`.
    pub const SEGMENTS: usize = 0x400;
    pub const CPL: usize = 0x4cb;
    pub const EFER: usize = 0x4d0;
    pub const CR4: usize = 0x548;
    pub const CR3: usize = 0x550;
    pub const CR0: usize = 0x558;
    pub const DR7: usize = 0x560;
    pub const DR6: usize = 0x568;
    pub const RFLAGS: usize = 0x570;
    pub const RIP: usize = 0x578;
    pub const RSP: usize = 0x5d8;
    pub const RAX: usize = 0x5f8;
    pub const CR2: usize = 0x640;
    pub const G_PAT: usize = 0x668;

    /// INT_CTL bits.
    pub const V_IRQ: u64 = 1 << 8;
    pub const V_INTR_PRIO_SHIFT: u64 = 16;
    pub const V_IGN_TPR: u64 = 1 << 20;
    pub const V_INTR_MASKING: u64 = 1 << 24;
}

/// Intercept bits of `INTERCEPT_MISC1` (vector 3) and `INTERCEPT_MISC2`
/// (vector 4).
mod intercept {
    pub const INTR: u32 = 1 << 0;
    pub const NMI: u32 = 1 << 1;
    pub const SMI: u32 = 1 << 2;
    pub const INIT: u32 = 1 << 3;
    pub const VINTR: u32 = 1 << 4;
    pub const RDPMC: u32 = 1 << 15;
    pub const CPUID: u32 = 1 << 18;
    pub const RSM: u32 = 1 << 19;
    pub const INVD: u32 = 1 << 22;
    pub const HLT: u32 = 1 << 24;
    pub const INVLPGA: u32 = 1 << 26;
    pub const IOIO: u32 = 1 << 27;
    pub const MSR: u32 = 1 << 28;
    pub const TASK_SWITCH: u32 = 1 << 29;
    pub const FERR_FREEZE: u32 = 1 << 30;
    pub const SHUTDOWN: u32 = 1 << 31;
    pub const MISC1: u32 = INTR
        | NMI
        | SMI
        | INIT
        | RDPMC
        | CPUID
        | RSM
        | INVD
        | HLT
        | INVLPGA
        | IOIO
        | MSR
        | TASK_SWITCH
        | FERR_FREEZE
        | SHUTDOWN;
    /// VMRUN, VMMCALL, VMLOAD, VMSAVE, STGI, CLGI, SKINIT (bits 0..7),
    /// ICEBP 8, WBINVD 9, MONITOR 10, MWAIT 11, MWAIT armed 12, XSETBV 13.
    /// (RDTSCP, bit 7, is left to the guest.)
    pub const MISC2: u32 = 0x7f | 0x3f00;
    /// Vector 5: INVLPGB (bit 0) and TLBSYNC (bit 4), the broadcast TLB
    /// invalidation of newer CPUs (harmless to ask for on CPUs without).
    pub const MISC3: u32 = 1 << 0 | 1 << 4;
    /// Machine checks (#MC, vector 18) belong to the host.
    pub const EXCEPTIONS: u32 = 1 << 18;
}

/// Control-register intercepts (reads in bits 0..16, writes in 16..32):
/// writes of CR4, so that a guest cannot set CR4.PKE (or CET, PKS) by
/// itself — their state (PKRU, ...) is outside the kernel's XCR0 and
/// would stay in the CPU for the next guest. The VMM emulates the write
/// and loads CR4 (`abi::vcpu::load::CONTROL`), where the kernel clears
/// those bits.
const INTERCEPT_CR: u32 = 1 << (16 + 4);

/// The guest PAT at reset (WB, WT, UC-, UC, repeated).
const DEFAULT_PAT: u64 = 0x0007_0406_0007_0406;

/// A VMCB in the direct map (the first page of a VCPU object).
pub struct Vmcb(*mut u8);

impl Vmcb {
    /// # Safety
    /// `virt` is the kernel address of a VMCB page the caller may change
    /// (a VCPU object's first page, with the kernel token held).
    pub unsafe fn at(virt: u64) -> Vmcb {
        Vmcb(virt as *mut u8)
    }

    pub fn read64(&self, offset: usize) -> u64 {
        debug_assert!(offset <= 4096 - 8);
        // SAFETY: inside the VMCB page (offsets are this module's
        // constants); the page is the caller's for the Vmcb's life.
        unsafe { (self.0.add(offset) as *const u64).read_unaligned() }
    }

    pub fn write64(&mut self, offset: usize, value: u64) {
        debug_assert!(offset <= 4096 - 8);
        // SAFETY: as in `read64`.
        unsafe { (self.0.add(offset) as *mut u64).write_unaligned(value) }
    }

    pub fn write32(&mut self, offset: usize, value: u32) {
        // SAFETY: as in `read64`.
        unsafe { (self.0.add(offset) as *mut u32).write_unaligned(value) }
    }

    pub fn write8(&mut self, offset: usize, value: u8) {
        // SAFETY: as in `read64`.
        unsafe { self.0.add(offset).write(value) }
    }

    /// Segment `i` (`abi::vcpu::segment`) as (packed word, base).
    pub fn segment(&self, i: usize) -> (u64, u64) {
        let at = vmcb::SEGMENTS + 16 * i;
        let first = self.read64(at);
        // Hardware layout: selector 0..16, attributes 16..32, limit 32..64
        // — the block's packing, with the attributes' top nibble unused.
        (first & !0xf000_0000, self.read64(at + 8))
    }

    pub fn set_segment(&mut self, i: usize, word: u64, base: u64) {
        let at = vmcb::SEGMENTS + 16 * i;
        self.write64(at, word & !0xf000_0000);
        self.write64(at + 8, base);
    }
}

/// Fills a fresh (zeroed) VMCB: the intercepts, the permission maps,
/// nested paging and a guest in real mode at address 0 (the VMM sets the
/// state it wants before the first run).
pub fn setup_vmcb(v: &mut Vmcb) {
    use abi::vcpu::segment as seg;
    v.write32(vmcb::INTERCEPT_CR, INTERCEPT_CR);
    // Every debug-register read and write: the host's breakpoints are the
    // host's, and DR0..3 are not switched by VMRUN.
    v.write32(vmcb::INTERCEPT_DR, u32::MAX);
    v.write32(vmcb::INTERCEPT_EXCEPTIONS, intercept::EXCEPTIONS);
    v.write32(vmcb::INTERCEPT_MISC1, intercept::MISC1);
    v.write32(vmcb::INTERCEPT_MISC2, intercept::MISC2);
    v.write32(vmcb::INTERCEPT_MISC3, intercept::MISC3);
    v.write64(vmcb::IOPM_BASE, IOPM.load(Ordering::Relaxed));
    v.write64(vmcb::MSRPM_BASE, MSRPM.load(Ordering::Relaxed));
    v.write32(vmcb::GUEST_ASID, 1);
    v.write64(vmcb::INT_CTL, vmcb::V_INTR_MASKING);
    v.write64(vmcb::NP_ENABLE, 1);
    for i in [seg::ES, seg::SS, seg::DS, seg::FS, seg::GS] {
        v.set_segment(i, seg::pack(0, seg::REAL_DATA, 0xffff), 0);
    }
    v.set_segment(seg::CS, seg::pack(0, seg::REAL_CODE, 0xffff), 0);
    v.set_segment(seg::GDTR, seg::pack(0, 0, 0xffff), 0);
    v.set_segment(seg::IDTR, seg::pack(0, 0, 0xffff), 0);
    v.set_segment(seg::LDTR, seg::pack(0, seg::LDT, 0xffff), 0);
    v.set_segment(seg::TR, seg::pack(0, seg::TSS_BUSY, 0xffff), 0);
    v.write64(vmcb::EFER, EFER_SVME);
    v.write64(vmcb::CR0, 0x10); // ET
    v.write64(vmcb::DR6, 0xffff_0ff0);
    v.write64(vmcb::DR7, 0x400);
    v.write64(vmcb::RFLAGS, 2);
    v.write64(vmcb::G_PAT, DEFAULT_PAT);
}

/// What every run sets, whatever the VMM loaded: EFER.SVME (VMRUN refuses
/// a guest without it), a full flush of the guest's TLB, nothing cached
/// (no clean bits), the guest space's nested page tables, and the
/// permission maps and intercepts again (they are the kernel's).
pub fn before_run(v: &mut Vmcb, nested_cr3: u64) {
    let efer = v.read64(vmcb::EFER);
    v.write64(vmcb::EFER, efer | EFER_SVME);
    v.write8(vmcb::TLB_CONTROL, 1);
    v.write32(vmcb::CLEAN_BITS, 0);
    v.write64(vmcb::N_CR3, nested_cr3);
    v.write64(vmcb::NP_ENABLE, 1);
    v.write32(vmcb::GUEST_ASID, 1);
    v.write64(vmcb::IOPM_BASE, IOPM.load(Ordering::Relaxed));
    v.write64(vmcb::MSRPM_BASE, MSRPM.load(Ordering::Relaxed));
    v.write32(vmcb::INTERCEPT_CR, INTERCEPT_CR);
    v.write32(vmcb::INTERCEPT_DR, u32::MAX);
    v.write32(vmcb::INTERCEPT_EXCEPTIONS, intercept::EXCEPTIONS);
    // The kernel's intercepts, plus the interrupt-window exit if the VMM
    // asked for one (`set_window_exit`).
    let window = v.read64(vmcb::INTERCEPT_MISC1) as u32 & intercept::VINTR;
    v.write32(vmcb::INTERCEPT_MISC1, intercept::MISC1 | window);
    v.write32(vmcb::INTERCEPT_MISC2, intercept::MISC2);
    v.write32(vmcb::INTERCEPT_MISC3, intercept::MISC3);
    let int_ctl = v.read64(vmcb::INT_CTL);
    v.write64(vmcb::INT_CTL, int_ctl | vmcb::V_INTR_MASKING);
}

/// Asks for (or stops asking for) an exit when the guest's interrupt
/// window opens.
pub fn set_window_exit(v: &mut Vmcb, on: bool) {
    let misc1 = v.read64(vmcb::INTERCEPT_MISC1) as u32;
    let misc1 = if on {
        misc1 | intercept::VINTR
    } else {
        misc1 & !intercept::VINTR
    };
    v.write32(vmcb::INTERCEPT_MISC1, misc1);
}

/// The guest's general registers that the VMCB does not hold, by their
/// hardware number (0 rax and 4 rsp are in the VMCB; unused here).
pub type Gprs = [u64; 16];

core::arch::global_asm!(
    ".globl svm_vmrun",
    "svm_vmrun:",
    // rdi = VMCB (physical), rsi = &Gprs, rdx = host VMSAVE page (physical)
    "push rbp",
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "push rsi",
    "push rdi",
    "push rdx",
    "clgi",
    "sti",
    "mov rax, rdx",
    "vmsave rax",
    "mov rax, rdi",
    "vmload rax",
    "mov rcx, [rsi + 8]",
    "mov rdx, [rsi + 16]",
    "mov rbx, [rsi + 24]",
    "mov rbp, [rsi + 40]",
    "mov rdi, [rsi + 56]",
    "mov r8, [rsi + 64]",
    "mov r9, [rsi + 72]",
    "mov r10, [rsi + 80]",
    "mov r11, [rsi + 88]",
    "mov r12, [rsi + 96]",
    "mov r13, [rsi + 104]",
    "mov r14, [rsi + 112]",
    "mov r15, [rsi + 120]",
    "mov rsi, [rsi + 48]",
    "mov rax, [rsp + 8]",
    "vmrun rax",
    // #VMEXIT: rax and rsp are the host's again (from the save area).
    "push rsi",
    "mov rsi, [rsp + 24]",
    "mov [rsi + 8], rcx",
    "mov [rsi + 16], rdx",
    "mov [rsi + 24], rbx",
    "mov [rsi + 40], rbp",
    "mov [rsi + 56], rdi",
    "mov [rsi + 64], r8",
    "mov [rsi + 72], r9",
    "mov [rsi + 80], r10",
    "mov [rsi + 88], r11",
    "mov [rsi + 96], r12",
    "mov [rsi + 104], r13",
    "mov [rsi + 112], r14",
    "mov [rsi + 120], r15",
    "pop rax",
    "mov [rsi + 48], rax",
    "mov rax, [rsp + 8]",
    "vmsave rax",
    "mov rax, [rsp]",
    "vmload rax",
    "cli",
    "stgi",
    "add rsp, 24",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    "ret",
);

unsafe extern "C" {
    fn svm_vmrun(vmcb_phys: u64, gprs: *mut Gprs, host_area_phys: u64);
}

/// Runs the guest of the VMCB at `vmcb_phys` with the general registers
/// `gprs` until its next exit, on this CPU. Interrupts stay masked in the
/// kernel (an interrupt during the run ends it and waits, pending).
///
/// # Safety
/// `vmcb_phys` is a VMCB filled by [`setup_vmcb`] and [`before_run`] whose
/// nested page tables map only memory the guest may have; interrupts are
/// masked, the kernel token held; the guest's x87/SSE/AVX state is loaded
/// (`fpu::enter_guest`).
pub unsafe fn run(vmcb_phys: u64, gprs: &mut Gprs) -> bool {
    let host =
        HOST_AREA[percpu::this_cpu_index() as usize % percpu::MAX_CPUS].load(Ordering::Relaxed);
    if host == 0 {
        return false;
    }
    // SAFETY: SVM is enabled on this CPU (its host area exists); the VMCB
    // is valid (the caller's promise) and VMRUN checks the guest state
    // itself (a bad one is an INVALID exit, not a fault); the stub saves
    // and restores every host register the ABI and the kernel need (the
    // callee-saved ones, the VMSAVE state; VMRUN itself the rest).
    unsafe { svm_vmrun(vmcb_phys, gprs, host) };
    true
}
