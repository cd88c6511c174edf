//! The `PropertyCollector` (and the `ViewManager` views it walks): `RetrieveProperties[Ex]`
//! with paging, property filters and `WaitForUpdates[Ex]`, `Fetch` (pyvmomi 8's property
//! reads), and the traversal of filter specs (`TraversalSpec` paths, named `selectSet`s)
//! over the inventory.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use axum::response::Response;
use mock_cloud::lifecycle::Mode;

use super::envelope::{Call, Fault, expect_this, mo, ok};
use super::service_content_fields;
use super::sessions::{Session, live_session, user_session_val};
use crate::Shared;
use crate::props::{self, Val};
use crate::spec::{FilterSpec, Selection, SpecError, Traversal};
use crate::state::{Inventory, Kind};
use crate::xml::{Element, esc};

/// `RetrieveProperties` (all at once) and `RetrievePropertiesEx` (paged by `maxObjects`).
pub(super) fn retrieve_properties(
    shared: &Shared,
    call: &Call<'_>,
    session: Option<&Session>,
) -> Result<Response, Fault> {
    expect_this(call, "PropertyCollector", "propertyCollector")?;
    let specs = read_specs(call.el)?;
    let contents = retrieve(shared, &specs, session)?;
    if call.method == "RetrieveProperties" {
        let inner: String = contents
            .iter()
            .map(|c| format!("<returnval>{}</returnval>", c.xml()))
            .collect();
        return Ok(ok(call.method, inner));
    }
    let max = call
        .el
        .child("options")
        .and_then(|o| o.child_text("maxObjects"))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(usize::MAX);
    let contents = contents.iter().map(Content::xml).collect();
    Ok(ok(call.method, page(shared, contents, max)))
}

pub(super) fn continue_retrieve(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let token = call.el.child_text("token").unwrap_or("");
    let rest = shared.sessions().pages.remove(token);
    let (rest, max) = rest.ok_or_else(|| Fault::invalid_argument("token"))?;
    Ok(ok(call.method, page(shared, rest, max)))
}

pub(super) fn cancel_retrieve(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let token = call.el.child_text("token").unwrap_or("");
    shared.sessions().pages.remove(token);
    Ok(ok(call.method, String::new()))
}

pub(super) fn create_filter(
    shared: &Shared,
    call: &Call<'_>,
    session: Option<&Session>,
) -> Result<Response, Fault> {
    expect_this(call, "PropertyCollector", "propertyCollector")?;
    let spec = call
        .el
        .child("spec")
        .ok_or_else(|| Fault::invalid_argument("spec"))?;
    let spec = FilterSpec::parse(spec).map_err(spec_fault)?;
    // Validate now, as vCenter does: a bad spec fails CreateFilter itself.
    retrieve(shared, std::slice::from_ref(&spec), session)?;
    let id = format!(
        "session[{}]{}",
        crate::state::new_uuid(),
        shared.sessions().filters.len() + 1
    );
    shared.sessions().filters.insert(id.clone(), spec);
    Ok(ok(
        call.method,
        format!("<returnval {}</returnval>", mo("PropertyFilter", &id)),
    ))
}

pub(super) fn destroy_filter(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    shared.sessions().reported.remove(call.this.1);
    if shared.sessions().filters.remove(call.this.1).is_none() {
        return Err(Fault::not_found("PropertyFilter", call.this.1));
    }
    Ok(ok(call.method, String::new()))
}

/// `ViewManager.CreateContainerView`: a view the property collector can traverse.
pub(super) fn create_container_view(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    expect_this(call, "ViewManager", "ViewManager")?;
    let container = call
        .el
        .child_text("container")
        .ok_or_else(|| Fault::invalid_argument("container"))?;
    let types: Vec<String> = call
        .el
        .all("type")
        .map(|t| t.text.trim().to_string())
        .collect();
    let recursive = call.el.child_bool("recursive").unwrap_or(false);
    let mut inv = shared.inventory();
    let id = inv
        .add_view(container, &types, recursive)
        .ok_or_else(|| Fault::not_found("Folder", container))?;
    Ok(ok(
        call.method,
        format!("<returnval {}</returnval>", mo("ContainerView", &id)),
    ))
}

