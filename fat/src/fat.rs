//! The file allocation table: entries (12-bit ones packed two per three
//! bytes, straddling sector boundaries), chains walked with a bound, and
//! allocation and freeing in the first FAT (the cache mirrors its
//! sectors to the copies).

use crate::bpb::{FatKind, Geometry, SECTOR};
use crate::cache::{Cache, Class};
use crate::error::{Corruption, FsError};
use crate::BlockDevice;
use alloc::vec::Vec;

/// A mounted volume below the handle layer: the device, its cache and
/// geometry, and the allocator's state.
pub struct Fs<D> {
    pub dev: D,
    pub cache: Cache,
    pub geo: Geometry,
    /// Free clusters, once counted (the FAT32 FSInfo hint is not trusted).
    pub free: Option<u32>,
    /// Where the next free-cluster search starts.
    pub next_free: u32,
    /// Whether a cluster was allocated or freed since mount (FSInfo's
    /// hints are rewritten only then).
    pub changed: bool,
    /// Runs of fresh clusters (`start..end`): allocated since the cache
    /// last wrote a block above [`Class::FatNew`] (its epoch
    /// `fresh_epoch`), so that nothing on the medium reaches them yet and
    /// links between them may land in any order. A cluster missing here
    /// is only treated as reachable: the list is bounded.
    pub fresh: Vec<(u32, u32)>,
    pub fresh_epoch: u64,
}

/// The most runs [`Fs::fresh`] keeps.
const FRESH_RUNS: usize = 64;

/// The most clusters [`Fs::extend`] allocates at once.
const MAX_EXTEND: u32 = 4096;

/// What a FAT entry says about the cluster after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Free,
    End,
    Cluster(u32),
}

impl<D: BlockDevice> Fs<D> {
    /// Byte `off` of FAT copy `copy`: its sector and offset.
    fn fat_pos(&self, copy: u32, off: u64) -> (u64, usize) {
        let sector =
            self.geo.fat_start + u64::from(copy) * self.geo.fat_sectors + off / SECTOR as u64;
        (sector, (off % SECTOR as u64) as usize)
    }

    fn fat_byte(&mut self, off: u64) -> Result<u8, FsError> {
        let (s, o) = self.fat_pos(0, off);
        Ok(self.cache.read(&mut self.dev, s)?[o])
    }

    fn set_fat_byte(
        &mut self,
        off: u64,
        class: Class,
        f: impl Fn(u8) -> u8,
    ) -> Result<(), FsError> {
        let (s, o) = self.fat_pos(0, off);
        let b = &mut self.cache.modify(&mut self.dev, s, class)?[o];
        *b = f(*b);
        Ok(())
    }

