//! Label and field selectors for LIST, WATCH and DELETE-collection.
//!
//! Why this exists: kube-rs `watch_object`/`await_condition`, kubectl `get`/`wait`/`describe`
//! and every informer filter with `labelSelector` and `fieldSelector`; the server must parse them
//! exactly like kube-apiserver and reject bad ones with the same messages (returned to clients
//! as a 400 BadRequest by the caller).
//! - Label selectors follow apimachinery pkg/labels/selector.go (`Parse`): `=`, `==`, `!=`,
//!   `in (..)`, `notin (..)`, `key` (exists), `!key`, `>`/`<` (integers); comma = AND; keys are
//!   qualified names and values label values (apimachinery pkg/api/validate/content/kube.go).
//! - Field selectors follow apimachinery pkg/fields/selector.go (`ParseSelector`): `=`, `==`,
//!   `!=`; comma = AND; `\,` `\=` `\\` escapes in values. Which fields a resource supports is
//!   the caller's decision ([`FieldSelector::fields`]).

use std::collections::BTreeMap;
use std::fmt;

/// A selector could not be parsed; the message is upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

// ---------------------------------------------------------------------------------------------
// Label selectors

/// Operator of one label requirement (apimachinery pkg/selection/operator.go).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOp {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One requirement: `key op values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: LabelOp,
    /// Sorted and de-duplicated, like upstream's `sets.String`.
    pub values: Vec<String>,
}

impl Requirement {
    /// apimachinery pkg/labels/selector.go `Requirement.Matches`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.op {
            LabelOp::In | LabelOp::Equals | LabelOp::DoubleEquals => {
                labels.get(&self.key).is_some_and(|v| has(v))
            }
            LabelOp::NotIn | LabelOp::NotEquals => labels.get(&self.key).is_none_or(|v| !has(v)),
            LabelOp::Exists => labels.contains_key(&self.key),
            LabelOp::DoesNotExist => !labels.contains_key(&self.key),
            LabelOp::GreaterThan | LabelOp::LessThan => {
                let (Some(have), [want]) = (labels.get(&self.key), self.values.as_slice()) else {
                    return false;
                };
                let (Ok(have), Ok(want)) = (have.parse::<i64>(), want.parse::<i64>()) else {
                    return false;
                };
                if self.op == LabelOp::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// A parsed label selector: the AND of its requirements. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parse a `labelSelector` query value; `""` selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut requirements = LabelParser::new(s).parse()?;
        // upstream sorts by key "to grant deterministic parsing"
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

/// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`) as a selector, as
/// apimachinery pkg/apis/meta/v1/helpers.go `LabelSelectorAsSelector` builds it: an
/// absent selector selects nothing (`Ok(None)`), an empty one everything. Keys and values
/// are not re-validated here.
pub fn from_label_selector(
    selector: Option<&serde_json::Value>,
) -> Result<Option<LabelSelector>, SelectorError> {
    use serde_json::Value;
    let Some(sel) = selector.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let text = |v: &Value| v.as_str().map(str::to_string);
    let mut requirements = Vec::new();
    if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in labels {
            requirements.push(Requirement {
                key: key.clone(),
                op: LabelOp::Equals,
                values: vec![text(value).unwrap_or_default()],
            });
        }
    }
    let expressions = sel.get("matchExpressions").and_then(Value::as_array);
    for expr in expressions.map(Vec::as_slice).unwrap_or(&[]) {
        let key = expr.get("key").and_then(text).unwrap_or_default();
        let mut values: Vec<String> = expr
            .get("values")
            .and_then(Value::as_array)
            .map(|vs| vs.iter().filter_map(text).collect())
            .unwrap_or_default();
        values.sort();
        values.dedup();
        let operator = expr.get("operator").and_then(text).unwrap_or_default();
        let op = match operator.as_str() {
            "In" => LabelOp::In,
            "NotIn" => LabelOp::NotIn,
            "Exists" => LabelOp::Exists,
            "DoesNotExist" => LabelOp::DoesNotExist,
            other => {
                return Err(SelectorError(format!(
                    "{other:?} is not a valid label selector operator"
                )));
            }
        };
        let needs_values = matches!(op, LabelOp::In | LabelOp::NotIn);
        if needs_values == values.is_empty() {
            return Err(SelectorError(if needs_values {
                "for 'in', 'notin' operators, values set can't be empty".into()
            } else {
                "values set must be empty for exists and does not exist".into()
            }));
        }
        requirements.push(Requirement { key, op, values });
    }
    requirements.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Some(LabelSelector { requirements }))
}

