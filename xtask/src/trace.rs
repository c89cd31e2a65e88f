//! `cargo xtask trace SCENARIO [--seconds N]`: boots a scenario on the
//! kernel built with the `trace` feature, collects the kernel's event
//! rings from the serial console and writes them as a Chrome-trace JSON
//! that ui.perfetto.dev opens (`target/trace/SCENARIO.json`; the command
//! prints `trace: PATH`). docs/profiling.md says how to read it.
//!
//! **Collection.** The trace kernel dumps its rings as text lines
//! (`formats::trace`) on every way the machine ends: power-off when the
//! scenario is done, a panic or kernel exception, or `--seconds N` of
//! guest time (`pecan.trace=N` on the command line; the kernel powers off
//! with success then). The run is under `-icount shift=0`, where a TSC
//! tick is one instruction and one nanosecond of guest time: deterministic,
//! and the viewer's time axis is guest time. QEMU stopped by the wall-clock
//! `--timeout` dumps nothing: what was not printed is lost. The guest's
//! output is kept in `target/trace/SCENARIO.log`.
//!
//! **The JSON** (Chrome trace event format, "JSON Object Format"): one
//! process (pid 1, named after the scenario) with one thread track per
//! kernel thread (tid = the kernel's thread id), named by `TraceName`
//! (init names each component's thread as the scenario names the
//! component; root names init and its own children; the kernel names
//! root) or `thread N`; tid 0, `kernel (interrupts)`, holds device
//! interrupts and the notification signals they cause. Per thread: `X` slices `running` from each context
//! switch to it until the CPU's next switch or idle, or the end of the run; instant events (`i`,
//! thread scope) for sends, receives, replies, notifications, interrupts,
//! faults, thread start and exit and the user's markers (named by their
//! label); flow events (`s` → `f`) from each send to its receive and from
//! each reply to the caller's receive of it. `ts` is in microseconds as
//! the format wants: TSC / 1000 (under icount: instructions / 1000).
//!
//! [`check_schema`] is the format's rules as code (the host tests run it
//! on generated traces, the scenario test on a real one), and
//! [`check_round_trip`] finds one call → receive → reply → wake-up in a
//! trace (the scenario test `trace-ipc-round-trip`, docs/testing.md).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use formats::trace::{self as ft, Kind, Line, Record, SendKind};
use serde_json::{json, Map, Value};

use crate::accel::Accel;
use crate::qemu::{self, Captured, GuestExit, Machine};
use crate::system;
use crate::util::{display_path, workspace_root};

/// The options of `cargo xtask trace`.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// The scenario to boot: a name (scenarios/SCENARIO.toml) or the path
    /// of a scenario file ending in .toml.
    pub scenario: String,
    /// Dump the trace and power off after N seconds of guest time
    /// (default: when the scenario ends).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: Option<u64>,
    /// Stop QEMU after SECS seconds of wall-clock time (nothing is dumped
    /// then).
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub timeout: u64,
}

/// Runs `cargo xtask trace`; `Ok(true)` when a trace was written.
pub fn run(args: &TraceArgs) -> Result<bool> {
    let trace = collect(
        &args.scenario,
        args.seconds,
        Duration::from_secs(args.timeout),
    )?;
    println!(
        "==> {} threads, {} events{}; the guest: {}",
        trace.dump.names.len(),
        trace.dump.events.len(),
        if trace.dump.lost() > 0 {
            format!(" ({} oldest overwritten)", trace.dump.lost())
        } else {
            String::new()
        },
        describe(&trace.captured.exit)
    );
    println!("trace: {}", display_path(&trace.path));
    Ok(true)
}

/// How the guest ended, in words.
fn describe(exit: &Option<GuestExit>) -> String {
    exit.as_ref()
        .map_or("stopped by the timeout".to_string(), GuestExit::describe)
}

/// A collected trace.
pub struct Collected {
    /// Where the JSON was written.
    pub path: PathBuf,
    /// The guest's run (its serial output holds the dump).
    pub captured: Captured,
    pub dump: Dump,
}

/// Where the trace of `scenario` is written.
pub fn output_path(scenario: &str) -> PathBuf {
    workspace_root()
        .join("target")
        .join("trace")
        .join(format!("{scenario}.json"))
}

