//! The start list: `pecan.start=NAME[:ARG][@MIB][+own][+serve],...` on
//! the kernel command line names the components root starts, in order (see
//! `interfaces::child`). `ARG` is decimal or `0x` hex and 0 when absent; `MIB`,
//! decimal or `0x` hex, is the child's untyped memory in MiB, rounded up
//! to a power of two (`interfaces::child::untyped_bits_for_mib`), 1 MiB when
//! absent. `hello:7@4` starts `hello` with argument 7 and 4 MiB.
//!
//! The markers, last in an entry and in any order, are the authority the
//! child gets beyond its memory and a write-only service endpoint — never
//! inferred from its name:
//!
//! | marker | grant |
//! |--------|-------|
//! | `+own` | capabilities to its own thread, capability space and address space (`interfaces::child::OwnCaps::ALL`, slots 4, 5, 6) |
//! | `+serve` | the service endpoint with all rights: it receives on it and answers the others; root does not wait for it to finish |
//!
//! `bench-server@16+own+serve` starts `bench-server` with 16 MiB, its own
//! capabilities and the service endpoint to serve. A marker that is not
//! one of these (also an empty one, `hello+`) or one given twice makes the
//! entry bad.
//!
//! Every entry keeps its 1-based position in the list as its *index*, also
//! when an earlier entry is refused, so a child's index (its badge on
//! root's endpoints) depends only on the command line.

use core::fmt;

use interfaces::child::{self, OwnCaps};

/// The command-line key.
pub const KEY: &str = "pecan.start";

/// One well-formed entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartEntry<'a> {
    /// 1-based position in the list.
    pub index: usize,
    pub name: &'a str,
    pub arg: u64,
    /// log2 of the child's untyped memory in bytes.
    pub untyped_bits: u32,
    /// Its own capabilities (`+own`: all three, else none).
    pub own: OwnCaps,
    /// Whether it serves the service endpoint (`+serve`).
    pub serve: bool,
}

/// An entry that cannot be started as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadEntry<'a> {
    /// 1-based position in the list.
    pub index: usize,
    /// The entry as written.
    pub text: &'a str,
    pub reason: EntryFault<'a>,
}

/// What is wrong with an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryFault<'a> {
    /// Nothing before the `:` (or an empty entry between commas).
    EmptyName,
    /// `ARG` is not a decimal or `0x` hex number that fits 64 bits.
    BadArgument,
    /// `MIB` is not a number from 1 to 2^(`child::MAX_UNTYPED_BITS` - 20).
    BadMemory,
    /// A marker (the text after a `+`) that is neither `own` nor `serve`.
    UnknownMarker(&'a str),
    /// A marker given twice.
    RepeatedMarker(&'a str),
}

impl fmt::Display for BadEntry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            EntryFault::EmptyName => write!(
                f,
                "entry {} of {KEY} (`{}`): no component name",
                self.index, self.text
            ),
            EntryFault::BadArgument => write!(
                f,
                "entry {} of {KEY} (`{}`): the argument is not a decimal or 0x-hex 64-bit number",
                self.index, self.text
            ),
            EntryFault::BadMemory => write!(
                f,
                "entry {} of {KEY} (`{}`): the memory after `@` must be a number of MiB \
                 from 1 to {} (decimal or 0x hex)",
                self.index, self.text, MAX_MIB
            ),
            EntryFault::UnknownMarker(marker) => write!(
                f,
                "entry {} of {KEY} (`{}`): unknown marker `+{marker}` (the markers, last in an \
                 entry, are `+{OWN}` and `+{SERVE}`)",
                self.index, self.text
            ),
            EntryFault::RepeatedMarker(marker) => write!(
                f,
                "entry {} of {KEY} (`{}`): the marker `+{marker}` is given twice",
                self.index, self.text
            ),
        }
    }
}

/// The marker that grants a child its own thread, capability space and
/// address space.
pub const OWN: &str = "own";
/// The marker that makes a child the server of the service endpoint.
pub const SERVE: &str = "serve";

/// The most MiB an entry may ask for.
pub const MAX_MIB: u64 = 1 << (child::MAX_UNTYPED_BITS - child::MIB_BITS);

