//! test-smp: the kernel's SMP support, seen from a component with its own
//! capability space and address space (`pecan.start=test-smp:ARG+own`, a
//! scenario's `own = ["cspace", "vspace"]`): it makes and configures
//! threads.
//!
//! | check | what |
//! |-------|------|
//! | `cpu-count` | the CPU count, learnt from the component's CPU set (`rt::cpu::count`), is the argument's (the machine's), and so is the count found by asking `ThreadSetSchedParams` for each CPU (`InvalidArgument` above the last) |
//! | `pingpong-per-cpu` | a client and a server thread on each CPU, all pairs started at once, [`ROUNDS`] calls each; every client finishes (its exit code: CPU and ticks per round trip, printed) |
//! | `cross-cpu-call` | the main thread on CPU 0 calls a server on CPU 1 [`ROUNDS`] times; every answer is right, and the one-way time (half a round trip, printed) is far below a timer period: the remote CPU is woken by an IPI, not by its next tick |
//! | `cross-cpu-call-busy` | the same while a lower-priority thread spins on CPU 1: each call's IPI preempts it (median one-way printed, same bound) |
//! | `unmap-reaches-other-cpu` | a thread on CPU 1 writes a page in a loop; the main thread unmaps it; the writer's next write faults (a stale TLB entry on CPU 1 would let it write on and the fault would never come) |
//! | `move-running` | a thread spinning on CPU 1 (counting) is moved to CPU 0 and back while it runs, suspended (the count stands still), resumed (it counts again); each step is printed (`test-smp: spinner STEP: Ok(true)`) |
//! | `destroy-running` | the spinning thread is destroyed while it runs on CPU 1: the count stands still, the kernel carries on |
//! | `fpu-moves-with-thread` | a thread keeps a value in `xmm0`, checks it 20 000 times, moves itself to the other CPU (its state live on the one it leaves), 20 times between CPU 1 and CPU 0, where the main thread waits with another value in its own `xmm0`: neither ever sees a foreign value |
//! | `cpu1-progress-while-cpu0-yields`, `cpu1-progress-while-cpu0-computes`, `cpu1-syscalls-while-cpu0-yields` | (bit `0x400` only) threads on CPU 1 get their CPU while the main thread keeps CPU 0 busy without `pause`: a spinner counts while CPU 0 yields, then while it computes; a helper's system calls get through while CPU 0 yields (`progress_checks`) |
//!
//! The argument is the number of CPUs the machine has; with one, the
//! cross-CPU checks are reported as skipped. Bit `0x100` runs only the
//! stress checks (`ipc-under-writers`, `shared-endpoint-under-writers`:
//! see [`stress`]), bit `0x400` only the progress checks
//! (`progress_checks`, under icount: `tests/smp-2-progress.toml`), bit
//! `0x200` only the CPU-set checks
//! (`cpu_set_checks`: `cpu-set`, `cpu-set-probe`,
//! `cpu-set-superset-refused`, `place-each-cpu`, `narrowed-thread`), with
//! the set the component expects in bits 16..24 (0: every CPU) — under
//! init with `cpus = [1, 2]` (`tests/cpu-set.toml`) and under root with
//! every CPU (`tests/cpu-set-root.toml`). All other checks assume the set
//! is CPUs 0..n, as root gives it.
//!
//! For the benchmark lab (`scenarios/smp-bench-N.toml`, `bench` catalog) it
//! prints `BENCH` lines: `smp-pingpong-Ncpu` ([`PINGPONG_SAMPLES`] runs of
//! all pairs; each sample is the span from the first client's start to the
//! last one's end divided by pairs × [`ROUNDS`]: under icount QEMU runs the
//! vCPUs in turns on one clock, so that is the instructions all CPUs spend
//! per round trip — equal to the one-CPU figure when sharing the machine
//! costs nothing, which on hardware, where the CPUs run at once, is
//! N-fold throughput) and, with two CPUs or more, `ipc-cross-cpu-0w` (half of each
//! cross-CPU round trip after a warm-up) and `ipc-cross-cpu-busy` (the
//! same with CPU 1 busy). Ticks are TSC ticks: under
//! `-icount` (the tests that bound latency use it) instructions, and a
//! timer period (10 ms) is 10 000 000 of them.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use core::sync::atomic::{AtomicU64, Ordering};

use rt::abi::caddr::own;
use rt::abi::cpu::CpuSet;
use rt::abi::fault::{LABEL_EXIT, LABEL_PAGE_FAULT};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{Error, MsgInfo, ObjectType};
use rt::check::Checks;
use rt::interfaces::child;
use rt::println;
use rt::syscall;

rt::entry!(main);

/// Most CPUs tried (the kernel's limit).
const MAX_CPUS: u64 = 8;
/// Calls per client.
const ROUNDS: u64 = 2000;
/// `arg` bit: only the stress check (`stress`), meant to run without
/// icount, where the vCPUs do run at the same time.
const STRESS: u64 = 0x100;
/// `arg` bit: only the CPU-set checks (`cpu_set_checks`); bits 16..24 of
/// `arg` are the set the component expects (0: every CPU of the machine).
const CPU_SET: u64 = 0x200;
/// `arg` bit: only the progress checks (`progress_checks`): threads on
/// CPU 1 make progress while the main thread keeps CPU 0 busy.
const PROGRESS: u64 = 0x400;
/// How long (TSC ticks; under icount instructions of all CPUs together)
/// each progress check keeps CPU 0 busy: 10 timer periods.
const PROGRESS_WINDOW: u64 = 100_000_000;
/// The least count of the spinner in a progress check: its loop is two
/// instructions (an `inc` of memory and a jump), so this is a tenth of the
/// window spent on CPU 1, where an even share is half of it.
const PROGRESS_MIN: u64 = PROGRESS_WINDOW / 20;
/// Rounds of the stress check's writer (see `stress`).
const STRESS_ROUNDS: u64 = 300;
/// Ping-pong runs (samples of the figure): all pairs, [`ROUNDS`] calls
/// each, per run.
const PINGPONG_SAMPLES: usize = 5;
/// Each client's first and last timestamp of the current run, by CPU.
static STARTS: [AtomicU64; MAX_CPUS as usize] = [const { AtomicU64::new(0) }; MAX_CPUS as usize];
static ENDS: [AtomicU64; MAX_CPUS as usize] = [const { AtomicU64::new(0) }; MAX_CPUS as usize];

/// Cross-CPU samples reported (the first calls after the warm-up one).
const CROSS_SAMPLES: usize = 64;

/// One-way cross-CPU bound: a tenth of a timer period under icount.
const ONE_WAY_BOUND: u64 = 1_000_000;

