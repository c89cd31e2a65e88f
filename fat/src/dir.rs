//! Directories: 32-byte slots in the fixed root (FAT12/16) or in a cluster
//! chain, long names assembled from LFN slots (order and checksum
//! checked; a broken set falls back to the short name), free-slot runs
//! found or made by growing the chain, paths resolved.

use alloc::string::String;
use alloc::vec::Vec;

use crate::bpb::{FatKind, SECTOR};
use crate::cache::Class;
use crate::error::{Corruption, FsError};
use crate::fat::Fs;
use crate::name::{self, ShortName};
use crate::{BlockDevice, DateTime};

/// Slots a directory may hold (FAT specification: 65536 entries).
pub const MAX_SLOTS: u32 = 65536;
/// The LFN attribute combination.
pub const ATTR_LFN: u8 = 0x0F;
pub const ATTR_VOLUME: u8 = 0x08;
pub const ATTR_DIR: u8 = 0x10;
/// Slot byte 0 of a deleted entry, and of the end of a directory.
pub const DELETED: u8 = 0xE5;
const SLOTS_PER_SECTOR: u32 = (SECTOR / 32) as u32;

/// A directory: the fixed root of FAT12/16, or a cluster chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirRef {
    Root,
    Chain(u32),
}

/// Where a slot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub sector: u64,
    pub offset: usize,
}

/// A walk over a directory's slots, bounded by [`MAX_SLOTS`] and the
/// chain's loop check.
pub struct Walker {
    dir: DirRef,
    /// The next slot's index.
    pub index: u32,
    /// The cluster holding the slot before `index` (the last one at the end).
    pub cluster: u32,
    steps: u32,
    done: bool,
}

/// A directory entry: its short entry and the slots it occupies.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The long name's UTF-16 units if a valid LFN set precedes the
    /// short entry (empty otherwise).
    pub long: Vec<u16>,
    pub raw: [u8; 32],
    /// LFN slots, then the short entry's slot (last).
    pub slots: Vec<Pos>,
    /// The slot index after the short entry (a listing cursor).
    pub next_index: u32,
}

impl Entry {
    /// The long name if there is one, else the short name as displayed.
    pub fn name(&self) -> String {
        if self.long.is_empty() {
            return name::display(&self.short(), self.raw[12]);
        }
        char::decode_utf16(self.long.iter().copied())
            .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    }

    pub fn short(&self) -> ShortName {
        let mut s = [0u8; 11];
        s.copy_from_slice(&self.raw[..11]);
        s
    }
    pub fn attr(&self) -> u8 {
        self.raw[11]
    }
    pub fn is_dir(&self) -> bool {
        self.attr() & ATTR_DIR != 0
    }
    pub fn is_label(&self) -> bool {
        self.attr() & ATTR_VOLUME != 0
    }
    pub fn is_dot(&self) -> bool {
        &self.raw[..11] == b".          " || &self.raw[..11] == b"..         "
    }
    /// The first cluster as stored.
    pub fn cluster(&self, kind: FatKind) -> u32 {
        raw_cluster(&self.raw, kind)
    }
    #[cfg(test)]
    pub fn size(&self) -> u32 {
        u32::from_le_bytes([self.raw[28], self.raw[29], self.raw[30], self.raw[31]])
    }
    /// The short entry's slot.
    pub fn pos(&self) -> Pos {
        // Every entry has its short slot.
        self.slots.last().copied().unwrap_or(Pos {
            sector: 0,
            offset: 0,
        })
    }
}

/// Whether `target` is long name `long` (UTF-16, may be empty) or short
/// name `short`, in any case. ASCII names (nearly all) compare without
/// allocating.
fn named(long: &[u16], short: &ShortName, target: &str) -> bool {
    let ascii = target.is_ascii();
    if !long.is_empty() {
        if ascii && long.iter().all(|&u| u < 0x80) {
            if long.len() == target.len()
                && long
                    .iter()
                    .zip(target.bytes())
                    .all(|(&u, b)| (u as u8).eq_ignore_ascii_case(&b))
            {
                return true;
            }
        } else {
            let l: String = char::decode_utf16(long.iter().copied())
                .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect();
            if name::same(&l, target) {
                return true;
            }
        }
    }
    if target.len() > 12 && ascii {
        return false;
    }
    if ascii && short.is_ascii() {
        let (text, n) = name::display_ascii(short);
        return text[..n].eq_ignore_ascii_case(target.as_bytes());
    }
    name::same(&name::display(short, 0), target)
}

