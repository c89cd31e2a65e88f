//! The legacy virtio PCI transport (virtio 1.0 spec, section 4.1.4.8,
//! "Legacy Interfaces"): every register in an I/O BAR, so every access is
//! a port-I/O exit whose operands the CPU hands over — no MMIO, no
//! instruction decoding. Linux's `virtio_pci` drives it for a
//! transitional device ID (0x1000..0x103f) without modern capabilities.
//! Split virtqueues in the legacy layout (descriptors, available ring,
//! used ring at the next 4 KiB boundary) at the page the driver names.
//!
//! The guest's rings are untrusted: every index is reduced modulo the
//! queue size, a chain longer than the queue or leaving guest RAM ends
//! the request with an error, and nothing the guest writes can make the
//! VMM loop or panic.

use alloc::vec::Vec;

/// Red Hat's PCI vendor ID, every virtio device's (and its subsystem
/// vendor's).
pub const VENDOR: u16 = 0x1af4;

/// Guest memory as a device sees it: reads and writes that may fail (an
/// address outside RAM).
pub trait GuestMemory {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> bool;
    fn write(&mut self, gpa: u64, data: &[u8]) -> bool;
}

/// Legacy register offsets in the I/O BAR.
pub mod reg {
    pub const DEVICE_FEATURES: u16 = 0x00;
    pub const GUEST_FEATURES: u16 = 0x04;
    pub const QUEUE_PFN: u16 = 0x08;
    pub const QUEUE_SIZE: u16 = 0x0c;
    pub const QUEUE_SELECT: u16 = 0x0e;
    pub const QUEUE_NOTIFY: u16 = 0x10;
    pub const STATUS: u16 = 0x12;
    pub const ISR: u16 = 0x13;
    /// The device's own configuration (without MSI-X, which this
    /// transport does not offer).
    pub const CONFIG: u16 = 0x14;
}

const DESC_NEXT: u16 = 1;
const DESC_WRITE: u16 = 2;
const DESC_INDIRECT: u16 = 4;
/// The available ring's flag: the driver wants no interrupt.
const AVAIL_NO_INTERRUPT: u16 = 1;

/// One descriptor of a chain: where, how long, device-writable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub writable: bool,
}

/// A split virtqueue in the legacy layout.
#[derive(Clone, Debug, Default)]
pub struct Queue {
    pub size: u16,
    /// Guest-physical address of the descriptor table (0: not set up).
    pub desc: u64,
    last_avail: u16,
}

impl Queue {
    fn avail(&self) -> u64 {
        self.desc + 16 * u64::from(self.size)
    }

    fn used(&self) -> u64 {
        (self.avail() + 6 + 2 * u64::from(self.size)).next_multiple_of(4096)
    }

    fn read_u16(mem: &dyn GuestMemory, gpa: u64) -> Option<u16> {
        let mut b = [0u8; 2];
        mem.read(gpa, &mut b).then(|| u16::from_le_bytes(b))
    }

    /// The next available chain: its head and descriptors, or `Err` with
    /// the head if the chain is malformed (it is still consumed).
    pub fn pop(&mut self, mem: &dyn GuestMemory) -> Option<Result<(u16, Vec<Desc>), u16>> {
        if self.desc == 0 || self.size == 0 {
            return None;
        }
        let avail_idx = Self::read_u16(mem, self.avail() + 2)?;
        if avail_idx == self.last_avail {
            return None;
        }
        let slot = u64::from(self.last_avail % self.size);
        let head = Self::read_u16(mem, self.avail() + 4 + 2 * slot)?;
        self.last_avail = self.last_avail.wrapping_add(1);
        Some(self.chain(mem, head).ok_or(head).map(|c| (head, c)))
    }

