//! init: reads the scenario's config ROM and starts its components, each
//! with its RAM and capability quota, priority and CPU; it is their fault
//! handler and restarts them by their policy.
//!
//! Root starts init when the boot image has a `config` entry; what init
//! gets (its memory, its own capabilities, its view of the boot image:
//! the kernel's frames of it, mapped read-only from the address that is
//! its argument, and their table) and what it gives each
//! child is written down in `interfaces::init`; the arithmetic of quotas is
//! `ucore::init`, the building of a child `rt::spawn` (the same code that
//! builds root's children).
//!
//! 1. Parse the boot image and the ROM (`ucore::config::Rom::parse`); a
//!    missing or corrupt ROM is reported (`init: config ROM ...: what is
//!    wrong`) and init exits with `interfaces::init::EXIT_BAD_CONFIG`.
//! 2. For each component in order: cut its block from init's pool, build
//!    and start it from its block (`init: started NAME (binary B, N MiB,
//!    N caps, priority P, cpu C, cpus C,D)`: the CPU and CPU set it runs
//!    with, the CPUs it may place its threads on, `rt::cpu` — CPU 0 and
//!    {0} when the kernel refused its config's, `ucore::init::Started`); a component that cannot be started is
//!    reported (`init: cannot start NAME: why`) and the others start.
//!    One whose config `arg` is not an integer (a ROM the checker did not
//!    make) is not started: `init: cannot start NAME: config arg: "abc" is
//!    not an integer` (`ucore::config::Component::arg`).
//! 3. Supervise: each exit or fault is logged (`init: child NAME exited
//!    with code N`, `init: child NAME faulted: ...`). The child's memory is
//!    returned at once: init revokes its block, which destroys its thread,
//!    tables, address space, frames and whatever it made from its quota.
//!    With policy `always` and restarts left it is rebuilt from the same
//!    block after its back-off (`Restart::delay_ms`): when the scenario has
//!    a component providing `Timer` that is running and is not the child
//!    itself, init waits on a Timer session of its own at it ([`backoff`]:
//!    a one-shot timeout on the session's notification, bound to init's
//!    thread, so init's `Recv` keeps serving the other children and returns
//!    the timeout as a notification message) and then logs `init:
//!    restarting NAME (restart n of max, after N ms back-off)` (children
//!    still waiting when the Timer provider stops restart at once: `...;
//!    back-off not waited: its Timer stopped`). Without a Timer it
//!    restarts at once: `(restart n of max; back-off N ms not waited: no
//!    Timer yet)` — a busy wait on `rdtsc` would need a TSC calibration
//!    user space does not have and would burn the CPU its siblings need.
//!    After the last restart: `init: NAME stopped after max restarts`.
//! 4. When no child that is not a server (one that `provides` sessions or
//!    has `shared_endpoint = "serve"`, [`serves`]) runs, init stops the
//!    servers in order, each once its sessions are closed ([`power`]; a
//!    `Power` session's `OFF` stops the applications first), prints
//!    `init: all children finished`, revokes every block and exits 0 — or, when a component could not be started or
//!    restarted, `init: N start(s) of components failed: exiting with 6`
//!    and `interfaces::init::EXIT_NOT_STARTED`, which makes root end the
//!    run with failure.
//!
//! 5. Sessions: a child's `OPEN` on its parent endpoint is answered by its
//!    routes — opened at the sibling that provides the type (through the
//!    provider's endpoint init keeps) and the session capability passed on,
//!    or refused (`sessions::Sessions::open`; design in
//!    docs/architecture.md, "Sessions and routing"). Routes are followed by
//!    the provider's name.
//!
//! 6. ROM: a `Rom` session routed to `parent` (and in `parent_provides`)
//!    init serves itself (`rom::RomService`, `rt::session::rom`): its own
//!    endpoint minted with the child's badge and `PARENT_SESSION`; each
//!    request is answered at once: a boot module's frames are the
//!    kernel's frames of the boot image, minted read-only (no copy, no
//!    memory of init's); the child's own `config` tree is copied into
//!    fresh frames.
//!
//! 7. Restart of a provider: its endpoint is made from its block (in
//!    `build`), so revoking the block closes all its sessions with an
//!    error for their clients (`Aborted` for a waiting call, `EmptySlot`
//!    after); restarted, it gets a fresh endpoint and clients reopen
//!    (docs/architecture.md, "Restart and reconnect"). An `OPEN` for a
//!    provider waiting out its back-off is parked (its reply saved, its
//!    donation kept, at most `sessions::MAX_PARKED`) and decided again
//!    once the provider runs again, stopped for good or was removed
//!    (`sessions::Sessions::unpark`, at the top of each turn of the
//!    loop); beyond the bound, or when the back-off is not waited, it is
//!    answered `RESTARTING` and the client asks again.
//!
//! 8. Quota donation and close: an `OPEN` may carry the client's
//!    donation (a capability table with an untyped), which init passes on
//!    to the provider; init records each session it opened at a provider
//!    (`sessions::Sessions`), answers a client's `CLOSE` by closing it at
//!    the provider, and closes a finished child's sessions (docs/
//!    architecture.md, "Quota donation and close").
//!
//! 9. Dynamic reconfiguration: a `Reconfig` session (served by init,
//!    routed to `parent`) names a boot module with a config update
//!    (`config.update`, packed by xtask); init checks it like its first ROM
//!    and starts, stops and keeps children by name ([`reconfig`]). A
//!    child's identity is its `Kid::id` (badge − 1, slot range), not its
//!    position in a config, and routes are followed by provider name.
//!
//! 10. Init never waits for a provider: its calls to providers are made
//!     by proxy threads ([`proxy`]), the client's request waits as a saved
//!     reply capability (docs/architecture.md, "Sessions and routing", 10).
//!
//! 11. Devices: a component's `io_ports` and `irqs` are handed over at
//!     `interfaces::child::DEVICES` before it starts ([`devices`], `interfaces::init`),
//!     with a notification bound to its thread if it has IRQs; one whose
//!     devices init cannot give is not started.
//!
//! Modules: [`sessions`] (`OPEN`, `CLOSE`, the session records), [`proxy`]
//! (the proxy threads that call providers), [`rom`] (the ROM service),
//! [`reconfig`] (config updates), [`power`] (stopping in order: power-off
//! and a scenario's end), [`backoff`] (restart back-offs on a Timer
//! session), [`devices`] (device capabilities for a component).
//!
//! Not yet (the component-framework issue): other `parent` routes (init
//! refuses them), quota and close of `Rom` sessions, a child's own config
//! in any other way than its `config` ROM (and the integer `arg` of its
//! config table, its argument word). Init opens its own Timer session
//! (for back-offs) with a direct call to the Timer provider, not through a
//! proxy: a Timer provider that does not answer stops init.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

