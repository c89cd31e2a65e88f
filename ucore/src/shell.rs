//! The command language of the shell component (`components/apps/shell`):
//! a line is split into words, its redirection found and checked, and the
//! command and its operands checked against [`COMMANDS`] — all before the
//! shell touches the file system, so that every way a line can be wrong is
//! a [`ParseError`] tested here on the host. The component does the I/O.
//!
//! The grammar, one line at a time:
//!
//! - Words are separated by spaces and tabs. A blank line, or one whose
//!   first word starts with `#`, is nothing ([`parse`] returns `None`).
//! - Double quotes make one word of what they enclose, spaces included
//!   (`cat "pattern file 01.bin"`); quoted and unquoted text next to each
//!   other join (`a"b c"d` is `ab cd`); `""` is an empty word. Inside
//!   quotes `\"` is a quote and `\\` a backslash; any other backslash is
//!   itself. Outside quotes nothing is special but `"`, `>` and spaces.
//! - An unquoted `>` (write) or `>>` (append), with or without spaces
//!   around it, takes the next word as a file name: the redirection.
//!   Only `echo` has one, at most one, anywhere after the command
//!   (`echo a > f b` writes `a b`, as in a Unix shell).
//! - The first word is the command, the other words its operands.
//!
//! Errors read `CMD: message` (the component prints them after `shell: `),
//! where CMD is the command word as written — for a line with an unclosed
//! quote, its first run of non-blank characters.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// A command with its operands, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `ls [PATH]`: a directory's entries (the current one without PATH),
    /// or one file.
    Ls(Option<String>),
    /// `cat PATH`: a file's text.
    Cat(String),
    /// `cd [PATH]`: change the current directory (to `/` without PATH).
    Cd(Option<String>),
    /// `pwd`: the current directory.
    Pwd,
    /// `mkdir PATH`: make a directory.
    Mkdir(String),
    /// `rm PATH`: remove a file or an empty directory.
    Rm(String),
    /// `echo [TEXT...] [> FILE | >> FILE]`: the words joined by single
    /// spaces, printed or written to a file (with a newline).
    Echo {
        /// The text, without the newline.
        text: String,
        /// Where it goes instead of the output.
        to: Option<Redirect>,
    },
    /// `stat PATH`: what a file or directory is.
    Stat(String),
    /// `sync`: everything written so far onto the device.
    Sync,
    /// `help`: the commands.
    Help,
}

impl Command {
    /// The command word.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Ls(_) => "ls",
            Command::Cat(_) => "cat",
            Command::Cd(_) => "cd",
            Command::Pwd => "pwd",
            Command::Mkdir(_) => "mkdir",
            Command::Rm(_) => "rm",
            Command::Echo { .. } => "echo",
            Command::Stat(_) => "stat",
            Command::Sync => "sync",
            Command::Help => "help",
        }
    }
}

/// Where `echo`'s text goes: `> path` or `>> path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The file.
    pub path: String,
    /// `>>`: added at the end; `>`: the file's contents replaced.
    pub append: bool,
}

/// A command the shell knows: its name, its usage line and what it does
/// ([`help_lines`], and the usage in [`Fault::Missing`] and
/// [`Fault::TooMany`] messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandInfo {
    /// The command word.
    pub name: &'static str,
    /// The command with its operands, as `help` shows them.
    pub usage: &'static str,
    /// What it does, one short phrase.
    pub about: &'static str,
    /// Operands it needs.
    min: usize,
    /// Operands it takes at most.
    max: usize,
}

/// Every command, in the order `help` lists them.
pub const COMMANDS: &[CommandInfo] = &[
    info(
        "ls",
        "ls [PATH]",
        "list a directory (or show one file)",
        0,
        1,
    ),
    info("cat", "cat PATH", "print a file", 1, 1),
    info(
        "cd",
        "cd [PATH]",
        "change the current directory (/ without PATH)",
        0,
        1,
    ),
    info("pwd", "pwd", "print the current directory", 0, 0),
    info("mkdir", "mkdir PATH", "make a directory", 1, 1),
    info("rm", "rm PATH", "remove a file or an empty directory", 1, 1),
    info(
        "echo",
        "echo [TEXT] [> FILE | >> FILE]",
        "print TEXT, or write (>) or append (>>) it and a newline to FILE",
        0,
        usize::MAX,
    ),
    info(
        "stat",
        "stat PATH",
        "show a file's or directory's size, kind and times",
        1,
        1,
    ),
    info(
        "sync",
        "sync",
        "write everything so far onto the device",
        0,
        0,
    ),
    info("help", "help", "list the commands", 0, 0),
];

