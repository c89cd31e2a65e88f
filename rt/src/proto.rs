//! Small protocols between test components, each defined in one place so
//! that both ends agree (the pattern sessions will follow).
//!
//! - [`ping`]: the protocol of the `pinger` server, its client
//!   `pingclient` and the `fuzzer`, which tells the pinger when it is done.
//! - [`bench`]: between the benchmark component `bench` and its partner in
//!   another address space, `bench-server`.
//! - [`stream`]: between the packet-stream test pair `test-stream-source`
//!   and `test-stream-sink-server`.

/// The ping protocol, spoken over the shared service endpoint
/// (`interfaces::child::SERVICE_ENDPOINT`) with `pinger` as the server.
///
/// | request (label, words) | reply (label, words) |
/// |------------------------|----------------------|
/// | [`PING`], `[n]` (a `Call`) | [`PONG`], `[n + 1 (wrapping), caller's badge, fuzzer done (0/1), pings answered]` |
/// | [`FUZZER_DONE`], `[DONE_MAGIC0, DONE_MAGIC1]` | [`DONE_ACK`], `[]`; later PONGs say `fuzzer done = 1` |
/// | anything else (a `Call`) | [`ERROR`], `[the request's label]` |
/// | a fault or exit message (label at or above [`KERNEL_LABELS`]) | none: the pinger never replies, so a faulting thread stays stopped |
///
/// A `Send` instead of a `Call` gets no reply (there is nobody to reply
/// to); the pinger goes on receiving. Senders must keep their labels below
/// [`KERNEL_LABELS`] (the kernel's fault labels): the pinger does not reply
/// to those, so a `Call` with such a label would wait forever.
pub mod ping {
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
    /// notification messages, `abi::fault`): never replied to.
    pub const KERNEL_LABELS: u64 = 0xffff_ffff_0000;

    /// Word indices of a [`PONG`].
    pub const PONG_N: usize = 0;
    /// The caller's badge, as the pinger received it.
    pub const PONG_BADGE: usize = 1;
    /// 1 once the fuzzer has reported [`FUZZER_DONE`].
    pub const PONG_FUZZER_DONE: usize = 2;
    /// Pings answered so far (all callers).
    pub const PONG_COUNT: usize = 3;

    const _: () = assert!(crate::abi::fault::LABEL_PAGE_FAULT >= KERNEL_LABELS);
    const _: () = assert!(crate::abi::LABEL_NOTIFICATION >= KERNEL_LABELS);
}

/// The protocol of the benchmark pair `bench` (client) and `bench-server`,
/// spoken over the shared service endpoint with `bench-server` as the
/// server. Every request is a `Call`; every reply has label [`OK`] unless
/// it says otherwise.
///
/// | request (label, words) | what the server does, reply |
/// |------------------------|-----------------------------|
/// | [`SETUP`], `[which]` | makes (once) the shared 2 MiB frame ([`SHM_BYTES`], mapped in its own address space) and two notifications; replies with the capability `which` names (`crate::shared`: the frame, the notification the server waits on write-only, the one it signals read-only), or [`ERROR`] without one |
/// | [`TIMED_START`], `[]` | forgets the recorded arrival times |
/// | [`TIMED`], any length | the measured call: takes a timestamp right after its receive returns and stores it as the next arrival time ([`SHM_ARRIVALS`], at most [`MAX_ARRIVALS`]); an empty reply |
/// | [`TIMED_END`], `[]` | word 0: how many arrival times were recorded |
/// | [`BULK`], `[rounds, bytes]` | replies, then `rounds` times: waits on its notification, copies `bytes` (≤ [`MAX_CHUNK`]) from [`SHM_DATA`] + `(round mod (SHM_DATA_BYTES / bytes)) * bytes` into private memory, signals the client's notification; then receives again. [`ERROR`] for bad sizes, or before `SETUP` |
/// | anything else | [`ERROR`], `[the request's label]` |
///
/// The shared frame: the server's arrival times (`u64`, little endian) at
/// [`SHM_ARRIVALS`], the bulk data area ([`SHM_DATA_BYTES`]) at
/// [`SHM_DATA`].
pub mod bench {
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
    pub const SHM_BYTES: usize = crate::shared::FRAME_BYTES;
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
    const _: () = assert!(super::ping::KERNEL_LABELS > SETUP);
}

