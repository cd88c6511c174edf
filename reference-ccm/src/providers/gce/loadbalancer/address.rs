//! The regional static address of a load balancer: reserved while its forwarding rule is
//! (re)created, found by IP for a user-owned `spec.loadBalancerIP`, and a stale one of
//! this load balancer's name released (`ensureStaticIP`, `GetRegionAddressByIP`; the
//! deviation is described on `Gce::ensure_static_ip`).
//!
//! Exists apart because address handling is its own small protocol (reserve, conflict,
//! read back) that only the forwarding-rule path uses.

use serde_json::{Value, json};

use super::{ignore_not_found, lb_err, service_description, str_field};
use crate::cloud::LbError;
use crate::providers::gce::Gce;

impl Gce {
    /// `ensureStaticIP`: reserve (409/400 = it already existed), then read its address.
    ///
    /// One deviation: when the reservation of the forwarding rule's IP conflicts on the
    /// name and no address holds that IP, the address of this load balancer's name holds
    /// another one, reserved by an ensure that was cut off before its forwarding rule
    /// existed (a kill, a lost answer, a read of the new address that said "not found").
    /// Nothing uses it, so it is released and the rule's IP reserved again; upstream's
    /// `ensureStaticIP` answers "error getting static IP address" on every sync instead,
    /// and the load balancer can never be updated again (found by a heavy-fault soak).
    pub(super) async fn ensure_static_ip(
        &self,
        lb: &str,
        svc_name: &str,
        existing_ip: &str,
    ) -> Result<(String, bool), LbError> {
        match self.reserve_static_ip(lb, svc_name, existing_ip).await {
            Err(e)
                if !existing_ip.is_empty()
                    && self.release_stale_address(lb, existing_ip).await? =>
            {
                tracing::warn!(%lb, "released a stale address of this load balancer ({e}); reserving {existing_ip} again");
                self.reserve_static_ip(lb, svc_name, existing_ip).await
            }
            other => other,
        }
    }

    /// Releases the address named `lb` when it holds an IP other than `ip` and nothing
    /// uses it; whether it did.
    async fn release_stale_address(&self, lb: &str, ip: &str) -> Result<bool, LbError> {
        let Some(named) = self
            .client
            .get_opt(&self.region_path("addresses", lb))
            .await
            .map_err(lb_err)?
        else {
            return Ok(false);
        };
        let unused = named["users"].as_array().is_none_or(|u| u.is_empty());
        if str_field(&named, "address") == ip || !unused {
            return Ok(false);
        }
        ignore_not_found(self.client.delete(&self.region_path("addresses", lb)).await)
            .map_err(lb_err)?;
        Ok(true)
    }

    async fn reserve_static_ip(
        &self,
        lb: &str,
        svc_name: &str,
        existing_ip: &str,
    ) -> Result<(String, bool), LbError> {
        let mut address = json!({
            "name": lb,
            "description": service_description(svc_name),
            "networkTier": "PREMIUM",
        });
        if !existing_ip.is_empty() {
            address["address"] = json!(existing_ip);
        }
        let existed = match self
            .client
            .insert(
                &format!(
                    "{}/regions/{}/addresses",
                    self.config.project_id, self.config.region
                ),
                &address,
            )
            .await
        {
            Ok(()) => false,
            Err(e) if matches!(e.status(), Some(409 | 400)) => true,
            Err(e) => {
                return Err(LbError::Other(format!(
                    "failed to ensure a static IP for load balancer ({lb}): error creating gce static IP address: {e}"
                )));
            }
        };
        let found = if existing_ip.is_empty() {
            self.client
                .get(&self.region_path("addresses", lb))
                .await
                .map_err(lb_err)?
        } else {
            self.address_by_ip(existing_ip).await?.ok_or_else(|| {
                LbError::Other(format!(
                    "error getting static IP address {existing_ip}: not found"
                ))
            })?
        };
        Ok((str_field(&found, "address").to_owned(), existed))
    }

    /// `GetRegionAddressByIP`.
    pub(super) async fn address_by_ip(&self, ip: &str) -> Result<Option<Value>, LbError> {
        let list = self
            .client
            .list(
                &format!(
                    "{}/regions/{}/addresses",
                    self.config.project_id, self.config.region
                ),
                Some(&format!("address eq {ip}")),
            )
            .await
            .map_err(lb_err)?;
        Ok(list.into_iter().find(|a| str_field(a, "address") == ip))
    }
}
