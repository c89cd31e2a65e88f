//! init: reads the scenario's config ROM and starts its components, each
//! with its RAM and capability quota, priority and CPU; it is their fault
//! handler and restarts them by their policy.
//!
//! Root starts init when the boot image has a `config` entry; what init
//! gets (its memory, its own capabilities, a copy of the boot image at
//! `BOOT_IMAGE_ADDR` with its length as argument) and what it gives each
//! child is written down in `abi::init`; the arithmetic of quotas is
//! `ucore::init`, the building of a child `rt::spawn` (the same code that
//! builds root's children).
//!
//! 1. Parse the boot image and the ROM (`ucore::config::Rom::parse`); a
//!    missing or corrupt ROM is reported (`init: config ROM ...: what is
//!    wrong`) and init exits with `abi::init::EXIT_BAD_CONFIG`.
//! 2. For each component in order: cut its block from init's pool, build
//!    and start it from its block (`init: started NAME (binary B, N MiB,
//!    N caps, priority P, cpu C)`); a component that cannot be started is
//!    reported (`init: cannot start NAME: why`) and the others start.
//! 3. Supervise: each exit or fault is logged (`init: child NAME exited
//!    with code N`, `init: child NAME faulted: ...`). The child's memory is
//!    returned at once: init revokes its block, which destroys its thread,
//!    tables, address space, frames and whatever it made from its quota.
//!    With policy `always` and restarts left it is rebuilt from the same
//!    block (`init: restarting NAME (restart n of max)`); after the last
//!    one `init: NAME stopped after max restarts`.
//! 4. When no child that is not a server (by binary, `abi::child::is_server`)
//!    runs, init prints `init: all children finished`, revokes every
//!    block (the servers stop) and exits 0.
//!
//! 5. Sessions: a child's `OPEN` on its parent endpoint is answered by its
//!    routes — opened at the sibling that provides the type (through the
//!    provider's endpoint init keeps) and the session capability passed on,
//!    or refused (`answer_open`; design in docs/architecture.md, "Sessions
//!    and routing").
//!
//! 6. ROM: a `Rom` session routed to `parent` (and in `parent_provides`)
//!    init serves itself (`RomService`, `rt::session::rom`): its own
//!    endpoint minted with the child's badge and `PARENT_SESSION`; each
//!    request is answered at once, a page of a boot module (or, for
//!    `config`, of the child's own config tree) copied into a fresh frame
//!    and handed over read-only.
//!
//! Not yet (the component-framework issue): other `parent` routes (init
//! refuses them), session quotas and close, a child's own config
//! in any other way than its `config` ROM (and the integer `arg` of its
//! config table, its argument word), the Timer service, dynamic reconfiguration. **Back-off**:
//! without a Timer service init cannot sleep, so it restarts at once and
//! logs the back-off the policy asks for (`Restart::delay_ms`) as not
//! waited; a busy wait on `rdtsc` would need a TSC calibration user space
//! does not have and would burn the CPU its siblings need.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec::Vec;

use kcore::bootimage::BootImage;
use rt::abi::bootinfo::{BOOT_IMAGE_ADDR, BOOT_INFO_ADDR};
use rt::abi::caddr::own;
use rt::abi::{child, init, session, Error, MsgInfo, ObjectType, Rights};
use rt::println;
use rt::resources::Resources;
use rt::session::rom::{self, Rom as RomSession};
use rt::session::Interface;
use rt::spawn::{self, ChildCaps, ChildSpec, ParentCaps, SpawnError, PT_POOL_BITS};
use rt::syscall;
use rt::transfer;
use ucore::config::{Component, Restart, Rom, Target};
use ucore::load::PAGE_SIZE;
use ucore::supervise::Supervisor;

rt::entry!(main);

/// What init keeps per child besides the supervisor's record.
struct Kid<'a> {
    component: Component<'a>,
    /// Init's slot of the child's block, and its size.
    block: u32,
    block_bits: u32,
    /// Restarts made so far.
    restarts: u32,
    /// Its capabilities while it exists.
    caps: Option<ChildCaps>,
    /// A session provider's endpoint (init's capability, badge 0).
    service: Option<u32>,
}

