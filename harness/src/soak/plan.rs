//! The soak's workload, decided before it runs: a list of [`Step`]s drawn from one seeded
//! generator over the harness's own model of the cluster (which Services exist and of what
//! type, which nodes are up), never from what the API server or the cloud answer. So the
//! same seed and sizes always give the same list, whatever the CCM does with it — the
//! replay guarantee `--seed` makes ([`Plan::digest`] shows it in one line).
//!
//! Kills are placed right after a Service delete or update (the CCM is mid-delete or
//! mid-update when it dies), as well as at random.

use std::collections::BTreeMap;

/// One thing the workload does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    /// Create Service `name` of type LoadBalancer.
    CreateService(String),
    /// Move the Service's port between 8080 and 8081.
    ChangePort(String),
    /// Set (or clear) `loadBalancerSourceRanges` to the loopback range the harness's
    /// clients come from, so traffic still gets through.
    ToggleSourceRanges(String),
    /// `externalTrafficPolicy` Cluster <-> Local.
    ToggleTrafficPolicy(String),
    /// `type` LoadBalancer <-> ClusterIP.
    ToggleType(String),
    DeleteService(String),
    /// A new node: its instance in the cloud, then its kubelet.
    AddNode(String),
    /// The node's kubelet reports NotReady (`ready: false`) or Ready again.
    SetReady(String, bool),
    /// The node's instance is deleted in the cloud (its kubelet stops and reports
    /// NotReady first, as a VM that is gone does): the lifecycle controller should delete
    /// the Node.
    DeleteInstance(String),
    /// `kill -9` of the CCM, then a restart.
    KillCcm,
    /// The API server restarts from its data.
    RestartApiServer,
}

impl Step {
    /// A short label for progress lines and the plan's digest.
    pub fn label(&self) -> String {
        match self {
            Step::CreateService(n) => format!("create {n}"),
            Step::ChangePort(n) => format!("port {n}"),
            Step::ToggleSourceRanges(n) => format!("source-ranges {n}"),
            Step::ToggleTrafficPolicy(n) => format!("etp {n}"),
            Step::ToggleType(n) => format!("type {n}"),
            Step::DeleteService(n) => format!("delete {n}"),
            Step::AddNode(n) => format!("add-node {n}"),
            Step::SetReady(n, r) => format!("ready={r} {n}"),
            Step::DeleteInstance(n) => format!("delete-instance {n}"),
            Step::KillCcm => "kill-ccm".into(),
            Step::RestartApiServer => "restart-apiserver".into(),
        }
    }
}

/// Sizes and switches the plan is drawn under.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSpec {
    pub seed: u64,
    pub steps: usize,
    /// At most this many Services exist at once.
    pub services: usize,
    /// Nodes at the start; the plan adds and deletes around this number (never below 1
    /// Ready node, never above twice it).
    pub nodes: usize,
    /// Whether Service steps are drawn at all (not where the cloud has no load balancers).
    pub load_balancers: bool,
    /// Chance per step of a `kill -9` (besides the ones after a delete or update).
    pub kill_rate: f64,
    /// Chance per step of an API server restart.
    pub restart_rate: f64,
}

/// The drawn workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    LoadBalancer,
    ClusterIp,
}

