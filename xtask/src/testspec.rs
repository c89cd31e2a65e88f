//! Scenario-test files: `tests/NAME.toml`, one QEMU boot each, checked
//! against expected and forbidden serial output and the guest's exit.
//!
//! ```toml
//! description = "timer interrupts arrive"   # required
//! scenario = "kernel"                 # optional (default "kernel"): scenarios/NAME.toml
//! cmdline = "pecan.selftest=timer"    # optional: appended to the scenario's cmdline
//! smp = 1                             # optional (default: the scenario's)
//! memory_mib = 256                    # optional (default: the scenario's)
//! icount = true                       # optional (false): deterministic instruction counting
//! timeout_secs = 30                   # required
//! expect = ["regex one", "regex two"] # required: in this order in the serial output;
//!                                     # an array in the list, ["a", "b"], matches in any order
//! forbid = ["(?i)panic"]              # optional: any match fails the test at once
//! exit = "success"                    # required: "success" (QEMU 33) or "failure" (QEMU 35)
//! memory_rule = false                 # optional (true): false boots a scenario the memory
//!                                     # rule refuses, to test root's and init's own refusal
//! least_memory = true                 # optional (false): boot with the least memory_mib the
//!                                     # memory rule accepts for the scenario's boot image
//! root_memory = true                  # optional (false): root's `untyped blocks` line must
//!                                     # hold at least the rule's model (ucore::plan::RootMemory)
//!
//! [[module]]                          # optional, repeatable: a malformed boot module
//! name = "bad-machine"                #   its boot-image name
//! from = "hello"                      #   the component whose ELF file it is made from
//! defect = "wrong-machine"            #   see crate::fixtures
//!
//! image_defect = "overlapping-entries" # optional: the packed image corrupted
//!                                     #   (see crate::fixtures::ImageDefect)
//!
//! [[config_value]]                    # optional, repeatable: a value put into the
//! component = "broken"                #   config ROM after the checker (see
//! key = "arg"                         #   crate::fixtures), for tests of what init
//! value = "abc"                       #   does with a config the checker refuses
//!
//! [[monitor]]                         # optional, repeatable: a QEMU monitor command
//! after = '^Pecan'                    #   when a serial line matches (crate::actions)
//! command = "info pci"                #   placeholders: see crate::actions; a JSON
//!                                     #   object is a QMP command (input-send-event)
//! expect = ['1af4:1042']              #   optional: in its output, in order
//!
//! [[host]]                            # optional, repeatable: a host command (sh -c)
//! at = "end"                          #   after QEMU exited; or after = 'REGEX'
//! command = "test -s {disk.d0}"       #   its exit status decides
//! timeout_secs = 30                   #   optional (30)
//! ```
//!
//! Unknown keys, bad values and bad regexes are errors naming the file and
//! line; so is a module name that is empty, too long for the boot image,
//! or given twice (a `from` that names no component is reported when the
//! image is built, also with the line).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The scenario a test without a `scenario` key boots: the bare kernel and
/// root, plus the test's `cmdline` (`scenarios/kernel.toml`).
pub const DEFAULT_SCENARIO: &str = "kernel";

use anyhow::{Context, Result};
use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use crate::actions::{Action, Kind, Template};
use crate::config::Machine;
use crate::fixtures::{Defect, ImageDefect};
use crate::qemu;
use crate::scenario::{self, Scenario};
use crate::tomlfile;
use crate::util::display_path;
use ucore::config::ValueBuf;

/// The exit the test expects from the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExpectedExit {
    Success,
    Failure,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    description: String,
    scenario: Option<Spanned<String>>,
    cmdline: Option<String>,
    smp: Option<Spanned<u32>>,
    memory_mib: Option<Spanned<u32>>,
    #[serde(default)]
    icount: bool,
    timeout_secs: Spanned<u64>,
    expect: Vec<Spanned<RawStep>>,
    #[serde(default)]
    forbid: Vec<Spanned<String>>,
    exit: ExpectedExit,
    #[serde(default = "yes")]
    memory_rule: bool,
    #[serde(default)]
    root_memory: bool,
    #[serde(default)]
    least_memory: bool,
    #[serde(default, rename = "module")]
    modules: Vec<Spanned<RawModule>>,
    #[serde(default, rename = "config_value")]
    config_values: Vec<Spanned<RawConfigValue>>,
    image_defect: Option<Spanned<ImageDefect>>,
    #[serde(default, rename = "monitor")]
    monitors: Vec<Spanned<RawMonitor>>,
    #[serde(default, rename = "host")]
    hosts: Vec<Spanned<RawHost>>,
}

/// A `[[monitor]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMonitor {
    after: Spanned<String>,
    command: Spanned<String>,
    #[serde(default)]
    expect: Vec<Spanned<String>>,
}

