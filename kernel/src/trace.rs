//! The kernel trace buffer (cargo feature `trace`, off by default):
//! per-CPU rings of fixed-size event records with TSC timestamps, dumped
//! over the serial console when the machine ends, which `cargo xtask
//! trace` turns into a Chrome-trace/Perfetto JSON (docs/profiling.md).
//!
//! **Only in a trace kernel.** This module and every call into it are
//! compiled only with the feature: the call sites use the `trace!` macro
//! (`main.rs`), which expands to nothing without it, so the normal
//! kernel's hot paths hold no trace code at all — not a test of a flag —
//! and its budgets (`bench/budgets.toml`) cannot move. A trace kernel
//! also turns the assembly IPC fast path off (as `pecan.fastpath=off`
//! does): every `Call` and `ReplyRecv` takes the general path, where the
//! records are written in Rust. So a trace shows the general path's
//! timing, not the fast path's (docs/profiling.md gives both costs).
//!
//! **Records** ([`formats::trace::Record`]): TSC, the thread's id
//! (`Thread::id`: stable for the thread's life and never reused, which a
//! TCB address is not), the kind and four argument words. The kinds and
//! what their arguments mean are `formats::trace::Kind`.
//!
//! **Rings.** One per CPU, in static memory (the kernel has no heap): a
//! pool of [`POOL`] records (56 bytes each: 896 KiB of BSS, only in a
//! trace kernel; the kernel image must end below 4 MiB,
//! `abi::bootinfo::KERNEL_IMAGE_END_MAX`) shared evenly among the CPUs
//! online when root starts — 16384 records on one CPU, 8192 each on two.
//! Only the CPU itself writes its ring, with interrupts
//! masked, so a record needs no lock; the words are atomics written with
//! relaxed stores (plain `mov`s on x86) so that the dump may read a ring
//! another CPU is still writing (a crash on SMP) without undefined
//! behaviour — at worst it sees a half-written record. **When a ring is
//! full the oldest record is overwritten**: the end of a run (where a
//! crash or a hang is) matters more than its start; the dump says how many
//! records each CPU lost. Thread names are therefore not records but a
//! table of their own ([`NAMES`] entries, first come; a name given again
//! replaces the old one), so they survive any number of events.
//!
//! **Cost of a record**: the stop flag, the CPU index (GS), the ring's
//! length and count, the slot (a division: any number of CPUs), `rdtsc`,
//! seven stores and the count's store, plus gathering the arguments
//! (thread ids, the message label from the sender's frame, the previous
//! thread): measured about 55 instructions per event under icount, 164
//! per traced one-way IPC of three events (docs/profiling.md).
//!
//! **Dump** ([`dump`]): called by `exit::exit`, the one way the machine
//! ends (power-off, panic, kernel exception, a failed boot), and after
//! `pecan.trace=SECS` seconds of guest time by the timer tick. It stops
//! recording first, then writes the text lines of `formats::trace`.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use formats::trace::{Hex, Kind, Line, Record, NAME_MAX, PREFIX};

use crate::arch::{cpu, percpu};
use crate::thread::ThreadRef;
use crate::token::Threads;

/// Records of all rings together.
pub const POOL: usize = 16384;

/// Thread names kept.
pub const NAMES: usize = 256;

/// Words of a record: tsc, thread, kind, four arguments.
const WORDS: usize = 7;

/// Every CPU's ring: CPU `c`'s is `RECORDS[c * len..(c + 1) * len]`, `len`
/// = [`RING_LEN`].
static RECORDS: [[AtomicU64; WORDS]; POOL] = [const { [const { AtomicU64::new(0) }; WORDS] }; POOL];

/// Records per CPU ring: [`POOL`] shared among the CPUs online, set by
/// [`start`] (0 before: nothing is recorded).
static RING_LEN: AtomicU64 = AtomicU64::new(0);

/// Records each CPU wrote since [`start`] (the next goes to `written %
/// len` of its ring).
static WRITTEN: [AtomicU64; percpu::MAX_CPUS] = [const { AtomicU64::new(0) }; percpu::MAX_CPUS];

/// The thread each CPU ran last (0: none, idle), for `Run`'s argument and
/// to leave out a `Run` of the thread already running.
static LAST: [AtomicU64; percpu::MAX_CPUS] = [const { AtomicU64::new(0) }; percpu::MAX_CPUS];

/// Thread id (0: free) and name bytes (NUL-padded) of each name entry.
static NAME_TABLE: [[AtomicU64; 1 + NAME_MAX / 8]; NAMES] =
    [const { [const { AtomicU64::new(0) }; 1 + NAME_MAX / 8] }; NAMES];

/// Set once the dump begins: nothing is recorded after.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Guest-time limit in timer ticks (0: none), from `pecan.trace=SECS`.
static DEADLINE_TICKS: AtomicU64 = AtomicU64::new(0);

