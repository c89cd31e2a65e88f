//! Config trees: the tag-length-value form of a component's `config`
//! table (format in the parent module's doc). [`check_tree`] validates a
//! tree once; [`Value`], [`Array`] and [`Table`] then read it without
//! copying, every read still bounds-checked (a read that could only fail on
//! an unchecked tree ends the iteration or returns `None`). [`ValueBuf`] is
//! the owned form the encoder writes from.

use alloc::string::String;
use alloc::vec::Vec;

use super::{ValueFault, MAX_DEPTH};
use formats::bytes::{
    read_u16 as u16_at, read_u32 as u32_at, read_u64 as u64_at, read_u8 as u8_at,
};

pub(super) const TAG_BOOL: u8 = 1;
pub(super) const TAG_INTEGER: u8 = 2;
pub(super) const TAG_FLOAT: u8 = 3;
pub(super) const TAG_STRING: u8 = 4;
pub(super) const TAG_ARRAY: u8 = 5;
pub(super) const TAG_TABLE: u8 = 6;
/// Bytes of an array's or table's header after the tag: count, length.
const CONTAINER_HEADER: usize = 8;

/// A config value borrowed from the ROM.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    Bool(bool),
    Integer(i64),
    Float(f64),
    String(&'a str),
    Array(Array<'a>),
    Table(Table<'a>),
}

/// An array of values; its elements may differ in type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Array<'a> {
    count: usize,
    body: &'a [u8],
}

/// A table: keys in ascending byte order, each once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table<'a> {
    count: usize,
    body: &'a [u8],
}

/// An owned config value, what the encoder writes.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueBuf {
    Bool(bool),
    Integer(i64),
    Float(f64),
    String(String),
    Array(Vec<ValueBuf>),
    /// Entries in any order; the encoder sorts them by key. Two entries
    /// with one key make an invalid ROM.
    Table(Vec<(String, ValueBuf)>),
}

impl<'a> Value<'a> {
    /// The owned copy of this value.
    pub fn to_buf(&self) -> ValueBuf {
        match *self {
            Value::Bool(b) => ValueBuf::Bool(b),
            Value::Integer(i) => ValueBuf::Integer(i),
            Value::Float(x) => ValueBuf::Float(x),
            Value::String(s) => ValueBuf::String(String::from(s)),
            Value::Array(a) => ValueBuf::Array(a.iter().map(|v| v.to_buf()).collect()),
            Value::Table(t) => ValueBuf::Table(t.to_entries()),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_integer(&self) -> Option<i64> {
        match *self {
            Value::Integer(i) => Some(i),
            _ => None,
        }
    }

    pub fn as_float(&self) -> Option<f64> {
        match *self {
            Value::Float(x) => Some(x),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&'a str> {
        match *self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<Array<'a>> {
        match *self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_table(&self) -> Option<Table<'a>> {
        match *self {
            Value::Table(t) => Some(t),
            _ => None,
        }
    }
}

impl<'a> Array<'a> {
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            body: self.body,
            at: 0,
            left: self.count,
        }
    }

    /// Element `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<Value<'a>> {
        self.iter().nth(index)
    }
}

impl<'a> Table<'a> {
    /// The empty table (a component without `config`).
    pub const EMPTY: Table<'static> = Table {
        count: 0,
        body: &[],
    };

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The entries in key order.
    pub fn iter(&self) -> TableIter<'a> {
        TableIter {
            body: self.body,
            at: 0,
            left: self.count,
        }
    }

    /// The value of `key`, if the table has it.
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        // Keys ascend, so the search can stop at the first larger one.
        self.iter()
            .take_while(|(k, _)| k.as_bytes() <= key.as_bytes())
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// The owned entries, in key order.
    pub fn to_entries(&self) -> Vec<(String, ValueBuf)> {
        self.iter()
            .map(|(k, v)| (String::from(k), v.to_buf()))
            .collect()
    }
}

/// Iterator over an [`Array`]'s elements.
#[derive(Clone, Debug)]
pub struct ArrayIter<'a> {
    body: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        if self.left == 0 {
            return None;
        }
        let (value, end) = decode(self.body, self.at)?;
        self.at = end;
        self.left -= 1;
        Some(value)
    }
}

