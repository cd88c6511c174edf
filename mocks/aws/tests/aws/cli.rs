//! The real `aws` CLI (awscli on botocore) against the mock over a socket: describe with
//! filters, run/terminate, create/describe/delete a classic load balancer, and a bad
//! secret refused by SigV4 (cloud-apis.md §4.5, §9). Skips, saying why, when the CLI is not
//! installed: `pip install boto3 awscli 'moto[server]'`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use mock_aws::{Config, MockAws};
use serde_json::Value;

fn find_cli() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("aws"))
        .find(|p| p.is_file())
}

struct Cli {
    exe: PathBuf,
    mock: MockAws,
    dir: tempfile::TempDir,
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Cli {
    async fn start(nodes: usize) -> Option<Cli> {
        let Some(exe) = find_cli() else {
            eprintln!(
                "skipping: the `aws` CLI is not on PATH (pip install boto3 awscli 'moto[server]')"
            );
            return None;
        };
        let mock = MockAws::start(Config {
            nodes,
            cluster_id: "c1".into(),
            ..Config::default()
        })
        .await
        .expect("mock starts");
        let dir = tempfile::tempdir().expect("tempdir");
        Some(Cli { exe, mock, dir })
    }

    /// Runs `aws ARGS --endpoint-url <mock> --output json` with `secret`.
    async fn run_with(&self, secret: &str, args: &[&str]) -> Result<Output> {
        let info = self.mock.ready_info();
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.args(args)
            .args(["--endpoint-url", &info.endpoint, "--output", "json"])
            .env("AWS_ACCESS_KEY_ID", &info.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_DEFAULT_REGION", &info.region)
            .env("AWS_CONFIG_FILE", self.dir.path().join("config"))
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                self.dir.path().join("credentials"),
            )
            .env("AWS_MAX_ATTEMPTS", "1")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .context("aws CLI timed out")??;
        Ok(Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        })
    }

    async fn json(&self, args: &[&str]) -> Result<Value> {
        let secret = self.mock.ready_info().secret_access_key;
        let out = self.run_with(&secret, args).await?;
        anyhow::ensure!(out.ok, "aws {args:?} failed: {}", out.stderr);
        serde_json::from_str(&out.stdout).with_context(|| format!("not JSON: {}", out.stdout))
    }
}

