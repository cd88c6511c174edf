//! The property collector's request types (`PropertyFilterSpec`, `PropertySpec`,
//! `ObjectSpec`, `TraversalSpec`/`SelectionSpec`, `ManagedObjectReference`) as typed
//! values, read once from the request tree.
//!
//! Why: `RetrieveProperties[Ex]`, `CreateFilter` and every `WaitForUpdates` look run the
//! same spec; reading it once into types gives one place where a malformed spec is
//! refused (as the `InvalidRequest` fault vCenter answers for a request it cannot
//! deserialize, `pyVmomi/SoapAdapter.py` raises it as `vmodl.fault.InvalidRequest`), lets
//! a stored filter be re-run without re-reading XML, and gives the property tests a
//! round trip (a spec written as XML reads back to the same spec).
//!
//! Required fields follow the vim25 schema (`vim25:PropertyFilterSpec` in the WSDL):
//! `propSet` and `objectSet` entries, `PropertySpec.type`, `ObjectSpec.obj` and a MoRef's
//! `type` attribute and value, `TraversalSpec.type` and `path`. A `selectSet` entry is a
//! `TraversalSpec` when it says so (`xsi:type`) or carries a `path`, else a reference by
//! name (`SelectionSpec`).

use crate::xml::Element;

/// Why a spec cannot be read; answered as `InvalidRequest` (or `InvalidArgument` for a
/// missing `ObjectSpec.obj`, which govmomi and vCenter report that way).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("{0}: missing required field")]
    Missing(&'static str),
    #[error("{field}: {value:?} is not a boolean")]
    NotBool { field: &'static str, value: String },
}

/// A `ManagedObjectReference`: `<x type="T">id</x>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoRef {
    pub ty: String,
    pub id: String,
}

/// One `PropertySpec`: which properties of objects of `ty` (and its subtypes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropSpec {
    pub ty: String,
    pub all: bool,
    pub paths: Vec<String>,
}

/// One `ObjectSpec`: where a walk starts and how it continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSpec {
    pub obj: MoRef,
    pub skip: bool,
    pub select: Vec<Selection>,
}

/// A `selectSet` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// A `SelectionSpec` naming a traversal defined elsewhere in the same `ObjectSpec`.
    Named(String),
    Traversal(Traversal),
}

/// A `TraversalSpec`: from objects of `ty`, follow property `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traversal {
    pub name: Option<String>,
    pub ty: String,
    pub path: String,
    pub skip: bool,
    pub select: Vec<Selection>,
}

/// A `PropertyFilterSpec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterSpec {
    pub props: Vec<PropSpec>,
    pub objects: Vec<ObjectSpec>,
}

/// Nesting of `selectSet` accepted (the XML parser caps the tree at 64 levels anyway).
const MAX_SELECT_DEPTH: usize = 32;

fn required<'a>(el: &'a Element, name: &'static str) -> Result<&'a str, SpecError> {
    el.child_text(name).ok_or(SpecError::Missing(name))
}

/// An optional `xsd:boolean` child (`true`/`false`/`1`/`0`); anything else is refused.
fn boolean(el: &Element, name: &'static str) -> Result<Option<bool>, SpecError> {
    match el.child_text(name) {
        None => Ok(None),
        Some("true" | "1") => Ok(Some(true)),
        Some("false" | "0") => Ok(Some(false)),
        Some(other) => Err(SpecError::NotBool {
            field: name,
            value: other.to_string(),
        }),
    }
}

impl MoRef {
    pub fn parse(el: &Element, field: &'static str) -> Result<MoRef, SpecError> {
        let ty = el.attr("type").filter(|t| !t.is_empty());
        let id = el.text.trim();
        match ty {
            Some(ty) if !id.is_empty() => Ok(MoRef {
                ty: ty.to_string(),
                id: id.to_string(),
            }),
            _ => Err(SpecError::Missing(field)),
        }
    }
}

