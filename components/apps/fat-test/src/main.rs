//! fat-test: the FAT test program of the system Pecan comes from, on the
//! file system of its partition (a File system session, through
//! `rt::fs`). Ten rounds ([`ucore::fattest`] says what each writes), each
//! printing its steps and its result:
//!
//! 1. `mkdir /round-NN` (kept if it is there already: a restarted test
//!    goes on), `chdir` into it;
//! 2. write the round's pattern to `pattern file NN.bin` (open, write,
//!    close) and sync;
//! 3. stat it (its size), read it back and compare;
//! 4. list the directory.
//!
//! When the file system service stops (killed, faulted: init restarts
//! it), a call fails; the test reconnects (`Fs::reconnect`) and does the
//! round again — at most four times a run.
//!
//! After the rounds it checks that `rt::fs`'s read-ahead never serves
//! stale bytes ([`coherence`]): a reader that has 64 KiB of a file read
//! ahead sees a write through another handle, and — when its quota has
//! room for a second File system session (16 MiB more:
//! `scenarios/fs-coherence.toml`) — one through a second session, at its
//! next small read.
//!
//! Between rounds it pauses `arg` milliseconds (a Timer session; 2000 in
//! the demo, short in the tests; 0: no pause, no Timer). At the end:
//! `fat-test: 10 rounds passed` and exit 0, or `fat-test: FAILED ...` and
//! exit 1. The host then checks the image (`cargo xtask check-fat`).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec::Vec;

use rt::fs::{Fs, Slots};
use rt::interfaces::child;
use rt::println;
use rt::session::timer::Timer;
use ucore::fattest;

rt::entry!(main);

const SLOTS: Slots = Slots {
    session: child::FIRST_FREE,
    donor_block: child::FIRST_FREE + 1,
    donor_table: child::FIRST_FREE + 2,
    frame: child::FIRST_FREE + 3,
};
const TIMER: u32 = child::FIRST_FREE + 4;
const TIMER_NOTIFY: u32 = child::FIRST_FREE + 5;
/// The heap's extra frame (the rounds' files, written and read back).
const HEAP_SLOT: u32 = child::FIRST_FREE + 6;
/// How often a run reconnects to a restarted file system service.
const MAX_RECONNECTS: u32 = 4;
/// Where the file system's I/O buffer is mapped.
const FS_VA: u64 = 0x60_0000_0000;
/// The second session of the coherence check, and its buffer.
const OTHER: Slots = Slots {
    session: child::FIRST_FREE + 8,
    donor_block: child::FIRST_FREE + 9,
    donor_table: child::FIRST_FREE + 10,
    frame: child::FIRST_FREE + 11,
};
const OTHER_VA: u64 = 0x62_0000_0000;

fn main(pause_ms: u64) -> i32 {
    if let Err(e) = rt::heap::grow(HEAP_SLOT, 1) {
        println!("fat-test: FAILED: growing the heap: {e}");
        return 1;
    }
    // A service that stops while the session opens (killed, faulted) is
    // restarted by init: ask again.
    let mut tries = 0;
    let mut fs = loop {
        // SAFETY: FS_VA.. is used by nothing else of this program (a
        // failed attempt maps nothing there).
        match unsafe { Fs::connect(SLOTS, FS_VA) } {
            Ok(fs) => break fs,
            Err(rt::fs::Error::Ipc) if tries < MAX_RECONNECTS => {
                tries += 1;
                println!("fat-test: the file system service is gone while connecting; again");
            }
            Err(e) => {
                println!("fat-test: FAILED: File system session: {e}");
                return 1;
            }
        }
    };
    let timer = match pause_ms {
        0 => None,
        _ => match Timer::open(TIMER, TIMER_NOTIFY) {
            Ok(t) => Some(t),
            Err(e) => {
                println!("fat-test: FAILED: Timer session: {e:?}");
                return 1;
            }
        },
    };
    if let Ok([kind, cluster, clusters, free]) = fs.info() {
        println!("fat-test: FAT{kind}, {clusters} clusters of {cluster} bytes, {free} free");
    }
    let mut reconnects = 0;
    let mut r = 1;
    while r <= fattest::ROUNDS {
        match round(&fs, r) {
            Ok(()) => {}
            // The service stopped (killed, faulted): init restarts it;
            // the round goes again on a new session (what it had synced is
            // on the disk; the rest of the round is redone).
            Err(Failure::Fs(step, rt::fs::Error::Ipc)) if reconnects < MAX_RECONNECTS => {
                reconnects += 1;
                println!(
                    "fat-test: round {r}: {step}: the file system service is gone; reconnecting"
                );
                match fs.reconnect() {
                    Ok(()) => println!("fat-test: round {r}: reconnected; the round again"),
                    Err(e) => {
                        println!("fat-test: FAILED: round {r}: reconnecting: {e}");
                        return 1;
                    }
                }
                continue;
            }
            Err(e) => {
                println!("fat-test: FAILED: round {r}: {e}");
                return 1;
            }
        }
        println!("fat-test: round {r} passed");
        if let Some(t) = &timer {
            if r < fattest::ROUNDS {
                let _ = t.sleep(pause_ms * 1000);
            }
        }
        r += 1;
    }
    if let Err(e) = coherence(&fs) {
        println!("fat-test: FAILED: read-ahead coherence: {e}");
        return 1;
    }
    println!("fat-test: {} rounds passed", fattest::ROUNDS);
    0
}

