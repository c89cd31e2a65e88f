//! Running scenario tests: each one boots QEMU headless with the serial
//! console on a pipe, a thread reads the output line by line, and the test's
//! worker matches it (see [`crate::matcher`]) until the guest exits, a
//! forbidden pattern matches, or the timeout kills QEMU. Tests run on a small
//! pool of worker threads; results are reported as they finish.
//!
//! The log of a failed test — the QEMU command line, the reason, the complete
//! serial output, the monitor's and host commands' output and QEMU's stderr
//! — is kept at `target/test-logs/NAME.log`, and the test's work directory
//! (`crate::actions`: disk copies, transcripts, screendumps), if it has one,
//! at `target/test-logs/NAME/`. A passing test removes stale ones.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::actions::Session;
use crate::devices::Devices;
use crate::matcher::Matcher;
use crate::qemu::{self, GuestExit, Machine};
use crate::testspec::{ExpectedExit, TestSpec};

/// A test ready to boot.
#[derive(Debug, Clone)]
pub struct BootTest {
    pub spec: TestSpec,
    pub machine: Machine,
    /// The scenario's devices (attached per run: `crate::devices`).
    pub devices: Devices,
    /// Whether the test gets a work directory (`target/test-work/NAME/`):
    /// it has devices or acts on the host (`crate::actions`).
    pub work: bool,
}

/// How one test went.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: String,
    /// `None` when the test passed, else why it failed.
    pub failure: Option<String>,
    pub duration: Duration,
    /// Where the log was kept (failures only).
    pub log_path: Option<PathBuf>,
    /// The last lines of the serial output (failures only): printed with
    /// the failure, so a CI run's output shows what the guest did last.
    pub tail: Vec<String>,
}

/// How many serial lines a failure shows.
const TAIL_LINES: usize = 25;

/// What the reader thread sends.
enum Event {
    Line(String),
    Eof,
}

/// How long to wait for QEMU to exit after it closed its output, and for the
/// rest of the output after QEMU was killed.
const GRACE: Duration = Duration::from_secs(5);

