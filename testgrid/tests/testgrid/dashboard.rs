//! The dashboard end to end: three published runs (written by our own writers into the
//! Prow tree `publish` produces) rendered to `index.html`, then, when Debian's `chromium`
//! is installed, a headless screenshot decoded with the `png` crate and searched for the
//! pass, fail and flaky cell colours. Malformed input must fail naming the file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ccm_testgrid::dashboard::{COLORS, Cell, Grid, load_dir, write_site};
use ccm_testgrid::prow::{
    Finished, JobResult, RunMetadata, Started, write_finished, write_started,
};
use ccm_testgrid::{CaseResult, JunitFile, Outcome, junit_path};

fn case(suite: &str, name: &str, outcome: Outcome, metric: Option<f64>) -> CaseResult {
    CaseResult {
        suite: suite.into(),
        name: name.into(),
        outcome,
        duration: Duration::from_millis(1500),
        properties: metric
            .map(|m| vec![("taint-removal-seconds".to_string(), format!("{m}"))])
            .unwrap_or_default(),
        system_out: None,
    }
}

fn failed(msg: &str) -> Outcome {
    Outcome::Failed {
        message: msg.into(),
        detail: "detail".into(),
    }
}

/// Build `build` of job `ci-ccm` at `root/logs/ci-ccm/<build>` (the periodic layout, §1.1).
fn write_build(root: &Path, build: u64, cases: &[CaseResult], result: JobResult) -> PathBuf {
    let dir = root.join("logs/ci-ccm").join(build.to_string());
    write_started(&dir, &Started::at(build)).unwrap();
    let junit = JunitFile::new(junit_path(&dir.join("artifacts"), "conformance"), "ccm");
    for c in cases {
        junit.record(c.clone()).unwrap();
    }
    let meta = RunMetadata {
        provider: "openstack".into(),
        k8s_version: "v1.34.1".into(),
        ccm_version: format!("v0.{build}"),
        ..Default::default()
    };
    write_finished(&dir, &Finished::new(build + 60, result, &meta)).unwrap();
    dir
}

/// Three runs: NI-01 passes in all, NI-02 fails in the newest, NA-01 is flaky in the
/// middle one, RT-01 is skipped, and the AWS suite appears only in the newest.
fn fixture(root: &Path) {
    let ni1 = |m| {
        case(
            "openstack",
            "NI-01 removes the taint",
            Outcome::Passed,
            Some(m),
        )
    };
    write_build(
        root,
        1_700_000_000,
        &[
            ni1(2.0),
            case("openstack", "NI-02 sets providerID", Outcome::Passed, None),
            case("openstack", "NA-01 syncs addresses", Outcome::Passed, None),
        ],
        JobResult::Success,
    );
    write_build(
        root,
        1_700_086_400,
        &[
            ni1(3.0),
            case("openstack", "NI-02 sets providerID", Outcome::Passed, None),
            case(
                "openstack",
                "NA-01 syncs addresses",
                failed("addresses stale"),
                None,
            ),
            case("openstack", "NA-01 syncs addresses", Outcome::Passed, None),
            case(
                "openstack",
                "RT-01 programs routes",
                Outcome::Skipped {
                    reason: "provider does not implement Routes".into(),
                },
                None,
            ),
        ],
        JobResult::Success,
    );
    write_build(
        root,
        1_700_172_800,
        &[
            ni1(2.5),
            case(
                "openstack",
                "NI-02 sets providerID",
                failed("providerID empty on node worker-1 after 60s"),
                None,
            ),
            case("openstack", "NA-01 syncs addresses", Outcome::Passed, None),
            case("aws", "NI-01 removes the taint", Outcome::Passed, None),
        ],
        JobResult::Failure,
    );
}

