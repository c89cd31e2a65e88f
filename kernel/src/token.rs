//! The kernel token: the big kernel lock as the borrow checker sees it.
//!
//! Kernel objects — threads, endpoints, notifications, capability slots,
//! address-space headers, run queues — have no locks of their own: the
//! big kernel lock (`smp.rs`; with one CPU online, the CPU) makes a lock
//! holder alone in them. [`Kernel`] turns that rule into a value, as Hubris
//! passes `&mut [Task]` to its system calls: every accessor of a kernel
//! object borrows from the token, so a `&mut Thread` lives at most as long
//! as the borrow of the token it came from, and two live `&mut` to one
//! object (or a `&mut` beside a `&`) do not compile.
//!
//! # Who has it
//!
//! A token is made only by [`Kernel::enter`], an `unsafe fn` whose contract
//! is the lock rule: this CPU holds the big kernel lock (or is the only CPU
//! online), interrupts are masked, and no other token of this CPU is live.
//! The entries that do so are the kernel's entries from user mode and the
//! scheduler's own: `syscall_from_user`, `syscall_continue` and
//! `smp_syscall_stopped` (the assembly took the lock), `trap_from_user` and
//! `trap_dispatch` (they take it), the boot CPU's start of root and an
//! application processor's first schedule (`main.rs`, `smp::ap_entry`).
//! The token leaves with the CPU: functions that do not return
//! (`thread::schedule`, `switch_to`, `resume`, ...) take it by value and
//! give it up ([`Kernel::leave`]) right before the lock is released on the
//! way to user mode, and `smp::unlock` consumes it (the idle loop gets a
//! fresh one when it takes the lock again).
//!
//! # Parts
//!
//! The token has two parts that can be borrowed apart, because their
//! objects never overlap: [`Threads`] (thread control blocks) and
//! [`Objects`] (everything else the token covers: endpoints,
//! notifications, capability-table headers, address-space headers and run
//! queues). So an endpoint's queue can be changed (`&mut` from
//! `k.objects`) while the threads in it are relinked (`&mut k.threads`).
//! Capability slots live in capability tables *and* in threads (a thread's
//! own three slots), so they are reached through the whole token
//! ([`Kernel::slot`], [`Kernel::slot_mut`]; the token is also the
//! `kcore::cap::SlotStore` the capability operations work on).
//!
//! # Handles
//!
//! A token proves exclusivity, not that a handle names an object. Thread
//! handles are typed ([`crate::thread::ThreadRef`]: made only by `unsafe`
//! constructors that promise a live thread), so thread access through the
//! token is safe. The other objects are named by physical address (a
//! capability's `object`, `Thread::queue`, `Thread::bound_notification`),
//! so their accessors are `unsafe fn`s whose contract is that the address
//! names a live object of that type, and every call site says why it does.
//! `kcore::cap::SlotId`s are trusted like `ThreadRef`s: the kernel makes
//! them only from `object::resolve` (bounds-checked), from its own objects'
//! slots and from the derivation links it wrote.
//!
//! # Where the token cannot reach
//!
//! - **The IPC fast path** (`arch/x86_64/syscall_entry.s`) runs without the
//!   lock as a reader (`smp.rs`, "Same-CPU IPC without the lock") and
//!   touches threads, endpoints and slots in assembly: its rules are in
//!   its module doc, and the gate keeps it apart from every token holder.
//! - **Per-CPU data** (`PerCpu`: `current`, `next`, `fpu_live`, the gate)
//!   is reached through raw pointers with interrupts masked, by its own
//!   CPU, or under the lock by others (`smp.rs`).
//! - **Requests served for the lock holder** (`smp::serve_requests`: TLB
//!   shootdown, FPU save or drop) run on a CPU without the lock while the
//!   holder waits for them; they reach the one thread named through a raw
//!   pointer (`fpu::release_here`, `fpu::forget_here`).
//! - **A virtual CPU's pages** (`vcpu.rs`): its VMCB and guest state are
//!   reached through raw pointers made from the VCPU capability's object
//!   (`arch::svm::Vmcb::at`), with the token held mutably for the whole
//!   run — the guest runs inside the system call, under the lock — so
//!   nothing else touches them; the VMRUN stub (`arch::svm::run`) is the
//!   one place the kernel enters a guest.
//! - **kcore's delete and revoke callbacks** run while the slot store
//!   borrows the token; they get the token back through
//!   [`Kernel::lent`] (kcore holds no reference into the store then).
//!
//! # Checks
//!
//! Debug builds (the kernel the scenario tests boot) check the rule, xv6
//! style: [`Kernel::enter`] asserts that the lock is taken and that no
//! other CPU — and no second entry on this one — holds a token
//! (`smp::held_here`), dropping the token clears the mark, and the lock
//! holder's paths assert `smp::held_here()`. Release builds compile all of
//! it away: the token is zero-sized.

use core::marker::PhantomData;
use core::ptr::NonNull;

/// The kernel token (module doc). Zero-sized, neither `Send` nor `Sync`,
/// neither `Copy` nor `Clone`.
pub struct Kernel {
    /// The thread control blocks.
    pub threads: Threads,
    /// Endpoints, notifications, capability-table and address-space
    /// headers, run queues.
    pub objects: Objects,
}

/// The token's part for thread control blocks (`thread.rs` has the
/// accessors).
pub struct Threads(PhantomData<*mut ()>);

/// The token's part for every other kernel object but slots (accessors in
/// `object.rs`, `vspace.rs`, `thread.rs` for run queues).
pub struct Objects(PhantomData<*mut ()>);

impl Kernel {
    /// The token for this CPU's stay in the kernel.
    ///
    /// # Safety
    /// This CPU holds the big kernel lock (or is the only CPU online),
    /// interrupts are masked, and no other token of this CPU is live (each
    /// entry makes one; leaving the kernel consumes it).
    #[inline(always)]
    pub unsafe fn enter() -> Kernel {
        #[cfg(debug_assertions)]
        crate::smp::token_claimed();
        Kernel {
            threads: Threads(PhantomData),
            objects: Objects(PhantomData),
        }
    }

    /// Gives the token up: the CPU is about to release the lock (return to
    /// user mode, idle). The same as dropping it; says so at the call.
    #[inline(always)]
    pub fn leave(self) {}

    /// The token, again, for a callback that runs while the caller's token
    /// is lent to a `kcore::cap` slot store (the `on_removed` callback of
    /// `delete` and `revoke`).
    ///
    /// # Safety
    /// The caller runs under a live token of this CPU, and whoever borrows
    /// that token holds no reference into kernel objects while the
    /// returned one is used (kcore calls `on_removed` with the removed
    /// capability copied out and no slot borrowed).
    #[inline(always)]
    pub unsafe fn lent<'a>() -> &'a mut Kernel {
        debug_assert!(crate::smp::held_here());
        // SAFETY: `Kernel` is zero-sized: a dangling, aligned pointer is a
        // valid place for it; exclusivity is the caller's promise.
        unsafe { NonNull::<Kernel>::dangling().as_mut() }
    }

    /// Debug builds: asserts that this CPU holds the lock and the token.
    #[inline(always)]
    pub fn check(&self) {
        debug_assert!(crate::smp::held_here());
    }
}

#[cfg(debug_assertions)]
impl Drop for Kernel {
    fn drop(&mut self) {
        crate::smp::token_released();
    }
}
