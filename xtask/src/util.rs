//! Small helpers shared by the subcommands: where the workspace is, how to
//! invoke cargo, PATH look-ups, capturing a command's combined output, and
//! shell quoting for the command lines xtask prints and logs.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use anyhow::{Context, Result};

/// The workspace root: the parent of this crate's manifest directory.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// A `cargo` command (the one that runs us, from `$CARGO`, else `cargo` on
/// PATH) with the workspace root as its working directory.
pub fn cargo() -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(program);
    cmd.current_dir(workspace_root());
    cmd
}

/// `path` relative to the workspace root when it lies inside it, for shorter
/// messages (`tests/timer.toml` rather than `/work/.../tests/timer.toml`).
pub fn display_path(path: &Path) -> String {
    let root = workspace_root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `text` safe to print on a terminal: control characters other than the
/// line break (an ANSI escape could clear the screen or forge output) and
/// the Unicode bidirectional overrides (which reorder what is shown) are
/// written as Rust escapes, `\u{1b}`. Everything xtask echoes from a file
/// it was given goes through here on its way out (`main`'s error line).
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if (c.is_control() && c != '\n') || bidi {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// The full path of executable `name` on `$PATH`, if there is one.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Runs `cmd` to completion with stdin closed and stdout and stderr merged
/// into one pipe (so their interleaving is kept), and returns its status and
/// that output.
pub fn run_captured(cmd: &mut Command) -> Result<(ExitStatus, String)> {
    let (mut reader, writer) = std::io::pipe().context("creating a pipe")?;
    let writer_clone = writer.try_clone().context("duplicating a pipe")?;
    cmd.stdin(Stdio::null()).stdout(writer_clone).stderr(writer);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting `{}`", describe(cmd)))?;
    // The command still holds the write ends; drop them so that reading ends
    // when the child (and its children) close theirs.
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut bytes = Vec::new();
    let read = reader.read_to_end(&mut bytes);
    let status = child
        .wait()
        .with_context(|| format!("waiting for `{}`", describe(cmd)))?;
    read.with_context(|| format!("reading the output of `{}`", describe(cmd)))?;
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

/// [`run_captured`] with a time limit: a command (and everything it
/// started: it runs in a process group of its own) still running after
/// `limit` is killed, and `None` comes back instead of its status, with
/// the output it wrote until then — so that a hung test fails the run
/// instead of holding CI until its own limit.
pub fn run_captured_within(
    cmd: &mut Command,
    limit: std::time::Duration,
) -> Result<(Option<ExitStatus>, String)> {
    use std::os::unix::process::CommandExt;
    let (mut reader, writer) = std::io::pipe().context("creating a pipe")?;
    let writer_clone = writer.try_clone().context("duplicating a pipe")?;
    cmd.stdin(Stdio::null())
        .stdout(writer_clone)
        .stderr(writer)
        .process_group(0);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting `{}`", describe(cmd)))?;
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let reading = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = reader.read_to_end(&mut bytes);
        bytes
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("waiting for `{}`", describe(cmd)))?
        {
            break Some(status);
        }
        if start.elapsed() >= limit {
            // The whole group: test binaries and the processes they forked
            // (which hold the output pipe too).
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let bytes = reading.join().unwrap_or_default();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

/// A command as a shell would spell it (program and arguments, quoted).
pub fn describe(cmd: &Command) -> String {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    shell_join(&words)
}

/// Joins words into one shell command line, quoting where needed.
pub fn shell_join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| shell_quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quotes one word for a POSIX shell; words made only of safe characters are
/// left as they are.
pub fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Indents every line of `text` by four spaces (for output shown under a
/// FAIL line).
pub fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A fresh, empty directory under the system temp dir (for unit tests).
#[cfg(test)]
pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `bytes` to `path` through a temporary file of the same
/// directory and a rename, so that a reader (a QEMU started by a
/// concurrent xtask) never sees a half-written file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().context("a path without a parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", display_path(dir)))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.{}", std::process::id()));
    std::fs::write(&temp, bytes).with_context(|| format!("writing {}", display_path(&temp)))?;
    std::fs::rename(&temp, path).with_context(|| format!("writing {}", display_path(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_what_a_terminal_would_obey() {
        assert_eq!(printable("plain\nlines"), "plain\nlines");
        assert_eq!(printable("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(printable("tab\there\r"), "tab\\u{9}here\\u{d}");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(printable("ünïcode ok"), "ünïcode ok");
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("-m"), "-m");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            shell_join(&["gdb", "-ex", "target remote localhost:1234"]),
            "gdb -ex 'target remote localhost:1234'"
        );
    }

    #[test]
    fn captured_output_merges_streams() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let (status, output) = run_captured(&mut cmd).unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(output, "out\nerr\n");
    }

    #[test]
    fn a_command_past_its_limit_is_killed_with_its_children() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 30 & sleep 30; echo never"]);
        let start = std::time::Instant::now();
        let (status, output) =
            run_captured_within(&mut cmd, std::time::Duration::from_millis(300)).unwrap();
        assert!(status.is_none());
        assert_eq!(output, "started\n");
        // The background sleep held the pipe too: reading ended only
        // because the whole group was killed.
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        let (status, output) = run_captured_within(
            Command::new("sh").args(["-c", "echo ok"]),
            std::time::Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(
            (status.and_then(|s| s.code()), output.as_str()),
            (Some(0), "ok\n")
        );
    }
}
