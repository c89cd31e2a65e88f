//! The loop of a server on an endpoint, and its replies.

use abi::{CapSlot, MsgInfo};

use crate::syscall::{self, Words};
use abi::fault::KERNEL_LABELS;

/// A reply with `label` and the four register words `words`.
pub fn answer(label: u64, words: Words) -> (MsgInfo, Words) {
    (MsgInfo::new(label, 4, 0).unwrap_or_default(), words)
}

/// The error reply (label `error`) to request `request`: word 0 names it.
pub fn refuse(error: u64, request: u64) -> (MsgInfo, Words) {
    answer(error, [request, 0, 0, 0])
}

/// Serves endpoint `ep` forever: hands each request — label and words —
/// to `handle` and sends the reply it returns with the next receive
/// (`ReplyRecv`); `None` means there is nothing to send (the handler
/// replied itself). Kernel messages (labels from
/// `proto::ping::KERNEL_LABELS` up: faults and exits of threads that call
/// the endpoint by mistake) are never answered, so their threads stay
/// stopped; a failed receive is retried.
pub fn serve(ep: CapSlot, mut handle: impl FnMut(u64, Words) -> Option<(MsgInfo, Words)>) -> ! {
    let mut reply: Option<(MsgInfo, Words)> = None;
    loop {
        let received = match reply.take() {
            Some((info, words)) => syscall::reply_recv(ep, info, words),
            None => syscall::recv(ep),
        };
        let Ok((_, info, words)) = received else {
            continue;
        };
        if info.label() < KERNEL_LABELS {
            reply = handle(info.label(), words);
        }
    }
}
