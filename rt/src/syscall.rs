//! System calls: the only place in user space that executes `syscall`.
//!
//! # Layers
//!
//! 1. Raw wrappers [`syscall0`] … [`syscall6`]: one `asm!` block each,
//!    following the register convention of the [`abi`] crate exactly —
//!    `rax` = number; arguments in `rdi, rsi, rdx, r10, r8, r9`; on return
//!    `rax` = error code (0 = success) and `rdi, rsi, rdx, r10, r8, r9` =
//!    results; `rcx` and `r11` clobbered (the CPU keeps the return address
//!    and flags there). `syscallN` passes the first N argument registers;
//!    the others keep whatever they held (the kernel ignores arguments a
//!    call does not take). They return `(rax, [rdi, rsi, rdx, r10, r8, r9])`.
//!    They are `unsafe` because some system calls change memory behind the
//!    compiler's back (`Map`, `Unmap`, writes to the IPC buffer, another
//!    thread's registers).
//! 2. [`raw`] / [`raw_number`]: the same, with all six arguments, for tests
//!    and fuzzers that must reach every call (and unknown numbers) — also
//!    `unsafe`, for the same reason.
//! 3. Typed, safe wrappers for the calls that cannot break memory safety:
//!    [`null`], [`debug_write`], [`yield_now`], [`thread_exit`] and the IPC
//!    and notification calls. They return `Result<_, abi::Error>`
//!    (decoded with [`abi::error::result_from_raw`]; an unknown non-zero
//!    code becomes `InvalidArgument`). Every wrapper names its arguments
//!    with the call's [`abi::args`] struct and passes it through
//!    [`invoke`], which sets exactly the registers the call reads (the
//!    receive wrappers pass the `Send` layout, a superset of `Recv`'s).
//!
//! The IPC and notification wrappers are `#[inline]`: across crates they
//! would otherwise be calls, and a one-way IPC would pay a function call,
//! a result struct on the stack and its reads around the `syscall` (about
//! 25 instructions of the 200 the benchmark component measured).
//!
//! IPC wrappers move the four register words only ([`Words`]); longer
//! messages need the IPC buffer, which the runtime does not manage yet
//! (the kernel rejects a long message without one).

use core::arch::asm;

use abi::args::{self, Args};
use abi::cpu::CpuSet;
use abi::error::result_from_raw;
use abi::{CapSlot, Error, MsgInfo, Sys, REGISTER_MESSAGE_WORDS};

/// What the kernel returns: `rax` (the error code) and the six result
/// registers `[rdi, rsi, rdx, r10, r8, r9]`.
pub type RawResult = (u64, [u64; 6]);

/// The message words that travel in registers.
pub type Words = [u64; REGISTER_MESSAGE_WORDS];

/// Register words of an empty message.
pub const NO_WORDS: Words = [0; REGISTER_MESSAGE_WORDS];

/// Most bytes one `DebugWrite` takes; [`debug_write`] splits longer slices.
pub const DEBUG_WRITE_MAX: usize = 4096;

/// System call `number` with no arguments.
///
/// # Safety
///
/// The call must not change memory the program relies on (see the module
/// docs); e.g. `Null`, `Yield` and `DebugWrite` never do.
#[inline(always)]
pub unsafe fn syscall0(number: u64) -> RawResult {
    let (rax, rdi, rsi, rdx, r10, r8, r9);
    // SAFETY: `syscall` enters the kernel, which returns to the next
    // instruction with only rax, the six result registers, rcx and r11
    // changed — all declared here — and never touches our stack. Memory
    // effects of the call itself are the caller's obligation (see above),
    // so the block is not marked `nomem`/`readonly`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") number => rax,
            lateout("rdi") rdi, lateout("rsi") rsi, lateout("rdx") rdx,
            lateout("r10") r10, lateout("r8") r8, lateout("r9") r9,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    (rax, [rdi, rsi, rdx, r10, r8, r9])
}

/// System call `number` with one argument (`rdi`).
///
/// # Safety
///
/// As for [`syscall0`].
#[inline(always)]
pub unsafe fn syscall1(number: u64, a0: u64) -> RawResult {
    let (rax, rdi, rsi, rdx, r10, r8, r9);
    // SAFETY: as in `syscall0`; the argument register is also a result
    // register, hence `inlateout`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") number => rax,
            inlateout("rdi") a0 => rdi, lateout("rsi") rsi, lateout("rdx") rdx,
            lateout("r10") r10, lateout("r8") r8, lateout("r9") r9,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    (rax, [rdi, rsi, rdx, r10, r8, r9])
}

