//! `gce.conf`, the GCE provider's cloud config, in upstream's gcfg (git-config style INI)
//! format, and its resolution against the metadata server.
//!
//! Upstream, with where (kubernetes/cloud-provider-gcp `providers/gce/gce.go`):
//! - `ConfigGlobal` lists the `[global]` keys; `readConfig` reads the file with
//!   `gcfg.FatalOnly(gcfg.ReadInto(..))`. gcfg (gopkg.in/gcfg.v1 `set.go`, `errors.go`)
//!   reports data for an unknown section or variable as an `extraData` *warning*, which
//!   `FatalOnly` drops: so unknown keys and sections are ignored (we keep them as startup
//!   warnings), while syntax errors, a variable before any section, a blank (no `=`)
//!   string variable and an unparsable bool are fatal. Names are case-insensitive;
//!   multi-valued keys (`node-tags`, `alpha-features`) repeat, and a blank one resets the
//!   list; bools accept `true/yes/on/1` and `false/no/off/0` (gcfg `types/bool.go`), and a
//!   bare `regional` means true; values may be quoted (`\"`, `\\`, `\n`, `\t` escapes);
//!   `;` and `#` start comments outside quotes.
//! - `GenerateCloudConfig`: `token-url` empty → the metadata server's token, `nil` → no
//!   token source, anything else → `NewAltTokenSource(token-url, token-body)`; when
//!   `project-id` or `local-zone` is missing both come from the metadata server
//!   (`getProjectAndZone` in `gce_util.go`: `instance/zone` must be
//!   `projects/<n>/zones/<zone>`, `project/project-id`), then the file's values win;
//!   region = zone up to its last `-` (`GetGCERegion`); `multizone` or `regional` manage
//!   every zone of the region (`ManagedZones = nil`, listed at start by
//!   `refreshManagedZones`); `network-name` with a `/` is a URL, else a name, and when
//!   missing it comes from `instance/network-interfaces/0/network` (`getNetworkNameViaMetadata`);
//!   `network-project-id` defaults to the project (`CreateGCECloud`).
//!
//! `token-url = nil`: upstream then uses Google's default credentials (`clientOptions` →
//! `FindDefaultCredentials`), of which the reference CCM models only the last, the
//! metadata server (when `GCE_METADATA_HOST` is set); without one, or when it has no
//! token, Compute is called with no Authorization header (see `client.rs`).

// `TokenConfig` is the client's (it picks the token source); re-exported as part of
// the resolved config.
pub use super::client::TokenConfig;
use super::client::{ComputeError, MetadataClient};

/// Upstream's default Compute endpoint (`gceComputeAPIEndpoint`).
pub const DEFAULT_API_ENDPOINT: &str = "https://www.googleapis.com/compute/v1/";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read cloud config {path}: {reason}")]
    Read { path: String, reason: String },
    /// A fatal gcfg error (line number, message).
    #[error("gce.conf line {line}: {message}")]
    Syntax { line: usize, message: String },
    #[error("gce.conf: {0}")]
    Invalid(String),
    #[error("gce.conf: reading {what} from the metadata server: {source}")]
    Metadata {
        what: &'static str,
        #[source]
        source: ComputeError,
    },
}

/// The `[global]` section as written (`ConfigGlobal`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigFile {
    pub token_url: String,
    pub token_body: String,
    pub project_id: String,
    pub network_project_id: String,
    pub network_name: String,
    pub subnetwork_name: String,
    pub stack_type: String,
    pub secondary_range_name: String,
    pub node_tags: Vec<String>,
    pub node_instance_prefix: String,
    pub regional: bool,
    pub multizone: bool,
    pub api_endpoint: String,
    pub container_api_endpoint: String,
    pub local_zone: String,
    pub alpha_features: Vec<String>,
}

