//! The benchmark lab's Linux side: build `bench-linux` as a static binary,
//! pack it with busybox into an initramfs, boot Debian's cloud kernel on it
//! in the same emulated machine as Pecan, and hand back the serial output
//! with its `BENCH` lines.
//!
//! The machine is [`crate::qemu::Machine`] as for Pecan — q35, qboot,
//! `-cpu max`, one vCPU, TCG with `-icount shift=0,align=off`, the memory
//! the caller asks for — with `-kernel vmlinuz -initrd initramfs.cpio`. The
//! initramfs (a `newc` cpio written by [`crate::cpio`]) holds busybox, the
//! applet links `/init` uses, `/init` itself, `/bench-linux` and the kernel
//! modules of [`MODULES`] under `/lib/modules/`; `/init` mounts proc, sysfs
//! and devtmpfs, loads the modules with `insmod` in dependency order, turns
//! transparent huge pages on for `madvise`d regions only (the disk
//! benchmarks' buffers; the cloud kernel boots with them off), turns
//! off real-time throttling (`bench-linux` runs under `SCHED_FIFO`), prints
//! the kernel release, the CPU vulnerability mitigations in force and the
//! CPU's feature flags (compared with Linux in Pecan's VM), runs
//! `/bench-linux NAMES...`, prints [`EXIT_MARKER`] with its exit status and
//! powers off.
//!
//! Modules: Debian's cloud kernel builds the virtio drivers and FAT as
//! modules. The initramfs carries those of [`MODULES`] and what they
//! depend on, from the same kernel package as `vmlinuz` (cached by
//! [`crate::debian`]; dependencies from each module's `.modinfo`, built-in
//! ones left out: [`crate::kmod`]).
//!
//! Disk: when an I/O benchmark that reads a disk is selected
//! ([`DISK_BENCHMARKS`]), each boot gets a fresh sparse raw image of
//! [`DISK_MIB`] MiB in `target/bench/work/linux/`, attached as Pecan's
//! scenarios attach theirs (`crate::devices`: `virtio-blk-pci` with
//! `disable-legacy=on`, after `-vga none -nic none`); the guest sees it as
//! `/dev/vda`. `cargo xtask bench` boots those benchmarks in a guest of
//! their own, so that the disk's host-timed completions cannot disturb
//! the others' exact repetition. Under icount the disk is paced
//! (`crate::devices::Attached::pace_disks`) so that every read takes the
//! path it takes on hardware: the reader sleeps, the completion wakes it.
//!
//! HTTP: the HTTP benchmarks (`bench::httpload`) are measured by the
//! host while the guest serves ([`run_http`]): a guest of their own whose
//! `/init` ([`http_init_script`]) loads the same modules, takes an address
//! for eth0 by DHCP from QEMU's user network (busybox `udhcpc` with the
//! script [`UDHCPC_SCRIPT`], as Pecan's server takes its own), and runs
//! `/bench-linux http-serve 80 /www.cpio` — the static files of
//! `scenarios/www`, packed as for Pecan's `www` ROM module — until xtask
//! stops QEMU. Its NIC is Pecan's HTTP scenario's: `virtio-net-pci` on the
//! user network with `restrict=on`, guest port 80 forwarded from a free
//! port on 127.0.0.1; the run is never under icount (`crate::bench::http`).
//!
//! API: [`run_linux_benchmarks`] (serial log at
//! `target/bench/linux-serial.log`), or [`prepare`] and
//! [`LinuxGuest::run`] with a log path of the caller's, as `cargo xtask
//! bench` does. `cargo xtask bench-linux [NAME...]` runs this part alone.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bench::catalog::{self, Platform};
use regex::Regex;

use crate::accel::Accel;
use crate::cpio::Archive;
use crate::debian::{self, Versions};
use crate::devices::{Devices, Disk, DiskSource, Link, Nic};
use crate::qemu::{self, Machine};
use crate::setup;
use crate::util::{cargo, display_path, shell_quote, workspace_root};

