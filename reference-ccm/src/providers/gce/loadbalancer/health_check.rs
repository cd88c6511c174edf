//! The legacy HTTP health check of a load balancer (`makeHTTPHealthCheck`,
//! `ensureHTTPHealthCheck`): 8 s interval, 1 s timeout, thresholds 1/3 (`gce.go`
//! `gceHc*`), created or, when drifted, PUT with larger existing values kept
//! (`mergeHTTPHealthChecks`).
//!
//! Exists apart so the check's shape and its drift rules sit together, away from the
//! pool and rule that use it. The check wanted ([`super::HealthCheck`]) is declared by
//! the load balancer, which builds it, so this file imports from there and not the other
//! way round.

use serde_json::{Value, json};

use super::{HealthCheck, int_field, lb_err, service_description, str_field};
use crate::cloud::LbError;
use crate::providers::gce::Gce;

const HC_INTERVAL: i64 = 8;

const HC_TIMEOUT: i64 = 1;

const HC_HEALTHY: i64 = 1;

const HC_UNHEALTHY: i64 = 3;

impl Gce {
    /// `makeHTTPHealthCheck` as JSON.
    fn health_check_object(hc: &HealthCheck) -> Value {
        json!({
            "name": hc.name,
            "port": hc.port,
            "requestPath": hc.path,
            "host": "",
            "description": service_description(&hc.name),
            "checkIntervalSec": HC_INTERVAL,
            "timeoutSec": HC_TIMEOUT,
            "healthyThreshold": HC_HEALTHY,
            "unhealthyThreshold": HC_UNHEALTHY,
        })
    }

    /// `ensureHTTPHealthCheck`: create, or PUT when drifted (larger existing intervals
    /// and thresholds kept, `mergeHTTPHealthChecks`); answers the check's selfLink.
    pub(super) async fn ensure_health_check(&self, hc: &HealthCheck) -> Result<String, LbError> {
        let path = self.global_path("httpHealthChecks", &hc.name);
        let mut want = Self::health_check_object(hc);
        let existing = self.client.get_opt(&path).await.map_err(lb_err)?;
        let current = match existing {
            None => {
                match self
                    .client
                    .insert(
                        &format!("{}/global/httpHealthChecks", self.config.project_id),
                        &want,
                    )
                    .await
                {
                    Err(e) if !e.is_already_exists() => return Err(lb_err(e)),
                    _ => {}
                }
                self.client.get(&path).await.map_err(lb_err)?
            }
            Some(have) => {
                let drifted = int_field(&have, "port") != hc.port
                    || str_field(&have, "requestPath") != hc.path
                    || str_field(&have, "description") != str_field(&want, "description")
                    || int_field(&have, "checkIntervalSec") < HC_INTERVAL
                    || int_field(&have, "timeoutSec") < HC_TIMEOUT
                    || int_field(&have, "unhealthyThreshold") < HC_UNHEALTHY
                    || int_field(&have, "healthyThreshold") < HC_HEALTHY;
                if !drifted {
                    have
                } else {
                    for k in [
                        "checkIntervalSec",
                        "timeoutSec",
                        "unhealthyThreshold",
                        "healthyThreshold",
                    ] {
                        let merged = int_field(&have, k).max(int_field(&want, k));
                        want[k] = json!(merged);
                    }
                    self.client.update(&path, &want).await.map_err(lb_err)?;
                    self.client.get(&path).await.map_err(lb_err)?
                }
            }
        };
        let link = str_field(&current, "selfLink");
        Ok(if link.is_empty() {
            self.client.url(&path)
        } else {
            link.to_owned()
        })
    }
}