/// Everything the provider runs with, after the metadata server filled the gaps
/// (`CloudConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GceConfig {
    /// The v1 base with trailing slash (`api-endpoint`, else upstream's default).
    pub api_endpoint: String,
    pub project_id: String,
    pub network_project_id: String,
    pub region: String,
    pub zone: String,
    pub regional: bool,
    /// `multizone` or `regional`: every zone of the region is searched for instances.
    pub all_zones: bool,
    pub network_url: String,
    pub subnetwork_url: String,
    pub node_tags: Vec<String>,
    pub node_instance_prefix: String,
    pub token: TokenConfig,
    pub stack_type: String,
    pub alpha_features: Vec<String>,
}

impl ConfigFile {
    /// Reads the file; the warnings name ignored sections and keys.
    pub fn load(path: &str) -> Result<(Self, Vec<String>), ConfigError> {
        if path.is_empty() {
            // Upstream runs without a config (everything from the metadata server).
            return Ok((Self::default(), Vec::new()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// Parses gcfg text into `[global]`.
    pub fn parse(text: &str) -> Result<(Self, Vec<String>), ConfigError> {
        let mut out = Self::default();
        let mut warnings = Vec::new();
        let mut section: Option<(String, bool)> = None; // (name, is [global] without subsection)
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let lineno = i + 1;
            // Join unquoted `\` line continuations.
            let mut line = lines[i].to_owned();
            while line.ends_with('\\') && !line.ends_with("\\\\") && i + 1 < lines.len() {
                line.pop();
                i += 1;
                line.push_str(lines[i]);
            }
            i += 1;
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
                continue;
            }
            let syntax = |message: &str| ConfigError::Syntax {
                line: lineno,
                message: message.to_owned(),
            };
            if let Some(rest) = trimmed.strip_prefix('[') {
                let close = rest
                    .find(']')
                    .ok_or_else(|| syntax("expected right bracket"))?;
                let after = strip_comment(&rest[close + 1..])?;
                if !after.trim().is_empty() {
                    return Err(syntax("expected EOL, EOF, or comment"));
                }
                let header = rest[..close].trim();
                let (name, sub) = match header.split_once(char::is_whitespace) {
                    Some((n, s)) => (n, Some(s.trim())),
                    None => (header, None),
                };
                if name.is_empty() || !is_ident(name) {
                    return Err(syntax("expected section name"));
                }
                let is_global = name.eq_ignore_ascii_case("global") && sub.is_none();
                if !is_global {
                    warnings.push(format!(
                        "gce.conf line {lineno}: section [{header}] ignored (upstream's gcfg reads only [global])"
                    ));
                }
                section = Some((name.to_owned(), is_global));
                continue;
            }
            let Some((_, is_global)) = &section else {
                return Err(syntax("expected section header"));
            };
            let (name, value) = match trimmed.find(['=', ';', '#']) {
                Some(p) if trimmed.as_bytes()[p] == b'=' => (
                    trimmed[..p].trim(),
                    Some(unquote(&trimmed[p + 1..], lineno)?),
                ),
                Some(p) => (trimmed[..p].trim(), None),
                None => (trimmed.trim(), None),
            };
            if !is_ident(name) {
                return Err(syntax("expected section header or variable declaration"));
            }
            if !is_global {
                continue;
            }
            if !out.set(name, value, lineno)? {
                warnings.push(format!(
                    "gce.conf line {lineno}: unknown variable {name:?} in [global] ignored (as upstream's gcfg.FatalOnly does)"
                ));
            }
        }
        Ok((out, warnings))
    }

    /// Stores one variable; `false` when the name is unknown.
    fn set(&mut self, name: &str, value: Option<String>, line: usize) -> Result<bool, ConfigError> {
        let key = name.to_ascii_lowercase().replace('_', "-");
        let string = |slot: &mut String| -> Result<(), ConfigError> {
            match &value {
                Some(v) => {
                    *slot = v.clone();
                    Ok(())
                }
                None => Err(ConfigError::Syntax {
                    line,
                    message: format!("blank value not supported for type at variable {name:?}"),
                }),
            }
        };
        let boolean = |slot: &mut bool| -> Result<(), ConfigError> {
            *slot = match value.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("true" | "yes" | "on" | "1") => true,
                Some("false" | "no" | "off" | "0") => false,
                Some(other) => {
                    return Err(ConfigError::Syntax {
                        line,
                        message: format!("failed to parse {other:?} as bool at variable {name:?}"),
                    });
                }
            };
            Ok(())
        };
        let multi = |slot: &mut Vec<String>| match &value {
            Some(v) => slot.push(v.clone()),
            None => slot.clear(),
        };
        match key.as_str() {
            "token-url" => string(&mut self.token_url)?,
            "token-body" => string(&mut self.token_body)?,
            "project-id" => string(&mut self.project_id)?,
            "network-project-id" => string(&mut self.network_project_id)?,
            "network-name" => string(&mut self.network_name)?,
            "subnetwork-name" => string(&mut self.subnetwork_name)?,
            "stack-type" => string(&mut self.stack_type)?,
            "secondary-range-name" => string(&mut self.secondary_range_name)?,
            "node-tags" => multi(&mut self.node_tags),
            "node-instance-prefix" => string(&mut self.node_instance_prefix)?,
            "regional" => boolean(&mut self.regional)?,
            "multizone" => boolean(&mut self.multizone)?,
            "api-endpoint" => string(&mut self.api_endpoint)?,
            "container-api-endpoint" => string(&mut self.container_api_endpoint)?,
            "local-zone" => string(&mut self.local_zone)?,
            "alpha-features" => multi(&mut self.alpha_features),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `GenerateCloudConfig`: fills what the file lacks from the metadata server.
    pub async fn resolve(&self, metadata: &MetadataClient) -> Result<GceConfig, ConfigError> {
        let token = match self.token_url.as_str() {
            "" => TokenConfig::Metadata,
            "nil" => TokenConfig::None,
            url => TokenConfig::Alt {
                url: url.to_owned(),
                body: self.token_body.clone(),
            },
        };
        let (mut project_id, mut zone) = (String::new(), String::new());
        if self.project_id.is_empty() || self.local_zone.is_empty() {
            let z =
                metadata
                    .get("instance/zone")
                    .await
                    .map_err(|source| ConfigError::Metadata {
                        what: "instance/zone",
                        source,
                    })?;
            let parts: Vec<&str> = z.trim().split('/').collect();
            if parts.len() != 4 {
                return Err(ConfigError::Invalid(format!(
                    "metadata instance/zone: unexpected response: {z}"
                )));
            }
            zone = parts[3].to_owned();
            project_id = metadata
                .get("project/project-id")
                .await
                .map_err(|source| ConfigError::Metadata {
                    what: "project/project-id",
                    source,
                })?
                .trim()
                .to_owned();
        }
        if !self.project_id.is_empty() {
            project_id = self.project_id.clone();
        }
        if !self.local_zone.is_empty() {
            zone = self.local_zone.clone();
        }
        if project_id.is_empty() {
            return Err(ConfigError::Invalid("no project-id".to_owned()));
        }
        let region = gce_region(&zone)
            .ok_or_else(|| ConfigError::Invalid(format!("unexpected zone: {zone}")))?
            .to_owned();
        let network_project_id = if self.network_project_id.is_empty() {
            project_id.clone()
        } else {
            self.network_project_id.clone()
        };
        let api_endpoint = if self.api_endpoint.is_empty() {
            DEFAULT_API_ENDPOINT.to_owned()
        } else {
            self.api_endpoint.clone()
        };
        let network_name = if !self.network_name.is_empty() {
            self.network_name.clone()
        } else {
            let n = metadata
                .get("instance/network-interfaces/0/network")
                .await
                .map_err(|source| ConfigError::Metadata {
                    what: "instance/network-interfaces/0/network",
                    source,
                })?;
            let parts: Vec<&str> = n.trim().split('/').collect();
            if parts.len() != 4 {
                return Err(ConfigError::Invalid(format!(
                    "metadata instance/network-interfaces/0/network: unexpected response: {n}"
                )));
            }
            parts[3].to_owned()
        };
        // gceNetworkURL / gceSubnetworkURL.
        let network_url = if network_name.contains('/') {
            network_name
        } else {
            format!("{api_endpoint}projects/{network_project_id}/global/networks/{network_name}")
        };
        let subnetwork_url =
            if self.subnetwork_name.contains('/') || self.subnetwork_name.is_empty() {
                self.subnetwork_name.clone()
            } else {
                format!(
                    "{api_endpoint}projects/{network_project_id}/regions/{region}/subnetworks/{}",
                    self.subnetwork_name
                )
            };
        Ok(GceConfig {
            api_endpoint,
            project_id,
            network_project_id,
            region,
            zone,
            regional: self.regional,
            all_zones: self.regional || self.multizone,
            network_url,
            subnetwork_url,
            node_tags: self.node_tags.clone(),
            node_instance_prefix: self.node_instance_prefix.clone(),
            token,
            stack_type: self.stack_type.clone(),
            alpha_features: self.alpha_features.clone(),
        })
    }
}

/// `GetGCERegion`: the zone up to its last `-`.
pub fn gce_region(zone: &str) -> Option<&str> {
    zone.rfind('-').map(|i| &zone[..i])
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The text before a `;`/`#` comment that is outside quotes.
fn strip_comment(s: &str) -> Result<&str, ConfigError> {
    let mut in_quote = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => in_quote = !in_quote,
            ';' | '#' if !in_quote => return Ok(&s[..i]),
            _ => {}
        }
    }
    Ok(s)
}

/// gcfg's value scanning and `unquote`: up to a comment outside quotes, surrounding
/// whitespace dropped, quotes removed, `\"`, `\\`, `\n`, `\t` unescaped.
fn unquote(raw: &str, line: usize) -> Result<String, ConfigError> {
    let bad = |message: &str| ConfigError::Syntax {
        line,
        message: message.to_owned(),
    };
    let raw = strip_comment(raw)?.trim();
    let mut out = String::new();
    let mut in_quote = false;
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => in_quote = !in_quote,
            '\\' => match chars.next() {
                Some('\\') => out.push('\\'),
                Some('"') => out.push('"'),
                Some('n') if in_quote => out.push('\n'),
                Some('t') if in_quote => out.push('\t'),
                _ => return Err(bad("invalid escape sequence")),
            },
            c => out.push(c),
        }
    }
    if in_quote {
        return Err(bad("string not terminated"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcfg_values() {
        let text = "; comment\n[Global]\nproject-id = p1 ; trailing\nnode-tags = a\nNODE-TAGS=\"b c\"\nregional\nmultizone = no\ntoken-url = nil\ntoken-body = \"{\\\"x\\\": 1}\"\n[other]\nfoo = bar\n";
        let (c, warnings) = ConfigFile::parse(text).expect("parse");
        assert_eq!(c.project_id, "p1");
        assert_eq!(c.node_tags, vec!["a", "b c"]);
        assert!(c.regional);
        assert!(!c.multizone);
        assert_eq!(c.token_url, "nil");
        assert_eq!(c.token_body, "{\"x\": 1}");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(matches!(
            ConfigFile::parse("project-id = x\n"),
            Err(ConfigError::Syntax { line: 1, .. })
        ));
        assert!(matches!(
            ConfigFile::parse("[global]\nregional = maybe\n"),
            Err(ConfigError::Syntax { line: 2, .. })
        ));
        assert!(matches!(
            ConfigFile::parse("[global]\nproject-id\n"),
            Err(ConfigError::Syntax { .. })
        ));
        assert!(matches!(
            ConfigFile::parse("[global]\nproject-id = \"open\n"),
            Err(ConfigError::Syntax { .. })
        ));
        assert_eq!(gce_region("us-central1-b"), Some("us-central1"));
        assert_eq!(gce_region("nodash"), None);
    }
}