/// A short entry's first cluster (the high half only on FAT32: FAT12/16
/// leave it to other uses).
pub fn raw_cluster(raw: &[u8; 32], kind: FatKind) -> u32 {
    let lo = u32::from(u16::from_le_bytes([raw[26], raw[27]]));
    let hi = u32::from(u16::from_le_bytes([raw[20], raw[21]]));
    if kind == FatKind::Fat32 {
        (hi << 16) | lo
    } else {
        lo
    }
}

/// Sets a short entry's first cluster.
pub fn set_cluster(raw: &mut [u8; 32], c: u32) {
    raw[20..22].copy_from_slice(&((c >> 16) as u16).to_le_bytes());
    raw[26..28].copy_from_slice(&(c as u16).to_le_bytes());
}

/// Sets a short entry's modification date and time.
pub fn set_modified(raw: &mut [u8; 32], now: DateTime) {
    let (d, t, _) = now.to_fat();
    raw[22..24].copy_from_slice(&t.to_le_bytes());
    raw[24..26].copy_from_slice(&d.to_le_bytes());
    raw[18..20].copy_from_slice(&d.to_le_bytes());
}

/// A short entry: every time stamp `now`.
pub fn short_entry(
    short: &ShortName,
    attr: u8,
    cluster: u32,
    size: u32,
    now: DateTime,
) -> [u8; 32] {
    let mut e = [0u8; 32];
    e[..11].copy_from_slice(short);
    e[11] = attr;
    let (d, t, h) = now.to_fat();
    e[13] = h;
    e[14..16].copy_from_slice(&t.to_le_bytes());
    e[16..18].copy_from_slice(&d.to_le_bytes());
    set_modified(&mut e, now);
    set_cluster(&mut e, cluster);
    e[28..32].copy_from_slice(&size.to_le_bytes());
    e
}

/// The slots for `name`: LFN slots (last part first) if `lfn`, then the
/// short entry `short`.
pub fn entry_set(units: &[u16], lfn: bool, short: [u8; 32]) -> Vec<[u8; 32]> {
    let mut out = Vec::new();
    if lfn {
        let mut s = [0u8; 11];
        s.copy_from_slice(&short[..11]);
        let chk = name::checksum(&s);
        let parts = units.len().div_ceil(13);
        for seq in (1..=parts).rev() {
            let mut e = [0u8; 32];
            e[0] = seq as u8 | if seq == parts { 0x40 } else { 0 };
            e[11] = ATTR_LFN;
            e[13] = chk;
            for (k, &o) in LFN_OFFSETS.iter().enumerate() {
                let i = (seq - 1) * 13 + k;
                // The name, a 0x0000 terminator if it fits, 0xFFFF padding.
                let u = match i.cmp(&units.len()) {
                    core::cmp::Ordering::Less => units[i],
                    core::cmp::Ordering::Equal => 0,
                    core::cmp::Ordering::Greater => 0xFFFF,
                };
                e[o..o + 2].copy_from_slice(&u.to_le_bytes());
            }
            out.push(e);
        }
    }
    out.push(short);
    out
}

/// Byte offsets of the 13 UTF-16 units in an LFN slot.
const LFN_OFFSETS: [usize; 13] = [1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30];

/// An LFN set being assembled, last part first.
pub struct Lfn {
    units: [u16; 260],
    parts: u8,
    expect: u8,
    chk: u8,
    slots: Vec<Pos>,
}

impl Lfn {
    pub fn new() -> Lfn {
        Lfn {
            units: [0; 260],
            parts: 0,
            expect: 0,
            chk: 0,
            slots: Vec::new(),
        }
    }

    /// The long name of short entry `short` just scanned: the assembled
    /// units up to the terminator if the set is complete and its checksum
    /// matches, else empty.
    fn long(&self, short: &ShortName) -> &[u16] {
        if self.parts == 0 || self.expect != 0 || self.chk != name::checksum(short) {
            return &[];
        }
        let all = &self.units[..usize::from(self.parts) * 13];
        let end = all.iter().position(|&u| u == 0).unwrap_or(all.len());
        &all[..end]
    }

    fn reset(&mut self) {
        self.parts = 0;
        self.expect = 0;
        self.slots.clear();
    }
}

impl<D: BlockDevice> Fs<D> {
    /// The root directory.
    pub fn root(&self) -> DirRef {
        match self.geo.kind {
            FatKind::Fat32 => DirRef::Chain(self.geo.root_cluster),
            _ => DirRef::Root,
        }
    }

