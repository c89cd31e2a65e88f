//! Host tests of the whole stream: the protocol step by step in one
//! thread, a hostile peer on either side, and 100,000 packets between two
//! threads.

use core::cell::{Cell, RefCell};
use std::boxed::Box;
use std::println;
use std::rc::Rc;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use super::hostile::{Control, Forger};
use super::region::test_regions;
use super::traffic::{self, Fault, Rng, Seen, Traffic, Verify, VerifySink, END_TAG};
use super::*;

/// A notification that never blocks: counts, and runs `on_wait` (the
/// peer's actions while this side sleeps) when waited on.
#[derive(Default)]
struct Scripted {
    signals: Rc<Cell<u32>>,
    on_wait: Option<Box<dyn FnMut()>>,
}

impl core::fmt::Debug for Scripted {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Scripted({} signals)", self.signals.get())
    }
}

impl Notify for Scripted {
    fn signal_peer(&mut self) -> Result<(), abi::Error> {
        self.signals.set(self.signals.get() + 1);
        Ok(())
    }

    fn wait(&mut self) -> Result<(), abi::Error> {
        if let Some(f) = &mut self.on_wait {
            f();
        }
        Ok(())
    }
}

const SMALL: Config = Config {
    entries: 8,
    block_size: 64,
};
/// 4 KiB of rings and control, then 8 KiB of buffer (128 blocks).
const SMALL_REGION: usize = 12 << 10;
const SMALL_WORDS: usize = 2;

type TestSource = Source<Scripted, SMALL_WORDS>;

/// A source, a sink and a hostile hand on one small region.
fn small_stream() -> (TestSource, Sink<Scripted>, Forger) {
    let [a, b, hand] = test_regions::<3>(SMALL_REGION);
    let source = Source::new(a, SMALL, Scripted::default()).unwrap();
    let sink = Sink::new(b, SMALL, Scripted::default()).unwrap();
    (source, sink, Forger::new(hand, SMALL).unwrap())
}

#[test]
fn layout_puts_rings_first_and_the_buffer_on_a_page() {
    let layout = Layout::new(64 << 10, SMALL).unwrap();
    assert_eq!(layout.submit.ctrl, 0);
    assert_eq!(layout.ack.ctrl, 128);
    assert_eq!(layout.submit.slots, 256);
    assert_eq!(layout.ack.slots, 256 + 8 * 16);
    assert_eq!(layout.buffer_offset(), 4096);
    assert_eq!(layout.buffer_len(), 60 << 10);
    assert_eq!(layout.blocks(), 960);
    // 256 entries: 8 KiB of descriptors, the buffer at 12 KiB; a ragged
    // end is cut to whole blocks.
    let layout = Layout::new((1 << 20) + 100, Config::DEFAULT).unwrap();
    assert_eq!(layout.buffer_offset(), 12 << 10);
    assert_eq!(layout.buffer_len(), (1 << 20) - (12 << 10) + 64);
    let bad = |len, entries, block_size| {
        Layout::new(
            len,
            Config {
                entries,
                block_size,
            },
        )
        .unwrap_err()
    };
    assert_eq!(bad(1 << 20, 3, 64), LayoutError::BadEntries);
    assert_eq!(bad(1 << 20, 1, 64), LayoutError::BadEntries);
    assert_eq!(bad(1 << 20, 1 << 17, 64), LayoutError::BadEntries);
    assert_eq!(bad(1 << 20, 8, 4), LayoutError::BadBlockSize);
    assert_eq!(bad(1 << 20, 8, 96), LayoutError::BadBlockSize);
    assert_eq!(
        bad(4096, 8, 64),
        LayoutError::RegionTooSmall {
            len: 4096,
            needed: 4096 + 64
        }
    );
    // The source's allocator must cover every block.
    let [r] = test_regions::<1>(SMALL_REGION);
    assert_eq!(
        Source::<Scripted, 1>::new(r, SMALL, Scripted::default()).unwrap_err(),
        LayoutError::TooManyBlocks {
            blocks: 128,
            capacity: 64
        }
    );
    assert_eq!(bitmap_words(SMALL_REGION, 64), 3);
}

