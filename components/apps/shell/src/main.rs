//! shell: a command interpreter over one file system (a File system
//! session, through `rt::fs`): `ls`, `cat`, `cd`, `pwd`, `mkdir`, `rm`,
//! `echo` (with `>` and `>>`), `stat`, `sync`, `help`. The language —
//! words, quotes, redirection, which command takes which operands, and
//! every error a line can have — is `ucore::shell`, tested on the host;
//! this program does the I/O.
//!
//! Its config ROM (a Rom session routed to its parent, so its scenario
//! grants it `own = ["vspace"]`):
//!
//! ```toml
//! [component.config]
//! prompt = "a"                      # optional ("shell"): every output line starts "a> "
//! script = ["ls /", "cat /x.txt"]   # the command lines it runs
//! stay = true                       # optional (false): after the script, wait
//! ```
//!
//! Every line it prints starts with `PROMPT> `, so that two shells'
//! output stays apart on one console: each command as written
//! (`a> ls /`), then its output, or one error line `a> shell: CMD:
//! message` — and the shell goes on with the next command. At the end:
//! `a> script done: N commands, M failed` (blank lines and `#` comments
//! are not commands) and exit 0 — or, with `stay`, wait for input that
//! does not come yet (the display issue's terminal will bring it), with its
//! File system session open, until the system is powered off
//! (`tests/power-off.toml`). It exits 1 only when it cannot run at all
//! — no config, no File system session — or when the session dies under
//! it (the rest of the script could only fail the same way).
//!
//! Headless is the only mode so far: a terminal session will feed typed
//! lines to [`Shell::run_line`], the one entry point a line needs.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use core::fmt;

use rt::abi::caddr::own;
use rt::abi::ObjectType;
use rt::fs::{self, Fs, OpenOptions, Slots};
use rt::interfaces::child;
use rt::println;
use rt::syscall;
use ucore::config::Table;
use ucore::shell::{self, Command, Lines, Redirect};

rt::entry!(main);

const FS_SLOTS: Slots = Slots {
    session: child::FIRST_FREE,
    donor_block: child::FIRST_FREE + 1,
    donor_table: child::FIRST_FREE + 2,
    frame: child::FIRST_FREE + 3,
};
const ROM_SLOT: u32 = child::FIRST_FREE + 4;
/// The config ROM's frames: slots from here to [`END_FRAME`] (64 KiB, the
/// most a component's config can be).
const FIRST_FRAME: u32 = child::FIRST_FREE + 5;
const END_FRAME: u32 = FIRST_FRAME + 16;
/// The notification `stay` waits on.
const STAY_NOTIFICATION: u32 = END_FRAME;
/// Where the config ROM is mapped (far from the image, heap and stack).
const CONFIG_VA: u64 = 0x30_0000_0000;
/// Where the file system's I/O buffer is mapped.
const FS_VA: u64 = 0x60_0000_0000;
/// The prompt without a `prompt` key.
const DEFAULT_PROMPT: &str = "shell";
/// The longest prompt taken (a longer one is cut).
const MAX_PROMPT: usize = 32;
/// Bytes of file text per output line: with the prompt, a line stays one
/// console write (`rt::print::BUFFER_SIZE`), so lines of two shells never
/// mix.
const LINE_BYTES: usize = rt::print::BUFFER_SIZE - MAX_PROMPT - 8;
/// Bytes `cat` reads at a time.
const CHUNK: usize = 4096;