/// `rt::fs` reads 64 KiB ahead of a small read; what it keeps must not
/// outlive a write: through another handle of this session, then through
/// a second session (the service's write generation, `rt::session::fs`).
/// The file goes again at the end.
fn coherence(fs: &Fs) -> Result<(), Failure> {
    let path = "/read-ahead.bin";
    fs.write(path, &[0xaa; 16 * 1024]).map_err(step("write"))?;
    let mut reader = fs.open(path).map_err(step("open"))?;
    let mut small = [0u8; 512];
    reader.read_exact(&mut small).map_err(step("read"))?;
    overwrite(fs, path, 512, 0x55)?;
    reader.read_exact(&mut small).map_err(step("read"))?;
    expect(&small, 0x55, 512)?;
    // SAFETY: OTHER_VA.. is used by nothing else of this program.
    let other = match unsafe { Fs::connect(OTHER, OTHER_VA) } {
        Ok(other) => other,
        Err(rt::fs::Error::NoSpace) => {
            reader.close().map_err(step("close"))?;
            fs.remove_file(path).map_err(step("remove"))?;
            println!(
                "fat-test: read-ahead sees a write through another handle (another session: \
                 no quota for a second session here)"
            );
            return Ok(());
        }
        Err(e) => return Err(Failure::Fs("second session", e)),
    };
    overwrite(&other, path, 1024, 0x66)?;
    reader.read_exact(&mut small).map_err(step("read"))?;
    expect(&small, 0x66, 1024)?;
    reader.close().map_err(step("close"))?;
    fs.remove_file(path).map_err(step("remove"))?;
    println!("fat-test: read-ahead sees writes through another handle and another session");
    Ok(())
}

/// Writes 512 bytes `byte` at `at` into `path` through a handle of its
/// own on `fs`.
fn overwrite(fs: &Fs, path: &str, at: u64, byte: u8) -> Result<(), Failure> {
    let mut writer = rt::fs::OpenOptions::new()
        .write(true)
        .open(fs, path)
        .map_err(step("open for writing"))?;
    writer
        .seek(rt::fs::SeekFrom::Start(at))
        .map_err(step("seek"))?;
    writer.write_all(&[byte; 512]).map_err(step("write"))?;
    writer.close().map_err(step("close"))
}

/// Every byte of `got` (read at `at`) is `want`.
fn expect(got: &[u8], want: u8, at: usize) -> Result<(), Failure> {
    match got.iter().position(|&b| b != want) {
        None => Ok(()),
        Some(i) => Err(Failure::Differs {
            at: at + i,
            got: got[i],
            want,
        }),
    }
}

/// Why a round failed.
enum Failure {
    Fs(&'static str, rt::fs::Error),
    Differs { at: usize, got: u8, want: u8 },
    Size { got: u64, want: u64 },
    NotListed,
}

impl core::fmt::Display for Failure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Failure::Fs(step, e) => write!(f, "{step}: {e}"),
            Failure::Differs { at, got, want } => {
                write!(f, "byte {at} read back as {got:#04x}, written {want:#04x}")
            }
            Failure::Size { got, want } => write!(f, "stat says {got} bytes, written {want}"),
            Failure::NotListed => f.write_str("the file is missing from the listing"),
        }
    }
}

fn step(what: &'static str) -> impl Fn(rt::fs::Error) -> Failure {
    move |e| Failure::Fs(what, e)
}

/// Round `r`: mkdir, chdir, write, stat, read back, list.
fn round(fs: &Fs, r: u32) -> Result<(), Failure> {
    let dir = alloc::format!("/{}", fattest::dir(r));
    match fs.create_dir(&dir) {
        Ok(()) => println!("fat-test: round {r}: mkdir {dir}"),
        Err(rt::fs::Error::Exists) => println!("fat-test: round {r}: mkdir {dir}: there already"),
        Err(e) => return Err(Failure::Fs("mkdir", e)),
    }
    fs.set_current_dir(&dir).map_err(step("chdir"))?;
    println!("fat-test: round {r}: chdir {}", fs.current_dir());
    let name = fattest::file(r);
    let len = fattest::len(r);
    let data: Vec<u8> = (0..len).map(|j| fattest::byte(r, j)).collect();
    let mut f = fs.create(&name).map_err(step("open"))?;
    f.write_all(&data).map_err(step("write"))?;
    f.close().map_err(step("close"))?;
    fs.sync().map_err(step("sync"))?;
    println!("fat-test: round {r}: wrote {len} bytes to \"{name}\", synced");
    let m = fs.metadata(&name).map_err(step("stat"))?;
    if m.len() != len as u64 {
        return Err(Failure::Size {
            got: m.len(),
            want: len as u64,
        });
    }
    println!(
        "fat-test: round {r}: stat: {} bytes, modified {}",
        m.len(),
        m.modified()
    );
    let back = fs.read(&name).map_err(step("read"))?;
    if let Some(at) = (0..len).find(|&j| back.get(j) != Some(&data[j])) {
        return Err(Failure::Differs {
            at,
            got: back.get(at).copied().unwrap_or(0),
            want: data[at],
        });
    }
    if back.len() != len {
        return Err(Failure::Size {
            got: back.len() as u64,
            want: len as u64,
        });
    }
    println!("fat-test: round {r}: read back {len} bytes: equal");
    let mut listed = false;
    for entry in fs.read_dir(".").map_err(step("readdir"))? {
        let entry = entry.map_err(step("readdir"))?;
        listed |= entry.name == name;
        println!(
            "fat-test: round {r}: ls: {:<24} {:>8} bytes{}",
            entry.name,
            entry.metadata.len(),
            if entry.metadata.is_dir() {
                " (dir)"
            } else {
                ""
            }
        );
    }
    if !listed {
        return Err(Failure::NotListed);
    }
    fs.set_current_dir("/").map_err(step("chdir /"))?;
    Ok(())
}