/// Canonical text (apimachinery pkg/labels/selector.go `Requirement.String`): parsing it
/// gives the same requirement back.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op == LabelOp::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.op {
            LabelOp::Exists | LabelOp::DoesNotExist => return Ok(()),
            LabelOp::Equals => "=",
            LabelOp::DoubleEquals => "==",
            LabelOp::NotEquals => "!=",
            LabelOp::GreaterThan => ">",
            LabelOp::LessThan => "<",
            LabelOp::In => " in ",
            LabelOp::NotIn => " notin ",
        };
        f.write_str(op)?;
        if matches!(self.op, LabelOp::In | LabelOp::NotIn) {
            write!(f, "({})", self.values.join(","))
        } else {
            f.write_str(self.values.first().map_or("", String::as_str))
        }
    }
}

/// Requirements joined by `,` (upstream `internalSelector.String`).
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// Literal tokens (upstream `string2token`).
fn literal_token(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Split a selector into tokens the way upstream's `Lexer` does.
fn lex(s: &str) -> Vec<(Token, String)> {
    let b = s.as_bytes();
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        while pos < b.len() && is_whitespace(b[pos]) {
            pos += 1;
        }
        if pos >= b.len() {
            out.push((Token::EndOfString, String::new()));
            return out;
        }
        if is_special(b[pos]) {
            // longest literal token made of special characters
            let start = pos;
            let mut last: Option<(Token, usize)> = None;
            while pos < b.len() && is_special(b[pos]) {
                let candidate = &s[start..=pos];
                if let Some(t) = literal_token(candidate) {
                    last = Some((t, pos + 1));
                } else if last.is_some() {
                    break;
                }
                pos += 1;
            }
            match last {
                Some((t, end)) => {
                    pos = end;
                    out.push((t, s[start..end].to_string()));
                }
                None => out.push((
                    Token::Error,
                    format!("error expected: keyword found '{}'", &s[start..pos]),
                )),
            }
        } else {
            let start = pos;
            while pos < b.len() && !is_special(b[pos]) && !is_whitespace(b[pos]) {
                pos += 1;
            }
            let word = &s[start..pos];
            let tok = match literal_token(word) {
                Some(t @ (Token::In | Token::NotIn)) => t,
                _ => Token::Identifier,
            };
            out.push((tok, word.to_string()));
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct LabelParser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl LabelParser {
    fn new(s: &str) -> Self {
        LabelParser {
            items: lex(s),
            position: 0,
        }
    }

    fn item(&self, i: usize, ctx: Context) -> (Token, String) {
        let (tok, lit) = self
            .items
            .get(i)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        let tok = match (ctx, tok) {
            (Context::Values, Token::In | Token::NotIn) => Token::Identifier,
            (_, t) => t,
        };
        (tok, lit)
    }

    fn lookahead(&self, ctx: Context) -> (Token, String) {
        self.item(self.position, ctx)
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let it = self.item(self.position, ctx);
        self.position += 1;
        it
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| SelectorError(format!("unable to parse requirement: {e}")))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(SelectorError(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(SelectorError(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                Token::EndOfString => return Ok(reqs),
                _ => {
                    return Err(SelectorError(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (LabelOp::Exists | LabelOp::DoesNotExist)) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            LabelOp::In | LabelOp::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, op, values)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<LabelOp>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            op = Some(LabelOp::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        validate_label_key(&lit, "<nil>")?;
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::EndOfString | Token::Comma) && op.is_none() {
            op = Some(LabelOp::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<LabelOp, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => LabelOp::In,
            Token::Equals => LabelOp::Equals,
            Token::DoubleEquals => LabelOp::DoubleEquals,
            Token::GreaterThan => LabelOp::GreaterThan,
            Token::LessThan => LabelOp::LessThan,
            Token::NotIn => LabelOp::NotIn,
            Token::NotEquals => LabelOp::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                let (tok, _) = self.consume(Context::Values);
                if tok != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// A comma-separated list of possibly empty identifiers, up to (not including) `)`.
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut set: Vec<String> = Vec::new();
        let insert = |set: &mut Vec<String>, v: String| {
            if !set.contains(&v) {
                set.push(v);
            }
        };
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    insert(&mut set, lit);
                    let (t2, l2) = self.lookahead(Context::Values);
                    match t2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        insert(&mut set, String::new()); // "(,"
                    }
                    let (t2, _) = self.lookahead(Context::Values);
                    if t2 == Token::ClosedPar {
                        insert(&mut set, String::new()); // ",)"
                        return Ok(set);
                    }
                    if t2 == Token::Comma {
                        insert(&mut set, String::new()); // ",,"
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if matches!(tok, Token::EndOfString | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

/// upstream `NewRequirement`: validate values for the operator; errors aggregated.
fn new_requirement(
    key: String,
    op: LabelOp,
    mut values: Vec<String>,
) -> Result<Requirement, String> {
    values.sort();
    values.dedup();
    let mut errs: Vec<String> = Vec::new();
    match op {
        LabelOp::Exists | LabelOp::DoesNotExist => {}
        LabelOp::GreaterThan | LabelOp::LessThan => {
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "values[{i}]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                    ));
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let problems = label_value_errors(v);
        if !problems.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {v:?}: {}",
                problems.join("; ")
            ));
        }
    }
    match errs.len() {
        0 => Ok(Requirement { key, op, values }),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

// --- validation (apimachinery pkg/api/validate/content/{kube,dns,errors}.go) -----------------

const LABEL_KEY_MAX_LENGTH: usize = 63;
const LABEL_VALUE_MAX_LENGTH: usize = 63;
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// upstream `RegexError`.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{re}')"));
    out
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// DNS-1123 subdomain shape (lowercase labels joined by dots).
fn is_dns1123_subdomain_shape(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => {
                let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
                ok(f) && ok(l) && b.iter().all(|c| ok(c) || *c == b'-')
            }
            _ => false,
        }
    })
}

fn label_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
                    errs.push(format!(
                        "prefix part must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} bytes"
                    ));
                }
                if !is_dns1123_subdomain_shape(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_ERR,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_KEY_MAX_LENGTH {
        errs.push(format!(
            "name part must be no more than {LABEL_KEY_MAX_LENGTH} bytes"
        ));
    }
    if !is_label_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

fn label_value_errors(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(format!(
            "must be no more than {LABEL_VALUE_MAX_LENGTH} bytes"
        ));
    }
    if !v.is_empty() && !is_label_name(v) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            &format!("({LABEL_KEY_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// upstream `validateLabelKey`, rendered as a `field.Invalid` error at `field`.
fn validate_label_key(key: &str, field: &str) -> Result<(), String> {
    let errs = label_key_errors(key);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{field}: Invalid value: {key:?}: {}",
            errs.join("; ")
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Field selectors

/// Operator of one field term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    /// `=` or `==`
    Equals,
    /// `!=`
    NotEquals,
}

/// One field term: `field op value` (value unescaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub op: FieldOp,
    pub value: String,
}

/// A parsed field selector: the AND of its terms. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parse a `fieldSelector` query value; `""` selects everything. No whitespace trimming,
    /// as upstream.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, op, rhs)) = split_term(part) else {
                return Err(SelectorError(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            terms.push(FieldTerm {
                field: field.to_string(),
                op,
                value: unescape_value(rhs)?,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Field names the selector uses, in order, for "field label not supported" checks.
    pub fn fields(&self) -> Vec<&str> {
        self.terms.iter().map(|t| t.field.as_str()).collect()
    }

    /// `get` returns a field's value; a missing field counts as `""` (upstream `Set.Get`).
    pub fn matches(&self, get: &dyn Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let v = get(&t.field).unwrap_or_default();
            match t.op {
                FieldOp::Equals => v == t.value,
                FieldOp::NotEquals => v != t.value,
            }
        })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// The value an equality term requires for `field`, if any (upstream `RequiresExactMatch`).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && t.op == FieldOp::Equals)
            .map(|t| t.value.as_str())
    }
}

/// `field=value` / `field!=value` with the value escaped, joined by `,` (apimachinery
/// pkg/fields/selector.go `hasTerm.String`, `notHasTerm.String`, `andTerm.String`).
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = match t.op {
                FieldOp::Equals => "=",
                FieldOp::NotEquals => "!=",
            };
            write!(f, "{}{op}{}", t.field, escape_field_value(&t.value))?;
        }
        Ok(())
    }
}

/// Split on commas not preceded by a backslash escape (upstream `splitTerms`).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// First operator occurrence, trying `!=`, `==`, `=` at each position (upstream `splitTerm`).
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in [
            ("!=", FieldOp::NotEquals),
            ("==", FieldOp::Equals),
            ("=", FieldOp::Equals),
        ] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], kind, value));
            }
        }
    }
    None
}

