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
}

impl BenchResult {
    /// Whether higher is better (throughput) rather than lower (ticks).
    pub fn higher_is_better(&self) -> bool {
        self.unit == bench::Unit::BytesPerTick.as_str()
    }

    /// The median as a human figure: ticks, or bytes per tick.
    pub fn display_median(&self) -> String {
        if self.higher_is_better() {
            format!(
                "{:.3} B/tick",
                self.median as f64 / bench::THROUGHPUT_SCALE as f64
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
        if result.unit != bench::Unit::Ticks.as_str() && !result.higher_is_better() {
            bail!("serial line {}: unknown unit `{}`", number + 1, result.unit);
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
/// they must be identical).
pub fn differing(runs: &[Vec<BenchResult>]) -> Vec<String> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for run in &runs[1..] {
        for r in run {
            let same = first.iter().find(|f| f.name == r.name);
            if same.is_none_or(|f| f.samples != r.samples) && !names.contains(&r.name) {
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

    #[test]
    fn differing_runs_are_named() {
        let a = parse(&line("null-syscall", "ticks", 50), Platform::Pecan).unwrap();
        let b = parse(&line("null-syscall", "ticks", 51), Platform::Pecan).unwrap();
        assert!(differing(&[a.clone(), a.clone()]).is_empty());
        assert_eq!(differing(&[a, b]), vec!["null-syscall".to_string()]);
    }
}
