//! Proxy tests over loopback: small backends that answer with their own name, clients that
//! pick their source address inside 127/8.

use super::*;

use tokio::net::TcpSocket;

const WAIT: Duration = Duration::from_secs(5);

/// A TCP backend that writes `name\n` to every connection and closes it.
struct NameServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl NameServer {
    async fn start(name: &'static str) -> NameServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind backend");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let _ = s.write_all(format!("{name}\n").as_bytes()).await;
            }
        });
        NameServer { addr, task }
    }

    /// Stops answering; returns once the port is closed.
    async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// An HTTP backend answering every request with `status`.
async fn http_server(status: u16) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind http");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n").as_bytes())
                .await;
        }
    });
    (addr, task)
}

/// A UDP backend replying `name` to every datagram.
async fn udp_name_server(name: &'static str) -> (SocketAddr, JoinHandle<()>) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
    let addr = socket.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((_, peer)) = socket.recv_from(&mut buf).await {
            let _ = socket.send_to(name.as_bytes(), peer).await;
        }
    });
    (addr, task)
}

/// Connects from `source` and reads everything: `Some(text)`, or `None` if the proxy
/// refused the connection or closed it without data.
async fn fetch(target: SocketAddr, source: Ipv4Addr) -> Option<String> {
    let attempt = async {
        let socket = TcpSocket::new_v4().ok()?;
        socket.bind(SocketAddr::from((source, 0))).ok()?;
        let mut stream = socket.connect(target).await.ok()?;
        let mut out = String::new();
        stream.read_to_string(&mut out).await.ok()?;
        (!out.is_empty()).then_some(out)
    };
    tokio::time::timeout(WAIT, attempt).await.ok().flatten()
}

