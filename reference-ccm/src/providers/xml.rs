//! A small XML tree for vim25 SOAP responses, keeping attributes.
//!
//! Exists because vSphere answers carry meaning in attributes (`type` of a
//! ManagedObjectReference, `xsi:type` of a fault) that the AWS reader drops; built on
//! quick-xml, namespace prefixes dropped from element names, never panics on bad input.

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

const MAX_DEPTH: usize = 64;

/// Why a document could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed XML: {0}")]
pub struct XmlError(pub String);

/// One element: local name, attributes (names as written), text, children.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    pub fn path(&self, names: &[&str]) -> Option<&Element> {
        names.iter().try_fold(self, |e, n| e.child(n))
    }

    pub fn text_at(&self, names: &[&str]) -> &str {
        self.path(names).map_or("", |e| e.text.trim())
    }

    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name || k.rsplit(':').next() == Some(name))
            .map(|(_, v)| v.as_str())
    }

    /// `xsi:type` without its namespace prefix.
    pub fn xsi_type(&self) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == "xsi:type")
            .map(|(_, v)| v.rsplit(':').next().unwrap_or(v))
    }
}

fn local(name: &[u8]) -> String {
    let s = String::from_utf8_lossy(name);
    s.rsplit(':').next().unwrap_or("").to_owned()
}

fn element_of(start: &BytesStart<'_>) -> Result<Element, XmlError> {
    let mut attrs = Vec::new();
    for a in start.attributes() {
        let a = a.map_err(|e| XmlError(e.to_string()))?;
        let value = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| XmlError(e.to_string()))?
            .into_owned();
        attrs.push((String::from_utf8_lossy(a.key.as_ref()).into_owned(), value));
    }
    Ok(Element {
        name: local(start.name().as_ref()),
        attrs,
        ..Element::default()
    })
}

fn close(stack: &mut [Element], root: &mut Option<Element>, el: Element) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(el),
        None => *root = Some(el),
    }
}

fn entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "apos" => Some('\''),
        "quot" => Some('"'),
        n => {
            let code = if let Some(h) = n.strip_prefix("#x") {
                u32::from_str_radix(h, 16).ok()
            } else {
                n.strip_prefix('#').and_then(|d| d.parse().ok())
            };
            code.and_then(char::from_u32)
        }
    }
}

/// Parses a document and returns its root element.
pub fn parse(input: &str) -> Result<Element, XmlError> {
    let mut reader = Reader::from_str(input);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        match reader.read_event().map_err(|e| XmlError(e.to_string()))? {
            Event::Start(s) => {
                if root.is_some() || stack.len() >= MAX_DEPTH {
                    return Err(XmlError("unexpected element".into()));
                }
                stack.push(element_of(&s)?);
            }
            Event::Empty(s) => {
                if root.is_some() {
                    return Err(XmlError("content after the root element".into()));
                }
                let el = element_of(&s)?;
                close(&mut stack, &mut root, el);
            }
            Event::End(_) => {
                let el = stack
                    .pop()
                    .ok_or_else(|| XmlError("unbalanced end tag".into()))?;
                close(&mut stack, &mut root, el);
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    let text = t.xml10_content().map_err(|e| XmlError(e.to_string()))?;
                    top.text.push_str(&text);
                }
            }
            Event::CData(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&String::from_utf8_lossy(&t));
                }
            }
            Event::GeneralRef(r) => {
                let name = String::from_utf8_lossy(&r).into_owned();
                let ch =
                    entity(&name).ok_or_else(|| XmlError(format!("unknown entity &{name};")))?;
                if let Some(top) = stack.last_mut() {
                    top.text.push(ch);
                }
            }
            Event::DocType(_) => return Err(XmlError("DOCTYPE is not allowed".into())),
            Event::Eof => break,
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err(XmlError("unexpected end of document".into()));
    }
    root.ok_or_else(|| XmlError("no root element".into()))
}

/// Escapes text for an element body or attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_attributes_and_entities() {
        let e = parse(r#"<s:Env xmlns:s="x"><r type="VirtualMachine" xsi:type="xsd:Foo">vm-1 &amp; &#65;</r><e/></s:Env>"#).unwrap();
        assert_eq!(e.name, "Env");
        let r = e.child("r").unwrap();
        assert_eq!(r.attr("type"), Some("VirtualMachine"));
        assert_eq!(r.xsi_type(), Some("Foo"));
        assert_eq!(r.text, "vm-1 & A");
        assert!(e.child("e").is_some());
    }

    #[test]
    fn bad_input_is_an_error() {
        for doc in [
            "",
            "<a>",
            "<a></b>",
            "<a>&bogus;</a>",
            "<a/><b/>",
            "<!DOCTYPE x><a/>",
        ] {
            assert!(parse(doc).is_err(), "{doc}");
        }
    }
}
