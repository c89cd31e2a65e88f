//! The queue against a device model written here: the device side reads
//! the driver ring and descriptors and writes used elements, as virtio
//! 1.2 section 2.7 tells a device to, including its half of the event
//! index protocol.

use super::*;
use core::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::vec::Vec;

/// Plain memory standing in for DMA memory.
struct Ram(RefCell<Vec<u8>>);

impl Ram {
    fn new(bytes: usize) -> Ram {
        // Garbage, not zeros: the queue must not rely on fresh memory.
        Ram(RefCell::new(
            (0..bytes).map(|i| (i * 7 + 3) as u8).collect(),
        ))
    }
    fn get<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        if !offset.is_multiple_of(N) {
            return None;
        }
        let m = self.0.borrow();
        m.get(offset..offset.checked_add(N)?)
            .map(|s| s.try_into().unwrap())
    }
    fn put(&self, offset: usize, bytes: &[u8]) -> Option<()> {
        if !offset.is_multiple_of(bytes.len()) {
            return None;
        }
        let mut m = self.0.borrow_mut();
        m.get_mut(offset..offset.checked_add(bytes.len())?)?
            .copy_from_slice(bytes);
        Some(())
    }
}

impl QueueMemory for Ram {
    fn read16(&self, offset: usize) -> Option<u16> {
        self.get(offset).map(u16::from_le_bytes)
    }
    fn read32(&self, offset: usize) -> Option<u32> {
        self.get(offset).map(u32::from_le_bytes)
    }
    fn read64(&self, offset: usize) -> Option<u64> {
        self.get(offset).map(u64::from_le_bytes)
    }
    fn write16(&self, offset: usize, value: u16) -> Option<()> {
        self.put(offset, &value.to_le_bytes())
    }
    fn write32(&self, offset: usize, value: u32) -> Option<()> {
        self.put(offset, &value.to_le_bytes())
    }
    fn write64(&self, offset: usize, value: u64) -> Option<()> {
        self.put(offset, &value.to_le_bytes())
    }
    fn len(&self) -> usize {
        self.0.borrow().len()
    }
}

/// A fixed-seed xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The device's side.
struct Device {
    layout: Layout,
    event_idx: bool,
    /// The next driver-ring entry to read.
    last_avail: u16,
    /// The device ring's `idx`.
    used_idx: u16,
    interrupts: u32,
}

impl Device {
    fn new(layout: Layout, event_idx: bool) -> Device {
        Device {
            layout,
            event_idx,
            last_avail: 0,
            used_idx: 0,
            interrupts: 0,
        }
    }

    /// Reads up to `max` published chains: (head, buffers).
    fn take(&mut self, mem: &Ram, max: usize) -> Vec<(u16, Vec<Buffer>)> {
        let l = self.layout;
        let idx = mem.read16(l.driver + 2).unwrap();
        let mut out = Vec::new();
        while self.last_avail != idx && out.len() < max {
            let slot = l.driver + 4 + 2 * usize::from(self.last_avail % l.size);
            let head = mem.read16(slot).unwrap();
            assert!(head < l.size, "driver put descriptor {head} in the ring");
            let mut chain = Vec::new();
            let mut at = head;
            loop {
                let d = l.desc + 16 * usize::from(at);
                let flags = mem.read16(d + 12).unwrap();
                chain.push(Buffer {
                    addr: mem.read64(d).unwrap(),
                    len: mem.read32(d + 8).unwrap(),
                    device_writes: flags & DESC_F_WRITE != 0,
                });
                assert!(chain.len() <= usize::from(l.size), "a descriptor loop");
                if flags & DESC_F_NEXT == 0 {
                    break;
                }
                at = mem.read16(d + 14).unwrap();
                assert!(at < l.size);
            }
            out.push((head, chain));
            self.last_avail = self.last_avail.wrapping_add(1);
        }
        out
    }

    /// Tells the driver where to notify (event index): once the driver
    /// ring passes `event`.
    fn set_avail_event(&self, mem: &Ram, event: u16) {
        mem.write16(l_avail_event(&self.layout), event).unwrap();
    }