/// Records an event of `kind` about thread `thread` (an id; 0: none) on
/// this CPU.
#[inline]
pub fn record(thread: u64, kind: Kind, args: [u64; 4]) {
    if STOPPED.load(Relaxed) {
        return;
    }
    let len = RING_LEN.load(Relaxed) as usize;
    let cpu = percpu::this_cpu_index() as usize;
    let Some(written) = WRITTEN.get(cpu) else {
        return;
    };
    let n = written.load(Relaxed);
    // `start` made `len * cpus <= POOL`; before it `len` is 0.
    let Some(slot) = RECORDS.get(cpu * len + (n as usize).checked_rem(len).unwrap_or(POOL)) else {
        return;
    };
    let words = [
        cpu::rdtsc(),
        thread,
        kind as u64,
        args[0],
        args[1],
        args[2],
        args[3],
    ];
    for (place, word) in slot.iter().zip(words) {
        place.store(word, Relaxed);
    }
    written.store(n + 1, Relaxed);
}

/// Records an event of `kind` about thread `t`.
#[inline]
pub fn event(threads: &Threads, t: ThreadRef, kind: Kind, args: [u64; 4]) {
    record(id(threads, t), kind, args);
}

/// `TraceName`: names thread `t` in the trace and in the kernel's own
/// messages (`Thread::name`, 16 bytes of it).
pub fn name_thread(threads: &mut Threads, t: ThreadRef, words: [u64; NAME_MAX / 8]) {
    let mut bytes = [0u8; NAME_MAX];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    let len = bytes.iter().position(|&b| b == 0).unwrap_or(NAME_MAX);
    // Decode checked that the name is UTF-8; cut at a character boundary.
    let text = core::str::from_utf8(&bytes[..len]).unwrap_or("");
    let mut short = text.len().min(16);
    while !text.is_char_boundary(short) {
        short -= 1;
    }
    threads.get_mut(t).set_name(&text[..short]);
    name(id(threads, t), words);
}

/// The id of thread `t`.
#[inline]
pub fn id(threads: &Threads, t: ThreadRef) -> u64 {
    threads.get(t).id
}

/// Whether each CPU signals a notification for an interrupt
/// ([`in_interrupt`]).
static IN_INTERRUPT: [AtomicBool; percpu::MAX_CPUS] =
    [const { AtomicBool::new(false) }; percpu::MAX_CPUS];

/// This CPU starts (`true`) or ends signalling for an interrupt: the
/// signal is the kernel's (thread 0), not the interrupted thread's.
pub fn in_interrupt(on: bool) {
    if let Some(flag) = IN_INTERRUPT.get(percpu::this_cpu_index() as usize) {
        flag.store(on, Relaxed);
    }
}

/// The id of the thread that entered the kernel on this CPU (0: none, or
/// the kernel acts for an interrupt).
pub fn current_id(threads: &Threads) -> u64 {
    let cpu = percpu::this_cpu_index() as usize;
    if IN_INTERRUPT.get(cpu).is_some_and(|f| f.load(Relaxed)) {
        return 0;
    }
    crate::thread::current().map_or(0, |t| id(threads, t))
}

/// Thread `thread` starts running on this CPU (left out when it is the
/// one that ran last: a return to the same thread is no switch).
pub fn run(thread: u64) {
    let Some(last) = LAST.get(percpu::this_cpu_index() as usize) else {
        return;
    };
    let before = last.swap(thread, Relaxed);
    if before != thread {
        record(thread, Kind::Run, [before, 0, 0, 0]);
    }
}

/// This CPU has nothing to run.
pub fn idle() {
    if let Some(last) = LAST.get(percpu::this_cpu_index() as usize) {
        if last.swap(0, Relaxed) != 0 {
            record(0, Kind::Idle, [0; 4]);
        }
    }
}

/// The label of the message thread `t` sends as `kind` (its registers for
/// a send or call, the kernel's message for a fault or exit).
pub fn label(threads: &Threads, t: ThreadRef, kind: crate::thread::SendKind) -> u64 {
    use crate::thread::SendKind;
    let thread = threads.get(t);
    match kind {
        SendKind::Send | SendKind::Call => abi::MsgInfo(thread.context.0.rsi).label(),
        SendKind::Fault | SendKind::Exit => thread.kernel_msg[0],
    }
}

/// Thread `receiver` takes the message `sender` sends as `kind` with
/// `badge` (before the transfer: the sender's label is still in its
/// registers).
pub fn received(
    threads: &Threads,
    receiver: ThreadRef,
    sender: ThreadRef,
    badge: u64,
    kind: crate::thread::SendKind,
) {
    event(
        threads,
        receiver,
        Kind::Receive,
        [
            id(threads, sender),
            badge,
            send_kind(kind),
            label(threads, sender, kind),
        ],
    );
}

