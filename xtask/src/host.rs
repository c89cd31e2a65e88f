//! The host-side steps of `cargo xtask test`: the workspace's `cargo test`
//! (the default members, i.e. the crates that build for the host) and the
//! lints (rustfmt, clippy for the host crates, clippy for the bare-metal
//! packages: kernel, runtime, components).
//!
//! `cargo test`'s output is parsed: every `test result:` line adds its passed
//! and failed counts to the totals, and each test binary and each failing
//! test gets a line of its own. A `cargo test` that fails without reporting
//! a failed test (it did not build, a test binary crashed) counts as one
//! failure and its output is shown.

use std::ops::AddAssign;
use std::sync::LazyLock;
use std::time::Instant;

use anyhow::Result;
use regex::Regex;

use crate::kernel::TARGET;
use crate::system;
use crate::util::{cargo, indent, run_captured, run_captured_within, workspace_root};

/// How long the host tests (with their build) may take before they are
/// killed as hung: they take well under a minute; CI allows 90 for all.
const HOST_TESTS_LIMIT: std::time::Duration = std::time::Duration::from_secs(900);

/// Passed and failed counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub passed: usize,
    pub failed: usize,
}

impl AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
    }
}

/// The summary of one test binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryResult {
    /// e.g. `pecan_kcore (unittests src/lib.rs)` or `pecan_kcore (doc-tests)`.
    pub label: String,
    pub passed: usize,
    pub failed: usize,
}

/// What `cargo test`'s output says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CargoTestReport {
    pub binaries: Vec<BinaryResult>,
    /// `(binary label, test name)` of every failed test.
    pub failed_tests: Vec<(String, String)>,
}

impl CargoTestReport {
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for b in &self.binaries {
            counts += Counts {
                passed: b.passed,
                failed: b.failed,
            };
        }
        counts
    }
}

static RUNNING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*Running (.+?) \((?:.*/)?([^/]+?)(?:-[0-9a-f]+)?(?:\.exe)?\)\s*$").unwrap()
});
static DOC_TESTS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*Doc-tests (\S+)\s*$").unwrap());
static RESULT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed;").unwrap()
});
static FAILED_TEST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^test (.+?) \.\.\. FAILED\s*$").unwrap());

/// Parses the (merged stdout and stderr) output of `cargo test`.
pub fn parse_cargo_test(output: &str) -> CargoTestReport {
    let mut report = CargoTestReport::default();
    let mut label = "cargo test".to_string();
    for line in output.lines() {
        if let Some(c) = RUNNING.captures(line) {
            label = format!("{} ({})", &c[2], &c[1]);
        } else if let Some(c) = DOC_TESTS.captures(line) {
            label = format!("{} (doc-tests)", &c[1]);
        } else if let Some(c) = RESULT.captures(line) {
            report.binaries.push(BinaryResult {
                label: label.clone(),
                passed: c[1].parse().unwrap_or(0),
                failed: c[2].parse().unwrap_or(0),
            });
        } else if let Some(c) = FAILED_TEST.captures(line) {
            report.failed_tests.push((label.clone(), c[1].to_string()));
        }
    }
    report
}

/// Runs the host tests (`cargo test`, with `filter` handed to the test
/// binaries) and prints their results.
pub fn host_tests(filter: Option<&str>) -> Result<Counts> {
    println!("==> host tests: cargo test");
    let mut cmd = cargo();
    cmd.args(["test", "--no-fail-fast"]);
    if let Some(f) = filter {
        cmd.args(["--", f]);
    }
    let start = Instant::now();
    let (status, output) = run_captured_within(&mut cmd, HOST_TESTS_LIMIT)?;
    let report = parse_cargo_test(&output);
    for b in &report.binaries {
        if filter.is_some() && b.passed + b.failed == 0 {
            // Nothing selected in this binary; not worth a line.
            continue;
        }
        if b.failed == 0 {
            println!("PASS host {} ({} tests)", b.label, b.passed);
        } else {
            println!(
                "FAIL host {}: {} of {} tests failed",
                b.label,
                b.failed,
                b.passed + b.failed
            );
        }
    }
    for (label, test) in &report.failed_tests {
        println!("FAIL host {label}: {test}");
    }
    let mut counts = report.counts();
    match status {
        None => {
            println!(
                "FAIL host cargo test: not finished within {} s (a test hangs?): killed; \
                 its output so far:",
                HOST_TESTS_LIMIT.as_secs()
            );
            counts.failed += 1;
            println!("{}", indent(&output));
        }
        Some(status) if !status.success() => {
            if counts.failed == 0 {
                println!("FAIL host cargo test ({status}, no failed test reported: build error?)");
                counts.failed += 1;
            }
            println!("{}", indent(&output));
        }
        Some(_) => {}
    }
    println!("    host tests took {:.1} s", start.elapsed().as_secs_f64());
    Ok(counts)
}