/// Sends one datagram from `source` and waits up to `wait` for the answer.
async fn ask_udp(target: SocketAddr, source: Ipv4Addr, wait: Duration) -> Option<String> {
    let socket = UdpSocket::bind(SocketAddr::from((source, 0))).await.ok()?;
    socket.send_to(b"hi", target).await.ok()?;
    let mut buf = [0u8; 512];
    let (n, _) = tokio::time::timeout(wait, socket.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn tcp_config(backends: Vec<SocketAddr>) -> ProxyConfig {
    ProxyConfig {
        protocol: Protocol::Tcp,
        listen: "127.0.0.1:0".parse().expect("addr"),
        backends: backends.into_iter().map(Backend::from).collect(),
        allowed_cidrs: Vec::new(),
        health: None,
    }
}

fn fast_check(probe: Probe) -> HealthCheck {
    HealthCheck {
        probe,
        interval: Duration::from_millis(50),
        timeout: Duration::from_millis(500),
        rise: 2,
        fall: 2,
        fail_open: false,
    }
}

const CLIENT: Ipv4Addr = Ipv4Addr::LOCALHOST;

#[tokio::test]
async fn tcp_round_robin_over_backends() {
    let (a, b) = (NameServer::start("a").await, NameServer::start("b").await);
    let proxy = Proxy::start(tcp_config(vec![a.addr, b.addr]))
        .await
        .expect("start");
    let vip = proxy.local_addr();
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(fetch(vip, CLIENT).await.expect("answer"));
    }
    assert_eq!(seen, ["a\n", "b\n", "a\n", "b\n"]);
    assert_eq!(
        proxy.statuses(),
        vec![
            (a.addr, MemberStatus::NoMonitor),
            (b.addr, MemberStatus::NoMonitor)
        ]
    );
    proxy.stop().await;
}

#[tokio::test]
async fn binds_a_vip_in_127_8_and_stop_releases_it() {
    let a = NameServer::start("a").await;
    let mut config = tcp_config(vec![a.addr]);
    config.listen = "127.30.99.7:0".parse().expect("addr");
    let proxy = Proxy::start(config.clone()).await.expect("start");
    let vip = proxy.local_addr();
    assert_eq!(vip.ip(), "127.30.99.7".parse::<IpAddr>().expect("ip"));
    assert_eq!(fetch(vip, CLIENT).await.as_deref(), Some("a\n"));
    proxy.stop().await;
    assert_eq!(fetch(vip, CLIENT).await, None, "nothing listens after stop");
    config.listen = vip;
    let again = Proxy::start(config)
        .await
        .expect("same address binds again");
    assert_eq!(fetch(vip, CLIENT).await.as_deref(), Some("a\n"));
    drop(again);
}

#[tokio::test]
async fn no_backends_closes_and_update_brings_traffic() {
    let a = NameServer::start("a").await;
    let proxy = Proxy::start(tcp_config(Vec::new())).await.expect("start");
    let vip = proxy.local_addr();
    assert_eq!(fetch(vip, CLIENT).await, None);
    proxy.update(&[a.addr.into()], &[]);
    assert_eq!(fetch(vip, CLIENT).await.as_deref(), Some("a\n"));
    proxy.update(&[], &[]);
    assert_eq!(fetch(vip, CLIENT).await, None);
}

#[tokio::test]
async fn allowed_cidrs_filter_client_sources() {
    let a = NameServer::start("a").await;
    let mut config = tcp_config(vec![a.addr]);
    config.allowed_cidrs = vec![Cidr::parse("127.0.0.0/30").expect("cidr")];
    let proxy = Proxy::start(config).await.expect("start");
    let vip = proxy.local_addr();
    assert_eq!(
        fetch(vip, Ipv4Addr::new(127, 0, 0, 2)).await.as_deref(),
        Some("a\n")
    );
    assert_eq!(fetch(vip, Ipv4Addr::new(127, 0, 0, 9)).await, None);
    proxy.update(&[a.addr.into()], &[Cidr::parse("127.0.0.9").expect("cidr")]);
    assert_eq!(
        fetch(vip, Ipv4Addr::new(127, 0, 0, 9)).await.as_deref(),
        Some("a\n")
    );
    assert_eq!(fetch(vip, Ipv4Addr::new(127, 0, 0, 2)).await, None);
}

#[tokio::test]
async fn tcp_health_check_takes_dead_backend_out_and_marks_error() {
    let (a, b) = (NameServer::start("a").await, NameServer::start("b").await);
    let (a_addr, b_addr) = (a.addr, b.addr);
    let mut config = tcp_config(vec![a_addr, b_addr]);
    config.health = Some(fast_check(Probe::Tcp));
    let proxy = Proxy::start(config).await.expect("start");
    assert!(
        proxy
            .wait_for_status(a_addr, MemberStatus::Online, WAIT)
            .await
    );
    a.kill().await;
    assert!(
        proxy
            .wait_for_status(a_addr, MemberStatus::Error, WAIT)
            .await,
        "dead backend goes to ERROR: {:?}",
        proxy.statuses()
    );
    assert_eq!(proxy.status(b_addr), Some(MemberStatus::Online));
    for _ in 0..3 {
        assert_eq!(
            fetch(proxy.local_addr(), CLIENT).await.as_deref(),
            Some("b\n")
        );
    }
    b.kill().await;
    assert!(
        proxy
            .wait_for_status(b_addr, MemberStatus::Error, WAIT)
            .await
    );
    assert_eq!(
        fetch(proxy.local_addr(), CLIENT).await,
        None,
        "all down: closed"
    );
}

#[tokio::test]
async fn health_rise_brings_a_backend_back() {
    // Reserve a port, then free it: the backend starts dead and comes up later there. On
    // an address of its own in 127/8, not 127.0.0.1: there the freed port can be taken as
    // an ephemeral port by any connection of the test run before the backend comes up,
    // and the probe would find someone else's listener alive (seen under CI load).
    let own = format!("127.251.{}.1:0", std::process::id() % 250);
    let placeholder = TcpListener::bind(own.as_str()).await.expect("bind");
    let addr = placeholder.local_addr().expect("addr");
    drop(placeholder);
    let mut config = tcp_config(vec![addr]);
    config.health = Some(fast_check(Probe::Tcp));
    let proxy = Proxy::start(config).await.expect("start");
    assert!(proxy.wait_for_status(addr, MemberStatus::Error, WAIT).await);
    let listener = TcpListener::bind(addr).await.expect("rebind backend port");
    let server = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.write_all(b"late\n").await;
        }
    });
    assert!(
        proxy
            .wait_for_status(addr, MemberStatus::Online, WAIT)
            .await
    );
    assert_eq!(
        fetch(proxy.local_addr(), CLIENT).await.as_deref(),
        Some("late\n")
    );
    server.abort();
}

