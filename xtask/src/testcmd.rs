//! `cargo xtask test`: host tests, lints, then scenario tests, and the
//! closing line `N passed, M failed` (exit status 1 when M > 0).
//!
//! FILTER, when given, selects scenario tests whose name contains it, is
//! handed to the host test binaries (libtest's substring filter), and selects
//! the lints whose name (`fmt`, `clippy-host`, `clippy-bare-metal`) contains
//! it. Last come the benchmark budgets (`bench/budgets.toml`, see
//! `crate::bench::gate`), run without a filter or with one containing
//! `bench`. Between them the trace test ([`TRACE_TEST`]), a scenario
//! test of its own kind: it runs `cargo xtask trace`'s path and checks
//! the JSON it writes (`crate::trace::round_trip_test`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::accel::{self, Accel};
use crate::boot_test::{self, BootTest};
use crate::host::{self, Counts};
use crate::qemu::Machine;
use crate::util::{display_path, workspace_root};
use crate::{fixtures, setup, system, testspec};

/// The options of `cargo xtask test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Run only tests whose name contains FILTER.
    pub filter: Option<String>,
    /// Accelerator for scenario tests; default: TCG unless KVM is known to work.
    #[arg(long, value_enum)]
    pub accel: Option<Accel>,
    /// Skip rustfmt and clippy.
    #[arg(long)]
    pub no_lint: bool,
    /// Scenario tests run at once (default: the number of CPUs, at most 4).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: Option<u64>,
    /// Run the lab's long scenario tests (`tests/lab/*.toml`, e.g. the
    /// demo for 3 minutes) instead of the suite: no host tests, lints,
    /// trace test or benchmark budgets.
    #[arg(long)]
    pub lab: bool,
}

/// Where the suite's scenario tests are, and the lab's long ones (which
/// the suite does not run: `discover` reads one directory).
const SUITE_DIR: &str = "tests";
const LAB_DIR: &str = "tests/lab";

/// Runs `cargo xtask test`; `Ok(true)` when nothing failed.
pub fn run(args: &TestArgs) -> Result<bool> {
    let start = Instant::now();
    let filter = args.filter.as_deref();
    setup::ensure_target()?;
    setup::ensure_qemu()?;

    if args.lab {
        let mut counts = scenario_tests(args, filter, LAB_DIR)?;
        if counts.passed == 0 && counts.failed == 0 {
            println!("FAIL lab: no test in {LAB_DIR}/ matches");
            counts.failed += 1;
        }
        println!("total time: {:.1} s", start.elapsed().as_secs_f64());
        println!("{} passed, {} failed", counts.passed, counts.failed);
        return Ok(counts.failed == 0);
    }
    let mut counts = host::host_tests(filter)?;
    if !args.no_lint {
        counts += host::lints(filter)?;
    }
    counts += scenario_tests(args, filter, SUITE_DIR)?;
    if filter.is_none_or(|f| TRACE_TEST.contains(f)) {
        counts += trace_test();
    }
    if filter.is_none_or(|f| "bench-budgets".contains(f) || f.contains("bench")) {
        counts += bench_budgets();
    }
    if let Some(why) = nothing_ran(filter, &counts) {
        println!("FAIL {why}");
        counts.failed += 1;
    }

    println!("total time: {:.1} s", start.elapsed().as_secs_f64());
    println!("{} passed, {} failed", counts.passed, counts.failed);
    Ok(counts.failed == 0)
}

/// A run that tested nothing did not pass: a filter that matches no host
/// test, lint, scenario test or budget (a typo, a renamed test) is a
/// failure, not `0 passed, 0 failed` and success.
fn nothing_ran(filter: Option<&str>, counts: &Counts) -> Option<String> {
    (counts.passed == 0 && counts.failed == 0).then(|| match filter {
        Some(f) => {
            format!("filter: `{f}` matches no host test, lint, scenario test or benchmark budget")
        }
        None => "nothing was tested".to_string(),
    })
}

