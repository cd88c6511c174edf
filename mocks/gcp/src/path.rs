//! The shapes of Compute API paths and resource references.
//!
//! google.golang.org/api `compute/v1/compute-gen.go` builds every URL as
//! `BasePath + "projects/{project}/..."` (`googleapi.ResolveRelative`), with `BasePath`
//! `https://compute.googleapis.com/compute/v1/`; cloud-provider-gcp's `api-endpoint` (the
//! v1 base, trailing slash kept) replaces it, and `v1` is swapped for `beta`/`alpha` for
//! the other two clients (`providers/gce/gce.go`). google-cloud-compute (Python) joins
//! `/compute/v1/projects/...` to its `api_endpoint` host. So paths are
//! `/compute/{v1|beta|alpha}/projects/{project}/{global|regions/R|zones/Z|aggregated}/...`;
//! the same without the `/compute` prefix is accepted too (some clients are configured
//! with the API root as base).
//!
//! Names in paths must be RFC 1035 labels of at most 63 characters, or numeric ids (GCE
//! accepts either: `[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19}`); anything else is
//! 400 `invalid`, as GCE answers.
//!
//! References inside bodies (`target`, `instances`, `healthChecks`, `network`,
//! `nextHopInstance`) are full URLs, `projects/...` paths, or scope-relative paths
//! (`global/networks/default`, `zones/z/instances/n`); GCE stores and returns them as full
//! URLs (the mock writes them with its own base).

use std::fmt;

use thiserror::Error;

/// Why a path or reference was not understood.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathError {
    #[error("no Compute API path")]
    NotCompute,
    #[error("unknown API version {0:?}")]
    Version(String),
    #[error("invalid resource name {0:?}")]
    Name(String),
    #[error("unknown path shape")]
    Shape,
    #[error("reference {0:?} is not a Compute resource path")]
    Reference(String),
}

/// The API versions served (the same model answers all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    V1,
    Beta,
    Alpha,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::Beta => "beta",
            Version::Alpha => "alpha",
        }
    }

    fn parse(s: &str) -> Option<Version> {
        match s {
            "v1" => Some(Version::V1),
            "beta" => Some(Version::Beta),
            "alpha" => Some(Version::Alpha),
            _ => None,
        }
    }
}

/// Where a resource lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Global,
    Region(String),
    Zone(String),
}

impl Scope {
    /// `global`, `regions/r`, `zones/z` (the relative path prefix).
    pub fn prefix(&self) -> String {
        match self {
            Scope::Global => "global".into(),
            Scope::Region(r) => format!("regions/{r}"),
            Scope::Zone(z) => format!("zones/{z}"),
        }
    }
}

/// A parsed Compute API path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPath {
    pub version: Version,
    pub project: String,
    pub target: Target,
}

/// What the path names below the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `projects/p`
    Project,
    /// `projects/p/zones[/z]` and `projects/p/regions[/r]`: `collection` is `zones` or
    /// `regions`.
    Location {
        collection: String,
        name: Option<String>,
    },
    /// `projects/p/aggregated/{collection}`
    Aggregated { collection: String },
    /// `projects/p/{scope}/{collection}[/{name}[/{action}]]`
    Resource {
        scope: Scope,
        collection: String,
        name: Option<String>,
        action: Option<String>,
    },
}

/// GCE's resource-name rule (RFC 1035 label, at most 63 characters).
pub fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 63 || !b[0].is_ascii_lowercase() {
        return false;
    }
    if !b[b.len() - 1].is_ascii_lowercase() && !b[b.len() - 1].is_ascii_digit() {
        return false;
    }
    b.iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// A numeric resource id as GCE accepts in place of a name.
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 20
        && !s.starts_with('0')
        && s.bytes().all(|c| c.is_ascii_digit())
        && s.parse::<u64>().is_ok()
}

/// A name or id in a path.
fn path_name(s: &str) -> Result<String, PathError> {
    if valid_name(s) || valid_id(s) {
        Ok(s.to_string())
    } else {
        Err(PathError::Name(s.to_string()))
    }
}

/// A project id: GCE's rule is 6-30 characters of `[a-z0-9-]` starting with a letter;
/// the mock accepts what looks like one (and `domain:project`).
fn project_name(s: &str) -> Result<String, PathError> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b':' || c == b'.'
        });
    if ok {
        Ok(s.to_string())
    } else {
        Err(PathError::Name(s.to_string()))
    }
}

/// Parses a request path (no query).
pub fn parse(path: &str) -> Result<ApiPath, PathError> {
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    let rest: &[&str] = match segs.as_slice() {
        ["compute", rest @ ..] => rest,
        [v, ..] if Version::parse(v).is_some() => &segs[..],
        _ => return Err(PathError::NotCompute),
    };
    let [version, "projects", project, tail @ ..] = rest else {
        return match rest.first() {
            Some(v) if Version::parse(v).is_none() => Err(PathError::Version(v.to_string())),
            _ => Err(PathError::Shape),
        };
    };
    let version = Version::parse(version).ok_or_else(|| PathError::Version(version.to_string()))?;
    let project = project_name(project)?;
    let target = match tail {
        [] => Target::Project,
        [c @ ("zones" | "regions")] => Target::Location {
            collection: c.to_string(),
            name: None,
        },
        [c @ ("zones" | "regions"), n] => Target::Location {
            collection: c.to_string(),
            name: Some(path_name(n)?),
        },
        ["aggregated", c] => Target::Aggregated {
            collection: collection(c)?,
        },
        ["global", c, more @ ..] => resource(Scope::Global, c, more)?,
        ["regions", r, c, more @ ..] => resource(Scope::Region(path_name(r)?), c, more)?,
        ["zones", z, c, more @ ..] => resource(Scope::Zone(path_name(z)?), c, more)?,
        _ => return Err(PathError::Shape),
    };
    Ok(ApiPath {
        version,
        project,
        target,
    })
}

