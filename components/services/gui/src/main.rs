//! gui: the GUI multiplexer (Genode's nitpicker is the model). It holds
//! the display driver's Framebuffer session and the input driver's Input
//! session and gives each of its clients a Framebuffer and an Input
//! session of its own onto a **view** of the screen — one component
//! providing both interfaces (`provides = ["Framebuffer", "Input"]`; the
//! parent names the interface of each session it opens).
//!
//! - **The screen** is the display driver's mode, or the one its config
//!   asks for (`screen = { w = 1920, h = 1080 }`: the multiplexer then
//!   donates what that mode's buffer needs, `framebuffer::open_for`, and
//!   sets it; a restarted driver is asked for it again).
//! - **Views** come from its config, by client label (the client's name
//!   in the scenario, which init gives and no client can choose):
//!   `views = [{ label = "a", x = 0, y = 0, w = 512, h = 384 }, ...]`. A
//!   client without a view is refused. Each view is a title bar the
//!   multiplexer draws with the label — so no client can forge another's
//!   — and a content area: the client's Framebuffer session has exactly
//!   its size (`MODE`; `SET_MODE` to anything else is refused).
//! - **Isolation.** A client's buffer is its own memory (from its
//!   donation); the multiplexer maps copies of its frames and copies from
//!   them onto the screen, never the other way: no client sees another's
//!   pixels. A `REFRESH` is clipped to the client's content area, so
//!   drawing outside its view changes nothing on the screen.
//! - **Stacking and redraw.** A refresh redraws that screen rectangle
//!   from the bottom view to the top one (the background where no view
//!   is, then each view's title and content), then refreshes it at the
//!   driver.
//! - **Input.** Keys go to the focused view's client alone; mouse motion
//!   and buttons too. When the scenario routes `Pointer` (a tablet's
//!   driver, `virtio-input`), its absolute positions put the pointer
//!   there, scaled to the screen, and the focused client gets the motion
//!   that made as relative `Motion` (a second relay thread,
//!   [`pointer_relay`], wakes the main thread for it). A click focuses
//!   the view under the pointer and raises it; F12 (not passed on) moves
//!   the focus to the next view. The focused view's title is blue, the
//!   others' grey.
//! - **The cursor** is an arrow at the pointer, drawn by the multiplexer
//!   as the last layer of every redraw, so it stays on top of a client's
//!   refresh beneath it and no client ever sees it in its buffer (it is
//!   drawn into the screen only). A motion redraws the cursor's old place
//!   and its new one ([`ucore::gui::cursor_damage`]), nothing else.
//! - **Drivers restarted.** Both drivers' sessions have notifications
//!   made from the multiplexer's donations, which the parent signals
//!   (`PROVIDER_GONE`) when a driver stops. The Input session's is bound
//!   to the thread: the multiplexer reopens the session at once
//!   ([`Gui::reconnect_input`]). The display session's is waited on by a
//!   relay thread ([`relay`]), which wakes the main thread: it reopens
//!   the Framebuffer session and draws the whole screen again
//!   ([`Gui::reconnect`]; a refresh that finds the driver gone first does
//!   the same). Its clients keep their sessions either way.
//!
//! Prints `gui: serving N views on WxH (focus: LABEL; F12 moves the
//! focus)`, `gui: focus: LABEL` on each change and `gui: every view
//! drawn` once each view's client has refreshed at least once.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::sync::atomic::{AtomicU64, Ordering};

use rt::abi::caddr::own;
use rt::abi::{MsgInfo, ObjectType, Rights, LABEL_NOTIFICATION};
use rt::interfaces::child;
use rt::mmio::Region;
use rt::println;
use rt::server::answer;
use rt::session::framebuffer::{self as fb, FbError, Framebuffer, Mode, ServedBuffer};
use rt::session::input::{self, Event, Input, Pointer, ServedQueue};
use rt::session::{self, Donated, Donor, Label, Provider, Session, REFUSED_FULL};
use rt::syscall::{self, Words};
use ucore::gui::{client_rect, cursor_damage, cursor_pixel, Layout, Rect, View, MAX_VIEWS};

rt::entry!(main);

