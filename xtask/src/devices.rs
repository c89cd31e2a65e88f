//! The machine's devices a scenario names (docs/scenarios.md, "Devices"):
//! virtio-blk disks, virtio-net NICs on QEMU's user network and a display
//! device, and what each run of the scenario attaches for them.
//!
//! ```toml
//! [[disk]]                      # a virtio-blk-pci disk
//! name = "data"                 # 1..=32 of [a-z0-9_-], unique among disks
//! size_mib = 64                 # a blank (zeroed) raw image of this size, or
//! image = "disks/data.img"      # a copy of this raw image (relative to the repository), or
//! build = "card-mbr"            # a copy of an image xtask generates (crate::gendisk)
//! [[nic]]                       # a virtio-net-pci NIC, user network, restrict=on
//! name = "net0"
//! forward = [{ guest = 80 }]    # TCP host 127.0.0.1:<free port> -> guest port 80
//! [[nic]]                       # a virtio-net-pci NIC joined to the host peer
//! name = "link"
//! link = "peer"                 # "user" (the default) or "peer"
//! display = "virtio-gpu"        # or "std" (VGA) or "bochs" (bochs-display)
//! pointer = "virtio-tablet"     # a virtio-tablet-pci (absolute pointer)
//! ```
//!
//! Every run gets fresh copies of the disks in its work directory (QEMU
//! locks an image, tests run in parallel, and a run must not change the
//! next one's disk), and QEMU picks each forwarded host port itself
//! (`hostfwd=tcp:127.0.0.1:0-:PORT`): the ports are read back from the
//! monitor (`info usernet`, [`parse_usernet`]) once QEMU runs, so two runs
//! can never be given the same port. A NIC of `link = "peer"` is joined
//! through QEMU's socket backend (`-netdev socket,connect=127.0.0.1:PORT`)
//! to a host peer (`crate::netpeer`) that [`Devices::prepare`] starts
//! before QEMU, on free ports of 127.0.0.1 (the link's and one for host
//! commands, `{peer.NIC}` in a test's commands). Traffic stays on the host loopback:
//! forwards bind 127.0.0.1 only and the user network is `restrict=on` (the
//! guest reaches neither the host nor the outside world).
//!
//! On the command line the devices come in file order — disks, then NICs,
//! then the display, then the pointer — after `-vga none -nic none` (no default VGA or
//! e1000e), so their PCI addresses are fixed: on q35 the first device is
//! 00:01.0, the next 00:02.0, and so on.

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use toml::Spanned;

use crate::gendisk::Recipe;
use crate::util::display_path;

/// The most disks a scenario may name.
pub const MAX_DISKS: usize = 8;
/// The most NICs a scenario may name.
pub const MAX_NICS: usize = 4;
/// The environment variable naming a directory where every NIC's frames
/// are written as `NAME.pcap` (QEMU's `filter-dump`), for looking at a
/// run's traffic with any pcap reader (`NAME.N.pcap`, N counting the
/// NICs captured by this xtask from 0, so the boots of a benchmark's
/// pairs each get their own); unset or empty: no capture.
pub const PCAP_DIR_VAR: &str = "PECAN_PCAP_DIR";
static PCAP_BOOTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// The largest blank disk, in MiB (64 GiB; the file is sparse).
pub const MAX_DISK_MIB: u64 = 65536;
/// The longest disk or NIC name.
pub const MAX_NAME_LEN: usize = 32;
/// The pace of the benchmark lab's disks under icount, requests per second
/// of host time ([`Attached::pace_disks`]).
pub const BENCH_DISK_IOPS: u32 = 2000;

/// A `[[disk]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDisk {
    name: Spanned<String>,
    size_mib: Option<Spanned<u64>>,
    image: Option<Spanned<String>>,
    build: Option<Spanned<String>>,
}

/// A `[[nic]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNic {
    name: Spanned<String>,
    #[serde(default)]
    forward: Vec<Spanned<RawForward>>,
    link: Option<Spanned<String>>,
}

