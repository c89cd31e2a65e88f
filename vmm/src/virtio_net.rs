//! virtio-net (virtio 1.0 spec, section 5.1) on the legacy transport:
//! queue 0 receives, queue 1 transmits, each frame behind the legacy
//! 10-byte `virtio_net_hdr` (no offloads offered: its fields are zero
//! both ways). The only feature is MAC: the config holds the address the
//! VMM's Nic session gave (the switch's per-client MAC), so the guest's
//! frames carry it and the switch forwards them.
//!
//! The VMM hands received frames to [`Net::receive`] (which fills the
//! guest's next receive buffer, or says the ring is full: the caller
//! keeps the frame for the next notify of queue 0) and transmits what
//! [`Net::transmit`] gathers. A malformed chain, a frame too short or too
//! long, a buffer outside guest RAM: that frame is dropped and counted,
//! nothing else changes.

use alloc::vec::Vec;

use crate::virtio::{reg, Desc, Event, GuestMemory, Transport};

pub const DEVICE: u16 = 0x1000;
pub const SUBSYSTEM: u16 = 1;
/// The I/O BAR: 20 bytes of transport, 6 of MAC.
pub const BAR_SIZE: u32 = 32;
pub const QUEUE_SIZE: u16 = 256;
pub const RX: u16 = 0;
pub const TX: u16 = 1;
/// The legacy header without mergeable buffers.
pub const HEADER: usize = 10;
/// The longest frame: 1500 bytes of IP and the Ethernet header (no VLAN
/// tag, no FCS).
pub const MAX_FRAME: usize = 1514;
const F_MAC: u32 = 1 << 5;

/// Counters for the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub sent: u64,
    pub received: u64,
    pub dropped_tx: u64,
    pub dropped_rx: u64,
}

/// What a receive did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// The frame is in the guest's buffer; `true`: the interrupt rose.
    Delivered(bool),
    /// No receive buffer posted: keep the frame and try after the next
    /// notify of the receive queue.
    Full,
    /// The frame could not be delivered (too long, a bad buffer): dropped.
    Dropped,
}

/// The device.
pub struct Net {
    pub transport: Transport,
    mac: [u8; 6],
    buf: Vec<u8>,
    pub stats: Stats,
}

impl Net {
    pub fn new(mac: [u8; 6]) -> Net {
        Net {
            transport: Transport::new(F_MAC, 2, QUEUE_SIZE),
            mac,
            buf: Vec::new(),
            stats: Stats::default(),
        }
    }

    pub fn read(&mut self, offset: u16, width: u8) -> u32 {
        if offset < reg::CONFIG {
            return self.transport.read(offset, width);
        }
        let at = usize::from(offset - reg::CONFIG);
        (0..usize::from(width)).fold(0u32, |v, i| {
            v | u32::from(self.mac.get(at + i).copied().unwrap_or(0)) << (8 * i)
        })
    }

    /// A register write: which queue the driver notified, if any.
    pub fn write(&mut self, offset: u16, value: u32) -> Option<u16> {
        if offset >= reg::CONFIG {
            return None; // the MAC is the VMM's to choose
        }
        match self.transport.write(offset, value) {
            Event::Notify(q) => Some(q),
            _ => None,
        }
    }

    /// Takes every frame the guest queued for transmission, handing each
    /// to `send`; raises the interrupt (returns `true`) unless suppressed.
    pub fn transmit(&mut self, mem: &mut dyn GuestMemory, send: &mut dyn FnMut(&[u8])) -> bool {
        let mut done = 0;
        while let Some(popped) = self.transport.queues[usize::from(TX)].pop(mem) {
            let head = match popped {
                Ok((head, chain)) => {
                    if self.gather(mem, &chain) {
                        send(&self.buf[HEADER..]);
                        self.stats.sent += 1;
                    } else {
                        self.stats.dropped_tx += 1;
                    }
                    head
                }
                Err(head) => {
                    self.stats.dropped_tx += 1;
                    head
                }
            };
            self.transport.queues[usize::from(TX)].push(mem, head, 0);
            done += 1;
        }
        self.transport.used_interrupt(mem, TX, done)
    }

    /// The chain's readable bytes into `buf`: the header and a frame of
    /// 14..=MAX_FRAME bytes, else `false`.
    fn gather(&mut self, mem: &dyn GuestMemory, chain: &[Desc]) -> bool {
        let total: u64 = chain
            .iter()
            .filter(|d| !d.writable)
            .map(|d| u64::from(d.len))
            .sum();
        if total < (HEADER + 14) as u64 || total > (HEADER + MAX_FRAME) as u64 {
            return false;
        }
        self.buf.clear();
        self.buf.resize(total as usize, 0);
        let mut at = 0;
        for d in chain.iter().filter(|d| !d.writable) {
            let n = d.len as usize;
            if !mem.read(d.addr, &mut self.buf[at..at + n]) {
                return false;
            }
            at += n;
        }
        true
    }

