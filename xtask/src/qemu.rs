//! The emulated machine: the QEMU command line that boots the kernel (with
//! the boot image as `-initrd`, which PVH hands to the kernel as boot
//! module 0), and what QEMU's exit status says about the guest.
//!
//! Exit-status contract with the kernel: the guest writes a value `v` to the
//! `isa-debug-exit` device at I/O port 0xf4 and QEMU exits with `(v << 1) | 1`.
//! The kernel writes 0x10 for success (QEMU exits 33) and 0x11 for failure
//! (QEMU exits 35). Any other status — 0 after a triple fault (with
//! `-no-reboot` the reset ends QEMU), QEMU's own errors, a signal — means the
//! guest never reported.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::accel::Accel;
use crate::util::shell_join;

/// The QEMU binary.
pub const QEMU: &str = "qemu-system-x86_64";
/// qboot, the small firmware that starts a PVH kernel quickly.
pub const QBOOT: &str = "/usr/share/qemu/qboot.rom";
/// QEMU's exit status when the kernel reports success (0x10 written).
pub const EXIT_SUCCESS: i32 = 33;
/// QEMU's exit status when the kernel reports failure (0x11 written).
pub const EXIT_FAILURE: i32 = 35;
/// Default guest memory in MiB.
pub const DEFAULT_MEMORY_MIB: u32 = 256;
/// The least guest memory a scenario may ask for, in MiB: what the kernel
/// and root need (the kernel refuses less than 11 MiB usable, which QEMU
/// `-m 12` gives; `kernel/src/selftest.rs`, `MIN_USABLE_BYTES`).
pub const MIN_MEMORY_MIB: u32 = 12;
/// The most guest memory a scenario may ask for, in MiB: 1 TiB, far above
/// any guest this project boots (virtual machines of a few GiB must stay
/// possible) and below what QEMU's q35 machine can address. Whether the
/// host can give it is checked separately, before a boot
/// ([`check_host_memory`]).
pub const MAX_MEMORY_MIB: u32 = 1 << 20;

