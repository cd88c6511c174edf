//! A small XML element tree for SOAP requests, and escaping for the responses we write.
//!
//! vim25 requests are small and their meaning depends on element names only (namespaces
//! are fixed by the protocol), so the parser keeps local names and drops prefixes; it
//! refuses anything that is not one well-formed document, so a malformed body becomes an
//! `InvalidRequest` fault before any state is touched.

use quick_xml::Reader;
use quick_xml::events::Event;

/// Deepest nesting accepted; vim25 requests need a dozen levels at most.
const MAX_DEPTH: usize = 64;

/// Why a request body is not a document we can read.
#[derive(Debug, thiserror::Error)]
pub enum XmlError {
    #[error("malformed XML: {0}")]
    Malformed(String),
    #[error("XML nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("XML document has no root element")]
    Empty,
}

/// One element: local name, attributes by local name, children and text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    pub text: String,
}

fn local(name: &[u8]) -> String {
    let s = String::from_utf8_lossy(name);
    match s.rsplit_once(':') {
        Some((_, l)) => l.to_string(),
        None => s.into_owned(),
    }
}

impl Element {
    /// Parses one document.
    pub fn parse(input: &[u8]) -> Result<Element, XmlError> {
        let mut reader = Reader::from_reader(input);
        reader.config_mut().check_end_names = true;
        let mut stack: Vec<Element> = Vec::new();
        let mut root: Option<Element> = None;
        let mut buf = Vec::new();
        loop {
            let event = reader
                .read_event_into(&mut buf)
                .map_err(|e| XmlError::Malformed(e.to_string()))?;
            match event {
                Event::Start(start) | Event::Empty(start) if root.is_some() => {
                    let _ = start;
                    return Err(XmlError::Malformed("content after the root element".into()));
                }
                Event::Start(start) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(XmlError::TooDeep);
                    }
                    stack.push(element_of(&start)?);
                }
                Event::Empty(start) => {
                    let el = element_of(&start)?;
                    close(&mut stack, &mut root, el);
                }
                Event::End(_) => {
                    let el = stack
                        .pop()
                        .ok_or_else(|| XmlError::Malformed("unbalanced end tag".into()))?;
                    close(&mut stack, &mut root, el);
                }
                Event::Text(t) => {
                    if let Some(top) = stack.last_mut() {
                        let text = t
                            .xml10_content()
                            .map_err(|e| XmlError::Malformed(e.to_string()))?;
                        top.text.push_str(&text);
                    } else if !t.iter().all(u8::is_ascii_whitespace) {
                        return Err(XmlError::Malformed("text outside the root element".into()));
                    }
                }
                Event::CData(t) => {
                    if let Some(top) = stack.last_mut() {
                        top.text.push_str(&String::from_utf8_lossy(&t));
                    }
                }
                Event::GeneralRef(r) => {
                    let Some(top) = stack.last_mut() else {
                        return Err(XmlError::Malformed("reference outside the root".into()));
                    };
                    let name = String::from_utf8_lossy(&r).into_owned();
                    let ch = match name.as_str() {
                        "lt" => Some('<'),
                        "gt" => Some('>'),
                        "amp" => Some('&'),
                        "apos" => Some('\''),
                        "quot" => Some('"'),
                        n if n.starts_with("#x") => u32::from_str_radix(&n[2..], 16)
                            .ok()
                            .and_then(char::from_u32),
                        n if n.starts_with('#') => {
                            n[1..].parse::<u32>().ok().and_then(char::from_u32)
                        }
                        _ => None,
                    };
                    let ch = ch.ok_or_else(|| {
                        XmlError::Malformed(format!("unknown entity reference &{name};"))
                    })?;
                    top.text.push(ch);
                }
                Event::Eof => break,
                Event::DocType(_) => {
                    return Err(XmlError::Malformed("DOCTYPE is not allowed".into()));
                }
                _ => {}
            }
            buf.clear();
        }
        if !stack.is_empty() {
            return Err(XmlError::Malformed("unexpected end of document".into()));
        }
        root.ok_or(XmlError::Empty)
    }

    /// The first child with this local name.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// All children with this local name.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The trimmed text of the first child with this name.
    pub fn child_text(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.trim())
    }

    /// An attribute by local name (`type`, or `xsi:type` as `type`... see [`Element::xsi_type`]).
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `xsi:type` attribute without a namespace prefix (`vim25:TraversalSpec` -> `TraversalSpec`).
    pub fn xsi_type(&self) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == "xsi:type")
            .map(|(_, v)| v.rsplit_once(':').map_or(v.as_str(), |(_, l)| l))
    }

    /// A boolean child (`true`/`1`); absent means `None`.
    pub fn child_bool(&self, name: &str) -> Option<bool> {
        self.child_text(name).map(|t| t == "true" || t == "1")
    }
}

fn element_of(start: &quick_xml::events::BytesStart<'_>) -> Result<Element, XmlError> {
    let mut attrs = Vec::new();
    for attr in start.attributes() {
        let attr = attr.map_err(|e| XmlError::Malformed(e.to_string()))?;
        let key = String::from_utf8_lossy(attr.key.as_ref()).into_owned();
        if key.starts_with("xmlns") {
            continue;
        }
        let value = attr
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| XmlError::Malformed(e.to_string()))?
            .into_owned();
        // Keep `xsi:type` qualified (it differs from a plain `type`, as on MoRefs).
        let key = if key.ends_with(":type") {
            "xsi:type".to_string()
        } else {
            local(key.as_bytes())
        };
        attrs.push((key, value));
    }
    Ok(Element {
        name: local(start.name().as_ref()),
        attrs,
        ..Default::default()
    })
}

fn close(stack: &mut [Element], root: &mut Option<Element>, el: Element) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(el),
        None => *root = Some(el),
    }
}

/// Escapes text for element content and attribute values.
pub fn esc(s: &str) -> String {
    quick_xml::escape::escape(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_soap_with_prefixes_and_entities() {
        let doc = br#"<?xml version="1.0"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
 <soapenv:Body><FindAllByDnsName xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this>
 <dnsName>a&amp;b&#65;</dnsName><selectSet xsi:type="TraversalSpec"/></FindAllByDnsName></soapenv:Body></soapenv:Envelope>"#;
        let root = Element::parse(doc).expect("parse");
        assert_eq!(root.name, "Envelope");
        let call = &root.child("Body").expect("body").children[0];
        assert_eq!(call.name, "FindAllByDnsName");
        assert_eq!(
            call.child("_this").and_then(|t| t.attr("type")),
            Some("SearchIndex")
        );
        assert_eq!(call.child_text("dnsName"), Some("a&bA"));
        assert_eq!(
            call.child("selectSet").and_then(Element::xsi_type),
            Some("TraversalSpec")
        );
    }

    #[test]
    fn rejects_malformed_documents() {
        for bad in [
            &b"<a><b></a>"[..],
            b"<a>",
            b"",
            b"not xml",
            b"<a/><b/>",
            b"<a>&bogus;</a>",
            b"<!DOCTYPE a [<!ENTITY x 'y'>]><a>&x;</a>",
        ] {
            assert!(
                Element::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let deep = "<a>".repeat(100) + &"</a>".repeat(100);
        assert!(matches!(
            Element::parse(deep.as_bytes()),
            Err(XmlError::TooDeep)
        ));
    }

    #[test]
    fn escapes() {
        assert_eq!(esc("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
    }
}
