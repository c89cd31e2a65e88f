//! [`StaticCell`]: a `static` whose contents the kernel mutates through a raw
//! pointer during single-threaded set-up (descriptor tables, per-CPU
//! structures that the CPU itself points at), without `static mut`.
//!
//! It gives no synchronisation: every user documents why its accesses cannot
//! race (typically: written once on one CPU before anything else runs).

use core::cell::UnsafeCell;

/// `repr(transparent)`: assembly may address the contents through the
/// static's symbol.
#[repr(transparent)]
pub struct StaticCell<T>(UnsafeCell<T>);

// SAFETY: StaticCell only hands out raw pointers; each dereference is an
// unsafe operation whose caller must rule out data races.
unsafe impl<T> Sync for StaticCell<T> {}

impl<T> StaticCell<T> {
    pub const fn new(value: T) -> Self {
        StaticCell(UnsafeCell::new(value))
    }

    pub const fn get(&self) -> *mut T {
        self.0.get()
    }
}
