//! Kernel object types (as named to `Retype`) and their sizes.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum ObjectType {
    /// Physical memory from which other objects are made.
    Untyped = 0,
    /// A thread control block.
    Thread = 1,
    /// A synchronous IPC endpoint.
    Endpoint = 2,
    /// An asynchronous notification word.
    Notification = 3,
    /// A capability table of 2^size_bits slots.
    CapTable = 4,
    /// An address space: its top-level page table plus a pool of
    /// 2^size_bits bytes from which its lower page tables are taken.
    AddressSpace = 5,
    /// A 4 KiB page of memory that can be mapped.
    Frame4K = 6,
    /// A 2 MiB page of memory that can be mapped.
    Frame2M = 7,
    /// The right to receive one IOAPIC interrupt line (root gets these at
    /// boot; not made by `Retype`).
    IrqHandler = 8,
    /// The right to access a range of I/O ports (root gets all at boot;
    /// not made by `Retype`). `CapMint` with a non-zero badge word
    /// ([`io_ports_range`]) narrows a copy to a sub-range.
    IoPorts = 9,
    /// The right to answer one saved call or fault once (made by
    /// `SaveReply`, used up by `ReplyTo`; not made by `Retype`, never
    /// copied, minted or transferred).
    Reply = 10,
    /// The right to make MSI interrupt handlers and to learn the physical
    /// (bus) address of frames and untyped memory: what a platform service
    /// needs to program devices (root gets the one there is at boot; not
    /// made by `Retype`). Drivers never hold it: they learn the bus
    /// addresses of their DMA memory from the platform service.
    DeviceControl = 11,
    /// A virtual CPU (AMD SVM): its VMCB and the guest registers the VMCB
    /// does not hold. Run with `VcpuRun` in a [`ObjectType::GuestSpace`];
    /// made only on a CPU with SVM and nested paging (else `Unsupported`).
    /// See `docs/virtualization.md`.
    Vcpu = 12,
    /// A guest-physical address space: nested page tables (the x86-64
    /// 4-level format) plus a pool of 2^size_bits bytes for them, like
    /// [`ObjectType::AddressSpace`] but without the kernel half. `Map`
    /// puts frames into it at guest-physical addresses.
    GuestSpace = 13,
}

/// The badge word of a `CapMint` that narrows an [`ObjectType::IoPorts`]
/// capability to ports `first..=last`: `first | last << 16`. The range
/// must lie inside the source capability's (else `InvalidArgument`); the
/// result carries no badge. Badge 0 keeps the source's range, as for any
/// other kind.
pub const fn io_ports_range(first: u16, last: u16) -> u64 {
    first as u64 | (last as u64) << 16
}

/// Splits `start..end` into the fewest naturally aligned power-of-two
/// blocks (each `(start, log2 size)`, `min_bits <= log2 size <= max_bits`),
/// in address order; parts too small or misaligned for `min_bits` are left
/// out. This is how the kernel turns free memory into untyped
/// capabilities, and how the memory rule (`ucore::plan`) models it.
pub fn aligned_blocks(
    start: u64,
    end: u64,
    min_bits: u32,
    max_bits: u32,
) -> impl Iterator<Item = (u64, u32)> {
    let min = 1u64 << min_bits.min(63);
    let mut start = start.div_ceil(min).saturating_mul(min);
    let end = end & !(min - 1);
    core::iter::from_fn(move || {
        if start >= end || min_bits > max_bits {
            return None;
        }
        let align_bits = if start == 0 {
            63
        } else {
            start.trailing_zeros()
        };
        let room = end - start;
        let room_bits = 63 - room.leading_zeros();
        let bits = align_bits.min(room_bits).min(max_bits);
        let block = (start, bits);
        start += 1u64 << bits;
        Some(block)
    })
}