fn main(_: u64) -> i32 {
    let config = match read_config() {
        Ok(config) => config,
        Err(why) => {
            println!("shell: config ROM: {why}");
            return 1;
        }
    };
    let prompt = config
        .get("prompt")
        .and_then(|v| v.as_str())
        .unwrap_or(DEFAULT_PROMPT);
    let prompt = &prompt[..floor_char_boundary(prompt, MAX_PROMPT)];
    // SAFETY: FS_VA.. is used by nothing else of this program.
    let fs = match unsafe { Fs::connect(FS_SLOTS, FS_VA) } {
        Ok(fs) => fs,
        Err(e) => {
            println!("{prompt}> shell: File system session: {e}");
            return 1;
        }
    };
    let mut sh = Shell {
        fs: &fs,
        prompt,
        commands: 0,
        failed: 0,
    };
    let script = config.get("script").and_then(|v| v.as_array());
    if script.is_none() {
        sh.say(format_args!(
            "shell: config: no script (an array of command lines)"
        ));
    }
    for (i, entry) in script.iter().flat_map(|a| a.iter()).enumerate() {
        let Some(line) = entry.as_str() else {
            sh.say(format_args!("shell: config: script[{i}] is not a string"));
            sh.commands += 1;
            sh.failed += 1;
            continue;
        };
        if sh.run_line(line) == Outcome::Gone {
            sh.say(format_args!(
                "shell: the file system is gone; {} commands, {} failed",
                sh.commands, sh.failed
            ));
            return 1;
        }
    }
    sh.say(format_args!(
        "script done: {} commands, {} failed",
        sh.commands, sh.failed
    ));
    if config.get("stay").and_then(|v| v.as_bool()) == Some(true) {
        // Lines typed into its terminal, when its console is one that
        // has a keyboard: each run as a command.
        if let Some(console) = rt::print::console() {
            match console.input_notifier(STAY_NOTIFICATION) {
                Ok(typed) => return interactive(&mut sh, &console, typed),
                Err(e) => sh.say(format_args!("shell: no input from its terminal ({e})")),
            }
        }
        // A notification nobody signals: what the shell does without a
        // keyboard. (Its few bytes come from the quota left beside the
        // file system's donation: 16 MiB leave room, 8 do not.)
        let made = syscall::retype(
            own(child::UNTYPED),
            ObjectType::Notification,
            0,
            own(STAY_NOTIFICATION),
            1,
        );
        if let Err(e) = made.and_then(|()| syscall::wait(own(STAY_NOTIFICATION)).map(drop)) {
            sh.say(format_args!("shell: waiting for input: {e}"));
            return 1;
        }
    }
    0
}

/// Runs the lines typed into the shell's terminal (its console's input,
/// `rt::session::log::READ`) until the system is powered off; a line
/// longer than [`LINE_BYTES`] is cut.
fn interactive(
    sh: &mut Shell<'_>,
    console: &rt::session::Session<rt::session::log::Log>,
    typed: rt::abi::CapSlot,
) -> i32 {
    sh.say(format_args!("shell: reading commands from its terminal"));
    let mut pending: alloc::vec::Vec<u8> = alloc::vec::Vec::new();
    loop {
        if let Err(e) = syscall::wait(typed) {
            sh.say(format_args!("shell: waiting for input: {e}"));
            return 1;
        }
        while console.read(&mut pending).is_ok_and(|n| n > 0) {}
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: alloc::vec::Vec<u8> = pending.drain(..=end).collect();
            let text = core::str::from_utf8(&line[..end]).unwrap_or("");
            let text = &text[..floor_char_boundary(text, LINE_BYTES)];
            if !text.trim().is_empty() && sh.run_line(text) == Outcome::Gone {
                sh.say(format_args!("shell: the file system is gone"));
                return 1;
            }
        }
        if pending.len() > LINE_BYTES {
            pending.clear();
        }
    }
}

/// The config table from the config ROM, or why there is none.
fn read_config() -> Result<Table<'static>, alloc::string::String> {
    // SAFETY: CONFIG_VA.. is used by nothing else of this program.
    unsafe { rt::session::rom::config(ROM_SLOT, FIRST_FRAME, END_FRAME, CONFIG_VA) }
}

/// The largest char boundary of `s` at most `max`.
fn floor_char_boundary(s: &str, max: usize) -> usize {
    (0..=max.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

/// What became of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Blank or a comment.
    Nothing,
    /// The command ran.
    Done,
    /// The command failed (its error printed).
    Failed,
    /// The File system session is gone (the error printed).
    Gone,
}

/// A command's failure: the error and the path it concerns, if any.
struct Failure {
    path: Option<alloc::string::String>,
    error: fs::Error,
}

/// `Failure` for an error on `path`.
fn on(path: &str) -> impl FnOnce(fs::Error) -> Failure + '_ {
    move |error| Failure {
        path: Some(path.into()),
        error,
    }
}

/// The interpreter: a file system, the prompt, and the counts so far.
struct Shell<'f> {
    fs: &'f Fs,
    prompt: &'f str,
    /// Lines that were commands (or tried to be).
    commands: u32,
    /// Commands that failed.
    failed: u32,
}