fn main(image_len: u64) -> i32 {
    let image = match boot_image(image_len) {
        Some(image) => image,
        None => return init::EXIT_BAD_IMAGE,
    };
    let Some(entry) = image.find("config") else {
        println!("init: no config ROM (boot-image entry `config`)");
        return init::EXIT_BAD_CONFIG;
    };
    let rom = match Rom::parse(entry.data) {
        Ok(rom) => rom,
        Err(e) => {
            println!("init: {e}; starting nothing");
            return init::EXIT_BAD_CONFIG;
        }
    };
    let pool_bits = ucore::init::pool_bits(&rom);
    println!(
        "init: config ROM with {} components, {} MiB of untyped memory",
        rom.component_count(),
        1u64 << (pool_bits - ucore::init::MIB_BITS)
    );
    let own_res = Resources::new(
        child::FIRST_FREE,
        init::OWN_SLOTS_END,
        child::UNTYPED,
        pool_bits as u8,
    );
    let mut own_res = match own_res {
        Ok(r) => r,
        Err(e) => {
            println!("init: cannot take over its memory: {e}");
            return init::EXIT_NO_RESOURCES;
        }
    };
    let parent = match ParentCaps::make(&mut own_res, child::OWN_VSPACE) {
        Ok(caps) => caps,
        Err(e) => {
            println!("init: cannot make its endpoints: {e}");
            return init::EXIT_NO_RESOURCES;
        }
    };

    // Where a session capability passes through init on its way from the
    // provider to the client.
    let transit = match own_res.slot() {
        Ok(slot) => slot,
        Err(e) => {
            println!("init: cannot reserve its transit slot: {e}");
            return init::EXIT_NO_RESOURCES;
        }
    };
    let mut kids: Vec<Kid<'_>> = Vec::new();
    let mut children: Supervisor<'_, ChildCaps> = Supervisor::new();
    for c in rom.components() {
        let block_bits = ucore::init::block_bits(c.ram_mib, c.caps);
        let block = match own_res.make(ObjectType::Untyped, block_bits) {
            Ok(slot) => slot,
            Err(e) => {
                println!(
                    "init: cannot start {}: no block of 2^{block_bits} bytes: {e}",
                    c.name
                );
                continue;
            }
        };
        let service = match is_provider(&c) {
            true => match own_res.make(ObjectType::Endpoint, 0) {
                Ok(ep) => Some(ep),
                Err(e) => {
                    println!(
                        "init: cannot start {}: no endpoint for its service: {e}",
                        c.name
                    );
                    continue;
                }
            },
            false => None,
        };
        let mut kid = Kid {
            component: c,
            block,
            block_bits,
            restarts: 0,
            caps: None,
            service,
        };
        match start(&image, parent, &kid) {
            Ok(caps) => {
                kid.caps = Some(caps);
                println!(
                    "init: started {} (binary {}, {} MiB, {} caps, priority {}, cpu {})",
                    c.name, c.binary, c.ram_mib, c.caps, c.priority, c.cpu
                );
                children.add_as(c.index + 1, c.name, is_server(&c), caps);
            }
            Err(e) => println!("init: cannot start {}: {e}", c.name),
        }
        kids.push(kid);
    }

    while children.waiting() > 0 {
        let (badge, info, words) = match syscall::recv(own(parent.fault)) {
            Ok(message) => message,
            Err(e) => {
                println!("init: Recv on its endpoint failed: {e}; giving up on its children");
                return init::EXIT_RECV_FAILED;
            }
        };
        if badge & session::PARENT_SESSION != 0 {
            let rom_service = RomService {
                image: &image,
                res: &mut own_res,
                vspace: parent.vspace,
                transit,
            };
            rom_service.serve(&kids, badge, info.label(), &words);
            continue;
        }
        if info.label() == session::OPEN {
            answer_open(&rom, &kids, badge, &words, (parent.fault, transit));
            continue;
        }
        let handled = children.handle(badge, info.label(), words);
        println!("init: {handled}");
        if !handled.finished_now {
            continue;
        }
        let index = badge as usize;
        let Some(kid) = kids.iter_mut().find(|k| k.component.index + 1 == index) else {
            continue;
        };
        release(kid);
        let name = kid.component.name;
        let Some(delay) = kid.component.restart.delay_ms(kid.restarts + 1) else {
            if let Restart::Always { max, .. } = kid.component.restart {
                println!("init: {name} stopped after {max} restarts");
            }
            continue;
        };
        kid.restarts += 1;
        let max = match kid.component.restart {
            Restart::Always { max, .. } => max,
            Restart::Never => 0,
        };
        println!(
            "init: restarting {name} (restart {} of {max}; back-off {delay} ms not waited: no Timer yet)",
            kid.restarts
        );
        match start(&image, parent, kid) {
            Ok(caps) => {
                kid.caps = Some(caps);
                if let Some(c) = children.child_mut(index) {
                    c.caps = caps;
                    c.finished = false;
                }
            }
            Err(e) => println!("init: cannot restart {name}: {e}"),
        }
    }
    println!("init: all children finished");
    for kid in &mut kids {
        release(kid);
    }
    0
}

