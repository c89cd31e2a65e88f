//! test-dataspace-client: the client of `Ds_test` (`protocols::ds_test`).
//! It maps the session's dataspace (`rt::dataspace`), attaches a signal
//! handler (`rt::signal::Signals::on`) to the bit the server sets on the
//! client's notification, and sends [`ROUNDS`] requests: numbers written
//! into the dataspace, the server's signal context signalled, the answer
//! checked by the handler. Then: the read-only share cannot be mapped
//! writable, and after the server drops the context its capability no
//! longer signals anything. Exits with the number of failed checks.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use protocols::ds_test::{self, DsTest};
use rt::abi::caddr::own;
use rt::abi::{Error, MsgInfo};
use rt::dataspace::{Attached, Dataspace, DsSize};
use rt::interfaces::child::{FIRST_FREE, OWN_VSPACE};
use rt::println;
use rt::session::{self, Session};
use rt::signal::Signals;
use rt::transfer;

rt::entry!(main);

/// Requests sent.
const ROUNDS: u64 = 100;
/// Slots: the session, the dataspace (writable, read-only), the server's
/// context, the wake-up notification.
const SESSION: u32 = FIRST_FREE;
const DS: u32 = FIRST_FREE + 1;
const DS_RO: u32 = FIRST_FREE + 2;
const CONTEXT: u32 = FIRST_FREE + 3;
const WAKEUP: u32 = FIRST_FREE + 4;
/// Where the dataspace is mapped, and where the read-only share is tried.
const DS_VA: u64 = 0x40_0000_0000;
const RO_VA: u64 = 0x40_0001_0000;

/// What the handler sees.
struct State {
    ds: Attached,
    /// The request in flight and the sum it should get.
    expected: (u64, u64),
    /// Answers checked and found right, and found wrong.
    right: u64,
    wrong: u64,
    handler_runs: u64,
}

fn main(_arg: u64) -> i32 {
    match run() {
        Ok(failed) => failed,
        Err(why) => {
            println!("test-dataspace-client: FAILED: {why}");
            100
        }
    }
}

/// Calls `label` on the session, receiving a capability into `slot`;
/// returns word 0 of the reply.
fn get(s: &Session<DsTest>, label: u64, slot: u32) -> Result<u64, &'static str> {
    let info = MsgInfo::new(label, 0, 0).unwrap_or_default();
    match transfer::call_for_cap(s.cap(), info, [0; 4], own(slot)) {
        Ok((reply, words)) if reply.label() == ds_test::OK && reply.caps() == 1 => Ok(words[0]),
        Ok(_) => Err("the server refused a capability request"),
        Err(_) => Err("a call on the session failed"),
    }
}

fn run() -> Result<i32, &'static str> {
    let s = session::open::<DsTest>(SESSION).map_err(|_| "no Ds_test session")?;
    let bytes = get(&s, ds_test::GET_DS, DS)?;
    let size = DsSize::from_bytes(bytes).ok_or("the server announced an impossible size")?;
    get(&s, ds_test::GET_DS_RO, DS_RO)?;
    let bit = get(&s, ds_test::GET_CONTEXT, CONTEXT)?;
    get(&s, ds_test::GET_WAKEUP, WAKEUP)?;
    // SAFETY: DS_VA.. is used by nothing else of this program.
    let ds = unsafe { Dataspace::from_cap(own(DS), size).attach(own(OWN_VSPACE), DS_VA, true) }
        .map_err(|_| "cannot map the dataspace")?;
    println!("test-dataspace-client: dataspace of {bytes} bytes mapped; server context bit {bit}");

    let mut signals: Signals<State> = Signals::new(own(WAKEUP));
    signals
        .on(ds_test::RESULT_BIT, |st: &mut State| {
            st.handler_runs += 1;
            let (seq, sum) = st.expected;
            let answered = st.ds.read_u64(ds_test::ANSWERED_AT * 8);
            let got = st.ds.read_u64(ds_test::SUM_AT * 8);
            if answered == Some(seq) && got == Some(sum) {
                st.right += 1;
            } else {
                st.wrong += 1;
                println!("test-dataspace-client: request {seq}: WRONG answer {got:?} for {answered:?}, expected {sum}");
            }
        })
        .map_err(|_| "cannot attach the handler")?;
    let mut state = State {
        ds,
        expected: (0, 0),
        right: 0,
        wrong: 0,
        handler_runs: 0,
    };
    for seq in 1..=ROUNDS {
        let mut sum = 0u64;
        for i in 1..=ds_test::WORDS as u64 {
            let value = seq
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(i as u32);
            sum = sum.wrapping_add(value);
            state
                .ds
                .write_u64(i as usize * 8, value)
                .map_err(|_| "write outside")?;
        }
        state.ds.write_u64(0, seq).map_err(|_| "write outside")?;
        state.expected = (seq, sum);
        let before = state.right + state.wrong;
        rt::syscall::signal(own(CONTEXT)).map_err(|_| "signalling the server failed")?;
        while state.right + state.wrong == before {
            signals
                .wait_and_dispatch(&mut state)
                .map_err(|_| "Wait failed")?;
        }
    }
    let mut failed = 0;
    println!(
        "test-dataspace-client: {ROUNDS} requests through the dataspace: {} answers right, {} wrong, {} handler runs, {} stray signals",
        state.right, state.wrong, state.handler_runs, signals.stray()
    );
    failed += (state.right != ROUNDS) as i32;

    // SAFETY: RO_VA.. is used by nothing else of this program.
    match unsafe { Dataspace::from_cap(own(DS_RO), size).attach(own(OWN_VSPACE), RO_VA, true) } {
        Err(Error::MissingRights) => {
            println!("test-dataspace-client: writable mapping of the read-only share refused")
        }
        other => {
            println!("test-dataspace-client: writable mapping of the read-only share: {other:?}; should be refused");
            failed += 1;
        }
    }
    let info = MsgInfo::new(ds_test::DROP_CONTEXT, 0, 0).unwrap_or_default();
    match s.call(info.label(), [0; 4]) {
        Ok((reply, words)) if reply.label() == ds_test::OK => {
            println!(
                "test-dataspace-client: server dropped its context after {} answers",
                words[0]
            )
        }
        _ => {
            println!("test-dataspace-client: DROP_CONTEXT refused");
            failed += 1;
        }
    }
    match rt::syscall::signal(own(CONTEXT)) {
        Err(e) => println!("test-dataspace-client: signalling the dropped context: {e}"),
        Ok(()) => {
            println!("test-dataspace-client: the dropped context still signals; should be revoked");
            failed += 1;
        }
    }
    let detached = state.ds.detach();
    println!(
        "test-dataspace-client: detached: {}",
        if detached.is_ok() { "ok" } else { "FAILED" }
    );
    failed += detached.is_err() as i32;
    Ok(failed)
}
