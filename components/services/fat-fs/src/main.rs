//! fat-fs: the FAT file system service. It mounts the FAT12/16/32
//! volume on its Block session (usually a partition from the partition
//! service) with the `fat` crate — whose module docs say why Pecan has its
//! own FAT layer, how its write-back cache orders writes, and what a
//! corrupt image yields — and serves it as File system sessions
//! (`rt::session::fs` has the protocol, `rt::fs` the client API).
//!
//! Every session sees the whole volume; a handle belongs to the session
//! that opened it. Bad requests — a malformed path, another session's
//! handle, an unknown opcode — and a corrupt volume are error replies;
//! the service goes on serving. When it cannot mount the volume at all
//! it says why (`fat-fs: cannot mount the volume: ...`) and answers every
//! request with `NotMounted`.
//!
//! Timestamps: when its scenario routes it an `Rtc` session
//! (`rt::session::rtc`, the RTC service) it asks that for the date and
//! time before each request that can write — `OPEN` with any write or
//! create bit, `WRITE`, `TRUNCATE`, `MKDIR`, `RENAME`, `UNLINK`, `RMDIR`,
//! `CLOSE` — and sets the volume's clock to it (`Volume::set_time`), so
//! the entries it writes carry that time (one session RPC per such
//! request: cheap next to the request). Without a route the open is
//! refused by init and the timestamps stay FAT's epoch, 1980-01-01; the
//! start says which (`fat-fs: timestamps from the Rtc session` or
//! `fat-fs: no Rtc session: timestamps are 1980-01-01`). A reading that
//! fails later (the RTC service stopped) is logged once and the volume
//! keeps the last time read; the session is not reopened.
//!
//! Durability: writes stay in the cache until `SYNC`, until the cache
//! evicts them (in the crate's safe order), or until a session closes —
//! the service syncs then, so a client that finishes (init closes its
//! sessions before the system powers off) leaves its data on the device.
//!
//! Data path (docs/drivers.md, "Copies on the bulk paths"): the client's
//! buffer → the session's I/O buffer (rt::fs) → a bounce buffer here →
//! the volume (runs of 64 KiB and more go straight to the device request,
//! smaller ones through the crate's read-ahead or write-behind window) →
//! the Block stream. A read of less than 64 KiB skips the bounce buffer:
//! `Volume::read_with` copies from the read-ahead window into the I/O
//! buffer (`Region::copy_from`, no Rust reference into memory the client
//! can write).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

mod device;

use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use fat::{FsError, Handle, OpenMode, SeekFrom, Volume};
use rt::abi::caddr::own;
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{MsgInfo, ObjectType};
use rt::interfaces::child;
use rt::mmio::Region;
use rt::println;
use rt::session::fs::{self as proto, Error, FileSystem, Stat, Time};
use rt::session::rtc::Rtc;
use rt::session::{Donated, Label, OpenError, Provider, Session as Opened};
use rt::syscall::{self, Words};

use device::BlockDisk;

rt::entry!(main);

const BLOCK: u32 = child::FIRST_FREE;
const BLOCK_DONOR: u32 = BLOCK + 1;
const BLOCK_TABLE: u32 = BLOCK + 2;
const BLOCK_STREAM: [u32; 3] = [BLOCK + 3, BLOCK + 4, BLOCK + 5];
const FIRST_SESSION_SLOT: u32 = BLOCK + 6;
const MAX_SESSIONS: usize = 8;
const END_SESSION_SLOT: u32 = FIRST_SESSION_SLOT + 2 * MAX_SESSIONS as u32;
/// The heap's extra frames (the bounce buffer and the cache live there).
const HEAP_SLOT: u32 = END_SESSION_SLOT;
const HEAP_FRAMES: u32 = 2;
/// The Rtc session, if the scenario routes one.
const RTC_SLOT: u32 = HEAP_SLOT + HEAP_FRAMES;

const BLOCK_VA: u64 = 0x40_0000_0000;
/// Session `i`'s I/O buffer.
const SESSION_VA: u64 = 0x50_0000_0000;

/// The volume, or why there is none.
type Mounted = Result<Volume<BlockDisk>, FsError>;

/// One session: its I/O buffer and its open files.
struct Session {
    window: usize,
    buffer: Region,
    frame: rt::abi::CapSlot,
    handles: Vec<Handle>,
    state: Rc<RefCell<State>>,
}

/// What every session shares.
struct State {
    volume: Mounted,
    windows: [bool; MAX_SESSIONS],
    /// A bounce buffer between the I/O buffer and the volume.
    bounce: Vec<u8>,
    clock: Clock,
}

