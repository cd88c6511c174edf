//! The data plane of mock load balancers: a TCP or UDP proxy on `vip:port` that spreads
//! client flows over backends, so a conformance case can check a load balancer with real
//! traffic instead of trusting the cloud API's word (DESIGN.md "Data plane").
//!
//! A [`Proxy`] binds its listen address (anything in 127/8 works without setup on Linux),
//! and for each TCP connection or UDP flow picks the next *healthy* backend round robin.
//! With no healthy backend a TCP connection is closed at once and UDP datagrams are
//! dropped, like a load balancer whose pool is all down. Client source addresses outside
//! `allowed_cidrs` (when any are set) are refused the same way (Octavia listener
//! `allowed_cidrs`, AWS/GCE source ranges).
//!
//! An optional [`HealthCheck`] probes every backend (TCP connect, HTTP `GET path` with
//! expected codes, or UDP connect) every `interval`, each probe bounded by `timeout`. The
//! counting follows HAProxy, which Octavia's amphorae run (`rise` = Octavia `max_retries`,
//! `fall` = `max_retries_down`, octavia `common/jinja/haproxy/.../macros.j2`): a backend
//! starts up (HAProxy's default `init-state up`), the first failed probe takes an
//! unconfirmed backend down, after that `fall` consecutive failures take it down and `rise`
//! consecutive successes bring it back. The result is each backend's [`MemberStatus`].
//!
//! Everything a proxy runs is owned by it: [`Proxy::stop`] aborts its tasks and waits for
//! them (so the sockets are closed when it returns and the address can be bound again);
//! dropping a proxy aborts them too.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{Notify, watch};
use tokio::task::{AbortHandle, JoinHandle, JoinSet};

/// How long the proxy waits for a backend to accept a connection.
const BACKEND_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Concurrent TCP connections per proxy; more are closed on accept.
const MAX_CONNECTIONS: usize = 1024;
/// Concurrent UDP flows (client address -> backend) per proxy; datagrams of new flows
/// beyond this are dropped.
const MAX_UDP_FLOWS: usize = 1024;
/// A UDP flow with no reply from its backend for this long is forgotten.
const UDP_FLOW_IDLE: Duration = Duration::from_secs(30);
/// The shortest probe interval (Octavia accepts `delay: 0`; a zero interval would spin).
const MIN_INTERVAL: Duration = Duration::from_millis(50);
/// A proxy without client traffic for this long is idle: its health checks back off.
const IDLE_AFTER: Duration = Duration::from_secs(2);
/// How far an idle proxy's probe period grows: doubling per quiet round up to
/// `interval << IDLE_MAX_DOUBLINGS`, and never beyond [`IDLE_MAX_PERIOD`].
const IDLE_MAX_DOUBLINGS: u32 = 3;
/// The same for a proxy clients are using.
const BUSY_MAX_DOUBLINGS: u32 = 1;
const IDLE_MAX_PERIOD: Duration = Duration::from_secs(2);
/// The most of an HTTP health-check answer read to find the status line.
const MAX_STATUS_LINE: usize = 1024;

/// Why a proxy could not start, or a value was refused.
#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    #[error("binding {protocol} {addr}: {source}")]
    Bind {
        protocol: Protocol,
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("invalid CIDR {value:?}: {reason}")]
    Cidr { value: String, reason: &'static str },
    #[error("invalid expected status codes {value:?}: {reason}")]
    ExpectedCodes { value: String, reason: &'static str },
}

/// The transport a proxy carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Protocol {
    Tcp,
    Udp,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        })
    }
}

/// An IPv4 or IPv6 prefix, e.g. `127.0.0.0/8`; a bare address is a host prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(value: &str) -> Result<Cidr, DataplaneError> {
        let bad = |reason| DataplaneError::Cidr {
            value: value.to_string(),
            reason,
        };
        let (addr, prefix) = match value.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (value.trim(), None),
        };
        let network: IpAddr = addr.parse().map_err(|_| bad("not an IP address"))?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p.parse::<u8>().map_err(|_| bad("prefix is not a number"))?,
        };
        if prefix > max {
            return Err(bad("prefix is longer than the address"));
        }
        Ok(Cidr { network, prefix })
    }

    /// Whether `ip` is inside the prefix (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_eq(u32::from(net).into(), u32::from(ip).into(), self.prefix, 32)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(u128::from(net), u128::from(ip), self.prefix, 128)
            }
            _ => false,
        }
    }
}

