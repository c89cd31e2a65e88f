//! test-async: providers and clients for init's non-blocking session
//! routing (docs/architecture.md, "Sessions and routing", 10; scenarios
//! `session-stuck`, `session-lazy`, `session-client-dies`). The config's
//! `arg` picks the role:
//!
//! | arg | role |
//! |-----|------|
//! | 1 | provider of `Stuck`: never answers the first `OPEN_SESSION` (it keeps it as a reply capability, so later requests do not abort it); answers later ones; a session's `DIE` request makes it crash |
//! | 2 | client: opens `Stuck` once and prints the outcome |
//! | 3 | client: opens `Stuck`, then asks it to `DIE` |
//! | 4 | provider of `Lazy`: on each `OPEN_SESSION` it first opens a `Log` session of its own (the deadlock of a synchronous init), then answers |
//! | 5 | client: opens `Lazy`, calls it once |
//! | 6 | provider of `Held`: keeps the first `OPEN_SESSION` until the second comes, then answers both; logs each `CLOSE_SESSION` |
//! | 7 | client that dies while its open waits: a helper thread opens `Held`, the main thread exits meanwhile |
//! | 8 | client: opens `Held` |
//!
//! A provider answers an `OPEN_SESSION` with its endpoint minted with the
//! session's number as badge; a session request is answered `OK` with the
//! badge in word 0.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use core::cell::UnsafeCell;

use rt::abi::caddr::own;
use rt::abi::{MsgInfo, ObjectType, Rights, MAIN_IPC_BUFFER_ADDR};
use rt::interfaces::child::{self, OWN_CSPACE, OWN_VSPACE, SERVICE_ENDPOINT, UNTYPED};
use rt::interfaces::session as proto;
use rt::println;
use rt::session::log::Log;
use rt::session::{self, Interface, Session};
use rt::syscall;

rt::entry!(main);

struct Stuck;
impl Interface for Stuck {
    const NAME: &'static str = "Stuck";
}
struct Lazy;
impl Interface for Lazy {
    const NAME: &'static str = "Lazy";
}
struct Held;
impl Interface for Held {
    const NAME: &'static str = "Held";
}

/// A session request that makes the `Stuck` provider crash.
const DIE: u64 = 0xd1e;
/// A plain session request.
const HELLO: u64 = 0x4e110;

// Slots: sessions' capabilities the providers mint, saved replies, the
// client's session, the helper thread.
const MINTED: u32 = child::FIRST_FREE;
const SAVED: u32 = child::FIRST_FREE + 4;
const SESSION: u32 = child::FIRST_FREE + 8;
const LOG_SESSION: u32 = child::FIRST_FREE + 9;
const HELPER: u32 = child::FIRST_FREE + 10;

fn main(arg: u64) -> i32 {
    match arg {
        1 => stuck(),
        2 => match session::open::<Stuck>(SESSION) {
            Ok(_) => {
                println!("test-async: waiter: Stuck session opened");
                1
            }
            Err(e) => {
                println!("test-async: waiter: Stuck session: {e}");
                0
            }
        },
        3 => match session::open::<Stuck>(SESSION) {
            Ok(s) => {
                println!("test-async: killer: Stuck session opened; asking it to die");
                let r = s.call(DIE, [0; 4]);
                println!(
                    "test-async: killer: DIE: {}",
                    if r.is_err() { "no answer" } else { "answered" }
                );
                0
            }
            Err(e) => {
                println!("test-async: killer: Stuck session: {e}");
                1
            }
        },
        4 => lazy(),
        5 => client::<Lazy>("lazy client"),
        6 => held(),
        7 => dying(),
        8 => client::<Held>("late client"),
        _ => {
            println!("test-async: unknown role {arg}");
            2
        }
    }
}

/// Opens a session of `I`, calls it once.
fn client<I: Interface>(who: &str) -> i32 {
    let s: Session<I> = match session::open::<I>(SESSION) {
        Ok(s) => s,
        Err(e) => {
            println!("test-async: {who}: {} session: {e}", I::NAME);
            return 1;
        }
    };
    match s.call(HELLO, [0; 4]) {
        Ok((a, w)) if a.label() == proto::OK => {
            println!("test-async: {who}: {} session {} answers", I::NAME, w[0]);
            0
        }
        _ => {
            println!("test-async: {who}: {} session does not answer", I::NAME);
            1
        }
    }
}

fn info(label: u64, caps: usize) -> MsgInfo {
    MsgInfo::new(label, 4, caps).unwrap_or_default()
}

/// What a provider does with one request.
enum Answer {
    /// Reply now with this label, word 0 and (for an open) the
    /// capability of session n.
    Now(u64, u64, Option<u64>),
    /// Keep the caller waiting (its reply saved in `SAVED + n`).
    Keep(u32),
}

/// A provider's loop: `handle(badge, label, words)` decides.
fn provide(mut handle: impl FnMut(u64, u64, [u64; 4]) -> Answer) -> ! {
    let ep = own(SERVICE_ENDPOINT);
    loop {
        let Ok((badge, msg, words)) = syscall::recv(ep) else {
            continue;
        };
        match handle(badge, msg.label(), words) {
            Answer::Now(label, w0, session) => {
                let caps = session.map_or(0, |n| usize::from(mint_session(n)));
                let _ = syscall::reply(info(label, caps), [w0, 0, 0, 0]);
            }
            Answer::Keep(n) => {
                if let Err(e) = syscall::save_reply(own(SAVED + n)) {
                    println!("test-async: cannot keep a request waiting: {e}");
                }
            }
        }
    }
}