/// Iterator over a [`Table`]'s entries.
#[derive(Clone, Debug)]
pub struct TableIter<'a> {
    body: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> Iterator for TableIter<'a> {
    type Item = (&'a str, Value<'a>);

    fn next(&mut self) -> Option<(&'a str, Value<'a>)> {
        if self.left == 0 {
            return None;
        }
        let (key, value_at) = key_at(self.body, self.at).ok()?;
        let (value, end) = decode(self.body, value_at)?;
        self.at = end;
        self.left -= 1;
        Some((key, value))
    }
}

/// The key at `at` of a table body and where its value starts.
fn key_at(body: &[u8], at: usize) -> Result<(&str, usize), ValueFault> {
    let len = usize::from(u16_at(body, at).ok_or(ValueFault::Truncated)?);
    let start = at + 2;
    let end = start.checked_add(len).ok_or(ValueFault::Truncated)?;
    let bytes = body.get(start..end).ok_or(ValueFault::Truncated)?;
    let key = core::str::from_utf8(bytes).map_err(|_| ValueFault::NotUtf8)?;
    Ok((key, end))
}

/// An array's or table's (count, body range) for the container whose tag
/// is at `at`.
fn container_at(bytes: &[u8], at: usize) -> Result<(usize, usize, usize), ValueFault> {
    let count = u32_at(bytes, at + 1).ok_or(ValueFault::Truncated)? as usize;
    let len = u32_at(bytes, at + 5).ok_or(ValueFault::Truncated)? as usize;
    let start = at + 1 + CONTAINER_HEADER;
    let end = start.checked_add(len).ok_or(ValueFault::Truncated)?;
    if end > bytes.len() {
        return Err(ValueFault::Truncated);
    }
    Ok((count, start, end))
}

/// The value at `at` of `bytes` and the offset after it, reading only what
/// is needed; `None` if it is not well formed at this level.
fn decode(bytes: &[u8], at: usize) -> Option<(Value<'_>, usize)> {
    let tag = u8_at(bytes, at)?;
    let payload = at + 1;
    Some(match tag {
        TAG_BOOL => match u8_at(bytes, payload)? {
            0 => (Value::Bool(false), payload + 1),
            1 => (Value::Bool(true), payload + 1),
            _ => return None,
        },
        TAG_INTEGER => (Value::Integer(u64_at(bytes, payload)? as i64), payload + 8),
        TAG_FLOAT => (
            Value::Float(f64::from_bits(u64_at(bytes, payload)?)),
            payload + 8,
        ),
        TAG_STRING => {
            let len = u32_at(bytes, payload)? as usize;
            let start = payload + 4;
            let end = start.checked_add(len)?;
            let s = core::str::from_utf8(bytes.get(start..end)?).ok()?;
            (Value::String(s), end)
        }
        TAG_ARRAY | TAG_TABLE => {
            let (count, start, end) = container_at(bytes, at).ok()?;
            let body = bytes.get(start..end)?;
            let value = if tag == TAG_ARRAY {
                Value::Array(Array { count, body })
            } else {
                Value::Table(Table { count, body })
            };
            (value, end)
        }
        _ => return None,
    })
}

/// A component's config tree on its own, as init hands it out as the
/// component's `config` ROM (`Component::config_tree`): checked as the
/// ROM decoder checks it, then its table. No bytes is the empty table (a
/// component without `config`). Fails with the offset and the fault.
pub fn parse_tree(tree: &[u8]) -> Result<Table<'_>, (usize, ValueFault)> {
    if tree.is_empty() {
        return Ok(Table::EMPTY);
    }
    check_tree(tree)?;
    root_table(tree).ok_or((0, ValueFault::NotATable))
}

/// The root table of a tree that [`check_tree`] accepted.
pub(super) fn root_table(tree: &[u8]) -> Option<Table<'_>> {
    match decode(tree, 0)? {
        (Value::Table(t), end) if end == tree.len() => Some(t),
        _ => None,
    }
}

/// Checks that `tree` is exactly one table value following every rule; an
/// error gives the offset in `tree` where the fault was found.
pub(super) fn check_tree(tree: &[u8]) -> Result<(), (usize, ValueFault)> {
    if u8_at(tree, 0) != Some(TAG_TABLE) {
        return Err((0, ValueFault::NotATable));
    }
    let end = check(tree, 0, 1)?;
    if end != tree.len() {
        return Err((end, ValueFault::LengthMismatch));
    }
    Ok(())
}