const fn info(
    name: &'static str,
    usage: &'static str,
    about: &'static str,
    min: usize,
    max: usize,
) -> CommandInfo {
    CommandInfo {
        name,
        usage,
        about,
        min,
        max,
    }
}

/// The command named `name`.
pub fn lookup(name: &str) -> Option<&'static CommandInfo> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// What `help` prints, one entry per line: usage, padded, and what the
/// command does.
pub fn help_lines() -> impl Iterator<Item = String> {
    let width = COMMANDS.iter().map(|c| c.usage.len()).max().unwrap_or(0);
    COMMANDS
        .iter()
        .map(move |c| alloc::format!("{:<width$}  {}", c.usage, c.about))
}

/// Why a line is not a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The command word as written (see the module doc for a line with an
    /// unclosed quote).
    pub command: String,
    /// What is wrong.
    pub fault: Fault,
}

/// What is wrong with a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No such command.
    Unknown,
    /// Fewer operands than the command needs; its usage.
    Missing(&'static str),
    /// More operands than the command takes; its usage.
    TooMany(&'static str),
    /// A `"` without its closing one.
    UnclosedQuote,
    /// `>` or `>>` (true) at the end of the line, or before another one.
    NoFileName {
        /// `>>` rather than `>`.
        append: bool,
    },
    /// Two redirections.
    TwoRedirects,
    /// A redirection on a command other than `echo`.
    NotEcho,
    /// A line starting with a redirection.
    NoCommand,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Unknown => f.write_str("unknown command (help lists the commands)"),
            Fault::Missing(usage) => write!(f, "missing operand (usage: {usage})"),
            Fault::TooMany(usage) => write!(f, "too many operands (usage: {usage})"),
            Fault::UnclosedQuote => f.write_str("unclosed double quote"),
            Fault::NoFileName { append } => {
                let op = if *append { ">>" } else { ">" };
                write!(f, "{op} needs a file name")
            }
            Fault::TwoRedirects => f.write_str("more than one redirection"),
            Fault::NotEcho => f.write_str("only echo writes to a file (> or >>)"),
            Fault::NoCommand => f.write_str("a redirection needs a command before it"),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.command.is_empty() {
            write!(f, "{}", self.fault)
        } else {
            write!(f, "{}: {}", self.command, self.fault)
        }
    }
}

/// A piece of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    /// A word, its quotes removed.
    Word(String),
    /// `>` (false) or `>>` (true).
    Redirect(bool),
}

/// `line` cut into words and redirections; [`Fault::UnclosedQuote`] if a
/// quote is left open.
pub fn tokenize(line: &str) -> Result<Vec<Token>, Fault> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    // The word being read, if one has started (`""` starts an empty one).
    let mut word: Option<String> = None;
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = word.take() {
                    tokens.push(Token::Word(w));
                }
            }
            '>' => {
                if let Some(w) = word.take() {
                    tokens.push(Token::Word(w));
                }
                let append = chars.next_if_eq(&'>').is_some();
                tokens.push(Token::Redirect(append));
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        None => return Err(Fault::UnclosedQuote),
                        Some('"') => break,
                        Some('\\') => match chars.next_if(|&n| n == '"' || n == '\\') {
                            Some(escaped) => w.push(escaped),
                            None => w.push('\\'),
                        },
                        Some(other) => w.push(other),
                    }
                }
            }
            other => word.get_or_insert_with(String::new).push(other),
        }
    }
    if let Some(w) = word {
        tokens.push(Token::Word(w));
    }
    Ok(tokens)
}

