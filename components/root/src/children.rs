//! Starting the components of `pecan.start=` and supervising them until
//! every child that is not a server has finished (`abi::child`).

use rt::abi::bootinfo::{slot, BootInfo};
use rt::abi::caddr::own;
use rt::abi::{child, ObjectType};
use rt::println;
use rt::syscall;
use ucore::start;
use ucore::supervise::Supervisor;

use crate::boot;
use crate::resources::Resources;
use crate::spawn::{self, ChildCaps, Endpoints};

/// Exit codes of root (besides 0).
pub mod exit {
    /// The boot image could not be used.
    pub const BAD_BOOT_IMAGE: i32 = 3;
    /// Root's capability space or memory could not be set up.
    pub const NO_RESOURCES: i32 = 4;
    /// `Recv` on root's endpoint failed, so children could not be supervised.
    pub const RECV_FAILED: i32 = 5;
}

/// Starts the children named on the command line, waits for them and stops
/// the servers; returns root's exit code. Without `pecan.start=` nothing
/// happens.
pub fn run(info: &'static BootInfo) -> i32 {
    let cmdline = info.cmdline();
    let Some(list) = kcore::cmdline::value(cmdline, start::KEY) else {
        return 0;
    };
    let image = match boot::image(info) {
        Ok(image) => image,
        Err(e) => {
            println!("root: {e}");
            return exit::BAD_BOOT_IMAGE;
        }
    };
    let (mut res, summary) = match Resources::from_boot_info(info) {
        Ok(r) => r,
        Err(e) => {
            println!("root: {e}");
            return exit::NO_RESOURCES;
        }
    };
    println!(
        "root: {} KiB of untyped memory in {} capabilities ({} device capabilities unused), \
         {} free slots",
        summary.free_bytes / 1024,
        summary.untyped_caps,
        summary.device_caps,
        summary.free_slots
    );
    // The kernel starts root at this priority; children run below it, so
    // root finishes starting them all before the first one runs.
    if let Err(e) = syscall::thread_set_sched_params(own(slot::THREAD), child::ROOT_PRIORITY, 0) {
        println!(
            "root: cannot run at priority {}: {e} (children may run before all are started)",
            child::ROOT_PRIORITY
        );
    }
    let endpoints = match (
        res.make(ObjectType::Endpoint, 0),
        res.make(ObjectType::Endpoint, 0),
    ) {
        (Ok(root), Ok(service)) => Endpoints { root, service },
        (Err(e), _) | (_, Err(e)) => {
            println!("root: cannot make its endpoints: {e}");
            return exit::NO_RESOURCES;
        }
    };

    let mut children: Supervisor<'static, ChildCaps> = Supervisor::new();
    for entry in start::entries(list) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(bad) => {
                println!("root: refusing {bad}");
                continue;
            }
        };
        let (name, index) = (entry.name, entry.index);
        match spawn::spawn(&mut res, &image, endpoints, &entry) {
            Ok((caps, entry_point)) => {
                println!("root: started {name} (index {index}, entry {entry_point:#x})");
                children.add(index, name, caps);
            }
            Err(e) if e.is_refusal() => println!("root: refusing {name}: {e}"),
            Err(e) => println!("root: cannot start {name}: {e}"),
        }
    }
    let code = supervise(&mut children, endpoints.root);
    println!("root: all children finished");
    stop_all(&children);
    code
}

/// Receives on root's endpoint until no child that is not a server runs.
fn supervise(children: &mut Supervisor<'static, ChildCaps>, endpoint: u32) -> i32 {
    while children.waiting() > 0 {
        let (badge, info, words) = match syscall::recv(own(endpoint)) {
            Ok(message) => message,
            Err(e) => {
                println!("root: Recv on its endpoint failed: {e}; giving up on its children");
                return exit::RECV_FAILED;
            }
        };
        let handled = children.handle(badge, info.label(), words);
        println!("root: {handled}");
        if let (true, Some(c)) = (handled.stop(), handled.child) {
            if let Err(e) = syscall::thread_suspend(own(c.caps.thread)) {
                println!("root: cannot suspend {}: {e}", c.name);
            }
        }
    }
    0
}

/// Deletes every child's thread (and the copies made from its capability,
/// such as a test child's own), which stops the servers.
fn stop_all(children: &Supervisor<'static, ChildCaps>) {
    for c in children.children() {
        let thread = own(c.caps.thread);
        // SAFETY: the thread runs in the child's address space; deleting it
        // unmaps none of root's memory.
        let result =
            unsafe { syscall::cap_revoke(thread).and_then(|()| syscall::cap_delete(thread)) };
        if let Err(e) = result {
            println!("root: cannot delete the thread of {}: {e}", c.name);
        }
    }
}
