//! virtio-console (virtio 1.0 spec, section 5.3) on the legacy transport,
//! the single-port form: no features offered (no `F_SIZE`, no
//! `F_MULTIPORT`, no emergency write), so there is no control queue and
//! the config space is empty. Queue 0 carries input to the guest (the
//! driver posts empty buffers), queue 1 the guest's output. Linux's
//! `virtio_console` makes it `/dev/hvc0`.
//!
//! The VMM queues typed input with [`Console::type_in`] (bounded: a
//! flood is cut, counted) and moves it into the guest's buffers with
//! [`Console::deliver`] — now, or when the guest posts buffers (a notify
//! of queue 0); [`Console::transmit`] collects the guest's output
//! (bounded per call). A malformed chain or a buffer outside guest RAM
//! is returned empty and counted; nothing the guest writes makes the
//! VMM loop, grow without bound or panic.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::virtio::{reg, Event, GuestMemory, Transport};

/// The transitional (legacy) device ID of a console.
pub const DEVICE: u16 = 0x1003;
pub const SUBSYSTEM: u16 = 3;
/// The I/O BAR: the transport's 20 bytes (no config).
pub const BAR_SIZE: u32 = 32;
pub const QUEUE_SIZE: u16 = 64;
pub const RX: u16 = 0;
pub const TX: u16 = 1;
/// Typed input kept at most until the guest takes it.
pub const MAX_INPUT: usize = 4096;
/// Output gathered at most per [`Console::transmit`] (one guest buffer
/// is a page; 16 of them).
pub const MAX_OUTPUT: usize = 64 * 1024;

/// Counters for the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Input bytes cut because [`MAX_INPUT`] were waiting.
    pub input_dropped: u64,
    /// Chains returned unused: malformed, or outside guest RAM.
    pub bad_chains: u64,
}

