//! Kernel object types, as named to `Retype`.

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
    /// An address space (its top-level page table).
    AddressSpace = 5,
    /// A 4 KiB page of memory that can be mapped.
    Frame4K = 6,
    /// A 2 MiB page of memory that can be mapped.
    Frame2M = 7,
}

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
            _ => return None,
        })
    }
}