/// The benchmark binary's package (and file) name.
pub const PACKAGE: &str = "bench-linux";
/// The Rust target it is built for, statically linked.
pub const TARGET: &str = "x86_64-unknown-linux-gnu";
/// glibc's static library, which `+crt-static` links.
const LIBC_A: &str = "/usr/lib/x86_64-linux-gnu/libc.a";
/// The kernel command line. `quiet` keeps the kernel off the console while
/// the benchmarks run; `panic=-1` reboots at once on a panic, which ends
/// QEMU (`-no-reboot`).
pub const CMDLINE: &str = "console=ttyS0 quiet panic=-1";
/// What `/init` prints after `bench-linux` returned: `EXIT_MARKER <status>`.
pub const EXIT_MARKER: &str = "bench-linux-init: exit";
/// The busybox applets `/init` uses.
const APPLETS: &[&str] = &[
    "sh", "mount", "uname", "cat", "poweroff", "insmod", "ifconfig", "udhcpc", "route",
];
/// busybox `udhcpc`'s script in the HTTP guest (`/udhcpc.sh`): configures
/// the interface with the lease (and the router, if QEMU offers one; with
/// `restrict=on` it offers none).
pub const UDHCPC_SCRIPT: &str = "#!/bin/sh\n\
# udhcpc's script in the lab's HTTP guest; written by cargo xtask (xtask/src/linux.rs).\n\
case \"$1\" in\n\
bound|renew)\n\
\x20   ifconfig \"$interface\" \"$ip\" netmask \"$subnet\" up\n\
\x20   if [ -n \"$router\" ]; then route add default gw \"$router\" dev \"$interface\"; fi\n\
\x20   echo \"bench-linux-init: DHCP lease $ip/$subnet on $interface from $serverid, router ${router:-none}\"\n\
\x20   ;;\n\
deconfig)\n\
\x20   ifconfig \"$interface\" 0.0.0.0 up\n\
\x20   ;;\n\
esac\n";
/// The kernel modules the guest loads (with their dependencies): the
/// virtio PCI transport, the block and network drivers, FAT with the code
/// page and character set it mounts with by default (cp437, ascii).
pub const MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_blk",
    "virtio_net",
    "vfat",
    "nls_cp437",
    "nls_ascii",
];
/// The Linux benchmarks that read the lab's disk (`/dev/vda`).
pub const DISK_BENCHMARKS: &[&str] = &[
    "blk-read-64k-linux",
    "blk-raw-read-512-linux",
    "blk-raw-read-1k-linux",
    "blk-raw-read-4k-linux",
    "blk-raw-read-16k-linux",
    "blk-raw-read-64k-linux",
    "blk-raw-read-256k-linux",
    "blk-raw-read-1m-linux",
    "blk-raw-write-512-linux",
    "blk-raw-write-1k-linux",
    "blk-raw-write-4k-linux",
    "blk-raw-write-16k-linux",
    "blk-raw-write-64k-linux",
    "blk-raw-write-256k-linux",
    "blk-raw-write-1m-linux",
    "fat-read-512-linux",
    "fat-read-1k-linux",
    "fat-read-4k-linux",
    "fat-read-16k-linux",
    "fat-read-64k-linux",
    "fat-read-256k-linux",
    "fat-read-1m-linux",
    "fat-write-512-linux",
    "fat-write-1k-linux",
    "fat-write-4k-linux",
    "fat-write-16k-linux",
    "fat-write-64k-linux",
    "fat-write-256k-linux",
    "fat-write-1m-linux",
];
/// The size of that disk: a sparse file, fresh for each boot.
pub const DISK_MIB: u64 = 64;

/// A guest ready to boot: kernel, initramfs and what they are.
#[derive(Debug, Clone)]
pub struct LinuxGuest {
    pub vmlinuz: PathBuf,
    pub initramfs: PathBuf,
    pub versions: Versions,
    /// The benchmarks `/init` runs (empty: all).
    pub names: Vec<String>,
    /// Under icount (true, the default) or on the host's clock (the lab's
    /// wall-clock mode).
    pub icount: bool,
}

