//! AWS behind [`CloudControl`](super::CloudControl): instances are EC2 instances, routes
//! the cluster route table's instance routes, load balancers classic ELBs and ELBv2 NLBs.
//! Journal entries are the query API's calls, classified by their `Action`
//! (`DescribeInstances` is an instance lookup, `CreateLoadBalancer` a create,
//! `RegisterTargets` a backend write).
//!
//! Out-of-band changes and the in-tree provider's leftovers are made as an operator or the
//! provider would, through the query API ([`AwsQuery`], SigV4-signed like the `aws` CLI):
//! kubernetes/cloud-provider-aws `pkg/providers/v1/aws_loadbalancer.go` (the in-tree code
//! before the move) made a classic ELB named by cloud-provider's `DefaultLoadBalancerName`
//! (`cloud.go`, the only scheme the AWS provider had), in the cluster's subnets, tagged
//! `kubernetes.io/service-name` = `<ns>/<name>` and `kubernetes.io/cluster/<id>` = `owned`,
//! one TCP listener per port to the node port, every node's instance registered, a
//! `TCP:<first nodePort>` health check, and its security group `k8s-elb-<name>` opening the
//! listener ports to `0.0.0.0/0`; the ingress is the ELB's DNS name.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Service;
use mock_cloud::{Journal, JournalEntry};
use serde_json::json;

use super::descriptor::{CloudDescriptor, MockEntry, MockTls, UpstreamEntry};
use super::standalone;
use super::{
    Backend, CloudLoadBalancer, CreateHold, FaultControl, FaultSpec, Feature, InTreeLoadBalancer,
    InTreeName, Instance, InstanceControl, InstancePatch, InstanceSpec, JournalControl, LbLister,
    LoadBalancerControl, Offers, RefsReader, RouteControl, default_load_balancer_name, service_key,
    tokens,
};
use crate::ensure;
use crate::error::CaseError;
use ccm_upstream::{Siblings, Upstream};

/// AWS in the registry of clouds.
pub(crate) static CLOUD: CloudDescriptor = CloudDescriptor {
    name: "aws",
    aliases: &[],
    cloud_provider: "aws",
    // Its mock serves plain HTTP only, and an instance metadata service (IMDSv2) on a
    // second port with `--imds`.
    mock: Some(MockEntry {
        start: start_backend,
        serve: standalone::serve::<mock_aws::MockAws>,
        tls: MockTls::Never,
        imds: true,
    }),
    // v1.37.0: on 2026-11-26, v1.37.1 (and v1.36.2) replace cel-go by a module version the
    // proxy refuses.
    upstream: Some(UpstreamEntry {
        ccm: Upstream {
            name: "aws",
            module: "k8s.io/cloud-provider-aws",
            package: "cmd/aws-cloud-controller-manager",
            binary: "aws-cloud-controller-manager",
            default_version: "v1.37.0",
            siblings: Siblings::Refuse,
            version_packages: &[],
            main: None,
        },
        node_manager: None,
    }),
};

fn start_backend(
    nodes: usize,
    block: u8,
) -> BoxFuture<'static, Result<Box<dyn Backend>, CaseError>> {
    Box::pin(async move { Ok(Box::new(Aws::start(nodes, block).await?) as Box<dyn Backend>) })
}

/// The cluster id the harness's AWS mock tags its resources with (`--cluster-name`).
pub const AWS_CLUSTER_ID: &str = "ccm-conformance";

/// The mock AWS with what the harness adds: case zone names mapped to AWS zones.
pub(crate) struct Aws {
    mock: mock_aws::MockAws,
    /// Resolves this mock's ELB DNS names to their VIPs for [`crate::traffic`].
    _resolver: crate::traffic::ResolverGuard,
    /// Case zone name (e.g. `az-2`) -> AWS zone of the mock, assigned on first use.
    zones: std::sync::Mutex<BTreeMap<String, String>>,
}

impl Aws {
    pub(crate) async fn start(nodes: usize, address_block: u8) -> Result<Self, CaseError> {
        let config = mock_aws::Config {
            nodes,
            address_block,
            cluster_id: AWS_CLUSTER_ID.to_string(),
            imds: true,
            ..Default::default()
        };
        let mock = mock_aws::MockAws::start(config)
            .await
            .map_err(|e| CaseError::infra("starting mock AWS", e))?;
        let admin = mock.admin();
        let resolver = crate::traffic::register_resolver(std::sync::Arc::new(move |host: &str| {
            admin.resolve(host).map(std::net::IpAddr::V4)
        }));
        Ok(Self {
            mock,
            _resolver: resolver,
            zones: std::sync::Mutex::new(Default::default()),
        })
    }

