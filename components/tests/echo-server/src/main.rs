//! echo-server: the smallest server, for tests of root's service endpoint.
//!
//! Root gives a server (a component whose name ends in `-server`) the
//! service endpoint with all rights in slot `interfaces::child::SERVICE_ENDPOINT`;
//! every other child gets it write-only, badged with its index. This
//! server receives on it and answers each call with the same label, word 0
//! + 1 and the caller's badge in word 1, forever:
//!
//! ```text
//! echo-server: serving on slot 2
//! ```
//!
//! It never returns; root stops it (deletes its thread) when every child
//! that is not a server has finished.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
use rt::abi::MsgInfo;
use rt::interfaces::child;
use rt::println;
use rt::syscall;

rt::entry!(main);

fn main(_arg: u64) -> i32 {
    let endpoint = own(child::SERVICE_ENDPOINT);
    println!("echo-server: serving on slot {}", child::SERVICE_ENDPOINT);
    let mut received = syscall::recv(endpoint);
    loop {
        let (badge, info, words) = match received {
            Ok(message) => message,
            Err(e) => {
                println!("echo-server: Recv failed: {e}");
                return 1;
            }
        };
        let reply = MsgInfo::new(info.label(), 2, 0).unwrap_or_default();
        received = syscall::reply_recv(endpoint, reply, [words[0].wrapping_add(1), badge, 0, 0]);
    }
}