pub(super) fn destroy_view(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let (_, id) = call.this;
    let mut inv = shared.inventory();
    if inv.get(id).is_none_or(|o| o.kind != Kind::ContainerView) {
        return Err(Fault::not_found("ContainerView", id));
    }
    inv.objects.remove(id);
    Ok(ok(call.method, String::new()))
}

/// Properties of the singleton managers (not inventory objects). Takes the inventory
/// the caller already holds (its lock is not re-entrant).
fn manager_props(
    shared: &Shared,
    inv: &Inventory,
    id: &str,
    session: Option<&Session>,
) -> Option<(&'static str, Vec<(&'static str, Val)>)> {
    match id {
        "SessionManager" => {
            let mut props = Vec::new();
            if let Some(s) = session {
                props.push(("currentSession", user_session_val(s)));
            }
            props.push(("defaultLocale", props::s("en")));
            Some(("SessionManager", props))
        }
        "ServiceInstance" => Some((
            "ServiceInstance",
            vec![(
                "content",
                Val::Raw("ServiceContent", service_content_fields(shared, inv)),
            )],
        )),
        _ => None,
    }
}

/// `Fetch(prop)`: one property of one object, which pyvmomi 8+ uses for every attribute
/// read (`pyVmomi/StubAdapterAccessorImpl.py`); unset properties return nothing.
pub(super) fn fetch(
    shared: &Shared,
    call: &Call<'_>,
    session: Option<&Session>,
) -> Result<Response, Fault> {
    let (ty, id) = call.this;
    let prop = call
        .el
        .child_text("prop")
        .ok_or_else(|| Fault::invalid_argument("prop"))?;
    let inv = shared.inventory();
    let (kind, props) = match manager_props(shared, &inv, id, session) {
        Some((t, props)) if t == ty => (None, props),
        _ => {
            let o = inv
                .get(id)
                .filter(|o| o.kind.is_a(ty))
                .ok_or_else(|| Fault::not_found(ty, id))?;
            (Some(o.kind), props::properties(&inv, o))
        }
    };
    let found = match kind {
        Some(k) => props::lookup(&props, k, prop),
        None => Ok(props
            .iter()
            .find(|(n, _)| *n == prop)
            .map(|(_, v)| v.clone())),
    };
    let value = found.map_err(|()| {
        Fault::new(
            "InvalidProperty",
            format!("A specified parameter was not correct: {prop}"),
        )
        .with(format!("<name>{}</name>", esc(prop)))
    })?;
    let mut out = String::new();
    if let Some(v) = value {
        v.write_result(&mut out);
    }
    Ok(ok(call.method, out))
}

/// Longest a `WaitForUpdates[Ex]` blocks when the client sets no `maxWaitSeconds`
/// (vCenter would wait for ever; the client just calls again).
const WAIT_CAP: Duration = Duration::from_secs(60);
/// How often a blocked `WaitForUpdates[Ex]` looks again (time-based task lifecycles end
/// without any request).
const WAIT_POLL: Duration = Duration::from_millis(10);

/// `WaitForUpdates[Ex]`. The first call (empty version) reports every filtered object as
/// `enter` with its selected properties; a later call reports, as `modify` with every
/// selected property assigned, the objects whose properties differ from what that filter
/// last reported, and `leave` for objects gone. With nothing to report it blocks, as
/// vCenter does, until something changes or `options/maxWaitSeconds` (WaitForUpdatesEx;
/// else [`WAIT_CAP`]) passes, and then answers no update set (Ex) or an empty one.
/// Each look counts as a read of the filtered tasks (lifecycle mode `reads`), and while
/// such a task is running the call answers at once so the client's next call reads again.
/// Simplification: the version only tells the first call from later ones.
pub(super) async fn wait_for_updates(
    shared: &Shared,
    call: &Call<'_>,
    cookie: Option<&str>,
) -> Result<Response, Fault> {
    let Some(session) = live_session(shared, cookie) else {
        return Err(Fault::not_authenticated());
    };
    expect_this(call, "PropertyCollector", "propertyCollector")?;
    let version = call.el.child_text("version").unwrap_or("");
    let n: u64 = if version.is_empty() {
        0
    } else {
        version.parse().map_err(|_| {
            Fault::new(
                "InvalidCollectorVersion",
                "The collector version is not valid",
            )
        })?
    };
    let ex = call.method == "WaitForUpdatesEx";
    let max_wait = call
        .el
        .child("options")
        .and_then(|o| o.child_text("maxWaitSeconds"))
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let deadline = tokio::time::Instant::now() + max_wait.unwrap_or(WAIT_CAP).min(WAIT_CAP);
    loop {
        let (sets, reads_pending) = collect_updates(shared, &session, n == 0)?;
        let now = tokio::time::Instant::now();
        if !sets.is_empty() || reads_pending || now >= deadline {
            if sets.is_empty() && ex && now >= deadline {
                return Ok(ok(call.method, String::new()));
            }
            let mut out = format!("<returnval><version>{}</version>", n + 1);
            out.push_str(&sets);
            out.push_str("</returnval>");
            return Ok(ok(call.method, out));
        }
        tokio::time::sleep_until(deadline.min(now + WAIT_POLL)).await;
    }
}

