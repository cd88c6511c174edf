//! botocore's own IMDSv2 client (the region fetcher the AWS SDKs' region chains use)
//! against the mock's metadata listener over a socket: token PUT, then the zone of the
//! chosen instance. Skips, saying why, without python3 + boto3
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
