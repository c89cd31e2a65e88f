//! A bounded write-back cache of 512-byte blocks whose write-back order
//! keeps the image consistent after an interruption at any point.
//!
//! Every dirty block carries an order [`Class`]: file data and fresh
//! directory clusters, then FAT sectors, then directory entries. A block of
//! class `c` reaches the device only after every dirty block of a lower
//! class has been written and the device flushed — whether it is written
//! by [`Cache::sync`] or evicted. So a directory entry never lands before
//! the FAT chain it names, and a chain never lands before the data and
//! directory contents it links. Freeing runs the other way (entry cleared
//! first, chain freed after); the volume does it with a full
//! [`Cache::sync`] between the two steps, so no class order is needed for it.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::bpb::SECTOR;
use crate::error::FsError;
use crate::BlockDevice;

/// The write-back order of a dirty block: lower classes reach the medium
/// first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// File contents, and directory clusters before they are linked.
    Data = 0,
    /// FAT sectors (all copies) and FSInfo.
    Fat = 1,
    /// Directory entries.
    Dir = 2,
}

const CLASSES: [Class; 3] = [Class::Data, Class::Fat, Class::Dir];

/// Classes written since the last device flush, as a bit mask.
fn bit(c: Class) -> u8 {
    1 << (c as u8)
}

fn below(c: Class) -> u8 {
    bit(c) - 1
}

struct Slot {
    block: u64,
    data: Box<[u8; SECTOR]>,
    dirty: Option<Class>,
    used: u64,
}

/// The cache: at most `capacity` blocks, least recently used evicted
/// first (clean ones before dirty ones).
pub struct Cache {
    slots: Vec<Slot>,
    capacity: usize,
    tick: u64,
    /// Classes written to the device since its last flush.
    unflushed: u8,
    /// The slot of the last block found: most accesses repeat it.
    last: usize,
}

impl Cache {
    /// An empty cache of `capacity` (at least 4) blocks.
    pub fn new(capacity: usize) -> Cache {
        Cache {
            slots: Vec::new(),
            capacity: capacity.max(4),
            tick: 0,
            unflushed: 0,
            last: 0,
        }
    }

    fn find(&mut self, block: u64) -> Option<usize> {
        if self.slots.get(self.last).is_some_and(|s| s.block == block) {
            return Some(self.last);
        }
        let i = self.slots.iter().position(|s| s.block == block)?;
        self.last = i;
        Some(i)
    }

