//! Steps a scenario test takes on the host (docs/testing.md, "Acting on
//! the host"): QEMU monitor commands (`[[monitor]]`: a human monitor
//! command, or a QMP command when it is a JSON object) and host commands
//! (`[[host]]`), run when a serial line appears or after QEMU ended, and
//! the placeholders their commands may hold.
//!
//! A command is a template: `{port.NIC.GUESTPORT}` (the host port
//! forwarded to that guest port), `{peer.NIC}` (the control port on
//! 127.0.0.1 of the host peer of a `link = "peer"` NIC, for `{xtask}
//! peer {peer.NIC} COMMAND`), `{disk.NAME}` (this run's copy of the
//! disk), `{dir}` (the test's work directory), `{serial}` (the serial log
//! so far), `{monitor}` (the monitor transcript), `{xtask}` (the running
//! xtask binary); `{{` and `}}` are literal braces. Any other `{word}` of
//! lower-case letters, digits, `.`, `_` and `-` is an error, so a typo
//! never reaches the shell; a brace followed by anything else (`${HOME}`,
//! `awk '{ print $1 }'`) is left as it is.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::devices::{Attached, Devices, DiskSource};
use crate::testspec::Pattern;
use crate::util::shell_quote;

/// One piece of a command template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Port {
        nic: String,
        guest: u16,
    },
    Disk(String),
    /// The control port of a NIC's host peer.
    Peer(String),
    /// The image a disk's copy was made from.
    Source(String),
    Dir,
    Serial,
    Monitor,
    Xtask,
}

/// A parsed command with placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub source: String,
    pieces: Vec<Piece>,
}

/// Whether `c` may be part of a placeholder's name.
fn placeholder_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
}

