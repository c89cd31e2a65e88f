//! `cargo xtask run`: build the kernel and the components, pack the boot
//! image, and boot a scenario in QEMU with the serial console on this
//! terminal.
//!
//! Exits 0 when the kernel reports success, or when `--timeout` stopped QEMU
//! (a demo may run forever; reaching the user's timeout is not an error);
//! exits 1 otherwise.
//!
//! Ctrl-C (and `--timeout`) power the guest off in order when its
//! scenario has the ACPI power-button component (`power`): xtask presses
//! the button through QEMU's QMP socket (`system_powerdown`), init stops
//! every component after its clients — file systems sync — and the
//! machine powers off; a second Ctrl-C, or [`POWER_OFF_GRACE`] without
//! the machine ending, stops QEMU at once. Without `power` QEMU is
//! stopped at once. QEMU runs in its own process group, so the terminal's
//! SIGINT reaches xtask alone, with its stdin closed (no component reads
//! the serial console's input yet).

use std::os::unix::process::CommandExt;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::accel::{self, Accel};
use crate::config::Machine;
use crate::qemu::{self, GuestExit};
use crate::scenario::{self, Scenario};
use crate::util::{shell_join, workspace_root};
use crate::{setup, system};

/// The options of `cargo xtask run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The scenario to boot: a name (scenarios/SCENARIO.toml) or the path
    /// of a scenario file ending in .toml.
    #[arg(default_value = "demo")]
    pub scenario: String,
    /// No display window (`-display none`); implied when $DISPLAY is unset.
    #[arg(long)]
    pub headless: bool,
    /// End the run after SECS seconds (and exit 0): through the guest's
    /// power button when the scenario has `power`, else by stopping QEMU.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Start stopped, with a gdb server on localhost:1234.
    #[arg(long)]
    pub gdb: bool,
    /// Accelerator; default: TCG unless KVM is known to work.
    #[arg(long, value_enum)]
    pub accel: Option<Accel>,
    /// Number of vCPUs [default: the scenario's `smp`, else 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=255))]
    pub smp: Option<u32>,
    /// Guest memory in MiB [default: the scenario's `memory_mib`, else 256].
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(qemu::MIN_MEMORY_MIB as i64..=qemu::MAX_MEMORY_MIB as i64))]
    pub memory: Option<u32>,
    /// Count instructions, deterministically (`-icount shift=0,align=off,sleep=off`,
    /// a seeded RDRAND, a virtual real-time clock; TCG only).
    #[arg(long)]
    pub icount: bool,
}

/// Loads and checks scenario `name` for a machine of `smp` vCPUs and
/// `memory` MiB (default: the scenario's), sets up the tools and builds
/// the system: what `cargo xtask run` and `cargo xtask trace` do before
/// they boot it.
pub fn prepare(
    name: &str,
    smp: Option<u32>,
    memory: Option<u32>,
) -> Result<(Scenario, Machine, system::System)> {
    // Check the scenario first: a typo should not cost a kernel build.
    let scenario = scenario::load(&workspace_root(), name)?;
    let hardware = Machine {
        smp: smp.unwrap_or(scenario.machine.smp),
        memory_mib: memory.unwrap_or(scenario.machine.memory_mib),
    };
    scenario.check_machine(hardware)?;
    scenario.check_memory(hardware)?;
    qemu::check_host_memory(hardware.memory_mib)?;
    setup::ensure_target()?;
    setup::ensure_qemu()?;
    let system = system::build()?;
    Ok((scenario, hardware, system))
}

