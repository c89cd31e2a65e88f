//! terminal: a text terminal on a Framebuffer session (docs/display.md,
//! "Terminal"). It opens its `Framebuffer` route (the display driver,
//! later a view of the GUI multiplexer: the same session), fills the
//! screen with the background and serves **Log sessions**
//! (`rt::session::log`) and **Console sessions** — the same protocol,
//! under the name the runtime uses for a component's printed lines
//! (`rt::print`), so a component whose scenario routes `Console` to a
//! terminal shows its output there unchanged (`provides = ["Log",
//! "Console"]`, or either): every line a client writes appears on the
//! screen as `[label] line`, the label as init names the client (never
//! what the client says), in bright white, the line in the client's ANSI
//! colours. Lines longer than the screen wrap; at the bottom the screen
//! scrolls, and the last [`SCROLLBACK`] lines that scrolled off are kept
//! (`term::Terminal`; nothing shows them yet — that needs input).
//!
//! The cells are drawn by `term::Renderer` (Noto Sans Mono, 7×16 pixels
//! at scale 1) into the session's buffer — a scroll moves the buffer's
//! rows up (`Region::copy_within`) and draws only the new line — and
//! only the changed rectangle is refreshed (all of the grid after a
//! scroll) — synchronously, inside the client's `WRITE`: when a
//! client's `write_line` returns, its line is on the screen.
//!
//! **A client cannot disturb the others or the terminal.** Each line is
//! parsed with `term::Controls::ColoursOnly` (SGR colours, TAB: no cursor
//! movement, no erasing, no CR or BS that would write over a label),
//! from a fresh parser state and pen: a colour or a half-written escape
//! sequence ends with its line. The parser is of fixed size, a line is at
//! most `log::MAX_LINE` bytes (longer ones arrive in parts), and the
//! scrollback is bounded: no input grows the terminal's memory.
//!
//! **Keyboard input** (an `Input` route and a reader): the line being
//! typed is shown on the cursor's row with a block cursor after it
//! ([`Console::set_input`]), after the reader's line written so far if
//! it has one — a prompt, as a Linux guest's shell writes it
//! ([`Console::set_prompt`]) — and handed to the reader on Enter. Page Up
//! and Page Down move the view through the scrollback by a screen less a
//! line ([`Console::page`]); new output or a typed key brings it back to
//! the live screen.
//!
//! **Its provider's restart.** When the Framebuffer session's provider
//! stops (the GUI multiplexer or the driver restarted) — a `REFRESH`
//! fails, or the Input session's notification carries the parent's
//! `PROVIDER_GONE` — the terminal reopens both sessions and draws its
//! whole grid again (`tests/gui-restart.toml`).
//!
//! `arg`: the font scale (1 to `term::render::MAX_SCALE`; 0 is 1).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use rt::abi::MsgInfo;
use rt::interfaces::child;
use rt::mmio::Region;
use rt::println;
use rt::session::framebuffer::{FbError, Framebuffer, Mode};
use rt::session::input::{Event, Input};
use rt::session::log::{self, LineBuffer, Log};
use rt::session::{self, Label, Provider, Session};
use term::{Controls, Palette, Renderer, Surface, Terminal};

rt::entry!(main);

/// The Framebuffer session, its donor block and table.
const FB_SLOT: u32 = child::FIRST_FREE;
/// The heap's extra 2 MiB frame.
const HEAP_SLOT: u32 = FB_SLOT + 3;
/// The Input session (its `Input` route, a view's at the GUI
/// multiplexer), its notification, and the notification of the session
/// that reads the typed lines with the copy it got.
const INPUT_SLOT: u32 = HEAP_SLOT + 1;
const INPUT_NOTIFY: u32 = INPUT_SLOT + 1;
const READER_NOTIFY: u32 = INPUT_NOTIFY + 1;
/// The Input session's donor block and table.
const INPUT_BLOCK: u32 = READER_NOTIFY + 2;
const INPUT_TABLE: u32 = INPUT_BLOCK + 1;
/// Slots for the Log sessions, two each: up to 16 clients.
const SESSIONS: core::ops::Range<u32> = INPUT_TABLE + 1..INPUT_TABLE + 1 + 2 * 16;
/// Typed bytes kept for the reader (whole lines); more are dropped.
const TYPED_MAX: usize = 4096;
/// Lines kept after they scroll off: at 146 columns of 8-byte cells
/// about 1.1 MiB, in the heap's extra frame.
const SCROLLBACK: usize = 1000;

/// The session's buffer as a `term::Surface`.
struct Screen<'a> {
    buffer: &'a Region,
    mode: Mode,
}

