//! A tiny XML writer for the query protocols' responses: every AWS response here is a
//! fixed tree of elements with text, so a string builder with escaping is all we need and
//! keeps the mock free of an XML dependency.

/// Whether XML 1.0 allows `c` in a document at all (`Char` production of the XML 1.0
/// spec, §2.2): no C0 controls but tab, newline and carriage return, no U+FFFE/U+FFFF.
/// Not even a character reference may name the others.
pub(crate) fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Escapes text for element content. Characters XML 1.0 cannot carry (a client may send
/// `\u{1}` in a tag value or a parameter an error message quotes) become U+FFFD, so the
/// document stays one that SDK parsers (expat in botocore, Go's encoding/xml) accept;
/// found by the property tests.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            c if !is_xml_char(c) => out.push('\u{FFFD}'),
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

/// An XML fragment under construction.
#[derive(Debug, Default, Clone)]
pub(crate) struct Xml {
    buf: String,
}

impl Xml {
    pub fn new() -> Self {
        Self::default()
    }

    /// `<name>text</name>` (escaped).
    pub fn text(&mut self, name: &str, text: impl AsRef<str>) -> &mut Self {
        self.buf.push('<');
        self.buf.push_str(name);
        self.buf.push('>');
        self.buf.push_str(&escape(text.as_ref()));
        self.buf.push_str("</");
        self.buf.push_str(name);
        self.buf.push('>');
        self
    }

    /// `<name>text</name>` only when `text` is `Some`.
    pub fn opt(&mut self, name: &str, text: Option<impl AsRef<str>>) -> &mut Self {
        if let Some(t) = text {
            self.text(name, t);
        }
        self
    }

    /// `<name>...</name>` with children written by `f`.
    pub fn elem(&mut self, name: &str, f: impl FnOnce(&mut Xml)) -> &mut Self {
        self.buf.push('<');
        self.buf.push_str(name);
        self.buf.push('>');
        f(self);
        self.buf.push_str("</");
        self.buf.push_str(name);
        self.buf.push('>');
        self
    }

    /// `<name><item_name>..</item_name>...</name>`: a list, one child per item.
    pub fn list<T>(
        &mut self,
        name: &str,
        item_name: &str,
        items: impl IntoIterator<Item = T>,
        mut f: impl FnMut(&mut Xml, T),
    ) -> &mut Self {
        self.elem(name, |x| {
            for item in items {
                x.elem(item_name, |x| f(x, item));
            }
        })
    }

    /// Escaped text directly in the current element (`<member>text</member>` lists).
    pub fn buf_text(&mut self, text: &str) -> &mut Self {
        self.buf.push_str(&escape(text));
        self
    }

    pub fn finish(self) -> String {
        self.buf
    }
}

/// A complete document `<?xml?><root xmlns=ns>body</root>`.
pub(crate) fn document(root: &str, ns: &str, body: &str) -> String {
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{root} xmlns=\"{ns}\">{body}</{root}>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_nests() {
        let mut x = Xml::new();
        x.text("a", "1 < 2 & \"q\"").opt("b", None::<&str>).list(
            "set",
            "item",
            ["x", "y"],
            |x, v| {
                x.text("v", v);
            },
        );
        assert_eq!(
            x.finish(),
            "<a>1 &lt; 2 &amp; &quot;q&quot;</a><set><item><v>x</v></item><item><v>y</v></item></set>"
        );
        assert!(document("R", "ns", "<x/>").ends_with("<R xmlns=\"ns\"><x/></R>"));
    }
}