/// RAM plus swap of this host in MiB, from `/proc/meminfo`: what QEMU can
/// at most give a guest (it maps guest memory up front and the kernel
/// refuses a mapping larger than that). `None` when unknown.
pub fn host_memory_mib() -> Option<u64> {
    parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// `MemTotal` + `SwapTotal` of a `/proc/meminfo` text, in MiB.
fn parse_meminfo(text: &str) -> Option<u64> {
    let kib = |key: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Some((kib("MemTotal:")? + kib("SwapTotal:").unwrap_or(0)) / 1024)
}

/// Refuses a guest larger than this host's memory before anything is built
/// or booted (QEMU would fail to start, after the build).
pub fn check_host_memory(memory_mib: u32) -> anyhow::Result<()> {
    check_memory_against(memory_mib, host_memory_mib())
}

fn check_memory_against(memory_mib: u32, host_mib: Option<u64>) -> anyhow::Result<()> {
    match host_mib {
        Some(host) if u64::from(memory_mib) > host => anyhow::bail!(
            "memory_mib = {memory_mib}: this host has {host} MiB of memory and swap in all, \
             so QEMU cannot give the guest {memory_mib} MiB; ask for less"
        ),
        _ => Ok(()),
    }
}
/// Default number of vCPUs.
pub const DEFAULT_SMP: u32 = 1;
/// The real-time clock of an instruction-counting machine: a fixed start,
/// advancing with virtual time (see [`Machine::icount`]).
pub const ICOUNT_RTC: &str = "base=2020-01-01T00:00:00,clock=vm";

/// Everything that determines one QEMU invocation.
#[derive(Debug, Clone)]
pub struct Machine {
    pub kernel: PathBuf,
    /// The boot image (`-initrd`), if any.
    pub initrd: Option<PathBuf>,
    pub cmdline: String,
    pub memory_mib: u32,
    pub smp: u32,
    pub accel: Accel,
    /// `-display none`.
    pub headless: bool,
    /// Deterministic instruction counting, for benchmarks: the guest's
    /// TSC counts executed instructions (`-icount shift=0,align=off`), and
    /// nothing the guest sees depends on the host's clock or entropy:
    /// `sleep=off` lets virtual time jump to the next timer deadline while
    /// the CPU idles instead of following the host's clock; `-seed 1` makes
    /// RDRAND/RDSEED (which `-cpu max` offers) a seeded generator; `-rtc
    /// base=...,clock=vm` starts the CMOS clock at a fixed date and runs it
    /// on virtual time. Measured with the Linux benchmark guest, which
    /// seeds its random pool from the wall clock and RDRAND (KASLR, slab
    /// and page-allocator shuffling, address-space randomization): leave
    /// out any one of the three and two boots differ in 1–90 % of the
    /// samples of a benchmark; with all three, every sample repeats.
    pub icount: bool,
    /// `-s -S`: gdb server on localhost:1234, CPU stopped at reset.
    pub gdb: bool,
    /// The scenario's devices (`crate::devices::Attached::qemu_args`),
    /// after everything else.
    pub devices: Vec<String>,
    /// `-qmp unix:PATH,server=on,wait=off`: a QMP monitor socket
    /// (`crate::qmp`), for monitor commands and the forwarded ports. The
    /// machine then starts paused (`-S`, as with `gdb`) until the QMP
    /// client has learnt what it needs and sends `cont`
    /// (`crate::qmp::Qmp::resume`), so even a guest that ends at once
    /// cannot end before that.
    pub qmp: Option<PathBuf>,
}

impl Machine {
    /// A headless machine with the default size.
    pub fn new(kernel: PathBuf, initrd: Option<PathBuf>, cmdline: String, accel: Accel) -> Self {
        Machine {
            kernel,
            initrd,
            cmdline,
            memory_mib: DEFAULT_MEMORY_MIB,
            smp: DEFAULT_SMP,
            accel,
            headless: true,
            icount: false,
            gdb: false,
            devices: Vec::new(),
            qmp: None,
        }
    }

    /// QEMU's arguments (without the program name).
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "-M",
            "q35",
            "-bios",
            QBOOT,
            "-cpu",
            "max",
            "-m",
            &self.memory_mib.to_string(),
            "-smp",
            &self.smp.to_string(),
            "-kernel",
            &self.kernel.to_string_lossy(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(initrd) = &self.initrd {
            args.extend(["-initrd".to_string(), initrd.to_string_lossy().into_owned()]);
        }
        args.extend(
            [
                "-append",
                &self.cmdline,
                "-serial",
                "stdio",
                "-no-reboot",
                "-device",
                "isa-debug-exit,iobase=0xf4,iosize=4",
                "-accel",
                self.accel.qemu_name(),
            ]
            .map(String::from),
        );
        if self.headless {
            args.extend(["-display", "none"].map(String::from));
        }
        if self.icount {
            args.extend(
                [
                    "-icount",
                    "shift=0,align=off,sleep=off",
                    "-seed",
                    "1",
                    "-rtc",
                    ICOUNT_RTC,
                ]
                .map(String::from),
            );
        }
        if self.gdb {
            args.extend(["-s", "-S"].map(String::from));
        }
        if let Some(socket) = &self.qmp {
            if !self.gdb {
                args.push("-S".to_string());
            }
            args.push("-qmp".to_string());
            args.push(format!(
                "unix:{},server=on,wait=off",
                socket.to_string_lossy().replace(',', ",,")
            ));
        }
        args.extend(self.devices.iter().cloned());
        args
    }

    /// The QEMU command (stdio not yet configured).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(QEMU);
        cmd.args(self.args());
        cmd
    }

    /// The command line as a shell would spell it, for printing and logs.
    pub fn command_line(&self) -> String {
        let mut words = vec![QEMU.to_string()];
        words.extend(self.args());
        shell_join(&words)
    }
}

/// What QEMU's exit status says about the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestExit {
    /// The kernel wrote 0x10 to isa-debug-exit.
    Success,
    /// The kernel wrote 0x11 to isa-debug-exit.
    Failure,
    /// Anything else; the text explains it.
    Other(String),
}

impl GuestExit {
    /// Interprets a QEMU exit status.
    pub fn from_status(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        Self::from_parts(status.code(), status.signal())
    }

    /// Interprets an exit code, or the signal that ended QEMU.
    pub fn from_parts(code: Option<i32>, signal: Option<i32>) -> Self {
        match (code, signal) {
            (Some(EXIT_SUCCESS), _) => GuestExit::Success,
            (Some(EXIT_FAILURE), _) => GuestExit::Failure,
            // With -no-reboot a guest reset (a triple fault) ends QEMU
            // with status 0; QEMU's own errors (it could not start: bad
            // options, no memory for the guest) end it with 1.
            (Some(0), _) => GuestExit::Other(
                "QEMU exited with status 0: the guest reset itself (a triple fault; \
                 -no-reboot turns the reset into an exit)"
                    .to_string(),
            ),
            (Some(1), _) => GuestExit::Other(
                "QEMU failed (exit status 1): QEMU itself reported an error (its message is \
                 on its standard error), the guest may never have run"
                    .to_string(),
            ),
            (Some(n), _) => GuestExit::Other(format!("QEMU exited with status {n}")),
            (None, Some(sig)) => GuestExit::Other(format!("QEMU was killed by signal {sig}")),
            (None, None) => GuestExit::Other("QEMU ended without an exit status".to_string()),
        }
    }

    /// A short description for reports.
    pub fn describe(&self) -> String {
        match self {
            GuestExit::Success => format!("the kernel reported success (QEMU exit {EXIT_SUCCESS})"),
            GuestExit::Failure => format!("the kernel reported failure (QEMU exit {EXIT_FAILURE})"),
            GuestExit::Other(text) => text.clone(),
        }
    }
}

