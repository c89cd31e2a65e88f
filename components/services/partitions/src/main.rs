//! partitions: the partition service (Genode's `part_block`). It reads
//! the partition table of the disk behind its own Block session (the
//! driver's) — MBR with extended partitions, or GPT with its CRCs checked
//! and the backup used when the primary is bad (the `partition` crate) —
//! and serves each partition as a Block session of its own: a client sees
//! its partition as a whole device from block 0 and cannot reach outside
//! it (`rt::session::block::check` against the partition's size, then
//! the block number moved by the partition's start).
//!
//! Which client gets which partition is its config's policy, which xtask
//! writes from the clients' `partition = N` keys in the scenario and
//! checks (docs/scenarios.md; the service's own `[component.config]` may
//! not set it). A client `fat-test` with `partition = 3` makes:
//!
//! ```toml
//! [component.config]
//! policy = [{ label = "fat-test", partition = 3 }]
//! ```
//!
//! A session for a label without a policy, for a partition the table
//! lacks, or for a partition another open session holds is refused. A
//! corrupt or hostile table is reported (`partitions: no usable
//! partition table: ...`) and every session refused; the service keeps
//! running.
//!
//! Requests: a client's signal runs [`Forwarder::submitted`]: its
//! packets are checked, the good ones forwarded to the driver — each
//! payload copied once, between the client's stream and the driver's
//! (docs/drivers.md, "Copies on the bulk paths") — all of the batch in
//! flight at once; the service waits for their acknowledgements, copies
//! read data back and acknowledges the client's packets, then re-arms
//! the client's stream. Its scenario grants it `own = ["thread",
//! "vspace"]` (binding its notification, mapping streams and its config).
//!
//! When the driver stops (killed, faulted: init restarts it), the wait for
//! acknowledgements ends with the parent's wake-up (`BlockError::
//! provider_gone`); the service reconnects (`BlockClient::reconnect`,
//! which waits out the driver's restart) and submits every request that
//! was in flight again, in the order they came — a block request may be
//! repeated — so its clients see nothing but a delay
//! (`tests/blk-kill.toml`). Invariant: a client's packet is in exactly
//! one place until it is acknowledged — in flight at the driver
//! ([`Forwarder::inflight`], submission order) or waiting for the
//! reconnect ([`Forwarder::waiting`]).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use alloc::collections::VecDeque;
use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use partition::{Kind, Partition, ReadError, Scheme, Table};
use rt::abi::caddr::own;
use rt::abi::{MsgInfo, ObjectType};
use rt::interfaces::child;
use rt::println;
use rt::session::block::{
    self, Block, BlockClient, BlockError, BlockInfo, BlockSource, Served, STREAM_BYTES,
};
use rt::session::rom;
use rt::session::{Donated, Label, Provider, SessionTable};
use rt::signal::Signals;
use rt::stream::{Packet, Taken};
use rt::syscall::{self, Words};

rt::entry!(main);

const UPSTREAM: u32 = child::FIRST_FREE;
const UPSTREAM_BLOCK: u32 = UPSTREAM + 1;
const UPSTREAM_TABLE: u32 = UPSTREAM + 2;
const UPSTREAM_STREAM: [u32; 3] = [UPSTREAM + 3, UPSTREAM + 4, UPSTREAM + 5];
const ROM_SLOT: u32 = UPSTREAM + 6;
const NOTIFY: u32 = UPSTREAM + 7;
const CONFIG_FIRST: u32 = UPSTREAM + 8;
const CONFIG_END: u32 = CONFIG_FIRST + 4;
const FIRST_SESSION_SLOT: u32 = CONFIG_END;
/// At most this many sessions at once (a disk has few partitions).
const MAX_SESSIONS: usize = 8;
const END_SESSION_SLOT: u32 = FIRST_SESSION_SLOT + 2 * MAX_SESSIONS as u32;

const CONFIG_VA: u64 = 0x30_0000_0000;
const UPSTREAM_VA: u64 = 0x40_0000_0000;
/// Session `i`'s stream window.
const CLIENT_VA: u64 = 0x50_0000_0000;

type SharedSignals = Rc<RefCell<Signals<SessionTable<Client>>>>;

/// One rule of the policy.
struct Rule {
    label: String,
    partition: u32,
}

