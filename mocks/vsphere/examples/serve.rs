//! Serves a mock vCenter until interrupted and prints its ready-file JSON; for trying
//! clients by hand (`cargo run -p mock-vsphere --example serve [READY_FILE]`).
#![forbid(unsafe_code)]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = mock_vsphere::Config {
        password: "pass".into(),
        ..Default::default()
    };
    let mock = match std::env::args().nth(1) {
        Some(path) => mock_vsphere::start_with_ready_file(config, path.as_ref()).await?,
        None => mock_vsphere::VsphereMock::start(config).await?,
    };
    println!("{}", serde_json::to_string(&mock.ready_info())?);
    tokio::signal::ctrl_c().await?;
    mock.shutdown().await;
    Ok(())
}