fn collection(c: &str) -> Result<String, PathError> {
    if !c.is_empty() && c.len() <= 64 && c.bytes().all(|b| b.is_ascii_alphabetic()) {
        Ok(c.to_string())
    } else {
        Err(PathError::Shape)
    }
}

fn resource(scope: Scope, c: &str, more: &[&str]) -> Result<Target, PathError> {
    let collection = collection(c)?;
    let (name, action) = match more {
        [] => (None, None),
        [n] => (Some(path_name(n)?), None),
        [n, a] => (Some(path_name(n)?), Some(self::collection(a)?)),
        _ => return Err(PathError::Shape),
    };
    Ok(Target::Resource {
        scope,
        collection,
        name,
        action,
    })
}

/// A reference to a resource found in a body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ref {
    pub project: Option<String>,
    pub scope: Scope,
    pub collection: String,
    pub name: String,
}

impl Ref {
    /// `projects/p/{scope}/{collection}/{name}`
    pub fn relative(&self, project: &str) -> String {
        format!(
            "projects/{}/{}/{}/{}",
            self.project.as_deref().unwrap_or(project),
            self.scope.prefix(),
            self.collection,
            self.name
        )
    }
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.scope.prefix(),
            self.collection,
            self.name
        )
    }
}

/// Parses a reference: a URL (any host, any version), `projects/p/...`, or a
/// scope-relative path.
pub fn parse_ref(s: &str) -> Result<Ref, PathError> {
    let bad = || PathError::Reference(s.chars().take(200).collect());
    let s = s.trim();
    let tail = match s.find("projects/") {
        Some(i) => &s[i..],
        None => s,
    };
    let segs: Vec<&str> = tail.split('/').filter(|x| !x.is_empty()).collect();
    let (project, segs) = match segs.as_slice() {
        ["projects", p, rest @ ..] => (Some(project_name(p).map_err(|_| bad())?), rest),
        rest => (None, rest),
    };
    let (scope, c, n) = match segs {
        ["global", c, n] => (Scope::Global, c, n),
        ["regions", r, c, n] => (Scope::Region(path_name(r).map_err(|_| bad())?), c, n),
        ["zones", z, c, n] => (Scope::Zone(path_name(z).map_err(|_| bad())?), c, n),
        _ => return Err(bad()),
    };
    Ok(Ref {
        project,
        scope,
        collection: collection(c).map_err(|_| bad())?,
        name: path_name(n).map_err(|_| bad())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let p =
            parse("/compute/v1/projects/p1/zones/us-central1-a/instances/node-0").expect("parse");
        assert_eq!(p.version, Version::V1);
        assert_eq!(
            p.target,
            Target::Resource {
                scope: Scope::Zone("us-central1-a".into()),
                collection: "instances".into(),
                name: Some("node-0".into()),
                action: None
            }
        );
        let p =
            parse("/compute/beta/projects/p1/regions/r/targetPools/tp/addInstance").expect("parse");
        assert!(
            matches!(p.target, Target::Resource { action: Some(ref a), .. } if a == "addInstance")
        );
        assert!(parse("/v1/projects/p1/global/firewalls").is_ok());
        assert_eq!(
            parse("/compute/v2/projects/p/global/x"),
            Err(PathError::Version("v2".into()))
        );
        assert_eq!(
            parse("/compute/v1/projects/p/global/firewalls/Bad"),
            Err(PathError::Name("Bad".into()))
        );
        assert!(matches!(
            parse("/compute/v1/projects/p/aggregated/instances").map(|p| p.target),
            Ok(Target::Aggregated { .. })
        ));
        assert_eq!(parse("/admin/x"), Err(PathError::NotCompute));
    }

    #[test]
    fn names() {
        assert!(valid_name("a"));
        assert!(valid_name("a-1"));
        assert!(!valid_name("a-"));
        assert!(!valid_name("1a"));
        assert!(!valid_name(&"a".repeat(64)));
        assert!(valid_name(&"a".repeat(63)));
        assert!(valid_id("123"));
        assert!(!valid_id("0123"));
    }

    #[test]
    fn refs() {
        let r = parse_ref("https://www.googleapis.com/compute/v1/projects/p/zones/z/instances/n")
            .expect("ref");
        assert_eq!(
            (r.project.as_deref(), r.collection.as_str(), r.name.as_str()),
            (Some("p"), "instances", "n")
        );
        let r = parse_ref("global/networks/default").expect("ref");
        assert_eq!((r.scope, r.project), (Scope::Global, None));
        assert!(parse_ref("nonsense").is_err());
    }
}
