//! Synchronous IPC through endpoints, notifications, and the fast path.
//!
//! # Endpoints
//!
//! An endpoint has one queue, holding either waiting senders or waiting
//! receivers (its `state` says which). A sender that finds a receiver hands
//! its message over at once; otherwise it waits in the queue, its message
//! still in its saved registers (or, for a fault or exit report, in
//! `Thread::kernel_msg`), until a receiver takes it. A `Call` (and a fault)
//! leaves the sender `BlockedReply`, linked to the receiver through
//! `caller`/`reply_from`: the receiver's next `Reply` (or `ReplyRecv`)
//! answers it. A thread has one such reply slot: receiving a new call while
//! an older one is unanswered aborts the older one (its caller gets
//! `Aborted`, or, for a fault, stays stopped). `SaveReply` moves the
//! pending reply out of that slot into a reply capability, answered later
//! with `ReplyTo` (`crate::reply`).
//!
//! # Transfer
//!
//! The receiver gets `rdi` = the badge of the capability the sender used,
//! `rsi` = the message info, `rdx, r10, r8, r9` = words 0..4. Words 4..len
//! are copied from the sender's IPC buffer to the receiver's, and a
//! capability named in the sender's buffer is copied (derived) into the slot
//! the receiver's buffer names. Anything that cannot be done (no buffer, a
//! bad slot) shortens what arrives, and the info the receiver gets says
//! exactly what did: length 4 without buffers, caps 0 without a capability.
//!
//! # Fast path
//!
//! `Call` and `ReplyRecv` between threads on one CPU, with a register-only
//! message, a partner waiting and nobody more important runnable, are done
//! by the assembly fast path in `arch::x86_64::syscall_entry` before the
//! system call reaches Rust: it does exactly what [`send`] (with
//! `set_caller`) and [`reply`] then [`recv`] do here, for the cases it
//! takes, and switches straight to the partner. Everything else comes
//! here. Both paths must give the same result; the scenario tests exercise
//! both (root's checks use long messages, capabilities, faults, bound
//! notifications and priorities, which all take this path), and compare
//! them: with the kernel option `pecan.fastpath=off` every `Call` and
//! `ReplyRecv` comes here (`percpu::disable_fast_path`), and
//! `tests/*-slowpath.toml` expect the same output as the tests they copy
//! (docs/testing.md).

use abi::ipc_buffer::{RECV_SLOT_OFFSET, SEND_CAP_OFFSET};
use abi::{Error, MsgInfo, ObjectType, LABEL_NOTIFICATION, REGISTER_MESSAGE_WORDS};
use kcore::cap;
use kcore::typed::FrameCap;

use crate::object::{self, Access, EndpointState};
use crate::syscall::{after_ipc, lookup, Outcome};
use crate::thread::{self, Queue, SendKind, State, Thread, ThreadRef};
use crate::token::{Kernel, Objects};
use crate::{mm, vspace};
use abi::args::{self, Args};
use abi::{Rights, Sys};

/// The start of a thread's IPC buffer in the kernel's direct map, if the
/// thread has one that is mapped (writable, when `write`).
///
/// The translation is kept in the thread (`thread::IpcBufferCache`) and
/// used again while the address space has unmapped nothing since.
pub fn ipc_buffer_ptr(objects: &Objects, thread: &Thread, write: bool) -> Option<*mut u64> {
    if thread.ipc_buffer == 0 {
        return None;
    }
    let root = thread.page_table_root()?;
    // SAFETY: a thread's address space (its address-space slot holds a
    // capability to it) is live.
    let unmaps = unsafe { vspace::header(objects, root) }.unmaps;
    let kept = thread.ipc_buffer_cache.get();
    if kept.root == root && kept.va == thread.ipc_buffer && kept.unmaps == unmaps {
        return (kept.writable || !write).then_some(kept.kernel_ptr as *mut u64);
    }
    let tr = mm::translate(root, thread.ipc_buffer)?;
    if !tr.flags.user || !mm::is_direct_mapped(tr.phys) {
        return None;
    }
    // The buffer is IPC_BUFFER_ALIGN-aligned, so it lies within this page.
    let kernel_ptr = mm::phys_to_virt(tr.phys);
    thread.ipc_buffer_cache.set(thread::IpcBufferCache {
        va: thread.ipc_buffer,
        root,
        unmaps,
        kernel_ptr,
        writable: tr.flags.writable,
    });
    (tr.flags.writable || !write).then_some(kernel_ptr as *mut u64)
}

