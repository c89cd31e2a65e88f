//! Untyped memory: `Retype`, which makes objects from it.
//!
//! An untyped capability ([`kcore::typed::UntypedCap`]) records its size,
//! whether it is device memory, and its watermark: objects are made
//! size-aligned past the watermark, and the watermark goes back to 0 when
//! nothing made from the untyped is left.

use abi::args::{self, Args};
use abi::{Error, ObjectType, Rights, Sys};
use kcore::cap::{self, SlotId};
use kcore::typed::UntypedCap;

use crate::object;
use crate::syscall::{lookup, Outcome};
use crate::thread::{Thread, ThreadRef};
use crate::token::Kernel;
use crate::vspace;

/// Most objects one `Retype` makes.
pub const RETYPE_MAX_COUNT: u64 = 256;

// ---------------------------------------------------------------------------
// System calls: decode and perform; `syscall` dispatches here.
// ---------------------------------------------------------------------------

/// A checked call of `Retype`, ready to perform.
#[derive(Debug)]
pub enum Call {
    Retype {
        untyped: SlotId,
        kind: ObjectType,
        size_bits: u64,
        offset: u64,
        object_bits: u32,
        dst: SlotId,
        count: u64,
    },
}

/// Decodes `Retype` (`sys`, with the argument registers `regs`) of the
/// caller `c` (borrowed from `k`): checks everything, changes nothing.
#[inline(always)]
pub fn decode(k: &Kernel, c: &Thread, sys: Sys, regs: [u64; 6]) -> Result<Call, Error> {
    Ok(match sys {
        Sys::Retype => decode_retype(k, c, args::Retype::from_regs(regs))?,
        _ => return Err(Error::UnknownSyscall),
    })
}

/// Performs a checked call of `Retype`. Object addresses in it are the
/// objects of capabilities `decode` found in slots a moment ago: live
/// (`object.rs`, "Access").
pub fn perform(k: &mut Kernel, call: Call, caller: ThreadRef) -> Result<Outcome, Error> {
    match call {
        Call::Retype {
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
    }
}

fn decode_retype(k: &Kernel, c: &Thread, a: args::Retype) -> Result<Call, Error> {
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
    // here (a taken slot is `SlotOccupied`), so that nothing fails once
    // perform has made the first object: `cap::check_insert_child` for the
    // first (the untyped and the head of its child list, which are the
    // same for every insertion: see its doc), emptiness for the others
    // (all are slots: `resolve_range`).
    cap::check_insert_child(k, uslot, dst)?;
    for i in 1..count {
        if k.slot(object::nth_slot(dst, i)).cap.is_some() {
            return Err(Error::SlotOccupied);
        }
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
    if matches!(kind, ObjectType::Vcpu | ObjectType::GuestSpace) && !crate::arch::svm::available() {
        return Err(Error::Unsupported);
    }
    if matches!(kind, ObjectType::AddressSpace | ObjectType::GuestSpace)
        && (vspace::free_asids() as u64) < count
    {
        return Err(Error::OutOfMemory);
    }
    Ok(Call::Retype {
        untyped: uslot,
        kind,
        size_bits,
        offset,
        object_bits,
        dst,
        count,
    })
}