mod backoff;
mod devices;
mod power;
mod proxy;
mod reconfig;
mod rom;
mod sessions;
mod status;

use alloc::vec::Vec;
use core::fmt;

use formats::bootimage::BootImage;
use rt::abi::bootinfo::{BOOT_IMAGE_ADDR, BOOT_INFO_ADDR};
use rt::abi::caddr::own;
use rt::abi::{Error, MsgInfo, ObjectType, LABEL_NOTIFICATION};
use rt::interfaces::{child, init, session};
use rt::println;
use rt::resources::Resources;
use rt::spawn::{self, ChildCaps, ChildSpec, ParentCaps, SpawnError, PT_POOL_BITS};
use rt::syscall;
use ucore::config::{Component, Device, Restart, Rom, SharedEndpoint};
use ucore::init::{Placement, Started};

use backoff::BackOff;
use sessions::Sessions;
use ucore::supervise::Supervisor;

rt::entry!(main);

fn main(image_addr: u64) -> i32 {
    let mut init = match Init::new(image_addr) {
        Ok(init) => init,
        Err(code) => return code,
    };
    init.start_all();
    init.run()
}

/// What init keeps per child besides the supervisor's record.
struct Kid<'a> {
    /// Its place: badge `id + 1`, slot range `interfaces::init::child_slots(id)`.
    /// Its start position at boot; a child a config update adds takes the
    /// lowest free one (its position in the update may differ).
    id: usize,
    component: Component<'a>,
    /// Init's slot of the child's block, and its size.
    block: u32,
    block_bits: u32,
    /// Its argument word (`Component::arg`), checked before it starts.
    arg: u64,
    /// Restarts made so far.
    restarts: u32,
    /// Its capabilities while it exists.
    caps: Option<ChildCaps>,
    /// A session provider's endpoint (init's capability, badge 0).
    service: Option<u32>,
    /// The sampled CPU time of its runs before the current one, ms
    /// (`status`).
    cpu_ms_past: u64,
}