fn main(_: u64) -> i32 {
    let policy = match read_policy() {
        Ok(p) => p,
        Err(e) => {
            println!("partitions: config: {e}");
            return 1;
        }
    };
    let upstream = match open_upstream() {
        Ok(u) => u,
        Err(e) => {
            println!("partitions: the disk's Block session: {e}");
            return 1;
        }
    };
    let mut stream = upstream;
    let info = stream.info();
    let table = read_table(&mut stream, &info);
    let partitions = match &table {
        Ok(t) => {
            print_table(t, &info);
            t.partitions.clone()
        }
        Err(e) => {
            println!("partitions: no usable partition table: {e}; every session is refused");
            Vec::new()
        }
    };
    for rule in &policy {
        match partitions.iter().find(|p| p.number == rule.partition) {
            Some(_) => println!(
                "partitions: {} gets partition {}",
                rule.label, rule.partition
            ),
            None => println!(
                "partitions: {} is to get partition {}, which the disk lacks: refused",
                rule.label, rule.partition
            ),
        }
    }
    let notify = own(NOTIFY);
    let made = syscall::retype(own(child::UNTYPED), ObjectType::Notification, 0, notify, 1)
        .and_then(|()| syscall::bind_notification(own(child::OWN_THREAD), notify));
    if let Err(e) = made {
        println!("partitions: notification: {e}");
        return 1;
    }
    let forwarder = Rc::new(RefCell::new(Forwarder {
        up: stream,
        info,
        inflight: VecDeque::new(),
        waiting: Vec::new(),
        gone: false,
        windows: [false; MAX_SESSIONS],
        held: Vec::new(),
        next_id: 1,
    }));
    let signals: SharedSignals = Rc::new(RefCell::new(Signals::new(notify)));
    let provider = Provider::<Block, Client>::new(FIRST_SESSION_SLOT, END_SESSION_SLOT);
    let for_new = (forwarder.clone(), signals.clone());
    provider.serve_with_signals(
        &signals,
        move |label, donated| {
            open_session(&for_new.0, &for_new.1, &policy, &partitions, label, donated)
        },
        move |_, client, op, words| request(client, op, words),
    )
}

/// The policy from the config ROM.
fn read_policy() -> Result<Vec<Rule>, String> {
    // SAFETY: CONFIG_VA.. is used by nothing else of this program.
    let tree = unsafe { rom::config(ROM_SLOT, CONFIG_FIRST, CONFIG_END, CONFIG_VA) }?;
    let mut rules = Vec::new();
    let Some(list) = tree.get("policy") else {
        return Ok(rules);
    };
    let list = list.as_array().ok_or("policy: not an array")?;
    for (i, entry) in list.iter().enumerate() {
        let table = entry
            .as_table()
            .ok_or_else(|| format!("policy[{i}]: not a table"))?;
        let label = table
            .get("label")
            .and_then(|v| v.as_str())
            .ok_or_else(|| format!("policy[{i}].label: missing or not a string"))?;
        let partition = table
            .get("partition")
            .and_then(|v| v.as_integer())
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("policy[{i}].partition: missing or not a number from 1"))?;
        rules.push(Rule {
            label: label.into(),
            partition,
        });
    }
    Ok(rules)
}

/// The Block session of the disk and its stream.
fn open_upstream() -> Result<BlockClient, String> {
    // SAFETY: UPSTREAM_VA.. is used by nothing else of this program.
    unsafe {
        BlockClient::connect(
            UPSTREAM,
            UPSTREAM_BLOCK,
            UPSTREAM_TABLE,
            UPSTREAM_STREAM,
            UPSTREAM_VA,
        )
    }
}

/// The disk's partition table, read one block at a time.
fn read_table(up: &mut BlockSource, info: &BlockInfo) -> Result<Table, partition::TableError> {
    if info.block_size as usize != partition::BLOCK {
        println!(
            "partitions: the disk's blocks are {} bytes; tables are read in 512-byte blocks",
            info.block_size
        );
        return Err(partition::TableError::Read(ReadError(0)));
    }
    let mut read = |lba: u64, buf: &mut [u8; partition::BLOCK]| {
        let lba = u32::try_from(lba).map_err(|_| ReadError(block::STATUS_RANGE))?;
        up.read(lba, buf).map_err(|e| match e {
            block::BlockError::Status(s) => ReadError(s),
            _ => ReadError(block::STATUS_IO),
        })
    };
    partition::read_table(&mut read, info.block_count)
}

