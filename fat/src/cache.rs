//! A bounded write-back cache of 512-byte blocks whose write-back order
//! keeps the image consistent after an interruption at any point, and
//! which talks to the device in few, large requests.
//!
//! Every dirty block carries an order [`Class`]: file data and fresh
//! directory clusters, then FAT sectors whose changes are all entries of
//! fresh clusters, then the other FAT sectors, then directory entries. A
//! block of class `c` reaches the device only after every dirty block of
//! a lower class has been written and the device flushed — whether it is
//! written by [`Cache::sync`] or evicted. So a directory entry never lands
//! before the FAT chain it names, a link from a chain on the medium never
//! lands before the fresh clusters' entries it reaches, and a chain never
//! lands before the data and directory contents it links. Freeing runs the
//! other way (entry cleared first, chain freed after); the volume does it
//! with a full [`Cache::sync`] between the two steps, so no class order is
//! needed for it. A FAT sector dirty in one FAT class that is changed in
//! the other is written back first (with every dirty block of its class
//! and below): its contents so far belong to that class's group.
//!
//! Few requests: dirty blocks go out class by class in block order, one
//! request per run of consecutive blocks; evicting a dirty block writes
//! back every dirty block of its class and below the same way, so the
//! next evictions find clean blocks. The first FAT is the only copy
//! cached: a run of its sectors is written to every copy (a mirror, as
//! other implementations do). A miss in the first FAT reads up to
//! [`FAT_AHEAD`] sectors in one request.
//!
//! File data has two windows beside the slots, so that it neither costs
//! a request per block nor pushes metadata out: a read-ahead window
//! (clean, up to [`MAX_AHEAD_BLOCKS`], filled in one request with the run
//! the caller names) and a write-behind window (dirty data, class
//! [`Class::Data`], consecutive blocks written out in one request when a
//! write does not continue it, when full, and with the other data). A
//! block's newest contents are in its slot, else the write-behind window,
//! else the read-ahead window, else on the device; every device write
//! drops what the read-ahead window held of its blocks.
//!
//! The read-ahead is asynchronous: while a reader goes through one
//! window, the next one can be in flight ([`Cache::read_ahead`], a
//! device read started with [`BlockDevice::start_read`]); a miss on its
//! blocks waits for it ([`BlockDevice::finish_read`]) and makes it the
//! window. A device write to any of its blocks cancels it
//! ([`BlockDevice::cancel_read`]: its data may predate the write), as a
//! miss elsewhere does (the reader went elsewhere).
//!
//! Invariant: a block is in at most one slot, and `index` maps each
//! slot's block to it.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::bpb::SECTOR;
use crate::error::FsError;
use crate::{BlockDevice, ReadId};

/// The write-back order of a dirty block: lower classes reach the medium
/// first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// File contents, and directory clusters before they are linked.
    Data = 0,
    /// FAT sectors whose changes are all entries of fresh clusters, which
    /// nothing on the medium reaches yet.
    FatNew = 1,
    /// FAT sectors (all copies) and FSInfo.
    Fat = 2,
    /// Directory entries.
    Dir = 3,
}

const CLASSES: [Class; 4] = [Class::Data, Class::FatNew, Class::Fat, Class::Dir];

/// Sectors of the first FAT read in one request on a miss (16 KiB: 4096
/// FAT32 entries, 2 MiB of a file in 512-byte clusters).
pub const FAT_AHEAD: u64 = 32;

/// The most blocks one write request carries.
const MAX_RUN: usize = 2048;

/// File data blocks of a sequential reader's first read-ahead window
/// (64 KiB); reads and writes of this many whole blocks and more go
/// straight to the device.
pub const AHEAD_BLOCKS: usize = 128;

/// File data blocks read ahead at most (256 KiB): a window started in
/// the background is twice the one before it, up to this.
pub const MAX_AHEAD_BLOCKS: usize = 512;

/// File data blocks written behind at most (128 KiB).
const BEHIND_BLOCKS: usize = 256;

/// A run of consecutive blocks in one buffer: `len` blocks from `start`.
struct Window {
    start: u64,
    len: usize,
    buf: Vec<u8>,
}

