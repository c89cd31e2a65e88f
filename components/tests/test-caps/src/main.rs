//! test-caps: checks the capability space root gives a component started
//! with `+own` (`interfaces::child`) by using every capability in it once:
//!
//! | check | slot | what |
//! |-------|------|------|
//! | `untyped` | 1 | retype an endpoint from the child's untyped into slot 8 |
//! | `service-write-only` | 2 | minting a readable copy of the service endpoint fails (`MissingRights`) |
//! | `own-thread` | 4 | set its own thread's priority to the children's |
//! | `own-cspace` | 5 | copy slot 8 to slot 9 through its own table's capability (`caddr::in_table(5, ..)`) |
//! | `own-vspace` | 6 | map a frame retyped from its untyped into its own address space and use it |
//!
//! Prints `test-caps: check NAME: ok` (or `FAILED (...)`) for each, then
//! `test-caps: N of M checks failed` or `test-caps: all checks passed`;
//! its exit code is the number of failed checks.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::{in_table, own};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{Error, ObjectType, Rights};
use rt::interfaces::child;
use rt::println;
use rt::syscall;

rt::entry!(main);

/// Slots this component fills (its first free ones).
const ENDPOINT: u32 = child::FIRST_FREE;
const ENDPOINT_COPY: u32 = child::FIRST_FREE + 1;
const READABLE: u32 = child::FIRST_FREE + 2;
const FRAME: u32 = child::FIRST_FREE + 3;
/// Where the frame is mapped: far below the stack, above the image.
const PAGE: u64 = 0x0000_0010_0000_0000;

fn main(_arg: u64) -> i32 {
    let checks: [(&str, Result<(), Error>); 5] = [
        (
            "untyped",
            syscall::retype(
                own(child::UNTYPED),
                ObjectType::Endpoint,
                0,
                own(ENDPOINT),
                1,
            ),
        ),
        (
            "service-write-only",
            match syscall::cap_mint(own(child::SERVICE_ENDPOINT), own(READABLE), Rights::READ, 0) {
                Err(Error::MissingRights) => Ok(()),
                Ok(()) => Err(Error::InvalidState),
                Err(e) => Err(e),
            },
        ),
        (
            "own-thread",
            syscall::thread_set_sched_params(own(child::OWN_THREAD), child::PRIORITY, 0),
        ),
        (
            "own-cspace",
            syscall::cap_copy(
                in_table(child::OWN_CSPACE, ENDPOINT),
                in_table(child::OWN_CSPACE, ENDPOINT_COPY),
            ),
        ),
        ("own-vspace", use_own_vspace()),
    ];
    let mut failed = 0;
    for (name, result) in &checks {
        match result {
            Ok(()) => println!("test-caps: check {name}: ok"),
            Err(e) => {
                println!("test-caps: check {name}: FAILED ({e})");
                failed += 1;
            }
        }
    }
    if failed == 0 {
        println!("test-caps: all checks passed");
    } else {
        println!("test-caps: {failed} of {} checks failed", checks.len());
    }
    failed
}

/// Retypes a frame, maps it at [`PAGE`] in its own address space, writes
/// and reads it back.
fn use_own_vspace() -> Result<(), Error> {
    syscall::retype(own(child::UNTYPED), ObjectType::Frame4K, 0, own(FRAME), 1)?;
    let rw = MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    };
    // SAFETY: nothing of this component lives at PAGE (its image is at
    // 0x200000, its stack and IPC buffer near the top of the user half).
    unsafe { syscall::map(own(child::OWN_VSPACE), own(FRAME), PAGE, rw) }?;
    // SAFETY: one page is mapped writable at PAGE, used only here.
    let value = unsafe {
        core::ptr::write_volatile(PAGE as *mut u64, 0x5eed);
        core::ptr::read_volatile(PAGE as *const u64)
    };
    if value == 0x5eed {
        Ok(())
    } else {
        Err(Error::InvalidState)
    }
}