/// System call `number` with two arguments (`rdi`, `rsi`).
///
/// # Safety
///
/// As for [`syscall0`].
#[inline(always)]
pub unsafe fn syscall2(number: u64, a0: u64, a1: u64) -> RawResult {
    let (rax, rdi, rsi, rdx, r10, r8, r9);
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") number => rax,
            inlateout("rdi") a0 => rdi, inlateout("rsi") a1 => rsi, lateout("rdx") rdx,
            lateout("r10") r10, lateout("r8") r8, lateout("r9") r9,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    (rax, [rdi, rsi, rdx, r10, r8, r9])
}

/// System call `number` with three arguments (`rdi`, `rsi`, `rdx`).
///
/// # Safety
///
/// As for [`syscall0`].
#[inline(always)]
pub unsafe fn syscall3(number: u64, a0: u64, a1: u64, a2: u64) -> RawResult {
    let (rax, rdi, rsi, rdx, r10, r8, r9);
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") number => rax,
            inlateout("rdi") a0 => rdi, inlateout("rsi") a1 => rsi, inlateout("rdx") a2 => rdx,
            lateout("r10") r10, lateout("r8") r8, lateout("r9") r9,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    (rax, [rdi, rsi, rdx, r10, r8, r9])
}

/// System call `number` with four arguments (`rdi`, `rsi`, `rdx`, `r10`).
///
/// # Safety
///
/// As for [`syscall0`].
#[inline(always)]
pub unsafe fn syscall4(number: u64, a0: u64, a1: u64, a2: u64, a3: u64) -> RawResult {
    let (rax, rdi, rsi, rdx, r10, r8, r9);
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") number => rax,
            inlateout("rdi") a0 => rdi, inlateout("rsi") a1 => rsi, inlateout("rdx") a2 => rdx,
            inlateout("r10") a3 => r10, lateout("r8") r8, lateout("r9") r9,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    (rax, [rdi, rsi, rdx, r10, r8, r9])
}

/// System call `number` with five arguments (`rdi`, `rsi`, `rdx`, `r10`,
/// `r8`).
///
/// # Safety
///
/// As for [`syscall0`].
#[inline(always)]
pub unsafe fn syscall5(number: u64, a0: u64, a1: u64, a2: u64, a3: u64, a4: u64) -> RawResult {
    let (rax, rdi, rsi, rdx, r10, r8, r9);
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") number => rax,
            inlateout("rdi") a0 => rdi, inlateout("rsi") a1 => rsi, inlateout("rdx") a2 => rdx,
            inlateout("r10") a3 => r10, inlateout("r8") a4 => r8, lateout("r9") r9,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    (rax, [rdi, rsi, rdx, r10, r8, r9])
}

/// System call `number` with six arguments (`rdi`, `rsi`, `rdx`, `r10`,
/// `r8`, `r9`).
///
/// # Safety
///
/// As for [`syscall0`].
#[inline(always)]
pub unsafe fn syscall6(number: u64, args: [u64; 6]) -> RawResult {
    let [a0, a1, a2, a3, a4, a5] = args;
    let (rax, rdi, rsi, rdx, r10, r8, r9);
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") number => rax,
            inlateout("rdi") a0 => rdi, inlateout("rsi") a1 => rsi, inlateout("rdx") a2 => rdx,
            inlateout("r10") a3 => r10, inlateout("r8") a4 => r8, inlateout("r9") a5 => r9,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    (rax, [rdi, rsi, rdx, r10, r8, r9])
}

/// Any system call with all six argument registers set: for tests and
/// fuzzers. Returns `rax` (the raw error code) and the six result registers.
///
/// # Safety
///
/// As for [`syscall0`]: the call must not change memory the program relies
/// on.
#[inline]
pub unsafe fn raw(sys: Sys, args: [u64; 6]) -> RawResult {
    // SAFETY: forwarded to the caller.
    unsafe { syscall6(sys as u64, args) }
}

/// Like [`raw`], for any number in `rax`, including ones that are not
/// system calls (which must fail with `UnknownSyscall` and do nothing).
///
/// # Safety
///
/// As for [`syscall0`].
#[inline]
pub unsafe fn raw_number(number: u64, args: [u64; 6]) -> RawResult {
    // SAFETY: forwarded to the caller.
    unsafe { syscall6(number, args) }
}

