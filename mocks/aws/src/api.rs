//! The single AWS endpoint: every query-protocol request arrives at `/`, passes the
//! request gate (`gate`: checked, classified, maybe faulted, journaled), then goes to
//! EC2, ELB or ELBv2 by its `Version` (ELB and ELBv2 share the SigV4 service name, so moto
//! dispatches the same way: `moto:moto/elb/urls.py`) and is answered in that service's
//! XML.

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::Shared;
use crate::error::{AwsError, Service};
use crate::gate::Prepared;
use crate::state;
use crate::xml::document;
use crate::{ec2, elb, elbv2};

fn success(service: Service, action: &str, request_id: &str, body: &str) -> Response {
    let root = format!("{action}Response");
    let inner = match service {
        Service::Ec2 => format!("<requestId>{request_id}</requestId>{body}"),
        Service::Elb | Service::Elbv2 => format!(
            "<{action}Result>{body}</{action}Result><ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        ),
    };
    (
        StatusCode::OK,
        [("content-type", "text/xml;charset=UTF-8")],
        document(&root, service.namespace(), &inner),
    )
        .into_response()
}

/// `/`: runs the call the gate prepared.
pub(crate) async fn endpoint(
    State(shared): State<Arc<Shared>>,
    Extension(p): Extension<Prepared>,
) -> Response {
    let (service, action, params) = (p.service, p.action.as_str(), &*p.params);
    let result: Result<String, AwsError> = (|| {
        let mut cloud = shared.cloud();
        let before: Vec<String> = if action == "RunInstances" {
            cloud.instances.iter().map(|i| i.id.clone()).collect()
        } else {
            Vec::new()
        };
        let body = match service {
            Service::Ec2 => ec2::handle(&mut cloud, action, params)?,
            Service::Elb => elb::handle(&mut cloud, action, params)?,
            Service::Elbv2 => elbv2::handle(&mut cloud, action, params)?,
        };
        // What was just created, for the engine's not-found-after-create window.
        if action == "RunInstances" {
            for i in cloud.instances.iter().filter(|i| !before.contains(&i.id)) {
                shared.faults.note_created(&i.id);
            }
        } else if action == "CreateLoadBalancer"
            && let Some(name) = params.get("LoadBalancerName").or(params.get("Name"))
        {
            shared.faults.note_created(name);
        }
        Ok(body)
    })();
    match result {
        Ok(body) => success(service, action, &p.request_id, &body),
        Err(e) => {
            tracing::debug!(service = service.name(), code = %e.code, "refused");
            e.render(service, &p.request_id)
        }
    }
}

/// Paths other than `/` and `/admin`: a 404 in EC2's envelope.
pub(crate) async fn not_found(uri: Uri) -> Response {
    AwsError::new(
        StatusCode::NOT_FOUND,
        "InvalidAction",
        format!("nothing is served at {}", uri.path()),
    )
    .render(Service::Ec2, &state::request_id())
}
