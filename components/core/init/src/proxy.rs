//! Init's proxy threads: they make the calls to providers (`OPEN_SESSION`,
//! `CLOSE_SESSION`) that init's main thread must never make itself
//! (docs/architecture.md, "Sessions and routing", 10).
//!
//! A proxy is a thread of init (its address space and capability space)
//! with its own stack and IPC buffer at [`PROXY_VA`]` + k * `[`STRIDE`]
//! and three slots of its own: `to_init` (init's endpoint minted with
//! [`PROXY_BADGE`]` | k`), `transit` (where the provider's session
//! capability arrives) and `donation` (where the job's quota donation
//! arrives). It loops: `Call` init with the result of its last job (the
//! first time: [`READY`]); the answer is its next job — the label and
//! words to send, the donation as its capability, the provider's endpoint
//! slot in [`JOB_EP`]`[k]` —; it calls the provider and starts over.
//!
//! Init's main thread receives a proxy's call like any message; while it
//! has no job for it, it saves the call as the proxy's reply capability
//! (`Proxy::wait`, `SaveReply`) and answers it with `ReplyTo` when a job
//! comes: so an idle proxy is simply a proxy waiting for init's answer.
//!
//! Invariants: only init's main thread touches [`Proxies`]; a proxy reads
//! its [`JOB_EP`] entry only between receiving a job and calling, and init
//! writes it only before answering an idle proxy (the IPC orders the two).
//! The transit slot holds a capability only from the provider's answer
//! until init handled the result (init empties it before the proxy can
//! run again). A proxy never allocates, prints or touches init's heap.

use core::sync::atomic::{AtomicU64, Ordering};

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use rt::abi::caddr::{own, NULL_SLOT};
use rt::abi::ipc_buffer::{RECV_SLOT_OFFSET, SEND_CAP_OFFSET};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{Error, MsgInfo, ObjectType, Rights};
use rt::interfaces::child::{INIT_PRIORITY, OWN_CSPACE, OWN_VSPACE};
use rt::resources::{ResourceError, Resources};
use rt::syscall::{self, Words};

/// Most proxy threads init makes; beyond, jobs wait in init's queue.
/// A proxy's call can wait as long as its provider is still starting —
/// itself waiting for a session of its own — so the pool must outnumber
/// the providers that start at once in a chain: the demo's display and
/// storage chains (terminals waiting for the GUI multiplexer, which
/// waits for the input driver; FAT services waiting for the partition
/// service, which waits for the block driver) tied up all of 8 and
/// deadlocked. 24 cost init about 400 KiB of its own memory at most,
/// made only when jobs wait.
pub const MAX_PROXIES: usize = 24;
/// The badge bit of a proxy's capability to init's endpoint (above the
/// children's badges and the session bits of `interfaces::session`); the low
/// bits are the proxy's number.
pub const PROXY_BADGE: u64 = 1 << 40;
/// A proxy's first call: it has no result yet.
pub const READY: u64 = 0x5e55_1001;
/// A proxy's result: words = [error code of its call (0: it was
/// answered), the answer's label, its word 0, its capability count].
pub const RESULT: u64 = 0x5e55_1002;

/// Where the proxies' stacks and IPC buffers are (above the spawn scratch
/// page, in the page table that maps it).
pub const PROXY_VA: u64 = rt::spawn::SCRATCH + 0x10_0000;
/// Address space per proxy: the stack's pages, an unmapped guard page,
/// the IPC buffer.
pub const STRIDE: u64 = 0x1_0000;
const STACK_PAGES: u64 = 2;
const IPC_OFFSET: u64 = 0x8000;

/// The provider's endpoint slot of proxy k's current job.
static JOB_EP: [AtomicU64; MAX_PROXIES] = [const { AtomicU64::new(0) }; MAX_PROXIES];
/// Proxy k's slots: to init, transit, donation (set before it starts).
static SLOTS: [[AtomicU64; 3]; MAX_PROXIES] =
    [const { [const { AtomicU64::new(0) }; 3] }; MAX_PROXIES];

fn ipc_buffer(k: usize) -> u64 {
    PROXY_VA + k as u64 * STRIDE + IPC_OFFSET
}

fn stack_top(k: usize) -> u64 {
    PROXY_VA + k as u64 * STRIDE + STACK_PAGES * 4096
}

/// Writes a field of proxy `k`'s IPC buffer.
fn set_field(k: usize, offset: u64, value: u64) {
    let field = (ipc_buffer(k) + offset) as *mut u64;
    // SAFETY: proxy k's IPC buffer page is mapped writable (by `start`)
    // for init's whole life and only proxy k writes it; volatile: the
    // kernel reads it during the proxy's calls.
    unsafe { field.write_volatile(value) };
}

fn info(label: u64, caps: usize) -> MsgInfo {
    MsgInfo::new(label, 4, caps).unwrap_or_default()
}

