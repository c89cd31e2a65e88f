use super::value::{check_tree, encode as encode_value, TAG_BOOL, TAG_STRING, TAG_TABLE};
use super::*;
use abi::cpu::CpuSet;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

fn s(x: &str) -> String {
    x.to_string()
}

fn component(name: &str) -> ComponentSpec {
    ComponentSpec {
        name: s(name),
        binary: s(name),
        ram_mib: 2,
        caps: 64,
        priority: DEFAULT_PRIORITY,
        cpu: 0,
        cpus: CpuSet::single(0),
        restart: Restart::Never,
        own: OwnCaps::NONE,
        shared_endpoint: SharedEndpoint::Call,
        killable: false,
        provides: vec![],
        routes: vec![],
        devices: vec![],
        config: vec![],
    }
}

/// Three components: a timer, a block driver and a file system using both,
/// with a nested config.
fn sample() -> Spec {
    let mut timer = component("timer");
    timer.provides = vec![s("Timer")];
    timer.routes = vec![(s("Log"), RouteSpec::Parent)];
    timer.restart = Restart::Always {
        max: 3,
        backoff_ms: 100,
    };
    timer.devices = vec![
        Device::IoPorts {
            first: 0x40,
            last: 0x43,
        },
        Device::Irq(0),
    ];
    let mut sd = component("sd");
    sd.binary = s("sd-driver");
    sd.provides = vec![s("Block"), s("Sd_stats")];
    sd.routes = vec![
        (s("Log"), RouteSpec::Parent),
        (s("Timer"), RouteSpec::Component(s("timer"))),
    ];
    sd.cpu = 1;
    sd.cpus = CpuSet::range(1, 2);
    sd.devices = vec![
        Device::IoPorts {
            first: 0x1f0,
            last: 0x1f7,
        },
        Device::Irq(14),
    ];
    sd.priority = MAX_PRIORITY;
    let mut fs = component("fs");
    fs.own = OwnCaps::CSPACE.union(OwnCaps::VSPACE);
    fs.shared_endpoint = SharedEndpoint::Serve;
    fs.ram_mib = 64;
    fs.caps = 1024;
    fs.routes = vec![
        (s("Block"), RouteSpec::Component(s("sd"))),
        (s("Log"), RouteSpec::Parent),
    ];
    // Keys in ascending order, as the decoder gives them back.
    fs.config = vec![
        (s(""), ValueBuf::Bool(false)),
        (
            s("cache"),
            ValueBuf::Table(vec![
                (s("blocks"), ValueBuf::Integer(-4096)),
                (s("ratio"), ValueBuf::Float(0.75)),
            ]),
        ),
        (s("label"), ValueBuf::String(s("root fs ✓"))),
        (
            s("mounts"),
            ValueBuf::Array(vec![
                ValueBuf::Table(vec![(s("path"), ValueBuf::String(s("/")))]),
                ValueBuf::Integer(i64::MAX),
                ValueBuf::Array(vec![]),
                ValueBuf::Bool(true),
            ]),
        ),
    ];
    Spec {
        parent_provides: vec![s("Log"), s("Rom")],
        components: vec![timer, sd, fs],
    }
}

fn invalid(spec: &Spec) -> RomError {
    match encode(spec) {
        Err(EncodeError::Invalid(e)) => e,
        other => panic!("expected an invalid ROM, got {other:?}"),
    }
}

fn at(place: Place, fault: Fault) -> RomError {
    RomError { place, fault }
}

/// Reads everything a parsed ROM offers, as init would.
fn walk(rom: &Rom) -> usize {
    fn walk_value(v: Value, n: &mut usize) {
        *n += 1;
        match v {
            Value::Array(a) => a.iter().for_each(|v| walk_value(v, n)),
            Value::Table(t) => t.iter().for_each(|(_, v)| walk_value(v, n)),
            _ => {}
        }
    }
    let mut n = rom.parent_provides().count();
    for c in rom.components() {
        n += c.provides().count() + c.routes().count();
        walk_value(Value::Table(c.config), &mut n);
    }
    n
}

