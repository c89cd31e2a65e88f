//! Linux guests of Pecan's VMM (docs/virtualization.md, "The VMM"): a
//! scenario's `linux_guests` list packs Debian's cloud kernel as the boot
//! module `vmlinuz` and, for each guest, an initramfs as the module
//! `NAME.initramfs`: static busybox, the kernel modules the guest loads,
//! and an `/init` that runs the guest's command list — the lines of the
//! scenario's `commands` file — one at a time, reports each, and powers
//! off:
//!
//! ```text
//! vm-init: $ uname -r
//! 6.1.0-...
//! vm-init: ok: uname -r
//! vm-init: 7 commands, 0 failed   (and `status 0` on COM2, /dev/ttyS1)
//! ```
//!
//! With `bench = true` the initramfs also carries `/bench-linux`, the lab's
//! Linux benchmark binary, for a command list that runs it
//! (`scenarios/linux-vm-bench.toml`: `/bench-linux --vm NAME...`, whose
//! `[NAME] BENCH` and `[NAME] VMEXITS` lines `cargo xtask bench` parses).
//!
//! The kernel and busybox are the benchmark lab's (`crate::debian`,
//! fetched once into target/linux/).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cpio::Archive;
use crate::util::display_path;

/// One guest of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinuxGuest {
    /// The guest's name: its initramfs is the module `NAME.initramfs`.
    pub name: String,
    /// The command list (absolute: resolved against the scenario's
    /// directory).
    pub commands: PathBuf,
    /// Kernel modules `/init` loads, with their dependencies.
    pub modules: Vec<String>,
    /// Whether the initramfs carries the benchmark lab's `bench-linux` as
    /// `/bench-linux` (built static, as for the lab's native Linux runs:
    /// `crate::linux`), for commands like `/bench-linux --vm NAME...`.
    pub bench: bool,
    /// Whether `/init` ends with a shell on `/dev/hvc0` (the VMM's
    /// terminal: the lines typed there) instead of powering off, after
    /// reporting its status; the guest's `modules` should include
    /// `virtio_console`.
    pub interactive: bool,
}

impl LinuxGuest {
    /// The boot module of its initramfs.
    pub fn module(&self) -> String {
        format!("{}.initramfs", self.name)
    }
}

/// busybox `udhcpc`'s script (`/etc/udhcpc.sh`): configures the
/// interface with the lease and says so (`udhcpc -i eth0 -s
/// /etc/udhcpc.sh -q` in a command list).
const UDHCPC_SCRIPT: &str = "#!/bin/sh\n\
# udhcpc's script in a Linux guest of Pecan's VMM; written by cargo xtask (xtask/src/vmguest.rs).\n\
case \"$1\" in\n\
bound|renew)\n\
\x20   ifconfig \"$interface\" \"$ip\" netmask \"$subnet\" up\n\
\x20   if [ -n \"$router\" ]; then route add default gw \"$router\" dev \"$interface\"; fi\n\
\x20   echo \"vm-init: DHCP lease $ip/$subnet on $interface from $serverid\"\n\
\x20   ;;\n\
deconfig)\n\
\x20   ifconfig \"$interface\" 0.0.0.0 up\n\
\x20   ;;\n\
esac\n";

/// `/init`: the pseudo file systems, busybox's applets, the modules, then
/// each command of `/commands` through `sh -c`, and power off.
fn init_script(name: &str, modules: &[&str], interactive: bool) -> String {
    let hostname = name;
    let end = if interactive {
        INTERACTIVE_END
    } else {
        "poweroff -f\n"
    };
    let insmod: String = modules
        .iter()
        .map(|m| format!("insmod /lib/modules/{m}.ko || echo \"vm-init: insmod {m} failed\"\n"))
        .collect();
    format!(
        "#!/bin/busybox sh\n\
         # A Linux guest of Pecan's VMM; written by cargo xtask (xtask/src/vmguest.rs).\n\
         /bin/busybox mkdir -p /proc /sys /dev /tmp /mnt\n\
         /bin/busybox mount -t proc proc /proc\n\
         /bin/busybox --install -s /bin\n\
         export PATH=/bin\n\
         mount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev\n\
         {insmod}\
         hostname {hostname}\n\
         echo \"vm-init: up: Linux $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPU(s), $(sed -n 's/MemTotal: *//p' /proc/meminfo)\"\n\
         n=0; failed=0\n\
         while IFS= read -r line; do\n\
         \x20   case \"$line\" in ''|'#'*) continue ;; esac\n\
         \x20   n=$((n + 1))\n\
         \x20   echo \"vm-init: \\$ $line\"\n\
         \x20   sh -c \"$line\"; status=$?\n\
         \x20   if [ $status -eq 0 ]; then echo \"vm-init: ok: $line\"; else failed=$((failed + 1)); echo \"vm-init: FAILED ($status): $line\"; fi\n\
         done < /commands\n\
         echo \"vm-init: $n commands, $failed failed\"\n\
         # The verdict on the VMM's status channel, COM2: the number of\n\
         # failed commands.\n\
         stty -F /dev/ttyS1 raw -echo 2>/dev/null\n\
         echo \"status $failed\" > /dev/ttyS1\n\
         sync\n\
         {end}"
    )
}

