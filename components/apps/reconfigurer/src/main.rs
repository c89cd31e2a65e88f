//! reconfigurer: opens a `Reconfig` session at init
//! (`rt::session::reconfig`; routed to `parent`), lets the others run for
//! a while, asks init to apply a module that is not a config ROM (`hello`,
//! an ELF file: refused, nothing changes) and then the scenario's config
//! update (`interfaces::init::UPDATE_ENTRY`), and prints both answers
//! (`scenarios/reconfig.toml`). Exits 0 when the update was applied and
//! the malformed one refused, 1 otherwise.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::interfaces::{child, init};
use rt::println;
use rt::session::{self, reconfig::Reconfig};
use rt::syscall;

rt::entry!(main);

/// Yields before each request: the others run meanwhile.
const YIELDS: u32 = 6;
/// A boot module that is not a config ROM.
const MALFORMED: &str = "hello";

fn main(_: u64) -> i32 {
    let reconfig = match session::open::<Reconfig>(child::FIRST_FREE) {
        Ok(s) => s,
        Err(e) => {
            println!("reconfigurer: Reconfig session: {e}");
            return 1;
        }
    };
    pause();
    let refused = match reconfig.apply(MALFORMED) {
        Ok(a) => {
            println!("reconfigurer: update {MALFORMED:?} was applied ({a:?}), but it is no config");
            false
        }
        Err(e) => {
            println!("reconfigurer: update {MALFORMED:?}: {e}");
            true
        }
    };
    pause();
    let applied = match reconfig.apply(init::UPDATE_ENTRY) {
        Ok(a) => {
            println!(
                "reconfigurer: update {:?} applied: {} started, {} stopped, {} kept",
                init::UPDATE_ENTRY,
                a.started,
                a.stopped,
                a.kept
            );
            true
        }
        Err(e) => {
            println!("reconfigurer: update {:?}: {e}", init::UPDATE_ENTRY);
            false
        }
    };
    (!(refused && applied)) as i32
}

/// Lets the others run.
fn pause() {
    for _ in 0..YIELDS {
        let _ = syscall::yield_now();
    }
}
