//! Finding the components: every cargo package under `components/`.
//!
//! A directory under `components/` that holds a `Cargo.toml` is one
//! component (its subdirectories are not searched) — unless the package is
//! a library only (no `[[bin]]` section and no `src/main.rs`: a protocol
//! crate that a group's components share), which is skipped; a directory
//! without one is a group (`components/drivers/`, ...) and is searched in
//! turn. The
//! component's name is its package name, which is also the name of its one
//! binary (cargo's default) and of its entry in the boot image. Each
//! component must also be listed in the workspace's `members` (not
//! `default-members`: components build for `x86_64-unknown-none` only).
//!
//! Order: `root` first (the kernel starts the image's first entry), then the
//! others by name.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::tomlfile;
use crate::util::display_path;

/// The component the kernel starts; always first in the boot image.
pub const ROOT: &str = "root";
/// The component root starts when the boot image has a config ROM; it
/// starts the scenario's components and is not one of them.
pub const INIT: &str = "init";

/// The components directory of the workspace at `root`.
pub fn dir(root: &Path) -> PathBuf {
    root.join("components")
}

/// One component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// Package name = binary name = boot-image entry name.
    pub name: String,
    /// Its manifest, `components/.../Cargo.toml`.
    pub manifest: PathBuf,
}

/// The part of a `Cargo.toml` read here.
#[derive(Debug, Deserialize)]
struct Manifest {
    package: Option<Package>,
    /// `[[bin]]` sections (only whether there are any matters).
    #[serde(default)]
    bin: Vec<toml::Value>,
}

#[derive(Debug, Deserialize)]
struct Package {
    name: String,
}

/// Every component under `dir`, `root` first, then by name. A missing
/// directory means no components; two packages of one name are an error.
pub fn discover(dir: &Path) -> Result<Vec<Component>> {
    Ok(discover_packages(dir)?.0)
}

/// The library packages under `dir` (the protocol crates the components
/// share), by name: built only as the components' dependencies, linted
/// with them.
pub fn discover_libraries(dir: &Path) -> Result<Vec<Component>> {
    let mut libraries = discover_packages(dir)?.1;
    libraries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(libraries)
}

/// (components, libraries) under `dir`.
fn discover_packages(dir: &Path) -> Result<(Vec<Component>, Vec<Component>)> {
    let mut found = Vec::new();
    let mut libraries = Vec::new();
    if dir.is_dir() {
        search(dir, &mut found, &mut libraries)?;
    }
    found.sort_by(|a, b| (a.name != ROOT, &a.name).cmp(&(b.name != ROOT, &b.name)));
    for pair in found.windows(2) {
        if pair[0].name == pair[1].name {
            bail!(
                "two components are named `{}`: {} and {}",
                pair[0].name,
                display_path(&pair[0].manifest),
                display_path(&pair[1].manifest)
            );
        }
    }
    Ok((found, libraries))
}

fn search(dir: &Path, found: &mut Vec<Component>, libraries: &mut Vec<Component>) -> Result<()> {
    let manifest = dir.join("Cargo.toml");
    if manifest.is_file() {
        let (parsed, _) = tomlfile::load::<Manifest>(&manifest)?;
        let Some(package) = parsed.package else {
            bail!("{}: no [package] section", display_path(&manifest));
        };
        let component = Component {
            name: package.name,
            manifest,
        };
        if parsed.bin.is_empty() && !dir.join("src/main.rs").is_file() {
            libraries.push(component); // a library the components share
        } else {
            found.push(component);
        }
        return Ok(());
    }
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("reading {}", display_path(dir)))?;
    for entry in entries {
        let path = entry?.path();
        let hidden_or_build = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_none_or(|n| n.starts_with('.') || n == "target");
        if path.is_dir() && !hidden_or_build {
            search(&path, found, libraries)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::temp_dir;

    fn package(dir: &Path, rel: &str, name: &str) {
        let d = dir.join(rel);
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(d.join("src/main.rs"), "").unwrap();
        std::fs::write(
            d.join("Cargo.toml"),
            format!("[package]\nname = \"{name}\"\nversion.workspace = true\n\n[dependencies]\nrt = {{ path = \"../../rt\" }}\n"),
        )
        .unwrap();
    }

    #[test]
    fn finds_packages_root_first() {
        let dir = temp_dir("components");
        package(&dir, "zeta", "zeta");
        package(&dir, "root", "root");
        package(&dir, "drivers/uart", "uart-driver");
        package(&dir, "alpha", "alpha");
        // A package's own subdirectories are not searched.
        package(&dir, "alpha/nested", "nested");
        // A library package is not a component; one with a [[bin]]
        // section but no src/main.rs is.
        package(&dir, "tests/protocols", "protocols");
        std::fs::remove_file(dir.join("tests/protocols/src/main.rs")).unwrap();
        package(&dir, "tests/binned", "binned");
        std::fs::remove_file(dir.join("tests/binned/src/main.rs")).unwrap();
        let manifest = dir.join("tests/binned/Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        std::fs::write(
            &manifest,
            text + "\n[[bin]]\nname = \"binned\"\npath = \"src/bin.rs\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("empty-group")).unwrap();
        let names: Vec<String> = discover(&dir)
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["root", "alpha", "binned", "uart-driver", "zeta"]);
        let libraries: Vec<String> = discover_libraries(&dir)
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(libraries, ["protocols"]);

        package(&dir, "drivers/other", "zeta");
        let err = format!("{:#}", discover(&dir).unwrap_err());
        assert!(err.contains("two components are named `zeta`"), "{err}");

        std::fs::write(dir.join("drivers/other/Cargo.toml"), "[workspace]\n").unwrap();
        let err = format!("{:#}", discover(&dir).unwrap_err());
        assert!(err.contains("no [package] section"), "{err}");

        std::fs::remove_dir_all(&dir).unwrap();
        assert!(discover(&dir).unwrap().is_empty());
    }
}
