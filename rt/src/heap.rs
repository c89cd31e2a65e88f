//! The component heap: the global allocator, `linked_list_allocator` over a
//! static arena of [`HEAP_SIZE`] bytes in `.bss`, initialised by `_start`
//! before `main` runs, and — for a component that needs more and may map
//! memory (`own = ["vspace"]`) — a second region it adds with [`grow`]:
//! 2 MiB frames made from its own untyped memory (its RAM quota pays),
//! mapped at [`EXTRA_VA`]. Allocation tries the arena first, then the
//! extra region; a block is freed into the region it came from.
//! Allocation failure panics (the default `handle_alloc_error` for
//! `no_std`).
//!
//! Invariant: the extra heap only ever manages `[EXTRA_VA, EXTRA_VA +
//! extra bytes)`, all of it mapped; [`grow`] maps new frames right after
//! its top before it extends it.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use abi::caddr::own;
use abi::map::{Cache, MapAttr};
use abi::{Error, ObjectType};
use interfaces::child;
use linked_list_allocator::LockedHeap;

/// Bytes in the static heap arena.
pub const HEAP_SIZE: usize = 256 * 1024;
/// Where the extra heap region starts (a 1 GiB range of its own, away
/// from the image, the stack and the windows components map).
pub const EXTRA_VA: u64 = 0x7f_0000_0000;
/// The most the extra region may grow to.
pub const EXTRA_MAX: usize = 1 << 30;
const FRAME: usize = 2 << 20;

#[global_allocator]
static ALLOCATOR: Heaps = Heaps;

static ARENA_HEAP: LockedHeap = LockedHeap::empty();
static EXTRA_HEAP: LockedHeap = LockedHeap::empty();

/// The arena. Page alignment keeps it apart from other data, which helps
/// when reading fault addresses.
#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; HEAP_SIZE]>);

// SAFETY: the arena is only ever touched through the allocator, which takes
// its lock; nothing reads or writes it directly.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; HEAP_SIZE]));
static INITIALISED: AtomicBool = AtomicBool::new(false);

/// The two regions as one allocator.
struct Heaps;

fn in_arena(ptr: *mut u8) -> bool {
    let start = ARENA.0.get() as usize;
    (start..start + HEAP_SIZE).contains(&(ptr as usize))
}

// SAFETY: each block comes from one of two `linked_list_allocator` heaps
// over disjoint memory and goes back to the one that holds its address.
unsafe impl GlobalAlloc for Heaps {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ARENA_HEAP
            .lock()
            .allocate_first_fit(layout)
            .or_else(|()| EXTRA_HEAP.lock().allocate_first_fit(layout))
            .map_or(core::ptr::null_mut(), NonNull::as_ptr)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(p) = NonNull::new(ptr) else { return };
        let heap = if in_arena(ptr) {
            &ARENA_HEAP
        } else {
            &EXTRA_HEAP
        };
        // SAFETY: `ptr` came from `alloc` with `layout`, from this heap
        // (the one whose memory holds it).
        unsafe { heap.lock().deallocate(p, layout) }
    }
}

/// Hands the arena to the allocator (once; later calls do nothing).
pub(crate) fn init() {
    if INITIALISED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: the arena is valid for HEAP_SIZE bytes for the whole program,
    // is used by nothing but the allocator, and `INITIALISED` makes sure it
    // is handed over only once.
    unsafe {
        ARENA_HEAP
            .lock()
            .init(ARENA.0.get().cast::<u8>(), HEAP_SIZE)
    }
}

/// Grows the heap by `frames` 2 MiB frames made from the component's own
/// untyped memory into the empty own slots `first_slot..first_slot +
/// frames`, mapped after the extra region's top (needs `own =
/// ["vspace"]`). Nothing is added if a frame cannot be made or mapped
/// (the frames made so far stay mapped and are added).
pub fn grow(first_slot: u32, frames: u32) -> Result<(), Error> {
    let mut heap = EXTRA_HEAP.lock();
    let top = heap.size();
    let mut added = 0usize;
    let mut result = Ok(());
    for i in 0..frames {
        let at = top + added;
        if at + FRAME > EXTRA_MAX {
            result = Err(Error::InvalidArgument);
            break;
        }
        let slot = own(first_slot + i);
        let rw = MapAttr {
            writable: true,
            executable: false,
            cache: Cache::WriteBack,
        };
        let made = crate::syscall::retype(own(child::UNTYPED), ObjectType::Frame2M, 0, slot, 1)
            .and_then(|()| {
                // SAFETY: [EXTRA_VA, EXTRA_VA + EXTRA_MAX) is the extra
                // heap's alone; `at` is past everything mapped there.
                unsafe {
                    crate::syscall::map(own(child::OWN_VSPACE), slot, EXTRA_VA + at as u64, rw)
                }
            });
        if let Err(e) = made {
            result = Err(e);
            break;
        }
        added += FRAME;
    }
    if added > 0 {
        if top == 0 {
            // SAFETY: just mapped, used by nothing else; handed over once
            // (the size is 0 only before the first growth).
            unsafe { heap.init(EXTRA_VA as *mut u8, added) }
        } else {
            // SAFETY: the memory right after the region's top was just
            // mapped for the heap alone.
            unsafe { heap.extend(added) }
        }
    }
    result
}
