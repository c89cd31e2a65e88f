//! Typed views of capabilities: what [`Capability`]'s `object`, `badge`
//! and `extra` words mean for each object kind, with one encoder
//! (`to_cap`) and one decoder (`from_cap`) per kind.
//!
//! The words stay untyped in [`Capability`] itself: the kernel's IPC fast
//! path (assembly) reads them at fixed offsets, and a slot's layout is part
//! of the capability-table object. Everything else goes through a view
//! here, so the packing of each kind is written down once:
//!
//! | kind | `object` | `badge` | `extra` |
//! |------|----------|---------|---------|
//! | [`UntypedCap`] | physical address | `size_bits \| device << 8` | watermark (bytes used) |
//! | [`FrameCap`] | physical address | mapped: `asid \| generation << 16`, else 0 | mapped: `vaddr \| 1`, else 0 |
//! | [`CapTableCap`] | physical address | 0 | number of slots (slot 0 included) |
//! | [`IoPortsCap`] | first port | 0 | last port |
//! | [`ReplyCap`] | the caller's thread (0: stale) | 0 | the caller's thread id |
//! | endpoint, notification | the object | the badge (0: none) | 0 |
//! | thread, address space | the object | 0 | 0 |
//! | IRQ handler | the line | 0 | 0 |
//!
//! A decoder returns `None` for a capability of another kind or with words
//! no encoder produces; an encoder takes a view whose fields are in bounds
//! (`is_valid`; checked in debug builds) and never fails.

use abi::{ObjectType, Rights};

use crate::cap::Capability;

/// Untyped memory: `2^size_bits` bytes at `phys`, of which the first
/// `watermark` bytes are (or were) handed out by `Retype`; `device` memory
/// is not RAM (only frames and untyped can be made from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UntypedCap {
    pub phys: u64,
    pub size_bits: u32,
    pub device: bool,
    pub watermark: u64,
}

impl UntypedCap {
    /// Largest `size_bits` an untyped capability can record (so that
    /// `1 << size_bits` is a size).
    pub const MAX_SIZE_BITS: u32 = 63;
    const SIZE_MASK: u64 = 0xff;
    const DEVICE: u64 = 1 << 8;

    /// A fresh untyped (watermark 0).
    pub const fn new(phys: u64, size_bits: u32, device: bool) -> Self {
        Self {
            phys,
            size_bits,
            device,
            watermark: 0,
        }
    }

    /// Bytes of the untyped.
    pub const fn bytes(&self) -> u64 {
        1 << self.size_bits
    }

    pub const fn is_valid(&self) -> bool {
        self.size_bits <= Self::MAX_SIZE_BITS && self.watermark <= self.bytes()
    }

    pub fn from_cap(cap: &Capability) -> Option<Self> {
        if cap.kind != ObjectType::Untyped || cap.badge & !(Self::SIZE_MASK | Self::DEVICE) != 0 {
            return None;
        }
        let view = Self {
            phys: cap.object,
            size_bits: (cap.badge & Self::SIZE_MASK) as u32,
            device: cap.badge & Self::DEVICE != 0,
            watermark: cap.extra,
        };
        view.is_valid().then_some(view)
    }

    pub fn to_cap(&self, rights: Rights) -> Capability {
        debug_assert!(self.is_valid());
        Capability {
            kind: ObjectType::Untyped,
            object: self.phys,
            rights,
            badge: u64::from(self.size_bits) & Self::SIZE_MASK
                | if self.device { Self::DEVICE } else { 0 },
            extra: self.watermark,
        }
    }
}

/// Where a frame capability's one mapping is: the address space's ASID,
/// the generation of that ASID when the mapping was made (a destroyed
/// address space bumps it, which makes the record stale), and the virtual
/// address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMapping {
    pub asid: u16,
    /// At most [`FrameMapping::GENERATION_MASK`]; compare generations
    /// masked with it.
    pub generation: u64,
    /// Page-aligned (bit 0 is the "mapped" flag in the encoding).
    pub vaddr: u64,
}

impl FrameMapping {
    /// The generation bits a frame capability keeps.
    pub const GENERATION_MASK: u64 = (1 << 48) - 1;

    pub const fn is_valid(&self) -> bool {
        self.generation <= Self::GENERATION_MASK && self.vaddr & 0xfff == 0
    }
}

