//! test-stream-source: the source end of the packet-stream tests, with
//! `test-stream-sink-server` as the sink in another address space
//! (protocol: `protocols::stream`; the stream: `ucore::packet_stream`).
//!
//! ```text
//! pecan.start=test-stream-sink-server@16+own+serve,test-stream-source[:SEED][@MIB]+own
//! ```
//!
//! It asks the sink for the shared 2 MiB frame and the two notifications
//! (`SETUP`, the capabilities arrive in the replies) and maps the frame.
//! Then:
//!
//! 0. **A hostile source**: it writes five malformed descriptors (each
//!    naming bytes outside the buffer) and then a well-formed end marker
//!    straight into the submit ring; the sink must reject the five one by
//!    one and acknowledge the marker (its counters say so). Then it stores
//!    an impossible submit index: the sink must end that run with an error
//!    (printing `test-stream-sink-server: run ... ended: ...`) and serve
//!    the next runs as if nothing happened.
//! 1. **Verification**: [`PACKETS`] packets of random sizes (0 to
//!    [`VERIFY_MAX_LEN`] bytes, seeded by `SEED` — 0 or absent means
//!    [`DEFAULT_SEED`] — and printed first for replay) through 64-entry
//!    rings and a 252 KiB buffer, so that both the submit ring and the
//!    buffer are full again and again; the sink holds up to
//!    [`VERIFY_HOLD`] packets and acknowledges them in random order. The
//!    sink checks each packet's length, checksum and content and that none
//!    is lost or comes twice, and answers it; this side checks every
//!    answer (`ucore::packet_stream::traffic`). The line reports how often
//!    rings and buffer were full and the notifications per 1,000 packets.
//!    A run that never filled the submit ring or the buffer fails.
//! 2. **Throughput** for 64 B, 1 KiB and 64 KiB packets over the whole
//!    frame (`protocols::stream::BULK_CONFIG`: 256-entry rings, a ~2 MiB
//!    buffer of 4 KiB blocks): each packet copied in from
//!    private memory here and out into private memory by the sink (the
//!    runtime's `memcpy`, two copies per byte like a pipe's write and read,
//!    as `bench`'s `bulk-shm`), acknowledged in order. [`SAMPLES`] samples
//!    after one unrecorded, each a run of about [`SAMPLE_BYTES`], timed
//!    here from the first allocation to the last acknowledgement (with one
//!    CPU the sink's work falls inside). One `BENCH` line each
//!    (`packet-stream-64`, `packet-stream-1k`, `packet-stream-64k`, in the
//!    benchmark lab's format, bytes/tick × 1000; under `--icount` a tick is
//!    an instruction) and a summary line with the notifications per 1,000
//!    packets, which must stay below [`MAX_SIGNALS_PER_1000`] (batching).
//!
//! Output, then `test-stream-source: done (N failed)`; the exit code is
//! the number of failed parts.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec;
use core::fmt;

use protocols::stream as proto;
use rt::abi::caddr::own;
use rt::abi::MsgInfo;
use rt::interfaces::child::{FIRST_FREE, SERVICE_ENDPOINT};
use rt::println;
use rt::shared::ReceiveError;
use rt::stream::hostile::{Control, Forger};
use rt::stream::traffic::{self, Bulk, Fault, Seen, Traffic, Verify, END_TAG};
use rt::stream::{
    bitmap_words, Config, Counters, LayoutError, Notifications, Region, Ring, Source,
};
use rt::syscall::{self, Words};

rt::entry!(main);

/// Where the shared frame is mapped (as in the sink).
const SHM_VA: u64 = 0x0000_0020_0000_0000;
/// The seed when `ARG` is 0.
pub const DEFAULT_SEED: u64 = 0x5eed_0000_cafe;
/// Packets of the verification run.
pub const PACKETS: u32 = proto::MAX_PACKETS;
/// Largest packet of the verification run.
pub const VERIFY_MAX_LEN: u32 = 64 << 10;
/// Packets the sink holds before acknowledging (in random order).
pub const VERIFY_HOLD: u64 = 32;
/// Throughput samples per packet size (after one unrecorded).
pub const SAMPLES: usize = 10;
/// Bytes per throughput sample (at least 64 packets).
pub const SAMPLE_BYTES: usize = 2 << 20;
/// Notifications per 1,000 packets a throughput run may cost.
pub const MAX_SIGNALS_PER_1000: u64 = 100;

/// Bitmap words for a buffer in the whole frame: covers both runs.
const WORDS: usize = bitmap_words(proto::SHM_BYTES, 64);
const _: () = assert!(proto::BULK_CONFIG.block_size >= 64);
const _: () = assert!(proto::VERIFY_CONFIG.block_size == 64);