/// One entry of a NIC's `forward` list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawForward {
    guest: Spanned<u16>,
}

/// Where a disk's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskSource {
    /// A zeroed raw image of this many MiB.
    Blank { size_mib: u64 },
    /// A copy of this raw image file.
    Image(PathBuf),
    /// A copy of the image this recipe generates (built once, kept in
    /// `target/pecan/disks/`).
    Built(Recipe),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    pub name: String,
    pub source: DiskSource,
}

/// What a NIC's other end is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Link {
    /// QEMU's user network with `restrict=on`.
    #[default]
    User,
    /// The host peer (`crate::netpeer`) through QEMU's socket backend.
    Peer,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    pub name: String,
    /// The guest's TCP ports forwarded from the host loopback.
    pub forward: Vec<u16>,
    pub link: Link,
}

/// The display device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    VirtioGpu,
    Std,
    Bochs,
}

impl Display {
    /// The scenario's names and the QEMU devices they stand for.
    const ALL: [(&'static str, Display, &'static str); 3] = [
        ("virtio-gpu", Display::VirtioGpu, "virtio-gpu-pci"),
        ("std", Display::Std, "VGA"),
        ("bochs", Display::Bochs, "bochs-display"),
    ];

    fn qemu_device(self) -> &'static str {
        Display::ALL
            .iter()
            .find(|(_, d, _)| *d == self)
            .map_or("VGA", |(_, _, q)| q)
    }
}

/// The pointing device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pointer {
    VirtioTablet,
}

impl Pointer {
    /// The scenario's names and the QEMU devices they stand for.
    const ALL: [(&'static str, Pointer, &'static str); 1] =
        [("virtio-tablet", Pointer::VirtioTablet, "virtio-tablet-pci")];

    fn qemu_device(self) -> &'static str {
        Pointer::ALL
            .iter()
            .find(|(_, p, _)| *p == self)
            .map_or("virtio-tablet-pci", |(_, _, q)| q)
    }
}

/// The checked devices of a scenario, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Devices {
    pub disks: Vec<Disk>,
    pub nics: Vec<Nic>,
    pub display: Option<Display>,
    pub pointer: Option<Pointer>,
}

/// A device error: where in the file, and what.
pub type Fault = (Range<usize>, String);

