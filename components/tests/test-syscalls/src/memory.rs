//! `Map` and `Unmap` in the test's own address space, in the pages from
//! `MAP_VA` on (free until this module maps them).

use rt::abi::map::{CACHE_SHIFT, EXECUTABLE, WRITABLE};
use rt::abi::object::MIN_PT_POOL_BITS;
use rt::abi::{CapSlot, Error, ObjectType, Rights, Sys};

use crate::helpers::map_new_frame;
use crate::{code, sys, sys2, Test, BAD_SLOT, MAP_VA, VSPACE};

/// Page `i` of the mapping checks.
fn page(i: u64) -> u64 {
    MAP_VA + i * 4096
}

fn map(vspace: CapSlot, frame: CapSlot, vaddr: u64, attr: u64) -> Result<[u64; 6], u64> {
    sys(Sys::Map, [vspace, frame, vaddr, attr, 0, 0])
}

/// Reads the word at `vaddr`.
///
/// Only called on addresses whose `Map` just succeeded.
fn peek(vaddr: u64) -> u64 {
    // SAFETY: `vaddr` is a page of `MAP_VA..` this module mapped readable
    // (the caller checked `Map` succeeded); no Rust reference points there.
    unsafe { (vaddr as *const u64).read_volatile() }
}

/// Writes the word at `vaddr`.
///
/// Only called on addresses whose writable `Map` just succeeded.
fn poke(vaddr: u64, value: u64) {
    // SAFETY: as in `peek`, mapped writable.
    unsafe { (vaddr as *mut u64).write_volatile(value) }
}

pub fn run(t: &mut Test) {
    let frame = t.make(ObjectType::Frame4K, 0);
    let r = map(VSPACE, frame, page(0), WRITABLE);
    t.ok(Sys::Map, "writable", &r);
    if r.is_ok() {
        t.eq(Sys::Map, "new-frame-is-zero", peek(page(0) + 8), 0);
        poke(page(0), 0x1122_3344_5566_7788);
        t.eq(Sys::Map, "read-back", peek(page(0)), 0x1122_3344_5566_7788);
    }
    // A second capability maps the same frame a second time.
    let alias = t.copy(frame);
    let r = map(VSPACE, alias, page(1), 0);
    t.ok(Sys::Map, "read-only-second-mapping", &r);
    if r.is_ok() {
        t.eq(
            Sys::Map,
            "mappings-share-memory",
            peek(page(1)),
            0x1122_3344_5566_7788,
        );
    }
    t.err(
        Sys::Map,
        "capability-already-mapped",
        &map(VSPACE, frame, page(2), WRITABLE),
        Error::InvalidState,
    );

    let other = t.make(ObjectType::Frame4K, 0);
    let code_page = run as *const () as u64 & !0xfff;
    let cases: [(&str, CapSlot, CapSlot, u64, u64, Error); 12] = [
        (
            "address-taken",
            VSPACE,
            other,
            page(0),
            WRITABLE,
            Error::AlreadyMapped,
        ),
        (
            "over-own-code",
            VSPACE,
            other,
            code_page,
            0,
            Error::AlreadyMapped,
        ),
        (
            "writable-and-executable",
            VSPACE,
            other,
            page(3),
            WRITABLE | EXECUTABLE,
            Error::InvalidArgument,
        ),
        (
            "unknown-attribute-bits",
            VSPACE,
            other,
            page(3),
            1 << 20,
            Error::InvalidArgument,
        ),
        (
            "unknown-cache-attribute",
            VSPACE,
            other,
            page(3),
            4 << CACHE_SHIFT,
            Error::InvalidArgument,
        ),
        (
            "misaligned-address",
            VSPACE,
            other,
            page(3) + 8,
            0,
            Error::InvalidArgument,
        ),
        (
            "first-non-user-address",
            VSPACE,
            other,
            0x0000_8000_0000_0000,
            0,
            Error::InvalidArgument,
        ),
        (
            "kernel-address",
            VSPACE,
            other,
            0xffff_8000_0000_0000,
            0,
            Error::InvalidArgument,
        ),
        (
            "kernel-image-address",
            VSPACE,
            other,
            0xffff_ffff_8000_0000,
            0,
            Error::InvalidArgument,
        ),
        (
            "vspace-wrong-type",
            other,
            other,
            page(3),
            0,
            Error::WrongObjectType,
        ),
        (
            "frame-wrong-type",
            VSPACE,
            VSPACE,
            page(3),
            0,
            Error::WrongObjectType,
        ),
        (
            "frame-empty",
            VSPACE,
            t.slot(),
            page(3),
            0,
            Error::EmptySlot,
        ),
    ];
    for (case, vspace, frame, vaddr, attr, want) in cases {
        t.err(Sys::Map, case, &map(vspace, frame, vaddr, attr), want);
    }
    rights(t);
    page_table_pool(t);
    unmap(t, frame, alias);
}

