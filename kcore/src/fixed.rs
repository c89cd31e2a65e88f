//! A fixed-capacity vector of `Copy` items: the storage behind the boot memory
//! map and the frame allocator, which are built before the kernel has a heap.
//!
//! Invariants: `items[..len]` are the live items, in whatever order the owner
//! keeps them; `items[len..]` are filler and never observed. An operation that
//! cannot be done (no room, index past the end) returns an error and leaves
//! the vector unchanged, so owners can offer "error means unchanged".

use core::fmt;

/// The operation would exceed the capacity or referred past the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rejected;

#[derive(Clone)]
pub(crate) struct FixedVec<T: Copy, const N: usize> {
    items: [T; N],
    len: usize,
}

impl<T: Copy, const N: usize> FixedVec<T, N> {
    /// `filler` only occupies unused slots; `const` so owners can live in statics.
    pub(crate) const fn new(filler: T) -> Self {
        Self {
            items: [filler; N],
            len: 0,
        }
    }

    pub(crate) const fn len(&self) -> usize {
        self.len
    }

    pub(crate) const fn is_full(&self) -> bool {
        self.len >= N
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        self.items.get(..self.len).unwrap_or(&[])
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        self.items.get_mut(..self.len).unwrap_or(&mut [])
    }

    pub(crate) fn get(&self, index: usize) -> Option<T> {
        self.as_slice().get(index).copied()
    }

    pub(crate) fn set(&mut self, index: usize, item: T) -> Result<(), Rejected> {
        let slot = self.as_mut_slice().get_mut(index).ok_or(Rejected)?;
        *slot = item;
        Ok(())
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Inserts before `index` (`index == len` appends).
    pub(crate) fn insert(&mut self, index: usize, item: T) -> Result<(), Rejected> {
        if index > self.len || self.len >= N {
            return Err(Rejected);
        }
        self.items.copy_within(index..self.len, index + 1);
        if let Some(slot) = self.items.get_mut(index) {
            *slot = item;
        }
        self.len += 1;
        Ok(())
    }

    pub(crate) fn remove(&mut self, index: usize) -> Option<T> {
        let item = self.get(index)?;
        self.items.copy_within(index + 1..self.len, index);
        self.len -= 1;
        Some(item)
    }

    /// Consumes the vector; used to hand over its contents without a heap.
    pub(crate) fn into_items(self) -> impl Iterator<Item = T> {
        self.items.into_iter().take(self.len)
    }
}

impl<T: Copy + fmt::Debug, const N: usize> fmt::Debug for FixedVec<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_and_capacity() {
        let mut v: FixedVec<u32, 3> = FixedVec::new(0);
        assert_eq!(v.insert(1, 9), Err(Rejected));
        v.insert(0, 1).unwrap();
        v.insert(1, 3).unwrap();
        v.insert(1, 2).unwrap();
        assert_eq!(v.as_slice(), &[1, 2, 3]);
        assert!(v.is_full());
        assert_eq!(v.insert(3, 4), Err(Rejected));
        assert_eq!(v.as_slice(), &[1, 2, 3]);
        assert_eq!(v.remove(0), Some(1));
        assert_eq!(v.remove(5), None);
        assert_eq!(v.as_slice(), &[2, 3]);
        assert_eq!(v.set(2, 7), Err(Rejected));
        v.set(1, 7).unwrap();
        v.truncate(1);
        assert_eq!(v.clone().into_items().sum::<u32>(), 2);
        v.clear();
        assert_eq!(v.len(), 0);
        assert_eq!(v.get(0), None);
    }
}
