//! The session protocol: how a component asks its parent for a session,
//! and how the parent (init) asks a provider to open one. The design is
//! in `docs/architecture.md` ("Sessions and routing"); the typed client
//! and server side is `rt::session`.
//!
//! # Client → parent
//!
//! Every child of init holds, at [`PARENT`](crate::child::PARENT), init's
//! endpoint minted with `WRITE` and `GRANT` (it may carry a capability:
//! the quota donation) and the child's badge (its start position,
//! 1-based — the badge of its fault endpoint too), so init knows who asks.
//!
//! **Open.** The client calls it with label [`OPEN`] and the session type
//! packed in the four register words ([`pack`]: at most [`NAME_BYTES`]
//! bytes, the config's limit for a session type), naming an empty slot of
//! its own in its IPC buffer's receive slot. For an interface with a quota
//! (`rt::session::Interface::RAM`, `CAPS`) the message carries the
//! *donation*: a capability table of the client's (see "Donation"). The
//! reply is
//!
//! | label | words | capability | meaning |
//! |-------|-------|------------|---------|
//! | [`OK`] | word 0: the session's id at the parent (for [`CLOSE`]) | the session | opened: an endpoint capability, badged by the provider per session |
//! | [`REFUSED_UNROUTED`] | — | none | the config routes no such session type for this component |
//! | [`REFUSED_PARENT`] | — | none | routed to the parent, which does not serve it (init serves `Rom` and `Reconfig` itself, nothing else yet) |
//! | [`REFUSED_PROVIDER`] | word 0: the provider's own refusal label ([`REFUSED_QUOTA`], ...), [`RESTARTING`], or 0 | none | the provider is not running (0) or waits for its restart ([`RESTARTING`]), does not speak this protocol, or refused |
//!
//! **Close.** The client calls [`CLOSE`] with word 0 = the session's id;
//! init closes it at the provider ([`CLOSE_SESSION`]) and answers [`OK`]
//! (or [`UNKNOWN_SESSION`] for an id that is not one of the caller's open
//! sessions). The client then revokes what it donated: whatever the
//! provider still holds or made from it goes with it. A client that exits
//! or faults has all its sessions closed by init.
//!
//! # Donation
//!
//! A table of 2^n slots, n the least with 2^n ≥ `CAPS` + 3 (slot 0 is the
//! table's header), made by the client from its own memory, with in slot
//! [`DONATED_UNTYPED`] an untyped of `RAM` bytes (a power of two, at
//! least 4 KiB; none if `RAM` is 0). Slot [`DONATED_WAKE`] and slots
//! [`FIRST_DONATED_SLOT`].. (`CAPS` of them) are empty: the provider's
//! for the session's capabilities. The provider makes the
//! session's objects from the untyped into those slots (it addresses them
//! through its copy of the table, `caddr::in_table`). The client keeps the
//! untyped memory the table and untyped were made from; revoking it
//! destroys the table, the untyped, the provider's copy and every object
//! made from it — the quota comes back whatever the provider does.
//!
//! # The provider's death
//!
//! A client that waits on a notification of its session — a packet
//! stream's acknowledgements — would wait forever once the provider is
//! gone: nothing signals it any more, and the notification, made from the
//! client's donation, outlives the provider. So a provider puts a copy of
//! the notification its client waits on into the table's slot
//! [`DONATED_WAKE`] when it opens the session; the parent keeps a write
//! copy badged [`PROVIDER_GONE`] (made before it lets go of the table)
//! and signals it when the provider stops — after the stopped provider's
//! own sessions are closed at their providers, so a driver's device is
//! reset before its client takes its memory back. The client sees the
//! bit in its notification's word (`rt::stream::Notifications::wait`
//! answers `Aborted`) and reconnects (docs/architecture.md, "Restart and
//! reconnect"). A session whose client waits on nothing leaves the slot
//! empty.
//!
/// Client → parent: open a session; words: the session type ([`pack`]).
pub const OPEN: u64 = 0x5e55_0001;
/// Parent → provider: open a session for a client; words: its label.
/// Bits [`INTERFACE_SHIFT`].. of the message label name which of the
/// provider's interfaces (its index in the provider's `provides` list, 0
/// for the first): a component may provide several (the GUI multiplexer
/// provides `Framebuffer` and `Input`), and the label alone does not say
/// which the client asked for. [`open_session_label`] makes it,
/// [`split_open_label`] takes it apart.
pub const OPEN_SESSION: u64 = 0x5e55_0002;
/// Where the interface's index starts in `OPEN_SESSION`'s label.
pub const INTERFACE_SHIFT: u32 = 32;
/// The most interfaces one provider may provide.
pub const MAX_INTERFACES: u32 = 8;

/// `OPEN_SESSION`'s message label for the provider's interface `index`.
pub const fn open_session_label(index: u32) -> u64 {
    OPEN_SESSION | (index as u64) << INTERFACE_SHIFT
}

/// A parent's message label as (the operation, the interface index):
/// `OPEN_SESSION` with its index; anything else as it is, index 0.
pub const fn split_open_label(label: u64) -> (u64, u32) {
    if label & 0xffff_ffff == OPEN_SESSION {
        (OPEN_SESSION, (label >> INTERFACE_SHIFT) as u32)
    } else {
        (label, 0)
    }
}
/// Client → parent: close a session; word 0: its id (from [`OPEN`]'s reply).
pub const CLOSE: u64 = 0x5e55_0003;
/// Parent → provider: close a session; word 0: its badge.
pub const CLOSE_SESSION: u64 = 0x5e55_0004;