/// Slots: the fault endpoint every helper reports to (exits, faults), an
/// endpoint per pair and one for the cross-CPU server, the threads, their
/// stacks, the shared page.
const FAULT_EP: u64 = child::FIRST_FREE as u64;
const EPS: u64 = FAULT_EP + 1; // MAX_CPUS + 1
const THREADS: u64 = EPS + MAX_CPUS + 1; // THREAD_COUNT
const PROBE: u64 = THREADS + THREAD_COUNT;
const STACKS: u64 = PROBE + 1; // one per thread
const PAGE: u64 = STACKS + THREAD_COUNT;
const PAGE_COPY: u64 = PAGE + 1;
/// A pair per CPU, the cross-CPU server, the writer, the spinner, the
/// FPU keeper, the busy loop of `ipc-cross-cpu-busy`, and for the stress
/// check a server and a client per CPU on one shared endpoint.
const THREAD_COUNT: u64 = 4 * MAX_CPUS + 5;
const SPINNER: u64 = 2 * MAX_CPUS + 2;
const KEEPER: u64 = 2 * MAX_CPUS + 3;
const BUSY: u64 = 2 * MAX_CPUS + 4;
/// The stress check's threads on the shared endpoint: the server of CPU
/// `c` is `SHARED + 2c`, its client `SHARED + 2c + 1`.
const SHARED: u64 = 2 * MAX_CPUS + 5;
/// The endpoint the stress check shares between CPUs: the cross-CPU
/// server's (which does not run in stress mode).
const SHARED_EP: u64 = EPS + MAX_CPUS;

const STACK_PAGES: u64 = 1;
const STACK_VA: u64 = 0x0000_5300_0000_0000;
const PAGE_VA: u64 = 0x0000_5400_0000_0000;
const PAGE_COPY_VA: u64 = 0x0000_5400_0010_0000;

fn stack_top(thread: u64) -> u64 {
    STACK_VA + (thread + 1) * 2 * STACK_PAGES * 4096 - 16
}

fn main(arg: u64) -> i32 {
    let machine_cpus = arg & 0xff;
    let mut t = Checks::new(machine_cpus);
    if let Err(e) = setup() {
        println!("test-smp: setup FAILED ({e:?})");
        return 1;
    }
    // The component's CPU set says how many CPUs it may use (root gives
    // its children every CPU; the tests that run this with all modes but
    // CPU_SET start it from root, so its set is CPUs 0..count).
    let cpus = u64::from(rt::cpu::count());
    if arg & CPU_SET != 0 {
        cpu_set_checks(&mut t, machine_cpus, (arg >> 16) & 0xff);
        return t.finish();
    }
    if arg & PROGRESS != 0 {
        progress_checks(&mut t, cpus);
        for i in 0..THREAD_COUNT {
            let _ = syscall::thread_suspend(THREADS + i);
        }
        return t.finish();
    }
    if arg & STRESS != 0 {
        stress(&mut t, cpus);
        for i in 0..THREAD_COUNT {
            let _ = syscall::thread_suspend(THREADS + i);
        }
        return t.finish();
    }
    println!("test-smp: {cpus} CPUs usable");
    let probed = cpu_count();
    t.expect(
        "cpu-count",
        cpus == machine_cpus && probed == cpus,
        format_args!(
            "{cpus} CPUs in its set, {probed} placeable by probing, the machine has \
             {machine_cpus}"
        ),
    );
    pingpong_per_cpu(&mut t, cpus);
    if cpus < 2 {
        println!("test-smp: one CPU: cross-CPU checks skipped");
    } else {
        // The lab's cross-CPU figures are those of a 2-CPU machine (with
        // more CPUs online every lock holder closes more gates: smp.rs).
        cross_cpu_call(&mut t, cpus == 2);
        cross_cpu_call_busy(&mut t, cpus == 2);
        unmap_reaches_other_cpu(&mut t);
        move_and_destroy_running(&mut t);
        fpu_moves_with_thread(&mut t);
    }
    // The servers wait for calls forever: stop them (the machine powers
    // off when no thread is left waiting).
    for i in 0..THREAD_COUNT {
        let _ = syscall::thread_suspend(THREADS + i);
    }
    t.finish()
}

fn setup() -> Result<(), Error> {
    let u = u64::from(child::UNTYPED);
    let vspace = u64::from(child::OWN_VSPACE);
    syscall::retype(u, ObjectType::Endpoint, 0, FAULT_EP, 1)?;
    syscall::retype(u, ObjectType::Endpoint, 0, EPS, MAX_CPUS + 1)?;
    syscall::retype(u, ObjectType::Thread, 0, THREADS, THREAD_COUNT)?;
    syscall::retype(u, ObjectType::Thread, 0, PROBE, 1)?;
    syscall::retype(u, ObjectType::Frame4K, 0, STACKS, THREAD_COUNT)?;
    syscall::retype(u, ObjectType::Frame4K, 0, PAGE, 1)?;
    syscall::cap_copy(own(PAGE as u32), own(PAGE_COPY as u32))?;
    let rw = MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    };
    for i in 0..THREAD_COUNT {
        // SAFETY: STACK_VA.. is reserved for the helpers' stacks (one page
        // each, with an unmapped page between them).
        unsafe { syscall::map(vspace, STACKS + i, STACK_VA + i * 2 * 4096 + 4096, rw)? };
        syscall::thread_configure(THREADS + i, child::OWN_CSPACE.into(), vspace, 0, FAULT_EP)?;
    }
    syscall::thread_configure(PROBE, child::OWN_CSPACE.into(), vspace, 0, FAULT_EP)?;
    // SAFETY: PAGE_VA and PAGE_COPY_VA are reserved for the shared page.
    unsafe {
        syscall::map(vspace, PAGE, PAGE_VA, rw)?;
        syscall::map(vspace, PAGE_COPY, PAGE_COPY_VA, rw)?;
    }
    Ok(())
}

/// How many CPUs threads may be placed on, learnt the hard way: the first
/// CPU `ThreadSetSchedParams` refuses with `InvalidArgument` (docs/abi.md)
/// — a cross-check of the CPU set's count for a set `0..n`.
fn cpu_count() -> u64 {
    (1..MAX_CPUS)
        .find(|&cpu| {
            syscall::thread_set_sched_params(PROBE, child::PRIORITY, cpu as u32)
                == Err(Error::InvalidArgument)
        })
        .unwrap_or(MAX_CPUS)
}