    fn admin(&self) -> mock_aws::Admin {
        self.mock.admin()
    }

    /// The mock zone for a case's zone name: a real zone stays, others get one assigned.
    fn zone_for(&self, wanted: &str) -> Result<String, CaseError> {
        let known: Vec<String> = self
            .mock
            .admin()
            .subnets()
            .into_iter()
            .map(|(z, _)| z)
            .collect();
        if wanted.is_empty() {
            return Err(CaseError::failed(
                "an instance without an availability zone does not exist in AWS",
            ));
        }
        if known.iter().any(|z| z == wanted) {
            return Ok(wanted.to_string());
        }
        let mut map = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(z) = map.get(wanted) {
            return Ok(z.clone());
        }
        // Skip the first zone (the default) so a zone change is visible.
        let z = known
            .iter()
            .cycle()
            .nth(1 + map.len())
            .cloned()
            .ok_or_else(|| CaseError::failed("the mock AWS has no zones"))?;
        map.insert(wanted.to_string(), z.clone());
        Ok(z)
    }

    fn instance(&self, i: mock_aws::InstanceInfo) -> Instance {
        let region = self.mock.ready_info().region;
        // The CCM also reports the private DNS name as Hostname; it is the node's name,
        // which the kubelet reports itself ("before the node's own Hostname is kept").
        let mut dns_addresses = vec![("InternalDNS".to_string(), i.private_dns_name.clone())];
        if let Some(ip) = i.public_ip {
            dns_addresses.push(("ExternalDNS".to_string(), public_dns_name(&region, ip)));
        }
        Instance {
            id: i.id,
            name: i.name.unwrap_or_default(),
            zone: i.zone,
            region,
            instance_type: i.instance_type,
            // With NodeIPFamilies ipv4 then ipv6 the AWS CCM reports the private IPv4s, then
            // the first IPv6 of the (one) ENI (aws.go extractIPv6NodeAddresses).
            internal_ips: std::iter::once(&i.private_ip)
                .chain(&i.secondary_private_ips)
                .map(|ip| ip.to_string())
                .chain(i.ipv6_addresses.first().map(|ip| ip.to_string()))
                .collect(),
            external_ips: i.public_ip.iter().map(|p| p.to_string()).collect(),
            provider_id: i.provider_id,
            dns_addresses,
            system_uuid: String::new(),
        }
    }
}

impl Backend for Aws {
    fn supports(&self, feature: Feature) -> Result<(), String> {
        match feature {
            // kubernetes/cloud-provider-aws pkg/providers/v1/aws_routes.go sends every pod
            // CIDR as DestinationCidrBlock (IPv4 only) and lists only DestinationCidrBlock.
            Feature::DualStackRoutes => Err(
                "upstream cloud-provider-aws cannot route an IPv6 pod CIDR (aws_routes.go sends it as DestinationCidrBlock, never DestinationIpv6CidrBlock)".into(),
            ),
            // EC2 places every instance in a subnet, and every subnet in one zone.
            Feature::NoZone => Err(
                "every EC2 instance has an availability zone (placement.availabilityZone)".into(),
            ),
            // A VPC instance keeps its primary private IP and private DNS name for life,
            // so cloud-provider-aws always reports at least InternalIP and InternalDNS.
            Feature::NoAddresses => Err(
                "an EC2 instance always has its primary private IP and private DNS name".into(),
            ),
            // cloud-provider-aws pkg/providers/v1/aws.go reports IPv6 addresses only with
            // [Global] NodeIPFamilies including ipv6, which the harness's config sets.
            Feature::DualStackAddresses
            | Feature::LoadBalancers
            | Feature::Routes
            | Feature::SeparateExternalAddresses
            | Feature::UdpLoadBalancers => Ok(()),
            // The classic ELB health check is HTTP:<healthCheckNodePort>/healthz for
            // ETP=Local (pkg/providers/v1/aws_loadbalancer.go).
            Feature::LocalTrafficHealthChecks => Ok(()),
            // pkg/providers/v1/aws_loadbalancer.go returns ImplementedElsewhere for
            // `aws-load-balancer-type: external` (the AWS Load Balancer Controller's).
            Feature::ImplementedElsewhere => Ok(()),
            // Instance IDs are never reused; a classic ELB or NLB deleted out of band makes
            // the update fail (LoadBalancerNotFound); ELB names are `a<uid>`, free of the
            // cluster name.
            Feature::ReplacementGetsNewProviderId
            | Feature::UpdateFailsForMissingLoadBalancer
            | Feature::LoadBalancersSurviveClusterRename
            | Feature::ShutdownDetection => Ok(()),
        }
    }

    fn ready_info(&self) -> serde_json::Value {
        serde_json::to_value(self.mock.ready_info()).unwrap_or_default()
    }

