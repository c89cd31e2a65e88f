//! The kernel trace dump: how a kernel built with the `trace` feature
//! writes its per-CPU event rings to the serial console, and how xtask
//! reads them back (`cargo xtask trace`, docs/profiling.md).
//!
//! The dump is text, one self-contained line per item, so that a dump cut
//! short (a crash, a killed QEMU) still yields every line that got out, and
//! so that it survives the console's `\n` → `\r\n` translation and lines of
//! other output around it:
//!
//! ```text
//! pecan-trace: begin cpus=1 ring=8192
//! pecan-trace: name 7 6563686f                       (thread id, name in hex)
//! pecan-trace: ev 0 1c9a3 7 3 2 4 0 1                (cpu tsc thread kind a0 a1 a2 a3)
//! pecan-trace: lost 0 0                              (cpu, records overwritten)
//! pecan-trace: end
//! ```
//!
//! Every number is lowercase hex without `0x`. A record ([`Record`]) is a
//! TSC timestamp, the CPU, the thread the event is about (the kernel's
//! thread id, `Thread::id`: small, stable for the thread's life, never
//! reused; 0 = no thread, the CPU idles), the [`Kind`] and four argument
//! words whose meaning the kind gives. Names are not in the rings: the
//! kernel keeps them in a table of their own (they would be overwritten
//! with the oldest records otherwise).

use core::fmt;

/// Every line of the dump starts with this.
pub const PREFIX: &str = "pecan-trace: ";

/// Longest thread name (`TraceName`), bytes: four register words.
pub const NAME_MAX: usize = 32;

/// Longest marker label (`TraceMark`), bytes: three register words.
pub const MARK_MAX: usize = 24;

macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident = $value:expr,)*) => {
        /// What a record says happened. Arguments `a0..a3` per kind.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u64)]
        pub enum Kind {
            $($(#[$doc])* $name = $value,)*
        }

        impl Kind {
            /// Every kind, in number order.
            pub const ALL: &'static [Kind] = &[$(Kind::$name,)*];

            pub const fn from_raw(raw: u64) -> Option<Kind> {
                match raw {
                    $($value => Some(Kind::$name),)*
                    _ => None,
                }
            }

            pub const fn name(self) -> &'static str {
                match self {
                    $(Kind::$name => stringify!($name),)*
                }
            }
        }
    };
}

kinds! {
    /// The thread starts running on the CPU (a context switch); it runs
    /// until the CPU's next `Run` or `Idle`. a0: the thread that ran
    /// before on this CPU (0: none, or idle).
    Run = 1,
    /// The CPU has nothing to run and halts. No arguments.
    Idle = 2,
    /// The thread sends on an endpoint. a0: endpoint (physical address),
    /// a1: badge, a2: [`SendKind`], a3: message label.
    Send = 3,
    /// The thread receives a message (it was waiting, or takes a queued
    /// sender's). a0: the sender's thread id, a1: badge (0 for a reply),
    /// a2: [`SendKind`] (`Reply` for a reply), a3: message label.
    Receive = 4,
    /// The thread answers the caller a0 (`Reply`, `ReplyRecv`, `ReplyTo`).
    Reply = 5,
    /// A notification is signalled (by the thread; 0: by the kernel for an
    /// interrupt).
    /// a0: notification, a1: the bits ORed in.
    Signal = 6,
    /// The thread is woken by a notification. a0: notification, a1: the
    /// word it receives.
    NotifyWake = 7,
    /// An interrupt of a device arrives (thread 0: the kernel's). a0: the
    /// I/O APIC line (GSI, below 0x80) or an MSI's vector (0x80 and up),
    /// a1: whether a notification is bound (1/0), a2: the thread it
    /// interrupted (0: the CPU idled).
    Irq = 8,
    /// The thread acknowledges the interrupt of line a0 (`IrqAck`; an MSI
    /// handler's a0 is 0x10000 + its vector's index from 0x80).
    IrqAck = 9,
    /// The thread faults. a0: fault label (`abi::fault`), a1: address
    /// (page fault) or vector, a2: rip.
    Fault = 10,
    /// The thread is started (`ThreadStart`) at rip a0 by thread a1.
    ThreadStart = 11,
    /// The thread exits with code a0.
    ThreadExit = 12,
    /// A user-level marker (`TraceMark`): a0..a2 the label's bytes
    /// (little-endian, NUL-padded), a3 the caller's value.
    Mark = 13,
    /// The dump begins (thread 0): the run ends here, and so does the slice
    /// of every thread still running. No arguments.
    Dump = 14,
}

