//! IPC, notification and ring benchmarks.
//!
//! One-way figures follow the `bench` crate's method: the sender takes
//! `t0` right before its system call and keeps it (in a register across
//! the call, stored after it returns, so nothing is added to the path);
//! the receiver takes `t1` right after its own system call returns and
//! stores it in [`ARRIVALS`] (helpers of this address space) or in the
//! frame shared with `bench-server`; the sample is `t1 - t0 - overhead`.
//! Every run makes [`RUNS`] = `WARM_UP + SAMPLES` hand-overs, the first
//! `WARM_UP` unrecorded.
//!
//! Helper threads end with exit code 0 after their last hand-over, or
//! with one of the `EXIT_*` codes below when a system call fails or a
//! message arrives cut.

use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use bench::catalog::Bench;
use bench::{now, SAMPLES, WARM_UP};
use bench_protocol as proto;
use rt::abi::caddr::own;
use rt::abi::{CapSlot, MsgInfo, ObjectType};
use rt::interfaces::child::{PRIORITY, SERVICE_ENDPOINT};
use rt::syscall::{self, NO_WORDS};

use crate::env::{failed, SHM_VA};
use crate::{Ctx, Failure};

/// Hand-overs per run: warm-up and samples.
pub const RUNS: usize = WARM_UP + SAMPLES;
/// Most threads in a ring.
pub const MAX_RING: usize = 10;

/// Helper exit codes.
const EXIT_RECV: i32 = 2;
const EXIT_CUT: i32 = 3;
const EXIT_SEND: i32 = 4;

/// Receive times recorded by helpers (`t1`).
static ARRIVALS: [AtomicU64; RUNS] = [const { AtomicU64::new(0) }; RUNS];
/// Send times recorded by a sending helper (`t0`).
static DEPARTURES: [AtomicU64; RUNS] = [const { AtomicU64::new(0) }; RUNS];
/// The ring's endpoints: member i receives on `RING[i]`.
static RING: [AtomicU64; MAX_RING] = [const { AtomicU64::new(0) }; MAX_RING];

/// Objects made on first use.
pub struct Objects {
    endpoint: Option<CapSlot>,
    notification: Option<CapSlot>,
    ring: Vec<CapSlot>,
}

impl Objects {
    pub const fn new() -> Objects {
        Objects {
            endpoint: None,
            notification: None,
            ring: Vec::new(),
        }
    }
}

/// The `what` of an IPC benchmark: how many words go where.
fn words_what(words: usize) -> &'static str {
    match words {
        0 => "0 words",
        4 => "4 words (all in registers)",
        8 => "8 words (4 in registers, 4 through the IPC buffers)",
        _ => "16 words (4 in registers, 12 through the IPC buffers)",
    }
}

/// `ipc-intra-Nw`: see the crate doc.
pub fn intra(ctx: &mut Ctx, b: &Bench, words: usize) -> Result<(), Failure> {
    let info = MsgInfo::new(0, words, 0).unwrap_or_default();
    let samples = with_receiver(ctx, words, |ep, overhead| {
        let departures = calls(ep, info, || {})?;
        Ok(one_way(&departures, &arrivals(), overhead))
    })?;
    let what = alloc::format!(
        "IPC Call one-way to a thread of the same address space and priority blocked in \
         ReplyRecv, {}",
        words_what(words)
    );
    ctx.report(b, &what, bench::Unit::Ticks, &samples)
}

/// `ipc-intra-0w-fpu`: `ipc-intra-0w` with a caller that has used a
/// vector register in its turn before each call, so its FPU state is
/// live: the fast path saves it (`xsaveopt`), resets the registers
/// (`xrstor`) and sets CR0.TS on the way (`SE_RELEASE_FPU`).
pub fn intra_fpu(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    let samples = with_receiver(ctx, 0, |ep, overhead| {
        let departures = calls(ep, MsgInfo::default(), touch_vector_state)?;
        Ok(one_way(&departures, &arrivals(), overhead))
    })?;
    ctx.report(
        b,
        "IPC Call one-way to a thread of the same address space and priority blocked in \
         ReplyRecv, 0 words, the caller having used a vector register in its turn (the \
         fast path saves its x87/SSE/AVX state on the way: xsaveopt, xrstor of the clean \
         state, CR0.TS set)",
        bench::Unit::Ticks,
        &samples,
    )
}