    /// Writes used elements, then `idx`; returns whether it interrupts.
    fn complete(&mut self, mem: &Ram, done: &[(u32, u32)]) -> bool {
        let l = self.layout;
        let old = self.used_idx;
        for &(id, len) in done {
            let e = l.device + 4 + 8 * usize::from(self.used_idx % l.size);
            mem.write32(e, id).unwrap();
            mem.write32(e + 4, len).unwrap();
            self.used_idx = self.used_idx.wrapping_add(1);
        }
        mem.write16(l.device + 2, self.used_idx).unwrap();
        let interrupt = if self.event_idx {
            let event = mem.read16(l.driver + 4 + 2 * usize::from(l.size)).unwrap();
            vring_need_event(event, self.used_idx, old)
        } else {
            mem.read16(l.driver).unwrap() & AVAIL_F_NO_INTERRUPT == 0
        };
        self.interrupts += u32::from(interrupt);
        interrupt
    }
}

fn l_avail_event(l: &Layout) -> usize {
    l.device + 4 + 8 * usize::from(l.size)
}

fn queue(size: u16, event_idx: bool) -> (SplitQueue<Ram>, Device) {
    let l = Layout::new(size).unwrap();
    let q = SplitQueue::new(Ram::new(l.bytes), 0x1_0000, size, event_idx).unwrap();
    (q, Device::new(l, event_idx))
}

/// A block-request-like chain: header (read), data, status (written).
fn request(n: u64, write: bool) -> [Buffer; 3] {
    let base = 0x8000_0000 + n * 0x1000;
    [
        Buffer {
            addr: base,
            len: 16,
            device_writes: false,
        },
        Buffer {
            addr: base + 0x200,
            len: 512,
            device_writes: !write,
        },
        Buffer {
            addr: base + 0x400,
            len: 1,
            device_writes: true,
        },
    ]
}

/// `event` in `[old, new)` modulo 2^16, by walking it.
fn passes(event: u16, new: u16, old: u16) -> bool {
    let mut i = old;
    while i != new {
        if i == event {
            return true;
        }
        i = i.wrapping_add(1);
    }
    false
}

#[test]
fn layouts_and_alignment() {
    for size in [1u16, 2, 4, 16, 256, 1024, 32768] {
        let l = Layout::new(size).unwrap();
        let n = usize::from(size);
        assert_eq!(l.desc, 0);
        assert_eq!(l.driver, 16 * n, "size {size}");
        assert_eq!(l.driver % 2, 0);
        assert_eq!(l.device % 4, 0);
        assert!(l.device >= l.driver + 6 + 2 * n);
        assert_eq!(l.bytes, l.device + 6 + 8 * n);
    }
    // 256 entries: 4096 + 518, rounded to 4 → 4616, + 2054.
    assert_eq!(Layout::new(256).unwrap().device, 4616);
    assert_eq!(Layout::new(256).unwrap().bytes, 6670);
    for bad in [0u16, 3, 100, 255, 0xffff, 40000] {
        assert_eq!(Layout::new(bad), Err(QueueError::BadSize(bad)));
    }
    let l = Layout::new(16).unwrap();
    assert_eq!(
        SplitQueue::new(Ram::new(l.bytes - 2), 0, 16, true).err(),
        Some(QueueError::TooSmall {
            needs: l.bytes,
            has: l.bytes - 2
        })
    );
    assert_eq!(
        SplitQueue::new(Ram::new(l.bytes), 0x1008, 16, true).err(),
        Some(QueueError::Misaligned(0x1008))
    );
    let (q, _) = queue(256, true);
    assert_eq!(q.desc_bus(), 0x1_0000);
    assert_eq!(q.driver_bus(), 0x1_0000 + 4096);
    assert_eq!(q.device_bus(), 0x1_0000 + 4616);
    // The rings start zeroed, whatever the memory held.
    let m = q.memory();
    assert_eq!(m.read16(q.layout().driver + 2), Some(0));
    assert_eq!(m.read16(q.layout().device + 2), Some(0));
    assert_eq!(m.read16(l_avail_event(&q.layout())), Some(0));
}

#[test]
fn queue_sizes_are_powers_of_two_within_offer_and_cap() {
    assert_eq!(Layout::queue_size(256, 1024), Some(256));
    assert_eq!(Layout::queue_size(1024, 256), Some(256));
    assert_eq!(Layout::queue_size(1000, 0xffff), Some(512));
    assert_eq!(Layout::queue_size(0xffff, 0xffff), Some(32768));
    assert_eq!(Layout::queue_size(3, 16), Some(2));
    assert_eq!(Layout::queue_size(1, 1), Some(1));
    assert_eq!(Layout::queue_size(0, 16), None);
    assert_eq!(Layout::queue_size(256, 0), None);
    for offered in 0..=u16::MAX {
        if let Some(s) = Layout::queue_size(offered, 300) {
            assert!(s.is_power_of_two() && s <= offered && s <= 300 && s > offered.min(300) / 2);
        }
    }
}

