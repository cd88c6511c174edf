//! A small gcfg (git-config style INI) reader, shared by the providers whose upstream
//! cloud config is gcfg: OpenStack's `cloud.conf` and AWS's config.
//!
//! Exists so those providers read upstream's files with one parser without importing
//! each other's folders. Upstream reads with `gcfg.FatalOnly(gcfg.ReadInto(...))`: syntax
//! errors are fatal ([`SyntaxError`]); what a variable means, and whether an unknown
//! section or variable is a warning, is each provider's business. gcfg rules kept here:
//! section and variable names are case-insensitive; `[s "sub"]` subsections; `#`/`;`
//! comments (also after a value, outside quotes); double-quoted values with `\"`, `\\`,
//! `\n`, `\t` escapes; a variable without `=` is boolean true; repeated variables make
//! multi-valued settings.

/// A fatal gcfg syntax error; its text is the provider's startup error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("cloud config line {line}: {reason}")]
pub struct SyntaxError {
    pub line: usize,
    pub reason: String,
}

/// One `[section "sub"]` with its variables (names lower-cased, in file order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub subsection: Option<String>,
    pub values: Vec<(String, String)>,
}

impl Section {
    /// Last value of a variable (gcfg: a single-valued variable takes the last one).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// Every value of a multi-valued variable; an empty value resets the list (gcfg).
    pub fn get_all(&self, key: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &self.values {
            if k == key {
                if v.is_empty() {
                    out.clear();
                } else {
                    out.push(v.clone());
                }
            }
        }
        out
    }
}

/// Parses gcfg text into sections (names lower-cased).
pub fn parse_gcfg(text: &str) -> Result<Vec<Section>, SyntaxError> {
    let mut sections: Vec<Section> = Vec::new();
    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        let syntax = |reason: &str| SyntaxError {
            line: line_no,
            reason: reason.to_owned(),
        };
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let close = rest
                .rfind(']')
                .ok_or_else(|| syntax("section header without ']'"))?;
            let after = strip_comment(&rest[close + 1..]).map_err(&syntax)?;
            if !after.trim().is_empty() {
                return Err(syntax("text after section header"));
            }
            let header = rest[..close].trim();
            let (name, sub) = match header.find(char::is_whitespace) {
                None => (header, None),
                Some(pos) => {
                    let sub = header[pos..].trim();
                    let inner = sub
                        .strip_prefix('"')
                        .and_then(|s| s.strip_suffix('"'))
                        .ok_or_else(|| syntax("subsection name must be quoted"))?;
                    (
                        &header[..pos],
                        Some(inner.replace("\\\"", "\"").replace("\\\\", "\\")),
                    )
                }
            };
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            {
                return Err(syntax("invalid section name"));
            }
            sections.push(Section {
                name: name.to_ascii_lowercase(),
                subsection: sub,
                values: Vec::new(),
            });
            continue;
        }
        let section = sections
            .last_mut()
            .ok_or_else(|| syntax("variable outside of a section"))?;
        let (key, value) = match line.find('=') {
            Some(eq) => (line[..eq].trim(), Some(&line[eq + 1..])),
            None => (strip_comment(line).map_err(&syntax)?.trim(), None),
        };
        if key.is_empty()
            || !key.starts_with(|c: char| c.is_ascii_alphabetic())
            || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(syntax("invalid variable name"));
        }
        let value = match value {
            None => "true".to_owned(), // gcfg "blank" value: boolean true
            Some(v) => unquote(v).map_err(syntax)?,
        };
        section.values.push((key.to_ascii_lowercase(), value));
    }
    Ok(sections)
}

/// Removes a trailing comment that is outside quotes (used where no value is expected).
fn strip_comment(s: &str) -> Result<&str, &'static str> {
    match s.find(['#', ';']) {
        Some(pos) => Ok(&s[..pos]),
        None => Ok(s),
    }
}

/// gcfg value: unquoted parts are trimmed (inner whitespace runs kept), quoted parts are
/// kept verbatim with escapes; `#`/`;` outside quotes start a comment.
fn unquote(raw: &str) -> Result<String, &'static str> {
    let mut out = String::new();
    let mut pending_space = String::new();
    let mut in_quotes = false;
    let mut chars = raw.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push_str(&pending_space);
                pending_space.clear();
                in_quotes = !in_quotes;
            }
            '\\' => {
                let escaped = match chars.next() {
                    Some('"') => '"',
                    Some('\\') => '\\',
                    Some('n') => '\n',
                    Some('t') => '\t',
                    Some('b') => '\u{8}',
                    _ => return Err("invalid escape sequence"),
                };
                out.push_str(&pending_space);
                pending_space.clear();
                out.push(escaped);
            }
            '#' | ';' if !in_quotes => break,
            c if c.is_whitespace() && !in_quotes => {
                if !out.is_empty() {
                    pending_space.push(c);
                }
            }
            c => {
                out.push_str(&pending_space);
                pending_space.clear();
                out.push(c);
            }
        }
    }
    if in_quotes {
        return Err("unterminated quoted value");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_values_and_multi_values() {
        let text = "# c\n[Global]\nKey = \"a b\"  ; note\nflag\nmulti = x\nmulti = y\n\
                    [Sub \"n\\\"q\"]\nmulti = z\nmulti =\n";
        let Ok(sections) = parse_gcfg(text) else {
            panic!("parse")
        };
        assert_eq!(sections.len(), 2);
        let (global, sub) = (&sections[0], &sections[1]);
        assert_eq!(global.name, "global");
        assert_eq!(global.get("key"), Some("a b"));
        assert_eq!(global.get("flag"), Some("true"));
        assert_eq!(global.get("multi"), Some("y"));
        assert_eq!(global.get_all("multi"), vec!["x", "y"]);
        assert_eq!(sub.name, "sub");
        assert_eq!(sub.subsection.as_deref(), Some("n\"q"));
        assert!(
            sub.get_all("multi").is_empty(),
            "an empty value resets the list"
        );
    }

    #[test]
    fn syntax_errors_name_the_line() {
        assert_eq!(
            parse_gcfg("[Global\nauth-url=x\n"),
            Err(SyntaxError {
                line: 1,
                reason: "section header without ']'".into()
            })
        );
        assert_eq!(
            parse_gcfg("[Global]\nauth-url = x\\q\n").map_err(|e| e.to_string()),
            Err("cloud config line 2: invalid escape sequence".into())
        );
        assert!(parse_gcfg("auth-url = x\n").is_err());
        assert!(parse_gcfg("[Global]\nauth url = x\n").is_err());
    }

    #[test]
    fn value_whitespace_and_quotes() {
        assert_eq!(unquote("  a  b  ").as_deref(), Ok("a  b"));
        assert_eq!(unquote("\" a \"").as_deref(), Ok(" a "));
        assert_eq!(unquote("a ; c").as_deref(), Ok("a"));
        assert_eq!(unquote("").as_deref(), Ok(""));
    }
}
