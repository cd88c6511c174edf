//! Events as a Go `record.EventRecorder` writes them (client-go `tools/record`): core/v1
//! Events in the object's namespace (`default` for cluster-scoped objects such as Nodes),
//! named `<object>.<hex nanos>`, with `source.component` = the controller's name.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, PostParams};

/// `Normal` or `Warning`, as upstream's `v1.EventTypeNormal` / `v1.EventTypeWarning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The Event for `node` (which must have a name).
pub fn node_event(
    node: &Node,
    component: &str,
    kind: EventType,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Option<Event> {
    let involved = ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Node".to_owned()),
        name: Some(node.metadata.name.clone()?),
        uid: node.metadata.uid.clone(),
        ..Default::default()
    };
    Some(event_for(
        involved, "default", component, kind, reason, message, now,
    ))
}

/// The Event for `service` (which must have a name), in the Service's namespace.
pub fn service_event(
    service: &Service,
    component: &str,
    kind: EventType,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Option<Event> {
    let namespace = service
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let involved = ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Service".to_owned()),
        name: Some(service.metadata.name.clone()?),
        namespace: Some(namespace.clone()),
        uid: service.metadata.uid.clone(),
        resource_version: service.metadata.resource_version.clone(),
        ..Default::default()
    };
    Some(event_for(
        involved, &namespace, component, kind, reason, message, now,
    ))
}

/// Records an event about a Service; failures are logged, never fatal.
pub async fn record_service(
    client: &kube::Client,
    service: &Service,
    component: &str,
    kind: EventType,
    reason: &str,
    message: &str,
) {
    let Some(event) = service_event(service, component, kind, reason, message, Timestamp::now())
    else {
        return;
    };
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    let events: Api<Event> = Api::namespaced(client.clone(), &namespace);
    if let Err(e) = events.create(&PostParams::default(), &event).await {
        tracing::warn!(reason, "recording event failed: {e}");
    }
}

fn event_for(
    involved: ObjectReference,
    namespace: &str,
    component: &str,
    kind: EventType,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Event {
    let name = involved.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        involved_object: involved,
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        type_: Some(kind.as_str().to_owned()),
        source: Some(EventSource {
            component: Some(component.to_owned()),
            host: None,
        }),
        reporting_component: Some(component.to_owned()),
        reporting_instance: Some(String::new()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        ..Default::default()
    }
}

/// Records an event; failures are logged, never fatal (as with a Go recorder).
pub async fn record(
    events: &Api<Event>,
    node: &Node,
    component: &str,
    kind: EventType,
    reason: &str,
    message: &str,
) {
    let Some(event) = node_event(node, component, kind, reason, message, Timestamp::now()) else {
        return;
    };
    if let Err(e) = events.create(&PostParams::default(), &event).await {
        tracing::warn!(reason, "recording event failed: {e}");
    }
}
