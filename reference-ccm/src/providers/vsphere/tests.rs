//! Error paths of the SOAP client against wiremock: re-login on `NotAuthenticated`,
//! fault bodies, non-SOAP errors, timeouts; and the pure helpers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::client::{ClientError, MoRef, VsphereClient};
use super::*;
use crate::providers::xml;

const SERVICE_CONTENT: &str = r#"<returnval><rootFolder type="Folder">group-d1</rootFolder><propertyCollector type="PropertyCollector">propertyCollector</propertyCollector><searchIndex type="SearchIndex">SearchIndex</searchIndex><sessionManager type="SessionManager">SessionManager</sessionManager></returnval>"#;

fn envelope(inner: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{inner}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn fault(kind: &str, msg: &str) -> ResponseTemplate {
    ResponseTemplate::new(500).set_body_string(envelope(&format!(
        r#"<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>{msg}</faultstring><detail><{kind}Fault xmlns="urn:vim25" xsi:type="{kind}"></{kind}Fault></detail></soapenv:Fault>"#
    )))
}

/// Login answers with a fresh cookie each time and counts the logins.
struct LoginResponder(Arc<AtomicUsize>);

impl Respond for LoginResponder {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        ResponseTemplate::new(200)
            .insert_header(
                "set-cookie",
                format!("vmware_soap_session=\"s{n}\"; Path=/; HttpOnly").as_str(),
            )
            .set_body_string(envelope(
                "<LoginResponse xmlns=\"urn:vim25\"><returnval/></LoginResponse>",
            ))
    }
}

async fn server_with_login() -> (MockServer, Arc<AtomicUsize>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/sdk"))
        .and(body_string_contains("<RetrieveServiceContent"))
        .respond_with(ResponseTemplate::new(200).set_body_string(envelope(&format!(
            "<RetrieveServiceContentResponse xmlns=\"urn:vim25\">{SERVICE_CONTENT}</RetrieveServiceContentResponse>"
        ))))
        .mount(&server)
        .await;
    let logins = Arc::new(AtomicUsize::new(0));
    Mock::given(method("POST"))
        .and(path("/sdk"))
        .and(body_string_contains("<Login "))
        .respond_with(LoginResponder(logins.clone()))
        .mount(&server)
        .await;
    (server, logins)
}

async fn connect(server: &MockServer, timeout: Duration) -> Result<VsphereClient, ClientError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("client");
    VsphereClient::connect_with(http, &server.uri(), "u", "p").await
}

fn find_ok(id: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_string(envelope(&format!(
        "<FindByUuidResponse xmlns=\"urn:vim25\"><returnval type=\"VirtualMachine\">{id}</returnval></FindByUuidResponse>"
    )))
}