/// `Null`: does nothing; measures the system-call path.
#[inline(always)]
pub fn null() -> Result<(), Error> {
    // SAFETY: `Null` has no effect.
    let (err, _) = unsafe { invoke(Sys::Null, args::NoArgs {}) };
    result_from_raw(err)
}

/// Writes `bytes` to the kernel console, in `DebugWrite` calls of at most
/// [`DEBUG_WRITE_MAX`] bytes; stops at the first error.
pub fn debug_write(bytes: &[u8]) -> Result<(), Error> {
    for chunk in bytes.chunks(DEBUG_WRITE_MAX) {
        debug_write_raw(chunk.as_ptr() as u64, chunk.len() as u64)?;
    }
    Ok(())
}

/// One `DebugWrite` of `len` bytes at user address `addr`, unchecked: the
/// kernel validates both (`BadAddress` for memory that is not readable user
/// memory, `InvalidArgument` for `len` > [`DEBUG_WRITE_MAX`]). Safe for any
/// values, because the kernel only reads.
pub fn debug_write_raw(addr: u64, len: u64) -> Result<(), Error> {
    // SAFETY: `DebugWrite` only reads user memory, and checks the range.
    let (err, _) = unsafe { invoke(Sys::DebugWrite, args::DebugWrite { ptr: addr, len }) };
    result_from_raw(err)
}

/// `Yield`: gives up the rest of the timeslice.
pub fn yield_now() -> Result<(), Error> {
    // SAFETY: `Yield` changes no memory.
    let (err, _) = unsafe { invoke(Sys::Yield, args::NoArgs {}) };
    result_from_raw(err)
}

/// `ThreadExit`: ends the calling thread with `code` (passed sign-extended
/// to 64 bits). Should the kernel return (it does not implement the call),
/// the thread executes `ud2`, so it ends with a fault instead of running on.
pub fn thread_exit(code: i32) -> ! {
    // SAFETY: `ThreadExit` changes no memory of ours (it ends the thread).
    unsafe {
        invoke(
            Sys::ThreadExit,
            args::ThreadExit {
                code: code as i64 as u64,
            },
        );
    }
    // SAFETY: `ud2` raises an invalid-opcode exception and never returns;
    // it touches neither memory nor the stack.
    unsafe { asm!("ud2", options(noreturn, nomem, nostack)) }
}

/// Sends on endpoint `slot`, waiting until a receiver takes the message.
#[inline]
pub fn send(slot: CapSlot, info: MsgInfo, words: Words) -> Result<(), Error> {
    let (err, _) = ipc(Sys::Send, slot, info, words);
    result_from_raw(err)
}

/// Sends on endpoint `slot` if a receiver is waiting, else fails with
/// `WouldBlock`.
#[inline]
pub fn nb_send(slot: CapSlot, info: MsgInfo, words: Words) -> Result<(), Error> {
    let (err, _) = ipc(Sys::NbSend, slot, info, words);
    result_from_raw(err)
}

/// Receives on endpoint `slot`, waiting for a sender; returns the sender's
/// badge, the message info and the register words.
#[inline]
pub fn recv(slot: CapSlot) -> Result<(u64, MsgInfo, Words), Error> {
    let result = ipc(Sys::Recv, slot, MsgInfo::default(), NO_WORDS);
    received(result)
}

/// Receives on endpoint `slot` if a sender is waiting, else fails with
/// `WouldBlock`.
#[inline]
pub fn nb_recv(slot: CapSlot) -> Result<(u64, MsgInfo, Words), Error> {
    let result = ipc(Sys::NbRecv, slot, MsgInfo::default(), NO_WORDS);
    received(result)
}

/// Sends on endpoint `slot` and waits for the reply; returns the reply's
/// message info and register words.
#[inline]
pub fn call(slot: CapSlot, info: MsgInfo, words: Words) -> Result<(MsgInfo, Words), Error> {
    let (_badge, info, words) = received(ipc(Sys::Call, slot, info, words))?;
    Ok((info, words))
}

/// Replies to the thread whose call this thread received last.
#[inline]
pub fn reply(info: MsgInfo, words: Words) -> Result<(), Error> {
    let (err, _) = ipc(Sys::Reply, 0, info, words);
    result_from_raw(err)
}