impl Surface for Screen<'_> {
    fn size(&self) -> (u32, u32) {
        (self.mode.width, self.mode.height)
    }

    fn write_span(&mut self, x: u32, y: u32, pixels: &[u32]) {
        if x >= self.mode.width || y >= self.mode.height {
            return;
        }
        let n = pixels.len().min((self.mode.width - x) as usize);
        let mut offset = y as usize * self.mode.stride as usize + x as usize * 4;
        // Little-endian XRGB8888 in chunks: `Region` copies bytes.
        let mut bytes = [0u8; 256];
        for chunk in pixels[..n].chunks(bytes.len() / 4) {
            for (b, p) in bytes.chunks_exact_mut(4).zip(chunk) {
                b.copy_from_slice(&p.to_le_bytes());
            }
            let len = chunk.len() * 4;
            // Inside the buffer: the mode's rows fit it (`Mode::fits`).
            let _ = self.buffer.copy_from(offset, &bytes[..len]);
            offset += len;
        }
    }

    fn move_up(&mut self, from: u32, to: u32, rows: u32) -> bool {
        let stride = self.mode.stride as usize;
        to < from
            && from.saturating_add(rows) <= self.mode.height
            && self
                .buffer
                .copy_within(
                    from as usize * stride,
                    to as usize * stride,
                    rows as usize * stride,
                )
                .is_some()
    }
}

/// The terminal: the grid, how it is drawn, where.
struct Console {
    term: Terminal,
    renderer: Renderer,
    fb: Session<Framebuffer>,
    buffer: Region,
    mode: Mode,
    /// Refreshes that failed (the provider refused); logged once.
    refresh_failures: u64,
    /// A reconnection to the Framebuffer provider is under way.
    reconnecting: bool,
    /// The line being typed, shown at the cursor's row with a block
    /// cursor after it — `None` for a terminal without keyboard input.
    input: Option<alloc::vec::Vec<u8>>,
    /// The reader's line written so far, labelled (`[vm1] vm1:/# `): a
    /// prompt, shown in front of the line being typed; empty when there
    /// is none.
    prompt: alloc::string::String,
}

impl Console {
    /// Draws what changed and refreshes it.
    fn draw(&mut self) {
        let mut screen = Screen {
            buffer: &self.buffer,
            mode: self.mode,
        };
        let Some(r) = self.renderer.render(&mut self.term, &mut screen) else {
            return;
        };
        match self.fb.refresh(r.x, r.y, r.w, r.h) {
            Ok(()) => {}
            // The provider is gone (the GUI multiplexer or the driver
            // restarted): a new session, the whole grid drawn again.
            Err(FbError::Ipc(_)) if !self.reconnecting => self.reconnect(),
            Err(e) => {
                if self.refresh_failures == 0 {
                    println!("terminal: REFRESH failed: {e}");
                }
                self.refresh_failures += 1;
            }
        }
    }

    /// Reconnects when the Framebuffer session is gone (a `MODE` call
    /// fails): after the Input session's provider stopped, which is
    /// usually the same multiplexer.
    fn check(&mut self) {
        if let Err(FbError::Ipc(_)) = self.fb.mode() {
            self.reconnect();
        }
    }

    /// Opens the Framebuffer session again (init parks the open while its
    /// provider restarts), takes the new buffer and draws the whole grid
    /// into it: the text is the terminal's, not the provider's, so
    /// nothing is lost. A provider that comes back with another mode is
    /// not followed (the grid's size is fixed): the terminal stays dark.
    fn reconnect(&mut self) {
        println!("terminal: its Framebuffer provider stopped; reconnecting");
        self.reconnecting = true;
        let mode = self.mode;
        let again = self.fb.reconnect(mode);
        match again {
            Ok(buffer) => {
                self.buffer = buffer;
                self.renderer.clear(&mut Screen {
                    buffer: &self.buffer,
                    mode,
                });
                self.term.damage_all();
                let mut screen = Screen {
                    buffer: &self.buffer,
                    mode,
                };
                let _ = self.renderer.render(&mut self.term, &mut screen);
                match self.fb.refresh(0, 0, mode.width, mode.height) {
                    Ok(()) => println!("terminal: screen back"),
                    Err(e) => println!("terminal: reconnecting: REFRESH failed: {e}"),
                }
            }
            Err(e) => println!("terminal: reconnecting its Framebuffer failed: {e}"),
        }
        self.reconnecting = false;
    }
}

