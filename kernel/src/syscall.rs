//! System calls: decode, then perform.
//!
//! [`decode`] reads the caller's registers, resolves and checks every
//! capability and argument, and returns an [`Invocation`] or an error —
//! with no side effects, so a bad call changes nothing. [`perform`] then
//! acts; it fails only on conditions that depend on state it discovers
//! while acting (a mapping already present, a pool that is full), and then
//! too without having changed anything. (seL4's `decodeX`/`invokeX` split.)
//! Where perform does several things, it checks or reserves first: `Retype`'s
//! decode checks every insertion into the derivation tree
//! (`kcore::cap::check_insert_child`), so it cannot fail once perform has
//! made the first object;
//! `ThreadConfigure` finishes the deletion of the thread's old
//! capabilities only after copying the new ones (a source may lie in a
//! table the deletion empties). The one exception left: corrupt
//! derivation links (`CapError::Corrupt`, which the kcore::cap invariants
//! rule out) found by a later `ThreadConfigure` copy leave the earlier
//! slots replaced.
//! Results go back in the caller's saved registers per the convention in
//! the `abi` crate; docs/abi.md lists every call and its errors.
//!
//! `Call` and `ReplyRecv` first try the IPC fast path, in assembly
//! (`arch::x86_64::syscall_entry`); what it does not take comes here.

use abi::args::{self, Args};
use abi::ipc_buffer::registers as reg;
use abi::map::MapAttr;
use abi::{Error, MsgInfo, ObjectType, Rights, Sys};
use kcore::cap::{self, Capability, SlotId};
use kcore::typed::{FrameCap, IoPortsCap, UntypedCap};

use crate::arch::syscall_entry::SWITCH;
use crate::ipc;
use crate::object::{self, Access};
use crate::thread::{self, SendKind, State, Thread, ThreadRef};
use crate::token::Kernel;
use crate::uaccess::{UserSlice, USER_END};
use crate::vspace;

/// Most bytes one `DebugWrite` may print.
pub const DEBUG_WRITE_MAX: u64 = 4096;
/// Most objects one `Retype` makes.
pub const RETYPE_MAX_COUNT: u64 = 256;

/// The message-passing and notification calls, checked: a small `Copy`
/// value of its own, so that these — the general path's most frequent
/// calls — are decoded and performed without building and moving the
/// large [`Invocation`] (measured with `cargo xtask profile --annotate`:
/// about 45 instructions per call went into packing and spilling it).
#[derive(Debug, Clone, Copy)]
pub enum IpcInvocation {
    Send {
        ep: u64,
        badge: u64,
        grant: bool,
        blocking: bool,
    },
    Recv {
        ep: u64,
        blocking: bool,
    },
    Call {
        ep: u64,
        badge: u64,
        grant: bool,
    },
    Reply,
    ReplyRecv {
        ep: u64,
    },
    Signal {
        n: u64,
        badge: u64,
    },
    Wait {
        n: u64,
    },
    Poll {
        n: u64,
    },
}

/// A checked system call, ready to perform.
#[derive(Debug)]
pub enum Invocation {
    Null,
    DebugWrite(UserSlice),
    Yield,
    ThreadExit(u64),
    /// Message passing and notifications (decoded apart: see [`IpcInvocation`]).
    Ipc(IpcInvocation),
    CapCopy {
        src: SlotId,
        dst: SlotId,
        cap: Capability,
    },
    CapMint {
        src: SlotId,
        dst: SlotId,
        cap: Capability,
        rights: Rights,
        badge: u64,
    },
    CapDelete(SlotId),
    CapRevoke(SlotId),
    Retype {
        untyped: SlotId,
        kind: ObjectType,
        size_bits: u64,
        offset: u64,
        object_bits: u32,
        dst: SlotId,
        count: u64,
    },
    Map {
        space: u64,
        frame: SlotId,
        vaddr: u64,
        attr: MapAttr,
    },
    Unmap(SlotId),
    ThreadConfigure {
        target: ThreadRef,
        cspace: SlotId,
        vspace: SlotId,
        ipc_buffer: u64,
        fault: Option<SlotId>,
    },
    ThreadSetSchedParams {
        target: ThreadRef,
        priority: u8,
        /// Below the CPU count (at most `percpu::MAX_CPUS`).
        cpu: u8,
        /// A subset of the caller's CPU set, holding `cpu`.
        cpus: u64,
    },
    CpuSet,
    ThreadStart {
        target: ThreadRef,
        rip: u64,
        rsp: u64,
        arg: u64,
    },
    ThreadSuspend(ThreadRef),
    ThreadResume(ThreadRef),
    ThreadRegisters {
        target: ThreadRef,
        write: bool,
        buffer: *mut u64,
    },
    IrqBind {
        line: u64,
        n: u64,
        badge: u64,
    },
    IrqAck {
        line: u64,
    },
    IoPort {
        port: u16,
        write: bool,
        width: u8,
        value: u32,
    },
    BindNotification {
        target: ThreadRef,
        n: Option<u64>,
    },
    SaveReply(SlotId),
    ReplyTo {
        slot: SlotId,
        caller: ThreadRef,
    },
}