/// A `[[host]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    after: Option<Spanned<String>>,
    at: Option<Spanned<String>>,
    command: Spanned<String>,
    timeout_secs: Option<Spanned<u64>>,
}

/// A host command's time limit without `timeout_secs`.
pub const HOST_TIMEOUT: Duration = Duration::from_secs(30);

fn yes() -> bool {
    true
}

/// An `expect` entry as written: one pattern, or patterns in any order.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawStep {
    One(String),
    AnyOrder(Vec<String>),
}

/// A `[[module]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModule {
    name: Spanned<String>,
    from: String,
    defect: Defect,
}

/// A `[[config_value]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfigValue {
    component: String,
    key: Spanned<String>,
    value: Spanned<toml::Value>,
}

/// A value the test puts into the config ROM after the scenario was
/// checked: `key` of `component`'s config table is `value` (replaced, or
/// added), whatever the checker says of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigValue {
    pub component: String,
    pub key: String,
    pub value: ValueBuf,
    /// The `[[config_value]]` table in the file (for errors).
    span: Range<usize>,
}

/// A malformed module the test adds to its boot image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Its boot-image name.
    pub name: String,
    /// The component whose ELF file it is derived from.
    pub from: String,
    pub defect: Defect,
    /// The `[[module]]` table in the file (for errors).
    span: Range<usize>,
}

/// A compiled regex with its source text.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub source: String,
    pub regex: Regex,
}

/// One step of `expect`: its patterns must all match, in any order, after
/// the previous step's and before the next step's (one pattern: in order).
pub type Step = Vec<Pattern>;

/// A parsed, checked scenario test.
#[derive(Debug, Clone)]
pub struct TestSpec {
    /// The file stem.
    pub name: String,
    pub path: PathBuf,
    pub description: String,
    pub scenario: String,
    /// The test's `scenario` key (for errors about it), if given.
    scenario_span: Option<Range<usize>>,
    /// Appended to the scenario's command line.
    pub cmdline: String,
    /// The machine's CPUs and memory, when the test sets them (else the
    /// scenario's, see [`TestSpec::machine`]).
    pub smp: Option<u32>,
    pub memory_mib: Option<u32>,
    /// Boot under `-icount` (TCG, virtual time follows executed
    /// instructions: `qemu::Machine::icount`), so timings repeat exactly.
    pub icount: bool,
    pub timeout: Duration,
    pub expect: Vec<Step>,
    pub forbid: Vec<Pattern>,
    pub exit: ExpectedExit,
    /// Whether the scenario must pass the memory rule (`crate::memory`);
    /// false only for tests of what root and init do with one that fails.
    pub memory_rule: bool,
    /// Whether root's `root: untyped blocks: ...` line is checked against
    /// the rule's model of root's memory (`crate::memory::root_model`).
    pub root_memory: bool,
    /// Whether the test boots with the least memory the rule accepts for
    /// its boot image (`crate::memory::least_for_image`), not `memory_mib`.
    pub least_memory: bool,
    /// Malformed modules added to the boot image, in order.
    pub modules: Vec<Module>,
    /// Values put into the config ROM after the checker, in order.
    pub config_values: Vec<ConfigValue>,
    /// The corruption of the packed boot image, if any, and its key in
    /// the file (for errors).
    pub image_defect: Option<ImageDefect>,
    image_defect_span: Range<usize>,
    /// The `[[monitor]]` and `[[host]]` steps, in file order.
    pub actions: Vec<Action>,
    /// The file's text (for errors with line numbers).
    text: String,
}