/// Init's state: the boot image and the running config, its memory, its
/// children and their sessions. Each kind of message on init's endpoint
/// has its handler (`on_*`), called from [`Init::run`].
struct Init<'a> {
    /// The running config (a config update replaces it).
    rom: Rom<'a>,
    builder: Builder<'a>,
    pool: Pool,
    /// Where a session capability passes through init (`rom`).
    transit: u32,
    sessions: Sessions,
    kids: Vec<Kid<'a>>,
    children: Supervisor<'a, ChildCaps>,
    backoff: BackOff<'a>,
    /// Starts and restarts that failed (`init: cannot start ...`).
    failed_starts: u32,
    /// Stopping every component in order ([`power`]): nothing restarts.
    stopping: bool,
    /// Children a config update removed whose sessions are still being
    /// closed at their providers: their memory goes back (and their id is
    /// free again) once the closes ended ([`Init::closed`]).
    departing: Vec<Kid<'a>>,
}

/// What building a child takes besides the child: the boot image (its
/// binary), init's endpoints and the scratch slot for device capabilities.
#[derive(Clone, Copy)]
struct Builder<'a> {
    image: BootImage<'a>,
    /// The image's physical start modulo 2 MiB: how its frames are cut
    /// (`interfaces::init::ROM_FRAMES`).
    phase: u64,
    parent: ParentCaps,
    scratch: u32,
}

/// How a restart came about, for its log line (`init: restarting NAME
/// (restart n of max...)`).
#[derive(Clone, Copy)]
enum Restarting {
    /// After its back-off of this many ms (0: none to wait).
    Waited(u32),
    /// Its Timer provider stopped while it waited.
    TimerStopped,
    /// At once: no Timer to wait this many ms on.
    NoTimer(u32),
}

impl fmt::Display for Restarting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Restarting::Waited(ms) => write!(f, ", after {ms} ms back-off"),
            Restarting::TimerStopped => write!(f, "; back-off not waited: its Timer stopped"),
            Restarting::NoTimer(ms) => write!(f, "; back-off {ms} ms not waited: no Timer yet"),
        }
    }
}

/// Takes a slot of init's own for `what`, or says why not.
fn own_slot(res: &mut Resources, what: &str) -> Result<u32, i32> {
    res.slot().map_err(|e| {
        println!("init: cannot reserve its {what} slot: {e}");
        init::EXIT_NO_RESOURCES
    })
}

