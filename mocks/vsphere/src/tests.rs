//! Router-level tests (`tower::ServiceExt::oneshot`): SOAP methods, faults and bad input,
//! sessions, vAPI tagging and the admin API.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine as _;
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::*;
use crate::testing::{Env, env, env_with, envelope};

/// The `xsi:type` of the fault in `detail`.
fn fault_type(body: &str) -> Option<&str> {
    let detail = &body[body.find("<detail>")?..];
    detail.split("xsi:type=\"").nth(1)?.split('"').next()
}

#[tokio::test]
async fn service_content_login_and_versions() {
    let e = env();
    let (s, b) = e
        .soap(None, r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        b.contains("<rootFolder type=\"Folder\">group-d1</rootFolder>"),
        "{b}"
    );
    assert!(b.contains("<apiType>VirtualCenter</apiType>"));
    let (s, _, b) = e
        .raw(
            Request::get("/sdk/vimServiceVersions.xml")
                .body(Body::empty())
                .expect("req"),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(b.contains("<namespaces version=\"1.0\">") && b.contains(API_VERSION));
    let key = e.login().await;
    let (s, b) = e
        .soap(Some(&key), r#"<RetrieveProperties xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>SessionManager</type><pathSet>currentSession</pathSet></propSet><objectSet><obj type="SessionManager">SessionManager</obj></objectSet></specSet></RetrieveProperties>"#)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        b.contains("xsi:type=\"UserSession\"") && b.contains("administrator@vsphere.local"),
        "{b}"
    );
    // Without a session the same read succeeds with the property unset (govmomi's check).
    let (s, b) = e
        .soap(None, r#"<RetrieveProperties xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>SessionManager</type><pathSet>currentSession</pathSet></propSet><objectSet><obj type="SessionManager">SessionManager</obj></objectSet></specSet></RetrieveProperties>"#)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(!b.contains("currentSession"), "{b}");
    // Logout ends the session.
    let (s, _) = e
        .soap(Some(&key), r#"<Logout xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this></Logout>"#)
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, b) = e
        .soap(Some(&key), r#"<FindByIp xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><ip>198.18.0.10</ip><vmSearch>true</vmSearch></FindByIp>"#)
        .await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(fault_type(&b), Some("NotAuthenticated"), "{b}");
}

/// The traversal govmomi's `Finder.DatacenterList` and CPV's VM listing do.
#[tokio::test]
async fn traversal_from_root_to_vms() {
    let e = env();
    let key = e.login().await;
    let call = r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet>
      <propSet><type>VirtualMachine</type><pathSet>name</pathSet><pathSet>summary.config.uuid</pathSet><pathSet>guest.net</pathSet><pathSet>runtime.powerState</pathSet></propSet>
      <propSet><type>Datacenter</type><all>true</all></propSet>
      <objectSet><obj type="Folder">group-d1</obj><skip>true</skip>
        <selectSet xsi:type="TraversalSpec"><name>folder</name><type>Folder</type><path>childEntity</path><skip>false</skip>
          <selectSet><name>folder</name></selectSet><selectSet><name>dcToVm</name></selectSet></selectSet>
        <selectSet xsi:type="TraversalSpec"><name>dcToVm</name><type>Datacenter</type><path>vmFolder</path><skip>true</skip>
          <selectSet><name>folder</name></selectSet></selectSet>
      </objectSet></specSet><options><maxObjects>4</maxObjects></options></RetrievePropertiesEx>"#;
    let (s, b) = e.soap(Some(&key), call).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // 2 datacenters + 3 VMs = 5 objects: 4 now and a token for the rest.
    assert_eq!(b.matches("<objects>").count(), 4, "{b}");
    assert!(
        b.contains(
            "<name>vmFolder</name><val type=\"Folder\" xsi:type=\"ManagedObjectReference\">"
        ),
        "{b}"
    );
    assert!(
        b.contains(
            "<val xsi:type=\"ArrayOfGuestNicInfo\"><GuestNicInfo xsi:type=\"GuestNicInfo\">"
        ),
        "{b}"
    );
    assert!(
        b.contains("<val xsi:type=\"VirtualMachinePowerState\">poweredOn</val>"),
        "{b}"
    );
    assert!(
        !b.contains("type=\"Folder\">group-v"),
        "skipped folders are not returned"
    );
    let token = b
        .split("<token>")
        .nth(1)
        .and_then(|t| t.split("</token>").next())
        .expect("token");
    let (s, b2) = e
        .soap(Some(&key), &format!(r#"<ContinueRetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><token>{token}</token></ContinueRetrievePropertiesEx>"#))
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b2.matches("<objects>").count(), 1, "{b2}");
    assert!(!b2.contains("<token>"));
    // A token is single use.
    let (s, b3) = e
        .soap(Some(&key), &format!(r#"<ContinueRetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><token>{token}</token></ContinueRetrievePropertiesEx>"#))
        .await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(fault_type(&b3), Some("InvalidArgument"));
    // An unknown property and an unknown object are faults.
    let (_, b) = e
        .soap(Some(&key), r#"<RetrieveProperties xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type><pathSet>bogus.path</pathSet></propSet><objectSet><obj type="VirtualMachine">vm-999</obj></objectSet></specSet></RetrieveProperties>"#)
        .await;
    assert_eq!(fault_type(&b), Some("ManagedObjectNotFound"), "{b}");
    let vm = e.vm("node-0");
    let (_, b) = e
        .soap(Some(&key), &format!(r#"<RetrieveProperties xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type><pathSet>bogus.path</pathSet></propSet><objectSet><obj type="VirtualMachine">{}</obj></objectSet></specSet></RetrieveProperties>"#, vm.id))
        .await;
    assert_eq!(fault_type(&b), Some("InvalidProperty"), "{b}");
}

#[tokio::test]
async fn search_index_is_scoped_to_the_datacenter() {
    let e = env();
    let key = e.login().await;
    let vm = e.vm("node-1");
    let find = |dc: String, uuid: String, instance: bool| {
        format!(
            r#"<FindByUuid xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><datacenter type="Datacenter">{dc}</datacenter><uuid>{uuid}</uuid><vmSearch>true</vmSearch><instanceUuid>{instance}</instanceUuid></FindByUuid>"#
        )
    };
    let (s, b) = e
        .soap(Some(&key), &find(e.dc(0), vm.uuid.to_uppercase(), false))
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        b.contains(&format!(
            "<returnval type=\"VirtualMachine\">{}</returnval>",
            vm.id
        )),
        "{b}"
    );
    let (_, b) = e
        .soap(Some(&key), &find(e.dc(1), vm.uuid.clone(), false))
        .await;
    assert!(
        !b.contains("<returnval"),
        "other datacenter must not find it: {b}"
    );
    let (_, b) = e
        .soap(Some(&key), &find(e.dc(0), vm.uuid.clone(), true))
        .await;
    assert!(
        !b.contains("<returnval"),
        "BIOS uuid is not an instance uuid: {b}"
    );
    let (_, b) = e
        .soap(Some(&key), &find(e.dc(0), vm.instance_uuid.clone(), true))
        .await;
    assert!(b.contains(&vm.id));
    let (_, b) = e
        .soap(
            Some(&key),
            &find("datacenter-999".into(), vm.uuid.clone(), false),
        )
        .await;
    assert_eq!(fault_type(&b), Some("ManagedObjectNotFound"));
    let (_, b) = e
        .soap(Some(&key), &format!(r#"<FindAllByDnsName xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><datacenter type="Datacenter">{}</datacenter><dnsName>NODE-1</dnsName><vmSearch>true</vmSearch></FindAllByDnsName>"#, e.dc(0)))
        .await;
    assert_eq!(b.matches("<returnval").count(), 1, "{b}");
    let ip = vm.ip_address.clone().expect("ip");
    let (_, b) = e
        .soap(Some(&key), &format!(r#"<FindByIp xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><ip>{ip}</ip><vmSearch>true</vmSearch></FindByIp>"#))
        .await;
    assert!(b.contains(&vm.id), "{b}");
}

/// A guest restart keeps the VM on, takes its NICs and IP out of `guest` while Tools are
/// down (hostName stays), refuses a second RebootGuest, and gives everything back.
#[tokio::test]
async fn guest_reboot_hides_guest_net_until_it_ends() {
    let e = env();
    let key = e.login().await;
    let vm = e.vm("node-0");
    let ip = vm.ip_address.clone().expect("ip");
    let guest = |vm_id: String| {
        let e = &e;
        let key = key.clone();
        async move {
            e.soap(Some(&key), &format!(r#"<RetrieveProperties xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type><pathSet>guest</pathSet><pathSet>runtime.powerState</pathSet></propSet><objectSet><obj type="VirtualMachine">{vm_id}</obj></objectSet></specSet></RetrieveProperties>"#))
                .await
                .1
        }
    };
    let before = guest(vm.id.clone()).await;
    assert!(
        before.contains(&format!("<ipAddress>{ip}</ipAddress>")),
        "{before}"
    );
    assert!(before.contains("guestToolsRunning"), "{before}");

    let (s, b) = e
        .soap(Some(&key), &format!(r#"<RebootGuest xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></RebootGuest>"#, vm.id))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert!(b.contains("<RebootGuestResponse"), "{b}");
    let during = guest(vm.id.clone()).await;
    assert!(
        !during.contains(&ip),
        "no guest IP while Tools are down: {during}"
    );
    assert!(during.contains("guestToolsNotRunning"), "{during}");
    assert!(during.contains("poweredOn"), "{during}");
    assert!(during.contains("<hostName>node-0</hostName>"), "{during}");
    let (_, b) = e
        .soap(Some(&key), &format!(r#"<FindByIp xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><ip>{ip}</ip><vmSearch>true</vmSearch></FindByIp>"#))
        .await;
    assert!(!b.contains(&vm.id), "FindByIp goes through Tools: {b}");
    let (s, b) = e
        .soap(Some(&key), &format!(r#"<RebootGuest xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></RebootGuest>"#, vm.id))
        .await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(fault_type(&b), Some("ToolsUnavailable"), "{b}");
    let info = e.vm("node-0");
    assert!(info.guest_restarting);
    assert_eq!(info.ip_address, None);
    assert_eq!(info.nics, vm.nics, "the VM's NICs themselves are unchanged");

    // It ends by itself after REBOOT_SECONDS.
    let deadline = Instant::now() + Duration::from_secs_f64(REBOOT_SECONDS + 10.0);
    loop {
        let now = guest(vm.id.clone()).await;
        if now.contains(&format!("<ipAddress>{ip}</ipAddress>")) {
            assert!(now.contains("guestToolsRunning"), "{now}");
            break;
        }
        assert!(Instant::now() < deadline, "still restarting: {now}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // ResetVM_Task: a task that succeeds, the guest restarting behind it; the admin holds
    // and releases a restart; a powered-off VM cannot be reset.
    let admin = Admin {
        shared: e.shared.clone(),
    };
    let (s, b) = e
        .soap(Some(&key), &format!(r#"<ResetVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></ResetVM_Task>"#, vm.id))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert!(b.contains("type=\"Task\""), "{b}");
    assert!(e.vm("node-0").guest_restarting);
    admin.finish_reboot(&vm.id).expect("finish");
    assert!(!e.vm("node-0").guest_restarting);
    let held = admin.reboot_vm(&vm.id, true).expect("reboot");
    assert!(held.guest_restarting && held.ip_address.is_none());
    assert_eq!(held.power_state, PowerState::PoweredOn);
    let done = admin.finish_reboot(&vm.id).expect("finish");
    assert_eq!(done.ip_address.as_deref(), Some(ip.as_str()));
    assert!(admin.finish_reboot(&vm.id).is_err(), "nothing to finish");
    admin
        .update_vm(
            &vm.id,
            VmPatch {
                power_state: Some(PowerState::PoweredOff),
                ..Default::default()
            },
        )
        .expect("off");
    assert!(admin.reboot_vm(&vm.id, false).is_err());
    let (s, b) = e
        .soap(Some(&key), &format!(r#"<RebootGuest xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></RebootGuest>"#, vm.id))
        .await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(fault_type(&b), Some("InvalidPowerState"), "{b}");
    let (_, b) = e
        .soap(Some(&key), &format!(r#"<ResetVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></ResetVM_Task>"#, vm.id))
        .await;
    let task = b
        .split("type=\"Task\">")
        .nth(1)
        .and_then(|t| t.split('<').next())
        .expect("task")
        .to_string();
    let (_, b) = e
        .soap(Some(&key), &format!(r#"<RetrieveProperties xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>Task</type><pathSet>info.state</pathSet></propSet><objectSet><obj type="Task">{task}</obj></objectSet></specSet></RetrieveProperties>"#))
        .await;
    assert!(b.contains(">error<"), "{b}");
}

#[tokio::test]
async fn power_tasks_and_filters() {
    let e = env();
    let key = e.login().await;
    let vm = e.vm("node-0");
    let (s, b) = e
        .soap(Some(&key), &format!(r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></PowerOffVM_Task>"#, vm.id))
        .await;
    assert_eq!(s, StatusCode::OK);
    let task = b
        .split("type=\"Task\">")
        .nth(1)
        .and_then(|t| t.split('<').next())
        .expect("task")
        .to_string();
    assert_eq!(e.vm("node-0").power_state, PowerState::PoweredOff);
    let (_, b) = e
        .soap(Some(&key), &format!(r#"<CreateFilter xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><spec><propSet><type>Task</type><all>true</all></propSet><objectSet><obj type="Task">{task}</obj></objectSet></spec><partialUpdates>true</partialUpdates></CreateFilter>"#))
        .await;
    let filter = b
        .split("type=\"PropertyFilter\">")
        .nth(1)
        .and_then(|t| t.split('<').next())
        .expect("filter")
        .to_string();
    let (_, b) = e
        .soap(Some(&key), r#"<WaitForUpdatesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><version></version></WaitForUpdatesEx>"#)
        .await;
    assert!(
        b.contains("<kind>enter</kind>") && b.contains("<state>success</state>"),
        "{b}"
    );
    assert_eq!(
        Admin {
            shared: e.shared.clone()
        }
        .leaks()
        .len(),
        1
    );
    let (s, _) = e
        .soap(Some(&key), &format!(r#"<DestroyPropertyFilter xmlns="urn:vim25"><_this type="PropertyFilter">{filter}</_this></DestroyPropertyFilter>"#))
        .await;
    assert_eq!(s, StatusCode::OK);
    // Powering off again: the task fails with InvalidPowerState, the VM is unchanged.
    let (_, b) = e
        .soap(Some(&key), &format!(r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></PowerOffVM_Task>"#, vm.id))
        .await;
    let task = b
        .split("type=\"Task\">")
        .nth(1)
        .and_then(|t| t.split('<').next())
        .expect("task")
        .to_string();
    let (_, b) = e
        .soap(Some(&key), &format!(r#"<Fetch xmlns="urn:vim25"><_this type="Task">{task}</_this><prop>info</prop></Fetch>"#))
        .await;
    assert!(
        b.contains("<state>error</state>") && b.contains("xsi:type=\"InvalidPowerState\""),
        "{b}"
    );
    let (_, b) = e
        .soap(Some(&key), r#"<PowerOnVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">vm-999</_this></PowerOnVM_Task>"#)
        .await;
    assert_eq!(fault_type(&b), Some("ManagedObjectNotFound"));
    assert!(
        Admin {
            shared: e.shared.clone()
        }
        .leaks()
        .is_empty()
    );
}

#[tokio::test]
async fn bad_input_gets_the_right_fault_and_changes_nothing() {
    let e = env();
    let key = e.login().await;
    let before = e.shared.inventory().clone();
    let post = |body: Vec<u8>, action: &str| {
        Request::post("/sdk")
            .header("soapaction", action)
            .header(header::COOKIE, format!("vmware_soap_session=\"{key}\""))
            .body(Body::from(body))
            .expect("req")
    };
    let vm = e.vm("node-0");
    let power_off = envelope(&format!(
        r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></PowerOffVM_Task>"#,
        vm.id
    ));
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (b"<not xml".to_vec(), "urn:vim25/8.0.3.0", "InvalidRequest"),
        (power_off.replace("</soapenv:Body>", "").into_bytes(), "urn:vim25/8.0.3.0", "InvalidRequest"),
        (power_off.clone().into_bytes(), "urn:evil/1", "InvalidRequest"),
        (b"<a/>".to_vec(), "urn:vim25/8.0.3.0", "InvalidRequest"),
        (envelope("<Nope xmlns=\"urn:vim25\"/>").into_bytes(), "urn:vim25/8.0.3.0", "InvalidRequest"),
        (envelope(r#"<DestroyDatacenter_Task xmlns="urn:vim25"><_this type="Datacenter">datacenter-2</_this></DestroyDatacenter_Task>"#).into_bytes(), "urn:vim25/8.0.3.0", "MethodNotFound"),
        (envelope(r#"<FindByUuid xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><vmSearch>true</vmSearch></FindByUuid>"#).into_bytes(), "urn:vim25/8.0.3.0", "InvalidArgument"),
        (vec![b' '; BODY_LIMIT + 1], "urn:vim25/8.0.3.0", "InvalidRequest"),
    ];
    for (body, action, want) in cases {
        let (s, h, b) = e.raw(post(body, action)).await;
        assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR, "{want}: {b}");
        assert!(
            h.get(header::CONTENT_TYPE)
                .is_some_and(|v| v.to_str().is_ok_and(|v| v.starts_with("text/xml")))
        );
        assert!(b.contains("<faultcode>ServerFaultCode</faultcode>"), "{b}");
        assert_eq!(fault_type(&b), Some(want), "{b}");
    }
    // Unauthenticated and wrong-password calls.
    let (s, b) = e.soap(Some("forged"), &format!(r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></PowerOffVM_Task>"#, vm.id)).await;
    assert_eq!(
        (s, fault_type(&b)),
        (StatusCode::INTERNAL_SERVER_ERROR, Some("NotAuthenticated"))
    );
    let (_, b) = e
        .soap(None, r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>wrong</password></Login>"#)
        .await;
    assert_eq!(fault_type(&b), Some("InvalidLogin"));
    assert_eq!(*e.shared.inventory(), before, "nothing was applied");
    assert_eq!(e.shared.journal.count(|j| j.status == 500), 10);
}

#[tokio::test]
async fn idle_sessions_expire() {
    let e = env_with(Config {
        password: "pw".into(),
        session_idle_timeout: Duration::from_millis(50),
        ..Default::default()
    });
    let key = e.login().await;
    let call = r#"<FindByIp xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><ip>198.18.0.10</ip><vmSearch>true</vmSearch></FindByIp>"#;
    let (s, _) = e.soap(Some(&key), call).await;
    assert_eq!(s, StatusCode::OK);
    // Wait until the idle timeout has certainly passed (a condition, not a guess).
    let since = std::time::Instant::now();
    while since.elapsed() <= Duration::from_millis(60) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, b) = e.soap(Some(&key), call).await;
    assert_eq!(fault_type(&b), Some("NotAuthenticated"));
}

#[tokio::test]
async fn injected_faults_use_vim_envelopes() {
    let e = env();
    let key = e.login().await;
    e.shared.faults.add(mock_cloud::FaultJson {
        service: Some("vim".into()),
        path: Some("FindByIp".into()),
        status: 404,
        count: Some(1),
        ..Default::default()
    });
    let call = r#"<FindByIp xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><ip>198.18.0.10</ip><vmSearch>true</vmSearch></FindByIp>"#;
    let (s, b) = e.soap(Some(&key), call).await;
    assert_eq!(
        (s, fault_type(&b)),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            Some("ManagedObjectNotFound")
        )
    );
    let (s, _) = e.soap(Some(&key), call).await;
    assert_eq!(s, StatusCode::OK, "count 1 is used up");
    let entries = e.shared.journal.entries();
    let faulted: Vec<_> = entries.iter().filter(|j| j.fault.is_some()).collect();
    assert_eq!(faulted.len(), 1);
    assert_eq!(faulted[0].path, "/sdk/FindByIp");
    // The journal names the SOAP method as `operation` (what the harness reads).
    assert_eq!(faulted[0].operation.as_deref(), Some("FindByIp"));
    assert!(
        entries
            .iter()
            .filter(|j| j.service == "vim")
            .all(|j| j.operation.as_deref() == j.path.strip_prefix("/sdk/"))
    );
}

async fn vapi_call(
    e: &Env,
    method: &str,
    uri: &str,
    session: Option<&str>,
    body: &str,
) -> (StatusCode, serde_json::Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json");
    if let Some(s) = session {
        req = req.header(vapi::SESSION_HEADER, s);
    }
    let (s, _, b) = e
        .raw(req.body(Body::from(body.to_string())).expect("req"))
        .await;
    (
        s,
        serde_json::from_str(&b).unwrap_or(serde_json::Value::Null),
    )
}

#[tokio::test]
async fn vapi_rest_and_api_tagging() {
    let e = env();
    let basic = base64::engine::general_purpose::STANDARD.encode("administrator@vsphere.local:pw");
    let req = Request::post("/rest/com/vmware/cis/session")
        .header(header::AUTHORIZATION, format!("Basic {basic}"))
        .body(Body::empty())
        .expect("req");
    let (s, _, b) = e.raw(req).await;
    assert_eq!(s, StatusCode::OK);
    let v: serde_json::Value = serde_json::from_str(&b).expect("json");
    let token = v["value"].as_str().expect("token").to_string();
    let host = e.shared.inventory().datacenters[0].hosts[0].clone();
    let (s, v) = vapi_call(
        &e,
        "POST",
        "/rest/com/vmware/cis/tagging/tag-association?~action=list-attached-tags",
        Some(&token),
        &format!(r#"{{"object_id":{{"id":"{host}","type":"HostSystem"}}}}"#),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let tag = v["value"][0].as_str().expect("zone tag").to_string();
    let (_, v) = vapi_call(
        &e,
        "GET",
        &format!("/rest/com/vmware/cis/tagging/tag/id:{tag}"),
        Some(&token),
        "",
    )
    .await;
    assert_eq!(v["value"]["name"], "zone-a");
    let cat = v["value"]["category_id"].as_str().expect("cat").to_string();
    let (_, v) = vapi_call(
        &e,
        "GET",
        &format!("/rest/com/vmware/cis/tagging/category/id:{cat}"),
        Some(&token),
        "",
    )
    .await;
    assert_eq!(v["value"]["name"], "k8s-zone");
    // /api: session as a bare string, bare results.
    let req = Request::post("/api/session")
        .header(header::AUTHORIZATION, format!("Basic {basic}"))
        .body(Body::empty())
        .expect("req");
    let (s, _, b) = e.raw(req).await;
    assert_eq!(s, StatusCode::CREATED);
    let api_token: String = serde_json::from_str(&b).expect("string");
    let dc = e.dc(0);
    let (_, v) = vapi_call(
        &e,
        "POST",
        "/api/cis/tagging/tag-association?action=list-attached-tags",
        Some(&api_token),
        &format!(r#"{{"object_id":{{"id":"{dc}","type":"Datacenter"}}}}"#),
    )
    .await;
    let region = v[0].as_str().expect("region tag").to_string();
    let (_, v) = vapi_call(
        &e,
        "GET",
        &format!("/api/cis/tagging/tag/{region}"),
        Some(&api_token),
        "",
    )
    .await;
    assert_eq!(v["name"], "region-a");
    // Errors in each envelope.
    let (s, v) = vapi_call(&e, "GET", "/rest/com/vmware/cis/tagging/tag", None, "").await;
    assert_eq!(
        (s, v["type"].as_str()),
        (
            StatusCode::UNAUTHORIZED,
            Some("com.vmware.vapi.std.errors.unauthenticated")
        )
    );
    let (s, v) = vapi_call(&e, "GET", "/api/cis/tagging/tag/nope", Some(&api_token), "").await;
    assert_eq!(
        (s, v["error_type"].as_str()),
        (StatusCode::NOT_FOUND, Some("NOT_FOUND"))
    );
    let (s, _) = vapi_call(
        &e,
        "POST",
        "/api/cis/tagging/tag-association?action=list-attached-tags",
        Some(&api_token),
        "{bad",
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let req = Request::post("/api/session")
        .header(
            header::AUTHORIZATION,
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode("administrator@vsphere.local:no")
            ),
        )
        .body(Body::empty())
        .expect("req");
    assert_eq!(e.raw(req).await.0, StatusCode::UNAUTHORIZED);
    let (s, _) = vapi_call(&e, "DELETE", "/api/session", Some(&api_token), "").await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = vapi_call(&e, "GET", "/api/cis/tagging/tag", Some(&api_token), "").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(e.shared.journal.count(|j| j.service == "vapi") >= 10);
}

/// govmomi's `rest.Client.Session` (vapi/rest/client.go) asks
/// `POST /rest/com/vmware/cis/session?~action=get` (vSphere Automation API, `cis session
/// get`); the mock took every POST there for a login and answered 401, so govmomi reported
/// "no session". The answer is the session's user, `created_time` and
/// `last_accessed_time` (vAPI DateTime, ISO 8601 UTC with milliseconds).
#[tokio::test]
async fn vapi_session_get_reads_the_callers_session() {
    let e = env();
    let basic = base64::engine::general_purpose::STANDARD.encode("administrator@vsphere.local:pw");
    let req = Request::post("/rest/com/vmware/cis/session")
        .header(header::AUTHORIZATION, format!("Basic {basic}"))
        .body(Body::empty())
        .expect("req");
    let (s, _, b) = e.raw(req).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let v: serde_json::Value = serde_json::from_str(&b).expect("json");
    let token = v["value"].as_str().expect("token").to_string();
    for (uri, body_of) in [
        ("/rest/com/vmware/cis/session?~action=get", "/value"),
        ("/api/session", ""),
    ] {
        let method = if uri.starts_with("/rest") {
            "POST"
        } else {
            "GET"
        };
        let (s, v) = vapi_call(&e, method, uri, Some(&token), "").await;
        assert_eq!(s, StatusCode::OK, "{uri}: {v}");
        let session = v.pointer(body_of).expect("session");
        assert_eq!(session["user"], "administrator@vsphere.local", "{uri}");
        for key in ["created_time", "last_accessed_time"] {
            let t = session[key].as_str().unwrap_or_default();
            assert!(is_vapi_time(t), "{uri}: {key} {t:?}");
        }
    }
    // Without a session: 401 in the /rest envelope, not a login attempt.
    let (s, v) = vapi_call(
        &e,
        "POST",
        "/rest/com/vmware/cis/session?~action=get",
        None,
        "",
    )
    .await;
    assert_eq!(
        (s, v["type"].as_str()),
        (
            StatusCode::UNAUTHORIZED,
            Some("com.vmware.vapi.std.errors.unauthenticated")
        )
    );
    let (s, _) = vapi_call(
        &e,
        "POST",
        "/rest/com/vmware/cis/session?~action=nope",
        Some(&token),
        "",
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

/// `2026-01-02T03:04:05.678Z`: vAPI's DateTime, UTC to the millisecond.
fn is_vapi_time(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 24
        && t.ends_with('Z')
        && b[10] == b'T'
        && b[19] == b'.'
        && t[..19].parse::<jiff::civil::DateTime>().is_ok()
        && t[20..23].bytes().all(|c| c.is_ascii_digit())
}

#[tokio::test]
async fn admin_api_shapes_the_cloud_and_reports_leaks() {
    let e = env();
    let (s, v) = vapi_call(&e, "POST", "/admin/vms", None, r#"{"name":"extra","uuid":"4213C7A2-1111-2222-3333-444455556666","host_name":"extra","ips":["198.18.0.99"]}"#).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let id = v["id"].as_str().expect("id").to_string();
    assert_eq!(v["uuid"], "4213c7a2-1111-2222-3333-444455556666");
    let (s, v) = vapi_call(
        &e,
        "PATCH",
        &format!("/admin/vms/{id}"),
        None,
        r#"{"ips":["198.18.0.98"],"power_state":"poweredOff","host_name":null}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        (
            v["ip_address"].as_str(),
            v["power_state"].as_str(),
            v["host_name"].is_null()
        ),
        (Some("198.18.0.98"), Some("poweredOff"), true)
    );
    let (_, v) = vapi_call(&e, "GET", "/admin/leaks", None, "").await;
    assert_eq!(v["leaks"], serde_json::json!([format!("vm {id}")]));
    for (method, uri, body, want) in [
        (
            "POST",
            "/admin/vms",
            r#"{"name":"x","ips":["nope"]}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST",
            "/admin/vms",
            r#"{"name":"x","bogus":1}"#,
            StatusCode::BAD_REQUEST,
        ),
        ("POST", "/admin/vms", "{", StatusCode::BAD_REQUEST),
        ("PATCH", "/admin/vms/vm-999", "{}", StatusCode::NOT_FOUND),
        (
            "POST",
            "/admin/categories",
            r#"{"name":"k8s-zone"}"#,
            StatusCode::CONFLICT,
        ),
        (
            "POST",
            "/admin/tags",
            r#"{"category_id":"nope","name":"z"}"#,
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (s, v) = vapi_call(&e, method, uri, None, body).await;
        assert_eq!(s, want, "{method} {uri} {body}: {v}");
        assert!(v["error"].is_string());
    }
    let (s, _) = vapi_call(&e, "DELETE", &format!("/admin/vms/{id}"), None, "").await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, v) = vapi_call(&e, "GET", "/admin/leaks", None, "").await;
    assert_eq!(v["leaks"], serde_json::json!([]));
    let (s, _) = vapi_call(&e, "POST", "/admin/reset", None, "").await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, v) = vapi_call(&e, "GET", "/admin/vms", None, "").await;
    assert_eq!(v["vms"].as_array().map(Vec::len), Some(3));
}

mod fuzz {
    use proptest::prelude::*;

    use super::*;
    use crate::xml::Element;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// The XML parser never panics, whatever the bytes.
        #[test]
        fn xml_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = Element::parse(&bytes);
        }

        /// Envelope-shaped noise: mutated SOAP calls either succeed or get a typed fault,
        /// never a panic or a non-SOAP answer, and never change the inventory.
        #[test]
        fn soap_endpoint_answers_every_body(
            method in prop::sample::select(vec!["FindByUuid", "RetrieveProperties", "PowerOffVM_Task", "Login", "Fetch", "Bogus"]),
            junk in "[<>/a-zA-Z\"= &;:_-]{0,40}",
            cut in 0usize..400,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
            rt.block_on(async {
                let e = env();
                let before = e.shared.inventory().clone();
                let call = format!(r#"<{method} xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this>{junk}</{method}>"#);
                let mut body = envelope(&call);
                let keep = body.len().saturating_sub(cut);
                body.truncate(keep);
                let req = Request::post("/sdk").body(Body::from(body)).expect("req");
                let (s, _, b) = e.raw(req).await;
                prop_assert!(s == StatusCode::OK || (s == StatusCode::INTERNAL_SERVER_ERROR && b.contains("<faultcode>ServerFaultCode</faultcode>")), "{s}: {b}");
                prop_assert_eq!(&*e.shared.inventory(), &before);
                Ok(())
            })?;
        }
    }
}

mod round4 {
    //! Fault kinds, seed files, the task lifecycle and the WSDL.
    use super::*;
    use mock_cloud::{FaultJson as Rule, FaultKind, Mode};

    fn admin(e: &Env) -> Admin {
        Admin {
            shared: e.shared.clone(),
        }
    }

    fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
        s.split(start).nth(1)?.split(end).next()
    }

    fn fetch_task_state(task: &str) -> String {
        format!(
            r#"<RetrieveProperties xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>Task</type><pathSet>info.state</pathSet></propSet><objectSet><obj type="Task">{task}</obj></objectSet></specSet></RetrieveProperties>"#
        )
    }

    async fn power_off(e: &Env, key: &str, vm: &str) -> String {
        let (s, b) = e
            .soap(Some(key), &format!(r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></PowerOffVM_Task>"#))
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        between(&b, "type=\"Task\">", "<")
            .expect("task")
            .to_string()
    }

    #[tokio::test]
    async fn throttle_preset_answers_not_authenticated_for_one_method_and_resource() {
        let e = env();
        let key = e.login().await;
        let vm = e.vm("node-1").id;
        e.shared.faults.add(Rule {
            kind: Some(FaultKind::Throttle),
            operation: Some("Fetch".into()),
            resource: Some(vm.clone()),
            count: Some(1),
            ..Default::default()
        });
        let fetch = |id: &str| {
            format!(
                r#"<Fetch xmlns="urn:vim25"><_this type="VirtualMachine">{id}</_this><prop>name</prop></Fetch>"#
            )
        };
        let other = e.vm("node-0").id;
        let (s, _) = e.soap(Some(&key), &fetch(&other)).await;
        assert_eq!(s, StatusCode::OK, "another VM is not matched");
        let (s, b) = e.soap(Some(&key), &fetch(&vm)).await;
        assert_eq!(
            (s, fault_type(&b)),
            (StatusCode::INTERNAL_SERVER_ERROR, Some("NotAuthenticated")),
            "{b}"
        );
        let (s, _) = e.soap(Some(&key), &fetch(&vm)).await;
        assert_eq!(s, StatusCode::OK);
    }

    #[tokio::test]
    async fn reset_drops_the_connection_and_journals_status_zero() {
        let e = env();
        e.shared.faults.add(Rule {
            kind: Some(FaultKind::Reset),
            operation: Some("RetrieveServiceContent".into()),
            count: Some(1),
            ..Default::default()
        });
        let req = Request::post("/sdk")
            .body(Body::from(envelope(r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#)))
            .expect("req");
        let resp = e.router.clone().oneshot(req).await.expect("infallible");
        assert!(resp.into_body().collect().await.is_err(), "the body fails");
        let last = e.shared.journal.entries().pop().expect("journaled");
        assert_eq!(
            (last.path.as_str(), last.status),
            ("/sdk/RetrieveServiceContent", 0)
        );
    }

    #[tokio::test]
    async fn a_just_created_vm_is_not_found_within_the_window() {
        let e = env();
        let key = e.login().await;
        e.shared.faults.add(Rule {
            kind: Some(FaultKind::NotFoundAfterCreate),
            window_reads: Some(1),
            ..Default::default()
        });
        let vm = admin(&e)
            .create_vm(VmSpec {
                name: "late".into(),
                ..Default::default()
            })
            .expect("create")
            .id;
        let read = format!(
            r#"<RetrieveProperties xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type><pathSet>name</pathSet></propSet><objectSet><obj type="VirtualMachine">{vm}</obj></objectSet></specSet></RetrieveProperties>"#
        );
        let (s, b) = e.soap(Some(&key), &read).await;
        assert_eq!(fault_type(&b), Some("ManagedObjectNotFound"), "{s} {b}");
        assert!(b.contains(&format!(">{vm}</obj>")), "{b}");
        let (s, b) = e.soap(Some(&key), &read).await;
        assert_eq!(s, StatusCode::OK, "after one read it is visible: {b}");
        // A search for it misses while the window lasts (here: one read), then finds it.
        let a = admin(&e);
        a.reset();
        let key = e.login().await;
        e.shared.faults.add(Rule {
            kind: Some(FaultKind::NotFoundAfterCreate),
            window_reads: Some(1),
            ..Default::default()
        });
        let late = a
            .create_vm(VmSpec {
                name: "later".into(),
                ips: vec!["198.18.0.200".into()],
                ..Default::default()
            })
            .expect("create")
            .id;
        let find = r#"<FindByIp xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><ip>198.18.0.200</ip><vmSearch>true</vmSearch></FindByIp>"#;
        let (s, b) = e.soap(Some(&key), find).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert!(!b.contains("<returnval"), "hidden: {b}");
        let (_, b) = e.soap(Some(&key), find).await;
        assert!(b.contains(&format!(">{late}</returnval>")), "{b}");
        // Seeded VMs were never "created" and are never hidden.
        let seeded = e.vm("node-0").id;
        let (s, _) = e.soap(Some(&key), &read.replace(&vm, &seeded)).await;
        assert_eq!(s, StatusCode::OK);
    }

    #[tokio::test]
    async fn seed_file_adds_vms_tags_faults_and_lifecycle_and_reset_restores_them() {
        let json = br#"{
          "state": {
            "vms": [ { "name": "extra", "ips": ["198.18.0.77"] } ],
            "categories": [ { "name": "team", "cardinality": "MULTIPLE" } ],
            "tags": [ { "category": "team", "name": "blue" }, { "category": "k8s-zone", "name": "zone-c" } ],
            "attachments": [ { "category": "team", "tag": "blue", "object": "extra" } ]
          },
          "faults": [ { "operation": "FindByIp", "status": 503 } ],
          "lifecycle": { "types": { "poweroff": { "mode": "stuck" } } }
        }"#;
        let seed = SeedFile::parse(json, std::path::Path::new("s.json")).expect("seed");
        let e = env_with(Config {
            password: "pw".into(),
            seed,
            ..Default::default()
        });
        let a = admin(&e);
        let extra = a.vm_by_name("extra").expect("seeded VM");
        let blue = a
            .tags()
            .into_iter()
            .find(|t| t.name == "blue")
            .expect("tag");
        assert_eq!(a.attached_tags(&extra.id), vec![blue.id.clone()]);
        assert!(a.tags().iter().any(|t| t.name == "zone-c"));
        assert_eq!(e.shared.faults.list().len(), 1);
        assert!(a.leaks().is_empty(), "{:?}", a.leaks());
        a.reset();
        assert_eq!(
            e.shared.faults.list().len(),
            1,
            "reset re-applies the seed's rules"
        );
        assert!(a.vm_by_name("extra").is_some());
        let key = e.login().await;
        let task = power_off(&e, &key, &extra.id).await;
        let (_, b) = e.soap(Some(&key), &fetch_task_state(&task)).await;
        assert!(b.contains(">running<"), "stuck from the seed: {b}");
    }

    #[test]
    fn bad_seeds_are_refused() {
        for (json, want) in [
            (
                r#"{"state": {"vms": [{"name": "x", "ips": ["nope"]}]}}"#,
                "vm",
            ),
            (
                r#"{"state": {"tags": [{"category": "none", "name": "t"}]}}"#,
                "tag",
            ),
            (
                r#"{"state": {"attachments": [{"category": "k8s-zone", "tag": "zone-a", "object": "ghost"}]}}"#,
                "attachment",
            ),
            (
                r#"{"lifecycle": {"types": {"loadbalancer": {"mode": "stuck"}}}}"#,
                "lifecycle",
            ),
        ] {
            let seed =
                SeedFile::parse(json.as_bytes(), std::path::Path::new("s.json")).expect("parses");
            let err = build_shared(
                Config {
                    seed,
                    ..Default::default()
                },
                "https://x".into(),
            )
            .err()
            .expect("refused");
            assert!(err.to_string().contains(want), "{json}: {err}");
        }
        assert!(SeedFile::parse(br#"{"state": {"vmz": []}}"#, std::path::Path::new("s")).is_err());
    }

    #[tokio::test]
    async fn power_task_after_reads_and_error_modes() {
        let e = env();
        let key = e.login().await;
        let a = admin(&e);
        let vm = e.vm("node-0").id;
        let mut p = mock_cloud::Policies::default();
        p.by_type.insert("poweroff".into(), Mode::Reads { n: 2 });
        p.by_type.insert("poweron".into(), Mode::Error);
        a.set_task_policies(p);
        let task = power_off(&e, &key, &vm).await;
        for _ in 0..2 {
            let (_, b) = e.soap(Some(&key), &fetch_task_state(&task)).await;
            assert!(b.contains(">running<"), "{b}");
            assert_eq!(e.vm("node-0").power_state, PowerState::PoweredOn);
        }
        let (_, b) = e.soap(Some(&key), &fetch_task_state(&task)).await;
        assert!(b.contains(">success<"), "{b}");
        assert_eq!(e.vm("node-0").power_state, PowerState::PoweredOff);
        let (_, b) = e
            .soap(Some(&key), &format!(r#"<PowerOnVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></PowerOnVM_Task>"#))
            .await;
        let task = between(&b, "type=\"Task\">", "<")
            .expect("task")
            .to_string();
        let (_, b) = e
            .soap(Some(&key), &format!(r#"<RetrieveProperties xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>Task</type><pathSet>info</pathSet></propSet><objectSet><obj type="Task">{task}</obj></objectSet></specSet></RetrieveProperties>"#))
            .await;
        assert!(b.contains(">error<") && b.contains("SystemError"), "{b}");
        assert_eq!(e.vm("node-0").power_state, PowerState::PoweredOff);
    }

    #[tokio::test]
    async fn wait_for_updates_blocks_until_a_timed_task_finishes() {
        let e = env();
        let key = e.login().await;
        admin(&e).set_task_policies(mock_cloud::Policies::new(Mode::Seconds { t: 0.3 }));
        let task = power_off(&e, &key, &e.vm("node-2").id).await;
        let (_, b) = e
            .soap(Some(&key), &format!(r#"<CreateFilter xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><spec><propSet><type>Task</type><pathSet>info.state</pathSet></propSet><objectSet><obj type="Task">{task}</obj></objectSet></spec><partialUpdates>false</partialUpdates></CreateFilter>"#))
            .await;
        assert!(b.contains("PropertyFilter"), "{b}");
        let wait = |v: &str, max: &str| {
            format!(
                r#"<WaitForUpdatesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><version>{v}</version><options>{max}</options></WaitForUpdatesEx>"#
            )
        };
        let (_, b) = e.soap(Some(&key), &wait("", "")).await;
        assert!(
            b.contains("<kind>enter</kind>") && b.contains(">running<"),
            "{b}"
        );
        // Nothing changes within 0 s: an Ex call answers no update set.
        let (_, b) = e
            .soap(Some(&key), &wait("1", "<maxWaitSeconds>0</maxWaitSeconds>"))
            .await;
        assert!(!b.contains("<returnval>"), "{b}");
        let started = std::time::Instant::now();
        let (_, b) = e
            .soap(
                Some(&key),
                &wait("1", "<maxWaitSeconds>10</maxWaitSeconds>"),
            )
            .await;
        assert!(
            b.contains("<kind>modify</kind>") && b.contains(">success<"),
            "{b}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(e.vm("node-2").power_state, PowerState::PoweredOff);
    }

    #[tokio::test]
    async fn lifecycle_modes_over_the_admin_api() {
        let e = env();
        let put = |body: &str| {
            Request::put("/admin/lifecycle")
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .expect("req")
        };
        let (s, _, b) = e
            .raw(put(r#"{"types": {"poweroff": {"mode": "stuck"}}}"#))
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(
            admin(&e)
                .task_policies()
                .mode_for(&["poweroff", "task"], "vm-1"),
            Mode::Stuck
        );
        let (s, _, b) = e
            .raw(put(r#"{"types": {"loadbalancer": {"mode": "stuck"}}}"#))
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        let (s, _, b) = e.raw(put(r#"{"default": {"mode": "bogus"}}"#)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        let (s, _, b) = e
            .raw(
                Request::get("/admin/lifecycle")
                    .body(Body::empty())
                    .expect("req"),
            )
            .await;
        assert!(s.is_success() && b.contains("stuck"), "{s} {b}");
    }

    #[tokio::test]
    async fn wsdl_names_the_service_at_sdk() {
        let e = env();
        let (s, _, b) = e
            .raw(
                Request::get("/sdk/vimService.wsdl")
                    .body(Body::empty())
                    .expect("req"),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        assert!(b.contains("<service name=\"VimService\">"), "{b}");
        assert!(b.contains("location=\"https://127.0.0.1:1/sdk\""), "{b}");
    }
}
