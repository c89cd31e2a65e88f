//! ipcbench: one-way IPC between two address spaces, measured the way
//! sel4bench does: the sender takes a timestamp right before its system
//! call, the receiver right after its own returns; the difference is the
//! one-way cost. Under QEMU `-icount shift=0` a tick is one instruction.
//!
//! Run with `pecan.start=ipcbench-server,ipcbench`. The client calls the
//! server [`SAMPLES`] + [`WARM_UP`] times with 0 message words (the
//! timestamp rides in word 3, a register, so the message is register-only
//! like a 0-word one); the server records call arrival times, the client
//! records reply arrival times; the cost of `rdtsc` itself (the minimum of
//! back-to-back pairs) is subtracted. Prints
//! `ipcbench: one-way inter-address-space call min=N median=N, reply
//! min=N median=N ticks (0 words, N samples)` and exits 0.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec::Vec;

use rt::abi::{child, MsgInfo};
use rt::println;
use rt::syscall::{self, rdtsc};

rt::entry!(main);

const TIMED: u64 = 1;
const RESULTS: u64 = 2;
const WARM_UP: usize = 100;
const SAMPLES: usize = 1000;

fn main(_: u64) -> i32 {
    let ep = u64::from(child::SERVICE_ENDPOINT);
    let mut overhead = u64::MAX;
    for _ in 0..SAMPLES {
        let t0 = rdtsc();
        let t1 = rdtsc();
        overhead = overhead.min(t1.wrapping_sub(t0));
    }
    let timed = MsgInfo::new(TIMED, 0, 0).unwrap_or_default();
    let mut replies = Vec::with_capacity(SAMPLES);
    for i in 0..WARM_UP + SAMPLES {
        let reply = syscall::call(ep, timed, [0, 0, 0, rdtsc()]);
        let back = rdtsc();
        match reply {
            Ok((_, w)) if i >= WARM_UP => {
                replies.push(back.wrapping_sub(w[3]).saturating_sub(overhead))
            }
            Ok(_) => {}
            Err(e) => {
                println!("ipcbench: call FAILED ({e:?})");
                return 1;
            }
        }
    }
    let results = MsgInfo::new(RESULTS, 0, 0).unwrap_or_default();
    let Ok((_, w)) = syscall::call(ep, results, [0, 0, WARM_UP as u64, 0]) else {
        println!("ipcbench: results FAILED");
        return 1;
    };
    replies.sort_unstable();
    println!(
        "ipcbench: one-way inter-address-space call min={} median={}, reply min={} median={} ticks (0 words, {} samples)",
        w[0].saturating_sub(overhead),
        w[1].saturating_sub(overhead),
        replies[0],
        replies[SAMPLES / 2],
        SAMPLES
    );
    0
}