/// The driver's Framebuffer session, its donor block and table.
const FB: u32 = child::FIRST_FREE;
/// The input driver's session, its notification, donor block and table.
const INPUT: u32 = FB + 3;
const INPUT_NOTIFY: u32 = INPUT + 1;
const INPUT_BLOCK: u32 = INPUT + 2;
const INPUT_TABLE: u32 = INPUT + 3;
/// The relay thread ([`relay`]): the notification it waits on while the
/// display is reconnected, its badged copy of the main thread's bound
/// notification, its thread and its stack's frames.
const RESUME: u32 = INPUT_TABLE + 1;
const RELAY_SIGNAL: u32 = RESUME + 1;
const RELAY_THREAD: u32 = RELAY_SIGNAL + 1;
const RELAY_FRAMES: u32 = RELAY_THREAD + 1;
/// The tablet driver's Pointer session (when routed), its notification,
/// donor block and table; its relay thread ([`pointer_relay`]): the
/// notification it waits on while the session is reopened, its badged
/// copy of the main thread's bound notification, its thread and stack.
const POINTER: u32 = RELAY_FRAMES + rt::thread::PAGES as u32;
const POINTER_NOTIFY: u32 = POINTER + 1;
const POINTER_BLOCK: u32 = POINTER + 2;
const POINTER_TABLE: u32 = POINTER + 3;
const POINTER_RESUME: u32 = POINTER + 4;
const POINTER_SIGNAL: u32 = POINTER + 5;
const POINTER_THREAD: u32 = POINTER + 6;
const POINTER_FRAMES: u32 = POINTER + 7;
/// The config ROM's session and frames.
const ROM_SLOT: u32 = POINTER_FRAMES + rt::thread::PAGES as u32;
const FIRST_FRAME: u32 = ROM_SLOT + 1;
const END_FRAME: u32 = FIRST_FRAME + 16;
/// Per view: the multiplexer's copies of its buffer frames (a view's
/// Input notification is made from its client's donation).
const VIEW_SLOTS: u32 = END_FRAME;
const PER_VIEW: u32 = fb::MAX_FRAMES;
/// The provider's slots: two per session, two sessions per view.
const SESSION_SLOT: u32 = VIEW_SLOTS + PER_VIEW * MAX_VIEWS as u32;
const SESSION_END: u32 = SESSION_SLOT + 4 * MAX_VIEWS as u32;
/// Where the config ROM is mapped.
const CONFIG_VA: u64 = 0x30_0000_0000;

/// The relay thread's priority: the scenario default (a thread may not
/// place one above itself).
const RELAY_PRIORITY: u8 = 100;
/// The badge of the relay's copy of the main thread's notification.
const RELAY_BIT: u64 = 1 << 1;
/// The badge of the pointer relay's copy of the main thread's
/// notification.
const POINTER_BIT: u64 = 1 << 2;
/// What the pointer relay saw ([`POINTER_EVENTS`]): events, or the
/// driver gone.
const POINTER_ARRIVED: u64 = 1 << 0;
const POINTER_GONE: u64 = 1 << 1;
/// The Pointer session's notification (the pointer relay waits on it).
static POINTER_WAIT: AtomicU64 = AtomicU64::new(0);
/// What the pointer relay saw since the main thread last looked.
static POINTER_EVENTS: AtomicU64 = AtomicU64::new(0);
/// What the relay saw on the display's notification ([`DISPLAY_EVENTS`]).
const DISPLAY_GONE: u64 = 1 << 0;
const DISPLAY_MODE: u64 = 1 << 1;
/// The display's notification (the relay waits on it), set before the
/// relay first resumes.
static RELAY_WAIT: AtomicU64 = AtomicU64::new(0);
/// What the relay saw since the main thread last looked.
static DISPLAY_EVENTS: AtomicU64 = AtomicU64::new(0);

/// `KEY_F12`: moves the focus.
const FOCUS_KEY: u16 = 88;

const BACKGROUND: u32 = 0x20_28_30;
const TITLE_FOCUSED: u32 = 0x30_60_c0;
const TITLE_OTHER: u32 = 0x50_50_50;
const TEXT_FOCUSED: u32 = 0xff_ff_ff;
const TEXT_OTHER: u32 = 0xc0_c0_c0;
/// A view whose client has no buffer yet.
const EMPTY_VIEW: u32 = 0;

/// What the multiplexer keeps per view.
#[derive(Default)]
struct Client {
    /// The Framebuffer session's donation, while it is open.
    donated: Option<Donated>,
    /// The client's buffer with the multiplexer's mapping of it.
    buffer: Option<ServedBuffer>,
    drawn: bool,
    /// The Input session's queue, while it is open.
    input: Option<ServedQueue>,
}