#[test]
fn packets_become_visible_per_batch_and_payload_arrives() {
    let (mut source, mut sink, _) = small_stream();
    for i in 0..3u8 {
        let mut p = source.alloc(100 + u32::from(i)).unwrap();
        source.payload_mut(&p).unwrap().fill(i);
        p.tag = u32::from(i);
        source.submit(p).unwrap();
    }
    assert_eq!(sink.get(), Ok(None), "staged packets are not published yet");
    source.flush().unwrap();
    for i in 0..3u8 {
        let t = sink.get().unwrap().unwrap();
        assert_eq!(t.packet().tag, u32::from(i));
        assert_eq!(t.packet().len(), 100 + u32::from(i));
        assert!(sink.payload(&t).unwrap().iter().all(|&b| b == i));
        sink.payload_mut(&t).unwrap()[0] = 0xee;
        sink.ack(t).unwrap();
    }
    assert_eq!(sink.get(), Ok(None));
    assert_eq!(source.get_ack(), Ok(None));
    sink.flush().unwrap();
    for i in 0..3 {
        let p = source.get_ack().unwrap().unwrap();
        assert_eq!(p.tag, i);
        assert_eq!(source.payload(&p).unwrap()[0], 0xee);
        source.release(p).unwrap();
    }
    assert_eq!(source.free_bytes(), 8 << 10);
    assert_eq!(source.in_flight(), 0);
    // Nobody slept: no signal at all.
    assert_eq!(source.counters().signals, 0);
    assert_eq!(sink.counters().signals, 0);
    assert_eq!(source.counters().packets, 3);
    assert_eq!(sink.counters().packets, 3);
}

/// Flushes the submitted packet over, acknowledges it and releases it;
/// returns it.
fn round_trip(source: &mut TestSource, sink: &mut Sink<Scripted>) -> Packet {
    source.flush().unwrap();
    let t = sink.get().unwrap().unwrap();
    sink.ack(t).unwrap();
    sink.flush().unwrap();
    let p = source.get_ack().unwrap().unwrap();
    source.release(p).unwrap();
    p
}

#[test]
fn the_source_owns_only_what_is_allocated_and_not_in_flight() {
    let (mut source, mut sink, _) = small_stream();
    let p = source.alloc(64).unwrap();
    let fake = Packet { offset: 64, ..p };
    assert_eq!(source.submit(fake), Err(Error::NotOwned(fake)));
    assert_eq!(source.payload(&fake), Err(Error::NotOwned(fake)));
    let long = Packet { len: 65, ..p };
    assert_eq!(source.submit(long), Err(Error::NotOwned(long)));
    source.submit(p).unwrap();
    // In flight: the sink's now.
    assert_eq!(source.payload_mut(&p), Err(Error::NotOwned(p)));
    assert_eq!(source.submit(p), Err(Error::NotOwned(p)));
    assert_eq!(source.release(p), Err(Error::NotOwned(p)));
    let p = round_trip(&mut source, &mut sink);
    assert_eq!(source.release(p), Err(Error::NotOwned(p)));
    assert_eq!(source.alloc(1 << 20), Err(Error::TooLarge { len: 1 << 20 }));
}

#[test]
fn a_full_ring_is_published_and_refused_and_a_full_buffer_refused() {
    let (mut source, mut sink, _) = small_stream();
    for _ in 0..SMALL.entries {
        let p = source.alloc(8).unwrap();
        source.submit(p).unwrap();
    }
    let p = source.alloc(8).unwrap();
    assert_eq!(source.submit(p), Err(Error::RingFull));
    assert_eq!(source.counters().ring_full, 1);
    // The full ring was published on its own.
    let t = sink.get().unwrap().unwrap();
    sink.ack(t).unwrap();
    // One slot is free only once the sink gives it back (after E/2 taken,
    // when empty, or when flushing).
    assert_eq!(source.submit(p), Err(Error::RingFull));
    sink.flush().unwrap();
    source.submit(p).unwrap();
    // The buffer: 128 blocks, 9 in flight, one acknowledged.
    assert_eq!(source.alloc(119 * 64 + 1), Err(Error::BufferFull));
    assert_eq!(source.counters().buffer_full, 1);
    let big = source.alloc(119 * 64).unwrap();
    assert_eq!(source.alloc(0), Err(Error::BufferFull));
    source.release(big).unwrap();
    // The acknowledgement ring fills too: the sink acknowledges 8 without
    // the source taking any.
    source.flush().unwrap();
    let mut taken = std::vec::Vec::new();
    while let Some(t) = sink.get().unwrap() {
        taken.push(t);
    }
    assert_eq!(taken.len(), 8);
    for t in taken.drain(..7) {
        sink.ack(t).unwrap();
    }
    let last = taken.pop().unwrap();
    let NotAcked { error, packet } = sink.ack(last).unwrap_err();
    assert_eq!(error, Error::RingFull);
    assert_eq!(sink.counters().ring_full, 1);
    assert!(source.get_ack().unwrap().is_some());
    source.flush().unwrap();
    sink.ack(packet).unwrap();
}

