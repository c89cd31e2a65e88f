//! Capability-table calls: `CapCopy`, `CapMint`, `CapDelete`,
//! `CapRevoke` — the derivation tree (`kcore::cap`) through a thread's
//! capability space (`object::resolve`) — and `Usage`, what is in use of
//! an untyped (its derivation subtree's watermarks) or a table (its full
//! slots).

use abi::args::{self, Args};
use abi::{Error, ObjectType, Rights, Sys};
use kcore::cap::{self, Capability, SlotId};
use kcore::typed::{CapTableCap, IoPortsCap};

use crate::ipc;
use crate::object;
use crate::syscall::{after_ipc, empty_slot, full_slot, Outcome};
use crate::thread::{Thread, ThreadRef};
use crate::token::Kernel;

// ---------------------------------------------------------------------------
// System calls: decode and perform; `syscall` dispatches here.
// ---------------------------------------------------------------------------

/// A checked call of `CapCopy`, `CapMint`, `CapDelete`, `CapRevoke`,
/// `Usage`, ready to perform.
#[derive(Debug)]
pub enum Call {
    Copy {
        src: SlotId,
        dst: SlotId,
        cap: Capability,
    },
    Mint {
        src: SlotId,
        dst: SlotId,
        cap: Capability,
        rights: Rights,
        badge: u64,
    },
    Delete(SlotId),
    Revoke(SlotId),
    /// `Usage` of an untyped or a capability table.
    Usage(SlotId, Capability),
}

/// Decodes `CapCopy`, `CapMint`, `CapDelete`, `CapRevoke` (`sys`, with the
/// argument registers `regs`) of the caller `c` (borrowed from `k`): checks
/// everything, changes nothing.
#[inline(always)]
pub fn decode(k: &Kernel, c: &Thread, sys: Sys, regs: [u64; 6]) -> Result<Call, Error> {
    Ok(match sys {
        Sys::CapCopy | Sys::CapMint => {
            let a = args::CapMint::from_regs(regs);
            let (src, cap) = full_slot(k, c, a.src)?;
            let dst = empty_slot(k, c, a.dst)?;
            if matches!(cap.kind, ObjectType::Untyped | ObjectType::Reply) {
                return Err(Error::InvalidArgument);
            }
            if sys == Sys::CapCopy {
                Call::Copy { src, dst, cap }
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
                Call::Mint {
                    src,
                    dst,
                    cap,
                    rights,
                    badge: a.badge,
                }
            }
        }
        Sys::CapDelete => Call::Delete(full_slot(k, c, args::Slot::from_regs(regs).slot)?.0),
        Sys::CapRevoke => Call::Revoke(full_slot(k, c, args::Slot::from_regs(regs).slot)?.0),
        Sys::Usage => {
            let (slot, cap) = full_slot(k, c, args::Slot::from_regs(regs).slot)?;
            if !matches!(cap.kind, ObjectType::Untyped | ObjectType::CapTable) {
                return Err(Error::WrongObjectType);
            }
            Call::Usage(slot, cap)
        }
        _ => return Err(Error::UnknownSyscall),
    })
}

/// Performs a checked call of `CapCopy`, `CapMint`, `CapDelete`, `CapRevoke`.
/// Object addresses in it are the objects of capabilities `decode` found in
/// slots a moment ago: live (`object.rs`, "Access").
pub fn perform(k: &mut Kernel, call: Call, caller: ThreadRef) -> Result<Outcome, Error> {
    match call {
        Call::Copy { src, dst, cap } => {
            cap::copy(k, src, dst)?;
            object::add_ref(k, &cap);
            ipc::clear_mapping(k, dst);
            Ok(Outcome::Resume)
        }
        Call::Mint {
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
        Call::Delete(slot) => {
            object::delete_slot(k, slot)?;
            Ok(after_ipc(k, caller))
        }
        Call::Revoke(slot) => {
            object::revoke(k, slot)?;
            Ok(after_ipc(k, caller))
        }
        Call::Usage(slot, cap) => {
            let (used, size) = match CapTableCap::from_cap(&cap) {
                Some(table) => (object::full_slots(k, table), table.slots.saturating_sub(1)),
                None => cap::untyped_in_use(k, slot)?.ok_or(Error::WrongObjectType)?,
            };
            let f = k.threads.get_mut(caller).frame();
            f.rdi = used;
            f.rsi = size;
            Ok(Outcome::Resume)
        }
    }
}
