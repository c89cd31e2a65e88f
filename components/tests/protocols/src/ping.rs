//! The ping protocol, spoken over the shared service endpoint
//! (`interfaces::child::SERVICE_ENDPOINT`) with `pinger` as the server.
//!
//! | request (label, words) | reply (label, words) |
//! |------------------------|----------------------|
//! | [`PING`], `[n]` (a `Call`) | [`PONG`], `[n + 1 (wrapping), caller's badge, fuzzer done (0/1), pings answered]` |
//! | [`FUZZER_DONE`], `[DONE_MAGIC0, DONE_MAGIC1]` | [`DONE_ACK`], `[]`; later PONGs say `fuzzer done = 1` |
//! | anything else (a `Call`) | [`ERROR`], `[the request's label]` |
//! | a fault or exit message (label at or above [`KERNEL_LABELS`]) | none: the pinger never replies, so a faulting thread stays stopped |
//!
//! A `Send` instead of a `Call` gets no reply (there is nobody to reply
//! to); the pinger goes on receiving. Senders must keep their labels below
//! [`KERNEL_LABELS`] (the kernel's fault labels): the pinger does not reply
//! to those, so a `Call` with such a label would wait forever.

/// "PING".
pub const PING: u64 = 0x5049_4e47;
/// "PONG".
pub const PONG: u64 = 0x504f_4e47;
/// "DONE": the fuzzer has finished its calls.
pub const FUZZER_DONE: u64 = 0x444f_4e45;
/// "ACK!": the pinger noted [`FUZZER_DONE`].
pub const DONE_ACK: u64 = 0x4143_4b21;
/// "ERR!": the request was not understood.
pub const ERROR: u64 = 0x4552_5221;
/// Word 0 of [`FUZZER_DONE`] ("fuzzdone").
pub const DONE_MAGIC0: u64 = u64::from_le_bytes(*b"fuzzdone");
/// Word 1 of [`FUZZER_DONE`].
pub const DONE_MAGIC1: u64 = !DONE_MAGIC0;
/// Labels from here up are the kernel's (fault, exception, exit and
/// notification messages): never replied to.
pub use rt::abi::fault::KERNEL_LABELS;

/// Word indices of a [`PONG`].
pub const PONG_N: usize = 0;
/// The caller's badge, as the pinger received it.
pub const PONG_BADGE: usize = 1;
/// 1 once the fuzzer has reported [`FUZZER_DONE`].
pub const PONG_FUZZER_DONE: usize = 2;
/// Pings answered so far (all callers).
pub const PONG_COUNT: usize = 3;
