//! Benchmark results: parsing the guests' `BENCH` lines (format in the
//! `bench` crate's docs), the side-by-side table of `bench::catalog::ROWS`,
//! and the check that repeated runs agree.

use anyhow::{bail, Context, Result};
use bench::catalog::{self, Platform};
use serde::{Deserialize, Serialize};

/// One benchmark's result as a guest reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchResult {
    pub name: String,
    pub what: String,
    pub unit: String,
    pub min: u64,
    pub median: u64,
    pub max: u64,
    pub samples: Vec<u64>,
    /// An I/O benchmark's runs (`bench::report_io`): its samples are the
    /// runs' CPU costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoDetail>,
    /// In a Linux guest of Pecan's VMM: the VMM's exits during the
    /// benchmark (its `VMEXITS` line, `bench-linux --vm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_exits: Option<VmExits>,
}

/// A `VMEXITS` line (`bench-linux --vm` in a Linux guest of Pecan's VMM):
/// the exits the VMM handled during the whole benchmark — set-up, warm-up
/// and samples; the counter reads' own taken off — the runs that host
/// interrupts ended meanwhile (no exit to the VMM: the kernel resumes the
/// guest), and the operations the benchmark did in that time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmExits {
    pub exits: u64,
    pub host: u64,
    pub operations: u64,
}

impl VmExits {
    /// Exits per operation.
    pub fn per_operation(&self) -> f64 {
        self.exits as f64 / self.operations.max(1) as f64
    }

    /// Host-interrupted runs per operation.
    pub fn host_per_operation(&self) -> f64 {
        self.host as f64 / self.operations.max(1) as f64
    }
}

/// A `VMEXITS` line's object.
#[derive(Deserialize)]
struct VmExitsLine {
    name: String,
    #[serde(flatten)]
    exits: VmExits,
}

/// The report lines of a serial output (`BENCH ...`, `VMEXITS ...`) with
/// their 1-based line numbers. A Linux guest of Pecan's VMM prints its
/// console as `[NAME] text` lines, which the VMM cuts every 200
/// characters (`components/apps/vmm`, `MAX_LINE`): a `[NAME] BENCH` or
/// `[NAME] VMEXITS` line loses its prefix, and the following `[NAME] `
/// lines are appended until its JSON object is complete (a proper prefix
/// of a JSON object never parses), at most [`MAX_PIECES`] of them.
fn report_lines(serial: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = serial.lines().map(|l| l.trim_end_matches('\r')).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let number = i + 1;
        i += 1;
        if line.starts_with("BENCH ") || line.starts_with("VMEXITS ") {
            out.push((number, line.to_string()));
            continue;
        }
        let Some((prefix, text)) = guest_line(line) else {
            continue;
        };
        if !(text.starts_with("BENCH ") || text.starts_with("VMEXITS ")) {
            continue;
        }
        let mut text = text.to_string();
        let mut pieces = 1;
        while !complete(&text) && pieces < MAX_PIECES && i < lines.len() {
            match guest_line(lines[i]) {
                Some((p, more)) if p == prefix => {
                    text.push_str(more);
                    pieces += 1;
                    i += 1;
                }
                // Another writer's line in between: skip it.
                _ => i += 1,
            }
        }
        out.push((number, text));
    }
    out
}

/// How many console pieces one report line may span (a `BENCH` line of
/// 1000 samples of 8 digits is some 45 pieces of 200 characters).
const MAX_PIECES: usize = 1000;

/// `[NAME] text` → (`[NAME] `, text).
fn guest_line(line: &str) -> Option<(&str, &str)> {
    if !line.starts_with('[') {
        return None;
    }
    let end = line.find("] ")?;
    let name = &line[1..end];
    let good = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
    good.then(|| line.split_at(end + 2))
}

/// Whether a report line's JSON object is whole.
fn complete(line: &str) -> bool {
    let json = line.split_once(' ').map_or("", |(_, j)| j);
    serde_json::from_str::<serde_json::Value>(json).is_ok()
}

