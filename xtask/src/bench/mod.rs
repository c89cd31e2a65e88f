//! `cargo xtask bench`: the benchmark lab. Boots Pecan (the `bench` and
//! `bench-server` components) and Linux (`crate::linux`: Debian's cloud
//! kernel with a busybox initramfs and the `bench-linux` binary) one after
//! the other in the same QEMU configuration (`-accel tcg -cpu max -icount
//! shift=0,align=off,sleep=off`, a fixed seed and an RTC on virtual time —
//! see `Machine::icount` — one vCPU, the same memory), parses their `BENCH`
//! lines ([`results`]), prints the side-by-side table and writes under
//! `target/bench/`: `report.md`, `results.json` (every sample of every
//! run) and the charts `ipc.svg`, `memory.svg`, `storage-read.svg` and
//! `storage-write.svg` ([`CHARTS`]). `--update-docs` copies
//! the report to `docs/benchmarks.md` (charts to `docs/bench/`) and the
//! table into the README's Performance section.
//!
//! The regression gate ([`gate`]) runs a quick Pecan-only pass of the
//! benchmarks in `bench/budgets.toml` from `cargo xtask test`.

pub mod budgets;
pub mod http;
pub mod results;
pub mod svg;
pub mod wall;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bench::catalog::{self, Platform};

use crate::accel::Accel;
use crate::host::Counts;
use crate::qemu::{self, Machine};
use crate::system::{self, System};
use crate::util::{display_path, workspace_root};
use results::BenchResult;

/// Guest memory for both platforms, MiB.
pub const MEMORY_MIB: u32 = 256;
/// How long one Pecan run may take.
const PECAN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long one Linux run may take (measured: about 45 s for all).
const LINUX_TIMEOUT: Duration = Duration::from_secs(600);

/// The options of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Benchmarks to run (Pecan or Linux names; default: all).
    pub names: Vec<String>,
    /// Run only the Pecan side.
    #[arg(long)]
    pub pecan_only: bool,
    /// Boot each system this many times and check the figures agree.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub runs: u32,
    /// Write docs/benchmarks.md and the README's Performance table.
    #[arg(long)]
    pub update_docs: bool,
    /// `tcg` (default): instruction counts under icount, deterministic.
    /// `kvm` (only on hosts with hardware virtualization): TSC cycles —
    /// never comparable with icount figures, and labelled so.
    #[arg(long, value_enum, default_value = "tcg")]
    pub accel: Accel,
    /// Wall-clock mode: no icount (the TSC is the host's), Pecan and Linux
    /// booted alternately N times (at least 5), and for each benchmark
    /// both sides have, the median paired ratio and its range
    /// (`bench::soak`). Written to target/bench/wall.md.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(5..=50))]
    pub wall: Option<u32>,
    /// Add the VM table's benchmarks (`bench::catalog::VM_ROWS`): Linux in
    /// Pecan's VM (`scenarios/linux-vm-bench.toml`) and the same
    /// benchmarks of Linux native.
    #[arg(long)]
    pub vm: bool,
}

/// What a tick is, for the report and the JSON file.
fn clock_label(accel: Accel) -> &'static str {
    match accel {
        Accel::Tcg => "QEMU TCG icount: a tick is one executed instruction (deterministic)",
        Accel::Kvm => {
            "KVM: a tick is one TSC cycle of the host CPU (not comparable with icount figures)"
        }
    }
}

/// What `cargo xtask bench NAME...` runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// Benchmarks of the `bench` component.
    pub pecan: Vec<&'static str>,
    /// Benchmarks reported by other Pecan scenarios, by scenario name.
    pub scenarios: Vec<(&'static str, Vec<&'static str>)>,
    pub linux: Vec<&'static str>,
}

/// The benchmarks selected by `names` (all when empty); an unknown name is
/// an error that lists the known ones.
pub fn select(names: &[String]) -> Result<Selection> {
    let mut selection = Selection::default();
    for b in catalog::ALL {
        if !(names.is_empty() || names.iter().any(|n| n == b.name)) {
            continue;
        }
        match b.platform {
            Platform::Pecan => selection.pecan.push(b.name),
            Platform::Linux => selection.linux.push(b.name),
            Platform::PecanScenario(scenario) => {
                match selection.scenarios.iter_mut().find(|(s, _)| *s == scenario) {
                    Some((_, list)) => list.push(b.name),
                    None => selection.scenarios.push((scenario, vec![b.name])),
                }
            }
        }
    }
    for n in names {
        if !catalog::ALL.iter().any(|b| b.name == n) {
            let known: Vec<String> = catalog::ALL
                .iter()
                .map(|b| format!("{} ({:?})", b.name, b.platform))
                .collect();
            bail!(
                "unknown benchmark `{n}`; known benchmarks:\n  {}",
                known.join("\n  ")
            );
        }
    }
    Ok(selection)
}

