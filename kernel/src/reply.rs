//! Reply capabilities: a server answers a call (or a fault) later, after
//! receiving others.
//!
//! A thread has one reply slot (`Thread::caller`, see [`crate::ipc`]):
//! receiving a new call aborts an unanswered older one. `SaveReply` moves
//! that pending reply into an empty capability slot as a capability of
//! type `Reply`; the thread's own reply slot is then free, and the caller
//! stays `BlockedReply` until somebody answers through the capability with
//! `ReplyTo`, which uses it up (the slot is empty after).
//!
//! # The capability
//!
//! `kcore::typed::ReplyCap`: the caller's `Thread` (physical address) and
//! its thread id, rights `WRITE`. The caller links back to the slot
//! (`Thread::reply_slot`). Invariant: a reply capability with
//! `object != 0` names a live thread that is `BlockedReply` with
//! `reply_slot` = the capability's slot; with `object == 0` it is *stale*.
//!
//! - The caller stops waiting (destroyed, suspended): [`caller_gone`],
//!   called by `object::cancel_ipc`, marks the capability stale (it only
//!   rewrites that capability to `ReplyCap::STALE`: a reply capability has no
//!   derivation links, so no `kcore::cap` operation in progress holds it).
//!   `ReplyTo` through a stale capability fails with `Aborted` and changes
//!   nothing; the caller's memory is never read again, so it may already be
//!   reused.
//! - The capability goes unanswered (deleted, or its capability table
//!   destroyed — e.g. with the holder's whole capability space):
//!   [`removed`] (from `object::on_cap_removed`) ends the caller's wait as
//!   if its server had died: `Aborted`, or, for a fault, the thread stays
//!   stopped.
//! - `CapRevoke` on a reply capability revokes its children, of which it has
//!   none: it stays.
//!
//! Reply capabilities are never copied, minted or sent in a message
//! (`CapCopy`/`CapMint` refuse them with `InvalidArgument`, a transfer
//! leaves them behind): the one capability is the one answer, so "answered
//! once" needs no counting and the back link always names the one slot.
//! Threads that share a capability space (a server and its helper threads)
//! can all answer through it, which is what delegation inside one component
//! needs; handing a client's reply to another component is not a thing a
//! server should be able to do behind its client's back.

use abi::{Error, ObjectType, Rights};
use kcore::cap::{self, Capability, SlotId};
use kcore::typed::ReplyCap;

use crate::ipc;
use crate::object;
use crate::syscall::{after_ipc, empty_slot, lookup, Outcome};
use crate::thread::{Thread, ThreadRef};
use crate::token::Kernel;
use abi::args::{self, Args};
use abi::{MsgInfo, Sys};

/// `SaveReply`: whether `server` has a reply to save (decode's check).
pub fn check_save(server: &Thread) -> Result<(), Error> {
    if server.caller.is_none() {
        return Err(Error::NoCaller);
    }
    Ok(())
}

/// `SaveReply`: moves `server`'s pending reply into the empty slot `dst`
/// (decode checked both).
pub fn save(k: &mut Kernel, server: ThreadRef, dst: SlotId) -> Result<(), Error> {
    let c = k.threads.get(server).caller.ok_or(Error::NoCaller)?;
    let ct = k.threads.get(c);
    let cap = ReplyCap {
        thread: ct.object_phys(),
        thread_id: ct.id,
    }
    .to_cap(Rights::WRITE);
    cap::insert_root(k, dst, cap)?;
    k.threads.get_mut(server).caller = None;
    let ct = k.threads.get_mut(c);
    ct.reply_from = None;
    ct.reply_slot = dst.0;
    Ok(())
}

/// `ReplyTo`'s decode: the thread the reply capability `cap` answers;
/// `Aborted` if it is stale. `cap` is a reply capability in a slot.
pub fn target(cap: &Capability) -> Result<ThreadRef, Error> {
    let reply = ReplyCap::from_cap(cap).ok_or(Error::WrongObjectType)?;
    if reply.is_stale() {
        return Err(Error::Aborted);
    }
    // SAFETY: a live (not stale) reply capability names a live thread
    // (module invariant).
    Ok(unsafe { object::thread_at(reply.thread) })
}