/// One boot of the guest.
#[derive(Debug, Clone)]
pub struct LinuxRun {
    /// The serial console's output (line ends `\n`); the `BENCH` lines are
    /// among it.
    pub serial: String,
    /// Where the log (QEMU command line, serial output, QEMU's stderr) was
    /// written.
    pub log_path: PathBuf,
    /// e.g. `Linux 6.1.0-56-cloud-amd64 (Debian
    /// linux-image-6.1.0-56-cloud-amd64 6.1.192-2)`.
    pub kernel_version: String,
    pub versions: Versions,
    /// Wall-clock time from starting QEMU to its exit.
    pub duration: Duration,
}

/// Builds and boots the guest once: [`prepare`] then [`LinuxGuest::run`].
/// `names` are Linux benchmark names of [`bench::catalog`] (empty: all).
/// An error says what is missing (no apt, no network, no static glibc) or
/// where the serial log of a failed boot is.
pub fn run_linux_benchmarks(
    names: &[String],
    memory_mib: u32,
    timeout: Duration,
) -> Result<LinuxRun> {
    prepare(names)?.run(
        memory_mib,
        Accel::Tcg,
        timeout,
        &log_path(&workspace_root()),
    )
}

/// Checks the names, fetches (or finds in the cache) the kernel and
/// busybox, builds `bench-linux` and writes the initramfs.
pub fn prepare(names: &[String]) -> Result<LinuxGuest> {
    check_names(names)?;
    let root = workspace_root();
    let files = guest_files(&root)?;
    let image = initramfs(&files.busybox, &files.bench, names, &files.modules, None)?;
    let pieces = files.pieces;
    let initramfs = debian::cache_dir(&root).join("initramfs.cpio");
    crate::util::write_atomically(&initramfs, &image)?;
    Ok(LinuxGuest {
        vmlinuz: pieces.vmlinuz,
        initramfs,
        versions: pieces.versions,
        names: names.to_vec(),
        icount: true,
    })
}

/// What a guest is made of: the cached kernel pieces and the initramfs's
/// files.
struct GuestFiles {
    pieces: debian::GuestPieces,
    busybox: Vec<u8>,
    /// A fresh build of `bench-linux`.
    bench: Vec<u8>,
    /// The modules of [`MODULES`] with their dependencies, in load order.
    modules: Vec<(String, Vec<u8>)>,
}

/// Fetches (or finds in the cache) the kernel and busybox, builds
/// `bench-linux` and resolves the modules.
fn guest_files(root: &Path) -> Result<GuestFiles> {
    let pieces = debian::guest_pieces(root)?;
    let binary = build_bench_linux(root)?;
    let busybox = std::fs::read(&pieces.busybox)
        .with_context(|| format!("reading {}", display_path(&pieces.busybox)))?;
    let bench =
        std::fs::read(&binary).with_context(|| format!("reading {}", display_path(&binary)))?;
    let index = crate::kmod::Index::load(&pieces.modules)?;
    let modules = index.resolve(MODULES)?;
    Ok(GuestFiles {
        pieces,
        busybox,
        bench,
        modules,
    })
}

/// Whether the benchmarks `names` (empty: all) read the lab's disk.
pub fn needs_disk(names: &[String]) -> bool {
    names.is_empty() || names.iter().any(|n| DISK_BENCHMARKS.contains(&n.as_str()))
}

/// Whether `name` is a network benchmark (`bench::netio`): it needs the
/// NIC joined to the host peer.
pub fn is_net(name: &str) -> bool {
    name.starts_with("net-")
}

/// Whether the benchmarks `names` (all when empty) need the peer NIC.
pub fn needs_net(names: &[String]) -> bool {
    names.is_empty() || names.iter().any(|n| is_net(n))
}