    /// The directory an entry names (which must be a directory).
    pub fn dir_of(&self, e: &Entry) -> Result<DirRef, FsError> {
        let c = e.cluster(self.geo.kind);
        if c == 0 && e.is_dot() {
            return Ok(self.root());
        }
        if !self.geo.is_cluster(c) {
            return Err(Corruption::ClusterOutOfRange { at: 0, value: c }.into());
        }
        Ok(DirRef::Chain(c))
    }

    pub fn walker(&self, dir: DirRef) -> Result<Walker, FsError> {
        let cluster = match dir {
            DirRef::Root => 0,
            DirRef::Chain(c) if self.geo.is_cluster(c) => c,
            DirRef::Chain(c) => {
                return Err(Corruption::ClusterOutOfRange { at: 0, value: c }.into())
            }
        };
        Ok(Walker {
            dir,
            index: 0,
            cluster,
            steps: 0,
            done: false,
        })
    }

    /// The next slot's index and place, `None` past the directory's end.
    pub fn next_slot(&mut self, w: &mut Walker) -> Result<Option<(u32, Pos)>, FsError> {
        let i = w.index;
        let pos = match w.dir {
            DirRef::Root => {
                if i >= self.geo.root_entries {
                    return Ok(None);
                }
                self.geo.root_start + u64::from(i / SLOTS_PER_SECTOR)
            }
            DirRef::Chain(start) => {
                let per_cluster = self.geo.sectors_per_cluster * SLOTS_PER_SECTOR;
                if i > 0 && i.is_multiple_of(per_cluster) {
                    match self.step(start, w.cluster, &mut w.steps)? {
                        None => return Ok(None),
                        Some(_) if i >= MAX_SLOTS => return Err(Corruption::EntryPastEnd.into()),
                        Some(n) => w.cluster = n,
                    }
                }
                self.geo.cluster_sector(w.cluster) + u64::from(i % per_cluster / SLOTS_PER_SECTOR)
            }
        };
        w.index += 1;
        let offset = (i % SLOTS_PER_SECTOR) as usize * 32;
        Ok(Some((
            i,
            Pos {
                sector: pos,
                offset,
            },
        )))
    }

    pub fn read_slot(&mut self, p: Pos) -> Result<[u8; 32], FsError> {
        let b = self.cache.read(&mut self.dev, p.sector)?;
        let mut e = [0u8; 32];
        e.copy_from_slice(&b[p.offset..p.offset + 32]);
        Ok(e)
    }

    pub fn write_slot(&mut self, p: Pos, e: &[u8; 32]) -> Result<(), FsError> {
        let b = self.cache.modify(&mut self.dev, p.sector, Class::Dir)?;
        b[p.offset..p.offset + 32].copy_from_slice(e);
        Ok(())
    }

    /// The next short entry (labels and dot entries included) and its
    /// slot, `None` at the end of the directory; `lfn` holds the LFN slots
    /// before it (reused from call to call: no allocation per entry).
    pub fn next_raw(
        &mut self,
        w: &mut Walker,
        lfn: &mut Lfn,
    ) -> Result<Option<([u8; 32], Pos)>, FsError> {
        lfn.reset();
        while !w.done {
            let Some((_, p)) = self.next_slot(w)? else {
                w.done = true;
                break;
            };
            let raw = self.read_slot(p)?;
            if raw[0] == 0 {
                w.done = true;
                break;
            }
            if raw[0] == DELETED {
                lfn.reset();
                continue;
            }
            if raw[11] & 0x3F == ATTR_LFN {
                let seq = raw[0] & 0x1F;
                if raw[0] & 0x40 != 0 {
                    lfn.reset();
                    if seq == 0 || seq > 20 {
                        continue;
                    }
                    lfn.parts = seq;
                    lfn.chk = raw[13];
                } else if lfn.parts == 0 || seq == 0 || seq != lfn.expect || raw[13] != lfn.chk {
                    lfn.reset();
                    continue;
                }
                let base = usize::from(seq - 1) * 13;
                for (k, &o) in LFN_OFFSETS.iter().enumerate() {
                    lfn.units[base + k] = u16::from_le_bytes([raw[o], raw[o + 1]]);
                }
                lfn.expect = seq - 1;
                lfn.slots.push(p);
                continue;
            }
            return Ok(Some((raw, p)));
        }
        Ok(None)
    }

    /// The entry [`Fs::next_raw`] just returned, built.
    fn build(w: &Walker, lfn: &Lfn, raw: [u8; 32], p: Pos) -> Entry {
        let mut short = [0u8; 11];
        short.copy_from_slice(&raw[..11]);
        let long = lfn.long(&short).to_vec();
        let mut slots = if long.is_empty() {
            Vec::new()
        } else {
            lfn.slots.clone()
        };
        slots.push(p);
        Entry {
            long,
            raw,
            slots,
            next_index: w.index,
        }
    }