/// `fpu-first-use`: the first vector instruction of a turn, timed alone:
/// before each sample the thread uses a vector register and calls a
/// helper (which does not), so its state is saved and it comes back with
/// CR0.TS set; the instruction then traps (#NM), the kernel loads the
/// thread's state and the instruction runs.
pub fn fpu_first_use(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    let samples = with_receiver(ctx, 0, |ep, overhead| {
        let mut samples = Vec::with_capacity(SAMPLES);
        for i in 0..RUNS {
            touch_vector_state();
            syscall::call(ep, MsgInfo::default(), NO_WORDS).map_err(failed("Call"))?;
            let t0 = now();
            touch_vector_state();
            let t1 = now();
            if i >= WARM_UP {
                samples.push(t1.wrapping_sub(t0).saturating_sub(overhead));
            }
        }
        Ok(samples)
    })?;
    ctx.report(
        b,
        "the first vector instruction (vptest ymm0) of a thread's turn after another thread \
         ran: #NM trap, the kernel loads the thread's x87/SSE/AVX state (xrstor), the \
         instruction runs; ticks including the instruction",
        bench::Unit::Ticks,
        &samples,
    )
}

/// Executes one AVX instruction that changes no register (`vptest` sets
/// only the flags), so the thread's vector state becomes live.
#[inline(always)]
fn touch_vector_state() {
    // SAFETY: reads ymm0 and writes only the flags (not declared
    // preserved); touches no memory. With CR0.TS set it traps once and the
    // kernel loads this thread's state; the components are built
    // soft-float, so nothing else uses ymm0.
    unsafe { core::arch::asm!("vptest ymm0, ymm0", options(nomem, nostack)) }
}

/// The receive times the helper recorded.
fn arrivals() -> Vec<u64> {
    ARRIVALS.iter().map(|r| r.load(Ordering::Relaxed)).collect()
}

/// Starts a helper of this address space that receives [`RUNS`] calls of
/// `words` words on the intra benchmarks' endpoint ([`ipc_receiver`]),
/// runs `measure` with that endpoint and the timestamp overhead (it must
/// make exactly [`RUNS`] calls) and waits for the helper to end.
fn with_receiver(
    ctx: &mut Ctx,
    words: usize,
    measure: impl FnOnce(CapSlot, u64) -> Result<Vec<u64>, Failure>,
) -> Result<Vec<u64>, Failure> {
    let ep = ctx.env.once(&mut ctx.ipc.endpoint, ObjectType::Endpoint)?;
    let arg = ep | (words as u64) << 32;
    ctx.helpers
        .start(&mut ctx.env, 0, ipc_receiver, arg, PRIORITY)?;
    let samples = match measure(ep, ctx.overhead) {
        Ok(samples) => samples,
        Err(e) => {
            ctx.helpers.stop(1);
            return Err(e);
        }
    };
    ctx.helpers.join(1)?;
    Ok(samples)
}

/// [`RUNS`] calls of `info` on `ep`, each after `before`; returns the time
/// before each call.
fn calls(ep: CapSlot, info: MsgInfo, before: impl Fn()) -> Result<Vec<u64>, Failure> {
    let mut departures = vec![0; RUNS];
    for d in departures.iter_mut() {
        before();
        let t0 = now();
        let result = syscall::call(ep, info, NO_WORDS);
        *d = t0;
        result.map_err(failed("Call"))?;
    }
    Ok(departures)
}

/// The samples `arrivals[i] - departures[i] - overhead` after the warm-up.
fn one_way(departures: &[u64], arrivals: &[u64], overhead: u64) -> Vec<u64> {
    departures
        .iter()
        .zip(arrivals)
        .skip(WARM_UP)
        .map(|(&t0, &t1)| t1.wrapping_sub(t0).saturating_sub(overhead))
        .collect()
}

