//! Small protocols between test components, each defined in one place so
//! that both ends agree (the pattern sessions will follow).
//!
//! - [`ping`]: the protocol of the `pinger` server, its client
//!   `pingclient` and the `fuzzer`, which tells the pinger when it is done.
//! - [`bench`]: between the benchmark component `bench` and its partner in
//!   another address space, `bench-server`.

/// The ping protocol, spoken over the shared service endpoint
/// (`abi::child::SERVICE_ENDPOINT`) with `pinger` as the server.
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
/// | [`SETUP`], `[what]` | makes (once) the shared 2 MiB frame ([`SHM_BYTES`], mapped in its own address space) and two notifications; replies with one capability ([`CAP_SHM`]: the frame, all rights; [`CAP_SERVER_NOTIFY`]: the notification the server waits on, write-only; [`CAP_CLIENT_NOTIFY`]: the one it signals, read-only), or [`ERROR`] without one |
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

    /// [`SETUP`] word 0: the reply carries the shared frame.
    pub const CAP_SHM: u64 = 0;
    /// [`SETUP`] word 0: the reply carries the server's notification
    /// (write-only: the client signals it).
    pub const CAP_SERVER_NOTIFY: u64 = 1;
    /// [`SETUP`] word 0: the reply carries the client's notification
    /// (read-only: the client waits on it, the server signals it).
    pub const CAP_CLIENT_NOTIFY: u64 = 2;

    /// Bytes of the shared frame (one `Frame2M`).
    pub const SHM_BYTES: usize = 2 << 20;
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