/// Where the volume's timestamps come from: the Rtc session, or nothing
/// (FAT's epoch, the volume's default).
struct Clock {
    rtc: Option<Opened<Rtc>>,
    /// Whether the last reading failed (logged once per run of failures).
    failing: bool,
}

impl Clock {
    /// Opens the Rtc session if the scenario routes one; says which.
    fn open() -> Clock {
        let rtc = match rt::session::open::<Rtc>(RTC_SLOT) {
            Ok(session) => {
                println!("fat-fs: timestamps from the Rtc session");
                Some(session)
            }
            Err(OpenError::Unrouted) => {
                println!("fat-fs: no Rtc session: timestamps are 1980-01-01");
                None
            }
            Err(e) => {
                println!("fat-fs: no Rtc session ({e}): timestamps are 1980-01-01");
                None
            }
        };
        Clock {
            rtc,
            failing: false,
        }
    }

    /// Sets `volume`'s time to the session's reading, if there is one.
    fn stamp(&mut self, volume: &mut Volume<BlockDisk>) {
        let Some(rtc) = &self.rtc else {
            return;
        };
        match rtc.now() {
            Ok(t) => {
                self.failing = false;
                volume.set_time(fat::DateTime {
                    year: t.year,
                    month: t.month,
                    day: t.day,
                    hour: t.hour,
                    minute: t.minute,
                    second: t.second,
                });
            }
            Err(e) if !self.failing => {
                self.failing = true;
                println!("fat-fs: the Rtc session: {e}; timestamps keep the last time read");
            }
            Err(_) => {}
        }
    }
}

/// Whether request `op` with words `w` can write to the volume (and so
/// needs the time).
fn writes(op: u64, w: &Words) -> bool {
    use proto::mode;
    match op {
        proto::OPEN => {
            let writing =
                mode::WRITE | mode::APPEND | mode::CREATE | mode::CREATE_NEW | mode::TRUNCATE;
            w[1] & writing != 0
        }
        proto::WRITE
        | proto::TRUNCATE
        | proto::MKDIR
        | proto::RENAME
        | proto::UNLINK
        | proto::RMDIR
        | proto::CLOSE => true,
        _ => false,
    }
}

fn main(_: u64) -> i32 {
    if let Err(e) = rt::heap::grow(HEAP_SLOT, HEAP_FRAMES) {
        println!("fat-fs: growing the heap: {e}");
        return 1;
    }
    let volume = match BlockDisk::open(BLOCK, BLOCK_DONOR, BLOCK_TABLE, BLOCK_STREAM, BLOCK_VA) {
        Ok(disk) => Volume::mount(disk),
        Err(e) => {
            println!("fat-fs: the volume's Block session: {e}");
            return 1;
        }
    };
    match &volume {
        Ok(v) => println!(
            "fat-fs: {:?} volume: {} clusters of {} bytes",
            v.kind(),
            v.cluster_count(),
            v.cluster_bytes()
        ),
        Err(e) => println!("fat-fs: cannot mount the volume: {e}; every request is refused"),
    }
    let clock = Clock::open();
    let state = Rc::new(RefCell::new(State {
        volume,
        windows: [false; MAX_SESSIONS],
        bounce: vec![0; proto::MAX_IO],
        clock,
    }));
    let provider = Provider::<FileSystem, Session>::new(FIRST_SESSION_SLOT, END_SESSION_SLOT);
    let for_new = state.clone();
    provider.serve(
        move |label, donated| open_session(&for_new, label, donated),
        move |_, session, op, words| {
            if op == proto::BUFFER {
                return reply_buffer(session.frame);
            }
            let answer = session.request(op, words);
            match answer {
                Ok((label, w)) => rt::server::answer(label, w),
                Err(e) => rt::server::answer(e as u64, [0; 4]),
            }
        },
    )
}

/// A session: its I/O buffer made from the donation and mapped.
fn open_session(
    state: &Rc<RefCell<State>>,
    label: &Label,
    donated: Option<Donated>,
) -> Result<Session, u64> {
    let donated = donated.ok_or(rt::interfaces::session::REFUSED_QUOTA)?;
    let window = {
        let mut s = state.borrow_mut();
        let w = s
            .windows
            .iter()
            .position(|used| !used)
            .ok_or(rt::session::REFUSED_FULL)?;
        s.windows[w] = true;
        w
    };
    let frame = donated.slot(0);
    let va = SESSION_VA + window as u64 * proto::BUFFER_BYTES as u64;
    let rw = MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    };
    let made =
        syscall::retype(donated.untyped(), ObjectType::Frame2M, 0, frame, 1).and_then(|()| {
            // SAFETY: window `window` is this session's alone.
            unsafe { syscall::map(own(child::OWN_VSPACE), frame, va, rw) }
        });
    if let Err(e) = made {
        println!("fat-fs: session for {}: its buffer: {e}", label.as_str());
        state.borrow_mut().windows[window] = false;
        return Err(rt::interfaces::session::REFUSED_QUOTA);
    }
    // SAFETY: just mapped, 2 MiB, used by this session alone.
    let buffer = unsafe { Region::from_mapped(va as usize, proto::BUFFER_BYTES) };
    println!("fat-fs: session for {}", label.as_str());
    Ok(Session {
        window,
        buffer,
        frame,
        handles: Vec::new(),
        state: state.clone(),
    })
}