/// Whether `name` is 1..=32 of `[a-z0-9_-]`.
fn good_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Checks entry `i` of a kind of device (`kind`: its name in messages,
/// singular and plural) whose table is at `span`, given every entry's
/// name: not beyond `max`, a good name, not the name of an earlier one.
fn check_entry(
    (kind, kinds): (&str, &str),
    max: usize,
    span: Range<usize>,
    names: &[&Spanned<String>],
    i: usize,
    line_of: impl Fn(usize) -> usize,
) -> std::result::Result<(), Fault> {
    let name = names[i];
    let who = format!("{} \"{}\"", kind.to_lowercase(), name.get_ref());
    if i == max {
        return Err((span, format!("{who}: a scenario has at most {max} {kinds}")));
    }
    if !good_name(name.get_ref()) {
        return Err((
            name.span(),
            format!("{who}: name: must be 1 to {MAX_NAME_LEN} of a-z, 0-9, '_' and '-'"),
        ));
    }
    match names[..i].iter().find(|n| n.get_ref() == name.get_ref()) {
        Some(other) => Err((
            name.span(),
            format!(
                "{who}: name: the {kind} at line {} has this name too",
                line_of(other.span().start)
            ),
        )),
        None => Ok(()),
    }
}

/// Checks the device tables of a scenario; `root` is the repository that
/// disk images are relative to and `line_of` turns a byte offset into a
/// line number (for "the disk at line N"). The first error only.
pub fn check(
    disks: &[Spanned<RawDisk>],
    nics: &[Spanned<RawNic>],
    display: Option<&Spanned<String>>,
    pointer: Option<&Spanned<String>>,
    root: &Path,
    line_of: impl Fn(usize) -> usize,
) -> std::result::Result<Devices, Fault> {
    let mut devices = Devices::default();
    let disk_names: Vec<&Spanned<String>> = disks.iter().map(|d| &d.get_ref().name).collect();
    for (i, table) in disks.iter().enumerate() {
        let raw = table.get_ref();
        let name = raw.name.get_ref();
        let who = format!("disk \"{name}\"");
        check_entry(
            ("disk", "disks"),
            MAX_DISKS,
            table.span(),
            &disk_names,
            i,
            &line_of,
        )?;
        // Exactly one source: the second one given is the error.
        let given: Vec<(&str, Range<usize>)> = [
            raw.size_mib.as_ref().map(|v| ("size_mib", v.span())),
            raw.image.as_ref().map(|v| ("image", v.span())),
            raw.build.as_ref().map(|v| ("build", v.span())),
        ]
        .into_iter()
        .flatten()
        .collect();
        if given.len() > 1 {
            let (first, _) = &given[0];
            let (second, span) = &given[1];
            let message = if raw.build.is_none() {
                format!(
                    "{who}: size_mib and image: give one of them (a blank disk of size_mib MiB, \
                     or a copy of the image file)"
                )
            } else {
                format!(
                    "{who}: {first} and {second}: give one of size_mib (a blank disk), image (a \
                     copy of an image file) and build (a generated image)"
                )
            };
            return Err((span.clone(), message));
        }
        let source = match (&raw.size_mib, &raw.image, &raw.build) {
            (Some(size), _, _) => {
                let mib = *size.get_ref();
                if !(1..=MAX_DISK_MIB).contains(&mib) {
                    return Err((
                        size.span(),
                        format!("{who}: size_mib: {mib} is not from 1 to {MAX_DISK_MIB}"),
                    ));
                }
                DiskSource::Blank { size_mib: mib }
            }
            (None, Some(image), _) => {
                let path = root.join(image.get_ref());
                if image.get_ref().is_empty() || !path.is_file() {
                    return Err((
                        image.span(),
                        format!(
                            "{who}: image: no file {} (a raw disk image, relative to the \
                             repository)",
                            display_path(&path)
                        ),
                    ));
                }
                DiskSource::Image(path)
            }
            (None, None, Some(build)) => match Recipe::from_name(build.get_ref()) {
                Some(recipe) => DiskSource::Built(recipe),
                None => {
                    let names: Vec<String> = Recipe::ALL
                        .iter()
                        .map(|(n, _)| format!("\"{n}\""))
                        .collect();
                    return Err((
                        build.span(),
                        format!(
                            "{who}: build: unknown recipe \"{}\" (expected {})",
                            build.get_ref(),
                            match names.split_last() {
                                Some((last, [])) => last.clone(),
                                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                                None => String::new(),
                            }
                        ),
                    ));
                }
            },
            (None, None, None) => {
                return Err((
                    table.span(),
                    format!(
                        "{who}: needs size_mib (a blank disk of that many MiB), image (a copy \
                         of that raw image file) or build (a generated image: \"card-mbr\" or \
                         \"card-gpt\")"
                    ),
                ))
            }
        };
        devices.disks.push(Disk {
            name: name.clone(),
            source,
        });
    }
    let nic_names: Vec<&Spanned<String>> = nics.iter().map(|n| &n.get_ref().name).collect();
    for (i, table) in nics.iter().enumerate() {
        let raw = table.get_ref();
        let name = raw.name.get_ref();
        let who = format!("nic \"{name}\"");
        check_entry(
            ("NIC", "NICs"),
            MAX_NICS,
            table.span(),
            &nic_names,
            i,
            &line_of,
        )?;
        let mut forward: Vec<u16> = Vec::new();
        for (j, f) in raw.forward.iter().enumerate() {
            let port = *f.get_ref().guest.get_ref();
            let span = f.get_ref().guest.span();
            if port == 0 {
                return Err((
                    span,
                    format!("{who}: forward[{j}].guest: 0 is not a TCP port (1 to 65535)"),
                ));
            }
            if forward.contains(&port) {
                return Err((
                    span,
                    format!("{who}: forward[{j}].guest: port {port} is forwarded twice"),
                ));
            }
            forward.push(port);
        }
        let link = match raw.link.as_ref().map(|l| (l.get_ref().as_str(), l.span())) {
            None | Some(("user", _)) => Link::User,
            Some(("peer", span)) => {
                if !forward.is_empty() {
                    return Err((
                        span,
                        format!(
                            "{who}: link: a peer link forwards no ports (forward is for the \
                             user network)"
                        ),
                    ));
                }
                Link::Peer
            }
            Some((other, span)) => {
                return Err((
                    span,
                    format!("{who}: link: unknown \"{other}\" (expected \"user\" or \"peer\")"),
                ))
            }
        };
        devices.nics.push(Nic {
            name: name.clone(),
            forward,
            link,
        });
    }
    devices.display = one_of(
        "display",
        display,
        &Display::ALL,
        "\"virtio-gpu\", \"std\" or \"bochs\"",
    )?;
    devices.pointer = one_of("pointer", pointer, &Pointer::ALL, "\"virtio-tablet\"")?;
    Ok(devices)
}

/// The device a top-level key (`key`, absent: none) names among `all`
/// (its names, devices and QEMU devices); `expected` lists the names for
/// the error.
fn one_of<T: Copy>(
    key: &str,
    value: Option<&Spanned<String>>,
    all: &[(&str, T, &str)],
    expected: &str,
) -> std::result::Result<Option<T>, Fault> {
    let Some(value) = value else {
        return Ok(None);
    };
    match all.iter().find(|(n, _, _)| n == value.get_ref()) {
        Some((_, d, _)) => Ok(Some(*d)),
        None => Err((
            value.span(),
            format!(
                "{key}: unknown \"{}\" (expected {expected})",
                value.get_ref()
            ),
        )),
    }
}

impl Devices {
    pub fn is_empty(&self) -> bool {
        self.disks.is_empty()
            && self.nics.is_empty()
            && self.display.is_none()
            && self.pointer.is_none()
    }

    /// Whether QEMU must be asked for the forwarded ports.
    pub fn forwards(&self) -> bool {
        self.nics.iter().any(|n| !n.forward.is_empty())
    }

    /// Makes this run's copies of the disks in `work_dir` (created if
    /// missing): a sparse zeroed file of `size_mib`, or a copy of the image
    /// (a generated one built first when missing or stale).
    pub fn prepare(&self, work_dir: &Path) -> Result<Attached> {
        std::fs::create_dir_all(work_dir)
            .with_context(|| format!("creating {}", display_path(work_dir)))?;
        let (mut disks, mut sources) = (Vec::new(), Vec::new());
        for disk in &self.disks {
            let path = work_dir.join(format!("disk-{}.img", disk.name));
            let _ = std::fs::remove_file(&path);
            let image = match &disk.source {
                DiskSource::Blank { size_mib } => {
                    std::fs::File::create(&path)
                        .and_then(|f| f.set_len(size_mib * 1024 * 1024))
                        .with_context(|| {
                            format!("making the blank disk {}", display_path(&path))
                        })?;
                    None
                }
                DiskSource::Image(image) => Some(image.clone()),
                DiskSource::Built(recipe) => Some(crate::gendisk::ensure(*recipe)?),
            };
            if let Some(image) = image {
                std::fs::copy(&image, &path).with_context(|| {
                    format!(
                        "copying disk image {} to {}",
                        display_path(&image),
                        display_path(&path)
                    )
                })?;
                sources.push((disk.name.clone(), image));
            }
            disks.push((disk.name.clone(), path));
        }
        let mut peers = Vec::new();
        for nic in self.nics.iter().filter(|n| n.link == Link::Peer) {
            let peer = crate::netpeer::start(&nic.name)
                .with_context(|| format!("starting the peer of NIC {}", nic.name))?;
            peers.push((nic.name.clone(), peer));
        }
        Ok(Attached {
            devices: self.clone(),
            disks,
            sources,
            ports: Vec::new(),
            disk_iops: None,
            peers,
        })
    }
}

/// One run's devices: the disk copies and, once QEMU runs, the host ports
/// of the forwards.
#[derive(Debug, Clone, Default)]
pub struct Attached {
    pub devices: Devices,
    /// (disk name, path of this run's copy), in file order.
    pub disks: Vec<(String, PathBuf)>,
    /// (disk name, the image its copy was made from), for disks that have
    /// one (a named or built image; a blank disk has none).
    pub sources: Vec<(String, PathBuf)>,
    /// (NIC name, guest port, host port), once known ([`parse_usernet`]).
    pub ports: Vec<(String, u16, u16)>,
    /// QEMU's throttling of every disk, requests per second of host time
    /// ([`Attached::pace_disks`]); `None`: as fast as the host goes.
    pub disk_iops: Option<u32>,
    /// (NIC name, its running peer) for each NIC of `link = "peer"`; the
    /// peers stop when the last copy of this is dropped.
    pub peers: Vec<(String, std::sync::Arc<crate::netpeer::Running>)>,
}

/// `text` with every comma doubled: QEMU's escape inside an option value.
fn qemu_escape(text: &str) -> String {
    text.replace(',', ",,")
}

impl Attached {
    /// Paces every disk at `iops` requests per second of host time
    /// (`throttling.iops-total`; after a burst of a tenth of that, QEMU's
    /// default), so that a request always completes well after the guest
    /// has gone to sleep waiting for it — as on hardware, where a disk
    /// takes tens of microseconds and the submission path one or two.
    /// Without it, under icount a completion from QEMU's host thread can
    /// beat the emulated CPU to the sleep, and the guest's path (and its
    /// instruction count) depends on the host's speed: the benchmark lab
    /// uses it for its CPU-cost runs (`bench::soak`), never for
    /// throughput.
    pub fn pace_disks(&mut self, iops: u32) {
        self.disk_iops = Some(iops);
    }

    /// QEMU's arguments for the devices: none without devices; else
    /// `-vga none -nic none` and each device in file order.
    pub fn qemu_args(&self) -> Vec<String> {
        let d = &self.devices;
        if d.is_empty() {
            return Vec::new();
        }
        let mut args: Vec<String> = ["-vga", "none", "-nic", "none"].map(String::from).into();
        for (name, path) in &self.disks {
            args.push("-drive".into());
            let mut drive = format!(
                "if=none,id=drive.{name},format=raw,file={}",
                qemu_escape(&path.to_string_lossy())
            );
            if let Some(iops) = self.disk_iops {
                drive.push_str(&format!(",throttling.iops-total={iops}"));
            }
            args.push(drive);
            args.push("-device".into());
            args.push(format!(
                "virtio-blk-pci,drive=drive.{name},id=disk.{name},disable-legacy=on"
            ));
        }
        for nic in &d.nics {
            let mut netdev = match self.peer(&nic.name) {
                Some(peer) => format!(
                    "socket,id=netdev.{},connect=127.0.0.1:{}",
                    nic.name, peer.link_port
                ),
                None => format!("user,id=netdev.{},restrict=on", nic.name),
            };
            for port in &nic.forward {
                netdev.push_str(&format!(",hostfwd=tcp:127.0.0.1:0-:{port}"));
            }
            args.push("-netdev".into());
            args.push(netdev);
            if let Some(dir) = std::env::var_os(PCAP_DIR_VAR).filter(|d| !d.is_empty()) {
                // A debugging aid: every frame of this NIC, both ways, as
                // QEMU sees it (docs/network.md, "Looking at the wire").
                let boot = PCAP_BOOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let file = std::path::Path::new(&dir).join(format!("{}.{boot}.pcap", nic.name));
                args.push("-object".into());
                args.push(format!(
                    "filter-dump,id=dump.{},netdev=netdev.{},file={}",
                    nic.name,
                    nic.name,
                    qemu_escape(&file.to_string_lossy())
                ));
            }
            args.push("-device".into());
            args.push(format!(
                "virtio-net-pci,netdev=netdev.{0},id=nic.{0},disable-legacy=on",
                nic.name
            ));
        }
        if let Some(display) = d.display {
            args.push("-device".into());
            args.push(format!("{},id=display", display.qemu_device()));
        }
        if let Some(pointer) = d.pointer {
            args.push("-device".into());
            args.push(format!("{},id=pointer", pointer.qemu_device()));
        }
        args
    }

    /// Learns the host ports from QEMU's `info usernet` output; every
    /// forward must be there.
    pub fn learn_ports(&mut self, usernet: &str) -> Result<()> {
        let found = parse_usernet(usernet);
        self.ports.clear();
        for nic in &self.devices.nics {
            for &guest in &nic.forward {
                let Some((_, _, host)) = found
                    .iter()
                    .find(|(n, g, _)| *n == format!("netdev.{}", nic.name) && *g == guest)
                else {
                    bail!(
                        "QEMU's `info usernet` shows no forward to guest port {guest} of NIC \
                         {}:\n{usernet}",
                        nic.name
                    );
                };
                self.ports.push((nic.name.clone(), guest, *host));
            }
        }
        Ok(())
    }

    /// The host port forwarded to `guest` of NIC `nic`, once known.
    pub fn port(&self, nic: &str, guest: u16) -> Option<u16> {
        self.ports
            .iter()
            .find(|(n, g, _)| n == nic && *g == guest)
            .map(|(_, _, h)| *h)
    }

    /// The running peer of NIC `name` (a `link = "peer"` NIC, once prepared).
    pub fn peer(&self, name: &str) -> Option<&crate::netpeer::Running> {
        self.peers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.as_ref())
    }

    /// The path of this run's copy of disk `name`.
    pub fn disk(&self, name: &str) -> Option<&Path> {
        self.disks
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.as_path())
    }

    /// The image disk `name`'s copy was made from, if it has one.
    pub fn source(&self, name: &str) -> Option<&Path> {
        self.sources
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.as_path())
    }

    /// One line per forward, as `cargo xtask run` prints them:
    /// `xtask: net0: host 127.0.0.1:PORT -> guest 80`.
    pub fn port_lines(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|(nic, guest, host)| {
                format!("xtask: {nic}: host 127.0.0.1:{host} -> guest {guest}")
            })
            .collect()
    }
}