/// How an interactive guest's `/init` ends: a shell on `/dev/hvc0`, a
/// new one whenever it exits (each a session leader, so the console is
/// its controlling terminal and Ctrl-C reaches what it runs).
const INTERACTIVE_END: &str = "\
if [ -c /dev/hvc0 ]; then\n\
\x20   export PS1='$(hostname):$PWD# '\n\
\x20   while true; do\n\
\x20       setsid sh -c 'echo \"vm-init: a shell on /dev/hvc0: type into the terminal\"; exec sh -i </dev/hvc0 >/dev/hvc0 2>&1'\n\
\x20       sleep 1\n\
\x20   done\n\
fi\n\
echo \"vm-init: no /dev/hvc0 (is virtio_console among the modules?): powering off\"\n\
poweroff -f\n";

/// The initramfs of `guest`: busybox, `/init`, `/commands`, the modules
/// (name, contents; in load order) and, if given, `/bench-linux`.
pub fn initramfs(
    guest: &LinuxGuest,
    busybox: &[u8],
    commands: &str,
    modules: &[(String, Vec<u8>)],
    bench_linux: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let mut a = Archive::new();
    for dir in ["bin", "dev", "etc", "lib", "lib/modules"] {
        a.dir(dir, 0o755)?;
    }
    a.file("etc/udhcpc.sh", 0o755, UDHCPC_SCRIPT.as_bytes())?;
    a.char_device("dev/console", 0o600, 5, 1)?;
    a.file("bin/busybox", 0o755, busybox)?;
    a.symlink("bin/sh", "busybox")?;
    for (name, bytes) in modules {
        a.file(&format!("lib/modules/{name}.ko"), 0o644, bytes)?;
    }
    let names: Vec<&str> = modules.iter().map(|(n, _)| n.as_str()).collect();
    a.file(
        "init",
        0o755,
        init_script(&guest.name, &names, guest.interactive).as_bytes(),
    )?;
    a.file("commands", 0o644, commands.as_bytes())?;
    if let Some(bench) = bench_linux {
        a.file("bench-linux", 0o755, bench)?;
    }
    Ok(a.finish())
}

/// The boot modules for `guests`: `vmlinuz` once, then each guest's
/// initramfs.
pub fn entries(root: &Path, guests: &[LinuxGuest]) -> Result<Vec<(String, Vec<u8>)>> {
    if guests.is_empty() {
        return Ok(Vec::new());
    }
    let pieces = crate::debian::guest_pieces(root)?;
    let vmlinuz = std::fs::read(&pieces.vmlinuz)
        .with_context(|| format!("reading {}", display_path(&pieces.vmlinuz)))?;
    let busybox = std::fs::read(&pieces.busybox)
        .with_context(|| format!("reading {}", display_path(&pieces.busybox)))?;
    let index = crate::kmod::Index::load(&pieces.modules)?;
    let bench = if guests.iter().any(|g| g.bench) {
        let binary = crate::linux::build_bench_linux(root)?;
        Some(std::fs::read(&binary).with_context(|| format!("reading {}", display_path(&binary)))?)
    } else {
        None
    };
    let mut out = vec![("vmlinuz".to_string(), vmlinuz)];
    for g in guests {
        let commands = std::fs::read_to_string(&g.commands)
            .with_context(|| format!("reading {}", display_path(&g.commands)))?;
        let wanted: Vec<&str> = g.modules.iter().map(String::as_str).collect();
        let modules = index.resolve(&wanted)?;
        let bench = bench.as_deref().filter(|_| g.bench);
        out.push((
            g.module(),
            initramfs(g, &busybox, &commands, &modules, bench)?,
        ));
    }
    Ok(out)
}

/// What the Linux guests of a run reported: each guest's status (`None`:
/// none reported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub statuses: Vec<(String, Option<u8>)>,
}

impl Verdict {
    /// Whether every guest reported status 0.
    pub fn all_succeeded(&self) -> bool {
        self.statuses.iter().all(|(_, s)| *s == Some(0))
    }

    pub fn describe(&self) -> String {
        let each: Vec<String> = self
            .statuses
            .iter()
            .map(|(name, s)| match s {
                Some(0) => format!("{name}: every command succeeded"),
                Some(n) => format!("{name}: {n} command(s) failed"),
                None => format!("{name}: no status reported"),
            })
            .collect();
        format!("Linux guests: {}", each.join("; "))
    }
}

/// Notes a serial line's guest status (`vmm: NAME: the guest reported
/// status N`).
fn note(line: &str, verdict: &mut Verdict) {
    let Some(rest) = line.strip_prefix("vmm: ") else {
        return;
    };
    let Some((name, status)) = rest.split_once(": the guest reported status ") else {
        return;
    };
    if let (Some(entry), Ok(n)) = (
        verdict.statuses.iter_mut().find(|(g, _)| g == name),
        status.trim().parse::<u8>(),
    ) {
        entry.1 = Some(n);
    }
}