/// A 4 KiB (`large == false`) or 2 MiB frame at `phys`, and the one
/// mapping this capability made, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameCap {
    pub phys: u64,
    pub large: bool,
    pub mapping: Option<FrameMapping>,
}

impl FrameCap {
    const MAPPED: u64 = 1;

    pub const fn kind(&self) -> ObjectType {
        if self.large {
            ObjectType::Frame2M
        } else {
            ObjectType::Frame4K
        }
    }

    pub const fn is_valid(&self) -> bool {
        match &self.mapping {
            Some(m) => m.is_valid(),
            None => true,
        }
    }

    pub fn from_cap(cap: &Capability) -> Option<Self> {
        let large = match cap.kind {
            ObjectType::Frame4K => false,
            ObjectType::Frame2M => true,
            _ => return None,
        };
        let mapping = if cap.extra & Self::MAPPED != 0 {
            let m = FrameMapping {
                asid: (cap.badge & 0xffff) as u16,
                generation: cap.badge >> 16,
                vaddr: cap.extra & !Self::MAPPED,
            };
            if !m.is_valid() {
                return None;
            }
            Some(m)
        } else if cap.badge == 0 && cap.extra == 0 {
            None
        } else {
            return None;
        };
        Some(Self {
            phys: cap.object,
            large,
            mapping,
        })
    }

    pub fn to_cap(&self, rights: Rights) -> Capability {
        debug_assert!(self.is_valid());
        let (badge, extra) = match self.mapping {
            Some(m) => (
                u64::from(m.asid) | (m.generation & FrameMapping::GENERATION_MASK) << 16,
                m.vaddr | Self::MAPPED,
            ),
            None => (0, 0),
        };
        Capability {
            kind: self.kind(),
            object: self.phys,
            rights,
            badge,
            extra,
        }
    }
}

/// A capability table at `phys` with `slots` slots (a power of two; slot 0
/// is the header and never names a capability): a bounds check is one
/// comparison, also in the IPC fast path, which reads `extra` directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapTableCap {
    pub phys: u64,
    pub slots: u64,
}

impl CapTableCap {
    /// The table made with `size_bits` (2^size_bits slots).
    pub const fn new(phys: u64, size_bits: u32) -> Self {
        Self {
            phys,
            slots: 1 << size_bits,
        }
    }

    pub const fn is_valid(&self) -> bool {
        self.slots >= 2 && self.slots.is_power_of_two()
    }

    /// The view of a capability-table capability that the kernel encoded
    /// itself ([`to_cap`](Self::to_cap)), checking the kind only: for the
    /// capability-address lookup on every system call, where the full
    /// check of [`from_cap`](Self::from_cap) costs measurable time. On
    /// such a capability both agree (tested).
    #[inline(always)]
    pub fn from_encoded(cap: &Capability) -> Option<Self> {
        (cap.kind == ObjectType::CapTable).then_some(Self {
            phys: cap.object,
            slots: cap.extra,
        })
    }

    pub fn from_cap(cap: &Capability) -> Option<Self> {
        if cap.kind != ObjectType::CapTable || cap.badge != 0 {
            return None;
        }
        let view = Self {
            phys: cap.object,
            slots: cap.extra,
        };
        view.is_valid().then_some(view)
    }

    pub fn to_cap(&self, rights: Rights) -> Capability {
        debug_assert!(self.is_valid());
        Capability {
            extra: self.slots,
            ..Capability::new(ObjectType::CapTable, self.phys, rights)
        }
    }
}

/// The I/O ports `first..=last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoPortsCap {
    pub first: u16,
    pub last: u16,
}

impl IoPortsCap {
    /// Every port.
    pub const ALL: Self = Self {
        first: 0,
        last: u16::MAX,
    };

    pub const fn is_valid(&self) -> bool {
        self.first <= self.last
    }

    /// Whether the `width` ports from `port` are all in the range.
    pub const fn covers(&self, port: u64, width: u64) -> bool {
        match port.checked_add(width) {
            Some(end) => width > 0 && port >= self.first as u64 && end - 1 <= self.last as u64,
            None => false,
        }
    }

    /// The sub-range that the `CapMint` word `word`
    /// (`abi::object::io_ports_range`) asks for, if it is one of this range.
    pub const fn sub_range(&self, word: u64) -> Option<Self> {
        let (first, last) = ((word & 0xffff) as u16, ((word >> 16) & 0xffff) as u16);
        if word >> 32 == 0 && first <= last && first >= self.first && last <= self.last {
            Some(Self { first, last })
        } else {
            None
        }
    }

