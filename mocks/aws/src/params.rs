//! The query protocols' request parameters: a flat form (`Action=..&InstanceId.1=..`) whose
//! lists and structures are spelled with numbered keys. EC2 numbers lists directly
//! (`InstanceId.1`, `Filter.1.Value.1`); the ELB APIs put `.member.N` in between
//! (`LoadBalancerNames.member.1`). These helpers read both so handlers deal in values.

use std::collections::BTreeMap;

use crate::error::AwsError;

/// Decoded form parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Params {
    map: BTreeMap<String, String>,
}

/// A filter `Name` with its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    pub name: String,
    pub values: Vec<String>,
}

impl Params {
    /// Parses a form body; a key given twice is an error (`InvalidParameterValue`... real
    /// AWS keeps one, but a client sending that has a bug we want to see).
    pub fn parse(body: &[u8]) -> Result<Params, AwsError> {
        if std::str::from_utf8(body).is_err() {
            return Err(AwsError::bad(
                "MalformedQueryString",
                "The request body is not UTF-8 form data",
            ));
        }
        let mut map = BTreeMap::new();
        for (k, v) in form_urlencoded::parse(body) {
            if k.is_empty() {
                continue;
            }
            if map.insert(k.to_string(), v.to_string()).is_some() {
                return Err(AwsError::bad(
                    "MalformedQueryString",
                    format!("parameter {k} is given more than once"),
                ));
            }
        }
        Ok(Params { map })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(String::as_str)
    }

    pub fn require(&self, key: &str) -> Result<&str, AwsError> {
        self.get(key)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| AwsError::missing(key))
    }

    /// An optional integer.
    pub fn int(&self, key: &str) -> Result<Option<i64>, AwsError> {
        self.get(key)
            .map(|v| v.parse().map_err(|_| AwsError::invalid_value(key, v)))
            .transpose()
    }

    /// An optional boolean (`true`/`false`).
    pub fn bool(&self, key: &str) -> Result<Option<bool>, AwsError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(v) => Err(AwsError::invalid_value(key, v)),
        }
    }

    /// The indexes `N` present as `{prefix}.N` or `{prefix}.N.*`, ascending.
    pub fn indexes(&self, prefix: &str) -> Vec<u32> {
        let dotted = format!("{prefix}.");
        let mut found: Vec<u32> = self
            .map
            .range(dotted.clone()..)
            .take_while(|(k, _)| k.starts_with(&dotted))
            .filter_map(|(k, _)| canonical_index(k[dotted.len()..].split('.').next()?))
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    /// The values of `{prefix}.1`, `{prefix}.2`, ... in index order.
    pub fn list(&self, prefix: &str) -> Vec<String> {
        self.indexes(prefix)
            .into_iter()
            .filter_map(|i| self.get(&format!("{prefix}.{i}")).map(str::to_string))
            .collect()
    }

    /// EC2 filters: `Filter.N.Name` with `Filter.N.Value.M`.
    pub fn filters(&self) -> Result<Vec<Filter>, AwsError> {
        self.indexes("Filter")
            .into_iter()
            .map(|i| {
                let key = format!("Filter.{i}.Name");
                let name = self.require(&key)?.to_string();
                let values = self.list(&format!("Filter.{i}.Value"));
                Ok(Filter { name, values })
            })
            .collect()
    }

    /// EC2 tags: `{prefix}.N.Key` / `{prefix}.N.Value` (value defaults to "").
    pub fn tags(&self, prefix: &str) -> Result<Vec<(String, Option<String>)>, AwsError> {
        self.indexes(prefix)
            .into_iter()
            .map(|i| {
                let key = self.require(&format!("{prefix}.{i}.Key"))?.to_string();
                Ok((
                    key,
                    self.get(&format!("{prefix}.{i}.Value")).map(str::to_string),
                ))
            })
            .collect()
    }

    /// The query-protocol action name.
    pub fn action(&self) -> Result<&str, AwsError> {
        self.require("Action")
    }

    /// The journal's view: `Action` and `Version` first, then the rest in key order,
    /// form-encoded.
    pub fn journal_query(&self) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for key in ["Action", "Version"] {
            if let Some(v) = self.get(key) {
                out.append_pair(key, v);
            }
        }
        for (k, v) in &self.map {
            if k != "Action" && k != "Version" {
                out.append_pair(k, v);
            }
        }
        out.finish()
    }
}

/// `N` of a `prefix.N` key, only when spelled as [`Params::list`] looks it up again: no
/// sign, no leading zero (`InstanceId.01` or `InstanceId.+1` would otherwise be listed as
/// index 1 and then not be found under `InstanceId.1`; found by the property tests).
fn canonical_index(s: &str) -> Option<u32> {
    let n: u32 = s.parse().ok()?;
    (n.to_string() == s).then_some(n)
}

/// Whether `value` matches an EC2 filter pattern: `*` any run, `?` one character
/// (EC2 filters accept both; moto matches exactly, cloud-apis.md §4.4).
pub(crate) fn wildcard_match(pattern: &str, value: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let v: Vec<char> = value.chars().collect();
    // Iterative matcher with backtracking to the last `*`.
    let (mut pi, mut vi) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while vi < v.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == v[vi]) {
            pi += 1;
            vi += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, vi));
            pi += 1;
        } else if let Some((sp, sv)) = star {
            pi = sp + 1;
            vi = sv + 1;
            star = Some((sp, sv + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_filters_and_tags() {
        let p = Params::parse(
            b"Action=X&InstanceId.2=b&InstanceId.1=a&InstanceId.10=c&Filter.1.Name=tag%3Aa&Filter.1.Value.1=x&Filter.1.Value.2=y&Tag.1.Key=k&Tag.1.Value=v&Tag.2.Key=z",
        )
        .expect("parse");
        assert_eq!(p.list("InstanceId"), vec!["a", "b", "c"]);
        let f = p.filters().expect("filters");
        assert_eq!(f[0].name, "tag:a");
        assert_eq!(f[0].values, vec!["x", "y"]);
        let t = p.tags("Tag").expect("tags");
        assert_eq!(t, vec![("k".into(), Some("v".into())), ("z".into(), None)]);
        assert!(
            p.journal_query()
                .starts_with("Action=X&Filter.1.Name=tag%3Aa")
        );
    }

    #[test]
    fn malformed_input_is_an_aws_error() {
        assert_eq!(
            Params::parse(b"a=1&a=2").expect_err("dup").code,
            "MalformedQueryString"
        );
        assert_eq!(
            Params::parse(&[0xff, 0xfe]).expect_err("utf8").code,
            "MalformedQueryString"
        );
        let p = Params::parse(b"Filter.1.Value.1=x&N=abc").expect("parse");
        assert_eq!(p.filters().expect_err("name").code, "MissingParameter");
        assert_eq!(p.int("N").expect_err("int").code, "InvalidParameterValue");
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match("ip-*", "ip-127-40-0-10.x"));
        assert!(wildcard_match("i?-1*0", "ip-10"));
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("a*b*c", "axxbyyc"));
        assert!(!wildcard_match("a*b", "axxc"));
        assert!(!wildcard_match("abc", "abcd"));
        assert!(!wildcard_match("?", ""));
    }
}
