//! The arguments of each system call, by name: one struct per register
//! layout, with [`from_regs`](Args::from_regs) (the kernel's decode) and
//! [`to_regs`](Args::to_regs) (the user runtime's wrappers). Registers are
//! `[rdi, rsi, rdx, r10, r8, r9]` (the crate doc's argument 0..5); a
//! register a call does not take is 0 in `to_regs` and ignored by
//! `from_regs`.
//!
//! The fields are the raw words: checking them (is this a rights mask, an
//! object type, a user address?) is the kernel's decode, which answers a
//! bad word with an error code, not a decoding failure here. Calls that
//! take the same registers share a struct (`NbSend`, `Call` and
//! `ReplyRecv` are [`Send`]; `docs/abi.md` names the struct of each call).

/// A system call's argument registers, by name.
pub trait Args: Sized + Copy {
    /// How many argument registers the call reads (`to_regs` leaves the
    /// others 0): the user side passes only these.
    const REGS: usize;
    /// The field names, in register order (for documentation and tests).
    const FIELDS: &'static [&'static str];
    fn from_regs(regs: [u64; 6]) -> Self;
    fn to_regs(self) -> [u64; 6];
}

macro_rules! args {
    ($(
        $(#[$doc:meta])*
        $name:ident { $( $(#[$fdoc:meta])* $field:ident = $reg:literal ),* $(,)? }
    )*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
            pub struct $name {
                $( $(#[$fdoc])* pub $field: u64, )*
            }

            impl Args for $name {
                const REGS: usize = 0 $( + { let _ = $reg; 1 } )*;
                const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

                #[inline(always)]
                fn from_regs(regs: [u64; 6]) -> Self {
                    let _ = regs;
                    Self { $( $field: regs[$reg], )* }
                }

                #[inline(always)]
                #[allow(unused_mut)]
                fn to_regs(self) -> [u64; 6] {
                    let mut regs = [0; 6];
                    $( regs[$reg] = self.$field; )*
                    regs
                }
            }

            // Registers in order from 0, none twice: `REGS` counts them.
            const _: () = {
                let regs: &[usize] = &[$($reg),*];
                let mut i = 0;
                while i < regs.len() {
                    assert!(regs[i] == i);
                    i += 1;
                }
            };
        )*

        #[cfg(test)]
        mod generated_tests {
            use super::*;

            /// Every struct: registers in, fields out, the same registers
            /// back (unused ones 0); and fields in, registers out, the same
            /// fields back.
            #[test]
            #[allow(unused_mut, unused_assignments)]
            fn every_struct_round_trips() {
                let regs = [0x11, 0x22_0000_0000, u64::MAX, 0x44, 0x55, 0x8000_0000_0000_0066];
                $(
                    let a = $name::from_regs(regs);
                    let back = a.to_regs();
                    for i in 0..6 {
                        let want = if i < $name::REGS { regs[i] } else { 0 };
                        assert_eq!(back[i], want, "{} register {}", stringify!($name), i);
                    }
                    assert_eq!($name::from_regs(back), a, "{}", stringify!($name));
                    assert_eq!($name::FIELDS.len(), $name::REGS);
                    let mut n = 0u64;
                    let b = $name { $( $field: { n += 1; n * 0x0101_0101 }, )* };
                    let _ = n;
                    assert_eq!($name::from_regs(b.to_regs()), b, "{}", stringify!($name));
                )*
            }
        }
    };
}

args! {
    /// `Null`, `Yield`, `CpuSet`: no arguments.
    NoArgs {}
    /// `DebugWrite`.
    DebugWrite {
        /// User address of the bytes.
        ptr = 0,
        /// At most 4096.
        len = 1,
    }
    /// `TraceMark`.
    TraceMark {
        /// The label's bytes 0..8 (little-endian; NUL-padded).
        label0 = 0,
        label1 = 1,
        label2 = 2,
        /// Any value the caller wants next to the label.
        value = 3,
    }
    /// `TraceName`.
    TraceName {
        thread = 0,
        /// The name's bytes 0..8 (little-endian; NUL-padded, UTF-8).
        name0 = 1,
        name1 = 2,
        name2 = 3,
        name3 = 4,
    }
    /// `ThreadExit`.
    ThreadExit {
        code = 0,
    }
    /// `Send`, `NbSend`, `Call`, `ReplyRecv`, `ReplyTo` (where `cap` is the
    /// endpoint or reply capability), and `Reply` (which ignores `cap`).
    Send {
        cap = 0,
        /// A [`crate::MsgInfo`].
        info = 1,
        w0 = 2,
        w1 = 3,
        w2 = 4,
        w3 = 5,
    }
    /// `Recv`, `NbRecv`.
    Recv {
        endpoint = 0,
    }
    /// `Signal`, `Wait`, `Poll`.
    Signal {
        notification = 0,
    }
    /// `CapCopy`.
    CapCopy {
        src = 0,
        dst = 1,
    }
    /// `CapMint`.
    CapMint {
        src = 0,
        dst = 1,
        /// A [`crate::Rights`] mask.
        rights = 2,
        /// A badge, or an I/O-port sub-range
        /// ([`crate::object::io_ports_range`]).
        badge = 3,
    }
    /// `CapDelete`, `CapRevoke`, `SaveReply`, `Unmap`, `ThreadSuspend`,
    /// `ThreadResume`, `IrqAck`: one capability slot.
    Slot {
        slot = 0,
    }
    /// `VcpuRun`.
    VcpuRun {
        /// The virtual CPU (`WRITE`).
        vcpu = 0,
        /// The guest space it runs in (`WRITE`).
        space = 1,
        /// Which parts of the state block to load ([`crate::vcpu::load`]).
        flags = 2,
    }
    /// `Retype`.
    Retype {
        untyped = 0,
        /// An [`crate::ObjectType`].
        kind = 1,
        size_bits = 2,
        /// The first of `count` destination slots.
        dst = 3,
        count = 4,
    }
    /// `Map`.
    Map {
        vspace = 0,
        frame = 1,
        vaddr = 2,
        /// A [`crate::map::MapAttr`] word.
        attr = 3,
    }
    /// `ThreadConfigure`.
    ThreadConfigure {
        thread = 0,
        cspace = 1,
        vspace = 2,
        ipc_buffer = 3,
        /// [`crate::caddr::NULL_SLOT`] for none.
        fault_endpoint = 4,
    }
    /// `ThreadSetSchedParams`.
    ThreadSetSchedParams {
        thread = 0,
        priority = 1,
        cpu = 2,
        /// A [`crate::cpu::CpuSet`]; 0: the caller's own.
        cpus = 3,
    }
    /// `ThreadStart`.
    ThreadStart {
        thread = 0,
        rip = 1,
        rsp = 2,
        /// The thread's `rdi`.
        arg = 3,
    }
    /// `ThreadRegisters`.
    ThreadRegisters {
        thread = 0,
        /// 0 = read, 1 = write.
        write = 1,
    }
    /// `IrqBind`.
    IrqBind {
        irq = 0,
        notification = 1,
    }
    /// `MsiAlloc`.
    MsiAlloc {
        control = 0,
        slot = 1,
        /// The CPU index the interrupt is delivered to.
        cpu = 2,
    }
    /// `PhysAddress`.
    PhysAddress {
        control = 0,
        /// A frame or untyped capability.
        cap = 1,
    }
    /// `IoPort`.
    IoPort {
        ports = 0,
        port = 1,
        /// 0 = in, 1 = out.
        write = 2,
        /// 1, 2 or 4 bytes.
        width = 3,
        value = 4,
    }
    /// `BindNotification`.
    BindNotification {
        thread = 0,
        /// [`crate::caddr::NULL_SLOT`] unbinds.
        notification = 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_order_matches_the_documented_calls() {
        // Spot checks against docs/abi.md's argument lists.
        assert_eq!(Map::FIELDS, ["vspace", "frame", "vaddr", "attr"]);
        assert_eq!(
            Retype::FIELDS,
            ["untyped", "kind", "size_bits", "dst", "count"]
        );
        assert_eq!(NoArgs::REGS, 0);
        assert_eq!(Send::REGS, 6);
        let m = Map {
            vspace: 1,
            frame: 2,
            vaddr: 0x1000,
            attr: 3,
        };
        assert_eq!(m.to_regs(), [1, 2, 0x1000, 3, 0, 0]);
    }
}
