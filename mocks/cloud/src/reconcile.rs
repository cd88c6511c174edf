//! The data plane's reconciler: one task per mock that keeps the running [`Proxy`]s equal
//! to what the cloud's model says should be served. Each pass asks the mock's
//! [`Planner`] for the wanted listeners (keyed), stops the proxies no longer wanted,
//! updates those whose plan changed and starts the new ones; a listener that cannot bind
//! (its port held by someone else) is retried every pass and logged once per error. It
//! runs when a request wakes it ([`Wake`], rung by the request gate) and every `period`
//! (for time-based lifecycles). The mock supplies only the plan (and, if it shows the
//! proxies' health in its API, [`Planner::observe`]).

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::dataplane::{Backend, Cidr, HealthCheck, Protocol, Proxy, ProxyConfig};
use crate::gate::Wake;

/// One listener the data plane should serve.
pub trait Listener: Clone + PartialEq + Send + Sync + 'static {
    /// What identifies the listener across plans (one proxy per key).
    type Key: Eq + Hash + Clone + Debug + Send + Sync + 'static;

    fn key(&self) -> Self::Key;

    /// The proxy that serves it (protocol and address are read at start only; backends,
    /// allowed CIDRs and the health check are updated in place).
    fn config(&self) -> ProxyConfig;
}

/// The plain listener of a load-balancing rule, keyed by rule, address and protocol: the
/// plan of mocks whose rules carry everything the proxy needs (Azure's LB rules, GCE's
/// forwarding rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleListener {
    /// The rule's name, as the mock spells it in logs (`lb/rule`, the forwarding rule).
    pub rule: String,
    pub protocol: Protocol,
    pub listen: std::net::SocketAddr,
    pub backends: Vec<Backend>,
    pub allowed: Vec<Cidr>,
    pub health: Option<HealthCheck>,
}

impl Listener for RuleListener {
    type Key = (String, std::net::SocketAddr, Protocol);

    fn key(&self) -> Self::Key {
        (self.rule.clone(), self.listen, self.protocol)
    }

    fn config(&self) -> ProxyConfig {
        ProxyConfig {
            protocol: self.protocol,
            listen: self.listen,
            backends: self.backends.clone(),
            allowed_cidrs: self.allowed.clone(),
            health: self.health.clone(),
        }
    }
}

/// What a mock supplies to the reconciler.
pub trait Planner: Send + 'static {
    type Listener: Listener;

    /// A name for the logs (`"data plane"`, `"elb data plane"`).
    const LABEL: &'static str = "data plane";

    /// What should be served now, or `None` when nothing changed since the last plan (the
    /// running proxies stay as they are). `retrying` is true while some listener could
    /// not be started, so the plan must be given again.
    fn plan(&mut self, retrying: bool) -> Option<Vec<Self::Listener>>;

    /// After every pass, with each running listener and its proxy (e.g. to write member
    /// health back into the model).
    fn observe(&mut self, _running: &[(&Self::Listener, &Proxy)]) {}
}

