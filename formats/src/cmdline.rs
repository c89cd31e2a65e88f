//! The kernel command line: whitespace-separated `key=value` words and bare
//! flags, e.g. `pecan.selftest=page-fault quiet`.
//!
//! Later words win over earlier ones, so a test harness can append options
//! to a scenario's defaults.

/// The value of the last `key=value` word, or `None`.
pub fn value<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline
        .split_ascii_whitespace()
        .filter_map(|word| word.split_once('='))
        .filter(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .next_back()
}

/// Whether a bare `flag` word (or `flag=...`) is present.
pub fn has(cmdline: &str, flag: &str) -> bool {
    cmdline
        .split_ascii_whitespace()
        .any(|word| word == flag || word.split_once('=').is_some_and(|(k, _)| k == flag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_flags_and_last_wins() {
        let line = "  pecan.selftest=panic quiet pecan.selftest=page-fault x=";
        assert_eq!(value(line, "pecan.selftest"), Some("page-fault"));
        assert_eq!(value(line, "x"), Some(""));
        assert_eq!(value(line, "quiet"), None);
        assert!(has(line, "quiet"));
        assert!(has(line, "x"));
        assert!(!has(line, "pecan"));
        assert_eq!(value("", "a"), None);
    }
}