#[test]
fn chains_reach_the_device_and_come_back() {
    let (mut q, mut dev) = queue(16, true);
    let t1 = q.add(&request(1, true)).unwrap();
    let t2 = q.add(&request(2, false)).unwrap();
    assert_ne!(t1, t2);
    assert_eq!(q.free(), 10);
    // Not visible before publish.
    assert!(dev.take(q.memory(), 99).is_empty());
    assert_eq!(q.publish(), Ok(2));
    let seen = dev.take(q.memory(), 99);
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], (t1.0, request(1, true).to_vec()));
    assert_eq!(seen[1], (t2.0, request(2, false).to_vec()));
    assert_eq!(q.pop_used(), Ok(None));
    // Out of order completion.
    dev.complete(q.memory(), &[(u32::from(t2.0), 513), (u32::from(t1.0), 1)]);
    assert_eq!(
        q.pop_used(),
        Ok(Some(Used {
            token: t2,
            len: 513
        }))
    );
    assert_eq!(q.pop_used(), Ok(Some(Used { token: t1, len: 1 })));
    assert_eq!(q.pop_used(), Ok(None));
    assert_eq!(q.free(), 16);
    assert_eq!(q.in_flight(), 0);
}

#[test]
fn bad_chains_are_refused() {
    let (mut q, _) = queue(8, true);
    assert_eq!(q.add(&[]), Err(QueueError::EmptyChain));
    let mut r = request(0, true);
    r.swap(1, 2);
    assert_eq!(q.add(&r), Err(QueueError::ReadableAfterWritable));
    assert_eq!(q.free(), 8);
}

#[test]
fn a_full_queue_refuses_and_recovers() {
    let (mut q, mut dev) = queue(8, false);
    let a = q.add(&request(0, true)).unwrap();
    let _b = q.add(&request(1, true)).unwrap();
    assert_eq!(q.free(), 2);
    assert_eq!(
        q.add(&request(2, true)),
        Err(QueueError::Full { needs: 3, free: 2 })
    );
    // Nothing changed by the refusal: two single buffers still fit.
    let one = [Buffer {
        addr: 0x1000,
        len: 8,
        device_writes: true,
    }];
    let c = q.add(&one).unwrap();
    let _d = q.add(&one).unwrap();
    assert_eq!(q.add(&one), Err(QueueError::Full { needs: 1, free: 0 }));
    assert_eq!(q.publish(), Ok(4));
    assert_eq!(dev.take(q.memory(), 99).len(), 4);
    dev.complete(q.memory(), &[(u32::from(a.0), 1), (u32::from(c.0), 8)]);
    assert!(q.pop_used().unwrap().is_some());
    assert!(q.pop_used().unwrap().is_some());
    assert_eq!(q.free(), 4);
    q.add(&request(3, false)).unwrap();
    assert_eq!(q.free(), 1);
}

#[test]
fn a_batch_is_one_publication_one_notification_one_interrupt() {
    let (mut q, mut dev) = queue(256, true);
    let tokens: Vec<Token> = (0..32).map(|i| q.add(&request(i, true)).unwrap()).collect();
    assert_eq!(q.in_flight(), 32);
    assert_eq!(q.free(), 256 - 96);
    // The device sleeps waiting for entry 0: the batch notifies once.
    dev.set_avail_event(q.memory(), 0);
    assert_eq!(q.publish(), Ok(32));
    assert_eq!(q.needs_notify(), Ok(true));
    assert_eq!(q.needs_notify(), Ok(false), "nothing new published");
    assert_eq!(q.publish(), Ok(0));
    assert_eq!(q.interrupt_after(32), Ok(false));
    let seen = dev.take(q.memory(), 999);
    assert_eq!(seen.len(), 32);
    // The device completes in uneven pieces; only the last interrupts.
    let mut done = Vec::new();
    for piece in seen.chunks(5) {
        let ids: Vec<(u32, u32)> = piece.iter().map(|(h, _)| (u32::from(*h), 1)).collect();
        done.push(dev.complete(q.memory(), &ids));
    }
    assert_eq!(dev.interrupts, 1);
    assert_eq!(done.last(), Some(&true));
    let mut back = Vec::new();
    while let Some(u) = q.pop_used().unwrap() {
        back.push(u.token);
    }
    assert_eq!(back, tokens);
    assert_eq!(q.free(), 256);
}

