//! The real `openstack` CLI (python-openstackclient + python-octaviaclient, on
//! openstacksdk/keystoneauth) against the mock over a socket: clients we did not write
//! must work unchanged (cloud-apis.md §2.6). Each test skips, saying why, when the CLI is
//! not installed: `pip install python-openstackclient python-octaviaclient`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use mock_openstack::{Config, OpenStackMock};
use serde_json::Value;

/// The `openstack` executable on PATH, if any.
fn find_cli() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("openstack"))
        .find(|p| p.is_file())
}

struct Cli {
    exe: PathBuf,
    mock: OpenStackMock,
    home: tempfile::TempDir,
}

impl Cli {
    /// Starts a mock with `nodes` servers; `None` (after printing why) without the CLI.
    async fn start(nodes: usize) -> Option<Cli> {
        Self::start_with(Config {
            nodes,
            ..Config::default()
        })
        .await
    }

    /// Starts a mock with `config`; `None` (after printing why) without the CLI.
    async fn start_with(config: Config) -> Option<Cli> {
        let Some(exe) = find_cli() else {
            eprintln!(
                "skipping: the `openstack` CLI is not on PATH \
                 (pip install python-openstackclient python-octaviaclient)"
            );
            return None;
        };
        let mock = OpenStackMock::start(config).await.expect("mock starts");
        let home = tempfile::tempdir().expect("tempdir");
        Some(Cli { exe, mock, home })
    }