struct Gui {
    layout: Layout,
    screen: Region,
    screen_mode: Mode,
    fb: Session<Framebuffer>,
    input: Session<Input>,
    /// The tablet's session, when the scenario routes `Pointer`.
    pointer: Option<Session<Pointer>>,
    clients: Vec<Client>,
    all_drawn: bool,
    /// A reconnection to the display is under way.
    reconnecting: bool,
    /// The relay waits on `RESUME` for a display session that answers
    /// (a reconnection failed: the driver is gone for good, or not yet).
    relay_parked: bool,
}

/// A session of the multiplexer's: the view's index.
enum Open<'a> {
    Fb(usize, &'a RefCell<Gui>),
    Input(usize, &'a RefCell<Gui>),
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        match *self {
            Open::Fb(v, gui) => gui.borrow_mut().close_fb(v),
            Open::Input(v, gui) => gui.borrow_mut().close_input(v),
        }
    }
}

fn main(_: u64) -> i32 {
    let gui = match start() {
        Ok(g) => RefCell::new(g),
        Err(e) => {
            println!("gui: {e}");
            return 1;
        }
    };
    let mut provider: Provider<(Framebuffer, Input), Open<'_>> =
        Provider::new(SESSION_SLOT, SESSION_END);
    let mut new =
        |label: &Label, donated: Option<Donated>| gui.borrow_mut().open(label, donated, &gui);
    let mut dispatch = |_: &Label, open: &mut Open<'_>, op, words: Words| match *open {
        Open::Fb(v, g) => g.borrow_mut().fb_request(v, op, words),
        Open::Input(v, g) => g.borrow_mut().input_request(v, op),
    };
    let mut reply = None;
    loop {
        let received = provider.next(reply.take());
        if let Ok((word, info, _)) = received {
            if info.label() == LABEL_NOTIFICATION {
                let mut g = gui.borrow_mut();
                if input::provider_gone(word) {
                    g.reconnect_input();
                } else if word & !(RELAY_BIT | POINTER_BIT) != 0 {
                    g.input_arrived();
                }
                // The pointer relay's news (its bit, or set while the
                // input was being reconnected).
                g.pointer_events();
                // The relay's news of the display (its bit, or set while
                // the input was being reconnected).
                g.display_events();
                continue;
            }
        }
        reply = provider.handle(received, &mut new, &mut dispatch);
    }
}