/// Replies to the current caller, then receives on endpoint `slot`: the
/// server loop's one call. Returns what [`recv`] returns.
#[inline]
pub fn reply_recv(
    slot: CapSlot,
    info: MsgInfo,
    words: Words,
) -> Result<(u64, MsgInfo, Words), Error> {
    received(ipc(Sys::ReplyRecv, slot, info, words))
}

/// Moves the reply to the call (or fault) this thread received last into
/// the empty slot `slot` as a reply capability (docs/abi.md, "Reply
/// capabilities"): the thread can receive other calls and answer this one
/// later with [`reply_to`].
#[inline]
pub fn save_reply(slot: CapSlot) -> Result<(), Error> {
    // SAFETY: fills an empty capability slot; changes no memory.
    let (err, _) = unsafe { invoke(Sys::SaveReply, args::Slot { slot }) };
    result_from_raw(err)
}

/// Answers the call saved in reply capability `slot`, which is used up
/// (the slot is empty after). `Aborted`: the caller stopped waiting
/// meanwhile (destroyed or suspended); the stale capability stays until
/// deleted.
#[inline]
pub fn reply_to(slot: CapSlot, info: MsgInfo, words: Words) -> Result<(), Error> {
    let (err, _) = ipc(Sys::ReplyTo, slot, info, words);
    result_from_raw(err)
}

/// Signals notification `slot` (ORs the capability's badge into its word).
#[inline]
pub fn signal(slot: CapSlot) -> Result<(), Error> {
    // SAFETY: `Signal` changes no memory of ours.
    let (err, _) = unsafe { invoke(Sys::Signal, args::Signal { notification: slot }) };
    result_from_raw(err)
}

/// Waits until notification `slot`'s word is non-zero; returns and clears it.
#[inline]
pub fn wait(slot: CapSlot) -> Result<u64, Error> {
    // SAFETY: `Wait` changes no memory of ours.
    let (err, r) = unsafe { invoke(Sys::Wait, args::Signal { notification: slot }) };
    result_from_raw(err).map(|()| r[0])
}

/// Returns and clears notification `slot`'s word without blocking.
#[inline]
pub fn poll(slot: CapSlot) -> Result<u64, Error> {
    // SAFETY: `Poll` changes no memory of ours.
    let (err, r) = unsafe { invoke(Sys::Poll, args::Signal { notification: slot }) };
    result_from_raw(err).map(|()| r[0])
}

/// `CapCopy`: copies the capability at `src` into the empty slot `dst`.
pub fn cap_copy(src: CapSlot, dst: CapSlot) -> Result<(), Error> {
    // SAFETY: capability operations change no user memory.
    let (err, _) = unsafe { invoke(Sys::CapCopy, args::CapCopy { src, dst }) };
    result_from_raw(err)
}

/// `CapMint`: derives a capability with `rights` (a subset) and `badge`
/// (endpoints and notifications; 0 keeps the source's) into `dst`.
pub fn cap_mint(src: CapSlot, dst: CapSlot, rights: abi::Rights, badge: u64) -> Result<(), Error> {
    // SAFETY: capability operations change no user memory.
    let (err, _) = unsafe {
        invoke(
            Sys::CapMint,
            args::CapMint {
                src,
                dst,
                rights: rights.raw(),
                badge,
            },
        )
    };
    result_from_raw(err)
}

/// `CapDelete`: empties `slot`.
///
/// Deleting a frame capability unmaps the frame; deleting the last
/// capability of the caller's own address space or thread ends the caller.
/// Neither breaks memory safety of *other* code by itself, but unmapping a
/// frame the program uses does, hence `unsafe`.
///
/// # Safety
///
/// The program must not rely on memory that the deletion unmaps.
pub unsafe fn cap_delete(slot: CapSlot) -> Result<(), Error> {
    // SAFETY: forwarded to the caller.
    let (err, _) = unsafe { invoke(Sys::CapDelete, args::Slot { slot }) };
    result_from_raw(err)
}

/// `CapRevoke`: deletes every capability derived from `slot`.
///
/// # Safety
///
/// As for [`cap_delete`], for every derived capability.
pub unsafe fn cap_revoke(slot: CapSlot) -> Result<(), Error> {
    // SAFETY: forwarded to the caller.
    let (err, _) = unsafe { invoke(Sys::CapRevoke, args::Slot { slot }) };
    result_from_raw(err)
}