/// Parses the test file `path` whose contents are `text`.
pub fn parse(path: &Path, text: &str) -> Result<TestSpec> {
    let raw: Raw = tomlfile::parse(path, text)?;
    let error =
        |span: Range<usize>, message: String| tomlfile::error_at(path, text, span, &message);
    let pattern = |source: String, span: Range<usize>| match Regex::new(&source) {
        Ok(regex) => Ok(Pattern { source, regex }),
        Err(e) => Err(error(span, format!("bad regex: {e}"))),
    };
    let compile = |patterns: Vec<Spanned<String>>| -> Result<Vec<Pattern>> {
        patterns
            .into_iter()
            .map(|p| {
                let span = p.span();
                pattern(p.into_inner(), span)
            })
            .collect()
    };
    let steps = |entries: Vec<Spanned<RawStep>>| -> Result<Vec<Step>> {
        entries
            .into_iter()
            .map(|entry| {
                let span = entry.span();
                match entry.into_inner() {
                    RawStep::One(source) => Ok(vec![pattern(source, span)?]),
                    RawStep::AnyOrder(sources) if sources.is_empty() => {
                        Err(error(span, "an any-order group needs a pattern".into()))
                    }
                    RawStep::AnyOrder(sources) => sources
                        .into_iter()
                        .map(|source| pattern(source, span.clone()))
                        .collect(),
                }
            })
            .collect()
    };

    if *raw.timeout_secs.get_ref() == 0 {
        return Err(error(
            raw.timeout_secs.span(),
            "timeout_secs must be at least 1".into(),
        ));
    }
    let smp = match raw.smp {
        Some(s) if *s.get_ref() == 0 || *s.get_ref() > 255 => {
            return Err(error(s.span(), "smp must be between 1 and 255".into()));
        }
        Some(s) => Some(s.into_inner()),
        None => None,
    };
    let memory_mib = match raw.memory_mib {
        Some(m) if !(qemu::MIN_MEMORY_MIB..=qemu::MAX_MEMORY_MIB).contains(m.get_ref()) => {
            return Err(error(
                m.span(),
                format!(
                    "memory_mib must be from {} to {}",
                    qemu::MIN_MEMORY_MIB,
                    qemu::MAX_MEMORY_MIB
                ),
            ));
        }
        Some(m) => Some(m.into_inner()),
        None => None,
    };
    let (scenario, scenario_span) = match raw.scenario {
        Some(s) => {
            let span = s.span();
            (s.into_inner(), Some(span))
        }
        None => (DEFAULT_SCENARIO.to_string(), None),
    };
    let mut modules: Vec<Module> = Vec::new();
    for m in raw.modules {
        let span = m.span();
        let m = m.into_inner();
        let name_span = m.name.span();
        let name = m.name.into_inner();
        let fault = if name.is_empty() || name.contains('\0') {
            Some("a module name must be non-empty and without NUL".to_string())
        } else if name.len() > formats::bootimage::NAME_LEN {
            Some(format!(
                "module name `{name}` is longer than {} bytes",
                formats::bootimage::NAME_LEN
            ))
        } else if modules.iter().any(|other| other.name == name) {
            Some(format!("module `{name}` is listed twice"))
        } else {
            None
        };
        if let Some(message) = fault {
            return Err(error(name_span, message));
        }
        modules.push(Module {
            name,
            from: m.from,
            defect: m.defect,
            span,
        });
    }
    let mut config_values = Vec::new();
    for c in raw.config_values {
        let span = c.span();
        let c = c.into_inner();
        if c.key.get_ref().is_empty() {
            return Err(error(c.key.span(), "a config key must not be empty".into()));
        }
        let value_span = c.value.span();
        let value = config_value(c.value.get_ref())
            .map_err(|message| error(value_span, format!("value: {message}")))?;
        config_values.push(ConfigValue {
            component: c.component,
            key: c.key.into_inner(),
            value,
            span,
        });
    }
    let line_of = |offset: usize| tomlfile::line_column(text, offset).0;
    let template = |command: &Spanned<String>| {
        if command.get_ref().trim().is_empty() {
            return Err(error(command.span(), "command: empty".into()));
        }
        Template::parse(command.get_ref()).map_err(|(offset, message)| {
            // Inside the string, after its opening quote.
            let at = command.span().start + 1 + offset;
            error(at..at, format!("command: {message}"))
        })
    };
    let mut actions = Vec::new();
    for m in raw.monitors {
        let span = m.span();
        let m = m.into_inner();
        let after_span = m.after.span();
        if crate::actions::is_qmp(m.command.get_ref())
            // `{{` and `}}` are the template's literal braces.
            && serde_json::from_str::<serde_json::Value>(
                &m.command.get_ref().replace("{{", "{").replace("}}", "}"),
            )
            .is_err()
        {
            return Err(error(
                m.command.span(),
                "command: starts with `{` but is no JSON (a QMP command is a JSON object)".into(),
            ));
        }
        actions.push(Action {
            command: template(&m.command)?,
            command_offset: m.command.span().start,
            after: Some(pattern(m.after.into_inner(), after_span)?),
            kind: Kind::Monitor {
                expect: compile(m.expect)?,
            },
            line: line_of(span.start),
            offset: span.start,
        });
    }
    for h in raw.hosts {
        let span = h.span();
        let h = h.into_inner();
        let after =
            match (h.after, h.at) {
                (Some(after), None) => {
                    let after_span = after.span();
                    Some(pattern(after.into_inner(), after_span)?)
                }
                (None, Some(at)) if at.get_ref() == "end" => None,
                (None, Some(at)) => {
                    return Err(error(
                        at.span(),
                        format!(
                            "at: unknown \"{}\" (the only one is \"end\": after QEMU exited)",
                            at.get_ref()
                        ),
                    ))
                }
                (Some(after), Some(_)) => {
                    return Err(error(
                        after.span(),
                        "after and at: give one of them (after = 'REGEX' runs the command when a \
                     serial line matches, at = \"end\" after QEMU exited)"
                            .into(),
                    ))
                }
                (None, None) => return Err(error(
                    span,
                    "[[host]] needs after = 'REGEX' (when a serial line matches) or at = \"end\" \
                     (after QEMU exited)"
                        .into(),
                )),
            };
        let timeout = match h.timeout_secs {
            Some(t) if *t.get_ref() == 0 => {
                return Err(error(t.span(), "timeout_secs must be at least 1".into()));
            }
            Some(t) => Duration::from_secs(t.into_inner()),
            None => HOST_TIMEOUT,
        };
        actions.push(Action {
            command: template(&h.command)?,
            command_offset: h.command.span().start,
            after,
            kind: Kind::Host { timeout },
            line: line_of(span.start),
            offset: span.start,
        });
    }
    actions.sort_by_key(|a| a.offset);
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(TestSpec {
        name,
        path: path.to_path_buf(),
        description: raw.description,
        scenario,
        scenario_span,
        cmdline: raw.cmdline.unwrap_or_default(),
        smp,
        memory_mib,
        icount: raw.icount,
        timeout: Duration::from_secs(raw.timeout_secs.into_inner()),
        expect: steps(raw.expect)?,
        forbid: compile(raw.forbid)?,
        exit: raw.exit,
        memory_rule: raw.memory_rule,
        root_memory: raw.root_memory,
        least_memory: raw.least_memory,
        modules,
        config_values,
        image_defect: raw.image_defect.as_ref().map(|d| *d.get_ref()),
        image_defect_span: raw.image_defect.map_or(0..0, |d| d.span()),
        actions,
        text: text.to_string(),
    })
}

