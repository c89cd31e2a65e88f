//! The scenario checker never crashes on any input: 100,000 mutated
//! versions of every scenario and scenario test in the repository (and of
//! the broken fixtures) go through `scenario::parse`, and every 20th also
//! through `testspec::parse`; each must
//! return a value — a scenario or an error that names the file (and, where
//! it names a place, `file:line:col:`) — without panicking, in bounded
//! time. Deterministic (a fixed seed): a failing case prints its seed and
//! input.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use formats::test_rng::Rng;

use crate::util::workspace_root;

/// Mutated files per run.
const CASES: usize = 100_000;
/// Every how many cases the mutant also goes through the scenario-test
/// parser (which compiles regexes: about 2.5 ms a file, 50 times the
/// scenario checker's cost).
const TESTSPEC_EVERY: usize = 20;
/// The most one file may take (generous: a debug build on a loaded
/// machine; the checker is linear, a few hundred µs per file).
const MAX_PER_FILE: Duration = Duration::from_secs(2);

/// Fragments a hostile edit inserts: TOML syntax, keys, huge and negative
/// numbers, deep nesting, control characters, bidi overrides, long strings.
const FRAGMENTS: &[&str] = &[
    "[", "]", "[[", "]]", "{", "}", "\"", "'", "\"\"\"", "=", ".", ",", "\n", "#",
    "[[component]]\n", "name = \"x\"\n", "binary = \"init\"\n", "binary = \"root\"\n",
    "ram_mib = ", "caps = ", "cpu = ", "cpus = [", "priority = ", "update = \"", "smp = ",
    "memory_mib = ", "routes = { Log = \"", "provides = [\"", "io_ports = [", "irqs = [",
    "own = [\"thread\"", "shared_endpoint = \"serve\"", "boot_modules = [\"hello\"]",
    "[component.config]\n", "arg = \"x\"\n", "expect = [", "forbid = [", "exit = ",
    "timeout_secs = ", "[[module]]\n", "defect = \"truncated\"\n", "[[config_value]]\n",
    "value = ",
    "99999999999999999999999", "-1", "0", "65536", "4294967296", "1e999", "nan", "true",
    "1979-05-27T07:32:00Z", "\u{1b}[2J", "\u{0}", "\u{202e}", "é", "\\", "\\u0000",
    "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a = 1\n",
];

/// A number below `n` as an index.
fn below(rng: &mut Rng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

/// One mutation of `text` (which may be one of several in a row).
fn mutate(rng: &mut Rng, text: &str, corpus: &[String]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let at = |rng: &mut Rng, len: usize| below(rng, len + 1);
    match below(rng, 9) {
        0 => {
            let i = at(rng, bytes.len());
            let f = FRAGMENTS[below(rng, FRAGMENTS.len())];
            bytes.splice(i..i, f.bytes());
        }
        1 if !bytes.is_empty() => {
            let i = below(rng, bytes.len());
            let n = (1 + below(rng, 16)).min(bytes.len() - i);
            bytes.drain(i..i + n);
        }
        2 if !bytes.is_empty() => {
            let i = below(rng, bytes.len());
            bytes[i] ^= 1 << below(rng, 8);
        }
        3 => {
            // A line of another file.
            let other = &corpus[below(rng, corpus.len())];
            let lines: Vec<&str> = other.lines().collect();
            if !lines.is_empty() {
                let line = lines[below(rng, lines.len())];
                let i = at(rng, bytes.len());
                bytes.splice(i..i, format!("\n{line}\n").into_bytes());
            }
        }
        4 => {
            // Duplicate a range (many components, repeated keys).
            if !bytes.is_empty() {
                let i = below(rng, bytes.len());
                let n = (1 + below(rng, 400)).min(bytes.len() - i);
                let copy = bytes[i..i + n].to_vec();
                for _ in 0..1 + below(rng, 8) {
                    let j = at(rng, bytes.len());
                    bytes.splice(j..j, copy.iter().copied());
                }
            }
        }
        5 => {
            // Deep nesting of values.
            let depth = 1 + below(rng, 200);
            let i = at(rng, bytes.len());
            let nest = format!("\nv = {}1{}\n", "[".repeat(depth), "]".repeat(depth));
            bytes.splice(i..i, nest.into_bytes());
        }
        6 => {
            // A number or digit run.
            let i = at(rng, bytes.len());
            let digits = format!("{}", rng.next());
            bytes.splice(i..i, digits.into_bytes());
        }
        7 => bytes.truncate(at(rng, bytes.len())),
        _ => {
            let i = at(rng, bytes.len());
            let b = (rng.next() & 0xff) as u8;
            bytes.insert(i, b);
        }
    }
    // The checker takes text: invalid UTF-8 is refused when the file is
    // read, so the fuzzer feeds what a read would give.
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The repository's scenarios, scenario tests and bad fixtures.
fn corpus(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["scenarios", "tests", "xtask/tests/fixtures/scenarios"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        paths.sort();
        files.extend(paths.iter().filter_map(|p| std::fs::read_to_string(p).ok()));
    }
    files
}

#[test]
fn the_checker_survives_mutated_scenarios() {
    let root = workspace_root();
    let corpus = corpus(&root);
    assert!(corpus.len() > 50, "the corpus is {} files", corpus.len());
    let binaries: Vec<String> = [
        "root",
        "init",
        "hello",
        "timer",
        "log-service",
        "log-client",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // A directory without scenario files: `update = "..."` finds nothing.
    let dir = crate::util::temp_dir("scenario-fuzz");
    let path = dir.join("fuzz.toml");
    let shown = crate::util::display_path(&path);
    let mut rng = Rng(0x5eed_f00d_cafe_d00d);
    let mut errors = 0;
    for case in 0..CASES {
        let seed = rng.0;
        let mut text = corpus[below(&mut rng, corpus.len())].clone();
        for _ in 0..1 + below(&mut rng, 4) {
            text = mutate(&mut rng, &text, &corpus);
        }
        let start = Instant::now();
        let outcome = std::panic::catch_unwind(|| {
            let scenario = super::parse(&path, &text, &binaries).map(drop);
            let test = if case % TESTSPEC_EVERY == 0 {
                crate::testspec::parse(&path, &text).map(drop)
            } else {
                Ok(())
            };
            (scenario, test)
        });
        let took = start.elapsed();
        let (scenario, test) = outcome.unwrap_or_else(|_| {
            panic!("case {case} (seed {seed:#x}) panicked the checker on:\n{text}")
        });
        assert!(
            took < MAX_PER_FILE,
            "case {case} (seed {seed:#x}) took {took:?} on:\n{text}"
        );
        for e in [scenario.err(), test.err()].into_iter().flatten() {
            errors += 1;
            let message = format!("{e:#}");
            assert!(
                message.starts_with(&shown),
                "case {case} (seed {seed:#x}): an error that does not name the file: {message}\n{text}"
            );
        }
    }
    // Most mutants are broken somewhere (sanity: the checks ran).
    assert!(errors > CASES / 2, "only {errors} errors in {CASES} cases");
    std::fs::remove_dir_all(&dir).ok();
}