/// `Retype`: makes `count` objects of `kind` from untyped `untyped` into
/// slots `dst`, `dst + 1`, ... (`size_bits` for sized types, see
/// [`abi::ObjectType::object_bits`]).
pub fn retype(
    untyped: CapSlot,
    kind: abi::ObjectType,
    size_bits: u64,
    dst: CapSlot,
    count: u64,
) -> Result<(), Error> {
    // SAFETY: new objects are fresh memory nobody has mapped.
    let (err, _) = unsafe {
        invoke(
            Sys::Retype,
            args::Retype {
                untyped,
                kind: kind as u64,
                size_bits,
                dst,
                count,
            },
        )
    };
    result_from_raw(err)
}

/// `Map`: maps frame `frame` into address space `vspace` at `vaddr` with
/// attributes `attr` ([`abi::map::MapAttr`]).
///
/// # Safety
///
/// Mapping into the caller's own address space must not replace memory the
/// program relies on (the kernel refuses to map over an existing page, but
/// the new page's contents become visible at `vaddr`).
pub unsafe fn map(
    vspace: CapSlot,
    frame: CapSlot,
    vaddr: u64,
    attr: abi::map::MapAttr,
) -> Result<(), Error> {
    // SAFETY: forwarded to the caller.
    let (err, _) = unsafe {
        invoke(
            Sys::Map,
            args::Map {
                vspace,
                frame,
                vaddr,
                attr: attr.raw(),
            },
        )
    };
    result_from_raw(err)
}

/// `Unmap`: removes the mapping made with frame capability `frame`.
///
/// # Safety
///
/// The program must not rely on the memory that goes away.
pub unsafe fn unmap(frame: CapSlot) -> Result<(), Error> {
    // SAFETY: forwarded to the caller.
    let (err, _) = unsafe { invoke(Sys::Unmap, args::Slot { slot: frame }) };
    result_from_raw(err)
}

/// `ThreadConfigure`: gives thread `thread` its capability space, address
/// space, IPC buffer address and fault endpoint (`NULL_SLOT` for none).
pub fn thread_configure(
    thread: CapSlot,
    cspace: CapSlot,
    vspace: CapSlot,
    ipc_buffer: u64,
    fault_endpoint: CapSlot,
) -> Result<(), Error> {
    // SAFETY: configures another thread; changes none of the caller's memory
    // (configuring the calling thread itself takes effect at its next switch
    // and is the caller's business).
    let (err, _) = unsafe {
        invoke(
            Sys::ThreadConfigure,
            args::ThreadConfigure {
                thread,
                cspace,
                vspace,
                ipc_buffer,
                fault_endpoint,
            },
        )
    };
    result_from_raw(err)
}

/// `ThreadSetSchedParams`: priority (at most the caller's own) and CPU.
pub fn thread_set_sched_params(thread: CapSlot, priority: u8, cpu: u32) -> Result<(), Error> {
    thread_place(thread, priority, cpu, CpuSet::EMPTY)
}

/// `ThreadSetSchedParams` with a CPU set for the thread: the CPUs it may
/// in turn place threads on (a subset of the caller's that holds `cpu`;
/// [`CpuSet::EMPTY`]: the caller's own set).
pub fn thread_place(thread: CapSlot, priority: u8, cpu: u32, cpus: CpuSet) -> Result<(), Error> {
    // SAFETY: changes no memory.
    let (err, _) = unsafe {
        invoke(
            Sys::ThreadSetSchedParams,
            args::ThreadSetSchedParams {
                thread,
                priority: u64::from(priority),
                cpu: u64::from(cpu),
                cpus: cpus.bits(),
            },
        )
    };
    result_from_raw(err)
}

/// `CpuSet`: the CPUs the calling thread may place threads on.
pub fn cpu_set() -> CpuSet {
    // SAFETY: changes no memory.
    let (err, r) = unsafe { invoke(Sys::CpuSet, args::NoArgs {}) };
    // It cannot fail (the empty set says so if it ever did).
    if err == 0 {
        CpuSet(r[0])
    } else {
        CpuSet::EMPTY
    }
}