/// Reads the config, takes the screen and the input, draws the views.
fn start() -> Result<Gui, String> {
    use alloc::format;
    // SAFETY: CONFIG_VA.. is used by nothing else of this program.
    let config = unsafe { rt::session::rom::config(ROM_SLOT, FIRST_FRAME, END_FRAME, CONFIG_VA) }
        .map_err(|e| format!("config ROM: {e}"))?;
    // The input's donor block first: after the display's (16 MiB for the
    // least donation, aligned) the quota has no room left.
    let input_donor = Donor::from_untyped::<Input>(own(child::UNTYPED), INPUT_BLOCK, INPUT_TABLE)
        .map_err(|e| format!("the Input session's donation: {e}"))?;
    let pointer_donor =
        Donor::from_untyped::<Pointer>(own(child::UNTYPED), POINTER_BLOCK, POINTER_TABLE)
            .map_err(|e| format!("the Pointer session's donation: {e}"))?;
    start_relay()?;
    // Optional: without a `Pointer` route init refuses it (silently).
    // Before the display's session, as the relays: their thread and
    // notification come from the quota the display's donation leaves
    // none of.
    let pointer = match session::open_donating::<Pointer>(POINTER, pointer_donor) {
        Ok(p) => {
            start_pointer_relay(&p)?;
            println!("gui: a tablet's Pointer session too");
            Some(p)
        }
        Err(_) => None,
    };
    // `screen = { w = 1920, h = 1080 }`: that mode, with a donation that
    // holds it; without, the driver's own in the least donation.
    let asked = config.get("screen").and_then(|v| v.as_table()).map(|t| {
        let side = |k| t.get(k).and_then(|v| v.as_integer()).unwrap_or(0);
        (side("w"), side("h"))
    });
    let fb = match asked {
        Some((w, h)) => {
            let (w, h) = (u32::try_from(w).unwrap_or(0), u32::try_from(h).unwrap_or(0));
            let fb = fb::open_for(FB, FB + 1, FB + 2, w, h)
                .map_err(|e| format!("the display's Framebuffer session for {w}x{h}: {e}"))?;
            fb.set_mode(w, h)
                .map_err(|e| format!("the display's mode {w}x{h}: {e}"))?;
            fb
        }
        None => session::open_from_quota::<Framebuffer>(FB, FB + 1, FB + 2)
            .map_err(|e| format!("the display's Framebuffer session: {e}"))?,
    };
    let screen_mode = fb.mode().map_err(|e| format!("MODE: {e}"))?;
    let screen = fb.buffer().map_err(|e| format!("BUFFER: {e}"))?;
    let mut layout = Layout::new(screen_mode.width, screen_mode.height);
    let views = config.get("views").and_then(|v| v.as_array());
    for (i, entry) in views.iter().flat_map(|a| a.iter()).enumerate() {
        let Some(t) = entry.as_table() else {
            println!("gui: config: views[{i}] is not a table; left out");
            continue;
        };
        let int = |k: &str| {
            t.get(k)
                .and_then(|v| v.as_integer())
                .and_then(|n| u32::try_from(n).ok())
        };
        let (Some(label), Some(x), Some(y), Some(w), Some(h)) = (
            t.get("label").and_then(|v| v.as_str()),
            int("x"),
            int("y"),
            int("w"),
            int("h"),
        ) else {
            println!("gui: config: views[{i}] needs label, x, y, w and h; left out");
            continue;
        };
        match layout.add(label, Rect::new(x, y, w, h)) {
            Ok(v) => {
                let o = layout.view(v).map(|v| v.outer).unwrap_or_default();
                println!("gui: view {label} at {},{} {}x{}", o.x, o.y, o.w, o.h);
            }
            Err(e) => println!("gui: config: view {label}: {e:?}; left out"),
        }
    }
    let input = session::open_donating::<Input>(INPUT, input_donor)
        .map_err(|(e, _)| format!("Input session: {e}"))?;
    bind_input(&input)?;
    let wait_on = fb
        .notification()
        .ok_or("the display's Framebuffer session has no notification")?;
    RELAY_WAIT.store(wait_on, Ordering::SeqCst);
    // The relay waits for its first resume: the display's notification is
    // there now.
    let _ = syscall::signal(own(RESUME));
    let mut gui = Gui {
        input,
        pointer,
        clients: (0..MAX_VIEWS).map(|_| Client::default()).collect(),
        layout,
        screen,
        screen_mode,
        fb,
        all_drawn: false,
        reconnecting: false,
        relay_parked: false,
    };
    let whole = gui.layout.screen();
    gui.redraw(whole);
    let focus = gui.focus_label();
    println!(
        "gui: serving {} views on {}x{} (focus: {focus}; F12 moves the focus)",
        gui.layout.stacking().count(),
        screen_mode.width,
        screen_mode.height
    );
    Ok(gui)
}

/// Takes the input session's notification and binds it to the thread:
/// its signals (keys; the parent's `PROVIDER_GONE`; the relay's
/// [`RELAY_BIT`]) end the `Recv`. The relay's badged write copy is
/// minted from the notification in the donation (the client's, with all
/// rights) into [`RELAY_SIGNAL`].
fn bind_input(input: &Session<Input>) -> Result<(), String> {
    let notify = input
        .notifier(INPUT_NOTIFY)
        .map_err(|e| alloc::format!("Input NOTIFIER: {e}"))?;
    syscall::bind_notification(own(child::OWN_THREAD), notify).map_err(|e| {
        alloc::format!("binding the input's notification: {e}; is `own = [\"thread\"]` given?")
    })?;
    let full = input
        .donated_slot(0)
        .ok_or("the Input session has no donation")?;
    syscall::cap_mint(full, own(RELAY_SIGNAL), Rights::WRITE, RELAY_BIT)
        .map_err(|e| alloc::format!("the relay's signal: {e}"))?;
    syscall::cap_mint(full, own(POINTER_SIGNAL), Rights::WRITE, POINTER_BIT)
        .map_err(|e| alloc::format!("the pointer relay's signal: {e}"))
}

/// Takes the Pointer session's notification for the pointer relay and
/// starts it; it waits on [`POINTER_RESUME`] after the driver stopped.
fn start_pointer_relay(pointer: &Session<Pointer>) -> Result<(), String> {
    let notify = pointer
        .notifier(POINTER_NOTIFY)
        .map_err(|e| alloc::format!("Pointer NOTIFIER: {e}"))?;
    POINTER_WAIT.store(notify, Ordering::SeqCst);
    spawn_relay(
        "pointer relay",
        pointer_relay,
        POINTER_RESUME,
        POINTER_THREAD,
        POINTER_FRAMES,
    )
}