/// The name of the trace test: `cargo xtask trace trace-ping` and its JSON
/// checked (docs/testing.md, "The trace test").
const TRACE_TEST: &str = "trace-ipc-round-trip";

/// Runs the trace test (its serial log is kept in `target/test-logs/`
/// when it fails).
fn trace_test() -> Counts {
    let start = Instant::now();
    match crate::trace::round_trip_test() {
        Ok(()) => {
            println!("PASS {TRACE_TEST} ({:.1} s)", start.elapsed().as_secs_f64());
            Counts {
                passed: 1,
                failed: 0,
            }
        }
        Err(e) => {
            let why = crate::util::printable(&format!("{e:#}"));
            println!("FAIL {TRACE_TEST}: {}", why.replace('\n', "\n    "));
            Counts {
                passed: 0,
                failed: 1,
            }
        }
    }
}

/// The benchmark regression gate (`bench/budgets.toml`): a quick
/// Pecan-only pass under icount, one result per budget.
fn bench_budgets() -> Counts {
    match system::build() {
        Ok(system) => crate::bench::gate(&system),
        Err(e) => {
            println!("FAIL bench budgets: build failed: {e:#}");
            Counts {
                passed: 0,
                failed: 1,
            }
        }
    }
}

/// Builds the kernel and the components, packs the boot image and runs the
/// scenario tests in `dir` (`tests/`, or the lab's `tests/lab/`).
fn scenario_tests(args: &TestArgs, filter: Option<&str>, dir: &str) -> Result<Counts> {
    let root = workspace_root();
    let mut counts = Counts::default();
    let found = testspec::discover(&root.join(dir), filter)?;
    println!(
        "==> scenario tests: {} in {dir}/{}",
        found.len(),
        filter
            .map(|f| format!(" matching `{f}`"))
            .unwrap_or_default()
    );
    // Without a filter the system is always built, so that a kernel or
    // component that does not link fails the run even when there are no
    // scenario tests.
    if found.is_empty() && filter.is_some() {
        return Ok(counts);
    }
    // The scenario tests boot the kernel built with debug assertions.
    let built = system::build().and_then(|mut system| {
        system.kernel = system::build_checked_kernel()?;
        Ok(system)
    });
    let system = match built {
        Ok(system) => system,
        Err(e) => {
            println!("FAIL build: {e:#}");
            if !found.is_empty() {
                println!("    {} scenario tests not run", found.len());
            }
            counts.failed += 1;
            return Ok(counts);
        }
    };
    if found.is_empty() {
        return Ok(counts);
    }

    // Parse every test first; a broken file is a failed test.
    let mut specs = Vec::new();
    for (name, path) in &found {
        let prepared = testspec::load(path).and_then(|spec| {
            let scenario = spec.load_scenario(&root)?;
            Ok((spec, scenario))
        });
        match prepared {
            Ok(p) => specs.push(p),
            Err(e) => {
                let why = crate::util::printable(&format!("{e:#}"));
                println!("FAIL {name}: {}", why.replace('\n', "\n    "));
                counts.failed += 1;
            }
        }
    }
    if specs.is_empty() {
        return Ok(counts);
    }

    let choice = accel::choose(
        args.accel,
        false,
        &system.kernel,
        Some(&system.boot_image),
        &root,
    )?;
    // Tests of scenarios with components boot their scenario's image (with
    // the config ROM); tests that add malformed modules images of their own.
    let images_dir = root.join("target").join("pecan").join("tests");
    // One image per set of components (tests of one scenario with the same
    // `pecan.start=` list share it).
    let mut scenario_images: HashMap<(String, Vec<String>), PathBuf> = HashMap::new();
    let mut tests: Vec<BootTest> = Vec::new();
    for (spec, scenario) in specs {
        let cmdline = spec.full_cmdline(&scenario);
        let key = (
            scenario.name.clone(),
            scenario.image_components(&cmdline).into_iter().collect(),
        );
        let image = if spec.has_own_image() {
            system::image_entries(&system.components, &scenario, &cmdline).and_then(|entries| {
                fixtures::test_image(&spec, &entries, &system.components, &images_dir)?
                    .context("a test with modules or config values gets an image of its own")
            })
        } else if let Some(image) = scenario_images.get(&key) {
            Ok(image.clone())
        } else {
            let name = format!("test-{}", spec.name);
            system::scenario_image(&system, &scenario, &cmdline, &name, None).inspect(|image| {
                scenario_images.insert(key, image.clone());
            })
        };
        // The memory rule on the image, for this test's machine (an image
        // is shared by tests of one scenario on different machines).
        let mut size = spec.machine(&scenario);
        let image = image.and_then(|image| {
            if spec.memory_rule && spec.modules.is_empty() {
                let bytes = std::fs::read(&image)
                    .with_context(|| format!("reading {}", display_path(&image)))?;
                if spec.least_memory {
                    size.memory_mib = scenario.least_image_memory(size, &bytes)?;
                    println!(
                        "==> {}: the least memory that starts it: {} MiB",
                        spec.name, size.memory_mib
                    );
                }
                scenario.check_image_memory(size, &bytes)?;
            }
            Ok(image)
        });
        let image = match image {
            Ok(image) => image,
            Err(e) => {
                println!(
                    "FAIL {}: {}",
                    spec.name,
                    format!("{e:#}").replace('\n', "\n    ")
                );
                counts.failed += 1;
                continue;
            }
        };
        let mut machine = Machine::new(
            system.kernel.clone(),
            Some(image),
            spec.full_cmdline(&scenario),
            // -icount needs TCG, whatever the other tests run on.
            if spec.icount {
                Accel::Tcg
            } else {
                choice.accel
            },
        );
        machine.icount = spec.icount;
        machine.smp = size.smp;
        machine.memory_mib = size.memory_mib;
        machine.icount = spec.icount && choice.accel == crate::accel::Accel::Tcg;
        if let Err(e) = crate::qemu::check_host_memory(size.memory_mib) {
            println!("FAIL {}: {e:#}", spec.name);
            counts.failed += 1;
            continue;
        }
        tests.push(BootTest {
            work: spec.needs_work_dir(&scenario),
            devices: scenario.devices.clone(),
            spec,
            machine,
        });
    }
    let jobs = args.jobs.map_or_else(default_jobs, |j| j as usize);
    println!(
        "==> booting {} scenario tests, {jobs} at a time",
        tests.len()
    );
    let log_dir = root.join("target").join("test-logs");
    let outcomes = boot_test::run_all(tests, jobs, &log_dir, |o| match &o.failure {
        None => println!("PASS {} ({:.1} s)", o.name, o.duration.as_secs_f64()),
        Some(reason) => {
            println!("FAIL {}: {}", o.name, crate::util::printable(reason));
            match &o.log_path {
                Some(p) => println!("    serial log: {}", display_path(p)),
                None => println!("    (could not write the serial log)"),
            }
            if !o.tail.is_empty() {
                println!("    its last {} serial lines:", o.tail.len());
            }
            for line in &o.tail {
                println!("    | {}", crate::util::printable(line));
            }
        }
    });
    for o in &outcomes {
        if o.failure.is_none() {
            counts.passed += 1;
        } else {
            counts.failed += 1;
        }
    }
    Ok(counts)
}

/// The default number of scenario tests run at once: one per CPU, at most 4.
fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_tested_nothing_fails() {
        let none = Counts::default();
        let why = nothing_ran(Some("nosuchfilter"), &none).unwrap();
        assert!(why.contains("`nosuchfilter` matches no"), "{why}");
        assert!(nothing_ran(None, &none).is_some());
        let one = Counts {
            passed: 1,
            failed: 0,
        };
        assert_eq!(nothing_ran(Some("boot"), &one), None);
        let failed = Counts {
            passed: 0,
            failed: 1,
        };
        assert_eq!(nothing_ran(Some("boot"), &failed), None);
    }
}