impl<'a> Init<'a> {
    /// Reads the boot image and the config ROM and takes over init's
    /// memory and slots; on failure init's exit code (the reason is
    /// logged).
    fn new(image_addr: u64) -> Result<Init<'static>, i32> {
        let (image, phase) = boot_image(image_addr).ok_or(init::EXIT_BAD_IMAGE)?;
        let Some(entry) = image.find("config") else {
            println!("init: no config ROM (boot-image entry `config`)");
            return Err(init::EXIT_BAD_CONFIG);
        };
        let rom = Rom::parse(entry.data).map_err(|e| {
            println!("init: {e}; starting nothing");
            init::EXIT_BAD_CONFIG
        })?;
        let update = image
            .find(init::UPDATE_ENTRY)
            .and_then(|e| Rom::parse(e.data).ok());
        // The pieces root made (interfaces::init), by the same rule.
        let pieces = ucore::plan::pool_pieces(&image, &rom, update.as_ref());
        println!(
            "init: config ROM with {} components, {} of untyped memory",
            rom.component_count(),
            ucore::plan::Size(pieces.iter().map(|&b| 1u64 << b).sum())
        );
        let first = pieces.first().copied().unwrap_or(ucore::init::OWN_BITS);
        let own_res = Resources::new(
            child::FIRST_FREE,
            init::OWN_SLOTS_END,
            child::UNTYPED,
            first as u8,
        );
        let mut res = own_res.map_err(|e| {
            println!("init: cannot take over its memory: {e}");
            init::EXIT_NO_RESOURCES
        })?;
        let others = pieces.get(1..).unwrap_or(&[]);
        for (slot, &bits) in (init::POOL_FIRST..init::POOL_FIRST + init::POOL_SLOTS).zip(others) {
            if !res.add_untyped(slot, bits as u8) {
                println!("init: cannot take over its memory: a piece of 2^{bits} bytes");
                return Err(init::EXIT_NO_RESOURCES);
            }
        }
        let parent = ParentCaps::make(&mut res, child::OWN_VSPACE).map_err(|e| {
            println!("init: cannot make its endpoints: {e}");
            init::EXIT_NO_RESOURCES
        })?;
        // Where a session capability passes through init on its way from
        // the provider to the client.
        let transit = own_slot(&mut res, "transit")?;
        // Where a client's quota donation arrives with its OPEN.
        let donation = own_slot(&mut res, "donation")?;
        // Where init tries each device capability before a child gets it.
        let scratch = own_slot(&mut res, "scratch")?;
        Ok(Init {
            rom,
            builder: Builder {
                image,
                phase,
                parent,
                scratch,
            },
            pool: Pool {
                res,
                free: Vec::new(),
            },
            transit,
            sessions: Sessions::new(parent.fault, transit, donation),
            kids: Vec::new(),
            children: Supervisor::new(),
            backoff: BackOff::new(&rom),
            failed_starts: 0,
            stopping: false,
            departing: Vec::new(),
        })
    }

    /// Starts the config's components in order.
    fn start_all(&mut self) {
        for c in self.rom.components() {
            self.launch(c, c.index);
        }
    }

    /// Serves its endpoint while a child init waits for runs or waits
    /// for its restart; then stops the servers. Init's exit code.
    fn run(&mut self) -> i32 {
        loop {
            if self.children.waiting() == 0 && !self.backoff.waiting() && !self.sessions.closing() {
                // No application runs: the services stop in order.
                self.applications_finished();
            }
            let busy = self.children.waiting() > 0
                || self.backoff.waiting()
                || self.sessions.closing()
                || self.stop_pending();
            if !busy {
                break;
            }
            // Opens parked for a provider that was restarted (or stopped
            // for good, or was removed) since the last message go on now.
            let backoff = &self.backoff;
            self.sessions.unpark(
                &self.rom,
                &mut self.pool.res,
                (&self.kids, &|id| backoff.is_waiting(id)),
            );
            self.sessions.accept_donation();
            let (badge, info, words) = match syscall::recv(own(self.builder.parent.fault)) {
                Ok(message) => message,
                Err(e) => {
                    println!("init: Recv on its endpoint failed: {e}; giving up on its children");
                    return init::EXIT_RECV_FAILED;
                }
            };
            self.on_message(badge, info, &words);
            // Children whose sessions' closes ended: their memory goes
            // back (before the loop's condition looks at what still runs),
            // and when stopping, the next services stop.
            self.closed();
            self.stop_step();
        }
        println!("init: all children finished");
        for kid in &mut self.kids {
            release(kid);
        }
        if self.failed_starts > 0 {
            println!(
                "init: {} start(s) of components failed: exiting with {}",
                self.failed_starts,
                init::EXIT_NOT_STARTED
            );
            return init::EXIT_NOT_STARTED;
        }
        0
    }

    /// Hands message `(badge, info, words)` to its handler: a back-off's
    /// timeout, a proxy's result, a child's `OPEN` or `CLOSE`, a request
    /// on a session init serves (`Reconfig`, `Rom`), or a child's exit or
    /// fault.
    fn on_message(&mut self, badge: u64, info: MsgInfo, words: &[u64; 4]) {
        let label = info.label();
        if label == LABEL_NOTIFICATION {
            // Init's Timer notification is bound to its thread.
            return self.on_timer(badge);
        }
        let at_parent = badge & session::PARENT_SESSION != 0;
        let session_request = match label {
            _ if badge & proxy::PROXY_BADGE != 0 => {
                self.sessions
                    .proxy_message(&self.kids, &mut self.pool.res, badge, label, words);
                true
            }
            session::OPEN if !at_parent => {
                self.on_open(badge, info, words);
                true
            }
            session::CLOSE if !at_parent => {
                self.sessions
                    .close(&self.kids, &mut self.pool.res, badge, words);
                true
            }
            _ => false,
        };
        // A donation the request did not pass on goes.
        self.sessions.drop_donation(info);
        if session_request {
            return;
        }
        if at_parent && badge & session::RECONFIG_SESSION != 0 {
            self.on_reconfig(badge, label, words);
        } else if at_parent && badge & session::POWER_SESSION != 0 {
            self.on_power(badge, label);
        } else if at_parent && badge & session::STATUS_SESSION != 0 {
            self.on_status(label, words);
        } else if at_parent {
            self.on_rom(badge, label, words);
        } else {
            self.on_child_report(badge, label, *words);
        }
    }

    /// Back-offs that ended (the notification bits `bits`): their
    /// children restart.
    fn on_timer(&mut self, bits: u64) {
        for (id, waited_us) in self.backoff.fired(bits) {
            let Some(position) = self.position(id) else {
                continue;
            };
            let kid = &self.kids[position];
            let delay = kid.component.restart.delay_ms(kid.restarts).unwrap_or(0);
            if waited_us < u64::from(delay) * 1000 {
                println!(
                    "init: back-off of {} ended early, after {waited_us} us",
                    kid.component.name
                );
            }
            self.restart(position, Restarting::Waited(delay));
        }
    }

    /// A child's `OPEN` (`sessions`).
    fn on_open(&mut self, badge: u64, info: MsgInfo, words: &[u64; 4]) {
        let backoff = &self.backoff;
        self.sessions.open(
            (&self.rom, &mut self.pool.res),
            (&self.kids, &|id| backoff.is_waiting(id)),
            badge,
            info,
            words,
        );
    }

    /// A request on a child's `Rom` session (`rom`).
    fn on_rom(&mut self, badge: u64, label: u64, words: &[u64; 4]) {
        let rom_service = rom::RomService {
            image: &self.builder.image,
            phase: self.builder.phase,
            res: &mut self.pool.res,
            vspace: self.builder.parent.vspace,
            transit: self.transit,
        };
        rom_service.serve(&self.kids, badge, label, words);
    }

    /// A child's exit or fault, as the kernel reports it (badge: its id +
    /// 1): logged; a child that finished now (a faulted one too: its
    /// thread goes with its block) is released and restarted by its policy.
    fn on_child_report(&mut self, badge: u64, label: u64, words: [u64; 4]) {
        let handled = self.children.handle(badge, label, words);
        println!("init: {handled}");
        if handled.finished_now {
            self.finished(badge as usize);
        }
    }

    /// Child `index` (its id + 1) finished: its sessions are closed at
    /// their providers, then (once every close ended: [`Self::closed`])
    /// its memory returned, and it restarts now, after its back-off, or
    /// never.
    fn finished(&mut self, index: usize) {
        let pending = self
            .sessions
            .finished(&self.kids, &mut self.pool.res, index.wrapping_sub(1));
        if !pending {
            self.released(index);
        }
    }

    /// The children whose sessions' closes all ended since the last
    /// look: their memory goes back now.
    fn closed(&mut self) {
        for id in self.sessions.take_closed() {
            if let Some(i) = self.departing.iter().position(|k| k.id == id) {
                let mut kid = self.departing.swap_remove(i);
                self.forget(&mut kid);
                continue;
            }
            self.released(id + 1);
        }
    }

    /// `kid`, removed by a config update, has no session left open
    /// anywhere: its memory goes back and its block is kept for a child
    /// to come.
    fn forget(&mut self, kid: &mut Kid<'a>) {
        release(kid);
        println!(
            "init: stopped {}: its sessions closed, its memory returned",
            kid.component.name
        );
        self.pool.free.push((kid.block, kid.block_bits));
    }

    /// Child `index` (its id + 1), finished, has no session left open
    /// anywhere: its memory is returned and it restarts by its policy.
    fn released(&mut self, index: usize) {
        let Some(position) = self.kids.iter().position(|k| k.id + 1 == index) else {
            return;
        };
        release(&mut self.kids[position]);
        if self.stopping {
            // Stopping in order (`power`): nothing restarts.
            return;
        }
        if self.backoff.is_provider(&self.kids[position]) {
            // Its sessions end with it: restart what waited on it now.
            for id in self.backoff.timer_gone() {
                if let Some(waiting) = self.position(id) {
                    self.restart(waiting, Restarting::TimerStopped);
                }
            }
        }
        let kid = &mut self.kids[position];
        let Some(delay) = kid.component.restart.delay_ms(kid.restarts + 1) else {
            if let Restart::Always { max, .. } = kid.component.restart {
                println!("init: {} stopped after {max} restarts", kid.component.name);
            }
            return;
        };
        kid.restarts += 1;
        let id = kid.id;
        if delay != 0 && self.backoff.wait(&self.kids, &mut self.pool.res, id, delay) {
            return;
        }
        let how = match delay {
            0 => Restarting::Waited(0),
            _ => Restarting::NoTimer(delay),
        };
        self.restart(position, how);
    }

    /// The position in `kids` of child `id`.
    fn position(&self, id: usize) -> Option<usize> {
        self.kids.iter().position(|k| k.id == id)
    }

    /// Starts component `c` as child `id` from a block of init's pool and
    /// records it (`init: started ...` or `init: cannot start ...`).
    fn launch(&mut self, c: Component<'a>, id: usize) {
        // A config the checker would refuse may still reach init (the
        // ROM is untrusted): a component is never started with an
        // argument it was not given.
        let arg = match c.arg() {
            Ok(arg) => arg,
            Err(e) => {
                println!("init: cannot start {}: {e}", c.name);
                self.failed_starts += 1;
                return;
            }
        };
        let pages = ucore::plan::Images::pages(&self.builder.image, c.binary);
        let block_bits = ucore::plan::block_bits(&c, pages);
        let block = match self.pool.block(block_bits) {
            Ok(slot) => slot,
            Err(e) => {
                println!(
                    "init: cannot start {}: no block of 2^{block_bits} bytes: {e}",
                    c.name
                );
                self.failed_starts += 1;
                return;
            }
        };
        let mut kid = Kid {
            id,
            component: c,
            block,
            block_bits,
            arg,
            restarts: 0,
            caps: None,
            service: None,
            cpu_ms_past: 0,
        };
        match self.builder.start(&mut kid) {
            Ok((caps, at)) => {
                kid.caps = Some(caps);
                let started = Started { component: &c, at };
                println!("init: {started}");
                self.children.add(id + 1, c.name, serves(&c), caps);
            }
            Err(e) => {
                println!("init: cannot start {}: {e}", c.name);
                self.failed_starts += 1;
            }
        }
        self.kids.push(kid);
    }

    /// Rebuilds and starts `kids[position]` (its block was revoked), says
    /// so (`how`) and tells the supervisor it runs again.
    fn restart(&mut self, position: usize, how: Restarting) {
        let kid = &mut self.kids[position];
        println!(
            "init: restarting {} (restart {} of {}{how})",
            kid.component.name,
            kid.restarts,
            max_restarts(&kid.component)
        );
        match self.builder.start(kid) {
            Ok((caps, _)) => {
                kid.caps = Some(caps);
                if let Some(c) = self.children.child_mut(kid.id + 1) {
                    c.caps = caps;
                    c.finished = false;
                }
            }
            Err(e) => {
                println!("init: cannot restart {}: {e}", kid.component.name);
                self.failed_starts += 1;
            }
        }
    }
}

