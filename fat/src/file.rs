//! Open files: handles, reading and writing through the cache, seeking,
//! truncating. A file's directory entry (first cluster, size, time) is
//! rewritten after every write; the cache's class order puts it on the
//! medium after the data and FAT blocks it covers.
//!
//! Reads and writes of at least [`AHEAD_BLOCKS`] whole sectors go
//! straight to the device, one request per run of contiguous clusters
//! (allocated on the way); smaller ones through the cache's read-ahead
//! and write-behind windows. A reader that goes on where it left off
//! has the window after the one it is in read in the background (twice
//! as large, up to [`MAX_AHEAD_BLOCKS`]), so it rarely waits for the
//! device. Where the walks for these windows found the file in
//! consecutive sectors (the handle's span), a small read finds its
//! sectors without a step along the chain and copies them at once, not
//! sector by sector.

use crate::bpb::SECTOR;
use crate::cache::{AHEAD_BLOCKS, MAX_AHEAD_BLOCKS};
use crate::dir::{self, Node};
use crate::error::{Corruption, FsError};
use crate::volume::{attr, Handle, Metadata, OpenFile, OpenMode, SeekFrom, Span, Volume, MAX_OPEN};
use crate::BlockDevice;

/// The largest file FAT can describe.
const MAX_SIZE: u64 = u32::MAX as u64;

/// Zeros for filling a gap, a sector at a time.
static ZEROS: [u8; SECTOR] = [0; SECTOR];

impl<D: BlockDevice> Volume<D> {
    /// The open file behind `h` and its slot, copied out: callers store
    /// it back into `files[slot]` when done.
    fn get(&self, h: Handle) -> Result<(usize, OpenFile), FsError> {
        let i = (h.0 & 0xFFFF) as usize;
        let generation = (h.0 >> 16) as u16;
        match (self.files.get(i), self.gens.get(i)) {
            (Some(Some(f)), Some(&g)) if g == generation => Ok((i, *f)),
            _ => Err(FsError::BadHandle),
        }
    }

