//! A small client of QEMU's machine protocol (QMP) on a Unix socket
//! (`-qmp unix:PATH,server=on,wait=off`), used mostly for one thing:
//! running human monitor commands (`info pci`, `sendkey ctrl-alt-f1`,
//! `screendump FILE`, `info usernet`) through `human-monitor-command`,
//! whose answer is the text the monitor would print; and for the few
//! commands the human monitor lacks (`input-send-event`: a tablet's
//! absolute position), a QMP command as it is ([`Qmp::raw`]). QMP rather than the human monitor on
//! a socket: its answers are delimited (one JSON object per line, events
//! told apart by their `event` key), the human monitor's are not.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// How long one command may take.
const REPLY_LIMIT: Duration = Duration::from_secs(30);

/// A connected, negotiated QMP session.
pub struct Qmp {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
}

/// A fresh socket path for one QEMU run, short enough for a Unix socket
/// address (108 bytes), whatever the work directory's path.
pub fn socket_path() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "pecan-qmp-{}-{}.sock",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

impl Qmp {
    /// Connects to the socket QEMU listens on at `path` (retrying while
    /// QEMU starts, until `deadline`) and leaves the negotiation phase.
    pub fn connect(path: &Path, deadline: Instant) -> Result<Qmp> {
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(stream) => break stream,
                Err(e) if Instant::now() >= deadline => {
                    return Err(e).with_context(|| {
                        format!("connecting to QEMU's QMP socket {}", path.display())
                    })
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        stream.set_read_timeout(Some(REPLY_LIMIT))?;
        let mut qmp = Qmp {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        };
        let greeting = qmp.read()?;
        if greeting.get("QMP").is_none() {
            bail!("QMP: unexpected greeting {greeting}");
        }
        qmp.execute(serde_json::json!({ "execute": "qmp_capabilities" }))?;
        Ok(qmp)
    }

    /// The next message that is not an event.
    fn read(&mut self) -> Result<Value> {
        loop {
            let mut line = String::new();
            let n = self
                .reader
                .read_line(&mut line)
                .context("reading from QEMU's QMP socket")?;
            if n == 0 {
                bail!("QEMU closed its QMP socket (did the machine end?)");
            }
            let value: Value = serde_json::from_str(line.trim())
                .with_context(|| format!("QMP: not JSON: {}", line.trim()))?;
            if value.get("event").is_none() {
                return Ok(value);
            }
        }
    }

    /// Sends `request` and returns its `return` value.
    fn execute(&mut self, request: Value) -> Result<Value> {
        let mut text = request.to_string();
        text.push('\n');
        self.writer
            .write_all(text.as_bytes())
            .context("writing to QEMU's QMP socket")?;
        let reply = self.read()?;
        if let Some(error) = reply.get("error") {
            bail!("QMP error: {error}");
        }
        reply
            .get("return")
            .cloned()
            .ok_or_else(|| anyhow!("QMP: unexpected reply {reply}"))
    }

    /// Lets a machine started paused (`-S`) run.
    pub fn resume(&mut self) -> Result<()> {
        self.execute(serde_json::json!({ "execute": "cont" }))
            .map(drop)
    }

    /// Presses the machine's ACPI power button (`system_powerdown`).
    pub fn power_down(&mut self) -> Result<()> {
        self.execute(serde_json::json!({ "execute": "system_powerdown" }))
            .map(drop)
    }

    /// Runs a QMP command given as JSON text (`{"execute": ...}`) and
    /// returns its `return` value as JSON text (a line).
    pub fn raw(&mut self, command: &str) -> Result<String> {
        let request: Value = serde_json::from_str(command)
            .with_context(|| format!("QMP command: not JSON: {command}"))?;
        Ok(format!("{}\n", self.execute(request)?))
    }

    /// Runs a human monitor command and returns what it printed.
    pub fn human(&mut self, command: &str) -> Result<String> {
        let value = self.execute(serde_json::json!({
            "execute": "human-monitor-command",
            "arguments": { "command-line": command },
        }))?;
        Ok(value.as_str().unwrap_or_default().replace("\r\n", "\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A fake QEMU: greets, acknowledges the capabilities, sends an event,
    /// then answers one human command.
    #[test]
    fn talks_to_a_fake_qemu() {
        let path = socket_path();
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut out = stream;
            out.write_all(b"{\"QMP\": {\"version\": {}}}\r\n").unwrap();
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert!(line.contains("qmp_capabilities"), "{line}");
            out.write_all(b"{\"return\": {}}\r\n").unwrap();
            line.clear();
            reader.read_line(&mut line).unwrap();
            assert!(line.contains("\"command-line\":\"info pci\""), "{line}");
            out.write_all(b"{\"event\": \"RESET\"}\r\n{\"return\": \"Bus  0\\r\\n\"}\r\n")
                .unwrap();
            line.clear();
            reader.read_line(&mut line).unwrap();
            out.write_all(b"{\"error\": {\"class\": \"GenericError\"}}\r\n")
                .unwrap();
        });
        let mut qmp = Qmp::connect(&path, Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!(qmp.human("info pci").unwrap(), "Bus  0\n");
        let e = qmp.human("nonsense").unwrap_err().to_string();
        assert!(e.contains("GenericError"), "{e}");
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn no_socket_is_an_error_after_the_deadline() {
        let e = Qmp::connect(Path::new("/nonexistent/qmp.sock"), Instant::now())
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("QMP socket"), "{e:#}");
    }
}