/// Init's untyped memory and slots, and the blocks of children a config
/// update removed (slot, log2 of bytes), for the children it adds.
struct Pool {
    res: Resources,
    free: Vec<(u32, u32)>,
}

impl Pool {
    /// A block of 2^`bits` bytes: a free one of that size, else a new one.
    fn block(&mut self, bits: u32) -> Result<u32, rt::resources::ResourceError> {
        match self.free.iter().position(|&(_, b)| b == bits) {
            Some(i) => Ok(self.free.swap_remove(i).0),
            None => self.res.make(ObjectType::Untyped, bits),
        }
    }
}

/// The restarts `c`'s policy allows.
fn max_restarts(c: &Component<'_>) -> u32 {
    match c.restart {
        Restart::Always { max, .. } => max,
        Restart::Never => 0,
    }
}

/// The name of child `id`.
fn name_of_id<'a>(kids: &[Kid<'a>], id: usize) -> Option<&'a str> {
    kids.iter().find(|k| k.id == id).map(|k| k.component.name)
}

/// The boot image root mapped for init at `addr` (`interfaces::init`),
/// parsed, and its phase (`addr`'s distance past `BOOT_IMAGE_ADDR`).
fn boot_image(addr: u64) -> Option<(BootImage<'static>, u64)> {
    let phase = addr.wrapping_sub(BOOT_IMAGE_ADDR);
    if phase >= formats::bootimage::LARGE || !phase.is_multiple_of(4096) {
        println!("init: boot image address {addr:#x} is impossible");
        return None;
    }
    // SAFETY: root maps the boot image's frames read-only from `addr`, its
    // header first, before init starts, for init's whole life
    // (interfaces::init); the header's 32 bytes lie in its first page.
    let header = unsafe { core::slice::from_raw_parts(addr as *const u8, 32) };
    let len = u64::from_le_bytes(header[16..24].try_into().unwrap_or([0; 8]));
    if len > BOOT_INFO_ADDR - addr {
        println!("init: boot image length {len:#x} is impossible");
        return None;
    }
    // SAFETY: as above, `len` bytes (the header's `total_size`, which
    // root's and the kernel's parse checked against the image); the
    // range was checked to end below the boot-information address, so it
    // stays in the user half and the length fits `isize`.
    let bytes = unsafe { core::slice::from_raw_parts(addr as *const u8, len as usize) };
    match BootImage::parse(bytes) {
        Ok(image) => Some((image, phase)),
        Err(e) => {
            println!("init: boot image rejected: {e}");
            None
        }
    }
}

