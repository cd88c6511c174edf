//! The request gate: what happens to every request a mock answers, in one tower layer so
//! no handler can skip a step and every cloud does it in the same order:
//!
//! 1. classify the request ([`Gate::classify`]: service, operation, resource, what kind
//!    of call it is ([`CallKind`]), whether fault rules apply at all; the mock may read
//!    the body, and may answer right away, e.g. a missing token or a bad signature, which
//!    is then journaled like any answer);
//! 2. fault rules ([`Faults`], with the mock's throttling preset, [`Gate::throttle`]);
//! 3. the fault's latency;
//! 4. the fault's action: serve, drop the connection, answer an error
//!    ([`Gate::render_error`]) or "not found" ([`Gate::render_not_found`]) in the cloud's
//!    envelope;
//! 5. the inner service (the cloud's handlers), then [`Gate::served`] (e.g. note what a
//!    create made, for `not_found_after_create`);
//! 6. [`Gate::finish`] on every answer (e.g. a request-id header);
//! 7. the data plane wake-up ([`Wake`], when the call may change what it serves);
//! 8. the journal entry, with the operation, resource and kind from step 1 (the kind as
//!    [`Gate::journal_kind`] settles it once the status is known; a dropped connection
//!    has no status: the journal says 0).
//!
//! A mock implements [`Gate`] and mounts `GateLayer::new(gate)` on its router.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::Response;
use tower::{Layer, Service, ServiceExt};

use crate::faults::{FaultAction, Faults, FiredFault, RequestInfo, Throttle};
use crate::journal::{CallKind, Journal, Record};

/// What the gate knows about one request once the mock classified it.
#[derive(Debug, Clone, Default)]
pub struct Call<X = ()> {
    /// The journal's and fault rules' service (`"compute"`, `"ec2"`, `"vim"`, ...).
    pub service: String,
    /// The journal's method (the HTTP method, as a rule).
    pub method: String,
    /// The journal's path.
    pub path: String,
    /// The journal's query ("" when none).
    pub query: String,
    /// The cloud's operation (journaled; fault rules' `operation` matches it).
    pub operation: Option<String>,
    /// The resource the call is about (journaled; fault rules' `resource` matches it).
    pub resource: Option<String>,
    /// What the call is in the terms cases ask about (journaled; `Other` unless the mock
    /// says more).
    pub kind: CallKind,
    /// Whether fault rules apply (admin routes: no).
    pub gated: bool,
    /// The method fault rules see, when not `method` (AWS: `GET` for `Describe*`).
    pub fault_method: Option<String>,
    /// What fault rules' `path` regex is searched in, when not `path`.
    pub fault_path: Option<String>,
    /// Whether the answer may change what the data plane serves (wakes it).
    pub wakes: bool,
    /// Whatever else the mock wants to carry from classifying to rendering.
    pub extra: X,
}

impl<X> Call<X> {
    /// A call journaled as `service` with the request's own method, path and query, gated,
    /// waking nothing, with no operation or resource yet (the mock fills in the rest).
    pub fn new(
        service: impl Into<String>,
        method: &http::Method,
        uri: &http::Uri,
        extra: X,
    ) -> Self {
        Call {
            service: service.into(),
            method: method.to_string(),
            path: uri.path().to_string(),
            query: uri.query().unwrap_or("").to_string(),
            operation: None,
            resource: None,
            kind: CallKind::Other,
            gated: true,
            fault_method: None,
            fault_path: None,
            wakes: false,
            extra,
        }
    }

    /// The request as the fault engine sees it.
    pub fn request_info(&self) -> RequestInfo<'_> {
        RequestInfo {
            service: &self.service,
            method: self.fault_method.as_deref().unwrap_or(&self.method),
            path: self.fault_path.as_deref().unwrap_or(&self.path),
            operation: self.operation.as_deref(),
            resource: self.resource.as_deref(),
        }
    }
}

/// What [`Gate::classify`] decided.
pub enum Classified<X> {
    /// Go on: fault rules, then the inner service with this request.
    Pass(Call<X>, Request),
    /// Answer this now (no fault rules, no inner service); still finished and journaled.
    Answer(Call<X>, Response),
}