/// `ThreadStart`: starts a configured, inactive thread at `rip` with `rsp`
/// and `rdi = arg`.
///
/// # Safety
///
/// If the thread shares the caller's address space, starting it at `rip`
/// with `rsp` must be sound for the program (as spawning a thread is).
pub unsafe fn thread_start(thread: CapSlot, rip: u64, rsp: u64, arg: u64) -> Result<(), Error> {
    // SAFETY: forwarded to the caller.
    let (err, _) = unsafe {
        invoke(
            Sys::ThreadStart,
            args::ThreadStart {
                thread,
                rip,
                rsp,
                arg,
            },
        )
    };
    result_from_raw(err)
}

/// `TraceMark`: marks a step of the caller's in the kernel trace (e.g.
/// `trace_mark("packet allocated", index)`), with `value` next to it. The
/// label's first 24 bytes are kept. Costs one system call that does
/// nothing in a kernel built without the `trace` feature
/// (docs/profiling.md).
#[inline]
pub fn trace_mark(label: &str, value: u64) {
    let [label0, label1, label2] = formats::trace::pack_label(label.as_bytes());
    // SAFETY: `TraceMark` changes no memory of the caller's.
    let (err, _) = unsafe {
        invoke(
            Sys::TraceMark,
            args::TraceMark {
                label0,
                label1,
                label2,
                value,
            },
        )
    };
    // It cannot fail: every value is a valid marker.
    debug_assert_eq!(err, 0);
}

/// `TraceName`: names `thread` in the kernel trace (the track's name in
/// the viewer). Names are cut to 32 bytes, at a character boundary.
pub fn trace_name(thread: CapSlot, name: &str) -> Result<(), Error> {
    let mut end = name.len().min(formats::trace::NAME_MAX);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let [name0, name1, name2, name3] = formats::trace::pack_label(&name.as_bytes()[..end]);
    // SAFETY: `TraceName` changes no memory of the caller's.
    let (err, _) = unsafe {
        invoke(
            Sys::TraceName,
            args::TraceName {
                thread,
                name0,
                name1,
                name2,
                name3,
            },
        )
    };
    result_from_raw(err)
}

/// `ThreadSuspend`: stops a thread (an IPC it waits in is aborted).
pub fn thread_suspend(thread: CapSlot) -> Result<(), Error> {
    // SAFETY: changes no memory of the caller's.
    let (err, _) = unsafe { invoke(Sys::ThreadSuspend, args::Slot { slot: thread }) };
    result_from_raw(err)
}

/// `ThreadResume`: makes a suspended thread runnable again.
pub fn thread_resume(thread: CapSlot) -> Result<(), Error> {
    // SAFETY: changes no memory of the caller's.
    let (err, _) = unsafe { invoke(Sys::ThreadResume, args::Slot { slot: thread }) };
    result_from_raw(err)
}

/// `ThreadRegisters`: reads (`write == false`) or writes a thread's
/// registers through the caller's IPC buffer (layout
/// [`abi::ipc_buffer::registers`]).
///
/// # Safety
///
/// Writes the caller's IPC buffer (read) or changes another thread's
/// registers (write); the program must expect both.
pub unsafe fn thread_registers(thread: CapSlot, write: bool) -> Result<(), Error> {
    // SAFETY: forwarded to the caller.
    let (err, _) = unsafe {
        invoke(
            Sys::ThreadRegisters,
            args::ThreadRegisters {
                thread,
                write: u64::from(write),
            },
        )
    };
    result_from_raw(err)
}

/// `VcpuRun`: runs virtual CPU `vcpu` in guest space `space` until its
/// next exit, loading first the parts of the state block in the caller's
/// IPC buffer that `flags` names (`abi::vcpu::load`); the exit's block
/// comes back there. Returns (exit code, exit info 1, exit info 2). A
/// host interrupt ends it with `abi::vcpu::exit::INTR`: call again
/// ([`crate::vcpu::Vcpu::run`] does).
///
/// # Safety
///
/// Reads and writes the caller's IPC buffer (words 0..`abi::vcpu::word::
/// COUNT`); the program must expect that.
pub unsafe fn vcpu_run(vcpu: CapSlot, space: CapSlot, flags: u64) -> Result<[u64; 3], Error> {
    // SAFETY: forwarded to the caller.
    let (err, r) = unsafe { invoke(Sys::VcpuRun, args::VcpuRun { vcpu, space, flags }) };
    result_from_raw(err)?;
    Ok([r[0], r[1], r[2]])
}

