//! System calls: decode, then perform — the dispatcher.
//!
//! Each object kind decodes and performs its own calls, next to the
//! object: `ipc` (message passing and notifications), `captable`
//! (`CapCopy`, `CapMint`, `CapDelete`, `CapRevoke`), `untyped` (`Retype`),
//! `vspace` (`Map`, `Unmap`), `thread` (`Thread*`, `CpuSet`,
//! `BindNotification`), `irq` (`IrqBind`, `IrqAck`, `IoPort`), `reply`
//! (`SaveReply`, `ReplyTo`) and `vcpu` (`VcpuRun`), each with a `Call` enum, `decode` and
//! `perform`; the calls on the caller itself (`Null`, `DebugWrite`,
//! `Yield`, `ThreadExit`) stay here. Arguments are read through the
//! call's `abi::args` struct.
//!
//! [`decode`] reads the caller's registers, resolves and checks every
//! capability and argument, and returns an [`Invocation`] or an error —
//! with no side effects, so a bad call changes nothing. [`perform`] then
//! acts; it fails only on conditions that depend on state it discovers
//! while acting (a mapping already present, a pool that is full), and then
//! too without having changed anything. (seL4's `decodeX`/`invokeX` split.)
//! Where perform does several things, it checks or reserves first:
//! `Retype`'s decode checks every insertion into the derivation tree
//! (`kcore::cap::check_insert_child`), so it cannot fail once perform has
//! made the first object; `ThreadConfigure` finishes the deletion of the
//! thread's old capabilities only after copying the new ones (a source may
//! lie in a table the deletion empties). The one exception left: corrupt
//! derivation links (`CapError::Corrupt`, which the kcore::cap invariants
//! rule out) found by a later `ThreadConfigure` copy leave the earlier
//! slots replaced.
//!
//! Each object's `decode` is `#[inline(always)]`: the dispatcher then
//! compiles much as one `decode` did, so the general path's length stays
//! where it was. That matters beyond the budgets: three icount scenarios
//! (`session-park-gone`, `session-park-full`, `init-restart-timer`) depend
//! on which of two equal-priority threads a timer tick finds running, and
//! a few instructions more on the general path reversed that order in
//! trials. Make those tests independent of path lengths before moving
//! this code much.
//!
//! Results go back in the caller's saved registers per the convention in
//! the `abi` crate; docs/abi.md lists every call and its errors.
//!
//! `Call` and `ReplyRecv` first try the IPC fast path, in assembly
//! (`arch::x86_64::syscall_entry`); what it does not take comes here.

use abi::args::{self, Args};
use abi::{Error, ObjectType, Rights, Sys};
use kcore::cap::{Capability, SlotId};

use crate::arch::syscall_entry::SWITCH;
use crate::ipc;
use crate::object::{self, Access};
use crate::thread::{self, SendKind, State, Thread, ThreadRef};
use crate::token::Kernel;
use crate::uaccess::{UserSlice, USER_END};
use crate::vspace;

/// Most bytes one `DebugWrite` may print.
pub const DEBUG_WRITE_MAX: u64 = 4096;

/// A checked system call, ready to perform: the calls of each object
/// kind are decoded and performed next to the object.
#[derive(Debug)]
pub enum Invocation {
    Null,
    DebugWrite(UserSlice),
    Yield,
    ThreadExit(u64),
    /// `TraceMark`, `TraceName` (decoded apart: [`decode_trace`]); only
    /// in a trace kernel, the others decode them to `Null`.
    #[cfg(feature = "trace")]
    Trace(TraceCall),
    /// Message passing and notifications (decoded apart: see
    /// [`ipc::IpcInvocation`]).
    Ipc(ipc::IpcInvocation),
    Cap(crate::captable::Call),
    Untyped(crate::untyped::Call),
    Vspace(vspace::Call),
    Thread(thread::Call),
    Irq(crate::irq::Call),
    Reply(crate::reply::Call),
    Vcpu(crate::vcpu::Call),
}

/// What happens to the calling thread after the call.
pub enum Outcome {
    /// Return to the caller with `rax` = 0 (and any results written).
    Resume,
    /// The caller gave up the CPU but stays runnable.
    Yield,
    /// The caller blocked or is gone; run someone else.
    Schedule,
}

pub fn lookup(
    k: &Kernel,
    c: &Thread,
    addr: u64,
    kind: ObjectType,
    rights: Rights,
) -> Result<(SlotId, Capability), Error> {
    object::lookup(k, c, addr, kind, rights)
}

