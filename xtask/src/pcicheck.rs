//! `cargo xtask check-pci SERIAL MONITOR`: does the device list the
//! platform service printed (`platform: 00:02.0 1af4:1042 class ...` and
//! its `bar N: ...` lines, `components/drivers/platform`) match what QEMU
//! itself reports (`info pci` in the monitor transcript)? The same
//! functions, the same IDs, and every BAR where the platform service says
//! it placed it — so the check covers enumeration and BAR placement, seen
//! from the emulator's side. A scenario test runs it as a host command
//! (`tests/platform.toml`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// A BAR: I/O or memory, its address and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    pub io: bool,
    pub address: u64,
    pub size: u64,
}

/// One function: (bus, device, function) → IDs and BARs by index.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Function {
    pub vendor: u16,
    pub device: u16,
    pub bars: BTreeMap<u8, Bar>,
}

pub type Functions = BTreeMap<(u8, u8, u8), Function>;

/// The functions of the first `info pci` answer in a monitor transcript.
/// The expansion ROM (QEMU's "BAR6") is not a BAR the platform places.
pub fn parse_monitor(text: &str) -> Result<Functions> {
    let mut out = Functions::new();
    let mut current: Option<(u8, u8, u8)> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Bus ") {
            // "Bus  0, device   2, function 0:"
            let nums: Vec<u8> = rest
                .trim_end_matches(':')
                .split(',')
                .map(|p| p.split_whitespace().last().unwrap_or("").parse())
                .collect::<Result<_, _>>()
                .with_context(|| format!("bad line {t:?}"))?;
            let [bus, dev, func] = nums[..] else {
                bail!("bad line {t:?}");
            };
            if out.contains_key(&(bus, dev, func)) {
                break; // a second `info pci`: the first one is the list
            }
            current = Some((bus, dev, func));
            out.insert((bus, dev, func), Function::default());
        } else if let (Some(at), Some(ids)) = (current, t.split("PCI device ").nth(1)) {
            let (v, d) = ids.split_once(':').context("PCI device without ':'")?;
            let f = out.get_mut(&at).expect("inserted above");
            f.vendor = u16::from_str_radix(v.trim(), 16)?;
            f.device = u16::from_str_radix(d.trim(), 16)?;
        } else if let (Some(at), Some(rest)) = (current, t.strip_prefix("BAR")) {
            // "BAR4: 64 bit prefetchable memory at 0xc1000000 [0xc1003fff]."
            // "BAR4: I/O at 0xc040 [0xc05f]."
            let (index, desc) = rest.split_once(':').context("BAR without ':'")?;
            let index: u8 = index.parse()?;
            if index >= 6 {
                continue;
            }
            let io = desc.contains("I/O");
            let addr = desc
                .split(" at ")
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .context("BAR without address")?;
            let last = desc
                .split('[')
                .nth(1)
                .and_then(|s| s.split(']').next())
                .context("BAR without end")?;
            let address = hex(addr)?;
            let end = hex(last)?;
            let size = end.wrapping_sub(address).wrapping_add(1);
            out.get_mut(&at)
                .expect("inserted above")
                .bars
                .insert(index, Bar { io, address, size });
        }
    }
    Ok(out)
}

fn hex(text: &str) -> Result<u64> {
    let digits = text.trim().trim_start_matches("0x");
    u64::from_str_radix(digits, 16).with_context(|| format!("not hexadecimal: {text:?}"))
}

/// The functions the platform service listed in the serial log.
pub fn parse_serial(text: &str) -> Result<Functions> {
    let mut out = Functions::new();
    let mut current = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("platform: ") else {
            continue;
        };
        if let Some(bar) = rest.strip_prefix("  bar ") {
            // "  bar 4: memory 0x4000 at 0xc1000000"
            let Some(at) = current else {
                bail!("a BAR line before any function: {line:?}");
            };
            let (index, desc) = bar.split_once(": ").context("BAR line without ': '")?;
            let words: Vec<&str> = desc.split_whitespace().collect();
            let [kind, size, "at", address] = words[..] else {
                bail!("bad BAR line {line:?}");
            };
            let f: &mut Function = out.get_mut(&at).expect("inserted below");
            f.bars.insert(
                index.parse()?,
                Bar {
                    io: kind == "io",
                    address: hex(address)?,
                    size: hex(size)?,
                },
            );
            continue;
        }
        // "00:02.0 1af4:1042 class 01:00:00 ..."
        let mut words = rest.split_whitespace();
        let (Some(bdf), Some(ids)) = (words.next(), words.next()) else {
            continue;
        };
        let parsed = (|| -> Option<((u8, u8, u8), u16, u16)> {
            let (bus, rest) = bdf.split_once(':')?;
            let (dev, func) = rest.split_once('.')?;
            let (v, d) = ids.split_once(':')?;
            Some((
                (
                    u8::from_str_radix(bus, 16).ok()?,
                    u8::from_str_radix(dev, 16).ok()?,
                    u8::from_str_radix(func, 16).ok()?,
                ),
                u16::from_str_radix(v, 16).ok()?,
                u16::from_str_radix(d, 16).ok()?,
            ))
        })();
        if let Some((at, vendor, device)) = parsed.filter(|_| bdf.len() == 7) {
            current = Some(at);
            out.insert(
                at,
                Function {
                    vendor,
                    device,
                    bars: BTreeMap::new(),
                },
            );
        }
    }
    Ok(out)
}