impl Template {
    /// Parses `source`; an error is (byte offset in `source`, message).
    pub fn parse(source: &str) -> Result<Template, (usize, String)> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut rest = source;
        let mut at = 0;
        while let Some(c) = rest.chars().next() {
            let (piece, len) = if rest.starts_with("{{") {
                text.push('{');
                (None, 2)
            } else if rest.starts_with("}}") {
                text.push('}');
                (None, 2)
            } else if c == '{' {
                let name: String = rest[1..]
                    .chars()
                    .take_while(|&c| placeholder_char(c))
                    .collect();
                if !name.is_empty() && rest[1 + name.len()..].starts_with('}') {
                    let piece = Self::placeholder(&name).map_err(|m| (at, m))?;
                    (Some(piece), name.len() + 2)
                } else {
                    text.push(c);
                    (None, 1)
                }
            } else {
                text.push(c);
                (None, c.len_utf8())
            };
            if let Some(piece) = piece {
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(piece);
            }
            rest = &rest[len..];
            at += len;
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template {
            source: source.to_string(),
            pieces,
        })
    }

    /// The placeholder `{name}`.
    fn placeholder(name: &str) -> Result<Piece, String> {
        let known = "(known: {port.NIC.GUESTPORT}, {peer.NIC}, {disk.NAME}, {source.NAME}, {dir}, \
                     {serial}, {monitor}, {xtask}; {{ and }} are literal braces)";
        Ok(match name {
            "dir" => Piece::Dir,
            "serial" => Piece::Serial,
            "monitor" => Piece::Monitor,
            "xtask" => Piece::Xtask,
            _ => {
                if let Some(nic) = name.strip_prefix("peer.").filter(|d| !d.is_empty()) {
                    Piece::Peer(nic.to_string())
                } else if let Some(disk) = name.strip_prefix("disk.").filter(|d| !d.is_empty()) {
                    Piece::Disk(disk.to_string())
                } else if let Some(disk) = name.strip_prefix("source.").filter(|d| !d.is_empty()) {
                    Piece::Source(disk.to_string())
                } else if let Some(port) = name.strip_prefix("port.") {
                    let bad = || format!("`{{{name}}}`: a port is {{port.NIC.GUESTPORT}} {known}");
                    let (nic, guest) = port.rsplit_once('.').ok_or_else(bad)?;
                    let guest = guest.parse().ok().filter(|&p| p != 0).ok_or_else(bad)?;
                    if nic.is_empty() {
                        return Err(bad());
                    }
                    Piece::Port {
                        nic: nic.to_string(),
                        guest,
                    }
                } else {
                    return Err(format!("unknown placeholder `{{{name}}}` {known}"));
                }
            }
        })
    }

    /// Checks that every disk and forward the template names is among the
    /// scenario's `devices`.
    pub fn check(&self, devices: &Devices) -> Result<(), String> {
        for piece in &self.pieces {
            match piece {
                Piece::Disk(name) if !devices.disks.iter().any(|d| &d.name == name) => {
                    return Err(format!(
                        "`{{disk.{name}}}`: the scenario has no disk \"{name}\" (its disks: {})",
                        list(devices.disks.iter().map(|d| d.name.as_str()))
                    ));
                }
                Piece::Source(name)
                    if !devices.disks.iter().any(|d| {
                        &d.name == name && !matches!(d.source, DiskSource::Blank { .. })
                    }) =>
                {
                    return Err(format!(
                        "`{{source.{name}}}`: the scenario has no disk \"{name}\" made from an \
                         image (`image` or `build`; its disks: {})",
                        list(devices.disks.iter().map(|d| d.name.as_str()))
                    ));
                }
                Piece::Port { nic, guest }
                    if !devices
                        .nics
                        .iter()
                        .any(|n| &n.name == nic && n.forward.contains(guest)) =>
                {
                    return Err(format!(
                        "`{{port.{nic}.{guest}}}`: the scenario forwards no guest port {guest} \
                         of a NIC \"{nic}\" (its forwards: {})",
                        list(devices.nics.iter().flat_map(|n| {
                            n.forward.iter().map(move |p| format!("{}.{p}", n.name))
                        }))
                    ));
                }
                Piece::Peer(nic)
                    if !devices
                        .nics
                        .iter()
                        .any(|n| &n.name == nic && n.link == crate::devices::Link::Peer) =>
                {
                    return Err(format!(
                        "`{{peer.{nic}}}`: the scenario has no NIC \"{nic}\" with link = \"peer\""
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The command with its placeholders filled in from `context`; with
    /// `quote`, the values are quoted for a POSIX shell.
    pub fn render(&self, context: &Context, quote: bool) -> String {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        let mut out = String::new();
        for piece in &self.pieces {
            let value = match piece {
                Piece::Text(text) => {
                    out.push_str(text);
                    continue;
                }
                Piece::Port { nic, guest } => context
                    .devices
                    .port(nic, *guest)
                    .map_or_else(String::new, |p| p.to_string()),
                Piece::Disk(name) => context.devices.disk(name).map(path).unwrap_or_default(),
                Piece::Peer(nic) => context
                    .devices
                    .peer(nic)
                    .map_or_else(String::new, |p| p.control_port.to_string()),
                Piece::Source(name) => context.devices.source(name).map(path).unwrap_or_default(),
                Piece::Dir => path(&context.dir),
                Piece::Serial => path(&context.serial),
                Piece::Monitor => path(&context.monitor),
                Piece::Xtask => path(&context.xtask),
            };
            out.push_str(&if quote { shell_quote(&value) } else { value });
        }
        out
    }
}

/// `a, b, c`, or `none`.
fn list<S: AsRef<str>>(items: impl Iterator<Item = S>) -> String {
    let items: Vec<String> = items.map(|s| s.as_ref().to_string()).collect();
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// What the placeholders of one run stand for.
#[derive(Debug, Clone)]
pub struct Context {
    pub devices: Attached,
    pub dir: PathBuf,
    pub serial: PathBuf,
    pub monitor: PathBuf,
    pub xtask: PathBuf,
}

/// What an action does.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A human monitor command and the patterns its output must match,
    /// in order.
    Monitor { expect: Vec<Pattern> },
    /// A host command (`sh -c`) and its time limit.
    Host { timeout: Duration },
}

/// One `[[monitor]]` or `[[host]]` table.
#[derive(Debug, Clone)]
pub struct Action {
    pub kind: Kind,
    pub command: Template,
    /// The serial line it waits for; `None`: after QEMU ended.
    pub after: Option<Pattern>,
    /// Its table's line in the test file, for messages.
    pub line: usize,
    /// Where its table starts in the file (file order) and where its
    /// command is (errors).
    pub offset: usize,
    pub command_offset: usize,
}

impl Action {
    /// `[[monitor]] (line 12)` or `[[host]] (line 14)`.
    pub fn label(&self) -> String {
        let table = match self.kind {
            Kind::Monitor { .. } => "monitor",
            Kind::Host { .. } => "host",
        };
        format!("[[{table}]] (line {})", self.line)
    }
}

/// Whether a `[[monitor]]` command is a QMP command in JSON
/// (`{"execute": "input-send-event", ...}`) rather than a human monitor
/// command: it starts with `{`.
pub fn is_qmp(command: &str) -> bool {
    command.trim_start().starts_with('{')
}

/// The error a human monitor command answered with, if it did: QMP's
/// `human-monitor-command` succeeds whatever the command, and the
/// monitor's own complaint is its output's first line (`unknown command:
/// 'x'`, `Error: ...`, `invalid parameter: x`, `screendump: filename
/// expected`).
pub fn monitor_error<'a>(command: &str, output: &'a str) -> Option<&'a str> {
    let first = output.lines().next()?.trim();
    let name = command.split_whitespace().next().unwrap_or_default();
    if first.starts_with(&format!("{name}: ")) && first.ends_with("expected") {
        return Some(first);
    }
    let refusals = [
        "unknown command:",
        "Error:",
        "Parameter '",
        "invalid parameter",
        "Invalid parameter",
    ];
    refusals
        .iter()
        .any(|r| first.starts_with(r))
        .then_some(first)
}

/// How far the output `text` of a monitor command matches `expect`, in
/// order (each pattern searched after the end of the previous one's match,
/// across lines): the first pattern that does not match, if any.
pub fn unmatched<'a>(expect: &'a [Pattern], text: &str) -> Option<&'a Pattern> {
    let mut pos = 0;
    for pattern in expect {
        match pattern.regex.find_at(text, pos) {
            Some(m) => pos = m.end(),
            None => return Some(pattern),
        }
    }
    None
}

/// How much of a failed host command's output the failure reason shows
/// (the whole output is in the test's log and its artefacts).
const SHOWN_LINES: usize = 20;

/// The host side of one test run: its work directory with the disk
/// copies, the serial log written as it comes, the monitor connection and
/// transcript, and the steps still to take.
pub struct Session<'a> {
    pub context: Context,
    /// The steps that wait for a serial line, in file order, and the
    /// index of the next one.
    during: Vec<&'a Action>,
    next: usize,
    /// The steps after QEMU ended.
    end: Vec<&'a Action>,
    serial_file: std::fs::File,
    qmp: Option<crate::qmp::Qmp>,
    /// The monitor's and the host commands' output, for the test's log.
    pub transcript: String,
}