pub fn full_slot(k: &Kernel, c: &Thread, addr: u64) -> Result<(SlotId, Capability), Error> {
    let id = object::resolve(k, c, addr, Access::Read)?;
    let cap = k.slot(id).cap.ok_or(Error::EmptySlot)?;
    Ok((id, cap))
}

pub fn empty_slot(k: &Kernel, c: &Thread, addr: u64) -> Result<SlotId, Error> {
    let id = object::resolve(k, c, addr, Access::Write)?;
    if k.slot(id).cap.is_some() {
        return Err(Error::SlotOccupied);
    }
    Ok(id)
}

pub fn thread_cap(k: &Kernel, c: &Thread, addr: u64, rights: Rights) -> Result<ThreadRef, Error> {
    let (_, cap) = lookup(k, c, addr, ObjectType::Thread, rights)?;
    // SAFETY: the object of a thread capability (in a slot) is a live
    // thread.
    Ok(unsafe { object::thread_at(cap.object) })
}

pub fn user_address(a: u64) -> Result<u64, Error> {
    if a >= USER_END {
        return Err(Error::InvalidArgument);
    }
    Ok(a)
}

/// The message-passing and notification calls, as a pattern: the calls
/// [`ipc::decode`] decodes. One list for [`is_ipc`] and for the arm of
/// [`decode`], whose match stays exhaustive (a new call cannot be
/// forgotten there).
macro_rules! ipc_calls {
    () => {
        Sys::Send
            | Sys::NbSend
            | Sys::Call
            | Sys::Recv
            | Sys::NbRecv
            | Sys::Reply
            | Sys::ReplyRecv
            | Sys::Signal
            | Sys::Wait
            | Sys::Poll
    };
}

/// Whether `sys` is decoded by [`ipc::decode`].
#[inline(always)]
fn is_ipc(sys: Sys) -> bool {
    matches!(sys, ipc_calls!())
}

/// Decodes any other call of the caller `c` (borrowed from `k`): checks
/// everything, changes nothing.
pub fn decode(k: &Kernel, c: &Thread) -> Result<Invocation, Error> {
    let f = &c.context.0;
    let sys = Sys::from_raw(f.rax).ok_or(Error::UnknownSyscall)?;
    let regs = [f.rdi, f.rsi, f.rdx, f.r10, f.r8, f.r9];
    Ok(match sys {
        Sys::Null => Invocation::Null,
        Sys::DebugWrite => {
            let a = args::DebugWrite::from_regs(regs);
            if a.len > DEBUG_WRITE_MAX {
                return Err(Error::InvalidArgument);
            }
            Invocation::DebugWrite(UserSlice::new(a.ptr, a.len)?)
        }
        Sys::Yield => Invocation::Yield,
        Sys::ThreadExit => Invocation::ThreadExit(args::ThreadExit::from_regs(regs).code),
        #[cfg(feature = "trace")]
        Sys::TraceMark | Sys::TraceName => Invocation::Trace(decode_trace(k, c, sys, regs)?),
        // Checked as in a trace kernel, then nothing to do: `Null`. (Not a
        // variant of its own: the dispatcher's code for every other call
        // then stays as it was, register for register.)
        #[cfg(not(feature = "trace"))]
        Sys::TraceMark | Sys::TraceName => {
            decode_trace(k, c, sys, regs)?;
            Invocation::Null
        }
        ipc_calls!() => Invocation::Ipc(ipc::decode(k, c, sys)?),
        Sys::CapCopy | Sys::CapMint | Sys::CapDelete | Sys::CapRevoke | Sys::Usage => {
            Invocation::Cap(crate::captable::decode(k, c, sys, regs)?)
        }
        Sys::Retype => Invocation::Untyped(crate::untyped::decode(k, c, sys, regs)?),
        Sys::Map | Sys::Unmap => Invocation::Vspace(vspace::decode(k, c, sys, regs)?),
        Sys::ThreadConfigure
        | Sys::ThreadSetSchedParams
        | Sys::CpuSet
        | Sys::ThreadStart
        | Sys::ThreadSuspend
        | Sys::ThreadResume
        | Sys::ThreadRegisters
        | Sys::ThreadCpuTime
        | Sys::BindNotification => Invocation::Thread(thread::decode(k, c, sys, regs)?),
        Sys::IrqBind | Sys::IrqAck | Sys::IoPort | Sys::MsiAlloc | Sys::PhysAddress => {
            Invocation::Irq(crate::irq::decode(k, c, sys, regs)?)
        }
        Sys::SaveReply | Sys::ReplyTo => Invocation::Reply(crate::reply::decode(k, c, sys, regs)?),
        Sys::VcpuRun => Invocation::Vcpu(crate::vcpu::decode(k, c, sys, regs)?),
    })
}