/// upstream `UnescapeValue`: `\\`, `\,`, `\=` are escapes; bare `,` or `=` and other escapes are
/// errors.
fn unescape_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => {
                    return Err(SelectorError(format!(
                        "invalid field selector: invalid escape sequence: \\{other}"
                    )));
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v, i.e. as its number
            ',' | '=' => {
                return Err(SelectorError(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                )));
            }
            other => out.push(other),
        }
    }
    if in_slash {
        return Err(SelectorError(
            "invalid field selector: invalid escape sequence: \\".to_string(),
        ));
    }
    Ok(out)
}

/// Escape a value for use in a field selector (upstream `EscapeValue`).
pub fn escape_field_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_matching() {
        let l = labels(&[
            ("app", "web"),
            ("tier", "front"),
            ("n", "5"),
            ("kubernetes.io/service-name", "svc"),
        ]);
        // (selector, matches)
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app = web", true),
            ("  app=web  ,  tier=front ", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("app notin (web)", false),
            ("missing notin (x)", true),
            ("missing in (x)", false),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier=back", false),
            ("app=web,tier", true),
            ("n>4", true),
            ("n>5", false),
            ("n<6", true),
            ("app>1", false),
            ("kubernetes.io/service-name=svc", true),
            ("tier in (front, back)", true),
            ("app=", false),
            ("missing=", false),
            ("missing in ()", false),
            ("app in (web,)", true),
            ("x in (in, notin)", false),
            ("app in (a,web,a)", true),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel:?}: {e}"));
            assert_eq!(s.matches(&l), want, "{sel:?}");
        }
        assert!(LabelSelector::parse("").unwrap().is_empty());
        assert!(LabelSelector::parse("   ").unwrap().is_empty());
        assert!(!LabelSelector::parse("a").unwrap().is_empty());
    }

    #[test]
    fn label_selector_structure() {
        let s = LabelSelector::parse("b in (z,y,y),a!=1,!c").unwrap();
        let keys: Vec<&str> = s.requirements().iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert_eq!(s.requirements()[1].values, ["y", "z"]);
        assert_eq!(s.requirements()[1].op, LabelOp::In);
        assert_eq!(s.requirements()[2].op, LabelOp::DoesNotExist);
        // "in" and "notin" are values inside a value context
        let s = LabelSelector::parse("x in (in,notin)").unwrap();
        assert_eq!(s.requirements()[0].values, ["in", "notin"]);
    }

    #[test]
    fn label_selector_errors() {
        let name_regex = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let value_regex = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        // (selector, exact message or None for "any error")
        let long_key = "k".repeat(64);
        let cases: Vec<(&str, Option<String>)> = vec![
            ("x=a b", Some("found 'b', expected: ',' or 'end of string'".into())),
            ("x y", Some("unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt".into())),
            (",x", Some("found ',', expected: !, identifier, or 'end of string'".into())),
            ("x,", Some("found '', expected: identifier after ','".into())),
            ("x=(", Some("unable to parse requirement: found '(', expected: identifier".into())),
            ("x in a", Some("unable to parse requirement: found 'a' expected: '('".into())),
            ("x in (a", Some("unable to parse requirement: found '', expected: ',' or ')'".into())),
            ("x in (a b)", Some("unable to parse requirement: found 'b', expected: ',' or ')'".into())),
            ("x ~ y", Some("unable to parse requirement: found '~', expected: in, notin, =, ==, !=, gt, lt".into())),
            ("!", Some("unable to parse requirement: found '', expected: identifier".into())),
            ("x=>1", Some("unable to parse requirement: found '>', expected: identifier".into())),
            ("x y=z", Some("unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt".into())),
            ("x (a)", Some("unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt".into())),
            ("!x=y", Some("found '=', expected: ',' or 'end of string'".into())),
            ("-bad=1", Some(format!("unable to parse requirement: <nil>: Invalid value: \"-bad\": {name_regex}"))),
            ("a/b/c=1", None),
            ("/a=1", Some("unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty".into())),
            ("Example.com/a=1", None),
            (&long_key, Some(format!("unable to parse requirement: <nil>: Invalid value: \"{long_key}\": name part must be no more than 63 bytes"))),
            ("x=-v", Some(format!("unable to parse requirement: values[0][x]: Invalid value: \"-v\": {value_regex}"))),
            ("x>a", None),
            ("x in (ok,-no)", Some(format!("unable to parse requirement: values[0][x]: Invalid value: \"-no\": {value_regex}"))),
        ];
        for (sel, want) in cases {
            let err = LabelSelector::parse(sel)
                .err()
                .unwrap_or_else(|| panic!("{sel:?} parsed"));
            if let Some(want) = want {
                assert_eq!(err.0, want, "{sel:?}");
            }
        }
        let long_value = format!("x={}", "v".repeat(64));
        let err = LabelSelector::parse(&long_value).unwrap_err();
        assert!(err.0.contains("must be no more than 63 bytes"), "{err}");
        // valid edge cases
        for ok in [
            "a.b-c_d=v",
            "example.com/name=v",
            "x=",
            "x==",
            "x in ()",
            "x in (,)",
            "k=Value_1.2-3",
        ] {
            LabelSelector::parse(ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
    }

    #[test]
    fn field_selector_matching() {
        let get = |f: &str| -> Option<String> {
            match f {
                "metadata.name" => Some("n1".to_string()),
                "metadata.namespace" => Some("default".to_string()),
                "spec.nodeName" => Some("node,1=x\\".to_string()),
                "status.phase" => Some("Running".to_string()),
                _ => None,
            }
        };
        let cases = [
            ("", true),
            ("metadata.name=n1", true),
            ("metadata.name==n1", true),
            ("metadata.name!=n1", false),
            ("metadata.name=n2", false),
            ("metadata.name=n1,metadata.namespace=default", true),
            ("metadata.name=n1,metadata.namespace=other", false),
            ("status.phase!=Succeeded,status.phase!=Failed", true),
            ("spec.nodeName=node\\,1\\=x\\\\", true),
            ("spec.unschedulable=", true), // missing field is ""
            ("spec.unschedulable!=", false),
            ("involvedObject.namespace=", true),
            (",metadata.name=n1,", true),
        ];
        for (sel, want) in cases {
            let s = FieldSelector::parse(sel).unwrap_or_else(|e| panic!("{sel:?}: {e}"));
            assert_eq!(s.matches(&get), want, "{sel:?}");
        }
        assert!(FieldSelector::parse("").unwrap().is_empty());
    }

    #[test]
    fn field_selector_structure() {
        let s =
            FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed,involvedObject.kind=Node")
                .unwrap();
        // upstream sorts the terms
        assert_eq!(
            s.fields(),
            [
                "involvedObject.kind=Node",
                "spec.nodeName=n1",
                "status.phase!=Failed"
            ]
            .map(|t| t.split(['=', '!']).next().unwrap())
        );
        assert_eq!(s.requires_exact_match("spec.nodeName"), Some("n1"));
        assert_eq!(s.requires_exact_match("status.phase"), None);
        // whitespace is not trimmed: the field name keeps it (and the caller rejects it)
        let s = FieldSelector::parse("metadata.name = n1").unwrap();
        assert_eq!(s.fields(), ["metadata.name "]);
        assert_eq!(s.terms()[0].value, " n1");
        // the first operator wins; "a!=b=c" is invalid because "=" in the value is unescaped
        assert!(FieldSelector::parse("a!=b=c").is_err());
        let s = FieldSelector::parse("a==b").unwrap();
        assert_eq!(
            s.terms()[0],
            FieldTerm {
                field: "a".into(),
                op: FieldOp::Equals,
                value: "b".into()
            }
        );
        // escape round trip
        let v = "a,b=c\\d";
        let s = FieldSelector::parse(&format!("x={}", escape_field_value(v))).unwrap();
        assert_eq!(s.terms()[0].value, v);
    }

    #[test]
    fn field_selector_errors() {
        let cases = [
            (
                "metadata.name",
                "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
            ),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            (
                "a=b\\x",
                "invalid field selector: invalid escape sequence: \\x",
            ),
            (
                "a=b\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
        ];
        for (sel, want) in cases {
            let err = FieldSelector::parse(sel).unwrap_err();
            assert_eq!(err.0, want, "{sel:?}");
        }
    }
}