/// The reconciler task; stopping (or dropping) it stops every proxy.
pub struct Reconciler {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Reconciler {
    /// Starts the task: a pass now, then on every wake-up and every `period`.
    pub fn start<P: Planner>(planner: P, wake: Arc<Wake>, period: Duration) -> Reconciler {
        let (stop, stopped) = oneshot::channel();
        // The task carries the caller's span: its log lines belong to the caller's case.
        let task = tokio::spawn(tracing::Instrument::in_current_span(run(
            planner, wake, period, stopped,
        )));
        Reconciler {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the reconciler and every proxy; their sockets are closed when this returns.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Reconciler {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A running proxy and the plan it was last given.
struct Running<L> {
    plan: L,
    proxy: Proxy,
}

/// The proxies and the last start error per key (so a held port is logged once).
struct State<L: Listener> {
    running: HashMap<L::Key, Running<L>>,
    failures: HashMap<L::Key, String>,
}

async fn run<P: Planner>(
    mut planner: P,
    wake: Arc<Wake>,
    period: Duration,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut state = State::<P::Listener> {
        running: HashMap::new(),
        failures: HashMap::new(),
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            _ = tick.tick() => {}
            _ = wake.notified() => {}
        }
        if let Some(plans) = planner.plan(!state.failures.is_empty()) {
            apply::<P>(plans, &mut state).await;
        }
        let running: Vec<(&P::Listener, &Proxy)> = state
            .running
            .values()
            .map(|r| (&r.plan, &r.proxy))
            .collect();
        planner.observe(&running);
    }
    for (_, r) in state.running.drain() {
        r.proxy.stop().await;
    }
}

/// Starts, updates and stops proxies to match `plans`.
async fn apply<P: Planner>(plans: Vec<P::Listener>, state: &mut State<P::Listener>) {
    let label = P::LABEL;
    let wanted: HashMap<_, _> = plans.into_iter().map(|p| (p.key(), p)).collect();
    let gone: Vec<_> = state
        .running
        .keys()
        .filter(|k| !wanted.contains_key(*k))
        .cloned()
        .collect();
    for k in gone {
        if let Some(r) = state.running.remove(&k) {
            tracing::info!(listener = ?k, "{label}: listener stopped");
            r.proxy.stop().await;
        }
    }
    state.failures.retain(|k, _| wanted.contains_key(k));
    for (k, plan) in wanted {
        match state.running.get_mut(&k) {
            Some(r) if r.plan == plan => {}
            Some(r) => {
                let config = plan.config();
                r.proxy.update(&config.backends, &config.allowed_cidrs);
                r.proxy.set_health_check(config.health);
                r.plan = plan;
            }
            None => match Proxy::start(plan.config()).await {
                Ok(proxy) => {
                    tracing::info!(listener = ?k, listen = %proxy.local_addr(), "{label}: listener serving");
                    state.failures.remove(&k);
                    state.running.insert(k, Running { plan, proxy });
                }
                Err(e) => {
                    let message = e.to_string();
                    if state.failures.get(&k) != Some(&message) {
                        tracing::warn!(listener = ?k, error = %message, "{label}: cannot serve listener; retrying");
                        state.failures.insert(k, message);
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Mutex;

    use super::*;
    use crate::dataplane::{Backend, Protocol};

    #[derive(Debug, Clone, PartialEq)]
    struct Plan {
        listen: SocketAddr,
        backends: Vec<Backend>,
    }

    impl Listener for Plan {
        type Key = SocketAddr;

        fn key(&self) -> SocketAddr {
            self.listen
        }

        fn config(&self) -> ProxyConfig {
            ProxyConfig {
                protocol: Protocol::Tcp,
                listen: self.listen,
                backends: self.backends.clone(),
                allowed_cidrs: Vec::new(),
                health: None,
            }
        }
    }

    /// Plans what the test puts in `wanted`; counts passes and records what it observed.
    #[derive(Clone, Default)]
    struct Toy {
        wanted: Arc<Mutex<Option<Vec<Plan>>>>,
        retried: Arc<Mutex<bool>>,
        observed: Arc<Mutex<Vec<SocketAddr>>>,
    }

    impl Planner for Toy {
        type Listener = Plan;

        fn plan(&mut self, retrying: bool) -> Option<Vec<Plan>> {
            if retrying {
                *self.retried.lock().expect("lock") = true;
            }
            self.wanted.lock().expect("lock").clone()
        }

        fn observe(&mut self, running: &[(&Plan, &Proxy)]) {
            *self.observed.lock().expect("lock") = running.iter().map(|(p, _)| p.listen).collect();
        }
    }

    fn free_port() -> SocketAddr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    }

    async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !f() {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn starts_updates_and_stops_proxies_as_planned() {
        let toy = Toy::default();
        let wake = Arc::new(Wake::new());
        // A long period: only wake-ups drive it.
        let r = Reconciler::start(toy.clone(), wake.clone(), Duration::from_secs(3600));
        let listen = free_port();
        let plan = Plan {
            listen,
            backends: Vec::new(),
        };
        *toy.wanted.lock().expect("lock") = Some(vec![plan.clone()]);
        wake.changed();
        eventually("listener serving", || {
            toy.observed.lock().expect("lock").as_slice() == [listen]
        })
        .await;
        assert!(tokio::net::TcpStream::connect(listen).await.is_ok());

        // `None`: nothing changed, the proxy stays.
        *toy.wanted.lock().expect("lock") = None;
        wake.changed();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(tokio::net::TcpStream::connect(listen).await.is_ok());

        // An update keeps the proxy (same key) and the observer sees the new plan.
        let backend = Backend::from(free_port());
        *toy.wanted.lock().expect("lock") = Some(vec![Plan {
            listen,
            backends: vec![backend],
        }]);
        wake.changed();
        eventually("still one", || {
            toy.observed.lock().expect("lock").len() == 1
        })
        .await;

        *toy.wanted.lock().expect("lock") = Some(Vec::new());
        wake.changed();
        eventually("listener stopped", || {
            toy.observed.lock().expect("lock").is_empty()
        })
        .await;
        r.shutdown().await;
    }

    #[tokio::test]
    async fn a_held_port_is_retried_with_retrying_set() {
        let toy = Toy::default();
        let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let listen = held.local_addr().expect("addr");
        *toy.wanted.lock().expect("lock") = Some(vec![Plan {
            listen,
            backends: Vec::new(),
        }]);
        let r = Reconciler::start(
            toy.clone(),
            Arc::new(Wake::new()),
            Duration::from_millis(10),
        );
        eventually("retrying", || *toy.retried.lock().expect("lock")).await;
        assert!(toy.observed.lock().expect("lock").is_empty());
        drop(held);
        eventually("serving once free", || {
            toy.observed.lock().expect("lock").as_slice() == [listen]
        })
        .await;
        r.shutdown().await;
        assert!(
            tokio::net::TcpStream::connect(listen).await.is_err(),
            "stopped"
        );
    }
}
