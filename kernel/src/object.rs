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
//! | address space, guest space | see [`crate::vspace`] | |
//! | virtual CPU | 8 KiB | see [`crate::vcpu`] |
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
//!
//! # Access
//!
//! Objects and slots are reached through the kernel token (`token.rs`):
//! slots through the whole [`Kernel`] ([`Kernel::slot`],
//! [`Kernel::slot_mut`]; `Kernel` is also the `kcore::cap` slot store),
//! endpoints, notifications and table headers through its [`Objects`]
//! part. Objects are named by physical address, so those accessors are
//! `unsafe fn`s: the address must name a live object of the type — the
//! `object` of a capability of that kind (a capability keeps its object
//! alive), a thread's `queue` or `bound_notification` link (kept exact by
//! the kernel), or memory just retyped. Memory stays the object it was
//! made as until its untyped memory is revoked and retyped, which is a
//! system call of its own: within one kernel entry an address found valid
//! stays valid, even if the object was destroyed meanwhile (its slots are
//! emptied, its queues drained).

use abi::{Error, ObjectType, Rights};
use kcore::cap::{self, Capability, Slot, SlotId, SlotStore};
use kcore::typed::{CapTableCap, FrameCap, UntypedCap};
use spin::Mutex;

use crate::mm::phys_to_virt;
use crate::thread::{self, Queue, State, ThreadQueue, ThreadRef};
use crate::token::{Kernel, Objects};

const SLOT_BYTES: u64 = 1 << abi::object::SLOT_BYTES_BITS;
const _: () = assert!(core::mem::size_of::<Slot>() as u64 <= SLOT_BYTES);
const _: () = assert!(core::mem::size_of::<TableHeader>() as u64 <= SLOT_BYTES);
const _: () = assert!(core::mem::size_of::<Endpoint>() as u64 <= 1 << abi::object::ENDPOINT_BITS);
const _: () =
    assert!(core::mem::size_of::<Notification>() as u64 <= 1 << abi::object::NOTIFICATION_BITS);

/// The slot store over kernel memory is the kernel token itself: a
/// [`SlotId`] is a slot's kernel virtual address, and `kcore::cap`'s
/// operations borrow the token for as long as they hold a slot. Ids come
/// only from [`resolve`], from thread control blocks and from the
/// derivation links the kernel itself wrote, so they always name real
/// slots.
impl SlotStore for Kernel {
    #[inline(always)]
    fn get(&self, id: SlotId) -> Option<&Slot> {
        Some(self.slot(id))
    }

    #[inline(always)]
    fn get_mut(&mut self, id: SlotId) -> Option<&mut Slot> {
        Some(self.slot_mut(id))
    }
}

impl Kernel {
    /// The slot at `id`, to read.
    #[inline(always)]
    pub fn slot(&self, id: SlotId) -> &Slot {
        // SAFETY: `id` names a slot in a live capability table or thread
        // (see `SlotStore for Kernel`); the token is borrowed shared, so no
        // `&mut` into a slot (or a thread, which holds slots) is live.
        unsafe { &*(id.0 as *const Slot) }
    }

    /// The slot at `id`, to change.
    #[inline(always)]
    pub fn slot_mut(&mut self, id: SlotId) -> &mut Slot {
        // SAFETY: as in `slot`; the token is borrowed mutably.
        unsafe { &mut *(id.0 as *mut Slot) }
    }
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

/// Object access through the token's [`Objects`] part (module doc,
/// "Access").
impl Objects {
    /// The kernel object at physical address `phys` as a `T`.
    ///
    /// # Safety
    /// `phys` names a live `T` (module doc, "Access").
    #[inline(always)]
    pub unsafe fn object_mut<T>(&mut self, phys: u64) -> &mut T {
        // SAFETY: the caller's promise; direct-mapped; the token is
        // borrowed mutably for the reference's lifetime.
        unsafe { &mut *(phys_to_virt(phys) as *mut T) }
    }

    /// # Safety
    /// `phys` names a live `T` (module doc, "Access").
    #[inline(always)]
    pub unsafe fn object<T>(&self, phys: u64) -> &T {
        // SAFETY: as in `object_mut`, borrowed shared.
        unsafe { &*(phys_to_virt(phys) as *const T) }
    }

    /// # Safety
    /// `phys` names a live endpoint.
    #[inline(always)]
    pub unsafe fn endpoint_mut(&mut self, phys: u64) -> &mut Endpoint {
        // SAFETY: the caller's promise.
        unsafe { self.object_mut(phys) }
    }

