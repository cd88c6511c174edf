//! Small helpers over `metadata` of JSON objects, plus name validation.
//!
//! Objects are `serde_json::Value`s, so reading and writing metadata fields is done
//! in one place here instead of scattered `pointer()` calls.

use serde_json::{Map, Value};

use crate::error::{ApiError, Cause};
use crate::resources::NameRule;

/// `metadata.<field>` as a string, if it is one.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata.<field>` as a non-empty string.
pub fn meta_nonempty<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta_str(obj, field).filter(|s| !s.is_empty())
}

/// The `metadata` map, created if missing or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = match obj.as_object_mut() {
        Some(m) => m,
        None => unreachable_map(),
    };
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta.as_object_mut() {
        Some(m) => m,
        None => unreachable_map(),
    }
}

// Both call sites have just made the value an object; this keeps the code free of
// `unwrap()` while documenting that the branch is impossible.
fn unreachable_map() -> ! {
    unreachable!("value was just made an object")
}

/// Set `metadata.<field>`, or remove it when `value` is `None`.
pub fn set_meta(obj: &mut Value, field: &str, value: Option<Value>) {
    let meta = meta_mut(obj);
    match value {
        Some(v) => {
            meta.insert(field.to_string(), v);
        }
        None => {
            meta.remove(field);
        }
    }
}

/// The name of an object written to a URL that names it: a `metadata.name` in the body
/// must be the URL's (a 400 otherwise, as upstream's create-on-update, apply and update
/// paths answer), and a missing one is set to it.
pub fn set_name_from_url(obj: &mut Value, name: &str) -> Result<(), ApiError> {
    match meta_nonempty(obj, "name") {
        Some(n) if n != name => Err(ApiError::BadRequest(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        _ => {
            set_meta(obj, "name", Some(Value::String(name.to_string())));
            Ok(())
        }
    }
}

/// `metadata.finalizers` as strings (missing or malformed: empty).
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.labels` as a sorted map (non-string values are ignored).
pub fn labels(obj: &Value) -> std::collections::BTreeMap<String, String> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Now as RFC 3339 with whole seconds and `Z`, the `metav1.Time` wire form.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Characters upstream's name generator draws from (apiserver
/// pkg/storage/names/generate.go uses utilrand.String: lowercase consonants and
/// digits, avoiding look-alikes and accidental words).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `prefix` + 5 random characters.
pub fn generate_name(prefix: &str) -> String {
    let mut name = prefix.to_string();
    for _ in 0..5 {
        let i = fastrand::usize(..NAME_ALPHABET.len());
        name.push(char::from(NAME_ALPHABET[i]));
    }
    name
}

fn is_label_1123(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Validate a metadata.name; returns the causes of failure (empty when valid).
/// Rules: apimachinery pkg/util/validation/validation.go (IsDNS1123Subdomain,
/// IsDNS1123Label, IsDNS1035Label) and pkg/api/validation/path.go.
pub fn validate_name(name: &str, rule: NameRule) -> Vec<Cause> {
    let field = "metadata.name";
    let mut causes = Vec::new();
    if name == "." || name == ".." || name.contains('/') || name.contains('%') {
        causes.push(Cause::invalid(
            field,
            name,
            "may not be '.' or '..' and may not contain '/' or '%'",
        ));
        return causes;
    }
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                causes.push(Cause::invalid(
                    field,
                    name,
                    "must be no more than 253 characters",
                ));
            }
            if !name.split('.').all(is_label_1123) {
                causes.push(Cause::invalid(
                    field,
                    name,
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                     characters, '-' or '.', and must start and end with an alphanumeric character",
                ));
            }
        }
        NameRule::Label => {
            if !is_label_1123(name) {
                causes.push(Cause::invalid(
                    field,
                    name,
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
                     or '-', must start and end with an alphanumeric character, and be at most 63 \
                     characters",
                ));
            }
        }
        // Only the path-segment rule checked above.
        NameRule::PathSegment => {}
        NameRule::Label1035 => {
            if !is_label_1123(name) || !name.as_bytes()[0].is_ascii_lowercase() {
                causes.push(Cause::invalid(
                    field,
                    name,
                    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', \
                     start with an alphabetic character, end with an alphanumeric character, and be \
                     at most 63 characters",
                ));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        assert!(validate_name("node-1.example.com", NameRule::Subdomain).is_empty());
        assert!(!validate_name("Node_1", NameRule::Subdomain).is_empty());
        assert!(!validate_name("a..b", NameRule::Subdomain).is_empty());
        assert!(!validate_name("-a", NameRule::Label).is_empty());
        assert!(!validate_name("a.b", NameRule::Label).is_empty());
        assert!(!validate_name("1svc", NameRule::Label1035).is_empty());
        assert!(validate_name("svc-1", NameRule::Label1035).is_empty());
        assert!(!validate_name("", NameRule::Label1035).is_empty());
        assert!(validate_name("system:cloud-controller-manager", NameRule::PathSegment).is_empty());
        assert!(!validate_name("a/b", NameRule::PathSegment).is_empty());
        assert!(!validate_name("..", NameRule::PathSegment).is_empty());
    }

    #[test]
    fn generated_names() {
        let n = generate_name("web-");
        assert_eq!(n.len(), 9);
        assert!(n.starts_with("web-"));
        assert!(validate_name(&n, NameRule::Subdomain).is_empty());
    }

    #[test]
    fn meta_helpers_tolerate_garbage() {
        let mut v = json!(5);
        set_meta(&mut v, "name", Some(json!("x")));
        assert_eq!(meta_str(&v, "name"), Some("x"));
        assert!(finalizers(&json!({"metadata": {"finalizers": "nope"}})).is_empty());
        assert!(now_rfc3339().ends_with('Z'));
    }
}