/// `IrqBind`: IRQ handler `irq` signals notification `notification` (with
/// that capability's badge) when its line fires.
pub fn irq_bind(irq: CapSlot, notification: CapSlot) -> Result<(), Error> {
    // SAFETY: changes no memory.
    let (err, _) = unsafe { invoke(Sys::IrqBind, args::IrqBind { irq, notification }) };
    result_from_raw(err)
}

/// `IrqAck`: unmasks IRQ handler `irq`'s line after the device was served.
pub fn irq_ack(irq: CapSlot) -> Result<(), Error> {
    irq_ack_info(irq).map(|_| ())
}

/// Where and when an MSI handler's last interrupt arrived (`IrqAck`'s
/// results; 0 and 0 for a line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IrqArrival {
    /// The CPU index.
    pub cpu: u32,
    /// The TSC when the kernel took it.
    pub tsc: u64,
}

/// `IrqAck`, with the CPU the MSI handler's last interrupt arrived at.
pub fn irq_ack_cpu(irq: CapSlot) -> Result<u32, Error> {
    irq_ack_info(irq).map(|a| a.cpu)
}

/// `IrqAck`, with its results.
pub fn irq_ack_info(irq: CapSlot) -> Result<IrqArrival, Error> {
    // SAFETY: changes no memory.
    let (err, r) = unsafe { invoke(Sys::IrqAck, args::Slot { slot: irq }) };
    result_from_raw(err)?;
    Ok(IrqArrival {
        cpu: r[0] as u32,
        tsc: r[1],
    })
}

/// A thread's sampled CPU time (`ThreadCpuTime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTime {
    /// Timer ticks that found the thread running in user mode.
    pub ticks: u64,
    /// Timer ticks per second.
    pub hz: u64,
}

impl CpuTime {
    /// The time in milliseconds (at the tick's resolution).
    pub fn millis(&self) -> u64 {
        self.ticks.saturating_mul(1000) / self.hz.max(1)
    }
}

/// `ThreadCpuTime`: the sampled CPU time of `thread` (a capability with
/// `READ`).
pub fn thread_cpu_time(thread: CapSlot) -> Result<CpuTime, Error> {
    // SAFETY: changes no memory.
    let (err, r) = unsafe { invoke(Sys::ThreadCpuTime, args::Slot { slot: thread }) };
    result_from_raw(err)?;
    Ok(CpuTime {
        ticks: r[0],
        hz: r[1],
    })
}

/// What is in use of an untyped or a capability table (`Usage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Untyped: bytes no longer free to retype (in it and everything
    /// split from it); table: full slots.
    pub used: u64,
    /// Untyped: its bytes; table: its slots.
    pub size: u64,
}

/// `Usage`: what is in use of the untyped memory or capability table in
/// `slot` (`WrongObjectType` for another kind).
pub fn usage(slot: CapSlot) -> Result<Usage, Error> {
    // SAFETY: changes no memory.
    let (err, r) = unsafe { invoke(Sys::Usage, args::Slot { slot }) };
    result_from_raw(err)?;
    Ok(Usage {
        used: r[0],
        size: r[1],
    })
}

/// An MSI the kernel allocated: what the device must write, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsiMessage {
    /// Where the device writes (the local APIC's window, its id inside).
    pub address: u64,
    /// What it writes (the vector).
    pub data: u32,
}

/// `MsiAlloc`: a fresh MSI vector aimed at CPU `cpu`, its IRQ handler in
/// the empty slot `slot` (device control capability `control`).
pub fn msi_alloc(control: CapSlot, slot: CapSlot, cpu: u32) -> Result<MsiMessage, Error> {
    // SAFETY: changes no memory (a new capability in a slot).
    let (err, r) = unsafe {
        invoke(
            Sys::MsiAlloc,
            args::MsiAlloc {
                control,
                slot,
                cpu: u64::from(cpu),
            },
        )
    };
    result_from_raw(err)?;
    Ok(MsiMessage {
        address: r[0],
        data: r[1] as u32,
    })
}

/// Where a frame or untyped capability's memory is, as `PhysAddress`
/// answers (device control capability needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysInfo {
    /// The physical (bus) address.
    pub phys: u64,
    /// log2 of the size in bytes.
    pub size_bits: u32,
    /// Device memory (not RAM).
    pub device: bool,
}