fn prefix_eq(a: u128, b: u128, prefix: u8, bits: u32) -> bool {
    let host_bits = bits - u32::from(prefix);
    if host_bits >= 128 {
        return true;
    }
    (a >> host_bits) == (b >> host_bits)
}

impl FromStr for Cidr {
    type Err = DataplaneError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Cidr::parse(s)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// HTTP status codes a health check accepts: Octavia's `expected_codes` syntax, a single
/// code, a list `200,202` or a range `200-204`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedCodes(Vec<(u16, u16)>);

impl ExpectedCodes {
    pub fn parse(value: &str) -> Result<ExpectedCodes, DataplaneError> {
        let bad = |reason| DataplaneError::ExpectedCodes {
            value: value.to_string(),
            reason,
        };
        let code = |s: &str| {
            s.trim()
                .parse::<u16>()
                .map_err(|_| bad("not a status code"))
        };
        let mut ranges = Vec::new();
        for part in value.split(',') {
            let range = match part.split_once('-') {
                Some((lo, hi)) => (code(lo)?, code(hi)?),
                None => {
                    let c = code(part)?;
                    (c, c)
                }
            };
            if range.0 > range.1 {
                return Err(bad("range runs backwards"));
            }
            ranges.push(range);
        }
        Ok(ExpectedCodes(ranges))
    }

    pub fn accepts(&self, status: u16) -> bool {
        self.0.iter().any(|(lo, hi)| (*lo..=*hi).contains(&status))
    }
}

impl Default for ExpectedCodes {
    /// Octavia's default, `200`.
    fn default() -> Self {
        ExpectedCodes(vec![(200, 200)])
    }
}

/// What one health probe does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Up if a TCP connection is accepted.
    Tcp,
    /// Up if `GET path` answers with an expected status.
    Http {
        path: String,
        expected: ExpectedCodes,
    },
    /// Down only if the backend answers a datagram with "port unreachable" (as Octavia's
    /// UDP-CONNECT: silence counts as up).
    Udp,
}

/// A health monitor for a proxy's backends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    pub probe: Probe,
    /// Time between probe rounds.
    pub interval: Duration,
    /// Bound on one probe.
    pub timeout: Duration,
    /// Consecutive successes that bring a down backend back.
    pub rise: u32,
    /// Consecutive failures that take a confirmed backend down.
    pub fall: u32,
    /// With every backend down, use them all anyway. ELBv2 Network Load Balancers do this
    /// ("if all targets fail health checks at the same time in all enabled Availability
    /// Zones, the load balancer fails open": AWS docs, NLB target group health checks);
    /// Octavia does not.
    pub fail_open: bool,
}

/// A backend's health as a cloud reports it (Octavia member `operating_status` words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum MemberStatus {
    /// No health check: always used.
    #[serde(rename = "NO_MONITOR")]
    NoMonitor,
    #[serde(rename = "ONLINE")]
    Online,
    #[serde(rename = "ERROR")]
    Error,
}

impl MemberStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberStatus::NoMonitor => "NO_MONITOR",
            MemberStatus::Online => "ONLINE",
            MemberStatus::Error => "ERROR",
        }
    }
}

/// One backend: where traffic goes, and where health probes go if elsewhere (Octavia
/// member `monitor_address`/`monitor_port`; CPO points the monitor of an
/// `externalTrafficPolicy: Local` Service at the healthCheckNodePort,
/// cloud-provider-openstack `pkg/openstack/loadbalancer.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backend {
    pub address: SocketAddr,
    pub monitor: Option<SocketAddr>,
}

impl From<SocketAddr> for Backend {
    fn from(address: SocketAddr) -> Self {
        Backend {
            address,
            monitor: None,
        }
    }
}

/// What a proxy is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    pub protocol: Protocol,
    /// `vip:port`; port 0 picks a free port ([`Proxy::local_addr`] tells which).
    pub listen: SocketAddr,
    pub backends: Vec<Backend>,
    /// Client source prefixes allowed in; empty allows everyone.
    pub allowed_cidrs: Vec<Cidr>,
    pub health: Option<HealthCheck>,
}