/// Boots `scenario_name` on the trace kernel (for `seconds` of guest time,
/// or until it ends), decodes the dump, writes the JSON (checked against
/// [`check_schema`]) and returns it all.
pub fn collect(scenario_name: &str, seconds: Option<u64>, timeout: Duration) -> Result<Collected> {
    let (scenario, hardware, system) = crate::run::prepare(scenario_name, None, None)?;
    let kernel = system::build_trace_kernel()?;
    let mut cmdline = scenario.cmdline.clone();
    if let Some(secs) = seconds {
        cmdline = format!("{cmdline} pecan.trace={secs}").trim().to_string();
    }
    let image = system::scenario_image(
        &system,
        &scenario,
        &cmdline,
        &format!("trace-{}", scenario.name),
        Some(hardware),
    )?;
    let mut machine = Machine::new(kernel, Some(image), cmdline, Accel::Tcg);
    machine.icount = true;
    machine.smp = hardware.smp;
    machine.memory_mib = hardware.memory_mib;
    // The scenario's disks, NICs and display, as `cargo xtask run` gives
    // them (fresh disk copies in target/trace/work/SCENARIO/).
    if !scenario.devices.is_empty() {
        let work = output_path(&scenario.name)
            .with_extension("")
            .parent()
            .map(|p| p.join("work").join(&scenario.name))
            .context("the trace directory")?;
        let _ = std::fs::remove_dir_all(&work);
        machine.devices = scenario.devices.prepare(&work)?.qemu_args();
    }
    println!("==> tracing scenario {}", scenario.name);
    println!("==> {}", machine.command_line());
    let captured = qemu::capture(&machine, timeout).context("running QEMU")?;
    // The guest's whole output, next to the trace.
    let log = output_path(&scenario.name).with_extension("log");
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let text = format!(
        "$ {}\n{}{}",
        machine.command_line(),
        captured.serial,
        captured.stderr
    );
    std::fs::write(&log, text).with_context(|| format!("writing {}", display_path(&log)))?;
    println!("==> the guest's output: {}", display_path(&log));
    let dump = Dump::parse(&captured.serial);
    if dump.cpus == 0 {
        let tail: Vec<&str> = captured.serial.lines().rev().take(15).collect();
        bail!(
            "no trace in the guest's output ({}); its last lines:\n{}",
            describe(&captured.exit),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    if !dump.complete {
        println!("warning: the trace dump is incomplete (the guest stopped while it was written)");
    }
    let json = to_chrome(&dump, &scenario.name);
    check_schema(&json).context("the trace does not follow the schema")?;
    let path = output_path(&scenario.name);
    let text = serde_json::to_vec(&json).context("encoding the trace")?;
    crate::util::write_atomically(&path, &text)?;
    Ok(Collected {
        path,
        captured,
        dump,
    })
}

/// A decoded dump.
#[derive(Debug, Default)]
pub struct Dump {
    /// CPUs (0: no `begin` line seen).
    pub cpus: u64,
    /// Thread names by id.
    pub names: BTreeMap<u64, String>,
    /// Every event: CPU, order in the dump, record.
    pub events: Vec<(u64, usize, Record)>,
    /// Records each CPU's ring overwrote.
    pub lost: BTreeMap<u64, u64>,
    /// Whether the `end` line came.
    pub complete: bool,
}

impl Dump {
    /// Decodes the dump lines in `serial` (other lines are skipped; a
    /// second dump would replace the first, but the kernel writes one).
    pub fn parse(serial: &str) -> Dump {
        let mut dump = Dump::default();
        for line in serial.lines() {
            match ft::parse(line) {
                Some(Line::Begin { cpus, .. }) => {
                    dump = Dump {
                        cpus,
                        ..Dump::default()
                    }
                }
                Some(Line::Name { id, name }) => {
                    let mut bytes = [0u8; ft::NAME_MAX];
                    if let Some(n) = ft::unhex(name, &mut bytes) {
                        let text = String::from_utf8_lossy(&bytes[..n]).into_owned();
                        dump.names.insert(id, text);
                    }
                }
                Some(Line::Event { cpu, record }) => {
                    let order = dump.events.len();
                    dump.events.push((cpu, order, record));
                }
                Some(Line::Lost { cpu, lost }) => {
                    dump.lost.insert(cpu, lost);
                }
                Some(Line::End) => dump.complete = true,
                None => {}
            }
        }
        dump
    }

    /// Records overwritten on all CPUs.
    pub fn lost(&self) -> u64 {
        self.lost.values().sum()
    }
}

/// The process all tracks belong to.
const PID: u64 = 1;

/// Microseconds (the format's unit) of TSC `tsc`: one tick is a
/// nanosecond of guest time under `-icount shift=0`.
fn micros(tsc: u64) -> f64 {
    tsc as f64 / 1000.0
}

/// The track name of thread `id`.
fn thread_name(names: &BTreeMap<u64, String>, id: u64) -> String {
    match names.get(&id) {
        Some(name) if !name.is_empty() => name.clone(),
        _ if id == 0 => "kernel (interrupts)".to_string(),
        _ => format!("thread {id}"),
    }
}

/// An event of the output with its place in time: TSC, then the order of
/// the record it came from, then the order it was made in.
struct Out {
    key: (u64, usize, usize),
    event: Value,
}

/// Turns a dump into a Chrome trace: see the module doc.
pub fn to_chrome(dump: &Dump, title: &str) -> Value {
    let mut events: Vec<&(u64, usize, Record)> = dump.events.iter().collect();
    events.sort_by_key(|(cpu, order, r)| (r.tsc, *cpu, *order));
    let mut out: Vec<Out> = Vec::new();
    let push = |out: &mut Vec<Out>, tsc: u64, order: usize, event: Value| {
        let n = out.len();
        out.push(Out {
            key: (tsc, order, n),
            event,
        });
    };
    let mut tids = BTreeSet::new();
    // The slice running on each CPU: thread, start, record order.
    let mut running: HashMap<u64, (u64, u64, usize)> = HashMap::new();
    let mut last_tsc: HashMap<u64, u64> = HashMap::new();
    // Sends waiting for their receive, by sender; replies by (server, caller).
    let mut sends: HashMap<u64, (u64, usize)> = HashMap::new();
    let mut replies: HashMap<(u64, u64), (u64, usize)> = HashMap::new();
    let mut flow_id = 0u64;
    let slice = |thread: u64, start: u64, end: u64, cpu: u64| {
        json!({
            "ph": "X", "name": "running", "cat": "sched", "pid": PID, "tid": thread,
            "ts": micros(start), "dur": micros(end.saturating_sub(start)),
            "args": { "cpu": cpu },
        })
    };
    for &&(cpu, order, r) in &events {
        last_tsc.insert(cpu, r.tsc);
        let kind = Kind::from_raw(r.kind);
        if matches!(kind, Some(Kind::Run | Kind::Idle | Kind::Dump)) {
            if let Some((thread, start, at)) = running.remove(&cpu) {
                push(&mut out, start, at, slice(thread, start, r.tsc, cpu));
            }
            if kind == Some(Kind::Run) {
                // A thread moved to this CPU before its old CPU recorded
                // its next switch: its slice there ends here (a track's
                // slices must not overlap).
                let elsewhere: Vec<u64> = running
                    .iter()
                    .filter(|(_, (thread, _, _))| *thread == r.thread)
                    .map(|(&other, _)| other)
                    .collect();
                for other in elsewhere {
                    if let Some((thread, start, at)) = running.remove(&other) {
                        push(&mut out, start, at, slice(thread, start, r.tsc, other));
                    }
                }
                tids.insert(r.thread);
                running.insert(cpu, (r.thread, r.tsc, order));
            }
            continue;
        }
        tids.insert(r.thread);
        let [a0, a1, a2, a3] = r.args;
        let send_kind = |raw: u64| SendKind::from_raw(raw).map_or("?", |k| k.name());
        let (name, cat, args) = match kind {
            Some(Kind::Send) => (
                send_kind(a2).to_string(),
                "ipc",
                json!({ "endpoint": format!("{a0:#x}"), "badge": a1, "label": a3 }),
            ),
            Some(Kind::Receive) => (
                if a2 == SendKind::Reply as u64 {
                    "receive reply".to_string()
                } else {
                    "receive".to_string()
                },
                "ipc",
                json!({ "from": a0, "from_name": thread_name(&dump.names, a0), "badge": a1,
                        "kind": send_kind(a2), "label": a3 }),
            ),
            Some(Kind::Reply) => (
                "reply".to_string(),
                "ipc",
                json!({ "to": a0, "to_name": thread_name(&dump.names, a0) }),
            ),
            Some(Kind::Signal) => (
                "signal".to_string(),
                "notification",
                json!({ "notification": format!("{a0:#x}"), "bits": a1 }),
            ),
            Some(Kind::NotifyWake) => (
                "notification wake".to_string(),
                "notification",
                json!({ "notification": format!("{a0:#x}"), "word": a1 }),
            ),
            // An MSI arrives on its vector (0x80 and up), a line on its GSI.
            Some(Kind::Irq) if a0 >= 0x80 => (
                "msi".to_string(),
                "irq",
                json!({ "vector": format!("{a0:#x}"), "bound": a1 != 0, "interrupted": a2,
                        "interrupted_name": thread_name(&dump.names, a2) }),
            ),
            Some(Kind::Irq) => (
                "irq".to_string(),
                "irq",
                json!({ "gsi": a0, "bound": a1 != 0, "interrupted": a2,
                        "interrupted_name": thread_name(&dump.names, a2) }),
            ),
            Some(Kind::IrqAck) if a0 >= 0x1_0000 => (
                "msi ack".to_string(),
                "irq",
                json!({ "vector": format!("{:#x}", a0 - 0x1_0000 + 0x80) }),
            ),
            Some(Kind::IrqAck) => ("irq ack".to_string(), "irq", json!({ "gsi": a0 })),
            Some(Kind::Fault) => (
                "fault".to_string(),
                "fault",
                json!({ "label": a0, "address_or_vector": format!("{a1:#x}"),
                        "rip": format!("{a2:#x}") }),
            ),
            Some(Kind::ThreadStart) => (
                "thread start".to_string(),
                "thread",
                json!({ "rip": format!("{a0:#x}"), "by": a1 }),
            ),
            Some(Kind::ThreadExit) => (
                "thread exit".to_string(),
                "thread",
                json!({ "code": a0 as i64 }),
            ),
            Some(Kind::Mark) => {
                let mut label = [0u8; ft::MARK_MAX];
                let n = ft::mark_label(&r.args, &mut label);
                let text = String::from_utf8_lossy(&label[..n]).into_owned();
                (
                    if text.is_empty() {
                        "mark".to_string()
                    } else {
                        text
                    },
                    "mark",
                    json!({ "value": a3 }),
                )
            }
            Some(Kind::Run | Kind::Idle | Kind::Dump) | None => (
                format!("kind {}", r.kind),
                "unknown",
                json!({ "args": [a0, a1, a2, a3] }),
            ),
        };
        push(
            &mut out,
            r.tsc,
            order,
            json!({ "ph": "i", "s": "t", "name": name, "cat": cat, "pid": PID,
                    "tid": r.thread, "ts": micros(r.tsc), "args": args }),
        );
        // Flows: send → receive, reply → the caller's receive.
        let flow_end = match kind {
            Some(Kind::Send) => {
                sends.insert(r.thread, (r.tsc, order));
                None
            }
            Some(Kind::Reply) => {
                replies.insert((r.thread, a0), (r.tsc, order));
                None
            }
            Some(Kind::Receive) if a2 == SendKind::Reply as u64 => {
                replies.remove(&(a0, r.thread)).map(|start| (a0, start))
            }
            Some(Kind::Receive) => sends.remove(&a0).map(|start| (a0, start)),
            _ => None,
        };
        if let Some((from, (start, start_order))) = flow_end {
            flow_id += 1;
            let name = if a2 == SendKind::Reply as u64 {
                "reply"
            } else {
                "message"
            };
            push(
                &mut out,
                start,
                start_order,
                json!({ "ph": "s", "id": flow_id, "name": name, "cat": "ipc", "pid": PID,
                        "tid": from, "ts": micros(start) }),
            );
            push(
                &mut out,
                r.tsc,
                order,
                json!({ "ph": "f", "bp": "e", "id": flow_id, "name": name, "cat": "ipc",
                        "pid": PID, "tid": r.thread, "ts": micros(r.tsc) }),
            );
        }
    }
    // Slices still open end with the run: the dump's record, or the last
    // record of any CPU (a dump cut short).
    let end = last_tsc.values().copied().max().unwrap_or(0);
    for (cpu, (thread, start, at)) in running {
        push(
            &mut out,
            start,
            at,
            slice(thread, start, end.max(start), cpu),
        );
    }
    out.sort_by_key(|o| o.key);

    let mut trace_events = vec![json!({
        "ph": "M", "name": "process_name", "pid": PID, "tid": 0,
        "args": { "name": format!("Pecan: {title}") },
    })];
    for &tid in &tids {
        trace_events.push(json!({
            "ph": "M", "name": "thread_name", "pid": PID, "tid": tid,
            "args": { "name": thread_name(&dump.names, tid) },
        }));
        // Tracks in thread-id order: root, init, then the components.
        trace_events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid,
            "args": { "sort_index": tid },
        }));
    }
    trace_events.extend(out.into_iter().map(|o| o.event));
    json!({
        "traceEvents": trace_events,
        "displayTimeUnit": "ns",
        "otherData": {
            "scenario": title,
            "clock": "TSC / 1000 = microseconds; under -icount shift=0 one tick is one instruction and one ns of guest time",
            "cpus": dump.cpus,
            "records_lost": dump.lost(),
            "complete": dump.complete,
        },
    })
}