    /// cloud-provider-aws `pkg/providers/v1/config/config.go`: `[Global]` with the zone,
    /// VPC, subnet and cluster id (so no instance metadata is needed) and one
    /// `[ServiceOverride]` per API pointing at the mock.
    fn cloud_config(&self) -> String {
        let r = self.mock.ready_info();
        let admin = self.mock.admin();
        let subnets = admin.subnets();
        let (zone, subnet) = subnets.first().cloned().unwrap_or_default();
        let mut conf = format!(
            "[Global]\nZone = {zone}\nVPC = {}\nSubnetID = {subnet}\nKubernetesClusterID = {AWS_CLUSTER_ID}\n",
            admin.vpc_id()
        );
        // Dual-stack node addresses (IPv4 first), so instances given IPv6 addresses report
        // them; instances without any are unaffected.
        conf.push_str("NodeIPFamilies = ipv4\nNodeIPFamilies = ipv6\n");
        // Service IDs of aws-sdk-go-v2, which upstream matches exactly since v1.31
        // (shared/reference/upstream-builds.md); the instance metadata service too, as
        // upstream reads its identity document at start.
        let services = [
            ("EC2", "ec2"),
            ("Elastic Load Balancing", "elasticloadbalancing"),
            ("Elastic Load Balancing v2", "elasticloadbalancing"),
        ];
        for (i, (service, signing)) in services.iter().enumerate() {
            conf.push_str(&format!(
                "\n[ServiceOverride \"{}\"]\nService = {service}\nRegion = {region}\nURL = {url}\nSigningRegion = {region}\nSigningName = {signing}\n",
                i + 1,
                region = r.region,
                url = r.endpoint,
            ));
        }
        if let Some(imds) = &r.imds_endpoint {
            conf.push_str(&format!(
                "\n[ServiceOverride \"{}\"]\nService = ec2imds\nRegion = {region}\nURL = {imds}\nSigningRegion = {region}\n",
                services.len() + 1,
                region = r.region,
            ));
        }
        conf
    }

    fn secret_credentials_config(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        Err("cloud-provider-aws takes credentials from the AWS SDK's default chain (environment, shared files, instance role), never from a Secret".into())
    }

    /// Environment the CCM process needs (static credentials of the mock).
    fn ccm_env(&self) -> Vec<(String, String)> {
        let r = self.mock.ready_info();
        vec![
            ("AWS_ACCESS_KEY_ID".into(), r.access_key_id),
            ("AWS_SECRET_ACCESS_KEY".into(), r.secret_access_key),
            ("AWS_REGION".into(), r.region),
        ]
    }

    fn region(&self) -> String {
        self.mock.ready_info().region
    }

    /// Instances are created by the harness, never by the CCM.
    fn leaks(&self) -> Vec<String> {
        self.admin()
            .leaks()
            .into_iter()
            .filter(|l| !l.starts_with("instance "))
            .collect()
    }

    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(self.mock.shutdown())
    }

    fn offers(&self) -> Offers<'_> {
        Offers::all(self)
    }
}

impl InstanceControl for Aws {
    fn spare_internal_ips(&self, n: usize) -> Result<Vec<String>, CaseError> {
        self.admin()
            .free_private_ips(None, n)
            .map(|ips| ips.into_iter().map(|ip| ip.to_string()).collect())
            .map_err(|e| CaseError::infra("picking private IPs in mock AWS", e))
    }

    fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        let zone = spec.zone.as_deref().map(|z| self.zone_for(z)).transpose()?;
        let parse = |s: &str| {
            s.parse::<std::net::Ipv4Addr>()
                .map_err(|e| CaseError::infra(&format!("address {s:?} for mock AWS"), e))
        };
        let (private_ip, secondary_private_ips, ipv6_addresses) = match spec.internal_ips {
            None => (None, Vec::new(), Vec::new()),
            Some(ips) => {
                let (v4, v6) = split_families(&ips)?;
                let mut v4 = v4.into_iter();
                let primary = v4.next();
                if primary.is_none() {
                    return Err(CaseError::failed(
                        "an EC2 instance always has a primary private IPv4 address",
                    ));
                }
                (primary, v4.collect(), v6)
            }
        };
        let (public_ip, public_ip_address) = match spec.external_ips.as_deref() {
            None => (None, None),
            Some([]) => (Some(false), None),
            Some([one]) => (Some(true), Some(parse(one)?)),
            Some(other) => {
                return Err(CaseError::failed(format!(
                    "the AWS mock gives an instance at most one public IP, not {other:?}"
                )));
            }
        };
        let info = self
            .mock
            .admin()
            .create_instance(mock_aws::InstanceSpec {
                // Nodes are named after the instance's private DNS name, as on AWS.
                private_dns_name: Some(spec.name.clone()),
                name: Some(spec.name),
                zone,
                instance_type: spec.instance_type,
                private_ip,
                public_ip,
                public_ip_address,
                secondary_private_ips,
                ipv6_addresses,
                ..Default::default()
            })
            .map_err(|e| CaseError::infra("creating instance in mock AWS", e))?;
        Ok(self.instance(info))
    }

    fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        if patch.zone.is_some() {
            return Err(CaseError::failed(
                "an EC2 instance cannot move to another availability zone",
            ));
        }
        // The primary private IP stays for the instance's life; secondary private IPs and
        // IPv6 addresses can be assigned and unassigned (AssignPrivateIpAddresses).
        let (secondary_private_ips, ipv6_addresses) = match patch.internal_ips {
            None => (None, None),
            Some(ips) => {
                let (v4, v6) = split_families(&ips)?;
                let primary = self
                    .mock
                    .admin()
                    .instance(id)
                    .map(|i| i.private_ip)
                    .ok_or_else(|| CaseError::failed(format!("no instance {id} in mock AWS")))?;
                if v4.first() != Some(&primary) {
                    return Err(CaseError::failed(format!(
                        "an EC2 instance keeps its primary private IP {primary}; asked for {ips:?}"
                    )));
                }
                (Some(v4[1..].to_vec()), Some(v6))
            }
        };
        let (public_ip, public_ip_address) =
            match patch.external_ips.as_deref() {
                None => (None, None),
                Some([]) => (Some(false), None),
                Some([one]) => (
                    Some(true),
                    Some(one.parse::<std::net::Ipv4Addr>().map_err(|e| {
                        CaseError::infra(&format!("address {one:?} for mock AWS"), e)
                    })?),
                ),
                Some(other) => {
                    return Err(CaseError::failed(format!(
                        "the AWS mock gives an instance at most one public IP, not {other:?}"
                    )));
                }
            };
        let info = self
            .mock
            .admin()
            .update_instance(
                id,
                mock_aws::InstancePatch {
                    // cloud-provider-aws reports stopped/stopping as shut down.
                    state: patch.running.map(|r| {
                        if r {
                            mock_aws::InstanceState::Running
                        } else {
                            mock_aws::InstanceState::Stopped
                        }
                    }),
                    public_ip,
                    public_ip_address,
                    secondary_private_ips,
                    ipv6_addresses,
                    ..Default::default()
                },
            )
            .map_err(|e| CaseError::infra("updating instance in mock AWS", e))?;
        Ok(self.instance(info))
    }

    fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        self.admin()
            .delete_instance(id)
            .map_err(|e| CaseError::infra("deleting instance in mock AWS", e))
    }

    /// `RebootInstances` leaves the instance `running` with its addresses, so EC2 shows
    /// nothing to hold (the instance must exist and run).
    fn begin_reboot(&self, id: &str) -> Result<(), CaseError> {
        match self.admin().instance(id) {
            Some(i) if i.state == mock_aws::InstanceState::Running => Ok(()),
            Some(i) => Err(CaseError::failed(format!(
                "cannot reboot instance {id}: it is {:?}, not running",
                i.state
            ))),
            None => Err(CaseError::failed(format!("no instance {id} in mock AWS"))),
        }
    }

    fn finish_reboot(&self, _id: &str) -> Result<(), CaseError> {
        Ok(())
    }

    fn rebooting(&self, _id: &str) -> bool {
        false
    }

    fn instance_by_name(&self, name: &str) -> Option<Instance> {
        self.admin()
            .instance_by_name(name)
            .map(|i| self.instance(i))
    }

    fn instances(&self) -> Vec<Instance> {
        self.admin()
            .instances()
            .into_iter()
            .map(|i| self.instance(i))
            .collect()
    }
}