/// What happens to the calling thread after the call.
enum Outcome {
    /// Return to the caller with `rax` = 0 (and any results written).
    Resume,
    /// The caller gave up the CPU but stays runnable.
    Yield,
    /// The caller blocked or is gone; run someone else.
    Schedule,
}

fn lookup(
    k: &Kernel,
    c: &Thread,
    addr: u64,
    kind: ObjectType,
    rights: Rights,
) -> Result<(SlotId, Capability), Error> {
    object::lookup(k, c, addr, kind, rights)
}

fn full_slot(k: &Kernel, c: &Thread, addr: u64) -> Result<(SlotId, Capability), Error> {
    let id = object::resolve(k, c, addr, Access::Read)?;
    let cap = k.slot(id).cap.ok_or(Error::EmptySlot)?;
    Ok((id, cap))
}

fn empty_slot(k: &Kernel, c: &Thread, addr: u64) -> Result<SlotId, Error> {
    let id = object::resolve(k, c, addr, Access::Write)?;
    if k.slot(id).cap.is_some() {
        return Err(Error::SlotOccupied);
    }
    Ok(id)
}

fn thread_cap(k: &Kernel, c: &Thread, addr: u64, rights: Rights) -> Result<ThreadRef, Error> {
    let (_, cap) = lookup(k, c, addr, ObjectType::Thread, rights)?;
    // SAFETY: the object of a thread capability (in a slot) is a live
    // thread.
    Ok(unsafe { object::thread_at(cap.object) })
}

fn user_address(a: u64) -> Result<u64, Error> {
    if a >= USER_END {
        return Err(Error::InvalidArgument);
    }
    Ok(a)
}

/// Decodes a message-passing or notification call (`sys` is one of
/// them: [`is_ipc`]) of the caller `c` (borrowed from `k`).
#[inline(always)]
fn decode_ipc(k: &Kernel, c: &Thread, sys: Sys) -> Result<IpcInvocation, Error> {
    let f = &c.context.0;
    // Only the first two registers are read here (the message words are
    // taken by the transfer itself).
    let regs = [f.rdi, f.rsi, 0, 0, 0, 0];
    let a = args::Send::from_regs(regs);
    Ok(match sys {
        Sys::Send | Sys::NbSend | Sys::Call => {
            let (_, cap) = lookup(k, c, a.cap, ObjectType::Endpoint, Rights::WRITE)?;
            let info = MsgInfo(a.info).validate()?;
            let grant = cap.rights.contains(Rights::GRANT);
            if info.caps() > 0 && !grant {
                return Err(Error::MissingRights);
            }
            ipc::check_sendable(&k.objects, c, info)?;
            match sys {
                Sys::Call => IpcInvocation::Call {
                    ep: cap.object,
                    badge: cap.badge,
                    grant,
                },
                _ => IpcInvocation::Send {
                    ep: cap.object,
                    badge: cap.badge,
                    grant,
                    blocking: sys == Sys::Send,
                },
            }
        }
        Sys::Recv | Sys::NbRecv => {
            let ep = args::Recv::from_regs(regs).endpoint;
            let (_, cap) = lookup(k, c, ep, ObjectType::Endpoint, Rights::READ)?;
            IpcInvocation::Recv {
                ep: cap.object,
                blocking: sys == Sys::Recv,
            }
        }
        Sys::Reply => {
            let info = MsgInfo(a.info).validate()?;
            ipc::check_sendable(&k.objects, c, info)?;
            IpcInvocation::Reply
        }
        Sys::ReplyRecv => {
            let (_, cap) = lookup(k, c, a.cap, ObjectType::Endpoint, Rights::READ)?;
            let info = MsgInfo(a.info).validate()?;
            ipc::check_sendable(&k.objects, c, info)?;
            IpcInvocation::ReplyRecv { ep: cap.object }
        }
        Sys::Signal => {
            let n = args::Signal::from_regs(regs).notification;
            let (_, cap) = lookup(k, c, n, ObjectType::Notification, Rights::WRITE)?;
            IpcInvocation::Signal {
                n: cap.object,
                badge: cap.badge,
            }
        }
        Sys::Wait | Sys::Poll => {
            let n = args::Signal::from_regs(regs).notification;
            let (_, cap) = lookup(k, c, n, ObjectType::Notification, Rights::READ)?;
            match sys {
                Sys::Wait => IpcInvocation::Wait { n: cap.object },
                _ => IpcInvocation::Poll { n: cap.object },
            }
        }
        _ => return Err(Error::UnknownSyscall),
    })
}

/// The message-passing and notification calls, as a pattern: the calls
/// [`decode_ipc`] decodes. One list for [`is_ipc`] and for the arm of
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