#[test]
fn need_event_matches_its_definition_across_the_wrap() {
    for old in (65520u16..=65535).chain(0..16) {
        for batch in 0u16..20 {
            let new = old.wrapping_add(batch);
            for event in (65500u16..=65535).chain(0..40) {
                assert_eq!(
                    vring_need_event(event, new, old),
                    passes(event, new, old),
                    "event {event} new {new} old {old}"
                );
            }
        }
    }
}

#[test]
fn event_index_notifications_through_the_wrap() {
    // 70000 chains through a queue of 4: the indices wrap past 65535.
    let (mut q, mut dev) = queue(4, true);
    let mut rng = Rng(0x5eed_0001);
    let (mut total, mut notified, mut expected_true) = (0u32, 0u32, 0u32);
    while total < 70_000 {
        let batch = 1 + rng.below(4) as u16;
        for i in 0..batch {
            q.add(&[Buffer {
                addr: 0x2000 + u64::from(i) * 64,
                len: 64,
                device_writes: true,
            }])
            .unwrap();
        }
        // The device asks to be told at some entry near where it is.
        let old = dev.last_avail;
        let event = old.wrapping_add(rng.below(8) as u16).wrapping_sub(2);
        dev.set_avail_event(q.memory(), event);
        q.publish().unwrap();
        let new = old.wrapping_add(batch);
        let want = passes(event, new, old);
        assert_eq!(
            q.needs_notify(),
            Ok(want),
            "event {event} old {old} new {new}"
        );
        notified += u32::from(want);
        expected_true += u32::from(event.wrapping_sub(old) < batch);
        let seen = dev.take(q.memory(), 99);
        assert_eq!(seen.len(), usize::from(batch));
        let ids: Vec<(u32, u32)> = seen.iter().map(|(h, _)| (u32::from(*h), 64)).collect();
        dev.complete(q.memory(), &ids);
        for _ in 0..batch {
            assert_eq!(q.pop_used().unwrap().map(|u| u.len), Some(64));
        }
        total += u32::from(batch);
    }
    assert!(dev.last_avail < 20_000, "the index wrapped");
    assert_eq!(notified, expected_true);
    assert!(notified > 1000 && notified < total);
}

#[test]
fn used_event_interrupts_once_per_round_through_the_wrap() {
    let (mut q, mut dev) = queue(8, true);
    let mut rng = Rng(0x5eed_0002);
    let mut rounds = 0u32;
    let mut completed = 0u32;
    while completed < 70_000 {
        let k = 1 + rng.below(8) as u16;
        for _ in 0..k {
            q.add(&[Buffer {
                addr: 0x4000,
                len: 4,
                device_writes: true,
            }])
            .unwrap();
        }
        q.publish().unwrap();
        assert_eq!(q.interrupt_after(k), Ok(false));
        let before = dev.interrupts;
        let mut seen = dev.take(q.memory(), 99);
        while !seen.is_empty() {
            let piece = 1 + rng.below(seen.len() as u64) as usize;
            let ids: Vec<(u32, u32)> = seen
                .drain(..piece)
                .map(|(h, _)| (u32::from(h), 4))
                .collect();
            dev.complete(q.memory(), &ids);
        }
        assert_eq!(dev.interrupts - before, 1, "round {rounds}: k {k}");
        while q.pop_used().unwrap().is_some() {}
        completed += u32::from(k);
        rounds += 1;
    }
    // Disabled: the device stays quiet.
    q.add(&request(0, true)).unwrap();
    q.publish().unwrap();
    q.disable_interrupts().unwrap();
    let seen = dev.take(q.memory(), 99);
    assert!(!dev.complete(q.memory(), &[(u32::from(seen[0].0), 1)]));
    // Re-enabled with a completion already there: the driver is told to
    // take it rather than wait.
    assert_eq!(q.enable_interrupts(), Ok(true));
}