/// Refuses names that are not Linux benchmarks, listing those that are.
fn check_names(names: &[String]) -> Result<()> {
    if let Some(http) = names.iter().find(|n| bench::httpload::is_http(n)) {
        bail!(
            "`{http}` is measured by the host while the guest serves: run it with \
             `cargo xtask bench {http}`"
        );
    }
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| catalog::find(Platform::Linux, n).is_none())
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = catalog::ALL
            .iter()
            .filter(|b| b.platform == Platform::Linux && !bench::httpload::is_http(b.name))
            .map(|b| b.name)
            .collect();
        bail!(
            "unknown Linux benchmark {}; the Linux benchmarks are: {}",
            unknown.join(", "),
            known.join(" ")
        );
    }
    Ok(())
}

/// Builds `bench-linux` statically linked; returns the binary's path.
pub fn build_bench_linux(root: &Path) -> Result<PathBuf> {
    ensure_static_glibc()?;
    println!("==> building {PACKAGE} (static, {TARGET})");
    let status = cargo()
        .args(["build", "--release", "-p", PACKAGE, "--target", TARGET])
        // Static glibc; debug info (the release profile keeps it) stays out
        // of the initramfs, the symbols stay for disassembly.
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            "-Ctarget-feature=+crt-static\x1f-Cstrip=debuginfo",
        )
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("building {PACKAGE} failed ({status})");
    }
    let binary = root
        .join("target")
        .join(TARGET)
        .join("release")
        .join(PACKAGE);
    let bytes =
        std::fs::read(&binary).with_context(|| format!("reading {}", display_path(&binary)))?;
    if needs_interpreter(&bytes)? {
        bail!(
            "{} is dynamically linked (it has PT_INTERP); it must be static to run alone \
             in the initramfs",
            display_path(&binary)
        );
    }
    Ok(binary)
}

/// Makes sure glibc's static library is there, installing libc6-dev when
/// we are root.
fn ensure_static_glibc() -> Result<()> {
    if Path::new(LIBC_A).is_file() {
        return Ok(());
    }
    if !setup::is_root() || crate::util::which("apt-get").is_none() {
        bail!(
            "glibc's static library {LIBC_A} is missing; {PACKAGE} links it statically. \
             Install it with: sudo apt-get install -y libc6-dev"
        );
    }
    println!("==> {LIBC_A} is missing; installing libc6-dev");
    setup::apt_get(&["install", "-y", "--no-install-recommends", "libc6-dev"])?;
    if !Path::new(LIBC_A).is_file() {
        bail!("installed libc6-dev, but {LIBC_A} is still missing");
    }
    Ok(())
}

/// Whether an ELF64 x86-64 file asks for a dynamic linker (`PT_INTERP`).
fn needs_interpreter(elf: &[u8]) -> Result<bool> {
    const PT_INTERP: u32 = 3;
    let u16_at = |o: usize| formats::bytes::read_u16(elf, o);
    let u32_at = |o: usize| formats::bytes::read_u32(elf, o);
    let u64_at = |o: usize| formats::bytes::read_u64(elf, o);
    if elf.get(..5) != Some(b"\x7fELF\x02") || u16_at(18) != Some(62) {
        bail!("not an ELF64 x86-64 file");
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(32), u16_at(54), u16_at(56)) else {
        bail!("truncated ELF header");
    };
    for i in 0..usize::from(phnum) {
        let at = usize::try_from(phoff)? + i * usize::from(phentsize);
        match u32_at(at) {
            Some(PT_INTERP) => return Ok(true),
            Some(_) => {}
            None => bail!("truncated ELF program headers"),
        }
    }
    Ok(false)
}

