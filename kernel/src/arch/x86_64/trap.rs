//! Trap dispatch: exceptions, interrupts (and later, user faults).
//!
//! `trap.s` saves the interrupted context as a [`TrapFrame`] on the kernel
//! stack and calls [`trap_dispatch`]. A CPU exception taken in kernel mode is
//! always a kernel bug: it is reported with the full register state and the
//! machine is stopped with a failure code, so a crash never becomes a hang.

use core::fmt;

use super::{cpu, ioapic, lapic};
use crate::kprintln;
use crate::thread::ThreadRef;
use crate::token::Kernel;

/// The saved context of an interrupted thread, in the order `trap.s` pushes.
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct TrapFrame {
    pub rax: u64,
    pub rbx: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rbp: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
    pub vector: u64,
    pub error_code: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

/// The `vector` of a frame completed by the system-call path: such a frame
/// is resumed with `sysretq` (see `syscall_entry.rs`); every other one with
/// `iretq`.
pub const VECTOR_SYSCALL: u64 = 0x100;
/// #UD; also what a `syscall` in compatibility mode becomes (`trap.s`).
pub const VECTOR_INVALID_OPCODE: u64 = 6;
pub const VECTOR_DEVICE_NOT_AVAILABLE: u64 = 7;
pub const VECTOR_PAGE_FAULT: u64 = 14;
pub const VECTOR_TIMER: u64 = 32;
/// Where the (masked) legacy PIC is remapped so its spurious interrupts do
/// not alias CPU exceptions.
pub const VECTOR_PIC_BASE: u64 = 0xe0;
pub const VECTOR_SPURIOUS: u64 = 0xff;

const EXCEPTION_NAMES: [&str; 32] = [
    "divide error (#DE)",
    "debug (#DB)",
    "non-maskable interrupt (NMI)",
    "breakpoint (#BP)",
    "overflow (#OF)",
    "bound range exceeded (#BR)",
    "invalid opcode (#UD)",
    "device not available (#NM)",
    "double fault (#DF)",
    "coprocessor segment overrun",
    "invalid TSS (#TS)",
    "segment not present (#NP)",
    "stack-segment fault (#SS)",
    "general protection fault (#GP)",
    "page fault (#PF)",
    "reserved (15)",
    "x87 floating-point error (#MF)",
    "alignment check (#AC)",
    "machine check (#MC)",
    "SIMD floating-point error (#XM)",
    "virtualization exception (#VE)",
    "control protection (#CP)",
    "reserved (22)",
    "reserved (23)",
    "reserved (24)",
    "reserved (25)",
    "reserved (26)",
    "reserved (27)",
    "hypervisor injection (#HV)",
    "VMM communication (#VC)",
    "security exception (#SX)",
    "reserved (31)",
];

#[unsafe(no_mangle)]
extern "C" fn trap_dispatch(frame: &mut TrapFrame) {
    if frame.vector < 32 {
        exception(frame);
    }
    // Interrupts reach the kernel only in the idle loop, which does not
    // hold the big kernel lock (or during boot, before it exists). Only a
    // device interrupt touches kernel objects (a notification) and takes
    // it; the rest is this CPU's business.
    crate::smp::serve_requests();
    match frame.vector {
        VECTOR_TIMER => {
            crate::time::on_timer_tick();
            lapic::end_of_interrupt();
        }
        VECTOR_SPURIOUS => {} // no EOI for spurious interrupts
        // The idle loop looks at its run queue when the handler returns.
        v if v == u64::from(crate::smp::VECTOR_RESCHEDULE)
            || v == u64::from(crate::smp::VECTOR_REQUEST) =>
        {
            lapic::end_of_interrupt()
        }
        v if ioapic::is_line_vector(v) || crate::irq::is_msi_vector(v) => {
            crate::smp::lock();
            // SAFETY: the lock is taken, interrupts are masked (an
            // interrupt gate), and the idle loop this interrupted gave its
            // token up (boot makes none while interrupts are enabled).
            let mut k = unsafe { Kernel::enter() };
            crate::irq::on_interrupt(&mut k, v);
            crate::smp::unlock(k);
        }
        v if (VECTOR_PIC_BASE..VECTOR_PIC_BASE + 16).contains(&v) => {} // masked PIC noise
        v => {
            kprintln!("warning: unexpected interrupt vector {v}");
            lapic::end_of_interrupt();
        }
    }
}

/// An interrupt or exception from user mode; the thread's frame is
/// complete. With several CPUs the big kernel lock is taken first (after
/// serving a request of its holder: see `smp.rs`); while this CPU waited
/// for it, another one may have destroyed or stopped the thread.
#[unsafe(no_mangle)]
extern "C" fn trap_from_user(frame: *mut TrapFrame) -> ! {
    // Read now: once this CPU served a request, the thread may be gone.
    // SAFETY: the entry just pushed this frame into the current thread.
    let entry_vector = unsafe { (*frame).vector };
    crate::smp::serve_requests();
    crate::smp::lock();
    // SAFETY: the lock is taken, interrupts are masked (interrupt gate),
    // and this CPU came from user mode, where it holds no token.
    let mut k = unsafe { Kernel::enter() };
    let Some(current) = crate::thread::current() else {
        // Destroyed by another CPU while this one entered the kernel.
        acknowledge_interrupt_only(&mut k, entry_vector);
        crate::thread::schedule(k)
    };
    let thread = k.threads.get(current);
    let (vector, state, cpu, priority) = (
        thread.context.0.vector,
        thread.state,
        thread.cpu,
        thread.priority,
    );
    if state != crate::thread::State::Running && vector >= 32 {
        // Stopped by another CPU meanwhile: the interrupt is handled, the
        // thread not resumed (the frame is complete).
        acknowledge_interrupt_only(&mut k, vector);
        crate::thread::schedule(k)
    }
    match vector {
        VECTOR_DEVICE_NOT_AVAILABLE
            if super::fpu::device_not_available(&mut k.threads, current) =>
        {
            crate::thread::resume(k, current)
        }
        0..=31 if state != crate::thread::State::Running => crate::thread::schedule(k),
        0..=31 => {
            user_fault(&mut k, current);
            crate::thread::schedule(k)
        }
        VECTOR_TIMER => {
            crate::time::on_timer_tick();
            lapic::end_of_interrupt();
            // The tick found `current` running in user mode: its sampled
            // CPU time (`ThreadCpuTime`).
            let t = k.threads.get_mut(current);
            t.cpu_ticks = t.cpu_ticks.wrapping_add(1);
            crate::thread::preempt(k, current)
        }
        VECTOR_SPURIOUS => crate::thread::resume(k, current),
        v if ioapic::is_line_vector(v) || crate::irq::is_msi_vector(v) => {
            crate::irq::on_interrupt(&mut k, v);
            let priority = k.threads.get(current).priority;
            if crate::thread::higher_priority_waiting(priority) {
                crate::thread::preempt(k, current)
            }
            crate::thread::resume(k, current)
        }
        v if v == u64::from(crate::smp::VECTOR_RESCHEDULE)
            || v == u64::from(crate::smp::VECTOR_REQUEST) =>
        {
            lapic::end_of_interrupt();
            // A thread moved to another CPU leaves this one at once.
            if cpu != super::percpu::this_cpu_index()
                || crate::thread::higher_priority_waiting(priority)
            {
                crate::thread::preempt(k, current)
            }
            crate::thread::resume(k, current)
        }
        v => {
            if !(VECTOR_PIC_BASE..VECTOR_PIC_BASE + 16).contains(&v) {
                kprintln!("warning: unexpected interrupt vector {v}");
                lapic::end_of_interrupt();
            }
            crate::thread::resume(k, current)
        }
    }
}

/// The hardware side of an interrupt whose thread will not be resumed.
fn acknowledge_interrupt_only(k: &mut Kernel, vector: u64) {
    match vector {
        0..=31 | VECTOR_SPURIOUS => {}
        VECTOR_TIMER => {
            crate::time::on_timer_tick();
            lapic::end_of_interrupt();
        }
        v if ioapic::is_line_vector(v) || crate::irq::is_msi_vector(v) => {
            crate::irq::on_interrupt(k, v)
        }
        v if (VECTOR_PIC_BASE..VECTOR_PIC_BASE + 16).contains(&v) => {}
        _ => lapic::end_of_interrupt(),
    }
}

/// A user thread's exception: a fault message to its fault endpoint, which
/// the handler answers to resume the thread; without a handler the thread
/// is stopped and reported, and the rest of the system keeps running.
fn user_fault(k: &mut Kernel, current: ThreadRef) {
    let frame = k.threads.get(current).context.0;
    let msg = if frame.vector == VECTOR_PAGE_FAULT {
        [
            abi::fault::LABEL_PAGE_FAULT,
            cpu::read_cr2(),
            frame.rip,
            frame.error_code,
            0,
        ]
    } else {
        [
            abi::fault::LABEL_EXCEPTION,
            0,
            frame.rip,
            frame.vector,
            frame.error_code,
        ]
    };
    // Label, address (page fault) or vector, rip.
    trace!(event(
        &k.threads,
        current,
        formats::trace::Kind::Fault,
        [
            msg[0],
            if frame.vector == VECTOR_PAGE_FAULT {
                msg[1]
            } else {
                frame.vector
            },
            frame.rip,
            0
        ]
    ));
    let thread = k.threads.get_mut(current);
    if let Some(handler) = thread.fault_endpoint.cap {
        thread.kernel_msg = msg;
        // SAFETY: the object of the thread's fault-endpoint capability (an
        // endpoint: `ThreadConfigure` checked the kind) is a live endpoint.
        let sent = unsafe {
            crate::ipc::send(
                k,
                current,
                handler.object,
                handler.badge,
                false,
                crate::thread::SendKind::Fault,
                true,
            )
        };
        if sent.is_ok() {
            return;
        }
    }
    let thread = k.threads.get(current);
    if frame.vector == VECTOR_PAGE_FAULT {
        kprintln!(
            "kernel: thread '{}' (id {}) faulted: page fault at {:#x} ({}), rip {:#x}; no fault handler: thread stopped",
            thread.name(),
            thread.id,
            msg[1],
            PageFaultCause(frame.error_code),
            frame.rip
        );
    } else {
        kprintln!(
            "kernel: thread '{}' (id {}) faulted: {}, error code {:#x}, rip {:#x}; no fault handler: thread stopped",
            thread.name(),
            thread.id,
            ExceptionName(frame.vector),
            frame.error_code,
            frame.rip
        );
    }
    crate::exit::note_end(thread.id, None);
    crate::thread::set_state(&mut k.threads, current, crate::thread::State::Inactive);
}

fn exception(frame: &mut TrapFrame) {
    // Only kernel-mode exceptions come here (user ones go to
    // trap_from_user): each is a kernel bug.
    crate::console::force_unlock();
    kprintln!();
    kprintln!(
        "==== KERNEL EXCEPTION: {} ====",
        ExceptionName(frame.vector)
    );
    if frame.vector == VECTOR_PAGE_FAULT {
        let cr2 = cpu::read_cr2();
        kprintln!(
            "faulting address (CR2) = {cr2:#018x}: {}",
            PageFaultCause(frame.error_code)
        );
    }
    kprintln!("{frame:?}");
    kprintln!(
        "to see the faulting line: addr2line -e {KERNEL_ELF} {:#x}",
        frame.rip
    );
    crate::exit::exit(crate::exit::ExitCode::Failure);
}

/// This kernel's ELF file, for the `addr2line` hint: the scenario tests
/// boot one built with debug assertions (`xtask/src/system.rs`).
const KERNEL_ELF: &str = if cfg!(debug_assertions) {
    "target/checked/x86_64-unknown-none/release/pecan-kernel"
} else {
    "target/x86_64-unknown-none/release/pecan-kernel"
};

struct ExceptionName(u64);

impl fmt::Display for ExceptionName {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match EXCEPTION_NAMES.get(self.0 as usize) {
            Some(name) => write!(f, "{name}, vector {}", self.0),
            None => write!(f, "vector {}", self.0),
        }
    }
}