/// The `bench` component's argument: bit i selects the i-th Pecan
/// benchmark of the catalog.
pub fn pecan_mask(names: &[&str]) -> u64 {
    catalog::ALL
        .iter()
        .filter(|b| b.platform == Platform::Pecan)
        .enumerate()
        .filter(|(_, b)| names.contains(&b.name))
        .fold(0u64, |mask, (i, _)| mask | 1 << i)
}

/// The kernel command line that runs the selected Pecan benchmarks.
pub fn pecan_cmdline(names: &[&str]) -> String {
    format!(
        "pecan.start=bench-server@16+own+serve,bench:{:#x}@64+own",
        pecan_mask(names)
    )
}

/// Boots Pecan once with the `bench` component's benchmarks `names`;
/// returns the results and keeps the serial log at `log`.
pub fn run_pecan(
    system: &System,
    names: &[&str],
    accel: Accel,
    log: &Path,
) -> Result<Vec<BenchResult>> {
    run_pecan_cmdline(
        system,
        &system.boot_image,
        &pecan_cmdline(names),
        (1, MEMORY_MIB, Vec::new()),
        names,
        (accel, accel == Accel::Tcg),
        log,
    )
}

/// Boots Pecan once with kernel command line `cmdline` on `smp` vCPUs
/// and `memory_mib` of memory with QEMU's device arguments `devices`
/// (under icount if the clock says so and the accelerator is TCG) and
/// collects the results of `names`.
fn run_pecan_cmdline(
    system: &System,
    image: &Path,
    cmdline: &str,
    (smp, memory_mib, devices): (u32, u32, Vec<String>),
    names: &[&str],
    (accel, icount): (Accel, bool),
    log: &Path,
) -> Result<Vec<BenchResult>> {
    let mut machine = Machine::new(
        system.kernel.clone(),
        Some(image.to_path_buf()),
        cmdline.to_string(),
        accel,
    );
    machine.icount = icount && accel == Accel::Tcg;
    machine.memory_mib = memory_mib;
    machine.smp = smp;
    machine.devices = devices;
    let captured = qemu::capture(&machine, PECAN_TIMEOUT)
        .with_context(|| format!("starting {}", qemu::QEMU))?;
    std::fs::create_dir_all(log.parent().unwrap_or(Path::new(".")))?;
    std::fs::write(
        log,
        format!(
            "$ {}\n# guest ran {:.1} s\n{}{}",
            machine.command_line(),
            captured.duration.as_secs_f64(),
            captured.serial,
            captured.stderr
        ),
    )?;
    match &captured.exit {
        Some(qemu::GuestExit::Success) => {}
        Some(other) => bail!(
            "the Pecan guest did not finish cleanly ({}); serial log: {}",
            other.describe(),
            display_path(log)
        ),
        None => bail!(
            "the Pecan guest did not finish within {} s; serial log: {}",
            PECAN_TIMEOUT.as_secs(),
            display_path(log)
        ),
    }
    let results = results::parse(&captured.serial, Platform::Pecan)
        .with_context(|| format!("serial log: {}", display_path(log)))?;
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| !results.iter().any(|r| &r.name == *n))
        .collect();
    if !missing.is_empty() {
        bail!(
            "the Pecan guest did not report {missing:?}; serial log: {}",
            display_path(log)
        );
    }
    Ok(results)
}

/// What one platform's runs gave.
struct Side {
    runs: Vec<Vec<BenchResult>>,
    /// Why the side is missing, if it is.
    skipped: Option<String>,
    version: String,
}

impl Side {
    fn results(&self) -> &[BenchResult] {
        self.runs.first().map_or(&[], |r| r.as_slice())
    }
}

/// A Pecan scenario that reports benchmarks: its command line, boot
/// image, CPUs, benchmark names and machine devices.
struct ScenarioRun {
    name: &'static str,
    cmdline: String,
    image: PathBuf,
    smp: u32,
    names: Vec<&'static str>,
    devices: crate::devices::Devices,
    /// The machine's memory: the lab's [`MEMORY_MIB`], or the scenario's
    /// if it asks for more (a VMM's guest RAM: `linux-vm-bench`).
    memory_mib: u32,
}

