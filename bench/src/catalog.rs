//! The benchmark names both platforms use, and how `cargo xtask bench`
//! pairs them into the side-by-side table. A benchmark program reports a
//! `BENCH` line with exactly one of these names per benchmark it runs;
//! `xtask` refuses unknown names, so a typo cannot silently drop a row.
//!
//! IPC benchmarks are one-way (sel4bench method); `Nw` is the payload in
//! 8-byte message words (0, 4, 8, 16: the classic "0..4 / 8 / 16 MRs"
//! rows; on Pecan up to 4 words travel in registers, more through the IPC
//! buffer; on Linux the payload is written to the pipe/socket or to shared
//! memory before the wake-up).

/// A benchmark one platform runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bench {
    pub name: &'static str,
    pub platform: Platform,
    /// What is measured, for the report.
    pub what: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    /// Pecan, run by the `bench` component (its ARG mask counts these).
    Pecan,
    /// Pecan, reported by the components of `scenarios/NAME.toml` (e.g.
    /// the packet-stream pair); `cargo xtask bench` boots that scenario.
    PecanScenario(&'static str),
    Linux,
}

impl Platform {
    /// Whether this is one of Pecan's.
    pub const fn is_pecan(self) -> bool {
        !matches!(self, Platform::Linux)
    }
}

macro_rules! benches {
    ($($platform:ident $(($scenario:literal))? $name:literal => $what:literal,)*) => {
        /// Every benchmark, Pecan's first.
        pub const ALL: &[Bench] = &[$(Bench { name: $name, platform: Platform::$platform $(($scenario))?, what: $what },)*];
    };
}

