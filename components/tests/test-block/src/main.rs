//! test-block: a Block session client checking its provider (the
//! virtio-blk driver, or a partition service) — `tests/block.toml`.
//!
//! 1. The device: block size, count, flags, the largest request; what
//!    block 0 holds (on a partition: its boot sector).
//! 2. The write plan (`ucore::blockcheck`: [`REQUESTS`] random runs of
//!    blocks, none overlapping, seeded by `arg`) written with as many
//!    requests in flight as the stream holds, every acknowledgement
//!    checked; then a sync.
//! 3. Read back the same runs, many in flight, in reverse order, each
//!    compared with the plan's bytes.
//! 4. Bad requests, each refused with its status while the provider goes
//!    on: beyond the end, straddling the end, not whole blocks, larger
//!    than the maximum, an unknown op; then a good read still works.
//!
//! The host then checks the disk image (`cargo xtask check-blocks`, the
//! same plan). Prints `test-block: N checks failed` and exits 0 when N
//! is 0; every failed check prints `FAILED`.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;

use rt::abi::caddr::own;
use rt::check::Findings;
use rt::interfaces::child;
use rt::println;
use rt::session::block::{self, Block, BlockError, BlockInfo, BlockSource};
use rt::session::{self, Donor, Session};
use rt::stream::Packet;
use ucore::blockcheck::{self, Plan, Write};

rt::entry!(main);

const SESSION: u32 = child::FIRST_FREE;
const DONOR_BLOCK: u32 = SESSION + 1;
const DONOR_TABLE: u32 = SESSION + 2;
/// The stream's frame and notifications.
const STREAM_SLOTS: [u32; 3] = [SESSION + 3, SESSION + 4, SESSION + 5];
/// Where the stream's frame is mapped (2 MiB aligned, far from the rest).
const STREAM_VA: u64 = 0x50_0000_0000;

/// Writes in the plan.
pub const REQUESTS: u32 = 64;
/// The most blocks one write of the plan moves.
pub const MAX_BLOCKS: u32 = 256;

fn main(arg: u64) -> i32 {
    let seed = arg.max(1);
    let mut c = Findings::new();
    let session = match open() {
        Ok(s) => s,
        Err(e) => {
            println!("test-block: FAILED: Block session: {e}");
            return 1;
        }
    };
    let info = match session.info() {
        Ok(i) => i,
        Err(e) => {
            println!("test-block: FAILED: INFO: {e}");
            return 1;
        }
    };
    println!(
        "test-block: device: {} blocks of {} bytes, {}, {}, at most {} bytes per request",
        info.block_count,
        info.block_size,
        if info.writable {
            "writable"
        } else {
            "read-only"
        },
        if info.sync { "sync" } else { "write-through" },
        info.max_bytes
    );
    // SAFETY: STREAM_VA.. is used by nothing else of this program.
    let mut stream = match unsafe { session.stream(STREAM_SLOTS, STREAM_VA) } {
        Ok(s) => s,
        Err(e) => {
            println!("test-block: FAILED: stream: {e}");
            return 1;
        }
    };
    block_zero(&mut stream, &info);
    let plan = Plan {
        seed,
        block_count: info.block_count,
        requests: REQUESTS,
        max_blocks: MAX_BLOCKS.min(info.max_bytes / info.block_size),
    };
    let writes: Vec<Write> = plan.writes().collect();
    c.expect(
        writes.len() == REQUESTS as usize,
        format_args!("plan: {} writes, seed {seed}", writes.len()),
    );
    if let Err(e) = write_plan(&mut stream, &info, seed, &writes, &mut c) {
        c.expect(false, format_args!("writes: {e}"));
    }
    let synced = stream.sync();
    c.expect(synced.is_ok(), format_args!("sync: {synced:?}"));
    if let Err(e) = read_plan(&mut stream, &info, seed, &writes, &mut c) {
        c.expect(false, format_args!("reads: {e}"));
    }
    refusals(&mut stream, &info, seed, &writes, &mut c);
    c.finish()
}

/// What block 0 holds, before anything is written: on a partition, its
/// first block (a FAT boot sector names its volume label).
fn block_zero(s: &mut BlockSource, info: &BlockInfo) {
    let mut buf = vec![0u8; info.block_size as usize];
    if let Err(e) = s.read(0, &mut buf) {
        return println!("test-block: block 0: {e}");
    }
    let signature = buf.get(510..512) == Some(&[0x55, 0xaa][..]);
    let label = match buf.get(82..90) {
        Some(b"FAT32   ") => buf.get(71..82),
        _ => None,
    };
    match (signature, label) {
        (true, Some(label)) => println!(
            "test-block: block 0: a FAT32 boot sector, volume label \"{}\"",
            core::str::from_utf8(label).unwrap_or("?").trim_end()
        ),
        (true, None) => println!("test-block: block 0: a boot sector (55 aa)"),
        (false, _) => println!("test-block: block 0: no boot sector"),
    }
}

fn open() -> Result<Session<Block>, session::OpenError> {
    let donor = Donor::from_untyped::<Block>(own(child::UNTYPED), DONOR_BLOCK, DONOR_TABLE)
        .map_err(session::OpenError::Donation)?;
    session::open_donating::<Block>(SESSION, donor).map_err(|(e, _)| e)
}

/// Counts of a phase: acknowledgements, bad statuses, the most packets in
/// flight at once.
#[derive(Default)]
struct Phase {
    acked: u32,
    bad: u32,
    most_in_flight: usize,
}

