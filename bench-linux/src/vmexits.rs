//! The exit counters of Pecan's VMM (docs/virtualization.md, "The VMM"),
//! read by `bench-linux --vm` around each benchmark: a 32-bit `in` from
//! port [`EXITS_PORT`] gives the exits the VMM handled so far, from
//! [`HOST_PORT`] the runs that host interrupts ended. Only under the VMM:
//! on a plain PC (QEMU's q35) 0x510 is fw_cfg's selector.
//!
//! The ports are open only while they are read ([`Counters::read`]:
//! `ioperm` on, two `in`s, `ioperm` off): a task with an I/O bitmap pays
//! for it on every return to user mode (`tss_update_io_bitmap` in
//! `arch_exit_to_user_mode_prepare`), and forked peers would inherit it.
//! Closing every port releases the bitmap and clears the task's flag, so
//! the benchmarks run as natively.
//!
//! Each port read is itself an exit; [`Counters::open`] measures what a
//! reading adds between two others ([`Counters::reads`]: 2, one exit per
//! port) and [`Counters::since`] takes it off.

use std::io;

/// The VMM's count of handled exits.
pub const EXITS_PORT: u16 = 0x510;
/// The VMM's count of runs that ended for a host interrupt.
pub const HOST_PORT: u16 = 0x514;

/// One reading of both counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    pub exits: u32,
    pub host: u32,
}

/// Access to the counters (the ports granted by `ioperm`).
#[derive(Clone, Copy, Debug)]
pub struct Counters {
    /// What one [`Counters::read`] adds to the exit count between two
    /// readings (its own port accesses).
    pub reads: u32,
}

/// Opens or closes the counters' ports for this process.
fn ports(on: bool) -> io::Result<()> {
    // SAFETY: ioperm takes plain values; it changes only this process's
    // I/O permission bitmap.
    let r = unsafe { libc::ioperm(u64::from(EXITS_PORT), 8, libc::c_int::from(on)) };
    if r != 0 {
        return Err(io::Error::other(format!(
            "ioperm({EXITS_PORT:#x}, 8, {}): {}",
            u8::from(on),
            io::Error::last_os_error()
        )));
    }
    Ok(())
}

fn inl(port: u16) -> u32 {
    let value: u32;
    // SAFETY: `ioperm` granted the port (Counters::open); reading it has
    // no effect but the VMM's exit and the value in eax.
    unsafe {
        core::arch::asm!("in eax, dx", in("dx") port, out("eax") value,
                         options(nomem, nostack, preserves_flags));
    }
    value
}

impl Counters {
    /// Checks that the ports can be opened (root only) and measures the
    /// reads' own exits.
    pub fn open() -> io::Result<Self> {
        ports(true)?;
        ports(false)?;
        // The least of a few back-to-back pairs: an interrupt the VMM
        // injects in between would add its exit to one pair only.
        let mut c = Counters { reads: u32::MAX };
        for _ in 0..5 {
            let a = c.read();
            let b = c.read();
            c.reads = c.reads.min(b.exits.wrapping_sub(a.exits));
        }
        Ok(c)
    }

    /// Both counters, the ports open only meanwhile (`open` checked that
    /// `ioperm` works; should it fail now, the `in` faults).
    pub fn read(&self) -> Reading {
        let _ = ports(true);
        let r = Reading {
            exits: inl(EXITS_PORT),
            host: inl(HOST_PORT),
        };
        let _ = ports(false);
        r
    }

    /// The exits and host-interrupt runs between `before` and now, the
    /// reads' own exits taken off.
    pub fn since(&self, before: Reading) -> Reading {
        let now = self.read();
        Reading {
            exits: now
                .exits
                .wrapping_sub(before.exits)
                .saturating_sub(self.reads),
            host: now.host.wrapping_sub(before.host),
        }
    }
}

/// The report line: `VMEXITS {"name":...,"exits":E,"host":H,"operations":N}`
/// — the exits during the whole benchmark (set-up, warm-up and samples)
/// and the operations it did in that time.
pub fn line(name: &str, counted: Reading, operations: u64) -> String {
    format!(
        "VMEXITS {{\"name\":\"{name}\",\"exits\":{},\"host\":{},\"operations\":{operations}}}\n",
        counted.exits, counted.host
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_line() {
        assert_eq!(
            line("vm-getppid", Reading { exits: 12, host: 3 }, 1100),
            "VMEXITS {\"name\":\"vm-getppid\",\"exits\":12,\"host\":3,\"operations\":1100}\n"
        );
    }
}
