//! Kernel objects and capability spaces.
//!
//! Every kernel object lives in physical memory that a capability to
//! untyped memory paid for (`Retype`), or, for root's own objects, that the
//! kernel took at boot. Capabilities name objects by physical address
//! (`Capability::object`); the kernel reaches them through the direct map.
//!
//! | object | size | layout |
//! |--------|------|--------|
//! | thread | 2 KiB | [`crate::thread::Thread`] |
//! | endpoint | 64 B | [`Endpoint`] |
//! | notification | 64 B | [`Notification`] |
//! | capability table | 2^n slots of 128 B | slot 0 holds the [`TableHeader`]; slots 1.. are capability slots |
//! | address space | see [`crate::vspace`] | |
//! | frame, untyped | the memory itself | no header |
//!
//! # Reference counts and destruction
//!
//! Threads, endpoints, notifications, capability tables and address spaces
//! count the capabilities that name them (`refs`): retype makes the first,
//! every copy, mint and transfer adds one, and [`on_cap_removed`] — the
//! callback of every `kcore::cap` delete and revoke — drops one. At zero the
//! object is destroyed: threads stop and leave every queue, endpoint and
//! notification waiters get `Aborted`, address spaces release their ASID.
//! A capability table's slots, and a thread's own slots, are emptied after
//! the operation that destroyed them (they are slots: the callback cannot
//! touch slots), through the [`PENDING`] list that [`finish_deletions`]
//! works off. Because every capability to an object made from an untyped
//! is in that untyped's derivation subtree, revoking the untyped destroys
//! all of them, so its memory is free to be retyped again: that is the
//! only way memory is reused, which makes kernel memory accounting exact.
//!
//! Frames and untyped memory carry no count: deleting a frame capability
//! unmaps that capability's mapping (one per capability). A reply
//! capability is the only one naming its caller's pending reply: removing
//! it unanswered aborts that call (`crate::reply`).
//!
//! # Capability addresses
//!
//! [`resolve`] turns a user's capability address (`abi::caddr`) into a
//! [`SlotId`], the slot's kernel virtual address, checking the table, the
//! index and (for the two-level form) the table capability's rights.

use abi::{Error, ObjectType, Rights};
use kcore::cap::{self, Capability, Slot, SlotId, SlotStore};
use spin::Mutex;

use crate::mm::phys_to_virt;
use crate::thread::{self, t, Queue, State, ThreadQueue, ThreadRef};

const SLOT_BYTES: u64 = 1 << abi::object::SLOT_BYTES_BITS;
const _: () = assert!(core::mem::size_of::<Slot>() as u64 <= SLOT_BYTES);
const _: () = assert!(core::mem::size_of::<TableHeader>() as u64 <= SLOT_BYTES);
const _: () = assert!(core::mem::size_of::<Endpoint>() as u64 <= 1 << abi::object::ENDPOINT_BITS);
const _: () =
    assert!(core::mem::size_of::<Notification>() as u64 <= 1 << abi::object::NOTIFICATION_BITS);

/// The slot store over kernel memory: a [`SlotId`] is a slot's kernel
/// virtual address. Ids come only from [`resolve`], from thread control
/// blocks and from the derivation links the kernel itself wrote, so they
/// always name real slots.
pub struct KernelSlots;

impl SlotStore for KernelSlots {
    fn get(&self, id: SlotId) -> Option<&Slot> {
        // SAFETY: see the type doc: ids name slots in live kernel objects;
        // interrupts are disabled, so no other reference is in use.
        unsafe { (id.0 as *const Slot).as_ref() }
    }

    fn get_mut(&mut self, id: SlotId) -> Option<&mut Slot> {
        // SAFETY: as in `get`.
        unsafe { (id.0 as *mut Slot).as_mut() }
    }
}

/// The slot at `id`, for reading.
pub fn slot(id: SlotId) -> &'static mut Slot {
    // SAFETY: as for KernelSlots::get.
    unsafe { &mut *(id.0 as *mut Slot) }
}

/// A thread control block's own slot, as an id.
pub fn slot_id(slot: &Slot) -> SlotId {
    SlotId(slot as *const Slot as u64)
}

// ---------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------

