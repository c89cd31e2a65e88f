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
    for (number, line) in serial.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        let Some(json) = line.strip_prefix("BENCH ") else {
            continue;
        };
        let result: BenchResult = serde_json::from_str(json)
            .with_context(|| format!("serial line {}: malformed BENCH line", number + 1))?;
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
    fn differing_runs_are_named() {
        let a = parse(&line("null-syscall", "ticks", 50), Platform::Pecan).unwrap();
        let b = parse(&line("null-syscall", "ticks", 51), Platform::Pecan).unwrap();
        assert!(differing(&[a.clone(), a.clone()]).is_empty());
        assert_eq!(differing(&[a, b]), vec!["null-syscall".to_string()]);
    }
}
