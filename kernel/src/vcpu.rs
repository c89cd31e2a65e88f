//! Virtual CPUs: the `Vcpu` object and `VcpuRun` (docs/virtualization.md).
//!
//! A virtual CPU made by `Retype` is an object of 8 KiB
//! (`abi::object::VCPU_BITS`), paid for by its maker like any other:
//!
//! | page | contents |
//! |------|----------|
//! | 0 | the VMCB (`arch::svm`): intercepts, the guest's control and segment registers, RIP, RSP, RFLAGS, RAX |
//! | 1 | [`GuestState`]: the other general registers, the guest's x87/SSE/AVX state, an event to inject again |
//!
//! It holds no capability and no link to another object: the guest space
//! is named at every run, so nothing needs a reference count, and deleting
//! the VCPU needs nothing but the memory back. The kernel holds the big
//! kernel lock while a guest runs (a guest runs at most until the next
//! interrupt — the CPU's timer tick at the latest), so no other CPU can
//! delete the VCPU or unmap guest memory meanwhile.
//!
//! `VcpuRun` is one run: load the parts of the state block the flags name
//! from the caller's IPC buffer, `VMRUN`, write the block back, return
//! the exit. A host interrupt ends the run with `abi::vcpu::exit::INTR`;
//! the interrupt is taken as the caller returns to user mode, which may
//! switch to another thread — the timer and the scheduler see the VMM
//! thread as a user thread that ran, and the guest goes on when the VMM
//! calls again (`rt::vcpu::run` does so by itself).

use abi::args::{self, Args};
use abi::vcpu::{load, word};
use abi::{Error, ObjectType, Rights, Sys};

use crate::arch::fpu::{self, FpuState};
use crate::arch::svm::{self, vmcb, Gprs, Vmcb};
use crate::ipc;
use crate::mm::phys_to_virt;
use crate::syscall::{lookup, Outcome};
use crate::thread::{Thread, ThreadRef};
use crate::token::Kernel;

/// Page 1 of a VCPU object.
#[repr(C)]
pub struct GuestState {
    /// The guest's general registers by hardware number (rax and rsp live
    /// in the VMCB).
    pub gprs: Gprs,
    /// An event whose delivery the last exit interrupted: injected again
    /// at the next run unless the VMM injects another (0: none).
    pub reinject: u64,
    pub fpu: FpuState,
}

const _: () = assert!(core::mem::size_of::<GuestState>() <= 4096);
const _: () = assert!(abi::object::VCPU_BITS == 13);

/// CR4 bits a guest may not set: protection keys (PKE, PKS) and control-
/// flow enforcement (CET) would let the guest load PKRU and the CET
/// state, which the kernel's XCR0 does not cover — so they would stay in
/// the CPU after the exit, for the host and the next guest to find.
/// Cleared whatever the VMM loads.
const CR4_NOT_FOR_GUESTS: u64 = 1 << 22 | 1 << 23 | 1 << 24;

/// Sets up a freshly retyped (zeroed) VCPU at `phys`.
///
/// # Safety
/// `phys` is fresh memory of 8 KiB, aligned to it, that nothing else uses.
pub unsafe fn init(phys: u64) {
    // SAFETY: the caller's promise: page 0 is the VMCB.
    let mut v = unsafe { Vmcb::at(phys_to_virt(phys)) };
    svm::setup_vmcb(&mut v);
    // SAFETY: page 1, fresh.
    let state = unsafe { &mut *(phys_to_virt(phys + 4096) as *mut GuestState) };
    state.fpu = FpuState::CLEAN;
}

/// A checked `VcpuRun`.
#[derive(Debug)]
pub enum Call {
    Run {
        /// The VCPU object (physical).
        vcpu: u64,
        /// The guest space's top-level table (physical).
        space: u64,
        flags: u64,
        /// The caller's IPC buffer, writable (kernel address).
        buffer: *mut u64,
        /// The caller's bound notification has bits: answer
        /// `exit::NOTIFICATION` instead of running ([`kicked`]).
        kick: bool,
    },
}