    fn chain(&self, mem: &dyn GuestMemory, head: u16) -> Option<Vec<Desc>> {
        let mut out = Vec::new();
        let mut i = head;
        loop {
            if i >= self.size || out.len() >= usize::from(self.size) {
                return None;
            }
            let mut d = [0u8; 16];
            if !mem.read(self.desc + 16 * u64::from(i), &mut d) {
                return None;
            }
            let addr = u64::from_le_bytes(d[0..8].try_into().ok()?);
            let len = u32::from_le_bytes(d[8..12].try_into().ok()?);
            let flags = u16::from_le_bytes([d[12], d[13]]);
            let next = u16::from_le_bytes([d[14], d[15]]);
            if flags & DESC_INDIRECT != 0 {
                return None; // not offered (no VIRTIO_RING_F_INDIRECT_DESC)
            }
            out.push(Desc {
                addr,
                len,
                writable: flags & DESC_WRITE != 0,
            });
            if flags & DESC_NEXT == 0 {
                return Some(out);
            }
            i = next;
        }
    }

    /// Returns chain `head` with `written` bytes to the used ring.
    pub fn push(&mut self, mem: &mut dyn GuestMemory, head: u16, written: u32) -> bool {
        let used = self.used();
        let Some(idx) = Self::read_u16(mem, used + 2) else {
            return false;
        };
        let slot = u64::from(idx % self.size);
        let mut e = [0u8; 8];
        e[0..4].copy_from_slice(&u32::from(head).to_le_bytes());
        e[4..8].copy_from_slice(&written.to_le_bytes());
        mem.write(used + 4 + 8 * slot, &e)
            && mem.write(used + 2, &idx.wrapping_add(1).to_le_bytes())
    }

    /// Whether the driver asked for no interrupt.
    pub fn interrupt_suppressed(&self, mem: &dyn GuestMemory) -> bool {
        Self::read_u16(mem, self.avail()).is_some_and(|f| f & AVAIL_NO_INTERRUPT != 0)
    }
}

/// The transport's registers and queues.
#[derive(Clone, Debug)]
pub struct Transport {
    pub device_features: u32,
    pub guest_features: u32,
    pub queues: Vec<Queue>,
    select: u16,
    pub status: u8,
    pub isr: u8,
}

/// What a register write asks of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    None,
    /// The driver notified queue `n`.
    Notify(u16),
    /// The driver reset the device.
    Reset,
}

impl Transport {
    /// A transport with `queues` queues of `size` entries offering
    /// `features`.
    pub fn new(features: u32, queues: usize, size: u16) -> Transport {
        Transport {
            device_features: features,
            guest_features: 0,
            queues: alloc::vec![Queue { size, desc: 0, last_avail: 0 }; queues],
            select: 0,
            status: 0,
            isr: 0,
        }
    }

    /// The interrupt line: high while the ISR has a bit.
    pub fn irq(&self) -> bool {
        self.isr != 0
    }

    /// `done` chains of `queue` went to the used ring: raises the
    /// interrupt (returns `true`) unless the driver suppressed it.
    pub fn used_interrupt(&mut self, mem: &dyn GuestMemory, queue: u16, done: usize) -> bool {
        let suppressed = self
            .queues
            .get(usize::from(queue))
            .is_none_or(|q| q.interrupt_suppressed(mem));
        if done > 0 && !suppressed {
            self.isr |= 1;
            return true;
        }
        false
    }

    /// A read of a transport register (`offset` < [`reg::CONFIG`]).
    pub fn read(&mut self, offset: u16, width: u8) -> u32 {
        let q = self.queues.get(usize::from(self.select));
        let v: u32 = match offset {
            reg::DEVICE_FEATURES => self.device_features,
            reg::GUEST_FEATURES => self.guest_features,
            reg::QUEUE_PFN => q.map_or(0, |q| (q.desc >> 12) as u32),
            reg::QUEUE_SIZE => q.map_or(0, |q| u32::from(q.size)),
            reg::QUEUE_SELECT => u32::from(self.select),
            reg::STATUS => u32::from(self.status),
            reg::ISR => u32::from(core::mem::take(&mut self.isr)),
            _ => 0,
        };
        if width >= 4 {
            v
        } else {
            v & ((1 << (8 * u32::from(width))) - 1)
        }
    }