benches! {
    Pecan "null-syscall" => "Null system call, round trip",
    Pecan "ipc-intra-0w" => "IPC call one-way, same address space, 0 words",
    Pecan "ipc-intra-4w" => "IPC call one-way, same address space, 4 words",
    Pecan "ipc-intra-8w" => "IPC call one-way, same address space, 8 words",
    Pecan "ipc-intra-16w" => "IPC call one-way, same address space, 16 words",
    Pecan "ipc-inter-0w" => "IPC call one-way, between address spaces, 0 words",
    Pecan "ipc-inter-4w" => "IPC call one-way, between address spaces, 4 words",
    Pecan "ipc-inter-8w" => "IPC call one-way, between address spaces, 8 words",
    Pecan "ipc-inter-16w" => "IPC call one-way, between address spaces, 16 words",
    Pecan "notification" => "notification signal to wake-up of the waiter, one-way",
    Pecan "ring-2" => "token passed around a ring of 2 threads, per hand-over",
    Pecan "ring-4" => "token passed around a ring of 4 threads, per hand-over",
    Pecan "ring-10" => "token passed around a ring of 10 threads, per hand-over",
    Pecan "bulk-shm" => "bulk transfer through shared memory + notifications, bytes/tick",
    Pecan "bogomips" => "register decrement loop, ticks per 1000 iterations",
    Pecan "memcpy-runtime" => "memcpy 8 MiB, the runtime's, bytes/tick",
    Pecan "memcpy-bytewise" => "memcpy 8 MiB, one byte at a time, bytes/tick",
    Pecan "memset-runtime" => "memset 8 MiB, the runtime's, bytes/tick",
    Pecan "uncached-write" => "8-byte stores to an uncached mapping, bytes/tick",
    Pecan "uncached-read" => "8-byte loads from an uncached mapping, bytes/tick",
    PecanScenario("stream") "packet-stream-64" => "packet stream between address spaces, 64 B packets, bytes/tick",
    PecanScenario("stream") "packet-stream-1k" => "packet stream between address spaces, 1 KiB packets, bytes/tick",
    PecanScenario("stream") "packet-stream-64k" => "packet stream between address spaces, 64 KiB packets, bytes/tick",
    PecanScenario("session-rpc") "session-rpc" => "session RPC round trip (a Log PING through the session layer, 4 words each way)",
    PecanScenario("session-rpc") "session-raw-call" => "raw IPC call+reply round trip between the same two components, 4 words each way",
    PecanScenario("smp-bench-1") "smp-pingpong-1cpu" => "ping-pong pair on 1 CPU: instructions per round trip",
    PecanScenario("smp-bench-2") "smp-pingpong-2cpu" => "ping-pong pair on each of 2 CPUs at once: instructions of all CPUs per round trip",
    PecanScenario("smp-bench-4") "smp-pingpong-4cpu" => "ping-pong pair on each of 4 CPUs at once: instructions of all CPUs per round trip",
    PecanScenario("smp-bench-2") "ipc-cross-cpu-0w" => "IPC call one-way to a thread on another CPU (idle between calls: IPI wake-up), 0 words",
    PecanScenario("smp-bench-2") "ipc-cross-cpu-busy" => "IPC call one-way to a thread on another CPU that runs a lower-priority thread (the IPI preempts it), 0 words",
    Pecan "ipc-intra-0w-fpu" => "IPC call one-way, same address space, 0 words, caller used vector registers",
    Pecan "fpu-first-use" => "first vector instruction of a turn (#NM, state restored)",
    Pecan "vm-exit" => "VM exit round trip: guest out, exit to the VMM, resume (VMRUN and #VMEXIT count 1 each under icount)",
    PecanScenario("platform-bench") "irq-latency" => "MSI-X interrupt to its driver thread: from the kernel taking a virtio-blk completion's MSI-X to the driver running after its Wait (ticks)",
    PecanScenario("platform-bench") "irq-ack" => "IrqAck of an MSI-X handler, round trip",
    PecanScenario("display-bench") "gui-refresh-full" => "a full-screen frame through the GUI multiplexer: a client's REFRESH of its whole view (1024x752), the multiplexer's copy into its screen buffer with the title bar and its REFRESH at the driver, which copies the screen into the device's framebuffer; instructions per frame",
    PecanScenario("fb-bench") "fb-refresh-full" => "a full-screen frame straight at the display driver: REFRESH of 1024x768, copied into the device's framebuffer; instructions per frame",
    PecanScenario("glyph-bench") "term-glyph" => "terminal glyph rendering: term::Renderer drawing a full grid of non-blank characters (Noto Sans Mono 7x16) into a surface in memory; instructions per character",
    PecanScenario("term-bench") "term-line" => "a Log line of 100 characters to the terminal (108 with its label): WRITE calls, parsed, drawn and refreshed at the display driver; instructions per character",
    PecanScenario("blk-bench") "blk-read-64k" => "virtio-blk sequential reads of 64 KiB by the test driver (one in flight, MSI-X completion) from its disk (a fresh sparse 64 MiB raw image, paced) into a physically contiguous DMA buffer, the whole disk per run, a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-read-512" => "virtio-blk sequential reads of 512 B through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) from a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-read-1k" => "virtio-blk sequential reads of 1 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) from a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-read-4k" => "virtio-blk sequential reads of 4 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) from a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-read-16k" => "virtio-blk sequential reads of 16 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) from a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-read-64k" => "virtio-blk sequential reads of 64 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) from a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-read-256k" => "virtio-blk sequential reads of 256 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) from a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-read-1m" => "virtio-blk sequential reads of 1 MiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) from a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-write-512" => "virtio-blk sequential writes of 512 B through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) to a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-write-1k" => "virtio-blk sequential writes of 1 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) to a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-write-4k" => "virtio-blk sequential writes of 4 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) to a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-write-16k" => "virtio-blk sequential writes of 16 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) to a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-write-64k" => "virtio-blk sequential writes of 64 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) to a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-write-256k" => "virtio-blk sequential writes of 256 KiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) to a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("blk-raw-bench") "blk-raw-write-1m" => "virtio-blk sequential writes of 1 MiB through a Block session and the virtio-blk driver (one request at a time: larger than the driver's 128 KiB at once in 128 KiB packets, all in flight) to a scratch disk (a fresh sparse 64 MiB raw image, paced), in place in the packet stream, 10 MiB per run (2048 requests for 512 B and 1 KiB), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-read-512" => "sequential file reads of 512 B through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), the file written before the runs; fat-fs's 64-block cache and its read-ahead, rt::fs's 64 KiB read-ahead (reads below 16 KiB; the Linux side's page cache is dropped before each run, its read-ahead works as usual), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-read-1k" => "sequential file reads of 1 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), the file written before the runs; fat-fs's 64-block cache and its read-ahead, rt::fs's 64 KiB read-ahead (reads below 16 KiB; the Linux side's page cache is dropped before each run, its read-ahead works as usual), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-read-4k" => "sequential file reads of 4 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), the file written before the runs; fat-fs's 64-block cache and its read-ahead, rt::fs's 64 KiB read-ahead (reads below 16 KiB; the Linux side's page cache is dropped before each run, its read-ahead works as usual), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-read-16k" => "sequential file reads of 16 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), the file written before the runs; fat-fs's 64-block cache only, a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-read-64k" => "sequential file reads of 64 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), the file written before the runs; fat-fs's 64-block cache only, a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-read-256k" => "sequential file reads of 256 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), the file written before the runs; fat-fs's 64-block cache only, a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-read-1m" => "sequential file reads of 1 MiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), the file written before the runs; fat-fs's 64-block cache only, a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-write-512" => "sequential file writes of 512 B through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), created, written and synced (the sync timed), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-write-1k" => "sequential file writes of 1 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), created, written and synced (the sync timed), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-write-4k" => "sequential file writes of 4 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), created, written and synced (the sync timed), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-write-16k" => "sequential file writes of 16 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), created, written and synced (the sync timed), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-write-64k" => "sequential file writes of 64 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), created, written and synced (the sync timed), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-write-256k" => "sequential file writes of 256 KiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), created, written and synced (the sync timed), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("fat-bench") "fat-write-1m" => "sequential file writes of 1 MiB through rt::fs, the FAT service, the partition service and the virtio-blk driver, a 10 MiB file (2048 requests for 512 B and 1 KiB) on partition 3 of the card (FAT32, 512-byte clusters), created, written and synced (the sync timed), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-tcp-tx-64" => "TCP, the guest sending 64 B writes (Nagle off) to the host peer's sink, 256 KiB per run, every byte checked by the peer over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-tcp-tx-1k" => "TCP, the guest sending 1024 B writes to the host peer's sink, 2 MiB per run, every byte checked by the peer over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-tcp-tx-1450" => "TCP, the guest sending 1450 B writes to the host peer's sink, 2 MiB per run, every byte checked by the peer over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-tcp-rx-64" => "TCP, the guest receiving from the host peer's source in reads of 64 B, 256 KiB per run over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-tcp-rx-1k" => "TCP, the guest receiving from the host peer's source in reads of 1024 B, 2 MiB per run over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-tcp-rx-1450" => "TCP, the guest receiving from the host peer's source in reads of 1450 B, 2 MiB per run over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-udp-tx-64" => "UDP, the guest sending datagrams of 64 B to the host peer's sink, 256 KiB per run (until the last has left the stack) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-udp-tx-1k" => "UDP, the guest sending datagrams of 1024 B to the host peer's sink, 2 MiB per run (until the last has left the stack) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-udp-tx-1450" => "UDP, the guest sending datagrams of 1450 B to the host peer's sink, 2 MiB per run (until the last has left the stack) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-udp-rx-64" => "UDP, the guest receiving datagrams of 64 B from the host peer's source, 256 KiB per run (all of them) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-udp-rx-1k" => "UDP, the guest receiving datagrams of 1024 B from the host peer's source, 2 MiB per run (all of them) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-udp-rx-1450" => "UDP, the guest receiving datagrams of 1450 B from the host peer's source, 2 MiB per run (all of them) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-tcp-tx-1450-loss" => "TCP, the guest sending 1450 B writes to the host peer's sink while the peer drops every 100th data segment both ways (1 % loss), 2 MiB per run, every byte checked by the peer over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("net-bench") "net-tcp-rx-1450-loss" => "TCP, the guest receiving from the host peer's source in reads of 1450 B while the peer drops every 100th data segment both ways (1 % loss), 2 MiB per run over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through the virtio-net driver's Nic session and smoltcp linked into the benchmark (net), a priority-0 soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    PecanScenario("linux-vm-bench") "vm-getppid" => "Linux in Pecan's VM: getppid system call, round trip",
    PecanScenario("linux-vm-bench") "vm-futex-threads-0w" => "Linux in Pecan's VM: futex ping-pong between threads, one-way, 0 words",
    PecanScenario("linux-vm-bench") "vm-futex-shm-0w" => "Linux in Pecan's VM: futex ping-pong between processes over shared memory, one-way, 0 words",
    PecanScenario("linux-vm-bench") "vm-pipe-0w" => "Linux in Pecan's VM: pipe ping-pong between processes, one-way, 1 byte",
    PecanScenario("linux-vm-bench") "vm-unix-0w" => "Linux in Pecan's VM: unix stream socket ping-pong between processes, one-way, 1 byte",
    PecanScenario("linux-vm-bench") "vm-ring-2" => "Linux in Pecan's VM: token passed around a ring of 2 processes through pipes (lat_ctx -s 0 2), per hand-over",
    PecanScenario("linux-vm-bench") "vm-ring-10" => "Linux in Pecan's VM: token passed around a ring of 10 processes through pipes, per hand-over",
    PecanScenario("linux-vm-bench") "vm-bw-pipe" => "Linux in Pecan's VM: bulk transfer through a pipe (bw_pipe), bytes/tick",
    PecanScenario("linux-vm-bench") "vm-fork" => "Linux in Pecan's VM: fork of a process that exits at once (_exit), and the parent's waitpid, round trip",
    PecanScenario("linux-vm-bench") "vm-fork-exec" => "Linux in Pecan's VM: fork, exec of a static binary that exits at once (bench-linux --exit), and the parent's waitpid, round trip",
    PecanScenario("linux-vm-bench") "vm-bogomips" => "Linux in Pecan's VM: register decrement loop, ticks per 1000 iterations",
    PecanScenario("http") "http-rps-1" => "HTTP requests per second from the host, 1 keep-alive connection, 1 KiB body (wall clock)",
    PecanScenario("http") "http-rps-4" => "HTTP requests per second from the host, 4 keep-alive connections, 1 KiB body (wall clock)",
    PecanScenario("http") "http-rps-16" => "HTTP requests per second from the host, 16 keep-alive connections, 1 KiB body (wall clock)",
    Linux "getppid" => "getppid system call, round trip",
    Linux "futex-threads-0w" => "futex ping-pong between threads, one-way, 0 words",
    Linux "futex-threads-4w" => "futex ping-pong between threads, one-way, 4 words in shared memory",
    Linux "futex-threads-8w" => "futex ping-pong between threads, one-way, 8 words in shared memory",
    Linux "futex-threads-16w" => "futex ping-pong between threads, one-way, 16 words in shared memory",
    Linux "futex-shm-0w" => "futex ping-pong between processes over shared memory, one-way, 0 words",
    Linux "futex-shm-4w" => "futex ping-pong between processes over shared memory, one-way, 4 words",
    Linux "futex-shm-8w" => "futex ping-pong between processes over shared memory, one-way, 8 words",
    Linux "futex-shm-16w" => "futex ping-pong between processes over shared memory, one-way, 16 words",
    Linux "pipe-0w" => "pipe ping-pong between processes, one-way, 1 byte",
    Linux "pipe-4w" => "pipe ping-pong between processes, one-way, 32 bytes",
    Linux "pipe-8w" => "pipe ping-pong between processes, one-way, 64 bytes",
    Linux "pipe-16w" => "pipe ping-pong between processes, one-way, 128 bytes",
    Linux "unix-0w" => "unix stream socket ping-pong between processes, one-way, 1 byte",
    Linux "unix-16w" => "unix stream socket ping-pong between processes, one-way, 128 bytes",
    Linux "unix-rpc-4w" => "local RPC round trip: 4 words to a process over a unix stream socket and 4 back, timed by the caller",
    Linux "eventfd" => "eventfd write to wake-up of a reader blocked in read, one-way",
    Linux "ring-2" => "token passed around a ring of 2 processes through pipes (lat_ctx -s 0 2), per hand-over",
    Linux "ring-4" => "token passed around a ring of 4 processes through pipes, per hand-over",
    Linux "ring-10" => "token passed around a ring of 10 processes through pipes, per hand-over",
    Linux "bw-pipe" => "bulk transfer through a pipe (bw_pipe), bytes/tick",
    Linux "bw-unix" => "bulk transfer through a unix socket (bw_unix), bytes/tick",
    Linux "bogomips" => "register decrement loop, ticks per 1000 iterations",
    Linux "memcpy-glibc" => "memcpy 8 MiB, glibc's, bytes/tick",
    Linux "memcpy-bytewise" => "memcpy 8 MiB, one byte at a time, bytes/tick",
    Linux "memset-glibc" => "memset 8 MiB, glibc's, bytes/tick",
    Linux "fork" => "fork of a process that exits at once (_exit), and the parent's waitpid, round trip",
    Linux "fork-exec" => "fork, exec of a static binary that exits at once (bench-linux --exit), and the parent's waitpid, round trip",
    Linux "blk-read-64k-linux" => "virtio-blk sequential reads of 64 KiB with O_DIRECT from /dev/vda (a fresh sparse 64 MiB raw image, paced) into a buffer in a transparent huge page, the whole disk per run, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-read-512-linux" => "virtio-blk sequential reads of 512 B with O_DIRECT from /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-read-1k-linux" => "virtio-blk sequential reads of 1 KiB with O_DIRECT from /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-read-4k-linux" => "virtio-blk sequential reads of 4 KiB with O_DIRECT from /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-read-16k-linux" => "virtio-blk sequential reads of 16 KiB with O_DIRECT from /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-read-64k-linux" => "virtio-blk sequential reads of 64 KiB with O_DIRECT from /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-read-256k-linux" => "virtio-blk sequential reads of 256 KiB with O_DIRECT from /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-read-1m-linux" => "virtio-blk sequential reads of 1 MiB with O_DIRECT from /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-write-512-linux" => "virtio-blk sequential writes of 512 B with O_DIRECT to /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-write-1k-linux" => "virtio-blk sequential writes of 1 KiB with O_DIRECT to /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-write-4k-linux" => "virtio-blk sequential writes of 4 KiB with O_DIRECT to /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-write-16k-linux" => "virtio-blk sequential writes of 16 KiB with O_DIRECT to /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-write-64k-linux" => "virtio-blk sequential writes of 64 KiB with O_DIRECT to /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-write-256k-linux" => "virtio-blk sequential writes of 256 KiB with O_DIRECT to /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "blk-raw-write-1m-linux" => "virtio-blk sequential writes of 1 MiB with O_DIRECT to /dev/vda (a fresh sparse 64 MiB raw image, paced), a buffer in a transparent huge page, 10 MiB per run (2048 requests for 512 B and 1 KiB), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-read-512-linux" => "sequential file reads of 512 B with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), the page cache dropped before each run, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-read-1k-linux" => "sequential file reads of 1 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), the page cache dropped before each run, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-read-4k-linux" => "sequential file reads of 4 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), the page cache dropped before each run, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-read-16k-linux" => "sequential file reads of 16 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), the page cache dropped before each run, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-read-64k-linux" => "sequential file reads of 64 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), the page cache dropped before each run, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-read-256k-linux" => "sequential file reads of 256 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), the page cache dropped before each run, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-read-1m-linux" => "sequential file reads of 1 MiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), the page cache dropped before each run, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-write-512-linux" => "sequential file writes of 512 B with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), created, written and fsync'd (the fsync timed), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-write-1k-linux" => "sequential file writes of 1 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), created, written and fsync'd (the fsync timed), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-write-4k-linux" => "sequential file writes of 4 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), created, written and fsync'd (the fsync timed), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-write-16k-linux" => "sequential file writes of 16 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), created, written and fsync'd (the fsync timed), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-write-64k-linux" => "sequential file writes of 64 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), created, written and fsync'd (the fsync timed), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-write-256k-linux" => "sequential file writes of 256 KiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), created, written and fsync'd (the fsync timed), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "fat-write-1m-linux" => "sequential file writes of 1 MiB with read/write on a vfat mount of partition 3 of the same card (/dev/vdb3), a 10 MiB file (2048 requests for 512 B and 1 KiB), created, written and fsync'd (the fsync timed), a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-tcp-tx-64-linux" => "TCP, the guest sending 64 B writes (Nagle off) to the host peer's sink, 256 KiB per run, every byte checked by the peer over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-tcp-tx-1k-linux" => "TCP, the guest sending 1024 B writes to the host peer's sink, 2 MiB per run, every byte checked by the peer over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-tcp-tx-1450-linux" => "TCP, the guest sending 1450 B writes to the host peer's sink, 2 MiB per run, every byte checked by the peer over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-tcp-rx-64-linux" => "TCP, the guest receiving from the host peer's source in reads of 64 B, 256 KiB per run over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-tcp-rx-1k-linux" => "TCP, the guest receiving from the host peer's source in reads of 1024 B, 2 MiB per run over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-tcp-rx-1450-linux" => "TCP, the guest receiving from the host peer's source in reads of 1450 B, 2 MiB per run over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-udp-tx-64-linux" => "UDP, the guest sending datagrams of 64 B to the host peer's sink, 256 KiB per run (until the last has left the stack) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-udp-tx-1k-linux" => "UDP, the guest sending datagrams of 1024 B to the host peer's sink, 2 MiB per run (until the last has left the stack) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-udp-tx-1450-linux" => "UDP, the guest sending datagrams of 1450 B to the host peer's sink, 2 MiB per run (until the last has left the stack) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-udp-rx-64-linux" => "UDP, the guest receiving datagrams of 64 B from the host peer's source, 256 KiB per run (all of them) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-udp-rx-1k-linux" => "UDP, the guest receiving datagrams of 1024 B from the host peer's source, 2 MiB per run (all of them) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-udp-rx-1450-linux" => "UDP, the guest receiving datagrams of 1450 B from the host peer's source, 2 MiB per run (all of them) over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-tcp-tx-1450-loss-linux" => "TCP, the guest sending 1450 B writes to the host peer's sink while the peer drops every 100th data segment both ways (1 % loss), 2 MiB per run, every byte checked by the peer over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "net-tcp-rx-1450-loss-linux" => "TCP, the guest receiving from the host peer's source in reads of 1450 B while the peer drops every 100th data segment both ways (1 % loss), 2 MiB per run over the socket link (QEMU -netdev socket on 127.0.0.1; the peer runs on the host, outside icount), through Linux's virtio_net and TCP/IP stack with std::net sockets, a SCHED_IDLE soaker on the CPU: busy ticks per KiB (CPU cost, lower is better)",
    Linux "http-rps-1-linux" => "HTTP requests per second from the host, 1 keep-alive connection, 1 KiB body (wall clock)",
    Linux "http-rps-4-linux" => "HTTP requests per second from the host, 4 keep-alive connections, 1 KiB body (wall clock)",
    Linux "http-rps-16-linux" => "HTTP requests per second from the host, 16 keep-alive connections, 1 KiB body (wall clock)",
}