/// The CPU-set checks (arg bit [`CPU_SET`]; `expected`: the set the
/// scenario gave, 0 for every CPU of the machine's `machine_cpus`):
///
/// - `cpu-set`: `rt::cpu::set()` is the expected set;
/// - `cpu-set-probe`: `ThreadSetSchedParams` places a thread on each CPU
///   of the set and refuses every other CPU up to the kernel's limit
///   (`InvalidArgument`);
/// - `cpu-set-superset-refused`: a thread cannot be given a set beyond the
///   component's own (its set plus the first CPU outside it), but can be
///   given a part of it;
/// - `place-each-cpu`: a helper put on each CPU of the set with
///   `rt::cpu::place` runs and reports, seeing the component's set as its
///   own;
/// - `narrowed-thread` (two CPUs or more): a helper placed on the set's
///   second CPU with the set of that CPU alone sees that set and can place
///   a thread on its CPU but not on the set's first one.
fn cpu_set_checks(t: &mut Checks, machine_cpus: u64, expected: u64) {
    let set = rt::cpu::set();
    let expected = match expected {
        0 => CpuSet::range(0, machine_cpus as u32),
        bits => CpuSet(bits),
    };
    println!("test-smp: cpu set {set} ({} CPUs)", set.count());
    t.expect(
        "cpu-set",
        set == expected,
        format_args!("set {set}, expected {expected}"),
    );

    // Every CPU up to the kernel's limit: placeable if and only if in the set.
    let mut refused = CpuSet::EMPTY;
    let mut wrong = None;
    for cpu in 0..MAX_CPUS as u32 {
        let r = syscall::thread_place(PROBE, child::PRIORITY, cpu, CpuSet::EMPTY);
        if r == Err(Error::InvalidArgument) {
            refused = CpuSet(refused.bits() | CpuSet::single(cpu).bits());
        }
        if r.is_ok() != set.contains(cpu) || (r.is_err() && r != Err(Error::InvalidArgument)) {
            wrong = wrong.or(Some((cpu, r)));
        }
    }
    println!("test-smp: placing refused (InvalidArgument) on CPUs {refused}");
    t.expect(
        "cpu-set-probe",
        wrong.is_none(),
        format_args!("placing on CPU {wrong:?}"),
    );

    let first = set.nth(0).unwrap_or(0);
    let outside = (0..64).find(|&cpu| !set.contains(cpu)).unwrap_or(63);
    let beyond = CpuSet(set.bits() | CpuSet::single(outside).bits());
    let wider = syscall::thread_place(PROBE, child::PRIORITY, first, beyond);
    let part = syscall::thread_place(PROBE, child::PRIORITY, first, CpuSet::single(first));
    println!("test-smp: set {beyond} for a thread: {wider:?}; set {first}: {part:?}");
    t.expect(
        "cpu-set-superset-refused",
        wider == Err(Error::InvalidArgument) && part == Ok(()),
        format_args!("{wider:?}, {part:?}"),
    );

    let mut reported = CpuSet::EMPTY;
    let mut all_ran = true;
    for n in 0..set.count() {
        let placed = rt::cpu::place(THREADS + u64::from(n), child::PRIORITY, n)
            .and_then(|cpu| start_placed(u64::from(n), reporter, u64::from(cpu)));
        match placed.and_then(|()| report()) {
            Ok((LABEL_EXIT, words)) => {
                let (cpu, seen) = ((words[0] >> 8) & 0xff, CpuSet(words[0] & 0xff));
                println!("test-smp: helper on cpu {cpu} ran, its set {seen}");
                all_ran &= seen == set && CpuSet::single(cpu as u32).is_subset_of(set);
                reported = CpuSet(reported.bits() | CpuSet::single(cpu as u32).bits());
            }
            other => {
                println!("test-smp: helper {n}: {other:?}");
                all_ran = false;
            }
        }
    }
    t.expect(
        "place-each-cpu",
        all_ran && reported == set,
        format_args!("helpers reported CPUs {reported} of {set}"),
    );

    let (Some(a), Some(b)) = (set.nth(0), set.nth(1)) else {
        println!("test-smp: one CPU in the set: narrowed-thread skipped");
        return;
    };
    let narrowed = syscall::thread_place(THREADS + NARROWED, child::PRIORITY, b, CpuSet::single(b))
        .and_then(|()| start_placed(NARROWED, narrow, u64::from(a) << 8 | u64::from(b)));
    let ok = match narrowed.and_then(|()| report()) {
        Ok((LABEL_EXIT, words)) => {
            let code = words[0] & 0xffff_ffff;
            let (seen, to_a, to_b) = (CpuSet(code & 0xff), code >> 8 & 1, code >> 9 & 1);
            println!(
                "test-smp: thread narrowed to {b}: its set {seen}, placing on CPU {a} {}, on CPU \
                 {b} {}",
                if to_a == 1 { "refused" } else { "NOT refused" },
                if to_b == 1 { "ok" } else { "FAILED" },
            );
            seen == CpuSet::single(b) && to_a == 1 && to_b == 1
        }
        other => {
            println!("test-smp: narrowed thread: {other:?}");
            false
        }
    };
    t.expect("narrowed-thread", ok, format_args!("see above"));
}

/// The helper of `narrowed-thread` and the thread it places (never
/// started): helpers the other checks use, free in this mode.
const NARROWED: u64 = SPINNER;
const NARROWED_TARGET: u64 = KEEPER;

/// The helper of `narrowed-thread`: exits with its own set, and (bits 8,
/// 9) whether placing a thread on CPU `arg >> 8` was refused and on CPU
/// `arg & 0xff` (its own) done.
extern "C" fn narrow(arg: u64) -> ! {
    let (a, b) = ((arg >> 8) as u32, (arg & 0xff) as u32);
    let target = THREADS + NARROWED_TARGET;
    let to_a = syscall::thread_place(target, child::PRIORITY, a, CpuSet::EMPTY)
        == Err(Error::InvalidArgument);
    let to_b = syscall::thread_place(target, child::PRIORITY, b, CpuSet::EMPTY).is_ok();
    let seen = rt::cpu::set().bits() & 0xff;
    syscall::thread_exit((seen | u64::from(to_a) << 8 | u64::from(to_b) << 9) as i32)
}

/// A helper of `place-each-cpu`: exits with `arg` (the CPU it was put on)
/// << 8 | its own CPU set.
extern "C" fn reporter(cpu: u64) -> ! {
    syscall::thread_exit((cpu << 8 | (rt::cpu::set().bits() & 0xff)) as i32)
}

/// Starts helper `index`, already placed, at `entry(arg)`.
fn start_placed(index: u64, entry: extern "C" fn(u64) -> !, arg: u64) -> Result<(), Error> {
    // SAFETY: the helper runs one of this file's helper bodies on its own
    // stack page.
    unsafe {
        syscall::thread_start(
            THREADS + index,
            entry as *const () as u64,
            stack_top(index),
            arg,
        )
    }
}