#[tokio::test]
async fn not_authenticated_logs_in_again_and_retries() {
    let (server, logins) = server_with_login().await;
    // The first session is rejected; the second is accepted.
    Mock::given(method("POST"))
        .and(body_string_contains("<FindByUuid"))
        .and(wiremock::matchers::header(
            "cookie",
            "vmware_soap_session=\"s1\"",
        ))
        .respond_with(fault(
            "NotAuthenticated",
            "The session is not authenticated.",
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("<FindByUuid"))
        .and(wiremock::matchers::header(
            "cookie",
            "vmware_soap_session=\"s2\"",
        ))
        .respond_with(find_ok("vm-7"))
        .mount(&server)
        .await;
    let client = connect(&server, Duration::from_secs(5))
        .await
        .expect("connect");
    let found = client
        .find_vms("FindByUuid", None, "uuid", "abc")
        .await
        .expect("find");
    assert_eq!(found, vec![MoRef::new("VirtualMachine", "vm-7")]);
    assert_eq!(logins.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn not_authenticated_twice_is_an_error_not_a_loop() {
    let (server, logins) = server_with_login().await;
    Mock::given(method("POST"))
        .and(body_string_contains("<FindByUuid"))
        .respond_with(fault("NotAuthenticated", "nope"))
        .mount(&server)
        .await;
    let client = connect(&server, Duration::from_secs(5))
        .await
        .expect("connect");
    let err = client
        .find_vms("FindByUuid", None, "uuid", "abc")
        .await
        .expect_err("fails");
    assert_eq!(err.fault(), Some("NotAuthenticated"));
    assert_eq!(logins.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn typed_faults_and_garbage_are_errors() {
    let (server, _) = server_with_login().await;
    Mock::given(method("POST"))
        .and(body_string_contains("<FindByIp"))
        .respond_with(fault(
            "InvalidArgument",
            "A specified parameter was not correct: ip",
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("<FindAllByDnsName"))
        .respond_with(ResponseTemplate::new(503).set_body_string("upstream down"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("<RetrieveProperties"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<unclosed>"))
        .mount(&server)
        .await;
    let client = connect(&server, Duration::from_secs(5))
        .await
        .expect("connect");
    let e = client
        .find_vms("FindByIp", None, "ip", "x")
        .await
        .expect_err("fault");
    assert_eq!(e.fault(), Some("InvalidArgument"));
    assert!(e.to_string().contains("parameter was not correct"), "{e}");
    let e = client
        .find_vms("FindAllByDnsName", None, "dnsName", "x")
        .await
        .expect_err("503");
    assert!(matches!(e, ClientError::Http { status: 503, .. }), "{e}");
    let e = client
        .properties(&MoRef::new("VirtualMachine", "vm-1"), &["name"])
        .await
        .expect_err("garbage");
    assert!(matches!(e, ClientError::Decode { .. }), "{e}");
}

#[tokio::test]
async fn slow_answers_time_out() {
    let (server, _) = server_with_login().await;
    Mock::given(method("POST"))
        .and(body_string_contains("<FindByUuid"))
        .respond_with(find_ok("vm-1").set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let client = connect(&server, Duration::from_millis(300))
        .await
        .expect("connect");
    let e = client
        .find_vms("FindByUuid", None, "uuid", "abc")
        .await
        .expect_err("timeout");
    assert!(matches!(e, ClientError::Transport { .. }), "{e}");
    assert!(e.to_string().contains("timed out"), "{e}");
}

#[tokio::test]
async fn login_without_cookie_is_an_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_string_contains("<RetrieveServiceContent"))
        .respond_with(ResponseTemplate::new(200).set_body_string(envelope(&format!(
            "<RetrieveServiceContentResponse xmlns=\"urn:vim25\">{SERVICE_CONTENT}</RetrieveServiceContentResponse>"
        ))))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("<Login "))
        .respond_with(fault(
            "InvalidLogin",
            "Cannot complete login due to an incorrect user name or password.",
        ))
        .mount(&server)
        .await;
    let e = connect(&server, Duration::from_secs(5))
        .await
        .expect_err("bad login");
    assert_eq!(e.fault(), Some("InvalidLogin"));
}

#[test]
fn uuid_candidates_include_the_byte_swapped_form() {
    let c = uuid_candidates("  4221B4A2-5C3E-4F43-9A7B-0123456789AB ");
    assert_eq!(
        c,
        vec![
            "4221b4a2-5c3e-4f43-9a7b-0123456789ab".to_owned(),
            "a2b42142-3e5c-434f-9a7b-0123456789ab".to_owned()
        ]
    );
    assert!(uuid_candidates("").is_empty());
    assert_eq!(uuid_candidates("not-a-uuid").len(), 1);
}

#[test]
fn guest_net_skips_non_device_nics_and_link_local() {
    let val = xml::parse(
        r#"<val><GuestNicInfo><deviceConfigId>4000</deviceConfigId><ipAddress>10.0.0.5</ipAddress><ipAddress>fe80::1</ipAddress><ipAddress>fd00::5</ipAddress></GuestNicInfo><GuestNicInfo><deviceConfigId>-1</deviceConfigId><ipAddress>172.17.0.1</ipAddress></GuestNicInfo><GuestNicInfo><ipAddress>169.254.1.1</ipAddress><ipAddress>192.168.1.9</ipAddress></GuestNicInfo></val>"#,
    )
    .expect("xml");
    let ips: Vec<String> = guest_ips(&val).into_iter().map(|g| g.ip).collect();
    assert_eq!(ips, vec!["10.0.0.5", "fd00::5", "192.168.1.9"]);
}

#[test]
fn addresses_and_instance_type() {
    let info = VmInfo {
        ips: vec![GuestIp {
            ip: "10.0.0.5".into(),
            network: "VM Network".into(),
        }],
        host_name: "node-0".into(),
        num_cpu: 2,
        memory_mb: 4096,
        guest_id: "ubuntu64Guest".into(),
        ..VmInfo::default()
    };
    let addrs = node_addresses(&info, &config::NodeNetworks::default(), &[IpFamily::Ipv4])
        .expect("addresses");
    let a: Vec<(&str, &str)> = addrs
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(
        a,
        vec![
            ("InternalIP", "10.0.0.5"),
            ("ExternalIP", "10.0.0.5"),
            ("Hostname", "node-0")
        ]
    );
    assert_eq!(instance_type(&info), "vsphere-vm.cpu-2.mem-4gb.os-ubuntu");
}

#[test]
fn guest_ids_map_as_upstreams_lookup() {
    for (id, os) in [
        ("otherLinux64Guest", "linux"),
        ("other3xLinuxGuest", "linux"),
        ("genericLinuxGuest", "linux"),
        ("ubuntu64Guest", "ubuntu"),
        ("debian10_64Guest", "debian10"),
        ("centos7_64Guest", "centos7"),
        ("darwin16_64Guest", "darwin"),
        ("turboLinux64Guest", "turbolinux"),
        ("winNetWebGuest", "winnetweb"),
        ("windows9_64Guest", "windows9"),
        ("otherLinux64", "unknown"),
        ("", "unknown"),
    ] {
        assert_eq!(guest_os(id), os, "{id}");
    }
}

const DUAL: &[IpFamily] = &[IpFamily::Ipv4, IpFamily::Ipv6];

/// The addresses for upstream's default `ipFamily` (IPv4 only).
fn pairs(info: &VmInfo, nets: &config::NodeNetworks) -> Vec<(String, String)> {
    pairs_of(info, nets, &[IpFamily::Ipv4])
}

fn pairs_of(
    info: &VmInfo,
    nets: &config::NodeNetworks,
    families: &[IpFamily],
) -> Vec<(String, String)> {
    node_addresses(info, nets, families)
        .expect("an address of every family")
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect()
}

fn vm_with(ips: &[&str]) -> VmInfo {
    let on: Vec<(&str, &str)> = ips.iter().map(|ip| (*ip, "VM Network")).collect();
    vm_on(&on)
}

/// A VM whose NICs have these (IP, VM network) pairs.
fn vm_on(ips: &[(&str, &str)]) -> VmInfo {
    VmInfo {
        ips: ips
            .iter()
            .map(|(ip, network)| GuestIp {
                ip: ip.to_string(),
                network: network.to_string(),
            })
            .collect(),
        host_name: "node-0".into(),
        ..VmInfo::default()
    }
}

#[test]
fn guest_net_keeps_each_ips_network() {
    let val = xml::parse(
        r#"<val><GuestNicInfo><network>VM Network</network><deviceConfigId>4000</deviceConfigId><ipAddress>10.0.0.5</ipAddress></GuestNicInfo><GuestNicInfo><network>Internal K8s Traffic</network><deviceConfigId>4001</deviceConfigId><ipAddress>192.168.7.5</ipAddress></GuestNicInfo></val>"#,
    )
    .expect("xml");
    let got: Vec<(String, String)> = guest_ips(&val)
        .into_iter()
        .map(|g| (g.ip, g.network))
        .collect();
    assert_eq!(
        got,
        expect(&[
            ("10.0.0.5", "VM Network"),
            ("192.168.7.5", "Internal K8s Traffic")
        ])
    );
}

/// upstream nodemanager.go `discoverIPs`: subnets first, then the VM network names
/// (ignoring case), then the first IP for both.
#[test]
fn vm_network_names_pick_addresses_when_no_subnet_matches() {
    let vm = vm_on(&[
        ("10.0.0.5", "VM Network"),
        ("192.168.7.5", "internal k8s traffic"),
        ("203.0.113.9", "External/Outbound Traffic"),
    ]);
    let mut by_name = nets(&[], &[]);
    by_name.internal_vm_network_name = "Internal K8s Traffic".into();
    by_name.external_vm_network_name = "External/Outbound Traffic".into();
    assert_eq!(
        pairs(&vm, &by_name),
        expect(&[
            ("InternalIP", "192.168.7.5"),
            ("ExternalIP", "203.0.113.9"),
            ("Hostname", "node-0")
        ])
    );
    // A subnet match wins over the name.
    let mut both = nets(&["10.0.0.0/8"], &[]);
    both.internal_vm_network_name = "Internal K8s Traffic".into();
    both.external_vm_network_name = "External/Outbound Traffic".into();
    assert_eq!(
        pairs(&vm, &both),
        expect(&[
            ("InternalIP", "10.0.0.5"),
            ("ExternalIP", "203.0.113.9"),
            ("Hostname", "node-0")
        ])
    );
    // Only the internal name set and found: no ExternalIP (upstream logs a warning).
    let mut internal_only = nets(&[], &[]);
    internal_only.internal_vm_network_name = "Internal K8s Traffic".into();
    assert_eq!(
        pairs(&vm, &internal_only),
        expect(&[("InternalIP", "192.168.7.5"), ("Hostname", "node-0")])
    );
    // A name no NIC has: the first IP is both, as without any setting.
    let mut unknown = nets(&[], &[]);
    unknown.internal_vm_network_name = "nope".into();
    assert_eq!(
        pairs(&vm, &unknown),
        expect(&[
            ("InternalIP", "10.0.0.5"),
            ("ExternalIP", "10.0.0.5"),
            ("Hostname", "node-0")
        ])
    );
    // An excluded IP is not a candidate even on the named network.
    let mut excluded = by_name.clone();
    excluded.exclude_internal_subnets =
        vec![crate::controllers::route::Cidr::parse("192.168.0.0/16").expect("cidr")];
    assert_eq!(
        pairs(&vm, &excluded),
        expect(&[("ExternalIP", "203.0.113.9"), ("Hostname", "node-0")])
    );
}

fn nets(internal: &[&str], external: &[&str]) -> config::NodeNetworks {
    let cidrs = |l: &[&str]| {
        l.iter()
            .map(|c| crate::controllers::route::Cidr::parse(c).expect("cidr"))
            .collect()
    };
    config::NodeNetworks {
        internal_subnets: cidrs(internal),
        external_subnets: cidrs(external),
        ..Default::default()
    }
}

fn expect(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(t, a)| (t.to_string(), a.to_string()))
        .collect()
}

#[test]
fn without_subnets_the_first_ip_of_each_family_is_both_kinds() {
    let vm = vm_with(&["10.0.0.5", "192.168.1.9", "fd00::5", "fd00::6"]);
    assert_eq!(
        pairs_of(&vm, &config::NodeNetworks::default(), DUAL),
        expect(&[
            ("InternalIP", "10.0.0.5"),
            ("ExternalIP", "10.0.0.5"),
            ("InternalIP", "fd00::5"),
            ("ExternalIP", "fd00::5"),
            ("Hostname", "node-0"),
        ])
    );
}

#[test]
fn subnets_split_internal_and_external_addresses() {
    // External listed first on the NIC: the subnets, not the order, decide.
    let vm = vm_with(&["192.168.1.9", "10.0.0.5", "10.0.0.6", "fd00::5"]);
    let n = nets(&["10.0.0.0/8", "fd00::/8"], &["192.168.0.0/16"]);
    assert_eq!(
        pairs_of(&vm, &n, DUAL),
        expect(&[
            ("InternalIP", "10.0.0.5"),
            ("ExternalIP", "192.168.1.9"),
            // IPv6: an internal match only, so no IPv6 ExternalIP (upstream warns).
            ("InternalIP", "fd00::5"),
            ("Hostname", "node-0"),
        ])
    );
    // Only internal found: no ExternalIP at all.
    assert_eq!(
        pairs(&vm_with(&["10.0.0.5"]), &n),
        expect(&[("InternalIP", "10.0.0.5"), ("Hostname", "node-0")])
    );
    // Subnets match nothing: the family's first IP is both (upstream's default selection).
    assert_eq!(
        pairs(&vm_with(&["172.16.0.1", "172.16.0.2"]), &n),
        expect(&[
            ("InternalIP", "172.16.0.1"),
            ("ExternalIP", "172.16.0.1"),
            ("Hostname", "node-0"),
        ])
    );
    // Subnet order decides between two matching IPs.
    let ordered = nets(&["10.0.0.6/32", "10.0.0.0/8"], &[]);
    assert_eq!(
        pairs(&vm_with(&["10.0.0.5", "10.0.0.6"]), &ordered)[0],
        ("InternalIP".to_string(), "10.0.0.6".to_string())
    );
}

#[test]
fn exclude_subnets_keep_an_ip_out_of_one_kind() {
    let vm = vm_with(&["10.0.0.5", "10.1.0.5"]);
    let mut n = config::NodeNetworks {
        exclude_internal_subnets: vec![
            crate::controllers::route::Cidr::parse("10.0.0.0/16").expect("cidr"),
        ],
        ..Default::default()
    };
    // No subnets: the first non-excluded IP of each kind.
    assert_eq!(
        pairs(&vm, &n),
        expect(&[
            ("InternalIP", "10.1.0.5"),
            ("ExternalIP", "10.0.0.5"),
            ("Hostname", "node-0"),
        ])
    );
    // An excluded IP is never the match of an internal subnet containing it.
    n.internal_subnets = vec![crate::controllers::route::Cidr::parse("10.0.0.0/8").expect("cidr")];
    assert_eq!(
        pairs(&vm, &n)[0],
        ("InternalIP".to_string(), "10.1.0.5".to_string())
    );
}

#[test]
fn ip_families_pick_and_order_the_addresses() {
    let vm = vm_with(&["10.0.0.5", "fd00::5"]);
    let none = config::NodeNetworks::default();
    // Upstream's default, IPv4 only: the IPv6 address is not reported.
    assert_eq!(
        pairs(&vm, &none),
        expect(&[
            ("InternalIP", "10.0.0.5"),
            ("ExternalIP", "10.0.0.5"),
            ("Hostname", "node-0"),
        ])
    );
    assert_eq!(
        pairs_of(&vm, &none, &[IpFamily::Ipv6]),
        expect(&[
            ("InternalIP", "fd00::5"),
            ("ExternalIP", "fd00::5"),
            ("Hostname", "node-0"),
        ])
    );
    // The configured order, per family InternalIP then ExternalIP.
    assert_eq!(
        pairs_of(&vm, &none, &[IpFamily::Ipv6, IpFamily::Ipv4]),
        expect(&[
            ("InternalIP", "fd00::5"),
            ("ExternalIP", "fd00::5"),
            ("InternalIP", "10.0.0.5"),
            ("ExternalIP", "10.0.0.5"),
            ("Hostname", "node-0"),
        ])
    );
    // A configured family with neither address fails (upstream DiscoverNode).
    let v4_only = vm_with(&["10.0.0.5"]);
    assert_eq!(node_addresses(&v4_only, &none, DUAL), None);
    assert_eq!(node_addresses(&v4_only, &none, &[IpFamily::Ipv6]), None);
    // Every candidate of the family excluded from both kinds: the same.
    let all_excluded = config::NodeNetworks {
        exclude_internal_subnets: vec![
            crate::controllers::route::Cidr::parse("10.0.0.0/8").expect("cidr"),
        ],
        exclude_external_subnets: vec![
            crate::controllers::route::Cidr::parse("10.0.0.0/8").expect("cidr"),
        ],
        ..Default::default()
    };
    assert_eq!(
        node_addresses(&v4_only, &all_excluded, &[IpFamily::Ipv4]),
        None
    );
}

fn data(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn cred(user: &str, password: &str) -> credentials::Credential {
    credentials::Credential {
        user: user.into(),
        password: password.into(),
    }
}

/// upstream credentialmanager.go `parseConfig`: both key formats, one trailing newline
/// trimmed from the `<server>.` keys only, incomplete sets and unknown keys refused.
#[test]
fn secret_keys_in_both_formats() {
    let parsed = credentials::parse(&data(&[
        ("10.0.0.1.username", "admin\n"),
        ("10.0.0.1.password", "pw\n\n"),
        ("server_v6", "fd00::1"),
        ("username_v6", "u6\n"),
        ("password_v6", "p6"),
    ]))
    .expect("parse");
    assert_eq!(parsed.get("10.0.0.1"), Some(&cred("admin", "pw\n")));
    assert_eq!(parsed.get("fd00::1"), Some(&cred("u6\n", "p6")));
    assert_eq!(parsed.len(), 2);
    for (bad, why) in [
        (
            data(&[("server_a", "h"), ("username_a", "u")]),
            "password_a",
        ),
        (
            data(&[("username_a", "u"), ("password_a", "p")]),
            "server_a",
        ),
        (data(&[("server_", "h")]), "no identifier"),
        (
            data(&[("h.username", "u"), ("h.password", "p"), ("other", "x")]),
            "unknown key",
        ),
        (data(&[("h.username", "u")]), "missing for server h"),
        (
            data(&[("h.username", "u"), ("h.password", "\n")]),
            "missing for server h",
        ),
    ] {
        let e = credentials::parse(&bad).expect_err("must fail");
        assert!(e.contains(why), "{bad:?}: {e}");
    }
}

#[test]
fn secret_string_data_is_read_over_data() {
    let secret = k8s_openapi::api::core::v1::Secret {
        data: Some(
            [
                (
                    "h.username".to_owned(),
                    k8s_openapi::ByteString(b"u".to_vec()),
                ),
                (
                    "h.password".to_owned(),
                    k8s_openapi::ByteString(b"old".to_vec()),
                ),
            ]
            .into(),
        ),
        string_data: Some([("h.password".to_owned(), "new".to_owned())].into()),
        ..Default::default()
    };
    assert_eq!(
        credentials::secret_data(&secret),
        Ok(data(&[("h.username", "u"), ("h.password", "new")]))
    );
    let binary = k8s_openapi::api::core::v1::Secret {
        data: Some([("h.password".to_owned(), k8s_openapi::ByteString(vec![0xff]))].into()),
        ..Default::default()
    };
    assert!(credentials::secret_data(&binary).is_err());
}

/// A vCenter whose password can change: Login succeeds only with the current password and
/// starts a new session; FindByUuid answers only the current session.
#[derive(Clone, Default)]
struct RotatingVcenter {
    password: Arc<std::sync::Mutex<String>>,
    session: Arc<std::sync::Mutex<Option<String>>>,
    logins: Arc<AtomicUsize>,
}

impl RotatingVcenter {
    fn rotate(&self, password: &str) {
        *self.password.lock().expect("lock") = password.to_owned();
        *self.session.lock().expect("lock") = None;
    }
}

impl Respond for RotatingVcenter {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body = String::from_utf8_lossy(&req.body);
        if body.contains("<RetrieveServiceContent") {
            return ResponseTemplate::new(200).set_body_string(envelope(&format!(
                "<RetrieveServiceContentResponse xmlns=\"urn:vim25\">{SERVICE_CONTENT}</RetrieveServiceContentResponse>"
            )));
        }
        if body.contains("<Login ") {
            let expected = format!(
                "<password>{}</password>",
                self.password.lock().expect("lock")
            );
            if !body.contains(&expected) {
                return fault(
                    "InvalidLogin",
                    "Cannot complete login due to an incorrect user name or password.",
                );
            }
            let n = self.logins.fetch_add(1, Ordering::SeqCst) + 1;
            let cookie = format!("vmware_soap_session=\"s{n}\"");
            *self.session.lock().expect("lock") = Some(cookie.clone());
            return ResponseTemplate::new(200)
                .insert_header("set-cookie", format!("{cookie}; Path=/").as_str())
                .set_body_string(envelope(
                    "<LoginResponse xmlns=\"urn:vim25\"><returnval/></LoginResponse>",
                ));
        }
        let cookie = req
            .headers
            .get("cookie")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if cookie.is_none() || cookie != *self.session.lock().expect("lock") {
            return fault("NotAuthenticated", "The session is not authenticated.");
        }
        find_ok("vm-1")
    }
}

fn secret_config(server: &str) -> VsphereConfig {
    VsphereConfig::parse(&format!(
        "global:\n  secretName: creds\n  secretNamespace: ns\nvcenter:\n  vc:\n    server: {server}\n"
    ))
    .expect("config")
}

async fn serve_password(api: &MockServer, password: &str) {
    api.reset().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/namespaces/ns/secrets/creds"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "ns"},
            "stringData": {"vc.example.username": "u", "vc.example.password": password},
        })))
        .mount(api)
        .await;
}

fn uuid_node() -> Node {
    Node {
        status: Some(k8s_openapi::api::core::v1::NodeStatus {
            node_info: Some(k8s_openapi::api::core::v1::NodeSystemInfo {
                system_uuid: "4221b4a2-5c3e-4f43-9a7b-0123456789ab".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// connectionmanager.go `Connect`: a login refused with InvalidLogin reads the Secret
/// again, so a rotated password works without a restart.
#[tokio::test]
async fn rotated_secret_password_is_read_after_invalid_login() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let vcenter = MockServer::start().await;
    let vc = RotatingVcenter::default();
    vc.rotate("p1");
    Mock::given(method("POST"))
        .and(path("/sdk"))
        .respond_with(vc.clone())
        .mount(&vcenter)
        .await;
    let api = MockServer::start().await;
    serve_password(&api, "p1").await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("http");
    let (cloud, _) = Vsphere::with_http(secret_config("vc.example"), http, &vcenter.uri());
    cloud.initialize(
        kube::Client::try_from(kube::Config::new(api.uri().parse().expect("uri"))).expect("kube"),
    );
    let node = uuid_node();
    assert!(cloud.instance_exists(&node).await.expect("p1 works"));
    assert_eq!(vc.logins.load(Ordering::SeqCst), 1);

    // The password changes in vCenter and in the Secret; the session ends.
    vc.rotate("p2");
    serve_password(&api, "p2").await;
    // The client logs in again with what it had (p1): InvalidLogin, which drops the session.
    let e = cloud.instance_exists(&node).await.expect_err("p1 refused");
    assert!(e.to_string().contains("InvalidLogin"), "{e}");
    // The next lookup reads the Secret again.
    assert!(cloud.instance_exists(&node).await.expect("p2 works"));
    assert_eq!(vc.logins.load(Ordering::SeqCst), 2);
}

/// With file credentials a refused login is not retried with anything new: nothing is
/// dropped, and the next lookup answers the same way.
#[tokio::test]
async fn file_credentials_keep_the_session() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let vcenter = MockServer::start().await;
    let vc = RotatingVcenter::default();
    vc.rotate("p");
    Mock::given(method("POST"))
        .and(path("/sdk"))
        .respond_with(vc.clone())
        .mount(&vcenter)
        .await;
    let config = VsphereConfig::parse(
        "global:\n  user: u\n  password: p\nvcenter:\n  vc:\n    server: vc.example\n",
    )
    .expect("config");
    let http = reqwest::Client::builder().build().expect("http");
    let (cloud, _) = Vsphere::with_http(config, http, &vcenter.uri());
    assert!(cloud.instance_exists(&uuid_node()).await.expect("works"));
    assert!(cloud.instance_exists(&uuid_node()).await.expect("works"));
    assert_eq!(vc.logins.load(Ordering::SeqCst), 1);
}

#[test]
fn refused_credentials_are_invalid_login() {
    let fault = |fault: &str| ClientError::Fault {
        method: "Login".into(),
        fault: fault.into(),
        message: String::new(),
    };
    let http = |method: &str, status| ClientError::Http {
        method: method.into(),
        status,
        body: String::new(),
    };
    assert!(fault("InvalidLogin").invalid_login());
    assert!(http("vAPI session", 401).invalid_login());
    assert!(!fault("NotAuthenticated").invalid_login());
    assert!(!http("list-attached-tags", 401).invalid_login());
    assert!(!http("vAPI session", 503).invalid_login());
}