/// Runs `cargo xtask run`; `Ok(true)` means exit status 0.
pub fn run(args: &RunArgs) -> Result<bool> {
    let Booting {
        scenario,
        mut machine,
        mut attached,
        elf,
    } = booting(args)?;
    let qmp = machine.qmp.clone();
    // Without a window, the screen is a VNC server on 127.0.0.1.
    let vnc = (machine.headless && scenario.devices.display.is_some())
        .then(free_vnc_display)
        .flatten();
    if let Some(d) = vnc {
        machine
            .devices
            .extend(["-vnc".to_string(), format!("127.0.0.1:{d}")]);
    }
    println!(
        "==> booting scenario {}: {}",
        args.scenario, scenario.description
    );
    println!("==> {}", machine.command_line());
    if args.gdb {
        let elf_abs = elf.canonicalize().unwrap_or(elf);
        let gdb = shell_join(&[
            "gdb".to_string(),
            "-ex".to_string(),
            "set architecture i386:x86-64".to_string(),
            "-ex".to_string(),
            format!("file {}", elf_abs.display()),
            "-ex".to_string(),
            "target remote localhost:1234".to_string(),
        ]);
        println!("==> QEMU waits for gdb on localhost:1234. Attach with:");
        println!("    {gdb}");
        println!(
            "    The kernel starts in 32-bit mode; breakpoints on 64-bit code work \
             after `hbreak kernel_entry` (the 64-bit entry) and `continue`."
        );
    }

    let presses = Arc::new(AtomicU32::new(0));
    let counter = presses.clone();
    ctrlc::set_handler(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    })
    .context("catching Ctrl-C")?;
    let start = Instant::now();
    let mut child = machine
        .command()
        // Its own process group: the terminal's Ctrl-C is xtask's to
        // turn into a power-off (see the module doc).
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(if scenario.linux_guests.is_empty() {
            Stdio::inherit()
        } else {
            Stdio::piped()
        })
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting QEMU")?;
    // With Linux guests the run's verdict is also theirs: the serial
    // output is passed through and each guest's status noted.
    let guests = child.stdout.take().map(|out| {
        let names: Vec<String> = scenario
            .linux_guests
            .iter()
            .map(|g| g.name.clone())
            .collect();
        std::thread::spawn(move || crate::vmguest::watch(out, &names))
    });
    let mut monitor = None;
    if let Some(socket) = &qmp {
        let connected = crate::qmp::Qmp::connect(socket, Instant::now() + Duration::from_secs(10))
            .and_then(|mut q| {
                if scenario.devices.forwards() {
                    let usernet = q.human("info usernet")?;
                    attached.learn_ports(&usernet)?;
                }
                // Paused until now (qemu::Machine::qmp); with --gdb, gdb
                // lets it run.
                if !args.gdb {
                    q.resume()?;
                }
                Ok(q)
            });
        let _ = std::fs::remove_file(socket);
        match connected {
            Ok(q) => {
                attached.port_lines().iter().for_each(|l| println!("{l}"));
                if let Some(d) = vnc {
                    println!(
                        "screen: vnc://127.0.0.1:{} (a VNC viewer shows the display; \
                         `cargo xtask screenshot` writes it as a PNG)",
                        VNC_BASE + d
                    );
                }
                for (_, _, host) in attached
                    .ports
                    .iter()
                    .filter(|(_, guest, _)| *guest == HTTP_PORT)
                {
                    announce_http(*host, deadline_of(args.timeout, start));
                }
                monitor = Some(q);
            }
            Err(e) => {
                qemu::terminate(&mut child);
                return Err(e.context("QEMU's QMP socket"));
            }
        }
    }
    let deadline = args
        .timeout
        .map(|secs| start + Duration::from_secs(secs))
        // Far enough to mean "no deadline" without overflowing Instant.
        .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 24 * 3600));
    let ending = Ending {
        deadline,
        presses: &presses,
        power_button: has_power_button(&scenario),
    };
    let status = ending.wait(&mut child, monitor.as_mut())?;
    let Some(status) = status else {
        qemu::terminate(&mut child);
        if presses.load(Ordering::SeqCst) == 0 {
            println!(
                "\n==> stopped after {} s (timeout)",
                args.timeout.unwrap_or_default()
            );
            return Ok(true);
        }
        println!("\n==> QEMU stopped (Ctrl-C)");
        return Ok(false);
    };
    let exit = GuestExit::from_status(status);
    println!(
        "\n==> {} (after {:.1} s)",
        exit.describe(),
        start.elapsed().as_secs_f64()
    );
    let guests_ok = match guests.map(|t| t.join()) {
        None => true,
        Some(Ok(verdict)) => {
            println!("==> {}", verdict.describe());
            verdict.all_succeeded()
        }
        Some(Err(_)) => false,
    };
    Ok(exit == GuestExit::Success && guests_ok)
}