/// Whether `thread` can send a message of `info` (a long one needs a
/// readable IPC buffer).
pub fn check_sendable(objects: &Objects, thread: &Thread, info: MsgInfo) -> Result<(), Error> {
    if (info.length() > REGISTER_MESSAGE_WORDS || info.caps() > 0)
        && ipc_buffer_ptr(objects, thread, false).is_none()
    {
        return Err(Error::BadAddress);
    }
    Ok(())
}

/// Copies a message from `s` to `r` (see the module doc) and sets `r`'s
/// result registers.
fn transfer(k: &mut Kernel, s: ThreadRef, r: ThreadRef, badge: u64, grant: bool, kind: SendKind) {
    let sender = k.threads.get(s);
    let (info, words) = match kind {
        SendKind::Fault | SendKind::Exit => {
            let m = sender.kernel_msg;
            (
                MsgInfo(m[0] << 16 | REGISTER_MESSAGE_WORDS as u64),
                [m[1], m[2], m[3], m[4]],
            )
        }
        SendKind::Send | SendKind::Call => {
            let f = &sender.context.0;
            (MsgInfo(f.rsi), [f.rdx, f.r10, f.r8, f.r9])
        }
    };
    let mut length = info.length().min(abi::MAX_MESSAGE_WORDS);
    let mut caps = 0;
    if length > REGISTER_MESSAGE_WORDS || info.caps() > 0 {
        let src = ipc_buffer_ptr(&k.objects, k.threads.get(s), false);
        let dst = ipc_buffer_ptr(&k.objects, k.threads.get(r), true);
        match (src, dst) {
            (Some(src), Some(dst)) => {
                if length > REGISTER_MESSAGE_WORDS {
                    // SAFETY: both point at IPC buffers (IPC_BUFFER_SIZE
                    // bytes within one mapped RAM page each, checked by
                    // ipc_buffer); word indices < MAX_MESSAGE_WORDS stay in
                    // the buffer. The two may be the same page (a thread
                    // sending to itself through two names), hence `copy`.
                    unsafe {
                        core::ptr::copy(
                            src.add(REGISTER_MESSAGE_WORDS),
                            dst.add(REGISTER_MESSAGE_WORDS),
                            length - REGISTER_MESSAGE_WORDS,
                        )
                    };
                }
                if info.caps() > 0 && grant {
                    // SAFETY: offsets inside the buffers, as above.
                    let (send_cap, recv_slot) = unsafe {
                        (
                            src.add((SEND_CAP_OFFSET / 8) as usize).read(),
                            dst.add((RECV_SLOT_OFFSET / 8) as usize).read(),
                        )
                    };
                    if transfer_cap(k, s, r, send_cap, recv_slot).is_ok() {
                        caps = 1;
                    }
                }
            }
            _ => length = length.min(REGISTER_MESSAGE_WORDS),
        }
    }
    let f = k.threads.get_mut(r).frame();
    f.rax = 0;
    f.rdi = badge;
    f.rsi = MsgInfo(info.label() << 16 | (caps as u64) << 8 | length as u64).0;
    [f.rdx, f.r10, f.r8, f.r9] = words;
}