/// `/init`: mount the pseudo file systems, load the `modules` (names, in
/// order), report the kernel, run the benchmarks, report their exit
/// status, power off. A module that does not load is reported; the
/// benchmark that needs it then fails with its own error.
fn init_script(names: &[String], modules: &[&str]) -> String {
    let mut command = vec!["/bench-linux".to_string()];
    command.extend(names.iter().map(|n| shell_quote(n)));
    format!(
        "#!/bin/sh\n\
         # The benchmark lab's Linux guest; written by cargo xtask (xtask/src/linux.rs).\n\
         {}\
         # Transparent huge pages only where asked for (the disk benchmarks'\n\
         # buffers, for physically contiguous memory); the kernel's default is never.\n\
         echo madvise > /sys/kernel/mm/transparent_hugepage/enabled\n\
         # The NIC joined to the host peer (network benchmarks): 10.0.3.2/24.\n\
         if [ -e /sys/class/net/eth0 ]; then\n\
         \x20   ifconfig eth0 10.0.3.2 netmask 255.255.255.0 up && echo \"bench-linux-init: eth0 10.0.3.2/24\"\n\
         fi\n\
         # bench-linux runs under SCHED_FIFO: no real-time throttling.\n\
         echo -1 > /proc/sys/kernel/sched_rt_runtime_us\n\
         echo \"bench-linux-init: kernel $(uname -r): $(cat /proc/cmdline)\"\n\
         for f in /sys/devices/system/cpu/vulnerabilities/*; do\n\
         \x20   echo \"bench-linux-init: ${{f##*/}}: $(cat $f)\"\n\
         done\n\
         # The CPU features Linux sees (compared with Linux in Pecan's VM).\n\
         while IFS= read -r l; do case \"$l\" in flags*) echo \"bench-linux-init: cpu $l\"; break ;; esac; done < /proc/cpuinfo\n\
         {}\n\
         echo \"{EXIT_MARKER} $?\"\n\
         poweroff -f\n",
        init_start(modules),
        command.join(" ")
    )
}

/// The start of both `/init`s: `PATH`, the pseudo file systems, the
/// `modules` loaded (dependencies first) and listed.
fn init_start(modules: &[&str]) -> String {
    let insmod: String = modules
        .iter()
        .map(|m| {
            format!("insmod /lib/modules/{m}.ko || echo \"bench-linux-init: insmod {m} failed\"\n")
        })
        .collect();
    format!(
        "export PATH=/bin\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev\n\
         # The drivers the I/O benchmarks need, dependencies first.\n\
         {insmod}\
         mods=\"\"; while read m rest; do mods=\"$mods $m\"; done < /proc/modules\n\
         echo \"bench-linux-init: modules loaded:$mods\"\n"
    )
}

/// `/init` of the HTTP guest ([`run_http`]): the pseudo file systems
/// and `modules` as in [`init_script`], eth0's address by DHCP, then
/// `bench-linux http-serve` until QEMU is stopped.
fn http_init_script(modules: &[&str]) -> String {
    format!(
        "#!/bin/sh\n\
         # The benchmark lab's Linux HTTP guest; written by cargo xtask (xtask/src/linux.rs).\n\
         {}\
         ifconfig lo 127.0.0.1 up\n\
         # QEMU's user network: an address by DHCP, as Pecan's server takes its own.\n\
         udhcpc -i eth0 -s /udhcpc.sh -q -n -t 10 -T 1 || echo \"bench-linux-init: no DHCP lease\"\n\
         echo \"bench-linux-init: kernel $(uname -r): $(cat /proc/cmdline)\"\n\
         /bench-linux http-serve {port} /www.cpio\n\
         echo \"{EXIT_MARKER} $?\"\n\
         poweroff -f\n",
        init_start(modules),
        port = crate::bench::http::GUEST_PORT
    )
}

/// The initramfs: busybox with its applet links, `/init`, `/bench-linux`,
/// and the kernel `modules` (name, contents; in load order) in
/// `/lib/modules/`. With `www` (a cpio archive of static files) it is the
/// HTTP guest's: [`http_init_script`], `/udhcpc.sh` and `/www.cpio`.
pub fn initramfs(
    busybox: &[u8],
    bench_linux: &[u8],
    names: &[String],
    modules: &[(String, Vec<u8>)],
    www: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let mut a = Archive::new();
    for dir in ["bin", "dev", "proc", "sys", "lib", "lib/modules"] {
        a.dir(dir, 0o755)?;
    }
    for (name, bytes) in modules {
        a.file(&format!("lib/modules/{name}.ko"), 0o644, bytes)?;
    }
    let module_names: Vec<&str> = modules.iter().map(|(n, _)| n.as_str()).collect();
    // The kernel opens /dev/console for /init's standard streams before
    // devtmpfs is mounted.
    a.char_device("dev/console", 0o600, 5, 1)?;
    a.file("bin/busybox", 0o755, busybox)?;
    for applet in APPLETS {
        a.symlink(&format!("bin/{applet}"), "busybox")?;
    }
    match www {
        None => a.file("init", 0o755, init_script(names, &module_names).as_bytes())?,
        Some(www) => {
            a.file("init", 0o755, http_init_script(&module_names).as_bytes())?;
            a.file("udhcpc.sh", 0o755, UDHCPC_SCRIPT.as_bytes())?;
            a.file("www.cpio", 0o644, www)?;
        }
    }
    a.file("bench-linux", 0o755, bench_linux)?;
    Ok(a.finish())
}

