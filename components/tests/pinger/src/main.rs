//! pinger: the server of the ping protocol (`protocols::ping`), and the
//! `fuzzer`'s favourite target.
//!
//! Start it as the server of the service endpoint (`pecan.start=pinger+serve`):
//! it holds the endpoint (`interfaces::child::SERVICE_ENDPOINT`) with all
//! rights and every other child calls it there, with its child index as
//! the badge; root does not wait for it.
//! The loop is one `ReplyRecv` per message:
//!
//! - `PING [n]` → `PONG [n + 1, caller's badge, fuzzer done, pings answered]`;
//! - `FUZZER_DONE [magic0, magic1]` → `DONE_ACK []`, and from then on PONGs
//!   carry `fuzzer done = 1` (how `pingclient` knows when to stop);
//! - fault, exception and exit messages (labels at or above
//!   `ping::KERNEL_LABELS`; they come when a thread the fuzzer made uses
//!   this endpoint as its fault endpoint) are dropped without a reply, so
//!   the faulting thread stays stopped instead of faulting again at once;
//! - anything else → `ERROR [label]`. A `Send` has nobody to reply to, and
//!   `ReplyRecv` with no caller just receives.
//!
//! Nothing a caller sends can stop it: long messages, capabilities (it
//! accepts none: its IPC buffer's receive slot stays 0), bad labels. A
//! receive error that names this endpoint as unusable (bad slot, wrong
//! type, missing right) is fatal and reported; others (an aborted IPC) are
//! counted and the loop receives again. It never exits on its own; root
//! does not wait for it.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use protocols::ping;
use rt::abi::{caddr, Error, MsgInfo};
use rt::interfaces::child::SERVICE_ENDPOINT;
use rt::println;
use rt::syscall::{self, Words, NO_WORDS};

rt::entry!(main);

/// Receive errors printed in full; later ones are only counted.
const ERRORS_PRINTED: u64 = 10;

/// What the server knows.
struct State {
    pings: u64,
    fuzzer_done: bool,
    junk: u64,
    dropped_faults: u64,
}

impl State {
    /// The reply to one message, `None` for no reply.
    fn handle(&mut self, badge: u64, info: MsgInfo, words: Words) -> Option<(MsgInfo, Words)> {
        let label = info.label();
        if label >= ping::KERNEL_LABELS {
            self.dropped_faults += 1;
            return None;
        }
        match label {
            ping::PING if info.length() >= 1 => {
                self.pings += 1;
                let mut reply = NO_WORDS;
                reply[ping::PONG_N] = words[0].wrapping_add(1);
                reply[ping::PONG_BADGE] = badge;
                reply[ping::PONG_FUZZER_DONE] = u64::from(self.fuzzer_done);
                reply[ping::PONG_COUNT] = self.pings;
                Some((message(ping::PONG, 4), reply))
            }
            ping::FUZZER_DONE
                if info.length() >= 2
                    && words[0] == ping::DONE_MAGIC0
                    && words[1] == ping::DONE_MAGIC1 =>
            {
                if !self.fuzzer_done {
                    println!(
                        "pinger: fuzzer done (badge {badge}); {} pings so far, {} junk messages, {} fault messages dropped",
                        self.pings, self.junk, self.dropped_faults
                    );
                }
                self.fuzzer_done = true;
                Some((message(ping::DONE_ACK, 0), NO_WORDS))
            }
            _ => {
                self.junk += 1;
                Some((message(ping::ERROR, 1), [label, 0, 0, 0]))
            }
        }
    }
}

/// A message info with `label` and `length` register words, no caps.
fn message(label: u64, length: usize) -> MsgInfo {
    MsgInfo::new(label, length, 0).expect("protocol labels and lengths are in range")
}

fn main(_arg: u64) -> i32 {
    let endpoint = caddr::own(SERVICE_ENDPOINT);
    let mut state = State {
        pings: 0,
        fuzzer_done: false,
        junk: 0,
        dropped_faults: 0,
    };
    let mut errors = 0u64;
    println!("pinger: serving");
    let mut received = syscall::recv(endpoint);
    loop {
        let reply = match received {
            Ok((badge, info, words)) => state.handle(badge, info, words),
            Err(e) => {
                errors += 1;
                if errors <= ERRORS_PRINTED {
                    println!("pinger: receive failed: {e:?}");
                }
                if matches!(
                    e,
                    Error::InvalidSlot
                        | Error::EmptySlot
                        | Error::WrongObjectType
                        | Error::MissingRights
                ) {
                    println!("pinger: FAILED: cannot receive on the service endpoint ({e:?})");
                    return 1;
                }
                None
            }
        };
        received = match reply {
            Some((info, words)) => syscall::reply_recv(endpoint, info, words),
            None => syscall::recv(endpoint),
        };
    }
}
