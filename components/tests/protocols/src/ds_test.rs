//! The dataspace-and-signals test session, `Ds_test`, between
//! `test-dataspace-client` and `test-dataspace-service`: the client
//! writes a request into a dataspace the server shares with it and
//! signals a context of the server's; the server's signal handler (run by
//! its provider loop, `session::Provider::serve_with_signals`) answers in
//! the same dataspace and signals the client's notification, whose
//! handler (`signal::Signals::on`) checks the answer.
//!
//! | request (label) | reply (label, words, capability) |
//! |-----------------|----------------------------------|
//! | [`GET_DS`] | [`OK`], `[bytes]`, the session's dataspace, writable |
//! | [`GET_DS_RO`] | [`OK`], `[bytes]`, the same dataspace, read-only |
//! | [`GET_CONTEXT`] | [`OK`], `[bit]`, the server's signal context for this session (write-only) |
//! | [`GET_WAKEUP`] | [`OK`], `[]`, the client's notification, read-only; the server sets bit [`RESULT_BIT`] |
//! | [`DROP_CONTEXT`] | [`OK`]: the server unregisters the session's context (its capability is revoked) |
//! | anything else | [`ERROR`] |
//!
//! Dataspace layout (64-bit words): `[0]` request sequence number,
//! `[1..=WORDS]` the numbers to add; the server writes the sum to
//! `[SUM_AT]` and then the sequence number it answered to `[ANSWERED_AT]`.

use rt::session::Interface;

/// The interface.
pub struct DsTest;

impl Interface for DsTest {
    const NAME: &'static str = "Ds_test";
}

/// "DSGW".
pub const GET_DS: u64 = 0x4453_4757;
/// "DSGR".
pub const GET_DS_RO: u64 = 0x4453_4752;
/// "DSGC".
pub const GET_CONTEXT: u64 = 0x4453_4743;
/// "DSGN".
pub const GET_WAKEUP: u64 = 0x4453_474e;
/// "DSDC".
pub const DROP_CONTEXT: u64 = 0x4453_4443;
/// "OK!!".
pub const OK: u64 = 0x4f4b_2121;
/// "ERR!".
pub const ERROR: u64 = 0x4552_5221;
/// The client notification's bit that says "answered".
pub const RESULT_BIT: u32 = 0;
/// Numbers per request.
pub const WORDS: usize = 8;
/// Word index of the sum.
pub const SUM_AT: usize = 16;
/// Word index of the answered sequence number.
pub const ANSWERED_AT: usize = 17;