type StreamSource = Source<Notifications, WORDS>;

/// Why a part failed.
#[derive(Debug)]
enum Failure {
    Syscall(&'static str, rt::abi::Error),
    /// Getting the frame and notifications failed.
    Setup(ReceiveError),
    /// The sink answered `request` with `label`.
    Server {
        request: u64,
        label: u64,
    },
    Layout(LayoutError),
    Fault(Fault),
    /// The sink reported a failed run (it printed why).
    Sink,
    /// The run ended in a state it must not: `what`.
    Check(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Syscall(what, e) => write!(f, "{what} failed: {e}"),
            Failure::Setup(e) => write!(f, "{e}"),
            Failure::Server { request, label } => write!(
                f,
                "test-stream-sink-server answered {request:#x} with {label:#x}"
            ),
            Failure::Layout(e) => write!(f, "no stream: {e}"),
            Failure::Fault(e) => write!(f, "{e}"),
            Failure::Sink => f.write_str("the sink's run failed"),
            Failure::Check(what) => f.write_str(what),
        }
    }
}

fn failed(what: &'static str) -> impl Fn(rt::abi::Error) -> Failure {
    move |e| Failure::Syscall(what, e)
}

fn main(arg: u64) -> i32 {
    let seed = if arg == 0 { DEFAULT_SEED } else { arg };
    let notify = match setup() {
        Ok(notify) => notify,
        Err(e) => {
            println!("test-stream-source: SETUP FAILED: {e}");
            return 1;
        }
    };
    let mut failures = 0;
    if let Err(e) = hostile(notify) {
        println!("test-stream-source: hostile FAILED: {e}");
        failures += 1;
    }
    if let Err(e) = verify(notify, seed) {
        println!("test-stream-source: verify FAILED: {e}");
        failures += 1;
    }
    let overhead = bench::timestamp_overhead();
    for (size, name) in [
        (64, "packet-stream-64"),
        (1 << 10, "packet-stream-1k"),
        (64 << 10, "packet-stream-64k"),
    ] {
        if let Err(e) = throughput(notify, size, name, overhead) {
            println!("test-stream-source: {name} FAILED: {e}");
            failures += 1;
        }
    }
    println!("test-stream-source: done ({failures} failed)");
    failures
}

/// Gets the frame and the notifications from the sink (`rt::shared`),
/// maps the frame.
fn setup() -> Result<Notifications, Failure> {
    let slots = [0, 1, 2].map(|i| own(FIRST_FREE + i));
    // SAFETY: SHM_VA is a region of its own that nothing else of this
    // program uses; the frame is reached only through stream regions.
    let received = unsafe {
        rt::shared::receive(
            own(SERVICE_ENDPOINT),
            proto::SETUP,
            proto::OK,
            slots,
            SHM_VA,
        )
    };
    let received = received.map_err(Failure::Setup)?;
    Ok(Notifications {
        peer: received.server_notify,
        own: received.client_notify,
    })
}

/// Calls the sink with `label` and `words`; its reply's words, or a
/// failure unless the label is `OK`.
fn call(label: u64, words: Words) -> Result<Words, Failure> {
    let info = MsgInfo::new(label, 4, 0).unwrap_or_default();
    let (reply, words) =
        syscall::call(own(SERVICE_ENDPOINT), info, words).map_err(failed("Call"))?;
    if reply.label() != proto::OK {
        return Err(Failure::Server {
            request: label,
            label: reply.label(),
        });
    }
    Ok(words)
}

/// Starts a run: the sink resets the stream and waits for packets; this
/// side's end over the first `bytes` of the frame.
fn start(
    label: u64,
    words: Words,
    bytes: usize,
    config: Config,
    notify: Notifications,
) -> Result<Box<StreamSource>, Failure> {
    call(label, words)?;
    notify.drain().map_err(failed("Poll"))?;
    let source = Source::new(shared(bytes)?, config, notify).map_err(Failure::Layout)?;
    Ok(Box::new(source))
}

/// The first `bytes` of the shared frame, for one stream end (or hand) at
/// a time.
fn shared(bytes: usize) -> Result<Region, Failure> {
    // SAFETY: `setup` mapped the 2 MiB frame at SHM_VA for the rest of the
    // program and every caller asks for at most its size; only the stream
    // end (or hostile hand) built on this region touches these bytes here,
    // the previous one being dropped before the next run starts; the sink
    // maps the same frame: the peer the stream is built for.
    unsafe { Region::new(SHM_VA as *mut u8, bytes) }.map_err(Failure::Layout)
}