/// Slot 0 of every capability table: the table's bookkeeping. Its first
/// word sits where a slot's capability kind is and holds a value that is
/// no object type ([`TableHeader::NOT_A_CAPABILITY`]), so slot 0 reads as
/// empty to code that indexes the table without excluding index 0 (the
/// IPC fast path relies on this instead of a separate check).
#[repr(C)]
pub struct TableHeader {
    pub not_a_capability: u64,
    pub refs: u64,
    pub bits: u64,
    /// Link in the list of destroyed objects (see [`PENDING`]).
    pub pending_next: u64,
}

impl TableHeader {
    pub const NOT_A_CAPABILITY: u64 = u64::MAX;
}
const _: () = assert!(abi::ObjectType::from_raw(TableHeader::NOT_A_CAPABILITY).is_none());
const _: () = assert!(
    core::mem::offset_of!(TableHeader, not_a_capability)
        == core::mem::offset_of!(Slot, cap) + core::mem::offset_of!(Capability, kind)
);

/// What an endpoint's queue holds. Encoding fixed: the IPC fast path reads
/// and writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EndpointState {
    Idle = 0,
    /// The queue holds senders.
    Send = 1,
    /// The queue holds receivers.
    Recv = 2,
}

/// An endpoint. Invariant: `state` is `Idle` exactly when `queue` is empty
/// (the IPC fast path takes the head of a `Recv` queue without a check).
#[repr(C)]
pub struct Endpoint {
    pub refs: u64,
    pub queue: ThreadQueue,
    pub state: EndpointState,
    /// The CPU whose IPC fast path may use this endpoint while running
    /// without the big kernel lock (`smp.rs`, "Same-CPU IPC without the
    /// lock"): fast paths of other CPUs leave it to the slow path, so two
    /// never change `queue` at once. Only lock holders change it (`recv`
    /// gives it to the CPU of the receiver it queues); any value is safe.
    /// Right after `state`: the fast path compares both as one word
    /// ([`fast_path_endpoint_word`]).
    pub fast_cpu: u8,
}

const _: () = assert!(
    core::mem::offset_of!(Endpoint, fast_cpu) == core::mem::offset_of!(Endpoint, state) + 1
        && crate::arch::percpu::MAX_CPUS <= 256
);

/// An endpoint's `state` and `fast_cpu` as the 16-bit word the fast path
/// compares (little endian: `state` is the low byte).
pub const fn fast_path_endpoint_word(cpu: usize, state: EndpointState) -> u16 {
    ((cpu as u16) << 8) | state as u16
}

#[repr(C)]
pub struct Notification {
    pub refs: u64,
    pub word: u64,
    /// Threads blocked in `Wait`.
    pub waiters: ThreadQueue,
    /// The thread this notification is bound to (see `BindNotification`).
    pub bound: Option<ThreadRef>,
}

/// The kernel object at physical address `phys` as a `T`.
pub fn object<T>(phys: u64) -> &'static mut T {
    // SAFETY: callers pass the `object` field of a capability of the
    // matching kind (or memory they just retyped); that memory holds a live
    // T, direct-mapped, and interrupts are disabled, so no other reference
    // is in use.
    unsafe { &mut *(phys_to_virt(phys) as *mut T) }
}

pub fn endpoint(phys: u64) -> &'static mut Endpoint {
    object(phys)
}

pub fn notification(phys: u64) -> &'static mut Notification {
    object(phys)
}

pub fn thread_at(phys: u64) -> ThreadRef {
    // SAFETY: `phys` is a thread capability's object: a live Thread.
    unsafe { ThreadRef::from_ptr(phys_to_virt(phys) as *mut thread::Thread) }
}

pub fn table_header(phys: u64) -> &'static mut TableHeader {
    object(phys)
}