/// Starts helper `index` on `cpu` at `entry(arg)`.
fn start(index: u64, cpu: u64, entry: extern "C" fn(u64) -> !, arg: u64) -> Result<(), Error> {
    syscall::thread_set_sched_params(THREADS + index, child::PRIORITY, cpu as u32)?;
    start_placed(index, entry, arg)
}

/// Waits for the next report on the fault endpoint: (label, words).
fn report() -> Result<(u64, [u64; 4]), Error> {
    let (_, info, words) = syscall::recv(FAULT_EP)?;
    Ok((info.label(), words))
}

fn pingpong_per_cpu(t: &mut Checks, cpus: u64) {
    let started = (0..cpus).try_for_each(|cpu| start(2 * cpu, cpu, server, EPS + cpu));
    if let Err(e) = started {
        t.expect("pingpong-per-cpu", false, format_args!("start: {e:?}"));
        return;
    }
    let mut finished_all = true;
    let mut samples = [0u64; PINGPONG_SAMPLES];
    for (run, sample) in samples.iter_mut().enumerate() {
        let started =
            (0..cpus).try_for_each(|cpu| start(2 * cpu + 1, cpu, client, (cpu << 8) | (EPS + cpu)));
        if let Err(e) = started {
            t.expect("pingpong-per-cpu", false, format_args!("start: {e:?}"));
            return;
        }
        let mut finished = 0;
        for _ in 0..cpus {
            match report() {
                Ok((LABEL_EXIT, words)) if words[0] & 0xffff_ffff != 0xffff_ffff => {
                    let code = words[0] & 0xffff_ffff;
                    if run == 0 {
                        println!(
                            "test-smp: cpu {}: {ROUNDS} round trips, {} ticks each",
                            code >> 24,
                            code & 0xff_ffff
                        );
                    }
                    finished += 1;
                }
                other => println!("test-smp: unexpected report {other:?}"),
            }
        }
        finished_all &= finished == cpus;
        // All pairs' work over all round trips: from the first client's
        // start to the last one's end (see the module doc, "method").
        let first = STARTS
            .iter()
            .take(cpus as usize)
            .map(|a| a.load(Ordering::Relaxed))
            .min();
        let last = ENDS
            .iter()
            .take(cpus as usize)
            .map(|a| a.load(Ordering::Relaxed))
            .max();
        let span = last.unwrap_or(0).saturating_sub(first.unwrap_or(0));
        *sample = span / (cpus * ROUNDS);
    }
    println!(
        "test-smp: {cpus} pairs together: {} ticks per round trip and CPU (span of all / ({cpus} x {ROUNDS}))",
        samples[PINGPONG_SAMPLES / 2]
    );
    t.expect(
        "pingpong-per-cpu",
        finished_all,
        format_args!("not every client finished every run"),
    );
    let name = format!("smp-pingpong-{cpus}cpu");
    let what = format!(
        "ping-pong round trips (Call + ReplyRecv) of a client and a server thread on each of \
         {cpus} CPUs, all pairs started together, {ROUNDS} calls each: ticks from the first \
         client's start to the last one's end, divided by {cpus} x {ROUNDS} (under icount the \
         vCPUs take turns on one clock, so this is the instructions all CPUs spend per round \
         trip; equal to the 1-CPU figure means no cost from sharing the machine)"
    );
    bench_line(&name, &what, &samples);
}

/// A server and a client of the stress check: both at home on `home`,
/// the client calls `ep`.
#[derive(Clone, Copy)]
struct Team {
    server: u64,
    client: u64,
    home: u64,
    ep: u64,
}

/// The stress check's teams: first the ping-pong pair of each CPU (its own
/// endpoint), then the server and client of each CPU on the one shared
/// endpoint [`SHARED_EP`].
fn stress_teams(cpus: u64) -> Vec<Team> {
    let pairs = (0..cpus).map(|cpu| Team {
        server: 2 * cpu,
        client: 2 * cpu + 1,
        home: cpu,
        ep: EPS + cpu,
    });
    let shared = (0..cpus).map(|cpu| Team {
        server: SHARED + 2 * cpu,
        client: SHARED + 2 * cpu + 1,
        home: cpu,
        ep: SHARED_EP,
    });
    pairs.chain(shared).collect()
}