/// The data plane's wake-up: requests that may change what is served bump a revision
/// and notify the reconciler ([`crate::reconcile`]) waiting on it.
#[derive(Debug, Default)]
pub struct Wake {
    notify: tokio::sync::Notify,
    rev: AtomicU64,
}

impl Wake {
    pub fn new() -> Self {
        Self::default()
    }

    /// Something the data plane serves may have changed.
    pub fn changed(&self) {
        self.rev.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_one();
    }

    /// How many changes were announced so far (a planner compares it with the last plan).
    pub fn rev(&self) -> u64 {
        self.rev.load(Ordering::SeqCst)
    }

    /// Waits for the next [`Wake::changed`] (or one that came since the last wait).
    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

/// What a mock supplies to the gate (typically implemented by its shared state).
pub trait Gate: Send + Sync + 'static {
    /// Carried in [`Call::extra`] from classifying to rendering.
    type Extra: Send + Sync + 'static;

    fn faults(&self) -> &Faults;

    fn journal(&self) -> &Journal;

    /// The data plane's wake-up, if the mock has a data plane.
    fn wake(&self) -> Option<&Wake> {
        None
    }

    /// Classifies the request; may read the (size-limited) body and give the request
    /// back rebuilt, or answer it directly.
    fn classify(&self, req: Request) -> impl Future<Output = Classified<Self::Extra>> + Send;

    /// The cloud's throttling answer for a service (`throttle` rules).
    fn throttle(_service: &str) -> Throttle {
        Throttle::TOO_MANY_REQUESTS
    }

    /// Asks the fault engine about a call (override to ask differently, e.g. twice).
    fn check_faults(&self, call: &Call<Self::Extra>) -> Option<FiredFault> {
        self.faults()
            .check_throttled(&call.request_info(), Self::throttle)
    }

    /// An injected error in the cloud's envelope.
    fn render_error(
        &self,
        call: &Call<Self::Extra>,
        status: u16,
        code: Option<&str>,
        message: Option<&str>,
    ) -> Response;

    /// The cloud's "not found" for the call's resource (`not_found_after_create`).
    fn render_not_found(&self, call: &Call<Self::Extra>, fired: &FiredFault) -> Response {
        self.render_error(
            call,
            fired.status.unwrap_or(404),
            fired.code.as_deref(),
            fired.message.as_deref(),
        )
    }

    /// After the inner service answered (not for fault answers).
    fn served(
        &self,
        _call: &Call<Self::Extra>,
        response: Response,
    ) -> impl Future<Output = Response> + Send {
        std::future::ready(response)
    }

    /// Every answer, right before it is journaled.
    fn finish(&self, _call: &Call<Self::Extra>, _response: &mut Response) {}

    /// The kind journaled for the call once its answer's status is known (0 for a dropped
    /// connection): [`Call::kind`] unless the status tells more (an ARM PUT creates when
    /// it answers 201, and updates otherwise).
    fn journal_kind(&self, call: &Call<Self::Extra>, _status: u16) -> CallKind {
        call.kind
    }
}

/// The tower layer that puts a [`Gate`] in front of a router.
pub struct GateLayer<G> {
    gate: Arc<G>,
}

impl<G> Clone for GateLayer<G> {
    fn clone(&self) -> Self {
        Self {
            gate: self.gate.clone(),
        }
    }
}

impl<G> GateLayer<G> {
    pub fn new(gate: Arc<G>) -> Self {
        Self { gate }
    }
}

impl<G, S> Layer<S> for GateLayer<G> {
    type Service = GateService<G, S>;

    fn layer(&self, inner: S) -> Self::Service {
        GateService {
            gate: self.gate.clone(),
            inner,
        }
    }
}

/// The service [`GateLayer`] makes.
pub struct GateService<G, S> {
    gate: Arc<G>,
    inner: S,
}

