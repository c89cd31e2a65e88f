//! Scenarios: `scenarios/NAME.toml`, what `cargo xtask run NAME` boots and
//! what scenario tests refer to.
//!
//! Today a scenario is only a description and a kernel command line:
//!
//! ```toml
//! description = "Kernel boot banner and self-checks"
//! cmdline = ""          # optional, kernel command line
//! ```
//!
//! Unknown keys are errors (with file and line). Later the format grows the
//! component list (which components, their quotas, session routing); that
//! belongs here, next to [`Scenario`].

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::tomlfile;
use crate::util::display_path;

/// The scenario directory of the workspace at `root`.
pub fn dir(root: &Path) -> PathBuf {
    root.join("scenarios")
}

/// One parsed scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// One line saying what the scenario shows; printed in listings.
    pub description: String,
    /// Kernel command line (QEMU `-append`).
    #[serde(default)]
    pub cmdline: String,
}

/// A scenario as listed: its name and its description, or the reason its
/// file does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub description: std::result::Result<String, String>,
}

/// Loads scenario `name` from `dir`. An unknown name is an error that lists
/// the known scenarios.
pub fn load(dir: &Path, name: &str) -> Result<Scenario> {
    let path = dir.join(format!("{name}.toml"));
    let plain_name = !name.is_empty() && !name.contains(['/', '\\']) && !name.starts_with('.');
    if !plain_name || !path.is_file() {
        let known = list(dir).unwrap_or_default();
        bail!(
            "unknown scenario `{name}` (no {})\nknown scenarios:\n{}",
            display_path(&path),
            format_listing(&known)
        );
    }
    let (scenario, _text) = tomlfile::load(&path)?;
    Ok(scenario)
}

/// Every `*.toml` in `dir`, sorted by name.
pub fn list(dir: &Path) -> Result<Vec<Listed>> {
    let mut listed = Vec::new();
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("reading {}", display_path(dir)))?;
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let description = tomlfile::load::<Scenario>(&path)
            .map(|(s, _)| s.description)
            .map_err(|e| format!("{e:#}"));
        listed.push(Listed {
            name: name.to_string(),
            description,
        });
    }
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(listed)
}

/// The listing printed for an unknown scenario: one `  name  description`
/// line per scenario, names padded to one column.
pub fn format_listing(listed: &[Listed]) -> String {
    if listed.is_empty() {
        return "  (none)".to_string();
    }
    let width = listed.iter().map(|l| l.name.len()).max().unwrap_or(0);
    listed
        .iter()
        .map(|l| match &l.description {
            Ok(d) => format!("  {:width$}  {d}", l.name),
            Err(e) => format!("  {:width$}  (broken: {e})", l.name),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::temp_dir;

    #[test]
    fn listing_and_loading() {
        let dir = temp_dir("scenarios");
        std::fs::write(
            dir.join("demo.toml"),
            "description = \"The demo\"\ncmdline = \"a=b\"\n",
        )
        .unwrap();
        std::fs::write(dir.join("bench.toml"), "description = \"Benchmarks\"\n").unwrap();
        std::fs::write(dir.join("bad.toml"), "description = \"x\"\ncolour = 1\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "not a scenario").unwrap();

        let listed = list(&dir).unwrap();
        let names: Vec<_> = listed.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["bad", "bench", "demo"]);
        assert_eq!(listed[2].description, Ok("The demo".to_string()));
        let broken = listed[0].description.as_ref().unwrap_err();
        assert!(broken.contains("bad.toml:2:1"), "{broken}");

        let text = format_listing(&listed);
        assert!(text.contains("  bench  Benchmarks"), "{text}");
        assert!(text.contains("  demo   The demo"), "{text}");

        let demo = load(&dir, "demo").unwrap();
        assert_eq!(demo.cmdline, "a=b");
        assert_eq!(load(&dir, "bench").unwrap().cmdline, "");

        let err = format!("{:#}", load(&dir, "nope").unwrap_err());
        assert!(err.contains("unknown scenario `nope`"), "{err}");
        assert!(err.contains("demo   The demo"), "{err}");
        assert!(load(&dir, "../demo").is_err());

        std::fs::remove_dir_all(&dir).unwrap();
    }
}
