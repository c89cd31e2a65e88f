//! log-service: the LOG service (package `log` would clash with the `log`
//! crate in cargo's package specs). Provides `Log` (`rt::session::log`):
//! every line a client writes is printed labelled with the client's name
//! as the scenario config names it — `[client] hello`. The label comes from init
//! when it opens the session, never from the client, so a client cannot
//! pass itself off as another.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::child;
use rt::println;
use rt::session::log::{self, LineBuffer, Log};
use rt::session::{Label, Provider};

rt::entry!(main);

/// Prints lines on the kernel console.
struct Console;

impl log::Server for Console {
    fn line(&mut self, client: &Label, line: &str) {
        println!("[{}] {line}", client.as_str());
    }
}

fn main(_arg: u64) -> i32 {
    // One slot per session from FIRST_FREE; a component's table has at
    // least 16 slots (`ucore::config::MIN_CAPS`).
    let provider: Provider<Log, LineBuffer> = Provider::new(child::FIRST_FREE, 16);
    let mut console = Console;
    provider.serve(
        |_| LineBuffer::default(),
        |client, state, label, words| log::dispatch(&mut console, client, state, label, words),
    )
}