/// Waits on the Pointer session's notification — the thread's bound one
/// is the Input session's, and a thread binds one — and passes each
/// wake-up on to the main thread ([`POINTER_EVENTS`], then a signal with
/// [`POINTER_BIT`]). After the driver is gone (the parent's
/// `PROVIDER_GONE`, or the notification itself gone) it waits on
/// [`POINTER_RESUME`] until the main thread has reopened the session:
/// the new notification is in the same slot. The display's [`relay`] is
/// the model.
extern "C" fn pointer_relay(_: u64) -> ! {
    loop {
        let event = match syscall::wait(POINTER_WAIT.load(Ordering::SeqCst)) {
            Ok(word) if !input::provider_gone(word) => POINTER_ARRIVED,
            _ => POINTER_GONE,
        };
        POINTER_EVENTS.fetch_or(event, Ordering::SeqCst);
        let _ = syscall::signal(own(POINTER_SIGNAL));
        if event == POINTER_GONE && syscall::wait(own(POINTER_RESUME)).is_err() {
            syscall::thread_exit(1);
        }
    }
}

/// Makes the display's relay thread, which waits for its first resume.
fn start_relay() -> Result<(), String> {
    spawn_relay("relay", relay, RESUME, RELAY_THREAD, RELAY_FRAMES)
}

/// Makes a relay thread running `entry` in own slots `thread` and
/// `frames..`, and the notification it waits on to resume in `resume`;
/// `what` names it in the error.
fn spawn_relay(
    what: &str,
    entry: extern "C" fn(u64) -> !,
    resume: u32,
    thread: u32,
    frames: u32,
) -> Result<(), String> {
    let slots = rt::thread::Slots {
        thread: own(thread),
        frames: own(frames),
    };
    syscall::retype(
        own(child::UNTYPED),
        ObjectType::Notification,
        0,
        own(resume),
        1,
    )
    .map_err(|e| alloc::format!("the {what}'s notification: {e}"))?;
    rt::thread::spawn(
        entry,
        0,
        slots,
        rt::thread::Placement::first_cpu(RELAY_PRIORITY),
    )
    .map(drop)
    .map_err(|e| alloc::format!("the {what} thread: {e}"))
}

/// Waits on the display session's notification — made by the driver in
/// the multiplexer's donation, so it cannot be the thread's bound one
/// too (that is the input's) — and passes each wake-up on to the main
/// thread ([`DISPLAY_EVENTS`], then a signal with [`RELAY_BIT`]): a mode
/// change, or the driver gone (the parent's `PROVIDER_GONE`, or the
/// notification itself gone with a reconnection under way). After the
/// driver is gone it waits on [`RESUME`] until the main thread has
/// reconnected: the new session's notification is in the same slot
/// (nic-switch's relay is the model).
extern "C" fn relay(_: u64) -> ! {
    loop {
        if syscall::wait(own(RESUME)).is_err() {
            syscall::thread_exit(1);
        }
        let wait_on = RELAY_WAIT.load(Ordering::SeqCst);
        loop {
            let event = match syscall::wait(wait_on) {
                Ok(word) if !input::provider_gone(word) => DISPLAY_MODE,
                _ => DISPLAY_GONE,
            };
            DISPLAY_EVENTS.fetch_or(event, Ordering::SeqCst);
            // Fails while the input is reconnected: the main thread looks
            // at the events after that too.
            let _ = syscall::signal(own(RELAY_SIGNAL));
            if event == DISPLAY_GONE {
                break;
            }
        }
    }
}

impl Gui {
    fn focus_label(&self) -> &str {
        self.layout
            .focus()
            .and_then(|f| self.layout.view(f))
            .map_or("none", |v| v.label.as_str())
    }