fn transfer_cap(
    k: &mut Kernel,
    s: ThreadRef,
    r: ThreadRef,
    send_cap: u64,
    recv_slot: u64,
) -> Result<(), Error> {
    if recv_slot == abi::caddr::NULL_SLOT {
        return Err(Error::InvalidSlot);
    }
    let src = object::resolve(k, k.threads.get(s), send_cap, Access::Read)?;
    let c = k.slot(src).cap.ok_or(Error::EmptySlot)?;
    // A reply capability is the one answer to its caller: never derived.
    if matches!(c.kind, ObjectType::Untyped | ObjectType::Reply) {
        return Err(Error::InvalidArgument);
    }
    let dst = object::resolve(k, k.threads.get(r), recv_slot, Access::Write)?;
    cap::copy(k, src, dst)?;
    object::add_ref(k, &c);
    clear_mapping(k, dst);
    Ok(())
}

/// A derived frame capability starts unmapped (one mapping per capability).
pub fn clear_mapping(k: &mut Kernel, id: kcore::cap::SlotId) {
    if let Some(c) = k.slot_mut(id).cap.as_mut() {
        if let Some(frame) = FrameCap::from_cap(c) {
            *c = FrameCap {
                mapping: None,
                ..frame
            }
            .to_cap(c.rights);
        }
    }
}

/// Links `caller` (blocked for a reply) to `server`. An older unanswered
/// caller of `server` is aborted.
fn set_caller(k: &mut Kernel, server: ThreadRef, caller: ThreadRef, is_fault: bool) {
    object::abandon_caller(k, server);
    k.threads.get_mut(server).caller = Some(caller);
    let c = k.threads.get_mut(caller);
    c.reply_from = Some(server);
    c.reply_is_fault = is_fault;
    thread::set_state(&mut k.threads, caller, State::BlockedReply);
}

/// What happens to the sender once its message was taken.
fn after_sent(k: &mut Kernel, sender: ThreadRef, receiver: ThreadRef, kind: SendKind) {
    match kind {
        SendKind::Send => {}
        SendKind::Call => set_caller(k, receiver, sender, false),
        SendKind::Fault => set_caller(k, receiver, sender, true),
        SendKind::Exit => thread::set_state(&mut k.threads, sender, State::Inactive),
    }
}

/// `sender` sends on the endpoint at `ep_phys`. When nobody receives and
/// `blocking`, the sender waits in the queue (its state says so).
///
/// # Safety
/// `ep_phys` names a live endpoint (`object.rs`, "Access").
pub unsafe fn send(
    k: &mut Kernel,
    sender: ThreadRef,
    ep_phys: u64,
    badge: u64,
    grant: bool,
    kind: SendKind,
    blocking: bool,
) -> Result<(), Error> {
    trace!(event(
        &k.threads,
        sender,
        formats::trace::Kind::Send,
        [
            ep_phys,
            badge,
            crate::trace::send_kind(kind),
            crate::trace::label(&k.threads, sender, kind)
        ]
    ));
    // SAFETY: the caller's promise.
    let ep = unsafe { k.objects.endpoint_mut(ep_phys) };
    if ep.state == EndpointState::Recv {
        if let Some(r) = ep.queue.pop_front(&mut k.threads) {
            if ep.queue.is_empty() {
                ep.state = EndpointState::Idle;
            }
            trace!(received(&k.threads, r, sender, badge, kind));
            transfer(k, sender, r, badge, grant, kind);
            after_sent(k, sender, r, kind);
            thread::make_runnable(k, r);
            return Ok(());
        }
    }
    if !blocking {
        return Err(Error::WouldBlock);
    }
    let s = k.threads.get_mut(sender);
    s.send_badge = badge;
    s.send_grant = grant;
    s.send_kind = kind;
    thread::set_state(&mut k.threads, sender, State::BlockedSend);
    // SAFETY: the caller's promise.
    let ep = unsafe { k.objects.endpoint_mut(ep_phys) };
    ep.queue
        .push_back(&mut k.threads, sender, Queue::Object(ep_phys));
    ep.state = EndpointState::Send;
    Ok(())
}