#[test]
fn without_event_index_the_flags_decide() {
    let (mut q, mut dev) = queue(8, false);
    q.add(&request(0, true)).unwrap();
    q.publish().unwrap();
    assert_eq!(q.needs_notify(), Ok(true));
    // The device says NO_NOTIFY.
    q.memory()
        .write16(q.layout().device, USED_F_NO_NOTIFY)
        .unwrap();
    q.add(&request(1, true)).unwrap();
    q.publish().unwrap();
    assert_eq!(q.needs_notify(), Ok(false));
    let seen = dev.take(q.memory(), 99);
    q.disable_interrupts().unwrap();
    assert!(!dev.complete(q.memory(), &[(u32::from(seen[0].0), 1)]));
    assert_eq!(q.enable_interrupts(), Ok(true));
    assert!(dev.complete(q.memory(), &[(u32::from(seen[1].0), 1)]));
}

/// A queue with two chains in flight (3 descriptors each) and the device
/// having read them.
fn two_in_flight() -> (SplitQueue<Ram>, Device, Token, Token) {
    let (mut q, mut dev) = queue(8, true);
    let a = q.add(&request(0, true)).unwrap();
    let b = q.add(&request(1, false)).unwrap();
    q.publish().unwrap();
    dev.take(q.memory(), 99);
    (q, dev, a, b)
}

fn assert_broken(q: &mut SplitQueue<Ram>, e: DeviceError) {
    assert_eq!(q.broken(), Some(e));
    assert_eq!(q.pop_used(), Err(QueueError::Device(e)));
    assert_eq!(q.add(&request(5, true)), Err(QueueError::Device(e)));
    assert_eq!(q.publish(), Err(QueueError::Device(e)));
    assert_eq!(q.needs_notify(), Err(QueueError::Device(e)));
}

#[test]
fn a_hostile_device_gets_errors() {
    // An id out of range.
    let (mut q, mut dev, _, _) = two_in_flight();
    dev.complete(q.memory(), &[(8, 0)]);
    let e = DeviceError::IdOutOfRange { id: 8 };
    assert_eq!(q.pop_used(), Err(QueueError::Device(e)));
    assert_broken(&mut q, e);

    // A chain's middle descriptor, a free descriptor.
    for id in [1u32, 7] {
        let (mut q, mut dev, a, _) = two_in_flight();
        assert_eq!(a, Token(0));
        dev.complete(q.memory(), &[(id, 0)]);
        let e = DeviceError::NotInFlight { id: id as u16 };
        assert_eq!(q.pop_used(), Err(QueueError::Device(e)));
        assert_broken(&mut q, e);
        assert_eq!(q.free(), 2, "nothing recycled");
    }

    // The same chain returned twice.
    let (mut q, mut dev, a, _) = two_in_flight();
    dev.complete(q.memory(), &[(u32::from(a.0), 1), (u32::from(a.0), 1)]);
    assert_eq!(q.pop_used().unwrap().unwrap().token, a);
    let e = DeviceError::NotInFlight { id: a.0 };
    assert_eq!(q.pop_used(), Err(QueueError::Device(e)));
    assert_eq!(q.free(), 5);

    // The used idx moving past what is in flight, or by more than the
    // queue size.
    for jump in [3u16, 9, 0x8000, 0xffff] {
        let (mut q, _, _, _) = two_in_flight();
        q.memory().write16(q.layout().device + 2, jump).unwrap();
        let e = DeviceError::UsedIdxJump {
            moved: jump,
            in_flight: 2,
        };
        assert_eq!(q.pop_used(), Err(QueueError::Device(e)));
        assert_broken(&mut q, e);
    }

    // More bytes written than the chain has writable: a write request has
    // 1 writable byte (status), a read request 513.
    let (mut q, mut dev, a, b) = two_in_flight();
    dev.complete(q.memory(), &[(u32::from(b.0), 513), (u32::from(a.0), 2)]);
    assert_eq!(q.pop_used().unwrap().unwrap().len, 513);
    let e = DeviceError::LengthTooLarge {
        id: a.0,
        len: 2,
        writable: 1,
    };
    assert_eq!(q.pop_used(), Err(QueueError::Device(e)));
    assert_broken(&mut q, e);
}

/// Walks chain `head` in the descriptor table: its descriptor indices.
fn chain_descriptors(q: &SplitQueue<Ram>, head: u16) -> Vec<u16> {
    let m = q.memory();
    let mut at = head;
    let mut out = vec![at];
    loop {
        let d = q.layout().desc + 16 * usize::from(at);
        if m.read16(d + 12).unwrap() & DESC_F_NEXT == 0 {
            return out;
        }
        at = m.read16(d + 14).unwrap();
        out.push(at);
    }
}

