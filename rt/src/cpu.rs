//! The CPUs a component may use, and placing its threads on them.
//!
//! Every thread has a CPU set (`abi::cpu`): the CPUs it may place threads
//! on. Init gives each component the set its scenario entry's `cpus` names
//! (`docs/scenarios.md`; default: its `cpu` alone); root and the components
//! root starts have every CPU online. A thread the component makes with
//! `Retype` starts with its maker's set, so [`set`] called from any of its
//! threads says which CPUs the component may use — there is no need to
//! probe `ThreadSetSchedParams` CPU by CPU. A component that spreads work
//! asks for [`count`] and puts its `n`th worker on its `n`th CPU with
//! [`place`]; [`syscall::thread_place`] narrows a thread's own set too.

use abi::{CapSlot, Error};

pub use abi::cpu::CpuSet;

use crate::syscall;

/// The calling thread's CPU set.
pub fn set() -> CpuSet {
    syscall::cpu_set()
}

/// How many CPUs the calling thread may place threads on (at least 1: the
/// kernel never gives a thread an empty set).
pub fn count() -> u32 {
    set().count()
}

/// Puts `thread` (a thread capability in the caller's table) on the `n`th
/// CPU of the caller's set (`n` from 0, in index order) at `priority`,
/// with the caller's whole set as its own; returns that CPU's index.
/// `InvalidArgument` when the set has no `n`th CPU (or the kernel refuses
/// the priority).
pub fn place(thread: CapSlot, priority: u8, n: u32) -> Result<u32, Error> {
    let cpu = set().nth(n).ok_or(Error::InvalidArgument)?;
    syscall::thread_place(thread, priority, cpu, CpuSet::EMPTY)?;
    Ok(cpu)
}