/// `ipc-under-writers` and `shared-endpoint-under-writers` (arg bit
/// [`STRESS`]): IPC without end through the fast path (which runs without
/// the big kernel lock when several CPUs are online) while this thread
/// changes the very threads that call with the lock held.
///
/// The callers: a ping-pong pair per CPU on its own endpoint, and one
/// endpoint [`SHARED_EP`] served by a server thread on *each* CPU and
/// called by a client thread on each CPU — the fast paths of two CPUs
/// reach the same endpoint queue. Each round of the writer
/// ([`STRESS_ROUNDS`]), for every server and client: suspend, resume, set
/// the priority again (on the CPU it is on: a *change*); and for every
/// team (a pair, or a shared-endpoint server with the client of its CPU)
/// one *move* between CPUs, in four steps over four rounds: the server to
/// another CPU (the team's IPC goes cross-CPU), the client after it (both
/// on a foreign CPU, next to its threads), the server home (cross-CPU
/// again), the client home. Teams are a round apart, so all four steps
/// happen at once; with more than two CPUs the foreign CPU changes from
/// one four-round cycle to the next. Between rounds the writer yields.
///
/// Each client sends its own tag with a sequence number and checks every
/// answer (a wrong one, or an error other than the `Aborted` of a call cut
/// short by a suspension, stops it and is printed); after the last round
/// it is told to stop and exits with its thread index. Checked:
/// every client ends right and made calls, every shared-endpoint server
/// answered some, and exactly as many changes and moves as asked for
/// succeeded; the kernel survives. So the lock-free fast path, lock
/// holders and the fast paths of other CPUs never see each other half done
/// (smp.rs, "Same-CPU IPC without the lock").
fn stress(t: &mut Checks, cpus: u64) {
    STOP.store(0, Ordering::Relaxed);
    let teams = stress_teams(cpus);
    let started = teams.iter().try_for_each(|team| {
        start(
            team.server,
            team.home,
            sturdy_server,
            (team.server << 8) | team.ep,
        )
        .and_then(|()| {
            start(
                team.client,
                team.home,
                endless_client,
                (team.client << 8) | team.ep,
            )
        })
    });
    if let Err(e) = started {
        t.expect("ipc-under-writers", false, format_args!("start: {e:?}"));
        return;
    }
    // The CPU each thread is on (the writer alone moves them).
    let mut on = [0u64; THREAD_COUNT as usize];
    for team in &teams {
        on[team.server as usize] = team.home;
        on[team.client as usize] = team.home;
    }
    let (mut changes, mut moves) = (0u64, 0u64);
    for round in 0..STRESS_ROUNDS {
        for (n, team) in teams.iter().enumerate() {
            for index in [team.server, team.client] {
                let th = THREADS + index;
                let cpu = on[index as usize] as u32;
                let ok = syscall::thread_suspend(th).is_ok()
                    && syscall::thread_resume(th).is_ok()
                    && syscall::thread_set_sched_params(th, child::PRIORITY, cpu).is_ok();
                changes += u64::from(ok);
            }
            let step = round + n as u64;
            let away = match cpus {
                1 => team.home,
                _ => (team.home + 1 + (step / 4) % (cpus - 1)) % cpus,
            };
            let (index, cpu) = match step % 4 {
                0 => (team.server, away),
                1 => (team.client, away),
                2 => (team.server, team.home),
                _ => (team.client, team.home),
            };
            if syscall::thread_set_sched_params(THREADS + index, child::PRIORITY, cpu as u32)
                .is_ok()
            {
                on[index as usize] = cpu;
                moves += 1;
            }
        }
        let _ = syscall::yield_now();
    }
    STOP.store(1, Ordering::Relaxed);
    // Each client ends (its exit report) or has failed (it sends none).
    let mut ended = [false; THREAD_COUNT as usize];
    let failed = |index: u64| FAILED[index as usize].load(Ordering::Acquire) != 0;
    while !teams
        .iter()
        .all(|team| ended[team.client as usize] || failed(team.client))
    {
        match syscall::nb_recv(FAULT_EP) {
            Ok((_, info, words))
                if info.label() == LABEL_EXIT
                    && teams.iter().any(|team| team.client == words[0]) =>
            {
                ended[words[0] as usize] = true;
            }
            Err(Error::WouldBlock) => {
                let _ = syscall::yield_now();
            }
            Err(e) => {
                println!("test-smp: unexpected report {e:?}");
                break;
            }
            Ok(other) => println!("test-smp: unexpected report {other:?}"),
        }
    }
    let calls = |index: u64| CALLS[index as usize].load(Ordering::Relaxed);
    for team in teams.iter().filter(|team| !ended[team.client as usize]) {
        let got = GOT[team.client as usize].load(Ordering::Relaxed);
        println!(
            "test-smp: client {} (endpoint {}) failed after {} calls: {}",
            team.client,
            team.ep,
            calls(team.client),
            match Error::from_raw(got & !FAILED_WITH_ERROR) {
                Some(e) if got & FAILED_WITH_ERROR != 0 => format!("{e:?}"),
                _ => format!(
                    "answer {got:#x}, expected {:#x}",
                    (team.client << 32) | (calls(team.client) + 1)
                ),
            }
        );
    }
    let (pairs, shared) = teams.split_at(cpus as usize);
    let sum = |group: &[Team]| group.iter().map(|team| calls(team.client)).sum::<u64>();
    let answered: Vec<String> = shared
        .iter()
        .map(|team| format!("{}", calls(team.server)))
        .collect();
    println!(
        "test-smp: {cpus} pairs made {} calls, {cpus} clients of one endpoint made {} calls \
         (its {cpus} servers answered {}), while {changes} suspend/resume/priority changes and \
         {moves} moves between CPUs hit them",
        sum(pairs),
        sum(shared),
        answered.join(" + ")
    );
    let right = |group: &[Team]| {
        group
            .iter()
            .all(|team| ended[team.client as usize] && calls(team.client) > 0)
    };
    t.expect(
        "ipc-under-writers",
        right(pairs)
            && changes == STRESS_ROUNDS * teams.len() as u64 * 2
            && moves == STRESS_ROUNDS * teams.len() as u64,
        format_args!(
            "clients ended right and calling: {}, {changes} changes, {moves} moves",
            right(pairs)
        ),
    );
    t.expect(
        "shared-endpoint-under-writers",
        right(shared) && shared.iter().all(|team| calls(team.server) > 0),
        format_args!(
            "clients ended right and calling: {}, servers answered {answered:?}",
            right(shared)
        ),
    );
}

/// Calls each stress thread made (client) or answered (server), by thread
/// index; each written by its own thread only (a plain store: a `lock`ed
/// add in a tight loop is very slow under QEMU's TCG with several vCPUs).
static CALLS: [AtomicU64; THREAD_COUNT as usize] =
    [const { AtomicU64::new(0) }; THREAD_COUNT as usize];
/// What a failed stress client got, by thread index: word 0 of the wrong
/// answer, or the error with [`FAILED_WITH_ERROR`] set.
static GOT: [AtomicU64; THREAD_COUNT as usize] =
    [const { AtomicU64::new(0) }; THREAD_COUNT as usize];
const FAILED_WITH_ERROR: u64 = 1 << 63;
/// Set by a stress client that failed (after [`CALLS`] and [`GOT`]).
static FAILED: [AtomicU64; THREAD_COUNT as usize] =
    [const { AtomicU64::new(0) }; THREAD_COUNT as usize];

/// Like [`server`] on endpoint `arg & 0xff`, but a receive cut short (its
/// thread suspended and resumed meanwhile) is tried again instead of
/// ending the server; counts its answers in [`CALLS`] (thread index
/// `arg >> 8`).
extern "C" fn sturdy_server(arg: u64) -> ! {
    let (ep, count) = (
        arg & 0xff,
        &CALLS[(arg >> 8) as usize % THREAD_COUNT as usize],
    );
    let mut answered = 0;
    let mut got = syscall::recv(ep);
    loop {
        got = match got {
            Ok((_, _, words)) => {
                answered += 1;
                count.store(answered, Ordering::Relaxed);
                syscall::reply_recv(ep, MsgInfo(1), [words[0] + 1, 0, 0, 0])
            }
            Err(_) => syscall::recv(ep),
        };
    }
}

/// Tells the stress clients to stop.
static STOP: AtomicU64 = AtomicU64::new(0);