impl Console {
    /// Shows `line` (the line being typed) and the cursor on the
    /// cursor's row — the row the next output line takes — and draws.
    /// Moves the view `pages` screens (less a line, so one line stays in
    /// sight) back through the scrollback, or forward when negative.
    fn page(&mut self, pages: isize) {
        let rows = self.term.size().1.max(2) as isize;
        self.term.scroll_view(pages.saturating_mul(rows - 1));
        self.draw();
        println!("terminal: the view {} lines back", self.term.view());
    }

    /// The reader `client` has `pending` of a line written: shown as the
    /// prompt of the line being typed (redrawn when it changed).
    fn set_prompt(&mut self, client: &Label, pending: &[u8]) {
        let prompt = if pending.is_empty() {
            alloc::string::String::new()
        } else {
            alloc::format!(
                "[{}] {}",
                client.as_str(),
                alloc::string::String::from_utf8_lossy(pending)
            )
        };
        if prompt != self.prompt && self.input.is_some() {
            self.prompt = prompt;
            self.hide_input();
            self.show_input();
            self.draw();
        }
    }

    fn set_input(&mut self, line: &[u8]) {
        if let Some(shown) = self.input.as_mut() {
            shown.clear();
            shown.extend_from_slice(line);
            self.show_input();
            self.draw();
        }
    }

    /// Writes the line being typed into the cursor's row (erased first):
    /// as much of its end as fits before the last column but one, then
    /// the cursor, an inverse blank, and the grid's cursor back on it.
    /// Only here and in [`Self::hide_input`] are the grid's cursor
    /// controls on: the clients' lines still get colours only.
    fn show_input(&mut self) {
        let Some(line) = self.input.as_ref() else {
            return;
        };
        let t = &mut self.term;
        let room = t.size().0.saturating_sub(2);
        let typed = core::str::from_utf8(line).unwrap_or("");
        let with_prompt;
        let text = if self.prompt.is_empty() {
            typed
        } else {
            with_prompt = alloc::format!("{}{typed}", self.prompt);
            &with_prompt
        };
        let skip = text.chars().count().saturating_sub(room);
        let start = text.char_indices().nth(skip).map_or(text.len(), |(i, _)| i);
        t.set_controls(Controls::Full);
        t.reset_state();
        t.feed(b"\r\x1b[K");
        t.print_plain(&text[start..]);
        t.feed(b"\x1b[7m");
        t.print_plain(" ");
        t.reset_state();
        t.feed(b"\x08");
        t.set_controls(Controls::ColoursOnly);
    }

    /// Erases the cursor's row (the line being typed and the cursor):
    /// an output line goes there.
    fn hide_input(&mut self) {
        if self.input.is_some() {
            let t = &mut self.term;
            t.set_controls(Controls::Full);
            t.reset_state();
            t.feed(b"\r\x1b[K");
            t.set_controls(Controls::ColoursOnly);
        }
    }
}

impl log::Server for Console {
    fn line(&mut self, client: &Label, line: &str) {
        self.hide_input();
        let t = &mut self.term;
        t.reset_state();
        t.feed(b"\x1b[1m");
        t.print_plain("[");
        t.print_plain(client.as_str());
        t.print_plain("] ");
        t.reset_state();
        t.feed(line.as_bytes());
        t.reset_state();
        t.newline();
        self.show_input();
        self.draw();
    }
}

