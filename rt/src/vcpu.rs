//! A virtual CPU as a VMM sees it: [`Vcpu::run`] exchanges the state block
//! (`abi::vcpu`) through the main thread's IPC buffer and hides the runs
//! that host interrupts end (`abi::vcpu::exit::INTR`: the interrupt is
//! taken on the way back to user mode, then the guest goes on). For the
//! main thread only — a helper thread has an IPC buffer of its own.
//! docs/virtualization.md has the design.

use abi::vcpu::{exit, word};
use abi::{CapSlot, Error, MAIN_IPC_BUFFER_ADDR};

use crate::syscall;

/// One exit: the code (`abi::vcpu::exit`) and the two info words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    /// The exit code.
    pub code: u64,
    /// Exit info 1.
    pub info1: u64,
    /// Exit info 2.
    pub info2: u64,
}

/// A virtual CPU and the guest space it runs in, with a copy of its state
/// block.
pub struct Vcpu {
    vcpu: CapSlot,
    space: CapSlot,
    /// The state block: what the last exit returned, with the VMM's
    /// changes for the next run (which [`Vcpu::run`]'s flags name).
    pub state: [u64; word::COUNT],
    /// Runs that a host interrupt, NMI or SMI ended (the VMM never sees
    /// them).
    pub interrupted: u64,
}

fn block(i: usize) -> *mut u64 {
    (MAIN_IPC_BUFFER_ADDR + 8 * i as u64) as *mut u64
}

impl Vcpu {
    /// The VCPU in slot `vcpu`, to run in the guest space in `space`,
    /// with an all-zero state block.
    pub fn new(vcpu: CapSlot, space: CapSlot) -> Vcpu {
        Vcpu {
            vcpu,
            space,
            state: [0; word::COUNT],
            interrupted: 0,
        }
    }

    /// Runs until an exit the VMM must handle, loading first what `flags`
    /// (`abi::vcpu::load`) names of [`Vcpu::state`].
    pub fn run(&mut self, flags: u64) -> Result<Exit, Error> {
        self.run_inner(flags, false)
    }

    /// As [`Vcpu::run`], but a run that a host interrupt, NMI or SMI
    /// ended returns too (its exit code says which; counted in
    /// [`Vcpu::interrupted`]): for a VMM whose devices keep time — an
    /// APIC timer that expired while the guest ran without exits is due
    /// now, at the host's tick, not at the guest's next exit.
    pub fn run_to_host_event(&mut self, flags: u64) -> Result<Exit, Error> {
        self.run_inner(flags, true)
    }

    fn run_inner(&mut self, flags: u64, host_events: bool) -> Result<Exit, Error> {
        for (i, w) in self.state.iter().enumerate() {
            // SAFETY: root maps the main thread's IPC buffer page
            // writable for the whole run and the block fits in it (abi's
            // test); volatile keeps the store before the system call.
            unsafe { block(i).write_volatile(*w) };
        }
        let mut flags = flags;
        loop {
            // SAFETY: the block lives in the main thread's IPC buffer,
            // which the runtime lends to nobody during this call.
            let [code, info1, info2] = unsafe { syscall::vcpu_run(self.vcpu, self.space, flags)? };
            // Host events (an interrupt, an NMI, an SMI): the host takes
            // them on the way back to user mode; the guest goes on.
            if matches!(code, exit::INTR | exit::NMI | exit::SMI) && !host_events {
                self.interrupted += 1;
                // The state is in the VCPU: nothing to load again.
                flags = 0;
                continue;
            }
            if matches!(code, exit::INTR | exit::NMI | exit::SMI) {
                self.interrupted += 1;
            }
            for (i, w) in self.state.iter_mut().enumerate() {
                // SAFETY: as above; the kernel wrote the block.
                *w = unsafe { block(i).read_volatile() };
            }
            return Ok(Exit { code, info1, info2 });
        }
    }

    /// A word of the state block.
    pub fn get(&self, w: usize) -> u64 {
        self.state[w]
    }

    /// Changes a word of the state block (loaded by the next run whose
    /// flags name its part).
    pub fn set(&mut self, w: usize, value: u64) {
        self.state[w] = value;
    }
}