#[derive(Debug, Clone)]
struct BackendState {
    addr: SocketAddr,
    /// Where probes go (Octavia `monitor_address`/`monitor_port`); `addr` if `None`.
    monitor: Option<SocketAddr>,
    healthy: bool,
    /// Whether a probe has succeeded since the backend was added (HAProxy `init-state up`:
    /// until then one failure is enough to take it down).
    confirmed: bool,
    successes: u32,
    failures: u32,
}

impl BackendState {
    fn new(addr: SocketAddr, monitor: Option<SocketAddr>) -> Self {
        BackendState {
            addr,
            monitor,
            healthy: true,
            confirmed: false,
            successes: 0,
            failures: 0,
        }
    }

    /// Applies one probe result; returns whether the health changed.
    fn record(&mut self, up: bool, health: &HealthCheck) -> bool {
        let before = self.healthy;
        if up {
            self.failures = 0;
            self.successes = self.successes.saturating_add(1);
            if !self.healthy && self.successes >= health.rise.max(1) {
                self.healthy = true;
            }
            if self.healthy {
                self.confirmed = true;
            }
        } else {
            self.successes = 0;
            self.failures = self.failures.saturating_add(1);
            if self.healthy && (!self.confirmed || self.failures >= health.fall.max(1)) {
                self.healthy = false;
            }
        }
        before != self.healthy
    }
}

#[derive(Debug)]
struct Inner {
    backends: Vec<BackendState>,
    allowed: Vec<Cidr>,
    health: Option<HealthCheck>,
    next: usize,
}

impl Inner {
    /// The healthy backends; all of them when none is healthy and the check fails open.
    fn usable(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        let fail_open = self.health.as_ref().is_some_and(|h| h.fail_open)
            && !self.backends.iter().any(|b| b.healthy);
        self.backends
            .iter()
            .filter(move |b| b.healthy || fail_open)
            .map(|b| b.addr)
    }
}

/// What a proxy's tasks share.
#[derive(Debug)]
struct State {
    inner: Mutex<Inner>,
    /// Wakes the health task when the configuration changed.
    reconfigured: Notify,
    /// Bumped whenever a backend's status changes (tests and callers wait on it).
    statuses: watch::Sender<u64>,
    /// When a client last connected (TCP) or sent a datagram (UDP).
    last_traffic: Mutex<Option<Instant>>,
}

impl State {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn allowed(&self, client: IpAddr) -> bool {
        let inner = self.lock();
        inner.allowed.is_empty() || inner.allowed.iter().any(|c| c.contains(client))
    }

    /// Whether traffic may go to `backend`: it is healthy, or every backend is down and
    /// the check fails open.
    fn is_usable(&self, backend: SocketAddr) -> bool {
        let inner = self.lock();
        inner.usable().any(|b| b == backend)
    }

    /// The next usable backend, round robin.
    fn pick(&self) -> Option<SocketAddr> {
        let mut inner = self.lock();
        let healthy: Vec<SocketAddr> = inner.usable().collect();
        if healthy.is_empty() {
            return None;
        }
        let chosen = healthy[inner.next % healthy.len()];
        inner.next = inner.next.wrapping_add(1);
        Some(chosen)
    }