/// The device.
pub struct Console {
    pub transport: Transport,
    input: VecDeque<u8>,
    pub stats: Stats,
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

impl Console {
    pub fn new() -> Console {
        Console {
            transport: Transport::new(0, 2, QUEUE_SIZE),
            input: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// A register read; the config space (none offered) reads 0.
    pub fn read(&mut self, offset: u16, width: u8) -> u32 {
        if offset < reg::CONFIG {
            self.transport.read(offset, width)
        } else {
            0
        }
    }

    /// A register write: which queue the driver notified, if any. A
    /// reset drops the input that waits (it was typed for the shell of
    /// the driver that is gone).
    pub fn write(&mut self, offset: u16, value: u32) -> Option<u16> {
        if offset >= reg::CONFIG {
            return None;
        }
        match self.transport.write(offset, value) {
            Event::Notify(q) => Some(q),
            Event::Reset => {
                self.input.clear();
                None
            }
            Event::None => None,
        }
    }

    /// Queues typed bytes for the guest; beyond [`MAX_INPUT`] waiting
    /// they are dropped (counted).
    pub fn type_in(&mut self, bytes: &[u8]) {
        let room = MAX_INPUT.saturating_sub(self.input.len());
        let n = bytes.len().min(room);
        self.input.extend(&bytes[..n]);
        self.stats.input_dropped += (bytes.len() - n) as u64;
    }

    /// Whether typed bytes wait for a guest buffer.
    pub fn input_waiting(&self) -> bool {
        !self.input.is_empty()
    }

    /// Moves waiting input into the guest's posted buffers; `true` if the
    /// interrupt rose.
    pub fn deliver(&mut self, mem: &mut dyn GuestMemory) -> bool {
        let q = usize::from(RX);
        let mut done = 0;
        while !self.input.is_empty() {
            let (head, chain) = match self.transport.queues[q].pop(mem) {
                None => break,
                Some(Ok(c)) => c,
                Some(Err(head)) => {
                    self.stats.bad_chains += 1;
                    self.transport.queues[q].push(mem, head, 0);
                    done += 1;
                    continue;
                }
            };
            let mut written = 0u32;
            for d in chain.iter().filter(|d| d.writable) {
                if self.input.is_empty() {
                    break;
                }
                let n = (d.len as usize).min(self.input.len());
                let bytes: Vec<u8> = self.input.iter().take(n).copied().collect();
                if !mem.write(d.addr, &bytes) {
                    self.stats.bad_chains += 1;
                    break;
                }
                self.input.drain(..n);
                written += n as u32;
            }
            self.stats.bytes_in += u64::from(written);
            self.transport.queues[q].push(mem, head, written);
            done += 1;
        }
        self.transport.used_interrupt(mem, RX, done)
    }

    /// Appends what the guest queued for output to `out`, at most
    /// [`MAX_OUTPUT`] bytes this call (the rest waits in the ring for the
    /// next); `true` if the interrupt rose.
    pub fn transmit(&mut self, mem: &mut dyn GuestMemory, out: &mut Vec<u8>) -> bool {
        let q = usize::from(TX);
        let start = out.len();
        let mut done = 0;
        while out.len() - start < MAX_OUTPUT {
            let Some(popped) = self.transport.queues[q].pop(mem) else {
                break;
            };
            let head = match popped {
                Ok((head, chain)) => {
                    let mark = out.len();
                    for d in chain.iter().filter(|d| !d.writable) {
                        // What does not fit this call's share is cut: the
                        // guest's console writes are a page at most.
                        let room = MAX_OUTPUT.saturating_sub(out.len() - start);
                        let n = (d.len as usize).min(room);
                        let at = out.len();
                        out.resize(at + n, 0);
                        if !mem.read(d.addr, &mut out[at..]) {
                            out.truncate(mark);
                            self.stats.bad_chains += 1;
                            break;
                        }
                    }
                    self.stats.bytes_out += (out.len() - mark) as u64;
                    head
                }
                Err(head) => {
                    self.stats.bad_chains += 1;
                    head
                }
            };
            self.transport.queues[q].push(mem, head, 0);
            done += 1;
        }
        self.transport.used_interrupt(mem, TX, done)
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

    fn setup() -> (Console, Mem, Driver, Driver) {
        let mut c = Console::new();
        let mem = Mem(vec![0; 1 << 20]);
        c.transport.write(reg::QUEUE_SELECT, u32::from(RX));
        c.transport.write(reg::QUEUE_PFN, 0x10);
        c.transport.write(reg::QUEUE_SELECT, u32::from(TX));
        c.transport.write(reg::QUEUE_PFN, 0x20);
        let d = |base| Driver {
            base,
            size: QUEUE_SIZE,
            next_desc: 0,
            avail_idx: 0,
        };
        (c, mem, d(0x10000), d(0x20000))
    }

    #[test]
    fn no_features_no_config() {
        let (mut c, ..) = setup();
        assert_eq!(c.read(reg::DEVICE_FEATURES, 4), 0);
        assert_eq!(c.read(reg::CONFIG, 4), 0);
        assert_eq!(c.write(reg::CONFIG, 0xffff_ffff), None);
        assert_eq!(c.write(reg::QUEUE_NOTIFY, 1), Some(TX));
        assert_eq!(c.write(reg::QUEUE_NOTIFY, 2), None, "no third queue");
    }

    #[test]
    fn output_gathered_from_chains() {
        let (mut c, mut mem, _, mut tx) = setup();
        mem.write(0x40000, b"hello ");
        mem.write(0x41000, b"world\n");
        tx.add(&mut mem, &[(0x40000, 6, false), (0x41000, 6, false)]);
        tx.add(&mut mem, &[(0x41000, 6, false)]);
        let mut out = Vec::new();
        assert!(c.transmit(&mut mem, &mut out));
        assert_eq!(out, b"hello world\nworld\n");
        assert_eq!(tx.used_entry(&mem, 1).0, 2, "both chains returned");
        assert_eq!(c.stats.bytes_out, 18);
    }

    #[test]
    fn input_waits_for_buffers_and_splits_over_them() {
        let (mut c, mut mem, mut rx, _) = setup();
        c.type_in(b"ls /mnt\n");
        assert!(!c.deliver(&mut mem), "no buffer posted: nothing happens");
        assert!(c.input_waiting());
        rx.add(&mut mem, &[(0x50000, 4, true)]);
        rx.add(&mut mem, &[(0x51000, 4096, true)]);
        assert!(c.deliver(&mut mem));
        assert!(!c.input_waiting());
        let mut a = [0u8; 4];
        mem.read(0x50000, &mut a);
        let mut b = [0u8; 4];
        mem.read(0x51000, &mut b);
        assert_eq!((&a, &b), (b"ls /", b"mnt\n"));
        assert_eq!(rx.used_entry(&mem, 0), (2, 0, 4));
        assert_eq!(rx.used_entry(&mem, 1), (2, 1, 4));
        assert_eq!(c.stats.bytes_in, 8);
    }

    #[test]
    fn output_is_bounded_per_call() {
        let (mut c, mut mem, _, mut tx) = setup();
        for _ in 0..4 {
            tx.add(&mut mem, &[(0, 0x8_0000, false), (0, 0x8_0000, false)]);
        }
        let mut out = Vec::new();
        c.transmit(&mut mem, &mut out);
        assert_eq!(out.len(), MAX_OUTPUT);
        assert_eq!(tx.used_entry(&mem, 0).0, 1, "the others wait");
    }

    #[test]
    fn input_is_bounded() {
        let (mut c, ..) = setup();
        c.type_in(&[b'x'; MAX_INPUT + 10]);
        c.type_in(b"y");
        assert_eq!(c.stats.input_dropped, 11);
    }

    #[test]
    fn bad_chains_are_returned_and_counted() {
        let (mut c, mut mem, mut rx, mut tx) = setup();
        // Output outside guest RAM: dropped, returned.
        tx.add(&mut mem, &[(1 << 40, 10, false)]);
        let mut out = Vec::new();
        c.transmit(&mut mem, &mut out);
        assert!(out.is_empty());
        assert_eq!(tx.used_entry(&mem, 0).0, 1);
        // An input buffer outside guest RAM: returned empty; the input
        // stays for the next buffer.
        c.type_in(b"abc");
        rx.add(&mut mem, &[(1 << 40, 16, true)]);
        c.deliver(&mut mem);
        assert_eq!(rx.used_entry(&mem, 0), (1, 0, 0));
        assert!(c.input_waiting());
        assert_eq!(c.stats.bad_chains, 2);
    }

    #[test]
    fn reset_drops_waiting_input() {
        let (mut c, ..) = setup();
        c.type_in(b"abc");
        c.write(reg::STATUS, 0);
        assert!(!c.input_waiting());
    }
}