/// Everything the Pecan side boots for one pass.
struct PecanPlan<'a> {
    system: &'a System,
    names: &'a [&'static str],
    scenarios: Vec<ScenarioRun>,
}

impl PecanPlan<'_> {
    fn is_empty(&self) -> bool {
        self.names.is_empty() && self.scenarios.is_empty()
    }
}

/// How a pass runs: the accelerator, whether under icount, and how its
/// logs and messages are labelled (`run 1 of 2`, log suffix `1`).
#[derive(Clone, Copy)]
struct Pass<'a> {
    accel: Accel,
    icount: bool,
    label: &'a str,
    log: &'a str,
}

/// One pass of the Pecan side: the `bench` component's benchmarks, then
/// each scenario's (machine devices fresh for each pass).
fn pecan_pass(plan: &PecanPlan, pass: Pass, out_dir: &Path) -> Result<Vec<BenchResult>> {
    let mut results = Vec::new();
    if !plan.names.is_empty() {
        println!("==> Pecan, {}: {}", pass.label, pecan_cmdline(plan.names));
        let log = out_dir.join(format!("pecan-serial-{}.log", pass.log));
        results.extend(run_pecan_cmdline(
            plan.system,
            &plan.system.boot_image,
            &pecan_cmdline(plan.names),
            (1, MEMORY_MIB, Vec::new()),
            plan.names,
            (pass.accel, pass.icount),
            &log,
        )?);
    }
    for sc in &plan.scenarios {
        println!(
            "==> Pecan scenario {}, {}: {}",
            sc.name, pass.label, sc.cmdline
        );
        let log = out_dir.join(format!("pecan-{}-serial-{}.log", sc.name, pass.log));
        let work = out_dir.join("work").join(sc.name);
        let _ = std::fs::remove_dir_all(&work);
        if sc.names.iter().all(|n| bench::httpload::is_http(n)) {
            // The guest serves, the host measures (wall clock, never
            // under icount): `http`.
            results.extend(pecan_http(plan.system, sc, pass.accel, &work, &log)?);
            continue;
        }
        let mut attached = if sc.devices.is_empty() {
            crate::devices::Attached::default()
        } else {
            sc.devices.prepare(&work)?
        };
        // CPU-cost runs pace the disks (`bench::soak`, "Pacing").
        if pass.icount {
            attached.pace_disks(crate::devices::BENCH_DISK_IOPS);
        }
        results.extend(run_pecan_cmdline(
            plan.system,
            &sc.image,
            &sc.cmdline,
            (sc.smp, sc.memory_mib, attached.qemu_args()),
            &sc.names,
            (pass.accel, pass.icount),
            &log,
        )?);
    }
    Ok(results)
}

/// The HTTP benchmarks of scenario run `sc` (`bench::httpload`): one
/// boot, its NIC's forward to guest port 80 loaded from the host.
fn pecan_http(
    system: &System,
    sc: &ScenarioRun,
    accel: Accel,
    work: &Path,
    log: &Path,
) -> Result<Vec<BenchResult>> {
    let nic = sc
        .devices
        .nics
        .iter()
        .find(|n| n.forward.contains(&http::GUEST_PORT))
        .map(|n| n.name.clone())
        .with_context(|| {
            format!(
                "scenario {} forwards no guest port {} for its HTTP benchmarks",
                sc.name,
                http::GUEST_PORT
            )
        })?;
    let mut attached = sc.devices.prepare(work)?;
    let mut machine = Machine::new(
        system.kernel.clone(),
        Some(sc.image.clone()),
        sc.cmdline.clone(),
        accel,
    );
    machine.memory_mib = MEMORY_MIB;
    machine.smp = sc.smp;
    machine.devices = attached.qemu_args();
    http::measure(
        &machine,
        &mut attached,
        &nic,
        &sc.names,
        http::PECAN_SERVER,
        log,
    )
}