/// Helper: receives [`RUNS`] calls of `arg >> 32` words on endpoint
/// `arg as u32`, recording each arrival, and replies to each with an
/// empty message.
extern "C" fn ipc_receiver(arg: u64) -> ! {
    let ep = arg & 0xffff_ffff;
    let words = (arg >> 32) as usize;
    let reply = MsgInfo::default();
    let mut received = syscall::recv(ep);
    let mut k = 0;
    loop {
        let t1 = now();
        match received {
            Ok((_, info, _)) if info.length() == words => {}
            Ok(_) => syscall::thread_exit(EXIT_CUT),
            Err(_) => syscall::thread_exit(EXIT_RECV),
        }
        ARRIVALS[k].store(t1, Ordering::Relaxed);
        k += 1;
        if k == RUNS {
            break;
        }
        received = syscall::reply_recv(ep, reply, NO_WORDS);
    }
    match syscall::reply(reply, NO_WORDS) {
        Ok(()) => syscall::thread_exit(0),
        Err(_) => syscall::thread_exit(EXIT_SEND),
    }
}

/// A call to `bench-server` that must be answered with [`proto::OK`];
/// returns the reply's words.
pub fn server_call(label: u64, words: [u64; 4]) -> Result<[u64; 4], Failure> {
    let info = MsgInfo::new(label, words.len(), 0).unwrap_or_default();
    let (reply, w) =
        syscall::call(own(SERVICE_ENDPOINT), info, words).map_err(failed("Call (bench-server)"))?;
    if reply.label() != proto::OK {
        return Err(Failure::Server {
            request: label,
            label: reply.label(),
        });
    }
    Ok(w)
}

/// `ipc-inter-Nw`: see the crate doc.
pub fn inter(ctx: &mut Ctx, b: &Bench, words: usize) -> Result<(), Failure> {
    crate::bulk::shared(ctx)?;
    server_call(proto::TIMED_START, NO_WORDS)?;
    let info = MsgInfo::new(proto::TIMED, words, 0).unwrap_or_default();
    let departures = calls(own(SERVICE_ENDPOINT), info, || {})?;
    let recorded = server_call(proto::TIMED_END, NO_WORDS)?[0];
    if recorded != RUNS as u64 {
        return Err(Failure::Arrivals {
            expected: RUNS,
            got: recorded,
        });
    }
    let base = (SHM_VA as usize + proto::SHM_ARRIVALS) as *const u64;
    let arrivals: Vec<u64> = (0..RUNS)
        // SAFETY: the shared frame is mapped at SHM_VA (`bulk::shared`)
        // for the rest of the run; RUNS <= MAX_ARRIVALS keeps the reads
        // inside the arrival times; the server wrote them before it
        // answered TIMED_END. Volatile: another address space writes them.
        .map(|i| unsafe { base.add(i).read_volatile() })
        .collect();
    let samples = one_way(&departures, &arrivals, ctx.overhead);
    let what = alloc::format!(
        "IPC Call one-way to bench-server (another address space, same priority, blocked in \
         ReplyRecv on the service endpoint), {}",
        words_what(words)
    );
    ctx.report(b, &what, bench::Unit::Ticks, &samples)
}

const _: () = assert!(RUNS <= proto::MAX_ARRIVALS);

/// `notification`: see the crate doc.
pub fn notification(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    let n = ctx
        .env
        .once(&mut ctx.ipc.notification, ObjectType::Notification)?;
    // The waiter first: at this thread's priority it runs (and blocks in
    // Wait) as soon as this thread blocks in `join`, before the signaller
    // at the lower priority gets the CPU.
    ctx.helpers.start(&mut ctx.env, 0, waiter, n, PRIORITY)?;
    ctx.helpers
        .start(&mut ctx.env, 1, signaller, n, PRIORITY - 1)?;
    ctx.helpers.join(2)?;
    let load =
        |a: &[AtomicU64]| -> Vec<u64> { a.iter().map(|x| x.load(Ordering::Relaxed)).collect() };
    let samples = one_way(&load(&DEPARTURES), &load(&ARRIVALS), ctx.overhead);
    ctx.report(
        b,
        "notification Signal to the wake-up of a thread blocked in Wait at a higher priority \
         (100, the signaller 99), same address space, one-way",
        bench::Unit::Ticks,
        &samples,
    )
}

