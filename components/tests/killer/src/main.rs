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
//! ```
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

use rt::interfaces::child;
use rt::println;
use rt::session::{self, reconfig::Reconfig, rom::Rom};
use ucore::config::{parse_tree, Table};

rt::entry!(main);

/// Where the session capabilities go.
const RECONFIG_SLOT: u32 = child::FIRST_FREE;
const ROM_SLOT: u32 = child::FIRST_FREE + 1;
/// The config ROM's frames: slots from here to [`END_FRAME`].
const FIRST_FRAME: u32 = child::FIRST_FREE + 2;
const END_FRAME: u32 = FIRST_FRAME + 4;
/// The Timer session and its notification (for `delay_ms`).
const TIMER_SLOT: u32 = END_FRAME;
const TIMER_NOTIFY: u32 = END_FRAME + 1;
/// Where the config ROM is mapped (far from the image, heap and stack).
const CONFIG_VA: u64 = 0x30_0000_0000;

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
    if let Some(ms) = config.get("delay_ms").and_then(|v| v.as_integer()) {
        let slept = rt::session::timer::Timer::open(TIMER_SLOT, TIMER_NOTIFY)
            .map_err(|e| alloc::format!("{e:?}"))
            .and_then(|t| {
                t.sleep(u64::try_from(ms).unwrap_or(0) * 1000)
                    .map_err(|e| alloc::format!("{e:?}"))
            });
        if let Err(e) = slept {
            println!("killer: delay_ms {ms}: {e}");
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

/// The strings of the array `key` of `config` (none without one).
fn names<'a>(config: &Table<'a>, key: &str) -> impl Iterator<Item = &'a str> {
    config
        .get(key)
        .and_then(|v| v.as_array())
        .into_iter()
        .flat_map(|a| a.iter())
        .filter_map(|v| v.as_str())
}