/// A checked `TraceMark` or `TraceName`.
#[derive(Debug)]
#[cfg_attr(not(feature = "trace"), allow(dead_code))]
pub enum TraceCall {
    /// A marker: the label's three words and the value.
    Mark([u64; 4]),
    /// A name for `thread`: four words of UTF-8, NUL-padded.
    Name { thread: ThreadRef, name: [u64; 4] },
}

/// Decodes `TraceMark` and `TraceName` (`sys`), out of line and cold: the
/// dispatcher's code for the other calls stays as it was (measured: with
/// these inline, or as a variant of [`Invocation`] in a kernel without the
/// feature, the general path of IPC calls lost or gained an instruction,
/// by register allocation).
#[cold]
#[inline(never)]
fn decode_trace(k: &Kernel, c: &Thread, sys: Sys, regs: [u64; 6]) -> Result<TraceCall, Error> {
    if sys == Sys::TraceMark {
        let a = args::TraceMark::from_regs(regs);
        return Ok(TraceCall::Mark([a.label0, a.label1, a.label2, a.value]));
    }
    let a = args::TraceName::from_regs(regs);
    let thread = thread_cap(k, c, a.thread, Rights::WRITE)?;
    let name = [a.name0, a.name1, a.name2, a.name3];
    let mut bytes = [0u8; 32];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(name) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    // Only NUL padding after the name, and the name is UTF-8.
    if bytes[len..].iter().any(|&b| b != 0) || core::str::from_utf8(&bytes[..len]).is_err() {
        return Err(Error::InvalidArgument);
    }
    Ok(TraceCall::Name { thread, name })
}

/// Performs a checked trace call (a trace kernel's; the others decode them
/// to `Null`, docs/abi.md).
#[cfg(feature = "trace")]
#[cold]
#[inline(never)]
fn perform_trace(k: &mut Kernel, call: TraceCall, caller: ThreadRef) {
    match call {
        TraceCall::Mark(words) => {
            crate::trace::event(&k.threads, caller, formats::trace::Kind::Mark, words)
        }
        TraceCall::Name { thread, name } => crate::trace::name_thread(&mut k.threads, thread, name),
    }
}

/// Performs a checked call: the object kinds' own `perform`.
fn perform(k: &mut Kernel, invocation: Invocation, caller: ThreadRef) -> Result<Outcome, Error> {
    match invocation {
        Invocation::Null => Ok(Outcome::Resume),
        Invocation::DebugWrite(slice) => {
            let mut buffer = [0u8; DEBUG_WRITE_MAX as usize];
            let bytes = &mut buffer[..slice.len() as usize];
            let root = k
                .threads
                .get(caller)
                .page_table_root()
                .ok_or(Error::BadAddress)?;
            slice.copy_in(root, bytes)?;
            crate::console::write_bytes(bytes);
            Ok(Outcome::Resume)
        }
        Invocation::Yield => Ok(Outcome::Yield),
        Invocation::ThreadExit(code) => {
            exit_thread(k, caller, code);
            Ok(Outcome::Schedule)
        }
        #[cfg(feature = "trace")]
        Invocation::Trace(call) => {
            perform_trace(k, call, caller);
            Ok(Outcome::Resume)
        }
        Invocation::Ipc(call) => ipc::perform(k, call, caller),
        Invocation::Cap(call) => crate::captable::perform(k, call, caller),
        Invocation::Untyped(call) => crate::untyped::perform(k, call, caller),
        Invocation::Vspace(call) => vspace::perform(k, call, caller),
        Invocation::Thread(call) => thread::perform(k, call, caller),
        Invocation::Irq(call) => crate::irq::perform(k, call, caller),
        Invocation::Reply(call) => crate::reply::perform(k, call, caller),
        Invocation::Vcpu(call) => crate::vcpu::perform(k, call, caller),
    }
}

/// After a call that may have woken or stopped threads: the caller goes on
/// if it can and nobody more important waits.
pub fn after_ipc(k: &Kernel, caller: ThreadRef) -> Outcome {
    let c = k.threads.get(caller);
    if c.state != State::Running {
        return Outcome::Schedule;
    }
    if thread::higher_priority_waiting(c.priority) {
        return Outcome::Yield;
    }
    Outcome::Resume
}