/// The plan's writes, as many in flight as fit.
fn write_plan(
    s: &mut BlockSource,
    info: &BlockInfo,
    seed: u64,
    writes: &[Write],
    c: &mut Findings,
) -> Result<(), BlockError> {
    let mut phase = Phase::default();
    let bs = info.block_size;
    let mut on_ack = |s: &mut BlockSource, p: Packet| {
        phase.acked += 1;
        phase.bad += u32::from(p.op != block::STATUS_OK);
        let _ = s.release(p);
    };
    let mut bytes = 0u64;
    for w in writes {
        let len = w.blocks * bs;
        let p = s.alloc_waiting(len, &mut on_ack)?;
        let payload = s.payload_mut(&p).map_err(BlockError::Packet)?;
        blockcheck::fill(seed, w.first, bs as usize, payload);
        s.submit_waiting(p, block::OP_WRITE, w.first as u32, &mut on_ack)?;
        phase.most_in_flight = phase.most_in_flight.max(s.in_flight());
        bytes += u64::from(len);
    }
    s.drain(&mut on_ack)?;
    c.expect(
        phase.acked == writes.len() as u32 && phase.bad == 0,
        format_args!(
            "{} writes ({} KiB) acknowledged, {} with an error, up to {} in flight at once",
            phase.acked,
            bytes / 1024,
            phase.bad,
            phase.most_in_flight
        ),
    );
    c.expect(
        phase.most_in_flight > 1,
        format_args!("several writes in flight at once"),
    );
    Ok(())
}

/// The plan's runs read back (in reverse order, many in flight), each
/// compared with the plan's bytes.
fn read_plan(
    s: &mut BlockSource,
    info: &BlockInfo,
    seed: u64,
    writes: &[Write],
    c: &mut Findings,
) -> Result<(), BlockError> {
    let bs = info.block_size;
    let mut phase = Phase::default();
    let mut wrong: Option<(u64, usize, u8, u8)> = None;
    let mut on_ack = |s: &mut BlockSource, p: Packet| {
        phase.acked += 1;
        if p.op != block::STATUS_OK {
            phase.bad += 1;
        } else if let Ok(data) = s.payload(&p) {
            if let Some(m) = blockcheck::mismatch(seed, u64::from(p.tag), bs as usize, data) {
                phase.bad += 1;
                wrong.get_or_insert(m);
            }
        }
        let _ = s.release(p);
    };
    for w in writes.iter().rev() {
        let p = s.alloc_waiting(w.blocks * bs, &mut on_ack)?;
        s.submit_waiting(p, block::OP_READ, w.first as u32, &mut on_ack)?;
        phase.most_in_flight = phase.most_in_flight.max(s.in_flight());
    }
    s.drain(&mut on_ack)?;
    c.expect(
        phase.acked == writes.len() as u32 && phase.bad == 0,
        format_args!(
            "{} reads compared with the plan: {} wrong{}, up to {} in flight at once",
            phase.acked,
            phase.bad,
            match wrong {
                Some((b, j, got, want)) =>
                    alloc::format!(" (first: block {b} byte {j}: {got:#04x}, wanted {want:#04x})"),
                None => alloc::string::String::new(),
            },
            phase.most_in_flight
        ),
    );
    Ok(())
}

/// Bad requests refused with their status; the provider goes on.
fn refusals(s: &mut BlockSource, info: &BlockInfo, seed: u64, writes: &[Write], c: &mut Findings) {
    let bs = info.block_size;
    let last = u32::try_from(info.block_count.saturating_sub(1)).unwrap_or(u32::MAX);
    let cases: [(&str, u32, u32, u32, u32); 6] = [
        (
            "read beyond the end",
            block::OP_READ,
            last.saturating_add(1),
            bs,
            block::STATUS_RANGE,
        ),
        (
            "read across the end",
            block::OP_READ,
            last,
            2 * bs,
            block::STATUS_RANGE,
        ),
        (
            "write at block 2^32 - 1",
            block::OP_WRITE,
            u32::MAX,
            bs,
            block::STATUS_RANGE,
        ),
        (
            "read of half a block",
            block::OP_READ,
            0,
            bs / 2,
            block::STATUS_ALIGN,
        ),
        (
            "read over the maximum",
            block::OP_READ,
            0,
            info.max_bytes + bs,
            block::STATUS_SIZE,
        ),
        ("unknown op 99", 99, 0, bs, block::STATUS_OP),
    ];
    let mut refused = 0;
    for (what, op, first, len, want) in cases {
        match s.status_of(op, first, len) {
            Ok(got) if got == want => refused += 1,
            Ok(got) => c.expect(
                false,
                format_args!(
                    "{what}: status {got:#x} ({}), wanted {want:#x}",
                    block::status_text(got)
                ),
            ),
            Err(e) => c.expect(false, format_args!("{what}: {e}")),
        }
    }
    c.expect(
        refused == cases.len(),
        format_args!(
            "bad requests refused with their status: {refused} of {}",
            cases.len()
        ),
    );
    // Still serving: the first run of the plan reads back right.
    let Some(w) = writes.first() else { return };
    let mut buf = vec![0u8; (w.blocks * bs) as usize];
    let read = s.read(w.first as u32, &mut buf);
    let same = blockcheck::mismatch(seed, w.first, bs as usize, &buf).is_none();
    c.expect(
        read.is_ok() && same,
        format_args!("after the refusals a read still works ({read:?}, equal: {same})"),
    );
}
