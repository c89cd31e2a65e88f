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
//! `Aborted`, or, for a fault, stays stopped).
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
//! [`fastpath_call`] and [`fastpath_reply_recv`] run before the general
//! decoder for `Call` and `ReplyRecv`: a straight line of checks (register
//! message, own-space endpoint slot with the right, a partner waiting, no
//! higher-priority thread runnable, nothing else pending) and, when all
//! pass, a direct switch to the partner without touching any queue but the
//! endpoint's. Any failed check returns, and the general path does the same
//! thing the slow way. Both paths must give the same result; the scenario
//! tests exercise both.

use abi::ipc_buffer::{RECV_SLOT_OFFSET, SEND_CAP_OFFSET};
use abi::{Error, MsgInfo, ObjectType, Rights, LABEL_NOTIFICATION, REGISTER_MESSAGE_WORDS};
use kcore::cap;

use crate::mm;
use crate::object::{self, endpoint, notification, Access, EndpointState, KernelSlots};
use crate::thread::{self, t, Queue, SendKind, State, Thread, ThreadRef};

/// The start of a thread's IPC buffer in the kernel's direct map, if the
/// thread has one that is mapped (writable, when `write`).
pub fn ipc_buffer_ptr(thread: &Thread, write: bool) -> Option<*mut u64> {
    if thread.ipc_buffer == 0 {
        return None;
    }
    let root = thread.page_table_root()?;
    let tr = mm::translate(root, thread.ipc_buffer)?;
    if !tr.flags.user || (write && !tr.flags.writable) || !mm::is_direct_mapped(tr.phys) {
        return None;
    }
    // The buffer is IPC_BUFFER_ALIGN-aligned, so it lies within this page.
    Some(mm::phys_to_virt(tr.phys) as *mut u64)
}

/// Whether `thread` can send a message of `info` (a long one needs a
/// readable IPC buffer).
pub fn check_sendable(thread: &Thread, info: MsgInfo) -> Result<(), Error> {
    if (info.length() > REGISTER_MESSAGE_WORDS || info.caps() > 0)
        && ipc_buffer_ptr(thread, false).is_none()
    {
        return Err(Error::BadAddress);
    }
    Ok(())
}

/// Copies a message from `s` to `r` (see the module doc) and sets `r`'s
/// result registers.
fn transfer(s: &mut Thread, r: &mut Thread, badge: u64, grant: bool, kind: SendKind) {
    let (info, words) = match kind {
        SendKind::Fault | SendKind::Exit => {
            let m = s.kernel_msg;
            (
                MsgInfo(m[0] << 16 | REGISTER_MESSAGE_WORDS as u64),
                [m[1], m[2], m[3], m[4]],
            )
        }
        SendKind::Send | SendKind::Call => {
            let f = &s.context.0;
            (MsgInfo(f.rsi), [f.rdx, f.r10, f.r8, f.r9])
        }
    };
    let mut length = info.length().min(abi::MAX_MESSAGE_WORDS);
    let mut caps = 0;
    if length > REGISTER_MESSAGE_WORDS || info.caps() > 0 {
        let src = ipc_buffer_ptr(s, false);
        let dst = ipc_buffer_ptr(r, true);
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
                    if transfer_cap(s, r, send_cap, recv_slot).is_ok() {
                        caps = 1;
                    }
                }
            }
            _ => length = length.min(REGISTER_MESSAGE_WORDS),
        }
    }
    let f = r.frame();
    f.rax = 0;
    f.rdi = badge;
    f.rsi = MsgInfo(info.label() << 16 | (caps as u64) << 8 | length as u64).0;
    [f.rdx, f.r10, f.r8, f.r9] = words;
}

fn transfer_cap(s: &Thread, r: &Thread, send_cap: u64, recv_slot: u64) -> Result<(), Error> {
    if recv_slot == abi::caddr::NULL_SLOT {
        return Err(Error::InvalidSlot);
    }
    let src = object::resolve(s, send_cap, Access::Read)?;
    let c = object::slot(src).cap.ok_or(Error::EmptySlot)?;
    if c.kind == ObjectType::Untyped {
        return Err(Error::InvalidArgument);
    }
    let dst = object::resolve(r, recv_slot, Access::Write)?;
    cap::copy(&mut KernelSlots, src, dst)?;
    object::add_ref(&c);
    clear_mapping(dst);
    Ok(())
}

/// A derived frame capability starts unmapped (one mapping per capability).
pub fn clear_mapping(id: kcore::cap::SlotId) {
    if let Some(c) = object::slot(id).cap.as_mut() {
        if matches!(c.kind, ObjectType::Frame4K | ObjectType::Frame2M) {
            c.badge = 0;
            c.extra = 0;
        }
    }
}