/// One look for `wait_for_updates`: the `filterSet` XML of what changed per filter since
/// its last report (recording the new state), and whether a task the filters watch is
/// running in lifecycle mode `reads`.
fn collect_updates(
    shared: &Shared,
    session: &Session,
    first: bool,
) -> Result<(String, bool), Fault> {
    let filters: Vec<(String, FilterSpec)> = shared
        .sessions()
        .filters
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let watched: Vec<String> = filters
        .iter()
        .flat_map(|(_, spec)| &spec.objects)
        .filter(|o| o.obj.ty == "Task")
        .map(|o| o.obj.id.clone())
        .collect();
    let reads_pending = {
        let mut inv = shared.inventory();
        let reads: Vec<&str> = watched.iter().map(String::as_str).collect();
        inv.settle_tasks(&reads);
        watched.iter().any(|id| {
            inv.get(id)
                .and_then(|o| o.task.as_ref())
                .and_then(|t| t.pending.as_ref())
                .is_some_and(|p| matches!(p.lifecycle.mode(), Mode::Reads { .. }))
        })
    };
    let mut out = String::new();
    for (id, spec) in filters {
        let contents = retrieve(shared, std::slice::from_ref(&spec), Some(session))?;
        let now: HashMap<String, (String, String)> = contents
            .iter()
            .map(|c| (c.id.clone(), (c.xml(), c.ty.clone())))
            .collect();
        let mut sessions = shared.sessions();
        let seen = sessions.reported.entry(id.clone()).or_default();
        if first {
            seen.clear();
        }
        let mut set = String::new();
        for c in &contents {
            let xml = &now[&c.id].0;
            match seen.get(&c.id) {
                None => set.push_str(&format!("<objectSet>{}</objectSet>", c.update_xml("enter"))),
                Some((old, _)) if old != xml => set.push_str(&format!(
                    "<objectSet>{}</objectSet>",
                    c.update_xml("modify")
                )),
                Some(_) => {}
            }
        }
        for (gone, (_, ty)) in seen.iter().filter(|(k, _)| !now.contains_key(*k)) {
            let _ = write!(
                set,
                "<objectSet><kind>leave</kind><obj {}</obj></objectSet>",
                mo(ty, gone)
            );
        }
        *seen = now;
        if !set.is_empty() {
            let _ = write!(
                out,
                "<filterSet><filter {}</filter>{set}</filterSet>",
                mo("PropertyFilter", &id)
            );
        }
    }
    Ok((out, reads_pending))
}

fn page(shared: &Shared, mut contents: Vec<String>, max: usize) -> String {
    if contents.is_empty() {
        return String::new();
    }
    let mut out = String::from("<returnval>");
    if contents.len() > max {
        let rest = contents.split_off(max);
        let token = crate::state::new_uuid();
        let _ = write!(out, "<token>{token}</token>");
        // ContinueRetrievePropertiesEx keeps the first call's page size.
        shared.sessions().pages.insert(token, (rest, max));
    }
    for c in contents {
        let _ = write!(out, "<objects>{c}</objects>");
    }
    out.push_str("</returnval>");
    out
}

