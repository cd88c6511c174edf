//! The one XML reader of the reference CCM: a tree of elements for AWS query-protocol
//! answers (EC2, ELB, ELBv2) and vim25 SOAP answers (vSphere).
//!
//! Exists so both providers read XML the same way, on quick-xml: elements keep their
//! attributes (vSphere carries meaning in the `type` of a ManagedObjectReference and the
//! `xsi:type` of a fault; AWS ignores them), namespace prefixes are dropped from element
//! names, the five predefined entities and numeric character references are decoded, and
//! anything else (unclosed or mismatched tags, unknown entities, a DOCTYPE, text or a
//! second element outside the root, nesting deeper than 64) is an error, never a panic.

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

const MAX_DEPTH: usize = 64;

/// Why a document could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed XML at byte {at}: {reason}")]
pub struct XmlError {
    pub at: u64,
    pub reason: String,
}

/// One element: local name, attributes (names as written), concatenated text, child
/// elements in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Every child named `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// Follows a path of child names.
    pub fn path(&self, names: &[&str]) -> Option<&Element> {
        names.iter().try_fold(self, |e, n| e.child(n))
    }

    /// Trimmed text of the child at `names`, `""` when absent.
    pub fn text_at(&self, names: &[&str]) -> &str {
        self.path(names).map_or("", |e| e.text.trim())
    }

    /// Children of the list element at `names` (AWS `<item>` / `<member>` entries).
    pub fn items(&self, names: &[&str]) -> impl Iterator<Item = &Element> {
        self.path(names)
            .map(|e| e.children.as_slice())
            .unwrap_or(&[])
            .iter()
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

fn element_of(start: &BytesStart<'_>, at: u64) -> Result<Element, XmlError> {
    let mut attrs = Vec::new();
    for a in start.attributes() {
        let a = a.map_err(|e| XmlError {
            at,
            reason: e.to_string(),
        })?;
        let value = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| XmlError {
                at,
                reason: e.to_string(),
            })?
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

/// Appends decoded text to the open element; outside the root only whitespace may
/// appear.
fn push_text(stack: &mut [Element], text: &str, at: u64) -> Result<(), XmlError> {
    match stack.last_mut() {
        Some(top) => top.text.push_str(text),
        None if text.trim().is_empty() => {}
        None => {
            return Err(XmlError {
                at,
                reason: "text outside the root element".into(),
            });
        }
    }
    Ok(())
}

/// Parses a document and returns its root element.
pub fn parse(input: &str) -> Result<Element, XmlError> {
    let mut reader = Reader::from_str(input);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let at = reader.buffer_position();
        let err = |reason: &str| XmlError {
            at,
            reason: reason.to_owned(),
        };
        let event = reader.read_event().map_err(|e| XmlError {
            at: reader.error_position(),
            reason: e.to_string(),
        })?;
        match event {
            Event::Start(s) => {
                if root.is_some() {
                    return Err(err("content after the root element"));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(err("elements nested too deeply"));
                }
                stack.push(element_of(&s, at)?);
            }
            Event::Empty(s) => {
                if root.is_some() {
                    return Err(err("content after the root element"));
                }
                let el = element_of(&s, at)?;
                close(&mut stack, &mut root, el);
            }
            Event::End(_) => {
                let el = stack
                    .pop()
                    .ok_or_else(|| err("end tag without start tag"))?;
                close(&mut stack, &mut root, el);
            }
            Event::Text(t) => {
                let text = t.xml10_content().map_err(|e| err(&e.to_string()))?;
                push_text(&mut stack, &text, at)?;
            }
            Event::CData(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&String::from_utf8_lossy(&t));
                }
            }
            Event::GeneralRef(r) => {
                let name = String::from_utf8_lossy(&r).into_owned();
                let ch = entity(&name).ok_or_else(|| err(&format!("unknown entity &{name};")))?;
                push_text(&mut stack, ch.encode_utf8(&mut [0; 4]), at)?;
            }
            Event::DocType(_) => return Err(err("DOCTYPE is not allowed")),
            Event::Eof => break,
            // Declarations, processing instructions and comments carry no data.
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
        }
    }
    if !stack.is_empty() {
        return Err(XmlError {
            at: reader.buffer_position(),
            reason: "unclosed element".into(),
        });
    }
    root.ok_or(XmlError {
        at: 0,
        reason: "no root element".into(),
    })
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
    fn decodes_every_predefined_entity_and_character_references() {
        let e =
            parse("<a>&lt;&gt;&amp;&quot;&apos; &#x1F600;&#233;<![CDATA[&amp;<b>]]></a>").unwrap();
        assert_eq!(e.text, "<>&\"' \u{1F600}\u{e9}&amp;<b>");
        // Text split by comments and references is one string, untrimmed.
        let e = parse("<a> x<!-- c -->y &amp; z </a>").unwrap();
        assert_eq!(e.text, " xy & z ");
        assert_eq!(e.children.len(), 0);
    }

    #[test]
    fn nested_item_lists_keep_order_and_depth() {
        let doc = "<r><set><item><id>1</id><inner><item>a</item><item>b</item></inner></item>\
                   <item><id>2</id><inner/></item><item><id>3</id></item></set></r>";
        let root = parse(doc).unwrap();
        let ids: Vec<_> = root.items(&["set"]).map(|i| i.text_at(&["id"])).collect();
        assert_eq!(ids, ["1", "2", "3"]);
        let first = root.items(&["set"]).next().unwrap();
        let inner: Vec<_> = first.items(&["inner"]).map(|i| i.text.as_str()).collect();
        assert_eq!(inner, ["a", "b"]);
        // An empty list element and a missing one both have no items.
        let second = root.items(&["set"]).nth(1).unwrap();
        assert_eq!(second.items(&["inner"]).count(), 0);
        assert_eq!(second.items(&["absent"]).count(), 0);
        assert_eq!(root.items(&["set", "item"]).count(), 2);
    }

    #[test]
    fn empty_elements_are_children_with_no_text() {
        let root = parse("<r><a/><b></b><c  /><d x='1'/></r>").unwrap();
        let names: Vec<_> = root.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert!(
            root.children
                .iter()
                .all(|c| c.text.is_empty() && c.children.is_empty())
        );
        assert_eq!(root.text_at(&["b"]), "");
        assert_eq!(parse("<only/>").unwrap().name, "only");
    }

    #[test]
    fn namespace_prefixes_are_dropped_from_names() {
        let doc = r#"<p:Envelope xmlns:p="urn:a" xmlns="urn:b"><p:Body><q:Resp xmlns:q="urn:c"><val>v</val></q:Resp></p:Body></p:Envelope>"#;
        let root = parse(doc).unwrap();
        assert_eq!(root.name, "Envelope");
        assert_eq!(root.text_at(&["Body", "Resp", "val"]), "v");
        assert_eq!(root.attr("xmlns"), Some("urn:b"));
        assert_eq!(
            parse("<p:a x='1'><b/></p:a>").map(|e| e.children.len()),
            Ok(1)
        );
    }

    #[test]
    fn bad_input_is_an_error() {
        for doc in [
            "",
            "<a>",
            "<a></b>",
            "</a>",
            "<a>&bogus;</a>",
            "<a>&#xZZ;</a>",
            "<a>& b</a>",
            "<a></a><b></b>",
            "<a/><b/>",
            "<a",
            "text",
            "<a/>text",
            "text<a/>",
            "&amp;<a/>",
            "<>",
            "<!DOCTYPE x><a/>",
            // End tags match the start tag literally, prefix included.
            "<p:a></a>",
            "<a x=\"&bogus;\"/>",
        ] {
            assert!(parse(doc).is_err(), "{doc:?}");
        }
        let deep = format!("{}{}", "<a>".repeat(65), "</a>".repeat(65));
        assert!(parse(&deep).is_err());
        let ok = format!("{}{}", "<a>".repeat(64), "</a>".repeat(64));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn errors_say_where() {
        let e = parse("<a><b></c></a>").unwrap_err();
        assert!(e.to_string().starts_with("malformed XML at byte "), "{e}");
        assert!(e.at > 0, "{e:?}");
    }
}