/// Checks the value at `at` of `bytes` (which ends where the value's
/// container ends) at nesting `depth`; returns the offset after it.
fn check(bytes: &[u8], at: usize, depth: usize) -> Result<usize, (usize, ValueFault)> {
    if depth > MAX_DEPTH {
        return Err((at, ValueFault::TooDeep));
    }
    let tag = u8_at(bytes, at).ok_or((at, ValueFault::Truncated))?;
    let payload = at + 1;
    let fault = |f| (at, f);
    match tag {
        TAG_BOOL => match u8_at(bytes, payload) {
            Some(0 | 1) => Ok(payload + 1),
            Some(b) => Err(fault(ValueFault::BadBool(b))),
            None => Err(fault(ValueFault::Truncated)),
        },
        TAG_INTEGER | TAG_FLOAT => {
            u64_at(bytes, payload).ok_or(fault(ValueFault::Truncated))?;
            Ok(payload + 8)
        }
        TAG_STRING => {
            let len = u32_at(bytes, payload).ok_or(fault(ValueFault::Truncated))? as usize;
            let start = payload + 4;
            let end = start.checked_add(len).ok_or(fault(ValueFault::Truncated))?;
            let s = bytes.get(start..end).ok_or(fault(ValueFault::Truncated))?;
            core::str::from_utf8(s).map_err(|_| fault(ValueFault::NotUtf8))?;
            Ok(end)
        }
        TAG_ARRAY | TAG_TABLE => {
            let (count, start, end) = container_at(bytes, at).map_err(fault)?;
            // The elements may not reach past the container.
            let body = &bytes[..end];
            let mut cursor = start;
            let mut previous: Option<&[u8]> = None;
            for _ in 0..count {
                if tag == TAG_TABLE {
                    let (key, value_at) = key_at(body, cursor).map_err(|f| (cursor, f))?;
                    if previous.is_some_and(|p| p >= key.as_bytes()) {
                        return Err((cursor, ValueFault::KeysOutOfOrder));
                    }
                    previous = Some(key.as_bytes());
                    cursor = value_at;
                }
                cursor = check(body, cursor, depth + 1)?;
            }
            if cursor != end {
                return Err(fault(ValueFault::LengthMismatch));
            }
            Ok(end)
        }
        t => Err(fault(ValueFault::UnknownTag(t))),
    }
}

/// Appends the encoding of `value` to `out`; `None` when a length does not
/// fit its field.
pub(super) fn encode(value: &ValueBuf, out: &mut Vec<u8>) -> Option<()> {
    match value {
        ValueBuf::Bool(b) => out.extend_from_slice(&[TAG_BOOL, u8::from(*b)]),
        ValueBuf::Integer(i) => {
            out.push(TAG_INTEGER);
            out.extend_from_slice(&i.to_le_bytes());
        }
        ValueBuf::Float(x) => {
            out.push(TAG_FLOAT);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        ValueBuf::String(s) => {
            out.push(TAG_STRING);
            out.extend_from_slice(&u32::try_from(s.len()).ok()?.to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        ValueBuf::Array(items) => {
            let header = begin_container(TAG_ARRAY, items.len(), out)?;
            for item in items {
                encode(item, out)?;
            }
            end_container(header, out)?;
        }
        ValueBuf::Table(entries) => encode_table(entries, out)?,
    }
    Some(())
}

/// Appends a table of `entries`, sorted by key.
pub(super) fn encode_table(entries: &[(String, ValueBuf)], out: &mut Vec<u8>) -> Option<()> {
    let mut sorted: Vec<&(String, ValueBuf)> = entries.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let header = begin_container(TAG_TABLE, sorted.len(), out)?;
    for (key, value) in sorted {
        out.extend_from_slice(&u16::try_from(key.len()).ok()?.to_le_bytes());
        out.extend_from_slice(key.as_bytes());
        encode(value, out)?;
    }
    end_container(header, out)
}

/// Writes a container's tag and count and a length to be patched; returns
/// where the header starts.
fn begin_container(tag: u8, count: usize, out: &mut Vec<u8>) -> Option<usize> {
    let header = out.len();
    out.push(tag);
    out.extend_from_slice(&u32::try_from(count).ok()?.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    Some(header)
}

/// Patches the length of the container whose header starts at `header`.
fn end_container(header: usize, out: &mut [u8]) -> Option<()> {
    let body_start = header + 1 + CONTAINER_HEADER;
    let len = u32::try_from(out.len().checked_sub(body_start)?).ok()?;
    out.get_mut(header + 5..header + 9)?
        .copy_from_slice(&len.to_le_bytes());
    Some(())
}