    /// Opens (and perhaps creates or truncates) file `path`.
    pub fn open(&mut self, path: &str, mode: OpenMode) -> Result<Handle, FsError> {
        if !(mode.read || mode.writes())
            || ((mode.create || mode.create_new || mode.truncate) && !mode.writes())
        {
            return Err(FsError::InvalidArgument);
        }
        let slot = match self.files.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.files.len() < MAX_OPEN => {
                self.files.push(None);
                self.gens.push(0);
                self.files.len() - 1
            }
            None => return Err(FsError::TooManyOpen),
        };
        let (entry, raw) = match self.fs.resolve(path) {
            Ok(Node::Root) => return Err(FsError::IsADirectory),
            Ok(Node::Entry { entry, .. }) => {
                if mode.create_new {
                    return Err(FsError::Exists);
                }
                if entry.is_dir() {
                    return Err(FsError::IsADirectory);
                }
                if mode.writes() && entry.attr() & attr::READ_ONLY != 0 {
                    return Err(FsError::ReadOnly);
                }
                (entry.pos(), entry.raw)
            }
            Err(FsError::NotFound) if mode.create || mode.create_new => {
                let (parent, last, units) = self.parent_of(path)?;
                let raw = dir::short_entry(&[b' '; 11], attr::ARCHIVE, 0, 0, self.now());
                (self.add_entry(parent, last, &units, raw)?, raw)
            }
            Err(e) => return Err(e),
        };
        let first = dir::raw_cluster(&raw, self.kind());
        let size = u32::from_le_bytes([raw[28], raw[29], raw[30], raw[31]]);
        if first != 0 && !self.fs.geo.is_cluster(first) {
            return Err(Corruption::ClusterOutOfRange {
                at: 0,
                value: first,
            }
            .into());
        }
        if first == 0 && size != 0 {
            return Err(Corruption::BadEntry.into());
        }
        let mut f = OpenFile {
            entry,
            first,
            size,
            pos: 0,
            mode,
            cursor: None,
            ahead: None,
            span: None,
            read_end: 0,
        };
        if mode.truncate && size != 0 {
            self.cut(&mut f, 0)?;
        }
        self.files[slot] = Some(f);
        Ok(Handle(slot as u32 | u32::from(self.gens[slot]) << 16))
    }

    /// Closes `h`; the handle is stale from now on.
    pub fn close(&mut self, h: Handle) -> Result<(), FsError> {
        let (i, _) = self.get(h)?;
        self.files[i] = None;
        self.gens[i] = self.gens[i].wrapping_add(1);
        Ok(())
    }

    /// What the open file is.
    pub fn fstat(&mut self, h: Handle) -> Result<Metadata, FsError> {
        let (_, f) = self.get(h)?;
        Ok(Metadata::of(&self.fs.read_slot(f.entry)?))
    }

    /// Moves the position; past the end is fine (a write there fills the
    /// gap with zeros).
    pub fn seek(&mut self, h: Handle, to: SeekFrom) -> Result<u64, FsError> {
        let (i, mut f) = self.get(h)?;
        let new = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => u64::from(f.size).checked_add_signed(d),
            SeekFrom::Current(d) => f.pos.checked_add_signed(d),
        };
        f.pos = new.ok_or(FsError::InvalidArgument)?;
        self.files[i] = Some(f);
        Ok(f.pos)
    }

    /// Reads from the position; 0 at the end.
    pub fn read(&mut self, h: Handle, buf: &mut [u8]) -> Result<usize, FsError> {
        self.read_to(h, buf.len(), buf)
    }

    /// [`Self::read`] of up to `n` bytes (and at most `scratch.len()`)
    /// for a destination no Rust slice may name — memory another
    /// component can write meanwhile: `put(at, bytes)` gets the bytes
    /// piece by piece, `at` their offset in the read, each copied once
    /// from where the volume holds them; pieces that come straight from
    /// the device (64 KiB and more) come through `scratch`.
    pub fn read_with(
        &mut self,
        h: Handle,
        n: usize,
        scratch: &mut [u8],
        put: impl FnMut(usize, &[u8]),
    ) -> Result<usize, FsError> {
        let n = n.min(scratch.len());
        self.read_to(h, n, &mut Sink { scratch, put })
    }

    fn read_to<O: Out + ?Sized>(
        &mut self,
        h: Handle,
        n: usize,
        out: &mut O,
    ) -> Result<usize, FsError> {
        let (i, mut f) = self.get(h)?;
        if !f.mode.read {
            return Err(FsError::BadHandle);
        }
        let r = self.read_in(&mut f, n, out);
        self.files[i] = Some(f);
        r
    }

    fn read_in<O: Out + ?Sized>(
        &mut self,
        f: &mut OpenFile,
        want: usize,
        out: &mut O,
    ) -> Result<usize, FsError> {
        let left = u64::from(f.size).saturating_sub(f.pos);
        let n = (want as u64).min(left) as usize;
        let mut done = 0;
        // A read elsewhere reads only what it needs (the window would be
        // wasted on a reader going backwards or at random).
        let mut sequential = f.pos == 0 || f.pos == f.read_end;
        // A reader going on where it left off (not merely at the start:
        // that may be all it reads) gets the next window read ahead.
        let mut streaming = f.pos != 0 && f.pos == f.read_end;
        while done < n {
            // `left`: sectors from `s` on known to be the file's next.
            let (s, off, left) = self.read_at(f, f.pos)?;
            // Large reads: whole sectors, on through contiguous clusters,
            // in one request straight into `buf`.
            let want = (n - done) / SECTOR;
            let whole = if off == 0 && want >= AHEAD_BLOCKS {
                self.run(f, f.pos, s, left.min(want), want, false)?
            } else {
                0
            };
            let len = if whole > 0 {
                let len = whole * SECTOR;
                let dst = out.direct(done, len);
                self.fs.cache.read_blocks(&mut self.fs.dev, s, dst)?;
                out.filled(done, len);
                len
            } else {
                // Small ones through the read-ahead window, which a miss
                // fills with the file's next contiguous sectors.
                let mut ahead = 1;
                if !self.fs.cache.has_data(s) {
                    let at = f.pos - off as u64;
                    let rest = (u64::from(f.size) - at).div_ceil(SECTOR as u64);
                    let need = (off + n - done).div_ceil(SECTOR);
                    let cap = match sequential {
                        true => rest as usize,
                        false => need,
                    }
                    .clamp(1, AHEAD_BLOCKS);
                    ahead =
                        self.look_ahead(f, at, |v, f| v.run(f, at, s, left.min(cap), cap, false))?;
                    note_span(f, at, s, ahead);
                }
                // As many sectors at once as are known to follow.
                let most = (off + n - done).div_ceil(SECTOR).min(left);
                let b = self.fs.cache.read_data(&mut self.fs.dev, s, ahead, most)?;
                let len = (b.len() - off).min(n - done);
                out.put(done, &b[off..off + len]);
                if streaming {
                    if let Some((end, have)) = self.fs.cache.wants_next(s) {
                        let at = f.pos - off as u64 + (end - s) * SECTOR as u64;
                        self.read_ahead(f, at, have);
                    }
                }
                len
            };
            done += len;
            f.pos += len as u64;
            sequential = true;
            streaming = true;
        }
        f.read_end = f.pos;
        Ok(done)
    }

    /// [`Self::data_at`] for a read, and the sectors known to follow on the
    /// disk from there (to the cluster's end, or on through the span):
    /// in the span without a step along the chain — its sectors are its
    /// clusters in chain order, and the cursor moves as a step would.
    fn read_at(&mut self, f: &mut OpenFile, pos: u64) -> Result<(u64, usize, usize), FsError> {
        let geo = &self.fs.geo;
        let cb = u64::from(geo.cluster_bytes());
        let spc = u64::from(geo.sectors_per_cluster);
        if let Some((s, known)) = f.span.and_then(|sp| sp.at(pos)) {
            let idx = u32::try_from(pos / cb).map_err(|_| FsError::FileTooLarge)?;
            f.cursor = Some((idx, 2 + ((s - geo.data_start) / spc) as u32));
            let off = (pos % SECTOR as u64) as usize;
            return Ok((s, off, usize::try_from(known).unwrap_or(usize::MAX)));
        }
        match self.data_at(f, pos, false)? {
            Some(found) => Ok(found),
            None => Err(Corruption::ChainTooShort { start: f.first }.into()),
        }
    }

    /// Starts reading, in the background, the window after the read-ahead
    /// window the reader is in: the file's sectors from byte `at` (where
    /// that window of `have` blocks ends), twice as many up to
    /// [`MAX_AHEAD_BLOCKS`], as far as the file goes and its clusters are
    /// contiguous; none at the file's end. The file's cursor stays. A
    /// failure (a chain too short, a FAT sector unreadable) starts
    /// nothing: the read that gets there reports it.
    fn read_ahead(&mut self, f: &mut OpenFile, at: u64, have: usize) {
        let rest = u64::from(f.size).saturating_sub(at).div_ceil(SECTOR as u64);
        let cap = (2 * have).min(MAX_AHEAD_BLOCKS).min(rest as usize);
        let (mut block, mut n) = (0, 0);
        if cap > 0 {
            self.look_ahead(f, at, |v, f| {
                if let Ok(Some((s, _, left))) = v.data_at(f, at, false) {
                    if let Ok(run) = v.run(f, at, s, left.min(cap), cap, false) {
                        (block, n) = (s, run);
                    }
                }
            });
            note_span(f, at, block, n);
        }
        self.fs.cache.read_ahead(&mut self.fs.dev, block, n);
    }

    /// Runs `walk`, a look along the chain from file byte `at` on (for a
    /// read-ahead window), from the furthest chain position known up to
    /// there — the file's cursor, or where the last look ahead ended — and
    /// keeps where it ends for the next one. The file's cursor stays: the
    /// reads to come must not find it past their position (a lookup
    /// behind the cursor walks from the chain's start).
    fn look_ahead<T>(
        &mut self,
        f: &mut OpenFile,
        at: u64,
        walk: impl FnOnce(&mut Self, &mut OpenFile) -> T,
    ) -> T {
        let kept = f.cursor;
        let idx = at / u64::from(self.fs.geo.cluster_bytes());
        if let Some(a) = f.ahead {
            if u64::from(a.0) <= idx && kept.is_none_or(|c| c.0 < a.0) {
                f.cursor = Some(a);
            }
        }
        let r = walk(self, f);
        f.ahead = f.cursor;
        f.cursor = kept;
        r
    }

    /// Writes at the position (at the end in append mode), growing the
    /// file. When the volume fills up part way, the bytes written so far
    /// count.
    pub fn write(&mut self, h: Handle, buf: &[u8]) -> Result<usize, FsError> {
        let (i, mut f) = self.get(h)?;
        if !f.mode.writes() {
            return Err(FsError::ReadOnly);
        }
        if f.mode.append {
            f.pos = u64::from(f.size);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if f.pos >= MAX_SIZE {
            return Err(FsError::FileTooLarge);
        }
        let n = (buf.len() as u64).min(MAX_SIZE - f.pos) as usize;
        let (size, start) = (u64::from(f.size), f.pos);
        let r = match self.fill(&mut f, size, start, None) {
            Err(e) => Err(e),
            Ok(()) => {
                let r = self.fill(&mut f, start, start + n as u64, Some(&buf[..n]));
                let done = (f.pos - start) as usize;
                match r {
                    Err(e) if done == 0 => Err(e),
                    _ => Ok(done),
                }
            }
        };
        let u = self.update_entry(&f);
        self.files[i] = Some(f);
        let done = r?;
        u?;
        Ok(done)
    }

    /// Writes bytes `from..to` of the file from `src` (zeros if `None`),
    /// advancing `f.pos` and the size as it goes. The clusters it needs
    /// are allocated first, all at once.
    fn fill(
        &mut self,
        f: &mut OpenFile,
        from: u64,
        to: u64,
        src: Option<&[u8]>,
    ) -> Result<(), FsError> {
        if to > from {
            let cb = u64::from(self.fs.geo.cluster_bytes());
            let last = u32::try_from((to - 1) / cb).map_err(|_| FsError::FileTooLarge)?;
            // A full volume is reported where the bytes run out, below.
            match self.reserve(f, last) {
                Err(FsError::NoSpace) => {}
                r => r?,
            }
        }
        let mut pos = from;
        while pos < to {
            let Some((s, off, left)) = self.data_at(f, pos, true)? else {
                return Err(Corruption::ChainTooShort { start: f.first }.into());
            };
            let want = ((to - pos) / SECTOR as u64) as usize;
            // Large writes go straight to the device, whole sectors
            // through contiguous clusters in one request; small ones and
            // zeros (a gap, an extension) through the write-behind window.
            if let Some(src) = src.filter(|_| off == 0 && want >= AHEAD_BLOCKS) {
                let whole = self.run(f, pos, s, left.min(want), want, true)?;
                let k = (pos - from) as usize;
                let len = whole * SECTOR;
                let data = &src[k..k + len];
                self.fs.cache.write_blocks(&mut self.fs.dev, s, data)?;
                pos += len as u64;
                f.pos = pos;
                f.size = f.size.max(pos as u32);
                continue;
            }
            let len = (SECTOR - off).min((to - pos) as usize);
            // A sector wholly past the end holds no file data yet.
            let fresh = pos - off as u64 >= u64::from(f.size);
            let bytes = match src {
                Some(src) => {
                    let k = (pos - from) as usize;
                    &src[k..k + len]
                }
                None => &ZEROS[..len],
            };
            let dev = &mut self.fs.dev;
            self.fs.cache.write_data(dev, s, off, bytes, fresh)?;
            pos += len as u64;
            if src.is_some() {
                f.pos = pos;
            }
            f.size = f.size.max(pos as u32);
        }
        Ok(())
    }

    /// How many whole sectors from file byte `pos` (at sector `s`; `have`
    /// of them, to the end of its cluster or fewer) can go in one request,
    /// up to `want`: the run goes on into the next clusters while the
    /// chain is contiguous on the disk (allocating them if `alloc`).
    fn run(
        &mut self,
        f: &mut OpenFile,
        pos: u64,
        s: u64,
        mut have: usize,
        want: usize,
        alloc: bool,
    ) -> Result<usize, FsError> {
        let spc = self.fs.geo.sectors_per_cluster as usize;
        let cb = u64::from(self.fs.geo.cluster_bytes());
        if have == 0 || !(pos + (have * SECTOR) as u64).is_multiple_of(cb) {
            return Ok(have);
        }
        while have < want {
            let next = pos + (have * SECTOR) as u64;
            // A full volume ends the run; the next step reports it.
            let at = match self.data_at(f, next, alloc) {
                Err(FsError::NoSpace) => break,
                r => r?,
            };
            match at {
                Some((s2, 0, _)) if s2 == s + have as u64 => {
                    let k = spc.min(want - have);
                    have += k;
                    if k < spc {
                        break;
                    }
                }
                _ => break,
            }
        }
        Ok(have)
    }

    /// The sector and offset of byte `pos` and the sectors from there to
    /// the end of its cluster, allocating clusters up to it if `alloc`;
    /// `None` past the chain's end otherwise.
    fn data_at(
        &mut self,
        f: &mut OpenFile,
        pos: u64,
        alloc: bool,
    ) -> Result<Option<(u64, usize, usize)>, FsError> {
        let cb = u64::from(self.fs.geo.cluster_bytes());
        let idx = u32::try_from(pos / cb).map_err(|_| FsError::FileTooLarge)?;
        let within = pos % cb;
        let Some(c) = self.cluster_at(f, idx, alloc)? else {
            return Ok(None);
        };
        let k = within / SECTOR as u64;
        let s = self.fs.geo.cluster_sector(c) + k;
        let left = (u64::from(self.fs.geo.sectors_per_cluster) - k) as usize;
        Ok(Some((s, (within % SECTOR as u64) as usize, left)))
    }

    /// Grows the file's chain to cluster `idx` (or as far as free space
    /// allows), in batches of clusters allocated at once. The file's
    /// cursor stays where it was (the chain only grew behind it, so it is
    /// still right): walking to the chain's end must not leave it past the
    /// position the write starts at, or finding that position would walk
    /// the chain from its first cluster on every call — quadratic in the
    /// file's length for writes that span two clusters.
    fn reserve(&mut self, f: &mut OpenFile, idx: u32) -> Result<(), FsError> {
        let kept = f.cursor;
        let r = self.reserve_to(f, idx);
        if kept.is_some() {
            f.cursor = kept;
        }
        r
    }

    /// [`Self::reserve`]'s work; leaves the cursor at the chain's end.
    fn reserve_to(&mut self, f: &mut OpenFile, idx: u32) -> Result<(), FsError> {
        loop {
            if f.first == 0 {
                f.first = self.fs.extend(None, idx.saturating_add(1))?;
                f.cursor = Some((0, f.first));
            }
            if self.cluster_at(f, idx, false)?.is_some() {
                return Ok(());
            }
            // The cursor is at the chain's end now.
            let Some((i, c)) = f.cursor else {
                return Ok(());
            };
            self.fs.extend(Some(c), idx - i)?;
        }
    }

    /// Cluster `idx` of the file's chain, from the file's cursor when it
    /// is not past it.
    fn cluster_at(
        &mut self,
        f: &mut OpenFile,
        idx: u32,
        alloc: bool,
    ) -> Result<Option<u32>, FsError> {
        if f.first == 0 {
            if !alloc {
                return Ok(None);
            }
            f.first = self.fs.alloc(None)?;
            f.cursor = Some((0, f.first));
        }
        let (mut i, mut c) = match f.cursor {
            Some((ci, cc)) if ci <= idx => (ci, cc),
            _ => (0, f.first),
        };
        let mut steps = i;
        while i < idx {
            match self.fs.step(f.first, c, &mut steps)? {
                Some(n) => c = n,
                None if alloc => c = self.fs.alloc(Some(c))?,
                None => {
                    f.cursor = Some((i, c));
                    return Ok(None);
                }
            }
            i += 1;
        }
        f.cursor = Some((i, c));
        Ok(Some(c))
    }

    /// Rewrites the file's entry (cluster, size, time, archive bit) and
    /// tells other handles on the same file.
    fn update_entry(&mut self, f: &OpenFile) -> Result<(), FsError> {
        let mut raw = self.fs.read_slot(f.entry)?;
        dir::set_cluster(&mut raw, f.first);
        raw[28..32].copy_from_slice(&f.size.to_le_bytes());
        raw[11] |= attr::ARCHIVE;
        dir::set_modified(&mut raw, self.now());
        self.fs.write_slot(f.entry, &raw)?;
        for g in self.files.iter_mut().flatten() {
            if g.entry == f.entry {
                if g.first != f.first {
                    g.cursor = None;
                    g.ahead = None;
                    g.span = None;
                }
                g.first = f.first;
                g.size = f.size;
            }
        }
        Ok(())
    }

    /// Sets the file's length: a shorter one frees the clusters past it,
    /// a longer one is filled with zeros. The position stays.
    pub fn truncate(&mut self, h: Handle, len: u64) -> Result<(), FsError> {
        let (i, mut f) = self.get(h)?;
        if !f.mode.writes() {
            return Err(FsError::ReadOnly);
        }
        if len > MAX_SIZE {
            return Err(FsError::FileTooLarge);
        }
        let r = self.cut(&mut f, len);
        self.files[i] = Some(f);
        r
    }

    /// [`Volume::truncate`] on the file state: shrinking writes the
    /// shorter entry and syncs before freeing (the crate's order).
    fn cut(&mut self, f: &mut OpenFile, len: u64) -> Result<(), FsError> {
        let size = u64::from(f.size);
        if len > size {
            let pos = f.pos;
            let r = self.fill(f, size, len, None);
            f.pos = pos;
            let u = self.update_entry(f);
            return r.and(u);
        }
        if len == size {
            return Ok(());
        }
        let old_first = f.first;
        f.size = len as u32;
        if len == 0 {
            f.first = 0;
        }
        f.cursor = None;
        f.ahead = None;
        f.span = None;
        self.update_entry(f)?;
        for g in self.files.iter_mut().flatten() {
            if g.entry == f.entry {
                g.cursor = None;
                g.ahead = None;
                g.span = None;
            }
        }
        self.sync()?;
        if len == 0 {
            if old_first != 0 {
                self.fs.free_chain(old_first)?;
            }
            return Ok(());
        }
        let cb = u64::from(self.fs.geo.cluster_bytes());
        let keep = len.div_ceil(cb) as u32;
        let Some(last) = self.cluster_at(f, keep - 1, false)? else {
            return Err(Corruption::ChainTooShort { start: f.first }.into());
        };
        self.fs.cut_after(f.first, last)
    }
}