impl Window {
    fn new() -> Window {
        Window {
            start: 0,
            len: 0,
            buf: Vec::new(),
        }
    }

    fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    fn holds(&self, block: u64) -> bool {
        block >= self.start && block < self.end()
    }

    fn overlaps(&self, block: u64, n: u64) -> bool {
        overlap(self.start, self.len, block, n)
    }

    /// Blocks `from..to` (which it holds), in one slice.
    fn blocks(&self, from: u64, to: u64) -> &[u8] {
        let o = |b: u64| (b - self.start) as usize * SECTOR;
        &self.buf[o(from)..o(to)]
    }

    fn block_mut(&mut self, block: u64) -> &mut [u8] {
        let o = (block - self.start) as usize * SECTOR;
        &mut self.buf[o..o + SECTOR]
    }
}

/// Whether `len` blocks from `start` and `n` from `block` share one.
fn overlap(start: u64, len: usize, block: u64, n: u64) -> bool {
    len > 0 && n > 0 && block < start + len as u64 && start < block + n
}

/// The next read-ahead window, in flight: `len` blocks from `start`,
/// device read `id`.
#[derive(Clone, Copy, Debug)]
struct Started {
    start: u64,
    len: usize,
    id: ReadId,
}

impl Started {
    fn holds(&self, block: u64) -> bool {
        block >= self.start && block < self.start + self.len as u64
    }
}

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

/// The first FAT and its copies: `copies` FATs of `len` sectors from
/// `start`.
#[derive(Clone, Copy, Debug)]
pub struct FatLayout {
    pub start: u64,
    pub len: u64,
    pub copies: u32,
}

/// The cache: at most `capacity` blocks, least recently used evicted
/// first (clean ones before dirty ones).
pub struct Cache {
    slots: Vec<Slot>,
    /// Block number to slot.
    index: BTreeMap<u64, usize>,
    capacity: usize,
    tick: u64,
    /// Classes written to the device since its last flush.
    unflushed: u8,
    /// The slot of the last block found: most accesses repeat it.
    last: usize,
    fat: Option<FatLayout>,
    /// Bumped whenever a block of a class above [`Class::FatNew`] is
    /// written: from then on the medium may reach clusters that were
    /// fresh before.
    epoch: u64,
    /// File data read ahead, clean: as on the device, but a slot or
    /// `behind` may hold a newer copy of a block (they come first).
    ahead: Window,
    /// The read-ahead window in flight, if one was started: as on the
    /// device (a device write to one of its blocks cancels it).
    next: Option<Started>,
    /// Whether the window after `ahead` was asked for (or there is none).
    followed: bool,
    /// File data written behind: dirty blocks of class [`Class::Data`],
    /// none of them in a slot.
    behind: Window,
    /// A buffer for FAT read-ahead, kept between uses.
    scratch: Vec<u8>,
}

impl Cache {
    /// An empty cache of `capacity` (at least 4) blocks; `fat` the FATs
    /// to mirror (none in unit tests).
    pub fn new(capacity: usize, fat: Option<FatLayout>) -> Cache {
        Cache {
            slots: Vec::new(),
            index: BTreeMap::new(),
            capacity: capacity.max(4),
            tick: 0,
            unflushed: 0,
            last: 0,
            fat,
            epoch: 0,
            ahead: Window::new(),
            next: None,
            followed: false,
            behind: Window::new(),
            scratch: Vec::new(),
        }
    }

