//! test-stream-sink-server: the sink end of the packet-stream tests
//! (protocol: `protocols::stream`; the stream itself:
//! `ucore::packet_stream`). Start it as the server of the service endpoint
//! (`+serve`: it receives there with all rights and root does not wait for
//! it) with its own capabilities (`+own`: it maps the shared frame in its
//! own address space) and enough untyped memory for a 2 MiB frame:
//! `pecan.start=test-stream-sink-server@16+own+serve,test-stream-source+own`.
//!
//! It makes the shared frame and the two notifications and hands them to
//! `test-stream-source` in the replies to `SETUP` (capabilities travel only
//! in replies from a server). For each `VERIFY` or `BULK` request it resets
//! the stream's control words, replies, and serves one run as the sink
//! (`ucore::packet_stream::traffic::run_sink`), then receives again; its
//! counters wait for `STATS`. It prints nothing unless a run ends in an
//! error (`test-stream-sink-server: run ... ended: ...`) — a broken
//! stream ends only that run; it serves the next one — and never returns
//! (root deletes it when the source has finished).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use protocols::stream as proto;
use rt::abi::caddr::own;
use rt::abi::MsgInfo;
use rt::interfaces::child::{FIRST_FREE, SERVICE_ENDPOINT};
use rt::println;
use rt::shared::Served;
use rt::stream::traffic::{self, BulkSink, Fault, Rng, Seen, Traffic, VerifySink};
use rt::stream::{Config, Counters, Layout, Notifications, Region, Sink};
use rt::syscall::{self, Words, NO_WORDS};

rt::entry!(main);

/// Where the shared frame is mapped (2 MiB aligned, in a 1 GiB region of
/// its own).
const SHM_VA: u64 = 0x0000_0020_0000_0000;

/// The server's state between requests.
struct Server {
    shared: Option<Served>,
    /// The last run's counters, and whether it succeeded.
    last: Option<(Counters, bool)>,
    /// Private memory bulk packets are copied into.
    out: Vec<u8>,
}

/// A run the source asked for.
enum Run {
    Verify { traffic: Traffic, hold: usize },
    Bulk,
}

fn main(_: u64) -> i32 {
    let mut server = Server {
        shared: None,
        last: None,
        out: Vec::new(),
    };
    rt::server::serve(own(SERVICE_ENDPOINT), |label, words| {
        server.request(label, words)
    })
}

/// The error reply to request `label`.
fn refuse(label: u64) -> (MsgInfo, Words) {
    rt::server::refuse(proto::ERROR, label)
}

impl Server {
    /// Serves a request; returns the reply, or `None` when it was sent
    /// already.
    fn request(&mut self, label: u64, words: Words) -> Option<(MsgInfo, Words)> {
        let run = match label {
            proto::SETUP => return Some(self.setup(words[0])),
            proto::STATS => {
                return Some(match self.last {
                    Some((c, ok)) => rt::server::answer(
                        if ok { proto::OK } else { proto::ERROR },
                        [
                            c.packets,
                            c.signals,
                            c.waits,
                            c.ring_full | c.rejected << 32,
                        ],
                    ),
                    None => refuse(label),
                })
            }
            proto::VERIFY => verify_request(words),
            proto::BULK => bulk_request(words),
            _ => None,
        };
        match run {
            Some(run) => self.run(label, run),
            None => Some(refuse(label)),
        }
    }

    /// `SETUP`: makes the shared objects (once) and replies with the
    /// capability `which` (`rt::shared`).
    fn setup(&mut self, which: u64) -> (MsgInfo, Words) {
        // SAFETY: SHM_VA is a region of its own that nothing else of this
        // program uses; the frame is reached only through stream regions.
        match unsafe { Served::once(&mut self.shared, FIRST_FREE, SHM_VA) } {
            Ok(shared) => shared
                .reply(which, proto::OK)
                .map_or_else(|| refuse(proto::SETUP), |info| (info, NO_WORDS)),
            Err((what, e)) => {
                println!("test-stream-sink-server: SETUP failed: {what}: {e}");
                refuse(proto::SETUP)
            }
        }
    }

