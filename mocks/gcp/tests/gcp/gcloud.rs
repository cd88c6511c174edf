//! The Google Cloud CLI (`gcloud`, google-cloud-cli) against the mock over a socket, with
//! a config directory of its own and the Compute endpoint overridden
//! (`CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`):
//!
//! - as a program on a node would run it: credentials from the mock's metadata server
//!   (gcloud finds "GCE" at `GCE_METADATA_ROOT` and takes the default service account's
//!   token); describe, a paged aggregated list, an address whose operations stay PENDING
//!   for one read (gcloud waits with `regionOperations.wait`), a duplicate refused, a
//!   target pool with members, a forwarding rule on the address, deletes, no leak; and the
//!   same describe without credentials refused;
//! - anonymously (`CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true`) against a mock with
//!   `allow_anonymous` (upstream `token-url = nil`): describe, addresses create, list,
//!   delete.
//!
//! gcloud is not on PyPI or in Debian's own archive (the machine image ships
//! google-cloud-cli); without it each test says "skipped: gcloud not installed" and
//! passes, except under CI, where it fails.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mock_gcp::{Config, GcpMock, LifecycleMode, LifecycleTarget, ReadyInfo};
use serde_json::Value;

fn find_gcloud() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("gcloud"))
        .find(|p| p.is_file())
}

struct Gcloud {
    exe: PathBuf,
    ready: ReadyInfo,
    config: tempfile::TempDir,
    anonymous: bool,
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Output {
    fn json(&self) -> Result<Value> {
        serde_json::from_str(&self.stdout)
            .with_context(|| format!("not JSON: {}\n{}", self.stdout, self.stderr))
    }
}

impl Gcloud {
    fn new(exe: PathBuf, ready: ReadyInfo, anonymous: bool) -> Result<Gcloud> {
        Ok(Gcloud {
            exe,
            ready,
            config: tempfile::tempdir()?,
            anonymous,
        })
    }

    /// `gcloud ARGS`; its output whatever the exit status.
    async fn run(&self, args: &[&str]) -> Result<Output> {
        self.run_as(self.anonymous, args).await
    }