/// Calls the server on endpoint `arg & 0xff` until told to stop, each
/// call with word 0 = its thread index `arg >> 8` in the upper half, the
/// sequence number in the lower (an answer meant for another client
/// shows); counts the calls in [`CALLS`] and exits with its thread index.
/// On a wrong answer or an error it notes what it got in [`GOT`], sets
/// [`FAILED`] and stops for good (suspends itself whenever resumed).
extern "C" fn endless_client(arg: u64) -> ! {
    let (ep, index) = (arg & 0xff, (arg >> 8) as usize % THREAD_COUNT as usize);
    let tag = (index as u64) << 32;
    let mut i = 0u64;
    let fail = |i: u64, got: u64| -> ! {
        CALLS[index].store(i, Ordering::Relaxed);
        GOT[index].store(got, Ordering::Relaxed);
        FAILED[index].store(1, Ordering::Release);
        // Parked instead of ended: the writer's changes of this thread
        // still succeed (their count stays exact, so the other group's
        // check stands on its own).
        loop {
            let _ = syscall::thread_suspend(THREADS + index as u64);
        }
    };
    while STOP.load(Ordering::Relaxed) == 0 {
        match syscall::call(ep, MsgInfo(1), [tag | i, 0, 0, 0]) {
            Ok((_, words)) if words[0] == tag | (i + 1) => i += 1,
            Ok((_, words)) => fail(i, words[0]),
            // A call cut short by a suspension of the server: try again.
            Err(Error::Aborted) => {}
            Err(e) => fail(i, FAILED_WITH_ERROR | e as u64),
        }
    }
    CALLS[index].store(i, Ordering::Relaxed);
    syscall::thread_exit(index as i32)
}

/// Prints one `BENCH` line (ticks).
fn bench_line(name: &str, what: &str, samples: &[u64]) {
    let mut line = String::new();
    let mut scratch = [0u64; CROSS_SAMPLES];
    let n = samples.len().min(scratch.len());
    if bench::report(
        &mut line,
        name,
        what,
        bench::Unit::Ticks,
        &samples[..n],
        &mut scratch,
    )
    .is_ok()
    {
        let _ = syscall::debug_write(line.as_bytes());
    }
}

/// Answers every call on endpoint `ep` with its word 0 + 1.
extern "C" fn server(ep: u64) -> ! {
    let mut got = syscall::recv(ep);
    while let Ok((_, _, words)) = got {
        got = syscall::reply_recv(ep, MsgInfo(1), [words[0] + 1, 0, 0, 0]);
    }
    syscall::thread_exit(-1)
}

/// Calls the server on endpoint `arg & 0xff` [`ROUNDS`] times and exits
/// with (CPU `arg >> 8`) << 24 | ticks per round trip; -1 on a wrong
/// answer.
extern "C" fn client(arg: u64) -> ! {
    let (ep, cpu) = (arg & 0xff, arg >> 8);
    let start = syscall::rdtsc();
    for i in 0..ROUNDS {
        match syscall::call(ep, MsgInfo(1), [i, 0, 0, 0]) {
            Ok((_, words)) if words[0] == i + 1 => {}
            _ => syscall::thread_exit(-1),
        }
    }
    let end = syscall::rdtsc();
    STARTS[cpu as usize % MAX_CPUS as usize].store(start, Ordering::Relaxed);
    ENDS[cpu as usize % MAX_CPUS as usize].store(end, Ordering::Relaxed);
    let per = ((end - start) / ROUNDS).min(0xff_ffff);
    syscall::thread_exit(((cpu << 24) | per) as i32)
}

fn cross_cpu_call(t: &mut Checks, bench: bool) {
    let ep = EPS + MAX_CPUS;
    let index = 2 * MAX_CPUS;
    if let Err(e) = start(index, 1, server, ep) {
        t.expect("cross-cpu-call", false, format_args!("start: {e:?}"));
        return;
    }
    // The first call finds the server waiting (and its CPU idle).
    let _ = syscall::call(ep, MsgInfo(1), [0, 0, 0, 0]);
    let start = syscall::rdtsc();
    let mut right = 0;
    let mut samples = [0u64; CROSS_SAMPLES];
    for i in 0..ROUNDS {
        let t0 = syscall::rdtsc();
        if let Ok((_, words)) = syscall::call(ep, MsgInfo(1), [i, 0, 0, 0]) {
            right += u64::from(words[0] == i + 1);
        }
        let t1 = syscall::rdtsc();
        if let Some(s) = samples.get_mut(i as usize) {
            *s = (t1 - t0) / 2;
        }
    }
    let one_way = (syscall::rdtsc() - start) / ROUNDS / 2;
    if bench {
        bench_line(
            "ipc-cross-cpu-0w",
            "IPC Call from CPU 0 to a thread on CPU 1 blocked in ReplyRecv (its CPU idle between \
             calls: woken by IPI), 0 words; half of each round trip (the two directions cost \
             the same path)",
            &samples,
        );
    }
    println!("test-smp: cross-cpu call/reply: {ROUNDS} round trips, one-way {one_way} ticks");
    t.expect(
        "cross-cpu-call",
        right == ROUNDS && one_way < ONE_WAY_BOUND,
        format_args!(
            "{right} of {ROUNDS} answers right, one-way {one_way} ticks (bound {ONE_WAY_BOUND})"
        ),
    );
}

/// `ipc-cross-cpu-busy`: the cross-CPU calls again while a thread of
/// lower priority spins on CPU 1, so each call's IPI interrupts a running
/// thread instead of waking an idle CPU. The server is the one
/// [`cross_cpu_call`] started (still waiting on its endpoint).
fn cross_cpu_call_busy(t: &mut Checks, bench: bool) {
    let ep = EPS + MAX_CPUS;
    let busy = syscall::thread_set_sched_params(THREADS + BUSY, child::PRIORITY - 1, 1)
        // SAFETY: the busy thread runs `busy_loop` on its own stack page.
        .and_then(|()| unsafe {
            syscall::thread_start(
                THREADS + BUSY,
                busy_loop as *const () as u64,
                stack_top(BUSY),
                0,
            )
        });
    if let Err(e) = busy {
        t.expect("cross-cpu-call-busy", false, format_args!("start: {e:?}"));
        return;
    }
    let _ = syscall::call(ep, MsgInfo(1), [0, 0, 0, 0]);
    let mut right = 0;
    let mut samples = [0u64; CROSS_SAMPLES];
    for (i, s) in samples.iter_mut().enumerate() {
        let i = i as u64;
        let t0 = syscall::rdtsc();
        if let Ok((_, words)) = syscall::call(ep, MsgInfo(1), [i, 0, 0, 0]) {
            right += u64::from(words[0] == i + 1);
        }
        *s = (syscall::rdtsc() - t0) / 2;
    }
    let _ = syscall::thread_suspend(THREADS + BUSY);
    if bench {
        bench_line(
            "ipc-cross-cpu-busy",
            "IPC Call from CPU 0 to a thread on CPU 1 blocked in ReplyRecv while a lower-priority \
             thread spins on CPU 1 (the IPI preempts it), 0 words; half of each round trip",
            &samples,
        );
    }
    let mut sorted = samples;
    sorted.sort_unstable();
    let median = sorted[CROSS_SAMPLES / 2];
    println!("test-smp: cross-cpu call/reply with CPU 1 busy: one-way median {median} ticks");
    t.expect(
        "cross-cpu-call-busy",
        right == CROSS_SAMPLES as u64 && median < ONE_WAY_BOUND,
        format_args!(
            "{right} answers right, one-way median {median} ticks (bound {ONE_WAY_BOUND})"
        ),
    );
}

