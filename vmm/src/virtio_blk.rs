//! virtio-blk (virtio 1.0 spec, section 5.2) on the legacy transport: one
//! request queue; reads, writes, flushes and the device ID, served from a
//! [`Backend`] — in the VMM a Block session (a partition) — one request
//! at a time. Offered features: SIZE_MAX and SEG_MAX (so a request is at
//! most [`SEG_MAX`] × [`SIZE_MAX`] bytes: the VMM's buffer stays small),
//! FLUSH, and RO for a read-only backend.
//!
//! A request the device cannot serve — past the end, not whole sectors,
//! a write to a read-only disk, malformed — gets VIRTIO_BLK_S_IOERR or
//! S_UNSUPP and changes nothing; the guest goes on.

use alloc::vec::Vec;

use crate::virtio::{reg, Desc, Event, GuestMemory, Transport};

/// The sector: virtio-blk counts in 512 bytes whatever the backend's
/// block size.
pub const SECTOR: u64 = 512;
/// PCI IDs: the transitional virtio-blk.
pub const DEVICE: u16 = 0x1001;
pub const SUBSYSTEM: u16 = 2;
/// The I/O BAR's size: 20 bytes of transport, the config.
pub const BAR_SIZE: u32 = 64;
pub const QUEUE_SIZE: u16 = 128;
/// Bytes per segment and segments per request.
pub const SIZE_MAX: u32 = 64 * 1024;
pub const SEG_MAX: u32 = 16;

const F_SIZE_MAX: u32 = 1 << 1;
const F_SEG_MAX: u32 = 1 << 2;
const F_RO: u32 = 1 << 5;
const F_FLUSH: u32 = 1 << 9;

const T_IN: u32 = 0;
const T_OUT: u32 = 1;
const T_FLUSH: u32 = 4;
const T_GET_ID: u32 = 8;
const S_OK: u8 = 0;
const S_IOERR: u8 = 1;
const S_UNSUPP: u8 = 2;

/// A backend's request failed (the guest gets VIRTIO_BLK_S_IOERR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoError;

/// Where the sectors are.
pub trait Backend {
    /// Sectors of 512 bytes.
    fn sectors(&self) -> u64;
    fn writable(&self) -> bool;
    /// Reads `buf.len()` bytes (whole sectors) from `sector`.
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), IoError>;
    fn write(&mut self, sector: u64, data: &[u8]) -> Result<(), IoError>;
    fn flush(&mut self) -> Result<(), IoError>;
}

/// Counters for the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// The device.
pub struct Blk {
    pub transport: Transport,
    sectors: u64,
    id: [u8; 20],
    buf: Vec<u8>,
    pub stats: Stats,
}