/// Runs `cargo xtask bench`; `Ok(true)` when everything ran.
pub fn run(args: &BenchArgs) -> Result<bool> {
    if args.wall.is_some() && (args.update_docs || args.pecan_only || args.runs > 1) {
        bail!("--wall makes its own pairs of runs; it goes with neither --runs, --pecan-only nor --update-docs");
    }
    if args.wall.is_some() && args.accel != Accel::Tcg {
        bail!("--wall compares runs without icount under TCG; --accel kvm does not go with it");
    }
    crate::setup::ensure_target()?;
    crate::setup::ensure_qemu()?;
    let mut names = args.names.clone();
    if args.vm {
        for (vm, native) in catalog::VM_ROWS {
            names.extend([vm.to_string(), native.to_string()]);
        }
    }
    let selection = select(&names)?;
    let (pecan_names, linux_names) = (&selection.pecan, &selection.linux);
    let root = workspace_root();
    let out_dir = root.join("target").join("bench");
    std::fs::create_dir_all(&out_dir)?;
    let system = system::build()?;
    // Scenarios that report further Pecan benchmarks, with their command
    // lines (scenarios/NAME.toml).
    let mut scenarios = Vec::new();
    for (name, names) in &selection.scenarios {
        let scenario = crate::scenario::load(&root, name)?;
        // A scenario with components boots init with its config ROM.
        let image = system::scenario_image(
            &system,
            &scenario,
            &scenario.cmdline,
            &scenario.name,
            Some(scenario.machine),
        )?;
        scenarios.push(ScenarioRun {
            name,
            cmdline: scenario.cmdline,
            image,
            smp: scenario.machine.smp,
            names: names.clone(),
            // Its machine devices (a disk for a driver's benchmark): fresh
            // copies in a work directory of the lab's, made again for each
            // run.
            devices: scenario.devices.clone(),
            memory_mib: scenario.machine.memory_mib.max(MEMORY_MIB),
        });
    }
    let plan = PecanPlan {
        system: &system,
        names: pecan_names,
        scenarios,
    };
    if let Some(pairs) = args.wall {
        return wall::run(&plan, linux_names, pairs, &out_dir);
    }

    let mut pecan = Side {
        runs: Vec::new(),
        skipped: None,
        version: format!("Pecan {}", env!("CARGO_PKG_VERSION")),
    };
    if plan.is_empty() {
        pecan.skipped = Some("no Pecan benchmark selected".into());
    }
    for run in 0..args.runs {
        if pecan.skipped.is_some() {
            break;
        }
        let label = format!("run {} of {}", run + 1, args.runs);
        let log = (run + 1).to_string();
        let pass = Pass {
            accel: args.accel,
            icount: args.accel == Accel::Tcg,
            label: &label,
            log: &log,
        };
        pecan.runs.push(pecan_pass(&plan, pass, &out_dir)?);
    }

    let mut linux = Side {
        runs: Vec::new(),
        skipped: None,
        version: String::new(),
    };
    if args.pecan_only {
        linux.skipped = Some("--pecan-only".into());
    } else if linux_names.is_empty() {
        linux.skipped = Some("no Linux benchmark selected".into());
    } else {
        for run in 0..args.runs {
            println!("==> Linux, run {} of {}", run + 1, args.runs);
            let log = out_dir.join(format!("linux-serial-{}.log", run + 1));
            match run_linux(linux_names, (args.accel, args.accel == Accel::Tcg), &log) {
                Ok((results, version)) => {
                    linux.version = version;
                    linux.runs.push(results);
                }
                Err(e) => {
                    println!("==> Linux side skipped: {e:#}");
                    linux.skipped = Some(format!("{e:#}"));
                    break;
                }
            }
        }
    }

    let mut all_agree = true;
    for (name, side) in [("Pecan", &pecan), ("Linux", &linux)] {
        let differ = results::differing(&side.runs);
        if !differ.is_empty() {
            all_agree = false;
            println!(
                "warning: {name} runs disagree on {differ:?} (icount runs should be identical)"
            );
        } else if side.runs.len() > 1 {
            println!(
                "==> {name}: all {} runs gave identical figures",
                side.runs.len()
            );
        }
    }

    let rows = results::table(pecan.results(), linux.results());
    let table = results::markdown_table(&rows);
    println!("\n{table}");
    let io_table = results::io_markdown_table(pecan.results(), linux.results());
    if let Some(io) = &io_table {
        println!("{io}");
    }
    let vm_table = results::vm_markdown_table(pecan.results(), linux.results());
    if let Some(vm) = &vm_table {
        println!("{vm}");
    }
    let tables = Tables {
        main: &table,
        io: io_table.as_deref(),
        vm: vm_table.as_deref(),
    };
    let report = report_markdown(tables, &pecan, &linux, args.runs, all_agree, args.accel);
    write_outputs(&out_dir, &report, &pecan, &linux, args.accel)?;
    println!("==> wrote {}", display_path(&out_dir));
    if args.update_docs {
        update_docs(&root, &out_dir, &report, &table)?;
    }
    Ok(all_agree && pecan.skipped.is_none())
}