#[tokio::test]
async fn http_health_check_uses_status_codes() {
    let (ok, _t1) = http_server(200).await;
    let (sick, _t2) = http_server(503).await;
    let mut config = tcp_config(vec![ok, sick]);
    config.health = Some(fast_check(Probe::Http {
        path: "/healthz".into(),
        expected: ExpectedCodes::default(),
    }));
    let proxy = Proxy::start(config).await.expect("start");
    assert!(proxy.wait_for_status(sick, MemberStatus::Error, WAIT).await);
    assert!(proxy.wait_for_status(ok, MemberStatus::Online, WAIT).await);
    // Accepting 503 as well brings it back (a changed check starts afresh).
    proxy.set_health_check(Some(fast_check(Probe::Http {
        path: "/healthz".into(),
        expected: ExpectedCodes::parse("200,500-503").expect("codes"),
    })));
    assert!(
        proxy
            .wait_for_status(sick, MemberStatus::Online, WAIT)
            .await
    );
    proxy.set_health_check(None);
    assert_eq!(proxy.status(sick), Some(MemberStatus::NoMonitor));
}

#[tokio::test]
async fn probes_go_to_the_monitor_address_when_set() {
    // Traffic goes to a name server; health comes from a separate HTTP port, as with
    // CPO's healthCheckNodePort monitors.
    let a = NameServer::start("a").await;
    let (sick, _t) = http_server(503).await;
    let (well, _t2) = http_server(200).await;
    let mut config = tcp_config(Vec::new());
    config.backends = vec![Backend {
        address: a.addr,
        monitor: Some(sick),
    }];
    config.health = Some(fast_check(Probe::Http {
        path: "/healthz".into(),
        expected: ExpectedCodes::default(),
    }));
    let proxy = Proxy::start(config).await.expect("start");
    assert!(
        proxy
            .wait_for_status(a.addr, MemberStatus::Error, WAIT)
            .await
    );
    assert_eq!(fetch(proxy.local_addr(), CLIENT).await, None);
    let moved = Backend {
        address: a.addr,
        monitor: Some(well),
    };
    proxy.update(&[moved], &[]);
    assert!(
        proxy
            .wait_for_status(a.addr, MemberStatus::Online, WAIT)
            .await
    );
    assert_eq!(
        fetch(proxy.local_addr(), CLIENT).await.as_deref(),
        Some("a\n")
    );
}

#[tokio::test]
async fn udp_flows_are_proxied_and_filtered() {
    let (a, _ta) = udp_name_server("ua").await;
    let (b, _tb) = udp_name_server("ub").await;
    let config = ProxyConfig {
        protocol: Protocol::Udp,
        listen: "127.0.0.1:0".parse().expect("addr"),
        backends: vec![a.into(), b.into()],
        allowed_cidrs: vec![Cidr::parse("127.0.0.1/32").expect("cidr")],
        health: Some(fast_check(Probe::Udp)),
    };
    let proxy = Proxy::start(config).await.expect("start");
    let vip = proxy.local_addr();
    let mut answers = Vec::new();
    for _ in 0..2 {
        answers.push(ask_udp(vip, CLIENT, WAIT).await.expect("udp answer"));
    }
    answers.sort();
    assert_eq!(answers, ["ua", "ub"], "two flows, two backends");
    assert_eq!(
        ask_udp(vip, Ipv4Addr::new(127, 0, 0, 3), Duration::from_millis(300)).await,
        None,
        "source outside allowed_cidrs is dropped"
    );
    assert!(proxy.wait_for_status(a, MemberStatus::Online, WAIT).await);
}