/// How a message was sent (`Send` and `Receive` records, a2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum SendKind {
    Send = 0,
    Call = 1,
    /// A fault message the kernel sends for the thread.
    Fault = 2,
    /// An exit message the kernel sends for the thread.
    Exit = 3,
    /// A reply (only in `Receive`).
    Reply = 4,
}

impl SendKind {
    pub const fn from_raw(raw: u64) -> Option<SendKind> {
        Some(match raw {
            0 => SendKind::Send,
            1 => SendKind::Call,
            2 => SendKind::Fault,
            3 => SendKind::Exit,
            4 => SendKind::Reply,
            _ => return None,
        })
    }

    pub const fn name(self) -> &'static str {
        match self {
            SendKind::Send => "send",
            SendKind::Call => "call",
            SendKind::Fault => "fault",
            SendKind::Exit => "exit",
            SendKind::Reply => "reply",
        }
    }
}

/// One event as the rings hold it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub tsc: u64,
    /// The thread's id (0: none).
    pub thread: u64,
    /// A [`Kind`] as a number (the dump keeps unknown ones; readers skip
    /// them).
    pub kind: u64,
    pub args: [u64; 4],
}

/// One line of the dump, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// The dump starts: number of CPUs, records per CPU ring.
    Begin { cpus: u64, ring: u64 },
    /// Thread `id` is called `name` (bytes; not checked to be UTF-8).
    Name { id: u64, name: &'a str },
    /// An event on CPU `cpu`.
    Event { cpu: u64, record: Record },
    /// CPU `cpu`'s ring overwrote its `lost` oldest records.
    Lost { cpu: u64, lost: u64 },
    /// The dump is complete.
    End,
}

/// Writes the text of bytes `bytes` as hex (the `name` line's field).
pub struct Hex<'a>(pub &'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Line<'_> {
    /// The line without its newline, [`PREFIX`] included. (A `Name` is
    /// written from its text; the kernel, which has bytes, writes [`Hex`].)
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(PREFIX)?;
        match *self {
            Line::Begin { cpus, ring } => write!(f, "begin cpus={cpus:x} ring={ring:x}"),
            Line::Name { id, name } => write!(f, "name {id:x} {}", Hex(name.as_bytes())),
            Line::Event { cpu, record: r } => write!(
                f,
                "ev {cpu:x} {:x} {:x} {:x} {:x} {:x} {:x} {:x}",
                r.tsc, r.thread, r.kind, r.args[0], r.args[1], r.args[2], r.args[3]
            ),
            Line::Lost { cpu, lost } => write!(f, "lost {cpu:x} {lost:x}"),
            Line::End => f.write_str("end"),
        }
    }
}

/// Decodes `hex` (an even number of hex digits) into `out`; the bytes
/// written, or `None` if it does not fit or is not hex.
pub fn unhex(hex: &str, out: &mut [u8]) -> Option<usize> {
    let digits = hex.as_bytes();
    if !digits.len().is_multiple_of(2) || digits.len() / 2 > out.len() {
        return None;
    }
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        let s = core::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(digits.len() / 2)
}

/// Parses one line of serial output: `None` when it is not a (whole,
/// well-formed) dump line. The `name` of a `Name` line is returned still
/// in hex: decode it with [`unhex`].
pub fn parse(line: &str) -> Option<Line<'_>> {
    let rest = line.trim_end_matches(['\r', '\n']);
    let rest = &rest[rest.find(PREFIX)? + PREFIX.len()..];
    let mut words = rest.split(' ');
    let tag = words.next()?;
    let mut number = || u64::from_str_radix(words.next()?, 16).ok();
    let parsed = match tag {
        "begin" => {
            let (cpus, ring) = rest.strip_prefix("begin cpus=")?.split_once(" ring=")?;
            Line::Begin {
                cpus: u64::from_str_radix(cpus, 16).ok()?,
                ring: u64::from_str_radix(ring, 16).ok()?,
            }
        }
        "name" => {
            let id = number()?;
            let hex = rest.split(' ').nth(2).unwrap_or("");
            if hex.len() > 2 * NAME_MAX || !hex.len().is_multiple_of(2) {
                return None;
            }
            Line::Name { id, name: hex }
        }
        "ev" => {
            let cpu = number()?;
            let tsc = number()?;
            let thread = number()?;
            let kind = number()?;
            let args = [number()?, number()?, number()?, number()?];
            Line::Event {
                cpu,
                record: Record {
                    tsc,
                    thread,
                    kind,
                    args,
                },
            }
        }
        "lost" => Line::Lost {
            cpu: number()?,
            lost: number()?,
        },
        "end" => Line::End,
        _ => return None,
    };
    // Nothing after the last field.
    let fields = match parsed {
        Line::Begin { .. } | Line::End => 1,
        Line::Name { .. } => 3,
        Line::Event { .. } => 9,
        Line::Lost { .. } => 3,
    };
    if !matches!(parsed, Line::Begin { .. }) && rest.split(' ').count() != fields {
        return None;
    }
    Some(parsed)
}