/// Passes `out` (the serial output) through to stdout, noting each
/// guest's status; returns when `out` ends.
pub fn watch(out: impl std::io::Read, guests: &[String]) -> Verdict {
    use std::io::{BufRead, Write};
    let mut verdict = Verdict {
        statuses: guests.iter().map(|g| (g.clone(), None)).collect(),
    };
    let mut reader = std::io::BufReader::new(out);
    let mut line = Vec::new();
    let stdout = std::io::stdout();
    while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
        let mut lock = stdout.lock();
        let _ = lock.write_all(&line);
        let _ = lock.flush();
        note(String::from_utf8_lossy(&line).trim_end(), &mut verdict);
        line.clear();
    }
    verdict
}

/// Checks a guest's name (a module name: 1..=32 of [A-Za-z0-9_-]).
pub fn check_name(name: &str) -> Result<()> {
    let good = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
    if !good {
        bail!("linux_guests: name \"{name}\" is not 1..=32 of [A-Za-z0-9_-]");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(interactive: bool) -> LinuxGuest {
        LinuxGuest {
            name: "vm7".into(),
            commands: "x.commands".into(),
            modules: Vec::new(),
            bench: false,
            interactive,
        }
    }

    #[test]
    fn init_runs_each_command_and_powers_off() {
        let s = init_script("vm7", &["virtio_blk"], false);
        assert!(s.starts_with("#!/bin/busybox sh\n"));
        assert!(s.contains("insmod /lib/modules/virtio_blk.ko ||"));
        assert!(s.contains("done < /commands\n"));
        assert!(s.contains("echo \"vm-init: $n commands, $failed failed\""));
        assert!(s.trim_end().ends_with("poweroff -f"));
        let mount = s.find("mount -t proc").unwrap();
        let install = s.find("--install").unwrap();
        assert!(mount < install, "busybox --install needs /proc");
        assert!(s.contains("\nhostname vm7\n"));
        assert!(!s.contains("hvc0"));
    }

    #[test]
    fn an_interactive_init_ends_with_a_shell_on_hvc0() {
        let s = init_script("vm7", &["virtio_console"], true);
        let status = s.find("echo \"status $failed\" > /dev/ttyS1").unwrap();
        let shell = s.find("exec sh -i </dev/hvc0 >/dev/hvc0 2>&1").unwrap();
        assert!(status < shell, "the status is reported first");
        assert!(s.trim_end().ends_with("poweroff -f"), "without hvc0");
    }

    #[test]
    fn initramfs_holds_init_commands_and_modules() {
        let image = initramfs(
            &guest(false),
            &[7; 100],
            "uname -r\n",
            &[("fat".into(), vec![1, 2])],
            None,
        )
        .unwrap();
        let entries = crate::cpio::tests::read_back(&image);
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        for want in [
            "init",
            "commands",
            "bin/busybox",
            "bin/sh",
            "lib/modules/fat.ko",
            "dev/console",
        ] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        let commands = entries.iter().find(|e| e.name == "commands").unwrap();
        assert_eq!(commands.data, b"uname -r\n");
        assert!(!names.contains(&"bench-linux"));
        let image = initramfs(
            &guest(false),
            &[7; 100],
            "/bench-linux --vm getppid\n",
            &[],
            Some(b"ELF"),
        )
        .unwrap();
        let entries = crate::cpio::tests::read_back(&image);
        let bench = entries.iter().find(|e| e.name == "bench-linux").unwrap();
        assert_eq!(
            (bench.data.as_slice(), bench.mode & 0o777),
            (&b"ELF"[..], 0o755)
        );
    }

    #[test]
    fn verdicts_follow_the_status_lines() {
        let out = "x\nvmm: vm1: the guest reported status 0\n[vm2] y\nvmm: vm2: the guest reported status 3\n";
        let v = watch(out.as_bytes(), &["vm1".into(), "vm2".into(), "vm3".into()]);
        assert_eq!(
            v.statuses,
            vec![
                ("vm1".into(), Some(0)),
                ("vm2".into(), Some(3)),
                ("vm3".into(), None)
            ]
        );
        assert!(!v.all_succeeded());
        assert!(v.describe().contains("vm2: 3 command(s) failed"));
        let ok = watch(
            "vmm: vm1: the guest reported status 0\n".as_bytes(),
            &["vm1".into()],
        );
        assert!(ok.all_succeeded());
        // A guest cannot fake another's status through its console: its
        // lines are prefixed with its own name.
        let fake = watch(
            "[vm1] vmm: vm1: the guest reported status 0\n".as_bytes(),
            &["vm1".into()],
        );
        assert!(!fake.all_succeeded());
    }

    #[test]
    fn names() {
        assert!(check_name("vm1").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name(&"x".repeat(33)).is_err());
    }
}
