//! The regression gate: `bench/budgets.toml` holds a maximum median, in
//! ticks under QEMU TCG icount, for Pecan's key operations. Under icount the
//! figures are deterministic, so budgets can be tight; tightening one is
//! part of every optimization.

use std::path::Path;

use anyhow::{bail, Result};
use bench::catalog::{self, Platform};
use serde::Deserialize;

use crate::tomlfile;

use super::results::BenchResult;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Benchmark name → maximum median ticks.
    budgets: std::collections::BTreeMap<String, u64>,
}

/// One budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub name: String,
    pub max_ticks: u64,
}

/// Loads and checks the budgets file: every name a Pecan benchmark whose
/// unit is ticks.
pub fn load(path: &Path) -> Result<Vec<Budget>> {
    let (file, _) = tomlfile::load::<File>(path)?;
    check(file, path)
}

fn check(file: File, path: &Path) -> Result<Vec<Budget>> {
    let mut budgets = Vec::new();
    for (name, max_ticks) in file.budgets {
        if catalog::find(Platform::Pecan, &name).is_none() {
            bail!(
                "{}: `{name}` is not a Pecan benchmark (known: {})",
                path.display(),
                known()
            );
        }
        budgets.push(Budget { name, max_ticks });
    }
    if budgets.is_empty() {
        bail!("{}: no budgets", path.display());
    }
    Ok(budgets)
}

fn known() -> String {
    catalog::ALL
        .iter()
        .filter(|b| b.platform == Platform::Pecan)
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks results against budgets: one line per budget, `Ok` if met.
pub fn verdicts(
    budgets: &[Budget],
    results: &[BenchResult],
) -> Vec<(String, Result<String, String>)> {
    budgets
        .iter()
        .map(|b| {
            let verdict = match results.iter().find(|r| r.name == b.name) {
                None => Err("no result (the benchmark did not report)".to_string()),
                Some(r) if r.median <= b.max_ticks => {
                    Ok(format!("median {} ticks, budget {}", r.median, b.max_ticks))
                }
                Some(r) => Err(format!(
                    "median {} ticks exceeds the budget of {} (bench/budgets.toml)",
                    r.median, b.max_ticks
                )),
            };
            (b.name.clone(), verdict)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Budget>> {
        check(toml::from_str(text)?, Path::new("bench/budgets.toml"))
    }

    #[test]
    fn budgets_parse_and_refuse_unknown_names() {
        let b = parse("[budgets]\nnull-syscall = 50\n").unwrap();
        assert_eq!(
            b,
            vec![Budget {
                name: "null-syscall".into(),
                max_ticks: 50
            }]
        );
        let e = parse("[budgets]\ngetppid = 50\n").unwrap_err();
        assert!(format!("{e:#}").contains("`getppid` is not a Pecan benchmark"));
        assert!(parse("[budgets]\n").is_err());
        assert!(parse("[budget]\nnull-syscall = 1\n").is_err());
    }

    #[test]
    fn verdicts_compare_medians() {
        let budgets =
            parse("[budgets]\nnull-syscall = 50\nring-2 = 10\nnotification = 5\n").unwrap();
        let result = |name: &str, median| BenchResult {
            name: name.into(),
            what: String::new(),
            unit: "ticks".into(),
            min: median,
            median,
            max: median,
            samples: vec![median],
            io: None,
            vm_exits: None,
        };
        let v = verdicts(
            &budgets,
            &[result("null-syscall", 50), result("ring-2", 11)],
        );
        let get = |n: &str| v.iter().find(|(name, _)| name == n).unwrap().1.clone();
        assert!(get("null-syscall").is_ok());
        assert!(get("ring-2")
            .unwrap_err()
            .contains("exceeds the budget of 10"));
        assert!(get("notification").unwrap_err().contains("no result"));
    }
}