/// Where the serial log of the last boot is written.
pub fn log_path(root: &Path) -> PathBuf {
    root.join("target").join("bench").join("linux-serial.log")
}

static EXIT_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?m)^{} (\d+)\s*$", regex::escape(EXIT_MARKER))).expect("valid regex")
});

/// `bench-linux`'s exit status as `/init` reported it, if it did.
fn exit_status(serial: &str) -> Option<i32> {
    EXIT_LINE.captures(serial).and_then(|c| c[1].parse().ok())
}

impl LinuxGuest {
    /// The machine: Pecan's configuration with the Linux kernel and
    /// initramfs.
    pub fn machine(&self, memory_mib: u32, accel: Accel) -> Machine {
        let mut m = Machine::new(
            self.vmlinuz.clone(),
            Some(self.initramfs.clone()),
            CMDLINE.to_string(),
            accel,
        );
        m.memory_mib = memory_mib;
        m.icount = self.icount && accel == Accel::Tcg;
        m
    }

    /// Boots the guest, waits for it to power off (at most `timeout`) and
    /// writes the log (QEMU command line, serial output, QEMU's stderr) to
    /// `log_path`. An error — no exit report, a non-zero exit of
    /// `bench-linux`, the timeout — names the log.
    pub fn run(
        &self,
        memory_mib: u32,
        accel: Accel,
        timeout: Duration,
        log_path: &Path,
    ) -> Result<LinuxRun> {
        let mut machine = self.machine(memory_mib, accel);
        // The devices (and the host peer, which runs while this lives).
        let mut _attached = None;
        if needs_disk(&self.names) || needs_net(&self.names) {
            let work = workspace_root()
                .join("target")
                .join("bench")
                .join("work")
                .join("linux");
            let _ = std::fs::remove_dir_all(&work);
            let mut devices = Devices::default();
            if needs_disk(&self.names) {
                // vda: the scratch disk; vdb: the card (its third
                // partition is the file benchmarks' vfat volume, as
                // Pecan's fat-bench uses it).
                devices.disks = vec![
                    Disk {
                        name: "bench".into(),
                        source: DiskSource::Blank { size_mib: DISK_MIB },
                    },
                    Disk {
                        name: "card".into(),
                        source: DiskSource::Built(crate::gendisk::Recipe::CardMbr),
                    },
                ];
            }
            if needs_net(&self.names) {
                // eth0: joined to the host peer (crate::netpeer), as
                // Pecan's net-bench NIC.
                devices.nics = vec![Nic {
                    name: "link".into(),
                    forward: Vec::new(),
                    link: Link::Peer,
                }];
            }
            let mut attached = devices.prepare(&work)?;
            if machine.icount {
                attached.pace_disks(crate::devices::BENCH_DISK_IOPS);
            }
            machine.devices = attached.qemu_args();
            _attached = Some(attached);
        }
        println!(
            "==> booting {} with {} benchmarks: {}",
            self.versions.kernel_description(),
            if self.names.is_empty() {
                "all".to_string()
            } else {
                self.names.len().to_string()
            },
            machine.command_line()
        );
        let captured =
            qemu::capture(&machine, timeout).with_context(|| format!("starting {}", qemu::QEMU))?;
        // The guest's terminal ends lines with CR LF.
        let serial = captured.serial.replace("\r\n", "\n");
        let mut log = format!("$ {}\n{serial}", machine.command_line());
        if !captured.stderr.is_empty() {
            log.push_str(&format!("\n--- QEMU stderr ---\n{}", captured.stderr));
        }
        crate::util::write_atomically(log_path, log.as_bytes())?;
        let shown = display_path(log_path);
        if captured.exit.is_none() {
            bail!(
                "the Linux guest did not finish within {} s; serial log: {shown}",
                timeout.as_secs()
            );
        }
        match exit_status(&serial) {
            Some(0) => {}
            Some(n) => {
                bail!("bench-linux exited with status {n} in the Linux guest; serial log: {shown}")
            }
            None => bail!(
                "the Linux guest stopped before bench-linux finished (QEMU: {}); \
                 serial log: {shown}",
                captured.stderr.lines().last().unwrap_or("no message")
            ),
        }
        println!(
            "==> Linux guest done in {:.1} s; serial log: {shown}",
            captured.duration.as_secs_f64()
        );
        Ok(LinuxRun {
            serial,
            log_path: log_path.to_path_buf(),
            kernel_version: self.versions.kernel_description(),
            versions: self.versions.clone(),
            duration: captured.duration,
        })
    }
}

