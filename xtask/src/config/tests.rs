//! One test per error class of the checker, each with the exact message
//! including file, line and column (through `scenario::parse`, which turns
//! places into lines), plus what a good file gives.

use std::path::Path;

use ucore::config::{CpuSet, Device, OwnCaps, Restart, RouteSpec, SharedEndpoint, ValueBuf};

use crate::scenario::{self, Scenario};

/// Lines are numbered in the comments: the tests change one line at a time.
const GOOD: &str = r#"description = "d"
smp = 2
parent_provides = ["Log", "Rom"]

[[component]]
name = "timer"
binary = "hello"
ram_mib = 2
caps = 64
provides = ["Timer"]
[component.routes]
Log = "parent"

[[component]]
name = "sd"
binary = "echo-server"
ram_mib = 4
caps = 64
cpu = 1
provides = ["Block"]
restart = { policy = "always", max = 3, backoff_ms = 100 }
[component.routes]
Timer = "timer"

[[component]]
name = "fs"
binary = "pinger"
ram_mib = 8
caps = 128
priority = 120
[component.routes]
Block = "sd"
Log = "parent"
[component.config]
label = "root"
"#;

fn binaries() -> Vec<String> {
    ["root", "hello", "echo-server", "pinger", "partitions"]
        .map(String::from)
        .to_vec()
}

fn parse(text: &str) -> anyhow::Result<Scenario> {
    scenario::parse(Path::new("scenarios/t.toml"), text, &binaries())
}

/// `GOOD` with line `line` (1-based) replaced by `with` (which may hold
/// several lines).
fn edit(line: usize, with: &str) -> String {
    let mut lines: Vec<&str> = GOOD.lines().collect();
    assert!(line >= 1 && line <= lines.len(), "line {line}");
    lines[line - 1] = with;
    lines.join("\n") + "\n"
}

/// The error for `text`, which must fail.
fn error(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => format!("{e:#}"),
    }
}

/// Asserts that `GOOD` with line `line` replaced by `with` is refused with
/// exactly `expected`.
#[track_caller]
fn refused(line: usize, with: &str, expected: &str) {
    assert_eq!(error(&edit(line, with)), expected);
}

#[test]
fn good_file() {
    let s = parse(GOOD).unwrap();
    let spec = s.config.clone().unwrap();
    assert_eq!(spec.parent_provides, ["Log", "Rom"]);
    let names: Vec<_> = spec.components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["timer", "sd", "fs"]);
    let timer = &spec.components[0];
    assert_eq!(timer.binary, "hello");
    assert_eq!((timer.priority, timer.cpu), (100, 0));
    assert_eq!(timer.restart, Restart::Never);
    assert_eq!(timer.routes, [("Log".to_string(), RouteSpec::Parent)]);
    let sd = &spec.components[1];
    assert_eq!(sd.cpu, 1);
    // Without `cpus` a component's set is its `cpu`.
    assert_eq!(
        (timer.cpus, sd.cpus),
        (CpuSet::single(0), CpuSet::single(1))
    );
    assert_eq!(
        sd.restart,
        Restart::Always {
            max: 3,
            backoff_ms: 100
        }
    );
    let fs = &spec.components[2];
    assert_eq!((fs.ram_mib, fs.caps, fs.priority), (8, 128, 120));
    assert_eq!(
        fs.routes,
        [
            ("Block".to_string(), RouteSpec::Component("sd".to_string())),
            ("Log".to_string(), RouteSpec::Parent)
        ]
    );
    assert_eq!(
        fs.config,
        [("label".to_string(), ValueBuf::String("root".to_string()))]
    );
    let rom = s.rom().unwrap().unwrap();
    let parsed = ucore::config::Rom::parse(&rom).unwrap();
    assert_eq!(parsed.to_spec(), spec);
    assert_eq!(
        parsed.find("fs").unwrap().route("Block"),
        Some(ucore::config::Target::Component(1))
    );
}

#[test]
fn defaults_and_variants() {
    // No binary: the name; restart "never" as a word or a table.
    let text = GOOD
        .replace("name = \"timer\"\nbinary = \"hello\"", "name = \"hello\"")
        .replace("Timer = \"timer\"", "Timer = \"hello\"")
        .replace(
            "restart = { policy = \"always\", max = 3, backoff_ms = 100 }",
            "restart = { policy = \"never\" }",
        )
        .replace("priority = 120", "restart = \"never\"");
    let spec = parse(&text).unwrap().config.unwrap();
    assert_eq!(spec.components[0].binary, "hello");
    assert_eq!(spec.components[1].restart, Restart::Never);
    assert_eq!(spec.components[2].restart, Restart::Never);
    // `always` without backoff_ms: no wait.
    let text = GOOD.replace(", backoff_ms = 100", "");
    assert_eq!(
        parse(&text).unwrap().config.unwrap().components[1].restart,
        Restart::Always {
            max: 3,
            backoff_ms: 0
        }
    );
    // Config values of every kind, nested, keys in byte order.
    let text = edit(
        35,
        "label = \"root\"\nn = -3\nx = 1.5\non = true\nlist = [1, \"two\", [3], { four = 4 }]\n\
         [component.config.cache]\nsize = 4096",
    );
    let spec = parse(&text).unwrap().config.unwrap();
    let keys: Vec<&str> = spec.components[2]
        .config
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(keys, ["cache", "label", "list", "n", "on", "x"]);
    assert_eq!(
        spec.components[2].config[2].1,
        ValueBuf::Array(vec![
            ValueBuf::Integer(1),
            ValueBuf::String("two".into()),
            ValueBuf::Array(vec![ValueBuf::Integer(3)]),
            ValueBuf::Table(vec![("four".into(), ValueBuf::Integer(4))]),
        ])
    );
    // A scenario with only parent_provides has no ROM.
    let s = parse("description = 'd'\nparent_provides = ['Log']\n").unwrap();
    assert!(s.config.is_none());
}