/// `receiver` receives on the endpoint at `ep_phys` (or gets its bound
/// notification's word first).
///
/// # Safety
/// `ep_phys` names a live endpoint (`object.rs`, "Access").
pub unsafe fn recv(
    k: &mut Kernel,
    receiver: ThreadRef,
    ep_phys: u64,
    blocking: bool,
) -> Result<(), Error> {
    let bound = k.threads.get(receiver).bound_notification;
    if bound != 0 {
        // SAFETY: a thread's bound notification is live (destroying the
        // notification unbinds it).
        let n = unsafe { k.objects.notification_mut(bound) };
        if n.word != 0 {
            let word = core::mem::take(&mut n.word);
            deliver_notification(k.threads.get_mut(receiver), word);
            return Ok(());
        }
    }
    // SAFETY: the caller's promise.
    let ep = unsafe { k.objects.endpoint_mut(ep_phys) };
    if ep.state == EndpointState::Send {
        if let Some(s) = ep.queue.pop_front(&mut k.threads) {
            if ep.queue.is_empty() {
                ep.state = EndpointState::Idle;
            }
            let st = k.threads.get(s);
            let (kind, badge, grant) = (st.send_kind, st.send_badge, st.send_grant);
            trace!(received(&k.threads, receiver, s, badge, kind));
            transfer(k, s, receiver, badge, grant, kind);
            after_sent(k, s, receiver, kind);
            if kind == SendKind::Send {
                k.threads.get_mut(s).frame().rax = 0;
                thread::make_runnable(k, s);
            }
            return Ok(());
        }
    }
    if !blocking {
        return Err(Error::WouldBlock);
    }
    thread::set_state(&mut k.threads, receiver, State::BlockedRecv);
    // The receiver's CPU serves this endpoint's calls on its fast path.
    let cpu = k.threads.get(receiver).cpu;
    // SAFETY: the caller's promise.
    let ep = unsafe { k.objects.endpoint_mut(ep_phys) };
    ep.queue
        .push_back(&mut k.threads, receiver, Queue::Object(ep_phys));
    ep.state = EndpointState::Recv;
    ep.fast_cpu = cpu as u8;
    Ok(())
}

/// `server` answers its current caller with the message in its registers.
pub fn reply(k: &mut Kernel, server: ThreadRef) -> Result<(), Error> {
    let c = k
        .threads
        .get_mut(server)
        .caller
        .take()
        .ok_or(Error::NoCaller)?;
    k.threads.get_mut(c).reply_from = None;
    answer(k, server, c);
    Ok(())
}

/// `server` answers `caller` (no longer linked to anybody: its reply was
/// taken from `server`'s reply slot or from a reply capability) with the
/// message in its registers, and `caller` runs again.
pub fn answer(k: &mut Kernel, server: ThreadRef, caller: ThreadRef) {
    trace!(replied(&k.threads, server, caller));
    let ct = k.threads.get_mut(caller);
    if ct.reply_is_fault {
        // The reply resumes the faulting instruction; its content is unused.
        ct.reply_is_fault = false;
    } else {
        transfer(k, server, caller, 0, true, SendKind::Send);
    }
    thread::make_runnable(k, caller);
}

fn deliver_notification(r: &mut Thread, word: u64) {
    let f = r.frame();
    f.rax = 0;
    f.rdi = word;
    f.rsi = LABEL_NOTIFICATION << 16;
    [f.rdx, f.r10, f.r8, f.r9] = [0; 4];
}

/// ORs `badge` (1 if 0) into the notification and wakes a waiter or the
/// bound thread if it is receiving.
///
/// # Safety
/// `n_phys` names a live notification (`object.rs`, "Access").
pub unsafe fn signal(k: &mut Kernel, n_phys: u64, badge: u64) {
    // SAFETY: the caller's promise.
    let n = unsafe { k.objects.notification_mut(n_phys) };
    let bits = if badge == 0 { 1 } else { badge };
    trace!(record(
        crate::trace::current_id(&k.threads),
        formats::trace::Kind::Signal,
        [n_phys, bits, 0, 0]
    ));
    if let Some(w) = n.waiters.pop_front(&mut k.threads) {
        let word = core::mem::take(&mut n.word) | bits;
        trace!(event(
            &k.threads,
            w,
            formats::trace::Kind::NotifyWake,
            [n_phys, word, 0, 0]
        ));
        let f = k.threads.get_mut(w).frame();
        f.rax = 0;
        f.rdi = word;
        thread::make_runnable(k, w);
        return;
    }
    if let Some(b) = n.bound {
        if k.threads.get(b).state == State::BlockedRecv {
            object::cancel_ipc(k, b);
            // SAFETY: the caller's promise.
            let n = unsafe { k.objects.notification_mut(n_phys) };
            let word = core::mem::take(&mut n.word) | bits;
            trace!(event(
                &k.threads,
                b,
                formats::trace::Kind::NotifyWake,
                [n_phys, word, 0, 0]
            ));
            deliver_notification(k.threads.get_mut(b), word);
            thread::make_runnable(k, b);
            return;
        }
    }
    // SAFETY: the caller's promise.
    unsafe { k.objects.notification_mut(n_phys) }.word |= bits;
}