/// A `selectSet` entry resolved for the walk: a reference by name, or a traversal's
/// place in the arena.
#[derive(Debug)]
enum Select<'a> {
    Named(&'a str),
    Index(usize),
}

/// One traversal of the spec and its own `selectSet`, resolved.
struct Rule<'a> {
    t: &'a Traversal,
    select: Vec<Select<'a>>,
}

/// Puts the traversals of one spec in an arena and names them (names are shared by all
/// `ObjectSpec`s of a spec).
fn flatten<'a>(
    selects: &'a [Selection],
    arena: &mut Vec<Rule<'a>>,
    named: &mut HashMap<&'a str, usize>,
) -> Vec<Select<'a>> {
    let mut out = Vec::new();
    for s in selects {
        match s {
            Selection::Named(n) => out.push(Select::Named(n)),
            Selection::Traversal(t) => {
                let select = flatten(&t.select, arena, named);
                let index = arena.len();
                arena.push(Rule { t, select });
                if let Some(n) = &t.name {
                    named.insert(n, index);
                }
                out.push(Select::Index(index));
            }
        }
    }
    out
}

/// The `specSet` entries of a RetrieveProperties[Ex] call, read.
fn read_specs(el: &Element) -> Result<Vec<FilterSpec>, Fault> {
    let specs = el
        .all("specSet")
        .map(FilterSpec::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(spec_fault)?;
    if specs.is_empty() {
        return Err(Fault::invalid_argument("specSet"));
    }
    Ok(specs)
}

/// A spec that cannot be read: `InvalidArgument` for a missing `ObjectSpec.obj` (what
/// the mock answered before specs were typed, kept for clients that test for it), else
/// `InvalidRequest`.
fn spec_fault(e: SpecError) -> Fault {
    match e {
        SpecError::Missing("objectSet.obj") => Fault::invalid_argument("objectSet.obj"),
        e => Fault::invalid_request(e.to_string()),
    }
}

/// Objects a traversal path leads to.
fn follow(inv: &Inventory, id: &str, path: &str) -> Vec<String> {
    let Some(o) = inv.get(id) else {
        return Vec::new();
    };
    match path {
        "parent" => o.parent.iter().cloned().collect(),
        "resourcePool" if o.kind == Kind::VirtualMachine => {
            o.vm.iter().map(|v| v.resource_pool.clone()).collect()
        }
        "runtime.host" => o.vm.iter().map(|v| v.host.clone()).collect(),
        p => o.refs(p).to_vec(),
    }
}

struct Walk<'a> {
    inv: &'a Inventory,
    named: &'a HashMap<&'a str, usize>,
    arena: &'a [Rule<'a>],
    found: Vec<String>,
    expanded: std::collections::HashSet<(String, usize)>,
}

impl Walk<'_> {
    fn add(&mut self, id: &str) {
        if !self.found.iter().any(|f| f == id) {
            self.found.push(id.to_string());
        }
    }

    fn walk(&mut self, id: &str, selects: &[Select<'_>], depth: usize) {
        if depth > 64 {
            return;
        }
        for sel in selects {
            let index = match sel {
                Select::Index(i) => *i,
                Select::Named(n) => match self.named.get(*n) {
                    Some(&i) => i,
                    None => continue,
                },
            };
            let Some(rule) = self.arena.get(index) else {
                continue;
            };
            let t = rule.t;
            let Some(o) = self.inv.get(id) else { continue };
            if !o.kind.is_a(&t.ty) {
                continue;
            }
            if !self.expanded.insert((id.to_string(), index)) {
                continue;
            }
            for next in follow(self.inv, id, &t.path) {
                if !t.skip {
                    self.add(&next);
                }
                self.walk(&next, &rule.select, depth + 1);
            }
        }
    }
}

/// One object's selected properties.
#[derive(Debug, Clone)]
struct Content {
    ty: String,
    id: String,
    sets: Vec<(String, Val)>,
}

impl Content {
    /// `ObjectContent` fields: `obj` and one `propSet` per property.
    fn xml(&self) -> String {
        let mut xml = format!("<obj {}</obj>", mo(&self.ty, &self.id));
        for (name, v) in &self.sets {
            let _ = write!(xml, "<propSet><name>{}</name>", esc(name));
            v.write_top(&mut xml, "val");
            xml.push_str("</propSet>");
        }
        xml
    }