/// Rule 5 in one thread: the sink sleeps (raising its flag), and the
/// source's flush during that sleep signals exactly once; flushes while
/// nobody sleeps signal nothing.
#[test]
fn a_signal_goes_only_to_a_sleeper_once_per_batch() {
    let [a, b] = test_regions::<2>(SMALL_REGION);
    let source_signals = Rc::new(Cell::new(0));
    let source = Rc::new(RefCell::new(
        TestSource::new(
            a,
            SMALL,
            Scripted {
                signals: source_signals.clone(),
                on_wait: None,
            },
        )
        .unwrap(),
    ));
    let peer = source.clone();
    let mut sink = Sink::new(
        b,
        SMALL,
        Scripted {
            signals: Rc::default(),
            // While the sink sleeps, the source submits a batch of three.
            on_wait: Some(Box::new(move || {
                let mut s = peer.borrow_mut();
                for _ in 0..3 {
                    let p = s.alloc(1).unwrap();
                    s.submit(p).unwrap();
                }
                s.flush().unwrap();
                s.flush().unwrap();
            })),
        },
    )
    .unwrap();
    sink.wait_for_packets().unwrap();
    assert_eq!(source_signals.get(), 1, "one signal for the batch");
    assert_eq!(sink.counters().waits, 1);
    for _ in 0..3 {
        let t = sink.get().unwrap().unwrap();
        sink.ack(t).unwrap();
    }
    // Packets are there: the sink does not sleep, and no flag stays up.
    let p = source.borrow_mut().alloc(1).unwrap();
    source.borrow_mut().submit(p).unwrap();
    source.borrow_mut().flush().unwrap();
    sink.wait_for_packets().unwrap();
    assert_eq!(sink.counters().waits, 1);
    let p = source.borrow_mut().alloc(1).unwrap();
    source.borrow_mut().submit(p).unwrap();
    source.borrow_mut().flush().unwrap();
    assert_eq!(source_signals.get(), 1);
    // The source never slept: the sink's flushes signal nothing.
    sink.flush().unwrap();
    assert_eq!(sink.counters().signals, 0);
}

#[test]
fn an_armed_sink_is_signalled_once_by_the_next_batch_and_not_before() {
    let [a, b] = test_regions::<2>(SMALL_REGION);
    let source_signals = Rc::new(Cell::new(0));
    let mut source = TestSource::new(
        a,
        SMALL,
        Scripted {
            signals: source_signals.clone(),
            on_wait: None,
        },
    )
    .unwrap();
    let mut sink = Sink::new(b, SMALL, Scripted::default()).unwrap();
    // Not armed: a batch signals nobody (the sink is not waiting).
    let p = source.alloc(1).unwrap();
    source.submit(p).unwrap();
    source.flush().unwrap();
    assert_eq!(source_signals.get(), 0);
    // Armed with a packet there: nothing asked, look now.
    assert!(sink.arm(false).unwrap());
    let t = sink.get().unwrap().unwrap();
    sink.ack(t).unwrap();
    // Armed on an empty ring: the next batch signals once, then no more
    // (the flag came down with the signal).
    assert!(!sink.arm(false).unwrap());
    for _ in 0..2 {
        let p = source.alloc(1).unwrap();
        source.submit(p).unwrap();
        source.flush().unwrap();
    }
    assert_eq!(source_signals.get(), 1);
    assert_eq!(sink.counters().waits, 0, "arming never waits");
}

