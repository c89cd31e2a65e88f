//! The protocol of the benchmark pair `bench` (client) and `bench-server`,
//! spoken over the shared service endpoint with `bench-server` as the
//! server. Every request is a `Call`; every reply has label [`OK`] unless
//! it says otherwise.
//!
//! | request (label, words) | what the server does, reply |
//! |------------------------|-----------------------------|
//! | [`SETUP`], `[which]` | makes (once) the shared 2 MiB frame ([`SHM_BYTES`], mapped in its own address space) and two notifications; replies with the capability `which` names (`rt::shared`: the frame, the notification the server waits on write-only, the one it signals read-only), or [`ERROR`] without one |
//! | [`TIMED_START`], `[]` | forgets the recorded arrival times |
//! | [`TIMED`], any length | the measured call: takes a timestamp right after its receive returns and stores it as the next arrival time ([`SHM_ARRIVALS`], at most [`MAX_ARRIVALS`]); an empty reply |
//! | [`TIMED_END`], `[]` | word 0: how many arrival times were recorded |
//! | [`BULK`], `[rounds, bytes]` | replies, then `rounds` times: waits on its notification, copies `bytes` (≤ [`MAX_CHUNK`]) from [`SHM_DATA`] + `(round mod (SHM_DATA_BYTES / bytes)) * bytes` into private memory, signals the client's notification; then receives again. [`ERROR`] for bad sizes, or before `SETUP` |
//! | anything else | [`ERROR`], `[the request's label]` |
//!
//! The shared frame: the server's arrival times (`u64`, little endian) at
//! [`SHM_ARRIVALS`], the bulk data area ([`SHM_DATA_BYTES`]) at
//! [`SHM_DATA`].
#![no_std]

/// "BSET".
pub const SETUP: u64 = 0x4253_4554;
/// "BTST".
pub const TIMED_START: u64 = 0x4254_5354;
/// "BTIM".
pub const TIMED: u64 = 0x4254_494d;
/// "BTND".
pub const TIMED_END: u64 = 0x4254_4e44;
/// "BBLK".
pub const BULK: u64 = 0x4242_4c4b;
/// "OK!!".
pub const OK: u64 = 0x4f4b_2121;
/// "ERR!".
pub const ERROR: u64 = 0x4552_5221;

/// Bytes of the shared frame (one `Frame2M`).
pub const SHM_BYTES: usize = rt::shared::FRAME_BYTES;
/// Byte offset of the arrival times in the shared frame.
pub const SHM_ARRIVALS: usize = 0;
/// Most arrival times recorded between `TIMED_START` and `TIMED_END`.
pub const MAX_ARRIVALS: usize = 4096;
/// Byte offset of the bulk data area in the shared frame.
pub const SHM_DATA: usize = 1 << 20;
/// Bytes of the bulk data area.
pub const SHM_DATA_BYTES: usize = 1 << 20;
/// Largest bulk chunk.
pub const MAX_CHUNK: usize = 64 << 10;

const _: () = assert!(SHM_ARRIVALS + MAX_ARRIVALS * 8 <= SHM_DATA);
const _: () = assert!(SHM_DATA + SHM_DATA_BYTES <= SHM_BYTES);
const _: () = assert!(SHM_DATA_BYTES.is_multiple_of(MAX_CHUNK));
const _: () = assert!(rt::abi::fault::KERNEL_LABELS > SETUP);
