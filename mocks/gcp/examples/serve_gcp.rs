//! Serves a mock GCP until killed and prints its ready object, for trying real clients
//! by hand: `cargo run -p mock-gcp --example serve_gcp -- [--anonymous] [NODES]`.

use mock_gcp::{Config, GcpMock};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nodes = args.iter().find_map(|a| a.parse().ok()).unwrap_or(3);
    let mock = GcpMock::start(Config {
        nodes,
        allow_anonymous: args.iter().any(|a| a == "--anonymous"),
        address_block: 90,
        ..Config::default()
    })
    .await?;
    println!("{}", serde_json::to_string(&mock.ready_info())?);
    tokio::signal::ctrl_c().await?;
    mock.shutdown().await;
    Ok(())
}