/// Whether `sys` is decoded by [`decode_ipc`].
#[inline(always)]
fn is_ipc(sys: Sys) -> bool {
    matches!(sys, ipc_calls!())
}

/// Decodes any other call of the caller `c` (borrowed from `k`).
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
        ipc_calls!() => Invocation::Ipc(decode_ipc(k, c, sys)?),
        Sys::CapCopy | Sys::CapMint => {
            let a = args::CapMint::from_regs(regs);
            let (src, cap) = full_slot(k, c, a.src)?;
            let dst = empty_slot(k, c, a.dst)?;
            if matches!(cap.kind, ObjectType::Untyped | ObjectType::Reply) {
                return Err(Error::InvalidArgument);
            }
            if sys == Sys::CapCopy {
                Invocation::CapCopy { src, dst, cap }
            } else {
                let rights = Rights::from_raw(a.rights).ok_or(Error::InvalidArgument)?;
                if !cap.rights.contains(rights) {
                    return Err(Error::MissingRights);
                }
                let badgeable = matches!(cap.kind, ObjectType::Endpoint | ObjectType::Notification);
                if cap.kind == ObjectType::IoPorts && a.badge != 0 {
                    // A sub-range (abi::object::io_ports_range) of the source's.
                    IoPortsCap::from_cap(&cap)
                        .and_then(|p| p.sub_range(a.badge))
                        .ok_or(Error::InvalidArgument)?;
                } else if a.badge != 0 && (!badgeable || cap.badge != 0) {
                    return Err(Error::InvalidArgument);
                }
                Invocation::CapMint {
                    src,
                    dst,
                    cap,
                    rights,
                    badge: a.badge,
                }
            }
        }
        Sys::CapDelete => {
            Invocation::CapDelete(full_slot(k, c, args::Slot::from_regs(regs).slot)?.0)
        }
        Sys::CapRevoke => {
            Invocation::CapRevoke(full_slot(k, c, args::Slot::from_regs(regs).slot)?.0)
        }
        Sys::Retype => decode_retype(k, c, args::Retype::from_regs(regs))?,
        Sys::SaveReply => {
            let a = args::Slot::from_regs(regs);
            let dst = empty_slot(k, c, a.slot)?;
            crate::reply::check_save(c)?;
            Invocation::SaveReply(dst)
        }
        Sys::ReplyTo => {
            let a = args::Send::from_regs(regs);
            let (slot, cap) = lookup(k, c, a.cap, ObjectType::Reply, Rights::WRITE)?;
            let info = MsgInfo(a.info).validate()?;
            ipc::check_sendable(&k.objects, c, info)?;
            let caller = crate::reply::target(&cap)?;
            Invocation::ReplyTo { slot, caller }
        }
        Sys::Map => {
            let a = args::Map::from_regs(regs);
            let (_, space) = lookup(k, c, a.vspace, ObjectType::AddressSpace, Rights::WRITE)?;
            let (frame, fcap) = full_slot(k, c, a.frame)?;
            let fview = FrameCap::from_cap(&fcap).ok_or(Error::WrongObjectType)?;
            let attr = MapAttr::from_raw(a.attr).ok_or(Error::InvalidArgument)?;
            let mut need = Rights::READ;
            if attr.writable {
                need = need.union(Rights::WRITE);
            }
            if attr.executable {
                need = need.union(Rights::GRANT);
            }
            if !fcap.rights.contains(need) {
                return Err(Error::MissingRights);
            }
            let size = vspace::frame_size(fcap.kind).bytes();
            // Never the lowest 64 KiB nor the last page below the canonical
            // boundary (abi::map::USER_MAP_START/END say why).
            if a.vaddr % size != 0 || !abi::map::user_mappable(a.vaddr, size) {
                return Err(Error::InvalidArgument);
            }
            if fview.mapping.is_some() {
                return Err(Error::InvalidState);
            }
            Invocation::Map {
                space: space.object,
                frame,
                vaddr: a.vaddr,
                attr,
            }
        }
        Sys::Unmap => {
            let a = args::Slot::from_regs(regs);
            let (frame, fcap) = full_slot(k, c, a.slot)?;
            let fview = FrameCap::from_cap(&fcap).ok_or(Error::WrongObjectType)?;
            if fview.mapping.is_none() {
                return Err(Error::NotMapped);
            }
            Invocation::Unmap(frame)
        }
        Sys::ThreadConfigure => {
            let a = args::ThreadConfigure::from_regs(regs);
            let target = thread_cap(k, c, a.thread, Rights::WRITE)?;
            let (cspace, _) = lookup(k, c, a.cspace, ObjectType::CapTable, Rights::NONE)?;
            let (vspace, _) = lookup(k, c, a.vspace, ObjectType::AddressSpace, Rights::NONE)?;
            if a.ipc_buffer % abi::ipc_buffer::IPC_BUFFER_ALIGN != 0 || a.ipc_buffer >= USER_END {
                return Err(Error::InvalidArgument);
            }
            let fault = match a.fault_endpoint {
                abi::caddr::NULL_SLOT => None,
                addr => Some(lookup(k, c, addr, ObjectType::Endpoint, Rights::WRITE)?.0),
            };
            Invocation::ThreadConfigure {
                target,
                cspace,
                vspace,
                ipc_buffer: a.ipc_buffer,
                fault,
            }
        }
        Sys::ThreadSetSchedParams => {
            let a = args::ThreadSetSchedParams::from_regs(regs);
            let target = thread_cap(k, c, a.thread, Rights::WRITE)?;
            // The new set: the caller's (0), or a subset of it; it holds
            // the CPU, which is online (the caller's set holds only online
            // CPUs).
            let cpus = if a.cpus == 0 { c.cpus } else { a.cpus };
            if a.priority > u64::from(c.priority)
                || a.cpu >= crate::arch::cpu_count()
                || cpus & !c.cpus != 0
                || cpus & (1 << a.cpu) == 0
            {
                return Err(Error::InvalidArgument);
            }
            Invocation::ThreadSetSchedParams {
                target,
                priority: a.priority as u8,
                cpu: a.cpu as u8,
                cpus,
            }
        }
        Sys::CpuSet => Invocation::CpuSet,
        Sys::ThreadStart => {
            let a = args::ThreadStart::from_regs(regs);
            let target = thread_cap(k, c, a.thread, Rights::WRITE)?;
            let (rip, rsp) = (user_address(a.rip)?, user_address(a.rsp)?);
            let tt = k.threads.get(target);
            if !matches!(tt.state, State::Inactive | State::Suspended)
                || tt.page_table_root().is_none()
                || tt.cspace.cap.is_none()
            {
                return Err(Error::InvalidState);
            }
            Invocation::ThreadStart {
                target,
                rip,
                rsp,
                arg: a.arg,
            }
        }
        Sys::ThreadSuspend => Invocation::ThreadSuspend(thread_cap(
            k,
            c,
            args::Slot::from_regs(regs).slot,
            Rights::WRITE,
        )?),
        Sys::ThreadResume => {
            let a = args::Slot::from_regs(regs);
            let target = thread_cap(k, c, a.slot, Rights::WRITE)?;
            if k.threads.get(target).state != State::Suspended {
                return Err(Error::InvalidState);
            }
            Invocation::ThreadResume(target)
        }
        Sys::ThreadRegisters => {
            let a = args::ThreadRegisters::from_regs(regs);
            let write = match a.write {
                0 => false,
                1 => true,
                _ => return Err(Error::InvalidArgument),
            };
            let rights = if write { Rights::WRITE } else { Rights::READ };
            let target = thread_cap(k, c, a.thread, rights)?;
            // The caller's own frame is incomplete while it runs (see
            // arch::x86_64::syscall_entry): its registers are its own
            // business.
            if core::ptr::eq(target.as_ptr(), c) {
                return Err(Error::InvalidArgument);
            }
            let buffer = ipc::ipc_buffer_ptr(&k.objects, c, !write).ok_or(Error::BadAddress)?;
            if write {
                // SAFETY: the buffer holds REGISTER_COUNT words (checked
                // mapped by ipc_buffer_ptr, within one page).
                let (rip, rsp) =
                    unsafe { (buffer.add(reg::RIP).read(), buffer.add(reg::RSP).read()) };
                user_address(rip)?;
                user_address(rsp)?;
            }
            Invocation::ThreadRegisters {
                target,
                write,
                buffer,
            }
        }
        Sys::IrqBind => {
            let a = args::IrqBind::from_regs(regs);
            let (_, irq) = lookup(k, c, a.irq, ObjectType::IrqHandler, Rights::NONE)?;
            let (_, n) = lookup(
                k,
                c,
                a.notification,
                ObjectType::Notification,
                Rights::WRITE,
            )?;
            Invocation::IrqBind {
                line: irq.object,
                n: n.object,
                badge: n.badge,
            }
        }
        Sys::IrqAck => {
            let a = args::Slot::from_regs(regs);
            let (_, irq) = lookup(k, c, a.slot, ObjectType::IrqHandler, Rights::NONE)?;
            Invocation::IrqAck { line: irq.object }
        }
        Sys::IoPort => {
            let a = args::IoPort::from_regs(regs);
            let (_, ports) = lookup(k, c, a.ports, ObjectType::IoPorts, Rights::NONE)?;
            let write = match a.write {
                0 => false,
                1 => true,
                _ => return Err(Error::InvalidArgument),
            };
            let width = match a.width {
                1 | 2 | 4 => a.width,
                _ => return Err(Error::InvalidArgument),
            };
            let range = IoPortsCap::from_cap(&ports).ok_or(Error::InvalidArgument)?;
            if !range.covers(a.port, width) || a.value > u64::from(u32::MAX) {
                return Err(Error::InvalidArgument);
            }
            Invocation::IoPort {
                port: a.port as u16,
                write,
                width: width as u8,
                value: a.value as u32,
            }
        }
        Sys::BindNotification => {
            let a = args::BindNotification::from_regs(regs);
            let target = thread_cap(k, c, a.thread, Rights::WRITE)?;
            let n = match a.notification {
                abi::caddr::NULL_SLOT => None,
                addr => {
                    let (_, n) = lookup(k, c, addr, ObjectType::Notification, Rights::READ)?;
                    // SAFETY: the object of a notification capability.
                    let bound = unsafe { k.objects.notification(n.object) }.bound;
                    if k.threads.get(target).bound_notification != 0 || bound.is_some() {
                        return Err(Error::InvalidState);
                    }
                    Some(n.object)
                }
            };
            Invocation::BindNotification { target, n }
        }
    })
}