    /// The next entry (labels and dot entries included), `None` at the
    /// end of the directory.
    pub fn next_entry(&mut self, w: &mut Walker) -> Result<Option<Entry>, FsError> {
        let mut lfn = Lfn::new();
        Ok(self
            .next_raw(w, &mut lfn)?
            .map(|(raw, p)| Self::build(w, &lfn, raw, p)))
    }

    /// The entry called `name` (long or short name, any case) in `dir`.
    pub fn find(&mut self, dir: DirRef, name: &str) -> Result<Option<Entry>, FsError> {
        let mut w = self.walker(dir)?;
        let mut lfn = Lfn::new();
        while let Some((raw, p)) = self.next_raw(&mut w, &mut lfn)? {
            if raw[11] & ATTR_VOLUME != 0 {
                continue;
            }
            let mut short = [0u8; 11];
            short.copy_from_slice(&raw[..11]);
            if named(lfn.long(&short), &short, name) {
                return Ok(Some(Self::build(&w, &lfn, raw, p)));
            }
        }
        Ok(None)
    }

    /// The first file or directory at or after slot `cursor` (no labels,
    /// no dot entries).
    pub fn list_from(&mut self, dir: DirRef, cursor: u32) -> Result<Option<Entry>, FsError> {
        let mut w = self.walker(dir)?;
        while w.index < cursor {
            if self.next_slot(&mut w)?.is_none() {
                return Ok(None);
            }
        }
        let mut lfn = Lfn::new();
        while let Some((raw, p)) = self.next_raw(&mut w, &mut lfn)? {
            let e = Self::build(&w, &lfn, raw, p);
            if !e.is_label() && !e.is_dot() {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    /// A short name for `name` unique in `dir`, and whether LFN slots must
    /// carry the name itself.
    pub fn short_for(&mut self, dir: DirRef, name: &str) -> Result<(ShortName, bool), FsError> {
        if let Some(s) = name::exact_short(name) {
            return Ok((s, false));
        }
        let mut taken: Vec<ShortName> = Vec::new();
        let mut w = self.walker(dir)?;
        let mut lfn = Lfn::new();
        while let Some((raw, _)) = self.next_raw(&mut w, &mut lfn)? {
            let mut s = [0u8; 11];
            s.copy_from_slice(&raw[..11]);
            taken.push(s);
        }
        // A name that differs from a short name only in case keeps it.
        if let Some(s) = name::exact_short(&name.to_ascii_uppercase()) {
            if !taken.contains(&s) {
                return Ok((s, true));
            }
        }
        // Sorted: a directory of 65536 look-alike names costs a binary
        // search per tail tried, not a scan.
        taken.sort_unstable();
        let (base, ext) = name::basis(name);
        for n in 1..=999_999 {
            let s = name::with_tail(&base, &ext, n);
            if taken.binary_search(&s).is_err() {
                return Ok((s, true));
            }
        }
        Err(FsError::NoSpace)
    }

    /// Finds `n` consecutive free slots in `dir`, growing a chained
    /// directory by a zeroed cluster when there are none.
    pub fn reserve(&mut self, dir: DirRef, n: usize) -> Result<Vec<Pos>, FsError> {
        loop {
            let mut w = self.walker(dir)?;
            let mut run = Vec::new();
            let mut ended = false;
            while let Some((_, p)) = self.next_slot(&mut w)? {
                let b0 = if ended { 0 } else { self.read_slot(p)?[0] };
                ended |= b0 == 0;
                if b0 != 0 && b0 != DELETED {
                    run.clear();
                    continue;
                }
                run.push(p);
                if run.len() < n {
                    continue;
                }
                // Past the end mark, the slot after the run must say "end"
                // (a hostile image may hold anything there).
                if ended {
                    if let Some((_, q)) = self.next_slot(&mut w)? {
                        if self.read_slot(q)?[0] != 0 {
                            self.cache.modify(&mut self.dev, q.sector, Class::Dir)?[q.offset] = 0;
                        }
                    }
                }
                return Ok(run);
            }
            let DirRef::Chain(_) = dir else {
                return Err(FsError::NoSpace);
            };
            let per_cluster = self.geo.sectors_per_cluster * SLOTS_PER_SECTOR;
            if w.index + per_cluster > MAX_SLOTS {
                return Err(FsError::NoSpace);
            }
            let c = self.find_free()?;
            self.write_fresh(c, &[0u8; SECTOR])?;
            self.claim(c, Some(w.cluster))?;
        }
    }

    /// Writes a fresh directory cluster straight to the medium: `first`
    /// as its first sector, zeros after (see the crate's write order).
    pub fn write_fresh(&mut self, c: u32, first: &[u8; SECTOR]) -> Result<(), FsError> {
        let s = self.geo.cluster_sector(c);
        self.cache.write_through(&mut self.dev, s, first)?;
        for k in 1..u64::from(self.geo.sectors_per_cluster) {
            self.cache
                .write_through(&mut self.dev, s + k, &[0u8; SECTOR])?;
        }
        Ok(())
    }

    /// Marks every slot of `e` deleted.
    ///
    /// The short entry goes first, and reaches the medium before LFN
    /// slots in other sectors are touched: an interruption leaves at worst
    /// orphaned LFN slots (which readers skip), never the short entry
    /// without its long name.
    pub fn delete_entry(&mut self, e: &Entry) -> Result<(), FsError> {
        let short = e.pos();
        self.cache.modify(&mut self.dev, short.sector, Class::Dir)?[short.offset] = DELETED;
        if e.slots.iter().any(|p| p.sector != short.sector) {
            self.cache.persist(&mut self.dev, &[short.sector])?;
        }
        for p in &e.slots[..e.slots.len() - 1] {
            self.cache.modify(&mut self.dev, p.sector, Class::Dir)?[p.offset] = DELETED;
        }
        Ok(())
    }

    /// Writes entry set `set` into `slots` (from [`Fs::reserve`]): LFN
    /// slots first, on the medium before the short entry when they lie in
    /// other sectors, so that the short entry never appears without its
    /// long name.
    pub fn write_set(&mut self, slots: &[Pos], set: &[[u8; 32]]) -> Result<(), FsError> {
        let (Some((short, lfn_slots)), Some((short_e, lfn_e))) =
            (slots.split_last(), set.split_last())
        else {
            return Ok(());
        };
        let mut early = Vec::new();
        for (p, e) in lfn_slots.iter().zip(lfn_e) {
            self.write_slot(*p, e)?;
            if p.sector != short.sector && !early.contains(&p.sector) {
                early.push(p.sector);
            }
        }
        if !early.is_empty() {
            self.cache.persist(&mut self.dev, &early)?;
        }
        self.write_slot(*short, short_e)
    }
}

/// What a path names.
pub enum Node {
    Root,
    Entry { parent: DirRef, entry: Entry },
}

/// A path's components: absolute, `/` separated, empty ones skipped; `.`
/// and `..` refused (the caller normalises).
pub fn components(path: &str) -> Result<Vec<&str>, FsError> {
    if !path.starts_with('/') {
        return Err(FsError::InvalidArgument);
    }
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if parts.iter().any(|&p| p == "." || p == "..") {
        return Err(FsError::InvalidName);
    }
    Ok(parts)
}

impl<D: BlockDevice> Fs<D> {
    /// The directory that `parts` names.
    pub fn dir_at(&mut self, parts: &[&str]) -> Result<DirRef, FsError> {
        let mut dir = self.root();
        for p in parts {
            let e = self.find(dir, p)?.ok_or(FsError::NotFound)?;
            if !e.is_dir() {
                return Err(FsError::NotADirectory);
            }
            dir = self.dir_of(&e)?;
        }
        Ok(dir)
    }

    /// Whether `dir` is directory `c` or inside it, found by following
    /// `..` entries up to the root (a path check would miss short-name
    /// aliases). A climb deeper than any real tree is corruption.
    pub fn is_within(&mut self, dir: DirRef, c: u32) -> Result<bool, FsError> {
        let mut d = dir;
        for _ in 0..4096 {
            match d {
                DirRef::Chain(x) if x == c => return Ok(true),
                _ if d == self.root() => return Ok(false),
                _ => {}
            }
            let up = self.find(d, "..")?.ok_or(Corruption::BadEntry)?;
            d = self.dir_of(&up)?;
        }
        Err(Corruption::EntryPastEnd.into())
    }

    /// What `path` names.
    pub fn resolve(&mut self, path: &str) -> Result<Node, FsError> {
        let parts = components(path)?;
        let Some((last, up)) = parts.split_last() else {
            return Ok(Node::Root);
        };
        let parent = self.dir_at(up)?;
        let entry = self.find(parent, last)?.ok_or(FsError::NotFound)?;
        Ok(Node::Entry { parent, entry })
    }
}