    /// A session for `label`: its interface says which kind.
    fn open<'a>(
        &mut self,
        label: &Label,
        donated: Option<Donated>,
        me: &'a RefCell<Gui>,
    ) -> Result<Open<'a>, u64> {
        let Some(v) = self.layout.view_of(label.as_str()) else {
            println!("gui: no view for {}: refused", label.as_str());
            return Err(session_refused());
        };
        let c = &mut self.clients[v];
        match label.interface() {
            0 if c.donated.is_some() => Err(REFUSED_FULL),
            0 => {
                let donated = donated.ok_or(rt::interfaces::session::REFUSED_QUOTA)?;
                // A view's buffer is its content's size: a donation too
                // small for it is refused at BUFFER.
                fb::open_notification(&donated).map(drop).map_err(|why| {
                    println!(
                        "gui: Framebuffer session for {}: {why}; refused",
                        label.as_str()
                    );
                    rt::interfaces::session::REFUSED_QUOTA
                })?;
                c.donated = Some(donated);
                println!("gui: Framebuffer session for {}", label.as_str());
                Ok(Open::Fb(v, me))
            }
            _ if c.input.is_some() => Err(REFUSED_FULL),
            _ => {
                let donated = donated.ok_or(rt::interfaces::session::REFUSED_QUOTA)?;
                let queue = ServedQueue::open(donated).map_err(|why| {
                    println!("gui: Input session for {}: {why}; refused", label.as_str());
                    rt::interfaces::session::REFUSED_QUOTA
                })?;
                c.input = Some(queue);
                println!("gui: Input session for {}", label.as_str());
                Ok(Open::Input(v, me))
            }
        }
    }

    fn content_mode(&self, v: usize) -> Option<Mode> {
        let c = self.layout.view(v)?.content();
        Some(Mode {
            width: c.w,
            height: c.h,
            stride: c.w * 4,
        })
    }

    fn fb_request(&mut self, v: usize, op: u64, words: Words) -> (MsgInfo, Words) {
        let Some(mode) = self.content_mode(v) else {
            return answer(fb::REFUSED, [0; 4]);
        };
        match op {
            fb::MODE => answer(fb::OK, mode.words()),
            fb::SET_MODE
                if words[0] == u64::from(mode.width) && words[1] == u64::from(mode.height) =>
            {
                answer(fb::OK, mode.words())
            }
            fb::SET_MODE => answer(fb::REFUSED, [0; 4]),
            fb::BUFFER => {
                let c = &mut self.clients[v];
                if c.buffer.is_none() {
                    let made = c.donated.ok_or("no donation").and_then(|d| {
                        ServedBuffer::make(&d, mode, VIEW_SLOTS + v as u32 * PER_VIEW)
                    });
                    match made {
                        Ok(b) => c.buffer = Some(b),
                        Err(why) => {
                            println!("gui: no buffer for view {v}: {why}");
                            return answer(fb::REFUSED, [0; 4]);
                        }
                    }
                }
                let frames = c.buffer.as_ref().map_or(0, ServedBuffer::frames);
                answer(fb::OK, [frames.into(), mode.bytes(), 0, 0])
            }
            fb::REFRESH => {
                if self.clients[v].buffer.is_none() {
                    return answer(fb::NO_BUFFER, [0; 4]);
                }
                let Some(view) = self.layout.view(v) else {
                    return answer(fb::REFUSED, [0; 4]);
                };
                let r = client_rect(view, words[0], words[1], words[2], words[3]);
                self.redraw(r);
                self.clients[v].drawn = true;
                if !self.all_drawn && self.layout.stacking().all(|(i, _)| self.clients[i].drawn) {
                    self.all_drawn = true;
                    println!("gui: every view drawn");
                }
                answer(fb::OK, [0; 4])
            }
            _ => answer(fb::UNKNOWN, [op, 0, 0, 0]),
        }
    }

    fn close_fb(&mut self, v: usize) {
        let c = &mut self.clients[v];
        c.buffer = None;
        c.donated = None;
        c.drawn = false;
        // Its content is gone from the screen too.
        if let Some(r) = self.layout.view(v).map(View::content) {
            self.redraw(r);
        }
    }

    fn input_request(&mut self, v: usize, op: u64) -> (MsgInfo, Words) {
        match self.clients[v].input.as_mut() {
            Some(q) => q.request(op),
            None => answer(input::UNKNOWN, [op, 0, 0, 0]),
        }
    }

    fn close_input(&mut self, v: usize) {
        self.clients[v].input = None;
    }

    /// The input driver signalled: its events, routed.
    fn input_arrived(&mut self) {
        let events = self.input.events().unwrap_or_default();
        self.route(events);
    }

    /// What the pointer relay saw: the tablet's events routed, or its
    /// driver gone — the session reopened at the restarted driver (init
    /// parks the open while it restarts) and the relay resumed on the new
    /// notification.
    fn pointer_events(&mut self) {
        let seen = POINTER_EVENTS.swap(0, Ordering::SeqCst);
        let Some(pointer) = self.pointer.as_mut() else {
            return;
        };
        if seen & POINTER_GONE != 0 {
            println!("gui: the pointer driver stopped; reconnecting");
            let again = pointer
                .reopen()
                .map_err(|e| alloc::format!("{e}"))
                .and_then(|()| {
                    pointer
                        .notifier(POINTER_NOTIFY)
                        .map_err(|e| alloc::format!("Pointer NOTIFIER: {e}"))
                });
            match again {
                Ok(notify) => {
                    POINTER_WAIT.store(notify, Ordering::SeqCst);
                    let _ = syscall::signal(own(POINTER_RESUME));
                    println!("gui: pointer back");
                }
                Err(e) => println!("gui: reconnecting to the pointer driver failed: {e}"),
            }
        }
        if seen != 0 {
            let events = self.pointer.as_ref().map(Session::events);
            self.route(events.and_then(Result::ok).unwrap_or_default());
        }
    }

    /// Routes a batch of input events: the focus key and clicks change the
    /// focus, motion moves the pointer, the rest goes to the focused
    /// client.
    fn route(&mut self, events: Vec<Event>) {
        // The cursor is redrawn once for the batch: intermediate places
        // would be on the screen for no one to see.
        let cursor_was = self.layout.cursor();
        for e in events {
            match e {
                Event::Press {
                    code: FOCUS_KEY, ..
                } => {
                    let changed = self.layout.cycle_focus();
                    self.focus_changed(&changed);
                }
                Event::Release { code: FOCUS_KEY } => {}
                Event::Button { pressed: true, .. } => {
                    let changed = self.layout.click();
                    self.focus_changed(&changed);
                    self.forward(e);
                }
                Event::Motion { dx, dy } => {
                    self.layout.move_pointer(dx.into(), dy.into());
                    self.forward(e);
                }
                // A tablet's position: the client gets the motion it made
                // (clients know relative motion only).
                Event::Absolute { x, y } => {
                    let (dx, dy) = self.layout.place_pointer(x, y);
                    let clip = |d: i32| d.clamp(i16::MIN.into(), i16::MAX.into()) as i16;
                    if (dx, dy) != (0, 0) {
                        self.forward(Event::Motion {
                            dx: clip(dx),
                            dy: clip(dy),
                        });
                    }
                }
                _ => self.forward(e),
            }
        }
        for r in cursor_damage(cursor_was, self.layout.cursor()) {
            self.redraw(r);
        }
    }

    /// What the relay saw on the display's notification: the driver gone
    /// — reconnect, unless a refresh already did (the session answers) —
    /// and the relay resumed; a mode change — the screen drawn again (the
    /// multiplexer's mode is fixed: a driver that changed it is refused
    /// at the reconnection).
    fn display_events(&mut self) {
        let events = DISPLAY_EVENTS.swap(0, Ordering::SeqCst);
        if events & DISPLAY_GONE != 0 {
            if self.fb.mode().is_err() {
                self.reconnect();
            }
            // Resumed only on a session that answers: on one that is gone
            // its wait would end at once, again and again. A later
            // reconnection (at a refresh) resumes it.
            self.relay_parked = true;
            self.resume_relay();
        } else if events & DISPLAY_MODE != 0 {
            println!("gui: the display's mode changed; redrawing the screen");
            let whole = self.layout.screen();
            self.redraw(whole);
        }
    }

    /// The input driver stopped (its notification said so, signalled by
    /// the parent): opens the session again at the restarted driver
    /// (init parks the open while it restarts) and binds the new
    /// notification — the old one went with the old donation. The
    /// clients keep their sessions; keys typed meanwhile are lost.
    fn reconnect_input(&mut self) {
        println!("gui: the input driver stopped; reconnecting");
        let again = self
            .input
            .reopen()
            .map_err(|e| alloc::format!("{e}"))
            .and_then(|()| bind_input(&self.input));
        match again {
            Ok(()) => println!("gui: input back"),
            Err(e) => println!("gui: reconnecting to the input driver failed: {e}"),
        }
    }

    fn focus_changed(&mut self, changed: &[usize]) {
        if changed.is_empty() {
            return;
        }
        for &v in changed {
            if let Some(r) = self.layout.view(v).map(|v| v.outer) {
                self.redraw(r);
            }
        }
        println!("gui: focus: {}", self.focus_label());
    }

    /// Queues `e` for the focused view's client.
    fn forward(&mut self, e: Event) {
        let focus = self.layout.focus();
        if let Some(q) = focus.and_then(|f| self.clients[f].input.as_mut()) {
            q.push(e);
            q.publish();
        }
    }

    /// Draws the screen rectangle `r` anew — background, then each view
    /// from the bottom up, then the cursor — and refreshes it at the
    /// driver.
    fn redraw(&mut self, r: Rect) {
        let r = r.intersect(&self.layout.screen());
        if r.is_empty() {
            return;
        }
        let stride = self.screen_mode.stride as usize;
        let row_at = |y: u32, x: u32| y as usize * stride + x as usize * 4;
        // The background only where no view is: the views are opaque.
        for y in r.y..r.y + r.h {
            for (x, w) in self.layout.background_spans(&r, y) {
                let _ = self.screen.fill32(row_at(y, x), w as usize * 4, BACKGROUND);
            }
        }
        let focus = self.layout.focus();
        for (i, view) in self.layout.stacking() {
            let title = view.title().intersect(&r);
            if !title.is_empty() {
                draw_title(&self.screen, stride, view, title, focus == Some(i));
            }
            let c = view.content();
            let part = c.intersect(&r);
            if part.is_empty() {
                continue;
            }
            let buffer = self.clients[i].buffer.as_ref().map(ServedBuffer::region);
            for y in part.y..part.y + part.h {
                let at = row_at(y, part.x);
                let len = part.w as usize * 4;
                match buffer {
                    Some(b) => {
                        let from =
                            (y - c.y) as usize * c.w as usize * 4 + (part.x - c.x) as usize * 4;
                        let _ = self.screen.copy_region(at, b, from, len);
                    }
                    None => {
                        let _ = self.screen.fill32(at, len, EMPTY_VIEW);
                    }
                }
            }
        }
        draw_cursor(&self.screen, stride, self.layout.cursor(), r);
        match self.fb.refresh(r.x, r.y, r.w, r.h) {
            Ok(()) => {}
            // The display driver is gone (killed, restarted): a new
            // session, a new buffer, the whole screen drawn again.
            Err(FbError::Ipc(_)) if !self.reconnecting => self.reconnect(),
            Err(e) => println!("gui: refreshing the screen: {e}"),
        }
    }

    /// Opens the display's session again after its driver stopped (init
    /// parks the open while the driver waits out its restart), takes the
    /// new buffer and redraws the whole screen into it. The clients keep
    /// their sessions: their buffers are their own memory.
    fn reconnect(&mut self) {
        println!("gui: the display's driver stopped; reconnecting");
        // A display that fails again while the screen is redrawn is not
        // reconnected from inside that redraw.
        self.reconnecting = true;
        let again = self.fb.reconnect(self.screen_mode);
        match again {
            Ok(screen) => {
                self.screen = screen;
                println!("gui: display back; redrawing the screen");
                let whole = self.layout.screen();
                self.redraw(whole);
            }
            Err(e) => println!("gui: reconnecting to the display failed: {e}"),
        }
        self.reconnecting = false;
        self.resume_relay();
    }

    /// Lets the parked relay wait on the display session's notification
    /// again, once the session answers.
    fn resume_relay(&mut self) {
        if self.relay_parked && self.fb.mode().is_ok() {
            self.relay_parked = false;
            let _ = syscall::signal(own(RESUME));
        }
    }
}