#[test]
fn authority_is_declared() {
    // Without the keys nothing is granted, whatever the binary is called
    // (sd runs echo-server, fs pinger).
    let spec = parse(GOOD).unwrap().config.unwrap();
    for c in &spec.components {
        assert_eq!(c.own, OwnCaps::NONE, "{}", c.name);
        assert_eq!(c.shared_endpoint, SharedEndpoint::Call, "{}", c.name);
    }
    let text = edit(
        30,
        "own = [\"vspace\", \"thread\"]\nshared_endpoint = \"serve\"",
    );
    let text = text.replace("cpu = 1\n", "cpu = 1\nown = []\n");
    let spec = parse(&text).unwrap().config.unwrap();
    let fs = &spec.components[2];
    assert_eq!(fs.own, OwnCaps::THREAD.union(OwnCaps::VSPACE));
    assert_eq!(fs.shared_endpoint, SharedEndpoint::Serve);
    assert_eq!(spec.components[1].own, OwnCaps::NONE);
    let text = edit(
        30,
        "own = [\"cspace\", \"thread\", \"vspace\"]\nshared_endpoint = \"call\"",
    );
    let fs = &parse(&text).unwrap().config.unwrap().components[2];
    assert_eq!(
        (fs.own, fs.shared_endpoint),
        (OwnCaps::ALL, SharedEndpoint::Call)
    );
    // Into the ROM and back.
    let s = parse(&text).unwrap();
    let rom = s.rom().unwrap().unwrap();
    let parsed = ucore::config::Rom::parse(&rom).unwrap();
    assert_eq!(parsed.find("fs").unwrap().own, OwnCaps::ALL);
}

#[test]
fn bad_authority() {
    refused(
        30,
        "own = [\"thread\", \"stack\"]",
        "scenarios/t.toml:30:18: component \"fs\": own[1]: unknown \"stack\" (expected \
         \"thread\", \"cspace\" or \"vspace\")",
    );
    refused(
        30,
        "own = [\"vspace\", \"cspace\", \"vspace\"]",
        "scenarios/t.toml:30:28: component \"fs\": own[2]: \"vspace\" is listed twice",
    );
    refused(
        30,
        "own = \"thread\"",
        "scenarios/t.toml:30:7: component \"fs\": own: invalid type: string \"thread\", \
         expected a sequence",
    );
    refused(
        30,
        "own = [1]",
        "scenarios/t.toml:30:8: component \"fs\": own: invalid type: integer `1`, expected \
         a string",
    );
    refused(
        30,
        "shared_endpoint = \"receive\"",
        "scenarios/t.toml:30:19: component \"fs\": shared_endpoint: unknown value \"receive\" \
         (expected \"call\" or \"serve\")",
    );
    refused(
        30,
        "shared_endpoint = true",
        "scenarios/t.toml:30:19: component \"fs\": shared_endpoint: invalid type: boolean \
         `true`, expected a string",
    );
    // A provider finds its own endpoint where the shared one would be.
    refused(
        19,
        "cpu = 1\nshared_endpoint = \"serve\"",
        "scenarios/t.toml:20:19: component \"sd\": shared_endpoint: not for a component that \
         provides sessions (provides = [\"Block\"]): it finds an endpoint of its own in the \
         shared endpoint's slot",
    );
}

#[test]
fn unknown_pointer() {
    refused(
        2,
        "pointer = \"mouse\"",
        "scenarios/t.toml:2:11: pointer: unknown \"mouse\" (expected \"virtio-tablet\")",
    );
}

#[test]
fn unknown_keys() {
    refused(
        30,
        "colour = 120",
        "scenarios/t.toml:30:1: component \"fs\": unknown field `colour`, expected one of \
         `name`, `binary`, `ram_mib`, `caps`, `priority`, `cpu`, `cpus`, `provides`, \
         `restart`, `routes`, `config`, `io_ports`, `irqs`, `own`, `shared_endpoint`, `killable`, `platform`, `devices`, \
         `partition`",
    );
    refused(
        2,
        "cpus = 2",
        "scenarios/t.toml:2:1: unknown field `cpus`, expected one of `description`, `cmdline`, \
         `smp`, `memory_mib`, `parent_provides`, `update`, `boot_modules`, `archives`, `data_modules`, \
         `linux_guests`, `component`, `disk`, `nic`, `display`, `pointer`",
    );
    refused(
        21,
        "restart = { policy = \"always\", max = 3, back_off = 100 }",
        "scenarios/t.toml:21:41: component \"sd\": restart: unknown field `back_off`, expected \
         one of `policy`, `max`, `backoff_ms`",
    );
}