fn main(arg: u64) -> i32 {
    // The reader's notification first, then the heap frame and the Input
    // session's donor block: made after the buffer's donor block (16 MiB,
    // aligned), none would fit the rest of the quota (the untyped's
    // watermark is at its end then).
    let reader = {
        use rt::abi::caddr::own;
        use rt::abi::{ObjectType, Rights};
        rt::syscall::retype(
            own(child::UNTYPED),
            ObjectType::Notification,
            0,
            own(READER_NOTIFY),
            1,
        )
        .and_then(|()| {
            rt::syscall::cap_mint(own(READER_NOTIFY), own(READER_NOTIFY + 1), Rights::READ, 0)
        })
        .is_ok()
    };
    if let Err(e) = rt::heap::grow(HEAP_SLOT, 1) {
        println!("terminal: growing the heap: {e}");
        return 1;
    }
    let input_donor = session::Donor::from_untyped::<Input>(
        rt::abi::caddr::own(child::UNTYPED),
        INPUT_BLOCK,
        INPUT_TABLE,
    );
    let fb = match session::open_from_quota::<Framebuffer>(FB_SLOT, FB_SLOT + 1, FB_SLOT + 2) {
        Ok(s) => s,
        Err(e) => {
            println!("terminal: Framebuffer session: {e}");
            return 1;
        }
    };
    let (mode, buffer) = match fb.mode().and_then(|m| Ok((m, fb.buffer()?))) {
        Ok(mb) => mb,
        Err(e) => {
            println!("terminal: the Framebuffer's mode and buffer: {e}");
            return 1;
        }
    };
    let mut renderer = Renderer::new(Palette::VGA, (arg as u32).max(1));
    let (cols, rows) = renderer.grid_size(mode.width, mode.height);
    let mut term = Terminal::new(cols, rows, SCROLLBACK);
    term.set_controls(Controls::ColoursOnly);
    let (cw, ch) = renderer.cell_size();
    renderer.clear(&mut Screen {
        buffer: &buffer,
        mode,
    });
    let mut console = Console {
        term,
        renderer,
        fb,
        buffer,
        mode,
        refresh_failures: 0,
        reconnecting: false,
        input: None,
        prompt: alloc::string::String::new(),
    };
    // The whole screen: the margins the grid does not cover too.
    if let Err(e) = console.fb.refresh(0, 0, mode.width, mode.height) {
        println!("terminal: REFRESH failed: {e}");
        return 1;
    }
    console.draw();
    println!(
        "terminal: {cols}x{rows} cells of {cw}x{ch} on {}x{}, serving Log and Console",
        mode.width, mode.height
    );
    let keyboard = Keyboard::open(reader, input_donor.ok());
    if keyboard.input.is_some() {
        // The (empty) line being typed and the cursor.
        console.input = Some(alloc::vec::Vec::new());
        console.set_input(&[]);
    }
    let console = core::cell::RefCell::new(console);
    let keyboard = core::cell::RefCell::new(keyboard);
    let mut provider: Provider<(Log, log::Console), Client> =
        Provider::new(SESSIONS.start, SESSIONS.end);
    let mut new = |_: &Label, _| Ok(Client::default());
    let mut dispatch = |client: &Label, state: &mut Client, label, words| match label {
        log::INPUT_NOTIFIER => keyboard.borrow_mut().notifier(state),
        log::READ => keyboard.borrow_mut().read(state),
        _ => {
            let mut console = console.borrow_mut();
            let reply = log::dispatch(&mut *console, client, &mut state.line, label, words);
            if state.reader {
                console.set_prompt(client, state.line.pending());
            }
            reply
        }
    };
    let mut reply = None;
    loop {
        let received = provider.next(reply.take());
        if let Ok((word, info, _)) = received {
            if info.label() == rt::abi::LABEL_NOTIFICATION {
                if rt::session::input::provider_gone(word) {
                    // Its view's provider stopped: the screen first (the
                    // same multiplexer, most likely), then the keyboard.
                    console.borrow_mut().check();
                    keyboard.borrow_mut().reconnect();
                } else {
                    let mut kb = keyboard.borrow_mut();
                    let typed = kb.typed();
                    if typed.line {
                        console.borrow_mut().set_input(&kb.line);
                    }
                    if typed.pages != 0 {
                        console.borrow_mut().page(typed.pages);
                    }
                }
                continue;
            }
        }
        reply = provider.handle(received, &mut new, &mut dispatch);
    }
}

/// Linux input codes of the keys that page (`interfaces::input`).
const KEY_PAGEUP: u16 = 104;
const KEY_PAGEDOWN: u16 = 109;

/// What a batch of input events changed.
#[derive(Default)]
struct Typed {
    /// The line being typed.
    line: bool,
    /// Pages to move the view back (positive) or forward.
    pages: isize,
}

/// A session's state: its line so far, and whether it reads the input.
#[derive(Default)]
struct Client {
    line: LineBuffer,
    reader: bool,
}

/// The terminal's keyboard: the Input session of its view (when its
/// scenario routes `Input`), the line being typed and the typed lines
/// its reader has not taken yet.
struct Keyboard {
    input: Option<Session<Input>>,
    line: alloc::vec::Vec<u8>,
    ready: alloc::collections::VecDeque<u8>,
    /// A session took the input (`INPUT_NOTIFIER`).
    taken: bool,
}