/// Waits for `child` to exit, at most until `deadline`. `None` means it was
/// still running then.
pub fn wait_until(child: &mut Child, deadline: Instant) -> std::io::Result<Option<ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

/// Stops QEMU politely (SIGTERM, so it restores the terminal it put in raw
/// mode for `-serial stdio`), then forcibly after two seconds.
pub fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let grace = Instant::now() + Duration::from_secs(2);
    if !matches!(wait_until(child, grace), Ok(Some(_))) {
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(GuestExit::from_parts(Some(33), None), GuestExit::Success);
        assert_eq!(GuestExit::from_parts(Some(35), None), GuestExit::Failure);
        assert!(
            matches!(GuestExit::from_parts(Some(0), None), GuestExit::Other(t) if t.contains("triple fault") && !t.contains("QEMU failed"))
        );
        assert!(
            matches!(GuestExit::from_parts(Some(1), None), GuestExit::Other(t) if t.contains("QEMU failed (exit status 1)") && !t.contains("triple"))
        );
        assert!(
            matches!(GuestExit::from_parts(None, Some(9)), GuestExit::Other(t) if t.contains("signal 9"))
        );
    }

    #[test]
    fn host_memory() {
        let text = "MemTotal:       24576000 kB\nMemFree:  1 kB\nSwapTotal:       1048576 kB\n";
        assert_eq!(parse_meminfo(text), Some(25_024));
        assert_eq!(parse_meminfo("MemTotal: 2097152 kB\n"), Some(2048));
        assert_eq!(parse_meminfo("nonsense"), None);
        assert!(check_memory_against(1024, Some(2048)).is_ok());
        let e = check_memory_against(1_000_000, Some(2048))
            .unwrap_err()
            .to_string();
        assert!(e.contains("this host has 2048 MiB"), "{e}");
        // Unknown host: nothing to compare with.
        assert!(check_memory_against(1_000_000, None).is_ok());
    }

    #[test]
    fn exit_status_of_a_real_process() {
        let status = Command::new("sh").args(["-c", "exit 33"]).status().unwrap();
        assert_eq!(GuestExit::from_status(status), GuestExit::Success);
        let status = Command::new("sh")
            .args(["-c", "kill -9 $$"])
            .status()
            .unwrap();
        assert!(
            matches!(GuestExit::from_status(status), GuestExit::Other(t) if t.contains("signal 9"))
        );
    }

    #[test]
    fn command_line() {
        let mut m = Machine::new(
            PathBuf::from("/k/pecan-kernel"),
            Some(PathBuf::from("/t/boot.img")),
            "pecan.selftest=timer".into(),
            Accel::Tcg,
        );
        m.icount = true;
        let line = m.command_line();
        assert!(line.starts_with(
            "qemu-system-x86_64 -M q35 -bios /usr/share/qemu/qboot.rom -cpu max -m 256 -smp 1 \
             -kernel /k/pecan-kernel -initrd /t/boot.img -append pecan.selftest=timer \
             -serial stdio -no-reboot \
             -device isa-debug-exit,iobase=0xf4,iosize=4 -accel tcg"
        ));
        assert!(
            line.ends_with(
                "-display none -icount shift=0,align=off,sleep=off -seed 1 \
                 -rtc base=2020-01-01T00:00:00,clock=vm"
            ),
            "{line}"
        );
        m.cmdline.clear();
        m.initrd = None;
        m.headless = false;
        m.gdb = true;
        let line = m.command_line();
        assert!(
            line.contains("-kernel /k/pecan-kernel -append ''"),
            "{line}"
        );
        assert!(!line.contains("-display"), "{line}");
        assert!(line.ends_with("-s -S"), "{line}");
    }
}

/// The serial output and end of one guest run (see [`capture`]).
#[derive(Debug, Clone)]
pub struct Captured {
    /// Everything the guest wrote to its serial port (QEMU's stdout).
    pub serial: String,
    /// QEMU's stderr.
    pub stderr: String,
    /// How the guest ended; `None` if the timeout stopped it.
    pub exit: Option<GuestExit>,
    pub duration: Duration,
}

/// Boots `machine` without a terminal (stdin closed, serial captured),
/// waits at most `timeout`, and returns what it printed. For batch runs
/// such as benchmarks; scenario tests match output while it streams
/// (`boot_test`).
pub fn capture(machine: &Machine, timeout: Duration) -> std::io::Result<Captured> {
    use std::io::Read;
    let start = Instant::now();
    let mut child = machine
        .command()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let out_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let exit = match wait_until(&mut child, start + timeout)? {
        Some(status) => Some(GuestExit::from_status(status)),
        None => {
            terminate(&mut child);
            None
        }
    };
    let serial = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    Ok(Captured {
        serial,
        stderr,
        exit,
        duration: start.elapsed(),
    })
}