/// Helper: waits [`RUNS`] times on notification `n`, recording each
/// wake-up.
extern "C" fn waiter(n: u64) -> ! {
    for arrival in &ARRIVALS {
        let result = syscall::wait(n);
        let t1 = now();
        if result.is_err() {
            syscall::thread_exit(EXIT_RECV);
        }
        arrival.store(t1, Ordering::Relaxed);
    }
    syscall::thread_exit(0)
}

/// Helper: signals notification `n` [`RUNS`] times, recording the time
/// before each signal.
extern "C" fn signaller(n: u64) -> ! {
    for departure in &DEPARTURES {
        let t0 = now();
        let result = syscall::signal(n);
        departure.store(t0, Ordering::Relaxed);
        if result.is_err() {
            syscall::thread_exit(EXIT_SEND);
        }
    }
    syscall::thread_exit(0)
}

/// The one-word token message of the ring.
fn token_info() -> MsgInfo {
    MsgInfo::new(0, 1, 0).unwrap_or_default()
}

/// `ring-N`: see the crate doc.
pub fn ring(ctx: &mut Ctx, b: &Bench, n: usize) -> Result<(), Failure> {
    let n = n.clamp(2, MAX_RING);
    while ctx.ipc.ring.len() < n {
        let ep = ctx.env.make(ObjectType::Endpoint, 0)?;
        RING[ctx.ipc.ring.len()].store(ep, Ordering::Relaxed);
        ctx.ipc.ring.push(ep);
    }
    for member in 1..n {
        let arg = member as u64 | (n as u64) << 8;
        ctx.helpers
            .start(&mut ctx.env, member - 1, ring_member, arg, PRIORITY)?;
    }
    let (first, own_ep) = (ctx.ipc.ring[1], ctx.ipc.ring[0]);
    let info = token_info();
    let mut samples = vec![0; SAMPLES];
    let mut error = None;
    let mut token = 0u64;
    bench::measure(&mut samples, ctx.overhead, || {
        token += 1;
        let round = syscall::send(first, info, [token, 0, 0, 0])
            .and_then(|()| syscall::recv(own_ep).map(drop));
        if let Err(e) = round {
            error = Some(e);
        }
    });
    if let Some(e) = error {
        ctx.helpers.stop(n - 1);
        return Err(failed("Send/Recv (ring)")(e));
    }
    ctx.helpers.join(n - 1)?;
    // Per hand-over, rounded to the nearest tick.
    for s in samples.iter_mut() {
        *s = (*s + n as u64 / 2) / n as u64;
    }
    let what = alloc::format!(
        "token (one message word) passed by Send/Recv around a ring of {n} threads of one \
         address space (an endpoint each), per hand-over: round / {n}"
    );
    ctx.report(b, &what, bench::Unit::Ticks, &samples)
}

/// Helper: ring member `arg & 0xff` of `arg >> 8`: [`RUNS`] times
/// receives the token on its endpoint and sends it on to the next.
extern "C" fn ring_member(arg: u64) -> ! {
    let (i, n) = ((arg & 0xff) as usize, (arg >> 8) as usize);
    let own_ep = RING[i].load(Ordering::Relaxed);
    let next = RING[(i + 1) % n].load(Ordering::Relaxed);
    let info = token_info();
    for _ in 0..RUNS {
        let Ok((_, _, words)) = syscall::recv(own_ep) else {
            syscall::thread_exit(EXIT_RECV)
        };
        if syscall::send(next, info, words).is_err() {
            syscall::thread_exit(EXIT_SEND);
        }
    }
    syscall::thread_exit(0)
}