    /// A write of a transport register.
    pub fn write(&mut self, offset: u16, value: u32) -> Event {
        match offset {
            reg::GUEST_FEATURES => self.guest_features = value & self.device_features,
            reg::QUEUE_PFN => {
                if let Some(q) = self.queues.get_mut(usize::from(self.select)) {
                    q.desc = u64::from(value) << 12;
                    q.last_avail = 0;
                }
            }
            reg::QUEUE_SELECT => self.select = value as u16,
            reg::QUEUE_NOTIFY => {
                let n = value as u16;
                if usize::from(n) < self.queues.len() {
                    return Event::Notify(n);
                }
            }
            reg::STATUS => {
                self.status = value as u8;
                if self.status == 0 {
                    self.guest_features = 0;
                    self.isr = 0;
                    self.select = 0;
                    for q in &mut self.queues {
                        q.desc = 0;
                        q.last_avail = 0;
                    }
                    return Event::Reset;
                }
            }
            _ => {}
        }
        Event::None
    }
}

/// Guest memory in a `Vec`, for tests (here and in the devices').
#[cfg(test)]
pub mod testing {
    use super::*;

    pub struct Mem(pub Vec<u8>);

    impl GuestMemory for Mem {
        fn read(&self, gpa: u64, buf: &mut [u8]) -> bool {
            let Some(end) = (gpa as usize).checked_add(buf.len()) else {
                return false;
            };
            match self.0.get(gpa as usize..end) {
                Some(s) => {
                    buf.copy_from_slice(s);
                    true
                }
                None => false,
            }
        }

        fn write(&mut self, gpa: u64, data: &[u8]) -> bool {
            let Some(end) = (gpa as usize).checked_add(data.len()) else {
                return false;
            };
            match self.0.get_mut(gpa as usize..end) {
                Some(s) => {
                    s.copy_from_slice(data);
                    true
                }
                None => false,
            }
        }
    }

    /// A driver's side of one queue at `base` (4 KiB aligned) of `size`
    /// entries: it adds chains and reads the used ring.
    pub struct Driver {
        pub base: u64,
        pub size: u16,
        pub next_desc: u16,
        pub avail_idx: u16,
    }

    impl Driver {
        pub fn used(&self) -> u64 {
            (self.base + 16 * u64::from(self.size) + 6 + 2 * u64::from(self.size))
                .next_multiple_of(4096)
        }

        /// Adds a chain of (addr, len, writable); returns its head.
        pub fn add(&mut self, mem: &mut Mem, chain: &[(u64, u32, bool)]) -> u16 {
            let head = self.next_desc;
            for (k, &(addr, len, w)) in chain.iter().enumerate() {
                let i = self.next_desc;
                self.next_desc = (self.next_desc + 1) % self.size;
                let last = k + 1 == chain.len();
                let mut d = [0u8; 16];
                d[0..8].copy_from_slice(&addr.to_le_bytes());
                d[8..12].copy_from_slice(&len.to_le_bytes());
                let flags = if last { 0 } else { DESC_NEXT } | if w { DESC_WRITE } else { 0 };
                d[12..14].copy_from_slice(&flags.to_le_bytes());
                d[14..16].copy_from_slice(&self.next_desc.to_le_bytes());
                assert!(mem.write(self.base + 16 * u64::from(i), &d));
            }
            let avail = self.base + 16 * u64::from(self.size);
            let slot = u64::from(self.avail_idx % self.size);
            assert!(mem.write(avail + 4 + 2 * slot, &head.to_le_bytes()));
            self.avail_idx = self.avail_idx.wrapping_add(1);
            assert!(mem.write(avail + 2, &self.avail_idx.to_le_bytes()));
            head
        }