#[test]
fn an_armed_source_is_signalled_by_the_next_acknowledgements_and_a_shortened_packet_comes_back() {
    let [a, b] = test_regions::<2>(SMALL_REGION);
    let sink_signals = Rc::new(Cell::new(0));
    let mut source = TestSource::new(a, SMALL, Scripted::default()).unwrap();
    let mut sink = Sink::new(
        b,
        SMALL,
        Scripted {
            signals: sink_signals.clone(),
            on_wait: None,
        },
    )
    .unwrap();
    // A receive buffer of 2 blocks, filled with 70 bytes: submitted so.
    let p = source.alloc(128).unwrap();
    assert_eq!(p.truncated(129), None, "a packet never grows");
    let short = p.truncated(70).unwrap();
    assert_eq!((short.offset(), short.len()), (p.offset(), 70));
    source.submit(short).unwrap();
    // Armed with nothing acknowledged: the sink signals its batch once.
    assert!(!source.arm(false).unwrap());
    let t = sink.get().unwrap().unwrap();
    assert_eq!(t.packet().len(), 70);
    sink.ack(t).unwrap();
    sink.flush().unwrap();
    assert_eq!(sink_signals.get(), 1);
    // Armed with an acknowledgement there: look now.
    assert!(source.arm(false).unwrap());
    let back = source.get_ack().unwrap().unwrap();
    assert_eq!(back.len(), 70);
    // The whole allocation is the source's again: resubmitted whole.
    source.submit(p).unwrap();
    assert_eq!(source.counters().waits, 0, "arming never waits");
}

#[test]
fn a_hostile_source_gets_its_bad_descriptors_rejected() {
    let (_, mut sink, hand) = small_stream();
    let len = sink.layout().buffer_len() as u32;
    let bad = [
        [len, 1, 0, 0],             // starts past the end
        [0, len + 1, 0, 0],         // ends past the end
        [len - 8, 9, 0, 0],         // ends one byte past the end
        [u32::MAX, u32::MAX, 0, 0], // wraps in 32 bits
        [u32::MAX - 3, 8, 0, 0],    // wraps in 32 bits, short
    ];
    for (i, words) in bad.into_iter().enumerate() {
        hand.publish(Ring::Submit, i as u32, words);
        assert_eq!(
            sink.get(),
            Err(Error::Rejected(Packet::from_words(words))),
            "descriptor {words:x?}"
        );
    }
    // The stream goes on: a good one right at the end of the buffer.
    hand.publish(Ring::Submit, 5, [len - 8, 8, 7, 9]);
    let t = sink.get().unwrap().unwrap();
    assert_eq!(sink.payload(&t).unwrap().len(), 8);
    assert_eq!((t.packet().op, t.packet().tag), (7, 9));
    hand.publish(Ring::Submit, 6, [0, len, 0, 0]);
    assert!(sink.get().unwrap().is_some());
    assert_eq!(sink.counters().rejected, 5);
    assert_eq!(sink.counters().packets, 7);
}

#[test]
fn a_hostile_source_cannot_move_its_index_impossibly() {
    for (name, tail) in [
        ("more than a ring ahead", SMALL.entries + 1),
        ("far ahead", 0x8000_0000),
        ("behind", u32::MAX),
    ] {
        let (_, mut sink, hand) = small_stream();
        hand.control(Ring::Submit, Control::Tail, tail);
        let broken = Err(Error::BadIndex {
            ring: Ring::Submit,
            value: tail,
        });
        assert_eq!(sink.get().map(|_| ()), broken, "{name}");
        // Broken for good, even if the index is put right.
        hand.control(Ring::Submit, Control::Tail, 0);
        assert_eq!(sink.get().map(|_| ()), broken, "{name}");
        assert_eq!(sink.flush(), broken);
        assert_eq!(sink.wait_for_packets(), broken);
    }
    // A tail that moves back after being seen further ahead.
    let (_, mut sink, hand) = small_stream();
    hand.publish(Ring::Submit, 0, [0, 8, 0, 0]);
    hand.publish(Ring::Submit, 1, [0, 8, 0, 0]);
    assert!(sink.get().unwrap().is_some());
    hand.control(Ring::Submit, Control::Tail, 1);
    assert!(sink.get().unwrap().is_some(), "the tail seen before stands");
    assert_eq!(
        sink.get().map(|_| ()),
        Err(Error::BadIndex {
            ring: Ring::Submit,
            value: 1
        })
    );
}