/// Rows whose figures the emulator distorts, by Pecan benchmark name: the
/// note printed under the table, and whether the row's "advantage" would
/// be a claim resting on the artifact (then it is not shown). The
/// method's caveats (docs/benchmarks.md) say why.
pub const CAVEATS: &[(&str, &str, bool)] = &[
    (
        "memset-runtime",
        "emulator artifact: under icount a `rep`-prefixed string instruction counts one tick \
         per iteration, and glibc's memset of 8 MiB is `rep stosb` (0.999 B/tick: one byte per \
         tick), while the runtime's is an AVX loop of 32-byte stores. On hardware with ERMS \
         `rep stosb` runs about as fast as such a loop, so the ratio says nothing about real \
         machines and is not shown",
        true,
    ),
    (
        "uncached-write",
        "TCG ignores cache attributes: an uncached mapping costs here what a write-back one \
         does; on hardware each uncached access goes to the bus (tens to hundreds of cycles)",
        false,
    ),
    (
        "uncached-read",
        "TCG ignores cache attributes (see the row above)",
        false,
    ),
    (
        "gui-refresh-full",
        "icount instructions, not time: the copies are the runtime's memcpy (AVX, 32 bytes an \
         instruction) and plain loops, a `rep movs` would count once per iteration; TCG ignores \
         cache attributes, so the device's write-combining framebuffer costs what memory does",
        false,
    ),
    (
        "fb-refresh-full",
        "icount instructions, not time: the copies are the runtime's memcpy (AVX, 32 bytes an \
         instruction) and plain loops, a `rep movs` would count once per iteration; TCG ignores \
         cache attributes, so the device's write-combining framebuffer costs what memory does",
        false,
    ),
    ("http-rps-1", HTTP_CAVEAT, false),
    ("http-rps-4", HTTP_CAVEAT, false),
    ("http-rps-16", HTTP_CAVEAT, false),
];

