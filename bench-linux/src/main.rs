//! `bench-linux`: the benchmark lab's Linux side.
//!
//! The same benchmarks as the Pecan benchmark component, from the same
//! measuring crate (`bench`: timestamp, warm-up, overhead, statistics, the
//! `BENCH` report line, the CPU and memory kernels), mapped onto Linux
//! system calls: getppid, futex, pipes, unix sockets, eventfd, `fork`.
//! `cargo xtask` builds it as a static binary
//! (`-C target-feature=+crt-static`) and runs it alone in a busybox
//! initramfs on Debian's cloud kernel, in the same emulated machine as
//! Pecan.
//!
//! ```text
//! bench-linux [--list] [--vm] [NAME...]
//! bench-linux http-serve [PORT] [ARCHIVE]
//! bench-linux --exit
//! ```
//!
//! Runs the named Linux benchmarks of [`bench::catalog::ALL`] (all of them
//! when none is named), in catalog order, and prints one `BENCH` line each
//! on standard output. An unknown name lists the known ones and exits 2; a
//! benchmark that fails is reported on standard error, the others still
//! run, and the exit status is 1.
//!
//! `--vm`: in a Linux guest of Pecan's VMM (`scenarios/linux-vm-bench.toml`)
//! each benchmark reports under its row of the VM table,
//! `vm-NAME` (`bench::catalog::VM_ROWS`), and after its `BENCH` line a
//! `VMEXITS` line with the exits the VMM handled during it
//! ([`vmexits`]: its counters at ports 0x510/0x514, which `ioperm`
//! opens). `--exit` exits at once: `fork-exec`'s exec target ([`proc`]).
//!
//! `http-serve` is not a benchmark but a server: Pecan's HTTP server's
//! request handling on Linux ([`http`]), which the host measures for the
//! HTTP benchmarks (`bench::httpload`; those names are the host's, not
//! run here). It serves on PORT (80) with the static files of the cpio
//! ARCHIVE (none without one) until the guest is stopped, under the
//! default scheduling policy on any CPU.
//!
//! Everything runs pinned to CPU 0, under `SCHED_FIFO` at priority 1 (the
//! guest's `/init` also lifts the real-time throttle,
//! `sched_rt_runtime_us = -1`, so that long benchmarks are not paused).
//! Why not the default policy: under CFS whether a woken task preempts its
//! waker depends on the two tasks' virtual run times, which drift, so the
//! one-way figures come in two modes that take turns in long phases —
//! measured: futex between processes 4400 or 6356 ticks, unix socket 7602
//! or 9360, a median that lands in either mode depending on the run's
//! history, and ring-4 dearer per hand-over than ring-10. Under
//! `SCHED_FIFO` at equal priority a woken task never preempts its waker:
//! the sender always wakes, then blocks in its next receive, then the
//! switch — every figure has one mode, ring-N costs the same per hand-over
//! for every N, and the path is the one Linux's cheapest scheduling class
//! takes, which is the fairest opponent for Pecan's fixed priorities.
//! Without the privilege (a host run as a normal user) the program says so
//! and runs under the default policy.
//!
//! Between benchmarks the program waits until the console has sent its
//! report (`tcdrain`), so that the serial port's interrupts do not fall
//! into the next measurement.
//!
//! I/O benchmarks ([`disk`]) follow the lab's I/O method ([`bench::soak`]):
//! a soaker thread under `SCHED_IDLE`, pinned to CPU 0, runs the shared
//! soaker loop while the benchmark waits for the device, and each run
//! reports busy ticks (elapsed minus soaked) per KiB.
//!
//! Module map: [`sys`] (system calls), [`cpu`] (null system call, bogomips,
//! memcpy/memset), [`oneway`] (futex, pipe, unix socket and eventfd
//! ping-pong), [`ring`] (lat_ctx), [`proc`] (fork, fork+exec),
//! [`vmexits`] (the VMM's exit counters), [`bulk`] (bw_pipe, bw_unix), [`disk`]
//! (virtio-blk reads), [`net`] (TCP and UDP against the host peer),
//! [`soaker`] (the soaker thread), [`http`] (the HTTP server).
#![forbid(unsafe_op_in_unsafe_fn)]

mod bulk;
mod cpu;
mod disk;
mod http;
mod net;
mod oneway;
mod proc;
mod ring;
mod soaker;
mod sys;
mod vmexits;

use std::io::{self, Write};
use std::process::ExitCode;

use bench::catalog::{self, Platform};
use bench::netio::{Dir, Proto};
use bench::Unit;