    fn bump(&self) {
        self.statuses.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Notes client traffic; the first after an idle spell wakes the health task so the
    /// backends are probed at once instead of at the end of a backed-off period.
    fn touch(&self) {
        let now = Instant::now();
        let was_idle = {
            let mut last = self
                .last_traffic
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let idle = last.is_none_or(|t| now.duration_since(t) >= IDLE_AFTER);
            *last = Some(now);
            idle
        };
        if was_idle {
            self.reconfigured.notify_one();
        }
    }

    /// A request failed at a backend: probe now rather than at the end of a backed-off
    /// period, so a backend that went down stops getting traffic within one probe.
    fn suspect(&self) {
        self.reconfigured.notify_one();
    }

    fn idle(&self) -> bool {
        self.last_traffic
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_none_or(|t| t.elapsed() >= IDLE_AFTER)
    }
}

/// The wait before the next probe round: the check's interval right after something
/// changed, doubled per round that changed nothing — up to [`BUSY_MAX_DOUBLINGS`] while
/// clients use the proxy, [`IDLE_MAX_DOUBLINGS`] while it is idle — and never beyond
/// [`IDLE_MAX_PERIOD`] (unless the interval itself is longer). A cloud probes every backend
/// of every load balancer at its interval whether or not anyone connects; a mock serving
/// 100 load balancers over 50 nodes on two cores cannot (5,000 distinct node ports at
/// 200 ms is 25,000 connects/s, measured as the largest cost of the LB benchmark on AWS).
/// What a client sees stays close: the first client after an idle spell, and any request
/// a backend refused or left unanswered, start a probe round at once at the base interval.
fn probe_period(interval: Duration, quiet_rounds: u32, idle: bool) -> Duration {
    let base = interval.max(MIN_INTERVAL);
    let doublings = if idle {
        IDLE_MAX_DOUBLINGS
    } else {
        BUSY_MAX_DOUBLINGS
    };
    let grown = base.saturating_mul(1 << quiet_rounds.min(doublings));
    grown.min(IDLE_MAX_PERIOD.max(base))
}

/// A running proxy. See the module docs.
#[derive(Debug)]
pub struct Proxy {
    protocol: Protocol,
    local: SocketAddr,
    state: Arc<State>,
    tasks: Vec<JoinHandle<()>>,
}

impl Proxy {
    /// Binds `config.listen` and starts serving (and health checking, if configured).
    pub async fn start(config: ProxyConfig) -> Result<Proxy, DataplaneError> {
        let bind_error = |source| DataplaneError::Bind {
            protocol: config.protocol,
            addr: config.listen,
            source,
        };
        let state = Arc::new(State {
            inner: Mutex::new(Inner {
                backends: dedup(&config.backends)
                    .into_iter()
                    .map(|b| BackendState::new(b.address, b.monitor))
                    .collect(),
                allowed: config.allowed_cidrs.clone(),
                health: config.health.clone(),
                next: 0,
            }),
            reconfigured: Notify::new(),
            statuses: watch::channel(0).0,
            last_traffic: Mutex::new(None),
        });
        let (serve, local) = match config.protocol {
            Protocol::Tcp => {
                let listener = TcpListener::bind(config.listen).await.map_err(bind_error)?;
                let local = listener.local_addr().map_err(bind_error)?;
                (
                    tokio::spawn(tracing::Instrument::in_current_span(serve_tcp(
                        listener,
                        state.clone(),
                    ))),
                    local,
                )
            }
            Protocol::Udp => {
                let socket = UdpSocket::bind(config.listen).await.map_err(bind_error)?;
                let local = socket.local_addr().map_err(bind_error)?;
                (
                    tokio::spawn(tracing::Instrument::in_current_span(serve_udp(
                        Arc::new(socket),
                        state.clone(),
                    ))),
                    local,
                )
            }
        };
        let health = tokio::spawn(tracing::Instrument::in_current_span(health_loop(
            state.clone(),
        )));
        tracing::debug!(protocol = %config.protocol, %local, "data plane proxy started");
        Ok(Proxy {
            protocol: config.protocol,
            local,
            state,
            tasks: vec![serve, health],
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Replaces the backends and allowed client prefixes. Backends that stay keep their
    /// health; new ones start up (unconfirmed). Open connections are left alone.
    pub fn update(&self, backends: &[Backend], allowed_cidrs: &[Cidr]) {
        {
            let mut inner = self.state.lock();
            let old = std::mem::take(&mut inner.backends);
            inner.backends = dedup(backends)
                .into_iter()
                .map(|b| {
                    old.iter()
                        .find(|o| o.addr == b.address && o.monitor == b.monitor)
                        .cloned()
                        .unwrap_or_else(|| BackendState::new(b.address, b.monitor))
                })
                .collect();
            inner.allowed = allowed_cidrs.to_vec();
        }
        self.state.bump();
        self.state.reconfigured.notify_one();
    }

    /// Sets or removes the health check. A new or changed check starts every backend afresh.
    pub fn set_health_check(&self, health: Option<HealthCheck>) {
        {
            let mut inner = self.state.lock();
            if inner.health == health {
                return;
            }
            inner.health = health;
            for b in &mut inner.backends {
                *b = BackendState::new(b.addr, b.monitor);
            }
        }
        self.state.bump();
        self.state.reconfigured.notify_one();
    }

    /// Every backend with its status, in configuration order.
    pub fn statuses(&self) -> Vec<(SocketAddr, MemberStatus)> {
        let inner = self.state.lock();
        let monitored = inner.health.is_some();
        inner
            .backends
            .iter()
            .map(|b| (b.addr, status_of(b, monitored)))
            .collect()
    }

    /// One backend's status, `None` if it is not a backend.
    pub fn status(&self, backend: SocketAddr) -> Option<MemberStatus> {
        let inner = self.state.lock();
        let monitored = inner.health.is_some();
        inner
            .backends
            .iter()
            .find(|b| b.addr == backend)
            .map(|b| status_of(b, monitored))
    }

    /// Waits until `backend` has `status`, at most `timeout`; returns whether it did.
    pub async fn wait_for_status(
        &self,
        backend: SocketAddr,
        status: MemberStatus,
        timeout: Duration,
    ) -> bool {
        let mut changes = self.state.statuses.subscribe();
        let reached = async {
            loop {
                if self.status(backend) == Some(status) {
                    return;
                }
                if changes.changed().await.is_err() {
                    // The sender lives in `self.state`; this cannot happen while we hold it.
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, reached).await.is_ok()
    }

    /// Stops serving and probing; when this returns the sockets are closed.
    pub async fn stop(mut self) {
        let tasks = std::mem::take(&mut self.tasks);
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
        tracing::debug!(protocol = %self.protocol, local = %self.local, "data plane proxy stopped");
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn status_of(b: &BackendState, monitored: bool) -> MemberStatus {
    match (monitored, b.healthy) {
        (false, _) => MemberStatus::NoMonitor,
        (true, true) => MemberStatus::Online,
        (true, false) => MemberStatus::Error,
    }
}

/// The backends with the first of each traffic address.
fn dedup(backends: &[Backend]) -> Vec<Backend> {
    let mut out: Vec<Backend> = Vec::with_capacity(backends.len());
    for b in backends {
        if !out.iter().any(|o| o.address == b.address) {
            out.push(*b);
        }
    }
    out
}

// ---- TCP --------------------------------------------------------------------------

async fn serve_tcp(listener: TcpListener, state: Arc<State>) {
    // Connection tasks live in this set, so aborting the server task ends them too.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    if connections.len() >= MAX_CONNECTIONS {
                        tracing::warn!(%peer, "data plane: too many connections, closing");
                        continue;
                    }
                    connections.spawn(proxy_connection(client, peer, state.clone()));
                }
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "data plane: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn proxy_connection(mut client: TcpStream, peer: SocketAddr, state: Arc<State>) {
    if !state.allowed(peer.ip()) {
        tracing::debug!(%peer, "data plane: client not in allowed CIDRs, closing");
        return;
    }
    state.touch();
    let Some(backend) = state.pick() else {
        tracing::debug!(%peer, "data plane: no healthy backend, closing");
        return;
    };
    let mut upstream =
        match tokio::time::timeout(BACKEND_CONNECT_TIMEOUT, TcpStream::connect(backend)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(%peer, %backend, error = %e, "data plane: backend refused");
                state.suspect();
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, %backend, "data plane: backend connect timed out");
                state.suspect();
                return;
            }
        };
    // A backend that closes without a byte (kube-proxy dropping for want of a local
    // endpoint) is as suspect as one that refuses.
    if let Ok((_, 0)) | Err(_) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        state.suspect();
    }
}

// ---- UDP --------------------------------------------------------------------------

struct Flow {
    backend: SocketAddr,
    upstream: Arc<UdpSocket>,
    relay: AbortHandle,
}

fn unspecified_like(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    }
}

async fn serve_udp(socket: Arc<UdpSocket>, state: Arc<State>) {
    let mut flows: HashMap<SocketAddr, Flow> = HashMap::new();
    // Reply relays; each returns its client address when its flow goes idle.
    let mut relays: JoinSet<SocketAddr> = JoinSet::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        tokio::select! {
            received = socket.recv_from(&mut buf) => {
                // Errors here are ICMP reports for earlier sends; nothing to do.
                let Ok((n, peer)) = received else { continue };
                if !state.allowed(peer.ip()) {
                    continue;
                }
                state.touch();
                // A flow sticks to its backend while that backend is usable.
                let stale = flows.get(&peer).is_some_and(|f| !state.is_usable(f.backend));
                if stale && let Some(old) = flows.remove(&peer) {
                    old.relay.abort();
                }
                if !flows.contains_key(&peer) {
                    if flows.len() >= MAX_UDP_FLOWS {
                        continue;
                    }
                    let Some(backend) = state.pick() else { continue };
                    let Some(upstream) = connect_udp(backend).await else { continue };
                    let relay = relays.spawn(relay_replies(upstream.clone(), socket.clone(), peer));
                    flows.insert(peer, Flow { backend, upstream, relay });
                }
                if let Some(flow) = flows.get(&peer) {
                    let _ = flow.upstream.send(&buf[..n]).await;
                }
            }
            Some(done) = relays.join_next(), if !relays.is_empty() => {
                if let Ok(peer) = done {
                    flows.remove(&peer);
                }
            }
        }
    }
}

async fn connect_udp(backend: SocketAddr) -> Option<Arc<UdpSocket>> {
    let socket = UdpSocket::bind(unspecified_like(backend)).await.ok()?;
    socket.connect(backend).await.ok()?;
    Some(Arc::new(socket))
}

async fn relay_replies(
    upstream: Arc<UdpSocket>,
    front: Arc<UdpSocket>,
    client: SocketAddr,
) -> SocketAddr {
    let mut buf = vec![0u8; 65_536];
    loop {
        match tokio::time::timeout(UDP_FLOW_IDLE, upstream.recv(&mut buf)).await {
            Ok(Ok(n)) => {
                let _ = front.send_to(&buf[..n], client).await;
            }
            // "Port unreachable" from the backend: keep the flow, the client may retry.
            Ok(Err(_)) => {}
            Err(_) => return client,
        }
    }
}

// ---- health checks ----------------------------------------------------------------

async fn health_loop(state: Arc<State>) {
    // Probe rounds in a row that changed nothing and were not woken by a change.
    let mut quiet_rounds = 0u32;
    loop {
        let (targets, health) = {
            let inner = state.lock();
            let targets: Vec<(SocketAddr, SocketAddr)> = inner
                .backends
                .iter()
                .map(|b| (b.addr, b.monitor.unwrap_or(b.addr)))
                .collect();
            (targets, inner.health.clone())
        };
        let Some(health) = health else {
            state.reconfigured.notified().await;
            continue;
        };
        let mut probes = JoinSet::new();
        let fresh_for = health.interval.max(MIN_INTERVAL) / 2;
        for (addr, target) in targets {
            let (probe, timeout) = (health.probe.clone(), health.timeout);
            probes.spawn(
                async move { (addr, shared_probe(&probe, target, timeout, fresh_for).await) },
            );
        }
        let mut results = Vec::new();
        while let Some(done) = probes.join_next().await {
            if let Ok(result) = done {
                results.push(result);
            }
        }
        let changed = {
            let mut inner = state.lock();
            // The configuration may have changed while probing; apply only to the same check.
            let same_check = inner.health.as_ref() == Some(&health);
            let mut changed = false;
            for (addr, up) in results.into_iter().filter(|_| same_check) {
                if let Some(b) = inner.backends.iter_mut().find(|b| b.addr == addr)
                    && b.record(up, &health)
                {
                    tracing::debug!(backend = %addr, healthy = b.healthy, "data plane: backend health changed");
                    changed = true;
                }
            }
            changed
        };
        if changed {
            state.bump();
            quiet_rounds = 0;
        } else {
            quiet_rounds = quiet_rounds.saturating_add(1);
        }
        let period = probe_period(health.interval, quiet_rounds, state.idle());
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = state.reconfigured.notified() => quiet_rounds = 0,
        }
    }
}

