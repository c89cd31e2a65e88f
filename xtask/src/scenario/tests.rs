use super::*;
use crate::util::{temp_dir, workspace_root};

/// A workspace in a temporary directory with `scenarios/` and one
/// component, `hello`.
fn workspace(tag: &str) -> PathBuf {
    let root = temp_dir(tag);
    std::fs::create_dir_all(dir(&root)).unwrap();
    std::fs::create_dir_all(root.join("components/hello/src")).unwrap();
    std::fs::write(
        root.join("components/hello/Cargo.toml"),
        "[package]\nname = \"hello\"\n",
    )
    .unwrap();
    std::fs::write(root.join("components/hello/src/main.rs"), "").unwrap();
    root
}

#[test]
fn listing_and_loading() {
    let root = workspace("scenarios");
    let dir = dir(&root);
    std::fs::write(
        dir.join("demo.toml"),
        "description = \"The demo\"\ncmdline = \"a=b\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("bench.toml"), "description = \"Benchmarks\"\n").unwrap();
    std::fs::write(dir.join("bad.toml"), "description = \"x\"\ncolour = 1\n").unwrap();
    std::fs::write(
        dir.join("worse.toml"),
        "description = \"x\"\n[[component]]\nname = \"nope\"\nram_mib = 1\ncaps = 16\n",
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not a scenario").unwrap();
    // A scenario that names itself as its update: an error in the listing
    // (this recursed until the stack overflowed).
    std::fs::write(
        dir.join("loop.toml"),
        "description = \"x\"\nupdate = \"loop\"\n[[component]]\nname = \"hello\"\nram_mib = 1\ncaps = 16\n",
    )
    .unwrap();

    let listed = list(&root).unwrap();
    let names: Vec<_> = listed.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["bad", "bench", "demo", "loop", "worse"]);
    let looped = listed[3].description.as_ref().unwrap_err();
    assert!(
        looped.ends_with(
            "loop.toml:2:10: update: loop names an update of its own (one update per scenario)"
        ),
        "{looped}"
    );
    let listed: Vec<_> = listed.into_iter().filter(|l| l.name != "loop").collect();
    assert_eq!(listed[2].description, Ok("The demo".to_string()));
    let broken = listed[0].description.as_ref().unwrap_err();
    assert!(broken.contains("bad.toml:2:1"), "{broken}");
    let broken = listed[3].description.as_ref().unwrap_err();
    assert!(
        broken.ends_with("worse.toml:3:8: component \"nope\": binary: no component \"nope\" in components/ (the binary defaults to the name)"),
        "{broken}"
    );

    let text = format_listing(&listed);
    assert!(text.contains("  bench  Benchmarks"), "{text}");
    assert!(text.contains("  demo   The demo"), "{text}");

    let demo = load(&root, "demo").unwrap();
    assert_eq!(demo.cmdline, "a=b");
    assert_eq!(demo.name, "demo");
    assert!(demo.config.is_none());
    assert_eq!(demo.rom().unwrap(), None);
    assert_eq!(load(&root, "bench").unwrap().cmdline, "");

    let err = format!("{:#}", load(&root, "nope").unwrap_err());
    assert!(err.contains("unknown scenario `nope`"), "{err}");
    assert!(err.contains("demo   The demo"), "{err}");
    assert!(load(&root, "../demo").is_err());

    // A path ending in .toml is a file anywhere.
    let elsewhere = root.join("elsewhere.toml");
    std::fs::write(&elsewhere, "description = \"From a path\"\n").unwrap();
    let s = load(&root, elsewhere.to_str().unwrap()).unwrap();
    assert_eq!(
        (s.name.as_str(), s.description.as_str()),
        ("elsewhere", "From a path")
    );
    let err = format!("{:#}", load(&root, "missing.toml").unwrap_err());
    assert!(
        err.starts_with("reading scenario file missing.toml"),
        "{err}"
    );

    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn machine_and_defaults() {
    let s = parse(Path::new("scenarios/x.toml"), "description = 'x'\n", &[]).unwrap();
    assert_eq!(
        s.machine,
        Machine {
            smp: 1,
            memory_mib: 256
        }
    );
    let s = parse(
        Path::new("scenarios/x.toml"),
        "description = 'x'\nsmp = 4\nmemory_mib = 1024\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        s.machine,
        Machine {
            smp: 4,
            memory_mib: 1024
        }
    );
    let e = |text: &str| {
        format!(
            "{:#}",
            parse(Path::new("scenarios/x.toml"), text, &[]).unwrap_err()
        )
    };
    assert_eq!(
        e("description = 'x'\nsmp = 0\n"),
        "scenarios/x.toml:2:7: smp: 0 is not from 1 to 255"
    );
    assert_eq!(
        e("description = 'x'\nsmp = 256\n"),
        "scenarios/x.toml:2:7: smp: 256 is not from 1 to 255"
    );
    assert_eq!(
        e("description = 'x'\nmemory_mib = 8\n"),
        "scenarios/x.toml:2:14: memory_mib: 8 is not from 12 to 1048576 (1 TiB)"
    );
    assert_eq!(
        e("description = 'x'\nmemory_mib = 1048577\n"),
        "scenarios/x.toml:2:14: memory_mib: 1048577 is not from 12 to 1048576 (1 TiB)"
    );
    assert_eq!(
        e("description = 'x'\nsmp = '2'\n"),
        "scenarios/x.toml:2:7: smp: invalid type: string \"2\", expected u32"
    );
}

#[test]
fn checked_again_for_another_machine() {
    let text = "description = 'x'\nsmp = 2\nmemory_mib = 64\n\
                [[component]]\nname = 'hello'\nram_mib = 16\ncaps = 16\ncpu = 1\n";
    let s = parse(Path::new("scenarios/x.toml"), text, &["hello".to_string()]).unwrap();
    assert!(s.config.is_some());
    assert!(s.check_machine(s.machine).is_ok());
    assert!(s
        .check_machine(Machine {
            smp: 8,
            memory_mib: 4096
        })
        .is_ok());
    let e = format!(
        "{:#}",
        s.check_machine(Machine {
            smp: 1,
            memory_mib: 32
        })
        .unwrap_err()
    );
    assert_eq!(
        e,
        "scenario x checked for smp = 1, memory_mib = 32: \
         scenarios/x.toml:8:7: component \"hello\": cpu: 1 does not exist: the machine has 1 CPU \
         (smp = 1)"
    );
}

/// The memory rule before the build: a refusal at the `memory_mib` key
/// (else the first component) with what is short, the least memory and
/// the blocks; more memory starts it.
#[test]
fn memory_rule_before_the_build() {
    let text = "description = 'x'\nmemory_mib = 64\n\
                [[component]]\nname = 'hello'\nram_mib = 16\ncaps = 16\n";
    let s = parse(Path::new("scenarios/x.toml"), text, &["hello".to_string()]).unwrap();
    assert_eq!(
        format!("{:#}", s.check_memory(s.machine).unwrap_err()),
        "scenarios/x.toml:2:14: the scenario cannot start on a machine of 64 MiB: root cannot \
         start init: 32 MiB in blocks of 32 MiB or more are needed, 0 bytes are there (first \
         missing: init's memory for the components); it needs memory_mib = 69 at least; the \
         blocks are hello 32 MiB, init's own 1 MiB (docs/scenarios.md, \"Memory\")"
    );
    let more = Machine {
        smp: 1,
        memory_mib: 69,
    };
    assert!(s.check_memory(more).is_ok());
    let text = text.replace("memory_mib = 64\n", "");
    let s = parse(Path::new("scenarios/x.toml"), &text, &["hello".to_string()]).unwrap();
    let at_least = Machine {
        smp: 1,
        memory_mib: 64,
    };
    let e = format!("{:#}", s.check_memory(at_least).unwrap_err());
    assert!(
        e.starts_with("scenarios/x.toml:2:1: the scenario cannot start"),
        "{e}"
    );
}

/// Every scenario of the workspace passes the checker against the real
/// components, and those with components make a ROM that decodes.
#[test]
fn workspace_scenarios_check() {
    let root = workspace_root();
    let listed = list(&root).unwrap();
    assert!(listed.iter().any(|l| l.name == "demo"));
    for l in &listed {
        let scenario = load(&root, &l.name).unwrap_or_else(|e| panic!("{e:#}"));
        // All but the one made to show root's own refusal pass the memory
        // rule before the build (tests/init-too-large.toml).
        let memory = scenario.check_memory(scenario.machine);
        assert_eq!(memory.is_ok(), l.name != "init-too-large", "{memory:?}");
        if let Some(rom) = scenario.rom().unwrap() {
            let parsed = ucore::config::Rom::parse(&rom).unwrap();
            assert_eq!(Some(parsed.to_spec()), scenario.config, "{}", l.name);
        }
    }
}

#[test]
fn framework_example_is_a_full_config() {
    let root = workspace_root();
    let scenario = load(&root, "framework-example").unwrap();
    let rom = scenario.rom().unwrap().unwrap();
    let rom = ucore::config::Rom::parse(&rom).unwrap();
    assert!(rom.component_count() >= 3);
    assert!(rom.parent_provides().count() >= 1);
    // Every key of the format is used somewhere.
    let components: Vec<_> = rom.components().collect();
    assert!(components.iter().any(|c| c.name != c.binary));
    assert!(components.iter().any(|c| c.cpu != 0));
    assert!(components
        .iter()
        .any(|c| c.priority != ucore::config::DEFAULT_PRIORITY));
    assert!(components
        .iter()
        .any(|c| matches!(c.restart, ucore::config::Restart::Always { .. })));
    assert!(components.iter().any(|c| !c.config.is_empty()));
    assert!(components.iter().any(|c| c
        .routes()
        .any(|r| r.target != ucore::config::Target::Parent)));
}

#[test]
fn many_errors_are_capped() {
    let mut text = String::from("description = 'x'\n");
    for i in 0..2000 {
        text.push_str(&format!(
            "[[component]]\nname = \"c{i}\"\nbinary = \"nope{i}\"\nram_mib = 1\ncaps = 16\n"
        ));
    }
    let e = format!(
        "{:#}",
        parse(Path::new("scenarios/x.toml"), &text, &["hello".to_string()]).unwrap_err()
    );
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), MAX_ERRORS_SHOWN + 1, "{e}");
    assert_eq!(
        lines[0],
        "scenarios/x.toml:4:10: component \"c0\": binary: no component \"nope0\" in components/"
    );
    // The 50th error, of the 50th component: its line is computed right.
    // (2,000 bad binaries, and the RAM and capability totals over the
    // machine: 2,002 errors.)
    assert!(
        lines[49].starts_with("scenarios/x.toml:249:10: component \"c49\""),
        "{}",
        lines[49]
    );
    assert_eq!(
        lines[50],
        "... and 1951 more errors (2001 in all; the first 50 are shown)"
    );
}

