//! `cargo xtask bench --wall N`: the lab's wall-clock mode (method in
//! `bench::soak`, "Wall-clock throughput").
//!
//! Without icount the TSC is the host's, so a figure is real time, and it
//! varies with the host's load. The mode therefore boots Pecan and Linux
//! alternately, N pairs (at least `bench::soak::MIN_RUNS`), so that a
//! change of load hits both members of a pair alike, and reports for each
//! row both sides have the ratio of the pair's figures as Pecan's
//! advantage (above 1: Pecan better): its median over the pairs and its
//! range. The figure of a row is its median in the pair's run — ticks
//! (lower is better), bytes per tick (higher is better) — and for an I/O
//! row (`bench::catalog::IO_ROWS`) the throughput, bytes per million host
//! ticks of the runs' median (higher is better; per thousand, the
//! figure of the guests' own lines, rounded the slowest rows to 0). Rows one side lacks are listed as
//! `n/a`, never given a figure.
//!
//! What the ratios mean: under TCG a wall-clock figure is the emulator's
//! speed on the instructions a path executes, not a hardware cost — TCG
//! emulates AVX loops more slowly per byte than `rep movs`, for instance
//! (measured: memcpy-runtime against memcpy-glibc 0.60× without icount,
//! 1.5× in instructions). For I/O, where the device's host threads set
//! the pace, the ratio is what the lab claims; for CPU-bound rows the
//! icount table is the reference and the wall-clock row a check.
//!
//! Output: the table on the terminal, `target/bench/wall.md` and
//! `target/bench/wall.json` (every pair's figures), the serial logs as
//! `target/bench/*-serial-wall-N.log`.

use std::path::Path;

use anyhow::{bail, Result};
use bench::catalog;
use bench::soak::{self, Better, PairedStats};

use super::results::BenchResult;
use super::{pecan_pass, run_linux, Pass, PecanPlan};
use crate::accel::Accel;
use crate::util::display_path;

/// One compared row: what, the two benchmarks, which way is better, each
/// pair's figures and the ratio statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct WallRow {
    pub what: String,
    pub pecan: String,
    pub linux: String,
    pub figure: &'static str,
    pub better: Better,
    pub pairs: Vec<(u64, u64)>,
    pub stats: PairedStats,
}

/// The figure of a result in wall-clock mode: the median (ticks or bytes
/// per tick), or for an I/O benchmark the throughput of its median run.
fn figure(r: &BenchResult) -> Option<(u64, Better, &'static str)> {
    if let Some(io) = &r.io {
        let mut t = io.throughputs();
        let st = soak::run_stats(&mut t)?;
        return Some((
            st.median,
            Better::Higher,
            "throughput, bytes per 10⁶ host ticks",
        ));
    }
    Some(if r.is_wall_clock() {
        (r.median, Better::Higher, "requests/s")
    } else if r.higher_is_better() {
        (r.median, Better::Higher, "bytes/tick")
    } else {
        (r.median, Better::Lower, "ticks")
    })
}

/// The rows both sides have in every pair, with their paired ratios.
/// `pecan` and `linux` hold each pair's results, in pair order.
pub fn rows(pecan: &[Vec<BenchResult>], linux: &[Vec<BenchResult>]) -> Vec<WallRow> {
    let mut candidates: Vec<(String, &str, &str)> = catalog::ROWS
        .iter()
        .filter_map(|&(p, l)| {
            let what = catalog::find_pecan(p).map_or(p, |b| b.what);
            l.map(|l| (what.to_string(), p, l))
        })
        .collect();
    candidates.extend(
        catalog::IO_ROWS
            .iter()
            .filter_map(|row| Some((row.what.to_string(), row.pecan?, row.linux?))),
    );
    let find = |run: &[BenchResult], name: &str| run.iter().find(|r| r.name == name).cloned();
    let mut out = Vec::new();
    for (what, p, l) in candidates {
        let mut pairs = Vec::new();
        let mut kind = None;
        for (pr, lr) in pecan.iter().zip(linux) {
            let (Some(a), Some(b)) = (find(pr, p), find(lr, l)) else {
                break;
            };
            let (Some((fa, better, name)), Some((fb, _, _))) = (figure(&a), figure(&b)) else {
                break;
            };
            kind = Some((better, name));
            pairs.push((fa, fb));
        }
        let Some((better, name)) = kind else {
            continue;
        };
        if pairs.len() != pecan.len().min(linux.len()) {
            continue;
        }
        let mut ratios = vec![0.0; pairs.len()];
        if let Ok(stats) = soak::paired_ratios(&pairs, better, &mut ratios) {
            out.push(WallRow {
                what,
                pecan: p.to_string(),
                linux: l.to_string(),
                figure: name,
                better,
                pairs,
                stats,
            });
        }
    }
    out
}

/// The I/O rows a side lacks, for the table's `n/a` lines.
fn missing_io_rows() -> Vec<String> {
    catalog::IO_ROWS
        .iter()
        .filter(|r| r.pecan.is_none() || r.linux.is_none())
        .map(|r| {
            format!(
                "| {} | {} | {} | throughput, bytes per 10⁶ host ticks (higher is better) | n/a | n/a |\n",
                r.what,
                r.pecan.map_or("n/a".to_string(), |n| format!("`{n}`")),
                r.linux.map_or("n/a".to_string(), |n| format!("`{n}`"))
            )
        })
        .collect()
}