impl LoadBalancerControl for Aws {
    /// Classic ELBs carry no UDP; a UDP Service asks for an NLB (upstream e2e does the
    /// same, test/e2e/loadbalancer.go in cloud-provider-aws).
    fn udp_service_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(
            "service.beta.kubernetes.io/aws-load-balancer-type".into(),
            "nlb".into(),
        )])
    }

    fn implemented_elsewhere_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(
            "service.beta.kubernetes.io/aws-load-balancer-type".into(),
            "external".into(),
        )])
    }

    fn resolve_ingress(&self, hostname: &str) -> Option<String> {
        self.admin().resolve(hostname).map(|ip| ip.to_string())
    }

    fn load_balancers(&self) -> Vec<CloudLoadBalancer> {
        let admin = self.mock.admin();
        let mut out: Vec<CloudLoadBalancer> = admin
            .classic_load_balancers()
            .into_iter()
            .map(|(name, _, vip)| CloudLoadBalancer {
                id: name.clone(),
                name,
                vip: vip.to_string(),
                // Classic ELBs have no provisioning state.
                state: "active".into(),
            })
            .collect();
        out.extend(
            admin
                .elbv2_load_balancers()
                .into_iter()
                .map(|lb| CloudLoadBalancer {
                    id: lb.arn,
                    name: lb.name,
                    vip: lb.vip.to_string(),
                    state: lb.state,
                }),
        );
        out
    }

    /// Classic ELBs are known by name; a recreated one gets a new DNS name, so the
    /// identity is `name/dns`.
    fn load_balancer_lister(&self) -> Option<LbLister> {
        let admin = self.admin();
        Some(Arc::new(move || {
            admin
                .classic_load_balancers()
                .into_iter()
                .map(|(name, dns, _)| (format!("{name}/{dns}"), name))
                .chain(
                    admin
                        .elbv2_load_balancers()
                        .into_iter()
                        .map(|lb| (lb.arn, lb.name)),
                )
                .collect()
        }))
    }

    /// Holds `CreateLoadBalancer` of ELB and ELBv2 with the mock's latency fault.
    fn hold_load_balancer_creates(&self, latency: Duration) -> Option<CreateHold> {
        let faults = self.admin().faults();
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        let rule = faults.add(mock_cloud::Fault::latency(ms).path("^/CreateLoadBalancer(/|$)"));
        Some(CreateHold::new(faults, rule))
    }

    /// `DeleteLoadBalancer`, of ELB classic for a name, of ELBv2 for an ARN, as
    /// `aws elb|elbv2 delete-load-balancer` would.
    fn delete_load_balancer_out_of_band<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<(), CaseError>> {
        Box::pin(async move {
            let aws = AwsQuery::new(&self.ready_info())?;
            let (api, key) = if id.starts_with("arn:") {
                (AwsApi::Elbv2, "LoadBalancerArn")
            } else {
                (AwsApi::Elb, "LoadBalancerName")
            };
            aws.call(api, "DeleteLoadBalancer", &[(key.into(), id.into())])
                .await
                .map(|_| ())
        })
    }

    /// The AWS provider only ever had the UID name (GetLoadBalancerName).
    fn in_tree_load_balancer_name(
        &self,
        _scheme: InTreeName,
        _cluster: &str,
        service: &Service,
    ) -> Result<String, CaseError> {
        default_load_balancer_name(service)
    }

    fn seed_in_tree_load_balancer<'a>(
        &'a self,
        name: &'a str,
        _cluster: &'a str,
        service: &'a Service,
        nodes: &'a [Instance],
    ) -> BoxFuture<'a, Result<InTreeLoadBalancer, CaseError>> {
        Box::pin(seed_elb(self, name, service, nodes))
    }
}

impl RouteControl for Aws {
    /// Routes with an instance as target, as (destination, the instance's private IP):
    /// the next hop in the terms the cases use for every cloud.
    fn routes(&self) -> Vec<(String, String)> {
        let admin = self.mock.admin();
        admin
            .routes()
            .into_iter()
            .filter(|(_, _, target)| target.starts_with("i-"))
            .map(|(_, dest, target)| {
                let hop = admin
                    .instance(&target)
                    .map(|i| i.private_ip.to_string())
                    .unwrap_or(target);
                (dest, hop)
            })
            .collect()
    }

    /// A foreign route to the instance whose private IP is `nexthop` (else to `nexthop`
    /// taken as a gateway id).
    fn add_route(&self, destination: &str, nexthop: &str) -> Result<(), CaseError> {
        let admin = self.mock.admin();
        let target = admin
            .instances()
            .into_iter()
            .find(|i| i.private_ip.to_string() == nexthop)
            .map(|i| i.id)
            .unwrap_or_else(|| nexthop.to_string());
        admin
            .add_route(destination, &target)
            .map_err(|e| CaseError::infra("adding a route in mock AWS", e))
    }
}