/// Initialises a freshly retyped (zeroed) object of `kind` at `phys`.
/// `size_bits` is the Retype argument.
pub fn init_object(kind: ObjectType, phys: u64, size_bits: u64) {
    match kind {
        ObjectType::Thread => {
            // SAFETY: fresh, exclusively owned memory of the thread size,
            // aligned to it.
            unsafe { thread::init_at(phys_to_virt(phys) as *mut thread::Thread) };
        }
        ObjectType::Endpoint => {
            *endpoint(phys) = Endpoint {
                refs: 1,
                queue: ThreadQueue::EMPTY,
                state: EndpointState::Idle,
                fast_cpu: 0,
            };
        }
        ObjectType::Notification => {
            *notification(phys) = Notification {
                refs: 1,
                word: 0,
                waiters: ThreadQueue::EMPTY,
                bound: None,
            };
        }
        ObjectType::CapTable => {
            *table_header(phys) = TableHeader {
                not_a_capability: TableHeader::NOT_A_CAPABILITY,
                refs: 1,
                bits: size_bits,
                pending_next: 0,
            };
            // Zeroed memory is not an empty slot (`Option<Capability>` uses
            // a niche), so every slot is written explicitly.
            let first = phys_to_virt(phys) + SLOT_BYTES;
            for i in 0..(1u64 << size_bits) - 1 {
                // SAFETY: slot i + 1 of the fresh table, inside the object.
                unsafe { ((first + i * SLOT_BYTES) as *mut Slot).write(Slot::default()) };
            }
        }
        ObjectType::AddressSpace => crate::vspace::init(phys, size_bits),
        ObjectType::Untyped
        | ObjectType::Frame4K
        | ObjectType::Frame2M
        | ObjectType::IrqHandler
        | ObjectType::IoPorts
        | ObjectType::Reply => {}
    }
}

/// The capability that `Retype` puts in a slot for a new object.
pub fn new_cap(kind: ObjectType, phys: u64, size_bits: u64) -> Capability {
    let mut cap = Capability::new(kind, phys, Rights::ALL);
    match kind {
        ObjectType::CapTable => cap.extra = table_slots(size_bits),
        ObjectType::Untyped => cap.badge = untyped_badge(size_bits as u32, false),
        _ => {}
    }
    cap
}

/// A capability table's capability keeps the table's number of slots (2^n,
/// slot 0 included) in `extra`, so that a bounds check is one comparison.
pub const fn table_slots(size_bits: u64) -> u64 {
    1 << size_bits
}

// Untyped capabilities keep their size and device flag in `badge` (which
// nobody can set on them: mint only badges endpoints and notifications) and
// their watermark in `extra`.
pub const fn untyped_badge(size_bits: u32, device: bool) -> u64 {
    size_bits as u64 | if device { 1 << 8 } else { 0 }
}
pub const fn untyped_size_bits(cap: &Capability) -> u32 {
    (cap.badge & 0xff) as u32
}
pub const fn untyped_is_device(cap: &Capability) -> bool {
    cap.badge & (1 << 8) != 0
}

/// Counts one more capability to the object `cap` names.
pub fn add_ref(cap: &Capability) {
    if let Some(refs) = refs_of(cap) {
        *refs += 1;
    }
}

fn refs_of(cap: &Capability) -> Option<&'static mut u64> {
    Some(match cap.kind {
        ObjectType::Thread => &mut t!(thread_at(cap.object)).refs,
        ObjectType::Endpoint => &mut endpoint(cap.object).refs,
        ObjectType::Notification => &mut notification(cap.object).refs,
        ObjectType::CapTable => &mut table_header(cap.object).refs,
        ObjectType::AddressSpace => &mut crate::vspace::header(cap.object).refs,
        _ => return None,
    })
}

/// Destroyed capability tables and threads whose slots must still be
/// emptied: an intrusive list through the dead objects themselves
/// (`TableHeader::pending_next`, `Thread::pending_next`), so that a cascade
/// of any size needs no kernel memory. The head is the object's physical
/// address, tagged with [`PENDING_THREAD`] for threads (objects are at
/// least 256-byte aligned, so the low bits are free); 0 = empty.
static PENDING: Mutex<u64> = Mutex::new(0);
const PENDING_THREAD: u64 = 1;

fn push_pending(phys: u64, is_thread: bool) {
    let mut head = PENDING.lock();
    if is_thread {
        t!(thread_at(phys)).pending_next = *head;
        *head = phys | PENDING_THREAD;
    } else {
        table_header(phys).pending_next = *head;
        *head = phys;
    }
}

/// The next dead object's slots to empty.
fn pop_pending() -> Option<PendingSlots> {
    let mut head = PENDING.lock();
    let entry = *head;
    if entry == 0 {
        return None;
    }
    let phys = entry & !PENDING_THREAD;
    if entry & PENDING_THREAD != 0 {
        let thread = t!(thread_at(phys));
        *head = thread.pending_next;
        Some(PendingSlots::Thread([
            slot_id(&thread.cspace),
            slot_id(&thread.vspace),
            slot_id(&thread.fault_endpoint),
        ]))
    } else {
        let header = table_header(phys);
        *head = header.pending_next;
        Some(PendingSlots::Table {
            first: phys_to_virt(phys) + SLOT_BYTES,
            count: (1u64 << header.bits) - 1,
        })
    }
}