/// Decodes `VcpuRun` of the caller `c`: checks everything, changes
/// nothing.
#[inline(always)]
pub fn decode(k: &Kernel, c: &Thread, sys: Sys, regs: [u64; 6]) -> Result<Call, Error> {
    if sys != Sys::VcpuRun {
        return Err(Error::UnknownSyscall);
    }
    decode_run(k, c, args::VcpuRun::from_regs(regs))
}

#[inline(never)]
fn decode_run(k: &Kernel, c: &Thread, a: args::VcpuRun) -> Result<Call, Error> {
    if !svm::available() {
        return Err(Error::Unsupported);
    }
    let (_, vcpu) = lookup(k, c, a.vcpu, ObjectType::Vcpu, Rights::WRITE)?;
    let (_, space) = lookup(k, c, a.space, ObjectType::GuestSpace, Rights::WRITE)?;
    if a.flags & !load::ALL != 0 {
        return Err(Error::InvalidArgument);
    }
    let buffer = ipc::ipc_buffer_ptr(&k.objects, c, true).ok_or(Error::BadAddress)?;
    let read = |i: usize| {
        // SAFETY: the buffer is a writable user page of at least
        // IPC_BUFFER_ALIGN bytes from `buffer` (ipc_buffer_ptr), and
        // word::COUNT words fit (abi::vcpu's test).
        unsafe { buffer.add(i).read() }
    };
    if a.flags & load::EVENT != 0 && !abi::vcpu::event::acceptable(read(word::EVENT)) {
        return Err(Error::InvalidArgument);
    }
    if a.flags & load::VIRQ != 0 && read(word::VIRQ) & !abi::vcpu::virq::MASK != 0 {
        return Err(Error::InvalidArgument);
    }
    let bound = c.bound_notification;
    // SAFETY: a thread's bound notification is live (destroying the
    // notification unbinds it).
    let kick = bound != 0 && unsafe { k.objects.notification(bound) }.word != 0;
    Ok(Call::Run {
        vcpu: vcpu.object,
        space: space.object,
        flags: a.flags,
        buffer,
        kick,
    })
}

/// Performs a checked `VcpuRun`: one run of the guest.
///
/// Its shape matters to the IPC paths: `syscall::general_path` inlines
/// the dispatcher with this, and its register allocation moved the
/// `notification` and `ring-2` budgets by 2 to 3 ticks (either way) with
/// the kick check written here, with this out of line, or cold. With the
/// check decided in decode and [`prepare`] out of line they are exactly
/// what they were without virtual CPUs (311 and 543). Measure the budgets
/// (`cargo xtask test bench-budgets`) after changing this.
pub fn perform(k: &mut Kernel, call: Call, caller: ThreadRef) -> Result<Outcome, Error> {
    let Call::Run {
        vcpu,
        space,
        flags,
        buffer,
        kick,
    } = call;
    // SAFETY: `vcpu` is a VCPU capability's object (decode, this kernel
    // entry): page 0 its VMCB, page 1 its GuestState; the token is held
    // mutably, so nothing else touches them.
    let (mut v, state) = unsafe {
        (
            Vmcb::at(phys_to_virt(vcpu)),
            &mut *(phys_to_virt(vcpu + 4096) as *mut GuestState),
        )
    };
    let block = |i: usize| {
        // SAFETY: as in decode: the caller's writable IPC buffer page.
        unsafe { buffer.add(i).read() }
    };
    load_state(&mut v, state, flags, block);
    if kick {
        return Ok(kicked(k, caller, &mut v, state, buffer));
    }
    prepare(k, &mut v, state, space);
    // SAFETY: the VMCB was set up at retype and by before_run (the nested
    // page tables are the guest space's, which maps only frames its
    // holder mapped); interrupts are masked (kernel), the token is held,
    // the guest's FPU state is loaded.
    let ran = unsafe { svm::run(vcpu, &mut state.gprs) };
    fpu::leave_guest(&mut state.fpu);
    if !ran {
        return Err(Error::Unsupported);
    }
    let int_info = v.read64(vmcb::EXIT_INT_INFO);
    state.reinject = if int_info & abi::vcpu::event::VALID != 0 {
        int_info
    } else {
        0
    };
    v.write64(vmcb::EVENT_INJ, 0);
    let out = store_state(&v, state);
    Ok(finish(k, caller, buffer, &out))
}