/// `server` answers `caller`: the server's `Reply`, and the caller's
/// `Receive` of the reply (a fault's reply only resumes the caller).
pub fn replied(threads: &Threads, server: ThreadRef, caller: ThreadRef) {
    let (s, c) = (id(threads, server), id(threads, caller));
    record(s, Kind::Reply, [c, 0, 0, 0]);
    let label = abi::MsgInfo(threads.get(server).context.0.rsi).label();
    let kind = formats::trace::SendKind::Reply as u64;
    record(c, Kind::Receive, [s, 0, kind, label]);
}

/// The trace's numbering of a kernel send kind.
pub fn send_kind(kind: crate::thread::SendKind) -> u64 {
    use crate::thread::SendKind as K;
    use formats::trace::SendKind as T;
    (match kind {
        K::Send => T::Send,
        K::Call => T::Call,
        K::Fault => T::Fault,
        K::Exit => T::Exit,
    }) as u64
}

/// Names thread `id` (`TraceName`; the loader for root): `words` are the
/// name's bytes, little-endian, NUL-padded. A full table drops the name.
pub fn name(id: u64, words: [u64; NAME_MAX / 8]) {
    let entry = NAME_TABLE
        .iter()
        .find(|e| e[0].load(Relaxed) == id)
        .or_else(|| NAME_TABLE.iter().find(|e| e[0].load(Relaxed) == 0));
    if let Some(entry) = entry {
        for (place, word) in entry[1..].iter().zip(words) {
            place.store(word, Relaxed);
        }
        entry[0].store(id, Relaxed);
    }
}

/// Reads `pecan.trace=SECS` (a guest-time limit; absent or 0: until the
/// machine ends). `Err` holds a value that is not a number.
pub fn init(cmdline: &str) -> Result<(), ()> {
    let secs = match formats::cmdline::value(cmdline, "pecan.trace") {
        None => 0,
        Some(v) => v.parse::<u64>().map_err(|_| ())?,
    };
    DEADLINE_TICKS.store(secs.saturating_mul(crate::time::HZ), Relaxed);
    if secs != 0 {
        crate::kprintln!("trace: dumped and powered off after {secs} s of guest time");
    }
    Ok(())
}

/// Shares the records among the `cpus` CPUs online and starts recording
/// (before root starts: no thread has run yet).
pub fn start(cpus: u64) {
    let len = POOL as u64 / cpus.clamp(1, percpu::MAX_CPUS as u64);
    RING_LEN.store(len, Relaxed);
    crate::kprintln!("trace: recording kernel events ({len} records per CPU, oldest overwritten)");
}

/// The boot CPU's timer tick `ticks`: at the guest-time limit, dump and
/// power off with success.
pub fn on_tick(ticks: u64) {
    let deadline = DEADLINE_TICKS.load(Relaxed);
    if deadline != 0 && ticks >= deadline && !STOPPED.load(Relaxed) {
        crate::kprintln!(
            "trace: {} s of guest time: powering off",
            deadline / crate::time::HZ
        );
        crate::exit::exit(crate::exit::ExitCode::Success);
    }
}

/// Writes the names and every CPU's ring to the console (once; recording
/// stops first). Called on every way the machine ends.
pub fn dump() {
    if STOPPED.load(Relaxed) {
        return;
    }
    // The end of the run (of every slice still open).
    record(0, Kind::Dump, [0; 4]);
    if STOPPED.swap(true, Relaxed) {
        return;
    }
    let cpus = crate::arch::cpu_count().clamp(1, percpu::MAX_CPUS as u64);
    let len = RING_LEN.load(Relaxed);
    crate::kprintln!("{}", Line::Begin { cpus, ring: len });
    for entry in &NAME_TABLE {
        let id = entry[0].load(Relaxed);
        if id == 0 {
            continue;
        }
        let mut bytes = [0u8; NAME_MAX];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(&entry[1..]) {
            chunk.copy_from_slice(&word.load(Relaxed).to_le_bytes());
        }
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(NAME_MAX);
        crate::kprintln!("{PREFIX}name {id:x} {}", Hex(&bytes[..len]));
    }
    for (cpu, written) in WRITTEN.iter().enumerate().take(cpus as usize) {
        let written = written.load(Relaxed);
        let first = written.saturating_sub(len);
        for n in first..written {
            let Some(slot) = RECORDS.get(cpu * len as usize + (n % len) as usize) else {
                break;
            };
            let w: [u64; WORDS] = core::array::from_fn(|i| slot[i].load(Relaxed));
            let record = Record {
                tsc: w[0],
                thread: w[1],
                kind: w[2],
                args: [w[3], w[4], w[5], w[6]],
            };
            crate::kprintln!(
                "{}",
                Line::Event {
                    cpu: cpu as u64,
                    record
                }
            );
        }
        crate::kprintln!(
            "{}",
            Line::Lost {
                cpu: cpu as u64,
                lost: first
            }
        );
    }
    crate::kprintln!("{}", Line::End);
}