/// Spins (lower priority than the cross-CPU server on the same CPU).
extern "C" fn busy_loop(_: u64) -> ! {
    loop {
        core::hint::spin_loop();
    }
}

/// Writes a counter to the shared page forever (until the write faults).
extern "C" fn writer(_: u64) -> ! {
    let mut i = 1u64;
    loop {
        // SAFETY: PAGE_VA is the shared page (while it is mapped; the
        // write after the unmap faults, which is the point).
        unsafe { core::ptr::write_volatile(PAGE_VA as *mut u64, i) };
        i += 1;
    }
}

fn unmap_reaches_other_cpu(t: &mut Checks) {
    let index = 2 * MAX_CPUS + 1;
    if let Err(e) = start(index, 1, writer, 0) {
        t.expect(
            "unmap-reaches-other-cpu",
            false,
            format_args!("start: {e:?}"),
        );
        return;
    }
    let copy = PAGE_COPY_VA as *const u64;
    // The writer runs on CPU 1 and has the page in its TLB.
    // SAFETY: the second mapping of the shared page, ours until the end.
    while unsafe { core::ptr::read_volatile(copy) } < 1000 {
        core::hint::spin_loop();
    }
    // SAFETY: only the writer uses PAGE_VA.
    let unmapped = unsafe { syscall::unmap(PAGE) };
    // SAFETY: as above.
    let after_unmap = unsafe { core::ptr::read_volatile(copy) };
    let fault = report();
    // SAFETY: as above.
    let at_fault = unsafe { core::ptr::read_volatile(copy) };
    let ok = matches!(fault, Ok((LABEL_PAGE_FAULT, w)) if w[0] == PAGE_VA)
        && unmapped.is_ok()
        && at_fault == after_unmap;
    println!("test-smp: writer reached {after_unmap} when the page was unmapped, then faulted");
    let _ = syscall::thread_suspend(THREADS + index);
    t.expect(
        "unmap-reaches-other-cpu",
        ok,
        format_args!(
            "unmap {unmapped:?}, report {fault:?}, value {after_unmap} after unmap, {at_fault} at \
             the fault"
        ),
    );
}

/// Counted by the spinner.
static COUNTER: AtomicU64 = AtomicU64::new(0);