/// The field `key` of `event` as what `want` says, or an error naming the
/// event.
fn field<'a>(event: &'a Value, key: &str, i: usize) -> Result<&'a Value> {
    event
        .get(key)
        .with_context(|| format!("traceEvents[{i}] has no `{key}`: {event}"))
}

fn number(event: &Value, key: &str, i: usize) -> Result<f64> {
    let v = field(event, key, i)?;
    match v.as_f64() {
        Some(x) if x >= 0.0 && x.is_finite() => Ok(x),
        _ => bail!("traceEvents[{i}].{key} is not a non-negative number: {event}"),
    }
}

fn text<'a>(event: &'a Value, key: &str, i: usize) -> Result<&'a str> {
    match field(event, key, i)?.as_str() {
        Some(s) if !s.is_empty() => Ok(s),
        _ => bail!("traceEvents[{i}].{key} is not a non-empty string: {event}"),
    }
}

fn integer(event: &Value, key: &str, i: usize) -> Result<u64> {
    field(event, key, i)?
        .as_u64()
        .with_context(|| format!("traceEvents[{i}].{key} is not an unsigned integer: {event}"))
}

/// Checks `trace` against the schema of what we write (a subset of the
/// Chrome trace event format that ui.perfetto.dev opens): an object with a
/// `traceEvents` array of objects; each has `ph` (`M`, `X`, `i`, `s`,
/// `f`), a non-empty `name`, integer `pid` and `tid`; all but `M` have a
/// number `ts` ≥ 0 and a non-empty `cat`; `X` a `dur` ≥ 0; `i` a scope
/// `s` of `t`, `p` or `g`; `s`/`f` an integer `id`, each id exactly one
/// `s` and then one `f` not earlier; `M` is `process_name`,
/// `thread_name` (with a non-empty `args.name`) or `thread_sort_index`
/// (with an integer `args.sort_index`). Per track (pid, tid) the `ts` of
/// the events do not decrease in array order, its `X` slices do not
/// overlap, and every track with events has a `thread_name` and its
/// process a `process_name`.
pub fn check_schema(trace: &Value) -> Result<()> {
    let events = trace
        .get("traceEvents")
        .and_then(Value::as_array)
        .context("no `traceEvents` array")?;
    if events.is_empty() {
        bail!("`traceEvents` is empty");
    }
    let mut named_threads = BTreeSet::new();
    let mut named_processes = BTreeSet::new();
    let mut tracks = BTreeSet::new();
    let mut last_ts: HashMap<(u64, u64), f64> = HashMap::new();
    // Where each track's last slice ends.
    let mut slice_end: HashMap<(u64, u64), f64> = HashMap::new();
    let mut flows: HashMap<u64, (Option<f64>, Option<f64>)> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if !e.is_object() {
            bail!("traceEvents[{i}] is not an object");
        }
        let ph = text(e, "ph", i)?;
        text(e, "name", i)?;
        let (pid, tid) = (integer(e, "pid", i)?, integer(e, "tid", i)?);
        if ph == "M" {
            let args = field(e, "args", i)?;
            match text(e, "name", i)? {
                "process_name" => {
                    text(args, "name", i)?;
                    named_processes.insert(pid);
                }
                "thread_name" => {
                    text(args, "name", i)?;
                    named_threads.insert((pid, tid));
                }
                "thread_sort_index" => {
                    integer(args, "sort_index", i)?;
                }
                other => bail!("traceEvents[{i}]: unknown metadata `{other}`"),
            }
            continue;
        }
        let ts = number(e, "ts", i)?;
        text(e, "cat", i)?;
        match ph {
            "X" => {
                let dur = number(e, "dur", i)?;
                let end = slice_end.entry((pid, tid)).or_insert(0.0);
                // Within a tenth of a tick (ts + dur is rounded).
                if ts + 1e-4 < *end {
                    bail!(
                        "traceEvents[{i}]: slice at {ts} overlaps the one before, ending at {end}"
                    );
                }
                *end = ts + dur;
            }
            "i" => {
                let scope = text(e, "s", i)?;
                if !matches!(scope, "t" | "p" | "g") {
                    bail!("traceEvents[{i}]: instant scope `{scope}` is not t, p or g");
                }
            }
            "s" | "f" => {
                let id = integer(e, "id", i)?;
                let flow = flows.entry(id).or_default();
                let place = if ph == "s" { &mut flow.0 } else { &mut flow.1 };
                if place.replace(ts).is_some() {
                    bail!("traceEvents[{i}]: flow {id} has two `{ph}` events");
                }
                if ph == "f" && flow.0.is_none_or(|start| start > ts) {
                    bail!("traceEvents[{i}]: flow {id} ends before it starts");
                }
            }
            other => bail!("traceEvents[{i}]: unknown ph `{other}`"),
        }
        tracks.insert((pid, tid));
        let last = last_ts.entry((pid, tid)).or_insert(ts);
        if ts < *last {
            bail!(
                "traceEvents[{i}]: ts {ts} is before {} on track pid {pid} tid {tid}",
                *last
            );
        }
        *last = ts;
    }
    if let Some((id, _)) = flows.iter().find(|(_, (s, f))| s.is_none() || f.is_none()) {
        bail!("flow {id} has no start or no end");
    }
    for (pid, tid) in tracks {
        if !named_threads.contains(&(pid, tid)) {
            bail!("track pid {pid} tid {tid} has no thread_name");
        }
        if !named_processes.contains(&pid) {
            bail!("process {pid} has no process_name");
        }
    }
    Ok(())
}