/// Draws the part `t` of `view`'s title bar: its colour and its label in
/// the 8×8 font.
fn draw_title(screen: &Region, stride: usize, view: &View, t: Rect, focused: bool) {
    let (bg, fg) = match focused {
        true => (TITLE_FOCUSED, TEXT_FOCUSED),
        false => (TITLE_OTHER, TEXT_OTHER),
    };
    let (text_x, text_y) = (view.outer.x + 6, view.outer.y + 4);
    for y in t.y..t.y + t.h {
        let _ = screen.fill32(y as usize * stride + t.x as usize * 4, t.w as usize * 4, bg);
        let Some(row) = y.checked_sub(text_y).filter(|&r| r < 8) else {
            continue;
        };
        for (k, ch) in view.label.chars().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY
                .get(ch as usize)
                .copied()
                .unwrap_or([0; 8]);
            let bits = glyph[row as usize];
            for b in 0..8u32 {
                let x = text_x + k as u32 * 8 + b;
                if bits & (1 << b) != 0 && x >= t.x && x < t.x + t.w {
                    let _ = screen.write32(y as usize * stride + x as usize * 4, fg);
                }
            }
        }
    }
}

/// Draws the part of the cursor (at `cursor`, its sprite's top-left)
/// that lies in `r`, over whatever is there.
fn draw_cursor(screen: &Region, stride: usize, cursor: Rect, r: Rect) {
    let part = cursor.intersect(&r);
    for y in part.y..part.y + part.h {
        for x in part.x..part.x + part.w {
            if let Some(colour) = cursor_pixel(x - cursor.x, y - cursor.y) {
                let _ = screen.write32(y as usize * stride + x as usize * 4, colour);
            }
        }
    }
}

/// The refusal of a client without a view.
fn session_refused() -> u64 {
    rt::interfaces::session::REFUSED_PROVIDER
}
