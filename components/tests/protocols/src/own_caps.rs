//! Probing the own-capability slots a parent may grant a component
//! (`interfaces::child::OWN_THREAD`, `OWN_CSPACE`, `OWN_VSPACE`: the
//! `+own` marker of `pecan.start=`, the `own` key of a scenario) — by
//! using each capability once, so that a probe tells a held and working
//! capability from an empty slot.
//!
//! `test-caps` checks with it that it holds exactly what its argument
//! says, `hello` (argument 4) reports what it holds: together they show
//! that authority follows the start entry, not the component's name.

use rt::abi::caddr::{in_table, own};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{Error, ObjectType};
use rt::interfaces::child::{self, OwnCaps};
use rt::syscall;

/// Where [`probe`] maps a frame through the own address space: far below
/// the stack, above the image.
pub const PAGE: u64 = 0x0000_0010_0000_0000;

/// What a probe found in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The capability is there and did its job.
    Held,
    /// The slot is empty.
    Empty,
}

/// A probe that went wrong: the step and the kernel's error.
pub type Failed = (&'static str, Error);

/// Probes the slot of `kind` (one of [`OwnCaps::KINDS`]), with `scratch`
/// an empty slot of the caller's (empty again afterwards):
///
/// 1. copies the slot to `scratch`: `EmptySlot` means [`Slot::Empty`];
///    the copy is deleted again;
/// 2. uses it: the thread — sets its own priority to
///    `child::PRIORITY` on CPU 0, where its parent started it (so this
///    changes nothing; a component started elsewhere must not probe it);
///    the capability space — copies the service endpoint into `scratch`
///    through it and finds the copy in its own slot `scratch`; the address
///    space — maps a fresh frame at [`PAGE`] through it, writes and reads
///    it back, unmaps and deletes it.
///
/// Each use succeeds only with the component's own object.
pub fn probe(kind: OwnCaps, scratch: u32) -> Result<Slot, Failed> {
    let Some(&(_, _, slot)) = OwnCaps::KINDS.iter().find(|(_, k, _)| *k == kind) else {
        return Err(("probe", Error::InvalidArgument));
    };
    match syscall::cap_copy(own(slot), own(scratch)) {
        Err(Error::EmptySlot) => return Ok(Slot::Empty),
        Err(e) => return Err(("CapCopy", e)),
        Ok(()) => delete(scratch)?,
    }
    if kind == OwnCaps::THREAD {
        syscall::thread_set_sched_params(own(slot), child::PRIORITY, 0)
            .map_err(|e| ("ThreadSetSchedParams", e))?;
    } else if kind == OwnCaps::CSPACE {
        syscall::cap_copy(own(child::SERVICE_ENDPOINT), in_table(slot, scratch))
            .map_err(|e| ("CapCopy through it", e))?;
        // Not found in its own slot: the table is another one.
        delete(scratch).map_err(|(_, e)| ("the copy in its own table", e))?;
    } else {
        use_vspace(slot, scratch)?;
    }
    Ok(Slot::Held)
}

/// Deletes the caller's capability at `slot`.
fn delete(slot: u32) -> Result<(), Failed> {
    // SAFETY: `slot` holds a copy of a thread, table, address space or
    // endpoint capability, or a frame that is unmapped: deleting it
    // unmaps none of the caller's memory and destroys no object the
    // caller still uses (the original capability stays).
    unsafe { syscall::cap_delete(own(slot)) }.map_err(|e| ("CapDelete", e))
}

/// Maps a fresh frame at [`PAGE`] through the address space at `slot`,
/// writes and reads it back, unmaps and deletes it.
fn use_vspace(slot: u32, scratch: u32) -> Result<(), Failed> {
    syscall::retype(own(child::UNTYPED), ObjectType::Frame4K, 0, own(scratch), 1)
        .map_err(|e| ("Retype", e))?;
    let rw = MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    };
    // SAFETY: nothing of the component lives at PAGE (its image is at
    // 0x200000, its stack and IPC buffer near the top of the user half).
    unsafe { syscall::map(own(slot), own(scratch), PAGE, rw) }.map_err(|e| ("Map", e))?;
    // SAFETY: one page is mapped writable at PAGE, used only here.
    let value = unsafe {
        core::ptr::write_volatile(PAGE as *mut u64, 0x5eed);
        core::ptr::read_volatile(PAGE as *const u64)
    };
    // SAFETY: the frame was mapped at PAGE just now and nothing refers to
    // it any more.
    unsafe { syscall::unmap(own(scratch)) }.map_err(|e| ("Unmap", e))?;
    delete(scratch)?;
    if value == 0x5eed {
        Ok(())
    } else {
        Err(("the page written through it", Error::InvalidState))
    }
}