#[test]
fn wrong_types() {
    refused(
        29,
        "caps = \"128\"",
        "scenarios/t.toml:29:8: component \"fs\": caps: invalid type: string \"128\", expected u32",
    );
    refused(
        21,
        "restart = { policy = \"always\", max = \"3\" }",
        "scenarios/t.toml:21:38: component \"sd\": restart.max: invalid type: string \"3\", \
         expected u32",
    );
    refused(
        21,
        "restart = 3",
        "scenarios/t.toml:21:11: component \"sd\": restart: invalid type: integer `3`, expected \
         \"never\" or a table { policy = ..., max = ..., backoff_ms = ... }",
    );
    refused(
        23,
        "Timer = 1",
        "scenarios/t.toml:23:9: component \"sd\": routes.Timer: invalid type: integer `1`, \
         expected a string",
    );
    refused(
        28,
        "ram_mib = -8",
        "scenarios/t.toml:28:11: component \"fs\": ram_mib: invalid value: integer `-8`, \
         expected u32",
    );
    refused(
        30,
        "config = 3",
        "scenarios/t.toml:34:12: duplicate key `config`",
    );
}

#[test]
fn missing_keys() {
    refused(
        17,
        "# no ram_mib",
        "scenarios/t.toml:14:1: component \"sd\": missing field `ram_mib`",
    );
    refused(
        15,
        "# no name",
        "scenarios/t.toml:14:1: component #2: missing field `name`",
    );
    refused(
        1,
        "# no description",
        "scenarios/t.toml:1:1: missing field `description`",
    );
}

#[test]
fn bad_names() {
    refused(
        26,
        "name = \"f s\"",
        "scenarios/t.toml:26:8: component \"f s\": name: must be 1 to 48 ASCII letters, digits, \
         '-', '_' or '.'",
    );
    refused(
        26,
        "name = \"parent\"",
        "scenarios/t.toml:26:8: component \"parent\": name: \"parent\" is reserved (a route to \
         \"parent\" means the parent)",
    );
}

#[test]
fn duplicate_names() {
    refused(
        26,
        "name = \"sd\"",
        "scenarios/t.toml:26:8: component \"sd\": name: the component at line 14 has this name \
         too",
    );
}

#[test]
fn missing_binaries() {
    refused(
        27,
        "binary = \"pingr\"",
        "scenarios/t.toml:27:10: component \"fs\": binary: no component \"pingr\" in components/",
    );
    refused(
        27,
        "# no binary",
        "scenarios/t.toml:26:8: component \"fs\": binary: no component \"fs\" in components/ \
         (the binary defaults to the name)",
    );
    refused(
        27,
        "binary = \"root\"",
        "scenarios/t.toml:27:10: component \"fs\": binary: \"root\" is the root task, which the \
         kernel starts; it cannot be a component",
    );
}

#[test]
fn route_to_nothing() {
    refused(
        32,
        "Block = \"nvme\"",
        "scenarios/t.toml:32:1: component \"fs\": route Block -> \"nvme\": no component \"nvme\"",
    );
}

#[test]
fn route_to_a_component_that_does_not_provide_it() {
    refused(
        32,
        "Block = \"timer\"",
        "scenarios/t.toml:32:1: component \"fs\": route Block -> \"timer\": \"timer\" does not \
         provide Block (provided by \"sd\")",
    );
}

#[test]
fn route_to_a_service_nobody_provides() {
    refused(
        32,
        "Nic = \"sd\"",
        "scenarios/t.toml:32:1: component \"fs\": route Nic -> \"sd\": no component provides Nic",
    );
    refused(
        32,
        "Rom = \"sd\"",
        "scenarios/t.toml:32:1: component \"fs\": route Rom -> \"sd\": no component provides Rom \
         (the parent does: Rom = \"parent\")",
    );
}

#[test]
fn route_to_a_parent_that_does_not_provide_it() {
    refused(
        33,
        "Nic = \"parent\"",
        "scenarios/t.toml:33:1: component \"fs\": route Nic -> parent: the parent does not \
         provide Nic (parent_provides: Log, Rom)",
    );
    let text = edit(3, "");
    assert_eq!(
        error(&text),
        "scenarios/t.toml:12:1: component \"timer\": route Log -> parent: the parent does not \
         provide Log (parent_provides is empty)\n\
         scenarios/t.toml:33:1: component \"fs\": route Log -> parent: the parent does not \
         provide Log (parent_provides is empty)"
    );
}