#[test]
fn a_hostile_sink_cannot_free_what_is_not_in_flight() {
    let (mut source, _, hand) = small_stream();
    let a = source.alloc(200).unwrap(); // 4 blocks at 0
    let b = source.alloc(64).unwrap(); // 1 block at 256
    let kept = source.alloc(64).unwrap(); // allocated, never submitted
    source.submit(a).unwrap();
    source.submit(b).unwrap();
    source.flush().unwrap();
    let free = source.free_bytes();
    let len = source.layout().buffer_len() as u32;
    let bad = [
        [a.offset + 64, 8, 0, 0], // inside a
        [a.offset + 1, 8, 0, 0],  // misaligned
        [kept.offset, 8, 0, 0],   // allocated but not submitted
        [a.offset, 257, 0, 0],    // longer than a's blocks
        [len, 0, 0, 0],           // past the buffer
        [!63, 0, 0, 0],           // far past it
        [1024, 8, 0, 0],          // free space
    ];
    let mut index = 0;
    for words in bad {
        hand.publish(Ring::Ack, index, words);
        index += 1;
        assert_eq!(
            source.get_ack(),
            Err(Error::Rejected(Packet::from_words(words))),
            "ack {words:x?}"
        );
        assert_eq!(source.free_bytes(), free);
        assert_eq!(source.in_flight(), 2);
    }
    // A real acknowledgement (a short read: fewer bytes, a result code).
    hand.publish(Ring::Ack, index, [a.offset, 100, 5, 6]);
    index += 1;
    let got = source.get_ack().unwrap().unwrap();
    assert_eq!(
        (got.offset(), got.len(), got.op, got.tag),
        (a.offset, 100, 5, 6)
    );
    // The same again: a is not in flight any more.
    hand.publish(Ring::Ack, index, [a.offset, 100, 5, 6]);
    index += 1;
    assert_eq!(source.get_ack(), Err(Error::Rejected(got)));
    source.release(got).unwrap();
    assert_eq!(source.free_bytes(), free + 256);
    // Still not in flight after release (and then reallocated).
    let again = source.alloc(200).unwrap();
    assert_eq!(
        again.offset, 384,
        "next fit: after `kept`, not in a's old place"
    );
    hand.publish(Ring::Ack, index, [again.offset, 8, 0, 0]);
    assert_eq!(
        source.get_ack(),
        Err(Error::Rejected(Packet {
            len: 8,
            op: 0,
            tag: 0,
            ..again
        }))
    );
    assert_eq!(source.counters().rejected, 9);
    assert_eq!(source.in_flight(), 1);
}

#[test]
fn a_hostile_sink_cannot_move_its_index_impossibly() {
    // Past the published tail.
    let (mut source, _, hand) = small_stream();
    let p = source.alloc(8).unwrap();
    source.submit(p).unwrap();
    source.flush().unwrap();
    hand.control(Ring::Submit, Control::Head, 2);
    // The source looks at the head when it needs space: make it need some.
    for _ in 1..SMALL.entries {
        let p = source.alloc(8).unwrap();
        source.submit(p).unwrap();
    }
    let p = source.alloc(8).unwrap();
    let broken = Err(Error::BadIndex {
        ring: Ring::Submit,
        value: 2,
    });
    assert_eq!(source.submit(p), broken);
    assert_eq!(source.submit(p), broken);
    assert_eq!(source.get_ack().map(|_| ()), broken);
    // Backwards, after a valid move.
    let (mut source, _, hand) = small_stream();
    for _ in 0..SMALL.entries {
        let p = source.alloc(8).unwrap();
        source.submit(p).unwrap();
    }
    source.flush().unwrap();
    hand.control(Ring::Submit, Control::Head, 3);
    let p = source.alloc(8).unwrap();
    source.submit(p).unwrap();
    for _ in 0..2 {
        let p = source.alloc(8).unwrap();
        source.submit(p).unwrap();
    }
    hand.control(Ring::Submit, Control::Head, 2);
    let p = source.alloc(8).unwrap();
    assert_eq!(
        source.submit(p),
        Err(Error::BadIndex {
            ring: Ring::Submit,
            value: 2
        })
    );
}