    /// Delivers `frame` into the guest's next receive buffer.
    pub fn receive(&mut self, mem: &mut dyn GuestMemory, frame: &[u8]) -> Received {
        if frame.len() < 14 || frame.len() > MAX_FRAME {
            self.stats.dropped_rx += 1;
            return Received::Dropped;
        }
        let q = usize::from(RX);
        let (head, chain) = match self.transport.queues[q].pop(mem) {
            None => return Received::Full,
            Some(Ok(c)) => c,
            Some(Err(head)) => {
                self.transport.queues[q].push(mem, head, 0);
                self.stats.dropped_rx += 1;
                return Received::Dropped;
            }
        };
        // Header (zero: no offloads) and frame, scattered over the
        // chain's writable descriptors.
        self.buf.clear();
        self.buf.resize(HEADER, 0);
        self.buf.extend_from_slice(frame);
        let room: u64 = chain
            .iter()
            .filter(|d| d.writable)
            .map(|d| u64::from(d.len))
            .sum();
        let mut ok = room >= self.buf.len() as u64;
        let mut at = 0;
        for d in chain.iter().filter(|d| d.writable) {
            if !ok || at == self.buf.len() {
                break;
            }
            let n = (d.len as usize).min(self.buf.len() - at);
            ok = mem.write(d.addr, &self.buf[at..at + n]);
            at += n;
        }
        let written = if ok { self.buf.len() as u32 } else { 0 };
        self.transport.queues[q].push(mem, head, written);
        if ok {
            self.stats.received += 1;
            Received::Delivered(self.transport.used_interrupt(mem, RX, 1))
        } else {
            self.stats.dropped_rx += 1;
            // The buffer went back empty; the guest reposts it.
            self.transport.used_interrupt(mem, RX, 1);
            Received::Dropped
        }
    }

    pub fn irq(&self) -> bool {
        self.transport.irq()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::virtio::testing::{Driver, Mem};
    use alloc::vec;

    fn setup() -> (Net, Mem, Driver, Driver) {
        let mut net = Net::new([2, 0, 0, 0, 0, 7]);
        let mem = Mem(vec![0; 1 << 20]);
        net.transport.write(reg::QUEUE_SELECT, u32::from(RX));
        net.transport.write(reg::QUEUE_PFN, 0x10);
        net.transport.write(reg::QUEUE_SELECT, u32::from(TX));
        net.transport.write(reg::QUEUE_PFN, 0x20);
        let rx = Driver {
            base: 0x10000,
            size: QUEUE_SIZE,
            next_desc: 0,
            avail_idx: 0,
        };
        let tx = Driver {
            base: 0x20000,
            size: QUEUE_SIZE,
            next_desc: 0,
            avail_idx: 0,
        };
        (net, mem, rx, tx)
    }

    #[test]
    fn mac_in_the_config() {
        let (mut net, ..) = setup();
        assert_eq!(net.read(reg::CONFIG, 4), 0x0000_0002);
        assert_eq!(net.read(reg::CONFIG + 4, 2), 0x0700);
        assert_eq!(net.read(reg::DEVICE_FEATURES, 4), F_MAC);
        assert_eq!(net.write(reg::QUEUE_NOTIFY, 1), Some(1));
        assert_eq!(net.write(reg::CONFIG, 0xffff), None);
        assert_eq!(
            net.read(reg::CONFIG, 1),
            2,
            "the MAC is not the guest's to change"
        );
    }

    #[test]
    fn frames_both_ways() {
        let (mut net, mut mem, mut rx, mut tx) = setup();
        // Transmit: header and frame in two descriptors.
        mem.write(0x40000, &[0; HEADER]);
        mem.write(0x41000, &[0xaa; 60]);
        tx.add(
            &mut mem,
            &[(0x40000, HEADER as u32, false), (0x41000, 60, false)],
        );
        let mut sent = Vec::new();
        assert!(net.transmit(&mut mem, &mut |f| sent.push(f.to_vec())));
        assert_eq!(sent, vec![vec![0xaa; 60]]);
        // Receive: no buffer yet, then one (header and data separate).
        assert_eq!(net.receive(&mut mem, &[0x55; 100]), Received::Full);
        rx.add(
            &mut mem,
            &[(0x50000, HEADER as u32, true), (0x51000, 1514, true)],
        );
        assert_eq!(
            net.receive(&mut mem, &[0x55; 100]),
            Received::Delivered(true)
        );
        let mut got = [0u8; 100];
        mem.read(0x51000, &mut got);
        assert_eq!(got, [0x55; 100]);
        assert_eq!(rx.used_entry(&mem, 0), (1, 0, (HEADER + 100) as u32));
        assert_eq!(net.stats.sent, 1);
        assert_eq!(net.stats.received, 1);
    }

    #[test]
    fn bad_frames_are_dropped() {
        let (mut net, mut mem, mut rx, mut tx) = setup();
        // Too short, too long, outside memory.
        tx.add(&mut mem, &[(0x40000, HEADER as u32 + 4, false)]);
        tx.add(
            &mut mem,
            &[(0x40000, (HEADER + MAX_FRAME + 1) as u32, false)],
        );
        tx.add(&mut mem, &[(1 << 40, 100, false)]);
        let mut sent = 0;
        net.transmit(&mut mem, &mut |_| sent += 1);
        assert_eq!(sent, 0);
        assert_eq!(net.stats.dropped_tx, 3);
        assert_eq!(tx.used_entry(&mem, 0).0, 3, "every chain went back");
        assert_eq!(net.receive(&mut mem, &[0; 13]), Received::Dropped);
        assert_eq!(
            net.receive(&mut mem, &[0; MAX_FRAME + 1]),
            Received::Dropped
        );
        // A buffer too small for the frame: dropped, the buffer returned.
        rx.add(&mut mem, &[(0x50000, 20, true)]);
        assert_eq!(net.receive(&mut mem, &[0x55; 100]), Received::Dropped);
        assert_eq!(rx.used_entry(&mem, 0), (1, 0, 0));
    }
}