#[test]
fn routing_cycles() {
    refused(
        12,
        "Block = \"sd\"",
        "scenarios/t.toml:23:1: component \"sd\": route Timer -> \"timer\": routing cycle: \
         \"sd\" -Timer-> \"timer\" -Block-> \"sd\"",
    );
    refused(
        23,
        "Block = \"sd\"",
        "scenarios/t.toml:23:1: component \"sd\": route Block -> \"sd\": routing cycle: \
         \"sd\" -Block-> \"sd\"",
    );
    // Three components: timer -> fs -> sd -> timer; the search starts at
    // timer and meets it again from sd.
    let text = edit(12, "Fs = \"fs\"").replace("priority = 120", "provides = [\"Fs\"]");
    assert_eq!(
        error(&text),
        "scenarios/t.toml:23:1: component \"sd\": route Timer -> \"timer\": routing cycle: \
         \"sd\" -Timer-> \"timer\" -Fs-> \"fs\" -Block-> \"sd\""
    );
}

#[test]
fn bad_session_types() {
    refused(
        10,
        "provides = [\"Timer\", \"9x\"]",
        "scenarios/t.toml:10:22: component \"timer\": provides: \"9x\" is not a session type (1 \
         to 32 ASCII letters, digits and '_', starting with a letter)",
    );
    refused(
        10,
        "provides = [\"Timer\", \"Timer\"]",
        "scenarios/t.toml:10:22: component \"timer\": provides: Timer is listed twice",
    );
    refused(
        3,
        "parent_provides = [\"Log\", \"Rom\", \"Log\"]",
        "scenarios/t.toml:3:34: parent_provides: Log is listed twice",
    );
    refused(
        12,
        "\"Log session\" = \"parent\"",
        "scenarios/t.toml:12:1: component \"timer\": routes: \"Log session\" is not a session \
         type (1 to 32 ASCII letters, digits and '_', starting with a letter)",
    );
}

#[test]
fn ram_quotas() {
    refused(
        28,
        "ram_mib = 0",
        "scenarios/t.toml:28:11: component \"fs\": ram_mib: 0 is not from 1 to 65536",
    );
    // Whether the quotas fit the machine is the memory rule's
    // (`Scenario::check_memory`), not the checker's.
    assert!(parse(&edit(28, "ram_mib = 65536")).is_ok());
    // More memory, more room.
    assert!(
        parse(&edit(2, "smp = 2\nmemory_mib = 512").replace("ram_mib = 8", "ram_mib = 400"))
            .is_ok()
    );
}

#[test]
fn capability_quotas() {
    refused(
        29,
        "caps = 100",
        "scenarios/t.toml:29:8: component \"fs\": caps: 100 is not a power of two from 16 to 65536",
    );
    refused(
        29,
        "caps = 8",
        "scenarios/t.toml:29:8: component \"fs\": caps: 8 is not a power of two from 16 to 65536",
    );
    refused(
        29,
        "caps = 65536",
        "scenarios/t.toml:29:8: component \"fs\": caps: the capability quotas add up to 65664 \
         with this component, more than the maximum of 65536",
    );
    assert!(parse(&edit(29, "caps = 32768")).is_ok());
}

#[test]
fn priority_above_inits() {
    refused(
        30,
        "priority = 151",
        "scenarios/t.toml:30:12: component \"fs\": priority: 151 is above init's priority (150)",
    );
    assert!(parse(&edit(30, "priority = 150")).is_ok());
    assert!(parse(&edit(30, "priority = 0")).is_ok());
}

#[test]
fn cpu_out_of_range() {
    refused(
        19,
        "cpu = 2",
        "scenarios/t.toml:19:7: component \"sd\": cpu: 2 does not exist: the machine has 2 CPUs \
         (smp = 2)",
    );
    let text = edit(2, "smp = 1");
    assert_eq!(
        error(&text),
        "scenarios/t.toml:19:7: component \"sd\": cpu: 1 does not exist: the machine has 1 CPU \
         (smp = 1)"
    );
}

/// `GOOD` on `smp` CPUs with `sd`'s line 19 (`cpu = 1`) replaced by
/// `cpu_lines`.
fn with_cpus(smp: u32, cpu_lines: &str) -> String {
    edit(19, cpu_lines).replace("smp = 2", &format!("smp = {smp}"))
}