/// The HTTP benchmarks `names` (`bench::httpload`, Linux's) in one boot
/// of the HTTP guest (see the module doc, "HTTP"): the results, measured
/// by the host, and the kernel's description. The log goes to `log`.
pub fn run_http(
    names: &[&str],
    memory_mib: u32,
    accel: Accel,
    log: &Path,
) -> Result<(Vec<crate::bench::results::BenchResult>, String)> {
    let root = workspace_root();
    let files = guest_files(&root)?;
    // The static files of Pecan's HTTP scenario, packed as its ROM module.
    let www = crate::scenario::Archive {
        name: "www".into(),
        dir: root.join("scenarios").join("www"),
    }
    .pack()?;
    let image = initramfs(
        &files.busybox,
        &files.bench,
        &[],
        &files.modules,
        Some(&www),
    )?;
    let pieces = files.pieces;
    let path = debian::cache_dir(&root).join("initramfs-http.cpio");
    crate::util::write_atomically(&path, &image)?;
    let guest = LinuxGuest {
        vmlinuz: pieces.vmlinuz,
        initramfs: path,
        versions: pieces.versions,
        names: Vec::new(),
        icount: false,
    };
    let mut machine = guest.machine(memory_mib, accel);
    let work = root
        .join("target")
        .join("bench")
        .join("work")
        .join("linux-http");
    let _ = std::fs::remove_dir_all(&work);
    let devices = Devices {
        nics: vec![Nic {
            name: "net0".into(),
            forward: vec![crate::bench::http::GUEST_PORT],
            link: Link::User,
        }],
        ..Devices::default()
    };
    let mut attached = devices.prepare(&work)?;
    machine.devices = attached.qemu_args();
    println!(
        "==> booting {} serving HTTP: {}",
        guest.versions.kernel_description(),
        machine.command_line()
    );
    let results = crate::bench::http::measure(
        &machine,
        &mut attached,
        "net0",
        names,
        crate::bench::http::LINUX_SERVER,
        log,
    )?;
    Ok((results, guest.versions.kernel_description()))
}

/// The options of `cargo xtask bench-linux`.
#[derive(Debug, clap::Args)]
pub struct BenchLinuxArgs {
    /// Linux benchmarks to run (default: all).
    pub names: Vec<String>,
    /// Guest memory in MiB.
    #[arg(long, value_name = "MIB", default_value_t = qemu::DEFAULT_MEMORY_MIB,
          value_parser = clap::value_parser!(u32).range(64..))]
    pub memory: u32,
    /// Stop the guest after SECS seconds.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    pub timeout: u64,
}