    /// Runs `openstack ARGS` with OS_* pointing at the mock; stdout on success.
    async fn run(&self, args: &[&str]) -> Result<String> {
        let info = self.mock.ready_info();
        let mut cmd = tokio::process::Command::new(&self.exe);
        // Over TLS the CLI trusts exactly the mock's CA, as a user would point it.
        if let Some(ca) = &info.ca_file {
            cmd.args(["--os-cacert", ca]);
        }
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            // No user clouds.yaml or cache can leak in.
            .env("HOME", self.home.path())
            .env("OS_AUTH_TYPE", "password")
            .env("OS_AUTH_URL", &info.auth_url)
            .env("OS_USERNAME", &info.username)
            .env("OS_PASSWORD", &info.password)
            .env("OS_PROJECT_NAME", &info.project_name)
            .env("OS_USER_DOMAIN_NAME", &info.domain_name)
            .env("OS_PROJECT_DOMAIN_NAME", &info.domain_name)
            .env("OS_REGION_NAME", &info.region)
            .env("OS_INTERFACE", "public")
            .env("OS_IDENTITY_API_VERSION", "3")
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
            .await
            .with_context(|| format!("openstack {args:?} timed out"))?
            .with_context(|| format!("running openstack {args:?}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        if !out.status.success() {
            bail!(
                "openstack {args:?} failed ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(stdout)
    }

    /// Runs with `-f json` and parses the output.
    async fn json(&self, args: &[&str]) -> Result<Value> {
        let mut all = args.to_vec();
        all.extend(["-f", "json"]);
        let out = self.run(&all).await?;
        serde_json::from_str(&out).with_context(|| format!("parsing output of {args:?}: {out}"))
    }

    async fn admin_get(&self, path: &str) -> Result<Value> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = format!("{}{path}", self.mock.ready_info().admin_url);
        Ok(reqwest::get(&url).await?.json().await?)
    }
}

fn field<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_reads_token_servers_and_ports() -> Result<()> {
    let Some(cli) = Cli::start(2).await else {
        return Ok(());
    };
    let token = cli.json(&["token", "issue"]).await?;
    assert!(!field(&token, "id").is_empty(), "{token}");

    let servers = cli.json(&["server", "list"]).await?;
    let names: Vec<&str> = servers
        .as_array()
        .context("server list")?
        .iter()
        .map(|s| field(s, "Name"))
        .collect();
    assert_eq!(names.len(), 2, "{servers}");
    assert!(names.contains(&"node-0") && names.contains(&"node-1"));

    let seeded = cli
        .mock
        .admin()
        .server_by_name("node-1")
        .context("seeded")?;
    let show = cli.json(&["server", "show", &seeded.id]).await?;
    assert_eq!(field(&show, "name"), "node-1");
    assert_eq!(field(&show, "status"), "ACTIVE");
    let by_name = cli.json(&["server", "list", "--name", "^node-1$"]).await?;
    assert_eq!(by_name.as_array().map(Vec::len), Some(1), "{by_name}");

    let ports = cli
        .json(&["port", "list", "--device-id", &seeded.id])
        .await?;
    let ports = ports.as_array().context("port list")?;
    assert_eq!(ports.len(), 1);
    let fixed = ports[0]["Fixed IP Addresses"].to_string();
    assert!(fixed.contains(&seeded.internal_ips[0]), "{fixed}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_works_over_tls_with_os_cacert() -> Result<()> {
    let Some(cli) = Cli::start_with(Config {
        nodes: 1,
        tls: true,
        ..Config::default()
    })
    .await
    else {
        return Ok(());
    };
    assert!(cli.mock.ready_info().auth_url.starts_with("https://"));
    let token = cli.json(&["token", "issue"]).await?;
    assert!(!field(&token, "id").is_empty(), "{token}");
    let servers = cli.json(&["server", "list"]).await?;
    assert_eq!(servers.as_array().map(Vec::len), Some(1), "{servers}");
    let lbs = cli.json(&["loadbalancer", "list"]).await?;
    assert_eq!(lbs.as_array().map(Vec::len), Some(0), "{lbs}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_load_balancer_lifecycle_leaves_nothing() -> Result<()> {
    let Some(cli) = Cli::start(1).await else {
        return Ok(());
    };
    // Make the client really wait: every transition needs two reads.
    cli.mock
        .admin()
        .set_lifecycle(
            mock_openstack::LifecycleTarget::Default,
            Some(mock_openstack::LifecycleMode::Reads { n: 2 }),
        )
        .context("lifecycle")?;
    let subnets = cli
        .json(&["subnet", "list", "--name", "private-subnet"])
        .await?;
    let subnet = field(&subnets[0], "ID").to_string();
    let node = cli.mock.admin().server_by_name("node-0").context("node")?;

    let lb = cli
        .json(&[
            "loadbalancer",
            "create",
            "--name",
            "lb1",
            "--vip-subnet-id",
            &subnet,
            "--wait",
        ])
        .await?;
    let lb_id = field(&lb, "id").to_string();
    let shown = cli.json(&["loadbalancer", "show", &lb_id]).await?;
    assert_eq!(field(&shown, "provisioning_status"), "ACTIVE", "{shown}");
    let vip = field(&shown, "vip_address").to_string();
    assert!(vip.starts_with("127.30."), "{vip}");

    let listener = cli
        .json(&[
            "loadbalancer",
            "listener",
            "create",
            "--name",
            "l1",
            "--protocol",
            "TCP",
            "--protocol-port",
            "8080",
            "--wait",
            &lb_id,
        ])
        .await?;
    let listener_id = field(&listener, "id").to_string();
    let pool = cli
        .json(&[
            "loadbalancer",
            "pool",
            "create",
            "--name",
            "p1",
            "--protocol",
            "TCP",
            "--lb-algorithm",
            "ROUND_ROBIN",
            "--listener",
            &listener_id,
            "--wait",
        ])
        .await?;
    let pool_id = field(&pool, "id").to_string();
    let member = cli
        .json(&[
            "loadbalancer",
            "member",
            "create",
            "--address",
            &node.internal_ips[0],
            "--protocol-port",
            "30080",
            "--subnet-id",
            &subnet,
            "--wait",
            &pool_id,
        ])
        .await?;
    assert_eq!(field(&member, "address"), node.internal_ips[0]);
    let members = cli
        .json(&["loadbalancer", "member", "list", &pool_id])
        .await?;
    assert_eq!(members.as_array().map(Vec::len), Some(1), "{members}");
    // `status show` prints the tree as JSON and takes no `-f`.
    let tree = cli.run(&["loadbalancer", "status", "show", &lb_id]).await?;
    let status: Value = serde_json::from_str(&tree).context("status tree")?;
    assert_eq!(
        status["loadbalancer"]["provisioning_status"], "ACTIVE",
        "{tree}"
    );
    assert!(
        tree.contains(&listener_id) && tree.contains(&pool_id),
        "{tree}"
    );

    let leaks = cli.admin_get("/leaks").await?;
    assert_eq!(leaks["total"], 4, "{leaks}");

    cli.run(&["loadbalancer", "delete", "--cascade", "--wait", &lb_id])
        .await?;
    let list = cli.json(&["loadbalancer", "list"]).await?;
    assert_eq!(list.as_array().map(Vec::len), Some(0), "{list}");
    let vip_ports = cli
        .json(&["port", "list", "--device-id", &format!("lb-{lb_id}")])
        .await?;
    assert_eq!(vip_ports.as_array().map(Vec::len), Some(0), "{vip_ports}");
    let leaks = cli.admin_get("/leaks").await?;
    assert_eq!(leaks["total"], 0, "{leaks}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_floating_ip_and_router_route() -> Result<()> {
    let Some(cli) = Cli::start(1).await else {
        return Ok(());
    };
    let node = cli.mock.admin().server_by_name("node-0").context("node")?;
    let ports = cli.json(&["port", "list", "--device-id", &node.id]).await?;
    let port_id = field(&ports[0], "ID").to_string();

    let fip = cli
        .json(&["floating", "ip", "create", "--port", &port_id, "public"])
        .await?;
    assert_eq!(field(&fip, "port_id"), port_id, "{fip}");
    assert!(field(&fip, "floating_ip_address").starts_with("127.20."));
    let by_port = cli
        .json(&["floating", "ip", "list", "--port", &port_id])
        .await?;
    assert_eq!(by_port.as_array().map(Vec::len), Some(1), "{by_port}");

    let routers = cli.json(&["router", "list"]).await?;
    let router = field(&routers[0], "ID").to_string();
    let help = cli.run(&["router", "add", "route", "--help"]).await;
    if help.is_ok() {
        let gateway = &node.internal_ips[0];
        cli.run(&[
            "router",
            "add",
            "route",
            "--route",
            &format!("destination=10.244.1.0/24,gateway={gateway}"),
            &router,
        ])
        .await?;
        let shown = cli.json(&["router", "show", &router]).await?;
        assert!(
            shown["routes"].to_string().contains("10.244.1.0/24"),
            "{shown}"
        );
        let leaks = cli.admin_get("/leaks").await?;
        assert_eq!(
            leaks["by_type"]["extra_routes"].as_array().map(Vec::len),
            Some(1)
        );
        cli.run(&[
            "router",
            "remove",
            "route",
            "--route",
            &format!("destination=10.244.1.0/24,gateway={gateway}"),
            &router,
        ])
        .await?;
        // An IPv6 route via the router's IPv6 subnet, as a dual-stack CCM adds one.
        let v6 = "destination=fd00:10:244:1::/64,gateway=fd00::9:1";
        cli.run(&["router", "add", "route", "--route", v6, &router])
            .await?;
        let shown = cli.json(&["router", "show", &router]).await?;
        assert!(
            shown["routes"].to_string().contains("fd00:10:244:1::/64"),
            "{shown}"
        );
        // A family mismatch is refused.
        let mixed = "destination=10.244.2.0/24,gateway=fd00::9:1";
        assert!(
            cli.run(&["router", "add", "route", "--route", mixed, &router])
                .await
                .is_err()
        );
        cli.run(&["router", "remove", "route", "--route", v6, &router])
            .await?;
    } else {
        eprintln!("skipping `router add route`: this CLI version does not have it");
    }

    let fip_id = field(&fip, "id").to_string();
    cli.run(&["floating", "ip", "delete", &fip_id]).await?;
    let leaks = cli.admin_get("/leaks").await?;
    assert_eq!(leaks["total"], 0, "{leaks}");
    Ok(())
}