/// The HTTP rows' note (`crate::httpload`): what their figure is.
const HTTP_CAVEAT: &str =
    "wall clock, not icount: requests per second of the host's clock (QEMU TCG without \
         icount, one vCPU, 256 MiB, on a 2-core host that other builds share; QEMU's user \
         network with restrict=on and a forward from 127.0.0.1; the load generator on the \
         host). The guests only serve; the host counts. A figure depends on the host's speed and \
         load: `cargo xtask bench --wall N` interleaves the pairs";

/// The caveat of Pecan benchmark `name`, if the emulator distorts it.
pub fn caveat(name: &str) -> Option<(&'static str, bool)> {
    CAVEATS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, note, void)| (note, void))
}

/// A row of the side-by-side table: a Pecan benchmark and its Linux
/// counterpart (`None`: Linux has none, e.g. uncached mappings).
pub const ROWS: &[(&str, Option<&str>)] = &[
    ("null-syscall", Some("getppid")),
    ("ipc-intra-0w", Some("futex-threads-0w")),
    ("ipc-intra-4w", Some("futex-threads-4w")),
    ("ipc-intra-8w", Some("futex-threads-8w")),
    ("ipc-intra-16w", Some("futex-threads-16w")),
    ("ipc-inter-0w", Some("futex-shm-0w")),
    ("ipc-inter-4w", Some("futex-shm-4w")),
    ("ipc-inter-8w", Some("futex-shm-8w")),
    ("ipc-inter-16w", Some("futex-shm-16w")),
    ("ipc-inter-0w", Some("pipe-0w")),
    ("ipc-inter-4w", Some("pipe-4w")),
    ("ipc-inter-8w", Some("pipe-8w")),
    ("ipc-inter-16w", Some("pipe-16w")),
    ("ipc-inter-0w", Some("unix-0w")),
    ("ipc-inter-16w", Some("unix-16w")),
    ("notification", Some("eventfd")),
    ("ring-2", Some("ring-2")),
    ("ring-4", Some("ring-4")),
    ("ring-10", Some("ring-10")),
    ("bulk-shm", Some("bw-pipe")),
    ("bulk-shm", Some("bw-unix")),
    ("packet-stream-64k", Some("bw-pipe")),
    ("packet-stream-64k", Some("bw-unix")),
    ("packet-stream-1k", None),
    ("packet-stream-64", None),
    ("session-rpc", Some("unix-rpc-4w")),
    ("session-raw-call", None),
    ("bogomips", Some("bogomips")),
    ("memcpy-runtime", Some("memcpy-glibc")),
    ("memcpy-bytewise", Some("memcpy-bytewise")),
    ("memset-runtime", Some("memset-glibc")),
    ("uncached-write", None),
    ("uncached-read", None),
    ("smp-pingpong-1cpu", None),
    ("smp-pingpong-2cpu", None),
    ("smp-pingpong-4cpu", None),
    ("ipc-cross-cpu-0w", None),
    ("ipc-cross-cpu-busy", None),
    ("ipc-intra-0w-fpu", None),
    ("fpu-first-use", None),
    ("vm-exit", None),
    ("irq-latency", None),
    ("irq-ack", None),
    ("gui-refresh-full", None),
    ("fb-refresh-full", None),
    ("term-glyph", None),
    ("term-line", None),
    ("http-rps-1", Some("http-rps-1-linux")),
    ("http-rps-4", Some("http-rps-4-linux")),
    ("http-rps-16", Some("http-rps-16-linux")),
];