#[test]
fn cpu_sets() {
    let sd = |text: &str| parse(text).unwrap().config.unwrap().components[1].clone();
    let c = sd(&with_cpus(4, "cpu = 1\ncpus = [1, 2]"));
    assert_eq!((c.cpu, c.cpus), (1, CpuSet(0b110)));
    // Without `cpu` the component starts on the first of its CPUs.
    let c = sd(&with_cpus(4, "cpus = [3, 2]"));
    assert_eq!((c.cpu, c.cpus), (3, CpuSet(0b1100)));

    let refused_cpus = |smp, lines, expected: &str| {
        assert_eq!(error(&with_cpus(smp, lines)), expected, "{lines}");
    };
    refused_cpus(
        2,
        "cpu = 1\ncpus = [1, 2]",
        "scenarios/t.toml:20:12: component \"sd\": cpus[1]: 2 does not exist: the machine has \
         2 CPUs (smp = 2)",
    );
    refused_cpus(
        100,
        "cpu = 1\ncpus = [1, 70]",
        "scenarios/t.toml:20:12: component \"sd\": cpus[1]: 70 is beyond the 64 CPUs a CPU set \
         can name",
    );
    refused_cpus(
        100,
        "cpu = 70",
        "scenarios/t.toml:19:7: component \"sd\": cpu: 70 is beyond the 64 CPUs a CPU set can \
         name",
    );
    refused_cpus(
        4,
        "cpu = 1\ncpus = [1, 2, 1]",
        "scenarios/t.toml:20:15: component \"sd\": cpus[2]: 1 is listed twice",
    );
    refused_cpus(
        4,
        "cpu = 1\ncpus = []",
        "scenarios/t.toml:20:8: component \"sd\": cpus: empty: a component needs at least one \
         CPU",
    );
    refused_cpus(
        4,
        "cpu = 1\ncpus = [0, 2]",
        "scenarios/t.toml:19:7: component \"sd\": cpu: 1 is not in cpus = [0, 2]: the CPU it \
         starts on must be one of its CPUs",
    );
    refused_cpus(
        4,
        "cpu = 1\ncpus = 1",
        "scenarios/t.toml:20:8: component \"sd\": cpus: invalid type: integer `1`, expected a \
         sequence",
    );
    refused_cpus(
        4,
        "cpu = 1\ncpus = [\"1\"]",
        "scenarios/t.toml:20:9: component \"sd\": cpus: invalid type: string \"1\", expected u32",
    );
    refused_cpus(
        4,
        "cpu = 1\ncpus = [-1]",
        "scenarios/t.toml:20:9: component \"sd\": cpus: invalid value: integer `-1`, expected u32",
    );
}

#[test]
fn bad_restart_policies() {
    refused(
        21,
        "restart = { policy = \"sometimes\", max = 3 }",
        "scenarios/t.toml:21:22: component \"sd\": restart: unknown policy \"sometimes\" \
         (expected \"never\" or \"always\")",
    );
    refused(
        21,
        "restart = \"sometimes\"",
        "scenarios/t.toml:21:11: component \"sd\": restart: unknown policy \"sometimes\" \
         (expected \"never\" or \"always\")",
    );
    let needs_max = "component \"sd\": restart: policy \"always\" needs max (restart = { \
                     policy = \"always\", max = N, backoff_ms = MS })";
    refused(
        21,
        "restart = \"always\"",
        &format!("scenarios/t.toml:21:11: {needs_max}"),
    );
    refused(
        21,
        "restart = { policy = \"always\", backoff_ms = 5 }",
        &format!("scenarios/t.toml:21:11: {needs_max}"),
    );
    refused(
        21,
        "restart = { policy = \"always\", max = 0 }",
        "scenarios/t.toml:21:38: component \"sd\": restart.max: 0 is not from 1 to 65535",
    );
    refused(
        21,
        "restart = { policy = \"always\", max = 65536 }",
        "scenarios/t.toml:21:38: component \"sd\": restart.max: 65536 is not from 1 to 65535",
    );
    refused(
        21,
        "restart = { policy = \"always\", max = 1, backoff_ms = 3600001 }",
        "scenarios/t.toml:21:54: component \"sd\": restart.backoff_ms: 3600001 is more than \
         3600000 (one hour)",
    );
    refused(
        21,
        "restart = { policy = \"never\", max = 2 }",
        "scenarios/t.toml:21:37: component \"sd\": restart.max: only with policy \"always\"",
    );
}

#[test]
fn unsupported_config_values() {
    refused(
        35,
        "label = 1979-05-27",
        "scenarios/t.toml:35:9: component \"fs\": config.label: a date or time cannot be put in \
         a config ROM (use a string)",
    );
    refused(
        35,
        "label = [1, { when = 07:32:00 }]",
        "scenarios/t.toml:35:22: component \"fs\": config.label[1].when: a date or time cannot \
         be put in a config ROM (use a string)",
    );
    // Depth: config is 1, label 2; 14 arrays put the innermost at 16.
    let nest = |n: usize| format!("label = {}0{}", "[".repeat(n), "]".repeat(n));
    assert!(parse(&edit(35, &nest(14))).is_ok());
    let e = error(&edit(35, &nest(15)));
    assert_eq!(
        e,
        format!(
            "scenarios/t.toml:35:24: component \"fs\": config.label{}: nested deeper than 15 \
             levels below config",
            "[0]".repeat(15)
        )
    );
    let big = "x".repeat(70_000);
    // Table header 9, key length 2, "label" 5, string tag 1, length 4.
    refused(
        35,
        &format!("label = \"{big}\""),
        "scenarios/t.toml:34:1: component \"fs\": config: encodes to 70021 bytes, more than 65536",
    );
    let text = edit(34, "")
        .replace("label = \"root\"", "")
        .replace("priority = 120", "config = [1]");
    assert_eq!(
        error(&text),
        "scenarios/t.toml:30:10: component \"fs\": config: must be a table"
    );
}