#[test]
fn devices_in_file_order() {
    use crate::devices::{DiskSource, Display};
    let text = "description = 'd'\ndisplay = 'bochs'\n\n[[disk]]\nname = 'b'\nsize_mib = 2\n\n\
                [[disk]]\nname = 'a'\nimage = 'README.md'\n\n[[nic]]\nname = 'net0'\n\
                forward = [{ guest = 80 }, { guest = 22 }]\n\n[[nic]]\nname = 'net1'\n";
    let s = parse(Path::new("scenarios/d.toml"), text, &[]).unwrap();
    let d = &s.devices;
    let disks: Vec<_> = d.disks.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(disks, ["b", "a"]);
    assert_eq!(d.disks[0].source, DiskSource::Blank { size_mib: 2 });
    assert_eq!(
        d.disks[1].source,
        DiskSource::Image(workspace_root().join("README.md"))
    );
    assert_eq!(d.nics[0].forward, [80, 22]);
    assert!(d.nics[1].forward.is_empty());
    assert_eq!(d.display, Some(Display::Bochs));
    assert!(d.forwards());
    // A generated image: checked here, built only when a run needs it.
    let s = parse(
        Path::new("scenarios/g.toml"),
        "description = 'd'\n[[disk]]\nname = 'card'\nbuild = 'card-gpt'\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        s.devices.disks[0].source,
        DiskSource::Built(crate::gendisk::Recipe::CardGpt)
    );
    // Without devices: nothing to attach.
    let plain = parse(Path::new("scenarios/p.toml"), "description = 'd'\n", &[]).unwrap();
    assert!(plain.devices.is_empty());
    // Errors name the line of the key.
    let e = format!(
        "{:#}",
        parse(
            Path::new("scenarios/d.toml"),
            "description = 'd'\n[[nic]]\nname = 'n'\nforward = [{ guest = 80, host = 8080 }]\n",
            &[]
        )
        .unwrap_err()
    );
    assert!(
        e.starts_with("scenarios/d.toml:4:") && e.contains("unknown field `host`"),
        "{e}"
    );
}