/// The slot of a donation table holding the donated untyped memory.
pub const DONATED_UNTYPED: u32 = 1;
/// The slot of a donation table where the provider puts the notification
/// its client waits on, if any ("The provider's death" above).
pub const DONATED_WAKE: u32 = 2;
/// The first of the donation table's slots left for the provider.
pub const FIRST_DONATED_SLOT: u32 = 3;
/// The badge of the parent's copy of a session's wake notification: the
/// bit in the client's notification word that says the provider stopped.
/// Providers signal their clients with other badges (a stream's
/// notifications are unbadged: word bit 0).
pub const PROVIDER_GONE: u64 = 1 << 62;

/// log2 of the slots of the donation table for `caps` slots: the least n
/// with 2^n ≥ `caps` + [`FIRST_DONATED_SLOT`], at least the kernel's
/// smallest table.
pub const fn donation_table_bits(caps: u32) -> u32 {
    let need = caps as u64 + FIRST_DONATED_SLOT as u64;
    let bits = u64::BITS - (need - 1).leading_zeros();
    if bits < abi::object::MIN_CAP_TABLE_BITS {
        abi::object::MIN_CAP_TABLE_BITS
    } else {
        bits
    }
}

/// log2 of `ram` bytes rounded up to a power of two, at least one page
/// (2^12); `ram` must not be 0.
pub const fn donation_ram_bits(ram: u64) -> u32 {
    let bits = u64::BITS - (ram - 1).leading_zeros();
    if bits < 12 {
        12
    } else {
        bits
    }
}
/// The badge bit of a session init serves itself (`Rom`,
/// `rt::session::rom`): init mints its own endpoint with the client's
/// badge and this bit, so its requests arrive where faults and `OPEN`s do
/// and init tells them apart by it.
pub const PARENT_SESSION: u64 = 1 << 32;
/// With [`PARENT_SESSION`]: the session is a `Reconfig` session
/// (`rt::session::reconfig`), not a `Rom` one.
pub const RECONFIG_SESSION: u64 = 1 << 33;
/// With [`PARENT_SESSION`]: the session is a `Power` session
/// (`rt::session::power`).
pub const POWER_SESSION: u64 = 1 << 34;
/// With [`PARENT_SESSION`]: the session is a `Status` session
/// (`rt::session::status`).
pub const STATUS_SESSION: u64 = 1 << 35;

/// The reply: opened, the message carries the session capability.
pub const OK: u64 = 0;
/// Refused: the session type is not routed for this component.
pub const REFUSED_UNROUTED: u64 = 0x5e55_0e01;
/// Refused: routed to the parent, which does not serve it.
pub const REFUSED_PARENT: u64 = 0x5e55_0e02;
/// Refused: the provider is not there or refused. Word 0: the
/// provider's own refusal label, [`RESTARTING`], or 0 — the provider is
/// not running, also when it stopped while the open waited for its answer
/// (its endpoint went, the parent's call to it ended with an error).
pub const REFUSED_PROVIDER: u64 = 0x5e55_0e03;

/// A provider's answer to a request on a badge that names no session of
/// its own (a stale or closed session): word 0 is the badge. A provider
/// never leaves such a request unanswered, so the client is not left
/// waiting.
pub const UNKNOWN_SESSION: u64 = 0x5e55_0e04;

/// A provider's refusal: the interface needs a quota donation and the
/// request carried none, or one too small (a table without the slots, no
/// untyped of the size in [`DONATED_UNTYPED`]).
pub const REFUSED_QUOTA: u64 = 0x5e55_0e06;

/// Word 0 of a [`REFUSED_PROVIDER`] from the parent: the provider is
/// stopped but will be restarted (it waits out its back-off); asking again
/// later can succeed. Word 0 = 0: it is not running and will not be.
/// Init answers it only when it cannot keep the open waiting: an open
/// for a provider waiting out its back-off on init's Timer is parked and
/// answered when the provider runs again, unless init parks too many
/// already (docs/architecture.md, "Restart and reconnect").
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
    fn open_labels_name_the_interface() {
        assert_eq!(open_session_label(0), OPEN_SESSION);
        assert_eq!(split_open_label(OPEN_SESSION), (OPEN_SESSION, 0));
        assert_eq!(split_open_label(open_session_label(1)), (OPEN_SESSION, 1));
        assert_eq!(split_open_label(CLOSE_SESSION), (CLOSE_SESSION, 0));
        // Another operation with high bits stays what it is.
        assert_eq!(
            split_open_label(CLOSE_SESSION | 1 << 40),
            (CLOSE_SESSION | 1 << 40, 0)
        );
        assert!(open_session_label(MAX_INTERFACES) <= abi::msg::MAX_LABEL);
    }

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

    #[test]
    fn donation_sizes() {
        // Slot 0 is the header; 1 the untyped, 2 the wake notification.
        assert_eq!(donation_table_bits(0), 2);
        assert_eq!(donation_table_bits(1), 2);
        assert_eq!(donation_table_bits(2), 3);
        assert_eq!(donation_table_bits(5), 3);
        assert_eq!(donation_table_bits(6), 4);
        assert_eq!(donation_ram_bits(1), 12);
        assert_eq!(donation_ram_bits(4096), 12);
        assert_eq!(donation_ram_bits(4097), 13);
        assert_eq!(donation_ram_bits(1 << 20), 20);
    }
}