#[test]
fn random_device_behaviour_never_reuses_a_descriptor() {
    // A device that is sometimes right and sometimes writes garbage into
    // the device ring; the driver must never panic, never return a chain
    // that is not in flight, and never hand out a descriptor in use.
    for seed in 1..200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let size = 1u16 << rng.below(6);
        let (mut q, mut dev) = queue(size, rng.below(2) == 0);
        let mut live: BTreeMap<u16, Vec<u16>> = BTreeMap::new();
        for _ in 0..300 {
            match rng.below(40) {
                0..=19 => {
                    let n = 1 + rng.below(4) as usize;
                    let chain: Vec<Buffer> = (0..n)
                        .map(|i| Buffer {
                            addr: rng.next(),
                            len: rng.next() as u32,
                            device_writes: i + 1 == n,
                        })
                        .collect();
                    match q.add(&chain) {
                        Ok(t) => {
                            let descs = chain_descriptors(&q, t.0);
                            assert_eq!(descs.len(), n);
                            let used: BTreeSet<u16> = live.values().flatten().copied().collect();
                            assert!(descs.iter().all(|d| !used.contains(d)), "seed {seed}");
                            live.insert(t.0, descs);
                        }
                        Err(QueueError::Full { .. }) => {
                            let used: usize = live.values().map(Vec::len).sum();
                            assert!(used + n > usize::from(size));
                        }
                        Err(QueueError::Device(_)) => break,
                        Err(e) => panic!("seed {seed}: {e}"),
                    }
                    let _ = q.publish();
                }
                20..=38 => {
                    // An honest completion of whatever the device read.
                    let seen = dev.take(q.memory(), 99);
                    let ids: Vec<(u32, u32)> =
                        seen.iter().map(|(h, _)| (u32::from(*h), 0)).collect();
                    dev.complete(q.memory(), &ids);
                }
                _ => {
                    // Garbage: a random element and a random idx step.
                    let l = q.layout();
                    let e = l.device + 4 + 8 * rng.below(u64::from(size)) as usize;
                    q.memory()
                        .write32(e, rng.below(u64::from(size) + 2) as u32)
                        .unwrap();
                    q.memory().write32(e + 4, rng.below(4) as u32).unwrap();
                    dev.used_idx = dev.used_idx.wrapping_add(rng.below(3) as u16);
                    q.memory().write16(l.device + 2, dev.used_idx).unwrap();
                }
            }
            loop {
                match q.pop_used() {
                    Ok(Some(u)) => {
                        assert!(live.remove(&u.token.0).is_some(), "seed {seed}");
                    }
                    Ok(None) => break,
                    Err(QueueError::Device(_)) => break,
                    Err(e) => panic!("seed {seed}: {e}"),
                }
            }
            if q.broken().is_some() {
                // Broken stays broken; nothing was recycled.
                let used: usize = live.values().map(Vec::len).sum();
                assert_eq!(usize::from(q.free()) + used, usize::from(size));
                break;
            }
            let used: usize = live.values().map(Vec::len).sum();
            assert_eq!(usize::from(q.free()) + used, usize::from(size));
            assert_eq!(usize::from(q.in_flight()), live.len());
        }
    }
}

#[test]
fn a_reset_queue_is_new_again_after_the_device_broke_it() {
    let (mut q, mut dev, _, _) = two_in_flight();
    dev.complete(q.memory(), &[(8, 0)]);
    assert!(q.pop_used().is_err());
    // The device was reset (its own state gone with it); so is the queue.
    q.reset().unwrap();
    let mut dev = Device::new(q.layout(), true);
    assert_eq!(q.broken(), None);
    assert_eq!((q.free(), q.in_flight()), (8, 0));
    let l = q.layout();
    assert_eq!(q.memory().read16(l.driver + 2), Some(0), "driver idx");
    assert_eq!(q.memory().read16(l.device + 2), Some(0), "device idx");
    // Chains go through as on a fresh queue, from descriptor 0 on.
    let a = q.add(&request(0, true)).unwrap();
    assert_eq!(a, Token(0));
    q.publish().unwrap();
    let taken = dev.take(q.memory(), 99);
    assert_eq!(taken.len(), 1);
    dev.complete(q.memory(), &[(u32::from(a.0), 1)]);
    assert_eq!(q.pop_used().unwrap().unwrap().token, a);
    assert_eq!(q.free(), 8);
}