    /// The slot holding `block`, loading it from the device if `load`
    /// (else zero-filled: the caller overwrites it whole).
    fn slot<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        load: bool,
    ) -> Result<usize, FsError> {
        self.tick += 1;
        if let Some(i) = self.find(block) {
            self.slots[i].used = self.tick;
            return Ok(i);
        }
        let mut data = Box::new([0u8; SECTOR]);
        if load {
            dev.read(block, &mut data[..])?;
        }
        let slot = Slot {
            block,
            data,
            dirty: None,
            used: self.tick,
        };
        if self.slots.len() < self.capacity {
            self.slots.push(slot);
            return Ok(self.slots.len() - 1);
        }
        // The least recently used clean block, else the least recently used.
        let victim = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.dirty.is_none())
            .min_by_key(|(_, s)| s.used)
            .or_else(|| self.slots.iter().enumerate().min_by_key(|(_, s)| s.used))
            .map(|(i, _)| i)
            .unwrap_or(0);
        self.write_back(dev, victim)?;
        self.slots[victim] = slot;
        Ok(victim)
    }

    /// Writes every dirty block of a class below `c`, class by class with a
    /// flush between, and flushes, so a block of class `c` may follow.
    fn drain_below<D: BlockDevice>(&mut self, dev: &mut D, c: Class) -> Result<(), FsError> {
        for k in CLASSES.into_iter().filter(|&k| k < c) {
            let mut first = true;
            for i in 0..self.slots.len() {
                if self.slots[i].dirty != Some(k) {
                    continue;
                }
                if first && self.unflushed & below(k) != 0 {
                    dev.flush()?;
                    self.unflushed = 0;
                }
                first = false;
                dev.write(self.slots[i].block, &self.slots[i].data[..])?;
                self.slots[i].dirty = None;
                self.unflushed |= bit(k);
            }
        }
        if self.unflushed & below(c) != 0 {
            dev.flush()?;
            self.unflushed = 0;
        }
        Ok(())
    }

    /// Writes slot `i` back if dirty, in order.
    fn write_back<D: BlockDevice>(&mut self, dev: &mut D, i: usize) -> Result<(), FsError> {
        let Some(c) = self.slots[i].dirty else {
            return Ok(());
        };
        self.drain_below(dev, c)?;
        dev.write(self.slots[i].block, &self.slots[i].data[..])?;
        self.slots[i].dirty = None;
        self.unflushed |= bit(c);
        Ok(())
    }

    /// `block`'s contents.
    pub fn read<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
    ) -> Result<&[u8; SECTOR], FsError> {
        let i = self.slot(dev, block, true)?;
        Ok(&self.slots[i].data)
    }

    /// `block`'s contents to change; dirty in class `c` (or the higher
    /// class it was dirty in already).
    pub fn modify<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        c: Class,
    ) -> Result<&mut [u8; SECTOR], FsError> {
        let i = self.slot(dev, block, true)?;
        self.mark(i, c);
        Ok(&mut self.slots[i].data)
    }

    /// `block` to be overwritten whole, without reading it first.
    pub fn overwrite<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        c: Class,
    ) -> Result<&mut [u8; SECTOR], FsError> {
        let i = self.slot(dev, block, false)?;
        self.mark(i, c);
        Ok(&mut self.slots[i].data)
    }

    fn mark(&mut self, i: usize, c: Class) {
        let s = &mut self.slots[i];
        s.dirty = Some(s.dirty.map_or(c, |d| d.max(c)));
    }

    /// Writes `data` to `block` at once, as class [`Class::Data`] (a fresh
    /// directory cluster, which must be on the medium before the FAT links
    /// it); a cached copy takes the new contents, clean.
    pub fn write_through<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        data: &[u8; SECTOR],
    ) -> Result<(), FsError> {
        dev.write(block, data)?;
        self.unflushed |= bit(Class::Data);
        if let Some(i) = self.find(block) {
            self.slots[i].data.copy_from_slice(data);
            self.slots[i].dirty = None;
        }
        Ok(())
    }

    /// Reads whole blocks from `block` into `buf` (a multiple of 512
    /// bytes): cached ones from the cache, runs of the others straight
    /// from the device in one request each, not cached (bulk file data
    /// would only push metadata out).
    pub fn read_blocks<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        buf: &mut [u8],
    ) -> Result<(), FsError> {
        let n = buf.len() / SECTOR;
        let mut i = 0;
        while i < n {
            if let Some(k) = self.find(block + i as u64) {
                buf[i * SECTOR..(i + 1) * SECTOR].copy_from_slice(&self.slots[k].data[..]);
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < n && self.find(block + j as u64).is_none() {
                j += 1;
            }
            dev.read(block + i as u64, &mut buf[i * SECTOR..j * SECTOR])?;
            i = j;
        }
        Ok(())
    }

    /// Writes whole blocks of file data straight to the device, as class
    /// [`Class::Data`] (nothing has to precede data); cached copies take
    /// the new contents, clean.
    pub fn write_blocks<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        buf: &[u8],
    ) -> Result<(), FsError> {
        dev.write(block, buf)?;
        self.unflushed |= bit(Class::Data);
        let n = (buf.len() / SECTOR) as u64;
        for s in self.slots.iter_mut() {
            if s.block >= block && s.block - block < n {
                let o = (s.block - block) as usize * SECTOR;
                s.data.copy_from_slice(&buf[o..o + SECTOR]);
                s.dirty = None;
            }
        }
        Ok(())
    }

    /// Writes each of `blocks` that is dirty now (after its
    /// predecessors, as at eviction), then flushes the device: for an
    /// update that must reach the medium before the next one is made.
    pub fn persist<D: BlockDevice>(&mut self, dev: &mut D, blocks: &[u64]) -> Result<(), FsError> {
        for &b in blocks {
            if let Some(i) = self.find(b) {
                self.write_back(dev, i)?;
            }
        }
        if self.unflushed != 0 {
            dev.flush()?;
            self.unflushed = 0;
        }
        Ok(())
    }

    /// Writes every dirty block, class by class with a flush between, and
    /// flushes the device.
    pub fn sync<D: BlockDevice>(&mut self, dev: &mut D) -> Result<(), FsError> {
        self.drain_below(dev, Class::Dir)?;
        self.write_class(dev, Class::Dir)?;
        dev.flush()?;
        self.unflushed = 0;
        Ok(())
    }

    fn write_class<D: BlockDevice>(&mut self, dev: &mut D, c: Class) -> Result<(), FsError> {
        for i in 0..self.slots.len() {
            if self.slots[i].dirty == Some(c) {
                dev.write(self.slots[i].block, &self.slots[i].data[..])?;
                self.slots[i].dirty = None;
                self.unflushed |= bit(c);
            }
        }
        Ok(())
    }

    /// Dirty blocks held.
    #[cfg(test)]
    pub fn dirty_count(&self) -> usize {
        self.slots.iter().filter(|s| s.dirty.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeviceError, RamDisk};
    use alloc::vec;

    /// Records writes and flushes.
    struct Log {
        disk: RamDisk,
        ops: Vec<i64>,
    }

    impl BlockDevice for Log {
        fn block_size(&self) -> u32 {
            512
        }
        fn block_count(&self) -> u64 {
            self.disk.block_count()
        }
        fn read(&mut self, b: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
            self.disk.read(b, buf)
        }
        fn write(&mut self, b: u64, buf: &[u8]) -> Result<(), DeviceError> {
            self.ops.push(b as i64);
            self.disk.write(b, buf)
        }
        fn flush(&mut self) -> Result<(), DeviceError> {
            self.ops.push(-1);
            Ok(())
        }
    }

    #[test]
    fn eviction_keeps_class_order() {
        let mut dev = Log {
            disk: RamDisk::new(64),
            ops: vec![],
        };
        let mut c = Cache::new(4);
        c.modify(&mut dev, 10, Class::Dir).unwrap()[0] = 1;
        c.modify(&mut dev, 20, Class::Fat).unwrap()[0] = 2;
        c.modify(&mut dev, 30, Class::Data).unwrap()[0] = 3;
        c.modify(&mut dev, 31, Class::Data).unwrap()[0] = 4;
        // Evicts block 10 (least recently used, all dirty): data, flush,
        // FAT, flush, then the directory block.
        c.read(&mut dev, 40).unwrap();
        assert_eq!(dev.ops, vec![30, 31, -1, 20, -1, 10]);
        assert_eq!(c.dirty_count(), 0);
        c.sync(&mut dev).unwrap();
        assert_eq!(dev.disk.bytes()[10 * 512], 1);
    }
}