impl<G, S: Clone> Clone for GateService<G, S> {
    fn clone(&self) -> Self {
        Self {
            gate: self.gate.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<G, S> Service<Request> for GateService<G, S>
where
    G: Gate,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let gate = self.gate.clone();
        // The clone may not be ready; take the one that was polled (tower's pattern).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move { Ok(run(gate, inner, req).await) })
    }
}

/// One request through every step (see the module docs).
pub async fn run<G, S>(gate: Arc<G>, inner: S, req: Request) -> Response
where
    G: Gate,
    S: Service<Request, Response = Response, Error = Infallible> + Send,
    S::Future: Send,
{
    let mut fault = None;
    let mut reset = false;
    let (call, mut response) = match gate.classify(req).await {
        Classified::Answer(call, response) => (call, response),
        Classified::Pass(call, req) => {
            let response = 'answer: {
                if call.gated
                    && let Some(fired) = gate.check_faults(&call)
                {
                    fault = Some(fired.rule_id);
                    if let Some(delay) = fired.latency {
                        tokio::time::sleep(delay).await;
                    }
                    match fired.action {
                        FaultAction::Serve => {}
                        FaultAction::Reset => {
                            reset = true;
                            break 'answer crate::serve::connection_reset();
                        }
                        FaultAction::Error => {
                            break 'answer gate.render_error(
                                &call,
                                fired.status.unwrap_or(500),
                                fired.code.as_deref(),
                                fired.message.as_deref(),
                            );
                        }
                        FaultAction::NotFound => {
                            break 'answer gate.render_not_found(&call, &fired);
                        }
                    }
                }
                let response = match inner.oneshot(req).await {
                    Ok(r) => r,
                    Err(never) => match never {},
                };
                gate.served(&call, response).await
            };
            (call, response)
        }
    };
    gate.finish(&call, &mut response);
    let status = if reset { 0 } else { response.status().as_u16() };
    if call.wakes
        && let Some(wake) = gate.wake()
    {
        wake.changed();
    }
    gate.journal().append(Record {
        service: &call.service,
        method: &call.method,
        path: &call.path,
        query: &call.query,
        status,
        fault,
        operation: call.operation.as_deref(),
        resource: call.resource.as_deref(),
        kind: gate.journal_kind(&call, status),
    });
    tracing::debug!(service = %call.service, method = %call.method, path = %call.path, status, "request");
    response
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use axum::Router;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    use http_body_util::BodyExt;

    use super::*;
    use crate::faults::Fault;
    use crate::journal::LbOp;

    /// A toy cloud: `/svc/<op>/<id>`, admin under `/admin`, token in `x-token`, errors
    /// as `{"code": .., "message": ..}`, the body's first line is the resource of a POST.
    #[derive(Default)]
    struct Toy {
        faults: Faults,
        journal: Journal,
        wake: Arc<Wake>,
    }

    impl Gate for Toy {
        type Extra = ();

        fn faults(&self) -> &Faults {
            &self.faults
        }

        fn journal(&self) -> &Journal {
            &self.journal
        }

        fn wake(&self) -> Option<&Wake> {
            Some(&self.wake)
        }

        async fn classify(&self, req: Request) -> Classified<()> {
            let (parts, body) = req.into_parts();
            let bytes = axum::body::to_bytes(body, 1024).await.unwrap_or_default();
            let path = parts.uri.path().to_string();
            let mut segments = path.split('/').skip(2);
            let operation = segments.next().map(str::to_string);
            let resource = segments
                .next()
                .map(str::to_string)
                .or_else(|| std::str::from_utf8(&bytes).ok().map(str::to_string))
                .filter(|r| !r.is_empty());
            let call = Call {
                operation,
                resource,
                gated: !path.starts_with("/admin"),
                wakes: parts.method != axum::http::Method::GET,
                kind: if parts.method == axum::http::Method::POST {
                    CallKind::LoadBalancer(LbOp::Create)
                } else {
                    CallKind::Other
                },
                ..Call::new("toy", &parts.method, &parts.uri, ())
            };
            if call.gated && parts.headers.get("x-token").is_none() {
                let refused = (StatusCode::UNAUTHORIZED, "no token").into_response();
                return Classified::Answer(call, refused);
            }
            Classified::Pass(call, Request::from_parts(parts, Body::from(bytes)))
        }

        fn throttle(_service: &str) -> Throttle {
            Throttle {
                status: 503,
                code: Some("SlowDown"),
                message: "slow down",
            }
        }

        fn render_error(
            &self,
            _call: &Call,
            status: u16,
            code: Option<&str>,
            message: Option<&str>,
        ) -> Response {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = serde_json::json!({"code": code, "message": message});
            (status, axum::Json(body)).into_response()
        }

        fn render_not_found(&self, call: &Call, _fired: &FiredFault) -> Response {
            let body = format!("no {}", call.resource.as_deref().unwrap_or("?"));
            (StatusCode::NOT_FOUND, body).into_response()
        }

        async fn served(&self, call: &Call, response: Response) -> Response {
            if call.method == "POST"
                && let Some(r) = &call.resource
            {
                self.faults.note_created(r);
            }
            response
        }

        fn finish(&self, _call: &Call, response: &mut Response) {
            response
                .headers_mut()
                .insert("x-request-id", axum::http::HeaderValue::from_static("r-1"));
        }

        /// A create only when it succeeded, as ARM's PUT.
        fn journal_kind(&self, call: &Call, status: u16) -> CallKind {
            match call.kind {
                CallKind::LoadBalancer(LbOp::Create) if status != 200 => {
                    CallKind::LoadBalancer(LbOp::OtherWrite)
                }
                kind => kind,
            }
        }
    }

    use axum::response::IntoResponse;

    fn router(toy: &Arc<Toy>) -> Router {
        Router::new()
            .route("/svc/{op}/{id}", get(|| async { "thing" }))
            .route("/svc/{op}", post(|body: String| async move { body }))
            .route("/admin/x", get(|| async { "admin" }))
            .layer(GateLayer::new(toy.clone()))
    }

    async fn send(
        router: &Router,
        method: &str,
        uri: &str,
        body: &str,
        token: bool,
    ) -> (StatusCode, String, Option<String>) {
        let mut req = Request::builder().method(method).uri(uri);
        if token {
            req = req.header("x-token", "t");
        }
        let req = req.body(Body::from(body.to_string())).expect("request");
        let resp = router.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        let id = resp
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned(), id)
    }

    #[tokio::test]
    async fn serves_and_journals_operation_and_resource() {
        let toy = Arc::new(Toy::default());
        let r = router(&toy);
        let (status, body, id) = send(&r, "GET", "/svc/things/t1?x=1", "", true).await;
        assert_eq!(
            (status, body.as_str(), id.as_deref()),
            (StatusCode::OK, "thing", Some("r-1"))
        );
        let e = &toy.journal.entries()[0];
        assert_eq!(
            (
                e.service.as_str(),
                e.method.as_str(),
                e.path.as_str(),
                e.query.as_str()
            ),
            ("toy", "GET", "/svc/things/t1", "x=1")
        );
        assert_eq!(e.operation.as_deref(), Some("things"));
        assert_eq!(e.resource.as_deref(), Some("t1"));
        assert_eq!((e.status, e.fault), (200, None));
        assert_eq!(e.kind, CallKind::Other);
    }

    #[tokio::test]
    async fn the_kind_from_classify_is_journaled_as_the_gate_settles_it() {
        let toy = Arc::new(Toy::default());
        let r = router(&toy);
        send(&r, "POST", "/svc/things", "t1", true).await;
        toy.faults.add(Fault::error(503).count(Some(1)));
        send(&r, "POST", "/svc/things", "t2", true).await;
        send(&r, "GET", "/admin/x", "", false).await;
        let kinds: Vec<CallKind> = toy.journal.entries().iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            vec![
                CallKind::LoadBalancer(LbOp::Create),
                CallKind::LoadBalancer(LbOp::OtherWrite),
                CallKind::Other
            ]
        );
    }

    #[tokio::test]
    async fn a_refusal_from_classify_is_journaled_and_skips_faults() {
        let toy = Arc::new(Toy::default());
        toy.faults.add(Fault::error(500));
        let r = router(&toy);
        let (status, body, id) = send(&r, "GET", "/svc/things/t1", "", false).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::UNAUTHORIZED, "no token")
        );
        assert_eq!(id.as_deref(), Some("r-1"));
        assert_eq!(toy.faults.list()[0].fired, 0);
        let e = &toy.journal.entries()[0];
        assert_eq!((e.status, e.fault), (401, None));
    }

    #[tokio::test]
    async fn error_and_throttle_render_in_the_envelope() {
        let toy = Arc::new(Toy::default());
        let id = toy.faults.add(
            Fault::error(502)
                .operation("things")
                .resource("t1")
                .code("Boom")
                .message("injected")
                .count(Some(1)),
        );
        toy.faults
            .add(Fault::throttle().resource("t2").count(Some(1)));
        let r = router(&toy);
        assert_eq!(
            send(&r, "GET", "/svc/things/t2x", "", true).await.0,
            StatusCode::OK
        );
        let (status, body, _) = send(&r, "GET", "/svc/things/t1", "", true).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert_eq!(body, r#"{"code":"Boom","message":"injected"}"#);
        let (status, body, _) = send(&r, "GET", "/svc/things/t2", "", true).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, r#"{"code":"SlowDown","message":"slow down"}"#);
        let entries = toy.journal.entries();
        assert_eq!((entries[1].status, entries[1].fault), (502, Some(id)));
        assert_eq!(
            send(&r, "GET", "/svc/things/t1", "", true).await.0,
            StatusCode::OK
        );
    }

    #[tokio::test]
    async fn admin_routes_are_not_faulted_but_journaled() {
        let toy = Arc::new(Toy::default());
        toy.faults.add(Fault::error(500));
        let r = router(&toy);
        let (status, body, _) = send(&r, "GET", "/admin/x", "", false).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "admin"));
        assert_eq!(toy.journal.entries()[0].path, "/admin/x");
    }

    #[tokio::test]
    async fn latency_delays_then_serves() {
        let toy = Arc::new(Toy::default());
        let id = toy.faults.add(Fault::latency(40).count(Some(1)));
        let r = router(&toy);
        let started = Instant::now();
        assert_eq!(
            send(&r, "GET", "/svc/a/b", "", true).await.0,
            StatusCode::OK
        );
        assert!(started.elapsed() >= Duration::from_millis(40));
        let e = &toy.journal.entries()[0];
        assert_eq!((e.status, e.fault), (200, Some(id)));
    }

    #[tokio::test]
    async fn reset_is_journaled_with_status_zero() {
        let toy = Arc::new(Toy::default());
        toy.faults.add(Fault::reset().count(Some(1)));
        let r = router(&toy);
        let req = Request::builder()
            .uri("/svc/a/b")
            .header("x-token", "t")
            .body(Body::empty())
            .expect("request");
        let resp = r.clone().oneshot(req).await.expect("infallible");
        assert!(resp.into_body().collect().await.is_err(), "the body fails");
        assert_eq!(toy.journal.entries()[0].status, 0);
    }

    #[tokio::test]
    async fn not_found_after_create_uses_the_served_hook_and_the_body() {
        let toy = Arc::new(Toy::default());
        toy.faults.add(Fault::not_found_after_create(None, Some(1)));
        let r = router(&toy);
        let (status, body, _) = send(&r, "POST", "/svc/things", "t9", true).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "t9"),
            "body given back"
        );
        let (status, body, _) = send(&r, "GET", "/svc/things/t9", "", true).await;
        assert_eq!((status, body.as_str()), (StatusCode::NOT_FOUND, "no t9"));
        assert_eq!(
            send(&r, "GET", "/svc/things/t9", "", true).await.0,
            StatusCode::OK
        );
    }

    #[tokio::test]
    async fn writes_wake_the_data_plane() {
        let toy = Arc::new(Toy::default());
        let r = router(&toy);
        send(&r, "GET", "/svc/a/b", "", true).await;
        assert_eq!(toy.wake.rev(), 0);
        send(&r, "POST", "/svc/things", "x", true).await;
        assert_eq!(toy.wake.rev(), 1);
        // The notification is kept for the next waiter.
        tokio::time::timeout(Duration::from_secs(1), toy.wake.notified())
            .await
            .expect("notified");
    }
}