/// How a benchmark runs.
#[derive(Clone, Copy)]
enum Run {
    /// Fill the samples (ticks, or bytes per tick ×
    /// [`bench::THROUGHPUT_SCALE`]) given the timing overhead.
    Samples(fn(&mut [u64], u64) -> io::Result<()>),
    /// An I/O benchmark ([`disk`], [`bench::soak`]): its runs' elapsed and
    /// soaked figures, reported as CPU cost per run.
    Io(fn() -> io::Result<disk::IoRuns>),
}

/// One Linux benchmark: its catalog name, unit, sample count and code.
struct Benchmark {
    name: &'static str,
    unit: Unit,
    samples: usize,
    run: Run,
    /// Operations per timed iteration (a ring's hand-overs per round; 1
    /// otherwise): what `--vm` divides its exit count by.
    per_iteration: u64,
}

/// Samples of the transfers and the 8 MiB memory kernels (a sample moves
/// megabytes: a few suffice, the figures are deterministic under icount).
const BIG_SAMPLES: usize = 20;
/// Samples of the bytewise copy (about 5 ticks per byte: 40 M per sample).
const BYTEWISE_SAMPLES: usize = 5;

type SampleRun = fn(&mut [u64], u64) -> io::Result<()>;

const fn ticks(name: &'static str, run: SampleRun) -> Benchmark {
    Benchmark {
        name,
        unit: Unit::Ticks,
        samples: bench::SAMPLES,
        run: Run::Samples(run),
        per_iteration: 1,
    }
}

/// A ticks benchmark with `samples` samples of `per_iteration`
/// operations each.
const fn ticks_of(
    name: &'static str,
    samples: usize,
    per_iteration: u64,
    run: SampleRun,
) -> Benchmark {
    Benchmark {
        name,
        unit: Unit::Ticks,
        samples,
        run: Run::Samples(run),
        per_iteration,
    }
}

const fn bytes_per_tick(name: &'static str, samples: usize, run: SampleRun) -> Benchmark {
    Benchmark {
        name,
        unit: Unit::BytesPerTick,
        samples,
        run: Run::Samples(run),
        per_iteration: 1,
    }
}

const fn io_cost(name: &'static str, run: fn() -> io::Result<disk::IoRuns>) -> Benchmark {
    Benchmark {
        name,
        unit: Unit::TicksPerKib,
        samples: disk::RUNS,
        run: Run::Io(run),
        per_iteration: 1,
    }
}

/// A raw block benchmark (`bench::blockio`): its runs are
/// [`bench::blockio::RUNS`].
const fn raw_cost(name: &'static str, run: fn() -> io::Result<disk::IoRuns>) -> Benchmark {
    Benchmark {
        name,
        unit: Unit::TicksPerKib,
        samples: bench::blockio::RUNS,
        run: Run::Io(run),
        per_iteration: 1,
    }
}

/// A network benchmark (`bench::netio`): its runs are
/// [`bench::netio::RUNS`].
const fn net_cost(name: &'static str, run: fn() -> io::Result<disk::IoRuns>) -> Benchmark {
    let mut b = raw_cost(name, run);
    b.samples = bench::netio::RUNS;
    b
}