/// The `io` object of an I/O benchmark's line: per run, elapsed ticks and
/// soaker iterations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoDetail {
    pub bytes: u64,
    pub ticks_per_iteration: u64,
    pub elapsed: Vec<u64>,
    pub soaked: Vec<u64>,
}

/// The wall-clock mode's throughput scale: bytes per million host ticks.
/// (`bench::THROUGHPUT_SCALE`, bytes per thousand, rounded a 1 MiB run of
/// 512-byte requests, paced over a second of a 2.5 GHz host, to 0.)
pub const WALL_THROUGHPUT_SCALE: u64 = 1_000_000;

impl IoDetail {
    /// Each run's throughput: bytes per elapsed tick ×
    /// [`WALL_THROUGHPUT_SCALE`].
    pub fn throughputs(&self) -> Vec<u64> {
        self.elapsed
            .iter()
            .map(|&e| {
                let scaled = u128::from(self.bytes) * u128::from(WALL_THROUGHPUT_SCALE)
                    / u128::from(e.max(1));
                scaled.min(u128::from(u64::MAX)) as u64
            })
            .collect()
    }
}

impl BenchResult {
    /// Whether higher is better (throughput) rather than lower (ticks,
    /// ticks per KiB).
    pub fn higher_is_better(&self) -> bool {
        self.unit == bench::Unit::BytesPerTick.as_str() || self.is_wall_clock()
    }

    /// Whether this is a figure of the host's clock (an HTTP benchmark's
    /// requests per second, `bench::httpload`): it varies from run to run
    /// by nature, under icount too.
    pub fn is_wall_clock(&self) -> bool {
        self.unit == bench::Unit::RequestsPerSecond.as_str()
    }

    /// Whether this is an I/O benchmark's CPU cost (`bench::soak`): it
    /// varies a little from run to run by design.
    pub fn is_io(&self) -> bool {
        self.unit == bench::Unit::TicksPerKib.as_str()
    }

    /// The median as a human figure: ticks, bytes per tick, or busy ticks
    /// per KiB.
    pub fn display_median(&self) -> String {
        if self.is_wall_clock() {
            format!("{} requests/s", self.median)
        } else if self.higher_is_better() {
            format!(
                "{:.3} B/tick",
                self.median as f64 / bench::THROUGHPUT_SCALE as f64
            )
        } else if self.is_io() {
            format!(
                "{:.1} ticks/KiB",
                self.median as f64 / bench::soak::COST_SCALE as f64
            )
        } else {
            format!("{}", self.median)
        }
    }
}