/// Notes that the file's bytes from `pos` (a sector's start) on lie in
/// the `blocks` consecutive sectors from `sector` (a walk along the chain
/// found them): the span grows when they agree with it and reach past
/// its end, else they replace it.
fn note_span(f: &mut OpenFile, pos: u64, sector: u64, blocks: usize) {
    let blocks = blocks as u64;
    if blocks == 0 {
        return;
    }
    match &mut f.span {
        Some(sp)
            if pos >= sp.pos
                && pos <= sp.pos + sp.blocks * SECTOR as u64
                && sp.sector + (pos - sp.pos) / SECTOR as u64 == sector =>
        {
            sp.blocks = sp.blocks.max((pos - sp.pos) / SECTOR as u64 + blocks);
        }
        span => {
            *span = Some(Span {
                pos,
                sector,
                blocks,
            })
        }
    }
}

/// Where a read's bytes go.
trait Out {
    /// Puts `bytes` at offset `at` of the read.
    fn put(&mut self, at: usize, bytes: &[u8]);
    /// A place for the `len` bytes at offset `at` of the read, for the
    /// device to fill; [`Out::filled`] when it did.
    fn direct(&mut self, at: usize, len: usize) -> &mut [u8];
    /// The place [`Out::direct`] gave is filled.
    fn filled(&mut self, at: usize, len: usize);
}

/// The caller's buffer.
impl Out for [u8] {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        self[at..at + bytes.len()].copy_from_slice(bytes);
    }
    fn direct(&mut self, at: usize, len: usize) -> &mut [u8] {
        &mut self[at..at + len]
    }
    fn filled(&mut self, _: usize, _: usize) {}
}

/// A function that takes the pieces, and a buffer for those read
/// straight from the device.
struct Sink<'s, F: FnMut(usize, &[u8])> {
    scratch: &'s mut [u8],
    put: F,
}

impl<F: FnMut(usize, &[u8])> Out for Sink<'_, F> {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        (self.put)(at, bytes);
    }
    fn direct(&mut self, _: usize, len: usize) -> &mut [u8] {
        &mut self.scratch[..len]
    }
    fn filled(&mut self, at: usize, len: usize) {
        (self.put)(at, &self.scratch[..len]);
    }
}