/// The command `line` asks for; `None` for a blank line or a comment.
pub fn parse(line: &str) -> Result<Option<Command>, ParseError> {
    let tokens = match tokenize(line) {
        Ok(t) => t,
        Err(fault) => {
            let command = line.split_whitespace().next().unwrap_or("").into();
            return Err(ParseError { command, fault });
        }
    };
    let mut tokens = tokens.into_iter();
    let name = match tokens.next() {
        None => return Ok(None),
        Some(Token::Word(w)) if w.starts_with('#') => return Ok(None),
        Some(Token::Word(w)) => w,
        Some(Token::Redirect(_)) => {
            return Err(ParseError {
                command: String::new(),
                fault: Fault::NoCommand,
            })
        }
    };
    let fail = |fault| {
        Err(ParseError {
            command: name.clone(),
            fault,
        })
    };
    let Some(info) = lookup(&name) else {
        return fail(Fault::Unknown);
    };
    let mut operands: Vec<String> = Vec::new();
    let mut redirect: Option<Redirect> = None;
    while let Some(token) = tokens.next() {
        match token {
            Token::Word(w) => operands.push(w),
            Token::Redirect(append) => {
                let Some(Token::Word(path)) = tokens.next() else {
                    return fail(Fault::NoFileName { append });
                };
                if redirect.is_some() {
                    return fail(Fault::TwoRedirects);
                }
                redirect = Some(Redirect { path, append });
            }
        }
    }
    if redirect.is_some() && info.name != "echo" {
        return fail(Fault::NotEcho);
    }
    if operands.len() < info.min {
        return fail(Fault::Missing(info.usage));
    }
    if operands.len() > info.max {
        return fail(Fault::TooMany(info.usage));
    }
    let mut operands = operands.into_iter();
    let mut one = || operands.next().unwrap_or_default();
    Ok(Some(match info.name {
        "ls" => Command::Ls(operands.next()),
        "cat" => Command::Cat(one()),
        "cd" => Command::Cd(operands.next()),
        "pwd" => Command::Pwd,
        "mkdir" => Command::Mkdir(one()),
        "rm" => Command::Rm(one()),
        "stat" => Command::Stat(one()),
        "sync" => Command::Sync,
        "help" => Command::Help,
        // "echo", the last command of the table.
        _ => Command::Echo {
            text: operands.collect::<Vec<_>>().join(" "),
            to: redirect,
        },
    }))
}

/// A file's bytes, arriving in chunks, cut into printable lines: at each
/// `\n` (a `\r` before it dropped), and — so that one output line stays
/// one console write — after at most `max` bytes, at a character boundary
/// where the text is UTF-8. Bytes that are not UTF-8 become U+FFFD.
#[derive(Clone, Debug)]
pub struct Lines {
    pending: Vec<u8>,
    max: usize,
}

impl Lines {
    /// Lines of at most `max` bytes (at least 4: one character).
    pub fn new(max: usize) -> Lines {
        Lines {
            pending: Vec::new(),
            max: max.max(4),
        }
    }

    /// Takes `chunk`, handing each line it completes to `out`.
    pub fn push(&mut self, chunk: &[u8], mut out: impl FnMut(&str)) {
        for &b in chunk {
            if b == b'\n' {
                self.emit_all(&mut out);
                continue;
            }
            self.pending.push(b);
            if self.pending.len() >= self.max {
                let cut = self.cut();
                let rest = self.pending.split_off(cut);
                emit(&self.pending, &mut out);
                self.pending = rest;
            }
        }
    }

    /// Hands a last line without `\n`, if any, to `out`.
    pub fn finish(&mut self, mut out: impl FnMut(&str)) {
        if !self.pending.is_empty() {
            self.emit_all(&mut out);
        }
    }

    fn emit_all(&mut self, out: &mut impl FnMut(&str)) {
        if self.pending.last() == Some(&b'\r') {
            self.pending.pop();
        }
        emit(&self.pending, out);
        self.pending.clear();
    }

    /// Where to cut a full line: before a UTF-8 sequence it ends inside
    /// (bytes that are not UTF-8 are cut anywhere).
    fn cut(&self) -> usize {
        let len = self.pending.len();
        let lead = (len.saturating_sub(3)..len)
            .rev()
            .find(|&at| !is_continuation(self.pending[at]));
        match lead {
            Some(at) if at > 0 && at + sequence_len(self.pending[at]) > len => at,
            _ => len,
        }
    }
}