/// Parses every `BENCH ` line of a guest's serial output; other lines are
/// ignored. A malformed line, an unknown name, a unit that is not one of
/// the two, or a benchmark reported twice is an error naming the line.
pub fn parse(serial: &str, platform: Platform) -> Result<Vec<BenchResult>> {
    let mut results: Vec<BenchResult> = Vec::new();
    let mut exits: Vec<(usize, VmExitsLine)> = Vec::new();
    for (number, line) in report_lines(serial) {
        if let Some(json) = line.strip_prefix("VMEXITS ") {
            let e: VmExitsLine = serde_json::from_str(json)
                .with_context(|| format!("serial line {number}: malformed VMEXITS line"))?;
            exits.push((number, e));
            continue;
        }
        let Some(json) = line.strip_prefix("BENCH ") else {
            continue;
        };
        let number = number - 1;
        let result: BenchResult = serde_json::from_str(json)
            .with_context(|| format!("serial line {}: malformed BENCH line", number + 1))?;
        if result.vm_exits.is_some() {
            bail!(
                "serial line {}: `{}`: exit counts come in a VMEXITS line",
                number + 1,
                result.name
            );
        }
        let known = if platform.is_pecan() {
            catalog::find_pecan(&result.name).is_some()
        } else {
            catalog::find(platform, &result.name).is_some()
        };
        if !known {
            bail!(
                "serial line {}: unknown {platform:?} benchmark `{}`",
                number + 1,
                result.name
            );
        }
        if result.unit != bench::Unit::Ticks.as_str()
            && !result.higher_is_better()
            && !result.is_io()
        {
            bail!("serial line {}: unknown unit `{}`", number + 1, result.unit);
        }
        if result.is_io() != result.io.is_some() {
            bail!(
                "serial line {}: `{}`: an `io` object goes with unit ticks/KiB and only with it",
                number + 1,
                result.name
            );
        }
        if let Some(io) = &result.io {
            if io.elapsed.len() != result.samples.len() || io.soaked.len() != result.samples.len() {
                bail!(
                    "serial line {}: `{}`: the io object's runs do not match the samples",
                    number + 1,
                    result.name
                );
            }
        }
        if results.iter().any(|r| r.name == result.name) {
            bail!(
                "serial line {}: `{}` reported twice",
                number + 1,
                result.name
            );
        }
        results.push(result);
    }
    for (number, e) in exits {
        match results.iter_mut().find(|r| r.name == e.name) {
            Some(r) if r.vm_exits.is_none() => r.vm_exits = Some(e.exits),
            Some(_) => bail!("serial line {number}: `{}`: a second VMEXITS line", e.name),
            None => bail!(
                "serial line {number}: VMEXITS for `{}`, which reported no result",
                e.name
            ),
        }
    }
    Ok(results)
}

/// Names of runs whose results differ from the first run's (under icount
/// they must be identical; I/O benchmarks vary by design and are not
/// compared: `bench::soak`, "Tolerance").
pub fn differing(runs: &[Vec<BenchResult>]) -> Vec<String> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for run in &runs[1..] {
        for r in run {
            let same = first.iter().find(|f| f.name == r.name);
            if !r.is_io()
                && !r.is_wall_clock()
                && same.is_none_or(|f| f.samples != r.samples)
                && !names.contains(&r.name)
            {
                names.push(r.name.clone());
            }
        }
    }
    names
}

/// A row of the side-by-side table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub what: String,
    pub pecan: Option<BenchResult>,
    pub linux_name: Option<String>,
    pub linux: Option<BenchResult>,
    /// How many times better Pecan is (> 1: Pecan better), when both ran.
    pub advantage: Option<f64>,
    /// The emulator distorts the row (`bench::catalog::CAVEATS`): the
    /// note, and whether the advantage is withheld.
    pub caveat: Option<(&'static str, bool)>,
}

/// The table over the rows of the catalog for which at least one side has
/// a result.
pub fn table(pecan: &[BenchResult], linux: &[BenchResult]) -> Vec<Row> {
    let by_name = |list: &[BenchResult], name: &str| list.iter().find(|r| r.name == name).cloned();
    let mut rows = Vec::new();
    for (p, l) in catalog::ROWS {
        let pr = by_name(pecan, p);
        let lr = l.and_then(|l| by_name(linux, l));
        if pr.is_none() && lr.is_none() {
            continue;
        }
        let advantage = match (&pr, &lr) {
            (Some(p), Some(l)) if p.median > 0 && l.median > 0 => Some(if p.higher_is_better() {
                p.median as f64 / l.median as f64
            } else {
                l.median as f64 / p.median as f64
            }),
            _ => None,
        };
        let what = catalog::find_pecan(p).map_or(p.to_string(), |b| b.what.to_string());
        rows.push(Row {
            what,
            pecan: pr,
            linux_name: l.map(str::to_string),
            linux: lr,
            advantage,
            caveat: catalog::caveat(p),
        });
    }
    rows
}

