//! A small XML reader for AWS query-protocol responses.
//!
//! Exists so the AWS provider needs no XML crate: EC2 and ELB answer with plain element
//! trees (no mixed content, no DTDs), so a tree of elements with text, namespace prefixes
//! dropped and the five predefined entities plus numeric references decoded, is enough.
//! Anything else (unclosed tags, mismatched names) is an error, never a panic.

/// Why a document could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed XML at byte {at}: {reason}")]
pub struct XmlError {
    pub at: usize,
    pub reason: &'static str,
}

/// One element: local name, concatenated text, child elements in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Follows a path of child names.
    pub fn path(&self, names: &[&str]) -> Option<&Element> {
        names.iter().try_fold(self, |e, n| e.child(n))
    }

    /// Trimmed text of the child at `names`, `""` when absent.
    pub fn text_at(&self, names: &[&str]) -> &str {
        self.path(names).map(|e| e.text.trim()).unwrap_or("")
    }

    /// Children of the list element at `names` (`<item>` / `<member>` entries).
    pub fn items(&self, names: &[&str]) -> impl Iterator<Item = &Element> {
        self.path(names)
            .map(|e| e.children.as_slice())
            .unwrap_or(&[])
            .iter()
    }
}

fn local(name: &str) -> &str {
    name.rsplit(':').next().unwrap_or(name)
}

fn decode(raw: &str, at: usize) -> Result<String, XmlError> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let end = after.find(';').ok_or(XmlError {
            at,
            reason: "unterminated entity",
        })?;
        let entity = &after[..end];
        let c = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => {
                let num = if let Some(h) = entity.strip_prefix("#x") {
                    u32::from_str_radix(h, 16).ok()
                } else if let Some(d) = entity.strip_prefix('#') {
                    d.parse::<u32>().ok()
                } else {
                    None
                };
                num.and_then(char::from_u32)
            }
        };
        out.push(c.ok_or(XmlError {
            at,
            reason: "unknown entity",
        })?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Parses a document and returns its root element.
pub fn parse(doc: &str) -> Result<Element, XmlError> {
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut pos = 0;
    let bytes = doc.as_bytes();
    while pos < doc.len() {
        if bytes[pos] != b'<' {
            let end = doc[pos..].find('<').map_or(doc.len(), |i| pos + i);
            let text = decode(&doc[pos..end], pos)?;
            match stack.last_mut() {
                Some(top) => top.text.push_str(&text),
                None if text.trim().is_empty() => {}
                None => {
                    return Err(XmlError {
                        at: pos,
                        reason: "text outside the root element",
                    });
                }
            }
            pos = end;
            continue;
        }
        let rest = &doc[pos..];
        let skip_to = |marker: &str, reason: &'static str| {
            rest.find(marker)
                .map(|i| pos + i + marker.len())
                .ok_or(XmlError { at: pos, reason })
        };
        if rest.starts_with("<?") {
            pos = skip_to("?>", "unterminated declaration")?;
        } else if rest.starts_with("<!--") {
            pos = skip_to("-->", "unterminated comment")?;
        } else if rest.starts_with("<![CDATA[") {
            let end = skip_to("]]>", "unterminated CDATA")?;
            if let Some(top) = stack.last_mut() {
                top.text.push_str(&doc[pos + 9..end - 3]);
            }
            pos = end;
        } else if rest.starts_with("<!") {
            pos = skip_to(">", "unterminated declaration")?;
        } else if let Some(close) = rest.strip_prefix("</") {
            let end = close.find('>').ok_or(XmlError {
                at: pos,
                reason: "unterminated end tag",
            })?;
            let name = local(close[..end].trim());
            let done = stack.pop().ok_or(XmlError {
                at: pos,
                reason: "end tag without start tag",
            })?;
            if done.name != name {
                return Err(XmlError {
                    at: pos,
                    reason: "mismatched end tag",
                });
            }
            match stack.last_mut() {
                Some(parent) => parent.children.push(done),
                None => root = Some(done),
            }
            pos += 2 + end + 1;
        } else {
            let end = rest.find('>').ok_or(XmlError {
                at: pos,
                reason: "unterminated start tag",
            })?;
            let inner = &rest[1..end];
            let self_closing = inner.ends_with('/');
            let inner = inner.trim_end_matches('/');
            let name = inner.split_whitespace().next().unwrap_or("");
            if name.is_empty() {
                return Err(XmlError {
                    at: pos,
                    reason: "empty tag name",
                });
            }
            if root.is_some() {
                return Err(XmlError {
                    at: pos,
                    reason: "content after the root element",
                });
            }
            let el = Element {
                name: local(name).to_owned(),
                ..Default::default()
            };
            if self_closing {
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => root = Some(el),
                }
            } else {
                stack.push(el);
            }
            pos += end + 1;
        }
    }
    if !stack.is_empty() {
        return Err(XmlError {
            at: doc.len(),
            reason: "unclosed element",
        });
    }
    root.ok_or(XmlError {
        at: 0,
        reason: "no root element",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_ec2_answer() {
        let doc = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>r</requestId>
  <reservationSet><item><instancesSet><item>
    <instanceId>i-1</instanceId><dnsName/><tagSet><item><key>a&amp;b</key><value>&#65;&#x42;</value></item></tagSet>
  </item></instancesSet></item></reservationSet>
</DescribeInstancesResponse>"#;
        let root = parse(doc).expect("parses");
        assert_eq!(root.name, "DescribeInstancesResponse");
        let inst: Vec<_> = root
            .items(&["reservationSet"])
            .flat_map(|r| r.items(&["instancesSet"]))
            .collect();
        assert_eq!(inst.len(), 1);
        assert_eq!(inst[0].text_at(&["instanceId"]), "i-1");
        assert_eq!(inst[0].text_at(&["dnsName"]), "");
        let tag = inst[0].items(&["tagSet"]).next().expect("tag");
        assert_eq!(tag.text_at(&["key"]), "a&b");
        assert_eq!(tag.text_at(&["value"]), "AB");
    }

    #[test]
    fn refuses_broken_documents() {
        for bad in [
            "",
            "<a>",
            "<a></b>",
            "</a>",
            "<a>&bogus;</a>",
            "<a></a><b></b>",
            "<a",
            "text",
            "<>",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse("<p:a x='1'><b/></p:a>").map(|e| e.children.len()),
            Ok(1)
        );
    }
}