#[tokio::test]
async fn a_fail_open_check_uses_every_backend_when_all_are_down() {
    // A UDP backend whose TCP health port is closed: down, so nothing without fail-open
    // (Octavia) and traffic anyway with it (ELBv2 NLBs).
    let (a, _ta) = udp_name_server("ua").await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    for fail_open in [false, true] {
        let mut check = fast_check(Probe::Tcp);
        check.fail_open = fail_open;
        let config = ProxyConfig {
            protocol: Protocol::Udp,
            listen: "127.0.0.1:0".parse().expect("addr"),
            backends: vec![Backend {
                address: a,
                monitor: Some(closed),
            }],
            allowed_cidrs: Vec::new(),
            health: Some(check),
        };
        let proxy = Proxy::start(config).await.expect("start");
        assert!(proxy.wait_for_status(a, MemberStatus::Error, WAIT).await);
        let wait = if fail_open {
            WAIT
        } else {
            Duration::from_millis(300)
        };
        let answer = ask_udp(proxy.local_addr(), CLIENT, wait).await;
        assert_eq!(
            answer.is_some(),
            fail_open,
            "fail_open {fail_open}: {answer:?}"
        );
    }
}

#[tokio::test]
async fn udp_probe_sees_closed_port() {
    let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let addr = socket.local_addr().expect("addr");
    drop(socket);
    let config = ProxyConfig {
        protocol: Protocol::Udp,
        listen: "127.0.0.1:0".parse().expect("addr"),
        backends: vec![addr.into()],
        allowed_cidrs: Vec::new(),
        health: Some(fast_check(Probe::Udp)),
    };
    let proxy = Proxy::start(config).await.expect("start");
    assert!(proxy.wait_for_status(addr, MemberStatus::Error, WAIT).await);
    assert_eq!(
        ask_udp(proxy.local_addr(), CLIENT, Duration::from_millis(300)).await,
        None
    );
}

#[test]
fn cidr_parse_and_contains() {
    let c = Cidr::parse("127.30.0.0/16").expect("cidr");
    assert!(c.contains("127.30.4.5".parse().expect("ip")));
    assert!(!c.contains("127.31.0.1".parse().expect("ip")));
    assert!(c.contains("::ffff:127.30.0.1".parse().expect("ip")));
    assert!(
        Cidr::parse("0.0.0.0/0")
            .expect("any")
            .contains("10.1.2.3".parse().expect("ip"))
    );
    assert!(
        Cidr::parse("::/0")
            .expect("any6")
            .contains("fd00::1".parse().expect("ip"))
    );
    assert!(
        !Cidr::parse("::/0")
            .expect("any6")
            .contains("10.0.0.1".parse().expect("ip"))
    );
    assert!(
        Cidr::parse("fd00::/64")
            .expect("v6")
            .contains("fd00::9".parse().expect("ip"))
    );
    assert_eq!(
        Cidr::parse("10.0.0.1").expect("host").to_string(),
        "10.0.0.1/32"
    );
    for bad in ["", "x/8", "10.0.0.0/33", "10.0.0.0/-1", "::/129"] {
        assert!(Cidr::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn expected_codes_and_status_lines() {
    let codes = ExpectedCodes::parse("200-204, 302").expect("codes");
    assert!(codes.accepts(204) && codes.accepts(302));
    assert!(!codes.accepts(205) && !codes.accepts(301));
    for bad in ["", "abc", "300-200"] {
        assert!(ExpectedCodes::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_status(b"HTTP/1.1 503 Service Unavailable\r\n"),
        Some(503)
    );
    assert_eq!(parse_status(b"SSH-2.0-OpenSSH\r\n"), None);
    assert_eq!(parse_status(b""), None);
}

#[test]
fn health_counting_follows_rise_and_fall() {
    let check = HealthCheck {
        probe: Probe::Tcp,
        interval: Duration::from_secs(1),
        timeout: Duration::from_secs(1),
        rise: 2,
        fall: 3,
        fail_open: false,
    };
    let mut b = BackendState::new("127.0.0.1:1".parse().expect("addr"), None);
    assert!(!b.record(true, &check) && b.healthy && b.confirmed);
    assert!(!b.record(false, &check) && !b.record(false, &check));
    assert!(
        b.record(false, &check),
        "third failure takes a confirmed backend down"
    );
    assert!(!b.record(true, &check));
    assert!(b.record(true, &check), "second success brings it back");
    let mut fresh = BackendState::new("127.0.0.1:2".parse().expect("addr"), None);
    assert!(
        fresh.record(false, &check),
        "an unconfirmed backend falls on the first failure"
    );
}