/// Every Linux benchmark of the catalog, with its code.
const BENCHMARKS: &[Benchmark] = &[
    ticks("getppid", cpu::getppid),
    ticks("futex-threads-0w", |s, o| oneway::futex_threads(s, o, 0)),
    ticks("futex-threads-4w", |s, o| oneway::futex_threads(s, o, 4)),
    ticks("futex-threads-8w", |s, o| oneway::futex_threads(s, o, 8)),
    ticks("futex-threads-16w", |s, o| oneway::futex_threads(s, o, 16)),
    ticks("futex-shm-0w", |s, o| oneway::futex_shm(s, o, 0)),
    ticks("futex-shm-4w", |s, o| oneway::futex_shm(s, o, 4)),
    ticks("futex-shm-8w", |s, o| oneway::futex_shm(s, o, 8)),
    ticks("futex-shm-16w", |s, o| oneway::futex_shm(s, o, 16)),
    ticks("pipe-0w", |s, o| oneway::pipe(s, o, 0)),
    ticks("pipe-4w", |s, o| oneway::pipe(s, o, 4)),
    ticks("pipe-8w", |s, o| oneway::pipe(s, o, 8)),
    ticks("pipe-16w", |s, o| oneway::pipe(s, o, 16)),
    ticks("unix-0w", |s, o| oneway::unix(s, o, 0)),
    ticks("unix-16w", |s, o| oneway::unix(s, o, 16)),
    ticks("unix-rpc-4w", oneway::unix_rpc),
    ticks("eventfd", oneway::eventfd),
    ticks_of("ring-2", bench::SAMPLES, 2, |s, o| ring::ring(s, o, 2)),
    ticks_of("ring-4", bench::SAMPLES, 4, |s, o| ring::ring(s, o, 4)),
    ticks_of("ring-10", bench::SAMPLES, 10, |s, o| ring::ring(s, o, 10)),
    bytes_per_tick("bw-pipe", BIG_SAMPLES, bulk::pipe),
    bytes_per_tick("bw-unix", BIG_SAMPLES, bulk::unix),
    ticks("bogomips", cpu::bogomips),
    bytes_per_tick("memcpy-glibc", BIG_SAMPLES, cpu::memcpy_glibc),
    bytes_per_tick("memcpy-bytewise", BYTEWISE_SAMPLES, cpu::memcpy_bytewise),
    bytes_per_tick("memset-glibc", BIG_SAMPLES, cpu::memset_glibc),
    ticks_of("fork", proc::SAMPLES, 1, proc::fork),
    ticks_of("fork-exec", proc::SAMPLES, 1, proc::fork_exec),
    io_cost("blk-read-64k-linux", disk::blk_read_64k),
    raw_cost("blk-raw-read-512-linux", || disk::raw(512, false)),
    raw_cost("blk-raw-read-1k-linux", || disk::raw(1024, false)),
    raw_cost("blk-raw-read-4k-linux", || disk::raw(4096, false)),
    raw_cost("blk-raw-read-16k-linux", || disk::raw(16384, false)),
    raw_cost("blk-raw-read-64k-linux", || disk::raw(65536, false)),
    raw_cost("blk-raw-read-256k-linux", || disk::raw(262144, false)),
    raw_cost("blk-raw-read-1m-linux", || disk::raw(1048576, false)),
    raw_cost("blk-raw-write-512-linux", || disk::raw(512, true)),
    raw_cost("blk-raw-write-1k-linux", || disk::raw(1024, true)),
    raw_cost("blk-raw-write-4k-linux", || disk::raw(4096, true)),
    raw_cost("blk-raw-write-16k-linux", || disk::raw(16384, true)),
    raw_cost("blk-raw-write-64k-linux", || disk::raw(65536, true)),
    raw_cost("blk-raw-write-256k-linux", || disk::raw(262144, true)),
    raw_cost("blk-raw-write-1m-linux", || disk::raw(1048576, true)),
    raw_cost("fat-read-512-linux", || disk::fat(512, false)),
    raw_cost("fat-read-1k-linux", || disk::fat(1024, false)),
    raw_cost("fat-read-4k-linux", || disk::fat(4096, false)),
    raw_cost("fat-read-16k-linux", || disk::fat(16384, false)),
    raw_cost("fat-read-64k-linux", || disk::fat(65536, false)),
    raw_cost("fat-read-256k-linux", || disk::fat(262144, false)),
    raw_cost("fat-read-1m-linux", || disk::fat(1048576, false)),
    raw_cost("fat-write-512-linux", || disk::fat(512, true)),
    raw_cost("fat-write-1k-linux", || disk::fat(1024, true)),
    raw_cost("fat-write-4k-linux", || disk::fat(4096, true)),
    raw_cost("fat-write-16k-linux", || disk::fat(16384, true)),
    raw_cost("fat-write-64k-linux", || disk::fat(65536, true)),
    raw_cost("fat-write-256k-linux", || disk::fat(262144, true)),
    raw_cost("fat-write-1m-linux", || disk::fat(1048576, true)),
    net_cost("net-tcp-tx-64-linux", || net::run(Proto::Tcp, Dir::Tx, 64)),
    net_cost("net-tcp-tx-1k-linux", || {
        net::run(Proto::Tcp, Dir::Tx, 1024)
    }),
    net_cost("net-tcp-tx-1450-linux", || {
        net::run(Proto::Tcp, Dir::Tx, 1450)
    }),
    net_cost("net-tcp-rx-64-linux", || net::run(Proto::Tcp, Dir::Rx, 64)),
    net_cost("net-tcp-rx-1k-linux", || {
        net::run(Proto::Tcp, Dir::Rx, 1024)
    }),
    net_cost("net-tcp-rx-1450-linux", || {
        net::run(Proto::Tcp, Dir::Rx, 1450)
    }),
    net_cost("net-udp-tx-64-linux", || net::run(Proto::Udp, Dir::Tx, 64)),
    net_cost("net-udp-tx-1k-linux", || {
        net::run(Proto::Udp, Dir::Tx, 1024)
    }),
    net_cost("net-udp-tx-1450-linux", || {
        net::run(Proto::Udp, Dir::Tx, 1450)
    }),
    net_cost("net-udp-rx-64-linux", || net::run(Proto::Udp, Dir::Rx, 64)),
    net_cost("net-udp-rx-1k-linux", || {
        net::run(Proto::Udp, Dir::Rx, 1024)
    }),
    net_cost("net-udp-rx-1450-linux", || {
        net::run(Proto::Udp, Dir::Rx, 1450)
    }),
    net_cost("net-tcp-tx-1450-loss-linux", || net::run_with_loss(Dir::Tx)),
    net_cost("net-tcp-rx-1450-loss-linux", || net::run_with_loss(Dir::Rx)),
];