/// The Linux side (see `crate::linux`): results and the kernel's version;
/// `clock` is the accelerator and whether under icount. The benchmarks
/// that read the lab's disk or use its network peer boot a guest of their
/// own (log `...-io.log`):
/// a disk's completions come from a host thread, and once one has landed
/// at a host-timed instruction the interrupts that follow do too, so the
/// other benchmarks' samples would no longer repeat exactly.
fn run_linux(
    names: &[&str],
    (accel, icount): (Accel, bool),
    log: &Path,
) -> Result<(Vec<BenchResult>, String)> {
    let (http, names): (Vec<&str>, Vec<&str>) =
        names.iter().partition(|n| bench::httpload::is_http(n));
    let (disk, plain): (Vec<String>, Vec<String>) =
        names.iter().map(|n| n.to_string()).partition(|n| {
            crate::linux::DISK_BENCHMARKS.contains(&n.as_str()) || crate::linux::is_net(n)
        });
    let mut results = Vec::new();
    let mut version = String::new();
    if !http.is_empty() {
        // The guest serves, the host measures (wall clock): a boot of its
        // own, never under icount.
        let (r, v) =
            crate::linux::run_http(&http, MEMORY_MIB, accel, &log.with_extension("http.log"))?;
        results.extend(r);
        version = v;
    }
    for (group, log) in [
        (plain, log.to_path_buf()),
        (disk, log.with_extension("io.log")),
    ] {
        if group.is_empty() {
            continue;
        }
        let mut guest = crate::linux::prepare(&group)?;
        guest.icount = icount;
        let linux = guest.run(MEMORY_MIB, accel, LINUX_TIMEOUT, &log)?;
        results.extend(
            results::parse(&linux.serial, Platform::Linux)
                .with_context(|| format!("serial log: {}", display_path(&log)))?,
        );
        version = linux.kernel_version;
    }
    Ok((results, version))
}

const METHOD: &str = "Both systems run in the same emulated machine: QEMU TCG, `-cpu max`, one vCPU, 256 MiB, \
`-icount shift=0,align=off,sleep=off` with a fixed random seed and an RTC on virtual time, under which the \
time-stamp counter counts executed instructions, so a tick is one instruction and every figure is a deterministic \
path length (memory figures are bytes per tick). One-way IPC is measured like sel4bench — timestamp in the sender \
right before the system call, in the receiver right after its own returns — after warm-up rounds, with the cost of \
the timestamp itself subtracted; medians of 1000 samples unless the benchmark says otherwise. The Linux side runs \
its benchmark processes under SCHED_FIFO (the cheapest, most stable wake-up path). Reproduce with `cargo xtask bench`.";

const METHOD_KVM: &str = "Both systems run in the same QEMU machine with KVM (`-cpu max`, one vCPU, 256 MiB): a tick \
is a TSC cycle of the host CPU, not an instruction — these figures are not comparable with the icount tables. \
One-way IPC is measured like sel4bench, with warm-up and the timestamp's own cost subtracted; medians are shown. \
Reproduce with `cargo xtask bench --accel kvm`.";

/// The report's tables: the side-by-side one and, when an I/O benchmark
/// ran, the I/O one.
#[derive(Clone, Copy)]
struct Tables<'a> {
    main: &'a str,
    io: Option<&'a str>,
    /// Linux in Pecan's VM against Linux native.
    vm: Option<&'a str>,
}

/// The VM table's method, for the report (docs/virtualization.md,
/// "Performance").
pub const VM_METHOD: &str = "The same `bench-linux` binary and benchmarks run by Linux natively in the lab's machine and \
by Linux in Pecan's VM (`scenarios/linux-vm-bench.toml`: Pecan with its VMM on that machine, one virtual CPU, 96 MiB of \
guest RAM, the same Debian kernel with a busybox initramfs; `bench-linux --vm`). Ticks are the guest's TSC, which under \
icount counts every instruction the emulated CPU executes — the guest's, and Pecan's kernel and VMM's while they handle \
an exit or a host interrupt. **Under QEMU TCG an SVM world switch (`VMRUN`, `#VMEXIT`) counts as one instruction**: \
these are path lengths, not hardware figures; on hardware every exit costs the world switch on top (see the `vm-exit` \
row: the VMM's round trip). VMM exits per operation are the VMM's exit counter (port 0x510) read before and after each \
benchmark (the ports opened with `ioperm` only around each reading), its own reads taken off, divided by the operations in between (warm-up and samples; a ring's hand-overs, a \
bw_pipe transfer of 4 MiB, one fork); the count includes the benchmark's set-up (forking its peers). Host interrupts \
per operation: runs of the guest that Pecan's own 1 kHz timer interrupt ended (port 0x514; the kernel resumes the \
guest without the VMM). \"VM vs native\" is how many more ticks (fewer bytes per tick) the VM needs; the goal is 2 %. \
Reproduce with `cargo xtask bench --vm`.";