/// The entries of the value of `pecan.start` (the part after `=`), in
/// order. An empty value has no entries.
pub fn entries(list: &str) -> impl Iterator<Item = Result<StartEntry<'_>, BadEntry<'_>>> {
    list.split(',')
        .enumerate()
        .filter(move |_| !list.is_empty())
        .map(|(i, text)| parse_entry(i + 1, text))
}

fn parse_entry(index: usize, text: &str) -> Result<StartEntry<'_>, BadEntry<'_>> {
    let bad = |reason| BadEntry {
        index,
        text,
        reason,
    };
    let (entry, markers) = match text.split_once('+') {
        Some((entry, markers)) => (entry, Some(markers)),
        None => (text, None),
    };
    let (head, untyped_bits) = match entry.split_once('@') {
        Some((head, mib)) => (
            head,
            parse_number(mib)
                .and_then(child::untyped_bits_for_mib)
                .ok_or(bad(EntryFault::BadMemory))?,
        ),
        None => (entry, child::UNTYPED_BITS),
    };
    let (name, arg) = match head.split_once(':') {
        Some((name, arg)) => (name, parse_number(arg).ok_or(bad(EntryFault::BadArgument))?),
        None => (head, 0),
    };
    if name.is_empty() {
        return Err(bad(EntryFault::EmptyName));
    }
    let (mut own, mut serve) = (OwnCaps::NONE, false);
    for marker in markers.into_iter().flat_map(|m| m.split('+')) {
        let given = match marker {
            OWN => core::mem::replace(&mut own, OwnCaps::ALL) == OwnCaps::ALL,
            SERVE => core::mem::replace(&mut serve, true),
            _ => return Err(bad(EntryFault::UnknownMarker(marker))),
        };
        if given {
            return Err(bad(EntryFault::RepeatedMarker(marker)));
        }
    }
    Ok(StartEntry {
        index,
        name,
        arg,
        untyped_bits,
        own,
        serve,
    })
}