/// The Linux benchmarks of the catalog this program runs, in its order
/// (the HTTP ones are measured by the host against `http-serve`).
fn linux_names() -> impl Iterator<Item = &'static str> {
    catalog::ALL
        .iter()
        .filter(|b| b.platform == Platform::Linux && !bench::httpload::is_http(b.name))
        .map(|b| b.name)
}

/// The benchmarks to run for the command-line `names` (all when empty), in
/// catalog order; `Err` holds the unknown names.
fn select(names: &[String]) -> Result<Vec<&'static catalog::Bench>, Vec<String>> {
    let unknown: Vec<String> = names
        .iter()
        .filter(|n| catalog::find(Platform::Linux, n).is_none() || bench::httpload::is_http(n))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(unknown);
    }
    Ok(catalog::ALL
        .iter()
        .filter(|b| b.platform == Platform::Linux && !bench::httpload::is_http(b.name))
        .filter(|b| names.is_empty() || names.iter().any(|n| n == b.name))
        .collect())
}

/// The code of the benchmark called `name`.
fn benchmark(name: &str) -> Option<&'static Benchmark> {
    BENCHMARKS.iter().find(|b| b.name == name)
}

/// The name and description a benchmark reports under: its own, or in
/// Pecan's VM (`vm`) its `vm-NAME` row of the catalog.
fn reported_as(bench: &catalog::Bench, vm: bool) -> io::Result<(&'static str, &'static str)> {
    if !vm {
        return Ok((bench.name, bench.what));
    }
    catalog::vm_name(bench.name)
        .and_then(catalog::find_pecan)
        .map(|b| (b.name, b.what))
        .ok_or_else(|| {
            io::Error::other(format!(
                "{}: no row of the VM table (bench::catalog::VM_ROWS)",
                bench.name
            ))
        })
}

/// Runs one benchmark and prints its report line; with `vm` (Pecan's
/// VMM's exit counters) under its `vm-` name, followed by its exit count
/// ([`vmexits::line`]).
fn run_one(
    bench: &catalog::Bench,
    overhead: u64,
    vm: Option<&vmexits::Counters>,
) -> io::Result<()> {
    let b = benchmark(bench.name).ok_or_else(|| {
        io::Error::other(format!(
            "{}: in the catalog but not implemented",
            bench.name
        ))
    })?;
    let (name, what) = reported_as(bench, vm.is_some())?;
    let mut line = String::new();
    let before = vm.map(vmexits::Counters::read);
    let formatted = match b.run {
        Run::Samples(run) => {
            let mut samples = vec![0u64; b.samples];
            run(&mut samples, overhead)?;
            if let (Some(vm), Some(before)) = (vm, before) {
                let operations = (bench::WARM_UP + samples.len()) as u64 * b.per_iteration;
                let counted = vm.since(before);
                line = vmexits::line(name, counted, operations);
            }
            let mut report = String::new();
            let mut scratch = vec![0u64; samples.len()];
            let r = bench::report(&mut report, name, what, b.unit, &samples, &mut scratch);
            line.insert_str(0, &report);
            r
        }
        Run::Io(_) if vm.is_some() => {
            return Err(io::Error::other(
                "I/O benchmarks are not run in the VM (no VM row)",
            ))
        }
        Run::Io(run) => {
            let runs = run()?;
            let costs = io_costs(&runs)?;
            let mut scratch = vec![0u64; costs.len()];
            let io = bench::IoRuns {
                bytes: runs.bytes,
                elapsed: &runs.elapsed,
                soaked: &runs.soaked,
            };
            bench::report_io(&mut line, bench.name, bench.what, &costs, io, &mut scratch)
        }
    };
    formatted.map_err(|_| io::Error::other("formatting the report line"))?;
    let mut out = io::stdout().lock();
    out.write_all(line.as_bytes())?;
    out.flush()?;
    sys::drain_stdout();
    Ok(())
}

