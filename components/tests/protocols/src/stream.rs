//! The protocol of the packet-stream test pair: `test-stream-source`
//! (client, the stream's source) and `test-stream-sink-server` (the
//! stream's sink), spoken over the shared service endpoint with the sink
//! as the server. Every request is a `Call`.
//!
//! | request (label, words) | what the server does, reply |
//! |------------------------|-----------------------------|
//! | [`SETUP`], `[which]` | makes (once) the shared 2 MiB frame ([`SHM_BYTES`], mapped in its own address space) and two notifications; replies [`OK`] with the capability `which` names (`rt::shared`: the frame, the notification the sink waits on write-only, the one it signals read-only), or [`ERROR`] without one |
//! | [`VERIFY`], `[count, seed, max_len, hold]` | resets the stream's control words in the first [`VERIFY_BYTES`] of the frame, replies [`OK`], then serves as the sink of a verification run (`ucore::packet_stream::traffic`: `count` ≤ [`MAX_PACKETS`] packets of `Traffic { seed, count, max_len }` — 0: only the end marker, for a source that plays the hostile peer —, up to `hold` ≤ [`MAX_HOLD`] held and acknowledged out of order) over [`VERIFY_CONFIG`] until the end marker or a fatal stream error, then receives again. [`ERROR`] for bad values or before `SETUP` |
//! | [`BULK`], `[size]` | the same for a throughput run over the whole frame with [`BULK_CONFIG`]: copies each packet (at most [`MAX_BULK`] bytes; `size` only checks that) out into private memory, acknowledges in order |
//! | [`STATS`], `[]` | the sink's counters of the last run: [`OK`] (or [`ERROR`] if it failed), `[packets, signals, waits, ack ring full | rejected descriptors << 32]` |
//! | anything else | [`ERROR`], `[the request's label]` |
//!
//! The source builds its end over the same bytes after the [`OK`]; both
//! ends then speak the packet-stream protocol (`ucore::packet_stream`)
//! until the end marker. The sink prints a line only when a run ends in
//! an error (`test-stream-sink-server: run ... ended: ...`).

use ucore::packet_stream::Config;

/// "SSET".
pub const SETUP: u64 = 0x5353_4554;
/// "SVER".
pub const VERIFY: u64 = 0x5356_4552;
/// "SBLK".
pub const BULK: u64 = 0x5342_4c4b;
/// "SSTA".
pub const STATS: u64 = 0x5353_5441;
/// "OK!!".
pub const OK: u64 = 0x4f4b_2121;
/// "ERR!".
pub const ERROR: u64 = 0x4552_5221;

/// Bytes of the shared frame (one `Frame2M`).
pub const SHM_BYTES: usize = rt::shared::FRAME_BYTES;
/// Bytes of the frame a verification run uses: small, so that the
/// buffer fills up.
pub const VERIFY_BYTES: usize = 256 << 10;
/// Rings of a verification run: small, so that they fill up.
pub const VERIFY_CONFIG: Config = Config {
    entries: 64,
    block_size: 64,
};
/// Rings and blocks of a throughput run (over all [`SHM_BYTES`]): 256
/// entries and page-sized blocks, so that a 64 KiB packet is 16 blocks
/// (one bitmap word) — the block size is a session's choice, large for
/// bulk traffic, small where many small packets share a small buffer.
pub const BULK_CONFIG: Config = Config {
    entries: 256,
    block_size: 4096,
};
/// Most packets of a verification run (the sink's record of them).
pub const MAX_PACKETS: u32 = 100_000;
/// Bitmap words for [`MAX_PACKETS`] sequence numbers.
pub const SEEN_WORDS: usize = (MAX_PACKETS as usize).div_ceil(64);
/// Most packets the sink holds before acknowledging.
pub const MAX_HOLD: usize = 64;
/// Largest packet of a throughput run.
pub const MAX_BULK: usize = 64 << 10;

const _: () = assert!(VERIFY_BYTES <= SHM_BYTES);
const _: () = assert!(rt::abi::fault::KERNEL_LABELS > VERIFY);