/// Recent probe results by (probe, address), shared by every proxy in the process, and
/// when the cache was last pruned.
#[derive(Default)]
struct ProbeCache {
    results: HashMap<(String, SocketAddr), (Instant, bool)>,
    pruned: Option<Instant>,
}
static RECENT_PROBES: std::sync::OnceLock<Mutex<ProbeCache>> = std::sync::OnceLock::new();
/// Results older than this are dropped, at most once per this period.
const CACHE_PRUNE_AGE: Duration = Duration::from_secs(10);

/// [`run_probe`], unless the same probe of the same address finished less than
/// `fresh_for` ago (for another load balancer with the same backend): then its result.
/// A cloud checks each backend of each load balancer, but a mock with 100 load balancers
/// over the same 50 node ports would otherwise spend its CPU connecting to them (measured:
/// ~30,000 connects/s in the LB benchmark); the answer is the same within half an interval.
async fn shared_probe(
    probe: &Probe,
    addr: SocketAddr,
    timeout: Duration,
    fresh_for: Duration,
) -> bool {
    let cache = RECENT_PROBES.get_or_init(Default::default);
    let key = (format!("{probe:?}"), addr);
    let lock = || cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, up)) = lock().results.get(&key)
        && at.elapsed() < fresh_for
    {
        return *up;
    }
    let up = run_probe(probe, addr, timeout).await;
    let mut cache = lock();
    let now = Instant::now();
    if cache
        .pruned
        .is_none_or(|at| now.duration_since(at) > CACHE_PRUNE_AGE)
    {
        cache
            .results
            .retain(|_, (at, _)| now.duration_since(*at) < CACHE_PRUNE_AGE);
        cache.pruned = Some(now);
    }
    cache.results.insert(key, (now, up));
    up
}