/// Links `caller` (blocked for a reply) to `server`. An older unanswered
/// caller of `server` is aborted.
fn set_caller(server: ThreadRef, caller: ThreadRef, is_fault: bool) {
    object::abandon_caller(server);
    t!(server).caller = Some(caller);
    let c = t!(caller);
    c.reply_from = Some(server);
    c.reply_is_fault = is_fault;
    thread::set_state(caller, State::BlockedReply);
}

/// What happens to the sender once its message was taken.
fn after_sent(sender: ThreadRef, receiver: ThreadRef, kind: SendKind) {
    match kind {
        SendKind::Send => {}
        SendKind::Call => set_caller(receiver, sender, false),
        SendKind::Fault => set_caller(receiver, sender, true),
        SendKind::Exit => thread::set_state(sender, State::Inactive),
    }
}

/// `sender` sends on the endpoint at `ep_phys`. When nobody receives and
/// `blocking`, the sender waits in the queue (its state says so).
pub fn send(
    sender: ThreadRef,
    ep_phys: u64,
    badge: u64,
    grant: bool,
    kind: SendKind,
    blocking: bool,
) -> Result<(), Error> {
    let ep = endpoint(ep_phys);
    if ep.state == EndpointState::Recv {
        if let Some(r) = ep.queue.pop_front() {
            if ep.queue.is_empty() {
                ep.state = EndpointState::Idle;
            }
            transfer(t!(sender), t!(r), badge, grant, kind);
            after_sent(sender, r, kind);
            thread::make_runnable(r);
            return Ok(());
        }
    }
    if !blocking {
        return Err(Error::WouldBlock);
    }
    let s = t!(sender);
    s.send_badge = badge;
    s.send_grant = grant;
    s.send_kind = kind;
    thread::set_state(sender, State::BlockedSend);
    ep.queue.push_back(sender, Queue::Object(ep_phys));
    ep.state = EndpointState::Send;
    Ok(())
}

/// `receiver` receives on the endpoint at `ep_phys` (or gets its bound
/// notification's word first).
pub fn recv(receiver: ThreadRef, ep_phys: u64, blocking: bool) -> Result<(), Error> {
    let r = t!(receiver);
    if r.bound_notification != 0 {
        let n = notification(r.bound_notification);
        if n.word != 0 {
            let word = core::mem::take(&mut n.word);
            deliver_notification(r, word);
            return Ok(());
        }
    }
    let ep = endpoint(ep_phys);
    if ep.state == EndpointState::Send {
        if let Some(s) = ep.queue.pop_front() {
            if ep.queue.is_empty() {
                ep.state = EndpointState::Idle;
            }
            let st = t!(s);
            let kind = st.send_kind;
            transfer(st, r, st.send_badge, st.send_grant, kind);
            after_sent(s, receiver, kind);
            if kind == SendKind::Send {
                st.frame().rax = 0;
                thread::make_runnable(s);
            }
            return Ok(());
        }
    }
    if !blocking {
        return Err(Error::WouldBlock);
    }
    thread::set_state(receiver, State::BlockedRecv);
    ep.queue.push_back(receiver, Queue::Object(ep_phys));
    ep.state = EndpointState::Recv;
    Ok(())
}