enum PendingSlots {
    Table { first: u64, count: u64 },
    Thread([SlotId; 3]),
}

/// The `on_removed` callback for every kcore::cap delete and revoke.
pub fn on_cap_removed(slot: SlotId, cap: &Capability) {
    if cap.kind == ObjectType::Frame4K || cap.kind == ObjectType::Frame2M {
        crate::vspace::unmap_cap(cap);
        return;
    }
    if cap.kind == ObjectType::IrqHandler {
        return;
    }
    if cap.kind == ObjectType::Reply {
        crate::reply::removed(slot, cap);
        return;
    }
    let Some(refs) = refs_of(cap) else { return };
    *refs = refs.saturating_sub(1);
    if *refs > 0 {
        return;
    }
    match cap.kind {
        ObjectType::Thread => destroy_thread(thread_at(cap.object)),
        ObjectType::Endpoint => {
            let ep = endpoint(cap.object);
            while let Some(w) = ep.queue.pop_front() {
                abort(w);
            }
            ep.state = EndpointState::Idle;
        }
        ObjectType::Notification => {
            let n = notification(cap.object);
            while let Some(w) = n.waiters.pop_front() {
                abort(w);
            }
            if let Some(b) = n.bound.take() {
                t!(b).bound_notification = 0;
            }
            crate::irq::notification_destroyed(cap.object);
        }
        ObjectType::CapTable => push_pending(cap.object, false),
        ObjectType::AddressSpace => crate::vspace::destroy(cap.object),
        _ => {}
    }
}

/// Ends a thread's IPC wait (or a thread's wait for a reply) with `Aborted`
/// and makes it runnable. A thread waiting to deliver a fault is resumed
/// without a result: it retries the instruction and faults again.
pub fn abort(w: ThreadRef) {
    let thread = t!(w);
    match (thread.state, thread.send_kind) {
        (State::BlockedSend, thread::SendKind::Exit) => {
            thread::set_state(w, State::Inactive);
            return;
        }
        (State::BlockedSend, thread::SendKind::Fault) => {}
        _ => thread.frame().rax = Error::Aborted.raw(),
    }
    thread.reply_from = None;
    thread::make_runnable(w);
}

/// Takes a thread out of whatever it waits in, without waking it.
pub fn cancel_ipc(t: ThreadRef) {
    let thread = t!(t);
    match thread.queue {
        Queue::Run => thread::remove_from_run_queue(t),
        Queue::Object(phys) => match thread.state {
            State::BlockedNotification => notification(phys).waiters.remove(t),
            _ => {
                let ep = endpoint(phys);
                ep.queue.remove(t);
                if ep.queue.is_empty() {
                    ep.state = EndpointState::Idle;
                }
            }
        },
        Queue::None => {}
    }
    if let Some(server) = thread.reply_from.take() {
        t!(server).caller = None;
    }
    crate::reply::caller_gone(thread);
}

/// The thread whose call (or fault) `server` received will get no reply
/// from it: an ordinary caller gets `Aborted` and runs again, a faulting
/// thread stays stopped.
pub fn abandon_caller(server: ThreadRef) {
    let Some(c) = t!(server).caller.take() else {
        return;
    };
    t!(c).reply_from = None;
    no_reply(c);
}

/// `c`, no longer linked to a server or a reply capability, will get no
/// reply: `Aborted`, or, for a fault, it stays stopped.
pub fn no_reply(c: ThreadRef) {
    let caller = t!(c);
    if caller.reply_is_fault {
        caller.reply_is_fault = false;
        thread::set_state(c, State::Inactive);
    } else {
        caller.frame().rax = Error::Aborted.raw();
        thread::make_runnable(c);
    }
}

/// Stops a thread for good (its last capability went): leaves every queue
/// and link, and its own slots are emptied.
fn destroy_thread(t: ThreadRef) {
    crate::arch::fpu::forget(t.as_ptr());
    cancel_ipc(t);
    abandon_caller(t);
    let thread = t!(t);
    if thread.bound_notification != 0 {
        notification(thread.bound_notification).bound = None;
        thread.bound_notification = 0;
    }
    thread::set_state(t, State::Inactive);
    push_pending(thread.object_phys(), true);
}

