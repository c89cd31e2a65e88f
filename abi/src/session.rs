//! The session protocol: how a component asks its parent for a session,
//! and how the parent (init) asks a provider to open one. The design is
//! in `docs/architecture.md` ("Sessions and routing"); the typed client
//! and server side is `rt::session`.
//!
//! # Client → parent
//!
//! Every child of init holds, at [`PARENT`](crate::child::PARENT), init's
//! endpoint minted write-only with the child's badge (its start position,
//! 1-based — the badge of its fault endpoint too), so init knows who asks.
//! The client calls it with label [`OPEN`] and the session type packed in
//! the four register words ([`pack`]: at most [`NAME_BYTES`] bytes, the
//! config's limit for a session type), naming an empty slot of its own in
//! its IPC buffer's receive slot. The reply is
//!
//! | label | words | capability | meaning |
//! |-------|-------|------------|---------|
//! | [`OK`] | — | the session | opened: an endpoint capability, badged by the provider per session |
//! | [`REFUSED_UNROUTED`] | — | none | the config routes no such session type for this component |
//! | [`REFUSED_PARENT`] | — | none | routed to the parent, which does not serve it (init serves `Rom` itself, nothing else yet) |
//! | [`REFUSED_PROVIDER`] | word 0: the provider's own refusal label, [`RESTARTING`], or 0 | none | the provider is not running (0) or waits for its restart ([`RESTARTING`]), does not speak this protocol, or refused |
//!
//! # Parent → provider
//!
//! Init makes one endpoint per provider and gives the provider a copy with
//! all rights at `child::SERVICE_ENDPOINT`; init's own capability has badge
//! 0, every session capability a provider hands out has a non-zero badge,
//! so a message with badge 0 comes from the parent. To open a session init
//! calls it with label [`OPEN_SESSION`]; words 0..4 carry the client's
//! label ([`pack`], the component name as configured, cut to
//! [`NAME_BYTES`] bytes) and the label's bits from [`SERVICE_SHIFT`] up
//! carry nothing yet (a provider of several types
//! will get the type's index there). The provider answers [`OK`] with the
//! session capability (its endpoint minted write-only with the session's
//! badge), or any other label to refuse.

/// Client → parent: open a session; words: the session type ([`pack`]).
pub const OPEN: u64 = 0x5e55_0001;
/// Parent → provider: open a session for a client; words: its label.
pub const OPEN_SESSION: u64 = 0x5e55_0002;
/// Reserved for the label's service field (see the module doc).
pub const SERVICE_SHIFT: u32 = 32;

/// The badge bit of a session init serves itself (`Rom`,
/// `rt::session::rom`): init mints its own endpoint with the client's
/// badge and this bit, so its requests arrive where faults and `OPEN`s do
/// and init tells them apart by it.
pub const PARENT_SESSION: u64 = 1 << 32;

/// The reply: opened, the message carries the session capability.
pub const OK: u64 = 0;
/// Refused: the session type is not routed for this component.
pub const REFUSED_UNROUTED: u64 = 0x5e55_0e01;
/// Refused: routed to the parent, which does not serve it.
pub const REFUSED_PARENT: u64 = 0x5e55_0e02;
/// Refused: the provider is not there or refused.
pub const REFUSED_PROVIDER: u64 = 0x5e55_0e03;

/// A provider's answer to a request on a badge that names no session of
/// its own (a stale or closed session): word 0 is the badge. A provider
/// never leaves such a request unanswered, so the client is not left
/// waiting.
pub const UNKNOWN_SESSION: u64 = 0x5e55_0e04;

/// Word 0 of a [`REFUSED_PROVIDER`] from the parent: the provider is
/// stopped but will be restarted (it waits out its back-off); asking again
/// later can succeed. Word 0 = 0: it is not running and will not be.
pub const RESTARTING: u64 = 0x5e55_0e05;

/// Bytes of a name that fit in the four register words.
pub const NAME_BYTES: usize = 32;

/// Packs the first [`NAME_BYTES`] bytes of `name` into four words, little
/// endian, zero-padded.
pub fn pack(name: &str) -> [u64; 4] {
    pack_bytes(name.as_bytes())
}

/// [`pack`] for bytes that need not be text.
pub fn pack_bytes(raw: &[u8]) -> [u64; 4] {
    let mut bytes = [0u8; NAME_BYTES];
    let n = raw.len().min(NAME_BYTES);
    bytes[..n].copy_from_slice(&raw[..n]);
    let mut words = [0u64; 4];
    for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *w = u64::from_le_bytes(b);
    }
    words
}

/// The bytes [`pack`] put in `words`, without the zero padding.
pub fn unpack(words: &[u64; 4]) -> ([u8; NAME_BYTES], usize) {
    let mut bytes = [0u8; NAME_BYTES];
    for (chunk, w) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    let len = bytes.iter().position(|&b| b == 0).unwrap_or(NAME_BYTES);
    (bytes, len)
}

/// Whether the packed `words` spell exactly `name`.
pub fn packed_is(words: &[u64; 4], name: &str) -> bool {
    let (bytes, len) = unpack(words);
    &bytes[..len] == name.as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_and_cuts() {
        let (b, n) = unpack(&pack("Log"));
        assert_eq!(&b[..n], b"Log");
        assert!(packed_is(&pack("File_system"), "File_system"));
        assert!(!packed_is(&pack("Log"), "Lo"));
        let long = "a-very-long-component-name-of-forty-bytes";
        let (b, n) = unpack(&pack(long));
        assert_eq!(n, NAME_BYTES);
        assert_eq!(&b[..n], &long.as_bytes()[..NAME_BYTES]);
        assert_eq!(unpack(&pack("")).1, 0);
    }
}