/// The sink's counters of the last run (`STATS`); `Failure::Sink` if it
/// ended in an error.
fn sink_counters() -> Result<Counters, Failure> {
    match call(proto::STATS, [0; 4]) {
        Ok([packets, signals, waits, full_and_rejected]) => Ok(Counters {
            packets,
            signals,
            waits,
            ring_full: full_and_rejected & 0xffff_ffff,
            rejected: full_and_rejected >> 32,
            ..Counters::default()
        }),
        Err(Failure::Server { label, .. }) if label == proto::ERROR => Err(Failure::Sink),
        Err(e) => Err(e),
    }
}

/// `n` per 1,000 of `of`, with one decimal (no floating point here).
struct PerThousand(u64, u64);

impl fmt::Display for PerThousand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tenths = self.0 * 10_000 / self.1.max(1);
        write!(f, "{}.{}", tenths / 10, tenths % 10)
    }
}

/// Descriptors the hostile source submits: each names bytes outside a
/// buffer of `len` bytes.
fn junk(len: u32) -> [[u32; 4]; 5] {
    [
        [len, 1, 0, 0],
        [0, len + 1, 0, 0],
        [len - 8, 9, 0, 0],
        [u32::MAX, u32::MAX, 0, 0],
        [u32::MAX - 3, 8, 0, 0],
    ]
}

/// The hostile source (module doc, 0).
fn hostile(notify: Notifications) -> Result<(), Failure> {
    let config = proto::VERIFY_CONFIG;
    // Only the end marker is expected (a run of 0 packets).
    let words = [0, 0, 4096, 0];
    call(proto::VERIFY, words)?;
    notify.drain().map_err(failed("Poll"))?;
    let hand = Forger::new(shared(proto::VERIFY_BYTES)?, config).map_err(Failure::Layout)?;
    let junk = junk(hand.layout().buffer_len() as u32);
    for (i, words) in junk.iter().enumerate() {
        hand.descriptor(Ring::Submit, i as u32, *words);
    }
    hand.publish(Ring::Submit, junk.len() as u32, [0, 0, 0, END_TAG]);
    syscall::signal(notify.peer).map_err(failed("Signal"))?;
    // STATS waits until the sink has finished the run.
    let sink = sink_counters()?;
    let sent = junk.len() as u64;
    if sink.rejected != sent || sink.packets != sent + 1 {
        return Err(Failure::Check(alloc::format!(
            "the sink took {} descriptors and rejected {} of the {sent} malformed ones",
            sink.packets,
            sink.rejected
        )));
    }
    // An impossible index: that run ends, the sink goes on serving.
    call(proto::VERIFY, words)?;
    let hand = Forger::new(shared(proto::VERIFY_BYTES)?, config).map_err(Failure::Layout)?;
    let index = config.entries + 5;
    hand.control(Ring::Submit, Control::Tail, index);
    syscall::signal(notify.peer).map_err(failed("Signal"))?;
    match sink_counters() {
        Err(Failure::Sink) => {}
        Ok(_) => {
            return Err(Failure::Check(alloc::format!(
                "the sink accepted a submit index of {index} for a ring of {}",
                config.entries
            )))
        }
        Err(e) => return Err(e),
    }
    println!(
        "test-stream-source: hostile: {sent} malformed descriptors rejected one by one, the end \
         marker after them acknowledged; an impossible submit index ({index}) ended that run \
         alone"
    );
    Ok(())
}

