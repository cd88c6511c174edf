//! The `filter` parameter of list calls, in the forms clients send.
//!
//! - k8s-cloud-provider `pkg/cloud/filter/filter.go` writes `field eq value` and
//!   `field ne value` (value a regular expression, unquoted; it maps `=`/`!=` to `eq`/`ne`
//!   too because GCE refuses a mix), and several predicates as `(p1) (p2)`;
//!   cloud-provider-gcp `providers/gce/gce.go` lists subnetworks with
//!   `network eq .*/<name>$`.
//! - gcloud and google-cloud-compute users write `name = "x"`, `name != "x"`, and
//!   `(a = "x") AND (b = "y")`.
//!
//! `eq`/`ne` match the whole field value against the RE2 expression (GCE anchors it);
//! `=`/`!=` compare the literal (quoted or bare). A field is a dotted path into the
//! resource (`tags.items`, `status`); a list field matches when any element does; a
//! missing field matches only `ne`/`!=`. Anything else (OR, `:`, `<`, a bad regex) is 400
//! `invalid`, so a client relying on a form the mock does not know fails loudly rather
//! than getting an unfiltered list.

use regex::Regex;
use serde_json::Value;
use thiserror::Error;

/// Why a filter was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FilterError {
    #[error("Invalid list filter expression '{0}'")]
    Syntax(String),
    #[error("Invalid regular expression in list filter '{0}'")]
    Regex(String),
}

#[derive(Debug, Clone)]
enum Op {
    Regex(Regex),
    Literal(String),
}

#[derive(Debug, Clone)]
struct Predicate {
    field: Vec<String>,
    negate: bool,
    op: Op,
}

/// A parsed filter: every predicate must hold.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    predicates: Vec<Predicate>,
}

/// The most predicates and the longest filter accepted.
const MAX_PREDICATES: usize = 32;
const MAX_LEN: usize = 4096;

impl Filter {
    /// Parses a filter; empty (or blank) is "everything".
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        let syntax = || FilterError::Syntax(text.chars().take(200).collect());
        if text.len() > MAX_LEN {
            return Err(syntax());
        }
        let t = text.trim();
        if t.is_empty() {
            return Ok(Filter::default());
        }
        let mut predicates = Vec::new();
        if t.starts_with('(') {
            let mut rest = t;
            let mut expect_term = true;
            while !rest.is_empty() {
                if let Some(r) = rest
                    .strip_prefix("AND")
                    .filter(|r| r.starts_with(char::is_whitespace))
                {
                    if expect_term {
                        return Err(syntax());
                    }
                    rest = r.trim_start();
                    expect_term = true;
                    continue;
                }
                let inner = rest.strip_prefix('(').ok_or_else(syntax)?;
                let end = closing(inner).ok_or_else(syntax)?;
                predicates.push(predicate(&inner[..end], text)?);
                rest = inner[end + 1..].trim_start();
                expect_term = false;
                if predicates.len() > MAX_PREDICATES {
                    return Err(syntax());
                }
            }
            if expect_term {
                return Err(syntax());
            }
        } else {
            predicates.push(predicate(t, text)?);
        }
        Ok(Filter { predicates })
    }

    /// Whether a resource passes.
    pub fn matches(&self, v: &Value) -> bool {
        self.predicates.iter().all(|p| p.matches(v))
    }
}

/// The index of the `)` closing a term whose `(` was just consumed (parentheses inside a
/// regex nest).
fn closing(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => {
                if depth == 0 {
                    return Some(i);
                }
                depth -= 1;
            }
            _ => {}
        }
    }
    None
}

fn predicate(term: &str, whole: &str) -> Result<Predicate, FilterError> {
    let syntax = || FilterError::Syntax(whole.chars().take(200).collect());
    let term = term.trim();
    let (field, rest) = term.split_once(char::is_whitespace).ok_or_else(syntax)?;
    let valid_field = !field.is_empty()
        && field
            .split('.')
            .all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    if !valid_field {
        return Err(syntax());
    }
    let rest = rest.trim_start();
    let (op, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let value = value.trim();
    if value.is_empty() {
        return Err(syntax());
    }
    let field = field.split('.').map(str::to_string).collect();
    let (negate, op) = match op {
        "eq" | "ne" => {
            let pattern = unquote(value).unwrap_or(value);
            let re = Regex::new(&format!("^(?:{pattern})$"))
                .map_err(|_| FilterError::Regex(whole.chars().take(200).collect()))?;
            (op == "ne", Op::Regex(re))
        }
        "=" | "!=" => {
            let literal = match unquote(value) {
                Some(v) => v.to_string(),
                None if !value.contains(char::is_whitespace) && !value.contains('"') => {
                    value.to_string()
                }
                None => return Err(syntax()),
            };
            (op == "!=", Op::Literal(literal))
        }
        _ => return Err(syntax()),
    };
    Ok(Predicate { field, negate, op })
}

fn unquote(v: &str) -> Option<&str> {
    let inner = v.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('"')).then_some(inner)
}

impl Predicate {
    fn matches(&self, v: &Value) -> bool {
        let mut cur = v;
        for seg in &self.field {
            match cur.get(seg) {
                Some(next) => cur = next,
                None => return self.negate,
            }
        }
        let values: Vec<String> = match cur {
            Value::Array(items) => items.iter().filter_map(scalar).collect(),
            other => scalar(other).into_iter().collect(),
        };
        let hit = values.iter().any(|s| match &self.op {
            Op::Regex(re) => re.is_match(s),
            Op::Literal(l) => s == l,
        });
        hit != self.negate
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn forms() {
        let v = json!({"name": "a1b2", "network": "https://x/global/networks/default", "tags": {"items": ["t1", "t2"]}, "n": 5});
        let yes = [
            "",
            "name eq a1.*",
            "name eq \"a1b2\"",
            "name = \"a1b2\"",
            "name = a1b2",
            "name != x",
            "name ne x.*",
            "network eq .*/default$",
            "(name eq a.*) (network eq .*/default)",
            "(name = \"a1b2\") AND (n = 5)",
            "tags.items eq t2",
            "missing ne x",
            "name eq (a1b2|other)",
        ];
        for f in yes {
            assert!(Filter::parse(f).expect(f).matches(&v), "{f}");
        }
        let no = [
            "name eq a1",
            "name = a1",
            "name ne a1b2",
            "missing eq x",
            "(name eq a.*) (n = 6)",
        ];
        for f in no {
            assert!(!Filter::parse(f).expect(f).matches(&v), "{f}");
        }
        for bad in [
            "name",
            "name eq",
            "name > 3",
            "(name eq a",
            "(a eq b) OR (c eq d)",
            "name eq (",
            "na/me eq x",
            "AND (a eq b)",
            "(a eq b) AND",
        ] {
            assert!(Filter::parse(bad).is_err(), "{bad}");
        }
    }
}