#[test]
fn three_runs_make_a_grid_newest_left() {
    let root = tempfile::tempdir().unwrap();
    fixture(root.path());
    let grid = Grid::new(load_dir(root.path()).unwrap());
    let ids: Vec<_> = grid.runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["1700172800", "1700086400", "1700000000"]);
    assert!(grid.runs.iter().all(|r| r.job == "ci-ccm"));
    let row = |n: &str| {
        grid.rows
            .iter()
            .find(|r| r.name == n)
            .unwrap_or_else(|| panic!("no row {n}: {:?}", grid.rows))
    };
    assert_eq!(
        row("openstack.NI-02 sets providerID").cells[0],
        Cell::Fail {
            message: "providerID empty on node worker-1 after 60s".into()
        }
    );
    assert_eq!(
        row("openstack.NA-01 syncs addresses").cells[1].class(),
        "flaky"
    );
    assert_eq!(
        row("openstack.RT-01 programs routes").cells[1].class(),
        "skip"
    );
    assert_eq!(
        row("openstack.RT-01 programs routes").cells[0],
        Cell::Missing
    );
    assert_eq!(row("aws.NI-01 removes the taint").cells[2], Cell::Missing);
    assert_eq!(grid.summary["openstack"][0].fail, 1);
    assert_eq!(grid.summary["aws"][0].pass, 1);
    assert_eq!(
        grid.metrics["taint-removal-seconds"],
        vec![Some(2.5), Some(3.0), Some(2.0)]
    );
    assert_eq!(grid.runs[0].metadata["ccm-version"], "v0.1700172800");

    let out = tempfile::tempdir().unwrap();
    let page = write_site(&grid, out.path(), "ci-ccm").unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    // Hover texts carry the message, then the time the case took.
    assert!(html.contains("title=\"providerID empty on node worker-1 after 60s ("));
    assert!(html.contains("title=\"1/2 runs passed: addresses stale ("));
    assert!(html.contains("<svg"));
    assert!(!html.contains("<script"), "no script on the page");
    assert!(
        !html.contains("https://"),
        "nothing fetched from the network"
    );
}

#[test]
fn malformed_or_truncated_junit_fails_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    fixture(root.path());
    let bad = root
        .path()
        .join("logs/ci-ccm/1700086400/artifacts/junit_conformance.xml");
    let text = std::fs::read_to_string(&bad).unwrap();
    std::fs::write(&bad, &text[..text.len() / 2]).unwrap();
    let err = load_dir(root.path()).unwrap_err().to_string();
    assert!(
        err.contains("1700086400/artifacts/junit_conformance.xml"),
        "{err}"
    );

    std::fs::write(&bad, "").unwrap();
    assert!(load_dir(root.path()).is_err(), "an empty file is malformed");

    let started = root.path().join("logs/ci-ccm/1700000000/started.json");
    std::fs::write(&bad, text).unwrap();
    std::fs::write(&started, "{\"timestamp\": ").unwrap();
    let err = load_dir(root.path()).unwrap_err().to_string();
    assert!(err.contains("started.json"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    assert!(load_dir(empty.path()).is_err(), "no builds is an error");
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// How many pixels of each RGB colour (RGB or RGBA 8-bit PNG).
fn count_colors(png_path: &Path, wanted: &[[u8; 3]]) -> (u32, u32, Vec<usize>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "8-bit screenshot");
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    let mut counts = vec![0; wanted.len()];
    for px in buf[..info.buffer_size()].chunks_exact(channels) {
        for (i, w) in wanted.iter().enumerate() {
            if px[..3].iter().zip(w).all(|(a, b)| a.abs_diff(*b) <= 3) {
                counts[i] += 1;
            }
        }
    }
    (info.width, info.height, counts)
}

#[test]
fn headless_chromium_screenshot_shows_the_grid() {
    let chromium = Path::new("/usr/bin/chromium");
    if !chromium.exists() {
        eprintln!(
            "/usr/bin/chromium absent (apt-get install -y chromium): skipping the screenshot"
        );
        return;
    }
    let root = tempfile::tempdir().unwrap();
    fixture(root.path());
    let grid = Grid::new(load_dir(root.path()).unwrap());
    let out = tempfile::tempdir().unwrap();
    let page = write_site(&grid, out.path(), "ci-ccm").unwrap();
    let profile = tempfile::tempdir().unwrap();
    let shot = out.path().join("shot.png");
    let status = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1200,800")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        shot.is_file(),
        "no screenshot; chromium said: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let size = std::fs::metadata(&shot).unwrap().len();
    assert!(size > 5_000, "screenshot only {size} bytes");
    let color = |class: &str| rgb(COLORS.iter().find(|(c, _)| *c == class).unwrap().1);
    let wanted = [color("pass"), color("fail"), color("flaky"), color("skip")];
    let (w, h, counts) = count_colors(&shot, &wanted);
    assert_eq!((w, h), (1200, 800));
    // A cell is at least 56x18 px (~1,000 px); each legend swatch is ~600 px. Eight pass
    // cells, and one fail, one flaky and one skip cell: each bound needs the cells, not
    // only the legend.
    println!("colour pixels pass/fail/flaky/skip: {counts:?}");
    let at_least = [8 * 900, 1_300, 1_300, 1_300];
    for ((name, n), min) in ["pass", "fail", "flaky", "skip"]
        .iter()
        .zip(&counts)
        .zip(at_least)
    {
        assert!(
            *n >= min,
            "{name} colour covers only {n} px (< {min}): {counts:?}"
        );
    }
    assert!(
        counts[0] > counts[1],
        "more passes than failures: {counts:?}"
    );
}