/// The instant events of `trace` in array order.
fn instants(trace: &Value) -> Vec<&Map<String, Value>> {
    trace["traceEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .filter(|e| e.get("ph").and_then(Value::as_str) == Some("i"))
        .collect()
}

/// The tid of the track named `name`.
fn tid_named(trace: &Value, name: &str) -> Result<u64> {
    trace["traceEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == name)
        .and_then(|e| e["tid"].as_u64())
        .with_context(|| format!("no track is named `{name}`"))
}

/// Checks that `trace` holds, in this order, one IPC round trip of thread
/// `client` with thread `server` with badge `badge`: `client` marks
/// `call server`, calls (badge), `server` receives the call from `client`
/// with that badge, replies to `client`, `client` receives the reply and
/// then runs again (a `running` slice from then on) and marks `answered`
/// with the answer `answer`; and a flow joins the call to its receive.
pub fn check_round_trip(
    trace: &Value,
    client: &str,
    server: &str,
    badge: u64,
    answer: u64,
) -> Result<()> {
    let (c, s) = (tid_named(trace, client)?, tid_named(trace, server)?);
    let all = instants(trace);
    let arg = |e: &Map<String, Value>, k: &str| e["args"][k].clone();
    type Step<'a> = (&'a str, Box<dyn Fn(&Map<String, Value>) -> bool + 'a>);
    let steps: Vec<Step> = vec![
        (
            "the client's mark `call server`",
            Box::new(|e| e["tid"] == c && e["name"] == "call server"),
        ),
        (
            "the client's call with the badge",
            Box::new(|e| e["tid"] == c && e["name"] == "call" && arg(e, "badge") == badge),
        ),
        (
            "the server's receive of the call",
            Box::new(|e| {
                e["tid"] == s
                    && e["name"] == "receive"
                    && arg(e, "from") == c
                    && arg(e, "badge") == badge
                    && arg(e, "kind") == "call"
            }),
        ),
        (
            "the server's reply to the client",
            Box::new(|e| e["tid"] == s && e["name"] == "reply" && arg(e, "to") == c),
        ),
        (
            "the client's receive of the reply",
            Box::new(|e| e["tid"] == c && e["name"] == "receive reply" && arg(e, "from") == s),
        ),
        (
            "the client's mark `answered` with the answer",
            Box::new(|e| e["tid"] == c && e["name"] == "answered" && arg(e, "value") == answer),
        ),
    ];
    let mut at = 0;
    let mut times = Vec::new();
    for (what, matches) in &steps {
        let found = all[at..].iter().position(|e| matches(e));
        let Some(offset) = found else {
            bail!(
                "{what} is missing (or out of order) after {} of the round trip's steps",
                times.len()
            );
        };
        times.push(all[at + offset]["ts"].as_f64().unwrap_or(-1.0));
        at += offset + 1;
    }
    // The client wakes: a running slice of it starts between its receive
    // of the reply and its mark.
    let (reply_ts, mark_ts) = (times[4], times[5]);
    let events = trace["traceEvents"].as_array().context("no traceEvents")?;
    let wakes = events.iter().any(|e| {
        e["ph"] == "X"
            && e["tid"] == c
            && e["ts"]
                .as_f64()
                .is_some_and(|t| t >= reply_ts && t <= mark_ts)
    });
    if !wakes {
        bail!("the client does not run between its receive of the reply and its mark");
    }
    // A flow from the call (its ts, the client's track) to the server.
    let call_ts = times[1];
    let flow = events
        .iter()
        .find(|e| e["ph"] == "s" && e["tid"] == c && e["ts"].as_f64() == Some(call_ts))
        .and_then(|e| e["id"].as_u64());
    let joined = flow.is_some_and(|id| {
        events
            .iter()
            .any(|e| e["ph"] == "f" && e["id"] == id && e["tid"] == s)
    });
    if !joined {
        bail!("no flow joins the client's call to the server's receive");
    }
    Ok(())
}

/// The scenario test `trace-ipc-round-trip` (docs/testing.md): `cargo
/// xtask trace trace-ping`'s path, then its JSON read back from the file,
/// checked against the schema, and the client's round trip found in it
/// with the badge and answer the client printed.
pub fn round_trip_test() -> Result<()> {
    let trace = collect("trace-ping", None, Duration::from_secs(120))?;
    let checked = check_collected(&trace);
    // The serial log of a failure, like the other scenario tests'.
    let log = workspace_root()
        .join("target")
        .join("test-logs")
        .join("trace-ipc-round-trip.log");
    if checked.is_err() {
        let _ = std::fs::create_dir_all(log.parent().unwrap_or(&log));
        if std::fs::write(&log, &trace.captured.serial).is_ok() {
            println!("    serial log: {}", display_path(&log));
        }
    } else {
        let _ = std::fs::remove_file(&log);
    }
    checked
}

/// The checks of [`round_trip_test`] on a collected trace.
fn check_collected(trace: &Collected) -> Result<()> {
    if trace.captured.exit != Some(GuestExit::Success) {
        bail!(
            "the guest did not end with success: {}",
            describe(&trace.captured.exit)
        );
    }
    let printed = regex::Regex::new(r"hello: the server answered (\d+), my badge is (\d+)")
        .expect("a valid regex")
        .captures(&trace.captured.serial)
        .context("the client did not print its answer and badge")?;
    let (answer, badge) = (printed[1].parse()?, printed[2].parse()?);
    let text = std::fs::read_to_string(&trace.path)
        .with_context(|| format!("reading {}", display_path(&trace.path)))?;
    let json: Value = serde_json::from_str(&text).context("the trace is not JSON")?;
    check_schema(&json)?;
    check_round_trip(&json, "client", "server", badge, answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump of one round trip on one CPU, as the kernel writes it: client
    /// 5 marks and calls server 4 (badge 2), the server receives, replies
    /// and waits, the client runs, marks and exits.
    fn round_trip_dump() -> String {
        let ev = |tsc: u64, thread: u64, kind: Kind, args: [u64; 4]| {
            Line::Event {
                cpu: 0,
                record: Record {
                    tsc,
                    thread,
                    kind: kind as u64,
                    args,
                },
            }
            .to_string()
        };
        let call: [u64; 3] = ft::pack_label(b"call server");
        let answered: [u64; 3] = ft::pack_label(b"answered");
        let (call_k, reply_k) = (SendKind::Call as u64, SendKind::Reply as u64);
        [
            "Pecan 0.1.0 microkernel".to_string(),
            Line::Begin {
                cpus: 1,
                ring: 8192,
            }
            .to_string(),
            Line::Name {
                id: 4,
                name: "server",
            }
            .to_string(),
            Line::Name {
                id: 5,
                name: "client",
            }
            .to_string(),
            ev(100, 4, Kind::Run, [0; 4]),
            ev(110, 4, Kind::Receive, [0; 4]),
            ev(120, 5, Kind::Run, [4, 0, 0, 0]),
            ev(130, 5, Kind::Mark, [call[0], call[1], call[2], 41]),
            ev(140, 5, Kind::Send, [0x1000, 2, call_k, 1]),
            ev(141, 4, Kind::Receive, [5, 2, call_k, 1]),
            ev(150, 4, Kind::Run, [5, 0, 0, 0]),
            ev(160, 4, Kind::Reply, [5, 0, 0, 0]),
            ev(161, 5, Kind::Receive, [4, 0, reply_k, 1]),
            ev(170, 5, Kind::Run, [4, 0, 0, 0]),
            ev(
                180,
                5,
                Kind::Mark,
                [answered[0], answered[1], answered[2], 42],
            ),
            ev(190, 5, Kind::ThreadExit, [0; 4]),
            ev(200, 0, Kind::Idle, [0; 4]),
            Line::Lost { cpu: 0, lost: 0 }.to_string(),
            Line::End.to_string(),
        ]
        .join("\r\n")
    }

    #[test]
    fn a_dump_decodes_and_becomes_a_trace_that_follows_the_schema() {
        let dump = Dump::parse(&round_trip_dump());
        assert!(dump.complete);
        assert_eq!(dump.cpus, 1);
        assert_eq!(dump.names.get(&5).map(String::as_str), Some("client"));
        assert_eq!(dump.events.len(), 13);
        let trace = to_chrome(&dump, "test");
        check_schema(&trace).unwrap();
        check_round_trip(&trace, "client", "server", 2, 42).unwrap();
        // Tracks: tid 0 has no events but the idle record; 4 and 5 named.
        assert_eq!(tid_named(&trace, "server").unwrap(), 4);
        // Slices: server 100..120, client 120..150, server 150..170,
        // client 170..200.
        let slices: Vec<(u64, f64, f64)> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                (
                    e["tid"].as_u64().unwrap(),
                    e["ts"].as_f64().unwrap(),
                    e["dur"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            slices,
            [
                (4, 0.1, 0.02),
                (5, 0.12, 0.03),
                (4, 0.15, 0.02),
                (5, 0.17, 0.03)
            ]
        );
        // Two flows: the call and the reply.
        let flows = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "s")
            .count();
        assert_eq!(flows, 2);
    }

    #[test]
    fn a_round_trip_out_of_order_or_with_another_badge_is_not_found() {
        let trace = to_chrome(&Dump::parse(&round_trip_dump()), "test");
        let err = check_round_trip(&trace, "client", "server", 3, 42).unwrap_err();
        assert!(err.to_string().contains("call with the badge"), "{err}");
        let err = check_round_trip(&trace, "client", "server", 2, 43).unwrap_err();
        assert!(err.to_string().contains("answered"), "{err}");
        assert!(check_round_trip(&trace, "client", "nobody", 2, 42).is_err());
        // The reply recorded before the call: not a round trip.
        let swapped = round_trip_dump()
            .replace("ev 0 a0 4 5", "ev 0 8b 4 5")
            .replace("ev 0 a1 5 4", "ev 0 8c 5 4");
        let trace = to_chrome(&Dump::parse(&swapped), "test");
        assert!(check_round_trip(&trace, "client", "server", 2, 42).is_err());
    }

    #[test]
    fn the_schema_refuses_what_perfetto_would_not_read() {
        let good = to_chrome(&Dump::parse(&round_trip_dump()), "test");
        check_schema(&good).unwrap();
        type Breaks = Box<dyn Fn(&mut Value)>;
        let broken: Vec<(&str, Breaks)> = vec![
            ("no traceEvents", Box::new(|t| t["traceEvents"] = json!({}))),
            ("empty", Box::new(|t| t["traceEvents"] = json!([]))),
            (
                "a track without a name",
                Box::new(|t| {
                    let events = t["traceEvents"].as_array_mut().unwrap();
                    events.retain(|e| !(e["name"] == "thread_name" && e["tid"] == 5));
                }),
            ),
            (
                "no process name",
                Box::new(|t| {
                    let events = t["traceEvents"].as_array_mut().unwrap();
                    events.retain(|e| e["name"] != "process_name");
                }),
            ),
            (
                "time going backwards on a track",
                Box::new(|t| {
                    let events = t["traceEvents"].as_array_mut().unwrap();
                    let last = events.iter().rposition(|e| e["tid"] == 5).unwrap();
                    events[last]["ts"] = json!(0.0);
                }),
            ),
            (
                "overlapping slices on a track",
                Box::new(|t| {
                    let events = t["traceEvents"].as_array_mut().unwrap();
                    let i = events.iter().position(|e| e["ph"] == "X").unwrap();
                    events[i]["dur"] = json!(1000.0);
                }),
            ),
            (
                "an unknown ph",
                Box::new(|t| t["traceEvents"][1]["ph"] = json!("Q")),
            ),
            (
                "a string ts",
                Box::new(|t| {
                    let events = t["traceEvents"].as_array_mut().unwrap();
                    let i = events.iter().position(|e| e["ph"] == "i").unwrap();
                    events[i]["ts"] = json!("1");
                }),
            ),
            (
                "a slice without dur",
                Box::new(|t| {
                    let events = t["traceEvents"].as_array_mut().unwrap();
                    let i = events.iter().position(|e| e["ph"] == "X").unwrap();
                    events[i].as_object_mut().unwrap().remove("dur");
                }),
            ),
            (
                "a flow without its end",
                Box::new(|t| {
                    let events = t["traceEvents"].as_array_mut().unwrap();
                    let i = events.iter().position(|e| e["ph"] == "f").unwrap();
                    events.remove(i);
                }),
            ),
            (
                "an instant without a scope",
                Box::new(|t| {
                    let events = t["traceEvents"].as_array_mut().unwrap();
                    let i = events.iter().position(|e| e["ph"] == "i").unwrap();
                    events[i].as_object_mut().unwrap().remove("s");
                }),
            ),
        ];
        for (what, breaks) in broken {
            let mut trace = good.clone();
            breaks(&mut trace);
            assert!(check_schema(&trace).is_err(), "{what} was accepted");
        }
    }

    #[test]
    fn a_thread_that_moves_before_its_old_cpu_switches_has_no_overlapping_slices() {
        let run = |cpu: u64, tsc: u64, thread: u64| {
            let record = Record {
                tsc,
                thread,
                kind: Kind::Run as u64,
                args: [0; 4],
            };
            Line::Event { cpu, record }.to_string()
        };
        // Thread 7 on CPU 0 from 10, on CPU 1 from 20; CPU 0 records its
        // switch to thread 8 only at 30; CPU 1 ends at 40.
        let lines = [
            Line::Begin { cpus: 2, ring: 16 }.to_string(),
            run(0, 10, 7),
            run(1, 20, 7),
            run(0, 30, 8),
            run(1, 40, 9),
            Line::End.to_string(),
        ];
        let trace = to_chrome(&Dump::parse(&lines.join("\n")), "moves");
        check_schema(&trace).unwrap();
        let slices: Vec<(u64, f64, f64)> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"] == 7)
            .map(|e| {
                let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
                (e["args"]["cpu"].as_u64().unwrap(), ts, ts + dur)
            })
            .collect();
        assert_eq!(slices, [(0, 0.01, 0.02), (1, 0.02, 0.04)]);
    }

    #[test]
    fn a_full_ring_keeps_its_newest_records_and_unnamed_threads_get_a_track() {
        let mut lines = vec![Line::Begin { cpus: 2, ring: 4 }.to_string()];
        for (cpu, thread) in [(0, 9), (1, 11)] {
            for tsc in [10, 20] {
                let record = Record {
                    tsc: tsc + cpu,
                    thread,
                    kind: Kind::Run as u64,
                    args: [0; 4],
                };
                lines.push(Line::Event { cpu, record }.to_string());
            }
            let record = Record {
                tsc: 30,
                thread,
                kind: 99,
                args: [1, 2, 3, 4],
            };
            lines.push(Line::Event { cpu, record }.to_string());
            lines.push(Line::Lost { cpu, lost: 5 }.to_string());
        }
        // Cut short: no `end`.
        let dump = Dump::parse(&lines.join("\n"));
        assert!(!dump.complete);
        assert_eq!(dump.lost(), 10);
        let trace = to_chrome(&dump, "cut");
        check_schema(&trace).unwrap();
        assert_eq!(tid_named(&trace, "thread 11").unwrap(), 11);
        let unknown = instants(&trace)
            .into_iter()
            .filter(|e| e["name"] == "kind 99")
            .count();
        assert_eq!(unknown, 2);
    }
}
