//! test-quota: a component that allocates without end. It keeps one frame
//! made from its untyped memory (`interfaces::child::UNTYPED`, its RAM quota), so
//! the kernel's watermark never resets, then makes and deletes frames
//! until `Retype` fails, and reports how much it got:
//!
//! ```text
//! test-quota: retype refused after N KiB: not enough untyped memory (OutOfMemory)
//! ```
//!
//! Exit code 0 when the refusal was `OutOfMemory` after at least one
//! frame and at most the untyped's size, 1 otherwise. Run under init with
//! a `ram_mib` quota, its siblings keep running (`tests/init-quota.toml`).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
use rt::abi::{Error, ObjectType};
use rt::interfaces::child::{FIRST_FREE, UNTYPED};
use rt::println;
use rt::syscall;

rt::entry!(main);

/// Frames made before giving up on a kernel that never refuses (4 GiB).
const LIMIT: u64 = 1 << 20;

fn main(_arg: u64) -> i32 {
    let (kept, scratch) = (own(FIRST_FREE), own(FIRST_FREE + 1));
    if let Err(e) = syscall::retype(own(UNTYPED), ObjectType::Frame4K, 0, kept, 1) {
        println!("test-quota: FAILED: the first frame was refused: {e}");
        return 1;
    }
    let mut frames: u64 = 1;
    let refusal = loop {
        if frames >= LIMIT {
            break None;
        }
        match syscall::retype(own(UNTYPED), ObjectType::Frame4K, 0, scratch, 1) {
            Ok(()) => frames += 1,
            Err(e) => break Some(e),
        }
        // SAFETY: the frame is mapped nowhere.
        if let Err(e) = unsafe { syscall::cap_delete(scratch) } {
            println!("test-quota: FAILED: CapDelete: {e}");
            return 1;
        }
    };
    match refusal {
        Some(Error::OutOfMemory) => {
            println!(
                "test-quota: retype refused after {} KiB: {} (OutOfMemory)",
                frames * 4,
                Error::OutOfMemory
            );
            0
        }
        Some(e) => {
            println!(
                "test-quota: FAILED: retype refused after {} KiB with {e}",
                frames * 4
            );
            1
        }
        None => {
            println!("test-quota: FAILED: no refusal after {} KiB", frames * 4);
            1
        }
    }
}