/// Mints session `n`'s capability and makes the next reply carry it;
/// whether that worked.
fn mint_session(n: u64) -> bool {
    let slot = MINTED + (n % 4) as u32;
    // SAFETY: an endpoint capability (or nothing); nothing is mapped
    // through it.
    let _ = unsafe { syscall::cap_delete(own(slot)) };
    let minted = syscall::cap_mint(own(SERVICE_ENDPOINT), own(slot), Rights::WRITE, n);
    if minted.is_ok() {
        rt::transfer::set_send_cap(own(slot));
    }
    minted.is_ok()
}

/// Role 1.
fn stuck() -> ! {
    println!("test-async: stuck: serving Stuck");
    let mut opens = 0;
    provide(|badge, label, _| match (badge, label) {
        (0, proto::OPEN_SESSION) => {
            opens += 1;
            if opens == 1 {
                println!("test-async: stuck: keeping the first open waiting, for ever");
                return Answer::Keep(0);
            }
            Answer::Now(proto::OK, opens, Some(opens))
        }
        (0, _) => Answer::Now(proto::OK, 0, None),
        (_, DIE) => {
            println!("test-async: stuck: dying");
            // SAFETY: nothing is mapped there; the write faults and init
            // stops this component.
            unsafe { (0xdead_0000 as *mut u64).write_volatile(1) };
            Answer::Now(proto::OK, 0, None)
        }
        (b, _) => Answer::Now(proto::OK, b, None),
    })
}

/// Role 4.
fn lazy() -> ! {
    println!("test-async: lazy: serving Lazy");
    let mut log: Option<Session<Log>> = None;
    let mut opens = 0;
    provide(|badge, label, _| match (badge, label) {
        (0, proto::OPEN_SESSION) => {
            opens += 1;
            if log.is_none() {
                // The open is routed to us and init waits for the answer
                // — and we ask init for a session first.
                match session::open::<Log>(LOG_SESSION) {
                    Ok(s) => log = Some(s),
                    Err(e) => println!("test-async: lazy: Log session: {e}"),
                }
            }
            if let Some(l) = &log {
                let _ = l.write_line("lazy: my own Log session, opened while an open waits for me");
            }
            Answer::Now(proto::OK, opens, Some(opens))
        }
        (0, _) => Answer::Now(proto::OK, 0, None),
        (b, _) => Answer::Now(proto::OK, b, None),
    })
}

/// Role 6.
fn held() -> ! {
    println!("test-async: held: serving Held");
    let mut opens = 0;
    provide(|badge, label, words| match (badge, label) {
        (0, proto::OPEN_SESSION) => {
            opens += 1;
            if opens == 1 {
                println!("test-async: held: keeping the first open until the second");
                return Answer::Keep(0);
            }
            if opens == 2 {
                let caps = usize::from(mint_session(1));
                let r = syscall::reply_to(own(SAVED), info(proto::OK, caps), [1, 0, 0, 0]);
                let how = if r.is_ok() { "ok" } else { "failed" };
                println!("test-async: held: answered the first open: {how}");
            }
            Answer::Now(proto::OK, opens, Some(opens))
        }
        (0, proto::CLOSE_SESSION) => {
            println!("test-async: held: session {} closed", words[0]);
            Answer::Now(proto::OK, 0, None)
        }
        (0, _) => Answer::Now(proto::OK, 0, None),
        (b, _) => Answer::Now(proto::OK, b, None),
    })
}

/// The dying client's helper thread's stack.
#[repr(C, align(16))]
struct Stack(UnsafeCell<[u8; 16384]>);
// SAFETY: only the helper thread uses it (as its stack).
unsafe impl Sync for Stack {}
static STACK: Stack = Stack(UnsafeCell::new([0; 16384]));

/// The helper: asks for a `Held` session (its main thread is gone before
/// the answer comes).
extern "C" fn opener(_: u64) -> ! {
    let r = session::open::<Held>(SESSION);
    // Not reached when the component is gone first, which is the point.
    println!(
        "test-async: dying client: helper got {}",
        if r.is_ok() { "a session" } else { "a refusal" }
    );
    syscall::thread_exit(0)
}

/// Role 7: a helper thread opens `Held`, the main thread exits while the
/// open waits.
fn dying() -> i32 {
    let made = syscall::retype(own(UNTYPED), ObjectType::Thread, 0, own(HELPER), 1)
        .and_then(|()| {
            syscall::thread_configure(
                own(HELPER),
                own(OWN_CSPACE),
                own(OWN_VSPACE),
                MAIN_IPC_BUFFER_ADDR,
                rt::abi::caddr::NULL_SLOT,
            )
        })
        .and_then(|()| syscall::thread_set_sched_params(own(HELPER), child::PRIORITY, 0));
    if let Err(e) = made {
        println!("test-async: dying client: cannot make its helper: {e}");
        return 1;
    }
    let top = STACK.0.get() as u64 + 16384 - 8;
    // SAFETY: the helper runs `opener` on STACK, which nothing else uses;
    // it shares the IPC buffer, which the main thread no longer uses.
    if let Err(e) =
        unsafe { syscall::thread_start(own(HELPER), opener as *const () as u64, top, 0) }
    {
        println!("test-async: dying client: cannot start its helper: {e}");
        return 1;
    }
    for _ in 0..20 {
        let _ = syscall::yield_now();
    }
    println!("test-async: dying client: exiting while my open waits");
    0
}