fn print_table(t: &Table, info: &BlockInfo) {
    let scheme = match (t.scheme, &t.gpt) {
        (Scheme::Mbr, _) => String::from("MBR"),
        (Scheme::Gpt, Some(g)) => match g.header {
            partition::GptHeader::Primary => String::from("GPT"),
            partition::GptHeader::Backup { primary } => {
                format!("GPT (its backup header: the primary is bad: {primary})")
            }
        },
        (Scheme::Gpt, None) => String::from("GPT"),
    };
    println!(
        "partitions: {scheme} on {} blocks of {} bytes: {} partitions",
        info.block_count,
        info.block_size,
        t.partitions.len()
    );
    for p in &t.partitions {
        let kind = match p.kind {
            Kind::Mbr { type_byte } => format!("type {type_byte:#04x}"),
            Kind::Gpt { name, .. } => format!("\"{name}\""),
        };
        println!(
            "partitions: {}: blocks {}..{} ({} MiB), {kind}",
            p.number,
            p.first_lba,
            p.first_lba + p.blocks,
            (p.blocks * u64::from(info.block_size)) >> 20
        );
    }
}

/// A session for `label` if the policy gives it a partition the disk has
/// and nobody holds.
fn open_session(
    forwarder: &Rc<RefCell<Forwarder>>,
    signals: &SharedSignals,
    policy: &[Rule],
    partitions: &[Partition],
    label: &Label,
    donated: Option<Donated>,
) -> Result<Client, u64> {
    let refused = |why: &str| {
        println!("partitions: session for {} refused: {why}", label.as_str());
        block::REFUSED
    };
    let donated = donated.ok_or(rt::interfaces::session::REFUSED_QUOTA)?;
    let rule = policy
        .iter()
        .find(|r| r.label == label.as_str())
        .ok_or_else(|| refused("no policy names it"))?;
    let part = *partitions
        .iter()
        .find(|p| p.number == rule.partition)
        .ok_or_else(|| refused("its partition is not on the disk"))?;
    let f = forwarder.borrow_mut();
    if f.holds(part.number) {
        return Err(refused("its partition is in use by another session"));
    }
    let window = f
        .windows
        .iter()
        .position(|used| !used)
        .ok_or_else(|| refused("no session window left"))?;
    let id = f.next_id;
    let info = BlockInfo {
        block_count: part.blocks,
        ..f.info
    };
    drop(f);
    let va = CLIENT_VA + window as u64 * STREAM_BYTES as u64;
    let on_signal = forwarder.clone();
    // SAFETY: window `window` is free (checked above) and taken now.
    let served = unsafe {
        Served::open(donated, signals, va, move |table| {
            on_signal.borrow_mut().submitted(table, id)
        })
    }
    .map_err(refused)?;
    let mut f = forwarder.borrow_mut();
    f.windows[window] = true;
    f.next_id += 1;
    f.held.push(part.number);
    println!(
        "partitions: session {id} for {}: partition {} ({} blocks from block {})",
        label.as_str(),
        part.number,
        part.blocks,
        part.first_lba
    );
    Ok(Client {
        id,
        window,
        part,
        info,
        served,
        forwarder: forwarder.clone(),
    })
}

/// A request on a client's session.
fn request(client: &mut Client, op: u64, words: Words) -> (MsgInfo, Words) {
    match op {
        block::INFO => rt::server::answer(block::OK, client.info.words()),
        block::STREAM => client.served.stream_reply(words[0]),
        _ => rt::server::answer(block::REFUSED, [0; 4]),
    }
}

/// A client's session: its partition and stream.
pub struct Client {
    id: u64,
    window: usize,
    part: Partition,
    info: BlockInfo,
    served: Served<SessionTable<Client>>,
    forwarder: Rc<RefCell<Forwarder>>,
}

impl Drop for Client {
    fn drop(&mut self) {
        let mut f = self.forwarder.borrow_mut();
        f.windows[self.window] = false;
        f.held.retain(|&n| n != self.part.number);
    }
}

/// The disk's stream, and what is in flight on it.
pub struct Forwarder {
    up: BlockClient,
    info: BlockInfo,
    /// Forwarded packets, in the order they were submitted: the disk
    /// stream's offset, the client's id and its packet.
    inflight: VecDeque<(u32, u64, Taken)>,
    /// Clients' packets to forward once the disk's session is back.
    waiting: Vec<(u64, Taken)>,
    /// The driver stopped: reconnect before anything else.
    gone: bool,
    windows: [bool; MAX_SESSIONS],
    /// The partitions open sessions hold.
    held: Vec<u32>,
    next_id: u64,
}