impl FaultControl for Aws {
    /// Faults in AWS terms: instance lookups are `DescribeInstances` (503 answers EC2's
    /// `RequestLimitExceeded`), route writes `CreateRoute`/`DeleteRoute`, load-balancer
    /// writes the ELB/ELBv2 create/modify/delete actions by HTTP-method meaning.
    fn inject(&self, fault: FaultSpec) -> u64 {
        let (service, path, status, count) = match fault {
            FaultSpec::InstanceLookup {
                instance_id,
                status,
                count,
            } => {
                let path = match instance_id.and_then(|id| {
                    self.mock
                        .admin()
                        .instance(&id)
                        .map(|i| (id, i.private_dns_name))
                }) {
                    Some((id, dns)) => format!(
                        "^/DescribeInstances/(.*/)?({}|{})(/|$)",
                        regex::escape(&id),
                        regex::escape(&dns)
                    ),
                    None => "^/DescribeInstances(/|$)".to_string(),
                };
                (None, path, status, count)
            }
            FaultSpec::RouteWrite { status, count } => (
                Some("ec2"),
                "^/(CreateRoute|DeleteRoute|ReplaceRoute)(/|$)".to_string(),
                status,
                count,
            ),
            FaultSpec::LoadBalancerWrite {
                method,
                status,
                count,
            } => {
                let actions = match method {
                    "POST" => {
                        "CreateLoadBalancer|CreateLoadBalancerListeners|CreateTargetGroup|CreateListener"
                    }
                    "DELETE" => {
                        "DeleteLoadBalancer|DeleteLoadBalancerListeners|DeleteTargetGroup|DeleteListener"
                    }
                    _ => {
                        "RegisterInstancesWithLoadBalancer|DeregisterInstancesFromLoadBalancer|RegisterTargets|DeregisterTargets|ModifyListener|ModifyTargetGroup|ConfigureHealthCheck"
                    }
                };
                (None, format!("^/({actions})(/|$)"), status, count)
            }
        };
        let rule = mock_cloud::Fault::error(status).path(path).count(count);
        let rule = rule.message("injected by ccm-conformance");
        self.mock.admin().faults().add(match service {
            Some(service) => rule.service(service),
            None => rule,
        })
    }

    fn faults(&self) -> mock_cloud::Faults {
        self.admin().faults()
    }
}

impl JournalControl for Aws {
    // The form's values (`LoadBalancerName`, `LoadBalancerArn`, `TargetGroupArn`, ...)
    // name the load balancer; the mock journals the form as the query.
    fn refs_reader(&self) -> RefsReader {
        |e| tokens(&e.query)
    }

    fn journal(&self) -> Journal {
        self.admin().journal()
    }

    fn journal_line(&self, e: &JournalEntry) -> String {
        format!("{} {} {} -> {}", e.seq, e.service, e.query, e.status)
    }
}