/// Empties the slots queued by destroyed tables and threads, which may
/// destroy further objects; returns when nothing is left. Called at the end
/// of every operation that can remove capabilities.
pub fn finish_deletions() {
    while let Some(pending) = pop_pending() {
        match pending {
            PendingSlots::Table { first, count } => {
                for i in 0..count {
                    empty_slot(SlotId(first + i * SLOT_BYTES));
                }
            }
            PendingSlots::Thread(slots) => slots.into_iter().for_each(empty_slot),
        }
    }
}

fn empty_slot(id: SlotId) {
    if slot(id).cap.is_some() {
        // Errors mean corrupt links, which the checks in kcore::cap report
        // without changing anything; the slot stays as it is.
        if let Err(e) = cap::delete(&mut KernelSlots, id, on_cap_removed) {
            crate::kprintln!("kernel: warning: cleaning up {id}: {e}");
        }
    }
}

/// Deletes the capability in `id` (if any) and everything that goes with it.
pub fn delete_slot(id: SlotId) -> Result<(), Error> {
    let r = cap::delete(&mut KernelSlots, id, on_cap_removed);
    finish_deletions();
    r.map_err(Error::from)
}

// ---------------------------------------------------------------------------
// Capability addresses
// ---------------------------------------------------------------------------

/// Access a slot is resolved for (decides the right needed on a table named
/// by the two-level form).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// The slot `addr` names in the capability space of `thread`.
pub fn resolve(thread: &thread::Thread, addr: u64, access: Access) -> Result<SlotId, Error> {
    let (table, index) = abi::caddr::split(addr);
    let (mut phys, mut slots) = match thread.cspace.cap {
        Some(c) if c.kind == ObjectType::CapTable => (c.object, c.extra),
        _ => return Err(Error::InvalidSlot),
    };
    if table != 0 {
        let id = slot_in(phys, slots, table)?;
        let c = slot(id).cap.ok_or(Error::EmptySlot)?;
        if c.kind != ObjectType::CapTable {
            return Err(Error::WrongObjectType);
        }
        let need = match access {
            Access::Read => Rights::READ,
            Access::Write => Rights::WRITE,
        };
        if !c.rights.contains(need) {
            return Err(Error::MissingRights);
        }
        (phys, slots) = (c.object, c.extra);
    }
    slot_in(phys, slots, index)
}

/// Slot `index` of the table at `table_phys` with `slots` slots (the
/// table capability's `extra`); slot 0 is the header, not a slot.
fn slot_in(table_phys: u64, slots: u64, index: u32) -> Result<SlotId, Error> {
    let index = u64::from(index);
    if index == 0 || index >= slots {
        return Err(Error::InvalidSlot);
    }
    Ok(SlotId(phys_to_virt(table_phys) + index * SLOT_BYTES))
}

/// The `n`-th slot after `id` in the same table (for Retype's range),
/// checked against the table's size.
pub fn resolve_range(thread: &thread::Thread, addr: u64, count: u64) -> Result<SlotId, Error> {
    let first = resolve(thread, addr, Access::Write)?;
    let (_, index) = abi::caddr::split(addr);
    let last_index = u64::from(index)
        .checked_add(count.saturating_sub(1))
        .ok_or(Error::InvalidSlot)?;
    let last = u32::try_from(last_index).map_err(|_| Error::InvalidSlot)?;
    let (table, _) = abi::caddr::split(addr);
    resolve(thread, abi::caddr::in_table(table, last), Access::Write)?;
    Ok(first)
}

/// The slot `n` places after `first` in its table.
pub fn nth_slot(first: SlotId, n: u64) -> SlotId {
    SlotId(first.0 + n * SLOT_BYTES)
}

/// Looks up a capability of `kind` with `rights` at `addr`.
pub fn lookup(
    thread: &thread::Thread,
    addr: u64,
    kind: ObjectType,
    rights: Rights,
) -> Result<(SlotId, Capability), Error> {
    let id = resolve(thread, addr, Access::Read)?;
    let c = slot(id).cap.ok_or(Error::EmptySlot)?;
    if c.kind != kind {
        return Err(Error::WrongObjectType);
    }
    if !c.rights.contains(rights) {
        return Err(Error::MissingRights);
    }
    Ok((id, c))
}
