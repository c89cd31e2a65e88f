//! pingclient: calls the `pinger` (protocol `protocols::ping`) over the
//! service endpoint until the fuzzer is done, checking every answer —
//! proof that a server keeps serving correctly while a fuzzer hammers the
//! kernel and the server itself.
//!
//! Each round calls `PING [n]` with a fresh `n` and checks the reply
//! exactly: label `PONG`, word 0 = `n + 1`, word 1 = this client's badge,
//! then yields. The badge is the argument word if it is non-zero (root
//! badges a child's service capability with the child's index);
//! with argument 0 the first reply's badge is taken, it must be non-zero,
//! and every later reply must carry the same one.
//!
//! Output: `pingclient: N pings answered` every 100 pings; at the end
//! `pingclient: done, N pings answered, fuzzer reported done` and exit
//! code 0, once the pinger reports the fuzzer done and at least
//! [`MIN_PINGS`] pings were made. Any wrong answer or failed call prints
//! `pingclient: FAILED ...` with what was expected and what came, and ends
//! the component with exit code 1.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use protocols::ping;
use rt::abi::{caddr, MsgInfo};
use rt::interfaces::child::SERVICE_ENDPOINT;
use rt::println;
use rt::syscall;

rt::entry!(main);

/// Pings made at least, even when the fuzzer is done before.
const MIN_PINGS: u64 = 50;
/// Progress is printed every this many pings.
const PROGRESS_EVERY: u64 = 100;

fn main(arg: u64) -> i32 {
    let endpoint = caddr::own(SERVICE_ENDPOINT);
    let request = MsgInfo::new(ping::PING, 1, 0).expect("valid message info");
    let mut badge = (arg != 0).then_some(arg);
    println!(
        "pingclient: calling the pinger (badge {})",
        badge.unwrap_or_default()
    );
    let mut pings = 0u64;
    // Values of n that exercise the carry: start just below a power of two.
    let mut n = 0xffff_fff0u64;
    loop {
        let (info, words) = match syscall::call(endpoint, request, [n, 0, 0, 0]) {
            Ok(reply) => reply,
            Err(e) => {
                println!("pingclient: FAILED: ping {pings} (n={n:#x}): call failed: {e:?}");
                return 1;
            }
        };
        if info.label() != ping::PONG || info.length() < 3 {
            println!(
                "pingclient: FAILED: ping {pings} (n={n:#x}): expected PONG with 3+ words, got label {:#x} length {}",
                info.label(),
                info.length()
            );
            return 1;
        }
        if words[ping::PONG_N] != n.wrapping_add(1) {
            println!(
                "pingclient: FAILED: ping {pings}: expected n+1 = {:#x}, got {:#x}",
                n.wrapping_add(1),
                words[ping::PONG_N]
            );
            return 1;
        }
        let got_badge = words[ping::PONG_BADGE];
        match badge {
            Some(b) if b != got_badge => {
                println!("pingclient: FAILED: ping {pings}: expected badge {b}, got {got_badge}");
                return 1;
            }
            Some(_) => {}
            None if got_badge == 0 => {
                println!("pingclient: FAILED: ping {pings}: the pinger saw badge 0 (root badges children's service capabilities)");
                return 1;
            }
            None => badge = Some(got_badge),
        }
        pings += 1;
        if pings.is_multiple_of(PROGRESS_EVERY) {
            println!("pingclient: {pings} pings answered");
        }
        if words[ping::PONG_FUZZER_DONE] == 1 && pings >= MIN_PINGS {
            println!("pingclient: done, {pings} pings answered, fuzzer reported done");
            return 0;
        }
        n = n.wrapping_add(0x1_0001);
        if let Err(e) = syscall::yield_now() {
            println!("pingclient: FAILED: yield failed: {e:?}");
            return 1;
        }
    }
}
