//! Memory shared with `bench-server` and the bulk-transfer benchmark
//! (protocol: `bench_protocol`).
//!
//! `bench-server` makes a 2 MiB frame and two notifications and hands
//! them over by capability transfer in the replies to `SETUP`; this side
//! maps the frame at [`SHM_VA`]. The server's IPC arrival times and the
//! bulk data area live in it.
//!
//! `bulk-shm` moves [`SAMPLE_BYTES`] per sample in [`CHUNK`]-byte chunks,
//! each through the next slot of the data area: this side copies a chunk
//! from a private buffer into the slot (the runtime's `memcpy`) and
//! signals the server's notification; the server copies the slot out into
//! its private buffer and signals back; this side waits for that before
//! the next chunk. So every byte is copied twice, as a pipe's `write` and
//! `read` copy it (`bw_pipe`), and each chunk costs a signal and a wait on
//! both sides. With one CPU there is nothing to overlap, so one slot in
//! flight loses nothing. [`SAMPLES`] samples after `bench::WARM_UP`
//! unrecorded ones; figures in bytes per tick (`bench::throughput`).

use alloc::vec;

use bench::catalog::Bench;
use bench_protocol as proto;
use rt::abi::caddr::own;
use rt::interfaces::child::SERVICE_ENDPOINT;
use rt::shared::Received;
use rt::syscall;

use crate::env::{failed, SHM_VA};
use crate::{Ctx, Failure};

/// Bytes per chunk (one signal and one wait each way).
pub const CHUNK: usize = proto::MAX_CHUNK;
/// Bytes per sample.
pub const SAMPLE_BYTES: usize = 1 << 20;
/// Samples (each moves [`SAMPLE_BYTES`]).
pub const SAMPLES: usize = 100;

const CHUNKS_PER_SAMPLE: usize = SAMPLE_BYTES / CHUNK;
const SLOTS: usize = proto::SHM_DATA_BYTES / CHUNK;

/// The shared frame (mapped at [`SHM_VA`]) and notifications, asked for
/// on first use (`rt::shared`).
pub fn shared(ctx: &mut Ctx) -> Result<Received, Failure> {
    if let Some(s) = ctx.server {
        return Ok(s);
    }
    let slots = [ctx.env.slot()?, ctx.env.slot()?, ctx.env.slot()?];
    // SAFETY: SHM_VA is the region of the shared frame (see `env`), which
    // nothing else of this program uses.
    let received = unsafe {
        rt::shared::receive(
            own(SERVICE_ENDPOINT),
            proto::SETUP,
            proto::OK,
            slots,
            SHM_VA,
        )
    };
    Ok(*ctx.server.insert(received.map_err(Failure::Setup)?))
}

/// `bulk-shm`: see the module doc.
pub fn bulk(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    let shared = shared(ctx)?;
    let rounds = (bench::WARM_UP + SAMPLES) * CHUNKS_PER_SAMPLE;
    crate::ipc::server_call(proto::BULK, [rounds as u64, CHUNK as u64, 0, 0])?;
    let source = vec![0xa5u8; CHUNK];
    let data = (SHM_VA as usize + proto::SHM_DATA) as *mut u8;
    let mut samples = vec![0; SAMPLES];
    let mut error = None;
    let mut slot = 0;
    bench::measure(&mut samples, ctx.overhead, || {
        for _ in 0..CHUNKS_PER_SAMPLE {
            // SAFETY: the data area lies inside the shared frame mapped at
            // SHM_VA; slot < SLOTS keeps the chunk inside it. The server
            // reads the slot only between this side's signal and its own
            // signal back, which this side waits for before it writes
            // again, so nothing else accesses these bytes meanwhile.
            let chunk = unsafe { core::slice::from_raw_parts_mut(data.add(slot * CHUNK), CHUNK) };
            bench::kernels::copy_runtime(chunk, &source);
            slot = (slot + 1) % SLOTS;
            let handed = syscall::signal(shared.server_notify)
                .and_then(|()| syscall::wait(shared.client_notify).map(drop));
            if let Err(e) = handed {
                error = Some(e);
            }
        }
    });
    if let Some(e) = error {
        return Err(failed("Signal/Wait (bulk)")(e));
    }
    for s in samples.iter_mut() {
        *s = bench::throughput(SAMPLE_BYTES as u64, *s);
    }
    let what = alloc::format!(
        "bulk transfer to bench-server through a shared 2 MiB frame + a notification each way, \
         {} KiB chunks copied in and out (runtime memcpy, like a pipe's write and read), \
         {} MiB per sample, bytes/tick",
        CHUNK >> 10,
        SAMPLE_BYTES >> 20
    );
    ctx.report(b, &what, bench::Unit::BytesPerTick, &samples)
}