#[test]
fn round_trip() {
    let spec = sample();
    let bytes = encode(&spec).unwrap();
    let rom = Rom::parse(&bytes).unwrap();
    assert_eq!(rom.len(), bytes.len());
    assert_eq!(rom.to_spec(), spec);
    assert_eq!(encode(&rom.to_spec()).unwrap(), bytes);
    assert_eq!(rom.component_count(), 3);
    assert_eq!(rom.parent_provides().collect::<Vec<_>>(), ["Log", "Rom"]);

    let sd = rom.find("sd").unwrap();
    assert_eq!((sd.index, sd.binary, sd.cpu), (1, "sd-driver", 1));
    assert_eq!(sd.cpus, CpuSet(0b110));
    assert_eq!(sd.priority, MAX_PRIORITY);
    assert!(sd.provides_service("Block") && !sd.provides_service("Timer"));
    assert_eq!(sd.route("Timer"), Some(Target::Component(0)));
    assert_eq!(sd.route("Log"), Some(Target::Parent));
    assert_eq!(sd.route("Nic"), None);
    assert!(sd.config.is_empty());

    let timer = rom.component(0).unwrap();
    assert_eq!(
        timer.restart,
        Restart::Always {
            max: 3,
            backoff_ms: 100
        }
    );
    assert_eq!(
        (timer.own, timer.shared_endpoint),
        (OwnCaps::NONE, SharedEndpoint::Call)
    );
    let fs = rom.find("fs").unwrap();
    assert_eq!((fs.ram_mib, fs.caps), (64, 1024));
    assert_eq!(fs.own, OwnCaps::CSPACE.union(OwnCaps::VSPACE));
    assert_eq!(fs.shared_endpoint, SharedEndpoint::Serve);
    assert_eq!(fs.route("Block"), Some(Target::Component(1)));
    let cache = fs.config.get("cache").unwrap().as_table().unwrap();
    assert_eq!(cache.get("blocks").unwrap().as_integer(), Some(-4096));
    assert_eq!(cache.get("ratio").unwrap().as_float(), Some(0.75));
    assert_eq!(cache.get("nope"), None);
    assert_eq!(fs.config.get("label").unwrap().as_str(), Some("root fs ✓"));
    assert_eq!(fs.config.get("").unwrap().as_bool(), Some(false));
    let mounts = fs.config.get("mounts").unwrap().as_array().unwrap();
    assert_eq!(mounts.len(), 4);
    let first = mounts.get(0).unwrap().as_table().unwrap();
    assert_eq!(first.get("path").unwrap().as_str(), Some("/"));
    assert_eq!(mounts.get(1).unwrap().as_integer(), Some(i64::MAX));
    assert!(mounts.get(2).unwrap().as_array().unwrap().is_empty());
    assert_eq!(mounts.get(3).unwrap().as_bool(), Some(true));
    assert_eq!(mounts.get(4), None);
    assert!(rom.find("nope").is_none() && rom.component(3).is_none());

    // Bytes past `size` (a page-rounded mapping) are ignored.
    let mut padded = bytes.clone();
    padded.resize(4096, 0xee);
    assert_eq!(Rom::parse(&padded).unwrap().as_bytes(), &bytes[..]);
}

#[test]
fn encoder_sorts_config_keys() {
    let mut spec = Spec::default();
    let mut c = component("a");
    c.config = vec![
        (s("zeta"), ValueBuf::Integer(1)),
        (s("alpha"), ValueBuf::Integer(2)),
    ];
    spec.components.push(c);
    let bytes = encode(&spec).unwrap();
    let rom = Rom::parse(&bytes).unwrap();
    let keys: Vec<&str> = rom
        .component(0)
        .unwrap()
        .config
        .iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, ["alpha", "zeta"]);
}

#[test]
fn config_tree_parses_on_its_own() {
    let mut spec = Spec::default();
    let mut c = component("a");
    c.config = vec![
        (s("greeting"), ValueBuf::String(s("hi"))),
        (s("answer"), ValueBuf::Integer(42)),
    ];
    spec.components.push(c);
    spec.components.push(component("b"));
    let bytes = encode(&spec).unwrap();
    let rom = Rom::parse(&bytes).unwrap();
    let a = rom.component(0).unwrap();
    let table = parse_tree(a.config_tree()).unwrap();
    assert_eq!(table, a.config);
    assert_eq!(table.get("answer"), Some(Value::Integer(42)));
    let b = rom.component(1).unwrap();
    assert!(b.config_tree().is_empty());
    assert_eq!(parse_tree(b.config_tree()).unwrap(), Table::EMPTY);
    let tree = a.config_tree();
    assert_eq!(
        parse_tree(&tree[..tree.len() - 1]).unwrap_err().1,
        ValueFault::Truncated
    );
    assert!(parse_tree(&[TAG_BOOL, 1]).is_err());
}