        /// The used ring's index and entry `i`.
        pub fn used_entry(&self, mem: &Mem, i: u16) -> (u16, u32, u32) {
            let used = self.used();
            let mut b = [0u8; 2];
            mem.read(used + 2, &mut b);
            let mut e = [0u8; 8];
            mem.read(used + 4 + 8 * u64::from(i % self.size), &mut e);
            (
                u16::from_le_bytes(b),
                u32::from_le_bytes(e[0..4].try_into().unwrap()),
                u32::from_le_bytes(e[4..8].try_into().unwrap()),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{Driver, Mem};
    use super::*;

    #[test]
    fn chains_go_round_the_rings() {
        let mut mem = Mem(alloc::vec![0; 64 * 1024]);
        let mut t = Transport::new(1 << 9, 1, 8);
        t.write(reg::QUEUE_SELECT, 0);
        assert_eq!(t.read(reg::QUEUE_SIZE, 2), 8);
        t.write(reg::QUEUE_PFN, 1); // rings at 0x1000
        let mut d = Driver {
            base: 0x1000,
            size: 8,
            next_desc: 0,
            avail_idx: 0,
        };
        assert_eq!(t.write(reg::QUEUE_NOTIFY, 0), Event::Notify(0));
        assert_eq!(t.write(reg::QUEUE_NOTIFY, 5), Event::None, "no such queue");
        for round in 0..20u32 {
            let head = d.add(&mut mem, &[(0x8000, 16, false), (0x9000, 512, true)]);
            let q = &mut t.queues[0];
            let (h, chain) = q.pop(&mem).unwrap().unwrap();
            assert_eq!(h, head);
            assert_eq!(
                chain,
                alloc::vec![
                    Desc {
                        addr: 0x8000,
                        len: 16,
                        writable: false
                    },
                    Desc {
                        addr: 0x9000,
                        len: 512,
                        writable: true
                    }
                ]
            );
            assert!(q.pop(&mem).is_none());
            assert!(q.push(&mut mem, h, round));
            assert_eq!(
                d.used_entry(&mem, round as u16),
                (round as u16 + 1, u32::from(head), round)
            );
        }
        // Reset clears the queues.
        assert_eq!(t.write(reg::STATUS, 0), Event::Reset);
        assert_eq!(t.read(reg::QUEUE_PFN, 4), 0);
    }

    #[test]
    fn hostile_rings_end_in_errors() {
        let mut mem = Mem(alloc::vec![0; 64 * 1024]);
        let mut q = Queue {
            size: 4,
            desc: 0x1000,
            last_avail: 0,
        };
        // A loop: descriptor 0 → 1 → 0.
        let mut put = |i: u64, next: u16, flags: u16| {
            let mut d = [0u8; 16];
            d[8..12].copy_from_slice(&16u32.to_le_bytes());
            d[12..14].copy_from_slice(&flags.to_le_bytes());
            d[14..16].copy_from_slice(&next.to_le_bytes());
            mem.write(0x1000 + 16 * i, &d);
        };
        put(0, 1, DESC_NEXT);
        put(1, 0, DESC_NEXT);
        put(2, 9, DESC_NEXT); // next out of range
        put(3, 0, DESC_INDIRECT);
        let avail = 0x1000 + 16 * 4;
        for (slot, head) in [0u16, 2, 3, 77].iter().enumerate() {
            mem.write(avail + 4 + 2 * slot as u64, &head.to_le_bytes());
        }
        mem.write(avail + 2, &4u16.to_le_bytes());
        for _ in 0..4 {
            assert!(matches!(q.pop(&mem), Some(Err(_))));
        }
        assert!(q.pop(&mem).is_none());
        // Rings outside memory: nothing, no panic.
        let mut far = Queue {
            size: 256,
            desc: 1 << 40,
            last_avail: 0,
        };
        assert!(far.pop(&mem).is_none());
        assert!(!far.push(&mut mem, 0, 0));
    }
}