#[test]
fn too_many_components() {
    let mut text = String::from("description = 'd'\n");
    for i in 0..65 {
        text.push_str(&format!(
            "[[component]]\nname = 'c{i}'\nbinary = 'hello'\nram_mib = 1\ncaps = 16\n"
        ));
    }
    assert_eq!(
        error(&text),
        "scenarios/t.toml:322:1: component \"c64\": a scenario has at most 64 components"
    );
}

#[test]
fn too_many_session_types() {
    let services: Vec<String> = (0..257).map(|i| format!("'S{i}'")).collect();
    let text = format!(
        "description = 'd'\nparent_provides = [{}]\n",
        services.join(", ")
    );
    let e = error(&text);
    let column = text.find("'S256'").unwrap() - text.find("parent_provides").unwrap() + 1;
    assert_eq!(
        e,
        format!("scenarios/t.toml:2:{column}: S256: a scenario names at most 256 session types")
    );
    assert!(parse(&text.replace(", 'S256'", "")).is_ok());
}

#[test]
fn devices() {
    // Line 10 is the timer's `provides`; the driver "sd" has line 20.
    let text = edit(
        10,
        "provides = [\"Timer\"]\nio_ports = [{ base = 0x40, count = 4 }]\nirqs = [0]",
    );
    let spec = parse(&text).unwrap().config.unwrap();
    assert_eq!(
        spec.components[0].devices,
        [
            Device::IoPorts {
                first: 0x40,
                last: 0x43
            },
            Device::Irq(0)
        ]
    );
    assert!(spec.components[1].devices.is_empty());
    let both = |sd: &str| {
        edit(
            10,
            "provides = [\"Timer\"]\nio_ports = [{ base = 0x40, count = 4 }]\nirqs = [0, 8]",
        )
        .replacen(
            "provides = [\"Block\"]",
            &format!("provides = [\"Block\"]\n{sd}"),
            1,
        )
    };
    // Bad port ranges.
    refused(
        20,
        "provides = [\"Block\"]\nio_ports = [{ base = 0x1f0, count = 0 }]",
        "scenarios/t.toml:21:37: component \"sd\": io_ports[0]: count must be at least 1",
    );
    refused(
        20,
        "provides = [\"Block\"]\nio_ports = [{ base = 0xfffe, count = 4 }]",
        "scenarios/t.toml:21:13: component \"sd\": io_ports[0]: 0xfffe + 4 ports go past \
         0xffff, the last I/O port",
    );
    // The kernel's ports.
    refused(
        20,
        "provides = [\"Block\"]\nio_ports = [{ base = 0x3f0, count = 9 }]",
        "scenarios/t.toml:21:13: component \"sd\": io_ports[0]: ports 0x3f0..=0x3f8 reach \
         0x3f8..=0x3ff, COM1, the kernel's serial console: no component may have them",
    );
    // Bad IRQs.
    refused(
        20,
        "provides = [\"Block\"]\nirqs = [16]",
        "scenarios/t.toml:21:9: component \"sd\": irqs[0]: 16 is not an ISA IRQ (0 to 15)",
    );
    refused(
        20,
        "provides = [\"Block\"]\nirqs = [1, 2]",
        "scenarios/t.toml:21:12: component \"sd\": irqs[1]: 2 is the 8259 cascade, which no \
         device raises",
    );
    // Shared with another component, or twice in one.
    assert_eq!(
        error(&both("io_ports = [{ base = 0x43, count = 1 }]\nirqs = [8]")),
        "scenarios/t.toml:23:13: component \"sd\": io_ports[0]: ports 0x43..=0x43: already \
         given to component \"timer\" (io_ports[0] = ports 0x40..=0x43, line 11): a device has \
         one driver\n\
         scenarios/t.toml:24:9: component \"sd\": irqs[0]: IRQ 8: already given to component \
         \"timer\" (irqs[1] = IRQ 8, line 12): a device has one driver"
    );
    refused(
        20,
        "provides = [\"Block\"]\nirqs = [5, 5]",
        "scenarios/t.toml:21:12: component \"sd\": irqs[1]: IRQ 5: already given to this \
         component (irqs[0] = IRQ 5, line 21): a device has one driver",
    );
    // Too many.
    refused(
        20,
        "provides = [\"Block\"]\nirqs = [1, 3, 4, 5, 6]",
        "scenarios/t.toml:21:21: component \"sd\": irqs: 5 entries, at most 4",
    );
    refused(
        20,
        "provides = [\"Block\"]\nio_ports = [{ base = 0x1f0, count = 9, bus = 1 }]",
        "scenarios/t.toml:21:40: component \"sd\": io_ports: unknown field `bus`, expected \
         `base` or `count`",
    );
}