/// `PhysAddress` of frame or untyped `cap`.
pub fn phys_address(control: CapSlot, cap: CapSlot) -> Result<PhysInfo, Error> {
    // SAFETY: changes no memory.
    let (err, r) = unsafe { invoke(Sys::PhysAddress, args::PhysAddress { control, cap }) };
    result_from_raw(err)?;
    Ok(PhysInfo {
        phys: r[0],
        size_bits: r[1] as u32,
        device: r[2] != 0,
    })
}

/// `IoPort` read of `width` (1, 2 or 4) bytes from `port`.
pub fn io_port_read(ports: CapSlot, port: u16, width: u8) -> Result<u32, Error> {
    // SAFETY: a port read changes no memory (devices are the caller's
    // business: holding the capability is the permission).
    let (err, r) = unsafe {
        invoke(
            Sys::IoPort,
            args::IoPort {
                ports,
                port: u64::from(port),
                write: 0,
                width: u64::from(width),
                value: 0,
            },
        )
    };
    result_from_raw(err).map(|()| r[0] as u32)
}

/// `IoPort` write of `width` (1, 2 or 4) bytes to `port`.
///
/// # Safety
///
/// A port write can make a device DMA into memory; the program must know
/// what the device does.
pub unsafe fn io_port_write(ports: CapSlot, port: u16, width: u8, value: u32) -> Result<(), Error> {
    // SAFETY: forwarded to the caller.
    let (err, _) = unsafe {
        invoke(
            Sys::IoPort,
            args::IoPort {
                ports,
                port: u64::from(port),
                write: 1,
                width: u64::from(width),
                value: u64::from(value),
            },
        )
    };
    result_from_raw(err)
}

/// `BindNotification`: `Recv` by thread `thread` also returns signals of
/// `notification` (label [`abi::LABEL_NOTIFICATION`]).
pub fn bind_notification(thread: CapSlot, notification: CapSlot) -> Result<(), Error> {
    // SAFETY: changes no memory.
    let (err, _) = unsafe {
        invoke(
            Sys::BindNotification,
            args::BindNotification {
                thread,
                notification,
            },
        )
    };
    result_from_raw(err)
}

/// Reads the time-stamp counter. Under QEMU `-icount shift=0` it counts
/// executed instructions. Not serialising: fine for path lengths, add
/// fences when timing real hardware against out-of-order execution.
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` only reads the time-stamp counter (user mode may, with
    // CR4.TSD clear, which the kernel keeps).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// An IPC system call in the register convention: slot in `rdi`, message
/// info in `rsi`, the four words in `rdx, r10, r8, r9`.
#[inline(always)]
fn ipc(sys: Sys, slot: CapSlot, info: MsgInfo, words: Words) -> RawResult {
    let [w0, w1, w2, w3] = words;
    let a = args::Send {
        cap: slot,
        info: info.0,
        w0,
        w1,
        w2,
        w3,
    };
    // SAFETY: IPC calls write only registers as long as no IPC buffer is
    // set up (messages longer than the register words fail without one);
    // once the runtime sets one up, it owns it and never lends it out.
    unsafe { invoke(sys, a) }
}

/// System call `sys` with the argument struct `a` ([`abi::args`]): passes
/// exactly the registers the call reads (`Args::REGS`, known at compile
/// time, so this is one `syscallN`).
///
/// # Safety
///
/// As for [`syscall0`].
#[inline(always)]
pub unsafe fn invoke<A: Args>(sys: Sys, a: A) -> RawResult {
    let r = a.to_regs();
    let n = sys as u64;
    // SAFETY: forwarded to the caller.
    unsafe {
        match A::REGS {
            0 => syscall0(n),
            1 => syscall1(n, r[0]),
            2 => syscall2(n, r[0], r[1]),
            3 => syscall3(n, r[0], r[1], r[2]),
            4 => syscall4(n, r[0], r[1], r[2], r[3]),
            5 => syscall5(n, r[0], r[1], r[2], r[3], r[4]),
            _ => syscall6(n, r),
        }
    }
}

/// Decodes a receive: badge in `rdi`, message info in `rsi`, words after.
#[inline(always)]
fn received((err, r): RawResult) -> Result<(u64, MsgInfo, Words), Error> {
    result_from_raw(err)?;
    Ok((r[0], MsgInfo(r[1]), [r[2], r[3], r[4], r[5]]))
}