/// The verification run (module doc, 1).
fn verify(notify: Notifications, seed: u64) -> Result<(), Failure> {
    let traffic = Traffic {
        seed,
        count: PACKETS,
        max_len: VERIFY_MAX_LEN,
    };
    let config = proto::VERIFY_CONFIG;
    let words = [
        u64::from(PACKETS),
        seed,
        u64::from(VERIFY_MAX_LEN),
        VERIFY_HOLD,
    ];
    let mut source = start(proto::VERIFY, words, proto::VERIFY_BYTES, config, notify)?;
    println!(
        "test-stream-source: seed {seed:#x}: {PACKETS} packets of 0..={VERIFY_MAX_LEN} bytes, \
         rings of {}, a {} KiB buffer, up to {VERIFY_HOLD} held by the sink and acknowledged in \
         random order",
        config.entries,
        source.layout().buffer_len() >> 10
    );
    let mut work = Box::new(Verify::<{ proto::SEEN_WORDS }> {
        traffic,
        acked: Seen::new(),
    });
    traffic::run_source(&mut *source, &mut *work).map_err(Failure::Fault)?;
    let sink = sink_counters()?;
    let ours = source.counters();
    let bytes: u64 = (0..PACKETS).map(|s| u64::from(traffic.len(s))).sum();
    let all = u64::from(PACKETS) + 1;
    if work.acked.count() != PACKETS || sink.packets != all || ours.packets != all {
        return Err(Failure::Check(alloc::format!(
            "{} acknowledged, {} submitted, {} taken by the sink, of {all}",
            work.acked.count(),
            ours.packets,
            sink.packets
        )));
    }
    if source.in_flight() != 0 || source.free_bytes() != source.layout().buffer_len() {
        return Err(Failure::Check(alloc::format!(
            "{} packets still in flight, {} of {} bytes free",
            source.in_flight(),
            source.free_bytes(),
            source.layout().buffer_len()
        )));
    }
    let signals = ours.signals + sink.signals;
    println!(
        "test-stream-source: verify: {PACKETS} packets ({bytes} bytes) arrived once each and \
         intact, answers intact; submit ring full {} times, buffer full {} times, \
         acknowledgement ring full {} times, {} rejected; {signals} notifications (source {}, \
         sink {}) = {} per 1000 packets",
        ours.ring_full,
        ours.buffer_full,
        sink.ring_full,
        ours.rejected,
        ours.signals,
        sink.signals,
        PerThousand(signals, all)
    );
    if ours.ring_full == 0 || ours.buffer_full == 0 {
        return Err(Failure::Check(
            "the submit ring or the buffer was never full".into(),
        ));
    }
    Ok(())
}

/// The throughput of `size`-byte packets (module doc, 2).
fn throughput(
    notify: Notifications,
    size: usize,
    name: &str,
    overhead: u64,
) -> Result<(), Failure> {
    let count = (SAMPLE_BYTES / size).max(64);
    let data = vec![0x5a; size];
    let mut samples = [0; SAMPLES];
    let (mut signals, mut sink_signals, mut packets) = (0, 0, 0);
    for i in 0..=SAMPLES {
        let words = [size as u64, 0, 0, 0];
        let mut source = start(
            proto::BULK,
            words,
            proto::SHM_BYTES,
            proto::BULK_CONFIG,
            notify,
        )?;
        let mut work = Bulk {
            data: &data,
            count: count as u32,
        };
        let t0 = bench::now();
        traffic::run_source(&mut *source, &mut work).map_err(Failure::Fault)?;
        let t1 = bench::now();
        let sink = sink_counters()?;
        if i == 0 {
            continue;
        }
        samples[i - 1] = bench::throughput(
            (count * size) as u64,
            t1.wrapping_sub(t0).saturating_sub(overhead),
        );
        signals += source.counters().signals;
        sink_signals += sink.signals;
        packets += source.counters().packets;
    }
    let config = proto::BULK_CONFIG;
    let what = alloc::format!(
        "packet stream to test-stream-sink-server: {size}-byte packets through {}-entry rings and \
         a 2 MiB shared buffer of {}-byte blocks, copied in and out (runtime memcpy), \
         acknowledged in order, {count} packets per sample, bytes/tick",
        config.entries,
        config.block_size
    );
    let mut line = String::new();
    let mut scratch = [0; SAMPLES];
    bench::report(
        &mut line,
        name,
        &what,
        bench::Unit::BytesPerTick,
        &samples,
        &mut scratch,
    )
    .map_err(|_| Failure::Check("the report line could not be formatted".into()))?;
    syscall::debug_write(line.as_bytes()).map_err(failed("DebugWrite"))?;
    let stats = bench::stats(&mut scratch);
    let per_thousand = (signals + sink_signals) * 1000 / packets.max(1);
    println!(
        "test-stream-source: {size} B packets: median {} bytes/tick (min {}, max {}; {SAMPLES} \
         samples of {count} packets); {} notifications per 1000 packets (source {}, sink {})",
        Milli(stats.median),
        Milli(stats.min),
        Milli(stats.max),
        PerThousand(signals + sink_signals, packets),
        PerThousand(signals, packets),
        PerThousand(sink_signals, packets),
    );
    if per_thousand >= MAX_SIGNALS_PER_1000 {
        return Err(Failure::Check(alloc::format!(
            "{per_thousand} notifications per 1000 packets: batching does not work"
        )));
    }
    Ok(())
}

/// A value scaled by `bench::THROUGHPUT_SCALE` (1000), printed as a
/// decimal.
struct Milli(u64);

impl fmt::Display for Milli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}
