//! test-rom: opens a `Rom` session (routed to its parent: init serves it
//! itself, `rt::session::rom`) and maps the boot module `hello` read-only;
//! checks that it is the ELF file it should be — the magic, and section
//! headers that end exactly at the module's end, so the last page came
//! through too — and prints its size and FNV-1a checksum. It reads its own
//! `config` ROM and prints the `greeting` and `answer` its scenario gives
//! it. Then it shows that the frames are read-only (a writable mapping of
//! one is refused) and that a name that does not exist is refused. Its scenario grants it its own address space (`own =
//! ["vspace"]`), to map the ROM pages.
//!
//! With `data_module = "NAME,..."` in its config (`tests/rom-large.toml`)
//! it then maps each module named — tens of MiB of `ucore::testdata` that
//! xtask generated — as one read-only range with `Session::map_module` (the
//! boot image's own frames, 2 MiB ones where they line up), checks every
//! word and the checksum xtask wrote, shows that neither a writable
//! mapping nor a writable copy of its frames is allowed and that a frame
//! index past the end is refused, and asks init (its `Status` session)
//! how much of init's own memory the mapping took: none. Its frames use
//! the slots from 66 to its config's `slots` (its capability quota).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use rt::abi::caddr::own;
use rt::abi::map::{Cache, MapAttr};
use rt::abi::Rights;
use rt::interfaces::child;
use rt::println;
use rt::session::{self, rom::Rom, status::Status, Session};
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
/// Where the Status session capability goes (for a data module).
const STATUS_SLOT: u32 = 64;
/// A slot for the refused requests' capabilities.
const PROBE_SLOT: u32 = 65;
/// The data module's frames: slots from here to its config's `slots`.
const FIRST_DATA_FRAME: u32 = 66;
/// The 2 MiB-aligned window where the first data module is mapped (1 TiB
/// of room), the second at twice this, and so on (four at most below
/// [`DATA_SPARE_VA`]).
const DATA_WINDOW: u64 = 0x100_0000_0000;
/// A spare 2 MiB-aligned address for the data module's writable-mapping
/// check.
const DATA_SPARE_VA: u64 = 0x600_0000_0000;

/// A writable mapping: refused for every ROM frame.
const RW: MapAttr = MapAttr {
    writable: true,
    executable: false,
    cache: Cache::WriteBack,
};

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
    let mut data_module = None;
    // SAFETY: CONFIG_VA.. is used by nothing else of this program.
    match unsafe { rom.map("config", FIRST_CONFIG_FRAME, FIRST_FRAME, CONFIG_VA) } {
        Ok(tree) => match parse_tree(tree) {
            Ok(config) => {
                data_module = config
                    .get("data_module")
                    .and_then(|v| v.as_str())
                    .map(|name| {
                        let slots = config.get("slots").and_then(|v| v.as_integer());
                        (name, slots.unwrap_or(0) as u32)
                    });
                println!(
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
                )
            }
            Err((at, fault)) => println!("test-rom: config ROM: WRONG at byte {at}: {fault}"),
        },
        Err(e) => println!("test-rom: config ROM: {e}"),
    }
    // SAFETY: SPARE_VA is used by nothing else of this program, and the
    // kernel refuses a writable mapping of a read-only frame (what this
    // checks): a refused map maps nothing.
    match unsafe { syscall::map(own(child::OWN_VSPACE), own(FIRST_FRAME), SPARE_VA, RW) } {
        Ok(()) => println!("test-rom: a ROM frame mapped writable: NOT read-only"),
        Err(e) => println!("test-rom: writable mapping of a ROM frame refused: {e}"),
    }
    let name = "no-such-module";
    match rom.info(name) {
        Ok((size, _)) => println!("test-rom: ROM {name}: {size} bytes, but it should be refused"),
        Err(e) => println!("test-rom: ROM {name}: {e}"),
    }
    match data_module {
        Some((name, slots)) => data(&rom, name, slots),
        None => 0,
    }
}