/// Frame rights become mapping permissions; the address space needs WRITE.
fn rights(t: &mut Test) {
    let frame = t.make(ObjectType::Frame4K, 0);
    let read_only = t.mint(frame, Rights::READ, 0);
    t.err(
        Sys::Map,
        "writable-needs-write",
        &map(VSPACE, read_only, page(4), WRITABLE),
        Error::MissingRights,
    );
    let r = map(VSPACE, read_only, page(4), 0);
    t.ok(Sys::Map, "read-only-with-read", &r);
    if r.is_ok() {
        t.eq(Sys::Map, "read-only-readable", peek(page(4)), 0);
    }
    let exec = t.make(ObjectType::Frame4K, 0);
    let no_grant = t.mint(exec, Rights::READ.union(Rights::WRITE), 0);
    t.err(
        Sys::Map,
        "executable-needs-grant",
        &map(VSPACE, no_grant, page(5), EXECUTABLE),
        Error::MissingRights,
    );
    t.ok(
        Sys::Map,
        "executable-with-grant",
        &map(VSPACE, exec, page(5), EXECUTABLE),
    );
    let vspace_ro = t.mint(VSPACE, Rights::READ, 0);
    let spare = t.make(ObjectType::Frame4K, 0);
    t.err(
        Sys::Map,
        "vspace-needs-write",
        &map(vspace_ro, spare, page(6), 0),
        Error::MissingRights,
    );
}

/// An address space whose page-table pool (the smallest) cannot hold the
/// tables a mapping needs fails with `OutOfMemory`.
fn page_table_pool(t: &mut Test) {
    let vspace = t.make(ObjectType::AddressSpace, MIN_PT_POOL_BITS.into());
    let frame = t.make(ObjectType::Frame4K, 0);
    let mut result = 0;
    let mut mapped = 0;
    // Each 512 GiB region needs three new tables; the pool has two pages.
    for region in 0..4u64 {
        let alias = t.copy(frame);
        result = code(&map(
            vspace,
            alias,
            (region << 39) | rt::abi::map::USER_MAP_START,
            0,
        ));
        if result != 0 {
            break;
        }
        mapped += 1;
    }
    if result == 0 {
        rt::println!("test-syscalls: {mapped} regions mapped with the smallest page-table pool");
    }
    t.expect(
        Sys::Map,
        "page-table-pool-used-up",
        result,
        Some(Error::OutOfMemory),
    );
}

fn unmap(t: &mut Test, frame: CapSlot, alias: CapSlot) {
    let u = |slot: CapSlot| sys2(Sys::Unmap, slot, 0);
    t.ok(Sys::Unmap, "ok", &u(alias));
    t.err(Sys::Unmap, "twice", &u(alias), Error::NotMapped);
    t.ok(
        Sys::Unmap,
        "address-free-again",
        &map(VSPACE, alias, page(1), 0),
    );
    t.ok(Sys::Unmap, "frame-mapped-elsewhere-stays", &u(frame));
    let r = map(VSPACE, frame, page(0), WRITABLE);
    t.ok(Sys::Unmap, "remap", &r);
    if r.is_ok() {
        t.eq(
            Sys::Unmap,
            "contents-survive",
            peek(page(0)),
            0x1122_3344_5566_7788,
        );
    }
    let never = t.make(ObjectType::Frame4K, 0);
    let ntfn = t.make(ObjectType::Notification, 0);
    t.err(Sys::Unmap, "never-mapped", &u(never), Error::NotMapped);
    t.err(Sys::Unmap, "wrong-type", &u(ntfn), Error::WrongObjectType);
    let empty = t.slot();
    t.err(Sys::Unmap, "empty-slot", &u(empty), Error::EmptySlot);
    t.err(Sys::Unmap, "invalid-slot", &u(BAD_SLOT), Error::InvalidSlot);

    // Deleting a mapped frame's capability unmaps it; revoking a frame
    // unmaps the copies.
    let doomed = map_new_frame(t, page(8));
    t.ok(
        Sys::CapDelete,
        "mapped-frame",
        &sys2(Sys::CapDelete, doomed, 0),
    );
    t.ok(
        Sys::CapDelete,
        "unmaps-the-frame",
        &map(VSPACE, never, page(8), 0),
    );
    let parent = t.make(ObjectType::Frame4K, 0);
    let child = t.copy(parent);
    t.setup("map copy", map(VSPACE, child, page(9), 0));
    t.ok(Sys::CapRevoke, "frame", &sys2(Sys::CapRevoke, parent, 0));
    let spare = t.make(ObjectType::Frame4K, 0);
    t.ok(
        Sys::CapRevoke,
        "unmaps-derived-mappings",
        &map(VSPACE, spare, page(9), 0),
    );
}
