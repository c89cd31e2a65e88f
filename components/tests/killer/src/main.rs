//! killer: kills a component through init's `Reconfig` session
//! (`rt::session::reconfig`, `KILL`) — the test-only way to make a
//! component die under load, exactly as if it had faulted — and checks
//! that kills init must refuse are refused. What it does comes from its
//! own `config` ROM (read through a `Rom` session routed to its parent,
//! so its scenario grants it `own = ["vspace"]`):
//!
//! ```toml
//! [component.config]
//! kill = ["counter"]            # killed, in order (each entry `killable = true`)
//! refused = ["a", "nobody"]     # then each must be refused (not killable, no such component, ...)
//! wait_priority = 50            # optional: drop to this priority first (own = ["thread"])
//! delay_ms = 300                # optional: sleep this long first (a Timer session)
//! wait_cmos = [0x7f, 0x5a]      # optional: first wait until CMOS byte 0x7f reads 0x5a
//! ```
//!
//! `wait_cmos = [INDEX, VALUE]` is a trigger the host pulls: the killer
//! polls byte INDEX (0x0e..=0x7f, the MC146818's battery-backed RAM) of
//! the PC's CMOS every 10 ms (a Timer session) and kills once it reads
//! VALUE — which a test's `[[monitor]]` step writes with QEMU's monitor
//! command `o /b 0x71 VALUE` when the host has seen what it waits for
//! (`tests/http-kill.toml`: part of a transfer arrived). The killer
//! writes the index port before every read and nothing else uses the
//! CMOS in such a scenario, so the index stays INDEX and the monitor
//! writes only the data port. Its scenario gives it the two ports
//! (`io_ports = [{ base = 0x70, count = 2 }]`). A byte that already
//! reads VALUE at the start is an error (the trigger would be no
//! trigger). It logs `killer: waiting for CMOS byte 0x7f to read 0x5a`
//! and, when it does, `killer: CMOS byte 0x7f reads 0x5a after N polls`.
//!
//! It kills at once when it first runs: started after the components
//! under load, it runs when they have used up a timeslice. With
//! `wait_priority` below theirs it first sets up its sessions and then
//! drops to that priority, so it kills only when every component above it
//! waits — for a driver, while its device has a request in flight. Prints
//! `killer: killed NAME` or `killer: kill NAME: <error>` for each. Exits 0
//! when every kill succeeded and every refusal came, 1 otherwise.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use rt::abi::caddr::own;
use rt::interfaces::child;
use rt::println;
use rt::session::timer::Timer;
use rt::session::{self, reconfig::Reconfig, rom::Rom};
use ucore::config::{parse_tree, Table};

rt::entry!(main);

/// The I/O port capability, when its scenario gives it ports.
const PORTS: u32 = child::io_ports_slot(0);
/// Where the session capabilities go (after the port capability).
const RECONFIG_SLOT: u32 = PORTS + 1;
const ROM_SLOT: u32 = RECONFIG_SLOT + 1;
/// The config ROM's frames: slots from here to [`END_FRAME`].
const FIRST_FRAME: u32 = ROM_SLOT + 1;
const END_FRAME: u32 = FIRST_FRAME + 4;
/// The Timer session and its notification (for `delay_ms`).
const TIMER_SLOT: u32 = END_FRAME;
const TIMER_NOTIFY: u32 = END_FRAME + 1;
/// Where the config ROM is mapped (far from the image, heap and stack).
const CONFIG_VA: u64 = 0x30_0000_0000;
/// The CMOS's index and data ports.
const CMOS_INDEX: u16 = 0x70;
const CMOS_DATA: u16 = 0x71;
/// How often `wait_cmos` looks (µs).
const CMOS_POLL_US: u64 = 10_000;