/// The wall-clock table as Markdown.
pub fn markdown(rows: &[WallRow], pairs: usize) -> String {
    let mut md = format!(
        "Wall-clock mode: no icount (a tick is a cycle of the host's TSC), {pairs} pairs, each \
         Pecan then Linux. Ratio: Pecan's advantage in the pair (above 1: Pecan better); the goal \
         binds the median ratio, and the range (min–max over the pairs) shows how much the \
         host's load moved it.\n\n\
         | benchmark | Pecan | Linux | figure (better) | median ratio | range |\n\
         |---|---|---|---|---:|---:|\n"
    );
    for r in rows {
        md.push_str(&format!(
            "| {} | `{}` | `{}` | {} ({} is better) | {:.2}× | {:.2}–{:.2}× |\n",
            r.what,
            r.pecan,
            r.linux,
            r.figure,
            match r.better {
                Better::Lower => "lower",
                Better::Higher => "higher",
            },
            r.stats.median,
            r.stats.min,
            r.stats.max
        ));
    }
    for line in missing_io_rows() {
        md.push_str(&line);
    }
    md
}

/// Runs the pairs and writes the report; `Ok(true)` when every pair ran.
pub(super) fn run(
    plan: &PecanPlan,
    linux_names: &[&'static str],
    pairs: u32,
    out_dir: &Path,
) -> Result<bool> {
    if plan.is_empty() || linux_names.is_empty() {
        bail!(
            "--wall compares the two systems: select benchmarks of both (e.g. memcpy-runtime \
             memcpy-glibc), or none for all"
        );
    }
    let mut pecan_runs = Vec::new();
    let mut linux_runs = Vec::new();
    let mut version = String::new();
    for i in 1..=pairs {
        let label = format!("wall-clock pair {i} of {pairs}");
        let log = format!("wall-{i}");
        let pass = Pass {
            accel: Accel::Tcg,
            icount: false,
            label: &label,
            log: &log,
        };
        pecan_runs.push(pecan_pass(plan, pass, out_dir)?);
        println!("==> Linux, {label}");
        let log = out_dir.join(format!("linux-serial-wall-{i}.log"));
        let (results, v) = run_linux(linux_names, (Accel::Tcg, false), &log)?;
        version = v;
        linux_runs.push(results);
    }
    let rows = rows(&pecan_runs, &linux_runs);
    let md = format!(
        "# Wall-clock pairs: Pecan {} and {version}\n\n{}",
        env!("CARGO_PKG_VERSION"),
        markdown(&rows, pairs as usize)
    );
    println!("\n{md}");
    std::fs::write(out_dir.join("wall.md"), &md)?;
    let json = serde_json::json!({
        "clock": "QEMU TCG without icount: a tick is a cycle of the host's TSC",
        "pairs": pairs,
        "pecan": pecan_runs,
        "linux": linux_runs,
        "rows": rows.iter().map(|r| serde_json::json!({
            "pecan": r.pecan, "linux": r.linux, "figure": r.figure,
            "figures": r.pairs, "median_ratio": r.stats.median,
            "min_ratio": r.stats.min, "max_ratio": r.stats.max,
        })).collect::<Vec<_>>(),
    });
    std::fs::write(
        out_dir.join("wall.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    println!(
        "==> wrote {} and wall.json",
        display_path(&out_dir.join("wall.md"))
    );
    Ok(!rows.is_empty())
}

#[cfg(test)]
mod tests {
    use super::super::results::parse;
    use super::*;
    use bench::catalog::Platform;

    fn line(name: &str, unit: &str, median: u64) -> String {
        format!(
            "BENCH {{\"name\":\"{name}\",\"what\":\"w\",\"unit\":\"{unit}\",\"min\":{median},\"median\":{median},\"max\":{median},\"samples\":[{median}]}}\n"
        )
    }

    #[test]
    fn pairs_give_median_ratio_and_range() {
        let pecan: Vec<_> = [100, 110, 90, 100, 105]
            .iter()
            .map(|&m| {
                let s =
                    line("memcpy-runtime", "bytes/tick", m) + &line("null-syscall", "ticks", 50);
                parse(&s, Platform::Pecan).unwrap()
            })
            .collect();
        let linux: Vec<_> = [50, 50, 60, 40, 50]
            .iter()
            .map(|&m| {
                let s = line("memcpy-glibc", "bytes/tick", m) + &line("getppid", "ticks", 100);
                parse(&s, Platform::Linux).unwrap()
            })
            .collect();
        let rows = rows(&pecan, &linux);
        let memcpy = rows.iter().find(|r| r.pecan == "memcpy-runtime").unwrap();
        assert_eq!(memcpy.better, Better::Higher);
        assert_eq!(memcpy.pairs.len(), 5);
        // Ratios 2.0, 2.2, 1.5, 2.5, 2.1.
        assert_eq!(memcpy.stats.median, 2.1);
        assert_eq!((memcpy.stats.min, memcpy.stats.max), (1.5, 2.5));
        let null = rows.iter().find(|r| r.pecan == "null-syscall").unwrap();
        assert_eq!((null.better, null.stats.median), (Better::Lower, 2.0));
        let md = markdown(&rows, 5);
        assert!(
            md.contains("| `memcpy-runtime` | `memcpy-glibc` | bytes/tick (higher is better) | 2.10× | 1.50–2.50× |"),
            "{md}"
        );
        // The I/O row has both sides now (blk-read-64k): no `n/a` line,
        // and without their figures in these runs it is left out.
        assert!(!md.contains("blk-read-64k"), "{md}");
        // A row missing from one pair is left out.
        let short = vec![pecan[0].clone(), Vec::new()];
        assert!(super::rows(&short, &linux[..2]).is_empty());
    }
}