/// The AWS in-tree provider's classic ELB for `service`, made through the query API.
async fn seed_elb(
    cloud: &Aws,
    name: &str,
    service: &Service,
    nodes: &[Instance],
) -> Result<InTreeLoadBalancer, CaseError> {
    let admin = cloud.admin();
    let aws = AwsQuery::new(&cloud.ready_info())?;
    let key = service_key(service);
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default();
    let mut listeners = Vec::new();
    for port in &ports {
        let node_port = port
            .node_port
            .ok_or_else(|| CaseError::failed(format!("Service {key} has no nodePort yet")))?;
        listeners.push((port.port, node_port));
    }
    let first_node_port = listeners
        .first()
        .map(|(_, n)| *n)
        .ok_or_else(|| CaseError::failed(format!("Service {key} has no ports")))?;
    let p = |k: String, v: String| (k, v);
    let cluster_tag = format!("kubernetes.io/cluster/{AWS_CLUSTER_ID}");

    let mut group = vec![
        p("GroupName".into(), format!("k8s-elb-{name}")),
        p(
            "GroupDescription".into(),
            format!("Security group for Kubernetes ELB {name} ({key})"),
        ),
        p("VpcId".into(), admin.vpc_id()),
        p(
            "TagSpecification.1.ResourceType".into(),
            "security-group".into(),
        ),
        p("TagSpecification.1.Tag.1.Key".into(), cluster_tag.clone()),
        p("TagSpecification.1.Tag.1.Value".into(), "owned".into()),
    ];
    let answer = aws.call(AwsApi::Ec2, "CreateSecurityGroup", &group).await?;
    let group_id = xml_text(&answer, "groupId")
        .ok_or_else(|| CaseError::failed("CreateSecurityGroup answered no groupId"))?
        .to_string();
    group.clear();
    group.push(p("GroupId".into(), group_id.clone()));
    for (i, (port, _)) in listeners.iter().enumerate() {
        let k = |s: &str| format!("IpPermissions.{}.{s}", i + 1);
        group.push(p(k("IpProtocol"), "tcp".into()));
        group.push(p(k("FromPort"), port.to_string()));
        group.push(p(k("ToPort"), port.to_string()));
        group.push(p(k("IpRanges.1.CidrIp"), "0.0.0.0/0".into()));
    }
    aws.call(AwsApi::Ec2, "AuthorizeSecurityGroupIngress", &group)
        .await?;

    let mut create = vec![p("LoadBalancerName".into(), name.to_string())];
    for (i, (port, node_port)) in listeners.iter().enumerate() {
        let k = |s: &str| format!("Listeners.member.{}.{s}", i + 1);
        create.push(p(k("Protocol"), "TCP".into()));
        create.push(p(k("LoadBalancerPort"), port.to_string()));
        create.push(p(k("InstanceProtocol"), "TCP".into()));
        create.push(p(k("InstancePort"), node_port.to_string()));
    }
    // One subnet per zone, as the provider picked them.
    let mut zones = std::collections::BTreeSet::new();
    let subnets: Vec<String> = admin
        .subnets()
        .into_iter()
        .filter(|(zone, _)| zones.insert(zone.clone()))
        .map(|(_, id)| id)
        .collect();
    for (i, subnet) in subnets.iter().enumerate() {
        create.push(p(format!("Subnets.member.{}", i + 1), subnet.clone()));
    }
    create.push(p("SecurityGroups.member.1".into(), group_id));
    create.push(p(
        "Tags.member.1.Key".into(),
        "kubernetes.io/service-name".into(),
    ));
    create.push(p("Tags.member.1.Value".into(), key.clone()));
    create.push(p("Tags.member.2.Key".into(), cluster_tag));
    create.push(p("Tags.member.2.Value".into(), "owned".into()));
    let answer = aws.call(AwsApi::Elb, "CreateLoadBalancer", &create).await?;
    let dns = xml_text(&answer, "DNSName")
        .ok_or_else(|| CaseError::failed("CreateLoadBalancer answered no DNSName"))?
        .to_string();

    let health = [
        p("LoadBalancerName".into(), name.to_string()),
        p(
            "HealthCheck.Target".into(),
            format!("TCP:{first_node_port}"),
        ),
        p("HealthCheck.Interval".into(), "10".into()),
        p("HealthCheck.Timeout".into(), "5".into()),
        p("HealthCheck.UnhealthyThreshold".into(), "6".into()),
        p("HealthCheck.HealthyThreshold".into(), "2".into()),
    ];
    aws.call(AwsApi::Elb, "ConfigureHealthCheck", &health)
        .await?;
    let mut register = vec![p("LoadBalancerName".into(), name.to_string())];
    for (i, node) in nodes.iter().enumerate() {
        register.push(p(
            format!("Instances.member.{}.InstanceId", i + 1),
            node.id.clone(),
        ));
    }
    aws.call(AwsApi::Elb, "RegisterInstancesWithLoadBalancer", &register)
        .await?;

    let vip = admin
        .resolve(&dns)
        .map(|ip| ip.to_string())
        .ok_or_else(|| {
            CaseError::failed(format!("the ELB's DNS name {dns} resolves to nothing"))
        })?;
    Ok(InTreeLoadBalancer {
        ingress: json!({"hostname": dns}),
        address: dns.clone(),
        cloud: CloudLoadBalancer {
            id: name.to_string(),
            name: name.to_string(),
            vip,
            state: "active".into(),
        },
    })
}

/// The AWS query APIs the mock answers on one endpoint, told apart by `Version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AwsApi {
    Ec2,
    Elb,
    Elbv2,
}

impl AwsApi {
    fn version(self) -> &'static str {
        match self {
            AwsApi::Ec2 => "2016-11-15",
            AwsApi::Elb => "2012-06-01",
            AwsApi::Elbv2 => "2015-12-01",
        }
    }

    /// The SigV4 service name (ELB and ELBv2 share one).
    fn signing_name(self) -> &'static str {
        match self {
            AwsApi::Ec2 => "ec2",
            AwsApi::Elb | AwsApi::Elbv2 => "elasticloadbalancing",
        }
    }
}

/// A minimal AWS query-protocol client (form POST, SigV4-signed with the mock's static
/// key), what the `aws` CLI would send: for out-of-band changes and in-tree seeding.
pub struct AwsQuery {
    http: reqwest::Client,
    endpoint: String,
    region: String,
    access_key_id: String,
    secret_access_key: String,
}