impl<'a> Session<'a> {
    /// Prepares `dir` (fresh: emptied first) for a run of a test with
    /// `actions` on a machine with `devices`.
    pub fn new(dir: &Path, devices: &Devices, actions: &'a [Action]) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let _ = std::fs::remove_dir_all(dir);
        let attached = devices.prepare(dir)?;
        let serial = dir.join("serial.log");
        let serial_file = std::fs::File::create(&serial)
            .with_context(|| format!("creating {}", serial.display()))?;
        let monitor = dir.join("monitor.log");
        std::fs::write(&monitor, "").with_context(|| format!("creating {}", monitor.display()))?;
        Ok(Session {
            context: Context {
                devices: attached,
                dir: dir.to_path_buf(),
                serial,
                monitor,
                xtask: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("xtask")),
            },
            during: actions.iter().filter(|a| a.after.is_some()).collect(),
            next: 0,
            end: actions.iter().filter(|a| a.after.is_none()).collect(),
            serial_file,
            qmp: None,
            transcript: String::new(),
        })
    }

    /// Whether the run needs a QMP socket: for monitor steps, or to learn
    /// the forwarded ports.
    pub fn needs_monitor(&self) -> bool {
        self.context.devices.devices.forwards()
            || self
                .during
                .iter()
                .any(|a| matches!(a.kind, Kind::Monitor { .. }))
    }

    /// Connects to QEMU's QMP socket (QEMU just started, paused), learns
    /// the forwarded ports and lets the machine run.
    pub fn connect(&mut self, socket: &Path) -> Result<(), String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let qmp = crate::qmp::Qmp::connect(socket, deadline).map_err(|e| format!("{e:#}"))?;
        self.qmp = Some(qmp);
        if self.context.devices.devices.forwards() {
            let usernet = self.monitor("info usernet")?;
            self.context
                .devices
                .learn_ports(&usernet)
                .map_err(|e| format!("{e:#}"))?;
        }
        self.qmp
            .as_mut()
            .map_or(Ok(()), |q| q.resume())
            .map_err(|e| format!("resuming the machine: {e:#}"))
    }

    /// Runs a monitor command, records it in the transcript, returns its
    /// output.
    fn monitor(&mut self, command: &str) -> Result<String, String> {
        let Some(qmp) = self.qmp.as_mut() else {
            return Err("no monitor connection".to_string());
        };
        // A JSON object is a QMP command (one the human monitor lacks).
        let output = match is_qmp(command) {
            true => qmp.raw(command),
            false => qmp.human(command),
        }
        .map_err(|e| format!("monitor command `{command}`: {e:#}"))?;
        let entry = format!("(qemu) {command}\n{output}");
        self.transcript.push_str(&entry);
        use std::io::Write;
        let _ = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.context.monitor)
            .and_then(|mut f| f.write_all(entry.as_bytes()));
        Ok(output)
    }

    /// A serial line arrived: it goes to the serial log, and the steps
    /// waiting for it run (several on one line, each after the end of the
    /// previous one's match). `Err` fails the test.
    pub fn on_line(&mut self, line: &str) -> Result<(), String> {
        use std::io::Write;
        let _ = writeln!(self.serial_file, "{line}");
        let mut pos = 0;
        while let Some(action) = self.during.get(self.next).copied() {
            let Some(m) = action
                .after
                .as_ref()
                .and_then(|p| p.regex.find_at(line, pos))
            else {
                break;
            };
            pos = m.end();
            self.next += 1;
            self.run(action)?;
        }
        Ok(())
    }

    /// Writes the whole serial output `serial` to the serial log (the run
    /// is over: this also holds what came after a step ended it).
    pub fn write_serial(&mut self, serial: &str) {
        let _ = std::fs::write(&self.context.serial, serial);
    }

    /// A step that waited for a serial line that never came, if any.
    pub fn pending(&self) -> Option<String> {
        let action = self.during.get(self.next)?;
        let after = action.after.as_ref().map_or("", |p| p.source.as_str());
        Some(format!(
            "{} never ran: `{after}` did not appear",
            action.label()
        ))
    }

    /// Runs the steps after QEMU ended; the first failure, if any (all of
    /// them run: their output is worth having).
    pub fn at_end(&mut self) -> Result<(), String> {
        let mut first = Ok(());
        for action in self.end.clone() {
            let result = self.run(action);
            if first.is_ok() {
                first = result;
            }
        }
        first
    }

    /// Runs one step.
    fn run(&mut self, action: &Action) -> Result<(), String> {
        match &action.kind {
            Kind::Monitor { expect } => {
                let command = action.command.render(&self.context, false);
                let output = self
                    .monitor(&command)
                    .map_err(|e| format!("{}: {e}", action.label()))?;
                if let Some(error) = monitor_error(&command, &output) {
                    return Err(format!(
                        "{}: QEMU refused `{command}`: {error}",
                        action.label()
                    ));
                }
                match unmatched(expect, &output) {
                    None => Ok(()),
                    Some(p) => Err(format!(
                        "{}: `{}` not in the output of `{command}` (after the patterns \
                         before it; the output is in the log)",
                        action.label(),
                        p.source,
                    )),
                }
            }
            Kind::Host { timeout } => {
                let command = action.command.render(&self.context, true);
                self.host(action, &command, *timeout)
            }
        }
    }

    /// Runs a host command with `sh -c` in the work directory; its exit
    /// status decides.
    fn host(&mut self, action: &Action, command: &str, timeout: Duration) -> Result<(), String> {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", command]).current_dir(&self.context.dir);
        let result = crate::util::run_captured_within(&mut cmd, timeout);
        let (status, output) = match result {
            Ok(r) => r,
            Err(e) => return Err(format!("{}: `{command}`: {e:#}", action.label())),
        };
        let ended = match status {
            Some(s) if s.success() => None,
            Some(s) => Some(format!("failed ({s})")),
            None => Some(format!("timed out after {} s (killed)", timeout.as_secs())),
        };
        let entry = format!(
            "$ {command}    # {}\n{output}# {}\n",
            action.label(),
            ended.as_deref().unwrap_or("exit status 0")
        );
        self.transcript.push_str(&entry);
        let _ = std::fs::write(
            self.context
                .dir
                .join(format!("host-line-{}.log", action.line)),
            &entry,
        );
        match ended {
            None => Ok(()),
            Some(why) => {
                let lines: Vec<&str> = output.lines().collect();
                let shown = &lines[lines.len().saturating_sub(SHOWN_LINES)..];
                Err(if lines.is_empty() {
                    format!("{} `{command}` {why}, without output", action.label())
                } else {
                    format!(
                        "{} `{command}` {why}; its output{}:\n{}",
                        action.label(),
                        if shown.len() < lines.len() {
                            format!(" (last {SHOWN_LINES} lines)")
                        } else {
                            String::new()
                        },
                        crate::util::indent(&shown.join("\n"))
                    )
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::{Disk, DiskSource, Nic};

    fn context() -> Context {
        let devices = Devices {
            disks: vec![Disk {
                name: "d0".into(),
                source: DiskSource::Blank { size_mib: 1 },
            }],
            nics: vec![Nic {
                name: "net0".into(),
                forward: vec![80],
                link: crate::devices::Link::User,
            }],
            display: None,
            pointer: None,
        };
        Context {
            devices: Attached {
                devices,
                disks: vec![("d0".into(), PathBuf::from("/w/my dir/disk-d0.img"))],
                sources: Vec::new(),
                ports: vec![("net0".into(), 80, 40123)],
                disk_iops: None,
                peers: Vec::new(),
            },
            dir: PathBuf::from("/w/my dir"),
            serial: PathBuf::from("/w/my dir/serial.log"),
            monitor: PathBuf::from("/w/my dir/monitor.log"),
            xtask: PathBuf::from("/x/xtask"),
        }
    }

    fn pattern(s: &str) -> Pattern {
        Pattern {
            source: s.into(),
            regex: regex::Regex::new(s).unwrap(),
        }
    }

    fn host(line: usize, after: Option<&str>, command: &str, secs: u64) -> Action {
        Action {
            kind: Kind::Host {
                timeout: Duration::from_secs(secs),
            },
            command: Template::parse(command).unwrap(),
            after: after.map(pattern),
            line,
            offset: line,
            command_offset: line,
        }
    }

    fn monitor(line: usize, after: &str, command: &str, expect: &[&str]) -> Action {
        Action {
            kind: Kind::Monitor {
                expect: expect.iter().map(|e| pattern(e)).collect(),
            },
            command: Template::parse(command).unwrap(),
            after: Some(pattern(after)),
            line,
            offset: line,
            command_offset: line,
        }
    }

    #[test]
    fn host_steps_run_at_their_line_and_decide() {
        let dir = crate::util::temp_dir("actions-host");
        let actions = [
            // While the guest runs: the serial log so far holds the line.
            host(
                3,
                Some("^ready"),
                "grep -q '^ready now' {serial} && echo seen > marker",
                5,
            ),
            host(7, None, "test -f marker && test \"$(pwd)\" = {dir}", 5),
            host(9, None, "echo boom; exit 3", 5),
            host(11, None, "true", 5),
        ];
        let mut session = Session::new(&dir.join("w"), &Devices::default(), &actions).unwrap();
        session.on_line("booting").unwrap();
        assert!(!dir.join("w/marker").exists());
        assert_eq!(
            session.pending().as_deref(),
            Some("[[host]] (line 3) never ran: `^ready` did not appear")
        );
        session.on_line("ready now").unwrap();
        assert!(dir.join("w/marker").exists());
        assert_eq!(session.pending(), None);
        // Every step at the end runs; the first failure is reported.
        let e = session.at_end().unwrap_err();
        assert!(
            e.starts_with(
                "[[host]] (line 9) `echo boom; exit 3` failed (exit status: 3); its output:"
            ) && e.ends_with("    boom"),
            "{e}"
        );
        assert!(session
            .transcript
            .contains("$ true    # [[host]] (line 11)\n# exit status 0"));
        assert!(dir.join("w/host-line-9.log").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_host_step_past_its_time_is_killed() {
        let dir = crate::util::temp_dir("actions-timeout");
        let actions = [host(2, Some("go"), "echo started; sleep 30", 1)];
        let mut session = Session::new(&dir, &Devices::default(), &actions).unwrap();
        let start = std::time::Instant::now();
        let e = session.on_line("go").unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(
            e.contains("timed out after 1 s (killed); its output:\n    started"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A fake QEMU on a QMP socket: answers `qmp_capabilities` and `cont`,
    /// and each human command from `answers`.
    fn fake_qemu(
        socket: &Path,
        answers: &'static [(&'static str, &'static str)],
    ) -> std::thread::JoinHandle<()> {
        use std::io::{BufRead, Write};
        let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut out = stream;
            out.write_all(b"{\"QMP\": {}}\n").unwrap();
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                let request: serde_json::Value = serde_json::from_str(&line).unwrap();
                let reply = match request["arguments"]["command-line"].as_str() {
                    Some(command) => {
                        let text = answers
                            .iter()
                            .find(|(c, _)| *c == command)
                            .map_or("unknown command: 'x'\r\n", |(_, t)| t);
                        serde_json::json!({ "return": text })
                    }
                    None => serde_json::json!({ "return": {} }),
                };
                out.write_all(format!("{reply}\n").as_bytes()).unwrap();
                line.clear();
            }
        })
    }

    #[test]
    fn monitor_steps_check_their_output() {
        let dir = crate::util::temp_dir("actions-monitor");
        let socket = crate::qmp::socket_path();
        let server = fake_qemu(
            &socket,
            &[(
                "info pci",
                "  Bus  0, device   1, function 0:\r\n    SCSI controller: PCI device 1af4:1042\r\n",
            )],
        );
        let actions = [
            monitor(2, "a", "info pci", &["device   1", "1af4:1042"]),
            monitor(6, "b", "info pci", &["1af4:1041"]),
            monitor(9, "c", "sendkey nokey", &[]),
        ];
        let mut session = Session::new(&dir, &Devices::default(), &actions).unwrap();
        assert!(session.needs_monitor());
        session.connect(&socket).unwrap();
        session.on_line("a").unwrap();
        let e = session.on_line("b").unwrap_err();
        assert_eq!(
            e,
            "[[monitor]] (line 6): `1af4:1041` not in the output of `info pci` (after the \
             patterns before it; the output is in the log)"
        );
        let e = session.on_line("c").unwrap_err();
        assert_eq!(
            e,
            "[[monitor]] (line 9): QEMU refused `sendkey nokey`: unknown command: 'x'"
        );
        let transcript = std::fs::read_to_string(dir.join("monitor.log")).unwrap();
        assert!(
            transcript.starts_with("(qemu) info pci\n  Bus  0, device   1"),
            "{transcript}"
        );
        assert_eq!(transcript, session.transcript);
        drop(session);
        server.join().unwrap();
        let _ = std::fs::remove_file(&socket);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn substitutions() {
        let t = Template::parse(
            "curl -s http://127.0.0.1:{port.net0.80}/ && test -s {disk.d0} && {xtask} x {dir} \
             {serial} {monitor}",
        )
        .unwrap();
        let c = context();
        assert_eq!(
            t.render(&c, true),
            "curl -s http://127.0.0.1:40123/ && test -s '/w/my dir/disk-d0.img' && /x/xtask x \
             '/w/my dir' '/w/my dir/serial.log' '/w/my dir/monitor.log'"
        );
        let shot = Template::parse("screendump {dir}/shot.ppm").unwrap();
        assert_eq!(shot.render(&c, false), "screendump /w/my dir/shot.ppm");
        assert_eq!(t.check(&c.devices.devices), Ok(()));
    }

    #[test]
    fn literal_braces() {
        let c = context();
        let t = Template::parse("awk '{ print $1 }' {{dir}} ${HOME} {{x}} {A} {}").unwrap();
        assert_eq!(
            t.render(&c, true),
            "awk '{ print $1 }' {dir} ${HOME} {x} {A} {}"
        );
        assert_eq!(
            Template::parse("{{{dir}}}").unwrap().render(&c, false),
            "{/w/my dir}"
        );
    }

    #[test]
    fn bad_placeholders() {
        let e = Template::parse("echo {dri}").unwrap_err();
        assert_eq!(e.0, 5);
        assert!(e.1.starts_with("unknown placeholder `{dri}`"), "{}", e.1);
        for bad in [
            "{port.net0}",
            "{port.net0.x}",
            "{port..80}",
            "{port.net0.0}",
            "{port.a.70000}",
        ] {
            let e = Template::parse(bad).unwrap_err();
            assert!(
                e.1.contains("a port is {port.NIC.GUESTPORT}"),
                "{bad}: {}",
                e.1
            );
        }
        assert!(Template::parse("{disk.}").is_err());
        let devices = context().devices.devices;
        let e = Template::parse("{disk.d1}")
            .unwrap()
            .check(&devices)
            .unwrap_err();
        assert_eq!(
            e,
            "`{disk.d1}`: the scenario has no disk \"d1\" (its disks: d0)"
        );
        let e = Template::parse("{port.net0.22}")
            .unwrap()
            .check(&devices)
            .unwrap_err();
        assert!(
            e.contains("forwards no guest port 22 of a NIC \"net0\" (its forwards: net0.80)"),
            "{e}"
        );
        let e = Template::parse("{port.n.80}")
            .unwrap()
            .check(&Devices::default())
            .unwrap_err();
        assert!(e.ends_with("(its forwards: none)"), "{e}");
    }

    #[test]
    fn monitor_refusals() {
        let refused = [
            ("infox pci", "unknown command: 'infox'\n"),
            ("info pcix", "unknown command: 'info pcix'\n"),
            ("sendkey nokey", "invalid parameter: nokey\n"),
            ("screendump", "screendump: filename expected\n"),
            (
                "screendump /x/y.ppm",
                "Error: failed to open file '/x/y.ppm'\n",
            ),
        ];
        for (command, output) in refused {
            assert_eq!(
                monitor_error(command, output),
                Some(output.trim_end()),
                "{command}"
            );
        }
        assert_eq!(monitor_error("info pci", "  Bus  0, device   0\n"), None);
        assert_eq!(monitor_error("sendkey ctrl-alt-f1", ""), None);
    }

    #[test]
    fn monitor_expect_in_order() {
        let p = |s: &str| Pattern {
            source: s.into(),
            regex: regex::Regex::new(s).unwrap(),
        };
        let expect = [p("device   1"), p("1af4:1042"), p("device   2")];
        let text = "Bus 0, device   1, function 0:\n  SCSI controller: PCI device 1af4:1042\n  \
                    Bus 0, device   2, function 0:\n";
        assert!(unmatched(&expect, text).is_none());
        let reversed = [p("device   2"), p("1af4:1042")];
        assert_eq!(unmatched(&reversed, text).unwrap().source, "1af4:1042");
    }
}