impl FilterSpec {
    /// Reads a `PropertyFilterSpec` element (`specSet` or `spec`).
    pub fn parse(el: &Element) -> Result<FilterSpec, SpecError> {
        let props = el
            .all("propSet")
            .map(|p| {
                Ok(PropSpec {
                    ty: required(p, "type")?.to_string(),
                    all: boolean(p, "all")?.unwrap_or(false),
                    paths: p
                        .all("pathSet")
                        .map(|x| x.text.trim().to_string())
                        .collect(),
                })
            })
            .collect::<Result<Vec<_>, SpecError>>()?;
        let objects = el
            .all("objectSet")
            .map(|o| {
                let obj = o.child("obj").ok_or(SpecError::Missing("objectSet.obj"))?;
                Ok(ObjectSpec {
                    obj: MoRef::parse(obj, "objectSet.obj")?,
                    skip: boolean(o, "skip")?.unwrap_or(false),
                    select: selections(o, 0)?,
                })
            })
            .collect::<Result<Vec<_>, SpecError>>()?;
        if props.is_empty() {
            return Err(SpecError::Missing("propSet"));
        }
        if objects.is_empty() {
            return Err(SpecError::Missing("objectSet"));
        }
        Ok(FilterSpec { props, objects })
    }
}

fn selections(el: &Element, depth: usize) -> Result<Vec<Selection>, SpecError> {
    if depth > MAX_SELECT_DEPTH {
        return Err(SpecError::Missing("selectSet (nested too deep)"));
    }
    el.all("selectSet")
        .map(|s| {
            let name = s
                .child_text("name")
                .filter(|n| !n.is_empty())
                .map(str::to_string);
            if s.xsi_type() == Some("TraversalSpec") || s.child("path").is_some() {
                Ok(Selection::Traversal(Traversal {
                    name,
                    ty: required(s, "type")?.to_string(),
                    path: required(s, "path")?.to_string(),
                    skip: boolean(s, "skip")?.unwrap_or(false),
                    select: selections(s, depth + 1)?,
                }))
            } else {
                name.map(Selection::Named)
                    .ok_or(SpecError::Missing("selectSet.name"))
            }
        })
        .collect()
}

/// Writes specs as a client would (used by tests; the mock itself only reads them).
#[cfg(test)]
pub mod write {
    use super::*;
    use crate::xml::esc;

    pub fn filter_spec(spec: &FilterSpec, tag: &str) -> String {
        let mut out = format!("<{tag}>");
        for p in &spec.props {
            out.push_str(&format!("<propSet><type>{}</type>", esc(&p.ty)));
            if p.all {
                out.push_str("<all>true</all>");
            }
            for path in &p.paths {
                out.push_str(&format!("<pathSet>{}</pathSet>", esc(path)));
            }
            out.push_str("</propSet>");
        }
        for o in &spec.objects {
            out.push_str(&format!(
                "<objectSet><obj type=\"{}\">{}</obj><skip>{}</skip>",
                esc(&o.obj.ty),
                esc(&o.obj.id),
                o.skip
            ));
            selections(&mut out, &o.select);
            out.push_str("</objectSet>");
        }
        out.push_str(&format!("</{tag}>"));
        out
    }

    fn selections(out: &mut String, select: &[Selection]) {
        for s in select {
            match s {
                Selection::Named(n) => {
                    out.push_str(&format!("<selectSet><name>{}</name></selectSet>", esc(n)));
                }
                Selection::Traversal(t) => {
                    out.push_str("<selectSet xsi:type=\"TraversalSpec\">");
                    if let Some(n) = &t.name {
                        out.push_str(&format!("<name>{}</name>", esc(n)));
                    }
                    out.push_str(&format!(
                        "<type>{}</type><path>{}</path><skip>{}</skip>",
                        esc(&t.ty),
                        esc(&t.path),
                        t.skip
                    ));
                    selections(out, &t.select);
                    out.push_str("</selectSet>");
                }
            }
        }
    }
}