/// The I/O method, for the report (`bench::soak` has it in full).
const IO_METHOD: &str = "I/O benchmarks use one method on both systems (`bench::soak`): a soaker thread at the \
lowest priority on the benchmark's CPU spins in a loop of exactly 3 instructions, counting its turns, so the guest \
never halts — under `-icount sleep=off` a halted guest's virtual time jumps to the next timer, which would hide the \
wait for the device. Busy ticks = elapsed ticks − 3 × the soaker's turns: everything but the soaker (the benchmark, \
the kernel, the driver, interrupt handling). The figure a goal binds is the CPU cost, busy ticks per KiB moved \
(lower is better): the median of at least 5 runs (whole-disk passes), with min–max and the spread. Device \
completions come from QEMU's host threads, so the figure varies a little from run to run: a spread up to 3 % is \
the tolerance. Host timing could also pick the guest's path (a completion that beats the emulated CPU to its \
sleep spares a context switch), so in these runs the lab paces its disks at 2000 requests per second of host time: \
every read then takes the path it takes on hardware, where the reader always sleeps; and benchmarks transfer into \
physically contiguous buffers (on Linux a transparent huge page), so that the guest's memory state does not change \
the number of segments. Throughput is measured without icount (`cargo xtask bench --wall N`: Pecan and Linux booted \
alternately in N ≥ 5 pairs, the median paired ratio and its range; `target/bench/wall.md`). A side without the \
benchmark yet shows `n/a`.";

fn report_markdown(
    tables: Tables,
    pecan: &Side,
    linux: &Side,
    runs: u32,
    agree: bool,
    accel: Accel,
) -> String {
    let mut md = String::from("# Benchmarks: Pecan and Linux in the same emulated machine\n\n");
    md.push_str(match accel {
        Accel::Tcg => METHOD,
        Accel::Kvm => METHOD_KVM,
    });
    md.push_str(&format!("\n\nClock: {}.", clock_label(accel)));
    md.push_str("\n\n");
    md.push_str(&format!(
        "Systems: {}; Linux: {}. Runs per system: {runs}{}.\n\n",
        pecan.version,
        if linux.version.is_empty() {
            "—"
        } else {
            &linux.version
        },
        if runs > 1 {
            if agree {
                " (identical figures)"
            } else {
                " (figures differed: see the warnings)"
            }
        } else {
            ""
        }
    ));
    for (name, side) in [("Pecan", pecan), ("Linux", linux)] {
        if let Some(why) = &side.skipped {
            md.push_str(&format!("{name} side not run: {why}.\n\n"));
        }
    }
    md.push_str("\"Pecan advantage\" is how many times fewer ticks (or, for throughput, how many times more bytes per tick) Pecan needs than Linux's counterpart.\n\n");
    md.push_str(tables.main);
    if let Some(vm) = tables.vm {
        md.push_str("\n## Linux in Pecan's VM against Linux native\n\n");
        md.push_str(VM_METHOD);
        md.push_str("\n\n");
        md.push_str(vm);
    }
    if let Some(io) = tables.io {
        md.push_str("\n## I/O benchmarks\n\n");
        md.push_str(IO_METHOD);
        md.push_str("\n\n");
        md.push_str(io);
    }
    md.push('\n');
    for (file, alt) in CHARTS {
        md.push_str(&format!("![{alt}](bench/{file})\n\n"));
    }
    md.push_str("## Every benchmark\n\n| platform | name | what | unit | min | median | max | samples |\n|---|---|---|---|---:|---:|---:|---:|\n");
    for (name, side) in [("Pecan", pecan), ("Linux", linux)] {
        for r in side.results() {
            md.push_str(&format!(
                "| {name} | `{}` | {} | {} | {} | {} | {} | {} |\n",
                r.name,
                r.what,
                r.unit,
                r.min,
                r.median,
                r.max,
                r.samples.len()
            ));
        }
    }
    md
}