/// The table as Markdown (also printed to the terminal).
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| benchmark | Pecan (median) | Linux counterpart | Linux (median) | Pecan advantage |\n|---|---:|---|---:|---:|\n",
    );
    let mut notes: Vec<&str> = Vec::new();
    for r in rows {
        let pecan = r
            .pecan
            .as_ref()
            .map_or("—".to_string(), BenchResult::display_median);
        let linux = r
            .linux
            .as_ref()
            .map_or("—".to_string(), BenchResult::display_median);
        let name = r.linux_name.as_deref().unwrap_or("n/a");
        let mut adv = r.advantage.map_or("—".to_string(), |a| format!("{a:.1}×"));
        let mut what = r.what.clone();
        if let Some((note, void)) = r.caveat {
            let n = match notes.iter().position(|&x| x == note) {
                Some(i) => i + 1,
                None => {
                    notes.push(note);
                    notes.len()
                }
            };
            what.push_str(&format!(" (note {n})"));
            if void && r.advantage.is_some() {
                adv = format!("not shown (note {n})");
            }
        }
        out.push_str(&format!(
            "| {what} | {pecan} | {name} | {linux} | {adv} |\n"
        ));
    }
    for (i, note) in notes.iter().enumerate() {
        if i == 0 {
            out.push('\n');
        }
        out.push_str(&format!("Note {}: {note}.\n", i + 1));
        if i + 1 < notes.len() {
            out.push('\n');
        }
    }
    out
}

/// How far Linux in Pecan's VM may be from native Linux on a row of the
/// VM table (issue 19's goal), percent.
pub const VM_GOAL_PERCENT: f64 = 2.0;