#[test]
fn errors_come_in_file_order() {
    let text = edit(32, "Block = \"nvme\"")
        .replace("caps = 128", "caps = 100")
        .replace("cpu = 1", "cpu = 5");
    assert_eq!(
        error(&text),
        "scenarios/t.toml:19:7: component \"sd\": cpu: 5 does not exist: the machine has 2 CPUs \
         (smp = 2)\n\
         scenarios/t.toml:29:8: component \"fs\": caps: 100 is not a power of two from 16 to \
         65536\n\
         scenarios/t.toml:32:1: component \"fs\": route Block -> \"nvme\": no component \"nvme\""
    );
}

#[test]
fn killable_needs_someone_to_ask() {
    // Nobody has a Reconfig session: the key would grant nothing.
    refused(
        19,
        "cpu = 1\nkillable = true",
        "scenarios/t.toml:20:12: component \"sd\": killable: no component could ask for the \
         kill: none has a Reconfig session (routes.Reconfig = \"parent\")",
    );
    // fs may ask (Reconfig routed to the parent, which provides it).
    let text = edit(19, "cpu = 1\nkillable = true")
        .replace("[\"Log\", \"Rom\"]", "[\"Log\", \"Rom\", \"Reconfig\"]")
        .replace(
            "Block = \"sd\"\n",
            "Block = \"sd\"\nReconfig = \"parent\"\n",
        );
    let s = parse(&text).unwrap();
    let spec = s.config.as_ref().unwrap();
    let killable: Vec<bool> = spec.components.iter().map(|c| c.killable).collect();
    assert_eq!(killable, [false, true, false]);
    // Into the ROM and back.
    let rom = s.rom().unwrap().unwrap();
    let parsed = ucore::config::Rom::parse(&rom).unwrap();
    assert!(parsed.find("sd").unwrap().killable);
    assert!(!parsed.find("fs").unwrap().killable);
    // false is the default, and needs nobody.
    assert!(parse(&edit(19, "cpu = 1\nkillable = false")).is_ok());
    let e = error(&edit(19, "cpu = 1\nkillable = 1"));
    assert!(
        e.contains("component \"sd\": killable: invalid type: integer `1`, expected a boolean"),
        "{e}"
    );
}

/// A platform service and two drivers: the service's device record, and
/// the policy xtask writes into its config from the drivers' `devices`.
#[test]
fn platform_and_its_policy() {
    let text = r#"description = "d"
[[component]]
name = "platform"
binary = "hello"
ram_mib = 4
caps = 1024
platform = true
provides = ["Platform"]
[component.config]
greeting = "kept"

[[component]]
name = "blk"
binary = "hello"
ram_mib = 1
caps = 16
devices = [{ pci = "1af4:1042" }, { pci = "class=03@00:01.0" }]
[component.routes]
Platform = "platform"

[[component]]
name = "net"
binary = "hello"
ram_mib = 1
caps = 16
devices = [{ pci = "1AF4:1041" }]
[component.routes]
Platform = "platform"
"#;
    let spec = parse(text).unwrap().config.unwrap();
    assert_eq!(spec.components[0].devices, [Device::Platform]);
    assert!(spec.components[1].devices.is_empty());
    let policy = spec.components[0]
        .config
        .iter()
        .find(|(k, _)| k == "policy")
        .map(|(_, v)| v.clone());
    let rule = |label: &str, pci: &[&str]| {
        ValueBuf::Table(vec![
            ("label".into(), ValueBuf::String(label.into())),
            (
                "pci".into(),
                ValueBuf::Array(pci.iter().map(|m| ValueBuf::String((*m).into())).collect()),
            ),
        ])
    };
    assert_eq!(
        policy,
        Some(ValueBuf::Array(vec![
            rule("blk", &["1af4:1042", "class=03@00:01.0"]),
            // Written back in the canonical (lower-case) form.
            rule("net", &["1af4:1041"]),
        ]))
    );
    // The service's own keys stay.
    assert!(spec.components[0]
        .config
        .iter()
        .any(|(k, _)| k == "greeting"));
    // Two drivers for one device (the same IDs), and two platforms.
    let twice = text.replace("1AF4:1041", "1af4:1042@00:02.0");
    assert!(error(&twice).contains("may select the device already given to component \"blk\""));
    let second = text.replace("binary = \"hello\"\nram_mib = 1\ncaps = 16\ndevices = [{ pci = \"1AF4", "binary = \"hello\"\nram_mib = 1\ncaps = 16\nplatform = true\nprovides = [\"Platform\"]\ndevices = [{ pci = \"1AF4");
    assert!(error(&second).contains("platform: the PCI platform (with ports 0xc000..=0xffff): already given to component \"platform\""), "{}", error(&second));
    // An ID match and a class match may meet only on the machine: the
    // platform service decides there (it gives such a device to neither).
    let mixed = text.replace("1AF4:1041", "class=01");
    assert!(parse(&mixed).is_ok());
}

/// A partition service on a disk driver and two clients: the policy
/// xtask writes into the service's config from the clients' `partition`
/// keys, and nothing of it in the clients' records.
const PARTS: &str = r#"description = "d"
[[component]]
name = "disk"
binary = "hello"
ram_mib = 1
caps = 16
provides = ["Block"]