/// The rows of the virtualization table (docs/virtualization.md,
/// "Performance"): the same `bench-linux` benchmark run by Linux in Pecan's
/// VM (`scenarios/linux-vm-bench.toml`, names `vm-NAME`) and by Linux
/// natively in the same QEMU machine (`NAME`).
pub const VM_ROWS: &[(&str, &str)] = &[
    ("vm-getppid", "getppid"),
    ("vm-futex-threads-0w", "futex-threads-0w"),
    ("vm-futex-shm-0w", "futex-shm-0w"),
    ("vm-pipe-0w", "pipe-0w"),
    ("vm-unix-0w", "unix-0w"),
    ("vm-ring-2", "ring-2"),
    ("vm-ring-10", "ring-10"),
    ("vm-bw-pipe", "bw-pipe"),
    ("vm-fork", "fork"),
    ("vm-fork-exec", "fork-exec"),
    ("vm-bogomips", "bogomips"),
];

/// The name a benchmark of `bench-linux` reports under in Pecan's VM
/// (`bench-linux --vm`): `vm-NAME`, if the virtualization table has it.
pub fn vm_name(native: &str) -> Option<&'static str> {
    VM_ROWS.iter().find(|(_, n)| *n == native).map(|(v, _)| *v)
}

/// A row of the I/O table (the method: [`crate::soak`]): the same
/// transfer on both sides, `None` where a side has no benchmark yet (shown
/// as `n/a`, never a figure). Under icount the row's figure is the CPU
/// cost, busy ticks per KiB (lower is better); in wall-clock mode it is
/// the throughput, bytes per host tick (higher is better), as the median
/// of paired ratios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRow {
    pub what: &'static str,
    pub pecan: Option<&'static str>,
    pub linux: Option<&'static str>,
}