struct PageFaultCause(u64);

impl fmt::Display for PageFaultCause {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let e = self.0;
        let access = if e & (1 << 4) != 0 {
            "instruction fetch"
        } else if e & (1 << 1) != 0 {
            "write"
        } else {
            "read"
        };
        let what = if e & 1 != 0 {
            "protection violation"
        } else {
            "page not present"
        };
        let mode = if e & (1 << 2) != 0 { "user" } else { "kernel" };
        write!(f, "{mode} {access}, {what}")?;
        if e & (1 << 3) != 0 {
            write!(f, ", reserved bit set in a page-table entry")?;
        }
        Ok(())
    }
}

impl fmt::Debug for TrapFrame {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "error code = {:#x}", self.error_code)?;
        writeln!(
            f,
            "RIP = {:#018x}  CS = {:#06x}  RFLAGS = {:#010x}",
            self.rip, self.cs, self.rflags
        )?;
        writeln!(f, "RSP = {:#018x}  SS = {:#06x}", self.rsp, self.ss)?;
        writeln!(
            f,
            "RAX = {:#018x}  RBX = {:#018x}  RCX = {:#018x}",
            self.rax, self.rbx, self.rcx
        )?;
        writeln!(
            f,
            "RDX = {:#018x}  RSI = {:#018x}  RDI = {:#018x}",
            self.rdx, self.rsi, self.rdi
        )?;
        writeln!(
            f,
            "RBP = {:#018x}  R8  = {:#018x}  R9  = {:#018x}",
            self.rbp, self.r8, self.r9
        )?;
        writeln!(
            f,
            "R10 = {:#018x}  R11 = {:#018x}  R12 = {:#018x}",
            self.r10, self.r11, self.r12
        )?;
        writeln!(
            f,
            "R13 = {:#018x}  R14 = {:#018x}  R15 = {:#018x}",
            self.r13, self.r14, self.r15
        )?;
        write!(
            f,
            "CR0 = {:#018x}  CR3 = {:#018x}  CR4 = {:#018x}",
            cpu::read_cr0(),
            cpu::read_cr3(),
            cpu::read_cr4()
        )
    }
}