/// `cargo xtask bench-linux`: runs the Linux side alone and prints its
/// `BENCH` lines.
pub fn bench_linux_command(args: &BenchLinuxArgs) -> Result<bool> {
    setup::ensure_qemu()?;
    let run = run_linux_benchmarks(&args.names, args.memory, Duration::from_secs(args.timeout))?;
    for line in run.serial.lines().filter(|l| l.starts_with("BENCH ")) {
        println!("{line}");
    }
    println!(
        "==> {}, busybox {}: {:.1} s; serial log: {}",
        run.kernel_version,
        run.versions.busybox_version,
        run.duration.as_secs_f64(),
        display_path(&run.log_path)
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_against_the_catalog() {
        assert!(check_names(&[]).is_ok());
        assert!(check_names(&["getppid".into(), "ring-10".into()]).is_ok());
        let e = check_names(&["null-syscall".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown Linux benchmark null-syscall"), "{e}");
        assert!(e.contains("getppid futex-threads-0w"), "{e}");
        let e = check_names(&["http-rps-4-linux".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cargo xtask bench http-rps-4-linux"), "{e}");
    }

    #[test]
    fn init_runs_the_named_benchmarks_then_powers_off() {
        let s = init_script(&["getppid".into(), "pipe-0w".into()], &["fat", "vfat"]);
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("\n/bench-linux getppid pipe-0w\necho \"bench-linux-init: exit $?\"\n"));
        assert!(s.ends_with("poweroff -f\n"));
        assert!(init_script(&[], &[]).contains("\n/bench-linux\n"));
        let fat = s.find("insmod /lib/modules/fat.ko ||").unwrap();
        let vfat = s.find("insmod /lib/modules/vfat.ko ||").unwrap();
        assert!(fat < vfat && vfat < s.find("/bench-linux").unwrap(), "{s}");
    }

    #[test]
    fn initramfs_has_everything_init_needs() {
        let image = initramfs(
            b"BUSYBOX",
            b"BENCH",
            &[],
            &[("fat".into(), b"KO".to_vec())],
            None,
        )
        .unwrap();
        let text = String::from_utf8_lossy(&image);
        for name in [
            "bin/busybox",
            "init",
            "bench-linux",
            "dev/console",
            "bin/sh",
            "bin/poweroff",
            "bin/insmod",
            "lib/modules/fat.ko",
        ] {
            assert!(text.contains(&format!("{name}\0")), "{name}");
        }
        // Every applet the script calls has its link.
        let script = init_script(&[], &["fat"]);
        for word in ["mount", "uname", "cat", "poweroff", "insmod", "ifconfig"] {
            assert!(script.contains(word) && APPLETS.contains(&word), "{word}");
        }
    }

    #[test]
    fn disk_only_for_disk_benchmarks() {
        for name in DISK_BENCHMARKS {
            assert!(catalog::find(Platform::Linux, name).is_some(), "{name}");
        }
        assert!(needs_disk(&[]));
        assert!(needs_disk(&["getppid".into(), "blk-read-64k-linux".into()]));
        assert!(!needs_disk(&["getppid".into()]));
    }

    #[test]
    fn exit_marker() {
        assert_eq!(exit_status("x\nbench-linux-init: exit 0\n"), Some(0));
        assert_eq!(exit_status("bench-linux-init: exit 2"), Some(2));
        assert_eq!(exit_status("bench-linux-init: kernel 6.1\n"), None);
    }

    #[test]
    fn static_check_reads_program_headers() {
        assert!(needs_interpreter(b"not an elf").is_err());
        // A minimal ELF64 header with one PT_INTERP program header.
        let mut elf = vec![0u8; 64 + 56];
        elf[..5].copy_from_slice(b"\x7fELF\x02");
        elf[18] = 62;
        elf[32] = 64; // e_phoff
        elf[54] = 56; // e_phentsize
        elf[56] = 1; // e_phnum
        elf[64] = 3; // p_type = PT_INTERP
        assert!(needs_interpreter(&elf).unwrap());
        elf[64] = 1; // PT_LOAD
        assert!(!needs_interpreter(&elf).unwrap());
        // The test binary itself is an ELF64 x86-64 file.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(needs_interpreter(&me).is_ok());
    }
}