/// The TCP host forwards in QEMU 7.2's `info usernet` output, as (netdev
/// id, guest port, host port):
///
/// ```text
/// Hub -1 (netdev.net0):
///   Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ
///   TCP[HOST_FORWARD]   8       127.0.0.1 43837       10.0.2.15    80     0     0
/// ```
pub fn parse_usernet(text: &str) -> Vec<(String, u16, u16)> {
    let mut netdev = String::new();
    let mut found = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"Hub") {
            if let Some(id) = words.last().and_then(|w| w.strip_prefix('(')) {
                netdev = id.trim_end_matches(':').trim_end_matches(')').to_string();
            }
        } else if words.first() == Some(&"TCP[HOST_FORWARD]") && words.len() >= 6 {
            if let (Ok(host), Ok(guest)) = (words[3].parse(), words[5].parse()) {
                found.push((netdev.clone(), guest, host));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(good_name("data"));
        assert!(good_name("d_0-x"));
        assert!(good_name(&"a".repeat(32)));
        assert!(!good_name(&"a".repeat(33)));
        assert!(!good_name(""));
        assert!(!good_name("Data"));
        assert!(!good_name("d.0"));
        assert!(!good_name("d 0"));
    }

    #[test]
    fn usernet() {
        let text = "Hub -1 (netdev.net0):\n  Protocol[State]    FD  Source Address  Port   \
                    Dest. Address  Port RecvQ SendQ\n  TCP[HOST_FORWARD]   8       127.0.0.1 \
                    43837       10.0.2.15    80     0     0\n  TCP[HOST_FORWARD]   3       \
                    127.0.0.1 41203       10.0.2.15    22     0     0\nHub -1 (netdev.b):\n  \
                    TCP[HOST_FORWARD]   9       127.0.0.1 5000       10.0.2.15    80     0     0\n";
        assert_eq!(
            parse_usernet(text),
            [
                ("netdev.net0".to_string(), 80, 43837),
                ("netdev.net0".to_string(), 22, 41203),
                ("netdev.b".to_string(), 80, 5000)
            ]
        );
        let mut attached = Attached {
            devices: Devices {
                nics: vec![
                    Nic {
                        name: "net0".into(),
                        forward: vec![22, 80],
                        link: Link::User,
                    },
                    Nic {
                        name: "b".into(),
                        forward: vec![80],
                        link: Link::User,
                    },
                ],
                ..Devices::default()
            },
            ..Attached::default()
        };
        attached.learn_ports(text).unwrap();
        assert_eq!(attached.port("net0", 80), Some(43837));
        assert_eq!(attached.port("b", 80), Some(5000));
        assert_eq!(attached.port("b", 22), None);
        assert_eq!(
            attached.port_lines()[0],
            "xtask: net0: host 127.0.0.1:41203 -> guest 22"
        );
        attached.devices.nics[1].forward.push(8080);
        let e = attached.learn_ports(text).unwrap_err().to_string();
        assert!(e.contains("no forward to guest port 8080 of NIC b"), "{e}");
    }

    #[test]
    fn command_line_in_file_order() {
        let dir = crate::util::temp_dir("devices");
        let devices = Devices {
            disks: vec![
                Disk {
                    name: "a".into(),
                    source: DiskSource::Blank { size_mib: 1 },
                },
                Disk {
                    name: "b".into(),
                    source: DiskSource::Blank { size_mib: 2 },
                },
            ],
            nics: vec![
                Nic {
                    name: "net0".into(),
                    forward: vec![80],
                    link: Link::User,
                },
                Nic {
                    name: "link".into(),
                    forward: vec![],
                    link: Link::Peer,
                },
            ],
            display: Some(Display::Bochs),
            pointer: Some(Pointer::VirtioTablet),
        };
        let attached = devices.prepare(&dir).unwrap();
        // Fresh, zeroed and of the size asked for.
        let b = std::fs::metadata(dir.join("disk-b.img")).unwrap();
        assert_eq!(b.len(), 2 << 20);
        let args = attached.qemu_args().join(" ");
        let a = dir.join("disk-a.img");
        assert_eq!(
            args,
            format!(
                "-vga none -nic none -drive if=none,id=drive.a,format=raw,file={} \
                 -device virtio-blk-pci,drive=drive.a,id=disk.a,disable-legacy=on \
                 -drive if=none,id=drive.b,format=raw,file={} \
                 -device virtio-blk-pci,drive=drive.b,id=disk.b,disable-legacy=on \
                 -netdev user,id=netdev.net0,restrict=on,hostfwd=tcp:127.0.0.1:0-:80 \
                 -device virtio-net-pci,netdev=netdev.net0,id=nic.net0,disable-legacy=on \
                 -netdev socket,id=netdev.link,connect=127.0.0.1:{} \
                 -device virtio-net-pci,netdev=netdev.link,id=nic.link,disable-legacy=on \
                 -device bochs-display,id=display \
                 -device virtio-tablet-pci,id=pointer",
                a.display(),
                dir.join("disk-b.img").display(),
                attached.peer("link").unwrap().link_port
            )
        );
        assert_eq!(attached.disk("a"), Some(a.as_path()));
        // Paced for the lab's CPU-cost runs.
        let mut paced = attached.clone();
        paced.pace_disks(2000);
        let args = paced.qemu_args().join(" ");
        assert!(
            args.contains(&format!(
                "file={},throttling.iops-total=2000 -device virtio-blk-pci,drive=drive.a",
                a.display()
            )),
            "{args}"
        );
        assert!(Devices::default()
            .prepare(&dir)
            .unwrap()
            .qemu_args()
            .is_empty());
        assert_eq!(qemu_escape("/a,b/c"), "/a,,b/c");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
