//! bench-server: the partner of the `bench` component in another address
//! space (protocol: `bench_protocol`). Start it as a server that holds its
//! own capabilities, with enough untyped memory for a 2 MiB frame:
//! `pecan.start=bench-server@16+own+serve,...` — `+serve`: it receives on
//! the service endpoint with all rights, and root does not wait for it;
//! `+own`: it holds its own address space capability to map the shared
//! frame (`interfaces::child::OwnCaps`).
//!
//! For the one-way IPC benchmark it records the time right after its
//! receive returns, in the frame it shares with `bench`, and answers with
//! an empty message, so calls of up to 4 words and the replies take the
//! kernel's fast path. For the bulk benchmark it copies each chunk out of
//! the shared frame into private memory (like a pipe's reader) between
//! two notifications. It prints nothing unless something goes wrong
//! (`bench-server: ...`): a line of its own could land in the middle of a
//! long `BENCH` line of `bench`, which takes several `DebugWrite` calls. It
//! never returns (root deletes it when `bench` has finished).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;

use bench::now;
use bench_protocol as proto;
use rt::abi::caddr::own;
use rt::abi::fault::KERNEL_LABELS;
use rt::abi::MsgInfo;
use rt::interfaces::child::{FIRST_FREE, SERVICE_ENDPOINT};
use rt::println;
use rt::shared::Served;
use rt::syscall::{self, Words, NO_WORDS};

rt::entry!(main);

/// Where the shared frame is mapped (2 MiB aligned, in a 1 GiB region of
/// its own, far from the image and the stack).
const SHM_VA: u64 = 0x0000_0020_0000_0000;

/// The server's state between requests.
struct Server {
    shared: Option<Served>,
    /// Arrival times recorded since `TIMED_START`.
    arrivals: usize,
    /// How many fit: 0 until `SETUP` mapped the shared frame.
    capacity: usize,
    /// Private memory the bulk chunks are copied into.
    sink: Vec<u8>,
}

fn main(_: u64) -> i32 {
    let ep = own(SERVICE_ENDPOINT);
    let mut server = Server {
        shared: None,
        arrivals: 0,
        capacity: 0,
        sink: Vec::new(),
    };
    let mut reply: Option<(MsgInfo, Words)> = None;
    loop {
        let received = match reply.take() {
            Some((info, words)) => syscall::reply_recv(ep, info, words),
            None => syscall::recv(ep),
        };
        let arrived = now();
        let Ok((_, info, words)) = received else {
            continue;
        };
        let label = info.label();
        if label == proto::TIMED {
            if server.arrivals < server.capacity {
                let slot = (SHM_VA as usize + proto::SHM_ARRIVALS) as *mut u64;
                // SAFETY: `capacity` is non-zero only once SETUP has mapped
                // the shared frame at SHM_VA, and then MAX_ARRIVALS: the
                // write stays inside the arrival area. Volatile: `bench`
                // reads it from its own mapping.
                unsafe { slot.add(server.arrivals).write_volatile(arrived) };
                server.arrivals += 1;
            }
            reply = Some((MsgInfo::default(), NO_WORDS));
            continue;
        }
        if label >= KERNEL_LABELS {
            // Never answer kernel messages (see `protocols::ping`).
            continue;
        }
        reply = server.request(label, words);
    }
}

/// The error reply to request `label`.
fn refuse(label: u64) -> (MsgInfo, Words) {
    rt::server::refuse(proto::ERROR, label)
}

impl Server {
    /// Serves a request other than `TIMED`; returns the reply, or `None`
    /// when it was sent already.
    fn request(&mut self, label: u64, words: Words) -> Option<(MsgInfo, Words)> {
        Some(match label {
            proto::SETUP => self.setup(words[0]),
            proto::TIMED_START if self.shared.is_some() => {
                self.arrivals = 0;
                rt::server::answer(proto::OK, NO_WORDS)
            }
            proto::TIMED_END => rt::server::answer(proto::OK, [self.arrivals as u64, 0, 0, 0]),
            proto::BULK => return self.bulk(words[0], words[1] as usize),
            _ => refuse(label),
        })
    }

    /// `SETUP`: makes the shared objects (once) and replies with the
    /// capability `which`.
    fn setup(&mut self, which: u64) -> (MsgInfo, Words) {
        // SAFETY: SHM_VA is a region of its own that nothing else of this
        // program uses; the frame is reached only through raw pointers into
        // it.
        match unsafe { Served::once(&mut self.shared, FIRST_FREE, SHM_VA) } {
            Ok(shared) => {
                self.capacity = proto::MAX_ARRIVALS;
                shared
                    .reply(which, proto::OK)
                    .map_or_else(|| refuse(proto::SETUP), |info| (info, NO_WORDS))
            }
            Err((what, e)) => {
                println!("bench-server: SETUP failed: {what}: {e}");
                refuse(proto::SETUP)
            }
        }
    }

    /// `BULK`: replies, then moves `rounds` chunks of `bytes` (see the
    /// protocol); `None`: answered already.
    fn bulk(&mut self, rounds: u64, bytes: usize) -> Option<(MsgInfo, Words)> {
        let Some(shared) = &self.shared else {
            return Some(refuse(proto::BULK));
        };
        if bytes == 0 || bytes > proto::MAX_CHUNK || !proto::SHM_DATA_BYTES.is_multiple_of(bytes) {
            return Some(refuse(proto::BULK));
        }
        let (wait, signal) = (shared.server_notify, shared.client_notify);
        if self.sink.len() < bytes {
            self.sink = vec![0; proto::MAX_CHUNK];
        }
        if let Err(e) = syscall::reply(MsgInfo::new(proto::OK, 0, 0).unwrap_or_default(), NO_WORDS)
        {
            println!("bench-server: BULK reply failed: {e}");
            return None;
        }
        let data = (SHM_VA as usize + proto::SHM_DATA) as *const u8;
        let slots = proto::SHM_DATA_BYTES / bytes;
        for round in 0..rounds {
            if let Err(e) = syscall::wait(wait) {
                println!("bench-server: BULK wait failed in round {round}: {e}");
                break;
            }
            let slot = (round % slots as u64) as usize;
            // SAFETY: the data area lies in the shared frame mapped at
            // SHM_VA (SETUP happened); slot * bytes + bytes stays inside
            // it. `bench` wrote this slot before its signal and does not
            // touch it again before this side's signal below.
            let chunk = unsafe { core::slice::from_raw_parts(data.add(slot * bytes), bytes) };
            bench::kernels::copy_runtime(&mut self.sink[..bytes], chunk);
            if let Err(e) = syscall::signal(signal) {
                println!("bench-server: BULK signal failed in round {round}: {e}");
                break;
            }
        }
        None
    }
}
