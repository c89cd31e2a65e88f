//! log-service: the LOG service (package `log` would clash with the `log`
//! crate in cargo's package specs). Provides `Log` (`rt::session::log`):
//! every line a client writes is printed labelled with the client's name
//! as the scenario config names it — `[client] hello`. The label comes from init
//! when it opens the session, never from the client, so a client cannot
//! pass itself off as another.
//!
//! With `arg = 1` ([`BENCH`], `scenarios/session-rpc.toml`) it also answers
//! `log::RAW_PING` calls in its receive loop, before the session layer
//! (no badge lookup, no dispatch): the raw call+reply the session RPC
//! benchmark compares a `PING` on the session with.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::interfaces::child;
use rt::println;
use rt::server::answer;
use rt::session::log::{self, LineBuffer, Log};
use rt::session::{Label, Provider};

rt::entry!(main);

/// `arg` of the benchmark mode.
const BENCH: u64 = 1;

/// Prints lines on the kernel console.
struct Console;

impl log::Server for Console {
    fn line(&mut self, client: &Label, line: &str) {
        println!("[{}] {line}", client.as_str());
    }
}

fn main(arg: u64) -> i32 {
    // Two slots per session from FIRST_FREE; a component's table has at
    // least 16 slots (`ucore::config::MIN_CAPS`).
    let mut provider: Provider<Log, LineBuffer> = Provider::new(child::FIRST_FREE, 16);
    let mut console = Console;
    let mut new = |_: &Label, _| Ok(LineBuffer::default());
    let mut dispatch = |client: &Label, state: &mut LineBuffer, label, words| {
        log::dispatch(&mut console, client, state, label, words)
    };
    if arg != BENCH {
        provider.serve(new, dispatch)
    }
    let mut reply = None;
    loop {
        let received = provider.next(reply.take());
        if let Ok((_, info, _)) = received {
            if info.label() == log::RAW_PING {
                reply = Some(answer(log::OK, [0; 4]));
                continue;
            }
        }
        reply = provider.handle(received, &mut new, &mut dispatch);
    }
}