/// The lints: (name, cargo arguments). `bare_metal` are the packages that
/// build for the bare-metal target only (kernel, runtime, components): the
/// host clippy excludes them, the bare-metal clippy checks them.
fn lint_commands(bare_metal: &[String]) -> Vec<(&'static str, Vec<String>)> {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut host = words(&["clippy", "--workspace"]);
    let mut bare = words(&["clippy", "--target", TARGET]);
    for package in bare_metal {
        host.extend(["--exclude".to_string(), package.clone()]);
        bare.extend(["-p".to_string(), package.clone()]);
    }
    host.extend(words(&["--all-targets", "--", "-D", "warnings"]));
    bare.extend(words(&["--", "-D", "warnings"]));
    vec![
        (
            "fmt",
            words(&["fmt", "--all", "--", "--check", "--color", "never"]),
        ),
        ("clippy-host", host),
        ("clippy-bare-metal", bare),
        // The kernel's trace code (cargo feature `trace`), which no other
        // build compiles.
        (
            "clippy-trace-kernel",
            words(&[
                "clippy",
                "--target",
                TARGET,
                "-p",
                crate::kernel::PACKAGE,
                "--features",
                "trace",
                "--",
                "-D",
                "warnings",
            ]),
        ),
        // The network library builds for both; its Pecan driver
        // (`net::pecan`) only for the bare-metal target.
        (
            "clippy-net-bare-metal",
            words(&[
                "clippy",
                "--target",
                TARGET,
                "-p",
                "pecan-net",
                "--",
                "-D",
                "warnings",
            ]),
        ),
    ]
}

/// Runs the lints whose name contains `filter`; each is one test.
pub fn lints(filter: Option<&str>) -> Result<Counts> {
    let mut counts = Counts::default();
    let bare_metal = system::bare_metal_packages(&workspace_root())?;
    for (name, args) in lint_commands(&bare_metal) {
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        println!("==> lint {name}: cargo {}", args.join(" "));
        let start = Instant::now();
        let (status, output) = run_captured(cargo().args(&args))?;
        let secs = start.elapsed().as_secs_f64();
        if status.success() {
            println!("PASS lint {name} ({secs:.1} s)");
            counts.passed += 1;
        } else {
            println!("FAIL lint {name} ({status}, {secs:.1} s):");
            println!("{}", indent(&output));
            counts.failed += 1;
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "\
   Compiling pecan-kcore v0.1.0 (/work/main/kcore)
    Finished `test` profile [optimized + debuginfo] target(s) in 1.20s
     Running unittests src/lib.rs (target/debug/deps/kcore-0123456789abcdef)

running 3 tests
test frames::tests::alloc ... ok
test frames::tests::free ... FAILED
test frames::tests::double_free ... ok

failures:

---- frames::tests::free stdout ----
thread 'frames::tests::free' panicked at kcore/src/frames.rs:10:5

failures:
    frames::tests::free

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running unittests src/main.rs (target/debug/deps/xtask-fedcba9876543210)

running 12 tests
test result: ok. 12 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

   Doc-tests kcore

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: 1 target failed:
    `-p pecan-kcore --lib`
";

    #[test]
    fn parses_test_results() {
        let report = parse_cargo_test(OUTPUT);
        assert_eq!(
            report.binaries,
            vec![
                BinaryResult {
                    label: "kcore (unittests src/lib.rs)".into(),
                    passed: 2,
                    failed: 1
                },
                BinaryResult {
                    label: "xtask (unittests src/main.rs)".into(),
                    passed: 12,
                    failed: 0
                },
                BinaryResult {
                    label: "kcore (doc-tests)".into(),
                    passed: 0,
                    failed: 0
                },
            ]
        );
        assert_eq!(
            report.failed_tests,
            vec![(
                "kcore (unittests src/lib.rs)".to_string(),
                "frames::tests::free".to_string()
            )]
        );
        assert_eq!(
            report.counts(),
            Counts {
                passed: 14,
                failed: 1
            }
        );
    }

    #[test]
    fn clippy_splits_host_and_bare_metal() {
        let bare = ["pecan-kernel".to_string(), "root".to_string()];
        let lints = lint_commands(&bare);
        let line = |name: &str| {
            let (_, args) = lints.iter().find(|(n, _)| *n == name).unwrap();
            args.join(" ")
        };
        assert_eq!(
            line("clippy-host"),
            "clippy --workspace --exclude pecan-kernel --exclude root --all-targets -- -D warnings"
        );
        assert_eq!(
            line("clippy-bare-metal"),
            "clippy --target x86_64-unknown-none -p pecan-kernel -p root -- -D warnings"
        );
        assert_eq!(
            line("clippy-trace-kernel"),
            "clippy --target x86_64-unknown-none -p pecan-kernel --features trace -- -D warnings"
        );
        assert_eq!(
            line("clippy-net-bare-metal"),
            "clippy --target x86_64-unknown-none -p pecan-net -- -D warnings"
        );
    }

    #[test]
    fn build_failure_reports_nothing() {
        let report =
            parse_cargo_test("error[E0425]: cannot find value `x`\nerror: could not compile\n");
        assert_eq!(report, CargoTestReport::default());
    }
}