fn instance_ids(v: &Value) -> Vec<String> {
    v["Reservations"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["Instances"].as_array().into_iter().flatten())
        .filter_map(|i| i["InstanceId"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn describe_instances_with_filters() -> Result<()> {
    let Some(cli) = Cli::start(3).await else {
        return Ok(());
    };
    let v = cli
        .json(&[
            "ec2",
            "describe-instances",
            "--filters",
            "Name=tag-key,Values=kubernetes.io/cluster/c1",
            "Name=private-dns-name,Values=ip-127-40-0-1?.*",
        ])
        .await?;
    let all: Vec<String> = cli
        .mock
        .admin()
        .instances()
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(instance_ids(&v), all);
    let v = cli
        .json(&[
            "ec2",
            "describe-instances",
            "--filters",
            "Name=tag:Name,Values=node-1",
        ])
        .await?;
    assert_eq!(instance_ids(&v), vec![all[1].clone()]);
    Ok(())
}

#[tokio::test]
async fn run_and_terminate() -> Result<()> {
    let Some(cli) = Cli::start(0).await else {
        return Ok(());
    };
    let v = cli
        .json(&[
            "ec2",
            "run-instances",
            "--image-id",
            "ami-1",
            "--count",
            "1",
            "--instance-type",
            "t3.small",
        ])
        .await?;
    let id = v["Instances"][0]["InstanceId"]
        .as_str()
        .context("instance id")?
        .to_string();
    assert_eq!(v["Instances"][0]["State"]["Name"], "pending");
    assert_eq!(cli.mock.admin().instances().len(), 1);
    let v = cli
        .json(&["ec2", "terminate-instances", "--instance-ids", &id])
        .await?;
    assert_eq!(
        v["TerminatingInstances"][0]["CurrentState"]["Name"],
        "shutting-down"
    );
    assert_eq!(
        cli.mock.admin().instance(&id).map(|i| i.state),
        Some(mock_aws::InstanceState::Terminated)
    );
    Ok(())
}

#[tokio::test]
async fn classic_load_balancer_create_describe_delete() -> Result<()> {
    let Some(cli) = Cli::start(1).await else {
        return Ok(());
    };
    let subnet = cli.mock.admin().instances()[0].subnet_id.clone();
    let v = cli
        .json(&[
            "elb",
            "create-load-balancer",
            "--load-balancer-name",
            "a1b2",
            "--listeners",
            "Protocol=TCP,LoadBalancerPort=80,InstanceProtocol=TCP,InstancePort=30080",
            "--subnets",
            &subnet,
        ])
        .await?;
    let dns = v["DNSName"].as_str().context("DNSName")?.to_string();
    let v = cli.json(&["elb", "describe-load-balancers"]).await?;
    assert_eq!(v["LoadBalancerDescriptions"][0]["DNSName"], dns.as_str());
    assert_eq!(
        v["LoadBalancerDescriptions"][0]["ListenerDescriptions"][0]["Listener"]["InstancePort"],
        30080
    );
    let secret = cli.mock.ready_info().secret_access_key;
    let out = cli
        .run_with(
            &secret,
            &[
                "elb",
                "delete-load-balancer",
                "--load-balancer-name",
                "a1b2",
            ],
        )
        .await?;
    assert!(out.ok, "{}", out.stderr);
    let out = cli
        .run_with(
            &secret,
            &[
                "elb",
                "describe-load-balancers",
                "--load-balancer-names",
                "a1b2",
            ],
        )
        .await?;
    assert!(!out.ok);
    assert!(
        out.stderr.contains("LoadBalancerNotFound"),
        "{}",
        out.stderr
    );
    Ok(())
}

#[tokio::test]
async fn wrong_secret_is_refused() -> Result<()> {
    let Some(cli) = Cli::start(0).await else {
        return Ok(());
    };
    let out = cli
        .run_with("not-the-secret", &["ec2", "describe-vpcs"])
        .await?;
    assert!(!out.ok);
    assert!(
        out.stderr.contains("SignatureDoesNotMatch"),
        "{}",
        out.stderr
    );
    let out = cli
        .run_with("not-the-secret", &["elb", "describe-load-balancers"])
        .await?;
    assert!(
        out.stderr.contains("SignatureDoesNotMatch"),
        "{}",
        out.stderr
    );
    Ok(())
}

/// Secondary private IPs and IPv6 addresses parse with botocore's EC2 model, and
/// `describe-instance-topology` answers in the shape the CLI expects.
#[tokio::test]
async fn secondary_addresses_and_instance_topology() -> Result<()> {
    let Some(cli) = Cli::start(0).await else {
        return Ok(());
    };
    let admin = cli.mock.admin();
    let free = admin.free_private_ips(None, 2)?;
    let info = admin.create_instance(mock_aws::InstanceSpec {
        private_ip: Some(free[0]),
        secondary_private_ips: vec![free[1]],
        ipv6_addresses: vec!["fd00::7".parse()?],
        instance_type: Some("p5.48xlarge".into()),
        ..Default::default()
    })?;
    let v = cli
        .json(&["ec2", "describe-instances", "--instance-ids", &info.id])
        .await?;
    let eni = &v["Reservations"][0]["Instances"][0]["NetworkInterfaces"][0];
    let private: Vec<(&str, bool)> = eni["PrivateIpAddresses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a["PrivateIpAddress"].as_str().unwrap_or_default(),
                a["Primary"].as_bool().unwrap_or_default(),
            )
        })
        .collect();
    let (a, b) = (free[0].to_string(), free[1].to_string());
    assert_eq!(private, vec![(a.as_str(), true), (b.as_str(), false)]);
    assert_eq!(eni["Ipv6Addresses"][0]["Ipv6Address"], "fd00::7");

    let t = cli.json(&["ec2", "describe-instance-topology"]).await?;
    let instances = t["Instances"].as_array().cloned().unwrap_or_default();
    assert_eq!(instances.len(), 1, "{t}");
    assert_eq!(instances[0]["InstanceId"], info.id.as_str());
    assert_eq!(instances[0]["ZoneId"], "usw2-az1");
    assert_eq!(
        instances[0]["NetworkNodes"].as_array().map(Vec::len),
        Some(3),
        "{t}"
    );
    Ok(())
}