/// The label of a `Mark` record: its bytes up to the first NUL.
pub fn mark_label(args: &[u64; 4], out: &mut [u8; MARK_MAX]) -> usize {
    for (i, word) in args[..3].iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&word.to_le_bytes());
    }
    out.iter().position(|&b| b == 0).unwrap_or(MARK_MAX)
}

/// Packs `label` (at most [`MARK_MAX`] bytes are kept) into the three words
/// `TraceMark` passes (little-endian, NUL-padded): what `rt` does, and
/// [`mark_label`] undoes.
pub fn pack_label<const N: usize>(label: &[u8]) -> [u64; N] {
    let mut words = [0u64; N];
    for (i, &b) in label.iter().take(N * 8).enumerate() {
        words[i / 8] |= u64::from(b) << (8 * (i % 8));
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::string::String;

    #[test]
    fn every_line_round_trips() {
        let record = Record {
            tsc: 0x1234_5678_9abc,
            thread: 7,
            kind: Kind::Receive as u64,
            args: [3, u64::MAX, 0, 42],
        };
        let lines = [
            Line::Begin {
                cpus: 2,
                ring: 8192,
            },
            Line::Event { cpu: 1, record },
            Line::Lost { cpu: 0, lost: 17 },
            Line::End,
        ];
        for line in lines {
            let text = format!("{line}\r\n");
            assert_eq!(parse(&text), Some(line), "{text}");
        }
        let name = format!(
            "{}",
            Line::Name {
                id: 9,
                name: "echo"
            }
        );
        assert_eq!(name, "pecan-trace: name 9 6563686f");
        let Some(Line::Name { id: 9, name: hex }) = parse(&name) else {
            panic!("{name}");
        };
        let mut out = [0u8; NAME_MAX];
        let n = unhex(hex, &mut out).unwrap();
        assert_eq!(&out[..n], b"echo");
    }

    #[test]
    fn output_around_the_prefix_is_tolerated_but_broken_lines_are_not() {
        assert_eq!(
            parse("hello pecan-trace: end"),
            Some(Line::End),
            "a line that shares the console with other output"
        );
        for bad in [
            "",
            "pecan-trace:",
            "pecan-trace: ev 0 1 2 3 4 5 6",
            "pecan-trace: ev 0 1 2 3 4 5 6 7 8",
            "pecan-trace: ev 0 1 2 3 4 5 6 zz",
            "pecan-trace: lost 0",
            "pecan-trace: name 1 abc",
            "pecan-trace: begin cpus=1",
            "pecan-trace: what",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        let long = format!("pecan-trace: name 1 {}", "61".repeat(NAME_MAX + 1));
        assert_eq!(parse(&long), None);
    }

    #[test]
    fn labels_pack_and_unpack() {
        let words: [u64; 3] = pack_label(b"packet allocated");
        let mut out = [0u8; MARK_MAX];
        let args = [words[0], words[1], words[2], 0];
        let n = mark_label(&args, &mut out);
        assert_eq!(&out[..n], b"packet allocated");
        let long: [u64; 3] = pack_label(b"a label longer than twenty-four bytes");
        let n = mark_label(&[long[0], long[1], long[2], 0], &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out[..n]),
            "a label longer than twen"
        );
        // 24 bytes kept, no terminator needed.
        assert_eq!(n, MARK_MAX);
    }

    #[test]
    fn kinds_are_dense_and_named() {
        for (i, k) in Kind::ALL.iter().enumerate() {
            assert_eq!(*k as u64, i as u64 + 1);
            assert_eq!(Kind::from_raw(*k as u64), Some(*k));
            assert!(!k.name().is_empty());
        }
        assert_eq!(Kind::from_raw(0), None);
        for raw in 0..5 {
            assert_eq!(SendKind::from_raw(raw).map(|k| k as u64), Some(raw));
        }
        assert_eq!(SendKind::from_raw(5), None);
    }
}