fn main(_: u64) -> i32 {
    let reconfig = match session::open::<Reconfig>(RECONFIG_SLOT) {
        Ok(s) => s,
        Err(e) => {
            println!("killer: Reconfig session: {e}");
            return 1;
        }
    };
    let rom = match session::open::<Rom>(ROM_SLOT) {
        Ok(s) => s,
        Err(e) => {
            println!("killer: Rom session: {e}");
            return 1;
        }
    };
    // SAFETY: CONFIG_VA.. is used by nothing else of this program.
    let tree = match unsafe { rom.map("config", FIRST_FRAME, END_FRAME, CONFIG_VA) } {
        Ok(tree) => tree,
        Err(e) => {
            println!("killer: config ROM: {e}");
            return 1;
        }
    };
    let config = match parse_tree(tree) {
        Ok(config) => config,
        Err((at, fault)) => {
            println!("killer: config ROM: byte {at}: {fault}");
            return 1;
        }
    };
    if let Some(p) = config.get("wait_priority").and_then(|v| v.as_integer()) {
        let placed = u8::try_from(p)
            .map_err(|_| rt::abi::Error::InvalidArgument)
            .and_then(|p| rt::cpu::place(rt::abi::caddr::own(child::OWN_THREAD), p, 0));
        if let Err(e) = placed {
            println!("killer: wait_priority {p}: {e}");
            return 1;
        }
    }
    let delay = config.get("delay_ms").and_then(|v| v.as_integer());
    let cmos = config.get("wait_cmos").and_then(|v| v.as_array());
    let timer = if delay.is_some() || cmos.is_some() {
        match Timer::open(TIMER_SLOT, TIMER_NOTIFY) {
            Ok(t) => Some(t),
            Err(e) => {
                println!("killer: Timer session: {e:?}");
                return 1;
            }
        }
    } else {
        None
    };
    if let (Some(ms), Some(t)) = (delay, &timer) {
        if let Err(e) = t.sleep(u64::try_from(ms).unwrap_or(0) * 1000) {
            println!("killer: delay_ms {ms}: {e:?}");
            return 1;
        }
    }
    if let (Some(a), Some(t)) = (cmos, &timer) {
        let pair = match (
            a.get(0).and_then(|v| v.as_integer()),
            a.get(1).and_then(|v| v.as_integer()),
        ) {
            (Some(i), Some(v)) if a.len() == 2 => u8::try_from(i)
                .ok()
                .filter(|i| (0x0e..=0x7f).contains(i))
                .zip(u8::try_from(v).ok()),
            _ => None,
        };
        let Some((index, value)) = pair else {
            println!("killer: wait_cmos is [INDEX, VALUE], INDEX 0x0e..=0x7f, VALUE a byte");
            return 1;
        };
        if let Err(e) = wait_cmos(t, index, value) {
            println!("killer: wait_cmos: {e}");
            return 1;
        }
    }
    let mut ok = true;
    for name in names(&config, "kill") {
        match reconfig.kill(name) {
            Ok(()) => println!("killer: killed {name}"),
            Err(e) => {
                println!("killer: kill {name}: {e}; it should have been killed");
                ok = false;
            }
        }
    }
    for name in names(&config, "refused") {
        match reconfig.kill(name) {
            Ok(()) => {
                println!("killer: kill {name}: done, but it should have been refused");
                ok = false;
            }
            Err(e) => println!("killer: kill {name}: {e}"),
        }
    }
    (!ok) as i32
}

/// Polls CMOS byte `index` every [`CMOS_POLL_US`] until it reads `value`.
fn wait_cmos(timer: &Timer, index: u8, value: u8) -> Result<(), alloc::string::String> {
    let read = || -> Result<u8, rt::abi::Error> {
        // SAFETY: the capability holds the CMOS's two ports only; writing
        // the index port selects the byte the data port reads and changes
        // nothing the chip keeps (bit 7, the NMI mask on many chipsets,
        // stays clear: `index` is at most 0x7f).
        unsafe { rt::syscall::io_port_write(own(PORTS), CMOS_INDEX, 1, u32::from(index))? };
        rt::syscall::io_port_read(own(PORTS), CMOS_DATA, 1).map(|v| v as u8)
    };
    let first = read().map_err(|e| {
        alloc::format!(
            "reading the CMOS: {e}; is `io_ports = [{{ base = 0x70, count = 2 }}]` in its config?"
        )
    })?;
    if first == value {
        return Err(alloc::format!(
            "CMOS byte {index:#04x} already reads {value:#04x}: no trigger"
        ));
    }
    println!("killer: waiting for CMOS byte {index:#04x} to read {value:#04x}");
    let mut polls = 1u64;
    loop {
        timer
            .sleep(CMOS_POLL_US)
            .map_err(|e| alloc::format!("sleeping: {e:?}"))?;
        polls += 1;
        if read().map_err(|e| alloc::format!("reading the CMOS: {e}"))? == value {
            println!("killer: CMOS byte {index:#04x} reads {value:#04x} after {polls} polls");
            return Ok(());
        }
    }
}

/// The strings of the array `key` of `config` (none without one).
fn names<'a>(config: &Table<'a>, key: &str) -> impl Iterator<Item = &'a str> {
    config
        .get(key)
        .and_then(|v| v.as_array())
        .into_iter()
        .flat_map(|a| a.iter())
        .filter_map(|v| v.as_str())
}