impl Shell<'_> {
    /// Prints one output line.
    fn say(&self, line: fmt::Arguments<'_>) {
        println!("{}> {}", self.prompt, line);
    }

    /// Runs one command line: prints it, then its output or its error.
    /// The seam for interactive use: a terminal hands each typed line
    /// here.
    fn run_line(&mut self, line: &str) -> Outcome {
        let command = match shell::parse(line) {
            Ok(None) => return Outcome::Nothing,
            Ok(Some(c)) => c,
            Err(e) => {
                self.say(format_args!("{}", line.trim()));
                self.commands += 1;
                self.failed += 1;
                self.say(format_args!("shell: {e}"));
                return Outcome::Failed;
            }
        };
        self.say(format_args!("{}", line.trim()));
        self.commands += 1;
        match self.run(&command) {
            Ok(()) => Outcome::Done,
            Err(f) => {
                self.failed += 1;
                let name = command.name();
                match f.path {
                    Some(p) => self.say(format_args!("shell: {name}: {p}: {}", f.error)),
                    None => self.say(format_args!("shell: {name}: {}", f.error)),
                }
                if f.error == fs::Error::Ipc {
                    Outcome::Gone
                } else {
                    Outcome::Failed
                }
            }
        }
    }

    /// Does what `command` says.
    fn run(&self, command: &Command) -> Result<(), Failure> {
        let fs = self.fs;
        match command {
            Command::Ls(path) => self.ls(path.as_deref().unwrap_or(".")),
            Command::Cat(path) => self.cat(path),
            Command::Cd(path) => {
                let path = path.as_deref().unwrap_or("/");
                fs.set_current_dir(path).map_err(on(path))
            }
            Command::Pwd => {
                self.say(format_args!("{}", fs.current_dir()));
                Ok(())
            }
            Command::Mkdir(path) => fs.create_dir(path).map_err(on(path)),
            Command::Rm(path) => {
                if fs.metadata(path).map_err(on(path))?.is_dir() {
                    fs.remove_dir(path).map_err(on(path))
                } else {
                    fs.remove_file(path).map_err(on(path))
                }
            }
            Command::Echo { text, to: None } => {
                self.say(format_args!("{text}"));
                Ok(())
            }
            Command::Echo {
                text,
                to: Some(Redirect { path, append }),
            } => {
                let mut file = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .append(*append)
                    .truncate(!*append)
                    .open(fs, path)
                    .map_err(on(path))?;
                file.write_all(text.as_bytes()).map_err(on(path))?;
                file.write_all(b"\n").map_err(on(path))?;
                file.close().map_err(on(path))
            }
            Command::Stat(path) => {
                let m = fs.metadata(path).map_err(on(path))?;
                let kind = if m.is_dir() { "directory" } else { "file" };
                self.say(format_args!(
                    "{}: {kind}, {} bytes, attributes {:#04x}, modified {}, created {}",
                    fs.absolute(path),
                    m.len(),
                    m.attributes(),
                    m.modified(),
                    m.created()
                ));
                Ok(())
            }
            Command::Sync => fs.sync().map_err(|error| Failure { path: None, error }),
            Command::Help => {
                for line in shell::help_lines() {
                    self.say(format_args!("{line}"));
                }
                Ok(())
            }
        }
    }

    /// `ls`: a directory's entries, one a line (`   <dir>  name/` or
    /// `    SIZE  name`), or the one file `path` names.
    fn ls(&self, path: &str) -> Result<(), Failure> {
        let m = self.fs.metadata(path).map_err(on(path))?;
        if !m.is_dir() {
            self.entry(path, &m);
            return Ok(());
        }
        for entry in self.fs.read_dir(path).map_err(on(path))? {
            let entry = entry.map_err(on(path))?;
            self.entry(&entry.name, &entry.metadata);
        }
        Ok(())
    }

    /// One line of `ls`.
    fn entry(&self, name: &str, m: &fs::Metadata) {
        if m.is_dir() {
            self.say(format_args!("{:>10}  {name}/", "<dir>"));
        } else {
            self.say(format_args!("{:>10}  {name}", m.len()));
        }
    }

    /// `cat`: the file's text, line by line as it is read.
    fn cat(&self, path: &str) -> Result<(), Failure> {
        let mut file = self.fs.open(path).map_err(on(path))?;
        let mut lines = Lines::new(LINE_BYTES);
        let mut chunk = alloc::vec![0u8; CHUNK];
        loop {
            let n = file.read(&mut chunk).map_err(on(path))?;
            if n == 0 {
                break;
            }
            lines.push(&chunk[..n], |l| self.say(format_args!("{l}")));
        }
        lines.finish(|l| self.say(format_args!("{l}")));
        Ok(())
    }
}