/// Maps the data modules `names` (comma-separated; their frames in
/// slots up to `slots`, each in a 1 TiB window of its own) and checks
/// them (module docs).
fn data(rom: &Session<Rom>, names: &str, slots: u32) -> i32 {
    let status = match session::open::<Status>(STATUS_SLOT) {
        Ok(s) => s,
        Err(e) => {
            println!("test-rom: Status session: {e}");
            return 3;
        }
    };
    let mut first = FIRST_DATA_FRAME;
    for (k, name) in names.split(',').enumerate() {
        let window = DATA_WINDOW + k as u64 * DATA_WINDOW;
        match data_module(rom, &status, name, first..slots, window) {
            Ok(frames) => first += frames,
            Err(code) => return code,
        }
    }
    // SAFETY: as above; refused before anything is mapped.
    match unsafe { rom.map_module("no-such-module", first, slots, DATA_SPARE_VA) } {
        Ok(_) => println!("test-rom: no-such-module mapped, but it should be refused"),
        Err(e) => println!("test-rom: map_module no-such-module: {e}"),
    }
    0
}

/// Maps data module `name` in the 2 MiB-aligned `window` (1 TiB of this
/// program's), its frames in `slots`, checks it and shows its frames
/// read-only: its frames; or the exit code.
fn data_module(
    rom: &Session<Rom>,
    status: &Session<Status>,
    name: &str,
    slots: core::ops::Range<u32>,
    window: u64,
) -> Result<u32, i32> {
    let before = status.init_memory();
    let module = rom.module(name).map_err(|e| {
        println!("test-rom: ROM {name}: {e}");
        4
    })?;
    // SAFETY: the window (1 TiB) is used by nothing else of this program.
    let bytes = unsafe { rom.map_module(name, slots.start, slots.end, window) }.map_err(|e| {
        println!("test-rom: ROM {name}: {e}");
        5
    })?;
    let (sum, wrong) = ucore::testdata::check(bytes);
    println!(
        "test-rom: ROM {name}: {} bytes in {} frames ({} of 2 MiB), mapped at {:#x}: checksum {}, {}",
        bytes.len(),
        module.frames,
        (module.pages - module.frames) / 511,
        bytes.as_ptr() as u64,
        if sum { "ok" } else { "WRONG" },
        match wrong {
            None => alloc::string::String::from("every word in place"),
            Some(i) => alloc::format!("word {i} WRONG"),
        }
    );
    let after = status.init_memory();
    match (before, after) {
        (Ok((b, _)), Ok((a, _))) => println!(
            "test-rom: init's memory in use grew by {} bytes while {name} ({} bytes) was mapped",
            a.wrapping_sub(b) as i64,
            bytes.len()
        ),
        (Err(e), _) | (_, Err(e)) => println!("test-rom: init's memory: {e}"),
    }
    let frame = own(slots.start);
    // SAFETY: DATA_SPARE_VA is used by nothing else; a refused map maps
    // nothing.
    match unsafe { syscall::map(own(child::OWN_VSPACE), frame, DATA_SPARE_VA, RW) } {
        Ok(()) => println!("test-rom: a frame of {name} mapped writable: NOT read-only"),
        Err(e) => println!("test-rom: writable mapping of a frame of {name} refused: {e}"),
    }
    match syscall::cap_mint(frame, own(PROBE_SLOT), Rights::READ.union(Rights::WRITE), 0) {
        Ok(()) => println!("test-rom: a writable copy of a frame of {name}: NOT read-only"),
        Err(e) => println!("test-rom: writable copy of a frame of {name} refused: {e}"),
    }
    match rom.frame(name, module.frames, PROBE_SLOT) {
        Ok(_) => println!("test-rom: frame {} of {name}: NOT refused", module.frames),
        Err(e) => println!("test-rom: frame {} of {name}: {e}", module.frames),
    }
    if !sum || wrong.is_some() {
        return Err(6);
    }
    u32::try_from(module.frames).map_err(|_| 7)
}

/// The 32-bit FNV-1a hash of `bytes`.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}