/// Runs `tests` on `jobs` workers, calling `report` for each outcome as it
/// arrives; failed tests' logs go to `log_dir`.
pub fn run_all(
    tests: Vec<BootTest>,
    jobs: usize,
    log_dir: &Path,
    mut report: impl FnMut(&Outcome),
) -> Vec<Outcome> {
    let queue = Mutex::new(VecDeque::from(tests));
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            let tx = tx.clone();
            let queue = &queue;
            scope.spawn(move || loop {
                let next = queue.lock().map(|mut q| q.pop_front()).unwrap_or(None);
                let Some(test) = next else { break };
                if tx.send(run_one(&test, log_dir)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut outcomes = Vec::new();
        for outcome in rx {
            report(&outcome);
            outcomes.push(outcome);
        }
        outcomes
    })
}

/// Boots one test and checks it. A test with a work directory
/// (`target/test-work/NAME/`: disk copies, serial log, monitor transcript,
/// host command outputs, screendumps) has it removed when it passes and
/// moved to `target/test-logs/NAME/` when it fails.
pub fn run_one(test: &BootTest, log_dir: &Path) -> Outcome {
    let spec = &test.spec;
    let start = Instant::now();
    let mut serial = String::new();
    let mut stderr_text = String::new();
    let mut transcript = String::new();
    let work_dir = log_dir.with_file_name("test-work").join(&spec.name);
    let artefacts = log_dir.join(&spec.name);
    let mut machine = test.machine.clone();
    let mut failure = if test.work {
        match Session::new(&work_dir, &test.devices, &spec.actions) {
            Ok(mut session) => {
                machine.devices = session.context.devices.qemu_args();
                machine.qmp = session.needs_monitor().then(crate::qmp::socket_path);
                let failure = boot(
                    test,
                    &machine,
                    Some(&mut session),
                    &mut serial,
                    &mut stderr_text,
                );
                transcript = std::mem::take(&mut session.transcript);
                failure
            }
            Err(e) => Some(format!("preparing {}: {e:#}", work_dir.display())),
        }
    } else {
        boot(test, &machine, None, &mut serial, &mut stderr_text)
    };
    if failure.is_none() && spec.root_memory {
        failure = crate::memory::check_root_blocks(&serial, &test.machine).err();
    }
    let duration = start.elapsed();
    let log_path = log_dir.join(format!("{}.log", spec.name));
    let _ = std::fs::remove_dir_all(&artefacts);
    let log_path = match &failure {
        None => {
            let _ = std::fs::remove_file(&log_path);
            let _ = std::fs::remove_dir_all(&work_dir);
            None
        }
        Some(reason) => {
            let kept = test.work
                && std::fs::create_dir_all(log_dir).is_ok()
                && std::fs::rename(&work_dir, &artefacts).is_ok();
            let log = format!(
                "$ {}\n# test {}: {}\n# FAIL after {:.1} s: {reason}\n{}\n{serial}{}{}",
                machine.command_line(),
                spec.name,
                spec.description,
                duration.as_secs_f64(),
                if kept {
                    format!(
                        "# artefacts (disks, monitor, host commands): {}/\n",
                        artefacts.display()
                    )
                } else {
                    String::new()
                },
                if transcript.is_empty() {
                    String::new()
                } else {
                    format!("\n--- monitor and host commands ---\n{transcript}")
                },
                if stderr_text.is_empty() {
                    String::new()
                } else {
                    format!("\n--- QEMU stderr ---\n{stderr_text}")
                }
            );
            let written =
                std::fs::create_dir_all(log_dir).and_then(|()| std::fs::write(&log_path, log));
            written.ok().map(|()| log_path)
        }
    };
    let tail = match &failure {
        None => Vec::new(),
        Some(_) => {
            let lines: Vec<&str> = serial.lines().collect();
            let from = lines.len().saturating_sub(TAIL_LINES);
            lines[from..].iter().map(|l| l.to_string()).collect()
        }
    };
    Outcome {
        name: spec.name.clone(),
        failure,
        duration,
        log_path,
        tail,
    }
}

/// Boots QEMU and matches its output; `None` means the test passed. The
/// serial output and QEMU's stderr are appended to `serial` and
/// `stderr_text`.
fn boot(
    test: &BootTest,
    machine: &Machine,
    mut session: Option<&mut Session>,
    serial: &mut String,
    stderr_text: &mut String,
) -> Option<String> {
    let spec = &test.spec;
    let deadline = Instant::now() + spec.timeout;
    let qmp_socket = machine.qmp.clone();
    let mut child = match machine
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => return Some(format!("could not start QEMU: {e}")),
    };
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout is piped");
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        while let Ok(n) = reader.read_until(b'\n', &mut buf) {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&buf);
            let line = text.trim_end_matches(['\n', '\r']).to_string();
            if tx.send(Event::Line(line)).is_err() {
                return;
            }
            buf.clear();
        }
        let _ = tx.send(Event::Eof);
    });
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let stderr_thread = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    });

    let mut matcher = Matcher::new(&spec.expect, &spec.forbid);
    let mut early_end: Option<String> = None;
    if let (Some(session), Some(socket)) = (session.as_deref_mut(), &qmp_socket) {
        early_end = session
            .connect(socket)
            .err()
            .map(|e| format!("QEMU's monitor: {e}"));
        let _ = std::fs::remove_file(socket);
    }
    while early_end.is_none() {
        let now = Instant::now();
        let event = rx.recv_timeout(deadline.saturating_duration_since(now));
        match event {
            Ok(Event::Line(line)) => {
                serial.push_str(&line);
                serial.push('\n');
                if let Err(f) = matcher.feed(&line) {
                    early_end = Some(format!(
                        "forbidden pattern `{}` matched: {}",
                        f.pattern, f.line
                    ));
                    break;
                }
                if let Some(session) = session.as_deref_mut() {
                    if let Err(why) = session.on_line(&line) {
                        early_end = Some(why);
                        break;
                    }
                }
            }
            Ok(Event::Eof) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                early_end = Some(match matcher.awaited() {
                    Some(p) => format!(
                        "timed out after {} s waiting for `{}`",
                        spec.timeout.as_secs(),
                        p.source
                    ),
                    None => format!(
                        "timed out after {} s waiting for the guest to exit \
                         (all expected output seen)",
                        spec.timeout.as_secs()
                    ),
                });
                break;
            }
        }
    }

    let status = if early_end.is_some() {
        let _ = child.kill();
        let _ = child.wait();
        // Keep whatever output was still in the pipe, for the log.
        let until = Instant::now() + GRACE;
        while let Ok(Event::Line(line)) =
            rx.recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            serial.push_str(&line);
            serial.push('\n');
        }
        None
    } else {
        // QEMU closed its output; it should exit right away.
        match qemu::wait_until(&mut child, Instant::now() + GRACE) {
            Ok(Some(status)) => Some(status),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                early_end = Some("QEMU closed its output but did not exit".to_string());
                None
            }
        }
    };
    *stderr_text = stderr_thread.join().unwrap_or_default();
    if let Some(session) = session.as_deref_mut() {
        // All of it, also what came after the step that ended the run.
        session.write_serial(serial);
    }
    // The steps after the end run however the run ended (their output is
    // worth keeping); the first failure is the one reported.
    let end = session.as_deref_mut().map_or(Ok(()), |s| s.at_end());
    if let Some(reason) = early_end {
        return Some(reason);
    }
    let Some(status) = status else {
        return Some("QEMU ended without a status".to_string());
    };
    let exit = GuestExit::from_status(status);
    verdict(
        &exit,
        spec.exit,
        matcher.awaited().map(|p| p.source.as_str()),
    )
    .or_else(|| session.and_then(|s| s.pending()))
    .or_else(|| end.err())
}