fn decode_retype(k: &Kernel, c: &Thread, a: args::Retype) -> Result<Invocation, Error> {
    let args::Retype {
        untyped,
        kind,
        size_bits,
        dst,
        count,
    } = a;
    let (uslot, ucap) = lookup(k, c, untyped, ObjectType::Untyped, Rights::WRITE)?;
    let ucap = UntypedCap::from_cap(&ucap).ok_or(Error::InvalidState)?;
    let kind = ObjectType::from_raw(kind).ok_or(Error::InvalidArgument)?;
    let object_bits = kind.object_bits(size_bits).ok_or(Error::InvalidArgument)?;
    if ucap.device && !kind.allowed_from_device_memory() {
        return Err(Error::InvalidArgument);
    }
    if count == 0 || count > RETYPE_MAX_COUNT {
        return Err(Error::InvalidArgument);
    }
    let dst = object::resolve_range(k, c, dst, count)?;
    // Every insertion into the derivation tree that perform makes, checked
    // here (a taken slot is `SlotOccupied`): once perform has made the first
    // object, nothing may fail.
    for i in 0..count {
        cap::check_insert_child(k, uslot, object::nth_slot(dst, i))?;
    }
    let ubits = ucap.size_bits;
    if object_bits > ubits {
        return Err(Error::OutOfMemory);
    }
    // Nothing made from this untyped is left: its memory is free again.
    let watermark = if cap::has_children(k, uslot)? {
        ucap.watermark
    } else {
        0
    };
    let align = 1u64 << object_bits;
    let offset = watermark.div_ceil(align) * align;
    let end = offset + (count << object_bits);
    if end > 1u64 << ubits {
        return Err(Error::OutOfMemory);
    }
    if kind == ObjectType::AddressSpace && (vspace::free_asids() as u64) < count {
        return Err(Error::OutOfMemory);
    }
    Ok(Invocation::Retype {
        untyped: uslot,
        kind,
        size_bits,
        offset,
        object_bits,
        dst,
        count,
    })
}