/// The boot image root copied for init (`abi::init`), parsed.
fn boot_image(len: u64) -> Option<BootImage<'static>> {
    if len > BOOT_INFO_ADDR - BOOT_IMAGE_ADDR {
        println!("init: boot image length {len:#x} is impossible");
        return None;
    }
    // SAFETY: root maps a read-only copy of the boot image, `len` bytes, at
    // BOOT_IMAGE_ADDR before init starts, for init's whole life
    // (abi::init); the range was checked to end below the boot-information
    // address, so it stays in the user half and the length fits `isize`.
    let bytes = unsafe { core::slice::from_raw_parts(BOOT_IMAGE_ADDR as *const u8, len as usize) };
    match BootImage::parse(bytes) {
        Ok(image) => Some(image),
        Err(e) => {
            println!("init: boot image rejected: {e}");
            None
        }
    }
}

/// Builds and starts `kid` from its block and slot range (`abi::init`).
/// A CPU the kernel refuses (it schedules user threads on CPU 0 only until
/// the SMP issue) is reported and the child runs on CPU 0.
fn start(
    image: &BootImage<'_>,
    parent: ParentCaps,
    kid: &Kid<'_>,
) -> Result<ChildCaps, SpawnError> {
    let c = &kid.component;
    match build(image, parent, kid, c.cpu.into()) {
        Err(SpawnError::Syscall {
            call: "ThreadSetSchedParams",
            error: Error::InvalidArgument,
        }) if c.cpu != 0 => {
            println!(
                "init: {}: the kernel refuses CPU {} (the machine has fewer CPUs); \
                 running it on CPU 0",
                c.name, c.cpu
            );
            revoke_block(kid);
            build(image, parent, kid, 0)
        }
        result => result,
    }
}

/// Builds and starts `kid` on `cpu`.
fn build(
    image: &BootImage<'_>,
    parent: ParentCaps,
    kid: &Kid<'_>,
    cpu: u32,
) -> Result<ChildCaps, SpawnError> {
    let c = &kid.component;
    let parent = ParentCaps {
        service: kid.service.unwrap_or(parent.service),
        ..parent
    };
    let file = image.find(c.binary).ok_or(SpawnError::NotInImage)?.data;
    let first = init::child_slots(c.index as u32);
    let mut res = Resources::new(
        first,
        first + init::CHILD_SLOTS,
        kid.block,
        kid.block_bits as u8,
    )?;
    let arg = c
        .config
        .get("arg")
        .and_then(|v| v.as_integer())
        .unwrap_or(0);
    let spec = ChildSpec {
        file,
        badge: c.index as u64 + 1,
        arg: arg as u64,
        cspace_bits: ucore::init::cspace_bits(c.caps),
        pt_pool_bits: PT_POOL_BITS,
        untyped_bits: ucore::init::quota_bits(c.ram_mib),
        priority: c.priority,
        cpu,
        server: is_server(c),
        parent_endpoint: true,
        own_caps: child::has_own_caps(c.binary),
        rom: None,
    };
    spawn::spawn(&mut res, parent, &spec).map(|(caps, _)| caps)
}