/// A proxy thread's whole life (see the module doc); `k`: its number.
extern "C" fn proxy_main(k: u64) -> ! {
    let k = k as usize;
    let [to_init, transit, donation] = SLOTS[k].each_ref().map(|s| s.load(Ordering::SeqCst));
    let mut message: (MsgInfo, Words) = (info(READY, 0), [0; 4]);
    loop {
        set_field(k, RECV_SLOT_OFFSET, donation);
        let job = syscall::call(to_init, message.0, message.1);
        set_field(k, RECV_SLOT_OFFSET, NULL_SLOT);
        let (job, words) = match job {
            Ok(j) => j,
            // Init never refuses its proxies' calls; report and ask again.
            Err(e) => {
                message = (info(RESULT, 0), [e.raw(), 0, 0, 0]);
                continue;
            }
        };
        let donated = job.caps() > 0;
        if donated {
            set_field(k, SEND_CAP_OFFSET, donation);
        }
        set_field(k, RECV_SLOT_OFFSET, transit);
        let ep = JOB_EP[k].load(Ordering::SeqCst);
        let answer = syscall::call(ep, info(job.label(), donated as usize), words);
        set_field(k, RECV_SLOT_OFFSET, NULL_SLOT);
        if donated {
            // SAFETY: a capability table of the client's; nothing is mapped
            // through it. The provider's copy stays (a deleted
            // capability's children move up to its parent).
            let _ = unsafe { syscall::cap_delete(donation) };
        }
        message = match answer {
            Ok((a, w)) => (info(RESULT, 0), [0, a.label(), w[0], a.caps() as u64]),
            Err(e) => (info(RESULT, 0), [e.raw(), 0, 0, 0]),
        };
    }
}

/// What a job is for, and who waits for its result.
#[derive(Clone, Copy, Debug)]
pub enum Purpose {
    /// Opening a session of the type in `service` (packed, for the log)
    /// for child `client` (its `Kid::id`), with a quota donation or not.
    Open {
        client: usize,
        service: [u64; 4],
        donated: bool,
    },
    /// Closing the provider's session `badge` (init's record `id`, for
    /// the log), for `client`.
    Close { client: usize, badge: u64 },
}

/// A call a proxy makes for init.
#[derive(Debug)]
pub struct Job {
    pub purpose: Purpose,
    /// `OPEN_SESSION` or `CLOSE_SESSION` and its words.
    pub label: u64,
    pub words: [u64; 4],
    /// The provider's `Kid::id` and its restart count when the job was
    /// made (an answer from a later incarnation is not this one's).
    pub provider: usize,
    pub restarts: u32,
    /// Init's slot holding the client's saved reply, if someone waits.
    pub reply: Option<u32>,
    /// Init's slot holding the client's quota donation, if any.
    pub donation: Option<u32>,
}

/// One proxy thread, as init's main thread sees it.
struct Proxy {
    /// Init's slot for the proxy's saved call while it is idle.
    wait: u32,
    transit: u32,
    /// Whether `wait` holds the proxy's call (it is idle).
    idle: bool,
    /// The job it is doing.
    job: Option<Job>,
}

/// The proxies and the jobs waiting for one.
pub struct Proxies {
    proxies: Vec<Proxy>,
    queue: VecDeque<Job>,
    /// Proxies started that have not called yet.
    starting: usize,
}

/// A proxy's message, decoded by [`Proxies::arrived`].
pub struct Arrival {
    /// The job it finished (none for its first call).
    pub job: Option<Job>,
    /// Its result: `Err(code)` if its call failed, else the answer's
    /// label, word 0 and capability count.
    pub result: Result<(u64, u64, u64), u64>,
    /// Its transit slot (holding the answer's capability, if any).
    pub transit: u32,
}

impl Proxies {
    pub const fn new() -> Self {
        Proxies {
            proxies: Vec::new(),
            queue: VecDeque::new(),
            starting: 0,
        }
    }

    /// Queues `job` for the next idle proxy.
    pub fn push(&mut self, job: Job) {
        self.queue.push_back(job);
    }

    /// Proxy `badge`'s message (init's reply slot holds its call): the job
    /// it finished, if any. The proxy is idle afterwards (its call saved).
    pub fn arrived(&mut self, badge: u64, label: u64, words: &[u64; 4]) -> Option<Arrival> {
        let k = (badge & !PROXY_BADGE) as usize;
        let proxy = self.proxies.get_mut(k)?;
        let job = proxy.job.take();
        if job.is_none() && label == READY {
            self.starting = self.starting.saturating_sub(1);
        }
        let result = match words[0] {
            0 => Ok((words[1], words[2], words[3])),
            e => Err(e),
        };
        let arrival = Arrival {
            job,
            result,
            transit: proxy.transit,
        };
        match syscall::save_reply(own(proxy.wait)) {
            Ok(()) => proxy.idle = true,
            Err(e) => rt::println!("init: cannot save proxy {k}'s call: {e}"),
        }
        Some(arrival)
    }