    /// `VERIFY` or `BULK`: resets the stream, replies, serves the run as
    /// the sink; `None`: answered already.
    fn run(&mut self, label: u64, run: Run) -> Option<(MsgInfo, Words)> {
        let Some(shared) = &self.shared else {
            return Some(refuse(label));
        };
        let notify = Notifications {
            peer: shared.client_notify,
            own: shared.server_notify,
        };
        let (bytes, config) = match run {
            Run::Verify { .. } => (proto::VERIFY_BYTES, proto::VERIFY_CONFIG),
            Run::Bulk => (proto::SHM_BYTES, proto::BULK_CONFIG),
        };
        let Some((region, layout)) = region(bytes, config) else {
            return Some(refuse(label));
        };
        if let Run::Verify { traffic, .. } = run {
            if traffic.max_len as usize > layout.buffer_len() {
                return Some(refuse(label));
            }
        }
        if self.out.is_empty() {
            self.out = vec![0; proto::MAX_BULK];
        }
        // The previous run's end is gone: zero the control words and drop
        // stale signals before the source can start.
        layout.reset(&region);
        if let Err(e) = notify.drain() {
            println!("test-stream-sink-server: Poll failed: {e}");
            return Some(refuse(label));
        }
        if let Err(e) = syscall::reply(MsgInfo::new(proto::OK, 0, 0).unwrap_or_default(), NO_WORDS)
        {
            println!("test-stream-sink-server: reply failed: {e}");
            return None;
        }
        let mut sink = match Sink::new(region, config, notify) {
            Ok(sink) => sink,
            Err(e) => {
                println!("test-stream-sink-server: no stream: {e}");
                self.last = None;
                return None;
            }
        };
        let result = match run {
            Run::Verify { traffic, hold } => verify(&mut sink, traffic, hold),
            Run::Bulk => {
                let mut work = BulkSink {
                    out: &mut self.out,
                    bytes: 0,
                };
                traffic::run_sink::<_, 1>(&mut sink, &mut work, 0, &mut Rng::new(0)).map(drop)
            }
        };
        if let Err(fault) = result {
            println!("test-stream-sink-server: run {label:#x} ended: {fault}");
        }
        self.last = Some((sink.counters(), result.is_ok()));
        None
    }
}

/// `VERIFY`'s words: `[count, seed, max_len, hold]` within the limits of
/// `protocols::stream`.
fn verify_request([count, seed, max_len, hold]: Words) -> Option<Run> {
    let count = u32::try_from(count).ok()?;
    let max_len = u32::try_from(max_len).ok()?;
    let hold = usize::try_from(hold).ok()?;
    let fits = count <= proto::MAX_PACKETS && hold <= proto::MAX_HOLD;
    fits.then_some(Run::Verify {
        traffic: Traffic {
            seed,
            count,
            max_len,
        },
        hold,
    })
}

/// `BULK`'s words: `[size]`, at most `MAX_BULK`.
fn bulk_request([size, ..]: Words) -> Option<Run> {
    (1..=proto::MAX_BULK as u64)
        .contains(&size)
        .then_some(Run::Bulk)
}

/// The verifying sink: checks and answers every packet, holds up to
/// `hold` and acknowledges them out of order.
fn verify(sink: &mut Sink<Notifications>, traffic: Traffic, hold: usize) -> Result<(), Fault> {
    let mut work = Box::new(VerifySink::<{ proto::SEEN_WORDS }> {
        traffic,
        seen: Seen::new(),
    });
    let mut rng = Rng::new(traffic.seed ^ 0x5eed_0fac);
    traffic::run_sink::<_, { proto::MAX_HOLD }>(sink, &mut *work, hold, &mut rng)?;
    Ok(())
}

/// The first `bytes` of the shared frame as a stream region, and its
/// layout under `config`.
fn region(bytes: usize, config: Config) -> Option<(Region, Layout)> {
    let layout = Layout::new(bytes, config).ok()?;
    // SAFETY: `run` is only reached once SETUP has mapped the 2 MiB frame
    // at SHM_VA, where it stays for the rest of the program, and `bytes`
    // is at most its size. Only the stream end built on this region
    // touches these bytes, and the end of the previous run was dropped
    // before this one is made. The source maps the same frame: that is
    // the peer the stream is built for.
    let region = unsafe { Region::new(SHM_VA as *mut u8, bytes) }.ok()?;
    Some((region, layout))
}