/// The error a volume error is on the wire (logged when it is
/// corruption: the log says what is broken).
fn wire(e: FsError) -> Error {
    match e {
        FsError::Device(_) => Error::Device,
        FsError::NotFound => Error::NotFound,
        FsError::Exists => Error::Exists,
        FsError::NotADirectory => Error::NotADirectory,
        FsError::IsADirectory => Error::IsADirectory,
        FsError::DirectoryNotEmpty => Error::DirectoryNotEmpty,
        FsError::InvalidName => Error::InvalidName,
        FsError::NoSpace => Error::NoSpace,
        FsError::FileTooLarge => Error::FileTooLarge,
        FsError::Corrupt(c) => {
            println!("fat-fs: the volume is corrupt: {c}");
            Error::Corrupt
        }
        FsError::TooManyOpen => Error::TooManyOpen,
        FsError::BadHandle => Error::BadHandle,
        FsError::ReadOnly => Error::ReadOnly,
        FsError::Busy => Error::Busy,
        FsError::InvalidArgument => Error::InvalidArgument,
        _ => Error::Other,
    }
}

fn time(t: fat::DateTime) -> Time {
    Time {
        year: t.year,
        month: t.month,
        day: t.day,
        hour: t.hour,
        minute: t.minute,
        second: t.second,
    }
}

fn stat(m: &fat::Metadata) -> Stat {
    Stat {
        size: m.size,
        is_dir: m.is_dir,
        attributes: m.attributes,
        modified: time(m.modified),
        created: time(m.created),
    }
}

