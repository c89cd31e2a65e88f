//! Capability slots and the capability derivation tree (CDT).
//!
//! Every capability lives in a [`Slot`]. Slots live in kernel memory that the
//! kernel owns (capability tables, thread control blocks); this module only
//! sees them through [`SlotStore`], keyed by a system-wide [`SlotId`] (the
//! kernel uses the slot's address). Each slot is also a node of the CDT,
//! which records which capability was derived from which, so that
//! [`revoke`] can remove everything derived from a capability, transitively:
//! revoking an untyped-memory capability removes every object capability
//! retyped from it, revoking an endpoint capability removes every badged
//! copy minted from it.
//!
//! # Invariants
//!
//! These hold for every store that only the functions here have modified:
//!
//! 1. An empty slot (`cap == None`) is not in the tree: all four links are
//!    `None`. So "empty" and "detached" are the same thing.
//! 2. A non-empty slot with `parent == None` is a root. Roots are not linked
//!    to each other: their sibling links are `None`.
//! 3. A non-empty slot with `parent == Some(p)`: `p` is a non-empty slot and
//!    the slot is on `p`'s child list, which starts at `p.first_child` and
//!    follows `next_sibling`. The list is doubly linked: `a.next_sibling ==
//!    Some(b)` iff `b.prev_sibling == Some(a)`, the first child has no
//!    `prev_sibling`, and all members share the parent `p`.
//! 4. Following `parent` from any slot reaches a root: the tree has no
//!    cycles.
//!
//! New children go to the front of their parent's list (O(1) insertion), so
//! [`children`] yields the newest first.
//!
//! # Errors and atomicity
//!
//! Every operation checks its preconditions — that the caller-named slots
//! exist and are full or empty as needed, rights and badge rules, and that
//! the links it is about to rewrite are consistent — before it changes
//! anything; an error means the store is unchanged. [`revoke`] checks the
//! whole subtree before removing the first capability, so it too is all or
//! nothing. (This rests on [`SlotStore::get_mut`] returning a slot whenever
//! [`SlotStore::get`] does; a store that breaks that can see a partial update
//! reported as [`CapError::Corrupt`].)
//!
//! An id the caller named that is not a slot is [`CapError::NoSuchSlot`]; a
//! *link* that leads to a missing or empty slot, or that contradicts the
//! invariants, is [`CapError::Corrupt`]. The invariants make corruption
//! impossible as long as only these functions touch the links, but this code
//! runs in the kernel on a small stack, so it stays defensive: nothing
//! recurses, and every walk is bounded by [`SlotStore::capacity_hint`] (no
//! loop through distinct slots can be longer than the number of slots), so a
//! cycle ends in `Corrupt` rather than a hang.
//!
//! # Object lifetime
//!
//! [`delete`] and [`revoke`] report every capability they remove through an
//! `on_removed` callback, with the slot it was in. That is the kernel's hook to drop a reference to the
//! named object and destroy it when its last capability goes (the kernel
//! keeps the reference counts; this module does not). The callback runs while
//! the store is mutably borrowed, so it cannot touch slots itself: cleanup
//! that has to empty other slots (the contents of a capability table whose
//! last capability went) must be queued and done after the call returns.

use core::fmt;

use abi::{ObjectType, Rights};

use crate::typed::{IoPortsCap, UntypedCap};

/// The walk bound used when a store does not give a tighter
/// [`SlotStore::capacity_hint`]: more slots than a machine can hold, so it
/// never cuts a legitimate walk short, yet finite, so a cycle still ends.
pub const DEFAULT_CAPACITY_HINT: u64 = 1 << 32;

/// Identifies a slot anywhere in the system (the kernel uses the slot's
/// address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotId(pub u64);

impl fmt::Display for SlotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "slot {:#x}", self.0)
    }
}

/// What a capability names; opaque here except for `kind` (which decides
/// whether a badge may be minted), `rights` and `badge`.
///
/// `repr(C)` because the kernel's IPC fast path (assembly) reads `kind`,
/// `object`, `rights` and `badge` at fixed offsets; the kernel checks those
/// offsets, and how `Option<Capability>` encodes `None`, at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Capability {
    pub kind: ObjectType,
    /// The kernel puts the object's address here.
    pub object: u64,
    pub rights: Rights,
    /// Identifies the holder to the receiver of an endpoint or notification;
    /// 0 means unbadged.
    pub badge: u64,
    /// Type-specific, e.g. a frame's mapping.
    pub extra: u64,
}

impl Capability {
    /// An unbadged capability with no type-specific data.
    pub const fn new(kind: ObjectType, object: u64, rights: Rights) -> Self {
        Self {
            kind,
            object,
            rights,
            badge: 0,
            extra: 0,
        }
    }
}

/// A capability slot and its CDT links; the kernel's slot layout is exactly
/// this (`repr(C)`, `cap` first: the kernel's IPC fast path reads it). See
/// the module doc for the invariants on the links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Slot {
    pub cap: Option<Capability>,
    pub parent: Option<SlotId>,
    pub first_child: Option<SlotId>,
    pub next_sibling: Option<SlotId>,
    pub prev_sibling: Option<SlotId>,
}

impl Slot {
    pub const fn is_empty(&self) -> bool {
        self.cap.is_none()
    }

    /// Whether any link is set; an empty slot with links is corruption.
    const fn has_links(&self) -> bool {
        self.parent.is_some()
            || self.first_child.is_some()
            || self.next_sibling.is_some()
            || self.prev_sibling.is_some()
    }
}

/// Where the slots live. The kernel implements this over its own memory.
pub trait SlotStore {
    /// The slot `id`, or `None` if `id` names no slot.
    fn get(&self, id: SlotId) -> Option<&Slot>;

    /// Must return a slot exactly when [`get`](Self::get) does.
    fn get_mut(&mut self, id: SlotId) -> Option<&mut Slot>;

    /// An upper bound on the number of slots in the store. Walks give up
    /// with [`CapError::Corrupt`] after this many steps, so it must not be
    /// too small; a tight bound makes a corrupted store fail fast.
    fn capacity_hint(&self) -> u64 {
        DEFAULT_CAPACITY_HINT
    }
}

/// Why a capability operation was refused. The store is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapError {
    /// The caller named an id that is not a slot.
    NoSuchSlot(SlotId),
    /// The slot must hold a capability but is empty.
    Empty(SlotId),
    /// The slot must be empty but holds a capability.
    Occupied(SlotId),
    /// Mint asked for rights the source capability does not have.
    MissingRights,
    /// Mint asked for a badge the source capability cannot take.
    InvalidArgument,
    /// The CDT links are inconsistent (a cycle, a dangling or asymmetric
    /// link, or a walk longer than the store's capacity).
    Corrupt,
}

impl fmt::Display for CapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapError::NoSuchSlot(id) => write!(f, "{id} does not exist"),
            CapError::Empty(id) => write!(f, "{id} is empty"),
            CapError::Occupied(id) => write!(f, "{id} is occupied"),
            CapError::MissingRights => {
                f.write_str("requested rights are not a subset of the source capability's rights")
            }
            CapError::InvalidArgument => f.write_str(
                "a badge can only be set on an unbadged endpoint or notification capability",
            ),
            CapError::Corrupt => f.write_str("capability derivation tree links are inconsistent"),
        }
    }
}

impl core::error::Error for CapError {}

impl From<CapError> for abi::Error {
    fn from(e: CapError) -> Self {
        match e {
            CapError::NoSuchSlot(_) => abi::Error::InvalidSlot,
            CapError::Empty(_) => abi::Error::EmptySlot,
            CapError::Occupied(_) => abi::Error::SlotOccupied,
            CapError::MissingRights => abi::Error::MissingRights,
            CapError::InvalidArgument => abi::Error::InvalidArgument,
            CapError::Corrupt => abi::Error::InvalidState,
        }
    }
}

// ---------------------------------------------------------------------------
// Public operations
// ---------------------------------------------------------------------------

/// Puts `cap` into the empty slot `dst` as a root: it has no parent, so no
/// revoke but its own (of its descendants) reaches it. For the root task's
/// boot capabilities.
pub fn insert_root<S: SlotStore + ?Sized>(
    store: &mut S,
    dst: SlotId,
    cap: Capability,
) -> Result<(), CapError> {
    vacant(store, dst)?;
    write(store, dst, |s| {
        *s = Slot {
            cap: Some(cap),
            ..Slot::default()
        }
    })
}

/// Puts `cap` into the empty slot `dst` as the newest child of the full slot
/// `parent`. Retype uses it to make objects children of their untyped; copy
/// and mint use it to derive capabilities. `cap` is not checked against the
/// parent's: that is the caller's policy.
pub fn insert_child<S: SlotStore + ?Sized>(
    store: &mut S,
    parent: SlotId,
    dst: SlotId,
    cap: Capability,
) -> Result<(), CapError> {
    check_insert_child(store, parent, dst)?;
    let (p, _) = full(store, parent)?;
    write(store, dst, |s| {
        *s = Slot {
            cap: Some(cap),
            parent: Some(parent),
            first_child: None,
            next_sibling: p.first_child,
            prev_sibling: None,
        }
    })?;
    if let Some(first) = p.first_child {
        write(store, first, |s| s.prev_sibling = Some(dst))?;
    }
    write(store, parent, |s| s.first_child = Some(dst))
}