/// Bytes of one capability slot in a capability table.
pub const SLOT_BYTES_BITS: u32 = 7;
/// Bytes of a thread control block: registers, scheduling and IPC state
/// (about 0.5 KiB) and the x87/SSE/AVX state (832 bytes in the XSAVE
/// layout, 64-byte aligned).
pub const THREAD_BITS: u32 = 11;
/// Bytes of an endpoint.
pub const ENDPOINT_BITS: u32 = 6;
/// Bytes of a notification.
pub const NOTIFICATION_BITS: u32 = 6;
/// Bytes of a virtual CPU: the VMCB page and a page of guest state (the
/// general registers the VMCB lacks, the guest's x87/SSE/AVX state).
pub const VCPU_BITS: u32 = 13;
/// Smallest and largest untyped (log2 bytes).
pub const MIN_UNTYPED_BITS: u32 = 12;
pub const MAX_UNTYPED_BITS: u32 = 47;
/// Capability tables hold 2^1 .. 2^16 slots.
pub const MIN_CAP_TABLE_BITS: u32 = 1;
pub const MAX_CAP_TABLE_BITS: u32 = 16;
/// Address-space page-table pools hold 2^13 .. 2^26 bytes.
pub const MIN_PT_POOL_BITS: u32 = 13;
pub const MAX_PT_POOL_BITS: u32 = 26;

impl ObjectType {
    pub const fn from_raw(raw: u64) -> Option<ObjectType> {
        Some(match raw {
            0 => ObjectType::Untyped,
            1 => ObjectType::Thread,
            2 => ObjectType::Endpoint,
            3 => ObjectType::Notification,
            4 => ObjectType::CapTable,
            5 => ObjectType::AddressSpace,
            6 => ObjectType::Frame4K,
            7 => ObjectType::Frame2M,
            8 => ObjectType::IrqHandler,
            9 => ObjectType::IoPorts,
            10 => ObjectType::Reply,
            11 => ObjectType::DeviceControl,
            12 => ObjectType::Vcpu,
            13 => ObjectType::GuestSpace,
            _ => return None,
        })
    }

    /// log2 of the bytes one object of this type takes when made with
    /// `size_bits` (ignored by fixed-size types); `None` if `size_bits` is
    /// out of range or the type cannot be made by `Retype`. Objects are
    /// aligned to their size.
    pub const fn object_bits(self, size_bits: u64) -> Option<u32> {
        let s = if size_bits > 64 { 64 } else { size_bits as u32 };
        match self {
            ObjectType::Untyped if s >= MIN_UNTYPED_BITS && s <= MAX_UNTYPED_BITS => Some(s),
            ObjectType::Thread => Some(THREAD_BITS),
            ObjectType::Endpoint => Some(ENDPOINT_BITS),
            ObjectType::Notification => Some(NOTIFICATION_BITS),
            ObjectType::CapTable if s >= MIN_CAP_TABLE_BITS && s <= MAX_CAP_TABLE_BITS => {
                Some(s + SLOT_BYTES_BITS)
            }
            // The top-level table and the pool, rounded up to a power of two:
            // a pool of 2^s bytes needs an object of 2^(s+1).
            ObjectType::AddressSpace if s >= MIN_PT_POOL_BITS && s <= MAX_PT_POOL_BITS => {
                Some(s + 1)
            }
            ObjectType::GuestSpace if s >= MIN_PT_POOL_BITS && s <= MAX_PT_POOL_BITS => Some(s + 1),
            ObjectType::Vcpu => Some(VCPU_BITS),
            ObjectType::Frame4K => Some(12),
            ObjectType::Frame2M => Some(21),
            _ => None,
        }
    }

    /// Whether device (non-RAM) untyped memory may become this type.
    pub const fn allowed_from_device_memory(self) -> bool {
        matches!(
            self,
            ObjectType::Untyped | ObjectType::Frame4K | ObjectType::Frame2M
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(ObjectType::Thread.object_bits(0), Some(11));
        assert_eq!(ObjectType::CapTable.object_bits(4), Some(11));
        assert_eq!(ObjectType::CapTable.object_bits(0), None);
        assert_eq!(ObjectType::CapTable.object_bits(17), None);
        assert_eq!(ObjectType::AddressSpace.object_bits(16), Some(17));
        assert_eq!(ObjectType::Untyped.object_bits(11), None);
        assert_eq!(ObjectType::Untyped.object_bits(u64::MAX), None);
        assert_eq!(ObjectType::IrqHandler.object_bits(0), None);
        for raw in 0..14 {
            assert_eq!(ObjectType::from_raw(raw).unwrap() as u64, raw);
        }
        assert_eq!(ObjectType::from_raw(14), None);
        assert_eq!(ObjectType::Vcpu.object_bits(0), Some(13));
        assert_eq!(ObjectType::GuestSpace.object_bits(16), Some(17));
        assert_eq!(ObjectType::GuestSpace.object_bits(12), None);
        assert_eq!(ObjectType::DeviceControl.object_bits(0), None);
        assert_eq!(ObjectType::Reply.object_bits(0), None);
    }
}
