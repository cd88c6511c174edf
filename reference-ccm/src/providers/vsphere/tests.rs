//! Error paths of the SOAP client against wiremock: re-login on `NotAuthenticated`,
//! fault bodies, non-SOAP errors, timeouts; and the pure helpers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::client::{ClientError, MoRef, VsphereClient};
use super::*;

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
    assert_eq!(guest_ips(&val), vec!["10.0.0.5", "fd00::5", "192.168.1.9"]);
}

#[test]
fn addresses_and_instance_type() {
    let info = VmInfo {
        ips: vec!["10.0.0.5".into()],
        host_name: "node-0".into(),
        num_cpu: 2,
        memory_mb: 4096,
        guest_id: "ubuntu64Guest".into(),
        ..VmInfo::default()
    };
    let addrs = node_addresses(&info);
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
    assert_eq!(instance_type(&info), "vsphere-vm.cpu-2.mem-4gb.os-ubuntu64");
}