/// Whether [`insert_child`] into `dst` under `parent` would succeed (the
/// error it would return), without changing anything.
///
/// For a caller that must check before it acts (`Retype` initialises its
/// objects only once every insertion is known to succeed): inserting a
/// child changes nothing this checks for another slot — `parent` stays
/// full, the new child becomes a consistent head of its list — so when
/// this succeeds for each of several distinct empty slots, inserting into
/// all of them in turn succeeds too.
pub fn check_insert_child<S: SlotStore + ?Sized>(
    store: &S,
    parent: SlotId,
    dst: SlotId,
) -> Result<(), CapError> {
    let (p, _) = full(store, parent)?;
    vacant(store, dst)?;
    // The old first child becomes dst's next sibling; check it really is the
    // head of this list before pointing its prev link at dst.
    if let Some(first) = p.first_child {
        let f = linked(store, first)?;
        if f.parent != Some(parent) || f.prev_sibling.is_some() {
            return Err(CapError::Corrupt);
        }
    }
    Ok(())
}

/// Copies the capability in `src` into the empty slot `dst`, as a child of
/// `src` so that revoking `src` removes the copy.
pub fn copy<S: SlotStore + ?Sized>(
    store: &mut S,
    src: SlotId,
    dst: SlotId,
) -> Result<(), CapError> {
    let (_, cap) = full(store, src)?;
    insert_child(store, src, dst, cap)
}

/// Derives a capability from `src` into the empty slot `dst`, as a child of
/// `src`, with `rights` (which must be a subset of `src`'s, else
/// [`CapError::MissingRights`]) and `badge`. A non-zero `badge` may only be
/// set on an unbadged endpoint or notification capability (else
/// [`CapError::InvalidArgument`]): a badge identifies a sender, so letting a
/// holder re-badge would let it impersonate another. Badge 0 keeps `src`'s.
///
/// On an I/O-port capability ([`IoPortsCap`]) a non-zero `badge`
/// is instead a sub-range, `abi::object::io_ports_range(first, last)`:
/// the copy covers `first..=last`, which must lie inside the source's
/// range (else [`CapError::InvalidArgument`]) — how a driver gets exactly
/// its device's ports and nothing else.
pub fn mint<S: SlotStore + ?Sized>(
    store: &mut S,
    src: SlotId,
    dst: SlotId,
    rights: Rights,
    badge: u64,
) -> Result<(), CapError> {
    let (_, src_cap) = full(store, src)?;
    vacant(store, dst)?;
    if !src_cap.rights.contains(rights) {
        return Err(CapError::MissingRights);
    }
    if src_cap.kind == ObjectType::IoPorts && badge != 0 {
        let ports = IoPortsCap::from_cap(&src_cap)
            .and_then(|p| p.sub_range(badge))
            .ok_or(CapError::InvalidArgument)?;
        return insert_child(store, src, dst, ports.to_cap(rights));
    }
    let badge = if badge == 0 {
        src_cap.badge
    } else {
        let badgeable = matches!(
            src_cap.kind,
            ObjectType::Endpoint | ObjectType::Notification
        );
        if !badgeable || src_cap.badge != 0 {
            return Err(CapError::InvalidArgument);
        }
        badge
    };
    let cap = Capability {
        rights,
        badge,
        ..src_cap
    };
    insert_child(store, src, dst, cap)
}

/// Empties `slot` and reports the removed capability through `on_removed`.
/// Its children take its place in its parent's child list (or become roots
/// if it had no parent), so a later revoke of an ancestor still reaches them.
pub fn delete<S: SlotStore + ?Sized>(
    store: &mut S,
    slot: SlotId,
    mut on_removed: impl FnMut(SlotId, &Capability),
) -> Result<(), CapError> {
    let cap = remove(store, slot)?;
    on_removed(slot, &cap);
    Ok(())
}

/// Removes every descendant of `slot` (children, grandchildren, ...), keeping
/// `slot` itself; reports each removed capability through `on_removed`
/// exactly once and returns how many were removed.
///
/// Checks the whole subtree first, then repeatedly deletes the deepest first
/// child: each step is O(1) and needs no stack, so depth costs nothing but
/// time. Linear in the size of the subtree.
pub fn revoke<S: SlotStore + ?Sized>(
    store: &mut S,
    slot: SlotId,
    mut on_removed: impl FnMut(SlotId, &Capability),
) -> Result<usize, CapError> {
    full(store, slot)?;
    let total = check_subtree(store, slot)?;
    // Each descendant is descended into once and removed once, plus the final
    // visit to `slot`: a valid subtree never exhausts this budget.
    let mut budget = Budget::new(total.saturating_mul(2).saturating_add(1));
    let mut removed = 0usize;
    let mut cur = slot;
    loop {
        budget.take()?;
        let c = linked(store, cur)?;
        if let Some(child) = c.first_child {
            cur = child;
            continue;
        }
        if cur == slot {
            return Ok(removed);
        }
        // A leaf: deleting it re-parents nothing, and its parent is where the
        // walk continues.
        let parent = c.parent.ok_or(CapError::Corrupt)?;
        let cap = remove(store, cur)?;
        on_removed(cur, &cap);
        removed = removed.saturating_add(1);
        cur = parent;
    }
}

/// Moves the capability from `src` into the empty slot `dst`; `dst` takes
/// over `src`'s place in the tree (parent, siblings and children), `src`
/// becomes empty. Nothing is reported: no capability goes away.
pub fn move_cap<S: SlotStore + ?Sized>(
    store: &mut S,
    src: SlotId,
    dst: SlotId,
) -> Result<(), CapError> {
    let (s, _) = full(store, src)?;
    vacant(store, dst)?;
    check_position(store, src, &s)?;
    let kids = check_children(store, src, &s)?;
    // dst is empty and unlinked, so it cannot be one of the neighbours
    // rewritten below.
    set_children_parent(store, kids.first, Some(dst), false)?;
    if let Some(p) = s.parent {
        link_forward(store, p, s.prev_sibling, Some(dst))?;
        link_back(store, s.next_sibling, Some(dst))?;
    }
    write(store, dst, |d| *d = s)?;
    write(store, src, |x| *x = Slot::default())
}

/// The capability in `slot`.
pub fn lookup<S: SlotStore + ?Sized>(store: &S, slot: SlotId) -> Result<Capability, CapError> {
    full(store, slot).map(|(_, cap)| cap)
}

/// The slot `slot` was derived from, `None` for a root.
pub fn parent<S: SlotStore + ?Sized>(store: &S, slot: SlotId) -> Result<Option<SlotId>, CapError> {
    full(store, slot).map(|(s, _)| s.parent)
}

/// Whether anything was derived from `slot` (and is still there). Untyped
/// memory with children cannot be retyped again from the start, for one.
pub fn has_children<S: SlotStore + ?Sized>(store: &S, slot: SlotId) -> Result<bool, CapError> {
    full(store, slot).map(|(s, _)| s.first_child.is_some())
}

/// The direct children of `slot`, newest first. Each item is checked as it
/// is reached; an inconsistent link yields one `Err(Corrupt)` and then the
/// iterator ends.
pub fn children<S: SlotStore + ?Sized>(
    store: &S,
    slot: SlotId,
) -> Result<Children<'_, S>, CapError> {
    let (s, _) = full(store, slot)?;
    Ok(Children {
        store,
        parent: slot,
        next: s.first_child,
        prev: None,
        budget: Budget::new(store.capacity_hint()),
    })
}

/// Iterator returned by [`children`].
pub struct Children<'a, S: ?Sized> {
    store: &'a S,
    parent: SlotId,
    next: Option<SlotId>,
    prev: Option<SlotId>,
    budget: Budget,
}

impl<S: SlotStore + ?Sized> Iterator for Children<'_, S> {
    type Item = Result<SlotId, CapError>;

    fn next(&mut self) -> Option<Self::Item> {
        let id = self.next.take()?;
        let step = self.budget.take().and_then(|()| {
            let c = linked(self.store, id)?;
            if c.parent != Some(self.parent) || c.prev_sibling != self.prev {
                return Err(CapError::Corrupt);
            }
            Ok(c)
        });
        // On error `next` stays None, which ends the iteration.
        Some(step.map(|c| {
            self.prev = Some(id);
            self.next = c.next_sibling;
            id
        }))
    }
}

// ---------------------------------------------------------------------------
// Internals
// ---------------------------------------------------------------------------