/// Whether `c` serves sessions through an endpoint of its own: it
/// provides a service and is not a server of the shared endpoint
/// (`child::is_server`, the echo servers of the first scenarios, which
/// keep the endpoint all init's children share).
fn is_provider(c: &Component<'_>) -> bool {
    c.provides().next().is_some() && !child::is_server(c.binary)
}

/// Whether init does not wait for `c` to finish: it serves.
fn is_server(c: &Component<'_>) -> bool {
    is_provider(c) || child::is_server(c.binary)
}

/// Answers child `badge`'s request for a session of the type in `words`
/// (`abi::session`, "Sessions and routing" in docs/architecture.md): by
/// its routes, refused, or opened at the provider and passed on through
/// init's slot `transit`.
fn answer_open(
    rom: &Rom<'_>,
    kids: &[Kid<'_>],
    badge: u64,
    words: &[u64; 4],
    (own_ep, transit): (u32, u32),
) {
    let (bytes, len) = session::unpack(words);
    let service = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
    let client = kids.iter().find(|k| k.component.index as u64 + 1 == badge);
    let Some(client) = client else {
        return reply(session::REFUSED_UNROUTED, [0; 4], None);
    };
    let name = client.component.name;
    let target = match client.component.route(service) {
        None => {
            println!("init: {name} asks for a {service} session: not routed to it; refused");
            return reply(session::REFUSED_UNROUTED, [0; 4], None);
        }
        Some(Target::Parent) => {
            let offered = rom.parent_provides().any(|s| s == service);
            if offered && service == RomSession::NAME {
                return open_rom(name, own_ep, badge, transit);
            }
            println!(
                "init: {name} asks for a {service} session: routed to the parent, which {}; \
                 refused",
                if offered {
                    "does not serve it itself (only Rom)"
                } else {
                    "does not provide it"
                }
            );
            return reply(session::REFUSED_PARENT, [0; 4], None);
        }
        Some(Target::Component(i)) => i,
    };
    let provider = kids.iter().find(|k| k.component.index == target);
    let Some((provider, ep)) = provider
        .and_then(|k| Some((k, k.service?)))
        .filter(|(k, _)| k.caps.is_some())
    else {
        println!("init: {name} asks for a {service} session: its provider is not running; refused");
        return reply(session::REFUSED_PROVIDER, [0; 4], None);
    };
    let info = MsgInfo::new(session::OPEN_SESSION, 4, 0).unwrap_or_default();
    let pname = provider.component.name;
    match transfer::call_for_cap(own(ep), info, session::pack(name), own(transit)) {
        Ok((answer, _)) if answer.label() == session::OK && answer.caps() == 1 => {
            println!("init: {name} -> {service} session at {pname}");
            reply(session::OK, [0; 4], Some(transit));
        }
        Ok((answer, _)) => {
            println!(
                "init: {name} asks for a {service} session: {pname} refused it ({:#x})",
                answer.label()
            );
            reply(session::REFUSED_PROVIDER, [answer.label(), 0, 0, 0], None);
        }
        Err(e) => {
            println!("init: {name} asks for a {service} session: calling {pname} failed: {e}");
            reply(session::REFUSED_PROVIDER, [0; 4], None);
        }
    }
}

/// Opens a ROM session for child `badge` (`name`): init's own endpoint
/// `own_ep`, minted write-only with the child's badge and
/// `session::PARENT_SESSION`, passed on through `transit`. Init answers it
/// itself ([`RomService`]): no call out, so no client can block init.
fn open_rom(name: &str, own_ep: u32, badge: u64, transit: u32) {
    let session_badge = badge | session::PARENT_SESSION;
    match syscall::cap_mint(own(own_ep), own(transit), Rights::WRITE, session_badge) {
        Ok(()) => {
            println!("init: {name} -> Rom session at init");
            reply(session::OK, [0; 4], Some(transit));
        }
        Err(e) => {
            println!("init: {name} asks for a Rom session: CapMint failed: {e}; refused");
            reply(session::REFUSED_PARENT, [0; 4], None);
        }
    }
}

/// Init's ROM service (`rt::session::rom`): boot-image modules, each page
/// copied into a fresh frame from init's own memory and handed over
/// read-only.
struct RomService<'r, 'a> {
    image: &'r BootImage<'a>,
    res: &'r mut Resources,
    /// Init's address space, for the scratch page.
    vspace: u32,
    transit: u32,
}

impl RomService<'_, '_> {
    /// Answers a request `label`, `words` on the ROM session of child
    /// `badge` (without `session::PARENT_SESSION`).
    fn serve(mut self, kids: &[Kid<'_>], badge: u64, label: u64, words: &[u64; 4]) {
        let index = badge & !session::PARENT_SESSION;
        let Some(client) = kids.iter().find(|k| k.component.index as u64 + 1 == index) else {
            return reply(rom::NOT_FOUND, [0; 4], None);
        };
        let (component, client) = (&client.component, client.component.name);
        let (bytes, len) = session::unpack(words);
        let module = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
        // `config` is the client's own config tree, not the scenario's ROM
        // (which holds every component's config).
        let data = match self.image.find(module) {
            _ if module == "config" => component.config_tree(),
            Some(entry) => entry.data,
            None => {
                println!("init: {client} asks for ROM {module:?}: no such module; refused");
                return reply(rom::NOT_FOUND, [0; 4], None);
            }
        };
        let page = PAGE_SIZE as usize;
        let pages = data.len().div_ceil(page) as u64;
        match label & ((1 << rom::INDEX_SHIFT) - 1) {
            rom::INFO => {
                println!(
                    "init: {client} reads ROM {module:?} ({} bytes, {pages} pages)",
                    data.len()
                );
                reply(rom::OK, [data.len() as u64, pages, 0, 0], None)
            }
            rom::PAGE => {
                let i = label >> rom::INDEX_SHIFT;
                if i >= pages {
                    return reply(rom::OUT_OF_RANGE, [0; 4], None);
                }
                let start = i as usize * page;
                let chunk = &data[start..data.len().min(start + page)];
                match self.page(chunk) {
                    Ok(()) => reply(rom::OK, [0; 4], Some(self.transit)),
                    Err(why) => {
                        println!("init: ROM {module:?} page {i} for {client}: {why}");
                        reply(rom::NO_MEMORY, [0; 4], None)
                    }
                }
            }
            _ => reply(rom::UNKNOWN, [label, 0, 0, 0], None),
        }
    }

    /// A fresh frame of init's (kept: see `rt::session::rom`, "Cost")
    /// holding `chunk`, minted read-only into the transit slot.
    fn page(&mut self, chunk: &[u8]) -> Result<(), &'static str> {
        let frame = self
            .res
            .make(ObjectType::Frame4K, 0)
            .map_err(|_| "no memory or slot left for a frame")?;
        spawn::fill_frame(self.vspace, frame, 0, chunk, 0).map_err(|_| "copying failed")?;
        syscall::cap_mint(own(frame), own(self.transit), Rights::READ, 0)
            .map_err(|_| "CapMint (read-only) failed")
    }
}

/// Replies to the child whose request init received last, with the
/// capability in `cap` (which init then lets go of: the client's copy
/// stays).
fn reply(label: u64, words: [u64; 4], cap: Option<u32>) {
    if let Some(slot) = cap {
        transfer::set_send_cap(own(slot));
    }
    let info = MsgInfo::new(label, 4, cap.is_some() as usize).unwrap_or_default();
    if let Err(e) = syscall::reply(info, words) {
        println!("init: reply to a session request failed: {e}");
    }
    if let Some(slot) = cap {
        // SAFETY: an endpoint capability; nothing is mapped through it.
        if let Err(e) = unsafe { syscall::cap_delete(own(slot)) } {
            println!("init: cannot empty its transit slot: {e}");
        }
    }
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
    revoke_block(kid);
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