/// What `Component::arg` makes of each kind of `arg`: the argument word,
/// or the error init logs (`init: cannot start NAME: ...`).
#[test]
fn arg_is_an_integer_or_an_error() {
    let long = "x".repeat(ArgError::SHOWN_CHARS + 1);
    let cases: Vec<(Option<ValueBuf>, Result<u64, String>)> = vec![
        (None, Ok(0)),
        (Some(ValueBuf::Integer(7)), Ok(7)),
        (Some(ValueBuf::Integer(0)), Ok(0)),
        (Some(ValueBuf::Integer(-1)), Ok(u64::MAX)),
        (Some(ValueBuf::Integer(i64::MIN)), Ok(1 << 63)),
        (
            Some(ValueBuf::String(s("abc"))),
            Err(s(r#"config arg: "abc" is not an integer"#)),
        ),
        (
            Some(ValueBuf::String(s("7"))),
            Err(s(r#"config arg: "7" is not an integer"#)),
        ),
        (
            Some(ValueBuf::String(s(""))),
            Err(s(r#"config arg: "" is not an integer"#)),
        ),
        // Control characters are escaped, never echoed to the console.
        (
            Some(ValueBuf::String(s("\u{1b}[2J\n"))),
            Err(s(r#"config arg: "\u{1b}[2J\n" is not an integer"#)),
        ),
        (
            Some(ValueBuf::String(long.clone())),
            Err(alloc::format!(
                "config arg: \"{}\"... (33 bytes) is not an integer",
                &long[..32]
            )),
        ),
        (
            Some(ValueBuf::String("é".repeat(40))),
            Err(alloc::format!(
                "config arg: \"{}\"... (80 bytes) is not an integer",
                "é".repeat(32)
            )),
        ),
        (
            Some(ValueBuf::Bool(true)),
            Err(s("config arg: true is not an integer")),
        ),
        (
            Some(ValueBuf::Float(1.5)),
            Err(s("config arg: 1.5 is not an integer")),
        ),
        (
            Some(ValueBuf::Float(3.0)),
            Err(s("config arg: 3.0 is not an integer")),
        ),
        (
            Some(ValueBuf::Array(vec![
                ValueBuf::Integer(1),
                ValueBuf::Integer(2),
            ])),
            Err(s("config arg: an array is not an integer")),
        ),
        (
            Some(ValueBuf::Table(vec![(s("a"), ValueBuf::Integer(1))])),
            Err(s("config arg: a table is not an integer")),
        ),
    ];
    for (arg, want) in cases {
        let mut spec = Spec::default();
        let mut c = component("a");
        // Another key around it: `arg` is found among others.
        c.config = vec![(s("after"), ValueBuf::Bool(false))];
        if let Some(arg) = arg.clone() {
            c.config.push((s(ARG_KEY), arg));
        }
        c.config.push((s("before"), ValueBuf::Integer(99)));
        spec.components.push(c);
        let bytes = encode(&spec).unwrap();
        let rom = Rom::parse(&bytes).unwrap();
        let got = rom.component(0).unwrap().arg().map_err(|e| e.to_string());
        assert_eq!(got, want, "arg = {arg:?}");
    }
}

#[test]
fn empty_config() {
    let bytes = encode(&Spec::default()).unwrap();
    assert_eq!(bytes.len(), HEADER_SIZE);
    let rom = Rom::parse(&bytes).unwrap();
    assert_eq!(rom.component_count(), 0);
    assert_eq!(rom.components().count(), 0);
    assert_eq!(walk(&rom), 0);
}

#[test]
fn encoder_refuses_what_it_cannot_store() {
    let mut spec = Spec::default();
    for i in 0..=MAX_COMPONENTS {
        spec.components.push(component(&alloc::format!("c{i}")));
    }
    assert_eq!(encode(&spec), Err(EncodeError::TooManyComponents(65)));

    let mut spec = Spec::default();
    let mut c = component("a");
    c.provides = (0..=MAX_SERVICES).map(|i| alloc::format!("S{i}")).collect();
    spec.components.push(c);
    assert_eq!(encode(&spec), Err(EncodeError::TooManyServices(257)));

    let mut spec = sample();
    spec.components[2].routes[0].1 = RouteSpec::Component(s("nvme"));
    assert_eq!(
        encode(&spec),
        Err(EncodeError::UnknownTarget {
            component: 2,
            target: s("nvme")
        })
    );
    let long = "x".repeat(70_000);
    let mut spec = Spec::default();
    spec.components.push(component(&long));
    assert_eq!(encode(&spec), Err(EncodeError::TooLarge));
}

#[test]
fn encoder_output_obeys_the_decoder() {
    let c = Place::Component;
    let mut spec = sample();
    spec.components[2].name = s("bad name");
    assert_eq!(invalid(&spec), at(c(2), Fault::BadName));

    let mut spec = sample();
    spec.components[2].name = s("timer");
    assert_eq!(invalid(&spec), at(c(2), Fault::DuplicateName));

    let mut spec = sample();
    spec.components[0].binary = String::new();
    assert_eq!(invalid(&spec), at(c(0), Fault::BadBinary));

    let field = |f: &dyn Fn(&mut ComponentSpec), field: Field| {
        let mut spec = sample();
        f(&mut spec.components[1]);
        assert_eq!(
            invalid(&spec),
            at(c(1), Fault::BadField(field)),
            "{field:?}"
        );
    };
    field(&|c| c.ram_mib = 0, Field::RamMib);
    field(&|c| c.ram_mib = MAX_RAM_MIB + 1, Field::RamMib);
    field(&|c| c.caps = 100, Field::Caps);
    field(&|c| c.caps = 8, Field::Caps);
    field(&|c| c.caps = MAX_CAPS * 2, Field::Caps);
    field(&|c| c.priority = MAX_PRIORITY + 1, Field::Priority);
    field(&|c| c.cpu = MAX_CPUS as u16, Field::Cpu);
    field(&|c| c.cpus = CpuSet::EMPTY, Field::Cpus);
    field(&|c| c.cpus = CpuSet::single(2), Field::Cpus);
    field(
        &|c| {
            c.cpu = 64;
            c.cpus = CpuSet(u64::MAX)
        },
        Field::Cpus,
    );
    let restart = |r| field(&move |c: &mut ComponentSpec| c.restart = r, Field::Restart);
    restart(Restart::Always {
        max: 0,
        backoff_ms: 0,
    });
    restart(Restart::Always {
        max: MAX_RESTARTS + 1,
        backoff_ms: 0,
    });
    restart(Restart::Always {
        max: 1,
        backoff_ms: MAX_BACKOFF_MS + 1,
    });

    let mut spec = sample();
    spec.components[0].caps = MAX_TOTAL_CAPS;
    assert_eq!(invalid(&spec), at(c(1), Fault::TooManyCaps));

    let mut spec = sample();
    spec.components[1].provides.push(s("Block"));
    assert_eq!(invalid(&spec), at(c(1), Fault::DuplicateService(3)));

    let mut spec = sample();
    spec.components[2]
        .routes
        .push((s("Block"), RouteSpec::Parent));
    assert_eq!(invalid(&spec), at(c(2), Fault::DuplicateService(3)));

    // Services are numbered by first appearance: Log, Rom, Timer, Block,
    // Sd_stats.
    let mut spec = sample();
    spec.components[2].routes[1].1 = RouteSpec::Component(s("sd"));
    assert_eq!(
        invalid(&spec),
        at(
            c(2),
            Fault::NotProvided {
                service: 0,
                target: 1
            }
        )
    );
    let mut spec = sample();
    spec.components[2].routes[0].1 = RouteSpec::Parent;
    assert_eq!(
        invalid(&spec),
        at(
            c(2),
            Fault::NotProvided {
                service: 3,
                target: PARENT
            }
        )
    );
    let mut spec = sample();
    spec.components[0]
        .routes
        .push((s("Timer"), RouteSpec::Component(s("timer"))));
    assert_eq!(invalid(&spec), at(c(0), Fault::BadTarget(0)));

    let mut spec = sample();
    spec.parent_provides.push(s("Log"));
    assert_eq!(
        invalid(&spec),
        at(Place::Parent(2), Fault::DuplicateService(0))
    );
    let mut spec = sample();
    spec.parent_provides.push(s("9lives"));
    assert_eq!(invalid(&spec), at(Place::Service(2), Fault::BadName));

    let mut spec = sample();
    spec.components[2]
        .config
        .push((s("label"), ValueBuf::Integer(1)));
    assert!(matches!(
        invalid(&spec),
        RomError {
            place: Place::Component(2),
            fault: Fault::BadValue {
                fault: ValueFault::KeysOutOfOrder,
                ..
            }
        }
    ));

    let mut spec = sample();
    // The table is depth 1, its value 2: 14 arrays put the integer at 16.
    let mut deep = ValueBuf::Integer(0);
    for _ in 0..MAX_DEPTH - 2 {
        deep = ValueBuf::Array(vec![deep]);
    }
    spec.components[0].config = vec![(s("deep"), deep.clone())];
    assert!(encode(&spec).is_ok(), "depth {MAX_DEPTH} is allowed");
    spec.components[0].config = vec![(s("deep"), ValueBuf::Array(vec![deep]))];
    assert!(matches!(
        invalid(&spec),
        RomError {
            fault: Fault::BadValue {
                fault: ValueFault::TooDeep,
                ..
            },
            ..
        }
    ));

    let mut spec = sample();
    spec.components[0].config = vec![(s("big"), ValueBuf::String("x".repeat(MAX_CONFIG_BYTES)))];
    assert_eq!(invalid(&spec), at(c(0), Fault::BadRange(List::Config)));
}

fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn header_faults() {
    let good = encode(&sample()).unwrap();
    let header = |fault| Err(at(Place::Header, fault));
    assert_eq!(
        Rom::parse(b""),
        header(Fault::Truncated { need: 32, have: 0 })
    );
    assert_eq!(
        Rom::parse(b"PECANC"),
        header(Fault::Truncated { need: 32, have: 6 })
    );
    assert_eq!(Rom::parse(b"PECANIMG"), header(Fault::BadMagic));

    let mut b = good.clone();
    set_u32(&mut b, 8, 1);
    assert_eq!(Rom::parse(&b), header(Fault::UnsupportedVersion(1)));
    // One device record more than the components claim.
    let mut b = good.clone();
    set_u16(&mut b, 26, 5);
    assert!(Rom::parse(&b).is_err());
    let mut b = good.clone();
    set_u16(&mut b, 16, 65);
    assert_eq!(Rom::parse(&b), header(Fault::TooMany(65)));
    let mut b = good.clone();
    set_u16(&mut b, 18, 257);
    assert_eq!(Rom::parse(&b), header(Fault::TooMany(257)));
    let mut b = good.clone();
    set_u32(&mut b, 12, good.len() as u32 + 1);
    assert_eq!(
        Rom::parse(&b),
        header(Fault::SizeMismatch {
            header: good.len() as u64 + 1,
            actual: good.len() as u64
        })
    );
    // A config area larger than the ROM.
    let mut b = good.clone();
    set_u32(&mut b, 28, u32::MAX);
    assert!(matches!(
        Rom::parse(&b),
        Err(RomError {
            place: Place::Header,
            fault: Fault::Truncated { .. }
        })
    ));
    // Cut the ROM short: the header's size no longer fits the bytes.
    assert!(matches!(
        Rom::parse(&good[..good.len() - 1]),
        Err(RomError {
            fault: Fault::SizeMismatch { .. },
            ..
        })
    ));
}

#[test]
fn record_faults() {
    let good = encode(&sample()).unwrap();
    let record = |i: usize| HEADER_SIZE + i * COMPONENT_SIZE;
    let c = Place::Component;

    let mut b = good.clone();
    set_u32(&mut b, record(0), u32::MAX - 2);
    assert_eq!(Rom::parse(&b), Err(at(c(0), Fault::BadString)));
    let mut b = good.clone();
    b[record(1) + 63] = 1;
    assert_eq!(
        Rom::parse(&b),
        Err(at(c(1), Fault::BadField(Field::Reserved)))
    );
    // Flags: bit 0 (killable) only.
    let mut b = good.clone();
    assert!(!Rom::parse(&b).unwrap().component(1).unwrap().killable);
    b[record(1) + 62] = 1;
    assert!(Rom::parse(&b).unwrap().component(1).unwrap().killable);
    b[record(1) + 62] = 3;
    assert_eq!(Rom::parse(&b), Err(at(c(1), Fault::BadField(Field::Flags))));
    // Own capabilities: bits 0..=2 only.
    let mut b = good.clone();
    b[record(1) + 60] = 7;
    assert_eq!(
        Rom::parse(&b).unwrap().component(1).unwrap().own,
        OwnCaps::ALL
    );
    b[record(1) + 60] = 8;
    assert_eq!(Rom::parse(&b), Err(at(c(1), Fault::BadField(Field::Own))));
    // The shared endpoint: call or serve, and serve only for a component
    // that provides nothing (sd provides Block).
    let mut b = good.clone();
    b[record(2) + 61] = 2;
    assert_eq!(
        Rom::parse(&b),
        Err(at(c(2), Fault::BadField(Field::SharedEndpoint)))
    );
    let mut b = good.clone();
    b[record(1) + 61] = 1;
    assert_eq!(
        Rom::parse(&b),
        Err(at(c(1), Fault::BadField(Field::SharedEndpoint)))
    );
    let mut b = good.clone();
    b[record(1) + 21] = 2;
    assert_eq!(
        Rom::parse(&b),
        Err(at(c(1), Fault::BadField(Field::Restart)))
    );
    let mut b = good.clone();
    set_u16(&mut b, record(0) + 34, 100);
    assert_eq!(
        Rom::parse(&b),
        Err(at(c(0), Fault::BadRange(List::Provides)))
    );
    let mut b = good.clone();
    set_u16(&mut b, record(2) + 36, 4);
    assert_eq!(Rom::parse(&b), Err(at(c(2), Fault::BadRange(List::Routes))));
    let mut b = good.clone();
    set_u32(&mut b, record(2) + 40, 1_000_000);
    assert_eq!(Rom::parse(&b), Err(at(c(2), Fault::BadRange(List::Config))));
    let mut b = good.clone();
    set_u32(&mut b, record(2) + 44, 3);
    assert!(matches!(
        Rom::parse(&b),
        Err(RomError {
            place: Place::Component(2),
            fault: Fault::BadValue { .. }
        })
    ));

    // Service and route tables: 5 services, 2 parent entries, 3 provides.
    let services = record(3);
    let parent = services + 5 * SERVICE_SIZE;
    let provides = parent + 2 * 2;
    let routes = provides + 3 * 2;
    let mut b = good.clone();
    set_u16(&mut b, parent, 5);
    assert_eq!(
        Rom::parse(&b),
        Err(at(Place::Parent(0), Fault::BadService(5)))
    );
    let mut b = good.clone();
    set_u16(&mut b, provides, 99);
    assert_eq!(Rom::parse(&b), Err(at(c(0), Fault::BadService(99))));
    let mut b = good.clone();
    set_u16(&mut b, routes + 2, 7);
    assert_eq!(Rom::parse(&b), Err(at(c(0), Fault::BadTarget(7))));
    let mut b = good.clone();
    set_u16(&mut b, routes, 300);
    assert_eq!(Rom::parse(&b), Err(at(c(0), Fault::BadService(300))));
    // A service name made invalid, then a duplicate one.
    let name_of = |b: &[u8], i: usize| {
        let r = services + i * SERVICE_SIZE;
        (
            u32::from_le_bytes(b[r..r + 4].try_into().unwrap()),
            u16::from_le_bytes(b[r + 4..r + 6].try_into().unwrap()),
        )
    };
    let mut b = good.clone();
    let (log_offset, log_len) = name_of(&b, 0);
    set_u32(&mut b, services + SERVICE_SIZE, log_offset);
    set_u16(&mut b, services + SERVICE_SIZE + 4, log_len);
    assert_eq!(
        Rom::parse(&b),
        Err(at(Place::Service(1), Fault::DuplicateName))
    );
}

#[test]
fn every_truncation_is_an_error() {
    let good = encode(&sample()).unwrap();
    for len in 0..good.len() {
        assert!(Rom::parse(&good[..len]).is_err(), "length {len}");
    }
}

/// Flips each byte to several values: the parser answers without
/// panicking, and a ROM it accepts can be read in full.
#[test]
fn corrupt_bytes_never_panic() {
    let good = encode(&sample()).unwrap();
    let mut accepted = 0;
    for i in 0..good.len() {
        for v in [
            0u8,
            1,
            0x7f,
            0x80,
            0xff,
            good[i] ^ 1,
            good[i].wrapping_add(1),
        ] {
            let mut b = good.clone();
            b[i] = v;
            if let Ok(rom) = Rom::parse(&b) {
                walk(&rom);
                accepted += 1;
            }
        }
    }
    // Some changes keep a valid ROM (config numbers, names' letters).
    assert!(accepted > 0);
}

#[test]
fn random_bytes_never_panic() {
    let good = encode(&sample()).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for _ in 0..20_000 {
        let mut b = good.clone();
        for _ in 0..1 + next() % 8 {
            let i = (next() % b.len() as u64) as usize;
            b[i] = next() as u8;
        }
        if let Ok(rom) = Rom::parse(&b) {
            walk(&rom);
        }
        // And the header with random tables behind it.
        let mut g: Vec<u8> = good[..HEADER_SIZE].to_vec();
        g.extend((0..next() % 600).map(|_| next() as u8));
        let size = g.len() as u32;
        set_u32(&mut g, 12, size);
        if let Ok(rom) = Rom::parse(&g) {
            walk(&rom);
        }
    }
}

fn tree(value: &ValueBuf) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(value, &mut out).unwrap();
    out
}

#[test]
fn value_faults() {
    let table = |entries: Vec<(String, ValueBuf)>| tree(&ValueBuf::Table(entries));
    let good = table(vec![(s("a"), ValueBuf::String(s("xy")))]);
    assert_eq!(check_tree(&good), Ok(()));
    assert_eq!(
        check_tree(&tree(&ValueBuf::Integer(1))),
        Err((0, ValueFault::NotATable))
    );
    assert_eq!(check_tree(&[]), Err((0, ValueFault::NotATable)));
    // Table: tag, count, length (9 bytes); entry: key length 2, key 1;
    // the value's tag at 12, string length at 13, bytes at 17.
    let mut b = good.clone();
    b[12] = 9;
    assert_eq!(check_tree(&b), Err((12, ValueFault::UnknownTag(9))));
    let mut b = good.clone();
    b[17] = 0xff;
    assert_eq!(check_tree(&b), Err((12, ValueFault::NotUtf8)));
    let mut b = good.clone();
    b[11] = 0xc3;
    assert_eq!(check_tree(&b), Err((9, ValueFault::NotUtf8)));
    let mut b = good.clone();
    b[13] = 3;
    assert_eq!(check_tree(&b), Err((12, ValueFault::Truncated)));
    let mut b = good.clone();
    b.push(0);
    assert_eq!(
        check_tree(&b),
        Err((good.len(), ValueFault::LengthMismatch))
    );
    let mut b = good.clone();
    b[5] += 1;
    b.push(0);
    assert_eq!(check_tree(&b), Err((0, ValueFault::LengthMismatch)));
    let mut b = good.clone();
    b[1] = 2;
    assert_eq!(check_tree(&b), Err((b.len(), ValueFault::Truncated)));
    assert_eq!(
        check_tree(&[TAG_TABLE, 1, 0, 0, 0, 5, 0, 0, 0, 1, 0, b'a', TAG_BOOL, 2]),
        Err((12, ValueFault::BadBool(2)))
    );
    // Keys must ascend strictly; the writer sorts, so write one by hand.
    let two = |k1: u8, k2: u8| {
        let mut b = vec![TAG_TABLE, 2, 0, 0, 0, 11, 0, 0, 0];
        for k in [k1, k2] {
            b.extend_from_slice(&[1, 0, k, TAG_BOOL, 1]);
        }
        b.push(0); // two entries of 5 bytes, and a stray byte
        b
    };
    assert_eq!(
        check_tree(&two(b'a', b'b')),
        Err((0, ValueFault::LengthMismatch))
    );
    let fix = |mut b: Vec<u8>| {
        b.pop();
        b[5] = 10;
        b
    };
    assert_eq!(check_tree(&fix(two(b'a', b'b'))), Ok(()));
    assert_eq!(
        check_tree(&fix(two(b'b', b'a'))),
        Err((14, ValueFault::KeysOutOfOrder))
    );
    assert_eq!(
        check_tree(&fix(two(b'a', b'a'))),
        Err((14, ValueFault::KeysOutOfOrder))
    );
    // A string whose length reaches past its container's end.
    let mut b = tree(&ValueBuf::Table(vec![(
        s("k"),
        ValueBuf::Array(vec![ValueBuf::String(s("abc"))]),
    )]));
    assert_eq!(b[12], super::value::TAG_ARRAY);
    assert_eq!(b[21], TAG_STRING);
    b[17] -= 1; // the array's length, one byte short of its string
    b.pop();
    b[5] -= 1;
    assert_eq!(check_tree(&b), Err((21, ValueFault::Truncated)));
}

#[test]
fn names() {
    for good in ["timer", "sd-driver", "a.b_c", &"n".repeat(NAME_LEN)] {
        assert!(valid_name(good), "{good}");
    }
    for bad in ["", "my timer", "x/y", "ü", &"n".repeat(NAME_LEN + 1)] {
        assert!(!valid_name(bad), "{bad}");
    }
    for good in ["Log", "File_system", "X2", &"S".repeat(SERVICE_LEN)] {
        assert!(valid_service(good), "{good}");
    }
    for bad in ["", "2fast", "_x", "Block device", "Nic-x", &"S".repeat(33)] {
        assert!(!valid_service(bad), "{bad}");
    }
    assert!(valid_caps(16) && valid_caps(65536) && valid_caps(64));
    assert!(!valid_caps(8) && !valid_caps(100) && !valid_caps(131072) && !valid_caps(0));
}

#[test]
fn restart_delays_double_up_to_the_cap() {
    let r = Restart::Always {
        max: 40,
        backoff_ms: 100,
    };
    assert_eq!(r.delay_ms(0), None);
    assert_eq!(r.delay_ms(1), Some(100));
    assert_eq!(r.delay_ms(2), Some(200));
    assert_eq!(r.delay_ms(10), Some(51_200));
    assert_eq!(r.delay_ms(11), Some(MAX_RESTART_DELAY_MS));
    assert_eq!(r.delay_ms(40), Some(MAX_RESTART_DELAY_MS));
    assert_eq!(r.delay_ms(41), None);
    let r = Restart::Always {
        max: 2,
        backoff_ms: 0,
    };
    assert_eq!(r.delay_ms(2), Some(0));
    assert_eq!(Restart::Never.delay_ms(1), None);
    let huge = Restart::Always {
        max: MAX_RESTARTS,
        backoff_ms: MAX_BACKOFF_MS,
    };
    assert_eq!(huge.delay_ms(MAX_RESTARTS), Some(MAX_RESTART_DELAY_MS));
}

#[test]
fn errors_read_well() {
    let e = at(
        Place::Component(2),
        Fault::NotProvided {
            service: 3,
            target: PARENT,
        },
    );
    assert_eq!(
        e.to_string(),
        "config ROM component 2: routes service 3 to the parent, which does not provide it"
    );
    let e = at(
        Place::Component(0),
        Fault::BadValue {
            at: 12,
            fault: ValueFault::UnknownTag(9),
        },
    );
    assert_eq!(
        e.to_string(),
        "config ROM component 0: config byte 12: unknown value tag 9"
    );
    assert_eq!(
        EncodeError::Invalid(at(Place::Header, Fault::BadMagic)).to_string(),
        "config ROM: does not start with the magic \"PECANCFG\""
    );
}

#[test]
fn devices_round_trip_and_are_never_shared() {
    let spec = sample();
    let rom_bytes = encode(&spec).unwrap();
    let rom = Rom::parse(&rom_bytes).unwrap();
    let timer = rom.component(0).unwrap();
    assert_eq!(
        timer.devices().collect::<Vec<_>>(),
        [
            Device::IoPorts {
                first: 0x40,
                last: 0x43
            },
            Device::Irq(0)
        ]
    );
    assert_eq!(rom.component(2).unwrap().devices().count(), 0);
    assert_eq!(rom.to_spec(), spec);

    let c = Place::Component;
    // Another component asking for a port of the PIT, or for its IRQ.
    let mut spec = sample();
    spec.components[2].devices = vec![Device::IoPorts {
        first: 0x43,
        last: 0x43,
    }];
    assert_eq!(invalid(&spec), at(c(2), Fault::DeviceShared(4)));
    let mut spec = sample();
    spec.components[1].devices.push(Device::Irq(0));
    assert_eq!(invalid(&spec), at(c(1), Fault::DeviceShared(4)));
    // The same IRQ twice in one component.
    let mut spec = sample();
    spec.components[0].devices.push(Device::Irq(0));
    assert_eq!(invalid(&spec), at(c(0), Fault::DeviceShared(2)));
    // The kernel's serial console, the cascade, an IRQ past 15, an empty
    // range, too many ranges, ports after IRQs.
    let mut spec = sample();
    spec.components[2].devices = vec![Device::IoPorts {
        first: 0x3f0,
        last: 0x3f8,
    }];
    assert_eq!(invalid(&spec), at(c(2), Fault::KernelPorts(4)));
    for bad in [
        Device::Irq(2),
        Device::Irq(16),
        Device::IoPorts { first: 9, last: 8 },
    ] {
        let mut spec = sample();
        spec.components[2].devices = vec![bad];
        assert_eq!(invalid(&spec), at(c(2), Fault::BadDevice(4)), "{bad:?}");
    }
    let mut spec = sample();
    spec.components[2].devices = (0..5)
        .map(|i| Device::IoPorts {
            first: 0x100 + i,
            last: 0x100 + i,
        })
        .collect();
    assert_eq!(invalid(&spec), at(c(2), Fault::TooManyDevices));
    let mut spec = sample();
    spec.components[2].devices = vec![
        Device::Irq(5),
        Device::IoPorts {
            first: 0x60,
            last: 0x60,
        },
    ];
    assert_eq!(invalid(&spec), at(c(2), Fault::TooManyDevices));

    // Records that do not tile the table: the timer's range moved onto
    // the driver's.
    let mut b = rom_bytes.clone();
    set_u16(&mut b, HEADER_SIZE + 48, 2);
    assert_eq!(
        Rom::parse(&b),
        Err(at(c(0), Fault::BadRange(List::Devices)))
    );
}