/// Each run's CPU cost ([`bench::soak::cpu_cost`] of its busy ticks).
fn io_costs(runs: &disk::IoRuns) -> io::Result<Vec<u64>> {
    runs.elapsed
        .iter()
        .zip(&runs.soaked)
        .map(|(&elapsed, &soaked)| {
            bench::soak::cpu_cost(bench::soak::busy(elapsed, soaked), runs.bytes)
                .ok_or_else(|| io::Error::other("an I/O run moved no bytes"))
        })
        .collect()
}

/// `http-serve [PORT] [ARCHIVE]`: serves until the guest stops.
fn http_serve(args: &[String]) -> ExitCode {
    let port = match args.first().map(|p| p.parse::<u16>()) {
        None => http::DEFAULT_PORT,
        Some(Ok(p)) if p > 0 => p,
        Some(_) => {
            eprintln!("bench-linux: http-serve [PORT] [ARCHIVE]: PORT is 1 to 65535");
            return ExitCode::from(2);
        }
    };
    let files = match args.get(1) {
        None => Vec::new(),
        Some(path) => match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("bench-linux: http-serve: {path}: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    match http::serve(port, files) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-linux: http-serve: port {port}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    // fork-exec's child: nothing but the start-up of a static binary.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == proc::EXIT_ARG)
    {
        return ExitCode::SUCCESS;
    }
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("http-serve") {
        return http_serve(&args[1..]);
    }
    if args.iter().any(|a| a == "--list") {
        for name in linux_names() {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
    // In Pecan's VM: report as `vm-NAME` with the VMM's exit counts.
    let vm = args.iter().any(|a| a == "--vm");
    args.retain(|a| a != "--vm");
    let selected = match select(&args) {
        Ok(s) => s,
        Err(unknown) => {
            eprintln!(
                "bench-linux: unknown benchmark {}; the Linux benchmarks are: {}",
                unknown.join(", "),
                linux_names().collect::<Vec<_>>().join(" ")
            );
            return ExitCode::from(2);
        }
    };
    if let Err(e) = sys::pin_to_cpu0() {
        eprintln!("bench-linux: {e}");
        return ExitCode::FAILURE;
    }
    let policy = match sys::fifo_scheduling() {
        Ok(()) => "SCHED_FIFO priority 1".to_string(),
        Err(e) => format!("the default scheduling policy ({e})"),
    };
    let counters = if vm {
        match vmexits::Counters::open() {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("bench-linux: --vm: the VMM's exit counters: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let overhead = bench::timestamp_overhead();
    println!(
        "bench-linux: {} benchmarks on CPU 0 under {policy}, timestamp overhead {overhead} ticks{}",
        selected.len(),
        match counters {
            Some(c) => format!(
                "; in Pecan's VM (a reading of the exit counters costs {} exits)",
                c.reads
            ),
            None => String::new(),
        }
    );
    let mut failed = 0;
    for b in selected {
        if let Err(e) = run_one(b, overhead, counters.as_ref()) {
            eprintln!("bench-linux: {}: {e}", b.name);
            failed += 1;
        }
    }
    if failed > 0 {
        eprintln!("bench-linux: {failed} benchmarks failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_linux_benchmark_is_implemented_once() {
        for name in linux_names() {
            assert!(!bench::httpload::is_http(name), "{name}");
            let n = BENCHMARKS.iter().filter(|b| b.name == name).count();
            assert_eq!(n, 1, "{name}");
        }
        for b in BENCHMARKS {
            assert!(
                catalog::find(Platform::Linux, b.name).is_some(),
                "{} is not in the catalog",
                b.name
            );
        }
    }

    #[test]
    fn selection() {
        let all = select(&[]).unwrap();
        assert_eq!(all.len(), BENCHMARKS.len());
        let some = select(&["ring-2".into(), "getppid".into()]).unwrap();
        let names: Vec<_> = some.iter().map(|b| b.name).collect();
        assert_eq!(names, ["getppid", "ring-2"]);
        assert_eq!(
            select(&["getppid".into(), "null-syscall".into(), "x".into()]).unwrap_err(),
            ["null-syscall", "x"]
        );
    }
}