/// The verdict once QEMU has exited by itself: `None` for a pass, else the
/// reason.
pub fn verdict(exit: &GuestExit, expected: ExpectedExit, awaited: Option<&str>) -> Option<String> {
    let exit_ok = matches!(
        (exit, expected),
        (GuestExit::Success, ExpectedExit::Success) | (GuestExit::Failure, ExpectedExit::Failure)
    );
    let expected_text = match expected {
        ExpectedExit::Success => "success",
        ExpectedExit::Failure => "failure",
    };
    match (exit_ok, awaited) {
        (true, None) => None,
        (true, Some(p)) => Some(format!("{} before `{p}` appeared", exit.describe())),
        (false, None) => Some(format!("{}; expected {expected_text}", exit.describe())),
        (false, Some(p)) => Some(format!(
            "{}; expected {expected_text}; `{p}` never appeared",
            exit.describe()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(
            verdict(&GuestExit::Success, ExpectedExit::Success, None),
            None
        );
        assert_eq!(
            verdict(&GuestExit::Failure, ExpectedExit::Failure, None),
            None
        );
        let r = verdict(&GuestExit::Failure, ExpectedExit::Success, None).unwrap();
        assert!(
            r.contains("reported failure") && r.ends_with("expected success"),
            "{r}"
        );
        let r = verdict(&GuestExit::Success, ExpectedExit::Success, Some("tick")).unwrap();
        assert!(r.ends_with("before `tick` appeared"), "{r}");
        let triple = GuestExit::from_parts(Some(0), None);
        let r = verdict(&triple, ExpectedExit::Success, Some("tick")).unwrap();
        assert!(
            r.contains("triple fault") && r.contains("`tick` never appeared"),
            "{r}"
        );
    }
}