/// A scenario built and ready to boot: what `cargo xtask run` and
/// `cargo xtask screenshot` start.
pub struct Booting {
    /// The scenario.
    pub scenario: Scenario,
    /// The QEMU machine, its QMP socket set.
    pub machine: qemu::Machine,
    /// The scenario's devices (ports are learnt once QEMU runs).
    pub attached: crate::devices::Attached,
    /// The kernel.
    pub elf: std::path::PathBuf,
}

/// Builds the system and the boot image of `args.scenario`, prepares its
/// devices (fresh disk copies in `target/run-work/SCENARIO/`, printed as
/// `disk image: PATH`) and describes the QEMU machine.
pub fn booting(args: &RunArgs) -> Result<Booting> {
    let root = workspace_root();
    let (scenario, hardware, system) = prepare(&args.scenario, args.smp, args.memory)?;
    let boot_image = system::scenario_image(
        &system,
        &scenario,
        &scenario.cmdline,
        &scenario.name,
        Some(hardware),
    )?;
    let elf = system.kernel.clone();
    let choice = accel::choose(
        args.accel,
        args.icount,
        &elf,
        Some(&system.boot_image),
        &root,
    )?;

    // The devices: fresh disk copies in the run's work directory (kept
    // after the run, to be looked at), ports read back from QEMU.
    let work_dir = root.join("target").join("run-work").join(&scenario.name);
    let mut attached = crate::devices::Attached::default();
    if !scenario.devices.is_empty() {
        let _ = std::fs::remove_dir_all(&work_dir);
        attached = scenario.devices.prepare(&work_dir)?;
        // Where each disk's fresh copy is: left there after the run, for
        // a person (or a check) to look at.
        for (name, path) in &attached.disks {
            match attached.disks.len() {
                1 => println!("disk image: {}", path.display()),
                _ => println!("disk image: {} ({name})", path.display()),
            }
        }
    }
    // Always: the ports of forwarded devices are read from it, and
    // Ctrl-C presses the guest's power button through it.
    let qmp = Some(crate::qmp::socket_path());
    let machine = qemu::Machine {
        kernel: elf.clone(),
        initrd: Some(boot_image),
        cmdline: scenario.cmdline.clone(),
        memory_mib: hardware.memory_mib,
        smp: hardware.smp,
        accel: choice.accel,
        headless: args.headless || std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty()),
        icount: args.icount,
        gdb: args.gdb,
        devices: attached.qemu_args(),
        qmp: qmp.clone(),
    };
    Ok(Booting {
        scenario,
        machine,
        attached,
        elf,
    })
}

/// VNC display `d` listens on TCP port `VNC_BASE + d`.
const VNC_BASE: u16 = 5900;

/// A VNC display number whose port on 127.0.0.1 is free now (QEMU binds
/// it a moment later), if one of the first hundred is.
fn free_vnc_display() -> Option<u16> {
    (0..100).find(|d| std::net::TcpListener::bind(("127.0.0.1", VNC_BASE + d)).is_ok())
}

/// The guest port whose forward `cargo xtask run` announces as a URL.
pub const HTTP_PORT: u16 = 80;

/// The end of a run of `--timeout` `timeout` started at `start`, if any.
fn deadline_of(timeout: Option<u64>, start: Instant) -> Option<Instant> {
    timeout.map(|secs| start + Duration::from_secs(secs))
}