/// The protocol of the packet-stream test pair: `test-stream-source`
/// (client, the stream's source) and `test-stream-sink-server` (the
/// stream's sink), spoken over the shared service endpoint with the sink
/// as the server. Every request is a `Call`.
///
/// | request (label, words) | what the server does, reply |
/// |------------------------|-----------------------------|
/// | [`SETUP`], `[which]` | makes (once) the shared 2 MiB frame ([`SHM_BYTES`], mapped in its own address space) and two notifications; replies [`OK`] with the capability `which` names (`crate::shared`: the frame, the notification the sink waits on write-only, the one it signals read-only), or [`ERROR`] without one |
/// | [`VERIFY`], `[count, seed, max_len, hold]` | resets the stream's control words in the first [`VERIFY_BYTES`] of the frame, replies [`OK`], then serves as the sink of a verification run (`ucore::packet_stream::traffic`: `count` ≤ [`MAX_PACKETS`] packets of `Traffic { seed, count, max_len }` — 0: only the end marker, for a source that plays the hostile peer —, up to `hold` ≤ [`MAX_HOLD`] held and acknowledged out of order) over [`VERIFY_CONFIG`] until the end marker or a fatal stream error, then receives again. [`ERROR`] for bad values or before `SETUP` |
/// | [`BULK`], `[size]` | the same for a throughput run over the whole frame with [`BULK_CONFIG`]: copies each packet (at most [`MAX_BULK`] bytes; `size` only checks that) out into private memory, acknowledges in order |
/// | [`STATS`], `[]` | the sink's counters of the last run: [`OK`] (or [`ERROR`] if it failed), `[packets, signals, waits, ack ring full | rejected descriptors << 32]` |
/// | anything else | [`ERROR`], `[the request's label]` |
///
/// The source builds its end over the same bytes after the [`OK`]; both
/// ends then speak the packet-stream protocol (`ucore::packet_stream`)
/// until the end marker. The sink prints a line only when a run ends in
/// an error (`test-stream-sink-server: run ... ended: ...`).
pub mod stream {
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
    pub const SHM_BYTES: usize = crate::shared::FRAME_BYTES;
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
    const _: () = assert!(super::ping::KERNEL_LABELS > VERIFY);
}

/// The dataspace-and-signals test session, `Ds_test`, between
/// `test-dataspace-client` and `test-dataspace-service`: the client
/// writes a request into a dataspace the server shares with it and
/// signals a context of the server's; the server's signal handler (run by
/// its provider loop, `session::Provider::serve_with_signals`) answers in
/// the same dataspace and signals the client's notification, whose
/// handler (`signal::Signals::on`) checks the answer.
///
/// | request (label) | reply (label, words, capability) |
/// |-----------------|----------------------------------|
/// | [`GET_DS`] | [`OK`], `[bytes]`, the session's dataspace, writable |
/// | [`GET_DS_RO`] | [`OK`], `[bytes]`, the same dataspace, read-only |
/// | [`GET_CONTEXT`] | [`OK`], `[bit]`, the server's signal context for this session (write-only) |
/// | [`GET_WAKEUP`] | [`OK`], `[]`, the client's notification, read-only; the server sets bit [`RESULT_BIT`] |
/// | [`DROP_CONTEXT`] | [`OK`]: the server unregisters the session's context (its capability is revoked) |
/// | anything else | [`ERROR`] |
///
/// Dataspace layout (64-bit words): `[0]` request sequence number,
/// `[1..=WORDS]` the numbers to add; the server writes the sum to
/// `[SUM_AT]` and then the sequence number it answered to `[ANSWERED_AT]`.
pub mod ds_test {
    use crate::session::Interface;

    /// The interface.
    pub struct DsTest;

    impl Interface for DsTest {
        const NAME: &'static str = "Ds_test";
    }

    /// "DSGW".
    pub const GET_DS: u64 = 0x4453_4757;
    /// "DSGR".
    pub const GET_DS_RO: u64 = 0x4453_4752;
    /// "DSGC".
    pub const GET_CONTEXT: u64 = 0x4453_4743;
    /// "DSGN".
    pub const GET_WAKEUP: u64 = 0x4453_474e;
    /// "DSDC".
    pub const DROP_CONTEXT: u64 = 0x4453_4443;
    /// "OK!!".
    pub const OK: u64 = 0x4f4b_2121;
    /// "ERR!".
    pub const ERROR: u64 = 0x4552_5221;
    /// The client notification's bit that says "answered".
    pub const RESULT_BIT: u32 = 0;
    /// Numbers per request.
    pub const WORDS: usize = 8;
    /// Word index of the sum.
    pub const SUM_AT: usize = 16;
    /// Word index of the answered sequence number.
    pub const ANSWERED_AT: usize = 17;
}