impl Keyboard {
    /// The Input session with its notification bound to the terminal's
    /// thread, or none (no `Input` route, or no `own = ["thread"]`).
    fn open(reader: bool, donor: Option<session::Donor>) -> Keyboard {
        use rt::abi::caddr::own;
        let (true, Some(donor)) = (reader, donor) else {
            println!("terminal: no keyboard input: no notification for its reader or no memory for its Input session");
            return Keyboard {
                input: None,
                line: alloc::vec::Vec::new(),
                ready: alloc::collections::VecDeque::new(),
                taken: false,
            };
        };
        let input = match session::open_donating::<Input>(INPUT_SLOT, donor) {
            // No `Input` route: a terminal for output alone.
            Err(_) => None,
            Ok(i) => {
                let bound = i
                    .notifier(INPUT_NOTIFY)
                    .and_then(|n| rt::syscall::bind_notification(own(child::OWN_THREAD), n));
                match bound {
                    Ok(()) => {
                        println!("terminal: keyboard input from its Input session");
                        Some(i)
                    }
                    Err(e) => {
                        println!(
                            "terminal: no keyboard input: its Input session's notification: {e}"
                        );
                        None
                    }
                }
            }
        };
        Keyboard {
            input,
            line: alloc::vec::Vec::new(),
            ready: alloc::collections::VecDeque::new(),
            taken: false,
        }
    }

    /// The Input session's provider stopped: opens the session again
    /// (parked while it restarts) and binds the new notification (the
    /// old one went with the old donation). The line being typed is
    /// kept; keys typed meanwhile are lost.
    fn reconnect(&mut self) {
        let Some(input) = self.input.as_mut() else {
            return;
        };
        println!("terminal: its Input provider stopped; reconnecting");
        let again = input
            .reopen()
            .map_err(|e| alloc::format!("{e}"))
            .and_then(|()| {
                input
                    .notifier(INPUT_NOTIFY)
                    .and_then(|n| {
                        rt::syscall::bind_notification(rt::abi::caddr::own(child::OWN_THREAD), n)
                    })
                    .map_err(|e| alloc::format!("its notification: {e}"))
            });
        match again {
            Ok(()) => println!("terminal: keyboard back"),
            Err(e) => println!("terminal: reconnecting its Input session failed: {e}"),
        }
    }

    /// Keys arrived: characters join the line, Enter hands it to the
    /// reader, Backspace takes one back, Page Up and Down page through
    /// the scrollback. What to show again.
    fn typed(&mut self) -> Typed {
        let mut typed = Typed::default();
        let Some(input) = self.input.as_ref() else {
            return typed;
        };
        let mut lines = false;
        for e in input.events().unwrap_or_default() {
            let c = match e {
                Event::Press { ch: Some(c), .. } => c,
                Event::Press {
                    code: KEY_PAGEUP, ..
                } => {
                    typed.pages = typed.pages.saturating_add(1);
                    continue;
                }
                Event::Press {
                    code: KEY_PAGEDOWN, ..
                } => {
                    typed.pages = typed.pages.saturating_sub(1);
                    continue;
                }
                _ => continue,
            };
            typed.line = true;
            match c {
                '\n' => {
                    if self.ready.len() + self.line.len() < TYPED_MAX {
                        self.ready.extend(self.line.drain(..));
                        self.ready.push_back(b'\n');
                        lines = true;
                    }
                    self.line.clear();
                }
                '\u{8}' => {
                    self.line.pop();
                }
                c if !c.is_control() && self.line.len() < log::MAX_LINE => {
                    let mut b = [0u8; 4];
                    self.line
                        .extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                }
                _ => {}
            }
        }
        if lines && self.taken {
            let _ = rt::syscall::signal(rt::abi::caddr::own(READER_NOTIFY));
        }
        typed
    }

    /// `INPUT_NOTIFIER` from `client`: the first session to ask becomes
    /// the reader and gets the notification's read-only copy (made at
    /// start). The reader stays the reader for the terminal's life.
    fn notifier(&mut self, client: &mut Client) -> (MsgInfo, rt::syscall::Words) {
        if self.input.is_none() || (self.taken && !client.reader) {
            return rt::server::answer(log::NO_INPUT, [0; 4]);
        }
        self.taken = true;
        client.reader = true;
        rt::transfer::set_send_cap(rt::abi::caddr::own(READER_NOTIFY + 1));
        (MsgInfo::new(log::OK, 0, 1).unwrap_or_default(), [0; 4])
    }

    /// `READ` from `client`: up to 32 typed bytes, for the reader alone.
    fn read(&mut self, client: &Client) -> (MsgInfo, rt::syscall::Words) {
        if !client.reader {
            return rt::server::answer(log::NO_INPUT, [0; 4]);
        }
        let n = self.ready.len().min(rt::interfaces::session::NAME_BYTES);
        let bytes: alloc::vec::Vec<u8> = self.ready.drain(..n).collect();
        let label = log::OK | (n as u64) << log::LEN_SHIFT;
        rt::server::answer(label, rt::interfaces::session::pack_bytes(&bytes))
    }
}
