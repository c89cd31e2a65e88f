//! ipcbench-server: the receiving side of the inter-address-space IPC
//! benchmark (see the `ipcbench` component for the method). A server in
//! root's sense (its name ends in `-server`): it receives on the service
//! endpoint with all rights.
//!
//! Protocol (labels):
//! - [`TIMED`]: word 3 is the caller's timestamp taken right before its
//!   `Call`; the server takes its own right after `ReplyRecv` returns,
//!   records the difference (minus nothing: the caller subtracts the
//!   timestamp overhead when it asks for the statistics), and replies with
//!   its own timestamp, taken right before the reply, in word 3.
//! - [`RESULTS`]: replies with min (word 0) and median (word 1) of the
//!   recorded call times, skipping the first word-2 samples (warm-up), and
//!   forgets them.
//! - anything else: an empty reply.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec::Vec;

use rt::abi::{child, MsgInfo};
use rt::syscall::{self, rdtsc};

rt::entry!(main);

pub const TIMED: u64 = 1;
pub const RESULTS: u64 = 2;

fn main(_: u64) -> i32 {
    let ep = u64::from(child::SERVICE_ENDPOINT);
    let mut samples: Vec<u64> = Vec::with_capacity(4096);
    let mut reply = (MsgInfo::default(), [0u64; 4]);
    let mut first = true;
    loop {
        let received = if first {
            first = false;
            syscall::recv(ep)
        } else {
            syscall::reply_recv(ep, reply.0, reply.1)
        };
        let arrived = rdtsc();
        reply = match received {
            Ok((_, info, w)) if info.label() == TIMED => {
                if samples.len() < samples.capacity() {
                    samples.push(arrived.wrapping_sub(w[3]));
                }
                (MsgInfo::default(), [0, 0, 0, rdtsc()])
            }
            Ok((_, info, w)) if info.label() == RESULTS => {
                let skip = (w[2] as usize).min(samples.len());
                let mut kept: Vec<u64> = samples.drain(..).skip(skip).collect();
                kept.sort_unstable();
                let min = kept.first().copied().unwrap_or(0);
                let median = kept.get(kept.len() / 2).copied().unwrap_or(0);
                (MsgInfo::default(), [min, median, kept.len() as u64, 0])
            }
            _ => (MsgInfo::default(), [0; 4]),
        };
    }
}