impl Builder<'_> {
    /// Builds and starts `kid` from its block and slot range
    /// (`interfaces::init`) on its CPU with its CPU set. A CPU or set the
    /// kernel refuses (the machine has fewer CPUs than the scenario was
    /// checked for: `cargo xtask run --smp`) is reported and the child
    /// runs on CPU 0 with the set {0}. Its capabilities and where it runs.
    fn start(&self, kid: &mut Kid<'_>) -> Result<(ChildCaps, Placement), SpawnError> {
        let c = kid.component;
        let (asked, home) = (Placement::asked(&c), Placement::home());
        match self.build(kid, asked) {
            Ok(caps) => Ok((caps, asked)),
            Err(SpawnError::Syscall {
                call: "ThreadSetSchedParams",
                error: Error::InvalidArgument,
            }) if asked.cpus != home.cpus => {
                println!(
                    "init: {}: the kernel refuses CPU {} or CPUs {} (the machine has fewer \
                     CPUs); running it on CPU 0",
                    c.name, c.cpu, c.cpus
                );
                revoke_block(kid);
                Ok((self.build(kid, home)?, home))
            }
            Err(e) => Err(e),
        }
    }

    /// Builds and starts `kid` on `at.cpu` with the CPU set `at.cpus`.
    fn build(&self, kid: &mut Kid<'_>, at: Placement) -> Result<ChildCaps, SpawnError> {
        let component = kid.component;
        let c = &component;
        let file = self
            .image
            .find(c.binary)
            .ok_or(SpawnError::NotInImage)?
            .data;
        let first = init::child_slots(kid.id as u32);
        let mut res = Resources::new(
            first,
            first + init::CHILD_SLOTS,
            kid.block,
            kid.block_bits as u8,
        )?;
        // A provider's endpoint is made from its own block, so it dies with
        // it: revoking the block wakes every client queued on it (and every
        // session capability minted from it goes).
        kid.service = match is_provider(c) {
            true => Some(res.make(ObjectType::Endpoint, 0)?),
            false => None,
        };
        let parent = ParentCaps {
            service: kid.service.unwrap_or(self.parent.service),
            ..self.parent
        };
        let spec = ChildSpec {
            name: c.name,
            file,
            badge: kid.id as u64 + 1,
            arg: kid.arg,
            cspace_bits: ucore::init::cspace_bits(c.caps),
            pt_pool_bits: PT_POOL_BITS,
            untyped_bits: ucore::init::quota_bits(c.ram_mib),
            priority: c.priority,
            cpu: at.cpu,
            cpus: at.cpus,
            // All rights on what is in slot 2: its own endpoint (a provider)
            // or the shared one (`shared_endpoint = "serve"`).
            server: serves(c),
            parent_endpoint: true,
            own: c.own,
            rom: None,
            grants: &devices::grants(c, self.scratch)?,
            memory_grants: &devices::memory_grants(c),
            notification: c.devices().any(|d| matches!(d, Device::Irq(_))),
        };
        spawn::spawn(&mut res, parent, &spec).map(|(caps, _)| caps)
    }
}