/// Performs a checked message-passing or notification call.
///
/// The endpoint and notification addresses in the invocation are the
/// objects of capabilities `decode_ipc` found in the caller's slots a
/// moment ago: live (`object.rs`, "Access").
#[inline(always)]
fn perform_ipc(
    k: &mut Kernel,
    invocation: IpcInvocation,
    caller: ThreadRef,
) -> Result<Outcome, Error> {
    match invocation {
        IpcInvocation::Send {
            ep,
            badge,
            grant,
            blocking,
        } => {
            // SAFETY: `ep` is live (see above).
            unsafe { ipc::send(k, caller, ep, badge, grant, SendKind::Send, blocking) }?;
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::Call { ep, badge, grant } => {
            // SAFETY: `ep` is live (see above).
            unsafe { ipc::send(k, caller, ep, badge, grant, SendKind::Call, true) }?;
            Ok(Outcome::Schedule)
        }
        IpcInvocation::Recv { ep, blocking } => {
            // SAFETY: `ep` is live (see above).
            unsafe { ipc::recv(k, caller, ep, blocking) }?;
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::Reply => {
            ipc::reply(k, caller)?;
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::ReplyRecv { ep } => {
            // No caller is not an error here: the first ReplyRecv of a
            // server loop has nobody to answer.
            let _ = ipc::reply(k, caller);
            // SAFETY: `ep` is live (see above; a reply destroys nothing).
            unsafe { ipc::recv(k, caller, ep, true) }?;
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::Signal { n, badge } => {
            // SAFETY: `n` is live (see above).
            unsafe { ipc::signal(k, n, badge) };
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::Wait { n } => {
            // SAFETY: `n` is live (see above).
            unsafe { ipc::wait(k, caller, n) };
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::Poll { n } => {
            // SAFETY: `n` is live (see above).
            let word = core::mem::take(&mut unsafe { k.objects.notification_mut(n) }.word);
            k.threads.get_mut(caller).frame().rdi = word;
            Ok(Outcome::Resume)
        }
    }
}

/// Performs a checked call. Object addresses in the invocation are the
/// objects of capabilities `decode` found in slots a moment ago: live
/// (`object.rs`, "Access"), also after a deletion earlier in the same
/// call (the memory stays the object until its untyped is reused).
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
        Invocation::Ipc(ipc) => perform_ipc(k, ipc, caller),
        Invocation::CapCopy { src, dst, cap } => {
            cap::copy(k, src, dst)?;
            object::add_ref(k, &cap);
            ipc::clear_mapping(k, dst);
            Ok(Outcome::Resume)
        }
        Invocation::CapMint {
            src,
            dst,
            cap,
            rights,
            badge,
        } => {
            cap::mint(k, src, dst, rights, badge)?;
            object::add_ref(k, &cap);
            ipc::clear_mapping(k, dst);
            Ok(Outcome::Resume)
        }
        Invocation::CapDelete(slot) => {
            object::delete_slot(k, slot)?;
            Ok(after_ipc(k, caller))
        }
        Invocation::CapRevoke(slot) => {
            object::revoke(k, slot)?;
            Ok(after_ipc(k, caller))
        }
        Invocation::Retype {
            untyped,
            kind,
            size_bits,
            offset,
            object_bits,
            dst,
            count,
        } => {
            let ucap = k.slot(untyped).cap.ok_or(Error::EmptySlot)?;
            let (rights, ucap) = (
                ucap.rights,
                UntypedCap::from_cap(&ucap).ok_or(Error::InvalidState)?,
            );
            let device = ucap.device;
            for i in 0..count {
                let phys = ucap.phys + offset + (i << object_bits);
                if !device {
                    // SAFETY: the range lies inside the untyped memory past
                    // its watermark (checked by decode): nothing uses it.
                    unsafe {
                        core::ptr::write_bytes(
                            crate::mm::phys_to_virt(phys) as *mut u8,
                            0,
                            1usize << object_bits,
                        )
                    };
                }
                // SAFETY: as above: fresh memory of the object's size,
                // aligned to it (decode aligned `offset`).
                unsafe { object::init_object(k, kind, phys, size_bits) };
                if kind == ObjectType::Thread {
                    // A new thread may use the CPUs of the thread that made it.
                    let cpus = k.threads.get(caller).cpus;
                    // SAFETY: a thread was just made at `phys`.
                    k.threads.get_mut(unsafe { object::thread_at(phys) }).cpus = cpus;
                }
                let new = object::new_cap(kind, phys, size_bits, object_bits, device);
                // Cannot fail: decode checked every insertion
                // (`cap::check_insert_child`), and nothing changed since.
                cap::insert_child(k, untyped, object::nth_slot(dst, i), new)?;
            }
            if let Some(u) = k.slot_mut(untyped).cap.as_mut() {
                *u = UntypedCap {
                    watermark: offset + (count << object_bits),
                    ..ucap
                }
                .to_cap(rights);
            }
            Ok(Outcome::Resume)
        }
        Invocation::Map {
            space,
            frame,
            vaddr,
            attr,
        } => {
            let fcap = k.slot(frame).cap.ok_or(Error::EmptySlot)?;
            let fview = FrameCap::from_cap(&fcap).ok_or(Error::WrongObjectType)?;
            // SAFETY: `space` is an address-space capability's object.
            let mapping = unsafe { vspace::map(&mut k.objects, space, &fview, vaddr, attr) }?;
            if let Some(f) = k.slot_mut(frame).cap.as_mut() {
                *f = FrameCap {
                    mapping: Some(mapping),
                    ..fview
                }
                .to_cap(f.rights);
            }
            Ok(Outcome::Resume)
        }
        Invocation::Unmap(frame) => {
            if let Some(f) = k.slot(frame).cap.as_ref().and_then(FrameCap::from_cap) {
                vspace::unmap_cap(&mut k.objects, &f);
            }
            ipc::clear_mapping(k, frame);
            Ok(Outcome::Resume)
        }
        Invocation::ThreadConfigure {
            target,
            cspace,
            vspace,
            ipc_buffer,
            fault,
        } => {
            let tt = k.threads.get(target);
            let own = [
                (object::slot_id(&tt.cspace), Some(cspace)),
                (object::slot_id(&tt.vspace), Some(vspace)),
                (object::slot_id(&tt.fault_endpoint), fault),
            ];
            // The old capabilities go first, but what goes with them (the
            // slots of a table whose last capability that was) only after
            // the copies: a source slot may lie in such a table, and must
            // still hold its capability when it is copied.
            let replaced = replace_own_slots(k, own);
            object::finish_deletions(k);
            replaced?;
            let tt = k.threads.get_mut(target);
            tt.ipc_buffer = ipc_buffer;
            tt.ipc_buffer_cache.set(Default::default());
            let (root, cpu) = (tt.page_table_root(), tt.cpu);
            if let Some(root) = root {
                // SAFETY: the thread's address space (its slot holds a
                // capability to it).
                unsafe { vspace::note_cpu(&mut k.objects, root, cpu) };
            }
            // Running on another CPU: its next system call there is checked.
            crate::smp::thread_changed(target.as_ptr());
            Ok(after_ipc(k, caller))
        }
        Invocation::ThreadSetSchedParams {
            target,
            priority,
            cpu,
            cpus,
        } => {
            k.threads.get_mut(target).cpus = cpus;
            Ok(set_sched_params(
                k,
                caller,
                target,
                priority,
                u32::from(cpu),
            ))
        }
        Invocation::CpuSet => {
            let c = k.threads.get_mut(caller);
            c.frame().rdi = c.cpus;
            Ok(Outcome::Resume)
        }
        Invocation::ThreadStart {
            target,
            rip,
            rsp,
            arg,
        } => {
            // First: a CPU still running it (stopped, not yet left) leaves
            // it, pushing its old registers into the frame.
            crate::arch::fpu::reset(&mut k.threads, target);
            *k.threads.get_mut(target).frame() = thread::initial_frame(rip, rsp, arg);
            thread::make_runnable(k, target);
            Ok(after_ipc(k, caller))
        }
        Invocation::ThreadSuspend(target) => {
            suspend(k, target);
            Ok(after_ipc(k, caller))
        }
        Invocation::ThreadResume(target) => {
            if crate::smp::current_elsewhere(target.as_ptr()) {
                // Stopped while it ran on another CPU, which has not left
                // it yet: it simply runs on (that CPU sees it moved, if it
                // was); queued, a second CPU could start it from its stale
                // frame while the first still runs it.
                thread::set_state(&mut k.threads, target, State::Running);
            } else {
                thread::make_runnable(k, target);
            }
            Ok(after_ipc(k, caller))
        }
        Invocation::ThreadRegisters {
            target,
            write,
            buffer,
        } => {
            // A thread running on another CPU: its frame is incomplete
            // too (see above), and that CPU may write it at any moment —
            // also when it was just stopped but that CPU has not left it.
            if k.threads.get(target).state == State::Running
                || crate::smp::current_elsewhere(target.as_ptr())
            {
                return Err(Error::InvalidState);
            }
            thread_registers(k.threads.get_mut(target), write, buffer);
            Ok(Outcome::Resume)
        }
        Invocation::IrqBind { line, n, badge } => {
            crate::irq::bind(line, n, badge)?;
            Ok(Outcome::Resume)
        }
        Invocation::IrqAck { line } => {
            crate::irq::ack(line)?;
            Ok(Outcome::Resume)
        }
        Invocation::IoPort {
            port,
            write,
            width,
            value,
        } => {
            k.threads.get_mut(caller).frame().rdi = crate::irq::io_port(port, write, width, value);
            Ok(Outcome::Resume)
        }
        Invocation::BindNotification { target, n } => {
            match n {
                Some(n) => {
                    k.threads.get_mut(target).bound_notification = n;
                    // SAFETY: a notification capability's object.
                    unsafe { k.objects.notification_mut(n) }.bound = Some(target);
                }
                None => {
                    let bound = core::mem::take(&mut k.threads.get_mut(target).bound_notification);
                    if bound != 0 {
                        // SAFETY: a thread's bound notification is live
                        // (destroying the notification unbinds it).
                        unsafe { k.objects.notification_mut(bound) }.bound = None;
                    }
                }
            }
            Ok(Outcome::Resume)
        }
        Invocation::SaveReply(dst) => {
            crate::reply::save(k, caller, dst)?;
            Ok(Outcome::Resume)
        }
        Invocation::ReplyTo { slot, caller: to } => {
            crate::reply::answer(k, caller, slot, to)?;
            Ok(after_ipc(k, caller))
        }
    }
}

/// `ThreadConfigure`: empties each of the thread's own slots (`dst`) and
/// copies `src` (if any) into it, without finishing the deletions (the
/// caller does, after): so the source slots, which decode checked full,
/// stay full, and the copies fail only on corrupt derivation links —
/// which the kcore::cap invariants rule out (then the slots before the
/// failing one are already replaced: the one place this call is not all
/// or nothing).
fn replace_own_slots(k: &mut Kernel, own: [(SlotId, Option<SlotId>); 3]) -> Result<(), Error> {
    for (dst, _) in own {
        if k.slot(dst).cap.is_some() {
            object::delete(k, dst)?;
        }
    }
    for (dst, src) in own {
        if let Some(src) = src {
            let cap = k.slot(src).cap.ok_or(Error::EmptySlot)?;
            cap::copy(k, src, dst)?;
            object::add_ref(k, &cap);
        }
    }
    Ok(())
}

/// `ThreadSetSchedParams`, out of line (rare; keeps the dispatcher lean).
#[inline(never)]
fn set_sched_params(
    k: &mut Kernel,
    caller: ThreadRef,
    target: ThreadRef,
    priority: u8,
    cpu: u32,
) -> Outcome {
    let queued = k.threads.get(target).state == State::Runnable;
    if queued {
        thread::remove_from_run_queue(k, target);
    }
    if k.threads.get(target).cpu != cpu {
        // Its FPU state is saved where it is live, before it can run on
        // the new CPU; the address space may be loaded there from now on.
        crate::arch::fpu::before_moving(&mut k.threads, target, cpu);
        thread::set_cpu(&mut k.threads, target, cpu);
        if let Some(root) = k.threads.get(target).page_table_root() {
            // SAFETY: the thread's address space (its slot holds a
            // capability to it).
            unsafe { vspace::note_cpu(&mut k.objects, root, cpu) };
        }
        // Running on another CPU: that CPU lets it go at once.
        if k.threads.get(target).state == State::Running && target != caller {
            crate::smp::reschedule_running(target.as_ptr());
        }
    }
    k.threads.get_mut(target).priority = priority;
    if queued {
        thread::make_runnable(k, target);
    }
    // The caller moved itself: it continues on its new CPU.
    if target == caller && cpu != crate::arch::percpu::this_cpu_index() {
        return Outcome::Yield;
    }
    after_ipc(k, caller)
}

/// After a call that may have woken or stopped threads: the caller goes on
/// if it can and nobody more important waits.
fn after_ipc(k: &Kernel, caller: ThreadRef) -> Outcome {
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

/// Stops a thread until `ThreadResume`. An IPC it waited in ends with
/// `Aborted` (a fault it waited to deliver is simply delivered again when
/// it resumes and retries the instruction).
pub fn suspend(k: &mut Kernel, target: ThreadRef) {
    let tt = k.threads.get(target);
    match tt.state {
        State::Inactive | State::Suspended => return,
        State::BlockedSend
        | State::BlockedRecv
        | State::BlockedReply
        | State::BlockedNotification => {
            let fault = (tt.state == State::BlockedSend && tt.send_kind == SendKind::Fault)
                || (tt.state == State::BlockedReply && tt.reply_is_fault);
            let exiting = tt.state == State::BlockedSend && tt.send_kind == SendKind::Exit;
            object::cancel_ipc(k, target);
            let tt = k.threads.get_mut(target);
            tt.reply_is_fault = false;
            if exiting {
                thread::set_state(&mut k.threads, target, State::Inactive);
                return;
            }
            if !fault {
                tt.frame().rax = Error::Aborted.raw();
            }
        }
        State::Runnable => thread::remove_from_run_queue(k, target),
        // Suspending oneself: the call succeeded when the thread resumes.
        // A thread running on another CPU: that CPU stops it at its next
        // entry, where its frame is completed — or already was, by an
        // interrupt that waits for the lock there: its `rax` is the
        // thread's own then, not a result, so it is left alone.
        State::Running => {
            if thread::current() == Some(target) {
                k.threads.get_mut(target).frame().rax = 0;
            } else {
                crate::smp::reschedule_running(target.as_ptr());
            }
        }
    }
    thread::set_state(&mut k.threads, target, State::Suspended);
}

fn thread_registers(target: &mut Thread, write: bool, buffer: *mut u64) {
    let f = target.frame();
    let fields: [&mut u64; reg::REGISTER_COUNT] = [
        &mut f.rip,
        &mut f.rsp,
        &mut f.rflags,
        &mut f.rax,
        &mut f.rbx,
        &mut f.rcx,
        &mut f.rdx,
        &mut f.rsi,
        &mut f.rdi,
        &mut f.rbp,
        &mut f.r8,
        &mut f.r9,
        &mut f.r10,
        &mut f.r11,
        &mut f.r12,
        &mut f.r13,
        &mut f.r14,
        &mut f.r15,
    ];
    for (i, field) in fields.into_iter().enumerate() {
        // SAFETY: `buffer` is the caller's mapped IPC buffer (checked by
        // decode; writable when reading registers into it), and
        // i < REGISTER_COUNT words fit in it.
        unsafe {
            if write {
                *field = buffer.add(i).read();
            } else {
                buffer.add(i).write(*field);
            }
        }
    }
    if write {
        f.rflags = (f.rflags & reg::USER_RFLAGS_MASK) | thread::USER_RFLAGS;
        // Return with iretq: sysretq would take rcx/r11 for rip/rflags.
        f.vector = 0;
        f.cs = u64::from(crate::arch::gdt::USER_CODE64);
        f.ss = u64::from(crate::arch::gdt::USER_DATA);
    }
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
        Some(sys) if is_ipc(sys) => decode_ipc(k, k.threads.get(caller), sys)
            .and_then(|invocation| perform_ipc(k, invocation, caller)),
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