/// A flag the hostile peer raises or lowers only changes who is
/// signalled: no error, no wrong data.
#[test]
fn a_hostile_peer_playing_with_flags_causes_only_extra_signals() {
    let (mut source, mut sink, hand) = small_stream();
    for _ in 0..5 {
        hand.control(Ring::Submit, Control::WantsEntries, 7);
        let p = source.alloc(8).unwrap();
        source.submit(p).unwrap();
        round_trip(&mut source, &mut sink);
    }
    assert_eq!(source.counters().signals, 5);
    assert_eq!(source.counters().rejected + sink.counters().rejected, 0);
}

/// A stream between two threads: a condition variable per side stands for
/// its notification (a signal before the wait is kept, like a
/// notification's word).
#[derive(Default)]
struct Bell {
    rung: Mutex<bool>,
    cv: Condvar,
}

struct ThreadNotify {
    own: Arc<Bell>,
    peer: Arc<Bell>,
}

impl Notify for ThreadNotify {
    fn signal_peer(&mut self) -> Result<(), abi::Error> {
        *self.peer.rung.lock().unwrap() = true;
        self.peer.cv.notify_one();
        Ok(())
    }

    fn wait(&mut self) -> Result<(), abi::Error> {
        let mut rung = self.own.rung.lock().unwrap();
        while !*rung {
            rung = self.own.cv.wait(rung).unwrap();
        }
        *rung = false;
        Ok(())
    }
}

fn thread_pair() -> (ThreadNotify, ThreadNotify) {
    let (a, b) = (Arc::new(Bell::default()), Arc::new(Bell::default()));
    (
        ThreadNotify {
            own: a.clone(),
            peer: b.clone(),
        },
        ThreadNotify { own: b, peer: a },
    )
}

/// The seed of the random tests: `PACKET_STREAM_SEED` (decimal or 0x hex)
/// to replay a run, else a fixed one. Printed either way.
fn seed() -> u64 {
    let seed = std::env::var("PACKET_STREAM_SEED")
        .ok()
        .and_then(|s| match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        })
        .unwrap_or(0x9ac4_e75e_ed00_0001);
    println!("packet stream seed: {seed:#x} (replay: PACKET_STREAM_SEED={seed:#x})");
    seed
}

const PACKETS: u32 = 100_000;
const SEEN_WORDS: usize = (PACKETS as usize).div_ceil(64);

/// Runs `traffic` between two threads over a region of `region_len`
/// bytes; returns both ends' counters. Fails instead of hanging if the
/// stream stalls (a lost wake-up would).
fn run_threads<const WORDS: usize>(
    region_len: usize,
    config: Config,
    traffic: Traffic,
    hold: usize,
) -> (Counters, Counters) {
    let [a, b] = test_regions::<2>(region_len);
    let (source_notify, sink_notify) = thread_pair();
    let (done, finished) = mpsc::channel();
    let done_sink = done.clone();
    let source_thread = std::thread::spawn(move || {
        let mut source = Box::new(Source::<_, WORDS>::new(a, config, source_notify).unwrap());
        let mut work = Box::new(Verify::<SEEN_WORDS> {
            traffic,
            acked: Seen::new(),
        });
        let result = traffic::run_source(&mut *source, &mut *work);
        let _ = done.send(());
        result.map(|()| {
            assert_eq!(work.acked.count(), traffic.count);
            assert_eq!(source.in_flight(), 0);
            assert_eq!(source.free_bytes(), source.layout().buffer_len());
            source.counters()
        })
    });
    let sink_thread = std::thread::spawn(move || {
        let mut sink = Sink::new(b, config, sink_notify).unwrap();
        let mut work = Box::new(VerifySink::<SEEN_WORDS> {
            traffic,
            seen: Seen::new(),
        });
        let mut rng = Rng::new(traffic.seed ^ 0x51c);
        let result = traffic::run_sink::<_, 64>(&mut sink, &mut *work, hold, &mut rng);
        let _ = done_sink.send(());
        result.map(|n| {
            assert_eq!(n, traffic.count);
            assert_eq!(work.seen.count(), traffic.count);
            sink.counters()
        })
    });
    for _ in 0..2 {
        finished
            .recv_timeout(Duration::from_secs(120))
            .expect("the stream stalled: no progress for 120 s");
    }
    let source = source_thread.join().unwrap().expect("source");
    let sink = sink_thread.join().unwrap().expect("sink");
    (source, sink)
}