    /// Hands queued jobs to idle proxies, starting a proxy (up to
    /// [`MAX_PROXIES`]) when a job waits and none is idle or starting;
    /// `ep_of(job)` is the provider's endpoint slot if it still runs (a
    /// job for a provider that stopped comes back in the result, refused).
    pub fn pump(
        &mut self,
        res: &mut Resources,
        own_ep: u32,
        mut ep_of: impl FnMut(&Job) -> Option<u32>,
    ) -> Vec<Job> {
        let mut stale = Vec::new();
        while let Some(k) = self.proxies.iter().position(|p| p.idle) {
            // A job for a provider no proxy works for comes first: a
            // provider that has not reached its `Recv` yet (still
            // starting, maybe waiting for a session of its own) should not
            // hold every proxy while jobs for other providers wait — that
            // deadlocked a start-up where two services' clients took every
            // proxy and the session the services waited for found none.
            // Only when every waiting job is for a busy provider does one
            // go to it as well (a provider may serve several at once).
            let i = self
                .queue
                .iter()
                .position(|j| !self.busy(j.provider))
                .unwrap_or(0);
            let Some(job) = self.queue.remove(i) else {
                break;
            };
            let Some(ep) = ep_of(&job) else {
                stale.push(job);
                continue;
            };
            let proxy = &mut self.proxies[k];
            JOB_EP[k].store(own(ep), Ordering::SeqCst);
            if let Some(d) = job.donation {
                rt::transfer::set_send_cap(own(d));
            }
            let caps = job.donation.is_some() as usize;
            match syscall::reply_to(own(proxy.wait), info(job.label, caps), job.words) {
                Ok(()) => {
                    proxy.idle = false;
                    // The proxy holds a copy now (the provider's will be
                    // derived from it); init keeps its own until the job
                    // ends, to take the session's wake notification from
                    // the table the provider filled (`Sessions::finish_job`).
                    proxy.job = Some(job);
                }
                Err(e) => {
                    rt::println!("init: cannot hand a job to proxy {k}: {e}");
                    stale.push(job);
                }
            }
        }
        let waiting = self.queue.len();
        if waiting > self.starting && self.proxies.len() < MAX_PROXIES {
            match self.start(res, own_ep) {
                Ok(()) => self.starting += 1,
                Err(e) => rt::println!("init: cannot start a proxy thread: {e}"),
            }
        }
        stale
    }

    /// Whether a proxy works on a job for `provider` now.
    fn busy(&self, provider: usize) -> bool {
        self.proxies
            .iter()
            .any(|p| p.job.as_ref().is_some_and(|j| j.provider == provider))
    }

    /// Makes and starts proxy number `self.proxies.len()`.
    fn start(&mut self, res: &mut Resources, own_ep: u32) -> Result<(), ProxyError> {
        let k = self.proxies.len();
        let thread = res.make(ObjectType::Thread, 0)?;
        let rw = MapAttr {
            writable: true,
            executable: false,
            cache: Cache::WriteBack,
        };
        let base = PROXY_VA + k as u64 * STRIDE;
        for vaddr in (0..STACK_PAGES)
            .map(|p| base + p * 4096)
            .chain([ipc_buffer(k)])
        {
            let frame = res.make(ObjectType::Frame4K, 0)?;
            // SAFETY: PROXY_VA.. is used by nothing else in init; a fresh
            // frame is zeroed.
            unsafe { syscall::map(own(OWN_VSPACE), own(frame), vaddr, rw) }?;
        }
        let [to_init, transit, donation, wait] =
            [res.slot()?, res.slot()?, res.slot()?, res.slot()?];
        syscall::cap_mint(
            own(own_ep),
            own(to_init),
            Rights::WRITE,
            PROXY_BADGE | k as u64,
        )?;
        for (slot, value) in SLOTS[k].iter().zip([to_init, transit, donation]) {
            slot.store(own(value), Ordering::SeqCst);
        }
        syscall::thread_configure(
            own(thread),
            own(OWN_CSPACE),
            own(OWN_VSPACE),
            ipc_buffer(k),
            NULL_SLOT,
        )?;
        syscall::thread_set_sched_params(own(thread), INIT_PRIORITY, 0)?;
        // SysV: at function entry rsp + 8 is 16-byte aligned.
        let entry = proxy_main as *const () as u64;
        // SAFETY: the thread runs `proxy_main` on its own stack, mapped
        // above, and touches only its stack, its IPC buffer and the
        // atomics of this module.
        unsafe { syscall::thread_start(own(thread), entry, stack_top(k) - 8, k as u64) }?;
        self.proxies.push(Proxy {
            wait,
            transit,
            idle: false,
            job: None,
        });
        Ok(())
    }
}

/// Why a proxy could not be started.
#[derive(Debug)]
enum ProxyError {
    Resource(ResourceError),
    Syscall(Error),
}

impl From<ResourceError> for ProxyError {
    fn from(e: ResourceError) -> Self {
        ProxyError::Resource(e)
    }
}

impl From<Error> for ProxyError {
    fn from(e: Error) -> Self {
        ProxyError::Syscall(e)
    }
}

impl core::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProxyError::Resource(e) => write!(f, "{e}"),
            ProxyError::Syscall(e) => write!(f, "{e}"),
        }
    }
}
