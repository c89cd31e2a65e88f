//! A status report as data, rendered as HTML and as JSON from the same
//! value, so every figure on the page is one the program put there and
//! both forms always agree.
//!
//! A [`Report`] is a title and sections; a section has fields (name and
//! [`Value`]) and optionally a table (column names, rows of values). The
//! HTTP server fills one section per source of figures it has (itself,
//! its network stack); a source added later (init's status of the
//! components) is one more section, with a table of the components.
//!
//! JSON form: `{"title": T, "SECTION": {"FIELD": V, ..., "rows": [{"COL":
//! V, ...}, ...]}, ...}` — section and field names are keys as given.
//! Text is escaped for each form (`<>&"'` for HTML; `"`, `\` and control
//! characters for JSON).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// One figure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A count or a size.
    Int(u64),
    /// Text.
    Text(String),
    /// Yes or no.
    Bool(bool),
    /// Not known (yet): JSON `null`, shown as "—".
    None,
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.into())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::None, Into::into)
    }
}

/// A group of figures from one source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Section {
    /// Its name (a JSON key, an HTML heading).
    pub name: String,
    /// Its figures, in order.
    pub fields: Vec<(String, Value)>,
    /// Its table's column names (none: no table).
    pub columns: Vec<String>,
    /// The table's rows, each as long as `columns`.
    pub rows: Vec<Vec<Value>>,
}

impl Section {
    /// An empty section named `name`.
    pub fn new(name: &str) -> Section {
        Section {
            name: name.into(),
            ..Section::default()
        }
    }

    /// Adds a field.
    pub fn field(mut self, name: &str, value: impl Into<Value>) -> Section {
        self.fields.push((name.into(), value.into()));
        self
    }
}

/// A whole report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Its title.
    pub title: String,
    /// Its sections, in order.
    pub sections: Vec<Section>,
}

/// Text escaped for HTML.
struct Html<'a>(&'a str);

impl fmt::Display for Html<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '<' => f.write_str("&lt;")?,
                '>' => f.write_str("&gt;")?,
                '&' => f.write_str("&amp;")?,
                '"' => f.write_str("&quot;")?,
                '\'' => f.write_str("&#39;")?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// Text as a JSON string, quotes included.
struct Json<'a>(&'a str);

impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

impl Value {
    fn html(&self, out: &mut impl Write) -> fmt::Result {
        match self {
            Value::Int(v) => write!(out, "{v}"),
            Value::Text(t) => write!(out, "{}", Html(t)),
            Value::Bool(b) => out.write_str(if *b { "yes" } else { "no" }),
            Value::None => out.write_str("&mdash;"),
        }
    }

    fn json(&self, out: &mut impl Write) -> fmt::Result {
        match self {
            Value::Int(v) => write!(out, "{v}"),
            Value::Text(t) => write!(out, "{}", Json(t)),
            Value::Bool(b) => write!(out, "{b}"),
            Value::None => out.write_str("null"),
        }
    }
}

impl Report {
    /// The report as an HTML page.
    pub fn html(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = self.write_html(&mut out);
        out
    }

    fn write_html(&self, out: &mut String) -> fmt::Result {
        write!(
            out,
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\
             <style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 12px;text-align:left}}</style>\
             </head><body>\n<h1>{0}</h1>\n",
            Html(&self.title)
        )?;
        for s in &self.sections {
            write!(out, "<h2>{}</h2>\n<table>\n", Html(&s.name))?;
            for (name, v) in &s.fields {
                write!(out, "<tr><th>{}</th><td>", Html(name))?;
                v.html(out)?;
                out.write_str("</td></tr>\n")?;
            }
            out.write_str("</table>\n")?;
            if !s.columns.is_empty() {
                out.write_str("<table>\n<tr>")?;
                for c in &s.columns {
                    write!(out, "<th>{}</th>", Html(c))?;
                }
                out.write_str("</tr>\n")?;
                for row in &s.rows {
                    out.write_str("<tr>")?;
                    for v in row {
                        out.write_str("<td>")?;
                        v.html(out)?;
                        out.write_str("</td>")?;
                    }
                    out.write_str("</tr>\n")?;
                }
                out.write_str("</table>\n")?;
            }
        }
        out.write_str("<p><a href=\"/status.json\">JSON</a></p>\n</body></html>\n")
    }

    /// The report as a JSON object.
    pub fn json(&self) -> String {
        let mut out = String::new();
        let _ = self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) -> fmt::Result {
        write!(out, "{{\"title\": {}", Json(&self.title))?;
        for s in &self.sections {
            write!(out, ",\n  {}: {{", Json(&s.name))?;
            for (i, (name, v)) in s.fields.iter().enumerate() {
                let sep = if i == 0 { "" } else { ", " };
                write!(out, "{sep}{}: ", Json(name))?;
                v.json(out)?;
            }
            if !s.columns.is_empty() {
                let sep = if s.fields.is_empty() { "" } else { ", " };
                write!(out, "{sep}\"rows\": [")?;
                for (r, row) in s.rows.iter().enumerate() {
                    out.write_str(if r == 0 { "{" } else { ", {" })?;
                    for (i, (c, v)) in s.columns.iter().zip(row).enumerate() {
                        let sep = if i == 0 { "" } else { ", " };
                        write!(out, "{sep}{}: ", Json(c))?;
                        v.json(out)?;
                    }
                    out.write_str("}")?;
                }
                out.write_str("]")?;
            }
            out.write_str("}")?;
        }
        out.write_str("\n}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn sample() -> Report {
        let mut s = Section::new("server")
            .field("uptime_ms", 1234u64)
            .field("address", Some("10.0.2.15/24"))
            .field("router", None::<&str>)
            .field("up", true)
            .field("note", "<b>\"x\"\\\n</b>");
        s.columns = vec!["name".into(), "ram".into()];
        s.rows = vec![vec!["init".into(), 5u64.into()]];
        Report {
            title: "Pecan & co".into(),
            sections: vec![s],
        }
    }

    #[test]
    fn json() {
        assert_eq!(
            sample().json(),
            "{\"title\": \"Pecan & co\",\n  \"server\": {\"uptime_ms\": 1234, \"address\": \
             \"10.0.2.15/24\", \"router\": null, \"up\": true, \"note\": \
             \"<b>\\\"x\\\"\\\\\\u000a</b>\", \"rows\": [{\"name\": \"init\", \"ram\": 5}]}\n}\n"
        );
    }

    #[test]
    fn html_escapes() {
        let h = sample().html();
        assert!(h.contains("<title>Pecan &amp; co</title>"));
        assert!(h.contains("<tr><th>note</th><td>&lt;b&gt;&quot;x&quot;\\\n&lt;/b&gt;</td></tr>"));
        assert!(h.contains("<tr><th>router</th><td>&mdash;</td></tr>"));
        assert!(h.contains("<tr><td>init</td><td>5</td></tr>"));
    }
}
