//! botocore's own IMDSv2 client (the region fetcher the AWS SDKs' region chains use)
//! against the mock's metadata listener over a socket: token PUT, then the zone of the
//! chosen instance; and boto3's default credential chain with no static keys, which finds
//! the instance role's temporary credentials there and signs EC2 calls with them. Skips, saying why, without python3 + boto3
//! (`pip install boto3 awscli 'moto[server]'`).

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use mock_aws::{Config, MockAws};

const FETCH_REGION: &str = r#"
import sys
from botocore.utils import InstanceMetadataRegionFetcher
fetcher = InstanceMetadataRegionFetcher(
    timeout=5, num_attempts=1, env={},
    config={"ec2_metadata_service_endpoint": sys.argv[1]},
)
print(fetcher.retrieve_region())
"#;

async fn botocore_available() -> bool {
    tokio::process::Command::new("python3")
        .args(["-c", "import botocore.utils"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

async fn region_via_botocore(endpoint: &str) -> Result<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("python3")
            .args(["-c", FETCH_REGION, endpoint])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .context("python3 timed out")??;
    anyhow::ensure!(
        out.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[tokio::test]
async fn botocore_reads_the_region_of_the_chosen_instance() -> Result<()> {
    if !botocore_available().await {
        eprintln!("skipping: python3 with boto3 is not installed (pip install boto3)");
        return Ok(());
    }
    let mock = MockAws::start(Config {
        nodes: 1,
        region: "eu-central-1".into(),
        imds: true,
        ..Config::default()
    })
    .await?;
    let endpoint = mock
        .ready_info()
        .imds_endpoint
        .context("the ready info names the IMDS endpoint")?;
    // No instance chosen: the metadata paths are 404 and botocore finds no region.
    assert_eq!(region_via_botocore(&endpoint).await?, "None");
    let id = mock.admin().instances()[0].id.clone();
    mock.admin().set_imds_instance(Some(&id))?;
    assert_eq!(region_via_botocore(&endpoint).await?, "eu-central-1");
    assert!(
        mock.admin()
            .set_imds_instance(Some("i-0000000000000000f"))
            .is_err()
    );
    mock.shutdown().await;
    Ok(())
}

/// boto3 with no static credentials anywhere: the chain ends at IMDS, whose endpoint
/// `AWS_EC2_METADATA_SERVICE_ENDPOINT` names. Prints the credential source, the access
/// key and the instance ids DescribeInstances returned.
const DESCRIBE_WITH_ROLE: &str = r#"
import json, sys, boto3
session = boto3.Session(region_name=sys.argv[2])
creds = session.get_credentials()
ec2 = session.client("ec2", endpoint_url=sys.argv[1])
ids = [i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
print(json.dumps({"method": creds.method, "key": creds.access_key, "ids": ids}))
"#;

#[tokio::test]
async fn boto3_signs_with_the_instance_role_credentials_from_imds() -> Result<()> {
    if !botocore_available().await {
        eprintln!("skipping: python3 with boto3 is not installed (pip install boto3)");
        return Ok(());
    }
    let mock = MockAws::start(Config {
        nodes: 2,
        imds: true,
        ..Config::default()
    })
    .await?;
    let info = mock.ready_info();
    let imds = info.imds_endpoint.clone().context("IMDS endpoint")?;
    let admin = mock.admin();
    let id = admin.instances()[0].id.clone();
    admin.set_imds_instance(Some(&id))?;
    let mut cmd = tokio::process::Command::new("python3");
    cmd.args(["-c", DESCRIBE_WITH_ROLE, &info.endpoint, &info.region])
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds)
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .kill_on_drop(true);
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_PROFILE",
        "AWS_EC2_METADATA_DISABLED",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ] {
        cmd.env_remove(var);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .context("python3 timed out")??;
    anyhow::ensure!(
        out.status.success(),
        "boto3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let got: serde_json::Value =
        serde_json::from_str(stdout.trim()).with_context(|| format!("not JSON: {stdout}"))?;
    let role = admin.imds_role_credentials();
    assert_eq!(got["method"], "iam-role", "{got}");
    assert_eq!(got["key"], role.access_key_id.as_str());
    assert!(role.access_key_id.starts_with("ASIA"));
    let mut want: Vec<String> = admin.instances().into_iter().map(|i| i.id).collect();
    let mut ids: Vec<String> = serde_json::from_value(got["ids"].clone())?;
    want.sort();
    ids.sort();
    assert_eq!(ids, want);
    // Every EC2 call verified (signed with the role's key and token).
    let journal = admin.journal();
    assert!(journal.count(|e| e.service == "ec2" && e.status == 200) >= 1);
    assert_eq!(journal.count(|e| e.status == 401 || e.status == 403), 0);
    mock.shutdown().await;
    Ok(())
}