impl Forwarder {
    /// Whether an open session holds partition `number`.
    fn holds(&self, number: u32) -> bool {
        self.held.contains(&number)
    }

    /// Client `id` signalled: its batch checked, forwarded, completed and
    /// acknowledged; until its stream is armed again.
    pub fn submitted(&mut self, table: &mut SessionTable<Client>, id: u64) {
        loop {
            let Some(client) = find(table, id) else {
                return;
            };
            let batch = take(client);
            for taken in batch {
                self.forward(table, id, taken);
            }
            self.flush();
            while self.gone || !self.inflight.is_empty() {
                if self.gone {
                    if self.reconnect(table) {
                        continue;
                    }
                    break;
                }
                match self.up.next_ack(true) {
                    Ok(Some(ack)) => self.complete(table, ack),
                    Ok(None) => {}
                    Err(e) if e.provider_gone() => self.gone = true,
                    Err(e) => {
                        self.fail_all(table, &e);
                        break;
                    }
                }
            }
            let Some(client) = find(table, id) else {
                return;
            };
            let _ = client.served.publish();
            if !client.served.arm() {
                return;
            }
        }
    }

    /// Publishes the forwarded packets to the driver.
    fn flush(&mut self) {
        match self.up.flush() {
            Ok(()) => {}
            // (The driver's notification went with it.)
            Err(e) if BlockError::Packet(e).provider_gone() => self.gone = true,
            Err(e) => println!("partitions: the disk's stream: {e}"),
        }
    }

    /// The driver stopped: a fresh session and stream (waiting while init
    /// restarts the driver), and every packet that was in flight or
    /// waiting submitted again, in order. If the session cannot be had,
    /// they fail (`false`), and the next batch tries again.
    fn reconnect(&mut self, table: &mut SessionTable<Client>) -> bool {
        self.gone = false;
        let mut again: Vec<(u64, Taken)> =
            self.inflight.drain(..).map(|(_, id, t)| (id, t)).collect();
        again.append(&mut self.waiting);
        println!(
            "partitions: the disk's driver stopped with {} requests in flight; reconnecting",
            again.len()
        );
        if let Err(e) = self.up.reconnect() {
            println!("partitions: reconnecting to the disk failed: {e}; its requests fail");
            for (id, taken) in again {
                self.refuse(table, id, taken);
            }
            // Nothing of the old stream is touched again: the next batch
            // tries to reconnect first.
            self.gone = true;
            return false;
        }
        println!(
            "partitions: reconnected to the disk; {} requests submitted again",
            again.len()
        );
        for (id, taken) in again {
            self.forward(table, id, taken);
        }
        self.flush();
        true
    }

    /// Forwards client `id`'s checked packet `taken` to the disk (or
    /// keeps it for after the reconnect, when the driver is gone).
    fn forward(&mut self, table: &mut SessionTable<Client>, id: u64, taken: Taken) {
        if self.gone {
            return self.waiting.push((id, taken));
        }
        let p = taken.packet();
        let Some(client) = find(table, id) else {
            return;
        };
        // Checked against the partition's size: the sum stays inside it.
        let first = match p.op {
            block::OP_SYNC => Some(0),
            _ => u32::try_from(client.part.first_lba + u64::from(p.tag)).ok(),
        };
        let Some(first) = first else {
            return client.served.ack(taken, block::STATUS_RANGE);
        };
        let packet = loop {
            match self.up.alloc(p.len()) {
                Ok(packet) => break packet,
                Err(rt::stream::Error::BufferFull) => match self.up.next_ack(true) {
                    Ok(Some(ack)) => self.complete(table, ack),
                    Ok(None) => {}
                    Err(e) => return self.failed(table, id, taken, e),
                },
                Err(e) => return self.failed(table, id, taken, BlockError::Packet(e)),
            }
        };
        let Some(client) = find(table, id) else {
            let _ = self.up.release(packet);
            return;
        };
        if p.op == block::OP_WRITE {
            let copied = match (
                client.served.sink.payload(&taken),
                self.up.payload_mut(&packet),
            ) {
                (Ok(from), Ok(to)) if from.len() == to.len() => {
                    to.copy_from_slice(from);
                    true
                }
                _ => false,
            };
            if !copied {
                let _ = self.up.release(packet);
                return client.served.ack(taken, block::STATUS_IO);
            }
        }
        let mut packet = packet;
        packet.op = p.op;
        packet.tag = first;
        self.inflight.push_back((packet.offset(), id, taken));
        let error = loop {
            match self.up.submit(packet) {
                Ok(()) => return,
                // Full: publish, and take acknowledgements (or wait for
                // the driver to take packets) until a slot is free.
                Err(rt::stream::Error::RingFull) => {
                    let freed = self
                        .up
                        .flush()
                        .map_err(BlockError::Packet)
                        .and_then(|()| self.up.next_ack(false));
                    match freed {
                        Ok(Some(ack)) => self.complete(table, ack),
                        Ok(None) => {
                            if let Err(e) = self.up.wait_for_submit_space() {
                                break BlockError::Packet(e);
                            }
                        }
                        Err(e) => break e,
                    }
                }
                Err(e) => break BlockError::Packet(e),
            }
        };
        // Not submitted: the client's packet fails (or waits for the
        // driver's restart).
        if let Some(i) = self.inflight.iter().position(|e| e.0 == packet.offset()) {
            if let Some((_, id, taken)) = self.inflight.remove(i) {
                let _ = self.up.release(packet);
                self.failed(table, id, taken, error);
            }
        }
    }