    /// The raw value of entry `n` (in the first FAT; `n` below
    /// clusters + 2, which the geometry guarantees the FAT holds).
    pub fn entry(&mut self, n: u32) -> Result<u32, FsError> {
        let n64 = u64::from(n);
        Ok(match self.geo.kind {
            FatKind::Fat12 => {
                let off = n64 + n64 / 2;
                let v = u16::from_le_bytes([self.fat_byte(off)?, self.fat_byte(off + 1)?]);
                u32::from(if n % 2 == 1 { v >> 4 } else { v & 0xFFF })
            }
            FatKind::Fat16 => {
                let off = n64 * 2;
                u32::from(u16::from_le_bytes([
                    self.fat_byte(off)?,
                    self.fat_byte(off + 1)?,
                ]))
            }
            FatKind::Fat32 => {
                // Four aligned bytes never straddle a sector.
                let (s, o) = self.fat_pos(0, n64 * 4);
                let b = self.cache.read(&mut self.dev, s)?;
                u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) & 0x0FFF_FFFF
            }
        })
    }

    /// The sectors of the first FAT holding entry `n`: the one with its
    /// low bits and the one with its high bits (two only for a FAT12
    /// entry straddling a sector boundary).
    fn entry_sectors(&self, n: u32) -> (u64, u64) {
        let n64 = u64::from(n);
        let (first, last) = match self.geo.kind {
            FatKind::Fat12 => (n64 + n64 / 2, n64 + n64 / 2 + 1),
            FatKind::Fat16 => (n64 * 2, n64 * 2 + 1),
            FatKind::Fat32 => (n64 * 4, n64 * 4 + 3),
        };
        (self.fat_pos(0, first).0, self.fat_pos(0, last).0)
    }

    /// Writes entry `n`'s sectors (every copy) to the medium now, after
    /// their predecessors, and flushes: for a FAT update that must land
    /// before the next one.
    pub fn persist_entry(&mut self, n: u32) -> Result<(), FsError> {
        let (a, b) = self.entry_sectors(n);
        let blocks = if a == b { &[a][..] } else { &[a, b][..] };
        self.cache.persist(&mut self.dev, blocks)
    }

    /// Sets entry `n` to `v` (in the first FAT, which the cache mirrors
    /// to the copies), its sectors dirty as [`Class::Fat`].
    pub fn set_entry(&mut self, n: u32, v: u32) -> Result<(), FsError> {
        self.set_entry_as(n, v, Class::Fat)
    }

    /// Sets entry `n` to `v`, its sectors dirty in `class`.
    ///
    /// A FAT12 entry straddling two sectors cannot change in one write, so
    /// when it moves between a cluster number and an end mark (a link, or
    /// a chain cut) its halves go out in order, with a flush between: a
    /// new end mark's high half first, a new link's low half first. Either
    /// way the half-written value is 0xF00 or more — past every cluster
    /// number — so an interruption between the halves cannot point the
    /// chain into another chain.
    fn set_entry_as(&mut self, n: u32, v: u32, class: Class) -> Result<(), FsError> {
        let n64 = u64::from(n);
        let ordered = self.geo.kind == FatKind::Fat12
            && (n64 + n64 / 2) % SECTOR as u64 == SECTOR as u64 - 1
            && v != 0
            && self.entry(n)? != 0;
        {
            match self.geo.kind {
                FatKind::Fat12 => {
                    let off = n64 + n64 / 2;
                    let v = v as u16 & 0xFFF;
                    // The byte at `off` holds the low bits, the next the high.
                    let odd = n % 2 == 1;
                    let low = move |b: u8| {
                        if odd {
                            (b & 0x0F) | ((v << 4) as u8)
                        } else {
                            v as u8
                        }
                    };
                    let high = move |b: u8| {
                        if odd {
                            (v >> 4) as u8
                        } else {
                            (b & 0xF0) | (v >> 8) as u8
                        }
                    };
                    if !ordered {
                        self.set_fat_byte(off, class, low)?;
                        self.set_fat_byte(off + 1, class, high)?;
                    } else if v >= 0xF00 {
                        self.set_fat_byte(off + 1, class, high)?;
                        let s = self.fat_pos(0, off + 1).0;
                        self.cache.persist(&mut self.dev, &[s])?;
                        self.set_fat_byte(off, class, low)?;
                    } else {
                        self.set_fat_byte(off, class, low)?;
                        let s = self.fat_pos(0, off).0;
                        self.cache.persist(&mut self.dev, &[s])?;
                        self.set_fat_byte(off + 1, class, high)?;
                    }
                }
                FatKind::Fat16 => {
                    let [lo, hi] = (v as u16).to_le_bytes();
                    self.set_fat_byte(n64 * 2, class, |_| lo)?;
                    self.set_fat_byte(n64 * 2 + 1, class, |_| hi)?;
                }
                FatKind::Fat32 => {
                    // The top four bits are reserved: kept as found.
                    let (s, o) = self.fat_pos(0, n64 * 4);
                    let b = self.cache.modify(&mut self.dev, s, class)?;
                    let old = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
                    let new = (old & 0xF000_0000) | (v & 0x0FFF_FFFF);
                    b[o..o + 4].copy_from_slice(&new.to_le_bytes());
                }
            }
        }
        Ok(())
    }

    /// The end-of-chain mark to write.
    fn eoc(&self) -> u32 {
        match self.geo.kind {
            FatKind::Fat12 => 0xFFF,
            FatKind::Fat16 => 0xFFFF,
            FatKind::Fat32 => 0x0FFF_FFFF,
        }
    }

    /// What entry `c` says: free, end of chain, or the next cluster. A
    /// reserved value, a bad-cluster mark or a number outside the data
    /// area is corruption.
    pub fn next(&mut self, c: u32) -> Result<Next, FsError> {
        let v = self.entry(c)?;
        let end = match self.geo.kind {
            FatKind::Fat12 => 0xFF8,
            FatKind::Fat16 => 0xFFF8,
            FatKind::Fat32 => 0x0FFF_FFF8,
        };
        if v == 0 {
            Ok(Next::Free)
        } else if v >= end {
            Ok(Next::End)
        } else if self.geo.is_cluster(v) {
            Ok(Next::Cluster(v))
        } else {
            Err(Corruption::ClusterOutOfRange { at: c, value: v }.into())
        }
    }

    /// The cluster after `c` in the chain from `start`, `None` at its end;
    /// `steps` counts the walk so that a loop ends as corruption.
    pub fn step(&mut self, start: u32, c: u32, steps: &mut u32) -> Result<Option<u32>, FsError> {
        *steps += 1;
        if *steps > self.geo.clusters {
            return Err(Corruption::ChainLoop { start }.into());
        }
        match self.next(c)? {
            Next::End => Ok(None),
            Next::Cluster(n) => Ok(Some(n)),
            Next::Free => Err(Corruption::CrossLinked { cluster: c }.into()),
        }
    }

    /// A free cluster (not yet claimed), searching from the hint.
    pub fn find_free(&mut self) -> Result<u32, FsError> {
        if self.free == Some(0) {
            return Err(FsError::NoSpace);
        }
        let n = self.geo.clusters;
        let start = self.next_free.saturating_sub(2) % n;
        for i in 0..n {
            let c = 2 + (start + i) % n;
            if self.entry(c)? == 0 {
                return Ok(c);
            }
        }
        self.free = Some(0);
        Err(FsError::NoSpace)
    }

    /// Marks free cluster `c` as a chain's end and links it after `prev`.
    /// `c`'s end mark is a fresh cluster's entry ([`Class::FatNew`]); so
    /// is the link when `prev` is fresh too, else the link is
    /// [`Class::Fat`] and lands after it: either way an interruption
    /// cannot leave a chain on the medium running into a free cluster.
    pub fn claim(&mut self, c: u32, prev: Option<u32>) -> Result<(), FsError> {
        self.set_entry_as(c, self.eoc(), Class::FatNew)?;
        if let Some(p) = prev {
            // Asked after `c`'s entry is set: if the cache writes a link
            // out meanwhile (a new epoch), `c`'s end mark went first.
            let class = if self.is_fresh(p) {
                Class::FatNew
            } else {
                Class::Fat
            };
            self.set_entry_as(p, c, class)?;
        }
        self.note_fresh(c);
        self.free = self.free.map(|f| f.saturating_sub(1));
        self.next_free = c + 1;
        self.changed = true;
        Ok(())
    }

    /// Forgets the fresh clusters once the cache has written a link.
    fn fresh_now(&mut self) {
        if self.cache.epoch() != self.fresh_epoch {
            self.fresh.clear();
            self.fresh_epoch = self.cache.epoch();
        }
    }

    /// Whether nothing on the medium reaches cluster `c` yet.
    fn is_fresh(&mut self, c: u32) -> bool {
        self.fresh_now();
        self.fresh.iter().any(|&(a, b)| (a..b).contains(&c))
    }

    /// Counts `c` (just claimed) among the fresh clusters.
    fn note_fresh(&mut self, c: u32) {
        self.fresh_now();
        let len = self.fresh.len();
        match self.fresh.last_mut() {
            Some((_, end)) if *end == c => *end = c + 1,
            _ if len < FRESH_RUNS => self.fresh.push((c, c + 1)),
            _ => {}
        }
    }

    /// Allocates a cluster after `prev` (or a new chain).
    pub fn alloc(&mut self, prev: Option<u32>) -> Result<u32, FsError> {
        let c = match prev {
            Some(p) => self.find_free_after(p)?,
            None => self.find_free()?,
        };
        self.claim(c, prev)?;
        Ok(c)
    }

    /// Allocates up to `n` (at least 1) clusters as a chain after `prev`
    /// (or a new chain) at once: the first as [`Fs::alloc`] picks it, the
    /// rest the free clusters after it (next-fit, contiguous while the
    /// free space allows; fewer than `n` where the FAT ends). Each entry is
    /// set once, as a fresh cluster's, then `prev`'s link, as in
    /// [`Fs::claim`]. Returns the first cluster.
    pub fn extend(&mut self, prev: Option<u32>, n: u32) -> Result<u32, FsError> {
        let first = match prev {
            Some(p) => self.find_free_after(p)?,
            None => self.find_free()?,
        };
        let n = n.clamp(1, MAX_EXTEND);
        let mut chain = Vec::with_capacity(n as usize);
        chain.push(first);
        let end = self.geo.clusters + 2;
        let mut c = first + 1;
        while chain.len() < n as usize && c < end {
            if self.entry(c)? == 0 {
                chain.push(c);
            }
            c += 1;
        }
        let eoc = self.eoc();
        for (i, &c) in chain.iter().enumerate() {
            let next = chain.get(i + 1).copied().unwrap_or(eoc);
            self.set_entry_as(c, next, Class::FatNew)?;
        }
        if let Some(p) = prev {
            // Asked after the new entries are set, as in `claim`.
            let class = if self.is_fresh(p) {
                Class::FatNew
            } else {
                Class::Fat
            };
            self.set_entry_as(p, first, class)?;
        }
        for &c in &chain {
            self.note_fresh(c);
        }
        let k = chain.len() as u32;
        self.free = self.free.map(|f| f.saturating_sub(k));
        self.next_free = chain[chain.len() - 1] + 1;
        self.changed = true;
        Ok(first)
    }

    /// A free cluster to link after `p`. When `p`'s FAT12 entry straddles
    /// two sectors, its link goes out low half first (see
    /// [`Fs::set_entry`]); a cluster whose low bits make that half-written
    /// value an end mark (0xFF8 and up) is preferred, so that even an
    /// interruption between the halves leaves a clean chain end.
    fn find_free_after(&mut self, p: u32) -> Result<u32, FsError> {
        let p64 = u64::from(p);
        if self.geo.kind != FatKind::Fat12 || (p64 + p64 / 2) % SECTOR as u64 != SECTOR as u64 - 1 {
            return self.find_free();
        }
        let good = |c: u32| {
            if p % 2 == 1 {
                c & 0xF >= 0x8
            } else {
                c & 0xFF >= 0xF8
            }
        };
        for c in (2..self.geo.clusters + 2).filter(|&c| good(c)) {
            if self.entry(c)? == 0 {
                return Ok(c);
            }
        }
        self.find_free()
    }

    /// Frees the chain from `start`. A cluster already free inside it
    /// means another chain shared it (and freed it): corruption, and the
    /// walk stops there.
    pub fn free_chain(&mut self, start: u32) -> Result<(), FsError> {
        let mut c = start;
        let mut steps = 0;
        loop {
            let next = self.step(start, c, &mut steps)?;
            self.set_entry(c, 0)?;
            self.free = self.free.map(|f| f + 1);
            self.next_free = self.next_free.min(c);
            self.changed = true;
            match next {
                Some(n) => c = n,
                None => return Ok(()),
            }
        }
    }

    /// Ends the chain at `last` and frees what followed it.
    pub fn cut_after(&mut self, start: u32, last: u32) -> Result<(), FsError> {
        let mut steps = 0;
        let rest = self.step(start, last, &mut steps)?;
        self.set_entry(last, self.eoc())?;
        // The new end must be on the medium before the tail is freed, or
        // an interruption leaves the chain running into free clusters.
        if rest.is_some() {
            self.persist_entry(last)?;
        }
        match rest {
            Some(r) => self.free_chain(r),
            None => Ok(()),
        }
    }

    /// Free clusters, counted once and kept up to date after.
    pub fn free_clusters(&mut self) -> Result<u32, FsError> {
        if let Some(f) = self.free {
            return Ok(f);
        }
        let mut f = 0;
        let end = self.geo.clusters + 2;
        if self.geo.kind == FatKind::Fat12 {
            for c in 2..end {
                if self.entry(c)? == 0 {
                    f += 1;
                }
            }
        } else {
            // Whole sectors at a time: entries never straddle one here.
            let width = if self.geo.kind == FatKind::Fat16 {
                2
            } else {
                4
            };
            let per_sector = (SECTOR / width) as u32;
            let mut c = 2;
            while c < end {
                let (s, o) = self.fat_pos(0, u64::from(c) * width as u64);
                let n = (per_sector - o as u32 / width as u32).min(end - c);
                let b = self.cache.read(&mut self.dev, s)?;
                f += b[o..o + n as usize * width]
                    .chunks_exact(width)
                    .filter(|e| match width {
                        2 => e[0] == 0 && e[1] == 0,
                        _ => u32::from_le_bytes([e[0], e[1], e[2], e[3]]) & 0x0FFF_FFFF == 0,
                    })
                    .count() as u32;
                c += n;
            }
        }
        self.free = Some(f);
        Ok(f)
    }

    /// Writes the FAT32 FSInfo hints (free count, next free) if the
    /// sector carries its three signatures; leaves it alone otherwise.
    pub fn write_fsinfo(&mut self) -> Result<(), FsError> {
        let Some(s) = self.geo.fsinfo.filter(|_| self.changed) else {
            return Ok(());
        };
        let free = self.free.unwrap_or(u32::MAX);
        let next = self.next_free;
        let b = self.cache.read(&mut self.dev, s)?;
        let sig = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        if sig(0) != 0x4161_5252 || sig(484) != 0x6141_7272 || sig(508) != 0xAA55_0000 {
            return Ok(());
        }
        if sig(488) == free && sig(492) == next {
            return Ok(());
        }
        let b = self.cache.modify(&mut self.dev, s, Class::Fat)?;
        b[488..492].copy_from_slice(&free.to_le_bytes());
        b[492..496].copy_from_slice(&next.to_le_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{format, RamDisk};

    fn fs12() -> Fs<RamDisk> {
        let mut d = RamDisk::new(2048);
        format(&mut d, Some(FatKind::Fat12), "").unwrap();
        let v = crate::Volume::mount(d).unwrap();
        v.into_fs()
    }

    #[test]
    fn fat12_entries_straddle_sectors() {
        let mut fs = fs12();
        assert_eq!(fs.geo.kind, FatKind::Fat12);
        // Entry 341 starts at byte 511: its 12 bits straddle sectors 0 and 1
        // of the FAT; 340 and 342 are its neighbours in the same bytes.
        for (n, v) in [(340u32, 0xABC), (341, 0x123), (342, 0xDEF)] {
            fs.set_entry(n, v).unwrap();
        }
        assert_eq!(fs.entry(340).unwrap(), 0xABC);
        assert_eq!(fs.entry(341).unwrap(), 0x123);
        assert_eq!(fs.entry(342).unwrap(), 0xDEF);
        fs.cache.sync(&mut fs.dev).unwrap();
        let fat = fs.geo.fat_start as usize * 512;
        let bytes = fs.dev.bytes();
        // 341 is odd: its low nibble in byte 511's high half, the rest in 512.
        assert_eq!(bytes[fat + 511] >> 4, 0x3);
        assert_eq!(bytes[fat + 512], 0x12);
        // The second copy holds the same.
        let fat2 = fat + fs.geo.fat_sectors as usize * 512;
        assert_eq!(bytes[fat..fat2], bytes[fat2..fat2 + (fat2 - fat)]);
    }

    #[test]
    fn loops_are_corruption() {
        let mut fs = fs12();
        fs.set_entry(10, 11).unwrap();
        fs.set_entry(11, 10).unwrap();
        let mut steps = 0;
        let mut c = 10;
        let err = loop {
            match fs.step(10, c, &mut steps) {
                Ok(Some(n)) => c = n,
                Ok(None) => panic!("a loop ended"),
                Err(e) => break e,
            }
        };
        assert_eq!(err, FsError::Corrupt(Corruption::ChainLoop { start: 10 }));
    }
}