/// An error about a command of the test (already naming its line).
#[derive(Debug)]
struct ActionError(String);

impl std::fmt::Display for ActionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ActionError {}

/// `value` as a config-ROM value; any TOML value but a date or time
/// (the ROM has no such type).
fn config_value(value: &toml::Value) -> std::result::Result<ValueBuf, String> {
    Ok(match value {
        toml::Value::Boolean(b) => ValueBuf::Bool(*b),
        toml::Value::Integer(i) => ValueBuf::Integer(*i),
        toml::Value::Float(x) => ValueBuf::Float(*x),
        toml::Value::String(s) => ValueBuf::String(s.clone()),
        toml::Value::Datetime(_) => return Err("a config ROM has no date or time type".into()),
        toml::Value::Array(items) => {
            ValueBuf::Array(items.iter().map(config_value).collect::<Result<_, _>>()?)
        }
        toml::Value::Table(entries) => ValueBuf::Table(
            entries
                .iter()
                .map(|(k, v)| Ok((k.clone(), config_value(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// Reads and parses the test file `path`.
pub fn load(path: &Path) -> Result<TestSpec> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", display_path(path)))?;
    parse(path, &text)
}

impl TestSpec {
    /// Loads the scenario the test boots from the workspace at `root` and
    /// checks it for the test's machine; an error names the test file and
    /// the line of its `scenario` key.
    pub fn load_scenario(&self, root: &Path) -> Result<Scenario> {
        let loaded = scenario::load(root, &self.scenario).and_then(|scenario| {
            scenario.check_machine(self.machine(&scenario))?;
            self.check_actions(&scenario)?;
            if self.memory_rule {
                scenario.check_memory(self.machine(&scenario))?;
            }
            Ok(scenario)
        });
        loaded.map_err(|e| match &self.scenario_span {
            _ if e.downcast_ref::<ActionError>().is_some() => e,
            Some(span) => {
                tomlfile::error_at(&self.path, &self.text, span.clone(), &format!("{e:#}"))
            }
            None => e.context(format!("{} (default scenario)", display_path(&self.path))),
        })
    }

    /// Checks that the disks and forwards the commands name are the
    /// scenario's; an error names the command's line.
    fn check_actions(&self, scenario: &Scenario) -> Result<()> {
        for action in &self.actions {
            if let Err(message) = action.command.check(&scenario.devices) {
                // Reported at the test's line, not the scenario key's.
                return Err(anyhow::Error::new(ActionError(format!(
                    "{:#}",
                    tomlfile::error_at(
                        &self.path,
                        &self.text,
                        action.command_offset..action.command_offset,
                        &format!("command: {message} (scenario {})", scenario.name)
                    )
                ))));
            }
        }
        Ok(())
    }

    /// Whether the test needs a work directory of its own: its scenario
    /// has devices or it acts on the host (`target/test-work/NAME/`).
    pub fn needs_work_dir(&self, scenario: &Scenario) -> bool {
        !self.actions.is_empty() || !scenario.devices.is_empty()
    }

    /// The machine the test boots: its own `smp` and `memory_mib`, else the
    /// scenario's.
    pub fn machine(&self, scenario: &Scenario) -> Machine {
        Machine {
            smp: self.smp.unwrap_or(scenario.machine.smp),
            memory_mib: self.memory_mib.unwrap_or(scenario.machine.memory_mib),
        }
    }

    /// An error about `module` of this test, naming the file and the line
    /// of its `[[module]]` table.
    pub fn module_error(&self, module: &Module, message: &str) -> anyhow::Error {
        tomlfile::error_at(&self.path, &self.text, module.span.clone(), message)
    }

    /// An error about `value` of this test, naming the file and the line
    /// of its `[[config_value]]` table.
    pub fn config_value_error(&self, value: &ConfigValue, message: &str) -> anyhow::Error {
        tomlfile::error_at(&self.path, &self.text, value.span.clone(), message)
    }

    /// An error about the test's `image_defect`, naming the file and the
    /// line of the key.
    pub fn image_defect_error(&self, message: &str) -> anyhow::Error {
        tomlfile::error_at(
            &self.path,
            &self.text,
            self.image_defect_span.clone(),
            message,
        )
    }

    /// Whether the test boots an image of its own (it adds modules,
    /// changes the config ROM or corrupts the image:
    /// [`crate::fixtures::test_image`]).
    pub fn has_own_image(&self) -> bool {
        !self.modules.is_empty() || !self.config_values.is_empty() || self.image_defect.is_some()
    }

    /// The kernel command line: the scenario's, then the test's.
    pub fn full_cmdline(&self, scenario: &Scenario) -> String {
        [scenario.cmdline.trim(), self.cmdline.trim()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The test files in `dir` (`*.toml`, sorted by name) whose name contains
/// `filter`, as (name, path). A missing directory holds no tests.
pub fn discover(dir: &Path, filter: Option<&str>) -> Result<Vec<(String, PathBuf)>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", display_path(dir)))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "toml") || !path.is_file() {
            continue;
        }
        let Some(name) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        if filter.is_none_or(|f| name.contains(f)) {
            found.push((name, path));
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
description = "timer interrupts arrive"
scenario = "demo"
cmdline = "pecan.selftest=timer"
smp = 2
memory_mib = 128
icount = true
timeout_secs = 30
expect = ["regex one", "regex (two)"]
forbid = ["(?i)panic"]
exit = "failure"
"#;

    fn err(text: &str) -> String {
        format!("{:#}", parse(Path::new("tests/t.toml"), text).unwrap_err())
    }

    #[test]
    fn good_file() {
        let spec = parse(Path::new("tests/timer.toml"), GOOD).unwrap();
        assert_eq!(spec.name, "timer");
        assert_eq!(spec.description, "timer interrupts arrive");
        assert_eq!(spec.scenario, "demo");
        assert_eq!(spec.cmdline, "pecan.selftest=timer");
        assert_eq!((spec.smp, spec.memory_mib), (Some(2), Some(128)));
        assert!(spec.icount);
        assert_eq!(spec.timeout, Duration::from_secs(30));
        let sources: Vec<Vec<_>> = spec
            .expect
            .iter()
            .map(|step| step.iter().map(|p| p.source.as_str()).collect())
            .collect();
        assert_eq!(sources, [["regex one"], ["regex (two)"]]);
        assert!(spec.forbid[0].regex.is_match("KERNEL PANIC"));
        assert_eq!(spec.exit, ExpectedExit::Failure);

        let scenario = scenario::parse(
            Path::new("scenarios/demo.toml"),
            "description = ''\ncmdline = ' log=debug '\nsmp = 4\nmemory_mib = 512\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            spec.full_cmdline(&scenario),
            "log=debug pecan.selftest=timer"
        );
        assert_eq!(
            spec.machine(&scenario),
            Machine {
                smp: 2,
                memory_mib: 128
            }
        );
    }

    #[test]
    fn defaults() {
        let spec = parse(
            Path::new("tests/t.toml"),
            "description = \"d\"\ntimeout_secs = 5\nexpect = []\nexit = \"success\"\n",
        )
        .unwrap();
        assert_eq!(spec.scenario, "kernel");
        assert_eq!((spec.smp, spec.memory_mib), (None, None));
        let scenario = scenario::parse(
            Path::new("scenarios/demo.toml"),
            "description = ''\nsmp = 4\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            spec.machine(&scenario),
            Machine {
                smp: 4,
                memory_mib: 256
            }
        );
        assert!(spec.forbid.is_empty());
        assert_eq!(spec.cmdline, "");
    }

    #[test]
    fn unknown_key_names_file_and_line() {
        let text = "description = \"d\"\ntimeout_secs = 5\nexpect = []\nexit = \"success\"\nexpected = [\"x\"]\n";
        let e = err(text);
        assert!(
            e.starts_with("tests/t.toml:5:1: unknown field `expected`"),
            "{e}"
        );
    }

    #[test]
    fn missing_timeout() {
        let e = err("description = \"d\"\nexpect = []\nexit = \"success\"\n");
        assert!(e.starts_with("tests/t.toml"), "{e}");
        assert!(e.contains("missing field `timeout_secs`"), "{e}");
    }

    #[test]
    fn bad_values() {
        let e = err("description = \"d\"\ntimeout_secs = 5\nexpect = [\"ok\",\n  \"(unclosed\"]\nexit = \"success\"\n");
        assert!(e.starts_with("tests/t.toml:4:3: bad regex"), "{e}");
        let e = err("description = \"d\"\ntimeout_secs = 0\nexpect = []\nexit = \"success\"\n");
        assert!(
            e.starts_with("tests/t.toml:2:16: timeout_secs must be"),
            "{e}"
        );
        let e = err("description = \"d\"\ntimeout_secs = 1\nexpect = []\nexit = \"maybe\"\n");
        assert!(
            e.starts_with("tests/t.toml:4:8: unknown variant `maybe`"),
            "{e}"
        );
    }

    const BASE: &str = "description = \"d\"\ntimeout_secs = 5\nexpect = []\nexit = \"success\"\n";

    #[test]
    fn any_order_groups() {
        let text = BASE.replace("expect = []", "expect = ['a', ['b', 'c'],\n  'd']");
        let spec = parse(Path::new("tests/t.toml"), &text).unwrap();
        let sizes: Vec<usize> = spec.expect.iter().map(Vec::len).collect();
        assert_eq!(sizes, [1, 2, 1]);
        assert_eq!(spec.expect[1][1].source, "c");
        let e = err(&BASE.replace("expect = []", "expect = ['a',\n [ 'b', '(' ]]"));
        assert!(e.starts_with("tests/t.toml:4:2: bad regex"), "{e}");
        let e = err(&BASE.replace("expect = []", "expect = ['a', []]"));
        assert!(
            e.starts_with("tests/t.toml:3:16: an any-order group needs"),
            "{e}"
        );
        // Not a string or an array of strings: the line of `expect`.
        let e = err(&BASE.replace("expect = []", "expect = ['a', [1]]"));
        assert!(e.starts_with("tests/t.toml:3:"), "{e}");
    }

    #[test]
    fn modules() {
        let text = format!(
            "{BASE}\n[[module]]\nname = \"bad-1\"\nfrom = \"hello\"\ndefect = \"truncated\"\n\n\
             [[module]]\nname = \"bad-2\"\nfrom = \"hello\"\ndefect = \"overlapping-segments\"\n"
        );
        let spec = parse(Path::new("tests/t.toml"), &text).unwrap();
        let got: Vec<_> = spec
            .modules
            .iter()
            .map(|m| (m.name.as_str(), m.from.as_str(), m.defect))
            .collect();
        assert_eq!(
            got,
            [
                ("bad-1", "hello", Defect::Truncated),
                ("bad-2", "hello", Defect::OverlappingSegments)
            ]
        );
        let e = format!("{:#}", spec.module_error(&spec.modules[1], "boom"));
        assert_eq!(e, "tests/t.toml:11:1: boom");
        assert!(parse(Path::new("tests/t.toml"), BASE)
            .unwrap()
            .modules
            .is_empty());
    }

    #[test]
    fn bad_modules_name_the_line() {
        let module = |name: &str, defect: &str| {
            format!("\n[[module]]\nname = \"{name}\"\nfrom = \"hello\"\ndefect = \"{defect}\"\n")
        };
        let e = err(&format!("{BASE}{}", module("x", "sideways")));
        assert!(
            e.starts_with("tests/t.toml:9:10: unknown variant `sideways`"),
            "{e}"
        );
        let e = err(&format!("{BASE}{}", module("", "truncated")));
        assert!(
            e.starts_with("tests/t.toml:7:8: a module name must be"),
            "{e}"
        );
        let long = "n".repeat(49);
        let e = err(&format!("{BASE}{}", module(&long, "truncated")));
        assert!(e.contains("longer than 48 bytes"), "{e}");
        let e = err(&format!(
            "{BASE}{}{}",
            module("a", "truncated"),
            module("a", "write-execute")
        ));
        assert!(
            e.starts_with("tests/t.toml:12:8: module `a` is listed twice"),
            "{e}"
        );
        let e = err(&format!(
            "{BASE}\n[[module]]\nname = \"a\"\ndefect = \"truncated\"\n"
        ));
        assert!(e.contains("missing field `from`"), "{e}");
    }

    #[test]
    fn config_values() {
        let value = |key: &str, value: &str| {
            format!("\n[[config_value]]\ncomponent = \"c\"\nkey = \"{key}\"\nvalue = {value}\n")
        };
        let text = format!(
            "{BASE}{}{}",
            value("arg", "\"abc\""),
            value("list", "[true, 1.5, { a = -2 }]")
        );
        let spec = parse(Path::new("tests/t.toml"), &text).unwrap();
        assert!(spec.has_own_image());
        let got: Vec<_> = spec
            .config_values
            .iter()
            .map(|v| (v.component.as_str(), v.key.as_str(), v.value.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("c", "arg", ValueBuf::String("abc".into())),
                (
                    "c",
                    "list",
                    ValueBuf::Array(vec![
                        ValueBuf::Bool(true),
                        ValueBuf::Float(1.5),
                        ValueBuf::Table(vec![("a".into(), ValueBuf::Integer(-2))])
                    ])
                )
            ]
        );
        let e = format!(
            "{:#}",
            spec.config_value_error(&spec.config_values[1], "boom")
        );
        assert_eq!(e, "tests/t.toml:11:1: boom");
        assert!(!parse(Path::new("tests/t.toml"), BASE)
            .unwrap()
            .has_own_image());

        let e = err(&format!("{BASE}{}", value("", "1")));
        assert!(
            e.starts_with("tests/t.toml:8:7: a config key must not be empty"),
            "{e}"
        );
        let e = err(&format!("{BASE}{}", value("when", "1979-05-27")));
        assert!(
            e.starts_with("tests/t.toml:9:9: value: a config ROM has no date or time type"),
            "{e}"
        );
        let e = err(&format!("{BASE}{}", value("when", "[[1979-05-27]]")));
        assert!(e.contains("no date or time type"), "{e}");
        let e = err(&format!(
            "{BASE}\n[[config_value]]\ncomponent = \"c\"\nkey = \"k\"\n"
        ));
        assert!(e.contains("missing field `value`"), "{e}");
        let e = err(&format!("{BASE}{}colour = 1\n", value("k", "1")));
        assert!(e.contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn unknown_scenario_names_the_line() {
        let dir = crate::util::temp_dir("testspec");
        std::fs::create_dir_all(dir.join("scenarios")).unwrap();
        let text = "description = \"d\"\nscenario = \"nope\"\ntimeout_secs = 1\nexpect = []\nexit = \"success\"\n";
        let spec = parse(Path::new("tests/t.toml"), text).unwrap();
        let e = format!("{:#}", spec.load_scenario(&dir).unwrap_err());
        assert!(
            e.starts_with("tests/t.toml:2:12: unknown scenario `nope`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn scenario_is_checked_for_the_test_machine() {
        let dir = crate::util::temp_dir("testspec-machine");
        std::fs::create_dir_all(dir.join("scenarios")).unwrap();
        std::fs::create_dir_all(dir.join("components/hello/src")).unwrap();
        std::fs::write(
            dir.join("components/hello/Cargo.toml"),
            "[package]\nname = \"hello\"\n",
        )
        .unwrap();
        std::fs::write(dir.join("components/hello/src/main.rs"), "").unwrap();
        std::fs::write(
            dir.join("scenarios/two.toml"),
            "description = 'd'\nsmp = 2\n[[component]]\nname = 'hello'\nram_mib = 1\ncaps = 16\ncpu = 1\n",
        )
        .unwrap();
        let test = |smp: &str| {
            let text = format!("description = 'd'\nscenario = 'two'\n{smp}timeout_secs = 1\nexpect = []\nexit = 'success'\n");
            parse(Path::new("tests/t.toml"), &text)
                .unwrap()
                .load_scenario(&dir)
        };
        assert_eq!(test("").unwrap().machine.smp, 2);
        assert!(test("smp = 4\n").is_ok());
        let e = format!("{:#}", test("smp = 1\n").unwrap_err());
        assert!(
            e.starts_with(
                "tests/t.toml:2:12: scenario two checked for smp = 1, memory_mib = 256: "
            ),
            "{e}"
        );
        assert!(
            e.contains(
                ":7:7: component \"hello\": cpu: 1 does not exist: the machine has 1 CPU (smp = 1)"
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
    #[test]
    fn monitor_and_host_steps() {
        let text = format!(
            "{BASE}\n[[host]]\nat = \"end\"\ncommand = 'test -s {{disk.d0}}'\n\n\
             [[monitor]]\nafter = '^booted'\ncommand = 'info pci'\nexpect = ['1af4:1042', 'x']\n\n\
             [[host]]\nafter = 'serving'\ncommand = 'curl -sf http://127.0.0.1:{{port.net0.80}}/'\n\
             timeout_secs = 5\n"
        );
        let spec = parse(Path::new("tests/t.toml"), &text).unwrap();
        // File order, whatever the table kind.
        let got: Vec<_> = spec
            .actions
            .iter()
            .map(|a| (a.label(), a.after.as_ref().map(|p| p.source.clone())))
            .collect();
        assert_eq!(
            got,
            [
                ("[[host]] (line 6)".to_string(), None),
                (
                    "[[monitor]] (line 10)".to_string(),
                    Some("^booted".to_string())
                ),
                (
                    "[[host]] (line 15)".to_string(),
                    Some("serving".to_string())
                ),
            ]
        );
        assert!(matches!(&spec.actions[1].kind, Kind::Monitor { expect } if expect.len() == 2));
        assert!(matches!(spec.actions[0].kind, Kind::Host { timeout } if timeout == HOST_TIMEOUT));
        assert!(matches!(spec.actions[2].kind, Kind::Host { timeout } if timeout.as_secs() == 5));
        assert_eq!(
            spec.actions[2].command.source,
            "curl -sf http://127.0.0.1:{port.net0.80}/"
        );
    }

    #[test]
    fn bad_steps_name_the_line() {
        let host = |body: &str| err(&format!("{BASE}\n[[host]]\n{body}\n"));
        let e = host("command = 'true'");
        assert!(
            e.starts_with("tests/t.toml:6:1: [[host]] needs after"),
            "{e}"
        );
        let e = host("at = 'start'\ncommand = 'true'");
        assert!(
            e.starts_with("tests/t.toml:7:6: at: unknown \"start\" (the only one is \"end\""),
            "{e}"
        );
        let e = host("at = 'end'\nafter = 'x'\ncommand = 'true'");
        assert!(
            e.starts_with("tests/t.toml:8:9: after and at: give one of them"),
            "{e}"
        );
        let e = host("after = '('\ncommand = 'true'");
        assert!(e.starts_with("tests/t.toml:7:9: bad regex"), "{e}");
        let e = host("at = 'end'\ncommand = 'true'\ntimeout_secs = 0");
        assert!(
            e.starts_with("tests/t.toml:9:16: timeout_secs must be at least 1"),
            "{e}"
        );
        let e = host("at = 'end'\ncommand = ' '");
        assert!(e.starts_with("tests/t.toml:8:11: command: empty"), "{e}");
        // The placeholder's own column, inside the string.
        let e = host("at = 'end'\ncommand = 'cat {dri}/x'");
        assert!(
            e.starts_with("tests/t.toml:8:16: command: unknown placeholder `{dri}`"),
            "{e}"
        );
        let e = host("at = 'end'\ncommand = 'x'\ncolour = 1");
        assert!(e.contains("unknown field `colour`"), "{e}");
        let monitor = |body: &str| err(&format!("{BASE}\n[[monitor]]\n{body}\n"));
        let e = monitor("command = 'info pci'");
        assert!(e.contains("missing field `after`"), "{e}");
        let e = monitor("after = 'x'\ncommand = 'info pci'\nexpect = ['[']");
        assert!(e.starts_with("tests/t.toml:9:11: bad regex"), "{e}");
        let e = monitor("after = 'x'\ncommand = 'screendump {port.x}'");
        assert!(e.contains("a port is {port.NIC.GUESTPORT}"), "{e}");
        // A QMP command must be JSON (`{{`/`}}` read as the braces they
        // render to).
        let e = monitor("after = 'x'\ncommand = '{\"execute\": '");
        assert!(e.contains("starts with `{` but is no JSON"), "{e}");
        let ok =
            format!("{BASE}\n[[monitor]]\nafter = 'x'\ncommand = '{{\"execute\": \"cont\"}}'\n");
        assert!(parse(Path::new("tests/t.toml"), &ok).is_ok());
    }

    #[test]
    fn steps_are_checked_against_the_scenario_devices() {
        let dir = crate::util::temp_dir("testspec-devices");
        std::fs::create_dir_all(dir.join("scenarios")).unwrap();
        std::fs::write(
            dir.join("scenarios/m.toml"),
            "description = 'd'\n[[disk]]\nname = 'd0'\nsize_mib = 1\n",
        )
        .unwrap();
        let test = |command: &str| {
            let text = format!(
                "description = 'd'\nscenario = 'm'\ntimeout_secs = 1\nexpect = []\n\
                 exit = 'success'\n[[host]]\nat = 'end'\ncommand = '{command}'\n"
            );
            parse(Path::new("tests/t.toml"), &text)
                .unwrap()
                .load_scenario(&dir)
        };
        let scenario = test("test -s {disk.d0}").unwrap();
        let spec = parse(
            Path::new("tests/t.toml"),
            "description = 'd'\ntimeout_secs = 1\nexpect = []\nexit = 'success'\n",
        )
        .unwrap();
        assert!(spec.needs_work_dir(&scenario));
        let e = format!("{:#}", test("test -s {disk.d1}").unwrap_err());
        assert_eq!(
            e,
            "tests/t.toml:8:11: command: `{disk.d1}`: the scenario has no disk \"d1\" (its \
             disks: d0) (scenario m)"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