/// The differences between QEMU's list and the platform service's, one
/// line each (empty: they match).
pub fn differences(qemu: &Functions, platform: &Functions) -> Vec<String> {
    let name = |&(b, d, f): &(u8, u8, u8)| format!("{b:02x}:{d:02x}.{f}");
    let mut out = Vec::new();
    for (at, q) in qemu {
        let Some(p) = platform.get(at) else {
            out.push(format!(
                "{}: QEMU has {:04x}:{:04x}, the platform service did not list it",
                name(at),
                q.vendor,
                q.device
            ));
            continue;
        };
        if (q.vendor, q.device) != (p.vendor, p.device) {
            out.push(format!(
                "{}: QEMU says {:04x}:{:04x}, the platform service {:04x}:{:04x}",
                name(at),
                q.vendor,
                q.device,
                p.vendor,
                p.device
            ));
        }
        if q.bars != p.bars {
            out.push(format!(
                "{}: BARs differ: QEMU {:?}, the platform service {:?}",
                name(at),
                q.bars,
                p.bars
            ));
        }
    }
    for (at, p) in platform {
        if !qemu.contains_key(at) {
            out.push(format!(
                "{}: listed by the platform service ({:04x}:{:04x}) but not by QEMU",
                name(at),
                p.vendor,
                p.device
            ));
        }
    }
    out
}

/// The subcommand: compares and reports; an error when they differ.
pub fn run(serial: &Path, monitor: &Path) -> Result<()> {
    let read =
        |p: &Path| std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()));
    let qemu = parse_monitor(&read(monitor)?)?;
    let platform = parse_serial(&read(serial)?)?;
    if qemu.is_empty() {
        bail!(
            "{}: no `info pci` answer in the monitor transcript",
            monitor.display()
        );
    }
    let diff = differences(&qemu, &platform);
    if !diff.is_empty() {
        bail!(
            "the platform service's device list differs from QEMU's:\n{}",
            diff.join("\n")
        );
    }
    let bars: usize = qemu.values().map(|f| f.bars.len()).sum();
    println!(
        "pci: the platform service's list matches QEMU's info pci: {} functions, {bars} BARs at the same addresses",
        qemu.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MONITOR: &str = "(qemu) info pci
  Bus  0, device   1, function 0:
    VGA controller: PCI device 1234:1111
      PCI subsystem 1af4:1100
      BAR0: 32 bit prefetchable memory at 0xc0000000 [0xc0ffffff].
      BAR6: 32 bit memory at 0xffffffffffffffff [0x0000fffe].
      id \"\"
  Bus  0, device  31, function 2:
    SATA controller: PCI device 8086:2922
      BAR4: I/O at 0xc040 [0xc05f].
      id \"\"
(qemu) ";

    const SERIAL: &str = "init: started platform
platform: 00:01.0 1234:1111 class 03:00:00
platform:   bar 0: memory 0x1000000 at 0xc0000000
platform: 00:1f.2 8086:2922 class 01:06:01 msi 1 -> ahci
platform:   bar 4: io 0x20 at 0xc040
platform: 2 PCI functions
platform: session for ahci: 1 devices
";

    #[test]
    fn matching_lists_match() {
        let q = parse_monitor(MONITOR).unwrap();
        let p = parse_serial(SERIAL).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(
            q[&(0, 0x1f, 2)].bars[&4],
            Bar {
                io: true,
                address: 0xc040,
                size: 0x20
            }
        );
        assert_eq!(differences(&q, &p), Vec::<String>::new());
    }

    #[test]
    fn every_difference_is_named() {
        let q = parse_monitor(MONITOR).unwrap();
        let moved = parse_serial(&SERIAL.replace("at 0xc040", "at 0xc060")).unwrap();
        assert!(differences(&q, &moved)[0].starts_with("00:1f.2: BARs differ"));
        let without = SERIAL.replace(
            "platform: 00:01.0 1234:1111 class 03:00:00\nplatform:   bar 0: memory 0x1000000 at 0xc0000000\n",
            "",
        );
        let missing = parse_serial(&without).unwrap();
        let d = differences(&q, &missing);
        assert!(
            d.iter().any(|l| l.contains("00:01.0: QEMU has 1234:1111")),
            "{d:?}"
        );
        let ids = parse_serial(&SERIAL.replace("1234:1111", "1234:2222")).unwrap();
        assert!(differences(&q, &ids)[0].contains("QEMU says 1234:1111"));
        let extra = parse_serial(&format!(
            "{SERIAL}platform: 00:05.0 1af4:1042 class 01:00:00\n"
        ))
        .unwrap();
        assert!(differences(&q, &extra)[0].contains("not by QEMU"));
        // A BAR line of nobody's is a broken log, not a match.
        assert!(parse_serial("platform:   bar 0: memory 0x1000 at 0xc0000000\n").is_err());
    }
}