/// The VM table (`bench::catalog::VM_ROWS`): each benchmark of
/// `bench-linux` natively (`linux`) and in Pecan's VM (`pecan`, the
/// `vm-NAME` results of `scenarios/linux-vm-bench.toml`), how much more
/// the VM needs (ticks) or how much less it moves (bytes per tick), and
/// the VMM's exits and host interrupts per operation. `None` when no VM
/// row ran.
pub fn vm_markdown_table(pecan: &[BenchResult], linux: &[BenchResult]) -> Option<String> {
    let by_name = |list: &[BenchResult], name: &str| list.iter().find(|r| r.name == name).cloned();
    let mut out = String::from(
        "| benchmark | Linux native (median) | Linux in Pecan's VM (median) | VM vs native | VMM exits per operation | host interrupts per operation |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    let mut any = false;
    for (vm, native) in catalog::VM_ROWS {
        let v = by_name(pecan, vm);
        let n = by_name(linux, native);
        if v.is_none() && n.is_none() {
            continue;
        }
        any = true;
        let median =
            |r: &Option<BenchResult>| r.as_ref().map_or("—".into(), BenchResult::display_median);
        let diff = match (&v, &n) {
            (Some(v), Some(n)) if v.median > 0 && n.median > 0 => {
                // Positive: the VM is slower (more ticks, fewer bytes per tick).
                let slower = if v.higher_is_better() {
                    n.median as f64 / v.median as f64 - 1.0
                } else {
                    v.median as f64 / n.median as f64 - 1.0
                } * 100.0;
                let mark = if slower.abs() > VM_GOAL_PERCENT {
                    " (beyond 2 %)"
                } else {
                    ""
                };
                if slower.abs() < 0.05 {
                    "0.0 %".to_string()
                } else {
                    format!(
                        "{slower:+.1} % {}{mark}",
                        if slower > 0.0 { "slower" } else { "faster" }
                    )
                }
            }
            _ => "—".into(),
        };
        let exits = v.as_ref().and_then(|v| v.vm_exits.as_ref());
        let what = catalog::find(Platform::Linux, native).map_or(*native, |b| b.what);
        out.push_str(&format!(
            "| {what} (`{native}`) | {} | {} | {diff} | {} | {} |\n",
            median(&n),
            median(&v),
            exits.map_or("—".into(), |e| format!("{:.3}", e.per_operation())),
            exits.map_or("—".into(), |e| format!("{:.3}", e.host_per_operation())),
        ));
    }
    any.then_some(out)
}

/// The I/O table under icount (`bench::catalog::IO_ROWS`, method in
/// `bench::soak`): the figure a goal binds is the CPU cost, busy ticks per
/// KiB moved (lower is better), the median over the runs of one boot with
/// its range and spread. A side without a benchmark is `n/a`. `None`
/// when no I/O benchmark ran.
pub fn io_markdown_table(pecan: &[BenchResult], linux: &[BenchResult]) -> Option<String> {
    let by_name = |list: &[BenchResult], name: Option<&str>| {
        name.and_then(|n| list.iter().find(|r| r.name == n).cloned())
    };
    let cell = |r: &Option<BenchResult>, name: Option<&str>| match (r, name) {
        (Some(r), _) => {
            let mut runs = r.samples.clone();
            match bench::soak::run_stats(&mut runs) {
                Some(st) => format!(
                    "{} ({:.1}–{:.1}, spread {:.1} %, {} runs)",
                    r.display_median(),
                    st.min as f64 / bench::soak::COST_SCALE as f64,
                    st.max as f64 / bench::soak::COST_SCALE as f64,
                    st.spread_percent,
                    st.runs
                ),
                None => "—".to_string(),
            }
        }
        (None, Some(_)) => "—".to_string(),
        (None, None) => "n/a".to_string(),
    };
    let mut out = String::from(
        "| transfer | Pecan | Pecan: CPU cost, busy ticks/KiB (median) | Linux | Linux: CPU cost, busy ticks/KiB (median) | Pecan advantage |\n\
         |---|---|---:|---|---:|---:|\n",
    );
    let mut any = false;
    for row in bench::catalog::IO_ROWS {
        let p = by_name(pecan, row.pecan);
        let l = by_name(linux, row.linux);
        if p.is_none() && l.is_none() {
            continue;
        }
        any = true;
        let advantage = match (&p, &l) {
            (Some(p), Some(l)) if p.median > 0 => {
                format!("{:.1}×", l.median as f64 / p.median as f64)
            }
            _ => "—".to_string(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {advantage} |\n",
            row.what,
            row.pecan.map_or("n/a".to_string(), |n| format!("`{n}`")),
            cell(&p, row.pecan),
            row.linux.map_or("n/a".to_string(), |n| format!("`{n}`")),
            cell(&l, row.linux),
        ));
    }
    out.push_str(&format!(
        "\nThe goal binds the CPU cost: busy ticks (elapsed minus the soaker's ticks) per KiB \
         moved, lower is better; the median of the runs, with min–max and spread. Tolerance: a \
         spread up to {} % is expected (device completions come from QEMU's host threads), and \
         medians closer than that are equal.\n",
        bench::soak::TOLERANCE_PERCENT
    ));
    any.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, unit: &str, median: u64) -> String {
        format!(
            "BENCH {{\"name\":\"{name}\",\"what\":\"w\",\"unit\":\"{unit}\",\"min\":{median},\"median\":{median},\"max\":{median},\"samples\":[{median}]}}"
        )
    }

    #[test]
    fn parses_bench_lines_and_ignores_the_rest() {
        let serial = format!(
            "kernel: hello\n{}\r\nroot: x\n{}\n",
            line("null-syscall", "ticks", 47),
            line("memcpy-runtime", "bytes/tick", 8000)
        );
        let results = parse(&serial, Platform::Pecan).unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(results[0].median, 47);
        assert!(results[1].higher_is_better());
        assert_eq!(results[1].display_median(), "8.000 B/tick");
    }

    #[test]
    fn refuses_bad_lines() {
        let unknown = parse(&line("no-such", "ticks", 1), Platform::Pecan).unwrap_err();
        assert!(format!("{unknown:#}").contains("unknown Pecan benchmark `no-such`"));
        let linux_name = parse(&line("getppid", "ticks", 1), Platform::Pecan);
        assert!(linux_name.is_err());
        let unit = parse(&line("null-syscall", "seconds", 1), Platform::Pecan).unwrap_err();
        assert!(format!("{unit:#}").contains("unknown unit"));
        let twice = format!(
            "{}\n{}",
            line("null-syscall", "ticks", 1),
            line("null-syscall", "ticks", 1)
        );
        assert!(
            format!("{:#}", parse(&twice, Platform::Pecan).unwrap_err()).contains("reported twice")
        );
        let broken = parse("BENCH {\"name\":", Platform::Pecan).unwrap_err();
        assert!(format!("{broken:#}").contains("serial line 1: malformed BENCH line"));
    }

    #[test]
    fn table_pairs_rows_and_computes_advantage() {
        let pecan = parse(&line("null-syscall", "ticks", 50), Platform::Pecan).unwrap();
        let linux = parse(&line("getppid", "ticks", 350), Platform::Linux).unwrap();
        let rows = table(&pecan, &linux);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].advantage, Some(7.0));
        let md = markdown_table(&rows);
        assert!(md.contains("| 50 | getppid | 350 | 7.0× |"), "{md}");
        // Throughput: higher is better.
        let p = parse(&line("memcpy-runtime", "bytes/tick", 8000), Platform::Pecan).unwrap();
        let l = parse(&line("memcpy-glibc", "bytes/tick", 2000), Platform::Linux).unwrap();
        assert_eq!(table(&p, &l)[0].advantage, Some(4.0));
    }

    /// A row the emulator distorts carries its note, and its ratio is not
    /// shown when it would rest on the artifact.
    #[test]
    fn emulator_artifacts_are_marked() {
        let p = parse(
            &line("memset-runtime", "bytes/tick", 30000),
            Platform::Pecan,
        )
        .unwrap();
        let l = parse(&line("memset-glibc", "bytes/tick", 1000), Platform::Linux).unwrap();
        let md = markdown_table(&table(&p, &l));
        assert!(
            md.contains("| memset 8 MiB, the runtime's, bytes/tick (note 1) | 30.000 B/tick | memset-glibc | 1.000 B/tick | not shown (note 1) |"),
            "{md}"
        );
        assert!(
            md.contains("\nNote 1: emulator artifact: under icount"),
            "{md}"
        );
        assert!(!md.contains("30.0×"), "{md}");
        let u = parse(&line("uncached-write", "bytes/tick", 5818), Platform::Pecan).unwrap();
        let md = markdown_table(&table(&u, &[]));
        assert!(
            md.contains("(note 1) | 5.818 B/tick | n/a | — | — |"),
            "{md}"
        );
        assert!(md.contains("Note 1: TCG ignores cache attributes"), "{md}");
    }

    fn io_line(name: &str, costs: &[u64]) -> String {
        let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        format!(
            "BENCH {{\"name\":\"{name}\",\"what\":\"w\",\"unit\":\"ticks/KiB\",\"min\":0,\"median\":{},\"max\":0,\"samples\":[{}],\"io\":{{\"bytes\":1024,\"ticks_per_iteration\":3,\"elapsed\":[{}],\"soaked\":[{}]}}}}",
            costs[costs.len() / 2],
            list(costs),
            list(&vec![2048; costs.len()]),
            list(&vec![1; costs.len()])
        )
    }

    #[test]
    fn io_results_and_table() {
        let costs = [398_000, 400_000, 396_000, 399_000, 401_000];
        let linux = parse(&io_line("blk-read-64k-linux", &costs), Platform::Linux).unwrap();
        assert!(linux[0].is_io() && !linux[0].higher_is_better());
        assert_eq!(linux[0].display_median(), "396.0 ticks/KiB");
        assert_eq!(
            linux[0].io.as_ref().unwrap().throughputs(),
            vec![500_000; 5]
        );
        let md = io_markdown_table(&[], &linux).unwrap();
        assert!(
            md.contains("| `blk-read-64k` | — | `blk-read-64k-linux` | 396.0 ticks/KiB (396.0–401.0, spread 1.3 %, 5 runs) | — |"),
            "{md}"
        );
        assert!(md.contains("lower is better"), "{md}");
        // Both sides: the row pairs them, lower is better.
        let pecan = parse(&io_line("blk-read-64k", &[20_000; 5]), Platform::Pecan).unwrap();
        let md = io_markdown_table(&pecan, &linux).unwrap();
        assert!(
            md.contains("| `blk-read-64k` | 20.0 ticks/KiB (20.0–20.0, spread 0.0 %, 5 runs) | `blk-read-64k-linux` | 396.0 ticks/KiB (396.0–401.0, spread 1.3 %, 5 runs) | 19.8× |"),
            "{md}"
        );
        assert_eq!(io_markdown_table(&[], &[]), None);
        // I/O runs vary by design: not a disagreement.
        let other = parse(&io_line("blk-read-64k-linux", &[1, 2, 3]), Platform::Linux).unwrap();
        assert!(differing(&[linux.clone(), other]).is_empty());
        // An io object must match the unit and the samples.
        let plain = line("getppid", "ticks/KiB", 5);
        assert!(parse(&plain, Platform::Linux).is_err());
        let short =
            io_line("blk-read-64k-linux", &[1, 2]).replace("\"samples\":[1,2]", "\"samples\":[1]");
        assert!(parse(&short, Platform::Linux).is_err());
    }

    #[test]
    fn guest_console_lines_are_joined_and_exits_attached() {
        // The VMM cuts its guest's console lines every 200 characters.
        let bench = line("vm-getppid", "ticks", 1400);
        let mut serial = String::from("vmm: vm1: booting\n[vm1] bench-linux: 1 benchmarks\n");
        let chars: Vec<char> = bench.chars().collect();
        for (i, piece) in chars.chunks(40).enumerate() {
            serial.push_str(&format!("[vm1] {}\n", piece.iter().collect::<String>()));
            if i == 1 {
                serial.push_str("timer: a line of another component\n");
            }
        }
        serial.push_str(
            "[vm1] VMEXITS {\"name\":\"vm-getppid\",\"exits\":11,\"host\":4,\"operations\":1100}\n",
        );
        let results = parse(&serial, Platform::Pecan).unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].median, 1400);
        let e = results[0].vm_exits.as_ref().unwrap();
        assert_eq!((e.exits, e.host, e.operations), (11, 4, 1100));
        assert!((e.per_operation() - 0.01).abs() < 1e-9);
        // Exits of a benchmark that reported nothing, or twice.
        let orphan =
            "[vm1] VMEXITS {\"name\":\"vm-fork\",\"exits\":1,\"host\":0,\"operations\":3}\n";
        assert!(parse(orphan, Platform::Pecan).is_err());
        let twice = format!("{serial}{}", serial.lines().last().unwrap());
        assert!(
            format!("{:#}", parse(&twice, Platform::Pecan).unwrap_err()).contains("second VMEXITS")
        );
        // The VM table pairs it with the native row.
        let native = parse(&line("getppid", "ticks", 1373), Platform::Linux).unwrap();
        let md = vm_markdown_table(&results, &native).unwrap();
        assert!(
            md.contains("(`getppid`) | 1373 | 1400 | +2.0 % slower | 0.010 | 0.004 |"),
            "{md}"
        );
        let slow = parse(&line("getppid", "ticks", 1000), Platform::Linux).unwrap();
        let md = vm_markdown_table(&results, &slow).unwrap();
        assert!(md.contains("+40.0 % slower (beyond 2 %)"), "{md}");
        assert_eq!(vm_markdown_table(&[], &[]), None);
    }

    #[test]
    fn differing_runs_are_named() {
        let a = parse(&line("null-syscall", "ticks", 50), Platform::Pecan).unwrap();
        let b = parse(&line("null-syscall", "ticks", 51), Platform::Pecan).unwrap();
        assert!(differing(&[a.clone(), a.clone()]).is_empty());
        assert_eq!(differing(&[a, b]), vec!["null-syscall".to_string()]);
    }
}