/// `Wait`: returns the word at once if non-zero, else blocks.
///
/// # Safety
/// `n_phys` names a live notification (`object.rs`, "Access").
pub unsafe fn wait(k: &mut Kernel, waiter: ThreadRef, n_phys: u64) {
    // SAFETY: the caller's promise.
    let n = unsafe { k.objects.notification_mut(n_phys) };
    if n.word != 0 {
        k.threads.get_mut(waiter).frame().rdi = core::mem::take(&mut n.word);
        return;
    }
    thread::set_state(&mut k.threads, waiter, State::BlockedNotification);
    n.waiters
        .push_back(&mut k.threads, waiter, Queue::Object(n_phys));
}

// ---------------------------------------------------------------------------
// System calls: decode and perform (message passing and notifications;
// dispatched by `syscall`)
// ---------------------------------------------------------------------------

/// The message-passing and notification calls, checked: a small `Copy`
/// value of its own, so that these — the general path's most frequent
/// calls — are decoded and performed without building and moving the
/// large [`crate::syscall::Invocation`] (measured with `cargo xtask profile --annotate`:
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

/// Decodes a message-passing or notification call (`sys` is one of
/// them: [`is_ipc`]) of the caller `c` (borrowed from `k`).
#[inline(always)]
pub fn decode(k: &Kernel, c: &Thread, sys: Sys) -> Result<IpcInvocation, Error> {
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
            check_sendable(&k.objects, c, info)?;
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
            check_sendable(&k.objects, c, info)?;
            IpcInvocation::Reply
        }
        Sys::ReplyRecv => {
            let (_, cap) = lookup(k, c, a.cap, ObjectType::Endpoint, Rights::READ)?;
            let info = MsgInfo(a.info).validate()?;
            check_sendable(&k.objects, c, info)?;
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

/// Performs a checked message-passing or notification call.
///
/// The endpoint and notification addresses in the invocation are the
/// objects of capabilities `decode` found in the caller's slots a
/// moment ago: live (`object.rs`, "Access").
#[inline(always)]
pub fn perform(
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
            unsafe { send(k, caller, ep, badge, grant, SendKind::Send, blocking) }?;
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::Call { ep, badge, grant } => {
            // SAFETY: `ep` is live (see above).
            unsafe { send(k, caller, ep, badge, grant, SendKind::Call, true) }?;
            Ok(Outcome::Schedule)
        }
        IpcInvocation::Recv { ep, blocking } => {
            // SAFETY: `ep` is live (see above).
            unsafe { recv(k, caller, ep, blocking) }?;
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::Reply => {
            reply(k, caller)?;
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::ReplyRecv { ep } => {
            // No caller is not an error here: the first ReplyRecv of a
            // server loop has nobody to answer.
            let _ = reply(k, caller);
            // SAFETY: `ep` is live (see above; a reply destroys nothing).
            unsafe { recv(k, caller, ep, true) }?;
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::Signal { n, badge } => {
            // SAFETY: `n` is live (see above).
            unsafe { signal(k, n, badge) };
            Ok(after_ipc(k, caller))
        }
        IpcInvocation::Wait { n } => {
            // SAFETY: `n` is live (see above).
            unsafe { wait(k, caller, n) };
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