/// Counts walk steps so that a cycle ends in `Corrupt` instead of a hang.
struct Budget(u64);

impl Budget {
    const fn new(steps: u64) -> Self {
        Self(steps)
    }

    fn take(&mut self) -> Result<(), CapError> {
        self.0 = self.0.checked_sub(1).ok_or(CapError::Corrupt)?;
        Ok(())
    }
}

/// The caller-named slot `id`, which must hold a capability.
fn full<S: SlotStore + ?Sized>(store: &S, id: SlotId) -> Result<(Slot, Capability), CapError> {
    let s = *store.get(id).ok_or(CapError::NoSuchSlot(id))?;
    let cap = s.cap.ok_or(CapError::Empty(id))?;
    Ok((s, cap))
}

/// Checks that the caller-named slot `id` is empty (and therefore unlinked).
fn vacant<S: SlotStore + ?Sized>(store: &S, id: SlotId) -> Result<(), CapError> {
    let s = store.get(id).ok_or(CapError::NoSuchSlot(id))?;
    if s.cap.is_some() {
        return Err(CapError::Occupied(id));
    }
    if s.has_links() {
        return Err(CapError::Corrupt);
    }
    Ok(())
}

/// A slot reached through a link: it exists and is full, or the tree is
/// corrupt (invariants 1 and 3).
fn linked<S: SlotStore + ?Sized>(store: &S, id: SlotId) -> Result<Slot, CapError> {
    match store.get(id) {
        Some(s) if s.cap.is_some() => Ok(*s),
        _ => Err(CapError::Corrupt),
    }
}

fn write<S: SlotStore + ?Sized>(
    store: &mut S,
    id: SlotId,
    f: impl FnOnce(&mut Slot),
) -> Result<(), CapError> {
    f(store.get_mut(id).ok_or(CapError::Corrupt)?);
    Ok(())
}

/// Checks that the full slot `id` (contents `s`) is where its links say:
/// its neighbours and parent point back at it.
fn check_position<S: SlotStore + ?Sized>(store: &S, id: SlotId, s: &Slot) -> Result<(), CapError> {
    let Some(p) = s.parent else {
        // Roots are unlinked from each other (invariant 2).
        return match (s.prev_sibling, s.next_sibling) {
            (None, None) => Ok(()),
            _ => Err(CapError::Corrupt),
        };
    };
    let ps = linked(store, p)?;
    if p == id {
        return Err(CapError::Corrupt);
    }
    match s.prev_sibling {
        None if ps.first_child != Some(id) => return Err(CapError::Corrupt),
        None => {}
        Some(a) => {
            let a_s = linked(store, a)?;
            if a == id || a_s.next_sibling != Some(id) || a_s.parent != Some(p) {
                return Err(CapError::Corrupt);
            }
        }
    }
    if let Some(b) = s.next_sibling {
        let b_s = linked(store, b)?;
        if b == id || b_s.prev_sibling != Some(id) || b_s.parent != Some(p) {
            return Err(CapError::Corrupt);
        }
    }
    Ok(())
}

/// The ends of a checked child list.
struct ChildList {
    first: Option<SlotId>,
    last: Option<SlotId>,
}

/// Walks the child list of the full slot `id` (contents `s`), checking every
/// link, so that rewriting the children afterwards cannot meet a surprise.
fn check_children<S: SlotStore + ?Sized>(
    store: &S,
    id: SlotId,
    s: &Slot,
) -> Result<ChildList, CapError> {
    let mut budget = Budget::new(store.capacity_hint());
    let mut prev = None;
    let mut cur = s.first_child;
    while let Some(c) = cur {
        budget.take()?;
        // A child that is the slot itself or its parent is a cycle; the
        // re-parenting in `remove` would otherwise tie it into a knot.
        if c == id || Some(c) == s.parent {
            return Err(CapError::Corrupt);
        }
        let cs = linked(store, c)?;
        if cs.parent != Some(id) || cs.prev_sibling != prev {
            return Err(CapError::Corrupt);
        }
        prev = Some(c);
        cur = cs.next_sibling;
    }
    Ok(ChildList {
        first: s.first_child,
        last: prev,
    })
}

/// Sets the parent of every slot on the (already checked) list starting at
/// `first`. When the children become roots (`unlink`), their sibling links
/// are cleared too, per invariant 2.
fn set_children_parent<S: SlotStore + ?Sized>(
    store: &mut S,
    first: Option<SlotId>,
    parent: Option<SlotId>,
    unlink: bool,
) -> Result<(), CapError> {
    let mut budget = Budget::new(store.capacity_hint());
    let mut cur = first;
    while let Some(c) = cur {
        budget.take()?;
        let cs = store.get_mut(c).ok_or(CapError::Corrupt)?;
        cur = cs.next_sibling;
        cs.parent = parent;
        if unlink {
            cs.next_sibling = None;
            cs.prev_sibling = None;
        }
    }
    Ok(())
}

/// Makes `to` follow `prev` in `parent`'s child list, or head the list when
/// there is no `prev`.
fn link_forward<S: SlotStore + ?Sized>(
    store: &mut S,
    parent: SlotId,
    prev: Option<SlotId>,
    to: Option<SlotId>,
) -> Result<(), CapError> {
    match prev {
        Some(a) => write(store, a, |s| s.next_sibling = to),
        None => write(store, parent, |s| s.first_child = to),
    }
}

/// Makes `next` (if any) point back at `to`.
fn link_back<S: SlotStore + ?Sized>(
    store: &mut S,
    next: Option<SlotId>,
    to: Option<SlotId>,
) -> Result<(), CapError> {
    match next {
        Some(b) => write(store, b, |s| s.prev_sibling = to),
        None => Ok(()),
    }
}

/// Empties the full slot `id`, splicing its children into its place, and
/// returns the capability it held. Everything is checked before the first
/// write.
fn remove<S: SlotStore + ?Sized>(store: &mut S, id: SlotId) -> Result<Capability, CapError> {
    let (s, cap) = full(store, id)?;
    check_position(store, id, &s)?;
    let kids = check_children(store, id, &s)?;

    set_children_parent(store, kids.first, s.parent, s.parent.is_none())?;
    if let Some(p) = s.parent {
        // Replace `id` in p's list by the run of its children (or by nothing),
        // keeping their order.
        match (kids.first, kids.last) {
            (Some(first), Some(last)) => {
                write(store, first, |x| x.prev_sibling = s.prev_sibling)?;
                write(store, last, |x| x.next_sibling = s.next_sibling)?;
                link_forward(store, p, s.prev_sibling, Some(first))?;
                link_back(store, s.next_sibling, Some(last))?;
            }
            _ => {
                link_forward(store, p, s.prev_sibling, s.next_sibling)?;
                link_back(store, s.next_sibling, s.prev_sibling)?;
            }
        }
    }
    write(store, id, |x| *x = Slot::default())?;
    Ok(cap)
}

/// Checks every link in the subtree below the full slot `root` without
/// changing anything, and returns the number of descendants.
fn check_subtree<S: SlotStore + ?Sized>(store: &S, root: SlotId) -> Result<u64, CapError> {
    walk_subtree(store, root, |_| {})
}

/// Visits every capability in the subtree below the full slot `root`
/// (`root` itself not), in pre-order, checking each link as it goes, and
/// returns how many it visited; changes nothing. An error (a link that
/// contradicts the invariants) may come after some visits. Linear in the
/// subtree, bounded like every walk.
pub fn for_each_descendant<S: SlotStore + ?Sized>(
    store: &S,
    root: SlotId,
    visit: impl FnMut(&Capability),
) -> Result<u64, CapError> {
    full(store, root)?;
    walk_subtree(store, root, visit)
}

/// What `Usage` reports for the untyped capability in `slot`: the bytes
/// of it no longer free to retype, and its size. Each untyped's watermark
/// counts what was made from it (objects, alignment gaps, objects deleted
/// while others remain); an untyped split from it counts within its
/// parent's watermark as its whole size, so that size is replaced by what
/// its own watermarks say. `None`: `slot` holds no (valid) untyped
/// capability.
pub fn untyped_in_use<S: SlotStore + ?Sized>(
    store: &S,
    slot: SlotId,
) -> Result<Option<(u64, u64)>, CapError> {
    let (_, cap) = full(store, slot)?;
    let Some(root) = UntypedCap::from_cap(&cap) else {
        return Ok(None);
    };
    let mut used = root.watermark;
    walk_subtree(store, slot, |c| {
        if let Some(u) = UntypedCap::from_cap(c) {
            used = used.saturating_add(u.watermark).saturating_sub(u.bytes());
        }
    })?;
    Ok(Some((used, root.bytes())))
}