/// Prints `http: http://127.0.0.1:PORT/` once an HTTP `GET /` on the
/// forwarded host port `port` is answered (QEMU accepts the connection
/// before the guest listens, so only a status line counts), polling
/// from a thread of its own until then or until `until`.
fn announce_http(port: u16, until: Option<Instant>) {
    std::thread::spawn(move || {
        while until.is_none_or(|u| Instant::now() < u) {
            if http_answers(port) {
                println!("http: http://127.0.0.1:{port}/");
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    });
}

/// Whether an HTTP server answers `GET /` on 127.0.0.1:`port`.
pub(crate) fn http_answers(port: u16) -> bool {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let mut status = [0u8; 9];
    s.write_all(request).is_ok()
        && s.read_exact(&mut status).is_ok()
        && status.starts_with(b"HTTP/1.")
}

/// How long a guest may take to power off in order once its power
/// button was pressed.
pub const POWER_OFF_GRACE: Duration = Duration::from_secs(30);

/// Whether `scenario` starts the ACPI power-button component, which
/// turns QEMU's `system_powerdown` into an orderly power-off.
pub fn has_power_button(scenario: &Scenario) -> bool {
    scenario
        .config
        .as_ref()
        .is_some_and(|spec| spec.components.iter().any(|c| c.binary == "power"))
}

/// How a run ends: by the guest, at the deadline, or on Ctrl-C.
struct Ending<'a> {
    deadline: Instant,
    /// Ctrl-C presses so far.
    presses: &'a AtomicU32,
    power_button: bool,
}

impl Ending<'_> {
    /// Waits for QEMU to end; `None` when it is to be stopped now: a
    /// second Ctrl-C, the deadline or the power-off grace passed, or
    /// Ctrl-C or the deadline without a power button to press.
    fn wait(
        &self,
        child: &mut Child,
        mut monitor: Option<&mut crate::qmp::Qmp>,
    ) -> Result<Option<ExitStatus>> {
        let mut pressed_at: Option<Instant> = None;
        loop {
            if let Some(status) = child.try_wait().context("waiting for QEMU")? {
                return Ok(Some(status));
            }
            let now = Instant::now();
            let presses = self.presses.load(Ordering::SeqCst);
            if let Some(at) = pressed_at {
                if presses >= 2 || now >= at + POWER_OFF_GRACE {
                    if now >= at + POWER_OFF_GRACE {
                        println!(
                            "\n==> the guest did not power off within {} s; stopping QEMU",
                            POWER_OFF_GRACE.as_secs()
                        );
                    }
                    return Ok(None);
                }
            } else if presses > 0 || now >= self.deadline {
                let why = if presses > 0 { "Ctrl-C" } else { "timeout" };
                let Some(qmp) = monitor.as_deref_mut().filter(|_| self.power_button) else {
                    if presses > 0 {
                        println!(
                            "\n==> Ctrl-C: this scenario has no power button (the `power` \
                             component); stopping QEMU"
                        );
                    }
                    return Ok(None);
                };
                println!(
                    "\n==> {why}: pressing the guest's power button for an orderly power-off \
                     (file systems sync); Ctrl-C again stops QEMU at once"
                );
                if let Err(e) = qmp.power_down() {
                    println!("==> pressing the power button failed: {e:#}; stopping QEMU");
                    return Ok(None);
                }
                pressed_at = Some(now);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A server on a free port of 127.0.0.1 that answers each connection
    /// with `answer` (after reading the request) and closes it.
    fn server(answer: &'static [u8]) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut c in listener.incoming().flatten() {
                let mut buf = [0u8; 256];
                let _ = c.read(&mut buf);
                let _ = c.write_all(answer);
            }
        });
        port
    }

    #[test]
    fn http_answers_only_with_a_status_line() {
        assert!(http_answers(server(
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        )));
        // QEMU's forward before the guest listens: accepted, then closed.
        assert!(!http_answers(server(b"")));
        assert!(!http_answers(server(b"SSH-2.0-x\r\n")));
        // Nobody there at all.
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(!http_answers(free));
    }
}