fn median_of(list: &[BenchResult], name: &str) -> Option<f64> {
    list.iter().find(|r| r.name == name).map(|r| {
        if r.higher_is_better() {
            r.median as f64 / bench::THROUGHPUT_SCALE as f64
        } else if r.is_io() {
            r.median as f64 / bench::soak::COST_SCALE as f64
        } else {
            r.median as f64
        }
    })
}

/// The charts a run writes (file, its alt text in docs/benchmarks.md), in
/// the order [`charts`] makes them.
const CHARTS: [(&str, &str); 4] = [
    ("ipc.svg", "IPC one-way by message size"),
    ("memory.svg", "Memory bandwidth by method"),
    (
        "storage-read.svg",
        "Block and file reads: CPU cost per KiB by request size",
    ),
    (
        "storage-write.svg",
        "Block and file writes: CPU cost per KiB by request size",
    ),
];

/// The storage rows' CPU cost by request size (`op`: `read` or `write`):
/// raw through a Block session against `O_DIRECT`, and through the file
/// system against vfat.
fn storage_chart(pecan: &[BenchResult], linux: &[BenchResult], op: &str) -> svg::Chart {
    let sizes = [
        ("512 B", "512"),
        ("1 KiB", "1k"),
        ("4 KiB", "4k"),
        ("16 KiB", "16k"),
        ("64 KiB", "64k"),
        ("256 KiB", "256k"),
        ("1 MiB", "1m"),
    ];
    svg::Chart {
        title: format!(
            "Block and file {op}s: CPU cost (icount busy ticks per KiB, lower is better, log scale)"
        ),
        y_label: "ticks/KiB".into(),
        series: vec![
            "Pecan raw (Block session)".into(),
            "Linux raw (O_DIRECT)".into(),
            "Pecan file (rt::fs, FAT service)".into(),
            "Linux file (vfat)".into(),
        ],
        groups: sizes
            .iter()
            .map(|(label, size)| svg::Group {
                label: (*label).into(),
                values: vec![
                    median_of(pecan, &format!("blk-raw-{op}-{size}")),
                    median_of(linux, &format!("blk-raw-{op}-{size}-linux")),
                    median_of(pecan, &format!("fat-{op}-{size}")),
                    median_of(linux, &format!("fat-{op}-{size}-linux")),
                ],
            })
            .collect(),
        log: true,
    }
}

fn charts(pecan: &[BenchResult], linux: &[BenchResult]) -> [svg::Chart; 4] {
    let words = [0, 4, 8, 16];
    let ipc = svg::Chart {
        title: "IPC one-way by message size (ticks = instructions, log scale)".into(),
        y_label: "ticks".into(),
        series: vec![
            "Pecan, same address space".into(),
            "Pecan, between address spaces".into(),
            "Linux futex, threads".into(),
            "Linux futex, processes".into(),
            "Linux pipe".into(),
        ],
        groups: words
            .iter()
            .map(|w| svg::Group {
                label: format!("{w} words"),
                values: vec![
                    median_of(pecan, &format!("ipc-intra-{w}w")),
                    median_of(pecan, &format!("ipc-inter-{w}w")),
                    median_of(linux, &format!("futex-threads-{w}w")),
                    median_of(linux, &format!("futex-shm-{w}w")),
                    median_of(linux, &format!("pipe-{w}w")),
                ],
            })
            .collect(),
        log: true,
    };
    let memory = svg::Chart {
        title: "Memory bandwidth by method (bytes per tick)".into(),
        y_label: "bytes/tick".into(),
        series: vec!["Pecan".into(), "Linux".into()],
        groups: [
            ("memcpy (library)", "memcpy-runtime", "memcpy-glibc"),
            ("memcpy (bytewise)", "memcpy-bytewise", "memcpy-bytewise"),
            ("memset (library)", "memset-runtime", "memset-glibc"),
            ("uncached write", "uncached-write", ""),
            ("uncached read", "uncached-read", ""),
        ]
        .iter()
        .map(|(label, p, l)| svg::Group {
            label: (*label).into(),
            values: vec![median_of(pecan, p), median_of(linux, l)],
        })
        .collect(),
        log: false,
    };
    [
        ipc,
        memory,
        storage_chart(pecan, linux, "read"),
        storage_chart(pecan, linux, "write"),
    ]
}