/// Bytes of the UTF-8 sequence lead byte `b` starts (1 for other bytes).
fn sequence_len(b: u8) -> usize {
    match b {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

fn emit(bytes: &[u8], out: &mut impl FnMut(&str)) {
    out(&String::from_utf8_lossy(bytes));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;
    use std::vec;

    fn words(line: &str) -> Vec<Token> {
        tokenize(line).unwrap()
    }

    fn w(s: &str) -> Token {
        Token::Word(s.into())
    }

    fn ok(line: &str) -> Command {
        parse(line).unwrap().unwrap()
    }

    fn err(line: &str) -> String {
        parse(line).unwrap_err().to_string()
    }

    #[test]
    fn words_split_at_blanks() {
        assert_eq!(words("  ls \t /a  "), vec![w("ls"), w("/a")]);
        assert_eq!(words(""), vec![]);
        assert_eq!(words(" \t "), vec![]);
    }

    #[test]
    fn quotes_make_one_word() {
        assert_eq!(
            words(r#"cat "pattern file 01.bin""#),
            vec![w("cat"), w("pattern file 01.bin")]
        );
        assert_eq!(words(r#"a"b c"d"#), vec![w("ab cd")]);
        assert_eq!(words(r#"cat """#), vec![w("cat"), w("")]);
        assert_eq!(
            words(r#""a\"b" "c\\d" "e\f""#),
            vec![w("a\"b"), w("c\\d"), w("e\\f")]
        );
        assert_eq!(words(r#"echo "a > b""#), vec![w("echo"), w("a > b")]);
        assert_eq!(words("back\\slash"), vec![w("back\\slash")]);
    }

    #[test]
    fn an_open_quote_is_an_error() {
        assert_eq!(tokenize(r#"cat "a b"#), Err(Fault::UnclosedQuote));
        assert_eq!(tokenize(r#"cat "a\""#), Err(Fault::UnclosedQuote));
        assert_eq!(err(r#"cat "a b"#), "cat: unclosed double quote");
    }

    #[test]
    fn redirections_with_and_without_spaces() {
        let to = |append| Token::Redirect(append);
        assert_eq!(
            words("echo hi > f"),
            vec![w("echo"), w("hi"), to(false), w("f")]
        );
        assert_eq!(
            words("echo hi>>f"),
            vec![w("echo"), w("hi"), to(true), w("f")]
        );
        assert_eq!(
            words("echo hi>f"),
            vec![w("echo"), w("hi"), to(false), w("f")]
        );
        assert_eq!(words("a >>> b"), vec![w("a"), to(true), to(false), w("b")]);
    }

    #[test]
    fn blank_lines_and_comments_are_nothing() {
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("   "), Ok(None));
        assert_eq!(parse("# a comment > x"), Ok(None));
        assert_eq!(parse("  #ls"), Ok(None));
    }

    #[test]
    fn every_command_parses() {
        assert_eq!(ok("ls"), Command::Ls(None));
        assert_eq!(ok("ls /"), Command::Ls(Some("/".into())));
        assert_eq!(ok("cat /first.txt"), Command::Cat("/first.txt".into()));
        assert_eq!(ok("cd"), Command::Cd(None));
        assert_eq!(ok("cd .."), Command::Cd(Some("..".into())));
        assert_eq!(ok("pwd"), Command::Pwd);
        assert_eq!(ok("mkdir /notes"), Command::Mkdir("/notes".into()));
        assert_eq!(ok("rm a"), Command::Rm("a".into()));
        assert_eq!(ok("stat \"a b\""), Command::Stat("a b".into()));
        assert_eq!(ok("sync"), Command::Sync);
        assert_eq!(ok("help"), Command::Help);
        for c in COMMANDS {
            if c.min == 0 {
                assert_eq!(ok(c.name).name(), c.name);
            }
        }
        assert_eq!(ok("cat x").name(), "cat");
    }

    #[test]
    fn echo_joins_its_words_and_takes_one_redirection() {
        assert_eq!(
            ok("echo hello from a > /notes/a.txt"),
            Command::Echo {
                text: "hello from a".into(),
                to: Some(Redirect {
                    path: "/notes/a.txt".into(),
                    append: false
                }),
            }
        );
        assert_eq!(
            ok("echo b was here >> /b.log"),
            Command::Echo {
                text: "b was here".into(),
                to: Some(Redirect {
                    path: "/b.log".into(),
                    append: true
                }),
            }
        );
        assert_eq!(
            ok("echo   two  \"  spaces\" "),
            Command::Echo {
                text: "two   spaces".into(),
                to: None
            }
        );
        assert_eq!(
            ok("echo a > \"my file\" b"),
            Command::Echo {
                text: "a b".into(),
                to: Some(Redirect {
                    path: "my file".into(),
                    append: false
                }),
            }
        );
        assert_eq!(
            ok("echo"),
            Command::Echo {
                text: "".into(),
                to: None
            }
        );
        assert_eq!(
            ok("echo \">\""),
            Command::Echo {
                text: ">".into(),
                to: None
            }
        );
    }

    #[test]
    fn errors_name_the_command() {
        assert_eq!(
            err("frobnicate x"),
            "frobnicate: unknown command (help lists the commands)"
        );
        assert_eq!(err("LS"), "LS: unknown command (help lists the commands)");
        assert_eq!(err("cat"), "cat: missing operand (usage: cat PATH)");
        assert_eq!(err("mkdir"), "mkdir: missing operand (usage: mkdir PATH)");
        assert_eq!(err("rm"), "rm: missing operand (usage: rm PATH)");
        assert_eq!(err("stat"), "stat: missing operand (usage: stat PATH)");
        assert_eq!(err("cat a b"), "cat: too many operands (usage: cat PATH)");
        assert_eq!(err("ls a b"), "ls: too many operands (usage: ls [PATH])");
        assert_eq!(err("pwd x"), "pwd: too many operands (usage: pwd)");
        assert_eq!(err("echo hi >"), "echo: > needs a file name");
        assert_eq!(err("echo hi >> > f"), "echo: >> needs a file name");
        assert_eq!(err("echo a > f >> g"), "echo: more than one redirection");
        assert_eq!(err("ls > f"), "ls: only echo writes to a file (> or >>)");
        assert_eq!(err("> f"), "a redirection needs a command before it");
    }

    #[test]
    fn help_lists_every_command_once_aligned() {
        let lines: Vec<String> = help_lines().collect();
        assert_eq!(lines.len(), COMMANDS.len());
        for (line, c) in lines.iter().zip(COMMANDS) {
            assert!(line.starts_with(c.usage), "{line}");
            assert!(line.ends_with(c.about), "{line}");
            let fault = parse(c.name).err().map(|e| e.fault);
            assert_ne!(fault, Some(Fault::Unknown), "{}", c.name);
        }
        let column = lines[0].find(COMMANDS[0].about).unwrap();
        assert!(lines
            .iter()
            .zip(COMMANDS)
            .all(|(l, c)| l.find(c.about) == Some(column)));
        assert_eq!(lookup("echo").map(|c| c.name), Some("echo"));
        assert_eq!(lookup("nope"), None);
    }

    fn split(chunks: &[&[u8]], max: usize) -> Vec<String> {
        let mut lines = Lines::new(max);
        let mut out = Vec::new();
        for c in chunks {
            lines.push(c, |l| out.push(l.to_string()));
        }
        lines.finish(|l| out.push(l.to_string()));
        out
    }

    #[test]
    fn lines_across_chunks() {
        assert_eq!(
            split(&[b"This is the first partition.\n"], 64),
            ["This is the first partition."]
        );
        assert_eq!(
            split(&[b"ab", b"c\nde", b"f\n\ng"], 64),
            ["abc", "def", "", "g"]
        );
        assert_eq!(split(&[b"dos\r\nline\r\n"], 64), ["dos", "line"]);
        assert_eq!(split(&[b""], 64), Vec::<String>::new());
        assert_eq!(split(&[b"\n"], 64), [""]);
    }

    #[test]
    fn long_lines_are_cut_at_character_boundaries() {
        assert_eq!(split(&[b"abcdefghij\n"], 4), ["abcd", "efgh", "ij"]);
        // "aé€" is 1 + 2 + 3 bytes: a cut after 4 would split the euro sign.
        assert_eq!(split(&["aé€b".as_bytes()], 4), ["aé", "€b"]);
        assert_eq!(split(&["a€".as_bytes(), "€".as_bytes()], 5), ["a€", "€"]);
        // Bytes that are not UTF-8 are cut anywhere and shown as U+FFFD.
        assert_eq!(
            split(&[&[0x80, 0x80, 0x80, 0x80, 0x80, b'x']], 4),
            ["\u{fffd}\u{fffd}\u{fffd}\u{fffd}", "\u{fffd}x"]
        );
        assert_eq!(split(&[&[b'a', 0xff, b'\n']], 4), ["a\u{fffd}"]);
    }
}