    /// `ObjectUpdate` fields (`kind` enter or modify): every property as `assign`.
    fn update_xml(&self, kind: &str) -> String {
        let mut xml = format!("<kind>{kind}</kind><obj {}</obj>", mo(&self.ty, &self.id));
        for (name, v) in &self.sets {
            let _ = write!(xml, "<changeSet><name>{}</name><op>assign</op>", esc(name));
            v.write_top(&mut xml, "val");
            xml.push_str("</changeSet>");
        }
        xml
    }
}

/// Runs the filter specs of a RetrieveProperties[Ex] call; one `<returnval>` per object.
fn retrieve(
    shared: &Shared,
    specs: &[FilterSpec],
    session: Option<&Session>,
) -> Result<Vec<Content>, Fault> {
    let inv = shared.inventory();
    let mut out = Vec::new();
    for spec in specs {
        let mut named = HashMap::new();
        let mut arena = Vec::new();
        let mut found = Vec::new();
        for os in &spec.objects {
            let (ty, id) = (os.obj.ty.as_str(), os.obj.id.as_str());
            if session.is_none() && (ty, id) != ("SessionManager", "SessionManager") {
                return Err(Fault::not_authenticated());
            }
            let selects = flatten(&os.select, &mut arena, &mut named);
            if matches!(
                (ty, id),
                ("SessionManager", "SessionManager") | ("ServiceInstance", "ServiceInstance")
            ) {
                if !found.iter().any(|f| f == id) {
                    found.push(id.to_string());
                }
                continue;
            }
            let o = inv.get(id).filter(|o| o.kind.is_a(ty));
            if o.is_none() {
                return Err(Fault::not_found(ty, id));
            }
            let mut walk = Walk {
                inv: &inv,
                named: &named,
                arena: &arena,
                found: Vec::new(),
                expanded: Default::default(),
            };
            if !os.skip {
                walk.add(id);
            }
            walk.walk(id, &selects, 0);
            for f in walk.found {
                if !found.contains(&f) {
                    found.push(f);
                }
            }
        }
        for id in &found {
            // Only objects some propSpec asks about are reported (and computed).
            let wanted = |ps: &crate::spec::PropSpec| match inv.get(id) {
                Some(o) => o.kind.is_a(&ps.ty),
                None => ps.ty == *id,
            };
            if !spec.props.iter().any(wanted) {
                continue;
            }
            let (ty, kind, props) =
                if let Some((ty, props)) = manager_props(shared, &inv, id, session) {
                    (ty, None, props)
                } else {
                    let Some(o) = inv.get(id) else { continue };
                    (o.kind.type_name(), Some(o.kind), props::properties(&inv, o))
                };
            let mut matched = false;
            let mut sets: Vec<(String, Val)> = Vec::new();
            for ps in &spec.props {
                let is = match kind {
                    Some(k) => k.is_a(&ps.ty),
                    None => ps.ty == ty,
                };
                if !is {
                    continue;
                }
                matched = true;
                if ps.all {
                    for (n, v) in &props {
                        sets.push((n.to_string(), v.clone()));
                    }
                }
                for path in &ps.paths {
                    let path = path.as_str();
                    let found = match kind {
                        Some(k) => props::lookup(&props, k, path),
                        None => match props.iter().find(|(n, _)| *n == path) {
                            Some((_, v)) => Ok(Some(v.clone())),
                            None if path == "currentSession" => Ok(None),
                            None => Err(()),
                        },
                    };
                    match found {
                        Ok(Some(v)) => sets.push((path.to_string(), v)),
                        Ok(None) => {}
                        Err(()) => {
                            return Err(Fault::new(
                                "InvalidProperty",
                                format!("A specified parameter was not correct: {path}"),
                            )
                            .with(format!("<name>{}</name>", esc(path))));
                        }
                    }
                }
            }
            if !matched {
                continue;
            }
            let mut seen = std::collections::HashSet::new();
            sets.retain(|(n, _)| seen.insert(n.clone()));
            out.push(Content {
                ty: ty.to_string(),
                id: id.to_string(),
                sets,
            });
        }
    }
    Ok(out)
}
