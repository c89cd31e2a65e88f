//! The component list of a scenario: the `[[component]]` tables and
//! `parent_provides` as written (with the places of their values), and the
//! checker that turns them into a [`Spec`] for the config ROM
//! (`ucore::config`), or into errors that each name the component, the key
//! and the place. The format and its rules are in `docs/scenarios.md`;
//! `crate::scenario` reads the file and turns places into `file:line:col`.
//!
//! Everything here is pure: the components that exist and the machine are
//! handed in.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;
use ucore::config::{
    self as rom, valid_caps, valid_name, valid_service, ComponentSpec, CpuSet, Device, OwnCaps,
    Restart, RouteSpec, SharedEndpoint, Spec, ValueBuf,
};

use crate::components::{INIT, ROOT};

/// The route target that means the parent.
pub const PARENT: &str = "parent";

/// The machine a scenario runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    pub smp: u32,
    pub memory_mib: u32,
}

/// A `[[component]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawComponent {
    name: Spanned<String>,
    binary: Option<Spanned<String>>,
    ram_mib: Spanned<u32>,
    caps: Spanned<u32>,
    priority: Option<Spanned<u32>>,
    cpu: Option<Spanned<u32>>,
    cpus: Option<Spanned<Vec<Spanned<u32>>>>,
    #[serde(default)]
    provides: Vec<Spanned<String>>,
    restart: Option<Spanned<RawRestart>>,
    #[serde(default)]
    routes: BTreeMap<Spanned<String>, Spanned<String>>,
    config: Option<Spanned<RawValue>>,
    #[serde(default)]
    io_ports: Vec<Spanned<RawPorts>>,
    #[serde(default)]
    irqs: Vec<Spanned<u32>>,
    #[serde(default)]
    own: Vec<Spanned<String>>,
    shared_endpoint: Option<Spanned<String>>,
    /// Whether a component with a Reconfig session may have init kill it
    /// (`ucore::config::FLAG_KILLABLE`).
    killable: Option<Spanned<bool>>,
    platform: Option<Spanned<bool>>,
    #[serde(default)]
    devices: Vec<Spanned<RawPciDevice>>,
    /// The partition a client of the partition service gets (xtask's
    /// business only: it becomes that service's `policy`, not part of the
    /// component's record).
    partition: Option<Spanned<u32>>,
}

/// An entry of `devices`: `{ pci = "1af4:1042" }` (`pci::DeviceMatch`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPciDevice {
    pci: Spanned<String>,
}

/// An entry of `io_ports`: `{ base = 0x40, count = 4 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPorts {
    base: Spanned<u32>,
    count: Spanned<u32>,
}

/// `restart` as written: `"never"` or a table.
#[derive(Debug)]
pub enum RawRestart {
    Word(String),
    Table(RawRestartTable),
}

/// `restart = { policy = ..., max = ..., backoff_ms = ... }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRestartTable {
    policy: Spanned<String>,
    max: Option<Spanned<u32>>,
    backoff_ms: Option<Spanned<u32>>,
}

impl<'de> Deserialize<'de> for RawRestart {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct RestartVisitor;
        impl<'de> Visitor<'de> for RestartVisitor {
            type Value = RawRestart;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"never\" or a table { policy = ..., max = ..., backoff_ms = ... }")
            }
            fn visit_str<E>(self, v: &str) -> Result<RawRestart, E> {
                Ok(RawRestart::Word(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawRestart, A::Error> {
                RawRestartTable::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawRestart::Table)
            }
        }
        d.deserialize_any(RestartVisitor)
    }
}

/// A config value as written, with the places of nested values.
#[derive(Debug)]
pub enum RawValue {
    Bool(bool),
    Integer(i64),
    Float(f64),
    String(String),
    Datetime,
    Array(Vec<Spanned<RawValue>>),
    /// Keys in the order toml gives them (sorted).
    Table(Vec<(String, Spanned<RawValue>)>),
}

/// The key toml uses for a date or time inside its map representation.
const TOML_DATETIME: &str = "$__toml_private_datetime";