/// The I/O rows.
pub const IO_ROWS: &[IoRow] = &[
    IoRow {
        what: "virtio-blk sequential reads, 64 KiB each, no page cache",
        pecan: Some("blk-read-64k"),
        linux: Some("blk-read-64k-linux"),
    },
    IoRow {
        what: "raw block reads, 512 B each, one at a time",
        pecan: Some("blk-raw-read-512"),
        linux: Some("blk-raw-read-512-linux"),
    },
    IoRow {
        what: "raw block reads, 1 KiB each, one at a time",
        pecan: Some("blk-raw-read-1k"),
        linux: Some("blk-raw-read-1k-linux"),
    },
    IoRow {
        what: "raw block reads, 4 KiB each, one at a time",
        pecan: Some("blk-raw-read-4k"),
        linux: Some("blk-raw-read-4k-linux"),
    },
    IoRow {
        what: "raw block reads, 16 KiB each, one at a time",
        pecan: Some("blk-raw-read-16k"),
        linux: Some("blk-raw-read-16k-linux"),
    },
    IoRow {
        what: "raw block reads, 64 KiB each, one at a time",
        pecan: Some("blk-raw-read-64k"),
        linux: Some("blk-raw-read-64k-linux"),
    },
    IoRow {
        what: "raw block reads, 256 KiB each, one at a time",
        pecan: Some("blk-raw-read-256k"),
        linux: Some("blk-raw-read-256k-linux"),
    },
    IoRow {
        what: "raw block reads, 1 MiB each, one at a time",
        pecan: Some("blk-raw-read-1m"),
        linux: Some("blk-raw-read-1m-linux"),
    },
    IoRow {
        what: "raw block writes, 512 B each, one at a time",
        pecan: Some("blk-raw-write-512"),
        linux: Some("blk-raw-write-512-linux"),
    },
    IoRow {
        what: "raw block writes, 1 KiB each, one at a time",
        pecan: Some("blk-raw-write-1k"),
        linux: Some("blk-raw-write-1k-linux"),
    },
    IoRow {
        what: "raw block writes, 4 KiB each, one at a time",
        pecan: Some("blk-raw-write-4k"),
        linux: Some("blk-raw-write-4k-linux"),
    },
    IoRow {
        what: "raw block writes, 16 KiB each, one at a time",
        pecan: Some("blk-raw-write-16k"),
        linux: Some("blk-raw-write-16k-linux"),
    },
    IoRow {
        what: "raw block writes, 64 KiB each, one at a time",
        pecan: Some("blk-raw-write-64k"),
        linux: Some("blk-raw-write-64k-linux"),
    },
    IoRow {
        what: "raw block writes, 256 KiB each, one at a time",
        pecan: Some("blk-raw-write-256k"),
        linux: Some("blk-raw-write-256k-linux"),
    },
    IoRow {
        what: "raw block writes, 1 MiB each, one at a time",
        pecan: Some("blk-raw-write-1m"),
        linux: Some("blk-raw-write-1m-linux"),
    },
    IoRow {
        what: "file reads through the file system, 512 B each",
        pecan: Some("fat-read-512"),
        linux: Some("fat-read-512-linux"),
    },
    IoRow {
        what: "file reads through the file system, 1 KiB each",
        pecan: Some("fat-read-1k"),
        linux: Some("fat-read-1k-linux"),
    },
    IoRow {
        what: "file reads through the file system, 4 KiB each",
        pecan: Some("fat-read-4k"),
        linux: Some("fat-read-4k-linux"),
    },
    IoRow {
        what: "file reads through the file system, 16 KiB each",
        pecan: Some("fat-read-16k"),
        linux: Some("fat-read-16k-linux"),
    },
    IoRow {
        what: "file reads through the file system, 64 KiB each",
        pecan: Some("fat-read-64k"),
        linux: Some("fat-read-64k-linux"),
    },
    IoRow {
        what: "file reads through the file system, 256 KiB each",
        pecan: Some("fat-read-256k"),
        linux: Some("fat-read-256k-linux"),
    },
    IoRow {
        what: "file reads through the file system, 1 MiB each",
        pecan: Some("fat-read-1m"),
        linux: Some("fat-read-1m-linux"),
    },
    IoRow {
        what: "file writes through the file system, 512 B each",
        pecan: Some("fat-write-512"),
        linux: Some("fat-write-512-linux"),
    },
    IoRow {
        what: "file writes through the file system, 1 KiB each",
        pecan: Some("fat-write-1k"),
        linux: Some("fat-write-1k-linux"),
    },
    IoRow {
        what: "file writes through the file system, 4 KiB each",
        pecan: Some("fat-write-4k"),
        linux: Some("fat-write-4k-linux"),
    },
    IoRow {
        what: "file writes through the file system, 16 KiB each",
        pecan: Some("fat-write-16k"),
        linux: Some("fat-write-16k-linux"),
    },
    IoRow {
        what: "file writes through the file system, 64 KiB each",
        pecan: Some("fat-write-64k"),
        linux: Some("fat-write-64k-linux"),
    },
    IoRow {
        what: "file writes through the file system, 256 KiB each",
        pecan: Some("fat-write-256k"),
        linux: Some("fat-write-256k-linux"),
    },
    IoRow {
        what: "file writes through the file system, 1 MiB each",
        pecan: Some("fat-write-1m"),
        linux: Some("fat-write-1m-linux"),
    },
    IoRow {
        what: "TCP, the guest transmitting, 64 B writes (Nagle off)",
        pecan: Some("net-tcp-tx-64"),
        linux: Some("net-tcp-tx-64-linux"),
    },
    IoRow {
        what: "TCP, the guest transmitting, 1024 B writes",
        pecan: Some("net-tcp-tx-1k"),
        linux: Some("net-tcp-tx-1k-linux"),
    },
    IoRow {
        what: "TCP, the guest transmitting, 1450 B writes",
        pecan: Some("net-tcp-tx-1450"),
        linux: Some("net-tcp-tx-1450-linux"),
    },
    IoRow {
        what: "TCP, the guest receiving, 64 B reads",
        pecan: Some("net-tcp-rx-64"),
        linux: Some("net-tcp-rx-64-linux"),
    },
    IoRow {
        what: "TCP, the guest receiving, 1024 B reads",
        pecan: Some("net-tcp-rx-1k"),
        linux: Some("net-tcp-rx-1k-linux"),
    },
    IoRow {
        what: "TCP, the guest receiving, 1450 B reads",
        pecan: Some("net-tcp-rx-1450"),
        linux: Some("net-tcp-rx-1450-linux"),
    },
    IoRow {
        what: "UDP, the guest transmitting, 64 B datagrams",
        pecan: Some("net-udp-tx-64"),
        linux: Some("net-udp-tx-64-linux"),
    },
    IoRow {
        what: "UDP, the guest transmitting, 1024 B datagrams",
        pecan: Some("net-udp-tx-1k"),
        linux: Some("net-udp-tx-1k-linux"),
    },
    IoRow {
        what: "UDP, the guest transmitting, 1450 B datagrams",
        pecan: Some("net-udp-tx-1450"),
        linux: Some("net-udp-tx-1450-linux"),
    },
    IoRow {
        what: "UDP, the guest receiving, 64 B datagrams",
        pecan: Some("net-udp-rx-64"),
        linux: Some("net-udp-rx-64-linux"),
    },
    IoRow {
        what: "UDP, the guest receiving, 1024 B datagrams",
        pecan: Some("net-udp-rx-1k"),
        linux: Some("net-udp-rx-1k-linux"),
    },
    IoRow {
        what: "UDP, the guest receiving, 1450 B datagrams",
        pecan: Some("net-udp-rx-1450"),
        linux: Some("net-udp-rx-1450-linux"),
    },
    IoRow {
        what: "TCP, the guest transmitting, 1450 B writes, 1 % of the segments lost",
        pecan: Some("net-tcp-tx-1450-loss"),
        linux: Some("net-tcp-tx-1450-loss-linux"),
    },
    IoRow {
        what: "TCP, the guest receiving, 1450 B reads, 1 % of the segments lost",
        pecan: Some("net-tcp-rx-1450-loss"),
        linux: Some("net-tcp-rx-1450-loss-linux"),
    },
];