/// Whether `c` serves sessions through an endpoint of its own: it
/// provides a service (then it does not serve the shared endpoint: the
/// config ROM's rules, `ucore::config`).
fn is_provider(c: &Component<'_>) -> bool {
    c.provides().next().is_some()
}

/// Whether init does not wait for `c` to finish: it serves sessions
/// ([`is_provider`]) or the endpoint all init's children share
/// (`shared_endpoint = "serve"`), as its config entry declares.
fn serves(c: &Component<'_>) -> bool {
    is_provider(c) || c.shared_endpoint == SharedEndpoint::Serve
}

/// Revokes `kid`'s block: every object made from it goes.
fn revoke_block(kid: &Kid<'_>) {
    // SAFETY: nothing of init's own is made from the block: revoking it
    // unmaps only the child's frames (and the scratch page holds none
    // between spawns).
    if let Err(e) = unsafe { syscall::cap_revoke(own(kid.block)) } {
        println!(
            "init: cannot revoke the memory of {}: {e}",
            kid.component.name
        );
    }
}

/// Returns all of `kid`'s memory: revokes its block (every object made
/// from it goes, the thread first of all) and deletes its fault-endpoint
/// capability, the one capability of its slot range not made from the
/// block. A partly built child (a failed start) is cleaned up the same
/// way, so its block is whole again either way.
fn release(kid: &mut Kid<'_>) {
    // Its CPU time so far, read while its thread still exists.
    kid.cpu_ms_past += status::current_cpu_ms(kid);
    revoke_block(kid);
    devices::revoke_platform(&kid.component);
    // A provider's endpoint was made from the block: gone with it.
    kid.service = None;
    if let Some(caps) = kid.caps.take() {
        // SAFETY: an endpoint capability; nothing is mapped through it.
        if let Err(e) = unsafe { syscall::cap_delete(own(caps.fault)) } {
            println!(
                "init: cannot delete the fault endpoint of {}: {e}",
                kid.component.name
            );
        }
    }
}