/// The pre-order walk of [`check_subtree`] and [`for_each_descendant`]:
/// it climbs back up through the (checked) parent links instead of keeping
/// a stack.
fn walk_subtree<S: SlotStore + ?Sized>(
    store: &S,
    root: SlotId,
    mut visit: impl FnMut(&Capability),
) -> Result<u64, CapError> {
    // Each descendant is entered once and left once.
    let mut budget = Budget::new(store.capacity_hint().saturating_mul(2).saturating_add(2));
    let mut count = 0u64;
    let mut cur = root;
    loop {
        budget.take()?;
        let c = linked(store, cur)?;
        if let Some(child) = c.first_child {
            visit(&enter(store, root, child, cur, None)?);
            count = count.saturating_add(1);
            cur = child;
            continue;
        }
        // No children: climb until some ancestor below root has a next sibling.
        loop {
            if cur == root {
                return Ok(count);
            }
            budget.take()?;
            let c = linked(store, cur)?;
            let parent = c.parent.ok_or(CapError::Corrupt)?;
            if let Some(next) = c.next_sibling {
                visit(&enter(store, root, next, parent, Some(cur))?);
                count = count.saturating_add(1);
                cur = next;
                break;
            }
            cur = parent;
        }
    }
}

/// Checks a slot the subtree walk is about to enter: full, back-linked to
/// where the walk came from, and not the walk's root (which would be a
/// cycle); returns its capability.
fn enter<S: SlotStore + ?Sized>(
    store: &S,
    root: SlotId,
    id: SlotId,
    parent: SlotId,
    prev: Option<SlotId>,
) -> Result<Capability, CapError> {
    if id == root {
        return Err(CapError::Corrupt);
    }
    let s = linked(store, id)?;
    if s.parent != Some(parent) || s.prev_sibling != prev {
        return Err(CapError::Corrupt);
    }
    s.cap.ok_or(CapError::Corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};
    use std::string::ToString;
    use std::vec;
    use std::vec::Vec;

    /// Slots `0..len`; ids past the end are not slots.
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct VecStore {
        slots: Vec<Slot>,
        hint: u64,
    }

    impl VecStore {
        fn new(len: usize) -> Self {
            Self {
                slots: vec![Slot::default(); len],
                hint: len as u64,
            }
        }

        fn slot(&self, i: u64) -> &Slot {
            &self.slots[i as usize]
        }
    }

    impl SlotStore for VecStore {
        fn get(&self, id: SlotId) -> Option<&Slot> {
            usize::try_from(id.0).ok().and_then(|i| self.slots.get(i))
        }
        fn get_mut(&mut self, id: SlotId) -> Option<&mut Slot> {
            usize::try_from(id.0)
                .ok()
                .and_then(|i| self.slots.get_mut(i))
        }
        fn capacity_hint(&self) -> u64 {
            self.hint
        }
    }

    /// Sparse, address-like ids; uses the default capacity hint.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    struct MapStore(HashMap<u64, Slot>);

    impl SlotStore for MapStore {
        fn get(&self, id: SlotId) -> Option<&Slot> {
            self.0.get(&id.0)
        }
        fn get_mut(&mut self, id: SlotId) -> Option<&mut Slot> {
            self.0.get_mut(&id.0)
        }
    }

    fn id(i: u64) -> SlotId {
        SlotId(i)
    }

    fn ep(object: u64) -> Capability {
        Capability::new(ObjectType::Endpoint, object, Rights::ALL)
    }

    fn rw() -> Rights {
        Rights::READ.union(Rights::WRITE)
    }

    fn ignore(_: SlotId, _: &Capability) {}

    fn kids<S: SlotStore>(store: &S, slot: u64) -> Vec<u64> {
        children(store, id(slot))
            .unwrap()
            .map(|c| c.unwrap().0)
            .collect()
    }

    /// Walks the whole store and checks the module-doc invariants; panics
    /// with a description on the first violation.
    fn check_invariants(store: &VecStore) {
        let n = store.slots.len() as u64;
        let get = |i: SlotId| store.get(i).unwrap_or_else(|| panic!("dangling {i}"));
        let mut full = 0u64;
        let mut listed = 0u64;
        let mut roots = Vec::new();
        for i in 0..n {
            let s = store.slot(i);
            if s.cap.is_none() {
                assert!(!s.has_links(), "empty slot {i} has links: {s:?}");
                continue;
            }
            full += 1;
            match s.parent {
                None => {
                    roots.push(i);
                    assert!(
                        s.prev_sibling.is_none() && s.next_sibling.is_none(),
                        "root {i} has siblings"
                    );
                }
                Some(p) => {
                    assert!(get(p).cap.is_some(), "slot {i}: parent {p} empty");
                    if s.prev_sibling.is_none() {
                        assert_eq!(get(p).first_child, Some(id(i)), "slot {i}: head of list");
                    }
                }
            }
            if let Some(a) = s.prev_sibling {
                assert_eq!(
                    get(a).next_sibling,
                    Some(id(i)),
                    "prev/next asymmetry at {i}"
                );
                assert_eq!(get(a).parent, s.parent, "sibling parent mismatch at {i}");
            }
            if let Some(b) = s.next_sibling {
                assert_eq!(
                    get(b).prev_sibling,
                    Some(id(i)),
                    "next/prev asymmetry at {i}"
                );
                assert_eq!(get(b).parent, s.parent, "sibling parent mismatch at {i}");
            }
            // Every child on the list points back here; a bounded walk so a
            // sibling cycle fails instead of hanging.
            let mut cur = s.first_child;
            let mut steps = 0;
            while let Some(c) = cur {
                steps += 1;
                assert!(steps <= n, "child list of {i} loops");
                let cs = get(c);
                assert!(cs.cap.is_some(), "child {c} of {i} empty");
                assert_eq!(cs.parent, Some(id(i)), "child {c} of {i} has wrong parent");
                listed += 1;
                cur = cs.next_sibling;
            }
        }
        // Every non-root is on exactly its parent's list...
        assert_eq!(
            listed,
            full - roots.len() as u64,
            "some slot missing from its parent's list"
        );
        // ...and everything is reachable from a root, so there is no cycle
        // (a cycle's members all have parents inside the cycle).
        let mut seen = HashSet::new();
        let mut stack = roots;
        while let Some(i) = stack.pop() {
            assert!(seen.insert(i), "slot {i} reached twice");
            let mut cur = store.slot(i).first_child;
            while let Some(c) = cur {
                stack.push(c.0);
                cur = store.slot(c.0).next_sibling;
            }
        }
        assert_eq!(
            seen.len() as u64,
            full,
            "cycle: not every slot reachable from a root"
        );
    }

    /// An untyped of 2^`bits` bytes at `phys` with `watermark` bytes used.
    fn untyped(phys: u64, bits: u32, watermark: u64) -> Capability {
        UntypedCap {
            watermark,
            ..UntypedCap::new(phys, bits, false)
        }
        .to_cap(Rights::ALL)
    }

    #[test]
    fn untyped_in_use_follows_the_watermarks_of_the_splits() {
        let mut s = VecStore::new(8);
        // 1 MiB; a 256 KiB split after 8 KiB of objects, then a 4 KiB object.
        insert_root(&mut s, id(0), untyped(0, 20, 512 << 10)).unwrap();
        assert_eq!(untyped_in_use(&s, id(0)), Ok(Some((512 << 10, 1 << 20))));
        insert_child(&mut s, id(0), id(1), untyped(256 << 10, 18, 12 << 10)).unwrap();
        insert_child(&mut s, id(0), id(2), ep(1)).unwrap();
        // The split counts 12 KiB, not 256: 512 - 256 + 12.
        assert_eq!(untyped_in_use(&s, id(0)), Ok(Some((268 << 10, 1 << 20))));
        // A split of the split, empty: 4 KiB of the 12 are its size, none used.
        insert_child(&mut s, id(1), id(3), untyped(264 << 10, 12, 0)).unwrap();
        assert_eq!(untyped_in_use(&s, id(0)), Ok(Some((264 << 10, 1 << 20))));
        // Copies of an object in the subtree change nothing.
        copy(&mut s, id(2), id(4)).unwrap();
        assert_eq!(untyped_in_use(&s, id(0)), Ok(Some((264 << 10, 1 << 20))));
        assert_eq!(untyped_in_use(&s, id(1)), Ok(Some((8 << 10, 256 << 10))));
        assert_eq!(untyped_in_use(&s, id(2)), Ok(None));
        assert_eq!(untyped_in_use(&s, id(5)), Err(CapError::Empty(id(5))));
        assert_eq!(
            untyped_in_use(&s, id(99)),
            Err(CapError::NoSuchSlot(id(99)))
        );
        let mut seen = Vec::new();
        assert_eq!(for_each_descendant(&s, id(0), |c| seen.push(c.kind)), Ok(4));
        assert_eq!(seen.len(), 4);
    }

    #[test]
    fn insert_root_and_lookup() {
        let mut s = VecStore::new(4);
        insert_root(&mut s, id(1), ep(7)).unwrap();
        assert_eq!(lookup(&s, id(1)), Ok(ep(7)));
        assert_eq!(parent(&s, id(1)), Ok(None));
        assert_eq!(has_children(&s, id(1)), Ok(false));
        assert_eq!(
            insert_root(&mut s, id(1), ep(8)),
            Err(CapError::Occupied(id(1)))
        );
        assert_eq!(lookup(&s, id(0)), Err(CapError::Empty(id(0))));
        assert_eq!(lookup(&s, id(4)), Err(CapError::NoSuchSlot(id(4))));
        check_invariants(&s);
    }

    #[test]
    fn copy_makes_children_newest_first() {
        let mut s = VecStore::new(5);
        insert_root(&mut s, id(0), ep(1)).unwrap();
        copy(&mut s, id(0), id(1)).unwrap();
        copy(&mut s, id(0), id(2)).unwrap();
        copy(&mut s, id(1), id(3)).unwrap();
        assert_eq!(lookup(&s, id(3)), Ok(ep(1)));
        assert_eq!(parent(&s, id(1)), Ok(Some(id(0))));
        assert_eq!(parent(&s, id(3)), Ok(Some(id(1))));
        assert_eq!(kids(&s, 0), vec![2, 1]);
        assert_eq!(kids(&s, 1), vec![3]);
        assert!(kids(&s, 3).is_empty());
        assert_eq!(has_children(&s, id(0)), Ok(true));
        check_invariants(&s);
    }

    #[test]
    fn insert_child_for_retype() {
        let mut s = VecStore::new(3);
        let ut = Capability::new(ObjectType::Untyped, 0x10_0000, Rights::ALL);
        insert_root(&mut s, id(0), ut).unwrap();
        let tcb = Capability::new(ObjectType::Thread, 0x10_0000, Rights::ALL);
        insert_child(&mut s, id(0), id(1), tcb).unwrap();
        assert_eq!(lookup(&s, id(1)), Ok(tcb));
        assert_eq!(parent(&s, id(1)), Ok(Some(id(0))));
        assert_eq!(
            insert_child(&mut s, id(2), id(2), tcb),
            Err(CapError::Empty(id(2)))
        );
        let mut removed = Vec::new();
        assert_eq!(revoke(&mut s, id(0), |_, c| removed.push(*c)), Ok(1));
        assert_eq!(removed, vec![tcb]);
        check_invariants(&s);
    }

    #[test]
    fn mint_rights_must_be_subset() {
        let mut s = VecStore::new(4);
        let src = Capability::new(ObjectType::Endpoint, 9, rw());
        insert_root(&mut s, id(0), src).unwrap();
        let before = s.clone();
        assert_eq!(
            mint(&mut s, id(0), id(1), Rights::ALL, 0),
            Err(CapError::MissingRights)
        );
        assert_eq!(
            mint(&mut s, id(0), id(1), Rights::GRANT, 0),
            Err(CapError::MissingRights)
        );
        assert_eq!(s, before);
        mint(&mut s, id(0), id(1), Rights::READ, 0).unwrap();
        assert_eq!(lookup(&s, id(1)).unwrap().rights, Rights::READ);
        // Rights only shrink down a derivation chain.
        assert_eq!(
            mint(&mut s, id(1), id(2), rw(), 0),
            Err(CapError::MissingRights)
        );
        mint(&mut s, id(1), id(2), Rights::NONE, 0).unwrap();
        mint(&mut s, id(0), id(3), rw(), 0).unwrap();
        assert_eq!(lookup(&s, id(3)).unwrap(), src);
        check_invariants(&s);
    }

    #[test]
    fn mint_badge_rules() {
        let mut s = VecStore::new(8);
        insert_root(&mut s, id(0), ep(1)).unwrap();
        let ntfn = Capability::new(ObjectType::Notification, 2, Rights::ALL);
        insert_root(&mut s, id(1), ntfn).unwrap();
        let frame = Capability::new(ObjectType::Frame4K, 3, Rights::ALL);
        insert_root(&mut s, id(2), frame).unwrap();

        mint(&mut s, id(0), id(3), Rights::ALL, 42).unwrap();
        assert_eq!(lookup(&s, id(3)).unwrap().badge, 42);
        mint(&mut s, id(1), id(4), Rights::WRITE, 5).unwrap();
        assert_eq!(lookup(&s, id(4)).unwrap().badge, 5);

        let before = s.clone();
        // No re-badging a badged capability.
        assert_eq!(
            mint(&mut s, id(3), id(5), Rights::ALL, 43),
            Err(CapError::InvalidArgument)
        );
        // No badges on other kinds.
        assert_eq!(
            mint(&mut s, id(2), id(5), Rights::ALL, 1),
            Err(CapError::InvalidArgument)
        );
        assert_eq!(s, before);

        // An I/O-port capability narrows to a sub-range of its own, never
        // beyond it.
        let mut ports = Capability::new(ObjectType::IoPorts, 0, Rights::ALL);
        ports.extra = 0xffff;
        insert_root(&mut s, id(7), ports).unwrap();
        let narrow = |first: u64, last: u64| first | last << 16;
        mint(&mut s, id(7), id(5), Rights::ALL, narrow(0x40, 0x43)).unwrap();
        let pit = lookup(&s, id(5)).unwrap();
        assert_eq!((pit.object, pit.extra, pit.badge), (0x40, 0x43, 0));
        let before = s.clone();
        for bad in [
            narrow(0x3f, 0x43),
            narrow(0x40, 0x44),
            narrow(0x43, 0x40),
            1 << 32,
        ] {
            assert_eq!(
                mint(&mut s, id(5), id(6), Rights::ALL, bad),
                Err(CapError::InvalidArgument),
                "{bad:#x}"
            );
        }
        assert_eq!(s, before);
        mint(&mut s, id(5), id(6), Rights::ALL, narrow(0x41, 0x41)).unwrap();
        assert_eq!(lookup(&s, id(6)).unwrap().object, 0x41);
        delete(&mut s, id(6), |_, _| {}).unwrap();
        delete(&mut s, id(5), |_, _| {}).unwrap();

        // Badge 0 keeps the source's badge (and works on any kind).
        mint(&mut s, id(3), id(5), Rights::READ, 0).unwrap();
        assert_eq!(lookup(&s, id(5)).unwrap().badge, 42);
        mint(&mut s, id(2), id(6), Rights::READ, 0).unwrap();
        assert_eq!(
            lookup(&s, id(6)).unwrap(),
            Capability {
                rights: Rights::READ,
                ..frame
            }
        );
        check_invariants(&s);
    }

    #[test]
    fn mint_keeps_extra_and_object() {
        let mut s = VecStore::new(2);
        let cap = Capability {
            kind: ObjectType::Frame2M,
            object: 0x20_0000,
            rights: Rights::ALL,
            badge: 0,
            extra: 0xdead,
        };
        insert_root(&mut s, id(0), cap).unwrap();
        mint(&mut s, id(0), id(1), Rights::READ, 0).unwrap();
        let m = lookup(&s, id(1)).unwrap();
        assert_eq!(
            (m.kind, m.object, m.extra),
            (cap.kind, cap.object, cap.extra)
        );
    }

    #[test]
    fn delete_reparents_children_in_place() {
        // 0 -> {3, 1 -> {5, 4}, 2} in list order (children are prepended).
        let mut s = VecStore::new(6);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        copy(&mut s, id(0), id(2)).unwrap();
        copy(&mut s, id(0), id(1)).unwrap();
        copy(&mut s, id(0), id(3)).unwrap();
        copy(&mut s, id(1), id(4)).unwrap();
        copy(&mut s, id(1), id(5)).unwrap();
        assert_eq!(kids(&s, 0), vec![3, 1, 2]);

        let mut removed = Vec::new();
        delete(&mut s, id(1), |_, c| removed.push(*c)).unwrap();
        assert_eq!(removed, vec![ep(0)]);
        assert_eq!(s.slots[1], Slot::default());
        assert_eq!(kids(&s, 0), vec![3, 5, 4, 2]);
        assert_eq!(parent(&s, id(5)), Ok(Some(id(0))));
        check_invariants(&s);

        // Deleting the head and the tail of a list.
        delete(&mut s, id(3), ignore).unwrap();
        delete(&mut s, id(2), ignore).unwrap();
        assert_eq!(kids(&s, 0), vec![5, 4]);
        check_invariants(&s);

        // Revoking the ancestor still reaches the re-parented children.
        assert_eq!(revoke(&mut s, id(0), ignore), Ok(2));
        check_invariants(&s);
    }

    #[test]
    fn delete_root_makes_children_roots() {
        let mut s = VecStore::new(5);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        copy(&mut s, id(0), id(1)).unwrap();
        copy(&mut s, id(0), id(2)).unwrap();
        copy(&mut s, id(2), id(3)).unwrap();
        delete(&mut s, id(0), ignore).unwrap();
        assert_eq!(parent(&s, id(1)), Ok(None));
        assert_eq!(parent(&s, id(2)), Ok(None));
        assert_eq!(parent(&s, id(3)), Ok(Some(id(2))));
        check_invariants(&s);
        // A lone child re-parented to the parent of its deleted parent.
        delete(&mut s, id(2), ignore).unwrap();
        assert_eq!(parent(&s, id(3)), Ok(None));
        check_invariants(&s);
    }

    #[test]
    fn revoke_keeps_slot_and_unrelated_trees() {
        let mut s = VecStore::new(12);
        // Tree A: 0 -> {1 -> {2, 3}, 4}; tree B: 5 -> 6; a sibling of 1's
        // subtree must survive a revoke of 1.
        insert_root(&mut s, id(0), ep(100)).unwrap();
        copy(&mut s, id(0), id(1)).unwrap();
        copy(&mut s, id(1), id(2)).unwrap();
        mint(&mut s, id(1), id(3), Rights::READ, 9).unwrap();
        copy(&mut s, id(0), id(4)).unwrap();
        insert_root(&mut s, id(5), ep(200)).unwrap();
        copy(&mut s, id(5), id(6)).unwrap();

        assert_eq!(revoke(&mut s, id(1), ignore), Ok(2));
        assert_eq!(lookup(&s, id(1)), Ok(ep(100)));
        assert_eq!(has_children(&s, id(1)), Ok(false));
        assert_eq!(lookup(&s, id(2)), Err(CapError::Empty(id(2))));
        assert_eq!(kids(&s, 0), vec![4, 1]);
        check_invariants(&s);

        assert_eq!(revoke(&mut s, id(0), ignore), Ok(2));
        assert_eq!(lookup(&s, id(0)), Ok(ep(100)));
        assert_eq!(kids(&s, 5), vec![6]);
        assert_eq!(lookup(&s, id(6)), Ok(ep(200)));
        // Revoking a leaf removes nothing.
        assert_eq!(revoke(&mut s, id(0), ignore), Ok(0));
        check_invariants(&s);
    }

    #[test]
    fn on_removed_called_once_per_cap() {
        const N: u64 = 200;
        let mut s = VecStore::new(N as usize);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        // A mixed tree: slot i derives from slot i / 3; each cap distinct.
        for i in 1..N {
            let p = i / 3;
            let c = Capability { badge: 0, ..ep(i) };
            insert_child(&mut s, id(p), id(i), c).unwrap();
        }
        let mut seen = HashSet::new();
        let n = revoke(&mut s, id(0), |_, c| {
            assert!(seen.insert(c.object), "reported twice")
        })
        .unwrap();
        assert_eq!(n as u64, N - 1);
        assert_eq!(seen, (1..N).collect::<HashSet<_>>());
        check_invariants(&s);
    }

    #[test]
    fn revoke_deep_chain_without_recursion() {
        const DEPTH: u64 = 10_000;
        let mut s = VecStore::new(DEPTH as usize + 3);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        for i in 1..=DEPTH {
            copy(&mut s, id(i - 1), id(i)).unwrap();
        }
        insert_root(&mut s, id(DEPTH + 1), ep(1)).unwrap();
        copy(&mut s, id(DEPTH + 1), id(DEPTH + 2)).unwrap();
        check_invariants(&s);

        // Deleting a middle link splices the chain.
        delete(&mut s, id(5_000), ignore).unwrap();
        assert_eq!(parent(&s, id(5_001)), Ok(Some(id(4_999))));
        check_invariants(&s);

        let mut calls = 0u64;
        assert_eq!(
            revoke(&mut s, id(0), |_, _| calls += 1),
            Ok(DEPTH as usize - 1)
        );
        assert_eq!(calls, DEPTH - 1);
        assert_eq!(lookup(&s, id(0)), Ok(ep(0)));
        assert_eq!(kids(&s, DEPTH + 1), vec![DEPTH + 2]);
        check_invariants(&s);
    }

    #[test]
    fn revoke_middle_of_deep_chain() {
        const DEPTH: u64 = 10_000;
        let mut s = VecStore::new(DEPTH as usize + 1);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        for i in 1..=DEPTH {
            copy(&mut s, id(i - 1), id(i)).unwrap();
        }
        assert_eq!(revoke(&mut s, id(100), ignore), Ok(DEPTH as usize - 100));
        assert_eq!(kids(&s, 99), vec![100]);
        assert_eq!(has_children(&s, id(100)), Ok(false));
        check_invariants(&s);
    }

    #[test]
    fn revoke_wide_fan_out() {
        const WIDTH: u64 = 10_000;
        let mut s = VecStore::new(WIDTH as usize + 1);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        for i in 1..=WIDTH {
            mint(&mut s, id(0), id(i), Rights::WRITE, i).unwrap();
        }
        assert_eq!(kids(&s, 0).len() as u64, WIDTH);
        let mut badges = HashSet::new();
        let n = revoke(&mut s, id(0), |_, c| assert!(badges.insert(c.badge))).unwrap();
        assert_eq!(n as u64, WIDTH);
        assert_eq!(badges.len() as u64, WIDTH);
        assert!(kids(&s, 0).is_empty());
        check_invariants(&s);
    }

    #[test]
    fn errors_change_nothing() {
        let mut s = VecStore::new(4);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        copy(&mut s, id(0), id(1)).unwrap();
        let before = s.clone();
        let far = id(u64::MAX);
        let mut called = false;
        let mut cb = |_: SlotId, _: &Capability| called = true;

        assert_eq!(
            insert_root(&mut s, far, ep(1)),
            Err(CapError::NoSuchSlot(far))
        );
        assert_eq!(
            insert_root(&mut s, id(1), ep(1)),
            Err(CapError::Occupied(id(1)))
        );
        assert_eq!(
            insert_child(&mut s, far, id(2), ep(1)),
            Err(CapError::NoSuchSlot(far))
        );
        assert_eq!(
            insert_child(&mut s, id(2), id(3), ep(1)),
            Err(CapError::Empty(id(2)))
        );
        assert_eq!(
            insert_child(&mut s, id(0), far, ep(1)),
            Err(CapError::NoSuchSlot(far))
        );
        assert_eq!(
            insert_child(&mut s, id(0), id(0), ep(1)),
            Err(CapError::Occupied(id(0)))
        );
        assert_eq!(copy(&mut s, id(2), id(3)), Err(CapError::Empty(id(2))));
        assert_eq!(copy(&mut s, far, id(3)), Err(CapError::NoSuchSlot(far)));
        assert_eq!(copy(&mut s, id(0), id(4)), Err(CapError::NoSuchSlot(id(4))));
        assert_eq!(copy(&mut s, id(0), id(1)), Err(CapError::Occupied(id(1))));
        assert_eq!(copy(&mut s, id(0), id(0)), Err(CapError::Occupied(id(0))));
        assert_eq!(
            mint(&mut s, id(3), id(2), Rights::NONE, 0),
            Err(CapError::Empty(id(3)))
        );
        assert_eq!(
            mint(&mut s, id(0), far, Rights::NONE, 0),
            Err(CapError::NoSuchSlot(far))
        );
        assert_eq!(delete(&mut s, id(2), &mut cb), Err(CapError::Empty(id(2))));
        assert_eq!(delete(&mut s, far, &mut cb), Err(CapError::NoSuchSlot(far)));
        assert_eq!(revoke(&mut s, id(2), &mut cb), Err(CapError::Empty(id(2))));
        assert_eq!(revoke(&mut s, far, &mut cb), Err(CapError::NoSuchSlot(far)));
        assert_eq!(move_cap(&mut s, id(2), id(3)), Err(CapError::Empty(id(2))));
        assert_eq!(
            move_cap(&mut s, id(0), id(1)),
            Err(CapError::Occupied(id(1)))
        );
        assert_eq!(move_cap(&mut s, id(0), far), Err(CapError::NoSuchSlot(far)));
        assert_eq!(parent(&s, id(2)), Err(CapError::Empty(id(2))));
        assert_eq!(has_children(&s, far).err(), Some(CapError::NoSuchSlot(far)));
        assert_eq!(children(&s, id(3)).err(), Some(CapError::Empty(id(3))));
        assert_eq!(s, before);
        assert!(!called);
    }

    #[test]
    fn move_takes_over_position() {
        let mut s = VecStore::new(8);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        copy(&mut s, id(0), id(1)).unwrap();
        copy(&mut s, id(0), id(2)).unwrap();
        copy(&mut s, id(0), id(3)).unwrap();
        copy(&mut s, id(2), id(4)).unwrap();
        copy(&mut s, id(2), id(5)).unwrap();
        move_cap(&mut s, id(2), id(6)).unwrap();
        assert_eq!(s.slots[2], Slot::default());
        assert_eq!(kids(&s, 0), vec![3, 6, 1]);
        assert_eq!(kids(&s, 6), vec![5, 4]);
        check_invariants(&s);
        // Moving a root keeps it a root with its children.
        move_cap(&mut s, id(0), id(7)).unwrap();
        assert_eq!(parent(&s, id(7)), Ok(None));
        assert_eq!(kids(&s, 7), vec![3, 6, 1]);
        check_invariants(&s);
        assert_eq!(revoke(&mut s, id(7), ignore), Ok(5));
        check_invariants(&s);
    }

    #[test]
    fn map_store_with_address_ids() {
        let base = 0xffff_8000_0010_0000u64;
        let mut s = MapStore::default();
        for i in 0..4 {
            s.0.insert(base + i * 64, Slot::default());
        }
        let a = |i: u64| id(base + i * 64);
        insert_root(&mut s, a(0), ep(1)).unwrap();
        copy(&mut s, a(0), a(1)).unwrap();
        copy(&mut s, a(1), a(2)).unwrap();
        assert_eq!(
            copy(&mut s, a(0), id(base + 1)),
            Err(CapError::NoSuchSlot(id(base + 1)))
        );
        assert_eq!(revoke(&mut s, a(0), ignore), Ok(2));
        assert!(!has_children(&s, a(0)).unwrap());
    }

    /// A store whose links were damaged outside this module.
    fn corrupt_cases() -> Vec<(VecStore, &'static str)> {
        let mut cases = Vec::new();
        let mut base = VecStore::new(6);
        insert_root(&mut base, id(0), ep(0)).unwrap();
        copy(&mut base, id(0), id(1)).unwrap();
        copy(&mut base, id(1), id(2)).unwrap();
        copy(&mut base, id(1), id(3)).unwrap();

        let mut s = base.clone();
        s.slots[2].first_child = Some(id(0));
        cases.push((s, "child link back to the root"));
        let mut s = base.clone();
        s.slots[2].first_child = Some(id(99));
        cases.push((s, "dangling first_child"));
        let mut s = base.clone();
        s.slots[2].first_child = Some(id(4));
        cases.push((s, "first_child names an empty slot"));
        let mut s = base.clone();
        s.slots[2].next_sibling = Some(id(3));
        cases.push((s, "sibling cycle"));
        let mut s = base.clone();
        s.slots[3].parent = Some(id(0));
        cases.push((s, "child with the wrong parent"));
        let mut s = base.clone();
        s.slots[2].prev_sibling = None;
        cases.push((s, "missing prev link"));
        let mut s = base.clone();
        s.slots[1].first_child = Some(id(2));
        cases.push((s, "list head skips a child"));
        let mut s = base.clone();
        s.slots[0].parent = Some(id(2));
        s.slots[2].first_child = Some(id(0));
        cases.push((s, "parent cycle through the root"));
        cases
    }

    #[test]
    fn corruption_is_an_error_not_a_hang() {
        for (mut s, what) in corrupt_cases() {
            let before = s.clone();
            let mut called = false;
            assert_eq!(
                revoke(&mut s, id(0), |_, _| called = true),
                Err(CapError::Corrupt),
                "{what}"
            );
            assert_eq!(s, before, "{what}: revoke changed the store");
            assert!(!called, "{what}");
            // The iterator ends after reporting the damage.
            for slot in [1, 2, 3] {
                let items: Vec<_> = children(&s, id(slot)).unwrap().take(20).collect();
                assert!(items.len() <= 3, "{what}: iterator ran on");
                if let Some(pos) = items.iter().position(Result::is_err) {
                    assert_eq!(pos + 1, items.len(), "{what}: items after an error");
                }
            }
            // Deleting any slot either works or refuses without changing anything.
            for slot in 0..6 {
                let mut t = s.clone();
                if delete(&mut t, id(slot), ignore).is_err() {
                    assert_eq!(t, s, "{what}: failed delete of {slot} changed the store");
                }
            }
        }
    }

    #[test]
    fn corrupt_delete_and_insert() {
        let mut s = VecStore::new(4);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        copy(&mut s, id(0), id(1)).unwrap();
        copy(&mut s, id(0), id(2)).unwrap();
        // The list head no longer names slot 2, which has no prev link.
        s.slots[0].first_child = Some(id(1));
        let before = s.clone();
        assert_eq!(delete(&mut s, id(2), ignore), Err(CapError::Corrupt));
        assert_eq!(move_cap(&mut s, id(2), id(3)), Err(CapError::Corrupt));
        assert_eq!(copy(&mut s, id(0), id(3)), Err(CapError::Corrupt));
        // An empty slot with a stale link is not a usable destination.
        s.slots[3].parent = Some(id(0));
        assert_eq!(insert_root(&mut s, id(3), ep(1)), Err(CapError::Corrupt));
        s.slots[3].parent = None;
        assert_eq!(s, before);
    }

    #[test]
    fn walks_are_bounded_by_capacity_hint() {
        // A valid chain longer than the store claims to hold is indistinguishable
        // from a cycle: the walk gives up instead of running on.
        let mut s = VecStore::new(10);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        for i in 1..10 {
            copy(&mut s, id(i - 1), id(i)).unwrap();
        }
        s.hint = 3;
        let before = s.clone();
        assert_eq!(revoke(&mut s, id(0), ignore), Err(CapError::Corrupt));
        assert_eq!(s, before);
        s.hint = 10;
        assert_eq!(revoke(&mut s, id(0), ignore), Ok(9));

        // Wide lists too.
        let mut s = VecStore::new(10);
        insert_root(&mut s, id(0), ep(0)).unwrap();
        for i in 1..10 {
            copy(&mut s, id(0), id(i)).unwrap();
        }
        s.hint = 3;
        let before = s.clone();
        assert_eq!(delete(&mut s, id(0), ignore), Err(CapError::Corrupt));
        assert!(children(&s, id(0)).unwrap().any(|c| c.is_err()));
        assert_eq!(s, before);
    }

    #[test]
    fn errors_display_and_map_to_abi() {
        let cases = [
            (CapError::NoSuchSlot(id(0x40)), abi::Error::InvalidSlot),
            (CapError::Empty(id(0x40)), abi::Error::EmptySlot),
            (CapError::Occupied(id(0x40)), abi::Error::SlotOccupied),
            (CapError::MissingRights, abi::Error::MissingRights),
            (CapError::InvalidArgument, abi::Error::InvalidArgument),
            (CapError::Corrupt, abi::Error::InvalidState),
        ];
        for (e, abi_e) in cases {
            let text = e.to_string();
            assert!(!text.is_empty());
            if matches!(
                e,
                CapError::NoSuchSlot(_) | CapError::Empty(_) | CapError::Occupied(_)
            ) {
                assert!(text.contains("slot 0x40"), "{text}");
            }
            assert_eq!(abi::Error::from(e), abi_e);
        }
    }

    /// `check_insert_child` reports exactly what `insert_child` would, and
    /// once it passed for several empty slots, inserting into all of them
    /// succeeds (what `Retype` relies on to check before it acts).
    #[test]
    fn check_insert_child_predicts_insert_child() {
        let mut s = VecStore::new(8);
        insert_root(&mut s, id(0), ep(1)).unwrap();
        insert_child(&mut s, id(0), id(1), ep(1)).unwrap();
        insert_root(&mut s, id(2), ep(2)).unwrap();
        let cases = [
            (id(0), id(3), Ok(())),
            (id(0), id(1), Err(CapError::Occupied(id(1)))),
            (id(4), id(3), Err(CapError::Empty(id(4)))),
            (id(0), id(9), Err(CapError::NoSuchSlot(id(9)))),
            (id(9), id(3), Err(CapError::NoSuchSlot(id(9)))),
            (id(2), id(3), Ok(())),
        ];
        for (parent, dst, want) in cases {
            assert_eq!(check_insert_child(&s, parent, dst), want, "{parent} {dst}");
            let mut t = s.clone();
            assert_eq!(insert_child(&mut t, parent, dst, ep(7)), want);
            if want.is_err() {
                assert_eq!(t, s, "a refused insert changes nothing");
            }
        }
        // A corrupt head of the child list: refused, nothing changed.
        let mut bad = s.clone();
        bad.slots[1].prev_sibling = Some(id(2));
        assert_eq!(
            check_insert_child(&bad, id(0), id(3)),
            Err(CapError::Corrupt)
        );
        let before = bad.clone();
        assert_eq!(
            insert_child(&mut bad, id(0), id(3), ep(7)),
            Err(CapError::Corrupt)
        );
        assert_eq!(bad, before);
        // Check all, then insert all: every insert succeeds.
        let dsts = [id(3), id(4), id(5), id(6), id(7)];
        for d in dsts {
            check_insert_child(&s, id(0), d).unwrap();
        }
        for d in dsts {
            insert_child(&mut s, id(0), d, ep(1)).unwrap();
        }
        check_invariants(&s);
        assert_eq!(kids(&s, 0), [7, 6, 5, 4, 3, 1]);
    }

    // ----- randomized test against a model --------------------------------

    use formats::test_rng::Rng;

    /// The CDT as a plain parent map.
    #[derive(Clone)]
    struct Model {
        caps: Vec<Option<Capability>>,
        parent: Vec<Option<usize>>,
    }

    impl Model {
        fn slot(&self, i: u64) -> Result<usize, CapError> {
            usize::try_from(i)
                .ok()
                .filter(|&u| u < self.caps.len())
                .ok_or(CapError::NoSuchSlot(id(i)))
        }
        fn full(&self, i: u64) -> Result<(usize, Capability), CapError> {
            let u = self.slot(i)?;
            self.caps[u].map(|c| (u, c)).ok_or(CapError::Empty(id(i)))
        }
        fn vacant(&self, i: u64) -> Result<usize, CapError> {
            let u = self.slot(i)?;
            if self.caps[u].is_some() {
                return Err(CapError::Occupied(id(i)));
            }
            Ok(u)
        }
        fn is_descendant(&self, mut c: usize, of: usize) -> bool {
            while let Some(p) = self.parent[c] {
                if p == of {
                    return true;
                }
                c = p;
            }
            false
        }
    }

    fn key(c: &Capability) -> (u64, u64, u64, u64, u64) {
        (c.kind as u64, c.object, c.rights.raw(), c.badge, c.extra)
    }

    fn compare(store: &VecStore, model: &Model) {
        check_invariants(store);
        for (i, slot) in store.slots.iter().enumerate() {
            assert_eq!(slot.cap, model.caps[i], "cap of slot {i}");
            assert_eq!(
                slot.parent.map(|p| p.0 as usize),
                model.parent[i],
                "parent of slot {i}"
            );
        }
    }

    fn random_cap(rng: &mut Rng, object: u64) -> Capability {
        Capability {
            kind: ObjectType::from_raw(rng.below(8)).unwrap(),
            object,
            rights: Rights::from_raw(rng.below(8)).unwrap(),
            badge: if rng.below(4) == 0 { rng.below(5) } else { 0 },
            extra: rng.below(3),
        }
    }

    /// What a run exercised, so the test can insist it was not trivial.
    #[derive(Default)]
    struct Stats {
        ok: [u32; 7],
        err: [u32; 7],
        revoked: usize,
        max_depth: usize,
    }

    fn random_run(seed: u64, ops: usize, stats: &mut Stats) {
        const N: usize = 64;
        let mut rng = Rng(seed | 1);
        let mut store = VecStore::new(N);
        let mut model = Model {
            caps: vec![None; N],
            parent: vec![None; N],
        };
        // Slightly out of range ids hit the NoSuchSlot paths.
        let pick = |rng: &mut Rng| rng.below(N as u64 + 2);
        for op in 0..ops {
            let before = store.clone();
            let mut removed: Vec<Capability> = Vec::new();
            let mut expect_removed: Vec<Capability> = Vec::new();
            // Mostly a full source and an empty destination, so that most
            // operations succeed and trees grow; otherwise anything.
            let choose = |want_full: bool, rng: &mut Rng| {
                let fitting: Vec<u64> = (0..N as u64)
                    .filter(|&i| model.caps[i as usize].is_some() == want_full)
                    .collect();
                if fitting.is_empty() || rng.below(5) == 0 {
                    pick(rng)
                } else {
                    fitting[rng.below(fitting.len() as u64) as usize]
                }
            };
            let a = choose(true, &mut rng);
            let b = choose(false, &mut rng);
            let object = op as u64;
            let kind = rng.below(16);
            let (got, want): (Result<usize, CapError>, Result<usize, CapError>) = match kind {
                0..=1 => {
                    let cap = random_cap(&mut rng, object);
                    let want = model.vacant(b).map(|u| {
                        model.caps[u] = Some(cap);
                        0
                    });
                    (insert_root(&mut store, id(b), cap).map(|()| 0), want)
                }
                2..=3 => {
                    let cap = random_cap(&mut rng, object);
                    let want = model.full(a).and_then(|(p, _)| {
                        let d = model.vacant(b)?;
                        model.caps[d] = Some(cap);
                        model.parent[d] = Some(p);
                        Ok(0)
                    });
                    (
                        insert_child(&mut store, id(a), id(b), cap).map(|()| 0),
                        want,
                    )
                }
                4..=6 => {
                    let want = model.full(a).and_then(|(p, cap)| {
                        let d = model.vacant(b)?;
                        model.caps[d] = Some(cap);
                        model.parent[d] = Some(p);
                        Ok(0)
                    });
                    (copy(&mut store, id(a), id(b)).map(|()| 0), want)
                }
                7..=9 => {
                    let rights = Rights::from_raw(rng.below(8)).unwrap();
                    let badge = if rng.below(2) == 0 {
                        0
                    } else {
                        1 + rng.below(3)
                    };
                    let want = model.full(a).and_then(|(p, cap)| {
                        let d = model.vacant(b)?;
                        if !cap.rights.contains(rights) {
                            return Err(CapError::MissingRights);
                        }
                        let badgeable =
                            matches!(cap.kind, ObjectType::Endpoint | ObjectType::Notification);
                        if badge != 0 && (!badgeable || cap.badge != 0) {
                            return Err(CapError::InvalidArgument);
                        }
                        let badge = if badge == 0 { cap.badge } else { badge };
                        model.caps[d] = Some(Capability {
                            rights,
                            badge,
                            ..cap
                        });
                        model.parent[d] = Some(p);
                        Ok(0)
                    });
                    (
                        mint(&mut store, id(a), id(b), rights, badge).map(|()| 0),
                        want,
                    )
                }
                10..=11 => {
                    let want = model.full(a).map(|(u, cap)| {
                        for c in 0..N {
                            if model.parent[c] == Some(u) {
                                model.parent[c] = model.parent[u];
                            }
                        }
                        model.caps[u] = None;
                        model.parent[u] = None;
                        expect_removed.push(cap);
                        0
                    });
                    (
                        delete(&mut store, id(a), |_, c| removed.push(*c)).map(|()| 0),
                        want,
                    )
                }
                12..=13 => {
                    let want = model.slot(b).and(model.full(a)).map(|(u, _)| {
                        // Revoke `a`, but only when `b` is in range, to make
                        // revokes rarer than inserts so trees grow deep.
                        let doomed: Vec<usize> = (0..N)
                            .filter(|&c| model.caps[c].is_some() && model.is_descendant(c, u))
                            .collect();
                        for &c in &doomed {
                            expect_removed.push(model.caps[c].unwrap());
                            model.caps[c] = None;
                        }
                        for &c in &doomed {
                            model.parent[c] = None;
                        }
                        doomed.len()
                    });
                    let got = match want {
                        Err(CapError::NoSuchSlot(x)) if x == id(b) => Err(CapError::NoSuchSlot(x)),
                        _ => revoke(&mut store, id(a), |_, c| removed.push(*c)),
                    };
                    (got, want)
                }
                _ => {
                    let want = model.full(a).and_then(|(s, cap)| {
                        let d = model.vacant(b)?;
                        for c in 0..N {
                            if model.parent[c] == Some(s) {
                                model.parent[c] = Some(d);
                            }
                        }
                        model.caps[d] = Some(cap);
                        model.parent[d] = model.parent[s];
                        model.caps[s] = None;
                        model.parent[s] = None;
                        Ok(0)
                    });
                    (move_cap(&mut store, id(a), id(b)).map(|()| 0), want)
                }
            };
            assert_eq!(got, want, "seed {seed} op {op}");
            let bucket = [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 5, 5, 6, 6][kind as usize];
            match got {
                Ok(n) => {
                    stats.ok[bucket] += 1;
                    if bucket == 5 {
                        stats.revoked += n;
                    }
                }
                Err(_) => stats.err[bucket] += 1,
            }
            for c in 0..N {
                let mut depth = 0;
                let mut cur = c;
                while let Some(p) = model.parent[cur] {
                    depth += 1;
                    cur = p;
                }
                stats.max_depth = stats.max_depth.max(depth);
            }
            if got.is_err() {
                assert_eq!(
                    store, before,
                    "seed {seed} op {op}: failed op changed the store"
                );
            }
            let mut r: Vec<_> = removed.iter().map(key).collect();
            let mut e: Vec<_> = expect_removed.iter().map(key).collect();
            r.sort_unstable();
            e.sort_unstable();
            assert_eq!(r, e, "seed {seed} op {op}: removed caps");
            compare(&store, &model);
        }
    }

    #[test]
    fn randomized_against_model() {
        let mut stats = Stats::default();
        for seed in 1..=20u64 {
            random_run(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), 2_000, &mut stats);
        }
        // Every operation both succeeded and failed many times, revokes
        // removed real subtrees, and trees got deeper than a few levels.
        assert!(stats.ok.iter().chain(&stats.err).all(|&n| n >= 50));
        assert!(stats.revoked >= 1_000);
        assert!(stats.max_depth >= 5);
    }
}
