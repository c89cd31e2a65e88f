//! test-rom: opens a `Rom` session (routed to its parent: init serves it
//! itself, `rt::session::rom`) and maps the boot module `hello` read-only;
//! checks that it is the ELF file it should be — the magic, and section
//! headers that end exactly at the module's end, so the last page came
//! through too — and prints its size and FNV-1a checksum. It reads its own
//! `config` ROM and prints the `greeting` and `answer` its scenario gives
//! it. Then it shows that the frames are read-only (a writable mapping of
//! one is refused) and that a name that does not exist is refused. Its scenario grants it its own address space (`own =
//! ["vspace"]`), to map the ROM pages.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
use rt::abi::map::{Cache, MapAttr};
use rt::interfaces::child;
use rt::println;
use rt::session::{self, rom::Rom};
use rt::syscall;
use ucore::config::parse_tree;

rt::entry!(main);

/// Where the Rom session capability goes.
const ROM_SLOT: u32 = child::FIRST_FREE;
/// The config ROM's frames: slots from here to [`FIRST_FRAME`].
const FIRST_CONFIG_FRAME: u32 = child::FIRST_FREE + 1;
/// The module's frames: slots from here to the end of the table.
const FIRST_FRAME: u32 = FIRST_CONFIG_FRAME + 4;
/// Where the config ROM is mapped.
const CONFIG_VA: u64 = 0x30_0000_0000;
/// Slots of this component's table: `caps` in `scenarios/rom-session.toml`.
const TABLE_SLOTS: u32 = 64;
/// Where the module is mapped (far from the image, the heap and the stack).
const ROM_VA: u64 = 0x40_0000_0000;
/// A spare page for the writable-mapping check.
const SPARE_VA: u64 = 0x50_0000_0000;
/// The module read.
const MODULE: &str = "hello";

fn main(_arg: u64) -> i32 {
    let rom = match session::open::<Rom>(ROM_SLOT) {
        Ok(rom) => rom,
        Err(e) => {
            println!("test-rom: Rom session: {e}");
            return 1;
        }
    };
    // SAFETY: ROM_VA.. is used by nothing else of this program.
    let bytes = match unsafe { rom.map(MODULE, FIRST_FRAME, TABLE_SLOTS, ROM_VA) } {
        Ok(bytes) => bytes,
        Err(e) => {
            println!("test-rom: ROM {MODULE}: {e}");
            return 2;
        }
    };
    let elf = bytes.starts_with(b"\x7fELF\x02\x01");
    let sections_end = (bytes.len() >= 64).then(|| {
        let word = |at: usize, n: usize| {
            bytes[at..at + n]
                .iter()
                .rev()
                .fold(0u64, |v, &b| v << 8 | u64::from(b))
        };
        word(0x28, 8) + word(0x3c, 2) * word(0x3a, 2)
    });
    println!(
        "test-rom: ROM {MODULE}: {} bytes, ELF magic {}, section headers end {} the module, fnv1a {:#010x}",
        bytes.len(),
        if elf { "ok" } else { "WRONG" },
        if sections_end == Some(bytes.len() as u64) { "at the end of" } else { "NOT at the end of" },
        fnv1a(bytes)
    );
    // SAFETY: CONFIG_VA.. is used by nothing else of this program.
    match unsafe { rom.map("config", FIRST_CONFIG_FRAME, FIRST_FRAME, CONFIG_VA) } {
        Ok(tree) => match parse_tree(tree) {
            Ok(config) => println!(
                "test-rom: config ROM: {} bytes, {} keys, greeting = {:?}, answer = {}",
                tree.len(),
                config.len(),
                config
                    .get("greeting")
                    .and_then(|v| v.as_str())
                    .unwrap_or("(none)"),
                config
                    .get("answer")
                    .and_then(|v| v.as_integer())
                    .unwrap_or(-1),
            ),
            Err((at, fault)) => println!("test-rom: config ROM: WRONG at byte {at}: {fault}"),
        },
        Err(e) => println!("test-rom: config ROM: {e}"),
    }
    let rw = MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    };
    // SAFETY: SPARE_VA is used by nothing else; a refused map maps nothing.
    match unsafe { syscall::map(own(child::OWN_VSPACE), own(FIRST_FRAME), SPARE_VA, rw) } {
        Ok(()) => println!("test-rom: a ROM frame mapped writable: NOT read-only"),
        Err(e) => println!("test-rom: writable mapping of a ROM frame refused: {e}"),
    }
    let name = "no-such-module";
    match rom.info(name) {
        Ok((size, _)) => println!("test-rom: ROM {name}: {size} bytes, but it should be refused"),
        Err(e) => println!("test-rom: ROM {name}: {e}"),
    }
    0
}

/// The 32-bit FNV-1a hash of `bytes`.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}