impl Blk {
    /// A device of `sectors` sectors, read-only unless `writable`, whose
    /// GET_ID answers `id` (at most 20 bytes).
    pub fn new(sectors: u64, writable: bool, id: &str) -> Blk {
        let mut features = F_SIZE_MAX | F_SEG_MAX | F_FLUSH;
        if !writable {
            features |= F_RO;
        }
        let mut id_bytes = [0u8; 20];
        let n = id.len().min(20);
        id_bytes[..n].copy_from_slice(&id.as_bytes()[..n]);
        Blk {
            transport: Transport::new(features, 1, QUEUE_SIZE),
            sectors,
            id: id_bytes,
            buf: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// The device configuration (capacity, size_max, seg_max).
    fn config(&self) -> [u8; 16] {
        let mut c = [0u8; 16];
        c[0..8].copy_from_slice(&self.sectors.to_le_bytes());
        c[8..12].copy_from_slice(&SIZE_MAX.to_le_bytes());
        c[12..16].copy_from_slice(&SEG_MAX.to_le_bytes());
        c
    }

    /// A read of `width` bytes at `offset` in the BAR.
    pub fn read(&mut self, offset: u16, width: u8) -> u32 {
        if offset < reg::CONFIG {
            return self.transport.read(offset, width);
        }
        let c = self.config();
        let at = usize::from(offset - reg::CONFIG);
        (0..usize::from(width)).fold(0u32, |v, i| {
            v | u32::from(c.get(at + i).copied().unwrap_or(0)) << (8 * i)
        })
    }

    /// A write at `offset` in the BAR; a notify serves the queue from
    /// `backend` at once. Returns whether the interrupt line rose.
    pub fn write(
        &mut self,
        offset: u16,
        value: u32,
        mem: &mut dyn GuestMemory,
        backend: &mut dyn Backend,
    ) -> bool {
        if offset >= reg::CONFIG {
            return false; // the config is read-only
        }
        match self.transport.write(offset, value) {
            Event::Notify(0) => self.serve(mem, backend),
            _ => false,
        }
    }

    /// Serves every available request; raises the interrupt unless the
    /// driver suppressed it. Returns whether it did.
    pub fn serve(&mut self, mem: &mut dyn GuestMemory, backend: &mut dyn Backend) -> bool {
        let mut done = 0;
        while let Some(popped) = self.transport.queues[0].pop(mem) {
            let (head, written) = match popped {
                Ok((head, chain)) => (head, self.request(&chain, mem, backend)),
                Err(head) => {
                    self.stats.errors += 1;
                    (head, 0)
                }
            };
            self.transport.queues[0].push(mem, head, written);
            done += 1;
        }
        if done > 0 && !self.transport.queues[0].interrupt_suppressed(mem) {
            self.transport.isr |= 1;
            return true;
        }
        false
    }

    /// One request: the bytes written to the guest (data and status).
    fn request(
        &mut self,
        chain: &[Desc],
        mem: &mut dyn GuestMemory,
        backend: &mut dyn Backend,
    ) -> u32 {
        // The status byte is the last byte of the last descriptor, which
        // must be device-writable.
        let Some(last) = chain.last().filter(|d| d.writable && d.len >= 1) else {
            self.stats.errors += 1;
            return 0;
        };
        let status_at = last.addr + u64::from(last.len) - 1;
        let mut header = [0u8; 16];
        let readable: Vec<Desc> = chain.iter().copied().filter(|d| !d.writable).collect();
        if !gather(mem, &readable, 0, &mut header) {
            self.stats.errors += 1;
            mem.write(status_at, &[S_IOERR]);
            return 1;
        }
        let kind = u32::from_le_bytes(header[0..4].try_into().unwrap_or_default());
        let sector = u64::from_le_bytes(header[8..16].try_into().unwrap_or_default());
        // The data: readable bytes after the header (OUT), writable bytes
        // before the status (IN).
        let mut writable: Vec<Desc> = chain.iter().copied().filter(|d| d.writable).collect();
        if let Some(l) = writable.last_mut() {
            l.len -= 1;
        }
        let out_len: u64 = readable
            .iter()
            .map(|d| u64::from(d.len))
            .sum::<u64>()
            .saturating_sub(16);
        let in_len: u64 = writable.iter().map(|d| u64::from(d.len)).sum();
        let limit = u64::from(SIZE_MAX) * u64::from(SEG_MAX);
        let (status, written) = match kind {
            T_IN => {
                let ok = in_len.is_multiple_of(SECTOR)
                    && in_len <= limit
                    && sector
                        .checked_add(in_len / SECTOR)
                        .is_some_and(|end| end <= self.sectors);
                let ok = ok && {
                    self.buf.resize(in_len as usize, 0);
                    backend.read(sector, &mut self.buf).is_ok()
                        && scatter(mem, &writable, &self.buf)
                };
                if ok {
                    self.stats.reads += 1;
                    self.stats.bytes_read += in_len;
                    (S_OK, in_len as u32)
                } else {
                    (S_IOERR, 0)
                }
            }
            T_OUT => {
                let ok = backend.writable()
                    && out_len.is_multiple_of(SECTOR)
                    && out_len <= limit
                    && sector
                        .checked_add(out_len / SECTOR)
                        .is_some_and(|end| end <= self.sectors);
                let ok = ok && {
                    self.buf.resize(out_len as usize, 0);
                    gather(mem, &readable, 16, &mut self.buf)
                        && backend.write(sector, &self.buf).is_ok()
                };
                if ok {
                    self.stats.writes += 1;
                    self.stats.bytes_written += out_len;
                    (S_OK, 0)
                } else {
                    (S_IOERR, 0)
                }
            }
            T_FLUSH => {
                self.stats.flushes += 1;
                (
                    if backend.flush().is_ok() {
                        S_OK
                    } else {
                        S_IOERR
                    },
                    0,
                )
            }
            T_GET_ID => {
                let id = self.id;
                let n = (in_len as usize).min(20);
                (
                    if scatter(mem, &writable, &id[..n]) {
                        S_OK
                    } else {
                        S_IOERR
                    },
                    n as u32,
                )
            }
            _ => (S_UNSUPP, 0),
        };
        if status != S_OK {
            self.stats.errors += 1;
        }
        mem.write(status_at, &[status]);
        written + 1
    }

    /// The interrupt line.
    pub fn irq(&self) -> bool {
        self.transport.irq()
    }
}

/// Copies `out.len()` bytes of the descriptors' concatenation, from byte
/// `skip`, into `out`.
fn gather(mem: &dyn GuestMemory, descs: &[Desc], mut skip: u64, out: &mut [u8]) -> bool {
    let mut at = 0;
    for d in descs {
        if at == out.len() {
            break;
        }
        let len = u64::from(d.len);
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = ((len - skip) as usize).min(out.len() - at);
        if !mem.read(d.addr + skip, &mut out[at..at + n]) {
            return false;
        }
        at += n;
        skip = 0;
    }
    at == out.len()
}

/// Copies `data` into the descriptors in order.
fn scatter(mem: &mut dyn GuestMemory, descs: &[Desc], data: &[u8]) -> bool {
    let mut at = 0;
    for d in descs {
        if at == data.len() {
            break;
        }
        let n = (d.len as usize).min(data.len() - at);
        if !mem.write(d.addr, &data[at..at + n]) {
            return false;
        }
        at += n;
    }
    at == data.len()
}

/// A disk in memory, for tests.
#[cfg(test)]
pub struct MemDisk {
    pub data: Vec<u8>,
    pub writable: bool,
    pub flushes: u32,
}

#[cfg(test)]
impl Backend for MemDisk {
    fn sectors(&self) -> u64 {
        self.data.len() as u64 / SECTOR
    }
    fn writable(&self) -> bool {
        self.writable
    }
    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let at = (sector * SECTOR) as usize;
        buf.copy_from_slice(self.data.get(at..at + buf.len()).ok_or(IoError)?);
        Ok(())
    }
    fn write(&mut self, sector: u64, data: &[u8]) -> Result<(), IoError> {
        let at = (sector * SECTOR) as usize;
        self.data
            .get_mut(at..at + data.len())
            .ok_or(IoError)?
            .copy_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), IoError> {
        self.flushes += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::testing::{Driver, Mem};
    use alloc::vec;

    fn setup(writable: bool) -> (Blk, MemDisk, Mem, Driver) {
        let mut disk = MemDisk {
            data: vec![0; 64 * 1024],
            writable,
            flushes: 0,
        };
        for (i, b) in disk.data.iter_mut().enumerate() {
            *b = (i / 512) as u8;
        }
        let mut blk = Blk::new(disk.sectors(), writable, "pecan-vm1");
        let mem = Mem(vec![0; 1 << 20]);
        blk.transport.write(reg::QUEUE_PFN, 0x10); // rings at 64 KiB
        let d = Driver {
            base: 0x10000,
            size: QUEUE_SIZE,
            next_desc: 0,
            avail_idx: 0,
        };
        (blk, disk, mem, d)
    }

    fn header(mem: &mut Mem, at: u64, kind: u32, sector: u64) {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&kind.to_le_bytes());
        h[8..16].copy_from_slice(&sector.to_le_bytes());
        mem.write(at, &h);
    }

    fn status(mem: &Mem, at: u64) -> u8 {
        let mut s = [0u8; 1];
        mem.read(at, &mut s);
        s[0]
    }

    #[test]
    fn config_says_capacity_and_limits() {
        let (mut blk, ..) = setup(true);
        assert_eq!(blk.read(reg::CONFIG, 4), 128);
        assert_eq!(blk.read(reg::CONFIG + 4, 4), 0);
        assert_eq!(blk.read(reg::CONFIG + 8, 4), SIZE_MAX);
        assert_eq!(blk.read(reg::CONFIG + 12, 4), SEG_MAX);
        assert_eq!(blk.read(reg::DEVICE_FEATURES, 4) & F_FLUSH, F_FLUSH);
        let (mut ro, ..) = setup(false);
        assert_eq!(ro.read(reg::DEVICE_FEATURES, 4) & F_RO, F_RO);
    }

    #[test]
    fn reads_writes_flushes_and_id() {
        let (mut blk, mut disk, mut mem, mut d) = setup(true);
        // Read sectors 3 and 4 into two buffers.
        header(&mut mem, 0x20000, T_IN, 3);
        d.add(
            &mut mem,
            &[
                (0x20000, 16, false),
                (0x21000, 512, true),
                (0x22000, 512, true),
                (0x23000, 1, true),
            ],
        );
        assert!(blk.write(reg::QUEUE_NOTIFY, 0, &mut mem, &mut disk));
        assert_eq!(status(&mem, 0x23000), S_OK);
        assert_eq!(status(&mem, 0x21000), 3);
        assert_eq!(status(&mem, 0x22000 + 511), 4);
        assert_eq!(d.used_entry(&mem, 0).2, 1025);
        assert!(blk.irq());
        assert_eq!(blk.read(reg::ISR, 1), 1);
        assert!(!blk.irq(), "reading ISR lowers the line");
        // Write sector 100 from a buffer, with the header and data in one
        // descriptor.
        header(&mut mem, 0x30000, T_OUT, 100);
        mem.write(0x30010, &[0xab; 512]);
        d.add(&mut mem, &[(0x30000, 16 + 512, false), (0x31000, 1, true)]);
        blk.write(reg::QUEUE_NOTIFY, 0, &mut mem, &mut disk);
        assert_eq!(status(&mem, 0x31000), S_OK);
        assert_eq!(&disk.data[100 * 512..101 * 512], &[0xab; 512][..]);
        // Flush and GET_ID.
        header(&mut mem, 0x32000, T_FLUSH, 0);
        d.add(&mut mem, &[(0x32000, 16, false), (0x32100, 1, true)]);
        header(&mut mem, 0x33000, T_GET_ID, 0);
        d.add(
            &mut mem,
            &[
                (0x33000, 16, false),
                (0x33100, 20, true),
                (0x33200, 1, true),
            ],
        );
        blk.write(reg::QUEUE_NOTIFY, 0, &mut mem, &mut disk);
        assert_eq!(disk.flushes, 1);
        let mut id = [0u8; 9];
        mem.read(0x33100, &mut id);
        assert_eq!(&id, b"pecan-vm1");
        assert_eq!(blk.stats.reads, 1);
        assert_eq!(blk.stats.writes, 1);
    }

    #[test]
    fn bad_requests_are_errors_that_change_nothing() {
        let (mut blk, mut disk, mut mem, mut d) = setup(true);
        let before = disk.data.clone();
        // Past the end.
        header(&mut mem, 0x20000, T_OUT, 127);
        d.add(
            &mut mem,
            &[
                (0x20000, 16, false),
                (0x21000, 1024, false),
                (0x22000, 1, true),
            ],
        );
        // Not whole sectors.
        header(&mut mem, 0x23000, T_IN, 0);
        d.add(
            &mut mem,
            &[
                (0x23000, 16, false),
                (0x24000, 100, true),
                (0x25000, 1, true),
            ],
        );
        // Unknown type.
        header(&mut mem, 0x26000, 77, 0);
        d.add(&mut mem, &[(0x26000, 16, false), (0x27000, 1, true)]);
        // A sector number that overflows.
        header(&mut mem, 0x28000, T_IN, u64::MAX);
        d.add(
            &mut mem,
            &[
                (0x28000, 16, false),
                (0x29000, 512, true),
                (0x2a000, 1, true),
            ],
        );
        // Data outside guest memory.
        header(&mut mem, 0x2b000, T_OUT, 0);
        d.add(
            &mut mem,
            &[
                (0x2b000, 16, false),
                (1 << 40, 512, false),
                (0x2c000, 1, true),
            ],
        );
        // No status byte.
        header(&mut mem, 0x2d000, T_IN, 0);
        d.add(&mut mem, &[(0x2d000, 16, false)]);
        blk.write(reg::QUEUE_NOTIFY, 0, &mut mem, &mut disk);
        assert_eq!(status(&mem, 0x22000), S_IOERR);
        assert_eq!(status(&mem, 0x25000), S_IOERR);
        assert_eq!(status(&mem, 0x27000), S_UNSUPP);
        assert_eq!(status(&mem, 0x2a000), S_IOERR);
        assert_eq!(status(&mem, 0x2c000), S_IOERR);
        assert_eq!(blk.stats.errors, 6);
        assert_eq!(disk.data, before);
        // All six were returned.
        assert_eq!(d.used_entry(&mem, 0).0, 6);
        // A read-only disk refuses writes.
        let (mut ro, mut rodisk, mut mem, mut d) = setup(false);
        header(&mut mem, 0x20000, T_OUT, 0);
        d.add(
            &mut mem,
            &[
                (0x20000, 16, false),
                (0x21000, 512, false),
                (0x22000, 1, true),
            ],
        );
        ro.write(reg::QUEUE_NOTIFY, 0, &mut mem, &mut rodisk);
        assert_eq!(status(&mem, 0x22000), S_IOERR);
    }
}