    /// How often blocks above [`Class::FatNew`] have been written.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    fn find(&mut self, block: u64) -> Option<usize> {
        if self.slots.get(self.last).is_some_and(|s| s.block == block) {
            return Some(self.last);
        }
        let i = *self.index.get(&block)?;
        self.last = i;
        Some(i)
    }

    /// Whether `block` lies in the first FAT: the end of that FAT if so.
    fn fat0_end(&self, block: u64) -> Option<u64> {
        let f = self.fat?;
        (block >= f.start && block - f.start < f.len).then_some(f.start + f.len)
    }

    /// Writes `buf` to `block` on, and to the same place in every FAT
    /// copy if it lies in the first FAT (a run never leaves it); the
    /// read-ahead window forgets what it held of those blocks, and a
    /// read-ahead in flight that covers one of them is cancelled (its data
    /// may be from before the write).
    fn dev_write<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        buf: &[u8],
    ) -> Result<(), FsError> {
        let n = (buf.len() / SECTOR) as u64;
        if self.ahead.overlaps(block, n) {
            self.ahead.len = 0;
        }
        if let Some(s) = self.next.filter(|s| overlap(s.start, s.len, block, n)) {
            self.next = None;
            dev.cancel_read(s.id);
        }
        dev.write(block, buf)?;
        if let (Some(f), Some(_)) = (self.fat, self.fat0_end(block)) {
            for k in 1..u64::from(f.copies) {
                dev.write(block + k * f.len, buf)?;
            }
        }
        Ok(())
    }

    /// Puts a new slot for `block` in, evicting one if the cache is full.
    /// Puts a new clean slot for `block` with the contents `data[k]`
    /// (`data` a run of blocks), evicting one if the cache is full.
    fn insert<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        data: &[u8],
        k: usize,
    ) -> Result<usize, FsError> {
        self.tick += 1;
        let bytes = &data[k * SECTOR..(k + 1) * SECTOR];
        let i = if self.slots.len() < self.capacity {
            let mut data = Box::new([0u8; SECTOR]);
            data.copy_from_slice(bytes);
            self.slots.push(Slot {
                block,
                data,
                dirty: None,
                used: self.tick,
            });
            self.slots.len() - 1
        } else {
            // The least recently used clean block, else the least
            // recently used.
            let victim = self
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.dirty.is_none())
                .min_by_key(|(_, s)| s.used)
                .or_else(|| self.slots.iter().enumerate().min_by_key(|(_, s)| s.used))
                .map(|(i, _)| i)
                .unwrap_or(0);
            if let Some(c) = self.slots[victim].dirty {
                self.write_classes(dev, c)?;
            }
            self.index.remove(&self.slots[victim].block);
            let s = &mut self.slots[victim];
            s.block = block;
            s.data.copy_from_slice(bytes);
            s.dirty = None;
            s.used = self.tick;
            victim
        };
        self.index.insert(block, i);
        self.last = i;
        Ok(i)
    }

    /// The slot holding `block`, loading it from the device. A miss in the
    /// first FAT reads on up to [`FAT_AHEAD`] sectors that are not
    /// cached, in one request.
    fn slot<D: BlockDevice>(&mut self, dev: &mut D, block: u64) -> Result<usize, FsError> {
        self.tick += 1;
        if let Some(i) = self.find(block) {
            self.slots[i].used = self.tick;
            return Ok(i);
        }
        if self.behind.holds(block) {
            // A slot and the write-behind window never share a block.
            self.write_behind(dev)?;
        }
        let mut n = 1;
        if let Some(end) = self.fat0_end(block) {
            let limit = end.min(block + FAT_AHEAD);
            n = match self.index.range(block + 1..limit).next() {
                Some((&b, _)) => b - block,
                None => limit - block,
            } as usize;
        }
        let mut buf = core::mem::take(&mut self.scratch);
        buf.resize(n * SECTOR, 0);
        let r = self.load(dev, block, n, &mut buf);
        self.scratch = buf;
        r
    }

    /// Reads `n` blocks from `block` into `buf` and puts them in, the
    /// first last (so that the others cannot evict it): its slot.
    fn load<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        n: usize,
        buf: &mut [u8],
    ) -> Result<usize, FsError> {
        dev.read(block, &mut buf[..n * SECTOR])?;
        for k in (1..n).rev() {
            self.insert(dev, block + k as u64, buf, k)?;
        }
        self.insert(dev, block, buf, 0)
    }

    /// Writes every dirty block of class `c` and below, class by class
    /// with a flush before each class that follows a lower one, in runs.
    fn write_classes<D: BlockDevice>(&mut self, dev: &mut D, c: Class) -> Result<(), FsError> {
        for k in CLASSES.into_iter().filter(|&k| k <= c) {
            let mut dirty: Vec<(u64, usize)> = self
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.dirty == Some(k))
                .map(|(i, s)| (s.block, i))
                .collect();
            if k == Class::Data {
                self.write_behind(dev)?;
            }
            if dirty.is_empty() {
                continue;
            }
            if self.unflushed & below(k) != 0 {
                dev.flush()?;
                self.unflushed = 0;
            }
            dirty.sort_unstable();
            let mut at = 0;
            while at < dirty.len() {
                let (first, _) = dirty[at];
                let fat = self.fat0_end(first);
                let mut end = at + 1;
                while end < dirty.len()
                    && end - at < MAX_RUN
                    && dirty[end].0 == first + (end - at) as u64
                    && self.fat0_end(dirty[end].0) == fat
                {
                    end += 1;
                }
                let mut buf = Vec::with_capacity((end - at) * SECTOR);
                for &(_, i) in &dirty[at..end] {
                    buf.extend_from_slice(&self.slots[i].data[..]);
                }
                self.dev_write(dev, first, &buf)?;
                for &(_, i) in &dirty[at..end] {
                    self.slots[i].dirty = None;
                }
                at = end;
            }
            self.unflushed |= bit(k);
            if k > Class::FatNew {
                self.epoch += 1;
            }
        }
        Ok(())
    }

    /// Writes the write-behind window out, in one request.
    fn write_behind<D: BlockDevice>(&mut self, dev: &mut D) -> Result<(), FsError> {
        if self.behind.len == 0 {
            return Ok(());
        }
        let (start, len) = (self.behind.start, self.behind.len);
        let buf = core::mem::take(&mut self.behind.buf);
        let r = self.dev_write(dev, start, &buf[..len * SECTOR]);
        self.behind.buf = buf;
        r?;
        self.behind.len = 0;
        self.unflushed |= bit(Class::Data);
        Ok(())
    }

    /// Whether file data block `block` is at hand (in a slot or a window)
    /// or on its way (in the read-ahead window in flight).
    pub fn has_data(&self, block: u64) -> bool {
        self.index.contains_key(&block)
            || self.behind.holds(block)
            || self.ahead.holds(block)
            || self.next.is_some_and(|s| s.holds(block))
    }

    /// File data from block `block` on, whole blocks, at least one and
    /// at most `most` (which the caller knows to be the file's next
    /// data): from a slot (that block alone), the write-behind window or
    /// the read-ahead window (on to its end, or to a block with a newer
    /// copy elsewhere); else from the read-ahead window in flight if it
    /// holds the block (waited for, it becomes the read-ahead window),
    /// else read with the `ahead - 1` blocks after it (the file's next
    /// data too) in one request into the read-ahead window.
    pub fn read_data<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        ahead: usize,
        most: usize,
    ) -> Result<&[u8], FsError> {
        let most = block + most.max(1) as u64;
        if let Some(&i) = self.index.get(&block) {
            return Ok(&self.slots[i].data[..]);
        }
        if self.behind.holds(block) {
            // No block of the window is in a slot.
            return Ok(self.behind.blocks(block, self.behind.end().min(most)));
        }
        if !self.ahead.holds(block) {
            self.ahead.len = 0;
            self.followed = false;
            let (start, n, started) = match self.next.take() {
                Some(s) if s.holds(block) => (s.start, s.len, Some(s.id)),
                other => {
                    if let Some(s) = other {
                        dev.cancel_read(s.id);
                    }
                    (block, ahead.clamp(1, MAX_AHEAD_BLOCKS), None)
                }
            };
            // The buffer only grows: no zeroing of a whole window per miss.
            if self.ahead.buf.len() < n * SECTOR {
                self.ahead.buf.resize(n * SECTOR, 0);
            }
            let buf = &mut self.ahead.buf[..n * SECTOR];
            match started {
                Some(id) => dev.finish_read(id, start, buf)?,
                None => dev.read(start, buf)?,
            }
            self.ahead.start = start;
            self.ahead.len = n;
        }
        // Up to the first block whose newest copy is elsewhere (for one
        // block there is nothing to look for: a range query on the index
        // costs a small read more than the rest of its way here).
        let mut end = self.ahead.end().min(most);
        if end > block + 1 {
            if let Some((&b, _)) = self.index.range(block + 1..end).next() {
                end = b;
            }
            if self.behind.overlaps(block + 1, end - block - 1) {
                end = end.min(self.behind.start);
            }
        }
        Ok(self.ahead.blocks(block, end))
    }

    /// Where the read-ahead window ends and how many blocks it holds, if
    /// it holds `block` and the window after it was not asked for yet:
    /// the caller's cue to [`Self::read_ahead`].
    pub fn wants_next(&self, block: u64) -> Option<(u64, usize)> {
        (!self.followed && self.ahead.holds(block)).then_some((self.ahead.end(), self.ahead.len))
    }

    /// Starts reading the `n` blocks from `block` (the file's data after
    /// the read-ahead window) in the background, as the next read-ahead
    /// window; `n` 0: there is none. Either way the current window counts
    /// as followed from now on. A window in flight elsewhere is cancelled.
    /// A device that cannot start the read leaves nothing in flight: the
    /// miss reads then, and reports the error if there is one.
    pub fn read_ahead<D: BlockDevice>(&mut self, dev: &mut D, block: u64, n: usize) {
        self.followed = true;
        let n = n.min(MAX_AHEAD_BLOCKS);
        if n == 0 || self.next.is_some_and(|s| s.start == block && s.len == n) {
            return;
        }
        if let Some(s) = self.next.take() {
            dev.cancel_read(s.id);
        }
        if let Ok(id) = dev.start_read(block, n) {
            self.next = Some(Started {
                start: block,
                len: n,
                id,
            });
        }
    }

    /// Writes `src` at byte `off` of file data block `block` (the
    /// block's other bytes kept, unless `fresh`: then they are no file
    /// data and may be zeros). The block stays dirty in a slot if it has
    /// one, else in the write-behind window, which grows while writes
    /// continue where it ends and is written out in one request when a
    /// write goes elsewhere, when it is full, and with the other data.
    pub fn write_data<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
        off: usize,
        src: &[u8],
        fresh: bool,
    ) -> Result<(), FsError> {
        if self.index.contains_key(&block) {
            let b = self.modify(dev, block, Class::Data)?;
            b[off..off + src.len()].copy_from_slice(src);
            return Ok(());
        }
        if !self.behind.holds(block) {
            if self.behind.len == BEHIND_BLOCKS
                || (self.behind.len > 0 && block != self.behind.end())
            {
                self.write_behind(dev)?;
            }
            if self.behind.len == 0 {
                self.behind.start = block;
            }
            let n = self.behind.len + 1;
            self.behind.buf.resize(n * SECTOR, 0);
            self.behind.len = n;
            let whole = off == 0 && src.len() == SECTOR;
            let b = self.behind.block_mut(block);
            if fresh || whole {
                b.fill(0);
            } else if self.ahead.holds(block) {
                let o = (block - self.ahead.start) as usize * SECTOR;
                b.copy_from_slice(&self.ahead.buf[o..o + SECTOR]);
            } else if let Err(e) = dev.read(block, b) {
                self.behind.len -= 1;
                return Err(e.into());
            }
        }
        self.behind.block_mut(block)[off..off + src.len()].copy_from_slice(src);
        Ok(())
    }

    /// Writes every dirty block of a class below `c` and flushes, so a
    /// block of class `c` may follow.
    fn drain_below<D: BlockDevice>(&mut self, dev: &mut D, c: Class) -> Result<(), FsError> {
        if let Some(k) = CLASSES.into_iter().rfind(|&k| k < c) {
            self.write_classes(dev, k)?;
        }
        if self.unflushed & below(c) != 0 {
            dev.flush()?;
            self.unflushed = 0;
        }
        Ok(())
    }

    /// Writes slot `i` alone back if dirty, in order.
    fn write_back<D: BlockDevice>(&mut self, dev: &mut D, i: usize) -> Result<(), FsError> {
        let Some(c) = self.slots[i].dirty else {
            return Ok(());
        };
        self.drain_below(dev, c)?;
        let (block, data) = (self.slots[i].block, *self.slots[i].data);
        self.dev_write(dev, block, &data)?;
        self.slots[i].dirty = None;
        self.unflushed |= bit(c);
        if c > Class::FatNew {
            self.epoch += 1;
        }
        Ok(())
    }

    /// `block`'s contents.
    pub fn read<D: BlockDevice>(
        &mut self,
        dev: &mut D,
        block: u64,
    ) -> Result<&[u8; SECTOR], FsError> {
        let i = self.slot(dev, block)?;
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
        let i = self.slot(dev, block)?;
        self.mark(dev, i, c)?;
        Ok(&mut self.slots[i].data)
    }

    /// Marks slot `i` dirty in class `c`. A slot dirty in another FAT
    /// class is written back first, with everything of its class and
    /// below: its contents so far belong to that class's group.
    fn mark<D: BlockDevice>(&mut self, dev: &mut D, i: usize, c: Class) -> Result<(), FsError> {
        match self.slots[i].dirty {
            Some(d) if d != c && (d == Class::FatNew || c == Class::FatNew) => {
                self.write_classes(dev, d)?;
                self.slots[i].dirty = Some(c);
            }
            d => self.slots[i].dirty = Some(d.map_or(c, |d| d.max(c))),
        }
        Ok(())
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
        self.dev_write(dev, block, data)?;
        self.unflushed |= bit(Class::Data);
        if self.behind.holds(block) {
            self.behind.block_mut(block).copy_from_slice(data);
        }
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
        let n = (buf.len() / SECTOR) as u64;
        if self.behind.overlaps(block, n) {
            self.write_behind(dev)?;
        }
        let mut i = 0;
        while i < n {
            let next = self.index.range(block + i..block + n).next();
            let j = next.map_or(n, |(&b, _)| b - block);
            if j > i {
                let (a, b) = (i as usize * SECTOR, j as usize * SECTOR);
                dev.read(block + i, &mut buf[a..b])?;
                i = j;
            }
            if let Some((_, &k)) = next {
                let a = i as usize * SECTOR;
                buf[a..a + SECTOR].copy_from_slice(&self.slots[k].data[..]);
                i += 1;
            }
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
        for (k, chunk) in buf.chunks(MAX_RUN * SECTOR).enumerate() {
            self.dev_write(dev, block + (k * MAX_RUN) as u64, chunk)?;
        }
        self.unflushed |= bit(Class::Data);
        let n = (buf.len() / SECTOR) as u64;
        // The write-behind window's copies take the new contents (and are
        // written again later: harmless).
        if self.behind.overlaps(block, n) {
            let from = block.max(self.behind.start);
            let to = (block + n).min(self.behind.end());
            for b in from..to {
                let o = (b - block) as usize * SECTOR;
                self.behind
                    .block_mut(b)
                    .copy_from_slice(&buf[o..o + SECTOR]);
            }
        }
        for (&b, &i) in self.index.range(block..block + n) {
            let o = (b - block) as usize * SECTOR;
            self.slots[i].data.copy_from_slice(&buf[o..o + SECTOR]);
            self.slots[i].dirty = None;
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
        self.write_classes(dev, Class::Dir)?;
        dev.flush()?;
        self.unflushed = 0;
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
    use crate::tests::Recorder;
    use crate::RamDisk;
    use alloc::vec;

    #[test]
    fn eviction_keeps_class_order() {
        let mut dev = Recorder {
            disk: RamDisk::new(64),
            log: vec![],
        };
        let mut c = Cache::new(4, None);
        c.modify(&mut dev, 10, Class::Dir).unwrap()[0] = 1;
        c.modify(&mut dev, 20, Class::Fat).unwrap()[0] = 2;
        c.modify(&mut dev, 30, Class::Data).unwrap()[0] = 3;
        c.modify(&mut dev, 31, Class::Data).unwrap()[0] = 4;
        // Evicts block 10 (least recently used, all dirty): data, flush,
        // FAT, flush, then the directory block.
        c.read(&mut dev, 40).unwrap();
        assert_eq!(dev.log, vec![30, 31, -1, 20, -1, 10]);
        assert_eq!(c.dirty_count(), 0);
        c.sync(&mut dev).unwrap();
        assert_eq!(dev.disk.bytes()[10 * 512], 1);
    }
}