/// A decimal or `0x`/`0X` hex number: digits only (no sign, no `_`).
pub fn parse_number(text: &str) -> Option<u64> {
    let (digits, radix) = match text.strip_prefix("0x").or(text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::vec::Vec;

    fn all(list: &str) -> Vec<Result<StartEntry<'_>, BadEntry<'_>>> {
        entries(list).collect()
    }

    #[test]
    fn names_args_and_indices() {
        let got = all("hello,hello:7,pinger:0x1F,log-server:0");
        let want = [
            ("hello", 0),
            ("hello", 7),
            ("pinger", 0x1f),
            ("log-server", 0),
        ];
        assert_eq!(got.len(), want.len());
        for (i, (g, (name, arg))) in got.iter().zip(want).enumerate() {
            assert_eq!(
                *g,
                Ok(StartEntry {
                    index: i + 1,
                    name,
                    arg,
                    untyped_bits: child::UNTYPED_BITS,
                    own: OwnCaps::NONE,
                    serve: false,
                })
            );
        }
        assert!(all("").is_empty());
    }

    #[test]
    fn bad_entries_keep_the_others_and_their_indices() {
        let got = all("a,,b:x,:5,c:18446744073709551616,d:0x,e:+1,f:18446744073709551615");
        assert_eq!(got[0].unwrap().name, "a");
        let fault = |i: usize| got[i].unwrap_err().reason;
        assert_eq!(fault(1), EntryFault::EmptyName);
        assert_eq!(fault(2), EntryFault::BadArgument);
        assert_eq!(fault(3), EntryFault::EmptyName);
        assert_eq!(fault(4), EntryFault::BadArgument);
        assert_eq!(fault(5), EntryFault::BadArgument);
        assert_eq!(fault(6), EntryFault::BadArgument);
        assert_eq!(
            got[7],
            Ok(StartEntry {
                index: 8,
                name: "f",
                arg: u64::MAX,
                untyped_bits: child::UNTYPED_BITS,
                own: OwnCaps::NONE,
                serve: false,
            })
        );
        assert_eq!(
            format!("{}", got[2].unwrap_err()),
            "entry 3 of pecan.start (`b:x`): the argument is not a decimal or 0x-hex 64-bit number"
        );
        assert_eq!(
            format!("{}", got[1].unwrap_err()),
            "entry 2 of pecan.start (``): no component name"
        );
    }

    #[test]
    fn memory_sizes() {
        let got = all("bench:0@64,bench-server@16,a@3,b:0x10@0x1,c@65536");
        let want = [
            ("bench", 0, 26),
            ("bench-server", 0, 24),
            ("a", 0, 22),
            ("b", 0x10, 20),
            ("c", 0, child::MAX_UNTYPED_BITS),
        ];
        for (i, (name, arg, untyped_bits)) in want.into_iter().enumerate() {
            assert_eq!(
                got[i],
                Ok(StartEntry {
                    index: i + 1,
                    name,
                    arg,
                    untyped_bits,
                    own: OwnCaps::NONE,
                    serve: false,
                })
            );
        }
        let bad = all("a@0,b@65537,c@,d@x,e@1@2,f:1@-1,@4,g:x@4,h@18446744073709551616");
        let faults: Vec<EntryFault> = bad.iter().map(|e| e.unwrap_err().reason).collect();
        use EntryFault::*;
        assert_eq!(
            faults,
            [
                BadMemory,
                BadMemory,
                BadMemory,
                BadMemory,
                BadMemory,
                BadMemory,
                EmptyName,
                BadArgument,
                BadMemory
            ]
        );
        assert_eq!(
            format!("{}", bad[1].unwrap_err()),
            "entry 2 of pecan.start (`b@65537`): the memory after `@` must be a number of MiB \
             from 1 to 65536 (decimal or 0x hex)"
        );
    }

    #[test]
    fn markers_grant_authority() {
        let got = all("a+own,b:3+serve,c@16+own+serve,d:0x10@2+serve+own,e");
        let want = [
            ("a", 0, child::UNTYPED_BITS, OwnCaps::ALL, false),
            ("b", 3, child::UNTYPED_BITS, OwnCaps::NONE, true),
            ("c", 0, 24, OwnCaps::ALL, true),
            ("d", 0x10, 21, OwnCaps::ALL, true),
            ("e", 0, child::UNTYPED_BITS, OwnCaps::NONE, false),
        ];
        assert_eq!(got.len(), want.len());
        for (i, (name, arg, untyped_bits, own, serve)) in want.into_iter().enumerate() {
            assert_eq!(
                got[i],
                Ok(StartEntry {
                    index: i + 1,
                    name,
                    arg,
                    untyped_bits,
                    own,
                    serve,
                })
            );
        }
        // Not a name rule: a `-server` or `test-` name gets nothing unasked.
        for entry in all("echo-server,test-caps,bench,pinger") {
            let entry = entry.unwrap();
            assert_eq!(
                (entry.own, entry.serve),
                (OwnCaps::NONE, false),
                "{entry:?}"
            );
        }
    }

    #[test]
    fn bad_markers() {
        let bad =
            all("a+Own,b+,c++own,d+own+own,e+serve+serve,f+own:3,g+own@4,+own,h:x+own,i+thread");
        let faults: Vec<EntryFault<'_>> = bad.iter().map(|e| e.unwrap_err().reason).collect();
        use EntryFault::*;
        assert_eq!(
            faults,
            [
                UnknownMarker("Own"),
                UnknownMarker(""),
                UnknownMarker(""),
                RepeatedMarker("own"),
                RepeatedMarker("serve"),
                UnknownMarker("own:3"),
                UnknownMarker("own@4"),
                EmptyName,
                BadArgument,
                UnknownMarker("thread"),
            ]
        );
        assert_eq!(
            format!("{}", bad[0].unwrap_err()),
            "entry 1 of pecan.start (`a+Own`): unknown marker `+Own` (the markers, last in an \
             entry, are `+own` and `+serve`)"
        );
        assert_eq!(
            format!("{}", bad[3].unwrap_err()),
            "entry 4 of pecan.start (`d+own+own`): the marker `+own` is given twice"
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_number("0"), Some(0));
        assert_eq!(parse_number("0XfF"), Some(255));
        assert_eq!(parse_number("0xffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_number("0x10000000000000000"), None);
        assert_eq!(parse_number("1_000"), None);
        assert_eq!(parse_number("-1"), None);
        assert_eq!(parse_number(""), None);
        assert_eq!(parse_number("12a"), None);
    }
}
