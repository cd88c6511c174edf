//! boto3 against the mock over a socket, side by side with moto's server on the same call
//! sequence (`boto_sequence.py`), diffing the normalised answers (cloud-apis.md §4.4,
//! §4.5): clients we did not write must work unchanged, and where we differ from moto it
//! is on purpose. Skips, saying why, without python3 + boto3 (+ moto for the diff):
//! `pip install boto3 awscli 'moto[server]'`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use mock_aws::{Config, MockAws};
use serde_json::{Value, json};

const CLUSTER: &str = "c1";
const REGION: &str = "us-west-2";

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/boto_sequence.py")
}

/// Whether `python3` can import every module named.
async fn python_has(modules: &str) -> bool {
    tokio::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

async fn run_sequence(args: &[&str]) -> Result<Value> {
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(script())
        .args(args)
        // No user credentials or config can leak in.
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env_remove("AWS_PROFILE")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .context("boto_sequence.py timed out")??;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("boto_sequence.py {args:?} failed: {stderr}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).with_context(|| format!("not JSON: {stdout}\n{stderr}"))
}

async fn run_against_mock() -> Result<Value> {
    let mock = MockAws::start(Config {
        nodes: 0,
        region: REGION.into(),
        cluster_id: CLUSTER.into(),
        ..Config::default()
    })
    .await?;
    let info = mock.ready_info();
    let result = run_sequence(&[
        "mock",
        &info.endpoint,
        &info.region,
        &info.access_key_id,
        &info.secret_access_key,
        CLUSTER,
    ])
    .await;
    // Every call was signed with the configured key and verified.
    let refused = mock
        .admin()
        .journal()
        .count(|e| e.status == 403 || e.status == 401);
    mock.shutdown().await;
    let result = result?;
    assert_eq!(refused, 0, "some boto3 requests failed SigV4");
    Ok(result)
}

#[tokio::test]
async fn boto3_sequence_against_the_mock() -> Result<()> {
    if !python_has("boto3").await {
        eprintln!(
            "skipping: python3 with boto3 is not available (pip install boto3 awscli 'moto[server]')"
        );
        return Ok(());
    }
    let got = run_against_mock().await?;
    let expect = json!({
        "run.count": 6,
        "run.states": ["pending"],
        "by_id.count": 2,
        "by_id.states": ["running"],
        "by_id.types": ["m5.large"],
        "by_id.has_cluster_tag": true,
        "by_id.dns_suffix": ["us-west-2.compute.internal"],
        "by_id.eni_status": ["in-use"],
        "filter.private_dns.count": 1,
        "filter.wildcard.count": 6,
        "filter.tag.count": 6,
        "paginate.pages": 2,
        "paginate.total": 6,
        "zones.all_have_zone_id": true,
        "zones.in_region": true,
        "sg.ingress": [["tcp", 80, 80, ["0.0.0.0/0"]]],
        "sg.duplicate": "InvalidGroup.Duplicate",
        "route.created": [true],
        "route.deleted": true,
        "elb.dns_suffix": true,
        "elb.registered": 2,
        "elb.health_check": "HTTP:10256/healthz",
        "elb.describe": {"dns": true, "instances": 2, "listeners": [["TCP", 80, 30080]],
                         "scheme": "internet-facing", "subnets": true},
        "elb.tags": ["kubernetes.io/cluster/c1"],
        "elb.after_delete": "LoadBalancerNotFound",
        "nlb.created_state": "provisioning",
        "nlb.arn_kind": true,
        "nlb.after_wait": "active",
        "nlb.listener": ["TCP", 80],
        "nlb.target_health": ["healthy", "healthy"],
        "nlb.tg_by_lb": [true],
        "nlb.delete_tg_in_use": "ResourceInUse",
        "nlb.after_delete": "LoadBalancerNotFound",
        "nlb.tg_not_found": "TargetGroupNotFound",
        "stop.current": "stopping",
        "stop.previous": "running",
        "terminate.current": ["shutting-down"],
        "terminate.described": "terminated",
        "error.unknown_id": "InvalidInstanceID.NotFound",
        "error.ids_and_max": "InvalidParameterCombination",
    });
    assert_eq!(got, expect);
    Ok(())
}

/// Where we answer differently from moto on purpose, and why.
const INTENDED_DIFFERENCES: &[(&str, &str)] = &[
    // EC2 filters take `*` and `?` wildcards; moto compares instance filters exactly
    // (moto/ec2/utils.py passes_filter_dict), so `ip-*` matches nothing there.
    ("filter.wildcard.count", "EC2 wildcard filters"),
    // MaxResults counts instances here; moto pages whole reservations, so six instances
    // from one RunInstances come back in one page.
    ("paginate.pages", "page size counts instances"),
    // RegisterInstancesWithLoadBalancer answers with the registered instances; moto
    // answers an empty list.
    ("elb.registered", "register answers the instances"),
    // NLB ARNs are `loadbalancer/net/<name>/<id>` in ELBv2 (cloud-apis.md §4.3); moto's
    // do not carry the `net/` kind.
    ("nlb.arn_kind", "NLB ARN shape"),
];

#[tokio::test]
async fn boto3_sequence_matches_moto() -> Result<()> {
    if !python_has("boto3, moto.server").await {
        eprintln!(
            "skipping: python3 with boto3 and moto[server] is not available (pip install boto3 awscli 'moto[server]')"
        );
        return Ok(());
    }
    let ours = run_against_mock().await?;
    let moto = run_sequence(&["moto", REGION, CLUSTER]).await?;
    let (Some(ours), Some(moto)) = (ours.as_object(), moto.as_object()) else {
        bail!("sequence output is not an object");
    };
    let mut keys: Vec<&String> = ours.keys().chain(moto.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut unexpected = Vec::new();
    for key in keys {
        let (a, b) = (ours.get(key), moto.get(key));
        let intended = INTENDED_DIFFERENCES.iter().any(|(k, _)| k == key);
        match (a == b, intended) {
            (false, false) => unexpected.push(format!("{key}: mock {a:?} vs moto {b:?}")),
            (true, true) => unexpected.push(format!(
                "{key}: documented as a difference but both answer {a:?}"
            )),
            _ => {}
        }
    }
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
    Ok(())
}