fn per_thousand(n: u64, packets: u64) -> f64 {
    n as f64 * 1000.0 / packets as f64
}

/// The test: 100,000 packets of random sizes, acknowledged out of
/// order, through rings and a buffer small enough to be full again and
/// again; every payload checked both ways, nothing lost or duplicated.
#[test]
fn hundred_thousand_random_packets_between_threads() {
    let traffic = Traffic {
        seed: seed(),
        count: PACKETS,
        max_len: 32 << 10,
    };
    let config = Config {
        entries: 16,
        block_size: 64,
    };
    const REGION: usize = 4096 + (64 << 10);
    let (source, sink) = run_threads::<{ bitmap_words(REGION, 64) }>(REGION, config, traffic, 12);
    let packets = u64::from(PACKETS) + 1;
    println!(
        "source {source:?}\nsink {sink:?}\nsignals per 1000 packets: {:.1}",
        per_thousand(source.signals + sink.signals, packets)
    );
    assert_eq!(source.packets, packets);
    assert_eq!(sink.packets, packets);
    assert_eq!(source.rejected + sink.rejected, 0);
    assert!(source.ring_full > 0, "the submit ring was never full");
    assert!(source.buffer_full > 0, "the buffer was never full");
    assert!(source.signals + sink.signals < 2 * packets);
}

/// The same traffic acknowledged in order, through larger rings.
#[test]
fn random_packets_in_order_through_large_rings() {
    let traffic = Traffic {
        seed: seed() ^ 1,
        count: 20_000,
        max_len: 64 << 10,
    };
    const REGION: usize = 1 << 20;
    let (source, sink) =
        run_threads::<{ bitmap_words(REGION, 64) }>(REGION, Config::DEFAULT, traffic, 0);
    assert_eq!(source.rejected + sink.rejected, 0);
    assert_eq!(sink.packets, 20_001);
}

/// Submits `packets` (data or end marker) through a real source, then runs
/// the verifying sink driver over them in the same thread.
fn sink_verdict(traffic: Traffic, packets: &[(u32, Option<usize>)]) -> Result<u32, Fault> {
    let [a, b] = test_regions::<2>(64 << 10);
    let mut source = Source::<_, 16>::new(a, SMALL, Scripted::default()).unwrap();
    let mut sink = Sink::new(b, SMALL, Scripted::default()).unwrap();
    for &(seq, corrupt) in packets {
        let mut p = if seq == END_TAG {
            let mut p = source.alloc(0).unwrap();
            p.op = traffic.count;
            p
        } else {
            let mut p = source.alloc(traffic.len(seq)).unwrap();
            let payload = source.payload_mut(&p).unwrap();
            traffic.fill(seq, payload);
            p.op = traffic::checksum(payload);
            if let Some(i) = corrupt {
                payload[i] ^= 0x10;
            }
            p
        };
        p.tag = seq;
        source.submit(p).unwrap();
    }
    source.flush().unwrap();
    let mut work = VerifySink::<2> {
        traffic,
        seen: Seen::new(),
    };
    traffic::run_sink::<_, 4>(&mut sink, &mut work, 2, &mut Rng::new(1))
}