impl<'de> Deserialize<'de> for RawValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ValueVisitor;
        impl<'de> Visitor<'de> for ValueVisitor {
            type Value = RawValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a TOML value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<RawValue, E> {
                Ok(RawValue::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<RawValue, E> {
                Ok(RawValue::Integer(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawValue, E> {
                i64::try_from(v)
                    .map(RawValue::Integer)
                    .map_err(|_| E::custom("integer does not fit 64 signed bits"))
            }
            fn visit_f64<E>(self, v: f64) -> Result<RawValue, E> {
                Ok(RawValue::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<RawValue, E> {
                Ok(RawValue::String(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<RawValue, E> {
                Ok(RawValue::String(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawValue, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(RawValue::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawValue, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if key == TOML_DATETIME {
                        map.next_value::<de::IgnoredAny>()?;
                        return Ok(RawValue::Datetime);
                    }
                    entries.push((key, map.next_value()?));
                }
                Ok(RawValue::Table(entries))
            }
        }
        d.deserialize_any(ValueVisitor)
    }
}

/// One error: where (a byte range of the file) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diag {
    pub span: Range<usize>,
    pub message: String,
}

/// The errors found so far.
struct Diags(Vec<Diag>);

impl Diags {
    fn push(&mut self, span: Range<usize>, message: String) {
        self.0.push(Diag { span, message });
    }
}

/// `component "NAME": `.
fn who(c: &RawComponent) -> String {
    format!("component \"{}\": ", c.name.get_ref())
}

/// Checks the components (and `parent_provides`) of the file whose text is
/// `text` against the components that exist (`binaries`) and `machine`;
/// the config to encode, or every error found, in file order.
pub fn check(
    text: &str,
    parent_provides: &[Spanned<String>],
    components: &[Spanned<RawComponent>],
    binaries: &[String],
    machine: Machine,
) -> Result<Spec, Vec<Diag>> {
    let mut diags = Diags(Vec::new());
    let lines = crate::tomlfile::LineIndex::new(text);
    let mut parent = Vec::new();
    for service in parent_provides {
        let name = service.get_ref();
        if !valid_service(name) {
            diags.push(
                service.span(),
                format!("parent_provides: {}", bad_service(name)),
            );
        } else if parent.contains(name) {
            diags.push(
                service.span(),
                format!("parent_provides: {name} is listed twice"),
            );
        } else {
            parent.push(name.clone());
        }
    }
    if let Some(extra) = components.get(rom::MAX_COMPONENTS) {
        diags.push(
            extra.span(),
            format!(
                "{}a scenario has at most {} components",
                who(extra.get_ref()),
                rom::MAX_COMPONENTS
            ),
        );
    }

    let mut total_caps = 0u64;
    let mut caps_reported = false;
    let mut specs = Vec::new();
    // The first component of each name, for duplicates and routes.
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, spanned) in components.iter().enumerate() {
        let c = spanned.get_ref();
        let who = who(c);
        let name = c.name.get_ref();
        if !valid_name(name) {
            diags.push(
                c.name.span(),
                format!(
                    "{who}name: must be 1 to {} ASCII letters, digits, '-', '_' or '.'",
                    rom::NAME_LEN
                ),
            );
        } else if name == PARENT {
            diags.push(
                c.name.span(),
                format!("{who}name: \"{PARENT}\" is reserved (a route to \"{PARENT}\" means the parent)"),
            );
        } else if let Some(&first) = by_name.get(name.as_str()) {
            diags.push(
                c.name.span(),
                format!(
                    "{who}name: the component at line {} has this name too",
                    lines.line_column(components[first].span().start).0
                ),
            );
        } else {
            by_name.insert(name, index);
        }

        let (binary, binary_span, defaulted) = match &c.binary {
            Some(b) => (b.get_ref().clone(), b.span(), false),
            None => (name.clone(), c.name.span(), true),
        };
        let default_note = if defaulted {
            " (the binary defaults to the name)"
        } else {
            ""
        };
        if binary == ROOT {
            diags.push(
                binary_span.clone(),
                format!(
                    "{who}binary: \"{ROOT}\" is the root task, which the kernel starts; it cannot \
                     be a component{default_note}"
                ),
            );
        } else if binary == INIT {
            diags.push(
                binary_span.clone(),
                format!(
                    "{who}binary: \"{INIT}\" is the init that root starts for the scenario; it \
                     cannot be a component{default_note}"
                ),
            );
        } else if !binaries.contains(&binary) {
            diags.push(
                binary_span,
                format!("{who}binary: no component \"{binary}\" in components/{default_note}"),
            );
        }

        let ram = *c.ram_mib.get_ref();
        if !(1..=rom::MAX_RAM_MIB).contains(&ram) {
            diags.push(
                c.ram_mib.span(),
                format!("{who}ram_mib: {ram} is not from 1 to {}", rom::MAX_RAM_MIB),
            );
        }

        let caps = *c.caps.get_ref();
        if !valid_caps(caps) {
            diags.push(
                c.caps.span(),
                format!(
                    "{who}caps: {caps} is not a power of two from {} to {}",
                    rom::MIN_CAPS,
                    rom::MAX_CAPS
                ),
            );
        } else {
            total_caps += u64::from(caps);
            if total_caps > u64::from(rom::MAX_TOTAL_CAPS) && !caps_reported {
                caps_reported = true;
                diags.push(
                    c.caps.span(),
                    format!(
                        "{who}caps: the capability quotas add up to {total_caps} with this \
                         component, more than the maximum of {}",
                        rom::MAX_TOTAL_CAPS
                    ),
                );
            }
        }

        let priority = c
            .priority
            .as_ref()
            .map_or(u32::from(rom::DEFAULT_PRIORITY), |p| *p.get_ref());
        if let Some(p) = c
            .priority
            .as_ref()
            .filter(|_| priority > u32::from(rom::MAX_PRIORITY))
        {
            diags.push(
                p.span(),
                format!(
                    "{who}priority: {priority} is above init's priority ({})",
                    rom::MAX_PRIORITY
                ),
            );
        }

        let (cpu, cpus) = check_cpus(c, &who, machine, &mut diags);
        let mut provides = Vec::new();
        for service in &c.provides {
            let s = service.get_ref();
            if !valid_service(s) {
                diags.push(service.span(), format!("{who}provides: {}", bad_service(s)));
            } else if provides.contains(s) {
                diags.push(
                    service.span(),
                    format!("{who}provides: {s} is listed twice"),
                );
            } else {
                provides.push(s.clone());
            }
        }

        let restart = match &c.restart {
            None => Restart::Never,
            Some(r) => check_restart(r, &who, &mut diags),
        };
        let own = check_own(c, &who, &mut diags);
        let shared_endpoint = check_shared_endpoint(c, &who, &mut diags);
        let killable = check_killable(c, components, &who, &mut diags);

        for service in c.routes.keys() {
            if !valid_service(service.get_ref()) {
                diags.push(
                    service.span(),
                    format!("{who}routes: {}", bad_service(service.get_ref())),
                );
            }
        }

        let config = match &c.config {
            None => Vec::new(),
            Some(v) => check_config(v, &who, &mut diags),
        };

        specs.push(ComponentSpec {
            name: name.clone(),
            binary,
            ram_mib: ram,
            caps,
            priority: u8::try_from(priority).unwrap_or(u8::MAX),
            cpu: u16::try_from(cpu).unwrap_or(u16::MAX),
            cpus,
            restart,
            own,
            shared_endpoint,
            killable,
            provides,
            routes: Vec::new(),
            devices: Vec::new(),
            config,
        });
    }

    check_devices(text, components, &mut diags, &mut specs);
    check_routes(components, &parent, &by_name, &mut diags, &mut specs);
    check_pci_devices(text, components, &by_name, &mut diags, &mut specs);
    check_partitions(text, components, &by_name, &mut diags, &mut specs);
    check_cycles(components, &by_name, &mut diags);
    check_service_count(parent_provides, components, &mut diags);

    let mut diags = diags.0;
    if diags.is_empty() {
        return Ok(Spec {
            parent_provides: parent,
            components: specs,
        });
    }
    diags.sort_by_key(|d| d.span.start);
    Err(diags)
}

/// The component's `cpu` and `cpus`: each CPU one the machine has and a
/// CPU set can name, none listed twice, the set not empty and holding
/// `cpu`. Without `cpus` the set is `[cpu]`; without `cpu` it is the first
/// of `cpus` (else 0).
fn check_cpus(c: &RawComponent, who: &str, machine: Machine, diags: &mut Diags) -> (u32, CpuSet) {
    let exists = |key: &str, n: u32, span: Range<usize>, diags: &mut Diags| {
        let plural = if machine.smp == 1 { "CPU" } else { "CPUs" };
        if n >= machine.smp {
            diags.push(
                span,
                format!(
                    "{who}{key}: {n} does not exist: the machine has {} {plural} (smp = {})",
                    machine.smp, machine.smp
                ),
            );
        } else if n >= rom::SET_CPUS {
            diags.push(
                span,
                format!(
                    "{who}{key}: {n} is beyond the {} CPUs a CPU set can name",
                    rom::SET_CPUS
                ),
            );
        } else {
            return true;
        }
        false
    };
    let mut set = CpuSet::EMPTY;
    let first = c.cpus.as_ref().and_then(|l| l.get_ref().first());
    let cpu = c.cpu.as_ref().or(first).map_or(0, |cpu| *cpu.get_ref());
    let cpu_ok = match &c.cpu {
        Some(span) => exists("cpu", cpu, span.span(), diags),
        None => true,
    };
    let Some(list) = &c.cpus else {
        return (cpu, CpuSet::single(cpu));
    };
    if list.get_ref().is_empty() {
        diags.push(
            list.span(),
            format!("{who}cpus: empty: a component needs at least one CPU"),
        );
        return (cpu, CpuSet::single(cpu));
    }
    for (i, entry) in list.get_ref().iter().enumerate() {
        let n = *entry.get_ref();
        if !exists(&format!("cpus[{i}]"), n, entry.span(), diags) {
            continue;
        }
        if set.contains(n) {
            diags.push(entry.span(), format!("{who}cpus[{i}]: {n} is listed twice"));
        }
        set = CpuSet(set.bits() | CpuSet::single(n).bits());
    }
    if let Some(span) = c.cpu.as_ref().filter(|_| cpu_ok && !set.contains(cpu)) {
        let listed: Vec<String> = list
            .get_ref()
            .iter()
            .map(|n| n.get_ref().to_string())
            .collect();
        diags.push(
            span.span(),
            format!(
                "{who}cpu: {cpu} is not in cpus = [{}]: the CPU it starts on must be one of its CPUs",
                listed.join(", ")
            ),
        );
    }
    (cpu, set)
}

/// The component's `own` list: which of its own kernel objects it gets
/// capabilities to, each named once.
fn check_own(c: &RawComponent, who: &str, diags: &mut Diags) -> OwnCaps {
    let mut own = OwnCaps::NONE;
    for (i, word) in c.own.iter().enumerate() {
        let w = word.get_ref();
        match OwnCaps::from_word(w) {
            None => {
                let words: Vec<String> = OwnCaps::KINDS
                    .iter()
                    .map(|(w, _, _)| format!("\"{w}\""))
                    .collect();
                diags.push(
                    word.span(),
                    format!(
                        "{who}own[{i}]: unknown \"{w}\" (expected {} or {})",
                        words[..words.len() - 1].join(", "),
                        words[words.len() - 1]
                    ),
                );
            }
            Some(one) if own.contains(one) => {
                diags.push(
                    word.span(),
                    format!("{who}own[{i}]: \"{w}\" is listed twice"),
                );
            }
            Some(one) => own = own.union(one),
        }
    }
    own
}

/// The component's `shared_endpoint`: `"call"` (the default) or
/// `"serve"`, and neither for a component that provides sessions (it finds
/// an endpoint of its own where the shared one would be).
/// `killable`: true only when some component of the scenario could ask
/// for the kill, one with a Reconfig session (`routes.Reconfig =
/// "parent"`): else the key would grant nothing and is likely a mistake.
fn check_killable(
    c: &RawComponent,
    components: &[Spanned<RawComponent>],
    who: &str,
    diags: &mut Diags,
) -> bool {
    let Some(killable) = c.killable.as_ref().filter(|k| *k.get_ref()) else {
        return false;
    };
    let asker = components.iter().any(|other| {
        other.get_ref().routes.iter().any(|(service, target)| {
            service.get_ref() == "Reconfig" && target.get_ref() == "parent"
        })
    });
    if !asker {
        diags.push(
            killable.span(),
            format!(
                "{who}killable: no component could ask for the kill: none has a Reconfig \
                 session (routes.Reconfig = \"parent\")"
            ),
        );
    }
    true
}

fn check_shared_endpoint(c: &RawComponent, who: &str, diags: &mut Diags) -> SharedEndpoint {
    let Some(word) = &c.shared_endpoint else {
        return SharedEndpoint::Call;
    };
    let Some(grant) = SharedEndpoint::from_word(word.get_ref()) else {
        diags.push(
            word.span(),
            format!(
                "{who}shared_endpoint: unknown value \"{}\" (expected \"call\" or \"serve\")",
                word.get_ref()
            ),
        );
        return SharedEndpoint::Call;
    };
    if !c.provides.is_empty() {
        let provided: Vec<String> = c
            .provides
            .iter()
            .map(|p| format!("\"{}\"", p.get_ref()))
            .collect();
        diags.push(
            word.span(),
            format!(
                "{who}shared_endpoint: not for a component that provides sessions (provides = \
                 [{}]): it finds an endpoint of its own in the shared endpoint's slot",
                provided.join(", ")
            ),
        );
        return SharedEndpoint::Call;
    }
    grant
}

/// A device as written: the device, the place of its entry, its key
/// (`io_ports[0]`, `irqs[1]`) and how it reads in a message.
struct Written {
    device: Device,
    span: Range<usize>,
    key: String,
    text: String,
}

/// The devices of each component (`io_ports`, `irqs`): each entry valid
/// and within the per-component limits, none in the kernel's ports, and
/// no port or IRQ given twice — to two components or twice to one (a
/// device has one driver). The valid ones go into `specs`.
fn check_devices(
    text: &str,
    components: &[Spanned<RawComponent>],
    diags: &mut Diags,
    specs: &mut [ComponentSpec],
) {
    let lines = crate::tomlfile::LineIndex::new(text);
    let line = |span: &Range<usize>| lines.line_column(span.start).0;
    // (component index, device) of every valid device so far.
    let mut given: Vec<(usize, Written)> = Vec::new();
    for (index, spanned) in components.iter().enumerate() {
        let c = spanned.get_ref();
        let who = who(c);
        let mut mine = Vec::new();
        for (key, max, list) in [
            (
                "io_ports",
                rom::MAX_IO_RANGES,
                c.io_ports.iter().map(|p| p.span()).collect::<Vec<_>>(),
            ),
            (
                "irqs",
                rom::MAX_IRQS,
                c.irqs.iter().map(|i| i.span()).collect(),
            ),
        ] {
            if let Some(extra) = list.get(max) {
                diags.push(
                    extra.clone(),
                    format!("{who}{key}: {} entries, at most {max}", list.len()),
                );
            }
        }
        for (i, entry) in c.io_ports.iter().enumerate() {
            let key = format!("io_ports[{i}]");
            let (base, count) = (
                *entry.get_ref().base.get_ref(),
                *entry.get_ref().count.get_ref(),
            );
            let last = u64::from(base) + u64::from(count) - u64::from(count > 0);
            if count == 0 {
                diags.push(
                    entry.get_ref().count.span(),
                    format!("{who}{key}: count must be at least 1"),
                );
            } else if last > 0xffff {
                diags.push(
                    entry.span(),
                    format!(
                        "{who}{key}: {base:#x} + {count} ports go past 0xffff, the last I/O port"
                    ),
                );
            } else {
                let device = Device::IoPorts {
                    first: base as u16,
                    last: last as u16,
                };
                let text = format!("ports {base:#x}..={last:#x}");
                if let Some(k) = device.kernel_conflict() {
                    let (first, last, what) = rom::KERNEL_PORTS[k];
                    diags.push(
                        entry.span(),
                        format!(
                            "{who}{key}: {text} reach {first:#x}..={last:#x}, {what}: no \
                             component may have them"
                        ),
                    );
                } else {
                    mine.push(Written {
                        device,
                        span: entry.span(),
                        key,
                        text,
                    });
                }
            }
        }
        if let Some(p) = c.platform.as_ref().filter(|p| *p.get_ref()) {
            if !c.io_ports.is_empty() || !c.irqs.is_empty() {
                diags.push(
                    p.span(),
                    format!(
                        "{who}platform: the platform service has no io_ports or irqs of its own \
                         (it gets the PCI devices' ports and interrupts)"
                    ),
                );
            } else {
                mine.push(Written {
                    device: Device::Platform,
                    span: p.span(),
                    key: "platform".into(),
                    text: format!(
                        "the PCI platform (with ports {:#x}..={:#x})",
                        PLATFORM_IO.0, PLATFORM_IO.1
                    ),
                });
            }
        }
        for (i, irq) in c.irqs.iter().enumerate() {
            let key = format!("irqs[{i}]");
            let n = *irq.get_ref();
            if n >= u32::from(rom::ISA_IRQS) {
                diags.push(
                    irq.span(),
                    format!(
                        "{who}{key}: {n} is not an ISA IRQ (0 to {})",
                        rom::ISA_IRQS - 1
                    ),
                );
            } else if n == u32::from(rom::CASCADE_IRQ) {
                diags.push(
                    irq.span(),
                    format!("{who}{key}: 2 is the 8259 cascade, which no device raises"),
                );
            } else {
                mine.push(Written {
                    device: Device::Irq(n as u8),
                    span: irq.span(),
                    key,
                    text: format!("IRQ {n}"),
                });
            }
        }
        for w in mine {
            let clash = given.iter().find(|(_, g)| g.device.overlaps(&w.device));
            if let Some((other, g)) = clash {
                let whom = whom(components, index, *other);
                diags.push(
                    w.span.clone(),
                    format!(
                        "{who}{}: {}: already given to {whom} ({} = {}, line {}): a device has \
                         one driver",
                        w.key,
                        w.text,
                        g.key,
                        g.text,
                        line(&g.span)
                    ),
                );
            } else {
                given.push((index, w));
            }
        }
    }
    for (index, w) in given {
        specs[index].devices.push(w.device);
    }
}

/// The platform service's I/O-BAR window (`interfaces::child::platform`).
const PLATFORM_IO: (u16, u16) = rom::PLATFORM_IO_WINDOW;

/// The session type of the platform service.
pub const PLATFORM_SESSION: &str = "Platform";
/// The key of the platform service's config that xtask writes from the
/// drivers' `devices` (the service's policy, Genode's `<policy>`).
pub const POLICY_KEY: &str = "policy";

/// The PCI devices assigned to drivers (`devices = [{ pci = "..." }]`):
/// each entry a valid `pci::DeviceMatch`; a component with devices
/// routes `Platform` to the platform service (`platform = true`, which
/// provides `Platform`); no device assigned to two drivers as far as the
/// matches show it (the same selector on functions that may be the same;
/// a class match against an ID match cannot be decided without the
/// machine: the platform service refuses such a device at run time). The
/// assignments become the platform service's config key `policy`: a
/// table per driver, `{ label = NAME, pci = [MATCH, ...] }`.
fn check_pci_devices(
    text: &str,
    components: &[Spanned<RawComponent>],
    by_name: &BTreeMap<&str, usize>,
    diags: &mut Diags,
    specs: &mut [ComponentSpec],
) {
    let lines = crate::tomlfile::LineIndex::new(text);
    let platform: Vec<usize> = components
        .iter()
        .enumerate()
        .filter(|(_, c)| c.get_ref().platform.as_ref().is_some_and(|p| *p.get_ref()))
        .map(|(i, _)| i)
        .collect();
    for &p in &platform {
        let c = components[p].get_ref();
        if !c.provides.iter().any(|s| s.get_ref() == PLATFORM_SESSION) {
            let span = c
                .platform
                .as_ref()
                .map_or(components[p].span(), |s| s.span());
            diags.push(
                span,
                format!("{}platform: the platform service provides {PLATFORM_SESSION} (provides = [\"{PLATFORM_SESSION}\"])", who(c)),
            );
        }
        if let Some(key) = specs[p].config.iter().find(|(k, _)| k == POLICY_KEY) {
            let span = c.config.as_ref().map_or(components[p].span(), |s| s.span());
            diags.push(
                span,
                format!(
                    "{}config.{}: reserved: the platform service's policy is written from the \
                     drivers' devices keys",
                    who(c),
                    key.0
                ),
            );
        }
    }
    // (component, entry index, match, span) of every valid entry so far.
    let mut given: Vec<(usize, usize, pci::DeviceMatch, Range<usize>)> = Vec::new();
    let mut policy: Vec<(usize, Vec<ValueBuf>)> = Vec::new();
    for (index, spanned) in components.iter().enumerate() {
        let c = spanned.get_ref();
        if c.devices.is_empty() {
            continue;
        }
        let who = who(c);
        let route = c
            .routes
            .iter()
            .find(|(s, _)| s.get_ref() == PLATFORM_SESSION)
            .map(|(_, t)| t.get_ref().as_str());
        let provider = route.and_then(|t| by_name.get(t)).copied();
        match provider {
            Some(p) if platform.contains(&p) => {}
            _ => diags.push(
                c.devices[0].span(),
                format!(
                    "{who}devices: a driver reaches its devices through a {PLATFORM_SESSION} \
                     session: route {PLATFORM_SESSION} to the component with platform = true{}",
                    match route {
                        Some(t) => format!(" (it routes {PLATFORM_SESSION} -> \"{t}\")"),
                        None => String::new(),
                    }
                ),
            ),
        }
        let mut mine = Vec::new();
        for (i, entry) in c.devices.iter().enumerate() {
            let raw = entry.get_ref().pci.get_ref();
            let m: pci::DeviceMatch = match raw.parse() {
                Ok(m) => m,
                Err(e) => {
                    diags.push(
                        entry.get_ref().pci.span(),
                        format!("{who}devices[{i}].pci: {e}"),
                    );
                    continue;
                }
            };
            if let Some((other, j, g, span)) = given.iter().find(|(_, _, g, _)| may_be_same(g, &m))
            {
                let whom = whom(components, index, *other);
                diags.push(
                    entry.span(),
                    format!(
                        "{who}devices[{i}]: \"{m}\": may select the device already given to \
                         {whom} (devices[{j}] = \"{g}\", line {}): a device has one driver",
                        lines.line_column(span.start).0
                    ),
                );
                continue;
            }
            given.push((index, i, m, entry.span()));
            mine.push(ValueBuf::String(m.to_string()));
        }
        policy.push((index, mine));
    }
    if let [p] = platform[..] {
        let tables = policy
            .into_iter()
            .map(|(index, matches)| {
                ValueBuf::Table(vec![
                    ("label".into(), ValueBuf::String(specs[index].name.clone())),
                    ("pci".into(), ValueBuf::Array(matches)),
                ])
            })
            .collect();
        if !specs[p].config.iter().any(|(k, _)| k == POLICY_KEY) {
            specs[p]
                .config
                .push((POLICY_KEY.into(), ValueBuf::Array(tables)));
        }
    }
}

/// The binary of the partition service (`components/services/partitions`).
pub const PARTITIONS_BINARY: &str = "partitions";
/// The session type the partition service serves, and its clients route.
pub const BLOCK_SESSION: &str = "Block";
/// The largest partition number a client may name (GPT tables hold 128
/// entries by default; MBR logical partitions are numbered from 5 on).
pub const MAX_PARTITION: u32 = 1024;

/// The partitions assigned to clients of the partition service
/// (`partition = N`): N from 1 to [`MAX_PARTITION`]; a component with
/// `partition` routes `Block` to a component running the
/// [`PARTITIONS_BINARY`] binary, and a component that does has
/// `partition` (else the service would refuse its session at run time,
/// a mistake better seen here); no partition of one service given to two
/// clients. The assignments become each partition service's config key
/// `policy`, which it may not set itself: a table per client, in
/// component order, `{ label = NAME, partition = N }`.
fn check_partitions(
    text: &str,
    components: &[Spanned<RawComponent>],
    by_name: &BTreeMap<&str, usize>,
    diags: &mut Diags,
    specs: &mut [ComponentSpec],
) {
    let lines = crate::tomlfile::LineIndex::new(text);
    let services: Vec<usize> = (0..components.len())
        .filter(|&i| specs[i].binary == PARTITIONS_BINARY)
        .collect();
    for &p in &services {
        let c = components[p].get_ref();
        if let Some(key) = specs[p].config.iter().find(|(k, _)| k == POLICY_KEY) {
            let span = c.config.as_ref().map_or(components[p].span(), |s| s.span());
            diags.push(
                span,
                format!(
                    "{}config.{}: reserved: the partition service's policy is written from its \
                     clients' partition keys",
                    who(c),
                    key.0
                ),
            );
        }
    }
    // (service, client, partition, the partition key's place) of every
    // valid assignment so far, in component order.
    let mut given: Vec<(usize, usize, u32, Range<usize>)> = Vec::new();
    for (index, spanned) in components.iter().enumerate() {
        let c = spanned.get_ref();
        let who = who(c);
        let route = c.routes.iter().find(|(s, _)| s.get_ref() == BLOCK_SESSION);
        let service = route
            .and_then(|(_, t)| by_name.get(t.get_ref().as_str()))
            .copied()
            .filter(|t| services.contains(t));
        let Some(partition) = &c.partition else {
            if let (Some((key, target)), Some(_)) = (route, service) {
                diags.push(
                    key.span(),
                    format!(
                        "{who}route {BLOCK_SESSION} -> \"{}\": a client of the partition service \
                         needs partition = N (the partition it gets, 1 to {MAX_PARTITION})",
                        target.get_ref()
                    ),
                );
            }
            continue;
        };
        let n = *partition.get_ref();
        let in_range = (1..=MAX_PARTITION).contains(&n);
        if !in_range {
            diags.push(
                partition.span(),
                format!("{who}partition: {n} is not from 1 to {MAX_PARTITION}"),
            );
        }
        let Some(s) = service else {
            diags.push(
                partition.span(),
                format!(
                    "{who}partition: a client reaches its partition through a {BLOCK_SESSION} \
                     session: route {BLOCK_SESSION} to a component running the \
                     {PARTITIONS_BINARY} binary{}",
                    match route {
                        Some((_, t)) => {
                            format!(" (it routes {BLOCK_SESSION} -> \"{}\")", t.get_ref())
                        }
                        None => String::new(),
                    }
                ),
            );
            continue;
        };
        if !in_range {
            continue;
        }
        let service_name = components[s].get_ref().name.get_ref();
        if let Some((_, other, _, span)) = given.iter().find(|g| g.0 == s && g.2 == n) {
            diags.push(
                partition.span(),
                format!(
                    "{who}partition: partition {n} of \"{service_name}\": already given to \
                     component \"{}\" (partition = {n}, line {}): a partition has one client",
                    components[*other].get_ref().name.get_ref(),
                    lines.line_column(span.start).0
                ),
            );
            continue;
        }
        given.push((s, index, n, partition.span()));
    }
    for &p in &services {
        if specs[p].config.iter().any(|(k, _)| k == POLICY_KEY) {
            continue; // reported above
        }
        let tables = given
            .iter()
            .filter(|g| g.0 == p)
            .map(|&(_, client, n, _)| {
                ValueBuf::Table(vec![
                    ("label".into(), ValueBuf::String(specs[client].name.clone())),
                    ("partition".into(), ValueBuf::Integer(i64::from(n))),
                ])
            })
            .collect();
        specs[p]
            .config
            .push((POLICY_KEY.into(), ValueBuf::Array(tables)));
    }
}

/// Whether two matches can select the same function: the same kind of
/// selector that agrees where both say something, on functions that may
/// be the same. (An ID match and a class match may or may not meet; only
/// the machine can tell, and the platform service checks it there.)
fn may_be_same(a: &pci::DeviceMatch, b: &pci::DeviceMatch) -> bool {
    use pci::matching::Selector;
    if let (Some(x), Some(y)) = (a.at, b.at) {
        if x != y {
            return false;
        }
    }
    let agree = |x: Option<u8>, y: Option<u8>| x.is_none() || y.is_none() || x == y;
    match (a.selector, b.selector) {
        (Selector::Ids { .. }, Selector::Ids { .. }) => a.selector == b.selector,
        (
            Selector::Class {
                class,
                subclass,
                prog_if,
            },
            Selector::Class {
                class: c2,
                subclass: s2,
                prog_if: p2,
            },
        ) => class == c2 && agree(subclass, s2) && agree(prog_if, p2),
        _ => false,
    }
}

/// How a message names component `other` from component `index`'s point
/// of view: "this component" or `component "NAME"`.
fn whom(components: &[Spanned<RawComponent>], index: usize, other: usize) -> String {
    if other == index {
        "this component".to_string()
    } else {
        format!(
            "component \"{}\"",
            components[other].get_ref().name.get_ref()
        )
    }
}

fn bad_service(s: &str) -> String {
    format!(
        "\"{s}\" is not a session type (1 to {} ASCII letters, digits and '_', starting with a \
         letter)",
        rom::SERVICE_LEN
    )
}

fn needs_max(who: &str) -> String {
    format!(
        "{who}restart: policy \"always\" needs max (restart = {{ policy = \"always\", max = N, \
         backoff_ms = MS }})"
    )
}

fn check_restart(r: &Spanned<RawRestart>, who: &str, diags: &mut Diags) -> Restart {
    let unknown = |policy: &str| {
        format!("{who}restart: unknown policy \"{policy}\" (expected \"never\" or \"always\")")
    };
    let table = match r.get_ref() {
        RawRestart::Word(w) if w == "never" => return Restart::Never,
        RawRestart::Word(w) if w == "always" => {
            diags.push(r.span(), needs_max(who));
            return Restart::Never;
        }
        RawRestart::Word(w) => {
            diags.push(r.span(), unknown(w));
            return Restart::Never;
        }
        RawRestart::Table(t) => t,
    };
    match table.policy.get_ref().as_str() {
        "never" => {
            for (key, value) in [("max", &table.max), ("backoff_ms", &table.backoff_ms)] {
                if let Some(v) = value {
                    diags.push(
                        v.span(),
                        format!("{who}restart.{key}: only with policy \"always\""),
                    );
                }
            }
            Restart::Never
        }
        "always" => {
            let Some(max) = &table.max else {
                diags.push(r.span(), needs_max(who));
                return Restart::Never;
            };
            if !(1..=rom::MAX_RESTARTS).contains(max.get_ref()) {
                diags.push(
                    max.span(),
                    format!(
                        "{who}restart.max: {} is not from 1 to {}",
                        max.get_ref(),
                        rom::MAX_RESTARTS
                    ),
                );
            }
            let backoff_ms = table.backoff_ms.as_ref().map_or(0, |b| *b.get_ref());
            if let Some(b) = table
                .backoff_ms
                .as_ref()
                .filter(|_| backoff_ms > rom::MAX_BACKOFF_MS)
            {
                diags.push(
                    b.span(),
                    format!(
                        "{who}restart.backoff_ms: {backoff_ms} is more than {} (one hour)",
                        rom::MAX_BACKOFF_MS
                    ),
                );
            }
            Restart::Always {
                max: *max.get_ref(),
                backoff_ms,
            }
        }
        other => {
            diags.push(table.policy.span(), unknown(other));
            Restart::Never
        }
    }
}

/// The component's `config`, which must be a table of supported values
/// that encodes to at most `MAX_CONFIG_BYTES`.
fn check_config(v: &Spanned<RawValue>, who: &str, diags: &mut Diags) -> Vec<(String, ValueBuf)> {
    let RawValue::Table(entries) = v.get_ref() else {
        diags.push(v.span(), format!("{who}config: must be a table"));
        return Vec::new();
    };
    // `arg` becomes the component's argument word (init reads it as an
    // integer): any other type would be dropped, so it is refused here.
    if let Some((_, arg)) = entries.iter().find(|(k, _)| k == "arg") {
        if !matches!(arg.get_ref(), RawValue::Integer(_)) {
            diags.push(
                arg.span(),
                format!("{who}config.arg: must be an integer (it becomes the component's argument word)"),
            );
        }
    }
    let before = diags.0.len();
    let entries: Vec<(String, ValueBuf)> = entries
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                config_value(v, &format!("config.{k}"), 2, who, diags),
            )
        })
        .collect();
    if diags.0.len() == before {
        match rom::encoded_config_len(&entries) {
            Some(len) if len <= rom::MAX_CONFIG_BYTES => {}
            Some(len) => diags.push(
                v.span(),
                format!(
                    "{who}config: encodes to {len} bytes, more than {}",
                    rom::MAX_CONFIG_BYTES
                ),
            ),
            None => diags.push(
                v.span(),
                format!("{who}config: a key or string is too long to encode"),
            ),
        }
    }
    entries
}

/// One config value at `path` and nesting `depth` (the config table is 1).
fn config_value(
    v: &Spanned<RawValue>,
    path: &str,
    depth: usize,
    who: &str,
    diags: &mut Diags,
) -> ValueBuf {
    if depth > rom::MAX_DEPTH {
        diags.push(
            v.span(),
            format!(
                "{who}{path}: nested deeper than {} levels below config",
                rom::MAX_DEPTH - 1
            ),
        );
        return ValueBuf::Bool(false);
    }
    match v.get_ref() {
        RawValue::Bool(b) => ValueBuf::Bool(*b),
        RawValue::Integer(i) => ValueBuf::Integer(*i),
        RawValue::Float(x) => ValueBuf::Float(*x),
        RawValue::String(s) => ValueBuf::String(s.clone()),
        RawValue::Datetime => {
            diags.push(
                v.span(),
                format!("{who}{path}: a date or time cannot be put in a config ROM (use a string)"),
            );
            ValueBuf::Bool(false)
        }
        RawValue::Array(items) => ValueBuf::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| config_value(item, &format!("{path}[{i}]"), depth + 1, who, diags))
                .collect(),
        ),
        RawValue::Table(entries) => ValueBuf::Table(
            entries
                .iter()
                .map(|(k, item)| {
                    let path = format!("{path}.{k}");
                    (k.clone(), config_value(item, &path, depth + 1, who, diags))
                })
                .collect(),
        ),
    }
}

/// Resolves the routes into `specs`, reporting routes to nothing, to a
/// component that does not provide the service and to a parent that does
/// not.
fn check_routes(
    components: &[Spanned<RawComponent>],
    parent: &[String],
    by_name: &BTreeMap<&str, usize>,
    diags: &mut Diags,
    specs: &mut [ComponentSpec],
) {
    for (index, spanned) in components.iter().enumerate() {
        let c = spanned.get_ref();
        let who = who(c);
        for (service, target) in &c.routes {
            let (service_span, service) = (service.span(), service.get_ref());
            let target = target.get_ref();
            if !valid_service(service) {
                continue; // reported with the component
            }
            if target == PARENT {
                if parent.contains(service) {
                    specs[index]
                        .routes
                        .push((service.clone(), RouteSpec::Parent));
                } else {
                    let offered = if parent.is_empty() {
                        "parent_provides is empty".to_string()
                    } else {
                        format!("parent_provides: {}", parent.join(", "))
                    };
                    diags.push(
                        service_span,
                        format!(
                            "{who}route {service} -> parent: the parent does not provide \
                             {service} ({offered})"
                        ),
                    );
                }
                continue;
            }
            let route = format!("{who}route {service} -> \"{target}\"");
            let Some(&t) = by_name.get(target.as_str()) else {
                diags.push(service_span, format!("{route}: no component \"{target}\""));
                continue;
            };
            if provides(&components[t], service) {
                specs[index]
                    .routes
                    .push((service.clone(), RouteSpec::Component(target.clone())));
                continue;
            }
            let providers: Vec<String> = components
                .iter()
                .filter(|o| provides(o, service))
                .map(|o| format!("\"{}\"", o.get_ref().name.get_ref()))
                .collect();
            let message = if !providers.is_empty() {
                format!(
                    "{route}: \"{target}\" does not provide {service} (provided by {})",
                    providers.join(", ")
                )
            } else if parent.contains(service) {
                format!(
                    "{route}: no component provides {service} (the parent does: \
                     {service} = \"{PARENT}\")"
                )
            } else {
                format!("{route}: no component provides {service}")
            };
            diags.push(service_span, message);
        }
    }
}

/// Reports the first session type beyond the ROM's [`rom::MAX_SERVICES`]
/// distinct ones, counted in the encoder's order.
fn check_service_count(
    parent_provides: &[Spanned<String>],
    components: &[Spanned<RawComponent>],
    diags: &mut Diags,
) {
    let mut seen: Vec<&str> = Vec::new();
    let named = parent_provides
        .iter()
        .chain(components.iter().flat_map(|c| {
            let c = c.get_ref();
            c.provides.iter().chain(c.routes.keys())
        }));
    for service in named {
        if seen.contains(&service.get_ref().as_str()) {
            continue;
        }
        seen.push(service.get_ref());
        if seen.len() > rom::MAX_SERVICES {
            diags.push(
                service.span(),
                format!(
                    "{}: a scenario names at most {} session types",
                    service.get_ref(),
                    rom::MAX_SERVICES
                ),
            );
            return;
        }
    }
}

/// Whether component `c` lists `service` in `provides`.
fn provides(c: &Spanned<RawComponent>, service: &str) -> bool {
    c.get_ref().provides.iter().any(|p| p.get_ref() == service)
}

/// A route between components that resolves: service, its key's place,
/// target.
type Edge<'a> = (&'a str, Range<usize>, usize);

/// Reports every route that closes a cycle of routes between components
/// (a component that needs, through its providers, its own service would
/// wait for itself at start).
fn check_cycles(
    components: &[Spanned<RawComponent>],
    by_name: &BTreeMap<&str, usize>,
    diags: &mut Diags,
) {
    let edges: Vec<Vec<Edge>> = components
        .iter()
        .map(|c| {
            c.get_ref()
                .routes
                .iter()
                .filter_map(|(service, target)| {
                    let t = *by_name.get(target.get_ref().as_str())?;
                    provides(&components[t], service.get_ref())
                        .then(|| (service.get_ref().as_str(), service.span(), t))
                })
                .collect()
        })
        .collect();
    let mut state = vec![Visit::New; components.len()];
    let mut path = Vec::new();
    for start in 0..components.len() {
        if state[start] == Visit::New {
            visit(start, components, &edges, &mut state, &mut path, diags);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Visit {
    New,
    OnPath,
    Done,
}

/// Depth-first search from `node`; `path` holds the components above it
/// with the service each needs from the next.
fn visit<'a>(
    node: usize,
    components: &[Spanned<RawComponent>],
    edges: &'a [Vec<Edge<'a>>],
    state: &mut [Visit],
    path: &mut Vec<(usize, &'a str)>,
    diags: &mut Diags,
) {
    state[node] = Visit::OnPath;
    for (service, span, target) in &edges[node] {
        match state[*target] {
            Visit::OnPath => {
                let name = |n: usize| components[n].get_ref().name.get_ref().as_str();
                let from = path
                    .iter()
                    .position(|(n, _)| n == target)
                    .unwrap_or(path.len());
                // Start at the route reported: node -service-> target -> ... -> node.
                let mut hops: Vec<(usize, &str)> = vec![(node, *service)];
                hops.extend(path[from..].iter().copied());
                let mut cycle = String::new();
                for (n, s) in &hops {
                    cycle.push_str(&format!("\"{}\" -{s}-> ", name(*n)));
                }
                cycle.push_str(&format!("\"{}\"", name(node)));
                diags.push(
                    span.clone(),
                    format!(
                        "{}route {service} -> \"{}\": routing cycle: {cycle}",
                        who(components[node].get_ref()),
                        name(*target)
                    ),
                );
            }
            Visit::New => {
                path.push((node, *service));
                visit(*target, components, edges, state, path, diags);
                path.pop();
            }
            Visit::Done => {}
        }
    }
    state[node] = Visit::Done;
}

#[cfg(test)]
mod tests;