/// `server` answers its current caller with the message in its registers.
pub fn reply(server: ThreadRef) -> Result<(), Error> {
    let s = t!(server);
    let c = s.caller.take().ok_or(Error::NoCaller)?;
    let ct = t!(c);
    ct.reply_from = None;
    if ct.reply_is_fault {
        // The reply resumes the faulting instruction; its content is unused.
        ct.reply_is_fault = false;
    } else {
        transfer(s, ct, 0, true, SendKind::Send);
    }
    thread::make_runnable(c);
    Ok(())
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
pub fn signal(n_phys: u64, badge: u64) {
    let n = notification(n_phys);
    let bits = if badge == 0 { 1 } else { badge };
    if let Some(w) = n.waiters.pop_front() {
        let word = core::mem::take(&mut n.word) | bits;
        let f = t!(w).frame();
        f.rax = 0;
        f.rdi = word;
        thread::make_runnable(w);
        return;
    }
    if let Some(b) = n.bound {
        if t!(b).state == State::BlockedRecv {
            object::cancel_ipc(b);
            let word = core::mem::take(&mut n.word) | bits;
            deliver_notification(t!(b), word);
            thread::make_runnable(b);
            return;
        }
    }
    n.word |= bits;
}

/// `Wait`: returns the word at once if non-zero, else blocks.
pub fn wait(waiter: ThreadRef, n_phys: u64) {
    let n = notification(n_phys);
    if n.word != 0 {
        t!(waiter).frame().rdi = core::mem::take(&mut n.word);
        return;
    }
    thread::set_state(waiter, State::BlockedNotification);
    n.waiters.push_back(waiter, Queue::Object(n_phys));
}

// ---------------------------------------------------------------------------
// Fast path
// ---------------------------------------------------------------------------

/// The endpoint capability at own-space slot `addr` with `rights`, without
/// the general resolver's error reporting (any oddity: `None`).
#[inline(always)]
fn fast_endpoint(thread: &Thread, addr: u64, rights: Rights) -> Option<kcore::cap::Capability> {
    let table = thread.cspace.cap?;
    // Table sizes are at most 2^16 (the kernel makes every table), so the
    // mask only keeps the shift defined. Index 0 wraps to u64::MAX and
    // fails, like every index past the end and every two-level address.
    let slots = 1u64 << (table.extra & 63);
    if addr.wrapping_sub(1) >= slots - 1 {
        return None;
    }
    let slot = object::slot(kcore::cap::SlotId(
        mm::phys_to_virt(table.object) + (addr << abi::object::SLOT_BYTES_BITS),
    ));
    let c = slot.cap?;
    (c.kind == ObjectType::Endpoint && c.rights.contains(rights)).then_some(c)
}

/// The registers of an IPC call, copied out of the saved context.
#[derive(Clone, Copy)]
struct MessageRegisters {
    rdi: u64,
    rsi: u64,
    rdx: u64,
    r10: u64,
    r8: u64,
    r9: u64,
}

#[inline(always)]
fn message_registers(thread: &Thread) -> MessageRegisters {
    let f = &thread.context.0;
    MessageRegisters {
        rdi: f.rdi,
        rsi: f.rsi,
        rdx: f.rdx,
        r10: f.r10,
        r8: f.r8,
        r9: f.r9,
    }
}

/// Sets a receiver's result registers to a register-only message.
#[inline(always)]
fn put_message(r: &mut Thread, badge: u64, m: &MessageRegisters) {
    let f = r.frame();
    f.rax = 0;
    f.rdi = badge;
    f.rsi = m.rsi;
    f.rdx = m.rdx;
    f.r10 = m.r10;
    f.r8 = m.r8;
    f.r9 = m.r9;
}

#[inline(always)]
fn short_message(info: u64) -> bool {
    info & 0xffff <= REGISTER_MESSAGE_WORDS as u64
}

/// `Call` when a receiver waits: hands the registers over, makes the
/// receiver this CPU's current thread ([`thread::enter`]) and returns it;
/// the entry code then loads its context. Returns `None` (nothing changed: take the
/// general path) when any condition fails.
pub fn fastpath_call(caller: ThreadRef) -> Option<ThreadRef> {
    let c = t!(caller);
    let frame = message_registers(c);
    if !short_message(frame.rsi) {
        return None;
    }
    let cap = fast_endpoint(c, frame.rdi, Rights::WRITE)?;
    let ep = endpoint(cap.object);
    if ep.state != EndpointState::Recv {
        return None;
    }
    let receiver = ep.queue.head?;
    let r = t!(receiver);
    let root = r.page_table_root()?;
    if r.caller.is_some() || r.cpu != c.cpu || thread::higher_priority_waiting(r.priority) {
        return None;
    }
    ep.queue.remove(receiver);
    if ep.queue.is_empty() {
        ep.state = EndpointState::Idle;
    }
    put_message(r, cap.badge, &frame);
    r.caller = Some(caller);
    c.reply_from = Some(receiver);
    c.reply_is_fault = false;
    c.state = State::BlockedReply; // live to live: the count is unchanged
    thread::enter(receiver, root);
    Some(receiver)
}

/// `ReplyRecv` when the caller waits for an ordinary reply and no sender
/// waits on the endpoint: answers, leaves the server receiving, makes the
/// caller current ([`thread::enter`]) and returns it. `None`: nothing
/// changed.
pub fn fastpath_reply_recv(server: ThreadRef) -> Option<ThreadRef> {
    let s = t!(server);
    let frame = message_registers(s);
    if !short_message(frame.rsi) {
        return None;
    }
    let caller = s.caller?;
    let cap = fast_endpoint(s, frame.rdi, Rights::READ)?;
    let ep = endpoint(cap.object);
    let c = t!(caller);
    let root = c.page_table_root()?;
    if ep.state == EndpointState::Send
        || c.reply_is_fault
        || c.cpu != s.cpu
        || (s.bound_notification != 0 && notification(s.bound_notification).word != 0)
        || thread::higher_priority_waiting(c.priority)
    {
        return None;
    }
    s.caller = None;
    c.reply_from = None;
    put_message(c, 0, &frame);
    s.state = State::BlockedRecv; // live to live
    ep.queue.push_back(server, Queue::Object(cap.object));
    ep.state = EndpointState::Recv;
    thread::enter(caller, root);
    Some(caller)
}
