//! `cargo xtask screenshot [SCENARIO] [--wait-for REGEX] [--after SECS]`:
//! boots a scenario headless (as `cargo xtask run --headless`, the serial
//! console on this terminal), waits until a serial line matches REGEX —
//! for the demo by default until the FAT test's first round has passed
//! ([`default_wait`]) — then SECS more (default 0), and writes a PNG of
//! the screen with QEMU's `screendump -f png`. It prints `screenshot:
//! PATH` and powers the guest off (through its power button when the
//! scenario has one, else by stopping QEMU); exit status 0 once the PNG is
//! written.
//!
//! The PNG goes to `target/screenshots/SCENARIO.png` unless `--output`
//! names another path. A scenario without a display device
//! (`display = ...`) is refused: there is no screen to take.

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use regex::Regex;

use crate::qemu;
use crate::run::{self, Booting, RunArgs};
use crate::util::workspace_root;

/// The options of `cargo xtask screenshot`.
#[derive(Debug, clap::Args)]
pub struct ScreenshotArgs {
    /// The scenario to boot (a name or a .toml path), as for `run`.
    #[arg(default_value = "demo")]
    pub scenario: String,
    /// Take the screenshot once a serial line matches REGEX (default for
    /// the demo: the FAT test's first round passed; else at once).
    #[arg(long, value_name = "REGEX")]
    pub wait_for: Option<String>,
    /// Then wait SECS more.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub after: u64,
    /// Where to write the PNG [default: target/screenshots/SCENARIO.png].
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Give up after SECS without the line.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub timeout: u64,
}

/// The serial line a scenario's screenshot waits for when `--wait-for`
/// is not given.
pub fn default_wait(scenario: &str) -> Option<&'static str> {
    match scenario {
        "demo" => Some(r"^fat-test: round 1 passed$"),
        _ => None,
    }
}

/// Runs `cargo xtask screenshot`; `Ok(true)` means exit status 0.
pub fn screenshot(args: &ScreenshotArgs) -> Result<bool> {
    let wait = args
        .wait_for
        .as_deref()
        .or(default_wait(&args.scenario))
        .map(Regex::new)
        .transpose()
        .context("--wait-for")?;
    let run_args = RunArgs {
        scenario: args.scenario.clone(),
        headless: true,
        timeout: None,
        gdb: false,
        accel: None,
        smp: None,
        memory: None,
        icount: false,
    };
    let Booting {
        scenario,
        machine,
        mut attached,
        ..
    } = run::booting(&run_args)?;
    if scenario.devices.display.is_none() {
        bail!(
            "scenario {} has no display device (`display = \"bochs\"` or another, \
             docs/scenarios.md): there is no screen to take",
            scenario.name
        );
    }
    let path = match &args.output {
        Some(p) => std::path::absolute(p)?,
        None => workspace_root()
            .join("target")
            .join("screenshots")
            .join(format!("{}.png", scenario.name)),
    };
    if path.to_string_lossy().chars().any(char::is_whitespace) {
        bail!(
            "{}: QEMU's monitor cannot take a path with spaces",
            path.display()
        );
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let _ = std::fs::remove_file(&path);
    let socket = machine
        .qmp
        .clone()
        .context("the machine has no QMP socket")?;
    println!(
        "==> booting scenario {} for a screenshot: {}",
        scenario.name, scenario.description
    );
    let mut child = machine
        .command()
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting QEMU")?;
    // The serial lines, echoed and handed over one by one.
    let (tx, lines) = mpsc::channel::<String>();
    let stdout = child.stdout.take().context("QEMU's stdout")?;
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            println!("{line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut monitor = crate::qmp::Qmp::connect(&socket, Instant::now() + Duration::from_secs(10))
        .and_then(|mut q| {
            if scenario.devices.forwards() {
                let usernet = q.human("info usernet")?;
                attached.learn_ports(&usernet)?;
            }
            q.resume()?;
            Ok(q)
        });
    let _ = std::fs::remove_file(&socket);
    let taken = match monitor.as_mut() {
        Ok(q) => {
            attached.port_lines().iter().for_each(|l| println!("{l}"));
            take(q, &mut child, &lines, wait.as_ref(), args, &path)
        }
        Err(e) => Err(anyhow::anyhow!("QEMU's QMP socket: {e}")),
    };
    // Off again: in order when the scenario has the power button.
    let pressed =
        run::has_power_button(&scenario) && monitor.as_mut().is_ok_and(|q| q.power_down().is_ok());
    let grace = Instant::now() + run::POWER_OFF_GRACE;
    if !pressed || !matches!(qemu::wait_until(&mut child, grace), Ok(Some(_))) {
        qemu::terminate(&mut child);
    }
    taken?;
    println!("screenshot: {}", path.display());
    Ok(true)
}

/// Waits for the line (and `--after`), then takes the screenshot.
fn take(
    q: &mut crate::qmp::Qmp,
    child: &mut std::process::Child,
    lines: &mpsc::Receiver<String>,
    wait: Option<&Regex>,
    args: &ScreenshotArgs,
    path: &std::path::Path,
) -> Result<()> {
    if let Some(re) = wait {
        let deadline = Instant::now() + Duration::from_secs(args.timeout);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left.min(Duration::from_millis(500))) {
                Ok(line) if re.is_match(&line) => break,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) if left.is_zero() => {
                    bail!("no serial line matched `{re}` within {} s", args.timeout)
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        bail!("QEMU ended ({status}) before a line matched `{re}`");
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("the serial output ended before a line matched `{re}`")
                }
            }
        }
    }
    std::thread::sleep(Duration::from_secs(args.after));
    let command = format!("screendump {} -f png", path.display());
    let output = q.human(&command)?;
    if let Some(e) = crate::actions::monitor_error(&command, &output) {
        bail!("QEMU refused `{command}`: {e}");
    }
    let png = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if !png.starts_with(b"\x89PNG\r\n\x1a\n") {
        bail!("{} is not a PNG ({output})", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_waits_for_the_fat_tests_first_round() {
        let re = Regex::new(default_wait("demo").unwrap()).unwrap();
        assert!(re.is_match("fat-test: round 1 passed"));
        assert!(!re.is_match("fat-test: round 10 passed"));
        assert!(!re.is_match("fat-test: round 1: ls"));
        assert_eq!(default_wait("framebuffer"), None);
    }
}