[[component]]
name = "parts"
binary = "partitions"
ram_mib = 4
caps = 64
provides = ["Block"]
[component.routes]
Block = "disk"
[component.config]
greeting = "kept"

[[component]]
name = "fat-a"
binary = "hello"
ram_mib = 1
caps = 16
partition = 1
[component.routes]
Block = "parts"

[[component]]
name = "fat-c"
binary = "hello"
ram_mib = 1
caps = 16
partition = 3
[component.routes]
Block = "parts"
"#;

#[test]
fn partitions_and_their_policy() {
    let spec = parse(PARTS).unwrap().config.unwrap();
    let parts = &spec.components[1];
    let rule = |label: &str, n: i64| {
        ValueBuf::Table(vec![
            ("label".into(), ValueBuf::String(label.into())),
            ("partition".into(), ValueBuf::Integer(n)),
        ])
    };
    assert_eq!(
        parts.config,
        [
            ("greeting".to_string(), ValueBuf::String("kept".into())),
            (
                "policy".to_string(),
                ValueBuf::Array(vec![rule("fat-a", 1), rule("fat-c", 3)])
            ),
        ]
    );
    // The clients' records and the driver's config are untouched.
    for c in [
        &spec.components[0],
        &spec.components[2],
        &spec.components[3],
    ] {
        assert!(c.config.is_empty(), "{}", c.name);
        assert!(c.devices.is_empty(), "{}", c.name);
    }
    // The binary may come from the name.
    let named = PARTS.replace("binary = \"partitions\"\n", "");
    let named = named.replace("\"parts\"", "\"partitions\"");
    let spec = parse(&named).unwrap().config.unwrap();
    assert!(spec.components[1]
        .config
        .iter()
        .any(|(k, v)| k == "policy"
            && *v == ValueBuf::Array(vec![rule("fat-a", 1), rule("fat-c", 3)])));
    // Another instance of the service has a policy of its own: here none.
    let two = PARTS.replace(
        "[[component]]\nname = \"fat-a\"",
        "[[component]]\nname = \"parts2\"\nbinary = \"partitions\"\nram_mib = 4\ncaps = 64\n\
         provides = [\"Block\"]\n[component.routes]\nBlock = \"disk\"\n\n\
         [[component]]\nname = \"fat-a\"",
    );
    let spec = parse(&two).unwrap().config.unwrap();
    assert_eq!(spec.components[2].name, "parts2");
    assert_eq!(
        spec.components[2].config,
        [("policy".to_string(), ValueBuf::Array(Vec::new()))]
    );
}

#[test]
fn bad_partitions() {
    let at = |line: usize, col: usize, message: &str| {
        format!("scenarios/t.toml:{line}:{col}: {message}")
    };
    // Without a route to a partition service, or routed elsewhere.
    let no_route = PARTS.replace(
        "partition = 3\n[component.routes]\nBlock = \"parts\"",
        "partition = 3",
    );
    assert_eq!(
        error(&no_route),
        at(
            34,
            13,
            "component \"fat-c\": partition: a client reaches its partition through a Block \
             session: route Block to a component running the partitions binary"
        )
    );
    let to_disk = PARTS.replace(
        "partition = 3\n[component.routes]\nBlock = \"parts\"",
        "partition = 3\n[component.routes]\nBlock = \"disk\"",
    );
    assert_eq!(
        error(&to_disk),
        at(
            34,
            13,
            "component \"fat-c\": partition: a client reaches its partition through a Block \
             session: route Block to a component running the partitions binary (it routes \
             Block -> \"disk\")"
        )
    );
    // A client without one.
    let missing = PARTS.replace("partition = 3\n", "");
    assert_eq!(
        error(&missing),
        at(
            35,
            1,
            "component \"fat-c\": route Block -> \"parts\": a client of the partition service \
             needs partition = N (the partition it gets, 1 to 1024)"
        )
    );
    // One partition for two clients.
    let twice = PARTS.replace("partition = 3", "partition = 1");
    assert_eq!(
        error(&twice),
        at(
            34,
            13,
            "component \"fat-c\": partition: partition 1 of \"parts\": already given to \
             component \"fat-a\" (partition = 1, line 25): a partition has one client"
        )
    );
    // Out of range, both ends; a negative one is a type error.
    for n in [0, 1025] {
        let text = PARTS.replace("partition = 3", &format!("partition = {n}"));
        assert_eq!(
            error(&text),
            at(
                34,
                13,
                &format!("component \"fat-c\": partition: {n} is not from 1 to 1024")
            )
        );
    }
    let max = PARTS.replace("partition = 3", "partition = 1024");
    assert!(parse(&max).is_ok());
    let negative = PARTS.replace("partition = 3", "partition = -1");
    assert!(error(&negative).contains("partition: invalid value: integer `-1`, expected u32"));
    // The service's policy is xtask's to write.
    let reserved = PARTS.replace("greeting = \"kept\"", "policy = []");
    assert_eq!(
        error(&reserved),
        at(
            17,
            1,
            "component \"parts\": config.policy: reserved: the partition service's policy is \
             written from its clients' partition keys"
        )
    );
}