impl Plan {
    /// The names of the nodes a soak starts with (`node-000` …).
    pub fn initial_nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node-{i:03}")).collect()
    }

    pub fn draw(spec: &PlanSpec) -> Plan {
        let mut rng = fastrand::Rng::with_seed(spec.seed);
        let mut services: BTreeMap<String, Kind> = BTreeMap::new();
        // Node name -> Ready; nodes whose instance is gone are removed.
        let mut nodes: BTreeMap<String, bool> = Plan::initial_nodes(spec.nodes)
            .into_iter()
            .map(|n| (n, true))
            .collect();
        let (mut next_service, mut next_node) = (0usize, spec.nodes);
        let mut steps = Vec::with_capacity(spec.steps);
        while steps.len() < spec.steps {
            let step = if spec.load_balancers && rng.f64() < 0.7 {
                let pick = |rng: &mut fastrand::Rng, services: &BTreeMap<String, Kind>| {
                    let names: Vec<&String> = services.keys().collect();
                    (!names.is_empty()).then(|| names[rng.usize(..names.len())].clone())
                };
                match (rng.u8(..10), pick(&mut rng, &services)) {
                    (0..=2, _) | (_, None) if services.len() < spec.services => {
                        let name = format!("svc-{next_service:03}");
                        next_service += 1;
                        services.insert(name.clone(), Kind::LoadBalancer);
                        Step::CreateService(name)
                    }
                    (_, None) => continue,
                    (3, Some(n)) => Step::ChangePort(n),
                    (4, Some(n)) => Step::ToggleSourceRanges(n),
                    (5, Some(n)) => Step::ToggleTrafficPolicy(n),
                    (6, Some(n)) => {
                        let kind = services.get_mut(&n).expect("picked from the map");
                        *kind = match kind {
                            Kind::LoadBalancer => Kind::ClusterIp,
                            Kind::ClusterIp => Kind::LoadBalancer,
                        };
                        Step::ToggleType(n)
                    }
                    (_, Some(n)) => {
                        services.remove(&n);
                        Step::DeleteService(n)
                    }
                }
            } else {
                let ready: Vec<String> = nodes
                    .iter()
                    .filter(|(_, r)| **r)
                    .map(|(n, _)| n.clone())
                    .collect();
                let not_ready: Vec<String> = nodes
                    .iter()
                    .filter(|(_, r)| !**r)
                    .map(|(n, _)| n.clone())
                    .collect();
                match rng.u8(..4) {
                    0 if nodes.len() < spec.nodes.max(1) * 2 => {
                        let name = format!("node-{next_node:03}");
                        next_node += 1;
                        nodes.insert(name.clone(), true);
                        Step::AddNode(name)
                    }
                    1 if ready.len() > 1 => {
                        let n = ready[rng.usize(..ready.len())].clone();
                        nodes.insert(n.clone(), false);
                        Step::SetReady(n, false)
                    }
                    2 if !not_ready.is_empty() => {
                        let n = not_ready[rng.usize(..not_ready.len())].clone();
                        nodes.insert(n.clone(), true);
                        Step::SetReady(n, true)
                    }
                    3 if ready.len() > 1 => {
                        let n = ready[rng.usize(..ready.len())].clone();
                        nodes.remove(&n);
                        Step::DeleteInstance(n)
                    }
                    _ => continue,
                }
            };
            let mid_change = matches!(
                step,
                Step::DeleteService(_) | Step::ChangePort(_) | Step::ToggleType(_)
            );
            steps.push(step);
            let roll = rng.f64();
            if (mid_change && roll < spec.kill_rate * 3.0) || roll < spec.kill_rate {
                steps.push(Step::KillCcm);
            } else if rng.f64() < spec.restart_rate {
                steps.push(Step::RestartApiServer);
            }
        }
        steps.truncate(spec.steps);
        Plan { steps }
    }

    /// A stable digest of the steps (FNV-1a over their labels): two runs with the same
    /// seed and sizes print the same one.
    pub fn digest(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for s in &self.steps {
            for b in s.label().bytes().chain(std::iter::once(b'\n')) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        format!("{h:016x}")
    }

    pub fn count(&self, pred: impl Fn(&Step) -> bool) -> usize {
        self.steps.iter().filter(|s| pred(s)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64) -> PlanSpec {
        PlanSpec {
            seed,
            steps: 400,
            services: 10,
            nodes: 4,
            load_balancers: true,
            kill_rate: 0.02,
            restart_rate: 0.01,
        }
    }

    #[test]
    fn the_same_seed_draws_the_same_plan_and_another_seed_another() {
        let a = Plan::draw(&spec(7));
        assert_eq!(a, Plan::draw(&spec(7)));
        assert_eq!(a.digest(), Plan::draw(&spec(7)).digest());
        assert_ne!(a.digest(), Plan::draw(&spec(8)).digest());
        assert_eq!(a.steps.len(), 400);
    }

    #[test]
    fn every_kind_of_step_is_drawn_and_the_model_stays_within_bounds() {
        let p = Plan::draw(&spec(1));
        for (what, n) in [
            ("create", p.count(|s| matches!(s, Step::CreateService(_)))),
            ("delete", p.count(|s| matches!(s, Step::DeleteService(_)))),
            ("type", p.count(|s| matches!(s, Step::ToggleType(_)))),
            (
                "etp",
                p.count(|s| matches!(s, Step::ToggleTrafficPolicy(_))),
            ),
            ("add-node", p.count(|s| matches!(s, Step::AddNode(_)))),
            (
                "instance",
                p.count(|s| matches!(s, Step::DeleteInstance(_))),
            ),
            ("kill", p.count(|s| matches!(s, Step::KillCcm))),
            ("restart", p.count(|s| matches!(s, Step::RestartApiServer))),
        ] {
            assert!(n > 0, "no {what} step in {:?}", p.steps);
        }
        // Replaying the plan on its own model: never more than `services` Services, a step
        // only names a Service or node that exists.
        let mut services = std::collections::BTreeSet::new();
        let mut nodes: std::collections::BTreeSet<String> =
            Plan::initial_nodes(4).into_iter().collect();
        for s in &p.steps {
            match s {
                Step::CreateService(n) => assert!(services.insert(n.clone())),
                Step::DeleteService(n) => assert!(services.remove(n), "{n}"),
                Step::ChangePort(n)
                | Step::ToggleSourceRanges(n)
                | Step::ToggleTrafficPolicy(n)
                | Step::ToggleType(n) => assert!(services.contains(n), "{n}"),
                Step::AddNode(n) => assert!(nodes.insert(n.clone())),
                Step::DeleteInstance(n) => assert!(nodes.remove(n), "{n}"),
                Step::SetReady(n, _) => assert!(nodes.contains(n), "{n}"),
                Step::KillCcm | Step::RestartApiServer => {}
            }
            assert!(services.len() <= 10);
            assert!(!nodes.is_empty() && nodes.len() <= 8);
        }
    }

    #[test]
    fn without_load_balancers_only_nodes_change() {
        let p = Plan::draw(&PlanSpec {
            load_balancers: false,
            ..spec(3)
        });
        assert_eq!(
            p.count(|s| matches!(
                s,
                Step::CreateService(_)
                    | Step::DeleteService(_)
                    | Step::ChangePort(_)
                    | Step::ToggleSourceRanges(_)
                    | Step::ToggleTrafficPolicy(_)
                    | Step::ToggleType(_)
            )),
            0
        );
        assert!(p.count(|s| matches!(s, Step::AddNode(_))) > 0);
    }
}