    /// # Safety
    /// `phys` names a live notification.
    #[inline(always)]
    pub unsafe fn notification(&self, phys: u64) -> &Notification {
        // SAFETY: the caller's promise.
        unsafe { self.object(phys) }
    }

    /// # Safety
    /// `phys` names a live notification.
    #[inline(always)]
    pub unsafe fn notification_mut(&mut self, phys: u64) -> &mut Notification {
        // SAFETY: the caller's promise.
        unsafe { self.object_mut(phys) }
    }

    /// # Safety
    /// `phys` names a live capability table.
    #[inline(always)]
    pub unsafe fn table_header_mut(&mut self, phys: u64) -> &mut TableHeader {
        // SAFETY: the caller's promise (the header is the table's slot 0).
        unsafe { self.object_mut(phys) }
    }
}

/// The thread at physical address `phys`.
///
/// # Safety
/// `phys` names a live thread: the object of a thread capability, or
/// memory just retyped as one.
pub unsafe fn thread_at(phys: u64) -> ThreadRef {
    // SAFETY: the caller's promise.
    unsafe { ThreadRef::from_ptr(phys_to_virt(phys) as *mut thread::Thread) }
}

/// Initialises a freshly retyped (zeroed) object of `kind` at `phys`.
/// `size_bits` is the Retype argument.
///
/// # Safety
/// `phys` is fresh memory of the object's size, aligned to it, that
/// nothing else uses (just retyped, or taken from the frame allocator).
pub unsafe fn init_object(k: &mut Kernel, kind: ObjectType, phys: u64, size_bits: u64) {
    match kind {
        ObjectType::Thread => {
            // SAFETY: the caller's promise.
            unsafe { thread::init_at(phys_to_virt(phys) as *mut thread::Thread) };
        }
        ObjectType::Endpoint => {
            // SAFETY: the caller's promise; written, not read, below.
            let ep = unsafe { k.objects.endpoint_mut(phys) };
            *ep = Endpoint {
                refs: 1,
                queue: ThreadQueue::EMPTY,
                state: EndpointState::Idle,
                fast_cpu: 0,
            };
        }
        ObjectType::Notification => {
            // SAFETY: as above.
            let n = unsafe { k.objects.notification_mut(phys) };
            *n = Notification {
                refs: 1,
                word: 0,
                waiters: ThreadQueue::EMPTY,
                bound: None,
            };
        }
        ObjectType::CapTable => {
            // SAFETY: as above.
            let header = unsafe { k.objects.table_header_mut(phys) };
            *header = TableHeader {
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
        // SAFETY: the caller's promise.
        ObjectType::AddressSpace => unsafe { crate::vspace::init(&mut k.objects, phys, size_bits) },
        // SAFETY: the caller's promise.
        ObjectType::GuestSpace => unsafe {
            crate::vspace::init_guest(&mut k.objects, phys, size_bits)
        },
        // SAFETY: the caller's promise.
        ObjectType::Vcpu => unsafe { crate::vcpu::init(phys) },
        ObjectType::Untyped
        | ObjectType::Frame4K
        | ObjectType::Frame2M
        | ObjectType::IrqHandler
        | ObjectType::IoPorts
        | ObjectType::DeviceControl
        | ObjectType::Reply => {}
    }
}

/// The capability that `Retype` puts in a slot for a new object of
/// `2^object_bits` bytes made with `size_bits`, from untyped memory that is
/// `device` memory or not. (The per-kind words: `kcore::typed`.)
pub fn new_cap(
    kind: ObjectType,
    phys: u64,
    size_bits: u64,
    object_bits: u32,
    device: bool,
) -> Capability {
    match kind {
        ObjectType::CapTable => CapTableCap::new(phys, size_bits as u32).to_cap(Rights::ALL),
        ObjectType::Untyped => UntypedCap::new(phys, object_bits, device).to_cap(Rights::ALL),
        _ => Capability::new(kind, phys, Rights::ALL),
    }
}

/// Counts one more capability to the object `cap` names. `cap` is a
/// capability that is in a slot (so its object is live).
pub fn add_ref(k: &mut Kernel, cap: &Capability) {
    if let Some(refs) = refs_of(k, cap) {
        *refs += 1;
    }
}

/// The reference count of the object `cap` names, if it has one. `cap`
/// is (or was, until this kernel entry) in a slot: its object is live
/// (module doc, "Access").
fn refs_of<'k>(k: &'k mut Kernel, cap: &Capability) -> Option<&'k mut u64> {
    Some(match cap.kind {
        ObjectType::Thread => {
            // SAFETY: the object of a thread capability is a live thread.
            let thread = unsafe { thread_at(cap.object) };
            &mut k.threads.get_mut(thread).refs
        }
        ObjectType::Endpoint => {
            // SAFETY: the object of an endpoint capability is a live endpoint.
            &mut unsafe { k.objects.endpoint_mut(cap.object) }.refs
        }
        ObjectType::Notification => {
            // SAFETY: the object of a notification capability is a live
            // notification.
            &mut unsafe { k.objects.notification_mut(cap.object) }.refs
        }
        ObjectType::CapTable => {
            // SAFETY: the object of a table capability is a live table.
            &mut unsafe { k.objects.table_header_mut(cap.object) }.refs
        }
        ObjectType::AddressSpace | ObjectType::GuestSpace => {
            // SAFETY: the object of an address-space (or guest-space)
            // capability is a live address space (the same layout).
            &mut unsafe { crate::vspace::header_mut(&mut k.objects, cap.object) }.refs
        }
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

/// Queues the dead table or thread at `phys` (the object of the
/// capability whose removal destroyed it: still its memory).
fn push_pending(k: &mut Kernel, phys: u64, is_thread: bool) {
    let mut head = PENDING.lock();
    if is_thread {
        // SAFETY: a thread capability's object (see above).
        k.threads.get_mut(unsafe { thread_at(phys) }).pending_next = *head;
        *head = phys | PENDING_THREAD;
    } else {
        // SAFETY: a capability table capability's object (see above).
        unsafe { k.objects.table_header_mut(phys) }.pending_next = *head;
        *head = phys;
    }
}

/// The next dead object's slots to empty.
fn pop_pending(k: &mut Kernel) -> Option<PendingSlots> {
    let mut head = PENDING.lock();
    let entry = *head;
    if entry == 0 {
        return None;
    }
    let phys = entry & !PENDING_THREAD;
    if entry & PENDING_THREAD != 0 {
        // SAFETY: pushed by `push_pending` in this kernel entry (every
        // operation that removes capabilities ends with
        // `finish_deletions`): still the dead thread's memory.
        let thread = k.threads.get(unsafe { thread_at(phys) });
        *head = thread.pending_next;
        Some(PendingSlots::Thread([
            slot_id(&thread.cspace),
            slot_id(&thread.vspace),
            slot_id(&thread.fault_endpoint),
        ]))
    } else {
        // SAFETY: as above, a dead table's memory.
        let header = unsafe { k.objects.table_header_mut(phys) };
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

/// The `on_removed` callback for every kcore::cap delete and revoke (run
/// through [`delete`] and [`revoke`], which lend it the token).
pub fn on_cap_removed(k: &mut Kernel, slot: SlotId, cap: &Capability) {
    if let Some(frame) = FrameCap::from_cap(cap) {
        crate::vspace::unmap_cap(&mut k.objects, &frame);
        return;
    }
    if matches!(cap.kind, ObjectType::Frame4K | ObjectType::Frame2M) {
        return;
    }
    if matches!(cap.kind, ObjectType::IrqHandler | ObjectType::DeviceControl) {
        return;
    }
    if cap.kind == ObjectType::Reply {
        crate::reply::removed(k, slot, cap);
        return;
    }
    let Some(refs) = refs_of(k, cap) else { return };
    *refs = refs.saturating_sub(1);
    if *refs > 0 {
        return;
    }
    match cap.kind {
        // SAFETY: the object of the thread capability just removed.
        ObjectType::Thread => destroy_thread(k, unsafe { thread_at(cap.object) }),
        ObjectType::Endpoint => loop {
            // SAFETY: the object of the endpoint capability just removed
            // (its memory until its untyped memory is reused).
            let ep = unsafe { k.objects.endpoint_mut(cap.object) };
            let Some(w) = ep.queue.pop_front(&mut k.threads) else {
                ep.state = EndpointState::Idle;
                break;
            };
            abort(k, w);
        },
        ObjectType::Notification => {
            loop {
                // SAFETY: as above, a notification.
                let n = unsafe { k.objects.notification_mut(cap.object) };
                let Some(w) = n.waiters.pop_front(&mut k.threads) else {
                    break;
                };
                abort(k, w);
            }
            // SAFETY: as above.
            let n = unsafe { k.objects.notification_mut(cap.object) };
            if let Some(b) = n.bound.take() {
                k.threads.get_mut(b).bound_notification = 0;
            }
            crate::irq::notification_destroyed(cap.object);
        }
        ObjectType::CapTable => push_pending(k, cap.object, false),
        // SAFETY: the object of the address-space capability just removed.
        ObjectType::AddressSpace | ObjectType::GuestSpace => unsafe {
            crate::vspace::destroy(&mut k.objects, cap.object)
        },
        _ => {}
    }
}

/// Ends a thread's IPC wait (or a thread's wait for a reply) with `Aborted`
/// and makes it runnable. A thread waiting to deliver a fault is resumed
/// without a result: it retries the instruction and faults again.
pub fn abort(k: &mut Kernel, w: ThreadRef) {
    let thread = k.threads.get_mut(w);
    match (thread.state, thread.send_kind) {
        (State::BlockedSend, thread::SendKind::Exit) => {
            thread::set_state(&mut k.threads, w, State::Inactive);
            return;
        }
        (State::BlockedSend, thread::SendKind::Fault) => {}
        _ => thread.frame().rax = Error::Aborted.raw(),
    }
    thread.reply_from = None;
    thread::make_runnable(k, w);
}

/// Takes a thread out of whatever it waits in, without waking it.
pub fn cancel_ipc(k: &mut Kernel, t: ThreadRef) {
    let thread = k.threads.get(t);
    match thread.queue {
        Queue::Run => thread::remove_from_run_queue(k, t),
        Queue::Object(phys) => match thread.state {
            State::BlockedNotification => {
                // SAFETY: a thread's queue link names the live notification
                // (or endpoint, below) it waits in.
                let n = unsafe { k.objects.notification_mut(phys) };
                n.waiters.remove(&mut k.threads, t);
            }
            _ => {
                // SAFETY: as above.
                let ep = unsafe { k.objects.endpoint_mut(phys) };
                ep.queue.remove(&mut k.threads, t);
                if ep.queue.is_empty() {
                    ep.state = EndpointState::Idle;
                }
            }
        },
        Queue::None => {}
    }
    if let Some(server) = k.threads.get_mut(t).reply_from.take() {
        k.threads.get_mut(server).caller = None;
    }
    crate::reply::caller_gone(k, t);
}

/// The thread whose call (or fault) `server` received will get no reply
/// from it: an ordinary caller gets `Aborted` and runs again, a faulting
/// thread stays stopped.
pub fn abandon_caller(k: &mut Kernel, server: ThreadRef) {
    let Some(c) = k.threads.get_mut(server).caller.take() else {
        return;
    };
    k.threads.get_mut(c).reply_from = None;
    no_reply(k, c);
}

/// `c`, no longer linked to a server or a reply capability, will get no
/// reply: `Aborted`, or, for a fault, it stays stopped.
pub fn no_reply(k: &mut Kernel, c: ThreadRef) {
    let caller = k.threads.get_mut(c);
    if caller.reply_is_fault {
        caller.reply_is_fault = false;
        thread::set_state(&mut k.threads, c, State::Inactive);
    } else {
        caller.frame().rax = Error::Aborted.raw();
        thread::make_runnable(k, c);
    }
}

/// Stops a thread for good (its last capability went): leaves every queue
/// and link, and its own slots are emptied.
fn destroy_thread(k: &mut Kernel, t: ThreadRef) {
    crate::arch::fpu::forget(&mut k.threads, t);
    cancel_ipc(k, t);
    abandon_caller(k, t);
    let bound = core::mem::take(&mut k.threads.get_mut(t).bound_notification);
    if bound != 0 {
        // SAFETY: a thread's bound notification is live (destroying the
        // notification unbinds it).
        unsafe { k.objects.notification_mut(bound) }.bound = None;
    }
    thread::set_state(&mut k.threads, t, State::Inactive);
    push_pending(k, t.as_ptr() as u64 - crate::mm::DIRECT_MAP_BASE, true);
}

/// Empties the slots queued by destroyed tables and threads, which may
/// destroy further objects; returns when nothing is left. Called at the end
/// of every operation that can remove capabilities.
pub fn finish_deletions(k: &mut Kernel) {
    while let Some(pending) = pop_pending(k) {
        match pending {
            PendingSlots::Table { first, count } => {
                for i in 0..count {
                    empty_slot(k, SlotId(first + i * SLOT_BYTES));
                }
            }
            PendingSlots::Thread(slots) => slots.into_iter().for_each(|id| empty_slot(k, id)),
        }
    }
}

fn empty_slot(k: &mut Kernel, id: SlotId) {
    if k.slot(id).cap.is_some() {
        // Errors mean corrupt links, which the checks in kcore::cap report
        // without changing anything; the slot stays as it is.
        if let Err(e) = delete(k, id) {
            crate::kprintln!("kernel: warning: cleaning up {id}: {e}");
        }
    }
}

/// `kcore::cap::delete` with [`on_cap_removed`] (without
/// [`finish_deletions`]).
pub fn delete(k: &mut Kernel, id: SlotId) -> Result<(), cap::CapError> {
    cap::delete(k, id, |slot, cap| {
        // SAFETY: kcore calls `on_removed` with the removed capability
        // copied out and no slot borrowed; the token it borrows is this
        // CPU's (`Kernel::lent`).
        on_cap_removed(unsafe { Kernel::lent() }, slot, cap)
    })
}

/// `kcore::cap::revoke` with [`on_cap_removed`], then
/// [`finish_deletions`].
pub fn revoke(k: &mut Kernel, id: SlotId) -> Result<usize, cap::CapError> {
    let r = cap::revoke(k, id, |slot, cap| {
        // SAFETY: as in `delete`.
        on_cap_removed(unsafe { Kernel::lent() }, slot, cap)
    });
    finish_deletions(k);
    r
}

/// Deletes the capability in `id` (if any) and everything that goes with it.
pub fn delete_slot(k: &mut Kernel, id: SlotId) -> Result<(), Error> {
    let r = delete(k, id);
    finish_deletions(k);
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

/// The slot `addr` names in the capability space of `thread` (borrowed
/// from `k` like the slots read here).
pub fn resolve(
    k: &Kernel,
    thread: &thread::Thread,
    addr: u64,
    access: Access,
) -> Result<SlotId, Error> {
    let (table, index) = abi::caddr::split(addr);
    let Some(CapTableCap {
        mut phys,
        mut slots,
    }) = thread
        .cspace
        .cap
        .as_ref()
        .and_then(CapTableCap::from_encoded)
    else {
        return Err(Error::InvalidSlot);
    };
    if table != 0 {
        let id = slot_in(phys, slots, table)?;
        let c = k.slot(id).cap.ok_or(Error::EmptySlot)?;
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
        let t = CapTableCap::from_encoded(&c).ok_or(Error::WrongObjectType)?;
        (phys, slots) = (t.phys, t.slots);
    }
    slot_in(phys, slots, index)
}

/// Slot `index` of the table at `table_phys` with `slots` slots (the
/// table capability's `CapTableCap::slots`); slot 0 is the header, not a slot.
fn slot_in(table_phys: u64, slots: u64, index: u32) -> Result<SlotId, Error> {
    let index = u64::from(index);
    if index == 0 || index >= slots {
        return Err(Error::InvalidSlot);
    }
    Ok(SlotId(phys_to_virt(table_phys) + index * SLOT_BYTES))
}

/// How many of the capability table `table`'s slots hold a capability
/// (`Usage`); slot 0, the header, is not a slot. Linear in its slots.
pub fn full_slots(k: &Kernel, table: CapTableCap) -> u64 {
    (1..table.slots)
        .filter(|&i| {
            !k.slot(SlotId(phys_to_virt(table.phys) + i * SLOT_BYTES))
                .is_empty()
        })
        .count() as u64
}

/// The `n`-th slot after `id` in the same table (for Retype's range),
/// checked against the table's size.
pub fn resolve_range(
    k: &Kernel,
    thread: &thread::Thread,
    addr: u64,
    count: u64,
) -> Result<SlotId, Error> {
    let first = resolve(k, thread, addr, Access::Write)?;
    let (_, index) = abi::caddr::split(addr);
    let last_index = u64::from(index)
        .checked_add(count.saturating_sub(1))
        .ok_or(Error::InvalidSlot)?;
    let last = u32::try_from(last_index).map_err(|_| Error::InvalidSlot)?;
    let (table, _) = abi::caddr::split(addr);
    resolve(k, thread, abi::caddr::in_table(table, last), Access::Write)?;
    Ok(first)
}

/// The slot `n` places after `first` in its table.
pub fn nth_slot(first: SlotId, n: u64) -> SlotId {
    SlotId(first.0 + n * SLOT_BYTES)
}

/// Looks up a capability of `kind` with `rights` at `addr`.
pub fn lookup(
    k: &Kernel,
    thread: &thread::Thread,
    addr: u64,
    kind: ObjectType,
    rights: Rights,
) -> Result<(SlotId, Capability), Error> {
    let id = resolve(k, thread, addr, Access::Read)?;
    let c = k.slot(id).cap.ok_or(Error::EmptySlot)?;
    if c.kind != kind {
        return Err(Error::WrongObjectType);
    }
    if !c.rights.contains(rights) {
        return Err(Error::MissingRights);
    }
    Ok((id, c))
}