impl AwsQuery {
    /// A client for the mock described by `ready` (the AWS mock's ready info).
    pub fn new(ready: &serde_json::Value) -> Result<Self, CaseError> {
        let text = |k: &str| {
            ready
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let endpoint = text("endpoint");
        if !endpoint.starts_with("http://") {
            return Err(CaseError::Skipped(format!(
                "the harness's AWS client speaks plain HTTP only; the mock is at {endpoint:?}"
            )));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| CaseError::infra("building HTTP client", e))?;
        Ok(Self {
            http,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            region: text("region"),
            access_key_id: text("access_key_id"),
            secret_access_key: text("secret_access_key"),
        })
    }

    /// Calls `action` with `params`; the response body on success, a failure naming the
    /// AWS error otherwise.
    pub async fn call(
        &self,
        api: AwsApi,
        action: &str,
        params: &[(String, String)],
    ) -> Result<String, CaseError> {
        let mut body = format!("Action={}&Version={}", uri_encode(action), api.version());
        for (k, v) in params {
            body.push_str(&format!("&{}={}", uri_encode(k), uri_encode(v)));
        }
        let uri: http::Uri = format!("{}/", self.endpoint)
            .parse()
            .map_err(|e| CaseError::infra("parsing the mock AWS endpoint", e))?;
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/x-www-form-urlencoded; charset=utf-8"),
        );
        if let Some(host) = uri.authority().and_then(|a| a.as_str().parse().ok()) {
            headers.insert(http::header::HOST, host);
        }
        mock_aws::sign_request(
            &http::Method::POST,
            &uri,
            &mut headers,
            body.as_bytes(),
            (&self.access_key_id, &self.secret_access_key),
            &self.region,
            api.signing_name(),
        );
        // reqwest sets Host itself from the URL; the signed value is the same.
        headers.remove(http::header::HOST);
        let answer = self
            .http
            .post(uri.to_string())
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| CaseError::infra(&format!("calling mock AWS {action}"), e))?;
        let status = answer.status();
        let text = answer
            .text()
            .await
            .map_err(|e| CaseError::infra(&format!("reading mock AWS {action}"), e))?;
        ensure!(
            status.is_success(),
            "expected mock AWS to accept {action}, observed {status}: {}",
            xml_text(&text, "Message").unwrap_or(&text)
        );
        Ok(text)
    }
}

/// The text of the first `<tag>…</tag>` in an AWS XML answer.
pub fn xml_text<'a>(body: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = body.find(&open)? + open.len();
    let len = body[start..].find(&format!("</{tag}>"))?;
    Some(&body[start..start + len])
}

/// RFC 3986 unreserved characters stay, everything else is `%XX` (SigV4's encoding).
fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Case addresses split into IPv4 and IPv6, in order.
fn split_families(
    ips: &[String],
) -> Result<(Vec<std::net::Ipv4Addr>, Vec<std::net::Ipv6Addr>), CaseError> {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for s in ips {
        match s.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(a)) => v4.push(a),
            Ok(std::net::IpAddr::V6(a)) => v6.push(a),
            Err(e) => return Err(CaseError::infra(&format!("address {s:?} for mock AWS"), e)),
        }
    }
    Ok((v4, v6))
}

/// EC2's public DNS name for an address (cloud-apis.md §4.2).
fn public_dns_name(region: &str, ip: std::net::Ipv4Addr) -> String {
    let dashed = ip.to_string().replace('.', "-");
    if region == "us-east-1" {
        format!("ec2-{dashed}.compute-1.amazonaws.com")
    } else {
        format!("ec2-{dashed}.{region}.compute.amazonaws.com")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_finds_the_first_element() {
        let body = "<R><DNSName>a-1.elb</DNSName><DNSName>b</DNSName></R>";
        assert_eq!(xml_text(body, "DNSName"), Some("a-1.elb"));
        assert_eq!(xml_text(body, "Missing"), None);
    }

    /// The mock verifies SigV4: a signed call is accepted, and the out-of-band delete
    /// removes a classic ELB the query API created.
    #[tokio::test]
    async fn signed_calls_reach_the_mock_and_delete_out_of_band() {
        let block = super::super::address_block::take();
        let cloud = Aws::start(1, block.index).await.unwrap();
        let aws = AwsQuery::new(&cloud.ready_info()).unwrap();
        let (_, subnet) = cloud.admin().subnets()[0].clone();
        let p = |k: &str, v: &str| (k.to_string(), v.to_string());
        aws.call(
            AwsApi::Elb,
            "CreateLoadBalancer",
            &[
                p("LoadBalancerName", "oob"),
                p("Listeners.member.1.Protocol", "TCP"),
                p("Listeners.member.1.LoadBalancerPort", "80"),
                p("Listeners.member.1.InstanceProtocol", "TCP"),
                p("Listeners.member.1.InstancePort", "30080"),
                p("Subnets.member.1", &subnet),
            ],
        )
        .await
        .unwrap();
        assert_eq!(cloud.admin().load_balancer_names(), vec!["oob".to_string()]);
        cloud.delete_load_balancer_out_of_band("oob").await.unwrap();
        assert!(cloud.admin().load_balancer_names().is_empty());
        let err = aws
            .call(AwsApi::Elb, "NoSuchAction", &[])
            .await
            .unwrap_err();
        assert!(matches!(err, CaseError::Failed { .. }), "{err:?}");
        Box::new(cloud).shutdown().await;
    }
}