    async fn run_as(&self, anonymous: bool, args: &[&str]) -> Result<Output> {
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.args(args);
        crate::hermetic(&mut cmd, &self.ready.metadata_host);
        cmd.env("CLOUDSDK_CONFIG", self.config.path())
            .env(
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
                &self.ready.endpoint,
            )
            .env("CLOUDSDK_CORE_PROJECT", &self.ready.project_id)
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
            .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
            .env("CLOUDSDK_SURVEY_DISABLE_PROMPTS", "true");
        if anonymous {
            cmd.env("CLOUDSDK_AUTH_DISABLE_CREDENTIALS", "true");
        }
        let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
            .await
            .with_context(|| format!("gcloud {args:?} timed out"))??;
        Ok(Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// `gcloud ARGS --format=json`, which must succeed.
    async fn json(&self, args: &[&str]) -> Result<Value> {
        let mut all = args.to_vec();
        all.push("--format=json");
        let out = self.run(&all).await?;
        if !out.ok {
            bail!("gcloud {args:?} failed:\n{}", out.stderr);
        }
        out.json()
    }

    /// `gcloud ARGS`, which must fail; its stderr.
    async fn fails(&self, args: &[&str]) -> Result<String> {
        let out = self.run(args).await?;
        if out.ok {
            bail!("gcloud {args:?} succeeded:\n{}", out.stdout);
        }
        Ok(out.stderr)
    }
}

fn last(v: &Value) -> &str {
    v.as_str().unwrap_or("").rsplit('/').next().unwrap_or("")
}

async fn start(anonymous: bool, config: Config) -> Result<Option<(Gcloud, GcpMock)>> {
    let Some(exe) = find_gcloud() else {
        crate::missing("gcloud not installed (google-cloud-cli; not on PyPI nor in Debian)")?;
        return Ok(None);
    };
    let mock = GcpMock::start(config).await?;
    let gcloud = Gcloud::new(exe, mock.ready_info(), anonymous)?;
    Ok(Some((gcloud, mock)))
}

#[tokio::test]
async fn gcloud_with_metadata_server_credentials_judges_the_mock() -> Result<()> {
    let Some((g, mock)) = start(
        false,
        Config {
            nodes: 5,
            address_block: 42,
            ..Config::default()
        },
    )
    .await?
    else {
        return Ok(());
    };
    let started = Instant::now();
    let admin = mock.admin();
    // Addresses' operations answer PENDING for one read: gcloud must wait on them.
    admin.set_lifecycle(
        LifecycleTarget::Type("addresses".into()),
        Some(LifecycleMode::Reads { n: 1 }),
    )?;
    let (zone, region) = (g.ready.zone.clone(), g.ready.region.clone());
    let (z, r) = (zone.as_str(), region.as_str());

    // Without credentials the mock refuses, in Google's words.
    let out = g
        .run_as(
            true,
            &["compute", "instances", "describe", "node-0", "--zone", z],
        )
        .await?;
    assert!(!out.ok, "anonymous describe accepted: {}", out.stdout);
    assert!(
        out.stderr
            .contains("Request is missing required authentication credential"),
        "{}",
        out.stderr
    );

    let vm = g
        .json(&["compute", "instances", "describe", "node-0", "--zone", z])
        .await?;
    assert_eq!(vm["name"], "node-0");
    assert_eq!(vm["status"], "RUNNING");
    assert_eq!(last(&vm["zone"]), z);
    assert_eq!(last(&vm["machineType"]), "e2-standard-2");
    assert_eq!(vm["tags"]["items"], serde_json::json!(["ccm-node"]));
    let nic = &vm["networkInterfaces"][0];
    assert!(
        nic["networkIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("127.70.42.")),
        "{nic}"
    );
    assert!(
        nic["accessConfigs"][0]["natIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("127.72.42.")),
        "{nic}"
    );
    assert_eq!(last(&nic["network"]), g.ready.network);

    // Aggregated list, two a page.
    let list = g
        .json(&["compute", "instances", "list", "--page-size", "2"])
        .await?;
    let names: Vec<&str> = list
        .as_array()
        .context("a list")?
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert_eq!(names, ["node-0", "node-1", "node-2", "node-3", "node-4"]);

    // An address (its operation waited on), then the same name again.
    let created = g
        .json(&[
            "compute",
            "addresses",
            "create",
            "judge-addr",
            "--region",
            r,
        ])
        .await?;
    let addr = &created[0];
    assert_eq!(addr["status"], "RESERVED", "{created}");
    let ip = addr["address"].as_str().context("address")?.to_string();
    assert!(ip.starts_with("127.71.42."), "{ip}");
    let err = g
        .fails(&[
            "compute",
            "addresses",
            "create",
            "judge-addr",
            "--region",
            r,
        ])
        .await?;
    assert!(err.contains("already exists"), "{err}");
    let listed = g
        .json(&[
            "compute",
            "addresses",
            "list",
            "--filter",
            "name=judge-addr",
        ])
        .await?;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["address"], ip.as_str());

    // A target pool with two members and a forwarding rule on the address by name.
    g.json(&[
        "compute",
        "target-pools",
        "create",
        "judge-pool",
        "--region",
        r,
    ])
    .await?;
    let pool = g
        .json(&[
            "compute",
            "target-pools",
            "add-instances",
            "judge-pool",
            "--instances",
            "node-0,node-1",
            "--instances-zone",
            z,
            "--region",
            r,
        ])
        .await?;
    let members: Vec<&str> = pool[0]["instances"]
        .as_array()
        .context("members")?
        .iter()
        .map(last)
        .collect();
    assert_eq!(members, ["node-0", "node-1"]);
    let rule = g
        .json(&[
            "compute",
            "forwarding-rules",
            "create",
            "judge-rule",
            "--region",
            r,
            "--address",
            "judge-addr",
            "--ports",
            "18082",
            "--target-pool",
            "judge-pool",
        ])
        .await?;
    let rule = &rule[0];
    assert_eq!(rule["IPAddress"], ip.as_str(), "{rule}");
    assert_eq!(rule["IPProtocol"], "TCP");
    assert_eq!(rule["portRange"], "18082-18082");
    assert_eq!(last(&rule["target"]), "judge-pool");
    let held = g
        .json(&[
            "compute",
            "addresses",
            "describe",
            "judge-addr",
            "--region",
            r,
        ])
        .await?;
    assert_eq!(held["status"], "IN_USE", "{held}");

    // Teardown, each delete waited on; then the address is gone.
    for what in ["forwarding-rules", "target-pools", "addresses"] {
        let name = match what {
            "forwarding-rules" => "judge-rule",
            "target-pools" => "judge-pool",
            _ => "judge-addr",
        };
        let out = g
            .run(&["compute", what, "delete", name, "--region", r, "--quiet"])
            .await?;
        assert!(out.ok, "delete {what} {name}: {}", out.stderr);
    }
    let err = g
        .fails(&[
            "compute",
            "addresses",
            "describe",
            "judge-addr",
            "--region",
            r,
        ])
        .await?;
    assert!(err.contains("was not found"), "{err}");

    let journal = admin.journal();
    let leaks = admin.leaks();
    mock.shutdown().await;
    let count = |op: &str| journal.count(|e| e.operation.as_deref() == Some(op));
    // gcloud found "GCE" at the mock and used the service account's token from it.
    assert!(
        journal.count(|e| e.service == "metadata"
            && e.operation
                .as_deref()
                .is_some_and(|o| o.ends_with("/token")))
            >= 1,
        "a token from the metadata server"
    );
    assert_eq!(
        journal.count(|e| e.service == "compute" && e.status == 401),
        1,
        "only the anonymous describe is refused"
    );
    // The pending address operations (insert and delete) were waited on.
    assert!(count("compute.regionOperations.wait") >= 4, "waits");
    assert_eq!(
        journal.count(
            |e| e.operation.as_deref() == Some("compute.instances.aggregatedList")
                && e.query.contains("pageToken=")
        ),
        2,
        "the aggregated list followed its page tokens"
    );
    assert_eq!(count("compute.targetPools.addInstance"), 1);
    assert_eq!(leaks.total, 0, "{leaks:?}");
    eprintln!(
        "gcloud (metadata credentials) judge: {:?}",
        started.elapsed()
    );
    Ok(())
}

#[tokio::test]
async fn gcloud_anonymous_judges_the_mock() -> Result<()> {
    let Some((g, mock)) = start(
        true,
        Config {
            nodes: 3,
            address_block: 43,
            allow_anonymous: true,
            ..Config::default()
        },
    )
    .await?
    else {
        return Ok(());
    };
    let started = Instant::now();
    let (zone, region) = (g.ready.zone.clone(), g.ready.region.clone());
    let (z, r) = (zone.as_str(), region.as_str());
    let vm = g
        .json(&["compute", "instances", "describe", "node-0", "--zone", z])
        .await?;
    assert_eq!(vm["name"], "node-0");
    assert!(
        vm["networkInterfaces"][0]["networkIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("127.70.43.")),
        "{vm}"
    );
    let created = g
        .json(&["compute", "addresses", "create", "x", "--region", r])
        .await?;
    assert_eq!(created[0]["name"], "x");
    let listed = g.json(&["compute", "addresses", "list"]).await?;
    let names: Vec<&str> = listed
        .as_array()
        .context("a list")?
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(names, ["x"]);
    let out = g
        .run(&[
            "compute",
            "addresses",
            "delete",
            "x",
            "--region",
            r,
            "--quiet",
        ])
        .await?;
    assert!(out.ok, "delete: {}", out.stderr);
    let listed = g.json(&["compute", "addresses", "list"]).await?;
    assert_eq!(listed, serde_json::json!([]));
    let journal = mock.admin().journal();
    let leaks = mock.admin().leaks();
    mock.shutdown().await;
    assert_eq!(
        journal.count(|e| e.service == "metadata"
            && e.operation
                .as_deref()
                .is_some_and(|o| o.ends_with("/token"))),
        0,
        "no credentials asked for"
    );
    assert_eq!(journal.count(|e| e.service == "oauth2"), 0);
    assert_eq!(journal.count(|e| e.status == 401), 0);
    assert_eq!(leaks.total, 0, "{leaks:?}");
    eprintln!("gcloud (anonymous) judge: {:?}", started.elapsed());
    Ok(())
}