/// What every run sets (`svm::before_run`) and the guest's x87/SSE/AVX
/// state loaded. Out of line: see [`perform`].
#[inline(never)]
fn prepare(k: &mut Kernel, v: &mut Vmcb, state: &GuestState, space: u64) {
    svm::before_run(v, space);
    fpu::enter_guest(&mut k.threads, &state.fpu);
}

/// The caller's bound notification has bits (decode saw them): takes
/// them and answers the run with `exit::NOTIFICATION` without entering
/// the guest (an event the VMM just loaded waits for the next run).
#[cold]
#[inline(never)]
fn kicked(
    k: &mut Kernel,
    caller: ThreadRef,
    v: &mut Vmcb,
    state: &mut GuestState,
    buffer: *mut u64,
) -> Outcome {
    let bound = k.threads.get(caller).bound_notification;
    // SAFETY: a thread's bound notification is live (destroying the
    // notification unbinds it); decode found it bound.
    let bits = core::mem::take(&mut unsafe { k.objects.notification_mut(bound) }.word);
    state.reinject = v.read64(vmcb::EVENT_INJ);
    v.write64(vmcb::EVENT_INJ, 0);
    let mut out = store_state(v, state);
    out[word::EXIT_CODE] = abi::vcpu::exit::NOTIFICATION;
    out[word::EXIT_INFO1] = bits;
    out[word::EXIT_INFO2] = 0;
    finish(k, caller, buffer, &out)
}

/// Writes the state block `out` to the caller's IPC buffer (`buffer`, as
/// decode found it) and the exit into its result registers.
#[inline(always)]
fn finish(
    k: &mut Kernel,
    caller: ThreadRef,
    buffer: *mut u64,
    out: &[u64; word::COUNT],
) -> Outcome {
    for (i, w) in out.iter().enumerate() {
        // SAFETY: as in decode: the caller's writable IPC buffer page.
        unsafe { buffer.add(i).write(*w) };
    }
    let f = k.threads.get_mut(caller).frame();
    f.rdi = out[word::EXIT_CODE];
    f.rsi = out[word::EXIT_INFO1];
    f.rdx = out[word::EXIT_INFO2];
    Outcome::Resume
}

/// Loads what `flags` names from the state block (`block(i)` = word i)
/// into the VMCB and the guest state, and the event to inject.
fn load_state(v: &mut Vmcb, state: &mut GuestState, flags: u64, block: impl Fn(usize) -> u64) {
    if flags & load::REGISTERS != 0 {
        v.write64(vmcb::RAX, block(word::RAX));
        v.write64(vmcb::RSP, block(word::RSP));
        v.write64(vmcb::RIP, block(word::RIP));
        // Bit 1 is always set; the rest is the guest's business (VMRUN
        // refuses what is inconsistent).
        v.write64(vmcb::RFLAGS, block(word::RFLAGS) | 2);
        for (hw, w) in GPR_WORDS {
            state.gprs[hw] = block(w);
        }
    }
    if flags & load::CONTROL != 0 {
        v.write64(vmcb::CR0, block(word::CR0));
        v.write64(vmcb::CR2, block(word::CR2));
        v.write64(vmcb::CR3, block(word::CR3));
        v.write64(vmcb::CR4, block(word::CR4) & !CR4_NOT_FOR_GUESTS);
        v.write64(vmcb::EFER, block(word::EFER));
    }
    if flags & load::SEGMENTS != 0 {
        for i in 0..abi::vcpu::segment::COUNT {
            let at = word::SEGMENTS + 2 * i;
            v.set_segment(i, block(at), block(at + 1));
        }
        // The privilege level follows SS's DPL (APM: CPL = SS.DPL).
        let (_, ss_attr, _) =
            abi::vcpu::segment::unpack(block(word::SEGMENTS + 2 * abi::vcpu::segment::SS));
        v.write8(vmcb::CPL, ((ss_attr >> 5) & 3) as u8);
    }
    if flags & load::TSC_OFFSET != 0 {
        v.write64(vmcb::TSC_OFFSET, block(word::TSC_OFFSET));
    }
    if flags & load::VIRQ != 0 {
        let w = block(word::VIRQ);
        let mut int_ctl = v.read64(vmcb::INT_CTL)
            & !(vmcb::V_IRQ | 0xf << vmcb::V_INTR_PRIO_SHIFT | vmcb::V_IGN_TPR | 0xff << 32);
        if w & abi::vcpu::virq::PENDING != 0 {
            int_ctl |= vmcb::V_IRQ | vmcb::V_IGN_TPR;
        }
        int_ctl |= ((w >> abi::vcpu::virq::PRIORITY_SHIFT) & 0xf) << vmcb::V_INTR_PRIO_SHIFT;
        // INT_VECTOR is the byte at 0x64: bits 32..40 of the INT_CTL word.
        int_ctl |= (w & 0xff) << 32;
        v.write64(vmcb::INT_CTL, int_ctl);
        svm::set_window_exit(v, w & abi::vcpu::virq::WINDOW_EXIT != 0);
    }
    let event = if flags & load::EVENT != 0 {
        block(word::EVENT)
    } else {
        state.reinject
    };
    state.reinject = 0;
    v.write64(vmcb::EVENT_INJ, event);
}

