//! Finding the components: every cargo package under `components/`.
//!
//! A directory under `components/` that holds a `Cargo.toml` is one
//! component (its subdirectories are not searched); a directory without one
//! is a group (`components/drivers/`, ...) and is searched in turn. The
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
}

#[derive(Debug, Deserialize)]
struct Package {
    name: String,
}

/// Every component under `dir`, `root` first, then by name. A missing
/// directory means no components; two packages of one name are an error.
pub fn discover(dir: &Path) -> Result<Vec<Component>> {
    let mut found = Vec::new();
    if dir.is_dir() {
        search(dir, &mut found)?;
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
    Ok(found)
}

fn search(dir: &Path, found: &mut Vec<Component>) -> Result<()> {
    let manifest = dir.join("Cargo.toml");
    if manifest.is_file() {
        let (parsed, _) = tomlfile::load::<Manifest>(&manifest)?;
        let Some(package) = parsed.package else {
            bail!("{}: no [package] section", display_path(&manifest));
        };
        found.push(Component {
            name: package.name,
            manifest,
        });
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
            search(&path, found)?;
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
        std::fs::create_dir_all(dir.join("empty-group")).unwrap();
        let names: Vec<String> = discover(&dir)
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["root", "alpha", "uart-driver", "zeta"]);

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
