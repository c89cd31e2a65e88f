//! The LOG session: a client writes lines, the server prints each one
//! labelled with the client's name as configured (`[client] hello`).
//!
//! | opcode | label | words | reply |
//! |--------|-------|-------|-------|
//! | [`WRITE`] | `WRITE` \| n << [`LEN_SHIFT`] \| [`END`] if the line ends here | n ≤ 32 bytes of the line (`interfaces::session::pack_bytes`) | [`OK`] |
//! | [`PING`] | `PING` | ignored | [`OK`]: does nothing; a session RPC's bare cost (`log-client` with `arg = 1` measures it) |
//!
//! A line longer than 32 bytes goes in several `WRITE`s, the last with
//! [`END`]; the server keeps at most [`MAX_LINE`] bytes of a line and
//! prints it when it ends or is full. Quota: none yet (the server's
//! per-session state is a line buffer from its own heap).

use alloc::vec::Vec;

use abi::{Error, MsgInfo};
use interfaces::session::{pack_bytes, unpack, NAME_BYTES};

use super::{Interface, Label, Session};
use crate::server::answer;
use crate::syscall::Words;

/// A reply: its message info and words.
type Reply = (MsgInfo, Words);

/// Opcode of a console (a Log or Console session at a terminal): the
/// notification, read-only, that the terminal signals when typed lines
/// wait ([`READ`]); one session of a terminal gets it (the first to ask),
/// the others [`NO_INPUT`].
pub const INPUT_NOTIFIER: u64 = 3;
/// Opcode: up to 32 bytes of typed input, whole lines ending in `\n`
/// as they were typed; the reply's label is [`OK`] with the count in bits
/// [`LEN_SHIFT`].., the bytes in the words (`pack_bytes`). 0 bytes: none
/// waits now.
pub const READ: u64 = 4;
/// The reply: this session gets no input (another has it, or the
/// terminal has no keyboard).
pub const NO_INPUT: u64 = 0xe1;

/// The LOG interface.
pub struct Log;

impl Interface for Log {
    const NAME: &'static str = "Log";
}

/// A component's console: the LOG protocol under another name, which the
/// runtime opens for the component's printed lines (`rt::print`) when
/// its scenario routes one — to a terminal, which provides both `Log`
/// and `Console`. Under its own name so that a component's explicit Log
/// sessions and its console stay apart.
pub struct Console;

impl Interface for Console {
    const NAME: &'static str = "Console";
}

/// Opcode: a part of a line.
pub const WRITE: u64 = 1;
/// Opcode: nothing; answered [`OK`] (the session RPC benchmark).
pub const PING: u64 = 2;
/// Not an opcode of the interface: the label of the *raw* calls of the
/// session RPC benchmark, which `log-service` in benchmark mode (`arg =
/// 1`) answers in its receive loop before the session layer sees them
/// (`scenarios/session-rpc.toml`).
pub const RAW_PING: u64 = 0x7e;
/// Shift of the byte count in a `WRITE` label.
pub const LEN_SHIFT: u32 = 8;
/// Flag of a `WRITE` label: the line ends with this part.
pub const END: u64 = 1 << 16;
/// The reply to a request served.
pub const OK: u64 = 0;
/// The reply to a request the server does not know.
pub const UNKNOWN: u64 = 0xe0;
/// The longest line the server keeps.
pub const MAX_LINE: usize = 256;

impl Session<Log> {
    /// Writes `line` (one line, without its newline).
    pub fn write_line(&self, line: &str) -> Result<(), Error> {
        let mut parts = line.as_bytes().chunks(NAME_BYTES).peekable();
        if parts.peek().is_none() {
            return self.write_part(&[], true);
        }
        while let Some(part) = parts.next() {
            self.write_part(part, parts.peek().is_none())?;
        }
        Ok(())
    }

    /// The terminal's input notification into the empty own slot `slot`
    /// ([`INPUT_NOTIFIER`]): to wait on before [`Self::read`].
    pub fn input_notifier(&self, slot: u32) -> Result<abi::CapSlot, Error> {
        let info = MsgInfo::new(INPUT_NOTIFIER, 4, 0).ok_or(Error::InvalidArgument)?;
        let own = abi::caddr::own(slot);
        let (reply, _) = crate::transfer::call_for_cap(self.cap(), info, [0; 4], own)?;
        match reply.label() {
            OK if reply.caps() == 1 => Ok(own),
            _ => Err(Error::InvalidState),
        }
    }

    /// Appends the typed input that waits (up to 32 bytes) to `out`; how
    /// many bytes came (0: none now).
    pub fn read(&self, out: &mut Vec<u8>) -> Result<usize, Error> {
        let (reply, words) = self.call(READ, [0; 4])?;
        if reply.label() & 0xff != OK {
            return Err(Error::InvalidState);
        }
        let n = (((reply.label() >> LEN_SHIFT) & 0xff) as usize).min(NAME_BYTES);
        let (bytes, _) = unpack(&words);
        out.extend_from_slice(&bytes[..n]);
        Ok(n)
    }

    /// A round trip that does nothing ([`PING`]).
    #[inline]
    pub fn ping(&self) -> Result<(), Error> {
        match self.call(PING, [0; 4])?.0.label() {
            OK => Ok(()),
            _ => Err(Error::InvalidArgument),
        }
    }

    pub(crate) fn write_part(&self, part: &[u8], last: bool) -> Result<(), Error> {
        let label = WRITE | (part.len() as u64) << LEN_SHIFT | if last { END } else { 0 };
        let (reply, _) = self.call(label, pack_bytes(part))?;
        if reply.label() == OK {
            Ok(())
        } else {
            Err(Error::InvalidArgument)
        }
    }
}

/// What a LOG server does with a finished line.
pub trait Server {
    /// `client` wrote `line`.
    fn line(&mut self, client: &Label, line: &str);
}

/// A session's state: the line written so far.
#[derive(Default)]
pub struct LineBuffer(Vec<u8>);

impl LineBuffer {
    /// The part of a line written so far (a shell's prompt waits there
    /// for what is typed).
    pub fn pending(&self) -> &[u8] {
        &self.0
    }
}

/// Serves one request of a LOG session (inlined: a `PING` is the
/// session RPC benchmark's bare path; the rest is [`write`]'s).
#[inline(always)]
pub fn dispatch(
    server: &mut impl Server,
    client: &Label,
    state: &mut LineBuffer,
    label: u64,
    words: Words,
) -> (MsgInfo, Words) {
    if label == PING {
        return answer(OK, [0; 4]);
    }
    write(server, client, &mut state.0, label, &words)
}

/// Serves a request that is not a `PING`: a part of `line`.
#[inline(never)]
fn write(s: &mut impl Server, c: &Label, line: &mut Vec<u8>, label: u64, w: &Words) -> Reply {
    if label & 0xff != WRITE {
        return answer(UNKNOWN, [label, 0, 0, 0]);
    }
    let n = ((label >> LEN_SHIFT) & 0xff) as usize;
    let (bytes, _) = unpack(w);
    let room = MAX_LINE - line.len();
    line.extend_from_slice(&bytes[..n.min(NAME_BYTES).min(room)]);
    if label & END != 0 || line.len() == MAX_LINE {
        s.line(c, core::str::from_utf8(line).unwrap_or("(not UTF-8)"));
        line.clear();
    }
    answer(OK, [0; 4])
}
