//! The component heap: the global allocator, `linked_list_allocator` over a
//! static arena of [`HEAP_SIZE`] bytes in `.bss`, initialised by `_start`
//! before `main` runs. Allocation failure panics (the default
//! `handle_alloc_error` for `no_std`).
//!
//! Later the heap grows with memory the component gets from root; until
//! then the arena is all there is.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

use linked_list_allocator::LockedHeap;

/// Bytes in the static heap arena.
pub const HEAP_SIZE: usize = 256 * 1024;

#[global_allocator]
static ALLOCATOR: LockedHeap = LockedHeap::empty();

/// The arena. Page alignment keeps it apart from other data, which helps
/// when reading fault addresses.
#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; HEAP_SIZE]>);

// SAFETY: the arena is only ever touched through the allocator, which takes
// its lock; nothing reads or writes it directly.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; HEAP_SIZE]));
static INITIALISED: AtomicBool = AtomicBool::new(false);

/// Hands the arena to the allocator (once; later calls do nothing).
pub(crate) fn init() {
    if INITIALISED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: the arena is valid for HEAP_SIZE bytes for the whole program,
    // is used by nothing but the allocator, and `INITIALISED` makes sure it
    // is handed over only once.
    unsafe { ALLOCATOR.lock().init(ARENA.0.get().cast::<u8>(), HEAP_SIZE) }
}