extern "C" fn spinner(_: u64) -> ! {
    // The only writer: a plain load and store (a `lock`ed add in a tight
    // loop is very slow under QEMU's TCG with several vCPUs).
    loop {
        COUNTER.store(COUNTER.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

/// The progress checks (arg bit [`PROGRESS`], two CPUs or more, under
/// icount: the bounds count instructions): threads on CPU 1 must get
/// their CPU while the main thread keeps CPU 0 busy for
/// [`PROGRESS_WINDOW`] ticks in loops that never block and execute no
/// `pause` (under QEMU's TCG a `pause` ends the vCPU's turn and lets the
/// next one run, which would hide what these checks look for; the
/// kernel's wait for a lock CPU 1 holds does pause):
///
/// - `cpu1-progress-while-cpu0-yields`: the spinner on CPU 1 counts at
///   least [`PROGRESS_MIN`] while CPU 0 calls `Yield` without end (each
///   call takes and gives back the big kernel lock);
/// - `cpu1-progress-while-cpu0-computes`: the same while CPU 0 computes
///   without a system call;
/// - `cpu1-syscalls-while-cpu0-yields`: a helper on CPU 1 calling `Null`
///   (taking the lock too) gets at least a quarter as many calls through
///   as CPU 0 yields (the ticket lock serves them in turn: about as many).
///
/// Not checked: a helper on CPU 1 making system calls while CPU 0
/// computes. Under icount QEMU 7.2 (this machine's) starves it: once
/// CPU 1 waits for the lock (`pause`), CPU 0 runs to every timer deadline
/// and CPU 1 is left a budget of 0 instructions, until CPU 0 itself
/// pauses or halts (docs/kernel.md, "SMP under icount"; fixed in QEMU
/// 8.1).
fn progress_checks(t: &mut Checks, cpus: u64) {
    if cpus < 2 {
        println!("test-smp: one CPU: progress checks skipped");
        return;
    }
    if let Err(e) = start(SPINNER, 1, spinner, 0) {
        t.expect(
            "cpu1-progress-while-cpu0-yields",
            false,
            format_args!("start: {e:?}"),
        );
        return;
    }
    let before = COUNTER.load(Ordering::Relaxed);
    let yields = yield_for(PROGRESS_WINDOW);
    let counted = COUNTER.load(Ordering::Relaxed) - before;
    println!(
        "test-smp: spinner on CPU 1 counted {counted} while CPU 0 yielded {yields} times in \
         {PROGRESS_WINDOW} ticks"
    );
    t.expect(
        "cpu1-progress-while-cpu0-yields",
        counted >= PROGRESS_MIN,
        format_args!("counted {counted}, at least {PROGRESS_MIN} expected"),
    );

    let before = COUNTER.load(Ordering::Relaxed);
    let t0 = syscall::rdtsc();
    let mut x = t0 | 1;
    let mut rounds = 0u64;
    while syscall::rdtsc() - t0 < PROGRESS_WINDOW {
        for _ in 0..1000 {
            // xorshift: work whose result is used (printed below).
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        rounds += 1;
    }
    let counted = COUNTER.load(Ordering::Relaxed) - before;
    println!(
        "test-smp: spinner on CPU 1 counted {counted} while CPU 0 computed {rounds} rounds in \
         {PROGRESS_WINDOW} ticks (xorshift {:#x})",
        x & 0xff
    );
    t.expect(
        "cpu1-progress-while-cpu0-computes",
        counted >= PROGRESS_MIN,
        format_args!("counted {counted}, at least {PROGRESS_MIN} expected"),
    );

    // The helper alone on CPU 1.
    let _ = syscall::thread_suspend(THREADS + SPINNER);
    if let Err(e) = start(BUSY, 1, null_caller, 0) {
        t.expect(
            "cpu1-syscalls-while-cpu0-yields",
            false,
            format_args!("start: {e:?}"),
        );
        return;
    }
    let before = NULL_CALLS.load(Ordering::Relaxed);
    let yields = yield_for(PROGRESS_WINDOW);
    let calls = NULL_CALLS.load(Ordering::Relaxed) - before;
    println!(
        "test-smp: helper on CPU 1 made {calls} system calls while CPU 0 yielded {yields} times \
         in {PROGRESS_WINDOW} ticks"
    );
    t.expect(
        "cpu1-syscalls-while-cpu0-yields",
        calls >= yields / 4 && yields > 0,
        format_args!("{calls} calls, at least {} expected", yields / 4),
    );
}

/// Calls `Yield` (without pause) until `ticks` have passed; how often.
fn yield_for(ticks: u64) -> u64 {
    let start = syscall::rdtsc();
    let mut yields = 0u64;
    while syscall::rdtsc() - start < ticks {
        let _ = syscall::yield_now();
        yields += 1;
    }
    yields
}

/// `Null` calls made by [`null_caller`].
static NULL_CALLS: AtomicU64 = AtomicU64::new(0);

/// Calls `Null` without end, counting the calls in [`NULL_CALLS`].
extern "C" fn null_caller(_: u64) -> ! {
    loop {
        let _ = syscall::null();
        NULL_CALLS.store(NULL_CALLS.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

/// Lets the other threads run for a while: a call to the cross-CPU server
/// on CPU 1 blocks this thread (its CPU may run others or idle) until that
/// server gets its CPU. (Not a spin: under icount QEMU 7.2 runs a vCPU
/// that spins without `pause` up to the next timer deadline and may leave
/// the others nothing meanwhile: docs/kernel.md, "SMP under icount".)
fn let_others_run() {
    let _ = syscall::call(EPS + MAX_CPUS, MsgInfo(1), [0; 4]);
}

/// Whether the spinner counts (within 20 waits).
fn counting() -> bool {
    let before = COUNTER.load(Ordering::Relaxed);
    (0..20).any(|_| {
        let_others_run();
        COUNTER.load(Ordering::Relaxed) != before
    })
}

/// Whether the count stands still over a while (after the spinner was
/// stopped: the IPI that stops it has long arrived after the first wait).
fn standing_still() -> bool {
    let_others_run();
    let before = COUNTER.load(Ordering::Relaxed);
    for _ in 0..5 {
        let_others_run();
    }
    COUNTER.load(Ordering::Relaxed) == before
}

fn move_and_destroy_running(t: &mut Checks) {
    let thread = THREADS + SPINNER;
    let set = |cpu: u32| syscall::thread_set_sched_params(thread, child::PRIORITY, cpu);
    type Step<'a> = (&'a str, &'a dyn Fn() -> Result<bool, Error>);
    let plan: [Step; 6] = [
        ("started on CPU 1", &|| {
            start(SPINNER, 1, spinner, 0).map(|()| counting())
        }),
        ("moved to CPU 0", &|| set(0).map(|()| counting())),
        ("moved back to CPU 1", &|| set(1).map(|()| counting())),
        ("suspended", &|| {
            syscall::thread_suspend(thread).map(|()| standing_still())
        }),
        ("resumed", &|| {
            syscall::thread_resume(thread).map(|()| counting())
        }),
        ("destroyed", &|| {
            // SAFETY: the slot holds the spinner's thread, which nothing
            // else uses.
            unsafe { syscall::cap_delete(own(thread as u32)) }.map(|()| standing_still())
        }),
    ];
    let steps = plan.map(|(name, step)| {
        let result = step();
        println!("test-smp: spinner {name}: {result:?}");
        (name, result)
    });
    let failed = steps.iter().find(|(_, r)| *r != Ok(true));
    let (moved, destroyed) = (&steps[..5], &steps[5]);
    let moved_failed = moved.iter().find(|(_, r)| *r != Ok(true));
    t.expect(
        "move-running",
        moved_failed.is_none(),
        format_args!("{:?}", moved_failed),
    );
    t.expect(
        "destroy-running",
        destroyed.1 == Ok(true),
        format_args!("{:?} (first failure: {failed:?})", destroyed.1),
    );
}

/// Keeps `pattern` in xmm0 and checks it [`KEEPER_ROUNDS`] times per
/// CPU, moving itself between CPU 1 and CPU 0 [`KEEPER_MOVES`] times (its
/// state is live on the CPU it leaves); exits with 1 if xmm0 never
/// changed, 2 if it did, 3 if a move failed.
extern "C" fn keeper(pattern: u64) -> ! {
    // SAFETY: writes xmm0 only, which nothing else in this thread uses
    // (the components are soft-float).
    unsafe { core::arch::asm!("movq xmm0, {}", in(reg) pattern, options(nomem, nostack)) };
    for step in 0..KEEPER_MOVES {
        for _ in 0..KEEPER_ROUNDS {
            let now: u64;
            // SAFETY: reads xmm0 only.
            unsafe { core::arch::asm!("movq {}, xmm0", out(reg) now, options(nomem, nostack)) };
            if now != pattern {
                syscall::thread_exit(2);
            }
        }
        let cpu = (step % 2) as u32; // 0, 1, 0, ...: it starts on 1
        if syscall::thread_set_sched_params(THREADS + KEEPER, child::PRIORITY, cpu).is_err() {
            syscall::thread_exit(3);
        }
    }
    syscall::thread_exit(1)
}

const KEEPER_ROUNDS: u64 = 20_000;
const KEEPER_MOVES: u64 = 20;

fn fpu_moves_with_thread(t: &mut Checks) {
    let mine = 0x5a5a_1234_8765_a5a5u64;
    // SAFETY: this thread's own xmm0, which nothing else here uses.
    unsafe { core::arch::asm!("movq xmm0, {}", in(reg) mine, options(nomem, nostack)) };
    if let Err(e) = start(KEEPER, 1, keeper, 0x0123_4567_89ab_cdef) {
        t.expect("fpu-moves-with-thread", false, format_args!("start: {e:?}"));
        return;
    }
    // Half of its turns the keeper shares CPU 0 with this thread, which
    // waits here with its own value live (or saved) meanwhile.
    let result = report().map(|(label, words)| (label, words[0] & 0xffff_ffff));
    let kept: u64;
    // SAFETY: reads this thread's own xmm0.
    unsafe { core::arch::asm!("movq {}, xmm0", out(reg) kept, options(nomem, nostack)) };
    println!("test-smp: FPU keeper moved {KEEPER_MOVES} times while it checked xmm0");
    t.expect(
        "fpu-moves-with-thread",
        result == Ok((LABEL_EXIT, 1)) && kept == mine,
        format_args!(
            "report {result:?} (1: kept, 2: changed, 3: a move failed), main's xmm0 {kept:#x}"
        ),
    );
}