    /// Client `id`'s `taken` could not be forwarded because of `error`:
    /// kept for after the reconnect if the driver is gone, else failed.
    fn failed(
        &mut self,
        table: &mut SessionTable<Client>,
        id: u64,
        taken: Taken,
        error: BlockError,
    ) {
        if error.provider_gone() {
            self.gone = true;
            self.waiting.push((id, taken));
        } else {
            self.refuse(table, id, taken);
        }
    }

    /// `taken` of client `id` fails with an I/O error.
    fn refuse(&mut self, table: &mut SessionTable<Client>, id: u64, taken: Taken) {
        if let Some(c) = find(table, id) {
            c.served.ack(taken, block::STATUS_IO);
        }
    }

    /// The disk acknowledged `ack`: the client's packet completed.
    fn complete(&mut self, table: &mut SessionTable<Client>, ack: Packet) {
        let Some(i) = self.inflight.iter().position(|e| e.0 == ack.offset()) else {
            let _ = self.up.release(ack);
            return;
        };
        let Some((_, id, taken)) = self.inflight.remove(i) else {
            return;
        };
        let mut status = ack.op;
        if let Some(c) = find(table, id) {
            if status == block::STATUS_OK && taken.packet().op == block::OP_READ {
                let copied = match (self.up.payload(&ack), c.served.sink.payload_mut(&taken)) {
                    (Ok(from), Ok(to)) if from.len() == to.len() => {
                        to.copy_from_slice(from);
                        true
                    }
                    _ => false,
                };
                if !copied {
                    status = block::STATUS_IO;
                }
            }
            c.served.ack(taken, status);
        }
        let _ = self.up.release(ack);
    }

    /// The disk's stream broke: everything in flight fails.
    fn fail_all(&mut self, table: &mut SessionTable<Client>, e: &BlockError) {
        println!("partitions: the disk's stream broke: {e}");
        for (_, id, taken) in core::mem::take(&mut self.inflight) {
            self.refuse(table, id, taken);
        }
    }
}

/// Takes client `c`'s submitted packets: the good ones returned in
/// order, the bad ones acknowledged with their refusal.
fn take(c: &mut Client) -> Vec<Taken> {
    let mut good = Vec::new();
    if c.served.broken() {
        return good;
    }
    loop {
        match c.served.sink.get() {
            Ok(Some(taken)) => match block::check(&taken.packet(), &c.info) {
                Ok(()) => good.push(taken),
                Err(status) => c.served.ack(taken, status),
            },
            Ok(None) => return good,
            Err(rt::stream::Error::Rejected(_)) => {}
            Err(e) => {
                println!("partitions: session {}: stream broken: {e}", c.id);
                c.served.set_broken();
                return good;
            }
        }
    }
}

/// The session of id `id`, if still open.
fn find(table: &mut SessionTable<Client>, id: u64) -> Option<&mut Client> {
    table.iter_mut().map(|(_, c)| c).find(|c| c.id == id)
}