/// One probe, bounded by `timeout`; true means up.
async fn run_probe(probe: &Probe, addr: SocketAddr, timeout: Duration) -> bool {
    let attempt = async {
        match probe {
            // Connect, then close with a reset as HAProxy's checks do (`nolinger`): no
            // FIN exchange and no TIME_WAIT, which at thousands of probes a second on
            // loopback was most of the mock's kernel time (`bench lb`).
            Probe::Tcp => match TcpStream::connect(addr).await {
                Ok(stream) => {
                    let _ = stream.set_zero_linger();
                    true
                }
                Err(_) => false,
            },
            Probe::Http { path, expected } => http_probe(addr, path, expected).await,
            // Silence until the timeout counts as up, so it bounds itself.
            Probe::Udp => udp_probe(addr, timeout).await,
        }
    };
    match probe {
        Probe::Udp => attempt.await,
        _ => tokio::time::timeout(timeout, attempt)
            .await
            .unwrap_or(false),
    }
}

#[cfg(test)]
mod period_tests {
    use super::*;

    #[test]
    fn idle_proxies_back_off_and_busy_ones_keep_the_interval() {
        let base = Duration::from_millis(200);
        assert_eq!(probe_period(base, 0, true), base);
        assert_eq!(probe_period(base, 0, false), base);
        assert_eq!(
            probe_period(base, 5, false),
            base * 2,
            "traffic: one doubling"
        );
        assert_eq!(probe_period(base, 1, true), base * 2);
        assert_eq!(probe_period(base, 2, true), base * 4);
        assert_eq!(
            probe_period(base, 9, true),
            base * 8,
            "at most three doublings"
        );
        let slow = Duration::from_millis(500);
        assert_eq!(
            probe_period(slow, 9, true),
            IDLE_MAX_PERIOD,
            "capped at 2 s"
        );
        let slower = Duration::from_secs(5);
        assert_eq!(
            probe_period(slower, 9, true),
            slower,
            "never below the interval"
        );
    }
}

async fn http_probe(addr: SocketAddr, path: &str, expected: &ExpectedCodes) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return false;
    };
    let path = if path.starts_with('/') { path } else { "/" };
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nUser-Agent: mock-lb-health\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = Vec::new();
    let mut chunk = [0u8; 256];
    while !head.windows(2).any(|w| w == b"\r\n") && head.len() < MAX_STATUS_LINE {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    parse_status(&head).is_some_and(|code| expected.accepts(code))
}

/// The status code of an HTTP/1.x status line.
fn parse_status(head: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(head.split(|b| *b == b'\r').next()?).ok()?;
    let mut parts = text.split_whitespace();
    if !parts.next()?.starts_with("HTTP/") {
        return None;
    }
    parts.next()?.parse().ok()
}

async fn udp_probe(addr: SocketAddr, timeout: Duration) -> bool {
    let Some(socket) = connect_udp(addr).await else {
        return false;
    };
    if socket.send(b"\n").await.is_err() {
        return false;
    }
    let mut buf = [0u8; 512];
    match tokio::time::timeout(timeout, socket.recv(&mut buf)).await {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => e.kind() != io::ErrorKind::ConnectionRefused,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests;