    pub fn from_cap(cap: &Capability) -> Option<Self> {
        if cap.kind != ObjectType::IoPorts || cap.badge != 0 {
            return None;
        }
        let view = Self {
            first: u16::try_from(cap.object).ok()?,
            last: u16::try_from(cap.extra).ok()?,
        };
        view.is_valid().then_some(view)
    }

    pub fn to_cap(&self, rights: Rights) -> Capability {
        debug_assert!(self.is_valid());
        Capability {
            extra: u64::from(self.last),
            ..Capability::new(ObjectType::IoPorts, u64::from(self.first), rights)
        }
    }
}

/// The right to answer one saved call: the calling thread (its object
/// address) and its id, or stale (`thread == 0`, `thread_id == 0`) once
/// the caller stopped waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyCap {
    pub thread: u64,
    pub thread_id: u64,
}

impl ReplyCap {
    /// A reply capability that answers nobody.
    pub const STALE: Self = Self {
        thread: 0,
        thread_id: 0,
    };

    pub const fn is_stale(&self) -> bool {
        self.thread == 0
    }

    pub const fn is_valid(&self) -> bool {
        self.thread != 0 || self.thread_id == 0
    }

    pub fn from_cap(cap: &Capability) -> Option<Self> {
        if cap.kind != ObjectType::Reply || cap.badge != 0 {
            return None;
        }
        let view = Self {
            thread: cap.object,
            thread_id: cap.extra,
        };
        view.is_valid().then_some(view)
    }