/// `ReplyTo`: `server` answers `caller` through the reply capability in
/// `slot` (decode checked it is live), which is used up.
pub fn answer(
    k: &mut Kernel,
    server: ThreadRef,
    slot: SlotId,
    caller: ThreadRef,
) -> Result<(), Error> {
    k.threads.get_mut(caller).reply_slot = 0;
    // Stale now, so its removal below aborts nobody.
    mark_stale(k, slot);
    ipc::answer(k, server, caller);
    object::delete_slot(k, slot)
}

fn mark_stale(k: &mut Kernel, slot: SlotId) {
    if let Some(c) = k.slot_mut(slot).cap.as_mut() {
        if c.kind == ObjectType::Reply {
            *c = ReplyCap::STALE.to_cap(c.rights);
        }
    }
}

/// `t` stops waiting for its reply other than by an answer (it is being
/// destroyed or suspended): its reply capability, if saved, goes stale.
pub fn caller_gone(k: &mut Kernel, t: ThreadRef) {
    let slot = core::mem::take(&mut k.threads.get_mut(t).reply_slot);
    if slot != 0 {
        mark_stale(k, SlotId(slot));
    }
}

/// A reply capability was removed from `slot` unanswered: its caller (if
/// it still waits) gets no answer.
pub fn removed(k: &mut Kernel, slot: SlotId, cap: &Capability) {
    let Some(reply) = ReplyCap::from_cap(cap).filter(|r| !r.is_stale()) else {
        return;
    };
    // SAFETY: a reply capability that is not stale names a live thread
    // (module invariant; it was in a slot until now).
    let c = unsafe { object::thread_at(reply.thread) };
    let ct = k.threads.get_mut(c);
    // Always true by the module invariant; checked because a wrong guess
    // here would wake an unrelated thread.
    if ct.id == reply.thread_id && ct.reply_slot == slot.0 {
        ct.reply_slot = 0;
        object::no_reply(k, c);
    }
}

// ---------------------------------------------------------------------------
// System calls: decode and perform; `syscall` dispatches here.
// ---------------------------------------------------------------------------

/// A checked call of `SaveReply`, `ReplyTo`, ready to perform.
#[derive(Debug)]
pub enum Call {
    SaveReply(SlotId),
    ReplyTo { slot: SlotId, caller: ThreadRef },
}

/// Decodes `SaveReply`, `ReplyTo` (`sys`, with the argument registers `regs`)
/// of the caller `c` (borrowed from `k`): checks everything, changes nothing.
#[inline(always)]
pub fn decode(k: &Kernel, c: &Thread, sys: Sys, regs: [u64; 6]) -> Result<Call, Error> {
    Ok(match sys {
        Sys::SaveReply => {
            let a = args::Slot::from_regs(regs);
            let dst = empty_slot(k, c, a.slot)?;
            crate::reply::check_save(c)?;
            Call::SaveReply(dst)
        }
        Sys::ReplyTo => {
            let a = args::Send::from_regs(regs);
            let (slot, cap) = lookup(k, c, a.cap, ObjectType::Reply, Rights::WRITE)?;
            let info = MsgInfo(a.info).validate()?;
            ipc::check_sendable(&k.objects, c, info)?;
            let caller = crate::reply::target(&cap)?;
            Call::ReplyTo { slot, caller }
        }
        _ => return Err(Error::UnknownSyscall),
    })
}

/// Performs a checked call of `SaveReply`, `ReplyTo`. Object addresses in it
/// are the objects of capabilities `decode` found in slots a moment ago: live
/// (`object.rs`, "Access").
pub fn perform(k: &mut Kernel, call: Call, caller: ThreadRef) -> Result<Outcome, Error> {
    match call {
        Call::SaveReply(dst) => {
            crate::reply::save(k, caller, dst)?;
            Ok(Outcome::Resume)
        }
        Call::ReplyTo { slot, caller: to } => {
            crate::reply::answer(k, caller, slot, to)?;
            Ok(after_ipc(k, caller))
        }
    }
}