/// Ends a thread: reported to its fault endpoint if it has one, else
/// logged; either way it runs no more until started again.
fn exit_thread(k: &mut Kernel, t: ThreadRef, code: u64) {
    trace!(event(
        &k.threads,
        t,
        formats::trace::Kind::ThreadExit,
        [code, 0, 0, 0]
    ));
    object::abandon_caller(k, t);
    let thread = k.threads.get_mut(t);
    if let Some(fault) = thread.fault_endpoint.cap {
        thread.kernel_msg = [abi::fault::LABEL_EXIT, code, 0, 0, 0];
        // SAFETY: the object of the thread's fault-endpoint capability (an
        // endpoint: `ThreadConfigure` checked the kind) is a live endpoint.
        let sent =
            unsafe { ipc::send(k, t, fault.object, fault.badge, false, SendKind::Exit, true) };
        if sent.is_ok() {
            return;
        }
    }
    let thread = k.threads.get(t);
    crate::kprintln!(
        "kernel: thread '{}' (id {}) exited with code {}",
        thread.name(),
        thread.id,
        code as i64
    );
    crate::exit::note_end(thread.id, Some(code as i32 as i64));
    thread::set_state(&mut k.threads, t, State::Inactive);
}

/// Entry from `syscall_entry` (see `arch::x86_64::syscall_entry`) on this
/// CPU's kernel stack, with the calling thread (`PerCpu::current`). Its
/// argument registers are saved in its frame, its callee-saved registers
/// and `rsp` are not. Returns the caller's new `rax` (the entry reloads the
/// other result registers from the frame), or [`SWITCH`] when the caller
/// stops running: the entry then completes its frame and calls
/// [`syscall_continue`].
///
/// `Call` and `ReplyRecv` come here only when the assembly fast path did
/// not take them. The null call is answered at once: without a stack frame
/// (the general path is a tail call), it costs a handful of instructions.
#[unsafe(no_mangle)]
extern "C" fn syscall_from_user(caller: ThreadRef) -> u64 {
    // SAFETY: the assembly entry calls this with the big kernel lock held
    // (or one CPU online) and interrupts masked (SFMASK), from user mode,
    // where this CPU holds no token.
    let mut k = unsafe { Kernel::enter() };
    if k.threads.get(caller).context.0.rax == Sys::Null as u64 {
        return 0;
    }
    general_path(&mut k, caller)
}

#[inline(never)]
fn general_path(k: &mut Kernel, caller: ThreadRef) -> u64 {
    let result = match Sys::from_raw(k.threads.get(caller).context.0.rax) {
        Some(sys) if is_ipc(sys) => ipc::decode(k, k.threads.get(caller), sys)
            .and_then(|invocation| ipc::perform(k, invocation, caller)),
        _ => decode(k, k.threads.get(caller)).and_then(|invocation| perform(k, invocation, caller)),
    };
    let outcome = match result {
        Ok(outcome) => {
            if !matches!(outcome, Outcome::Schedule) {
                k.threads.get_mut(caller).frame().rax = 0;
            }
            outcome
        }
        Err(e) => {
            k.threads.get_mut(caller).frame().rax = e.raw();
            Outcome::Resume
        }
    };
    match outcome {
        Outcome::Resume if thread::can_return_directly(&k.threads, caller) => {
            k.threads.get(caller).context.0.rax
        }
        Outcome::Resume => {
            switch_later((k.threads.get(caller).state == State::Running).then_some(caller))
        }
        // The next thread is chosen here, as `thread::schedule` would (the
        // caller is queued or stopped): `syscall_continue` switches to it
        // straight away, or schedules (and idles) when there is none.
        Outcome::Yield => {
            if k.threads.get(caller).state == State::Running {
                thread::make_runnable(k, caller);
            }
            switch_later(thread::pop_highest_here(k))
        }
        Outcome::Schedule => switch_later(thread::pop_highest_here(k)),
    }
}

fn switch_later(next: Option<ThreadRef>) -> u64 {
    thread::set_next(next);
    SWITCH
}

/// Second half of a system call that ends in a switch; the caller's frame
/// is complete now.
#[unsafe(no_mangle)]
extern "C" fn syscall_continue() -> ! {
    // SAFETY: the assembly entry calls this after `syscall_from_user`
    // returned `SWITCH` (its token given up), with the lock still held and
    // interrupts masked.
    let k = unsafe { Kernel::enter() };
    match thread::take_next() {
        Some(next) => thread::switch_to(k, next),
        None => thread::schedule(k),
    }
}