/// The state block after an exit.
fn store_state(v: &Vmcb, state: &GuestState) -> [u64; word::COUNT] {
    let mut out = [0u64; word::COUNT];
    out[word::EXIT_CODE] = v.read64(vmcb::EXIT_CODE);
    out[word::EXIT_INFO1] = v.read64(vmcb::EXIT_INFO1);
    out[word::EXIT_INFO2] = v.read64(vmcb::EXIT_INFO2);
    out[word::EXIT_INT_INFO] = v.read64(vmcb::EXIT_INT_INFO);
    out[word::RAX] = v.read64(vmcb::RAX);
    out[word::RSP] = v.read64(vmcb::RSP);
    out[word::RIP] = v.read64(vmcb::RIP);
    out[word::RFLAGS] = v.read64(vmcb::RFLAGS);
    for (hw, w) in GPR_WORDS {
        out[w] = state.gprs[hw];
    }
    out[word::CR0] = v.read64(vmcb::CR0);
    out[word::CR2] = v.read64(vmcb::CR2);
    out[word::CR3] = v.read64(vmcb::CR3);
    out[word::CR4] = v.read64(vmcb::CR4);
    out[word::EFER] = v.read64(vmcb::EFER);
    out[word::EVENT] = state.reinject;
    let int_ctl = v.read64(vmcb::INT_CTL);
    out[word::VIRQ] = (int_ctl >> 32) & 0xff
        | if int_ctl & vmcb::V_IRQ != 0 {
            abi::vcpu::virq::PENDING
        } else {
            0
        };
    out[word::TSC_OFFSET] = v.read64(vmcb::TSC_OFFSET);
    out[word::INTERRUPT_STATE] =
        (v.read64(vmcb::INTERRUPT_SHADOW) & 1) | if int_ctl & vmcb::V_IRQ != 0 { 2 } else { 0 };
    for i in 0..abi::vcpu::segment::COUNT {
        let (w, base) = v.segment(i);
        out[word::SEGMENTS + 2 * i] = w;
        out[word::SEGMENTS + 2 * i + 1] = base;
    }
    out
}

/// (hardware register number, block word) of the registers in
/// [`GuestState::gprs`].
const GPR_WORDS: [(usize, usize); 14] = [
    (1, word::RCX),
    (2, word::RDX),
    (3, word::RBX),
    (5, word::RBP),
    (6, word::RSI),
    (7, word::RDI),
    (8, word::R8),
    (9, word::R9),
    (10, word::R10),
    (11, word::R11),
    (12, word::R12),
    (13, word::R13),
    (14, word::R14),
    (15, word::R15),
];