/// The Pecan benchmark called `name`, whoever runs it.
pub fn find_pecan(name: &str) -> Option<&'static Bench> {
    ALL.iter().find(|b| b.platform.is_pecan() && b.name == name)
}

/// The benchmark called `name` on `platform`.
pub fn find(platform: Platform, name: &str) -> Option<&'static Bench> {
    ALL.iter()
        .find(|b| b.platform == platform && b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_name_known_benchmarks_and_names_are_unique() {
        for (pecan, linux) in ROWS {
            assert!(find_pecan(pecan).is_some(), "{pecan}");
            if let Some(l) = linux {
                assert!(find(Platform::Linux, l).is_some(), "{l}");
            }
        }
        for (vm, native) in VM_ROWS {
            assert!(find_pecan(vm).is_some(), "{vm}");
            assert!(find(Platform::Linux, native).is_some(), "{native}");
            assert_eq!(vm.strip_prefix("vm-"), Some(*native));
            assert_eq!(vm_name(native), Some(*vm));
        }
        for row in IO_ROWS {
            if let Some(p) = row.pecan {
                assert!(find_pecan(p).is_some(), "{p}");
            }
            if let Some(l) = row.linux {
                assert!(find(Platform::Linux, l).is_some(), "{l}");
            }
        }
        for (i, a) in ALL.iter().enumerate() {
            for b in &ALL[i + 1..] {
                assert!(
                    !(a.name == b.name && a.platform.is_pecan() == b.platform.is_pecan()),
                    "{}",
                    a.name
                );
            }
        }
    }
}