    pub fn to_cap(&self, rights: Rights) -> Capability {
        debug_assert!(self.is_valid());
        Capability {
            extra: self.thread_id,
            ..Capability::new(ObjectType::Reply, self.thread, rights)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Rights = Rights::ALL;

    #[test]
    fn untyped_round_trips_and_bounds() {
        for (size_bits, device) in [(12, false), (47, true), (63, false), (0, true)] {
            let bytes = 1u64 << size_bits;
            for watermark in [0, bytes / 2, bytes] {
                let u = UntypedCap {
                    watermark,
                    ..UntypedCap::new(0x10_0000, size_bits, device)
                };
                let cap = u.to_cap(Rights::WRITE);
                assert_eq!(cap.kind, ObjectType::Untyped);
                assert_eq!(cap.rights, Rights::WRITE);
                assert_eq!(UntypedCap::from_cap(&cap), Some(u));
            }
        }
        // Past the size, a watermark beyond the end, unknown badge bits.
        let u = UntypedCap::new(0, 12, false);
        assert!(!UntypedCap { size_bits: 64, ..u }.is_valid());
        let over = UntypedCap {
            watermark: 4097,
            ..u
        };
        assert!(!over.is_valid());
        let mut cap = u.to_cap(R);
        cap.extra = 4097;
        assert_eq!(UntypedCap::from_cap(&cap), None);
        let mut cap = u.to_cap(R);
        cap.badge |= 1 << 9;
        assert_eq!(UntypedCap::from_cap(&cap), None);
        let mut cap = u.to_cap(R);
        cap.badge = 64;
        assert_eq!(UntypedCap::from_cap(&cap), None);
        // The device flag is its own bit.
        let d = UntypedCap::new(0, 12, true).to_cap(R);
        assert_eq!(d.badge, 12 | 1 << 8);
        assert_eq!(
            UntypedCap::from_cap(&Capability {
                kind: ObjectType::Frame4K,
                ..d
            }),
            None
        );
    }

    #[test]
    fn frame_round_trips_and_bounds() {
        let mappings = [
            None,
            Some(FrameMapping {
                asid: 1,
                generation: 0,
                vaddr: 0x1_0000,
            }),
            Some(FrameMapping {
                asid: u16::MAX,
                generation: FrameMapping::GENERATION_MASK,
                vaddr: 0x0000_7fff_ffff_e000,
            }),
        ];
        for large in [false, true] {
            for mapping in mappings {
                let f = FrameCap {
                    phys: 0x20_0000,
                    large,
                    mapping,
                };
                let cap = f.to_cap(Rights::READ);
                assert_eq!(cap.kind == ObjectType::Frame2M, large);
                assert_eq!(FrameCap::from_cap(&cap), Some(f));
                assert_eq!(cap.extra & 1 != 0, mapping.is_some());
            }
        }
        let m = FrameMapping {
            asid: 3,
            generation: FrameMapping::GENERATION_MASK + 1,
            vaddr: 0x1000,
        };
        assert!(!m.is_valid());
        assert!(!FrameMapping {
            vaddr: 0x1800,
            generation: 0,
            ..m
        }
        .is_valid());
        // An unmapped record with a stray word, a mapped one at an
        // unaligned address, another kind.
        let plain = FrameCap {
            phys: 0,
            large: false,
            mapping: None,
        }
        .to_cap(R);
        assert_eq!(FrameCap::from_cap(&Capability { badge: 5, ..plain }), None);
        assert_eq!(
            FrameCap::from_cap(&Capability {
                extra: 0x1801,
                ..plain
            }),
            None
        );
        assert_eq!(
            FrameCap::from_cap(&Capability {
                kind: ObjectType::Untyped,
                ..plain
            }),
            None
        );
    }

    #[test]
    fn cap_table_round_trips_and_bounds() {
        for bits in [1, 5, 16, 63] {
            let t = CapTableCap::new(0x4000, bits);
            assert_eq!(t.slots, 1 << bits);
            let cap = t.to_cap(R);
            assert_eq!(cap.extra, 1 << bits, "the fast path reads extra");
            assert_eq!(CapTableCap::from_cap(&cap), Some(t));
            assert_eq!(CapTableCap::from_encoded(&cap), Some(t));
        }
        let other = IoPortsCap::ALL.to_cap(R);
        assert_eq!(CapTableCap::from_encoded(&other), None);
        for slots in [0, 1, 3, 6] {
            let bad = CapTableCap { phys: 0, slots };
            assert!(!bad.is_valid());
            let cap = Capability {
                extra: slots,
                ..CapTableCap::new(0, 1).to_cap(R)
            };
            assert_eq!(CapTableCap::from_cap(&cap), None);
        }
    }

    #[test]
    fn io_ports_round_trips_bounds_and_sub_ranges() {
        for (first, last) in [(0, 0), (0x60, 0x64), (0, u16::MAX), (u16::MAX, u16::MAX)] {
            let p = IoPortsCap { first, last };
            assert_eq!(IoPortsCap::from_cap(&p.to_cap(R)), Some(p));
        }
        assert!(!IoPortsCap { first: 2, last: 1 }.is_valid());
        let base = IoPortsCap::ALL.to_cap(R);
        assert_eq!(
            IoPortsCap::from_cap(&Capability {
                object: 2,
                extra: 1,
                ..base
            }),
            None
        );
        assert_eq!(
            IoPortsCap::from_cap(&Capability {
                extra: 0x1_0000,
                ..base
            }),
            None
        );
        let p = IoPortsCap {
            first: 0x60,
            last: 0x64,
        };
        let word = abi::object::io_ports_range(0x61, 0x64);
        assert_eq!(
            p.sub_range(word),
            Some(IoPortsCap {
                first: 0x61,
                last: 0x64
            })
        );
        assert_eq!(p.sub_range(abi::object::io_ports_range(0x5f, 0x60)), None);
        assert_eq!(p.sub_range(abi::object::io_ports_range(0x64, 0x65)), None);
        assert_eq!(p.sub_range(abi::object::io_ports_range(0x63, 0x62)), None);
        assert_eq!(p.sub_range(word | 1 << 32), None);
        assert!(p.covers(0x60, 4) && p.covers(0x64, 1));
        assert!(!p.covers(0x63, 4) && !p.covers(0x5f, 1) && !p.covers(0x60, 0));
        assert!(!IoPortsCap::ALL.covers(u64::MAX, 2));
    }

    #[test]
    fn reply_round_trips_and_bounds() {
        for r in [
            ReplyCap::STALE,
            ReplyCap {
                thread: 0x8000,
                thread_id: 7,
            },
        ] {
            let cap = r.to_cap(Rights::WRITE);
            assert_eq!(ReplyCap::from_cap(&cap), Some(r));
            assert_eq!(
                ReplyCap::from_cap(&cap).map(|r| r.is_stale()),
                Some(r.thread == 0)
            );
        }
        let bad = ReplyCap {
            thread: 0,
            thread_id: 7,
        };
        assert!(!bad.is_valid());
        let cap = Capability {
            extra: 7,
            ..ReplyCap::STALE.to_cap(R)
        };
        assert_eq!(ReplyCap::from_cap(&cap), None);
    }
}