#[test]
fn the_verifying_sink_catches_loss_duplication_and_corruption() {
    // Sizes in 0..=4096 for these seeds and sequence numbers (checked).
    let traffic = Traffic {
        seed: 3,
        count: 3,
        max_len: 4096,
    };
    assert!((0..3).all(|s| traffic.len(s) > 8));
    assert_eq!(
        sink_verdict(traffic, &[(0, None), (1, None), (2, None), (END_TAG, None)]),
        Ok(3)
    );
    assert_eq!(
        sink_verdict(traffic, &[(0, None), (2, None), (END_TAG, None)]),
        Err(Fault::Missing {
            first: 1,
            seen: 2,
            count: 3
        })
    );
    assert_eq!(
        sink_verdict(traffic, &[(0, None), (1, None), (1, None)]),
        Err(Fault::Duplicate { tag: 1 })
    );
    assert_eq!(
        sink_verdict(traffic, &[(0, None), (1, Some(5))]),
        Err(Fault::Corrupt { tag: 1 })
    );
    assert_eq!(
        sink_verdict(traffic, &[(7, None)]),
        Err(Fault::Unknown { tag: 7 })
    );
}

#[test]
fn the_verifying_source_catches_a_wrong_answer() {
    let traffic = Traffic {
        seed: 5,
        count: 2,
        max_len: 4096,
    };
    let mut work = Verify::<1> {
        traffic,
        acked: Seen::new(),
    };
    let len = traffic.len(1);
    let mut payload = std::vec![0; len as usize];
    traffic.fill(1, &mut payload);
    traffic::answer(&mut payload);
    let good = Packet {
        offset: 0,
        len,
        op: traffic::checksum(&payload),
        tag: 1,
    };
    let mut bad = payload.clone();
    bad[len as usize - 1] ^= 1;
    use traffic::Produce;
    assert_eq!(work.acked(&good, &bad), Err(Fault::Corrupt { tag: 1 }));
    let mut work = Verify::<1> {
        traffic,
        acked: Seen::new(),
    };
    let short = Packet {
        len: len - 1,
        ..good
    };
    assert_eq!(
        work.acked(&short, &payload[..len as usize - 1]),
        Err(Fault::Length {
            tag: 1,
            len: len - 1,
            expected: len
        })
    );
    let mut work = Verify::<1> {
        traffic,
        acked: Seen::new(),
    };
    assert_eq!(work.acked(&good, &payload), Ok(()));
    assert_eq!(
        work.acked(&good, &payload),
        Err(Fault::Duplicate { tag: 1 })
    );
}

#[test]
fn the_sink_driver_skips_descriptors_a_hostile_source_got_rejected() {
    let (_, mut sink, hand) = small_stream();
    let len = sink.layout().buffer_len() as u32;
    for i in 0..3 {
        hand.publish(Ring::Submit, i, [len, 8, 0, i]);
    }
    hand.publish(Ring::Submit, 3, [0, 0, 0, END_TAG]);
    let mut work = VerifySink::<1> {
        traffic: Traffic {
            seed: 0,
            count: 0,
            max_len: 4096,
        },
        seen: Seen::new(),
    };
    let mut rng = Rng::new(0);
    assert_eq!(
        traffic::run_sink::<_, 1>(&mut sink, &mut work, 0, &mut rng),
        Ok(0)
    );
    assert_eq!(sink.counters().rejected, 3);
}

#[test]
fn the_source_driver_skips_junk_acknowledgements() {
    let [a, hand] = test_regions::<2>(SMALL_REGION);
    let hand = Forger::new(hand, SMALL).unwrap();
    let len = hand.layout().buffer_len() as u32;
    let mut answered = false;
    // While the source sleeps, a hostile sink acknowledges junk, then the
    // end marker (the first allocation, at offset 0).
    let notify = Scripted {
        signals: Rc::default(),
        on_wait: Some(Box::new(move || {
            if !answered {
                hand.publish(Ring::Ack, 0, [len, 0, 0, 0]);
                hand.publish(Ring::Ack, 1, [0, 0, 0, END_TAG]);
                answered = true;
            }
        })),
    };
    let mut source = TestSource::new(a, SMALL, notify).unwrap();
    let mut work = traffic::Bulk {
        data: &[],
        count: 0,
    };
    assert_eq!(traffic::run_source(&mut source, &mut work), Ok(()));
    assert_eq!(source.counters().rejected, 1);
    assert_eq!(source.in_flight(), 0);
}