impl Session {
    /// The path of `len` bytes at the buffer's offset `at`.
    fn path(&self, at: u64, len: u64) -> Result<String, Error> {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= proto::MAX_PATH)
            .ok_or(Error::InvalidArgument)?;
        let at = usize::try_from(at).map_err(|_| Error::InvalidArgument)?;
        let mut bytes = vec![0u8; len];
        self.buffer
            .copy_to(at, &mut bytes)
            .ok_or(Error::InvalidArgument)?;
        String::from_utf8(bytes).map_err(|_| Error::InvalidArgument)
    }

    /// Handle word `w`, if this session opened it.
    fn handle(&self, w: u64) -> Result<Handle, Error> {
        let h = Handle(u32::try_from(w).map_err(|_| Error::BadHandle)?);
        match self.handles.contains(&h) {
            true => Ok(h),
            false => Err(Error::BadHandle),
        }
    }

    /// Serves request `op`: the reply's label and words.
    fn request(&mut self, op: u64, w: Words) -> Result<(u64, Words), Error> {
        let state = self.state.clone();
        let mut state = state.borrow_mut();
        let State {
            volume,
            bounce,
            clock,
            ..
        } = &mut *state;
        let v = volume.as_mut().map_err(|_| Error::NotMounted)?;
        if writes(op, &w) {
            clock.stamp(v);
        }
        let ok = |words: Words| Ok((proto::OK, words));
        match op {
            proto::OPEN => {
                let path = self.path(0, w[0])?;
                let bits = w[1];
                let mode = OpenMode {
                    read: bits & proto::mode::READ != 0,
                    write: bits & proto::mode::WRITE != 0,
                    append: bits & proto::mode::APPEND != 0,
                    create: bits & proto::mode::CREATE != 0,
                    create_new: bits & proto::mode::CREATE_NEW != 0,
                    truncate: bits & proto::mode::TRUNCATE != 0,
                };
                let h = v.open(&path, mode).map_err(wire)?;
                self.handles.push(h);
                ok([u64::from(h.0), 0, 0, 0])
            }
            proto::CLOSE => {
                let h = self.handle(w[0])?;
                self.handles.retain(|&x| x != h);
                v.close(h).map_err(wire)?;
                ok([0; 4])
            }
            proto::READ => {
                let h = self.handle(w[0])?;
                let n = usize::try_from(w[1])
                    .ok()
                    .filter(|&n| n <= proto::MAX_IO)
                    .ok_or(Error::InvalidArgument)?;
                // Straight from the volume's read-ahead window into the
                // I/O buffer, one copy, no reference into it; what comes
                // straight from the device, through the bounce buffer.
                let mut fits = true;
                let buffer = &self.buffer;
                let got = v
                    .read_with(h, n, bounce, |at, bytes| {
                        fits &= buffer.copy_from(at, bytes).is_some();
                    })
                    .map_err(wire)?;
                if !fits {
                    return Err(Error::Other);
                }
                ok([got as u64, 0, 0, 0])
            }
            proto::WRITE => {
                let h = self.handle(w[0])?;
                let n = usize::try_from(w[1])
                    .ok()
                    .filter(|&n| n <= proto::MAX_IO)
                    .ok_or(Error::InvalidArgument)?;
                self.buffer
                    .copy_to(0, &mut bounce[..n])
                    .ok_or(Error::Other)?;
                let put = v.write(h, &bounce[..n]).map_err(wire)?;
                ok([put as u64, 0, 0, 0])
            }
            proto::SEEK => {
                let h = self.handle(w[0])?;
                let to = match w[1] {
                    proto::SEEK_START => SeekFrom::Start(w[2]),
                    proto::SEEK_END => SeekFrom::End(w[2] as i64),
                    proto::SEEK_CURRENT => SeekFrom::Current(w[2] as i64),
                    _ => return Err(Error::InvalidArgument),
                };
                ok([v.seek(h, to).map_err(wire)?, 0, 0, 0])
            }
            proto::TRUNCATE => {
                let h = self.handle(w[0])?;
                v.truncate(h, w[1]).map_err(wire)?;
                ok([0; 4])
            }
            proto::STAT => {
                let path = self.path(0, w[0])?;
                ok(stat(&v.stat(&path).map_err(wire)?).words())
            }
            proto::FSTAT => {
                let h = self.handle(w[0])?;
                ok(stat(&v.fstat(h).map_err(wire)?).words())
            }
            proto::MKDIR => {
                let path = self.path(0, w[0])?;
                v.mkdir(&path).map_err(wire).and(ok([0; 4]))
            }
            proto::RMDIR => {
                let path = self.path(0, w[0])?;
                v.rmdir(&path).map_err(wire).and(ok([0; 4]))
            }
            proto::UNLINK => {
                let path = self.path(0, w[0])?;
                v.unlink(&path).map_err(wire).and(ok([0; 4]))
            }
            proto::RENAME => {
                let from = self.path(0, w[0])?;
                let to = self.path(w[0], w[1])?;
                v.rename(&from, &to).map_err(wire).and(ok([0; 4]))
            }
            proto::READ_DIR => {
                let path = self.path(0, w[0])?;
                let index = usize::try_from(w[1]).map_err(|_| Error::InvalidArgument)?;
                match v.read_dir(&path, index).map_err(wire)? {
                    None => Ok((proto::END, [0; 4])),
                    Some(e) => {
                        let name = e.name.as_bytes();
                        self.buffer.copy_from(0, name).ok_or(Error::Other)?;
                        let mut words = stat(&e.metadata).words();
                        words[1] |= (name.len() as u64) << 32;
                        ok(words)
                    }
                }
            }
            proto::SYNC => v.sync().map_err(wire).and(ok([0; 4])),
            proto::INFO => {
                let kind = match v.kind() {
                    fat::FatKind::Fat12 => 12,
                    fat::FatKind::Fat16 => 16,
                    fat::FatKind::Fat32 => 32,
                };
                let free = v.free_clusters().map_err(wire)?;
                ok([
                    kind,
                    u64::from(v.cluster_bytes()),
                    u64::from(v.cluster_count()),
                    u64::from(free),
                ])
            }
            _ => Err(Error::InvalidArgument),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let mut state = self.state.borrow_mut();
        if let Ok(v) = state.volume.as_mut() {
            for h in self.handles.drain(..) {
                let _ = v.close(h);
            }
            if let Err(e) = v.sync() {
                println!("fat-fs: sync when a session closed: {e}");
            }
        }
        state.windows[self.window] = false;
        // SAFETY: the buffer is not used again: the session ends here.
        let _ = unsafe { syscall::unmap(self.frame) };
    }
}

/// The reply to `BUFFER`: the frame.
fn reply_buffer(frame: rt::abi::CapSlot) -> (MsgInfo, Words) {
    rt::transfer::set_send_cap(frame);
    (MsgInfo::new(proto::OK, 0, 1).unwrap_or_default(), [0; 4])
}