fn write_outputs(
    out_dir: &Path,
    report: &str,
    pecan: &Side,
    linux: &Side,
    accel: Accel,
) -> Result<()> {
    std::fs::write(out_dir.join("report.md"), report)?;
    let json = serde_json::json!({
        "clock": clock_label(accel),
        "pecan": { "version": pecan.version, "skipped": pecan.skipped, "runs": pecan.runs },
        "linux": { "version": linux.version, "skipped": linux.skipped, "runs": linux.runs },
    });
    std::fs::write(
        out_dir.join("results.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    let charts = charts(pecan.results(), linux.results());
    for ((file, _), chart) in CHARTS.iter().zip(charts) {
        std::fs::write(out_dir.join(file), chart.to_svg())?;
    }
    Ok(())
}

const README_START: &str = "<!-- bench:start (written by `cargo xtask bench --update-docs`) -->";
const README_END: &str = "<!-- bench:end -->";

fn update_docs(root: &Path, out_dir: &Path, report: &str, table: &str) -> Result<()> {
    let docs = root.join("docs");
    std::fs::create_dir_all(docs.join("bench"))?;
    std::fs::write(docs.join("benchmarks.md"), report)?;
    for (chart, _) in CHARTS {
        std::fs::copy(out_dir.join(chart), docs.join("bench").join(chart))?;
    }
    let readme_path = root.join("README.md");
    let readme = std::fs::read_to_string(&readme_path)?;
    let section = format!("{README_START}\n\n{table}\n{README_END}");
    let updated = match (readme.find(README_START), readme.find(README_END)) {
        (Some(a), Some(b)) if a < b => format!(
            "{}{section}{}",
            &readme[..a],
            &readme[b + README_END.len()..]
        ),
        _ => bail!(
            "README.md has no `{README_START}` … `{README_END}` markers for the Performance table"
        ),
    };
    std::fs::write(&readme_path, updated)?;
    println!("==> updated docs/benchmarks.md, docs/bench/*.svg and the README's Performance table");
    Ok(())
}

/// The regression gate for `cargo xtask test`: a quick Pecan-only pass of
/// the budgeted benchmarks; one counted result per budget.
pub fn gate(system: &System) -> Counts {
    let root = workspace_root();
    let mut counts = Counts::default();
    let path: PathBuf = root.join("bench").join("budgets.toml");
    let budgets = match budgets::load(&path) {
        Ok(b) => b,
        Err(e) => {
            println!("FAIL bench budgets: {e:#}");
            counts.failed += 1;
            return counts;
        }
    };
    let names: Vec<&str> = budgets
        .iter()
        .filter_map(|b| catalog::find(Platform::Pecan, &b.name).map(|c| c.name))
        .collect();
    let log = root
        .join("target")
        .join("test-logs")
        .join("bench-budgets.log");
    println!(
        "==> benchmark budgets: {} (quick Pecan pass under icount)",
        names.join(", ")
    );
    let results = match run_pecan(system, &names, Accel::Tcg, &log) {
        Ok(r) => r,
        Err(e) => {
            println!("FAIL bench budgets: {e:#}");
            counts.failed += 1;
            return counts;
        }
    };
    for (name, verdict) in budgets::verdicts(&budgets, &results) {
        match verdict {
            Ok(text) => {
                println!("PASS bench budget {name}: {text}");
                counts.passed += 1;
            }
            Err(text) => {
                println!("FAIL bench budget {name}: {text}");
                counts.failed += 1;
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_and_mask() {
        let all = select(&[]).unwrap();
        let in_scenarios: usize = all.scenarios.iter().map(|(_, n)| n.len()).sum();
        assert_eq!(
            all.pecan.len() + in_scenarios + all.linux.len(),
            catalog::ALL.len()
        );
        assert!(all
            .scenarios
            .iter()
            .any(|(s, n)| *s == "stream" && n.contains(&"packet-stream-64k")));
        let some = select(&["null-syscall".into(), "getppid".into()]).unwrap();
        assert_eq!(
            (some.pecan, some.linux),
            (vec!["null-syscall"], vec!["getppid"])
        );
        assert!(some.scenarios.is_empty());
        assert_eq!(pecan_mask(&["null-syscall"]), 1);
        assert_eq!(pecan_mask(&["ipc-intra-0w", "null-syscall"]), 0b11);
        let e = select(&["nope".into()]).unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("unknown benchmark `nope`") && text.contains("getppid (Linux)"),
            "{text}"
        );
        assert_eq!(
            pecan_cmdline(&["null-syscall"]),
            "pecan.start=bench-server@16+own+serve,bench:0x1@64+own"
        );
    }
}
